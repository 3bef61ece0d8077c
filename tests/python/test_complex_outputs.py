"""Complex tensors are read and judged (issue 31, item 5): `dumpview tensors` on two complex
files saved by torch, and a replay whose candidate returns a complex output, judged by the
Rust reader of candidate.pt (a complex tensor reads as its real view, torch.view_as_real)."""

import json
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
CANDIDATES = os.path.join(HERE, "replay_candidates.py")


def run(dumpview, *args):
    return subprocess.run([dumpview] + [str(a) for a in args], capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, DUMPVIEW_PYTHON=sys.executable, OMP_NUM_THREADS="1"))


def test_tensors_compares_complex_files_as_real_pairs(tmp_path, dumpview):
    a = torch.tensor([[1 + 2j, 3 - 4j], [0.5 + 0j, -1j]], dtype=torch.complex64)
    b = a.clone()
    b[1, 1] = 1j  # one imaginary part's sign flipped: |diff| 2 there
    torch.save({"z": a, "w": a.to(torch.complex128)}, tmp_path / "a.pt")
    torch.save({"z": b, "w": a.to(torch.complex128)}, tmp_path / "b.pt")
    proc = run(dumpview, "tensors", tmp_path / "a.pt", tmp_path / "b.pt", "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    pairs = {p["key"]: p for p in doc["pairs"]}
    z = pairs["z"]["metrics"]
    assert (z["dtype_a"], z["shape"]) == ("float32", [2, 2, 2]), z
    assert (z["max_abs_diff"], z["max_abs_diff_at"]["coords"]) == (2.0, [1, 1, 1]), z
    assert (z["mismatches"], z["allclose"]) == (1, False), z
    w = pairs["w"]["metrics"]
    assert (w["dtype_a"], w["max_abs_diff"], w["allclose"]) == ("float64", 0.0, True), w


def test_a_replay_with_a_complex_output_is_judged(probe, tmp_path, dumpview):
    x = torch.arange(16, dtype=torch.float32).reshape(2, 8) / 8
    probe.arm("fft")
    probe.capture_inputs("spectrum", _op="test:fft", x=x)
    dump = os.path.dirname(os.path.dirname(os.path.dirname(probe.finish())))
    ok = run(dumpview, "replay", dump, "--stage", "spectrum#1", "--candidate", "%s:spectrum" % CANDIDATES,
             "--reference", "%s:spectrum" % CANDIDATES, "--out", tmp_path / "ok", "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(ok.stdout)["verdict"] == "pass", ok.stdout
    bad = run(dumpview, "replay", dump, "--stage", "spectrum#1", "--candidate", "%s:spectrum_conjugated" % CANDIDATES,
              "--reference", "%s:spectrum" % CANDIDATES, "--out", tmp_path / "bad", "--json")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    judged = json.loads(bad.stdout)
    assert judged["verdict"] != "pass", judged
    out = judged["outputs"][0]
    assert out["shape"] == [2, 8, 2], out
