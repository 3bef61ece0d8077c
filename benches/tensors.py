"""`dumpview tensors A B --json` against torch on CPU computing the same metrics, and the read floor.

Two pairs of files, each side one tensor of --size-gib GiB (default 1):

  float32  268,435,456 elements per side at 1 GiB, saved with torch.save (.pt)
  bfloat16 536,870,912 elements per side at 1 GiB, saved with safetensors

B = A + noise, with a few NaN and +-inf in both (some at the same positions, some not). For each
pair, with the files in the page cache (read once before any timing), best of 3:

  dumpview  wall time of `target/release/dumpview tensors A B --json` (a fresh process: open, map,
            parse the container, compare, print)
  torch     the same metric set the straightforward way a user would write it on CPU, load and
            compute timed apart: torch.load(mmap=True, weights_only=True) or
            safetensors.torch.load_file; then masks, |a-b| max/argmax/mean, cosine, norms,
            isclose and its first mismatch, non-finite classes, ULP via .view(int), the decade
            histogram via log10 + bincount. Float32 inputs are upcast to float64 (dumpview sums in
            float64); bfloat16 inputs to float32, where their differences and products are exact,
            with every sum taken with dtype=float64 (a float64 copy of 2 x 512 Mi elements would not
            fit beside the rest in this machine's memory);
  floor     reading both files once: a readinto() loop over a reused 16 MiB buffer, and
            `cat A B > /dev/null`; the faster of the two is the floor (named in the output).

Ratios: torch total / dumpview (goal >= 3) and dumpview / floor (goal <= 2). Thread counts: torch's
intra-op threads and the machine's CPUs (dumpview uses rayon's default, one thread per CPU).
The torch results are checked against dumpview's JSON (counts and indices equal, sums to 1e-9).

    cargo build --release
    .venv/bin/python benches/tensors.py [--size-gib 1] [--dir DIR] [--keep] [--quick] [--reps 3]
"""

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DUMPVIEW = os.path.join(ROOT, "target", "release", "dumpview")
ATOL, RTOL = 1e-5, 1e-2  # dumpview's defaults, given explicitly to both sides
ROW = 4096


# ---------------------------------------------------------------------------
# Files.


def make_pair(dtype, numel, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(numel // ROW, ROW, generator=g)
    b = a + 1e-3 * torch.randn(numel // ROW, ROW, generator=g)
    flat_a, flat_b = a.view(-1), b.view(-1)
    step = max(numel // 16, 1)
    for k, pos in enumerate(range(step // 3, numel, step)):
        kind = k % 4
        if kind == 0:  # NaN on both sides
            flat_a[pos] = flat_b[pos] = float("nan")
        elif kind == 1:  # NaN in B only
            flat_b[pos] = float("nan")
        elif kind == 2:  # +inf vs finite
            flat_a[pos] = float("inf")
        else:  # -inf on both sides
            flat_a[pos] = flat_b[pos] = float("-inf")
    return a.to(dtype), b.to(dtype)


def write_files(directory, size_gib):
    files = {}
    n32 = int(size_gib * 2**30) // 4 // ROW * ROW
    a, b = make_pair(torch.float32, n32, 1)
    files["float32 .pt"] = (os.path.join(directory, "a_f32.pt"), os.path.join(directory, "b_f32.pt"), n32)
    torch.save({"x": a}, files["float32 .pt"][0])
    torch.save({"x": b}, files["float32 .pt"][1])
    del a, b
    from safetensors.torch import save_file

    n16 = int(size_gib * 2**30) // 2 // ROW * ROW
    a, b = make_pair(torch.bfloat16, n16, 2)
    files["bfloat16 safetensors"] = (os.path.join(directory, "a_bf16.safetensors"),
                                     os.path.join(directory, "b_bf16.safetensors"), n16)
    save_file({"x": a}, files["bfloat16 safetensors"][0])
    save_file({"x": b}, files["bfloat16 safetensors"][1])
    return files


# ---------------------------------------------------------------------------
# The three contenders.


def best_of(reps, fn):
    results = [fn() for _ in range(reps)]
    return min(results, key=lambda r: r[0])


def time_dumpview(a, b):
    t0 = time.perf_counter()
    proc = subprocess.run([DUMPVIEW, "tensors", a, b, "--json", "--atol", repr(ATOL), "--rtol", repr(RTOL)],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        sys.exit("dumpview failed (%d): %s" % (proc.returncode, proc.stderr))
    return wall, json.loads(proc.stdout)


def read_floor_readinto(paths):
    buf = bytearray(16 << 20)
    view = memoryview(buf)
    t0 = time.perf_counter()
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(view):
                pass
    return time.perf_counter() - t0


def read_floor_cat(paths):
    t0 = time.perf_counter()
    subprocess.run(["cat"] + list(paths), stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def torch_load(path):
    if path.endswith(".pt"):
        return torch.load(path, mmap=True, weights_only=True)["x"]
    from safetensors.torch import load_file

    return load_file(path)["x"]


ORD = {torch.float32: (torch.int32, 0x7FFFFFFF, torch.int64),
       torch.bfloat16: (torch.int16, 0x7FFF, torch.int32),
       torch.float16: (torch.int16, 0x7FFF, torch.int32),
       torch.float64: (torch.int64, 0x7FFFFFFFFFFFFFFF, torch.int64)}


def ordinal(x):
    """where(i < 0, -(i & mask), i) of the bits i, in place (one tensor-sized temporary less)."""
    int_dtype, mask, wide = ORD[x.dtype]
    bits = x.reshape(-1).view(int_dtype)
    sign = (bits < 0).to(wide).mul_(-2).add_(1)  # -1 where the sign bit is set, else 1
    return bits.to(wide).bitwise_and_(mask).mul_(sign)


def torch_metrics(a_in, b_in):
    """Every metric of dumpview's list, written plainly with torch ops.

    Whole-tensor ops, no chunking; in-place where a temporary the size of the tensor can be
    avoided and `del` as soon as a tensor is done with, so that a 1 GiB pair fits in memory
    (peak: about six working-dtype tensors, during isclose).
    """
    work = torch.float64 if a_in.dtype in (torch.float32, torch.float64) else torch.float32
    shape = list(a_in.shape)
    a = a_in.reshape(-1).to(work)
    b = b_in.reshape(-1).to(work)
    n = a.numel()
    fin = torch.isfinite(a) & torch.isfinite(b)
    n_fin = int(fin.sum())

    # |a - b| over finite pairs: max and where, mean, rel_l2, histogram
    d = torch.sub(a, b).abs_()
    d.masked_fill_(~fin, -1.0)
    max_at = int(torch.argmax(d))
    max_abs = float(d[max_at])
    dm = d[fin]
    del d
    mean_abs = float(dm.sum(dtype=torch.float64)) / n_fin
    norm_diff = float(torch.linalg.vector_norm(dm, dtype=torch.float64))
    zero = int((dm == 0).sum())
    x = dm[dm > 0].to(torch.float64)  # log10 in float64: float32's can round 10^e - tiny up to e
    del dm
    torch.log10(x, out=x)
    x.floor_()
    decades = x.to(torch.int64)
    del x
    lo = int(decades.min())
    counts = torch.bincount(decades - lo)
    del decades
    histogram = {"zero": zero, "nonfinite": n - n_fin,
                 "decades": [{"decade": lo + i, "count": int(c)} for i, c in enumerate(counts.tolist()) if c]}

    # cosine and rel_l2 over finite pairs
    av, bv = a[fin], b[fin]
    if work == torch.float64:
        dot = float(torch.dot(av, bv))
    else:  # bfloat16 values: their float32 products are exact
        dot = float(torch.mul(av, bv).sum(dtype=torch.float64))
    na = float(torch.linalg.vector_norm(av, dtype=torch.float64))
    nb = float(torch.linalg.vector_norm(bv, dtype=torch.float64))
    del av, bv
    cosine = dot / (na * nb)
    rel_l2 = norm_diff / nb

    # torch.isclose: count and first mismatch
    not_close = torch.isclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=False).logical_not_()
    del a, b
    mismatches = int(not_close.sum())
    first_mismatch = int(torch.argmax(not_close.view(torch.uint8))) if mismatches else None
    del not_close

    # non-finite classes, on the loaded tensors
    a, b = a_in.reshape(-1), b_in.reshape(-1)
    nan_a, nan_b = torch.isnan(a), torch.isnan(b)
    pinf_a, pinf_b = torch.isposinf(a), torch.isposinf(b)
    ninf_a, ninf_b = torch.isneginf(a), torch.isneginf(b)
    disagree = (nan_a != nan_b) | (pinf_a != pinf_b) | (ninf_a != ninf_b)
    first_dis = int(torch.argmax(disagree.view(torch.uint8))) if bool(disagree.any()) else None
    nonfinite = {"nan_a": int(nan_a.sum()), "nan_b": int(nan_b.sum()), "posinf_a": int(pinf_a.sum()),
                 "posinf_b": int(pinf_b.sum()), "neginf_a": int(ninf_a.sum()), "neginf_b": int(ninf_b.sum())}
    any_nan = nan_a.logical_or_(nan_b)
    del nan_b, pinf_a, pinf_b, ninf_a, ninf_b, disagree

    # ULP distance: sign-magnitude ordinals of the bit patterns, over positions without NaN
    ulp = ordinal(a)
    ord_b = ordinal(b)
    ulp.sub_(ord_b).abs_()
    del ord_b
    ulp.masked_fill_(any_nan, 0)
    max_ulp_at = int(torch.argmax(ulp))
    max_ulp = int(ulp[max_ulp_at])
    del ulp, any_nan, nan_a
    return {"shape": shape, "numel": n, "finite_pairs": n_fin, "max_abs_diff": max_abs,
            "max_abs_diff_at": max_at, "mean_abs_diff": mean_abs, "cosine": cosine, "rel_l2": rel_l2,
            "mismatches": mismatches, "first_mismatch": first_mismatch, "nonfinite": nonfinite,
            "first_disagreement": first_dis, "max_ulp": max_ulp, "max_ulp_at": max_ulp_at,
            "histogram": histogram}


def torch_child(a_path, b_path):
    """In a fresh process (so its peak RSS is torch's alone): load, compute, print JSON."""
    t0 = time.perf_counter()
    a, b = torch_load(a_path), torch_load(b_path)
    t1 = time.perf_counter()
    metrics = torch_metrics(a, b)
    t2 = time.perf_counter()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"load": t1 - t0, "compute": t2 - t1, "metrics": metrics, "peak_rss": rss}))


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def torch_memory_need(a_path, b_path):
    """Peak RSS of the torch process, as measured: 14.8 GB (float32 pair) and 18.3 GB (bfloat16 pair)
    for 2.15 GB of input: about 6-7 working-dtype tensors (each as large as both inputs together),
    the mapped inputs, and torch itself."""
    inputs = os.path.getsize(a_path) + os.path.getsize(b_path)
    return 8.3 * inputs + 0.5e9


def time_torch(a_path, b_path):
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-child", a_path, b_path],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        hint = ""
        if proc.returncode == -9:
            hint = (" (SIGKILL: most likely out of memory; the torch side needs about %.1f GB, %.1f GB is "
                    "available now; try a smaller --size-gib)" % (torch_memory_need(a_path, b_path) / 1e9,
                                                                 mem_available() / 1e9))
        sys.exit("the torch run failed (%d)%s: %s" % (proc.returncode, hint, proc.stderr[-2000:]))
    out = json.loads(proc.stdout)
    return out["load"] + out["compute"], out["load"], out["compute"], out["metrics"], out["peak_rss"]


def check(dv, tm):
    """Differences between dumpview's and torch's answers, in words (empty when they agree)."""
    (pair,) = dv["pairs"]
    m = pair["metrics"]
    out = []
    loc = lambda x: None if x is None else x["index"]  # noqa: E731
    exact = {"shape": m["shape"], "numel": m["numel"], "finite_pairs": m["finite_pairs"],
             "max_abs_diff": m["max_abs_diff"], "max_abs_diff_at": loc(m["max_abs_diff_at"]),
             "mismatches": m["mismatches"], "first_mismatch": loc(m["first_mismatch"]),
             "first_disagreement": loc(m["nonfinite"]["first_disagreement"]), "max_ulp": m["max_ulp"],
             "max_ulp_at": loc(m["max_ulp_at"]), "histogram": m["histogram"],
             "nonfinite": {k: m["nonfinite"][k] for k in tm["nonfinite"]}}
    for key, value in exact.items():
        if value != tm[key]:
            out.append("%s: dumpview %r, torch %r" % (key, value, tm[key]))
    for key in ("mean_abs_diff", "cosine", "rel_l2"):
        if not math.isclose(m[key], tm[key], rel_tol=1e-9):
            out.append("%s: dumpview %r, torch %r" % (key, m[key], tm[key]))
    return out


# ---------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-gib", type=float, default=1.0, help="size of each file (default 1)")
    parser.add_argument("--quick", action="store_true", help="64 MiB per file: a smoke test")
    parser.add_argument("--dir", help="where the files go (default: a new temp dir under /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the files after the run")
    parser.add_argument("--reps", type=int, default=3, help="best of REPS (default 3)")
    parser.add_argument("--torch-child", nargs=2, metavar=("A", "B"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_child:
        return torch_child(*args.torch_child)
    size = 1 / 16 if args.quick else args.size_gib
    if not os.path.isfile(DUMPVIEW):
        sys.exit("%s is missing: run `cargo build --release`" % DUMPVIEW)

    directory = args.dir or tempfile.mkdtemp(prefix="dumpview-tensors-bench-", dir="/tmp")
    os.makedirs(directory, exist_ok=True)
    nproc = os.cpu_count()
    print("dumpview tensors benchmark: %.4g GiB per file, best of %d, files in %s" % (size, args.reps, directory))
    print("threads: torch.get_num_threads() = %d, nproc = %d (dumpview: rayon, one thread per CPU)"
          % (torch.get_num_threads(), nproc))
    try:
        t0 = time.perf_counter()
        files = write_files(directory, size)
        print("wrote the files in %.1f s" % (time.perf_counter() - t0))
        rows, problems = [], []
        for name, (a, b, numel) in files.items():
            for _ in range(2):  # into the page cache
                read_floor_readinto((a, b))
            floors = {"readinto": min(read_floor_readinto((a, b)) for _ in range(args.reps)),
                      "cat": min(read_floor_cat((a, b)) for _ in range(args.reps))}
            floor_how = min(floors, key=floors.get)
            dv_wall, dv_json = best_of(args.reps, lambda: time_dumpview(a, b))
            need, avail = torch_memory_need(a, b), mem_available()
            if need > avail:
                print("warning: the torch side needs about %.1f GB, %.1f GB is available" % (need / 1e9, avail / 1e9))
            tt_total, tt_load, tt_compute, tm, rss = best_of(args.reps, lambda: time_torch(a, b))
            for p in check(dv_json, tm):
                problems.append("%s: %s" % (name, p))
            rows.append(dict(name=name, numel=numel, bytes=os.path.getsize(a) + os.path.getsize(b),
                             dumpview=dv_wall, torch_load=tt_load, torch_compute=tt_compute, torch_total=tt_total,
                             floor=floors[floor_how], floor_how=floor_how, floors=floors, rss=rss))

        print()
        head = ("pair", "elements/side", "dumpview s", "torch load s", "torch compute s", "torch total s",
                "floor s", "torch/dumpview", "dumpview/floor")
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for r in rows:
            print("| %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f (%s) | %.1f | %.2f |" % (
                r["name"], format(r["numel"], ","), r["dumpview"], r["torch_load"], r["torch_compute"],
                r["torch_total"], r["floor"], r["floor_how"], r["torch_total"] / r["dumpview"],
                r["dumpview"] / r["floor"]))
        print()
        for r in rows:
            print("%s: read floor readinto %.3f s, cat %.3f s (%.2f GB/s for %.2f GB)" % (
                r["name"], r["floors"]["readinto"], r["floors"]["cat"], r["bytes"] / r["floor"] / 1e9,
                r["bytes"] / 1e9))
        print("goals: torch total / dumpview >= 3, dumpview / floor <= 2")
        for r in rows:
            print("%s: peak RSS of the torch process %.1f GB (inputs %.2f GB)" % (r["name"], r["rss"] / 1e9, r["bytes"] / 1e9))
        if problems:
            print("\ntorch and dumpview DISAGREE:")
            for p in problems:
                print("  " + p)
        else:
            print("torch's figures equal dumpview's (counts, indices, max, ULP, histogram exact; sums to 1e-9)")
        for r in rows:
            print("RESULT pair=%s dumpview_s=%.4f torch_load_s=%.4f torch_compute_s=%.4f torch_total_s=%.4f "
                  "floor_s=%.4f floor=%s torch_over_dumpview=%.2f dumpview_over_floor=%.2f threads=%d nproc=%d" % (
                      r["name"].replace(" ", "_"), r["dumpview"], r["torch_load"], r["torch_compute"],
                      r["torch_total"], r["floor"], r["floor_how"], r["torch_total"] / r["dumpview"],
                      r["dumpview"] / r["floor"], torch.get_num_threads(), nproc))
        return 1 if problems else 0
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
