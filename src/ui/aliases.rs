//! Storage alias groups of the current window(s), stride conflicts first; members selectable.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::{Theme, format};
use crate::app::{App, Focus};

pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let groups = app.alias_groups();
    let conflicts = groups.iter().filter(|(_, g)| g.stride_conflict).count();
    let title = Line::from(vec![
        Span::styled(" storage aliases ", theme.title()),
        Span::raw(format!("{} groups, ", groups.len())),
        Span::styled(
            format!("{conflicts} conflicts "),
            if conflicts > 0 {
                theme.bad()
            } else {
                Style::new()
            },
        ),
    ]);
    let border = if app.focus == Focus::Aliases {
        theme.focused_border()
    } else {
        Style::new()
    };
    let block = Block::bordered().title(title).border_style(border);
    if groups.is_empty() {
        frame.render_widget(
            Paragraph::new("no storage aliases")
                .style(theme.dim())
                .block(block),
            area,
        );
        return;
    }
    let width = area.width.saturating_sub(2) as usize;
    let mut lines = Vec::new();
    let mut member_index = 0;
    let mut selected_line = 0;
    for (side, group) in &groups {
        let head = format!(
            "{side} {} storage {}",
            if group.stride_conflict {
                "X CONFLICT"
            } else {
                "= alias"
            },
            group.storage_id.map_or("?".to_string(), |i| i.to_string())
        );
        lines.push(Line::from(Span::styled(
            head,
            if group.stride_conflict {
                theme.bad()
            } else {
                theme.dim()
            },
        )));
        for m in &group.members {
            let text = format::fit(
                &format!(
                    "  {} {} {}",
                    m.key,
                    format::shape(&m.shape),
                    format::stride(&m.stride)
                ),
                width,
            );
            let style = if app.focus == Focus::Aliases && member_index == app.alias_selected {
                selected_line = lines.len();
                theme.selected()
            } else {
                Style::new()
            };
            lines.push(Line::from(Span::styled(text, style)));
            member_index += 1;
        }
    }
    let inner = area.height.saturating_sub(2) as usize;
    let scroll = selected_line.saturating_sub(inner.saturating_sub(1)) as u16;
    frame.render_widget(Paragraph::new(lines).block(block).scroll((scroll, 0)), area);
}
