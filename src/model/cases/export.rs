//! What a case matrix is exported as: the `run.sh` of a bundle to run by hand
//! ([`run_script`], `dumpview cases export-run`) and a standalone pytest regression test of
//! one case ([`pytest`], `dumpview cases export-test`, seed 002's step 7) with the
//! tolerances its standard implies for each output's dtype ([`tolerance`]).

use super::plan::Plan;
use crate::model::replay::Standard;
use crate::model::tensor::DType;

/// The bundle's run script: replay_op.py `--batch` over the bundle's baseline copy, each
/// case's outputs into `results/CASE`.
pub fn run_script(plan: &Plan) -> String {
    format!(
        "#!/bin/sh\n\
         # The case matrix {name} of dumpview (`dumpview cases export-run {name}`): {stage} of\n\
         # {dump}, candidate {candidate}, reference {reference}, {n} cases.\n\
         #\n\
         # Run it where the operator lives (an NPU host: torch and torch_npu installed), from the\n\
         # directory a relative candidate path (file.py:function) is relative to:\n\
         #     sh run.sh [--device npu:0] [--only CASE]...     (PYTHON=... picks the interpreter)\n\
         # Each case's outputs go to results/CASE (an existing one is never overwritten). Take each\n\
         # back where dumpview has the matrix:\n\
         #     dumpview cases record {name} CASE results/CASE\n\
         set -eu\n\
         here=$(cd \"$(dirname \"$0\")\" && pwd)\n\
         exec \"${{PYTHON:-python3}}\" \"$here/replay_op.py\" \"$here/baseline\" --batch \"$here/plan.json\" --out-root \"$here/results\" \"$@\"\n",
        name = plan.name,
        stage = plan.stage,
        dump = plan.dump,
        candidate = plan.candidate,
        reference = plan.reference,
        n = plan.cases.len(),
    )
}

/// How the exported test compares one output.
#[derive(Debug, Clone, PartialEq)]
pub enum TestTolerance {
    /// Integers and bools: every element equal.
    Exact {
        /// Where the rule comes from.
        source: String,
    },
    /// msprobe's error band, per element: `|c - r| <= atol + rtol * |r|` after the absolute
    /// shortcut `max |c - r| < shortcut`.
    Msprobe {
        /// The relative threshold of the error band (0.01, or 0.001 for float32/float64).
        rtol: f64,
        /// `rtol * eps`.
        atol: f64,
        /// msprobe's absolute shortcut, 0.001.
        shortcut: f64,
        /// Where the figures come from.
        source: String,
    },
    /// `torch._dynamo.utils.same`: allclose at 1e-4 against the reference in the candidate's
    /// dtype, else RMSE against the float64 golden within `multiplier` times the reference's
    /// own, plus 1e-5.
    Dynamo {
        /// 3 for float16/bfloat16 outputs or fewer than 1000 elements, else 2.
        multiplier: f64,
        /// Where the figures come from.
        source: String,
    },
    /// The explicit `allclose` standard.
    Allclose {
        /// `--rtol`.
        rtol: f64,
        /// `--atol`.
        atol: f64,
        /// Where the figures come from.
        source: String,
    },
}

/// The tolerance `standard` implies for an output of `dtype` with `elements` elements.
pub fn tolerance(standard: &Standard, dtype: DType, elements: usize) -> TestTolerance {
    if !dtype.is_float() {
        return TestTolerance::Exact {
            source: format!(
                "{} outputs must be equal (msprobe's compare.py: integers and bools; dynamo's same(): allclose of integers)",
                dtype.name()
            ),
        };
    }
    let half = matches!(dtype, DType::Float16 | DType::BFloat16);
    match standard {
        Standard::Msprobe => {
            let rtol = if half { 0.01 } else { 0.001 };
            // get_abs_bench_with_eps: BFLOAT16_EPS for bfloat16, else np.finfo(bench.dtype).eps of
            // the reference array, which is the candidate's dtype upcast one step.
            let (eps, eps_text) = match dtype {
                DType::BFloat16 => (2f64.powi(-8), "2^-8 (CompareConst.BFLOAT16_EPS)"),
                DType::Float16 => (
                    2f64.powi(-23),
                    "2^-23 (np.finfo(float32).eps: the reference is float32)",
                ),
                _ => (
                    2f64.powi(-52),
                    "2^-52 (np.finfo(float64).eps: the reference is float64)",
                ),
            };
            TestTolerance::Msprobe {
                rtol,
                atol: rtol * eps,
                shortcut: 0.001,
                source: format!(
                    "msprobe's error band for {} outputs (mindstudio-probe 26.2.0, msprobe/pytorch/api_accuracy_checker/compare/compare.py, Comparator._compare_float_tensor): an error when {} of the elements have |c - r| / (|r| + eps) < {rtol} ({}), eps = {eps_text}; here every element must (rtol {rtol}, atol rtol * eps), after msprobe's absolute shortcut max |c - r| < 0.001. Between this band and msprobe's pass threshold ({}) msprobe says warning, which dumpview counts as a pass",
                    if half {
                        "float16/bfloat16"
                    } else {
                        "float32/float64"
                    },
                    if half { "at most 99%" } else { "at most 99.9%" },
                    if half {
                        "CompareConst.HUNDRED_RATIO_THRESHOLD"
                    } else {
                        "CompareConst.THOUSAND_RATIO_THRESHOLD"
                    },
                    if half {
                        "0.001 for 99.9%"
                    } else {
                        "0.0001 for 99.99%"
                    },
                ),
            }
        }
        Standard::Dynamo => {
            let multiplier = if half || elements < 1000 { 3.0 } else { 2.0 };
            TestTolerance::Dynamo {
                multiplier,
                source: format!(
                    "torch._dynamo.utils.same (torch 2.13.0, torch/_dynamo/utils.py) with its defaults: pass when allclose(reference_native, candidate, atol=1e-4, rtol=1e-4), else when RMSE(golden - candidate) <= {multiplier} * RMSE(golden - reference_native) + 1e-5 (get_multiplier(): 3 for float16/bfloat16 or fewer than 1000 elements, else 2)"
                ),
            }
        }
        Standard::Allclose { atol, rtol } => TestTolerance::Allclose {
            rtol: *rtol,
            atol: *atol,
            source: format!(
                "the plan's explicit allclose standard: |c - r| <= {atol:e} + {rtol:e} * |r| at every element"
            ),
        },
    }
}

/// One output the exported test checks.
#[derive(Debug, Clone, PartialEq)]
pub struct TestOutput {
    /// `out`, `out.0`, …
    pub name: String,
    /// The output's dtype.
    pub dtype: DType,
    /// How it is compared.
    pub tolerance: TestTolerance,
}

/// What [`pytest`] writes.
#[derive(Debug, Clone, PartialEq)]
pub struct TestSpec {
    /// The matrix's NAME.
    pub plan: String,
    /// The case id.
    pub case: String,
    /// One line on the case: its outcome, attempt and reason.
    pub summary: String,
    /// The candidate spec (a relative `file.py` made absolute).
    pub candidate: String,
    /// The device the case ran on.
    pub device: String,
    /// `keywords` or `positional`.
    pub call: String,
    /// `eager` or `compile`.
    pub mode: String,
    /// The arguments the call writes in place and returns as its outputs, or `None`.
    pub outputs_from: Option<Vec<String>>,
    /// The standard's name (`msprobe`, `dynamo`, `allclose`).
    pub standard: String,
    /// Each output.
    pub outputs: Vec<TestOutput>,
    /// The inputs file beside the test.
    pub inputs_file: String,
    /// (role, file beside the test): `reference`, or `reference_native` and `golden`.
    pub expected_files: Vec<(String, String)>,
}

/// A Python literal of `text` (JSON's string escapes are Python's).
fn py(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

fn py_f64(x: f64) -> String {
    format!("{x:?}")
}

/// The standalone pytest file of `spec`.
pub fn pytest(spec: &TestSpec) -> String {
    let function: String = spec
        .case
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let mut comments = String::new();
    let mut table = String::from("{\n");
    for o in &spec.outputs {
        let (source, entry) = match &o.tolerance {
            TestTolerance::Exact { source } => (source, "{\"kind\": \"exact\"}".to_string()),
            TestTolerance::Msprobe {
                rtol,
                atol,
                shortcut,
                source,
            } => (
                source,
                format!(
                    "{{\"kind\": \"msprobe\", \"rtol\": {}, \"atol\": {}, \"shortcut\": {}}}",
                    py_f64(*rtol),
                    py_f64(*atol),
                    py_f64(*shortcut)
                ),
            ),
            TestTolerance::Dynamo { multiplier, source } => (
                source,
                format!(
                    "{{\"kind\": \"dynamo\", \"multiplier\": {}}}",
                    py_f64(*multiplier)
                ),
            ),
            TestTolerance::Allclose { rtol, atol, source } => (
                source,
                format!(
                    "{{\"kind\": \"allclose\", \"rtol\": {}, \"atol\": {}}}",
                    py_f64(*rtol),
                    py_f64(*atol)
                ),
            ),
        };
        comments.push_str(&wrap_comment(&format!(
            "{} ({}): {source}.",
            o.name,
            o.dtype.name()
        )));
        table.push_str(&format!("    {}: {entry},\n", py(&o.name)));
    }
    table.push('}');
    let expected: Vec<String> = spec
        .expected_files
        .iter()
        .map(|(role, file)| format!("{}: {}", py(role), py(file)))
        .collect();
    let outputs_from = match &spec.outputs_from {
        None => "None".to_string(),
        Some(names) => format!(
            "[{}]",
            names.iter().map(|n| py(n)).collect::<Vec<_>>().join(", ")
        ),
    };
    TEMPLATE
        .replace("@@PLAN@@", &spec.plan)
        .replace("@@CASE@@", &spec.case)
        .replace("@@SUMMARY@@", &wrap_doc(&spec.summary))
        .replace("@@INPUTS@@", &spec.inputs_file)
        .replace("@@CANDIDATE@@", &py(&spec.candidate))
        .replace("@@DEVICE@@", &py(&spec.device))
        .replace("@@CALL@@", &py(&spec.call))
        .replace("@@MODE@@", &py(&spec.mode))
        .replace("@@STANDARD@@", &py(&spec.standard))
        .replace("@@STANDARD_NAME@@", &spec.standard)
        .replace("@@OUTPUTS_FROM@@", &outputs_from)
        .replace("@@TOLERANCE_COMMENTS@@", comments.trim_end())
        .replace("@@TOLERANCES@@", &table)
        .replace("@@INPUTS_FILE@@", &py(&spec.inputs_file))
        .replace("@@EXPECTED@@", &format!("{{{}}}", expected.join(", ")))
        .replace("@@FUNCTION@@", &function)
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

fn wrap_comment(text: &str) -> String {
    wrap(text, 94)
        .into_iter()
        .map(|l| format!("# {l}\n"))
        .collect()
}

fn wrap_doc(text: &str) -> String {
    wrap(&text.replace('\\', "/").replace("\"\"\"", "'''"), 96).join("\n")
}

const TEMPLATE: &str = r#""""Regression test of case @@CASE@@ of the dumpview case matrix @@PLAN@@, written by
`dumpview cases export-test @@PLAN@@ @@CASE@@` (seed 002, step 7: the smallest failing case).

@@SUMMARY@@

The operator is called as replay_op.py called it, on @@INPUTS@@: the arguments exactly as
the candidate received them in that case (dtype, shape, stride, shared storages, scalar
options). Its outputs are compared with the reference's saved beside this file, at the
tolerances the @@STANDARD_NAME@@ standard implies for each output's dtype (below).

    pytest this_file.py
    DUMPVIEW_CANDIDATE=my_pkg.ops:fixed_op pytest this_file.py    # another operator, e.g. the fix
    DUMPVIEW_DEVICE=npu:0 pytest this_file.py                     # another device
"""

import importlib
import importlib.util
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
CANDIDATE = os.environ.get("DUMPVIEW_CANDIDATE") or @@CANDIDATE@@
DEVICE = os.environ.get("DUMPVIEW_DEVICE") or @@DEVICE@@
CALL = @@CALL@@  # keywords or positional, as replay_op.py called the candidate
MODE = @@MODE@@  # eager, or compile (torch.compile of the candidate)
STANDARD = @@STANDARD@@
# None: the outputs are what the call returns; else the arguments it writes in place.
OUTPUTS_FROM = @@OUTPUTS_FROM@@
INPUTS = @@INPUTS_FILE@@
EXPECTED = @@EXPECTED@@

# Tolerances, and where they come from:
@@TOLERANCE_COMMENTS@@
TOLERANCES = @@TOLERANCES@@


def _resolve(spec):
    """module.path:function, path/to/file.py:function, a dotted torch callable, builtin:NAME."""
    if spec.startswith("builtin:"):
        sys.path.insert(0, HERE)  # replay_op.py beside this file holds the built-ins
        import replay_op

        return replay_op.BUILTINS[spec[len("builtin:"):]]
    if ":" in spec:
        where, _, attr = spec.rpartition(":")
        if where.endswith(".py") or "/" in where or os.sep in where:
            path = where if os.path.isabs(where) else os.path.abspath(where)
            sys.path.insert(0, os.path.dirname(path))
            module_spec = importlib.util.spec_from_file_location("dumpview_case_candidate", path)
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        target = module
        for part in attr.split("."):
            target = getattr(target, part)
        return target
    parts = spec.split(".")
    if "npu" in parts or parts[0] == "torch_npu":
        import torch_npu  # noqa: F401  (registers torch.ops.npu)
    for n in range(len(parts) - 1, 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:n]))
        except ImportError:
            continue
        for part in parts[n:]:
            target = getattr(target, part)
        return target
    raise ImportError("%s: nothing importable in it" % spec)


def _to_device(value, device, moved):
    """value on device with the same strides and storage sharing (a .to() would make it dense)."""
    if isinstance(value, torch.Tensor):
        if value.device == torch.device(device):
            return value
        storage = value.untyped_storage()
        key = storage.data_ptr()
        if key not in moved:
            moved[key] = torch.empty(0, dtype=torch.uint8).set_(storage).to(device)
        out = torch.empty(0, dtype=value.dtype, device=device)
        out.set_(moved[key].untyped_storage(), value.storage_offset(), value.shape, value.stride())
        return out
    if isinstance(value, list):
        return [_to_device(v, device, moved) for v in value]
    if isinstance(value, tuple):
        return tuple(_to_device(v, device, moved) for v in value)
    if isinstance(value, dict):
        return {k: _to_device(v, device, moved) for k, v in value.items()}
    if isinstance(value, torch.device):
        return torch.device(device)
    return value


def _outputs(result, args):
    if OUTPUTS_FROM:
        tensors = [args[name] for name in OUTPUTS_FROM]
        return {"out": tensors[0]} if len(tensors) == 1 else {"out.%d" % i: t for i, t in enumerate(tensors)}
    if isinstance(result, (tuple, list)):
        return {"out.%d" % i: v for i, v in enumerate(result)}
    if isinstance(result, dict):
        return {"out.%s" % k: v for k, v in result.items()}
    return {"out": result}


def _rmse(a, b):
    return float(((a - b) ** 2).mean().sqrt()) if a.numel() else 0.0


def _check(name, got, expected):
    assert isinstance(got, torch.Tensor), "%s: the operator returned %r, not a tensor" % (name, type(got).__name__)
    got = got.detach().cpu()
    rule = TOLERANCES[name]
    want = expected["reference_native" if STANDARD == "dynamo" else "reference"][name]
    assert tuple(got.shape) == tuple(want.shape), "%s: shape %s, expected %s" % (name, tuple(got.shape), tuple(want.shape))
    if rule["kind"] == "exact":
        assert torch.equal(got, want.to(got.dtype)), "%s: elements differ" % name
        return
    c, r = got.to(torch.float64), want.to(torch.float64)
    if rule["kind"] == "msprobe":
        diff = (c - r).abs()
        if diff.numel() and bool(torch.isfinite(diff).all()) and float(diff.max()) < rule["shortcut"]:
            return  # msprobe's absolute shortcut passes, whatever the magnitudes
        torch.testing.assert_close(c, r, rtol=rule["rtol"], atol=rule["atol"], equal_nan=False,
                                   msg=lambda m: "%s (%s standard): %s" % (name, STANDARD, m))
    elif rule["kind"] == "dynamo":
        assert got.dtype == want.dtype, "%s: dtype %s, the reference's %s" % (name, got.dtype, want.dtype)
        if bool(((r - c).abs() <= 1e-4 + 1e-4 * c.abs()).all()):
            return
        golden = expected["golden"][name].to(torch.float64)
        ours, theirs = _rmse(golden, c), _rmse(golden, r)
        assert ours <= rule["multiplier"] * theirs + 1e-5, (
            "%s (dynamo standard): RMSE against float64 %.6g > %g * %.6g + 1e-5 (the reference's own)"
            % (name, ours, rule["multiplier"], theirs))
    else:
        torch.testing.assert_close(c, r, rtol=rule["rtol"], atol=rule["atol"], equal_nan=False,
                                   msg=lambda m: "%s (allclose standard): %s" % (name, m))


def test_@@FUNCTION@@():
    inputs = torch.load(os.path.join(HERE, INPUTS), map_location="cpu", weights_only=True)
    expected = {role: torch.load(os.path.join(HERE, file), map_location="cpu", weights_only=True)
                for role, file in EXPECTED.items()}
    fn = _resolve(CANDIDATE)
    if MODE == "compile":
        fn = torch.compile(fn)
    moved = {}
    args = {name: _to_device(value, DEVICE, moved) for name, value in inputs.items()}
    torch.manual_seed(0)
    with torch.no_grad():
        result = fn(**args) if CALL == "keywords" else fn(*args.values())
    outputs = _outputs(result, args)
    names = list(TOLERANCES)
    missing = [n for n in names if n not in outputs]
    assert not missing, "the operator returned %s; expected %s" % (sorted(outputs), names)
    for name in names:
        _check(name, outputs[name], expected)
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msprobe_tolerances_follow_the_output_dtype() {
        let TestTolerance::Msprobe { rtol, atol, .. } =
            tolerance(&Standard::Msprobe, DType::BFloat16, 10)
        else {
            panic!()
        };
        assert_eq!((rtol, atol), (0.01, 0.01 / 256.0));
        let TestTolerance::Msprobe {
            rtol, atol, source, ..
        } = tolerance(&Standard::Msprobe, DType::Float32, 10)
        else {
            panic!()
        };
        assert_eq!((rtol, atol), (0.001, 0.001 * f64::EPSILON));
        assert!(source.contains("compare.py"), "{source}");
        assert!(matches!(
            tolerance(&Standard::Msprobe, DType::Int64, 3),
            TestTolerance::Exact { .. }
        ));
        let TestTolerance::Dynamo { multiplier, .. } =
            tolerance(&Standard::Dynamo, DType::Float32, 5000)
        else {
            panic!()
        };
        assert_eq!(multiplier, 2.0);
    }
}
