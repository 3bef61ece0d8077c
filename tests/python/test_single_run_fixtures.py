"""The capture side of the single-run fixtures (tests/fixtures/single_run/).

The generator (make_single_run_fixtures.py) runs each scenario under real torch.distributed
(gloo, one process per rank) and checks, with plain-Python versions of the rules, that its
captures give the designed answers. Here it runs into a temporary directory for a few scenarios
(the tp=2 duplicate shard, the dp attention silent rank, the stale decode step and the moved
KV write), and the facts the Rust rules rely on are read back with plain json. The committed
fixtures are checked against their expected.json without running anything, and the false-alarm
controls partial_zero_ok, cp_repeat_ok and stale_constant_ok are checked to hold their traps.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

HERE = os.path.join(REPO, "tests", "fixtures", "single_run")
GENERATOR = os.path.join(HERE, "make_single_run_fixtures.py")
NAMES = ("dup_shard", "silent_rank_dp", "stale_output", "moved_write")


def _manifest(root, rank=0, window="match1-occ1"):
    with open(os.path.join(root, "rank%d" % rank, window, "manifest.json")) as f:
        return json.load(f)


def _record(manifest, stage, occurrence=1):
    found = [r for r in manifest["records"] if r["stage"] == stage and r["occurrence"] == occurrence]
    assert len(found) == 1, (stage, occurrence, [r["stage"] for r in manifest["records"]])
    return found[0]


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("single_run"))
    done = subprocess.run([sys.executable, GENERATOR, root, *NAMES], capture_output=True, text=True, timeout=300,
                          cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root


def test_the_rules_agree_with_the_design(out):
    with open(os.path.join(out, "expected.json")) as f:
        expected = json.load(f)
    assert sorted(expected) == sorted(NAMES)
    assert [(x["kind"], x["stage"], x["ranks"]) for x in expected["dup_shard"]["findings"]] == [
        ("duplicate_shards", "layers.0.up.weight#1", [0, 1]), ("duplicate_shards", "layers.0.up#1", [0, 1]),
        ("duplicate_shards", "layers.0.act#1", [0, 1])]
    assert [(x["stage"], x["ranks"]) for x in expected["silent_rank_dp"]["findings"]] == [("layers.0.experts#1", [1])]
    stale, = expected["stale_output"]["findings"]
    assert (stale["stage"], stale["records"][0]["window"], stale["previous"]["window"]) == (
        "layers.0.attn_out#1", "match1-occ3", "match1-occ2")
    assert expected["moved_write"]["first_divergence"]["stage"] == "layers.0.kv_read#1"


def test_duplicate_shard_facts(out):
    root = os.path.join(out, "dup_shard")
    ranks = [_manifest(root, r) for r in (0, 1)]
    for m in ranks:
        assert m["metadata"]["parallel"] == {"tp": [m["rank"], 2]}
        assert m["world_size"] == 2
    for stage, shard in (("layers.0.up.weight", "tp:0"), ("layers.0.up", "tp:1"), ("layers.0.act", "tp:1")):
        a, b = (_record(m, stage) for m in ranks)
        assert a["shard"] == b["shard"] == shard
        assert a["shape"] == b["shape"] and a["dtype"] == b["dtype"] == "float64"
        assert a["stats"]["min"] < a["stats"]["max"]
        for name in ("nan_count", "inf_count", "finite_count", "min", "max", "max_abs", "mean", "l2"):
            assert a["stats"][name] == b["stats"][name], (stage, name)
        # The local checksum is equal (the same pieces) while pos_checksum, at each rank's global
        # coordinates, is not.
        assert isinstance(a["local_checksum"], float) and a["local_checksum"] == b["local_checksum"], stage
        assert a["stats"]["pos_checksum"] != b["stats"]["pos_checksum"], stage
    # The right shards of the same run differ across ranks.
    for stage in ("layers.0.down.weight", "embed_tokens.weight", "lm_head.weight", "logits"):
        a, b = (_record(m, stage) for m in ranks)
        assert a["local_checksum"] != b["local_checksum"], stage
    # The zero bias: min == max on both ranks; the tied weights: one storage on each rank.
    for m in ranks:
        bias = _record(m, "layers.0.up.bias")
        assert bias["stats"]["min"] == bias["stats"]["max"] == 0.0
        emb, head = _record(m, "embed_tokens.weight"), _record(m, "lm_head.weight")
        assert emb["storage_id"] == head["storage_id"] and emb["stats"] == head["stats"]
        # Unsharded records carry no local_checksum.
        assert "local_checksum" not in _record(m, "layers.0.attn_mask") and "shard" not in _record(m, "rotary_emb.cos_sin")


def test_silent_rank_facts(out):
    root = os.path.join(out, "silent_rank_dp")
    prefill, decode = _manifest(root, 0), _manifest(root, 1)
    assert (prefill["label"], decode["label"]) == ("prefill", "decode")
    assert prefill["metadata"]["step"] == decode["metadata"]["step"] == 1
    a, b = _record(prefill, "layers.0.experts"), _record(decode, "layers.0.experts")
    assert a["received"] > 0 and a["stats"]["max_abs"] > 0
    # The silent rank: zeros, although it received tokens.
    assert b["received"] > 0 and b["shape"][0] == b["received"]
    assert b["stats"]["max_abs"] == 0 and b["stats"]["min"] == b["stats"]["max"] == 0
    assert b["stats"]["finite_count"] == b["received"] * 8


def _row_of(manifest, record):
    """(request, position, token id) of the one token row of ``record``."""
    tr = manifest["token_rows"]
    (_seq, _first, n, _dims, positions), = [x for x in tr["records"] if x[0] == record["seq"]]
    assert n == 1
    entry, = tr["map"]
    position = entry["first_position"] if positions is None else positions[0][1]
    return entry["request"], position, entry["token_ids"][0]


def test_stale_output_facts(out):
    root = os.path.join(out, "stale_output")
    steps = [_manifest(root, 0, "match1-occ%d" % n) for n in (1, 2, 3)]
    assert [m["label"] for m in steps] == ["decode"] * 3 and [m["occurrence"] for m in steps] == [1, 2, 3]
    assert [m["metadata"]["step"] for m in steps] == [1, 2, 3]
    one, two, three = (_record(m, "layers.0.attn_out") for m in steps)
    # Step 3's record is step 2's bit for bit (every statistic, pos_checksum included)...
    assert three["stats"] == two["stats"] and three["stats"]["min"] < three["stats"]["max"]
    assert one["stats"] != two["stats"]
    # ... while its row moved on (position and token) and the record just before it changed.
    assert _row_of(steps[2], three) == ("req-0", 6, 30) and _row_of(steps[1], two) == ("req-0", 5, 22)
    before3, before2 = steps[2]["records"][three["seq"] - 1], steps[1]["records"][two["seq"] - 1]
    assert before3["stage"] == before2["stage"] == "layers.0.q"
    assert before3["stats"] != before2["stats"]
    # The record after the stale one changed (the residual adds this step's embedding).
    assert _record(steps[2], "layers.0.out")["stats"] != _record(steps[1], "layers.0.out")["stats"]


def test_moved_write_facts(out):
    a, b = (_manifest(os.path.join(out, "moved_write", side)) for side in ("a", "b"))
    assert a["metadata"]["block_ids"] == b["metadata"]["block_ids"] == [2]
    assert a["metadata"]["block_numel"] == b["metadata"]["block_numel"] == 32
    wa, wb = _record(a, "layers.0.kv_write"), _record(b, "layers.0.kv_write")
    assert wa["stats"] == wb["stats"] and wa["shape"] == wb["shape"] == [4, 2, 4]
    assert (wa["storage_offset"], wb["storage_offset"]) == (64, 32)  # blocks 2 and 1 of the pool
    assert wa["storage_nbytes"] == wb["storage_nbytes"] == 4 * 32 * 4 and wa["storage_ptr"] is not None
    ra, rb = _record(a, "layers.0.kv_read"), _record(b, "layers.0.kv_read")
    assert ra["stats"] != rb["stats"]
    for stage in ("embed", "layers.0.attn_in", "layers.0.k"):
        assert _record(a, stage)["stats"] == _record(b, stage)["stats"], stage


def test_committed_fixtures_match_expected():
    """Every record expected.json names exists in the committed fixtures with that stage key."""
    with open(os.path.join(HERE, "expected.json")) as f:
        expected = json.load(f)
    total = 0
    for dirpath, _dirs, files in os.walk(HERE):
        total += sum(os.path.getsize(os.path.join(dirpath, name)) for name in files)
    assert total < 1.5 * 1024 * 1024
    for scenario, entry in expected.items():
        root = os.path.join(HERE, scenario)
        for finding in entry["findings"]:
            for ref in finding["records"]:
                side = os.path.join(root, ref["side"]) if "side" in ref else root
                m = _manifest(side, ref["rank"], ref["window"])
                record = m["records"][ref["seq"]]
                assert "%s#%d" % (record["stage"], record["occurrence"]) == finding["stage"], (scenario, ref)
        if not entry["findings"]:
            assert entry["expect"] == "no finding"


def _has_rows(manifest, record):
    return any(x[0] == record["seq"] for x in (manifest.get("token_rows") or {}).get("records", []))


def test_committed_controls_hold_their_traps():
    """The false-alarm controls' committed manifests show what a careless rule would report."""
    with open(os.path.join(HERE, "expected.json")) as f:
        expected = json.load(f)
    for name in ("partial_zero_ok", "cp_repeat_ok", "stale_constant_ok"):
        assert expected[name]["findings"] == [] and expected[name]["expect"] == "no finding", name
        assert expected[name]["traps"], name
    same = ("nan_count", "inf_count", "finite_count", "min", "max", "max_abs", "mean", "l2")

    # partial_zero_ok: rank 1's share of the vocabulary-parallel lookup is exactly zero, with its
    # token rows mapped and no received count; rank 0's is not; the all-reduced sum is equal.
    root = os.path.join(HERE, "partial_zero_ok")
    ranks = [_manifest(root, r) for r in (0, 1)]
    assert [m["metadata"]["parallel"] for m in ranks] == [{"tp": [0, 2]}, {"tp": [1, 2]}]
    loud, quiet = (_record(m, "embed_partial") for m in ranks)
    assert loud["shard"] == quiet["shard"] == "partial:tp"
    assert "received" not in loud and "received" not in quiet
    assert loud["stats"]["max_abs"] > 0
    assert quiet["stats"]["max_abs"] == 0 and quiet["stats"]["min"] == quiet["stats"]["max"] == 0
    assert quiet["stats"]["finite_count"] == 6 * 8 and _has_rows(ranks[1], quiet)
    a, b = (_record(m, "embed_tokens") for m in ranks)
    assert a["shard"] == "replicated:tp" and a["collective"] == "all_reduce" and a["stats"] == b["stats"]
    a, b = (_record(m, "embed_tokens.weight") for m in ranks)
    assert a["shard"] == "tp:0" and a["local_checksum"] != b["local_checksum"]

    # cp_repeat_ok: the two context-parallel chunks are equal pieces (the prompt repeats), each
    # listed at its own positions (0..2 and 3..5).
    root = os.path.join(HERE, "cp_repeat_ok")
    ranks = [_manifest(root, r) for r in (0, 1)]
    for stage in ("embed", "layers.0.input_norm", "layers.0.mlp_act"):
        a, b = (_record(m, stage) for m in ranks)
        assert a["shard"] == b["shard"] == "cp:0" and a["shape"] == b["shape"] and a["shape"][0] == 3, stage
        assert a["stats"]["min"] < a["stats"]["max"]
        for s in same:
            assert a["stats"][s] == b["stats"][s], (stage, s)
        assert a["local_checksum"] == b["local_checksum"], stage
        rows = [[x[4] for x in m["token_rows"]["records"] if x[0] == r["seq"]][0] for m, r in zip(ranks, (a, b))]
        assert rows == [[[0, 0], [0, 1], [0, 2]], [[0, 3], [0, 4], [0, 5]]], stage

    # stale_constant_ok: bias_rows and probs are bit-identical in all 4 calls while the row moved
    # on and the record just before each changed every call.
    root = os.path.join(HERE, "stale_constant_ok")
    steps = [_manifest(root, 0, "match1-occ%d" % n) for n in (1, 2, 3, 4)]
    assert [m["label"] for m in steps] == ["decode"] * 4 and [m["metadata"]["step"] for m in steps] == [1, 2, 3, 4]
    for stage, before in (("bias_rows", "embed"), ("probs", "logits")):
        records = [_record(m, stage) for m in steps]
        assert all(r["stats"] == records[0]["stats"] for r in records), stage
        assert records[0]["stats"]["min"] < records[0]["stats"]["max"] and records[0]["dtype"] == "float64"
        assert [_row_of(m, r) for m, r in zip(steps, records)] == [
            ("req-0", 4, 11), ("req-0", 5, 22), ("req-0", 6, 30), ("req-0", 7, 7)], stage
        prior = [m["records"][r["seq"] - 1] for m, r in zip(steps, records)]
        assert all(p["stage"] == before for p in prior), stage
        assert len({json.dumps(p["stats"], sort_keys=True) for p in prior}) == 4, stage
