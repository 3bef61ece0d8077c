//! The module tree of a window (pair) as text and JSON: per node, indented by depth, its
//! subtree's worst verdict, counts, and the first divergence and first non-finite inside it.

use std::fmt::Write;

use serde::Serialize;

use crate::model::analysis::diff::Cell;
use crate::model::analysis::tree::{ModuleTree, NodeId};

/// A verdict as the tree names it (the JSON `worst` spells [`Cell`] the same way).
pub fn cell_name(cell: Option<Cell>) -> &'static str {
    match cell {
        None => "-",
        Some(Cell::Agrees) => "agrees",
        Some(Cell::Inconclusive) => "inconclusive",
        Some(Cell::Missing) => "missing",
        Some(Cell::Diverges) => "diverges",
        Some(Cell::NonFinite) => "non_finite",
    }
}

/// One node, as `--tree --json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct NodeJson<'t> {
    /// The node's segments joined by `/`.
    pub path: String,
    /// Its own segment.
    pub name: &'t str,
    /// 1 for a top-level module.
    pub depth: usize,
    /// Records in its subtree.
    pub records: usize,
    /// Diverging pairs in its subtree.
    pub diverging: usize,
    /// Records with NaN or infinity (either side) in its subtree.
    pub nonfinite: usize,
    /// Records without evidence on one side in its subtree.
    pub missing: usize,
    /// The subtree's worst verdict (`null` in scan mode).
    pub worst: Option<Cell>,
    /// The first diverging `stage#N` inside it, in capture order.
    pub first_divergence: Option<&'t str>,
    /// The first `stage#N` holding NaN or infinity inside it.
    pub first_nonfinite: Option<&'t str>,
    /// True when the window's first divergence is inside it.
    pub holds_first_divergence: bool,
    /// True when the window's first non-finite record is inside it.
    pub holds_first_nonfinite: bool,
}

/// The nodes of `tree` down to `depth` (`None`: all), in pre-order.
pub fn json(tree: &ModuleTree, depth: Option<usize>) -> Vec<NodeJson<'_>> {
    tree.preorder(depth)
        .into_iter()
        .map(|id| {
            let node = &tree.nodes[id];
            let r = &node.rollup;
            NodeJson {
                path: tree.path_name(id),
                name: &node.name,
                depth: node.depth,
                records: r.records,
                diverging: r.diverging,
                nonfinite: r.nonfinite,
                missing: r.missing,
                worst: r.worst,
                first_divergence: r.first_divergence.map(|l| tree.keys[l].as_str()),
                first_nonfinite: r.first_nonfinite.map(|l| tree.keys[l].as_str()),
                holds_first_divergence: tree.holds_first_divergence(id),
                holds_first_nonfinite: tree.holds_first_nonfinite(id),
            }
        })
        .collect()
}

/// The text of `tree` down to `depth`: a summary line for the whole window, then a line per
/// node, indented two spaces a level; `◆` marks the nodes holding the window's first
/// divergence, `!` those holding its first non-finite record.
pub fn text(tree: &ModuleTree, depth: Option<usize>) -> String {
    let mut out = String::new();
    let root = &tree.nodes[ModuleTree::ROOT];
    let r = &root.rollup;
    let _ = write!(
        out,
        "module tree: {} nodes, {}; ",
        tree.nodes.len() - 1,
        counts(r.records, r.diverging, r.nonfinite, r.missing),
    );
    // Scan mode compares nothing: no divergence to name.
    if r.worst.is_some() {
        let first = tree
            .first_divergence
            .map_or("none", |l| tree.keys[l].as_str());
        let _ = write!(out, "first divergence {first}, ");
    }
    let first = tree
        .first_nonfinite
        .map_or("none", |l| tree.keys[l].as_str());
    let _ = writeln!(out, "first non-finite {first}");
    for id in tree.preorder(depth) {
        line(&mut out, tree, id);
    }
    out
}

fn counts(records: usize, diverging: usize, nonfinite: usize, missing: usize) -> String {
    let mut text = format!("{records} record{}", if records == 1 { "" } else { "s" });
    for (n, what) in [
        (diverging, "diverging"),
        (nonfinite, "non-finite"),
        (missing, "missing"),
    ] {
        if n > 0 {
            let _ = write!(text, ", {n} {what}");
        }
    }
    text
}

fn line(out: &mut String, tree: &ModuleTree, id: NodeId) {
    let node = &tree.nodes[id];
    let r = &node.rollup;
    let marks = format!(
        "{}{}",
        if tree.holds_first_divergence(id) {
            '◆'
        } else {
            ' '
        },
        if tree.holds_first_nonfinite(id) {
            '!'
        } else {
            ' '
        },
    );
    let indent = "  ".repeat(node.depth.saturating_sub(1));
    let name = if node.is_record() {
        tree.keys[node.leaves[0]]
            .rsplit_once('#')
            .map_or(node.name.clone(), |(_, occ)| format!("{}#{occ}", node.name))
    } else {
        node.name.clone()
    };
    let _ = write!(
        out,
        "{marks} {indent}{name}  [{}] {}",
        cell_name(r.worst),
        counts(r.records, r.diverging, r.nonfinite, r.missing)
    );
    if !node.is_record() {
        if let Some(l) = r.first_divergence {
            let _ = write!(out, "; first divergence {}", tree.keys[l]);
        }
        if let Some(l) = r.first_nonfinite {
            let _ = write!(out, "; first non-finite {}", tree.keys[l]);
        }
    }
    out.push('\n');
}
