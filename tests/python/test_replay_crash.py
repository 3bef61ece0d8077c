"""assets/replay_op.py when the process dies in a side, and what a side prints.

A segfaulting kernel (simulated with ctypes.string_at(0)) or os._exit leaves no exception to
catch: replay_op.py writes replay.partial.json before each side (the record so far, the side
about to run as "running"), so that dumpview can file the death as that side's crash.  What a
side prints on stdout is kept as <side>.stdout and logged on stderr.
"""

import json
import os
import signal
import subprocess
import sys

from test_replay_op import KV_A, REPLAY, cand, run

STAGE = "layers.0.input_norm#1"


def _partial(out):
    with open(os.path.join(out, "replay.partial.json"), encoding="utf-8") as handle:
        return json.load(handle)


def test_a_segfaulting_candidate_leaves_the_partial_record_naming_it_and_what_it_printed(tmp_path):
    out = tmp_path / "out"
    proc = run(KV_A, "--stage", STAGE, "--candidate", cand("rms_norm_segfaults"), "--reference", "builtin:rms_norm",
               "--out", out)
    assert proc.returncode == -signal.SIGSEGV, proc.stderr
    assert not (out / "replay.json").exists()
    partial = _partial(out)
    assert partial["running"] == "candidate"
    assert partial["sides"]["candidate"]["status"] == "running"
    assert partial["sides"]["candidate"]["spec"] == cand("rms_norm_segfaults")
    assert set(partial["sides"]) == {"candidate"}
    assert partial["stage"] == "layers.0.input_norm" and partial["args"][0]["name"] == "x"
    # The fault handler's stack names the candidate's line.
    assert "Fatal Python error: Segmentation fault" in proc.stderr
    assert "in rms_norm_segfaults" in proc.stderr
    assert (out / "candidate.stdout").read_text() == "rms_norm_segfaults: x (12, 256) stride (256, 1)\n"


def test_os_exit_in_the_candidate_leaves_the_partial_record_too(tmp_path):
    out = tmp_path / "out"
    proc = run(KV_A, "--stage", STAGE, "--candidate", cand("rms_norm_exits"), "--reference", "builtin:rms_norm",
               "--out", out)
    assert proc.returncode == 3, proc.stderr
    assert _partial(out)["running"] == "candidate"
    assert not (out / "candidate.stdout").exists() or (out / "candidate.stdout").read_text() == ""


def test_a_reference_dying_leaves_the_finished_candidate(tmp_path):
    # A float32 capture: the reference run is float64 already, and dies.
    out = tmp_path / "out"
    proc = run(KV_A, "--stage", STAGE, "--candidate", cand("rms_norm_exact"), "--reference",
               cand("rms_norm_reference_segfaults"), "--out", out)
    assert proc.returncode == -signal.SIGSEGV, proc.stderr
    partial = _partial(out)
    assert partial["running"] == "reference"
    assert partial["sides"]["candidate"]["status"] == "ok"
    assert partial["sides"]["reference"]["status"] == "running"
    assert set(partial["sides"]) == {"candidate", "reference"}
    assert (out / "candidate.pt").is_file() and not (out / "reference.pt").exists()


def test_a_finished_replay_removes_the_partial_record_and_keeps_what_the_candidate_printed(tmp_path):
    out = tmp_path / "out"
    proc = run(KV_A, "--stage", STAGE, "--candidate", cand("rms_norm_prints"), "--reference", "builtin:rms_norm",
               "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(out)) == ["candidate.pt", "candidate.stdout", "golden.pt", "reference.pt",
                                       "reference_native.pt", "replay.json"]
    printed = "rms_norm_prints: x (12, 256) float32\nrms_norm_prints: eps 1e-06\n"
    assert (out / "candidate.stdout").read_text() == printed
    assert proc.stdout == "", "a side's prints go to its file, not to replay_op.py's stdout"
    logged = [l for l in proc.stderr.splitlines() if "stdout:" in l]
    assert logged == ["replay_op: candidate stdout: rms_norm_prints: x (12, 256) float32",
                      "replay_op: candidate stdout: rms_norm_prints: eps 1e-06"]
    report = json.loads((out / "replay.json").read_text())
    assert report["sides"]["candidate"]["stdout"] == "candidate.stdout"
    assert report["sides"]["reference"]["stdout"] is None


def test_a_python_without_torch_says_so_in_one_line(tmp_path):
    # -S: no site-packages, so no torch, on the same interpreter.
    proc = subprocess.run([sys.executable, "-S", REPLAY, KV_A, "--stage", STAGE, "--candidate", "builtin:rms_norm",
                           "--reference", "builtin:rms_norm", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("replay_op.py: error: cannot import torch: ModuleNotFoundError: No module named 'torch'")
    assert not (tmp_path / "out").exists()
