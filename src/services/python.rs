//! The local Python that runs `assets/replay_op.py` (embedded in the binary), for a replay
//! (`services::replay`) and a case matrix's batch (`services::cases`), and what both make of
//! how it ended.
//!
//! - [`local_python`]: `--python`, else `$DUMPVIEW_PYTHON`, else `$VIRTUAL_ENV`'s python,
//!   else the first `python3` or `python` on `PATH` that imports torch; [`replay_python`]
//!   tries the interpreter the capture recorded (`run.executable`) before `$VIRTUAL_ENV`.
//! - [`run_script`]: the script written into a private directory (`$TMPDIR/dumpview-<kind>-
//!   <pid>-<n>`, mode 0700, removed afterwards; ones a killed dumpview left are swept at the
//!   next start, [`sweep_stale`]), Python run as the leader of its own session (a cancel
//!   kills its group; on Linux the kernel kills it when dumpview's thread dies), its stderr
//!   and stdout streamed as lines (`remote`'s line loop, which a remote job's ssh client
//!   runs through too).
//! - [`ScriptLog`]: what it said on stderr, forwarded to the caller's log as it comes except
//!   its final `replay_op.py: error:` line, which becomes the error itself (said once), and
//!   [`ScriptLog::check`], the one mapping of an exit status to the error the user sees.
//! - [`Ending`]: how the process ended, by signal name (`killed by SIGSEGV (signal 11)`);
//!   [`recover_crash`]: a replay directory whose process died in a side gets the crash
//!   record replay_op.py could not write (`model::replay::ended`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use crate::model::replay::ended::{PARTIAL_FILE, crash_record};
use crate::model::replay::load::RECORD_FILE;
use crate::remote;

/// The replay script, as dumpview runs it.
pub const SCRIPT: &str = crate::embedded::REPLAY_SOURCE;
/// The environment variable naming the local Python when `--python` is not given.
pub const PYTHON_ENV: &str = "DUMPVIEW_PYTHON";
/// Lines of stderr kept for an error message and a crash record.
const TAIL: usize = 30;
/// The prefix of replay_op.py's final error line (exit status 2).
const ERROR_PREFIX: &str = "replay_op.py: error: ";
/// The prefix of replay_op.py's own log lines.
const LOG_PREFIX: &str = "replay_op: ";

/// An interpreter and how it was chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Python {
    /// The program (a path, or a name looked up in `PATH`).
    pub program: String,
    /// `--python`, `$DUMPVIEW_PYTHON`, or the `PATH` rule, in words.
    pub chosen_by: String,
}

/// Why the script gave no usable run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PythonError {
    /// What the user must change (exit status 2): no Python with torch, replay_op.py's
    /// refusal (its message).
    #[error("{0}")]
    Input(String),
    /// It was cancelled; the process group is gone.
    #[error("cancelled")]
    Cancelled,
    /// Something else: the script could not be written, Python died outside a side.
    #[error("{0}")]
    Failed(String),
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this status.
    Exited(i32),
    /// A signal killed it (its number).
    Killed(i32),
}

impl Ending {
    /// From a local child's status.
    pub fn of(status: ExitStatus) -> Ending {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => Ending::Exited(code),
            (None, Some(signal)) => Ending::Killed(signal),
            (None, None) => Ending::Exited(-1),
        }
    }

    /// From a shell's `$?` (a remote job's status): 128 + N is signal N.
    pub fn from_shell(status: i32) -> Ending {
        match status {
            129..=192 => Ending::Killed(status - 128),
            s => Ending::Exited(s),
        }
    }

    /// `killed by SIGSEGV (signal 11)`, `exited with status 3`.
    pub fn describe(&self) -> String {
        match *self {
            Ending::Exited(code) => format!("exited with status {code}"),
            Ending::Killed(signal) => match signal_name(signal) {
                Some(name) => format!("killed by {name} (signal {signal})"),
                None => format!("killed by signal {signal}"),
            },
        }
    }
}

/// The name of signal `n` on this system (`SIGSEGV` for 11 on Linux); `None` for one this
/// table does not know.
pub fn signal_name(n: i32) -> Option<&'static str> {
    let names: [(i32, &str); 19] = [
        (libc::SIGHUP, "SIGHUP"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGTRAP, "SIGTRAP"),
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGPIPE, "SIGPIPE"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGXCPU, "SIGXCPU"),
        (libc::SIGXFSZ, "SIGXFSZ"),
        (libc::SIGSYS, "SIGSYS"),
        (libc::SIGVTALRM, "SIGVTALRM"),
    ];
    names.iter().find(|(k, _)| *k == n).map(|(_, name)| *name)
}

/// The local interpreter: `given`, else `$DUMPVIEW_PYTHON`, else `$VIRTUAL_ENV`'s python,
/// else the first `python3` or `python` on `PATH` that imports torch.
///
/// # Errors
/// [`PythonError::Input`] naming what was tried when none qualifies.
pub fn local_python(given: Option<&str>) -> Result<Python, PythonError> {
    find_python(given, None, &mut |_| {})
}

/// [`local_python`] for a replay of a capture whose manifest recorded the interpreter that
/// ran the model (`run.executable`): after `given` and `$DUMPVIEW_PYTHON`, that interpreter
/// when it exists and is executable here (said in `log`; one that is not here is said too,
/// and the search goes on), then `$VIRTUAL_ENV`'s python, then `PATH`.
///
/// # Errors
/// As [`local_python`].
pub fn replay_python(
    given: Option<&str>,
    recorded: Option<&str>,
    log: &mut dyn FnMut(&str),
) -> Result<Python, PythonError> {
    find_python(given, recorded, log)
}

fn find_python(
    given: Option<&str>,
    recorded: Option<&str>,
    log: &mut dyn FnMut(&str),
) -> Result<Python, PythonError> {
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
    if let Some(recorded) = recorded.filter(|r| !r.is_empty()) {
        if is_executable(Path::new(recorded)) {
            log(&format!(
                "dumpview: using the interpreter the capture recorded (run.executable): {recorded}"
            ));
            return Ok(Python {
                program: recorded.to_string(),
                chosen_by: "the interpreter the capture recorded (run.executable)".into(),
            });
        }
        log(&format!(
            "dumpview: note: the interpreter the capture recorded (run.executable), {recorded}, \
             is not an executable file here; looking further ($VIRTUAL_ENV, PATH)"
        ));
    }
    if let Some(venv) = std::env::var_os("VIRTUAL_ENV").filter(|v| !v.is_empty()) {
        let bin = Path::new(&venv).join("bin");
        if let Some(program) = ["python", "python3"]
            .iter()
            .map(|name| bin.join(name))
            .find(|p| is_executable(p))
        {
            return Ok(Python {
                program: program.display().to_string(),
                chosen_by: "$VIRTUAL_ENV".into(),
            });
        }
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
    Err(PythonError::Input(if tried.is_empty() {
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

/// What replay_op.py said on stderr (here or on a remote host), as [`ScriptLog::line`] was
/// handed it.
#[derive(Debug, Default, Clone)]
pub struct ScriptLog {
    /// The last [`TAIL`] non-blank lines.
    tail: Vec<String>,
    /// Its `replay_op.py: error:` lines, without the prefix: the message of an exit 2.
    errors: Vec<String>,
}

impl ScriptLog {
    /// Takes one stderr line: an error line is kept for the error (never shown twice), any
    /// other is handed to `log` and kept in the tail.
    pub fn line(&mut self, line: &str, log: &mut dyn FnMut(&str)) {
        if let Some(message) = line.strip_prefix(ERROR_PREFIX) {
            self.errors.push(message.to_string());
            return;
        }
        log(line);
        if !line.trim().is_empty() {
            self.tail.push(line.to_string());
            if self.tail.len() > TAIL {
                self.tail.remove(0);
            }
        }
    }

    /// What the process said after replay_op.py's last own log line (`replay_op: …`): on a
    /// fatal signal, Python's fault handler stack; empty when nothing followed.
    pub fn after_last_log_line(&self) -> String {
        let from = self
            .tail
            .iter()
            .rposition(|l| l.starts_with(LOG_PREFIX))
            .map_or(0, |i| i + 1);
        self.tail[from..].join("\n")
    }

    /// The error lines, else the tail: the message of a failed run.
    fn said(&self) -> String {
        if self.errors.is_empty() {
            self.tail.join("\n")
        } else {
            self.errors.join("\n")
        }
    }

    /// Maps how `what` (`replay_op.py`, `replay_op.py --batch`) run by `python` ended (on
    /// `host`, `None` here) to the error the user sees: exit 0 is `Ok`; exit 2 (and an
    /// interpreter without torch, or one not found remotely) is [`PythonError::Input`] with
    /// replay_op.py's message; anything else [`PythonError::Failed`] saying how it ended.
    ///
    /// # Errors
    /// As above.
    pub fn check(
        &self,
        ending: Ending,
        what: &str,
        python: &str,
        host: Option<&str>,
    ) -> Result<(), PythonError> {
        let on = host.map(|h| format!(" on {h}")).unwrap_or_default();
        let said = self.said();
        let torch = self
            .errors
            .iter()
            .find_map(|e| e.strip_prefix("cannot import torch: "))
            .map(|cause| cause.split(" (replay_op.py needs").next().unwrap_or(cause))
            .map(str::to_string)
            .or_else(|| {
                self.tail
                    .iter()
                    .any(|l| l.contains("No module named 'torch'"))
                    .then(|| "ModuleNotFoundError: No module named 'torch'".to_string())
            });
        let hint = if host.is_some() {
            "--python"
        } else {
            "--python or $DUMPVIEW_PYTHON"
        };
        match ending {
            Ending::Exited(0) => Ok(()),
            // Not a word on stderr: the interpreter never ran the script (a program that is
            // no Python, `/usr/bin/false`), or died before saying why.
            Ending::Exited(code) if said.trim().is_empty() && (code != 127 || host.is_none()) => {
                Err(PythonError::Failed(format!(
                    "{what}{on}: the interpreter {python} {} without output (is it a Python with \
                 torch? give one with {hint})",
                    ending.describe()
                )))
            }
            _ if torch.is_some() => Err(PythonError::Input(format!(
                "{python}{on} cannot import torch ({}); give a Python that has it with {hint}",
                torch.unwrap_or_default()
            ))),
            Ending::Exited(2) => Err(PythonError::Input(said)),
            Ending::Exited(127) if host.is_some() => Err(PythonError::Input(format!(
                "{python}: not found{on} (give the remote interpreter with --python): {said}"
            ))),
            other => Err(PythonError::Failed(format!(
                "{what}{on} {}: {said}",
                other.describe()
            ))),
        }
    }
}

/// What to do with the script's stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdoutUse {
    /// Keep it whole (`--list` prints there).
    Collect,
    /// Hand each line to the log as `stdout: LINE` (replay_op.py writes nothing there
    /// itself outside `--list`: what comes is an operator's or a module's print).
    Log,
}

/// What a local run of the script left.
#[derive(Debug)]
pub struct Ran {
    /// How Python ended.
    pub ending: Ending,
    /// Its stdout ([`StdoutUse::Collect`]; empty otherwise).
    pub stdout: Vec<u8>,
}

/// Runs the embedded script with `python` and `args` in a private directory (`kind` names
/// it: `replay`, `cases`), each stderr line through `script_log` into `log` as it comes (and
/// with [`StdoutUse::Log`], each stdout line as `stdout: LINE`); `cancelled` is asked every
/// 50 ms and kills Python's process group.
///
/// # Errors
/// [`PythonError::Cancelled`]; [`PythonError::Input`] when Python cannot be started (not
/// found); [`PythonError::Failed`] when the script cannot be written or Python not waited
/// for. How Python ended is [`Ran::ending`], for [`ScriptLog::check`].
pub fn run_script(
    python: &Python,
    kind: &str,
    args: &[String],
    stdout: StdoutUse,
    script_log: &mut ScriptLog,
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<Ran, PythonError> {
    let dir = ScriptDir::new(kind)?;
    let script = dir.0.join("replay_op.py");
    std::fs::write(&script, SCRIPT)
        .map_err(|e| PythonError::Failed(format!("{}: cannot write: {e}", script.display())))?;
    let mut command = Command::new(&python.program);
    command
        .arg(&script)
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = remote::spawn_with_parent_death(&mut command, libc::SIGKILL).map_err(|e| {
        PythonError::Input(match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "{}: not found ({}); give a Python that has torch with --python or ${PYTHON_ENV}",
                python.program, python.chosen_by
            ),
            _ => format!("cannot run {}: {e}", python.program),
        })
    })?;
    let out = child.stdout.take().expect("piped stdout");
    let err = child.stderr.take().expect("piped stderr");
    let mut streams: Vec<(remote::Stream, Box<dyn Read + Send>)> =
        vec![(remote::Stream::Stderr, Box::new(err))];
    let collector = match stdout {
        StdoutUse::Log => {
            streams.push((remote::Stream::Stdout, Box::new(out)));
            None
        }
        StdoutUse::Collect => {
            let mut out = out;
            Some(std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = out.read_to_end(&mut bytes);
                bytes
            }))
        }
    };
    let pumped = remote::pump(
        &mut child,
        streams,
        &mut |stream, line| match stream {
            remote::Stream::Stderr => script_log.line(line, log),
            remote::Stream::Stdout => log(&format!("stdout: {line}")),
        },
        cancelled,
    );
    let stdout = collector
        .map(|c| c.join().unwrap_or_default())
        .unwrap_or_default();
    if pumped.cancelled {
        return Err(PythonError::Cancelled);
    }
    let status = pumped
        .status
        .map_err(|e| PythonError::Failed(format!("waiting for Python: {e}")))?;
    Ok(Ran {
        ending: Ending::of(status),
        stdout,
    })
}

/// When `dir` (one replay's or one case's outputs) has no `replay.json` but the partial
/// record replay_op.py writes before each side, the process died in that side: writes the
/// crash record (`model::replay::ended::crash_record`, with `ending` and what the process
/// said last, `said`) as `replay.json`, removes the partial record it supersedes, and hands
/// `log` a line saying so and the lines the side printed (`<side>.stdout`). Returns the
/// side; `None` when there is nothing to recover (a finished replay, a process that died
/// before any side, or replay_op.py's own unhandled exception: status 1 and a traceback).
///
/// # Errors
/// A partial record that cannot be read or completed, or `replay.json` not written; the
/// message names the file.
pub fn recover_crash(
    dir: &Path,
    ending: Ending,
    said: &str,
    log: &mut dyn FnMut(&str),
) -> Result<Option<String>, String> {
    let partial = dir.join(PARTIAL_FILE);
    let record = dir.join(RECORD_FILE);
    if record.exists() || !partial.is_file() {
        return Ok(None);
    }
    // A side's exceptions (SystemExit too) are caught inside replay_op.py: status 1 with a
    // traceback is replay_op.py's own failure (a full disk while saving), not the side's.
    if ending == Ending::Exited(1) && said.contains("Traceback (most recent call last)") {
        return Ok(None);
    }
    let bytes =
        std::fs::read(&partial).map_err(|e| format!("{}: cannot read: {e}", partial.display()))?;
    let (side, text) = crash_record(&bytes, &ending.describe(), said)
        .map_err(|e| format!("{}: {e}", partial.display()))?;
    write_new(&record, text.as_bytes())?;
    let _ = std::fs::remove_file(&partial);
    log(&format!(
        "dumpview: replay_op.py {} while the {side} ran; recorded as the {side}'s crash in {}",
        ending.describe(),
        record.display()
    ));
    let printed = dir.join(format!("{side}.stdout"));
    if let Ok(text) = std::fs::read_to_string(&printed) {
        for line in text.lines().take(50) {
            log(&format!("{LOG_PREFIX}{side} stdout: {line}"));
        }
    }
    Ok(Some(side))
}

fn write_new(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

/// The kinds of script directory this module makes (and sweeps): `dumpview-<kind>-<pid>-<n>`.
const KINDS: [&str; 2] = ["replay", "cases"];

/// Removes the script directories under `base` whose process is gone (a dumpview killed
/// with SIGKILL removes nothing), of this user, any kind; returns what it removed. A
/// directory of a live process (this one included) is left alone.
pub fn sweep_stale(base: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = KINDS.iter().find_map(|kind| {
            name.strip_prefix(&format!("dumpview-{kind}-"))?
                .split('-')
                .next()?
                .parse::<i32>()
                .ok()
        }) else {
            continue;
        };
        let mine = entry
            .path()
            .symlink_metadata()
            .is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if mine && pid > 0 && !alive(pid) && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed.push(entry.path());
        }
    }
    removed
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only asks whether the process exists; EPERM: it does, not ours.
    unsafe { libc::kill(pid, 0) == 0 || *libc::__errno_location() == libc::EPERM }
}

/// A private directory holding the script for one local run, removed when dropped.
pub(crate) struct ScriptDir(PathBuf);

impl ScriptDir {
    /// `$TMPDIR/dumpview-<kind>-<pid>-<n>`, mode 0700 (a later dumpview removes it when this
    /// process died without doing so).
    pub(crate) fn new(kind: &str) -> Result<ScriptDir, PythonError> {
        use std::os::unix::fs::DirBuilderExt;
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        static SWEPT: std::sync::Once = std::sync::Once::new();
        let base = std::env::temp_dir();
        SWEPT.call_once(|| {
            sweep_stale(&base);
        });
        for _ in 0..1000 {
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = base.join(format!("dumpview-{kind}-{}-{n}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(ScriptDir(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(PythonError::Failed(format!(
                        "{}: cannot create: {e}",
                        dir.display()
                    )));
                }
            }
        }
        Err(PythonError::Failed(format!(
            "{}: no free name for the script's directory",
            base.display()
        )))
    }
}

impl ScriptDir {
    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.0
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

    fn log_of(lines: &[&str]) -> ScriptLog {
        let mut log = ScriptLog::default();
        for line in lines {
            log.line(line, &mut |_| {});
        }
        log
    }

    #[test]
    fn endings_name_the_signal() {
        assert_eq!(
            Ending::Killed(libc::SIGSEGV).describe(),
            "killed by SIGSEGV (signal 11)"
        );
        assert_eq!(Ending::Exited(3).describe(), "exited with status 3");
        assert_eq!(Ending::from_shell(139), Ending::Killed(11));
        assert_eq!(Ending::from_shell(2), Ending::Exited(2));
        assert_eq!(Ending::Killed(99).describe(), "killed by signal 99");
    }

    #[test]
    fn exit_statuses_name_what_to_change() {
        assert_eq!(
            log_of(&[]).check(Ending::Exited(0), "r", "py", None),
            Ok(())
        );
        assert_eq!(
            log_of(&["replay_op: note", "replay_op.py: error: x.pt: truncated"]).check(
                Ending::Exited(2),
                "r",
                "py",
                None
            ),
            Err(PythonError::Input("x.pt: truncated".into()))
        );
        let no_torch = log_of(&[
            "replay_op.py: error: cannot import torch: ModuleNotFoundError: No module named \
             'torch' (replay_op.py needs a Python with torch >= 2.1; this is py)",
        ]);
        assert_eq!(
            no_torch.check(Ending::Exited(2), "r", "py", None),
            Err(PythonError::Input(
                "py cannot import torch (ModuleNotFoundError: No module named 'torch'); give a \
                 Python that has it with --python or $DUMPVIEW_PYTHON"
                    .into()
            ))
        );
        let old = log_of(&["ModuleNotFoundError: No module named 'torch'"]);
        assert!(matches!(
            old.check(Ending::Exited(1), "r", "py", Some("h")),
            Err(PythonError::Input(m)) if m == "py on h cannot import torch (ModuleNotFoundError: No module named 'torch'); give a Python that has it with --python"
        ));
        let e = log_of(&["sh: python9: not found"]).check(
            Ending::Exited(127),
            "r",
            "python9",
            Some("h"),
        );
        assert!(
            matches!(&e, Err(PythonError::Input(m)) if m.contains("not found on h")),
            "{e:?}"
        );
        let e = log_of(&[]).check(Ending::Exited(1), "replay_op.py", "/usr/bin/false", None);
        assert_eq!(
            e,
            Err(PythonError::Failed(
                "replay_op.py: the interpreter /usr/bin/false exited with status 1 without \
                 output (is it a Python with torch? give one with --python or $DUMPVIEW_PYTHON)"
                    .into()
            ))
        );
        let e = log_of(&[]).check(Ending::Killed(9), "replay_op.py --batch", "py", None);
        assert!(
            matches!(&e, Err(PythonError::Failed(m)) if m.starts_with("replay_op.py --batch killed by SIGKILL (signal 9)")),
            "{e:?}"
        );
    }

    #[test]
    fn the_error_line_is_not_logged_and_the_fault_stack_is_what_followed_the_log() {
        let mut shown = Vec::new();
        let mut log = ScriptLog::default();
        for line in [
            "replay_op: m.json: x#1, 3 arguments",
            "Fatal Python error: Segmentation fault",
            "  File \"c.py\", line 5 in segv",
            "replay_op.py: error: never shown",
        ] {
            log.line(line, &mut |l| shown.push(l.to_string()));
        }
        assert_eq!(shown.len(), 3);
        assert_eq!(
            log.after_last_log_line(),
            "Fatal Python error: Segmentation fault\n  File \"c.py\", line 5 in segv"
        );
    }

    #[test]
    fn stale_script_directories_go_and_live_ones_stay() {
        let base = tempfile::tempdir().unwrap();
        let mut gone = Command::new("true").spawn().unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        let stale = base.path().join(format!("dumpview-replay-{dead}-0"));
        let live = base
            .path()
            .join(format!("dumpview-cases-{}-0", std::process::id()));
        let other = base.path().join(format!("dumpview-other-{dead}-0"));
        for dir in [&stale, &live, &other] {
            std::fs::create_dir(dir).unwrap();
            std::fs::write(dir.join("replay_op.py"), "x").unwrap();
        }
        assert_eq!(sweep_stale(base.path()), vec![stale.clone()]);
        assert!(!stale.exists() && live.is_dir() && other.is_dir());
    }

    #[test]
    fn a_partial_record_becomes_the_crash_of_its_side_once() {
        let dir = tempfile::tempdir().unwrap();
        let partial = r#"{"format": "dumpview.replay", "version": 1, "stage": "s", "occurrence": 1,
            "running": "candidate", "sides": {"candidate": {"spec": "m:f", "status": "running"}}}"#;
        std::fs::write(dir.path().join(PARTIAL_FILE), partial).unwrap();
        std::fs::write(dir.path().join("candidate.stdout"), "hello\n").unwrap();
        let mut said = Vec::new();
        let side = recover_crash(dir.path(), Ending::Killed(libc::SIGSEGV), "", &mut |l| {
            said.push(l.to_string())
        })
        .unwrap();
        assert_eq!(side.as_deref(), Some("candidate"));
        assert!(!dir.path().join(PARTIAL_FILE).exists());
        assert_eq!(said[1], "replay_op: candidate stdout: hello");
        let record: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join(RECORD_FILE)).unwrap()).unwrap();
        assert_eq!(record["sides"]["candidate"]["status"], "crash");
        assert_eq!(record["ended"]["how"], "killed by SIGSEGV (signal 11)");
        // replay_op.py's own exception is no side's crash.
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join(PARTIAL_FILE), partial).unwrap();
        let traceback = "Traceback (most recent call last):\nOSError: [Errno 28] No space left";
        assert_eq!(
            recover_crash(other.path(), Ending::Exited(1), traceback, &mut |_| {}),
            Ok(None)
        );
        assert!(!other.path().join(RECORD_FILE).exists());
        // A finished replay is left as it is.
        assert_eq!(
            recover_crash(dir.path(), Ending::Exited(3), "", &mut |_| {}),
            Ok(None)
        );
    }
}
