//! Status bar: the search prompt while typing, else the last message and key hints.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::Theme;
use crate::app::{App, keymap};

/// Draws the status line into `area`.
pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let line = if app.search.editing {
        let mut spans = vec![
            Span::raw("/"),
            Span::raw(app.search.input.clone()),
            Span::raw("▏"),
        ];
        if let Some(e) = &app.search.error {
            spans.push(Span::styled(format!("  {e}"), theme.bad()));
        }
        Line::from(spans)
    } else if let Some(e) = &app.search.error {
        Line::from(Span::styled(format!("search: {e}"), theme.bad()))
    } else {
        let hints = keymap::status_hints();
        match &app.message {
            Some(m) => Line::from(vec![
                Span::styled(m.clone(), theme.warn()),
                Span::styled(format!("  │ {hints}"), theme.dim()),
            ]),
            None => Line::from(Span::styled(hints, theme.dim())),
        }
    };
    frame.render_widget(Paragraph::new(line), area);
}
