"""Graph slots (graph_slot / capture_graph) exercised on CPU, outside any graph.

The CPU emulation of a graph replay: graph_slot() (any time, usually before the
request), then arm(), then capture_graph() (what the replay executes), then
finish().  arm() fills every slot's statistics with NaN on the device; finish()
drops, with one warning, a slot still holding that sentinel: it was not written
by a replay inside the window, so its values would be stale.
"""

import os
import struct

import pytest
import torch

from conftest import assert_stats_match, load_manifest, parse_safetensors, reference_stats, warning_lines

STALE = "dump_probe: warning: graph slot %r was not written by a replay in this window; not reported"


def _next_window(probe, label="r"):
    """Open the next window of ``label`` in the same process state (slots, storage ids and warnings kept).

    Selection opens one window per (label, call); moving the selected call on lets one
    probe state serve several windows, as a long-running server's slots would.
    """
    calls = probe._state.labels.get(label, (0, 0))[1]
    probe._config.occurrences = (calls + 1, calls + 1)
    assert probe.arm(label) is True


def test_slot_then_arm_replay_and_finish_writes_graph_records(probe):
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    y = torch.arange(10, dtype=torch.int64).reshape(2, 5).t()
    # slots are allocated before the request, outside any window
    assert probe.graph_slot("attn", x) is True
    assert probe.graph_slot("ids", y) is True
    assert probe.armed() is False
    assert probe.arm("r") is True
    # the replay: capture_graph writes the slots (it is not gated on armed(); here it is armed anyway)
    probe.capture_graph("attn", x)
    probe.capture_graph("ids", y)
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
    # storage ids in first-seen order: x (replay), y (replay), then the eager tensor
    assert [r["storage_id"] for r in recs] == [3, 1, 2]
    assert recs[1]["tensor_file"] is None and "rows_kept" not in recs[1]


def test_slot_written_only_before_arm_yields_no_graph_record(probe, capsys):
    """A write before arm() (a warm-up, a replay of another request) is stale in the window."""
    x = torch.full((3,), 7.0)
    probe.graph_slot("g", x)
    probe.capture_graph("g", x)
    assert probe._state.slots["g"].stats[2].item() == 7.0  # the write did happen (min)
    capsys.readouterr()
    assert probe.arm("r") is True
    stats = probe._state.slots["g"].stats
    assert torch.isnan(stats).all().item()  # arm() wrote the sentinel over the stale values
    probe.capture("eager", torch.ones(2))
    manifest = load_manifest(probe.finish())
    assert [(r["stage"], r["mode"]) for r in manifest["records"]] == [("eager", "eager")]
    assert warning_lines(capsys.readouterr().err) == [STALE % "g"]


def test_slot_reads_latest_values_at_finish(probe):
    """Slot stats are read in finish(): the last capture_graph (the last replay) wins."""
    x = torch.zeros(3, 2)
    probe.graph_slot("h", x)
    probe.arm("r")
    probe.capture_graph("h", x)
    x.fill_(5.0)  # a second replay writes the slot again with new values
    probe.capture_graph("h", x)
    rec = load_manifest(probe.finish())["records"][0]
    assert (rec["stage"], rec["mode"]) == ("h", "graph")
    assert rec["stats"]["mean"] == 5.0 and rec["stats"]["max"] == 5.0 and rec["stats"]["min"] == 5.0
    assert_stats_match(rec["stats"], reference_stats(torch.full((3, 2), 5.0)))


def test_slot_with_saved_tensor(make_probe):
    probe = make_probe(DUMP_PROBE_TENSOR="^logits$", DUMP_PROBE_ROWS="2")
    like = torch.empty(5, 3)
    assert probe.graph_slot("logits", like) is True
    assert probe.graph_slot("hidden", like) is True
    assert probe._state.slots["logits"].tensor.shape == (2, 3)
    assert probe._state.slots["hidden"].tensor is None
    value = torch.arange(15.0).reshape(5, 3)
    probe.arm("r")
    probe.capture_graph("logits", value)
    probe.capture_graph("hidden", value)
    path = probe.finish()
    recs = {r["stage"]: r for r in load_manifest(path)["records"]}
    logits = recs["logits"]
    assert logits["tensor_file"] == "tensors/logits#1.safetensors"
    assert (logits["rows_kept"], logits["rows_total"], logits["truncated"]) == (2, 5, True)
    saved = parse_safetensors(os.path.join(os.path.dirname(path), logits["tensor_file"]))[1]["logits#1"]
    assert torch.equal(saved, value[:2])
    assert recs["hidden"]["tensor_file"] is None
    assert_stats_match(logits["stats"], reference_stats(value))
    assert_stats_match(recs["hidden"]["stats"], reference_stats(value))


def test_stale_slots_warn_once_each_and_each_window_reports_only_its_own_replay(probe, capsys):
    """Slots are process-wide; every window reports what its own replay wrote, never an older value."""
    probe.graph_slot("g", torch.ones(2))
    probe.graph_slot("h", torch.ones(2))
    probe.graph_slot("k", torch.ones(2))
    # before any window: a replay (e.g. warm-up) writes all three
    for stage in ("g", "h", "k"):
        probe.capture_graph(stage, torch.full((2,), 9.0))
    capsys.readouterr()

    # window 1: no replay at all -> no graph record, one warning per stale slot
    assert probe.arm("r") is True
    probe.capture("eager", torch.ones(2))
    first = load_manifest(probe.finish())
    assert [(r["stage"], r["mode"]) for r in first["records"]] == [("eager", "eager")]
    assert warning_lines(capsys.readouterr().err) == [STALE % "g", STALE % "h", STALE % "k"]

    # window 2: the replay writes g and h with fresh values; k stays stale and is dropped
    _next_window(probe)
    probe.capture_graph("g", torch.full((2,), 3.0))
    probe.capture_graph("h", torch.tensor([-1.0, 4.0]))
    second = load_manifest(probe.finish())
    assert second["occurrence"] == 2
    recs = {r["stage"]: r for r in second["records"]}
    assert sorted(recs) == ["g", "h"] and all(r["mode"] == "graph" for r in recs.values())
    assert (recs["g"]["stats"]["min"], recs["g"]["stats"]["max"], recs["g"]["stats"]["mean"]) == (3.0, 3.0, 3.0)
    assert (recs["h"]["stats"]["min"], recs["h"]["stats"]["max"], recs["h"]["stats"]["mean"]) == (-1.0, 4.0, 1.5)
    # the warning is printed once per slot per process state (the probe's _warn rule), not once per window
    assert capsys.readouterr().err == ""

    # window 3: only h is replayed; g's window-2 values (3.0) must not come back
    _next_window(probe)
    probe.capture_graph("h", torch.full((4,), -2.0))
    third = load_manifest(probe.finish())
    assert [(r["stage"], r["shape"], r["stats"]["max"]) for r in third["records"]] == [("h", [4], -2.0)]


def test_slot_holding_nan_values_is_not_mistaken_for_the_sentinel(probe, capsys):
    """The sentinel is a NaN nan_count; a replayed tensor full of NaN has a finite nan_count."""
    probe.graph_slot("nan", torch.ones(3))
    probe.graph_slot("mixed", torch.ones(3))
    probe.arm("r")
    probe.capture_graph("nan", torch.full((3,), float("nan")))
    probe.capture_graph("mixed", torch.tensor([float("nan"), float("inf"), 2.0]))
    capsys.readouterr()
    recs = {r["stage"]: r for r in load_manifest(probe.finish())["records"]}
    assert capsys.readouterr().err == ""
    assert recs["nan"]["stats"]["nan_count"] == 3 and recs["nan"]["stats"]["finite_count"] == 0
    assert recs["nan"]["stats"]["max_abs"] is None and recs["nan"]["stats"]["mean"] is None
    assert_stats_match(recs["mixed"]["stats"], reference_stats(torch.tensor([float("nan"), float("inf"), 2.0])))


def test_capture_graph_without_slot_is_noop(probe, capsys, monkeypatch):
    monkeypatch.setattr(probe, "_statistics_by_path", lambda *a, **k: pytest.fail("no slot: no work"))
    probe.capture_graph("unknown", torch.ones(2))
    probe.arm("r")
    probe.capture_graph("unknown", torch.ones(2))
    monkeypatch.undo()
    manifest = load_manifest(probe.finish())
    assert manifest["records"] == []
    assert capsys.readouterr().err == ""


def test_slot_allocated_but_never_written_is_not_reported(probe, capsys):
    probe.graph_slot("never", torch.ones(2))
    probe.graph_slot("written", torch.ones(2))
    probe.arm("r")
    probe.capture_graph("written", torch.ones(2))
    capsys.readouterr()
    recs = load_manifest(probe.finish())["records"]
    assert [(r["stage"], r["seq"]) for r in recs] == [("written", 0)]
    assert capsys.readouterr().err == ""  # never written at all: nothing stale to warn about


def test_graph_slot_is_idempotent_and_ordered_by_allocation(probe):
    assert probe.graph_slot("b", torch.ones(2)) is True
    assert probe.graph_slot("a", torch.ones(2)) is True
    first = probe._state.slots["b"]
    assert probe.graph_slot("b", torch.ones(7)) is True
    assert probe._state.slots["b"] is first
    probe.arm("r")
    probe.capture_graph("a", torch.ones(2))
    probe.capture_graph("b", torch.ones(2))
    assert [r["stage"] for r in load_manifest(probe.finish())["records"]] == ["b", "a"]


def test_slot_stats_buffer_is_preallocated_and_reused(probe):
    """capture_graph and arm() write into the slot's own buffers (copy_, fill_), never rebinding them."""
    probe.graph_slot("g", torch.ones(3))
    stats = probe._state.slots["g"].stats
    ptr = stats.data_ptr()
    assert stats.dtype == torch.float64 and stats.dim() == 1
    probe.capture_graph("g", torch.ones(3))
    probe.arm("r")
    assert probe._state.slots["g"].stats is stats and stats.data_ptr() == ptr
    probe.capture_graph("g", torch.zeros(3))
    assert probe._state.slots["g"].stats is stats and stats.data_ptr() == ptr
    assert stats[0].item() == 0.0  # nan_count of the replayed zeros, over the sentinel


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
    assert probe.arm("r") is False
    probe.capture_graph("g", torch.ones(2))
    assert probe.finish() is None
    assert not os.path.exists(dump_dir)


def test_capture_graph_of_empty_tensor_records_null_stats_and_stays_armed(probe, capsys):
    """An empty tensor has no statistics: the slot's record has null stats; nothing raises or disarms."""
    assert probe.graph_slot("g", torch.ones(2)) is True
    assert probe.graph_slot("full", torch.ones(2)) is True
    assert probe.arm("r") is True
    probe.capture_graph("g", torch.empty(0, 3))
    assert probe.armed() is True
    probe.capture_graph("full", torch.ones(2))
    probe.capture("x", torch.ones(2))
    manifest = load_manifest(probe.finish())
    assert capsys.readouterr().err == ""
    recs = {r["stage"]: r for r in manifest["records"]}
    assert [(r["stage"], r["mode"]) for r in manifest["records"]] == [("x", "eager"), ("g", "graph"), ("full", "graph")]
    g = recs["g"]
    assert (g["shape"], g["numel"], g["stride"], g["stats"]) == ([0, 3], 0, [3, 1], None)
    assert_stats_match(recs["full"]["stats"], reference_stats(torch.ones(2)))


@pytest.mark.xfail(strict=True, reason="probe bug: the NaN sentinel lives in the statistics, and an empty (or complex) "
                                       "tensor writes none; such a slot written only before arm() is still reported "
                                       "(null stats, layout of the old write) instead of dropped")
@pytest.mark.parametrize("value", [torch.empty(0, 3), torch.ones(2, dtype=torch.complex64)], ids=["empty", "complex"])
def test_empty_or_complex_slot_written_only_before_arm_yields_no_graph_record(probe, value):
    probe.graph_slot("g", torch.ones(2))
    probe.capture_graph("g", value)
    probe.arm("r")
    assert load_manifest(probe.finish())["records"] == []


def test_a_slot_s_token_rows_are_the_eager_rows_at_the_replay_window_s_positions(make_probe):
    """A graph's batch is fixed when it is captured (here 4 rows); the requests in it come
    with each replay. The slot's rows, weighted at finish() by the replay window's row map
    (r1 at positions 8-9, r0 at 3, one padding row), are the rows capture() gives the same
    tensor in the same forward, bit for bit (both by torch ops: the native library's rows are
    float64 sums); a slot of another row count gets none."""
    probe = make_probe(DUMP_PROBE_KERNEL="torch")
    torch.manual_seed(0)
    like = torch.zeros(4, 2, 8)
    x = torch.randn(4, 2, 8)
    x[2, 1, 3] = float("nan")
    assert probe.graph_slot("attn", like) is True
    assert probe.graph_slot("pooled", torch.zeros(3, 8)) is True  # not the forward's rows
    assert probe.graph_slot("logits", like, rows=None) is True
    assert probe.arm("r", rows=[("r1", 8, 2), ("r0", 3, 1), (None, 0, 1)]) is True
    probe.capture_graph("attn", x)
    probe.capture_graph("pooled", torch.ones(3, 8))
    probe.capture_graph("logits", x)
    probe.capture("eager", x)
    manifest = load_manifest(probe.finish())
    by_stage = {r["stage"]: r for r in manifest["records"]}
    t = manifest["token_rows"]
    listed = {row[0]: row for row in t["records"]}
    assert sorted(listed) == [by_stage["eager"]["seq"], by_stage["attn"]["seq"]]
    with open(os.path.join(os.path.dirname(probe._state.written[-1][0]), t["file"]), "rb") as handle:
        values = struct.unpack("<%df" % (t["rows"] * 5), handle.read())

    def rows(stage):
        _, first, count, dims, positions = listed[by_stage[stage]["seq"]]
        assert (count, dims, positions) == (4, [0], None)
        return [values[(first + n) * 5:(first + n + 1) * 5] for n in range(count)]

    assert rows("attn") == rows("eager")
    assert rows("attn")[2][0] == 1.0  # the NaN is counted in its row
    assert rows("attn")[3][4] == 0.0  # the padding row weighs nothing in the checksum
    assert by_stage["attn"]["mode"] == "graph"


def test_a_slot_written_with_another_shape_warns_and_keeps_its_record(probe, capsys):
    """Declared token rows (rows="tokens") that a write of another shape cannot fill: a warning,
    the record without rows. Under rows="auto" the same write is silent (the rows just do not fit)."""
    assert probe.graph_slot("attn", torch.zeros(4, 8), rows="tokens") is True
    assert probe.arm("r", rows=[("r", 0, 4)]) is True
    probe.capture_graph("attn", torch.ones(2, 8))
    manifest = load_manifest(probe.finish())
    assert [r["stage"] for r in manifest["records"]] == ["attn"]
    assert "token_rows" not in manifest or manifest["token_rows"]["records"] == []
    assert "the slot's rows were made for [4, 8]" in capsys.readouterr().err


def test_a_graph_replay_padded_to_its_batch_pairs_with_the_eager_run_in_dumpview(make_probe, dump_dir, dumpview):
    """One request (3 tokens) run eagerly, and replayed in a graph captured for a batch of 4
    (one padding row): dumpview pairs the forwards by their rows and finds nothing (exit 0);
    a replay whose second token's row was changed diverges there."""
    import subprocess
    torch.manual_seed(0)
    h = torch.randn(3, 16, dtype=torch.float64)
    out = {}
    for name in ("eager", "graph", "graph_bug"):
        probe = make_probe(DUMP_PROBE_DIR=dump_dir + "-" + name)
        if name == "eager":
            probe.arm("req", rows=[("req", 0, 3)])
            probe.capture("attn", h)
        else:
            padded = torch.cat([h, torch.zeros(1, 16, dtype=torch.float64)])
            if name == "graph_bug":
                padded[1, 5] += 0.5
            assert probe.graph_slot("attn", torch.zeros(4, 16, dtype=torch.float64)) is True
            probe.arm("req", rows=[("req", 0, 3), (None, 0, 1)])
            probe.capture_graph("attn", padded)
        out[name] = os.path.dirname(os.path.dirname(os.path.dirname(probe.finish())))
    same = subprocess.run([dumpview, "diff", out["eager"], out["graph"]], capture_output=True, text=True)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "every paired record agrees" in same.stdout, same.stdout
    bug = subprocess.run([dumpview, "diff", out["eager"], out["graph_bug"], "--json"], capture_output=True, text=True)
    assert bug.returncode == 1, bug.stdout + bug.stderr
    import json
    first = json.loads(bug.stdout)["diff"]["tokens"]["first"]
    assert (first["key"], first["position"], first["request_a"]) == ("attn#1", 1, "req"), first


def test_nan_in_a_graph_s_padding_rows_is_counted_apart_not_a_finding(make_probe, dump_dir, dumpview):
    """A graph's padding rows hold whatever its buffers held (here NaN): never compared, so
    neither `scan` nor `diff` against the eager run calls them a first non-finite; scan says
    they were set apart."""
    import subprocess
    torch.manual_seed(0)
    h = torch.randn(3, 16, dtype=torch.float64)
    out = {}
    for name in ("eager", "graph"):
        probe = make_probe(DUMP_PROBE_DIR=dump_dir + "-" + name)
        if name == "eager":
            probe.arm("req", rows=[("req", 0, 3)])
            probe.capture("attn", h)
        else:
            padded = torch.cat([h, torch.full((2, 16), float("nan"), dtype=torch.float64)])
            assert probe.graph_slot("attn", torch.zeros(5, 16, dtype=torch.float64)) is True
            probe.arm("req", rows=[("req", 0, 3), (None, 0, 2)])
            probe.capture_graph("attn", padded)
        out[name] = os.path.dirname(os.path.dirname(os.path.dirname(probe.finish())))
    scan = subprocess.run([dumpview, "scan", out["graph"]], capture_output=True, text=True)
    assert scan.returncode == 0, scan.stdout + scan.stderr
    assert "first non-finite: none" in scan.stdout, scan.stdout
    assert "1 record with NaN/inf only in padding rows" in scan.stdout, scan.stdout
    diff = subprocess.run([dumpview, "diff", out["eager"], out["graph"]], capture_output=True, text=True)
    assert diff.returncode == 0, diff.stdout + diff.stderr


def test_token_ids_that_do_not_fit_the_forward_s_rows_warn(probe, capsys):
    """arm() with 5 token ids but no rows=, and a graph replay of 8 rows: the row map learns 8
    rows of one request; the probe says the ids do not fit and how to declare the padding."""
    assert probe.graph_slot("attn", torch.zeros(8, 4)) is True
    assert probe.arm("req", token_ids=[1, 2, 3, 4, 5]) is True
    probe.capture_graph("attn", torch.ones(8, 4))
    probe.finish()
    err = capsys.readouterr().err
    assert "arm('req'): 5 token_ids for a forward of 8 rows" in err, err
    assert "rows=[(request, first, 5, ids), (None, 0, 3)]" in err, err


def test_a_second_graph_slot_of_another_shape_says_it_is_not_used(probe, capsys):
    assert probe.graph_slot("attn", torch.zeros(4, 8)) is True
    assert probe.graph_slot("attn", torch.zeros(6, 8)) is True
    assert "graph_slot('attn'): already allocated for shape [4, 8]; this call's [6, 8] is not used" \
        in capsys.readouterr().err
