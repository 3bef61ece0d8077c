//! msprobe (MindStudio probe) dumps. TO BE WRITTEN.

use std::path::Path;

use super::load::{LoadError, Warning};
use super::manifest::Manifest;

/// Loads one msprobe `dump.json` (with the construct.json and stack.json beside it) as a
/// window.
///
/// # Errors
/// A message naming the file.
pub fn load_window(path: &Path, _bytes: &[u8]) -> Result<(Manifest, Vec<Warning>), LoadError> {
    Err(LoadError::Input {
        path: path.to_path_buf(),
        problem: "msprobe dumps are not read yet".into(),
    })
}
