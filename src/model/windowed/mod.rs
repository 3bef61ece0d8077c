//! Windowed mega-kernel dumps (schemaVersion 4). TO BE WRITTEN.

use std::path::Path;

use super::load::{LoadError, Warning};
use super::manifest::Manifest;

/// Whether manifest bytes are a windowed dump's (`"schemaVersion"` in the header).
pub fn is_windowed(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(4096)];
    memchr::memmem::find(head, b"\"schemaVersion\"").is_some()
}

/// Loads one `rank_R/window_NNNN/manifest.json` as a window.
///
/// # Errors
/// A message naming the file.
pub fn load_window(path: &Path, _bytes: &[u8]) -> Result<(Manifest, Vec<Warning>), LoadError> {
    Err(LoadError::Input {
        path: path.to_path_buf(),
        problem: "windowed dumps are not read yet".into(),
    })
}
