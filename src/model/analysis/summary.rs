//! A one-screen summary of one label window: what was captured and the first non-finite record.

use std::collections::BTreeSet;

use crate::model::analysis::scan::{NonFinite, WindowScan};
use crate::model::dump::{Mode, Window};

/// Counts and the first non-finite record of one manifest.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WindowSummary {
    /// How the window is named to the user (usually its manifest path).
    pub source: String,
    /// The window's label (request id).
    pub label: String,
    /// The window's rank.
    pub rank: u32,
    /// Which distinct label this is (`DUMP_PROBE_MATCH`, 1-based; windowed: 0-based window
    /// number).
    #[serde(rename = "match")]
    pub match_index: u32,
    /// Which call of that label this is (`DUMP_PROBE_OCCURRENCE`, 1-based).
    pub occurrence: u32,
    /// All records.
    pub records: usize,
    /// Records read from graph slots after a replay.
    pub graph_records: usize,
    /// Distinct stage names.
    pub stages: usize,
    /// Records whose full tensor was saved.
    pub saved_tensors: usize,
    /// `capture_inputs()` sets saved for replay.
    pub input_sets: usize,
    /// `stage#occurrence` of the first record, in capture order, holding NaN or infinity.
    pub first_nonfinite: Option<NonFinite>,
    /// Length of `metadata.token_ids`, when present.
    pub token_count: Option<usize>,
}

impl WindowSummary {
    /// Summarises `manifest`, whose scan is `scan`; `source` is how to name it to a user.
    pub fn of(manifest: &Window, scan: &WindowScan, source: &str) -> WindowSummary {
        let stages: BTreeSet<&str> = manifest.records.iter().map(|r| r.stage.as_str()).collect();
        WindowSummary {
            source: source.to_string(),
            label: manifest.label.clone(),
            rank: manifest.rank,
            match_index: manifest.match_index,
            occurrence: manifest.occurrence,
            records: manifest.records.len(),
            graph_records: manifest
                .records
                .iter()
                .filter(|r| r.mode == Mode::Graph)
                .count(),
            stages: stages.len(),
            saved_tensors: manifest
                .records
                .iter()
                .filter(|r| r.tensor_file.is_some())
                .count(),
            input_sets: manifest.input_sets.len(),
            first_nonfinite: scan.first_nonfinite.clone(),
            token_count: manifest.token_ids().map(|ids| ids.len()),
        }
    }
}
