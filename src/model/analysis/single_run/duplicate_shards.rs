//! Duplicate shards: the pieces of a tensor-parallel stage (`tp:D`) hold the same values on
//! several ranks of its group, as when a loader reads shard 0 on every rank. (Context-parallel
//! pieces are slices of the tokens, which may repeat: equal pieces there are no finding.)
//!
//! Equal pieces are told by every statistic agreeing under the replica bound replicated stages
//! are held to ([`replica_tolerances`]), the position checksum taken at each rank's own
//! coordinates (`local_checksum`): `pos_checksum` weighs a piece at the full tensor's
//! coordinates, so it differs for equal pieces by design.

use std::collections::HashMap;

use crate::model::analysis::compare::{Verdict, compare_records, dtype_kind};
use crate::model::analysis::replicated::replica_tolerances;
use crate::model::dump::{Record, Shard, Window};

use super::types::{Finding, Kind, NotChecked, RecordRef};
use crate::model::analysis::groups::ParallelGroup;

/// Why a sliced stage of a group was not checked, counted per reason.
#[derive(Default)]
struct Skipped {
    ranks_missing: usize,
    no_local_checksum: usize,
}

/// The duplicate-shard findings of `groups`, and what could not be checked.
pub fn duplicate_shards(
    groups: &[ParallelGroup<'_>],
    not_checked: &mut Vec<NotChecked>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut skipped = Skipped::default();
    // Only tensor-parallel pieces: context-parallel pieces are slices of the tokens, which may
    // repeat (padding, a repeated prompt) and then are rightly equal.
    for group in groups.iter().filter(|g| g.axis == "tp") {
        check_group(group, &mut findings, &mut skipped);
    }
    if skipped.ranks_missing > 0 {
        not_checked.push(NotChecked {
            kind: Kind::DuplicateShards,
            reason: format!(
                "{} sliced stage{} not captured (or not read: see the warnings) on every rank \
                 of {} group: equal pieces need every rank (DUMP_PROBE_RANKS=all)",
                skipped.ranks_missing,
                plural(skipped.ranks_missing),
                if skipped.ranks_missing == 1 {
                    "its"
                } else {
                    "their"
                }
            ),
        });
    }
    if skipped.no_local_checksum > 0 {
        not_checked.push(NotChecked {
            kind: Kind::DuplicateShards,
            reason: format!(
                "{} sliced stage{} without local_checksum (a probe from before it, or a format \
                 without it): pos_checksum weighs pieces at the full tensor's coordinates and \
                 cannot tell equal pieces",
                skipped.no_local_checksum,
                plural(skipped.no_local_checksum)
            ),
        });
    }
    findings
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Whether `record` is a piece of a tensor sliced over `axis`.
fn sliced_over(record: &Record, axis: &str) -> bool {
    matches!(&record.shard, Some(Shard::Split { axis: a, .. }) if *a == axis)
}

/// A floating piece with a spread of finite values: the only pieces whose equality means
/// anything (zero-initialised and constant pieces are equal on every rank by design).
fn informative(record: &Record) -> bool {
    dtype_kind(&record.dtype) == "floating"
        && record.numel > 0
        && record
            .stats
            .as_ref()
            .is_some_and(|s| matches!((s.min, s.max), (Some(lo), Some(hi)) if lo < hi))
}

/// `record` with its position checksum at local coordinates, for comparing pieces.
fn at_local_coordinates(record: &Record) -> Option<Record> {
    let local = record.local_checksum?;
    let mut piece = record.clone();
    if let Some(stats) = piece.stats.as_mut() {
        stats.pos_checksum = Some(local);
    }
    Some(piece)
}

fn check_group(group: &ParallelGroup<'_>, findings: &mut Vec<Finding>, skipped: &mut Skipped) {
    let (_, base) = group.members[0];
    let complete = group.members.len() as u32 == group.size;
    // The group's first duplicate for each set of ranks: later ones usually follow from it.
    let mut first: Vec<(Vec<u32>, String)> = Vec::new();
    // Each member's records by (stage, occurrence), made at the first sliced record.
    let mut indexes: Option<Vec<HashMap<(&str, u32), &Record>>> = None;
    for record in base.records.iter().filter(|r| sliced_over(r, &group.axis)) {
        let key = record.key();
        let index = indexes.get_or_insert_with(|| {
            group
                .members
                .iter()
                .map(|&(_, w)| {
                    w.records
                        .iter()
                        .map(|r| ((&*r.stage, r.occurrence), r))
                        .collect::<HashMap<_, _>>()
                })
                .collect::<Vec<_>>()
        });
        let pieces: Vec<(&Window, &Record)> = group
            .members
            .iter()
            .zip(index.iter())
            .filter_map(|(&(_, w), by_key)| {
                by_key
                    .get(&(&*record.stage, record.occurrence))
                    .map(|&r| (w, r))
            })
            .collect();
        if !complete || pieces.len() != group.members.len() {
            skipped.ranks_missing += 1;
            continue;
        }
        if !pieces
            .iter()
            .all(|(_, r)| informative(r) && sliced_over(r, &group.axis))
        {
            continue;
        }
        let Some(local): Option<Vec<Record>> = pieces
            .iter()
            .map(|(_, r)| at_local_coordinates(r))
            .collect()
        else {
            skipped.no_local_checksum += 1;
            continue;
        };
        // Ranks whose pieces agree, linked: each class of two or more is one finding.
        let mut class: Vec<usize> = (0..local.len()).collect();
        for i in 0..local.len() {
            for j in i + 1..local.len() {
                if class[j] != j {
                    continue;
                }
                let tolerances =
                    replica_tolerances(&local[i], &local[j], base.stats_dtype.as_deref());
                if compare_records(&local[i], &local[j], &tolerances).verdict == Verdict::Agree {
                    class[j] = class[i];
                }
            }
        }
        let mut roots: Vec<usize> = class.clone();
        roots.sort_unstable();
        roots.dedup();
        for root in roots {
            let members: Vec<usize> = (0..class.len()).filter(|&m| class[m] == root).collect();
            if members.len() < 2 {
                continue;
            }
            let ranks: Vec<u32> = members.iter().map(|&m| pieces[m].0.rank).collect();
            let shard = record
                .shard
                .as_ref()
                .map(Shard::to_string)
                .unwrap_or_default();
            let every = if members.len() == pieces.len() {
                format!("every {} rank ({})", group.axis, join(&ranks))
            } else {
                format!("{} ranks {}", group.axis, join(&ranks))
            };
            findings.push(Finding {
                kind: Kind::DuplicateShards,
                stage: record.stage.to_string(),
                key: key.clone(),
                ranks: ranks.clone(),
                records: members
                    .iter()
                    .map(|&m| RecordRef::of(pieces[m].0, pieces[m].1))
                    .collect(),
                sentence: format!(
                    "{key} ({shard}) holds the same piece on {every}: equal statistics and \
                     equal checksums at local coordinates, so the ranks hold one slice, not \
                     their own; or the stage is replicated: annotate it `replicated:{}`",
                    group.axis
                ),
                look_at: match first.iter().find(|(with, _)| *with == ranks) {
                    Some((_, earlier)) => format!(
                        "{earlier} first: these ranks' pieces were already equal there, and \
                         this stage follows from it"
                    ),
                    _ => format!(
                        "the code that loads or slices {}'s weights per rank (the shard \
                         index it reads)",
                        record.stage
                    ),
                },
            });
            if !first.iter().any(|(with, _)| *with == ranks) {
                first.push((ranks.clone(), key.clone()));
            }
        }
    }
}

/// `0, 1 and 3`.
pub(super) fn join(ranks: &[u32]) -> String {
    let words: Vec<String> = ranks.iter().map(u32::to_string).collect();
    match words.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => words.join(""),
    }
}
