//! The workbench's one message type and the work it asks of the runtime.

use super::jobs::{JobSpec, JobUpdate, Slot};
use super::replay;
use super::session::Session;
#[cfg(doc)]
use super::{cases, jobs::JobEvent};

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
    /// `R`: the next matched request of the token alignment.
    NextRequest,
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
    /// `T`: the token × stage view of the open diff (docs/diff.md, "Token rows"); `T` or Esc
    /// closes it. `b`: the first bad token, in that view.
    ToggleTokens,
    FirstBadToken,
    /// `m`: the timeline pane shows the selected window's module tree, or the flat timeline
    /// again ([`super::tree`]). In the tree, Enter (or Space) folds and unfolds, Left folds
    /// (or goes up to the module above), Right unfolds (or goes to the first line below).
    ToggleTree,
    /// `D`: select the next record of the diagnosis's chain (wrapping around), in its
    /// window; the status line says which step it is.
    WalkDiagnosis,
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
    /// `]` / `[`: scroll the detail panel down / up by this many lines.
    DetailScroll(i64),
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
