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
    /// Which distinct label and which call of it (`match`, `occurrence`): several windows of
    /// one label (a `generate()` loop under `DUMP_PROBE_OCCURRENCE=all`) are told apart.
    #[serde(rename = "match")]
    match_index: u32,
    occurrence: u32,
    /// The manifest (A's in a diff).
    source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    label_b: Option<&'t str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source_b: Option<String>,
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
                match_index: w.a.match_index,
                occurrence: w.a.occurrence,
                source: w.a.source.clone(),
                label_b: Some(&w.b.label),
                source_b: Some(w.b.source.clone()),
                nodes: present::tree::json(tree, args.depth()),
            })
            .collect();
        print_json(&windows)?;
    } else {
        for (w, tree) in &trees {
            println!(
                "== rank {}: A {:?} (match {}, call {}, {} records) vs B {:?} (match {}, call {}, {} records)",
                w.rank,
                w.a.label,
                w.a.match_index,
                w.a.occurrence,
                w.a.records,
                w.b.label,
                w.b.match_index,
                w.b.occurrence,
                w.b.records
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
                match_index: w.match_index,
                occurrence: w.occurrence,
                source: w.source.display().to_string(),
                label_b: None,
                source_b: None,
                nodes: present::tree::json(tree, args.depth()),
            })
            .collect();
        print_json(&windows)?;
    } else {
        for (w, tree) in dump.windows.iter().zip(&trees) {
            println!(
                "== rank {}, label {:?} (match {}, call {}): {} records",
                w.rank,
                w.label,
                w.match_index,
                w.occurrence,
                w.records.len()
            );
            print!("{}", present::tree::text(tree, args.depth()));
        }
    }
    Ok(())
}

/// `{"windows": [...]}` on stdout, pretty-printed.
fn print_json(windows: &[WindowTree<'_>]) -> Result<(), CliError> {
    println!(
        "{}",
        serde_json::to_string_pretty(&serde_json::json!({ "windows": windows }))?
    );
    Ok(())
}
