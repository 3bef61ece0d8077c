//! `p`: replay one operator on the input set the probe captured for the selected stage.
//!
//! Three steps, each a popup that owns the keys it uses:
//!
//! 1. The dialog ([`ReplayDialog`]): candidate (prefilled with the operator the probe
//!    recorded), reference (the built-in the operator or the stage name suggests,
//!    `model::replay::suggest`), standard (msprobe, dynamo, or allclose with atol and rtol),
//!    Python (optional), and with two captures that both hold the set, the side. Characters
//!    edit the focused field, Tab moves on, Up/Down walk the field's earlier entries (the
//!    standard's three names, the two sides), Enter starts, Esc closes.
//! 2. The running replay ([`ReplayJob`]): the runtime's [`Slot::Replay`] job streams
//!    replay_op.py's log lines and the time so far; Esc cancels it (the runtime kills the
//!    Python's process group).
//! 3. The result ([`ReplayView`] of a [`ReplayKept`]): the verdict, each output's figures and
//!    metrics and |diff| histogram; kept for the exported report.
//!
//! The earlier entries live in a file the runtime reads and writes: the app asks for them
//! with [`Effect::LoadReplayHistory`] when the dialog first opens and hands each new entry
//! over with [`Effect::RememberReplay`]; nothing here touches a file.

use std::path::{Path, PathBuf};

use super::jobs::{JobEvent, JobOutput, JobProgress, JobSpec, ReplaySpec, Slot};
use super::session::Side;
use super::{Action, App, Effect};
use crate::model::dump::Window;
use crate::model::replay::history::{self, Entry};
use crate::model::replay::{ReplayResult, Standard, suggest};

/// Log lines a running replay keeps for its popup (the oldest go first).
pub const LOG_LINES: usize = 500;

/// A field of the replay dialog, in the order Tab visits them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayField {
    /// Which capture's input set (only with two captures that both hold it).
    Side,
    /// The operator under test.
    Candidate,
    /// What it is judged against.
    Reference,
    /// `msprobe`, `dynamo` or `allclose`.
    Standard,
    /// allclose's absolute tolerance (only with allclose).
    Atol,
    /// allclose's relative tolerance (only with allclose).
    Rtol,
    /// The interpreter (optional).
    Python,
}

impl ReplayField {
    /// The label the dialog shows.
    pub fn label(self) -> &'static str {
        match self {
            ReplayField::Side => "side",
            ReplayField::Candidate => "candidate",
            ReplayField::Reference => "reference",
            ReplayField::Standard => "standard",
            ReplayField::Atol => "atol",
            ReplayField::Rtol => "rtol",
            ReplayField::Python => "python",
        }
    }
}

/// A capture that holds the input set: which, where its window lies, what the probe
/// recorded as its operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayTarget {
    /// Capture A or B.
    pub side: Side,
    /// The window directory on this machine (for a remote capture, its mirror's copy).
    pub dump: PathBuf,
    /// The window directory as the dialog shows it: `dump`, or for a remote capture where it
    /// lies on its host (`gpu1:/data/run/rank0/match1-occ1`), where the replay runs.
    pub shown: String,
    /// `capture_inputs(..., _op=...)`, when given.
    pub op: Option<String>,
}

/// Walking a field's earlier entries: which field, how far back, and what was typed
/// before the walk began (Down past the newest entry gives it back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recall {
    /// The field walked.
    pub field: ReplayField,
    /// Index into that field's earlier values, newest first.
    pub index: usize,
    /// The field's text before the first Up.
    pub draft: String,
}

/// The open replay dialog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayDialog {
    /// The window's rank.
    pub rank: u32,
    /// `stage#N`.
    pub stage: String,
    /// The captures that hold this input set, A first (one or two).
    pub targets: Vec<ReplayTarget>,
    /// The chosen one: an index into `targets`.
    pub target: usize,
    /// The built-in the stage name or the operator suggested, if any (prefilled).
    pub suggested: Option<&'static str>,
    /// The candidate operator, as typed.
    pub candidate: String,
    /// The reference, as typed.
    pub reference: String,
    /// The standard's name, as typed (`msprobe` when opened).
    pub standard: String,
    /// allclose's atol, as typed.
    pub atol: String,
    /// allclose's rtol, as typed.
    pub rtol: String,
    /// The Python interpreter, as typed; empty: dumpview's choice.
    pub python: String,
    /// The field keys edit.
    pub focus: ReplayField,
    /// An Up/Down walk in progress.
    pub recall: Option<Recall>,
    /// Why the last Enter did not start (shown under the fields).
    pub error: Option<String>,
}

impl ReplayDialog {
    /// The chosen capture.
    pub fn chosen(&self) -> &ReplayTarget {
        &self.targets[self.target]
    }

    /// The fields on show, in Tab order: the side only when two captures hold the set,
    /// atol and rtol only with allclose.
    pub fn fields(&self) -> Vec<ReplayField> {
        let mut fields = Vec::with_capacity(7);
        if self.targets.len() > 1 {
            fields.push(ReplayField::Side);
        }
        fields.extend([
            ReplayField::Candidate,
            ReplayField::Reference,
            ReplayField::Standard,
        ]);
        if self.standard.trim() == "allclose" {
            fields.extend([ReplayField::Atol, ReplayField::Rtol]);
        }
        fields.push(ReplayField::Python);
        fields
    }

    /// The text of `field` (the side as `A` or `B`).
    pub fn text(&self, field: ReplayField) -> &str {
        match field {
            ReplayField::Side => match self.chosen().side {
                Side::A => "A",
                Side::B => "B",
            },
            ReplayField::Candidate => &self.candidate,
            ReplayField::Reference => &self.reference,
            ReplayField::Standard => &self.standard,
            ReplayField::Atol => &self.atol,
            ReplayField::Rtol => &self.rtol,
            ReplayField::Python => &self.python,
        }
    }

    fn text_mut(&mut self, field: ReplayField) -> Option<&mut String> {
        Some(match field {
            ReplayField::Side => return None,
            ReplayField::Candidate => &mut self.candidate,
            ReplayField::Reference => &mut self.reference,
            ReplayField::Standard => &mut self.standard,
            ReplayField::Atol => &mut self.atol,
            ReplayField::Rtol => &mut self.rtol,
            ReplayField::Python => &mut self.python,
        })
    }

    /// The entry the fields make, as the history keeps it.
    fn entry(&self) -> Entry {
        let allclose = self.standard.trim() == "allclose";
        let tolerance = |t: &str| {
            if allclose {
                t.trim().to_string()
            } else {
                String::new()
            }
        };
        Entry {
            candidate: self.candidate.trim().to_string(),
            reference: self.reference.trim().to_string(),
            standard: self.standard.trim().to_string(),
            atol: tolerance(&self.atol),
            rtol: tolerance(&self.rtol),
            python: self.python.trim().to_string(),
        }
    }

    fn fill(&mut self, entry: &Entry) {
        self.candidate.clone_from(&entry.candidate);
        self.reference.clone_from(&entry.reference);
        self.standard = if entry.standard.is_empty() {
            Standard::Msprobe.name().to_string()
        } else {
            entry.standard.clone()
        };
        self.atol.clone_from(&entry.atol);
        self.rtol.clone_from(&entry.rtol);
        self.python.clone_from(&entry.python);
    }
}

/// The replay running now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayJob {
    /// The window's rank.
    pub rank: u32,
    /// `stage#N`.
    pub stage: String,
    /// Which capture's input set.
    pub side: Side,
    /// The window directory holding it, on this machine.
    pub dump: PathBuf,
    /// The fields it was started with.
    pub entry: Entry,
    /// replay_op.py's log lines so far (the last [`LOG_LINES`]).
    pub log: Vec<String>,
    /// Milliseconds since it started, as last reported.
    pub elapsed_ms: u64,
    /// Lines scrolled back from the newest (0: the log follows what comes).
    pub scroll: usize,
    /// Esc was pressed: the runtime is stopping it.
    pub cancelling: bool,
}

/// A finished replay, kept for its popup and the exported report.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayKept {
    /// The window's rank.
    pub rank: u32,
    /// `stage#N`.
    pub stage: String,
    /// Which capture's input set.
    pub side: Side,
    /// The window directory holding it, on this machine (what `c` plans a case matrix on).
    pub dump: PathBuf,
    /// The fields it was started with (the dialog opens on them again for this stage).
    pub entry: Entry,
    /// The judged replay, or why there is none (replay_op.py refused the input, no Python
    /// with torch, a reference that raised).
    pub outcome: Result<Box<ReplayResult>, String>,
    /// replay_op.py's log lines, as the popup streamed them.
    pub log: Vec<String>,
    /// How long it ran, milliseconds (as last reported while it ran).
    pub elapsed_ms: u64,
}

/// The open result popup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayView {
    /// Index into [`App::replay_results`].
    pub result: usize,
    /// Which output (`out`, `out.0`, …) the metrics and histogram are of.
    pub output: usize,
    /// Lines scrolled down in the text.
    pub scroll: usize,
}

/// What the runtime says about the history file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistoryEvent {
    /// Its entries (none when there is no file yet), and a note when it could not be read
    /// (then it is ignored, and replaced by the next entry).
    Loaded {
        /// Newest first.
        entries: Vec<Entry>,
        /// Why the file was ignored.
        note: Option<String>,
    },
    /// A new entry could not be written (why, with the path).
    NotSaved(String),
}

/// `p`: opens the dialog on the selected stage, or says why not.
pub(super) fn open(app: &mut App) -> Vec<Effect> {
    if let Some(job) = &app.replay_job {
        app.message = Some(format!(
            "a replay of {} is running: one at a time (Esc cancels it)",
            job.stage
        ));
        return Vec::new();
    }
    let mut dialog = match dialog_for(app) {
        Ok(dialog) => dialog,
        Err(message) => {
            app.message = Some(message);
            return Vec::new();
        }
    };
    // A dialog closed with Esc on this stage: its fields come back, on the same input sets.
    if let Some(draft) = app.replay_draft.take() {
        if draft.rank == dialog.rank
            && draft.stage == dialog.stage
            && draft.targets == dialog.targets
        {
            dialog = ReplayDialog {
                recall: None,
                error: None,
                ..draft
            };
        } else {
            app.replay_draft = Some(draft);
        }
    }
    app.message = None;
    app.replay_dialog = Some(dialog);
    if app.replay_history.is_none() {
        vec![Effect::LoadReplayHistory]
    } else {
        Vec::new()
    }
}

/// The dialog for the selected row, prefilled.
fn dialog_for(app: &App) -> Result<ReplayDialog, String> {
    let (Some(loaded), Some(choice), Some(row)) = (&app.loaded, app.choice(), app.row()) else {
        return Err("no stage selected".to_string());
    };
    let key = row.key.clone();
    let session = &loaded.session;
    if !row.input_a && !row.input_b {
        let stage = crate::model::dump::StageKey::stage_of(&key);
        let mut message = format!(
            "{key} has no captured input set to replay: capture one with \
             capture_inputs(\"{stage}\", ...) (docs/replay.md); rows marked ↻ have one"
        );
        // Input sets of a stage that recorded no statistics have no row to press p on.
        let window = &session.a.windows[choice.a];
        let rowless: Vec<String> = window
            .input_sets
            .iter()
            .map(|s| format!("{}#{}", s.stage, s.occurrence))
            .filter(|k| !app.rows.iter().any(|r| r.key == *k))
            .collect();
        if !rowless.is_empty() {
            message.push_str(&format!(
                "; {} ha{} no row of {}: `dumpview replay {} --stage STAGE#N`",
                rowless.join(", "),
                if rowless.len() == 1 { "s" } else { "ve" },
                if rowless.len() == 1 {
                    "its own"
                } else {
                    "their own"
                },
                runnable_dir(&window.source).display()
            ));
        }
        return Err(message);
    }
    let mut targets = Vec::new();
    let mut sides = vec![(Side::A, row.input_a, Some(&session.a.windows[choice.a]))];
    if let (Some(b), Some(bi)) = (&session.b, choice.b) {
        sides.push((Side::B, row.input_b, Some(&b.windows[bi])));
    }
    for (side, holds, window) in sides {
        let Some(window) = window.filter(|_| holds) else {
            continue;
        };
        let Some(on_disk) = session.on_disk(window) else {
            return Err(not_on_disk(session, window, &key));
        };
        let op = window
            .input_sets
            .iter()
            .find(|s| format!("{}#{}", s.stage, s.occurrence) == key)
            .and_then(|s| s.op.clone());
        let dump = window_dir(&on_disk.source);
        let shown = match session.remote_dirs.get(&dump) {
            Some(place) => place.clone(),
            None => dump.display().to_string(),
        };
        targets.push(ReplayTarget {
            side,
            dump,
            shown,
            op,
        });
    }
    if targets.is_empty() {
        return Err(format!("{key}: no window holds its input set"));
    }
    let op = targets[0].op.clone();
    let suggested = suggest::reference_for(&key, op.as_deref());
    let mut dialog = ReplayDialog {
        rank: choice.rank,
        stage: key.clone(),
        targets,
        target: 0,
        suggested,
        candidate: op.unwrap_or_default(),
        reference: suggested.unwrap_or_default().to_string(),
        standard: Standard::Msprobe.name().to_string(),
        atol: String::new(),
        rtol: String::new(),
        python: String::new(),
        focus: ReplayField::Candidate,
        recall: None,
        error: None,
    };
    // Replayed before: the dialog opens on what was run last for this stage, finished or
    // cancelled (a cancelled one is newer than every finished one it is kept beside).
    let cancelled = app
        .replay_cancelled
        .as_ref()
        .filter(|j| j.rank == choice.rank && j.stage == key)
        .map(|j| (&j.entry, j.side));
    let kept = app
        .replay_results
        .iter()
        .rev()
        .find(|k| k.rank == choice.rank && k.stage == key)
        .map(|k| (&k.entry, k.side));
    if let Some((entry, side)) = cancelled.or(kept) {
        dialog.fill(entry);
        if let Some(i) = dialog.targets.iter().position(|t| t.side == side) {
            dialog.target = i;
        }
    }
    Ok(dialog)
}

/// [`window_dir`] as a command line takes it: an embedded example's path is the one in a
/// dumpview checkout (`assets/examples/…`), without the `embedded:` label, which a command
/// would read as an ssh host.
fn runnable_dir(source: &Path) -> PathBuf {
    let text = source.to_string_lossy();
    match text.strip_prefix(super::session::EMBEDDED) {
        Some(rel) => window_dir(Path::new(rel)),
        None => window_dir(source),
    }
}

/// The directory of a window's manifest (`…/match1-occ1/manifest.json`); a source that is
/// not a `.json` file is its own directory.
fn window_dir(source: &Path) -> PathBuf {
    match source.extension() {
        Some(ext) if ext == "json" => source
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
        _ => source.to_path_buf(),
    }
}

/// An embedded example without its checkout: where its input sets are.
fn not_on_disk(session: &super::Session, window: &Window, key: &str) -> String {
    if let Some(dir) = &session.checkout_differs {
        return format!(
            "{0} was regenerated since this dumpview was built: its input sets are not the \
             embedded run's. Replay them there with `dumpview {0}/a {0}/b`, or rebuild dumpview",
            dir.display()
        );
    }
    let source = window.source.to_string_lossy();
    let pair: PathBuf = Path::new(source.trim_start_matches(super::session::EMBEDDED))
        .components()
        .take(3)
        .collect();
    format!(
        "the embedded example's input sets are not on disk here: open {0}/a of a dumpview \
         checkout to replay {key}",
        pair.display()
    )
}

/// An action while the dialog is open (it owns the keys); `None`: not the dialog's, for
/// the caller to apply.
pub(super) fn on_dialog(app: &mut App, action: Action) -> Option<Vec<Effect>> {
    let history = app.replay_history.clone().unwrap_or_default();
    let dialog = app.replay_dialog.as_mut()?;
    match action {
        Action::ReplayChar(c) => {
            dialog.recall = None;
            dialog.error = None;
            match dialog.focus {
                // A letter never changes a choice: typed after Tab wrapped round, it was meant
                // for a text field, and is refused with where the keys go instead.
                ReplayField::Side if c == ' ' => toggle_side(dialog),
                ReplayField::Side => {
                    dialog.error = Some(format!(
                        "{c:?} not typed: the cursor is on the side field (Space or ↑↓ \
                         changes it; Tab goes to the next field)"
                    ));
                }
                field => {
                    if let Some(text) = dialog.text_mut(field) {
                        text.push(c);
                    }
                }
            }
        }
        Action::ReplayBackspace => {
            dialog.recall = None;
            dialog.error = None;
            if let Some(text) = dialog.text_mut(dialog.focus) {
                text.pop();
            }
        }
        Action::ReplayClear => {
            dialog.recall = None;
            dialog.error = None;
            if let Some(text) = dialog.text_mut(dialog.focus) {
                text.clear();
            }
        }
        Action::ReplayNextField => {
            dialog.recall = None;
            let fields = dialog.fields();
            let at = fields.iter().position(|f| *f == dialog.focus).unwrap_or(0);
            dialog.focus = fields[(at + 1) % fields.len()];
        }
        Action::ReplayEarlier => step(dialog, &history, 1),
        Action::ReplayLater => step(dialog, &history, -1),
        Action::ReplaySubmit => return Some(submit(app)),
        Action::ReplayCancel => {
            // Kept: the next `p` on this stage opens on what was typed.
            app.replay_draft = app.replay_dialog.take();
            app.message = Some("replay cancelled: nothing was run".to_string());
        }
        _ => return None,
    }
    Some(Vec::new())
}

fn toggle_side(dialog: &mut ReplayDialog) {
    dialog.target = (dialog.target + 1) % dialog.targets.len();
}

/// Up (`delta` 1: older) or Down (-1: newer) in the focused field: the side toggles, the
/// standard cycles through its names, the other fields walk their earlier values.
fn step(dialog: &mut ReplayDialog, history: &[Entry], delta: i64) {
    dialog.error = None;
    let field = dialog.focus;
    match field {
        ReplayField::Side => return toggle_side(dialog),
        ReplayField::Standard => {
            // Down goes on through the names as the dialog lists them, Up back.
            let names = Standard::NAMES;
            let at = names
                .iter()
                .position(|n| *n == dialog.standard.trim())
                .map_or(0, |i| {
                    (i as i64 - delta).rem_euclid(names.len() as i64) as usize
                });
            dialog.standard = names[at].to_string();
            return;
        }
        _ => {}
    }
    let values = history::values(history, |e| match field {
        ReplayField::Candidate => &e.candidate,
        ReplayField::Reference => &e.reference,
        ReplayField::Atol => &e.atol,
        ReplayField::Rtol => &e.rtol,
        ReplayField::Python => &e.python,
        ReplayField::Side | ReplayField::Standard => "",
    });
    let current = dialog.text(field).to_string();
    let recall = dialog.recall.take().filter(|r| r.field == field);
    let (next, draft) = match (recall, delta > 0) {
        (None, true) => {
            // The first Up skips a value equal to what is in the field already.
            let skip = usize::from(values.first() == Some(&current.as_str()));
            (Some(skip), current)
        }
        (None, false) => (None, current),
        (Some(r), true) => (Some(r.index + 1), r.draft),
        (Some(r), false) => (r.index.checked_sub(1), r.draft),
    };
    let text = dialog.text_mut(field).expect("a text field");
    match next {
        Some(index) if index < values.len() => {
            *text = values[index].to_string();
            dialog.recall = Some(Recall {
                field,
                index,
                draft,
            });
        }
        // Past the oldest: stay there.
        Some(_) if !values.is_empty() => {
            let index = values.len() - 1;
            *text = values[index].to_string();
            dialog.recall = Some(Recall {
                field,
                index,
                draft,
            });
        }
        // Nothing earlier, or Down past the newest: what was typed.
        _ => *text = draft,
    }
}

/// Enter: the replay as a job, or the dialog stays open saying what to fix.
fn submit(app: &mut App) -> Vec<Effect> {
    let Some(dialog) = app.replay_dialog.as_mut() else {
        return Vec::new();
    };
    let entry = dialog.entry();
    let mut fail = |field: ReplayField, message: String| {
        dialog.focus = field;
        dialog.error = Some(message);
        Vec::new()
    };
    const SPECS: &str = "builtin:NAME, module:function, path/to/file.py:function or a torch op (torch.ops.npu.npu_rms_norm)";
    if entry.candidate.is_empty() {
        return fail(
            ReplayField::Candidate,
            format!("give the candidate: {SPECS}"),
        );
    }
    if entry.reference.is_empty() {
        return fail(
            ReplayField::Reference,
            format!("give the reference: {SPECS}"),
        );
    }
    let standard_name = if entry.standard.is_empty() {
        Standard::Msprobe.name()
    } else {
        entry.standard.as_str()
    };
    let number = |field: ReplayField, text: &str| -> Result<Option<f64>, (ReplayField, String)> {
        if standard_name != "allclose" {
            return Ok(None);
        }
        if text.is_empty() {
            return Err((
                field,
                format!(
                    "allclose needs {}: a tolerance is never assumed",
                    field.label()
                ),
            ));
        }
        text.parse::<f64>().map(Some).map_err(|_| {
            (
                field,
                format!("{}: {text:?} is not a number", field.label()),
            )
        })
    };
    let tolerances = number(ReplayField::Atol, &entry.atol)
        .and_then(|atol| number(ReplayField::Rtol, &entry.rtol).map(|rtol| (atol, rtol)));
    let (atol, rtol) = match tolerances {
        Ok(t) => t,
        Err((field, message)) => return fail(field, message),
    };
    let standard = match Standard::from_args(Some(standard_name), atol, rtol) {
        Ok(s) => s,
        Err(e) => {
            let field = if Standard::NAMES.contains(&standard_name) {
                ReplayField::Atol
            } else {
                ReplayField::Standard
            };
            return fail(field, e.replace("--standard ", "").replace("--", ""));
        }
    };
    let target = dialog.chosen().clone();
    let spec = ReplaySpec {
        rank: dialog.rank,
        stage: dialog.stage.clone(),
        side: target.side,
        dump: target.dump,
        candidate: entry.candidate.clone(),
        reference: entry.reference.clone(),
        standard,
        python: (!entry.python.is_empty()).then(|| entry.python.clone()),
    };
    app.replay_cancelled = None;
    app.replay_job = Some(ReplayJob {
        rank: spec.rank,
        stage: spec.stage.clone(),
        side: spec.side,
        dump: spec.dump.clone(),
        entry: entry.clone(),
        log: Vec::new(),
        elapsed_ms: 0,
        scroll: 0,
        cancelling: false,
    });
    app.replay_dialog = None;
    app.replay_view = None;
    app.message = None;
    app.replay_history = Some(history::remember(
        app.replay_history.take().unwrap_or_default(),
        entry.clone(),
    ));
    vec![
        Effect::Spawn(JobSpec::Replay(spec)),
        Effect::RememberReplay(entry),
    ]
}

/// What the runtime says about the history file.
pub(super) fn on_history(app: &mut App, event: HistoryEvent) {
    match event {
        HistoryEvent::Loaded { entries, note } => {
            // Entries made before the file was read come first.
            let mut merged = entries;
            for entry in app
                .replay_history
                .take()
                .unwrap_or_default()
                .into_iter()
                .rev()
            {
                merged = history::remember(merged, entry);
            }
            app.replay_history = Some(merged);
            if let Some(note) = note {
                app.message = Some(note);
            }
        }
        HistoryEvent::NotSaved(why) => app.message = Some(why),
    }
}

/// Esc while the replay runs: ask the runtime to stop it (once).
pub(super) fn cancel(app: &mut App) -> Vec<Effect> {
    let Some(job) = app.replay_job.as_mut() else {
        return Vec::new();
    };
    if job.cancelling {
        return Vec::new();
    }
    job.cancelling = true;
    app.message = Some(format!("cancelling the replay of {}…", job.stage));
    vec![Effect::Cancel(Slot::Replay)]
}

/// Up/Down/PgUp/PgDn in the running replay's log: lines back from the newest.
pub(super) fn scroll_log(app: &mut App, delta: i64) {
    if let Some(job) = app.replay_job.as_mut() {
        let max = job.log.len().saturating_sub(1) as i64;
        job.scroll = (job.scroll as i64 - delta).clamp(0, max) as usize;
    }
}

/// An event of the running replay: log lines and the clock go into its popup; its end is
/// kept (unless cancelled) and shown.
pub(super) fn on_event(app: &mut App, event: JobEvent) {
    let Some(job) = app.replay_job.as_mut() else {
        return;
    };
    let outcome = match event {
        JobEvent::Progress(JobProgress::Replay { elapsed_ms, line }) => {
            job.elapsed_ms = elapsed_ms;
            if let Some(line) = line {
                job.log.push(line);
                if job.log.len() > LOG_LINES {
                    job.log.remove(0);
                }
                // A reader scrolled back keeps the same lines in view.
                if job.scroll > 0 {
                    job.scroll = (job.scroll + 1).min(job.log.len().saturating_sub(1));
                }
            }
            return;
        }
        JobEvent::Progress(_) => return,
        JobEvent::Cancelled => {
            let stage = job.stage.clone();
            app.replay_cancelled = app.replay_job.take();
            app.message = Some(format!(
                "replay of {stage} cancelled: replay_op.py and its process group were stopped"
            ));
            return;
        }
        JobEvent::Done(JobOutput::Replayed(result)) => Ok(result),
        JobEvent::Done(_) => return,
        JobEvent::Failed(error) => Err(error),
    };
    let Some(job) = app.replay_job.take() else {
        return;
    };
    let cancelling = job.cancelling;
    let stage = job.stage.clone();
    app.replay_results.push(ReplayKept {
        rank: job.rank,
        stage: job.stage,
        side: job.side,
        dump: job.dump,
        entry: job.entry,
        outcome,
        log: job.log,
        elapsed_ms: job.elapsed_ms,
    });
    if cancelling {
        app.message = Some(format!(
            "the replay of {stage} finished before the cancel: kept for the report"
        ));
    } else {
        app.message = None;
        app.replay_view = Some(ReplayView {
            result: app.replay_results.len() - 1,
            output: 0,
            scroll: 0,
        });
    }
}

/// Up/Down in the result popup: the previous / next output.
pub(super) fn step_output(app: &mut App, delta: i64) {
    let Some(view) = app.replay_view.as_mut() else {
        return;
    };
    let outputs = app.replay_results[view.result]
        .outcome
        .as_ref()
        .map_or(0, |r| r.replay.outputs.len());
    if outputs > 0 {
        let next = (view.output as i64 + delta).clamp(0, outputs as i64 - 1) as usize;
        if next != view.output {
            view.output = next;
            view.scroll = 0;
        }
    }
}

/// PgUp/PgDn (and g, G) in the result popup: its text scrolls, as far as the last frame
/// allowed ([`App::overlay_scroll_max`]).
pub(super) fn scroll_result(app: &mut App, delta: i64) {
    let max = app.overlay_scroll_max.min(i64::MAX as usize) as i64;
    if let Some(view) = app.replay_view.as_mut() {
        view.scroll = (view.scroll as i64).saturating_add(delta).clamp(0, max) as usize;
    }
}
