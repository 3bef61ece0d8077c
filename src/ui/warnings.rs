//! The load warnings view (`w`): every warning of the open captures with its kind (lost
//! evidence or a note), its side and its file, the message wrapped under it; scrolls like
//! the help.
//!
//! ```text
//! ┌ load warnings: 2 (1 lost evidence, 1 note) · w or Esc closes ─────────────────┐
//! │LOST EVIDENCE  A rank0/match1-occ1/manifest.json                               │
//! │  truncated or damaged: stops being a valid manifest at byte 3914 (EOF while   │
//! │  parsing a string); kept the 4 records before it                              │
//! │note           B rank0/match1-occ2/manifest.json                               │
//! │  an older attempt of this window was ignored                                  │
//! └───────────────────────────────────────────────────────────────────────────────┘
//! ```

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Theme, format, popup};
use crate::app::App;
use crate::model::dump::WarningKind;

/// Widest the view gets.
const MAX_WIDTH: u16 = 120;
/// Width of the kind column.
const KIND: usize = 14;

/// The view's width in `area` and its lines.
fn lines(app: &App, area: Rect, theme: Theme) -> (u16, Vec<Line<'static>>) {
    let width = area.width.saturating_sub(4).min(MAX_WIDTH);
    let inner = usize::from(width.saturating_sub(2)).max(KIND + 8);
    let diffing = app.diffing();
    let mut lines = Vec::new();
    for (side, warning) in app.warnings() {
        let (kind, style) = match warning.kind {
            WarningKind::LostEvidence => ("LOST EVIDENCE", theme.bad()),
            WarningKind::Note => ("note", theme.dim()),
        };
        let side = if diffing {
            format!("{side} ")
        } else {
            String::new()
        };
        let file = warning.file.display().to_string();
        let room = inner.saturating_sub(KIND + 1 + side.len());
        lines.push(Line::from(vec![
            Span::styled(format!("{kind:<KIND$} "), style),
            Span::raw(format!("{side}{}", format::fit_start(&file, room))),
        ]));
        for part in format::wrap(&warning.message, inner - 2, 0) {
            lines.push(Line::from(format!("  {part}")));
        }
    }
    (width, lines)
}

/// How far the view can scroll in `area`.
pub fn scroll_max(area: Rect, app: &App) -> usize {
    let (_, lines) = lines(app, area, Theme { color: false });
    popup::scroll_max(area, lines.len())
}

/// Draws the view centred in `area`, scrolled to `app.overlay_scroll`.
pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let (width, lines) = lines(app, area, theme);
    let (all, lost) = app.warning_counts();
    let notes = all - lost;
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    let title = format!(
        " load warnings: {all} ({lost} lost evidence, {}) · w or Esc closes ",
        plural(notes, "note")
    );
    let title = Span::styled(
        format::fit(&title, usize::from(width.saturating_sub(2))),
        theme.title(),
    );
    popup::draw_scrolling(frame, area, width, title, lines, app.overlay_scroll, theme);
}
