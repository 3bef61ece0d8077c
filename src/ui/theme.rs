//! Styles. With NO_COLOR every mark is a glyph plus bold/reverse, never a colour.

use ratatui::style::{Color, Modifier, Style};

/// The styles one frame is drawn with.
#[derive(Debug, Clone, Copy)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    fn pick(self, colored: Style, plain: Style) -> Style {
        if self.color { colored } else { plain }
    }
    pub fn title(self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }
    pub fn dim(self) -> Style {
        self.pick(Style::new().fg(Color::DarkGray), Style::new())
    }
    pub fn selected(self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }
    /// The first non-finite record's row.
    pub fn first_nonfinite(self) -> Style {
        self.pick(
            Style::new()
                .fg(Color::White)
                .bg(Color::Red)
                .add_modifier(Modifier::BOLD),
            Style::new().add_modifier(Modifier::BOLD),
        )
    }
    /// The first divergence's row.
    pub fn first_divergence(self) -> Style {
        self.pick(
            Style::new()
                .fg(Color::Black)
                .bg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
            Style::new().add_modifier(Modifier::BOLD),
        )
    }
    pub fn bad(self) -> Style {
        self.pick(Style::new().fg(Color::Red), Style::new())
    }
    /// A case that crashed (the case-matrix board): apart from a numerical mismatch's red.
    pub fn crash(self) -> Style {
        self.pick(
            Style::new()
                .fg(Color::LightMagenta)
                .add_modifier(Modifier::BOLD),
            Style::new().add_modifier(Modifier::BOLD),
        )
    }
    pub fn warn(self) -> Style {
        self.pick(Style::new().fg(Color::Yellow), Style::new())
    }
    pub fn good(self) -> Style {
        self.pick(Style::new().fg(Color::Green), Style::new())
    }
    pub fn missing(self) -> Style {
        self.pick(Style::new().fg(Color::Blue), Style::new())
    }
    pub fn side_a(self) -> Style {
        self.pick(Style::new().fg(Color::Cyan), Style::new())
    }
    pub fn side_b(self) -> Style {
        self.pick(Style::new().fg(Color::Magenta), Style::new())
    }
    /// The timeline's mark of a captured input set (`↻`).
    pub fn input_set(self) -> Style {
        self.pick(Style::new().fg(Color::LightCyan), Style::new())
    }
    /// Bars of charts and gauges.
    pub fn bar(self) -> Style {
        self.pick(Style::new().fg(Color::Cyan), Style::new())
    }
    pub fn focused_border(self) -> Style {
        self.pick(
            Style::new().fg(Color::Cyan),
            Style::new().add_modifier(Modifier::BOLD),
        )
    }
}
