//! Parquet export of the per-stage comparison table through polars (cargo feature `export`:
//! polars is a large build that not every user needs; CSV needs none: [`super::csv`]).

use std::path::Path;

use polars::prelude::*;

use crate::model::analysis::compare::STATS;
use crate::model::analysis::table::StageRow;

/// The rows as a DataFrame: rank, position, key, status, dtypes, shapes, then for each
/// statistic `<stat>_a`, `<stat>_b`, `<stat>_abs_diff`, `<stat>_rel_diff`, `<stat>_exceeds`.
///
/// # Errors
/// polars' own (column length mismatches cannot happen here).
pub fn frame(rows: &[StageRow]) -> PolarsResult<DataFrame> {
    let mut columns = vec![
        Column::new(
            "rank".into(),
            rows.iter().map(|r| r.rank).collect::<Vec<_>>(),
        ),
        Column::new(
            "position".into(),
            rows.iter().map(|r| r.position as u64).collect::<Vec<_>>(),
        ),
        Column::new(
            "key".into(),
            rows.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
        ),
        Column::new(
            "status".into(),
            rows.iter().map(|r| r.status).collect::<Vec<_>>(),
        ),
        Column::new(
            "dtype_a".into(),
            rows.iter()
                .map(|r| r.dtype_a.as_deref())
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "dtype_b".into(),
            rows.iter()
                .map(|r| r.dtype_b.as_deref())
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "shape_a".into(),
            rows.iter()
                .map(|r| r.shape_a.as_deref())
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "shape_b".into(),
            rows.iter()
                .map(|r| r.shape_b.as_deref())
                .collect::<Vec<_>>(),
        ),
    ];
    for (i, name) in STATS.iter().enumerate() {
        let col = |suffix: &str| PlSmallStr::from(format!("{name}_{suffix}"));
        columns.push(Column::new(
            col("a"),
            rows.iter().map(|r| r.stats[i].a).collect::<Vec<_>>(),
        ));
        columns.push(Column::new(
            col("b"),
            rows.iter().map(|r| r.stats[i].b).collect::<Vec<_>>(),
        ));
        columns.push(Column::new(
            col("abs_diff"),
            rows.iter().map(|r| r.stats[i].abs_diff).collect::<Vec<_>>(),
        ));
        columns.push(Column::new(
            col("rel_diff"),
            rows.iter().map(|r| r.stats[i].rel_diff).collect::<Vec<_>>(),
        ));
        columns.push(Column::new(
            col("exceeds"),
            rows.iter().map(|r| r.stats[i].exceeds).collect::<Vec<_>>(),
        ));
    }
    DataFrame::new(rows.len(), columns)
}

/// Writes the table as Parquet.
///
/// # Errors
/// The file cannot be created or written.
pub fn write_parquet(rows: &[StageRow], path: &Path) -> Result<(), String> {
    let mut df = frame(rows).map_err(|e| e.to_string())?;
    let file = std::fs::File::create(path)
        .map_err(|e| format!("{}: cannot create: {e}", path.display()))?;
    ParquetWriter::new(file)
        .finish(&mut df)
        .map(|_| ())
        .map_err(|e| format!("{}: {e}", path.display()))
}
