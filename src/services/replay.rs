//! Running a single-operator replay ([`run`]) and listing the input sets a dump holds
//! ([`list_here`] for a local dump, read without Python; [`list`] for a remote one):
//! `assets/replay_op.py` (embedded in the binary) runs where the dump lives, and its outputs
//! are judged here (`model::replay`).
//!
//! - On this machine: the interpreter and the way the script runs are `services::python`'s
//!   (`--python`, else `$DUMPVIEW_PYTHON`, else the interpreter the capture recorded,
//!   `run.executable`, when it is here, else `$VIRTUAL_ENV`'s python, else the first
//!   `python3` or `python` on `PATH` that imports torch; a private script directory; Python in its own process group, killed
//!   by a cancel and, on Linux, when dumpview dies).
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
//! A candidate (or reference) that kills the process (a segfaulting kernel, `os._exit`) is
//! that side's crash: replay_op.py's partial record is completed here
//! (`python::recover_crash`), the output directory kept, and the replay judged as any other
//! (docs/replay.md, "A process that dies").
//!
//! Job-friendly: owned inputs and results, progress as log lines through a callback, a
//! cancel as a predicate polled every 50 ms, nothing printed.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::python::{self, Ending, Python, PythonError, ScriptLog, StdoutUse};
use crate::model::replay::ended::PARTIAL_FILE;
use crate::model::replay::load::{ReplayDir, VERDICT_FILE};
use crate::model::replay::{Execution, ReplayResult, Standard};
use crate::remote;

pub use super::python::{PYTHON_ENV, SCRIPT as REPLAY_SCRIPT};

/// Log lines kept in [`Execution::log`].
const LOG_LINES: usize = 200;

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
    /// `--attempt N`: attempt N of a window re-run into one directory (default: the newest,
    /// finished or not; replay_op.py refuses a window without it).
    pub attempt: Option<u32>,
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
    /// Directories appended to the replay's import path (`--path DIR`, on the host that runs
    /// it): where a captured run's own modules live.
    pub import_path: Vec<String>,
}

pub use super::replay_list::ListRequest;

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

impl From<PythonError> for ReplayError {
    fn from(e: PythonError) -> ReplayError {
        match e {
            PythonError::Input(m) => ReplayError::Input(m),
            PythonError::Cancelled => ReplayError::Cancelled,
            PythonError::Failed(m) => ReplayError::Failed(m),
        }
    }
}

/// Files to place in a remote replay's private directory before replay_op.py reads them: the
/// window of an input set captured elsewhere (cross-feeding, `services::cross`). They are
/// written by the replay's own Python into `$d/in/<window>/` and removed with `$d`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// The window directory's name there (`match1-occ1`): DUMP becomes `$d/in/<window>`.
    pub window: String,
    /// Paths relative to the window (`manifest.json`, `inputs/<stage>#<N>.pt`) and their
    /// bytes.
    pub files: Vec<(String, Vec<u8>)>,
}

/// The Python that writes `upload`'s files under `sys.argv[1]` (DUMP, `$d/in/<window>`),
/// to run before replay_op.py in one process: base64 in the script text, which the remote
/// job sends as a here-document.
fn upload_prelude(upload: &Upload) -> String {
    let mut s =
        String::from("import base64 as _dv_b64, os as _dv_os, sys as _dv_sys\n_dv_files = [\n");
    for (path, bytes) in &upload.files {
        s.push_str(&format!("    ({path:?}, \"{}\"),\n", base64(bytes)));
    }
    s.push_str(
        "]\nfor _dv_rel, _dv_data in _dv_files:\n    \
         _dv_path = _dv_os.path.join(_dv_sys.argv[1], _dv_rel)\n    \
         _dv_os.makedirs(_dv_os.path.dirname(_dv_path), exist_ok=True)\n    \
         with open(_dv_path, \"wb\") as _dv_f:\n        \
         _dv_f.write(_dv_b64.b64decode(_dv_data))\n\
         del _dv_files, _dv_rel, _dv_data, _dv_path, _dv_f, _dv_b64, _dv_os, _dv_sys\n",
    );
    s
}

/// Standard base64 (RFC 4648, padded) of `bytes`, as Python's `base64.b64decode` reads it.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
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
    run_with_upload(request, None, ssh, log, cancelled)
}

/// [`run`], for a remote `request.dump` whose input set is `upload` (placed in the replay's
/// private directory on that host and read from there; `request.dump` then names only the
/// host). A local dump ignores `upload`.
///
/// # Errors
/// As [`run`].
pub fn run_with_upload(
    request: &ReplayRequest,
    upload: Option<&Upload>,
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
            run_remote(request, upload, &spec, ssh, &out, &mut keep, cancelled)
        }
    };
    let (python, host) = match outcome {
        Ok(ran) => ran,
        Err(e) => {
            if e == ReplayError::Cancelled {
                // The user stopped it: the marker of the side that was running is no
                // evidence, nor is an empty stdout file; what a side printed is kept.
                discard_markers(&out);
            }
            // An output directory this run made and left empty holds no evidence; anything
            // written into it is kept.
            if !existed && std::fs::read_dir(&out).is_ok_and(|mut d| d.next().is_none()) {
                let _ = std::fs::remove_dir(&out);
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
    let replay = dir.judge(request.standard).map_err(|e| {
        ReplayError::Input(format!("{e} (the outputs are kept in {})", out.display()))
    })?;
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

/// Removes `dir`'s partial record and its empty `<side>.stdout` files.
fn discard_markers(dir: &Path) {
    let _ = std::fs::remove_file(dir.join(PARTIAL_FILE));
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let empty = path.metadata().is_ok_and(|m| m.is_file() && m.len() == 0);
        if empty && path.extension().is_some_and(|e| e == "stdout") {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Lists the input sets of a local dump here, without Python (`services::replay_list`):
/// what replay_op.py's `--list` printed, and a 0-byte input-set file as lost evidence.
///
/// # Errors
/// [`ReplayError::Input`]: a remote dump (use [`list`]), no dump or manifest there, a rank,
/// window or attempt not there.
pub fn list_here(
    request: &ListRequest,
    log: &mut dyn FnMut(&str),
) -> Result<super::replay_list::Listing, ReplayError> {
    match remote::parse_source(&request.dump).map_err(|e| ReplayError::Input(e.to_string()))? {
        remote::SourceSpec::Local(_) => {
            super::replay_list::list_local(request, log).map_err(ReplayError::Input)
        }
        remote::SourceSpec::Remote(_) => Err(ReplayError::Input(format!(
            "{}: a remote dump is listed by replay_op.py where it lives",
            request.dump
        ))),
    }
}

/// What `replay_op.py DUMP --list [--json]` prints: run where a remote dump lives; a local
/// dump is read here ([`list_here`], whose lost input sets the CLI reports).
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
    push_window(
        &mut words,
        request.rank,
        request.window.as_deref(),
        request.attempt,
    );
    let stdout = match place {
        // Read here, without Python (`services::replay_list`), as replay_op.py prints it.
        remote::SourceSpec::Local(_) => {
            let listing =
                super::replay_list::list_local(request, log).map_err(ReplayError::Input)?;
            return Ok(match request.json {
                true => serde_json::to_string(&listing.document)
                    .map_err(|e| ReplayError::Failed(e.to_string()))?,
                false => crate::model::present::replay_list::render_list(&listing.document),
            });
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
            let (finished, said) = run_job(&host, &program, &args, REPLAY_SCRIPT, log, cancelled)?;
            said.check(
                Ending::from_shell(finished.status),
                "replay_op.py",
                &program,
                Some(host.authority()),
            )?;
            finished.stdout
        }
    };
    Ok(String::from_utf8_lossy(&stdout).into_owned())
}

fn push_window(
    words: &mut Vec<String>,
    rank: Option<u32>,
    window: Option<&str>,
    attempt: Option<u32>,
) {
    if let Some(rank) = rank {
        words.extend(["--rank".into(), rank.to_string()]);
    }
    if let Some(window) = window {
        words.extend(["--window".into(), window.to_string()]);
    }
    if let Some(attempt) = attempt {
        words.extend(["--attempt".into(), attempt.to_string()]);
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
    push_window(
        &mut words,
        request.rank,
        request.window.as_deref(),
        request.attempt,
    );
    if let Some(device) = &request.device {
        words.extend(["--device".into(), device.clone()]);
    }
    for arg in &request.args {
        words.extend(["--arg".into(), arg.clone()]);
    }
    for map in &request.arg_maps {
        words.extend(["--arg-map".into(), map.clone()]);
    }
    for dir in &request.import_path {
        words.extend(["--path".into(), dir.clone()]);
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
    // The interpreter the capture recorded: only an absolute path (a relative one depends on
    // a working directory this replay does not share).
    let chosen_before =
        request.python.is_some() || std::env::var(python::PYTHON_ENV).is_ok_and(|p| !p.is_empty());
    let recorded = (!chosen_before)
        .then(|| {
            super::replay_list::recorded_interpreter(
                &request.dump,
                request.rank,
                request.window.as_deref(),
                request.attempt,
                &request.stage,
            )
        })
        .flatten()
        .filter(|exe| {
            let absolute = Path::new(exe).is_absolute();
            if !absolute {
                log(&format!(
                    "dumpview: note: the capture recorded the interpreter {exe} (run.executable), \
                     relative to a working directory this replay does not share: not used \
                     (--python {exe} runs it)"
                ));
            }
            absolute
        });
    let python = python::replay_python(request.python.as_deref(), recorded.as_deref(), log)?;
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
    let mut said = ScriptLog::default();
    let ran = python::run_script(
        &python,
        "replay",
        &args,
        StdoutUse::Log,
        &mut said,
        log,
        cancelled,
    )?;
    ended(out, ran.ending, &said, &python.program, None, log)?;
    Ok((python, None))
}

/// How the replay's process ended, made an error or not: a process that died in a side gets
/// that side's crash record (then it is judged as any replay); otherwise
/// [`ScriptLog::check`].
fn ended(
    out: &Path,
    ending: Ending,
    said: &ScriptLog,
    program: &str,
    host: Option<&str>,
    log: &mut dyn FnMut(&str),
) -> Result<(), ReplayError> {
    if ending != Ending::Exited(0) {
        let recovered = python::recover_crash(out, ending, &said.after_last_log_line(), log)
            .map_err(ReplayError::Failed)?;
        if recovered.is_some() {
            return Ok(());
        }
    }
    Ok(said.check(ending, "replay_op.py", program, host)?)
}

pub(crate) fn connect(
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

/// Runs the script remotely; returns what it left and what it said on stderr.
fn run_job(
    host: &remote::RemoteHost,
    program: &str,
    args: &[remote::Word],
    stdin: &str,
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<(remote::Finished, ScriptLog), ReplayError> {
    run_job_with(host, program, args, stdin, false, log, cancelled)
}

/// [`run_job`]; `try_recorded`: replay_op.py may run again under the interpreter the capture
/// recorded (its `DUMPVIEW_TRY_RECORDED`), for a replay started without `--python`.
fn run_job_with(
    host: &remote::RemoteHost,
    program: &str,
    args: &[remote::Word],
    stdin: &str,
    try_recorded: bool,
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<(remote::Finished, ScriptLog), ReplayError> {
    let mut said = ScriptLog::default();
    let base = [("PYTHONDONTWRITEBYTECODE", "1"), ("PYTHONUNBUFFERED", "1")];
    let with_recorded = [base[0], base[1], ("DUMPVIEW_TRY_RECORDED", "1")];
    let job = remote::Job {
        program,
        args,
        env: if try_recorded { &with_recorded } else { &base },
        stdin,
        collect: "out",
    };
    let finished = host
        .run(&job, &mut |line| said.line(line, log), cancelled)
        .map_err(|e| match e {
            remote::ExecError::Cancelled => ReplayError::Cancelled,
            remote::ExecError::Remote(e) if !e.is_transient() => ReplayError::Input(e.to_string()),
            other => ReplayError::Failed(other.to_string()),
        })?;
    Ok((finished, said))
}

fn run_remote(
    request: &ReplayRequest,
    upload: Option<&Upload>,
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
            "the remote host's python3, or the interpreter the capture recorded where it is \
             there (--python chooses)",
        ),
    };
    // `python3 - ARGS`: the script is its stdin (after the upload's prelude, if any).
    let (dump, stdin) = match upload {
        None => (
            remote::Word::Literal(remote_dump(spec)),
            REPLAY_SCRIPT.to_string(),
        ),
        Some(upload) => (
            remote::Word::InTemp(format!("in/{}", upload.window)),
            upload_prelude(upload) + REPLAY_SCRIPT,
        ),
    };
    let mut args = vec![remote::Word::Literal("-".into()), dump];
    args.extend(script_args(request).into_iter().map(remote::Word::Literal));
    args.extend([
        remote::Word::Literal("--out".into()),
        remote::Word::InTemp("out".into()),
    ]);
    let try_recorded = request.python.is_none();
    let (finished, said) =
        run_job_with(&host, &program, &args, &stdin, try_recorded, log, cancelled)?;
    // The files first, whatever the status: a side that killed the process left evidence.
    if !finished.files.is_empty() {
        std::fs::create_dir_all(out)
            .map_err(|e| ReplayError::Input(format!("{}: cannot create: {e}", out.display())))?;
    }
    for (name, bytes) in &finished.files {
        let path = out.join(name);
        std::fs::write(&path, bytes)
            .map_err(|e| ReplayError::Failed(format!("{}: cannot write: {e}", path.display())))?;
    }
    ended(
        out,
        Ending::from_shell(finished.status),
        &said,
        &program,
        Some(host.authority()),
        log,
    )?;
    Ok((
        Python {
            program,
            chosen_by: chosen_by.to_string(),
        },
        Some(host.authority().to_string()),
    ))
}

/// `$XDG_CACHE_HOME/dumpview/replays/<UTC yyyymmdd-HHMMSS>-<stage>` (else under
/// `~/.cache`), with `-2`, `-3`, … when taken. Never inside the dump.
pub(crate) fn default_out_dir(stage: &str) -> Result<PathBuf, ReplayError> {
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
pub(crate) fn check_out_dir(out: &Path) -> Result<(), ReplayError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_is_utc_civil_time() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_709_251_199); // 2024-02-29T23:59:59Z
        assert_eq!(utc_stamp(t), "20240229-235959");
        assert_eq!(utc_stamp(std::time::UNIX_EPOCH), "19700101-000000");
    }

    #[test]
    fn base64_is_rfc_4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(&[0xff, 0xfe, 0x00, 0x80]), "//4AgA==");
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
}
