//! A one-screen summary of one label window: what was captured and the first non-finite record.

use std::collections::BTreeSet;

use crate::model::dump::{Window, Mode};

/// Counts and the first non-finite record of one manifest.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WindowSummary {
    pub source: String,
    pub label: String,
    pub rank: u32,
    #[serde(rename = "match")]
    pub match_index: u32,
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

/// Where the first NaN/inf was captured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NonFinite {
    pub key: String,
    pub seq: u64,
    pub nan_count: u64,
    pub inf_count: u64,
}

impl WindowSummary {
    /// Summarises `manifest`; `source` is how to name it to a user.
    pub fn of(manifest: &Window, source: &str) -> WindowSummary {
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
            first_nonfinite: manifest.first_nonfinite().map(|r| {
                let stats = r.stats.as_ref().expect("first_nonfinite has stats");
                NonFinite {
                    key: r.key(),
                    seq: r.seq,
                    nan_count: stats.nan_count,
                    inf_count: stats.inf_count,
                }
            }),
            token_count: manifest.token_ids().map(|ids| ids.len()),
        }
    }

    /// One line per fact, for the terminal.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "{}\n  label {:?} (match {}, call {}), rank {}: {} records ({} graph), {} stages, {} saved tensors, {} input sets",
            self.source,
            self.label,
            self.match_index,
            self.occurrence,
            self.rank,
            self.records,
            self.graph_records,
            self.stages,
            self.saved_tensors,
            self.input_sets,
        );
        if let Some(n) = self.token_count {
            out.push_str(&format!(", {n} token ids"));
        }
        match &self.first_nonfinite {
            Some(nf) => out.push_str(&format!(
                "\n  first non-finite: {} (seq {}, {} NaN, {} inf)",
                nf.key, nf.seq, nf.nan_count, nf.inf_count
            )),
            None => out.push_str("\n  first non-finite: none"),
        }
        out
    }
}
