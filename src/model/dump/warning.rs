//! [`Warning`]: something the user should know about an input that still loaded.

use std::path::PathBuf;

/// Something the user should know about an input that still loaded: a truncated file, a
/// repeated key, evidence refused, an unreadable window beside readable ones.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Warning {
    /// The file it concerns.
    pub file: PathBuf,
    /// What is wrong and what was done about it, for people.
    pub message: String,
}

/// How the message of a [`Warning::unreadable_window`] starts.
pub const UNREADABLE_WINDOW: &str = "UNREADABLE WINDOW";

impl Warning {
    /// A file of a dump tree that could not be read as a window (the other windows loaded):
    /// shown as `UNREADABLE WINDOW path: cause`. Lost evidence: it counts as a finding.
    pub fn unreadable_window(file: &std::path::Path, cause: String) -> Warning {
        Warning {
            file: file.to_path_buf(),
            message: format!("{UNREADABLE_WINDOW}: {cause}"),
        }
    }
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
