//! Strip plot of log10(max_abs) along the timeline, one line per side, selection marked;
//! `!` where a record holds NaN or inf.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::Theme;
use crate::app::App;
use crate::app::strip::RangeMax;

const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

fn bars(index: &RangeMax, rows: usize, width: usize, lo: f64, hi: f64) -> String {
    (0..width)
        .map(|c| {
            let (start, end) = (
                c * rows / width,
                ((c + 1) * rows / width).max(c * rows / width + 1),
            );
            match index.max(start, end) {
                None => ' ',
                Some(v) if v.is_infinite() => '!',
                Some(v) => {
                    let t = if hi > lo { (v - lo) / (hi - lo) } else { 1.0 };
                    LEVELS[((t * 7.0).round() as usize).min(7)]
                }
            }
        })
        .collect()
}

pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let rows = app.rows.len();
    let width = area.width.saturating_sub(4) as usize;
    let range = app.strip_range;
    let title = match range {
        Some((lo, hi)) => format!(" log10(max_abs) along the timeline: {lo:.1} .. {hi:.1} "),
        None => " log10(max_abs) along the timeline ".to_string(),
    };
    let block = Block::bordered().title(Span::styled(title, theme.title()));
    let (Some((lo, hi)), true) = (range, rows > 0 && width > 0) else {
        frame.render_widget(block, area);
        return;
    };
    // One capture is not "A": in scan mode its line has no side label.
    let diffing = app.diffing();
    let label = |side: &'static str| if diffing { side } else { "  " };
    let mut lines = vec![Line::from(vec![
        Span::styled(label("A "), theme.side_a()),
        Span::styled(bars(&app.strip_a, rows, width, lo, hi), theme.side_a()),
    ])];
    if diffing {
        lines.push(Line::from(vec![
            Span::styled(label("B "), theme.side_b()),
            Span::styled(bars(&app.strip_b, rows, width, lo, hi), theme.side_b()),
        ]));
    }
    frame.render_widget(Paragraph::new(lines).block(block), area);
    // The selection, on the bottom border under its column (the plot spans every row, the
    // filter's hidden ones too).
    let selected = app.row().map_or(0, |_| app.row_index(app.selected));
    let column = (selected * width / rows).min(width - 1);
    let (x, y) = (area.x + 3 + column as u16, area.y + area.height - 1);
    if let Some(cell) = frame.buffer_mut().cell_mut((x, y)) {
        cell.set_symbol("▲").set_style(Style::new());
    }
}
