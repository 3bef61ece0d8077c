//! `dumpview summary FILE...` and the embedded-example default: what each window holds.

use std::path::Path;

use super::{CliError, Conclusion};
use crate::embedded::example_pairs;
use crate::model::analysis::Analysis;
use crate::model::analysis::compare::Tolerances;
use crate::model::analysis::summary::WindowSummary;
use crate::model::dump::{Dump, Warning, any_lost};

/// Summarises each window of `files` (any format the loader reads: probe manifests, msprobe
/// dump.json, windowed manifests, or directories of them); `Found` when any holds a
/// non-finite record or a load lost evidence (a warning: the file was truncated or damaged,
/// a record or field dropped, a path refused, a window unreadable), as for every subcommand.
///
/// # Errors
/// The first file that cannot be read or parsed, named in the message.
pub fn run(
    files: &[std::path::PathBuf],
    attempts: &super::inputs::AttemptArgs,
    json: bool,
) -> Result<Conclusion, CliError> {
    let mut summaries = Vec::new();
    let mut warnings = Vec::new();
    for file in files {
        let dump = super::inputs::load_capture(std::slice::from_ref(file), attempts.side(0), json)?;
        warnings.extend(dump.warnings.iter().cloned());
        let analysis = Analysis::compute(&dump, None, &Tolerances::default());
        for (window, scan) in dump.windows.iter().zip(&analysis.scans_a) {
            summaries.push(WindowSummary::of(
                window,
                scan,
                &window.source.display().to_string(),
            ));
        }
    }
    print(&summaries, &warnings, json)?;
    Ok(match outcome(&summaries) {
        Conclusion::Clean if any_lost(&warnings) => Conclusion::Found,
        found => found,
    })
}

/// Summarises the example pairs embedded in the binary, with each pair's known answer.
///
/// # Errors
/// Only if the embedded examples fail to parse, which the test-suite rules out.
pub fn run_embedded(json: bool) -> Result<Conclusion, CliError> {
    let mut all = Vec::new();
    let mut text = String::new();
    for pair in example_pairs() {
        let mut sides = Vec::new();
        for (source, bytes) in [&pair.a, &pair.b] {
            let window = crate::model::formats::probe::from_slice(bytes, Path::new(source))?;
            let dump = Dump {
                windows: vec![window],
                warnings: Vec::new(),
            };
            let analysis = Analysis::compute(&dump, None, &Tolerances::default());
            sides.push(WindowSummary::of(
                &dump.windows[0],
                &analysis.scans_a[0],
                source,
            ));
        }
        text.push_str(&format!(
            "== {}: {}\n",
            pair.name,
            pair.expected["description"].as_str().unwrap_or("")
        ));
        for side in &sides {
            text.push_str(&side.to_text());
            text.push('\n');
        }
        text.push_str(&format!(
            "  known answer: {}\n\n",
            known_answer(&pair.expected)
        ));
        all.push(serde_json::json!({"pair": pair.name, "sides": sides, "expected": pair.expected}));
    }
    if json {
        let document = serde_json::json!({"pairs": all, "warnings": []});
        println!("{}", serde_json::to_string_pretty(&document)?);
    } else {
        print!("{text}");
        println!("(embedded example dumps; `dumpview summary FILE...` reads your own manifests)");
    }
    Ok(Conclusion::Clean)
}

fn known_answer(expected: &serde_json::Value) -> String {
    let mut parts = Vec::new();
    for side in ["a", "b"] {
        if let Some(stage) = expected["first_nonfinite"][side].as_str() {
            parts.push(format!("first non-finite in {side} at {stage}"));
        }
    }
    if let Some(stage) = expected["first_divergence"].as_str() {
        parts.push(format!("first divergence at {stage}"));
    }
    if let Some(groups) = expected["alias_conflicts"]["b"]
        .as_array()
        .filter(|g| !g.is_empty())
    {
        parts.push(format!(
            "stride-conflicting aliases in b: {}",
            serde_json::Value::from(groups.clone())
        ));
    }
    if expected["missing_data"].as_bool() == Some(true) {
        parts.push(format!(
            "missing data: {} vs {} records",
            expected["record_counts"]["a"], expected["record_counts"]["b"]
        ));
    }
    if expected["agree"].as_bool() == Some(true) {
        parts.push("the sides agree within tolerance".to_string());
    }
    if parts.is_empty() {
        "(none stated)".to_string()
    } else {
        parts.join("; ")
    }
}

fn print(summaries: &[WindowSummary], warnings: &[Warning], json: bool) -> Result<(), CliError> {
    if json {
        let document = serde_json::json!({"windows": summaries, "warnings": warnings});
        println!("{}", serde_json::to_string_pretty(&document)?);
    } else {
        for s in summaries {
            println!("{}", s.to_text());
        }
    }
    Ok(())
}

fn outcome(summaries: &[WindowSummary]) -> Conclusion {
    if summaries.iter().any(|s| s.first_nonfinite.is_some()) {
        Conclusion::Found
    } else {
        Conclusion::Clean
    }
}

/// The options of `dumpview summary`.
#[derive(Debug, Clone, clap::Args)]
pub struct SummaryArgs {
    /// Manifest files (dump_probe.py, msprobe dump.json, windowed) or directories of them.
    #[arg(required = true)]
    pub files: Vec<std::path::PathBuf>,
}

impl SummaryArgs {
    /// Maps the files to local paths and summarises them.
    ///
    /// # Errors
    /// As [`run`]; a remote file that cannot be read.
    pub fn run(&self, cx: &mut super::Context) -> Result<Conclusion, CliError> {
        run(&cx.sources.locals(&self.files)?, &cx.attempts, cx.json)
    }
}
