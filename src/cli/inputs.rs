//! Loading the command line's inputs: progress on stderr for slow loads, warnings printed once.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::model::dump::Dump;
use crate::model::ingest::{LoadError, Progress, load};

/// A load slower than this shows progress (only on a terminal, never with `--json`).
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

/// Loads `paths` as one capture, printing progress and warnings to stderr.
///
/// # Errors
/// As [`load`].
pub fn load_capture(paths: &[PathBuf], json: bool) -> Result<Dump, LoadError> {
    let show = !json && std::io::stderr().is_terminal();
    let start = Instant::now();
    let mut shown = false;
    let mut report = |p: Progress| {
        if show && start.elapsed() > PROGRESS_AFTER {
            shown = true;
            eprint!(
                "\rloading: {}/{} files, {:.1}/{:.1} MB, {} records",
                p.files_done,
                p.files_total,
                p.bytes_done as f64 / 1e6,
                p.bytes_total as f64 / 1e6,
                p.records
            );
            let _ = std::io::stderr().flush();
        }
    };
    let dump = load(paths, &mut report)?;
    if shown {
        eprintln!();
    }
    for warning in &dump.warnings {
        eprintln!("dumpview: warning: {warning}");
    }
    Ok(dump)
}
