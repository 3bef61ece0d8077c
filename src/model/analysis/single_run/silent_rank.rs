//! Silent ranks: a stage whose output is exactly zero on some ranks of one forward although
//! they received tokens, while another rank's is not (expert parallelism handing global expert
//! ids to an operator that indexes local weights: every rank but the first returns zeros).
//!
//! A zero output is only a finding where the rank is known to have received tokens: the
//! record's declared `received` count, else the rows of its window's row map that reach the
//! record. A rank that received nothing (an idle expert rank, a fixed-capacity buffer left
//! zero) is not reported; a rank that says neither is counted as not checked.

use std::collections::HashMap;

use crate::model::dump::{Record, Shard, Window};

use super::duplicate_shards::join;
use super::types::{Finding, Kind, NotChecked, RecordRef};

/// What a zero record's window says about the tokens that reached it.
enum Arrived {
    /// Tokens arrived: the count, and where the count comes from.
    Tokens(u64, &'static str),
    /// Declared or mapped as none: an idle rank.
    Nothing,
    /// Neither a declared count nor a row map says.
    Unknown,
    /// A partial sum (`partial:AXIS`) without a declared count: rows reaching it say nothing,
    /// since a rank's share of a sum may be zero by design (a vocabulary slice no token of the
    /// prompt falls in).
    PartialSum,
}

/// Whether `record` is a non-empty, finite, all-zero tensor.
fn all_zero(record: &Record) -> bool {
    record.numel > 0
        && record
            .stats
            .as_ref()
            .is_some_and(|s| s.nan_count == 0 && s.inf_count == 0 && s.max_abs == Some(0.0))
}

fn non_zero(record: &Record) -> bool {
    record
        .stats
        .as_ref()
        .is_some_and(|s| s.max_abs.is_some_and(|m| m > 0.0))
}

/// The tokens that reached `record` of `window`.
fn arrived(window: &Window, record: &Record) -> Arrived {
    match record.received {
        Some(0) => return Arrived::Nothing,
        Some(n) => return Arrived::Tokens(n, "received"),
        None if matches!(record.shard, Some(Shard::Partial { .. })) => return Arrived::PartialSum,
        None => {}
    }
    let Some(rows) = window.token_rows.as_deref() else {
        return Arrived::Unknown;
    };
    let Some(block) = rows.records.iter().find(|b| b.seq == record.seq) else {
        return Arrived::Unknown;
    };
    let forward = rows.forward_rows();
    let at = |i: usize| match &block.positions {
        Some(p) => p.get(i).map(|&(entry, _)| entry),
        None => forward.get(i).map(|&(entry, _)| entry),
    };
    let requests = (0..block.rows as usize)
        .filter_map(at)
        .filter(|&entry| {
            rows.map
                .get(entry as usize)
                .is_some_and(|e| e.request.is_some())
        })
        .count() as u64;
    if requests == 0 {
        Arrived::Nothing
    } else {
        Arrived::Tokens(requests, "rows of requests in the row map")
    }
}

/// The silent-rank findings of the forward groups `groups`, and what could not be checked.
pub fn silent_ranks(groups: &[Vec<&Window>], not_checked: &mut Vec<NotChecked>) -> Vec<Finding> {
    let mut findings = Vec::new();
    let (mut unknown, mut partial) = (0usize, 0usize);
    for windows in groups {
        // Most forwards hold no all-zero record: nothing to index.
        if !windows.iter().any(|w| w.records.iter().any(all_zero)) {
            continue;
        }
        // (stage, occurrence) → its records, one per window, in the order first seen (the
        // lowest rank's capture order first).
        let mut index: HashMap<(&str, u32), usize> = HashMap::new();
        let mut stages: Vec<Vec<(&Window, &Record)>> = Vec::new();
        for w in windows {
            for r in &w.records {
                let at = *index.entry((&*r.stage, r.occurrence)).or_insert_with(|| {
                    stages.push(Vec::new());
                    stages.len() - 1
                });
                stages[at].push((w, r));
            }
        }
        // The forward's first silent stage for each set of ranks: later ones usually follow.
        let mut first: Vec<(Vec<u32>, String)> = Vec::new();
        for records in stages {
            if !records.iter().any(|(_, r)| all_zero(r)) {
                continue;
            }
            let key = records[0].1.key();
            let Some(&(loud_window, loud)) = records.iter().find(|(_, r)| non_zero(r)) else {
                continue;
            };
            let mut silent = Vec::new();
            for &(w, r) in records.iter().filter(|(_, r)| all_zero(r)) {
                match arrived(w, r) {
                    Arrived::Tokens(n, how) => silent.push((w, r, n, how)),
                    Arrived::Nothing => {}
                    Arrived::Unknown => unknown += 1,
                    Arrived::PartialSum => partial += 1,
                }
            }
            if silent.is_empty() {
                continue;
            }
            let ranks: Vec<u32> = silent.iter().map(|(w, ..)| w.rank).collect();
            let counts: Vec<String> = silent
                .iter()
                .map(|(w, _, n, how)| format!("rank {}: {n} {how}", w.rank))
                .collect();
            let max_abs = loud.stats.as_ref().and_then(|s| s.max_abs).unwrap_or(0.0);
            let mut records: Vec<RecordRef> = silent
                .iter()
                .map(|(w, r, ..)| RecordRef::of(w, r))
                .collect();
            records.push(RecordRef::of(loud_window, loud));
            findings.push(Finding {
                kind: Kind::SilentRank,
                stage: loud.stage.to_string(),
                key: key.clone(),
                sentence: format!(
                    "{key} is exactly zero on rank{} {} although {} received tokens ({}), \
                     while rank {}'s is not (max_abs {max_abs:.4e})",
                    if ranks.len() == 1 { "" } else { "s" },
                    join(&ranks),
                    if ranks.len() == 1 { "it" } else { "they" },
                    counts.join("; "),
                    loud_window.rank,
                ),
                look_at: match first.iter().find(|(with, _)| *with == ranks) {
                    Some((_, earlier)) => format!(
                        "{earlier} first: these ranks were already silent there, and this stage \
                         follows from it"
                    ),
                    None => format!(
                        "the dispatch or routing before {}: the ids or token indices it hands \
                         each rank (global expert ids indexing a rank's local weights select \
                         nothing)",
                        loud.stage
                    ),
                },
                ranks: ranks.clone(),
                records,
            });
            if !first.iter().any(|(with, _)| *with == ranks) {
                first.push((ranks, key.clone()));
            }
        }
    }
    if unknown > 0 {
        not_checked.push(NotChecked {
            kind: Kind::SilentRank,
            reason: format!(
                "{unknown} record{} exactly zero on a rank whose window declares no received \
                 count and maps no rows to {}: whether tokens arrived is unknown \
                 (capture(..., received=N))",
                if unknown == 1 { "" } else { "s" },
                if unknown == 1 { "it" } else { "them" }
            ),
        });
    }
    if partial > 0 {
        not_checked.push(NotChecked {
            kind: Kind::SilentRank,
            reason: format!(
                "{partial} partial sum{} exactly zero on a rank without a declared received \
                 count: a rank's share of a sum may be zero by design, so only \
                 capture(..., received=N) tells",
                if partial == 1 { "" } else { "s" }
            ),
        });
    }
    findings
}
