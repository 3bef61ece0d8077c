//! The help overlay: keys and the meaning of every glyph.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

use super::{Theme, centered};

const KEYS: &[(&str, &str)] = &[
    ("↑ ↓  j k", "move; PgUp PgDn page; g G first, last row"),
    ("n  N", "next / previous finding"),
    ("f  d", "first non-finite record / first divergence"),
    (
        "/",
        "regex search on stage names; / then Enter on an empty prompt repeats it",
    ),
    ("r  l", "next rank / next label window on this rank"),
    ("Tab", "focus timeline or storage aliases"),
    ("Enter", "wide detail (timeline) / jump to member (aliases)"),
    (
        "t",
        "compare this stage's saved tensors, A vs B (Esc cancels, ↑↓ key)",
    ),
    (
        "e",
        "export the first-mismatch report (Markdown, with compared tensors)",
    ),
    ("mouse", "wheel scrolls, click selects (timeline, ranks)"),
    ("? Esc q", "this help / close, quit / quit"),
];

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
        "X  =",
        "stride-conflicting storage alias / alias without conflict",
    ),
];

pub fn draw(frame: &mut Frame, area: Rect, theme: Theme) {
    let mut lines = vec![Line::from(Span::styled("keys", theme.title()))];
    lines.extend(
        KEYS.iter()
            .map(|(k, v)| Line::from(format!("  {k:<10} {v}"))),
    );
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
