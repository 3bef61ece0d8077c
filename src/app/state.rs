//! The workbench's state: [`App`] and what it holds, with the queries and the selection moves
//! that `update` and the drawing share.

use regex::Regex;

use super::rows::{self, Row};
use super::session::Session;
use super::tensors::{TensorJob, TensorPopup, TensorResult};
use super::{ReplayDialog, ReplayJob, ReplayKept, ReplayView};
use super::{cases, export, strip, watch};
use crate::model::analysis::diff::DiffReport;
use crate::model::analysis::scan::WindowScan;
use crate::model::ingest::Progress;

/// Which panel keys act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    /// The stage timeline.
    Timeline,
    /// The storage alias panel.
    Aliases,
}

/// One selectable window: an index into A's windows, and the diff pair index when diffing.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowChoice {
    pub rank: u32,
    pub a: usize,
    pub b: Option<usize>,
    pub pair: Option<usize>,
}

/// The search prompt and the last search.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Search {
    pub editing: bool,
    pub input: String,
    pub error: Option<String>,
    pub last: Option<String>,
}

/// The loaded data and what is derived from it once (never per frame).
#[derive(Debug, Clone)]
pub struct Loaded {
    pub session: Session,
    pub windows: Vec<WindowChoice>,
    /// The rank × stage overview, compressed once.
    pub overview: strip::Overview,
    /// Some window of A or B captured an input set (`p` has something to replay): the
    /// timeline shows its ↻ column, the keys offer `p`.
    pub input_sets: bool,
    /// What merging parallel groups lost (`DiffReport::merge_warnings`), shown with the load
    /// warnings (`w`), each with its side.
    pub merge_warnings: Vec<(char, crate::model::dump::Warning)>,
}

impl Loaded {
    /// The scans of A's windows, in A's window order (the session's analysis).
    pub fn scans_a(&self) -> &[WindowScan] {
        &self.session.analysis.scans_a
    }

    /// The scans of B's windows (empty in scan mode).
    pub fn scans_b(&self) -> &[WindowScan] {
        &self.session.analysis.scans_b
    }

    /// A against B, in diff mode.
    pub fn diff(&self) -> Option<&DiffReport> {
        self.session.analysis.diff.as_ref()
    }

    /// Lists the selectable windows of `session` and compresses its overview. The analysis
    /// itself came with the session, computed off the UI thread by the loading job.
    pub(super) fn analyse(session: Session) -> Loaded {
        let diff = session.analysis.diff.as_ref();
        let windows = match (diff, &session.b) {
            (Some(report), Some(b)) => report
                .windows
                .iter()
                .enumerate()
                .map(|(pair, w)| WindowChoice {
                    rank: w.rank,
                    a: w.a.id.map_or(0, |id| id.0),
                    b: w.b.id.map(|id| id.0).filter(|&i| i < b.windows.len()),
                    pair: Some(pair),
                })
                .collect(),
            _ => session
                .a
                .windows
                .iter()
                .enumerate()
                .map(|(a, m)| WindowChoice {
                    rank: m.rank,
                    a,
                    b: None,
                    pair: None,
                })
                .collect(),
        };
        let overview = diff.map(strip::Overview::of).unwrap_or_default();
        let input_sets = session
            .a
            .windows
            .iter()
            .chain(session.b.iter().flat_map(|b| b.windows.iter()))
            .any(|w| !w.input_sets.is_empty());
        let merge_warnings = session
            .analysis
            .diff
            .as_ref()
            .map(|d| d.merge_warnings())
            .unwrap_or_default()
            .into_iter()
            .map(|w| {
                (
                    if w.message.starts_with("A:") {
                        'A'
                    } else {
                        'B'
                    },
                    w,
                )
            })
            .collect();
        Loaded {
            session,
            windows,
            overview,
            input_sets,
            merge_warnings,
        }
    }
}

/// The workbench state.
#[derive(Debug, Clone)]
pub struct App {
    pub loaded: Option<Loaded>,
    /// While loading: progress so far.
    pub loading: Option<Progress>,
    pub load_error: Option<String>,
    pub window: usize,
    pub rows: Vec<Row>,
    /// log10(max_abs) of the rows, A and B, indexed for the strip plot.
    pub strip_a: strip::RangeMax,
    pub strip_b: strip::RangeMax,
    /// The strip plot's scale: smallest and largest finite log10(max_abs) of both sides.
    pub strip_range: Option<(f64, f64)>,
    /// Rows that are findings (`n`/`N` stops), counted once per window.
    pub findings: usize,
    /// The selected row, as a position in the view ([`App::row_index`] gives its index
    /// into `rows`; without the filter the two are the same).
    pub selected: usize,
    /// First visible timeline row (a view position).
    pub offset: usize,
    /// `a`: the timeline shows only rows with a finding ([`Row::kept_by_filter`]).
    pub filter: bool,
    /// With the filter on, the indices into `rows` of the rows in view, in order; `None`:
    /// every row is in view.
    pub visible: Option<Vec<usize>>,
    /// Timeline rows visible in the last frame.
    pub view_height: usize,
    pub focus: Focus,
    pub alias_selected: usize,
    pub wide_detail: bool,
    /// The detail panel's first line when scrolled (`]` / `[`); 0 shows the lines that
    /// matter most for its height. A new selection starts at 0 again.
    pub detail_scroll: usize,
    pub search: Search,
    pub help: bool,
    /// The module tree shown in the timeline pane instead of the flat rows (`m`), when open.
    pub tree: Option<super::tree::TreeView>,
    /// The token × stage view (`T`, `b`), when open.
    pub token_view: Option<super::tokens::TokenView>,
    /// The matched request selected (`R`; index into the token alignment's requests): the
    /// header names it beside rank and window, and the token view opens on it.
    pub request: usize,
    /// The load warnings view is open (`w`).
    pub warnings_open: bool,
    /// The first line of the open overlay (help, warnings) in view; Up, Down, PgUp, PgDn,
    /// g and G move it while the overlay is open.
    pub overlay_scroll: usize,
    /// The largest [`App::overlay_scroll`] the last frame allowed (reported by the runtime,
    /// [`Action::OverlayScrollMax`]).
    pub overlay_scroll_max: usize,
    pub message: Option<String>,
    pub should_quit: bool,
    /// Glyph-only marks, no colours (NO_COLOR).
    pub no_color: bool,
    pub size: (u16, u16),
    /// The running tensor comparison (one at a time).
    pub tensor_job: Option<TensorJob>,
    /// Finished tensor comparisons, one per rank and stage, in the order they finished;
    /// the exported report includes them.
    pub tensor_results: Vec<TensorResult>,
    /// The open result popup.
    pub tensor_popup: Option<TensorPopup>,
    /// The open replay dialog (`p`).
    pub replay_dialog: Option<ReplayDialog>,
    /// A dialog closed with Esc: the next `p` on the same rank and stage opens on what was
    /// typed in it.
    pub replay_draft: Option<ReplayDialog>,
    /// The running replay (one at a time); its popup shows the log.
    pub replay_job: Option<ReplayJob>,
    /// The last replay cancelled before it finished, so that `p` on its stage reopens the
    /// dialog on what was asked (a finished one is in `replay_results`).
    pub replay_cancelled: Option<ReplayJob>,
    /// Finished replays, in the order they finished; the exported report includes the
    /// judged ones.
    pub replay_results: Vec<ReplayKept>,
    /// The open replay result popup.
    pub replay_view: Option<ReplayView>,
    /// The replay dialog's earlier entries, newest first; `None` until the runtime has read
    /// them.
    pub replay_history: Option<Vec<crate::model::replay::history::Entry>>,
    /// `c`: the case-matrix form, while it is open.
    pub cases_form: Option<cases::CasesForm>,
    /// The last case matrix planned or run (shown while [`cases::CasesBoard::open`]).
    pub cases_board: Option<cases::CasesBoard>,
    /// Watch mode's sources and their states; `None` when nothing is followed.
    pub watch: Option<watch::WatchStatus>,
    /// The directory the workbench was started in, as the runtime found it: where `e`
    /// proposes to write the report. `None`: unknown (headless runs), shown as `./`.
    pub working_dir: Option<std::path::PathBuf>,
    /// The place in [`crate::model::analysis::diagnosis::Diagnosis::chain`] of the record the
    /// last `D` selected; `None` before the first `D`, and again when a reload brings another
    /// diagnosis.
    pub walk: Option<usize>,
    /// The open export prompt (`e`).
    pub export: Option<export::ExportPrompt>,
    /// What the next export prompt opens on: the path last tried (kept after a failure), or
    /// the directory of the report last written.
    pub export_last: Option<String>,
}

impl App {
    /// An empty workbench waiting for a load.
    pub fn loading(no_color: bool) -> App {
        App {
            loaded: None,
            loading: Some(Progress::default()),
            load_error: None,
            window: 0,
            rows: Vec::new(),
            strip_a: strip::RangeMax::default(),
            strip_b: strip::RangeMax::default(),
            strip_range: None,
            findings: 0,
            selected: 0,
            offset: 0,
            filter: false,
            visible: None,
            view_height: 20,
            focus: Focus::Timeline,
            alias_selected: 0,
            wide_detail: false,
            detail_scroll: 0,
            search: Search::default(),
            help: false,
            warnings_open: false,
            tree: None,
            token_view: None,
            request: 0,
            overlay_scroll: 0,
            overlay_scroll_max: usize::MAX,
            message: None,
            should_quit: false,
            no_color,
            size: (80, 24),
            tensor_job: None,
            tensor_results: Vec::new(),
            tensor_popup: None,
            replay_dialog: None,
            replay_draft: None,
            replay_job: None,
            replay_cancelled: None,
            replay_results: Vec::new(),
            replay_view: None,
            replay_history: None,
            cases_form: None,
            cases_board: None,
            watch: None,
            working_dir: None,
            walk: None,
            export: None,
            export_last: None,
        }
    }

    /// A workbench over `session`, ready to draw.
    pub fn new(session: Session, no_color: bool) -> App {
        let mut app = App::loading(no_color);
        app.install(session);
        app
    }

    /// Installs a first capture and opens where the answer is.
    pub(super) fn install(&mut self, session: Session) {
        self.install_loaded(Loaded::analyse(session));
        // Open where the answer is: the window of the first diverging rank.
        let start = self.diverging_window().unwrap_or(0);
        self.select_window(start);
    }

    /// Makes `loaded` the open capture (the message names its load warnings); the caller
    /// chooses the window.
    pub(super) fn install_loaded(&mut self, loaded: Loaded) {
        // The walk goes on through a reload that keeps the diagnosis; another one starts over.
        if self.diagnosis() != Some(&loaded.session.diagnosis) {
            self.walk = None;
        }
        self.loaded = Some(loaded);
        self.message = self.standing_message();
        self.loading = None;
        self.load_error = None;
    }

    /// What the status line says when no key has just said something: the open capture's load
    /// warnings, if any.
    pub(super) fn standing_message(&self) -> Option<String> {
        let (all, lost) = self.warning_counts();
        (all > 0).then(|| {
            let lost = if lost > 0 {
                format!(" ({lost} lost evidence)")
            } else {
                String::new()
            };
            format!(
                "{all} load warning{}{lost}: w lists them",
                if all == 1 { "" } else { "s" }
            )
        })
    }

    /// The load warnings of the open captures, A's then B's, each with its side (`'A'`,
    /// `'B'`).
    pub fn warnings(&self) -> Vec<(char, &crate::model::dump::Warning)> {
        let Some(loaded) = &self.loaded else {
            return Vec::new();
        };
        let session = &loaded.session;
        session
            .a
            .warnings
            .iter()
            .map(|w| ('A', w))
            .chain(
                session
                    .b
                    .iter()
                    .flat_map(|b| b.warnings.iter().map(|w| ('B', w))),
            )
            .chain(loaded.merge_warnings.iter().map(|(side, w)| (*side, w)))
            .collect()
    }

    /// Why the selected window could not be merged whole across parallel layouts (empty when
    /// it was, or nothing was merged): its first divergence is unknown.
    pub fn unmerged(&self) -> &[String] {
        self.loaded
            .as_ref()
            .zip(self.choice())
            .and_then(|(l, c)| Some(&l.diff()?.windows.get(c.pair?)?.unmerged))
            .map_or(&[], |u| u.as_slice())
    }

    /// How many load warnings the open captures have, and how many of them lost evidence.
    pub fn warning_counts(&self) -> (usize, usize) {
        let warnings = self.warnings();
        let lost = warnings.iter().filter(|(_, w)| w.loses_evidence()).count();
        (warnings.len(), lost)
    }

    pub(super) fn select_window(&mut self, index: usize) {
        let Some(loaded) = &self.loaded else { return };
        if loaded.windows.is_empty() {
            self.rows.clear();
            self.tree = None;
            let left_to_rows = loaded
                .diff()
                .is_some_and(|d| !(d.aligned_only.0.is_empty() && d.aligned_only.1.is_empty()));
            let message = if left_to_rows {
                "no forward pairs whole: every one was compared by its token rows (T opens the token view, b the first bad token)"
            } else if !loaded.session.a.windows.is_empty() {
                "nothing to show: the two captures share no rank (see `dumpview diff` for the missing windows)"
            } else if self.watch.is_some() {
                "waiting for dumps: no window has landed yet"
            } else {
                "nothing to show: the capture holds no window"
            };
            self.message = Some(message.to_string());
            return;
        }
        self.window = index.min(loaded.windows.len() - 1);
        let choice = &loaded.windows[self.window];
        let a = &loaded.session.a.windows[choice.a];
        self.rows = match (choice.pair, choice.b, loaded.diff(), &loaded.session.b) {
            (Some(pair), Some(bi), Some(report), Some(b)) => rows::diff_rows(
                a,
                &b.windows[bi],
                &loaded.scans_a()[choice.a],
                &loaded.scans_b()[bi],
                &report.windows[pair],
                &rows::replicated_keys(&report.replicated, a, &b.windows[bi]),
            ),
            _ => rows::scan_rows(a, &loaded.scans_a()[choice.a]),
        };
        let analysis = &loaded.session.analysis;
        let mut single_run = rows::single_run_keys(&analysis.single_run_a, a);
        let mut moved = std::collections::HashSet::new();
        if let (Some(bi), Some(b)) = (choice.b, &loaded.session.b) {
            single_run.extend(rows::single_run_keys(
                &analysis.single_run_b,
                &b.windows[bi],
            ));
            if let Some(report) = loaded.diff() {
                moved.extend(
                    report
                        .layout_differences
                        .moved
                        .iter()
                        .filter(|m| m.rank == a.rank)
                        .map(|m| m.key.clone()),
                );
            }
        }
        rows::mark(&mut self.rows, &single_run, &moved);
        self.strip_a = strip::RangeMax::new(self.rows.iter().map(|r| r.log_a));
        self.strip_b = strip::RangeMax::new(self.rows.iter().map(|r| r.log_b));
        self.strip_range = match (self.strip_a.range(), self.strip_b.range()) {
            (Some((a0, a1)), Some((b0, b1))) => Some((a0.min(b0), a1.max(b1))),
            (x, y) => x.or(y),
        };
        self.findings = self.rows.iter().filter(|r| r.is_finding()).count();
        self.refilter();
        if self.view_len() == 0 && !self.rows.is_empty() {
            self.message = Some(format!(
                "no row of this window has a finding: the filter hides all {} (a shows all)",
                self.rows.len()
            ));
        }
        self.selected = 0;
        self.offset = 0;
        self.alias_selected = 0;
        // The open module tree is of these rows now (its folds kept by name).
        self.rebuild_tree();
        // Open where the evidence is: the first divergence, else the first non-finite record.
        if let Some(i) = self
            .rows
            .iter()
            .position(|r| r.first_divergence)
            .or_else(|| self.rows.iter().position(|r| r.first_nonfinite))
        {
            self.select_near(i);
        }
    }

    /// The window holding a first divergence: of the rank that diverges first, else any.
    pub(super) fn diverging_window(&self) -> Option<usize> {
        let loaded = self.loaded.as_ref()?;
        let report = loaded.diff()?;
        let diverges = |w: &WindowChoice| {
            w.pair
                .is_some_and(|p| report.windows[p].first_divergence.is_some())
        };
        let candidates = || loaded.windows.iter().enumerate();
        candidates()
            .find(|(_, w)| diverges(w) && Some(w.rank) == report.first_rank)
            .or_else(|| candidates().find(|(_, w)| diverges(w)))
            .map(|(i, _)| i)
    }

    /// The first window (in the windows' order) whose A or B capture holds a non-finite
    /// record, when any does.
    pub(super) fn nonfinite_window(&self) -> Option<usize> {
        let loaded = self.loaded.as_ref()?;
        loaded.windows.iter().position(|w| {
            loaded.scans_a()[w.a].first_nonfinite.is_some()
                || w.b
                    .is_some_and(|b| loaded.scans_b()[b].first_nonfinite.is_some())
        })
    }

    /// Selects view position `position` (clamped) and scrolls it into view.
    pub fn select(&mut self, position: usize) {
        if self.view_len() == 0 {
            return;
        }
        let selected = position.min(self.view_len() - 1);
        if selected != self.selected {
            self.detail_scroll = 0;
        }
        self.selected = selected;
        let height = self.view_height.max(1);
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + height {
            self.offset = self.selected + 1 - height;
        }
    }

    /// True when some window of the open captures holds a captured input set (`p` can
    /// replay something).
    pub fn has_input_sets(&self) -> bool {
        self.loaded.as_ref().is_some_and(|l| l.input_sets)
    }

    /// True with two captures open (diff mode).
    pub fn diffing(&self) -> bool {
        self.loaded.as_ref().is_some_and(|l| l.diff().is_some())
    }

    /// Whether the diff merged parallel groups (A and B have different tp/cp/pp group
    /// sizes): each merged group is then one logical rank of the timeline.
    pub fn merged_layouts(&self) -> bool {
        self.loaded
            .as_ref()
            .and_then(|l| l.diff())
            .is_some_and(|d| d.layouts.is_some())
    }

    /// Where the current window is, counted as `r` and `l` move: `(rank, ranks)`, the rank's
    /// place among the loaded ranks (1-based) and their number, and `(window, windows)`,
    /// the window's place among its rank's label windows and their number.
    pub fn window_place(&self) -> Option<((usize, usize), (usize, usize))> {
        let windows = &self.loaded.as_ref()?.windows;
        let rank = windows.get(self.window)?.rank;
        let mut ranks: Vec<u32> = Vec::new();
        for w in windows {
            if !ranks.contains(&w.rank) {
                ranks.push(w.rank);
            }
        }
        let rank_place = ranks.iter().position(|&r| r == rank).map_or(0, |i| i + 1);
        let of_rank = windows.iter().filter(|w| w.rank == rank).count();
        let window_place = windows[..=self.window]
            .iter()
            .filter(|w| w.rank == rank)
            .count();
        Some(((rank_place, ranks.len()), (window_place, of_rank)))
    }

    /// The current window choice.
    pub fn choice(&self) -> Option<&WindowChoice> {
        self.loaded.as_ref()?.windows.get(self.window)
    }

    /// The selected row.
    pub fn row(&self) -> Option<&Row> {
        if self.selected >= self.view_len() {
            return None;
        }
        self.rows.get(self.row_index(self.selected))
    }

    /// Rows in view: all of them, or those the filter keeps.
    pub fn view_len(&self) -> usize {
        self.visible.as_ref().map_or(self.rows.len(), Vec::len)
    }

    /// The index into `rows` of view position `position` (`position < view_len()`).
    pub fn row_index(&self, position: usize) -> usize {
        self.visible.as_ref().map_or(position, |v| v[position])
    }

    /// Alias groups of the current window: (side, group), conflicts first.
    pub fn alias_groups(&self) -> Vec<(char, &crate::model::analysis::scan::AliasGroup)> {
        let (Some(loaded), Some(choice)) = (&self.loaded, self.choice()) else {
            return Vec::new();
        };
        let mut groups: Vec<(char, &crate::model::analysis::scan::AliasGroup)> = loaded.scans_a()
            [choice.a]
            .alias_groups
            .iter()
            .map(|g| ('A', g))
            .collect();
        if let Some(bi) = choice.b {
            groups.extend(loaded.scans_b()[bi].alias_groups.iter().map(|g| ('B', g)));
        }
        groups.sort_by_key(|(side, g)| (!g.stride_conflict, *side));
        groups
    }

    /// Selects row `found` (an index into `rows`), or says there is no `what`.
    pub(super) fn jump_to(&mut self, found: Option<usize>, what: &str) {
        match found {
            Some(i) => {
                self.message = None;
                self.select_row(i);
            }
            None => self.message = Some(format!("no {what}")),
        }
    }

    pub(super) fn search(&mut self, pattern: &str) {
        match Regex::new(pattern) {
            Err(e) => {
                self.search.error = Some(
                    e.to_string()
                        .lines()
                        .last()
                        .unwrap_or("invalid regex")
                        .to_string(),
                )
            }
            Ok(re) => {
                self.search.error = None;
                self.search.last = Some(pattern.to_string());
                // The next match in view after the selected row, wrapping around.
                let n = self.view_len();
                let found = (1..=n)
                    .map(|k| (self.selected + k) % n)
                    .map(|p| self.row_index(p))
                    .find(|&i| re.is_match(&self.rows[i].key));
                let hidden =
                    found.is_none() && self.filter && self.rows.iter().any(|r| re.is_match(&r.key));
                if hidden {
                    self.message = Some(format!(
                        "only rows the filter hides match /{pattern}/: a shows all"
                    ));
                } else {
                    self.jump_to(found, &format!("stage matches /{pattern}/"));
                }
            }
        }
    }
}
