//! Verdicts that rows make sharp (docs/diff.md, "Token rows"): in two forwards paired whole,
//! a record pair with token rows on both sides is judged row by row as well, and where the
//! rows say more than the whole-tensor statistics they decide. A changed row is a
//! `magnitude` divergence with its position (the whole tensor may agree: its statistics
//! blur one row into many); `values_moved` stays only when the rows are one multiset in two
//! orders; `checksum_inconclusive` becomes what the rows show.

use super::judge::{FloorCache, RowJudge, RowStats, RowVerdict};
use super::plan::{Map, join_sorted};
use crate::model::analysis::compare::{Comparison, Tolerances, Verdict};
pub use crate::model::analysis::row_evidence::RowEvidence;
use crate::model::dump::{ROW_WIDTH, RowBlock, TokenRows, Window};

/// A's request ids to B's, from the token alignment's matches.
pub type RequestNames<'a> = Map<&'a str, &'a str>;

/// Two windows paired whole, their token rows ready to judge record pairs by.
pub struct WindowRows<'w> {
    a: Side<'w>,
    b: Side<'w>,
    judge: RowJudge,
    /// The forward rows both windows hold, as (A's forward row, B's forward row, request,
    /// position) in (request, position) order: every record of the forward's own rows pairs
    /// its rows by this one join, made once per window pair.
    forward_join: Vec<(usize, usize, &'w str, u64)>,
}

impl<'w> WindowRows<'w> {
    /// `None` unless both windows have row statistics.
    pub fn of(
        a: &'w Window,
        b: &'w Window,
        names: &RequestNames<'w>,
        tolerances: &Tolerances,
    ) -> Option<WindowRows<'w>> {
        let (rows_a, rows_b) = (a.token_rows.as_ref()?, b.token_rows.as_ref()?);
        if rows_a.records.is_empty() || rows_b.records.is_empty() {
            return None;
        }
        let (a, b) = (
            Side::of(rows_a, |request| names.get(request).copied()),
            Side::of(rows_b, Some),
        );
        let forward_join = join_sorted(&a.forward_keys(), &b.forward_keys())
            .into_iter()
            .map(|((request, position), x, y)| (x, y, request, position))
            .collect();
        Some(WindowRows {
            a,
            b,
            judge: RowJudge::new(tolerances),
            forward_join,
        })
    }

    /// The rows of blocks `x` (A) and `y` (B) by the forward join, when both hold their
    /// forward's rows in order, whole: aligned vectors, no sort.
    #[allow(clippy::type_complexity)]
    fn forward_rows(
        &self,
        x: &RowBlock,
        y: &RowBlock,
    ) -> Option<(
        Vec<((&'w str, u64), RowStats)>,
        Vec<((&'w str, u64), RowStats)>,
    )> {
        let whole = |side: &Side, block: &RowBlock| {
            block.positions.is_none()
                && block.rows as usize == side.forward.len()
                && (block.first_row as usize + side.forward.len()) * ROW_WIDTH
                    <= side.rows.values.len()
        };
        if !(whole(&self.a, x) && whole(&self.b, y)) {
            return None;
        }
        let stats = |side: &Side, block: &RowBlock, row: usize| {
            let at = (block.first_row as usize + row) * ROW_WIDTH;
            RowStats::of(&side.rows.values[at..at + ROW_WIDTH])
        };
        Some(
            self.forward_join
                .iter()
                .map(|&(ia, ib, request, position)| {
                    (
                        ((request, position), stats(&self.a, x, ia)),
                        ((request, position), stats(&self.b, y, ib)),
                    )
                })
                .unzip(),
        )
    }

    /// Judges the records `seq_a` and `seq_b` (dtypes `dtype_a`, `dtype_b`) row by row where
    /// both have token rows, and lets the rows decide `comparison`'s verdict where they make
    /// it sharp. Returns whether the verdict changed. A comparison already judged by rows (a
    /// reused diff), or `structural`, `non_finite` or `not_compared`, is left as it is.
    pub fn decide(
        &self,
        comparison: &mut Comparison,
        (seq_a, seq_b): (u64, u64),
        (dtype_a, dtype_b): (&str, &str),
        (shape_a, shape_b): (&[u64], &[u64]),
        floors: &mut FloorCache,
    ) -> bool {
        if !sharpens(comparison) {
            return false;
        }
        let (Some(block_a), Some(block_b)) = (self.a.by_seq.get(&seq_a), self.b.by_seq.get(&seq_b))
        else {
            return false;
        };
        let (x, y) = match self.forward_rows(block_a, block_b) {
            Some(rows) => rows,
            None => (self.a.rows(block_a), self.b.rows(block_b)),
        };
        let (floor, precision_change) = floors.of(dtype_a, dtype_b);
        let complete = holds_every_row(block_a, shape_a) && holds_every_row(block_b, shape_b);
        match compare(&x, &y, &self.judge, floor, precision_change) {
            Some(evidence) => decide(comparison, evidence, (x.len(), y.len()), complete),
            None => false,
        }
    }
}

/// Whether rows may decide `comparison`: not one already judged by rows (a reused diff), nor
/// `structural` (but for a shape difference), `non_finite` or `not_compared`.
fn sharpens(comparison: &Comparison) -> bool {
    let shape_only = |reason: &str| reason.starts_with("shape");
    !(comparison.rows.is_some()
        || matches!(&comparison.verdict, Verdict::Structural { reason } if !shape_only(reason))
        || matches!(
            comparison.verdict,
            Verdict::NonFinite | Verdict::NotCompared { .. }
        ))
}

/// [`WindowRows::decide`] with the rows already judged (forwards paired whole, judged once
/// in the alignment: [`super::whole`]): `evidence` of `rows` (A's, B's) rows.
pub fn decide_judged(
    comparison: &mut Comparison,
    evidence: RowEvidence,
    rows: (usize, usize),
    complete: bool,
) -> bool {
    sharpens(comparison) && decide(comparison, evidence, rows, complete)
}

/// Whether a record's row block holds every token row of its tensor (`shape`): none left out
/// by the probe's position bound (`DUMP_PROBE_ROW_POSITIONS`).
pub fn holds_every_row(block: &RowBlock, shape: &[u64]) -> bool {
    let rows: u64 = block
        .token_dims
        .iter()
        .map(|&d| shape.get(usize::from(d)).copied().unwrap_or(0))
        .product();
    block.rows == rows
}

/// The verdict the rows give, recorded with their evidence. Returns whether it changed. Rows
/// that agree decide for the whole tensor only where they are all of it (`complete`: no row
/// left out by the probe's position bound); a changed row is a change however many were kept.
///
/// A precision change (float32 vs bfloat16) is never made worse by its rows: a row of the
/// coarser computation drifts further than the tensor's aggregate, so its `agree` and
/// `checksum_inconclusive` stand. A `structural` shape difference that the rows explain
/// (every row of the matched requests compared on both sides: the forwards pair whole, so the
/// extra rows are padding) is decided by the rows.
fn decide(
    comparison: &mut Comparison,
    mut evidence: RowEvidence,
    rows: (usize, usize),
    complete: bool,
) -> bool {
    let before = comparison.verdict.clone();
    let padding_only = matches!(&before, Verdict::Structural { reason } if reason.starts_with("shape"))
        && evidence.compared as usize == rows.0
        && evidence.compared as usize == rows.1;
    let sharpens = !comparison.precision_change
        && (padding_only
            || matches!(
                before,
                Verdict::Agree | Verdict::ChecksumInconclusive | Verdict::ValuesMoved
            ));
    let after = match evidence.kind {
        "row_changed" if sharpens => Verdict::Magnitude,
        "rows_permuted" if sharpens => Verdict::ValuesMoved,
        "rows_agree"
            if complete
                && (padding_only
                    || matches!(before, Verdict::ChecksumInconclusive | Verdict::ValuesMoved)) =>
        {
            Verdict::Agree
        }
        _ => before.clone(),
    };
    if after != before {
        evidence.replaced = Some(before.name());
    }
    comparison.verdict = after;
    comparison.rows = Some(evidence);
    comparison.verdict != before
}

/// Compares two records' rows by (request, position); `None` when none are held by both.
fn compare(
    a: &[((&str, u64), RowStats)],
    b: &[((&str, u64), RowStats)],
    judge: &RowJudge,
    floor: f64,
    precision_change: bool,
) -> Option<RowEvidence> {
    let (mut i, mut j) = (0, 0);
    let mut compared = 0;
    let mut diverging: Vec<(usize, usize, RowVerdict)> = Vec::new();
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                compared += 1;
                let verdict = judge.judge(&a[i].1, &b[j].1, floor, precision_change);
                if verdict.diverges() {
                    diverging.push((i, j, verdict));
                }
                i += 1;
                j += 1;
            }
        }
    }
    if compared == 0 {
        return None;
    }
    let stats = |rows: &[((&str, u64), RowStats)]| rows.iter().map(|r| r.1).collect::<Vec<_>>();
    let first = diverging.first().map(|&(i, ..)| a[i].0);
    Some(evidence_of(
        compared,
        (&stats(a), &stats(b)),
        &diverging,
        first,
        judge,
        floor,
        precision_change,
    ))
}

/// The evidence of `compared` rows judged pairwise, `diverging` those that diverge (indices
/// into A's rows `a` and B's `b`, and the verdict), `first` the first one's request (as B
/// names it) and position.
pub(super) fn evidence_of(
    compared: u64,
    (a, b): (&[RowStats], &[RowStats]),
    diverging: &[(usize, usize, RowVerdict)],
    first: Option<(&str, u64)>,
    judge: &RowJudge,
    floor: f64,
    precision_change: bool,
) -> RowEvidence {
    RowEvidence {
        compared,
        diverging: diverging.len() as u64,
        kind: rows_kind((a, b), diverging, judge, floor, precision_change),
        first: first.map(|(request, position)| (request.to_string(), position)),
        worst: diverging.first().map(|&(.., v)| v),
        replaced: None,
    }
}

/// `rows_agree` (nothing diverges), `rows_permuted` ([`permuted`]) or `row_changed`: the kind
/// of [`RowEvidence`] of rows `a`, `b` whose `diverging` ones are listed.
pub(super) fn rows_kind(
    (a, b): (&[RowStats], &[RowStats]),
    diverging: &[(usize, usize, RowVerdict)],
    judge: &RowJudge,
    floor: f64,
    precision_change: bool,
) -> &'static str {
    if diverging.is_empty() {
        "rows_agree"
    } else if permuted(a, b, diverging, judge, floor, precision_change) {
        "rows_permuted"
    } else {
        "row_changed"
    }
}

/// Whether the diverging rows are one multiset in two orders: each of A's agrees with one of
/// B's, the position-weighted checksum aside (it moves with the row).
fn permuted(
    a: &[RowStats],
    b: &[RowStats],
    diverging: &[(usize, usize, RowVerdict)],
    judge: &RowJudge,
    floor: f64,
    precision_change: bool,
) -> bool {
    if diverging.len() < 2 || diverging.iter().any(|d| d.2.stat == "nonfinite_count") {
        return false;
    }
    let agrees = |x: &RowStats, y: &RowStats| {
        if judge.max_abs_diverges(x, y, floor) {
            return false;
        }
        let mut y = *y;
        y.row_checksum = x.row_checksum;
        !judge.judge(x, &y, floor, precision_change).diverges()
    };
    // Rows that agree with their own partner but for the position-weighted checksum did not
    // move: that is a checksum difference (rounding across a precision change), not a
    // permutation.
    if diverging.iter().all(|&(i, j, _)| agrees(&a[i], &b[j])) {
        return false;
    }
    let mut used = vec![false; diverging.len()];
    diverging.iter().all(|&(i, ..)| {
        let found = diverging.iter().enumerate().position(|(n, &(_, j, _))| {
            if used[n] {
                return false;
            }
            agrees(&a[i], &b[j])
        });
        found.map(|n| used[n] = true).is_some()
    })
}

/// One window's token rows, found by record `seq`, keyed by (request as B names it,
/// position).
struct Side<'w> {
    rows: &'w TokenRows,
    forward: Vec<(u32, u64)>,
    /// Per map entry: its request as B names it (None: padding, or no partner in B).
    request: Vec<Option<&'w str>>,
    by_seq: Map<u64, &'w RowBlock>,
}

impl<'w> Side<'w> {
    fn of(rows: &'w TokenRows, rename: impl Fn(&'w str) -> Option<&'w str>) -> Side<'w> {
        Side {
            rows,
            forward: rows.forward_rows(),
            request: rows
                .map
                .iter()
                .map(|e| e.request.as_deref().and_then(&rename))
                .collect(),
            by_seq: rows.records.iter().map(|b| (b.seq, b)).collect(),
        }
    }

    /// The forward's rows of matched requests as ((request, position), forward row index),
    /// sorted.
    fn forward_keys(&self) -> Vec<((&'w str, u64), usize)> {
        let mut keys: Vec<((&'w str, u64), usize)> = self
            .forward
            .iter()
            .enumerate()
            .filter_map(|(n, &(entry, position))| {
                let request = self.request.get(entry as usize).copied().flatten()?;
                Some(((request, position), n))
            })
            .collect();
        keys.sort_unstable();
        keys
    }

    /// A block's rows of matched requests, sorted by (request, position).
    fn rows(&self, block: &RowBlock) -> Vec<((&'w str, u64), RowStats)> {
        let mut out: Vec<((&str, u64), RowStats)> = self
            .rows
            .rows_of(block, &self.forward)
            .filter_map(|((entry, position), values)| {
                let request = self.request.get(entry as usize).copied().flatten()?;
                debug_assert_eq!(values.len(), ROW_WIDTH);
                Some(((request, position), RowStats::of(values)))
            })
            .collect();
        out.sort_by(|x, y| x.0.cmp(&y.0));
        out
    }
}
