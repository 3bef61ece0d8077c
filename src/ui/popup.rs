//! The shared popup widget: a centred, bordered overlay of lines that scrolls (the help and
//! the load warnings view), with the lines in view named on its bottom border when they do
//! not all fit.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use super::{Theme, centered};

/// Rows an overlay of `count` lines takes in `area`, borders included: all of them when they
/// fit, else the area less a line above and below (at least 3).
fn height(area: Rect, count: usize) -> u16 {
    (count + 2).min(usize::from(area.height.saturating_sub(2)).max(3)) as u16
}

/// How far an overlay of `count` lines can scroll in `area`: its lines beyond those in view.
pub(super) fn scroll_max(area: Rect, count: usize) -> usize {
    let rows = usize::from(height(area, count).saturating_sub(2));
    count.saturating_sub(rows)
}

/// Draws `lines` in a bordered overlay `width` columns wide centred in `area`, titled
/// `title`, from line `scroll` (clamped to what the lines allow) on.
pub(super) fn draw_scrolling(
    frame: &mut Frame,
    area: Rect,
    width: u16,
    title: Span<'_>,
    lines: Vec<Line<'_>>,
    scroll: usize,
    theme: Theme,
) {
    let count = lines.len();
    let popup = centered(area, width, height(area, count));
    let rows = usize::from(popup.height.saturating_sub(2));
    let first = scroll.min(count.saturating_sub(rows));
    let mut block = Block::bordered().title(title);
    if count > rows {
        let below = count - first - rows;
        block = block.title_bottom(Span::styled(
            format!(
                " lines {}-{} of {count}{} · ↑↓ PgUp PgDn scroll ",
                first + 1,
                first + rows,
                if below > 0 {
                    format!(", {below} below")
                } else {
                    String::new()
                }
            ),
            theme.dim(),
        ));
    }
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines.into_iter().skip(first).take(rows).collect::<Vec<_>>()).block(block),
        popup,
    );
}
