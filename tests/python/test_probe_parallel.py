"""Parallel layouts on the capture side (docs/manifest.md, "Parallel layouts").

The fixture generator (tests/fixtures/layouts/make_layouts_fixture.py) runs one MLP block at
TP=1 and TP=2 under real torch.distributed (gloo, one process per rank); its shards' statistics
must add up to the unsharded run's.  In-process tests cover the annotations' forms, their
refusals and the arm-time warning.
"""

import json
import math
import os
import pathlib
import subprocess
import sys

import jsonschema
import pytest
import torch

from conftest import REPO, SCHEMA_PATH, load_manifest, record, warning_lines

GENERATOR = os.path.join(REPO, "tests", "fixtures", "layouts", "make_layouts_fixture.py")
VALIDATOR = jsonschema.Draft202012Validator(json.loads(pathlib.Path(SCHEMA_PATH).read_text()))
SLICED = ("layers.0.up", "layers.0.up_heads", "layers.0.act")
REPLICATED = ("embed", "layers.0.norm_weight", "layers.0.input_norm", "layers.0.down", "layers.0.out", "logits")


def _window(root, rank):
    return load_manifest(os.path.join(root, "rank%d" % rank, "match1-occ1", "manifest.json"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """tp1, tp2 and tp2_nan written by real gloo process groups into a temporary directory."""
    out = str(tmp_path_factory.mktemp("layouts"))
    names = ("tp1", "tp2", "tp2_nan", "tp3_uneven", "cp1", "cp2_zigzag")
    # The eager statistics: each gloo rank is a fresh process that would compile the fused
    # kernels again; the fused path's shard coordinates are checked in test_probe_kernels.py.
    env = dict(os.environ, DUMP_PROBE_KERNEL=os.environ.get("DUMP_PROBE_KERNEL", "torch"))
    done = subprocess.run([sys.executable, GENERATOR, out, *names], capture_output=True, text=True, timeout=240,
                          env=env)
    assert done.returncode == 0, done.stderr
    return {name: os.path.join(out, name) for name in names}


def test_gloo_runs_record_the_layout_and_the_annotations(runs):
    tp1 = _window(runs["tp1"], 0)
    assert tp1["world_size"] == 1 and tp1["metadata"]["parallel"] == {"tp": [0, 1]}
    for rank in (0, 1):
        m = _window(runs["tp2"], rank)
        VALIDATOR.validate(m)
        assert (m["rank"], m["world_size"]) == (rank, 2)
        assert m["metadata"]["parallel"] == {"tp": [rank, 2]}
        shards = {r["stage"]: r.get("shard") for r in m["records"]}
        assert shards == {
            "embed": "replicated:tp", "layers.0.norm_weight": "replicated:tp",
            "layers.0.input_norm": "replicated:tp", "layers.0.up": "tp:1", "layers.0.up_heads": "tp:1",
            "layers.0.act": "tp:1",  # written as tp:-1, normalised
            "layers.0.down_partial": "partial:tp", "layers.0.down": "replicated:tp",
            "layers.0.out": "replicated:tp", "logits": "replicated:tp",
        }
        assert record(m, "layers.0.down")["collective"] == "all_reduce"
        assert "collective" not in record(m, "layers.0.up")
        assert record(m, "layers.0.up")["shape"] == [6, 8]
        assert record(m, "layers.0.up_heads")["shape"] == [6, 2, 4]


@pytest.mark.parametrize("stage", SLICED + ("layers.0.down_partial",))
def test_the_shards_statistics_add_up_to_the_unsharded_run(runs, stage):
    full = record(_window(runs["tp1"], 0), stage)["stats"]
    parts = [record(_window(runs["tp2"], rank), stage)["stats"] for rank in (0, 1)]
    # The global-coordinate checksum: the shards' checksums add up (float64 reductions).
    assert sum(p["pos_checksum"] for p in parts) == pytest.approx(full["pos_checksum"], rel=1e-12, abs=1e-12)
    # Sums add for slices and partial sums alike.
    total = sum(p["mean"] * p["finite_count"] for p in parts)
    assert total == pytest.approx(full["mean"] * full["finite_count"], rel=1e-12, abs=1e-12)
    if stage != "layers.0.down_partial":
        assert sum(p["finite_count"] for p in parts) == full["finite_count"]
        assert max(p["max"] for p in parts) == pytest.approx(full["max"], rel=1e-14)
        assert min(p["min"] for p in parts) == pytest.approx(full["min"], rel=1e-14)
        assert math.sqrt(sum(p["l2"] ** 2 for p in parts)) == pytest.approx(full["l2"], rel=1e-12)


@pytest.mark.parametrize("run,whole,stages,ranks", [
    ("tp3_uneven", "tp1", ("layers.0.up", "layers.0.act", "layers.0.down_partial"), 3),
    ("cp2_zigzag", "cp1", ("embed", "layers.0.input_norm", "layers.0.up"), 2),
])
def test_uneven_and_zigzag_gloo_shards_add_up(runs, run, whole, stages, ranks):
    windows = [_window(runs[run], r) for r in range(ranks)]
    if run == "tp3_uneven":
        assert [record(w, "layers.0.up")["shard"] for w in windows] == ["tp:1@0/16", "tp:1@6/16", "tp:1@11/16"]
        assert [record(w, "layers.0.up")["shape"] for w in windows] == [[6, 6], [6, 5], [6, 5]]
    else:
        assert [w["metadata"]["parallel"] for w in windows] == [{"cp": [0, 2]}, {"cp": [1, 2]}]
        assert record(windows[1], "embed")["shard"] == "cp:0:zigzag"
    for stage in stages:
        full = record(_window(runs[whole], 0), stage)["stats"]
        parts = [record(w, stage)["stats"] for w in windows]
        got = sum(p["pos_checksum"] for p in parts)
        assert got == pytest.approx(full["pos_checksum"], rel=1e-12, abs=1e-12), (run, stage)


@pytest.mark.parametrize("stage", REPLICATED)
def test_replicated_stages_equal_on_both_ranks_and_the_unsharded_run(runs, stage):
    full = record(_window(runs["tp1"], 0), stage)["stats"]
    for rank in (0, 1):
        got = record(_window(runs["tp2"], rank), stage)["stats"]
        for name in ("max_abs", "mean", "l2", "pos_checksum"):
            assert got[name] == pytest.approx(full[name], rel=1e-12, abs=1e-12), (stage, rank, name)


def test_a_nan_before_the_all_reduce_reaches_rank_0_only_through_it(runs):
    nan = {rank: {r["stage"]: r["stats"]["nan_count"] for r in _window(runs["tp2_nan"], rank)["records"]}
           for rank in (0, 1)}
    assert nan[1]["layers.0.act"] == 1 and nan[1]["layers.0.up"] == 0
    assert nan[1]["layers.0.down_partial"] == 8  # one NaN column of act spreads over a row
    assert nan[0]["layers.0.act"] == 0 and nan[0]["layers.0.down_partial"] == 0
    assert nan[0]["layers.0.down"] == 8 and nan[1]["layers.0.down"] == 8


def test_uneven_and_zigzag_checksums_add_up(probe):
    torch.manual_seed(3)
    full = torch.randn(5, 10, dtype=torch.float64)
    whole = probe._statistics(full)[-1].item()
    # tp over 3, 10 columns as 4 + 4 + 2 (the last at offset 8 of 10).
    pieces = [(0, 4), (4, 4), (8, 2)]
    total = sum(probe._statistics(full[:, o:o + n], split=probe._Split(1, 10, o, False, r, 3))[-1].item()
                for r, (o, n) in enumerate(pieces))
    assert total == pytest.approx(whole, rel=1e-12)
    # cp zigzag over 2 along dim 0 of [8, 3]: chunks of 2, rank 0 holds 0 and 3, rank 1 holds 1 and 2.
    seq = torch.randn(8, 3, dtype=torch.float64)
    whole = probe._statistics(seq)[-1].item()
    chunks = seq.split(2)
    local = [torch.cat([chunks[0], chunks[3]]), torch.cat([chunks[1], chunks[2]])]
    total = sum(probe._statistics(t, split=probe._Split(0, 8, 0, True, r, 2))[-1].item() for r, t in enumerate(local))
    assert total == pytest.approx(whole, rel=1e-12)
    # Contiguous halves annotated as zigzag put rows in the wrong places: the sum moves.
    wrong = sum(probe._statistics(t, split=probe._Split(0, 8, 0, True, r, 2))[-1].item()
                for r, t in enumerate(seq.split(4)))
    assert abs(wrong - whole) > 1e-3 * abs(whole)


def test_annotations_are_recorded_normalised_and_bad_ones_refused(probe, capsys):
    assert probe.arm("req", parallel={"tp": (2, 3)}) is True
    t = torch.ones(4, 2)
    probe.capture("last", t[:, :2], shard="tp:-1@8/10")
    probe.capture("out_of_range", t, shard="tp:2")
    probe.capture("past_full", t, shard="tp:0@8/10")
    probe.capture("no_axis", t, shard="cp:0")
    probe.capture("garbage", t, shard="tp=1")
    probe.capture("odd_zigzag", torch.ones(3, 2), shard="tp:0:zigzag")
    probe.capture("bad_collective", t, collective="allreduce")
    m = load_manifest(probe.finish())
    VALIDATOR.validate(m)
    assert m["metadata"]["parallel"] == {"tp": [2, 3]}
    assert record(m, "last")["shard"] == "tp:1@8/10"
    for stage in ("out_of_range", "past_full", "no_axis", "garbage", "odd_zigzag"):
        assert "shard" not in record(m, stage), stage
    assert "collective" not in record(m, "bad_collective")
    err = capsys.readouterr().err
    assert "capture('out_of_range', shard='tp:2'): dimension 2 is out of range for a 2-d tensor" in err
    assert "capture('past_full', shard='tp:0@8/10'): offset 8 + local size 4 is past the full size 10" in err
    assert "capture('no_axis', shard='cp:0'): arm() was given no parallel layout for 'cp'" in err
    assert "capture('garbage', shard='tp=1'): not 'tp:D'" in err
    assert "odd size 3" in err
    assert "capture('bad_collective', collective='allreduce'): not one of all_reduce" in err


def test_arm_warns_when_dump_probe_ranks_leaves_group_ranks_out(make_probe, capsys):
    probe = make_probe(DUMP_PROBE_RANKS="0")
    assert probe.arm("req", parallel={"tp": (0, 2)}) is True
    probe.finish()
    err = capsys.readouterr().err
    assert ("a tp group of 2 ranks but DUMP_PROBE_RANKS=0 selects 1 rank: stages sharded over tp will be "
            "missing evidence on the ranks left out; set DUMP_PROBE_RANKS=all") in err
    probe = make_probe(DUMP_PROBE_RANKS="all")
    assert probe.arm("req", parallel={"tp": (0, 2)}) is True
    probe.finish()
    assert "DUMP_PROBE_RANKS" not in capsys.readouterr().err


def test_an_invalid_parallel_layout_is_left_out_with_a_warning(probe, capsys):
    assert probe.arm("req", parallel={"tp": (2, 2)}) is True
    m = load_manifest(probe.finish())
    assert "parallel" not in m["metadata"]
    lines = warning_lines(capsys.readouterr().err)
    assert len(lines) == 1
    assert "'tp': (2, 2) left out" in lines[0]
    assert "rank_in_group 2 is out of range 0..1" in lines[0]


def test_each_parallel_axis_is_validated_on_its_own(make_probe, capsys):
    """One bad axis no longer drops the valid ones; each bad one is named in its own warning."""
    probe = make_probe(DUMP_PROBE_RANKS="all")  # no warning about the group's other ranks
    parallel = {"tp": (0, 2), "cp": (0, 2), "xx": (0, 2), "dp": (3, 2)}
    assert probe.arm("req", parallel=parallel) is True
    probe.capture("sliced", torch.ones(4, 2), shard="tp:1")
    m = load_manifest(probe.finish())
    VALIDATOR.validate(m)
    assert m["metadata"]["parallel"] == {"tp": [0, 2], "cp": [0, 2]}
    assert record(m, "sliced")["shard"] == "tp:1"
    lines = warning_lines(capsys.readouterr().err)
    assert not any("no parallel layout" in line for line in lines)
    xx = [line for line in lines if "'xx'" in line]
    dp = [line for line in lines if "'dp'" in line]
    assert len(xx) == 1 and "axis 'xx' is not one of tp, cp, dp, pp, ep" in xx[0]
    assert len(dp) == 1 and "(3, 2)" in dp[0] and "rank_in_group 3 is out of range 0..1" in dp[0]
    assert len(lines) == 2


@pytest.mark.parametrize("pair,why", [
    ((0, 0), "group size 0 is < 1"),
    ((-1, 2), "rank_in_group -1 is out of range 0..1"),
    ((0,), "not a (rank_in_group, group_size) pair of ints"),
    ((0, 1, 2), "not a (rank_in_group, group_size) pair of ints"),
    ((0.5, 2), "not a (rank_in_group, group_size) pair of ints"),
    ("02", "not a (rank_in_group, group_size) pair of ints"),
    (3, "not a (rank_in_group, group_size) pair of ints"),
    (None, "not a (rank_in_group, group_size) pair of ints"),
])
def test_each_kind_of_invalid_parallel_entry_is_named(make_probe, capsys, pair, why):
    probe = make_probe(DUMP_PROBE_RANKS="all")  # no warning about the group's other ranks
    assert probe.arm("req", parallel={"tp": (1, 2), "pp": pair}) is True
    m = load_manifest(probe.finish())
    assert m["metadata"]["parallel"] == {"tp": [1, 2]}
    lines = warning_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "'pp': %r left out (%s" % (pair, why) in lines[0]


def test_tensor_and_list_pairs_are_accepted(make_probe, capsys):
    probe = make_probe(DUMP_PROBE_RANKS="all")  # no warning about the group's other ranks
    assert probe.arm("req", parallel={"tp": torch.tensor([1, 4]), "ep": [0, 1]}) is True
    m = load_manifest(probe.finish())
    assert m["metadata"]["parallel"] == {"tp": [1, 4], "ep": [0, 1]}
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("value", [[("tp", (0, 2))], "tp:0/2", {}])
def test_a_parallel_that_is_not_a_dict_warns_once_and_records_no_layout(probe, capsys, value):
    assert probe.arm("req", parallel=value) is True
    probe.capture("sliced", torch.ones(4, 2), shard="tp:1")
    m = load_manifest(probe.finish())
    assert "parallel" not in m["metadata"]
    assert "shard" not in record(m, "sliced")
    lines = warning_lines(capsys.readouterr().err)
    assert sum("is not a parallel layout" in line for line in lines) == 1


def test_a_pp2_gloo_run_splits_the_stages_and_send_recv_carries_them_exactly(tmp_path):
    """pp2: rank 0 captures embed and layer 0, rank 1 (after dist.recv) layer 1 and logits."""
    done = subprocess.run([sys.executable, GENERATOR, str(tmp_path), "pp1", "pp2"],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    whole = _window(str(tmp_path / "pp1"), 0)
    stages = [r["stage"] for r in whole["records"]]
    assert stages[0] == "embed" and stages[-1] == "logits" and len(stages) == 12
    split = [_window(str(tmp_path / "pp2"), rank) for rank in (0, 1)]
    for rank, m in enumerate(split):
        VALIDATOR.validate(m)
        assert m["metadata"]["parallel"] == {"pp": [rank, 2]}
    assert [r["stage"] for r in split[0]["records"]] + [r["stage"] for r in split[1]["records"]] == stages
    for stage in ("layers.1.out", "logits"):
        assert record(split[1], stage)["stats"] == record(whole, stage)["stats"]


def _rows(run, rank):
    """{(stage, position): [5 row statistics]} of one gloo rank's window (test_probe_rows' reader)."""
    from test_probe_rows import rows_of

    path = os.path.join(run, "rank%d" % rank, "match1-occ1", "manifest.json")
    return {(stage, p): values for (stage, _), rows in rows_of(path)[1].items() for _, p, values in rows}


@pytest.mark.parametrize("run,whole,ranks,stages", [
    ("tp2", "tp1", 2, SLICED),  # columns (tp:1 of [6, 16/n]) and heads (tp:1 of [6, 4/n, 4])
    ("tp3_uneven", "tp1", 3, ("layers.0.up", "layers.0.act")),
])
def test_slices_inside_the_token_row_add_up_to_the_unsharded_rows(runs, run, whole, ranks, stages):
    full = _rows(runs[whole], 0)
    parts = [_rows(runs[run], r) for r in range(ranks)]
    for stage in stages:
        for p in range(6):
            want = full[(stage, p)]
            got = [part[(stage, p)] for part in parts]
            scale = math.sqrt(want[3])
            # Counts, sums, squares and the full-coordinate checksum add; max_abs is the largest.
            assert sum(g[0] for g in got) == want[0]
            assert max(g[1] for g in got) == pytest.approx(want[1], rel=1e-6)
            for i in (2, 3, 4):
                assert sum(g[i] for g in got) == pytest.approx(want[i], abs=1e-6 * max(scale, want[3])), (stage, p, i)
    # A partial sum's sum and checksum add up too.
    for p in range(6):
        want = full[("layers.0.down_partial", p)]
        got = [part[("layers.0.down_partial", p)] for part in parts]
        for i in (2, 4):
            assert sum(g[i] for g in got) == pytest.approx(want[i], abs=1e-6 * math.sqrt(want[3]))


def test_a_zigzag_context_slice_lists_each_row_at_its_position(runs):
    full = _rows(runs["cp1"], 0)
    # Rank r of 2 holds chunks r and 3 - r of 4 chunks of 2 tokens.
    held = {0: [0, 1, 6, 7], 1: [2, 3, 4, 5]}
    for rank, positions in held.items():
        rows = _rows(runs["cp2_zigzag"], rank)
        for stage in ("embed", "layers.0.input_norm", "layers.0.up"):
            assert sorted(p for s, p in rows if s == stage) == positions
            for p in positions:
                assert rows[(stage, p)] == pytest.approx(full[(stage, p)], rel=1e-6, abs=1e-6), (stage, p)
        assert not any(s == "layers.0.norm_weight" for s, _ in rows)
