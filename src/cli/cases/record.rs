//! `dumpview cases record`: one case's replay_op.py output directory (run by hand) taken back
//! as a new attempt.

use std::path::{Path, PathBuf};

use super::super::{CliError, Conclusion};
use super::open;
use crate::model::cases::analysis::analyze;

/// The options of `cases record`.
#[derive(Debug, Clone, clap::Args)]
pub struct RecordArgs {
    /// The matrix.
    pub name: String,
    /// The case id (`dtype=bfloat16`).
    pub case: String,
    /// The directory replay_op.py wrote (`results/CASE` of `export-run`'s run.sh).
    pub result_dir: PathBuf,
}

impl RecordArgs {
    /// Files RESULT_DIR as a new attempt of CASE of the matrix NAME under `root`.
    ///
    /// # Errors
    /// As [`record`].
    pub fn run(&self, root: &Path, json: bool) -> Result<Conclusion, CliError> {
        record(root, &self.name, &self.case, &self.result_dir, json)
    }
}

/// `dumpview cases record`: files RESULT_DIR as a new attempt of CASE.
///
/// # Errors
/// As [`Matrix::record`].
pub fn record(
    root: &Path,
    name: &str,
    case: &str,
    from: &Path,
    json: bool,
) -> Result<Conclusion, CliError> {
    let matrix = open(root, name)?;
    let judged = matrix.record(case, from)?;
    let analysis = analyze(
        &matrix.plan,
        &matrix.plan_path().display().to_string(),
        &matrix.evidence(Some(&[case.to_string()])),
        Some(&[case.to_string()]),
    );
    let result = &analysis.cases[0];
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "case": case,
                "attempt": judged.attempt.number,
                "dir": judged.attempt.dir.display().to_string(),
                "result": result,
            }))?
        );
    } else {
        println!(
            "recorded {case} as attempt {} ({}): {} — {}",
            judged.attempt.number,
            judged.attempt.dir.display(),
            result.outcome,
            result.reason
        );
        if result.attempts.len() > 1 {
            println!(
                "{} attempts kept; the newest finished one decides",
                result.attempts.len()
            );
        }
    }
    Ok(Conclusion::Clean)
}
