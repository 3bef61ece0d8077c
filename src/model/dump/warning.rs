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

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.message)
    }
}
