"""Dump pairs for dumpview's diagnosis rules (issue 29), each with a known answer.

    .venv/bin/python examples/diagnosis_pairs.py                # every pair
    .venv/bin/python examples/diagnosis_pairs.py bad_bytes      # one pair
    .venv/bin/python examples/diagnosis_pairs.py --answers      # expected.json and README.md only,
                                                                # from the committed dumps

Writes tests/fixtures/diagnosis/<pair>/{a,b}/rank0/match1-occ1/ (probe output), expected.json
(the known answer, with what target/debug/dumpview printed for it) and the root README.md.
Every side runs in its own subprocess (``--side PAIR SIDE``) with its own DUMP_PROBE_*
environment, as a user runs two configurations; a pair's old directory is deleted first.
Each side is a tiny, seeded, float32 torch program on the CPU, run through the real probe
(assets/dump_probe.py); nothing here writes a manifest by hand.

    bad_bytes      a persistent cache is captured finite by cache_write, then an uncaptured stray
                   write (b only) puts inf/NaN into part of its bytes; cache_read (same bytes) is
                   b's first non-finite record: the last captured finite writer over those bytes
                   before it is cache_write#1.
    index_suspect  a paged KV write whose slot_mapping (int64) is a block permutation in b: the
                   float records hold the same values, moved (values_moved); slot_mapping#1
                   differs, positions#1 (a control) agrees.
    op_differs     norm is computed by tests/fixtures/diagnosis/ops.py:rms_norm (a) and
                   :rms_norm_no_weight (b) on the same inputs: norm#1 diverges, its input sets agree.
    inputs_differ  the same operator on both sides, but an uncaptured bias between embed and norm
                   (b only): norm#1 diverges and its input set's x already differs.

The op_differs and inputs_differ pairs need capture_inputs(..., outputs=(...)) (an input set
linked to its output records, tensor arguments with stats); the probe is checked for it.
"""

import inspect
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pair_tools as pt  # noqa: E402

FIXTURES = os.path.join(pt.ROOT, "tests", "fixtures", "diagnosis")
DUMPVIEW = os.path.join(pt.ROOT, "target", "debug", "dumpview")
OPS_FILE = "tests/fixtures/diagnosis/ops.py"
SEED = 0
# bad_bytes: the elements of the cache's storage (float32, 8 columns) the stray write hits: row 2, columns 3..5.
STRAY = (2 * 8 + 3, 2 * 8 + 6)

EXPECTED_KEYS = ("pair", "description", "rule", "a", "b", "answer", "records", "controls", "dumpview", "notes")

PAIRS = {
    "bad_bytes": dict(
        description="A persistent cache buffer (one storage) is written and captured finite as cache_write "
                    "(a view of rows 0..5); b only: an uncaptured stray write through another view of the same "
                    "storage (scratch = cache.view(-1)[19:22]) puts inf, NaN, -inf into row 2; cache_read (the "
                    "same view) is then captured non-finite. Controls: proj (finite, another storage) and "
                    "cache_tail_write (finite, the same storage, disjoint bytes), both between writer and reader.",
        rule="bad bytes' writer",
        sides={"a": dict(stray_write=False), "b": dict(stray_write=True)},
    ),
    "index_suspect": dict(
        description="A paged KV write: positions (int64, agrees), slot_mapping (int64; b's is built from the "
                    "block table [0, 2] instead of [2, 0], a block permutation), k (float, agrees), kv_write (the "
                    "cache after index_copy_ by slot_mapping) and kv_read (the cache gathered by the true block "
                    "table): b's float records hold a's values, moved.",
        rule="moved values",
        sides={"a": dict(write_blocks=[2, 0]), "b": dict(write_blocks=[0, 2])},
    ),
    "op_differs": dict(
        description="embed (agrees) feeds norm, computed by %s:rms_norm on a and :rms_norm_no_weight on b (the "
                    "operator ignores its weight: a configuration difference), with the same inputs; the input set "
                    "of norm is captured on both sides with _op naming the operator and outputs=(\"norm\",), and "
                    "saved for replay." % OPS_FILE,
        rule="operator or inputs: the operator differs",
        sides={"a": dict(op="rms_norm", bias=False), "b": dict(op="rms_norm_no_weight", bias=False)},
        needs_outputs=True,
    ),
    "inputs_differ": dict(
        description="The same model and operator (%s:rms_norm) on both sides, but b adds an uncaptured bias "
                    "between the captured embed and norm's input: norm#1 diverges and its input set's x already "
                    "differs." % OPS_FILE,
        rule="operator or inputs: the inputs differ",
        sides={"a": dict(op="rms_norm", bias=False), "b": dict(op="rms_norm", bias=True)},
        needs_outputs=True,
    ),
}


# ----------------------------------------------------------------------------- one side


def _seeded():
    import torch

    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    return torch


def side_bad_bytes(dp, opts):
    torch = _seeded()
    T, D, ROWS = 6, 8, 16
    x = torch.randn(T, D, dtype=torch.float32)
    w = torch.randn(D, D, dtype=torch.float32) / D ** 0.5
    tail = torch.randn(ROWS - 8, D, dtype=torch.float32)
    cache = torch.zeros(ROWS, D, dtype=torch.float32)  # the persistent buffer: one storage

    dp.arm("req-bad_bytes", token_ids=list(range(100, 100 + T)))
    embed = x * 0.5
    dp.capture("embed", embed)
    cache_write = cache[0:T]
    cache_write.copy_(embed)
    dp.capture("cache_write", cache_write, rows=None)
    proj = embed @ w  # control: finite, on a storage of its own
    dp.capture("proj", proj)
    cache_tail = cache[8:ROWS]
    cache_tail.copy_(tail)
    dp.capture("cache_tail_write", cache_tail, rows=None)  # control: same storage, disjoint bytes
    if opts["stray_write"]:
        # An uncaptured kernel writing out of bounds: a scratch view aliasing the cache's storage.
        scratch = cache.view(-1)[STRAY[0]:STRAY[1]]
        scratch.copy_(torch.tensor([float("inf"), float("nan"), float("-inf")], dtype=torch.float32))
    cache_read = cache[0:T]
    dp.capture("cache_read", cache_read, rows=None)
    scores = (proj @ cache_read.t()) / D ** 0.5
    attn_out = torch.softmax(scores, dim=-1) @ cache_read
    dp.capture("attn_out", attn_out)
    dp.finish()
    return {"stray_write": opts["stray_write"]}


def side_index_suspect(dp, opts):
    torch = _seeded()
    T, D, BS, BLOCKS = 8, 8, 4, 4
    true_blocks = torch.tensor([2, 0], dtype=torch.int64)  # the request's block table
    write_blocks = torch.tensor(opts["write_blocks"], dtype=torch.int64)  # what the slot mapping was built from
    k = torch.randn(T, D, dtype=torch.float32)
    cache = torch.zeros(BLOCKS * BS, D, dtype=torch.float32)

    dp.arm("req-index_suspect", token_ids=list(range(200, 200 + T)))
    positions = torch.arange(T, dtype=torch.int64)
    dp.capture("positions", positions)
    slot_mapping = write_blocks[positions // BS] * BS + positions % BS
    dp.capture("slot_mapping", slot_mapping)
    dp.capture("k", k)
    cache.index_copy_(0, slot_mapping, k)
    dp.capture("kv_write", cache, rows=None)
    read_slots = true_blocks[positions // BS] * BS + positions % BS  # the reader's (correct) block table
    kv_read = cache[read_slots]
    dp.capture("kv_read", kv_read)
    dp.finish()
    return {"slot_mapping": slot_mapping.tolist(), "read_slots": read_slots.tolist()}


def side_norm(dp, opts, pair):
    torch = _seeded()
    sys.path.insert(0, os.path.dirname(os.path.join(pt.ROOT, OPS_FILE)))
    import ops

    T, D, VOCAB = 6, 16, 32
    table = torch.randn(VOCAB, D, dtype=torch.float32)
    weight = 1.0 + 0.5 * torch.randn(D, dtype=torch.float32)
    bias = 0.25 * torch.randn(D, dtype=torch.float32)
    proj_w = torch.randn(D, D, dtype=torch.float32) / D ** 0.5
    eps = 1e-6
    ids = torch.tensor([3, 17, 5, 29, 11, 8], dtype=torch.int64)
    op = getattr(ops, opts["op"])

    dp.arm("req-%s" % pair, token_ids=ids.tolist())
    embed = table[ids]
    dp.capture("embed", embed)
    h = embed + bias if opts["bias"] else embed  # uncaptured (b of inputs_differ only)
    dp.capture_inputs("norm", _op="%s:%s" % (OPS_FILE, opts["op"]), outputs=("norm",), x=h, weight=weight, eps=eps)
    norm = op(h, weight, eps)
    dp.capture("norm", norm)
    proj = norm @ proj_w
    dp.capture("proj", proj)
    dp.finish()
    return {"op": opts["op"], "bias": opts["bias"]}


def run_one_side(pair, side):
    """Child process: run one side's program; the probe writes its window."""
    sys.path.insert(0, pt.ASSETS)
    import dump_probe as dp  # reads DUMP_PROBE_* now, at import

    opts = PAIRS[pair]["sides"][side]
    if pair == "bad_bytes":
        out = side_bad_bytes(dp, opts)
    elif pair == "index_suspect":
        out = side_index_suspect(dp, opts)
    else:
        out = side_norm(dp, opts, pair)
    print(json.dumps(dict(pair=pair, side=side, **out)))


# ----------------------------------------------------------------------------- parent


def probe_has_outputs():
    sys.path.insert(0, pt.ASSETS)
    import dump_probe as dp

    return "outputs" in inspect.signature(dp.capture_inputs).parameters


def check(condition, message):
    if not condition:
        raise SystemExit("known answer not reproduced: " + message)


def dumpview(*args):
    """target/debug/dumpview ARGS --json, parsed; the exit status is kept (it says what was found)."""
    if not os.path.exists(DUMPVIEW):
        raise SystemExit("build dumpview first (cargo build): %s is missing" % DUMPVIEW)
    proc = subprocess.run([DUMPVIEW] + list(args) + ["--json"], capture_output=True, text=True, cwd=pt.ROOT)
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stderr)
        raise SystemExit("dumpview %s failed (exit %d)" % (" ".join(args), proc.returncode))
    return json.loads(proc.stdout), proc.returncode


def by_key(manifest):
    return {pt.key(r): r for r in manifest["records"]}


def record_facts(record, side):
    """The fields a diagnosis cites for one record."""
    lo_hi = pt.byte_range(record)
    stats = record["stats"]
    return {
        "side": side,
        "seq": record["seq"],
        "dtype": record["dtype"],
        "shape": record["shape"],
        "stride": record["stride"],
        "storage_offset": record["storage_offset"],
        "storage_id": record["storage_id"],
        "storage_ptr": record["storage_ptr"],
        "data_ptr": record["data_ptr"],
        "byte_range": list(lo_hi) if lo_hi else None,
        "nan_count": stats["nan_count"],
        "inf_count": stats["inf_count"],
    }


def overlap(r1, r2):
    (lo1, hi1), (lo2, hi2) = pt.byte_range(r1), pt.byte_range(r2)
    return lo1 < hi2 and lo2 < hi1


def diff_facts(pair_dir):
    """What `dumpview diff a b --json` printed about the first divergence, and each pair's verdict."""
    rel_a, rel_b = pt.rel(os.path.join(pair_dir, "a"), pt.ROOT), pt.rel(os.path.join(pair_dir, "b"), pt.ROOT)
    out, rc = dumpview("diff", rel_a, rel_b)
    window = out["diff"]["windows"][0]
    first = window["first_divergence"]
    return {
        "command": "dumpview diff %s %s --json" % (rel_a, rel_b),
        "exit_status": rc,
        "headline": out["diff"]["headline"]["text"],
        "first_divergence": window["pairs"][first]["key"] if first is not None else None,
        "first_divergence_verdict": window["pairs"][first]["verdict"]["kind"] if first is not None else None,
        "first_nonfinite_a": (window["first_nonfinite_a"] or {}).get("key"),
        "first_nonfinite_b": (window["first_nonfinite_b"] or {}).get("key"),
        "verdicts": {p["key"]: p["verdict"]["kind"] for p in window["pairs"]},
        "only_a": window["only_a"],
        "only_b": window["only_b"],
    }


def scan_facts(pair_dir, side):
    rel_side = pt.rel(os.path.join(pair_dir, side), pt.ROOT)
    out, rc = dumpview("scan", rel_side)
    window = out["windows"][0]
    return {
        "command": "dumpview scan %s --json" % rel_side,
        "exit_status": rc,
        "first_nonfinite": (window["first_nonfinite"] or {}).get("key"),
        "nonfinite_records": window["nonfinite_records"],
        "alias_groups": [
            {"storage_id": g["storage_id"], "members": [m["key"] for m in g["members"]],
             "stride_conflict": g["stride_conflict"]}
            for g in window["alias_groups"]
        ],
    }


# ----------------------------------------------------------------------------- answers


def answer_bad_bytes(m, sides, pair_dir):
    a, b = by_key(m["a"]), by_key(m["b"])
    reader, writer = b["cache_read#1"], b["cache_write#1"]
    check(pt.first_nonfinite(m["a"]) is None, "a has a non-finite record")
    check(pt.first_nonfinite(m["b"]) == "cache_read#1", "b's first non-finite is %s" % pt.first_nonfinite(m["b"]))
    for k in ("cache_write#1", "cache_read#1", "cache_tail_write#1", "proj#1"):
        for s, recs in (("a", a), ("b", b)):
            r = recs[k]
            check(None not in (r["storage_id"], r["storage_ptr"], r["data_ptr"]), "%s %s lacks an address" % (s, k))
    check(writer["storage_id"] == reader["storage_id"], "writer and reader storages differ")
    check(overlap(writer, reader), "writer and reader bytes do not overlap")
    check(writer["seq"] < reader["seq"], "writer is not before the reader")
    check(writer["stats"]["nan_count"] == 0 and writer["stats"]["inf_count"] == 0, "writer not finite")
    # Every finite record before the reader over the reader's bytes: the last is the answer.
    before = [r for r in sorted(m["b"]["records"], key=lambda r: r["seq"])
              if r["seq"] < reader["seq"] and r["storage_id"] == reader["storage_id"] and overlap(r, reader)]
    check([pt.key(r) for r in before] == ["cache_write#1"], "finite writers over the bytes: %s"
          % [pt.key(r) for r in before])
    tail, proj = b["cache_tail_write#1"], b["proj#1"]
    check(tail["storage_id"] == reader["storage_id"] and not overlap(tail, reader), "tail control is not disjoint")
    check(proj["storage_id"] != reader["storage_id"], "proj control shares the cache's storage")
    check(writer["seq"] < proj["seq"] < reader["seq"] and writer["seq"] < tail["seq"] < reader["seq"],
          "controls are not between writer and reader")
    lo = max(pt.byte_range(writer)[0], pt.byte_range(reader)[0])
    hi = min(pt.byte_range(writer)[1], pt.byte_range(reader)[1])
    diff, scan_b = diff_facts(pair_dir), scan_facts(pair_dir, "b")
    check(diff["first_divergence"] == "cache_read#1" and diff["first_divergence_verdict"] == "non_finite",
          "dumpview diff: %s %s" % (diff["first_divergence"], diff["first_divergence_verdict"]))
    check(scan_b["first_nonfinite"] == "cache_read#1", "dumpview scan b: %s" % scan_b["first_nonfinite"])
    answer = {
        "first_nonfinite": "cache_read#1",
        "first_nonfinite_side": "b",
        "bad_bytes_writer": "cache_write#1",
        "storage_id": reader["storage_id"],
        "storage_ptr": reader["storage_ptr"],
        "overlap_bytes": [lo, hi],
        "reader_bytes": list(pt.byte_range(reader)),
        "writer_bytes": list(pt.byte_range(writer)),
        "stray_bytes_in_storage": [STRAY[0] * 4, STRAY[1] * 4],
        "first_divergence": "cache_read#1",
        "first_divergence_verdict": "non_finite",
    }
    records = {"b": {k: record_facts(b[k], "b") for k in ("cache_write#1", "proj#1", "cache_tail_write#1",
                                                         "cache_read#1", "attn_out#1")},
               "a": {k: record_facts(a[k], "a") for k in ("cache_write#1", "cache_read#1")}}
    controls = {
        "proj#1": "finite, between writer and reader, on another storage (storage_id %d): must not be named"
                  % proj["storage_id"],
        "cache_tail_write#1": "finite, between writer and reader, the same storage (storage_id %d) but bytes %s "
                              "disjoint from the reader's %s: must not be named"
                              % (tail["storage_id"], list(pt.byte_range(tail)), list(pt.byte_range(reader))),
        "attn_out#1": "non-finite after the reader: downstream, not the origin",
        "a": "side a has no non-finite record: the rule stays silent on a alone",
    }
    notes = ("The stray write is uncaptured: b's bytes [%d, %d) (row 2, columns 3..5 of the cache: inf, NaN, -inf) "
             "change between cache_write#1 (seq %d, finite) and cache_read#1 (seq %d). The writer is the last captured "
             "finite record over the reader's bytes before it; the real culprit ran between them, uncaptured."
             % (reader["storage_ptr"] + STRAY[0] * 4, reader["storage_ptr"] + STRAY[1] * 4, writer["seq"], reader["seq"]))
    return answer, records, controls, {"diff": diff, "scan_b": scan_b, "scan_a": scan_facts(pair_dir, "a")}, notes


def answer_index_suspect(m, sides, pair_dir):
    a, b = by_key(m["a"]), by_key(m["b"])
    verdicts = {k: pt.dumpview_compare_records(ra, rb)[0] for k, ra, rb in pt.dumpview_pairs(m["a"], m["b"])}
    check(verdicts["positions#1"] == "agree", "positions: %s" % verdicts["positions#1"])
    check(verdicts["k#1"] == "agree", "k: %s" % verdicts["k#1"])
    check(verdicts["slot_mapping#1"] != "agree", "slot_mapping agrees")
    check(verdicts["kv_write#1"] == "values_moved", "kv_write: %s" % verdicts["kv_write#1"])
    check(verdicts["kv_read#1"] == "values_moved", "kv_read: %s" % verdicts["kv_read#1"])
    for k in ("positions#1", "slot_mapping#1"):
        check(pt.dtype_kind(a[k]["dtype"]) == "integer", "%s is not an integer stage" % k)
    diff = diff_facts(pair_dir)
    check(diff["verdicts"] == verdicts, "dumpview diff verdicts %s, reference %s" % (diff["verdicts"], verdicts))
    floats = [k for k in diff["verdicts"] if pt.dtype_kind(a[k]["dtype"]) == "floating"
              and diff["verdicts"][k] not in pt.VERDICTS_NOT_DIVERGING]
    first_float = floats[0] if floats else None
    check(first_float == "kv_write#1", "first diverging float record %s" % first_float)
    answer = {
        "first_divergence": diff["first_divergence"],
        "first_divergence_verdict": diff["first_divergence_verdict"],
        "first_float_divergence": first_float,
        "first_float_divergence_verdict": diff["verdicts"][first_float],
        "moved": [k for k in floats if diff["verdicts"][k] == "values_moved"],
        "index_suspects": ["slot_mapping#1"],
        "index_not_suspects": ["positions#1"],
        "slot_mapping_a": sides["a"]["slot_mapping"],
        "slot_mapping_b": sides["b"]["slot_mapping"],
        "read_slots": sides["a"]["read_slots"],
    }
    keys = ("positions#1", "slot_mapping#1", "k#1", "kv_write#1", "kv_read#1")
    records = {s: {k: dict(record_facts(recs[k], s), stats={n: recs[k]["stats"][n] for n in pt.VALUE_STATS})
                   for k in keys} for s, recs in (("a", a), ("b", b))}
    controls = {
        "positions#1": "an integer index stage before the moved values that agrees: not a suspect",
        "k#1": "the float values written (agrees): the values are right, their places are not",
    }
    notes = ("slot_mapping#1 is an integer stage captured before the float records (as a runner captures it before "
             "the attention layer), so dumpview diff's first divergence in capture order is slot_mapping#1 itself (%s: "
             "a permutation keeps min, max, mean and l2, the position checksum moves); the first diverging float "
             "record is kv_write#1 (values_moved), then kv_read#1 (values_moved): the same multiset, moved. "
             "b's writer built its slots from the block table [0, 2], the reader gathers through the true [2, 0]."
             % diff["first_divergence_verdict"])
    return answer, records, controls, {"diff": diff}, notes


def input_set(manifest, stage="norm", occurrence=1):
    for entry in manifest["input_sets"]:
        if entry["stage"] == stage and entry["occurrence"] == occurrence:
            return entry
    raise SystemExit("no input set %s#%d" % (stage, occurrence))


def args_agree(set_a, set_b):
    """name -> verdict of each tensor argument of two input sets, by dumpview's record rule on their stats;
    scalars by value."""
    out = {}
    for name, da in set_a["args"].items():
        db = set_b["args"].get(name)
        if db is None:
            out[name] = "missing_b"
        elif da["kind"] == "tensor":
            ra = dict(da, stage=name, occurrence=1)
            rb = dict(db, stage=name, occurrence=1)
            out[name] = pt.dumpview_compare_records(ra, rb)[0]
        else:
            out[name] = "agree" if da.get("value") == db.get("value") else "differs"
    return out


def answer_norm(m, sides, pair_dir, inputs_agree):
    a, b = by_key(m["a"]), by_key(m["b"])
    diff = diff_facts(pair_dir)
    check(diff["verdicts"]["embed#1"] == "agree", "embed: %s" % diff["verdicts"]["embed#1"])
    check(diff["first_divergence"] == "norm#1", "first divergence %s" % diff["first_divergence"])
    sa, sb = input_set(m["a"]), input_set(m["b"])
    for s, entry in (("a", sa), ("b", sb)):
        check(entry.get("outputs") is not None, "%s's input set has no outputs" % s)
        for name in ("x", "weight"):
            check(entry["args"][name].get("stats") is not None, "%s's input set arg %s has no stats" % (s, name))
        check(os.path.exists(os.path.join(pair_dir, s, "rank0", "match1-occ1", entry["file"])),
              "%s's input set file is missing" % s)
    agree = args_agree(sa, sb)
    if inputs_agree:
        check(all(v == "agree" for v in agree.values()), "input set args %s" % agree)
    else:
        check(agree["x"] != "agree" and agree["weight"] == "agree" and agree["eps"] == "agree",
              "input set args %s" % agree)
    feed = cross_feed(pair_dir, m)
    for side in "ab":  # each side's operator reproduces its own saved output from its own saved inputs
        check(feed["op_%s_on_inputs_%s_vs_output_%s" % (side, side, side)] == 0.0, "side %s's replay differs" % side)
    if inputs_agree:  # b's operator on a's inputs gives b's output: the operator is the difference
        check(feed["op_b_on_inputs_a_vs_output_b"] == 0.0 and feed["op_a_on_inputs_b_vs_output_a"] == 0.0,
              "cross-feed %s" % feed)
        check(feed["op_b_on_inputs_a_vs_output_a"] > 0.0, "b's operator reproduces a's output")
    else:  # the same operator on a's inputs gives a's output, not b's: the inputs are the difference
        check(feed["op_b_on_inputs_a_vs_output_a"] == 0.0 and feed["op_a_on_inputs_b_vs_output_b"] == 0.0,
              "cross-feed %s" % feed)
        check(feed["op_b_on_inputs_a_vs_output_b"] > 0.0, "inputs of a reproduce b's output")
    answer = {
        "first_divergence": "norm#1",
        "first_divergence_verdict": diff["first_divergence_verdict"],
        "upstream_agrees": "embed#1",
        "input_set": "norm#1",
        "input_set_args": agree,
        "op_a": sa.get("op"),
        "op_b": sb.get("op"),
        "outputs_a": sa.get("outputs"),
        "outputs_b": sb.get("outputs"),
        "cross_feed_max_abs": feed,
        "conclusion": ("inputs agree, outputs differ: the operator (or its configuration) differs" if inputs_agree
                       else "the inputs already differ: look upstream between embed#1 (agrees) and norm#1"),
    }
    records = {s: {k: dict(record_facts(recs[k], s), stats={n: recs[k]["stats"][n] for n in pt.VALUE_STATS})
                   for k in ("embed#1", "norm#1", "proj#1")} for s, recs in (("a", a), ("b", b))}
    records["input_sets"] = {s: {"file": e["file"], "op": e.get("op"), "outputs": e.get("outputs"),
                                 "args": {n: (d.get("stats") if d["kind"] == "tensor" else d.get("value"))
                                          for n, d in e["args"].items()}}
                             for s, e in (("a", sa), ("b", sb))}
    controls = {"embed#1": "agrees on both sides: upstream of norm, not the origin",
                "proj#1": "diverges after norm#1: downstream"}
    notes = ("op_differs: replaying b's operator (%s:rms_norm_no_weight) on a's saved input set reproduces b's norm; "
             "a's operator on b's set reproduces a's." % OPS_FILE if inputs_agree else
             "inputs_differ: the bias is added by uncaptured code between embed#1 and the norm call, so no captured "
             "record but the input set's x shows it before norm#1.")
    return answer, records, controls, {"diff": diff}, notes


def load_ops():
    import importlib.util

    spec = importlib.util.spec_from_file_location("diagnosis_ops", os.path.join(pt.ROOT, OPS_FILE))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_set(window_dir, entry):
    """(arguments, {output key: tensor}) of one saved input set, tensors rebuilt with their exact layout."""
    import torch

    def rebuild(value):
        if isinstance(value, dict) and value.get("__dump_probe_tensor__"):
            return torch.as_strided(value["span"], value["shape"], value["stride"], value["offset_in_span"])
        return value

    args = torch.load(os.path.join(window_dir, entry["file"]), weights_only=True)
    outputs = {o["key"]: torch.load(os.path.join(window_dir, o["file"]), weights_only=True) for o in entry["outputs"]}
    return {k: rebuild(v) for k, v in args.items()}, outputs


def cross_feed(pair_dir, manifests):
    """Each side's operator on each side's saved inputs, judged against each side's saved norm#1 output:
    max |difference| (0.0: bit-identical), float32 on the CPU."""
    ops = load_ops()
    sets = {}
    for s in "ab":
        entry = input_set(manifests[s])
        args, outputs = load_set(os.path.join(pair_dir, s, "rank0", "match1-occ1"), entry)
        sets[s] = (getattr(ops, entry["op"].split(":")[1]), args, outputs["norm#1"])
    out = {}
    for op_side in "ab":
        for in_side in "ab":
            got = sets[op_side][0](**sets[in_side][1])
            for ref in "ab":
                out["op_%s_on_inputs_%s_vs_output_%s" % (op_side, in_side, ref)] = float(
                    (got - sets[ref][2]).abs().max())
    return out


ANSWERS = {
    "bad_bytes": answer_bad_bytes,
    "index_suspect": answer_index_suspect,
    "op_differs": lambda m, s, d: answer_norm(m, s, d, inputs_agree=True),
    "inputs_differ": lambda m, s, d: answer_norm(m, s, d, inputs_agree=False),
}


def side_env(directory):
    env = pt.probe_env(directory)
    env["DUMP_PROBE_KERNEL"] = "torch"  # the same statistics path wherever the generator runs
    env["PYTHONHASHSEED"] = "0"
    return env


def run_pair(pair, rerun=True):
    spec = PAIRS[pair]
    pair_dir = os.path.join(FIXTURES, pair)
    sides, manifests, paths = {}, {}, {}
    if rerun:
        pt.fresh_dir(pair_dir)
    else:
        sides = pt.load(os.path.join(pair_dir, "expected.json"))["notes"]["sides"]
    for side in spec["sides"]:
        if rerun:
            sides[side] = pt.run_side(os.path.abspath(__file__), ["--side", pair, side],
                                      side_env(os.path.join(pair_dir, side)))
            sides[side].pop("_wall_s", None)
        paths[side] = pt.find_manifest(os.path.join(pair_dir, side), 1)
        manifests[side] = pt.load(paths[side])
    answer, records, controls, printed, notes = ANSWERS[pair](manifests, sides, pair_dir)
    expected = {
        "pair": pair,
        "description": spec["description"],
        "rule": spec["rule"],
        "a": pt.rel(paths["a"], pair_dir),
        "b": pt.rel(paths["b"], pair_dir),
        "answer": answer,
        "records": records,
        "controls": controls,
        "dumpview": printed,
        "notes": {"text": notes, "sides": sides,
                  "generated_by": ".venv/bin/python examples/diagnosis_pairs.py %s" % pair},
    }
    check(tuple(expected) == EXPECTED_KEYS, "expected.json keys")
    with open(os.path.join(pair_dir, "expected.json"), "w") as handle:
        json.dump(expected, handle, indent=1, allow_nan=False)
        handle.write("\n")
    return expected


README_HEAD = """# Diagnosis fixture pairs (issue 29)

Small real captures for dumpview's diagnosis rules, one pair per rule outcome. Every side is a
tiny seeded float32 torch program run on the CPU through the real probe (assets/dump_probe.py),
each side in its own process with its own DUMP_PROBE_* environment. Written by

    .venv/bin/python examples/diagnosis_pairs.py            # every pair (deletes each pair first)
    .venv/bin/python examples/diagnosis_pairs.py PAIR       # one pair
    .venv/bin/python examples/diagnosis_pairs.py --answers  # expected.json only, from the committed dumps

which needs target/debug/dumpview (`cargo build`): each expected.json records what the real
binary printed. tests/python/test_diagnosis_fixtures.py checks every expected.json against the
manifests (no model is rerun). Addresses (storage_ptr, data_ptr) are those of the generating
process; they differ on every run, storage_id and the byte ranges' overlap do not.

Layout: `<pair>/{a,b}/rank0/match1-occ1/manifest.json` (+ rows.f32, token-row statistics;
+ `inputs/norm#1.pt`, the saved input set, in op_differs and inputs_differ), `<pair>/expected.json`.
`ops.py` holds the two operators of op_differs / inputs_differ, named by their input sets' `op`.

## expected.json

| key | meaning |
|---|---|
| `pair`, `description` | the pair and what its two sides do |
| `rule` | the diagnosis rule (issue 29) the pair is for |
| `a`, `b` | each side's manifest, relative to the pair directory |
| `answer` | the known answer: the records, storage, byte ranges or input-set verdicts a diagnosis must name |
| `records` | the cited records' facts per side: seq, dtype, shape, stride, storage_offset, storage_id, storage_ptr, data_ptr, `byte_range` = [data_ptr, data_ptr + (1 + sum((size-1)*stride)) * element_size), nan/inf counts (and the compared statistics where values matter); for the norm pairs also `input_sets` (file, op, outputs, each argument's stats or value) |
| `controls` | records a rule must not name, and why |
| `dumpview` | what `target/debug/dumpview diff a b --json` (and `scan --json` where it matters) printed: the command, its exit status, the headline, the first divergence and its verdict kind, every pair's verdict, scan's first non-finite record and alias groups |
| `notes` | `text` (the story in words), `sides` (what each side's program printed: its options, slot mappings), `generated_by` |
"""


def write_root_readme():
    parts = [README_HEAD]
    for pair in PAIRS:
        path = os.path.join(FIXTURES, pair, "expected.json")
        if not os.path.exists(path):
            parts.append("## %s\n\nNot generated yet.\n" % pair)
            continue
        e = pt.load(path)
        a = e["answer"]
        lines = ["## %s (%s)" % (pair, e["rule"]), "", e["description"], "",
                 "dumpview diff: `%s` (exit %d)." % (e["dumpview"]["diff"]["headline"], e["dumpview"]["diff"]["exit_status"]), ""]
        if pair == "bad_bytes":
            lines += ["Answer: b's first non-finite record is `%s`; the last captured finite writer over the same "
                      "bytes before it is `%s`, on storage_id %d; writer bytes %s, reader bytes %s (relative: the "
                      "reader's bytes are [0, %d) of the storage, the stray write's [%d, %d)). Controls: %s." % (
                          a["first_nonfinite"], a["bad_bytes_writer"], a["storage_id"], a["writer_bytes"],
                          a["reader_bytes"], a["reader_bytes"][1] - a["reader_bytes"][0],
                          a["stray_bytes_in_storage"][0], a["stray_bytes_in_storage"][1],
                          "; ".join("`%s` %s" % kv for kv in e["controls"].items()))]
        elif pair == "index_suspect":
            lines += ["Answer: the first diverging float record is `%s` (%s); the float records whose values moved "
                      "(values_moved: the same multiset, moved) are %s; suspect index stage `%s` (differs: slot mapping a %s, b %s); `%s` agrees and is "
                      "not a suspect. dumpview diff's first divergence in capture order is `%s` (%s) itself: the "
                      "index stage is captured before the float records." % (
                          a["first_float_divergence"], a["first_float_divergence_verdict"], ", ".join(a["moved"]),
                          a["index_suspects"][0], a["slot_mapping_a"], a["slot_mapping_b"], a["index_not_suspects"][0],
                          a["first_divergence"], a["first_divergence_verdict"])]
        else:
            feed = a["cross_feed_max_abs"]
            lines += ["Answer: first divergence `%s` (%s); `%s` agrees; input set `%s` (op a `%s`, op b `%s`, "
                      "outputs a %s, b %s) arguments, by dumpview's record rule on their stats: %s. Conclusion: %s." % (
                          a["first_divergence"], a["first_divergence_verdict"], a["upstream_agrees"], a["input_set"],
                          a["op_a"], a["op_b"], json.dumps(a["outputs_a"]), json.dumps(a["outputs_b"]),
                          ", ".join("%s %s" % kv for kv in a["input_set_args"].items()), a["conclusion"]),
                      "",
                      "Cross-feeding (the saved sets and outputs, float32 CPU): b's operator on a's inputs vs b's "
                      "output: max |diff| %g, vs a's output: %g; a's operator on b's inputs vs a's output: %g, vs b's "
                      "output: %g (`answer.cross_feed_max_abs` has all eight)." % (
                          feed["op_b_on_inputs_a_vs_output_b"], feed["op_b_on_inputs_a_vs_output_a"],
                          feed["op_a_on_inputs_b_vs_output_a"], feed["op_a_on_inputs_b_vs_output_b"])]
        lines += ["", e["notes"]["text"], ""]
        parts.append("\n".join(lines))
    parts += foreign_sections(os.path.join(FIXTURES, "README.md"))
    with open(os.path.join(FIXTURES, "README.md"), "w") as handle:
        handle.write("\n".join(parts).rstrip() + "\n")


def foreign_sections(path):
    """The README's "## " sections that this script does not write (pairs of other generators under
    tests/fixtures/diagnosis): kept, in their order, after this script's own."""
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        text = handle.read()
    own = set(PAIRS) | {"expected.json"}
    kept = []
    for chunk in text.split("\n## ")[1:]:
        heading = chunk.split("\n", 1)[0].split(" ", 1)[0]
        if heading not in own:
            kept.append("## " + chunk.rstrip() + "\n")
    return kept


def main(argv):
    if len(argv) >= 3 and argv[0] == "--side":
        run_one_side(argv[1], argv[2])
        return
    rerun = "--answers" not in argv
    names = [a for a in argv if not a.startswith("--")] or list(PAIRS)
    for name in names:
        if name not in PAIRS:
            raise SystemExit("unknown pair %s (one of %s)" % (name, ", ".join(PAIRS)))
    outputs = probe_has_outputs()
    for name in names:
        if PAIRS[name].get("needs_outputs") and not outputs:
            print("%s: skipped, the probe's capture_inputs() has no outputs= yet" % name)
            continue
        expected = run_pair(name, rerun=rerun)
        print("%s: %s" % (name, json.dumps(expected["answer"])))
    write_root_readme()


if __name__ == "__main__":
    main(sys.argv[1:])
