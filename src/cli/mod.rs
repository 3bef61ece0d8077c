//! The command line: [`command`] (the top-level options, the workbench's, and the
//! subcommands), then one file per subcommand with its options (clap `Args`) and its `run`.
//! Each parses its inputs with `model`, starts what it needs through `services`, prints text
//! or `--json`, and returns an [`Conclusion`] that becomes the exit status. Only `workbench`
//! (also `demo`'s) and `watch` hand over to the runtime.

pub mod cases;
pub mod command;
pub mod completions;
pub mod demo;
pub mod diagnose;
pub mod diff;
pub mod inputs;
pub mod probe_install;
pub mod replay;
pub mod report;
pub mod scan;
pub mod summary;
pub mod tensors;
pub mod tree;
pub mod vary;
pub mod watch;
pub mod workbench;

use crate::services::sources::Sources;

/// What every subcommand is handed besides its own options.
pub struct Context {
    /// `--json`: print JSON instead of text.
    pub json: bool,
    /// `--attempt`, `--attempt-a`, `--attempt-b`.
    pub attempts: inputs::AttemptArgs,
    /// The captures' local paths (remote ones mirrored); its mirrors' ssh masters end when it
    /// is dropped.
    pub sources: Sources,
}

/// Ends every ssh master and removes the control directory, whatever still holds a mirror (a
/// watch's followers outlive `main`'s return): what the binary calls last.
pub fn shutdown() {
    crate::services::sources::shutdown();
}

/// What a command found; `main` maps it to the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conclusion {
    /// Exit 0: nothing suspicious.
    Clean,
    /// Exit 1: something was found (a non-finite record, a divergence, an identity mismatch).
    Found,
    /// Exit 130, as a shell reports Ctrl-C: the workbench was quit before its load finished, so
    /// no answer was given.
    Interrupted,
}

impl Conclusion {
    /// The process exit status: 0 clean, 1 found, 130 interrupted. Usage and input errors exit
    /// 2 in `main`.
    pub fn exit_code(self) -> u8 {
        match self {
            Conclusion::Clean => 0,
            Conclusion::Found => 1,
            Conclusion::Interrupted => 130,
        }
    }
}

/// An error a command reports to the user before exiting with status 2.
pub type CliError = Box<dyn std::error::Error + Send + Sync>;

/// A subcommand's `--json` document: its own fields, plus `warnings` (every load warning, each
/// with its `kind`), so every `--json` answer says what evidence it lacked.
#[derive(serde::Serialize)]
pub struct WithWarnings<'a, T: serde::Serialize> {
    /// The subcommand's answer; its fields sit at the document's top level.
    #[serde(flatten)]
    pub body: &'a T,
    /// The loaders' warnings, in load order.
    pub warnings: &'a [crate::model::dump::Warning],
}

/// A flag SIGINT, SIGTERM and SIGHUP set: what a headless replay or matrix run polls as its
/// cancel.
///
/// # Errors
/// A handler that cannot be registered.
pub fn cancel_on_signals() -> Result<std::sync::Arc<std::sync::atomic::AtomicBool>, CliError> {
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        signal_hook::flag::register(signal, std::sync::Arc::clone(&cancel))?;
    }
    Ok(cancel)
}

/// `document` with the `warnings` every `--json` document carries (README): none are found
/// by `cases analyze` (an attempt that cannot be judged is a case's missing evidence) or in
/// replay_op.py's `--list` document.
pub(crate) fn with_warnings(mut document: serde_json::Value) -> serde_json::Value {
    if let Some(fields) = document.as_object_mut() {
        fields
            .entry("warnings")
            .or_insert_with(|| serde_json::json!([]));
    }
    document
}
