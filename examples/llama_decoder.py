"""Dump pairs of a tiny seeded Llama decoder, each with a known answer.

    .venv/bin/python examples/llama_decoder.py                 # all four pairs
    .venv/bin/python examples/llama_decoder.py llama_kv_alias  # one pair
    .venv/bin/python examples/llama_decoder.py --answers       # expected.json and README.md only,
                                                               # from the committed dumps

Writes assets/examples/<pair>/{a,b}/rank0/match1-occ<N>/ (probe output),
expected.json (the known answer) and README.md.  Every side runs in its own
subprocess (``--side PAIR SIDE``) with its own DUMP_PROBE_* environment, as a
user would run two configurations; a pair's old directory is deleted first.

The model is examples/tiny_llama.py: LlamaForCausalLM(CONFIG) weights with
torch.manual_seed(0), run through an explicit re-implementation that is
checked against HF's logits before any pair is written.
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pair_tools as pt  # noqa: E402

# layers.3.mlp.up_proj.weight row OUTLIER_ROW is scaled so its largest |w| is
# OUTLIER_MAX_W: finite in float16 (max 65504), but its dot products with the
# RMS-normalised hidden state reach ~1e5, which float16 cannot hold.
OUTLIER_LAYER = 3
OUTLIER_ROW = 100
OUTLIER_MAX_W = 16384.0
OUTLIER_TAG = "model.layers.%d.mlp.up_proj.weight[%d,:] scaled so that max|w| = %g" % (
    OUTLIER_LAYER, OUTLIER_ROW, OUTLIER_MAX_W)

CHUNKS = [5, 4, 3]
NEW_TOKENS = 3

# Per pair: description, sides (model options + probe selection), tensors saved.
PAIRS = {
    "llama_fp16_overflow": dict(
        description="Same seeded weights with one outlier up_proj row: float32 (a) vs float16 (b); "
                    "the prefill is captured. b overflows to inf at layers.%d.mlp_up." % OUTLIER_LAYER,
        sides={
            "a": dict(dtype="float32", outlier=True, occurrence=1),
            "b": dict(dtype="float16", outlier=True, occurrence=1),
        },
        tensor=r"^(logits|layers\.%d\.mlp_up)$" % OUTLIER_LAYER,
        rows=8,
    ),
    "llama_kv_alias": dict(
        description="Correct static KV cache (a) vs a K-cache writer that reinterprets the NHD cache "
                    "as HND (b); the prefill is captured.",
        sides={
            "a": dict(dtype="float32", kv_fault=False, occurrence=1),
            "b": dict(dtype="float32", kv_fault=True, occurrence=1),
        },
        tensor=r"^(logits|layers\.0\.k_cache_(write|read))$",
        rows=8,
    ),
    "llama_chunked_prefill": dict(
        description="Prompt prefilled whole (a) vs in chunks %s (b); the first decode step is captured "
                    "on both sides (a: call 2, b: call 4)." % CHUNKS,
        sides={
            "a": dict(dtype="float32", chunks=None, occurrence=2),
            "b": dict(dtype="float32", chunks=CHUNKS, occurrence=1 + len(CHUNKS)),
        },
        tensor=r"^(logits|runner\.logits)$",
        rows=None,
    ),
    "llama_eager_vs_graph": dict(
        description="First decode step run eagerly (a) vs through an emulated graph replay (b): "
                    "only runner.* (outside the graph) and graph slots of layers.*.residual_mlp record.",
        sides={
            "a": dict(dtype="float32", decode_mode="eager", occurrence=2),
            "b": dict(dtype="float32", decode_mode="graph", occurrence=2),
        },
        tensor=r"^(runner\.logits|layers\.5\.residual_mlp)$",
        rows=None,
    ),
}


# ----------------------------------------------------------------------------- one side


def run_one_side(pair, side):
    """Child process: build the model, serve the request, let the probe write its window."""
    import torch

    sys.path.insert(0, pt.ASSETS)
    import dump_probe as dp  # reads DUMP_PROBE_* now, at import
    import tiny_llama as tl

    opts = PAIRS[pair]["sides"][side]
    tl.deterministic()
    hf = tl.build_hf_model()
    extra = ""
    if opts.get("outlier"):
        with torch.no_grad():
            row = hf.model.layers[OUTLIER_LAYER].mlp.up_proj.weight[OUTLIER_ROW]
            row.mul_(OUTLIER_MAX_W / float(row.abs().max()))
        extra = OUTLIER_TAG
    dtype = getattr(torch, opts["dtype"])
    model = tl.TinyLlama(hf, dtype=dtype, kv_fault=opts.get("kv_fault", False), probe=dp)
    decode_mode = opts.get("decode_mode", "eager")
    if decode_mode == "graph":
        # Slots are allocated before the request arrives, as a graph is captured at start-up.
        like = torch.empty(1, hf.config.hidden_size, dtype=dtype)
        for i in range(hf.config.num_hidden_layers):
            dp.graph_slot("layers.%d.residual_mlp" % i, like)
    runner = tl.Runner(model, probe=dp, label="req-%s" % pair, weights=tl.weights_tag(extra),
                       decode_mode=decode_mode)
    with torch.no_grad():
        ids = runner.generate(tl.PROMPT_IDS, NEW_TOKENS, chunks=opts.get("chunks"))
    print(json.dumps({"pair": pair, "side": side, "ids": ids, "calls": runner.calls}))


# ----------------------------------------------------------------------------- parent


def run_pair(pair, rerun=True):
    """Runs both sides of ``pair`` (rerun) or reads the committed dumps, then writes expected.json and
    README.md from them. Without rerun nothing but the answers changes: what the sides printed (the
    generated ids) is read back from the committed expected.json."""
    spec = PAIRS[pair]
    pair_dir = os.path.join(pt.OUT_ROOT, pair)
    sides, manifests, paths = {}, {}, {}
    if rerun:
        pt.fresh_dir(pair_dir)
    else:
        ids = json.loads(pt.load(os.path.join(pair_dir, "expected.json"))["notes"]).get("generated_ids")
        sides = {side: {"ids": ids} for side in spec["sides"]}
    for side, opts in spec["sides"].items():
        if rerun:
            env = pt.probe_env(os.path.join(pair_dir, side), occurrence=opts["occurrence"],
                               tensor=spec["tensor"], rows=spec["rows"])
            sides[side] = pt.run_side(os.path.abspath(__file__), ["--side", pair, side], env)
        paths[side] = pt.find_manifest(os.path.join(pair_dir, side), opts["occurrence"])
        if rerun:  # the probe recorded this checkout's absolute paths: keep the dump portable
            pt.relative_run(paths[side], "examples/llama_decoder.py", ["--side", pair, side])
        manifests[side] = pt.load(paths[side])
    expected, readme = ANSWERS[pair](spec, manifests, sides)
    expected = dict(
        pair=pair,
        description=spec["description"],
        a=pt.rel(paths["a"], pair_dir),
        b=pt.rel(paths["b"], pair_dir),
        **expected,
    )
    expected = {k: expected[k] for k in pt.EXPECTED_KEYS}
    pt.write_expected(pair_dir, expected)
    pt.write_readme(pair_dir, readme(expected))
    return expected, sides


def check(condition, message):
    if not condition:
        raise SystemExit("known answer not reproduced: " + message)


def cache_groups(manifest, layers, tensors=("k", "v")):
    """Designed cache alias groups: [layers.i.X_cache_write#1, layers.i.X_cache_read#1]."""
    present = {pt.key(r) for r in manifest["records"]}
    groups = []
    for i in range(layers):
        for t in tensors:
            group = ["layers.%d.%s_cache_write#1" % (i, t), "layers.%d.%s_cache_read#1" % (i, t)]
            if all(g in present for g in group):
                groups.append(group)
    return groups


def verify_designed_groups(manifest, groups, conflict):
    """Each designed group must be one live storage (storage_id), overlapping bytes, with(out) a stride conflict."""
    by_key = {pt.key(r): r for r in manifest["records"]}
    for group in groups:
        records = [by_key[k] for k in group]
        check(None not in {r["storage_id"] for r in records}, "%s have no storage_id" % group)
        check(len({r["storage_id"] for r in records}) == 1, "%s do not share a storage" % group)
        (lo1, hi1), (lo2, hi2) = pt.byte_range(records[0]), pt.byte_range(records[1])
        check(lo1 < hi2 and lo2 < hi1, "%s byte ranges do not overlap" % group)
        check(pt.stride_conflict(records) == conflict, "%s stride conflict is not %s" % (group, conflict))


def logits_group(manifest):
    """The model's logits tensor is captured twice, as logits#1 (inside) and runner.logits#1 (the
    returned value): one tensor under two names, a genuine alias without conflict."""
    present = {pt.key(r) for r in manifest["records"]}
    group = ["logits#1", "runner.logits#1"]
    return [group] if all(g in present for g in group) else []


def alias_fields(m, conflicts, clean):
    """alias_conflicts / aliases_without_conflict of both sides by the storage_id rule
    (pair_tools.alias_groups), checked to be exactly the designed groups: no other alias, and
    none made by allocator address reuse."""
    out = {"alias_conflicts": {}, "aliases_without_conflict": {}}
    for s in "ab":
        found_conflicts, found_clean = pt.alias_answer(m[s])
        check(found_conflicts == conflicts[s], "side %s stride-conflict groups %s, designed %s" % (
            s, found_conflicts, conflicts[s]))
        check(found_clean == clean[s], "side %s alias groups without conflict %s, designed %s" % (
            s, found_clean, clean[s]))
        verify_designed_groups(m[s], conflicts[s], conflict=True)
        verify_designed_groups(m[s], clean[s], conflict=False)
        out["alias_conflicts"][s] = found_conflicts
        out["aliases_without_conflict"][s] = found_clean
    return out


ALIAS_TEXT = (
    "alias_conflicts / aliases_without_conflict are every alias group of the records by the storage_id rule "
    "(alias_rule); they are exactly the designed KV-cache write/read views plus logits#1 = runner.logits#1 (one "
    "tensor captured under two names). storage_ptr alone would also group unrelated stages: the allocator hands a "
    "freed tensor's address to a later stage of the same window, and only storage_id tells those buffers apart.")


def notes(text, **figures):
    """expected.json's notes: a JSON object (as a string) with a text and machine-readable figures."""
    return json.dumps(dict(text=text, **figures))


LAYERS = 6


def answer_fp16(spec, m, sides):
    fa, fb = pt.first_nonfinite(m["a"]), pt.first_nonfinite(m["b"])
    stage = "layers.%d.mlp_up#1" % OUTLIER_LAYER
    check(fa is None, "side a has a non-finite record %s" % fa)
    check(fb == stage, "first non-finite in b is %s, not %s" % (fb, stage))
    rec_a = next(r for r in m["a"]["records"] if pt.key(r) == stage)
    rec_b = next(r for r in m["b"]["records"] if pt.key(r) == stage)
    check(rec_a["stats"]["max_abs"] > 65504, "float32 %s max_abs %s is not beyond float16" % (stage, rec_a["stats"]["max_abs"]))
    div, kind, exceeding = pt.dumpview_first_divergence(m["a"], m["b"])
    check((div, kind) == (stage, "non_finite"), "first divergence is %s (%s), not %s (non_finite)" % (div, kind, stage))
    reasons = pt.divergence_reasons(m["a"], m["b"], div)
    pairs = pt.dumpview_pairs(m["a"], m["b"])
    earlier = [(k, pt.dumpview_compare_records(ra, rb)[0]) for k, ra, rb in pairs[:[k for k, _, _ in pairs].index(div)]]
    check(all(v in pt.VERDICTS_NOT_DIVERGING for _, v in earlier), "a pair before %s diverges" % div)
    inconclusive = [k for k, v in earlier if v == "checksum_inconclusive"]
    nonfinite_b = sum(1 for r in m["b"]["records"] if r["stats"]["nan_count"] or r["stats"]["inf_count"])
    aliases = alias_fields(m, {s: [] for s in "ab"}, {s: cache_groups(m[s], LAYERS) + logits_group(m[s]) for s in "ab"})
    n = {s: len(m[s]["records"]) for s in "ab"}
    expected = dict(
        first_nonfinite={"a": fa, "b": fb},
        first_divergence=div,
        divergence_rule=pt.DUMPVIEW_RULE,
        **aliases,
        agree=False,
        missing_data=False,
        record_counts=n,
        notes=notes(
            "%s. float32 max_abs of %s is %.6g (> 65504, the float16 maximum); in b it has inf_count %d. "
            "%d of b's %d records are non-finite (everything downstream). " % (
                OUTLIER_TAG, stage, rec_a["stats"]["max_abs"], rec_b["stats"]["inf_count"], nonfinite_b, n["b"])
            + ALIAS_TEXT,
            outlier_weight=OUTLIER_TAG,
            float32_max_abs=rec_a["stats"]["max_abs"],
            float16_inf_count=rec_b["stats"]["inf_count"],
            nonfinite_records_b=nonfinite_b,
            first_divergence_reasons=reasons,
            checksum_inconclusive_before=inconclusive,
            alias_rule=pt.ALIAS_RULE,
        ),
    )
    inconclusive_text = "" if not inconclusive else (
        "\n  %d of them (%s) are\n  `checksum_inconclusive`: float16 rounding moves their position checksum a little beyond\n"
        "  1e-3, within the bound the moved magnitudes allow, which is above what one moved row of\n"
        "  these 12- or 48-row tensors shifts. That is the whole-tensor rule; with the token rows\n"
        "  these dumps carry, dumpview diff decides such a pair by its rows (docs/diff.md), and\n"
        "  here every row agrees (`rows_agree`): they agree." % (
            len(inconclusive), ", ".join("`%s`" % k for k in inconclusive)))

    def readme(e):
        return """# llama_fp16_overflow

Tiny seeded Llama decoder (examples/tiny_llama.py, 6 layers, hidden 256), prompt of 12 fixed
token ids, the prefill (call 1 of label `req-llama_fp16_overflow`) captured on both sides.

- side a: float32
- side b: float16, same weights

Both sides share one deliberate weight change: {tag}. The weight itself stays finite in
float16 (16384 < 65504); it models the few "massive activation" channels real LLMs develop.
Its dot products with the RMS-normalised hidden state reach {amax:.4g} in float32, beyond
float16's largest finite value 65504, so in float16 the `{stage}` matmul output holds
{infs} inf elements.

What a user should find:
- first non-finite record in capture order: **b: `{fb}`**, a: none. Everything after it in b
  ({nonfinite} of {nb} records) is non-finite too; the earlier stages, including
  `layers.{layer}.mlp_gate` (same input, unscaled weights) are finite.
- first divergence (dumpview diff's rule, `divergence_rule` in expected.json):
  **`{div}`**, verdict `{kind}` (inf_count 0 vs {infs}; {exceeding}
  also exceed the default tolerances). No earlier pair diverges: float32 vs float16 is a
  precision change, compared by value.{inconclusive}
- record counts: a {na}, b {nb}; no missing data.
""".format(tag=OUTLIER_TAG, amax=rec_a["stats"]["max_abs"], stage=stage, infs=rec_b["stats"]["inf_count"],
           fb=fb, nonfinite=nonfinite_b, nb=n["b"], na=n["a"], layer=OUTLIER_LAYER, div=e["first_divergence"],
           kind=kind, exceeding=", ".join("`%s`" % x for x in exceeding), inconclusive=inconclusive_text)

    return expected, readme


def answer_kv(spec, m, sides):
    designed = {s: cache_groups(m[s], LAYERS) for s in "ab"}
    conflicts_b = [g for g in designed["b"] if ".k_cache_write#" in g[0]]
    clean_b = [g for g in designed["b"] if g not in conflicts_b]
    check(len(conflicts_b) == LAYERS and len(clean_b) == LAYERS, "b groups %s" % designed["b"])
    aliases = alias_fields(m, {"a": [], "b": conflicts_b},
                           {"a": designed["a"] + logits_group(m["a"]), "b": clean_b + logits_group(m["b"])})
    div, kind, exceeding = pt.dumpview_first_divergence(m["a"], m["b"])
    check((div, kind) == ("layers.0.k_cache_read#1", "magnitude"), "first divergence is %s (%s)" % (div, kind))
    reasons = pt.divergence_reasons(m["a"], m["b"], div)
    by_b = {pt.key(r): r for r in m["b"]["records"]}
    by_a = {pt.key(r): r for r in m["a"]["records"]}
    w_a, w_b, r_b = by_a["layers.0.k_cache_write#1"], by_b["layers.0.k_cache_write#1"], by_b["layers.0.k_cache_read#1"]
    # Layer 0 writes the same keys on both sides (later layers already see the divergence).
    same = [s for s in ("nan_count", "inf_count") + pt.VALUE_STATS if w_a["stats"][s] != w_b["stats"][s]]
    check(not same, "layers.0.k_cache_write#1 statistics differ between a and b: %s" % same)
    check(pt.dumpview_compare_records(w_a, w_b)[0] == "agree", "layers.0.k_cache_write#1 does not agree")
    n = {s: len(m[s]["records"]) for s in "ab"}
    fa, fb = pt.first_nonfinite(m["a"]), pt.first_nonfinite(m["b"])
    check(fa is None and fb is None, "non-finite records %s %s" % (fa, fb))
    expected = dict(
        first_nonfinite={"a": fa, "b": fb},
        first_divergence=div,
        divergence_rule=pt.DUMPVIEW_RULE,
        **aliases,
        agree=False,
        missing_data=False,
        record_counts=n,
        notes=notes(
            "K cache per layer: NHD [32 tokens, 2 kv heads, 64], stride [128, 64, 1]. b's writer views it as HND: "
            "layers.0.k_cache_write#1 stride %s storage_offset %d vs the reader's k_cache_read stride %s, same "
            "storage (same storage_id and storage_ptr); a's writer uses stride %s. Layer 0 writes identical keys on both sides (same statistics, "
            "pos_checksum included): the first divergence is the read that follows. The V cache is written "
            "correctly on both sides (the legitimate write/read alias). "
            % (w_b["stride"], w_b["storage_offset"], r_b["stride"], w_a["stride"]) + ALIAS_TEXT,
            k_cache_write_stride={"a": w_a["stride"], "b": w_b["stride"]},
            k_cache_read_stride={"a": by_a["layers.0.k_cache_read#1"]["stride"], "b": r_b["stride"]},
            first_divergence_reasons=reasons,
            alias_rule=pt.ALIAS_RULE,
        ),
    )

    def readme(e):
        return """# llama_kv_alias

Tiny seeded Llama decoder (examples/tiny_llama.py), prompt of 12 fixed token ids, float32, the
prefill (call 1) captured on both sides. Each layer owns a static K and V cache buffer laid out
NHD: [32 tokens, 2 kv heads, 64 head_dim], strides [128, 64, 1].

- side a: correct cache writes.
- side b: the K-cache writer is faulty: it reinterprets the same bytes as HND
  [2 kv heads, 32 tokens, 64] (`cache.view(2, 32, 64)[:, start:end].transpose(0, 1)`), while the
  reader (attention) keeps reading NHD. Keys land in the wrong slots; attention reads a
  scrambled, partly zero key set.

Both the writer's view (`layers.{{i}}.k_cache_write`) and the reader's view
(`layers.{{i}}.k_cache_read`) are captured, so the probe records one storage (same `storage_id`
and `storage_ptr`, overlapping bytes) with two different strides: in b the writer has stride {wb} (storage_offset {ob}) and the reader
{rb}. The V cache is written correctly on both sides: `layers.{{i}}.v_cache_write` (the slice for the
current positions) and `layers.{{i}}.v_cache_read` (the view of positions 0..end-1 that attention reads) alias without conflict.

What a user should find:
- stride-conflict alias groups: a none; b one per layer, e.g. `{g0}`.
- aliases without conflict: a 13 (K and V of each layer, and `logits#1` = `runner.logits#1`,
  one tensor captured under two names), b 7 (V of each layer, and the logits).
- first divergence (dumpview diff's rule, `divergence_rule` in expected.json):
  **`{div}`**, verdict `{kind}` ({exceeding} exceed the
  default tolerances). The write before it, `layers.0.k_cache_write#1`, agrees in every
  statistic, `pos_checksum` included: the values written are right, their places are wrong.
  Only the physical layout shows why, which is why aliases come before magnitudes.
- no non-finite records; {na} records per side.

Alias groups are formed by `storage_id` and overlapping byte ranges (rule in `notes.alias_rule`),
never by `storage_ptr` alone: within one window the allocator hands a freed tensor's address to
later, unrelated stages, which then share a `storage_ptr` but not a `storage_id`.
""".format(wb=w_b["stride"], ob=w_b["storage_offset"], rb=r_b["stride"], g0=" + ".join(conflicts_b[0]), div=div, na=n["a"],
           kind=kind, exceeding=", ".join("`%s`" % x for x in exceeding))

    return expected, readme


def answer_chunked(spec, m, sides):
    check(sides["a"]["ids"] == sides["b"]["ids"], "generated ids differ: %s vs %s" % (sides["a"]["ids"], sides["b"]["ids"]))
    check(m["a"]["metadata"]["token_ids"] == m["b"]["metadata"]["token_ids"], "token ids of the windows differ")
    check(m["a"]["metadata"]["phase"] == m["b"]["metadata"]["phase"] == "decode", "not decode windows")
    pairs, only_a, only_b = pt.paired(m["a"], m["b"])
    check(not only_a and not only_b, "unpaired %s %s" % (only_a, only_b))
    div, kind, exceeding = pt.dumpview_first_divergence(m["a"], m["b"])
    check(div is None, "chunked decode step diverges at %s: %s %s" % (div, kind, exceeding))
    best = pt.largest_rel(m["a"], m["b"])
    max_abs_diff = max(abs(ra["stats"][s] - rb["stats"][s]) for _, ra, rb in pairs for s in pt.VALUE_STATS)
    aliases = alias_fields(m, {s: [] for s in "ab"}, {s: cache_groups(m[s], LAYERS) + logits_group(m[s]) for s in "ab"})
    n = {s: len(m[s]["records"]) for s in "ab"}
    expected = dict(
        first_nonfinite={"a": pt.first_nonfinite(m["a"]), "b": pt.first_nonfinite(m["b"])},
        first_divergence=None,
        divergence_rule=pt.DUMPVIEW_RULE,
        **aliases,
        agree=True,
        missing_data=False,
        record_counts=n,
        notes=notes(
            "largest relative difference |a-b|/max(|a|,|b|) over all paired statistics (max_abs, min, max, mean, "
            "l2, pos_checksum): %.3e at %s %s (a %.9g, b %.9g); largest absolute difference %.3e. "
            % (best[0], best[1], best[2], best[3], best[4], max_abs_diff) + ALIAS_TEXT,
            largest_relative_difference={"value": best[0], "stage": best[1], "stat": best[2],
                                         "a": best[3], "b": best[4]},
            largest_absolute_difference=max_abs_diff,
            generated_ids=sides["a"]["ids"],
            alias_rule=pt.ALIAS_RULE,
        ),
    )

    def readme(e):
        return """# llama_chunked_prefill

Tiny seeded Llama decoder (examples/tiny_llama.py), float32, prompt of 12 fixed token ids,
label `req-llama_chunked_prefill`, then greedy decode.

- side a: the prompt prefilled in one call (call 1), decode from call 2.
- side b: the prompt prefilled in 3 chunks of {chunks} tokens (calls 1, 2, 3), decode from call 4.

The capture selects the **first decode step** on both sides: side a `DUMP_PROBE_OCCURRENCE=2`,
side b `DUMP_PROBE_OCCURRENCE=4`. Calls are counted per label, so on b
`DUMP_PROBE_OCCURRENCE=2` would select the 2nd prefill chunk (4 tokens at positions 5..8):
different shapes, nothing to compare with a's decode step. Both windows carry the same
`token_ids` metadata (prompt + first generated token).

What a user should find: the two decode steps **agree** ({n} records each, all paired, no
non-finite): no first divergence under dumpview diff's rule (`divergence_rule` in
expected.json). Largest relative difference |a-b| / max(|a|,|b|) of any statistic: {rel:.3e} at
`{stage}` ({stat}), far inside the default tolerances.
""".format(chunks=" + ".join(map(str, CHUNKS)), n=n["a"], rel=best[0], stage=best[1], stat=best[2])

    return expected, readme


def answer_graph(spec, m, sides):
    n = {s: len(m[s]["records"]) for s in "ab"}
    modes_b = {}
    for r in m["b"]["records"]:
        modes_b[r["mode"]] = modes_b.get(r["mode"], 0) + 1
    check(n["a"] == 2 + 3 + 19 * LAYERS, "a has %d records" % n["a"])
    check(modes_b == {"eager": 2, "graph": LAYERS}, "b modes %s" % modes_b)
    pairs, only_a, only_b = pt.paired(m["a"], m["b"])
    check(not only_b and len(pairs) == 2 + LAYERS, "paired %d, only b %s" % (len(pairs), only_b))
    div, kind, exceeding = pt.dumpview_first_divergence(m["a"], m["b"])
    check(div is None, "graph pair diverges at %s: %s %s" % (div, kind, exceeding))
    # b holds no cache views and no logits stage: its graph records are distinct buffers, even where the
    # allocator reused an address between layers.
    aliases = alias_fields(m, {s: [] for s in "ab"}, {s: cache_groups(m[s], LAYERS) + logits_group(m[s]) for s in "ab"})
    expected = dict(
        first_nonfinite={"a": pt.first_nonfinite(m["a"]), "b": pt.first_nonfinite(m["b"])},
        first_divergence=None,
        divergence_rule=pt.DUMPVIEW_RULE,
        **aliases,
        agree=False,
        missing_data=True,
        record_counts=n,
        notes=notes(
            "b records: runner.input_ids#1 and runner.logits#1 (mode eager, outside the graph region) and "
            "layers.0..5.residual_mlp#1 (mode graph, from graph_slot + capture_graph). %d pairs agree under "
            "dumpview diff's rule (no first divergence); %d stages of a (%.0f%% of its records) have no counterpart in b: that is missing evidence, "
            "not agreement. Graph mode is emulated on CPU (no graph capture): the forward's capture() calls "
            "simply do not run. " % (len(pairs), len(only_a), 100.0 * len(only_a) / n["a"]) + ALIAS_TEXT,
            paired=len(pairs),
            unpaired_a=len(only_a),
            unpaired_b=len(only_b),
            graph_records_b=modes_b["graph"],
            alias_rule=pt.ALIAS_RULE,
        ),
    )

    def readme(e):
        return """# llama_eager_vs_graph

Tiny seeded Llama decoder (examples/tiny_llama.py), float32, prompt of 12 fixed token ids, eager
prefill, then decode; the **first decode step** (call 2, `DUMP_PROBE_OCCURRENCE=2`) is captured.

- side a: the decode step runs eagerly: every capture() point of the forward records.
- side b: the decode step runs as a graph replay. **This is an emulation**: CPU torch has no
  graph capture, so the script reproduces what a replay looks like to the probe: the Python
  capture() calls inside the graph region do not run, while `dump_probe.graph_slot()` slots
  (allocated for `layers.{{0..5}}.residual_mlp` before the request, as at graph-capture time)
  are filled by `capture_graph()` during the forward, and finish() writes them as records of
  mode "graph". `runner.input_ids` and `runner.logits` are captured with capture() outside the
  graph region.

What a user should find:
- record counts: a **{na}**, b **{nb}** ({graph} of mode "graph").
- the {paired} paired stages agree (no first divergence under dumpview diff's rule,
  `divergence_rule` in expected.json), but {missing} stages of a have no counterpart in b: the drop is
  **missing data, not agreement** (`agree: false`, `missing_data: true`). A diff must list
  them as unpaired, never count them as equal.
""".format(na=n["a"], nb=n["b"], graph=modes_b["graph"], paired=len(pairs), missing=len(only_a))

    return expected, readme


ANSWERS = {
    "llama_fp16_overflow": answer_fp16,
    "llama_kv_alias": answer_kv,
    "llama_chunked_prefill": answer_chunked,
    "llama_eager_vs_graph": answer_graph,
}


def self_check():
    """The re-implementation must reproduce HF LlamaForCausalLM's prefill logits."""
    import tiny_llama as tl

    tl.deterministic()
    diff, scale = tl.check_against_hf()
    if diff > 1e-5:
        raise SystemExit("TinyLlama logits differ from HF LlamaForCausalLM by %g" % diff)
    print("self-check: max |logits - HF logits| = %.3g (logits max_abs %.3g)" % (diff, scale))


def record_runs(names):
    """``--record-run``: the committed dumps predate the manifest's ``run``; add to each side
    the command that captures it again (the same settings as run_pair's), running no model."""
    for pair in names:
        spec = PAIRS[pair]
        for side, opts in spec["sides"].items():
            side_dir = os.path.join("assets", "examples", pair, side)
            env = pt.probe_env(side_dir, occurrence=opts["occurrence"], tensor=spec["tensor"],
                               rows=spec["rows"])
            path = pt.find_manifest(os.path.join(pt.ROOT, side_dir), opts["occurrence"])
            added = pt.record_run(path, "examples/llama_decoder.py", ["--side", pair, side], env)
            print("%s %s: %s" % (pair, side, "run recorded" if added else "already has a run"))


def main(argv):
    if len(argv) == 3 and argv[0] == "--side":
        run_one_side(argv[1], argv[2])
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    rerun = "--answers" not in argv
    if "--record-run" in argv:
        record_runs([a for a in argv if a != "--record-run"] or list(PAIRS))
        return
    names = [a for a in argv if a != "--answers"] or list(PAIRS)
    unknown = [n for n in names if n not in PAIRS]
    if unknown:
        raise SystemExit("unknown pair(s) %s; choose from %s" % (unknown, list(PAIRS)))
    started = time.time()
    if rerun:
        self_check()
    for name in names:
        t0 = time.time()
        expected, sides = run_pair(name, rerun)
        print("%s: first_nonfinite %s, first_divergence %s, agree %s, missing_data %s, records %s (%.1fs)" % (
            name, expected["first_nonfinite"], expected["first_divergence"], expected["agree"],
            expected["missing_data"], expected["record_counts"], time.time() - t0))
    print("done in %.1fs" % (time.time() - started))


if __name__ == "__main__":
    main(sys.argv[1:])
