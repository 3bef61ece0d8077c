//! `dumpview cases plan|run|record|analyze|export-run|export-test`: the operator case matrix
//! (docs/cases.md, seed 002). One file per verb, each with its options and its `run`; this
//! one holds the options every verb shares, the dispatch and what several verbs read.

pub mod analyze;
pub mod export_run;
pub mod export_test;
pub mod plan;
pub mod record;
pub mod run;

use std::path::{Path, PathBuf};

use super::{CliError, Conclusion, Context};
use crate::model::cases::analysis::analyze;
use crate::model::cases::store::Matrix;
use crate::model::cases::{CasesAnalysis, create};

/// `dumpview cases`.
#[derive(Debug, Clone, clap::Args)]
pub struct CasesArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: CasesAction,
    /// The directory holding the case matrices [default: $DUMPVIEW_CASES_DIR, else
    /// .dumpview/cases in the current directory]; never inside a dump.
    #[arg(long, global = true, value_name = "DIR")]
    pub cases_dir: Option<PathBuf>,
}

impl CasesArgs {
    /// Runs the verb on the matrices under `--cases-dir`.
    ///
    /// # Errors
    /// The verb's.
    pub fn run(&self, cx: &mut Context) -> Result<Conclusion, CliError> {
        let root = cases_root(self.cases_dir.as_deref());
        match &self.action {
            CasesAction::Plan(args) => args.run(&root, cx),
            CasesAction::Run(args) => args.run(&root, cx),
            CasesAction::Record(args) => args.run(&root, cx.json),
            CasesAction::Analyze(args) => args.run(&root, cx.json),
            CasesAction::ExportRun(args) => args.run(&root),
            CasesAction::ExportTest(args) => args.run(&root),
        }
    }
}

/// The `cases` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum CasesAction {
    /// Plan a matrix on one captured input set: the baseline and one case per axis value.
    Plan(plan::PlanArgs),
    /// Run the planned cases through replay_op.py --batch (here, or on the dump's host) and
    /// record each as a new attempt. Exit 0 when every case passes, 1 when one does not.
    Run(run::RunArgs),
    /// Take back one case's replay_op.py output directory (run by hand) as a new attempt.
    Record(record::RecordArgs),
    /// Classify each case (pass, numerical mismatch, crash, unsupported combination,
    /// missing evidence), the axis the failures follow, the smallest failing case (Markdown;
    /// --json or -o x.json for JSON). Exit 0 when every case passes, 1 when one does not.
    Analyze(analyze::AnalyzeArgs),
    /// Write a self-contained bundle (replay_op.py, the baseline input set, plan.json,
    /// run.sh) to run the matrix by hand on another host.
    ExportRun(export_run::ExportRunArgs),
    /// Write one case (the smallest failing one) as a standalone pytest regression test,
    /// its inputs and the reference's outputs in .pt files beside it.
    ExportTest(export_test::ExportTestArgs),
}

/// The cases directory: `given`, else `$DUMPVIEW_CASES_DIR`, else `.dumpview/cases`.
pub fn cases_root(given: Option<&Path>) -> PathBuf {
    create::cases_root(given)
}

/// Opens the matrix NAME.
///
/// # Errors
/// As [`Matrix::open`].
pub fn open(root: &Path, name: &str) -> Result<Matrix, CliError> {
    Ok(Matrix::open(root, name)?)
}

/// The analysis of `matrix` (`only`: those cases).
pub fn analysis(matrix: &Matrix, only: Option<&[String]>) -> CasesAnalysis {
    analyze(
        &matrix.plan,
        &matrix.plan_path().display().to_string(),
        &matrix.evidence(only),
        only,
    )
}
