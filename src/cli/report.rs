//! `dumpview report A [B] [-o FILE]`: the first-mismatch report in Markdown or JSON.

use std::path::{Path, PathBuf};

use super::diff::ToleranceArgs;
use super::{CliError, Conclusion, inputs::load_captures};
use crate::model::analysis::Analysis;
use crate::model::analysis::report::{LeftOutPair, Report, TensorBudget};
use crate::model::tensor::metrics::CompareProgress;
use crate::model::tensor::pairing::compare_saved;

/// The captures a report reads.
pub struct Captures<'a> {
    /// Capture A.
    pub a: &'a Path,
    /// Capture B, when the report compares two.
    pub b: Option<&'a Path>,
    /// Called with each saved tensor file the report compares before it is read, so a
    /// capture copied from elsewhere (a remote mirror) can bring it in first; for local
    /// captures it does nothing. A file it cannot bring is named in a warning, and its
    /// comparison left out.
    pub fetch: &'a mut dyn FnMut(&Path) -> Result<(), String>,
    /// Replay output directories (`--replay DIR`) to list under "Replays", each judged by
    /// the standard its `verdict.json` names (msprobe's without one).
    pub replays: &'a [PathBuf],
    /// Bytes of saved tensor files the report may read (`--tensor-budget`).
    pub tensor_budget: u64,
}

/// Compares the saved tensors of matched records both captures hold
/// ([`Report::saved_tensors`]): each first divergence's pair whatever its size, then the
/// others in capture order while the sizes of the files read so far, added up, are under
/// `budget` (the pair that reaches it is read whole, so the budget is passed by one pair at
/// most); every later pair is listed as left out, unread and, for a remote capture, not
/// fetched. A pair whose files are not both there after the fetch is skipped (a fetch's
/// failure is warned about).
fn compare_saved_tensors(
    report: &mut Report,
    dump_a: &crate::model::dump::Dump,
    dump_b: &crate::model::dump::Dump,
    fetch: &mut dyn FnMut(&Path) -> Result<(), String>,
    budget: u64,
) {
    let mut used: u64 = 0;
    let mut left_out = Vec::new();
    for saved in report.saved_tensors(dump_a, dump_b) {
        if !saved.first_divergence && used >= budget {
            left_out.push(LeftOutPair {
                rank: saved.rank,
                window: saved.window,
                stage: saved.stage,
            });
            continue;
        }
        for file in [&saved.a, &saved.b] {
            if let Err(problem) = fetch(file) {
                eprintln!(
                    "dumpview: warning: {}: cannot fetch the saved tensor: {problem}",
                    file.display()
                );
            }
        }
        let size = |p: &Path| {
            std::fs::metadata(p)
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len())
        };
        let (Some(size_a), Some(size_b)) = (size(&saved.a), size(&saved.b)) else {
            continue;
        };
        let bytes = size_a.saturating_add(size_b);
        used = used.saturating_add(bytes);
        let result = compare_saved(&saved.a, &saved.b, &CompareProgress::default());
        report.add_window_tensor_comparison(saved.rank, Some(saved.window), saved.stage, result);
    }
    report.set_tensor_budget(TensorBudget {
        budget_bytes: budget,
        bytes_compared: used,
        left_out,
    });
}

/// Builds the report; writes it to `output` (JSON when it ends in `.json`, else Markdown)
/// or prints it (JSON with `--json`).
///
/// # Errors
/// An input that cannot be loaded, bad tolerances, or an output file that cannot be written.
pub fn run(
    captures: Captures<'_>,
    output: Option<&Path>,
    table: &TableArgs,
    tolerance: &ToleranceArgs,
    attempts: &super::inputs::AttemptArgs,
    ignore: &super::inputs::IgnoreArgs,
    json: bool,
) -> Result<Conclusion, CliError> {
    let Captures {
        a,
        b,
        fetch,
        replays,
        tensor_budget,
    } = captures;
    let tolerances = tolerance.tolerances()?;
    let inputs: Vec<PathBuf> = std::iter::once(a).chain(b).map(Path::to_path_buf).collect();
    let mut dumps = load_captures(&inputs, attempts, json)?.into_iter();
    let mut dump_a = dumps.next().expect("A is loaded");
    let mut dump_b = dumps.next();
    ignore.apply(&mut dump_a)?;
    if let Some(b) = &mut dump_b {
        ignore.apply(b)?;
    }
    let analysis = Analysis::compute(&dump_a, dump_b.as_ref(), &tolerances);
    let mut report = Report::build(&dump_a, dump_b.as_ref(), &analysis);
    if let Some(dump_b) = &dump_b {
        compare_saved_tensors(&mut report, &dump_a, dump_b, fetch, tensor_budget);
        report.note_saved_rows(&dump_a, dump_b);
    }
    for dir in replays {
        report.add_replay(
            dir.display().to_string(),
            crate::model::replay::judge_dir(dir, None),
        );
    }
    if (table.csv.is_some() || table.parquet.is_some()) && dump_b.is_none() {
        return Err("--csv and --parquet export the comparison table: give two captures".into());
    }
    let as_json = |r: &Report| serde_json::to_string_pretty(r).map(|s| s + "\n");
    match output {
        Some(path) => {
            let text = if path.extension().is_some_and(|e| e == "json") {
                as_json(&report)?
            } else {
                report.to_markdown()
            };
            write_new(path, &text)?;
            if !json {
                println!("wrote {}", path.display());
            }
        }
        None if json => print!("{}", as_json(&report)?),
        None => print!("{}", report.to_markdown()),
    }
    // The tables last: one that cannot be written (Parquet without the `export` feature, a
    // path refused) never costs the report above.
    if let Some(diff) = analysis.diff.as_ref().filter(|_| dump_b.is_some()) {
        let rows = crate::model::analysis::table::stage_rows(diff);
        export_table(&rows, table)?;
    }
    Ok(if report.found_something() {
        Conclusion::Found
    } else {
        Conclusion::Clean
    })
}

/// Where to export the per-stage comparison table.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TableArgs {
    /// Also write the per-stage comparison table as CSV.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Also write the per-stage comparison table as Parquet (needs the `export` feature).
    #[arg(long, value_name = "FILE")]
    pub parquet: Option<PathBuf>,
}

/// Writes the tables `table` asks for: CSV in every build, Parquet with the `export` feature.
///
/// # Errors
/// A file that cannot be written; Parquet asked of a build without the feature (the CSV is
/// written first).
fn export_table(
    rows: &[crate::model::analysis::table::StageRow],
    table: &TableArgs,
) -> Result<(), CliError> {
    if let Some(path) = &table.csv {
        crate::export::csv::write_csv(rows, path)?;
    }
    if let Some(path) = &table.parquet {
        write_parquet(rows, path)?;
    }
    Ok(())
}

#[cfg(feature = "export")]
fn write_parquet(
    rows: &[crate::model::analysis::table::StageRow],
    path: &Path,
) -> Result<(), CliError> {
    Ok(crate::export::parquet::write_parquet(rows, path)?)
}

#[cfg(not(feature = "export"))]
fn write_parquet(
    _rows: &[crate::model::analysis::table::StageRow],
    path: &Path,
) -> Result<(), CliError> {
    Err(format!(
        "{}: not written: this dumpview was built without the `export` feature (Parquet needs \
         polars); rebuild with `cargo build --release --features export`. The report and any \
         --csv table were written.",
        path.display()
    )
    .into())
}

/// Writes `text` to `path` atomically (`model::io::write_atomically`), so a reader never sees half a report.
fn write_new(path: &Path, text: &str) -> Result<(), CliError> {
    crate::model::io::write_atomically(path, text.as_bytes())
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    Ok(())
}

/// The options of `dumpview report`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// Capture A.
    pub a: PathBuf,
    /// Capture B (optional: without it, the report covers A's scan).
    pub b: Option<PathBuf>,
    /// Write the report here (never printed then); `.json` selects JSON.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub table: TableArgs,
    #[command(flatten)]
    pub tolerance: ToleranceArgs,
    /// A replay output directory to list under "Replays" (repeatable; written by
    /// `dumpview replay`, judged again by the standard its verdict.json names).
    #[arg(long = "replay", value_name = "DIR")]
    pub replays: Vec<PathBuf>,
    /// Bytes of saved tensor files the report reads, both sides together, e.g. 512M, 2G
    /// (K, M, G, T are powers of 1024): every pair of matched records both captures saved
    /// is compared in capture order, the first divergence's first and always, until the
    /// files read reach it; the rest are listed as left out (0: the first divergence's only).
    #[arg(long, value_name = "SIZE", value_parser = crate::services::sources::parse_size,
          default_value = "1G")]
    pub tensor_budget: u64,
    #[command(flatten)]
    pub ignore: super::inputs::IgnoreArgs,
}

impl ReportArgs {
    /// Maps A and B to local paths (a remote capture's saved tensors fetched as the report
    /// compares them) and builds the report.
    ///
    /// # Errors
    /// As [`run`]; a remote capture that cannot be read.
    pub fn run(&self, cx: &mut super::Context) -> Result<Conclusion, CliError> {
        let a = cx.sources.local(&self.a)?;
        let b = self.b.as_ref().map(|b| cx.sources.local(b)).transpose()?;
        let sources = &mut cx.sources;
        let captures = Captures {
            a: &a,
            b: b.as_deref(),
            fetch: &mut |file| sources.fetch(file),
            replays: &self.replays,
            tensor_budget: self.tensor_budget,
        };
        run(
            captures,
            self.output.as_deref(),
            &self.table,
            &self.tolerance,
            &cx.attempts,
            &self.ignore,
            cx.json,
        )
    }
}
