//! Finding the dump files under the inputs a user names.

use std::path::{Path, PathBuf};

use super::error::LoadError;
use crate::model::formats::{self, msprobe::MSPROBE_NAME, probe::MANIFEST_NAME};

/// The manifest files named by `inputs`, in a stable order.
///
/// A file is taken as it is, whatever its name; a directory is searched recursively for
/// the file names of every registered format ([`formats::file_names`]: `manifest.json`,
/// msprobe's `dump.json`; symbolic links
/// are not followed, so a loop cannot hang the search).
///
/// # Errors
/// A path that does not exist, or a directory without any manifest.
pub fn discover(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut files = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input).map_err(|e| LoadError::Input {
            path: input.clone(),
            problem: format!("cannot read: {e}"),
        })?;
        if meta.is_dir() {
            let before = files.len();
            find_manifests(input, &mut files).map_err(|e| LoadError::Input {
                path: input.clone(),
                problem: format!("cannot list: {e}"),
            })?;
            if files.len() == before {
                return Err(LoadError::Input {
                    path: input.clone(),
                    problem: format!(
                        "no {MANIFEST_NAME} (dumpview probe, windowed dump) or {MSPROBE_NAME} (msprobe) found in this directory or below it"
                    ),
                });
            }
            files[before..].sort();
        } else {
            files.push(input.clone());
        }
    }
    Ok(files)
}

fn find_manifests(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            find_manifests(&path, out)?;
        } else if kind.is_file()
            && formats::file_names().any(|name| entry.file_name() == name)
        {
            out.push(path);
        }
    }
    Ok(())
}

