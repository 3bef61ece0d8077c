//! `scan`: per window, the first non-finite record and the storage aliases.
//!
//! Aliases come first in what a user reads: a stride conflict (two stages
//! reading one storage's bytes through layouts that disagree) is the usual
//! evidence of cache stomping, block-table misplacement or KV reuse, and it
//! explains the magnitudes that follow. The rule is in [`crate::model::analysis::layout`].

use std::collections::HashMap;

use serde::Serialize;

use crate::model::analysis::layout::{Expanded, Relation, View};
use crate::model::dump::{Record, Window};

/// Where the first NaN or infinity was captured in a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NonFinite {
    /// `stage#occurrence`.
    pub key: String,
    /// The record's `seq` (capture sequence, 0-based).
    pub seq: u64,
    /// 0-based position in the window's capture order.
    pub position: usize,
    /// NaN elements in the record (1 for "some" when `counts_known` is false).
    pub nan_count: u64,
    /// ±inf elements in the record (1 for "some" when `counts_known` is false).
    pub inf_count: u64,
    /// False when the format records no counts (msprobe): the counts above are then 1 for
    /// "some", inferred from the record's max and min, not numbers of elements.
    pub counts_known: bool,
}

/// One record of an alias group, with the layout it reads the storage through.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AliasMember {
    /// `stage#occurrence`.
    pub key: String,
    /// The record's `seq` (capture order).
    pub seq: u64,
    /// The record's dtype.
    pub dtype: String,
    /// Logical shape, elements.
    pub shape: Vec<u64>,
    /// Elements.
    pub stride: Vec<i64>,
    /// Elements.
    pub storage_offset: u64,
}

/// Records whose bytes overlap in one storage, linked by overlap.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AliasGroup {
    /// The device the storage lives on.
    pub device: String,
    /// The probe's identity of the shared live storage; `None` when the records carry none and
    /// grouping fell back to `(device, storage_ptr)`, which over-reports after address reuse.
    pub storage_id: Option<u64>,
    /// The storage's data address (bytes), of the group's first member.
    pub storage_ptr: u64,
    /// In capture order.
    pub members: Vec<AliasMember>,
    /// True when some overlapping pair reads the shared bytes through disagreeing layouts.
    pub stride_conflict: bool,
    /// The disagreeing pairs, as `stage#occurrence` keys.
    pub conflicts: Vec<(String, String)>,
    /// True when a pair was too large to test element by element (counted as a conflict).
    pub unchecked: bool,
}

/// The scan of one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowScan {
    /// The path the window was read from.
    pub source: String,
    /// The window's rank.
    pub rank: u32,
    /// The window's label.
    pub label: String,
    /// Which distinct label this is (`DUMP_PROBE_MATCH`, 1-based; windowed: 0-based window
    /// number).
    #[serde(rename = "match")]
    pub match_index: u32,
    /// Which call of that label this is (`DUMP_PROBE_OCCURRENCE`, 1-based).
    pub occurrence: u32,
    /// Number of records in the window.
    pub records: usize,
    /// The first record in capture order with NaN or inf; `None` when there is none.
    pub first_nonfinite: Option<NonFinite>,
    /// Records with any NaN or infinity (outside padding rows).
    pub nonfinite_records: usize,
    /// Records whose NaN and infinities all lie in padding rows of the row map: never compared,
    /// counted apart, not a finding.
    pub nonfinite_only_in_padding: usize,
    /// Stride conflicts first, then by first member.
    pub alias_groups: Vec<AliasGroup>,
}

impl WindowScan {
    /// True when the window holds a non-finite record or a stride conflict.
    pub fn found_something(&self) -> bool {
        self.first_nonfinite.is_some() || self.alias_groups.iter().any(|g| g.stride_conflict)
    }
}

impl NonFinite {
    /// The first record of `window`, in capture order, holding a NaN or an infinity.
    pub fn first_in(window: &Window) -> Option<NonFinite> {
        window
            .records
            .iter()
            .enumerate()
            .find(|(_, r)| is_nonfinite(window, r))
            .map(|(i, r)| {
                let stats = r.stats.as_ref().expect("non-finite records have stats");
                NonFinite {
                    key: r.key(),
                    seq: r.seq,
                    position: i,
                    nan_count: stats.nan_count,
                    inf_count: stats.inf_count,
                    counts_known: stats.counts_known,
                }
            })
    }

    /// The counts for people: `3 NaN, 0 inf`, or `NaN/inf present (counts unknown)` where
    /// the format records none.
    pub fn counts_text(&self) -> String {
        if self.counts_known {
            format!("{} NaN, {} inf", self.nan_count, self.inf_count)
        } else {
            "NaN/inf present (counts unknown)".to_string()
        }
    }
}

/// Whether `record` holds NaN or infinity outside the padding rows of its window's row map
/// (padding is never compared: its NaN/inf are counted apart, [`only_in_padding`]).
fn is_nonfinite(window: &Window, record: &Record) -> bool {
    record.stats.as_ref().is_some_and(|s| s.has_nonfinite()) && !only_in_padding(window, record)
}

/// Whether every NaN and infinity of `record` lies in padding rows (request `None` in the
/// row map: a graph's fixed batch beyond the requests it holds), by its row statistics.
fn only_in_padding(window: &Window, record: &Record) -> bool {
    let (Some(rows), Some(stats)) = (window.token_rows.as_ref(), record.stats.as_ref()) else {
        return false;
    };
    if !stats.counts_known {
        return false;
    }
    let Some(block) = rows.records.iter().find(|b| b.seq == record.seq) else {
        return false;
    };
    let forward = rows.forward_rows();
    let mut padding = 0.0f64;
    for ((entry, _), values) in rows.rows_of(block, &forward) {
        let is_padding = rows
            .map
            .get(entry as usize)
            .is_some_and(|e| e.request.is_none());
        if is_padding {
            padding += f64::from(values[0]);
        }
    }
    let total = (stats.nan_count + stats.inf_count) as f64;
    padding > 0.0 && padding == total
}

/// Scans one window.
pub fn scan_window(manifest: &Window) -> WindowScan {
    let nonfinite = |r: &Record| is_nonfinite(manifest, r);
    let first_nonfinite = NonFinite::first_in(manifest);
    WindowScan {
        source: manifest.source.display().to_string(),
        rank: manifest.rank,
        label: manifest.label.clone(),
        match_index: manifest.match_index,
        occurrence: manifest.occurrence,
        records: manifest.records.len(),
        first_nonfinite,
        nonfinite_records: manifest.records.iter().filter(|r| nonfinite(r)).count(),
        nonfinite_only_in_padding: manifest
            .records
            .iter()
            .filter(|r| {
                r.stats.as_ref().is_some_and(|s| s.has_nonfinite()) && only_in_padding(manifest, r)
            })
            .count(),
        alias_groups: alias_groups(&manifest.records),
    }
}

/// The byte view a record reads, when its layout is known and it has elements.
pub fn view_of(record: &Record) -> Option<View> {
    let data_ptr = record.data_ptr?;
    if record.numel == 0 || record.shape.len() != record.stride.len() {
        return None;
    }
    Some(View {
        data_ptr,
        element_size: u64::from(record.element_size),
        shape: record.shape.to_vec(),
        stride: record.stride.to_vec(),
    })
}

/// Groups records whose bytes overlap within one storage.
///
/// Records are bucketed by (device, storage_id), falling back to
/// (device, storage_ptr) for manifests without storage ids; in a bucket,
/// records are linked when their bytes overlap, and each connected set of
/// two or more records is a group.
pub fn alias_groups(records: &[Record]) -> Vec<AliasGroup> {
    /// (device, storage_id, storage_ptr) → the records there, with their byte views.
    type Buckets<'r> = HashMap<(&'r str, Option<u64>, u64), Vec<(usize, Expanded)>>;
    let mut buckets: Buckets = HashMap::new();
    for (index, record) in records.iter().enumerate() {
        let (Some(ptr), Some(view)) = (record.storage_ptr, view_of(record)) else {
            continue;
        };
        let key = match record.storage_id {
            Some(id) => (record.device.as_str(), Some(id), 0),
            None => (record.device.as_str(), None, ptr),
        };
        buckets
            .entry(key)
            .or_default()
            .push((index, Expanded::new(view)));
    }
    let mut groups = Vec::new();
    for ((device, storage_id, _), members) in buckets {
        if members.len() < 2 {
            continue;
        }
        groups.extend(groups_in_bucket(records, device, storage_id, &members));
    }
    groups.sort_by_key(|g| (!g.stride_conflict, g.members[0].seq));
    groups
}

fn groups_in_bucket(
    records: &[Record],
    device: &str,
    storage_id: Option<u64>,
    members: &[(usize, Expanded)],
) -> Vec<AliasGroup> {
    // Sweep by byte range so only range-intersecting pairs are tested.
    let mut order: Vec<(u64, u64, usize)> = members
        .iter()
        .enumerate()
        .filter_map(|(m, (_, expanded))| expanded.view.byte_range().map(|(lo, hi)| (lo, hi, m)))
        .collect();
    order.sort_unstable();
    let mut parent: Vec<usize> = (0..members.len()).collect();
    let mut conflicting_pairs = Vec::new();
    let mut unchecked = vec![false; members.len()];
    for (i, &(_, hi_i, a)) in order.iter().enumerate() {
        for &(lo_j, _, b) in &order[i + 1..] {
            if lo_j >= hi_i {
                break;
            }
            let (va, vb) = (&members[a].1, &members[b].1);
            if !va.overlaps(vb) {
                continue;
            }
            union(&mut parent, a, b);
            let relation = va.relation(vb);
            if relation.is_conflict() {
                conflicting_pairs.push((a.min(b), a.max(b)));
                if relation == Relation::Unchecked {
                    unchecked[a] = true;
                }
            }
        }
    }
    let roots: Vec<usize> = (0..members.len()).map(|m| find(&mut parent, m)).collect();
    let mut by_root: HashMap<usize, Vec<usize>> = HashMap::new();
    for (m, &root) in roots.iter().enumerate() {
        by_root.entry(root).or_default().push(m);
    }
    let mut groups = Vec::new();
    for (root, mut ms) in by_root {
        if ms.len() < 2 {
            continue;
        }
        ms.sort_by_key(|&m| members[m].0);
        let record = |m: usize| &records[members[m].0];
        let mut conflicts: Vec<(String, String)> = conflicting_pairs
            .iter()
            .filter(|&&(a, _)| roots[a] == root)
            .map(|&(a, b)| {
                let (first, second) = if members[a].0 < members[b].0 {
                    (a, b)
                } else {
                    (b, a)
                };
                (record(first).key(), record(second).key())
            })
            .collect();
        conflicts.sort();
        groups.push(AliasGroup {
            device: device.to_string(),
            storage_id,
            storage_ptr: record(ms[0]).storage_ptr.unwrap_or(0),
            stride_conflict: !conflicts.is_empty(),
            unchecked: ms.iter().any(|&m| unchecked[m]),
            conflicts,
            members: ms
                .iter()
                .map(|&m| {
                    let r = record(m);
                    AliasMember {
                        key: r.key(),
                        seq: r.seq,
                        dtype: r.dtype.to_string(),
                        shape: r.shape.to_vec(),
                        stride: r.stride.to_vec(),
                        storage_offset: r.storage_offset,
                    }
                })
                .collect(),
        });
    }
    groups
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

fn union(parent: &mut [usize], a: usize, b: usize) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    if ra != rb {
        parent[ra.max(rb)] = ra.min(rb);
    }
}
