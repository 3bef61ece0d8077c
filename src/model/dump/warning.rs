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

/// How the message of a [`Warning::unfinished_window`] starts.
pub const UNFINISHED_WINDOW: &str = "UNFINISHED WINDOW";

/// What a probe window directory without `manifest.json` holds: a run that stopped (was
/// killed) after claiming the directory and before `finish()` wrote the manifest. Found by
/// ingest's discovery; said by [`Warning::unfinished_window`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnfinishedWindow {
    /// The window directory (`rank<R>/match<M>-occ<O>[.<N>]`).
    pub dir: PathBuf,
    /// The complete input-set files under `inputs/`, by stem (`stage#N`, or `stage#N.K` after
    /// a name collision), sorted: what `dumpview replay DIR --stage STEM` replays.
    pub input_sets: Vec<String>,
    /// How many complete files `tensors/` holds.
    pub tensor_files: usize,
    /// Writes cut off by the end of the run (`*.tmp.<pid>`: never published, incomplete),
    /// relative to `dir`, sorted.
    pub cut_off: Vec<PathBuf>,
}

/// How a window whose every file is a cut-off write ended: its files were written but none
/// was completed, most often because the disk filled up (the probe's exit report names the
/// error). Not "stopped before finish()": a `manifest.json.tmp.<pid>` there means finish() ran.
pub const WRITTEN_NOT_COMPLETED: &str = "written but not completed (the disk may have been full)";

/// How a window without a manifest that holds anything else (or nothing) ended.
pub const STOPPED_BEFORE_FINISH: &str =
    "the run stopped before finish(), or is still inside the window";

impl UnfinishedWindow {
    /// True when every file the window holds is a cut-off write (`*.tmp.<pid>`): at least
    /// one, and no complete input set or tensor file.
    pub fn only_cut_off(&self) -> bool {
        !self.cut_off.is_empty() && self.input_sets.is_empty() && self.tensor_files == 0
    }

    /// How the window ended, in words: [`WRITTEN_NOT_COMPLETED`] where every file is a cut-off
    /// write, else [`STOPPED_BEFORE_FINISH`].
    pub fn how_it_ended(&self) -> &'static str {
        if self.only_cut_off() {
            WRITTEN_NOT_COMPLETED
        } else {
            STOPPED_BEFORE_FINISH
        }
    }
}

/// Input-set stems a note names before it says "and N more".
const SETS_NAMED: usize = 3;

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

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

    /// A window directory of the probe without a manifest (a run stopped before `finish()`;
    /// [`crate::model::ingest::Found::unfinished`]), saying what it holds: complete input sets
    /// (and the `dumpview replay` command that replays them), complete tensor files, writes cut
    /// off, or nothing at all. A note, whatever it holds: the statistics were never written,
    /// and nothing complete that was written is dropped (a cut-off `.tmp` file never was
    /// complete).
    pub fn unfinished_window(window: &UnfinishedWindow) -> Warning {
        let mut message = format!(
            "{UNFINISHED_WINDOW}: no manifest.json ({}), so no statistics",
            window.how_it_ended()
        );
        let sets = &window.input_sets;
        if let Some(first) = sets.first() {
            let mut named = sets[..sets.len().min(SETS_NAMED)].join(", ");
            if sets.len() > SETS_NAMED {
                named += &format!(" and {} more", sets.len() - SETS_NAMED);
            }
            message += &format!(
                "; {} under inputs/ ({named}): `dumpview replay {} --stage {first} --candidate OP \
                 --reference REF` replays one (`--list` lists them; stage names are the file \
                 names', sanitised)",
                plural(sets.len(), "complete input set", "complete input sets"),
                window.dir.display()
            );
        }
        if window.tensor_files > 0 {
            message += &format!(
                "; {} under tensors/",
                plural(
                    window.tensor_files,
                    "complete tensor file",
                    "complete tensor files"
                )
            );
        }
        if !window.cut_off.is_empty() {
            let names: Vec<String> = window
                .cut_off
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            let how = if window.only_cut_off() {
                "never completed"
            } else {
                "the run was killed while writing"
            };
            message += &format!(
                "; {} ({}): {how} {}, incomplete, not usable",
                plural(names.len(), "cut-off write", "cut-off writes"),
                names.join(", "),
                if names.len() == 1 { "it" } else { "them" }
            );
        }
        if sets.is_empty() && window.tensor_files == 0 {
            message += if window.cut_off.is_empty() {
                "; it holds no file: the run claimed the directory and stopped before writing \
                 one, so there is nothing to read or replay"
            } else {
                "; nothing in it is complete, so there is no input set to replay"
            };
        }
        Warning::note(&window.dir, message)
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
