"""At exit the probe says what it wrote, or why it wrote nothing (issue 11, item 5), and a re-run
into the same directory records its attempt (item 4). Each case is a fresh interpreter: the
report runs from atexit, and the environment is read at import."""

import json
import os

import pytest

from conftest import run_script, warning_lines

TWO_LABELS = """
    for label in ("first", "second"):
        dp.arm(label)
        dp.capture("x", torch.ones(3))
        dp.finish()
"""


def _run(tmp_path, body=TWO_LABELS, **env):
    full = {"DUMP_PROBE": "1", "DUMP_PROBE_DIR": str(tmp_path / "dumps")}
    full.update(env)
    proc = run_script(body, env=full)
    assert proc.returncode == 0, proc.stderr
    return warning_lines(proc.stderr)


def test_a_written_window_prints_its_path_once(tmp_path):
    path = os.path.join(str(tmp_path / "dumps"), "rank0", "match1-occ1", "manifest.json")
    # x holds 3 token rows (the forward's rows, counted at its first capture): 3 x 5 float32.
    assert _run(tmp_path) == ["dump_probe: wrote %s (1 record, 60 bytes of token rows in rows.f32)" % path]


def test_no_label_matched_says_how_many_labels_were_seen(tmp_path):
    assert _run(tmp_path, DUMP_PROBE_MATCH="5") == [
        "dump_probe: nothing written: no label matched DUMP_PROBE_MATCH=5: 2 labels seen"
    ]
    assert not (tmp_path / "dumps").exists()


def test_an_occurrence_beyond_the_calls_seen_says_so(tmp_path):
    body = """
        for _ in range(2):
            dp.arm("req")
            dp.capture("x", torch.ones(3))
            dp.finish()
    """
    assert _run(tmp_path, body, DUMP_PROBE_OCCURRENCE="3") == [
        "dump_probe: nothing written: DUMP_PROBE_OCCURRENCE=3 is beyond the 2 calls of label 'req' (match 1)"
    ]


def test_arm_never_called_and_a_window_never_finished(tmp_path):
    assert _run(tmp_path, "pass") == ["dump_probe: nothing written: arm() was never called"]
    body = """
        dp.arm("req")
        dp.capture("x", torch.ones(3))
    """
    assert _run(tmp_path, body) == [
        "dump_probe: the window of label 'req' is still armed at exit: finish() was never called, so it was not written"
    ]


def test_ranks_left_out_and_a_disabled_probe_print_nothing(tmp_path):
    assert _run(tmp_path, DUMP_PROBE_RANKS="1") == []
    proc = run_script(TWO_LABELS, env={"DUMP_PROBE": "0", "DUMP_PROBE_DIR": str(tmp_path / "off")})
    assert proc.returncode == 0 and proc.stderr == ""


def test_a_rerun_records_its_attempt_and_the_first_run_stays_attempt_1(tmp_path):
    _run(tmp_path)
    lines = _run(tmp_path)
    base = os.path.join(str(tmp_path / "dumps"), "rank0", "match1-occ1")
    assert lines == [
        "dump_probe: warning: %s already holds a dump; writing %s.2 instead" % (base, base),
        "dump_probe: wrote %s.2%smanifest.json (1 record, 60 bytes of token rows in rows.f32)" % (base, os.sep),
    ]
    with open(os.path.join(base, "manifest.json")) as handle:
        assert json.load(handle)["attempt"] == 1
    with open(os.path.join(base + ".2", "manifest.json")) as handle:
        assert json.load(handle)["attempt"] == 2


def test_a_window_never_finished_keeps_its_input_sets_complete(tmp_path):
    """The window directory was claimed by a host input set: at exit the writer is waited for,
    the file is whole and loadable, and the report names the directory."""
    body = """
        dp.arm("req")
        dp.capture_inputs("op", x=torch.arange(6.0))
        dp.capture("x", torch.ones(3))
    """
    window = os.path.join(str(tmp_path / "dumps"), "rank0", "match1-occ1")
    assert _run(tmp_path, body) == [
        "dump_probe: the window of label 'req' is still armed at exit: finish() was never called, "
        "so it was not written; its input sets are in %s" % window
    ]
    import torch

    saved = torch.load(os.path.join(window, "inputs", "op#1.pt"), weights_only=True)
    assert torch.equal(saved["x"]["span"], torch.arange(6.0))
    assert not os.path.exists(os.path.join(window, "manifest.json"))


def test_a_fork_child_drops_the_open_window_and_the_parent_writes_it_whole(tmp_path):
    """os.fork() after capture_inputs() claimed the window directory: the child inherits a copy
    of the window, but only the parent writes it (before, both published into one directory
    and one window was lost or replaced); the child says so once, and its exit is silent."""
    body = """
        dp.arm("req")
        dp.capture("x", torch.ones(3))
        dp.capture_inputs("op", x=torch.arange(6.0))
        pid = os.fork()
        if pid == 0:
            dp.capture("child_only", torch.ones(2))
            sys.stderr.write("child: finish=%r armed=%r\\n" % (dp.finish(), dp.armed()))
            sys.exit(0)
        _, status = os.waitpid(pid, 0)
        assert status == 0, status
        dp.capture("y", torch.zeros(2))
        dp.finish()
        sys.stderr.write("parent pid %d\\n" % os.getpid())
    """
    lines = _run(tmp_path, body)
    window = os.path.join(str(tmp_path / "dumps"), "rank0", "match1-occ1")
    parent_pid = int(lines[-2].split()[-1])
    assert len(lines) == 4, lines
    assert lines[0].startswith("dump_probe: warning: forked (child pid ")
    assert lines[0].endswith("while the window of label 'req' was open: the parent writes that "
                             "window, so this child records nothing until it arms a window of its own")
    assert lines[1] == "child: finish=None armed=False"
    assert lines[3] == "dump_probe: wrote %s (2 records, 60 bytes of token rows in rows.f32)" % os.path.join(
        window, "manifest.json")
    assert os.listdir(os.path.dirname(window)) == ["match1-occ1"]
    with open(os.path.join(window, "manifest.json")) as handle:
        manifest = json.load(handle)
    assert manifest["pid"] == parent_pid
    assert [r["stage"] for r in manifest["records"]] == ["x", "y"]
    assert [(s["stage"], s["file"]) for s in manifest["input_sets"]] == [("op", "inputs/op#1.pt")]
    assert sorted(os.listdir(os.path.join(window, "inputs"))) == ["op#1.pt"]


def test_a_request_no_forward_held_says_so(tmp_path):
    body = """
        for call in range(2):
            dp.arm("req", rows=[("r0", 4 * call, 4)])
            dp.capture("x", torch.ones(4))
            dp.finish()
    """
    assert _run(tmp_path, body, DUMP_PROBE_REQUEST="nosuch") == [
        "dump_probe: nothing written: no forward's row map held request 'nosuch' (DUMP_PROBE_REQUEST): "
        "2 forwards armed; arm(label, rows=[(request, first_position, count), ...]) names the requests"
    ]
    assert _run(tmp_path, body, DUMP_PROBE_REQUEST="r0", DUMP_PROBE_OCCURRENCE="3-9") == [
        "dump_probe: nothing written: DUMP_PROBE_OCCURRENCE=3-9 is beyond the 2 forwards that held request 'r0'"
    ]


DISK_FULL = """
    import builtins, errno

    real_open = builtins.open

    class Full:
        # a file on a full disk: it is created, every write fails with ENOSPC
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            pass

        def fileno(self):
            return self.handle.fileno()

    def full_open(path, mode="r", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        return Full(handle) if ".tmp." in str(path) else handle

    dp.open = full_open  # the probe's writes go through the module's open()
    dp.arm("req")
    dp.capture("x", torch.ones(3))
    assert dp.finish() is None
    print("PID=%d" % os.getpid())
"""


def test_a_full_disk_names_enospc_and_the_window_at_exit(tmp_path):
    """issue 31, item 18: finish() on a full disk leaves .tmp files; the exit report says which
    window, the errno's name and that the disk was full, instead of "nothing written"."""
    full = {"DUMP_PROBE": "1", "DUMP_PROBE_DIR": str(tmp_path / "dumps")}
    proc = run_script(DISK_FULL, env=full)
    assert proc.returncode == 0, proc.stderr
    pid = int([line for line in proc.stdout.splitlines() if line.startswith("PID=")][0][4:])
    window = os.path.join(str(tmp_path / "dumps"), "rank0", "match1-occ1")
    left = sorted(os.listdir(window))
    assert left and all(".tmp.%d" % pid in name for name in left), left
    assert "manifest.json.tmp.%d" % pid in left
    lines = warning_lines(proc.stderr)
    assert len(lines) == 3, lines  # rows.f32 first (the window goes on without it), then the manifest
    assert lines[0].startswith("dump_probe: warning: token rows not written (OSError: [Errno 28]")
    assert lines[1].startswith("dump_probe: warning: finish failed (OSError: [Errno 28] No space left on device: ")
    assert lines[2] == (
        "dump_probe: the window of label 'req' was not completed: finish() failed with ENOSPC: No space left on "
        "device (writing manifest.json.tmp.%d); %s holds what was written before (files ending .tmp.%d are "
        "incomplete: the disk was full)" % (pid, window, pid))
    assert "nothing written:" not in proc.stderr  # (not the old "the selected window ... was not written")
