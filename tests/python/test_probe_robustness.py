"""The probe never raises into the model it observes: bad inputs and internal failures warn and disarm."""

import os

import pytest
import torch

from conftest import all_manifests, assert_stats_match, load_manifest, record, reference_stats, warning_lines


class Boom(RuntimeError):
    pass


def _boom(*args, **kwargs):
    raise Boom("injected failure")


DISARM_LINE = "dump_probe: warning: %s failed (Boom: injected failure); the probe is disarmed"


def test_capture_of_non_tensor_warns_and_skips(probe, capsys):
    probe.arm("r")
    probe.capture("good", torch.ones(2))
    probe.capture("list", [1.0, 2.0])
    probe.capture("none", None)
    probe.capture("list", [3.0])  # same message: printed once
    probe.capture("good", torch.zeros(2))
    lines = warning_lines(capsys.readouterr().err)
    assert lines == [
        "dump_probe: warning: capture('list') got list, not a tensor; skipped",
        "dump_probe: warning: capture('none') got NoneType, not a tensor; skipped",
    ]
    # skipping a non-tensor does not consume an occurrence, and the window stays usable
    assert probe.armed() is True
    manifest = load_manifest(probe.finish())
    assert [(r["stage"], r["occurrence"], r["seq"]) for r in manifest["records"]] == [("good", 1, 0), ("good", 2, 1)]


class PlainSubclass(torch.Tensor):
    pass


class HostileSubclass(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise Boom("injected failure")


def test_capture_of_benign_tensor_subclass_and_parameter(probe):
    base = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    sub = base.clone().as_subclass(PlainSubclass)
    param = torch.nn.Parameter(base.clone())
    probe.arm("r")
    probe.capture("sub", sub)
    probe.capture("param", param)
    manifest = load_manifest(probe.finish())
    for stage in ("sub", "param"):
        rec = record(manifest, stage)
        assert rec["shape"] == [3, 4] and rec["dtype"] == "float32"
        assert_stats_match(rec["stats"], reference_stats(base))


def test_capture_of_hostile_tensor_subclass_disarms(probe, dump_dir, capsys):
    probe.arm("r")
    probe.capture("before", torch.ones(2))
    hostile = torch.randn(3).as_subclass(HostileSubclass)
    probe.capture("hostile", hostile)  # must not raise
    assert probe.armed() is False
    assert warning_lines(capsys.readouterr().err) == [DISARM_LINE % "capture('hostile')"]
    probe.capture("after", torch.ones(2))
    assert probe.finish() is None
    assert all_manifests(dump_dir) == []


def test_failing_statistics_keep_the_window_with_null_stats(make_probe, dump_dir, capsys, monkeypatch):
    # A tensor torch cannot reduce (float8, sparse) costs its own statistics, not the window.
    probe = make_probe()
    assert probe.arm("r") is True
    probe.capture("ok", torch.ones(2))
    monkeypatch.setattr(probe, "_statistics_by_path", _boom)
    probe.capture("x", torch.ones(4, 2))  # must not raise
    assert probe.armed() is True
    monkeypatch.undo()
    probe.capture("after", torch.ones(3))
    manifest = load_manifest(probe.finish())
    assert [(r["stage"], r["stats"] is None) for r in manifest["records"]] == [("ok", False), ("x", True), ("after", False)]
    err = warning_lines(capsys.readouterr().err)
    assert len(err) == 1 and err[0].startswith("dump_probe: warning: no statistics for torch.float32 tensors"), err


@pytest.mark.parametrize("internal", ["_layout_raw", "_bounded_rows"])
def test_failing_internal_in_capture_disarms(make_probe, dump_dir, capsys, monkeypatch, internal):
    probe = make_probe(DUMP_PROBE_TENSOR=".")
    assert probe.arm("r") is True
    probe.capture("ok", torch.ones(2))
    monkeypatch.setattr(probe, internal, _boom)
    probe.capture("x", torch.ones(4, 2))  # must not raise
    assert probe.armed() is False
    assert warning_lines(capsys.readouterr().err) == [DISARM_LINE % "capture('x')"]
    probe.capture("y", torch.ones(2))
    probe.capture_inputs("op", a=torch.ones(1))
    assert probe.finish() is None
    assert all_manifests(dump_dir) == []
    # the next window is independent of the failed one
    monkeypatch.undo()


def test_failing_internal_in_capture_inputs_disarms(probe, dump_dir, capsys, monkeypatch):
    probe.arm("r")
    monkeypatch.setattr(probe, "_storage_span", _boom)
    probe.capture_inputs("rope", q=torch.ones(2), pos=3)
    assert probe.armed() is False
    assert warning_lines(capsys.readouterr().err) == [DISARM_LINE % "capture_inputs('rope')"]
    assert probe.finish() is None
    assert all_manifests(dump_dir) == []


def test_failing_internal_in_arm_returns_false(probe, dump_dir, capsys, monkeypatch):
    monkeypatch.setattr(probe, "_metadata_value", _boom)
    assert probe.arm("r", token_ids=[1, 2]) is False
    assert probe.armed() is False
    assert warning_lines(capsys.readouterr().err) == [DISARM_LINE % "arm"]
    probe.capture("x", torch.ones(2))
    assert probe.finish() is None
    assert all_manifests(dump_dir) == []


def test_failing_rank_lookup_in_arm_returns_false(probe, capsys, monkeypatch):
    monkeypatch.setattr(probe, "current_rank", _boom)
    assert probe.arm("r") is False
    assert warning_lines(capsys.readouterr().err) == [DISARM_LINE % "arm"]


def test_failing_write_in_finish_warns_and_returns_none(probe, dump_dir, capsys, monkeypatch):
    probe.arm("r")
    probe.capture("x", torch.ones(2))
    monkeypatch.setattr(probe, "_atomic_write_bytes", _boom)
    assert probe.finish() is None
    # The token rows' sidecar is written first: its failure costs the rows alone, then the
    # manifest's costs the window.
    assert warning_lines(capsys.readouterr().err) == [
        "dump_probe: warning: token rows not written (Boom: injected failure); the window is written without them",
        "dump_probe: warning: finish failed (Boom: injected failure); nothing written for this window",
    ]
    assert probe.armed() is False
    assert all_manifests(dump_dir) == []


def test_a_failing_sidecar_write_costs_the_token_rows_alone(probe, dump_dir, capsys, monkeypatch):
    # The sidecar is written on a thread of its own while the manifest is made; the manifest
    # waits for it and, where it failed, names no token rows.
    write = probe._atomic_write_bytes

    def rows_fail(path, chunks):
        if path.endswith(probe.ROWS_FILE):
            raise OSError("disk full")
        write(path, chunks)

    monkeypatch.setattr(probe, "_atomic_write_bytes", rows_fail)
    probe.arm("r")
    probe.capture("x", torch.ones(2))
    path = probe.finish()
    assert warning_lines(capsys.readouterr().err) == [
        "dump_probe: warning: token rows not written (OSError: disk full); the window is written without them",
    ]
    manifest = load_manifest(path)
    assert "token_rows" not in manifest
    assert [r["stage"] for r in manifest["records"]] == ["x"]
    assert not os.path.exists(os.path.join(os.path.dirname(path), probe.ROWS_FILE))


def test_failing_read_back_in_finish(probe, capsys, monkeypatch):
    probe.arm("r")
    probe.capture("x", torch.ones(2))
    monkeypatch.setattr(probe, "_read_back", _boom)
    assert probe.finish() is None
    assert "finish failed (Boom" in capsys.readouterr().err


def test_failing_graph_slot_and_capture_graph(probe, capsys, monkeypatch):
    monkeypatch.setattr(probe, "_stats_dtype", _boom)
    assert probe.graph_slot("g", torch.ones(2)) is False
    monkeypatch.undo()
    assert probe.graph_slot("h", torch.ones(2)) is True
    monkeypatch.setattr(probe, "_statistics_by_path", _boom)
    probe.capture_graph("h", torch.ones(2))  # must not raise
    lines = warning_lines(capsys.readouterr().err)
    assert lines == [DISARM_LINE % "graph_slot('g')"]  # one "disarm" warning per process state
    assert probe._state.slots["h"].meta is None


def test_capture_graph_with_non_tensor_does_not_raise(probe, capsys):
    assert probe.graph_slot("g", torch.ones(2)) is True
    probe.capture_graph("g", "not a tensor")
    assert "capture_graph('g') failed" in capsys.readouterr().err


def test_writing_warning_to_broken_stderr_never_raises(probe, monkeypatch):
    class BrokenStream:
        def write(self, text):
            raise OSError("stderr closed")

    monkeypatch.setattr(probe.sys, "stderr", BrokenStream())
    probe.arm("r")
    probe.capture("x", object())
    probe.capture("y", torch.randn(2).as_subclass(HostileSubclass))  # disarms; its warning cannot be written
    monkeypatch.undo()
    assert probe.armed() is False


def test_unwritable_dump_dir_warns(make_probe, tmp_path, capsys):
    """A DUMP_PROBE_DIR under a regular file is said at import (issue 31, item 20), not at the
    first finish(); the probe stays disarmed."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    probe = make_probe(DUMP_PROBE_DIR=str(blocker / "sub"))
    err = capsys.readouterr().err
    assert err.startswith("dump_probe: warning: DUMP_PROBE_DIR=")
    assert err.count("\n") == 1
    assert probe.arm("r") is False
    probe.capture("x", torch.ones(2))
    assert probe.finish() is None
    assert capsys.readouterr().err == ""


def test_dump_dir_made_unwritable_after_import_warns_at_finish(make_probe, tmp_path, capsys):
    """What changes after import is still one warning, at the write."""
    blocker = tmp_path / "file"
    probe = make_probe(DUMP_PROBE_DIR=str(blocker / "sub"))
    blocker.write_text("not a directory")
    assert probe.arm("r") is True
    probe.capture("x", torch.ones(2))
    assert probe.finish() is None
    err = capsys.readouterr().err
    assert err.startswith("dump_probe: warning: finish failed (")
    assert err.count("\n") == 1


def test_disarm_keeps_later_selected_windows_possible(make_probe, dump_dir, capsys, monkeypatch):
    """A failure closes the current window only; it does not poison the selection counters."""
    probe = make_probe(DUMP_PROBE_RANKS="all")
    assert probe.arm("a") is True
    monkeypatch.setattr(probe, "_layout_raw", _boom)
    probe.capture("x", torch.ones(2))
    monkeypatch.undo()
    assert probe.armed() is False
    assert probe.arm("a") is False  # call 2 of "a": not selected
    assert probe._state.labels == {"a": (1, 2)}
    assert not os.path.exists(dump_dir)


# --------------------------------------------------------------------------- tensors the probe cannot capture
# (issue 31, item 19): that one record or input set is skipped with a warning in the manifest's
# warnings; the rest of the window is written and the probe stays armed.


def _two_tensor():
    from torch.testing._internal.two_tensor import TwoTensor

    return TwoTensor(torch.ones(4), torch.full((4,), 2.0))


def _nested():
    return torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])


UNSUPPORTED = {
    "nested": (_nested, "a nested tensor"),
    "two_tensor": (_two_tensor, "a __torch_dispatch__ subclass (TwoTensor)"),
    "sparse": (lambda: torch.eye(3).to_sparse(), "a sparse_coo tensor"),
}


@pytest.mark.parametrize("kernel", ["torch", "auto"])
@pytest.mark.parametrize("kind", ["nested", "two_tensor"])
def test_unsupported_tensor_in_capture_skips_that_record(make_probe, capsys, kind, kernel):
    make, reason = UNSUPPORTED[kind]
    probe = make_probe(DUMP_PROBE_KERNEL=kernel, DUMP_PROBE_TENSOR=".")
    assert probe.arm("r") is True
    probe.capture("before", torch.ones(3))
    probe.capture("bad", make())  # must not raise
    assert probe.armed() is True
    probe.capture("bad", torch.ones(2))  # a later dense capture of the stage keeps its number
    probe.capture("after", torch.ones(3))
    manifest = load_manifest(probe.finish())  # finish() must not fail on it either
    assert [(r["stage"], r["occurrence"]) for r in manifest["records"]] == [("before", 1), ("bad", 2), ("after", 1)]
    message = ("capture('bad') occurrence 1 skipped: the tensor is %s, which the probe cannot capture "
               "(no statistics, no file); the rest of the window is written" % reason)
    assert manifest["warnings"] == [message]
    assert warning_lines(capsys.readouterr().err) == ["dump_probe: warning: " + message]


@pytest.mark.parametrize("kind", ["sparse", "nested", "two_tensor"])
def test_unsupported_tensor_in_capture_inputs_skips_that_set(make_probe, capsys, kind):
    make, reason = UNSUPPORTED[kind]
    probe = make_probe()
    assert probe.arm("r") is True
    probe.capture("before", torch.ones(3))
    probe.capture_inputs("op", x=torch.ones(2), y=[1, {"z": make()}])  # must not raise
    assert probe.armed() is True
    probe.capture_inputs("op", x=torch.ones(2))
    probe.capture("after", torch.ones(3))
    manifest = load_manifest(probe.finish())
    assert [r["stage"] for r in manifest["records"]] == ["before", "after"]
    assert [(e["stage"], e["occurrence"]) for e in manifest["input_sets"]] == [("op", 2)]
    message = ("capture_inputs('op') occurrence 1 skipped: argument 'y' is %s, which the probe cannot capture "
               "(no statistics, no file); the rest of the window is written" % reason)
    assert manifest["warnings"] == [message]
    assert warning_lines(capsys.readouterr().err) == ["dump_probe: warning: " + message]


@pytest.mark.parametrize("kind", ["sparse", "nested"])
def test_unsupported_tensor_in_graph_slot_gets_no_slot(make_probe, capsys, kind):
    make, reason = UNSUPPORTED[kind]
    probe = make_probe()
    assert probe.arm("r") is True
    probe.capture("before", torch.ones(3))
    bad = make()
    assert probe.graph_slot("g", bad) is False  # must not raise
    probe.capture_graph("g", bad)
    assert probe.armed() is True
    probe.capture("after", torch.ones(3))
    manifest = load_manifest(probe.finish())
    assert [r["stage"] for r in manifest["records"]] == ["before", "after"]
    message = "graph_slot('g'): %s has no slot the graph can write into; not captured" % reason
    assert manifest["warnings"] == [message]
    assert warning_lines(capsys.readouterr().err) == ["dump_probe: warning: " + message]


def test_a_statistics_row_that_cannot_be_read_back_costs_that_record_only(make_probe, capsys):
    """finish()'s one transfer per device failing on one row (a __torch_dispatch__ subclass's
    statistics, as a TwoTensor gave them) leaves that record's stats null, the window written."""
    from torch.testing._internal.two_tensor import TwoTensor

    probe = make_probe(DUMP_PROBE_KERNEL="torch")
    assert probe.arm("r") is True
    probe.capture("a", torch.ones(3))
    probe.capture("b", torch.ones(3))
    row = probe._state.records[1].stats
    probe._state.records[1].stats = TwoTensor(row, row.clone())
    manifest = load_manifest(probe.finish())
    assert [(r["stage"], r["stats"] is None) for r in manifest["records"]] == [("a", False), ("b", True)]
    lines = warning_lines(capsys.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith(
        "dump_probe: warning: statistics of 1 of 2 records could not be read back ("), lines
    assert manifest["warnings"] == [lines[0][len("dump_probe: warning: "):]]


def test_a_sparse_tensor_in_capture_keeps_its_record_and_says_why_its_stats_are_null(make_probe):
    """Issue 31, item 19: a sparse tensor in capture() keeps its record with null statistics,
    and the manifest's warnings say why (nothing said before)."""
    make, _reason = UNSUPPORTED["sparse"]
    probe = make_probe()
    assert probe.arm("r") is True
    probe.capture("sparse", make())
    manifest = load_manifest(probe.finish())
    assert [(r["stage"], r["stats"]) for r in manifest["records"]] == [("sparse", None)]
    assert manifest["warnings"] == [
        "capture('sparse') occurrence 1: a sparse_coo tensor has no statistics the probe can take; "
        "recorded with null stats"]
