//! The diagnosis banner: one line under the header with the diagnosis's conclusion
//! ([`crate::app::Session::diagnosis`]), cut to the width, loud when something was found and
//! dim for "No diagnosis"; `D` walks the records it cites.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{Theme, format};
use crate::app::App;

/// What the banner starts with: its name and the key that walks it.
pub const PREFIX: &str = "Diagnosis (D): ";

/// The banner's line for `app` at `width` columns: [`PREFIX`] then the conclusion, cut with
/// `…` where it does not fit; empty without an open capture.
pub fn line(app: &App, width: usize, theme: Theme) -> Line<'static> {
    let Some(diagnosis) = app.diagnosis() else {
        return Line::default();
    };
    let style = if diagnosis.found {
        theme.bad()
    } else {
        theme.dim()
    };
    let prefix = format::fit(PREFIX, width);
    let room = width.saturating_sub(format::width(&prefix));
    Line::from(vec![
        Span::styled(prefix, theme.title().patch(style)),
        Span::styled(format::fit(&diagnosis.conclusion, room), style),
    ])
}

/// Draws the banner into `area` (one line).
pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    frame.render_widget(
        Paragraph::new(line(app, usize::from(area.width), theme)),
        area,
    );
}
