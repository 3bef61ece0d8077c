//! `dumpview replay --cross A B --stage S#N` (docs/replay.md "Cross-feeding") on input sets
//! the real probe (assets/dump_probe.py) captured with their outputs linked and saved
//! (`capture_inputs(..., outputs=...)`): each outcome from real runs of two operators written
//! here, the not-judged cases with their fixes, a stage one side lacks, and a cross run
//! whose B lives behind a real OpenSSH server (tests/support/sshd.rs), its uploaded input set
//! gone afterwards.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::deadline::OutputWithin;
use support::python::{python, ran};
use support::run::{json_of, with_python};
use support::sshd::Sshd;

/// The operators the captured runs call, written into each test's directory: an RMSNorm,
/// the same configured without its weight (an operator that differs everywhere), and one
/// that flushes to zero where |x| > 4 (differs only on inputs that hold such values).
const OPS: &str = r#"
import torch

def rms_norm(x, weight, eps):
    inv = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return x * inv * weight

def rms_norm_no_weight(x, weight, eps):
    inv = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return x * inv

def rms_norm_flushing(x, weight, eps):
    return torch.where(x.abs() > 4, torch.zeros_like(x), rms_norm(x, weight, eps))
"#;

/// One captured run: `op` (a function of [`OPS`]) on `x = randn(4, 16) * scale` under seed
/// `seed`, its input set `layers.0.norm#1` (with `_op` naming `op`) and its output captured
/// as the record `layers.0.norm#1`, linked to the set when `outputs`.
struct Run<'a> {
    seed: u64,
    scale: f64,
    op: &'a str,
    outputs: bool,
}

/// Captures `run` into `root/name` with the real probe; returns the dump directory.
fn capture(root: &Path, name: &str, run: &Run) -> PathBuf {
    let ops = root.join("ops.py");
    std::fs::write(&ops, OPS).unwrap();
    let dump = root.join(name);
    let script = format!(
        r#"
import importlib.util, sys
import torch
_spec = importlib.util.spec_from_file_location("dump_probe", {probe:?})
dp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dp)
_spec = importlib.util.spec_from_file_location("ops", {ops:?})
ops = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ops)
torch.manual_seed({seed})
x = torch.randn(4, 16) * {scale}
w = torch.rand(16) + 0.5
assert dp.arm("r") is True
linked = dict(outputs=("layers.0.norm",)) if {outputs} else {{}}
dp.capture_inputs("layers.0.norm", _op={op_spec:?}, x=x, weight=w, eps=1e-6, **linked)
dp.capture("layers.0.norm", ops.{op}(x, w, 1e-6))
dp.finish()
"#,
        probe = support::python::repo("assets/dump_probe.py")
            .display()
            .to_string(),
        ops = ops.display().to_string(),
        seed = run.seed,
        scale = run.scale,
        outputs = if run.outputs { "True" } else { "False" },
        op_spec = format!("{}:{}", ops.display(), run.op),
        op = run.op,
    );
    let out = ran(Command::new(python().unwrap())
        .arg("-c")
        .arg(script)
        .env("DUMP_PROBE", "1")
        .env("DUMP_PROBE_DIR", &dump)
        .env("DUMP_PROBE_KERNEL", "torch")
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap());
    assert_eq!(out.code, 0, "{}", out.stderr);
    dump
}

const NORM: Run = Run {
    seed: 0,
    scale: 1.0,
    op: "rms_norm",
    outputs: true,
};

/// `dumpview replay --cross A B --stage layers.0.norm#1 EXTRA --json`: exit status, the
/// document, stderr.
fn cross_json(root: &Path, a: &str, b: &str, extra: &[&str]) -> (i32, Value, String) {
    json_of(
        with_python(&root.join("cache"))
            .args(["replay", "--cross", a, b, "--stage", "layers.0.norm#1"])
            .args(extra)
            .arg("--json")
            .output_within_limit(),
    )
}

fn cross_text(root: &Path, a: &str, b: &str, extra: &[&str]) -> (i32, String, String) {
    let out = with_python(&root.join("cache"))
        .args(["replay", "--cross", a, b, "--stage", "layers.0.norm#1"])
        .args(extra)
        .output_within_limit();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// The reproduces field of both directions (B's operator on A's inputs first).
fn reproduces(json: &Value) -> Vec<Value> {
    json["directions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["reproduces"].clone())
        .collect()
}

#[test]
fn operators_that_differ_reproduce_neither_output() {
    let Some(_) = python() else { return };
    let root = tempfile::tempdir().unwrap();
    let a = capture(root.path(), "a", &NORM);
    let b = capture(
        root.path(),
        "b",
        &Run {
            seed: 1,
            op: "rms_norm_no_weight",
            ..NORM
        },
    );
    let (code, json, stderr) = cross_json(root.path(), s(&a), s(&b), &[]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(json["outcome"], "operator_differs", "{json:#}");
    assert_eq!(reproduces(&json), [false, false]);
    let first = &json["directions"][0];
    assert_eq!(
        (&first["operator_of"], &first["inputs_of"]),
        (&Value::from("B"), &Value::from("A"))
    );
    assert!(
        first["operator"]
            .as_str()
            .unwrap()
            .ends_with("ops.py:rms_norm_no_weight")
    );
    assert_eq!(first["operator_from"], "B's input set (op)");
    let judged = &first["against_saved"];
    assert_eq!(judged["verdict"], "error");
    assert_eq!(judged["sides"][1]["spec"], "A's saved output");
    assert!(
        judged["outputs"][0]["metrics"]["max_abs_diff"]
            .as_f64()
            .unwrap()
            > 0.01
    );
    assert!(
        json["caveat"]
            .as_str()
            .unwrap()
            .contains("does not establish a whole-model fix")
    );
    // Each direction's outputs are kept, with the cross document next to them.
    let out = PathBuf::from(first["out_dir"].as_str().unwrap());
    assert!(out.join("candidate.pt").is_file());
    assert!(out.parent().unwrap().join("cross.json").is_file());

    let (code, text, _) = cross_text(root.path(), s(&a), s(&b), &[]);
    assert_eq!(code, 1);
    assert!(text.contains("OUTCOME: OPERATOR DIFFERS"), "{text}");
    assert!(
        text.contains("B's operator on A's inputs: DOES NOT REPRODUCE A's output"),
        "{text}"
    );
    assert!(
        text.contains("does not establish a whole-model fix"),
        "{text}"
    );
}

#[test]
fn one_operator_on_different_inputs_reproduces_both_outputs() {
    let Some(_) = python() else { return };
    let root = tempfile::tempdir().unwrap();
    let a = capture(root.path(), "a", &NORM);
    let b = capture(root.path(), "b", &Run { seed: 1, ..NORM });
    // The two runs' outputs really differ: only the inputs made them.
    let saved = |dump: &Path| {
        std::fs::read(
            dump.join("rank0/match1-occ1/inputs/layers.0.norm#1.outputs/layers.0.norm#1.pt"),
        )
        .unwrap()
    };
    assert_ne!(saved(&a), saved(&b));
    let (code, json, stderr) = cross_json(
        root.path(),
        s(&a),
        s(&b),
        &["--reference", "builtin:rms_norm"],
    );
    assert_eq!(code, 0, "{stderr}\n{json:#}");
    assert_eq!(json["outcome"], "inputs_differ");
    assert_eq!(reproduces(&json), [true, true]);
    assert!(
        json["meaning"]
            .as_str()
            .unwrap()
            .contains("the difference comes from the inputs"),
        "{json:#}"
    );
    for direction in json["directions"].as_array().unwrap() {
        assert_eq!(direction["against_saved"]["verdict"], "pass");
        // The same computation as the run: bit for bit.
        assert_eq!(
            direction["against_saved"]["outputs"][0]["metrics"]["max_abs_diff"],
            0.0
        );
        assert_eq!(direction["against_reference"]["verdict"], "pass");
        assert_eq!(
            direction["against_reference"]["sides"][1]["spec"],
            "builtin:rms_norm"
        );
    }
    let (code, text, _) = cross_text(root.path(), s(&a), s(&b), &["--standard", "dynamo"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("OUTCOME: INPUTS DIFFER"), "{text}");
    assert!(text.contains("look upstream"), "{text}");
    assert!(text.contains("standard dynamo"), "{text}");
}

#[test]
fn an_operator_that_differs_on_some_inputs_only_is_data_dependent() {
    let Some(_) = python() else { return };
    let root = tempfile::tempdir().unwrap();
    // A: small inputs (|x| < 4 throughout: the flush never fires); B flushes and its inputs
    // are large.
    let a = capture(root.path(), "a", &Run { scale: 0.5, ..NORM });
    let b = capture(
        root.path(),
        "b",
        &Run {
            seed: 1,
            scale: 10.0,
            op: "rms_norm_flushing",
            ..NORM
        },
    );
    let (code, json, stderr) = cross_json(root.path(), s(&a), s(&b), &[]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(json["outcome"], "data_dependent", "{json:#}");
    assert_eq!(reproduces(&json), [true, false]);
    let meaning = json["meaning"].as_str().unwrap();
    assert!(
        meaning.contains("agree on A's inputs and differ on B's"),
        "{meaning}"
    );
}

#[test]
fn a_side_without_saved_outputs_is_not_judged_and_says_to_add_them() {
    let Some(_) = python() else { return };
    let root = tempfile::tempdir().unwrap();
    let a = capture(root.path(), "a", &NORM);
    let b = capture(
        root.path(),
        "b",
        &Run {
            seed: 1,
            outputs: false,
            ..NORM
        },
    );
    let (code, json, stderr) = cross_json(root.path(), s(&a), s(&b), &[]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(json["outcome"], "not_judged");
    // B's operator on A's inputs is judged; A's on B's has nothing to be judged against.
    assert_eq!(reproduces(&json), [Value::from(true), Value::Null]);
    let why = &json["directions"][1]["not_judged"];
    assert!(
        why["why"]
            .as_str()
            .unwrap()
            .contains("B's input set layers.0.norm#1 links no outputs"),
        "{why:#}"
    );
    assert!(
        why["fix"]
            .as_str()
            .unwrap()
            .contains("capture_inputs(\"layers.0.norm\""),
        "{why:#}"
    );
    assert!(
        why["fix"].as_str().unwrap().contains("outputs=("),
        "{why:#}"
    );
    let (code, text, _) = cross_text(root.path(), s(&a), s(&b), &[]);
    assert_eq!(code, 1);
    assert!(text.contains("OUTCOME: NOT JUDGED"), "{text}");
    assert!(text.contains("fix: capture B again"), "{text}");

    // An operator that cannot be imported: not judged, with why and the fix.
    let (code, json, _) = cross_json(
        root.path(),
        s(&a),
        s(&a),
        &["--candidate", "no_such_module_xyz:op"],
    );
    assert_eq!(code, 1);
    assert_eq!(json["outcome"], "not_judged");
    let why = &json["directions"][0]["not_judged"];
    assert!(
        why["why"]
            .as_str()
            .unwrap()
            .contains("No module named 'no_such_module_xyz'"),
        "{why:#}"
    );
    assert!(
        why["fix"].as_str().unwrap().contains("importable"),
        "{why:#}"
    );
}

#[test]
fn a_stage_one_side_lacks_is_an_input_error_listing_what_it_holds() {
    let Some(_) = python() else { return };
    let root = tempfile::tempdir().unwrap();
    let a = capture(root.path(), "a", &NORM);
    let out = with_python(&root.path().join("cache"))
        .args([
            "replay",
            "--cross",
            s(&a),
            s(&a),
            "--stage",
            "layers.9.norm#1",
        ])
        .output_within_limit();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "A ({}): no input set layers.9.norm#1; it holds layers.0.norm#1",
            s(&a)
        )),
        "{stderr}"
    );
}

#[test]
fn a_remote_side_runs_its_operator_there_and_its_uploaded_set_is_removed() {
    let Some(_) = python() else { return };
    let Some(server) = Sshd::start() else { return };
    let root = tempfile::tempdir().unwrap();
    let a = capture(root.path(), "a", &NORM);
    let b = capture(
        root.path(),
        "b",
        &Run {
            seed: 1,
            op: "rms_norm_no_weight",
            ..NORM
        },
    );
    let (local_code, local, _) = cross_json(root.path(), s(&a), s(&b), &[]);
    let remote_b = server.url(&b);
    let (code, json, stderr) = cross_json(
        root.path(),
        s(&a),
        &remote_b,
        &[
            "--ssh-command",
            &server.ssh_command(),
            "--python",
            python().unwrap(),
        ],
    );
    assert_eq!(code, local_code, "{stderr}\n{json:#}");
    assert_eq!(json["outcome"], local["outcome"]);
    assert_eq!(reproduces(&json), reproduces(&local));
    let host = format!("127.0.0.1:{}", server.port);
    // B's operator ran on B's host, on A's set uploaded into that replay's directory.
    let b_on_a = &json["directions"][0];
    assert_eq!(b_on_a["host"], host.as_str(), "{json:#}");
    let input_file = b_on_a["against_saved"]["dump"].as_str().unwrap();
    assert!(input_file.contains("/in/match1-occ1"), "{input_file}");
    // A's operator ran here, on B's set copied into a private directory here.
    assert_eq!(json["directions"][1]["host"], Value::Null);
    for (i, direction) in json["directions"].as_array().unwrap().iter().enumerate() {
        assert_eq!(
            direction["against_saved"]["outputs"][0]["metrics"]["max_abs_diff"],
            local["directions"][i]["against_saved"]["outputs"][0]["metrics"]["max_abs_diff"]
        );
    }
    // Nothing is left on the remote side: the uploaded set went with the replay's directory.
    assert_eq!(
        support::entries_under(&server.home()),
        Vec::<PathBuf>::new(),
        "left on the remote side"
    );
    // Nor here: the private copy of B's set that A's operator read is gone.
    let copy = json["directions"][1]["against_saved"]["dump"]
        .as_str()
        .unwrap();
    assert!(copy.contains("dumpview-replay-"), "{copy}");
    assert!(!Path::new(copy).exists(), "{copy} left");
}

/// The committed pairs of tests/fixtures/diagnosis (examples/diagnosis_pairs.py): their
/// verdicts come from the outputs their runs saved, not from anything recomputed here.
#[test]
fn the_committed_diagnosis_pairs_give_their_outcomes() {
    let Some(_) = python() else { return };
    let fixtures = support::python::repo("tests/fixtures/diagnosis");
    if !fixtures.join("op_differs/a").is_dir() || !fixtures.join("inputs_differ/a").is_dir() {
        eprintln!("skipped: tests/fixtures/diagnosis/{{op_differs,inputs_differ}} are not here");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    for (pair, code, outcome) in [
        ("op_differs", 1, "operator_differs"),
        ("inputs_differ", 0, "inputs_differ"),
    ] {
        let (a, b) = (
            format!("tests/fixtures/diagnosis/{pair}/a"),
            format!("tests/fixtures/diagnosis/{pair}/b"),
        );
        let (got, json, stderr) = json_of(
            with_python(&root.path().join("cache"))
                .args(["replay", "--cross", &a, &b, "--stage", "norm#1", "--json"])
                .output_within_limit(),
        );
        assert_eq!(got, code, "{pair}: {stderr}\n{json:#}");
        assert_eq!(json["outcome"], outcome, "{pair}");
        assert_eq!(json["stage"], "norm#1");
    }
}

/// Runs `script` (after loading the probe as `dp`) with the real probe capturing into
/// `root/name`, started in `root` (the run's `cwd`, where its own modules are); returns the
/// dump directory.
fn capture_script(root: &Path, name: &str, script: &str) -> PathBuf {
    let dump = root.join(name);
    let script = format!(
        r#"
import importlib.util, sys
import torch
_spec = importlib.util.spec_from_file_location("dump_probe", {probe:?})
dp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dp)
{script}
"#,
        probe = support::python::repo("assets/dump_probe.py")
            .display()
            .to_string(),
    );
    let out = ran(Command::new(python().unwrap())
        .arg("-c")
        .arg(script)
        .current_dir(root)
        .env("DUMP_PROBE", "1")
        .env("DUMP_PROBE_DIR", &dump)
        .env("DUMP_PROBE_KERNEL", "torch")
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap());
    assert_eq!(out.code, 0, "{}", out.stderr);
    dump
}

/// `dumpview replay --cross A B --stage STAGE EXTRA --json`.
fn cross_stage_json(
    root: &Path,
    a: &str,
    b: &str,
    stage: &str,
    extra: &[&str],
) -> (i32, Value, String) {
    json_of(
        with_python(&root.join("cache"))
            .args(["replay", "--cross", a, b, "--stage", stage])
            .args(extra)
            .arg("--json")
            .output_within_limit(),
    )
}

/// A module whose class `hook(model, input_sets=True)` records as the sets' operator
/// (`hkmod.Norm`), and a function wrapping it that takes the set's inputs.
const HKMOD: &str = r#"
import torch

class Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, 16))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * self.weight

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = Norm()

    def forward(self, x):
        return self.norm(x) * 2

def norm(x):
    with torch.no_grad():
        return Norm()(x)
"#;

#[test]
fn a_hooked_modules_set_is_not_judged_and_says_to_give_a_function() {
    let Some(_) = python() else { return };
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("hkmod.py"), HKMOD).unwrap();
    let script = r#"
import hkmod
torch.manual_seed(0)
model = hkmod.Model()
dp.hook(model, stages="norm", input_sets=True)
assert dp.arm("r") is True
with torch.no_grad():
    model(torch.randn(4, 16))
dp.finish()
"#;
    let a = capture_script(root.path(), "a", script);
    let b = capture_script(root.path(), "b", script);
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(a.join("rank0/match1-occ1/manifest.json")).unwrap())
            .unwrap();
    assert_eq!(
        manifest["input_sets"][0]["op"], "hkmod.Norm",
        "{manifest:#}"
    );

    // Two identical runs: no operator differs, but none can be rebuilt either.
    let (code, json, stderr) = cross_stage_json(root.path(), s(&a), s(&b), "norm#1", &[]);
    assert_eq!(code, 1, "{stderr}\n{json:#}");
    assert_eq!(json["outcome"], "not_judged", "{json:#}");
    assert_eq!(reproduces(&json), [Value::Null, Value::Null]);
    for direction in json["directions"].as_array().unwrap() {
        let why = direction["not_judged"]["why"].as_str().unwrap();
        assert!(why.contains("hkmod.Norm is a module class"), "{why}");
        assert!(
            why.contains("cannot rebuild the module with its weights"),
            "{why}"
        );
        // Nothing ran: the class is never constructed with the inputs.
        assert_eq!(direction["against_saved"], Value::Null);
    }
    let fix_b = json["directions"][0]["not_judged"]["fix"].as_str().unwrap();
    assert!(fix_b.starts_with("give --candidate a function"), "{fix_b}");
    let fix_a = json["directions"][1]["not_judged"]["fix"].as_str().unwrap();
    assert!(fix_a.contains("_op=\"file.py:function\""), "{fix_a}");

    // A function that takes the inputs, as --candidate, runs in B's place.
    let (code, json, stderr) = cross_stage_json(
        root.path(),
        s(&a),
        s(&b),
        "norm#1",
        &[
            "--candidate",
            &format!("{}:norm", root.path().join("hkmod.py").display()),
        ],
    );
    assert_eq!(code, 1, "{stderr}\n{json:#}");
    assert_eq!(
        reproduces(&json),
        [Value::from(true), Value::Null],
        "{json:#}"
    );
    assert_eq!(json["directions"][0]["operator_from"], "--candidate");
}

#[test]
fn a_dotted_operator_of_a_module_in_the_runs_working_directory_is_imported() {
    let Some(_) = python() else { return };
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("crossops_in_cwd.py"), OPS).unwrap();
    let script = |seed: u32| {
        format!(
            r#"
import crossops_in_cwd
torch.manual_seed({seed})
x = torch.randn(4, 16)
w = torch.rand(16) + 0.5
assert dp.arm("r") is True
dp.capture_inputs("layers.0.norm", _op=crossops_in_cwd.rms_norm, x=x, weight=w, eps=1e-6,
                  outputs=("layers.0.norm",))
dp.capture("layers.0.norm", crossops_in_cwd.rms_norm(x, w, 1e-6))
dp.finish()
"#
        )
    };
    let a = capture_script(root.path(), "a", &script(0));
    let b = capture_script(root.path(), "b", &script(1));
    // dumpview runs in the repository, not where the runs ran.
    let (code, json, stderr) = cross_json(root.path(), s(&a), s(&b), &[]);
    assert_eq!(code, 0, "{stderr}\n{json:#}");
    assert_eq!(
        json["directions"][0]["operator"],
        "crossops_in_cwd.rms_norm"
    );
    assert_eq!(reproduces(&json), [true, true], "{json:#}");
    assert_eq!(json["outcome"], "inputs_differ");
}

#[test]
fn an_identical_control_pair_shows_no_difference() {
    let Some(_) = python() else { return };
    let root = tempfile::tempdir().unwrap();
    let a = capture(root.path(), "a", &NORM);
    let b = capture(root.path(), "b", &NORM);
    let (code, json, stderr) = cross_json(root.path(), s(&a), s(&b), &[]);
    assert_eq!(code, 0, "{stderr}\n{json:#}");
    assert_eq!(json["outcome"], "no_difference", "{json:#}");
    assert_eq!(reproduces(&json), [true, true]);
    assert_eq!(json["inputs"]["agree"], true, "{json:#}");
    let meaning = json["meaning"].as_str().unwrap();
    assert!(
        meaning.contains("operators and inputs agree at this stage: nothing differs here"),
        "{meaning}"
    );
    assert!(!meaning.contains("look upstream"), "{meaning}");
    let (code, text, _) = cross_text(root.path(), s(&a), s(&b), &[]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("OUTCOME: NO DIFFERENCE"), "{text}");

    // Without the sets' statistics, the two runs' saved outputs (bit-identical) decide.
    for dump in [&a, &b] {
        let path = dump.join("rank0/match1-occ1/manifest.json");
        let mut manifest: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        for arg in ["x", "weight"] {
            manifest["input_sets"][0]["args"][arg]["stats"] = Value::Null;
        }
        std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    }
    let (code, json, stderr) = cross_json(root.path(), s(&a), s(&b), &[]);
    assert_eq!(code, 0, "{stderr}\n{json:#}");
    assert_eq!(json["outcome"], "no_difference", "{json:#}");
    assert!(
        json["inputs"]["how"]
            .as_str()
            .unwrap()
            .contains("saved outputs are bit-identical"),
        "{json:#}"
    );
}

#[test]
fn an_operator_that_raises_is_not_judged_with_its_error() {
    let Some(_) = python() else { return };
    let root = tempfile::tempdir().unwrap();
    let a = capture(root.path(), "a", &NORM);
    let b = capture(root.path(), "b", &Run { seed: 1, ..NORM });
    let raising = root.path().join("raising.py");
    std::fs::write(
        &raising,
        "def op(x, weight, eps):\n    raise ValueError('no kernel for this layout')\n",
    )
    .unwrap();
    let (code, json, stderr) = cross_json(
        root.path(),
        s(&a),
        s(&b),
        &["--candidate", &format!("{}:op", raising.display())],
    );
    assert_eq!(code, 1, "{stderr}\n{json:#}");
    let nj = &json["directions"][0]["not_judged"];
    let why = nj["why"].as_str().unwrap();
    assert!(why.contains("B's operator raised on A's inputs"), "{why}");
    assert!(
        why.contains("ValueError: no kernel for this layout"),
        "{why}"
    );
    let fix = nj["fix"].as_str().unwrap();
    assert!(fix.starts_with("check that"), "{fix}");
    assert!(
        fix.contains("runs on A's input set layers.0.norm#1"),
        "{fix}"
    );
    assert!(!fix.contains("dtype and device"), "{fix}");
}

#[test]
fn an_operator_of_a_that_cannot_be_imported_says_to_capture_a_again() {
    let Some(_) = python() else { return };
    let root = tempfile::tempdir().unwrap();
    let a = capture(root.path(), "a", &NORM);
    let b = capture(root.path(), "b", &Run { seed: 1, ..NORM });
    // No --candidate replaces A's operator: A is captured again.
    let path = a.join("rank0/match1-occ1/manifest.json");
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    manifest["input_sets"][0]["op"] = Value::from("no_such_module_xyz:op");
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    let (code, json, stderr) = cross_json(root.path(), s(&a), s(&b), &[]);
    assert_eq!(code, 1, "{stderr}\n{json:#}");
    let fix = json["directions"][1]["not_judged"]["fix"].as_str().unwrap();
    assert!(!fix.contains("--candidate"), "{fix}");
    assert!(
        fix.contains("capture A again with dp.capture_inputs(\"layers.0.norm\", _op="),
        "{fix}"
    );
}

#[test]
fn an_interpreter_that_says_nothing_is_named() {
    let Some(_) = python() else { return };
    let root = tempfile::tempdir().unwrap();
    let a = capture(root.path(), "a", &NORM);
    let b = capture(root.path(), "b", &Run { seed: 1, ..NORM });
    let out = with_python(&root.path().join("cache"))
        .env("DUMPVIEW_PYTHON", "/usr/bin/false")
        .args([
            "replay",
            "--cross",
            s(&a),
            s(&b),
            "--stage",
            "layers.0.norm#1",
        ])
        .output_within_limit();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        stderr.contains("the interpreter /usr/bin/false exited with status 1 without output"),
        "{stderr}"
    );
}

/// The committed llama_fp16_overflow pair (examples/llama_decoder.py): float32 (a) and float16
/// (b) runs of one model, whose `layers.0.input_norm#1` input sets link and save that stage's
/// output, but record no operator (examples/tiny_llama.py calls `capture_inputs` without
/// `_op`). `--candidate builtin:rms_norm` (docs/replay.md, the formula tiny_llama's RMSNorm
/// computes) stands in for B's operator: it runs on A's inputs and reproduces A's saved
/// output; A's operator is unknown, so the other direction is not judged, and so is the
/// cross-feeding. Run both ways, so that the candidate meets each dtype's inputs. Only what
/// the committed outputs fix is asserted: each verdict is a pass under msprobe's rule, not a
/// bit-exact equality that this CPU's float32 reduction order or float16 rounding could move.
#[test]
fn the_llama_fp16_pair_reproduces_each_saved_norm_and_cannot_judge_the_unrecorded_operator() {
    let Some(_) = python() else { return };
    let root = tempfile::tempdir().unwrap();
    let pair = "assets/examples/llama_fp16_overflow";
    for (a, b, dtype_a, dtype_b) in [
        ("a", "b", "float32", "float16"),
        ("b", "a", "float16", "float32"),
    ] {
        let (a, b) = (format!("{pair}/{a}"), format!("{pair}/{b}"));
        let (code, json, stderr) = json_of(
            with_python(&root.path().join("cache"))
                .args([
                    "replay",
                    "--cross",
                    &a,
                    &b,
                    "--stage",
                    "layers.0.input_norm#1",
                ])
                .args(["--candidate", "builtin:rms_norm", "--json"])
                .output_within_limit(),
        );
        assert_eq!(code, 1, "{stderr}\n{json:#}");
        assert_eq!(json["outcome"], "not_judged", "{json:#}");
        assert_eq!(json["stage"], "layers.0.input_norm#1");
        let directions = json["directions"].as_array().unwrap();
        // B's operator (the candidate) on A's inputs, against A's saved output.
        let b_on_a = &directions[0];
        assert_eq!(
            (b_on_a["operator_of"].as_str(), b_on_a["inputs_of"].as_str()),
            (Some("B"), Some("A"))
        );
        assert_eq!(b_on_a["operator"], "builtin:rms_norm");
        assert_eq!(b_on_a["operator_from"], "--candidate");
        let window = format!("{a}/rank0/match1-occ1/inputs");
        assert_eq!(
            b_on_a["input_set"],
            format!("{window}/layers.0.input_norm#1.pt")
        );
        assert_eq!(
            b_on_a["saved_outputs"],
            serde_json::json!([format!(
                "{window}/layers.0.input_norm#1.outputs/layers.0.input_norm#1.pt"
            )])
        );
        assert_eq!(b_on_a["reproduces"], true, "{b_on_a:#}");
        let judged = &b_on_a["against_saved"];
        assert_eq!(judged["verdict"], "pass", "{judged:#}");
        assert_eq!(
            judged["args"][0]["dtype"], dtype_a,
            "A's inputs: {judged:#}"
        );
        assert!(b_on_a["not_judged"].is_null());
        // A's operator was not recorded: that direction says so and how to fix it.
        let a_on_b = &directions[1];
        assert!(a_on_b["reproduces"].is_null(), "{a_on_b:#}");
        assert!(a_on_b["against_saved"].is_null(), "{a_on_b:#}");
        let why = a_on_b["not_judged"]["why"].as_str().unwrap();
        assert!(
            why.contains("A's input set layers.0.input_norm#1 records no operator"),
            "{why}"
        );
        assert!(
            a_on_b["not_judged"]["fix"]
                .as_str()
                .unwrap()
                .contains("_op="),
            "{a_on_b:#}"
        );
        assert_eq!(
            a_on_b["input_set"],
            format!("{b}/rank0/match1-occ1/inputs/layers.0.input_norm#1.pt"),
            "B's inputs are the {dtype_b} run's"
        );
    }
}
