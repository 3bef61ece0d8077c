//! `--tree [--depth K]` of `dumpview diff` and `dumpview scan`: the rolled-up verdicts per
//! module of every window (pair), instead of the flat answer; exit status as without it.

use serde::Serialize;

use super::CliError;
use crate::model::analysis::diff::DiffReport;
use crate::model::analysis::scan::WindowScan;
use crate::model::analysis::tree::{ModuleTree, leaves};
use crate::model::dump::Dump;
use crate::model::present;

/// The options that turn a diff or a scan into its module tree.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TreeArgs {
    /// Print the module tree instead: per module (dotted stage paths, msprobe's module chain),
    /// its subtree's worst verdict, counts, and the first divergence and first non-finite
    /// inside it
    #[arg(long)]
    pub tree: bool,
    /// With --tree: show modules down to depth K only (1: the top-level modules)
    #[arg(long, value_name = "K", requires = "tree", value_parser = clap::value_parser!(u32).range(1..))]
    pub depth: Option<u32>,
}

impl TreeArgs {
    fn depth(&self) -> Option<usize> {
        self.depth.map(|d| d as usize)
    }
}

#[derive(Serialize)]
struct WindowTree<'t> {
    rank: u32,
    label: &'t str,
    #[serde(skip_serializing_if = "Option::is_none")]
    label_b: Option<&'t str>,
    nodes: Vec<present::tree::NodeJson<'t>>,
}

/// Prints the tree of every window pair of `report` (A's and B's windows in `a`, `b`).
///
/// # Errors
/// Writing the JSON fails.
pub fn print_diff(
    args: &TreeArgs,
    report: &DiffReport,
    a: &Dump,
    b: &Dump,
    json: bool,
) -> Result<(), CliError> {
    let trees: Vec<(&crate::model::analysis::diff::WindowDiff, ModuleTree)> = report
        .windows
        .iter()
        .filter_map(|w| {
            let wa = a.windows.get(w.a.id?.0)?;
            let wb = b.windows.get(w.b.id?.0)?;
            Some((w, leaves::of_diff(wa, wb, w)))
        })
        .collect();
    if json {
        let windows: Vec<WindowTree<'_>> = trees
            .iter()
            .map(|(w, tree)| WindowTree {
                rank: w.rank,
                label: &w.a.label,
                label_b: Some(&w.b.label),
                nodes: present::tree::json(tree, args.depth()),
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "windows": windows }))?
        );
    } else {
        for (w, tree) in &trees {
            println!(
                "== rank {}: A {:?} ({} records) vs B {:?} ({} records)",
                w.rank, w.a.label, w.a.records, w.b.label, w.b.records
            );
            print!("{}", present::tree::text(tree, args.depth()));
        }
    }
    Ok(())
}

/// Prints the tree of every window of `dump` (its scans in `scans`, window order).
///
/// # Errors
/// Writing the JSON fails.
pub fn print_scan(
    args: &TreeArgs,
    dump: &Dump,
    scans: &[WindowScan],
    json: bool,
) -> Result<(), CliError> {
    let trees: Vec<ModuleTree> = dump
        .windows
        .iter()
        .zip(scans)
        .map(|(w, s)| leaves::of_scan(w, s))
        .collect();
    if json {
        let windows: Vec<WindowTree<'_>> = dump
            .windows
            .iter()
            .zip(&trees)
            .map(|(w, tree)| WindowTree {
                rank: w.rank,
                label: &w.label,
                label_b: None,
                nodes: present::tree::json(tree, args.depth()),
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "windows": windows }))?
        );
    } else {
        for (w, tree) in dump.windows.iter().zip(&trees) {
            println!(
                "== rank {}, label {:?}: {} records",
                w.rank,
                w.label,
                w.records.len()
            );
            print!("{}", present::tree::text(tree, args.depth()));
        }
    }
    Ok(())
}
