"""assets/replay_op.py: real runs as a subprocess on committed input sets.

The input sets are the Llama examples' (assets/examples/llama_kv_alias/a, float32;
llama_fp16_overflow/b, float16: ``layers.0.input_norm#1`` and ``layers.0.rope#1``) and the
layout fixture tests/fixtures/replay/dump (written once by make_replay_fixture.py: a
transposed k, a sliced view with an offset, storages shared by two arguments, float16).
Candidates are in tests/python/replay_candidates.py.  Every expected value is computed in
the test from the input files themselves, never a float copied from one machine.
"""

import importlib.util
import json
import os
import pickle
import shutil
import subprocess
import sys

import pytest
import torch

from conftest import REPO, load_manifest

REPLAY = os.path.join(REPO, "assets", "replay_op.py")
CANDIDATES = os.path.join(REPO, "tests", "python", "replay_candidates.py")
KV_A = os.path.join(REPO, "assets", "examples", "llama_kv_alias", "a")
FP16_B = os.path.join(REPO, "assets", "examples", "llama_fp16_overflow", "b")
FIXTURE = os.path.join(REPO, "tests", "fixtures", "replay", "dump")
FIXTURE_WINDOW = os.path.join(FIXTURE, "rank0", "match1-occ1")
SIDES = ("candidate", "reference", "golden", "reference_native")


def cand(name):
    return "%s:%s" % (CANDIDATES, name)


def run(*args, env=None, cwd=None):
    full = dict(os.environ)
    full.setdefault("OMP_NUM_THREADS", "1")
    full.update(env or {})
    return subprocess.run([sys.executable, REPLAY] + [str(a) for a in args], capture_output=True, text=True,
                          env=full, cwd=cwd, timeout=180)


class Replay:
    """One finished replay: the process, replay.json and every side's outputs."""

    def __init__(self, proc, out):
        self.proc = proc
        self.out = out
        assert proc.returncode == 0, proc.stderr
        with open(os.path.join(out, "replay.json"), encoding="utf-8") as handle:
            self.report = json.load(handle)
        self.outputs = {}
        for side in SIDES:
            path = os.path.join(out, side + ".pt")
            if os.path.exists(path):
                self.outputs[side] = torch.load(path, weights_only=True)

    def side(self, name):
        return self.report["sides"][name]


def replay(tmp_path, dump, stage, candidate, reference, *extra, env=None, name="out"):
    out = tmp_path / name
    proc = run(dump, "--stage", stage, "--candidate", candidate, "--reference", reference, "--out", out, *extra, env=env)
    return Replay(proc, str(out))


def load_set(dump, stage):
    """(manifest entry, {name: value}) of an input set, rebuilt by the test itself from the documented format."""
    window = next(os.path.join(d, "manifest.json") for d, _s, files in os.walk(dump) if "manifest.json" in files)
    manifest = load_manifest(window)
    entry = next(e for e in manifest["input_sets"] if "%s#%d" % (e["stage"], e["occurrence"]) == stage)
    payload = torch.load(os.path.join(os.path.dirname(window), entry["file"]), weights_only=True)

    def rebuild(v):
        if isinstance(v, dict) and v.get("__dump_probe_tensor__") == 1:
            return torch.as_strided(v["span"], v["shape"], v["stride"], v["offset_in_span"])
        return v

    return entry, {k: rebuild(v) for k, v in payload.items()}


def hf_rms_norm64(x, weight, eps):
    x = x.to(torch.float64)
    return weight.to(torch.float64) * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def assert_rounding_close(actual, exact, units=4):
    """A correct kernel in dtype D is a few roundings from the exact result: |a - e| <= units * eps(D) * max|e|."""
    eps = torch.finfo(actual.dtype).eps
    scale = exact.abs().max().item()
    err = (actual.to(torch.float64) - exact.to(torch.float64)).abs().max().item()
    assert err <= units * eps * scale, (err, units * eps * scale)


def first_mismatch(a, b, rtol, atol=0.0):
    bad = ~torch.isclose(a.to(torch.float64), b.to(torch.float64), rtol=rtol, atol=atol)
    flat = bad.reshape(-1).nonzero()
    return None if flat.numel() == 0 else int(flat[0])


# ----------------------------------------------------------------------------- --list


def test_list_text_shows_sets_counts_layouts_and_op():
    proc = run(FIXTURE, "--list")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "label \"req-replay-fixture\"" in text and "rank 0" in text
    assert "attn.layout#1  (stage captured 2 times)  op tests/python/replay_candidates.py:layout_probe" in text
    assert "attn.layout#2  (stage captured 2 times)\n" in text  # no op recorded for #2
    assert "k            tensor float32 [4, 2, 8] stride [8, 32, 1] offset 0 cpu" in text
    assert "non-contiguous" in text.split("\n    k ")[1].splitlines()[0]
    assert "sliced       tensor float32 [4, 3] stride [6, 1] offset 20 cpu" in text
    assert "h16          tensor float16 [6] stride [1] offset 0 cpu" in text
    assert "eps          float 1e-05" in text

    proc = run(KV_A, "--list")
    assert proc.returncode == 0, proc.stderr
    assert "layers.0.input_norm#1  (stage captured 1 time)\n" in proc.stdout
    assert "layers.0.rope#1  (stage captured 1 time)\n" in proc.stdout
    assert " op " not in proc.stdout  # manifests from before _op: nothing recorded, nothing invented


def test_list_json_document():
    proc = run(FIXTURE, "--list", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["format"] == "dumpview.replay.list" and doc["version"] == 1
    [window] = doc["windows"]
    assert (window["rank"], window["label"], window["match"], window["occurrence"]) == (0, "req-replay-fixture", 1, 1)
    first, second = window["input_sets"]
    assert (first["key"], first["captured"]) == ("attn.layout#1", 2)
    assert first["op"] == "tests/python/replay_candidates.py:layout_probe"
    assert (second["key"], second["op"]) == ("attn.layout#2", None)
    assert first["file_present"] is True
    args = {a["name"]: a for a in first["args"]}
    assert list(args) == ["q", "k", "sliced", "window", "k_cache", "v_cache", "h16", "eps", "causal", "dims", "dtype"]
    k = args["k"]
    assert (k["dtype"], k["shape"], k["stride"], k["device"]) == ("float32", [4, 2, 8], [8, 32, 1], "cpu")
    assert args["sliced"]["storage_offset"] == 20
    assert args["sliced"]["storage_id"] == args["window"]["storage_id"]
    assert args["k_cache"]["storage_id"] == args["v_cache"]["storage_id"]
    assert args["h16"]["dtype"] == "float16"
    assert args["dims"]["items"][1] == {"name": "dims[1]", "kind": "int", "value": 2}

    proc = run(FP16_B, "--list", "--json")
    doc = json.loads(proc.stdout)
    sets = {s["key"]: s for s in doc["windows"][0]["input_sets"]}
    assert sorted(sets) == ["layers.0.input_norm#1", "layers.0.rope#1"]
    assert all(s["op"] is None and s["captured"] == 1 for s in sets.values())
    rope = {a["name"]: a for a in sets["layers.0.rope#1"]["args"]}
    assert rope["q"]["shape"] == [12, 4, 64] and rope["q"]["dtype"] == "float16"
    assert rope["positions"]["dtype"] == "int64"


# ----------------------------------------------------------------------------- correct candidates


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("replays")


@pytest.fixture(scope="module")
def shared_replay(module_tmp):
    """shared_replay(dump, stage, candidate, reference): one run per distinct call in this module."""
    done = {}

    def get(dump, stage, candidate, reference):
        key = (dump, stage, candidate, reference)
        if key not in done:
            done[key] = replay(module_tmp, dump, stage, candidate, reference, name="shared%d" % len(done))
        return done[key]

    return get


@pytest.fixture(scope="module")
def rms_fp32(module_tmp):
    return replay(module_tmp, KV_A, "layers.0.input_norm", cand("rms_norm_ok"), "builtin:rms_norm", name="rms_fp32")


@pytest.fixture(scope="module")
def rms_fp16(module_tmp):
    return replay(module_tmp, FP16_B, "layers.0.input_norm#1", cand("rms_norm_ok"), "builtin:rms_norm", name="rms_fp16")


def test_correct_rms_norm_float32_matches_the_reference(rms_fp32):
    r = rms_fp32
    report = r.report
    assert report["format"] == "dumpview.replay" and report["version"] == 1
    assert (report["stage"], report["occurrence"], report["rank"], report["label"]) == (
        "layers.0.input_norm", 1, 0, "req-llama_kv_alias")
    assert report["op_recorded"] is None
    assert report["device"] == "cpu" and report["device_note"] is None
    assert report["versions"]["torch"] == torch.__version__
    assert report["call"] == "keywords"
    assert [a["name"] for a in report["args"]] == ["x", "weight", "eps"]
    assert report["args"][2] == {"name": "eps", "kind": "float", "value": 1e-06}
    assert report["args"][0]["stride"] == [256, 1] and report["args"][0]["dtype"] == "float32"
    assert report["outputs"] == [{"name": "out", "dtype": "float32", "shape": [12, 256], "stride": [256, 1],
                                  "storage_offset": 0, "device": "cpu", "is_contiguous": True}]
    for side in SIDES:
        s = r.side(side)
        assert s["status"] == "ok" and s["exception"] is None, s
        assert s["duration_s"] > 0 and s["outputs"] == ["out"] and s["file"] == side + ".pt"
    assert r.side("candidate")["input_dtype"] == "as captured"
    assert r.side("reference")["input_dtype"] == "float64 (upcast from float32)"
    assert r.side("golden")["input_dtype"] == "float64 (upcast from float32)"
    assert r.side("reference_native")["input_dtype"] == "as captured"

    entry, args = load_set(KV_A, "layers.0.input_norm#1")
    exact = hf_rms_norm64(args["x"], args["weight"], args["eps"])
    c = r.outputs["candidate"]["out"]
    assert c.dtype == torch.float32 and c.shape == (12, 256)
    assert r.outputs["reference"]["out"].dtype == torch.float64
    assert r.outputs["golden"]["out"].dtype == torch.float64
    assert r.outputs["reference_native"]["out"].dtype == torch.float32
    torch.testing.assert_close(r.outputs["golden"]["out"], exact, rtol=1e-12, atol=0)
    # float32 inputs: the reference's upcast is float64 too, so reference and golden agree exactly
    assert torch.equal(r.outputs["reference"]["out"], r.outputs["golden"]["out"])
    assert_rounding_close(c, exact)
    assert_rounding_close(r.outputs["reference_native"]["out"], exact)
    assert not [f for f in os.listdir(r.out) if ".tmp." in f]


def test_correct_rms_norm_float16_matches_the_reference(rms_fp16):
    r = rms_fp16
    assert r.side("reference")["input_dtype"] == "float32 (upcast from float16)"
    assert r.side("golden")["input_dtype"] == "float64 (upcast from float16)"
    c = r.outputs["candidate"]["out"]
    assert c.dtype == torch.float16
    assert r.outputs["reference"]["out"].dtype == torch.float32
    assert r.outputs["golden"]["out"].dtype == torch.float64
    assert r.outputs["reference_native"]["out"].dtype == torch.float16
    _entry, args = load_set(FP16_B, "layers.0.input_norm#1")
    exact = hf_rms_norm64(args["x"], args["weight"], args["eps"])
    torch.testing.assert_close(r.outputs["golden"]["out"], exact, rtol=1e-12, atol=0)
    assert_rounding_close(c, exact)
    assert_rounding_close(r.outputs["reference"]["out"], exact)
    # The candidate is HF's formula: in its own dtype it is the reference in the candidate's dtype.
    assert torch.equal(c, r.outputs["reference_native"]["out"])


@pytest.mark.parametrize("dump", [KV_A, FP16_B], ids=["float32", "float16"])
def test_correct_rope_matches_the_reference(shared_replay, dump):
    r = shared_replay(dump, "layers.0.rope#1", cand("rope_ok"), "builtin:rope_neox")
    _entry, args = load_set(dump, "layers.0.rope#1")
    assert r.report["call"] == "keywords"
    assert [a["name"] for a in r.report["args"]] == ["q", "k", "cos", "sin", "positions"]
    assert [o["name"] for o in r.report["outputs"]] == ["out.0", "out.1"]
    c64, s64 = args["cos"].double()[:, None, :], args["sin"].double()[:, None, :]
    for i, name in enumerate(("q", "k")):
        x = args[name].double()
        half = x.shape[-1] // 2
        exact = x * c64 + torch.cat((-x[..., half:], x[..., :half]), -1) * s64
        out = "out.%d" % i
        assert r.outputs["candidate"][out].dtype == args[name].dtype
        assert r.outputs["candidate"][out].shape == args[name].shape
        torch.testing.assert_close(r.outputs["golden"][out], exact, rtol=1e-12, atol=1e-15)
        assert_rounding_close(r.outputs["candidate"][out], exact)
        assert_rounding_close(r.outputs["reference"][out], exact)


# ----------------------------------------------------------------------------- wrong candidates


def test_wrong_rms_norm_eps_after_normalization_mismatches_from_the_first_element(tmp_path):
    r = replay(tmp_path, KV_A, "layers.0.input_norm#1", cand("rms_norm_eps_after"), "builtin:rms_norm")
    assert r.side("candidate")["status"] == "ok"
    c, g = r.outputs["candidate"]["out"], r.outputs["golden"]["out"]
    _entry, args = load_set(KV_A, "layers.0.input_norm#1")
    # Why the first element: rsqrt(var) instead of rsqrt(var + eps) scales every element of a row
    # by about 1 + eps / (2 var), and this capture's variances make that far above float32 rounding.
    var = args["x"].double().pow(2).mean(-1)
    shift = args["eps"] / (2 * var.max().item())
    rtol = 16 * torch.finfo(torch.float32).eps
    assert shift > 100 * rtol
    assert first_mismatch(c, g, rtol=rtol) == 0
    assert not torch.isclose(c.double(), g, rtol=rtol).any()  # every element is off, not just the first


def test_wrong_rms_norm_differs_in_float16_too(tmp_path):
    r = replay(tmp_path, FP16_B, "layers.0.input_norm#1", cand("rms_norm_eps_after"), "builtin:rms_norm")
    c, n = r.outputs["candidate"]["out"], r.outputs["reference_native"]["out"]
    assert c.dtype == n.dtype == torch.float16
    assert not torch.equal(c, n)


@pytest.mark.parametrize("dump", [KV_A, FP16_B], ids=["float32", "float16"])
def test_wrong_rope_half_mismatches_first_at_token_one(tmp_path, dump):
    r = replay(tmp_path, dump, "layers.0.rope#1", cand("rope_wrong_half"), "builtin:rope_neox")
    _entry, args = load_set(dump, "layers.0.rope#1")
    # Position 0 turns by angle 0 (cos 1, sin 0 exactly), where either sign is right: token 0 matches.
    assert args["positions"][0] == 0
    assert torch.all(args["sin"][0] == 0) and torch.all(args["cos"][0] == 1)
    heads, head_dim = args["q"].shape[1], args["q"].shape[2]
    # The wrong half changes element (1, 0, 0) by 2 * q[1, 0, D/2] * sin[1, 0]: large here.
    change = 2 * args["q"][1, 0, head_dim // 2].double() * args["sin"][1, 0].double()
    rtol = 16 * torch.finfo(args["q"].dtype).eps
    assert abs(change) > 10 * rtol * args["q"].double().abs().max()
    c, g = r.outputs["candidate"]["out.0"], r.outputs["golden"]["out.0"]
    assert torch.equal(c[0].double(), args["q"][0].double())  # token 0 unchanged by the rotation
    assert first_mismatch(c, g, rtol=rtol, atol=rtol * g.abs().max().item()) == heads * head_dim  # (1, 0, 0)
    k_heads = args["k"].shape[1]
    ck, gk = r.outputs["candidate"]["out.1"], r.outputs["golden"]["out.1"]
    assert first_mismatch(ck, gk, rtol=rtol, atol=rtol * gk.abs().max().item()) == k_heads * head_dim


# ----------------------------------------------------------------------------- crash, unsupported, in place


def test_crash_is_recorded_with_its_exception(tmp_path):
    r = replay(tmp_path, KV_A, "layers.0.input_norm#1", cand("crash"), "builtin:rms_norm")
    s = r.side("candidate")
    assert s["status"] == "crash"
    assert s["exception"]["type"] == "RuntimeError"
    assert s["exception"]["message"] == "replay test candidate: illegal memory access (simulated)"
    assert "replay_candidates.py" in s["exception"]["traceback"] and "in crash" in s["exception"]["traceback"]
    assert s["outputs"] == [] and s["file"] is None
    assert "candidate" not in r.outputs and set(r.outputs) == {"reference", "golden", "reference_native"}
    assert r.report["outputs"] == []
    assert all(r.side(x)["status"] == "ok" for x in ("reference", "golden", "reference_native"))
    assert "candidate %s: crash: RuntimeError" % cand("crash") in r.proc.stderr


def test_torch_refusing_half_is_unsupported_not_a_crash(tmp_path):
    r = replay(tmp_path, FP16_B, "layers.0.input_norm#1", cand("unsupported"), "builtin:rms_norm")
    s = r.side("candidate")
    assert s["status"] == "unsupported"
    assert "not implemented for 'Half'" in s["exception"]["message"]
    assert "candidate" not in r.outputs and r.side("reference")["status"] == "ok"
    assert "candidate %s: unsupported: NotImplementedError" % cand("unsupported") in r.proc.stderr


def test_in_place_candidate_outputs_are_its_mutated_arguments(tmp_path, shared_replay):
    r = replay(tmp_path, KV_A, "layers.0.rope#1", cand("rope_in_place"), "builtin:rope_neox")
    s = r.side("candidate")
    assert s["status"] == "ok" and s["mutated_args"] == ["q", "k"]
    assert s["outputs_from"] == "mutated arguments q, k" and s["outputs"] == ["out.0", "out.1"]
    ok = shared_replay(KV_A, "layers.0.rope#1", cand("rope_ok"), "builtin:rope_neox")
    for out in ("out.0", "out.1"):
        assert torch.equal(r.outputs["candidate"][out], ok.outputs["candidate"][out])
        # every side got fresh inputs: the candidate's writes did not reach the reference's
        assert torch.equal(r.outputs["golden"][out], ok.outputs["golden"][out])
    assert ok.side("candidate")["mutated_args"] == [] and ok.side("candidate")["outputs_from"] == "return"


# ----------------------------------------------------------------------------- layouts of the fixture


@pytest.fixture(scope="module")
def layout_run(module_tmp):
    seen = module_tmp / "seen"
    r = replay(module_tmp, FIXTURE, "attn.layout#1", cand("layout_probe"), cand("layout_probe"),
               env={"REPLAY_LAYOUT_OUT": str(seen)}, name="layout")
    calls = []
    for n in range(1, 5):
        with open("%s.%d" % (seen, n)) as handle:
            calls.append(json.load(handle))
    assert not os.path.exists("%s.5" % seen)
    return r, dict(zip(SIDES, calls))


def test_fixture_candidate_sees_the_captured_strides_and_sharing(layout_run):
    r, calls = layout_run
    entry, args = load_set(FIXTURE, "attn.layout#1")
    seen = calls["candidate"]["args"]
    tensors = [n for n, d in entry["args"].items() if d["kind"] == "tensor"]
    assert tensors == ["q", "k", "sliced", "window", "k_cache", "v_cache", "h16"]
    for name in tensors:
        d = entry["args"][name]
        assert seen[name]["dtype"] == d["dtype"], name
        assert seen[name]["shape"] == d["shape"], name
        assert seen[name]["stride"] == d["stride"], name
        assert seen[name]["is_contiguous"] == d["is_contiguous"], name
        assert seen[name]["device"] == "cpu"
        assert seen[name]["values"] == args[name].double().reshape(-1).tolist(), name  # the captured values
    assert seen["k"]["stride"] == [8, 32, 1] and seen["k"]["is_contiguous"] is False
    assert seen["h16"]["dtype"] == "float16"
    # exactly the captured sharing: one storage for sliced/window, one for k_cache/v_cache
    assert calls["candidate"]["shared"] == [["k_cache", "v_cache"], ["sliced", "window"]]
    for a, b in (("sliced", "window"), ("k_cache", "v_cache")):
        captured = entry["args"][b]["storage_offset"] - entry["args"][a]["storage_offset"]
        assert seen[b]["storage_offset"] - seen[a]["storage_offset"] == captured
        assert seen[b]["data_ptr"] - seen[a]["data_ptr"] == captured * 4
    # the absolute offset is recorded, not reproduced: the shared buffer starts at the first span
    assert seen["sliced"]["storage_offset"] == 0 and entry["args"]["sliced"]["storage_offset"] == 20
    assert seen["k_cache"]["storage_nbytes"] == 40 * 4  # the union of [0, 20) and [24, 40), gap included
    # the scalars, list and dtype arrive as captured
    assert seen["eps"] == {"type": "float", "value": "1e-05"}
    assert seen["causal"] == {"type": "bool", "value": "True"}
    assert seen["dims"] == {"type": "list", "value": "[1, 2]"}
    assert seen["dtype"] == {"type": "dtype", "value": "torch.float16"}
    # replay.json records the captured layout
    described = {a["name"]: a for a in r.report["args"]}
    assert described["sliced"]["storage_offset"] == 20 and described["sliced"]["shares_storage_with"] == ["window"]
    assert described["v_cache"]["shares_storage_with"] == ["k_cache"]
    assert described["k"]["stride"] == [8, 32, 1] and described["q"]["shares_storage_with"] == []
    assert r.report["op_recorded"] == "tests/python/replay_candidates.py:layout_probe"
    assert r.report["call"] == "keywords"
    assert torch.equal(r.outputs["candidate"]["out"], args["h16"] * 2)


def test_upcast_inputs_keep_the_layout(layout_run):
    _r, calls = layout_run
    entry, args = load_set(FIXTURE, "attn.layout#1")
    expected = {
        "reference": {"float32": "float64", "float16": "float32"},
        "golden": {"float32": "float64", "float16": "float64"},
        "reference_native": {"float32": "float32", "float16": "float16"},
    }
    for side, dtypes in expected.items():
        seen = calls[side]["args"]
        assert calls[side]["shared"] == [["k_cache", "v_cache"], ["sliced", "window"]], side
        for name, d in entry["args"].items():
            if d["kind"] != "tensor":
                continue
            assert seen[name]["dtype"] == dtypes[d["dtype"]], (side, name)
            assert seen[name]["stride"] == d["stride"], (side, name)
            assert seen[name]["values"] == args[name].double().reshape(-1).tolist(), (side, name)  # upcasts are exact


def test_probe_to_replay_round_trip_of_odd_layouts(probe, tmp_path):
    """Captured by the probe now, replayed by replay_op.py: every layout arrives as it was captured."""
    g = torch.Generator().manual_seed(5)
    base = torch.randn(6, 8, generator=g)
    bits = base.view(torch.int32)  # the same storage seen as another dtype
    caches = torch.randn(3, 4, 2, generator=g)
    named = dict(
        expanded=torch.randn(1, 5, generator=g).expand(4, 5),  # stride 0
        scalar=torch.tensor(2.5, dtype=torch.float64),
        empty=torch.empty(0, 3),
        bf=torch.randn(4, 4, generator=g).to(torch.bfloat16)[1:, ::2],
        mask=torch.arange(6).reshape(2, 3) % 2 == 0,
        f=base[1:3, 2:6],
        i=bits[4:5, :3],
        layers=[caches[0], caches[2].t()],  # a list of views of one storage
        opts={"scale": 0.5, "dt": torch.bfloat16},
    )
    probe.arm("odd")
    probe.capture_inputs("odd", _op="test:odd", **named)
    path = probe.finish()
    seen = tmp_path / "seen"
    r = replay(tmp_path, os.path.dirname(path), "odd", cand("layout_probe"), cand("layout_probe"),
               env={"REPLAY_LAYOUT_OUT": str(seen)})
    assert r.report["op_recorded"] == "test:odd"
    with open("%s.1" % seen) as handle:
        got = json.load(handle)["args"]
    for name, value in named.items():
        if not isinstance(value, torch.Tensor):
            continue
        assert got[name]["dtype"] == str(value.dtype).replace("torch.", ""), name
        assert got[name]["shape"] == list(value.shape), name
        assert got[name]["stride"] == list(value.stride()), name
        assert got[name]["values"] == value.double().reshape(-1).tolist(), name
    # f (float32) and i (int32) share base's storage: one buffer, their byte distance kept
    assert got["f"]["storage_ptr"] == got["i"]["storage_ptr"]
    distance = (named["i"].storage_offset() - named["f"].storage_offset()) * 4
    assert got["i"]["data_ptr"] - got["f"]["data_ptr"] == distance
    assert got["layers"]["type"] == "list"
    for i, view in enumerate(named["layers"]):
        item = got["layers[%d]" % i]
        assert (item["stride"], item["values"]) == (list(view.stride()), view.double().reshape(-1).tolist())
    assert got["layers[0]"]["storage_ptr"] == got["layers[1]"]["storage_ptr"]
    assert got["layers[1]"]["data_ptr"] - got["layers[0]"]["data_ptr"] == 2 * 8 * 4  # caches[2] vs caches[0]
    described = {a["name"]: a for a in r.report["args"]}
    assert described["f"]["shares_storage_with"] == ["i"]
    assert [item["shares_storage_with"] for item in described["layers"]["items"]] == [["layers[1]"], ["layers[0]"]]
    assert described["opts"]["items"][1] == {"name": "opts.dt", "kind": "dtype", "value": "bfloat16"}
    assert r.side("reference")["notes"] == ["f, i share one storage with different dtypes: upcast copies do not share it"]
    assert r.side("candidate")["notes"] == []


def test_an_empty_stage_name_is_picked_as_its_key(probe, tmp_path, dumpview):
    """Issue 31, item 26: a stage captured with an empty name is keyed `#1`, and `--stage '#1'`
    picks it, in replay_op.py and in `dumpview replay` (whose Rust listing finds it first)."""
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 7
    weight = torch.full((4,), 0.5)
    probe.arm("empty")
    probe.capture_inputs("", _op="test:rms", x=x, weight=weight, eps=1e-6)
    dump = os.path.dirname(os.path.dirname(os.path.dirname(probe.finish())))
    r = replay(tmp_path, dump, "#1", "builtin:rms_norm", "builtin:rms_norm")
    assert (r.report["stage"], r.report["op_recorded"]) == ("", "test:rms")
    proc = subprocess.run([dumpview, "replay", dump, "--stage", "#1", "--candidate", "builtin:rms_norm",
                           "--reference", "builtin:rms_norm", "--out", str(tmp_path / "cli")],
                          capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, DUMPVIEW_PYTHON=sys.executable))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "== out: PASS" in proc.stdout, proc.stdout
    listing = subprocess.run([dumpview, "replay", dump, "--list"], capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0 and "#1" in listing.stdout, listing.stdout + listing.stderr


# ----------------------------------------------------------------------------- choosing the window


def _copy_window(src_dump, dest, rank=None, label=None, match=None):
    src = os.path.dirname(next(os.path.join(d, "manifest.json") for d, _s, f in os.walk(src_dump) if "manifest.json" in f))
    manifest = load_manifest(os.path.join(src, "manifest.json"))
    manifest["rank"] = manifest["rank"] if rank is None else rank
    manifest["label"] = manifest["label"] if label is None else label
    manifest["match"] = manifest["match"] if match is None else match
    target = os.path.join(dest, "rank%d" % manifest["rank"], "match%d-occ%d" % (manifest["match"], manifest["occurrence"]))
    shutil.copytree(src, target)
    with open(os.path.join(target, "manifest.json"), "w") as handle:
        json.dump(manifest, handle)
    return target


def test_rank_and_window_pick_one_window_of_a_tree(tmp_path):
    tree = tmp_path / "tree"
    _copy_window(KV_A, tree)
    _copy_window(KV_A, tree, rank=1)
    _copy_window(FP16_B, tree, label="req-other", match=2)
    args = ["--stage", "layers.0.input_norm", "--candidate", "builtin:rms_norm", "--reference", "builtin:rms_norm"]
    proc = run(tree, *args, "--out", tmp_path / "o")
    assert proc.returncode == 2
    assert "has input sets in 3 windows" in proc.stderr and "rank 1" in proc.stderr and "req-other" in proc.stderr
    assert not (tmp_path / "o").exists()

    proc = run(tree, *args, "--rank", "1", "--out", tmp_path / "r1")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r1" / "replay.json").read_text())
    assert report["rank"] == 1 and report["manifest"].endswith(os.path.join("rank1", "match1-occ1", "manifest.json"))

    out = tmp_path / "other"
    proc = run(tree, *args, "--window", "req-other", "--out", out)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "replay.json").read_text())
    assert (report["label"], report["match"], report["rank"]) == ("req-other", 2, 0)
    assert report["sides"]["candidate"]["output_layouts"][0]["dtype"] == "float16"

    # the same selection rules pick what --list shows
    def listed(*selection):
        proc = run(tree, "--list", "--json", *selection)
        assert proc.returncode == 0, proc.stderr
        return [(w["rank"], w["label"]) for w in json.loads(proc.stdout)["windows"]]

    assert listed() == [(0, "req-llama_kv_alias"), (0, "req-other"), (1, "req-llama_kv_alias")]
    assert listed("--rank", "0") == [(0, "req-llama_kv_alias"), (0, "req-other")]
    assert listed("--window", "2") == listed("--window", "match2-occ1") == [(0, "req-other")]
    assert listed("--rank", "1", "--window", "req-llama_kv_alias") == [(1, "req-llama_kv_alias")]
    proc = run(tree, *args, "--rank", "7", "--out", tmp_path / "r7")
    assert proc.returncode == 2 and "no window of rank 7" in proc.stderr
    proc = run(tree, *args, "--window", "nosuch", "--out", tmp_path / "r7")
    assert proc.returncode == 2 and "no window 'nosuch'" in proc.stderr and "req-other" in proc.stderr


def test_of_several_attempts_the_newest_is_used(tmp_path):
    tree = tmp_path / "tree"
    first = _copy_window(FIXTURE, tree)
    second = first + ".2"
    shutil.copytree(first, second)
    manifest = load_manifest(os.path.join(second, "manifest.json"))
    manifest["attempt"] = 2
    manifest["label"] = "second-run"
    with open(os.path.join(second, "manifest.json"), "w") as handle:
        json.dump(manifest, handle)
    proc = run(tree, "--list", "--json")
    assert proc.returncode == 0, proc.stderr
    [window] = json.loads(proc.stdout)["windows"]
    assert (window["label"], window["attempt"]) == ("second-run", 2)
    assert "using attempt 2; left out attempt 1" in proc.stderr


def test_the_manifest_file_and_the_window_directory_work_as_dump(tmp_path):
    manifest = os.path.join(FIXTURE_WINDOW, "manifest.json")
    for i, dump in enumerate((manifest, FIXTURE_WINDOW)):
        r = replay(tmp_path, dump, "attn.layout#2", cand("layout_probe"), cand("layout_probe"), name="m%d" % i)
        assert r.report["dump"] == dump and r.report["manifest"] == manifest
        assert (r.report["stage"], r.report["occurrence"]) == ("attn.layout", 2)
        assert r.report["op_recorded"] is None  # #2 was captured without _op
        assert all(r.side(side)["status"] == "ok" for side in SIDES)


# ----------------------------------------------------------------------------- options


def test_arg_override_and_arg_map(tmp_path):
    r = replay(tmp_path, KV_A, "layers.0.input_norm#1", cand("rms_norm_ok"), "builtin:rms_norm", "--arg", "eps=0.5")
    assert r.report["arg_overrides"] == {"eps": 0.5}
    eps = next(a for a in r.report["args"] if a["name"] == "eps")
    assert eps["value"] == 0.5 and eps["captured_value"] == 1e-06 and eps["overridden"] is True
    _entry, args = load_set(KV_A, "layers.0.input_norm#1")
    exact = hf_rms_norm64(args["x"], args["weight"], 0.5)
    assert_rounding_close(r.outputs["candidate"]["out"], exact)
    torch.testing.assert_close(r.outputs["golden"]["out"], exact, rtol=1e-12, atol=0)

    # renamed to names the candidate does not have: passed positionally, in captured order
    m = replay(tmp_path, KV_A, "layers.0.input_norm#1", cand("rms_norm_ok"), "builtin:rms_norm",
               "--arg-map", "x=hidden_states", "--arg-map", "weight=gamma", name="mapped")
    assert m.report["arg_map"] == {"x": "hidden_states", "weight": "gamma"}
    assert m.report["call"] == "positional" and m.side("reference")["call"] == "positional"
    assert next(a for a in m.report["args"] if a["name"] == "x")["passed_as"] == "hidden_states"
    assert_rounding_close(m.outputs["candidate"]["out"], hf_rms_norm64(args["x"], args["weight"], args["eps"]))

    # a torch function spelled as a dotted name, with an added argument: keywords from its signature
    t = replay(tmp_path, KV_A, "layers.0.input_norm#1", "torch.nn.functional.rms_norm", "builtin:rms_norm",
               "--arg-map", "x=input", "--arg", "normalized_shape=[256]", name="torch_op")
    assert t.side("candidate")["status"] == "ok", t.side("candidate")["exception"]
    assert t.report["call"] == "keywords" and t.side("reference")["call"] == "positional"
    assert t.side("candidate")["resolved"] == "torch.nn.functional.rms_norm"
    assert t.report["arg_overrides"] == {"normalized_shape": [256]}
    assert t.report["args"][-1] == {"name": "normalized_shape", "kind": "list", "value": [256], "overridden": True,
                                    "captured": False}
    assert_rounding_close(t.outputs["candidate"]["out"], hf_rms_norm64(args["x"], args["weight"], args["eps"]))

    bad = run(KV_A, "--stage", "layers.0.input_norm#1", "--candidate", "builtin:rms_norm", "--reference", "builtin:rms_norm",
              "--arg", "x=1", "--out", tmp_path / "bad")
    assert bad.returncode == 2 and "x is a tensor argument of layers.0.input_norm#1" in bad.stderr
    bad = run(KV_A, "--stage", "layers.0.input_norm#1", "--candidate", "builtin:rms_norm", "--reference", "builtin:rms_norm",
              "--arg-map", "nosuch=y", "--out", tmp_path / "bad")
    assert bad.returncode == 2 and "no argument 'nosuch'" in bad.stderr
    assert not (tmp_path / "bad").exists()


def test_candidate_only_runs_the_candidate_alone_and_marks_the_reference_sides_skipped(tmp_path, layout_run):
    full, _calls = layout_run
    seen = tmp_path / "seen"
    r = replay(tmp_path, FIXTURE, "attn.layout#1", cand("layout_probe"), cand("layout_probe"), "--candidate-only",
               "--arg", "eps=0.5", env={"REPLAY_LAYOUT_OUT": str(seen)})
    assert sorted(os.listdir(r.out)) == ["candidate.pt", "replay.json"]
    assert r.report["candidate_only"] is True and full.report["candidate_only"] is False
    # the reference's callable was never called: one call recorded, the candidate's
    assert os.path.exists("%s.1" % seen) and not os.path.exists("%s.2" % seen)
    assert r.side("candidate")["status"] == "ok" and r.side("candidate")["file"] == "candidate.pt"
    assert torch.equal(r.outputs["candidate"]["out"], full.outputs["candidate"]["out"])
    for name in ("reference", "golden", "reference_native"):
        side = r.side(name)
        assert side["status"] == "skipped", name
        assert (side["file"], side["outputs"], side["duration_s"], side["exception"]) == (None, [], None, None)
        assert (side["spec"], side["resolved"]) == (full.side(name)["spec"], full.side(name)["resolved"])
        assert side["input_dtype"] == full.side(name)["input_dtype"], name
        assert side["notes"] == ["not run: --candidate-only (the caller computes this side)"]
    # the rest of the record is what a full replay writes: the input file the caller reads, the overrides
    assert r.report["input_file"] == full.report["input_file"] and os.path.isfile(r.report["input_file"])
    assert r.report["arg_overrides"] == {"eps": 0.5}
    assert [a["name"] for a in r.report["args"]] == [a["name"] for a in full.report["args"]]
    assert "reference %s: skipped (--candidate-only)" % cand("layout_probe") in r.proc.stderr
    # a reference that names nothing is still an input error before anything runs
    bad = run(KV_A, "--stage", "layers.0.input_norm#1", "--candidate", "builtin:rms_norm", "--reference",
              "builtin:nosuch", "--candidate-only", "--out", tmp_path / "bad")
    assert bad.returncode == 2 and "nosuch" in bad.stderr and not (tmp_path / "bad").exists()


def test_a_device_not_available_here_falls_back_to_cpu_and_says_so(tmp_path):
    dump = tmp_path / "npu_dump"
    window = _copy_window(FIXTURE, dump)
    manifest = load_manifest(os.path.join(window, "manifest.json"))
    entry = manifest["input_sets"][0]
    path = os.path.join(window, entry["file"])
    payload = torch.load(path, weights_only=True)
    for name, desc in entry["args"].items():
        if desc["kind"] == "tensor":
            desc["device"] = payload[name]["device"] = "npu:0"
    os.remove(path)
    torch.save(payload, path)
    with open(os.path.join(window, "manifest.json"), "w") as handle:
        json.dump(manifest, handle)
    r = replay(tmp_path, dump, "attn.layout#1", cand("layout_probe"), cand("layout_probe"))
    if r.report["device"] != "cpu":
        pytest.skip("this machine has an npu")
    assert r.report["captured_device"] == "npu:0"
    assert "captured on npu:0" in r.report["device_note"] and "replayed on cpu" in r.report["device_note"]
    assert "captured on npu:0" in r.proc.stderr
    proc = run(dump, "--stage", "attn.layout#1", "--candidate", "builtin:matmul", "--reference", "builtin:matmul",
               "--device", "npu:0", "--out", tmp_path / "x")
    assert proc.returncode == 2 and "--device npu:0: not available here" in proc.stderr


# ----------------------------------------------------------------------------- input errors (exit 2)


def _broken_copy(tmp_path, how):
    dump = tmp_path / ("dump_" + how)
    shutil.copytree(FIXTURE, dump)
    pt = dump / "rank0" / "match1-occ1" / "inputs" / "attn.layout#1.pt"
    if how == "missing":
        pt.unlink()
    elif how == "truncated":
        data = pt.read_bytes()
        pt.write_bytes(data[: len(data) // 2])
    elif how == "evil":
        marker = tmp_path / "PWNED"

        class Evil:
            def __reduce__(self):
                return (os.system, ("touch %s" % marker,))

        # a real torch.save zip whose data.pkl calls posix.system when unpickled without weights_only
        pt.unlink()
        torch.save({"q": Evil()}, str(pt))
        with open(pt, "rb") as handle:
            assert b"system" in handle.read()
    return dump, pt


@pytest.mark.parametrize("how,expected", [
    ("missing", "missing (the file of input set attn.layout#1)"),
    ("truncated", "not a readable torch.save file, truncated or corrupt"),
    ("evil", "refused: holds the pickle global posix.system"),
])
def test_bad_input_files_are_clear_errors_naming_the_file(tmp_path, how, expected):
    dump, pt = _broken_copy(tmp_path, how)
    proc = run(dump, "--stage", "attn.layout#1", "--candidate", cand("layout_probe"), "--reference", cand("layout_probe"),
               "--out", tmp_path / "out")
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("replay_op.py: error: ") and str(pt) in line and expected in line, proc.stderr
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "PWNED").exists()  # the pickle global never ran


def test_a_pickle_global_outside_a_zip_is_refused_too(tmp_path):
    dump = tmp_path / "dump"
    shutil.copytree(FIXTURE, dump)
    pt = dump / "rank0" / "match1-occ1" / "inputs" / "attn.layout#1.pt"
    marker = tmp_path / "PWNED"

    class Evil:
        def __reduce__(self):
            return (os.system, ("touch %s" % marker,))

    # the legacy (non-zip) torch.save layout: a bare pickle stream whose first opcode is a GLOBAL
    blob = pickle.dumps(Evil(), protocol=2)
    assert b"posix\nsystem" in blob
    pt.write_bytes(blob)
    proc = run(dump, "--stage", "attn.layout#1", "--candidate", cand("layout_probe"), "--reference", cand("layout_probe"),
               "--out", tmp_path / "out")
    assert proc.returncode == 2 and str(pt) in proc.stderr and "refused" in proc.stderr, proc.stderr
    assert not (tmp_path / "PWNED").exists()


def test_ambiguous_occurrence_lists_the_ns(tmp_path):
    proc = run(FIXTURE, "--stage", "attn.layout", "--candidate", "builtin:matmul", "--reference", "builtin:matmul",
               "--out", tmp_path / "out")
    assert proc.returncode == 2
    assert "stage 'attn.layout' was captured 2 times; say which: attn.layout#1, attn.layout#2" in proc.stderr
    assert os.path.join(FIXTURE_WINDOW, "manifest.json") in proc.stderr
    proc = run(FIXTURE, "--stage", "attn.layout#3", "--candidate", "builtin:matmul", "--reference", "builtin:matmul",
               "--out", tmp_path / "out")
    assert proc.returncode == 2
    assert "no attn.layout#3; stage 'attn.layout' was captured as attn.layout#1, attn.layout#2" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_unknown_stage_and_other_usage_errors(tmp_path):
    base = ["--candidate", "builtin:rms_norm", "--reference", "builtin:rms_norm", "--out", tmp_path / "out"]
    proc = run(KV_A, "--stage", "layers.0.q_proj", *base)
    assert proc.returncode == 2
    assert "unknown stage 'layers.0.q_proj'" in proc.stderr
    assert "captured input sets: layers.0.input_norm#1, layers.0.rope#1" in proc.stderr
    proc = run(KV_A, "--stage", "layers.0.rope", "--candidate", "builtin:nosuch", "--reference", "builtin:rope_neox",
               "--out", tmp_path / "out")
    assert proc.returncode == 2 and "builtin:nosuch: no such built-in" in proc.stderr
    proc = run(KV_A, "--stage", "layers.0.rope", "--candidate", "no_such_module_xyz:f", "--reference", "builtin:rope_neox")
    assert proc.returncode == 2 and "cannot import no_such_module_xyz" in proc.stderr
    # A module file in the working directory: the error says the file form that loads it.
    (tmp_path / "my_ops.py").write_text("def f(*a, **k):\n    return a[0]\n")
    proc = run(os.path.abspath(KV_A), "--stage", "layers.0.rope", "--candidate", "my_ops:f",
               "--reference", "builtin:rope_neox", "--out", tmp_path / "out", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "my_ops:f: cannot import my_ops (ModuleNotFoundError: No module named 'my_ops'); " \
        "my_ops.py is a file here: give it as ./my_ops.py:f" in proc.stderr, proc.stderr
    proc = run(KV_A, "--stage", "layers.0.rope")
    assert proc.returncode == 2 and "--candidate" in proc.stderr
    proc = run(tmp_path / "nowhere", "--list")
    assert proc.returncode == 2 and "nowhere: no such file or directory" in proc.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run(empty, "--list")
    assert proc.returncode == 2 and "no dump_probe manifest" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_out_is_never_overwritten(tmp_path):
    out = tmp_path / "evidence"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    proc = run(KV_A, "--stage", "layers.0.input_norm", "--candidate", "builtin:rms_norm", "--reference", "builtin:rms_norm",
               "--out", out)
    assert proc.returncode == 2 and "exists and is not empty" in proc.stderr and str(out) in proc.stderr
    assert os.listdir(out) == ["notes.txt"] and (out / "notes.txt").read_text() == "keep me"
    # an empty directory is fine; a second replay into it is then refused
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    first = run(KV_A, "--stage", "layers.0.input_norm", "--candidate", "builtin:rms_norm", "--reference", "builtin:rms_norm",
                "--out", fresh)
    assert first.returncode == 0, first.stderr
    before = {f: (fresh / f).read_bytes() for f in os.listdir(fresh)}
    assert set(before) == {"candidate.pt", "reference.pt", "golden.pt", "reference_native.pt", "replay.json"}
    again = run(KV_A, "--stage", "layers.0.input_norm", "--candidate", "builtin:rms_norm", "--reference", "builtin:rms_norm",
                "--out", fresh)
    assert again.returncode == 2
    assert {f: (fresh / f).read_bytes() for f in os.listdir(fresh)} == before
    # without --out: replay-<stage>#<N> in the working directory, then .2
    for expected in ("replay-layers.0.input_norm#1", "replay-layers.0.input_norm#1.2"):
        proc = run(KV_A, "--stage", "layers.0.input_norm", "--candidate", "builtin:rms_norm", "--reference",
                   "builtin:rms_norm", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / expected / "replay.json").is_file()


# ----------------------------------------------------------------------------- _op (probe side: test_probe_inputs.py)


def test_replay_json_records_the_op_and_old_manifests_give_null(layout_run, rms_fp32):
    r, _calls = layout_run
    assert r.report["op_recorded"] == "tests/python/replay_candidates.py:layout_probe"
    assert rms_fp32.report["op_recorded"] is None


# ----------------------------------------------------------------------------- built-ins against their sources


@pytest.fixture(scope="module")
def replay_op():
    spec = importlib.util.spec_from_file_location("replay_op_under_test", REPLAY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def test_builtin_norms_and_activations(replay_op):
    g = _g()
    x = torch.randn(5, 16, dtype=torch.float64, generator=g)
    r = torch.randn(5, 16, dtype=torch.float64, generator=g)
    w = torch.randn(16, dtype=torch.float64, generator=g)
    b = torch.randn(16, dtype=torch.float64, generator=g)
    rms = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w
    torch.testing.assert_close(replay_op.rms_norm(x, w, 1e-6), rms, rtol=1e-13, atol=0)
    y, s = replay_op.add_rms_norm(x, r, w, 1e-6)
    torch.testing.assert_close(s, x + r, rtol=0, atol=0)
    torch.testing.assert_close(y, replay_op.rms_norm(x + r, w, 1e-6), rtol=1e-13, atol=0)
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    torch.testing.assert_close(replay_op.layer_norm(x, w, b, 1e-5), (x - mean) / torch.sqrt(var + 1e-5) * w + b,
                               rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(replay_op.layer_norm(x), (x - mean) / torch.sqrt(var + 1e-5), rtol=1e-12, atol=1e-14)
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    torch.testing.assert_close(replay_op.softmax(x), e / e.sum(-1, keepdim=True), rtol=1e-13, atol=0)
    torch.testing.assert_close(replay_op.softmax(x, dim=0), torch.exp(x) / torch.exp(x).sum(0), rtol=1e-13, atol=0)
    h1, h2 = x[..., :8], x[..., 8:]
    torch.testing.assert_close(replay_op.silu_and_mul(x), h1 / (1 + torch.exp(-h1)) * h2, rtol=1e-13, atol=1e-15)
    torch.testing.assert_close(replay_op.gelu(x), 0.5 * x * (1 + torch.erf(x / 2 ** 0.5)), rtol=1e-13, atol=1e-15)
    tanh = 0.5 * x * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x ** 3)))
    torch.testing.assert_close(replay_op.gelu_tanh(x), tanh, rtol=1e-13, atol=1e-15)
    torch.testing.assert_close(replay_op.linear(x, w[None, :].repeat(3, 1), b[:3]), x @ w[None, :].repeat(3, 1).T + b[:3])
    torch.testing.assert_close(replay_op.matmul(x, r.T), x @ r.T)
    # float16 inputs reduce in float32 (HF) and return float16; float64 is never narrowed
    assert replay_op.rms_norm(x.half(), w.half(), 1e-6).dtype == torch.float16
    assert replay_op.rms_norm(x, w, 1e-6).dtype == torch.float64


def _rotate_pairs_complex(x, angles):
    """RoFormer's rotation as complex multiplication of interleaved pairs: (x0 + i x1) * e^(i theta)."""
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2)


def test_builtin_rope_layouts_against_the_rotation_they_define(replay_op):
    g = _g(1)
    T, H, D = 6, 3, 8
    q = torch.randn(T, H, D, dtype=torch.float64, generator=g)
    k = torch.randn(T, 1, D, dtype=torch.float64, generator=g)
    pos = torch.tensor([0, 3, 1, 7, 2, 5])
    inv = 1.0 / (10000 ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    theta = pos[:, None].double() * inv[None, :]  # [T, D/2]
    # neox: pair (d, d + D/2) turns by theta_d
    qn, kn = replay_op.rope_neox(q, k, torch.cos(theta), torch.sin(theta))
    as_pairs = torch.stack((q[..., : D // 2], q[..., D // 2:]), -1).flatten(-2)
    turned = _rotate_pairs_complex(as_pairs, theta[:, None, :])
    expected = torch.cat((turned[..., ::2], turned[..., 1::2]), -1)
    torch.testing.assert_close(qn, expected, rtol=1e-13, atol=1e-14)
    # [T, D] tables (cat(theta, theta), as HF builds them) give the same
    full = torch.cat((theta, theta), -1)
    qf, kf = replay_op.rope_neox(q, k, torch.cos(full), torch.sin(full))
    torch.testing.assert_close(qf, qn, rtol=0, atol=0)
    torch.testing.assert_close(kf, kn, rtol=0, atol=0)
    # a [max_pos, D/2] table indexed by positions
    table = torch.arange(8, dtype=torch.float64)[:, None] * inv[None, :]
    qp, _ = replay_op.rope_neox(q, k, torch.cos(table), torch.sin(table), pos)
    torch.testing.assert_close(qp, qn, rtol=0, atol=0)
    # [T, H*D] flattened q (vLLM's layout)
    qflat, _ = replay_op.rope_neox(q.reshape(T, H * D), k.reshape(T, D), torch.cos(full), torch.sin(full))
    torch.testing.assert_close(qflat.reshape(T, H, D), qn, rtol=0, atol=0)
    # gptj: pair (2i, 2i + 1) turns by theta_i
    qg, kg = replay_op.rope_gptj(q, k, torch.cos(theta), torch.sin(theta))
    torch.testing.assert_close(qg, _rotate_pairs_complex(q, theta[:, None, :]), rtol=1e-13, atol=1e-14)
    torch.testing.assert_close(kg, _rotate_pairs_complex(k, theta[:, None, :]), rtol=1e-13, atol=1e-14)
    # partial rotary (HF's rotary_dim < head_dim): a [T, rotary_dim] table turns the first dims only
    # (a table of exactly head_dim / 2 columns is the per-pair form above, so rotary_dim 2 of 8 here)
    part = torch.cat((theta[:, :1], theta[:, :1]), -1)
    qpart, _ = replay_op.rope_neox(q, k, torch.cos(part), torch.sin(part))
    torch.testing.assert_close(qpart[..., 2:], q[..., 2:], rtol=0, atol=0)
    assert not torch.equal(qpart[..., :2], q[..., :2])
    torch.testing.assert_close(qpart[..., :2], replay_op.rope_neox(q[..., :2], k[..., :2], torch.cos(part),
                                                                   torch.sin(part))[0], rtol=0, atol=0)


def test_builtin_sdpa_against_torch(replay_op):
    g = _g(2)
    F = torch.nn.functional
    q = torch.randn(2, 4, 5, 8, dtype=torch.float64, generator=g)
    k = torch.randn(2, 4, 7, 8, dtype=torch.float64, generator=g)
    v = torch.randn(2, 4, 7, 6, dtype=torch.float64, generator=g)
    float_mask = torch.randn(5, 7, dtype=torch.float64, generator=g)
    bool_mask = torch.rand(5, 7, generator=g) > 0.3
    bool_mask[:, 0] = True
    torch.testing.assert_close(replay_op.sdpa(q, k, v), F.scaled_dot_product_attention(q, k, v), rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(replay_op.sdpa(q, k, v, float_mask, 0.3),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask, scale=0.3), rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(replay_op.sdpa(q, k, v, bool_mask),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=bool_mask), rtol=1e-12, atol=1e-13)
    kc, vc = k[:, :, :5], v[:, :, :5]
    torch.testing.assert_close(replay_op.sdpa_causal(q, kc, vc),
                               F.scaled_dot_product_attention(q, kc, vc, is_causal=True), rtol=1e-12, atol=1e-13)
    k2, v2 = k[:, :2], v[:, :2]  # grouped-query attention: 4 query heads over 2 kv heads
    torch.testing.assert_close(replay_op.sdpa(q, k2, v2),
                               F.scaled_dot_product_attention(q, k2, v2, enable_gqa=True), rtol=1e-12, atol=1e-13)


def test_list_builtins():
    proc = run("--list-builtins")
    assert proc.returncode == 0, proc.stderr
    names = [line.split()[0] for line in proc.stdout.splitlines()]
    assert names == ["builtin:" + n for n in ("rms_norm", "add_rms_norm", "layer_norm", "softmax", "silu_and_mul", "gelu",
                                               "gelu_tanh", "rope_neox", "rope_gptj", "linear", "sdpa", "sdpa_causal",
                                               "matmul")]
