//! Drawing only: every function here reads an [`App`] and writes a frame, nothing else.
//!
//! ```text
//! ┌ header: inputs, mode, rank/window, identity, watch ──────────────────┐
//! │ diagnosis banner: the conclusion, one line (D walks its chain)        │
//! ├ timeline (virtualized) ──────────────┬ detail: A vs B, layout ───────┤
//! │ glyphs seq stage#occ dtype shape      │                              │
//! │                                       ├ storage aliases ─────────────┤
//! ├ strip: log10(max_abs) of A and B along the timeline ─────────────────┤
//! ├ rank × stage overview (several ranks only) ──────────────────────────┤
//! └ status: keys, messages, search prompt ───────────────────────────────┘
//! ```
//! Popups (tensor comparison progress and result, the replay dialog, log and result, load
//! warnings, help, load progress, errors) are drawn last, over the rest.

mod aliases;
mod cases;
mod detail;
mod diagnosis;
mod export;
mod format;
mod header;
mod help;
mod overview;
mod popup;
mod replay;
mod status;
mod strip;
mod tensors;
mod theme;
mod timeline;
mod tokens;
mod tree;
mod warnings;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::widgets::{Block, Clear, Gauge, Paragraph, Wrap};

use crate::app::{App, Focus, Popup};
pub use overview::LABEL_WIDTH as OVERVIEW_LABEL_WIDTH;
pub use theme::Theme;

/// What a mouse position points at, found from the same layout that draws the frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// A timeline body row: index into the visible rows (0 = top).
    TimelineRow(usize),
    /// Elsewhere on the timeline panel (its border or header row).
    Timeline,
    /// The rank × stage overview: rank index (from the top) and stage fraction 0..1.
    Overview {
        /// Index into the overview's ranks.
        rank: usize,
        /// Where along the stages, 0 at the first column.
        fraction: f64,
    },
}

/// What is at (`column`, `row`) of a frame of size `area` drawn for `app`, if anything the
/// mouse acts on.
pub fn hit_test(area: Rect, app: &App, column: u16, row: u16) -> Option<Target> {
    let inside =
        |r: Rect| column >= r.x && column < r.x + r.width && row >= r.y && row < r.y + r.height;
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 || app.loaded.is_none() {
        return None;
    }
    let areas = layout(area, app);
    if inside(areas.timeline) {
        // Border and table header take the first two lines.
        let body = row.checked_sub(areas.timeline.y + 2).map(usize::from);
        return Some(match body {
            Some(r) if r < areas.timeline_rows() => Target::TimelineRow(r),
            _ => Target::Timeline,
        });
    }
    if inside(areas.overview) {
        let rank = row.checked_sub(areas.overview.y + 1)? as usize;
        let x0 = areas.overview.x + 1 + OVERVIEW_LABEL_WIDTH;
        let width = areas
            .overview
            .width
            .saturating_sub(2 + OVERVIEW_LABEL_WIDTH)
            .max(1);
        let fraction = f64::from(column.checked_sub(x0)?) / f64::from(width);
        return Some(Target::Overview { rank, fraction });
    }
    None
}

/// Smallest terminal the workbench draws in; below it, a message says so.
pub const MIN_SIZE: (u16, u16) = (60, 16);

/// Where each region is, for drawing and for mouse hit-testing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Areas {
    pub header: Rect,
    /// The diagnosis banner, one line under the header.
    pub banner: Rect,
    pub timeline: Rect,
    pub detail: Rect,
    pub aliases: Rect,
    pub strip: Rect,
    pub overview: Rect,
    pub status: Rect,
}

impl Areas {
    /// Rows of the timeline's table body (inside its border, below its header row).
    pub fn timeline_rows(&self) -> usize {
        self.timeline.height.saturating_sub(3) as usize
    }
}

/// The timeline's width below which the detail stops growing to its natural width.
const TIMELINE_MIN: u16 = 40;

/// The layout of `area` for `app`, by priority: the status bar takes the lines its message
/// needs; the detail takes its natural width where the timeline keeps `TIMELINE_MIN`
/// columns; in the right column the detail gets every line it has when it can, the alias
/// panel what is left (at least a line, more with stride conflicts or the focus).
pub fn layout(area: Rect, app: &App) -> Areas {
    let ranks = app.loaded.as_ref().map_or(0, |l| l.overview.ranks.len());
    let overview_height = if ranks > 1 {
        (ranks as u16 + 2).min(area.height / 4)
    } else {
        0
    };
    // The strip plot: one line per side; the selection is marked on its bottom border.
    let strip_height = if app.diffing() { 4 } else { 3 };
    let [header, banner, body, strip, overview, status] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(1),
        Constraint::Min(6),
        Constraint::Length(strip_height),
        Constraint::Length(overview_height),
        Constraint::Length(status::height(app, area.width)),
    ])
    .areas(area);
    let detail_width = if app.wide_detail {
        body.width * 2 / 3
    } else {
        (body.width * 45 / 100)
            .max(detail::natural_width(app).min(body.width.saturating_sub(TIMELINE_MIN)))
    };
    let [timeline, side] =
        Layout::horizontal([Constraint::Min(20), Constraint::Length(detail_width)]).areas(body);
    let (core, full) = detail::needed(app, side.width);
    let (alias_want, conflicts) = aliases::needed(&app.alias_groups());
    let alias_min = if app.focus == Focus::Aliases {
        alias_want.min((side.height / 2).max(3))
    } else if !app.wide_detail && conflicts {
        alias_want.min(6)
    } else {
        3
    };
    let mut alias_height = side
        .height
        .saturating_sub(full)
        .min(alias_want)
        .max(alias_min);
    if app.focus != Focus::Aliases && side.height.saturating_sub(alias_height) < core {
        // The detail keeps its core (the statistics and each side's dtype and shape).
        alias_height = alias_height.min(side.height.saturating_sub(core).max(3));
    }
    let [detail, aliases] =
        Layout::vertical([Constraint::Min(6), Constraint::Length(alias_height)]).areas(side);
    Areas {
        header,
        banner,
        timeline,
        detail,
        aliases,
        strip,
        overview,
        status,
    }
}

/// How far the open overlay (help, warnings) can scroll in a frame of size `area`: its
/// lines beyond those in view (0 when none is open).
pub fn overlay_scroll_max(area: Rect, app: &App) -> usize {
    match app.popup() {
        Some(Popup::Help) => help::scroll_max(area, app),
        Some(Popup::Warnings) => warnings::scroll_max(area, app),
        Some(Popup::CasesBoard) => cases::scroll_max(area, app),
        Some(Popup::ReplayResult) => replay::scroll_max(area, app),
        _ => 0,
    }
}

/// One frame laid out: the frame's area and where each region is in it, computed once per
/// frame ([`screen`]). The runtime reports its sizes to the app (the timeline's rows) and
/// draws from the same value ([`draw_screen`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Screen {
    /// The whole frame.
    pub area: Rect,
    /// Its regions ([`layout`]); drawn only when the frame is at least [`MIN_SIZE`] and a
    /// capture is loaded.
    pub areas: Areas,
}

/// Lays out a frame of size `area` for `app`.
pub fn screen(area: Rect, app: &App) -> Screen {
    Screen {
        area,
        areas: layout(area, app),
    }
}

/// Draws one frame, laid out here.
pub fn draw(frame: &mut Frame, app: &App) {
    let screen = screen(frame.area(), app);
    draw_screen(frame, app, &screen);
}

/// Draws one frame from `screen`, the layout computed for it (laid out again only if the
/// frame's size is no longer the one it was computed for).
pub fn draw_screen(frame: &mut Frame, app: &App, screen: &Screen) {
    let area = frame.area();
    let screen = if screen.area == area {
        *screen
    } else {
        self::screen(area, app)
    };
    let theme = Theme {
        color: !app.no_color,
    };
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        let text = format!(
            "dumpview needs a terminal of at least {}x{}; this one is {}x{}. Enlarge it, or press q to quit.",
            MIN_SIZE.0, MIN_SIZE.1, area.width, area.height
        );
        frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
        return;
    }
    if app.loaded.is_none() {
        draw_loading(frame, app, area);
        return;
    }
    let areas = screen.areas;
    header::draw(frame, app, areas.header, theme);
    diagnosis::draw(frame, app, areas.banner, theme);
    if app.tree.is_some() {
        tree::draw(frame, app, areas.timeline, theme);
    } else {
        timeline::draw(frame, app, areas.timeline, theme);
    }
    detail::draw(frame, app, areas.detail, theme);
    aliases::draw(frame, app, areas.aliases, theme);
    strip::draw(frame, app, areas.strip, theme);
    if areas.overview.height > 0 {
        overview::draw(frame, app, areas.overview, theme);
    }
    status::draw(frame, app, areas.status, theme);
    // The open popups bottom first, so the one that owns the keys (`App::popup`) is on top.
    for popup in app.popups().rev() {
        draw_popup(frame, app, popup, area, theme);
    }
}

/// Draws `popup` over the frame `area`.
fn draw_popup(frame: &mut Frame, app: &App, popup: Popup, area: Rect, theme: Theme) {
    match popup {
        Popup::ReplayDialog => {
            if let Some(dialog) = &app.replay_dialog {
                replay::draw_dialog(frame, dialog, area, theme);
            }
        }
        Popup::Export => export::draw(frame, app, area, theme),
        Popup::CasesForm => {
            if let Some(form) = &app.cases_form {
                cases::draw_form(frame, form, area, theme);
            }
        }
        // Drawn in the status bar.
        Popup::SearchPrompt => {}
        Popup::Help => help::draw(frame, app, area, theme),
        Popup::Warnings => warnings::draw(frame, app, area, theme),
        Popup::Tokens => tokens::draw(frame, app, area, theme),
        Popup::TensorResult => {
            if let Some(result) = app.tensor_popup {
                tensors::draw_result(frame, app, result, area, theme);
            }
        }
        Popup::ReplayResult => {
            let view = app.replay_view;
            if let Some((view, kept)) =
                view.and_then(|v| Some((v, app.replay_results.get(v.result)?)))
            {
                replay::draw_result(frame, kept, view, area, theme);
            }
        }
        Popup::ReplayLog => {
            if let Some(job) = &app.replay_job {
                replay::draw_running(frame, job, area, theme);
            }
        }
        Popup::CasesBoard => {
            if let Some(board) = &app.cases_board {
                cases::draw_board(frame, board, area, theme);
                if let Some(view) = board.case_view {
                    cases::draw_case(frame, board, view, area, theme);
                }
            }
        }
        Popup::TensorProgress => {
            if let Some(job) = &app.tensor_job {
                tensors::draw_progress(frame, job, area, theme);
            }
        }
    }
}

fn draw_loading(frame: &mut Frame, app: &App, area: Rect) {
    let popup = centered(area, 64, 5);
    frame.render_widget(Clear, popup);
    if let Some(error) = &app.load_error {
        let block = Block::bordered().title(" cannot open ");
        frame.render_widget(
            Paragraph::new(format!("{error}\n\nq quits"))
                .wrap(Wrap { trim: true })
                .block(block),
            popup,
        );
        return;
    }
    if let Some(status) = &app.watch {
        // A watch before its first reading: what each source is doing, not an empty gauge.
        let lines: Vec<String> = status.waiting_lines();
        let popup = centered(area, 76, lines.len() as u16 + 4);
        frame.render_widget(Clear, popup);
        frame.render_widget(
            Paragraph::new(lines.join("\n"))
                .wrap(Wrap { trim: true })
                .block(Block::bordered().title(" watch: waiting for the first reading (q quits) ")),
            popup,
        );
        return;
    }
    let p = app.loading.unwrap_or_default();
    let (ratio, label) = crate::app::loading::label(&p);
    let gauge = Gauge::default()
        .block(Block::bordered().title(" loading (q quits) "))
        .ratio(ratio.clamp(0.0, 1.0))
        .label(label);
    frame.render_widget(gauge, popup);
}

/// A `width` × `height` rectangle centred in `area` (clamped to it).
pub(crate) fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}
