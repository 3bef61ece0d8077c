"""Probe overhead on the Llama example, side by side in one run.

Times one prefill step of examples/tiny_llama.py (6 layers, 119 capture
points per forward) on CPU in three modes, each in its own fresh process so
no mode inherits another's hooks:

  disarmed  dump_probe imported, DUMP_PROBE unset (capture() is one boolean check)
  armed     DUMP_PROBE=1, summaries only: arm + forward + finish (manifest written)
  msprobe   mindstudio-probe PrecisionDebugger, task "statistics", level "L1"
            (per-API statistics), start + forward + stop + step

at two widths: the example itself (hidden 256) and the same architecture 4x
wider.  Modes are interleaved over several rounds and the median step time of each is
used.  Prints step times and the ratios the probe issue sets as goals:
armed / disarmed (goal <= 1.10) and msprobe's added time / the probe's added
time (goal >= 5).

    .venv/bin/python benches/probe_overhead.py [--tokens 256] [--steps 15] [--rounds 3]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Model widths measured: the example itself, and the same architecture 4x wider
# (real decoders are 8-32x wider still), because the probe's cost per element
# is fixed while the model's grows with the hidden size.
WIDTHS = {
    "example": {},
    "4x wider": dict(hidden_size=1024, intermediate_size=2752, num_attention_heads=16, num_key_value_heads=8),
}


def child(mode, width, tokens, steps, out_dir):
    """Runs in a subprocess: time `steps` prefill steps in `mode`, print JSON."""
    sys.path[:0] = [os.path.join(ROOT, "assets"), os.path.join(ROOT, "examples")]
    import torch

    import dump_probe
    import tiny_llama as tl

    tl.CONFIG.update(WIDTHS[width])
    tl.deterministic()
    hf = tl.build_hf_model()
    probe = dump_probe if mode == "armed" else (dump_probe if mode == "disarmed" else None)
    model = tl.TinyLlama(hf, max_tokens=tokens, probe=probe)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, tl.CONFIG["vocab_size"], (tokens,), generator=generator)

    debugger = None
    if mode == "msprobe":
        from msprobe.pytorch import PrecisionDebugger

        debugger = PrecisionDebugger(task="statistics", dump_path=out_dir, level="L1")

    def step(index):
        model.reset_cache()
        if mode == "armed":
            dump_probe._reset_for_tests({"DUMP_PROBE": "1", "DUMP_PROBE_DIR": os.path.join(out_dir, str(index))})
            dump_probe.arm("bench", token_ids=ids)
        if debugger is not None:
            debugger.start()
        with torch.no_grad():
            model.forward(ids, 0)
        if mode == "armed":
            dump_probe.finish()
        if debugger is not None:
            debugger.stop()
            debugger.step()

    times = []
    for index in range(steps + 2):
        start = time.perf_counter()
        step(index)
        if index >= 2:  # two warm-up steps
            times.append(time.perf_counter() - start)
    records = None
    if mode == "armed":
        manifest = os.path.join(out_dir, str(steps + 1), "rank0", "match1-occ1", "manifest.json")
        with open(manifest) as handle:
            records = len(json.load(handle)["records"])
    print(json.dumps({"mode": mode, "times": times, "records": records}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=256, help="prefill length (default 256)")
    parser.add_argument("--steps", type=int, default=15, help="timed steps per mode and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--width", default="example", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.width, args.tokens, args.steps, args.out)
        return
    print("probe overhead: tiny Llama prefill of %d tokens, CPU, 1 thread, median of %d steps per mode"
          % (args.tokens, args.steps * args.rounds))
    for width in WIDTHS:
        measure(width, args)


def measure(width, args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUMP_PROBE")}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    samples = {"disarmed": [], "armed": [], "msprobe": []}
    hidden = WIDTHS[width].get("hidden_size", 256)
    records = None
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(args.rounds):
            for mode in samples:
                out = os.path.join(tmp, "%s-%d" % (mode, round_index))
                cmd = [sys.executable, __file__, "--child", mode, "--width", width, "--out", out,
                       "--tokens", str(args.tokens), "--steps", str(args.steps)]
                result = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
                if result.returncode != 0:
                    sys.exit("%s failed:\n%s" % (mode, result.stderr[-3000:]))
                data = json.loads(result.stdout.strip().splitlines()[-1])
                samples[mode].extend(data["times"])
                records = data["records"] or records

    median = {mode: statistics.median(times) * 1e3 for mode, times in samples.items()}
    base = median["disarmed"]
    probe_added = median["armed"] - base
    msprobe_added = median["msprobe"] - base
    print("\n%s (hidden %d, %d records per window)" % (width, hidden, records or 0))
    for mode in samples:
        print("  %-9s %8.2f ms   %.3fx disarmed" % (mode, median[mode], median[mode] / base))
    print("  armed / disarmed:                       %.3f  (goal <= 1.10)" % (median["armed"] / base))
    if probe_added > 0:
        print("  msprobe added time / probe added time:  %.1f  (goal >= 5)" % (msprobe_added / probe_added))
    else:
        print("  msprobe added time / probe added time:  probe added no measurable time")


if __name__ == "__main__":
    main()
