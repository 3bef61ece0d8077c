//! The loading gauge's words: what a load is doing, for the workbench.

use crate::model::ingest::{LoadPhase, Progress};

/// The loading gauge's fill (over both captures) and its label, naming the phase: finding the
/// files, reading A (then B) with its counts, analysing.
pub fn label(p: &Progress) -> (f64, String) {
    let captures = p.captures.max(1);
    let name = |c: usize| match (captures, c) {
        (1, _) => "the capture".to_string(),
        (_, 0) => "A".to_string(),
        (_, c) => format!("{}", (b'A' + c as u8) as char),
    };
    let of = |fraction: f64| (p.capture as f64 + fraction.clamp(0.0, 1.0)) / captures as f64;
    match p.phase {
        LoadPhase::Finding => (of(0.0), format!("finding {}'s manifests…", name(p.capture))),
        LoadPhase::Reading => {
            let fraction = if p.bytes_total > 0 {
                p.bytes_done as f64 / p.bytes_total as f64
            } else {
                0.0
            };
            (
                of(fraction),
                format!(
                    "reading {}: {}/{} files, {:.1}/{:.1} MB, {} records",
                    name(p.capture),
                    p.files_done,
                    p.files_total,
                    p.bytes_done as f64 / 1e6,
                    p.bytes_total as f64 / 1e6,
                    p.records
                ),
            )
        }
        LoadPhase::Analysing => (
            1.0,
            format!(
                "analysing {} records: scans, {}diagnosis",
                p.records,
                if captures > 1 { "diff, " } else { "" }
            ),
        ),
    }
}
