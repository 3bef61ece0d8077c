//! `dumpview scan A...`: storage aliases first, then the first non-finite record, per window.

use std::fmt::Write;
use std::path::PathBuf;

use super::{CliError, Outcome, inputs::load_capture};
use crate::model::analysis::scan::{AliasGroup, WindowScan, scan_window};

/// Scans every window under `paths`; `Found` on a non-finite record or a stride conflict.
///
/// # Errors
/// An input that cannot be loaded.
pub fn run(paths: &[PathBuf], json: bool) -> Result<Outcome, CliError> {
    let dump = load_capture(paths, json)?;
    let scans: Vec<WindowScan> = dump.windows.iter().map(scan_window).collect();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"windows": scans, "warnings": dump.warnings})
            )?
        );
    } else {
        for scan in &scans {
            print!("{}", render(scan));
        }
    }
    // A damaged input (records dropped, evidence refused) is something to look at too.
    let found = scans.iter().any(WindowScan::found_something) || !dump.warnings.is_empty();
    Ok(if found {
        Outcome::Found
    } else {
        Outcome::Clean
    })
}

/// The text form of one window's scan.
pub fn render(scan: &WindowScan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "== rank {}, label {:?} (match {}, call {}): {} records\n   {}",
        scan.rank, scan.label, scan.match_index, scan.occurrence, scan.records, scan.source
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
            let counts = if nf.counts_known {
                format!("{} NaN, {} inf", nf.nan_count, nf.inf_count)
            } else {
                "NaN/inf present (counts unknown)".to_string()
            };
            let _ = writeln!(
                out,
                "first non-finite: {} (position {}, seq {}): {counts}; {} non-finite records in all",
                nf.key, nf.position, nf.seq, scan.nonfinite_records
            );
        }
        None => out.push_str("first non-finite: none\n"),
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
