//! The text of a diff: coverage, input identity and the first divergence, per rank.

use std::fmt::Write;

use crate::model::analysis::diff::{DiffReport, PairDiff, WindowDiff};

/// The text form of a diff.
pub fn text(report: &DiffReport) -> String {
    let mut out = String::new();
    for w in &report.windows {
        out.push_str(&render_window(w));
    }
    for (side, windows) in [("A", &report.unpaired_a), ("B", &report.unpaired_b)] {
        for w in windows.iter() {
            let _ = writeln!(
                out,
                "MISSING WINDOW: rank {} label {:?} (match {}, call {}) exists only in {side}: {}",
                w.rank, w.label, w.match_index, w.occurrence, w.source
            );
        }
    }
    if report.table.len() > 1 {
        match report.first_rank {
            Some(rank) => {
                let _ = writeln!(
                    out,
                    "ranks: rank {rank} diverges first (earliest in capture order)"
                );
            }
            None => out.push_str("ranks: no rank diverges\n"),
        }
    }
    out
}

fn render_window(w: &WindowDiff) -> String {
    use super::attempt_text;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "== rank {}: A {:?} (match {}, call {}{}, {} records) vs B {:?} (match {}, call {}{}, {} records)",
        w.rank,
        w.a.label,
        w.a.match_index,
        w.a.occurrence,
        attempt_text(w.a.attempt),
        w.a.records,
        w.b.label,
        w.b.match_index,
        w.b.occurrence,
        attempt_text(w.b.attempt),
        w.b.records
    );
    let _ = writeln!(out, "   A: {}\n   B: {}", w.a.source, w.b.source);
    let _ = writeln!(out, "input: {}", w.identity.describe());
    if !w.metadata_differences.is_empty() {
        let _ = writeln!(
            out,
            "configuration differs: {}",
            w.metadata_differences.join("; ")
        );
    }
    let _ = writeln!(
        out,
        "coverage: {} paired, {} only in A, {} only in B{}",
        w.pairs.len(),
        w.only_a.len(),
        w.only_b.len(),
        if w.only_a.is_empty() && w.only_b.is_empty() {
            ""
        } else {
            " (unpaired stages are missing evidence)"
        }
    );
    if let Some(message) = &w.missing_data {
        let _ = writeln!(out, "{message}");
    }
    if w.precision_changes > 0 {
        let _ = writeln!(
            out,
            "dtypes: {} paired records differ in precision only (compared by value)",
            w.precision_changes
        );
    }
    match w.first() {
        Some(pair) => out.push_str(&render_first(pair)),
        None if w.pairs.is_empty() => {
            out.push_str("first divergence: nothing paired, nothing compared\n")
        }
        None => {
            out.push_str("first divergence: none: every paired record agrees within tolerance\n")
        }
    }
    out.push_str(&render_nonfinite(w));
    let diverging = w
        .pairs
        .iter()
        .filter(|p| p.comparison.verdict.diverges())
        .count();
    if diverging > 1 {
        let _ = writeln!(
            out,
            "   ({diverging} of {} paired records diverge in all)",
            w.pairs.len()
        );
    }
    out.push('\n');
    out
}

/// The first non-finite record of each side: a finding whether or not the sides agree.
fn render_nonfinite(w: &WindowDiff) -> String {
    let at = |n: &crate::model::analysis::scan::NonFinite| {
        format!("{} (seq {}, {})", n.key, n.seq, n.counts_text())
    };
    match (&w.first_nonfinite_a, &w.first_nonfinite_b) {
        (None, None) => String::new(),
        (Some(a), Some(b)) if a.key == b.key && w.first_divergence.is_none() => format!(
            "first non-finite: {} in both A and B: both captures hold NaN/inf there, so their agreement does not make either right\n",
            at(a)
        ),
        (a, b) => format!(
            "first non-finite: A {}; B {}\n",
            a.as_ref().map_or("none".to_string(), at),
            b.as_ref().map_or("none".to_string(), at)
        ),
    }
}

fn render_first(pair: &PairDiff) -> String {
    use crate::model::analysis::compare::Verdict;
    let mut out = String::new();
    let what = match &pair.comparison.verdict {
        Verdict::Structural { reason } => format!("structural: {reason}"),
        Verdict::NonFinite => "NaN/inf counts differ".to_string(),
        Verdict::Magnitude => "statistics differ beyond tolerance".to_string(),
        Verdict::ValuesMoved => "VALUES MOVED: magnitudes agree, the position checksum does not (a permutation: wrong block table, misplaced cache write)".to_string(),
        Verdict::Agree => "agrees".to_string(),
    };
    let _ = writeln!(
        out,
        "first divergence: {} (position {}, seq {} / {}): {what}",
        pair.key, pair.position, pair.seq_a, pair.seq_b
    );
    if !pair.comparison.stats.is_empty() {
        let _ = writeln!(
            out,
            "   {:<13}{:>14}{:>14}{:>12}{:>11}{:>12}",
            "statistic", "A", "B", "|A-B|", "rel", "bound"
        );
        for d in &pair.comparison.stats {
            let num = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.6e}"));
            let _ = writeln!(
                out,
                "   {:<13}{:>14}{:>14}{:>12}{:>11}{:>12}{}",
                d.name,
                num(d.a),
                num(d.b),
                d.abs_diff.map_or("-".to_string(), |x| format!("{x:.3e}")),
                d.rel_diff.map_or("-".to_string(), |x| format!("{x:.2e}")),
                d.bound.map_or("-".to_string(), |x| format!("{x:.2e}")),
                if d.exceeds { "  <-" } else { "" }
            );
        }
    }
    out
}
