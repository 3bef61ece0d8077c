//! The export prompt (`e`): the path the report will be written to, editable, with what a
//! directory and a file name each mean.
//!
//! ```text
//! ┌ export the first-mismatch report ──────────────────────────────────────┐
//! │to /home/me/runs/▏                                                      │
//! │a directory gets a new dumpview-report-<name>-N.md; a file name is     │
//! │written as named, never over an existing file                           │
//! │Enter writes · Esc cancels · Ctrl-U clears                              │
//! └────────────────────────────────────────────────────────────────────────┘
//! ```

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use super::{Theme, centered, format};
use crate::app::App;

/// Widest the prompt gets.
const MAX_WIDTH: u16 = 100;

const MEANING: &str = "a directory gets a new dumpview-report-<name>-N.md; a file name is \
                       written as named, never over an existing file";

/// Draws the prompt, if open, centred in `area`.
pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let Some(prompt) = &app.export else { return };
    let width = area.width.saturating_sub(4).min(MAX_WIDTH);
    let inner = usize::from(width.saturating_sub(2)).max(10);
    // The end of the path, where the cursor is, stays in view.
    let path = format::fit_start(&format!("{}▏", prompt.input), inner - 3);
    let mut lines = vec![Line::from(vec![
        Span::styled("to ", theme.dim()),
        Span::raw(path),
    ])];
    if let Some(error) = &prompt.error {
        lines.extend(
            format::wrap(error, inner, 2)
                .into_iter()
                .map(|l| Line::from(Span::styled(l, theme.bad()))),
        );
    }
    lines.extend(
        format::wrap(MEANING, inner, 0)
            .into_iter()
            .map(|l| Line::from(Span::styled(l, theme.dim()))),
    );
    lines.push(Line::from(Span::styled(
        format::fit("Enter writes · Esc cancels · Ctrl-U clears", inner),
        theme.dim(),
    )));
    let popup = centered(area, width, lines.len() as u16 + 2);
    frame.render_widget(Clear, popup);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(Span::styled(
            " export the first-mismatch report ",
            theme.title(),
        ))),
        popup,
    );
}
