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
//! A case whose process ended before it wrote `replay.json` is filed as an incomplete attempt:
//! missing evidence, never a result. Job-friendly: progress as [`RunEvent`]s through a
//! callback, a cancel predicate polled every 50 ms.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use crate::embedded::REPLAY_SOURCE;
use crate::model::cases::names;
use crate::model::cases::store::{AttemptInfo, JudgedAttempt, Matrix};
use crate::remote;

/// The environment variable naming the local Python (as `dumpview replay` reads it).
pub const PYTHON_ENV: &str = "DUMPVIEW_PYTHON";
/// How often the cancel predicate is asked.
const POLL: Duration = Duration::from_millis(50);
/// Lines of a job's stderr kept for its error message.
const TAIL: usize = 30;

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
        (remote::SourceSpec::Local(_), given) => local_python(given.as_deref())?,
        (remote::SourceSpec::Remote(_), Some(p)) => p.clone(),
        (remote::SourceSpec::Remote(_), None) => "python3".into(),
    };
    report.python = python.clone();
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
    for (job, group) in groups.into_iter().enumerate() {
        let mut words: Vec<String> = Vec::new();
        for id in &group {
            words.extend(["--only".into(), id.clone()]);
        }
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
                threads.push(std::thread::spawn(move || {
                    let outcome = run_local(&python, &args, &tx, job, &stop);
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
                    let outcome = run_remote(&host, &python, &args, &staging, &tx, job, &stop);
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
                Some(Progress::Start(id)) if report.ran.iter().any(|r| r == id) => {
                    index += 1;
                    on_event(RunEvent::Started { id, index, total });
                }
                Some(Progress::Done(id))
                    if remote_host.is_none() && report.ran.iter().any(|r| r == id) =>
                {
                    file(
                        matrix,
                        &staging.join(id),
                        id,
                        local_info(&python),
                        &mut report,
                        on_event,
                    );
                }
                _ => on_event(RunEvent::Log(&line)),
            },
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
            python: Some(python.clone()),
            ..AttemptInfo::default()
        },
        None => local_info(&python),
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
    Line { line: String },
    Ended { outcome: Result<(), CasesError> },
}

enum Progress<'a> {
    Start(&'a str),
    Done(&'a str),
}

/// `replay_op: case 2/7 dtype=bfloat16: start` / `…: done (…)`.
fn progress(line: &str) -> Option<Progress<'_>> {
    let rest = line.strip_prefix("replay_op: case ")?;
    let (_, rest) = rest.split_once(' ')?;
    let (id, what) = rest.split_once(": ")?;
    if what == "start" {
        Some(Progress::Start(id))
    } else if what.starts_with("done") {
        Some(Progress::Done(id))
    } else {
        None
    }
}

/// Maps a batch's exit status to the error the user sees.
fn exit_status(
    status: i32,
    tail: &[String],
    python: &str,
    host: Option<&str>,
) -> Result<(), CasesError> {
    let on = host.map(|h| format!(" on {h}")).unwrap_or_default();
    let said = tail.join("\n");
    match status {
        0 => Ok(()),
        2 => Err(CasesError::Input(said)),
        127 if host.is_some() => Err(CasesError::Input(format!(
            "{python}: not found{on} (give the remote interpreter with --python): {said}"
        ))),
        _ if said.contains("No module named 'torch'") => Err(CasesError::Input(format!(
            "{python}{on} cannot import torch (give a Python that has it with --python): {said}"
        ))),
        s if s > 128 => Err(CasesError::Failed(format!(
            "replay_op.py --batch{on} was killed by signal {}: {said}",
            s - 128
        ))),
        s => Err(CasesError::Failed(format!(
            "replay_op.py --batch{on} exited with status {s}: {said}"
        ))),
    }
}

fn keep(tail: &mut Vec<String>, line: &str) {
    if !line.trim().is_empty() {
        tail.push(line.to_string());
        if tail.len() > TAIL {
            tail.remove(0);
        }
    }
}

/// One local job: the script in a private directory, Python in its own process group.
fn run_local(
    python: &str,
    args: &[String],
    tx: &Sender<Message>,
    _job: usize,
    stop: &AtomicBool,
) -> Result<(), CasesError> {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let dir = ScriptDir::new()?;
    let script = dir.0.join("replay_op.py");
    std::fs::write(&script, REPLAY_SOURCE)
        .map_err(|e| CasesError::Failed(format!("{}: cannot write: {e}", script.display())))?;
    let mut command = Command::new(python);
    command
        .arg(&script)
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id();
        // SAFETY: prctl and getppid are async-signal-safe; nothing else runs between fork
        // and exec.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() as u32 != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
    let mut child = command.spawn().map_err(|e| {
        CasesError::Input(match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "{python}: not found; give a Python that has torch with --python or ${PYTHON_ENV}"
            ),
            _ => format!("cannot run {python}: {e}"),
        })
    })?;
    let pid = child.id() as i32;
    let kill = || {
        // SAFETY: the group's leader is our child, unreaped until try_wait says so; after
        // that the group id stays ours until every member is gone (ESRCH then).
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    };
    let (lines_tx, lines) = channel::<String>();
    let stderr = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut line = Vec::new();
        while let Ok(1..) = reader.read_until(b'\n', &mut line) {
            let text = String::from_utf8_lossy(&line)
                .trim_end_matches(['\n', '\r'])
                .to_string();
            if lines_tx.send(text).is_err() {
                break;
            }
            line.clear();
        }
    });
    let mut tail = Vec::new();
    let mut killed = false;
    loop {
        match lines.recv_timeout(POLL) {
            Ok(line) => {
                keep(&mut tail, &line);
                let _ = tx.send(Message::Line { line });
            }
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if !killed && stop.load(Ordering::SeqCst) {
            killed = true;
            kill();
        }
    }
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {
                if !killed && stop.load(Ordering::SeqCst) {
                    killed = true;
                    kill();
                }
                std::thread::sleep(POLL);
            }
            Err(e) => return Err(CasesError::Failed(format!("waiting for Python: {e}"))),
        }
    };
    kill();
    let _ = reader.join();
    if killed {
        return Err(CasesError::Cancelled { filed: 0 });
    }
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    exit_status(code, &tail, python, None)
}

/// One remote job; its files are written into `staging` (`CASE/FILE`).
fn run_remote(
    host: &remote::RemoteHost,
    python: &str,
    args: &[remote::Word],
    staging: &Path,
    tx: &Sender<Message>,
    _job: usize,
    stop: &AtomicBool,
) -> Result<(), CasesError> {
    let mut tail = Vec::new();
    let job = remote::Job {
        program: python,
        args,
        env: &[("PYTHONDONTWRITEBYTECODE", "1"), ("PYTHONUNBUFFERED", "1")],
        stdin: REPLAY_SOURCE,
        collect: "out",
    };
    let finished = host
        .run(
            &job,
            &mut |line| {
                keep(&mut tail, line);
                let _ = tx.send(Message::Line {
                    line: line.to_string(),
                });
            },
            &|| stop.load(Ordering::SeqCst),
        )
        .map_err(|e| match e {
            remote::ExecError::Cancelled => CasesError::Cancelled { filed: 0 },
            remote::ExecError::Remote(e) if !e.is_transient() => CasesError::Input(e.to_string()),
            other => CasesError::Failed(other.to_string()),
        })?;
    // The cases' files, whatever the status: a batch that stopped midway still finished some.
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
            .map_err(|e| CasesError::Failed(format!("{}: cannot write: {e}", path.display())))?;
    }
    exit_status(finished.status, &tail, python, Some(host.authority()))
}

/// The local interpreter: `given`, else `$DUMPVIEW_PYTHON`, else the first `python3` or
/// `python` on PATH that imports torch.
fn local_python(given: Option<&str>) -> Result<String, CasesError> {
    if let Some(program) = given {
        return Ok(program.to_string());
    }
    if let Some(program) = std::env::var(PYTHON_ENV).ok().filter(|p| !p.is_empty()) {
        return Ok(program);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut tried = Vec::new();
    for dir in std::env::split_paths(&path) {
        for name in ["python3", "python"] {
            let candidate = dir.join(name);
            if !is_executable(&candidate) {
                continue;
            }
            let imports = Command::new(&candidate)
                .args(["-c", "import torch"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if imports {
                return Ok(candidate.display().to_string());
            }
            tried.push(candidate.display().to_string());
        }
    }
    Err(CasesError::Input(if tried.is_empty() {
        format!(
            "no python3 or python on PATH; give one that has torch with --python or ${PYTHON_ENV}"
        )
    } else {
        format!(
            "no Python on PATH imports torch (tried {}); give one that does with --python or ${PYTHON_ENV}",
            tried.join(", ")
        )
    }))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A private directory holding the script for one local job, removed when dropped.
struct ScriptDir(PathBuf);

impl ScriptDir {
    fn new() -> Result<ScriptDir, CasesError> {
        use std::os::unix::fs::DirBuilderExt;
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let base = std::env::temp_dir();
        for _ in 0..1000 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let dir = base.join(format!("dumpview-cases-{}-{n}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(ScriptDir(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(CasesError::Failed(format!(
                        "{}: cannot create: {e}",
                        dir.display()
                    )));
                }
            }
        }
        Err(CasesError::Failed(format!(
            "{}: no free name for the script's directory",
            base.display()
        )))
    }
}

impl Drop for ScriptDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_are_read_and_others_are_not() {
        assert!(matches!(
            progress("replay_op: case 2/7 dtype=bfloat16: start"),
            Some(Progress::Start("dtype=bfloat16"))
        ));
        assert!(matches!(
            progress("replay_op: case 7/7 mode=compile: done (candidate ok in 3 ms)"),
            Some(Progress::Done("mode=compile"))
        ));
        assert!(progress("replay_op: note: x").is_none());
        assert!(progress("replay_op: case 1/1 x: starting").is_none());
    }

    #[test]
    fn exit_statuses_name_what_to_change() {
        assert_eq!(exit_status(0, &[], "py", None), Ok(()));
        assert!(matches!(
            exit_status(2, &["replay_op.py: error: plan.json: truncated".into()], "py", None),
            Err(CasesError::Input(m)) if m.contains("truncated")
        ));
        assert!(matches!(
            exit_status(137, &[], "py", None),
            Err(CasesError::Failed(m)) if m.contains("signal 9")
        ));
    }
}
