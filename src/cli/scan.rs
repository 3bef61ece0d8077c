//! `dumpview scan A...`: storage aliases first, then the first non-finite record, per window;
//! then the first non-finite across ranks and the replicated stages that differ across a group.

use std::path::PathBuf;

use super::{CliError, Conclusion, inputs::load_capture};
use crate::model::analysis::Analysis;
use crate::model::analysis::compare::Tolerances;
use crate::model::analysis::scan::WindowScan;
use crate::model::present;

/// Scans every window under `paths`; `Found` on a non-finite record, a stride conflict, a
/// replicated stage whose ranks disagree or a finding from one run.
///
/// # Errors
/// An input that cannot be loaded.
pub fn run(
    paths: &[PathBuf],
    attempts: &super::inputs::AttemptArgs,
    ignore: &super::inputs::IgnoreArgs,
    json: bool,
    tree: &super::tree::TreeArgs,
) -> Result<Conclusion, CliError> {
    let mut dump = load_capture(paths, attempts.side(0), json)?;
    ignore.apply(&mut dump)?;
    let analysis = Analysis::compute(&dump, None, &Tolerances::default());
    let scans = &analysis.scans_a;
    // One capture holds every rank of a group: its replicas can be checked without a second.
    let replicated = crate::model::analysis::replicated::check('a', &dump.windows);
    if tree.tree {
        super::tree::print_scan(tree, &dump, scans, json)?;
    } else if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "windows": scans,
                "across_ranks": analysis.ranks_a,
                "replicated": replicated,
                "single_run": analysis.single_run_a,
                "warnings": dump.warnings
            }))?
        );
    } else {
        for scan in scans {
            print!("{}", present::scan::text(scan));
        }
        print!("{}", present::scan::across_ranks_text(&analysis.ranks_a));
        for finding in &replicated {
            println!("REPLICATED TENSOR DIFFERS: {}", finding.describe());
        }
        print!("{}", present::scan::single_run_text(&analysis.single_run_a));
    }
    // A damaged input (records dropped, evidence refused) is something to look at too.
    let found = scans.iter().any(WindowScan::found_something)
        || !replicated.is_empty()
        || analysis.single_run_a.found_something()
        || crate::model::dump::any_lost(&dump.warnings);
    Ok(if found {
        Conclusion::Found
    } else {
        Conclusion::Clean
    })
}

/// The options of `dumpview scan`.
#[derive(Debug, Clone, clap::Args)]
pub struct ScanArgs {
    /// Manifest files or directories holding them (all ranks and windows).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub ignore: super::inputs::IgnoreArgs,
    #[command(flatten)]
    pub tree: super::tree::TreeArgs,
}

impl ScanArgs {
    /// Maps the inputs to local paths and scans them.
    ///
    /// # Errors
    /// As [`run`]; a remote input that cannot be read.
    pub fn run(&self, cx: &mut super::Context) -> Result<Conclusion, CliError> {
        run(
            &cx.sources.locals(&self.inputs)?,
            &cx.attempts,
            &self.ignore,
            cx.json,
            &self.tree,
        )
    }
}
