//! `dumpview diff A B`: coverage, input identity and the first divergence, per rank.

use std::fmt::Write;
use std::path::PathBuf;

use super::{CliError, Outcome, inputs::load_capture};
use crate::model::analysis::compare::{Tolerance, Tolerances};
use crate::model::analysis::diff::{DiffReport, PairDiff, WindowDiff, diff};

/// Tolerance options as given on the command line.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ToleranceArgs {
    /// Relative tolerance for every statistic (default: 1e-2, pos_checksum 5e-2; a coarse screen).
    #[arg(long)]
    pub rtol: Option<f64>,
    /// Absolute tolerance for every statistic (default 1e-6).
    #[arg(long)]
    pub atol: Option<f64>,
    /// One statistic's tolerance, STAT=RTOL:ATOL (STAT: max_abs, min, max, mean, l2, pos_checksum); repeatable.
    #[arg(long = "tol", value_name = "STAT=RTOL:ATOL")]
    pub per_stat: Vec<String>,
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
    a: &PathBuf,
    b: &PathBuf,
    tolerance: &ToleranceArgs,
    json: bool,
) -> Result<Outcome, CliError> {
    let tolerances = tolerance.tolerances()?;
    let dump_a = load_capture(std::slice::from_ref(a), json)?;
    let dump_b = load_capture(std::slice::from_ref(b), json)?;
    let report = diff(&dump_a.windows, &dump_b.windows, &tolerances);
    if json {
        /// The JSON document, serialized straight from the report: a million pairs are
        /// written as they are walked, never copied into a `serde_json::Value` or one string.
        #[derive(serde::Serialize)]
        struct Document<'r> {
            diff: &'r DiffReport,
            warnings: Vec<&'r crate::model::dump::Warning>,
        }
        let document = Document {
            diff: &report,
            warnings: dump_a.warnings.iter().chain(&dump_b.warnings).collect(),
        };
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
        serde_json::to_writer_pretty(&mut out, &document)?;
        std::io::Write::write_all(&mut out, b"\n")?;
        std::io::Write::flush(&mut out)?;
    } else {
        print!("{}", render(&report));
    }
    let damaged = !dump_a.warnings.is_empty() || !dump_b.warnings.is_empty();
    Ok(if report.found_something() || damaged {
        Outcome::Found
    } else {
        Outcome::Clean
    })
}

/// The text form of a diff.
pub fn render(report: &DiffReport) -> String {
    let mut out = String::new();
    for w in &report.windows {
        out.push_str(&render_window(w));
    }
    for (side, windows) in [("A", &report.unpaired_a), ("B", &report.unpaired_b)] {
        for w in windows.iter() {
            let _ = writeln!(
                out,
                "MISSING WINDOW: rank {} label {:?} (match {}, call {}) exists only in {side}: {}",
                w.rank, w.label, w.match_index, w.occurrence, w.source
            );
        }
    }
    if report.table.len() > 1 {
        match report.first_rank {
            Some(rank) => {
                let _ = writeln!(
                    out,
                    "ranks: rank {rank} diverges first (earliest in capture order)"
                );
            }
            None => out.push_str("ranks: no rank diverges\n"),
        }
    }
    out
}

fn render_window(w: &WindowDiff) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "== rank {}: A {:?} (match {}, call {}, {} records) vs B {:?} (match {}, call {}, {} records)",
        w.rank,
        w.a.label,
        w.a.match_index,
        w.a.occurrence,
        w.a.records,
        w.b.label,
        w.b.match_index,
        w.b.occurrence,
        w.b.records
    );
    let _ = writeln!(out, "   A: {}\n   B: {}", w.a.source, w.b.source);
    let _ = writeln!(out, "input: {}", w.identity.describe());
    if !w.metadata_differences.is_empty() {
        let _ = writeln!(
            out,
            "configuration differs: {}",
            w.metadata_differences.join("; ")
        );
    }
    let _ = writeln!(
        out,
        "coverage: {} paired, {} only in A, {} only in B{}",
        w.pairs.len(),
        w.only_a.len(),
        w.only_b.len(),
        if w.only_a.is_empty() && w.only_b.is_empty() {
            ""
        } else {
            " (unpaired stages are missing evidence)"
        }
    );
    if let Some(message) = &w.missing_data {
        let _ = writeln!(out, "{message}");
    }
    if w.precision_changes > 0 {
        let _ = writeln!(
            out,
            "dtypes: {} paired records differ in precision only (compared by value)",
            w.precision_changes
        );
    }
    match w.first() {
        Some(pair) => out.push_str(&render_first(pair)),
        None if w.pairs.is_empty() => {
            out.push_str("first divergence: nothing paired, nothing compared\n")
        }
        None => {
            out.push_str("first divergence: none: every paired record agrees within tolerance\n")
        }
    }
    let diverging = w
        .pairs
        .iter()
        .filter(|p| p.comparison.verdict.diverges())
        .count();
    if diverging > 1 {
        let _ = writeln!(
            out,
            "   ({diverging} of {} paired records diverge in all)",
            w.pairs.len()
        );
    }
    out.push('\n');
    out
}

fn render_first(pair: &PairDiff) -> String {
    use crate::model::analysis::compare::Verdict;
    let mut out = String::new();
    let what = match &pair.comparison.verdict {
        Verdict::Structural { reason } => format!("structural: {reason}"),
        Verdict::NonFinite => "NaN/inf counts differ".to_string(),
        Verdict::Magnitude => "statistics differ beyond tolerance".to_string(),
        Verdict::ValuesMoved => "VALUES MOVED: magnitudes agree, the position checksum does not (a permutation: wrong block table, misplaced cache write)".to_string(),
        Verdict::Agree => "agrees".to_string(),
    };
    let _ = writeln!(
        out,
        "first divergence: {} (position {}, seq {} / {}): {what}",
        pair.key, pair.position, pair.seq_a, pair.seq_b
    );
    if !pair.comparison.stats.is_empty() {
        let _ = writeln!(
            out,
            "   {:<13}{:>14}{:>14}{:>12}{:>11}{:>12}",
            "statistic", "A", "B", "|A-B|", "rel", "bound"
        );
        for d in &pair.comparison.stats {
            let num = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.6e}"));
            let _ = writeln!(
                out,
                "   {:<13}{:>14}{:>14}{:>12}{:>11}{:>12}{}",
                d.name,
                num(d.a),
                num(d.b),
                d.abs_diff.map_or("-".to_string(), |x| format!("{x:.3e}")),
                d.rel_diff.map_or("-".to_string(), |x| format!("{x:.2e}")),
                d.bound.map_or("-".to_string(), |x| format!("{x:.2e}")),
                if d.exceeds { "  <-" } else { "" }
            );
        }
    }
    out
}
