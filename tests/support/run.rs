//! Running the `dumpview` binary under test: one family of helpers every test file uses
//! instead of its own.
//!
//! - [`dumpview`] is the binary as an `assert_cmd` command, the builder for every variant
//!   (`.args`, `.env`, `.current_dir`, `.write_stdin`, then `.output()` or `.assert()`);
//!   [`dumpview_in_repo`] starts it in the repository (fixture paths relative to it);
//!   [`with_python`] is a `std::process::Command` with the test's Python and a private cache,
//!   for the replay and case-matrix tests that spawn it or bound it with
//!   [`super::deadline::OutputWithin`].
//! - [`output`], [`text`], [`stdout`], [`json`] and [`json_stdout`] run it on arguments alone
//!   and return the shape a test asserts on; [`ran`] and [`json_of`] turn an `Output` of a
//!   builder into the same shapes.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Output;

use serde_json::Value;

/// The binary cargo built for this test run.
pub const BIN: &str = env!("CARGO_BIN_EXE_dumpview");

/// `dumpview` with no arguments yet, the test's environment and working directory.
pub fn dumpview() -> assert_cmd::Command {
    assert_cmd::Command::new(BIN)
}

/// [`dumpview`] started in the repository, so that `tests/fixtures/...` resolves.
pub fn dumpview_in_repo() -> assert_cmd::Command {
    let mut command = dumpview();
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    command
}

/// `dumpview` as a `std::process::Command` (to spawn it, or to give it a deadline) with
/// `DUMPVIEW_PYTHON` the test's Python ([`super::python::python`], else `python3`),
/// `XDG_CACHE_HOME` `cache`, started in the repository.
pub fn with_python(cache: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(BIN);
    command
        .env("XDG_CACHE_HOME", cache)
        .env(
            "DUMPVIEW_PYTHON",
            super::python::python().unwrap_or("python3"),
        )
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    command
}

/// `dumpview ARGS` run to its end.
pub fn output<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    dumpview().args(args).output().unwrap()
}

/// A finished command: its exit status (-1 when a signal ended it), stdout and stderr.
pub struct Ran {
    /// The exit status.
    pub code: i32,
    /// All of stdout.
    pub stdout: String,
    /// All of stderr.
    pub stderr: String,
}

/// [`Ran`] of `out` (output read lossily as UTF-8).
pub fn ran(out: Output) -> Ran {
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// (exit status, stdout as JSON or `Value::Null` when it is not JSON, stderr) of `out`.
pub fn json_of(out: Output) -> (i32, Value, String) {
    let r = ran(out);
    (
        r.code,
        serde_json::from_str(&r.stdout).unwrap_or(Value::Null),
        r.stderr,
    )
}

/// `dumpview ARGS`: (exit status, stdout, stderr).
pub fn text<S>(args: &[S]) -> (i32, String, String)
where
    S: AsRef<OsStr>,
{
    let r = ran(output(args));
    (r.code, r.stdout, r.stderr)
}

/// `dumpview ARGS`: (exit status, stdout).
pub fn stdout<S>(args: &[S]) -> (i32, String)
where
    S: AsRef<OsStr>,
{
    let r = ran(output(args));
    (r.code, r.stdout)
}

/// `dumpview ARGS`: (exit status, stdout as JSON or `Value::Null`, stderr).
pub fn json<S>(args: &[S]) -> (i32, Value, String)
where
    S: AsRef<OsStr>,
{
    json_of(output(args))
}

/// `dumpview ARGS`: (exit status, stdout as JSON, stdout as text).
///
/// # Panics
/// When stdout is not JSON, with both streams.
pub fn json_stdout<S>(args: &[S]) -> (i32, Value, String)
where
    S: AsRef<OsStr> + std::fmt::Debug,
{
    let r = ran(output(args));
    let json = serde_json::from_str(&r.stdout).unwrap_or_else(|e| {
        panic!(
            "dumpview {args:?}: {e}\nstdout:\n{}\nstderr:\n{}",
            r.stdout, r.stderr
        )
    });
    (r.code, json, r.stdout)
}
