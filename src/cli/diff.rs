//! `dumpview diff A B`: coverage, input identity and the first divergence, per rank.

use std::path::Path;

use super::{CliError, Conclusion, inputs::load_captures};
use crate::model::analysis::Analysis;
use crate::model::analysis::compare::{
    CHECKSUM_NOISE, CHECKSUM_RTOL, DEFAULT_ATOL, DEFAULT_RTOL, Tolerance, Tolerances,
};
use crate::model::analysis::diff::DiffReport;
use crate::model::dump::Dump;
use crate::model::present;

/// Tolerance options as given on the command line.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ToleranceArgs {
    /// Relative tolerance for every statistic (the defaults: see the help text).
    #[arg(long, help = rtol_help(), allow_negative_numbers = true)]
    pub rtol: Option<f64>,
    /// Absolute tolerance for every statistic.
    #[arg(
        long,
        help = format!("Absolute tolerance for every statistic (default {DEFAULT_ATOL:e})"),
        allow_negative_numbers = true
    )]
    pub atol: Option<f64>,
    /// One statistic's tolerance, STAT=RTOL:ATOL (STAT: max_abs, min, max, mean, l2, pos_checksum); repeatable.
    #[arg(long = "tol", value_name = "STAT=RTOL:ATOL")]
    pub per_stat: Vec<String>,
}

/// `--rtol`'s help, from the constants the rule uses (docs/diff.md).
fn rtol_help() -> String {
    let noise = CHECKSUM_NOISE;
    format!(
        "Relative tolerance for every statistic (default: {DEFAULT_RTOL:e}; pos_checksum \
         {CHECKSUM_RTOL:e}, widened to the larger of {} unit roundoffs of the coarser dtype and \
         {} times the change the magnitudes show; a coarse screen). Setting it, or pos_checksum's \
         --tol, holds the checksum to that tolerance alone",
        noise.roundoff_factor, noise.evidence_factor
    )
}

impl ToleranceArgs {
    /// The tolerances these options describe.
    ///
    /// # Errors
    /// A malformed `--tol` or a negative tolerance.
    pub fn tolerances(&self) -> Result<Tolerances, CliError> {
        let defaults = Tolerances::default().per_stat[0];
        let rtol = self.rtol.unwrap_or(defaults.rtol);
        let atol = self.atol.unwrap_or(defaults.atol);
        if !(rtol >= 0.0 && atol >= 0.0) {
            return Err("--rtol and --atol must be non-negative numbers".into());
        }
        let mut tolerances = if self.rtol.is_none() && self.atol.is_none() {
            Tolerances::default()
        } else {
            Tolerances::uniform(rtol, atol)
        };
        for spec in &self.per_stat {
            let parsed = spec.split_once('=').and_then(|(name, values)| {
                let (r, a) = values.split_once(':')?;
                Some((name, r.parse::<f64>().ok()?, a.parse::<f64>().ok()?))
            });
            match parsed {
                Some((name, rtol, atol)) if rtol >= 0.0 && atol >= 0.0 => {
                    tolerances.set(name, Tolerance { rtol, atol })?;
                }
                _ => {
                    return Err(format!(
                        "--tol {spec:?}: expected STAT=RTOL:ATOL, e.g. mean=1e-3:1e-6"
                    )
                    .into());
                }
            }
        }
        Ok(tolerances)
    }
}

/// Diffs capture `a` against capture `b`.
///
/// # Errors
/// An input that cannot be loaded, or bad tolerance options.
pub fn run(
    a: &Path,
    b: &Path,
    tolerance: &ToleranceArgs,
    attempts: &super::inputs::AttemptArgs,
    ignore: &super::inputs::IgnoreArgs,
    json: bool,
    shown: Shown<'_>,
) -> Result<Conclusion, CliError> {
    let tolerances = tolerance.tolerances()?;
    let [mut dump_a, mut dump_b]: [Dump; 2] =
        load_captures(&[a.to_path_buf(), b.to_path_buf()], attempts, json)?
            .try_into()
            .expect("two captures in, two dumps out");
    ignore.apply(&mut dump_a)?;
    ignore.apply(&mut dump_b)?;
    let analysis = Analysis::compute_diff(&dump_a, &dump_b, &tolerances);
    let report = analysis.diff.as_ref().expect("a diff of two captures");
    if let Shown::Tokens = shown {
        return tokens_view(report, &dump_a, &dump_b, json);
    }
    if let Shown::Tree(tree) = shown {
        super::tree::print_diff(tree, report, &dump_a, &dump_b, json)?;
    } else if json {
        /// The JSON document, serialized straight from the report: a million pairs are
        /// written as they are walked, never copied into a `serde_json::Value` or one string.
        #[derive(serde::Serialize)]
        struct Document<'r> {
            diff: &'r DiffReport,
            warnings: Vec<&'r crate::model::dump::Warning>,
        }
        // The load warnings, then what merging over parallel groups could not do.
        let merge_warnings = report.merge_warnings();
        let document = Document {
            diff: report,
            warnings: dump_a
                .warnings
                .iter()
                .chain(&dump_b.warnings)
                .chain(&merge_warnings)
                .collect(),
        };
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
        serde_json::to_writer_pretty(&mut out, &document)?;
        std::io::Write::write_all(&mut out, b"\n")?;
        std::io::Write::flush(&mut out)?;
    } else {
        print!("{}", present::diff::text(report));
    }
    let damaged = crate::model::dump::any_lost(dump_a.warnings.iter().chain(&dump_b.warnings));
    Ok(if report.found_something() || damaged {
        Conclusion::Found
    } else {
        Conclusion::Clean
    })
}

/// `dumpview diff --tokens`: the token alignment alone, each request's first bad token and
/// its token × stage grid (text) or the alignment (`--json`).
fn tokens_view(
    report: &DiffReport,
    dump_a: &Dump,
    dump_b: &Dump,
    json: bool,
) -> Result<Conclusion, CliError> {
    let Some(tokens) = &report.tokens else {
        return Err(
            "--tokens: the captures do not both hold token rows (the probe writes them for \
             windows armed with a row map, docs/manifest.md \"Token rows\")"
                .into(),
        );
    };
    if json {
        #[derive(serde::Serialize)]
        struct Document<'r> {
            tokens: &'r crate::model::analysis::tokens::TokenDiff,
            warnings: Vec<&'r crate::model::dump::Warning>,
        }
        let document = Document {
            tokens,
            warnings: dump_a.warnings.iter().chain(&dump_b.warnings).collect(),
        };
        serde_json::to_writer_pretty(std::io::stdout().lock(), &document)?;
        println!();
    } else {
        let width = crossterm_width().unwrap_or(120);
        print!(
            "{}",
            present::tokens::summary_text(tokens, &report.aligned_only)
        );
        print!("{}", present::tokens::tokens_text(tokens, width));
    }
    let damaged = crate::model::dump::any_lost(dump_a.warnings.iter().chain(&dump_b.warnings));
    // As plain `diff`: a bad token, ids that part, or forwards left to the rows with no row
    // aligned are findings.
    let parted = tokens.requests.iter().any(|m| m.ids_differ_from.is_some());
    let left_to_rows = !(report.aligned_only.0.is_empty() && report.aligned_only.1.is_empty());
    let nothing_aligned = tokens.nothing_compared.is_some() && left_to_rows;
    Ok(
        if tokens.first.is_some() || parted || nothing_aligned || damaged {
            Conclusion::Found
        } else {
            Conclusion::Clean
        },
    )
}

/// The terminal's width, when stdout is one (`COLUMNS` first, as shells set it).
fn crossterm_width() -> Option<usize> {
    if let Some(columns) = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()) {
        return Some(columns);
    }
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    ratatui::crossterm::terminal::size()
        .ok()
        .map(|(w, _)| usize::from(w))
}

/// What `dumpview diff` prints.
#[derive(Debug, Clone, Copy)]
pub enum Shown<'a> {
    /// Coverage, input identity and the first divergence, per rank.
    Findings,
    /// The token alignment alone (`--tokens`).
    Tokens,
    /// The module tree (`--tree`).
    Tree(&'a super::tree::TreeArgs),
}

/// The options of `dumpview diff`.
#[derive(Debug, Clone, clap::Args)]
pub struct DiffArgs {
    /// Capture A: a manifest file or a directory.
    pub a: std::path::PathBuf,
    /// Capture B: a manifest file or a directory.
    pub b: std::path::PathBuf,
    #[command(flatten)]
    pub tolerance: ToleranceArgs,
    #[command(flatten)]
    pub ignore: super::inputs::IgnoreArgs,
    /// Show the token alignment alone: each request's first bad token and its token × stage
    /// grid (stages down, positions across); with --json, the alignment (docs/diff.md,
    /// "Token rows").
    #[arg(long, conflicts_with = "tree")]
    pub tokens: bool,
    #[command(flatten)]
    pub tree: super::tree::TreeArgs,
}

impl DiffArgs {
    /// Maps A and B to local paths and diffs them.
    ///
    /// # Errors
    /// As [`run`]; a remote capture that cannot be read.
    pub fn run(&self, cx: &mut super::Context) -> Result<Conclusion, CliError> {
        run(
            &cx.sources.local(&self.a)?,
            &cx.sources.local(&self.b)?,
            &self.tolerance,
            &cx.attempts,
            &self.ignore,
            cx.json,
            if self.tokens {
                Shown::Tokens
            } else if self.tree.tree {
                Shown::Tree(&self.tree)
            } else {
                Shown::Findings
            },
        )
    }
}
