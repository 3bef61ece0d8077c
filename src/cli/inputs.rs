//! Loading the command line's inputs: progress on stderr for slow loads, warnings printed once.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::model::dump::Dump;
use crate::model::ingest::{AttemptChoice, LoadError, Progress, load_attempt, same_input};

/// Which attempt of a window re-run into one dump directory to compare (docs/manifest.md,
/// "Attempts"): the newest unless asked.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
#[command(
    next_help_heading = "Attempts (of a window re-run into one dump directory; every subcommand)"
)]
pub struct AttemptArgs {
    /// Use attempt N of every window on both sides (a re-run into the same DUMP_PROBE_DIR
    /// writes `match1-occ1.2`, attempt 2); default: each window's newest attempt.
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub attempt: Option<u32>,
    /// Attempt N for capture A only (overrides --attempt).
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub attempt_a: Option<u32>,
    /// Attempt N for capture B only (overrides --attempt).
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub attempt_b: Option<u32>,
}

impl AttemptArgs {
    /// The attempt for the `index`-th capture (0 is A, 1 is B; later captures of `vary`
    /// follow `--attempt`).
    pub fn side(&self, index: usize) -> AttemptChoice {
        let specific = match index {
            0 => self.attempt_a,
            1 => self.attempt_b,
            _ => None,
        };
        specific
            .or(self.attempt)
            .map_or(AttemptChoice::Newest, AttemptChoice::Number)
    }
}

/// `--ignore REGEX` of scan, diff and report.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct IgnoreArgs {
    /// Leave stages whose name matches REGEX out of the search (uninitialized outputs of
    /// `empty`, receive buffers, masks); a note per window lists what was left out.
    #[arg(long, value_name = "REGEX")]
    pub ignore: Option<String>,
}

impl IgnoreArgs {
    /// Leaves the matching stages out of `dump` (nothing without `--ignore`).
    ///
    /// # Errors
    /// `--ignore` that is not a valid regular expression.
    pub fn apply(&self, dump: &mut Dump) -> Result<(), String> {
        let Some(pattern) = &self.ignore else {
            return Ok(());
        };
        let regex = regex::Regex::new(pattern)
            .map_err(|e| format!("--ignore {pattern:?} is not a valid regular expression: {e}"))?;
        let before = dump.warnings.len();
        dump.ignore_stages(&regex, pattern);
        for warning in &dump.warnings[before..] {
            eprintln!("dumpview: note: {warning}");
        }
        Ok(())
    }
}

/// A load slower than this shows progress (only on a terminal, never with `--json`).
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

/// Loads `paths` as one capture, keeping `attempt` of each window, printing progress and
/// warnings to stderr.
///
/// # Errors
/// As [`load_attempt`].
pub fn load_capture(
    paths: &[PathBuf],
    attempt: AttemptChoice,
    json: bool,
) -> Result<Dump, LoadError> {
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
    let dump = load_attempt(paths, attempt, &mut report)?;
    if shown {
        eprintln!();
    }
    for warning in &dump.warnings {
        eprintln!("dumpview: {}: {warning}", label(warning));
    }
    Ok(dump)
}

/// Loads the captures of a comparison, each as [`load_capture`], and notes on the later of
/// two that are one input ([`same_input`]: one path given twice, or identical records), so
/// that an agreement by construction is never printed as good news. The note is printed and
/// kept in that capture's warnings (the `--json` documents carry it).
///
/// # Errors
/// As [`load_attempt`], for the first capture that cannot be loaded.
pub fn load_captures(
    captures: &[PathBuf],
    attempts: &AttemptArgs,
    json: bool,
) -> Result<Vec<Dump>, LoadError> {
    let mut dumps: Vec<Dump> = Vec::with_capacity(captures.len());
    for (i, path) in captures.iter().enumerate() {
        let mut dump = load_capture(std::slice::from_ref(path), attempts.side(i), json)?;
        let earlier = (0..i).find_map(|j| {
            // One path read at two attempts is two inputs: only identical records are said.
            let same_attempt = attempts.side(i) == attempts.side(j);
            let paths = |k: usize| -> &[PathBuf] {
                if same_attempt {
                    std::slice::from_ref(&captures[k])
                } else {
                    &[]
                }
            };
            same_input(paths(j), &dumps[j], paths(i), &dump).map(|note| (j, note))
        });
        if let Some((j, mut note)) = earlier {
            note.message = if captures.len() > 2 {
                format!("captures {} and {}: {}", j + 1, i + 1, note.message)
            } else {
                format!("A and B: {}", note.message)
            };
            eprintln!("dumpview: {}: {note}", label(&note));
            dump.warnings.push(note);
        }
        dumps.push(dump);
    }
    Ok(dumps)
}

/// How stderr names a warning: `warning` for lost evidence, `note` for what loses nothing.
fn label(warning: &crate::model::dump::Warning) -> &'static str {
    if warning.loses_evidence() {
        "warning"
    } else {
        "note"
    }
}
