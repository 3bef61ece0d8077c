//! The text of a token alignment: which requests were matched, how many rows were compared,
//! and each request's first bad token with both rows.

use std::fmt::Write;

use super::number::precise_f32;
use crate::model::analysis::diff::WindowRef;
use crate::model::analysis::tokens::judge::RowStats;
use crate::model::analysis::tokens::requests::MatchedBy;
use crate::model::analysis::tokens::summed::Summed;
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
            "  forwards left to the row alignment (no forward of the other side holds the same rows): {} of A, {} of B",
            only_a.len(),
            only_b.len()
        );
    }
    if let Some(why) = t.nothing_compared {
        let _ = writeln!(out, "  nothing compared: {}", why.describe());
    }
    let (sa, sb) = t.windows_without_statistics;
    if let Some(summed) = &t.summed {
        out.push_str(&summed_text(t, summed));
    } else if sa + sb > 0 {
        let _ = writeln!(
            out,
            "  {sa} window{} of A and {sb} of B hold a row map without row statistics (statistics off, or a sidecar not read: see the warnings): their rows are not compared, and the first bad token may lie there (missing evidence)",
            plural(sa)
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
                "matched by request id: token ids not recorded on both sides, input identity unchecked".to_string()
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
            None if t.summed.is_some() => {
                let _ = writeln!(
                    out,
                    "    compared through the records of the side without row statistics (above)"
                );
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
    if ra + rb > 0 && t.summed.is_none() {
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
    let (da, db) = t.rows_spread_over_dp;
    if da + db > 0 {
        let _ = writeln!(
            out,
            "  rows held by several data-parallel ranks in one forward (data-parallel attention gathers every rank's tokens): {da} in A, {db} in B, not aligned yet and not compared (missing evidence)"
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

/// What comparing a side without row statistics against the other side's rows summed found
/// ([`Summed`]): what was done, the counts, and the first diverging record with both rows.
pub fn summed_text(t: &TokenDiff, s: &Summed) -> String {
    let mut out = String::new();
    let rows_side = if s.whole_side == "A" { "B" } else { "A" };
    let from_metadata = if s.whole_side == "A" {
        t.maps_from_metadata.0
    } else {
        t.maps_from_metadata.1
    };
    let origin = if from_metadata > 0 {
        format!(
            "; {from_metadata} of their row maps made from metadata positions (a manifest from before token rows)"
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  {} holds no row statistics ({} window{}{origin}): {} of its records compared whole with {rows_side}'s rows summed over the same positions (position checksums where the rows start at position 0: {}); {} diverge",
        s.whole_side,
        s.windows,
        plural(s.windows),
        s.records_compared,
        s.checksums_compared,
        s.records_diverging
    );
    if s.records_not_compared > 0 {
        let _ = writeln!(
            out,
            "  {} record{} of {} holding its forward's rows not compared ({rows_side} lacks some of the rows, or the forward holds padding or unmatched requests)",
            s.records_not_compared,
            plural(s.records_not_compared as usize),
            s.whole_side
        );
    }
    if s.records_different_input > 0 {
        let _ = writeln!(
            out,
            "  {} record{} of {} at positions whose token ids differ from {rows_side}'s not compared (different inputs)",
            s.records_different_input,
            plural(s.records_different_input as usize),
            s.whole_side
        );
    }
    if let Some(d) = &s.first {
        let token = d
            .token_id
            .map(|id| format!(" (token id {id})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "    first divergence: {} at request {:?} positions {}..={}{token} ({} off by {:.3}x its tolerance)",
            d.key, d.requests.0, d.positions.0, d.positions.1, d.verdict.stat, d.verdict.ratio
        );
        let summed = format!("      {rows_side} rows summed  {}", row_text(&d.rows));
        let whole = format!(
            "      {} record whole  {}  ({} seq {})",
            s.whole_side,
            row_text(&d.record),
            d.source.0,
            d.source.1
        );
        // A's line first, whichever side holds the rows.
        let (first, second) = if rows_side == "A" {
            (summed, whole)
        } else {
            (whole, summed)
        };
        let _ = writeln!(out, "{first}\n{second}");
    }
    out
}

/// [`Summed`] in one line, for the workbench: what was compared and its first divergence.
pub fn summed_line(s: &Summed) -> String {
    let rows_side = if s.whole_side == "A" { "B" } else { "A" };
    match &s.first {
        Some(d) => format!(
            "{} holds no row statistics: its record {} at request {:?} positions {}..={} differs from {rows_side}'s rows summed ({} {:.3}x its tolerance; `dumpview diff` prints both)",
            s.whole_side,
            d.key,
            d.requests.0,
            d.positions.0,
            d.positions.1,
            d.verdict.stat,
            d.verdict.ratio
        ),
        None => format!(
            "{} holds no row statistics: {} of its records compared with {rows_side}'s rows summed, none differs",
            s.whole_side, s.records_compared
        ),
    }
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
    if bad.dtypes.0 != bad.dtypes.1 && bad.verdict.stat != "nonfinite_count" {
        let _ = writeln!(
            out,
            "{indent}  across a precision change ({} vs {}): a row drifts further than its tensor's aggregate, so the records' own verdicts name the first divergence",
            bad.dtypes.0, bad.dtypes.1
        );
    }
    out
}

/// The report's "First bad token" section: per matched request, the position, token id,
/// stage and both rows of its first diverging row, or that every aligned row agrees.
pub fn report_markdown(t: &TokenDiff) -> String {
    let mut md = String::from("### First bad token\n\n");
    let _ = writeln!(
        md,
        "Token rows aligned by request and position (docs/diff.md, \"Token rows\"): {} aligned rows compared, {} diverge.\n",
        t.rows_compared, t.rows_diverging
    );
    let _ = writeln!(
        md,
        "| request (A = B) | rows | position | token id | stage | verdict | row A | row B |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    for r in &t.per_request {
        let name = if r.request_a == r.request_b {
            format!("`{}`", r.request_a)
        } else {
            format!("`{}` = `{}`", r.request_a, r.request_b)
        };
        match &r.first_bad_token {
            Some(bad) => {
                let _ = writeln!(
                    md,
                    "| {name} | {} | {} | {} | `{}` | {} ({} {:.3}x) | {} | {} |",
                    r.rows_compared,
                    bad.position,
                    bad.token_id.map_or("-".to_string(), |id| id.to_string()),
                    bad.key,
                    bad.kind,
                    bad.verdict.stat,
                    bad.verdict.ratio,
                    row_text(&bad.a),
                    row_text(&bad.b)
                );
            }
            None if r.rows_compared == 0 && t.summed.is_some() => {
                let _ = writeln!(
                    md,
                    "| {name} | 0 | compared through records against summed rows (below) | | | | | |"
                );
            }
            None => {
                let _ = writeln!(
                    md,
                    "| {name} | {} | none: every aligned row agrees | | | | | |",
                    r.rows_compared
                );
            }
        }
    }
    md.push('\n');
    if let Some(s) = &t.summed {
        // The same lines as the CLI's, as a quoted block.
        for line in summed_text(t, s).lines() {
            let _ = writeln!(md, "> {}", line.trim_start());
        }
        md.push('\n');
    }
    for (side, names) in [("A", &t.unmatched_a), ("B", &t.unmatched_b)] {
        if !names.is_empty() {
            let _ = writeln!(
                md,
                "Requests only in {side} (not compared): {}\n",
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    md
}

/// One row's five statistics in one line (the CLI, the report and the workbench's token view).
/// A statistic that is not known (NaN: a merged partial sum's `max_abs`, a checksum not
/// comparable) reads `n/a`.
pub fn row_text(r: &RowStats) -> String {
    let known = |x: f32| {
        if x.is_nan() {
            "n/a".to_string()
        } else {
            precise_f32(x)
        }
    };
    format!(
        "nonfinite {} max_abs {} sum {} l2 {} checksum {}",
        known(r.nonfinite_count),
        known(r.max_abs),
        known(r.sum),
        // The norm of float32 statistics, shown as float32 like them.
        known(r.l2() as f32),
        known(r.row_checksum)
    )
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// One request's token × stage view: stages down (those with a compared row, in A's capture
/// order), positions across (binned when more than fit), each cell the worst difference over
/// tolerance of its rows.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenGrid {
    /// `stage#k` of each row of the grid.
    pub stages: Vec<String>,
    /// The positions each column covers, `(first, last)` inclusive.
    pub columns: Vec<(u64, u64)>,
    /// `[stage][column]`: the worst ratio of the column's rows at that stage; `None` where
    /// no row was compared.
    pub cells: Vec<Vec<Option<f32>>>,
    /// (grid row, column) of the request's first bad token.
    pub first: Option<(usize, usize)>,
}

/// The grid of request `index` of `t` with at most `max_columns` columns (at least 1).
pub fn grid(t: &TokenDiff, index: usize, max_columns: usize) -> TokenGrid {
    let Some(request) = t.per_request.get(index) else {
        return TokenGrid {
            stages: Vec::new(),
            columns: Vec::new(),
            cells: Vec::new(),
            first: None,
        };
    };
    let mut stage_ids: Vec<u32> = request.cells.iter().map(|c| c.0).collect();
    stage_ids.sort_unstable();
    stage_ids.dedup();
    let mut positions: Vec<u32> = request.cells.iter().map(|c| c.1).collect();
    positions.sort_unstable();
    positions.dedup();
    let per_column = positions.len().div_ceil(max_columns.max(1)).max(1);
    let columns: Vec<(u64, u64)> = positions
        .chunks(per_column)
        .map(|c| (u64::from(c[0]), u64::from(c[c.len() - 1])))
        .collect();
    let column_of = |p: u32| positions.binary_search(&p).map_or(0, |i| i / per_column);
    let row_of = |s: u32| stage_ids.binary_search(&s).unwrap_or(0);
    let mut cells = vec![vec![None::<f32>; columns.len()]; stage_ids.len()];
    for &(stage, position, ratio) in &request.cells {
        let cell = &mut cells[row_of(stage)][column_of(position)];
        let worse = cell.is_none_or(|c| ratio > c || ratio.is_nan());
        if worse {
            *cell = Some(ratio);
        }
    }
    let first = request.first_bad_token.as_ref().and_then(|bad| {
        let stage = t.stage_keys.iter().position(|k| *k == bad.key)? as u32;
        let position = u32::try_from(bad.position).ok()?;
        Some((row_of(stage), column_of(position)))
    });
    TokenGrid {
        stages: stage_ids
            .iter()
            .map(|&s| t.stage_keys.get(s as usize).cloned().unwrap_or_default())
            .collect(),
        columns,
        cells,
        first,
    }
}

/// A cell's glyph (for NO_COLOR and text): ` ` no row, `.` below 0.1 of the tolerance, `:`
/// below 1 (agrees), `1`..`9` the decade of a diverging ratio (1 for [1, 10), 2 for [10, 100),
/// ...), `!` non-finite counts that differ (an infinite ratio).
pub fn glyph(ratio: Option<f32>) -> char {
    match ratio {
        None => ' ',
        Some(r) if r.is_nan() || r.is_infinite() => '!',
        Some(r) if r < 0.1 => '.',
        Some(r) if r < 1.0 => ':',
        Some(r) => {
            let decade = r.log10().floor() as i64 + 1;
            char::from_digit(decade.clamp(1, 9) as u32, 10).unwrap_or('9')
        }
    }
}

/// `dumpview diff --tokens`: each request's grid as text, at most `width` columns of cells.
pub fn tokens_text(t: &TokenDiff, width: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cells: the row's difference over its tolerance: '.' < 0.1, ':' < 1 (agrees), 1-9 its decade when >= 1 (diverges), '!' NaN/inf counts differ, '*' the first bad token, ' ' not compared"
    );
    for (index, r) in t.per_request.iter().enumerate() {
        let label_width = 32;
        let g = grid(t, index, width.saturating_sub(label_width + 1).max(8));
        let _ = writeln!(
            out,
            "\nrequest {:?}{}: {} rows compared, {} diverge",
            r.request_a,
            if r.request_a == r.request_b {
                String::new()
            } else {
                format!(" (B: {:?})", r.request_b)
            },
            r.rows_compared,
            r.rows_diverging
        );
        let span = |(lo, hi): (u64, u64)| {
            if lo == hi {
                format!("{lo}")
            } else {
                format!("{lo}-{hi}")
            }
        };
        let _ = writeln!(
            out,
            "{:>label_width$} positions {} .. {} ({} per column)",
            "",
            g.columns.first().map(|c| span(*c)).unwrap_or_default(),
            g.columns.last().map(|c| span(*c)).unwrap_or_default(),
            g.columns.first().map_or(1, |c| c.1 - c.0 + 1)
        );
        for (row, stage) in g.stages.iter().enumerate() {
            let cells: String = g.cells[row]
                .iter()
                .enumerate()
                .map(|(column, &c)| {
                    if g.first == Some((row, column)) {
                        '*'
                    } else {
                        glyph(c)
                    }
                })
                .collect();
            let name: String = if stage.chars().count() > label_width {
                stage.chars().take(label_width - 1).chain(['…']).collect()
            } else {
                stage.clone()
            };
            let _ = writeln!(out, "{name:>label_width$} {cells}");
        }
    }
    out
}
