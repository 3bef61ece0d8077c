//! [`Warning`]: something the user should know about an input that still loaded.

use std::path::{Path, PathBuf};

/// Whether a [`Warning`] means evidence was lost. The exit rule of every subcommand reads it:
/// lost evidence exits 1 like a finding, a note keeps 0 (README, "Exit status").
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// Something the input held could not be used: an unreadable or truncated file, a dropped
    /// record or field, a refused path, a record left unpaired because its key repeats.
    LostEvidence,
    /// Worth knowing, nothing lost: an older attempt ignored, the same input given twice, an
    /// empty capture.
    Note,
}

/// Something the user should know about an input that still loaded: a truncated file, a
/// repeated key, evidence refused, an unreadable window beside readable ones.
///
/// In `--json` output: `{"file": …, "message": …, "kind": "lost_evidence" | "note"}`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Warning {
    /// The file it concerns.
    pub file: PathBuf,
    /// What is wrong and what was done about it, for people.
    pub message: String,
    /// Whether evidence was lost (exit 1) or this is a note (exit unchanged).
    pub kind: WarningKind,
}

/// How the message of a [`Warning::unreadable_window`] starts.
pub const UNREADABLE_WINDOW: &str = "UNREADABLE WINDOW";

impl Warning {
    /// Evidence `file` held could not be used; `message` says what and what was done instead.
    pub fn lost(file: impl Into<PathBuf>, message: impl Into<String>) -> Warning {
        Warning {
            file: file.into(),
            message: message.into(),
            kind: WarningKind::LostEvidence,
        }
    }

    /// Something about `file` worth saying that loses nothing.
    pub fn note(file: impl Into<PathBuf>, message: impl Into<String>) -> Warning {
        Warning {
            file: file.into(),
            message: message.into(),
            kind: WarningKind::Note,
        }
    }

    /// A file of a dump tree that could not be read as a window (the other windows loaded):
    /// shown as `UNREADABLE WINDOW path: cause`. Lost evidence: it counts as a finding.
    pub fn unreadable_window(file: &Path, cause: String) -> Warning {
        Warning::lost(file, format!("{UNREADABLE_WINDOW}: {cause}"))
    }

    /// A window directory of the probe with evidence files but no manifest (a run stopped
    /// before `finish()`; [`crate::model::ingest::Found::unfinished`]). A note: the window's
    /// statistics were never written, so nothing that was written is lost, and its input sets
    /// can still be replayed.
    pub fn unfinished_window(dir: &Path) -> Warning {
        Warning::note(
            dir,
            "UNFINISHED WINDOW: input sets or tensors but no manifest.json (the run stopped before \
             finish(), or is still inside the window; its statistics are not written, its files \
             under inputs/ can be replayed)",
        )
    }

    /// True when evidence was lost: such a warning makes a subcommand exit 1.
    pub fn loses_evidence(&self) -> bool {
        self.kind == WarningKind::LostEvidence
    }
}

/// True when any of `warnings` lost evidence (the exit rule's second half).
pub fn any_lost<'w>(warnings: impl IntoIterator<Item = &'w Warning>) -> bool {
    warnings.into_iter().any(Warning::loses_evidence)
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self
            .message
            .strip_prefix(UNREADABLE_WINDOW)
            .and_then(|m| m.strip_prefix(": "))
        {
            Some(cause) => write!(f, "{UNREADABLE_WINDOW} {}: {cause}", self.file.display()),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}
