//! The manifest text of one window (docs/manifest.md), laid out as the Python probe writes it:
//! strict JSON, one top-level field per line, one record per line, fields in the Python
//! probe's order, so dumpview's line-by-line reader takes the fast road on it too.
//!
//! Fields only the native probe writes (optional in the schema): `backend`, `backend_reason`,
//! `budget_bytes`, `staged_bytes`, `storage_identity`, `skipped_over_budget`, `warnings`.

use std::fmt::Write as _;

use crate::stats::Summary;
use crate::view::View;

/// The manifest's `probe` marker.
pub const PROBE_NAME: &str = concat!("libdump_probe ", env!("CARGO_PKG_VERSION"));

/// The statistic names, in the manifest's order (the `dump_stats` crate's one list).
pub use dump_stats::STAT_NAMES;

/// A saved tensor of a record.
pub struct SavedTensor {
    /// Path relative to the window directory.
    pub file: String,
    /// Rows of dimension 0 saved.
    pub rows_kept: u64,
    /// Rows the tensor had.
    pub rows_total: u64,
}

/// One record to write.
pub struct RecordOut<'a> {
    /// Capture sequence within the window.
    pub seq: u64,
    /// The stage name.
    pub stage: &'a str,
    /// The N of `stage#N`.
    pub occurrence: u32,
    /// Its layout.
    pub view: &'a View,
    /// Its statistics (`None`: null, a view without elements or whose copy failed).
    pub summary: Option<Summary>,
    /// Its saved tensor.
    pub tensor: Option<SavedTensor>,
    /// `local_checksum` of a capture whose shard slices the tensor: the pos_checksum at the
    /// view's own coordinates, as a capture without a shard records it (`Some(None)`: null,
    /// the record's stats are null). `None`: no slicing shard, the field is not written.
    pub local_checksum: Option<Option<f64>>,
}

/// A capture skipped because it would have exceeded the staging budget.
#[derive(Debug, Clone)]
pub struct Skipped {
    /// The seq it would have had.
    pub seq: u64,
    /// Its stage.
    pub stage: String,
    /// The N of `stage#N` it consumed (later captures of the stage keep their numbers).
    pub occurrence: u32,
    /// Bytes its span would have staged.
    pub bytes: u64,
    /// Bytes of the budget that were left.
    pub budget_left: u64,
}

/// The window-level fields.
pub struct Header<'a> {
    /// `arm`'s label.
    pub label: &'a str,
    /// Which distinct label.
    pub match_index: u32,
    /// Which call of that label.
    pub occurrence: u32,
    /// Which run into the same directory (1 unsuffixed).
    pub attempt: u32,
    /// The writer's rank.
    pub rank: u32,
    /// The world size.
    pub world_size: u32,
    /// `arm`'s metadata object.
    pub metadata: &'a serde_json::Value,
    /// `DUMP_PROBE_ROWS`.
    pub tensor_rows: u64,
    /// `DUMP_PROBE_TENSOR`.
    pub tensor_pattern: &'a str,
    /// The writer's host name.
    pub host: &'a str,
    /// The writer's process id.
    pub pid: u32,
    /// Seconds since the epoch at `dp_arm`.
    pub armed_unix_s: f64,
    /// Seconds since the epoch at `dp_finish`.
    pub finished_unix_s: f64,
    /// How the process was started (at `dp_arm`): the manifest's `run`.
    pub run: &'a crate::run_info::RunInfo,
    /// `host`, `acl` or `cuda`.
    pub backend: &'a str,
    /// Why that backend.
    pub backend_reason: &'a str,
    /// The window's staging budget, bytes.
    pub budget_bytes: u64,
    /// Bytes staged by the window's captures.
    pub staged_bytes: u64,
}

/// Appends `s` as a JSON string.
fn push_string(out: &mut String, s: &str) {
    // JSON escapes only '"', '\\' and control characters (RFC 8259, section 7); stage names
    // rarely hold one, and then serde_json's escaping is used.
    if s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        out.push_str(&serde_json::to_string(s).expect("a string serializes"));
    } else {
        out.push('"');
        out.push_str(s);
        out.push('"');
    }
}

fn string(s: &str) -> String {
    let mut out = String::new();
    push_string(&mut out, s);
    out
}

/// Appends a statistic: strict JSON, so NaN and the infinities are strings and a missing value
/// is `null`. Finite values are written shortest-round-trip (zmij, as serde_json does).
fn push_stat(out: &mut String, value: Option<f64>) {
    match value {
        None => out.push_str("null"),
        Some(v) if v.is_nan() => out.push_str("\"nan\""),
        Some(v) if v.is_infinite() => out.push_str(if v > 0.0 { "\"inf\"" } else { "\"-inf\"" }),
        Some(v) => {
            let mut buffer = zmij::Buffer::new();
            let text = buffer.format_finite(v);
            out.push_str(text);
            if !text.contains(['.', 'e', 'E']) {
                // serde_json writes integral floats with ".0"; so does the Python probe.
                out.push_str(".0");
            }
        }
    }
}

#[cfg(test)]
fn stat(value: Option<f64>) -> String {
    let mut out = String::new();
    push_stat(&mut out, value);
    out
}

/// Appends a whole number (itoa: no formatter machinery per number).
fn push_u64(out: &mut String, v: u64) {
    out.push_str(itoa::Buffer::new().format(v));
}

/// Appends `[a, b, c]`.
fn push_list(out: &mut String, items: &[u64]) {
    out.push('[');
    for (k, &item) in items.iter().enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        push_u64(out, item);
    }
    out.push(']');
}

fn push_option(out: &mut String, value: Option<u64>) {
    match value {
        None => out.push_str("null"),
        Some(v) => push_u64(out, v),
    }
}

/// `storage_identity`: how scan can group this window's aliases — `storage_id` when every
/// record with elements carries the caller's id, `storage_ptr` when none does (grouped by
/// address, which also groups buffers that reused one), `mixed` otherwise; `none` without
/// records with elements.
pub fn storage_identity(views: &[&View]) -> &'static str {
    let with_elements: Vec<&&View> = views.iter().filter(|v| v.numel > 0).collect();
    let ids = with_elements
        .iter()
        .filter(|v| v.storage_id.is_some())
        .count();
    match (ids, with_elements.len()) {
        (_, 0) => "none",
        (i, n) if i == n => "storage_id",
        (0, _) => "storage_ptr",
        _ => "mixed",
    }
}

/// Appends one record's line (without the separator).
fn push_record(out: &mut String, r: &RecordOut) {
    let v = r.view;
    let element_size = v.element_size() as u64;
    out.push_str("{\"seq\": ");
    push_u64(out, r.seq);
    out.push_str(", \"stage\": ");
    push_string(out, r.stage);
    out.push_str(", \"occurrence\": ");
    push_u64(out, u64::from(r.occurrence));
    out.push_str(", \"mode\": \"eager\", \"dtype\": \"");
    out.push_str(v.dtype.name());
    out.push_str("\", \"shape\": ");
    push_list(out, &v.shape);
    out.push_str(", \"stride\": ");
    push_list(out, &v.strides);
    out.push_str(", \"storage_offset\": ");
    push_u64(out, v.storage_offset);
    out.push_str(", \"element_size\": ");
    push_u64(out, element_size);
    out.push_str(", \"numel\": ");
    push_u64(out, v.numel);
    out.push_str(", \"storage_ptr\": ");
    push_u64(out, v.data as u64);
    out.push_str(", \"storage_id\": ");
    push_option(out, v.storage_id);
    out.push_str(", \"storage_nbytes\": ");
    push_option(out, v.storage_bytes);
    out.push_str(", \"data_ptr\": ");
    push_u64(out, v.data as u64 + v.storage_offset * element_size);
    out.push_str(", \"device\": \"");
    out.push_str(&v.device.name());
    out.push_str("\", \"device_format\": null, \"is_contiguous\": ");
    out.push_str(if v.is_contiguous() { "true" } else { "false" });
    out.push_str(", \"stats\": ");
    match &r.summary {
        None => out.push_str("null"),
        Some(s) => {
            out.push_str("{\"nan_count\": ");
            push_u64(out, s.nan_count);
            out.push_str(", \"inf_count\": ");
            push_u64(out, s.inf_count);
            out.push_str(", \"finite_count\": ");
            push_u64(out, s.finite_count);
            out.push_str(", \"max_abs\": ");
            push_stat(out, s.max_abs);
            out.push_str(", \"min\": ");
            push_stat(out, s.min);
            out.push_str(", \"max\": ");
            push_stat(out, s.max);
            out.push_str(", \"mean\": ");
            push_stat(out, s.mean);
            out.push_str(", \"l2\": ");
            push_stat(out, Some(s.l2));
            out.push_str(", \"pos_checksum\": ");
            push_stat(out, Some(s.pos_checksum));
            out.push('}');
        }
    }
    match &r.tensor {
        None => out.push_str(", \"tensor_file\": null"),
        Some(t) => {
            out.push_str(", \"tensor_file\": ");
            push_string(out, &t.file);
            out.push_str(", \"rows_kept\": ");
            push_u64(out, t.rows_kept);
            out.push_str(", \"rows_total\": ");
            push_u64(out, t.rows_total);
            out.push_str(", \"truncated\": ");
            out.push_str(if t.rows_kept < t.rows_total {
                "true"
            } else {
                "false"
            });
        }
    }
    if let Some(shard) = &v.shard {
        out.push_str(", \"shard\": ");
        push_string(out, shard);
    }
    if let Some(local) = r.local_checksum {
        out.push_str(", \"local_checksum\": ");
        push_stat(out, local);
    }
    out.push('}');
}

fn skipped_json(s: &Skipped) -> String {
    format!(
        "{{\"seq\": {}, \"stage\": {}, \"occurrence\": {}, \"bytes\": {}, \"budget_left\": {}}}",
        s.seq,
        string(&s.stage),
        s.occurrence,
        s.bytes,
        s.budget_left
    )
}

/// The whole manifest of one window: the header's fields, then `skipped_over_budget`,
/// `warnings`, one line per record, and `input_sets` (always empty natively).
pub fn text(
    h: &Header,
    records: &[RecordOut],
    skipped: &[Skipped],
    warnings: &[String],
    token_rows: Option<&serde_json::Value>,
) -> String {
    let views: Vec<&View> = records.iter().map(|r| r.view).collect();
    let lines: Vec<String> = vec![
        "\"format\": \"dumpview.manifest\"".into(),
        "\"schema_version\": 1".into(),
        format!("\"probe\": {}", string(PROBE_NAME)),
        format!("\"label\": {}", string(h.label)),
        format!("\"match\": {}", h.match_index),
        format!("\"occurrence\": {}", h.occurrence),
        format!("\"attempt\": {}", h.attempt),
        format!("\"rank\": {}", h.rank),
        format!("\"world_size\": {}", h.world_size),
        format!("\"metadata\": {}", h.metadata),
        format!("\"stat_names\": [{}]", STAT_NAMES.map(string).join(", ")),
        "\"stats_dtype\": \"float64\"".into(),
        format!("\"tensor_rows\": {}", h.tensor_rows),
        format!("\"tensor_pattern\": {}", string(h.tensor_pattern)),
        format!("\"host\": {}", string(h.host)),
        format!("\"pid\": {}", h.pid),
        format!("\"armed_unix_s\": {}", stat_text(h.armed_unix_s)),
        format!("\"finished_unix_s\": {}", stat_text(h.finished_unix_s)),
        format!("\"run\": {}", h.run.to_json()),
        format!("\"backend\": {}", string(h.backend)),
        format!("\"backend_reason\": {}", string(h.backend_reason)),
        format!("\"budget_bytes\": {}", h.budget_bytes),
        format!("\"staged_bytes\": {}", h.staged_bytes),
        format!("\"storage_identity\": \"{}\"", storage_identity(&views)),
    ];
    // About 600 bytes per record line.
    let mut out = String::with_capacity(4096 + records.len() * 700);
    out.push_str("{\n ");
    for line in &lines {
        out.push_str(line);
        out.push_str(",\n ");
    }
    let array = |out: &mut String, name: &str, items: &mut dyn Iterator<Item = String>| {
        let _ = write!(out, "\"{name}\": [");
        let mut any = false;
        for item in items {
            out.push_str(if any { ",\n  " } else { "\n  " });
            out.push_str(&item);
            any = true;
        }
        out.push_str(if any { "\n ],\n " } else { "],\n " });
    };
    array(
        &mut out,
        "skipped_over_budget",
        &mut skipped.iter().map(skipped_json),
    );
    array(
        &mut out,
        "warnings",
        &mut warnings.iter().map(|w| string(w)),
    );
    out.push_str("\"records\": [");
    for (k, record) in records.iter().enumerate() {
        out.push_str(if k > 0 { ",\n  " } else { "\n  " });
        push_record(&mut out, record);
    }
    out.push_str(if records.is_empty() {
        "],\n "
    } else {
        "\n ],\n "
    });
    out.push_str("\"input_sets\": []");
    if let Some(t) = token_rows {
        let _ = write!(out, ",\n \"token_rows\": {t}");
    }
    out.push_str("\n}\n");
    out
}

fn stat_text(v: f64) -> String {
    let mut out = String::new();
    push_stat(&mut out, Some(v));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        for text in [
            "layers.0.q",
            "注意力/q",
            "a\"b",
            "back\\slash",
            "tab\there",
            "\u{7f}del",
        ] {
            let mut out = String::new();
            push_string(&mut out, text);
            assert_eq!(out, serde_json::to_string(text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn statistics_are_strict_json() {
        assert_eq!(stat(Some(f64::NAN)), "\"nan\"");
        assert_eq!(stat(Some(f64::NEG_INFINITY)), "\"-inf\"");
        assert_eq!(stat(None), "null");
        assert_eq!(stat(Some(1.0)), "1.0");
        assert_eq!(stat(Some(1e-5)).parse::<f64>().unwrap(), 1e-5);
    }

    #[test]
    fn the_stats_object_has_the_crates_names_in_order() {
        // push_record writes the statistics field by field (no map per record): it must follow
        // dump_stats' list, which a statistic added to the crate changes.
        let view = crate::view::View::for_tests(crate::dtype::Dtype::Float32, &[2], &[1]);
        let summary = Summary {
            nan_count: 0,
            inf_count: 0,
            finite_count: 2,
            max_abs: Some(2.0),
            min: Some(1.0),
            max: Some(2.0),
            mean: Some(1.5),
            sum: 3.0,
            l2: 5f64.sqrt(),
            pos_checksum: 0.25,
        };
        let record = RecordOut {
            seq: 0,
            stage: "s",
            occurrence: 1,
            view: &view,
            summary: Some(summary),
            tensor: None,
            local_checksum: None,
        };
        let mut out = String::new();
        push_record(&mut out, &record);
        let (_, stats) = out.split_once("\"stats\": {").unwrap();
        let (stats, _) = stats.split_once('}').unwrap();
        let keys: Vec<&str> = stats
            .split(", ")
            .map(|field| field.split_once(": ").unwrap().0.trim_matches('"'))
            .collect();
        assert_eq!(keys, STAT_NAMES);
    }

    #[test]
    fn local_checksum_follows_shard_only_where_given() {
        let mut view = crate::view::View::for_tests(crate::dtype::Dtype::Float32, &[2], &[1]);
        view.shard = Some("tp:0".into());
        let line = |local_checksum: Option<Option<f64>>| {
            let mut out = String::new();
            let record = RecordOut {
                seq: 0,
                stage: "s",
                occurrence: 1,
                view: &view,
                summary: None,
                tensor: None,
                local_checksum,
            };
            push_record(&mut out, &record);
            out
        };
        assert!(line(None).ends_with("\"shard\": \"tp:0\"}"));
        assert!(line(Some(Some(0.5))).ends_with("\"shard\": \"tp:0\", \"local_checksum\": 0.5}"));
        assert!(line(Some(None)).ends_with("\"local_checksum\": null}"));
        assert!(line(Some(Some(f64::NAN))).ends_with("\"local_checksum\": \"nan\"}"));
    }
}
