//! The built-in references of feature `torch` (`dumpview::internals::reference`), in one test binary
//! since building torch-sys takes minutes.
//!
//! On the committed examples' input sets, each built-in's float64 golden agrees to 1e-12
//! with Python's torch in the same run: with `assets/replay_op.py` (its `golden.pt`) when
//! that file exists, else with the same formula in a small inline script. The built-ins the
//! examples do not exercise are checked on small tensors against formulas computed here in
//! f64 by hand.
//!
//! `dumpview replay --reference builtin:NAME` of this build computes the reference sides
//! in-process (replay_op.py runs the candidate only): on the examples' input sets its
//! verdicts and metrics are the all-Python run's (`--python-reference`), to 1e-12.
//!
//! scripts/test.sh runs the rest of the suite without feature `torch` (a torch build loads
//! libtorch in every process it starts) and this binary with it: a test of a `dumpview`
//! command that needs the feature belongs here.
#![cfg(feature = "torch")]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use dumpview::internals::reference::{
    BUILTINS, ComputedTensor, ReferenceError, Upcast, run_builtin,
};
use dumpview::model::input_set::{CapturedTensor, InputSet, InputValue};
use dumpview::model::tensor::{DType, TensorFile};

const TOLERANCE: f64 = 1e-12;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's python (scripts/test.sh exports it as DUMPVIEW_PYTHON).
fn python() -> PathBuf {
    std::env::var_os("DUMPVIEW_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv/bin/python"))
}

/// The input set `stage#1` of example `dump` (its first window).
fn example_set(dump: &str, stage: &str) -> PathBuf {
    root()
        .join("assets/examples")
        .join(dump)
        .join("rank0/match1-occ1/inputs")
        .join(format!("{stage}#1.pt"))
}

/// One tensor Python saved.
struct Saved {
    name: String,
    dtype: DType,
    shape: Vec<usize>,
    values: Vec<f64>,
}

/// The tensors of a torch.save dict {name -> tensor}, in saved order.
fn read_outputs(path: &Path) -> Vec<Saved> {
    let file = TensorFile::open(path).unwrap_or_else(|e| panic!("{e}"));
    file.entries
        .iter()
        .map(|e| {
            let view = file.view(e);
            Saved {
                name: e.key.clone(),
                dtype: e.dtype,
                shape: e.shape.clone(),
                values: (0..view.numel()).map(|i| view.get(i)).collect(),
            }
        })
        .collect()
}

/// replay_op.py: `$DUMPVIEW_REPLAY_OP` when set (a copy under development elsewhere), else
/// `assets/replay_op.py`; `None` while neither exists.
fn replay_op() -> Option<PathBuf> {
    let path = std::env::var_os("DUMPVIEW_REPLAY_OP")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("assets/replay_op.py"));
    path.is_file().then_some(path)
}

/// The same formulas as `dumpview::internals::reference::builtins`, written from their sources in
/// Python, on the input set rebuilt as replay_op.py rebuilds it (as_strided over the span),
/// once per upcast: golden.pt (float64), reference.pt (benchmark), reference_native.pt (none).
const INLINE: &str = r#"
import os, sys, torch
src, name, out = sys.argv[1], sys.argv[2], sys.argv[3]
saved = torch.load(src, weights_only=True)
UP = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.float32: torch.float64}
def rebuild(v, upcast):
    if isinstance(v, dict) and "__dump_probe_tensor__" in v:
        t = torch.as_strided(v["span"], v["shape"], v["stride"], v["offset_in_span"])
        if not t.is_floating_point() or upcast == "none":
            return t
        return t.to(torch.float64 if upcast == "float64" else UP.get(t.dtype, t.dtype))
    return v
def rms_norm(x, weight, eps=1e-6):
    # HF LlamaRMSNorm, float32 read as "at least float32".
    h = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * h.to(x.dtype)
def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)
def rope_neox(q, k, cos, sin, positions=None):
    if positions is not None and cos.shape[0] != q.shape[0]:
        cos, sin = cos[positions], sin[positions]
    c, s = cos[:, None, :], sin[:, None, :]
    return q * c + rotate_half(q) * s, k * c + rotate_half(k) * s
fn = {"rms_norm": rms_norm, "rope_neox": rope_neox}[name]
os.makedirs(out)
for upcast, file in [("float64", "golden.pt"), ("benchmark", "reference.pt"), ("none", "reference_native.pt")]:
    result = fn(**{k: rebuild(v, upcast) for k, v in saved.items()})
    if isinstance(result, tuple):
        result = {"out.%d" % i: t.contiguous() for i, t in enumerate(result)}
    else:
        result = {"out": result.contiguous()}
    torch.save(result, os.path.join(out, file))
"#;

/// Python's outputs of `builtin` on input set `stage#1` of example `dump`, in directory
/// `out` (golden.pt, reference.pt, reference_native.pt), and which implementation computed
/// them.
fn python_outputs(dump: &str, stage: &str, builtin: &str, out: &Path) -> &'static str {
    let (output, by) = match replay_op() {
        Some(replay_op) => (
            Command::new(python())
                .arg(&replay_op)
                .arg(root().join("assets/examples").join(dump))
                .args(["--stage", &format!("{stage}#1")])
                .args(["--candidate", &format!("builtin:{builtin}")])
                .args(["--reference", &format!("builtin:{builtin}")])
                .arg("--out")
                .arg(out)
                .output()
                .expect("run replay_op.py"),
            "replay_op.py",
        ),
        None => (
            Command::new(python())
                .args(["-c", INLINE])
                .arg(example_set(dump, stage))
                .arg(builtin)
                .arg(out)
                .output()
                .expect("run the venv's python"),
            "inline torch script",
        ),
    };
    assert!(
        output.status.success(),
        "{by}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    by
}

/// The largest |a - b|, NaN when the two disagree on a NaN.
fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| if x == y { 0.0 } else { (x - y).abs() })
        .fold(0.0, f64::max)
}

/// Each upcast's outputs against Python's: the float64 golden to 1e-12; the benchmark and
/// native references (float32/float16 outputs) within one unit in the last place of their
/// dtype, since the same libtorch runs the same formula.
fn agrees_with_python(dump: &str, stage: &str, builtin: &str) {
    let set = InputSet::read(&example_set(dump, stage)).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("replay");
    let by = python_outputs(dump, stage, builtin, &dir);
    for (upcast, file) in [
        (Upcast::Float64, "golden.pt"),
        (Upcast::Benchmark, "reference.pt"),
        (Upcast::None, "reference_native.pt"),
    ] {
        let ours = run_builtin(builtin, &set, upcast).unwrap();
        let theirs = read_outputs(&dir.join(file));
        let names: Vec<_> = ours.iter().map(|(n, _)| n.as_str()).collect();
        let their_names: Vec<_> = theirs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, their_names, "{dump} {stage} {builtin} {file}");
        for ((name, t), saved) in ours.iter().zip(&theirs) {
            assert_eq!(
                (t.dtype, &t.shape),
                (saved.dtype, &saved.shape),
                "{file} {name}"
            );
            let diff = max_abs_diff(&t.values(), &saved.values);
            eprintln!(
                "{dump} {stage}#1 builtin:{builtin} {file} {name} ({}): max |diff| vs {by} = {diff:e}",
                t.dtype
            );
            assert!(
                saved.values.iter().any(|v| *v != 0.0),
                "{file} {name}: all zero"
            );
            if upcast == Upcast::Float64 {
                assert_eq!(t.dtype, DType::Float64);
                assert!(diff <= TOLERANCE, "{name}: max |diff| {diff:e} vs {by}");
            } else {
                let ulp = 2f64.powi(1 - t.dtype.mantissa_digits().unwrap() as i32);
                for (a, b) in t.values().iter().zip(&saved.values) {
                    assert!(
                        a == b || (a - b).abs() <= ulp * b.abs().max(f64::MIN_POSITIVE),
                        "{file} {name}: {a} vs {b} ({by})"
                    );
                }
            }
        }
    }
}

#[test]
fn rms_norm_agrees_with_python_on_the_float32_example() {
    agrees_with_python("llama_kv_alias/a", "layers.0.input_norm", "rms_norm");
}

#[test]
fn rms_norm_agrees_with_python_on_the_float16_example() {
    agrees_with_python("llama_fp16_overflow/b", "layers.0.input_norm", "rms_norm");
}

#[test]
fn rope_neox_agrees_with_python_on_the_float32_example() {
    agrees_with_python("llama_kv_alias/a", "layers.0.rope", "rope_neox");
}

#[test]
fn rope_neox_agrees_with_python_on_the_float16_example() {
    agrees_with_python("llama_fp16_overflow/b", "layers.0.rope", "rope_neox");
}

#[test]
fn upcast_decides_the_dtype_the_formula_runs_in() {
    let f16 = InputSet::read(&example_set("llama_fp16_overflow/b", "layers.0.input_norm")).unwrap();
    let f32 = InputSet::read(&example_set("llama_kv_alias/a", "layers.0.input_norm")).unwrap();
    let dtype = |set: &InputSet, upcast| {
        run_builtin("builtin:rms_norm", set, upcast).unwrap()[0]
            .1
            .dtype
    };
    assert_eq!(dtype(&f16, Upcast::None), DType::Float16);
    assert_eq!(dtype(&f16, Upcast::Benchmark), DType::Float32);
    assert_eq!(dtype(&f16, Upcast::Float64), DType::Float64);
    assert_eq!(dtype(&f32, Upcast::None), DType::Float32);
    assert_eq!(dtype(&f32, Upcast::Benchmark), DType::Float64);
    // The benchmark result is the golden rounded within float32 precision.
    let bench = run_builtin("rms_norm", &f16, Upcast::Benchmark).unwrap();
    let gold = run_builtin("rms_norm", &f16, Upcast::Float64).unwrap();
    let (b, g) = (bench[0].1.values(), gold[0].1.values());
    for (b, g) in b.iter().zip(&g) {
        assert!((b - g).abs() <= 1e-6 * g.abs().max(1.0), "{b} vs {g}");
    }
    // Integer tensors are never upcast: rope's positions stay int64 (they index nothing
    // here, cos already holding one row per token).
    let rope = InputSet::read(&example_set("llama_fp16_overflow/b", "layers.0.rope")).unwrap();
    let out = run_builtin("rope_neox", &rope, Upcast::None).unwrap();
    assert_eq!(
        out.iter()
            .map(|(n, t)| (n.as_str(), t.dtype, t.shape.clone()))
            .collect::<Vec<_>>(),
        [
            ("out.0", DType::Float16, vec![12, 4, 64]),
            ("out.1", DType::Float16, vec![12, 2, 64]),
        ]
    );
}

// ---- small tensors against formulas by hand -------------------------------------------

/// A float64 tensor argument of `shape` and `stride` over `span` (values in storage order).
fn strided(shape: &[usize], stride: &[usize], span: &[f64]) -> InputValue {
    InputValue::Tensor(CapturedTensor {
        dtype: DType::Float64,
        shape: shape.to_vec(),
        stride: stride.to_vec(),
        offset_in_span: 0,
        storage_offset: 0,
        device: "cpu".into(),
        requires_grad: false,
        span: span.iter().flat_map(|v| v.to_le_bytes()).collect(),
    })
}

/// A contiguous float64 tensor argument.
fn tensor(shape: &[usize], values: &[f64]) -> InputValue {
    assert_eq!(shape.iter().product::<usize>(), values.len());
    let mut stride = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        stride[i] = stride[i + 1] * shape[i + 1];
    }
    strided(shape, &stride, values)
}

/// A boolean tensor argument, contiguous.
fn bools(shape: &[usize], values: &[bool]) -> InputValue {
    let mut stride = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        stride[i] = stride[i + 1] * shape[i + 1];
    }
    InputValue::Tensor(CapturedTensor {
        dtype: DType::Bool,
        shape: shape.to_vec(),
        stride,
        offset_in_span: 0,
        storage_offset: 0,
        device: "cpu".into(),
        requires_grad: false,
        span: values.iter().map(|&b| u8::from(b)).collect(),
    })
}

fn set(args: Vec<(&str, InputValue)>) -> InputSet {
    InputSet {
        path: PathBuf::from("hand-made.pt"),
        args: args.into_iter().map(|(n, v)| (n.to_string(), v)).collect(),
    }
}

/// Deterministic values in [-2, 2].
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
        })
        .collect()
}

fn run(name: &str, inputs: &InputSet) -> Vec<(String, ComputedTensor)> {
    run_builtin(name, inputs, Upcast::Float64).unwrap_or_else(|e| panic!("{e}"))
}

fn assert_close(got: &ComputedTensor, shape: &[usize], want: &[f64]) {
    assert_eq!(got.shape, shape);
    let diff = max_abs_diff(&got.values(), want);
    assert!(
        diff <= TOLERANCE,
        "max |diff| {diff:e}: {:?} vs {want:?}",
        got.values()
    );
}

/// erf by its Maclaurin series, accurate to ~1e-15 for |z| <= 2.
fn erf(z: f64) -> f64 {
    let (mut term, mut sum) = (z, z);
    for n in 1..200 {
        term *= -z * z / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn add_rms_norm_by_hand() {
    let (x, r, w) = (values(8, 1), values(8, 2), values(4, 3));
    let inputs = set(vec![
        ("x", tensor(&[2, 4], &x)),
        ("residual", tensor(&[2, 4], &r)),
        ("weight", tensor(&[4], &w)),
        ("eps", InputValue::Float(1e-5)),
    ]);
    let out = run("add_rms_norm", &inputs);
    let sum: Vec<f64> = x.iter().zip(&r).map(|(a, b)| a + b).collect();
    let mut normed = Vec::new();
    for row in sum.chunks(4) {
        let ms = row.iter().map(|v| v * v).sum::<f64>() / 4.0;
        normed.extend(row.iter().zip(&w).map(|(v, w)| v / (ms + 1e-5).sqrt() * w));
    }
    assert_eq!(out[0].0, "out.0");
    assert_close(&out[0].1, &[2, 4], &normed);
    assert_eq!(out[1].0, "out.1");
    assert_close(&out[1].1, &[2, 4], &sum);
}

#[test]
fn layer_norm_by_hand() {
    let (x, w, b) = (values(6, 4), values(3, 5), values(3, 6));
    let expect = |weight: bool, eps: f64| -> Vec<f64> {
        let mut out = Vec::new();
        for row in x.chunks(3) {
            let mean = row.iter().sum::<f64>() / 3.0;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 3.0;
            for (i, v) in row.iter().enumerate() {
                let n = (v - mean) / (var + eps).sqrt();
                out.push(if weight { n * w[i] + b[i] } else { n });
            }
        }
        out
    };
    let full = set(vec![
        ("x", tensor(&[2, 3], &x)),
        ("weight", tensor(&[3], &w)),
        ("bias", tensor(&[3], &b)),
        ("eps", InputValue::Float(1e-3)),
    ]);
    assert_close(&run("layer_norm", &full)[0].1, &[2, 3], &expect(true, 1e-3));
    // No weight, no bias, the default eps 1e-5; None given explicitly is "not given".
    let bare = set(vec![
        ("x", tensor(&[2, 3], &x)),
        ("weight", InputValue::None),
    ]);
    assert_close(
        &run("layer_norm", &bare)[0].1,
        &[2, 3],
        &expect(false, 1e-5),
    );
}

#[test]
fn softmax_by_hand_on_either_dim() {
    let x = values(6, 7);
    let last = set(vec![("x", tensor(&[2, 3], &x))]);
    let mut want = Vec::new();
    for row in x.chunks(3) {
        let max = row.iter().cloned().fold(f64::MIN, f64::max);
        let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
        want.extend(row.iter().map(|v| (v - max).exp() / sum));
    }
    assert_close(&run("softmax", &last)[0].1, &[2, 3], &want);
    let first = set(vec![
        ("x", tensor(&[2, 3], &x)),
        ("dim", InputValue::Int(0)),
    ]);
    let mut want = vec![0.0; 6];
    for c in 0..3 {
        let sum = x[c].exp() + x[3 + c].exp();
        want[c] = x[c].exp() / sum;
        want[3 + c] = x[3 + c].exp() / sum;
    }
    assert_close(&run("softmax", &first)[0].1, &[2, 3], &want);
}

#[test]
fn silu_and_mul_gelu_and_gelu_tanh_by_hand() {
    let x = values(8, 8);
    let inputs = set(vec![("x", tensor(&[2, 4], &x))]);
    let silu = |v: f64| v / (1.0 + (-v).exp());
    let want: Vec<f64> = x
        .chunks(4)
        .flat_map(|row| (0..2).map(move |i| silu(row[i]) * row[i + 2]))
        .collect();
    assert_close(&run("silu_and_mul", &inputs)[0].1, &[2, 2], &want);

    let want: Vec<f64> = x
        .iter()
        .map(|v| v * 0.5 * (1.0 + erf(v / 2f64.sqrt())))
        .collect();
    assert_close(&run("gelu", &inputs)[0].1, &[2, 4], &want);
    let c = (2.0 / std::f64::consts::PI).sqrt();
    let want: Vec<f64> = x
        .iter()
        .map(|v| 0.5 * v * (1.0 + (c * (v + 0.044715 * v.powi(3))).tanh()))
        .collect();
    assert_close(&run("gelu_tanh", &inputs)[0].1, &[2, 4], &want);
    // One-sigma anchor: erf(1/sqrt 2) = 0.682689492137086.
    assert!((erf(1.0 / 2f64.sqrt()) - 0.682_689_492_137_086).abs() < 1e-14);

    let odd = set(vec![("x", tensor(&[1, 3], &values(3, 9)))]);
    let err = run_builtin("silu_and_mul", &odd, Upcast::Float64).unwrap_err();
    assert!(err.to_string().contains("odd last dimension (3)"), "{err}");
}

/// q, k of [T=2, H, D=4]; cos/sin half tables [P, 2] indexed by positions.
fn rope_inputs(positions: &[i64]) -> (InputSet, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
    let (q, k) = (values(16, 10), values(8, 11));
    let (cos, sin) = (values(6, 12), values(6, 13));
    let positions_arg = InputValue::Tensor(CapturedTensor {
        dtype: DType::Int64,
        shape: vec![positions.len()],
        stride: vec![1],
        offset_in_span: 0,
        storage_offset: 0,
        device: "cpu".into(),
        requires_grad: false,
        span: positions.iter().flat_map(|v| v.to_le_bytes()).collect(),
    });
    let inputs = set(vec![
        ("q", tensor(&[2, 2, 4], &q)),
        ("k", tensor(&[2, 1, 4], &k)),
        ("cos", tensor(&[3, 2], &cos)),
        ("sin", tensor(&[3, 2], &sin)),
        ("positions", positions_arg),
    ]);
    (inputs, q, k, cos, sin)
}

#[test]
fn rope_neox_and_gptj_by_hand_with_half_tables_and_positions() {
    let positions = [2i64, 0];
    let (inputs, q, k, cos, sin) = rope_inputs(&positions);
    // Token t uses table row positions[t]; head dim 4, pairs per layout.
    let expect = |x: &[f64], heads: usize, neox: bool| -> Vec<f64> {
        let mut out = vec![0.0; x.len()];
        for (t, &row) in positions.iter().enumerate() {
            let row = row as usize;
            for h in 0..heads {
                let base = (t * heads + h) * 4;
                for i in 0..2 {
                    let (c, s) = (cos[row * 2 + i], sin[row * 2 + i]);
                    let (a, b) = if neox {
                        (base + i, base + i + 2)
                    } else {
                        (base + 2 * i, base + 2 * i + 1)
                    };
                    out[a] = x[a] * c - x[b] * s;
                    out[b] = x[b] * c + x[a] * s;
                }
            }
        }
        out
    };
    let neox = run("rope_neox", &inputs);
    assert_close(&neox[0].1, &[2, 2, 4], &expect(&q, 2, true));
    assert_close(&neox[1].1, &[2, 1, 4], &expect(&k, 1, true));
    let gptj = run("rope_gptj", &inputs);
    assert_close(&gptj[0].1, &[2, 2, 4], &expect(&q, 2, false));
    assert_close(&gptj[1].1, &[2, 1, 4], &expect(&k, 1, false));
}

#[test]
fn linear_and_matmul_by_hand_on_transposed_views() {
    let (x, b) = (values(6, 14), values(2, 15));
    // weight [2, 3] seen through a transposed storage: storage holds weight.T [3, 2].
    let wt = values(6, 16);
    let weight = |o: usize, i: usize| wt[i * 2 + o];
    let inputs = set(vec![
        ("x", tensor(&[2, 3], &x)),
        ("weight", strided(&[2, 3], &[1, 2], &wt)),
        ("bias", tensor(&[2], &b)),
    ]);
    let mut want = Vec::new();
    for r in 0..2 {
        for (o, bias) in b.iter().enumerate() {
            want.push((0..3).map(|i| x[r * 3 + i] * weight(o, i)).sum::<f64>() + bias);
        }
    }
    assert_close(&run("linear", &inputs)[0].1, &[2, 2], &want);

    // Batched matmul: a [2, 2, 3] @ b [3, 2] (b a transposed view too).
    let a = values(12, 17);
    let inputs = set(vec![
        ("a", tensor(&[2, 2, 3], &a)),
        ("b", strided(&[3, 2], &[1, 3], &wt)),
    ]);
    let bv = |i: usize, j: usize| wt[j * 3 + i];
    let mut want = Vec::new();
    for n in 0..2 {
        for r in 0..2 {
            for c in 0..2 {
                want.push((0..3).map(|i| a[n * 6 + r * 3 + i] * bv(i, c)).sum::<f64>());
            }
        }
    }
    assert_close(&run("matmul", &inputs)[0].1, &[2, 2, 2], &want);
}

/// softmax(q k^T * scale + bias) v by hand; `allowed(i, j)` false masks to -inf.
fn attention_by_hand(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    (l, s, d): (usize, usize, usize),
    scale: f64,
    bias: impl Fn(usize, usize) -> f64,
) -> Vec<f64> {
    let mut out = vec![0.0; l * d];
    for i in 0..l {
        let scores: Vec<f64> = (0..s)
            .map(|j| (0..d).map(|c| q[i * d + c] * k[j * d + c]).sum::<f64>() * scale + bias(i, j))
            .collect();
        let max = scores.iter().cloned().fold(f64::MIN, f64::max);
        let sum: f64 = scores.iter().map(|x| (x - max).exp()).sum();
        for c in 0..d {
            out[i * d + c] = (0..s)
                .map(|j| (scores[j] - max).exp() / sum * v[j * d + c])
                .sum();
        }
    }
    out
}

#[test]
fn sdpa_by_hand_plain_masked_and_causal() {
    let (l, s, d) = (3, 4, 2);
    let (q, k, v) = (values(l * d, 18), values(s * d, 19), values(s * d, 20));
    let qkv = |extra: Vec<(&'static str, InputValue)>| {
        let mut args = vec![
            ("q", tensor(&[1, l, d], &q)),
            ("k", tensor(&[1, s, d], &k)),
            ("v", tensor(&[1, s, d], &v)),
        ];
        args.extend(extra);
        set(args)
    };
    let default_scale = 1.0 / (d as f64).sqrt();
    let plain = attention_by_hand(&q, &k, &v, (l, s, d), default_scale, |_, _| 0.0);
    assert_close(&run("sdpa", &qkv(vec![]))[0].1, &[1, l, d], &plain);

    let mask = values(l * s, 21);
    let masked = attention_by_hand(&q, &k, &v, (l, s, d), 0.3, |i, j| mask[i * s + j]);
    let inputs = qkv(vec![
        ("mask", tensor(&[l, s], &mask)),
        ("scale", InputValue::Float(0.3)),
    ]);
    assert_close(&run("sdpa", &inputs)[0].1, &[1, l, d], &masked);

    let keep: Vec<bool> = (0..l * s).map(|i| i % 3 != 1).collect();
    let inf = |i: usize, j: usize| {
        if keep[i * s + j] {
            0.0
        } else {
            f64::NEG_INFINITY
        }
    };
    let bool_masked = attention_by_hand(&q, &k, &v, (l, s, d), default_scale, inf);
    let inputs = qkv(vec![("mask", bools(&[l, s], &keep))]);
    assert_close(&run("sdpa", &inputs)[0].1, &[1, l, d], &bool_masked);

    // Causal: query i sees keys 0..=i (torch's tril of an L x S mask).
    let causal = attention_by_hand(&q, &k, &v, (l, s, d), default_scale, |i, j| {
        if j <= i { 0.0 } else { f64::NEG_INFINITY }
    });
    assert_close(&run("sdpa_causal", &qkv(vec![]))[0].1, &[1, l, d], &causal);
}

#[test]
fn arguments_bind_by_keyword_or_by_position() {
    let (x, w) = (values(4, 22), values(4, 23));
    let rms = |eps: f64| -> Vec<f64> {
        let ms = x.iter().map(|v| v * v).sum::<f64>() / 4.0;
        x.iter()
            .zip(&w)
            .map(|(v, w)| w * (v / (ms + eps).sqrt()))
            .collect()
    };
    // Keywords, in any order.
    let keywords = set(vec![
        ("eps", InputValue::Float(0.5)),
        ("weight", tensor(&[4], &w)),
        ("x", tensor(&[4], &x)),
    ]);
    assert_close(&run("rms_norm", &keywords)[0].1, &[4], &rms(0.5));
    // Names that are not parameters: positionally, in captured order; an int eps is a float.
    let positional = set(vec![
        ("hidden", tensor(&[4], &x)),
        ("gamma", tensor(&[4], &w)),
        ("epsilon", InputValue::Int(1)),
    ]);
    assert_close(&run("rms_norm", &positional)[0].1, &[4], &rms(1.0));
    // The default eps (1e-6) when not captured.
    let two = set(vec![("x", tensor(&[4], &x)), ("weight", tensor(&[4], &w))]);
    assert_close(&run("rms_norm", &two)[0].1, &[4], &rms(1e-6));
}

#[test]
fn errors_name_the_builtin_and_the_argument() {
    let x = tensor(&[2, 2], &values(4, 24));
    let err = run_builtin("builtin:nope", &set(vec![]), Upcast::None).unwrap_err();
    assert!(matches!(err, ReferenceError::Unknown { .. }));
    assert!(
        err.to_string()
            .contains("the built-ins are rms_norm, add_rms_norm"),
        "{err}"
    );

    let err = run_builtin("rms_norm", &set(vec![("x", x.clone())]), Upcast::None).unwrap_err();
    assert_eq!(
        err.to_string(),
        "builtin:rms_norm: no argument for parameter `weight` (captured: x)"
    );
    let inputs = set(vec![
        ("x", x.clone()),
        ("weight", InputValue::Str("w".into())),
    ]);
    let err = run_builtin("rms_norm", &inputs, Upcast::None).unwrap_err();
    assert!(
        err.to_string()
            .contains("parameter `weight` (`weight`) is a str, not a tensor"),
        "{err}"
    );
    let many = set(vec![("a", x.clone()), ("b", x.clone()), ("c", x.clone())]);
    let err = run_builtin("matmul", &many, Upcast::None).unwrap_err();
    assert!(
        err.to_string()
            .contains("3 captured arguments (a, b, c) for 2 parameters"),
        "{err}"
    );

    // libtorch's own refusal, its message without the C++ backtrace.
    let bad = set(vec![("a", x.clone()), ("b", tensor(&[3], &values(3, 25)))]);
    let err = run_builtin("matmul", &bad, Upcast::None).unwrap_err();
    let ReferenceError::Torch { builtin, message } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*builtin, "matmul");
    assert!(
        message.contains("size mismatch") || message.contains("shape"),
        "{message}"
    );
    assert!(!message.contains("Exception raised from"), "{message}");
}

#[test]
fn every_builtin_of_the_contract_is_listed_with_its_source() {
    let names: Vec<_> = BUILTINS.iter().map(|b| b.name).collect();
    assert_eq!(
        names,
        [
            "rms_norm",
            "add_rms_norm",
            "layer_norm",
            "softmax",
            "silu_and_mul",
            "gelu",
            "gelu_tanh",
            "rope_neox",
            "rope_gptj",
            "linear",
            "sdpa",
            "sdpa_causal",
            "matmul",
        ]
    );
    assert!(
        BUILTINS
            .iter()
            .all(|b| !b.source.is_empty() && b.required <= b.params.len())
    );
}

#[test]
fn rope_on_flattened_heads_and_partial_rotary_by_hand() {
    // q [T=2, 2 heads * 4] flattened, cos/sin [T, 4] full width: head_dim is the table's.
    let (q, k) = (values(16, 26), values(8, 27));
    let (cos, sin) = (values(8, 28), values(8, 29));
    let inputs = set(vec![
        ("q", tensor(&[2, 8], &q)),
        ("k", tensor(&[2, 4], &k)),
        ("cos", tensor(&[2, 4], &cos)),
        ("sin", tensor(&[2, 4], &sin)),
    ]);
    let neox = |x: &[f64], rot: usize, width: usize, c: &[f64], s: &[f64]| -> Vec<f64> {
        // x rows of `width` values per token split in heads of 4; only the first `rot` turn.
        let mut out = x.to_vec();
        for t in 0..2 {
            for h in 0..width / 4 {
                let base = t * width + h * 4;
                let half = rot / 2;
                for i in 0..half {
                    let (a, b) = (base + i, base + i + half);
                    let (ca, sa) = (c[t * rot + i], s[t * rot + i]);
                    let (cb, sb) = (c[t * rot + i + half], s[t * rot + i + half]);
                    out[a] = x[a] * ca - x[b] * sa;
                    out[b] = x[b] * cb + x[a] * sb;
                }
            }
        }
        out
    };
    let out = run("rope_neox", &inputs);
    assert_close(&out[0].1, &[2, 8], &neox(&q, 4, 8, &cos, &sin));
    assert_close(&out[1].1, &[2, 4], &neox(&k, 4, 4, &cos, &sin));

    // q [T=2, 1, 8] with a [T, 4] table under rope_neox's halving rule: 4 * 2 == 8, so the
    // table is a half table (repeated), not a partial one. A [T, 2] table is partial: the
    // first 2 dims turn (as a full table of width 2), the other 6 pass through.
    let q8 = values(16, 30);
    let (c2, s2) = (values(4, 31), values(4, 32));
    let partial = set(vec![
        ("q", tensor(&[2, 1, 8], &q8)),
        ("k", tensor(&[2, 1, 8], &q8)),
        ("cos", tensor(&[2, 2], &c2)),
        ("sin", tensor(&[2, 2], &s2)),
    ]);
    let mut want = q8.clone();
    for t in 0..2 {
        let (a, b) = (t * 8, t * 8 + 1);
        want[a] = q8[a] * c2[t * 2] - q8[b] * s2[t * 2];
        want[b] = q8[b] * c2[t * 2 + 1] + q8[a] * s2[t * 2 + 1];
    }
    let out = run("rope_neox", &partial);
    assert_close(&out[0].1, &[2, 1, 8], &want);

    // A table with rows for other tokens and no positions: refused, naming the rows.
    let short = set(vec![
        ("q", tensor(&[2, 1, 4], &values(8, 33))),
        ("k", tensor(&[2, 1, 4], &values(8, 34))),
        ("cos", tensor(&[3, 4], &values(12, 35))),
        ("sin", tensor(&[3, 4], &values(12, 36))),
    ]);
    let err = run_builtin("rope_neox", &short, Upcast::None).unwrap_err();
    assert!(err.to_string().contains("rows for 2 tokens"), "{err}");
}

#[test]
fn layer_norm_takes_its_shape_from_the_bias_without_a_weight() {
    let (x, b) = (values(4, 37), values(2, 38));
    let inputs = set(vec![
        ("x", tensor(&[2, 2], &x)),
        ("weight", InputValue::None),
        ("bias", tensor(&[2], &b)),
    ]);
    let mut want = Vec::new();
    for row in x.chunks(2) {
        let mean = (row[0] + row[1]) / 2.0;
        let var = ((row[0] - mean).powi(2) + (row[1] - mean).powi(2)) / 2.0;
        want.extend(
            row.iter()
                .zip(&b)
                .map(|(v, b)| (v - mean) / (var + 1e-5).sqrt() + b),
        );
    }
    assert_close(&run("layer_norm", &inputs)[0].1, &[2, 2], &want);
}

#[test]
fn sdpa_with_fewer_key_heads_is_grouped_query_attention() {
    // q [1, 4 heads, L=2, d=2]; k, v [1, 2 heads, S=3, d=2]: query heads 0, 1 use kv head 0.
    let (l, s, d) = (2, 3, 2);
    let (q, k, v) = (
        values(4 * l * d, 39),
        values(2 * s * d, 40),
        values(2 * s * d, 41),
    );
    let inputs = set(vec![
        ("q", tensor(&[1, 4, l, d], &q)),
        ("k", tensor(&[1, 2, s, d], &k)),
        ("v", tensor(&[1, 2, s, d], &v)),
    ]);
    let scale = 1.0 / (d as f64).sqrt();
    let mut want = Vec::new();
    for h in 0..4 {
        let kv = h / 2;
        want.extend(attention_by_hand(
            &q[h * l * d..(h + 1) * l * d],
            &k[kv * s * d..(kv + 1) * s * d],
            &v[kv * s * d..(kv + 1) * s * d],
            (l, s, d),
            scale,
            |_, _| 0.0,
        ));
    }
    assert_close(&run("sdpa", &inputs)[0].1, &[1, 4, l, d], &want);
}

/// Input sets for every built-in, encoded by the probe's own `_input_value`, and
/// replay_op.py's `BUILTINS[name]` on them under each upcast.
const EVERY_BUILTIN: &str = r#"
import importlib.util, os, sys, torch
replay_op_path, probe_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
replay_op, probe = load("replay_op", replay_op_path), load("dump_probe", probe_path)
g = torch.Generator().manual_seed(13)
def r(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g).to(dtype)
cases = {
    "rms_norm": dict(x=r(3, 8), weight=r(8), eps=1e-5),
    "add_rms_norm": dict(x=r(3, 8, dtype=torch.float16), residual=r(3, 8, dtype=torch.float16),
                         weight=r(8, dtype=torch.float16)),
    "layer_norm": dict(x=r(3, 8), weight=r(8), bias=r(8), eps=1e-4),
    "softmax": dict(x=r(3, 5), dim=0),
    "silu_and_mul": dict(x=r(3, 8, dtype=torch.bfloat16)),
    "gelu": dict(x=r(4, 6)),
    "gelu_tanh": dict(x=r(4, 6, dtype=torch.float16)),
    "rope_neox": dict(q=r(4, 2, 8), k=r(4, 1, 8), cos=r(6, 4), sin=r(6, 4),
                      positions=torch.tensor([5, 0, 2, 2])),
    "rope_gptj": dict(q=r(4, 2, 8), k=r(4, 1, 8)[:, :, :], cos=r(6, 4), sin=r(6, 4),
                      positions=torch.tensor([1, 3, 4, 0])),
    "linear": dict(x=r(3, 4), weight=r(4, 5).t(), bias=r(5)),
    "sdpa": dict(q=r(1, 4, 3, 8), k=r(1, 2, 5, 8), v=r(1, 2, 5, 8), mask=r(3, 5), scale=0.2),
    "sdpa_causal": dict(q=r(2, 3, 4), k=r(2, 3, 4).transpose(0, 1).contiguous().transpose(0, 1), v=r(2, 3, 4)),
    "matmul": dict(a=r(2, 3, 4)[:, :, 1:], b=r(5, 3).t()),
}
UP = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.float32: torch.float64}
def cast(v, upcast):
    if not isinstance(v, torch.Tensor) or not v.is_floating_point() or upcast == "none":
        return v
    return v.to(torch.float64 if upcast == "float64" else UP.get(v.dtype, v.dtype))
os.makedirs(out)
for name, args in cases.items():
    torch.save({k: probe._input_value(v)[1] for k, v in args.items()}, os.path.join(out, name + ".pt"))
    for upcast in ("float64", "benchmark", "none"):
        with torch.no_grad():
            result = replay_op.BUILTINS[name](**{k: cast(v, upcast) for k, v in args.items()})
        if isinstance(result, tuple):
            result = {"out.%d" % i: t.contiguous() for i, t in enumerate(result)}
        else:
            result = {"out": result.contiguous()}
        torch.save(result, os.path.join(out, "%s.%s.pt" % (name, upcast)))
"#;

#[test]
fn every_builtin_agrees_with_replay_op_py_on_probe_encoded_inputs() {
    let Some(replay_op) = replay_op() else {
        eprintln!("skipped: no assets/replay_op.py (nor $DUMPVIEW_REPLAY_OP) to compare with");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sets");
    let output = Command::new(python())
        .args(["-c", EVERY_BUILTIN])
        .arg(&replay_op)
        .arg(root().join("assets/dump_probe.py"))
        .arg(&dir)
        .output()
        .expect("run the venv's python");
    assert!(
        output.status.success(),
        "python: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    for builtin in BUILTINS {
        let set = InputSet::read(&dir.join(format!("{}.pt", builtin.name))).unwrap();
        for (upcast, tag) in [
            (Upcast::Float64, "float64"),
            (Upcast::Benchmark, "benchmark"),
            (Upcast::None, "none"),
        ] {
            let ours = run_builtin(builtin.name, &set, upcast).unwrap_or_else(|e| panic!("{e}"));
            let theirs = read_outputs(&dir.join(format!("{}.{tag}.pt", builtin.name)));
            let names: Vec<_> = ours.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(names, builtin.outputs, "{} {tag}", builtin.name);
            assert_eq!(ours.len(), theirs.len(), "{} {tag}", builtin.name);
            for ((name, t), saved) in ours.iter().zip(&theirs) {
                assert_eq!(name, &saved.name);
                assert_eq!((t.dtype, &t.shape), (saved.dtype, &saved.shape), "{name}");
                let diff = max_abs_diff(&t.values(), &saved.values);
                eprintln!(
                    "builtin:{} {tag} {name} ({}): max |diff| vs replay_op.py = {diff:e}",
                    builtin.name, t.dtype
                );
                let ulp = 2f64.powi(1 - t.dtype.mantissa_digits().unwrap() as i32);
                for (a, b) in t.values().iter().zip(&saved.values) {
                    let close = match upcast {
                        Upcast::Float64 => (a - b).abs() <= TOLERANCE,
                        _ => a == b || (a - b).abs() <= ulp * b.abs().max(f64::MIN_POSITIVE),
                    };
                    assert!(close, "builtin:{} {tag} {name}: {a} vs {b}", builtin.name);
                }
            }
        }
    }
}

// ------------------------------------------------------------------ dumpview replay, in-process

const F32: &str = "assets/examples/llama_kv_alias/a";
const F16: &str = "assets/examples/llama_fp16_overflow/b";

/// `path:NAME` of a candidate in tests/python/replay_candidates.py.
fn candidate(name: &str) -> String {
    format!(
        "{}:{name}",
        root().join("tests/python/replay_candidates.py").display()
    )
}

/// One `dumpview replay --json` of this build.
struct Replayed {
    code: i32,
    json: serde_json::Value,
    stderr: String,
}

fn dumpview_replay(cache: &Path, args: &[&str]) -> Replayed {
    let out = Command::new(support::run::BIN)
        .env("XDG_CACHE_HOME", cache)
        .env("DUMPVIEW_PYTHON", python())
        .current_dir(root())
        .arg("replay")
        .args(args)
        .arg("--json")
        .output()
        .expect("run dumpview");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not JSON ({e}): {}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    Replayed {
        code: out.status.code().unwrap_or(-1),
        json,
        stderr,
    }
}

/// `a` and `b` agree: the same structure and strings, numbers within 1e-12 (relative to
/// their size when above 1). Returns where they differ.
fn same_to_1e12(a: &serde_json::Value, b: &serde_json::Value, at: &str) -> Result<(), String> {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            if (x - y).abs() <= TOLERANCE * x.abs().max(y.abs()).max(1.0) {
                Ok(())
            } else {
                Err(format!("{at}: {x:e} vs {y:e}"))
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .try_for_each(|(i, (x, y))| same_to_1e12(x, y, &format!("{at}[{i}]"))),
        (Value::Object(x), Value::Object(y)) if x.len() == y.len() => {
            x.iter().try_for_each(|(k, v)| {
                let w = y.get(k).ok_or_else(|| format!("{at}.{k}: only in one"))?;
                same_to_1e12(v, w, &format!("{at}.{k}"))
            })
        }
        _ if a == b => Ok(()),
        _ => Err(format!("{at}: {a} vs {b}")),
    }
}

/// The replay's sides as `(role, status, input_dtype, computed_by)`.
fn sides(json: &serde_json::Value) -> Vec<(String, String, String, String)> {
    json["sides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let text = |k: &str| s[k].as_str().unwrap_or_default().to_string();
            (
                text("role"),
                text("status"),
                text("input_dtype"),
                text("computed_by"),
            )
        })
        .collect()
}

/// Replays `stage` of `dump` twice, references in-process and in replay_op.py; asserts the
/// in-process run computed them (replay.json's reference sides skipped, no Python output
/// files, inprocess.json and the saved outputs there) and returns both documents.
fn both_ways(
    cache: &Path,
    dump: &str,
    stage: &str,
    cand: &str,
    reference: &str,
    extra: &[&str],
) -> (Replayed, Replayed) {
    let mut args = vec![
        dump,
        "--stage",
        stage,
        "--candidate",
        cand,
        "--reference",
        reference,
    ];
    args.extend_from_slice(extra);
    let inproc = dumpview_replay(cache, &args);
    args.push("--python-reference");
    let python = dumpview_replay(cache, &args);
    let what = format!("{dump} {stage} {cand} {extra:?}");
    assert_eq!(inproc.code, python.code, "{what}: {}", inproc.stderr);
    let dir = |r: &Replayed| PathBuf::from(r.json["run"]["out_dir"].as_str().unwrap_or_default());
    if inproc.json.get("verdict").is_none() {
        return (inproc, python);
    }
    let (i_dir, p_dir) = (dir(&inproc), dir(&python));
    // No Python computed the in-process run's reference.
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(i_dir.join("replay.json")).unwrap()).unwrap();
    assert_eq!(record["candidate_only"], true, "{what}");
    for side in ["reference", "golden", "reference_native"] {
        assert_eq!(record["sides"][side]["status"], "skipped", "{what} {side}");
        assert!(!i_dir.join(format!("{side}.pt")).exists(), "{what} {side}");
        assert!(p_dir.join(format!("{side}.pt")).exists(), "{what} {side}");
    }
    assert!(i_dir.join("inprocess.json").is_file());
    assert!(
        inproc.stderr.contains("skipped (--candidate-only)"),
        "{}",
        inproc.stderr
    );
    let by = |r: &Replayed| -> Vec<String> { sides(&r.json).into_iter().map(|s| s.3).collect() };
    assert_eq!(
        by(&inproc),
        [
            "replay_op.py",
            dumpview::internals::reference::COMPUTED_BY,
            dumpview::internals::reference::COMPUTED_BY,
            dumpview::internals::reference::COMPUTED_BY
        ],
        "{what}"
    );
    assert_eq!(by(&python), ["replay_op.py"; 4], "{what}");
    // Each side's status and input dtype in replay_op.py's words.
    let without_by = |r: &Replayed| -> Vec<_> {
        sides(&r.json)
            .into_iter()
            .map(|(role, status, dtype, _)| (role, status, dtype))
            .collect()
    };
    assert_eq!(without_by(&inproc), without_by(&python), "{what}");
    (inproc, python)
}

/// The verdict, its reason and every output's judgement (verdict, reason, the standard's
/// figures, the tensor metrics) agree to 1e-12.
fn assert_same_judgement(a: &serde_json::Value, b: &serde_json::Value, what: &str) {
    assert_eq!(
        a["verdict"], b["verdict"],
        "{what}: {} vs {}",
        a["reason"], b["reason"]
    );
    assert_eq!(a["reason"], b["reason"], "{what}");
    same_to_1e12(&a["outputs"], &b["outputs"], "outputs").unwrap_or_else(|e| panic!("{what}: {e}"));
}

#[test]
fn in_process_references_give_the_all_python_verdicts_on_the_examples() {
    use dumpview::model::replay::{Standard, judge_dir};
    let cache = tempfile::tempdir().unwrap();
    let cases = [
        (
            F32,
            "layers.0.input_norm#1",
            "rms_norm_ok",
            "builtin:rms_norm",
            "pass",
        ),
        (
            F32,
            "layers.0.input_norm#1",
            "rms_norm_eps_after",
            "builtin:rms_norm",
            "error",
        ),
        (
            F32,
            "layers.0.rope#1",
            "rope_ok",
            "builtin:rope_neox",
            "pass",
        ),
        (
            F32,
            "layers.0.rope#1",
            "rope_wrong_half",
            "builtin:rope_neox",
            "error",
        ),
        (
            F16,
            "layers.0.input_norm#1",
            "rms_norm_ok",
            "builtin:rms_norm",
            "pass",
        ),
        (
            F16,
            "layers.0.input_norm#1",
            "rms_norm_eps_after",
            "builtin:rms_norm",
            "warning",
        ),
    ];
    for (dump, stage, cand, reference, expected) in cases {
        let what = format!("{dump} {stage} {cand}");
        let (inproc, python) =
            both_ways(cache.path(), dump, stage, &candidate(cand), reference, &[]);
        assert_eq!(
            inproc.json["verdict"], expected,
            "{what}: {}",
            inproc.json["reason"]
        );
        assert_same_judgement(&inproc.json, &python.json, &what);
        // Judged again from the directories (the saved safetensors against replay_op.py's
        // .pt files) under every standard: the same.
        let dir = |r: &Replayed| PathBuf::from(r.json["run"]["out_dir"].as_str().unwrap());
        let tol = if dump == F16 { 1e-3 } else { 1e-5 };
        for standard in [
            Standard::Msprobe,
            Standard::Dynamo,
            Standard::Allclose {
                atol: 1e-5,
                rtol: tol,
            },
        ] {
            let a =
                serde_json::to_value(judge_dir(&dir(&inproc), Some(standard)).unwrap()).unwrap();
            let b =
                serde_json::to_value(judge_dir(&dir(&python), Some(standard)).unwrap()).unwrap();
            eprintln!(
                "{what} {}: {} (in-process) / {} (replay_op.py)",
                standard.describe(),
                a["verdict"],
                b["verdict"]
            );
            assert_same_judgement(&a, &b, &format!("{what} {}", standard.describe()));
        }
    }
}

#[test]
fn arg_overrides_and_renames_reach_the_in_process_reference() {
    let cache = tempfile::tempdir().unwrap();
    let stage = "layers.0.input_norm#1";
    // eps overridden: the candidate and both references compute with eps 0.5, and the
    // verdict still passes (a reference left at the captured 1e-6 would make it an error).
    let (inproc, python) = both_ways(
        cache.path(),
        F32,
        stage,
        &candidate("rms_norm_ok"),
        "builtin:rms_norm",
        &["--arg", "eps=0.5"],
    );
    assert_eq!(inproc.json["verdict"], "pass", "{}", inproc.json["reason"]);
    assert_same_judgement(&inproc.json, &python.json, "--arg eps=0.5");
    // Renamed to names the built-in lacks: positional in captured order on both sides.
    let (inproc, python) = both_ways(
        cache.path(),
        F32,
        stage,
        &candidate("rms_norm_ok"),
        "builtin:rms_norm",
        &["--arg-map", "x=hidden_states", "--arg-map", "weight=gamma"],
    );
    assert_eq!(inproc.json["verdict"], "pass", "{}", inproc.json["reason"]);
    assert_same_judgement(&inproc.json, &python.json, "--arg-map");
    // A renamed argument plus an added one: four positional arguments for rms_norm's three,
    // which fails the reference either way: nothing to judge against (exit 2).
    let (inproc, python) = both_ways(
        cache.path(),
        F32,
        stage,
        "torch.nn.functional.rms_norm",
        "builtin:rms_norm",
        &["--arg-map", "x=input", "--arg", "normalized_shape=[256]"],
    );
    assert_eq!((inproc.code, python.code), (2, 2));
    for r in [&inproc, &python] {
        let error = r.json["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("the reference builtin:rms_norm raised")
                && error.contains("nothing to judge the candidate against"),
            "{error}"
        );
    }
    assert!(
        inproc.json["error"]
            .as_str()
            .unwrap()
            .contains("4 captured arguments"),
        "{}",
        inproc.json["error"]
    );
}

/// The time of one `dumpview replay` with the reference in-process against the same replay
/// with the reference in replay_op.py (`--python-reference`), median of 5, and each side's
/// own duration: `cargo test --release --features torch --test reference_tch -- --ignored
/// --nocapture figures` (docs/replay.md, benches/README.md).
#[test]
#[ignore = "figures for docs/replay.md"]
fn figures() {
    let cache = tempfile::tempdir().unwrap();
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (dump, stage, cand, reference) in [
        (
            F32,
            "layers.0.input_norm#1",
            "rms_norm_ok",
            "builtin:rms_norm",
        ),
        (F16, "layers.0.rope#1", "rope_ok", "builtin:rope_neox"),
    ] {
        for python_reference in [false, true] {
            let (mut wall, mut sides) = (Vec::new(), vec![Vec::new(); 4]);
            for _ in 0..5 {
                let cand = candidate(cand);
                let mut args = vec![
                    dump,
                    "--stage",
                    stage,
                    "--candidate",
                    &cand,
                    "--reference",
                    reference,
                ];
                if python_reference {
                    args.push("--python-reference");
                }
                let started = std::time::Instant::now();
                let run = dumpview_replay(cache.path(), &args);
                wall.push(started.elapsed().as_secs_f64());
                assert_eq!(run.code, 0, "{}", run.stderr);
                for (i, side) in run.json["sides"].as_array().unwrap().iter().enumerate() {
                    sides[i].push(side["duration_s"].as_f64().unwrap());
                }
            }
            let ms: Vec<String> = ["candidate", "reference", "golden", "reference_native"]
                .iter()
                .zip(sides)
                .map(|(role, d)| format!("{role} {:.3} ms", median(d) * 1e3))
                .collect();
            println!(
                "{stage} ({dump}), reference {}: dumpview replay {:.2} s (median of 5); {}",
                if python_reference {
                    "in replay_op.py"
                } else {
                    dumpview::internals::reference::COMPUTED_BY
                },
                median(wall),
                ms.join(", ")
            );
        }
    }
}

#[test]
fn a_remote_dump_keeps_the_reference_in_replay_op_py_and_says_so() {
    let Some(server) = support::sshd::Sshd::start() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let stage = "layers.0.input_norm#1";
    let cand = candidate("rms_norm_eps_after");
    let local = dumpview_replay(
        cache.path(),
        &[
            F32,
            "--stage",
            stage,
            "--candidate",
            &cand,
            "--reference",
            "builtin:rms_norm",
        ],
    );
    let url = server.url(&root().join(F32));
    let ssh = server.ssh_command();
    let python = python().display().to_string();
    let remote = dumpview_replay(
        cache.path(),
        &[
            &url,
            "--stage",
            stage,
            "--candidate",
            &cand,
            "--reference",
            "builtin:rms_norm",
            "--ssh-command",
            &ssh,
            "--python",
            &python,
        ],
    );
    assert_eq!(remote.code, local.code, "{}", remote.stderr);
    assert_eq!(
        remote.json["warnings"],
        serde_json::json!([
            "the reference ran in replay_op.py on 127.0.0.1: this build computes built-in \
             references in-process for local dumps only"
        ])
    );
    let by: Vec<String> = sides(&remote.json).into_iter().map(|s| s.3).collect();
    assert_eq!(by, ["replay_op.py"; 4]);
    assert_eq!(
        sides(&local.json)[1].3,
        dumpview::internals::reference::COMPUTED_BY
    );
    assert_same_judgement(&remote.json, &local.json, "remote vs local in-process");
}
