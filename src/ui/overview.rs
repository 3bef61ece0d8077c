//! Rank × stage overview (several ranks): agrees · diverges ≠ · non-finite ! · missing ∅.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::Theme;
use crate::app::App;
use crate::model::analysis::diff::Cell;

/// Columns the rank labels take, for mouse hit-testing.
pub const LABEL_WIDTH: u16 = 7;

pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let Some(loaded) = &app.loaded else { return };
    let overview = &loaded.overview;
    let first = loaded.diff().and_then(|d| d.first_rank);
    let title = match first {
        Some(rank) => format!(" ranks × stages: rank {rank} diverges first "),
        None => " ranks × stages ".to_string(),
    };
    let width = area.width.saturating_sub(2 + LABEL_WIDTH) as usize;
    let current = app.choice().map(|c| c.rank);
    let lines: Vec<Line> = overview
        .ranks
        .iter()
        .enumerate()
        .map(|(ri, &rank)| {
            let mut spans = vec![Span::styled(
                format!(
                    "{}r{rank:<4} ",
                    if Some(rank) == current { '>' } else { ' ' }
                ),
                if Some(rank) == first {
                    theme.bad()
                } else {
                    theme.dim()
                },
            )];
            for c in 0..width {
                let from = c as f64 / width as f64;
                let to = (c + 1) as f64 / width as f64;
                let (glyph, style) = match overview.worst(ri, from, to) {
                    Some(Cell::Agrees) => ('·', theme.good()),
                    Some(Cell::Diverges) => ('≠', theme.warn()),
                    Some(Cell::Inconclusive) => ('?', theme.dim()),
                    Some(Cell::NonFinite) => ('!', theme.bad()),
                    Some(Cell::Missing) | None => ('∅', theme.missing()),
                };
                spans.push(Span::styled(glyph.to_string(), style));
            }
            Line::from(spans)
        })
        .collect();
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(Span::styled(title, theme.title()))),
        area,
    );
}
