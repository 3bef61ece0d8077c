//! Findings from one run: bug classes that leave a signature inside a single capture, read
//! from the statistics alone, with no second run to compare against (docs/scan.md, "Findings
//! from one run").
//!
//! - [`Kind::DuplicateShards`]: the pieces of a sliced stage are equal on several ranks.
//! - [`Kind::SilentRank`]: a stage is exactly zero on ranks that received tokens.
//! - [`Kind::StaleOutput`]: a stage repeats its previous output bit for bit while its input
//!   and its rows changed.
//!
//! A rule whose evidence is missing (one rank captured, no row map, one window per label)
//! says so once in [`SingleRun::not_checked`]: never silence, never a guess.

mod duplicate_shards;
mod silent_rank;
mod stale_output;
mod types;

pub use types::*;

use crate::model::analysis::groups;
use crate::model::dump::Window;

/// The single-run findings of one capture's `windows` (every rank and window of it).
pub fn check(windows: &[Window]) -> SingleRun {
    let mut not_checked = Vec::new();
    let mut ranks: Vec<u32> = windows.iter().map(|w| w.rank).collect();
    ranks.sort_unstable();
    ranks.dedup();
    let mut findings = Vec::new();
    if ranks.len() < 2 {
        if !windows.is_empty() {
            for kind in [Kind::DuplicateShards, Kind::SilentRank] {
                not_checked.push(NotChecked {
                    kind,
                    reason: "one rank captured: ranks cannot be compared (DUMP_PROBE_RANKS=all)"
                        .to_string(),
                });
            }
        }
    } else {
        let parallel = groups::parallel_groups(windows);
        if parallel.is_empty() {
            not_checked.push(NotChecked {
                kind: Kind::DuplicateShards,
                reason: "no parallel group declared: which ranks hold pieces of one tensor is \
                         unknown (arm(label, parallel={...}))"
                    .to_string(),
            });
        }
        findings.extend(duplicate_shards::duplicate_shards(
            &parallel,
            &mut not_checked,
        ));
        let forwards = groups::forward_groups(windows);
        let unreadable = groups::unreadable_steps(windows);
        if unreadable > 0 {
            not_checked.push(NotChecked {
                kind: Kind::SilentRank,
                reason: format!(
                    "{unreadable} window{} declare{} a metadata step that is not a non-negative \
                     integer: grouped by label and call instead (arm(..., step=N))",
                    if unreadable == 1 { "" } else { "s" },
                    if unreadable == 1 { "s" } else { "" }
                ),
            });
        }
        if forwards.is_empty() {
            not_checked.push(NotChecked {
                kind: Kind::SilentRank,
                reason: "no forward was captured on two ranks: the ranks' windows share no \
                         label and call and declare no common step (arm(..., step=N) where \
                         labels differ)"
                    .to_string(),
            });
        }
        findings.extend(silent_rank::silent_ranks(&forwards, &mut not_checked));
    }
    findings.extend(stale_output::stale_outputs(windows, &mut not_checked));
    not_checked.sort();
    not_checked.dedup();
    SingleRun {
        findings,
        not_checked,
    }
}
