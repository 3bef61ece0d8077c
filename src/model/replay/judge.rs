//! The judgement of a replay: each output under the chosen [`Standard`], next to the metrics
//! `dumpview tensors` computes, and the replay's verdict (the worst output's, or the
//! candidate's crash or refusal).

use serde::Serialize;

use super::record::{Argument, DIED, Exception, ReplayRecord, Side, Status};
use super::side::SideTensors;
use super::standard::{Against, ReplayVerdict, Standard};
use super::{allclose, dynamo, msprobe};
use crate::model::tensor::metrics::{self, CompareProgress, Metrics, Options};
use crate::model::tensor::{DType, TensorView};

/// Outputs of more elements than this are not judged (each side is decoded to float64 in
/// memory: 2^28 elements are 2 GiB per side).
pub const MAX_JUDGED_ELEMENTS: usize = 1 << 28;

/// The outputs of a replay's four sides, each `None` when its side produced no tensors;
/// each read from its file or computed in memory ([`SideTensors`]).
#[derive(Debug, Default)]
pub struct SideOutputs {
    /// The candidate's (`candidate.pt`).
    pub candidate: Option<SideTensors>,
    /// The reference's on the inputs upcast (`reference.pt`).
    pub reference: Option<SideTensors>,
    /// The reference's on the inputs in float64 (`golden.pt`).
    pub golden: Option<SideTensors>,
    /// The reference's on the inputs as captured (`reference_native.pt`).
    pub reference_native: Option<SideTensors>,
}

/// One side of a replay as reported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideSummary {
    /// `candidate`, `reference`, `golden` or `reference_native`.
    pub role: &'static str,
    /// The OP or REF as given.
    pub spec: String,
    /// What it resolved to.
    pub resolved: Option<String>,
    /// `ok`, `crash`, `unsupported` or `skipped`.
    pub status: Status,
    /// Who computed it: `replay_op.py`, or `in-process (tch, libtorch 2.13)` for a built-in
    /// reference dumpview computed itself (feature `torch`).
    pub computed_by: String,
    /// Wall time of the call, seconds.
    pub duration_s: Option<f64>,
    /// The inputs' dtype in words.
    pub input_dtype: Option<String>,
    /// What it raised.
    pub exception: Option<Exception>,
    /// Its output file, when it wrote one (or dumpview saved its in-process outputs).
    pub file: Option<String>,
}

/// One output judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputJudgement {
    /// `out`, `out.0`, …
    pub name: String,
    /// This output's verdict.
    pub verdict: ReplayVerdict,
    /// What decided it, in words.
    pub reason: String,
    /// The candidate's dtype, when it returned this output.
    pub candidate_dtype: Option<DType>,
    /// The compared side's dtype.
    pub reference_dtype: Option<DType>,
    /// The candidate's shape (the compared side's when the candidate has none).
    pub shape: Vec<usize>,
    /// The side the metrics compare against: `reference` (msprobe, allclose) or
    /// `reference_native` (dynamo).
    pub against: &'static str,
    /// `dumpview tensors`' metrics of the candidate (A) against that side (B), under the
    /// closeness rule the standard implies (see [`closeness`]).
    pub metrics: Option<Metrics>,
    /// Why there are no metrics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_error: Option<String>,
    /// msprobe's figures (standard `msprobe`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msprobe: Option<msprobe::Figures>,
    /// dynamo's figures (standard `dynamo`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamo: Option<dynamo::Figures>,
    /// Behaviours of the standard's source that shaped this verdict.
    pub quirks: Vec<String>,
}

/// A judged replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Replay {
    /// The worst output's verdict, or the candidate's `crash` / `unsupported`.
    pub verdict: ReplayVerdict,
    /// Why, in one line.
    pub reason: String,
    /// The standard applied.
    pub standard: Standard,
    /// Where that standard comes from.
    pub standard_source: &'static str,
    /// `stage#N`.
    pub stage: String,
    /// The window's rank.
    pub rank: u32,
    /// The window's label.
    pub label: Option<String>,
    /// The window's match number.
    #[serde(rename = "match")]
    pub match_number: Option<u64>,
    /// The dump as replay_op.py was given it.
    pub dump: String,
    /// The manifest of the input set (empty for an unfinished window).
    pub manifest: String,
    /// The input set came from a window without `manifest.json` (a run killed before
    /// `finish()`): stage from the file name, storage sharing between arguments unknown.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub window_unfinished: bool,
    /// The operator the probe recorded.
    pub op_recorded: Option<String>,
    /// The device the sides ran on.
    pub device: String,
    /// Interpreter and library versions, as replay.json gives them.
    pub versions: std::collections::BTreeMap<String, serde_json::Value>,
    /// `keywords` or `positional`.
    pub call: String,
    /// The arguments as rebuilt.
    pub args: Vec<Argument>,
    /// The four sides, candidate first.
    pub sides: Vec<SideSummary>,
    /// Each output, in output order.
    pub outputs: Vec<OutputJudgement>,
    /// What the verdict does not say, one line each: an output that passes while the
    /// candidate holds NaN or infinity where the reference is finite (msprobe counts a NaN
    /// cosine as a pass), a candidate output of another dtype than the reference's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// A passing verdict that is still a finding: some passing output's candidate holds NaN
    /// or infinity where the reference is finite. The verdict stays the standard's; the exit
    /// status is 1 ([`Replay::is_finding`]).
    pub nonfinite_pass: bool,
    /// The replay's output directory.
    pub dir: String,
}

impl Replay {
    /// Whether a user must look at this replay: a verdict that is a finding, or a pass with
    /// NaN or infinity in the candidate ([`Replay::nonfinite_pass`]).
    pub fn is_finding(&self) -> bool {
        self.verdict.is_finding() || self.nonfinite_pass
    }

    /// Fills [`Replay::notes`] and [`Replay::nonfinite_pass`] from the judged outputs.
    fn note(&mut self) {
        for o in &self.outputs {
            if let (Some(c), Some(r)) = (o.candidate_dtype, o.reference_dtype)
                && c != r
            {
                self.notes.push(format!(
                    "output {}: the candidate returned {} where the reference returned {}; the \
                     comparison ran in the wider of the two",
                    o.name,
                    c.name(),
                    r.name()
                ));
            }
            let Some(n) = o.metrics.as_ref().map(|m| &m.nonfinite) else {
                continue;
            };
            let candidate = n.nan_a + n.posinf_a + n.neginf_a;
            if !o.verdict.is_finding() && !n.positions_agree && candidate > 0 {
                self.nonfinite_pass = true;
                self.notes.push(format!(
                    "output {}: {} under {}, but the candidate holds {candidate} NaN/inf where \
                     the reference is finite ({} NaN, {} +inf, {} -inf against {}, {}, {}): the \
                     standard's cosine is NaN there and counts as a pass; not a pass for \
                     dumpview (exit 1)",
                    o.name,
                    o.verdict,
                    self.standard.name(),
                    n.nan_a,
                    n.posinf_a,
                    n.neginf_a,
                    n.nan_b,
                    n.posinf_b,
                    n.neginf_b
                ));
            }
        }
    }
}

/// The closeness rule of the metrics (and so of their `first_mismatch`) for an output under
/// `standard`: msprobe's pass threshold as `rtol` (0.001 for float16/bfloat16 outputs, 0.0001
/// otherwise) with `atol = rtol * eps`, so an element is a mismatch exactly when its relative
/// error `|c - r| / (|r| + eps)` reaches the threshold (equality for integers); dynamo's
/// `atol = rtol = 1e-4`; allclose's own.
pub fn closeness(standard: &Standard, candidate: DType, msprobe_eps: f64) -> Options {
    let (atol, rtol) = match *standard {
        Standard::Allclose { atol, rtol } => (atol, rtol),
        Standard::Dynamo => (dynamo::TOL, dynamo::TOL),
        Standard::Msprobe if !candidate.is_float() => (0.0, 0.0),
        Standard::Msprobe => {
            let t = match candidate {
                DType::Float16 | DType::BFloat16 => msprobe::THOUSANDTH,
                _ => msprobe::TEN_THOUSANDTH,
            };
            (t * msprobe_eps, t)
        }
    };
    Options {
        atol,
        rtol,
        ..Options::default()
    }
}

/// The `eps` msprobe's relative error uses for a candidate of `candidate` against a
/// reference of `reference` (see [`msprobe`]).
fn msprobe_eps(candidate: DType, reference: DType) -> f64 {
    match (candidate, reference) {
        (DType::BFloat16, _) => msprobe::BFLOAT16_EPS,
        (_, DType::Float64) => f64::EPSILON,
        (_, DType::Float16) => 2f64.powi(-10),
        _ => 2f64.powi(-23),
    }
}

fn values(view: &TensorView) -> Vec<f64> {
    (0..view.numel()).map(|i| view.get(i)).collect()
}

/// The output keys of `side`, or none.
fn keys(side: Option<&SideTensors>) -> Vec<String> {
    side.map(SideTensors::keys).unwrap_or_default()
}

/// `out` < `out.0` < `out.1` < `out.10`: numeric parts compared as numbers.
fn output_order(name: &str) -> Vec<(u8, u64, String)> {
    name.split('.')
        .map(|part| match part.parse::<u64>() {
            Ok(n) => (0, n, String::new()),
            Err(_) => (1, 0, part.to_string()),
        })
        .collect()
}

fn view<'f>(side: Option<&'f SideTensors>, name: &str) -> Option<TensorView<'f>> {
    side?.view(name)
}

/// Judges one output: the candidate's view (if it returned the output), the upcast
/// reference's, the golden's and the native reference's.
pub fn judge_output(
    name: &str,
    standard: &Standard,
    candidate: Option<TensorView>,
    reference: Option<TensorView>,
    golden: Option<TensorView>,
    native: Option<TensorView>,
) -> OutputJudgement {
    let against = standard.against();
    let side = match against {
        Against::ReferenceNative => native.clone(),
        Against::Reference => reference.clone(),
    };
    let mut out = OutputJudgement {
        name: name.to_string(),
        verdict: ReplayVerdict::Error,
        reason: String::new(),
        candidate_dtype: candidate.as_ref().map(|v| v.dtype()),
        reference_dtype: side.as_ref().map(|v| v.dtype()),
        shape: candidate
            .as_ref()
            .or(side.as_ref())
            .map(|v| v.shape().to_vec())
            .unwrap_or_default(),
        against: against.role(),
        metrics: None,
        metrics_error: None,
        msprobe: None,
        dynamo: None,
        quirks: Vec::new(),
    };
    let Some(candidate) = candidate else {
        out.reason = format!(
            "the candidate returned no output {name} (the reference did): output structure differs"
        );
        return out;
    };
    let Some(side) = side else {
        if against.may_refuse_the_dtype() && reference.is_some() {
            out.verdict = ReplayVerdict::Unsupported;
            out.reason = format!(
                "the {} standard compares with the reference in the candidate's dtype, which returned no {name}",
                standard.name()
            );
        } else {
            out.reason = format!(
                "the candidate returned {name}, the reference did not: output structure differs"
            );
        }
        return out;
    };
    if candidate.shape() != side.shape() {
        out.reason = format!(
            "shape differs: candidate {:?}, {} {:?}",
            candidate.shape(),
            against.role(),
            side.shape()
        );
        return out;
    }
    if candidate.numel() > MAX_JUDGED_ELEMENTS {
        out.reason = format!(
            "{} elements: more than dumpview judges in memory ({MAX_JUDGED_ELEMENTS})",
            candidate.numel()
        );
        return out;
    }
    let options = closeness(
        standard,
        candidate.dtype(),
        msprobe_eps(candidate.dtype(), side.dtype()),
    );
    match metrics::compare(&candidate, &side, &options, &CompareProgress::default()) {
        Ok(m) => out.metrics = Some(m),
        Err(e) => out.metrics_error = Some(e.to_string()),
    }
    let c = values(&candidate);
    let cv = msprobe::Values {
        dtype: candidate.dtype(),
        values: &c,
    };
    match standard {
        Standard::Msprobe => {
            let r = values(&side);
            let judged = msprobe::judge(
                cv,
                msprobe::Values {
                    dtype: side.dtype(),
                    values: &r,
                },
            );
            out.verdict = judged.verdict;
            out.reason = judged.reason;
            out.msprobe = Some(judged.figures);
            out.quirks = judged.quirks;
        }
        Standard::Dynamo => {
            let r = values(&side);
            let g = golden
                .as_ref()
                .filter(|g| g.shape() == candidate.shape())
                .map(values);
            let judged = dynamo::judge(
                cv,
                Some(msprobe::Values {
                    dtype: side.dtype(),
                    values: &r,
                }),
                golden
                    .as_ref()
                    .zip(g.as_deref())
                    .map(|(view, values)| msprobe::Values {
                        dtype: view.dtype(),
                        values,
                    }),
                candidate.shape(),
            );
            out.verdict = judged.verdict;
            out.reason = judged.reason;
            out.dynamo = judged.figures;
            out.quirks = judged.quirks;
        }
        Standard::Allclose { .. } => {
            (out.verdict, out.reason) =
                allclose::judge(out.metrics.as_ref(), out.metrics_error.as_deref());
        }
    }
    out
}

/// Who computed a side, in words.
pub const BY_SCRIPT: &str = "replay_op.py";

/// The side summaries of `record`, with the outputs that exist.
fn summaries(record: &ReplayRecord, files: &SideOutputs) -> Vec<SideSummary> {
    let s = &record.sides;
    [
        ("candidate", &s.candidate, &files.candidate),
        ("reference", &s.reference, &files.reference),
        ("golden", &s.golden, &files.golden),
        (
            "reference_native",
            &s.reference_native,
            &files.reference_native,
        ),
    ]
    .into_iter()
    .filter_map(
        |(role, side, file): (&'static str, &Option<Side>, &Option<SideTensors>)| {
            side.as_ref().map(|side| SideSummary {
                role,
                spec: side.spec.clone(),
                resolved: side.resolved.clone(),
                status: side.status,
                computed_by: match (&side.computed_by, side.status) {
                    (Some(by), _) => by.clone(),
                    (None, Status::Skipped) => "nobody (replay_op.py --candidate-only)".into(),
                    (None, _) => BY_SCRIPT.into(),
                },
                duration_s: side.duration_s,
                input_dtype: side.input_dtype.clone(),
                exception: side.exception.clone(),
                file: file.as_ref().and_then(SideTensors::path),
            })
        },
    )
    .collect()
}

/// Judges a whole replay under `standard`: the candidate's crash or refusal is the verdict;
/// otherwise every output is judged and the worst verdict is the replay's.
///
/// # Errors
/// The side the standard compares against (the reference; for dynamo the reference in the
/// candidate's dtype may be missing, which makes the outputs unsupported) failed or left no
/// file: there is nothing to judge against. The message names the side and its exception.
pub fn judge(
    record: &ReplayRecord,
    files: &SideOutputs,
    standard: Standard,
    dir: &str,
) -> Result<Replay, String> {
    let mut replay = Replay {
        verdict: ReplayVerdict::Pass,
        reason: String::new(),
        standard,
        standard_source: standard.source(),
        stage: record.stage_key(),
        rank: record.rank,
        label: record.label.clone(),
        match_number: record.match_number,
        dump: record.dump.clone(),
        manifest: record.manifest.clone(),
        window_unfinished: record.window_unfinished,
        op_recorded: record.op_recorded.clone(),
        device: record.device.clone(),
        versions: record.versions.clone(),
        call: record.call.clone(),
        args: record.args.clone(),
        sides: summaries(record, files),
        outputs: Vec::new(),
        notes: Vec::new(),
        nonfinite_pass: false,
        dir: dir.to_string(),
    };
    let candidate = record
        .sides
        .candidate
        .as_ref()
        .ok_or_else(|| format!("{dir}: replay.json records no candidate run"))?;
    let raised = |side: &Side| {
        side.exception
            .as_ref()
            .map_or("no exception recorded".to_string(), Exception::text)
    };
    let died = |side: &Side| {
        side.exception
            .as_ref()
            .filter(|e| e.kind == DIED)
            .map(|e| e.message.clone())
    };
    match candidate.status {
        Status::Crash => {
            replay.verdict = ReplayVerdict::Crash;
            replay.reason = match died(candidate) {
                // A fatal signal or an exit is no exception: say how the process ended.
                Some(how) => how,
                None => format!(
                    "the candidate {} raised {}",
                    candidate.spec,
                    raised(candidate)
                ),
            };
            return Ok(replay);
        }
        Status::Unsupported => {
            replay.verdict = ReplayVerdict::Unsupported;
            replay.reason = format!(
                "the candidate {} refused the inputs: {}",
                candidate.spec,
                raised(candidate)
            );
            return Ok(replay);
        }
        Status::Skipped => {
            return Err(format!(
                "{dir}: replay.json records the candidate {} as not run",
                candidate.spec
            ));
        }
        Status::Ok => {}
    }
    if let Some(ended) = record.ended.as_ref().filter(|e| e.side != "candidate") {
        // Whichever reference run died, the reference's evidence is incomplete: never judge
        // on what happens to be left.
        return Err(format!(
            "{dir}: the reference died: its {} run ({}) ended the process ({}); nothing to \
             judge the candidate against",
            ended.side,
            match ended.side.as_str() {
                "golden" => &record.sides.golden,
                "reference_native" => &record.sides.reference_native,
                _ => &record.sides.reference,
            }
            .as_ref()
            .map_or("?", |s| s.spec.as_str()),
            ended.how,
        ));
    }
    let against = standard.against();
    let (needed, needed_file) = match against {
        Against::ReferenceNative => (&record.sides.reference_native, &files.reference_native),
        Against::Reference => (&record.sides.reference, &files.reference),
    };
    let role = against.role();
    if let Some(side) = needed.as_ref().filter(|s| s.status == Status::Skipped) {
        return Err(format!(
            "{dir}: the {role} {} was not run (replay_op.py --candidate-only) and no outputs of it \
             were computed or saved; nothing to judge the candidate against",
            side.spec
        ));
    }
    let needed_failed = needed.as_ref().filter(|s| s.status != Status::Ok);
    if let (Some(side), false) = (needed_failed, against.may_refuse_the_dtype()) {
        return Err(format!(
            "{dir}: the {role} {} raised {}; nothing to judge the candidate against",
            side.spec,
            raised(side)
        ));
    }
    if needed.is_none() && needed_file.is_none() && !against.may_refuse_the_dtype() {
        return Err(format!(
            "{dir}: replay.json records no {role} run and there is no {role}.pt"
        ));
    }
    let mut names = keys(files.candidate.as_ref());
    let compared = if against.may_refuse_the_dtype() && needed_file.is_none() {
        files.reference.as_ref()
    } else {
        needed_file.as_ref()
    };
    for key in keys(compared) {
        if !names.contains(&key) {
            names.push(key);
        }
    }
    names.sort_by_key(|n| output_order(n));
    if names.is_empty() {
        replay.verdict = ReplayVerdict::Error;
        replay.reason = "neither the candidate nor the reference returned a tensor".into();
        return Ok(replay);
    }
    for name in &names {
        let mut judged = judge_output(
            name,
            &standard,
            view(files.candidate.as_ref(), name),
            view(files.reference.as_ref(), name),
            view(files.golden.as_ref(), name),
            view(files.reference_native.as_ref(), name),
        );
        if let (true, Some(side)) = (against.may_refuse_the_dtype(), needed_failed) {
            if judged.verdict == ReplayVerdict::Unsupported {
                judged.reason = format!(
                    "the {} standard compares with the reference in the candidate's dtype, which raised {}",
                    standard.name(),
                    raised(side)
                );
            }
        }
        replay.outputs.push(judged);
    }
    replay.verdict = ReplayVerdict::worst(replay.outputs.iter().map(|o| o.verdict));
    let deciding = replay
        .outputs
        .iter()
        .find(|o| o.verdict == replay.verdict)
        .expect("the worst verdict is some output's");
    replay.reason = if replay.outputs.len() == 1 {
        deciding.reason.clone()
    } else {
        format!(
            "worst of {} outputs: {} {}: {}",
            replay.outputs.len(),
            deciding.name,
            deciding.verdict,
            deciding.reason
        )
    };
    replay.note();
    Ok(replay)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_view(bytes: &[u8], n: usize) -> TensorView<'_> {
        TensorView::new(DType::Float32, vec![n], vec![1], 0, bytes).unwrap()
    }

    fn bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn output_names_sort_by_number() {
        let mut names = vec!["out.10", "out.2", "out", "out.1"];
        names.sort_by_key(|n| output_order(n));
        assert_eq!(names, vec!["out", "out.1", "out.2", "out.10"]);
    }

    #[test]
    fn the_metrics_mark_what_msprobe_counts_against_the_pass() {
        // float32 candidate against a float32 reference: eps 2^-23, pass threshold 1e-4.
        let r = bytes(&[1.0, 1.0, 1.0, 1.0]);
        let c = bytes(&[1.0, 1.00002, 1.002, 1.0]);
        let j = judge_output(
            "out",
            &Standard::Msprobe,
            Some(f32_view(&c, 4)),
            Some(f32_view(&r, 4)),
            None,
            None,
        );
        let m = j.metrics.unwrap();
        // 2e-5 relative is within 1e-4; 2e-3 is not: the first mismatch is flat index 2.
        assert_eq!(m.first_mismatch.unwrap().index, 2);
        assert_eq!(m.mismatches, 1);
        // max |c - r| = 2e-3 is not below 0.001, and 3/4 below 0.001 is not above 0.999.
        assert_eq!(j.verdict, ReplayVerdict::Error, "{}", j.reason);
        // A shape mismatch is an error without metrics.
        let short = bytes(&[1.0, 1.0]);
        let j = judge_output(
            "out",
            &Standard::Msprobe,
            Some(f32_view(&c, 4)),
            Some(f32_view(&short, 2)),
            None,
            None,
        );
        assert_eq!(j.verdict, ReplayVerdict::Error);
        assert!(j.reason.contains("shape differs"), "{}", j.reason);
        // A missing candidate output is an error; allclose decides by the metrics.
        let j = judge_output(
            "out.1",
            &Standard::Msprobe,
            None,
            Some(f32_view(&r, 4)),
            None,
            None,
        );
        assert!(j.reason.contains("returned no output out.1"));
        let allclose = Standard::Allclose {
            atol: 0.0,
            rtol: 3e-3,
        };
        let j = judge_output(
            "out",
            &allclose,
            Some(f32_view(&c, 4)),
            Some(f32_view(&r, 4)),
            None,
            None,
        );
        assert_eq!(j.verdict, ReplayVerdict::Pass, "{}", j.reason);
        let tight = Standard::Allclose {
            atol: 0.0,
            rtol: 1e-5,
        };
        let j = judge_output(
            "out",
            &tight,
            Some(f32_view(&c, 4)),
            Some(f32_view(&r, 4)),
            None,
            None,
        );
        assert_eq!(j.verdict, ReplayVerdict::Error);
        assert_eq!(j.metrics.unwrap().first_mismatch.unwrap().index, 1);
    }
}
