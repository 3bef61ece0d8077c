//! The manifest's `token_rows` object and its float32 sidecar (docs/manifest.md, "Token
//! rows"), read into [`TokenRows`] beside the window. A problem with either costs the
//! window's token rows alone, with a warning that names the file: the whole-tensor records
//! stand, and where only the sidecar fails the row map stays (its token ids still say which
//! input the window saw, and its row set still pairs the forward).

use std::path::Path;

use crate::model::dump::{RowValues, TokenRows, Warning, evidence};
use crate::model::io::{FileBytes, MapChoice, OpenError, read_f32_le};

/// Reads `json` (the manifest's `token_rows`, as written) and the sidecar it names beside
/// `manifest`, mapping a large sidecar unless `map` is [`MapChoice::Never`] (a watched dump).
/// `None`, with a warning pushed to `warnings`, when `token_rows` cannot be read; the row map
/// without row statistics ([`map_only`]), with a warning, when the sidecar cannot.
pub fn read(
    json: &str,
    manifest: &Path,
    map: MapChoice,
    warnings: &mut Vec<Warning>,
) -> Option<TokenRows> {
    let mut rows: TokenRows = match serde_json::from_str(json) {
        Ok(rows) => rows,
        Err(e) => {
            // A bad entry elsewhere (a record's row block, the row count) costs the row
            // statistics, not the map: its token ids still say which input the window saw.
            let map = serde_json::from_str::<MapPart>(json).ok().and_then(|part| {
                map_only(TokenRows {
                    file: None,
                    stats: part.stats,
                    map: part.map,
                    positions_inferred: part.positions_inferred,
                    rows: 0,
                    records: Vec::new(),
                    values: RowValues::Empty,
                    from_metadata: false,
                })
            });
            warnings.push(Warning::lost(
                manifest,
                format!(
                    "`token_rows` is not readable ({e}); the window's token rows are not compared{}",
                    if map.is_some() { " (its row map is kept)" } else { "" }
                ),
            ));
            return map;
        }
    };
    let Some(file) = rows.file.clone() else {
        return match rows.check(0) {
            Ok(()) => Some(rows),
            Err(problem) => {
                warnings.push(Warning::lost(manifest, format!("`token_rows`: {problem}")));
                None
            }
        };
    };
    let dir = manifest.parent().unwrap_or(Path::new("."));
    let lost = |what: String| Warning::lost(dir.join(&file), what);
    let path = match evidence::resolve(dir, &file) {
        Ok(path) => path,
        Err(why) => {
            warnings.push(lost(format!(
                "{why}; the window's token rows are not compared (its row map is kept)"
            )));
            return map_only(rows);
        }
    };
    let (values, bytes) = match sidecar_values(&path, map) {
        Ok(read) => read,
        Err(e) => {
            warnings.push(lost(format!(
                "cannot read the token rows the manifest names ({e}); they are not compared (the row map is kept)"
            )));
            return map_only(rows);
        }
    };
    if let Err(problem) = rows.check(bytes) {
        warnings.push(lost(format!(
            "{problem}; the window's token rows are not compared (its row map is kept)"
        )));
        return map_only(rows);
    }
    rows.values = values;
    Some(rows)
}

/// The row map of `rows` without its row statistics: which requests and positions the
/// forward held and their token ids, no record's rows. `None` when the map itself does not
/// hold together.
fn map_only(mut rows: TokenRows) -> Option<TokenRows> {
    rows.file = None;
    rows.rows = 0;
    rows.records.clear();
    rows.values = RowValues::Empty;
    rows.check(0).ok().map(|()| rows)
}

/// The sidecar's values and its size in bytes: a large one mapped and used in place where
/// `map` allows (not [`MapChoice::Never`], a watched dump), else read.
fn sidecar_values(path: &Path, map: MapChoice) -> Result<(RowValues, u64), OpenError> {
    if map == MapChoice::Never {
        let (values, size) = read_f32_le(path)?;
        return Ok((RowValues::Owned(values), size));
    }
    let bytes = FileBytes::open(path, MapChoice::Whole)?;
    let size = bytes.len() as u64;
    let values = match bytes {
        FileBytes::Mapped(_) => RowValues::in_place(bytes).unwrap_or_else(|bytes| {
            let values = RowValues::decode(&bytes);
            bytes.release();
            values
        }),
        FileBytes::Read(bytes) => RowValues::decode(&bytes),
    };
    Ok((values, size))
}

/// The parts of `token_rows` that make the row map, read on their own when the rest is bad.
#[derive(serde::Deserialize)]
struct MapPart {
    stats: Vec<String>,
    map: Vec<crate::model::dump::RowMapEntry>,
    #[serde(default)]
    positions_inferred: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sidecar of `rows` rows of one record, row r's values r·5 .. r·5 + 4.
    fn sidecar(dir: &Path, rows: u64) -> String {
        let values: Vec<u8> = (0..rows * 5)
            .flat_map(|v| (v as f32).to_le_bytes())
            .collect();
        std::fs::write(dir.join("rows.f32"), values).unwrap();
        format!(
            r#"{{"file": "rows.f32", "stats": ["nonfinite_count", "max_abs", "sum", "sum_squares", "row_checksum"], "map": [{{"request": "r", "first_position": 0, "count": {rows}}}], "rows": {rows}, "records": [[0, 0, {rows}, [0], null]]}}"#
        )
    }

    #[test]
    fn a_large_sidecar_is_used_in_place_unless_watched_and_reads_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join("manifest.json");
        // 60,000 rows of 20 bytes: above the 1 MiB from which files are mapped.
        let json = sidecar(dir.path(), 60_000);
        let mut warnings = Vec::new();
        let mapped = read(&json, &manifest, MapChoice::Lazy, &mut warnings).unwrap();
        let read_whole = read(&json, &manifest, MapChoice::Never, &mut warnings).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(
            matches!(mapped.values, RowValues::InPlace(_)),
            "{:?}",
            mapped.values
        );
        assert!(matches!(read_whole.values, RowValues::Owned(_)));
        assert_eq!(mapped.values.len(), 300_000);
        assert_eq!(mapped.values[299_999], 299_999.0);
        assert_eq!(mapped, read_whole);
        // A small one is read whatever the choice.
        let json = sidecar(dir.path(), 12);
        let small = read(&json, &manifest, MapChoice::Lazy, &mut warnings).unwrap();
        assert!(matches!(small.values, RowValues::Owned(_)));
        assert_eq!(&small.values[55..], &[55.0, 56.0, 57.0, 58.0, 59.0]);
    }
}
