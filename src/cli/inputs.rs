//! Loading the command line's inputs: progress on stderr for slow loads, warnings printed once.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::model::dump::Dump;
use crate::model::ingest::{LoadError, Progress, load, same_input};

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

/// Loads the captures of a comparison, each as [`load_capture`], and notes on the later of
/// two that are one input ([`same_input`]: one path given twice, or identical records), so
/// that an agreement by construction is never printed as good news. The note is printed and
/// kept in that capture's warnings (the `--json` documents carry it).
///
/// # Errors
/// As [`load`], for the first capture that cannot be loaded.
pub fn load_captures(captures: &[PathBuf], json: bool) -> Result<Vec<Dump>, LoadError> {
    let mut dumps: Vec<Dump> = Vec::with_capacity(captures.len());
    for (i, path) in captures.iter().enumerate() {
        let mut dump = load_capture(std::slice::from_ref(path), json)?;
        let earlier = (0..i).find_map(|j| {
            same_input(
                std::slice::from_ref(&captures[j]),
                &dumps[j],
                std::slice::from_ref(path),
                &dump,
            )
            .map(|note| (j, note))
        });
        if let Some((j, mut note)) = earlier {
            note.message = if captures.len() > 2 {
                format!("captures {} and {}: {}", j + 1, i + 1, note.message)
            } else {
                format!("A and B: {}", note.message)
            };
            eprintln!("dumpview: warning: {note}");
            dump.warnings.push(note);
        }
        dumps.push(dump);
    }
    Ok(dumps)
}
