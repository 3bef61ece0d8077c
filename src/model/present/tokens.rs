//! The text of a token alignment: which requests were matched, how many rows were compared,
//! and each request's first bad token with both rows.

use std::fmt::Write;

use super::number::precise;
use crate::model::analysis::diff::WindowRef;
use crate::model::analysis::tokens::judge::RowStats;
use crate::model::analysis::tokens::requests::MatchedBy;
use crate::model::analysis::tokens::{BadToken, TokenDiff};

/// The token section of `dumpview diff`: one summary line, the request matches, the first
/// bad token of each request (or that its rows agree), and what was not compared.
pub fn summary_text(t: &TokenDiff, aligned_only: &(Vec<WindowRef>, Vec<WindowRef>)) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "token rows: {} request{} matched, {} aligned rows compared, {} diverge ({} window{} of A, {} of B)",
        t.requests.len(),
        plural(t.requests.len()),
        t.rows_compared,
        t.rows_diverging,
        t.windows.0,
        plural(t.windows.0),
        t.windows.1,
    );
    let (only_a, only_b) = (&aligned_only.0, &aligned_only.1);
    if !only_a.is_empty() || !only_b.is_empty() {
        let _ = writeln!(
            out,
            "  forwards compared by their token rows alone (the other side splits those tokens differently): {} of A, {} of B",
            only_a.len(),
            only_b.len()
        );
    }
    for (m, r) in t.requests.iter().zip(&t.per_request) {
        let how = match m.by {
            MatchedBy::TokenIds => format!("same token ids at {} positions", m.common_positions),
            MatchedBy::LongestPrefix => format!(
                "token ids agree up to position {} (rows from there are different inputs, not compared)",
                m.ids_differ_from.unwrap_or(0)
            ),
            MatchedBy::RequestId => {
                "matched by request id: no token ids recorded, input identity unchecked".to_string()
            }
        };
        let name = if m.a == m.b {
            format!("{:?}", m.a)
        } else {
            format!("{:?} (A) = {:?} (B)", m.a, m.b)
        };
        let span = r
            .positions
            .map(|(lo, hi)| format!(", positions {lo}..={hi}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  request {name}: {how}; {} rows{span}",
            r.rows_compared
        );
        match &r.first_bad_token {
            Some(bad) => out.push_str(&bad_token_text(bad, "    ")),
            None if r.rows_compared > 0 => {
                let _ = writeln!(out, "    every aligned row agrees");
            }
            None => {
                let _ = writeln!(
                    out,
                    "    no aligned rows: nothing compared (missing evidence)"
                );
            }
        }
    }
    for (side, names) in [("A", &t.unmatched_a), ("B", &t.unmatched_b)] {
        if !names.is_empty() {
            let _ = writeln!(
                out,
                "  request{} only in {side} (no request of the other side has the same token ids): {}",
                plural(names.len()),
                names
                    .iter()
                    .map(|n| format!("{n:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let (ra, rb) = t.rows_only;
    if ra + rb > 0 {
        let _ = writeln!(
            out,
            "  rows on one side only (a stage or position the other side did not capture): {ra} in A, {rb} in B (coverage, not compared)"
        );
    }
    if t.rows_different_input > 0 {
        let _ = writeln!(
            out,
            "  {} rows at positions whose token ids differ were not compared",
            t.rows_different_input
        );
    }
    let (pa, pb) = t.rows_repeated;
    if pa + pb > 0 {
        let _ = writeln!(
            out,
            "  a (request, position) held twice (recomputed or re-verified): the later forward's row used ({pa} in A, {pb} in B)"
        );
    }
    if t.positions_inferred.0 || t.positions_inferred.1 {
        let _ = writeln!(
            out,
            "  positions were counted on from the label's earlier calls in {} (arm() gave no first_position or rows=)",
            match t.positions_inferred {
                (true, true) => "A and B",
                (true, false) => "A",
                _ => "B",
            }
        );
    }
    out
}

/// A bad token in two or three lines: where, which token, and both rows.
pub fn bad_token_text(bad: &BadToken, indent: &str) -> String {
    let token = bad
        .token_id
        .map(|id| format!(", token id {id}"))
        .unwrap_or_default();
    let what = match bad.kind {
        "non_finite" => "NaN/inf counts differ".to_string(),
        "rows_permuted" => {
            "rows permuted: the diverging rows are the same values at other positions".to_string()
        }
        _ => format!(
            "{} off by {:.3}x its tolerance",
            bad.verdict.stat, bad.verdict.ratio
        ),
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{indent}first bad token: position {}{token} at {} ({what})",
        bad.position, bad.key
    );
    let _ = writeln!(out, "{indent}  A {}  ({})", row_text(&bad.a), bad.dtypes.0);
    let _ = writeln!(out, "{indent}  B {}  ({})", row_text(&bad.b), bad.dtypes.1);
    out
}

fn row_text(r: &RowStats) -> String {
    format!(
        "nonfinite {} max_abs {} sum {} l2 {} checksum {}",
        r.nonfinite_count,
        precise(f64::from(r.max_abs)),
        precise(f64::from(r.sum)),
        precise(r.l2()),
        precise(f64::from(r.row_checksum))
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
