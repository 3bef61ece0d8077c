//! The first non-finite across ranks: of the windows of one request on several ranks, which
//! rank went non-finite first, which tie there, and which turned non-finite only at or after
//! a collective stage (propagated, not the origin). docs/scan.md, "Across ranks".

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::model::analysis::scan::NonFinite;
use crate::model::dump::{Shard, Window};

/// One rank's first non-finite record, placed in the stage order the ranks share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankFirst {
    /// The window's global rank.
    pub rank: u32,
    /// Its first non-finite record (position in its own capture order).
    pub first: NonFinite,
    /// Position of that record's `stage#occurrence` in the shared stage order (0-based).
    pub shared_position: usize,
    /// `Some(key)` when the rank turned non-finite only at or after this collective stage,
    /// later than the origin: propagated through it, not the origin.
    pub propagated_via: Option<String>,
    /// How it propagated: `collective`, or `pipeline` (a later pp stage whose first record,
    /// the activation it received, is its first non-finite one); `None` with no propagation.
    pub propagated_by: Option<&'static str>,
    /// This rank's pp rank, when it is a later pipeline stage whose very first record is
    /// its first non-finite one (the received activation); not serialized.
    #[serde(skip)]
    pub received_at_stage: Option<u32>,
}

/// The first non-finite of one request across its ranks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AcrossRanks {
    /// The request window's label.
    pub label: String,
    /// Which distinct label it is.
    #[serde(rename = "match")]
    pub match_index: u32,
    /// Which call of that label.
    pub occurrence: u32,
    /// Ranks whose windows were compared, ascending.
    pub ranks: Vec<u32>,
    /// The earliest first non-finite, in the shared order: its key.
    pub origin_key: String,
    /// Its position in the shared stage order.
    pub origin_position: usize,
    /// The ranks whose first non-finite record is at that position (ties), ascending.
    pub origin_ranks: Vec<u32>,
    /// Every rank with a non-finite record, by rank.
    pub firsts: Vec<RankFirst>,
    /// Ranks with no non-finite record.
    pub finite_ranks: Vec<u32>,
}

impl AcrossRanks {
    /// `rank 1 went non-finite first, at layers.0.act#1; rank 0 propagated (non-finite from
    /// layers.0.down#1, a collective)`.
    pub fn describe(&self) -> String {
        let ranks = |rs: &[u32]| rs.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        let mut out = if self.origin_ranks.len() == 1 {
            format!(
                "rank {} went non-finite first, at {}",
                self.origin_ranks[0], self.origin_key
            )
        } else {
            format!(
                "ranks {} went non-finite first, together, at {}",
                ranks(&self.origin_ranks),
                self.origin_key
            )
        };
        for f in &self.firsts {
            if self.origin_ranks.contains(&f.rank) {
                continue;
            }
            match (&f.propagated_via, f.propagated_by) {
                (Some(via), Some("pipeline")) => out.push_str(&format!(
                    "; rank {} propagated (non-finite from {via}, the activation pp stage {} received from the stage before)",
                    f.rank,
                    f.received_at_stage.unwrap_or_default()
                )),
                (Some(via), _) => out.push_str(&format!(
                    "; rank {} propagated (non-finite from {}, a collective)",
                    f.rank, via
                )),
                (None, _) => out.push_str(&format!(
                    "; rank {} non-finite later, at {}, not through a collective: an origin of its own",
                    f.rank, f.first.key
                )),
            }
        }
        if !self.finite_ranks.is_empty() {
            out.push_str(&format!("; finite: rank {}", ranks(&self.finite_ranks)));
        }
        out
    }
}

/// The first non-finite across ranks of every request captured on two or more ranks that
/// holds a non-finite record; in order of (match, occurrence, label).
pub fn first_nonfinite_across(windows: &[Window]) -> Vec<AcrossRanks> {
    let mut requests: BTreeMap<(u32, u32, String), Vec<&Window>> = BTreeMap::new();
    for w in windows {
        requests
            .entry((w.match_index, w.occurrence, w.label.clone()))
            .or_default()
            .push(w);
    }
    requests
        .into_iter()
        .filter(|(_, ws)| ws.len() > 1)
        .filter_map(|((match_index, occurrence, label), mut ws)| {
            ws.sort_by_key(|w| w.rank);
            across(&ws).map(|mut a| {
                a.label = label;
                a.match_index = match_index;
                a.occurrence = occurrence;
                a
            })
        })
        .collect()
}

fn across(windows: &[&Window]) -> Option<AcrossRanks> {
    // The shared order: the lowest rank's keys in its capture order, then keys seen only on
    // later ranks, in theirs.
    let mut order: Vec<String> = Vec::new();
    let mut position: HashMap<String, usize> = HashMap::new();
    // Collective stages in the shared order: marked, or a replicated stage right after a
    // partial one (the output of the reduction that the capture did not name).
    let mut collective = vec![false; 0];
    for w in windows {
        let mut previous_partial = false;
        for r in &w.records {
            let key = r.key();
            let is_partial = matches!(r.shard, Some(Shard::Partial { .. }));
            let is_collective = r.collective.is_some()
                || (previous_partial && matches!(r.shard, Some(Shard::Replicated { .. })));
            previous_partial = is_partial;
            let at = *position.entry(key.clone()).or_insert_with(|| {
                order.push(key);
                collective.push(false);
                order.len() - 1
            });
            collective[at] |= is_collective;
        }
    }
    let mut firsts: Vec<RankFirst> = windows
        .iter()
        .filter_map(|w| {
            let first = NonFinite::first_in(w)?;
            let pp_rank = w
                .parallel()
                .ok()
                .and_then(|l| l.get("pp").map(|&(r, _)| r))
                .filter(|&r| r > 0);
            let received = w.records.first().is_some_and(|r| r.key() == first.key);
            Some(RankFirst {
                rank: w.rank,
                shared_position: position[&first.key],
                first,
                propagated_via: None,
                propagated_by: None,
                received_at_stage: pp_rank.filter(|_| received),
            })
        })
        .collect();
    let origin_position = firsts.iter().map(|f| f.shared_position).min()?;
    let origin_ranks: Vec<u32> = firsts
        .iter()
        .filter(|f| f.shared_position == origin_position)
        .map(|f| f.rank)
        .collect();
    for f in &mut firsts {
        // Propagated only when the collective's own output is this rank's first non-finite
        // record: a collective that came out finite carried nothing, so a later non-finite
        // record there is an origin of its own (a causal mask's -inf, a second bug).
        if f.shared_position > origin_position && collective[f.shared_position] {
            f.propagated_via = Some(order[f.shared_position].clone());
            f.propagated_by = Some("collective");
        } else if f.shared_position > origin_position && f.received_at_stage.is_some() {
            // A later pipeline stage whose first record (what it received from the stage
            // before) is already non-finite: carried by the send/recv, not a second origin.
            f.propagated_via = Some(order[f.shared_position].clone());
            f.propagated_by = Some("pipeline");
        }
    }
    let finite_ranks = windows
        .iter()
        .map(|w| w.rank)
        .filter(|r| !firsts.iter().any(|f| f.rank == *r))
        .collect();
    Some(AcrossRanks {
        label: String::new(),
        match_index: 0,
        occurrence: 0,
        ranks: windows.iter().map(|w| w.rank).collect(),
        origin_key: order[origin_position].clone(),
        origin_position,
        origin_ranks,
        firsts,
        finite_ranks,
    })
}
