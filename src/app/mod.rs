//! The workbench's state and its one update function (The Elm Architecture).
//!
//! [`App`] holds everything the screen shows; [`update`] applies one
//! [`Action`] synchronously and returns the [`Effect`]s the runtime must
//! carry out (background jobs, [`jobs`]). Nothing here touches a terminal, a thread, a
//! file or a process, so tests drive it with actions and read the state back. [`keymap`]
//! says which key sends which action.

#[warn(missing_docs)]
pub mod cases;
#[warn(missing_docs)]
pub mod export;
#[warn(missing_docs)]
mod filter;
#[warn(missing_docs)]
pub mod jobs;
#[warn(missing_docs)]
pub mod keymap;
#[warn(missing_docs)]
mod reload;
#[warn(missing_docs)]
pub mod replay;
pub mod rows;
#[warn(missing_docs)]
pub mod session;
pub mod strip;
pub mod tensors;
pub mod watch;

use regex::Regex;

use crate::model::analysis::diff::DiffReport;
use crate::model::analysis::scan::WindowScan;
use crate::model::ingest::Progress;
use jobs::{JobEvent, JobOutput, JobProgress, JobSpec, JobUpdate, Slot};
pub use replay::{ReplayDialog, ReplayField, ReplayJob, ReplayKept, ReplayView};
pub use rows::{Row, RowState};
pub use session::Session;
pub use tensors::{TensorJob, TensorPopup, TensorResult};

/// Which panel keys act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    /// The stage timeline.
    Timeline,
    /// The storage alias panel.
    Aliases,
}

/// Everything a user (or the runtime) can ask of the workbench.
#[derive(Debug, Clone)]
pub enum Action {
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    /// `n` / `N`: next / previous finding (non-finite, divergence, stride conflict).
    NextFinding,
    PrevFinding,
    /// `f`: first non-finite; `d`: first divergence.
    FirstNonFinite,
    FirstDivergence,
    /// `a`: show only the rows with a finding ([`Row::kept_by_filter`]), or all again.
    ToggleFilter,
    /// `/` opens the search prompt; characters, backspace, Enter and Esc edit it.
    StartSearch,
    SearchChar(char),
    SearchBackspace,
    SearchSubmit,
    SearchCancel,
    /// `r`: next rank; `l`: next label window on this rank.
    NextRank,
    NextWindow,
    /// Tab.
    FocusNext,
    /// Enter: on the timeline, toggle the wide detail view; on the alias panel, jump to the member.
    Enter,
    /// `e`: opens the export prompt on the path the report would be written to; characters,
    /// Backspace, Ctrl-U (clear), Enter (write) and Esc (cancel) edit it.
    Export,
    ExportChar(char),
    ExportBackspace,
    ExportClear,
    ExportSubmit,
    ExportCancel,
    /// `t`: compare the selected stage's saved tensors of A and B in the background; on a
    /// stage already compared, show the kept result again.
    CompareTensors,
    /// `p`: open the replay dialog on the selected stage's captured input set
    /// ([`replay`]); in the dialog, characters, Backspace, Ctrl-U (clear), Tab (next field),
    /// Up/Down (earlier entries), Enter (run) and Esc (close) edit it.
    Replay,
    ReplayChar(char),
    ReplayBackspace,
    ReplayClear,
    ReplayNextField,
    ReplayEarlier,
    ReplayLater,
    ReplaySubmit,
    ReplayCancel,
    /// The runtime read the replay history file, or could not write it.
    ReplayHistory(replay::HistoryEvent),
    /// `c`: on a replay's result, open the case-matrix form on its input set ([`cases`]);
    /// elsewhere, show the last matrix's board again. In the form, characters, Backspace,
    /// Ctrl-U (clear), Tab / Up / Down (next and previous line), Enter (plan and run) and
    /// Esc (close) edit it.
    CaseMatrix,
    CasesChar(char),
    CasesBackspace,
    CasesClear,
    CasesNextField,
    CasesPrevField,
    CasesSubmit,
    CasesCancel,
    /// On the board: `r` runs the cases without a result, `R` the selected case again, `x`
    /// cancels the run.
    CasesRun,
    CasesRerun,
    CasesStop,
    /// Arrow left / right (the case-matrix board's columns).
    Left,
    Right,
    /// `?`.
    ToggleHelp,
    /// `w`: the load warnings of the open captures (what was lost or noted while reading
    /// them); `w` or Esc closes the view.
    ToggleWarnings,
    /// `q` (and Ctrl-C anywhere).
    Quit,
    /// Esc: closes what is open (help, the search prompt, the tensor popup), cancels a
    /// running tensor comparison, narrows the wide detail, gives the focus back to the
    /// timeline, or clears the status message; it never quits.
    Escape,
    /// Mouse wheel over the timeline.
    Scroll(i64),
    /// A click on a timeline row (index into the visible rows, 0 = top).
    ClickRow(usize),
    /// A click on the rank × stage overview: rank index, stage fraction 0..1.
    ClickOverview {
        rank: usize,
        fraction: f64,
    },
    /// The terminal's size changed (columns, rows).
    Resize(u16, u16),
    /// The timeline's visible height, as last drawn (rows).
    ViewHeight(usize),
    /// How far the open overlay (help, warnings) can scroll, as last drawn: its lines
    /// beyond those in view.
    OverlayScrollMax(usize),
    /// An event of a background job (progress, its result, its failure, its cancel). The
    /// runtime has already dropped events of jobs that are no longer their slot's current.
    Job(JobUpdate),
    /// Watch mode: a new version of the followed captures, built on the watch thread.
    Watched(Box<Session>),
    /// Watch mode: followed source `index` is now in `state`, for `reason`.
    WatchSource {
        index: usize,
        state: crate::model::watch::SourceState,
        reason: String,
    },
    /// Watch mode: how far followed source `index`'s background fetch of saved tensors has
    /// got.
    WatchFetching {
        index: usize,
        progress: crate::model::watch::FetchProgress,
    },
}

/// Work for the runtime; results come back as [`Action::Job`].
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Start a job in its slot ([`JobSpec::slot`]), cancelling the one running there.
    Spawn(JobSpec),
    /// Cancel the job running in this slot: it ends with [`JobEvent::Cancelled`], or with
    /// its result when it finished before the cancel reached it.
    Cancel(Slot),
    /// Read the replay dialog's earlier entries (the runtime answers with
    /// [`Action::ReplayHistory`]).
    LoadReplayHistory,
    /// Add this entry to the replay history file, newest first.
    RememberReplay(crate::model::replay::history::Entry),
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
    fn analyse(session: Session) -> Loaded {
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
    pub search: Search,
    pub help: bool,
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
            loading: Some(Progress {
                files_done: 0,
                files_total: 0,
                bytes_done: 0,
                bytes_total: 0,
                records: 0,
            }),
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
            search: Search::default(),
            help: false,
            warnings_open: false,
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
            replay_job: None,
            replay_cancelled: None,
            replay_results: Vec::new(),
            replay_view: None,
            replay_history: None,
            cases_form: None,
            cases_board: None,
            watch: None,
            working_dir: None,
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
    fn install(&mut self, session: Session) {
        self.install_loaded(Loaded::analyse(session));
        // Open where the answer is: the window of the first diverging rank.
        let start = self.diverging_window().unwrap_or(0);
        self.select_window(start);
    }

    /// Makes `loaded` the open capture (the message names its load warnings); the caller
    /// chooses the window.
    fn install_loaded(&mut self, loaded: Loaded) {
        self.loaded = Some(loaded);
        self.message = self.standing_message();
        self.loading = None;
        self.load_error = None;
    }

    /// What the status line says when no key has just said something: the open capture's load
    /// warnings, if any.
    fn standing_message(&self) -> Option<String> {
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

    fn select_window(&mut self, index: usize) {
        let Some(loaded) = &self.loaded else { return };
        if loaded.windows.is_empty() {
            self.rows.clear();
            let message = if !loaded.session.a.windows.is_empty() {
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
    fn diverging_window(&self) -> Option<usize> {
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

    /// Selects view position `position` (clamped) and scrolls it into view.
    pub fn select(&mut self, position: usize) {
        if self.view_len() == 0 {
            return;
        }
        self.selected = position.min(self.view_len() - 1);
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
    fn jump_to(&mut self, found: Option<usize>, what: &str) {
        match found {
            Some(i) => {
                self.message = None;
                self.select_row(i);
            }
            None => self.message = Some(format!("no {what}")),
        }
    }

    fn search(&mut self, pattern: &str) {
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

/// Applies one action; returns the effects for the runtime.
pub fn update(app: &mut App, action: Action) -> Vec<Effect> {
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
    if app.replay_dialog.is_some() {
        // The replay dialog owns the keys while it is open: characters are its fields' text.
        if matches!(
            action,
            Action::Job(_)
                | Action::Resize(..)
                | Action::ViewHeight(_)
                | Action::OverlayScrollMax(_)
                | Action::Quit
        ) {
            return update_base(app, action, app.view_height);
        }
        return replay::on_dialog(app, action).unwrap_or_default();
    }
    if let Some(prompt) = app.export.as_mut() {
        // The export prompt owns the keys while it is open: characters are the path.
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
            Action::Job(_)
            | Action::Resize(..)
            | Action::ViewHeight(_)
            | Action::OverlayScrollMax(_) => return update_base(app, action, app.view_height),
            _ => {}
        }
        return Vec::new();
    }
    if app.cases_form.is_some() {
        // The case-matrix form owns the keys while it is open, as the replay dialog does.
        if matches!(
            action,
            Action::Job(_)
                | Action::Resize(..)
                | Action::ViewHeight(_)
                | Action::OverlayScrollMax(_)
                | Action::Quit
        ) {
            return update_base(app, action, app.view_height);
        }
        return cases::on_form(app, &action).unwrap_or_default();
    }
    if app.search.editing {
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
            other => return update_normal(app, other),
        }
        return Vec::new();
    }
    update_normal(app, action)
}

fn update_normal(app: &mut App, action: Action) -> Vec<Effect> {
    let page = app.view_height.max(1);
    let from_user = !matches!(
        action,
        Action::Job(_) | Action::Resize(..) | Action::ViewHeight(_) | Action::OverlayScrollMax(_)
    );
    if app.help {
        // The help overlay owns the keys while it is open: nothing moves unseen behind it.
        match action {
            Action::ToggleHelp | Action::Escape => app.help = false,
            Action::Quit => app.should_quit = true,
            Action::Up => scroll_overlay(app, -1),
            Action::Down => scroll_overlay(app, 1),
            Action::PageUp => scroll_overlay(app, -(page as i64)),
            Action::PageDown => scroll_overlay(app, page as i64),
            Action::Top => scroll_overlay(app, i64::MIN / 2),
            Action::Bottom => scroll_overlay(app, i64::MAX / 2),
            Action::Job(_)
            | Action::Resize(..)
            | Action::ViewHeight(_)
            | Action::OverlayScrollMax(_) => {
                return update_base(app, action, page);
            }
            _ => {}
        }
        return Vec::new();
    }
    if app.warnings_open {
        // The warnings view owns the keys while it is open, as the help does.
        match action {
            Action::ToggleWarnings | Action::Escape => app.warnings_open = false,
            Action::Quit => app.should_quit = true,
            Action::Up => scroll_overlay(app, -1),
            Action::Down => scroll_overlay(app, 1),
            Action::PageUp => scroll_overlay(app, -(page as i64)),
            Action::PageDown => scroll_overlay(app, page as i64),
            Action::Top => scroll_overlay(app, i64::MIN / 2),
            Action::Bottom => scroll_overlay(app, i64::MAX / 2),
            Action::Job(_)
            | Action::Resize(..)
            | Action::ViewHeight(_)
            | Action::OverlayScrollMax(_) => {
                return update_base(app, action, page);
            }
            _ => {}
        }
        return Vec::new();
    }
    if from_user {
        // A message answers the key that set it; the next key replaces it (or the standing
        // note of load warnings comes back), so nothing stays on screen after it stops being true.
        app.message = app.standing_message();
    }
    if app.tensor_popup.is_some() && !app.help {
        // The result popup is modal: it takes the keys it uses and drops the others, so
        // nothing moves unseen underneath it.
        match action {
            Action::Up => tensors::step_pair(app, -1),
            Action::Down => tensors::step_pair(app, 1),
            Action::PageUp | Action::Top => tensors::step_pair(app, i64::MIN / 2),
            Action::PageDown | Action::Bottom => tensors::step_pair(app, i64::MAX / 2),
            Action::Escape | Action::Enter | Action::CompareTensors => app.tensor_popup = None,
            Action::Quit
            | Action::ToggleHelp
            | Action::Resize(..)
            | Action::ViewHeight(_)
            | Action::OverlayScrollMax(_)
            | Action::Job(_) => return update_base(app, action, page),
            _ => {}
        }
        return Vec::new();
    }
    if app.replay_view.is_some() {
        // The replay result is modal as the tensor result is.
        let page = page as i64;
        match action {
            Action::Up => replay::step_output(app, -1),
            Action::Down => replay::step_output(app, 1),
            Action::PageUp => replay::scroll_result(app, -page),
            Action::PageDown => replay::scroll_result(app, page),
            Action::Top => replay::scroll_result(app, i64::MIN / 2),
            Action::Bottom => replay::scroll_result(app, i64::MAX / 2),
            Action::Escape | Action::Enter | Action::Replay => app.replay_view = None,
            Action::CaseMatrix => return cases::open(app),
            Action::Quit
            | Action::ToggleHelp
            | Action::Resize(..)
            | Action::ViewHeight(_)
            | Action::OverlayScrollMax(_)
            | Action::Job(_) => return update_base(app, action, page as usize),
            _ => {}
        }
        return Vec::new();
    }
    if app.replay_job.is_some() {
        // The running replay's log is modal too: Esc cancels it, the arrows scroll the log.
        let page = page as i64;
        match action {
            Action::Escape => return replay::cancel(app),
            Action::Up => replay::scroll_log(app, -1),
            Action::Down => replay::scroll_log(app, 1),
            Action::PageUp => replay::scroll_log(app, -page),
            Action::PageDown => replay::scroll_log(app, page),
            Action::Top => replay::scroll_log(app, i64::MIN / 2),
            Action::Bottom => replay::scroll_log(app, i64::MAX / 2),
            Action::Quit
            | Action::ToggleHelp
            | Action::Resize(..)
            | Action::ViewHeight(_)
            | Action::OverlayScrollMax(_)
            | Action::Job(_) => return update_base(app, action, page as usize),
            _ => {}
        }
        return Vec::new();
    }
    if app.cases_board.as_ref().is_some_and(|b| b.open) {
        // The case-matrix board is modal; a case's metrics popup over it more so.
        let page = page as i64;
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
            Action::PageUp if viewing => cases::scroll_case(app, -page),
            Action::PageDown if viewing => cases::scroll_case(app, page),
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
            Action::Quit
            | Action::ToggleHelp
            | Action::Resize(..)
            | Action::ViewHeight(_)
            | Action::OverlayScrollMax(_)
            | Action::Job(_) => return update_base(app, action, page as usize),
            _ => {}
        }
        return Vec::new();
    }
    update_base(app, action, page)
}

fn update_base(app: &mut App, action: Action, page: usize) -> Vec<Effect> {
    match action {
        Action::Quit => app.should_quit = true,
        Action::Escape => {
            if app.help {
                app.help = false;
            } else if app.tensor_popup.is_some() {
                app.tensor_popup = None;
            } else if app.replay_view.is_some() {
                app.replay_view = None;
            } else if app.replay_job.is_some() {
                return replay::cancel(app);
            } else if app.tensor_job.is_some() {
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
        Action::ToggleWarnings => {}
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
        Action::Job(JobUpdate { slot, event, .. }) => return on_job(app, slot, event),
        // Handled first, in `update`.
        Action::Watched(_)
        | Action::WatchSource { .. }
        | Action::WatchFetching { .. }
        | Action::ReplayHistory(_) => {}
        _ if app.loaded.is_none() => {}
        Action::Up if app.focus == Focus::Aliases => {
            app.alias_selected = app.alias_selected.saturating_sub(1)
        }
        Action::Down if app.focus == Focus::Aliases => {
            let members: usize = app
                .alias_groups()
                .iter()
                .map(|(_, g)| g.members.len())
                .sum();
            app.alias_selected = (app.alias_selected + 1).min(members.saturating_sub(1));
        }
        Action::PageUp | Action::PageDown | Action::Top | Action::Bottom
            if app.focus == Focus::Aliases =>
        {
            let members: usize = app
                .alias_groups()
                .iter()
                .map(|(_, g)| g.members.len())
                .sum();
            let last = members.saturating_sub(1);
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
        Action::ClickOverview { rank, fraction } => {
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
                    let index = (fraction.clamp(0.0, 1.0) * app.rows.len().saturating_sub(1) as f64)
                        .round() as usize;
                    app.select_near(index);
                }
            }
        }
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
        Action::FirstNonFinite => {
            let found = app.rows.iter().position(|r| r.first_nonfinite);
            app.jump_to(found, "non-finite record");
        }
        Action::FirstDivergence => {
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
        Action::StartSearch => {
            app.search.editing = true;
            app.search.input.clear();
            app.search.error = None;
        }
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
        Action::Export => export::open(app),
        Action::CompareTensors => return tensors::start(app),
        Action::Replay => return replay::open(app),
        Action::CaseMatrix => return cases::open(app),
        Action::CasesStop => return cases::cancel(app),
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
        | Action::CasesCancel => {}
        Action::SearchChar(_)
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
