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
pub mod requests;
pub mod sharpen;

use std::collections::HashMap;

/// Hash maps over keys from the (untrusted) manifests: foldhash, seeded per process (as
/// the diff's own).
pub(crate) type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

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
    /// Some window's first position was counted on from its label's earlier calls rather
    /// than given by the capture (A, B).
    pub positions_inferred: (bool, bool),
    /// Windows with a row map but no row statistics (statistics off, or a sidecar that could
    /// not be read: see the load warnings), per side: their rows are not compared, so the
    /// first bad token may lie there.
    pub windows_without_statistics: (usize, usize),
    /// The first divergence over all requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<BadToken>,
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
    /// row's difference over its tolerance), in stage then position order: the token × stage
    /// view's cells (12 bytes a row).
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

/// One row of one side, keyed (32 bytes: a million records of 16 rows are 16M of them).
#[derive(Debug, Clone, Copy, Default)]
struct Row {
    /// Ordinal of stage#k in A's capture order (B's own stages after).
    stage: u32,
    /// Index of the matched request pair.
    pair: u32,
    /// The token's position (saturating at `u32::MAX`).
    position: u32,
    /// Which shard of a token's row the window holds ([`shard_of`]).
    shard: u32,
    window: u32,
    record: u32,
    /// Index of the row's first value in its window's sidecar values.
    at: u32,
    /// The record declared its rows' positions (a KV-cache read): every forward holds them
    /// again, which is no recompute.
    declared: bool,
}

impl Row {
    fn key(&self) -> (u32, u32, u32, u32) {
        (self.stage, self.pair, self.position, self.shard)
    }

    fn pos(&self) -> u64 {
        u64::from(self.position)
    }
}

/// Stage names and stage#k ordinals, shared by both sides: A's capture order, then B's
/// stages A lacks.
#[derive(Default)]
struct Stages {
    names: Map<String, u32>,
    ordinal: Map<(u32, u32), u32>,
    keys: Vec<String>,
    name_list: Vec<String>,
}

impl Stages {
    fn name(&mut self, stage: &str) -> u32 {
        if let Some(&n) = self.names.get(stage) {
            return n;
        }
        let n = self.name_list.len() as u32;
        self.name_list.push(stage.to_string());
        self.names.insert(stage.to_string(), n);
        n
    }

    fn of(&mut self, name: u32, k: u32) -> u32 {
        if let Some(&o) = self.ordinal.get(&(name, k)) {
            return o;
        }
        let o = self.keys.len() as u32;
        self.keys
            .push(format!("{}#{k}", self.name_list[name as usize]));
        self.ordinal.insert((name, k), o);
        o
    }
}

/// Which shard of a token's row a window holds: its ranks in the tensor- and
/// expert-parallel groups (a token's row is split over them, and without a merge each rank
/// is compared with the same rank); data- and pipeline-parallel ranks hold whole rows of
/// their own tokens or stages, so a request matches wherever it ran. A window without a
/// declared layout is its own rank's.
fn shard_of(w: &Window) -> u32 {
    match w.parallel() {
        Ok(layout) if !layout.is_empty() => {
            let rank = |axis: &str| layout.get(axis).map_or(0, |p| p.0 & 0x7FFF);
            rank("tp") | (rank("ep") << 15)
        }
        _ => w.rank | (1 << 31),
    }
}

/// The windows of one side that hold token rows, in forward order (label, call, attempt).
fn with_rows(windows: &[Window]) -> Vec<&Window> {
    let mut out: Vec<&Window> = windows
        .iter()
        .filter(|w| w.token_rows.as_ref().is_some_and(|t| !t.map.is_empty()))
        .collect();
    out.sort_by_key(|w| (w.rank, w.match_index, w.occurrence, w.attempt));
    out
}

/// Whether both sides hold windows with token rows: then [`align`] and [`pair_by_rows`]
/// apply.
pub fn applies(a: &[Window], b: &[Window]) -> bool {
    let has = |ws: &[Window]| ws.iter().any(|w| w.token_rows.is_some());
    has(a) && has(b)
}

/// The rows each window holds, as (matched pair, position) sorted, or `None` where a row
/// belongs to a request without a partner (the window cannot pair whole).
fn row_set(w: &Window, pair_of: &Map<&str, u32>) -> Option<Vec<(u32, u64)>> {
    let rows = w.token_rows.as_ref()?;
    let mut set = Vec::new();
    for (entry, position) in rows.forward_rows() {
        let Some(request) = &rows.map[entry as usize].request else {
            continue; // padding: never compared
        };
        set.push((*pair_of.get(request.as_str())?, position));
    }
    set.sort_unstable();
    Some(set)
}

/// Pairs A's windows with B's that hold the same matched (request, position) rows and no
/// rows of unmatched requests, the same rank first: `(a index, b index)` into the given
/// slices. Windows without token rows are left to the other pairing.
pub fn pair_by_rows(a: &[Window], b: &[Window]) -> Vec<(usize, usize)> {
    let (ra, rb) = (
        SideRequests::of(&a.iter().collect::<Vec<_>>()),
        SideRequests::of(&b.iter().collect::<Vec<_>>()),
    );
    let matches = requests::match_requests(&ra, &rb);
    let mut pair_a: Map<&str, u32> = Map::default();
    let mut pair_b: Map<&str, u32> = Map::default();
    for (n, (i, j, _)) in matches.iter().enumerate() {
        pair_a.insert(ra.names[*i].as_str(), n as u32);
        pair_b.insert(rb.names[*j].as_str(), n as u32);
    }
    let sets_b: Vec<Option<Vec<(u32, u64)>>> = b.iter().map(|w| row_set(w, &pair_b)).collect();
    let mut used = vec![false; b.len()];
    let mut out = Vec::new();
    for (i, w) in a.iter().enumerate() {
        let Some(set) = row_set(w, &pair_a).filter(|s| !s.is_empty()) else {
            continue;
        };
        let candidates = |same_rank: bool| {
            (0..b.len()).find(|&j| {
                !used[j] && (!same_rank || b[j].rank == w.rank) && sets_b[j].as_ref() == Some(&set)
            })
        };
        if let Some(j) = candidates(true).or_else(|| candidates(false)) {
            used[j] = true;
            out.push((i, j));
        }
    }
    out
}

/// Both sides' windows with token rows, their requests matched, and every record with token
/// rows placed in its stage#k bucket: what [`align`] compares bucket by bucket and
/// [`rows_at`] looks a cell up in.
struct Planned<'w> {
    ra: SideRequests,
    rb: SideRequests,
    matches: Vec<(usize, usize, RequestMatch)>,
    /// Per request of A (of B): the index of its matched pair.
    pair_of_a: Vec<Option<u32>>,
    pair_of_b: Vec<Option<u32>>,
    stages: Stages,
    a: SidePlan<'w>,
    b: SidePlan<'w>,
}

impl<'w> Planned<'w> {
    fn of(a: &'w [Window], b: &'w [Window]) -> Planned<'w> {
        let (wa, wb) = (with_rows(a), with_rows(b));
        let (ra, rb) = (SideRequests::of(&wa), SideRequests::of(&wb));
        let matches = requests::match_requests(&ra, &rb);
        let mut pair_of_a = vec![None; ra.names.len()];
        let mut pair_of_b = vec![None; rb.names.len()];
        for (n, (i, j, _)) in matches.iter().enumerate() {
            pair_of_a[*i] = Some(n as u32);
            pair_of_b[*j] = Some(n as u32);
        }
        let mut stages = Stages::default();
        let plan_a = SidePlan::of(wa, &ra, &pair_of_a, &mut stages);
        let plan_b = SidePlan::of(wb, &rb, &pair_of_b, &mut stages);
        Planned {
            ra,
            rb,
            matches,
            pair_of_a,
            pair_of_b,
            stages,
            a: plan_a,
            b: plan_b,
        }
    }

    /// Every stage#k ordinal held by either side with A's and B's items, in ordinal order.
    fn buckets(&self) -> Vec<(u32, &[Item], &[Item])> {
        let (ia, ib) = (&self.a.items, &self.b.items);
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        while i < ia.len() || j < ib.len() {
            let stage = match (ia.get(i), ib.get(j)) {
                (Some(x), Some(y)) => x.0.min(y.0),
                (Some(x), None) => x.0,
                (None, Some(y)) => y.0,
                (None, None) => break,
            };
            let (i0, j0) = (i, j);
            while ia.get(i).is_some_and(|x| x.0 == stage) {
                i += 1;
            }
            while ib.get(j).is_some_and(|y| y.0 == stage) {
                j += 1;
            }
            out.push((stage, &self.a.item_list[i0..i], &self.b.item_list[j0..j]));
        }
        out
    }
}

/// A record's rows in a stage#k bucket: a record of the forward's own rows whole
/// (`row == WHOLE`), or one row of a record at declared positions (a KV-cache read, whose
/// rows' k count per position).
#[derive(Debug, Clone, Copy)]
struct Item {
    window: u32,
    block: u32,
    row: u32,
}

const WHOLE: u32 = u32::MAX;

/// One side's windows with token rows and, per stage#k ordinal, the records (or declared
/// rows) that hold it; the rows themselves are only made bucket by bucket.
struct SidePlan<'w> {
    windows: Vec<&'w Window>,
    /// Per window: its forward's rows `(map entry, position)`.
    forward: Vec<Vec<(u32, u64)>>,
    /// Per window, per map entry: the matched pair of its request (padding, unmatched: None).
    entry_pair: Vec<Vec<Option<u32>>>,
    /// Per window: [`shard_of`].
    shard: Vec<u32>,
    /// Per window, per row block: the index of its record.
    block_record: Vec<Vec<u32>>,
    /// `(stage ordinal, index into item_list)`, sorted by ordinal (stably: forward order).
    items: Vec<(u32, u32)>,
    /// The items in `items`' order.
    item_list: Vec<Item>,
}

impl<'w> SidePlan<'w> {
    /// Places every record with token rows of `windows` (forward order) in its bucket; the
    /// stage#k ordinals are shared through `stages` (A's first, so A's capture order).
    fn of(
        windows: Vec<&'w Window>,
        requests: &SideRequests,
        pair_of: &[Option<u32>],
        stages: &mut Stages,
    ) -> SidePlan<'w> {
        let mut plan = SidePlan {
            forward: Vec::with_capacity(windows.len()),
            entry_pair: Vec::with_capacity(windows.len()),
            shard: windows.iter().map(|w| shard_of(w)).collect(),
            block_record: Vec::with_capacity(windows.len()),
            items: Vec::new(),
            item_list: Vec::new(),
            windows,
        };
        let mut placed: Vec<(u32, Item)> = Vec::new();
        for (wi, w) in plan.windows.iter().enumerate() {
            let token_rows = w
                .token_rows
                .as_ref()
                .expect("with_rows keeps windows with rows");
            let entry_pair: Vec<Option<u32>> = token_rows
                .map
                .iter()
                .map(|e| {
                    let request = e.request.as_deref()?;
                    requests.index(request).and_then(|i| pair_of[i])
                })
                .collect();
            let by_seq: Map<u64, u32> = w
                .records
                .iter()
                .enumerate()
                .map(|(i, r)| (r.seq, i as u32))
                .collect();
            // The k of stage#k: a record of the forward's own rows is its stage's k-th such
            // record; rows at declared positions count per (stage, entry, position).
            let mut forward_calls: Map<u32, u32> = Map::default();
            let mut declared_calls: Map<(u32, u32, u64), u32> = Map::default();
            let mut block_record = Vec::with_capacity(token_rows.records.len());
            for (bi, block) in token_rows.records.iter().enumerate() {
                let Some(&ri) = by_seq.get(&block.seq) else {
                    block_record.push(u32::MAX);
                    continue;
                };
                block_record.push(ri);
                let name = stages.name(w.records[ri as usize].stage.as_ref());
                let item = |row| Item {
                    window: wi as u32,
                    block: bi as u32,
                    row,
                };
                match &block.positions {
                    None => {
                        let k = forward_calls.entry(name).or_insert(0);
                        *k += 1;
                        placed.push((stages.of(name, *k), item(WHOLE)));
                    }
                    Some(positions) => {
                        for (n, &(entry, position)) in
                            positions.iter().take(block.rows as usize).enumerate()
                        {
                            if entry_pair.get(entry as usize).copied().flatten().is_none() {
                                continue;
                            }
                            let k = declared_calls.entry((name, entry, position)).or_insert(0);
                            *k += 1;
                            placed.push((stages.of(name, *k), item(n as u32)));
                        }
                    }
                }
            }
            plan.forward.push(token_rows.forward_rows());
            plan.entry_pair.push(entry_pair);
            plan.block_record.push(block_record);
        }
        placed.sort_by_key(|(stage, _)| *stage); // stable: forward order within a bucket
        plan.items = placed
            .iter()
            .enumerate()
            .map(|(n, (stage, _))| (*stage, n as u32))
            .collect();
        plan.item_list = placed.into_iter().map(|(_, item)| item).collect();
        plan
    }

    /// The rows of `items` (one bucket: stage ordinal `stage`), sorted by (request,
    /// position, shard); a key held twice keeps the later forward's row. Returns the rows
    /// and how many were dropped as repeats of a forward's own rows.
    fn rows(&self, stage: u32, items: &[Item]) -> (Vec<Row>, u64) {
        let mut rows: Vec<Row> = Vec::new();
        for it in items {
            let wi = it.window as usize;
            let w = self.windows[wi];
            let token_rows = w.token_rows.as_ref().expect("a planned window has rows");
            let block = &token_rows.records[it.block as usize];
            let record = self.block_record[wi][it.block as usize];
            let row = |n: usize, entry: u32, position: u64, declared: bool| {
                let pair = self.entry_pair[wi].get(entry as usize).copied().flatten()?;
                Some(Row {
                    stage,
                    pair,
                    position: u32::try_from(position).unwrap_or(u32::MAX),
                    shard: self.shard[wi],
                    window: it.window,
                    record,
                    at: ((block.first_row as usize + n) * crate::model::dump::ROW_WIDTH) as u32,
                    declared,
                })
            };
            if it.row == WHOLE {
                rows.extend(
                    token_rows
                        .rows_of(block, &self.forward[wi])
                        .enumerate()
                        .filter_map(|(n, ((entry, position), _))| row(n, entry, position, false)),
                );
            } else {
                let n = it.row as usize;
                let end = (block.first_row as usize + n + 1) * crate::model::dump::ROW_WIDTH;
                let (entry, position) = block.positions.as_ref().expect("a declared row")[n];
                if end <= token_rows.values.len() {
                    rows.extend(row(n, entry, position, true));
                }
            }
        }
        // Stable: rows of one key keep their forward order, the last is the latest.
        rows.sort_by_key(|r| (r.pair, r.position, r.shard));
        let mut kept: Vec<Row> = Vec::with_capacity(rows.len());
        let mut repeated = 0;
        for row in rows {
            match kept.last_mut() {
                Some(last) if last.key() == row.key() => {
                    repeated += u64::from(!last.declared && !row.declared);
                    *last = row;
                }
                _ => kept.push(row),
            }
        }
        (kept, repeated)
    }
}

/// What one stage#k bucket's rows gave.
#[derive(Default)]
struct BucketOutcome {
    only: (u64, u64),
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

/// Merge-joins one bucket's rows of A and B (both in key order) and judges the pairs.
fn compare_bucket(
    planned: &Planned,
    bucket: (u32, &[Item], &[Item]),
    requests: &[RequestMatch],
    judge: &judge::RowJudge,
    keep_diverging: bool,
) -> BucketOutcome {
    let (stage, items_a, items_b) = bucket;
    let (rows_a, repeated_a) = planned.a.rows(stage, items_a);
    let (rows_b, repeated_b) = planned.b.rows(stage, items_b);
    let (wa, wb) = (&planned.a.windows, &planned.b.windows);
    let mut out = BucketOutcome {
        repeated: (repeated_a, repeated_b),
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
                let floor = floors.of(dtype_a, dtype_b);
                let verdict = judge.judge(
                    &stats_of(wa, &x),
                    &stats_of(wb, &y),
                    floor,
                    dtype_a != dtype_b,
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
        positions_inferred: (inferred(wa), inferred(wb)),
        windows_without_statistics: (without_statistics(wa), without_statistics(wb)),
        first: None,
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
    let buckets = planned.buckets();
    // Per matched pair: the first bucket with a diverging row of it.
    let mut first_bucket: Vec<Option<usize>> = vec![None; diff.requests.len()];
    for (chunk_index, chunk) in buckets.chunks(BUCKETS_AT_ONCE).enumerate() {
        let outcomes: Vec<BucketOutcome> = chunk
            .par_iter()
            .with_min_len(16)
            .map(|&bucket| compare_bucket(&planned, bucket, &diff.requests, &judge, false))
            .collect();
        for (n, (bucket, outcome)) in chunk.iter().zip(outcomes).enumerate() {
            let stage = bucket.0;
            diff.rows_only.0 += outcome.only.0;
            diff.rows_only.1 += outcome.only.1;
            diff.rows_different_input += outcome.different_input;
            diff.rows_repeated.0 += outcome.repeated.0;
            diff.rows_repeated.1 += outcome.repeated.1;
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
    // Each request's first bad token, from its first bucket with a diverging row compared
    // again, its diverging rows kept this time (they come in key order).
    let mut diverging: Vec<(Row, Row, RowVerdict)> = Vec::new();
    for (pair, at) in first_bucket.iter().enumerate() {
        let Some(at) = *at else { continue };
        let outcome = compare_bucket(&planned, buckets[at], &diff.requests, &judge, true);
        let rows: Vec<(Row, Row, RowVerdict)> = outcome
            .diverging
            .into_iter()
            .filter(|(x, ..)| x.pair as usize == pair)
            .collect();
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
    if diff.rows_compared == 0 {
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
    Some(diff)
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
        let (rows, _) = plan.rows(stage, items);
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
