//! `cases plan --vs DUMP_B`: how the other capture compares with DUMP at the stage
//! ([`check`]), by dumpview diff's rule at its default tolerances (docs/diff.md), so that the
//! analysis can tell "operator passes, integration fails" from an operator bug.

use std::path::Path;

use super::plan::VsCheck;
use crate::model::analysis::compare::Tolerances;
use crate::model::analysis::diff::{self, DiffReport};
use crate::model::dump::Dump;

/// Compares `a` (DUMP) with `b` (the `--vs` capture) at the record `key` (`stage#N`) of the
/// window read from `a_window` (its manifest path as loaded). `vs` names B in the result.
pub fn check(a: &Dump, b: &Dump, a_window: &Path, key: &str, vs: &str) -> VsCheck {
    let report = diff::diff(&a.windows, &b.windows, &Tolerances::default());
    from_diff(&report, a_window, key, vs)
}

/// [`check`] on a diff already computed (the workbench's, under its tolerances): the window
/// read from `window` may be either side of `report`, and `vs` names the other side.
pub fn from_diff(report: &DiffReport, window: &Path, key: &str, vs: &str) -> VsCheck {
    let source = window.display().to_string();
    let mut out = VsCheck {
        dump: vs.to_string(),
        key: key.to_string(),
        paired: false,
        diverges: false,
        verdict: None,
        first_divergence: None,
        detail: String::new(),
    };
    let Some(window) = report
        .windows
        .iter()
        .find(|w| w.a.source == source || w.b.source == source)
    else {
        out.detail = format!(
            "no window of {vs} pairs with {source} (same rank, label, match and occurrence)"
        );
        return out;
    };
    out.first_divergence = window.first().map(|p| p.key.clone());
    let Some(pair) = window.pairs.iter().find(|p| p.key == key) else {
        let only_here = if window.a.source == source {
            &window.only_a
        } else {
            &window.only_b
        };
        out.detail = if only_here.iter().any(|k| k == key) {
            format!("{vs} has no record {key}: missing evidence")
        } else {
            format!("neither capture has a record {key} (the stage's output was not dumped)")
        };
        return out;
    };
    out.paired = true;
    out.diverges = pair.comparison.verdict.diverges();
    let verdict = serde_json::to_value(&pair.comparison.verdict)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_string))
        .unwrap_or_else(|| "unknown".into());
    out.detail = if out.diverges {
        format!(
            "{vs} diverges from DUMP at {key} ({verdict}); the window's first divergence is {}",
            out.first_divergence.as_deref().unwrap_or(key)
        )
    } else {
        format!("{vs} agrees with DUMP at {key} ({verdict})")
    };
    out.verdict = Some(verdict);
    out
}
