//! `dumpview vary A B C...`: per-stage run-to-run spread over repeated captures of one request.

use std::fmt::Write;
use std::path::PathBuf;

use super::{CliError, Outcome, inputs::load_capture};
use crate::model::analysis::vary::{VaryReport, vary};

/// Loads each capture and reports its variability; `Found` when a stage varies beyond `threshold`.
///
/// # Errors
/// Fewer than two captures, a negative threshold, or an input that cannot be loaded.
pub fn run(captures: &[PathBuf], threshold: f64, json: bool) -> Result<Outcome, CliError> {
    if captures.len() < 2 {
        return Err("vary needs at least two captures of the same request".into());
    }
    if !(threshold >= 0.0) {
        return Err("--threshold must be a non-negative number".into());
    }
    let mut loaded = Vec::new();
    for capture in captures {
        loaded.push(load_capture(std::slice::from_ref(capture), json)?.windows);
    }
    let report = vary(&loaded, threshold);
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(if report.found_something() {
        Outcome::Found
    } else {
        Outcome::Clean
    })
}

/// The text form: per rank, the first variable stage and the most variable stages.
pub fn render(report: &VaryReport) -> String {
    let mut out = String::new();
    for rank in &report.ranks {
        let _ = writeln!(
            out,
            "== rank {}: {} captures",
            rank.rank,
            rank.sources.len()
        );
        for source in &rank.sources {
            let _ = writeln!(out, "   {source}");
        }
        let partial = rank
            .stages
            .iter()
            .filter(|s| s.present_in < rank.sources.len())
            .count();
        if partial > 0 {
            let _ = writeln!(
                out,
                "coverage: {partial} stages are missing from some captures"
            );
        }
        match rank.first_variable {
            Some(i) => {
                let s = &rank.stages[i];
                let _ = writeln!(
                    out,
                    "first variable stage: {} (position {}): spread {:.3e} in {} (threshold {:e})",
                    s.key, s.position, s.variability, s.worst, report.threshold
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "first variable stage: none above {:e}",
                    report.threshold
                );
            }
        }
        let mut worst: Vec<_> = rank.stages.iter().filter(|s| s.variability > 0.0).collect();
        worst.sort_by(|a, b| b.variability.total_cmp(&a.variability));
        for s in worst.iter().take(5) {
            let _ = writeln!(
                out,
                "   {:<32} spread {:.3e} ({})",
                s.key, s.variability, s.worst
            );
        }
        out.push('\n');
    }
    out
}
