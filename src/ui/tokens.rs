//! The token × stage view (`T`, `b`): one request's stages down, its positions across, each
//! cell the decade of the row's difference over its tolerance; the first bad token marked.
//!
//! ```text
//! ┌ tokens · request "req-0" (1/1) · 1484 rows, 850 diverge · T or Esc closes ──────────┐
//! │first bad token: position 5, token id 611 at layers.0.q_rope#1 (row_checksum 301x)  │
//! │                              positions 0 .. 13 (1 per column)                      │
//! │             layers.0.q_rope#1 .....*323.....                                       │
//! │             layers.0.k_rope#1 .....3332.....                                       │
//! │layers.0.q_rope#1 · position 5 · 3.0e2 × tolerance · Enter: both rows               │
//! └ ←↑↓→ move · Tab or R next request · Enter rows · b first bad token ─────────────────────┘
//! ```

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use super::{Theme, format};
use crate::app::App;
use crate::app::tokens::LABEL_WIDTH;
use crate::model::present::tokens::{glyph, row_text};

/// Lines above the grid (the first bad token, the position axis) and below it (the cursor).
const HEAD: u16 = 2;
const FOOT: u16 = 3;

/// A cell's style: agreeing rows dim, diverging ones warmer with their decade; the first
/// bad token as the timeline marks the first divergence. NO_COLOR: the glyph says it all.
fn cell_style(ratio: Option<f32>, first: bool, theme: Theme) -> Style {
    if first {
        return theme.first_divergence();
    }
    if !theme.color {
        return Style::new();
    }
    match ratio {
        None => Style::new(),
        Some(r) if r < 1.0 => theme.dim(),
        Some(r) if r < 10.0 => Style::new().fg(Color::Yellow),
        Some(r) if r < 100.0 => Style::new().fg(Color::LightRed),
        Some(_) => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
    }
}

/// Draws the view over `area` (a margin of one cell all round).
pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let (Some(view), Some(tokens)) = (&app.token_view, app.token_diff()) else {
        return;
    };
    let Some(grid) = app.token_grid(view.request) else {
        return;
    };
    let outer = Rect::new(
        area.x + 1,
        area.y + 1,
        area.width.saturating_sub(2),
        area.height.saturating_sub(2),
    );
    let inner_width = usize::from(outer.width.saturating_sub(2));
    let label = LABEL_WIDTH.saturating_sub(4).max(8);
    let request = &tokens.per_request[view.request];
    let title = format!(
        " tokens · request {:?}{} ({}/{}) · {} rows, {} diverge · T or Esc closes ",
        request.request_a,
        if request.request_a == request.request_b {
            String::new()
        } else {
            format!(" = B {:?}", request.request_b)
        },
        view.request + 1,
        tokens.per_request.len(),
        request.rows_compared,
        request.rows_diverging
    );
    let block = Block::bordered()
        .title(Span::styled(
            format::fit(&title, inner_width),
            theme.title(),
        ))
        .title_bottom(Span::styled(
            " ←↑↓→ move · Tab or R next request · Enter both rows · b first bad token ",
            theme.dim(),
        ));
    let mut lines: Vec<Line> = Vec::new();
    lines.push(match &request.first_bad_token {
        Some(bad) => Line::from(Span::styled(
            format::fit(
                &format!(
                    "first bad token: position {}{} at {} ({}, {} {:.3}x its tolerance)",
                    bad.position,
                    bad.token_id
                        .map(|id| format!(", token id {id}"))
                        .unwrap_or_default(),
                    bad.key,
                    bad.kind,
                    bad.verdict.stat,
                    bad.verdict.ratio
                ),
                inner_width,
            ),
            theme.bad(),
        )),
        None => match tokens
            .summed
            .as_ref()
            .filter(|_| request.rows_compared == 0)
        {
            Some(summed) => Line::from(Span::styled(
                format::fit(
                    &crate::model::present::tokens::summed_line(summed),
                    inner_width,
                ),
                if summed.first.is_some() {
                    theme.bad()
                } else {
                    theme.good()
                },
            )),
            None => Line::from(Span::styled("every aligned row agrees", theme.good())),
        },
    });
    let span = |(lo, hi): (u64, u64)| {
        if lo == hi {
            lo.to_string()
        } else {
            format!("{lo}-{hi}")
        }
    };
    lines.push(Line::from(Span::styled(
        format::fit(
            &format!(
                "{:>label$} positions {} .. {}, {} per column · . : agree · 1-9: decades over tolerance · ! NaN/inf · * first bad",
                "",
                grid.columns.first().map(|c| span(*c)).unwrap_or_default(),
                grid.columns.last().map(|c| span(*c)).unwrap_or_default(),
                grid.columns.first().map_or(1, |c| c.1 - c.0 + 1)
            ),
            inner_width,
        ),
        theme.dim(),
    )));
    let visible = usize::from(outer.height.saturating_sub(2 + HEAD + FOOT)).max(1);
    // Few positions get wider cells (up to 3 columns), easier to read and to aim at.
    let cell = (inner_width.saturating_sub(label + 1) / grid.columns.len().max(1)).clamp(1, 3);
    let offset = view.row.saturating_sub(visible - 1);
    for (row, stage) in grid.stages.iter().enumerate().skip(offset).take(visible) {
        let mut spans = vec![Span::raw(format!(
            "{:>label$} ",
            format::fit_start(stage, label)
        ))];
        for (column, &ratio) in grid.cells[row].iter().enumerate() {
            let first = grid.first == Some((row, column));
            let text = if first { '*' } else { glyph(ratio) };
            let mut style = cell_style(ratio, first, theme);
            if (row, column) == (view.row, view.column) {
                style = style.add_modifier(Modifier::REVERSED);
            }
            spans.push(Span::styled(format!("{text:^cell$}"), style));
        }
        lines.push(Line::from(spans));
    }
    while lines.len() < usize::from(HEAD) + visible {
        lines.push(Line::raw(""));
    }
    // The cursor's cell, and with Enter its two rows.
    let cursor = grid
        .stages
        .get(view.row)
        .zip(grid.columns.get(view.column))
        .map(|(stage, &c)| {
            let ratio = grid.cells[view.row][view.column]
                .map(|r| format!("{r:.3e} × tolerance"))
                .unwrap_or_else(|| "not compared".to_string());
            format!("{stage} · position {} · {ratio}", span(c))
        })
        .unwrap_or_default();
    match &view.detail {
        None => {
            lines.push(Line::raw(format::fit(
                &format!("{cursor} · Enter: both rows"),
                inner_width,
            )));
        }
        Some(Ok((position, rows))) => {
            lines.push(Line::raw(format::fit(
                &format!("{cursor} · rows at position {position}:"),
                inner_width,
            )));
            for (side, row, dtype, style) in [
                ("A", &rows.a, &rows.dtypes.0, theme.side_a()),
                ("B", &rows.b, &rows.dtypes.1, theme.side_b()),
            ] {
                lines.push(Line::from(vec![
                    Span::styled(format!("{side} "), style),
                    Span::raw(format::fit(
                        &format!("{} ({dtype})", row_text(row)),
                        inner_width.saturating_sub(2),
                    )),
                ]));
            }
        }
        Some(Err(why)) => {
            lines.push(Line::from(Span::styled(
                format::fit(&format!("{cursor} · {why}"), inner_width),
                theme.warn(),
            )));
        }
    }
    frame.render_widget(Clear, outer);
    frame.render_widget(Paragraph::new(lines).block(block), outer);
}
