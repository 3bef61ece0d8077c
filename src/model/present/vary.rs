//! The text of a variability report.

use std::fmt::Write;

use crate::model::analysis::vary::VaryReport;

/// The text form: per rank, the first variable stage and the most variable stages.
pub fn text(report: &VaryReport) -> String {
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
