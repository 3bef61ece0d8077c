//! The manifest text of one window (docs/manifest.md), laid out as the Python probe writes it:
//! strict JSON, one top-level field per line, one record per line, fields in the Python
//! probe's order, so dumpview's line-by-line reader takes the fast road on it too.
//!
//! Fields only the native probe writes (optional in the schema): `backend`, `backend_reason`,
//! `budget_bytes`, `staged_bytes`, `storage_identity`, `skipped_over_budget`, `warnings`.

use crate::stats::Summary;
use crate::view::View;

/// The manifest's `probe` marker.
pub const PROBE_NAME: &str = concat!("libdump_probe ", env!("CARGO_PKG_VERSION"));

/// The statistic names, in the manifest's order.
pub const STAT_NAMES: [&str; 9] = [
    "nan_count",
    "inf_count",
    "finite_count",
    "max_abs",
    "min",
    "max",
    "mean",
    "l2",
    "pos_checksum",
];

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
    /// `host`, `acl` or `cuda`.
    pub backend: &'a str,
    /// Why that backend.
    pub backend_reason: &'a str,
    /// The window's staging budget, bytes.
    pub budget_bytes: u64,
    /// Bytes staged by the window's captures.
    pub staged_bytes: u64,
}

fn string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// A statistic as strict JSON: a number, `null`, or `"nan"` / `"inf"` / `"-inf"`.
fn stat(value: Option<f64>) -> String {
    match value {
        None => "null".to_string(),
        Some(v) if v.is_nan() => "\"nan\"".to_string(),
        Some(v) if v.is_infinite() => if v > 0.0 { "\"inf\"" } else { "\"-inf\"" }.to_string(),
        Some(v) => serde_json::to_string(&v).expect("a finite float serializes"),
    }
}

fn list<T: ToString>(items: &[T]) -> String {
    let items: Vec<String> = items.iter().map(T::to_string).collect();
    format!("[{}]", items.join(", "))
}

fn option<T: ToString>(value: Option<T>) -> String {
    value.map_or("null".to_string(), |v| v.to_string())
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

fn record_line(r: &RecordOut) -> String {
    let v = r.view;
    let element_size = v.element_size() as u64;
    let stats = match &r.summary {
        None => "null".to_string(),
        Some(s) => format!(
            "{{\"nan_count\": {}, \"inf_count\": {}, \"finite_count\": {}, \"max_abs\": {}, \"min\": {}, \"max\": {}, \"mean\": {}, \"l2\": {}, \"pos_checksum\": {}}}",
            s.nan_count,
            s.inf_count,
            s.finite_count,
            stat(s.max_abs),
            stat(s.min),
            stat(s.max),
            stat(s.mean),
            stat(Some(s.l2)),
            stat(Some(s.pos_checksum)),
        ),
    };
    let mut line = format!(
        "{{\"seq\": {}, \"stage\": {}, \"occurrence\": {}, \"mode\": \"eager\", \"dtype\": \"{}\", \"shape\": {}, \"stride\": {}, \"storage_offset\": {}, \"element_size\": {}, \"numel\": {}, \"storage_ptr\": {}, \"storage_id\": {}, \"storage_nbytes\": {}, \"data_ptr\": {}, \"device\": \"{}\", \"device_format\": null, \"is_contiguous\": {}, \"stats\": {stats}",
        r.seq,
        string(r.stage),
        r.occurrence,
        v.dtype.name(),
        list(&v.shape),
        list(&v.strides),
        v.storage_offset,
        element_size,
        v.numel,
        v.data,
        option(v.storage_id),
        option(v.storage_bytes),
        v.data as u64 + v.storage_offset * element_size,
        v.device.name(),
        v.is_contiguous(),
    );
    match &r.tensor {
        None => line.push_str(", \"tensor_file\": null"),
        Some(t) => line.push_str(&format!(
            ", \"tensor_file\": {}, \"rows_kept\": {}, \"rows_total\": {}, \"truncated\": {}",
            string(&t.file),
            t.rows_kept,
            t.rows_total,
            t.rows_kept < t.rows_total
        )),
    }
    if let Some(shard) = &v.shard {
        line.push_str(&format!(", \"shard\": {}", string(shard)));
    }
    line.push('}');
    line
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

/// The whole manifest text.
pub fn text(h: &Header, records: &[RecordOut], skipped: &[Skipped], warnings: &[String]) -> String {
    let views: Vec<&View> = records.iter().map(|r| r.view).collect();
    let mut lines: Vec<String> = vec![
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
        format!("\"armed_unix_s\": {}", stat(Some(h.armed_unix_s))),
        format!("\"finished_unix_s\": {}", stat(Some(h.finished_unix_s))),
        format!("\"backend\": {}", string(h.backend)),
        format!("\"backend_reason\": {}", string(h.backend_reason)),
        format!("\"budget_bytes\": {}", h.budget_bytes),
        format!("\"staged_bytes\": {}", h.staged_bytes),
        format!("\"storage_identity\": \"{}\"", storage_identity(&views)),
    ];
    let array = |name: &str, items: Vec<String>| {
        if items.is_empty() {
            format!("\"{name}\": []")
        } else {
            format!("\"{name}\": [\n  {}\n ]", items.join(",\n  "))
        }
    };
    lines.push(array(
        "skipped_over_budget",
        skipped.iter().map(skipped_json).collect(),
    ));
    lines.push(array(
        "warnings",
        warnings.iter().map(|w| string(w)).collect(),
    ));
    lines.push(array("records", records.iter().map(record_line).collect()));
    lines.push("\"input_sets\": []".into());
    format!("{{\n {}\n}}\n", lines.join(",\n "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_are_strict_json() {
        assert_eq!(stat(Some(f64::NAN)), "\"nan\"");
        assert_eq!(stat(Some(f64::NEG_INFINITY)), "\"-inf\"");
        assert_eq!(stat(None), "null");
        assert_eq!(stat(Some(1.0)), "1.0");
        assert_eq!(stat(Some(1e-5)).parse::<f64>().unwrap(), 1e-5);
    }
}
