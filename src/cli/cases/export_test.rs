//! `dumpview cases export-test`: one case (the smallest failing one) as a standalone pytest
//! regression test, its inputs and the reference's outputs in .pt files beside it.

use std::path::{Path, PathBuf};

use super::super::{CliError, Conclusion};
use super::{analysis, open};
use crate::model::cases::export::{self, TestOutput, TestSpec};
use crate::model::cases::store::{INPUTS_FILE, RECORD_FILE};
use crate::model::present::cases as present;
use crate::model::tensor::DType;

/// The options of `cases export-test`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportTestArgs {
    /// The matrix.
    pub name: String,
    /// The case id.
    pub case: String,
    /// The test file (test_*.py); the .pt files go beside it.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
}

impl ExportTestArgs {
    /// Writes the test of CASE of the matrix NAME under `root`.
    ///
    /// # Errors
    /// As [`export_test`].
    pub fn run(&self, root: &Path) -> Result<Conclusion, CliError> {
        export_test(root, &self.name, &self.case, &self.output)
    }
}

/// The names and dtypes of a side's outputs as replay.json lists them.
fn layouts(record: &serde_json::Value, side: &str) -> Vec<(String, Option<DType>, usize)> {
    record["sides"][side]["output_layouts"]
        .as_array()
        .map(|outs| {
            outs.iter()
                .filter_map(|o| {
                    let name = o.get("name")?.as_str()?.to_string();
                    let dtype = o
                        .get("dtype")
                        .and_then(|d| d.as_str())
                        .and_then(DType::from_name);
                    let numel = o.get("shape").and_then(|s| s.as_array()).map_or(1, |s| {
                        s.iter().filter_map(|d| d.as_u64()).product::<u64>() as usize
                    });
                    Some((name, dtype, numel))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `mutated arguments q, k` → `[q, k]`.
fn outputs_from(record: &serde_json::Value, side: &str) -> Option<Vec<String>> {
    let text = record["sides"][side]["outputs_from"].as_str()?;
    let names = text.strip_prefix("mutated arguments ")?;
    Some(names.split(", ").map(str::to_string).collect())
}

/// A relative `file.py:function` made absolute when the file is there (the test runs from
/// anywhere); other specs as they are.
fn absolute_spec(spec: &str) -> String {
    if let Some((file, function)) = spec.rsplit_once(':')
        && (file.ends_with(".py") || file.contains('/'))
        && Path::new(file).is_relative()
        && Path::new(file).is_file()
        && let Ok(abs) = std::path::absolute(file)
    {
        return format!("{}:{function}", abs.display());
    }
    spec.to_string()
}

/// `dumpview cases export-test`.
///
/// # Errors
/// As [`Matrix::open`]; a case not in the plan or without a finished attempt holding
/// inputs.pt; a file that exists already (nothing is overwritten).
pub fn export_test(
    root: &Path,
    name: &str,
    case: &str,
    out: &Path,
) -> Result<Conclusion, CliError> {
    let matrix = open(root, name)?;
    let planned = matrix.plan.case(case).ok_or_else(|| {
        format!(
            "no case {case:?} in {} (its cases: {})",
            matrix.plan_path().display(),
            matrix.plan.ids().join(", ")
        )
    })?;
    let a = analysis(&matrix, Some(&[case.to_string()]));
    let result = &a.cases[0];
    let attempt = matrix
        .attempts(case)
        .into_iter()
        .rev()
        .find(|t| t.complete)
        .ok_or_else(|| {
            format!(
                "case {case} has no finished attempt to export ({})",
                result.reason
            )
        })?;
    let inputs = attempt.dir.join(INPUTS_FILE);
    if !inputs.is_file() {
        return Err(format!(
            "{}: missing: attempt {} of {case} was not run by replay_op.py --batch (rerun it with `dumpview cases run {name} --only {case} --rerun`)",
            inputs.display(),
            attempt.number
        )
        .into());
    }
    let record_path = attempt.dir.join(RECORD_FILE);
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&record_path)?)
        .map_err(|e| format!("{}: not JSON: {e}", record_path.display()))?;
    let candidate_ok = record["sides"]["candidate"]["status"].as_str() == Some("ok");
    let side = if candidate_ok {
        "candidate"
    } else {
        "reference_native"
    };
    let mut outputs = Vec::new();
    for (out_name, dtype, numel) in layouts(&record, side) {
        let dtype = dtype.ok_or_else(|| {
            format!(
                "{}: output {out_name}: a dtype dumpview cannot read",
                record_path.display()
            )
        })?;
        outputs.push(TestOutput {
            tolerance: export::tolerance(&matrix.plan.standard, dtype, numel),
            name: out_name,
            dtype,
        });
    }
    if outputs.is_empty() {
        return Err(format!(
            "{}: neither the candidate nor the reference in its dtype returned a tensor: nothing to compare",
            record_path.display()
        )
        .into());
    }
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .ok_or_else(|| format!("{}: not a file name", out.display()))?;
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let roles = matrix.plan.standard.reads();
    let mut files: Vec<(PathBuf, PathBuf)> =
        vec![(inputs.clone(), dir.join(format!("{stem}_inputs.pt")))];
    let mut expected = Vec::new();
    for role in roles {
        let from = attempt.dir.join(format!("{role}.pt"));
        if !from.is_file() {
            return Err(format!(
                "{}: missing: the {role} of attempt {} returned nothing",
                from.display(),
                attempt.number
            )
            .into());
        }
        let file = format!("{stem}_{role}.pt");
        files.push((from, dir.join(&file)));
        expected.push((role.to_string(), file));
    }
    if matrix.plan.candidate.starts_with("builtin:") {
        files.push((PathBuf::new(), dir.join("replay_op.py")));
    }
    for (_, to) in files
        .iter()
        .chain(std::iter::once(&(PathBuf::new(), out.to_path_buf())))
    {
        if to.symlink_metadata().is_ok() {
            return Err(format!("{}: exists (nothing is overwritten)", to.display()).into());
        }
    }
    let spec = TestSpec {
        plan: name.to_string(),
        case: case.to_string(),
        summary: format!(
            "Case {case} ({}) of input set {} of {}: {} in attempt {} under the {} standard: {}",
            plan_line(planned),
            matrix.plan.stage,
            matrix.plan.dump,
            result.outcome,
            attempt.number,
            matrix.plan.standard.describe(),
            result.reason
        ),
        candidate: absolute_spec(&matrix.plan.candidate),
        device: record["device"].as_str().unwrap_or("cpu").to_string(),
        call: record["sides"][side]["call"]
            .as_str()
            .or(record["call"].as_str())
            .unwrap_or("keywords")
            .to_string(),
        mode: record["case"]["mode"]
            .as_str()
            .unwrap_or("eager")
            .to_string(),
        outputs_from: outputs_from(&record, side),
        standard: matrix.plan.standard.name().to_string(),
        outputs,
        inputs_file: format!("{stem}_inputs.pt"),
        expected_files: expected,
    };
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    for (from, to) in &files {
        if to.file_name().is_some_and(|n| n == "replay_op.py") {
            std::fs::write(to, crate::embedded::REPLAY_SOURCE)?;
        } else {
            std::fs::copy(from, to)
                .map_err(|e| format!("{} -> {}: {e}", from.display(), to.display()))?;
        }
    }
    std::fs::write(out, export::pytest(&spec))?;
    println!(
        "wrote {} with {} ({}: {}); run: pytest {}",
        out.display(),
        files
            .iter()
            .map(|(_, to)| to
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned())
            .collect::<Vec<_>>()
            .join(", "),
        case,
        result.outcome,
        out.display()
    );
    Ok(Conclusion::Clean)
}

fn plan_line(case: &crate::model::cases::Case) -> String {
    present::transform_text(&case.transform)
}
