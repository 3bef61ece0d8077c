//! The values of the single-run findings: what was found, on which records, and what could not
//! be checked.

use serde::Serialize;

use crate::model::dump::{Record, Window};

/// Which single-run rule a finding comes from (docs/scan.md, "Findings from one run").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The pieces of a sliced (`tp:D`) stage hold the same values on several ranks.
    DuplicateShards,
    /// A stage's output is exactly zero on ranks that received tokens, non-zero on another.
    SilentRank,
    /// A stage's output is bit-identical to its previous occurrence while its input and its
    /// rows changed.
    StaleOutput,
}

impl Kind {
    /// The name a user reads: `duplicate shards`, `silent rank`, `stale output`.
    pub fn title(self) -> &'static str {
        match self {
            Kind::DuplicateShards => "duplicate shards",
            Kind::SilentRank => "silent rank",
            Kind::StaleOutput => "stale output",
        }
    }
}

/// One record a finding rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordRef {
    /// The window's rank.
    pub rank: u32,
    /// The window's label.
    pub label: String,
    /// The window's call of that label (1-based).
    pub call: u32,
    /// `stage#occurrence` within the window.
    pub key: String,
    /// The record's `seq` in its window.
    pub seq: u64,
    /// The manifest the record was read from.
    pub source: String,
}

impl RecordRef {
    /// The reference to `record` of `window`.
    pub fn of(window: &Window, record: &Record) -> RecordRef {
        RecordRef {
            rank: window.rank,
            label: window.label.clone(),
            call: window.occurrence,
            key: record.key(),
            seq: record.seq,
            source: window.source.display().to_string(),
        }
    }

    /// `rank 1 decode call 3 layers.0.attn_out#1 (seq 4)`.
    pub fn describe(&self) -> String {
        format!(
            "rank {} {:?} call {} {} (seq {})",
            self.rank, self.label, self.call, self.key, self.seq
        )
    }
}

/// One single-run finding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// The rule.
    pub kind: Kind,
    /// The stage name.
    pub stage: String,
    /// `stage#occurrence` of the record the finding is about.
    pub key: String,
    /// The ranks it names (sorted): the ranks holding equal pieces, the silent ranks, or the
    /// rank of the stale record.
    pub ranks: Vec<u32>,
    /// The records it rests on.
    pub records: Vec<RecordRef>,
    /// What was found, in one plain sentence.
    pub sentence: String,
    /// Where to look, in one sentence (the loader, the dispatch, the buffer).
    pub look_at: String,
}

impl Finding {
    /// `DUPLICATE SHARDS: <sentence>. Look at <look_at>.`: the finding in one paragraph.
    pub fn paragraph(&self) -> String {
        format!(
            "{}: {}. Look at {}.",
            self.kind.title().to_uppercase(),
            self.sentence,
            self.look_at
        )
    }

    /// The records the finding is about, without those cited only as evidence: every equal
    /// piece; the silent ranks' records (not the non-zero rank's); the stale record (not the
    /// occurrence it repeats nor the records before them).
    pub fn subjects(&self) -> &[RecordRef] {
        match self.kind {
            Kind::DuplicateShards => &self.records,
            Kind::SilentRank => &self.records[..self.records.len().saturating_sub(1)],
            Kind::StaleOutput => &self.records[..self.records.len().min(1)],
        }
    }
}

/// A rule whose evidence is missing for some of the capture: said once per rule and reason,
/// never silence and never a guess.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct NotChecked {
    /// The rule.
    pub kind: Kind,
    /// Why, in words, with a count of what was passed over.
    pub reason: String,
}

/// Every single-run finding of one capture, and what could not be checked.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SingleRun {
    /// In rule order, then capture order.
    pub findings: Vec<Finding>,
    /// One line per rule and reason.
    pub not_checked: Vec<NotChecked>,
}

impl SingleRun {
    /// True when a rule found something.
    pub fn found_something(&self) -> bool {
        !self.findings.is_empty()
    }
}
