//! `dumpview completions SHELL`: a shell completion script for the whole command line.

use super::{CliError, Conclusion, Context};

/// The refusal of `--json` by the subcommands that have nothing to say in JSON.
pub(crate) const NO_JSON: &str = "--json is not supported by `probe install` and `completions`";

/// The options of `dumpview completions`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

impl CompletionsArgs {
    /// Prints the completion script of `command` (the whole command line) for SHELL.
    ///
    /// # Errors
    /// `--json` (nothing to say in JSON: refused rather than ignored).
    pub fn run(&self, command: &mut clap::Command, cx: &Context) -> Result<Conclusion, CliError> {
        if cx.json {
            return Err(NO_JSON.into());
        }
        clap_complete::generate(self.shell, command, "dumpview", &mut std::io::stdout());
        Ok(Conclusion::Clean)
    }
}
