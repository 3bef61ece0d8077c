//! The text of a diff across parallel layouts: which groups were merged, the merged and
//! partial pairs, a merged record's per-rank pieces, and replicated stages whose ranks
//! disagree (docs/diff.md, "Across parallel layouts").

use std::fmt::Write;

use crate::model::analysis::compare::ExclusionKind;
use crate::model::analysis::diff::{DiffReport, PairDiff, WindowDiff};
use crate::model::analysis::merge::SideMerge;

/// At most this many keys or findings are listed per kind (`--json` has them all).
const LISTED: usize = 8;

/// The `parallel layouts differ` block: the axes, the group sizes, each group merged and what
/// merging left out; empty for a same-layout diff.
pub fn merge_text(report: &DiffReport) -> String {
    let Some(layouts) = &report.layouts else {
        return String::new();
    };
    let mut out = String::new();
    let sizes: Vec<String> = layouts
        .sizes
        .iter()
        .map(|(axis, (a, b))| format!("{axis} {a} in A vs {b} in B"))
        .collect();
    let mut how = Vec::new();
    if layouts.axes.iter().any(|a| a != "pp") {
        how.push(
            "each group's records are merged into one logical record before pairing (counts, sums \
             and the position checksum add; extremes combine; l2 by squares)",
        );
    }
    if layouts.axes.iter().any(|a| a == "pp") {
        how.push("the pp ranks' stages are concatenated in pp order into one logical window");
    }
    let _ = writeln!(
        out,
        "parallel layouts differ: {}: {}",
        sizes.join(", "),
        how.join("; ")
    );
    for (side, merge) in [("A", &layouts.a), ("B", &layouts.b)] {
        for line in side_lines(side, merge) {
            let _ = writeln!(out, "   {line}");
        }
    }
    out.push('\n');
    out
}

/// The workbench's title note for a diff across layouts: each side's group sizes, and which
/// side was merged (`A: tp=1 · B: tp=2 merged`); `None` for a same-layout diff.
pub fn banner(report: &DiffReport) -> Option<String> {
    let layouts = report.layouts.as_ref()?;
    let side = |label: &str, merge: &SideMerge, pick: fn(&(u32, u32)) -> u32| {
        let sizes: Vec<String> = layouts
            .sizes
            .iter()
            .map(|(axis, sizes)| format!("{axis}={}", pick(sizes)))
            .collect();
        let groups = || merge.groups.iter().filter(|g| g.size > 1);
        let whole = |g: &&crate::model::analysis::merge::GroupMerge| {
            g.missing_ranks.is_empty() && g.warnings.is_empty()
        };
        // A group that lost a rank or a stage is not "merged": the header says NOT MERGED.
        let state = match (groups().next(), groups().all(|g| whole(&g))) {
            (None, _) => "",
            (Some(_), true) => " merged",
            (Some(_), false) => " merged in part",
        };
        format!("{label}: {}{state}", sizes.join(" "))
    };
    Some(format!(
        "{} · {}",
        side("A", &layouts.a, |s| s.0),
        side("B", &layouts.b, |s| s.1)
    ))
}

/// One line per group merged on `side`, its missing ranks and what it could not merge.
pub fn side_lines(side: &str, merge: &SideMerge) -> Vec<String> {
    let mut out = String::new();
    for g in merge.groups.iter().filter(|g| g.size > 1) {
        let ranks: Vec<String> = g.ranks.iter().map(u32::to_string).collect();
        if g.axis == "pp" {
            let _ = writeln!(
                out,
                "{side}: pp group of {} (ranks {}) concatenated in pp order as rank {}: {} \
                 record{} from the later pp ranks after rank {}'s",
                g.size,
                ranks.join(", "),
                g.logical_rank,
                g.concatenated,
                if g.concatenated == 1 { "" } else { "s" },
                g.ranks.first().copied().unwrap_or_default()
            );
        } else {
            // Axes over the same ranks are one group (vLLM's ep group is its tp group).
            let same = if g.same_group.is_empty() {
                String::new()
            } else {
                format!("; {} the same group", g.same_group.join(", "))
            };
            let _ = writeln!(
                out,
                "{side}: {} group of {} (ranks {}{same}) merged as rank {}: {} stage{} merged from \
             pieces, {} replicated (rank {}'s record stands for the group)",
                g.axis,
                g.size,
                ranks.join(", "),
                g.logical_rank,
                g.merged,
                if g.merged == 1 { "" } else { "s" },
                g.replicated,
                g.ranks.first().copied().unwrap_or_default()
            );
        }
        if !g.missing_ranks.is_empty() {
            let missing: Vec<String> = g.missing_ranks.iter().map(u32::to_string).collect();
            let _ = writeln!(
                out,
                "{side}: MISSING EVIDENCE: {} rank{} {} of the group not captured; its {} \
                 are left out ({})",
                g.axis,
                if missing.len() == 1 { "" } else { "s" },
                missing.join(", "),
                if g.axis == "pp" {
                    "stages"
                } else {
                    "sharded stages"
                },
                g.missing_advice()
            );
        }
        for w in g.warnings.iter().take(LISTED) {
            let _ = writeln!(out, "{side}: not merged: {w}");
        }
        if g.warnings.len() > LISTED {
            let _ = writeln!(
                out,
                "{side}: … {} more not merged",
                g.warnings.len() - LISTED
            );
        }
    }
    for invalid in &merge.invalid {
        let _ = writeln!(out, "{side}: layout not read, kept per rank: {invalid}");
    }
    out.lines().map(str::to_string).collect()
}

/// ` (7 merged over a parallel group)` for the coverage line; empty when none is.
pub fn merged_count(w: &WindowDiff) -> String {
    match w.pairs.iter().filter(|p| p.merged()).count() {
        0 => String::new(),
        n => format!(" ({n} merged over a parallel group)"),
    }
}

/// The partial sums compared on mean and checksum only, one line; empty when there are none.
pub fn partial_text(w: &WindowDiff) -> String {
    let keys: Vec<&str> = w
        .pairs
        .iter()
        .filter(|p| {
            p.comparison.stats.iter().any(|d| {
                d.excluded
                    .as_ref()
                    .is_some_and(|e| e.kind == ExclusionKind::Partial)
            })
        })
        .map(|p| p.key.as_str())
        .collect();
    if keys.is_empty() {
        return String::new();
    }
    format!(
        "partial sums: {} pair{} compared on mean and pos_checksum only (min, max, max_abs and l2 of \
         a reduced tensor do not follow from its partial sums): {}\n",
        keys.len(),
        if keys.len() == 1 { "" } else { "s" },
        keys.iter()
            .take(LISTED)
            .copied()
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// A merged record's per-rank pieces, one line per side; empty for records as captured.
pub fn pieces_text(pair: &PairDiff) -> String {
    let mut out = String::new();
    for (side, pieces) in [("A", &pair.pieces_a), ("B", &pair.pieces_b)] {
        if pieces.is_empty() {
            continue;
        }
        let parts: Vec<String> = pieces
            .iter()
            .map(|p| format!("rank {} {:?} ({})", p.rank, p.shape, p.source))
            .collect();
        // One piece: a pp stage, captured whole on its rank.
        let verb = if pieces.len() == 1 {
            "captured on"
        } else {
            "merged from"
        };
        let _ = writeln!(out, "   {side} {verb}: {}", parts.join("; "));
    }
    out
}

/// `REPLICATED TENSOR DIFFERS` lines, one per finding (up to a limit); empty without any.
pub fn replicated_text(report: &DiffReport) -> String {
    let mut out = String::new();
    for f in report.replicated.iter().take(LISTED) {
        let _ = writeln!(
            out,
            "REPLICATED TENSOR DIFFERS in {}: {}",
            f.side.to_ascii_uppercase(),
            f.describe()
        );
    }
    if report.replicated.len() > LISTED {
        let _ = writeln!(
            out,
            "   … {} more replicated stages differ across ranks",
            report.replicated.len() - LISTED
        );
    }
    out
}
