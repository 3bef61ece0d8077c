//! `dumpview scan A...`: storage aliases first, then the first non-finite record, per window.

use std::path::PathBuf;

use super::{CliError, Outcome, inputs::load_capture};
use crate::model::analysis::Analysis;
use crate::model::analysis::compare::Tolerances;
use crate::model::analysis::scan::WindowScan;
use crate::model::present;

/// Scans every window under `paths`; `Found` on a non-finite record or a stride conflict.
///
/// # Errors
/// An input that cannot be loaded.
pub fn run(
    paths: &[PathBuf],
    attempts: &super::inputs::AttemptArgs,
    ignore: &super::inputs::IgnoreArgs,
    json: bool,
) -> Result<Outcome, CliError> {
    let mut dump = load_capture(paths, attempts.side(0), json)?;
    ignore.apply(&mut dump)?;
    let analysis = Analysis::compute(&dump, None, &Tolerances::default());
    let scans = &analysis.scans_a;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"windows": scans, "across_ranks": analysis.ranks_a, "warnings": dump.warnings})
            )?
        );
    } else {
        for scan in scans {
            print!("{}", present::scan::text(scan));
        }
        print!("{}", present::scan::across_ranks_text(&analysis.ranks_a));
    }
    // A damaged input (records dropped, evidence refused) is something to look at too.
    let found = scans.iter().any(WindowScan::found_something)
        || crate::model::dump::any_lost(&dump.warnings);
    Ok(if found {
        Outcome::Found
    } else {
        Outcome::Clean
    })
}
