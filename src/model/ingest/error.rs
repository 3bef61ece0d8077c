//! [`LoadError`]: why the inputs could not be loaded.

use std::path::PathBuf;

use crate::model::formats::{self, FormatError};

/// Why inputs could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file could not be read as a window of the format that claimed it.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A path that is neither a file nor a directory holding dump files.
    #[error("{path}: {problem}")]
    Input {
        /// The path as given.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
}

impl From<formats::probe::ManifestError> for LoadError {
    fn from(error: formats::probe::ManifestError) -> LoadError {
        LoadError::Format(error.into())
    }
}
