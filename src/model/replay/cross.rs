//! Cross-feeding (`dumpview replay --cross A B --stage S#N`, docs/replay.md "Cross-feeding"):
//! B's operator rerun on A's captured inputs and A's operator on B's, each judged against the
//! output the *other* side's run saved. Whether each direction reproduces that output
//! separates "the inputs differ" from "the operator differs" ([`Outcome`]).
//!
//! Pure: the service (`services::cross`) runs the two replays and hands in their judgements;
//! [`conclude`] names the outcome and what it means.

use serde::Serialize;
use serde_json::Value;

use super::judge::{self, Replay, SideOutputs};
use super::record::{ReplayRecord, Side, Status};
use super::side::{ComputedTensor, SideTensors};
use super::standard::Standard;
use crate::model::tensor::TensorView;

/// What running each side's operator on the other side's inputs says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Both directions reproduce the other side's saved output and the two sides' captured
    /// inputs agree ([`InputsCompared`]): nothing differs at this stage (a control pair).
    NoDifference,
    /// Both directions reproduce the other side's saved output: the operators agree on these
    /// inputs, so the difference comes from the inputs (look upstream).
    InputsDiffer,
    /// Neither direction reproduces: the operator (or its configuration) differs.
    OperatorDiffers,
    /// One direction reproduces and the other does not: the operators differ on one side's
    /// inputs only (data-dependent).
    DataDependent,
    /// A direction could not be judged (no saved output, no operator, an operator that cannot
    /// be imported, a run that crashed): nothing is concluded.
    NotJudged,
}

impl Outcome {
    /// `no difference`, `inputs differ`, `operator differs`, `data-dependent`, `not judged`.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::NoDifference => "no difference",
            Outcome::InputsDiffer => "inputs differ",
            Outcome::OperatorDiffers => "operator differs",
            Outcome::DataDependent => "data-dependent",
            Outcome::NotJudged => "not judged",
        }
    }

    /// Exit status 0 only for [`Outcome::NoDifference`] and [`Outcome::InputsDiffer`] (the
    /// operators agree).
    pub fn is_finding(self) -> bool {
        !matches!(self, Outcome::NoDifference | Outcome::InputsDiffer)
    }
}

/// Whether the two sides' captured inputs agree, from their manifests' input set entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputsCompared {
    /// `Some(true)`: every argument agrees (a tensor by its dtype, shape and statistics, bit
    /// for bit; anything else by its value); `Some(false)`: [`InputsCompared::differing`]
    /// differ; `None`: not compared ([`InputsCompared::how`] says why).
    pub agree: Option<bool>,
    /// What was compared, or why nothing was.
    pub how: String,
    /// The arguments that differ (or that only one side has).
    pub differing: Vec<String>,
}

impl InputsCompared {
    /// Not compared, for `why`.
    pub fn not_compared(why: impl Into<String>) -> Self {
        InputsCompared {
            agree: None,
            how: why.into(),
            differing: Vec::new(),
        }
    }
}

/// Compares two input sets' `args` (the manifest's argument name → description objects,
/// docs/manifest.md "input_sets[]"): a tensor by its `dtype`, `shape` and `stats` (the
/// statistics object a record of it gets: equal as written means bit-identical statistics),
/// any other description as a whole (scalars by value), lists, tuples and dicts item by
/// item. A tensor without statistics (null for empty or complex tensors, absent in older
/// manifests) cannot be compared: unless another argument differs, the result is not
/// compared.
pub fn compare_inputs(a: Option<&Value>, b: Option<&Value>) -> InputsCompared {
    let (Some(Value::Object(a)), Some(Value::Object(b))) = (a, b) else {
        return InputsCompared::not_compared(
            "inputs not compared: a manifest records no arguments for the set",
        );
    };
    let mut differing = Vec::new();
    let mut unknown = Vec::new();
    for (name, a_desc) in a {
        match b.get(name) {
            None => differing.push(name.clone()),
            Some(b_desc) => match description_differs(a_desc, b_desc) {
                Some(true) => differing.push(name.clone()),
                Some(false) => {}
                None => unknown.push(name.clone()),
            },
        }
    }
    differing.extend(b.keys().filter(|k| !a.contains_key(*k)).cloned());
    if !differing.is_empty() {
        return InputsCompared {
            agree: Some(false),
            how: format!(
                "the captured inputs differ in {} (by their manifests' statistics and values)",
                differing.join(", ")
            ),
            differing,
        };
    }
    if !unknown.is_empty() {
        return InputsCompared::not_compared(format!(
            "inputs not compared: {} carry no statistics in the manifests",
            unknown.join(", ")
        ));
    }
    InputsCompared {
        agree: Some(true),
        how: "the captured inputs agree: every tensor's dtype, shape and statistics are \
              bit-identical and every other argument is equal"
            .into(),
        differing,
    }
}

/// Whether two argument descriptions differ; `None` when a tensor in them has no statistics.
fn description_differs(a: &Value, b: &Value) -> Option<bool> {
    if a["kind"] != b["kind"] {
        return Some(true);
    }
    match a["kind"].as_str() {
        Some("tensor") => {
            if a["dtype"] != b["dtype"] || a["shape"] != b["shape"] {
                return Some(true);
            }
            let (sa, sb) = (&a["stats"], &b["stats"]);
            if sa.is_null() || sb.is_null() {
                return None;
            }
            Some(sa != sb)
        }
        Some("list" | "tuple") => {
            let (Some(ia), Some(ib)) = (a["items"].as_array(), b["items"].as_array()) else {
                return Some(a != b);
            };
            if ia.len() != ib.len() {
                return Some(true);
            }
            fold(ia.iter().zip(ib).map(|(x, y)| description_differs(x, y)))
        }
        Some("dict") => {
            let (Some(ia), Some(ib)) = (a["items"].as_object(), b["items"].as_object()) else {
                return Some(a != b);
            };
            if ia.len() != ib.len() || ia.keys().any(|k| !ib.contains_key(k)) {
                return Some(true);
            }
            fold(ia.iter().map(|(k, x)| description_differs(x, &ib[k])))
        }
        _ => Some(a != b),
    }
}

/// Any difference wins; else any uncompared; else none.
fn fold(items: impl Iterator<Item = Option<bool>>) -> Option<bool> {
    let mut result = Some(false);
    for item in items {
        match item {
            Some(true) => return Some(true),
            None => result = None,
            Some(false) => {}
        }
    }
    result
}

/// Whether an input set is a hooked module's own (`hook(model, input_sets=...)`,
/// docs/manifest.md): its `op` is then the module's class, which a replay cannot rebuild
/// with its weights. The probe writes no mark of its own on such a set, so it is told by
/// how `hook` names it: every argument `input.N` (N = 0, 1, … in order) and an `op` that is
/// a dotted class path (`<module>.<qualname>`: no `:`, its last part capitalised, as
/// classes are named).
pub fn is_module_set(op: &str, arg_names: &[&str]) -> bool {
    let inputs_only = !arg_names.is_empty()
        && arg_names.iter().all(|n| {
            n.strip_prefix("input.")
                .is_some_and(|i| i.parse::<usize>().is_ok())
        });
    let class_path = !op.contains(':')
        && op
            .rsplit_once('.')
            .is_some_and(|(_, last)| last.starts_with(|c: char| c.is_ascii_uppercase()));
    inputs_only && class_path
}

/// Why a direction was not judged, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotJudged {
    /// Why, in one line naming the side, the set and the file.
    pub why: String,
    /// The exact fix (a `capture_inputs(...)` call, an option to give).
    pub fix: String,
}

/// One direction: `operator_of`'s operator rerun on `inputs_of`'s captured inputs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Direction {
    /// Whose operator ran: `A` or `B`.
    pub operator_of: &'static str,
    /// Whose captured inputs it ran on (and whose saved output it is judged against).
    pub inputs_of: &'static str,
    /// The operator spec that ran (`module:function`, `file.py:function`, a dotted torch
    /// callable); `None` when the side recorded none and none was given.
    pub operator: Option<String>,
    /// Where the operator spec came from: `B's input set (op)`, `--candidate`.
    pub operator_from: String,
    /// The input set file the operator ran on (on the host that ran it, as replay_op.py read it).
    pub input_set: String,
    /// The saved output files of `inputs_of`'s run it is judged against, in output order.
    pub saved_outputs: Vec<String>,
    /// The host it ran on (`[user@]host[:port]`), `None` on this machine.
    pub host: Option<String>,
    /// The replay's output directory here.
    pub out_dir: Option<String>,
    /// The run judged against `inputs_of`'s saved output (`reference` is that output).
    pub against_saved: Option<Replay>,
    /// The run judged against `--reference`, when one was given.
    pub against_reference: Option<Replay>,
    /// `Some(true)` when every output is within the standard of the saved one (pass or
    /// warning), `Some(false)` when one is not, `None` when not judged.
    pub reproduces: Option<bool>,
    /// Why it was not judged, when it was not.
    pub not_judged: Option<NotJudged>,
}

impl Direction {
    /// `B's operator on A's inputs`.
    pub fn title(&self) -> String {
        format!(
            "{}'s operator on {}'s inputs",
            self.operator_of, self.inputs_of
        )
    }
}

/// A cross-feeding judged: both directions and the outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cross {
    /// `dumpview.replay.cross`.
    pub format: &'static str,
    /// 1.
    pub version: u32,
    /// `stage#N`, as found on both sides.
    pub stage: String,
    /// Dump A as given.
    pub a: String,
    /// Dump B as given.
    pub b: String,
    /// The standard every judgement used.
    pub standard: Standard,
    /// The reference given (`--reference`), if any.
    pub reference: Option<String>,
    /// B's operator on A's inputs, then A's operator on B's inputs.
    pub directions: Vec<Direction>,
    /// Whether the two sides' captured inputs agree (decides between no difference and
    /// inputs differ when both directions reproduce).
    pub inputs: InputsCompared,
    /// What the two directions say together.
    pub outcome: Outcome,
    /// The outcome in words: what it means and where to look next.
    pub meaning: String,
    /// Always said: a reproduced output is no whole-model fix.
    pub caveat: &'static str,
    /// What the user should know that is not a finding.
    pub warnings: Vec<String>,
}

/// What every cross-feeding says, whatever the outcome.
pub const CAVEAT: &str = "a reproduced output on one input set does not establish a whole-model \
     fix: the operator can agree here while its integration (the layout it is handed, the cache it \
     writes, other inputs) does not";

/// Whether a judgement against the saved output reproduces it: pass or warning on every
/// output.
pub fn reproduces(against_saved: &Replay) -> bool {
    !against_saved.verdict.is_finding()
}

/// The outcome of `b_on_a` (B's operator on A's inputs) and `a_on_b`, with `inputs` (the
/// two sides' inputs compared), and its meaning.
pub fn conclude(
    b_on_a: &Direction,
    a_on_b: &Direction,
    inputs: &InputsCompared,
) -> (Outcome, String) {
    match (b_on_a.reproduces, a_on_b.reproduces) {
        (Some(true), Some(true)) if inputs.agree == Some(true) => (
            Outcome::NoDifference,
            format!(
                "operators and inputs agree at this stage: nothing differs here: each side's \
                 operator reproduces the other side's output and {}; if the runs differ, look \
                 at another stage",
                inputs.how
            ),
        ),
        (Some(true), Some(true)) => (
            Outcome::InputsDiffer,
            format!(
                "operators agree: B's operator reproduces A's output from A's inputs and A's \
                 operator reproduces B's output from B's inputs, so on these inputs the two \
                 operators compute the same thing; the difference comes from the inputs: look \
                 upstream at what produced them ({})",
                inputs.how
            ),
        ),
        (Some(false), Some(false)) => (
            Outcome::OperatorDiffers,
            "the operator (or its configuration) differs: neither side's operator reproduces \
             the other side's output from that side's own inputs; compare the two operators \
             (their code, arguments, dtype paths, kernels) on one of these input sets"
                .into(),
        ),
        (Some(b_ok), Some(_)) => {
            let (agree, differ) = if b_ok { ("A", "B") } else { ("B", "A") };
            let (holds, fails) = if b_ok {
                (b_on_a.title(), a_on_b.title())
            } else {
                (a_on_b.title(), b_on_a.title())
            };
            (
                Outcome::DataDependent,
                format!(
                    "the operator differs on some inputs only (data-dependent): {holds} \
                     reproduces {agree}'s output, but {fails} does not reproduce {differ}'s; the \
                     operators agree on {agree}'s inputs and differ on {differ}'s: look for what \
                     {differ}'s inputs hold that {agree}'s do not (magnitudes, non-finite values, \
                     shapes, layouts, index values)"
                ),
            )
        }
        _ => {
            let missing: Vec<String> = [b_on_a, a_on_b]
                .iter()
                .filter(|d| d.reproduces.is_none())
                .map(|d| d.title())
                .collect();
            (
                Outcome::NotJudged,
                format!(
                    "not judged: {} could not be judged (see why below); nothing is concluded \
                     about inputs or operator",
                    missing.join(" and ")
                ),
            )
        }
    }
}

/// A copy of `view`'s elements, contiguous in C order (any strides and offset).
pub fn to_computed(view: &TensorView) -> ComputedTensor {
    let size = view.dtype().size();
    let storage = view.storage();
    let mut bytes = Vec::with_capacity(view.numel() * size);
    for flat in 0..view.numel() {
        let at = view.storage_index(flat) * size;
        bytes.extend_from_slice(&storage[at..at + size]);
    }
    ComputedTensor {
        dtype: view.dtype(),
        shape: view.shape().to_vec(),
        bytes,
    }
}

/// The replay's output names for `count` saved outputs (linked in the order
/// `capture_inputs(..., outputs=...)` named them): `out` for one when the candidate returned
/// `out`, else `out.0`, `out.1`, … (replay_op.py's names for a tuple's items).
pub fn saved_names(count: usize, candidate_outputs: &[String]) -> Vec<String> {
    if count == 1 && candidate_outputs.iter().any(|n| n == "out") {
        return vec!["out".into()];
    }
    (0..count).map(|i| format!("out.{i}")).collect()
}

/// Judges a replay's candidate against `saved` (the other side's run's outputs, named as
/// [`saved_names`] names them) under `standard`: the saved outputs take the place of all three
/// reference sides, so msprobe and allclose compare with them as the reference, and dynamo
/// finds no float64 golden (its allclose step decides). `saved_spec` names them in the
/// output (`A's saved output`). `record` is the replay's `replay.json`, `candidate` its
/// candidate's outputs, `dir` its directory.
///
/// # Errors
/// As [`super::judge::judge`].
pub fn judge_against_saved(
    record: &ReplayRecord,
    candidate: Option<SideTensors>,
    saved: &[(String, ComputedTensor)],
    saved_spec: &str,
    standard: Standard,
    dir: &str,
) -> Result<Replay, String> {
    let mut record = record.clone();
    let as_saved = Side {
        spec: saved_spec.to_string(),
        resolved: None,
        status: Status::Ok,
        duration_s: None,
        exception: None,
        input_dtype: Some("as the run produced it".into()),
        outputs: saved.iter().map(|(n, _)| n.clone()).collect(),
        computed_by: Some("the captured run".into()),
    };
    record.sides.reference = Some(as_saved.clone());
    record.sides.golden = Some(as_saved.clone());
    record.sides.reference_native = Some(as_saved);
    record.ended = record.ended.filter(|e| e.side == "candidate");
    let memory = || {
        Some(SideTensors::Memory {
            tensors: saved.to_vec(),
            saved: None,
        })
    };
    let files = SideOutputs {
        candidate,
        reference: memory(),
        golden: memory(),
        reference_native: memory(),
    };
    let mut replay = judge::judge(&record, &files, standard, dir)?;
    replay.sides.truncate(2);
    Ok(replay)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn direction(operator_of: &'static str, reproduces: Option<bool>) -> Direction {
        Direction {
            operator_of,
            inputs_of: if operator_of == "A" { "B" } else { "A" },
            operator: Some("m:f".into()),
            operator_from: String::new(),
            input_set: String::new(),
            saved_outputs: Vec::new(),
            host: None,
            out_dir: None,
            against_saved: None,
            against_reference: None,
            reproduces,
            not_judged: None,
        }
    }

    fn compared(agree: Option<bool>) -> InputsCompared {
        InputsCompared {
            agree,
            how: "how".into(),
            differing: Vec::new(),
        }
    }

    #[test]
    fn the_five_outcomes() {
        let (outcome, meaning) = conclude(
            &direction("B", Some(true)),
            &direction("A", Some(true)),
            &compared(Some(true)),
        );
        assert_eq!(outcome, Outcome::NoDifference);
        assert!(!outcome.is_finding());
        assert!(meaning.contains("nothing differs here"), "{meaning}");
        for agree in [None, Some(false)] {
            let (outcome, _) = conclude(
                &direction("B", Some(true)),
                &direction("A", Some(true)),
                &compared(agree),
            );
            assert_eq!(outcome, Outcome::InputsDiffer);
        }
        let cases = [
            (Some(true), Some(true), Outcome::InputsDiffer),
            (Some(false), Some(false), Outcome::OperatorDiffers),
            (Some(true), Some(false), Outcome::DataDependent),
            (Some(false), Some(true), Outcome::DataDependent),
            (None, Some(true), Outcome::NotJudged),
            (Some(false), None, Outcome::NotJudged),
            (None, None, Outcome::NotJudged),
        ];
        for (b_on_a, a_on_b, want) in cases {
            let (outcome, meaning) = conclude(
                &direction("B", b_on_a),
                &direction("A", a_on_b),
                &compared(None),
            );
            assert_eq!(outcome, want, "{b_on_a:?} {a_on_b:?}: {meaning}");
            assert_eq!(outcome.is_finding(), want != Outcome::InputsDiffer);
        }
    }

    #[test]
    fn a_data_dependent_outcome_names_the_inputs_it_differs_on() {
        let (_, meaning) = conclude(
            &direction("B", Some(true)),
            &direction("A", Some(false)),
            &compared(Some(true)),
        );
        assert!(
            meaning.contains("agree on A's inputs and differ on B's"),
            "{meaning}"
        );
        assert!(
            meaning.contains("A's operator on B's inputs does not reproduce B's"),
            "{meaning}"
        );
        let (_, meaning) = conclude(
            &direction("B", Some(false)),
            &direction("A", Some(true)),
            &compared(Some(true)),
        );
        assert!(
            meaning.contains("agree on B's inputs and differ on A's"),
            "{meaning}"
        );
    }

    #[test]
    fn not_judged_names_the_direction() {
        let (_, meaning) = conclude(
            &direction("B", None),
            &direction("A", Some(true)),
            &compared(None),
        );
        assert!(
            meaning.contains("B's operator on A's inputs could not"),
            "{meaning}"
        );
    }

    #[test]
    fn inputs_compare_by_statistics_and_values() {
        let x = |sum: f64| serde_json::json!({"kind": "tensor", "dtype": "float32", "shape": [4], "stats": {"sum": sum}});
        let set = |sum: f64, eps: f64| {
            serde_json::json!({"x": x(sum), "eps": {"kind": "float", "value": eps},
                               "xs": {"kind": "list", "items": [x(sum)]}})
        };
        let same = compare_inputs(Some(&set(1.0, 1e-6)), Some(&set(1.0, 1e-6)));
        assert_eq!(same.agree, Some(true), "{same:?}");
        let other = compare_inputs(Some(&set(1.0, 1e-6)), Some(&set(1.5, 1e-5)));
        assert_eq!(other.agree, Some(false));
        assert_eq!(other.differing, ["eps", "x", "xs"]);
        let mut bare = set(1.0, 1e-6);
        bare["x"]["stats"] = Value::Null;
        let unknown = compare_inputs(Some(&bare), Some(&set(1.0, 1e-6)));
        assert_eq!(unknown.agree, None);
        assert!(unknown.how.contains("x carry no statistics"), "{unknown:?}");
        assert_eq!(compare_inputs(None, Some(&bare)).agree, None);
    }

    #[test]
    fn a_hooked_modules_set_is_told_by_its_names() {
        assert!(is_module_set("hkmod.Norm", &["input.0", "input.1"]));
        assert!(is_module_set("__main__.Block.Inner", &["input.0"]));
        assert!(!is_module_set("torch.nn.functional.silu", &["input.0"]));
        assert!(!is_module_set("ops.py:Norm", &["input.0"]));
        assert!(!is_module_set("hkmod.Norm", &["x", "weight"]));
        assert!(!is_module_set("hkmod.Norm", &[]));
    }
}
