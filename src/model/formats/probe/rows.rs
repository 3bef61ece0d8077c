//! The manifest's `token_rows` object and its float32 sidecar (docs/manifest.md, "Token
//! rows"), read into [`TokenRows`] beside the window. A problem with either costs the
//! window's token rows alone, with a warning that names the file: the whole-tensor records
//! stand, and where only the sidecar fails the row map stays (its token ids still say which
//! input the window saw, and its row set still pairs the forward).

use std::path::Path;

use crate::model::dump::{TokenRows, Warning, evidence};

/// Reads `json` (the manifest's `token_rows`, as written) and the sidecar it names beside
/// `manifest`. `None`, with a warning pushed to `warnings`, when `token_rows` cannot be
/// read; the row map without row statistics ([`map_only`]), with a warning, when the
/// sidecar cannot.
pub fn read(json: &str, manifest: &Path, warnings: &mut Vec<Warning>) -> Option<TokenRows> {
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
                    values: Vec::new(),
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
    let (values, bytes) = match crate::model::io::read_f32_le(&path) {
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
    rows.values.clear();
    rows.check(0).ok().map(|()| rows)
}

/// The parts of `token_rows` that make the row map, read on their own when the rest is bad.
#[derive(serde::Deserialize)]
struct MapPart {
    stats: Vec<String>,
    map: Vec<crate::model::dump::RowMapEntry>,
    #[serde(default)]
    positions_inferred: bool,
}
