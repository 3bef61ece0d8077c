//! The token × stage view (`T`, and `b` for the first bad token): for one matched request,
//! stages down and positions across, each cell a row's difference over its tolerance
//! (docs/diff.md, "Token rows"). The state is the request and a cursor; the grid itself is
//! the model's ([`crate::model::present::tokens::grid`]), computed for the width drawn.

use super::App;
use crate::model::analysis::tokens::{CellRows, TokenDiff};
use crate::model::present::tokens::{TokenGrid, grid};

/// Columns the view leaves to the stage names (and the borders).
pub const LABEL_WIDTH: usize = 34;

/// The open view: which request, and the cursor's grid row and column.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenView {
    /// Index into the alignment's requests.
    pub request: usize,
    /// The cursor's grid row (stage) and column (position bin).
    pub row: usize,
    pub column: usize,
    /// Enter: the cursor cell's two rows, read from the windows when asked.
    pub detail: Option<Result<(u64, CellRows), String>>,
}

impl App {
    /// The token alignment of the open diff, when both sides have token rows.
    pub fn token_diff(&self) -> Option<&TokenDiff> {
        self.loaded.as_ref()?.diff()?.tokens.as_ref()
    }

    /// The grid the view shows for request `request` at the terminal's width.
    pub fn token_grid(&self, request: usize) -> Option<TokenGrid> {
        let columns = usize::from(self.size.0).saturating_sub(LABEL_WIDTH).max(8);
        Some(grid(self.token_diff()?, request, columns))
    }
}

/// `T`: opens the view on the first request with a bad token (else the first), or closes it.
pub fn toggle(app: &mut App) {
    if app.token_view.take().is_some() {
        return;
    }
    open(app, false);
}

/// `b`: the first bad token, in the view (opened if need be).
pub fn first_bad_token(app: &mut App) {
    open(app, true);
}

fn open(app: &mut App, at_bad_token: bool) {
    let Some(tokens) = app.token_diff() else {
        app.message = Some(if app.diffing() {
            "no token rows: the captures hold no row map on both sides (docs/manifest.md, \"Token rows\")".to_string()
        } else {
            "the token view compares two captures: open A and B".to_string()
        });
        return;
    };
    if tokens.per_request.is_empty() {
        app.message =
            Some("token rows, but no request of A matches one of B by token ids".to_string());
        return;
    }
    let bad = tokens
        .per_request
        .iter()
        .position(|r| r.first_bad_token.is_some());
    let requests = tokens.per_request.len();
    if at_bad_token && bad.is_none() {
        app.message = Some(match &tokens.summed {
            // No rows on one side: its records against the other side's rows summed.
            Some(summed) => crate::model::present::tokens::summed_line(summed),
            None => "no bad token: every aligned row agrees".to_string(),
        });
    }
    // `b` goes to the first bad token; `T` opens on the request selected (`R`).
    let request = match bad {
        Some(bad) if at_bad_token => bad,
        _ if app.request < requests => app.request,
        _ => 0,
    };
    app.request = request;
    let mut view = TokenView {
        request,
        row: 0,
        column: 0,
        detail: None,
    };
    if let Some((row, column)) = app.token_grid(request).and_then(|g| g.first) {
        (view.row, view.column) = (row, column);
    }
    app.token_view = Some(view);
}

/// Tab: the next matched request, its cursor on its first bad token (else the top left).
pub fn next_request(app: &mut App) {
    let Some(count) = app.token_diff().map(|t| t.per_request.len()) else {
        return;
    };
    let Some(view) = &app.token_view else { return };
    let request = (view.request + 1) % count.max(1);
    app.request = request;
    show_request(app, request);
}

/// The view on request `request`, its cursor on its first bad token (else the top left).
fn show_request(app: &mut App, request: usize) {
    let (row, column) = app
        .token_grid(request)
        .and_then(|g| g.first)
        .unwrap_or((0, 0));
    app.token_view = Some(TokenView {
        request,
        row,
        column,
        detail: None,
    });
}

/// `R`: the next matched request; the timeline goes to the first window, from the one
/// shown on, whose forward holds it, and an open token view shows it.
pub fn select_next_request(app: &mut App) {
    let Some(tokens) = app.token_diff() else {
        app.message = Some(
            "no token rows: the captures hold no row map on both sides (docs/manifest.md, \"Token rows\")"
                .to_string(),
        );
        return;
    };
    let count = tokens.requests.len();
    if count == 0 {
        app.message =
            Some("token rows, but no request of A matches one of B by token ids".to_string());
        return;
    }
    let request = (app.request + 1) % count;
    let name = tokens.requests[request].a.clone();
    app.request = request;
    if count == 1 {
        app.message = Some(format!("one matched request: {name:?}"));
    }
    let holds = |app: &App, i: usize| {
        let loaded = app
            .loaded
            .as_ref()
            .expect("a token alignment is of a loaded diff");
        let window = &loaded.session.a.windows[loaded.windows[i].a];
        window.token_rows.as_ref().is_some_and(|rows| {
            rows.map
                .iter()
                .any(|e| e.request.as_deref() == Some(name.as_str()))
        })
    };
    let windows = app.loaded.as_ref().map_or(0, |l| l.windows.len());
    if let Some(i) = (0..windows)
        .map(|k| (app.window + k) % windows)
        .find(|&i| holds(app, i))
    {
        if i != app.window {
            app.select_window(i);
        }
    }
    if app.token_view.is_some() {
        show_request(app, request);
    }
}

/// Moves the cursor by (`rows`, `columns`), clamped to the grid.
pub fn step(app: &mut App, rows: i64, columns: i64) {
    let Some(view) = &app.token_view else { return };
    let Some(grid) = app.token_grid(view.request) else {
        return;
    };
    let clamp = |at: usize, by: i64, len: usize| -> usize {
        (at as i64 + by).clamp(0, len.saturating_sub(1) as i64) as usize
    };
    let (row, column) = (
        clamp(view.row, rows, grid.stages.len()),
        clamp(view.column, columns, grid.columns.len()),
    );
    if let Some(view) = app.token_view.as_mut() {
        (view.row, view.column, view.detail) = (row, column, None);
    }
}

/// Enter: shows (or hides) the cursor cell's two rows, read again from the windows.
pub fn toggle_detail(app: &mut App) {
    let Some(view) = &app.token_view else { return };
    if view.detail.is_some() {
        if let Some(view) = app.token_view.as_mut() {
            view.detail = None;
        }
        return;
    }
    let Some(grid) = app.token_grid(view.request) else {
        return;
    };
    let (request, row, column) = (view.request, view.row, view.column);
    let detail = match (grid.stages.get(row), grid.columns.get(column)) {
        (Some(stage), Some(&(first, last))) => {
            // A binned column shows its worst row: read that one.
            let position = app
                .token_diff()
                .and_then(|t| t.per_request.get(request))
                .and_then(|r| {
                    let stage_id = app
                        .token_diff()?
                        .stage_keys
                        .iter()
                        .position(|k| k == stage)? as u32;
                    r.cells
                        .iter()
                        .filter(|c| c.0 == stage_id && (first..=last).contains(&u64::from(c.1)))
                        .max_by(|x, y| x.2.total_cmp(&y.2))
                        .map(|c| u64::from(c.1))
                })
                .unwrap_or(first);
            let loaded = app.loaded.as_ref();
            match loaded.and_then(|l| Some((l, l.session.b.as_ref()?))) {
                Some((l, b)) => {
                    // The windows as the diff compared them (merged groups, made row maps).
                    let compared = crate::model::analysis::diff::Compared::of(
                        &l.session.a.windows,
                        &b.windows,
                    );
                    crate::model::analysis::tokens::rows_at(
                        &compared.a,
                        &compared.b,
                        request,
                        stage,
                        position,
                    )
                }
                .ok_or_else(|| format!("no aligned rows at {stage} position {position}")),
                None => Err("no capture B".to_string()),
            }
            .map(|rows| (position, rows))
        }
        _ => Err("no cell under the cursor".to_string()),
    };
    if let Some(view) = app.token_view.as_mut() {
        view.detail = Some(detail);
    }
}
