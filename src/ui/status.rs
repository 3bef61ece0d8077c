//! Status bar: the search prompt while typing, else the last message and key hints.
//!
//! By priority: the message first (wrapped onto up to [`MAX_LINES`] lines rather than cut),
//! then the pinned hints (`? help`, `q quit`), then the other hints in their places, as many
//! as fit; a `…` stands for those that gave way.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{Theme, format};
use crate::app::{App, keymap};

/// The most lines the status bar takes, for a long message.
pub const MAX_LINES: usize = 3;

const SEPARATOR: &str = " · ";
/// Between the message and the hints.
const BAR: &str = "  │ ";

/// The hints that fit in `width` columns: the pinned ones always (when they fit at all),
/// the others in their places until the next would not fit.
fn hints(app: &App, width: usize) -> String {
    let all = keymap::status_hints(app.diffing(), app.has_input_sets());
    let pinned: Vec<&str> = all.iter().filter(|h| h.pinned).map(|h| h.text).collect();
    let pinned_text = pinned_hints(app);
    let everything: Vec<&str> = all.iter().map(|h| h.text).collect();
    let everything = everything.join(SEPARATOR);
    if format::width(&everything) <= width {
        return everything;
    }
    if format::width(&pinned_text) > width {
        return String::new();
    }
    // Room for the others, with a `…` for those left out, before the pinned ones.
    let room = width.saturating_sub(format::width(&pinned_text) + 2 * format::width(SEPARATOR) + 1);
    let mut shown: Vec<&str> = Vec::new();
    let mut used = 0;
    for hint in all.iter().filter(|h| !h.pinned) {
        let add = format::width(hint.text)
            + if shown.is_empty() {
                0
            } else {
                format::width(SEPARATOR)
            };
        if used + add > room {
            break;
        }
        used += add;
        shown.push(hint.text);
    }
    shown.push("…");
    shown.extend(pinned);
    shown.join(SEPARATOR)
}

/// The pinned hints alone, as shown.
fn pinned_hints(app: &App) -> String {
    let all = keymap::status_hints(app.diffing(), app.has_input_sets());
    let pinned: Vec<&str> = all.iter().filter(|h| h.pinned).map(|h| h.text).collect();
    pinned.join(SEPARATOR)
}

/// The status bar's lines for a frame `width` columns wide.
fn lines(app: &App, width: usize, theme: Theme) -> Vec<Line<'static>> {
    if app.search.editing {
        let mut text = format!("/{}▏", app.search.input);
        if let Some(e) = &app.search.error {
            text.push_str("  ");
            text.push_str(e);
        }
        // The end of what is typed stays in view.
        let prompt = format::fit_start(&text, width);
        return vec![Line::from(prompt)];
    }
    if let Some(e) = &app.search.error {
        return vec![Line::from(Span::styled(
            format::fit(&format!("search: {e}"), width),
            theme.bad(),
        ))];
    }
    let Some(message) = &app.message else {
        return vec![Line::from(Span::styled(hints(app, width), theme.dim()))];
    };
    let bar = format::width(BAR);
    let pinned = format::width(&pinned_hints(app));
    if format::width(message) + bar + pinned <= width {
        let rest = hints(app, width - format::width(message) - bar);
        return vec![Line::from(vec![
            Span::styled(message.clone(), theme.warn()),
            Span::styled(format!("{BAR}{rest}"), theme.dim()),
        ])];
    }
    // A long message: wrapped, never cut (up to MAX_LINES, the last one ending in `…`); the
    // pinned hints follow on its last line when they fit.
    let mut wrapped = format::wrap(message, width, 2);
    if wrapped.len() > MAX_LINES {
        wrapped.truncate(MAX_LINES);
        let last = wrapped.last_mut().expect("MAX_LINES > 0");
        *last = format::fit(&format!("{last} …"), width);
    }
    let count = wrapped.len();
    wrapped
        .into_iter()
        .enumerate()
        .map(|(i, text)| {
            let mut spans = vec![Span::styled(text.clone(), theme.warn())];
            if i + 1 == count {
                let room = width.saturating_sub(format::width(&text) + bar);
                let rest = hints(app, room);
                if !rest.is_empty() {
                    spans.push(Span::styled(format!("{BAR}{rest}"), theme.dim()));
                }
            }
            Line::from(spans)
        })
        .collect()
}

/// Rows the status bar takes in a frame `width` columns wide (1 to [`MAX_LINES`]).
pub fn height(app: &App, width: u16) -> u16 {
    lines(app, usize::from(width), Theme { color: false }).len() as u16
}

/// Draws the status line(s) into `area`.
pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    frame.render_widget(
        Paragraph::new(lines(app, usize::from(area.width), theme)),
        area,
    );
}
