"""Dump pair for the diagnosis's hooked-input rules: a tiny float32 model captured with
``dp.hook(model, inputs=True)`` only, no stage named by hand.

    .venv/bin/python examples/diagnosis_hooked.py

The model is embed (Linear) -> norm (an RMSNorm module) -> proj (Linear). Both sides load the
same seeded weights and input; B builds its norm with eps=0.5 instead of 1e-6 (a configuration
difference of one operator). The answer: the first divergence is ``norm#1``, its hooked input
``norm.input.0#1`` agrees, so the operator (or its configuration) differs there; ``proj``'s
hooked input ``proj.input.0#1`` lies on ``norm#1``'s bytes, so it reads the origin's output.

Writes tests/fixtures/diagnosis/hooked_op/{a,b} (each side in its own subprocess, the old
directory deleted first). float32 on cpu, seeded: the statistics are the same on every run of
one machine; the answers above do not depend on the low bits.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pair_tools as pt  # noqa: E402

PAIR = "hooked_op"


def run_one_side(side):
    import torch

    sys.path.insert(0, pt.ASSETS)
    import dump_probe as dp

    class RMSNorm(torch.nn.Module):
        def __init__(self, width, eps):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, width))
            self.eps = eps

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    class Tiny(torch.nn.Module):
        def __init__(self, eps):
            super().__init__()
            self.embed = torch.nn.Linear(16, 32)
            self.norm = RMSNorm(32, eps)
            self.proj = torch.nn.Linear(32, 8)

        def forward(self, x):
            return self.proj(self.norm(self.embed(x)))

    torch.manual_seed(0)
    model = Tiny(eps={"a": 1e-6, "b": 0.5}[side])
    x = torch.randn(6, 16)
    hooks = dp.hook(model, inputs=True, label="tiny")
    with torch.no_grad():
        model(x)
    hooks.remove()
    print(json.dumps({"side": side, "windows": len(dp._state.written)}))


def main(argv):
    if len(argv) == 2 and argv[0] == "--side":
        run_one_side(argv[1])
        return
    pair_dir = os.path.join(pt.ROOT, "tests", "fixtures", "diagnosis", PAIR)
    pt.fresh_dir(pair_dir)
    for side in ("a", "b"):
        env = pt.probe_env(os.path.join(pair_dir, side), occurrence=1)
        env["DUMP_PROBE_KERNEL"] = "torch"
        pt.run_side(os.path.abspath(__file__), ["--side", side], env)
        manifest = pt.load(pt.find_manifest(os.path.join(pair_dir, side), 1))
        print("%s: %d records" % (side, len(manifest["records"])))


if __name__ == "__main__":
    main(sys.argv[1:])
