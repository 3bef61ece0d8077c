//! Storage alias groups of the current window(s), stride conflicts first; members selectable.
//! Only the lines in view are formatted, so a window with thousands of groups draws as fast
//! as one with a few.

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
        Span::raw(format!(
            "{} group{}, ",
            groups.len(),
            if groups.len() == 1 { "" } else { "s" }
        )),
        Span::styled(
            format!(
                "{conflicts} conflict{} ",
                if conflicts == 1 { "" } else { "s" }
            ),
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
    // Line index of the selected member: one header line per group, one line per member.
    let focused = app.focus == Focus::Aliases;
    let mut selected_line = 0;
    let mut line = 0;
    let mut member = 0;
    for (_, group) in &groups {
        line += 1;
        if focused
            && app.alias_selected >= member
            && app.alias_selected < member + group.members.len()
        {
            selected_line = line + (app.alias_selected - member);
        }
        line += group.members.len();
        member += group.members.len();
    }
    let inner = area.height.saturating_sub(2) as usize;
    let first = selected_line.saturating_sub(inner.saturating_sub(1));
    let width = area.width.saturating_sub(2) as usize;
    let mut lines = Vec::with_capacity(inner);
    let (mut line, mut member) = (0, 0);
    for (side, group) in &groups {
        if line >= first + inner {
            break;
        }
        if line + 1 + group.members.len() <= first {
            line += 1 + group.members.len();
            member += group.members.len();
            continue;
        }
        if line >= first {
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
        }
        line += 1;
        for m in &group.members {
            if line >= first && line < first + inner {
                let text = format::fit(
                    &format!(
                        "  {} {} {}",
                        m.key,
                        format::shape(&m.shape),
                        format::stride(&m.stride)
                    ),
                    width,
                );
                let style = if focused && member == app.alias_selected {
                    theme.selected()
                } else {
                    Style::new()
                };
                lines.push(Line::from(Span::styled(text, style)));
            }
            line += 1;
            member += 1;
        }
    }
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
