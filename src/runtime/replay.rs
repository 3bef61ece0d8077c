//! Running a single-operator replay ([`run`]) and listing the input sets a dump holds
//! ([`list`]): `assets/replay_op.py` (embedded in the binary) runs where the dump lives, and
//! its outputs are judged here (`model::replay`).
//!
//! - On this machine: the interpreter is `--python`, else `$DUMPVIEW_PYTHON`, else the first
//!   `python3` or `python` on `PATH` that imports torch. The script is written into a private
//!   temporary directory (removed afterwards) and run as the leader of its own process group
//!   (a cancel kills the group; on Linux the kernel kills it if dumpview dies).
//! - On a remote host (`ssh://…`, `host:path`): `--python` names the remote interpreter
//!   (default `python3`); the script goes on its stdin and its outputs into one `mktemp -d`
//!   directory that the remote shell removes on exit, cancel and disconnect
//!   (`remote::RemoteHost::run`); the outputs come back over the same connection into the
//!   local output directory.
//!
//! - With the cargo feature `torch`, a `builtin:NAME` reference of a local dump is computed
//!   in-process (`crate::reference`, libtorch through tch): replay_op.py runs the candidate
//!   only (`--candidate-only`), and the reference, golden and native reference are computed
//!   here from the captured input set, saved as `<side>.safetensors` with their records in
//!   `inprocess.json`, and judged from memory. `--python-reference`
//!   ([`ReplayRequest::python_reference`]) and remote dumps keep the reference in Python.
//!
//! Job-friendly: owned inputs and results, progress as log lines through a callback, a
//! cancel as a predicate polled every 50 ms, nothing printed.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use crate::model::replay::load::{ReplayDir, VERDICT_FILE};
use crate::model::replay::{Execution, ReplayResult, Standard};
use crate::remote;

/// The replay script, as `dumpview` runs it.
pub const REPLAY_SCRIPT: &str = crate::embedded::REPLAY_SOURCE;

/// The environment variable naming the local Python when `--python` is not given.
pub const PYTHON_ENV: &str = "DUMPVIEW_PYTHON";

/// Log lines kept in [`Execution::log`].
const LOG_LINES: usize = 200;
/// How often the cancel predicate is asked.
const POLL: Duration = Duration::from_millis(50);

/// One replay to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayRequest {
    /// The dump as the user wrote it: a manifest, a window directory or a tree of them, on
    /// this machine or (`ssh://…`, `host:path`) another.
    pub dump: String,
    /// `stage#N` (`#N` may be left out when the stage was captured once).
    pub stage: String,
    /// The candidate operator (`module:function`, `file.py:function`, a dotted torch
    /// callable, `builtin:NAME`).
    pub candidate: String,
    /// The reference, in the same forms.
    pub reference: String,
    /// The standard to judge by.
    pub standard: Standard,
    /// The window's rank in a multi-rank dump.
    pub rank: Option<u32>,
    /// The window (label or match number) in a multi-window dump.
    pub window: Option<String>,
    /// The device to run on (replay_op.py's default: the captured one if available, else cpu).
    pub device: Option<String>,
    /// The Python interpreter (on the remote host for a remote dump).
    pub python: Option<String>,
    /// The local output directory; `None`: a new one under
    /// `$XDG_CACHE_HOME/dumpview/replays/`.
    pub out: Option<PathBuf>,
    /// `--arg NAME=VALUE` scalar overrides.
    pub args: Vec<String>,
    /// `--arg-map CAPTURED=PARAM` renames.
    pub arg_maps: Vec<String>,
    /// Compute a `builtin:` reference in replay_op.py even where this build could compute it
    /// in-process (feature `torch`); without the feature it always is.
    pub python_reference: bool,
}

/// A listing of the input sets a dump holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequest {
    /// The dump, as in [`ReplayRequest::dump`].
    pub dump: String,
    /// The window's rank.
    pub rank: Option<u32>,
    /// The window.
    pub window: Option<String>,
    /// The Python interpreter.
    pub python: Option<String>,
    /// JSON instead of text.
    pub json: bool,
}

/// Why a replay gave no judged result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// A usage or input problem (exit status 2): no Python with torch, a dump or stage
    /// replay_op.py refused (its message), an output directory that is not empty.
    #[error("{0}")]
    Input(String),
    /// It was cancelled; the child (or the remote side) is gone.
    #[error("the replay was cancelled")]
    Cancelled,
    /// Something else failed: replay_op.py died, the connection broke, an output unreadable.
    #[error("{0}")]
    Failed(String),
}

/// The interpreter and how it was chosen.
struct Python {
    program: String,
    chosen_by: String,
}

/// Runs `request` and judges its outputs. `log` receives each line replay_op.py writes to
/// stderr, as it comes; `cancelled` is asked every 50 ms. Writes the judgement as
/// `verdict.json` into the output directory. For a remote dump, `ssh` says how to reach the
/// host (default options when `None`).
///
/// # Errors
/// [`ReplayError::Input`] for what the user must change (exit 2), `Cancelled`, `Failed`.
pub fn run(
    request: &ReplayRequest,
    ssh: Option<&remote::SshOptions>,
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<ReplayResult, ReplayError> {
    let started = Instant::now();
    let place =
        remote::parse_source(&request.dump).map_err(|e| ReplayError::Input(e.to_string()))?;
    let (out, out_default) = match &request.out {
        Some(out) => (out.clone(), false),
        None => (default_out_dir(&request.stage)?, true),
    };
    check_out_dir(&out)?;
    let existed = out.exists();
    let (in_process, warning) = reference_in_process(request, &place);
    let warnings: Vec<String> = warning.into_iter().collect();
    let mut kept = Vec::new();
    let mut keep = |line: &str| {
        log(line);
        kept.push(line.to_string());
        if kept.len() > LOG_LINES {
            kept.remove(0);
        }
    };
    let outcome = match place {
        remote::SourceSpec::Local(_) => run_local(request, in_process, &out, &mut keep, cancelled),
        remote::SourceSpec::Remote(spec) => {
            run_remote(request, &spec, ssh, &out, &mut keep, cancelled)
        }
    };
    let (python, host) = match outcome {
        Ok(ran) => ran,
        Err(e) => {
            // An output directory this run made holds no evidence worth keeping.
            if !existed && !out.join("replay.json").exists() {
                let _ = std::fs::remove_dir_all(&out);
            }
            return Err(e);
        }
    };
    #[allow(unused_mut)] // assigned to only with feature torch
    let mut dir = ReplayDir::open(&out).map_err(ReplayError::Failed)?;
    #[cfg(feature = "torch")]
    if in_process {
        super::in_process::compute(&mut dir, &request.reference, &mut keep)
            .map_err(ReplayError::Failed)?;
    }
    let replay = dir.judge(request.standard).map_err(ReplayError::Input)?;
    let result = ReplayResult {
        replay,
        run: Execution {
            host,
            python: python.program,
            python_chosen_by: python.chosen_by,
            out_dir: out.display().to_string(),
            out_dir_default: out_default,
            wall_s: started.elapsed().as_secs_f64(),
            log: kept,
        },
        warnings,
    };
    let json =
        serde_json::to_string_pretty(&result).map_err(|e| ReplayError::Failed(e.to_string()))?;
    std::fs::write(out.join(VERDICT_FILE), json + "\n").map_err(|e| {
        ReplayError::Failed(format!(
            "{}: cannot write: {e}",
            out.join(VERDICT_FILE).display()
        ))
    })?;
    Ok(result)
}

/// Runs `replay_op.py DUMP --list [--json]` where the dump lives and returns what it
/// printed.
///
/// # Errors
/// As [`run`].
pub fn list(
    request: &ListRequest,
    ssh: Option<&remote::SshOptions>,
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<String, ReplayError> {
    let place =
        remote::parse_source(&request.dump).map_err(|e| ReplayError::Input(e.to_string()))?;
    let mut words: Vec<String> = vec!["--list".into()];
    if request.json {
        words.push("--json".into());
    }
    push_window(&mut words, request.rank, request.window.as_deref());
    let stdout = match place {
        remote::SourceSpec::Local(_) => {
            let python = local_python(request.python.as_deref())?;
            let mut args = vec![request.dump.clone()];
            args.extend(words);
            let ran = run_script(&python, &args, log, cancelled)?;
            exit_status(ran.status, &ran.stderr, &python.program, None)?;
            ran.stdout
        }
        remote::SourceSpec::Remote(spec) => {
            let host = connect(&spec, ssh)?;
            let program = request.python.clone().unwrap_or_else(|| "python3".into());
            // `python3 - ARGS`: the script is its stdin.
            let mut args = vec![
                remote::Word::Literal("-".into()),
                remote::Word::Literal(remote_dump(&spec)),
            ];
            args.extend(words.into_iter().map(remote::Word::Literal));
            let finished = run_job(&host, &program, &args, log, cancelled)?;
            exit_status(
                finished.0.status,
                &finished.1,
                &program,
                Some(host.authority()),
            )?;
            finished.0.stdout
        }
    };
    Ok(String::from_utf8_lossy(&stdout).into_owned())
}

fn push_window(words: &mut Vec<String>, rank: Option<u32>, window: Option<&str>) {
    if let Some(rank) = rank {
        words.extend(["--rank".into(), rank.to_string()]);
    }
    if let Some(window) = window {
        words.extend(["--window".into(), window.to_string()]);
    }
}

/// Whether this build computes `request`'s reference in-process: feature `torch`, a
/// `builtin:` reference it knows, a local dump, and no `--python-reference`. A remote dump
/// that would otherwise qualify comes with a warning saying where its reference ran instead.
#[cfg_attr(not(feature = "torch"), allow(unused_variables))]
fn reference_in_process(
    request: &ReplayRequest,
    place: &remote::SourceSpec,
) -> (bool, Option<String>) {
    #[cfg(feature = "torch")]
    {
        if request.python_reference || !crate::reference::is_builtin(&request.reference) {
            return (false, None);
        }
        if let remote::SourceSpec::Remote(spec) = place {
            let warning = format!(
                "the reference ran in replay_op.py on {}: this build computes built-in \
                 references in-process for local dumps only",
                spec.host
            );
            return (false, Some(warning));
        }
        (true, None)
    }
    #[cfg(not(feature = "torch"))]
    (false, None)
}

/// replay_op.py's arguments after DUMP, up to (not including) `--out`.
fn script_args(request: &ReplayRequest) -> Vec<String> {
    let mut words: Vec<String> = vec![
        "--stage".into(),
        request.stage.clone(),
        "--candidate".into(),
        request.candidate.clone(),
        "--reference".into(),
        request.reference.clone(),
    ];
    push_window(&mut words, request.rank, request.window.as_deref());
    if let Some(device) = &request.device {
        words.extend(["--device".into(), device.clone()]);
    }
    for arg in &request.args {
        words.extend(["--arg".into(), arg.clone()]);
    }
    for map in &request.arg_maps {
        words.extend(["--arg-map".into(), map.clone()]);
    }
    words
}

fn run_local(
    request: &ReplayRequest,
    candidate_only: bool,
    out: &Path,
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<(Python, Option<String>), ReplayError> {
    let python = local_python(request.python.as_deref())?;
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| ReplayError::Input(format!("{}: cannot create: {e}", parent.display())))?;
    }
    let mut args = vec![request.dump.clone()];
    args.extend(script_args(request));
    if candidate_only {
        args.push("--candidate-only".into());
    }
    args.extend(["--out".into(), out.display().to_string()]);
    let ran = run_script(&python, &args, log, cancelled)?;
    exit_status(ran.status, &ran.stderr, &python.program, None)?;
    Ok((python, None))
}

fn connect(
    spec: &remote::RemoteSpec,
    ssh: Option<&remote::SshOptions>,
) -> Result<remote::RemoteHost, ReplayError> {
    let defaults;
    let options = match ssh {
        Some(options) => options,
        None => {
            defaults = remote::SshOptions::new(None, false, None, None, None)
                .map_err(ReplayError::Input)?;
            &defaults
        }
    };
    remote::RemoteHost::connect(spec, options).map_err(|e| ReplayError::Input(e.to_string()))
}

/// The dump's path as the remote shell takes it (relative to the login's home).
fn remote_dump(spec: &remote::RemoteSpec) -> String {
    if spec.path.is_empty() {
        ".".into()
    } else {
        spec.path.clone()
    }
}

/// Runs the script remotely; returns what it left and its stderr.
fn run_job(
    host: &remote::RemoteHost,
    program: &str,
    args: &[remote::Word],
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<(remote::Finished, String), ReplayError> {
    let mut stderr = Vec::new();
    let job = remote::Job {
        program,
        args,
        env: &[("PYTHONDONTWRITEBYTECODE", "1"), ("PYTHONUNBUFFERED", "1")],
        stdin: REPLAY_SCRIPT,
        collect: "out",
    };
    let finished = host
        .run(
            &job,
            &mut |line| {
                log(line);
                stderr.push(line.to_string());
            },
            cancelled,
        )
        .map_err(|e| match e {
            remote::ExecError::Cancelled => ReplayError::Cancelled,
            remote::ExecError::Remote(e) if !e.is_transient() => ReplayError::Input(e.to_string()),
            other => ReplayError::Failed(other.to_string()),
        })?;
    Ok((finished, stderr.join("\n")))
}

fn run_remote(
    request: &ReplayRequest,
    spec: &remote::RemoteSpec,
    ssh: Option<&remote::SshOptions>,
    out: &Path,
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<(Python, Option<String>), ReplayError> {
    let host = connect(spec, ssh)?;
    let (program, chosen_by) = match &request.python {
        Some(p) => (p.clone(), "--python, on the remote host"),
        None => (
            "python3".to_string(),
            "the remote host's python3 (--python chooses)",
        ),
    };
    // `python3 - ARGS`: the script is its stdin.
    let mut args = vec![
        remote::Word::Literal("-".into()),
        remote::Word::Literal(remote_dump(spec)),
    ];
    args.extend(script_args(request).into_iter().map(remote::Word::Literal));
    args.extend([
        remote::Word::Literal("--out".into()),
        remote::Word::InTemp("out".into()),
    ]);
    let (finished, stderr) = run_job(&host, &program, &args, log, cancelled)?;
    exit_status(finished.status, &stderr, &program, Some(host.authority()))?;
    std::fs::create_dir_all(out)
        .map_err(|e| ReplayError::Input(format!("{}: cannot create: {e}", out.display())))?;
    for (name, bytes) in &finished.files {
        let path = out.join(name);
        std::fs::write(&path, bytes)
            .map_err(|e| ReplayError::Failed(format!("{}: cannot write: {e}", path.display())))?;
    }
    Ok((
        Python {
            program,
            chosen_by: chosen_by.to_string(),
        },
        Some(host.authority().to_string()),
    ))
}

/// Maps replay_op.py's exit status to the error the user sees.
fn exit_status(
    status: i32,
    stderr: &str,
    python: &str,
    host: Option<&str>,
) -> Result<(), ReplayError> {
    let on = host.map(|h| format!(" on {h}")).unwrap_or_default();
    let said = tail(stderr, 30);
    match status {
        0 => Ok(()),
        2 => Err(ReplayError::Input(said)),
        127 if host.is_some() => Err(ReplayError::Input(format!(
            "{python}: not found{on} (give the remote interpreter with --python): {said}"
        ))),
        _ if stderr.contains("No module named 'torch'") => Err(ReplayError::Input(format!(
            "{python}{on} cannot import torch (give a Python that has it with --python{}): {said}",
            if host.is_some() {
                ""
            } else {
                " or $DUMPVIEW_PYTHON"
            }
        ))),
        s if s > 128 => Err(ReplayError::Failed(format!(
            "replay_op.py{on} was killed by signal {}: {said}",
            s - 128
        ))),
        s => Err(ReplayError::Failed(format!(
            "replay_op.py{on} exited with status {s}: {said}"
        ))),
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The local interpreter: `given`, else `$DUMPVIEW_PYTHON`, else the first `python3` or
/// `python` on PATH that imports torch.
fn local_python(given: Option<&str>) -> Result<Python, ReplayError> {
    if let Some(program) = given {
        return Ok(Python {
            program: program.to_string(),
            chosen_by: "--python".into(),
        });
    }
    if let Some(program) = std::env::var(PYTHON_ENV).ok().filter(|p| !p.is_empty()) {
        return Ok(Python {
            program,
            chosen_by: format!("${PYTHON_ENV}"),
        });
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
                return Ok(Python {
                    program: candidate.display().to_string(),
                    chosen_by: "the first python3/python on PATH that imports torch".into(),
                });
            }
            tried.push(candidate.display().to_string());
        }
    }
    Err(ReplayError::Input(if tried.is_empty() {
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

/// `$XDG_CACHE_HOME/dumpview/replays/<UTC yyyymmdd-HHMMSS>-<stage>` (else under
/// `~/.cache`), with `-2`, `-3`, … when taken. Never inside the dump.
fn default_out_dir(stage: &str) -> Result<PathBuf, ReplayError> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base = absolute("XDG_CACHE_HOME")
        .or_else(|| absolute("HOME").map(|h| h.join(".cache")))
        .ok_or_else(|| {
            ReplayError::Input(
                "no directory for the replay's outputs: set XDG_CACHE_HOME or HOME, or give --out"
                    .into(),
            )
        })?
        .join("dumpview/replays");
    let name: String = stage
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    let stamp = utc_stamp(std::time::SystemTime::now());
    for n in 1..1000 {
        let dir = base.join(match n {
            1 => format!("{stamp}-{name}"),
            n => format!("{stamp}-{name}-{n}"),
        });
        if !dir.exists() {
            return Ok(dir);
        }
    }
    Err(ReplayError::Input(format!(
        "{}: no free name for the outputs; give --out",
        base.display()
    )))
}

/// `yyyymmdd-HHMMSS` in UTC.
fn utc_stamp(time: std::time::SystemTime) -> String {
    let secs = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The output directory must be new or empty: evidence is never overwritten.
fn check_out_dir(out: &Path) -> Result<(), ReplayError> {
    match std::fs::read_dir(out).map(|mut entries| entries.next().is_some()) {
        Ok(true) => Err(ReplayError::Input(format!(
            "{}: exists and is not empty (a replay never overwrites evidence; give a new --out)",
            out.display()
        ))),
        Ok(false) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) if out.is_file() => Err(ReplayError::Input(format!(
            "{}: is a file, not a directory ({e})",
            out.display()
        ))),
        Err(e) => Err(ReplayError::Input(format!("{}: {e}", out.display()))),
    }
}

/// A private directory holding the script for one local run, removed when dropped.
struct ScriptDir(PathBuf);

impl ScriptDir {
    fn new() -> Result<ScriptDir, ReplayError> {
        use std::os::unix::fs::DirBuilderExt;
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let base = std::env::temp_dir();
        for _ in 0..1000 {
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = base.join(format!("dumpview-replay-{}-{n}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(ScriptDir(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(ReplayError::Failed(format!(
                        "{}: cannot create: {e}",
                        dir.display()
                    )));
                }
            }
        }
        Err(ReplayError::Failed(format!(
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

/// What a local run of the script left.
struct Ran {
    status: i32,
    stdout: Vec<u8>,
    stderr: String,
}

/// Runs the embedded script with `python` and `args`, streaming stderr lines to `log`.
fn run_script(
    python: &Python,
    args: &[String],
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<Ran, ReplayError> {
    use std::os::unix::process::CommandExt;
    let dir = ScriptDir::new()?;
    let script = dir.0.join("replay_op.py");
    std::fs::write(&script, REPLAY_SCRIPT)
        .map_err(|e| ReplayError::Failed(format!("{}: cannot write: {e}", script.display())))?;
    let mut command = Command::new(&python.program);
    command
        .arg(&script)
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
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
        ReplayError::Input(match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "{}: not found ({}); give a Python that has torch with --python or ${PYTHON_ENV}",
                python.program, python.chosen_by
            ),
            _ => format!("cannot run {}: {e}", python.program),
        })
    })?;
    let pid = child.id() as i32;
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let (lines_tx, lines) = channel::<String>();
    let stderr = child.stderr.take().expect("piped stderr");
    let stderr_reader = std::thread::spawn(move || {
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
    let mut all = Vec::new();
    let mut was_cancelled = false;
    loop {
        match lines.recv_timeout(POLL) {
            Ok(line) => {
                log(&line);
                all.push(line);
            }
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if !was_cancelled && cancelled() {
            was_cancelled = true;
            // SAFETY: the group's leader is our unreaped child: the id is not reused.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
    // stderr closed: the script ended (or closed it); a child still running is waited for,
    // cancel still honoured.
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {
                if !was_cancelled && cancelled() {
                    was_cancelled = true;
                    // SAFETY: as above.
                    unsafe {
                        libc::kill(-pid, libc::SIGKILL);
                    }
                }
                std::thread::sleep(POLL);
            }
            Err(e) => return Err(ReplayError::Failed(format!("waiting for Python: {e}"))),
        }
    };
    // Anything the script left running in its group goes with it.
    // SAFETY: the leader is reaped, but the group id stays ours until every member is gone;
    // ESRCH when none is left.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
    let _ = stderr_reader.join();
    let stdout = reader.join().unwrap_or_default();
    if was_cancelled {
        return Err(ReplayError::Cancelled);
    }
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    Ok(Ran {
        status: code,
        stdout,
        stderr: all.join("\n"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_is_utc_civil_time() {
        let t = std::time::UNIX_EPOCH + Duration::from_secs(1_709_251_199); // 2024-02-29T23:59:59Z
        assert_eq!(utc_stamp(t), "20240229-235959");
        assert_eq!(utc_stamp(std::time::UNIX_EPOCH), "19700101-000000");
    }

    #[test]
    fn a_non_empty_output_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check_out_dir(dir.path()).is_ok());
        assert!(check_out_dir(&dir.path().join("new")).is_ok());
        std::fs::write(dir.path().join("x"), "").unwrap();
        let e = check_out_dir(dir.path()).unwrap_err();
        assert!(e.to_string().contains("never overwrites evidence"), "{e}");
    }

    #[test]
    fn exit_statuses_name_what_to_change() {
        assert_eq!(exit_status(0, "", "py", None), Ok(()));
        assert_eq!(
            exit_status(2, "replay_op.py: error: x.pt: truncated", "py", None),
            Err(ReplayError::Input(
                "replay_op.py: error: x.pt: truncated".into()
            ))
        );
        let e = exit_status(
            1,
            "ModuleNotFoundError: No module named 'torch'",
            "py",
            None,
        )
        .unwrap_err();
        assert!(
            matches!(&e, ReplayError::Input(m) if m.contains("cannot import torch")),
            "{e:?}"
        );
        let e = exit_status(127, "sh: python9: not found", "python9", Some("h")).unwrap_err();
        assert!(
            matches!(&e, ReplayError::Input(m) if m.contains("not found on h")),
            "{e:?}"
        );
        let e = exit_status(137, "", "py", None).unwrap_err();
        assert!(
            matches!(&e, ReplayError::Failed(m) if m.contains("signal 9")),
            "{e:?}"
        );
    }
}
