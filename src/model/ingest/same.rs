//! Telling when two sides of a comparison are one input: the same path given twice, or two
//! files holding the same records. Comparing a capture with itself agrees by construction,
//! which reads like good news; these notes say why it is not.

use std::path::PathBuf;

use crate::model::dump::{Dump, Record, Warning, Window};

/// A note when `a` and `b` are one input: the same canonical paths (`a_paths`, `b_paths` as
/// given on the command line), or windows that hold the same records, metadata and input
/// sets in the same order (byte-identical manifests, a copied directory). `None` otherwise,
/// and when either side holds no window.
pub fn same_input(a_paths: &[PathBuf], a: &Dump, b_paths: &[PathBuf], b: &Dump) -> Option<Warning> {
    let file = b_paths
        .first()
        .or(a_paths.first())
        .cloned()
        .or_else(|| b.windows.first().map(|w| w.source.clone()))?;
    if !a_paths.is_empty() && canonical(a_paths) == canonical(b_paths) {
        return Some(Warning::note(
            file,
            "the same input given twice (one path): every pair agrees by construction",
        ));
    }
    let same = !a.windows.is_empty()
        && a.windows.len() == b.windows.len()
        && a.windows
            .iter()
            .zip(&b.windows)
            .all(|(x, y)| same_content(x, y));
    same.then(|| {
        Warning::note(
            file,
            format!(
                "identical records ({} window(s), the same statistics byte for byte): a copy of one capture, or a change that did not reach the captured stages",
                a.windows.len()
            ),
        )
    })
}

fn canonical(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = paths
        .iter()
        .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()))
        .collect();
    out.sort();
    out
}

/// Everything a window holds except where it was read from (and what follows from the file:
/// the format's facts, the context read beside it). Destructured so that a new field of
/// [`Window`] must be considered here.
fn same_content(a: &Window, b: &Window) -> bool {
    let Window {
        source: _,
        schema_version,
        probe,
        label,
        match_index,
        occurrence,
        attempt: _,
        rank,
        world_size,
        metadata,
        stats_dtype,
        records,
        input_sets,
        run,
        format,
        facts: _,
        context: _,
        token_rows,
    } = a;
    *schema_version == b.schema_version
        && *probe == b.probe
        && *label == b.label
        && *match_index == b.match_index
        && *occurrence == b.occurrence
        && *rank == b.rank
        && *world_size == b.world_size
        && *format == b.format
        && *stats_dtype == b.stats_dtype
        && *metadata == b.metadata
        && *input_sets == b.input_sets
        && *run == b.run
        && *token_rows == b.token_rows
        && records.len() == b.records.len()
        && records
            .iter()
            .zip(&b.records)
            .all(|(x, y)| same_record(x, y))
}

/// A record's content: everything but where ingest resolved its saved tensor
/// (`Record::tensor_resolved` is inside each window's own directory, so a copy's differs).
fn same_record(x: &Record, y: &Record) -> bool {
    x == y
        || (x.tensor_resolved != y.tensor_resolved && {
            let mut y = y.clone();
            y.tensor_resolved.clone_from(&x.tensor_resolved);
            *x == y
        })
}
