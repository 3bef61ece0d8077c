//! The help overlay: keys (from the one keymap, `app::keymap`) and the meaning of every glyph.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

use super::{Theme, centered};
use crate::app::keymap;

const GLYPHS: &[(&str, &str)] = &[
    ("!  n", "first non-finite record / holds NaN or inf"),
    ("◆", "first divergence"),
    (
        "≠ ⇄ # N",
        "statistics differ / values moved / shape or dtype kind / NaN-inf counts",
    ),
    (
        "·  A  B",
        "agrees / captured in A only / in B only (missing evidence)",
    ),
    (
        "?  ∅",
        "checksum inconclusive / not compared (no statistics)",
    ),
    (
        "X  =",
        "stride-conflicting storage alias / alias without conflict",
    ),
];

/// Draws the overlay centred in `area`.
pub fn draw(frame: &mut Frame, area: Rect, theme: Theme) {
    let mut lines = vec![Line::from(Span::styled("keys", theme.title()))];
    lines.extend(keymap::help_lines().map(|(k, v)| Line::from(format!("  {k:<10} {v}"))));
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        "timeline glyphs (non-finite, comparison, alias)",
        theme.title(),
    )));
    lines.extend(
        GLYPHS
            .iter()
            .map(|(k, v)| Line::from(format!("  {k:<10} {v}"))),
    );
    // Rows once wrapped (a line longer than the popup takes two), plus the border.
    let inner = usize::from(area.width.min(84).saturating_sub(2)).max(1);
    let rows: usize = lines.iter().map(|l| l.width().div_ceil(inner).max(1)).sum();
    let popup = centered(area, 84, (rows + 2) as u16);
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(" help (? or Esc closes) ")),
        popup,
    );
}
