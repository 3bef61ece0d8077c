//! `dumpview replay` end to end on the committed examples' captured input sets
//! (assets/examples/llama_kv_alias/a, float32; llama_fp16_overflow/b, float16) and the layout
//! fixture (tests/fixtures/replay/dump), through the real binary and the embedded
//! assets/replay_op.py: verdicts under every standard, crash and unsupported candidates, the
//! captured strides and storage sharing as the candidate sees them, exit statuses, the
//! `--json` document, the report's "Replays", cancel, and the same replay on a remote host
//! through a real OpenSSH server (tests/support/sshd.rs) that leaves nothing behind there.
//!
//! The candidates are tests/python/replay_candidates.py's, the ones tests/python/
//! test_replay_op.py replays too: written as model code writes them (the correct ones in
//! the inputs' dtype, float32 for the norm's reduction), the wrong ones off by far more than
//! any threshold. Only the sleeping candidates of the cancel tests are written here. Every
//! judged output is checked against msprobe's own `Comparator` (mindstudio-probe in the
//! venv) and torch's `torch._dynamo.utils.same` run on the same files, and its first
//! mismatch against numpy's on the same files.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::deadline::OutputWithin;
use support::python::{candidate, python, repo};
use support::run::with_python as dumpview;
use support::sshd::Sshd;

const F32: &str = "assets/examples/llama_kv_alias/a";
const F16: &str = "assets/examples/llama_fp16_overflow/b";

/// The candidates module of the cancel tests (written once per test run): each sleeps
/// inside the call, long enough to be cancelled there.
const SLEEPERS: &str = r#"
"""Sleeping candidates for tests/replay.rs's cancel tests."""
import time


def sleeps_here(*args, **kwargs):
    time.sleep(120)


def sleeps_there(*args, **kwargs):
    time.sleep(120)
"#;

/// Checks each judged output against the sources of the standards, on the same files:
/// msprobe's `Comparator._compare_torch_tensor` (status and figures), torch's
/// `torch._dynamo.utils.same(ref_native, candidate, fp64_ref=golden)`, and numpy's first
/// element outside `|c - r| <= atol + rtol * |r|`. Reads a JSON list of
/// `{dir, outputs: [{name, against, atol, rtol}]}` on stdin, prints one JSON list.
const CROSS_CHECK: &str = r#"
import json, logging, sys, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)
import numpy as np
import torch
import torch._dynamo.utils as dynamo_utils
from msprobe.pytorch.api_accuracy_checker.compare.compare import Comparator
from msprobe.pytorch.api_accuracy_checker.compare.compare_column import CompareColumn

comparator = Comparator.__new__(Comparator)
comparator.registry = comparator._register_compare_func()
answers = []
for job in json.load(sys.stdin):
    d = job["dir"]
    load = lambda n: torch.load("%s/%s.pt" % (d, n), weights_only=True)
    cand, ref, golden, native = load("candidate"), load("reference"), load("golden"), load("reference_native")
    outs = []
    for o in job["outputs"]:
        name = o["name"]
        status, col, _ = comparator._compare_torch_tensor("op", ref[name].clone(), cand[name].clone(), CompareColumn(), False)
        num = lambda v: None if isinstance(v, str) else float(v)
        same = bool(dynamo_utils.same(native[name], cand[name], fp64_ref=golden[name], log_error=lambda *a, **k: None))
        side = native if o["against"] == "reference_native" else ref
        a = cand[name].double().numpy().ravel()
        b = side[name].double().numpy().ravel()
        close = (a == b) | (np.isfinite(a) & np.isfinite(b) & (np.abs(a - b) <= o["atol"] + o["rtol"] * np.abs(b)))
        bad = np.flatnonzero(~close)
        outs.append({"name": name, "msprobe": status, "cosine": num(col.cosine_sim),
                     "max_abs_err": num(col.max_abs_err), "hundredth": num(col.rel_err_hundredth),
                     "thousandth": num(col.rel_err_thousandth), "ten_thousandth": num(col.rel_err_ten_thousandth),
                     "dynamo_same": same, "first_mismatch": int(bad[0]) if bad.size else None})
    answers.append({"dir": d, "outputs": outs})
print(json.dumps(answers))
"#;

/// Writes generated replay output directories into `argv[1]` — float16, bfloat16 and
/// float32 outputs of 1 to 3000 elements, relative noise from 0 to 0.3 (straddling every
/// threshold of both rules), NaN, infinities, zeros, small values, small values whose error
/// only the relative error's eps decides, an all-zero candidate, a
/// NaN in the native reference, and int64/bool outputs — and prints, per directory, what
/// msprobe's `Comparator._compare_torch_tensor` and torch's `same()` say of them.
const GENERATED: &str = r#"
import json, logging, os, sys, warnings
warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)
import torch
import torch._dynamo.utils as dynamo_utils
from msprobe.pytorch.api_accuracy_checker.compare.compare import Comparator
from msprobe.pytorch.api_accuracy_checker.compare.compare_column import CompareColumn

root = sys.argv[1]
comparator = Comparator.__new__(Comparator)
comparator.registry = comparator._register_compare_func()
g = torch.Generator().manual_seed(20260213)
UP = {torch.float16: torch.float32, torch.bfloat16: torch.float32, torch.float32: torch.float64}
cases = []
k = 0
for dtype in (torch.float16, torch.bfloat16, torch.float32):
    for n in (1, 7, 999, 1000, 3000):
        for noise in (0.0, 1e-4, 4e-4, 1e-3, 2e-3, 5e-3, 6e-3, 1.2e-2, 5e-2, 0.3):
            for special in ("", "nan", "inf", "zeros", "small", "mixed", "candzero", "refnan"):
                if special and n < 7:
                    continue
                if special and noise not in (1e-3, 1.2e-2):
                    continue
                k += 1
                scale = (1.0, 1e-3, 30.0)[k % 3]
                gold = torch.randn(n, generator=g, dtype=torch.float64) * scale
                if special == "small":
                    gold[: n // 2] *= 1e-5
                if special == "zeros":
                    gold[: n // 3] = 0.0
                ref = gold.to(UP[dtype])
                noisy = gold * (1 + noise * torch.randn(n, generator=g, dtype=torch.float64))
                if special == "mixed":
                    # Exact large values (|c - r| >= 0.001 from rounding alone) and small
                    # ones off by 5e-3 relative: the eps of |r| + eps decides the verdict.
                    gold = torch.randn(n, generator=g, dtype=torch.float64) * 30.0
                    gold[: n // 2] = torch.randn(n // 2, generator=g, dtype=torch.float64) * 3e-4
                    ref = gold.to(UP[dtype])
                    noisy = gold.clone()
                    noisy[: n // 2] *= 1 + 5e-3 * torch.randn(n // 2, generator=g, dtype=torch.float64)
                cand = noisy.to(dtype)
                native = (gold * (1 + 2e-3 * torch.randn(n, generator=g, dtype=torch.float64))).to(dtype)
                if special == "nan":
                    cand[n // 2] = float("nan")
                if special == "inf":
                    cand[1] = float("inf")
                    ref[1] = float("inf")
                if special == "candzero":
                    cand.zero_()
                if special == "refnan":
                    native[0] = float("nan")
                d = os.path.join(root, "case%03d" % k)
                os.makedirs(d)
                for name, t in (("candidate", cand), ("reference", ref), ("golden", gold), ("reference_native", native)):
                    torch.save({"out": t.contiguous()}, os.path.join(d, name + ".pt"))
                side = lambda: {"spec": "gen", "status": "ok", "outputs": ["out"]}
                with open(os.path.join(d, "replay.json"), "w") as f:
                    json.dump({"format": "dumpview.replay", "version": 1, "stage": "case%03d" % k, "occurrence": 1,
                               "sides": {s: side() for s in ("candidate", "reference", "golden", "reference_native")}}, f)
                status, col, _ = comparator._compare_torch_tensor("op", ref.clone(), cand.clone(), CompareColumn(), False)
                same = bool(dynamo_utils.same(native, cand, fp64_ref=gold, log_error=lambda *a, **kw: None))
                cases.append({"dir": d, "msprobe": status, "dynamo": "pass" if same else "error",
                              "what": "%s n=%d noise=%g %s" % (str(dtype)[6:], n, noise, special)})
for dtype, equal in ((torch.int64, True), (torch.int64, False), (torch.bool, True), (torch.bool, False)):
    k += 1
    a = torch.randint(0, 2, (50,), generator=g).to(dtype)
    b = a.clone()
    if not equal:
        b[3] = 1 - b[3] if dtype == torch.int64 else ~b[3]
    d = os.path.join(root, "case%03d" % k)
    os.makedirs(d)
    for name, t in (("candidate", b), ("reference", a), ("golden", a), ("reference_native", a)):
        torch.save({"out": t}, os.path.join(d, name + ".pt"))
    with open(os.path.join(d, "replay.json"), "w") as f:
        json.dump({"format": "dumpview.replay", "version": 1, "stage": "case%03d" % k, "occurrence": 1,
                   "sides": {s: {"spec": "gen", "status": "ok"} for s in ("candidate", "reference", "golden", "reference_native")}}, f)
    status, _, _ = comparator._compare_torch_tensor("op", a.clone(), b.clone(), CompareColumn(), False)
    same = bool(dynamo_utils.same(a, b, fp64_ref=a, log_error=lambda *a, **kw: None))
    cases.append({"dir": d, "msprobe": status, "dynamo": "pass" if same else "error", "what": "%s equal=%s" % (dtype, equal)})
print(json.dumps(cases))
"#;

/// The sleepers' module, written once for the test run.
fn sleepers() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("dv-replay-sleepers-")
            .tempdir()
            .unwrap();
        std::fs::write(dir.path().join("replay_sleepers.py"), SLEEPERS).unwrap();
        dir
    });
    Box::leak(dir.path().join("replay_sleepers.py").into_boxed_path())
}

/// `path:NAME` of a sleeping candidate.
fn sleeper(name: &str) -> String {
    format!("{}:{name}", sleepers().display())
}

struct Run {
    code: i32,
    json: Value,
    stderr: String,
}

fn replay_json(cache: &Path, args: &[&str]) -> Run {
    let out: Output = dumpview(cache)
        .arg("replay")
        .args(args)
        .arg("--json")
        .output_within_limit();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {stdout}\nstderr: {stderr}"));
    Run {
        code: out.status.code().unwrap_or(-1),
        json,
        stderr,
    }
}

/// `replay_json` of one input set, asserting the run produced a verdict.
fn replay(
    cache: &Path,
    dump: &str,
    stage: &str,
    cand: &str,
    reference: &str,
    standard: &[&str],
) -> Run {
    let mut args = vec![
        dump,
        "--stage",
        stage,
        "--candidate",
        cand,
        "--reference",
        reference,
    ];
    args.extend_from_slice(standard);
    let run = replay_json(cache, &args);
    assert!(
        run.json.get("verdict").is_some(),
        "{args:?}: no verdict: {}\n{}",
        run.json,
        run.stderr
    );
    run
}

fn verdict(run: &Run) -> &str {
    run.json["verdict"].as_str().unwrap()
}

/// Cross-checks every output of `runs` with [`CROSS_CHECK`] (one Python for all).
fn cross_check(runs: &[&Run]) {
    let jobs: Vec<Value> = runs
        .iter()
        .map(|run| {
            let outputs: Vec<Value> = run.json["outputs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| {
                    serde_json::json!({
                        "name": o["name"],
                        "against": o["against"],
                        "atol": o["metrics"]["atol"],
                        "rtol": o["metrics"]["rtol"],
                    })
                })
                .collect();
            serde_json::json!({"dir": run.json["run"]["out_dir"], "outputs": outputs})
        })
        .collect();
    let mut child = Command::new(python().unwrap())
        .args(["-c", CROSS_CHECK])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&jobs).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "cross-check failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    for (run, answer) in runs.iter().zip(&answers) {
        let standard = run.json["standard"]["name"].as_str().unwrap();
        for (ours, theirs) in run.json["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .zip(answer["outputs"].as_array().unwrap())
        {
            let what = format!("{} {} {standard}", run.json["stage"], ours["name"]);
            let ours_verdict = ours["verdict"].as_str().unwrap();
            match standard {
                "msprobe" => {
                    assert_eq!(ours_verdict, theirs["msprobe"], "{what}: {ours}");
                    let figures = &ours["msprobe"];
                    for (mine, msprobe) in [("max_abs_err", "max_abs_err"), ("cosine", "cosine")] {
                        if let (Some(a), Some(b)) =
                            (figures[mine].as_f64(), theirs[msprobe].as_f64())
                        {
                            assert!(
                                (a - b).abs() <= 1e-9 * b.abs().max(1.0),
                                "{what}: {mine} {a} vs {b}"
                            );
                        }
                    }
                    for (mine, msprobe) in [
                        ("rel_err_hundredth", "hundredth"),
                        ("rel_err_thousandth", "thousandth"),
                        ("rel_err_ten_thousandth", "ten_thousandth"),
                    ] {
                        if let Some(b) = theirs[msprobe].as_f64() {
                            assert_eq!(figures[mine]["share"].as_f64(), Some(b), "{what}: {mine}");
                        }
                    }
                }
                "dynamo" => {
                    assert_eq!(
                        ours_verdict == "pass",
                        theirs["dynamo_same"].as_bool().unwrap(),
                        "{what}: {ours}"
                    );
                }
                _ => {}
            }
            assert_eq!(
                ours["metrics"]["first_mismatch"]["index"].as_u64(),
                theirs["first_mismatch"].as_u64(),
                "{what}: first mismatch"
            );
        }
    }
}

#[test]
fn correct_candidates_pass_under_every_standard() {
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    // allclose: float32 outputs within 1e-5; float16 outputs within one float16 ULP at 1
    // (2^-10 ~ 9.8e-4), absolute and relative: the candidates compute in float16 as model
    // code does, and rope's few float16 roundings reach 8.8e-4 absolute.
    for (dump, tol) in [(F32, ["1e-5", "1e-5"]), (F16, ["1e-3", "1e-3"])] {
        for (stage, cand, reference) in [
            ("layers.0.input_norm#1", "rms_norm_ok", "builtin:rms_norm"),
            ("layers.0.rope#1", "rope_ok", "builtin:rope_neox"),
        ] {
            let allclose = ["--standard", "allclose", "--atol", tol[0], "--rtol", tol[1]];
            for standard in [
                &["--standard", "msprobe"][..],
                &["--standard", "dynamo"][..],
                &allclose[..],
            ] {
                let run = replay(
                    cache.path(),
                    dump,
                    stage,
                    &candidate(cand),
                    reference,
                    standard,
                );
                assert_eq!(
                    verdict(&run),
                    "pass",
                    "{dump} {stage} {standard:?}: {}",
                    run.json["reason"]
                );
                assert_eq!(run.code, 0);
                runs.push(run);
            }
        }
    }
    cross_check(&runs.iter().collect::<Vec<_>>());
}

#[test]
fn wrong_candidates_are_errors_at_the_right_first_mismatch() {
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    // eps after the normalization: float32 outputs off by ~1.25e-3 relative (eps / 2 mean(x^2)).
    for standard in ["msprobe", "dynamo"] {
        let run = replay(
            cache.path(),
            F32,
            "layers.0.input_norm#1",
            &candidate("rms_norm_eps_after"),
            "builtin:rms_norm",
            &["--standard", standard],
        );
        assert_eq!(verdict(&run), "error", "{standard}: {}", run.json["reason"]);
        assert_eq!(run.code, 1);
        // Every element is off by far more than the pass threshold: the first one.
        let first = &run.json["outputs"][0]["metrics"]["first_mismatch"];
        assert_eq!(first["index"], 0, "{standard}: {first}");
        runs.push(run);
    }
    // The wrong rotation half, float32 and float16: the first mismatch is in the first token
    // whose position has a non-zero sine (position 0 rotates by nothing).
    for dump in [F32, F16] {
        for standard in ["msprobe", "dynamo"] {
            let run = replay(
                cache.path(),
                dump,
                "layers.0.rope#1",
                &candidate("rope_wrong_half"),
                "builtin:rope_neox",
                &["--standard", standard],
            );
            assert_eq!(
                verdict(&run),
                "error",
                "{dump} {standard}: {}",
                run.json["reason"]
            );
            for output in run.json["outputs"].as_array().unwrap() {
                assert_eq!(output["verdict"], "error", "{output}");
                let coords = &output["metrics"]["first_mismatch"]["coords"];
                assert_eq!(
                    coords[0], 1,
                    "{dump} {standard} {}: {coords}",
                    output["name"]
                );
            }
            runs.push(run);
        }
    }
    cross_check(&runs.iter().collect::<Vec<_>>());
}

#[test]
fn a_raising_candidate_is_a_crash_and_a_refusing_one_unsupported() {
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    let run = replay(
        cache.path(),
        F16,
        "layers.0.input_norm",
        &candidate("crash"),
        "builtin:rms_norm",
        &[],
    );
    assert_eq!((verdict(&run), run.code), ("crash", 1));
    assert!(
        run.json["reason"]
            .as_str()
            .unwrap()
            .contains("RuntimeError: replay test candidate: illegal memory access (simulated)"),
        "{}",
        run.json["reason"]
    );
    let side = &run.json["sides"][0];
    assert_eq!(side["role"], "candidate");
    assert_eq!(side["status"], "crash");
    assert_eq!(
        side["exception"]["message"],
        "replay test candidate: illegal memory access (simulated)"
    );
    assert_eq!(run.json["outputs"], serde_json::json!([]));
    let run = replay(
        cache.path(),
        F16,
        "layers.0.input_norm",
        &candidate("unsupported"),
        "builtin:rms_norm",
        &["--standard", "dynamo"],
    );
    assert_eq!((verdict(&run), run.code), ("unsupported", 1));
    assert!(
        run.json["reason"]
            .as_str()
            .unwrap()
            .contains("not implemented for 'Half'")
    );
}

/// The layout fixture: a transposed `k`, a sliced view at an offset, two pairs of
/// arguments sharing a storage, a float16 tensor (tests/fixtures/replay/make_replay_fixture.py).
const FIXTURE: &str = "tests/fixtures/replay/dump";

#[test]
fn the_candidate_sees_the_captured_strides_and_storage_sharing() {
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    // layout_probe writes what each call was handed into $REPLAY_LAYOUT_OUT.1, .2, ...:
    // candidate, reference, golden, reference_native.
    let seen = cache.path().join("seen");
    let probe = candidate("layout_probe");
    let out = dumpview(cache.path())
        .env("REPLAY_LAYOUT_OUT", &seen)
        .args(["replay", FIXTURE, "--stage", "attn.layout#1"])
        .args(["--candidate", &probe, "--reference", &probe, "--json"])
        .output_within_limit();
    let json: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{json}");
    assert_eq!(json["verdict"], "pass", "{}", json["reason"]);
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(repo(FIXTURE).join("rank0/match1-occ1/manifest.json")).unwrap(),
    )
    .unwrap();
    let entry = manifest["input_sets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["stage"] == "attn.layout" && e["occurrence"] == 1)
        .unwrap();
    let captured = &entry["args"];
    let tensors: Vec<&str> = captured
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, d)| d["kind"] == "tensor")
        .map(|(n, _)| n.as_str())
        .collect();
    // (serde_json's map sorts the names)
    assert_eq!(
        tensors,
        ["h16", "k", "k_cache", "q", "sliced", "v_cache", "window"]
    );
    let call = |n: usize| -> Value {
        let path = format!("{}.{n}", seen.display());
        serde_json::from_slice(&std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
            .unwrap()
    };
    assert!(!Path::new(&format!("{}.5", seen.display())).exists());
    for (n, side) in ["candidate", "reference", "golden", "reference_native"]
        .iter()
        .enumerate()
    {
        let call = call(n + 1);
        let args = &call["args"];
        for name in &tensors {
            let d = &captured[*name];
            for key in ["shape", "stride", "is_contiguous"] {
                assert_eq!(args[*name][key], d[key], "{side} {name} {key}");
            }
            if matches!(*side, "candidate" | "reference_native") {
                assert_eq!(args[*name]["dtype"], d["dtype"], "{side} {name}");
            }
        }
        // Exactly the captured sharing, with the captured distance between the views.
        assert_eq!(
            call["shared"],
            serde_json::json!([["k_cache", "v_cache"], ["sliced", "window"]]),
            "{side}"
        );
        for (a, b) in [("sliced", "window"), ("k_cache", "v_cache")] {
            let offset = |v: &Value, name: &str| v[name]["storage_offset"].as_i64().unwrap();
            let distance = offset(captured, b) - offset(captured, a);
            assert_eq!(
                offset(args, b) - offset(args, a),
                distance,
                "{side} {a} {b}"
            );
            let ptr = |name: &str| args[name]["data_ptr"].as_i64().unwrap();
            let size = match args[a]["dtype"].as_str() {
                Some("float64") => 8,
                _ => 4,
            };
            assert_eq!(ptr(b) - ptr(a), distance * size, "{side} {a} {b}");
        }
    }
    let first = call(1);
    assert_eq!(first["args"]["k"]["stride"], serde_json::json!([8, 32, 1]));
    assert_eq!(first["args"]["k"]["is_contiguous"], false);
    assert_eq!(first["args"]["h16"]["dtype"], "float16");
    // The judged document records the captured layout too.
    let described = |name: &str| {
        json["args"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(described("sliced")["storage_offset"], 20);
    assert_eq!(
        described("sliced")["shares_storage_with"],
        serde_json::json!(["window"])
    );
    assert_eq!(described("k")["stride"], serde_json::json!([8, 32, 1]));
    assert_eq!(
        json["op_recorded"],
        "tests/python/replay_candidates.py:layout_probe"
    );
}

#[test]
fn the_json_document_holds_the_verdict_metrics_sides_and_where_it_ran() {
    let Some(python) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    let run = replay(
        cache.path(),
        F16,
        "layers.0.rope#1",
        &candidate("rope_ok"),
        "builtin:rope_neox",
        &[],
    );
    let j = &run.json;
    assert_eq!(j["standard"], serde_json::json!({"name": "msprobe"}));
    assert_eq!(j["stage"], "layers.0.rope#1");
    assert_eq!(j["rank"], 0);
    assert_eq!(j["warnings"], serde_json::json!([]));
    let roles: Vec<&str> = j["sides"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["candidate", "reference", "golden", "reference_native"]
    );
    assert_eq!(j["run"]["python"], python);
    assert_eq!(j["run"]["python_chosen_by"], "$DUMPVIEW_PYTHON");
    assert_eq!(j["run"]["host"], Value::Null);
    let out_dir = PathBuf::from(j["run"]["out_dir"].as_str().unwrap());
    // A fresh directory in dumpview's replay cache, never inside the dump.
    assert!(
        out_dir.starts_with(cache.path().join("dumpview/replays")),
        "{}",
        out_dir.display()
    );
    for file in [
        "candidate.pt",
        "reference.pt",
        "golden.pt",
        "reference_native.pt",
        "replay.json",
        "verdict.json",
    ] {
        assert!(out_dir.join(file).is_file(), "{file}");
    }
    let names: Vec<&str> = j["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["out.0", "out.1"]);
    let o = &j["outputs"][0];
    assert_eq!(
        (o["candidate_dtype"].as_str(), o["reference_dtype"].as_str()),
        (Some("float16"), Some("float32"))
    );
    assert_eq!(o["shape"], serde_json::json!([12, 4, 64]));
    for key in [
        "max_abs_diff",
        "max_abs_diff_at",
        "cosine",
        "rel_l2",
        "histogram",
        "max_ulp",
        "first_mismatch",
    ] {
        assert!(
            o["metrics"].get(key).is_some(),
            "metrics.{key}: {}",
            o["metrics"]
        );
    }
    assert_eq!(o["metrics"]["ulp_dtype"], "float16");
    let m = &o["msprobe"];
    assert_eq!(
        m["eps"].as_f64(),
        Some(2f64.powi(-23)),
        "float32's eps: the reference's array"
    );
    assert_eq!(m["computed_in"], "float32");
    assert_eq!(
        m["small_values"]["threshold"].as_f64(),
        Some(2f64.powi(-10))
    );
    assert_eq!(m["ulp"]["mantissa_bits"], 10);
    // The saved verdict is the document itself.
    let saved: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("verdict.json")).unwrap()).unwrap();
    assert_eq!(saved["verdict"], j["verdict"]);
    assert_eq!(saved["outputs"], j["outputs"]);
}

#[test]
fn exit_statuses_and_usage_errors() {
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    let c = candidate("rms_norm_ok");
    let base = [
        F32,
        "--stage",
        "layers.0.input_norm#1",
        "--candidate",
        c.as_str(),
        "--reference",
        "builtin:rms_norm",
    ];
    let usage = |extra: &[&str], needle: &str| {
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(extra);
        let run = replay_json(cache.path(), &args);
        assert_eq!(run.code, 2, "{extra:?}: {}", run.stderr);
        let error = run.json["error"].as_str().unwrap_or_default().to_string();
        assert!(error.contains(needle), "{extra:?}: {error}");
    };
    usage(
        &["--standard", "msprobe", "--atol", "1e-3"],
        "belong to --standard allclose",
    );
    usage(
        &["--standard", "allclose", "--atol", "1e-3"],
        "needs explicit --atol and --rtol",
    );
    usage(
        &["--python", "/no/such/python3"],
        "/no/such/python3: not found",
    );
    usage(&["--arg", "eps"], "expected NAME=VALUE");
    // replay_op.py's own input errors, with its message.
    let run = replay_json(
        cache.path(),
        &[
            F32,
            "--stage",
            "layers.9.nothing",
            "--candidate",
            &c,
            "--reference",
            "builtin:rms_norm",
        ],
    );
    assert_eq!(run.code, 2);
    assert!(
        run.json["error"]
            .as_str()
            .unwrap()
            .contains("layers.9.nothing"),
        "{}",
        run.json
    );
    // Never over evidence: a non-empty --out is refused before anything runs.
    let full = tempfile::tempdir().unwrap();
    std::fs::write(full.path().join("keep.txt"), "evidence").unwrap();
    usage(
        &["--out", full.path().to_str().unwrap()],
        "never overwrites evidence",
    );
    assert_eq!(
        std::fs::read_to_string(full.path().join("keep.txt")).unwrap(),
        "evidence"
    );
    // clap's own usage errors exit 2 as well.
    let out = dumpview(cache.path())
        .args(["replay", F32, "--candidate", &c])
        .output_within_limit();
    assert_eq!(out.status.code(), Some(2));
    // A Python without torch is named.
    let fake = tempfile::tempdir().unwrap();
    let no_torch = fake.path().join("python3");
    std::fs::write(
        &no_torch,
        "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&no_torch, std::fs::Permissions::from_mode(0o755)).unwrap();
    usage(
        &["--python", no_torch.to_str().unwrap()],
        "cannot import torch",
    );
    // Without --python or $DUMPVIEW_PYTHON: the first python3/python on PATH that imports
    // torch, said in the document; none there is an error naming what was tried.
    let venv_bin = Path::new(python().unwrap()).parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}:/usr/bin:/bin",
        fake.path().display(),
        venv_bin.display()
    );
    let out = dumpview(cache.path())
        .env_remove("DUMPVIEW_PYTHON")
        .env_remove("VIRTUAL_ENV")
        .env("PATH", &path)
        .arg("replay")
        .args(base)
        .arg("--json")
        .output_within_limit();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["run"]["python_chosen_by"], "the first python3/python on PATH that imports torch",
        "{json}"
    );
    assert!(
        json["run"]["python"]
            .as_str()
            .unwrap()
            .starts_with(&venv_bin.display().to_string())
    );
    let out = dumpview(cache.path())
        .env_remove("DUMPVIEW_PYTHON")
        .env_remove("VIRTUAL_ENV")
        .env("PATH", fake.path())
        .arg("replay")
        .args(base)
        .output_within_limit();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no Python on PATH imports torch")
            && stderr.contains(&no_torch.display().to_string()),
        "{stderr}"
    );
}

#[test]
fn the_list_names_every_input_set() {
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    let out = dumpview(cache.path())
        .args(["replay", F16, "--list"])
        .output_within_limit();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("layers.0.input_norm#1") && text.contains("layers.0.rope#1"),
        "{text}"
    );
    let out = dumpview(cache.path())
        .args(["replay", F16, "--list", "--json"])
        .output_within_limit();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let keys: Vec<&str> = json["windows"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|w| w["input_sets"].as_array().unwrap())
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["layers.0.input_norm#1", "layers.0.rope#1"], "{json}");
    assert_eq!(json["warnings"], serde_json::json!([]), "{json}");
}

#[test]
fn the_report_lists_replays_in_markdown_and_json() {
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    let good = replay(
        cache.path(),
        F32,
        "layers.0.rope#1",
        &candidate("rope_ok"),
        "builtin:rope_neox",
        &["--standard", "dynamo"],
    );
    let bad = replay(
        cache.path(),
        F32,
        "layers.0.input_norm#1",
        &candidate("rms_norm_eps_after"),
        "builtin:rms_norm",
        &[],
    );
    let good_dir = good.json["run"]["out_dir"].as_str().unwrap().to_string();
    let bad_dir = bad.json["run"]["out_dir"].as_str().unwrap().to_string();
    let missing = cache.path().join("no-such-replay");
    let report = |json: bool| {
        let mut command = dumpview(cache.path());
        command
            .args([
                "report", F32, "--replay", &good_dir, "--replay", &bad_dir, "--replay",
            ])
            .arg(&missing);
        if json {
            command.arg("--json");
        }
        command.output_within_limit()
    };
    let out = report(false);
    // An error verdict is a finding.
    assert_eq!(out.status.code(), Some(1));
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(md.contains("## Replays"), "{md}");
    assert!(md.contains("### `layers.0.rope#1`: pass (dynamo)"), "{md}");
    assert!(
        md.contains("### `layers.0.input_norm#1`: error (msprobe)"),
        "{md}"
    );
    assert!(md.contains("first mismatch at [0, 0] (flat 0)"), "{md}");
    assert!(md.contains(&format!("- evidence: `{bad_dir}`")), "{md}");
    assert!(
        md.contains("not judged") && md.contains("replay.json: not found"),
        "{md}"
    );
    let out = report(true);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let replays = json["replays"].as_array().unwrap();
    assert_eq!(replays.len(), 3);
    assert_eq!(replays[0]["replay"]["verdict"], "pass");
    assert_eq!(replays[0]["replay"]["standard"]["name"], "dynamo");
    assert_eq!(replays[1]["replay"]["verdict"], "error");
    assert_eq!(
        replays[1]["replay"]["outputs"][0]["metrics"]["first_mismatch"]["index"],
        0
    );
    assert!(replays[2]["error"].as_str().unwrap().contains("not found"));
    let evidence = json["evidence"].to_string();
    assert!(
        evidence.contains(&format!("{bad_dir}/candidate.pt")),
        "{evidence}"
    );
    // Without --replay the report has no such section or key.
    let out = dumpview(cache.path())
        .args(["report", F32, "--json"])
        .output_within_limit();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(json.get("replays").is_none());
}

/// Processes other than dumpview itself whose command line mentions `needle` (not
/// zombies): the Python running a candidate from the candidates' directory.
fn processes(needle: &str) -> Vec<String> {
    support::sshd::processes_mentioning(needle)
        .into_iter()
        .filter(|p| !p.contains(support::run::BIN))
        .collect()
}

/// Waits until `check` holds, up to `limit`.
fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    check()
}

/// A sleeping candidate's replay, started in the background; returns the child once its
/// Python runs (it mentions `name`, the candidate's name).
fn start_sleeper(cache: &Path, dump: &str, name: &str, extra: &[String]) -> std::process::Child {
    let child = dumpview(cache)
        .args([
            "replay",
            dump,
            "--stage",
            "layers.0.input_norm#1",
            "--candidate",
        ])
        .arg(sleeper(name))
        .args(["--reference", "builtin:rms_norm"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let needle = sleeper(name);
    assert!(
        eventually(Duration::from_secs(60), || !processes(&needle).is_empty()),
        "the sleeping candidate never started"
    );
    child
}

#[test]
fn a_cancel_kills_the_python_and_removes_what_it_started() {
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    let out = cache.path().join("out");
    let child = start_sleeper(
        cache.path(),
        F32,
        "sleeps_here",
        &["--out".into(), out.display().to_string()],
    );
    // Give replay_op.py the time to reach the candidate (it sleeps inside it).
    let pid = child.id() as i32;
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let result = child.wait_with_output().unwrap();
    assert_eq!(result.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&result.stderr).contains("cancelled"));
    let dir = sleeper("sleeps_here");
    assert!(
        eventually(Duration::from_secs(5), || processes(&dir).is_empty()),
        "left running: {:?}",
        processes(&dir)
    );
    // The incomplete outputs of a cancelled run are gone; the private script too.
    assert!(!out.exists());
}

fn remote_args(server: &Sshd) -> Vec<String> {
    vec![
        "--ssh-command".into(),
        server.ssh_command(),
        "--python".into(),
        python().unwrap().to_string(),
    ]
}

/// Files and directories under `dir` (the remote login's HOME and TMPDIR).
fn left_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A remote replay without --python tries the interpreter the capture recorded before the
/// host's python3 (issue 31, item 2): here python3 has no torch and the recorded one (the
/// venv, an absolute path) has, so the replay runs and says which it used.
#[test]
fn a_remote_replay_runs_under_the_interpreter_the_capture_recorded() {
    let Some(venv) = python() else { return };
    let Some(server) = Sshd::start() else { return };
    let venv = std::path::absolute(venv).unwrap();
    let work = tempfile::tempdir().unwrap();
    let dump = work.path().join("a");
    support::copy_tree(&repo(F32), &dump);
    let manifest = dump.join("rank0/match1-occ1/manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let recorded = serde_json::to_string(venv.to_str().unwrap()).unwrap();
    let edited = text.replace(
        "\"executable\": \".venv/bin/python\"",
        &format!("\"executable\": {recorded}"),
    );
    assert_ne!(edited, text, "the example records .venv/bin/python");
    std::fs::write(&manifest, edited).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = dumpview(cache.path())
        .arg("replay")
        .arg(server.url(&dump))
        .args([
            "--stage",
            "layers.0.input_norm#1",
            "--candidate",
            "builtin:rms_norm",
            "--reference",
            "builtin:rms_norm",
            "--ssh-command",
            &server.ssh_command(),
            "--json",
        ])
        .output_within_limit();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "using the interpreter the capture recorded (run.executable): {}",
            venv.display()
        )),
        "{stderr}"
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["verdict"], "pass", "{json}");
}

/// A candidate that leaves a process running, holding its stderr, does not hold the ssh
/// session open: the replay ends with its verdict long before the leftover would (issue 31,
/// item 5; the job script relays stderr through a FIFO it closes).
#[test]
fn a_process_a_remote_candidate_leaves_running_does_not_hold_the_session() {
    let Some(_) = python() else { return };
    let Some(server) = Sshd::start() else { return };
    let cache = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = vec![
        server.url(&repo(F32)),
        "--stage".into(),
        "layers.0.input_norm#1".into(),
        "--candidate".into(),
        candidate("rms_norm_leaves_a_child"),
        "--reference".into(),
        "builtin:rms_norm".into(),
    ];
    args.extend(remote_args(&server));
    let started = std::time::Instant::now();
    let out = dumpview(cache.path())
        .arg("replay")
        .args(&args)
        .arg("--json")
        .output_within_limit();
    // The leftover sleeps 120 s: ending well before it means the session was not held.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(90),
        "the replay waited for the candidate's leftover process"
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["verdict"], "pass", "{json}");
    let _ = std::process::Command::new("pkill")
        .args(["-f", "^sleep 120.0042$"])
        .status();
}

#[test]
fn a_remote_replay_gives_the_local_verdict_and_leaves_nothing_behind() {
    let Some(_) = python() else { return };
    let Some(server) = Sshd::start() else { return };
    let cache = tempfile::tempdir().unwrap();
    for (dump, stage, cand, reference) in [
        (
            F32,
            "layers.0.input_norm#1",
            "rms_norm_eps_after",
            "builtin:rms_norm",
        ),
        (F16, "layers.0.rope#1", "rope_ok", "builtin:rope_neox"),
    ] {
        let local = replay(cache.path(), dump, stage, &candidate(cand), reference, &[]);
        let source = server.url(&repo(dump));
        let mut args: Vec<String> = vec![
            source.clone(),
            "--stage".into(),
            stage.into(),
            "--candidate".into(),
            candidate(cand),
            "--reference".into(),
            reference.into(),
        ];
        args.extend(remote_args(&server));
        let remote = replay_json(
            cache.path(),
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        assert_eq!(remote.code, local.code, "{}", remote.stderr);
        assert_eq!(remote.json["verdict"], local.json["verdict"]);
        assert_eq!(
            remote.json["outputs"], local.json["outputs"],
            "{dump} {stage}"
        );
        assert_eq!(
            remote.json["run"]["host"],
            format!("127.0.0.1:{}", server.port)
        );
        // replay_op.py's log came back line by line.
        assert!(remote.stderr.contains("replay_op"), "{}", remote.stderr);
        assert!(
            PathBuf::from(remote.json["run"]["out_dir"].as_str().unwrap())
                .join("candidate.pt")
                .is_file()
        );
        assert_eq!(
            left_in(&server.home()),
            Vec::<String>::new(),
            "left on the remote side"
        );
    }
    // --list over ssh.
    let out = dumpview(cache.path())
        .args(["replay", &server.url(&repo(F16)), "--list"])
        .args(remote_args(&server))
        .output_within_limit();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("layers.0.rope#1"));
    // replay_op.py's input error on the remote side: exit 2 with its message.
    let out = dumpview(cache.path())
        .args([
            "replay",
            &server.url(&repo(F16)),
            "--stage",
            "nope#3",
            "--candidate",
            "builtin:rms_norm",
            "--reference",
            "builtin:rms_norm",
        ])
        .args(remote_args(&server))
        .output_within_limit();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
    // A remote interpreter that is not there.
    let out = dumpview(cache.path())
        .args([
            "replay",
            &server.url(&repo(F16)),
            "--stage",
            "layers.0.rope",
            "--candidate",
            "builtin:rope_neox",
            "--reference",
            "builtin:rope_neox",
        ])
        .args([
            "--ssh-command",
            &server.ssh_command(),
            "--python",
            "python-nowhere",
        ])
        .output_within_limit();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("python-nowhere: not found on 127.0.0.1"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(left_in(&server.home()), Vec::<String>::new());
}

#[test]
fn a_cancelled_or_killed_remote_replay_leaves_nothing_behind() {
    let Some(_) = python() else { return };
    let Some(server) = Sshd::start() else { return };
    let cache = tempfile::tempdir().unwrap();
    let source = server.url(&repo(F32));
    let dir = sleeper("sleeps_there");
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        let child = start_sleeper(cache.path(), &source, "sleeps_there", &remote_args(&server));
        assert!(
            !left_in(&server.home()).is_empty(),
            "the remote temporary directory exists while it runs"
        );
        // SAFETY: signalling our own child.
        unsafe {
            libc::kill(child.id() as i32, signal);
        }
        let result = child.wait_with_output().unwrap();
        if signal == libc::SIGTERM {
            assert_eq!(result.status.code(), Some(2));
            assert!(String::from_utf8_lossy(&result.stderr).contains("cancelled"));
        }
        assert!(
            eventually(Duration::from_secs(15), || processes(&dir).is_empty()
                && left_in(&server.home()).is_empty()),
            "after signal {signal}: processes {:?}, remote files {:?}",
            processes(&dir),
            left_in(&server.home())
        );
    }
}

#[test]
fn msprobe_and_dynamo_verdicts_agree_with_their_sources_on_generated_outputs() {
    let Some(python) = python() else { return };
    let root = tempfile::tempdir().unwrap();
    let out = Command::new(python)
        .args(["-c", GENERATED])
        .arg(root.path())
        .output_within_limit();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cases: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(cases.len() > 250, "{} cases", cases.len());
    use dumpview::model::replay::{Standard, judge_dir};
    let mut seen = std::collections::BTreeMap::new();
    for case in &cases {
        let dir = Path::new(case["dir"].as_str().unwrap());
        for (standard, key) in [(Standard::Msprobe, "msprobe"), (Standard::Dynamo, "dynamo")] {
            let judged = judge_dir(dir, Some(standard)).unwrap();
            assert_eq!(
                judged.verdict.name(),
                case[key].as_str().unwrap(),
                "{key} on {}: {}",
                case["what"],
                judged.reason
            );
            *seen.entry((key, judged.verdict.name())).or_insert(0) += 1;
        }
    }
    // Every verdict of both rules was reached.
    for needed in [
        ("msprobe", "pass"),
        ("msprobe", "warning"),
        ("msprobe", "error"),
        ("dynamo", "pass"),
        ("dynamo", "error"),
    ] {
        assert!(
            seen.contains_key(&needed),
            "{needed:?} never reached: {seen:?}"
        );
    }
}

/// The time of one replay, locally and over loopback ssh, against the operator's own:
/// `cargo test --test replay -- --ignored --nocapture figures` (docs/replay.md).
#[test]
#[ignore = "figures for docs/replay.md"]
fn figures() {
    let Some(_) = python() else { return };
    let Some(server) = Sshd::start() else { return };
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
        for remote in [false, true] {
            let (mut wall, mut op) = (Vec::new(), Vec::new());
            for _ in 0..5 {
                let mut args: Vec<String> = vec![
                    if remote {
                        server.url(&repo(dump))
                    } else {
                        dump.to_string()
                    },
                    "--stage".into(),
                    stage.into(),
                    "--candidate".into(),
                    candidate(cand),
                    "--reference".into(),
                    reference.into(),
                ];
                if remote {
                    args.extend(remote_args(&server));
                }
                let started = Instant::now();
                let run = replay_json(
                    cache.path(),
                    &args.iter().map(String::as_str).collect::<Vec<_>>(),
                );
                let total = started.elapsed().as_secs_f64();
                assert_eq!(run.code, 0, "{}", run.stderr);
                wall.push(total);
                op.push(run.json["sides"][0]["duration_s"].as_f64().unwrap());
            }
            println!(
                "{stage} {}: dumpview replay {:.2} s (median of 5), the candidate itself {:.3} ms",
                if remote { "over loopback ssh" } else { "local" },
                median(wall),
                median(op) * 1e3
            );
        }
    }
}

/// The candidate side of a `--json` document.
fn side<'a>(run: &'a Run, role: &str) -> &'a Value {
    run.json["sides"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["role"] == role)
        .unwrap_or_else(|| panic!("no {role} side: {}", run.json["sides"]))
}

/// `replay F32 --stage layers.0.input_norm#1 --candidate CAND --reference REF --out OUT`.
fn replay_to(cache: &Path, cand: &str, reference: &str, out: &Path, extra: &[&str]) -> Run {
    let mut args = vec![
        F32,
        "--stage",
        "layers.0.input_norm#1",
        "--candidate",
        cand,
        "--reference",
        reference,
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    replay_json(cache, &args)
}

#[test]
fn a_candidate_that_kills_the_process_is_a_crash_naming_how_with_its_outputs_kept() {
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    // A segfault (what a faulting NPU kernel does to the process).
    let out = cache.path().join("segv");
    let cand = candidate("rms_norm_segfaults");
    let run = replay_to(cache.path(), &cand, "builtin:rms_norm", &out, &[]);
    assert_eq!(run.code, 1, "a crash is exit 1: {}", run.stderr);
    assert_eq!(verdict(&run), "crash");
    assert_eq!(
        run.json["reason"],
        format!("the candidate {cand} ended the process (killed by SIGSEGV (signal 11))")
    );
    let c = side(&run, "candidate");
    assert_eq!(c["status"], "crash");
    assert_eq!(c["exception"]["type"], "ProcessDied");
    let stack = c["exception"]["traceback"].as_str().unwrap();
    assert!(
        stack.contains("Fatal Python error: Segmentation fault")
            && stack.contains("in rms_norm_segfaults"),
        "the fault handler's stack names the candidate's line: {stack}"
    );
    // What was written so far is kept, with the record dumpview completed.
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["candidate.stdout", "replay.json", "verdict.json"],
        "{names:?}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("candidate.stdout")).unwrap(),
        "rms_norm_segfaults: x (12, 256) stride (256, 1)\n"
    );
    let record: Value =
        serde_json::from_slice(&std::fs::read(out.join("replay.json")).unwrap()).unwrap();
    assert_eq!(
        record["ended"],
        serde_json::json!({"side": "candidate", "how": "killed by SIGSEGV (signal 11)", "recorded_by": "dumpview"})
    );
    assert!(
        run.json["run"]["log"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l
                == "replay_op: candidate stdout: rms_norm_segfaults: x (12, 256) stride (256, 1)"),
        "{}",
        run.json["run"]["log"]
    );
    // Every reader sees a crash: the judge as `report --replay` and `cases analyze` call it.
    let judged = dumpview::model::replay::judge_dir(&out, None).unwrap();
    assert_eq!(
        judged.verdict,
        dumpview::model::replay::ReplayVerdict::Crash
    );

    // os._exit(3): no signal, an exit status.
    let out = cache.path().join("exit");
    let cand = candidate("rms_norm_exits");
    let run = replay_to(cache.path(), &cand, "builtin:rms_norm", &out, &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(verdict(&run), "crash");
    assert_eq!(
        run.json["reason"],
        format!("the candidate {cand} ended the process (exited with status 3)")
    );
    assert!(out.join("replay.json").is_file());
}

#[test]
fn a_reference_that_dies_leaves_nothing_to_judge_against_and_says_so() {
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    let out = cache.path().join("refdies");
    let reference = candidate("rms_norm_reference_segfaults");
    let run = replay_to(
        cache.path(),
        &candidate("rms_norm_exact"),
        &reference,
        &out,
        &[],
    );
    assert_eq!(run.code, 2, "no verdict: {}", run.stderr);
    let error = run.json["error"].as_str().unwrap();
    assert!(
        error.contains(&format!(
            "the reference died: its reference run ({reference}) ended the process (killed by SIGSEGV (signal 11)); nothing to judge the candidate against"
        )) && error.contains(&format!("the outputs are kept in {}", out.display())),
        "{error}"
    );
    assert!(out.join("candidate.pt").is_file() && out.join("replay.json").is_file());
    let record: Value =
        serde_json::from_slice(&std::fs::read(out.join("replay.json")).unwrap()).unwrap();
    assert_eq!(record["sides"]["candidate"]["status"], "ok");
    assert_eq!(record["sides"]["reference"]["status"], "crash");
    assert_eq!(record["ended"]["side"], "reference");
}

#[test]
fn what_a_candidate_prints_is_kept_and_logged() {
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    let out = cache.path().join("prints");
    let run = replay_to(
        cache.path(),
        &candidate("rms_norm_prints"),
        "builtin:rms_norm",
        &out,
        &[],
    );
    assert_eq!(verdict(&run), "pass", "{}", run.stderr);
    let printed = "rms_norm_prints: x (12, 256) float32\nrms_norm_prints: eps 1e-06\n";
    assert_eq!(
        std::fs::read_to_string(out.join("candidate.stdout")).unwrap(),
        printed
    );
    let log: Vec<&str> = run.json["run"]["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .filter(|l| l.contains("stdout:"))
        .collect();
    assert_eq!(
        log,
        [
            "replay_op: candidate stdout: rms_norm_prints: x (12, 256) float32",
            "replay_op: candidate stdout: rms_norm_prints: eps 1e-06"
        ]
    );
    assert!(
        run.stderr
            .contains("replay_op: candidate stdout: rms_norm_prints: eps 1e-06"),
        "the log streams to stderr: {}",
        run.stderr
    );
    assert!(
        !out.join("reference.stdout").exists(),
        "nothing printed, no file"
    );
}

#[test]
fn the_list_needs_no_torch() {
    // `--list` reads manifests and zip directories only: with no --python and no
    // $DUMPVIEW_PYTHON, the python3 on PATH lists though it cannot import torch.
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    let bin = cache.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let no_torch = support::python::python_without_torch(cache.path());
    std::fs::rename(&no_torch, bin.join("python3")).unwrap();
    let out = dumpview(cache.path())
        .env_remove("DUMPVIEW_PYTHON")
        .env("PATH", &bin)
        .args(["replay", F16, "--list"])
        .output_within_limit();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("layers.0.rope#1"), "{text}");
}

#[test]
fn the_list_needs_no_python_at_all() {
    // A local dump is listed by dumpview itself from the manifests and the file names under
    // inputs/: no python3/python on PATH, or an interpreter named that does not exist, and
    // the input sets of the layout fixture are still listed, as replay_op.py lists them.
    let cache = tempfile::tempdir().unwrap();
    let empty_bin = cache.path().join("bin");
    std::fs::create_dir(&empty_bin).unwrap();
    let nowhere = cache.path().join("no-such-python");
    for python in [None, Some(nowhere.as_path())] {
        let mut command = dumpview(cache.path());
        command
            .env_remove("DUMPVIEW_PYTHON")
            .env("PATH", &empty_bin);
        if let Some(python) = python {
            command.env("DUMPVIEW_PYTHON", python);
        }
        let out = command
            .args(["replay", "tests/fixtures/replay/dump", "--list"])
            .output_within_limit();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{python:?}: {stderr}");
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "tests/fixtures/replay/dump/rank0/match1-occ1/manifest.json  rank 0  label \"req-replay-fixture\"  match 1  occurrence 1",
            "{text}"
        );
        assert_eq!(
            lines[1],
            "  attn.layout#1  (stage captured 2 times)  op tests/python/replay_candidates.py:layout_probe",
            "{text}"
        );
        // The arguments in captured order, printed as replay_op.py printed them.
        assert_eq!(
            lines[3],
            "    k            tensor float32 [4, 2, 8] stride [8, 32, 1] offset 0 cpu storage 2 non-contiguous"
        );
        assert!(lines.contains(&"    eps          float 1e-05"), "{text}");
        assert!(
            lines.contains(&"  attn.layout#2  (stage captured 2 times)"),
            "{text}"
        );
    }
    let out = dumpview(cache.path())
        .env_remove("DUMPVIEW_PYTHON")
        .env("PATH", &empty_bin)
        .args(["replay", "tests/fixtures/replay/dump", "--list", "--json"])
        .output_within_limit();
    assert_eq!(out.status.code(), Some(0));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["format"], "dumpview.replay.list");
    let set = &json["windows"][0]["input_sets"][0];
    let names: Vec<&str> = set["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "q", "k", "sliced", "window", "k_cache", "v_cache", "h16", "eps", "causal", "dims",
            "dtype"
        ]
    );
    assert_eq!(set["file_present"], true);
    assert_eq!(set["file_empty"], false);
    assert_eq!(json["warnings"], serde_json::json!([]));
}

#[test]
fn a_zero_byte_input_set_is_called_out_as_lost_evidence() {
    let cache = tempfile::tempdir().unwrap();
    let dump = cache.path().join("dump");
    let window = dump.join("rank0/match1-occ1");
    std::fs::create_dir_all(window.join("inputs")).unwrap();
    let fixture = repo("tests/fixtures/replay/dump/rank0/match1-occ1");
    std::fs::copy(fixture.join("manifest.json"), window.join("manifest.json")).unwrap();
    std::fs::copy(
        fixture.join("inputs/attn.layout#1.pt"),
        window.join("inputs/attn.layout#1.pt"),
    )
    .unwrap();
    // The second set's file is there and empty: its bytes never reached the disk.
    std::fs::write(window.join("inputs/attn.layout#2.pt"), b"").unwrap();
    let dump_arg = dump.display().to_string();
    let out = dumpview(cache.path())
        .args(["replay", &dump_arg, "--list"])
        .output_within_limit();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    let empty: Vec<&str> = text.lines().filter(|l| l.contains("EMPTY FILE")).collect();
    assert_eq!(
        empty,
        [
            "  attn.layout#2  (stage captured 2 times)  EMPTY FILE (0 bytes, the input set is lost): inputs/attn.layout#2.pt"
        ],
        "{text}"
    );
    assert!(
        stderr.contains("attn.layout#2") && stderr.contains("empty (0 bytes)"),
        "{stderr}"
    );
    let out = dumpview(cache.path())
        .args(["replay", &dump_arg, "--list", "--json"])
        .output_within_limit();
    assert_eq!(out.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sets = json["windows"][0]["input_sets"].as_array().unwrap();
    assert_eq!(sets[0]["file_empty"], false);
    assert_eq!(sets[1]["file_empty"], true);
    assert_eq!(sets[1]["file_present"], true);
    let warnings = json["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{json}");
    assert_eq!(warnings[0]["kind"], "lost_evidence");
    assert!(
        warnings[0]["file"]
            .as_str()
            .unwrap()
            .ends_with("inputs/attn.layout#2.pt")
    );
}

/// An interpreter at `path` that touches `marker` and runs the test's Python.
fn marking_python(path: &Path, marker: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let real = python().unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        format!(
            "#!/bin/sh\n: > '{}'\nexec '{real}' \"$@\"\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn the_interpreter_the_capture_recorded_runs_the_replay_when_it_is_there() {
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    let root = cache.path();
    let empty_bin = root.join("bin");
    std::fs::create_dir(&empty_bin).unwrap();
    let recorded = root.join("captured-env/bin/python");
    let venv = root.join("venv");
    let (recorded_ran, venv_ran) = (root.join("recorded-ran"), root.join("venv-ran"));
    marking_python(&recorded, &recorded_ran);
    marking_python(&venv.join("bin/python"), &venv_ran);
    let window = root.join("dump/rank0/match1-occ1");
    support::copy_tree(&repo(F32).join("rank0/match1-occ1"), &window);
    let record = |executable: &Path| {
        let manifest = window.join("manifest.json");
        let text = std::fs::read_to_string(repo(F32).join("rank0/match1-occ1/manifest.json"))
            .unwrap()
            .replace(
                "\"executable\": \".venv/bin/python\"",
                &format!("\"executable\": \"{}\"", executable.display()),
            );
        std::fs::write(manifest, text).unwrap();
    };
    let dump = root.join("dump").display().to_string();
    let replay = || {
        dumpview(root)
            .env_remove("DUMPVIEW_PYTHON")
            .env("VIRTUAL_ENV", &venv)
            .env("PATH", &empty_bin)
            .args([
                "replay",
                &dump,
                "--stage",
                "layers.0.input_norm#1",
                "--candidate",
                "builtin:rms_norm",
                "--reference",
                "builtin:rms_norm",
                "--json",
            ])
            .output_within_limit()
    };
    // The recorded interpreter is there: it runs the replay, said on stderr, before
    // $VIRTUAL_ENV's.
    record(&recorded);
    let out = replay();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "dumpview: using the interpreter the capture recorded (run.executable): {}",
            recorded.display()
        )),
        "{stderr}"
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["run"]["python"], recorded.display().to_string());
    assert_eq!(
        json["run"]["python_chosen_by"],
        "the interpreter the capture recorded (run.executable)"
    );
    assert!(recorded_ran.exists() && !venv_ran.exists());
    std::fs::remove_file(&recorded_ran).unwrap();
    // Not there on this host: said, and $VIRTUAL_ENV's python runs it.
    let gone = root.join("no-such-env/bin/python");
    record(&gone);
    let out = replay();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the interpreter the capture recorded (run.executable), {}, is not an executable file here",
            gone.display()
        )),
        "{stderr}"
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["run"]["python_chosen_by"], "$VIRTUAL_ENV");
    assert!(venv_ran.exists() && !recorded_ran.exists());
    // $DUMPVIEW_PYTHON comes first.
    record(&recorded);
    let out = dumpview(root)
        .env("PATH", &empty_bin)
        .args([
            "replay",
            &dump,
            "--stage",
            "layers.0.input_norm#1",
            "--candidate",
            "builtin:rms_norm",
            "--reference",
            "builtin:rms_norm",
            "--json",
        ])
        .output_within_limit();
    assert_eq!(out.status.code(), Some(0));
    assert!(!recorded_ran.exists());
}

#[test]
fn a_python_without_torch_is_one_clear_message_said_once() {
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    let no_torch = support::python::python_without_torch(cache.path());
    let out = dumpview(cache.path())
        .args([
            "replay",
            F32,
            "--stage",
            "layers.0.input_norm#1",
            "--candidate",
            "builtin:rms_norm",
            "--reference",
            "builtin:rms_norm",
            "--python",
            no_torch.to_str().unwrap(),
        ])
        .output_within_limit();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("Traceback"), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "dumpview: error: {} cannot import torch (ModuleNotFoundError: No module named 'torch'); give a Python that has it with --python or $DUMPVIEW_PYTHON",
            no_torch.display()
        )
    );
    assert!(
        !cache.path().join("dumpview/replays").exists()
            || std::fs::read_dir(cache.path().join("dumpview/replays"))
                .unwrap()
                .next()
                .is_none(),
        "no empty output directory is left"
    );
}

#[test]
fn script_directories_a_killed_dumpview_left_are_swept_at_the_next_replay() {
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let stale = [
        tmp.path().join(format!("dumpview-replay-{dead}-0")),
        tmp.path().join(format!("dumpview-cases-{dead}-3")),
    ];
    // This test's own process is alive: its directory is not a stale one.
    let live = tmp
        .path()
        .join(format!("dumpview-replay-{}-0", std::process::id()));
    for dir in stale.iter().chain([&live]) {
        std::fs::create_dir(dir).unwrap();
        std::fs::write(dir.join("replay_op.py"), "# left behind\n").unwrap();
    }
    // A replay that runs replay_op.py (`--list` runs no Python and makes no script directory).
    let out = dumpview(cache.path())
        .env("TMPDIR", tmp.path())
        .args([
            "replay",
            F32,
            "--stage",
            "layers.0.input_norm#1",
            "--candidate",
            "builtin:rms_norm",
            "--reference",
            "builtin:rms_norm",
        ])
        .output_within_limit();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let left: Vec<PathBuf> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        left,
        vec![live],
        "the stale ones and the run's own are gone"
    );
}

#[test]
fn a_candidate_that_kills_the_remote_python_is_a_crash_and_nothing_is_left_there() {
    let Some(_) = python() else { return };
    let Some(server) = Sshd::start() else { return };
    let cache = tempfile::tempdir().unwrap();
    let cand = candidate("rms_norm_segfaults");
    let mut args: Vec<String> = vec![
        server.url(&repo(F32)),
        "--stage".into(),
        "layers.0.input_norm#1".into(),
        "--candidate".into(),
        cand.clone(),
        "--reference".into(),
        "builtin:rms_norm".into(),
    ];
    args.extend(remote_args(&server));
    let run = replay_json(
        cache.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(verdict(&run), "crash");
    assert_eq!(
        run.json["reason"],
        format!("the candidate {cand} ended the process (killed by SIGSEGV (signal 11))")
    );
    let out = PathBuf::from(run.json["run"]["out_dir"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(out.join("candidate.stdout")).unwrap(),
        "rms_norm_segfaults: x (12, 256) stride (256, 1)\n",
        "what the remote candidate printed came back"
    );
    assert_eq!(
        left_in(&server.home()),
        Vec::<String>::new(),
        "left on the remote side"
    );
}

/// Issue 31, item 5: an infinity in the candidate's output makes msprobe's cosine NaN, which
/// msprobe counts as a pass; dumpview keeps the standard's verdict but says why it is not a
/// pass and exits 1.
#[test]
fn an_infinity_the_standard_passes_is_still_a_finding() {
    let Some(_) = python() else { return };
    let cache = tempfile::tempdir().unwrap();
    let run = replay(
        cache.path(),
        F32,
        "layers.0.input_norm#1",
        &candidate("rms_norm_one_inf"),
        "builtin:rms_norm",
        &["--standard", "msprobe"],
    );
    assert_eq!(run.json["nonfinite_pass"], true, "{}", run.json);
    assert_eq!(run.code, 1, "{}", run.json);
    let notes = run.json["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("the candidate holds 1 NaN/inf where the reference is finite")),
        "{notes:?}"
    );
}
