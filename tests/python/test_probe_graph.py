"""Graph slots (graph_slot / capture_graph) exercised on CPU, outside any graph."""

import os

import pytest
import torch

from conftest import assert_stats_match, load_manifest, parse_safetensors, reference_stats


def test_slot_then_arm_and_finish_writes_graph_records(probe):
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    y = torch.arange(10, dtype=torch.int64).reshape(2, 5).t()
    assert probe.graph_slot("attn", x) is True
    assert probe.graph_slot("ids", y) is True
    # capture_graph is not gated on arm(): it runs before the request (as during graph capture)
    assert probe.armed() is False
    probe.capture_graph("attn", x)
    probe.capture_graph("ids", y)
    assert probe.arm("r") is True
    probe.capture("eager", torch.ones(2))
    manifest = load_manifest(probe.finish())
    recs = manifest["records"]
    assert [(r["seq"], r["stage"], r["occurrence"], r["mode"]) for r in recs] == [
        (0, "eager", 1, "eager"), (1, "attn", 1, "graph"), (2, "ids", 1, "graph"),
    ]
    assert_stats_match(recs[1]["stats"], reference_stats(x))
    assert_stats_match(recs[2]["stats"], reference_stats(y))
    # layout is that of the tensor seen by capture_graph
    assert recs[2]["shape"] == [5, 2] and recs[2]["stride"] == [1, 5] and recs[2]["is_contiguous"] is False
    assert recs[2]["storage_ptr"] == y.untyped_storage().data_ptr()
    assert recs[1]["tensor_file"] is None and "rows_kept" not in recs[1]


def test_slot_reads_latest_values_at_finish(probe):
    """Slot stats are read in finish(): the last capture_graph (the last replay) wins."""
    x = torch.zeros(3, 2)
    probe.graph_slot("h", x)
    probe.capture_graph("h", x)
    x.fill_(5.0)  # a 'replay' writes the slot again with new values
    probe.capture_graph("h", x)
    probe.arm("r")
    rec = load_manifest(probe.finish())["records"][0]
    assert rec["stats"]["mean"] == 5.0 and rec["stats"]["max"] == 5.0


def test_slot_with_saved_tensor(make_probe):
    probe = make_probe(DUMP_PROBE_TENSOR="^logits$", DUMP_PROBE_ROWS="2")
    like = torch.empty(5, 3)
    assert probe.graph_slot("logits", like) is True
    assert probe.graph_slot("hidden", like) is True
    assert probe._state.slots["logits"].tensor.shape == (2, 3)
    assert probe._state.slots["hidden"].tensor is None
    value = torch.arange(15.0).reshape(5, 3)
    probe.capture_graph("logits", value)
    probe.capture_graph("hidden", value)
    probe.arm("r")
    path = probe.finish()
    recs = {r["stage"]: r for r in load_manifest(path)["records"]}
    logits = recs["logits"]
    assert logits["tensor_file"] == "tensors/logits#1.safetensors"
    assert (logits["rows_kept"], logits["rows_total"], logits["truncated"]) == (2, 5, True)
    saved = parse_safetensors(os.path.join(os.path.dirname(path), logits["tensor_file"]))[1]["logits#1"]
    assert torch.equal(saved, value[:2])
    assert recs["hidden"]["tensor_file"] is None
    assert_stats_match(logits["stats"], reference_stats(value))


def test_slot_stats_survive_windows(make_probe):
    """Slots are process-wide: every later window reports them (after each replay)."""
    probe = make_probe(DUMP_PROBE_RANKS="all", DUMP_PROBE_OCCURRENCE="1", DUMP_PROBE_MATCH="1")
    probe.graph_slot("g", torch.ones(2))
    probe.capture_graph("g", torch.full((2,), 3.0))
    probe.arm("r")
    first = load_manifest(probe.finish())
    assert [r["stats"]["max"] for r in first["records"]] == [3.0]


def test_capture_graph_without_slot_is_noop(probe, capsys, monkeypatch):
    monkeypatch.setattr(probe, "_statistics", lambda *a, **k: pytest.fail("no slot: no work"))
    probe.capture_graph("unknown", torch.ones(2))
    probe.arm("r")
    probe.capture_graph("unknown", torch.ones(2))
    monkeypatch.undo()
    manifest = load_manifest(probe.finish())
    assert manifest["records"] == []
    assert capsys.readouterr().err == ""


def test_slot_allocated_but_never_written_is_not_reported(probe):
    probe.graph_slot("never", torch.ones(2))
    probe.graph_slot("written", torch.ones(2))
    probe.capture_graph("written", torch.ones(2))
    probe.arm("r")
    recs = load_manifest(probe.finish())["records"]
    assert [(r["stage"], r["seq"]) for r in recs] == [("written", 0)]


def test_graph_slot_is_idempotent_and_ordered_by_allocation(probe):
    assert probe.graph_slot("b", torch.ones(2)) is True
    assert probe.graph_slot("a", torch.ones(2)) is True
    first = probe._state.slots["b"]
    assert probe.graph_slot("b", torch.ones(7)) is True
    assert probe._state.slots["b"] is first
    probe.capture_graph("a", torch.ones(2))
    probe.capture_graph("b", torch.ones(2))
    probe.arm("r")
    assert [r["stage"] for r in load_manifest(probe.finish())["records"]] == ["b", "a"]


def test_slot_stats_buffer_is_preallocated_and_reused(probe):
    """capture_graph writes into the slot's own buffers (copy_), never rebinding them."""
    probe.graph_slot("g", torch.ones(3))
    stats = probe._state.slots["g"].stats
    ptr = stats.data_ptr()
    assert stats.dtype == torch.float64 and stats.dim() == 1
    probe.capture_graph("g", torch.ones(3))
    probe.capture_graph("g", torch.zeros(3))
    assert probe._state.slots["g"].stats is stats and stats.data_ptr() == ptr


@pytest.mark.parametrize("env", [{"DUMP_PROBE": "0"}, {"DUMP_PROBE": None}, {"DUMP_PROBE_MATCH": "zero"}])
def test_graph_slot_noop_when_probe_off_or_invalid(make_probe, dump_dir, env):
    probe = make_probe(**env)
    assert probe.graph_slot("g", torch.ones(2)) is False
    assert probe._state.slots == {}
    probe.capture_graph("g", torch.ones(2))
    assert probe.arm("r") is False
    assert not os.path.exists(dump_dir)


def test_graph_slot_on_unselected_rank_allocates_but_writes_nothing(make_probe, dump_dir, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    probe = make_probe()
    assert probe.graph_slot("g", torch.ones(2)) is True
    probe.capture_graph("g", torch.ones(2))
    assert probe.arm("r") is False
    assert probe.finish() is None
    assert not os.path.exists(dump_dir)


def test_capture_graph_of_empty_tensor_never_raises(probe, capsys):
    """An empty tensor has no statistics; capture_graph must still not raise into the model."""
    assert probe.graph_slot("g", torch.ones(2)) is True
    probe.capture_graph("g", torch.empty(0))
    capsys.readouterr()
    # whatever it recorded, a later window still opens and writes a manifest
    assert probe.arm("r") is True
    probe.capture("x", torch.ones(2))
    manifest = load_manifest(probe.finish())
    assert [r["stage"] for r in manifest["records"] if r["mode"] == "eager"] == ["x"]
    for rec in manifest["records"]:
        if rec["mode"] == "graph":
            assert rec["numel"] == 0 and (rec["stats"] is None or rec["stats"]["finite_count"] == 0)
