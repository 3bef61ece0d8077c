"""assets/replay_op.py --batch (a dumpview case matrix, docs/cases.md): real runs as a subprocess.

Plans are written here by hand in the shape `dumpview cases plan` writes them (the Rust side's
plan is checked against assets/cases_plan.schema.json by tests/cases.rs).  The input sets are
the Llama example's float32 ``layers.0.input_norm#1`` and the layout fixture
tests/fixtures/replay/dump ``attn.layout#1`` (a transposed k, two pairs of arguments sharing a
storage, a float16 tensor); the candidates are tests/python/replay_candidates.py's.  Every
expected value is computed here from the input files, never copied from one machine.
"""

import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import REPO

REPLAY = os.path.join(REPO, "assets", "replay_op.py")
CANDIDATES = os.path.join(REPO, "tests", "python", "replay_candidates.py")
KV_A = os.path.join(REPO, "assets", "examples", "llama_kv_alias", "a")
FIXTURE = os.path.join(REPO, "tests", "fixtures", "replay", "dump")
SCHEMA = os.path.join(REPO, "assets", "cases_plan.schema.json")


def cand(name):
    return "%s:%s" % (CANDIDATES, name)


def run(*args, env=None, timeout=300):
    full = dict(os.environ)
    full.setdefault("OMP_NUM_THREADS", "1")
    full.update(env or {})
    return subprocess.run([sys.executable, REPLAY] + [str(a) for a in args], capture_output=True, text=True,
                          env=full, timeout=timeout)


def plan(cases, candidate, reference="builtin:rms_norm", stage="layers.0.input_norm#1", name="m"):
    return {"format": "dumpview.cases.plan", "version": 1, "name": name, "stage": stage,
            "candidate": candidate, "reference": reference,
            "cases": [{"id": "baseline", "transform": {"kind": "none"}}] + cases}


def write(tmp_path, document, name="plan.json"):
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def record(root, case):
    with open(os.path.join(root, case, "replay.json"), encoding="utf-8") as handle:
        return json.load(handle)


def outputs(root, case, side):
    return torch.load(os.path.join(root, case, side + ".pt"), weights_only=True)


def captured(dump, stage):
    """{name: value} of an input set, rebuilt here from the documented .pt format."""
    window = next(os.path.join(d, "manifest.json") for d, _s, files in os.walk(dump) if "manifest.json" in files)
    with open(window) as handle:
        manifest = json.load(handle)
    entry = next(e for e in manifest["input_sets"] if "%s#%d" % (e["stage"], e["occurrence"]) == stage)
    payload = torch.load(os.path.join(os.path.dirname(window), entry["file"]), weights_only=True)
    out = {}
    for name, v in payload.items():
        if isinstance(v, dict) and v.get("__dump_probe_tensor__") == 1:
            v = torch.as_strided(v["span"], v["shape"], v["stride"], v["offset_in_span"])
        out[name] = v
    return out


def test_each_case_sees_its_transform_and_the_reference_the_same_inputs(tmp_path):
    cases = [
        {"id": "dtype=bfloat16", "axis": "dtype", "value": "bfloat16",
         "transform": {"kind": "dtype", "args": {"x": "bfloat16", "weight": "bfloat16"}}},
        {"id": "layout.x=transposed", "axis": "layout[x]", "value": "transposed",
         "transform": {"kind": "layout", "arg": "x", "layout": "transposed", "stride": [1, 12]}},
        {"id": "layout.x=strided", "axis": "layout[x]", "value": "strided",
         "transform": {"kind": "layout", "arg": "x", "layout": "strided", "stride": [512, 2]}},
        {"id": "shape=half_rows", "axis": "shape", "value": "half_rows",
         "transform": {"kind": "shape", "shape": "half_rows", "args": [{"arg": "x", "shape": [6, 256], "stride": [256, 1]}]}},
        {"id": "shape=odd_last_dim", "axis": "shape", "value": "odd_last_dim",
         "transform": {"kind": "shape", "shape": "odd_last_dim", "args": [
             {"arg": "x", "shape": [12, 255], "stride": [255, 1]}, {"arg": "weight", "shape": [255], "stride": [1]}]}},
        {"id": "option.eps=1e-2", "axis": "option:eps", "value": "1e-2",
         "transform": {"kind": "option", "name": "eps", "value": 1e-2}},
    ]
    root = tmp_path / "out"
    proc = run(KV_A, "--batch", write(tmp_path, plan(cases, cand("rms_norm_needs_contiguous"))), "--out-root", root)
    assert proc.returncode == 0, proc.stderr
    for i, case in enumerate(["baseline"] + [c["id"] for c in cases], 1):
        assert "replay_op: case %d/7 %s: start" % (i, case) in proc.stderr
        assert "replay_op: case %d/7 %s: done" % (i, case) in proc.stderr
    base = captured(KV_A, "layers.0.input_norm#1")
    x, weight = base["x"], base["weight"]

    def args(case):
        return {a["name"]: a for a in record(root, case)["args"]}

    # dtype: both floating tensors cast; the reference runs on them upcast, not on the capture.
    a = args("dtype=bfloat16")
    assert (a["x"]["dtype"], a["weight"]["dtype"]) == ("bfloat16", "bfloat16")
    reference = outputs(root, "dtype=bfloat16", "reference")["out"]
    x16, w16 = x.to(torch.bfloat16).double(), weight.to(torch.bfloat16).double()
    expected = x16 * torch.rsqrt(x16.pow(2).mean(-1, keepdim=True) + 1e-6) * w16
    assert reference.dtype == torch.float32
    assert torch.allclose(reference.double(), expected, rtol=1e-6, atol=1e-6)
    # layout: the logical values kept, the strides of the layout; the candidate crashes on them.
    for case, stride in (("layout.x=transposed", [1, 12]), ("layout.x=strided", [512, 2])):
        assert args(case)["x"]["stride"] == stride
        assert args(case)["x"]["shape"] == [12, 256]
        assert record(root, case)["sides"]["candidate"]["status"] == "crash"
        saved = torch.load(os.path.join(root, case, "inputs.pt"), weights_only=True)
        assert list(saved["x"].stride()) == stride and torch.equal(saved["x"], x)
        golden = outputs(root, case, "golden")["out"]
        # the same values, summed in another memory order
        assert torch.allclose(golden, outputs(root, "baseline", "golden")["out"], rtol=1e-12, atol=1e-12)
    strided = torch.load(os.path.join(root, "layout.x=strided", "inputs.pt"), weights_only=True)["x"]
    gaps = torch.as_strided(strided, (12, 256), (512, 2), strided.storage_offset() + 1)
    assert bool(torch.isnan(gaps).all()), "the gaps of a strided buffer are NaN: a kernel reading them shows"
    # shape: the leading elements, tied dimensions cut together, contiguous as captured.
    assert args("shape=half_rows")["x"]["shape"] == [6, 256]
    assert args("shape=half_rows")["weight"]["shape"] == [256]
    assert torch.equal(outputs(root, "shape=half_rows", "candidate")["out"],
                       outputs(root, "baseline", "candidate")["out"][:6])
    assert args("shape=odd_last_dim")["weight"]["shape"] == [255]
    saved = torch.load(os.path.join(root, "shape=odd_last_dim", "inputs.pt"), weights_only=True)
    assert torch.equal(saved["x"], x[:, :255]) and saved["x"].is_contiguous()
    # option: the scalar set, recorded as overridden.
    a = args("option.eps=1e-2")
    assert a["eps"]["value"] == 1e-2 and a["eps"]["overridden"] is True
    assert record(root, "option.eps=1e-2")["case"]["id"] == "option.eps=1e-2"
    assert record(root, "baseline")["case"]["transform"] == {"kind": "none"}


def test_transforms_keep_the_fixture_s_layouts_except_the_one_they_change(tmp_path):
    """The layout fixture: k transposed, sliced/window and k_cache/v_cache sharing storages."""
    cases = [
        # dtype of one member of a shared pair: that member is stored anew, the other keeps sharing.
        {"id": "dtype.sliced=float64", "transform": {"kind": "dtype", "args": {"sliced": "float64"}}},
        {"id": "shape.k=half_rows", "transform": {"kind": "shape", "shape": "half_rows",
                                                   "args": [{"arg": "k", "shape": [2, 2, 8], "stride": [8, 16, 1]}]}},
        {"id": "layout.q=transposed", "transform": {"kind": "layout", "arg": "q", "layout": "transposed",
                                                     "stride": [16, 1, 2]}},
    ]
    root = tmp_path / "out"
    out_json = tmp_path / "seen"
    proc = run(FIXTURE, "--batch", write(tmp_path, plan(cases, cand("layout_probe"), reference=cand("layout_probe"),
                                                        stage="attn.layout#1")),
               "--out-root", root, "--only", "dtype.sliced=float64", "--only", "shape.k=half_rows",
               "--only", "layout.q=transposed", env={"REPLAY_LAYOUT_OUT": str(out_json)})
    assert proc.returncode == 0, proc.stderr
    assert not os.path.exists(root / "baseline"), "--only runs only those"
    seen = [json.load(open("%s.%d" % (out_json, n))) for n in range(1, 13)]
    cast, cut, moved = seen[0], seen[4], seen[8]  # the candidate side of each case, in order
    assert cast["args"]["sliced"]["dtype"] == "float64"
    assert cast["args"]["sliced"]["stride"] == [6, 1], "a cast keeps the stride"
    assert ["k_cache", "v_cache"] in cast["shared"], "the untouched pair still shares"
    assert ["sliced", "window"] not in cast["shared"]
    assert "sliced no longer shares its storage with window" in " ".join(
        record(root, "dtype.sliced=float64")["case"]["notes"])
    assert cut["args"]["k"]["shape"] == [2, 2, 8] and cut["args"]["k"]["stride"] == [8, 16, 1]
    base = captured(FIXTURE, "attn.layout#1")
    assert cut["args"]["k"]["values"] == base["k"][:2].double().reshape(-1).tolist()
    assert ["sliced", "window"] in cut["shared"], "what the shape axis does not touch keeps sharing"
    assert moved["args"]["q"]["stride"] == [16, 1, 2]
    assert moved["args"]["q"]["values"] == base["q"].double().reshape(-1).tolist()
    assert moved["args"]["k"]["stride"] == [8, 32, 1], "the other arguments keep their captured layout"


def test_a_case_interrupted_leaves_no_replay_json(tmp_path):
    cases = [{"id": "option.eps=1e-5", "transform": {"kind": "option", "name": "eps", "value": 1e-5}},
             {"id": "option.eps=1e-4", "transform": {"kind": "option", "name": "eps", "value": 1e-4}}]
    root = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, REPLAY, KV_A, "--batch", str(write(tmp_path, plan(cases, cand("rms_norm_hangs_on_eps")))),
                             "--out-root", str(root)], stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if "case 2/3 option.eps=1e-5: start" in line:
            break
    proc.kill()
    proc.wait(timeout=60)
    assert (root / "baseline" / "replay.json").is_file()
    assert (root / "option.eps=1e-5").is_dir()
    assert not (root / "option.eps=1e-5" / "replay.json").exists(), "an interrupted case is missing evidence"
    assert not (root / "option.eps=1e-4").exists()
    # The root is not empty now: the same cases are refused, evidence is never overwritten.
    again = run(KV_A, "--batch", tmp_path / "plan.json", "--out-root", root, "--only", "baseline")
    assert again.returncode == 2 and "never overwrites evidence" in again.stderr


@pytest.mark.parametrize("mutate, said", [
    (lambda p: p["cases"].append({"id": "../x", "transform": {"kind": "none"}}), "is not a case name"),
    (lambda p: p["cases"].append({"id": "..", "transform": {"kind": "none"}}), "is not a case name"),
    (lambda p: p["cases"].append({"id": "a/b", "transform": {"kind": "none"}}), "is not a case name"),
    (lambda p: p.update(name="../m"), "is not a plan name"),
    (lambda p: p.update(format="other"), "not a dumpview case plan"),
    (lambda p: p.update(version=2), "plan version 2"),
    (lambda p: p.update(cases=3), "'cases' is missing or not a list"),
    (lambda p: p["cases"].append({"id": "baseline", "transform": {"kind": "none"}}), "planned twice"),
    (lambda p: p["cases"].append({"id": "z", "transform": {"kind": "rm -rf"}}), "transform is not one of"),
    (lambda p: p["cases"].append({"id": "z", "transform": {"kind": "layout", "arg": "weight", "layout": "transposed"}}),
     "transposed needs two"),
    (lambda p: p["cases"].append({"id": "z", "transform": {"kind": "option", "name": "x", "value": 1}}),
     "is not a scalar argument"),
    (lambda p: p["cases"].append({"id": "z", "transform": {"kind": "dtype", "args": {"nope": "float16"}}}),
     "nope is not a tensor argument"),
])
def test_a_bad_plan_is_refused_naming_it_before_anything_runs(tmp_path, mutate, said):
    document = plan([], cand("rms_norm_exact"))
    mutate(document)
    path = write(tmp_path, document)
    proc = run(KV_A, "--batch", path, "--out-root", tmp_path / "out")
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr, proc.stderr
    assert str(path) in proc.stderr or "JSON text" in proc.stderr
    assert not (tmp_path / "out" / "baseline").exists(), "nothing ran"
    assert not (tmp_path / "x").exists() and not (tmp_path / "m").exists()


def test_a_truncated_plan_and_usage_errors(tmp_path):
    path = write(tmp_path, plan([], cand("rms_norm_exact")))
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    proc = run(KV_A, "--batch", path, "--out-root", tmp_path / "out")
    assert proc.returncode == 2 and "%s: not a valid plan: truncated or not JSON" % path in proc.stderr, proc.stderr
    good = write(tmp_path, plan([], cand("rms_norm_exact")), name="good.json")
    proc = run(KV_A, "--batch", good)
    assert proc.returncode == 2 and "needs --out-root" in proc.stderr
    proc = run(KV_A, "--batch", good, "--out-root", tmp_path / "o", "--only", "nope")
    assert proc.returncode == 2 and "no case nope" in proc.stderr
    proc = run(KV_A, "--batch", good, "--out-root", tmp_path / "o", "--stage", "x")
    assert proc.returncode == 2 and "do not go with it" in proc.stderr
    # The plan as JSON text (how dumpview sends it to a remote host) runs the same.
    proc = run(KV_A, "--batch", good.read_text(), "--out-root", tmp_path / "o")
    assert proc.returncode == 0, proc.stderr
    assert record(tmp_path / "o", "baseline")["sides"]["candidate"]["status"] == "ok"


def test_the_schema_is_valid_and_refuses_hostile_names():
    import jsonschema

    with open(SCHEMA) as handle:
        schema = json.load(handle)
    jsonschema.Draft202012Validator.check_schema(schema)
    name = jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/name"})
    for good in ("baseline", "dtype=bfloat16", "layout.x=strided", "option.eps=1e-5"):
        assert name.is_valid(good), good
    for bad in ("", ".", "..", "../x", "/", "a/b", "dtype[x]=f"):
        assert not name.is_valid(bad), bad
