//! Forwards paired whole, their rows judged once.
//!
//! Two windows that hold the same matched (request, position) rows ([`super::pair_by_rows`])
//! compare record by record along their forward's rows: the k-th capture of a stage on one
//! side against the k-th on the other, row i of A's forward against the row of B's forward at
//! the same request and position, with no keys made and nothing sorted. One pass gives what
//! the alignment reports of those rows (cells, counts, each request's first bad token) and the
//! evidence by which the sharpening decides the record pairs' verdicts
//! ([`super::sharpen::decide_judged`]); the bucket alignment keeps every other window.
//!
//! A window pair is judged here only where that gives the bucket alignment's answer: both
//! windows have row statistics, every record of the forward's own rows holds them whole, no
//! data-parallel layout is declared, they are the same shard, no other window of their side
//! holds any of their forward's (request, position, shard) keys (so no row is a repeat that a
//! later forward would replace), and no row at declared positions (a cache read, a merged
//! group's listed rows, on either side) has the stage#k, request, position and shard of one of
//! their rows. Records at declared positions stay with the buckets.

use rayon::prelude::*;

use super::judge::{FloorCache, RowJudge, RowStats, RowVerdict, STAT_NAMES};
use super::plan::{Map, Planned, Row, SidePlan, WHOLE, join_sorted};
use super::requests::RequestMatch;
use super::sharpen::rows_kind;
use crate::model::analysis::row_evidence::RowEvidence;
use crate::model::dump::{ROW_WIDTH, Window};

/// A record pair's rows, judged once.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgedRecord {
    /// B's record paired with it (stage#k against stage#k).
    pub seq_b: u64,
    /// What its rows showed.
    pub evidence: RowEvidence,
    /// Rows of matched requests on each side (A, B).
    pub rows: (usize, usize),
    /// Both records' rows are all of their tensors' ([`super::sharpen::holds_every_row`]).
    pub complete: bool,
}

/// A record pair's judgment as it waits for the sharpening (a million of them wait while the
/// record diff runs: 48 bytes each, no string; [`JudgedRecord`] is made when taken).
#[derive(Debug, Clone, Copy)]
struct Compact {
    seq_a: u64,
    seq_b: u64,
    compared: u32,
    diverging: u32,
    /// Index into [`KINDS`]; `u8::MAX` once taken.
    kind: u8,
    /// Index into [`STATS`] of the first diverging row's worst statistic.
    worst_stat: u8,
    /// Both records' rows are all of their tensors'.
    complete: bool,
    first_pair: u32,
    first_position: u64,
    worst_ratio: f64,
}

const KINDS: [&str; 3] = ["rows_agree", "row_changed", "rows_permuted"];
const STATS: [&str; 5] = ["max_abs", "l2", "sum", "row_checksum", "nonfinite_count"];

/// The record pairs of the windows paired whole whose rows were judged in the alignment, by
/// A's window and record.
#[derive(Debug, Default)]
pub struct Judged {
    /// A's window (its address in the slice given to the alignment) → its record pairs,
    /// sorted by `seq_a`.
    by_window: Map<usize, Vec<Compact>>,
    /// Per matched pair: the request as B names it (the evidence names the first row so).
    names: std::sync::Arc<Vec<String>>,
}

impl Judged {
    /// How many of A's windows had their record pairs judged here.
    pub fn windows(&self) -> usize {
        self.by_window.len()
    }

    /// Takes window `a`'s judged record pairs out (empty where none were judged).
    pub fn take(&mut self, a: &Window) -> JudgedWindow {
        JudgedWindow {
            records: self.by_window.remove(&address(a)).unwrap_or_default(),
            names: self.names.clone(),
        }
    }
}

/// One A window's record pairs judged in the alignment, by `seq_a`.
#[derive(Debug, Default)]
pub struct JudgedWindow {
    records: Vec<Compact>,
    names: std::sync::Arc<Vec<String>>,
}

impl JudgedWindow {
    /// Takes the judged pair of A's record `seq_a`, where it is paired with B's `seq_b`.
    pub fn take(&mut self, seq_a: u64, seq_b: u64) -> Option<JudgedRecord> {
        let at = self
            .records
            .binary_search_by_key(&seq_a, |r| r.seq_a)
            .ok()?;
        let c = &mut self.records[at];
        if c.seq_b != seq_b || c.kind == u8::MAX {
            return None;
        }
        let kind = KINDS[c.kind as usize];
        c.kind = u8::MAX;
        let diverging = c.diverging > 0;
        Some(JudgedRecord {
            seq_b,
            evidence: RowEvidence {
                compared: u64::from(c.compared),
                diverging: u64::from(c.diverging),
                kind,
                first: diverging.then(|| {
                    let name = self
                        .names
                        .get(c.first_pair as usize)
                        .cloned()
                        .unwrap_or_default();
                    (name, c.first_position)
                }),
                worst: diverging.then(|| RowVerdict {
                    ratio: c.worst_ratio,
                    stat: STATS[c.worst_stat as usize],
                }),
                replaced: None,
            },
            rows: (c.compared as usize, c.compared as usize),
            complete: c.complete,
        })
    }
}

fn address(w: &Window) -> usize {
    std::ptr::from_ref(w) as usize
}

/// The window pairs (indices into `planned`'s windows) judged here: the pairs `paired_whole`
/// ([`super::pair_by_rows`] over `a` and `b`, the slices `planned` was made of) that meet the
/// conditions of the module doc.
pub(super) fn eligible(
    planned: &Planned,
    a: &[Window],
    b: &[Window],
    paired_whole: &[(usize, usize)],
) -> Vec<(u32, u32)> {
    let index = |plan: &SidePlan| -> Map<usize, u32> {
        plan.windows
            .iter()
            .enumerate()
            .map(|(i, w)| (address(w), i as u32))
            .collect()
    };
    let (index_a, index_b) = (index(&planned.a), index(&planned.b));
    let (unique_a, unique_b) = (unique_keys(&planned.a), unique_keys(&planned.b));
    let (declared_a, declared_b) = (declared_keys(&planned.a), declared_keys(&planned.b));
    paired_whole
        .iter()
        .filter_map(|&(i, j)| {
            let wi = *index_a.get(&address(&a[i]))?;
            let wj = *index_b.get(&address(&b[j]))?;
            // A declared row of either side meets the other side's rows in its bucket.
            let fits = |plan: &SidePlan, w: u32, unique: &[bool]| {
                let ordinals = &plan.block_ordinal[w as usize];
                unique[w as usize]
                    && plan.dp[w as usize].is_none()
                    && whole_blocks(plan, w)
                    && !meets_declared(plan, w, ordinals, &declared_a)
                    && !meets_declared(plan, w, ordinals, &declared_b)
            };
            (fits(&planned.a, wi, &unique_a)
                && fits(&planned.b, wj, &unique_b)
                && planned.a.shard[wi as usize] == planned.b.shard[wj as usize]
                && matched_rows(&planned.a, wi)
                    .is_some_and(|rows| Some(rows) == matched_rows(&planned.b, wj)))
            .then_some((wi, wj))
        })
        .collect()
}

/// Window `w`'s forward rows as (matched pair, position), sorted, padding aside; `None` where a
/// row belongs to a request without a partner under the alignment's matching.
fn matched_rows(plan: &SidePlan, w: u32) -> Option<Vec<(u32, u64)>> {
    let wi = w as usize;
    let map = &plan.windows[wi].token_rows.as_ref()?.map;
    let mut rows = Vec::with_capacity(plan.forward[wi].len());
    for &(entry, position) in &plan.forward[wi] {
        if map.get(entry as usize)?.request.is_none() {
            continue; // padding
        }
        rows.push((
            plan.entry_pair[wi].get(entry as usize).copied().flatten()?,
            position,
        ));
    }
    rows.sort_unstable();
    Some(rows)
}

/// Per window of `plan`: whether no other window of the side (nor the window itself twice)
/// holds any of its forward's (pair, position, shard) keys.
fn unique_keys(plan: &SidePlan) -> Vec<bool> {
    let mut count: Map<(u32, u64, u32), u32> = Map::default();
    for wi in 0..plan.windows.len() {
        for &(entry, position) in &plan.forward[wi] {
            if let Some(pair) = plan.entry_pair[wi].get(entry as usize).copied().flatten() {
                *count.entry((pair, position, plan.shard[wi])).or_insert(0) += 1;
            }
        }
    }
    (0..plan.windows.len())
        .map(|wi| {
            plan.forward[wi].iter().all(|&(entry, position)| {
                match plan.entry_pair[wi].get(entry as usize).copied().flatten() {
                    Some(pair) => count.get(&(pair, position, plan.shard[wi])) == Some(&1),
                    None => true,
                }
            })
        })
        .collect()
}

/// The keys (pair, position, shard) of the rows at declared positions of a side, per stage#k
/// ordinal.
type Declared = Map<u32, Map<(u32, u64, u32), ()>>;

/// [`Declared`] of `plan`'s side.
fn declared_keys(plan: &SidePlan) -> Declared {
    let mut out: Declared = Map::default();
    for &(ordinal, n) in &plan.items {
        let item = plan.item_list[n as usize];
        if item.row == WHOLE {
            continue;
        }
        let wi = item.window as usize;
        let Some(rows) = plan.windows[wi].token_rows.as_ref() else {
            continue;
        };
        let Some(&(entry, position)) = rows.records[item.block as usize]
            .positions
            .as_ref()
            .and_then(|p| p.get(item.row as usize))
        else {
            continue;
        };
        if let Some(pair) = plan.entry_pair[wi].get(entry as usize).copied().flatten() {
            out.entry(ordinal)
                .or_default()
                .insert((pair, position, plan.shard[wi]), ());
        }
    }
    out
}

/// Whether a row of window `w`'s own records (block ordinals `ordinals`) has the stage#k and
/// key of a row at declared positions (of either side: `declared` is one side's): a bucket
/// would pair or replace them.
fn meets_declared(plan: &SidePlan, w: u32, ordinals: &[u32], declared: &Declared) -> bool {
    if declared.is_empty() {
        return false;
    }
    let wi = w as usize;
    let keys: Vec<(u32, u64, u32)> = plan.forward[wi]
        .iter()
        .filter_map(|&(entry, position)| {
            let pair = plan.entry_pair[wi].get(entry as usize).copied().flatten()?;
            Some((pair, position, plan.shard[wi]))
        })
        .collect();
    ordinals.iter().any(|o| {
        declared
            .get(o)
            .is_some_and(|set| keys.iter().any(|k| set.contains_key(k)))
    })
}

/// Whether window `w` has row statistics and every record of its forward's own rows holds
/// them whole, within the sidecar (records at declared positions stay with the buckets).
fn whole_blocks(plan: &SidePlan, w: u32) -> bool {
    let wi = w as usize;
    let Some(rows) = plan.windows[wi].token_rows.as_ref() else {
        return false;
    };
    let forward = plan.forward[wi].len();
    !rows.records.is_empty()
        && rows
            .records
            .iter()
            .zip(&plan.block_record[wi])
            .all(|(block, &record)| {
                block.positions.is_some()
                    || (record != u32::MAX
                        && block.rows as usize == forward
                        && (block.first_row as usize + forward) * ROW_WIDTH <= rows.values.len())
            })
}

/// What one request's rows in one window pair gave.
#[derive(Debug, Default)]
pub(super) struct PairRows {
    pub(super) compared: u64,
    pub(super) diverging: u64,
    /// The smallest and largest position compared.
    pub(super) positions: Option<(u64, u64)>,
    /// The diverging rows at the earliest stage#k with one (its first in key order first).
    pub(super) first: Vec<(Row, Row, RowVerdict)>,
}

impl PairRows {
    /// Keeps `row` if its stage is the earliest seen with a diverging row.
    pub(super) fn offer(&mut self, row: (Row, Row, RowVerdict)) {
        match self.first.first().map(|f| f.0.stage) {
            Some(stage) if stage < row.0.stage => {}
            Some(stage) if stage == row.0.stage => self.first.push(row),
            _ => self.first = vec![row],
        }
    }

    pub(super) fn add(&mut self, other: PairRows) {
        self.compared += other.compared;
        self.diverging += other.diverging;
        self.positions = match (self.positions, other.positions) {
            (Some((lo, hi)), Some((l, h))) => Some((lo.min(l), hi.max(h))),
            (x, y) => x.or(y),
        };
        for row in other.first {
            self.offer(row);
        }
    }
}

/// What judging the window pairs gave.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    /// Rows held by A alone, by B alone (a stage#k the other window lacks).
    pub(super) only: (u64, u64),
    /// Rows where the matched requests' token ids differ: not compared.
    pub(super) different_input: u64,
    /// Per matched pair: its rows.
    pub(super) pairs: Map<u32, PairRows>,
    /// Per matched pair: its cells (stage ordinal, position, ratio), in no particular order.
    pub(super) cells: Map<u32, Vec<(u32, u32, f32)>>,
    /// The record pairs judged, for the sharpening.
    pub(super) judged: Judged,
}

/// Judges the rows of the window pairs `pairs` (from [`eligible`]).
pub(super) fn judge(
    planned: &Planned,
    pairs: &[(u32, u32)],
    requests: &[RequestMatch],
    judge: &RowJudge,
) -> Outcome {
    let outcomes: Vec<(usize, WindowOutcome)> = pairs
        .par_iter()
        .map(|&(i, j)| {
            let outcome = window_pair(
                planned,
                (i, j),
                (
                    &planned.a.block_ordinal[i as usize],
                    &planned.b.block_ordinal[j as usize],
                ),
                requests,
                judge,
            );
            (address(planned.a.windows[i as usize]), outcome)
        })
        .collect();
    let mut out = Outcome::default();
    out.judged.names = std::sync::Arc::new(requests.iter().map(|m| m.b.clone()).collect());
    // The cells of each request in one allocation: a request's only window pair's moved,
    // others' gathered.
    let mut sizes: Map<u32, (usize, usize)> = Map::default();
    for (_, o) in &outcomes {
        for (pair, cells) in &o.cells {
            let (windows, size) = sizes.entry(*pair).or_insert((0, 0));
            *windows += 1;
            *size += cells.len();
        }
    }
    for (pair, (windows, size)) in sizes {
        if windows > 1 {
            out.cells.insert(pair, Vec::with_capacity(size));
        }
    }
    for (window, o) in outcomes {
        out.only.0 += o.only.0;
        out.only.1 += o.only.1;
        out.different_input += o.different_input;
        for (pair, rows) in o.pairs {
            out.pairs.entry(pair).or_default().add(rows);
        }
        for (pair, cells) in o.cells {
            match out.cells.entry(pair) {
                std::collections::hash_map::Entry::Occupied(mut gathered) => {
                    gathered.get_mut().extend(cells)
                }
                std::collections::hash_map::Entry::Vacant(only) => {
                    only.insert(cells);
                }
            }
        }
        out.judged.by_window.insert(window, o.judged);
    }
    out
}

#[derive(Default)]
struct WindowOutcome {
    only: (u64, u64),
    different_input: u64,
    pairs: Map<u32, PairRows>,
    cells: Map<u32, Vec<(u32, u32, f32)>>,
    judged: Vec<Compact>,
}

/// One window pair's rows, record pair by record pair.
fn window_pair(
    planned: &Planned,
    (i, j): (u32, u32),
    (ordinals_a, ordinals_b): (&[u32], &[u32]),
    requests: &[RequestMatch],
    judge: &RowJudge,
) -> WindowOutcome {
    let (wi, wj) = (i as usize, j as usize);
    let (wa, wb) = (planned.a.windows[wi], planned.b.windows[wj]);
    let (ta, tb) = (
        wa.token_rows.as_ref().expect("a planned window has rows"),
        wb.token_rows.as_ref().expect("a planned window has rows"),
    );
    let join = forward_join(&planned.a, &planned.b, (wi, wj), requests);
    let mut out = WindowOutcome::default();
    let b_block: Map<u32, usize> = ordinals_b
        .iter()
        .enumerate()
        .filter(|(_, o)| **o != u32::MAX)
        .map(|(n, &o)| (o, n))
        .collect();
    let mut held_by_a: Vec<bool> = vec![false; ordinals_b.len()];
    let mut floors = FloorCache::default();
    let (mut stats_a, mut stats_b) = (Vec::new(), Vec::new());
    let mut diverging: Vec<(usize, usize, RowVerdict)> = Vec::new();
    let rows = join.len();
    let segments = segments(&join, requests);
    let in_order = join
        .iter()
        .enumerate()
        .all(|(n, &(ia, ib, ..))| ia == n && ib == n);
    let (mut gathered_a, mut gathered_b) = (Vec::new(), Vec::new());
    let mut verdicts: Vec<(f64, u8)> = Vec::with_capacity(rows);
    // Each compared row gets a cell per record pair: reserved once, not grown.
    for seg in &segments {
        if seg.compared_end > seg.start {
            out.cells
                .entry(seg.pair)
                .or_default()
                .reserve(ordinals_a.len() * (seg.compared_end - seg.start));
        }
    }
    let different_input: u64 = segments
        .iter()
        .map(|seg| (seg.end - seg.compared_end) as u64)
        .sum();
    for (bi, &stage) in ordinals_a.iter().enumerate() {
        if stage == u32::MAX {
            continue;
        }
        let Some(&bj) = b_block.get(&stage) else {
            out.only.0 += rows as u64;
            continue;
        };
        held_by_a[bj] = true;
        out.different_input += different_input;
        let (block_a, block_b) = (&ta.records[bi], &tb.records[bj]);
        let (record_a, record_b) = (
            planned.a.block_record[wi][bi],
            planned.b.block_record[wj][bj],
        );
        let (rec_a, rec_b) = (
            &wa.records[record_a as usize],
            &wb.records[record_b as usize],
        );
        let (floor, precision_change) = floors.of(&rec_a.dtype, &rec_b.dtype);
        let at_a = |row: usize| (block_a.first_row as usize + row) * ROW_WIDTH;
        let at_b = |row: usize| (block_b.first_row as usize + row) * ROW_WIDTH;
        let stats = |n: usize| {
            let (ia, ib, ..) = join[n];
            (
                RowStats::of(&ta.values[at_a(ia)..at_a(ia) + ROW_WIDTH]),
                RowStats::of(&tb.values[at_b(ib)..at_b(ib) + ROW_WIDTH]),
            )
        };
        // Every row's verdict at once, in the join's order (the rows themselves where the
        // join keeps both forwards' order, as it does when both hold one request each).
        let (rows_a, rows_b) = if in_order {
            (
                &ta.values[at_a(0)..at_a(rows)],
                &tb.values[at_b(0)..at_b(rows)],
            )
        } else {
            gathered_a.clear();
            gathered_b.clear();
            for &(ia, ib, ..) in &join {
                gathered_a.extend_from_slice(&ta.values[at_a(ia)..at_a(ia) + ROW_WIDTH]);
                gathered_b.extend_from_slice(&tb.values[at_b(ib)..at_b(ib) + ROW_WIDTH]);
            }
            (gathered_a.as_slice(), gathered_b.as_slice())
        };
        judge.judge_rows(rows_a, rows_b, floor, precision_change, &mut verdicts);
        diverging.clear();
        // One request's rows at a time: its counts and cells looked up once, not per row.
        for seg in &segments {
            let (cells, counts) = if seg.compared_end > seg.start {
                (
                    Some(out.cells.entry(seg.pair).or_default()),
                    Some(out.pairs.entry(seg.pair).or_default()),
                )
            } else {
                (None, None)
            };
            let (mut cells, mut counts) = (cells, counts);
            for n in seg.start..seg.end {
                let verdict = RowVerdict {
                    ratio: verdicts[n].0,
                    stat: STAT_NAMES[verdicts[n].1 as usize],
                };
                if verdict.diverges() {
                    diverging.push((n, n, verdict));
                }
                // The alignment's account: rows past the first differing token id are
                // different inputs, not compared (the record's evidence still weighs them, as
                // before).
                if n >= seg.compared_end {
                    continue;
                }
                let position32 = u32::try_from(join[n].3).unwrap_or(u32::MAX);
                if let Some(cells) = cells.as_mut() {
                    cells.push((stage, position32, verdict.ratio as f32));
                }
                if let (true, Some(counts)) = (verdict.diverges(), counts.as_mut()) {
                    counts.diverging += 1;
                    let (ia, ib, pair, _) = join[n];
                    let row = |side: &SidePlan, w: u32, record: u32, at: usize| Row {
                        stage,
                        pair,
                        position: position32,
                        shard: side.shard[w as usize],
                        window: w,
                        record,
                        at: at as u32,
                        declared: false,
                        spread: false,
                    };
                    counts.offer((
                        row(&planned.a, i, record_a, at_a(ia)),
                        row(&planned.b, j, record_b, at_b(ib)),
                        verdict,
                    ));
                }
            }
            if let Some(counts) = counts {
                counts.compared += (seg.compared_end - seg.start) as u64;
                let (lo, hi) = (join[seg.start].3, join[seg.compared_end - 1].3);
                counts.positions = Some(match counts.positions {
                    Some((l, h)) => (l.min(lo), h.max(hi)),
                    None => (lo, hi),
                });
            }
        }
        // The rows' statistics are wanted only to tell a permutation from a change.
        stats_a.clear();
        stats_b.clear();
        if diverging.len() >= 2 {
            for n in 0..rows {
                let (x, y) = stats(n);
                stats_a.push(x);
                stats_b.push(y);
            }
        }
        let kind = rows_kind(
            (&stats_a, &stats_b),
            &diverging,
            judge,
            floor,
            precision_change,
        );
        let (first_pair, first_position, worst) = diverging.first().map_or(
            (
                0,
                0,
                RowVerdict {
                    ratio: 0.0,
                    stat: STATS[0],
                },
            ),
            |&(n, _, verdict)| (join[n].2, join[n].3, verdict),
        );
        out.judged.push(Compact {
            seq_a: rec_a.seq,
            seq_b: rec_b.seq,
            compared: rows as u32,
            diverging: diverging.len() as u32,
            kind: KINDS.iter().position(|k| *k == kind).unwrap_or(1) as u8,
            worst_stat: STATS.iter().position(|s| *s == worst.stat).unwrap_or(0) as u8,
            complete: super::sharpen::holds_every_row(block_a, &rec_a.shape)
                && super::sharpen::holds_every_row(block_b, &rec_b.shape),
            first_pair,
            first_position,
            worst_ratio: worst.ratio,
        });
    }
    out.only.1 += held_by_a
        .iter()
        .zip(ordinals_b)
        .filter(|(held, o)| !**held && **o != u32::MAX)
        .count() as u64
        * rows as u64;
    for counts in out.pairs.values_mut() {
        counts.first.sort_by_key(|(x, ..)| x.key());
    }
    out.judged.sort_by_key(|r| r.seq_a);
    out
}

/// A run of the join's rows of one matched pair, in position order: `start..compared_end`
/// are compared, `compared_end..end` lie at or past the first token id that differs between
/// the two requests (different inputs).
struct Segment {
    pair: u32,
    start: usize,
    compared_end: usize,
    end: usize,
}

/// The join ([`forward_join`]) cut into runs of one matched pair.
fn segments(join: &[(usize, usize, u32, u64)], requests: &[RequestMatch]) -> Vec<Segment> {
    let mut out: Vec<Segment> = Vec::new();
    for (n, &(_, _, pair, position)) in join.iter().enumerate() {
        let differs = requests[pair as usize]
            .ids_differ_from
            .is_some_and(|p| position >= p);
        match out.last_mut() {
            Some(seg) if seg.pair == pair && seg.end == n => {
                seg.end = n + 1;
                if !differs && seg.compared_end == n {
                    seg.compared_end = n + 1;
                }
            }
            _ => out.push(Segment {
                pair,
                start: n,
                compared_end: if differs { n } else { n + 1 },
                end: n + 1,
            }),
        }
    }
    out
}

/// The forward rows both windows hold, as (A's forward row, B's forward row, pair,
/// position) in (request as B names it, position) order: the sharpening's order, so the
/// records' evidence names the same first row.
fn forward_join(
    a: &SidePlan,
    b: &SidePlan,
    (wi, wj): (usize, usize),
    requests: &[RequestMatch],
) -> Vec<(usize, usize, u32, u64)> {
    let keys = |plan: &SidePlan, w: usize| {
        let mut keys: Vec<((u32, u64), usize)> = plan.forward[w]
            .iter()
            .enumerate()
            .filter_map(|(n, &(entry, position))| {
                let pair = plan.entry_pair[w].get(entry as usize).copied().flatten()?;
                Some(((pair, position), n))
            })
            .collect();
        keys.sort_unstable();
        keys
    };
    let mut join: Vec<(usize, usize, u32, u64)> = join_sorted(&keys(a, wi), &keys(b, wj))
        .into_iter()
        .map(|((pair, position), x, y)| (x, y, pair, position))
        .collect();
    join.sort_by(|p, q| {
        (requests[p.2 as usize].b.as_str(), p.3).cmp(&(requests[q.2 as usize].b.as_str(), q.3))
    });
    join
}
