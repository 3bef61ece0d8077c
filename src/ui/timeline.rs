//! The stage timeline: only the visible rows are built, so a frame costs the same for any dump.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Row as TableRow, Table};

use super::{Theme, format};
use crate::app::{App, Focus, Row, RowState};

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
        match row.state {
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
    };
    let alias = if row.conflict {
        'X'
    } else if row.aliased {
        '='
    } else {
        ' '
    };
    [nonfinite, comparison, alias]
}

/// The style of a row, before selection.
pub fn row_style(row: &Row, theme: Theme) -> Style {
    if row.first_nonfinite {
        theme.first_nonfinite()
    } else if row.first_divergence {
        theme.first_divergence()
    } else if row.conflict || row.nonfinite_a || row.nonfinite_b {
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

pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let Some(loaded) = &app.loaded else { return };
    let Some(choice) = app.choice() else { return };
    let a = &loaded.session.a.windows[choice.a];
    let b = choice
        .b
        .and_then(|bi| loaded.session.b.as_ref().map(|d| &d.windows[bi]));
    let height = area.height.saturating_sub(3) as usize;
    // The selection is always on screen, even before the runtime has reported this height.
    let mut start = app.offset.min(app.rows.len());
    if app.selected < start {
        start = app.selected;
    } else if height > 0 && app.selected >= start + height {
        start = app.selected + 1 - height;
    }
    let end = (start + height).min(app.rows.len());
    // Column widths from the visible rows only: the cost stays per frame, not per record.
    let cells: Vec<(String, String, String)> = app.rows[start..end]
        .iter()
        .map(|row| {
            let record = row
                .a
                .map(|i| &a.records[i])
                .or_else(|| row.b.and_then(|j| b.map(|b| &b.records[j])));
            record.map_or((String::new(), String::new(), String::new()), |r| {
                (
                    r.seq.to_string(),
                    format::dtype(&r.dtype),
                    format::shape(&r.shape),
                )
            })
        })
        .collect();
    let seq_width = cells.iter().map(|c| c.0.len()).max().unwrap_or(1).max(3) as u16;
    let shape_width = cells
        .iter()
        .map(|c| c.2.chars().count())
        .max()
        .unwrap_or(5)
        .clamp(5, 16) as u16;
    let key_width = (area.width as usize)
        .saturating_sub(2 + 3 + seq_width as usize + 4 + shape_width as usize + 4)
        .max(8);
    let body: Vec<TableRow> = app.rows[start..end]
        .iter()
        .zip(cells)
        .enumerate()
        .map(|(i, (row, (seq, dtype, shape)))| {
            let [g1, g2, g3] = glyphs(row);
            let mut style = row_style(row, theme);
            if start + i == app.selected {
                style = style.patch(theme.selected());
            }
            TableRow::new(vec![
                Line::from(format!("{g1}{g2}{g3}")),
                Line::from(seq),
                Line::from(format::fit(&row.key, key_width)),
                Line::from(dtype),
                Line::from(shape),
            ])
            .style(style)
        })
        .collect();
    let findings = app.findings;
    let title = Line::from(vec![
        Span::styled(" timeline ", theme.title()),
        Span::raw(format!(
            "{}/{} · {} findings ",
            app.selected + 1,
            app.rows.len(),
            findings
        )),
    ]);
    let border = if app.focus == Focus::Timeline {
        theme.focused_border()
    } else {
        Style::new()
    };
    let table = Table::new(
        body,
        [
            Constraint::Length(3),
            Constraint::Length(seq_width),
            Constraint::Min(8),
            Constraint::Length(4),
            Constraint::Length(shape_width),
        ],
    )
    .header(TableRow::new(vec!["", "seq", "stage#occ", "dtype", "shape"]).style(theme.dim()))
    .block(Block::bordered().title(title).border_style(border));
    frame.render_widget(table, area);
}
