//! `dumpview probe install DIR`: write the embedded capture probe into a package under test.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::CliError;
use crate::embedded::PROBE_SOURCE;

/// Writes `DIR/dump_probe.py` and returns its path. Never replaces an existing file.
///
/// # Errors
/// `DIR` missing or not a directory, the file already existing, or the write failing.
pub fn run(dir: &Path) -> Result<PathBuf, CliError> {
    if !dir.exists() {
        return Err(format!(
            "{}: does not exist (create the package directory first)",
            dir.display()
        )
        .into());
    }
    if !dir.is_dir() {
        return Err(format!("{}: not a directory", dir.display()).into());
    }
    let path = dir.join("dump_probe.py");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => {
                format!(
                    "{}: already exists; remove it first to install this version",
                    path.display()
                )
            }
            _ => format!("{}: cannot create: {e}", path.display()),
        })?;
    file.write_all(PROBE_SOURCE.as_bytes())
        .map_err(|e| format!("{}: write failed: {e}", path.display()))?;
    Ok(path)
}
