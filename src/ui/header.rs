//! Header: what is open, which rank and label window, whether the inputs are the same.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::Theme;
use crate::app::App;
use crate::model::analysis::diff::Identity;
use crate::model::present::attempt_text;

pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let Some(loaded) = &app.loaded else { return };
    let mode = if loaded.diff().is_some() {
        "diff"
    } else {
        "scan"
    };
    let first = Line::from(vec![
        Span::styled("dumpview", theme.title()),
        Span::raw(format!(" · {mode} · {} · ", loaded.session.title)),
        Span::styled(loaded.session.format.clone(), theme.dim()),
    ]);
    let mut second = Vec::new();
    if let Some(choice) = app.choice() {
        let a = &loaded.session.a.windows[choice.a];
        second.push(Span::raw(format!(
            "rank {} · window {:?} (match {}, call {}{}) [{}/{}] · ",
            choice.rank,
            a.label,
            a.match_index,
            a.occurrence,
            attempt_text(a.attempt),
            app.window + 1,
            loaded.windows.len()
        )));
        second.push(Span::styled(
            format!("A {} rec", a.records.len()),
            theme.side_a(),
        ));
        if let (Some(bi), Some(b)) = (choice.b, &loaded.session.b) {
            let w = &b.windows[bi];
            second.push(Span::raw(" · "));
            second.push(Span::styled(
                format!(
                    "B {} rec (call {}{})",
                    w.records.len(),
                    w.occurrence,
                    attempt_text(w.attempt)
                ),
                theme.side_b(),
            ));
        }
        if let (Some(pair), Some(report)) = (choice.pair, loaded.diff()) {
            if report.windows[pair].missing_data.is_some() {
                second.push(Span::raw(" · "));
                second.push(Span::styled("MISSING DATA", theme.bad()));
            }
            let identity = &report.windows[pair].identity;
            let (text, style) = match identity {
                Identity::Same { tokens } => (format!("input: same {tokens} ids"), theme.good()),
                Identity::Different {
                    first_difference, ..
                } => (
                    format!("INPUTS DIFFER at id {first_difference}"),
                    theme.bad(),
                ),
                Identity::MissingOnOneSide { side } => (
                    format!("INPUT UNKNOWN: no ids in {}", side.to_ascii_uppercase()),
                    theme.bad(),
                ),
                Identity::MissingOnBoth => ("input: unchecked (no ids)".to_string(), theme.warn()),
                Identity::NotRecorded { .. } => {
                    ("input: not recorded by format".to_string(), theme.dim())
                }
            };
            second.push(Span::raw(" · "));
            second.push(Span::styled(text, style));
        }
    }
    // Nothing followed: nothing to say (an "off" switch the user never asked about only
    // took room).
    if let Some(status) = &app.watch {
        let (text, healthy) = status.describe();
        second.push(Span::raw(" · "));
        second.push(Span::styled(
            text,
            if healthy { theme.good() } else { theme.bad() },
        ));
    }
    frame.render_widget(Paragraph::new(vec![first, Line::from(second)]), area);
}
