//! Replication checks: a stage captured `replicated:AXIS` must hold the same values on every
//! rank of its group. Ranks that disagree, under the diff's own tolerances, are a finding of
//! their own, often the first sign of a broken collective or a weight loaded differently on
//! one rank (docs/diff.md, "Across parallel layouts").

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::analysis::compare::{Tolerances, Verdict, compare_records};
use crate::model::dump::{Shard, Window};

/// Two ranks of a group whose `replicated` records of one stage disagree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplicationFinding {
    /// The capture it was found in, `'a'` or `'b'`.
    pub side: char,
    /// The group axis (`tp`, `cp`, …).
    pub axis: String,
    /// `stage#occurrence`.
    pub key: String,
    /// The stage name.
    pub stage: String,
    /// The global rank whose record stands for the group (its lowest group rank).
    pub rank: u32,
    /// The global rank that disagrees with it.
    pub other_rank: u32,
    /// How the two records compare (never agree).
    pub verdict: Verdict,
    /// Position of the stage in the lowest rank's capture order (0-based).
    pub position: usize,
}

impl ReplicationFinding {
    /// `replicated tensor differs across tp ranks 0 and 1 at layers.3.attn_norm (magnitude)`.
    pub fn describe(&self) -> String {
        format!(
            "replicated tensor differs across {} ranks {} and {} at {} ({})",
            self.axis,
            self.rank,
            self.other_rank,
            self.stage,
            self.verdict.name()
        )
    }
}

/// Checks every `replicated` stage of `windows` across its group, under `tolerances`; findings
/// in order of side, group and capture position.
pub fn check(side: char, windows: &[Window], tolerances: &Tolerances) -> Vec<ReplicationFinding> {
    type Key = (String, String, u32, u32, Vec<(String, u32, u32)>);
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
                    w.label.clone(),
                    w.match_index,
                    w.occurrence,
                    others,
                ))
                .or_default()
                .push((rank_in_group, w));
        }
    }
    let mut findings = Vec::new();
    for ((axis, ..), mut members) in groups {
        members.sort_by_key(|&(r, w)| (r, w.rank));
        let (_, base) = members[0];
        for (position, record) in base.records.iter().enumerate() {
            let replicated =
                matches!(&record.shard, Some(Shard::Replicated { axis: a }) if *a == axis);
            if !replicated {
                continue;
            }
            for &(_, other) in &members[1..] {
                let Some(theirs) = other
                    .records
                    .iter()
                    .find(|r| r.stage == record.stage && r.occurrence == record.occurrence)
                else {
                    continue;
                };
                let comparison = compare_records(record, theirs, tolerances);
                if comparison.verdict.diverges() {
                    findings.push(ReplicationFinding {
                        side,
                        axis: axis.clone(),
                        key: record.key(),
                        stage: record.stage.to_string(),
                        rank: base.rank,
                        other_rank: other.rank,
                        verdict: comparison.verdict,
                        position,
                    });
                }
            }
        }
    }
    findings
}
