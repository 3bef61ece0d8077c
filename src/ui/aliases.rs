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
use crate::model::analysis::scan::AliasGroup;

/// Rows (borders included) the panel needs to show every one of `groups` (those of
/// [`App::alias_groups`]) and their members (at least 3: a line that says there are none),
/// and whether any of them has a stride conflict.
pub fn needed(groups: &[(char, &AliasGroup)]) -> (u16, bool) {
    let lines: usize = groups.iter().map(|(_, g)| 1 + g.members.len()).sum();
    let conflicts = groups.iter().any(|(_, g)| g.stride_conflict);
    (
        (lines.max(1) + 2).min(usize::from(u16::MAX)) as u16,
        conflicts,
    )
}

pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let groups = app.alias_groups();
    let conflicts = groups.iter().filter(|(_, g)| g.stride_conflict).count();
    let groups_text = format!(
        "{} group{}, ",
        groups.len(),
        if groups.len() == 1 { "" } else { "s" }
    );
    let conflicts_text = format!(
        "{conflicts} conflict{} ",
        if conflicts == 1 { "" } else { "s" }
    );
    // The counts stay longest: the name, then the word "groups" give way in a narrow panel.
    let room = usize::from(area.width.saturating_sub(2));
    let (name, groups_text) = [" storage aliases ", " aliases ", " "]
        .into_iter()
        .map(|name| (name, groups_text.clone()))
        .chain([(" ", format!("{}, ", groups.len()))])
        .find(|(name, groups)| {
            format::width(name) + format::width(groups) + format::width(&conflicts_text) <= room
        })
        .unwrap_or((" ", format!("{}, ", groups.len())));
    let title = Line::from(vec![
        Span::styled(name, theme.title()),
        Span::raw(groups_text),
        Span::styled(
            conflicts_text,
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
    // Without the focus, the member `D` walked to (a writer or reader the diagnosis cites)
    // is marked and scrolled to instead.
    let focused = app.focus == Focus::Aliases;
    let marked = if focused {
        Some(app.alias_selected)
    } else {
        app.walked_alias_member()
    };
    let mut selected_line = 0;
    let mut line = 0;
    let mut member = 0;
    for (_, group) in &groups {
        line += 1;
        if let Some(marked) = marked.filter(|&m| m >= member && m < member + group.members.len()) {
            selected_line = line + (marked - member);
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
                let style = if marked == Some(member) {
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
