//! The built-in references of feature `torch` (`dumpview::reference`), in one test binary
//! since building torch-sys takes minutes.
//!
//! On the committed examples' input sets, each built-in's float64 golden agrees to 1e-12
//! with Python's torch in the same run: with `assets/replay_op.py` (its `golden.pt`) when
//! that file exists, else with the same formula in a small inline script. The built-ins the
//! examples do not exercise are checked on small tensors against formulas computed here in
//! f64 by hand.
#![cfg(feature = "torch")]

use std::path::{Path, PathBuf};
use std::process::Command;

use dumpview::model::input_set::{CapturedTensor, InputSet, InputValue};
use dumpview::model::tensor::{DType, TensorFile};
use dumpview::reference::{BUILTINS, ComputedTensor, ReferenceError, Upcast, run_builtin};

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

/// The tensors of a torch.save dict {name -> tensor}, by name, as (dtype, shape, values).
fn read_outputs(path: &Path) -> Vec<(String, DType, Vec<usize>, Vec<f64>)> {
    let file = TensorFile::open(path).unwrap_or_else(|e| panic!("{e}"));
    file.entries
        .iter()
        .map(|e| {
            let view = file.view(e);
            let values = (0..view.numel()).map(|i| view.get(i)).collect();
            (e.key.clone(), e.dtype, e.shape.clone(), values)
        })
        .collect()
}

/// The same formulas as `dumpview::reference::builtins`, written from their sources in
/// Python, on the input set rebuilt as replay_op.py rebuilds it (as_strided over the span)
/// and upcast to float64.
const INLINE: &str = r#"
import sys, torch
src, name, out = sys.argv[1], sys.argv[2], sys.argv[3]
saved = torch.load(src, weights_only=True)
def rebuild(v):
    if isinstance(v, dict) and "__dump_probe_tensor__" in v:
        t = torch.as_strided(v["span"], v["shape"], v["stride"], v["offset_in_span"])
        return t.to(torch.float64) if t.is_floating_point() else t
    return v
a = {k: rebuild(v) for k, v in saved.items()}
def rms_norm(x, weight, eps=1e-6):
    dtype = x.dtype
    h = x.to(torch.float64)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * h.to(dtype)
def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)
def rope_neox(q, k, cos, sin, positions=None):
    if positions is not None and cos.shape[0] != q.shape[0]:
        cos, sin = cos[positions], sin[positions]
    c, s = cos[:, None, :], sin[:, None, :]
    return q * c + rotate_half(q) * s, k * c + rotate_half(k) * s
result = {"rms_norm": rms_norm, "rope_neox": rope_neox}[name](**a)
if isinstance(result, tuple):
    result = {"out.%d" % i: t.contiguous() for i, t in enumerate(result)}
else:
    result = {"out": result.contiguous()}
torch.save(result, out)
"#;

/// Python's float64 golden for `builtin` on input set `set` of example `dump`, and which
/// implementation computed it.
fn python_golden(
    dump: &str,
    stage: &str,
    builtin: &str,
    out: &Path,
) -> (Vec<(String, DType, Vec<usize>, Vec<f64>)>, &'static str) {
    let replay_op = root().join("assets/replay_op.py");
    if replay_op.is_file() {
        let dir = out.join("replay");
        let status = Command::new(python())
            .arg(&replay_op)
            .arg(root().join("assets/examples").join(dump))
            .args(["--stage", &format!("{stage}#1")])
            .args(["--candidate", &format!("builtin:{builtin}")])
            .args(["--reference", &format!("builtin:{builtin}")])
            .arg("--out")
            .arg(&dir)
            .output()
            .expect("run replay_op.py");
        assert!(
            status.status.success(),
            "replay_op.py: {}",
            String::from_utf8_lossy(&status.stderr)
        );
        return (read_outputs(&dir.join("golden.pt")), "replay_op.py");
    }
    let file = out.join("golden.pt");
    let status = Command::new(python())
        .args(["-c", INLINE])
        .arg(example_set(dump, stage))
        .arg(builtin)
        .arg(&file)
        .output()
        .expect("run the venv's python");
    assert!(
        status.status.success(),
        "python: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    (read_outputs(&file), "inline torch script")
}

/// The largest |a - b|, NaN when the two disagree on a NaN.
fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| if x == y { 0.0 } else { (x - y).abs() })
        .fold(0.0, f64::max)
}

fn agrees_with_python(dump: &str, stage: &str, builtin: &str) {
    let set = InputSet::read(&example_set(dump, stage)).unwrap();
    let ours = run_builtin(builtin, &set, Upcast::Float64).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (theirs, by) = python_golden(dump, stage, builtin, tmp.path());
    let names: Vec<_> = ours.iter().map(|(n, _)| n.as_str()).collect();
    let their_names: Vec<_> = theirs.iter().map(|(n, ..)| n.as_str()).collect();
    assert_eq!(names, their_names, "{dump} {stage} {builtin}");
    for ((name, t), (_, dtype, shape, values)) in ours.iter().zip(&theirs) {
        assert_eq!((t.dtype, &t.shape), (*dtype, shape), "{name}");
        assert_eq!(t.dtype, DType::Float64);
        let diff = max_abs_diff(&t.values(), values);
        eprintln!("{dump} {stage}#1 builtin:{builtin} {name}: max |diff| vs {by} = {diff:e}");
        assert!(diff <= TOLERANCE, "{name}: max |diff| {diff:e} vs {by}");
        assert!(values.iter().any(|v| *v != 0.0), "{name}: all zero");
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
        for t in 0..2 {
            let row = positions[t] as usize;
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
        for o in 0..2 {
            want.push((0..3).map(|i| x[r * 3 + i] * weight(o, i)).sum::<f64>() + b[o]);
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
