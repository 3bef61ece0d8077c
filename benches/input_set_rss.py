"""Peak memory while the probe writes a large input set, side by side in one run.

Each mode runs in a fresh process: it allocates the model's tensor (SIZE MiB of float32 on
the host), resets the kernel's peak-RSS mark (/proc/self/clear_refs, "5"), then calls
capture_inputs() on that tensor (DUMP_PROBE_SYNC_INPUTS=1: written before it returns) and
finish(), and reads the peak (VmHWM in /proc/self/status). The figure is the peak's growth
over the resident size before the capture, divided by the input set's bytes: what writing
the set costs beyond the model's own memory (its clone of the set counts: 1.0 is the floor).

  before   the probe as it was until issue 31 item 21: its statistics in one pass of eager
           ops over the whole tensor (temporaries of about eight times the set), then
           torch.save into an io.BytesIO whose getvalue() is written out
  after    the probe as it is: statistics in blocks of 2**20 elements (_STATS_BLOCK), and
           torch.save streaming into the temporary file

at two sizes: 60 MiB (under 2**24 elements: reduced in float32) and 256 MiB (float64).

Modes are interleaved over --reps rounds; the median of each is printed. Goal: after <= 1.5.

    .venv/bin/python benches/input_set_rss.py [--mib 60,256] [--reps 3]

Ends with `RESULT before=… after=… goal_met=…` (the largest median of each mode over the
sizes). Linux only (/proc).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ASSETS = os.path.join(HERE, "..", "assets")

CHILD = r"""
import io, os, sys
sys.path.insert(0, sys.argv[1])
import torch
import dump_probe as dp

mode, mib = sys.argv[2], int(sys.argv[3])
if mode == "before":
    dp._STATS_BLOCK = 1 << 62

    def old_save(obj, path):
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        dp._atomic_write_bytes(path, [buffer.getvalue()])
    dp._atomic_torch_save = old_save

def status(field):
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise SystemExit("no %s in /proc/self/status" % field)

x = torch.ones(mib * (1 << 20) // 4, dtype=torch.float32)
x.add_(1)  # every page touched: resident before the capture
dp.arm("bench")
with open("/proc/self/clear_refs", "w") as handle:
    handle.write("5")
before = status("VmRSS")
dp.capture_inputs("big", _op="bench:set", x=x)
assert dp.finish() is not None
peak = status("VmHWM")
print("GROWTH %d %d" % (peak - before, x.numel() * 4))
"""


def run(mode, mib, python):
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, DUMP_PROBE="1", DUMP_PROBE_DIR=out, DUMP_PROBE_SYNC_INPUTS="1",
                   OMP_NUM_THREADS="1")
        proc = subprocess.run([python, "-c", CHILD, ASSETS, mode, str(mib)], capture_output=True,
                              text=True, env=env, timeout=600)
        if proc.returncode != 0:
            raise SystemExit("%s: %s" % (mode, proc.stderr[-2000:]))
        line = [l for l in proc.stdout.splitlines() if l.startswith("GROWTH ")][-1]
        growth, size = (int(v) for v in line.split()[1:])
        return growth / size


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", default="60,256", help="the input sets' sizes (MiB), comma-separated")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    sizes = [int(m) for m in args.mib.split(",")]
    medians = {"before": [], "after": []}
    for mib in sizes:
        ratios = {"before": [], "after": []}
        for rep in range(args.reps):
            for mode in ratios:
                ratios[mode].append(run(mode, mib, args.python))
                print("%4d MiB round %d %-6s peak growth %.2fx the set"
                      % (mib, rep + 1, mode, ratios[mode][-1]), flush=True)
        before, after = (statistics.median(ratios[m]) for m in ("before", "after"))
        medians["before"].append(before)
        medians["after"].append(after)
        print("input set of %d MiB: peak RSS growth while written, median of %d: before %.2fx, after %.2fx"
              % (mib, args.reps, before, after))
    before, after = max(medians["before"]), max(medians["after"])
    print("RESULT before=%.2f after=%.2f goal_met=%s" % (before, after, "yes" if after <= 1.5 else "no"))


if __name__ == "__main__":
    main()
