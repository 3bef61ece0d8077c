//! The alignment's plan: both sides' windows with token rows, their requests matched, and
//! every record with token rows placed in its stage#k bucket ([`Planned`]); the rows
//! themselves ([`Row`]) are made bucket by bucket.

use std::collections::HashMap;

use super::requests::{self, RequestMatch, SideRequests};
use crate::model::dump::{Record, Window};

/// Hash maps over keys from the (untrusted) manifests: foldhash, seeded per process (as
/// the diff's own).
pub(crate) type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// One row of one side, keyed (32 bytes: a million records of 16 rows are 16M of them).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Row {
    /// Ordinal of stage#k in A's capture order (B's own stages after).
    pub(super) stage: u32,
    /// Index of the matched request pair.
    pub(super) pair: u32,
    /// The token's position (saturating at `u32::MAX`).
    pub(super) position: u32,
    /// Which shard of a token's row the window holds ([`shard_of`]).
    pub(super) shard: u32,
    pub(super) window: u32,
    pub(super) record: u32,
    /// Index of the row's first value in its window's sidecar values.
    pub(super) at: u32,
    /// The record declared its rows' positions (a KV-cache read): every forward holds them
    /// again, which is no recompute.
    pub(super) declared: bool,
    /// The same (stage#k, request, position) is held by another data-parallel rank in the
    /// same forward (data-parallel attention gathers every rank's tokens): not compared.
    pub(super) spread: bool,
}

impl Row {
    pub(super) fn key(&self) -> (u32, u32, u32, u32) {
        (self.stage, self.pair, self.position, self.shard)
    }

    pub(super) fn pos(&self) -> u64 {
        u64::from(self.position)
    }
}

/// Stage names and stage#k ordinals, shared by both sides: A's capture order, then B's
/// stages A lacks.
#[derive(Default)]
pub(super) struct Stages {
    pub(super) names: Map<String, u32>,
    pub(super) ordinal: Map<(u32, u32), u32>,
    pub(super) keys: Vec<String>,
    pub(super) name_list: Vec<String>,
}

impl Stages {
    pub(super) fn name(&mut self, stage: &str) -> u32 {
        if let Some(&n) = self.names.get(stage) {
            return n;
        }
        let n = self.name_list.len() as u32;
        self.name_list.push(stage.to_string());
        self.names.insert(stage.to_string(), n);
        n
    }

    pub(super) fn of(&mut self, name: u32, k: u32) -> u32 {
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

/// The entries of `a` and `b` (each sorted by key, a key at most once) with equal keys, as
/// (key, A's value, B's value) in key order: a merge join.
pub(super) fn join_sorted<K: Ord + Copy, V: Copy>(a: &[(K, V)], b: &[(K, V)]) -> Vec<(K, V, V)> {
    let mut out = Vec::with_capacity(a.len().min(b.len()));
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push((a[i].0, a[i].1, b[j].1));
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// Which shard of a token's row a window holds: its ranks in the tensor- and
/// expert-parallel groups (a token's row is split over them, and without a merge each rank
/// is compared with the same rank); data- and pipeline-parallel ranks hold whole rows of
/// their own tokens or stages, so a request matches wherever it ran. A window without a
/// declared layout is its own rank's, rank 0's being tp and ep rank 0 whatever the layout
/// (so a one-process run matches a request on any data-parallel rank).
pub(super) fn shard_of(w: &Window) -> u32 {
    match w.parallel() {
        Ok(layout) if !layout.is_empty() => {
            let rank = |axis: &str| layout.get(axis).map_or(0, |p| p.0 & 0x7FFF);
            rank("tp") | (rank("ep") << 15)
        }
        _ if w.rank == 0 => 0,
        _ => w.rank | (1 << 31),
    }
}

/// The windows of one side that hold token rows, in forward order (label, call, attempt).
pub(super) fn with_rows(windows: &[Window]) -> Vec<&Window> {
    let mut out: Vec<&Window> = windows
        .iter()
        .filter(|w| w.token_rows.as_ref().is_some_and(|t| !t.map.is_empty()))
        .collect();
    out.sort_by_key(|w| (w.rank, w.match_index, w.occurrence, w.attempt));
    out
}
/// Both sides' windows with token rows, their requests matched, and every record with token
/// rows placed in its stage#k bucket: what [`align`] compares bucket by bucket and
/// [`rows_at`] looks a cell up in.
pub(super) struct Planned<'w> {
    pub(super) ra: SideRequests,
    pub(super) rb: SideRequests,
    pub(super) matches: Vec<(usize, usize, RequestMatch)>,
    /// Per request of A (of B): the index of its matched pair.
    pub(super) pair_of_a: Vec<Option<u32>>,
    pub(super) pair_of_b: Vec<Option<u32>>,
    pub(super) stages: Stages,
    pub(super) a: SidePlan<'w>,
    pub(super) b: SidePlan<'w>,
}

impl<'w> Planned<'w> {
    pub(super) fn of(a: &'w [Window], b: &'w [Window]) -> Planned<'w> {
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
    pub(super) fn buckets(&self) -> Vec<(u32, &[Item], &[Item])> {
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
pub(super) struct Item {
    pub(super) window: u32,
    pub(super) block: u32,
    pub(super) row: u32,
}

pub(super) const WHOLE: u32 = u32::MAX;

/// One side's windows with token rows and, per stage#k ordinal, the records (or declared
/// rows) that hold it; the rows themselves are only made bucket by bucket.
pub(super) struct SidePlan<'w> {
    pub(super) windows: Vec<&'w Window>,
    /// Per window: its forward's rows `(map entry, position)`.
    pub(super) forward: Vec<Vec<(u32, u64)>>,
    /// Per window, per map entry: the matched pair of its request (padding, unmatched: None).
    pub(super) entry_pair: Vec<Vec<Option<u32>>>,
    /// Per window: [`shard_of`].
    pub(super) shard: Vec<u32>,
    /// Per window, per row block: the index of its record.
    pub(super) block_record: Vec<Vec<u32>>,
    /// Per window, per row block of the forward's own rows: its stage#k ordinal (`u32::MAX`
    /// for a block at declared positions, or one whose record is missing).
    pub(super) block_ordinal: Vec<Vec<u32>>,
    /// `(stage ordinal, index into item_list)`, sorted by ordinal (stably: forward order).
    pub(super) items: Vec<(u32, u32)>,
    /// The items in `items`' order.
    pub(super) item_list: Vec<Item>,
    /// Per window: its data-parallel rank, where its layout declares one, and its forward
    /// (label, match, call, attempt) as an index: rows of one forward on two dp ranks are
    /// data-parallel attention's.
    pub(super) dp: Vec<Option<(u32, u32)>>,
}

/// Finds a window's record by `seq` for its row blocks: by walking both lists where both are
/// in `seq` order (as the probe writes them), else through a map.
enum RecordBySeq<'w> {
    Walk { records: &'w [Record], at: usize },
    Map(Map<u64, u32>),
}

impl<'w> RecordBySeq<'w> {
    fn of(w: &'w Window, blocks: &[crate::model::dump::RowBlock]) -> RecordBySeq<'w> {
        let records = w.records.as_slice();
        if records.windows(2).all(|p| p[0].seq < p[1].seq)
            && blocks.windows(2).all(|p| p[0].seq < p[1].seq)
        {
            return RecordBySeq::Walk { records, at: 0 };
        }
        RecordBySeq::Map(
            records
                .iter()
                .enumerate()
                .map(|(i, r)| (r.seq, i as u32))
                .collect(),
        )
    }

    /// The index of the record `seq`; called with ascending `seq` when walking.
    fn find(&mut self, seq: u64) -> Option<u32> {
        match self {
            RecordBySeq::Walk { records, at } => {
                while records.get(*at).is_some_and(|r| r.seq < seq) {
                    *at += 1;
                }
                (records.get(*at)?.seq == seq).then_some(*at as u32)
            }
            RecordBySeq::Map(map) => map.get(&seq).copied(),
        }
    }
}

/// One stage#k bucket's rows of one side ([`SidePlan::rows`]).
pub(super) struct BucketRows {
    /// Sorted by (request, position, shard), one per key.
    pub(super) rows: Vec<Row>,
    /// Rows dropped as a later forward's repeat of a forward's own rows.
    pub(super) repeated: u64,
    /// Keys held by several data-parallel ranks in one forward, not compared (left out of
    /// `rows`).
    pub(super) spread: u64,
}

impl<'w> SidePlan<'w> {
    /// Places every record with token rows of `windows` (forward order) in its bucket; the
    /// stage#k ordinals are shared through `stages` (A's first, so A's capture order).
    pub(super) fn of(
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
            block_ordinal: Vec::with_capacity(windows.len()),
            items: Vec::new(),
            item_list: Vec::new(),
            dp: dp_places(&windows),
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
            let mut record_of = RecordBySeq::of(w, &token_rows.records);
            // The k of stage#k: a record of the forward's own rows is its stage's k-th such
            // record; rows at declared positions count per (stage, entry, position).
            let mut forward_calls: Map<u32, u32> = Map::default();
            let mut declared_calls: Map<(u32, u32, u64), u32> = Map::default();
            let mut block_record = Vec::with_capacity(token_rows.records.len());
            let mut block_ordinal = vec![u32::MAX; token_rows.records.len()];
            for (bi, block) in token_rows.records.iter().enumerate() {
                let Some(ri) = record_of.find(block.seq) else {
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
                        let ordinal = stages.of(name, *k);
                        block_ordinal[bi] = ordinal;
                        placed.push((ordinal, item(WHOLE)));
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
            plan.block_ordinal.push(block_ordinal);
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
    /// position, shard); a key held twice keeps the later forward's row, and a key held by
    /// two data-parallel ranks in one forward is left out ([`BucketRows`]). The records of the
    /// forward's own rows of the windows `skip` marks (judged whole elsewhere:
    /// [`super::whole`]) are left out.
    pub(super) fn rows(&self, stage: u32, items: &[Item], skip: &[bool]) -> BucketRows {
        let mut rows: Vec<Row> = Vec::new();
        for it in items {
            let wi = it.window as usize;
            if it.row == WHOLE && skip.get(wi).copied().unwrap_or(false) {
                continue;
            }
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
                    spread: false,
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
        let (mut repeated, mut spread) = (0, 0);
        for row in rows {
            match kept.last_mut() {
                Some(last) if last.key() == row.key() => {
                    let own = !last.declared && !row.declared;
                    if own && self.other_dp_rank_same_forward(last.window, row.window) {
                        spread += u64::from(!last.spread);
                        last.spread = true;
                        continue;
                    }
                    repeated += u64::from(own);
                    let was_spread = last.spread;
                    *last = row;
                    last.spread = was_spread;
                }
                _ => kept.push(row),
            }
        }
        kept.retain(|r| !r.spread);
        BucketRows {
            rows: kept,
            repeated,
            spread,
        }
    }

    /// Whether windows `x` and `y` are one forward on two data-parallel ranks.
    fn other_dp_rank_same_forward(&self, x: u32, y: u32) -> bool {
        match (self.dp[x as usize], self.dp[y as usize]) {
            (Some((rank_x, forward_x)), Some((rank_y, forward_y))) => {
                rank_x != rank_y && forward_x == forward_y
            }
            _ => false,
        }
    }
}

/// Per window: `(dp rank, forward index)` where its layout declares a dp group of more than
/// one rank; the forward index numbers the distinct (label, match, call, attempt).
fn dp_places(windows: &[&Window]) -> Vec<Option<(u32, u32)>> {
    let mut forwards: Map<(&str, u32, u32, u32), u32> = Map::default();
    windows
        .iter()
        .map(|w| {
            let layout = w.parallel().ok()?;
            let &(rank, size) = layout.get("dp")?;
            if size < 2 {
                return None;
            }
            let next = forwards.len() as u32;
            let forward = *forwards
                .entry((w.label.as_str(), w.match_index, w.occurrence, w.attempt))
                .or_insert(next);
            Some((rank, forward))
        })
        .collect()
}
