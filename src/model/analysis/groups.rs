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

/// The parallel groups of `windows` with two or more ranks declared: windows of the same
/// label, match and call whose `parallel` layout agrees on every other axis.
pub fn parallel_groups(windows: &[Window]) -> Vec<ParallelGroup<'_>> {
    type Key = (String, u32, String, u32, u32, Vec<(String, u32, u32)>);
    let mut groups: BTreeMap<Key, Vec<(u32, &Window)>> = BTreeMap::new();
    for w in windows {
        let Ok(layout) = w.parallel() else { continue };
        for (axis, &(rank_in_group, size)) in &layout {
            if size < 2 {
                continue;
            }
            let others = layout
                .iter()
                .filter(|(k, _)| *k != axis)
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
