//! The module tree in the workbench (`m`): the timeline pane shows the selected window's
//! [`ModuleTree`] instead of its flat rows, folded to the path of the first divergence (the
//! first non-finite record in scan mode), else to its top-level modules.
//!
//! The tree is built once per window's rows (on `m`, on another window, on a reload: leaf
//! `i` is timeline row `i`), and its lines ([`TreeView::lines`]) once per fold, never per
//! frame. The selection model is the timeline's: the cursor's line names one record
//! ([`TreeView::target`]) and that record is [`App::selected`], so the detail panel, the
//! strip plot and every jump (`n`, `f`, `d`, search, an alias member) see one selection;
//! after each action [`follow`] opens the path to the selected record where a jump moved it.

use super::{Action, App, Focus, Row, RowState};
use crate::model::analysis::diff::Cell;
use crate::model::analysis::tree::{Leaf, ModuleTree, NodeId};
use crate::model::dump::Window;

/// One line of the tree pane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeLine {
    /// A module; a stage with one record and nothing below it is that record's line.
    Node(NodeId),
    /// One occurrence of the stage `node` names, listed under it: `leaf` is its timeline row.
    Record {
        /// The node whose stage this record is an occurrence of.
        node: NodeId,
        /// The record's index into the leaves (= into [`App::rows`]).
        leaf: usize,
    },
}

/// The tree pane's state: the tree of the current window's rows, its folds and its cursor.
#[derive(Debug, Clone)]
pub struct TreeView {
    /// The tree of [`App::rows`] (leaf `i` is row `i`).
    pub tree: ModuleTree,
    /// Per node: unfolded.
    pub open: Vec<bool>,
    /// The lines in view, in pre-order of the unfolded nodes (rebuilt on each fold).
    pub lines: Vec<TreeLine>,
    /// The line under the cursor (an index into `lines`).
    pub cursor: usize,
    /// The first line drawn.
    pub offset: usize,
    /// Per node: the first leaf of its subtree in capture order (where its line sits among
    /// its parent's own records).
    first_leaf: Vec<usize>,
}

/// A node's place that survives a rebuild: its segment names from the top.
type NodePath = Vec<String>;

fn context_of(window: &Window, index: usize) -> &[(String, String)] {
    window.context.as_deref().map_or(&[], |c| c.of(index))
}

/// How a row compares, as the tree rolls it up (`None` in scan mode).
fn cell(state: RowState) -> Option<Cell> {
    match state {
        RowState::Single => None,
        RowState::Agrees => Some(Cell::Agrees),
        RowState::Diverges | RowState::ValuesMoved | RowState::Structural => Some(Cell::Diverges),
        RowState::NonFiniteDiff => Some(Cell::NonFinite),
        RowState::ChecksumInconclusive => Some(Cell::Inconclusive),
        RowState::NotCompared | RowState::OnlyA | RowState::OnlyB => Some(Cell::Missing),
    }
}

impl TreeView {
    /// The tree of `app`'s current rows, every node folded; `None` without rows.
    fn build(app: &App) -> Option<TreeView> {
        let loaded = app.loaded.as_ref()?;
        let choice = app.choice()?;
        if app.rows.is_empty() {
            return None;
        }
        let a = &loaded.session.a.windows[choice.a];
        let b = choice
            .b
            .and_then(|bi| loaded.session.b.as_ref().map(|s| &s.windows[bi]));
        let leaves = app.rows.iter().map(|r: &Row| Leaf {
            key: &r.key,
            context: match (r.a, r.b.zip(b)) {
                (Some(i), _) => context_of(a, i),
                (None, Some((j, b))) => context_of(b, j),
                _ => &[],
            },
            cell: cell(r.state),
            nonfinite: r.nonfinite_a || r.nonfinite_b,
        });
        let first_divergence = app.rows.iter().position(|r| r.first_divergence);
        let first_nonfinite = app.rows.iter().position(|r| r.first_nonfinite);
        let tree = ModuleTree::build(leaves, first_divergence, first_nonfinite);
        // Children have higher ids than their parents: one backward pass.
        let mut first_leaf = vec![usize::MAX; tree.nodes.len()];
        for id in (0..tree.nodes.len()).rev() {
            let node = &tree.nodes[id];
            let own = node.leaves.first().copied().unwrap_or(usize::MAX);
            first_leaf[id] = first_leaf[id].min(own);
            if let Some(parent) = node.parent {
                first_leaf[parent] = first_leaf[parent].min(first_leaf[id]);
            }
        }
        let mut view = TreeView {
            open: vec![false; tree.nodes.len()],
            tree,
            lines: Vec::new(),
            cursor: 0,
            offset: 0,
            first_leaf,
        };
        view.relayout();
        Some(view)
    }

    /// True when `node` has lines below it (modules, or several occurrences of a stage).
    pub fn foldable(&self, node: NodeId) -> bool {
        !self.tree.nodes[node].is_record()
    }

    /// The lines directly below `node`: its modules and its own records, in capture order.
    fn below(&self, node: NodeId) -> Vec<TreeLine> {
        let n = &self.tree.nodes[node];
        let mut out = Vec::with_capacity(n.children.len() + n.leaves.len());
        let (mut children, mut leaves) = (n.children.iter().peekable(), n.leaves.iter().peekable());
        loop {
            let line = match (children.peek(), leaves.peek()) {
                (Some(&&child), Some(&&leaf)) if self.first_leaf[child] < leaf => {
                    children.next();
                    TreeLine::Node(child)
                }
                (_, Some(&&leaf)) => {
                    leaves.next();
                    TreeLine::Record { node, leaf }
                }
                (Some(&&child), None) => {
                    children.next();
                    TreeLine::Node(child)
                }
                (None, None) => break,
            };
            out.push(line);
        }
        out
    }

    /// Rebuilds [`TreeView::lines`] from the folds (linear in the lines shown).
    fn relayout(&mut self) {
        let mut lines = Vec::new();
        let mut stack: Vec<TreeLine> = self.below(ModuleTree::ROOT).into_iter().rev().collect();
        while let Some(line) = stack.pop() {
            lines.push(line);
            if let TreeLine::Node(id) = line
                && self.open[id]
                && self.foldable(id)
            {
                stack.extend(self.below(id).into_iter().rev());
            }
        }
        self.lines = lines;
        self.cursor = self.cursor.min(self.lines.len().saturating_sub(1));
    }

    /// The record a line stands for, which the detail panel shows while the cursor is on
    /// it: a record's own; a module's first divergence, else its first non-finite record,
    /// else its first record.
    pub fn target(&self, line: TreeLine) -> usize {
        match line {
            TreeLine::Record { leaf, .. } => leaf,
            TreeLine::Node(id) => {
                let node = &self.tree.nodes[id];
                match node.leaves.as_slice() {
                    [only] if node.children.is_empty() => *only,
                    _ => node
                        .rollup
                        .first_divergence
                        .or(node.rollup.first_nonfinite)
                        .unwrap_or(self.first_leaf[id]),
                }
            }
        }
    }

    /// The node a line belongs to (a record line: the stage's node).
    pub fn node_of(line: TreeLine) -> NodeId {
        match line {
            TreeLine::Node(id) | TreeLine::Record { node: id, .. } => id,
        }
    }

    /// The depth a line is drawn at (1: a top-level module).
    pub fn depth(&self, line: TreeLine) -> usize {
        match line {
            TreeLine::Node(id) => self.tree.nodes[id].depth,
            TreeLine::Record { node, .. } => self.tree.nodes[node].depth + 1,
        }
    }

    /// Unfolds every node above record `leaf` (and its own node when that lists several
    /// lines) and puts the cursor on the record's line.
    pub fn reveal(&mut self, leaf: usize) {
        let Some(&node) = self.tree.leaf_node.get(leaf) else {
            return;
        };
        let mut path = self.tree.path_to(node);
        if !self.foldable(node) {
            path.pop();
        }
        for id in path {
            self.open[id] = true;
        }
        self.relayout();
        let wanted = if self.foldable(node) {
            TreeLine::Record { node, leaf }
        } else {
            TreeLine::Node(node)
        };
        if let Some(at) = self.lines.iter().position(|&l| l == wanted) {
            self.cursor = at;
        }
    }

    /// Scrolls so that the cursor is within `height` lines from the offset.
    fn scroll_into(&mut self, height: usize) {
        let height = height.max(1);
        if self.cursor < self.offset {
            self.offset = self.cursor;
        } else if self.cursor >= self.offset + height {
            self.offset = self.cursor + 1 - height;
        }
        // No blank lines below the last one while lines above are hidden (the cursor stays
        // in view: it is at most the last line).
        self.offset = self.offset.min(self.lines.len().saturating_sub(height));
    }

    /// The segment names from the top down to `node`.
    fn path_of(&self, node: NodeId) -> NodePath {
        self.tree
            .path_to(node)
            .into_iter()
            .map(|id| self.tree.nodes[id].name.clone())
            .collect()
    }

    /// The node at `path`, if this tree has it.
    fn find(&self, path: &[String]) -> Option<NodeId> {
        let mut at = ModuleTree::ROOT;
        for name in path {
            at = *self.tree.nodes[at]
                .children
                .iter()
                .find(|&&c| &self.tree.nodes[c].name == name)?;
        }
        Some(at)
    }
}

impl App {
    /// Builds the tree of the current rows again (another window, a reload), keeping the
    /// folds and the cursor's module by their names where the new tree has them.
    pub(super) fn rebuild_tree(&mut self) {
        let Some(old) = self.tree.take() else { return };
        let Some(mut view) = TreeView::build(self) else {
            return;
        };
        let open: Vec<NodePath> = (0..old.open.len())
            .filter(|&id| old.open[id])
            .map(|id| old.path_of(id))
            .collect();
        for path in &open {
            if let Some(id) = view.find(path) {
                view.open[id] = true;
            }
        }
        view.relayout();
        if let Some(TreeLine::Node(id)) = old.lines.get(old.cursor).copied()
            && let Some(found) = view.find(&old.path_of(id))
            && let Some(at) = view.lines.iter().position(|&l| l == TreeLine::Node(found))
        {
            view.cursor = at;
        }
        view.offset = old.offset;
        self.tree = Some(view);
    }

    fn tree_cursor_moved(&mut self) {
        let Some(view) = self.tree.as_mut() else {
            return;
        };
        view.scroll_into(self.view_height);
        if let Some(&line) = view.lines.get(view.cursor) {
            let leaf = view.target(line);
            self.select_row(leaf);
        }
    }
}

/// `m`: the module tree of the selected window in the timeline pane, or the flat timeline
/// again (the selected record stays selected).
pub(super) fn toggle(app: &mut App) {
    if app.tree.take().is_some() {
        app.message = Some("timeline: m shows the module tree again".to_string());
        return;
    }
    let Some(mut view) = TreeView::build(app) else {
        app.message = Some("no records in this window: nothing to show as a tree".to_string());
        return;
    };
    // Folded to the path of the first divergence (the first non-finite record in scan
    // mode) opened, else to the top-level modules; [`follow`] then opens the selection's.
    let first = view.tree.first_divergence.or(view.tree.first_nonfinite);
    if let Some(leaf) = first {
        view.reveal(leaf);
    }
    app.tree = Some(view);
}

/// True for the actions the open tree pane takes: the wheel and clicks over it, and the
/// moves and folds while it has the focus.
pub(super) fn takes(app: &App, action: &Action) -> bool {
    app.tree.is_some()
        && match action {
            Action::Scroll(_) | Action::ClickRow(_) => true,
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom
            | Action::Enter
            | Action::Left
            | Action::Right => app.focus == Focus::Timeline,
            _ => false,
        }
}

/// The moves and folds of the tree pane: arrows, pages, the wheel, clicks; Enter (or
/// Space) folds or unfolds a module (on a record it widens the detail, as on the timeline),
/// Left folds (or goes to the module above), Right unfolds (or goes to the first line
/// below).
pub(super) fn on_key(app: &mut App, action: Action, page: usize) {
    if matches!(action, Action::ClickRow(_)) {
        app.focus = Focus::Timeline;
    }
    let Some(view) = app.tree.as_mut() else {
        return;
    };
    let last = view.lines.len().saturating_sub(1);
    let line = view.lines.get(view.cursor).copied();
    match action {
        Action::Up => view.cursor = view.cursor.saturating_sub(1),
        Action::Down => view.cursor = (view.cursor + 1).min(last),
        Action::PageUp => view.cursor = view.cursor.saturating_sub(page),
        Action::PageDown => view.cursor = (view.cursor + page).min(last),
        Action::Top => view.cursor = 0,
        Action::Bottom => view.cursor = last,
        Action::Scroll(delta) => {
            let height = app.view_height.max(1);
            let max_offset = view.lines.len().saturating_sub(height);
            view.offset = (view.offset as i64 + delta).clamp(0, max_offset as i64) as usize;
            view.cursor = view
                .cursor
                .clamp(view.offset, (view.offset + height - 1).min(last));
        }
        Action::ClickRow(visible) => {
            if view.offset + visible <= last {
                view.cursor = view.offset + visible;
            }
        }
        Action::Enter => match line {
            Some(TreeLine::Node(id)) if view.foldable(id) => {
                view.open[id] = !view.open[id];
                view.relayout();
            }
            // On a record, as on the timeline: the wide detail.
            Some(_) => app.wide_detail = !app.wide_detail,
            None => {}
        },
        Action::Left => match line {
            Some(TreeLine::Node(id)) if view.foldable(id) && view.open[id] => {
                view.open[id] = false;
                view.relayout();
            }
            Some(line) => {
                // The module above: the record's stage, or the node's parent.
                let up = match line {
                    TreeLine::Record { node, .. } => Some(node),
                    TreeLine::Node(id) => view.tree.nodes[id]
                        .parent
                        .filter(|&p| p != ModuleTree::ROOT),
                };
                let above = &view.lines[..view.cursor];
                if let Some(at) =
                    up.and_then(|up| above.iter().rposition(|&l| l == TreeLine::Node(up)))
                {
                    view.cursor = at;
                }
            }
            None => {}
        },
        Action::Right => {
            if let Some(TreeLine::Node(id)) = line
                && view.foldable(id)
            {
                if view.open[id] {
                    view.cursor = (view.cursor + 1).min(last);
                } else {
                    view.open[id] = true;
                    view.relayout();
                }
            }
        }
        _ => return,
    }
    app.tree_cursor_moved();
}

/// After every action: where the selected record is not the cursor's (a jump, a search,
/// another window, a reload moved it), opens the path to it and puts the cursor there.
pub(super) fn follow(app: &mut App) {
    if app.tree.is_none() {
        return;
    }
    let selected = app.row().map(|_| app.row_index(app.selected));
    let height = app.view_height;
    let Some(view) = app.tree.as_mut() else {
        return;
    };
    if let Some(leaf) = selected
        && view.lines.get(view.cursor).map(|&l| view.target(l)) != Some(leaf)
    {
        view.reveal(leaf);
    }
    view.scroll_into(height);
}
