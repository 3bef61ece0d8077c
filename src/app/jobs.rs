//! What the app knows of background work: descriptions of jobs to start ([`JobSpec`]) and
//! the typed events they report back ([`JobUpdate`]). Running them, cancelling them and
//! dropping stale results is the runtime's part (`crate::runtime::jobs`); nothing here holds a
//! thread, a file or a process.

use std::path::PathBuf;

use crate::model::analysis::compare::Tolerances;
use crate::model::cases::CaseOutcome;
use crate::model::cases::create::WindowOnDisk;
use crate::model::cases::plan::VsCheck;
use crate::model::cases::snapshot::MatrixSnapshot;
use crate::model::dump::InputSetEntry;
use crate::model::ingest::{AttemptChoice, Progress};
use crate::model::replay::{ReplayResult, Standard};
use crate::model::tensor::pairing::FileComparison;

use super::Session;
use super::session::Side;

/// A job's identity, unique within one runtime (assigned there, from 1 up, in spawn order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub u64);

/// Where a job runs: at most one job per slot is current. Starting a job in a slot cancels
/// the one before it, whose later events are then dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Slot {
    /// `t`: comparing one stage's saved tensors.
    Compare,
    /// `e`: writing the first-mismatch report.
    Export,
    /// `p`: re-running one operator on its captured input set (replay_op.py, a child
    /// process here or on the capture's remote host).
    Replay,
    /// Loading the captures, first or again (watch mode in the next issues).
    Reload,
    /// `c` (from a replay's result): planning a case matrix on that input set and running
    /// its cases (replay_op.py `--batch`, here or on the capture's remote host).
    Cases,
}

/// What to open: the input of a [`JobSpec::Load`] and of `crate::runtime::run`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// One or two captures on disk (each a manifest file or a directory).
    Files {
        /// Capture A.
        a: PathBuf,
        /// Capture B (diff mode), if any.
        b: Option<PathBuf>,
        /// Which attempt of each of A's windows to keep.
        attempt_a: AttemptChoice,
        /// Which attempt of each of B's windows to keep.
        attempt_b: AttemptChoice,
        /// `--ignore REGEX`: stages left out of both captures before the analysis, as the
        /// CLI's `--ignore` leaves them out (a note per window says what); `None`: none.
        ignore: Option<String>,
    },
    /// An embedded example pair, by name (`crate::embedded::example_pairs`).
    Example(String),
}

/// A job for the runtime to start ([`super::Effect::Spawn`]).
#[derive(Debug, Clone, PartialEq)]
pub enum JobSpec {
    /// Compare saved tensor files `a` and `b` (the reference) key by key; progress in
    /// elements ([`JobProgress::Elements`]), result [`JobOutput::Compared`].
    Compare {
        /// The rank of the compared stage.
        rank: u32,
        /// `stage#occurrence`.
        stage: String,
        /// A's saved tensor file, resolved inside its window directory.
        a: PathBuf,
        /// B's saved tensor file.
        b: PathBuf,
    },
    /// Write `markdown` to `target`: into a new file named after `name_hint` when `target`
    /// is a directory (or ends with `/`), else to `target` itself; never replacing a file.
    /// Result [`JobOutput::Exported`] (the path written); a failure names the path it tried
    /// and why.
    Export {
        /// The report.
        markdown: String,
        /// The session's title, sanitised into the file name.
        name_hint: String,
        /// Where, as typed in the export prompt (`~/` is the home directory).
        target: PathBuf,
    },
    /// Load the captures of `source` and diff them under `tolerances`; progress
    /// [`JobProgress::Load`], result [`JobOutput::Loaded`].
    Load {
        /// What to open.
        source: Source,
        /// The diff's tolerances (the workbench's `--rtol`, `--atol`, `--tol`).
        tolerances: Tolerances,
    },
    /// Replay one captured input set through a candidate and a reference and judge the
    /// outputs (what `dumpview replay` does); progress [`JobProgress::Replay`] (replay_op.py's
    /// log lines and the time so far), result [`JobOutput::Replayed`].
    Replay(ReplaySpec),
    /// Plan a case matrix on one input set and run its cases (what `dumpview cases plan`
    /// then `cases run` do); progress [`JobProgress::Cases`] (the matrix once planned, then
    /// each case as it starts and is filed), result [`JobOutput::Cases`].
    PlanCases(Box<CasesPlanSpec>),
    /// Run (again) the cases of a planned matrix; progress and result as `PlanCases`.
    RunCases(CasesRunSpec),
    /// Read a planned matrix again (after a cancel, or when its board is shown again):
    /// result [`JobOutput::Cases`].
    ReadCases {
        /// The matrix directory.
        dir: PathBuf,
    },
}

/// A matrix to plan ([`JobSpec::PlanCases`]): `dumpview cases plan NAME --from DUMP --stage
/// STAGE --candidate C --reference R --standard S --axis …`, then its cases run.
#[derive(Debug, Clone, PartialEq)]
pub struct CasesPlanSpec {
    /// NAME.
    pub name: String,
    /// NAME was the form's default: when it is taken, the first free `NAME.2`, `NAME.3`, …
    /// is used instead (a typed NAME that is taken is an error).
    pub auto_name: bool,
    /// The window holding the input set, on this machine (a remote capture's mirror copy,
    /// which the runtime maps back to its host for `cases run`).
    pub window: WindowOnDisk,
    /// The input set's manifest entry.
    pub entry: InputSetEntry,
    /// OP.
    pub candidate: String,
    /// REF.
    pub reference: String,
    /// The standard every case is judged by.
    pub standard: Standard,
    /// `--axis` specs.
    pub axes: Vec<String>,
    /// `--tie` specs.
    pub ties: Vec<String>,
    /// `--untie` specs.
    pub untied: Vec<String>,
    /// The other capture at the stage (diff mode), from the workbench's diff.
    pub vs: Option<VsCheck>,
    /// The Python (`None`: as `dumpview cases run` chooses).
    pub python: Option<String>,
    /// The open captures' roots ([`Session::roots`]): the cases directory may not lie inside
    /// one.
    pub captures: Vec<PathBuf>,
}

/// Cases of a planned matrix to run ([`JobSpec::RunCases`]), as `dumpview cases run`.
#[derive(Debug, Clone, PartialEq)]
pub struct CasesRunSpec {
    /// The matrix directory (`<cases dir>/NAME`).
    pub dir: PathBuf,
    /// `--rerun`: run recorded cases again (new attempts beside the old).
    pub rerun: bool,
    /// `--only`: these cases; empty: all.
    pub only: Vec<String>,
    /// The Python (`None`: as `dumpview cases run` chooses).
    pub python: Option<String>,
}

/// What a case-matrix job reports as it goes.
#[derive(Debug, Clone, PartialEq)]
pub enum CaseEvent {
    /// The matrix is planned (or opened): the board can show it before any case ran.
    Planned(Box<MatrixSnapshot>),
    /// A case started, `index` of `total` this run runs.
    Started {
        /// The case id.
        id: String,
        /// 1-based.
        index: usize,
        /// Cases this run runs.
        total: usize,
    },
    /// A case was filed as an attempt and judged.
    Filed {
        /// The case id.
        id: String,
        /// What it came to.
        outcome: CaseOutcome,
    },
    /// A line replay_op.py wrote that is not a case's progress.
    Log(String),
    /// Only the clock moved.
    Tick,
}

/// One replay for the runtime to run: `dumpview replay DUMP --stage STAGE --candidate C
/// --reference R --standard S [--python P]`, its outputs in a new directory of dumpview's
/// replay cache.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplaySpec {
    /// The window's rank (for the popup and the report; the window is `dump` itself).
    pub rank: u32,
    /// `stage#N`.
    pub stage: String,
    /// Which capture's input set.
    pub side: Side,
    /// The window directory holding the input set, on this machine: a remote capture's is
    /// its mirror's copy, which the runtime maps back to the remote host to run there.
    pub dump: PathBuf,
    /// The candidate operator (`module:function`, `file.py:function`, a torch op,
    /// `builtin:NAME`).
    pub candidate: String,
    /// The reference, in the same forms.
    pub reference: String,
    /// The standard the outputs are judged by.
    pub standard: Standard,
    /// The Python interpreter; `None`: `$DUMPVIEW_PYTHON`, else the first Python on `PATH`
    /// that imports torch (`python3` on a remote host).
    pub python: Option<String>,
}

impl JobSpec {
    /// The slot this job runs in.
    pub fn slot(&self) -> Slot {
        match self {
            JobSpec::Compare { .. } => Slot::Compare,
            JobSpec::Export { .. } => Slot::Export,
            JobSpec::Load { .. } => Slot::Reload,
            JobSpec::Replay(_) => Slot::Replay,
            JobSpec::PlanCases(_) | JobSpec::RunCases(_) | JobSpec::ReadCases { .. } => Slot::Cases,
        }
    }
}

/// How far a job has come.
#[derive(Debug, Clone, PartialEq)]
pub enum JobProgress {
    /// Tensor elements compared so far, of `total` (0: not known yet).
    Elements {
        /// Compared so far.
        done: u64,
        /// In all; 0 until both headers are read.
        total: u64,
    },
    /// Files, bytes and records read so far while loading.
    Load(Progress),
    /// The job started a child process (its pid, also its process group id).
    Child {
        /// The child's pid.
        pid: u32,
    },
    /// A replay is running: `line` is the next line replay_op.py wrote to stderr, or `None`
    /// for a tick that only moves the clock (sent about every [`REPLAY_TICK_MS`]).
    Replay {
        /// Milliseconds since the replay started.
        elapsed_ms: u64,
        /// A log line, as written (without its newline).
        line: Option<String>,
    },
    /// A case matrix is being planned or run.
    Cases {
        /// Milliseconds since the job started.
        elapsed_ms: u64,
        /// What happened.
        event: CaseEvent,
    },
}

/// How often a running replay reports its elapsed time when it logs nothing, milliseconds.
pub const REPLAY_TICK_MS: u64 = 500;

/// What a job produced.
#[derive(Debug, Clone)]
pub enum JobOutput {
    /// Every key pair of the two tensor files.
    Compared(FileComparison),
    /// The path the report was written to, as shown to the user.
    Exported(String),
    /// The opened captures.
    Loaded(Box<Session>),
    /// A replay, judged, and how it ran.
    Replayed(Box<ReplayResult>),
    /// A case matrix after its run, read back whole.
    Cases(Box<MatrixSnapshot>),
}

/// One event of one job, in the order the job sent them: any number of `Progress`, then
/// exactly one of the other three.
#[derive(Debug, Clone)]
pub enum JobEvent {
    /// Still running.
    Progress(JobProgress),
    /// Finished with its result (also when a cancel came too late to stop it).
    Done(JobOutput),
    /// Stopped with an error, said for the user (a job's panic included).
    Failed(String),
    /// Stopped because it was cancelled.
    Cancelled,
}

impl JobEvent {
    /// True for the last event of a job (`Done`, `Failed`, `Cancelled`).
    pub fn is_final(&self) -> bool {
        !matches!(self, JobEvent::Progress(_))
    }
}

/// A [`JobEvent`] with the job it belongs to: what [`super::Action::Job`] carries.
#[derive(Debug, Clone)]
pub struct JobUpdate {
    /// The job.
    pub id: JobId,
    /// Its slot.
    pub slot: Slot,
    /// What happened.
    pub event: JobEvent,
}
