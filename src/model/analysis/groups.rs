//! Which windows are one forward on several ranks: a parallel group (same label and call,
//! `arm(parallel=...)`, for replicated stages and duplicate shards), or the ranks of one engine
//! step (`arm(..., step=N)`) where their labels differ (silent ranks).

use std::collections::BTreeMap;

use crate::model::dump::Window;

/// The windows of one parallel group over one axis: one forward seen from each rank.
pub struct ParallelGroup<'w> {
    /// The axis (`tp`, `cp`, `ep`, …).
    pub axis: String,
    /// The group's size as the windows declare it.
    pub size: u32,
    /// `(rank in group, window)`, sorted by rank in group then global rank.
    pub members: Vec<(u32, &'w Window)>,
}

/// How another axis's groups lie against an axis's groups on one side ([`overlapping_axes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// The same groups: the same size, and one axis's rank gives the other's (vLLM without
    /// data parallelism: the expert-parallel group is the tensor-parallel group).
    Same,
    /// Smaller groups inside the axis's groups (a `tp` group of 4 holding two `ep` groups of 2).
    Within,
    /// Larger groups, each holding whole groups of the axis (vLLM with data parallelism: the
    /// `ep` group spans the `tp` groups of every dp rank).
    Around,
}

/// The other axes of `windows`' layouts whose groups are `axis`'s own or nest with them,
/// read from the places the windows declare (the layout names no group's members): where one
/// group size divides the other and, over every window declaring both axes, the rank on the
/// larger axis gives the rank on the smaller (one `(tp, ep)` pair per tp rank: `(0, 0)`,
/// `(1, 1)`), the two are not independent axes. Independent axes (tp × dp over 4 ranks) show
/// every combination of ranks and are left out, as are axes of size 1.
///
/// Such an axis is not part of the key that tells one group of `axis` from another: its rank
/// differs across the ranks of one group (or is the same in every group), and keying by it
/// would split every group into groups of one. What is read from a partial capture can take
/// two independent axes for linked ones where the ranks captured happen to pair off.
pub fn overlapping_axes(windows: &[Window], axis: &str) -> BTreeMap<String, Overlap> {
    // Per other axis: (the axis's size, the other's size, the (rank, other rank) pairs seen).
    type Seen = (u32, u32, Vec<(u32, u32)>);
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    for w in windows {
        let Ok(layout) = w.parallel() else { continue };
        let Some(&(rank, size)) = layout.get(axis) else {
            continue;
        };
        for (other, &(other_rank, other_size)) in &layout {
            if other == axis {
                continue;
            }
            let entry = seen.entry(other.clone()).or_insert((1, 1, Vec::new()));
            entry.0 = entry.0.max(size);
            entry.1 = entry.1.max(other_size);
            entry.2.push((rank, other_rank));
        }
    }
    let gives = |pairs: &[(u32, u32)], key: fn(&(u32, u32)) -> (u32, u32)| {
        let mut map: BTreeMap<u32, u32> = BTreeMap::new();
        pairs
            .iter()
            .map(key)
            .all(|(from, to)| *map.entry(from).or_insert(to) == to)
    };
    seen.into_iter()
        .filter_map(|(other, (n, m, pairs))| {
            if n < 2 || m < 2 || (n % m != 0 && m % n != 0) {
                return None;
            }
            let overlap = if m <= n {
                gives(&pairs, |&p| p).then_some(if m == n {
                    Overlap::Same
                } else {
                    Overlap::Within
                })
            } else {
                gives(&pairs, |&(a, b)| (b, a)).then_some(Overlap::Around)
            }?;
            Some((other, overlap))
        })
        .collect()
}

/// The parallel groups of `windows` with two or more ranks declared: windows of the same
/// label, match and call whose `parallel` layout agrees on every other axis independent of
/// this one ([`overlapping_axes`]: an axis whose groups are this one's, or nest with them,
/// does not split a group).
pub fn parallel_groups(windows: &[Window]) -> Vec<ParallelGroup<'_>> {
    type Key = (String, u32, String, u32, u32, Vec<(String, u32, u32)>);
    let mut groups: BTreeMap<Key, Vec<(u32, &Window)>> = BTreeMap::new();
    let mut overlaps: BTreeMap<String, BTreeMap<String, Overlap>> = BTreeMap::new();
    for w in windows {
        let Ok(layout) = w.parallel() else { continue };
        for (axis, &(rank_in_group, size)) in &layout {
            if size < 2 {
                continue;
            }
            let linked = overlaps
                .entry(axis.clone())
                .or_insert_with(|| overlapping_axes(windows, axis));
            let others = layout
                .iter()
                .filter(|(k, _)| *k != axis && !linked.contains_key(*k))
                .map(|(k, &(r, n))| (k.clone(), r, n))
                .collect();
            groups
                .entry((
                    axis.clone(),
                    size,
                    w.label.clone(),
                    w.match_index,
                    w.occurrence,
                    others,
                ))
                .or_default()
                .push((rank_in_group, w));
        }
    }
    groups
        .into_iter()
        .map(|((axis, size, ..), mut members)| {
            members.sort_by_key(|&(r, w)| (r, w.rank));
            ParallelGroup {
                axis,
                size,
                members,
            }
        })
        .collect()
}

/// The engine step a window declares (`metadata.step`, a non-negative integer), if any.
pub fn step_of(window: &Window) -> Option<u64> {
    window.metadata.get("step")?.as_u64()
}

/// One forward across ranks for the silent-rank rule: the windows of one step (every window
/// declaring `step`, whatever its label), else of one label, match and call. Each group has
/// windows of at least two ranks; a rank's later attempts are not told apart here (ingest
/// keeps one attempt per window).
pub fn forward_groups(windows: &[Window]) -> Vec<Vec<&Window>> {
    #[derive(PartialEq, Eq, PartialOrd, Ord)]
    enum Key {
        Step(u64),
        Call(String, u32, u32),
    }
    let mut groups: BTreeMap<Key, Vec<&Window>> = BTreeMap::new();
    for w in windows {
        let key = match step_of(w) {
            Some(step) => Key::Step(step),
            None => Key::Call(w.label.clone(), w.match_index, w.occurrence),
        };
        groups.entry(key).or_default().push(w);
    }
    groups
        .into_values()
        .filter_map(|mut members| {
            members.sort_by_key(|w| (w.rank, w.label.clone(), w.occurrence));
            let mut ranks: Vec<u32> = members.iter().map(|w| w.rank).collect();
            ranks.dedup();
            (ranks.len() >= 2).then_some(members)
        })
        .collect()
}

/// How many of `windows` carry a `metadata.step` that is not a non-negative integer (and so
/// are grouped by label and call instead).
pub fn unreadable_steps(windows: &[Window]) -> usize {
    windows
        .iter()
        .filter(|w| w.metadata.get("step").is_some_and(|s| s.as_u64().is_none()))
        .count()
}
