//! The stage timeline: only the visible rows are built, so a frame costs the same for any dump.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Row as TableRow, Table};

use super::format::{Piece, bar};
use super::{Theme, format};
use crate::app::{App, Focus, Row, RowState};
use crate::model::dump::Record;

/// The fourth glyph column, shown when the open captures hold input sets: `↻` on a row
/// whose stage#N has one in A or B (`p` replays it).
pub const INPUT_SET: char = '↻';

/// The three glyph columns of a row: non-finite, comparison, alias. Legend in the help overlay.
pub fn glyphs(row: &Row) -> [char; 3] {
    let nonfinite = if row.first_nonfinite {
        '!'
    } else if row.nonfinite_a || row.nonfinite_b {
        'n'
    } else {
        ' '
    };
    let comparison = if row.first_divergence {
        '◆'
    } else {
        state_glyph(row.state)
    };
    let alias = if row.conflict {
        'X'
    } else if row.replicated {
        'R'
    } else if row.single_run {
        'S'
    } else if row.moved_write {
        'M'
    } else if row.aliased {
        '='
    } else {
        ' '
    };
    [nonfinite, comparison, alias]
}

/// The comparison glyph of a row's state (legend in the help overlay).
pub fn state_glyph(state: RowState) -> char {
    match state {
        RowState::Single => ' ',
        RowState::Agrees => '·',
        RowState::Diverges => '≠',
        RowState::ValuesMoved => '⇄',
        RowState::ChecksumInconclusive => '?',
        RowState::NotCompared => '∅',
        RowState::Structural => '#',
        RowState::NonFiniteDiff => 'N',
        RowState::OnlyA => 'A',
        RowState::OnlyB => 'B',
    }
}

/// The style of a row, before selection.
pub fn row_style(row: &Row, theme: Theme) -> Style {
    if row.first_nonfinite {
        theme.first_nonfinite()
    } else if row.first_divergence {
        theme.first_divergence()
    } else if row.conflict
        || row.nonfinite_a
        || row.nonfinite_b
        || row.replicated
        || row.single_run
        || row.moved_write
    {
        theme.bad()
    } else {
        match row.state {
            RowState::Diverges
            | RowState::ValuesMoved
            | RowState::Structural
            | RowState::NonFiniteDiff => theme.warn(),
            RowState::OnlyA | RowState::OnlyB | RowState::NotCompared => theme.missing(),
            RowState::ChecksumInconclusive => theme.dim(),
            _ => Style::new(),
        }
    }
}

/// The cells of one timeline row besides its glyphs and key: seq, dtype, shape. Where A
/// and B differ, dtype and shape read `A/B` (`f32/f16`), so B's side is never hidden.
/// `merged`: the full shapes of A's / B's records where the diff merged them over a
/// parallel group (shown instead of the rank's local shape).
fn cells(
    a: Option<&Record>,
    b: Option<&Record>,
    merged: [Option<&[u64]>; 2],
) -> (String, String, String) {
    let Some(first) = a.or(b) else {
        return (String::new(), String::new(), String::new());
    };
    let shape_a = merged[0].or(a.map(|r| &r.shape[..])).unwrap_or_default();
    let shape_b = merged[1].or(b.map(|r| &r.shape[..])).unwrap_or_default();
    let (dtype, shape) = match (a, b) {
        (Some(a), Some(b)) => (
            if a.dtype == b.dtype {
                format::dtype(&a.dtype)
            } else {
                format!("{}/{}", format::dtype(&a.dtype), format::dtype(&b.dtype))
            },
            if shape_a == shape_b {
                format::shape(shape_a)
            } else {
                format!("{}/{}", format::shape(shape_a), format::shape(shape_b))
            },
        ),
        (Some(_), None) => (format::dtype(&first.dtype), format::shape(shape_a)),
        _ => (format::dtype(&first.dtype), format::shape(shape_b)),
    };
    (first.seq.to_string(), dtype, shape)
}

/// Column widths of the timeline for `inner` columns inside its border, with `glyphs`
/// glyph columns (3, or 4 with the input-set column), by priority: the glyphs and the stage
/// key first (together at least [`KEY_MIN`] + 3: the input-set column takes its place from
/// the key, not from the shape), then shape and dtype as wide as their widest visible cell;
/// seq gives way first, then shape is cut (with `…`).
struct Widths {
    seq: u16,
    key: u16,
    dtype: u16,
    shape: u16,
}

/// The key column's width below which the others give way.
const KEY_MIN: usize = 18;

fn widths(inner: usize, glyphs: usize, seq: usize, dtype: usize, shape: usize) -> Widths {
    let (mut seq, dtype, mut shape) = (seq.max(3), dtype.max(5), shape.max(5));
    let key_min = (KEY_MIN + 3).saturating_sub(glyphs);
    // The glyphs and the spaces between five columns (4).
    let fixed = |seq: usize, shape: usize| glyphs + 4 + seq + dtype + shape - usize::from(seq == 0);
    if inner.saturating_sub(fixed(seq, shape)) < key_min {
        seq = 0;
    }
    if inner.saturating_sub(fixed(seq, shape)) < key_min {
        shape = shape
            .saturating_sub(key_min - inner.saturating_sub(fixed(seq, shape)))
            .max(5);
    }
    let key = inner.saturating_sub(fixed(seq, shape)).max(8);
    Widths {
        seq: seq as u16,
        key: key as u16,
        dtype: dtype as u16,
        shape: shape as u16,
    }
}

pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let Some(loaded) = &app.loaded else { return };
    let Some(choice) = app.choice() else { return };
    let a = &loaded.session.a.windows[choice.a];
    let b = choice
        .b
        .and_then(|bi| loaded.session.b.as_ref().map(|d| &d.windows[bi]));
    let height = area.height.saturating_sub(3) as usize;
    let total = app.view_len();
    // The selection is always on screen, even before the runtime has reported this height.
    let mut start = app.offset.min(total);
    if app.selected < start {
        start = app.selected;
    } else if height > 0 && app.selected >= start + height {
        start = app.selected + 1 - height;
    }
    let end = (start + height).min(total);
    // Column widths from the visible rows only: the cost stays per frame, not per record.
    let visible: Vec<(usize, &Row)> = (start..end)
        .map(|position| (position, &app.rows[app.row_index(position)]))
        .collect();
    let pairs = choice
        .pair
        .zip(loaded.diff())
        .map(|(w, report)| &report.windows[w].pairs);
    let cells: Vec<(String, String, String)> = visible
        .iter()
        .map(|(_, row)| {
            let pair = row.pair.zip(pairs).map(|(p, pairs)| &pairs[p]);
            let merged = |b_side: bool| {
                pair.and_then(|p| {
                    let (shape, pieces) = if b_side {
                        (&p.shape_b, &p.pieces_b)
                    } else {
                        (&p.shape_a, &p.pieces_a)
                    };
                    (pieces.len() > 1).then_some(&shape[..])
                })
            };
            cells(
                row.a.map(|i| &a.records[i]),
                row.b.and_then(|j| b.map(|b| &b.records[j])),
                [merged(false), merged(true)],
            )
        })
        .collect();
    let widest = |f: fn(&(String, String, String)) -> &String| {
        cells.iter().map(|c| format::width(f(c))).max().unwrap_or(0)
    };
    let inputs = loaded.input_sets;
    let glyph_width: u16 = if inputs { 4 } else { 3 };
    let w = widths(
        usize::from(area.width.saturating_sub(2)),
        usize::from(glyph_width),
        widest(|c| &c.0),
        widest(|c| &c.1),
        widest(|c| &c.2),
    );
    let body: Vec<TableRow> = visible
        .iter()
        .zip(cells)
        .map(|((position, row), (seq, dtype, shape))| {
            let [g1, g2, g3] = glyphs(row);
            let mut style = row_style(row, theme);
            if *position == app.selected {
                style = style.patch(theme.selected());
            }
            let mut glyph_line = Line::from(format!("{g1}{g2}{g3}"));
            if inputs {
                glyph_line.push_span(match row.input_a || row.input_b {
                    true => Span::styled(INPUT_SET.to_string(), theme.input_set()),
                    false => Span::raw(" "),
                });
            }
            let mut columns = vec![glyph_line];
            if w.seq > 0 {
                columns.push(Line::from(seq));
            }
            columns.extend([
                Line::from(format::fit_middle(&row.key, usize::from(w.key))),
                Line::from(format::fit(&dtype, usize::from(w.dtype))),
                Line::from(format::fit(&shape, usize::from(w.shape))),
            ]);
            TableRow::new(columns).style(style)
        })
        .collect();
    // The position and what the filter hides stay; the rest gives way in a narrow panel.
    let mut pieces = vec![
        Piece::new("timeline", theme.title(), 0),
        Piece::new(
            format!("{}/{}", (app.selected + 1).min(total), total),
            Style::new(),
            0,
        ),
        Piece::new(
            crate::model::present::scan::records(app.findings, "finding"),
            Style::new(),
            1,
        ),
    ];
    if app.filter {
        pieces.push(Piece::new(
            format!("{} hidden", app.rows.len() - total),
            theme.warn(),
            0,
        ));
        pieces.push(Piece::new("(a shows all)", theme.warn(), 3));
    }
    let title = pane_title(pieces, area.width);
    let border = if app.focus == Focus::Timeline {
        theme.focused_border()
    } else {
        Style::new()
    };
    let mut constraints = vec![Constraint::Length(glyph_width)];
    let mut header = vec![""];
    if w.seq > 0 {
        constraints.push(Constraint::Length(w.seq));
        header.push("seq");
    }
    constraints.extend([
        Constraint::Length(w.key),
        Constraint::Length(w.dtype),
        Constraint::Length(w.shape),
    ]);
    header.extend(["stage#occ", "dtype", "shape"]);
    let table = Table::new(body, constraints)
        .header(TableRow::new(header).style(theme.dim()))
        .block(Block::bordered().title(title).border_style(border));
    frame.render_widget(table, area);
}

/// The title line of the timeline's pane (the timeline or the module tree): `pieces` joined
/// by ` · ` within a pane `width` columns wide, the first two joined by a space (`timeline
/// 5/109`, `tree 5/40`), a space at each end.
pub(super) fn pane_title(pieces: Vec<Piece>, width: u16) -> Line<'static> {
    let mut title = bar(
        pieces,
        " · ",
        Style::new(),
        usize::from(width.saturating_sub(4)),
    );
    if let Some(sep) = title.spans.get_mut(1).filter(|s| s.content == " · ") {
        sep.content = " ".into();
    }
    title.spans.insert(0, Span::raw(" "));
    title.spans.push(Span::raw(" "));
    title
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_give_way_by_priority() {
        // Wide: every column as wide as its widest cell, the key takes the rest.
        let w = widths(100, 3, 3, 7, 7);
        assert_eq!(
            (w.seq, w.dtype, w.shape, w.key),
            (3, 7, 7, 100 - 3 - 4 - 3 - 7 - 7)
        );
        // The input-set column takes one more from the key, also where the key is at its
        // least: the shape is not cut for it.
        let w = widths(100, 4, 3, 7, 7);
        assert_eq!(w.key, 100 - 4 - 4 - 3 - 7 - 7);
        let w = widths(38, 4, 3, 7, 7);
        assert_eq!((w.seq, w.dtype, w.shape, w.key), (0, 7, 7, 17));
        // 80 columns (38 inside the timeline): seq gives way so the key keeps 18.
        let w = widths(38, 3, 3, 7, 7);
        assert_eq!((w.seq, w.dtype, w.shape, w.key), (0, 7, 7, 18));
        // Narrower still: the shape is cut (never below its header), then the key.
        let w = widths(32, 3, 3, 7, 12);
        assert_eq!((w.seq, w.shape, w.key), (0, 5, 14));
    }
}
