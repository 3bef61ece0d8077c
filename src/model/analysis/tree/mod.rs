//! The module tree of one window (pair): every record placed under the modules its stage
//! path or msprobe's module chain names ([`path::segments`]), each node rolling up its
//! subtree: the worst verdict ([`Cell::severity`], the order the rank × stage overview
//! uses), the first divergence and first non-finite inside it in capture order, and counts.
//!
//! Built once per analysis from [`Leaf`]s in capture order ([`leaves`] derives them from a
//! [`WindowDiff`](super::diff::WindowDiff) or a [`WindowScan`](super::scan::WindowScan); the
//! workbench from its timeline rows, so that leaf `i` is row `i`). Building is linear in
//! records: a record whose stage was seen before (another occurrence) costs one hash lookup.

pub mod leaves;
pub mod path;

use std::collections::HashMap;

use serde::Serialize;

use super::diff::Cell;

/// A node's index in [`ModuleTree::nodes`]; the root is [`ModuleTree::ROOT`].
pub type NodeId = usize;

/// One record as the tree sees it.
#[derive(Debug, Clone, Copy)]
pub struct Leaf<'a> {
    /// `stage#occurrence`.
    pub key: &'a str,
    /// The record's context lines (msprobe's module chain among them); empty elsewhere.
    pub context: &'a [(String, String)],
    /// How the pair compares (`None` in scan mode, where nothing is compared).
    pub cell: Option<Cell>,
    /// NaN or infinity on either side.
    pub nonfinite: bool,
}

impl<'a> Leaf<'a> {
    /// The stage: the key without its `#occurrence`.
    pub fn stage(&self) -> &'a str {
        self.key
            .rsplit_once('#')
            .map_or(self.key, |(stage, _)| stage)
    }

    fn diverges(&self) -> bool {
        matches!(self.cell, Some(Cell::Diverges | Cell::NonFinite))
    }
}

/// What a node's subtree holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Rollup {
    /// Records in the subtree.
    pub records: usize,
    /// Pairs whose verdict is a divergence (diverges or non-finite).
    pub diverging: usize,
    /// Records holding NaN or infinity on either side.
    pub nonfinite: usize,
    /// Records without evidence on one side (one side only, not compared).
    pub missing: usize,
    /// The worst verdict ([`Cell::severity`]); `None` in scan mode.
    pub worst: Option<Cell>,
    /// The first diverging leaf in capture order (an index into the leaves).
    pub first_divergence: Option<usize>,
    /// The first leaf holding NaN or infinity, in capture order.
    pub first_nonfinite: Option<usize>,
}

impl Rollup {
    fn add_leaf(&mut self, index: usize, leaf: &Leaf<'_>) {
        self.records += 1;
        if leaf.diverges() {
            self.diverging += 1;
            self.first_divergence.get_or_insert(index);
        }
        if leaf.nonfinite {
            self.nonfinite += 1;
            self.first_nonfinite.get_or_insert(index);
        }
        if leaf.cell == Some(Cell::Missing) {
            self.missing += 1;
        }
        self.worst = worse(self.worst, leaf.cell);
    }

    fn merge(&mut self, child: &Rollup) {
        self.records += child.records;
        self.diverging += child.diverging;
        self.nonfinite += child.nonfinite;
        self.missing += child.missing;
        self.worst = worse(self.worst, child.worst);
        self.first_divergence = min_some(self.first_divergence, child.first_divergence);
        self.first_nonfinite = min_some(self.first_nonfinite, child.first_nonfinite);
    }
}

fn worse(a: Option<Cell>, b: Option<Cell>) -> Option<Cell> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.severity() > x.severity() { y } else { x }),
        (x, y) => x.or(y),
    }
}

fn min_some(a: Option<usize>, b: Option<usize>) -> Option<usize> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// One module (or call, or record name) of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its segment of the path (`mlp`, `3`, `Module.layer1.Sequential.forward.0`).
    pub name: String,
    /// The node above (`None` for the root).
    pub parent: Option<NodeId>,
    /// 0 for the root, 1 for a top-level module.
    pub depth: usize,
    /// The nodes below, in the capture order of their first record.
    pub children: Vec<NodeId>,
    /// The records whose path ends here (leaf indices, capture order): the occurrences of
    /// the stage this node names.
    pub leaves: Vec<usize>,
    /// What its subtree holds.
    pub rollup: Rollup,
}

impl Node {
    /// True for a node shown as one record: no nodes below and exactly one record of its own.
    pub fn is_record(&self) -> bool {
        self.children.is_empty() && self.leaves.len() == 1
    }
}

/// The module tree of one window (pair).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleTree {
    /// Every node; `nodes[ROOT]` holds the whole window. A parent's index is below its
    /// children's.
    pub nodes: Vec<Node>,
    /// The node of each leaf, by leaf index.
    pub leaf_node: Vec<NodeId>,
    /// The keys of the leaves, by leaf index.
    pub keys: Vec<String>,
    /// The window's first divergence (the diff's, a leaf index).
    pub first_divergence: Option<usize>,
    /// The window's first non-finite record (a leaf index).
    pub first_nonfinite: Option<usize>,
}

impl ModuleTree {
    /// The root: the whole window, named by nothing.
    pub const ROOT: NodeId = 0;

    /// Builds the tree of `leaves` (capture order); `first_divergence` / `first_nonfinite`:
    /// the leaf indices of the window's first divergence and first non-finite record, as the
    /// diff and the scan name them.
    pub fn build<'a>(
        leaves: impl IntoIterator<Item = Leaf<'a>>,
        first_divergence: Option<usize>,
        first_nonfinite: Option<usize>,
    ) -> ModuleTree {
        let mut nodes = vec![Node {
            name: String::new(),
            parent: None,
            depth: 0,
            children: Vec::new(),
            leaves: Vec::new(),
            rollup: Rollup::default(),
        }];
        let hasher = foldhash::fast::RandomState::default();
        let mut child_of: HashMap<(NodeId, &'a str), NodeId, _> = HashMap::with_hasher(hasher);
        // A stage's node by (its context lines, its stage): every occurrence after the first
        // is one lookup.
        let mut by_stage: HashMap<(usize, &'a str), NodeId, _> =
            HashMap::with_hasher(foldhash::fast::RandomState::default());
        let mut leaf_node = Vec::new();
        let mut keys = Vec::new();
        for (index, leaf) in leaves.into_iter().enumerate() {
            let stage = leaf.stage();
            let memo = (leaf.context.as_ptr() as usize, stage);
            let node = match by_stage.get(&memo) {
                Some(&node) => node,
                None => {
                    let mut at = Self::ROOT;
                    for segment in path::segments(stage, leaf.context) {
                        at = *child_of.entry((at, segment)).or_insert_with(|| {
                            let id = nodes.len();
                            let depth = nodes[at].depth + 1;
                            nodes[at].children.push(id);
                            nodes.push(Node {
                                name: segment.to_string(),
                                parent: Some(at),
                                depth,
                                children: Vec::new(),
                                leaves: Vec::new(),
                                rollup: Rollup::default(),
                            });
                            id
                        });
                    }
                    by_stage.insert(memo, at);
                    at
                }
            };
            nodes[node].leaves.push(index);
            nodes[node].rollup.add_leaf(index, &leaf);
            leaf_node.push(node);
            keys.push(leaf.key.to_string());
        }
        // Children come after their parents: one backward pass rolls every subtree up.
        for id in (1..nodes.len()).rev() {
            let (head, tail) = nodes.split_at_mut(id);
            let child = &tail[0];
            if let Some(parent) = child.parent {
                head[parent].rollup.merge(&child.rollup);
            }
        }
        ModuleTree {
            nodes,
            leaf_node,
            keys,
            first_divergence,
            first_nonfinite,
        }
    }

    /// The nodes from the root's child down to `node`, outermost first (empty for the root).
    pub fn path_to(&self, node: NodeId) -> Vec<NodeId> {
        let mut path = Vec::new();
        let mut at = Some(node);
        while let Some(id) = at.filter(|&id| id != Self::ROOT) {
            path.push(id);
            at = self.nodes[id].parent;
        }
        path.reverse();
        path
    }

    /// The node's path as one string, its segments joined by `/` (`model/layers/3/mlp`).
    pub fn path_name(&self, node: NodeId) -> String {
        let names: Vec<&str> = self
            .path_to(node)
            .into_iter()
            .map(|id| self.nodes[id].name.as_str())
            .collect();
        names.join("/")
    }

    /// True when `node`'s subtree holds the window's first divergence.
    pub fn holds_first_divergence(&self, node: NodeId) -> bool {
        self.first_divergence
            .is_some_and(|leaf| self.is_under(self.leaf_node[leaf], node))
    }

    /// True when `node`'s subtree holds the window's first non-finite record.
    pub fn holds_first_nonfinite(&self, node: NodeId) -> bool {
        self.first_nonfinite
            .is_some_and(|leaf| self.is_under(self.leaf_node[leaf], node))
    }

    /// True when `node` is `ancestor` or below it.
    pub fn is_under(&self, node: NodeId, ancestor: NodeId) -> bool {
        let mut at = Some(node);
        while let Some(id) = at {
            if id == ancestor {
                return true;
            }
            at = self.nodes[id].parent;
        }
        false
    }

    /// The nodes in pre-order (a node, then its children in capture order), down to
    /// `max_depth` (`None`: all), the root left out.
    pub fn preorder(&self, max_depth: Option<usize>) -> Vec<NodeId> {
        let mut out = Vec::new();
        let mut stack: Vec<NodeId> = self.nodes[Self::ROOT]
            .children
            .iter()
            .rev()
            .copied()
            .collect();
        while let Some(id) = stack.pop() {
            out.push(id);
            if max_depth.is_none_or(|d| self.nodes[id].depth < d) {
                stack.extend(self.nodes[id].children.iter().rev());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(key: &str, cell: Cell, nonfinite: bool) -> Leaf<'_> {
        Leaf {
            key,
            context: &[],
            cell: Some(cell),
            nonfinite,
        }
    }

    #[test]
    fn rollups_count_and_find_firsts_in_capture_order() {
        let leaves = [
            leaf("embed#1", Cell::Agrees, false),
            leaf("model.layers.0.mlp#1", Cell::Agrees, false),
            leaf("model.layers.1.mlp.input.0#1", Cell::Diverges, false),
            leaf("model.layers.1.mlp#1", Cell::NonFinite, true),
            leaf("model.layers.1.mlp#2", Cell::Missing, false),
            leaf("model.norm#1", Cell::Diverges, false),
        ];
        let tree = ModuleTree::build(leaves, Some(2), Some(3));
        let names: Vec<String> = tree
            .preorder(None)
            .into_iter()
            .map(|n| tree.path_name(n))
            .collect();
        assert_eq!(
            names,
            [
                "embed",
                "model",
                "model/layers",
                "model/layers/0",
                "model/layers/0/mlp",
                "model/layers/1",
                "model/layers/1/mlp",
                "model/layers/1/mlp/input.0",
                "model/norm"
            ]
        );
        let mlp1 = tree.leaf_node[3];
        assert_eq!(tree.path_name(mlp1), "model/layers/1/mlp");
        assert_eq!(tree.nodes[mlp1].leaves, [3, 4]);
        let r = &tree.nodes[mlp1].rollup;
        assert_eq!(
            (r.records, r.diverging, r.nonfinite, r.missing),
            (3, 2, 1, 1)
        );
        assert_eq!(r.worst, Some(Cell::NonFinite));
        assert_eq!((r.first_divergence, r.first_nonfinite), (Some(2), Some(3)));
        let model = tree.nodes[ModuleTree::ROOT].children[1];
        let r = &tree.nodes[model].rollup;
        assert_eq!((r.records, r.diverging), (5, 3));
        assert!(tree.holds_first_divergence(model));
        assert!(!tree.holds_first_divergence(tree.nodes[ModuleTree::ROOT].children[0]));
        assert_eq!(tree.nodes[ModuleTree::ROOT].rollup.records, 6);
        assert_eq!(tree.preorder(Some(1)).len(), 2);
    }
}
