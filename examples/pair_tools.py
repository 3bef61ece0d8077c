"""Shared plumbing of the example scripts: run one side in a subprocess, read manifests, compare.

Each side of a pair runs in its own Python process with its own DUMP_PROBE_*
environment, the way a user runs two configurations: dump_probe reads the
environment once, at import.  The comparison helpers here only serve the
scripts' own verification and the figures written into expected.json.
dumpview_first_divergence is an independent Python reference of dumpview diff's
rule (src/model/analysis/compare.rs, src/model/analysis/diff.rs), used for every pair's
first_divergence.
"""

import json
import math
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSETS = os.path.join(ROOT, "assets")
OUT_ROOT = os.path.join(ASSETS, "examples")

# Statistics compared between two records (nan_count / inf_count are compared exactly).
VALUE_STATS = ("max_abs", "min", "max", "mean", "l2", "pos_checksum")

EXPECTED_KEYS = (
    "pair", "description", "a", "b", "first_nonfinite", "first_divergence", "divergence_rule",
    "alias_conflicts", "aliases_without_conflict", "agree", "missing_data", "record_counts", "notes",
)


def probe_env(directory, occurrence=1, tensor="", rows=None, match=1):
    """The DUMP_PROBE_* variables of one side; everything else is inherited."""
    env = {
        "DUMP_PROBE": "1",
        "DUMP_PROBE_DIR": directory,
        "DUMP_PROBE_RANKS": "0",
        "DUMP_PROBE_MATCH": str(match),
        "DUMP_PROBE_OCCURRENCE": str(occurrence),
        "DUMP_PROBE_TENSOR": tensor,
        "DUMP_PROBE_TENSOR_FORMAT": "safetensors",
    }
    if rows is not None:
        env["DUMP_PROBE_ROWS"] = str(rows)
    return env


def run_side(script, args, env_vars):
    """Run ``python script args`` with env_vars added; return its parsed last stdout line (JSON)."""
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("DUMP_PROBE"):
            del env[key]  # a user's own settings must not leak into a side
    env.update(env_vars)
    env["HF_HUB_OFFLINE"] = "1"
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    started = time.time()
    proc = subprocess.run(
        [sys.executable, script] + list(args), env=env, capture_output=True, text=True, cwd=ROOT
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit("side %s failed (exit %d)" % (" ".join(args), proc.returncode))
    for line in proc.stderr.splitlines():
        if line.startswith("dump_probe:"):
            sys.stderr.write("  [%s] %s\n" % (" ".join(args), line))
    lines = [l for l in proc.stdout.splitlines() if l.strip()]
    result = json.loads(lines[-1]) if lines else {}
    result["_wall_s"] = round(time.time() - started, 2)
    return result


def record_run(manifest_path, script, args, env_vars):
    """Add the manifest's ``run`` (docs/manifest.md) to a committed dump written before the probe
    recorded it: the command that captures this side again, relative to the repository root
    (``cwd`` "."), as ``dumpview diagnose`` prints it back with new settings. A manifest that
    already has a ``run`` is left as it is. The object goes in as one line after ``world_size``,
    so the rest of the file (one record per line) is unchanged."""
    with open(manifest_path) as f:
        text = f.read()
    if '"run":' in text.split('"records"', 1)[0]:
        return False
    env = {k: v for k, v in env_vars.items() if k.startswith("DUMP_PROBE")}
    run = {"argv": [script] + list(args), "cwd": ".", "executable": ".venv/bin/python", "env": env}
    lines = text.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(' "world_size":'))
    lines.insert(at + 1, ' "run": %s,' % json.dumps(run))
    with open(manifest_path, "w") as f:
        f.write("\n".join(lines))
    return True


def relative_run(manifest_path, script, args):
    """Rewrite the ``run`` a fresh side's probe recorded (absolute paths of this checkout: the
    script, ``cwd``, ``executable``, ``DUMP_PROBE_DIR``) to the repository-relative form of
    record_run, so that a committed dump's command runs from any checkout as printed. The env
    keeps what the probe recorded, with DUMP_PROBE_DIR made relative to the repository root.
    Only the ``run`` line changes (the probe writes one top-level field per line)."""
    with open(manifest_path) as f:
        text = f.read()
    lines = text.split("\n")
    at = next((i for i, line in enumerate(lines) if line.startswith(' "run": ')), None)
    if at is None:
        raise SystemExit("%s has no run line" % manifest_path)
    line = lines[at]
    comma = line.endswith(",")
    recorded = json.loads(line[len(' "run": '):-1 if comma else None])
    env = dict(recorded.get("env") or {})
    if "DUMP_PROBE_DIR" in env:
        env["DUMP_PROBE_DIR"] = rel(os.path.join(ROOT, env["DUMP_PROBE_DIR"]), ROOT)
    run = {"argv": [script] + list(args), "cwd": ".", "executable": ".venv/bin/python", "env": env}
    lines[at] = ' "run": %s%s' % (json.dumps(run), "," if comma else "")
    with open(manifest_path, "w") as f:
        f.write("\n".join(lines))


def fresh_dir(path):
    """Delete a pair's previous output: the probe never overwrites, by design."""
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(path)


def find_manifest(side_dir, occurrence, match=1, rank=0):
    path = os.path.join(side_dir, "rank%d" % rank, "match%d-occ%d" % (match, occurrence), "manifest.json")
    if not os.path.exists(path):
        raise SystemExit("expected manifest %s was not written" % path)
    return path


def load(path):
    with open(path) as handle:
        return json.load(handle)


def key(record):
    return "%s#%d" % (record["stage"], record["occurrence"])


def first_nonfinite(manifest):
    """stage#N of the first record in capture order (seq) with NaN or inf, or None."""
    for record in sorted(manifest["records"], key=lambda r: r["seq"]):
        stats = record["stats"]
        if stats and (stats["nan_count"] or stats["inf_count"]):
            return key(record)
    return None


def byte_range(record):
    """[lo, hi) bytes a record's view can touch: [data_ptr, data_ptr + extent * element_size), where
    extent = 1 + sum((size - 1) * stride); None for an empty tensor or an unknown address."""
    if record.get("data_ptr") is None or record["numel"] == 0:
        return None
    extent = 1 + sum((size - 1) * stride for size, stride in zip(record["shape"], record["stride"]))
    lo = record["data_ptr"]
    return lo, lo + extent * record["element_size"]


def storage_key(record):
    """(device, storage_id) of a record, or None when the probe could not identify its storage.

    storage_id, not storage_ptr: two stages with equal storage_ptr may be different buffers that
    merely lived one after the other at one address (allocator reuse); only views of one live
    storage share a storage_id.
    """
    if record.get("storage_id") is None:
        return None
    return record["device"], record["storage_id"]


def alias_groups(manifest):
    """Groups (lists of records, in capture order) of >= 2 distinct stages whose byte ranges overlap
    in one storage (same storage_id); a record without storage_id or bytes joins no group."""
    by_storage = {}
    for record in manifest["records"]:
        if storage_key(record) is not None and byte_range(record) is not None:
            by_storage.setdefault(storage_key(record), []).append(record)
    groups = []
    for records in by_storage.values():
        records = sorted(records, key=lambda r: byte_range(r)[0])
        current, hi = [], None
        for record in records:  # sweep: overlapping intervals form one group
            lo, end = byte_range(record)
            if current and lo < hi:
                current.append(record)
                hi = max(hi, end)
            else:
                if len({r["stage"] for r in current}) > 1:
                    groups.append(current)
                current, hi = [record], end
        if len({r["stage"] for r in current}) > 1:
            groups.append(current)
    return sorted((sorted(g, key=lambda r: r["seq"]) for g in groups), key=lambda g: g[0]["seq"])


def stride_conflict(group):
    return len({tuple(r["stride"]) for r in group}) > 1


def alias_answer(manifest):
    """(alias_conflicts, aliases_without_conflict) of one manifest: lists of stage#N groups, by the
    storage_id rule of alias_groups, each group and the list in capture order."""
    groups = alias_groups(manifest)
    conflicts = [[key(r) for r in g] for g in groups if stride_conflict(g)]
    clean = [[key(r) for r in g] for g in groups if not stride_conflict(g)]
    return conflicts, clean


ALIAS_RULE = ("alias group: records of >= 2 distinct stages with the same (device, storage_id) whose byte ranges "
              "[data_ptr, data_ptr + (1 + sum((size - 1) * stride)) * element_size) overlap (transitively); "
              "stride conflict: members with different strides. Equal storage_ptr alone is no evidence: the "
              "allocator reuses freed addresses, and storage_id tells those buffers apart.")


def rel_diff(x, y):
    """|x - y| / max(|x|, |y|); 0 when both are 0; None when either is missing."""
    if x is None or y is None or isinstance(x, str) or isinstance(y, str):
        return None
    scale = max(abs(x), abs(y))
    return 0.0 if scale == 0 else abs(x - y) / scale


def paired(a, b):
    """(stage#N, record a, record b) in a's capture order; unpaired keys of a and of b."""
    index_b = {key(r): r for r in b["records"]}
    keys_a = set()
    pairs = []
    for record in sorted(a["records"], key=lambda r: r["seq"]):
        k = key(record)
        keys_a.add(k)
        if k in index_b:
            pairs.append((k, record, index_b[k]))
    only_a = [key(r) for r in sorted(a["records"], key=lambda r: r["seq"]) if key(r) not in index_b]
    only_b = [key(r) for r in sorted(b["records"], key=lambda r: r["seq"]) if key(r) not in keys_a]
    return pairs, only_a, only_b


# ----------------------------------------------------------------------------- dumpview's diff rule

# Default tolerances of dumpview diff (src/model/analysis/compare.rs, `Tolerances::default`).
DEFAULT_RTOL = 1e-2
DEFAULT_ATOL = 1e-6
POS_CHECKSUM_RTOL = 1e-3
POS_CHECKSUM_ATOL = 1e-6
DEFAULT_TOLERANCES = {name: (DEFAULT_RTOL, DEFAULT_ATOL) for name in VALUE_STATS}
DEFAULT_TOLERANCES["pos_checksum"] = (POS_CHECKSUM_RTOL, POS_CHECKSUM_ATOL)
# The checksum's rounding-noise bound (compare.rs `ChecksumNoise::default`; docs/diff.md, "The checksum's
# noise bound"): bound = max(rtol, roundoff_factor * u, evidence_factor * e), u the unit roundoff of the
# coarser dtype, e the per-element change the magnitude statistics show; a checksum moved beyond rtol but
# within the bound is checksum_inconclusive where the bound exceeds moved_row_shift / sqrt(rows).
CHECKSUM_NOISE = dict(roundoff_factor=2.0, evidence_factor=4.0, moved_row_shift=0.05)
# Unit roundoff u = 2**-p of a floating dtype with p significand bits (compare.rs `unit_roundoff`).
UNIT_ROUNDOFF = {"float64": 2.0 ** -53, "double": 2.0 ** -53, "float32": 2.0 ** -24, "float": 2.0 ** -24,
                 "float16": 2.0 ** -11, "half": 2.0 ** -11, "bfloat16": 2.0 ** -8}
# The largest finite value of a dtype (compare.rs `dtype_max`): a statistic may be its dump's overflow
# only while max_abs is inside it.
DTYPE_MAX = {"float16": 65504.0, "half": 65504.0, "bfloat16": 3.3895313892515355e38,
             "float32": 3.4028234663852886e38, "float": 3.4028234663852886e38,
             "float8_e4m3fn": 448.0, "float8_e4m3fnuz": 240.0, "float8_e5m2": 57344.0, "float8_e5m2fnuz": 57344.0}
# Statistics that are accumulations (sums): the only ones a dump tool's own arithmetic can overflow.
ACCUMULATED_STATS = ("mean", "l2", "pos_checksum")
VERDICTS_NOT_DIVERGING = ("agree", "checksum_inconclusive", "not_compared")

DUMPVIEW_RULE = (
    "dumpview diff's rule (src/model/analysis/compare.rs, src/model/analysis/diff.rs; reference: "
    "examples/pair_tools.dumpview_first_divergence): records paired by stage#occurrence in a's capture order; "
    "a pair is (1) structural when shape or dtype kind (floating / integer / bool) differs (float32 vs "
    "bfloat16 is a precision change, compared by value); (2) not_compared when either side has no statistics "
    "(records without elements, empty tensors, of one shape agree); (3) non_finite when nan_count or inf_count differ; (4) magnitude when "
    "one of max_abs, min, max, mean, l2 has |a - b| > atol + rtol * scale, scale max(|a|, |b|), for mean the "
    "larger rms = l2 / sqrt(finite_count); (5) values_moved when pos_checksum moves by more than "
    "atol + bound * scale, scale max(l2_a, l2_b, |pos_checksum_a|, |pos_checksum_b|), bound = max(rtol, "
    "%g * u, %g * e), u the unit roundoff of the coarser dtype (float32 2^-24, bfloat16 2^-8, float16 2^-11), "
    "e = max(n |mean_a - mean_b|, sqrt(n) |l2_a - l2_b|, max(l2_a, l2_b) * r) / scale with n = finite_count and "
    "r the larger of |a - b| / max(|a|, |b|) of min and of max; (6) checksum_inconclusive when it moved beyond atol + rtol * scale but not "
    "beyond the bound and the bound exceeds %g / sqrt(rows), rows = the product of all but the last dimension; "
    "(7) not_compared when no statistic was recorded on both sides; else agree. A statistic recorded on one "
    "side only, or a mean, l2 or pos_checksum that is non-finite while that side's max_abs is finite and inside "
    "its dtype's range (the dump tool's own accumulation overflowed), is not compared; equal values (equal "
    "infinities included) never differ, another non-finite value always does. The first divergence is the "
    "first pair that is structural, non_finite, magnitude or values_moved. Default tolerances: rtol=%g, atol=%g "
    "for every statistic except pos_checksum rtol=%g, atol=%g"
    % (CHECKSUM_NOISE["roundoff_factor"], CHECKSUM_NOISE["evidence_factor"], CHECKSUM_NOISE["moved_row_shift"],
       DEFAULT_RTOL, DEFAULT_ATOL, POS_CHECKSUM_RTOL, POS_CHECKSUM_ATOL))


def dtype_kind(dtype):
    """dtype family: values of different families are not comparable as numbers."""
    if dtype == "bool":
        return "bool"
    if dtype.startswith("float") or dtype.startswith("bfloat"):
        return "floating"
    if dtype.startswith("complex"):
        return "complex"
    return "integer"


def unit_roundoff(dtype):
    """u = 2**-p for a floating dtype with p significand bits; float8 e4m3 2**-4, e5m2 2**-3; 0 otherwise
    (integers and bools are exact; an unknown name is taken as exact)."""
    if dtype in UNIT_ROUNDOFF:
        return UNIT_ROUNDOFF[dtype]
    if dtype.startswith("float8_e4m3"):
        return 2.0 ** -4
    if dtype.startswith("float8_e5m2"):
        return 2.0 ** -3
    return 0.0


def checksum_rows(shape):
    """The rows of pos_checksum's matrix view: the product of all but the last dimension (a 0-d tensor: 1)."""
    return math.prod(shape[:-1]) if len(shape) else 1


def is_empty(record):
    """A record without elements (an empty tensor): nothing to compare, so equal shapes agree."""
    numel = record.get("numel")
    return numel == 0 if numel is not None else 0 in list(record["shape"])


def _number(value):
    """A manifest statistic as a float: a number, None, or one of the strings "nan", "inf", "-inf"."""
    if value is None:
        return None
    if isinstance(value, str):
        return float(value)  # "nan", "inf", "-inf"
    return float(value)


def _fmax(x, y):
    """Rust's f64::max: a NaN operand is ignored."""
    if math.isnan(x):
        return y
    if math.isnan(y):
        return x
    return max(x, y)


def _larger(x, y):
    """The larger absolute value of two optional numbers; one missing: the other's."""
    if x is None and y is None:
        return None
    if x is None or y is None:
        return abs(x if y is None else y)
    return _fmax(abs(x), abs(y))


def _rms(stats):
    finite = stats.get("finite_count")
    l2 = _number(stats.get("l2"))
    if finite is None or finite <= 0 or l2 is None:
        return None
    return l2 / math.sqrt(float(finite))


def _scale(name, sa, sb):
    """The scale statistic ``name`` is compared against (docs/diff.md, "Tolerances")."""
    va, vb = _number(sa.get(name)), _number(sb.get(name))
    if name == "mean":
        return _larger(_rms(sa), _rms(sb))
    if name == "pos_checksum":
        return _larger(_larger(_number(sa.get("l2")), _number(sb.get("l2"))), _larger(va, vb))
    return _larger(va, vb)


def compare_stat(name, sa, sb, rtol, atol):
    """One statistic of two stats objects: dict(name, a, b, abs_diff, rel_diff, bound, exceeds, excluded)."""
    va, vb = _number(sa.get(name)), _number(sb.get(name))
    scale = _scale(name, sa, sb)
    if va is not None and vb is not None and va == vb:  # equal infinities included
        abs_diff, exceeds = 0.0, False
    elif va is not None and vb is not None and math.isfinite(va) and math.isfinite(vb):
        abs_diff = abs(va - vb)
        exceeds = abs_diff > atol + rtol * (0.0 if scale is None else scale)
    elif va is None and vb is None:
        abs_diff, exceeds = None, False
    else:  # one side undefined or non-finite, and not equal
        abs_diff, exceeds = None, True
    if abs_diff is not None and scale is not None and scale > 0.0 and math.isfinite(scale):
        rel_diff = abs_diff / scale
    elif abs_diff == 0.0:
        rel_diff = 0.0
    else:
        rel_diff = None
    bound = atol + rtol * scale if scale is not None and math.isfinite(scale) else None
    return dict(name=name, a=va, b=vb, abs_diff=abs_diff, rel_diff=rel_diff, bound=bound, exceeds=exceeds,
                excluded=None)


def _finite_change(sa, sb, name):
    x, y = _number(sa.get(name)), _number(sb.get(name))
    if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
        return 0.0
    return abs(x - y)


def _finite_rel(sa, sb, name):
    x, y = _number(sa.get(name)), _number(sb.get(name))
    if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)) or max(abs(x), abs(y)) == 0.0:
        return 0.0
    return abs(x - y) / max(abs(x), abs(y))


def noise_evidence(sa, sb, scale):
    """e of the checksum's noise bound (compare.rs `noise_evidence`): the per-element change the magnitude
    statistics show, relative to the checksum's scale, as three estimates of what moves the checksum by about
    e * scale / 3: the change of the sum n * mean and of sqrt(n) * l2 (projections of every element with
    weights of rms 1, as the checksum is one with weights of rms 1/3), and l2 times the largest relative
    change of min or max (a relative rounding of every element). 0 without a common finite_count or a
    positive finite scale."""
    n = sa.get("finite_count")
    if not n or n != sb.get("finite_count") or scale is None or not (scale > 0.0 and math.isfinite(scale)):
        return 0.0
    l2 = [v for v in (_number(sa.get("l2")), _number(sb.get("l2"))) if v is not None and math.isfinite(v)]
    spread = max(l2) * max(_finite_rel(sa, sb, "min"), _finite_rel(sa, sb, "max")) if l2 else 0.0
    return max(n * _finite_change(sa, sb, "mean"), math.sqrt(n) * _finite_change(sa, sb, "l2"), spread) / scale


def _checksum_with_noise(d, ra, rb, sa, sb, rtol, atol, noise):
    """pos_checksum's comparison ``d`` held to the noise bound; adds d["checksum_bound"] (compare.rs
    `ChecksumBound`)."""
    va, vb = d["a"], d["b"]
    if va is None or vb is None or not (math.isfinite(va) and math.isfinite(vb)):
        return d
    scale = _scale("pos_checksum", sa, sb)
    if scale is None or not math.isfinite(scale):
        return d
    u = max(unit_roundoff(ra["dtype"]), unit_roundoff(rb["dtype"]))
    roundoff = noise["roundoff_factor"] * u
    evidence = noise["evidence_factor"] * noise_evidence(sa, sb, scale)
    bound = max(rtol, roundoff, evidence)
    rows = max(checksum_rows(list(ra["shape"])), 1)
    d["checksum_bound"] = dict(rtol=rtol, roundoff=roundoff, evidence=evidence, bound=bound,
                               moved_row=noise["moved_row_shift"] / math.sqrt(rows), rows=rows,
                               beyond_rtol=d["exceeds"])
    d["bound"] = atol + bound * scale
    d["exceeds"] = d["abs_diff"] > d["bound"]
    return d


def _overflowed(name, record, stats, value):
    """A mean, l2 or pos_checksum that is non-finite while max_abs is finite and inside the dtype's range:
    the dump tool's own accumulation overflowed (msprobe reduces a float16 tensor in float16)."""
    if name not in ACCUMULATED_STATS or value is None or math.isfinite(value):
        return False
    top = _number(stats.get("max_abs"))
    return top is not None and math.isfinite(top) and top <= DTYPE_MAX.get(record["dtype"], math.inf)


def _exclusion(name, ra, rb, sa, sb):
    """Why statistic ``name`` is not compared (compare.rs `Exclusion`): "one_side" (recorded on one side only),
    "overflow" (the dump tool's own overflow on a side), or None."""
    va, vb = _number(sa.get(name)), _number(sb.get(name))
    if (va is None) != (vb is None):
        return "one_side"
    if _overflowed(name, ra, sa, va) or _overflowed(name, rb, sb, vb):
        return "overflow"
    return None


def dumpview_compare_records(ra, rb, tolerances=None, noise="default"):
    """(verdict kind, reason or None, [compare_stat dicts]) of two records paired at one stage#occurrence.

    Kinds: agree, structural, not_compared, non_finite, magnitude, values_moved, checksum_inconclusive.
    tolerances maps a statistic to (rtol, atol); None: DEFAULT_TOLERANCES with the checksum's noise bound
    CHECKSUM_NOISE. Explicit tolerances hold the checksum to its own rtol (as `dumpview diff --rtol` does)
    unless ``noise`` (a CHECKSUM_NOISE-like dict) is given."""
    if noise == "default":
        noise = CHECKSUM_NOISE if tolerances is None else None
    tolerances = DEFAULT_TOLERANCES if tolerances is None else tolerances
    kind_a, kind_b = dtype_kind(ra["dtype"]), dtype_kind(rb["dtype"])
    if list(ra["shape"]) != list(rb["shape"]):
        structural = "shape %s vs %s" % (list(ra["shape"]), list(rb["shape"]))
    elif kind_a != kind_b:
        structural = "dtype %s vs %s" % (ra["dtype"], rb["dtype"])
    else:
        structural = None
    sa, sb = ra.get("stats"), rb.get("stats")
    if sa is None or sb is None:
        if structural is not None:
            return "structural", structural, []
        if is_empty(ra) and is_empty(rb):
            return "agree", None, []
        if sa is None and sb is None:
            return "not_compared", "no statistics on either side", []
        return "not_compared", "statistics on side %s only" % ("A" if sa is not None else "B"), []
    stats = []
    for name in VALUE_STATS:
        d = compare_stat(name, sa, sb, *tolerances[name])
        excluded = _exclusion(name, ra, rb, sa, sb)
        if excluded is not None:
            d["excluded"], d["exceeds"] = excluded, False
        elif name == "pos_checksum" and noise is not None:
            d = _checksum_with_noise(d, ra, rb, sa, sb, *tolerances[name], noise)
        stats.append(d)
    magnitude = any(d["exceeds"] for d in stats if d["name"] != "pos_checksum")
    checksum = next(d for d in stats if d["name"] == "pos_checksum")
    if structural is not None:
        return "structural", structural, stats
    if sa["nan_count"] != sb["nan_count"] or sa["inf_count"] != sb["inf_count"]:
        return "non_finite", "nan_count %d vs %d, inf_count %d vs %d" % (
            sa["nan_count"], sb["nan_count"], sa["inf_count"], sb["inf_count"]), stats
    if magnitude:
        return "magnitude", None, stats
    if checksum["exceeds"]:
        return "values_moved", None, stats
    bound = checksum.get("checksum_bound")
    if bound is not None and bound["beyond_rtol"] and bound["bound"] > bound["moved_row"]:
        return "checksum_inconclusive", "pos_checksum moved %.3g of its scale: beyond rtol %g, within the rounding " \
            "bound %.3g, which is above what one moved row of %d shifts (%.3g)" % (
                checksum["rel_diff"], bound["rtol"], bound["bound"], bound["rows"], bound["moved_row"]), stats
    compared = [d for d in stats if d["excluded"] is None and not (d["a"] is None and d["b"] is None)]
    if not compared and not (is_empty(ra) and is_empty(rb)):
        return "not_compared", "no statistic recorded on both sides", stats
    return "agree", None, stats


def dumpview_pairs(a_manifest, b_manifest):
    """(stage#N, record a, record b) in a's capture order (the order of a's records list), as dumpview
    pairs them: a key captured twice pairs once, by its first record on each side."""
    index_b = {}
    for record in b_manifest["records"]:
        index_b.setdefault(key(record), record)
    seen, pairs = set(), []
    for record in a_manifest["records"]:
        k = key(record)
        if k in seen:
            continue
        seen.add(k)
        if k in index_b:
            pairs.append((k, record, index_b[k]))
    return pairs


def dumpview_first_divergence(a_manifest, b_manifest, tolerances=None):
    """Independent Python reference of dumpview diff's first divergence of one window pair: it mirrors
    src/model/analysis/compare.rs (`compare_records`, `Tolerances::default`, `ChecksumNoise::default`)
    and src/model/analysis/diff.rs (`diff_windows`): records pair by (stage, occurrence) in A's capture
    order; the first pair whose verdict diverges (structural, non_finite, magnitude or values_moved, as
    dumpview_compare_records and DUMPVIEW_RULE define them) is the first divergence; agree,
    checksum_inconclusive and not_compared pairs are passed over. Returns (stage#N or None, verdict kind
    ("agree" when nothing diverges), names of the exceeding statistics in report order).
    """
    for k, ra, rb in dumpview_pairs(a_manifest, b_manifest):
        kind, _, stats = dumpview_compare_records(ra, rb, tolerances)
        if kind not in VERDICTS_NOT_DIVERGING:
            return k, kind, [d["name"] for d in stats if d["exceeds"]]
    return None, "agree", []


def divergence_reasons(a_manifest, b_manifest, stage_key, tolerances=None):
    """Human-readable reasons why the pair at stage_key diverges under dumpview's rule (figures for notes)."""
    pairs = {k: (ra, rb) for k, ra, rb in dumpview_pairs(a_manifest, b_manifest)}
    kind, reason, stats = dumpview_compare_records(*pairs[stage_key], tolerances=tolerances)
    reasons = [kind] + ([reason] if reason else [])
    for d in stats:
        if d["exceeds"]:
            reasons.append("%s %s vs %s: |a-b| %s > bound %s (rel %s)" % (
                d["name"], fmt(d["a"]), fmt(d["b"]), fmt(d["abs_diff"]), fmt(d["bound"]), fmt(d["rel_diff"])))
    return reasons


def largest_rel(a, b, stats=VALUE_STATS):
    """(rel, stage#N, stat, value a, value b) of the largest relative difference over paired finite stats."""
    pairs, _, _ = paired(a, b)
    best = (0.0, None, None, None, None)
    for k, ra, rb in pairs:
        for name in stats:
            r = rel_diff(ra["stats"][name], rb["stats"][name])
            if r is not None and r > best[0]:
                best = (r, k, name, ra["stats"][name], rb["stats"][name])
    return best


def write_expected(pair_dir, expected):
    if tuple(expected) != EXPECTED_KEYS:
        raise ValueError("expected.json keys %s" % list(expected))
    with open(os.path.join(pair_dir, "expected.json"), "w") as handle:
        json.dump(expected, handle, indent=1, allow_nan=False)
        handle.write("\n")


def write_readme(pair_dir, text):
    with open(os.path.join(pair_dir, "README.md"), "w") as handle:
        handle.write(text.rstrip() + "\n")


def rel(path, start):
    return os.path.relpath(path, start).replace(os.sep, "/")


def fmt(x):
    if x is None:
        return "null"
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return str(x)
        return "%.4g" % x
    return str(x)
