//! The text of a scan: per window, storage aliases (stride conflicts first), then the first
//! non-finite record.

use std::fmt::Write;

use crate::model::analysis::ranks::AcrossRanks;
use crate::model::analysis::scan::{AliasGroup, WindowScan};
use crate::model::analysis::single_run::SingleRun;

/// The text of the first non-finite across ranks, one block per request; empty for none.
pub fn across_ranks_text(across: &[AcrossRanks]) -> String {
    let mut out = String::new();
    for a in across {
        let ranks: Vec<String> = a.ranks.iter().map(u32::to_string).collect();
        let _ = writeln!(
            out,
            "== across ranks {}, label {:?} (match {}, call {})
first non-finite across ranks: {}",
            ranks.join(", "),
            a.label,
            a.match_index,
            a.occurrence,
            a.describe()
        );
        for f in &a.firsts {
            let role = if a.origin_ranks.contains(&f.rank) {
                "origin".to_string()
            } else {
                match &f.propagated_via {
                    Some(via) => format!("propagated via {via}"),
                    None => "later, no collective between".to_string(),
                }
            };
            let _ = writeln!(
                out,
                "   rank {}: {} (shared position {}, {}): {role}",
                f.rank,
                f.first.key,
                f.shared_position,
                f.first.counts_text()
            );
        }
        out.push('\n');
    }
    out
}

/// The text form of one window's scan.
pub fn text(scan: &WindowScan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "== rank {}, label {:?} (match {}, call {}): {}\n   {}",
        scan.rank,
        scan.label,
        scan.match_index,
        scan.occurrence,
        super::number::counted(scan.records, "record"),
        scan.source
    );
    let conflicts = scan
        .alias_groups
        .iter()
        .filter(|g| g.stride_conflict)
        .count();
    if scan.alias_groups.is_empty() {
        let _ = writeln!(out, "storage aliases: none");
    } else {
        let _ = writeln!(
            out,
            "storage aliases: {} groups, {} with a stride conflict",
            scan.alias_groups.len(),
            conflicts
        );
        for group in &scan.alias_groups {
            out.push_str(&render_group(group));
        }
    }
    match &scan.first_nonfinite {
        Some(nf) => {
            let counts = nf.counts_text();
            let _ = writeln!(
                out,
                "first non-finite: {} (position {}, seq {}): {counts}; {} in all",
                nf.key,
                nf.position,
                nf.seq,
                records(scan.nonfinite_records, "non-finite record")
            );
        }
        None => out.push_str("first non-finite: none\n"),
    }
    if scan.nonfinite_only_in_padding > 0 {
        let _ = writeln!(
            out,
            "   ({} with NaN/inf only in padding rows of the row map: never compared, not a finding)",
            records(scan.nonfinite_only_in_padding, "record")
        );
    }
    out.push('\n');
    out
}

fn render_group(group: &AliasGroup) -> String {
    let mut out = String::new();
    let storage = match group.storage_id {
        Some(id) => format!("storage {id}"),
        None => "storage (no id)".to_string(),
    };
    let _ = writeln!(
        out,
        "  {} {} on {} at {:#x}{}",
        if group.stride_conflict {
            "! STRIDE CONFLICT"
        } else {
            "  alias"
        },
        storage,
        group.device,
        group.storage_ptr,
        if group.unchecked {
            " (too large to check element by element)"
        } else {
            ""
        }
    );
    let width = group.members.iter().map(|m| m.key.len()).max().unwrap_or(0);
    for m in &group.members {
        let _ = writeln!(
            out,
            "      {:<width$}  seq {:<5} {:<9} shape {:?} stride {:?} offset {}",
            m.key, m.seq, m.dtype, m.shape, m.stride, m.storage_offset
        );
    }
    for (x, y) in &group.conflicts {
        let _ = writeln!(
            out,
            "      conflict: {x} and {y} read shared bytes through different layouts"
        );
    }
    out
}

/// `1 non-finite record`, `3 non-finite records`.
pub fn records(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The text of the findings from one run: each finding with the records it rests on and
/// where to look, then one `not checked:` line per rule and reason.
pub fn single_run_text(run: &SingleRun) -> String {
    let mut out = String::new();
    if run.findings.is_empty() {
        out.push_str("findings from one run: none");
        if run.not_checked.is_empty() {
            out.push_str(" (duplicate shards, silent rank and stale output checked)");
        }
        out.push('\n');
    } else {
        let _ = writeln!(
            out,
            "findings from one run: {}",
            records(run.findings.len(), "finding")
        );
    }
    for f in &run.findings {
        let _ = writeln!(out, "{}: {}", f.kind.title().to_uppercase(), f.sentence);
        let _ = writeln!(out, "   look at: {}", f.look_at);
        for r in &f.records {
            let _ = writeln!(out, "   record: {}", r.describe());
        }
    }
    for n in &run.not_checked {
        let _ = writeln!(out, "not checked: {}: {}", n.kind.title(), n.reason);
    }
    out
}
