"""Example pairs with token rows: the same tokens split differently between two runs.

    .venv/bin/python examples/token_rows.py                  # every pair (about a minute)
    .venv/bin/python examples/token_rows.py tokens_bug_in_one_chunk   # one pair

Writes assets/token_examples/<pair>/{a,b}/rank0/match<M>-occ<N>/ (probe output, every
forward of the run: DUMP_PROBE_OCCURRENCE=all or DUMP_PROBE_REQUEST), expected.json (the
designed answer) and README.md. Every side runs in its own subprocess with its own
DUMP_PROBE_* environment; a pair's old directory is deleted first (the probe never
overwrites).

The model is examples/tiny_llama.py's seeded decoder, served here by ``serve``: one forward
over a condensed batch of requests (their rows one after another, then padding rows), the
per-token stages on all rows at once and attention per request over its own KV cache, the
row map given to arm(rows=...). A request alone is a batch of one. Faults, each a real
class of serving bug, make the pairs that must diverge:

    rope_from_zero   the chunk starting at a given position computes RoPE from position 0
    swap_rows        one forward writes layers.1.mlp_down's rows i and j in each other's place

``figures`` in expected.json holds, per dtype, the largest row difference of the pair in
units of the dtype's unit roundoff times the statistic's scale (docs/diff.md, "Token rows",
derives the row tolerance's floor from them).
"""

import json
import math
import os
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pair_tools as pt  # noqa: E402

OUT_ROOT = os.path.join(pt.ASSETS, "token_examples")
PROMPT = [1, 307, 52, 918, 14, 611, 233, 75, 480, 999, 5, 128]
OTHER = [17, 402, 88, 3, 760, 41, 902, 6]  # another request, batched in front of PROMPT
LONG = PROMPT + [64, 12, 700, 33, 250, 9, 811, 97, 420, 31, 2, 600]  # 24 ids: the prefix-cache pair
NEW_TOKENS = 2


def side(dtype="float32", plan=None, select=None, faults=None, legacy=False):
    """One side's run; ``legacy``: as a probe from before token rows wrote it (arm() with
    metadata positions=[start, end] and the chunk's token_ids, no rows=, no row statistics,
    no ``token_rows`` in the manifest)."""
    select = dict(select or {"DUMP_PROBE_OCCURRENCE": "all"})
    if legacy:
        select["DUMP_PROBE_ROW_STATS"] = "off"
    return dict(dtype=dtype, plan=plan, select=select, faults=faults or {}, legacy=legacy)


def alone(prompt, chunks=None, name="req-0"):
    """A plan: ``prompt`` served alone, prefilled whole or in ``chunks``, then NEW_TOKENS decode steps."""
    return {"kind": "alone", "prompt": prompt, "chunks": chunks, "name": name}


PAIRS = {
    "tokens_chunked_vs_whole": dict(
        description="The prompt prefilled whole (a) vs in chunks [5, 4, 3] (b), float32, with two decode steps "
                    "each; every forward captured.",
        a=side(plan=alone(PROMPT)), b=side(plan=alone(PROMPT, [5, 4, 3])),
        answer=dict(exit=0, first_bad_token=None, requests=1),
    ),
    "tokens_chunked_vs_whole_bf16": dict(
        description="As tokens_chunked_vs_whole, in bfloat16: rounding differs between the chunkings, the rows agree.",
        a=side("bfloat16", alone(PROMPT)), b=side("bfloat16", alone(PROMPT, [5, 4, 3])),
        answer=dict(exit=0, first_bad_token=None, requests=1),
    ),
    "tokens_chunked_vs_whole_fp16": dict(
        description="As tokens_chunked_vs_whole, in float16.",
        a=side("float16", alone(PROMPT)), b=side("float16", alone(PROMPT, [5, 4, 3])),
        answer=dict(exit=0, first_bad_token=None, requests=1),
    ),
    "tokens_chunk_budgets": dict(
        description="Two chunk budgets of one correct run: [4, 8] (a) vs [6, 6] (b), float32.",
        a=side(plan=alone(PROMPT, [4, 8])), b=side(plan=alone(PROMPT, [6, 6])),
        answer=dict(exit=0, first_bad_token=None, requests=1),
    ),
    "tokens_bug_in_one_chunk": dict(
        description="Whole prefill (a) vs chunks [5, 4, 3] (b) whose second chunk computes RoPE from position 0 "
                    "instead of 5, float32.",
        a=side(plan=alone(PROMPT)), b=side(plan=alone(PROMPT, [5, 4, 3]), faults={"rope_from_zero": 5}),
        answer=dict(exit=1, requests=1, first_bad_token=dict(
            request="req-0", position=5, token_id=PROMPT[5], key="layers.0.q_rope#1", kind="row_changed")),
    ),
    "tokens_batched_vs_alone": dict(
        description="The request alone (a, named req-0) vs batched behind another request with 4 padding rows "
                    "(b, named seq-17; the other is seq-16), float32. Requests match by token ids, not names.",
        a=side(plan=alone(PROMPT)),
        b=side(plan={"kind": "batched", "name": "seq-17", "other": "seq-16", "padding": 4},
               select={"DUMP_PROBE_REQUEST": "seq-17", "DUMP_PROBE_OCCURRENCE": "all"}),
        answer=dict(exit=0, first_bad_token=None, requests=1, unmatched_b=["seq-16"]),
    ),
    "tokens_batched_vs_alone_bf16": dict(
        description="As tokens_batched_vs_alone, in bfloat16.",
        a=side("bfloat16", alone(PROMPT)),
        b=side("bfloat16", {"kind": "batched", "name": "seq-17", "other": "seq-16", "padding": 4},
               select={"DUMP_PROBE_REQUEST": "seq-17", "DUMP_PROBE_OCCURRENCE": "all"}),
        answer=dict(exit=0, first_bad_token=None, requests=1, unmatched_b=["seq-16"]),
    ),
    "tokens_prefix_cache": dict(
        description="A 24-token prompt prefilled whole (a) vs served after a prefix-cache hit on its first 20 "
                    "tokens (b: another request filled the cache; only positions 20..23 are computed), float32.",
        a=side(plan=alone(LONG)),
        b=side(plan={"kind": "prefix_hit", "name": "req-0", "cached": 20},
               select={"DUMP_PROBE_REQUEST": "req-0", "DUMP_PROBE_OCCURRENCE": "all"}),
        answer=dict(exit=0, first_bad_token=None, requests=1),
    ),
    "tokens_without_row_stats": dict(
        description="The prompt prefilled whole with token rows (a) vs in chunks [5, 4, 3] by a probe from before "
                    "token rows (b: metadata positions=[start, end] and token_ids, no row map, no row statistics), "
                    "float32: each of B's records is compared whole with A's rows summed over its positions.",
        a=side(plan=alone(PROMPT)), b=side(plan=alone(PROMPT, [5, 4, 3]), legacy=True),
        answer=dict(exit=0, first_bad_token=None, requests=1, summed=dict(first=None)),
    ),
    "tokens_without_row_stats_bug": dict(
        description="As tokens_without_row_stats, but B's second chunk computes RoPE from position 0 instead of 5.",
        a=side(plan=alone(PROMPT)), b=side(plan=alone(PROMPT, [5, 4, 3]), faults={"rope_from_zero": 5}, legacy=True),
        answer=dict(exit=1, first_bad_token=None, requests=1, summed=dict(first=dict(
            request="req-0", positions=[5, 8], token_id=PROMPT[5], key="layers.0.q_rope#1"))),
    ),
    "tokens_dp_rank": dict(
        description="The request alone on one process (a, named req-0) vs served by data-parallel rank 1 of 2 "
                    "(b, real gloo ranks, named seq-17; dp rank 0 serves another request, seq-16), float32: the "
                    "request is matched wherever it ran, not rank by rank.",
        a=side(plan=alone(PROMPT)),
        b=side(plan={"kind": "dp", "requests": [("seq-16", OTHER), ("seq-17", PROMPT)]},
               select={"DUMP_PROBE_OCCURRENCE": "all", "DUMP_PROBE_RANKS": "all"}),
        answer=dict(exit=0, first_bad_token=None, requests=1, unmatched_b=["seq-16"]),
    ),
    "tokens_rows_permuted": dict(
        description="The same whole prefill (a) vs one whose layers.1.mlp_down writes rows 2 and 3 in each "
                    "other's place (b), float32: the same values at other positions.",
        a=side(plan=alone(PROMPT)), b=side(plan=alone(PROMPT), faults={"swap_rows": [2, 3]}),
        answer=dict(exit=1, requests=1, first_bad_token=dict(
            request="req-0", position=2, token_id=PROMPT[2], key="layers.1.mlp_down#1", kind="rows_permuted")),
    ),
}

# Pairs across parallel layouts: the layouts fixture's block (tests/fixtures/layouts/
# make_layouts_fixture.py: 6 tokens, float64, real gloo process groups) captured with token
# rows, one side merged over its group. (pair: (scenario a, scenario b, description, answer))
LAYOUT_PAIRS = {
    "tokens_tp2_vs_tp1": (
        "tp1", "tp2",
        "The layouts block at tp=1 (a) vs tp=2 (b, real gloo ranks): column slices (`tp:1`, their rows added "
        "up), a partial sum (`partial:tp`, its sum and checksum added), replicated stages. Correct.",
        dict(exit=0, first_bad_token=None, requests=1)),
    "tokens_tp2_wrong_shard": (
        "tp1", "tp2_wrong_shard",
        "As tokens_tp2_vs_tp1, but tp rank 1 loads rank 0's slice of the up projection: every row of "
        "layers.0.up differs once the slices are merged.",
        dict(exit=1, requests=1, first_bad_token=dict(
            request="req-layouts", position=0, token_id=3, key="layers.0.up#1", kind="row_changed"))),
    "tokens_cp2_vs_cp1": (
        "cp1", "cp2_zigzag",
        "The per-token part of the block on 8 tokens, whole (a) vs zigzag context parallel over 2 ranks (b: "
        "rank r holds chunks r and 3 - r of 4): each rank's rows listed with their positions, concatenated. "
        "Correct.",
        dict(exit=0, first_bad_token=None, requests=1)),
}
LAYOUTS_GENERATOR = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "layouts", "make_layouts_fixture.py")


# ----------------------------------------------------------------------------- one side


def serve(model, probe, batch, faults, metadata, legacy=False):
    """One forward over ``batch``: a list of (request, ids, start, cache) and ("pad", n, None, None);
    returns the last row's logits of each request. Captures every stage; arm()/finish() around it."""
    import torch
    import tiny_llama as tl

    rows, ids_all = [], []
    for request, ids, start, _cache in batch:
        if request == "pad":
            rows.append((None, 0, ids))
            ids_all.extend([0] * ids)
        else:
            rows.append((request, start, len(ids), list(ids)))
            ids_all.extend(ids)
    if legacy:  # one request, as the examples armed before token rows
        request, ids, start, _cache = batch[0]
        probe.arm(request, positions=[start, start + len(ids)], token_ids=list(ids), **metadata)
    else:
        probe.arm(batch[0][0], rows=rows, **metadata)
    cap = probe.capture
    ids_t = torch.tensor(ids_all, dtype=torch.long)
    cap("runner.input_ids", ids_t)
    h = model.embed[ids_t]
    cap("embed", h)
    spans, at = [], 0
    for request, ids, start, cache in batch:
        n = ids if request == "pad" else len(ids)
        spans.append((request, at, n, start, cache))
        at += n
    for i, lw in enumerate(model.layers):
        name = "layers.%d." % i
        x = tl.rms_norm(h, lw["input_norm"], model.eps)
        cap(name + "input_norm", x)
        T = x.shape[0]
        q = (x @ lw["q"].T).view(T, model.heads, model.head_dim)
        k = (x @ lw["k"].T).view(T, model.kv_heads, model.head_dim)
        v = (x @ lw["v"].T).view(T, model.kv_heads, model.head_dim)
        cap(name + "q", q)
        cap(name + "k", k)
        cap(name + "v", v)
        positions = torch.zeros(T, dtype=torch.long)
        for request, at, n, start, _cache in spans:
            if request != "pad":
                first = 0 if faults.get("rope_from_zero") == start and start else start
                positions[at:at + n] = torch.arange(first, first + n)
        cos, sin = model._rope_tables(positions)
        q = tl.apply_rope(q, cos, sin)
        k = tl.apply_rope(k, cos, sin)
        cap(name + "q_rope", q)
        cap(name + "k_rope", k)
        out = torch.zeros(T, model.heads * model.head_dim, dtype=h.dtype)
        group = model.heads // model.kv_heads
        for request, at, n, start, cache in spans:
            if request == "pad":
                continue
            end = start + n
            cache.k[i][start:end] = k[at:at + n]
            cache.v[i][start:end] = v[at:at + n]
            keys, values = cache.k[i][:end], cache.v[i][:end]
            # The cache holds key positions 0..end-1 of this request: declared, not the forward's rows.
            cap(name + "k_cache_read", keys, positions=[(request, p) for p in range(end)])
            cap(name + "v_cache_read", values, positions=[(request, p) for p in range(end)])
            qs = q[at:at + n]
            kh = keys.transpose(0, 1).repeat_interleave(group, dim=0)
            vh = values.transpose(0, 1).repeat_interleave(group, dim=0)
            scores = (qs.transpose(0, 1) @ kh.transpose(1, 2)) * model.scaling
            qpos = torch.arange(start, end)
            mask = torch.zeros(n, end, dtype=torch.float32)
            mask.masked_fill_(torch.arange(end)[None, :] > qpos[:, None], float("-inf"))
            probs = torch.softmax(scores + mask.to(scores.dtype), dim=-1, dtype=torch.float32).to(h.dtype)
            out[at:at + n] = (probs @ vh).transpose(0, 1).reshape(n, -1)
        cap(name + "attn", out)
        o = out @ lw["o"].T
        cap(name + "o_proj", o)
        h = h + o
        cap(name + "residual_attn", h)
        x = tl.rms_norm(h, lw["post_norm"], model.eps)
        cap(name + "post_norm", x)
        gate = x @ lw["gate"].T
        cap(name + "mlp_gate", gate)
        up = x @ lw["up"].T
        cap(name + "mlp_up", up)
        act = torch.nn.functional.silu(gate) * up
        cap(name + "mlp_act", act)
        down = act @ lw["down"].T
        swap = faults.get("swap_rows")
        if swap and i == 1 and down.shape[0] > max(swap):
            down = down.clone()
            down[[swap[0], swap[1]]] = down[[swap[1], swap[0]]]
        cap(name + "mlp_down", down)
        h = h + down
        cap(name + "residual_mlp", h)
    x = tl.rms_norm(h, model.final_norm, model.eps)
    cap("final_norm", x)
    logits = x @ model.lm_head.T
    cap("logits", logits)
    probe.finish()
    return {request: logits[at + n - 1] for request, at, n, _s, _c in spans if request != "pad"}


class Cache:
    def __init__(self, model):
        import torch

        shape = (model.max_tokens, model.kv_heads, model.head_dim)
        self.k = [torch.zeros(shape, dtype=model.dtype) for _ in model.layers]
        self.v = [torch.zeros(shape, dtype=model.dtype) for _ in model.layers]


def _dp_worker(rank, size, pair, side_name, init_file, out):
    """One data-parallel rank of a "dp" plan: its own request alone (prefill, decode steps)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=size)
    try:
        name, prompt = PAIRS[pair][side_name]["plan"]["requests"][rank]
        ids = run_one_side(pair, side_name, {"kind": "alone", "prompt": prompt, "chunks": None, "name": name},
                           parallel={"dp": (rank, size)}, emit=False)
        with open(out + str(rank), "w") as handle:
            json.dump(ids, handle)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_dp_side(pair, side_name):
    """A "dp" plan: one gloo process per data-parallel rank, each serving its request."""
    import tempfile

    import torch.multiprocessing as mp

    requests = PAIRS[pair][side_name]["plan"]["requests"]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ids")
        mp.spawn(_dp_worker, args=(len(requests), pair, side_name, os.path.join(tmp, "init"), out),
                 nprocs=len(requests), join=True)
        with open(out + str(len(requests) - 1)) as handle:
            ids = json.load(handle)
    print(json.dumps({"pair": pair, "side": side_name, "ids": ids, "forwards": []}))


def run_one_side(pair, side_name, plan=None, parallel=None, emit=True):
    import torch

    sys.path.insert(0, pt.ASSETS)
    import dump_probe as dp  # reads DUMP_PROBE_* now, at import
    import tiny_llama as tl

    opts = PAIRS[pair][side_name]
    tl.deterministic()
    hf = tl.build_hf_model()
    model = tl.TinyLlama(hf, dtype=getattr(torch, opts["dtype"]))
    plan, faults, legacy = plan or opts["plan"], opts["faults"], opts["legacy"]
    meta = dict(weights=tl.weights_tag(), dtype=opts["dtype"], sampling={"temperature": 0.0, "greedy": True})
    if parallel is not None:
        meta["parallel"] = parallel
    forwards = []
    with torch.no_grad():
        if plan["kind"] in ("alone", "prefix_hit"):
            prompt = LONG if plan["kind"] == "prefix_hit" else plan["prompt"]
            name = plan["name"]
            cache = Cache(model)
            ids = list(prompt)
            if plan["kind"] == "prefix_hit":
                cached = plan["cached"]
                # Another request with the same first tokens filled the cache; this one starts after it.
                serve(model, dp, [("warm-prefix", ids[:cached], 0, cache)], faults, meta, legacy)
                sizes, start = [len(ids) - cached], cached
            else:
                sizes, start = plan["chunks"] or [len(ids)], 0
            for n in sizes:
                last = serve(model, dp, [(name, ids[start:start + n], start, cache)], faults, meta, legacy)[name]
                forwards.append([start, start + n])
                start += n
            for _ in range(NEW_TOKENS):
                ids.append(int(torch.argmax(last.float())))
                last = serve(model, dp, [(name, ids[-1:], len(ids) - 1, cache)], faults, meta, legacy)[name]
                forwards.append([len(ids) - 1, len(ids)])
        else:  # batched: OTHER's rows, then PROMPT's, then padding, in one forward
            caches = {plan["other"]: Cache(model), plan["name"]: Cache(model)}
            ids = {plan["other"]: list(OTHER), plan["name"]: list(PROMPT)}
            batch = [(r, ids[r], 0, caches[r]) for r in (plan["other"], plan["name"])]
            last = serve(model, dp, batch + [("pad", plan["padding"], None, None)], faults, meta, legacy)
            for _ in range(NEW_TOKENS):
                batch = []
                for r in (plan["other"], plan["name"]):
                    ids[r].append(int(torch.argmax(last[r].float())))
                    batch.append((r, ids[r][-1:], len(ids[r]) - 1, caches[r]))
                last = serve(model, dp, batch + [("pad", plan["padding"], None, None)], faults, meta, legacy)
            ids = ids[plan["name"]]
    if not emit:
        return ids
    print(json.dumps({"pair": pair, "side": side_name, "ids": ids, "forwards": forwards}))


# ----------------------------------------------------------------------------- figures


def unit_roundoff(dtype):
    return {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}.get(dtype)


def side_rows(side_dir):
    """(request-free key (stage, k, position), dtype) -> row stats over every window of a one-request side,
    the later forward winning (dumpview's rule, simplified to the request the pair is about)."""
    rows = {}
    for root, _dirs, files in sorted(os.walk(side_dir)):
        if "manifest.json" not in files:
            continue
        m = pt.load(os.path.join(root, "manifest.json"))
        t = m.get("token_rows")
        if not t or not t["file"]:
            continue
        with open(os.path.join(root, t["file"]), "rb") as handle:
            data = handle.read()
        values = struct.unpack("<%df" % (len(data) // 4), data)
        forward = []
        for entry_index, e in enumerate(t["map"]):
            forward.extend((entry_index, e["first_position"] + i) for i in range(e["count"]))
        records = {r["seq"]: r for r in m["records"]}
        calls = {}
        for seq, first, count, _dims, positions in t["records"]:
            r = records[seq]
            for n in range(count):
                entry, p = positions[n] if positions else forward[n]
                request = t["map"][entry]["request"]
                if request is None or request.startswith("warm") or request in ("seq-16",):
                    continue
                k = calls[(r["stage"], p)] = calls.get((r["stage"], p), 0) + 1
                at = (first + n) * 5
                rows[(r["stage"], k, p)] = (values[at:at + 5], r["dtype"])
    return rows


def figures(pair_dir):
    """The largest row difference of the pair over u * scale (u: the dtype's unit roundoff), per statistic."""
    a, b = side_rows(os.path.join(pair_dir, "a")), side_rows(os.path.join(pair_dir, "b"))
    worst = {}
    for key, (ra, dtype) in a.items():
        if key not in b:
            continue
        rb = b[key][0]
        l2 = max(math.sqrt(max(ra[3], 0.0)), math.sqrt(max(rb[3], 0.0)))
        # dumpview's scales (docs/diff.md, "Token rows"): the checksum's weights u·v have an rms of 1/3.
        scales = {"max_abs": max(abs(ra[1]), abs(rb[1])), "l2": l2, "sum": l2, "row_checksum": l2 / 3}
        diffs = {"max_abs": abs(ra[1] - rb[1]), "l2": abs(math.sqrt(max(ra[3], 0.0)) - math.sqrt(max(rb[3], 0.0))),
                 "sum": abs(ra[2] - rb[2]), "row_checksum": abs(ra[4] - rb[4])}
        for stat, d in diffs.items():
            if scales[stat] > 0 and unit_roundoff(dtype):
                ratio = d / (unit_roundoff(dtype) * scales[stat])
                if ratio > worst.get(stat, (0.0,))[0]:
                    worst[stat] = (round(ratio, 3), "%s#%d" % key[:2], key[2])
    return {stat: {"ratio": r, "at": at, "position": p} for stat, (r, at, p) in sorted(worst.items())}


# ----------------------------------------------------------------------------- parent


def strip_token_rows(side_dir):
    """Removes ``token_rows`` from every manifest under ``side_dir``: what a probe from before
    token rows wrote (the row statistics were off, so there is no sidecar)."""
    for root, _dirs, files in os.walk(side_dir):
        if "manifest.json" in files:
            path = os.path.join(root, "manifest.json")
            manifest = pt.load(path)
            manifest.pop("token_rows", None)
            with open(path, "w") as handle:
                json.dump(manifest, handle, indent=1)
                handle.write("\n")


def run_pair(pair):
    spec = PAIRS[pair]
    pair_dir = os.path.join(OUT_ROOT, pair)
    pt.fresh_dir(pair_dir)
    printed = {}
    for side_name in ("a", "b"):
        env = pt.probe_env(os.path.join(pair_dir, side_name))
        env.pop("DUMP_PROBE_OCCURRENCE")
        env.update(spec[side_name]["select"])
        printed[side_name] = pt.run_side(os.path.abspath(__file__), ["--side", pair, side_name], env)
        if spec[side_name]["legacy"]:
            strip_token_rows(os.path.join(pair_dir, side_name))
    expected = {
        "pair": pair,
        "description": spec["description"],
        "a": "a",
        "b": "b",
        "dtype": spec["a"]["dtype"],
        "answer": spec["answer"],
        "generated_ids": {s: printed[s]["ids"] for s in ("a", "b")},
        "figures": figures(pair_dir) if spec["answer"]["first_bad_token"] is None and "summed" not in spec["answer"]
        else {},
    }
    with open(os.path.join(pair_dir, "expected.json"), "w") as handle:
        json.dump(expected, handle, indent=1)
        handle.write("\n")
    answer = spec["answer"]
    bad = answer["first_bad_token"]
    summed = (answer.get("summed") or {}).get("first")
    if summed is not None:
        said = ("first divergence: %s at request %s positions %d..=%d (token id %d), B's record against A's rows "
                "summed, exit 1" % (summed["key"], summed["request"], summed["positions"][0], summed["positions"][1],
                                    summed["token_id"]))
    elif "summed" in answer:
        said = "no divergence: every record of B agrees with A's rows summed over its positions (exit 0)"
    else:
        said = ("no divergence: every aligned row agrees (exit 0)" if bad is None else
                "first bad token: request %s position %d (token id %d) at %s (%s), exit 1"
                % (bad["request"], bad["position"], bad["token_id"], bad["key"], bad["kind"]))
    pt.write_readme(pair_dir, "# %s\n\n%s\n\nWhat `dumpview diff a b` says: %s.\n\n"
                    "Regenerate with `.venv/bin/python examples/token_rows.py %s` (see examples/token_rows.py)."
                    % (pair, spec["description"], said, pair))
    return expected


def run_layout_pair(pair):
    """A pair of LAYOUT_PAIRS: both scenarios written by the layouts generator (one gloo
    process per rank), then copied into the pair's a/ and b/."""
    import shutil
    import subprocess
    import tempfile

    scenario_a, scenario_b, description, answer = LAYOUT_PAIRS[pair]
    pair_dir = os.path.join(OUT_ROOT, pair)
    pt.fresh_dir(pair_dir)
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DUMP_PROBE")}
        env["DUMP_PROBE_KERNEL"] = "torch"
        subprocess.run([sys.executable, LAYOUTS_GENERATOR, tmp, scenario_a, scenario_b], check=True, env=env,
                       capture_output=True, timeout=300)
        for side, scenario in (("a", scenario_a), ("b", scenario_b)):
            shutil.copytree(os.path.join(tmp, scenario), os.path.join(pair_dir, side))
    expected = {"pair": pair, "description": description, "a": "a", "b": "b", "dtype": "float64",
                "answer": answer, "layouts": [scenario_a, scenario_b], "figures": {}}
    with open(os.path.join(pair_dir, "expected.json"), "w") as handle:
        json.dump(expected, handle, indent=1)
        handle.write("\n")
    bad = answer["first_bad_token"]
    said = ("no divergence: every aligned row agrees (exit 0)" if bad is None else
            "first bad token: request %s position %d (token id %d) at %s (%s), exit 1"
            % (bad["request"], bad["position"], bad["token_id"], bad["key"], bad["kind"]))
    pt.write_readme(pair_dir, "# %s\n\n%s\n\nWhat `dumpview diff a b` says: %s.\n\n"
                    "Regenerate with `.venv/bin/python examples/token_rows.py %s` (scenarios %s and %s of "
                    "tests/fixtures/layouts/make_layouts_fixture.py)."
                    % (pair, description, said, pair, scenario_a, scenario_b))
    return expected


def main(argv):
    if len(argv) == 3 and argv[0] == "--side":
        if PAIRS[argv[1]][argv[2]]["plan"]["kind"] == "dp":
            run_dp_side(argv[1], argv[2])
        else:
            run_one_side(argv[1], argv[2])
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    names = argv or list(PAIRS) + list(LAYOUT_PAIRS)
    unknown = [n for n in names if n not in PAIRS and n not in LAYOUT_PAIRS]
    if unknown:
        raise SystemExit("unknown pair(s) %s; choose from %s" % (unknown, list(PAIRS) + list(LAYOUT_PAIRS)))
    started = time.time()
    for name in names:
        t0 = time.time()
        expected = run_layout_pair(name) if name in LAYOUT_PAIRS else run_pair(name)
        print("%s: figures %s (%.1fs)" % (name, json.dumps(expected["figures"]), time.time() - t0))
    print("done in %.1fs" % (time.time() - started))


if __name__ == "__main__":
    main(sys.argv[1:])
