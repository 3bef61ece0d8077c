//! Windowed mega-kernel dumps (schemaVersion 4): `rank_R/window_NNNN/manifest.json` with the
//! L0 invocations or L1 tasks of one rank's capture window, every tensor in a torch.save file
//! beside it (docs/windowed.md).
//!
//! One manifest becomes one [`Window`] window with one [`Record`] per saved tensor. The dump
//! records no statistics, so they are computed here from the tensor files, several files at
//! once on rayon's threads, with the project's own reader (no pickle code runs). A tensor file
//! that is missing or unreadable costs its record's statistics and a warning naming the file,
//! never the window; a manifest cut short keeps what it holds, with a warning.
//!
//! [`Record`]: crate::model::dump::Record

mod error;
mod format;
mod records;
mod schema;
pub mod stats;

use std::path::Path;
use std::sync::Arc;

use rayon::prelude::*;

use crate::model::dump::{Context, FormatFacts, SourceFormat, Warning, Window, dims, strides};
use crate::model::formats::HEAD_BYTES;
use crate::model::io::MapChoice;
pub use error::WindowedError;
pub use format::Windowed;

/// A windowed dump's facts: no input ids; non-finite elements counted from the tensor files.
pub static FACTS: FormatFacts = FormatFacts {
    name: "windowed dump (schemaVersion 4)",
    records_input_ids: false,
    missing_data_advice: "The two captures recorded different sets of tensors.",
    probe_conventions: false,
};

/// The only `schemaVersion` this build reads.
pub const SCHEMA_VERSION: u64 = 4;

/// At most this many warnings about unreadable tensor files per window; the rest are counted.
const MAX_FILE_WARNINGS: usize = 10;

/// Whether manifest bytes are a windowed dump's.
///
/// True when the top-level object's first key is `"schemaVersion"` (the writer puts it first),
/// or when `"schemaVersion"` appears in the first 4 KiB of a file that does not call itself a
/// dumpview probe manifest (whose metadata may hold any key).
pub fn is_windowed(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(HEAD_BYTES)];
    let body = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let mut rest = body.trim_ascii_start();
    if let Some(after) = rest.strip_prefix(b"{") {
        rest = after.trim_ascii_start();
        if rest.starts_with(b"\"schemaVersion\"") {
            return true;
        }
    }
    memchr::memmem::find(head, b"\"schemaVersion\"").is_some()
        && memchr::memmem::find(head, b"\"dumpview.manifest\"").is_none()
}

/// The tensor files the manifest in `bytes` (read from `path`) names, resolved inside its
/// window directory (a path the evidence rule refuses is left out): what [`load_window`]
/// reads the statistics from. Reads the manifest only.
pub fn statistics_files(path: &Path, bytes: &[u8]) -> Vec<std::path::PathBuf> {
    let window_dir = path.parent().unwrap_or(Path::new("."));
    records::plan(&schema::read(bytes), window_dir)
        .into_iter()
        .filter_map(|p| p.source.map(|s| s.path))
        .collect()
}

/// Loads one `rank_R/window_NNNN/manifest.json` as a window.
///
/// The window's label is `window_NNNN`, its match the window number as written (0-based),
/// its occurrence 1, its rank the manifest's `rank` (else the `rank_R` directory's).
/// Statistics come from the tensor files; see docs/windowed.md for the whole mapping.
///
/// # Errors
/// A message naming the file when it is not a windowed manifest of schemaVersion 4, when it
/// is cut short before its header was read, or when neither it nor its directories say the
/// rank and window number.
pub fn load_window(path: &Path, bytes: &[u8]) -> Result<(Window, Vec<Warning>), WindowedError> {
    load_window_with(path, bytes, MapChoice::Lazy)
}

/// [`load_window`], with the saved tensors read under `map` ([`MapChoice::Never`] for a
/// watched window: never mapped).
///
/// # Errors
/// As [`load_window`].
pub fn load_window_with(
    path: &Path,
    bytes: &[u8],
    map: MapChoice,
) -> Result<(Window, Vec<Warning>), WindowedError> {
    let read = schema::read(bytes);
    let error = |cause: WindowedError| cause;
    let mut warnings = Vec::new();
    let warn = |warnings: &mut Vec<Warning>, message: String| {
        warnings.push(Warning::lost(path.to_path_buf(), message));
    };

    let version = match read.header.get("schemaVersion") {
        Some(v) => v
            .as_u64()
            .ok_or_else(|| error(WindowedError::SchemaVersionType(v.clone())))?,
        None => {
            return Err(error(match read.stopped {
                Some(stop) => WindowedError::NotJson(stop),
                None => WindowedError::NoSchemaVersion,
            }));
        }
    };
    if version != SCHEMA_VERSION {
        return Err(error(WindowedError::Version { found: version }));
    }
    let window_dir = path.parent().unwrap_or(Path::new("."));
    let (rank_dir, window_name) = directory_numbers(window_dir);
    let rank =
        header_number(&read, "rank", rank_dir, "rank_<R>", path, &mut warnings).map_err(error)?;
    let window = header_number(
        &read,
        "windowIndex",
        window_name,
        "window_<NNNN>",
        path,
        &mut warnings,
    )
    .map_err(error)?;

    let mut planned = records::plan(&read, window_dir);
    if let Some(stop) = &read.stopped {
        let expected = read
            .header
            .get("invocationCount")
            .and_then(serde_json::Value::as_u64)
            .map_or(String::new(), |n| format!(" of {n}"));
        let begun = read.invocations.len();
        let whole = read.invocations.iter().filter(|i| i.complete).count();
        warn(
            &mut warnings,
            format!(
                "truncated or damaged: stops being a valid manifest at byte {} ({}); kept the {} records before it ({whole}{expected} invocations whole{})",
                byte_offset(bytes, stop),
                bare_message(stop),
                planned.len(),
                if begun > whole { ", one cut short" } else { "" }
            ),
        );
    }
    count_checks(&read, path, &mut warnings);

    // The statistics: every tensor file at once (each large one split again inside).
    let mut measured = Vec::new();
    planned
        .par_iter()
        .map(|p| {
            p.source
                .as_ref()
                .map(|s| stats::measure(&s.path, &s.name, map))
        })
        .collect_into_vec(&mut measured);

    warnings.extend(apply_measurements(&mut planned, measured, path));

    let mut context = Context::default();
    let mut records = Vec::with_capacity(planned.len());
    for (i, p) in planned.into_iter().enumerate() {
        context.groups.push(p.context);
        context.record_group.push(i as u32);
        records.push(p.record);
    }
    let level = read
        .header
        .get("level")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("level unknown");
    let mut metadata = read.header.clone();
    for mapped in ["rank", "windowIndex"] {
        metadata.remove(mapped);
    }
    let manifest = Window {
        source: path.to_path_buf(),
        schema_version: SCHEMA_VERSION as u32,
        probe: format!("windowed tensor dump, schemaVersion {SCHEMA_VERSION}, {level}"),
        label: format!("window_{window:04}"),
        match_index: window,
        occurrence: 1,
        attempt: 1,
        rank,
        // Not recorded by the writer: 0 means unknown (unless a `worldSize` field says).
        world_size: read
            .header
            .get("worldSize")
            .and_then(serde_json::Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        metadata,
        stats_dtype: Some("float64".into()),
        records,
        input_sets: Vec::new(),
        run: None,
        format: SourceFormat::Windowed,
        facts: &FACTS,
        context: Some(Arc::new(context)),
        token_rows: None,
    };
    Ok((manifest, warnings))
}

/// Puts each file's statistics on its record (the file's shape where the manifest gave none)
/// and returns the warnings about files: unreadable, or other than the manifest says.
fn apply_measurements(
    planned: &mut [records::Planned],
    measured: Vec<Option<Result<stats::Measured, String>>>,
    path: &Path,
) -> Vec<Warning> {
    let mut file_warnings = Vec::new();
    for (p, result) in planned.iter_mut().zip(measured) {
        let key = p.record.key();
        let Some(source) = &p.source else {
            let problem = p.problem.as_deref().unwrap_or("no file");
            file_warnings.push(Warning::lost(
                path.to_path_buf(),
                format!("{key} (seq {}): {problem}", p.record.seq),
            ));
            continue;
        };
        match result {
            Some(Ok(m)) => {
                if !p.shape_known {
                    let shape: Vec<u64> = m.shape.iter().map(|&d| d as u64).collect();
                    let contiguous = records::contiguous(&shape);
                    p.record.numel = shape.iter().product();
                    p.record.shape = dims(&shape);
                    p.record.stride = strides(&contiguous);
                }
                if let Some(stored) = source.stored_dtype.filter(|d| *d != m.dtype) {
                    file_warnings.push(Warning::lost(
                        source.shown.clone(),
                        format!(
                            "{key}: the file holds {}, the manifest says storedDtype {}",
                            m.dtype, stored
                        ),
                    ));
                }
                let numel: usize = m.shape.iter().product();
                if let Some(expected) = source.stored_numel.filter(|&n| n != numel as u64) {
                    file_warnings.push(Warning::lost(source.shown.clone(), format!(
                            "{key}: the file holds {numel} elements (shape {:?}), the manifest {expected}; statistics are of the file",
                            m.shape
                        )));
                }
                p.record.stats = m.stats;
            }
            Some(Err(problem)) => file_warnings.push(Warning::lost(
                source.shown.clone(),
                format!("{key}: {problem}; no statistics for this record"),
            )),
            None => {}
        }
    }
    if file_warnings.len() > MAX_FILE_WARNINGS {
        let more = file_warnings.len() - MAX_FILE_WARNINGS;
        file_warnings.truncate(MAX_FILE_WARNINGS);
        file_warnings.push(Warning::lost(
            path.to_path_buf(),
            format!("… and {more} more problems with this window's tensor files"),
        ));
    }
    file_warnings
}

/// The numbers in `…/rank_R/window_NNNN`, where the directories are named so.
fn directory_numbers(window_dir: &Path) -> (Option<u32>, Option<u32>) {
    let number = |dir: Option<&Path>, prefix: &str| {
        dir.and_then(Path::file_name)
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|n| n.parse::<u32>().ok())
    };
    (
        number(window_dir.parent(), "rank_"),
        number(Some(window_dir), "window_"),
    )
}

/// A header number (`rank`, `windowIndex`), else the directory's; a warning when both exist
/// and differ (the manifest's is used).
fn header_number(
    read: &schema::Read,
    field: &'static str,
    from_dir: Option<u32>,
    dir_pattern: &'static str,
    path: &Path,
    warnings: &mut Vec<Warning>,
) -> Result<u32, WindowedError> {
    match read.header.get(field) {
        Some(v) => {
            let n = v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| WindowedError::NumberType {
                    field,
                    value: v.clone(),
                })?;
            if let Some(d) = from_dir.filter(|&d| d != n) {
                warnings.push(Warning::lost(
                    path.to_path_buf(),
                    format!(
                        "`{field}` is {n} but the directory says {d} ({dir_pattern}); using {n}"
                    ),
                ));
            }
            Ok(n)
        }
        None => from_dir.ok_or(WindowedError::NoNumber { field, dir_pattern }),
    }
}

/// `tensorCount` / `taskCount` against what the lists hold, for invocations and tasks read whole.
fn count_checks(read: &schema::Read, path: &Path, warnings: &mut Vec<Warning>) {
    let mut warn = |message: String| {
        warnings.push(Warning::lost(path.to_path_buf(), message));
    };
    for inv in read.invocations.iter().filter(|i| i.complete) {
        let id = inv.invocation_id.map_or("?".into(), |i| i.to_string());
        let (listed, what) = if inv.has_tasks {
            (inv.tasks.len(), "tasks")
        } else {
            (inv.tensors.len(), "tensors")
        };
        if let Some(n) = inv.declared_count.filter(|&n| n != listed as u64) {
            warn(format!(
                "invocation {id} lists {listed} {what} but declares {n}"
            ));
        }
        for task in &inv.tasks {
            if let Some(n) = task
                .tensor_count
                .filter(|&n| n != task.tensors.len() as u64)
            {
                warn(format!(
                    "invocation {id}, task {} ({}): lists {} tensors but declares {n}",
                    task.task_id.map_or("?".into(), |i| i.to_string()),
                    task.stage,
                    task.tensors.len()
                ));
            }
        }
    }
    if let Some(n) = read
        .header
        .get("invocationCount")
        .and_then(serde_json::Value::as_u64)
        .filter(|&n| read.stopped.is_none() && n != read.invocations.len() as u64)
    {
        warn(format!(
            "lists {} invocations but declares invocationCount {n}",
            read.invocations.len()
        ));
    }
}

/// The byte where reading stopped, from serde_json's line and column.
fn byte_offset(bytes: &[u8], stop: &serde_json::Error) -> usize {
    let line_start = if stop.line() <= 1 {
        0
    } else {
        memchr::memchr_iter(b'\n', bytes)
            .nth(stop.line() - 2)
            .map_or(bytes.len(), |i| i + 1)
    };
    (line_start + stop.column()).min(bytes.len())
}

/// serde_json's message without its ` at line L column C` suffix.
fn bare_message(stop: &serde_json::Error) -> String {
    let text = stop.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windowed_manifests_are_told_from_probe_manifests() {
        assert!(is_windowed(
            b"{\n  \"schemaVersion\": 4,\n  \"level\": \"L0\"}"
        ));
        assert!(is_windowed(b"\xEF\xBB\xBF { \"schemaVersion\": 4 }"));
        assert!(is_windowed(b"{\"level\": \"L1\", \"schemaVersion\": 4}"));
        assert!(!is_windowed(
            b"{\"format\": \"dumpview.manifest\", \"metadata\": {\"schemaVersion\": 2}}"
        ));
        assert!(!is_windowed(b"{\"format\": \"dumpview.manifest\"}"));
    }

    #[test]
    fn header_errors_name_the_problem() {
        use crate::model::formats::Format;
        let path = Path::new("/x/rank_0/window_0000/manifest.json");
        let err = Windowed.read(path, b"{\"schemaVersion\": 3}").unwrap_err();
        assert!(
            err.to_string().contains("schemaVersion 3 is not supported"),
            "{err}"
        );
        let err = Windowed
            .read(path, b"{\"schemaVersion\": 4, \"rank\": \"0\"}")
            .unwrap_err();
        assert!(err.to_string().contains("`rank` is \"0\""), "{err}");
        let err = Windowed
            .read(Path::new("m.json"), b"{\"schemaVersion\": 4}")
            .unwrap_err();
        assert!(err.to_string().starts_with("m.json: no `rank`"), "{err}");
        let err = Windowed.read(path, b"{\"schema").unwrap_err();
        assert!(
            err.to_string().contains("not a valid windowed manifest"),
            "{err}"
        );
    }

    #[test]
    fn directories_fill_in_what_the_header_lacks() {
        let path = Path::new("/nonexistent/rank_3/window_0012/manifest.json");
        let (m, warnings) =
            load_window(path, b"{\"schemaVersion\": 4, \"invocations\": []}").expect("loads");
        assert_eq!(
            (m.rank, m.match_index, m.label.as_str()),
            (3, 12, "window_0012")
        );
        assert_eq!(m.format, SourceFormat::Windowed);
        assert!(warnings.is_empty(), "{warnings:?}");
        let (m, warnings) = load_window(
            path,
            b"{\"schemaVersion\": 4, \"rank\": 1, \"windowIndex\": 12, \"invocations\": []}",
        )
        .unwrap();
        assert_eq!(m.rank, 1);
        assert!(
            warnings[0]
                .message
                .contains("`rank` is 1 but the directory says 3")
        );
    }

    #[test]
    fn stop_offsets_point_into_the_bytes() {
        let text = b"{\n  \"a\": [1,\n  2";
        let err = serde_json::from_slice::<serde_json::Value>(text).unwrap_err();
        assert_eq!(byte_offset(text, &err), text.len());
        assert_eq!(bare_message(&err), "EOF while parsing a list");
    }
}
