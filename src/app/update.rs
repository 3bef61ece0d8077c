//! [`update`]: one action applied to the [`App`], the effects for the runtime returned.
//! The popup that owns the keys ([`App::popup`], in the order of [`Popup::ALL`]) takes them
//! first; what reaches the workbench behind them is split
//! by concern: closing and toggling, sizes reported by the runtime, moves of the selection,
//! jumps to findings, windows, and the keys that open a popup.

use super::jobs::{JobEvent, JobOutput, JobProgress, JobUpdate, Slot};
use super::{Action, App, Effect, Focus, Popup};
use super::{cases, export, replay, tensors};

/// Applies one action; returns the effects for the runtime.
pub fn update(app: &mut App, action: Action) -> Vec<Effect> {
    let effects = dispatch(app, action);
    // The open module tree shows where a jump, a search, another window or a reload put
    // the selection.
    super::tree::follow(app);
    effects
}

/// [`update`] before the tree follows the selection.
fn dispatch(app: &mut App, action: Action) -> Vec<Effect> {
    // Watch updates arrive whatever the user is doing (a prompt, a popup): installed in place.
    match action {
        Action::Watched(session) => {
            app.watched(*session);
            return Vec::new();
        }
        Action::WatchSource {
            index,
            state,
            reason,
        } => {
            app.watch_source(index, state, reason);
            return Vec::new();
        }
        Action::WatchFetching { index, progress } => {
            app.watch_fetching(index, progress);
            return Vec::new();
        }
        Action::ReplayHistory(event) => {
            replay::on_history(app, event);
            return Vec::new();
        }
        _ => {}
    }
    route(app, action, app.popup())
}

/// Actions every popup passes on to the workbench behind it: the runtime's reports and job
/// events (and, from most, quitting and the help).
fn from_runtime(action: &Action) -> bool {
    matches!(
        action,
        Action::Job(_) | Action::Resize(..) | Action::ViewHeight(_) | Action::OverlayScrollMax(_)
    )
}

/// Hands `action` to `popup` (the one that owns the keys, [`App::popup`]), or to the
/// workbench when none is open.
fn route(app: &mut App, action: Action, popup: Option<Popup>) -> Vec<Effect> {
    let page = app.view_height.max(1);
    // A message answers the key that set it; the next key replaces it (or the standing note
    // of load warnings comes back), so nothing stays on screen after it stops being true.
    // The prompts, the help and the warnings view leave it standing beside them.
    let keeps_message = matches!(
        popup,
        Some(
            Popup::ReplayDialog
                | Popup::Export
                | Popup::CasesForm
                | Popup::SearchPrompt
                | Popup::Help
                | Popup::Warnings
        )
    );
    if !keeps_message && !from_runtime(&action) {
        app.message = app.standing_message();
    }
    match popup {
        Some(Popup::ReplayDialog) => replay_dialog(app, action, page),
        Some(Popup::Export) => export_prompt(app, action, page),
        Some(Popup::CasesForm) => cases_form(app, action, page),
        Some(Popup::SearchPrompt) => search_prompt(app, action),
        Some(Popup::Help) => overlay(app, action, page, Popup::Help),
        Some(Popup::Warnings) => overlay(app, action, page, Popup::Warnings),
        Some(Popup::Tokens) => token_view(app, action, page),
        Some(Popup::TensorResult) => tensor_result(app, action, page),
        Some(Popup::ReplayResult) => replay_result(app, action, page),
        Some(Popup::ReplayLog) => replay_log(app, action, page),
        Some(Popup::CasesBoard) => cases_board(app, action, page),
        Some(Popup::TensorProgress) | None => update_base(app, action, page),
    }
}

/// The replay dialog owns the keys while it is open: characters are its fields' text.
fn replay_dialog(app: &mut App, action: Action, page: usize) -> Vec<Effect> {
    if from_runtime(&action) || matches!(action, Action::Quit) {
        return update_base(app, action, page);
    }
    replay::on_dialog(app, action).unwrap_or_default()
}

/// The export prompt owns the keys while it is open: characters are the path.
fn export_prompt(app: &mut App, action: Action, page: usize) -> Vec<Effect> {
    let Some(prompt) = app.export.as_mut() else {
        return Vec::new();
    };
    match action {
        Action::ExportChar(c) => {
            prompt.input.push(c);
            prompt.error = None;
        }
        Action::ExportBackspace => {
            prompt.input.pop();
            prompt.error = None;
        }
        Action::ExportClear => {
            prompt.input.clear();
            prompt.error = None;
        }
        Action::ExportSubmit => return export::submit(app),
        Action::ExportCancel | Action::Escape => {
            app.export = None;
            app.message = Some("export cancelled: nothing written".to_string());
        }
        Action::Quit => app.should_quit = true,
        action if from_runtime(&action) => return update_base(app, action, page),
        _ => {}
    }
    Vec::new()
}

/// The case-matrix form owns the keys while it is open, as the replay dialog does.
fn cases_form(app: &mut App, action: Action, page: usize) -> Vec<Effect> {
    if from_runtime(&action) || matches!(action, Action::Quit) {
        return update_base(app, action, page);
    }
    cases::on_form(app, &action).unwrap_or_default()
}

/// The search prompt takes its characters, Backspace, Enter and Esc; any other action goes
/// on to the popup below it, or the workbench.
fn search_prompt(app: &mut App, action: Action) -> Vec<Effect> {
    match action {
        Action::SearchChar(c) => app.search.input.push(c),
        Action::SearchBackspace => {
            app.search.input.pop();
        }
        Action::SearchSubmit => {
            app.search.editing = false;
            let pattern = if app.search.input.is_empty() {
                app.search.last.clone().unwrap_or_default()
            } else {
                app.search.input.clone()
            };
            if !pattern.is_empty() {
                app.search(&pattern);
            }
        }
        Action::SearchCancel | Action::Escape => app.search.editing = false,
        other => return route(app, other, app.popup_below(Popup::SearchPrompt)),
    }
    Vec::new()
}

/// The help overlay and the warnings view own the keys while they are open (nothing moves
/// unseen behind them): Esc or their own key (`?`, `w`) closes them, the arrows scroll.
fn overlay(app: &mut App, action: Action, page: usize, popup: Popup) -> Vec<Effect> {
    let own_key = match popup {
        Popup::Help => matches!(action, Action::ToggleHelp),
        _ => matches!(action, Action::ToggleWarnings),
    };
    let step = page as i64;
    match action {
        _ if own_key || matches!(action, Action::Escape) => match popup {
            Popup::Help => app.help = false,
            _ => app.warnings_open = false,
        },
        Action::Quit => app.should_quit = true,
        Action::Up => scroll_overlay(app, -1),
        Action::Down => scroll_overlay(app, 1),
        Action::PageUp => scroll_overlay(app, -step),
        Action::PageDown => scroll_overlay(app, step),
        Action::Top => scroll_overlay(app, i64::MIN / 2),
        Action::Bottom => scroll_overlay(app, i64::MAX / 2),
        action if from_runtime(&action) => return update_base(app, action, page),
        _ => {}
    }
    Vec::new()
}

/// The token × stage view is modal: the arrows move its cursor, Tab the request, Enter the
/// cell's rows, `b` the first bad token; `T` or Esc closes it.
fn token_view(app: &mut App, action: Action, page: usize) -> Vec<Effect> {
    let step = page as i64;
    match action {
        Action::Up => super::tokens::step(app, -1, 0),
        Action::Down => super::tokens::step(app, 1, 0),
        Action::Left => super::tokens::step(app, 0, -1),
        Action::Right => super::tokens::step(app, 0, 1),
        Action::PageUp => super::tokens::step(app, -step, 0),
        Action::PageDown => super::tokens::step(app, step, 0),
        Action::Top => super::tokens::step(app, i64::MIN / 2, i64::MIN / 2),
        Action::Bottom => super::tokens::step(app, i64::MAX / 2, 0),
        Action::FocusNext => super::tokens::next_request(app),
        Action::NextRequest => super::tokens::select_next_request(app),
        Action::Enter => super::tokens::toggle_detail(app),
        Action::FirstBadToken => super::tokens::first_bad_token(app),
        Action::ToggleTokens | Action::Escape => app.token_view = None,
        action if passes_on(&action) => return update_base(app, action, page),
        _ => {}
    }
    Vec::new()
}

/// Actions every modal result popup passes on: the runtime's, quitting and the help.
fn passes_on(action: &Action) -> bool {
    from_runtime(action) || matches!(action, Action::Quit | Action::ToggleHelp)
}

/// The tensor result is modal: it takes the keys it uses and drops the others, so nothing
/// moves unseen underneath it.
fn tensor_result(app: &mut App, action: Action, page: usize) -> Vec<Effect> {
    match action {
        Action::Up => tensors::step_pair(app, -1),
        Action::Down => tensors::step_pair(app, 1),
        Action::PageUp | Action::Top => tensors::step_pair(app, i64::MIN / 2),
        Action::PageDown | Action::Bottom => tensors::step_pair(app, i64::MAX / 2),
        Action::Escape | Action::Enter | Action::CompareTensors => app.tensor_popup = None,
        action if passes_on(&action) => return update_base(app, action, page),
        _ => {}
    }
    Vec::new()
}

/// The replay result is modal as the tensor result is.
fn replay_result(app: &mut App, action: Action, page: usize) -> Vec<Effect> {
    let step = page as i64;
    match action {
        Action::Up => replay::step_output(app, -1),
        Action::Down => replay::step_output(app, 1),
        Action::PageUp => replay::scroll_result(app, -step),
        Action::PageDown => replay::scroll_result(app, step),
        Action::Top => replay::scroll_result(app, i64::MIN / 2),
        Action::Bottom => replay::scroll_result(app, i64::MAX / 2),
        Action::Escape | Action::Enter | Action::Replay => app.replay_view = None,
        Action::CaseMatrix => return cases::open(app),
        action if passes_on(&action) => return update_base(app, action, page),
        _ => {}
    }
    Vec::new()
}

/// The running replay's log is modal too: Esc cancels it, the arrows scroll the log.
fn replay_log(app: &mut App, action: Action, page: usize) -> Vec<Effect> {
    let step = page as i64;
    match action {
        Action::Escape => return replay::cancel(app),
        Action::Up => replay::scroll_log(app, -1),
        Action::Down => replay::scroll_log(app, 1),
        Action::PageUp => replay::scroll_log(app, -step),
        Action::PageDown => replay::scroll_log(app, step),
        Action::Top => replay::scroll_log(app, i64::MIN / 2),
        Action::Bottom => replay::scroll_log(app, i64::MAX / 2),
        action if passes_on(&action) => return update_base(app, action, page),
        _ => {}
    }
    Vec::new()
}

/// The case-matrix board is modal; a case's metrics popup over it more so.
fn cases_board(app: &mut App, action: Action, page: usize) -> Vec<Effect> {
    let step = page as i64;
    let viewing = app
        .cases_board
        .as_ref()
        .is_some_and(|b| b.case_view.is_some());
    match action {
        Action::Escape | Action::Enter if viewing => {
            if let Some(board) = app.cases_board.as_mut() {
                board.case_view = None;
            }
        }
        Action::Up if viewing => cases::step_output(app, -1),
        Action::Down if viewing => cases::step_output(app, 1),
        Action::PageUp if viewing => cases::scroll_case(app, -step),
        Action::PageDown if viewing => cases::scroll_case(app, step),
        Action::Top if viewing => cases::scroll_case(app, i64::MIN / 2),
        Action::Bottom if viewing => cases::scroll_case(app, i64::MAX / 2),
        Action::Up => cases::step(app, -1, 0),
        Action::Down => cases::step(app, 1, 0),
        Action::Left => cases::step(app, 0, -1),
        Action::Right => cases::step(app, 0, 1),
        Action::Top | Action::PageUp => cases::step(app, i64::MIN / 4, 0),
        Action::Bottom | Action::PageDown => cases::step(app, i64::MAX / 4, 0),
        Action::Enter => cases::open_case(app),
        Action::Escape | Action::CaseMatrix => {
            if let Some(board) = app.cases_board.as_mut() {
                board.open = false;
                if board.run.is_some() {
                    app.message = Some(format!(
                        "case matrix {} runs on: c shows it again",
                        board.name()
                    ));
                }
            }
        }
        Action::CasesRun if !viewing => return cases::run(app, false),
        Action::CasesRerun if !viewing => return cases::run(app, true),
        Action::CasesStop => return cases::cancel(app),
        action if passes_on(&action) => return update_base(app, action, page),
        _ => {}
    }
    Vec::new()
}

/// What reaches the workbench behind the popups (and what a popup passes through to it:
/// quitting, the help, sizes and job events), by concern.
fn update_base(app: &mut App, action: Action, page: usize) -> Vec<Effect> {
    match action {
        Action::Quit | Action::Escape | Action::ToggleHelp | Action::ToggleWarnings => {
            return close_or_toggle(app, action);
        }
        Action::OverlayScrollMax(_) | Action::Resize(..) | Action::ViewHeight(_) => {
            on_size(app, action)
        }
        Action::Job(JobUpdate { slot, event, .. }) => return on_job(app, slot, event),
        // Handled first, in `update`.
        Action::Watched(_)
        | Action::WatchSource { .. }
        | Action::WatchFetching { .. }
        | Action::ReplayHistory(_) => {}
        _ if app.loaded.is_none() => {}
        action if super::tree::takes(app, &action) => super::tree::on_key(app, action, page),
        Action::ToggleTree => super::tree::toggle(app),
        Action::WalkDiagnosis => app.walk_diagnosis(),
        Action::Up
        | Action::Down
        | Action::PageUp
        | Action::PageDown
        | Action::Top
        | Action::Bottom
        | Action::Scroll(_)
        | Action::ClickRow(_)
        | Action::ClickOverview { .. } => move_selection(app, action, page),
        Action::NextFinding
        | Action::PrevFinding
        | Action::ToggleFilter
        | Action::FirstNonFinite
        | Action::FirstDivergence
        | Action::StartSearch => find(app, action),
        Action::NextRank | Action::NextWindow | Action::FocusNext | Action::Enter => {
            navigate(app, action)
        }
        Action::Export => export::open(app),
        Action::DetailScroll(by) => {
            // The draw clamps to the last full page; here only below zero is cut.
            app.detail_scroll = app.detail_scroll.saturating_add_signed(by as isize);
        }
        Action::ToggleTokens => super::tokens::toggle(app),
        Action::NextRequest => super::tokens::select_next_request(app),
        Action::FirstBadToken => super::tokens::first_bad_token(app),
        Action::CompareTensors => return tensors::start(app),
        Action::Replay => return replay::open(app),
        Action::CaseMatrix => return cases::open(app),
        Action::CasesStop => return cases::cancel(app),
        // Keys of a popup or prompt that is not open.
        Action::Left
        | Action::Right
        | Action::CasesRun
        | Action::CasesRerun
        | Action::CasesChar(_)
        | Action::CasesBackspace
        | Action::CasesClear
        | Action::CasesNextField
        | Action::CasesPrevField
        | Action::CasesSubmit
        | Action::CasesCancel
        | Action::SearchChar(_)
        | Action::SearchBackspace
        | Action::SearchSubmit
        | Action::SearchCancel
        | Action::ExportChar(_)
        | Action::ExportBackspace
        | Action::ExportClear
        | Action::ExportSubmit
        | Action::ExportCancel
        | Action::ReplayChar(_)
        | Action::ReplayBackspace
        | Action::ReplayClear
        | Action::ReplayNextField
        | Action::ReplayEarlier
        | Action::ReplayLater
        | Action::ReplaySubmit
        | Action::ReplayCancel => {}
    }
    Vec::new()
}

/// `q`, Esc, `?` and `w`: quitting, closing what is open, the help and the warnings view.
fn close_or_toggle(app: &mut App, action: Action) -> Vec<Effect> {
    match action {
        Action::Quit => app.should_quit = true,
        Action::Escape => {
            // Every popup that takes keys closes on Esc itself (`route`); what is left open
            // here is the running comparison's gauge at most.
            if app.tensor_job.is_some() {
                return tensors::cancel(app);
            } else if app.wide_detail {
                app.wide_detail = false;
            } else if app.focus == Focus::Aliases {
                app.focus = Focus::Timeline;
            } else {
                // Nothing open: Esc clears what the status bar says (the standing note of
                // load warnings stays), and never quits: `q` does.
                app.search.error = None;
            }
        }
        Action::ToggleHelp => {
            app.help = !app.help;
            app.overlay_scroll = 0;
        }
        Action::ToggleWarnings if app.loaded.is_some() => {
            if app.warnings().is_empty() {
                app.message = Some("no load warnings: every input was read whole".to_string());
            } else {
                app.warnings_open = true;
                app.overlay_scroll = 0;
                app.tensor_popup = None;
            }
        }
        _ => {}
    }
    Vec::new()
}

/// What the runtime reports of the last frame: the terminal's size, the timeline's height,
/// the open overlay's scroll range.
fn on_size(app: &mut App, action: Action) {
    match action {
        Action::OverlayScrollMax(max) => {
            app.overlay_scroll_max = max;
            app.overlay_scroll = app.overlay_scroll.min(max);
        }
        Action::Resize(w, h) => app.size = (w, h),
        Action::ViewHeight(h) => {
            app.view_height = h.max(1);
            let selected = app.selected;
            app.select(selected);
        }
        _ => {}
    }
}

/// The arrows, pages, wheel and clicks: the timeline's selection, or the alias panel's
/// with the focus there.
fn move_selection(app: &mut App, action: Action, page: usize) {
    let alias_members = |app: &App| -> usize {
        app.alias_groups()
            .iter()
            .map(|(_, g)| g.members.len())
            .sum()
    };
    match action {
        Action::Up if app.focus == Focus::Aliases => {
            app.alias_selected = app.alias_selected.saturating_sub(1)
        }
        Action::Down if app.focus == Focus::Aliases => {
            let members = alias_members(app);
            app.alias_selected = (app.alias_selected + 1).min(members.saturating_sub(1));
        }
        Action::PageUp | Action::PageDown | Action::Top | Action::Bottom
            if app.focus == Focus::Aliases =>
        {
            let last = alias_members(app).saturating_sub(1);
            app.alias_selected = match action {
                Action::PageUp => app.alias_selected.saturating_sub(page),
                Action::PageDown => (app.alias_selected + page).min(last),
                Action::Top => 0,
                _ => last,
            };
        }
        Action::Up => app.select(app.selected.saturating_sub(1)),
        Action::Down => app.select(app.selected + 1),
        Action::PageUp => app.select(app.selected.saturating_sub(page)),
        Action::PageDown => app.select(app.selected + page),
        Action::Top => app.select(0),
        Action::Bottom => app.select(usize::MAX),
        Action::Scroll(delta) => {
            let max_offset = app.view_len().saturating_sub(app.view_height);
            app.offset = (app.offset as i64 + delta).clamp(0, max_offset as i64) as usize;
            let (lo, hi) = (app.offset, app.offset + app.view_height.saturating_sub(1));
            app.selected = app
                .selected
                .clamp(lo, hi.min(app.view_len().saturating_sub(1)));
        }
        Action::ClickRow(visible) => {
            let target = app.offset + visible;
            if target < app.view_len() {
                app.focus = Focus::Timeline;
                app.select(target);
            }
        }
        Action::ClickOverview { rank, fraction } => click_overview(app, rank, fraction),
        _ => {}
    }
}

/// A click on the rank × stage overview: that rank's first window, the row nearest
/// `fraction` of its timeline.
fn click_overview(app: &mut App, rank: usize, fraction: f64) {
    let ranks: Vec<u32> = {
        let mut r: Vec<u32> = app
            .loaded
            .as_ref()
            .map(|l| l.windows.iter().map(|w| w.rank).collect())
            .unwrap_or_default();
        r.dedup();
        r
    };
    if let Some(&target) = ranks.get(rank) {
        let window = app
            .loaded
            .as_ref()
            .and_then(|l| l.windows.iter().position(|w| w.rank == target));
        if let Some(w) = window {
            if w != app.window {
                app.select_window(w);
            }
            let index = (fraction.clamp(0.0, 1.0) * app.rows.len().saturating_sub(1) as f64).round()
                as usize;
            app.select_near(index);
        }
    }
}

/// `n`, `N`, `f`, `d`, `a` and `/`: the findings and the search.
fn find(app: &mut App, action: Action) {
    match action {
        Action::NextFinding | Action::PrevFinding if app.row().is_none() => {
            app.message = Some("no row in view".to_string());
        }
        Action::NextFinding => {
            let current = app.row_index(app.selected);
            let found = (current + 1..app.rows.len()).find(|&i| app.rows[i].is_finding());
            app.jump_to(found, "finding below");
        }
        Action::PrevFinding => {
            let current = app.row_index(app.selected);
            let found = (0..current).rev().find(|&i| app.rows[i].is_finding());
            app.jump_to(found, "finding above");
        }
        Action::ToggleFilter => app.toggle_filter(),
        Action::FirstNonFinite => first_nonfinite(app),
        Action::FirstDivergence => first_divergence(app),
        Action::StartSearch => {
            app.search.editing = true;
            app.search.input.clear();
            app.search.error = None;
        }
        _ => {}
    }
}

/// `f`: the first non-finite record, in this window or, where it has none, the first window
/// (another rank, another label) that holds one, saying so.
fn first_nonfinite(app: &mut App) {
    let mut found = app.rows.iter().position(|r| r.first_nonfinite);
    let mut elsewhere = None;
    if found.is_none()
        && let Some(w) = app.nonfinite_window()
    {
        app.select_window(w);
        found = app.rows.iter().position(|r| r.first_nonfinite);
        elsewhere = app.choice().map(|c| c.rank);
    }
    app.jump_to(found, "non-finite record");
    if let (Some(_), Some(rank)) = (found, elsewhere) {
        app.message = Some(format!(
            "the window you were on holds no NaN or inf: rank {rank}'s window does (this one)"
        ));
    }
}

/// `d`: the first divergence, in this window or the window that holds one.
fn first_divergence(app: &mut App) {
    let mut found = app.rows.iter().position(|r| r.first_divergence);
    if found.is_none() {
        // None in this window: go to the window that holds one.
        if let Some(w) = app.diverging_window() {
            app.select_window(w);
            found = app.rows.iter().position(|r| r.first_divergence);
        }
    }
    let unmerged = app.unmerged().first().cloned();
    let what = if app.loaded.as_ref().is_some_and(|l| l.diff().is_some()) {
        "divergence"
    } else {
        "divergence in scan mode (open two captures)"
    };
    app.jump_to(found, what);
    if let (None, Some(why)) = (found, unmerged) {
        // Not "no divergence": the stages not merged were never compared.
        app.message = Some(format!("first divergence unknown: {why}"));
    }
}

/// `r`, `l`, Tab and Enter: other ranks and windows, the focus, the wide detail.
fn navigate(app: &mut App, action: Action) {
    match action {
        Action::NextRank | Action::NextWindow
            if app.loaded.as_ref().is_some_and(|l| l.windows.is_empty()) => {}
        Action::NextRank => {
            let windows = &app.loaded.as_ref().expect("loaded").windows;
            let rank = windows[app.window].rank;
            let next = (1..=windows.len())
                .map(|k| (app.window + k) % windows.len())
                .find(|&i| windows[i].rank != rank);
            match next {
                Some(i) => app.select_window(i),
                None if app.merged_layouts() => {
                    app.message = Some(format!(
                        "only logical rank {rank}: a merged parallel group is one rank here; \
                         its per-rank pieces are in the detail of each merged record"
                    ))
                }
                None => app.message = Some(format!("only rank {rank} is loaded")),
            }
        }
        Action::NextWindow => {
            let windows = &app.loaded.as_ref().expect("loaded").windows;
            let rank = windows[app.window].rank;
            let next = (1..windows.len())
                .map(|k| (app.window + k) % windows.len())
                .find(|&i| windows[i].rank == rank);
            match next {
                Some(i) => app.select_window(i),
                None => app.message = Some(format!("rank {rank} has one label window")),
            }
        }
        Action::FocusNext => {
            app.focus = match app.focus {
                Focus::Timeline if !app.alias_groups().is_empty() => Focus::Aliases,
                _ => Focus::Timeline,
            }
        }
        Action::Enter => match app.focus {
            Focus::Timeline => app.wide_detail = !app.wide_detail,
            Focus::Aliases => {
                let key = app
                    .alias_groups()
                    .iter()
                    .flat_map(|(_, g)| g.members.iter())
                    .nth(app.alias_selected)
                    .map(|m| m.key.clone());
                if let Some(key) = key {
                    let found = app.rows.iter().position(|r| r.key == key);
                    app.jump_to(found, "such stage");
                    app.focus = Focus::Timeline;
                }
            }
        },
        _ => {}
    }
}

/// Moves the open overlay's first line by `delta`, within what the last frame allowed.
fn scroll_overlay(app: &mut App, delta: i64) {
    let max = app.overlay_scroll_max.min(i64::MAX as usize) as i64;
    app.overlay_scroll = (app.overlay_scroll as i64)
        .saturating_add(delta)
        .clamp(0, max) as usize;
}

/// An event of a background job, by slot.
fn on_job(app: &mut App, slot: Slot, event: JobEvent) -> Vec<Effect> {
    match (slot, event) {
        (Slot::Compare, event) => tensors::on_event(app, event),
        (Slot::Replay, event) => replay::on_event(app, event),
        (Slot::Cases, event) => return cases::on_event(app, event),
        (Slot::Export, JobEvent::Done(JobOutput::Exported(path))) => export::written(app, &path),
        (Slot::Export, JobEvent::Failed(e)) => export::failed(app, &e),
        (Slot::Reload, JobEvent::Progress(JobProgress::Load(p))) if app.loaded.is_none() => {
            app.loading = Some(p);
        }
        (Slot::Reload, JobEvent::Done(JobOutput::Loaded(session))) => {
            if app.loaded.is_some() {
                app.reload(*session);
            } else {
                app.install(*session);
            }
        }
        (Slot::Reload, JobEvent::Failed(e)) if app.loaded.is_none() => {
            app.loading = None;
            app.load_error = Some(e);
        }
        (Slot::Reload, JobEvent::Failed(e)) => app.message = Some(format!("reload failed: {e}")),
        _ => {}
    }
    Vec::new()
}
