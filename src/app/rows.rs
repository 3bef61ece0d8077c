//! The timeline of one window (pair): one row per stage#occurrence, in A's capture order,
//! then B's unpaired stages, with everything the workbench marks on a row.

use std::collections::{HashMap, HashSet};

use crate::model::analysis::compare::Verdict;
use crate::model::analysis::diff::WindowDiff;
use crate::model::analysis::replicated::ReplicationFinding;
use crate::model::analysis::scan::WindowScan;
use crate::model::dump::{Piece, Record, Window};

/// How a row compares across the two captures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowState {
    /// Scan mode: nothing to compare with.
    Single,
    Agrees,
    Diverges,
    ValuesMoved,
    /// The position checksum moved within a rounding bound above one moved row's shift.
    ChecksumInconclusive,
    /// No statistics to compare (on either side, or on one side only): missing evidence.
    NotCompared,
    Structural,
    NonFiniteDiff,
    OnlyA,
    OnlyB,
}

/// One timeline row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `stage#occurrence`.
    pub key: String,
    /// Index of the record in A's / B's window.
    pub a: Option<usize>,
    pub b: Option<usize>,
    /// Index into the window diff's `pairs`, when paired.
    pub pair: Option<usize>,
    pub state: RowState,
    /// NaN/inf on side A / B.
    pub nonfinite_a: bool,
    pub nonfinite_b: bool,
    /// Member of an alias group (either side) / of a stride-conflicting group.
    pub aliased: bool,
    pub conflict: bool,
    pub first_nonfinite: bool,
    pub first_divergence: bool,
    /// A `replicated` stage whose ranks disagree, on either side, involving this window's
    /// rank ([`crate::model::analysis::replicated::ReplicationFinding`]).
    pub replicated: bool,
    /// A record a finding from one run rests on (duplicate shards, silent rank, stale output;
    /// [`crate::model::analysis::single_run`]), in this window of either capture.
    pub single_run: bool,
    /// A write whose values agree but which B (or A) put elsewhere in its pool
    /// ([`crate::model::analysis::layout_diff::MovedWrite`]).
    pub moved_write: bool,
    /// log10 of max_abs on each side (None: no finite values or not captured).
    pub log_a: Option<f64>,
    pub log_b: Option<f64>,
    /// A's / B's window holds a captured input set of this `stage#N` (`capture_inputs`):
    /// `p` replays the operator on it.
    pub input_a: bool,
    pub input_b: bool,
}

impl Row {
    /// True for rows `n`/`N` stop at: anything a user should look at.
    pub fn is_finding(&self) -> bool {
        self.first_nonfinite
            || self.first_divergence
            || self.replicated
            || self.single_run
            || self.moved_write
            || self.conflict
            || matches!(
                self.state,
                RowState::Diverges
                    | RowState::ValuesMoved
                    | RowState::Structural
                    | RowState::NonFiniteDiff
            )
            || (self.nonfinite_a && self.state == RowState::Single)
    }
}

impl Row {
    /// True for rows the filter (`a`) keeps: anything but an agreeing pair (diff mode; a
    /// pair that agrees stays when it holds NaN or inf or is in a stride-conflicting alias
    /// group), and in scan mode records that hold NaN or inf or are in a stride-conflicting
    /// alias group. Rows of one side only (missing evidence) are kept.
    pub fn kept_by_filter(&self) -> bool {
        match self.state {
            RowState::Single => self.nonfinite_a || self.conflict || self.single_run,
            RowState::Agrees => {
                self.conflict
                    || self.nonfinite_a
                    || self.nonfinite_b
                    || self.replicated
                    || self.single_run
                    || self.moved_write
            }
            _ => true,
        }
    }
}

/// log10(max_abs) for the strip plot; +inf marks a record holding NaN or inf.
fn log_max_abs(record: &Record) -> Option<f64> {
    let stats = record.stats.as_ref()?;
    if stats.has_nonfinite() {
        return Some(f64::INFINITY);
    }
    let m = stats.max_abs?;
    (m.is_finite() && m > 0.0).then(|| m.log10())
}

fn nonfinite(record: &Record) -> bool {
    record.stats.as_ref().is_some_and(|s| s.has_nonfinite())
}

/// The `stage#N` keys of the input sets `window` captured.
fn input_keys(window: &Window) -> HashSet<String> {
    window
        .input_sets
        .iter()
        .map(|s| format!("{}#{}", s.stage, s.occurrence))
        .collect()
}

fn alias_keys(scan: &WindowScan) -> (HashSet<String>, HashSet<String>) {
    let mut aliased = HashSet::new();
    let mut conflict = HashSet::new();
    for g in &scan.alias_groups {
        for m in &g.members {
            aliased.insert(m.key.clone());
            if g.stride_conflict {
                conflict.insert(m.key.clone());
            }
        }
    }
    (aliased, conflict)
}

/// Rows of a single window (scan mode).
pub fn scan_rows(window: &Window, scan: &WindowScan) -> Vec<Row> {
    let (aliased, conflict) = alias_keys(scan);
    let inputs = input_keys(window);
    let first = scan.first_nonfinite.as_ref().map(|n| n.position);
    window
        .records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let key = r.key();
            Row {
                aliased: aliased.contains(&key),
                conflict: conflict.contains(&key),
                input_a: inputs.contains(&key),
                input_b: false,
                key,
                a: Some(i),
                b: None,
                pair: None,
                state: RowState::Single,
                nonfinite_a: nonfinite(r),
                nonfinite_b: false,
                first_nonfinite: first == Some(i),
                first_divergence: false,
                replicated: false,
                single_run: false,
                moved_write: false,
                log_a: log_max_abs(r),
                log_b: None,
            }
        })
        .collect()
}

/// The keys of the replicated findings that concern the windows `a` and `b`: a finding of
/// side A naming `a`'s rank (as the group's or the disagreeing rank), of side B naming `b`'s.
pub fn replicated_keys(findings: &[ReplicationFinding], a: &Window, b: &Window) -> HashSet<String> {
    findings
        .iter()
        .filter(|f| {
            let rank = if f.side == 'a' { a.rank } else { b.rank };
            f.rank == rank || f.other_rank == rank
        })
        .map(|f| f.key.clone())
        .collect()
}

/// Rows of a window pair (diff mode): A's order, then B's unpaired stages; `replicated`
/// holds the keys of the replicated findings about these windows ([`replicated_keys`]).
pub fn diff_rows(
    a: &Window,
    b: &Window,
    scan_a: &WindowScan,
    scan_b: &WindowScan,
    diff: &WindowDiff,
    replicated: &HashSet<String>,
) -> Vec<Row> {
    let (mut aliased, mut conflict) = alias_keys(scan_a);
    let (aliased_b, conflict_b) = alias_keys(scan_b);
    aliased.extend(aliased_b);
    conflict.extend(conflict_b);
    let (inputs_a, inputs_b) = (input_keys(a), input_keys(b));
    let by_key_b: HashMap<(&str, u32), usize> = b
        .records
        .iter()
        .enumerate()
        .rev()
        .map(|(i, r)| ((r.stage.as_ref(), r.occurrence), i))
        .collect();
    let verdicts: HashMap<&str, (usize, &Verdict)> = diff
        .pairs
        .iter()
        .enumerate()
        .map(|(i, p)| (p.key.as_str(), (i, &p.comparison.verdict)))
        .collect();
    let first_div = diff.first().map(|p| p.key.as_str());
    // The diff's own first non-finite records: across parallel layouts they are found in the
    // merged records, so a NaN on another rank of the group marks its stage here too, where
    // this rank's own scan would only see it after the collective.
    let first_nf_a = (diff.first_nonfinite_a.as_ref())
        .or(scan_a.first_nonfinite.as_ref())
        .map(|n| n.key.as_str());
    let first_nf_b = (diff.first_nonfinite_b.as_ref())
        .or(scan_b.first_nonfinite.as_ref())
        .map(|n| n.key.as_str());
    // A merged record holds non-finite values when any of its pieces does.
    let pieces_nonfinite = |pieces: &[Piece]| {
        pieces
            .iter()
            .any(|p| p.stats.as_ref().is_some_and(|s| s.has_nonfinite()))
    };
    let only_a: HashSet<&str> = diff.only_a.iter().map(String::as_str).collect();
    let mut seen = HashSet::new();
    let mut rows = Vec::with_capacity(a.records.len() + diff.only_b.len());
    for (i, r) in a.records.iter().enumerate() {
        let key = r.key();
        if !seen.insert(key.clone()) {
            continue;
        }
        let found = verdicts.get(key.as_str());
        // A stage the diff counts as A's only has no B record to show, even where B's raw
        // window holds one: a piece of a group that could not be merged is not B's tensor.
        let j = by_key_b
            .get(&(r.stage.as_ref(), r.occurrence))
            .copied()
            .filter(|_| found.is_some() || !only_a.contains(key.as_str()));
        let state = match found.map(|&(_, v)| v) {
            None => RowState::OnlyA,
            Some(Verdict::Agree) => RowState::Agrees,
            Some(Verdict::Magnitude) => RowState::Diverges,
            Some(Verdict::ValuesMoved) => RowState::ValuesMoved,
            Some(Verdict::ChecksumInconclusive) => RowState::ChecksumInconclusive,
            Some(Verdict::NotCompared { .. }) => RowState::NotCompared,
            Some(Verdict::Structural { .. }) => RowState::Structural,
            Some(Verdict::NonFinite) => RowState::NonFiniteDiff,
        };
        let rb = j.map(|j| &b.records[j]);
        let paired = found.map(|&(p, _)| &diff.pairs[p]);
        let merged_nonfinite = |pieces: Option<&[Piece]>, own: bool| match pieces {
            Some(pieces) if !pieces.is_empty() => pieces_nonfinite(pieces),
            _ => own,
        };
        let nonfinite_a = merged_nonfinite(paired.map(|p| p.pieces_a.as_slice()), nonfinite(r));
        let nonfinite_b = merged_nonfinite(
            paired.map(|p| p.pieces_b.as_slice()),
            rb.is_some_and(nonfinite),
        );
        rows.push(Row {
            aliased: aliased.contains(&key),
            conflict: conflict.contains(&key),
            first_nonfinite: first_nf_a == Some(key.as_str()) || first_nf_b == Some(key.as_str()),
            first_divergence: first_div == Some(key.as_str()),
            replicated: replicated.contains(&key),
            single_run: false,
            moved_write: false,
            a: Some(i),
            b: j,
            pair: found.map(|&(p, _)| p),
            state,
            nonfinite_a,
            nonfinite_b,
            log_a: log_max_abs(r),
            log_b: rb.and_then(log_max_abs),
            input_a: inputs_a.contains(&key),
            input_b: inputs_b.contains(&key),
            key,
        });
    }
    let index_b: HashMap<String, usize> = if diff.only_b.is_empty() {
        HashMap::new()
    } else {
        b.records
            .iter()
            .enumerate()
            .rev()
            .map(|(i, r)| (r.key(), i))
            .collect()
    };
    for key in &diff.only_b {
        let j = index_b.get(key).copied();
        let rb = j.map(|j| &b.records[j]);
        rows.push(Row {
            aliased: aliased.contains(key),
            conflict: conflict.contains(key),
            first_nonfinite: first_nf_b == Some(key.as_str()),
            first_divergence: false,
            replicated: replicated.contains(key),
            single_run: false,
            moved_write: false,
            key: key.clone(),
            a: None,
            b: j,
            pair: None,
            state: RowState::OnlyB,
            nonfinite_a: false,
            nonfinite_b: rb.is_some_and(nonfinite),
            log_a: None,
            log_b: rb.and_then(log_max_abs),
            input_a: false,
            input_b: inputs_b.contains(key),
        });
    }
    rows
}

/// The keys of `window`'s records that the findings from one run of `run` are about
/// ([`crate::model::analysis::single_run::Finding::subjects`]).
pub fn single_run_keys(
    run: &crate::model::analysis::single_run::SingleRun,
    window: &Window,
) -> HashSet<String> {
    let source = window.source.display().to_string();
    run.findings
        .iter()
        .flat_map(|f| f.subjects())
        .filter(|r| r.source == source)
        .map(|r| r.key.clone())
        .collect()
}

/// Marks the rows whose key is in `single_run` or `moved`.
pub fn mark(rows: &mut [Row], single_run: &HashSet<String>, moved: &HashSet<String>) {
    for row in rows {
        row.single_run = single_run.contains(&row.key);
        row.moved_write = moved.contains(&row.key);
    }
}
