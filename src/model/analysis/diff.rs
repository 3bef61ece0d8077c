//! `diff`: pair two captures and find where they first diverge.
//!
//! Windows pair by rank (and, with several windows on a rank, by label, then
//! by label number and call); records within a window pair by
//! `stage#occurrence`, never by raw call count. The first divergence is the
//! first pair, in A's capture order, whose [`Verdict`] diverges ([`Verdict::diverges`]:
//! not agree, checksum inconclusive or not compared). Records on one side only, and pairs
//! without statistics, are *missing evidence*: listed and counted, never agreement.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use rayon::prelude::*;
use serde::Serialize;

use crate::model::analysis::compare::{
    Comparison, ExclusionKind, Tolerances, Verdict, compare_records,
};
use crate::model::analysis::layout_diff::{self, LayoutDifferences};
use crate::model::analysis::merge::{self, GroupMerge, SideMerge};
use crate::model::analysis::replicated::{self, ReplicationFinding};
use crate::model::analysis::scan::NonFinite;
use crate::model::analysis::tokens::{self, TokenDiff};
use crate::model::dump::{
    Dims, Mode, Name, Piece, Record, Shard, Stats, Window, WindowId, keys_increase,
};

/// Hash maps over keys from the (untrusted) manifests: foldhash, seeded per process.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
type Set<K> = HashSet<K, foldhash::fast::RandomState>;

/// When B holds fewer than this fraction of A's records (or the reverse), the drop is called out.
pub const RECORD_DROP_RATIO: f64 = 0.5;

/// Whether the two windows ran on the same input, judged from `metadata.token_ids`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Identity {
    /// The token ids are equal, element by element.
    Same {
        /// Number of token ids on each side.
        tokens: usize,
    },
    /// The ids differ; `first_difference` is the first index where they do (or the shorter length).
    Different {
        /// Number of token ids in A.
        tokens_a: usize,
        /// Number of token ids in B.
        tokens_b: usize,
        /// 0-based index of the first differing id; the shorter length when one list is a
        /// prefix of the other.
        first_difference: usize,
    },
    /// Only one side recorded token ids: identity cannot be established.
    MissingOnOneSide {
        /// The side without token ids, `'a'` or `'b'`.
        side: char,
    },
    /// Neither side recorded token ids.
    MissingOnBoth,
    /// The dump format records no input ids (msprobe, windowed dumps): nothing to check.
    NotRecorded {
        /// The format's name ([`crate::model::dump::FormatFacts::name`]), e.g. `msprobe dump`.
        format: String,
    },
}

impl Identity {
    /// Compares the token ids of two windows.
    pub fn of(a: &Window, b: &Window) -> Identity {
        // Forwards with row maps hold requests, in whatever order the engine batched them:
        // the same requests in another order are the same input.
        if let (Some(x), Some(y)) = (requests_ids(a), requests_ids(b)) {
            if x == y {
                return Identity::Same {
                    tokens: x.iter().map(Vec::len).sum(),
                };
            }
        }
        match (a.token_ids(), b.token_ids()) {
            (None, None) if !a.facts.records_input_ids || !b.facts.records_input_ids => {
                let facts = if a.facts.records_input_ids {
                    b.facts
                } else {
                    a.facts
                };
                Identity::NotRecorded {
                    format: facts.name.to_string(),
                }
            }
            (Some(x), Some(y)) if x == y => Identity::Same { tokens: x.len() },
            (Some(x), Some(y)) => Identity::Different {
                tokens_a: x.len(),
                tokens_b: y.len(),
                first_difference: x
                    .iter()
                    .zip(&y)
                    .position(|(p, q)| p != q)
                    .unwrap_or(x.len().min(y.len())),
            },
            (Some(_), None) => Identity::MissingOnOneSide { side: 'b' },
            (None, Some(_)) => Identity::MissingOnOneSide { side: 'a' },
            (None, None) => Identity::MissingOnBoth,
        }
    }

    /// True when the inputs are known to differ or cannot be compared because one side lacks ids.
    pub fn is_mismatch(&self) -> bool {
        matches!(
            self,
            Identity::Different { .. } | Identity::MissingOnOneSide { .. }
        )
    }

    /// A one-line description for people.
    pub fn describe(&self) -> String {
        match self {
            Identity::Same { tokens } => format!("same input: {tokens} token ids equal"),
            Identity::Different {
                tokens_a,
                tokens_b,
                first_difference,
            } => format!(
                "DIFFERENT INPUTS: token ids differ at index {first_difference} ({tokens_a} ids in A, {tokens_b} in B); \
                 the comparison is between different requests"
            ),
            Identity::MissingOnOneSide { side } => format!(
                "INPUT IDENTITY UNKNOWN: side {} recorded no token_ids; pass token_ids to arm() on both sides",
                side.to_ascii_uppercase()
            ),
            Identity::MissingOnBoth => {
                "input identity unchecked: neither side recorded token_ids in arm()".to_string()
            }
            Identity::NotRecorded { format } => {
                format!("input identity unchecked: a {format} records no input ids")
            }
        }
    }
}

/// The `(position, token id)` rows of each request of `w`'s row map, sorted (requests are
/// named differently by two runs, and batched in any order); `None` unless every request's
/// rows have their ids.
fn requests_ids(w: &Window) -> Option<Vec<Vec<(u64, i64)>>> {
    let rows = w.token_rows.as_ref()?;
    let mut by_request: BTreeMap<&str, Vec<(u64, i64)>> = BTreeMap::new();
    for entry in &rows.map {
        let Some(request) = entry.request.as_deref() else {
            continue; // padding
        };
        let ids = entry.token_ids.as_ref()?;
        let held = by_request.entry(request).or_default();
        for (i, &id) in ids.iter().enumerate() {
            held.push((entry.position(i)?, id));
        }
    }
    let mut out: Vec<Vec<(u64, i64)>> = by_request
        .into_values()
        .map(|mut rows| {
            rows.sort_unstable();
            rows
        })
        .collect();
    out.sort_unstable();
    (!out.is_empty()).then_some(out)
}

/// A window, as a diff names it: its identity in the capture ([`WindowId`], not serialized)
/// and what the JSON outputs say of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WindowRef {
    /// The window this is, by its place in the windows the diff was given (`Dump::windows`,
    /// as `Analysis` passes them; for a window merged over a parallel group, the member whose
    /// source it names); `None` when none of them is.
    #[serde(skip)]
    pub id: Option<WindowId>,
    /// The path the window was read from (its manifest or dump.json).
    pub source: String,
    /// The window's rank.
    pub rank: u32,
    /// The window's label (request id, msprobe step, windowed `window_<NNNN>`).
    pub label: String,
    /// Which distinct label this is (`DUMP_PROBE_MATCH`, 1-based; windowed: 0-based window
    /// number).
    #[serde(rename = "match")]
    pub match_index: u32,
    /// Which call of that label this is (`DUMP_PROBE_OCCURRENCE`, 1-based).
    pub occurrence: u32,
    /// Which run into the same dump directory wrote it ([`Window::attempt`]).
    pub attempt: u32,
    /// Number of records in the window.
    pub records: usize,
}

impl WindowRef {
    fn of(m: &Window) -> WindowRef {
        WindowRef {
            id: None,
            source: m.source.display().to_string(),
            rank: m.rank,
            label: m.label.clone(),
            match_index: m.match_index,
            occurrence: m.occurrence,
            attempt: m.attempt,
            records: m.records.len(),
        }
    }
}

/// One paired record and how it compares.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairDiff {
    /// `stage#occurrence`.
    pub key: String,
    /// Position in A's capture order (0-based) and the two records' `seq`.
    pub position: usize,
    /// A's record's `seq`.
    pub seq_a: u64,
    /// B's record's `seq` (may differ from `seq_a`: pairing is by key, not by call count).
    pub seq_b: u64,
    /// A's dtype.
    pub dtype_a: Name,
    /// B's dtype.
    pub dtype_b: Name,
    /// A's logical shape, elements.
    pub shape_a: Dims,
    /// B's logical shape, elements.
    pub shape_b: Dims,
    /// Verdict and per-statistic differences (flattened into this object in JSON).
    #[serde(flatten)]
    pub comparison: Comparison,
    /// The per-rank pieces A's record was merged from over a parallel group (ranks, files,
    /// local shapes and statistics); empty for a record as captured.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pieces_a: Vec<Piece>,
    /// The pieces of B's record, as `pieces_a`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pieces_b: Vec<Piece>,
    /// A's record's parallel annotation (`tp:1`, `replicated:tp`, `partial:tp`), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard_a: Option<Shard>,
    /// B's record's parallel annotation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shard_b: Option<Shard>,
}

impl PairDiff {
    /// True when either side's record was merged from the pieces of a parallel group (a
    /// slice or a partial sum; a replicated record stands for its group and is not counted).
    pub fn merged(&self) -> bool {
        // A replicated record stands for its group, a pp record came whole from its rank:
        // neither is merged from pieces.
        let pieces = |s: &Option<Shard>, p: &[Piece]| {
            !p.is_empty() && matches!(s, Some(Shard::Split { .. } | Shard::Partial { .. }))
        };
        pieces(&self.shard_a, &self.pieces_a) || pieces(&self.shard_b, &self.pieces_b)
    }

    /// The non-finite counts of A's record as merged from its pieces (`pieces_a`).
    pub fn merged_counts_a(&self) -> MergedCounts<'_> {
        MergedCounts::of(&self.pieces_a, &self.shard_a)
    }

    /// The non-finite counts of B's record as merged from its pieces (`pieces_b`).
    pub fn merged_counts_b(&self) -> MergedCounts<'_> {
        MergedCounts::of(&self.pieces_b, &self.shard_b)
    }
}

/// The NaN and inf counts of a record merged over a parallel group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MergedCounts<'a> {
    /// A replicated record stands for its group: the statistics of its lowest rank's piece
    /// (`None` with no piece), whose counts may be inferred (`Stats::counts_known`).
    Replica(Option<&'a Stats>),
    /// A split or partial record: its pieces' counts summed, elements.
    Summed {
        /// NaN elements over all pieces.
        nan: u64,
        /// ±inf elements over all pieces.
        inf: u64,
    },
    /// Some piece has no statistics: the merged counts are unknown.
    Unknown,
}

impl<'a> MergedCounts<'a> {
    fn of(pieces: &'a [Piece], shard: &Option<Shard>) -> MergedCounts<'a> {
        let stats: Option<Vec<&Stats>> = pieces.iter().map(|p| p.stats.as_ref()).collect();
        match (stats, shard) {
            (Some(stats), Some(Shard::Replicated { .. })) => {
                MergedCounts::Replica(stats.first().copied())
            }
            (Some(stats), _) => MergedCounts::Summed {
                nan: stats.iter().map(|s| s.nan_count).sum(),
                inf: stats.iter().map(|s| s.inf_count).sum(),
            },
            (None, _) => MergedCounts::Unknown,
        }
    }
}

/// The diff of one pair of windows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowDiff {
    /// The rank both windows belong to (windows pair within a rank).
    pub rank: u32,
    /// A's window.
    pub a: WindowRef,
    /// B's window.
    pub b: WindowRef,
    /// Whether both ran on the same input, from `metadata.token_ids`.
    pub identity: Identity,
    /// Paired records in A's capture order.
    pub pairs: Vec<PairDiff>,
    /// Keys captured only in A / only in B (missing evidence), in each side's order.
    pub only_a: Vec<String>,
    /// Keys (`stage#occurrence`) captured only in B, in B's order.
    pub only_b: Vec<String>,
    /// Index into `pairs` of the first divergence.
    pub first_divergence: Option<usize>,
    /// Its key (`stage#occurrence`), kept with the index so that a reader of the JSON need not
    /// look it up in `pairs`.
    pub first_divergence_key: Option<String>,
    /// Pairs not compared ([`Verdict::NotCompared`]: no statistics on either side or on one
    /// side only): missing evidence, never a divergence.
    pub not_compared: usize,
    /// Pairs whose position checksum is inconclusive ([`Verdict::ChecksumInconclusive`]): it
    /// moved within its rounding bound, which is above what one moved row shifts.
    pub checksum_inconclusive: usize,
    /// Pairs with a statistic the dump tool's own accumulation overflowed (not compared:
    /// [`crate::model::analysis::compare::ExclusionKind::Overflow`]).
    pub overflowed: usize,
    /// Set when one side holds far fewer records (graph mode keeps only slots and code outside the graph).
    pub missing_data: Option<String>,
    /// Pairs whose dtypes differ within one kind (e.g. float32 vs bfloat16).
    pub precision_changes: usize,
    /// `arm()` metadata (other than token ids) and topology that differ: `key: A vs B`.
    /// Identity is judged from the token ids; these say what else the two runs changed.
    pub metadata_differences: Vec<String>,
    /// A's first record holding NaN/inf, in A's capture order. A finding even when B holds
    /// the same: two captures that agree on a NaN are both wrong.
    pub first_nonfinite_a: Option<NonFinite>,
    /// B's first record holding NaN/inf, in B's capture order.
    pub first_nonfinite_b: Option<NonFinite>,
    /// Why this window could not be merged whole over a parallel group (a group rank not
    /// captured, a stage not merged), one line per group and side: its stages left out are
    /// missing evidence, so "no divergence" covers the merged stages only. Empty when the
    /// window merged whole or was not merged.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unmerged: Vec<String>,
}

impl WindowDiff {
    /// The first divergent pair, if any.
    pub fn first(&self) -> Option<&PairDiff> {
        self.first_divergence.map(|i| &self.pairs[i])
    }

    /// `(key, text)` of every statistic the dump tool's own accumulation overflowed (not
    /// compared), in `pairs` order.
    pub fn overflowed_stats(&self) -> Vec<(String, String)> {
        self.pairs
            .iter()
            .flat_map(|p| {
                p.comparison.stats.iter().filter_map(|d| {
                    d.excluded
                        .as_ref()
                        .filter(|e| e.kind == ExclusionKind::Overflow)
                        .map(|e| (p.key.clone(), e.text.clone()))
                })
            })
            .collect()
    }
}

/// How one rank stands at one stage, for the rank × stage overview.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cell {
    /// The pair's verdict is agree.
    Agrees,
    /// The pair diverges (structural, magnitude or values moved).
    Diverges,
    /// Diverges and holds NaN/inf on at least one side.
    NonFinite,
    /// The rank has no evidence at this stage: captured on one side only, not at all, or
    /// paired without statistics (not compared).
    Missing,
    /// The pair's position checksum is inconclusive: neither agreement nor a divergence.
    Inconclusive,
}

impl Cell {
    /// How bad the cell is, for taking the worst of several (the overview's buckets, a module
    /// tree's rollup): agrees 0 < inconclusive 1 < missing 2 < diverges 3 < non-finite 4.
    pub fn severity(self) -> u8 {
        match self {
            Cell::Agrees => 0,
            Cell::Inconclusive => 1,
            Cell::Missing => 2,
            Cell::Diverges => 3,
            Cell::NonFinite => 4,
        }
    }

    /// The cell of a pair with this verdict.
    pub fn of(verdict: &Verdict) -> Cell {
        match verdict {
            Verdict::Agree => Cell::Agrees,
            Verdict::NonFinite => Cell::NonFinite,
            Verdict::NotCompared { .. } => Cell::Missing,
            Verdict::ChecksumInconclusive => Cell::Inconclusive,
            Verdict::Structural { .. } | Verdict::Magnitude | Verdict::ValuesMoved => {
                Cell::Diverges
            }
        }
    }
}

/// The whole diff of two captures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffReport {
    /// The tolerances every pair was judged under.
    pub tolerances: Tolerances,
    /// One per paired window, ordered by rank.
    pub windows: Vec<WindowDiff>,
    /// Windows with no partner on the other side (whole ranks or requests missing).
    pub unpaired_a: Vec<WindowRef>,
    /// B's windows with no partner in A.
    pub unpaired_b: Vec<WindowRef>,
    /// The rank whose first divergence comes earliest in capture order (ties: the lowest rank).
    pub first_rank: Option<u32>,
    /// Stage keys in A's capture order (first window of each rank, merged), the overview's columns.
    pub stages: Vec<String>,
    /// rank → one [`Cell`] per entry of `stages`.
    pub table: BTreeMap<u32, Vec<Cell>>,
    /// How the windows were merged over parallel groups before pairing, when A and B have
    /// different group sizes (`None`: same layout, rank by rank).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layouts: Option<LayoutMerge>,
    /// `replicated` stages whose ranks disagree, on either side, under the near-exact replica
    /// bound ([`replicated::replica_tolerances`]).
    pub replicated: Vec<ReplicationFinding>,
    /// The earliest finding in stage order: the first divergence, or a replicated stage whose
    /// ranks disagree at or before it (often the first sign of a broken collective); `None`
    /// when neither was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headline: Option<Headline>,
    /// The token rows of both sides aligned by request and position (docs/diff.md, "Token
    /// rows"); `None` unless both sides captured token rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenDiff>,
    /// Where one side has token rows and the other none: which of the other side's windows
    /// could not be given a row map from their metadata positions, and why (at most a few
    /// lines).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub token_notes: Vec<String>,
    /// Windows with token rows that no window of the other side holds the same rows as
    /// (a chunk against a whole prefill): compared row by row in `tokens` alone, A's then B's.
    #[serde(skip_serializing_if = "is_empty_pair")]
    pub aligned_only: (Vec<WindowRef>, Vec<WindowRef>),
    /// Paired records whose values agree but whose layout differs: writes moved within a
    /// pool (findings) and other differences (grouped notes); docs/diff.md, "Layout
    /// differences".
    #[serde(skip_serializing_if = "LayoutDifferences::is_empty")]
    pub layout_differences: LayoutDifferences,
}

fn is_empty_pair(p: &(Vec<WindowRef>, Vec<WindowRef>)) -> bool {
    p.0.is_empty() && p.1.is_empty()
}

/// What a diff found first, in the stage order of [`DiffReport::stages`] (A's capture order):
/// a replicated stage whose ranks disagree at or before the first divergence comes first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Headline {
    /// `replicated` (a [`ReplicationFinding`] at or before the first divergence, or with no
    /// divergence at all), `divergence`, or `unmerged` (no divergence among the paired stages
    /// of a window that could not be merged whole: missing evidence).
    pub kind: &'static str,
    /// `stage#occurrence` of the earliest finding (empty for `unmerged`).
    pub key: String,
    /// The logical rank of the first divergence's window (ranks renumbered by merging), or,
    /// for a replicated finding, the global rank whose record stands for the group.
    pub rank: u32,
    /// The first divergence's key, when there is one (it may come later than `key`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_divergence: Option<String>,
    /// One line for people: `first sign: replicated tensor differs across tp ranks 0 and 1 at
    /// layers.0.norm_weight (…) in B, before the first divergence at layers.0.up#1 (rank 0)`.
    pub text: String,
}

impl Headline {
    fn of(
        windows: &[WindowDiff],
        first_rank: Option<u32>,
        stages: &[String],
        replicated: &[ReplicationFinding],
    ) -> Option<Headline> {
        let order = |key: &str, fallback: usize| {
            stages
                .iter()
                .position(|s| s == key)
                .unwrap_or(fallback.saturating_add(stages.len()))
        };
        let first = first_rank.and_then(|rank| {
            let w = windows.iter().find(|w| w.rank == rank)?;
            w.first().map(|p| (order(&p.key, p.position), rank, p))
        });
        let earliest = replicated
            .iter()
            .map(|f| (order(&f.key, f.position), f))
            .min_by_key(|(at, f)| (*at, f.side, f.rank));
        match (earliest, first) {
            (Some((at, f)), first) if first.is_none_or(|(d, ..)| at <= d) => {
                let tail = match first {
                    Some((d, rank, p)) if d == at => format!(
                        ", at the first divergence itself ({} on rank {rank}): the collective \
                         or the replicas are the first thing to check",
                        p.key
                    ),
                    Some((_, rank, p)) => format!(
                        ", before the first divergence at {} (rank {rank}): often the first sign \
                         of a broken collective or a weight loaded differently on one rank",
                        p.key
                    ),
                    None => ", with no divergence between A and B".to_string(),
                };
                Some(Headline {
                    kind: "replicated",
                    key: f.key.clone(),
                    rank: f.rank,
                    first_divergence: first.map(|(_, _, p)| p.key.clone()),
                    text: format!(
                        "first sign: {} in {}{tail}",
                        f.describe(),
                        f.side.to_ascii_uppercase()
                    ),
                })
            }
            (_, Some((_, rank, p))) => Some(Headline {
                kind: "divergence",
                key: p.key.clone(),
                rank,
                first_divergence: Some(p.key.clone()),
                text: format!(
                    "first divergence: {} on rank {rank} ({})",
                    p.key,
                    p.comparison.verdict.name()
                ),
            }),
            _ => windows
                .iter()
                .find(|w| !w.unmerged.is_empty())
                .map(|w| Headline {
                    kind: "unmerged",
                    key: String::new(),
                    rank: w.rank,
                    first_divergence: None,
                    text: format!(
                        "first divergence unknown on rank {}: {} (missing evidence)",
                        w.rank,
                        w.unmerged.join("; ")
                    ),
                }),
        }
    }
}

impl Headline {
    /// The headline once the token rows are aligned: the first bad token where it comes at
    /// or before `earlier`'s finding in stage order (`stages`, A's capture order; a stage#k
    /// not among them counts as after them all), else `earlier`.
    fn with_bad_token(
        earlier: Option<Headline>,
        bad: &tokens::BadToken,
        stages: &[String],
    ) -> Option<Headline> {
        let order = |key: &str| stages.iter().position(|s| s == key).unwrap_or(usize::MAX);
        if let Some(h) = &earlier {
            if h.kind != "unmerged" && !h.key.is_empty() && order(&h.key) < order(&bad.key) {
                return earlier;
            }
        }
        let token = bad
            .token_id
            .map(|id| format!(" (token id {id})"))
            .unwrap_or_default();
        Some(Headline {
            kind: "divergence",
            key: bad.key.clone(),
            rank: bad.rank,
            first_divergence: Some(bad.key.clone()),
            text: format!(
                "first divergence: {} at request {:?} position {}{token} ({}, {} off by {:.3}x its tolerance)",
                bad.key, bad.request_a, bad.position, bad.kind, bad.verdict.stat, bad.verdict.ratio
            ),
        })
    }
}

impl Headline {
    /// `earlier`, or the first record of a side without row statistics that diverges from
    /// the other side's rows summed ([`tokens::summed`]) where that comes first in capture
    /// order.
    fn with_summed(
        earlier: Option<Headline>,
        d: &tokens::summed::SummedDivergence,
        stages: &[String],
    ) -> Option<Headline> {
        let order = |key: &str| stages.iter().position(|s| s == key).unwrap_or(usize::MAX);
        if let Some(h) = &earlier {
            if h.kind != "unmerged" && !h.key.is_empty() && order(&h.key) <= order(&d.key) {
                return earlier;
            }
        }
        let token = d
            .token_id
            .map(|id| format!(" (token id {id})"))
            .unwrap_or_default();
        Some(Headline {
            kind: "divergence",
            key: d.key.clone(),
            rank: 0,
            first_divergence: Some(d.key.clone()),
            text: format!(
                "first divergence: {} at request {:?} positions {}..={}{token} (a record without row statistics against the other side's rows summed: {} off by {:.3}x its tolerance)",
                d.key, d.requests.0, d.positions.0, d.positions.1, d.verdict.stat, d.verdict.ratio
            ),
        })
    }
}

/// The merge of both sides over the parallel axes whose group sizes differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayoutMerge {
    /// The axes merged (`tp`, `cp`).
    pub axes: Vec<String>,
    /// `axis → (A's group size, B's group size)`.
    pub sizes: BTreeMap<String, (u32, u32)>,
    /// What merging did to A.
    pub a: SideMerge,
    /// What merging did to B.
    pub b: SideMerge,
}

impl DiffReport {
    /// True when anything a user must look at was found: a divergence, a non-finite record
    /// on either side, an identity mismatch, a large drop in record count (missing data),
    /// missing windows, a replicated stage whose ranks disagree, a parallel group that could
    /// not be merged whole (missing ranks, shards that do not fit).
    pub fn found_something(&self) -> bool {
        self.windows.iter().any(|w| {
            w.first_divergence.is_some()
                || w.identity.is_mismatch()
                || w.missing_data.is_some()
                || w.first_nonfinite_a.is_some()
                || w.first_nonfinite_b.is_some()
        }) || !self.unpaired_a.is_empty()
            || !self.unpaired_b.is_empty()
            || !self.replicated.is_empty()
            || !self.layout_differences.moved.is_empty()
            || self.tokens.as_ref().is_some_and(|t| {
                // A bad token; ids that part within a matched request (different inputs);
                // or forwards compared by rows whose requests matched none of the other side.
                let summed = t.summed.as_ref();
                t.first.is_some()
                    || summed.is_some_and(|s| s.first.is_some() || s.records_not_compared > 0)
                    || t.requests.iter().any(|m| m.ids_differ_from.is_some())
                    || (t.rows_compared == 0
                        && summed.is_none_or(|s| s.records_compared == 0)
                        && !(self.aligned_only.0.is_empty() && self.aligned_only.1.is_empty()))
            })
            || self.layouts.as_ref().is_some_and(|l| {
                [&l.a, &l.b].iter().any(|side| {
                    !side.invalid.is_empty()
                        || side
                            .groups
                            .iter()
                            .any(|g| !g.missing_ranks.is_empty() || !g.warnings.is_empty())
                })
            })
    }
}

impl DiffReport {
    /// What merging over parallel groups left (ranks not captured, stages not merged,
    /// layouts not read), A's then B's, as lost-evidence warnings ([`SideMerge::warnings`]);
    /// empty for a same-layout diff.
    pub fn merge_warnings(&self) -> Vec<crate::model::dump::Warning> {
        self.layouts
            .iter()
            .flat_map(|l| {
                let mut out = l.a.warnings("A");
                out.extend(l.b.warnings("B"));
                out
            })
            .collect()
    }
}

fn has_token_rows(windows: &[Window]) -> bool {
    windows.iter().any(|w| w.token_rows.is_some())
}

/// Each window's [`WindowId`] by its source as a diff names it (the first of a repeated one).
fn window_ids(windows: &[Window]) -> HashMap<String, WindowId> {
    let mut ids = HashMap::with_capacity(windows.len());
    for (i, w) in windows.iter().enumerate() {
        ids.entry(w.source.display().to_string())
            .or_insert(WindowId(i));
    }
    ids
}

/// The windows a diff compares: each side merged over the parallel axes whose group sizes
/// differ ([`merge::merge_side`]), and a side without token rows given row maps from its
/// windows' metadata positions where the other side has rows
/// ([`tokens::with_metadata_rows`]). What the token view's cells are looked up in, too.
pub struct Compared<'a> {
    /// A's windows as compared.
    pub a: Cow<'a, [Window]>,
    /// B's.
    pub b: Cow<'a, [Window]>,
    /// The merge, where the layouts differ.
    pub layouts: Option<LayoutMerge>,
    /// What could not be given a row map, and why.
    pub token_notes: Vec<String>,
}

impl<'a> Compared<'a> {
    /// `a` and `b` (as loaded) prepared for comparison.
    pub fn of(a: &'a [Window], b: &'a [Window]) -> Compared<'a> {
        let axes = merge::axes_to_merge(a, b);
        let (mut wa, mut wb, layouts): (Cow<[Window]>, Cow<[Window]>, _) = if axes.is_empty() {
            (Cow::Borrowed(a), Cow::Borrowed(b), None)
        } else {
            let (merged_a, ma) = merge::merge_side(a, &axes);
            let (merged_b, mb) = merge::merge_side(b, &axes);
            let layouts = LayoutMerge {
                axes: axes.iter().map(|s| s.to_string()).collect(),
                sizes: axes
                    .iter()
                    .map(|axis| {
                        let sizes = (merge::group_size(a, axis), merge::group_size(b, axis));
                        (axis.to_string(), sizes)
                    })
                    .collect(),
                a: ma,
                b: mb,
            };
            (Cow::Owned(merged_a), Cow::Owned(merged_b), Some(layouts))
        };
        // One side from before token rows: its windows' metadata positions give them row
        // maps (no statistics), so that its forwards pair by the rows they hold and its
        // records are compared with the other side's rows summed.
        let mut token_notes = Vec::new();
        // A side whose rows were lost in its merge: the merge's warnings say why.
        let rows_lost = |side: fn(&LayoutMerge) -> &merge::SideMerge| {
            layouts
                .as_ref()
                .is_some_and(|l| side(l).groups.iter().any(|g| !g.rows_not_merged.is_empty()))
        };
        match (has_token_rows(&wa), has_token_rows(&wb)) {
            (true, false) => {
                let (implied, notes) = tokens::with_metadata_rows(&wb, "B");
                if implied.is_some() || !rows_lost(|l| &l.b) {
                    token_notes = notes;
                }
                if let Some(implied) = implied {
                    wb = Cow::Owned(implied);
                }
            }
            (false, true) => {
                let (implied, notes) = tokens::with_metadata_rows(&wa, "A");
                if implied.is_some() || !rows_lost(|l| &l.a) {
                    token_notes = notes;
                }
                if let Some(implied) = implied {
                    wa = Cow::Owned(implied);
                }
            }
            _ => {}
        }
        Compared {
            a: wa,
            b: wb,
            layouts,
            token_notes,
        }
    }
}

/// Diffs two captures (each a list of windows, as loaded).
pub fn diff(a: &[Window], b: &[Window], tolerances: &Tolerances) -> DiffReport {
    diff_reusing(a, b, tolerances, |_, _| None)
}

/// [`diff`], taking the diff of a window pair from `reuse` where it has one (the pair is
/// unchanged since an earlier diff under the same tolerances) instead of computing it.
pub fn diff_reusing(
    a: &[Window],
    b: &[Window],
    tolerances: &Tolerances,
    reuse: impl Fn(&Window, &Window) -> Option<WindowDiff> + Sync,
) -> DiffReport {
    diff_with(a, b, tolerances, reuse, true)
}

/// [`diff`] with the token rows of forwards paired whole judged by the bucket alignment and
/// again by the sharpening, as before [`tokens::whole`]: the answers the one-pass path must
/// give, for tests and benchmarks.
#[doc(hidden)]
pub fn diff_by_buckets(a: &[Window], b: &[Window], tolerances: &Tolerances) -> DiffReport {
    diff_with(a, b, tolerances, |_, _| None, false)
}

fn diff_with(
    a: &[Window],
    b: &[Window],
    tolerances: &Tolerances,
    reuse: impl Fn(&Window, &Window) -> Option<WindowDiff> + Sync,
    judge_whole: bool,
) -> DiffReport {
    let (ids_a, ids_b) = (window_ids(a), window_ids(b));
    let mut replicated = replicated::check('a', a);
    replicated.extend(replicated::check('b', b));
    let compared = Compared::of(a, b);
    let (a, b, layouts, token_notes) = (
        &*compared.a,
        &*compared.b,
        compared.layouts.clone(),
        compared.token_notes.clone(),
    );
    // Token rows pair forwards by the rows they hold (a merged group's rows merged with it).
    let with_tokens = tokens::applies(a, b);
    // Once: the window pairs, and the alignment's forwards judged whole, come from it.
    let by_rows = if with_tokens {
        tokens::pair_by_rows(a, b)
    } else {
        Vec::new()
    };
    let (pairs, unpaired_a, unpaired_b, aligned_a, aligned_b) = if with_tokens {
        pair_windows_by_rows(a, b, &by_rows)
    } else {
        let (p, ua, ub) = pair_windows(a, b);
        (p, ua, ub, Vec::new(), Vec::new())
    };
    // The row alignment and the record diff do not depend on each other: run side by side,
    // the alignment's sequential planning overlaps the record diff's parallel work.
    let ((token_diff, mut judged), mut windows) = rayon::join(
        || match with_tokens {
            true if judge_whole => match tokens::align_judged(a, b, tolerances, &by_rows) {
                Some((diff, judged)) => (Some(diff), judged),
                None => (None, tokens::whole::Judged::default()),
            },
            true => (
                tokens::align_by_buckets(a, b, tolerances),
                tokens::whole::Judged::default(),
            ),
            false => (None, tokens::whole::Judged::default()),
        },
        || {
            pairs
                .par_iter()
                .map(|&(x, y)| {
                    // A merged window is built anew on every diff: nothing earlier describes it.
                    let earlier = if layouts.is_none() { reuse(x, y) } else { None };
                    earlier.unwrap_or_else(|| diff_windows(x, y, tolerances))
                })
                .collect::<Vec<WindowDiff>>()
        },
    );
    if let Some(layouts) = &layouts {
        for w in &mut windows {
            w.unmerged = unmerged_lines(layouts, w);
        }
    }
    // In forwards paired whole, rows decide the verdicts they make sharp.
    if let Some(t) = &token_diff {
        let names: tokens::sharpen::RequestNames = t
            .requests
            .iter()
            .map(|m| (m.a.as_str(), m.b.as_str()))
            .collect();
        let taken: Vec<tokens::whole::JudgedWindow> =
            pairs.iter().map(|(x, _)| judged.take(x)).collect();
        windows
            .par_iter_mut()
            .zip(pairs.par_iter())
            .zip(taken)
            .for_each(|((w, (x, y)), judged)| sharpen_by_rows(w, x, y, &names, tolerances, judged));
    }
    // Named by their place in the windows given, also where the diff was taken over from
    // an earlier version (whose order may differ) or the window is a merged one.
    for w in &mut windows {
        w.a.id = ids_a.get(w.a.source.as_str()).copied();
        w.b.id = ids_b.get(w.b.source.as_str()).copied();
    }
    let named = |ids: &HashMap<String, WindowId>, m: &Window| {
        let mut r = WindowRef::of(m);
        r.id = ids.get(r.source.as_str()).copied();
        r
    };
    let first_rank = windows
        .iter()
        .filter_map(|w| w.first().map(|p| (p.position, w.rank)))
        .min()
        .map(|(_, rank)| rank);
    let layout_differences = layout_diff::compare(&layout_pairs(&windows, &pairs));
    let (stages, table) = overview(&windows);
    let mut headline = Headline::of(&windows, first_rank, &stages, &replicated);
    if let Some(bad) = token_diff.as_ref().and_then(|t| t.first.as_ref()) {
        if !precision_drift_only(bad, &windows) {
            headline = Headline::with_bad_token(headline, bad, &stages);
        }
    }
    if let Some(d) = token_diff
        .as_ref()
        .and_then(|t| t.summed.as_ref()?.first.as_ref())
    {
        headline = Headline::with_summed(headline, d, &stages);
    }
    // Forwards left to the row alignment, and it compared nothing: say why rather than
    // end without a headline.
    let left_to_rows = !(aligned_a.is_empty() && aligned_b.is_empty());
    if let Some(why) = token_diff.as_ref().and_then(|t| t.nothing_compared) {
        if headline.is_none() && left_to_rows {
            headline = Some(Headline {
                kind: "no_rows_aligned",
                key: String::new(),
                rank: 0,
                first_divergence: None,
                text: format!(
                    "no token rows aligned ({} forward{} of A, {} of B left to the rows): {}",
                    aligned_a.len(),
                    if aligned_a.len() == 1 { "" } else { "s" },
                    aligned_b.len(),
                    why.describe()
                ),
            });
        }
    }
    DiffReport {
        tolerances: tolerances.clone(),
        windows,
        unpaired_a: unpaired_a.into_iter().map(|m| named(&ids_a, m)).collect(),
        unpaired_b: unpaired_b.into_iter().map(|m| named(&ids_b, m)).collect(),
        first_rank,
        stages,
        table,
        layouts,
        replicated,
        headline,
        tokens: token_diff,
        token_notes,
        aligned_only: (
            aligned_a.into_iter().map(|m| named(&ids_a, m)).collect(),
            aligned_b.into_iter().map(|m| named(&ids_b, m)).collect(),
        ),
        layout_differences,
    }
}

/// The window pairs as [`layout_diff::compare`] reads them: each [`WindowDiff`] with its two
/// windows.
fn layout_pairs<'p>(
    windows: &'p [WindowDiff],
    pairs: &[(&'p Window, &'p Window)],
) -> Vec<layout_diff::WindowPair<'p>> {
    windows
        .iter()
        .zip(pairs)
        .map(|(w, &(a, b))| layout_diff::WindowPair {
            rank: w.rank,
            a,
            b,
            pairs: w
                .pairs
                .iter()
                .map(|p| layout_diff::PairedRecord {
                    key: &p.key,
                    position: p.position,
                    seq_a: p.seq_a,
                    seq_b: p.seq_b,
                    values_agree: !p.merged()
                        && matches!(
                            p.comparison.verdict,
                            Verdict::Agree | Verdict::ChecksumInconclusive
                        ),
                })
                .collect(),
        })
        .collect()
}

/// Whether the first bad token is a row that moved across a precision change (float32 vs
/// bfloat16) while its record pair does not diverge: a row of the coarser computation drifts
/// further than the tensor's aggregate, so its rows never make the record's verdict worse
/// ([`tokens::sharpen`]), and the headline keeps the records' first divergence instead of
/// naming that row (the token section still lists it). A non-finite count that differs is
/// never drift.
fn precision_drift_only(bad: &tokens::BadToken, windows: &[WindowDiff]) -> bool {
    bad.dtypes.0 != bad.dtypes.1
        && bad.verdict.stat != "nonfinite_count"
        && windows
            .iter()
            .filter(|w| w.rank == bad.rank)
            .flat_map(|w| &w.pairs)
            .filter(|p| p.key == bad.key)
            .all(|p| p.comparison.precision_change && !p.comparison.verdict.diverges())
}

/// Lets the token rows of windows `a` and `b` (paired whole) decide the verdicts of `w`'s
/// pairs they make sharp ([`tokens::sharpen`]), then recounts the window's first divergence
/// and inconclusive pairs.
fn sharpen_by_rows(
    w: &mut WindowDiff,
    a: &Window,
    b: &Window,
    names: &tokens::sharpen::RequestNames,
    tolerances: &Tolerances,
    mut judged: tokens::whole::JudgedWindow,
) {
    // The rows of forwards paired whole were judged once, in the alignment; the rest are
    // judged here (made only when some record pair needs them).
    let mut rows: Option<Option<tokens::sharpen::WindowRows>> = None;
    let mut floors = tokens::judge::FloorCache::default();
    let mut changed = false;
    for p in &mut w.pairs {
        if let Some(j) = judged.take(p.seq_a, p.seq_b) {
            changed |=
                tokens::sharpen::decide_judged(&mut p.comparison, j.evidence, j.rows, j.complete);
            continue;
        }
        let Some(rows) =
            rows.get_or_insert_with(|| tokens::sharpen::WindowRows::of(a, b, names, tolerances))
        else {
            continue;
        };
        changed |= rows.decide(
            &mut p.comparison,
            (p.seq_a, p.seq_b),
            (&p.dtype_a, &p.dtype_b),
            (&p.shape_a, &p.shape_b),
            &mut floors,
        );
    }
    if changed {
        w.first_divergence = w.pairs.iter().position(|p| p.comparison.verdict.diverges());
        w.first_divergence_key = w.first_divergence.map(|i| w.pairs[i].key.clone());
        w.checksum_inconclusive = w
            .pairs
            .iter()
            .filter(|p| p.comparison.verdict == Verdict::ChecksumInconclusive)
            .count();
    }
}

type RowPairs<'a> = (
    Vec<(&'a Window, &'a Window)>,
    Vec<&'a Window>,
    Vec<&'a Window>,
    Vec<&'a Window>,
    Vec<&'a Window>,
);

/// Pairs windows when both sides have token rows: first by the rows they hold (`by_rows`,
/// [`tokens::pair_by_rows`] of `a` and `b`), then the windows without token rows as [`pair_windows`] does.
/// Returns the pairs, the unpaired windows without token rows (A, B) and those with token
/// rows that no window of the other side holds the same rows as (A, B), which the token
/// alignment compares row by row.
fn pair_windows_by_rows<'a>(
    a: &'a [Window],
    b: &'a [Window],
    by_rows: &[(usize, usize)],
) -> RowPairs<'a> {
    let mut pairs: Vec<(&Window, &Window)> = by_rows.iter().map(|&(i, j)| (&a[i], &b[j])).collect();
    let paired_a: Set<usize> = by_rows.iter().map(|p| p.0).collect();
    let paired_b: Set<usize> = by_rows.iter().map(|p| p.1).collect();
    let split = |ws: &'a [Window], paired: &Set<usize>| {
        let rest = ws.iter().enumerate().filter(|(i, _)| !paired.contains(i));
        let (rows, plain): (Vec<_>, Vec<_>) = rest.partition(|(_, w)| w.token_rows.is_some());
        (
            rows.into_iter().map(|(_, w)| w).collect::<Vec<&Window>>(),
            plain.into_iter().map(|(_, w)| w).collect::<Vec<&Window>>(),
        )
    };
    let (aligned_a, plain_a) = split(a, &paired_a);
    let (aligned_b, plain_b) = split(b, &paired_b);
    let (rest, only_a, only_b) = pair_window_refs(plain_a, plain_b);
    pairs.extend(rest);
    (pairs, only_a, only_b, aligned_a, aligned_b)
}

/// Why the logical window `w` could not be merged whole, one line per group and side (the
/// groups of its own request window: label, match and occurrence).
fn unmerged_lines(layouts: &LayoutMerge, w: &WindowDiff) -> Vec<String> {
    let mut out = Vec::new();
    for (side, merge, window) in [("A", &layouts.a, &w.a), ("B", &layouts.b, &w.b)] {
        let own = |g: &&GroupMerge| {
            g.logical_rank == w.rank
                && g.label == window.label
                && g.match_index == window.match_index
                && g.occurrence == window.occurrence
        };
        for g in merge.groups.iter().filter(own) {
            let mut why = Vec::new();
            if !g.missing_ranks.is_empty() {
                why.push(format!(
                    "{} rank{} {} of {} not captured",
                    g.axis,
                    if g.missing_ranks.len() == 1 { "" } else { "s" },
                    g.missing_ranks
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    g.size
                ));
            }
            why.extend(g.inconsistent.iter().cloned());
            let stages = g.warnings.len();
            if stages > 0 {
                why.push(format!(
                    "{stages} stage{} not merged",
                    if stages == 1 { "" } else { "s" }
                ));
            }
            if !why.is_empty() {
                out.push(format!(
                    "{side}'s {} group of {} (ranks {}) could not be merged whole: {}",
                    g.axis,
                    g.size,
                    g.ranks
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    why.join("; ")
                ));
            }
        }
    }
    out
}

type WindowPairs<'a> = (
    Vec<(&'a Window, &'a Window)>,
    Vec<&'a Window>,
    Vec<&'a Window>,
);

/// Pairs windows: per rank, one against one; with several, by equal label, then by
/// (match, occurrence), then in order. Labels are request ids and usually differ between runs,
/// so a single window per rank pairs whatever its label.
pub fn pair_windows<'a>(a: &'a [Window], b: &'a [Window]) -> WindowPairs<'a> {
    pair_window_refs(a.iter().collect(), b.iter().collect())
}

fn pair_window_refs<'a>(a: Vec<&'a Window>, b: Vec<&'a Window>) -> WindowPairs<'a> {
    let mut by_rank: BTreeMap<u32, (Vec<&Window>, Vec<&Window>)> = BTreeMap::new();
    for m in a {
        by_rank.entry(m.rank).or_default().0.push(m);
    }
    for m in b {
        by_rank.entry(m.rank).or_default().1.push(m);
    }
    let (mut pairs, mut only_a, mut only_b) = (Vec::new(), Vec::new(), Vec::new());
    for (_, (mut xs, mut ys)) in by_rank {
        if xs.len() == 1 && ys.len() == 1 {
            pairs.push((xs[0], ys[0]));
            continue;
        }
        for matches in [
            (|x: &Window, y: &Window| x.label == y.label) as fn(&Window, &Window) -> bool,
            |x, y| (x.match_index, x.occurrence) == (y.match_index, y.occurrence),
        ] {
            let mut i = 0;
            while i < xs.len() {
                if let Some(j) = ys.iter().position(|y| matches(xs[i], y)) {
                    pairs.push((xs.remove(i), ys.remove(j)));
                } else {
                    i += 1;
                }
            }
        }
        let n = xs.len().min(ys.len());
        pairs.extend(xs.drain(..n).zip(ys.drain(..n)));
        only_a.extend(xs);
        only_b.extend(ys);
    }
    (pairs, only_a, only_b)
}

/// Diffs one pair of windows.
pub fn diff_windows(a: &Window, b: &Window, tolerances: &Tolerances) -> WindowDiff {
    let (pairing, only_a, only_b) = pair_records(&a.records, &b.records);
    // Comparing is independent per pair: rayon's threads share it, in A's order.
    let pair = |(position, j): (usize, usize)| {
        let (ra, rb) = (&a.records[position], &b.records[j]);
        PairDiff {
            key: ra.key(),
            position,
            seq_a: ra.seq,
            seq_b: rb.seq,
            dtype_a: ra.dtype.clone(),
            dtype_b: rb.dtype.clone(),
            shape_a: ra.shape.clone(),
            shape_b: rb.shape.clone(),
            comparison: compare_records(ra, rb, tolerances),
            pieces_a: ra.merged_from.as_deref().cloned().unwrap_or_default(),
            pieces_b: rb.merged_from.as_deref().cloned().unwrap_or_default(),
            shard_a: ra.shard.clone(),
            shard_b: rb.shard.clone(),
        }
    };
    let mut pairs = Vec::new();
    match pairing {
        Pairing::Lockstep(n) => (0..n)
            .into_par_iter()
            .with_min_len(1024)
            .map(|i| pair((i, i)))
            .collect_into_vec(&mut pairs),
        Pairing::Matched(matched) => matched
            .par_iter()
            .with_min_len(1024)
            .map(|&m| pair(m))
            .collect_into_vec(&mut pairs),
    }
    let first_divergence = pairs.iter().position(|p| p.comparison.verdict.diverges());
    let count = |f: fn(&PairDiff) -> bool| pairs.iter().filter(|p| f(p)).count();
    let precision_changes = count(|p| p.comparison.precision_change);
    let not_compared = count(|p| matches!(p.comparison.verdict, Verdict::NotCompared { .. }));
    let checksum_inconclusive = count(|p| p.comparison.verdict == Verdict::ChecksumInconclusive);
    let overflowed = count(|p| {
        p.comparison.stats.iter().any(|d| {
            d.excluded
                .as_ref()
                .is_some_and(|e| e.kind == ExclusionKind::Overflow)
        })
    });
    let first_divergence_key = first_divergence.map(|i: usize| pairs[i].key.clone());
    WindowDiff {
        metadata_differences: metadata_differences(a, b),
        rank: a.rank,
        a: WindowRef::of(a),
        b: WindowRef::of(b),
        identity: Identity::of(a, b),
        missing_data: record_drop(a, b),
        pairs,
        only_a,
        only_b,
        first_divergence_key,
        first_divergence,
        not_compared,
        checksum_inconclusive,
        overflowed,
        precision_changes,
        first_nonfinite_a: NonFinite::first_in(a),
        first_nonfinite_b: NonFinite::first_in(b),
        unmerged: Vec::new(),
    }
}

/// `key: A vs B` for each metadata key (token ids aside) and topology field that differs.
fn metadata_differences(a: &Window, b: &Window) -> Vec<String> {
    let text = |v: Option<&serde_json::Value>| v.map_or("(absent)".to_string(), |v| v.to_string());
    // What is compared: the metadata, token ids aside (judged by the identity check) and the
    // process id (different on every run), with `parallel` as its groups of two ranks or more.
    // Windows aligned by their token rows hold their own positions (a chunk, a decode step):
    // the row map says them, and different positions are the point, not a configuration.
    let by_rows = a.token_rows.is_some() && b.token_rows.is_some();
    let compared = |w: &Window| -> BTreeMap<String, serde_json::Value> {
        let mut m: BTreeMap<String, serde_json::Value> = w
            .metadata
            .iter()
            .filter(|(k, _)| *k != "token_ids" && *k != "pid" && *k != "parallel")
            .filter(|(k, _)| !(by_rows && *k == "positions"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if let Some(groups) = groups_only(w) {
            m.insert("parallel".to_string(), groups);
        }
        m
    };
    let (ma, mb) = (compared(a), compared(b));
    let mut keys: Vec<&String> = ma.keys().chain(mb.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out: Vec<String> = keys
        .into_iter()
        .filter(|k| ma.get(*k) != mb.get(*k))
        .map(|k| {
            let (x, y) = excerpts(&text(ma.get(k)), &text(mb.get(k)));
            format!("{k}: {x} vs {y}")
        })
        .collect();
    if a.world_size != b.world_size {
        out.push(format!("world_size: {} vs {}", a.world_size, b.world_size));
    }
    out
}

/// `metadata.parallel` without its groups of one rank (`[0, 1]`: no group at all), `None` when
/// nothing is left: a TP=1 run that recorded `{"tp": [0, 1]}`, one that recorded nothing, and a
/// TP=2 group merged into one logical rank have the same configuration.
fn groups_only(w: &Window) -> Option<serde_json::Value> {
    let value = w.metadata.get("parallel")?;
    let Some(object) = value.as_object() else {
        return Some(value.clone());
    };
    let groups: serde_json::Map<String, serde_json::Value> = object
        .iter()
        .filter(|(_, v)| v.get(1).and_then(serde_json::Value::as_u64) != Some(1))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!groups.is_empty()).then(|| groups.into())
}

/// At most this many characters of each side of a configuration difference are shown.
const EXCERPT_CHARS: usize = 60;
/// Characters shown before the first difference when the excerpt starts inside a string.
const EXCERPT_BEFORE: usize = 20;

/// Two values as shown side by side: whole when both are short, else the same window of each
/// around their first differing character, with `…` where text is left out (two long strings
/// that share a prefix would otherwise look identical).
fn excerpts(a: &str, b: &str) -> (String, String) {
    let (ca, cb): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    if ca.len() <= EXCERPT_CHARS && cb.len() <= EXCERPT_CHARS {
        return (a.to_string(), b.to_string());
    }
    let first = ca
        .iter()
        .zip(&cb)
        .position(|(x, y)| x != y)
        .unwrap_or(ca.len().min(cb.len()));
    // Keep the start when the difference is within the first EXCERPT_BEFORE characters.
    let start = first.saturating_sub(EXCERPT_BEFORE);
    let cut = |chars: &[char]| {
        let end = (start + EXCERPT_CHARS).min(chars.len());
        let mut out = String::new();
        if start > 0 {
            out.push('…');
        }
        out.extend(&chars[start.min(end)..end]);
        if end < chars.len() {
            out.push('…');
        }
        out
    };
    (cut(&ca), cut(&cb))
}

/// Which records of two windows pair, as `diff_windows` needs it.
enum Pairing {
    /// Record `i` of A pairs with record `i` of B, for `i < n`.
    Lockstep(usize),
    /// `(position in A, index in B)`, in A's order.
    Matched(Vec<(usize, usize)>),
}

/// Pairs records by `stage#occurrence`: the first record of a duplicated key is the one
/// paired (load warns about the rest). Returns the pairing and the keys only in A and only
/// in B, each in its side's order.
fn pair_records(a: &[Record], b: &[Record]) -> (Pairing, Vec<String>, Vec<String>) {
    // Two runs of one program capture the same stages in the same order: when the keys match
    // position by position and none repeats, record i pairs with record i and nothing is
    // unpaired, which is what the matching below finds too, without hashing a million keys.
    let same_keys = a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.occurrence == y.occurrence && x.stage == y.stage);
    if same_keys && keys_increase(a) {
        return (Pairing::Lockstep(a.len()), Vec::new(), Vec::new());
    }
    let (matched, only_a, only_b) = match_records(a, b);
    (Pairing::Matched(matched), only_a, only_b)
}

/// The general pairing of [`pair_records`], by hashing keys.
fn match_records(a: &[Record], b: &[Record]) -> (Vec<(usize, usize)>, Vec<String>, Vec<String>) {
    let mut index_b: Map<(&str, u32), usize> =
        Map::with_capacity_and_hasher(b.len(), Default::default());
    for (i, r) in b.iter().enumerate() {
        index_b.entry((r.stage.as_str(), r.occurrence)).or_insert(i);
    }
    let mut paired_b = vec![false; b.len()];
    let mut seen_a: Set<(&str, u32)> = Set::with_capacity_and_hasher(a.len(), Default::default());
    let mut matched = Vec::with_capacity(a.len().min(b.len()));
    let mut only_a = Vec::new();
    for (position, ra) in a.iter().enumerate() {
        let key = (ra.stage.as_str(), ra.occurrence);
        if !seen_a.insert(key) {
            continue;
        }
        match index_b.get(&key) {
            Some(&j) => {
                paired_b[j] = true;
                matched.push((position, j));
            }
            None => only_a.push(ra.key()),
        }
    }
    let only_b = b
        .iter()
        .enumerate()
        .filter(|&(i, r)| !paired_b[i] && index_b[&(r.stage.as_str(), r.occurrence)] == i)
        .map(|(_, r)| r.key())
        .collect();
    (matched, only_a, only_b)
}

/// The missing-data message when one side holds far fewer records than the other.
fn record_drop(a: &Window, b: &Window) -> Option<String> {
    let (count_a, count_b) = (a.records.len(), b.records.len());
    // The advice follows the evidence: graph-slot records on a side, then the format's own
    // reasons, then differing labels; never a default story.
    let graph = |w: &Window| w.records.iter().any(|r| r.mode == Mode::Graph);
    let why = if a.format != b.format {
        "The two captures are in different formats and name their stages differently.".to_string()
    } else if graph(a) || graph(b) {
        "In graph mode capture() inside the graph does not run at replay; only graph slots \
         and code outside the graph are recorded."
            .to_string()
    } else if a.label != b.label && a.facts.records_input_ids {
        format!(
            "{} The labels differ ({:?} vs {:?}): these may be different requests.",
            a.facts.missing_data_advice, a.label, b.label
        )
    } else {
        a.facts.missing_data_advice.to_string()
    };
    let (small, large, side) = if count_b < count_a {
        (count_b, count_a, "B")
    } else {
        (count_a, count_b, "A")
    };
    ((small as f64) < RECORD_DROP_RATIO * large as f64).then(|| {
        format!(
            "MISSING DATA: {side} holds {small} records against {large}. {why} \
             Unpaired stages are missing evidence, not agreement."
        )
    })
}

fn overview(windows: &[WindowDiff]) -> (Vec<String>, BTreeMap<u32, Vec<Cell>>) {
    fn keys(w: &WindowDiff) -> impl Iterator<Item = &String> {
        w.pairs
            .iter()
            .map(|p| &p.key)
            .chain(&w.only_a)
            .chain(&w.only_b)
    }
    fn add<'w>(key: &'w str, column: &mut Map<&'w str, usize>, stages: &mut Vec<String>) {
        column.entry(key).or_insert_with(|| {
            stages.push(key.to_owned());
            stages.len() - 1
        });
    }
    // A window's pairs, when they are the first columns in order (every rank of one
    // program captures the same stages), find their columns without a lookup.
    let in_step = |w: &WindowDiff, stages: &[String]| {
        w.pairs.len() <= stages.len() && w.pairs.iter().zip(stages).all(|(p, s)| p.key == *s)
    };
    let mut stages: Vec<String> = Vec::new();
    let mut column: Map<&str, usize> = Map::default();
    let mut aligned = Vec::with_capacity(windows.len());
    for (n, w) in windows.iter().enumerate() {
        if n == 0 {
            // One window's keys are distinct (pairs are unique, the unpaired keys are
            // neither paired nor repeated), so they are the first columns, in order.
            w.pairs
                .par_iter()
                .with_min_len(4096)
                .map(|p| p.key.clone())
                .collect_into_vec(&mut stages);
            stages.extend(w.only_a.iter().chain(&w.only_b).cloned());
            aligned.push(true);
            continue;
        }
        if n == 1 {
            column.reserve(stages.len());
            column.extend(keys(&windows[0]).map(String::as_str).zip(0..));
        }
        let step = in_step(w, &stages);
        if !step {
            for p in &w.pairs {
                add(&p.key, &mut column, &mut stages);
            }
        }
        for key in w.only_a.iter().chain(&w.only_b) {
            add(key, &mut column, &mut stages);
        }
        aligned.push(step);
    }
    let mut table: BTreeMap<u32, Vec<Cell>> = BTreeMap::new();
    for (w, &step) in windows.iter().zip(&aligned) {
        let row = table
            .entry(w.rank)
            .or_insert_with(|| vec![Cell::Missing; stages.len()]);
        for (i, p) in w.pairs.iter().enumerate() {
            let at = if step { i } else { column[p.key.as_str()] };
            row[at] = Cell::of(&p.comparison.verdict);
        }
    }
    (stages, table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_configuration_values_are_shown_where_they_differ() {
        let a = "\"seeded:torch.manual_seed(0); LlamaForCausalLM(LlamaConfig(hidden_size=64, num_layers=2, rope_theta=10000.0))\"";
        let b = "\"seeded:torch.manual_seed(0); LlamaForCausalLM(LlamaConfig(hidden_size=64, num_layers=2, rope_theta=500000.0))\"";
        let (x, y) = excerpts(a, b);
        assert_ne!(x, y);
        assert_eq!(x, "…ayers=2, rope_theta=10000.0))\"");
        assert_eq!(y, "…ayers=2, rope_theta=500000.0))\"");
        // Short values are shown whole; a difference near the start keeps the start.
        assert_eq!(
            excerpts("\"fp32\"", "\"bf16\""),
            ("\"fp32\"".into(), "\"bf16\"".into())
        );
        let (x, _) = excerpts(
            &format!("x{}", "a".repeat(100)),
            &format!("y{}", "a".repeat(100)),
        );
        assert!(
            x.starts_with("xaaa") && x.ends_with('…') && x.chars().count() == 61,
            "{x}"
        );
    }
    use crate::model::dump::{Mode, Stats};

    fn record(stage: &str, occurrence: u32, seq: u64, value: f64) -> Record {
        Record {
            seq,
            stage: stage.into(),
            occurrence,
            mode: Mode::Eager,
            dtype: "float32".into(),
            shape: vec![2].into(),
            stride: vec![1].into(),
            storage_offset: 0,
            element_size: 4,
            numel: 2,
            storage_ptr: None,
            storage_id: None,
            storage_nbytes: None,
            data_ptr: None,
            device: "cpu".into(),
            device_format: None,
            is_contiguous: true,
            stats: Some(Stats {
                nan_count: 0,
                inf_count: 0,
                finite_count: Some(2),
                max_abs: Some(value),
                min: Some(-value),
                max: Some(value),
                mean: Some(0.0),
                l2: Some(value),
                pos_checksum: Some(value / 2.0),
                counts_known: true,
                reduced_in_dtype: false,
            }),
            tensor_file: None,
            rows_kept: None,
            rows_total: None,
            truncated: None,
            ..Record::default()
        }
    }

    /// Key sequences from a small alphabet: repeats, gaps and reorderings happen often.
    fn records(seed: &mut u64, n: usize, increasing: bool) -> Vec<Record> {
        let mut next = || {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (*seed >> 33) as u32
        };
        let mut count = [0u32; 3];
        (0..n)
            .map(|i| {
                let s = (next() % 3) as usize;
                count[s] += 1;
                let occurrence = if increasing { count[s] } else { 1 + next() % 3 };
                record(
                    ["a", "b", "c"][s],
                    occurrence,
                    i as u64,
                    1.0 + f64::from(next() % 5),
                )
            })
            .collect()
    }

    #[test]
    fn lockstep_pairs_exactly_as_matching_does() {
        let mut seed = 7;
        let mut lockstep = 0;
        for round in 0..400 {
            let n = round % 12;
            let a = records(&mut seed, n, round % 2 == 0);
            let b = match round % 4 {
                0 | 1 => a.clone(),
                2 => records(&mut seed, n, true),
                _ => a.iter().rev().cloned().collect(),
            };
            let (matched, only_a, only_b) = match_records(&a, &b);
            match pair_records(&a, &b) {
                (Pairing::Lockstep(len), pa, pb) => {
                    lockstep += 1;
                    assert_eq!(matched, (0..len).map(|i| (i, i)).collect::<Vec<_>>());
                    assert_eq!((pa, pb), (only_a, only_b));
                }
                (Pairing::Matched(m), pa, pb) => assert_eq!((m, pa, pb), (matched, only_a, only_b)),
            }
        }
        assert!(lockstep > 50, "the shortcut was hardly taken: {lockstep}");
    }

    /// The overview as first written: every key through one map.
    fn overview_by_lookup(windows: &[WindowDiff]) -> (Vec<String>, BTreeMap<u32, Vec<Cell>>) {
        let mut stages: Vec<String> = Vec::new();
        let mut column: HashMap<String, usize> = HashMap::new();
        for w in windows {
            for key in w
                .pairs
                .iter()
                .map(|p| &p.key)
                .chain(&w.only_a)
                .chain(&w.only_b)
            {
                if !column.contains_key(key) {
                    column.insert(key.clone(), stages.len());
                    stages.push(key.clone());
                }
            }
        }
        let mut table: BTreeMap<u32, Vec<Cell>> = BTreeMap::new();
        for w in windows {
            let row = table
                .entry(w.rank)
                .or_insert_with(|| vec![Cell::Missing; stages.len()]);
            for p in &w.pairs {
                row[column[&p.key]] = Cell::of(&p.comparison.verdict);
            }
        }
        (stages, table)
    }

    #[test]
    fn overview_columns_are_those_of_a_plain_lookup() {
        let mut seed = 11;
        let tolerances = Tolerances::default();
        for round in 0..60 {
            let base = records(&mut seed, 9, true);
            let windows: Vec<WindowDiff> = (0..1 + round % 4)
                .map(|rank| {
                    let mut a = base.clone();
                    let mut b = records(&mut seed, 9, true);
                    match (round + rank) % 3 {
                        0 => b = a.clone(),
                        1 => a.truncate(5),
                        _ => a.reverse(),
                    }
                    let window = |records: Vec<Record>| Window {
                        source: std::path::PathBuf::from("m.json"),
                        schema_version: 1,
                        probe: String::new(),
                        label: "l".into(),
                        match_index: 1,
                        occurrence: 1,
                        attempt: 1,
                        rank: rank as u32,
                        world_size: 4,
                        metadata: Default::default(),
                        stats_dtype: None,
                        records,
                        input_sets: Vec::new(),
                        run: None,
                        format: Default::default(),
                        facts: Default::default(),
                        context: None,
                        token_rows: None,
                    };
                    diff_windows(&window(a), &window(b), &tolerances)
                })
                .collect();
            assert_eq!(
                overview(&windows),
                overview_by_lookup(&windows),
                "round {round}"
            );
        }
    }
}
