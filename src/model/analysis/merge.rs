//! Merging the windows of one parallel group into one logical window, from the records'
//! statistics alone (docs/diff.md, "Across parallel layouts").
//!
//! A TP=2 capture holds, per rank, slices (`tp:D`), partial sums (`partial:tp`) and replicated
//! tensors (`replicated:tp`) of what a TP=1 capture holds whole. The statistics of the whole
//! follow from the pieces': NaN/inf/finite counts add, `min`/`max` are the extremes,
//! `max_abs` the largest, the sum (so the mean) adds, `l2` is the root of the summed squares,
//! the position checksum adds (the probe weights a slice at the full tensor's coordinates).
//! A partial sum merges its sum and checksum only. A stage missing on one rank of the group
//! is missing evidence, never a smaller tensor.
//!
//! A pipeline (`pp`) group holds different stages on each rank, not pieces of one: its
//! windows are concatenated in pp order into one logical window ([`concat_group`]). Data
//! parallel (`dp`) ranks hold different requests and stay separate windows. An `ep` group is
//! merged as a `tp` group is (its `partial:ep` and `replicated:ep` records), except where it
//! spans data-parallel ranks.
//!
//! Axes whose groups coincide (vLLM without data parallelism: `tp` and `ep` over the same
//! ranks) or nest are one group, not independent axes ([`overlapping_axes`]): they never split
//! a group, and a group merged over one axis merges the records of an axis that is the same
//! group too.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::model::analysis::groups::{Overlap, overlapping_axes};
use crate::model::analysis::merge_rows::{RowMerge, RowsBuilder};
use crate::model::dump::{Piece, Placement, Record, Shard, Stats, Warning, Window, dims, strides};

/// The group axes merged when the two sides' group sizes differ, in the order they are merged:
/// the tp, cp and ep pieces within each pipeline stage first, then the pp stages concatenated.
pub const MERGED_AXES: [&str; 4] = ["tp", "cp", "ep", "pp"];

/// One group of windows merged into one logical window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupMerge {
    /// The axis merged over (`tp`, `cp`, `ep`, `pp`).
    pub axis: String,
    /// Other axes whose groups are this group ([`Overlap::Same`]: `ep` over the ranks of the
    /// `tp` group): their records are merged with the group's, and they split no group.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub same_group: Vec<String>,
    /// The group size the windows recorded.
    pub size: u32,
    /// Global ranks of the windows merged, in group-rank order.
    pub ranks: Vec<u32>,
    /// The files of those windows (manifest paths), in the same order.
    pub sources: Vec<String>,
    /// Group ranks (0-based) with no window: their sharded stages are missing evidence.
    pub missing_ranks: Vec<u32>,
    /// Global ranks of this side's windows that were captured but placed in no group of this
    /// axis (a layout not read, no entry for the axis, a group rank another window claimed):
    /// when a group rank is missing, one of these is the likelier cause than a rank left out
    /// of the capture.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unplaced: Vec<u32>,
    /// The logical rank the merged window is paired under.
    pub logical_rank: u32,
    /// The window merged: its label, match and occurrence (a side can hold several requests).
    pub label: String,
    /// `match` of the window merged.
    #[serde(rename = "match")]
    pub match_index: u32,
    /// `occurrence` of the window merged.
    pub occurrence: u32,
    /// `stage#occurrence` keys merged from several ranks' pieces (slices and partial sums).
    pub merged: usize,
    /// `replicated` keys, where the lowest group rank's record stands for all.
    pub replicated: usize,
    /// `pp`: records appended from the pp ranks after the first (their stages, in pp order);
    /// 0 for tp and cp.
    #[serde(skip_serializing_if = "is_zero")]
    pub concatenated: usize,
    /// Why the group's windows are not pieces of one run (other token ids on a rank, windows
    /// of different attempts): the merged window cannot stand for the group.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inconsistent: Vec<String>,
    /// Problems found while merging (a shard missing on a rank, shapes that do not add up,
    /// group sizes that disagree), each naming the stage and ranks; those stages are left out
    /// of the merged window (missing evidence).
    pub warnings: Vec<String>,
    /// Records whose token rows could not be merged (a rank without rows, rows that do not
    /// fit, ranks whose row maps disagree), each naming the record or ranks: the records
    /// themselves are merged and compared whole; only their rows are lost.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rows_not_merged: Vec<String>,
}

/// What merging did to one side.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SideMerge {
    /// One entry per group merged.
    pub groups: Vec<GroupMerge>,
    /// Windows whose `metadata.parallel` could not be read (named by file): kept per rank.
    pub invalid: Vec<String>,
}

impl GroupMerge {
    /// What to do about `missing_ranks`: capture every rank, unless windows were captured
    /// and not placed ([`GroupMerge::unplaced`]), which the other warnings explain.
    pub fn missing_advice(&self) -> String {
        missing_advice(&self.unplaced)
    }
}

fn missing_advice(unplaced: &[u32]) -> String {
    if unplaced.is_empty() {
        "capture every rank: DUMP_PROBE_RANKS=all".to_string()
    } else {
        format!(
            "global rank{} {} {} captured but not placed in this group: a layout not read, no entry \
             for the axis, or a group rank claimed twice; see the other warnings",
            if unplaced.len() == 1 { "" } else { "s" },
            rank_list(unplaced.iter().copied()),
            if unplaced.len() == 1 { "was" } else { "were" }
        )
    }
}

impl SideMerge {
    /// Each problem merging left (a group rank not captured, a stage not merged, a layout not
    /// read) as a lost-evidence warning on the group's first file, `side` (`A`, `B`) and the
    /// group named: the `--json` documents' top-level `warnings` carry them.
    pub fn warnings(&self, side: &str) -> Vec<Warning> {
        let mut out = Vec::new();
        for g in &self.groups {
            let file = g.sources.first().cloned().unwrap_or_default();
            let ranks = rank_list(g.ranks.iter().copied());
            let group = format!("{side}: {} group of {} (ranks {ranks})", g.axis, g.size);
            if !g.missing_ranks.is_empty() {
                out.push(Warning::lost(
                    &file,
                    format!(
                        "{group}: {} rank{} {} not captured: its sharded stages are missing \
                         evidence ({})",
                        g.axis,
                        if g.missing_ranks.len() == 1 { "" } else { "s" },
                        rank_list(g.missing_ranks.iter().copied()),
                        g.missing_advice()
                    ),
                ));
            }
            for why in &g.inconsistent {
                out.push(Warning::lost(&file, format!("{group}: {why}")));
            }
            for w in &g.warnings {
                out.push(Warning::lost(&file, format!("{group}: not merged: {w}")));
            }
            for w in &g.rows_not_merged {
                out.push(Warning::lost(&file, format!("{group}: {w}")));
            }
        }
        for invalid in &self.invalid {
            let file = invalid.split(": ").next().unwrap_or_default();
            out.push(Warning::lost(
                file,
                format!("{side}: layout not read, kept per rank: {invalid}"),
            ));
        }
        out
    }
}

/// The group size of `axis` on a side: the largest recorded, 1 where none is.
pub fn group_size(windows: &[Window], axis: &str) -> u32 {
    windows
        .iter()
        .filter_map(|w| w.parallel().ok()?.get(axis).map(|&(_, n)| n))
        .max()
        .unwrap_or(1)
}

/// The axes whose group sizes differ between A and B: the diff merges over these. An `ep`
/// group that spans data-parallel ranks on either side ([`spans_dp`]) is not merged: its ranks
/// hold other requests' tokens, not pieces of one forward.
pub fn axes_to_merge(a: &[Window], b: &[Window]) -> Vec<&'static str> {
    MERGED_AXES
        .into_iter()
        .filter(|axis| group_size(a, axis) != group_size(b, axis))
        .filter(|&axis| axis != "ep" || !(spans_dp(a, axis) || spans_dp(b, axis)))
        .collect()
}

/// Whether `axis`'s groups hold ranks of several data-parallel ranks: a `dp` group of two or
/// more ranks that is not independent of it ([`overlapping_axes`]).
fn spans_dp(windows: &[Window], axis: &str) -> bool {
    group_size(windows, "dp") > 1 && overlapping_axes(windows, axis).contains_key("dp")
}

/// Merges the windows of every group of `axes` on one side (renumbering the logical ranks
/// densely, in order of the groups' lowest global rank, so that the two sides pair).
pub fn merge_side(windows: &[Window], axes: &[&str]) -> (Vec<Window>, SideMerge) {
    let mut current: Vec<Window> = windows.to_vec();
    let mut report = SideMerge {
        invalid: windows.iter().filter_map(|w| w.parallel().err()).collect(),
        ..SideMerge::default()
    };
    for axis in axes {
        let (next, groups) = merge_axis(&current, axis);
        current = next;
        // A window merged earlier (a tp group within a pp stage) may itself have been absorbed
        // now: its group follows the window it went into, so that what it lost is told there.
        let absorbed: BTreeMap<u32, u32> = groups
            .iter()
            .flat_map(|g| g.ranks.iter().map(move |&r| (r, g.logical_rank)))
            .collect();
        for g in &mut report.groups {
            if let Some(&into) = absorbed.get(&g.logical_rank) {
                g.logical_rank = into;
            }
        }
        report.groups.extend(groups);
    }
    let mut ranks: Vec<u32> = current.iter().map(|w| w.rank).collect();
    ranks.sort_unstable();
    ranks.dedup();
    for w in &mut current {
        w.rank = ranks.binary_search(&w.rank).map_or(w.rank, |i| i as u32);
    }
    for g in &mut report.groups {
        g.logical_rank = ranks
            .binary_search(&g.logical_rank)
            .map_or(g.logical_rank, |i| i as u32);
    }
    (current, report)
}

/// The key windows of one group share: the request window and every other axis's place.
type GroupKey = (String, u32, u32, Vec<(String, u32, u32)>);

fn merge_axis(windows: &[Window], axis: &str) -> (Vec<Window>, Vec<GroupMerge>) {
    let mut groups: BTreeMap<GroupKey, Vec<(u32, u32, &Window)>> = BTreeMap::new();
    let mut out = Vec::new();
    let mut notes = Vec::new();
    // Axes whose groups are this axis's own or nest with them: not part of the key (their
    // rank differs across one group's ranks).
    let linked = overlapping_axes(windows, axis);
    // Windows of this side with no place on the axis while others have one.
    let stray: Vec<u32> = windows
        .iter()
        .filter(|w| w.parallel().map_or(true, |l| !l.contains_key(axis)))
        .map(|w| w.rank)
        .collect();
    for w in windows {
        let layout = w.parallel().unwrap_or_default();
        // A group of one holds whole tensors already: nothing to merge.
        let Some(&(rank_in_group, size)) = layout.get(axis).filter(|&&(_, n)| n > 1) else {
            out.push(w.clone());
            continue;
        };
        let others: Vec<(String, u32, u32)> = layout
            .iter()
            .filter(|(k, _)| k.as_str() != axis && !linked.contains_key(*k))
            .map(|(k, &(r, n))| (k.clone(), r, n))
            .collect();
        groups
            .entry((w.label.clone(), w.match_index, w.occurrence, others))
            .or_default()
            .push((rank_in_group, size, w));
    }
    for (_, mut members) in groups {
        members.sort_by_key(|&(r, _, w)| (r, w.rank));
        let (window, mut note) = if axis == "pp" {
            concat_group(&members, &stray)
        } else {
            merge_group(axis, &linked, &members, &stray)
        };
        note.same_group = linked
            .iter()
            .filter(|(_, o)| **o == Overlap::Same)
            .map(|(k, _)| k.clone())
            .collect();
        out.push(window);
        notes.push(note);
    }
    out.sort_by_key(|w| (w.rank, w.match_index, w.occurrence));
    (out, notes)
}

/// One window per group rank of a group of `size` (a second claiming the same place is left
/// out, with a warning), and the group ranks with no window.
fn place<'a>(
    axis: &str,
    size: u32,
    members: &[(u32, u32, &'a Window)],
    warnings: &mut Vec<String>,
) -> (Vec<Option<&'a Window>>, Vec<u32>) {
    let mut by_rank: Vec<Option<&Window>> = vec![None; size as usize];
    for &(r, _, w) in members {
        match &mut by_rank[r as usize] {
            slot @ None => *slot = Some(w),
            Some(first) => warnings.push(format!(
                "ranks {} and {} both claim {axis} rank {r}; rank {} left out",
                first.rank, w.rank, w.rank
            )),
        }
    }
    let missing = (0..size)
        .filter(|&r| by_rank[r as usize].is_none())
        .collect();
    (by_rank, missing)
}

/// `stray` and the members a claimed group rank left out, sorted: windows captured but not
/// placed ([`GroupMerge::unplaced`]).
fn unplaced(
    stray: &[u32],
    members: &[(u32, u32, &Window)],
    by_rank: &[Option<&Window>],
) -> Vec<u32> {
    let placed: Vec<u32> = by_rank.iter().flatten().map(|w| w.rank).collect();
    let mut out: Vec<u32> = stray
        .iter()
        .copied()
        .chain(
            members
                .iter()
                .map(|m| m.2.rank)
                .filter(|r| !placed.contains(r)),
        )
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Merges one group's windows (sorted by group rank) into the lowest group rank's window: the
/// records annotated over `axis` or over an axis that is the same group (`linked`,
/// [`Overlap::Same`]).
fn merge_group(
    axis: &str,
    linked: &BTreeMap<String, Overlap>,
    members: &[(u32, u32, &Window)],
    stray: &[u32],
) -> (Window, GroupMerge) {
    let ours = |shard: &Shard| {
        let a = shard.axis();
        a == axis || linked.get(a) == Some(&Overlap::Same)
    };
    let size = members.iter().map(|m| m.1).max().unwrap_or(1);
    let mut warnings = Vec::new();
    let sizes: Vec<u32> = members.iter().map(|m| m.1).collect();
    if sizes.iter().any(|&n| n != size) {
        warnings.push(format!(
            "{axis} group sizes disagree across ranks {}: {sizes:?}; merged as a group of {size}",
            rank_list(members.iter().map(|m| m.2.rank))
        ));
    }
    let (by_rank, missing_ranks) = place(axis, size, members, &mut warnings);
    let unplaced = unplaced(stray, members, &by_rank);
    let advice = missing_advice(&unplaced);
    let present: Vec<(u32, &Window)> = by_rank
        .iter()
        .enumerate()
        .filter_map(|(r, w)| w.map(|w| (r as u32, w)))
        .collect();
    let base = present[0].1;
    let inconsistent = group_consistency(axis, present.iter().map(|(_, w)| *w));
    let mut window = base.clone();
    if let Some(serde_json::Value::Object(parallel)) = window.metadata.get_mut("parallel") {
        // The merged window holds the whole group: one rank of a group of one, on every axis
        // whose groups are this one or lie inside it too.
        parallel.insert(axis.to_string(), serde_json::json!([0, 1]));
        for (other, overlap) in linked {
            if *overlap != Overlap::Around && parallel.contains_key(other) {
                parallel.insert(other.clone(), serde_json::json!([0, 1]));
            }
        }
    }
    let lookup: Vec<BTreeMap<(&str, u32), &Record>> = present
        .iter()
        .map(|(_, w)| {
            let mut map = BTreeMap::new();
            for r in &w.records {
                map.entry((r.stage.as_str(), r.occurrence)).or_insert(r);
            }
            map
        })
        .collect();
    let (mut merged, mut replicated) = (0, 0);
    let mut records = Vec::with_capacity(base.records.len());
    let mut rows_not_merged = Vec::new();
    let mut rows = builder(
        RowsBuilder::of(present.iter().map(|(_, w)| *w).collect()),
        &mut rows_not_merged,
    );
    for record in &base.records {
        let over_axis = record.shard.as_ref().is_some_and(ours);
        let key = (record.stage.as_str(), record.occurrence);
        let seqs: Vec<Option<u64>> = lookup
            .iter()
            .map(|map| map.get(&key).map(|r| r.seq))
            .collect();
        if !over_axis {
            records.push(record.clone());
            add_rows(
                &mut rows,
                record,
                &seqs,
                RowMerge::Lowest,
                &mut rows_not_merged,
            );
            continue;
        }
        let pieces: Vec<(u32, &Window, Option<&Record>)> = present
            .iter()
            .zip(&lookup)
            .map(|(&(r, w), map)| (r, w, map.get(&key).copied()))
            .collect();
        match merge_record(record, &pieces, size, &missing_ranks, &advice) {
            Ok(Some(r)) => {
                if matches!(r.shard, Some(Shard::Replicated { .. })) {
                    replicated += 1;
                } else {
                    merged += 1;
                }
                add_rows(&mut rows, &r, &seqs, row_merge(&r), &mut rows_not_merged);
                records.push(r);
            }
            Ok(None) => {
                records.push(record.clone());
                add_rows(
                    &mut rows,
                    record,
                    &seqs,
                    RowMerge::Lowest,
                    &mut rows_not_merged,
                );
            }
            Err(why) => warnings.push(format!("{}: {why}", record.key())),
        }
    }
    window.token_rows = rows.map(RowsBuilder::finish);
    // What the other ranks hold and the lowest one lacks: a piece of a sharded stage is
    // missing evidence for that stage; a per-rank record is not compared (the merged window
    // stands for the group by the lowest rank's per-rank records), which is said too.
    let base_keys = &lookup[0];
    let mut extra: BTreeMap<(&str, u32), (Vec<u32>, bool)> = BTreeMap::new();
    for ((_, w), map) in present.iter().zip(&lookup).skip(1) {
        for (key, record) in map {
            if !base_keys.contains_key(key) {
                let entry = extra.entry(*key).or_insert((Vec::new(), false));
                entry.0.push(w.rank);
                entry.1 |= record.shard.as_ref().is_some_and(ours);
            }
        }
    }
    for ((stage, occurrence), (ranks, sharded)) in extra {
        let held = format!(
            "captured on rank{} {} but not on rank {} (the group's lowest)",
            if ranks.len() == 1 { "" } else { "s" },
            rank_list(ranks.iter().copied()),
            base.rank
        );
        warnings.push(if sharded {
            format!("{stage}#{occurrence}: {held}: missing evidence")
        } else {
            format!(
                "{stage}#{occurrence}: {held}, and not annotated over {axis}: a merged group compares \
                 the lowest rank's per-rank records, so this one is not compared"
            )
        });
    }
    window.records = records;
    let note = GroupMerge {
        axis: axis.to_string(),
        same_group: Vec::new(),
        size,
        ranks: present.iter().map(|(_, w)| w.rank).collect(),
        sources: present
            .iter()
            .map(|(_, w)| w.source.display().to_string())
            .collect(),
        missing_ranks,
        unplaced,
        logical_rank: base.rank,
        label: base.label.clone(),
        match_index: base.match_index,
        occurrence: base.occurrence,
        merged,
        replicated,
        concatenated: 0,
        inconsistent,
        warnings,
        rows_not_merged,
    };
    (window, note)
}

/// How a merged record's rows follow from its pieces' ([`RowMerge`]).
fn row_merge(record: &Record) -> RowMerge {
    match &record.shard {
        Some(Shard::Split { dim, .. }) => RowMerge::Split { dim: *dim },
        Some(Shard::Partial { .. }) => RowMerge::Partial,
        _ => RowMerge::Lowest,
    }
}

/// The group's row builder, or `None` (the merged window keeps no rows) with the reason
/// pushed to `rows_not_merged` where its ranks' row maps disagree.
fn builder<'w>(
    built: Result<Option<RowsBuilder<'w>>, String>,
    rows_not_merged: &mut Vec<String>,
) -> Option<RowsBuilder<'w>> {
    built.unwrap_or_else(|why| {
        rows_not_merged.push(format!(
            "token rows not merged: {why}; the records are compared whole"
        ));
        None
    })
}

/// [`RowsBuilder::add`], its refusal said as a warning on the record.
fn add_rows(
    rows: &mut Option<RowsBuilder>,
    record: &Record,
    seqs: &[Option<u64>],
    how: RowMerge,
    warnings: &mut Vec<String>,
) {
    if let Some(builder) = rows {
        if let Err(why) = builder.add(record.seq, seqs, how) {
            warnings.push(format!(
                "{}: token rows not merged: {why}; the record is compared whole",
                record.key()
            ));
        }
    }
}

/// Why a group's windows are not pieces of one run: ranks that recorded other token ids
/// (other inputs), or windows of different attempts (a re-run beside an old one). Each is a
/// reason the merge cannot stand for the group.
fn group_consistency<'a>(axis: &str, members: impl Iterator<Item = &'a Window>) -> Vec<String> {
    let members: Vec<&Window> = members.collect();
    let Some(base) = members.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let tokens = |w: &Window| w.metadata.get("token_ids").cloned();
    let other_inputs: Vec<u32> = members
        .iter()
        .filter(|w| tokens(w) != tokens(base))
        .map(|w| w.rank)
        .collect();
    if !other_inputs.is_empty() {
        out.push(format!(
            "the {axis} group's ranks saw different inputs: rank{} {} recorded other token_ids than rank {}; \
             its pieces are not of one tensor",
            if other_inputs.len() == 1 { "" } else { "s" },
            rank_list(other_inputs.iter().copied()),
            base.rank
        ));
    }
    let attempts: BTreeMap<u32, Vec<u32>> = members.iter().fold(BTreeMap::new(), |mut m, w| {
        m.entry(w.attempt).or_default().push(w.rank);
        m
    });
    if attempts.len() > 1 {
        let each: Vec<String> = attempts
            .iter()
            .map(|(a, ranks)| {
                format!(
                    "attempt {a} on rank{} {}",
                    if ranks.len() == 1 { "" } else { "s" },
                    rank_list(ranks.iter().copied())
                )
            })
            .collect();
        out.push(format!(
            "the {axis} group's windows come from different attempts ({}): pieces of different runs; \
             choose one with --attempt N",
            each.join(", ")
        ));
    }
    out
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One pipeline group's windows (sorted by pp rank) as one window: the lowest pp rank's
/// header and records, then each later pp rank's records in its capture order. A key (stage
/// and occurrence) captured on two pp ranks keeps the first (said so); a pp rank with no
/// window leaves its stages missing (said so, naming the rank).
fn concat_group(members: &[(u32, u32, &Window)], stray: &[u32]) -> (Window, GroupMerge) {
    let size = members.iter().map(|m| m.1).max().unwrap_or(1);
    let mut warnings = Vec::new();
    let (by_rank, missing_ranks) = place("pp", size, members, &mut warnings);
    let unplaced = unplaced(stray, members, &by_rank);
    let present: Vec<&Window> = by_rank.iter().flatten().copied().collect();
    let base = present[0];
    let mut window = base.clone();
    if let Some(serde_json::Value::Object(parallel)) = window.metadata.get_mut("parallel") {
        parallel.insert("pp".to_string(), serde_json::json!([0, 1]));
    }
    let mut seen: std::collections::HashSet<(String, u32)> = base
        .records
        .iter()
        .map(|r| (r.stage.to_string(), r.occurrence))
        .collect();
    let mut concatenated = 0;
    let mut rows_not_merged = Vec::new();
    let mut rows = builder(RowsBuilder::of(present.clone()), &mut rows_not_merged);
    let mut lowest = vec![None; present.len()];
    for record in &base.records {
        lowest[0] = Some(record.seq);
        add_rows(
            &mut rows,
            record,
            &lowest,
            RowMerge::Lowest,
            &mut rows_not_merged,
        );
    }
    // Later pp ranks' records follow the lowest rank's in seq order: where rows are merged,
    // their seqs are renumbered on (each rank counts from 0, and rows are found by seq).
    let mut next_seq = base.records.iter().map(|r| r.seq + 1).max().unwrap_or(0);
    for (p, (&(r, _, _), w)) in members.iter().zip(&present).enumerate().skip(1) {
        for record in &w.records {
            if seen.insert((record.stage.to_string(), record.occurrence)) {
                let mut record = record.clone();
                if rows.is_some() {
                    let mut at = vec![None; present.len()];
                    at[p] = Some(record.seq);
                    record.seq = next_seq;
                    next_seq += 1;
                    add_rows(
                        &mut rows,
                        &record,
                        &at,
                        RowMerge::Lowest,
                        &mut rows_not_merged,
                    );
                }
                // Where the record came from: the pp rank's own file (a tp-merged record
                // keeps the pieces it was merged from).
                if record.merged_from.is_none() {
                    record.merged_from = Some(Arc::new(vec![Piece {
                        rank: w.rank,
                        rank_in_group: r,
                        source: w.source.display().to_string(),
                        shape: record.shape.to_vec(),
                        stats: record.stats.clone(),
                    }]));
                }
                window.records.push(record);
                concatenated += 1;
            } else {
                warnings.push(format!(
                    "{} captured on pp ranks {} and {}: rank {}'s record left out",
                    record.key(),
                    base.rank,
                    w.rank,
                    w.rank
                ));
            }
        }
    }
    window.token_rows = rows.map(RowsBuilder::finish);
    let note = GroupMerge {
        axis: "pp".to_string(),
        same_group: Vec::new(),
        size,
        ranks: present.iter().map(|w| w.rank).collect(),
        sources: present
            .iter()
            .map(|w| w.source.display().to_string())
            .collect(),
        missing_ranks,
        unplaced,
        logical_rank: base.rank,
        label: base.label.clone(),
        match_index: base.match_index,
        occurrence: base.occurrence,
        merged: 0,
        replicated: 0,
        concatenated,
        inconsistent: Vec::new(),
        warnings,
        rows_not_merged,
    };
    (window, note)
}

/// `0, 2, 5-9`: ascending ranks with runs of three or more written as ranges, so that a group
/// of thousands missing most of its ranks stays one short line.
fn rank_list(ranks: impl Iterator<Item = u32>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut run: Option<(u32, u32)> = None;
    let flush = |run: Option<(u32, u32)>, parts: &mut Vec<String>| match run {
        Some((a, b)) if b >= a + 2 => parts.push(format!("{a}-{b}")),
        Some((a, b)) if b == a + 1 => parts.extend([a.to_string(), b.to_string()]),
        Some((a, _)) => parts.push(a.to_string()),
        None => {}
    };
    for r in ranks {
        run = match run {
            Some((a, b)) if r == b + 1 => Some((a, r)),
            other => {
                flush(other, &mut parts);
                Some((r, r))
            }
        };
    }
    flush(run, &mut parts);
    parts.join(", ")
}

/// The merged record of one stage over the group; `Ok(None)` for a replicated stage whose
/// lowest rank's record stands for all; an error (missing evidence) when a piece is missing or
/// the pieces do not fit together.
fn merge_record(
    base: &Record,
    pieces: &[(u32, &Window, Option<&Record>)],
    size: u32,
    missing_ranks: &[u32],
    advice: &str,
) -> Result<Option<Record>, String> {
    let shard = base.shard.clone().expect("annotated");
    let axis = shard.axis().to_string();
    if matches!(shard, Shard::Replicated { .. }) {
        // The lowest rank's record stands for the group, unless another replica holds NaN or
        // inf where it holds none: then that one does, so the diff's first non-finite names
        // it (the replicated check reports the disagreement itself).
        let non_finite = |r: &Record| {
            r.stats
                .as_ref()
                .is_some_and(|s| s.nan_count + s.inf_count > 0)
        };
        let standing = if non_finite(base) {
            base
        } else {
            pieces
                .iter()
                .filter_map(|p| p.2)
                .find(|r| non_finite(r))
                .unwrap_or(base)
        };
        let mut record = standing.clone();
        record.merged_from = Some(Arc::new(piece_list(pieces)));
        return Ok(Some(record));
    }
    if !missing_ranks.is_empty() {
        return Err(format!(
            "{shard} but {axis} rank{} {} of {size} not captured: missing evidence ({advice})",
            if missing_ranks.len() == 1 { "" } else { "s" },
            rank_list(missing_ranks.iter().copied())
        ));
    }
    let absent: Vec<u32> = pieces
        .iter()
        .filter(|p| p.2.is_none())
        .map(|p| p.1.rank)
        .collect();
    if !absent.is_empty() {
        return Err(format!(
            "{shard} captured on rank {} but not on rank{} {}: missing evidence",
            pieces[0].1.rank,
            if absent.len() == 1 { "" } else { "s" },
            rank_list(absent.into_iter())
        ));
    }
    let records: Vec<&Record> = pieces.iter().filter_map(|p| p.2).collect();
    let ranks = || rank_list(pieces.iter().map(|p| p.1.rank));
    if let Some(other) = records
        .iter()
        .find(|r| r.shard != base.shard && !is_equal_form(r, base))
    {
        return Err(format!(
            "annotated {shard} on one rank and {} on another (ranks {})",
            other
                .shard
                .as_ref()
                .map_or("nothing".to_string(), |s| s.to_string()),
            ranks()
        ));
    }
    if records.iter().any(|r| r.dtype != base.dtype) {
        return Err(format!("dtypes differ across ranks {}", ranks()));
    }
    // Statistics of a whole tensor need every piece's: one rank's null statistics would leave a
    // merged record that says nothing, and which rank lacks them is the answer.
    let without: Vec<u32> = pieces
        .iter()
        .filter(|p| p.2.is_some_and(|r| r.stats.is_none()))
        .map(|p| p.1.rank)
        .collect();
    if !without.is_empty() && without.len() < pieces.len() {
        return Err(format!(
            "{shard}: no statistics on rank{} {} (the others have them): missing evidence",
            if without.len() == 1 { "" } else { "s" },
            rank_list(without.into_iter())
        ));
    }
    let full_shape = match &shard {
        Shard::Partial { .. } => {
            if records.iter().any(|r| r.shape != base.shape) {
                return Err(format!(
                    "partial sums of different shapes across ranks {}: {:?}",
                    ranks(),
                    records.iter().map(|r| r.shape.to_vec()).collect::<Vec<_>>()
                ));
            }
            base.shape.to_vec()
        }
        Shard::Split { dim, placement, .. } => {
            split_shape(&records, *dim as usize, placement, size)
                .map_err(|why| format!("{why} (ranks {})", ranks()))?
        }
        Shard::Replicated { .. } => unreachable!("handled above"),
    };
    let partial = matches!(shard, Shard::Partial { .. });
    let stats = merge_stats(&records, partial, full_shape.iter().product());
    let mut record = base.clone();
    record.numel = full_shape.iter().product();
    record.stride = strides(&contiguous(&full_shape));
    record.shape = dims(&full_shape);
    record.stats = stats;
    record.storage_ptr = None;
    record.storage_id = None;
    record.storage_nbytes = None;
    record.data_ptr = None;
    record.storage_offset = 0;
    record.is_contiguous = true;
    record.tensor_file = None;
    record.tensor_resolved = None;
    record.rows_kept = None;
    record.rows_total = None;
    record.truncated = None;
    record.merged_from = Some(Arc::new(piece_list(pieces)));
    Ok(Some(record))
}

/// Uneven forms (`tp:1@0/10`, `tp:1@4/10`) differ as strings but annotate one split.
fn is_equal_form(a: &Record, b: &Record) -> bool {
    match (&a.shard, &b.shard) {
        (
            Some(Shard::Split {
                axis: x,
                dim: d,
                placement: Placement::At { full: f, .. },
            }),
            Some(Shard::Split {
                axis: y,
                dim: e,
                placement: Placement::At { full: g, .. },
            }),
        ) => x == y && d == e && f == g,
        _ => false,
    }
}

fn piece_list(pieces: &[(u32, &Window, Option<&Record>)]) -> Vec<Piece> {
    pieces
        .iter()
        .filter_map(|&(r, w, rec)| {
            rec.map(|rec| Piece {
                rank: w.rank,
                rank_in_group: r,
                source: w.source.display().to_string(),
                shape: rec.shape.to_vec(),
                stats: rec.stats.clone(),
            })
        })
        .collect()
}

fn contiguous(shape: &[u64]) -> Vec<i64> {
    let mut out = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        out[i] = out[i + 1] * shape[i + 1] as i64;
    }
    out
}

/// The full shape of a split stage from its pieces (in group-rank order), checking that they
/// tile the full dimension exactly.
fn split_shape(
    records: &[&Record],
    dim: usize,
    placement: &Placement,
    size: u32,
) -> Result<Vec<u64>, String> {
    let base = &records[0].shape;
    if dim >= base.len() {
        return Err(format!(
            "shard dimension {dim} is out of range for shape {:?}",
            base.to_vec()
        ));
    }
    for r in records {
        let same_rank = r.shape.len() == base.len();
        let others_equal = same_rank
            && r.shape
                .iter()
                .zip(base.iter())
                .enumerate()
                .all(|(i, (x, y))| i == dim || x == y);
        if !others_equal {
            return Err(format!(
                "shards' shapes do not add up along dimension {dim}: {:?}",
                records.iter().map(|r| r.shape.to_vec()).collect::<Vec<_>>()
            ));
        }
    }
    let locals: Vec<u64> = records.iter().map(|r| r.shape[dim]).collect();
    let total: u64 = locals.iter().sum();
    match placement {
        Placement::Equal | Placement::Zigzag => {
            if locals.iter().any(|&n| n != locals[0]) || records.len() as u32 != size {
                return Err(format!(
                    "an equal split of {size} needs equal local sizes along dimension {dim}, got {locals:?}"
                ));
            }
        }
        Placement::At { .. } => {
            let mut spans: Vec<(u64, u64, u64)> = records
                .iter()
                .map(|r| match r.shard {
                    Some(Shard::Split {
                        placement: Placement::At { offset, full },
                        ..
                    }) => (offset, r.shape[dim], full),
                    _ => (0, r.shape[dim], 0),
                })
                .collect();
            spans.sort_unstable();
            let full = spans[0].2;
            let mut at = 0;
            for &(offset, n, f) in &spans {
                if f != full || offset != at {
                    return Err(format!(
                        "uneven shards along dimension {dim} do not tile the full size {full}: \
                         (offset, size) {:?}",
                        spans.iter().map(|s| (s.0, s.1)).collect::<Vec<_>>()
                    ));
                }
                at += n;
            }
            if at != full {
                return Err(format!(
                    "uneven shards along dimension {dim} cover {at} of the full size {full}"
                ));
            }
        }
    }
    let mut shape = base.to_vec();
    shape[dim] = total;
    Ok(shape)
}

/// The statistics of the whole from its pieces'. A partial sum keeps its sum (as the mean over
/// `numel`) and checksum only, and only while every piece is finite.
fn merge_stats(records: &[&Record], partial: bool, numel: u64) -> Option<Stats> {
    let stats: Vec<&Stats> = records
        .iter()
        .map(|r| r.stats.as_ref())
        .collect::<Option<_>>()?;
    let nan_count = stats.iter().map(|s| s.nan_count).sum();
    let inf_count = stats.iter().map(|s| s.inf_count).sum();
    let counts_known = stats.iter().all(|s| s.counts_known);
    let finite: Option<Vec<u64>> = stats.iter().map(|s| s.finite_count).collect();
    // Σ of each piece's finite sum (mean × finite_count); a piece with no finite element adds 0.
    let sum: Option<f64> = finite.as_ref().and_then(|finite| {
        stats
            .iter()
            .zip(finite)
            .map(|(s, &n)| {
                if n == 0 {
                    Some(0.0)
                } else {
                    s.mean.map(|m| m * n as f64)
                }
            })
            .sum()
    });
    let checksum: Option<f64> = stats.iter().map(|s| s.pos_checksum).sum();
    let fold = |f: fn(&Stats) -> Option<f64>, pick: fn(f64, f64) -> f64| {
        stats.iter().filter_map(|s| f(s)).reduce(pick)
    };
    if partial {
        let all_finite = nan_count == 0 && inf_count == 0;
        return Some(Stats {
            nan_count,
            inf_count,
            finite_count: all_finite.then_some(numel),
            max_abs: None,
            min: None,
            max: None,
            mean: sum
                .filter(|_| all_finite && numel > 0)
                .map(|s| s / numel as f64),
            l2: None,
            pos_checksum: checksum,
            counts_known,
            reduced_in_dtype: false,
        });
    }
    let finite_count = finite.as_ref().map(|f| f.iter().sum::<u64>());
    let l2: Option<f64> = stats
        .iter()
        .map(|s| s.l2.map(|x| x * x))
        .sum::<Option<f64>>()
        .map(f64::sqrt);
    Some(Stats {
        nan_count,
        inf_count,
        finite_count,
        max_abs: fold(|s| s.max_abs, f64::max),
        min: fold(|s| s.min, f64::min),
        max: fold(|s| s.max, f64::max),
        mean: match (sum, finite_count) {
            (Some(s), Some(n)) if n > 0 => Some(s / n as f64),
            _ => None,
        },
        l2,
        pos_checksum: checksum,
        counts_known,
        reduced_in_dtype: stats.iter().any(|s| s.reduced_in_dtype),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn rank_lists_write_runs_as_ranges() {
        assert_eq!(
            super::rank_list([0, 1, 2, 3, 5, 7, 8].into_iter()),
            "0-3, 5, 7, 8"
        );
        assert_eq!(super::rank_list(1..3000), "1-2999");
        assert_eq!(super::rank_list(std::iter::empty()), "");
    }
}
