//! The analysis of a case matrix ([`analyze`]): each case classified on its newest complete
//! attempt ([`CaseOutcome`]), which axis and value the failures follow ([`Follows`]), the smallest
//! failing case, and, with `--vs`, whether the operator passes while the integration fails
//! ([`Integration`]). Pure: it is handed the plan and the judged attempts.

use serde::Serialize;

use super::plan::{BASELINE, Case, Folded, Plan};
use super::store::{CaseEvidence, INPUTS_FILE, JudgedAttempt, RECORD_FILE, VERDICT_FILE};
use crate::model::replay::{ReplayVerdict, Standard};

/// `format` of the `--json` analysis.
pub const ANALYSIS_FORMAT: &str = "dumpview.cases.analysis";

/// What one case came to (seed 002's kinds of outcome).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseOutcome {
    /// The standard's pass or warning.
    Pass,
    /// The candidate computed, and its outputs are outside the standard (error).
    NumericalMismatch,
    /// The candidate raised.
    Crash,
    /// The candidate refused the dtype or layout (torch's "not implemented for",
    /// "unsupported"): not a product failure.
    UnsupportedCombination,
    /// Planned, and no result: never run, interrupted (no `replay.json`), or a result that
    /// cannot be judged (the reference raised).
    MissingEvidence,
}

impl CaseOutcome {
    /// `pass`, `numerical mismatch`, `crash`, `unsupported combination`, `missing evidence`.
    pub fn name(self) -> &'static str {
        match self {
            CaseOutcome::Pass => "pass",
            CaseOutcome::NumericalMismatch => "numerical mismatch",
            CaseOutcome::Crash => "crash",
            CaseOutcome::UnsupportedCombination => "unsupported combination",
            CaseOutcome::MissingEvidence => "missing evidence",
        }
    }

    /// A product failure: a numerical mismatch or a crash.
    pub fn is_failure(self) -> bool {
        matches!(self, CaseOutcome::NumericalMismatch | CaseOutcome::Crash)
    }

    /// The outcome of a judged replay's verdict.
    pub fn of(verdict: ReplayVerdict) -> CaseOutcome {
        match verdict {
            ReplayVerdict::Pass | ReplayVerdict::Warning => CaseOutcome::Pass,
            ReplayVerdict::Error => CaseOutcome::NumericalMismatch,
            ReplayVerdict::Crash => CaseOutcome::Crash,
            ReplayVerdict::Unsupported => CaseOutcome::UnsupportedCombination,
        }
    }

    /// Every outcome, in report order.
    pub const ALL: [CaseOutcome; 5] = [
        CaseOutcome::Pass,
        CaseOutcome::NumericalMismatch,
        CaseOutcome::Crash,
        CaseOutcome::UnsupportedCombination,
        CaseOutcome::MissingEvidence,
    ];
}

impl std::fmt::Display for CaseOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One file of a case's evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvidenceFile {
    /// The file's name (`replay.json`, `candidate.pt`, …).
    pub name: String,
    /// Its path.
    pub path: String,
}

/// One attempt as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttemptSummary {
    /// K of `attempt-K`.
    pub attempt: u32,
    /// `run` or `record`.
    pub source: String,
    /// Whether it finished (holds `replay.json`).
    pub complete: bool,
    /// Its outcome.
    pub outcome: CaseOutcome,
    /// The replay's verdict, when judged.
    pub verdict: Option<ReplayVerdict>,
    /// Why, in one line.
    pub reason: String,
    /// Its directory.
    pub dir: String,
}

/// One case analysed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    /// The case id.
    pub id: String,
    /// Its axis (`dtype`, `layout[x]`, …); `None` for the baseline.
    pub axis: Option<String>,
    /// Its value.
    pub value: Option<String>,
    /// Its outcome, from the newest complete attempt.
    pub outcome: CaseOutcome,
    /// The replay's verdict (`warning` is a pass), when judged.
    pub verdict: Option<ReplayVerdict>,
    /// Why, in one line: the judgement's reason, or what is missing.
    pub reason: String,
    /// The attempt the outcome rests on.
    pub attempt: Option<u32>,
    /// That attempt's files.
    pub evidence: Vec<EvidenceFile>,
    /// Every attempt, oldest first (the newer incomplete ones included).
    pub attempts: Vec<AttemptSummary>,
    /// Elements of its tensor arguments.
    pub elements: u64,
    /// Bytes of them.
    pub bytes: u64,
}

/// Which axis and value the cases of one outcome follow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Follows {
    /// `failure` (numerical mismatches and crashes together), or one outcome's name.
    pub outcome: String,
    /// The cases.
    pub cases: Vec<String>,
    /// The axis every one of them is on (`dtype`, `layout`, …), if one.
    pub axis: Option<String>,
    /// The argument every one of them targets, if one.
    pub target: Option<String>,
    /// The value every one of them has (`bfloat16`; `non-contiguous` for the transposed and
    /// strided layouts together), if one.
    pub value: Option<String>,
    /// Cases on the same axis that pass: what the failure does not follow.
    pub passing_on_axis: Vec<String>,
    /// In words.
    pub text: String,
}

/// The smallest failing case: the regression test to export.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Smallest {
    /// The case.
    pub id: String,
    /// Its outcome.
    pub outcome: CaseOutcome,
    /// Elements of its tensor arguments.
    pub elements: u64,
    /// Bytes of them.
    pub bytes: u64,
}

/// What the matrix says of the operator against the integration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Conclusion {
    /// Every case passes, and the other capture diverges from DUMP at the stage: the bug is
    /// in how the operator is called or its inputs are prepared.
    OperatorPassesIntegrationFails,
    /// Every case passes and the captures agree at the stage.
    OperatorPassesCapturesAgree,
    /// Some case fails: the operator fails on its own.
    OperatorFails,
    /// Missing evidence, or no record of the stage in both captures.
    Inconclusive,
}

/// The `--vs` conclusion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Integration {
    /// The other capture.
    pub vs: String,
    /// The record compared (`stage#N`).
    pub key: String,
    /// Whether the other capture diverges from DUMP there.
    pub diverges: bool,
    /// The pair's verdict (`magnitude`, …).
    pub verdict: Option<String>,
    /// The window pair's first divergence.
    pub first_divergence: Option<String>,
    /// The conclusion.
    pub conclusion: Conclusion,
    /// In words.
    pub text: String,
}

/// Counts of each outcome.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Counts {
    /// Passes (warnings included).
    pub pass: usize,
    /// Numerical mismatches.
    pub numerical_mismatch: usize,
    /// Crashes.
    pub crash: usize,
    /// Unsupported combinations.
    pub unsupported_combination: usize,
    /// Missing evidence.
    pub missing_evidence: usize,
}

/// A case matrix analysed: what `dumpview cases analyze` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CasesAnalysis {
    /// [`ANALYSIS_FORMAT`].
    pub format: &'static str,
    /// 1.
    pub version: u32,
    /// The matrix's NAME.
    pub name: String,
    /// Its `plan.json`.
    pub plan: String,
    /// DUMP as planned.
    pub dump: String,
    /// `stage#N`.
    pub stage: String,
    /// OP.
    pub candidate: String,
    /// REF.
    pub reference: String,
    /// The standard every case was judged by.
    pub standard: Standard,
    /// CaseOutcome counts.
    pub counts: Counts,
    /// Each case, in plan order.
    pub cases: Vec<CaseResult>,
    /// Axis values folded into the baseline.
    pub folded: Vec<Folded>,
    /// Which axis the failures (and each kind of outcome) follow.
    pub follows: Vec<Follows>,
    /// The smallest failing case.
    pub smallest_failing: Option<Smallest>,
    /// With `--vs`: operator against integration.
    pub integration: Option<Integration>,
    /// Whether every analysed case passes (exit status 0).
    pub all_pass: bool,
}

fn reason_of(judged: &JudgedAttempt) -> (CaseOutcome, Option<ReplayVerdict>, String) {
    match &judged.judged {
        None => (
            CaseOutcome::MissingEvidence,
            None,
            format!(
                "attempt {} did not finish (no {RECORD_FILE}: interrupted)",
                judged.attempt.number
            ),
        ),
        Some(Err(e)) => (
            CaseOutcome::MissingEvidence,
            None,
            format!("attempt {} cannot be judged: {e}", judged.attempt.number),
        ),
        Some(Ok(replay)) => (
            CaseOutcome::of(replay.verdict),
            Some(replay.verdict),
            replay.reason.clone(),
        ),
    }
}

fn summarize(j: &JudgedAttempt) -> AttemptSummary {
    let (outcome, verdict, reason) = reason_of(j);
    AttemptSummary {
        attempt: j.attempt.number,
        source: if j.attempt.info.source.is_empty() {
            "unknown".into()
        } else {
            j.attempt.info.source.clone()
        },
        complete: j.attempt.complete,
        outcome,
        verdict,
        reason,
        dir: j.attempt.dir.display().to_string(),
    }
}

/// The files of an attempt worth linking, in a fixed order.
fn evidence_files(j: &JudgedAttempt) -> Vec<EvidenceFile> {
    [
        RECORD_FILE,
        VERDICT_FILE,
        "candidate.pt",
        "reference.pt",
        "golden.pt",
        "reference_native.pt",
        INPUTS_FILE,
    ]
    .iter()
    .map(|name| (name, j.attempt.dir.join(name)))
    .filter(|(_, path)| path.is_file())
    .map(|(name, path)| EvidenceFile {
        name: name.to_string(),
        path: path.display().to_string(),
    })
    .collect()
}

fn classify(case: &Case, evidence: Option<&CaseEvidence>) -> CaseResult {
    let attempts: &[JudgedAttempt] = evidence.map_or(&[], |e| e.attempts.as_slice());
    let newest = attempts.iter().rev().find(|a| a.attempt.complete);
    let (outcome, verdict, reason, attempt, files) = match newest {
        Some(j) => {
            let (o, v, r) = reason_of(j);
            (o, v, r, Some(j.attempt.number), evidence_files(j))
        }
        None => {
            let reason = match attempts.last() {
                None => "planned, never run".to_string(),
                Some(last) => format!(
                    "no finished attempt: {} interrupted (no {RECORD_FILE})",
                    if attempts.len() == 1 {
                        format!("attempt {}", last.attempt.number)
                    } else {
                        format!("attempts 1-{}", last.attempt.number)
                    }
                ),
            };
            (CaseOutcome::MissingEvidence, None, reason, None, Vec::new())
        }
    };
    CaseResult {
        id: case.id.clone(),
        axis: case.axis.clone(),
        value: case.value.clone(),
        outcome,
        verdict,
        reason,
        attempt,
        evidence: files,
        attempts: attempts.iter().map(summarize).collect(),
        elements: case.elements,
        bytes: case.bytes,
    }
}

/// Analyses `plan` from the judged attempts in `evidence` (`only`: those cases alone).
pub fn analyze(
    plan: &Plan,
    plan_path: &str,
    evidence: &[CaseEvidence],
    only: Option<&[String]>,
) -> CasesAnalysis {
    let chosen: Vec<&Case> = plan
        .cases
        .iter()
        .filter(|c| only.is_none_or(|o| o.contains(&c.id)))
        .collect();
    let cases: Vec<CaseResult> = chosen
        .iter()
        .map(|case| classify(case, evidence.iter().find(|e| e.id == case.id)))
        .collect();
    let mut counts = Counts::default();
    for c in &cases {
        *match c.outcome {
            CaseOutcome::Pass => &mut counts.pass,
            CaseOutcome::NumericalMismatch => &mut counts.numerical_mismatch,
            CaseOutcome::Crash => &mut counts.crash,
            CaseOutcome::UnsupportedCombination => &mut counts.unsupported_combination,
            CaseOutcome::MissingEvidence => &mut counts.missing_evidence,
        } += 1;
    }
    let by_id = |id: &str| plan.case(id).expect("results come from the plan");
    let mut follows = Vec::new();
    let failing: Vec<&CaseResult> = cases.iter().filter(|c| c.outcome.is_failure()).collect();
    let has = |o: CaseOutcome| cases.iter().any(|c| c.outcome == o);
    if has(CaseOutcome::NumericalMismatch) && has(CaseOutcome::Crash) {
        follows.extend(follow("failure", &failing, &cases, &by_id));
    }
    for outcome in [
        CaseOutcome::NumericalMismatch,
        CaseOutcome::Crash,
        CaseOutcome::UnsupportedCombination,
    ] {
        let these: Vec<&CaseResult> = cases.iter().filter(|c| c.outcome == outcome).collect();
        follows.extend(follow(outcome.name(), &these, &cases, &by_id));
    }
    let smallest_failing = failing
        .iter()
        .enumerate()
        .min_by_key(|(i, c)| (c.elements, c.bytes, *i))
        .map(|(_, c)| Smallest {
            id: c.id.clone(),
            outcome: c.outcome,
            elements: c.elements,
            bytes: c.bytes,
        });
    let integration = plan.vs.as_ref().map(|vs| {
        let missing = counts.missing_evidence;
        let failures = failing.len();
        let (conclusion, text) = if failures > 0 {
            (
                Conclusion::OperatorFails,
                format!(
                    "the operator fails on its own ({failures} case{} fail{}){}",
                    if failures == 1 { "" } else { "s" },
                    if failures == 1 { "s" } else { "" },
                    if vs.diverges {
                        format!(
                            "; the divergence of {} at {} may be its doing",
                            vs.dump, vs.key
                        )
                    } else {
                        format!(", though {} agrees with {} at {}", vs.dump, plan.dump, vs.key)
                    }
                ),
            )
        } else if missing > 0 {
            (
                Conclusion::Inconclusive,
                format!(
                    "not concluded: {missing} case{} without evidence",
                    if missing == 1 { "" } else { "s" }
                ),
            )
        } else if chosen.len() < plan.cases.len() {
            // `--only`: a subset that passes says nothing of the cases left out.
            (
                Conclusion::Inconclusive,
                format!(
                    "not concluded: only {} of the matrix's {} cases analysed (--only), and they pass; the operator against {} needs every case",
                    chosen.len(),
                    plan.cases.len(),
                    vs.dump
                ),
            )
        } else if !vs.paired {
            (
                Conclusion::Inconclusive,
                format!("not concluded: {}", vs.detail),
            )
        } else if vs.diverges {
            (
                Conclusion::OperatorPassesIntegrationFails,
                format!(
                    "operator passes, integration fails: {} diverges from {} at {} ({}) while every case passes{}; the operator is right on the inputs it was given, so the bug is in how it is called or how its inputs are prepared",
                    vs.dump,
                    plan.dump,
                    vs.key,
                    vs.verdict.as_deref().unwrap_or("diverges"),
                    if counts.unsupported_combination > 0 {
                        format!(
                            " (that it supports: {} unsupported)",
                            counts.unsupported_combination
                        )
                    } else {
                        String::new()
                    }
                ),
            )
        } else {
            (
                Conclusion::OperatorPassesCapturesAgree,
                format!(
                    "the operator passes and {} agrees with {} at {}",
                    vs.dump, plan.dump, vs.key
                ),
            )
        };
        Integration {
            vs: vs.dump.clone(),
            key: vs.key.clone(),
            diverges: vs.diverges,
            verdict: vs.verdict.clone(),
            first_divergence: vs.first_divergence.clone(),
            conclusion,
            text,
        }
    });
    CasesAnalysis {
        format: ANALYSIS_FORMAT,
        version: 1,
        name: plan.name.clone(),
        plan: plan_path.to_string(),
        dump: plan.dump.clone(),
        stage: plan.stage.clone(),
        candidate: plan.candidate.clone(),
        reference: plan.reference.clone(),
        standard: plan.standard,
        all_pass: cases.iter().all(|c| c.outcome == CaseOutcome::Pass),
        counts,
        cases,
        folded: plan.folded.clone(),
        follows,
        smallest_failing,
        integration,
    }
}

/// `crashes`, `numerical mismatches`, `failures`, `unsupported combinations`.
fn plural_name(what: &str) -> String {
    if what.ends_with("sh") || what.ends_with("ch") || what.ends_with('s') {
        format!("{what}es")
    } else {
        format!("{what}s")
    }
}

/// The one value every member of `items` shares, if any.
fn common<T: PartialEq + Clone>(mut items: impl Iterator<Item = T>) -> Option<T> {
    let first = items.next()?;
    items.all(|x| x == first).then_some(first)
}

/// Which axis, argument and value the cases `these` (of outcome `what`) share.
fn follow<'a>(
    what: &str,
    these: &[&CaseResult],
    all: &[CaseResult],
    case: &dyn Fn(&str) -> &'a Case,
) -> Option<Follows> {
    if these.is_empty() {
        return None;
    }
    let ids: Vec<String> = these.iter().map(|c| c.id.clone()).collect();
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    if ids.iter().any(|id| id == BASELINE) {
        let passing: Vec<String> = all
            .iter()
            .filter(|c| c.outcome == CaseOutcome::Pass)
            .map(|c| c.id.clone())
            .collect();
        let text = format!(
            "the baseline itself is a {what}: it is in the captured call, not in one axis{}",
            if passing.is_empty() {
                String::new()
            } else {
                format!("; these cases pass: {}", passing.join(", "))
            }
        );
        return Some(Follows {
            outcome: what.into(),
            cases: ids,
            axis: None,
            target: None,
            value: None,
            passing_on_axis: passing,
            text,
        });
    }
    let planned: Vec<&Case> = these.iter().map(|c| case(&c.id)).collect();
    let axis = common(
        planned
            .iter()
            .map(|c| c.family().unwrap_or_default().to_string()),
    );
    let target = common(planned.iter().map(|c| c.target().map(str::to_string))).flatten();
    let value = common(planned.iter().map(|c| c.value.clone()))
        .flatten()
        .or_else(|| {
            (axis.as_deref() == Some("layout")
                && planned
                    .iter()
                    .all(|c| matches!(c.value.as_deref(), Some("transposed" | "strided"))))
            .then(|| "non-contiguous".to_string())
        });
    let passing_on_axis: Vec<String> = all
        .iter()
        .filter(|c| c.outcome == CaseOutcome::Pass && c.id != BASELINE)
        .filter(|c| {
            let other = case(&c.id);
            axis.as_deref() == other.family()
                && (target.is_none() || target.as_deref() == other.target())
        })
        .map(|c| c.id.clone())
        .collect();
    let listed = ids.join(", ");
    // With no other value of the axis run, the baseline is the value that passes.
    let baseline_passes = if all
        .iter()
        .any(|c| c.id == BASELINE && c.outcome == CaseOutcome::Pass)
    {
        "; the baseline (as captured) passes"
    } else {
        ""
    };
    let text = match (&axis, &value) {
        (Some(axis), Some(value)) => {
            let on = match &target {
                Some(t) => format!("{axis}[{t}]={value}"),
                None => format!("{axis}={value}"),
            };
            format!(
                "every {what} is {on} ({} case{}: {listed}){}",
                ids.len(),
                plural(ids.len()),
                if passing_on_axis.is_empty() {
                    baseline_passes.to_string()
                } else {
                    format!(
                        "; on the same axis {} pass{}",
                        passing_on_axis.join(", "),
                        if passing_on_axis.len() == 1 { "es" } else { "" }
                    )
                }
            )
        }
        (Some(axis), None) => format!(
            "every {what} is on the {axis} axis ({listed}){}",
            if passing_on_axis.is_empty() {
                baseline_passes.to_string()
            } else {
                format!(
                    "; {} pass{}",
                    passing_on_axis.join(", "),
                    if passing_on_axis.len() == 1 { "es" } else { "" }
                )
            }
        ),
        (None, _) => {
            let mut families: Vec<String> = Vec::new();
            for c in &planned {
                let f = c.family().unwrap_or_default().to_string();
                if !families.contains(&f) {
                    families.push(f);
                }
            }
            format!(
                "the {} lie on {} axes ({}): they follow no one axis ({listed})",
                plural_name(what),
                families.len(),
                families.join(", ")
            )
        }
    };
    Some(Follows {
        outcome: what.into(),
        cases: ids,
        axis,
        target,
        value,
        passing_on_axis,
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cases::plan::{PlanRequest, VsCheck, build};
    use crate::model::cases::store::{AttemptInfo, CaseAttempt};
    use crate::model::input_set::{CapturedTensor, InputSet, InputValue};
    use crate::model::replay::Replay;
    use crate::model::tensor::DType;

    fn tensor(shape: &[usize]) -> InputValue {
        let n: usize = shape.iter().product();
        InputValue::Tensor(CapturedTensor {
            dtype: DType::Float32,
            shape: shape.to_vec(),
            stride: super::super::plan::contiguous_stride(shape),
            offset_in_span: 0,
            storage_offset: 0,
            device: "cpu".into(),
            requires_grad: false,
            span: vec![0; n * 4],
        })
    }

    fn plan(axes: &[&str]) -> Plan {
        let set = InputSet {
            path: "x.pt".into(),
            args: vec![
                ("x".into(), tensor(&[12, 256])),
                ("weight".into(), tensor(&[256])),
                ("eps".into(), InputValue::Float(1e-6)),
            ],
        };
        let axes: Vec<String> = axes.iter().map(|s| s.to_string()).collect();
        build(&PlanRequest {
            name: "m",
            dump: "a",
            stage: "s#1",
            rank: 0,
            window: "match1-occ1",
            label: "r",
            candidate: "c:f",
            reference: "builtin:rms_norm",
            standard: Standard::Msprobe,
            input_set: &set,
            op: None,
            source_manifest: "a/manifest.json",
            input_file: "inputs/s#1.pt",
            axes: &axes,
            ties: &[],
            untied: &[],
            created_unix_s: 0.0,
        })
        .unwrap()
    }

    fn replay(verdict: ReplayVerdict) -> Replay {
        Replay {
            verdict,
            reason: format!("it is {verdict}"),
            standard: Standard::Msprobe,
            standard_source: "",
            stage: "s#1".into(),
            rank: 0,
            label: None,
            match_number: None,
            dump: "a".into(),
            manifest: "a/manifest.json".into(),
            window_unfinished: false,
            op_recorded: None,
            device: "cpu".into(),
            versions: Default::default(),
            call: "keywords".into(),
            args: Vec::new(),
            sides: Vec::new(),
            outputs: Vec::new(),
            notes: Vec::new(),
            nonfinite_pass: false,
            dir: "d".into(),
        }
    }

    /// One finished attempt per case with these verdicts (`None`: an interrupted one).
    fn evidence(results: &[(&str, Option<ReplayVerdict>)]) -> Vec<CaseEvidence> {
        results
            .iter()
            .map(|(id, verdict)| CaseEvidence {
                id: id.to_string(),
                attempts: vec![JudgedAttempt {
                    attempt: CaseAttempt {
                        number: 1,
                        dir: format!("/nowhere/{id}/attempt-1").into(),
                        complete: verdict.is_some(),
                        info: AttemptInfo {
                            source: "run".into(),
                            ..AttemptInfo::default()
                        },
                    },
                    judged: verdict.map(|v| Ok(replay(v))),
                }],
            })
            .collect()
    }

    #[test]
    fn failures_follow_the_axis_and_value_they_share() {
        let p = plan(&[
            "dtype=float16,bfloat16",
            "layout[x]=transposed,strided",
            "shape=half_rows",
        ]);
        let e = evidence(&[
            ("baseline", Some(ReplayVerdict::Pass)),
            ("dtype=float16", Some(ReplayVerdict::Warning)),
            ("dtype=bfloat16", Some(ReplayVerdict::Error)),
            ("layout.x=transposed", Some(ReplayVerdict::Crash)),
            ("layout.x=strided", Some(ReplayVerdict::Crash)),
            ("shape=half_rows", Some(ReplayVerdict::Error)),
        ]);
        let a = analyze(&p, "plan.json", &e, None);
        let outcomes: Vec<CaseOutcome> = a.cases.iter().map(|c| c.outcome).collect();
        assert_eq!(
            outcomes,
            [
                CaseOutcome::Pass,
                CaseOutcome::Pass,
                CaseOutcome::NumericalMismatch,
                CaseOutcome::Crash,
                CaseOutcome::Crash,
                CaseOutcome::NumericalMismatch
            ]
        );
        assert_eq!(a.counts.crash, 2);
        let kinds: Vec<&str> = a.follows.iter().map(|f| f.outcome.as_str()).collect();
        assert_eq!(kinds, ["failure", "numerical mismatch", "crash"]);
        // Mismatches on two axes follow neither; crashes follow non-contiguous x.
        assert_eq!(a.follows[0].axis, None);
        assert_eq!(a.follows[1].axis, None);
        assert!(
            a.follows[1].text.contains("follow no one axis"),
            "{}",
            a.follows[1].text
        );
        let crash = &a.follows[2];
        assert_eq!(
            (
                crash.axis.as_deref(),
                crash.target.as_deref(),
                crash.value.as_deref()
            ),
            (Some("layout"), Some("x"), Some("non-contiguous"))
        );
        // The smallest failing case is the half-row one.
        assert_eq!(a.smallest_failing.as_ref().unwrap().id, "shape=half_rows");
        assert!(!a.all_pass);
    }

    #[test]
    fn a_failing_baseline_follows_no_axis_and_the_newest_finished_attempt_decides() {
        let p = plan(&["dtype=float16"]);
        let mut e = evidence(&[
            ("baseline", Some(ReplayVerdict::Error)),
            ("dtype=float16", Some(ReplayVerdict::Pass)),
        ]);
        let a = analyze(&p, "plan.json", &e, None);
        let f = &a.follows[0];
        assert_eq!(f.axis, None);
        assert!(f.text.contains("the baseline itself"), "{}", f.text);
        assert_eq!(f.passing_on_axis, ["dtype=float16"]);
        // A newer interrupted attempt is listed and decides nothing.
        let mut newer = e[1].attempts[0].clone();
        newer.attempt.number = 2;
        newer.attempt.complete = false;
        newer.judged = None;
        e[1].attempts.push(newer);
        let a = analyze(&p, "plan.json", &e, None);
        assert_eq!(a.cases[1].outcome, CaseOutcome::Pass);
        assert_eq!(a.cases[1].attempt, Some(1));
        assert_eq!(a.cases[1].attempts.len(), 2);
        assert_eq!(a.cases[1].attempts[1].outcome, CaseOutcome::MissingEvidence);
    }

    #[test]
    fn the_vs_conclusion_needs_every_case_to_pass() {
        let mut p = plan(&["dtype=float16"]);
        let vs = |diverges: bool, paired: bool| VsCheck {
            dump: "b".into(),
            key: "s#1".into(),
            paired,
            diverges,
            verdict: Some(if diverges { "magnitude" } else { "agree" }.into()),
            first_divergence: diverges.then(|| "s#1".to_string()),
            detail: "neither capture has a record s#1".into(),
        };
        let pass = evidence(&[
            ("baseline", Some(ReplayVerdict::Pass)),
            ("dtype=float16", Some(ReplayVerdict::Pass)),
        ]);
        for (check, evidence, wanted) in [
            (
                vs(true, true),
                pass.clone(),
                Conclusion::OperatorPassesIntegrationFails,
            ),
            (
                vs(false, true),
                pass.clone(),
                Conclusion::OperatorPassesCapturesAgree,
            ),
            (vs(false, false), pass.clone(), Conclusion::Inconclusive),
            (
                vs(true, true),
                evidence(&[
                    ("baseline", Some(ReplayVerdict::Pass)),
                    ("dtype=float16", None),
                ]),
                Conclusion::Inconclusive,
            ),
            (
                vs(true, true),
                evidence(&[
                    ("baseline", Some(ReplayVerdict::Pass)),
                    ("dtype=float16", Some(ReplayVerdict::Crash)),
                ]),
                Conclusion::OperatorFails,
            ),
        ] {
            p.vs = Some(check);
            let a = analyze(&p, "plan.json", &evidence, None);
            let i = a.integration.unwrap();
            assert_eq!(i.conclusion, wanted, "{}", i.text);
        }
        p.vs = Some(vs(true, true));
        let a = analyze(&p, "plan.json", &pass, None);
        assert!(a.all_pass);
        assert!(
            a.integration
                .unwrap()
                .text
                .starts_with("operator passes, integration fails")
        );
        // A passing subset (--only) concludes nothing about the operator against the integration.
        let only = ["baseline".to_string()];
        let a = analyze(&p, "plan.json", &pass, Some(&only));
        let i = a.integration.unwrap();
        assert_eq!(i.conclusion, Conclusion::Inconclusive, "{}", i.text);
        assert!(
            i.text
                .starts_with("not concluded: only 1 of the matrix's 2 cases analysed (--only)"),
            "{}",
            i.text
        );
        // Never run: missing evidence.
        let a = analyze(&p, "plan.json", &[], None);
        assert!(
            a.cases
                .iter()
                .all(|c| c.outcome == CaseOutcome::MissingEvidence)
        );
        assert_eq!(a.cases[0].reason, "planned, never run");
    }
}
