//! `dumpview demo [--pair NAME] [--list]`: the workbench on an embedded example pair (what
//! `dumpview` with no capture opens).

use super::diff::ToleranceArgs;
use super::{CliError, Conclusion, Context};

pub use super::workbench::DEFAULT_EXAMPLE;

/// The options of `dumpview demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Which pair (see --list).
    #[arg(long, default_value = DEFAULT_EXAMPLE)]
    pub pair: String,
    /// Print the embedded pairs and their known answers instead.
    #[arg(long)]
    pub list: bool,
    #[command(flatten)]
    pub tolerance: ToleranceArgs,
}

impl DemoArgs {
    /// Opens the workbench on the pair, or with `--list` prints the pairs.
    ///
    /// # Errors
    /// An unknown pair, bad tolerances, a terminal that cannot be used.
    pub fn run(&self, cx: &mut Context) -> Result<Conclusion, CliError> {
        if self.list {
            return super::summary::run_embedded(cx.json);
        }
        super::workbench::open_example(&self.pair, &self.tolerance, cx)
    }
}
