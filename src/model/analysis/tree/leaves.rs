//! The leaves of a module tree from what the analysis already holds: a window pair's
//! [`WindowDiff`] (A's records in capture order, then B's unpaired stages, as the workbench's
//! timeline lists them) or one window's [`WindowScan`].

use std::collections::{HashMap, HashSet};

use super::{Leaf, ModuleTree};
use crate::model::analysis::diff::{Cell, WindowDiff};
use crate::model::analysis::scan::WindowScan;
use crate::model::dump::{Record, Window};

fn nonfinite(record: &Record) -> bool {
    record.stats.as_ref().is_some_and(|s| s.has_nonfinite())
}

/// The tree of one window (scan mode): a leaf per record, no verdicts.
pub fn of_scan(window: &Window, scan: &WindowScan) -> ModuleTree {
    let context = window.context.as_deref();
    let keys: Vec<String> = window.records.iter().map(Record::key).collect();
    let leaves = window
        .records
        .iter()
        .zip(&keys)
        .enumerate()
        .map(|(i, (r, key))| Leaf {
            key,
            context: context.map_or(&[], |c| c.of(i)),
            cell: None,
            nonfinite: nonfinite(r),
        });
    ModuleTree::build(
        leaves,
        None,
        scan.first_nonfinite.as_ref().map(|n| n.position),
    )
}

/// The tree of a window pair: A's records in capture order (a stage#N once), each with its
/// pair's verdict (A's only: missing), then B's unpaired stages (missing).
pub fn of_diff(a: &Window, b: &Window, diff: &WindowDiff) -> ModuleTree {
    let cells: HashMap<&str, Cell> = diff
        .pairs
        .iter()
        .map(|p| (p.key.as_str(), Cell::of(&p.comparison.verdict)))
        .collect();
    let by_key_b: HashMap<String, usize> = b
        .records
        .iter()
        .enumerate()
        .rev()
        .map(|(i, r)| (r.key(), i))
        .collect();
    let first_div = diff.first().map(|p| p.key.as_str());
    let first_nf: Vec<&str> = [&diff.first_nonfinite_a, &diff.first_nonfinite_b]
        .into_iter()
        .flatten()
        .map(|n| n.key.as_str())
        .collect();
    // (key, record index, side B?) of each leaf.
    let mut seen = HashSet::new();
    let mut rows: Vec<(String, usize, bool)> = Vec::with_capacity(a.records.len());
    for (i, r) in a.records.iter().enumerate() {
        let key = r.key();
        if seen.insert(key.clone()) {
            rows.push((key, i, false));
        }
    }
    for key in &diff.only_b {
        if let Some(&j) = by_key_b.get(key) {
            rows.push((key.clone(), j, true));
        }
    }
    let position =
        |wanted: Option<&str>| rows.iter().position(|(k, _, _)| Some(k.as_str()) == wanted);
    let first_divergence = position(first_div);
    let first_nonfinite = rows
        .iter()
        .position(|(k, _, _)| first_nf.contains(&k.as_str()));
    let leaves = rows.iter().map(|(key, i, on_b)| {
        let (window, other) = if *on_b {
            (b, None)
        } else {
            (a, by_key_b.get(key))
        };
        Leaf {
            key,
            context: window.context.as_deref().map_or(&[], |c| c.of(*i)),
            cell: Some(cells.get(key.as_str()).copied().unwrap_or(Cell::Missing)),
            nonfinite: nonfinite(&window.records[*i])
                || other.is_some_and(|&j| nonfinite(&b.records[j])),
        }
    });
    ModuleTree::build(leaves, first_divergence, first_nonfinite)
}
