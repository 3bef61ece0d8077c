//! Subcommands: each parses its inputs with `model`, prints text or `--json`,
//! and returns an [`Outcome`] that becomes the exit status.

pub mod cases;
pub mod diff;
pub mod inputs;
pub mod probe_install;
pub mod replay;
pub mod report;
pub mod scan;
pub mod summary;
pub mod tensors;
pub mod vary;

/// What a command found; `main` maps it to the exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0: nothing suspicious.
    Clean,
    /// Exit 1: something was found (a non-finite record, a divergence, an identity mismatch).
    Found,
}

impl Outcome {
    /// The process exit status: 0 clean, 1 found. Usage and input errors exit 2 in `main`.
    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::Clean => 0,
            Outcome::Found => 1,
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
