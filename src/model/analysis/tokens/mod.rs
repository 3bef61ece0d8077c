//! Tokens as the unit of comparison: the rows of two captures aligned by request and token
//! position across chunking and batching (docs/diff.md, "Token rows").
//!
//! A window with token rows ([`crate::model::dump::TokenRows`]) says which (request,
//! position) each row of its token-row records holds. Requests are matched across the sides
//! by their token ids ([`requests`]); every row is keyed by (stage#k, request, position), k
//! being the k-th capture of that stage in its forward that holds the position; keys held on
//! both sides are compared row by row ([`judge`]). The first divergence is the earliest
//! stage#k in A's capture order with a diverging row, then the earliest position.
//!
//! Forwards pair whole by the rows they hold ([`pair_by_rows`]): a decode step is call 2
//! after a whole prefill and call 4 after a three-chunk one, and they pair all the same.

pub mod judge;
mod pairing;
mod plan;
pub mod requests;
pub mod sharpen;
pub mod summed;
pub mod whole;

pub use pairing::pair_by_rows;
use plan::{Item, Planned, Row, SidePlan, Stages};

use rayon::prelude::*;
use serde::Serialize;

use crate::model::analysis::compare::Tolerances;
use crate::model::dump::{Record, Window};
use judge::{RowStats, RowVerdict};
use requests::{RequestMatch, SideRequests};

/// What aligning the token rows of A and B found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokenDiff {
    /// Requests matched across the sides, in A's order.
    pub requests: Vec<RequestMatch>,
    /// A's requests with no partner in B (their rows are coverage, not compared).
    pub unmatched_a: Vec<String>,
    /// B's requests with no partner in A.
    pub unmatched_b: Vec<String>,
    /// Windows with token rows read, per side.
    pub windows: (usize, usize),
    /// Aligned rows compared.
    pub rows_compared: u64,
    /// Of those, rows that diverge.
    pub rows_diverging: u64,
    /// Rows (stage#k, request, position) held by A alone, and by B alone: coverage.
    pub rows_only: (u64, u64),
    /// Rows at positions where the matched requests' token ids differ: different inputs,
    /// not compared.
    pub rows_different_input: u64,
    /// Rows a side held more than once as a forward's own rows (a recomputed or re-verified
    /// token; rows at declared positions, such as KV-cache reads, repeat by design and are not
    /// counted): the later forward's row was used, per side.
    pub rows_repeated: (u64, u64),
    /// Rows (stage#k, request, position) that several data-parallel ranks hold in one
    /// forward, per side: data-parallel attention, whose gathered stages hold every dp rank's
    /// tokens on each rank. Not aligned yet, so not compared (never guessed which rank's row
    /// stands for the token).
    pub rows_spread_over_dp: (u64, u64),
    /// Some window's first position was counted on from its label's earlier calls rather
    /// than given by the capture (A, B).
    pub positions_inferred: (bool, bool),
    /// Windows with a row map but no row statistics (statistics off, or a sidecar that could
    /// not be read: see the load warnings), per side: their rows are not compared, so the
    /// first bad token may lie there.
    pub windows_without_statistics: (usize, usize),
    /// Of those, windows whose row map was made from their metadata positions (a manifest
    /// from before token rows), per side.
    pub maps_from_metadata: (usize, usize),
    /// The first divergence over all requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<BadToken>,
    /// Where one side holds no row statistics at all (an old manifest, statistics off): its
    /// records compared whole against the other side's rows summed ([`summed`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summed: Option<summed::Summed>,
    /// Why no row was compared, where none was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nothing_compared: Option<NothingCompared>,
    /// One per matched request, in `requests`' order.
    pub per_request: Vec<RequestTokens>,
    /// `stage#k` of each stage ordinal of [`RequestTokens::cells`], A's capture order first.
    #[serde(skip)]
    pub stage_keys: Vec<String>,
}

/// Why two captures with token rows had no aligned row to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NothingCompared {
    /// No request of A matched one of B, and no pair of them holds a common position (a
    /// prefix-cache hit that starts after the other side's last token, or two different
    /// prompts captured at different positions).
    NoCommonPositions,
    /// No request matched although some pairs hold common positions: their token ids differ
    /// from the first common position on (different inputs).
    IdsDifferEverywhere,
    /// Requests matched, but no (stage#k, position) is held by both sides (different stages
    /// captured, or disjoint positions of matched requests).
    NoCommonRows,
    /// Every common row lies where the matched requests' ids differ.
    AllDifferentInput,
}

impl NothingCompared {
    /// The reason in words, for the headline.
    pub fn describe(self) -> &'static str {
        match self {
            NothingCompared::NoCommonPositions => {
                "no request of A matched one of B: no pair of them holds a common position"
            }
            NothingCompared::IdsDifferEverywhere => {
                "no request of A matched one of B: their token ids differ from the first common position on (different inputs)"
            }
            NothingCompared::NoCommonRows => {
                "requests matched, but no stage#k and position is captured on both sides"
            }
            NothingCompared::AllDifferentInput => {
                "every row both sides hold lies where the matched requests' token ids differ (different inputs)"
            }
        }
    }
}

/// One matched request's rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestTokens {
    /// The request's id in A.
    pub request_a: String,
    /// Its id in B.
    pub request_b: String,
    /// Aligned rows compared.
    pub rows_compared: u64,
    /// Of those, rows that diverge.
    pub rows_diverging: u64,
    /// The smallest and largest position compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub positions: Option<(u64, u64)>,
    /// The request's first bad token: the earliest stage#k with a diverging row, then the
    /// earliest position.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_bad_token: Option<BadToken>,
    /// Every compared row: (stage ordinal into [`TokenDiff::stage_keys`], position, the
    /// row's difference over its tolerance), in no particular order: the token × stage view's
    /// cells (12 bytes a row).
    #[serde(skip)]
    pub cells: Vec<(u32, u32, f32)>,
}

/// A diverging aligned row: where, which token, and both rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BadToken {
    /// The request's id in A.
    pub request_a: String,
    /// Its id in B.
    pub request_b: String,
    /// The token's 0-based position in its request.
    pub position: u64,
    /// Its token id, where recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_id: Option<i64>,
    /// `stage#k`.
    pub key: String,
    /// `row_changed` (a statistic moved beyond its tolerance), `non_finite` (the NaN/inf
    /// counts differ) or `rows_permuted` (the rows diverging at this stage are the same
    /// multiset in another order: values moved between positions).
    pub kind: &'static str,
    /// The worst statistic's difference over its tolerance.
    pub verdict: RowVerdict,
    /// A's row.
    pub a: RowStats,
    /// B's row.
    pub b: RowStats,
    /// The dtypes of the two records.
    pub dtypes: (String, String),
    /// A's window's rank.
    pub rank: u32,
    /// The windows (manifest paths) and record seqs the rows come from.
    pub source_a: (String, u64),
    /// B's.
    pub source_b: (String, u64),
}

/// Whether both sides hold windows with token rows: then [`align`] and [`pair_by_rows`]
/// apply.
pub fn applies(a: &[Window], b: &[Window]) -> bool {
    let has = |ws: &[Window]| ws.iter().any(|w| w.token_rows.is_some());
    has(a) && has(b)
}

/// `windows` with a row map made from each one's metadata positions where it has none
/// ([`crate::model::dump::TokenRows::from_metadata_positions`]), `None` when no window gets
/// one (nothing to align them by); and what a user must be told of the windows that got none
/// (`side`: "A" or "B"), at most a few lines.
pub fn with_metadata_rows(windows: &[Window], side: &str) -> (Option<Vec<Window>>, Vec<String>) {
    let maps: Vec<Result<crate::model::dump::TokenRows, String>> = windows
        .iter()
        .map(|w| match w.token_rows {
            Some(_) => Err(String::new()),
            None => crate::model::dump::TokenRows::from_metadata_positions(w),
        })
        .collect();
    let refused: Vec<(&Window, &String)> = windows
        .iter()
        .zip(&maps)
        .filter_map(|(w, m)| {
            m.as_ref()
                .err()
                .filter(|why| !why.is_empty())
                .map(|why| (w, why))
        })
        .collect();
    let made = maps.iter().filter(|m| m.is_ok()).count();
    let mut notes = Vec::new();
    if made == 0 {
        notes.push(format!(
            "{side} holds no token rows, and none of its windows a usable metadata `positions=[start, end]` \
             ({}): its forwards cannot be aligned by rows, so windows pair by call number (a chunked \
             run against an unchunked one then differs in shape, not in value)",
            refused.first().map_or("", |(_, why)| why.as_str())
        ));
        return (None, notes);
    }
    const SHOWN: usize = 5;
    for (w, why) in refused.iter().take(SHOWN) {
        notes.push(format!(
            "{}: {why}: this window of {side} is not aligned by rows (it pairs by call number)",
            w.source.display()
        ));
    }
    if refused.len() > SHOWN {
        notes.push(format!(
            "… and {} more windows of {side} without a usable row range",
            refused.len() - SHOWN
        ));
    }
    let windows = windows
        .iter()
        .zip(maps)
        .map(|(w, map)| {
            let mut w = w.clone();
            if let Ok(map) = map {
                w.token_rows = Some(std::sync::Arc::new(map));
            }
            w
        })
        .collect();
    (Some(windows), notes)
}

/// What one stage#k bucket's rows gave.
#[derive(Default)]
struct BucketOutcome {
    only: (u64, u64),
    spread: (u64, u64),
    different_input: u64,
    repeated: (u64, u64),
    /// (pair, position, ratio) of every compared row, in key order.
    compared: Vec<(u32, u32, f32)>,
    /// (pair, diverging rows) of each pair with diverging rows here, in pair order.
    diverging_pairs: Vec<(u32, u64)>,
    /// The diverging rows themselves, in key order: kept only when asked (a capture that
    /// goes wrong early diverges in half its rows, and only each request's first bucket
    /// with a diverging row is needed).
    diverging: Vec<(Row, Row, RowVerdict)>,
}

/// Merge-joins one bucket's rows of A and B (both in key order) and judges the pairs; the
/// windows `skip` marks (A's, B's) are judged whole elsewhere.
fn compare_bucket(
    planned: &Planned,
    bucket: (u32, &[Item], &[Item]),
    requests: &[RequestMatch],
    judge: &judge::RowJudge,
    keep_diverging: bool,
    skip: (&[bool], &[bool]),
) -> BucketOutcome {
    let (stage, items_a, items_b) = bucket;
    let side_a = planned.a.rows(stage, items_a, skip.0);
    let side_b = planned.b.rows(stage, items_b, skip.1);
    let (rows_a, rows_b) = (side_a.rows, side_b.rows);
    let (repeated_a, repeated_b) = (side_a.repeated, side_b.repeated);
    let (wa, wb) = (&planned.a.windows, &planned.b.windows);
    let mut out = BucketOutcome {
        repeated: (repeated_a, repeated_b),
        spread: (side_a.spread, side_b.spread),
        ..BucketOutcome::default()
    };
    let mut floors = judge::FloorCache::default();
    let (mut i, mut j) = (0, 0);
    while i < rows_a.len() || j < rows_b.len() {
        let order = match (rows_a.get(i), rows_b.get(j)) {
            (Some(x), Some(y)) => x.key().cmp(&y.key()),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match order {
            std::cmp::Ordering::Less => {
                out.only.0 += 1;
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.only.1 += 1;
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                let (x, y) = (rows_a[i], rows_b[j]);
                i += 1;
                j += 1;
                if requests[x.pair as usize]
                    .ids_differ_from
                    .is_some_and(|p| x.pos() >= p)
                {
                    out.different_input += 1;
                    continue;
                }
                let (dtype_a, dtype_b) = (&record_of(wa, &x).dtype, &record_of(wb, &y).dtype);
                let (floor, precision_change) = floors.of(dtype_a, dtype_b);
                let verdict = judge.judge(
                    &stats_of(wa, &x),
                    &stats_of(wb, &y),
                    floor,
                    precision_change,
                );
                out.compared
                    .push((x.pair, x.position, verdict.ratio as f32));
                if verdict.diverges() {
                    match out.diverging_pairs.last_mut() {
                        Some((pair, n)) if *pair == x.pair => *n += 1,
                        _ => out.diverging_pairs.push((x.pair, 1)),
                    }
                    if keep_diverging {
                        out.diverging.push((x, y, verdict));
                    }
                }
            }
        }
    }
    out
}

/// Buckets compared at once: their outcomes wait in memory until they are added up.
const BUCKETS_AT_ONCE: usize = 4096;

/// Aligns the token rows of every window of `a` and `b` that has them and compares them
/// under `tolerances`; `None` unless both sides have token rows.
///
/// Bucket by bucket (one stage#k each, in parallel): a bucket's rows are made, sorted and
/// compared on their own, so the rows of a million-record capture are never all in memory.
pub fn align(a: &[Window], b: &[Window], tolerances: &Tolerances) -> Option<TokenDiff> {
    align_with(a, b, tolerances, Some(&pair_by_rows(a, b))).map(|(diff, _)| diff)
}

/// [`align`], given the windows paired whole ([`pair_by_rows`] of `a` and `b`), and the record
/// pairs of those forwards whose rows it judged ([`whole::Judged`]): what the sharpening
/// decides their verdicts by, without judging the rows again.
pub fn align_judged(
    a: &[Window],
    b: &[Window],
    tolerances: &Tolerances,
    paired_whole: &[(usize, usize)],
) -> Option<(TokenDiff, whole::Judged)> {
    align_with(a, b, tolerances, Some(paired_whole))
}

/// [`align`] with every window in the buckets, none judged whole ([`whole`]): the slower
/// path whose answers the whole-forward pass must give, for tests and benchmarks.
#[doc(hidden)]
pub fn align_by_buckets(a: &[Window], b: &[Window], tolerances: &Tolerances) -> Option<TokenDiff> {
    align_with(a, b, tolerances, None).map(|(diff, _)| diff)
}

fn align_with(
    a: &[Window],
    b: &[Window],
    tolerances: &Tolerances,
    paired_whole: Option<&[(usize, usize)]>,
) -> Option<(TokenDiff, whole::Judged)> {
    if !applies(a, b) {
        return None;
    }
    let planned = Planned::of(a, b);
    let requests: Vec<RequestMatch> = planned.matches.iter().map(|(_, _, m)| m.clone()).collect();
    let judge = judge::RowJudge::new(tolerances);
    let (wa, wb) = (&planned.a.windows, &planned.b.windows);
    let mut diff = TokenDiff {
        requests,
        unmatched_a: unmatched(&planned.ra, &planned.pair_of_a),
        unmatched_b: unmatched(&planned.rb, &planned.pair_of_b),
        windows: (wa.len(), wb.len()),
        rows_compared: 0,
        rows_diverging: 0,
        rows_only: (0, 0),
        rows_different_input: 0,
        rows_repeated: (0, 0),
        rows_spread_over_dp: (0, 0),
        positions_inferred: (inferred(wa), inferred(wb)),
        windows_without_statistics: (without_statistics(wa), without_statistics(wb)),
        maps_from_metadata: (maps_from_positions(wa), maps_from_positions(wb)),
        first: None,
        summed: None,
        nothing_compared: None,
        per_request: planned
            .matches
            .iter()
            .map(|(_, _, m)| RequestTokens {
                request_a: m.a.clone(),
                request_b: m.b.clone(),
                rows_compared: 0,
                rows_diverging: 0,
                positions: None,
                first_bad_token: None,
                cells: Vec::new(),
            })
            .collect(),
        stage_keys: Vec::new(),
    };
    // Forwards paired whole are judged record by record ([`whole`]); the buckets hold the rest.
    let whole_pairs =
        paired_whole.map_or_else(Vec::new, |pairs| whole::eligible(&planned, a, b, pairs));
    let mut skip_a = vec![false; wa.len()];
    let mut skip_b = vec![false; wb.len()];
    for &(i, j) in &whole_pairs {
        skip_a[i as usize] = true;
        skip_b[j as usize] = true;
    }
    let skip = (skip_a.as_slice(), skip_b.as_slice());
    let buckets = planned.buckets();
    // Per matched pair: the first bucket with a diverging row of it.
    let mut first_bucket: Vec<Option<usize>> = vec![None; diff.requests.len()];
    for (chunk_index, chunk) in buckets.chunks(BUCKETS_AT_ONCE).enumerate() {
        let outcomes: Vec<BucketOutcome> = chunk
            .par_iter()
            .with_min_len(16)
            .map(|&bucket| compare_bucket(&planned, bucket, &diff.requests, &judge, false, skip))
            .collect();
        for (n, (bucket, outcome)) in chunk.iter().zip(outcomes).enumerate() {
            let stage = bucket.0;
            diff.rows_only.0 += outcome.only.0;
            diff.rows_only.1 += outcome.only.1;
            diff.rows_different_input += outcome.different_input;
            diff.rows_repeated.0 += outcome.repeated.0;
            diff.rows_repeated.1 += outcome.repeated.1;
            diff.rows_spread_over_dp.0 += outcome.spread.0;
            diff.rows_spread_over_dp.1 += outcome.spread.1;
            diff.rows_compared += outcome.compared.len() as u64;
            for (pair, position, ratio) in outcome.compared {
                let request = &mut diff.per_request[pair as usize];
                request.rows_compared += 1;
                let p = u64::from(position);
                request.positions = Some(match request.positions {
                    Some((lo, hi)) => (lo.min(p), hi.max(p)),
                    None => (p, p),
                });
                request.cells.push((stage, position, ratio));
            }
            for (pair, count) in outcome.diverging_pairs {
                diff.rows_diverging += count;
                diff.per_request[pair as usize].rows_diverging += count;
                first_bucket[pair as usize].get_or_insert(chunk_index * BUCKETS_AT_ONCE + n);
            }
        }
    }
    let mut judged = whole::judge(&planned, &whole_pairs, &diff.requests, &judge);
    diff.rows_only.0 += judged.only.0;
    diff.rows_only.1 += judged.only.1;
    diff.rows_different_input += judged.different_input;
    for (pair, rows) in &judged.pairs {
        let request = &mut diff.per_request[*pair as usize];
        diff.rows_compared += rows.compared;
        diff.rows_diverging += rows.diverging;
        request.rows_compared += rows.compared;
        request.rows_diverging += rows.diverging;
        request.positions = match (request.positions, rows.positions) {
            (Some((lo, hi)), Some((l, h))) => Some((lo.min(l), hi.max(h))),
            (x, y) => x.or(y),
        };
    }
    for (pair, cells) in std::mem::take(&mut judged.cells) {
        let request = &mut diff.per_request[pair as usize];
        if request.cells.is_empty() {
            request.cells = cells;
        } else {
            request.cells.extend(cells);
        }
    }
    // Each request's first bad token: from its first bucket with a diverging row compared
    // again, its diverging rows kept this time (they come in key order), and from the
    // forwards judged whole; the earlier stage#k wins, both kept where it is the same.
    let mut diverging: Vec<(Row, Row, RowVerdict)> = Vec::new();
    for (pair, first_at) in first_bucket.iter().enumerate() {
        let mut rows = whole::PairRows::default();
        if let Some(at) = *first_at {
            let outcome = compare_bucket(&planned, buckets[at], &diff.requests, &judge, true, skip);
            for row in outcome.diverging {
                if row.0.pair as usize == pair {
                    rows.offer(row);
                }
            }
        }
        if let Some(whole_rows) = judged.pairs.remove(&(pair as u32)) {
            for row in whole_rows.first {
                rows.offer(row);
            }
        }
        let mut rows = rows.first;
        rows.sort_by_key(|(x, ..)| x.key());
        let Some((x, y, verdict)) = rows.first() else {
            continue;
        };
        let kind = kind_of(x, verdict, &rows, wa, wb, tolerances);
        let bad = bad_token(
            wa,
            wb,
            &planned.ra,
            &diff.requests,
            &planned.stages,
            x,
            y,
            *verdict,
            kind,
        );
        diff.per_request[pair].first_bad_token = Some(bad);
        diverging.push((*x, *y, *verdict));
    }
    // The first divergence over all requests: the earliest stage#k, then request, then
    // position (key order).
    diverging.sort_by_key(|(x, ..)| x.key());
    diff.first = diverging
        .first()
        .and_then(|(x, ..)| diff.per_request[x.pair as usize].first_bad_token.clone());
    // One side without any row statistics: its records against the other's rows summed.
    fn no_statistics<'w>(plan: &SidePlan<'w>) -> Option<Vec<&'w Window>> {
        let count = without_statistics(&plan.windows);
        (count > 0 && count == plan.windows.len()).then(|| plan.windows.clone())
    }
    let (bare_a, bare_b) = (no_statistics(&planned.a), no_statistics(&planned.b));
    diff.summed = match (bare_a, bare_b) {
        (None, Some(whole)) => summed::compare(&planned, &whole, true, tolerances),
        (Some(whole), None) => summed::compare(&planned, &whole, false, tolerances),
        _ => None,
    };
    let summed_compared = diff.summed.as_ref().is_some_and(|s| s.records_compared > 0);
    if diff.rows_compared == 0 && !summed_compared {
        diff.nothing_compared = Some(if !diff.requests.is_empty() {
            if diff.rows_different_input > 0 {
                NothingCompared::AllDifferentInput
            } else {
                NothingCompared::NoCommonRows
            }
        } else if any_common_position(&planned.ra, &planned.rb) {
            NothingCompared::IdsDifferEverywhere
        } else {
            NothingCompared::NoCommonPositions
        });
    }
    diff.stage_keys = planned.stages.keys;
    Some((diff, judged.judged))
}

/// Whether some request of A and some request of B hold a common position.
fn any_common_position(a: &SideRequests, b: &SideRequests) -> bool {
    a.positions.iter().any(|pa| {
        b.positions
            .iter()
            .any(|pb| pa.keys().any(|p| pb.contains_key(p)))
    })
}

/// `rows_permuted` when the rows diverging at the first bad token's stage#k (of its request)
/// are one multiset in two orders (each A row agrees with some B row of the set, ignoring
/// the position-weighted checksum); else `non_finite` or `row_changed`.
fn kind_of(
    first: &Row,
    verdict: &RowVerdict,
    diverging: &[(Row, Row, RowVerdict)],
    wa: &[&Window],
    wb: &[&Window],
    tolerances: &Tolerances,
) -> &'static str {
    if verdict.stat == "nonfinite_count" {
        return "non_finite";
    }
    let set: Vec<&(Row, Row, RowVerdict)> = diverging
        .iter()
        .filter(|(x, ..)| x.stage == first.stage && x.pair == first.pair)
        .collect();
    if set.len() < 2 {
        return "row_changed";
    }
    // Rows that agree with their own partner but for the position-weighted checksum did not
    // move (a checksum difference, as across a precision change): not a permutation.
    let agrees_aside_checksum = |x: &Row, y: &Row| {
        let sa = stats_of(wa, x);
        let mut sb = stats_of(wb, y);
        sb.row_checksum = sa.row_checksum;
        !judge::judge(
            &sa,
            &sb,
            &record_of(wa, x).dtype,
            &record_of(wb, y).dtype,
            tolerances,
        )
        .diverges()
    };
    if set.iter().all(|(x, y, _)| agrees_aside_checksum(x, y)) {
        return "row_changed";
    }
    let mut used = vec![false; set.len()];
    for (x, ..) in &set {
        let sa = stats_of(wa, x);
        let dtype_a = &record_of(wa, x).dtype;
        let found = set.iter().enumerate().position(|(n, (_, y, _))| {
            if used[n] {
                return false;
            }
            let mut sb = stats_of(wb, y);
            sb.row_checksum = sa.row_checksum; // weighted by position: it moves with the row
            !judge::judge(&sa, &sb, dtype_a, &record_of(wb, y).dtype, tolerances).diverges()
        });
        match found {
            Some(n) => used[n] = true,
            None => return "row_changed",
        }
    }
    "rows_permuted"
}

#[allow(clippy::too_many_arguments)]
fn bad_token(
    wa: &[&Window],
    wb: &[&Window],
    ra: &SideRequests,
    requests: &[RequestMatch],
    stages: &Stages,
    x: &Row,
    y: &Row,
    verdict: RowVerdict,
    kind: &'static str,
) -> BadToken {
    let m = &requests[x.pair as usize];
    let token_id = ra
        .index(&m.a)
        .and_then(|i| ra.tokens[i].get(&x.pos()).copied());
    let (rec_a, rec_b) = (record_of(wa, x), record_of(wb, y));
    BadToken {
        request_a: m.a.clone(),
        request_b: m.b.clone(),
        position: x.pos(),
        token_id,
        key: stages.keys[x.stage as usize].clone(),
        kind,
        verdict,
        a: stats_of(wa, x),
        b: stats_of(wb, y),
        dtypes: (rec_a.dtype.to_string(), rec_b.dtype.to_string()),
        rank: wa[x.window as usize].rank,
        source_a: (
            wa[x.window as usize].source.display().to_string(),
            rec_a.seq,
        ),
        source_b: (
            wb[y.window as usize].source.display().to_string(),
            rec_b.seq,
        ),
    }
}

fn stats_of(windows: &[&Window], row: &Row) -> RowStats {
    let rows = windows[row.window as usize]
        .token_rows
        .as_ref()
        .expect("a keyed row's window has token rows");
    let at = row.at as usize;
    RowStats::of(&rows.values[at..at + crate::model::dump::ROW_WIDTH])
}

fn record_of<'w>(windows: &[&'w Window], row: &Row) -> &'w Record {
    &windows[row.window as usize].records[row.record as usize]
}

fn unmatched(side: &SideRequests, pair_of: &[Option<u32>]) -> Vec<String> {
    side.names
        .iter()
        .zip(pair_of)
        .filter(|(_, p)| p.is_none())
        .map(|(n, _)| n.clone())
        .collect()
}

fn without_statistics(windows: &[&Window]) -> usize {
    windows
        .iter()
        .filter(|w| w.token_rows.as_ref().is_some_and(|t| t.records.is_empty()))
        .count()
}

fn maps_from_positions(windows: &[&Window]) -> usize {
    windows
        .iter()
        .filter(|w| w.token_rows.as_ref().is_some_and(|t| t.from_metadata))
        .count()
}

fn inferred(windows: &[&Window]) -> bool {
    windows
        .iter()
        .any(|w| w.token_rows.as_ref().is_some_and(|t| t.positions_inferred))
}

/// Both rows behind one cell of the token view: request `pair` (index into
/// [`TokenDiff::requests`]) at `stage_key` (`stage#k`) and `position`, re-collected from the
/// windows (`a`, `b` as given to [`align`]); `None` where a side holds no such row.
pub fn rows_at(
    a: &[Window],
    b: &[Window],
    pair: usize,
    stage_key: &str,
    position: u64,
) -> Option<CellRows> {
    let planned = Planned::of(a, b);
    let (name, k) = stage_of(stage_key)?;
    let stages = &planned.stages;
    let stage = *stages.ordinal.get(&(*stages.names.get(&name)?, k))?;
    let bucket = planned
        .buckets()
        .into_iter()
        .find(|bucket| bucket.0 == stage)?;
    let key = (pair as u32, u32::try_from(position).ok()?);
    // The first row of the key in sorted order (after it: other shards of the same token).
    let find = |plan: &SidePlan, items: &[Item]| {
        let rows = plan.rows(stage, items, &[]).rows;
        let at = rows.partition_point(|r| (r.pair, r.position) < key);
        rows.get(at)
            .filter(|r| (r.pair, r.position) == key)
            .copied()
    };
    let (x, y) = (find(&planned.a, bucket.1)?, find(&planned.b, bucket.2)?);
    let (wa, wb) = (&planned.a.windows, &planned.b.windows);
    Some(CellRows {
        a: stats_of(wa, &x),
        b: stats_of(wb, &y),
        dtypes: (
            record_of(wa, &x).dtype.to_string(),
            record_of(wb, &y).dtype.to_string(),
        ),
    })
}

/// `("stage", k)` of `"stage#k"`.
fn stage_of(key: &str) -> Option<(String, u32)> {
    let (stage, k) = key.rsplit_once('#')?;
    Some((stage.to_string(), k.parse().ok()?))
}

/// The two rows of one aligned (request, stage#k, position).
#[derive(Debug, Clone, PartialEq)]
pub struct CellRows {
    /// A's row.
    pub a: RowStats,
    /// B's row.
    pub b: RowStats,
    /// The records' dtypes.
    pub dtypes: (String, String),
}
