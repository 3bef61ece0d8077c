//! Stale outputs: a stage whose output is bit-identical to its previous occurrence while its
//! rows (positions or token ids) and the record just before it changed: a graph replay that
//! reuses a buffer or a readiness tag, a cache not refreshed.
//!
//! The previous occurrence is the same stage and rank in the label's previous call (the
//! window of call `k - 1`), or the stage's previous occurrence within one forward. Only
//! floating records with token rows and a spread of values (min < max) are compared, bit for
//! bit on every statistic: masks, rotary and block tables carry no token rows or are not
//! floating, and a repeated token's embedding has an unchanged record before it.

use std::collections::{BTreeMap, HashMap};

use crate::model::analysis::compare::dtype_kind;
use crate::model::dump::{Mode, Record, Stats, Window};

use super::types::{Finding, Kind, NotChecked, RecordRef};

/// `(request, position, token id)` of each row of a record.
type Rows = Vec<(Option<String>, u64, Option<i64>)>;

/// The rows of `record` in `window`'s row map; `None` without a row block.
fn rows_of(window: &Window, record: &Record) -> Option<Rows> {
    let rows = window.token_rows.as_deref()?;
    let block = rows.records.iter().find(|b| b.seq == record.seq)?;
    let forward = rows.forward_rows();
    let out = (0..block.rows as usize)
        .filter_map(|i| match &block.positions {
            Some(p) => p.get(i).copied(),
            None => forward.get(i).copied(),
        })
        .map(|(entry, position)| {
            let e = rows.map.get(entry as usize);
            (
                e.and_then(|e| e.request.clone()),
                position,
                e.and_then(|e| e.token_at(position)),
            )
        })
        .collect();
    Some(out)
}

/// Every statistic equal, bit for bit (NaN counts as equal to NaN).
fn same_bits(a: &Stats, b: &Stats) -> bool {
    let bits = |x: Option<f64>| x.map(f64::to_bits);
    a.nan_count == b.nan_count
        && a.inf_count == b.inf_count
        && a.finite_count == b.finite_count
        && [
            (a.max_abs, b.max_abs),
            (a.min, b.min),
            (a.max, b.max),
            (a.mean, b.mean),
            (a.l2, b.l2),
            (a.pos_checksum, b.pos_checksum),
        ]
        .iter()
        .all(|&(x, y)| bits(x) == bits(y))
}

/// A record the rule can judge: eager, floating, finite (a NaN is a finding of its own), with
/// a spread of values.
fn comparable(record: &Record) -> bool {
    record.mode == Mode::Eager
        && dtype_kind(&record.dtype) == "floating"
        && record.stats.as_ref().is_some_and(|s| {
            !s.has_nonfinite() && matches!((s.min, s.max), (Some(lo), Some(hi)) if lo < hi)
        })
}

/// Whether `stage` holds the same values in every one of its occurrences on this rank and
/// label, three or more of them: a constant (a bias broadcast over the rows, a greedy
/// sampler's one-hot that picks the same token every step), not a buffer gone stale.
fn constant(calls: &BTreeMap<u32, &Window>, stage: &str) -> bool {
    let mut all = calls
        .values()
        .flat_map(|w| &w.records)
        .filter(|r| &*r.stage == stage)
        .filter_map(|r| r.stats.as_ref());
    let Some(first) = all.next() else {
        return false;
    };
    let mut count = 1;
    for stats in all {
        if !same_bits(first, stats) {
            return false;
        }
        count += 1;
    }
    count >= 3
}

/// One candidate: `record` (at `index` of `window`) against `earlier` (at `earlier_index` of
/// `earlier_window`), the same stage's previous occurrence.
struct Pair<'w> {
    window: &'w Window,
    index: usize,
    earlier_window: &'w Window,
    earlier_index: usize,
    /// `previous call` or `previous occurrence in the forward`.
    relation: &'static str,
}

/// The finding for `pair`, when it is one.
fn judge(pair: &Pair<'_>) -> Option<Finding> {
    let record = &pair.window.records[pair.index];
    let earlier = &pair.earlier_window.records[pair.earlier_index];
    if !comparable(record) || !comparable(earlier) {
        return None;
    }
    if !same_bits(record.stats.as_ref()?, earlier.stats.as_ref()?) {
        return None;
    }
    let (rows, earlier_rows) = (
        rows_of(pair.window, record)?,
        rows_of(pair.earlier_window, earlier)?,
    );
    if rows == earlier_rows {
        return None;
    }
    // The record just before each in its forward: the input side must have changed.
    let before = pair.window.records.get(pair.index.checked_sub(1)?)?;
    let earlier_before = if pair.window.source == pair.earlier_window.source {
        pair.earlier_window
            .records
            .get(pair.earlier_index.checked_sub(1)?)?
    } else {
        pair.earlier_window
            .records
            .iter()
            .find(|r| r.stage == before.stage && r.occurrence == before.occurrence)?
    };
    if same_bits(before.stats.as_ref()?, earlier_before.stats.as_ref()?) {
        return None;
    }
    let what_moved = match (rows.first(), earlier_rows.first()) {
        (Some((_, p, _)), Some((_, q, _))) if p != q => {
            format!("its rows moved from position {q} to {p}")
        }
        (Some((_, _, Some(t))), Some((_, _, Some(u)))) if t != u => {
            format!("its rows' token ids changed ({u} to {t})")
        }
        _ => "its rows' positions or token ids changed".to_string(),
    };
    let (key, earlier_key) = (record.key(), earlier.key());
    let where_earlier = if pair.relation == "previous call" {
        format!(
            "call {} of {:?}",
            pair.earlier_window.occurrence, pair.earlier_window.label
        )
    } else {
        "the same forward".to_string()
    };
    Some(Finding {
        kind: Kind::StaleOutput,
        stage: record.stage.to_string(),
        key: key.clone(),
        ranks: vec![pair.window.rank],
        records: vec![
            RecordRef::of(pair.window, record),
            RecordRef::of(pair.earlier_window, earlier),
            RecordRef::of(pair.window, before),
            RecordRef::of(pair.earlier_window, earlier_before),
        ],
        sentence: format!(
            "{key} in call {} of {:?} (rank {}) is bit-identical to {earlier_key} in {where_earlier} \
             (every statistic, pos_checksum included) although {what_moved} and the record \
             before it, {}, changed",
            pair.window.occurrence,
            pair.window.label,
            pair.window.rank,
            before.key()
        ),
        look_at: format!(
            "the buffer {} writes into: a graph replay or cache that reuses it, or a readiness \
             tag that lets the old value stand",
            record.stage
        ),
    })
}

/// `(stage, occurrence)` → the record's index in `window`.
fn index_by_key(window: &Window) -> HashMap<(&str, u32), usize> {
    window
        .records
        .iter()
        .enumerate()
        .map(|(i, r)| ((&*r.stage, r.occurrence), i))
        .collect()
}

/// The stale-output findings of `windows`, and what could not be checked.
pub fn stale_outputs(windows: &[Window], not_checked: &mut Vec<NotChecked>) -> Vec<Finding> {
    let mut findings = Vec::new();
    // (rank, match) → the windows of that label's calls, by call.
    let mut calls: BTreeMap<(u32, u32, String), BTreeMap<u32, &Window>> = BTreeMap::new();
    for w in windows {
        calls
            .entry((w.rank, w.match_index, w.label.clone()))
            .or_default()
            .insert(w.occurrence, w);
    }
    let mut compared_any = false;
    for by_call in calls.values() {
        for (&call, &window) in by_call {
            let here = index_by_key(window);
            let previous = call
                .checked_sub(1)
                .and_then(|c| by_call.get(&c))
                .map(|&w| (w, index_by_key(w)));
            for (index, record) in window.records.iter().enumerate() {
                if let Some((earlier_window, earlier)) = &previous
                    && let Some(&earlier_index) = earlier.get(&(&*record.stage, record.occurrence))
                {
                    compared_any = true;
                    findings.extend(
                        judge(&Pair {
                            window,
                            index,
                            earlier_window,
                            earlier_index,
                            relation: "previous call",
                        })
                        .filter(|f| !constant(by_call, &f.stage)),
                    );
                }
                if record.occurrence > 1
                    && let Some(&earlier_index) = here.get(&(&*record.stage, record.occurrence - 1))
                {
                    compared_any = true;
                    findings.extend(
                        judge(&Pair {
                            window,
                            index,
                            earlier_window: window,
                            earlier_index,
                            relation: "previous occurrence in the forward",
                        })
                        .filter(|f| !constant(by_call, &f.stage)),
                    );
                }
            }
        }
    }
    let graph = windows
        .iter()
        .flat_map(|w| &w.records)
        .filter(|r| r.mode == Mode::Graph)
        .count();
    if graph > 0 {
        not_checked.push(NotChecked {
            kind: Kind::StaleOutput,
            reason: format!(
                "{graph} graph record{} keep{} only {} last replay: not compared with an earlier \
                 one",
                if graph == 1 { "" } else { "s" },
                if graph == 1 { "s" } else { "" },
                if graph == 1 { "its" } else { "their" }
            ),
        });
    }
    if !windows.iter().any(|w| w.token_rows.is_some()) {
        not_checked.push(NotChecked {
            kind: Kind::StaleOutput,
            reason: "no window has a row map: whether a record's rows changed is unknown \
                     (arm(label, rows=...))"
                .to_string(),
        });
    } else if !compared_any {
        not_checked.push(NotChecked {
            kind: Kind::StaleOutput,
            reason: "no label has two consecutive calls captured and no stage repeats within a \
                     forward: nothing earlier to compare with (DUMP_PROBE_OCCURRENCE=all)"
                .to_string(),
        });
    }
    findings
}
