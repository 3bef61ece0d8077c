//! `dumpview vary A B C...`: per-stage run-to-run spread over repeated captures of one request.

use std::path::PathBuf;

use super::{CliError, Conclusion, inputs::load_captures};
use crate::model::analysis::vary::vary;
use crate::model::present;

/// Loads each capture and reports its variability; `Found` when a stage varies beyond `threshold`.
///
/// # Errors
/// Fewer than two captures, a negative threshold, or an input that cannot be loaded.
pub fn run(
    captures: &[PathBuf],
    threshold: f64,
    attempts: &super::inputs::AttemptArgs,
    json: bool,
) -> Result<Conclusion, CliError> {
    if captures.len() < 2 {
        return Err("vary needs at least two captures of the same request".into());
    }
    if threshold.is_nan() || threshold < 0.0 {
        return Err("--threshold must be a non-negative number".into());
    }
    let mut loaded = Vec::new();
    let mut warnings = Vec::new();
    for dump in load_captures(captures, attempts, json)? {
        warnings.extend(dump.warnings);
        loaded.push(dump.windows);
    }
    let report = vary(&loaded, threshold);
    if json {
        let document = super::WithWarnings {
            body: &report,
            warnings: &warnings,
        };
        println!("{}", serde_json::to_string_pretty(&document)?);
    } else {
        print!("{}", present::vary::text(&report));
    }
    Ok(
        if report.found_something() || crate::model::dump::any_lost(&warnings) {
            Conclusion::Found
        } else {
            Conclusion::Clean
        },
    )
}

/// The options of `dumpview vary`.
#[derive(Debug, Clone, clap::Args)]
pub struct VaryArgs {
    /// Two or more captures (manifest files or directories) of the same request.
    #[arg(required = true, num_args = 2..)]
    pub captures: Vec<PathBuf>,
    /// Spreads up to this (relative to each statistic's scale) are noise.
    #[arg(long, default_value_t = crate::model::analysis::vary::DEFAULT_THRESHOLD)]
    pub threshold: f64,
}

impl VaryArgs {
    /// Maps the captures to local paths and reports their variability.
    ///
    /// # Errors
    /// As [`run`]; a remote capture that cannot be read.
    pub fn run(&self, cx: &mut super::Context) -> Result<Conclusion, CliError> {
        run(
            &cx.sources.locals(&self.captures)?,
            self.threshold,
            &cx.attempts,
            cx.json,
        )
    }
}
