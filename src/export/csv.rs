//! CSV export of the per-stage comparison table (`dumpview report --csv`), through the `csv`
//! crate: no dataframe library, so every build has it.

use std::path::Path;

use crate::model::analysis::compare::STATS;
use crate::model::analysis::table::StageRow;

/// The header: rank, position, key, status, dtypes, shapes, then for each statistic
/// `<stat>_a`, `<stat>_b`, `<stat>_abs_diff`, `<stat>_rel_diff`, `<stat>_exceeds` (the
/// Parquet file's columns, in the same order).
pub fn header() -> Vec<String> {
    let mut out: Vec<String> = [
        "rank", "position", "key", "status", "dtype_a", "dtype_b", "shape_a", "shape_b",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    for name in STATS {
        for suffix in ["a", "b", "abs_diff", "rel_diff", "exceeds"] {
            out.push(format!("{name}_{suffix}"));
        }
    }
    out
}

/// One row's fields as [`header`] orders them: a missing value is an empty field, a number
/// the shortest text that reads back to the same `f64`, a boolean `true`/`false`.
fn fields(row: &StageRow) -> Vec<String> {
    let text = |v: &Option<String>| v.clone().unwrap_or_default();
    let number = |v: Option<f64>| v.map_or(String::new(), |x| x.to_string());
    let mut out = vec![
        row.rank.to_string(),
        row.position.to_string(),
        row.key.clone(),
        row.status.to_string(),
        text(&row.dtype_a),
        text(&row.dtype_b),
        text(&row.shape_a),
        text(&row.shape_b),
    ];
    for s in &row.stats {
        out.push(number(s.a));
        out.push(number(s.b));
        out.push(number(s.abs_diff));
        out.push(number(s.rel_diff));
        out.push(s.exceeds.to_string());
    }
    out
}

/// Writes the table as CSV, a header row first (RFC 4180 quoting where a field needs it).
///
/// # Errors
/// The file cannot be created or written, named with the system's error.
pub fn write_csv(rows: &[StageRow], path: &Path) -> Result<(), String> {
    let fail = |e: ::csv::Error| format!("{}: cannot write: {e}", path.display());
    let mut writer = ::csv::Writer::from_path(path).map_err(fail)?;
    writer.write_record(header()).map_err(fail)?;
    for row in rows {
        writer.write_record(fields(row)).map_err(fail)?;
    }
    writer
        .flush()
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))
}
