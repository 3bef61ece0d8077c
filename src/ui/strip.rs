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
    let a = bars(&app.strip_a, rows, width, lo, hi);
    let has_b = app.loaded.as_ref().is_some_and(|l| l.diff().is_some());
    let column = (app.selected * width / rows).min(width - 1);
    let mut marker = " ".repeat(width);
    marker.replace_range(
        marker
            .char_indices()
            .nth(column)
            .map_or(0..0, |(i, c)| i..i + c.len_utf8()),
        "▲",
    );
    let mut lines = vec![Line::from(vec![
        Span::styled("A ", theme.side_a()),
        Span::styled(a, theme.side_a()),
    ])];
    if has_b {
        let b = bars(&app.strip_b, rows, width, lo, hi);
        lines.push(Line::from(vec![
            Span::styled("B ", theme.side_b()),
            Span::styled(b, theme.side_b()),
        ]));
    }
    lines.push(Line::from(vec![
        Span::raw("  "),
        Span::styled(marker, Style::new()),
    ]));
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
