//! `c`: the case matrix of a replayed input set (docs/cases.md), in three parts:
//!
//! 1. The form ([`CasesForm`]), opened by `c` on a replay's result: the captured baseline
//!    (each argument's dtype, shape and strides, or its value), the candidate, reference and
//!    standard the replay ran with, and one line per axis (dtype, layout, shape, mode,
//!    options, ties), prefilled with a small matrix. Enter plans it (a [`Slot::Cases`] job
//!    that writes `.dumpview/cases/NAME/` as `dumpview cases plan` does) and runs its cases.
//! 2. The board ([`CasesBoard`]): the cases as a grid, one row per axis, one cell per value,
//!    each cell the case's outcome (pass, numerical mismatch, crash, unsupported combination,
//!    missing evidence) or its place in the run (running, queued); under it, what the
//!    analysis says the failures follow and the smallest failing case. The run goes on in
//!    the background: Esc closes the board (c opens it again), x cancels the run, r runs
//!    the cases that have no result, R runs the selected case again (a new attempt).
//! 3. A case's metrics ([`CaseView`]), on Enter: its outcome and reason, its attempts, and
//!    its replay's judgement, drawn as a replay's result is.
//!
//! Nothing here reads a file: the runtime plans, runs and reads the matrix back
//! ([`crate::model::cases::snapshot::MatrixSnapshot`]).

use std::collections::HashMap;

use super::jobs::{
    CaseEvent, CasesPlanSpec, CasesRunSpec, JobEvent, JobOutput, JobProgress, JobSpec, Slot,
};
use super::session::Side;
use super::{App, Effect};
use crate::model::cases::create::WindowOnDisk;
use crate::model::cases::plan::{BASELINE, Plan, VsCheck};
use crate::model::cases::snapshot::MatrixSnapshot;
use crate::model::cases::{CaseOutcome, names, vs};
use crate::model::dump::InputSetEntry;
use crate::model::replay::Standard;

/// Log lines a running matrix keeps (the oldest go first).
pub const LOG_LINES: usize = 200;

/// A line of the form, in the order Tab visits them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CasesField {
    /// The matrix's NAME.
    Name,
    /// `dtype`: values (`float16,bfloat16`), or `ARG=values` for one argument.
    Dtype,
    /// `layout[ARG]`: `ARG=contiguous,transposed,strided` (`;` between arguments).
    Layout,
    /// `shape`: `captured,half_rows,odd_last_dim`, or `ARG=values`.
    Shape,
    /// `mode`: `eager,compile`.
    Mode,
    /// `option:NAME`: `NAME=V1,V2` (`;` between options).
    Options,
    /// `--tie`: `A.D=B.E` (spaces or `;` between ties).
    Ties,
}

impl CasesField {
    /// Every line, in Tab order.
    pub const ALL: [CasesField; 7] = [
        CasesField::Name,
        CasesField::Dtype,
        CasesField::Layout,
        CasesField::Shape,
        CasesField::Mode,
        CasesField::Options,
        CasesField::Ties,
    ];

    /// The label the form shows.
    pub fn label(self) -> &'static str {
        match self {
            CasesField::Name => "name",
            CasesField::Dtype => "dtype",
            CasesField::Layout => "layout",
            CasesField::Shape => "shape",
            CasesField::Mode => "mode",
            CasesField::Options => "option",
            CasesField::Ties => "tie",
        }
    }
}

/// One captured argument as the form shows it: `x`, `tensor float32 [12, 256] stride [256, 1]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaselineLine {
    /// The argument.
    pub name: String,
    /// Its kind and layout, or its value.
    pub text: String,
}

/// The open form.
#[derive(Debug, Clone, PartialEq)]
pub struct CasesForm {
    /// The window's rank.
    pub rank: u32,
    /// `stage#N`.
    pub stage: String,
    /// Which capture's input set.
    pub side: Side,
    /// The window holding it.
    pub window: WindowOnDisk,
    /// Its manifest entry.
    pub entry: InputSetEntry,
    /// The replay's candidate.
    pub candidate: String,
    /// The replay's reference.
    pub reference: String,
    /// The replay's standard.
    pub standard: Standard,
    /// The replay's Python (`None`: dumpview's choice).
    pub python: Option<String>,
    /// The captured arguments, in call order when the replay said it.
    pub baseline: Vec<BaselineLine>,
    /// In diff mode: the other capture at the stage.
    pub vs: Option<VsCheck>,
    /// Each line's text, by [`CasesField::ALL`] order.
    pub texts: [String; 7],
    /// The name line was typed into (a taken default name is numbered instead).
    pub name_edited: bool,
    /// The line keys edit.
    pub focus: CasesField,
    /// Why the last Enter did not plan (shown under the lines), or the plan's refusal.
    pub error: Option<String>,
    /// Enter was pressed: the plan is being written.
    pub planning: bool,
    /// The replay result it was opened from ([`super::ReplayView::result`]): Esc shows it
    /// again.
    pub from_result: usize,
}

impl CasesForm {
    /// The text of `field`.
    pub fn text(&self, field: CasesField) -> &str {
        &self.texts[index(field)]
    }

    fn text_mut(&mut self, field: CasesField) -> &mut String {
        &mut self.texts[index(field)]
    }

    /// The `--axis`, `--tie` and `--untie` specs the lines make (on the tie line `A.D=B.E`
    /// ties, `A.D` alone keeps its size), or the line to fix and why.
    ///
    /// # Errors
    /// A layout or option line without `ARG=`; no axis at all.
    pub fn specs(&self) -> Result<Specs, (CasesField, String)> {
        let parts = |field: CasesField| -> Vec<String> {
            self.text(field)
                .split(';')
                .map(|p| p.split_whitespace().collect::<String>())
                .filter(|p| !p.is_empty())
                .collect()
        };
        let mut axes = Vec::new();
        for (field, axis) in [(CasesField::Dtype, "dtype"), (CasesField::Shape, "shape")] {
            for part in parts(field) {
                axes.push(match part.split_once('=') {
                    Some((arg, values)) => format!("{axis}[{arg}]={values}"),
                    None => format!("{axis}={part}"),
                });
            }
        }
        for part in parts(CasesField::Layout) {
            let Some((arg, values)) = part.split_once('=') else {
                return Err((
                    CasesField::Layout,
                    format!("layout: give ARG=VALUES (x=transposed,strided), not {part:?}"),
                ));
            };
            axes.push(format!("layout[{arg}]={values}"));
        }
        for part in parts(CasesField::Mode) {
            axes.push(format!("mode={part}"));
        }
        for part in parts(CasesField::Options) {
            if !part.contains('=') {
                return Err((
                    CasesField::Options,
                    format!("option: give NAME=VALUES (eps=1e-5,1e-4), not {part:?}"),
                ));
            }
            axes.push(format!("option:{part}"));
        }
        // Keep the plan's order the form's: dtype, layout, shape, mode, options.
        axes.sort_by_key(|a| {
            ["dtype", "layout", "shape", "mode", "option"]
                .iter()
                .position(|p| a.starts_with(p))
        });
        if axes.is_empty() {
            return Err((
                CasesField::Dtype,
                "give at least one axis: a dtype, layout, shape, mode or option line".into(),
            ));
        }
        let (ties, untied): (Vec<String>, Vec<String>) = self
            .text(CasesField::Ties)
            .split(|c: char| c == ';' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .partition(|t| t.contains('='));
        Ok(Specs { axes, ties, untied })
    }
}

/// What the form's lines say, as `dumpview cases plan` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Specs {
    /// `--axis` specs, in the form's order.
    pub axes: Vec<String>,
    /// `--tie A.D=B.E`.
    pub ties: Vec<String>,
    /// `--untie A.D`.
    pub untied: Vec<String>,
}

/// The line a plan's refusal is about, from the spec it names first.
fn field_of(error: &str) -> Option<CasesField> {
    let at = |needle: &str| error.find(needle);
    [
        ("--axis dtype", CasesField::Dtype),
        ("--axis layout", CasesField::Layout),
        ("--axis shape", CasesField::Shape),
        ("--axis mode", CasesField::Mode),
        ("--axis option", CasesField::Options),
        ("--tie", CasesField::Ties),
        ("--untie", CasesField::Ties),
        ("case matrix name", CasesField::Name),
        ("a plan is never replaced", CasesField::Name),
    ]
    .into_iter()
    .filter_map(|(needle, field)| at(needle).map(|i| (i, field)))
    .min_by_key(|(i, _)| *i)
    .map(|(_, field)| field)
}

fn index(field: CasesField) -> usize {
    CasesField::ALL
        .iter()
        .position(|f| *f == field)
        .expect("every field is listed")
}

/// Where a case stands on the board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellState {
    /// Judged (or missing evidence).
    Done(CaseOutcome),
    /// Its run has started it.
    Running,
    /// Its run will come to it.
    Queued,
}

/// A matrix run in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CasesRun {
    /// The cases it runs.
    pub cases: Vec<String>,
    /// The case running now.
    pub running: Option<String>,
    /// 1-based place of that case, of `total`.
    pub index: usize,
    /// Cases this run runs.
    pub total: usize,
    /// Milliseconds since the job started.
    pub elapsed_ms: u64,
    /// replay_op.py's other lines (the last [`LOG_LINES`]).
    pub log: Vec<String>,
    /// `x` was pressed: the runtime is stopping it.
    pub cancelling: bool,
}

/// A case's metrics, open over the board.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseView {
    /// Index into the plan's cases.
    pub case: usize,
    /// Which output's metrics.
    pub output: usize,
    /// Lines scrolled down.
    pub scroll: usize,
}

/// The case-matrix board.
#[derive(Debug, Clone, PartialEq)]
pub struct CasesBoard {
    /// The window's rank.
    pub rank: u32,
    /// Which capture's input set.
    pub side: Side,
    /// The matrix as last read.
    pub snapshot: MatrixSnapshot,
    /// Outcomes filed since that read (a run's cases as they finish).
    pub filed: HashMap<String, CaseOutcome>,
    /// The Python the cases run with.
    pub python: Option<String>,
    /// The run in progress.
    pub run: Option<CasesRun>,
    /// The selected cell: (row, column) of [`grid`].
    pub cursor: (usize, usize),
    /// The last run's failure.
    pub error: Option<String>,
    /// The open case popup.
    pub case_view: Option<CaseView>,
    /// Whether the board is on screen (a run goes on when it is closed).
    pub open: bool,
    /// The matrix is being read again (after a cancel, or on `c`): its result changes no
    /// message.
    pub refreshing: bool,
}

/// One row of the grid: an axis spec (or the baseline) and its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GridRow {
    /// `baseline`, `dtype`, `layout[x]`, `option:eps`.
    pub label: String,
    /// Its values, in the spec's order.
    pub cells: Vec<GridCell>,
}

/// One value of an axis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GridCell {
    /// The value as given (`bfloat16`; `captured` for the baseline).
    pub value: String,
    /// Index into the plan's cases: the value's own case, or the baseline for a value folded
    /// into it.
    pub case: usize,
    /// The value left the baseline as it was (its case is the baseline's).
    pub folded: bool,
}

/// The grid of `plan`: the baseline, then one row per `--axis` spec, one cell per value.
pub fn grid(plan: &Plan) -> Vec<GridRow> {
    let baseline = plan
        .cases
        .iter()
        .position(|c| c.id == BASELINE)
        .unwrap_or(0);
    let mut rows = vec![GridRow {
        label: BASELINE.to_string(),
        cells: vec![GridCell {
            value: "captured".into(),
            case: baseline,
            folded: false,
        }],
    }];
    for axis in &plan.axes {
        let label = match &axis.target {
            Some(t) if axis.spec.contains('[') => format!("{}[{t}]", axis.axis),
            _ => axis.axis.clone(),
        };
        let cells = axis
            .values
            .iter()
            .map(|value| {
                let own = plan.cases.iter().position(|c| {
                    c.spec.as_deref() == Some(axis.spec.as_str())
                        && c.value.as_deref() == Some(value.as_str())
                });
                GridCell {
                    value: value.clone(),
                    case: own.unwrap_or(baseline),
                    folded: own.is_none(),
                }
            })
            .collect();
        rows.push(GridRow { label, cells });
    }
    rows
}

impl CasesBoard {
    /// Where case `case` (index into the plan's cases) stands.
    pub fn state(&self, case: usize) -> CellState {
        let Some(result) = self.snapshot.analysis.cases.get(case) else {
            return CellState::Done(CaseOutcome::MissingEvidence);
        };
        if let Some(outcome) = self.filed.get(&result.id) {
            return CellState::Done(*outcome);
        }
        if let Some(run) = &self.run {
            if run.running.as_deref() == Some(result.id.as_str()) {
                return CellState::Running;
            }
            if run.cases.contains(&result.id) {
                return CellState::Queued;
            }
        }
        CellState::Done(result.outcome)
    }

    /// The selected cell's case.
    pub fn selected_case(&self) -> Option<usize> {
        let rows = grid(&self.snapshot.plan);
        let (r, c) = self.cursor;
        rows.get(r)?.cells.get(c).map(|cell| cell.case)
    }

    /// The matrix's name.
    pub fn name(&self) -> &str {
        self.snapshot.name()
    }
}

/// `c`: on a replay's result, the form; with none open, the board of the last matrix.
pub(super) fn open(app: &mut App) -> Vec<Effect> {
    if let Some(view) = app.replay_view {
        if app.cases_board.as_ref().is_some_and(|b| b.run.is_some()) {
            app.message = Some(
                "a case matrix is running: one at a time (c shows it, x there cancels it)".into(),
            );
            return Vec::new();
        }
        match form_for(app, view.result) {
            Ok(form) => {
                app.replay_view = None;
                app.cases_form = Some(form);
                app.message = None;
            }
            Err(message) => app.message = Some(message),
        }
        return Vec::new();
    }
    match app.cases_board.as_mut() {
        Some(board) => {
            board.open = true;
            // What another run (`dumpview cases run --rerun`) filed since shows too.
            if board.run.is_none() {
                return refresh(board);
            }
        }
        None => {
            app.message = Some(
                "no case matrix yet: replay a stage (p), then c on its result plans one".into(),
            )
        }
    }
    Vec::new()
}

/// The form for kept replay `result`, prefilled.
fn form_for(app: &App, result: usize) -> Result<CasesForm, String> {
    let kept = app
        .replay_results
        .get(result)
        .ok_or("no replay result is open")?;
    let loaded = app.loaded.as_ref().ok_or("no capture is open")?;
    let session = &loaded.session;
    let dump = match kept.side {
        Side::A => Some(&session.a),
        Side::B => session.b.as_ref(),
    }
    .ok_or("the replayed capture is no longer open")?;
    let (window, entry) = dump
        .windows
        .iter()
        .filter(|w| w.rank == kept.rank)
        .filter_map(|w| {
            let on_disk = session.on_disk(w)?;
            let dir = on_disk.source.parent()?.to_path_buf();
            (dir == kept.dump).then_some((w, on_disk.source.clone()))
        })
        .find_map(|(w, manifest)| {
            let entry = w
                .input_sets
                .iter()
                .find(|s| format!("{}#{}", s.stage, s.occurrence) == kept.stage)?;
            Some(((w, manifest), entry.clone()))
        })
        .ok_or_else(|| {
            format!(
                "{}: the window of this replay is no longer loaded (reloaded since?)",
                kept.stage
            )
        })?;
    let (window, manifest) = window;
    let replay = kept.outcome.as_ref().ok().map(|r| &r.replay);
    let baseline: Vec<BaselineLine> = match replay {
        Some(r) if !r.args.is_empty() => r
            .args
            .iter()
            .map(|a| BaselineLine {
                name: a.name.clone(),
                text: describe(
                    &a.kind,
                    a.dtype.as_deref(),
                    a.shape.as_ref().map(|s| format!("{s:?}")),
                    a.stride.as_ref().map(|s| format!("{s:?}")),
                    a.value.as_ref(),
                ),
            })
            .collect(),
        _ => entry
            .args
            .iter()
            .map(|(name, d)| BaselineLine {
                name: name.clone(),
                text: describe(
                    d.get("kind").and_then(|k| k.as_str()).unwrap_or("?"),
                    d.get("dtype").and_then(|k| k.as_str()),
                    d.get("shape").map(|s| s.to_string().replace(',', ", ")),
                    d.get("stride").map(|s| s.to_string().replace(',', ", ")),
                    d.get("value"),
                ),
            })
            .collect(),
    };
    let tensor = |name: &str| {
        entry
            .args
            .get(name)
            .filter(|d| d.get("kind").and_then(|k| k.as_str()) == Some("tensor"))
    };
    let floating = entry.args.keys().any(|n| {
        tensor(n)
            .and_then(|d| d.get("dtype").and_then(|k| k.as_str()))
            .is_some_and(|d| d.starts_with("float") || d.starts_with("bfloat"))
    });
    // The first argument (in call order) stored in two or more dimensions: what a layout
    // change can apply to.
    let names_in_order: Vec<String> = match replay {
        Some(r) if !r.args.is_empty() => r.args.iter().map(|a| a.name.clone()).collect(),
        _ => entry.args.keys().cloned().collect(),
    };
    let matrix_arg = names_in_order.iter().find(|n| {
        tensor(n)
            .and_then(|d| d.get("shape").and_then(|s| s.as_array()).map(Vec::len))
            .is_some_and(|ndim| ndim >= 2)
    });
    let vs = app.diffing().then(|| {
        let (other, index) = match kept.side {
            Side::A => ("B", 1),
            Side::B => ("A", 0),
        };
        // The other capture by its path where it was opened from one (the plan keeps it).
        let name = session
            .roots
            .get(index)
            .map_or_else(|| format!("capture {other}"), |r| r.display().to_string());
        loaded
            .diff()
            .map(|report| vs::from_diff(report, &window.source, &kept.stage, &name))
    });
    let mut texts: [String; 7] = Default::default();
    texts[index(CasesField::Name)] = default_name(&kept.stage);
    if floating {
        texts[index(CasesField::Dtype)] = "float16,bfloat16,float32".into();
    }
    if let Some(arg) = matrix_arg {
        texts[index(CasesField::Layout)] = format!("{arg}=transposed,strided");
    }
    let python = (!kept.entry.python.is_empty()).then(|| kept.entry.python.clone());
    let standard = replay.map(|r| r.standard).unwrap_or_else(|| {
        Standard::from_args(
            Some(if kept.entry.standard.is_empty() {
                Standard::Msprobe.name()
            } else {
                &kept.entry.standard
            }),
            kept.entry.atol.parse().ok(),
            kept.entry.rtol.parse().ok(),
        )
        .unwrap_or(Standard::Msprobe)
    });
    Ok(CasesForm {
        rank: kept.rank,
        stage: kept.stage.clone(),
        side: kept.side,
        window: WindowOnDisk {
            manifest,
            rank: window.rank,
            label: window.label.clone(),
        },
        entry,
        candidate: kept.entry.candidate.clone(),
        reference: kept.entry.reference.clone(),
        standard,
        python,
        baseline,
        vs: vs.flatten(),
        texts,
        name_edited: false,
        focus: CasesField::Dtype,
        error: None,
        planning: false,
        from_result: result,
    })
}

/// `layers.0.input_norm#1` → `layers.0.input_norm-1`: the stage as a matrix NAME.
fn default_name(stage: &str) -> String {
    let name: String = stage
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.=-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    if names::is_valid(&name) {
        name
    } else {
        "matrix".into()
    }
}

/// `tensor float32 [12, 256] stride [256, 1]`, or `float 1e-06`.
fn describe(
    kind: &str,
    dtype: Option<&str>,
    shape: Option<String>,
    stride: Option<String>,
    value: Option<&serde_json::Value>,
) -> String {
    let mut text = kind.to_string();
    for part in [
        dtype.map(str::to_string),
        shape,
        stride.map(|s| format!("stride {s}")),
    ]
    .into_iter()
    .flatten()
    {
        text.push(' ');
        text.push_str(&part);
    }
    if let Some(v) = value {
        text.push(' ');
        text.push_str(&v.to_string());
    }
    text
}

/// What the form does with a key (it owns them while open): `None` for an action that is not
/// the form's, for the caller.
pub(super) fn on_form(app: &mut App, action: &super::Action) -> Option<Vec<Effect>> {
    use super::Action;
    let form = app.cases_form.as_mut()?;
    if form.planning {
        // Planning: only Esc (hide the form; the job goes on) and the runtime's actions.
        return match action {
            Action::CasesCancel => {
                app.cases_form = None;
                app.message = Some("planning the case matrix goes on: c shows it".into());
                Some(Vec::new())
            }
            Action::CasesChar(_)
            | Action::CasesBackspace
            | Action::CasesClear
            | Action::CasesNextField
            | Action::CasesPrevField
            | Action::CasesSubmit => Some(Vec::new()),
            _ => None,
        };
    }
    match action {
        Action::CasesChar(c) => {
            form.error = None;
            if form.focus == CasesField::Name {
                form.name_edited = true;
            }
            form.text_mut(form.focus).push(*c);
        }
        Action::CasesBackspace => {
            form.error = None;
            if form.focus == CasesField::Name {
                form.name_edited = true;
            }
            form.text_mut(form.focus).pop();
        }
        Action::CasesClear => {
            form.error = None;
            if form.focus == CasesField::Name {
                form.name_edited = true;
            }
            form.text_mut(form.focus).clear();
        }
        Action::CasesNextField | Action::CasesPrevField => {
            let step = if matches!(action, Action::CasesNextField) {
                1
            } else {
                CasesField::ALL.len() - 1
            };
            let at = index(form.focus);
            form.focus = CasesField::ALL[(at + step) % CasesField::ALL.len()];
        }
        Action::CasesSubmit => return Some(submit(app)),
        Action::CasesCancel => {
            let result = form.from_result;
            app.cases_form = None;
            app.replay_view = Some(super::ReplayView {
                result,
                output: 0,
                scroll: 0,
            });
            app.message = Some("case matrix not planned: nothing was written".into());
        }
        _ => return None,
    }
    Some(Vec::new())
}

/// Enter on the form: the plan-and-run job, or the line to fix.
fn submit(app: &mut App) -> Vec<Effect> {
    let Some(form) = app.cases_form.as_mut() else {
        return Vec::new();
    };
    let name = form.text(CasesField::Name).trim().to_string();
    if let Err(e) = names::check("name", &name) {
        form.focus = CasesField::Name;
        form.error = Some(e);
        return Vec::new();
    }
    let Specs { axes, ties, untied } = match form.specs() {
        Ok(specs) => specs,
        Err((field, message)) => {
            form.focus = field;
            form.error = Some(message);
            return Vec::new();
        }
    };
    form.planning = true;
    form.error = None;
    let spec = CasesPlanSpec {
        name,
        auto_name: !form.name_edited,
        window: form.window.clone(),
        entry: form.entry.clone(),
        candidate: form.candidate.clone(),
        reference: form.reference.clone(),
        standard: form.standard,
        axes,
        ties,
        untied,
        vs: form.vs.clone(),
        python: form.python.clone(),
        captures: app
            .loaded
            .as_ref()
            .map(|l| l.session.roots.clone())
            .unwrap_or_default(),
    };
    vec![Effect::Spawn(JobSpec::PlanCases(Box::new(spec)))]
}

/// `r` (`rerun` false: the cases without a result) or `R` (the selected case again).
pub(super) fn run(app: &mut App, rerun: bool) -> Vec<Effect> {
    let Some(board) = app.cases_board.as_mut() else {
        return Vec::new();
    };
    if board.run.is_some() {
        app.message = Some("the matrix is running (x cancels it)".into());
        return Vec::new();
    }
    let only = if rerun {
        let Some(case) = board.selected_case() else {
            return Vec::new();
        };
        vec![board.snapshot.plan.cases[case].id.clone()]
    } else {
        let missing: Vec<String> = board
            .snapshot
            .analysis
            .cases
            .iter()
            .filter(|c| {
                c.outcome == CaseOutcome::MissingEvidence && !board.filed.contains_key(&c.id)
            })
            .map(|c| c.id.clone())
            .collect();
        if missing.is_empty() {
            app.message = Some(
                "every case has a result: R runs the selected one again (a new attempt)".into(),
            );
            return Vec::new();
        }
        missing
    };
    board.error = None;
    board.run = Some(CasesRun {
        cases: only.clone(),
        running: None,
        index: 0,
        total: only.len(),
        elapsed_ms: 0,
        log: Vec::new(),
        cancelling: false,
    });
    if rerun {
        board.filed.remove(&only[0]);
    }
    vec![Effect::Spawn(JobSpec::RunCases(CasesRunSpec {
        dir: board.snapshot.dir.clone(),
        rerun,
        only,
        python: board.python.clone(),
    }))]
}

/// `x`: cancel the run (once).
pub(super) fn cancel(app: &mut App) -> Vec<Effect> {
    let Some(run) = app.cases_board.as_mut().and_then(|b| b.run.as_mut()) else {
        app.message = Some("no case matrix is running".into());
        return Vec::new();
    };
    if run.cancelling {
        return Vec::new();
    }
    run.cancelling = true;
    app.message = Some("cancelling the case matrix run…".into());
    vec![Effect::Cancel(Slot::Cases)]
}

/// Arrow keys on the board: the cursor moves within the grid.
pub(super) fn step(app: &mut App, rows: i64, columns: i64) {
    let Some(board) = app.cases_board.as_mut() else {
        return;
    };
    let grid = grid(&board.snapshot.plan);
    let (r, c) = board.cursor;
    let r = (r as i64 + rows).clamp(0, grid.len() as i64 - 1) as usize;
    let width = grid[r].cells.len() as i64;
    let c = (c as i64 + columns).clamp(0, width - 1) as usize;
    board.cursor = (r, c);
}

/// Enter on the board: the selected case's metrics.
pub(super) fn open_case(app: &mut App) {
    if let Some(board) = app.cases_board.as_mut()
        && let Some(case) = board.selected_case()
    {
        board.case_view = Some(CaseView {
            case,
            output: 0,
            scroll: 0,
        });
    }
}

/// Up/Down in a case's popup: its previous / next output.
pub(super) fn step_output(app: &mut App, delta: i64) {
    let Some(board) = app.cases_board.as_mut() else {
        return;
    };
    let Some(view) = board.case_view.as_mut() else {
        return;
    };
    let outputs = board
        .snapshot
        .replays
        .get(view.case)
        .and_then(Option::as_ref)
        .map_or(0, |r| r.outputs.len());
    if outputs > 0 {
        let next = (view.output as i64 + delta).clamp(0, outputs as i64 - 1) as usize;
        if next != view.output {
            view.output = next;
            view.scroll = 0;
        }
    }
}

/// PgUp/PgDn in a case's popup, as far as the last frame allowed.
pub(super) fn scroll_case(app: &mut App, delta: i64) {
    let max = app.overlay_scroll_max.min(i64::MAX as usize) as i64;
    if let Some(view) = app.cases_board.as_mut().and_then(|b| b.case_view.as_mut()) {
        view.scroll = (view.scroll as i64).saturating_add(delta).clamp(0, max) as usize;
    }
}

/// An event of the case-matrix job; a run that ended without its result (cancelled,
/// failed) has the matrix read again, so the board shows what was filed.
pub(super) fn on_event(app: &mut App, event: JobEvent) -> Vec<Effect> {
    match event {
        JobEvent::Progress(JobProgress::Cases { elapsed_ms, event }) => {
            on_progress(app, elapsed_ms, event)
        }
        JobEvent::Progress(_) => {}
        JobEvent::Done(JobOutput::Cases(snapshot)) => {
            app.cases_form = None;
            let board = board_for(app, *snapshot);
            let refreshed = std::mem::take(&mut board.refreshing);
            board.run = None;
            board.filed.clear();
            if !refreshed {
                app.message = Some(summary(board));
            }
        }
        JobEvent::Done(_) => {}
        JobEvent::Failed(error) => {
            if let Some(form) = app.cases_form.as_mut().filter(|f| f.planning) {
                form.planning = false;
                if let Some(field) = field_of(&error) {
                    form.focus = field;
                }
                form.error = Some(error);
                return Vec::new();
            }
            match app.cases_board.as_mut() {
                Some(board) if board.refreshing => {
                    board.refreshing = false;
                    board.error = Some(error);
                }
                Some(board) => {
                    board.run = None;
                    board.error = Some(error.clone());
                    app.message = Some(format!("the case matrix run failed: {error}"));
                    return refresh(board);
                }
                None => app.message = Some(format!("the case matrix was not planned: {error}")),
            }
        }
        JobEvent::Cancelled => {
            if let Some(form) = app.cases_form.as_mut() {
                form.planning = false;
            }
            if let Some(board) = app.cases_board.as_mut() {
                board.run = None;
                app.message = Some(format!(
                    "case matrix {} cancelled: {} case(s) filed before; r runs the rest",
                    board.name(),
                    board.filed.len()
                ));
                return refresh(board);
            }
        }
    }
    Vec::new()
}

/// Has the board's matrix read again (what other runs filed, what a cancelled one left).
fn refresh(board: &mut CasesBoard) -> Vec<Effect> {
    board.refreshing = true;
    vec![Effect::Spawn(JobSpec::ReadCases {
        dir: board.snapshot.dir.clone(),
    })]
}

fn on_progress(app: &mut App, elapsed_ms: u64, event: CaseEvent) {
    if let CaseEvent::Planned(snapshot) = event {
        // The form's work is done: the board takes over, with every case queued.
        let python = app.cases_form.as_ref().and_then(|f| f.python.clone());
        let board = board_for(app, *snapshot);
        board.open = true;
        board.filed.clear();
        board.python = python.or(board.python.take());
        // A new matrix: its run runs every case.
        let cases: Vec<String> = board
            .snapshot
            .plan
            .ids()
            .into_iter()
            .map(String::from)
            .collect();
        board.run = Some(CasesRun {
            total: cases.len(),
            cases,
            running: None,
            index: 0,
            elapsed_ms,
            log: Vec::new(),
            cancelling: false,
        });
        app.cases_form = None;
        return;
    }
    let Some(run) = app.cases_board.as_mut().and_then(|b| b.run.as_mut()) else {
        return;
    };
    run.elapsed_ms = elapsed_ms;
    match event {
        CaseEvent::Planned(_) | CaseEvent::Tick => {}
        CaseEvent::Started { id, index, total } => {
            run.running = Some(id);
            run.index = index;
            run.total = total;
        }
        CaseEvent::Filed { id, outcome } => {
            if run.running.as_deref() == Some(id.as_str()) {
                run.running = None;
            }
            if let Some(board) = app.cases_board.as_mut() {
                board.filed.insert(id, outcome);
            }
        }
        CaseEvent::Log(line) => {
            run.log.push(line);
            if run.log.len() > LOG_LINES {
                run.log.remove(0);
            }
        }
    }
}

/// The board for `snapshot`: the open one when it shows that matrix (its cursor kept), else
/// a new one.
fn board_for(app: &mut App, snapshot: MatrixSnapshot) -> &mut CasesBoard {
    let same = app
        .cases_board
        .as_ref()
        .is_some_and(|b| b.snapshot.dir == snapshot.dir);
    if same {
        let board = app.cases_board.as_mut().expect("checked");
        board.snapshot = snapshot;
        if let Some(view) = board.case_view
            && view.case >= board.snapshot.plan.cases.len()
        {
            board.case_view = None;
        }
        return board;
    }
    let (rank, side) = app
        .cases_form
        .as_ref()
        .map_or((snapshot.plan.rank, Side::A), |f| (f.rank, f.side));
    app.cases_board.insert(CasesBoard {
        rank,
        side,
        snapshot,
        filed: HashMap::new(),
        python: None,
        run: None,
        cursor: (0, 0),
        error: None,
        case_view: None,
        open: true,
        refreshing: false,
    })
}

/// `case matrix NAME: 3 pass, 2 numerical mismatch · the failures follow dtype=bfloat16`.
fn summary(board: &CasesBoard) -> String {
    let a = &board.snapshot.analysis;
    let mut parts: Vec<String> = Vec::new();
    for outcome in CaseOutcome::ALL {
        let n = a.cases.iter().filter(|c| c.outcome == outcome).count();
        if n > 0 {
            parts.push(format!("{n} {outcome}"));
        }
    }
    let mut text = format!("case matrix {}: {}", a.name, parts.join(", "));
    // What the failures follow, in a few words (the board says it in full): one axis for
    // all of them, else each kind's own.
    let failing = ["failure", "numerical mismatch", "crash"];
    for f in a
        .follows
        .iter()
        .filter(|f| failing.contains(&f.outcome.as_str()))
    {
        let (Some(axis), Some(value)) = (&f.axis, &f.value) else {
            continue;
        };
        let axis = match &f.target {
            Some(t)
                if axis == "layout" || axis.starts_with("dtype") || axis.starts_with("shape") =>
            {
                format!("{axis}[{t}]")
            }
            _ => axis.clone(),
        };
        text.push_str(&format!(" · {} follows {axis}={value}", f.outcome));
        if f.outcome == "failure" {
            break;
        }
    }
    text
}
