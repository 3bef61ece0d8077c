//! The text of a diff: coverage, input identity and the first divergence, per rank.

use std::fmt::Write;

use crate::model::analysis::compare::{ChecksumBound, Verdict};
use crate::model::analysis::diff::{DiffReport, PairDiff, WindowDiff};
use crate::model::analysis::layout_diff::LayoutDifferences;
use crate::model::analysis::tokens::sharpen::RowEvidence;

/// The text form of a diff.
pub fn text(report: &DiffReport) -> String {
    let mut out = String::new();
    out.push_str(&super::layouts::merge_text(report));
    // A divergence found by the rows (a bad token, or a record against the other side's rows
    // summed) is printed first: no window's own section names it.
    let from_tokens = |h: &&crate::model::analysis::diff::Headline| {
        let tokens = report.tokens.as_ref();
        let bad = tokens.and_then(|t| t.first.as_ref()).map(|b| &b.key);
        let summed = tokens
            .and_then(|t| t.summed.as_ref()?.first.as_ref())
            .map(|d| &d.key);
        h.kind == "divergence" && (bad == Some(&h.key) || summed == Some(&h.key))
    };
    if let Some(h) = report
        .headline
        .as_ref()
        .filter(|h| h.kind != "divergence" || from_tokens(h))
    {
        let _ = writeln!(out, "{}\n", h.text);
    }
    for w in &report.windows {
        out.push_str(&render_window(w));
    }
    out.push_str(&super::layouts::replicated_text(report));
    out.push_str(&layout_differences_text(&report.layout_differences));
    for note in &report.token_notes {
        let _ = writeln!(out, "token rows: {note}");
    }
    if let Some(tokens) = &report.tokens {
        out.push_str(&super::tokens::summary_text(tokens, &report.aligned_only));
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

/// The moved writes (findings), then the other layout differences of agreeing pairs as
/// grouped notes; empty when there are none.
pub fn layout_differences_text(d: &LayoutDifferences) -> String {
    let mut out = String::new();
    for m in &d.moved {
        let _ = writeln!(out, "MOVED WRITE: {}", m.text);
    }
    for line in &d.unusable_tables {
        let _ = writeln!(out, "block table not used: {line}");
    }
    if !d.notes.is_empty() {
        out.push_str("layout notes (values agree, layout differs; not findings):\n");
        for n in &d.notes {
            let _ = writeln!(
                out,
                "   {} {} in A, {} in B: {} record pair{} (first {})",
                n.field,
                n.a,
                n.b,
                n.count,
                if n.count == 1 { "" } else { "s" },
                n.example
            );
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
    let unpaired = !w.only_a.is_empty() || !w.only_b.is_empty();
    let _ = writeln!(
        out,
        "coverage: {} paired{}{}, {} only in A, {} only in B{}",
        w.pairs.len(),
        super::layouts::merged_count(w),
        not_compared_counts(w),
        w.only_a.len(),
        w.only_b.len(),
        match (unpaired, w.not_compared > 0) {
            (false, false) => "",
            (true, false) => " (unpaired stages are missing evidence)",
            (false, true) => " (pairs not compared are missing evidence)",
            (true, true) => " (unpaired stages and pairs not compared are missing evidence)",
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
    out.push_str(&super::layouts::partial_text(w));
    out.push_str(&render_unjudged(w));
    for line in &w.unmerged {
        let _ = writeln!(out, "NOT MERGED: {line}");
    }
    match w.first() {
        Some(pair) => out.push_str(&render_first(pair)),
        None if !w.unmerged.is_empty() => {
            let _ = writeln!(
                out,
                "first divergence: unknown: the window could not be merged whole ({} stage{} \
                 captured on one side only, {} paired); the stages left out are missing \
                 evidence, so the paired ones agreeing proves nothing about them (exit 1: \
                 missing evidence)",
                w.only_a.len() + w.only_b.len(),
                if w.only_a.len() + w.only_b.len() == 1 {
                    ""
                } else {
                    "s"
                },
                w.pairs.len()
            );
        }
        None if w.pairs.is_empty() => {
            out.push_str("first divergence: nothing paired, nothing compared\n")
        }
        None if w.checksum_inconclusive + w.not_compared > 0 => {
            let _ = writeln!(
                out,
                "first divergence: none among the compared records ({} checksum inconclusive, {} \
                 not compared: see above)",
                w.checksum_inconclusive, w.not_compared
            );
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
    // A merged record names the ranks whose pieces hold the NaN/inf: across parallel layouts
    // the record stands for several ranks, and the one that went wrong is the answer.
    let ranks = |n: &crate::model::analysis::scan::NonFinite, side: char| {
        let pair = w.pairs.iter().find(|p| p.key == n.key)?;
        let pieces = if side == 'a' {
            &pair.pieces_a
        } else {
            &pair.pieces_b
        };
        let holding: Vec<String> = pieces
            .iter()
            .filter(|p| p.stats.as_ref().is_some_and(|s| s.has_nonfinite()))
            .map(|p| p.rank.to_string())
            .collect();
        match holding.len() {
            0 => None,
            1 => Some(format!(" on rank {}", holding[0])),
            _ => Some(format!(" on ranks {}", holding.join(", "))),
        }
    };
    let at_side = |n: &crate::model::analysis::scan::NonFinite, side: char| {
        let on = ranks(n, side).unwrap_or_default();
        format!("{}{on} (seq {}, {})", n.key, n.seq, n.counts_text())
    };
    let at = |n| at_side(n, 'a');
    match (&w.first_nonfinite_a, &w.first_nonfinite_b) {
        (None, None) => String::new(),
        (Some(a), Some(b)) if a.key == b.key && w.first_divergence.is_none() => format!(
            "first non-finite: {} in both A and B: both captures hold NaN/inf there, so their agreement does not make either right\n",
            at(a)
        ),
        (a, b) => format!(
            "first non-finite: A {}; B {}\n",
            a.as_ref().map_or("none".to_string(), |n| at_side(n, 'a')),
            b.as_ref().map_or("none".to_string(), |n| at_side(n, 'b'))
        ),
    }
}

/// At most this many keys are listed per kind of pair that is neither agreement nor a
/// divergence (`--json` has them all).
const LISTED: usize = 8;

/// `, 1 not compared (no statistics on either side)` for the coverage line; empty for none.
fn not_compared_counts(w: &WindowDiff) -> String {
    if w.not_compared == 0 {
        return String::new();
    }
    let mut reasons: Vec<(&str, usize)> = Vec::new();
    for p in &w.pairs {
        if let Verdict::NotCompared { reason } = &p.comparison.verdict {
            match reasons.iter_mut().find(|(r, _)| *r == reason.as_str()) {
                Some((_, n)) => *n += 1,
                None => reasons.push((reason, 1)),
            }
        }
    }
    let parts: Vec<String> = reasons
        .iter()
        .map(|(reason, n)| {
            if reasons.len() == 1 {
                (*reason).to_string()
            } else {
                format!("{n} {reason}")
            }
        })
        .collect();
    format!(", {} not compared ({})", w.not_compared, parts.join("; "))
}

/// The pairs that are neither agreement nor a divergence, said plainly: not compared,
/// checksum inconclusive, and statistics the dump tool overflowed.
fn render_unjudged(w: &WindowDiff) -> String {
    let mut out = String::new();
    let list = |keys: Vec<String>, total: usize| {
        let more = total.saturating_sub(keys.len());
        let mut text = keys.join(", ");
        if more > 0 {
            let _ = write!(text, ", … {more} more");
        }
        text
    };
    if w.not_compared > 0 {
        let keys = w
            .pairs
            .iter()
            .filter(|p| matches!(p.comparison.verdict, Verdict::NotCompared { .. }))
            .take(LISTED)
            .map(|p| p.key.clone())
            .collect();
        let _ = writeln!(out, "not compared: {}", list(keys, w.not_compared));
    }
    if w.checksum_inconclusive > 0 {
        let inconclusive: Vec<&PairDiff> = w
            .pairs
            .iter()
            .filter(|p| p.comparison.verdict == Verdict::ChecksumInconclusive)
            .collect();
        let first = inconclusive[0];
        let moved = first
            .comparison
            .stats
            .iter()
            .find(|d| d.name == "pos_checksum")
            .and_then(|d| d.rel_diff);
        let _ = writeln!(
            out,
            "CHECKSUM INCONCLUSIVE: {} paired records: magnitudes agree, the position checksum moved \
             beyond its rtol but within the rounding its dtypes and magnitudes allow, and that bound \
             is above what one moved row shifts: rounding and a moved row cannot be told apart here \
             (not a divergence; to decide, save these tensors with DUMP_PROBE_TENSOR and compare them)",
            w.checksum_inconclusive
        );
        if let (Some(bound), Some(moved)) = (first.comparison.checksum_bound, moved) {
            let _ = writeln!(
                out,
                "   first {}: moved {moved:.2e}, rounding bound {:.2e}, one moved row of {} ~{:.2e}",
                first.key, bound.bound, bound.rows, bound.moved_row
            );
        }
        let keys = inconclusive
            .iter()
            .take(LISTED)
            .map(|p| p.key.clone())
            .collect();
        let _ = writeln!(out, "   {}", list(keys, w.checksum_inconclusive));
    }
    if w.overflowed > 0 {
        let _ = writeln!(
            out,
            "overflowed in the dump tool (not compared): {} paired records",
            w.overflowed
        );
        for (key, text) in w.overflowed_stats().into_iter().take(LISTED) {
            let _ = writeln!(out, "   {key}: {text}");
        }
        if w.overflowed > LISTED {
            let _ = writeln!(out, "   … {} more", w.overflowed - LISTED);
        }
    }
    out
}

/// What a pair's token rows showed, in one line: `token rows: 1 of 1 diverges, first at
/// request "req-0" position 12 (sum 3.2x its tolerance); decided over the whole tensor's
/// "agree"`.
pub fn rows_text(rows: &RowEvidence) -> String {
    let mut text = format!(
        "token rows: {} of {} diverge{}",
        rows.diverging,
        rows.compared,
        if rows.diverging == 1 { "s" } else { "" }
    );
    if let (Some((request, position)), Some(worst)) = (&rows.first, &rows.worst) {
        text.push_str(&format!(
            ", first at request {request:?} position {position} ({} {:.3}x its tolerance)",
            worst.stat, worst.ratio
        ));
    }
    if rows.kind == "rows_permuted" {
        text.push_str(", one multiset in two orders (rows permuted)");
    }
    if let Some(replaced) = rows.replaced {
        text.push_str(&format!(
            "; the rows decide over the whole tensor's \"{}\"",
            replaced.replace('_', " ")
        ));
    }
    text
}

/// Whether no magnitude statistic (max_abs, min, max, mean, l2) of `pair` was compared: none
/// recorded on both sides.
fn magnitudes_unknown(pair: &PairDiff) -> bool {
    !pair
        .comparison
        .stats
        .iter()
        .filter(|d| d.name != "pos_checksum" && d.excluded.is_none())
        .any(|d| d.a.is_some() && d.b.is_some())
}

fn render_first(pair: &PairDiff) -> String {
    let mut out = String::new();
    let what = match &pair.comparison.verdict {
        Verdict::Structural { reason } => format!("structural: {reason}"),
        Verdict::NonFinite => "NaN/inf counts differ".to_string(),
        Verdict::Magnitude => "statistics differ beyond tolerance".to_string(),
        Verdict::ValuesMoved => match magnitudes_unknown(pair) {
            // Nothing but the checksum was recorded on both sides: a move cannot be told
            // from a change, and "magnitudes agree" would claim what was never compared.
            true => "VALUES MOVED OR CHANGED: the position checksum moved beyond its rounding \
                     bound; the magnitudes were not compared (not recorded on both sides), so \
                     a permutation cannot be told from changed values"
                .to_string(),
            false => "VALUES MOVED: magnitudes agree, the position checksum moved beyond its rounding bound (a permutation: wrong block table, misplaced cache write)".to_string(),
        },
        Verdict::ChecksumInconclusive => "checksum inconclusive".to_string(),
        Verdict::NotCompared { reason } => format!("not compared: {reason}"),
        Verdict::Agree => "agrees".to_string(),
    };
    let _ = writeln!(
        out,
        "first divergence: {} (position {}, seq {} / {}): {what}",
        pair.key, pair.position, pair.seq_a, pair.seq_b
    );
    if let Some(rows) = &pair.comparison.rows {
        let _ = writeln!(out, "   {}", rows_text(rows));
    }
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
                match (&d.excluded, d.exceeds) {
                    (Some(_), _) => "  (not compared)",
                    (None, true) => "  <-",
                    (None, false) => "",
                }
            );
        }
        for d in &pair.comparison.stats {
            if let Some(excluded) = &d.excluded {
                let _ = writeln!(out, "   not compared: {}", excluded.text);
            }
        }
        if let Some(bound) = pair.comparison.checksum_bound {
            let _ = writeln!(out, "   {}", checksum_bound_text(&bound));
        }
    }
    out.push_str(&super::layouts::pieces_text(pair));
    out
}

/// The checksum's bound, term by term, as one line.
pub fn checksum_bound_text(bound: &ChecksumBound) -> String {
    format!(
        "pos_checksum bound: max(rtol {:.1e}, rounding of the dtypes {:.2e}, change the magnitudes \
         show {:.2e}) = {:.2e} of its scale; one moved row of {} shifts ~{:.2e}",
        bound.rtol, bound.roundoff, bound.evidence, bound.bound, bound.rows, bound.moved_row
    )
}
