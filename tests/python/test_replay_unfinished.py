"""assets/replay_op.py on unfinished windows: probe window directories without manifest.json.

Every window here is made by the real probe in a subprocess (conftest.run_script) that stops
the way a crashing run stops: SIGKILL or os._exit(0) right after capture_inputs() wrote its
set (the operator the set was captured for "crashed"), os._exit inside the probe's own file
write (a cut-off ``.tmp.<pid>``), or os._exit after the probe claimed the directory and before
it wrote anything.  Expected values are computed here from the tensors the script captured.
"""

import json
import os
import textwrap

import torch

from conftest import run_script
from test_replay_op import SIDES, assert_rounding_close, cand, hf_rms_norm64, replay, run

NOTE = "an unfinished window: no manifest.json"

# _wait(names): until the probe's writer thread has published exactly these files in the
# window's inputs/ (the process is then stopped the way the test needs).
WAIT_THEN = """
import glob, signal, time
def _wait(names):
    rank = "rank" + os.environ.get("RANK", "0")
    inputs = os.path.join(os.environ["DUMP_PROBE_DIR"], rank, os.environ["WINDOW"], "inputs")
    deadline = time.time() + 60
    while time.time() < deadline:
        have = sorted(os.listdir(inputs)) if os.path.isdir(inputs) else []
        if have == sorted(names):
            return
        time.sleep(0.01)
    raise SystemExit("the writer thread did not write %r in 60 s" % (names,))
"""


def probe_run(dump, body, window="match1-occ1"):
    """Runs ``body`` (after WAIT_THEN) with the probe armed into ``dump``; returns the process."""
    return run_script(WAIT_THEN + textwrap.dedent(body), env={"DUMP_PROBE": "1", "DUMP_PROBE_DIR": str(dump), "WINDOW": window})


def killed_in_rms_norm(dump, expect, window="match1-occ1"):
    """A run SIGKILLed right after capturing the input sets of a norm (stage "layers.0/norm": a
    '/' the file name sanitises) and an attention op whose k and v are views of one cache."""
    proc = probe_run(dump, """
        torch.manual_seed(0)
        assert dp.arm("req-crash") is True
        x = torch.randn(3, 16)[:, ::2]  # a strided view
        weight = torch.rand(8) + 0.5
        dp.capture_inputs("layers.0/norm", _op="torch.rms_norm", x=x, weight=weight, eps=1e-6)
        cache = torch.randn(2, 4, 3)
        dp.capture_inputs("attn", k=cache[0], v=cache[1].t(), scale=0.5)
        torch.save({"x": x, "weight": weight, "k": cache[0], "v": cache[1].t()}, %r)
        _wait(["attn#1.pt", "layers.0_norm#1.pt"])
        os.kill(os.getpid(), signal.SIGKILL)  # the operator took the process down
        print("NOT REACHED")
    """ % str(expect), window)
    assert proc.returncode == -9, (proc.returncode, proc.stdout, proc.stderr)
    assert "NOT REACHED" not in proc.stdout
    directory = dump / "rank0" / window
    assert sorted(os.listdir(directory)) == ["inputs"]  # no manifest.json: finish() never ran
    return str(directory)


def test_a_killed_run_replays_from_its_window_directory_and_its_tree(tmp_path):
    dump, expect = tmp_path / "dump", tmp_path / "expect.pt"
    window = killed_in_rms_norm(dump, expect)
    captured = torch.load(expect, weights_only=True)
    for name, target in (("dir", window), ("tree", str(dump))):
        r = replay(tmp_path, target, "layers.0_norm#1", "builtin:rms_norm", "builtin:rms_norm", name=name)
        assert r.proc.stderr.count(NOTE) == 1, r.proc.stderr
        assert "stage names as the file names spell them" in r.proc.stderr
        assert "each tensor argument is rebuilt on a storage of its own" in r.proc.stderr
        report = r.report
        assert (report["manifest"], report["window_unfinished"], report["window_dir"]) == (None, True, window)
        assert (report["rank"], report["label"], report["match"], report["occurrence_window"], report["attempt"]) == (
            0, None, 1, 1, 1)
        assert (report["stage"], report["occurrence"], report["op_recorded"]) == ("layers.0_norm", 1, None)
        assert report["input_file"] == os.path.join(window, "inputs", "layers.0_norm#1.pt")
        args = {a["name"]: a for a in report["args"]}
        assert list(args) == ["x", "weight", "eps"]  # captured order, from the .pt alone
        assert (args["x"]["shape"], args["x"]["stride"]) == ([3, 8], [16, 2])
        assert args["eps"]["value"] == 1e-6
        assert all(r.side(side)["status"] == "ok" for side in SIDES)
        exact = hf_rms_norm64(captured["x"], captured["weight"], 1e-6)
        assert_rounding_close(r.outputs["candidate"]["out"], exact)
        assert torch.equal(r.outputs["golden"]["out"], exact)


def test_storage_sharing_is_unknown_without_the_manifest_each_tensor_gets_its_own(tmp_path):
    dump, expect = tmp_path / "dump", tmp_path / "expect.pt"
    window = killed_in_rms_norm(dump, expect)
    captured = torch.load(expect, weights_only=True)
    seen = tmp_path / "seen"
    r = replay(tmp_path, window, "attn", cand("layout_probe"), cand("layout_probe"),
               env={"REPLAY_LAYOUT_OUT": str(seen)})
    with open("%s.1" % seen) as handle:
        got = json.load(handle)
    for name in ("k", "v"):
        value = captured[name]
        assert got["args"][name]["stride"] == list(value.stride()), name
        assert got["args"][name]["values"] == value.double().reshape(-1).tolist(), name
    assert got["shared"] == []  # k and v were views of one cache; that is recorded only in a manifest
    described = {a["name"]: a for a in r.report["args"]}
    assert (described["k"]["storage_id"], described["k"]["shares_storage_with"]) == (None, [])
    assert described["scale"]["value"] == 0.5


def test_list_marks_unfinished_windows_and_collided_names_pick_by_file_stem(tmp_path):
    dump = tmp_path / "dump"
    proc = probe_run(dump, """
        assert dp.arm("r") is True
        dp.capture_inputs("a/b", t=torch.arange(3.0))
        dp.capture_inputs("a_b", t=torch.arange(4.0) * 10)
        _wait(["a_b#1.2.pt", "a_b#1.pt"])
        os._exit(0)
    """)
    assert proc.returncode == 0, proc.stderr
    window = str(dump / "rank0" / "match1-occ1")
    listed = run(dump, "--list", "--json")
    assert listed.returncode == 0, listed.stderr
    [w] = json.loads(listed.stdout)["windows"]
    assert (w["manifest"], w["directory"], w["unfinished"], w["rank"], w["label"], w["match"], w["attempt"]) == (
        None, window, True, 0, None, 1, 1)
    assert w["note"].startswith("no manifest.json (the run stopped before finish()")
    assert w["cut_off"] == []
    assert [(s["key"], s["stage"], s["occurrence"], s["file"], s["file_present"], s["args"]) for s in w["input_sets"]] == [
        ("a_b#1", "a_b", 1, "inputs/a_b#1.pt", True, []),
        ("a_b#1.2", "a_b", 1, "inputs/a_b#1.2.pt", True, []),
    ]
    text = run(dump, "--list").stdout.splitlines()
    assert text[0] == "%s  UNFINISHED  rank 0  match 1  occurrence 1" % window
    assert text[1].startswith("  no manifest.json")
    assert text[2:] == ["  a_b#1  (stage captured 2 times)", "  a_b#1.2  (stage captured 2 times)"]

    ambiguous = run(dump, "--stage", "a_b", "--candidate", "builtin:softmax", "--reference", "builtin:softmax",
                    "--out", tmp_path / "x")
    assert ambiguous.returncode == 2
    assert "stage 'a_b' was captured 2 times; say which: a_b#1, a_b#1.2" in ambiguous.stderr
    for key, expected in (("a_b#1", torch.arange(3.0)), ("a_b#1.2", torch.arange(4.0) * 10)):
        seen = tmp_path / ("seen" + key)
        r = replay(tmp_path, dump, key, cand("layout_probe"), cand("layout_probe"), name=key,
                   env={"REPLAY_LAYOUT_OUT": str(seen)})
        with open("%s.1" % seen) as handle:
            assert json.load(handle)["args"]["t"]["values"] == expected.tolist()
        assert r.report["input_file"] == os.path.join(window, "inputs", key + ".pt")


def test_a_cut_off_write_or_an_empty_window_is_no_input_set(tmp_path):
    cut = tmp_path / "cut"
    proc = probe_run(cut, """
        real_open = open
        def dying_open(path, mode="r", *args, **kwargs):
            handle = real_open(path, mode, *args, **kwargs)
            if ".pt.tmp." in os.fspath(path):
                handle.write(b"PK")  # the first bytes of the zip torch.save writes, then the end
                handle.flush()
                os._exit(0)
            return handle
        dp.open = dying_open  # module global shadows the builtin inside dump_probe only
        assert dp.arm("r") is True
        dp.capture_inputs("op", a=torch.ones(3))
        dp._state.window["writer"].close()
        print("NOT REACHED")
    """)
    assert proc.returncode == 0 and "NOT REACHED" not in proc.stdout, (proc.stdout, proc.stderr)
    window = cut / "rank0" / "match1-occ1"
    [tmp] = os.listdir(window / "inputs")
    assert tmp.startswith("op#1.pt.tmp.")
    args = ["--stage", "op", "--candidate", "builtin:softmax", "--reference", "builtin:softmax"]
    for target in (window, cut):
        proc = run(target, *args, "--out", tmp_path / "never")
        assert proc.returncode == 2
        assert "no complete input set, only cut-off writes (inputs/%s" % tmp in proc.stderr
    listed = run(cut, "--list")
    assert listed.returncode == 2 and "no dump_probe manifest (manifest.json) found; 1 unfinished window without input sets" \
        in listed.stderr

    empty = tmp_path / "empty"
    proc = probe_run(empty, """
        def never_written(obj, path):
            os._exit(0)  # killed after the window directory was claimed, before its first file
        dp._atomic_torch_save = never_written
        assert dp.arm("r") is True
        dp.capture_inputs("op", a=torch.ones(3))
        dp._state.window["writer"].close()
        print("NOT REACHED")
    """)
    assert proc.returncode == 0 and "NOT REACHED" not in proc.stdout, (proc.stdout, proc.stderr)
    window = empty / "rank0" / "match1-occ1"
    assert os.listdir(window) == ["inputs"] and os.listdir(window / "inputs") == []
    proc = run(window, *args, "--out", tmp_path / "never")
    assert proc.returncode == 2
    assert "an unfinished window (no manifest.json) with nothing under inputs/" in proc.stderr
    assert not (tmp_path / "never").exists()


def test_attempts_a_finished_one_and_a_killed_rerun(tmp_path):
    dump, expect = tmp_path / "dump", tmp_path / "expect.pt"
    proc = run_script("""
        assert dp.arm("req-crash") is True
        dp.capture_inputs("layers.0/norm", x=torch.full((2, 4), 2.0), weight=torch.ones(4), eps=1e-6)
        dp.finish()
    """, env={"DUMP_PROBE": "1", "DUMP_PROBE_DIR": str(dump)})
    assert proc.returncode == 0, proc.stderr
    rerun = killed_in_rms_norm(dump, expect, window="match1-occ1.2")
    args = ["--stage", "layers.0_norm#1", "--candidate", "builtin:rms_norm", "--reference", "builtin:rms_norm"]

    # The newest attempt, the killed one, holds the set the crash was captured in.
    r = replay(tmp_path, dump, *args[1::2], name="newest")
    assert (r.report["attempt"], r.report["window_dir"], r.report["window_unfinished"]) == (2, rerun, True)
    assert "using attempt 2 (unfinished: no manifest.json); left out attempt 1" in r.proc.stderr
    # --attempt 1: the finished run, by its manifest, which spells the stage as captured.
    proc = run(dump, "--stage", "layers.0/norm#1", *args[2:], "--attempt", "1", "--out", tmp_path / "first")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "first" / "replay.json").read_text())
    assert (report["attempt"], report["window_unfinished"], report["label"]) == (1, False, "req-crash")
    assert "left out attempt 2 (unfinished), as --attempt 1 asked" in proc.stderr
    # An attempt the window does not have is an error listing those it has.
    proc = run(dump, *args, "--attempt", "3", "--out", tmp_path / "third")
    assert proc.returncode == 2
    assert ("--attempt 3: no such attempt; rank 0 match 1 occurrence 1 in %s has attempts 1 (finished), "
            "2 (unfinished, 2 input sets)" % (dump / "rank0")) in proc.stderr
    assert not (tmp_path / "third").exists()
    listed = run(dump, "--list", "--json", "--attempt", "1")
    assert [w["attempt"] for w in json.loads(listed.stdout)["windows"]] == [1]


def test_a_stage_held_by_a_finished_and_an_unfinished_window_is_ambiguous(tmp_path):
    """Rank 0 finished, rank 1 killed after the same capture_inputs(): --stage names both, so it
    is the two-windows error (the unfinished one's file-stem key must not win on its own);
    --rank picks either."""
    dump = tmp_path / "dump"
    body = """
        assert dp.arm("req") is True
        dp.capture_inputs("norm", x=torch.ones(2, 4), weight=torch.ones(4), eps=1e-6)
        if os.environ["RANK"] == "1":
            _wait(["norm#1.pt"])
            os._exit(0)
        assert dp.finish()
    """
    for rank in ("0", "1"):
        proc = run_script(WAIT_THEN + textwrap.dedent(body), env={
            "DUMP_PROBE": "1", "DUMP_PROBE_DIR": str(dump), "DUMP_PROBE_RANKS": "all", "WINDOW": "match1-occ1",
            "RANK": rank, "WORLD_SIZE": "2"})
        assert proc.returncode == 0, proc.stderr
    assert os.listdir(dump / "rank1" / "match1-occ1") == ["inputs"]
    for stage in ("norm#1", "norm"):
        proc = run(dump, "--stage", stage, "--candidate", "builtin:rms_norm", "--reference", "builtin:rms_norm",
                   "--out", tmp_path / "both")
        assert proc.returncode == 2, proc.stderr
        assert "stage 'norm' has input sets in 2 windows" in proc.stderr, proc.stderr
    for rank, unfinished in (("0", False), ("1", True)):
        r = replay(tmp_path, dump, "norm#1", "builtin:rms_norm", "builtin:rms_norm", "--rank", rank,
                   name="rank" + rank)
        assert r.proc.returncode == 0, r.proc.stderr
        assert (r.report["rank"], r.report.get("window_unfinished")) == (int(rank), unfinished)


def test_with_sync_inputs_a_set_is_on_disk_before_the_operator_can_abort_the_process(tmp_path):
    """DUMP_PROBE_SYNC_INPUTS=1: capture_inputs() returns after its file is written, so an
    operator that aborts the process at once (no wait for the writer thread) leaves its set."""
    dump = tmp_path / "dump"
    proc = run_script("""
        torch.manual_seed(0)
        assert dp.arm("req") is True
        x = torch.randn(64, 32)
        weight = torch.rand(32) + 0.5
        dp.capture_inputs("norm", x=x, weight=weight, eps=1e-6)
        torch.save({"x": x, "weight": weight}, %r)
        os.abort()  # the operator took the process down
    """ % str(tmp_path / "expect.pt"), env={"DUMP_PROBE": "1", "DUMP_PROBE_DIR": str(dump), "DUMP_PROBE_SYNC_INPUTS": "1"})
    assert proc.returncode == -6, (proc.returncode, proc.stderr)
    window = dump / "rank0" / "match1-occ1"
    assert os.listdir(window / "inputs") == ["norm#1.pt"]
    r = replay(tmp_path, str(window), "norm#1", "builtin:rms_norm", "builtin:rms_norm")
    assert r.report["window_unfinished"] is True
    captured = torch.load(tmp_path / "expect.pt", weights_only=True)
    # The golden side is float64 from the replayed inputs: equal to it from the captured ones.
    assert torch.equal(r.outputs["golden"]["out"], hf_rms_norm64(captured["x"], captured["weight"], 1e-6))


def test_an_unknown_stage_in_an_unfinished_window_points_at_its_file_name_or_its_cut_off_write(tmp_path):
    dump, expect = tmp_path / "dump", tmp_path / "expect.pt"
    window = killed_in_rms_norm(dump, expect)
    # The stage as the model names it; the file name sanitised its '/'.
    proc = run(window, "--stage", "layers.0/norm#1", "--candidate", "builtin:rms_norm", "--reference",
               "builtin:rms_norm", "--out", tmp_path / "never")
    assert proc.returncode == 2
    assert "unknown stage 'layers.0/norm'" in proc.stderr
    assert "became '_': --stage layers.0_norm#1" in proc.stderr, proc.stderr
    # A set whose write the kill cut off (the probe's temporary name for it).
    cut = os.path.join(window, "inputs", "big#1.pt.tmp.4242")
    with open(cut, "wb") as handle:
        handle.write(b"PK")
    proc = run(window, "--stage", "big", "--candidate", "builtin:rms_norm", "--reference", "builtin:rms_norm",
               "--out", tmp_path / "never")
    assert proc.returncode == 2
    assert "%s: its write was cut off when the run was killed" % cut in proc.stderr, proc.stderr
