"""Known answers of the diagnosis fixture pairs (tests/fixtures/diagnosis, issue 29).

Every expected.json is checked against the manifests themselves, read with plain json: the
records an answer cites exist with the facts claimed (seq, storage_id, addresses, byte ranges),
the bad bytes' writer overlaps its reader on one storage, the index suspect differs and its
control agrees, the norm input sets' argument statistics agree or differ. No model is rerun;
the first divergences are recomputed with dumpview diff's Python reference
(examples/pair_tools.py) and, where target/debug/dumpview is built, with the binary.
"""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "diagnosis")
DUMPVIEW = os.path.join(ROOT, "target", "debug", "dumpview")
sys.path.insert(0, os.path.join(ROOT, "examples"))

import pair_tools as pt  # noqa: E402  (stdlib only)

PAIRS = ["bad_bytes", "index_suspect", "op_differs", "inputs_differ"]
KEYS = ["pair", "description", "rule", "a", "b", "answer", "records", "controls", "dumpview", "notes"]
RECORD_FACTS = ("seq", "dtype", "shape", "stride", "storage_offset", "storage_id", "storage_ptr", "data_ptr")


def load_json(path):
    with open(path) as handle:
        return json.load(handle)


def expected(pair):
    path = os.path.join(FIXTURES, pair, "expected.json")
    if not os.path.exists(path):
        pytest.skip("%s is not generated (examples/diagnosis_pairs.py %s)" % (pair, pair))
    return load_json(path)


def manifests(pair):
    e = expected(pair)
    return {s: load_json(os.path.join(FIXTURES, pair, e[s])) for s in "ab"}


def records(manifest):
    return {pt.key(r): r for r in manifest["records"]}


def finite(record):
    return record["stats"]["nan_count"] == 0 and record["stats"]["inf_count"] == 0


def overlap(r1, r2):
    (lo1, hi1), (lo2, hi2) = pt.byte_range(r1), pt.byte_range(r2)
    return lo1 < hi2 and lo2 < hi1


def verdicts(m):
    return {k: pt.dumpview_compare_records(ra, rb)[0] for k, ra, rb in pt.dumpview_pairs(m["a"], m["b"])}


@pytest.mark.parametrize("pair", PAIRS)
def test_expected_shape_and_cited_records(pair):
    e = expected(pair)
    assert list(e) == KEYS
    assert e["pair"] == pair
    m = manifests(pair)
    for side in "ab":
        assert e[side] == "%s/rank0/match1-occ1/manifest.json" % side
        recs = records(m[side])
        for k, facts in e["records"].get(side, {}).items():
            assert k in recs, "%s cites %s, not in %s's manifest" % (pair, k, side)
            r = recs[k]
            assert facts["side"] == side
            for name in RECORD_FACTS:
                assert facts[name] == r[name], "%s %s %s" % (side, k, name)
            assert facts["byte_range"] == list(pt.byte_range(r))
            assert (facts["nan_count"], facts["inf_count"]) == (r["stats"]["nan_count"], r["stats"]["inf_count"])
            if "stats" in facts:
                assert facts["stats"] == {n: r["stats"][n] for n in pt.VALUE_STATS}
    for k in e["controls"]:
        if k != "a":
            assert k in records(m["b"]), "control %s is not a record" % k
    # dumpview diff's verdicts, as the generator recorded them, are its rule on these manifests.
    printed = e["dumpview"]["diff"]
    assert printed["verdicts"] == verdicts(m)
    first, kind, _ = pt.dumpview_first_divergence(m["a"], m["b"])
    assert (printed["first_divergence"], printed["first_divergence_verdict"]) == (first, kind)
    assert printed["exit_status"] == (1 if first is not None else 0)


def test_bad_bytes():
    e, m = expected("bad_bytes"), manifests("bad_bytes")
    a, b = records(m["a"]), records(m["b"])
    ans = e["answer"]
    assert ans["first_nonfinite"] == "cache_read#1" and ans["bad_bytes_writer"] == "cache_write#1"
    assert pt.first_nonfinite(m["a"]) is None
    assert pt.first_nonfinite(m["b"]) == "cache_read#1"
    reader, writer = b["cache_read#1"], b["cache_write#1"]
    for r in (reader, writer):
        assert r["storage_ptr"] is not None and r["storage_id"] is not None and r["data_ptr"] is not None
    assert not finite(reader) and finite(writer)
    assert writer["storage_id"] == reader["storage_id"] == ans["storage_id"]
    assert reader["storage_ptr"] == ans["storage_ptr"]
    assert overlap(writer, reader)
    assert ans["writer_bytes"] == list(pt.byte_range(writer)) and ans["reader_bytes"] == list(pt.byte_range(reader))
    lo = max(ans["writer_bytes"][0], ans["reader_bytes"][0])
    hi = min(ans["writer_bytes"][1], ans["reader_bytes"][1])
    assert ans["overlap_bytes"] == [lo, hi] and lo < hi
    # The stray bytes lie inside the reader's bytes.
    s_lo, s_hi = (reader["storage_ptr"] + x for x in ans["stray_bytes_in_storage"])
    assert pt.byte_range(reader)[0] <= s_lo < s_hi <= pt.byte_range(reader)[1]
    # The last captured finite record over the reader's bytes before it is the writer, and only it.
    before = [r for r in sorted(m["b"]["records"], key=lambda r: r["seq"])
              if r["seq"] < reader["seq"] and r["storage_id"] == reader["storage_id"] and overlap(r, reader)]
    assert [pt.key(r) for r in before] == ["cache_write#1"] and all(finite(r) for r in before)
    # Controls between writer and reader: another storage; the same storage, disjoint bytes.
    proj, tail = b["proj#1"], b["cache_tail_write#1"]
    assert writer["seq"] < proj["seq"] < reader["seq"] and writer["seq"] < tail["seq"] < reader["seq"]
    assert finite(proj) and finite(tail)
    assert proj["storage_id"] != reader["storage_id"]
    assert tail["storage_id"] == reader["storage_id"] and not overlap(tail, reader)
    assert not finite(b["attn_out#1"]) and b["attn_out#1"]["seq"] > reader["seq"]
    # Side a: the same records, all finite, the same aliasing.
    assert all(finite(r) for r in a.values())
    assert a["cache_write#1"]["storage_id"] == a["cache_read#1"]["storage_id"]
    assert overlap(a["cache_write#1"], a["cache_read#1"])
    scan_b = e["dumpview"]["scan_b"]
    assert scan_b["first_nonfinite"] == "cache_read#1" and scan_b["exit_status"] == 1
    assert {"storage_id": ans["storage_id"], "members": ["cache_write#1", "cache_read#1"],
            "stride_conflict": False} in scan_b["alias_groups"]
    assert e["dumpview"]["scan_a"]["first_nonfinite"] is None
    assert (ans["first_divergence"], ans["first_divergence_verdict"]) == ("cache_read#1", "non_finite")


def test_index_suspect():
    e, m = expected("index_suspect"), manifests("index_suspect")
    a, b = records(m["a"]), records(m["b"])
    ans = e["answer"]
    v = verdicts(m)
    assert ans["index_suspects"] == ["slot_mapping#1"] and ans["index_not_suspects"] == ["positions#1"]
    for k in ("positions#1", "slot_mapping#1"):
        assert pt.dtype_kind(a[k]["dtype"]) == "integer" == pt.dtype_kind(b[k]["dtype"])
    assert a["positions#1"]["stats"] == b["positions#1"]["stats"] and v["positions#1"] == "agree"
    assert a["slot_mapping#1"]["stats"] != b["slot_mapping#1"]["stats"] and v["slot_mapping#1"] != "agree"
    assert sorted(ans["slot_mapping_a"]) == sorted(ans["slot_mapping_b"]) and ans["slot_mapping_a"] != ans["slot_mapping_b"]
    assert v["k#1"] == "agree"
    floats = [k for k in v if pt.dtype_kind(a[k]["dtype"]) == "floating" and v[k] not in pt.VERDICTS_NOT_DIVERGING]
    assert floats[0] == ans["first_float_divergence"] == "kv_write#1"
    assert ans["first_float_divergence_verdict"] == "values_moved"
    assert ans["moved"] == ["kv_write#1", "kv_read#1"] and all(v[k] == "values_moved" for k in ans["moved"])
    for k in ans["moved"]:
        # Same magnitudes, the position checksum moved.
        for n in ("max_abs", "min", "max"):
            assert a[k]["stats"][n] == b[k]["stats"][n]
        assert a[k]["stats"]["pos_checksum"] != b[k]["stats"]["pos_checksum"]
        assert a["slot_mapping#1"]["seq"] < a[k]["seq"] and a["positions#1"]["seq"] < a[k]["seq"]
    assert (ans["first_divergence"], ans["first_divergence_verdict"]) == ("slot_mapping#1", "values_moved")


def _norm_checks(pair, inputs_agree):
    e, m = expected(pair), manifests(pair)
    ans = e["answer"]
    v = verdicts(m)
    assert v["embed#1"] == "agree" and ans["upstream_agrees"] == "embed#1"
    assert pt.dumpview_first_divergence(m["a"], m["b"])[0] == ans["first_divergence"] == "norm#1"
    sets = {}
    for side in "ab":
        entries = [s for s in m[side]["input_sets"] if (s["stage"], s["occurrence"]) == ("norm", 1)]
        assert len(entries) == 1
        entry = sets[side] = entries[0]
        assert entry["op"] == ans["op_" + side] == e["records"]["input_sets"][side]["op"]
        assert os.path.exists(os.path.join(FIXTURES, pair, side, "rank0", "match1-occ1", entry["file"]))
        outputs = json.dumps(entry["outputs"])
        assert "norm" in outputs, "input set outputs %s do not name norm" % outputs
        for name in ("x", "weight"):
            assert entry["args"][name]["kind"] == "tensor" and entry["args"][name]["stats"] is not None
        path, func = entry["op"].split(":")
        assert path == "tests/fixtures/diagnosis/ops.py"
        with open(os.path.join(ROOT, path)) as handle:
            assert "\ndef %s(" % func in handle.read()
    args = {}
    for name, da in sets["a"]["args"].items():
        db = sets["b"]["args"][name]
        if da["kind"] == "tensor":
            args[name] = pt.dumpview_compare_records(dict(da, stage=name, occurrence=1),
                                                     dict(db, stage=name, occurrence=1))[0]
        else:
            args[name] = "agree" if da.get("value") == db.get("value") else "differs"
    assert args == ans["input_set_args"]
    check_cross_feed(pair, m, ans["cross_feed_max_abs"])
    return e, m, sets, args


def check_cross_feed(pair, m, recorded):
    """Each side's operator (ops.py) on each side's saved input set, against each side's saved norm#1
    output (linked by the set's outputs): float32 on the CPU, so the committed figures are reproduced
    exactly; each saved output is the norm#1 record's tensor (its max_abs)."""
    torch = pytest.importorskip("torch")
    import importlib.util

    spec = importlib.util.spec_from_file_location("diagnosis_ops", os.path.join(FIXTURES, "ops.py"))
    ops = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ops)

    def rebuild(value):
        if isinstance(value, dict) and value.get("__dump_probe_tensor__"):
            return torch.as_strided(value["span"], value["shape"], value["stride"], value["offset_in_span"])
        return value

    sides = {}
    for side in "ab":
        window = os.path.join(FIXTURES, pair, side, "rank0", "match1-occ1")
        entry = next(s for s in m[side]["input_sets"] if (s["stage"], s["occurrence"]) == ("norm", 1))
        link = next(o for o in entry["outputs"] if o["key"] == "norm#1")
        args = {k: rebuild(v) for k, v in torch.load(os.path.join(window, entry["file"]), weights_only=True).items()}
        output = torch.load(os.path.join(window, link["file"]), weights_only=True)
        assert float(output.abs().max()) == records(m[side])["norm#1"]["stats"]["max_abs"]
        sides[side] = (getattr(ops, entry["op"].split(":")[1]), args, output)
    for op_side in "ab":
        for in_side in "ab":
            got = sides[op_side][0](**sides[in_side][1])
            for ref in "ab":
                name = "op_%s_on_inputs_%s_vs_output_%s" % (op_side, in_side, ref)
                assert float((got - sides[ref][2]).abs().max()) == recorded[name], name


def test_op_differs():
    e, m, sets, args = _norm_checks("op_differs", inputs_agree=True)
    assert all(v == "agree" for v in args.values())
    feed = e["answer"]["cross_feed_max_abs"]
    # b's operator on a's inputs reproduces b's output, a's on b's reproduces a's: the operator differs.
    assert feed["op_b_on_inputs_a_vs_output_b"] == 0.0 and feed["op_a_on_inputs_b_vs_output_a"] == 0.0
    assert feed["op_b_on_inputs_a_vs_output_a"] > 0.0
    assert sets["a"]["op"].endswith(":rms_norm") and sets["b"]["op"].endswith(":rms_norm_no_weight")
    assert "operator" in e["answer"]["conclusion"]


def test_inputs_differ():
    e, m, sets, args = _norm_checks("inputs_differ", inputs_agree=False)
    assert args["x"] != "agree" and args["weight"] == "agree" and args["eps"] == "agree"
    assert sets["a"]["op"] == sets["b"]["op"]
    feed = e["answer"]["cross_feed_max_abs"]
    # The one operator on a's inputs gives a's output, not b's: the inputs make the difference.
    assert feed["op_b_on_inputs_a_vs_output_a"] == 0.0 and feed["op_b_on_inputs_a_vs_output_b"] > 0.0
    assert "upstream" in e["answer"]["conclusion"]


@pytest.mark.parametrize("pair", PAIRS)
def test_binary_agrees(pair):
    """The recorded dumpview output is what the built binary prints now (skipped when it is not built)."""
    e = expected(pair)
    if not os.path.exists(DUMPVIEW):
        pytest.skip("target/debug/dumpview is not built")
    a, b = ("tests/fixtures/diagnosis/%s/%s" % (pair, s) for s in "ab")
    proc = subprocess.run([DUMPVIEW, "diff", a, b, "--json"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == e["dumpview"]["diff"]["exit_status"]
    window = json.loads(proc.stdout)["diff"]["windows"][0]
    first = window["first_divergence"]
    assert window["pairs"][first]["key"] == e["dumpview"]["diff"]["first_divergence"]
    assert window["pairs"][first]["verdict"]["kind"] == e["dumpview"]["diff"]["first_divergence_verdict"]
    assert {p["key"]: p["verdict"]["kind"] for p in window["pairs"]} == e["dumpview"]["diff"]["verdicts"]
    for side in ("a", "b"):
        printed = e["dumpview"].get("scan_" + side)
        if printed is None:
            continue
        proc = subprocess.run([DUMPVIEW, "scan", "tests/fixtures/diagnosis/%s/%s" % (pair, side), "--json"],
                              capture_output=True, text=True, cwd=ROOT)
        assert proc.returncode == printed["exit_status"]
        w = json.loads(proc.stdout)["windows"][0]
        assert (w["first_nonfinite"] or {}).get("key") == printed["first_nonfinite"]
        assert [[m["key"] for m in g["members"]] for g in w["alias_groups"]] == \
            [g["members"] for g in printed["alias_groups"]]


@pytest.mark.parametrize("pair", PAIRS)
def test_manifests_validate_against_the_schema(pair):
    """They are real probe output: strict JSON, valid under assets/manifest.schema.json."""
    jsonschema = pytest.importorskip("jsonschema")
    e = expected(pair)
    validator = jsonschema.Draft202012Validator(load_json(os.path.join(ROOT, "assets", "manifest.schema.json")))

    def refuse(token):
        raise ValueError("non-strict JSON token %s" % token)

    for side in "ab":
        with open(os.path.join(FIXTURES, pair, e[side])) as handle:
            manifest = json.loads(handle.read(), parse_constant=refuse)
        errors = sorted(validator.iter_errors(manifest), key=lambda err: list(err.path))
        assert not errors, "\n".join("%s: %s" % (list(err.path), err.message) for err in errors[:5])
