//! `dumpview diagnose A [B]`: the diagnosis alone (docs/diagnosis.md): the conclusion, the
//! chain with its evidence, what is not known and the next experiment.

use std::path::PathBuf;

use super::{CliError, Conclusion, inputs::load_captures};
use crate::model::analysis::Analysis;
use crate::model::analysis::diagnosis::diagnose;
use crate::model::present;

/// The options of `dumpview diagnose`.
#[derive(Debug, Clone, clap::Args)]
pub struct DiagnoseArgs {
    /// The capture under suspicion when alone; with B, the reference run (`diagnose GOOD BAD`
    /// as `diff A B`): a manifest, a window directory or a tree of them.
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The run under suspicion, compared against A.
    #[arg(value_name = "B")]
    pub b: Option<PathBuf>,
    #[command(flatten)]
    pub tolerance: super::diff::ToleranceArgs,
    #[command(flatten)]
    pub ignore: super::inputs::IgnoreArgs,
}

impl DiagnoseArgs {
    /// Loads the captures, computes their analysis and prints the diagnosis (`--json`: the
    /// diagnosis with the loaders' `warnings`); `Found` when a rule applied or a load lost
    /// evidence.
    ///
    /// # Errors
    /// An input that cannot be loaded, or bad tolerances.
    pub fn run(&self, cx: &mut super::Context) -> Result<Conclusion, CliError> {
        let tolerances = self.tolerance.tolerances()?;
        let inputs: Vec<PathBuf> = std::iter::once(self.a.clone())
            .chain(self.b.clone())
            .collect();
        let paths = cx.sources.locals(&inputs)?;
        let mut dumps = load_captures(&paths, &cx.attempts, cx.json)?;
        for dump in &mut dumps {
            self.ignore.apply(dump)?;
        }
        let (a, b) = (&dumps[0], dumps.get(1));
        let analysis = Analysis::compute(a, b, &tolerances);
        let diagnosis = diagnose(a, b, &analysis);
        let warnings: Vec<&crate::model::dump::Warning> =
            dumps.iter().flat_map(|d| &d.warnings).collect();
        if cx.json {
            let mut doc = serde_json::to_value(&diagnosis)?;
            doc["warnings"] = serde_json::to_value(&warnings)?;
            println!("{}", serde_json::to_string_pretty(&doc)?);
        } else {
            print!("{}", present::diagnosis::text(&diagnosis));
        }
        // Evidence a load lost (a truncated manifest, records dropped) is something to look at,
        // as for every subcommand, even where what was read gives no diagnosis.
        let lost = dumps
            .iter()
            .any(|d| crate::model::dump::any_lost(&d.warnings));
        Ok(if diagnosis.found || lost {
            Conclusion::Found
        } else {
            Conclusion::Clean
        })
    }
}
