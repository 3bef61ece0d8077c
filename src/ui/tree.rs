//! The module tree in the timeline pane (`m`): one line per module or record, indented by
//! depth, with a fold marker, the subtree's worst verdict, its counts, and the marks of the
//! first divergence and the first non-finite record. Only the lines in view are built, so a
//! frame costs the same for any dump.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Row as TableRow, Table};

use super::format::{self, Piece};
use super::{Theme, timeline};
use crate::app::{App, Focus, TreeLine, TreeView};
use crate::model::analysis::diff::Cell;
use crate::model::analysis::tree::{ModuleTree, Node};

/// The fold marker of a module whose lines are shown.
pub const OPEN: char = '▾';
/// The fold marker of a folded module.
pub const FOLDED: char = '▸';

/// The name column's width below which a level indents by one column instead of two.
const NARROW: usize = 32;

/// The glyph of a subtree's worst verdict: the timeline's glyph of that verdict (`≠` diverges,
/// `N` non-finite, `∅` missing evidence, `?` inconclusive, `·` agrees; blank in scan mode).
pub fn worst_glyph(worst: Option<Cell>) -> char {
    match worst {
        None => ' ',
        Some(Cell::Agrees) => '·',
        Some(Cell::Inconclusive) => '?',
        Some(Cell::Missing) => '∅',
        Some(Cell::Diverges) => '≠',
        Some(Cell::NonFinite) => 'N',
    }
}

/// The style of a module's line by what its subtree holds, before selection.
fn module_style(node: &Node, theme: Theme) -> Style {
    match node.rollup.worst {
        Some(Cell::NonFinite) => theme.bad(),
        Some(Cell::Diverges) => theme.warn(),
        Some(Cell::Missing) => theme.missing(),
        Some(Cell::Inconclusive) => theme.dim(),
        _ if node.rollup.nonfinite > 0 => theme.bad(),
        _ => Style::new(),
    }
}

/// A record's name in the tree: its node's segment and its occurrence (`output.0#1`).
fn record_name(view: &TreeView, node: usize, leaf: usize) -> String {
    let occurrence = view.tree.keys[leaf].rsplit_once('#').map_or("", |(_, n)| n);
    format!("{}#{occurrence}", view.tree.nodes[node].name)
}

/// One drawn line: glyphs, name, counts, style.
struct Drawn {
    glyphs: Line<'static>,
    name: String,
    counts: [String; 3],
    style: Style,
}

fn line_of(app: &App, view: &TreeView, line: TreeLine, name_width: usize, theme: Theme) -> Drawn {
    let node_id = TreeView::node_of(line);
    let node = &view.tree.nodes[node_id];
    // Two columns a level where the names have room, one in a narrow pane; never more than
    // half the column, so a deep record keeps its name.
    let step = if name_width >= NARROW { 2 } else { 1 };
    let indent = (step * view.depth(line).saturating_sub(1)).min(name_width / 2);
    let is_record = match line {
        TreeLine::Record { .. } => true,
        TreeLine::Node(id) => !view.foldable(id),
    };
    let marker = match line {
        TreeLine::Node(id) if view.foldable(id) && view.open[id] => OPEN,
        TreeLine::Node(id) if view.foldable(id) => FOLDED,
        _ => ' ',
    };
    let label = if is_record {
        record_name(view, node_id, view.target(line))
    } else {
        node.name.clone()
    };
    let room = name_width.saturating_sub(indent + 2);
    let name = format!(
        "{}{marker} {}",
        " ".repeat(indent),
        format::fit_middle(&label, room)
    );
    if is_record {
        let row = &app.rows[view.target(line)];
        let [nonfinite, _, alias] = timeline::glyphs(row);
        let first = if row.first_divergence { '◆' } else { ' ' };
        let glyphs = format!(
            "{nonfinite}{first}{}{alias}",
            timeline::state_glyph(row.state)
        );
        return Drawn {
            glyphs: Line::from(glyphs),
            name,
            counts: Default::default(),
            style: timeline::row_style(row, theme),
        };
    }
    let r = &node.rollup;
    let (nonfinite, nonfinite_style) = if view.tree.holds_first_nonfinite(node_id) {
        ("!", theme.first_nonfinite())
    } else if r.nonfinite > 0 {
        ("n", Style::new())
    } else {
        (" ", Style::new())
    };
    let first = if view.tree.holds_first_divergence(node_id) {
        Span::styled("◆", theme.first_divergence())
    } else {
        Span::raw(" ")
    };
    let glyphs = Line::from(vec![
        Span::styled(nonfinite, nonfinite_style),
        first,
        Span::raw(worst_glyph(r.worst).to_string()),
        Span::raw(" "),
    ]);
    Drawn {
        glyphs,
        name,
        counts: [
            r.records.to_string(),
            r.diverging.to_string(),
            r.nonfinite.to_string(),
        ],
        style: module_style(node, theme),
    }
}

/// Draws the open tree ([`App::tree`]) in `area`, the timeline's place.
pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let Some(view) = &app.tree else { return };
    let height = area.height.saturating_sub(3) as usize;
    let total = view.lines.len();
    // The cursor is always on screen, even before the runtime has reported this height.
    let mut start = view.offset.min(total);
    if view.cursor < start {
        start = view.cursor;
    } else if height > 0 && view.cursor >= start + height {
        start = view.cursor + 1 - height;
    }
    let end = (start + height).min(total);
    let diffing = app.diffing();
    let root = &view.tree.nodes[ModuleTree::ROOT].rollup;
    // Count columns as wide as the window's totals (the widest any line can need).
    let digits = |n: usize, header: &str| n.to_string().len().max(header.len()) as u16;
    let widths = [
        digits(root.records, "recs"),
        if diffing {
            digits(root.diverging, "div")
        } else {
            0
        },
        digits(root.nonfinite, "nf"),
    ];
    let inner = area.width.saturating_sub(2);
    let shown: u16 = widths.iter().filter(|&&w| w > 0).map(|w| w + 1).sum();
    let name_width = inner.saturating_sub(4 + 1 + shown).max(8);
    let body: Vec<TableRow> = view.lines[start..end]
        .iter()
        .enumerate()
        .map(|(i, &line)| {
            let drawn = line_of(app, view, line, usize::from(name_width), theme);
            let mut style = drawn.style;
            if start + i == view.cursor {
                style = style.patch(theme.selected());
            }
            let mut columns = vec![drawn.glyphs, Line::from(drawn.name)];
            for (count, width) in drawn.counts.into_iter().zip(widths) {
                if width > 0 {
                    columns.push(Line::from(count).right_aligned());
                }
            }
            TableRow::new(columns).style(style)
        })
        .collect();
    let r = root;
    let mut pieces = vec![
        Piece::new("tree", theme.title(), 0),
        Piece::new(
            format!("{}/{}", (view.cursor + 1).min(total), total),
            Style::new(),
            0,
        ),
        Piece::new(format!("{} records", r.records), Style::new(), 2),
    ];
    if diffing {
        pieces.push(Piece::new(
            format!("{} diverging", r.diverging),
            Style::new(),
            1,
        ));
    } else {
        pieces.push(Piece::new(
            format!("{} non-finite", r.nonfinite),
            Style::new(),
            1,
        ));
    }
    pieces.push(Piece::new("m timeline", theme.dim(), 3));
    let title = timeline::pane_title(pieces, area.width);
    let border = if app.focus == Focus::Timeline {
        theme.focused_border()
    } else {
        Style::new()
    };
    let mut constraints = vec![Constraint::Length(4), Constraint::Length(name_width)];
    let mut header = vec!["", "module"];
    for (width, name) in widths.into_iter().zip(["recs", "div", "nf"]) {
        if width > 0 {
            constraints.push(Constraint::Length(width));
            header.push(name);
        }
    }
    let header = TableRow::new(
        header
            .into_iter()
            .enumerate()
            .map(|(i, h)| {
                if i >= 2 {
                    Line::from(h).right_aligned()
                } else {
                    Line::from(h)
                }
            })
            .collect::<Vec<_>>(),
    );
    let table = Table::new(body, constraints)
        .header(header.style(theme.dim()))
        .block(Block::bordered().title(title).border_style(border));
    frame.render_widget(table, area);
}
