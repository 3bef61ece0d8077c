//! The per-stage comparison table of a diff: one row per stage#occurrence and rank,
//! paired or not, for spreadsheets and dataframes (exported by `crate::export`).

use serde::Serialize;

use crate::model::analysis::compare::{STATS, Verdict};
use crate::model::analysis::diff::DiffReport;

/// One statistic's columns in a row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatColumns {
    /// A's value; `None` when undefined or the row is unpaired.
    pub a: Option<f64>,
    /// B's value; `None` when undefined or the row is unpaired.
    pub b: Option<f64>,
    /// `|a − b|`; `None` when either side is undefined.
    pub abs_diff: Option<f64>,
    /// `|a − b| / scale`, the scale of docs/diff.md ("Tolerances"); `None` when undefined.
    pub rel_diff: Option<f64>,
    /// Whether the difference is beyond `atol + rtol · scale`.
    pub exceeds: bool,
}

/// One row: a stage of one rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageRow {
    /// The rank of the window pair.
    pub rank: u32,
    /// Position in A's capture order (0-based); unpaired stages (`only_a`, then `only_b`)
    /// follow after all of A's records.
    pub position: usize,
    /// `stage#occurrence`.
    pub key: String,
    /// `agree`, `structural`, `non_finite`, `magnitude`, `values_moved`,
    /// `checksum_inconclusive`, `not_compared`, `only_a`, `only_b`.
    pub status: &'static str,
    /// A's dtype; `None` for an unpaired row.
    pub dtype_a: Option<String>,
    /// B's dtype; `None` for an unpaired row.
    pub dtype_b: Option<String>,
    /// A's logical shape as text (`[2, 3]`); `None` for an unpaired row.
    pub shape_a: Option<String>,
    /// B's logical shape as text; `None` for an unpaired row.
    pub shape_b: Option<String>,
    /// Indexed like [`STATS`].
    pub stats: Vec<StatColumns>,
}

fn status(verdict: &Verdict) -> &'static str {
    match verdict {
        Verdict::Agree => "agree",
        Verdict::Structural { .. } => "structural",
        Verdict::NonFinite => "non_finite",
        Verdict::Magnitude => "magnitude",
        Verdict::ValuesMoved => "values_moved",
        Verdict::ChecksumInconclusive => "checksum_inconclusive",
        Verdict::NotCompared { .. } => "not_compared",
    }
}

/// The table's rows, rank by rank, in capture order.
pub fn stage_rows(report: &DiffReport) -> Vec<StageRow> {
    let empty = || {
        vec![
            StatColumns {
                a: None,
                b: None,
                abs_diff: None,
                rel_diff: None,
                exceeds: false
            };
            STATS.len()
        ]
    };
    let mut rows = Vec::new();
    for w in &report.windows {
        for p in &w.pairs {
            let mut stats = empty();
            for d in &p.comparison.stats {
                if let Some(i) = STATS.iter().position(|&s| s == d.name) {
                    stats[i] = StatColumns {
                        a: d.a,
                        b: d.b,
                        abs_diff: d.abs_diff,
                        rel_diff: d.rel_diff,
                        exceeds: d.exceeds,
                    };
                }
            }
            rows.push(StageRow {
                rank: w.rank,
                position: p.position,
                key: p.key.clone(),
                status: status(&p.comparison.verdict),
                dtype_a: Some(p.dtype_a.to_string()),
                dtype_b: Some(p.dtype_b.to_string()),
                shape_a: Some(format!("{:?}", p.shape_a)),
                shape_b: Some(format!("{:?}", p.shape_b)),
                stats,
            });
        }
        let unpaired = w
            .only_a
            .iter()
            .map(|k| (k, "only_a"))
            .chain(w.only_b.iter().map(|k| (k, "only_b")));
        for (i, (key, side)) in unpaired.enumerate() {
            rows.push(StageRow {
                rank: w.rank,
                position: w.a.records + i,
                key: key.clone(),
                status: side,
                dtype_a: None,
                dtype_b: None,
                shape_a: None,
                shape_b: None,
                stats: empty(),
            });
        }
    }
    rows
}
