//! What token rows showed about a pair of records: the verdict on one pair of rows and the
//! evidence a record pair's rows give ([`crate::model::analysis::tokens`] computes them).
//! A leaf: the whole-tensor comparison carries the evidence without depending on the rows'
//! machinery.

use serde::Serialize;

/// The verdict on one aligned pair of rows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RowVerdict {
    /// The worst statistic's difference over its tolerance: below 1 the rows agree.
    pub ratio: f64,
    /// That statistic (`nonfinite_count`, `max_abs`, `l2`, `sum`, `row_checksum`).
    pub stat: &'static str,
}

impl RowVerdict {
    /// Whether the rows diverge.
    pub fn diverges(&self) -> bool {
        self.ratio >= 1.0 || self.ratio.is_nan()
    }
}

/// What a record pair's rows showed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RowEvidence {
    /// Rows compared (same request and position on both sides).
    pub compared: u64,
    /// Of those, rows that diverge.
    pub diverging: u64,
    /// `rows_agree`, `row_changed` (some row differs beyond its tolerance) or
    /// `rows_permuted` (the diverging rows are one multiset in two orders).
    pub kind: &'static str,
    /// The first diverging row's request (A's id) and position.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<(String, u64)>,
    /// Its verdict: the worst statistic over its tolerance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst: Option<RowVerdict>,
    /// The whole-tensor verdict the rows replaced, where they replaced one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replaced: Option<&'static str>,
}
