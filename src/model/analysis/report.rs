//! The first-mismatch report: everything a colleague needs to act on a capture pair,
//! as JSON (for tools) and Markdown (for an issue or a chat).

use serde::Serialize;

use crate::model::analysis::Analysis;
use crate::model::analysis::compare::{Tolerances, Verdict};
use crate::model::analysis::diff::{DiffReport, Identity, LayoutMerge, WindowDiff};
use crate::model::analysis::merge::SideMerge;
use crate::model::analysis::scan::{AliasGroup, NonFinite, WindowScan};
use crate::model::dump::Window;
use crate::model::dump::{Dump, StageKey, Warning, WindowId, capture_regex};
use crate::model::replay::Replay;
use crate::model::tensor::pairing::FileComparison;

/// Lists longer than this are cut in the report (the full lists are in `dumpview diff --json`).
pub const LIST_LIMIT: usize = 40;

/// A file a finding rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    /// What the file is, e.g. "A manifest", "B tensor of layers.3.mlp_up#1".
    pub what: String,
    /// The file's path as given or resolved (a tensor path always inside its window
    /// directory).
    pub path: String,
}

/// First non-finite record of one window of one side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideNonFinite {
    /// `'a'` or `'b'`.
    pub side: char,
    /// The window's rank.
    pub rank: u32,
    /// The window's label.
    pub label: String,
    /// The first record in capture order with NaN or inf; `None` when the window has none.
    pub first: Option<NonFinite>,
    /// How many records of the window hold NaN or inf.
    pub nonfinite_records: usize,
}

/// Stride-conflicting alias groups of one window of one side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AliasSuspects {
    /// `'a'` or `'b'`.
    pub side: char,
    /// The window's rank.
    pub rank: u32,
    /// The window's alias groups with `stride_conflict` (docs/scan.md); never empty.
    pub groups: Vec<AliasGroup>,
}

/// Coverage and the first divergence of one pair of windows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowFinding {
    /// The rank of the window pair.
    pub rank: u32,
    /// A's window source (manifest or dump.json path).
    pub a: String,
    /// B's window source.
    pub b: String,
    /// A's and B's windows in the captures the report was built from (not serialized: the
    /// JSON names them by `a` and `b`).
    #[serde(skip)]
    pub ids: [Option<WindowId>; 2],
    /// Input identity from the token ids (docs/diff.md, "Input identity").
    pub identity: Identity,
    /// [`Identity::describe`]: the identity as one line for people.
    pub identity_text: String,
    /// Number of records paired by `stage#occurrence`.
    pub paired: usize,
    /// Number of keys captured only in A (missing evidence).
    pub only_a: usize,
    /// Number of keys captured only in B (missing evidence).
    pub only_b: usize,
    /// The first `LIST_LIMIT` keys captured on one side only.
    pub only_a_keys: Vec<String>,
    /// The first `LIST_LIMIT` keys captured only in B.
    pub only_b_keys: Vec<String>,
    /// The `MISSING DATA` message when one side holds fewer than half the other's records;
    /// `None` otherwise.
    pub missing_data: Option<String>,
    /// Pairs whose dtypes differ within one kind (float32 vs bfloat16), compared by value.
    pub precision_changes: usize,
    /// Metadata and topology that differ between the two runs (`key: A vs B`).
    pub metadata_differences: Vec<String>,
    /// The first divergence with both sides' statistics, their differences and bounds.
    pub first_divergence: Option<crate::model::analysis::diff::PairDiff>,
    /// Number of pairs whose verdict diverges ([`crate::model::analysis::compare::Verdict::diverges`]).
    pub diverging_pairs: usize,
    /// Number of pairs not compared (no statistics on either side, or on one side only):
    /// missing evidence.
    pub not_compared: usize,
    /// The first `LIST_LIMIT` of them, each `key (reason)`.
    pub not_compared_keys: Vec<String>,
    /// Number of pairs whose position checksum is inconclusive (moved within a rounding bound
    /// that is above what one moved row shifts): neither agreement nor a divergence.
    pub checksum_inconclusive: usize,
    /// The first `LIST_LIMIT` of them.
    pub checksum_inconclusive_keys: Vec<String>,
    /// Statistics the dump tool's own accumulation overflowed (not compared), `key: text`,
    /// the first `LIST_LIMIT`; `overflowed_pairs` counts the pairs.
    pub overflowed: Vec<String>,
    /// Number of pairs with an overflowed statistic.
    pub overflowed_pairs: usize,
    /// A capture command that saves the diverging stage's tensors on the next run
    /// (`DUMP_PROBE_RANKS=all` for a side merged over a parallel group: every rank of the
    /// group holds a piece).
    pub next_step: Option<String>,
    /// Number of pairs with a record merged over a parallel group ([`PairDiff::merged`]).
    ///
    /// [`PairDiff::merged`]: crate::model::analysis::diff::PairDiff::merged
    pub merged_pairs: usize,
    /// Keys of the partial sums compared on `mean` and `pos_checksum` only (the first
    /// `LIST_LIMIT`); `partial_pairs` counts them.
    pub partial_keys: Vec<String>,
    /// Number of partial-sum pairs.
    pub partial_pairs: usize,
}

/// The report. `b`-side fields are empty for a single capture.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The writer, `dumpview <version>`.
    pub dumpview: String,
    /// A's window sources, in load order.
    pub inputs_a: Vec<String>,
    /// B's window sources; empty for a single capture.
    pub inputs_b: Vec<String>,
    /// The diff's tolerances; `None` for a single capture.
    pub tolerances: Option<Tolerances>,
    /// One finding per paired window; empty for a single capture.
    pub windows: Vec<WindowFinding>,
    /// One line per window with no partner on the other side (rank, label, source).
    pub missing_windows: Vec<String>,
    /// The rank that diverges first (earliest first divergence in capture order, ties to the
    /// lowest rank); `None` when none diverges or for a single capture.
    pub first_rank: Option<u32>,
    /// First non-finite record of every window, A's then B's.
    pub nonfinite: Vec<SideNonFinite>,
    /// Windows with stride-conflicting alias groups, A's then B's.
    pub alias_suspects: Vec<AliasSuspects>,
    /// Manifests and saved tensors the findings rest on, each path once.
    pub evidence: Vec<Evidence>,
    /// The loaders' warnings, A's then B's.
    pub warnings: Vec<Warning>,
    /// Saved tensors compared element by element, in the order they were added: by
    /// `dumpview report`, each window's first divergence's pair, then every other pair of
    /// matched records both captures saved, in capture order, within the tensor budget; by
    /// the workbench's export, those the user compared.
    pub tensor_comparisons: Vec<TensorFinding>,
    /// What the tensor budget (`dumpview report --tensor-budget`) allowed and left out;
    /// absent from the workbench's export (no sweep there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor_budget: Option<TensorBudget>,
    /// Single-operator replays given to the report (`dumpview report --replay DIR`), in the
    /// order given; absent from the JSON when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replays: Vec<ReplayFinding>,
    /// The first non-finite across ranks of each request captured on several ranks, A's then
    /// B's (docs/scan.md, "Across ranks").
    pub across_ranks: Vec<SideAcrossRanks>,
    /// How the diff merged parallel groups, when A and B have different group sizes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layouts: Option<crate::model::analysis::diff::LayoutMerge>,
    /// `replicated` stages whose ranks disagree (docs/diff.md, "Replicated stages").
    pub replicated: Vec<crate::model::analysis::replicated::ReplicationFinding>,
    /// The diff's earliest finding ([`crate::model::analysis::diff::Headline`]); `None` for a
    /// single capture or when nothing diverged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headline: Option<crate::model::analysis::diff::Headline>,
    /// What `--ignore` left out of the search, one line per window.
    pub ignored: Vec<String>,
    /// The token rows aligned by request and position, with each request's first bad token
    /// (docs/diff.md, "Token rows"); absent unless both sides captured token rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<crate::model::analysis::tokens::TokenDiff>,
    /// The findings connected into one answer, with the next experiment
    /// ([`crate::model::analysis::diagnosis`]); the report opens with it.
    pub diagnosis: crate::model::analysis::diagnosis::Diagnosis,
    /// A's findings from one run, with what could not be checked (docs/scan.md, "Findings
    /// from one run").
    pub single_run_a: crate::model::analysis::single_run::SingleRun,
    /// B's, as `single_run_a` (empty for a single capture).
    pub single_run_b: crate::model::analysis::single_run::SingleRun,
    /// Agreeing pairs whose layout differs: moved writes and grouped notes (docs/diff.md,
    /// "Layout differences"); absent for a single capture or when there are none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout_differences: Option<crate::model::analysis::layout_diff::LayoutDifferences>,
}

/// The first non-finite across the ranks of one request on one side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideAcrossRanks {
    /// `'a'` or `'b'`.
    pub side: char,
    /// The answer.
    #[serde(flatten)]
    pub across: crate::model::analysis::ranks::AcrossRanks,
}

/// One replay output directory, judged (docs/replay.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayFinding {
    /// The directory as given.
    pub dir: String,
    /// The judgement, when the directory could be read and judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<Replay>,
    /// Why not (no replay.json, a damaged file, a reference that raised).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One stage's saved tensors from both captures, compared (docs/tensors.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TensorFinding {
    /// The rank of the compared windows.
    pub rank: u32,
    /// A's window (its manifest or dump.json path) when the rank holds several windows'
    /// comparisons (steps, label windows); `None` from the workbench (the open window).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// `stage#occurrence`.
    pub stage: String,
    /// The metrics, when both files could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<FileComparison>,
    /// Why not (a file missing, unreadable, refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the saved files cover when that is not the whole tensor: "the first 8 of 12
    /// rows" (the probe bounds saved rows by `DUMP_PROBE_ROWS`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coverage: Option<String>,
}

/// The bytes of saved tensor files `dumpview report` may read, and the pairs it left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TensorBudget {
    /// The budget: bytes of both files of every compared pair, summed (their sizes on disk).
    /// Pairs are compared while the sum so far is under it, so the pair that reaches it is
    /// read whole; the first divergences' pairs are compared whatever it is.
    pub budget_bytes: u64,
    /// Bytes the compared pairs' files hold (the first divergences' pairs included).
    pub bytes_compared: u64,
    /// The pairs not compared, in the order they would have been: every pair after the
    /// budget was reached.
    pub left_out: Vec<LeftOutPair>,
}

/// A pair of saved tensor files the budget left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeftOutPair {
    /// The rank of the window pair.
    pub rank: u32,
    /// A's window source.
    pub window: String,
    /// `stage#occurrence`.
    pub stage: String,
}

/// The saved tensors of one stage in A and B, to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedPair {
    /// Whether this is the stage of its window pair's first divergence.
    pub first_divergence: bool,
    /// The rank of the window pair.
    pub rank: u32,
    /// The A window's source.
    pub window: String,
    /// `stage#occurrence`.
    pub stage: String,
    /// A's saved tensor file.
    pub a: std::path::PathBuf,
    /// B's saved tensor file (the reference).
    pub b: std::path::PathBuf,
}

impl Report {
    /// Builds the report of capture `a`, diffed against `b` when given, from their
    /// `analysis` (computed with B when B is given).
    pub fn build(a: &Dump, b: Option<&Dump>, analysis: &Analysis) -> Report {
        let tolerances = &analysis.tolerances;
        let mut nonfinite = Vec::new();
        let mut alias_suspects = Vec::new();
        let mut evidence = Vec::new();
        let sides = std::iter::once(('a', a, &analysis.scans_a))
            .chain(b.map(|d| ('b', d, &analysis.scans_b)));
        for (side, dump, scans) in sides {
            for (window, scan) in dump.windows.iter().zip(scans) {
                let scan: WindowScan = scan.clone();
                nonfinite.push(SideNonFinite {
                    side,
                    rank: scan.rank,
                    label: scan.label.clone(),
                    first: scan.first_nonfinite.clone(),
                    nonfinite_records: scan.nonfinite_records,
                });
                let conflicts: Vec<AliasGroup> = scan
                    .alias_groups
                    .into_iter()
                    .filter(|g| g.stride_conflict)
                    .collect();
                if !conflicts.is_empty() {
                    alias_suspects.push(AliasSuspects {
                        side,
                        rank: window.rank,
                        groups: conflicts,
                    });
                }
                evidence.push(Evidence {
                    what: format!(
                        "{} manifest, rank {}",
                        side.to_ascii_uppercase(),
                        window.rank
                    ),
                    path: window.source.display().to_string(),
                });
                if let Some(nf) = &scan.first_nonfinite {
                    evidence.extend(tensor_evidence(side, window, &nf.key));
                }
            }
        }
        let report = analysis.diff.as_ref().filter(|_| b.is_some());
        let mut windows = Vec::new();
        let mut missing_windows = Vec::new();
        if let (Some(report), Some(b)) = (report, b) {
            for w in &report.windows {
                if let Some(first) = w.first() {
                    for (side, dump, id) in [('a', a, w.a.id), ('b', b, w.b.id)] {
                        if let Some(m) = id.and_then(|id| dump.window(id)) {
                            evidence.extend(tensor_evidence(side, m, &first.key));
                        }
                    }
                }
                let merged = |side: fn(&LayoutMerge) -> &SideMerge| {
                    report
                        .layouts
                        .as_ref()
                        .is_some_and(|l| side(l).groups.iter().any(|g| g.size > 1))
                };
                windows.push(finding(w, [merged(|l| &l.a), merged(|l| &l.b)]));
            }
            missing_windows = missing(report);
        }
        let mut seen = std::collections::HashSet::new();
        evidence.retain(|e| seen.insert(e.path.clone()));
        let mut warnings = a.warnings.clone();
        if let Some(b) = b {
            warnings.extend(b.warnings.iter().cloned());
        }
        warnings.extend(report.iter().flat_map(|r| r.merge_warnings()));
        Report {
            dumpview: format!("dumpview {}", env!("CARGO_PKG_VERSION")),
            inputs_a: sources(a),
            inputs_b: b.map(sources).unwrap_or_default(),
            tolerances: b.map(|_| tolerances.clone()),
            first_rank: report.and_then(|r| r.first_rank),
            windows,
            missing_windows,
            nonfinite,
            alias_suspects,
            evidence,
            warnings,
            tensor_comparisons: Vec::new(),
            tensor_budget: None,
            replays: Vec::new(),
            across_ranks: analysis
                .ranks_a
                .iter()
                .map(|x| ('a', x))
                .chain(analysis.ranks_b.iter().map(|x| ('b', x)))
                .map(|(side, across)| SideAcrossRanks {
                    side,
                    across: across.clone(),
                })
                .collect(),
            layouts: report.and_then(|r| r.layouts.clone()),
            replicated: report.map(|r| r.replicated.clone()).unwrap_or_default(),
            headline: report.and_then(|r| r.headline.clone()),
            tokens: report.and_then(|r| r.tokens.clone()),
            diagnosis: crate::model::analysis::diagnosis::diagnose(a, b, analysis),
            single_run_a: analysis.single_run_a.clone(),
            single_run_b: analysis.single_run_b.clone(),
            layout_differences: report
                .map(|r| r.layout_differences.clone())
                .filter(|d| !d.is_empty()),
            ignored: a
                .warnings
                .iter()
                .chain(b.iter().flat_map(|b| &b.warnings))
                .filter(|w| w.message.starts_with("--ignore "))
                .map(ToString::to_string)
                .collect(),
        }
    }

    /// Adds the replay in `dir`, judged (or why it could not be), with its files as
    /// evidence.
    pub fn add_replay(&mut self, dir: String, result: Result<Replay, String>) {
        let (replay, error) = match result {
            Ok(replay) => {
                let what = format!("replay of {}", replay.stage);
                self.evidence.push(Evidence {
                    what: format!("{what}: replay.json"),
                    path: format!("{}/replay.json", dir.trim_end_matches('/')),
                });
                for side in &replay.sides {
                    if let Some(file) = &side.file {
                        self.evidence.push(Evidence {
                            what: format!("{what}: {} outputs", side.role),
                            path: file.clone(),
                        });
                    }
                }
                (Some(replay), None)
            }
            Err(e) => (None, Some(e)),
        };
        self.replays.push(ReplayFinding { dir, replay, error });
    }

    /// Per window pair, the saved tensor files of its first divergence in A and in B, when
    /// both captures name them (a probe run with `DUMP_PROBE_TENSOR` matching that stage), as
    /// ingest resolved them: what to compare with
    /// [`crate::model::tensor::pairing::compare_saved`] and add with
    /// [`Report::add_window_tensor_comparison`]. Whether both files are on disk is the
    /// caller's to check (the analysis never touches the file system).
    pub fn first_divergence_tensors(&self, a: &Dump, b: &Dump) -> Vec<SavedPair> {
        self.divergence_pairs(a, b)
    }

    fn divergence_pairs<'d>(&self, a: &'d Dump, b: &'d Dump) -> Vec<SavedPair> {
        let tensor = named_tensor;
        let find = |dump: &'d Dump, id: Option<WindowId>| id.and_then(|id| dump.window(id));
        let mut found = Vec::new();
        for w in &self.windows {
            let Some(first) = &w.first_divergence else {
                continue;
            };
            let (Some(wa), Some(wb)) = (find(a, w.ids[0]), find(b, w.ids[1])) else {
                continue;
            };
            if let (Some(pa), Some(pb)) = (tensor(wa, &first.key), tensor(wb, &first.key)) {
                found.push(SavedPair {
                    first_divergence: true,
                    rank: w.rank,
                    window: w.a.clone(),
                    stage: first.key.clone(),
                    a: pa,
                    b: pb,
                });
            }
        }
        found
    }

    /// Every pair of saved tensor files of records matched by `stage#occurrence` in a window
    /// pair (both captures name a file for it, as ingest resolved it), to compare with
    /// [`crate::model::tensor::pairing::compare_saved`]: each window pair's first divergence
    /// first ([`Report::first_divergence_tensors`], `first_divergence` set), then every other
    /// pair, window pair by window pair, in A's capture order. Whether the files are on disk
    /// is the caller's to check.
    pub fn saved_tensors(&self, a: &Dump, b: &Dump) -> Vec<SavedPair> {
        let mut found = self.divergence_pairs(a, b);
        for w in &self.windows {
            let wa = w.ids[0].and_then(|id| a.window(id));
            let wb = w.ids[1].and_then(|id| b.window(id));
            let (Some(wa), Some(wb)) = (wa, wb) else {
                continue;
            };
            let mut saved_b = std::collections::HashMap::new();
            for r in &wb.records {
                if let Some(path) = &r.tensor_resolved {
                    saved_b.entry(r.key()).or_insert(path);
                }
            }
            let first = w.first_divergence.as_ref().map(|p| p.key.as_str());
            let mut seen = std::collections::HashSet::new();
            for r in &wa.records {
                let (Some(pa), key) = (&r.tensor_resolved, r.key()) else {
                    continue;
                };
                if Some(key.as_str()) == first || !seen.insert(key.clone()) {
                    continue;
                }
                if let Some(pb) = saved_b.get(&key) {
                    found.push(SavedPair {
                        first_divergence: false,
                        rank: w.rank,
                        window: w.a.clone(),
                        stage: key,
                        a: pa.clone(),
                        b: (*pb).clone(),
                    });
                }
            }
        }
        found
    }

    /// Records what the tensor budget allowed and left out.
    pub fn set_tensor_budget(&mut self, budget: TensorBudget) {
        self.tensor_budget = Some(budget);
    }

    /// Adds one stage's tensor comparison (replacing an earlier one of the same rank and
    /// stage).
    pub fn add_tensor_comparison(
        &mut self,
        rank: u32,
        stage: String,
        result: Result<FileComparison, String>,
    ) {
        self.add_window_tensor_comparison(rank, None, stage, result);
    }

    /// [`Report::add_tensor_comparison`] for the window whose A side is `window`.
    pub fn add_window_tensor_comparison(
        &mut self,
        rank: u32,
        window: Option<String>,
        stage: String,
        result: Result<FileComparison, String>,
    ) {
        self.tensor_comparisons
            .retain(|t| !(t.rank == rank && t.stage == stage && t.window == window));
        let (comparison, error) = match result {
            Ok(c) => (Some(c), None),
            Err(e) => (None, Some(e)),
        };
        if comparison.is_some() {
            // The tensors that advice would capture are here already.
            for w in self.windows.iter_mut().filter(|w| {
                w.rank == rank
                    && window.as_ref().is_none_or(|source| *source == w.a)
                    && w.first_divergence.as_ref().is_some_and(|p| p.key == stage)
            }) {
                w.next_step = None;
            }
        }
        self.tensor_comparisons.push(TensorFinding {
            rank,
            window,
            stage,
            comparison,
            error,
            coverage: None,
        });
    }

    /// Notes, for each tensor comparison, when the saved files hold only the first rows of
    /// the captured tensor (from the records' `rows_kept` / `rows_total` in `a` and `b`).
    pub fn note_saved_rows(&mut self, a: &Dump, b: &Dump) {
        let rows = |dump: &Dump, rank: u32, stage: &str| {
            dump.windows
                .iter()
                .filter(|m| m.rank == rank)
                .flat_map(|m| m.records.iter())
                .find(|r| r.key() == stage && r.tensor_file.is_some())
                .and_then(|r| Some((r.rows_kept?, r.rows_total?)))
                .filter(|(kept, total)| kept < total)
        };
        for t in &mut self.tensor_comparisons {
            let parts: Vec<String> = [
                ('A', rows(a, t.rank, &t.stage)),
                ('B', rows(b, t.rank, &t.stage)),
            ]
            .into_iter()
            .filter_map(|(side, r)| {
                r.map(|(kept, total)| format!("{side} saved the first {kept} of {total} rows"))
            })
            .collect();
            t.coverage = (!parts.is_empty()).then(|| {
                format!(
                    "{} (DUMP_PROBE_ROWS); the rest is not compared",
                    parts.join(", ")
                )
            });
        }
    }

    /// True when the report holds something a user must act on.
    pub fn found_something(&self) -> bool {
        crate::model::dump::any_lost(&self.warnings)
            || self
                .replays
                .iter()
                .any(|r| r.replay.as_ref().is_none_or(|r| r.is_finding()))
            || self.nonfinite.iter().any(|n| n.first.is_some())
            || !self.alias_suspects.is_empty()
            || !self.missing_windows.is_empty()
            || !self.replicated.is_empty()
            || self.single_run_a.found_something()
            || self.single_run_b.found_something()
            || self
                .layout_differences
                .as_ref()
                .is_some_and(|d| !d.moved.is_empty())
            || self.layouts.as_ref().is_some_and(|l| {
                [&l.a, &l.b].iter().any(|side| {
                    !side.invalid.is_empty()
                        || side
                            .groups
                            .iter()
                            .any(|g| !g.missing_ranks.is_empty() || !g.warnings.is_empty())
                })
            })
            || self.tokens.as_ref().is_some_and(|t| t.first.is_some())
            || self.windows.iter().any(|w| {
                w.first_divergence.is_some() || w.identity.is_mismatch() || w.missing_data.is_some()
            })
    }
}

/// The finding of one window pair; `merged[0]` / `merged[1]`: A / B was merged over a
/// parallel group (its window's rank is a logical rank, and every rank holds a piece).
fn finding(w: &WindowDiff, merged: [bool; 2]) -> WindowFinding {
    let first = w.first().cloned();
    let next_step = first.as_ref().map(|p| {
        let stage = StageKey::stage_of(&p.key);
        let select = |r: &crate::model::analysis::diff::WindowRef, merged: bool| {
            format!(
                "DUMP_PROBE=1 DUMP_PROBE_RANKS={} DUMP_PROBE_TENSOR='{}' DUMP_PROBE_MATCH={} DUMP_PROBE_OCCURRENCE={}",
                if merged { "all".to_string() } else { r.rank.to_string() },
                capture_regex(stage),
                r.match_index,
                r.occurrence
            )
        };
        format!(
            "# A\n{} <command of A>\n# B\n{} <command of B>",
            select(&w.a, merged[0]),
            select(&w.b, merged[1])
        )
    });
    let partial: Vec<String> = w
        .pairs
        .iter()
        .filter(|p| {
            p.comparison.stats.iter().any(|d| {
                d.excluded.as_ref().is_some_and(|e| {
                    e.kind == crate::model::analysis::compare::ExclusionKind::Partial
                })
            })
        })
        .map(|p| p.key.clone())
        .collect();
    WindowFinding {
        rank: w.rank,
        a: w.a.source.clone(),
        b: w.b.source.clone(),
        ids: [w.a.id, w.b.id],
        identity_text: w.identity.describe(),
        identity: w.identity.clone(),
        paired: w.pairs.len(),
        only_a: w.only_a.len(),
        only_b: w.only_b.len(),
        only_a_keys: w.only_a.iter().take(LIST_LIMIT).cloned().collect(),
        only_b_keys: w.only_b.iter().take(LIST_LIMIT).cloned().collect(),
        missing_data: w.missing_data.clone(),
        precision_changes: w.precision_changes,
        metadata_differences: w.metadata_differences.clone(),
        diverging_pairs: w
            .pairs
            .iter()
            .filter(|p| p.comparison.verdict.diverges())
            .count(),
        not_compared: w.not_compared,
        not_compared_keys: w
            .pairs
            .iter()
            .filter_map(|p| match &p.comparison.verdict {
                Verdict::NotCompared { reason } => Some(format!("{} ({reason})", p.key)),
                _ => None,
            })
            .take(LIST_LIMIT)
            .collect(),
        checksum_inconclusive: w.checksum_inconclusive,
        checksum_inconclusive_keys: w
            .pairs
            .iter()
            .filter(|p| p.comparison.verdict == Verdict::ChecksumInconclusive)
            .map(|p| p.key.clone())
            .take(LIST_LIMIT)
            .collect(),
        overflowed: w
            .overflowed_stats()
            .into_iter()
            .take(LIST_LIMIT)
            .map(|(key, text)| format!("{key}: {text}"))
            .collect(),
        overflowed_pairs: w.overflowed,
        first_divergence: first,
        next_step,
        merged_pairs: w.pairs.iter().filter(|p| p.merged()).count(),
        partial_pairs: partial.len(),
        partial_keys: partial.into_iter().take(LIST_LIMIT).collect(),
    }
}

fn missing(report: &DiffReport) -> Vec<String> {
    let describe = |side: &str, w: &crate::model::analysis::diff::WindowRef| {
        format!(
            "window rank {} label {:?} exists only in {side}: {}",
            w.rank, w.label, w.source
        )
    };
    report
        .unpaired_a
        .iter()
        .map(|w| describe("A", w))
        .chain(report.unpaired_b.iter().map(|w| describe("B", w)))
        .collect()
}

fn sources(dump: &Dump) -> Vec<String> {
    dump.windows
        .iter()
        .map(|w| w.source.display().to_string())
        .collect()
}

/// The saved tensor (and input sets) of `key` in `window`, when the probe wrote them.
fn tensor_evidence(side: char, window: &Window, key: &str) -> Vec<Evidence> {
    let mut out = Vec::new();
    for r in window.records.iter().filter(|r| r.key() == key) {
        // Resolved once, at ingest, under the one evidence rule (dump::evidence): never a
        // path leading out of the dump.
        if let Some(path) = &r.tensor_resolved {
            out.push(Evidence {
                what: format!("{} tensor of {key}", side.to_ascii_uppercase()),
                path: path.display().to_string(),
            });
        }
    }
    out
}

/// The saved tensor file the first record of `key` in `window` names, as ingest resolved it
/// inside the window directory, whether or not it exists.
fn named_tensor(window: &Window, key: &str) -> Option<std::path::PathBuf> {
    window
        .records
        .iter()
        .filter(|r| r.key() == key)
        .find_map(|r| r.tensor_resolved.clone())
}
