//! `dumpview probe install DIR`: write the embedded capture probe and replay tool into a
//! package under test.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::CliError;
use crate::embedded::{PROBE_SOURCE, REPLAY_SOURCE};

/// The files written, in order: the probe (imported by the code under test) and the
/// single-operator replay tool (run next to the dump, see docs/replay.md).
const FILES: [(&str, &str); 2] = [
    ("dump_probe.py", PROBE_SOURCE),
    ("replay_op.py", REPLAY_SOURCE),
];

/// Writes `DIR/dump_probe.py` and `DIR/replay_op.py` and returns their paths. Never replaces
/// an existing file: when either exists, nothing is written.
///
/// # Errors
/// `DIR` missing or not a directory, one of the files already existing, or a write failing.
pub fn run(dir: &Path) -> Result<Vec<PathBuf>, CliError> {
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
    // Checked for both first, so a refusal leaves the directory as it was.
    for (name, _) in FILES {
        let path = dir.join(name);
        if path.symlink_metadata().is_ok() {
            return Err(already_exists(&path).into());
        }
    }
    let mut written = Vec::with_capacity(FILES.len());
    for (name, source) in FILES {
        let path = dir.join(name);
        // create_new still refuses a file that appeared since the check above.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => already_exists(&path),
                _ => format!("{}: cannot create: {e}", path.display()),
            })?;
        file.write_all(source.as_bytes())
            .map_err(|e| format!("{}: write failed: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

fn already_exists(path: &Path) -> String {
    format!(
        "{}: already exists; remove it first to install this version",
        path.display()
    )
}
