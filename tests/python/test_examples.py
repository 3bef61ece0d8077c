"""Known answers of the committed example dump pairs (assets/examples/*).

Reads the manifests with plain json and checks every expected.json answer
against the records themselves, plus the literal values the examples were
designed to produce (stage names, counts), so a regenerated asset that drifts
fails here.  Alias groups, non-finite records and tensors are recomputed here,
independently of the scripts under examples/; first_divergence is dumpview
diff's rule, computed by its Python reference
(examples/pair_tools.dumpview_first_divergence) and cross-checked against the
real binary (target/debug/dumpview) when it is built.
"""

import json
import math
import os
import struct
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = os.path.join(ROOT, "assets", "examples")
DUMPVIEW = os.path.join(ROOT, "target", "debug", "dumpview")
sys.path.insert(0, os.path.join(ROOT, "examples"))

import pair_tools as pt  # noqa: E402  (stdlib only: the Python reference of dumpview's diff rule)
PAIRS = ["llama_fp16_overflow", "llama_kv_alias", "llama_chunked_prefill", "llama_eager_vs_graph", "minilm_fp32_vs_bf16"]
KEYS = ["pair", "description", "a", "b", "first_nonfinite", "first_divergence", "divergence_rule", "alias_conflicts",
        "aliases_without_conflict", "agree", "missing_data", "record_counts", "notes"]
STATS = ("max_abs", "min", "max", "mean", "l2", "pos_checksum")
LAYERS = 6
EAGER_RECORDS = 2 + 3 + 19 * LAYERS  # runner.* + embed/final_norm/logits + 19 per layer
# The designed first divergence of each pair under dumpview diff's rule (default tolerances): (stage#N, verdict).
FIRST_DIVERGENCE = {
    "llama_fp16_overflow": ("layers.3.mlp_up#1", "non_finite"),
    "llama_kv_alias": ("layers.0.k_cache_read#1", "magnitude"),
    "llama_chunked_prefill": (None, "agree"),
    "llama_eager_vs_graph": (None, "agree"),
    "minilm_fp32_vs_bf16": ("sentence_embedding#1", "magnitude"),
}


def load_json(path):
    with open(path) as handle:
        return json.load(handle)


def expected(pair):
    return load_json(os.path.join(EXAMPLES, pair, "expected.json"))


def manifest(pair, side):
    return load_json(os.path.join(EXAMPLES, pair, expected(pair)[side]))


def key(record):
    return "%s#%d" % (record["stage"], record["occurrence"])


def by_key(m):
    return {key(r): r for r in m["records"]}


def in_order(m):
    return sorted(m["records"], key=lambda r: r["seq"])


def first_nonfinite(m):
    for r in in_order(m):
        if r["stats"]["nan_count"] > 0 or r["stats"]["inf_count"] > 0:
            return key(r)
    return None


def byte_range(r):
    """[data_ptr, data_ptr + (1 + sum((size - 1) * stride)) * element_size), for numel > 0."""
    assert r["numel"] > 0 and r["data_ptr"] is not None, key(r)
    extent = 1 + sum((n - 1) * s for n, s in zip(r["shape"], r["stride"]))
    return r["data_ptr"], r["data_ptr"] + extent * r["element_size"]


def overlap(r1, r2):
    (a0, a1), (b0, b1) = byte_range(r1), byte_range(r2)
    return a0 < b1 and b0 < a1


def alias_groups(m, identity="storage_id"):
    """Alias groups of a manifest: connected components of records of one (device, identity) whose byte
    ranges overlap, keeping those with >= 2 distinct stages; members and groups in capture order.

    identity "storage_id" is the rule; "storage_ptr" is the address-only grouping that allocator
    address reuse fools (kept to show that the examples really contain such reuse).
    """
    records = [r for r in in_order(m) if r["numel"] > 0]
    for r in records:
        assert r[identity] is not None, (key(r), identity)
    parent = list(range(len(records)))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, r1 in enumerate(records):
        for j in range(i + 1, len(records)):
            r2 = records[j]
            if (r1["device"], r1[identity]) == (r2["device"], r2[identity]) and overlap(r1, r2):
                parent[root(j)] = root(i)
    components = {}
    for i, r in enumerate(records):
        components.setdefault(root(i), []).append(r)
    groups = [g for g in components.values() if len({r["stage"] for r in g}) > 1]
    return sorted(groups, key=lambda g: g[0]["seq"])


def stride_conflict(group):
    return len({tuple(r["stride"]) for r in group}) > 1


def alias_answer(m, identity="storage_id"):
    """(stride-conflicting groups, groups without conflict) as lists of stage#N lists."""
    groups = alias_groups(m, identity)
    return ([[key(r) for r in g] for g in groups if stride_conflict(g)],
            [[key(r) for r in g] for g in groups if not stride_conflict(g)])


def rel(x, y):
    scale = max(abs(x), abs(y))
    return 0.0 if scale == 0 else abs(x - y) / scale


def differs(ra, rb, rtol, atol, stats=STATS):
    """A naive per-statistic check, |a - b| > atol + rtol * max(|a|, |b|): not dumpview's rule, used only to
    show that agreeing pairs agree far more tightly than the default screen."""
    if ra["shape"] != rb["shape"]:
        return True
    if any(ra["stats"][n] != rb["stats"][n] for n in ("nan_count", "inf_count")):
        return True
    for n in stats:
        x, y = ra["stats"][n], rb["stats"][n]
        if x is None or y is None:
            if x != y:
                return True
        elif abs(x - y) > atol + rtol * max(abs(x), abs(y)):
            return True
    return False


def read_safetensors(path):
    """(shape, list of floats) of a one-tensor safetensors file (F32, F16 or BF16)."""
    with open(path, "rb") as handle:
        raw = handle.read()
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + size])
    (name, info), = [(k, v) for k, v in header.items() if k != "__metadata__"]
    lo, hi = info["data_offsets"]
    data = raw[8 + size + lo:8 + size + hi]
    if info["dtype"] == "F32":
        values = list(struct.unpack("<%df" % (len(data) // 4), data))
    elif info["dtype"] == "F16":
        values = list(struct.unpack("<%de" % (len(data) // 2), data))
    elif info["dtype"] == "BF16":
        halves = struct.unpack("<%dH" % (len(data) // 2), data)
        values = [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
    else:
        raise AssertionError("unexpected dtype %s" % info["dtype"])
    return info["shape"], values


def saved_tensor(pair, side, stage_key):
    m = manifest(pair, side)
    record = by_key(m)[stage_key]
    assert record["tensor_file"], "%s has no saved tensor on side %s" % (stage_key, side)
    directory = os.path.dirname(os.path.join(EXAMPLES, pair, expected(pair)[side]))
    return record, read_safetensors(os.path.join(directory, record["tensor_file"]))


# ----------------------------------------------------------------------------- every pair


@pytest.mark.parametrize("pair", PAIRS)
def test_expected_shape_and_record_counts(pair):
    e = expected(pair)
    assert list(e) == KEYS
    assert e["pair"] == pair
    for side in ("a", "b"):
        m = manifest(pair, side)
        assert m["format"] == "dumpview.manifest"
        assert len(m["records"]) == e["record_counts"][side]
        assert [r["seq"] for r in m["records"]] == list(range(len(m["records"])))
    assert os.path.isfile(os.path.join(EXAMPLES, pair, "README.md"))


@pytest.mark.parametrize("pair", PAIRS)
def test_first_nonfinite_matches_records(pair):
    e = expected(pair)
    for side in ("a", "b"):
        assert first_nonfinite(manifest(pair, side)) == e["first_nonfinite"][side]


@pytest.mark.parametrize("pair", PAIRS)
def test_same_input_on_both_sides(pair):
    a, b = manifest(pair, "a"), manifest(pair, "b")
    assert a["label"] == b["label"]
    assert a["metadata"]["token_ids"] == b["metadata"]["token_ids"]


@pytest.mark.parametrize("pair", PAIRS)
def test_alias_fields_are_the_storage_id_groups(pair):
    """expected.json's alias fields are exactly what (storage_id, overlapping bytes) finds in the records."""
    e = expected(pair)
    for side in ("a", "b"):
        conflicts, clean = alias_answer(manifest(pair, side))
        assert e["alias_conflicts"][side] == conflicts, side
        assert e["aliases_without_conflict"][side] == clean, side
    notes = json.loads(e["notes"])
    assert "address_reuse_groups" not in notes
    assert "storage_id" in notes["alias_rule"]


@pytest.mark.parametrize("pair", PAIRS)
def test_records_carry_storage_ids(pair):
    """Every record names its live storage; ids are 1, 2, ... in first-seen order within one process
    (in capture order for eager records; graph records are numbered when capture_graph ran)."""
    for side in ("a", "b"):
        m = manifest(pair, side)
        ids = [r["storage_id"] for r in in_order(m)]
        assert all(isinstance(i, int) and i >= 1 for i in ids), side
        if all(r["mode"] == "eager" for r in m["records"]):
            first_seen = list(dict.fromkeys(ids))  # increasing; gaps are ids of input-set tensors
            assert first_seen == sorted(first_seen) and first_seen[0] == 1, side
        # one storage_id never spans two addresses, storages or devices
        for i in set(ids):
            members = [r for r in m["records"] if r["storage_id"] == i]
            assert len({(r["device"], r["storage_ptr"], r["storage_nbytes"]) for r in members}) == 1, (side, i)


@pytest.mark.parametrize("pair", PAIRS)
def test_first_divergence_is_dumpviews_rule(pair):
    """expected.json's first_divergence is what dumpview's rule (Python reference) finds, and the designed stage."""
    e = expected(pair)
    want_key, want_kind = FIRST_DIVERGENCE[pair]
    assert e["first_divergence"] == want_key
    assert e["divergence_rule"] == pt.DUMPVIEW_RULE
    assert "src/model/analysis/compare.rs" in e["divergence_rule"]
    found, kind, exceeding = pt.dumpview_first_divergence(manifest(pair, "a"), manifest(pair, "b"))
    assert (found, kind) == (want_key, want_kind)
    assert (exceeding == []) == (found is None)


def run_dumpview_diff(pair):
    e = expected(pair)
    side_dirs = [os.path.join(EXAMPLES, pair, side) for side in ("a", "b")]
    proc = subprocess.run([DUMPVIEW, "diff", "--json"] + side_dirs, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)["diff"]
    assert len(report["windows"]) == 1 and not report["unpaired_a"] and not report["unpaired_b"]
    window = report["windows"][0]
    assert window["a"]["source"].replace(os.sep, "/").endswith(e["a"])
    assert window["b"]["source"].replace(os.sep, "/").endswith(e["b"])
    return report, window


@pytest.mark.parametrize("pair", PAIRS)
def test_first_divergence_matches_the_rust_binary(pair):
    """The Python reference and `dumpview diff --json` agree on the first divergence and on every pair's verdict."""
    if not os.path.isfile(DUMPVIEW):
        pytest.skip("target/debug/dumpview is not built (run `cargo build`): Rust cross-check skipped")
    report, window = run_dumpview_diff(pair)
    per_stat = report["tolerances"]["per_stat"]
    assert list(per_stat) == list(pt.VALUE_STATS)
    assert [(per_stat[name]["rtol"], per_stat[name]["atol"]) for name in pt.VALUE_STATS] == [
        pt.DEFAULT_TOLERANCES[name] for name in pt.VALUE_STATS]
    first = window["first_divergence"]
    rust_key = None if first is None else window["pairs"][first]["key"]
    rust_kind = "agree" if first is None else window["pairs"][first]["verdict"]["kind"]
    found, kind, exceeding = pt.dumpview_first_divergence(manifest(pair, "a"), manifest(pair, "b"))
    assert (rust_key, rust_kind) == (found, kind) == FIRST_DIVERGENCE[pair]
    if first is not None:
        assert [d["name"] for d in window["pairs"][first]["stats"] if d["exceeds"]] == exceeding
    assert_every_pair_follows_the_reference(window, manifest(pair, "a"), manifest(pair, "b"))


def assert_every_pair_follows_the_reference(window, a, b):
    """Every pair of `dumpview diff --json`'s window has the reference's verdict, exceeding statistics, rel_diff
    and bounds."""
    python_pairs = pt.dumpview_pairs(a, b)
    assert [p["key"] for p in window["pairs"]] == [k for k, _, _ in python_pairs]
    for rust, (k, ra, rb) in zip(window["pairs"], python_pairs):
        kind, _, stats = pt.dumpview_compare_records(ra, rb)
        # The reference is the whole-tensor rule. Where both records carry token rows, dumpview
        # then decides an inconclusive or moved checksum by the rows (docs/diff.md, "Rows decide
        # the verdicts they make sharp") and names the whole tensor's verdict in rows.replaced.
        rows = rust.get("rows") or {}
        if rows.get("replaced"):
            assert rows["replaced"] == kind, k
            decided = {"row_changed": "magnitude", "rows_agree": "agree", "rows_permuted": "values_moved"}
            assert rust["verdict"]["kind"] == decided[rows["kind"]], (k, rows)
        else:
            assert rust["verdict"]["kind"] == kind, k
        assert [d["exceeds"] for d in rust["stats"]] == [d["exceeds"] for d in stats], k
        # serde_json's default float parser may be one ulp off Python's correctly rounded one, so the
        # figures agree to rounding, not bit for bit: rel_diff (|a - b| / scale) to 1e-12 absolute, bounds to
        # 1e-12 relative, and the checksum's bound also to what its evidence term e (differences of nearly
        # equal statistics, times n or sqrt(n)) moves when each statistic is one ulp off.
        for d_rust, d_py in zip(rust["stats"], stats):
            slack = evidence_slack(ra["stats"], rb["stats"]) if d_py.get("checksum_bound") else 0.0
            for field, tol in (("rel_diff", dict(rel_tol=0.0, abs_tol=1e-12)),
                               ("bound", dict(rel_tol=1e-12, abs_tol=slack))):
                if d_rust[field] is None or d_py[field] is None:
                    assert d_rust[field] == d_py[field], (k, d_py["name"], field)
                else:
                    assert math.isclose(d_rust[field], d_py[field], **tol), (k, d_py["name"], field)


VERDICT_FIXTURES = os.path.join(ROOT, "tests", "fixtures", "verdicts")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("other", ["fused", "swapped"])
def test_verdict_fixtures_follow_the_reference(dtype, other):
    """On the rounding-noise and row-swap fixtures (tests/fixtures/verdicts), where the checksum's noise bound
    decides, the binary gives every pair the reference's verdict and bounds."""
    if not os.path.isfile(DUMPVIEW):
        pytest.skip("target/debug/dumpview is not built (run `cargo build`): Rust cross-check skipped")
    sides = [os.path.join(VERDICT_FIXTURES, dtype, side) for side in ("eager", other)]
    proc = subprocess.run([DUMPVIEW, "diff", "--json"] + sides, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == (1 if other == "swapped" else 0), proc.stderr
    window = json.loads(proc.stdout)["diff"]["windows"][0]
    a, b = (pt.load(pt.find_manifest(d, 1)) for d in sides)
    assert_every_pair_follows_the_reference(window, a, b)
    found, kind, _ = pt.dumpview_first_divergence(a, b)
    assert (found, kind) == ((None, "agree") if other == "fused" else ("layers.1.k_cache_write#1", "values_moved"))
    inconclusive = [p["key"] for p in window["pairs"] if p["verdict"]["kind"] == "checksum_inconclusive"]
    assert window["checksum_inconclusive"] == len(inconclusive)


def evidence_slack(sa, sb):
    """How far atol + c * e * scale (the checksum's evidence term, docs/diff.md) moves when every statistic is one
    ulp off: c * (n * ulp(mean) + sqrt(n) * ulp(max(l2, |min|, |max|))) * 2 sides * 2 for margin."""
    n = sa["finite_count"] or 0
    top = max(abs(v) for s in (sa, sb) for v in (pt._number(s[k]) for k in ("l2", "min", "max")) if v is not None)
    mean = max(abs(pt._number(s["mean"]) or 0.0) for s in (sa, sb))
    return pt.CHECKSUM_NOISE["evidence_factor"] * 4 * (n * math.ulp(mean) + math.sqrt(n) * math.ulp(top))


def test_total_size_is_commit_sized():
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(EXAMPLES) for f in files)
    assert total < 3 * 1024 * 1024


# ----------------------------------------------------------------------------- llama_fp16_overflow


def test_fp16_overflow_first_nonfinite_is_the_outlier_matmul():
    e = expected("llama_fp16_overflow")
    assert e["first_nonfinite"] == {"a": None, "b": "layers.3.mlp_up#1"}
    a, b = by_key(manifest("llama_fp16_overflow", "a")), by_key(manifest("llama_fp16_overflow", "b"))
    assert b["layers.3.mlp_up#1"]["dtype"] == "float16" and a["layers.3.mlp_up#1"]["dtype"] == "float32"
    assert b["layers.3.mlp_up#1"]["stats"]["inf_count"] > 0
    assert b["layers.3.mlp_gate#1"]["stats"]["inf_count"] == 0  # same input, unscaled weight
    assert a["layers.3.mlp_up#1"]["stats"]["max_abs"] > 65504  # beyond float16, fine in float32
    assert b["layers.3.mlp_up#1"]["stats"]["max_abs"] <= 65504  # finite part of the float16 tensor
    nonfinite_b = [key(r) for r in in_order(manifest("llama_fp16_overflow", "b"))
                   if r["stats"]["nan_count"] or r["stats"]["inf_count"]]
    assert nonfinite_b[:4] == ["layers.3.mlp_up#1", "layers.3.mlp_act#1", "layers.3.mlp_down#1", "layers.3.residual_mlp#1"]
    assert nonfinite_b[-1] == "runner.logits#1" and len(nonfinite_b) == 45


def test_fp16_overflow_first_divergence_and_saved_tensor():
    e = expected("llama_fp16_overflow")
    assert e["first_divergence"] == "layers.3.mlp_up#1"
    a, b = manifest("llama_fp16_overflow", "a"), manifest("llama_fp16_overflow", "b")
    assert pt.dumpview_first_divergence(a, b)[:2] == ("layers.3.mlp_up#1", "non_finite")
    # float32 vs float16 is a precision change, compared by value: no earlier pair diverges. Five move their
    # position checksum a little beyond 1e-3 (float16 rounding), within the bound their moved magnitudes allow,
    # which is above one moved row's shift of these 12- and 48-row tensors: inconclusive, not values_moved.
    pairs = pt.dumpview_pairs(a, b)
    position = [k for k, _, _ in pairs].index("layers.3.mlp_up#1")
    earlier = {k: pt.dumpview_compare_records(ra, rb)[0] for k, ra, rb in pairs[:position]}
    assert position > 0 and set(earlier.values()) == {"agree", "checksum_inconclusive"}
    inconclusive = [k for k, v in earlier.items() if v == "checksum_inconclusive"]
    assert inconclusive == ["layers.2.q#1", "layers.2.mlp_up#1", "layers.3.q_rope#1", "layers.3.o_proj#1",
                            "layers.3.mlp_gate#1"]
    assert json.loads(e["notes"])["checksum_inconclusive_before"] == inconclusive
    record, (shape, values) = saved_tensor("llama_fp16_overflow", "b", "layers.3.mlp_up#1")
    assert record["rows_kept"] == 8 and record["rows_total"] == 12 and record["truncated"] is True
    assert shape == [8, 688]
    assert any(math.isinf(v) for v in values)


# ----------------------------------------------------------------------------- llama_kv_alias


def test_kv_alias_conflicting_members_share_storage_with_other_strides():
    e = expected("llama_kv_alias")
    assert e["alias_conflicts"]["a"] == []
    assert e["alias_conflicts"]["b"] == [
        ["layers.%d.k_cache_write#1" % i, "layers.%d.k_cache_read#1" % i] for i in range(LAYERS)]
    b = by_key(manifest("llama_kv_alias", "b"))
    for write_key, read_key in e["alias_conflicts"]["b"]:
        w, r = b[write_key], b[read_key]
        assert w["storage_id"] == r["storage_id"] and w["storage_ptr"] == r["storage_ptr"]
        assert overlap(w, r)
        assert w["stride"] == [64, 2048, 1] and r["stride"] == [128, 64, 1]
        assert w["shape"] == [12, 2, 64] and r["shape"] == [12, 2, 64]


LOGITS_GROUP = ["logits#1", "runner.logits#1"]  # the returned logits tensor, captured inside and by the runner


def cache_groups(tensors=("k", "v")):
    return [["layers.%d.%s_cache_write#1" % (i, t), "layers.%d.%s_cache_read#1" % (i, t)]
            for i in range(LAYERS) for t in tensors]


def test_kv_alias_legitimate_groups_have_one_stride():
    e = expected("llama_kv_alias")
    assert e["aliases_without_conflict"]["a"] == cache_groups() + [LOGITS_GROUP]
    assert e["aliases_without_conflict"]["b"] == cache_groups(("v",)) + [LOGITS_GROUP]
    for side in ("a", "b"):
        records = by_key(manifest("llama_kv_alias", side))
        for group in e["aliases_without_conflict"][side]:
            members = [records[k] for k in group]
            assert len({m["storage_id"] for m in members}) == 1
            assert len({m["storage_ptr"] for m in members}) == 1
            assert overlap(members[0], members[1])
            want = [1024, 1] if group == LOGITS_GROUP else [128, 64, 1]
            assert all(m["stride"] == want for m in members)
        logits, runner_logits = records["logits#1"], records["runner.logits#1"]
        assert byte_range(logits) == byte_range(runner_logits) and logits["shape"] == [12, 1024]


def test_kv_alias_first_divergence_is_the_read_not_the_write():
    e = expected("llama_kv_alias")
    a, b = manifest("llama_kv_alias", "a"), manifest("llama_kv_alias", "b")
    assert e["first_divergence"] == "layers.0.k_cache_read#1"
    assert pt.dumpview_first_divergence(a, b)[:2] == ("layers.0.k_cache_read#1", "magnitude")
    wa, wb = by_key(a)["layers.0.k_cache_write#1"], by_key(b)["layers.0.k_cache_write#1"]
    assert pt.dumpview_compare_records(wa, wb)[0] == "agree"
    for n in STATS:
        assert rel(wa["stats"][n], wb["stats"][n]) < 1e-12
    # Saved tensors: the writer's logical values are the same, the reader's are not.
    _, (_, write_a) = saved_tensor("llama_kv_alias", "a", "layers.0.k_cache_write#1")
    _, (_, write_b) = saved_tensor("llama_kv_alias", "b", "layers.0.k_cache_write#1")
    _, (_, read_a) = saved_tensor("llama_kv_alias", "a", "layers.0.k_cache_read#1")
    _, (_, read_b) = saved_tensor("llama_kv_alias", "b", "layers.0.k_cache_read#1")
    assert write_a == write_b
    assert read_a == write_a and read_b != read_a
    # Rows kept: 8 of 12, each [2 kv heads, 64]. Through the NHD reader, slot (t, h) of b holds
    # what the HND writer put there: token 2t+h of kv head 0; tokens 6.. were never filled.
    def row(values, t, h):
        return values[(t * 2 + h) * 64:(t * 2 + h + 1) * 64]
    for t in range(8):
        for h in range(2):
            if 2 * t + h < 8:
                assert row(read_b, t, h) == row(write_a, 2 * t + h, 0)
            if t >= 6:
                assert row(read_b, t, h) == [0.0] * 64


LLAMA_PAIRS = [p for p in PAIRS if p.startswith("llama_")]


@pytest.mark.parametrize("pair", LLAMA_PAIRS)
def test_llama_side_a_has_no_stride_conflict_at_all(pair):
    """No two stages of a correct run share live bytes with different strides, although the allocator
    reused addresses: grouped by storage_ptr alone, the same records do show stride conflicts."""
    m = manifest(pair, "a")
    conflicts, clean = alias_answer(m)
    assert conflicts == []
    assert clean == cache_groups() + [LOGITS_GROUP]
    for i, r1 in enumerate(m["records"]):
        for r2 in m["records"][i + 1:]:
            if r1["storage_id"] == r2["storage_id"] and r1["stage"] != r2["stage"] and overlap(r1, r2):
                assert r1["stride"] == r2["stride"], (key(r1), key(r2))
    # the trap is really there: unrelated stages at one reused address, told apart only by storage_id
    reused = {}
    for r in m["records"]:
        reused.setdefault(r["storage_ptr"], set()).add(r["storage_id"])
    assert any(len(ids) > 1 for ids in reused.values())
    assert alias_answer(m, identity="storage_ptr")[0] != []


def test_kv_alias_side_b_has_exactly_the_designed_groups():
    conflicts, clean = alias_answer(manifest("llama_kv_alias", "b"))
    assert conflicts == cache_groups(("k",))
    assert clean == cache_groups(("v",)) + [LOGITS_GROUP]


def test_graph_side_has_no_alias_although_graph_records_reuse_addresses():
    m = manifest("llama_eager_vs_graph", "b")
    assert alias_answer(m) == ([], [])
    # runner.input_ids (1, before the forward), the six replayed hidden states (2..7, during it), runner.logits (8)
    assert [(r["stage"], r["storage_id"]) for r in in_order(m)] == (
        [("runner.input_ids", 1), ("runner.logits", 8)] + [("layers.%d.residual_mlp" % i, i + 2) for i in range(LAYERS)])


# ----------------------------------------------------------------------------- llama_chunked_prefill


def test_chunked_prefill_decode_steps_agree():
    e = expected("llama_chunked_prefill")
    a, b = manifest("llama_chunked_prefill", "a"), manifest("llama_chunked_prefill", "b")
    assert (a["occurrence"], b["occurrence"]) == (2, 4)
    assert a["metadata"]["phase"] == b["metadata"]["phase"] == "decode"
    assert a["metadata"]["positions"] == b["metadata"]["positions"] == [12, 13]
    assert e["agree"] is True and e["first_divergence"] is None and e["missing_data"] is False
    assert pt.dumpview_first_divergence(a, b) == (None, "agree", [])
    ia, ib = by_key(a), by_key(b)
    assert set(ia) == set(ib) and len(ia) == EAGER_RECORDS
    largest = 0.0
    for k, ra in ia.items():
        rb = ib[k]
        assert not differs(ra, rb, 1e-4, 1e-6), k
        largest = max([largest] + [rel(ra["stats"][n], rb["stats"][n]) for n in STATS])
    assert 0.0 < largest < 1e-4
    notes = json.loads(e["notes"])
    assert abs(notes["largest_relative_difference"]["value"] - largest) <= 1e-12
    assert notes["generated_ids"] == a["metadata"]["token_ids"] + [45, 45]


# ----------------------------------------------------------------------------- llama_eager_vs_graph


def test_graph_pair_record_counts_are_missing_data():
    e = expected("llama_eager_vs_graph")
    assert e["record_counts"] == {"a": EAGER_RECORDS, "b": 8}
    assert e["missing_data"] is True and e["agree"] is False and e["first_divergence"] is None
    a, b = manifest("llama_eager_vs_graph", "a"), manifest("llama_eager_vs_graph", "b")
    assert pt.dumpview_first_divergence(a, b) == (None, "agree", [])
    assert [(r["stage"], r["mode"]) for r in in_order(b)] == (
        [("runner.input_ids", "eager"), ("runner.logits", "eager")]
        + [("layers.%d.residual_mlp" % i, "graph") for i in range(LAYERS)])
    assert all(r["mode"] == "eager" for r in a["records"])
    ia, ib = by_key(a), by_key(b)
    assert set(ib) <= set(ia)
    assert len(set(ia) - set(ib)) == EAGER_RECORDS - 8 == 111
    for k in ib:  # what was captured agrees; the rest is absent, not equal
        assert not differs(ia[k], ib[k], 1e-3, 1e-5), k


def test_graph_slot_tensor_matches_eager_tensor():
    _, (shape_a, values_a) = saved_tensor("llama_eager_vs_graph", "a", "layers.5.residual_mlp#1")
    record_b, (shape_b, values_b) = saved_tensor("llama_eager_vs_graph", "b", "layers.5.residual_mlp#1")
    assert record_b["mode"] == "graph"
    assert shape_a == shape_b == [1, 256]
    assert max(abs(x - y) for x, y in zip(values_a, values_b)) <= 1e-6


def test_llama_input_sets_saved_for_replay():
    for pair in ("llama_fp16_overflow", "llama_kv_alias"):
        m = manifest(pair, "a")
        sets = {(s["stage"], s["occurrence"]): s for s in m["input_sets"]}
        assert set(sets) == {("layers.0.input_norm", 1), ("layers.0.rope", 1)}
        rope = sets[("layers.0.rope", 1)]["args"]
        assert sorted(rope) == ["cos", "k", "positions", "q", "sin"]
        assert rope["q"]["shape"] == [12, 4, 64] and rope["k"]["shape"] == [12, 2, 64]
        norm = sets[("layers.0.input_norm", 1)]["args"]
        assert norm["eps"] == {"kind": "float", "value": 1e-06}
        directory = os.path.dirname(os.path.join(EXAMPLES, pair, expected(pair)["a"]))
        for s in sets.values():
            assert os.path.isfile(os.path.join(directory, s["file"]))
    assert manifest("llama_eager_vs_graph", "b")["input_sets"] == []  # inside the graph region


# ----------------------------------------------------------------------------- minilm_fp32_vs_bf16


def test_minilm_first_divergence_is_the_sentence_embedding_max():
    e = expected("minilm_fp32_vs_bf16")
    a, b = manifest("minilm_fp32_vs_bf16", "a"), manifest("minilm_fp32_vs_bf16", "b")
    assert e["first_nonfinite"] == {"a": None, "b": None}
    assert e["record_counts"] == {"a": 39, "b": 39}
    assert {r["dtype"] for r in a["records"]} == {"float32"} and {r["dtype"] for r in b["records"]} == {"bfloat16"}
    first, kind, exceeding = pt.dumpview_first_divergence(a, b)
    assert first == e["first_divergence"] == "sentence_embedding#1"
    assert (kind, exceeding) == ("magnitude", ["max"])
    verdicts = [pt.dumpview_compare_records(ra, rb) for _, ra, rb in pt.dumpview_pairs(a, b)]
    # bfloat16 is compared by value: nothing diverges before the last stage; where rounding moves the position
    # checksum and the bound allowing for it is above one moved row's shift (0.05 / sqrt(92 rows)), the checksum
    # is inconclusive, never values_moved.
    kinds = [v[0] for v in verdicts]
    assert kinds[-1] == "magnitude"
    assert {k: kinds[:-1].count(k) for k in set(kinds[:-1])} == {"agree": 10, "checksum_inconclusive": 28}
    for v in verdicts[:-1]:
        if v[0] == "checksum_inconclusive":
            bound = v[2][-1]["checksum_bound"]
            assert bound["rows"] == 92 and bound["beyond_rtol"] and bound["bound"] > bound["moved_row"]
    stat = {d["name"]: d for d in verdicts[-1][2]}["max"]
    assert stat["exceeds"] and abs(stat["rel_diff"] - 1.05e-2) < 1e-4
    notes = json.loads(e["notes"])
    assert abs(notes["first_divergence_relative_differences"]["max"] - stat["rel_diff"]) < 1e-6
    assert notes["first_divergence_exceeding"]["max"]["rel_diff"] == stat["rel_diff"]
    assert list(notes["relative_difference_per_stage"])[:2] == ["embeddings#1", "layers.0.attention.query#1"]
    # Judged against itself, the near-zero mean of layers.1.attention.key would already exceed 1e-2;
    # dumpview judges a mean against the tensor's rms, so that stage does not diverge (its checksum is
    # inconclusive, its mean within tolerance).
    ib = by_key(b)
    naive = next(key(r) for r in in_order(a)
                 if any(rel(r["stats"][n], ib[key(r)]["stats"][n]) > 1e-2 for n in ("max_abs", "mean", "l2")))
    assert naive == notes["naive_first_exceeding"]["stage"] == "layers.1.attention.key#1"
    assert notes["dumpview_per_stage"][naive]["verdict"] == "checksum_inconclusive"
    assert notes["dumpview_per_stage"][naive]["mean"] < 1e-2


def test_minilm_final_embedding_cosine():
    e = expected("minilm_fp32_vs_bf16")
    notes = json.loads(e["notes"])
    _, (shape_a, va) = saved_tensor("minilm_fp32_vs_bf16", "a", "sentence_embedding#1")
    _, (shape_b, vb) = saved_tensor("minilm_fp32_vs_bf16", "b", "sentence_embedding#1")
    assert shape_a == shape_b == [4, 384]
    cosines = []
    for i in range(4):
        x, y = va[i * 384:(i + 1) * 384], vb[i * 384:(i + 1) * 384]
        dot = sum(p * q for p, q in zip(x, y))
        cosines.append(dot / math.sqrt(sum(p * p for p in x) * sum(q * q for q in y)))
    for got, want in zip(cosines, notes["final_embedding_cosine_per_sentence"]):
        assert abs(got - want) < 1e-7
    assert 0.999 < min(cosines) < 1.0


# ----------------------------------------------------------------------------- the reference on edge cases


def synthetic_stats(**overrides):
    stats = dict(nan_count=0, inf_count=0, finite_count=100, max_abs=3.0, min=-3.0, max=3.0, mean=0.1, l2=10.0,
                 pos_checksum=1.0)
    stats.update(overrides)
    return stats


def synthetic_record(seq, stage, dtype="float32", shape=(10, 10), stats="default", occurrence=1):
    numel = shape[0] * shape[1]
    return dict(seq=seq, stage=stage, occurrence=occurrence, mode="eager", dtype=dtype, shape=list(shape),
                stride=[shape[1], 1], storage_offset=0, element_size=2 if dtype in ("bfloat16", "float16") else 4,
                numel=numel,
                storage_ptr=None, storage_id=None, storage_nbytes=None, data_ptr=None, device="cpu",
                device_format=None, is_contiguous=True,
                stats=synthetic_stats() if stats == "default" else stats, tensor_file=None)


# stage -> (record a, record b, verdict kind, exceeding statistics): one case per clause of the rule
SYNTHETIC_CASES = [
    ("shape", dict(), dict(shape=(10, 5)), "structural", []),
    ("dtype_kind", dict(), dict(dtype="int64"), "structural", []),
    ("precision_change", dict(), dict(dtype="bfloat16"), "agree", []),
    ("nan_count", dict(), dict(stats=synthetic_stats(nan_count=1, finite_count=99)), "non_finite", []),
    # rms = 10 / sqrt(100) = 1: a mean moving from 1e-4 to 2e-3 is 0.19% of it
    ("mean_near_zero", dict(stats=synthetic_stats(mean=1e-4)), dict(stats=synthetic_stats(mean=2e-3)), "agree", []),
    ("mean_beyond_rms", dict(), dict(stats=synthetic_stats(mean=0.1 + 0.02)), "magnitude", ["mean"]),
    # float32 with equal magnitudes: the checksum's bound is its rtol, 1e-3 of l2 (0.05% passes, 4% is a move)
    ("checksum_moved", dict(), dict(stats=synthetic_stats(pos_checksum=1.4)), "values_moved", ["pos_checksum"]),
    ("checksum_noise", dict(), dict(stats=synthetic_stats(pos_checksum=1.005)), "agree", []),
    # bfloat16 on one side: the bound is 2 unit roundoffs, 2 * 2^-8 = 7.8e-3 of l2. 0.5% is within it; with 10
    # rows one moved row shifts ~0.05 / sqrt(10) = 1.6e-2, above the bound, so the move would have shown: agree;
    # with 1000 rows (~1.6e-3) it would hide under the bound: inconclusive. 4% with equal magnitudes is a move.
    ("checksum_rounding_bf16", dict(), dict(dtype="bfloat16", stats=synthetic_stats(pos_checksum=1.05)), "agree", []),
    ("checksum_inconclusive_bf16", dict(shape=(1000, 10)),
     dict(dtype="bfloat16", shape=(1000, 10), stats=synthetic_stats(pos_checksum=1.05)), "checksum_inconclusive", []),
    ("checksum_moved_4pct_bf16", dict(), dict(dtype="bfloat16", stats=synthetic_stats(pos_checksum=1.4)),
     "values_moved", ["pos_checksum"]),
    ("checksum_moved_bf16", dict(), dict(dtype="bfloat16", stats=synthetic_stats(pos_checksum=2.0)), "values_moved",
     ["pos_checksum"]),
    # The mean moved by 0.5% of the rms (within its rtol): the sum by 100 * 0.005 = 0.5, e = 0.5 / l2 = 0.05, so
    # the checksum may move 4 * e = 0.2 of l2; its 4% move is inconclusive (one moved row of 10 shifts ~1.6e-2).
    ("checksum_with_moved_mean", dict(), dict(stats=synthetic_stats(mean=0.105, pos_checksum=1.4)),
     "checksum_inconclusive", []),
    ("max_1_percent", dict(), dict(stats=synthetic_stats(max=3.0 * 1.0102)), "magnitude", ["max"]),
    ("equal_infinities", dict(stats=synthetic_stats(l2="inf", inf_count=1, finite_count=99)),
     dict(stats=synthetic_stats(l2="inf", inf_count=1, finite_count=99)), "agree", []),
    # A sum that is non-finite while max_abs is finite is the dump tool's own overflow: not compared.
    ("nan_statistic", dict(stats=synthetic_stats(mean="nan")), dict(stats=synthetic_stats(mean="nan")), "agree", []),
    ("l2_overflow_fp16", dict(dtype="float16", stats=synthetic_stats(l2="inf")), dict(dtype="float16"), "agree", []),
    # A statistic recorded on one side only says nothing about the values: not compared.
    ("null_one_side", dict(), dict(stats=synthetic_stats(mean=None)), "agree", []),
    # No statistics on one side or on both: the pair is not compared (missing evidence, never a divergence);
    # empty tensors of one shape have nothing to differ.
    ("stats_one_side", dict(), dict(stats=None), "not_compared", []),
    ("stats_neither_side", dict(stats=None), dict(stats=None), "not_compared", []),
    ("empty_both", dict(shape=(0, 10), stats=None), dict(shape=(0, 10), stats=None), "agree", []),
]


def synthetic_pair():
    a, b = [], []
    for i, (stage, over_a, over_b, _, _) in enumerate(SYNTHETIC_CASES):
        a.append(synthetic_record(i, stage, **over_a))
        b.append(synthetic_record(i, stage, **over_b))
    n = len(SYNTHETIC_CASES)
    a.append(synthetic_record(n, "only_in_a"))
    b.append(synthetic_record(n, "only_in_b"))
    header = dict(format="dumpview.manifest", schema_version=1, probe="test", label="synthetic", match=1,
                  occurrence=1, rank=0, world_size=1, metadata={"token_ids": [1, 2, 3]})
    return dict(header, records=a), dict(header, records=b)


def test_reference_verdict_of_every_clause():
    a, b = synthetic_pair()
    pairs = pt.dumpview_pairs(a, b)
    assert [k for k, _, _ in pairs] == ["%s#1" % case[0] for case in SYNTHETIC_CASES]
    for (k, ra, rb), (_, _, _, kind, exceeding) in zip(pairs, SYNTHETIC_CASES):
        got_kind, _, stats = pt.dumpview_compare_records(ra, rb)
        assert (got_kind, [d["name"] for d in stats if d["exceeds"]]) == (kind, exceeding), k
    assert pt.dumpview_first_divergence(a, b) == ("shape#1", "structural", [])


def test_reference_matches_the_rust_binary_on_every_clause(tmp_path):
    if not os.path.isfile(DUMPVIEW):
        pytest.skip("target/debug/dumpview is not built (run `cargo build`): Rust cross-check skipped")
    a, b = synthetic_pair()
    paths = []
    for name, m in (("a.json", a), ("b.json", b)):
        paths.append(str(tmp_path / name))
        with open(paths[-1], "w") as handle:
            json.dump(m, handle)
    proc = subprocess.run([DUMPVIEW, "diff", "--json"] + paths, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 1, proc.stderr
    window = json.loads(proc.stdout)["diff"]["windows"][0]
    assert window["only_a"] == ["only_in_a#1"] and window["only_b"] == ["only_in_b#1"]
    assert window["pairs"][window["first_divergence"]]["key"] == pt.dumpview_first_divergence(a, b)[0]
    for rust, (k, ra, rb) in zip(window["pairs"], pt.dumpview_pairs(a, b)):
        kind, _, stats = pt.dumpview_compare_records(ra, rb)
        assert rust["key"] == k
        assert (rust["verdict"]["kind"], [d["name"] for d in rust["stats"] if d["exceeds"]]) == (
            kind, [d["name"] for d in stats if d["exceeds"]]), k
