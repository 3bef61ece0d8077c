//! The workbench's case-matrix jobs ([`Slot::Cases`](crate::app::jobs::Slot::Cases)):
//! planning a matrix on a replayed input set and running its cases, through the same code as
//! `dumpview cases plan` (`model::cases::create`) and `cases run` (`services::cases::run`).
//!
//! Progress goes out as [`CaseEvent`]s: the matrix once planned (so the board shows every
//! case before one has run), each case as it starts and as it is filed with its outcome,
//! replay_op.py's other lines, and a tick about every [`REPLAY_TICK_MS`]. A cancel stops the
//! batch's Python (its process group, or the remote side); what was filed stays filed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::jobs::{JobContext, JobError, JobOutput, JobProgress};
use crate::app::jobs::{CaseEvent, CasesPlanSpec, CasesRunSpec, REPLAY_TICK_MS};
use crate::model::cases::create::{self, NewMatrix, cases_root};
use crate::model::cases::snapshot::MatrixSnapshot;
use crate::model::cases::{CaseOutcome, Matrix};
use crate::services::cases::{CasesError, RunEvent, RunRequest};

/// The first free NAME (`NAME`, `NAME.2`, …) under `root` when `auto` (the form's default
/// name); `name` itself otherwise (a taken one is then the plan's error).
fn free_name(root: &Path, name: &str, auto: bool) -> String {
    let taken = |n: &str| std::fs::read_dir(root.join(n)).is_ok_and(|mut e| e.next().is_some());
    if !auto || !taken(name) {
        return name.to_string();
    }
    (2..1000)
        .map(|k| format!("{name}.{k}"))
        .find(|n| !taken(n))
        .unwrap_or_else(|| name.to_string())
}

/// Plans the matrix of `spec`, reports it, then runs every case.
pub(super) fn plan_and_run(cx: &JobContext, spec: CasesPlanSpec) -> Result<JobOutput, JobError> {
    let started = Instant::now();
    let root = std::path::absolute(cases_root(None)).map_err(|e| e.to_string())?;
    let window_dir = spec.window.dir().to_path_buf();
    let (dump, ssh) = match crate::services::fetch::remote_of(&window_dir) {
        Some(place) => {
            let place = place.map_err(JobError::Failed)?;
            (place.source, Some(place.ssh))
        }
        None => {
            for capture in spec
                .captures
                .iter()
                .map(PathBuf::as_path)
                .chain([window_dir.as_path()])
            {
                create::refuse_inside(&root, capture)?;
            }
            // Canonical: `dumpB/../dumpA` would be how the plan names DUMP.
            let dir = window_dir
                .canonicalize()
                .or_else(|_| std::path::absolute(&window_dir))
                .map_err(|e| e.to_string())?;
            (dir.display().to_string(), None)
        }
    };
    let name = free_name(&root, &spec.name, spec.auto_name);
    let matrix = create::create(
        &root,
        &NewMatrix {
            name: &name,
            dump: &dump,
            window: &spec.window,
            entry: &spec.entry,
            candidate: &spec.candidate,
            reference: &spec.reference,
            standard: spec.standard,
            axes: &spec.axes,
            ties: &spec.ties,
            untied: &spec.untied,
            vs: spec.vs.clone(),
        },
        &mut |path| crate::services::fetch::ensure(path),
    )?;
    cx.progress(JobProgress::Cases {
        elapsed_ms: started.elapsed().as_millis() as u64,
        event: CaseEvent::Planned(Box::new(MatrixSnapshot::read(&matrix))),
    });
    run(cx, started, matrix, Vec::new(), false, spec.python, ssh)
}

/// Runs the cases `spec` names of a planned matrix.
pub(super) fn run_again(cx: &JobContext, spec: CasesRunSpec) -> Result<JobOutput, JobError> {
    let started = Instant::now();
    let (root, name) = split(&spec.dir)?;
    let matrix = Matrix::open(&root, &name)?;
    // A remote capture's baseline manifest lies in its mirror: the mirror knows the host.
    let source = PathBuf::from(&matrix.plan.baseline.source_manifest);
    let ssh = source
        .parent()
        .and_then(crate::services::fetch::remote_of)
        .and_then(Result::ok)
        .map(|place| place.ssh);
    run(cx, started, matrix, spec.only, spec.rerun, spec.python, ssh)
}

/// Reads a planned matrix whole.
pub(super) fn read(dir: &Path) -> Result<JobOutput, JobError> {
    let (root, name) = split(dir)?;
    let matrix = Matrix::open(&root, &name)?;
    Ok(JobOutput::Cases(Box::new(MatrixSnapshot::read(&matrix))))
}

fn split(dir: &Path) -> Result<(PathBuf, String), String> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| format!("{}: not a case matrix directory", dir.display()))?;
    let root = dir.parent().unwrap_or(Path::new(".")).to_path_buf();
    Ok((root, name))
}

fn run(
    cx: &JobContext,
    started: Instant,
    matrix: Matrix,
    only: Vec<String>,
    rerun: bool,
    python: Option<String>,
    ssh: Option<crate::remote::SshOptions>,
) -> Result<JobOutput, JobError> {
    let elapsed_ms = || started.elapsed().as_millis() as u64;
    let send = |event: CaseEvent| {
        cx.progress(JobProgress::Cases {
            elapsed_ms: elapsed_ms(),
            event,
        })
    };
    let request = RunRequest {
        matrix: matrix.clone(),
        only,
        // One Python at a time: torch's own threads already use the cores.
        jobs: 1,
        rerun,
        python,
        device: None,
    };
    let mut on_event = |event: RunEvent| match event {
        RunEvent::Skipped(_) => {}
        RunEvent::Started { id, index, total } => send(CaseEvent::Started {
            id: id.to_string(),
            index,
            total,
        }),
        RunEvent::Filed { id, attempt } => {
            let outcome = match &attempt.judged {
                Some(Ok(replay)) => CaseOutcome::of(replay.verdict),
                _ => CaseOutcome::MissingEvidence,
            };
            send(CaseEvent::Filed {
                id: id.to_string(),
                outcome,
            });
        }
        RunEvent::Log(line) => send(CaseEvent::Log(line.to_string())),
    };
    let last_tick = std::cell::Cell::new(0u64);
    let cancelled = || {
        let now = elapsed_ms();
        if now >= last_tick.get() + REPLAY_TICK_MS {
            last_tick.set(now);
            send(CaseEvent::Tick);
        }
        cx.is_cancelled()
    };
    match crate::services::cases::run(&request, ssh.as_ref(), &mut on_event, &cancelled) {
        Ok(_) => Ok(JobOutput::Cases(Box::new(MatrixSnapshot::read(&matrix)))),
        Err(CasesError::Cancelled { .. }) => Err(JobError::Cancelled),
        Err(e) => Err(JobError::Failed(e.to_string())),
    }
}
