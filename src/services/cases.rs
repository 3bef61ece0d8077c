//! Running a case matrix ([`run`], `dumpview cases run`): replay_op.py `--batch` (embedded in
//! the binary) runs the planned cases in one Python process per job, so torch is imported
//! once per job, and each case's output directory is filed as a new attempt of that case
//! (`model::cases::store`) and judged as soon as it is done.
//!
//! - On this machine the batch reads the matrix's baseline copy (`NAME/baseline/`); the
//!   interpreter is `--python`, else `$DUMPVIEW_PYTHON`, else the first `python3` or `python`
//!   on `PATH` that imports torch (as `dumpview replay` chooses it). Each job's Python is the
//!   leader of its own process group: a cancel kills the group, and on Linux the kernel kills
//!   it if dumpview dies.
//! - For a dump on another host (`ssh://…`, `host:path`) the batch runs there, on the dump
//!   itself, as a replay does (`remote::RemoteHost::run`: the script on stdin, the outputs in
//!   one `mktemp -d` directory removed on every way out); the plan goes as an argument, and
//!   each case's files come back when the job ends.
//!
//! A case whose candidate kills the batch's process (a segfaulting kernel, `os._exit`) is
//! filed as that case's crash (`python::recover_crash` completes the partial record
//! replay_op.py wrote before the side), and the batch starts again in a fresh Python on the
//! cases it had not started, so one dying case does not lose the rest of the matrix; a
//! reference that dies leaves that case without a judgement (missing evidence, "the
//! reference died"). A case interrupted by a cancel or by dumpview's own death is filed as an
//! incomplete attempt: missing evidence, never a result. Job-friendly: progress as [`RunEvent`]s through a
//! callback, a cancel predicate polled every 50 ms.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use super::python::{self, Ending, Python, PythonError, SCRIPT, ScriptLog, StdoutUse};
use crate::model::cases::names;
use crate::model::cases::store::{AttemptInfo, JudgedAttempt, Matrix};
use crate::remote;

pub use super::python::PYTHON_ENV;

/// How often the cancel predicate is asked.
const POLL: Duration = Duration::from_millis(50);
/// What the errors of a batch call it.
const BATCH: &str = "replay_op.py --batch";

/// One run of a matrix.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The matrix (opened: its plan checked).
    pub matrix: Matrix,
    /// `--only`: these cases; empty: every planned case.
    pub only: Vec<String>,
    /// `--jobs`: Python processes run at once (at least 1; never more than cases).
    pub jobs: usize,
    /// `--rerun`: run recorded cases again (a new attempt beside the old).
    pub rerun: bool,
    /// The Python (on the remote host for a remote dump).
    pub python: Option<String>,
    /// The candidate's device (replay_op.py `--device`).
    pub device: Option<String>,
}

/// What a run reports as it goes.
#[derive(Debug)]
pub enum RunEvent<'a> {
    /// A case the run leaves alone: it has a finished attempt and `--rerun` was not given.
    Skipped(&'a str),
    /// A case started (`index` of `total`, counted over every job).
    Started {
        /// The case id.
        id: &'a str,
        /// 1-based.
        index: usize,
        /// Cases this run runs.
        total: usize,
    },
    /// A case's outputs were filed as an attempt (complete or not) and judged.
    Filed {
        /// The case id.
        id: &'a str,
        /// The attempt.
        attempt: &'a JudgedAttempt,
    },
    /// A line replay_op.py wrote that is not a case's progress.
    Log(&'a str),
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunReport {
    /// The cases run, in plan order.
    pub ran: Vec<String>,
    /// The cases left alone (recorded, no `--rerun`).
    pub skipped: Vec<String>,
    /// `(case, attempt, complete)` of every attempt filed, stale ones of a killed run
    /// included.
    pub filed: Vec<(String, u32, bool)>,
    /// The host it ran on, `None` here.
    pub host: Option<String>,
    /// The Python that ran the batch.
    pub python: String,
    /// Wall time, seconds.
    pub wall_s: f64,
}

/// Why a run ended without its report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CasesError {
    /// A usage or input problem (exit status 2): an unknown case, no Python with torch,
    /// replay_op.py's refusal (its message).
    #[error("{0}")]
    Input(String),
    /// It was cancelled; the Python (or the remote side) is gone. What had finished is filed.
    #[error("the run was cancelled ({filed} case(s) filed before)")]
    Cancelled {
        /// Attempts filed before the cancel.
        filed: usize,
    },
    /// Something else failed: replay_op.py died, the connection broke.
    #[error("{0}")]
    Failed(String),
}

/// Runs `request`, calling `on_event` as cases start and are filed; `cancelled` is asked
/// every 50 ms. For a remote dump, `ssh` says how to reach the host.
///
/// # Errors
/// [`CasesError::Input`] for what the user must change, `Cancelled`, `Failed`. Cases that
/// finished before an error are filed all the same.
pub fn run(
    request: &RunRequest,
    ssh: Option<&remote::SshOptions>,
    on_event: &mut dyn FnMut(RunEvent),
    cancelled: &dyn Fn() -> bool,
) -> Result<RunReport, CasesError> {
    let started = Instant::now();
    let matrix = &request.matrix;
    let plan = &matrix.plan;
    let mut report = RunReport {
        ran: Vec::new(),
        skipped: Vec::new(),
        filed: Vec::new(),
        host: None,
        python: String::new(),
        wall_s: 0.0,
    };
    for id in &request.only {
        names::check("case id", id).map_err(CasesError::Input)?;
        if plan.case(id).is_none() {
            return Err(CasesError::Input(format!(
                "--only {id}: no such case in {} (its cases: {})",
                matrix.plan_path().display(),
                plan.ids().join(", ")
            )));
        }
    }
    // One run of a matrix at a time (the workbench's and a `cases run` in another shell would
    // file the same cases twice and take each other's running case for an interrupted one).
    let _lock = RunLock::take(matrix).map_err(CasesError::Input)?;
    sweep_stale(matrix, &mut report, on_event);
    for case in &plan.cases {
        if !request.only.is_empty() && !request.only.contains(&case.id) {
            continue;
        }
        if !request.rerun && matrix.is_recorded(&case.id) {
            on_event(RunEvent::Skipped(&case.id));
            report.skipped.push(case.id.clone());
        } else {
            report.ran.push(case.id.clone());
        }
    }
    if report.ran.is_empty() {
        report.wall_s = started.elapsed().as_secs_f64();
        return Ok(report);
    }
    let place = remote::parse_source(&plan.dump).map_err(|e| CasesError::Input(e.to_string()))?;
    let python = match (&place, &request.python) {
        (remote::SourceSpec::Local(_), given) => python::local_python(given.as_deref())?,
        (remote::SourceSpec::Remote(_), Some(p)) => Python {
            program: p.clone(),
            chosen_by: "--python, on the remote host".into(),
        },
        (remote::SourceSpec::Remote(_), None) => Python {
            program: "python3".into(),
            chosen_by: "the remote host's python3 (--python chooses)".into(),
        },
    };
    report.python = python.program.clone();
    let staging = matrix.staging().map_err(CasesError::Failed)?;
    let jobs = request.jobs.clamp(1, report.ran.len());
    let mut groups: Vec<Vec<String>> = vec![Vec::new(); jobs];
    for (i, id) in report.ran.iter().enumerate() {
        groups[i % jobs].push(id.clone());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = channel::<Message>();
    let mut threads = Vec::new();
    let remote_host = match &place {
        remote::SourceSpec::Remote(spec) => {
            let defaults;
            let options = match ssh {
                Some(o) => o,
                None => {
                    defaults = remote::SshOptions::new(None, false, None, None, None)
                        .map_err(CasesError::Input)?;
                    &defaults
                }
            };
            let host = remote::RemoteHost::connect(spec, options)
                .map_err(|e| CasesError::Input(e.to_string()))?;
            report.host = Some(host.authority().to_string());
            Some((spec.clone(), Arc::new(host)))
        }
        remote::SourceSpec::Local(_) => None,
    };
    for group in groups {
        let mut words: Vec<String> = Vec::new();
        if let Some(device) = &request.device {
            words.extend(["--device".into(), device.clone()]);
        }
        let tx = tx.clone();
        let stop = Arc::clone(&stop);
        let python = python.clone();
        match &remote_host {
            None => {
                let mut args = vec![
                    matrix.baseline_dir().display().to_string(),
                    "--batch".into(),
                    matrix.plan_path().display().to_string(),
                    "--out-root".into(),
                    staging.display().to_string(),
                ];
                args.extend(words);
                let staging = staging.clone();
                threads.push(std::thread::spawn(move || {
                    let outcome = run_local(&python, &args, group, &staging, &tx, &stop);
                    let _ = tx.send(Message::Ended { outcome });
                }));
            }
            Some((spec, host)) => {
                let plan_json =
                    serde_json::to_string(plan).map_err(|e| CasesError::Failed(e.to_string()))?;
                let mut args = vec![
                    remote::Word::Literal("-".into()),
                    remote::Word::Literal(if spec.path.is_empty() {
                        ".".into()
                    } else {
                        spec.path.clone()
                    }),
                    remote::Word::Literal("--batch".into()),
                    remote::Word::Literal(plan_json),
                    remote::Word::Literal("--out-root".into()),
                    remote::Word::InTemp("out".into()),
                    remote::Word::Literal("--rank".into()),
                    remote::Word::Literal(plan.rank.to_string()),
                    remote::Word::Literal("--window".into()),
                    remote::Word::Literal(plan.window.clone()),
                ];
                args.extend(words.into_iter().map(remote::Word::Literal));
                let host = Arc::clone(host);
                let staging = staging.clone();
                threads.push(std::thread::spawn(move || {
                    let outcome =
                        run_remote(&host, &python.program, &args, group, &staging, &tx, &stop);
                    let _ = tx.send(Message::Ended { outcome });
                }));
            }
        }
    }
    drop(tx);
    let total = report.ran.len();
    let mut index = 0;
    let mut failures: Vec<CasesError> = Vec::new();
    let mut was_cancelled = false;
    loop {
        match rx.recv_timeout(POLL) {
            Ok(Message::Line { line, .. }) => match progress(&line) {
                Some(CaseMark::Start(id)) if report.ran.iter().any(|r| r == id) => {
                    index += 1;
                    on_event(RunEvent::Started { id, index, total });
                }
                Some(CaseMark::Done(id))
                    if remote_host.is_none() && report.ran.iter().any(|r| r == id) =>
                {
                    file(
                        matrix,
                        &staging.join(id),
                        id,
                        local_info(&python.program),
                        &mut report,
                        on_event,
                    );
                }
                _ => on_event(RunEvent::Log(&line)),
            },
            Ok(Message::Died { id }) => {
                if remote_host.is_none() && report.ran.contains(&id) {
                    file(
                        matrix,
                        &staging.join(&id),
                        &id,
                        local_info(&python.program),
                        &mut report,
                        on_event,
                    );
                }
            }
            Ok(Message::Ended { outcome }) => {
                if let Err(e) = outcome {
                    failures.push(e);
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if !was_cancelled && cancelled() {
            was_cancelled = true;
            stop.store(true, Ordering::SeqCst);
        }
    }
    for thread in threads {
        let _ = thread.join();
    }
    // What is left: a remote run's cases, and the cases a process left unfinished.
    let info = match &report.host {
        Some(host) => AttemptInfo {
            host: Some(host.clone()),
            python: Some(python.program.clone()),
            ..AttemptInfo::default()
        },
        None => local_info(&python.program),
    };
    for id in report.ran.clone() {
        let dir = staging.join(&id);
        if dir.is_dir() {
            file(matrix, &dir, &id, info.clone(), &mut report, on_event);
        }
    }
    let _ = std::fs::remove_dir_all(&staging);
    report.wall_s = started.elapsed().as_secs_f64();
    if was_cancelled {
        return Err(CasesError::Cancelled {
            filed: report.filed.len(),
        });
    }
    if let Some(first) = failures.into_iter().next() {
        return Err(first);
    }
    Ok(report)
}

fn local_info(python: &str) -> AttemptInfo {
    AttemptInfo {
        python: Some(python.to_string()),
        ..AttemptInfo::default()
    }
}

/// Files one staged case directory as an attempt and reports it.
fn file(
    matrix: &Matrix,
    dir: &Path,
    id: &str,
    info: AttemptInfo,
    report: &mut RunReport,
    on_event: &mut dyn FnMut(RunEvent),
) {
    match matrix.file_run(id, dir, info) {
        Ok(attempt) => {
            report.filed.push((
                id.to_string(),
                attempt.attempt.number,
                attempt.attempt.complete,
            ));
            on_event(RunEvent::Filed {
                id,
                attempt: &attempt,
            });
        }
        Err(e) => on_event(RunEvent::Log(&format!("dumpview: case {id}: {e}"))),
    }
}

/// Files what runs that are gone (dumpview killed) left in their staging directories.
fn sweep_stale(matrix: &Matrix, report: &mut RunReport, on_event: &mut dyn FnMut(RunEvent)) {
    for (pid, dir) in matrix.stagings() {
        // SAFETY: kill with signal 0 only asks whether the process exists.
        let alive = pid == std::process::id() || unsafe { libc::kill(pid as i32, 0) } == 0;
        if alive {
            continue;
        }
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let id = entry.file_name().to_string_lossy().into_owned();
            if names::is_valid(&id) && matrix.plan.case(&id).is_some() && entry.path().is_dir() {
                let info = AttemptInfo {
                    python: Some(format!(
                        "a run of process {pid} that ended before filing it"
                    )),
                    ..AttemptInfo::default()
                };
                file(matrix, &entry.path(), &id, info, report, on_event);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// What a job thread sends.
enum Message {
    /// A line of replay_op.py's (or of dumpview's about the job).
    Line { line: String },
    /// The candidate of case `id` killed the batch; its crash record is written: file it.
    Died { id: String },
    /// The job is over.
    Ended { outcome: Result<(), CasesError> },
}

/// A case's start or end line in replay_op's `--batch` log (what `progress` parses).
enum CaseMark<'a> {
    Start(&'a str),
    Done(&'a str),
}

/// `replay_op: case 2/7 dtype=bfloat16: start` / `…: done (…)`.
fn progress(line: &str) -> Option<CaseMark<'_>> {
    let rest = line.strip_prefix("replay_op: case ")?;
    let (_, rest) = rest.split_once(' ')?;
    let (id, what) = rest.split_once(": ")?;
    if what == "start" {
        Some(CaseMark::Start(id))
    } else if what.starts_with("done") {
        Some(CaseMark::Done(id))
    } else {
        None
    }
}

impl From<PythonError> for CasesError {
    fn from(e: PythonError) -> CasesError {
        match e {
            PythonError::Input(m) => CasesError::Input(m),
            PythonError::Cancelled => CasesError::Cancelled { filed: 0 },
            PythonError::Failed(m) => CasesError::Failed(m),
        }
    }
}

/// The cases one batch process started and finished, read from its progress lines.
#[derive(Debug, Default)]
struct Seen {
    started: Vec<String>,
    done: Vec<String>,
}

impl Seen {
    fn line(&mut self, line: &str) {
        match progress(line) {
            Some(CaseMark::Start(id)) => self.started.push(id.to_string()),
            Some(CaseMark::Done(id)) => self.done.push(id.to_string()),
            None => {}
        }
    }

    /// The case that was running when the process ended.
    fn running(&self) -> Option<&str> {
        self.started
            .last()
            .filter(|id| !self.done.contains(id))
            .map(String::as_str)
    }
}

/// Where a job runs and reports.
#[derive(Clone, Copy)]
struct JobPlace<'a> {
    /// The run's staging directory (`CASE/` per case).
    staging: &'a Path,
    /// To the run's loop.
    tx: &'a Sender<Message>,
    /// The Python.
    program: &'a str,
    /// The remote host, `None` here.
    host: Option<&'a str>,
}

/// What a job does after one batch process ended.
enum Next {
    /// Every case of the job ran.
    Done,
    /// The process died in a case (filed as its crash); these cases were not started.
    Restart(Vec<String>),
}

/// After one batch process of a job ended (`ending`) having run cases of `left`: a process
/// that died in a case gets that case's crash record (`python::recover_crash`, in
/// `staging/CASE`) and, when it had started any case, a fresh process for the cases it had
/// not started; one that died before any case, or refused its input, is the job's error.
fn after_batch(
    job: &JobPlace,
    ending: Ending,
    said: &ScriptLog,
    seen: &Seen,
    left: &[String],
) -> Result<Next, CasesError> {
    let JobPlace {
        staging,
        tx,
        program,
        host,
    } = *job;
    if ending == Ending::Exited(0) {
        return Ok(Next::Done);
    }
    let send = |line: &str| {
        let _ = tx.send(Message::Line {
            line: line.to_string(),
        });
    };
    let mut died_in = None;
    if let Some(id) = seen.running() {
        let mut log = |line: &str| send(line);
        match python::recover_crash(
            &staging.join(id),
            ending,
            &said.after_last_log_line(),
            &mut log,
        ) {
            Ok(Some(_)) => {
                died_in = Some(id.to_string());
                let _ = tx.send(Message::Died { id: id.to_string() });
            }
            Ok(None) => {}
            Err(e) => send(&format!("dumpview: case {id}: {e}")),
        }
    }
    if seen.started.is_empty() {
        said.check(ending, BATCH, program, host)?;
        return Ok(Next::Done);
    }
    let rest: Vec<String> = left
        .iter()
        .filter(|id| !seen.started.contains(id))
        .cloned()
        .collect();
    let on = host.map(|h| format!(" on {h}")).unwrap_or_default();
    let in_case = died_in
        .or_else(|| seen.running().map(str::to_string))
        .map(|id| format!(" in case {id}"))
        .unwrap_or_default();
    if rest.is_empty() {
        send(&format!(
            "dumpview: {BATCH}{on} {}{in_case}, its last",
            ending.describe()
        ));
        return Ok(Next::Done);
    }
    send(&format!(
        "dumpview: {BATCH}{on} {}{in_case}; the {} case(s) it had not started run in a new Python",
        ending.describe(),
        rest.len()
    ));
    Ok(Next::Restart(rest))
}

/// `--only` words for `ids`.
fn only(ids: &[String]) -> Vec<String> {
    ids.iter()
        .flat_map(|id| ["--only".to_string(), id.clone()])
        .collect()
}

/// One local job: replay_op.py `--batch` on the cases `ids` (`args` the rest of its
/// command line), again on the ones left whenever a case kills the process.
fn run_local(
    python: &Python,
    args: &[String],
    ids: Vec<String>,
    staging: &Path,
    tx: &Sender<Message>,
    stop: &AtomicBool,
) -> Result<(), CasesError> {
    until_done(ids, |left| {
        let mut words = args.to_vec();
        words.extend(only(left));
        let mut said = ScriptLog::default();
        let mut seen = Seen::default();
        let ran = python::run_script(
            python,
            "cases",
            &words,
            StdoutUse::Log,
            &mut said,
            &mut |line| forward(&mut seen, tx, line),
            &|| stop.load(Ordering::SeqCst),
        )?;
        let place = JobPlace {
            staging,
            tx,
            program: &python.program,
            host: None,
        };
        after_batch(&place, ran.ending, &said, &seen, left)
    })
}

/// Runs `batch` on the cases `ids`, then again on the ones it left whenever a case killed
/// the process ([`Next::Restart`]), until a batch ends with every case done.
fn until_done(
    ids: Vec<String>,
    mut batch: impl FnMut(&[String]) -> Result<Next, CasesError>,
) -> Result<(), CasesError> {
    let mut left = ids;
    loop {
        match batch(&left)? {
            Next::Done => return Ok(()),
            Next::Restart(rest) => left = rest,
        }
    }
}

/// One line the batch printed: noted in `seen` and sent to the job's channel.
fn forward(seen: &mut Seen, tx: &Sender<Message>, line: &str) {
    seen.line(line);
    let _ = tx.send(Message::Line {
        line: line.to_string(),
    });
}

/// One remote job; each batch's files are written into `staging` (`CASE/FILE`), and a case
/// that kills the remote Python is handled as [`run_local`] does.
fn run_remote(
    host: &remote::RemoteHost,
    program: &str,
    args: &[remote::Word],
    ids: Vec<String>,
    staging: &Path,
    tx: &Sender<Message>,
    stop: &AtomicBool,
) -> Result<(), CasesError> {
    until_done(ids, |left| {
        let mut words = args.to_vec();
        words.extend(only(left).into_iter().map(remote::Word::Literal));
        let mut said = ScriptLog::default();
        let mut seen = Seen::default();
        let job = remote::Job {
            program,
            args: &words,
            env: &[("PYTHONDONTWRITEBYTECODE", "1"), ("PYTHONUNBUFFERED", "1")],
            stdin: SCRIPT,
            collect: "out",
        };
        let finished = host
            .run(
                &job,
                &mut |line| said.line(line, &mut |line| forward(&mut seen, tx, line)),
                &|| stop.load(Ordering::SeqCst),
            )
            .map_err(|e| match e {
                remote::ExecError::Cancelled => CasesError::Cancelled { filed: 0 },
                remote::ExecError::Remote(e) if !e.is_transient() => {
                    CasesError::Input(e.to_string())
                }
                other => CasesError::Failed(other.to_string()),
            })?;
        // The cases' files, whatever the status: a batch that stopped midway still finished
        // some.
        for (name, bytes) in &finished.files {
            let Some((id, file)) = name.split_once('/') else {
                continue;
            };
            if !names::is_valid(id) || !names::is_valid(file) {
                continue;
            }
            let dir = staging.join(id);
            let path = dir.join(file);
            std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::write(&path, bytes))
                .map_err(|e| {
                    CasesError::Failed(format!("{}: cannot write: {e}", path.display()))
                })?;
        }
        let place = JobPlace {
            staging,
            tx,
            program,
            host: Some(host.authority()),
        };
        after_batch(
            &place,
            Ending::from_shell(finished.status),
            &said,
            &seen,
            left,
        )
    })
}

/// A run's hold on its matrix: `NAME/.run.lock` holding the running process's pid, created
/// exclusively and removed when dropped. A lock whose process is gone (dumpview killed) is
/// taken over.
struct RunLock(std::path::PathBuf);

/// The lock file in a matrix directory.
const RUN_LOCK: &str = ".run.lock";

impl RunLock {
    fn take(matrix: &Matrix) -> Result<RunLock, String> {
        use std::io::Write;
        let path = matrix.dir.join(RUN_LOCK);
        for _ in 0..3 {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut file) => {
                    let _ = write!(file, "{}", std::process::id());
                    return Ok(RunLock(path));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let holder = std::fs::read_to_string(&path)
                        .ok()
                        .and_then(|t| t.trim().parse::<i32>().ok());
                    // SAFETY: kill with signal 0 only asks whether the process exists.
                    let alive = holder.is_some_and(|pid| unsafe { libc::kill(pid, 0) } == 0);
                    match holder {
                        Some(pid) if alive => {
                            return Err(format!(
                                "case matrix {} is being run by process {pid} ({}): one run at a time",
                                matrix.plan.name,
                                path.display()
                            ));
                        }
                        // A dead holder's lock, or one being written: taken over.
                        _ => {
                            std::thread::sleep(Duration::from_millis(20));
                            if holder.is_some() {
                                let _ = std::fs::remove_file(&path);
                            }
                        }
                    }
                }
                Err(e) => return Err(format!("{}: cannot create: {e}", path.display())),
            }
        }
        Err(format!("{}: cannot take the run lock", path.display()))
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_run_of_a_matrix_at_a_time_and_a_dead_run_s_lock_is_taken_over() {
        let root = tempfile::tempdir().unwrap();
        let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cases_board/demo");
        let dir = root.path().join("demo");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(demo.join("plan.json"), dir.join("plan.json")).unwrap();
        let matrix = Matrix::open(root.path(), "demo").unwrap();
        let held = RunLock::take(&matrix).unwrap();
        let refused = RunLock::take(&matrix).err().unwrap();
        assert_eq!(
            refused,
            format!(
                "case matrix demo is being run by process {} ({}): one run at a time",
                std::process::id(),
                dir.join(RUN_LOCK).display()
            )
        );
        drop(held);
        assert!(!dir.join(RUN_LOCK).exists());
        // A lock left by a process that is gone (pid far above pid_max).
        std::fs::write(dir.join(RUN_LOCK), "2147483000").unwrap();
        let taken = RunLock::take(&matrix).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join(RUN_LOCK)).unwrap(),
            std::process::id().to_string()
        );
        drop(taken);
    }

    #[test]
    fn progress_lines_are_read_and_others_are_not() {
        assert!(matches!(
            progress("replay_op: case 2/7 dtype=bfloat16: start"),
            Some(CaseMark::Start("dtype=bfloat16"))
        ));
        assert!(matches!(
            progress("replay_op: case 7/7 mode=compile: done (candidate ok in 3 ms)"),
            Some(CaseMark::Done("mode=compile"))
        ));
        assert!(progress("replay_op: note: x").is_none());
        assert!(progress("replay_op: case 1/1 x: starting").is_none());
    }
}
