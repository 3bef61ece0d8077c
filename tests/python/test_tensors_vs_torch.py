"""`dumpview tensors A B --json` against torch's own answers, on tensors written by torch.

Every case is generated at test time (seeded) and saved twice: by torch.save (a zip archive; views
keep their stride and storage_offset, and views of one base share one storage) and by
safetensors.torch.save_file (contiguous copies). The reference for every metric is computed here
with torch in float64, independently of dumpview:

- allclose / mismatches / first_mismatch: torch.isclose / torch.allclose on the float64 values with
  the same rtol, atol, equal_nan; the first mismatch is the first flat (C-order) index of ~isclose;
- max_abs_diff / max_abs_diff_at / mean_abs_diff: |a - b| masked to the positions where both are
  finite; the location is the first flat index attaining the maximum;
- cosine: torch.nn.functional.cosine_similarity of the masked flat float64 vectors (torch clamps
  the norms by eps=1e-8, irrelevant for the non-zero data used here); rel_l2: torch.linalg.norm;
- max_ulp: the sign-magnitude ordering of the bit patterns, ``i = x.view(int).long();
  ord = where(i < 0, -(i & 0x7f..f), i)``, over positions where neither side is NaN, as Python
  integers (float64's +inf vs -inf distance does not fit an int64); max_ulp_at is the first
  position attaining the maximum, also when the maximum is 0 (as max_abs_diff_at);
- histogram: torch.floor(torch.log10(|a - b|)) over finite pairs with a != b.

Exactness: counts, indices, coordinates, dtypes, the values at locations and max_abs_diff (one
float64 subtraction of exactly representable values) must be equal. Sums are float64 in both
programs but in a different order, so mean_abs_diff, rel_l2 and cosine are compared with rel=1e-12
(for n <= 1e5 terms of one sign the reordering error is ~sqrt(n)*eps ~ 1e-13 relative);
cosine also gets abs=1e-12, because its numerator sum(a*b) can cancel: its rounding error is
bounded by ~n*eps*sum|a*b|/(|a||b|) <= n*eps in absolute terms, not relative to the result.

The binary is target/debug/dumpview (like tests/python/test_examples.py), or $DUMPVIEW_BIN.
"""

import json
import math
import os
import struct
import subprocess
import zipfile

import pytest
import torch
import torch.nn.functional as F

safetensors_torch = pytest.importorskip("safetensors.torch")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DUMPVIEW = os.environ.get("DUMPVIEW_BIN") or os.path.join(ROOT, "target", "debug", "dumpview")

REL = 1e-12  # float64 sums in a different order (see the module docstring)
# dumpview's documented defaults (`dumpview tensors --help`): a coarse screen, deliberately looser than
# torch.isclose's rtol=1e-05, atol=1e-08.
DEFAULTS = {"rtol": 1e-02, "atol": 1e-05, "equal_nan": False}

METRIC_KEYS = {
    "dtype_a", "dtype_b", "compared_as", "shape", "numel", "finite_pairs", "max_abs_diff",
    "max_abs_diff_at", "mean_abs_diff", "cosine", "rel_l2", "allclose", "atol", "rtol", "equal_nan",
    "mismatches", "mismatch_fraction", "first_mismatch", "nonfinite", "max_ulp", "max_ulp_at",
    "histogram",
}
NONFINITE_KEYS = {"nan_a", "nan_b", "posinf_a", "posinf_b", "neginf_a", "neginf_b", "positions_agree",
                  "first_disagreement"}

ORD_VIEW = {
    torch.float64: (torch.int64, 0x7FFFFFFFFFFFFFFF),
    torch.float32: (torch.int32, 0x7FFFFFFF),
    torch.float16: (torch.int16, 0x7FFF),
    torch.bfloat16: (torch.int16, 0x7FFF),
}


# ---------------------------------------------------------------------------
# Running the binary.


def _reject_constant(token):
    raise ValueError("non-strict JSON constant %r in dumpview's output" % token)


def run_tensors(a, b, *args):
    if not os.path.isfile(DUMPVIEW):
        pytest.fail("%s is not built: run `cargo build` first" % DUMPVIEW)
    return subprocess.run([DUMPVIEW, "tensors", str(a), str(b)] + [str(x) for x in args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def tensors_json(a, b, *args):
    proc = run_tensors(a, b, "--json", *args)
    assert proc.returncode in (0, 1), (proc.returncode, proc.stderr)
    return proc, json.loads(proc.stdout, parse_constant=_reject_constant)


# ---------------------------------------------------------------------------
# Writing the cases: torch.save keeps views as views; safetensors gets contiguous copies.


def save_both(tmp_path, name, tensors):
    pt = tmp_path / (name + ".pt")
    st = tmp_path / (name + ".safetensors")
    torch.save(tensors, pt)
    safetensors_torch.save_file({k: v.contiguous() for k, v in tensors.items()}, str(st))
    return {"pt": pt, "safetensors": st}


FORMAT_NAME = {"pt": "torch_zip", "safetensors": "safetensors"}


def _gen(seed):
    g = torch.Generator().manual_seed(seed)
    return g


def case_float32_noise():
    g = _gen(1)
    a = torch.randn(300, 257, generator=g)
    b = a + 1e-6 * torch.randn(300, 257, generator=g)
    b[::7] = a[::7]  # exact rows: the histogram's zero bucket
    b[17, 33] = a[17, 33] + 0.5  # one clear outlier
    return {"x": a}, {"x": b}


def case_noncontiguous():
    g = _gen(2)
    base_a = torch.randn(64, 96, generator=g)
    base_b = base_a + 1e-5 * torch.randn(64, 96, generator=g)
    cube_a = torch.randn(5, 6, 7, generator=g)
    cube_b = cube_a * (1 + 1e-6 * torch.randn(5, 6, 7, generator=g))

    def views(base, cube):
        # four views of two storages: transposed, strided slice with a storage offset,
        # permuted 3-d, and a slice of a permutation
        return {
            "t": base.t(),
            "s": base[3:50:2, 5::3],
            "p": cube.permute(2, 0, 1),
            "ps": cube.permute(1, 2, 0)[1:, ::2, 2:],
        }

    a, b = views(base_a, cube_a), views(base_b, cube_b)
    assert not a["t"].is_contiguous() and a["s"].storage_offset() > 0
    return a, b


def case_bfloat16():
    g = _gen(3)
    a32 = torch.randn(128, 200, generator=g)
    a = a32.to(torch.bfloat16)
    b = (a32 + 0.01 * torch.randn(128, 200, generator=g)).to(torch.bfloat16)
    b[0, :50] = -a[0, :50]  # sign flips: ULP distance across zero
    return {"h": a}, {"h": b}


def case_float16():
    g = _gen(4)
    a32 = torch.randn(96, 211, generator=g)
    a32[0, :20] = torch.linspace(-6e-5, 6e-5, 20)  # subnormals and both zeros' neighbourhood
    a32[1, :10] = torch.tensor([65504.0, -65504.0, 60000.0, 1e-7, -1e-7, 0.0, -0.0, 3e-8, 2.0, -2.0])
    a = a32.to(torch.float16)
    b = (a32 * (1 + 1e-3 * torch.randn(96, 211, generator=g))).to(torch.float16)
    b[1, 5] = -0.0  # +0 vs -0 at one place (a[1,5] is +0)
    return {"f": a}, {"f": b}


def case_float64():
    g = _gen(5)
    a = torch.randn(250, 333, generator=g, dtype=torch.float64)
    b = a + 1e-12 * torch.randn(250, 333, generator=g, dtype=torch.float64)
    b[100:] = a[100:]
    b[7, 9] = a[7, 9] * (1 + 1e-3)
    return {"d": a}, {"d": b}


def case_int32():
    g = _gen(6)
    a = torch.randint(-1000, 1000, (120, 77), generator=g, dtype=torch.int32)
    b = a.clone()
    idx = torch.randint(0, a.numel(), (40,), generator=g)
    b.view(-1)[idx] += torch.randint(1, 5, (40,), generator=g, dtype=torch.int32)
    return {"i": a}, {"i": b}


def case_nonfinite():
    g = _gen(7)
    shape = (60, 70)
    a_same = torch.randn(*shape, generator=g)
    b_same = a_same + 1e-6 * torch.randn(*shape, generator=g)
    nan_pos = torch.rand(*shape, generator=g) < 0.05
    a_same[nan_pos] = float("nan")
    b_same[nan_pos] = float("nan")

    a_diff = torch.randn(*shape, generator=g)
    b_diff = a_diff.clone()
    a_diff[torch.rand(*shape, generator=g) < 0.03] = float("nan")
    b_diff[torch.rand(*shape, generator=g) < 0.03] = float("nan")

    a_inf = torch.randn(*shape, generator=g)
    b_inf = a_inf.clone()
    a_inf[3, 4] = float("inf")  # +inf vs finite
    a_inf[10, :5] = float("-inf")  # -inf on both sides
    b_inf[10, :5] = float("-inf")
    a_inf[20, 1] = float("inf")  # +inf vs -inf
    b_inf[20, 1] = float("-inf")
    b_inf[30, 2] = float("inf")  # finite vs +inf
    a_inf[40, 3] = float("nan")  # nan vs +inf
    b_inf[40, 3] = float("inf")

    # float64 +inf vs -inf: the ULP distance (2 * 0x7ff0000000000000) exceeds an int64
    a_wide = torch.randn(8, 9, generator=g, dtype=torch.float64)
    b_wide = a_wide.clone()
    a_wide[2, 2] = float("inf")
    b_wide[2, 2] = float("-inf")
    b_wide[5, 5] = float("nan")
    return ({"nan_same": a_same, "nan_diff": a_diff, "inf": a_inf, "wide": a_wide},
            {"nan_same": b_same, "nan_diff": b_diff, "inf": b_inf, "wide": b_wide})


def case_keys_and_shapes():
    g = _gen(8)
    w = torch.randn(40, 30, generator=g)
    bias = torch.randn(30, generator=g)
    a = {"w": w, "bias": bias, "only_in_a": torch.randn(5, generator=g), "reshaped": torch.randn(6, 4, generator=g)}
    b = {"w": w * (1 + 1e-7), "bias": bias.clone(), "reshaped": torch.randn(4, 6, generator=g),
         "only_in_b": torch.ones(3)}
    return a, b


def case_exact():
    g = _gen(9)
    x = torch.randn(50, 60, generator=g)
    zeros_a = torch.zeros(16)
    zeros_b = torch.zeros(16)
    zeros_b[::2] = -0.0  # equal values, different bits
    a = {"x": x, "h": x.to(torch.bfloat16), "scalar": torch.tensor(3.25), "signed_zero": zeros_a,
         "n": torch.arange(12, dtype=torch.int32).reshape(3, 4)}
    b = {k: v.clone() for k, v in a.items()}
    b["signed_zero"] = zeros_b
    return a, b


CASES = {
    "float32_noise": (case_float32_noise, {"atol": 1e-6, "rtol": 1e-5}),
    "noncontiguous": (case_noncontiguous, {"atol": 1e-5, "rtol": 1e-4}),
    "bfloat16": (case_bfloat16, {"atol": 1e-2, "rtol": 1e-2}),
    "float16": (case_float16, {"atol": 1e-4, "rtol": 1e-3}),
    "float64": (case_float64, {"atol": 1e-11, "rtol": 1e-9}),
    "int32": (case_int32, {"atol": 1, "rtol": 0}),
    "nonfinite": (case_nonfinite, {"atol": 1e-5, "rtol": 1e-5, "equal_nan": True}),
    "keys_and_shapes": (case_keys_and_shapes, {"atol": 1e-6, "rtol": 0}),
    "exact": (case_exact, {"atol": 0, "rtol": 0}),
}


# ---------------------------------------------------------------------------
# The reference, with torch in float64.


def _value(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _location(flat_index, shape, af, bf):
    coords = []
    rest = flat_index
    for size in reversed(shape):
        coords.append(rest % size)
        rest //= size
    return {"index": flat_index, "coords": coords[::-1], "a": _value(float(af[flat_index])),
            "b": _value(float(bf[flat_index]))}


def _first(mask):
    hits = torch.nonzero(mask).reshape(-1)
    return int(hits[0]) if hits.numel() else None


def _classes(x):
    c = torch.zeros(x.shape, dtype=torch.int8)
    c[torch.isnan(x)] = 1
    c[x == float("inf")] = 2
    c[x == float("-inf")] = 3
    return c


def _ord(t):
    int_dtype, mask = ORD_VIEW[t.dtype]
    i = t.contiguous().reshape(-1).view(int_dtype).long()
    return torch.where(i < 0, -(i & mask), i)


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


MANTISSA_DIGITS = {torch.float64: 53, torch.float32: 24, torch.float16: 11, torch.bfloat16: 8}


def ulp_dtype_of(*dtypes):
    """docs/tensors.md: ULPs are counted in the coarsest floating dtype of both sides and the cast."""
    floats = [d for d in dtypes if d in MANTISSA_DIGITS]
    return min(floats, key=MANTISSA_DIGITS.get) if floats else None


def reference_metrics(a, b, atol, rtol, equal_nan, cast=None):
    ulp = ulp_dtype_of(a.dtype, b.dtype, *([cast] if cast is not None else []))
    if cast is not None:
        compared = cast
    elif a.dtype == b.dtype:
        compared = a.dtype
    else:
        compared = torch.float64  # a precision change is compared as it is: losslessly
    a, b = a.to(compared), b.to(compared)
    shape = list(a.shape)
    af = a.detach().contiguous().reshape(-1).to(torch.float64)
    bf = b.detach().contiguous().reshape(-1).to(torch.float64)
    n = af.numel()
    fin = torch.isfinite(af) & torch.isfinite(bf)
    n_fin = int(fin.sum())
    d = (af - bf).abs()
    out = {"compared_as": dtype_name(compared), "shape": shape, "numel": n, "finite_pairs": n_fin,
           "atol": atol, "rtol": rtol, "equal_nan": equal_nan}
    if n_fin:
        dm = d[fin]
        mx = float(dm.max())
        out["max_abs_diff"] = mx
        out["max_abs_diff_at"] = _location(_first(fin & (d == mx)), shape, af, bf)
        out["mean_abs_diff"] = float(dm.sum()) / n_fin
    else:
        out["max_abs_diff"] = out["max_abs_diff_at"] = out["mean_abs_diff"] = None
    av, bv = af[fin], bf[fin]
    na, nb = float(torch.linalg.norm(av)), float(torch.linalg.norm(bv))
    out["cosine"] = float(F.cosine_similarity(av, bv, dim=0)) if na > 0 and nb > 0 else None
    out["rel_l2"] = float(torch.linalg.norm(av - bv)) / nb if nb > 0 else None

    close = torch.isclose(af, bf, rtol=rtol, atol=atol, equal_nan=equal_nan)
    mismatches = int((~close).sum())
    out["allclose"] = bool(torch.allclose(af, bf, rtol=rtol, atol=atol, equal_nan=equal_nan))
    assert out["allclose"] == (mismatches == 0)
    out["mismatches"] = mismatches
    out["mismatch_fraction"] = mismatches / n if n else 0.0
    first = _first(~close)
    out["first_mismatch"] = None if first is None else _location(first, shape, af, bf)

    ca, cb = _classes(af), _classes(bf)
    dis = _first(ca != cb)
    out["nonfinite"] = {
        "nan_a": int(torch.isnan(af).sum()), "nan_b": int(torch.isnan(bf).sum()),
        "posinf_a": int((af == float("inf")).sum()), "posinf_b": int((bf == float("inf")).sum()),
        "neginf_a": int((af == float("-inf")).sum()), "neginf_b": int((bf == float("-inf")).sum()),
        "positions_agree": dis is None,
        "first_disagreement": None if dis is None else _location(dis, shape, af, bf),
    }

    out["ulp_dtype"] = dtype_name(ulp) if ulp is not None and compared in ORD_VIEW else None
    if compared in ORD_VIEW:
        keep = (~torch.isnan(af)) & (~torch.isnan(bf))
        # both values rounded to the ULP dtype first (from the compared values)
        oa, ob = _ord(a.to(ulp)).tolist(), _ord(b.to(ulp)).tolist()
        best, at = None, None
        for i in torch.nonzero(keep).reshape(-1).tolist():
            u = abs(oa[i] - ob[i])  # Python ints: exact beyond int64
            if best is None or u > best:
                best, at = u, i
        out["max_ulp"] = best
        out["max_ulp_at"] = None if at is None else _location(at, shape, af, bf)
    else:
        out["max_ulp"] = out["max_ulp_at"] = None

    nz = fin & (d > 0)
    decades = torch.floor(torch.log10(d[nz])).to(torch.int64)
    values, counts = torch.unique(decades, sorted=True, return_counts=True)
    out["histogram"] = {
        "zero": int((fin & (af == bf)).sum()),
        "decades": [{"decade": int(e), "count": int(c)} for e, c in zip(values.tolist(), counts.tolist())],
        "nonfinite": n - n_fin,
    }
    return out


# ---------------------------------------------------------------------------
# Comparing dumpview's answer with the reference.


def _same_value(actual, expected):
    if isinstance(expected, str):
        return actual == expected
    return isinstance(actual, (int, float)) and not isinstance(actual, bool) and float(actual) == expected


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def location_problems(actual, expected, what):
    if expected is None or actual is None:
        return [] if actual is expected else ["%s: dumpview %r, torch %r" % (what, actual, expected)]
    same = (actual.get("index") == expected["index"] and actual.get("coords") == expected["coords"]
            and _same_value(actual.get("a"), expected["a"]) and _same_value(actual.get("b"), expected["b"]))
    return [] if same else ["%s: dumpview %r, torch %r" % (what, actual, expected)]


def float_problems(actual, expected, what, rel=REL, abs_=0.0):
    if expected is None or actual is None:
        return [] if actual is expected else ["%s: dumpview %r, torch %r" % (what, actual, expected)]
    if not _is_number(actual) or actual != pytest.approx(expected, rel=rel, abs=abs_):
        return ["%s: dumpview %r, torch %r (rel=%g, abs=%g)" % (what, actual, expected, rel, abs_)]
    return []


def metric_problems(actual, expected, dtype_a, dtype_b):
    """Every field of one pair's metrics that differs from the reference, in words."""
    missing = METRIC_KEYS - set(actual)
    if missing:
        return ["missing metric fields %s" % sorted(missing)]
    out = []

    def exact(name, got, want, kind=None):
        if got != want or (kind == "int" and not _is_int(got)) or (kind == "bool" and not isinstance(got, bool)):
            out.append("%s: dumpview %r, torch %r" % (name, got, want))

    exact("dtype_a", actual["dtype_a"], dtype_name(dtype_a))
    exact("dtype_b", actual["dtype_b"], dtype_name(dtype_b))
    exact("compared_as", actual["compared_as"], expected["compared_as"])
    exact("shape", actual["shape"], expected["shape"])
    for name in ("numel", "finite_pairs", "mismatches"):
        exact(name, actual[name], expected[name], "int")
    for name in ("allclose", "equal_nan"):
        exact(name, actual[name], expected[name], "bool")
    exact("atol", actual["atol"], expected["atol"])
    exact("rtol", actual["rtol"], expected["rtol"])
    # one float64 subtraction of exactly representable values: exact
    out += float_problems(actual["max_abs_diff"], expected["max_abs_diff"], "max_abs_diff", rel=0)
    out += location_problems(actual["max_abs_diff_at"], expected["max_abs_diff_at"], "max_abs_diff_at")
    out += float_problems(actual["mean_abs_diff"], expected["mean_abs_diff"], "mean_abs_diff")
    out += float_problems(actual["rel_l2"], expected["rel_l2"], "rel_l2")
    out += float_problems(actual["cosine"], expected["cosine"], "cosine", abs_=REL)
    # one division of the same two integers: exact
    out += float_problems(actual["mismatch_fraction"], expected["mismatch_fraction"], "mismatch_fraction", rel=0)
    out += location_problems(actual["first_mismatch"], expected["first_mismatch"], "first_mismatch")

    nf, enf = actual["nonfinite"], expected["nonfinite"]
    if not NONFINITE_KEYS <= set(nf):
        out.append("nonfinite fields: %s" % sorted(nf))
    else:
        for name in ("nan_a", "nan_b", "posinf_a", "posinf_b", "neginf_a", "neginf_b"):
            exact("nonfinite." + name, nf[name], enf[name], "int")
        exact("nonfinite.positions_agree", nf["positions_agree"], enf["positions_agree"], "bool")
        out += location_problems(nf["first_disagreement"], enf["first_disagreement"], "nonfinite.first_disagreement")

    exact("max_ulp", actual["max_ulp"], expected["max_ulp"], None if expected["max_ulp"] is None else "int")
    out += location_problems(actual["max_ulp_at"], expected["max_ulp_at"], "max_ulp_at")
    if "ulp_dtype" in actual:  # docs/tensors.md: the coarsest floating dtype of both sides and the cast
        want = expected["ulp_dtype"] if expected["max_ulp"] is not None else None
        exact("ulp_dtype", actual["ulp_dtype"], want)

    h, eh = actual["histogram"], expected["histogram"]
    for name in ("zero", "nonfinite"):
        exact("histogram." + name, h.get(name), eh[name], "int")
    exact("histogram.decades", h.get("decades"), eh["decades"])
    return out


def assert_metrics(actual, expected, dtype_a, dtype_b, key):
    problems = metric_problems(actual, expected, dtype_a, dtype_b)
    assert not problems, "%s:\n  %s" % (key, "\n  ".join(problems))


def check_report(report, tensors_a, tensors_b, paths, fmt, atol, rtol, equal_nan):
    """Every field of one `--json` report against the reference of every key."""
    assert report["a"]["path"] == str(paths[0]) and report["b"]["path"] == str(paths[1])
    assert report["a"]["format"] == report["b"]["format"] == FORMAT_NAME[fmt]
    assert report["a"]["tensors"] == len(tensors_a) and report["b"]["tensors"] == len(tensors_b)
    opts = report["options"]
    assert (opts["atol"], opts["rtol"], opts["equal_nan"], opts["cast"]) == (atol, rtol, equal_nan, None)
    assert sorted(report["only_a"]) == sorted(set(tensors_a) - set(tensors_b))
    assert sorted(report["only_b"]) == sorted(set(tensors_b) - set(tensors_a))
    pairs = {p["key"]: p for p in report["pairs"]}
    assert len(pairs) == len(report["pairs"]), "a key paired twice"
    assert sorted(pairs) == sorted(set(tensors_a) & set(tensors_b))
    every_close = True
    problems = []
    for key, pair in pairs.items():
        a, b = tensors_a[key], tensors_b[key]
        if a.shape != b.shape:
            assert "metrics" not in pair and isinstance(pair.get("error"), str), (key, pair)
            assert "shape" in pair["error"].lower(), (key, pair["error"])
            every_close = False
            continue
        assert "error" not in pair, (key, pair)
        expected = reference_metrics(a, b, atol, rtol, equal_nan)
        problems += ["%s: %s" % (key, p) for p in metric_problems(pair["metrics"], expected, a.dtype, b.dtype)]
        every_close &= expected["allclose"]
    assert not problems, "dumpview differs from torch:\n  " + "\n  ".join(problems)
    matched = not report["only_a"] and not report["only_b"]
    assert report["all_close"] == every_close, (report["all_close"], every_close)
    return every_close and matched


# ---------------------------------------------------------------------------
# Tests.


@pytest.mark.parametrize("fmt", ["pt", "safetensors"])
@pytest.mark.parametrize("tolerances", ["explicit", "defaults"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_metrics_equal_torch(tmp_path, case, tolerances, fmt):
    make, explicit = CASES[case]
    tensors_a, tensors_b = make()
    files_a = save_both(tmp_path, "a", tensors_a)
    files_b = save_both(tmp_path, "b", tensors_b)
    paths = (files_a[fmt], files_b[fmt])
    if tolerances == "explicit":
        opts = {"atol": float(explicit["atol"]), "rtol": float(explicit["rtol"]),
                "equal_nan": explicit.get("equal_nan", False)}
        args = ["--atol", repr(opts["atol"]), "--rtol", repr(opts["rtol"])]
        if opts["equal_nan"]:
            args.append("--equal-nan")
    else:
        opts, args = dict(DEFAULTS), []
    proc, report = tensors_json(paths[0], paths[1], *args)
    ok = check_report(report, tensors_a, tensors_b, paths, fmt, opts["atol"], opts["rtol"], opts["equal_nan"])
    assert proc.returncode == (0 if ok else 1), (proc.returncode, ok, proc.stderr)


def test_pt_and_safetensors_give_the_same_answer(tmp_path):
    """The .pt copy keeps the views (shared storage, offsets, strides); the answer is the same."""
    tensors_a, tensors_b = case_noncontiguous()
    fa, fb = save_both(tmp_path, "a", tensors_a), save_both(tmp_path, "b", tensors_b)
    saved = torch.load(fa["pt"], weights_only=True)  # our own file: the layout really is kept
    for key, view in tensors_a.items():
        assert saved[key].stride() == view.stride() and saved[key].storage_offset() == view.storage_offset()
    assert saved["t"].untyped_storage().data_ptr() == saved["s"].untyped_storage().data_ptr()
    _, from_pt = tensors_json(fa["pt"], fb["pt"])
    _, from_st = tensors_json(fa["safetensors"], fb["safetensors"])
    # pair order may follow each file's save order (safetensors sorts its header); compare by key.
    # Everything is equal except the float64 sums: dumpview sums contiguous data in several lanes
    # and strided views in one, so mean_abs_diff / cosine / rel_l2 may differ in the last digits.
    by_key_pt = {p["key"]: p["metrics"] for p in from_pt["pairs"]}
    by_key_st = {p["key"]: p["metrics"] for p in from_st["pairs"]}
    assert sorted(by_key_pt) == sorted(by_key_st) == sorted(tensors_a)
    sums = ("mean_abs_diff", "cosine", "rel_l2")
    for key, m_pt in by_key_pt.items():
        m_st = by_key_st[key]
        assert {k: v for k, v in m_pt.items() if k not in sums} == {k: v for k, v in m_st.items() if k not in sums}, key
        for name in sums:
            assert m_pt[name] == pytest.approx(m_st[name], rel=REL), (key, name, m_pt[name], m_st[name])
    assert from_pt["all_close"] == from_st["all_close"]


@pytest.mark.parametrize("fmt", ["pt", "safetensors"])
def test_key_selects_one_pair(tmp_path, fmt):
    tensors_a, tensors_b = case_keys_and_shapes()
    fa, fb = save_both(tmp_path, "a", tensors_a)[fmt], save_both(tmp_path, "b", tensors_b)[fmt]
    _, full = tensors_json(fa, fb)
    proc, one = tensors_json(fa, fb, "--key", "w")
    assert [p["key"] for p in one["pairs"]] == ["w"]
    assert one["pairs"][0] == next(p for p in full["pairs"] if p["key"] == "w")
    expected = reference_metrics(tensors_a["w"], tensors_b["w"], **DEFAULTS)
    assert_metrics(one["pairs"][0]["metrics"], expected, torch.float32, torch.float32, "w")
    # w + 1e-7 is within the default tolerances; the keys missing from one side are not asked for
    assert one["all_close"] is True and proc.returncode == 0, (one["only_a"], one["only_b"], proc.returncode)


def _mixed_pair():
    g = _gen(10)
    a = torch.randn(70, 90, generator=g)
    a[0, :4] = torch.tensor([1e-40, -3e38, 3.4e38, float("nan")])  # subnormal, near-max, rounds to inf in bf16
    b = (a + 1e-3 * torch.randn(70, 90, generator=g)).to(torch.bfloat16)
    b[0, :4] = torch.tensor([0.0, -3e38, float("inf"), float("nan")]).to(torch.bfloat16)
    return {"m": a}, {"m": b}


@pytest.mark.parametrize("fmt", ["pt", "safetensors"])
@pytest.mark.parametrize("cast", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_cast_rounds_both_sides_then_compares(tmp_path, fmt, cast):
    """--cast T: both sides rounded to T (torch's .to(T), round to nearest even), compared in float64."""
    tensors_a, tensors_b = _mixed_pair()
    fa, fb = save_both(tmp_path, "a", tensors_a)[fmt], save_both(tmp_path, "b", tensors_b)[fmt]
    name = dtype_name(cast)
    proc, report = tensors_json(fa, fb, "--cast", name, "--atol", "0.01", "--rtol", "0.01", "--equal-nan")
    assert report["options"]["cast"] == name
    (pair,) = report["pairs"]
    expected = reference_metrics(tensors_a["m"], tensors_b["m"], 0.01, 0.01, True, cast=cast)
    assert_metrics(pair["metrics"], expected, torch.float32, torch.bfloat16, "m as %s" % name)
    assert proc.returncode == (0 if expected["allclose"] else 1)


@pytest.mark.parametrize("fmt", ["pt", "safetensors"])
def test_mixed_dtypes_without_cast_compare_losslessly_in_float64(tmp_path, fmt):
    """No --cast: float32 vs bfloat16 is compared as float64 (nothing rounded), ULPs in bfloat16,
    exactly as `--cast float64` and as the workbench's and the report's comparisons."""
    tensors_a, tensors_b = _mixed_pair()
    fa, fb = save_both(tmp_path, "a", tensors_a)[fmt], save_both(tmp_path, "b", tensors_b)[fmt]
    proc, report = tensors_json(fa, fb)
    (pair,) = report["pairs"]
    expected = reference_metrics(tensors_a["m"], tensors_b["m"], **DEFAULTS)
    assert expected["compared_as"] == "float64" and expected["ulp_dtype"] == "bfloat16"
    assert_metrics(pair["metrics"], expected, torch.float32, torch.bfloat16, "m lossless")
    _, cast64 = tensors_json(fa, fb, "--cast", "float64")
    assert cast64["pairs"][0]["metrics"]["max_ulp"] == pair["metrics"]["max_ulp"]
    assert proc.returncode == (0 if expected["allclose"] else 1)


@pytest.mark.parametrize("fmt", ["pt", "safetensors"])
def test_int64_against_another_dtype_needs_a_cast(tmp_path, fmt):
    tensors_a = {"m": torch.arange(12, dtype=torch.int64)}
    tensors_b = {"m": torch.arange(12, dtype=torch.float32)}
    fa, fb = save_both(tmp_path, "a", tensors_a)[fmt], save_both(tmp_path, "b", tensors_b)[fmt]
    proc, report = tensors_json(fa, fb)
    (pair,) = report["pairs"]
    assert "metrics" not in pair and "--cast" in pair["error"], pair
    assert report["all_close"] is False and proc.returncode == 1


def test_cast_float32_of_bfloat16_is_exact(tmp_path):
    """bfloat16 -> float32 is exact: --cast float32 must equal comparing b.float() with a."""
    tensors_a, tensors_b = _mixed_pair()
    fa, fb = save_both(tmp_path, "a", tensors_a)["safetensors"], save_both(tmp_path, "b", tensors_b)["safetensors"]
    _, report = tensors_json(fa, fb, "--cast", "float32")
    expected = reference_metrics(tensors_a["m"], tensors_b["m"].float(), **DEFAULTS)
    # ULPs are still counted in the coarser dtype of the files (bfloat16), not the cast's
    in_bf16 = reference_metrics(tensors_a["m"], tensors_b["m"], cast=torch.float32, **DEFAULTS)
    for key in ("max_ulp", "max_ulp_at", "ulp_dtype"):
        expected[key] = in_bf16[key]
    assert expected["ulp_dtype"] == "bfloat16"
    assert_metrics(report["pairs"][0]["metrics"], expected, torch.float32, torch.bfloat16, "m")


def test_default_options(tmp_path):
    tensors_a, tensors_b = case_exact()
    fa, fb = save_both(tmp_path, "a", tensors_a)["safetensors"], save_both(tmp_path, "b", tensors_b)["safetensors"]
    proc, report = tensors_json(fa, fb)
    assert report["options"] == dict(DEFAULTS, cast=None)
    assert report["all_close"] is True and proc.returncode == 0


def test_text_output_and_exit_status(tmp_path):
    tensors_a, tensors_b = case_keys_and_shapes()
    fa, fb = save_both(tmp_path, "a", tensors_a)["pt"], save_both(tmp_path, "b", tensors_b)["pt"]
    proc = run_tensors(fa, fb)
    assert proc.returncode == 1, proc.stderr
    for key in ("only_in_a", "only_in_b", "reshaped", "w"):
        assert key in proc.stdout, key
    same = save_both(tmp_path, "c", tensors_a)["pt"]
    assert run_tensors(fa, same).returncode == 0


# ---------------------------------------------------------------------------
# Hostile and unreadable input. The pickles are hand-built bytes; nothing here unpickles them.


def _zip_pt(path, pickle_bytes):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle_bytes)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")
        z.writestr("archive/.data/serialization_id", "0" * 40)


def _binunicode(text):
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _short_binunicode(text):
    raw = text.encode()
    return b"\x8c" + bytes([len(raw)]) + raw


def _evil_pickles(command):
    # protocol 2: GLOBAL 'posix system', the argument, TUPLE1, REDUCE, STOP
    global_posix = b"\x80\x02" + b"cposix\nsystem\n" + _binunicode(command) + b"\x85R."
    # protocol 4: STACK_GLOBAL of 'os' 'system'
    stack_global = (b"\x80\x04" + _short_binunicode("os") + _short_binunicode("system") + b"\x93"
                    + _binunicode(command) + b"\x85R.")
    # inside a dict, as a value next to a key: EMPTY_DICT MARK key GLOBAL arg TUPLE1 REDUCE SETITEMS
    in_dict = (b"\x80\x02}(" + _binunicode("weight") + b"cposix\nsystem\n" + _binunicode(command)
               + b"\x85Ru.")
    return {"global_posix_system": global_posix, "stack_global_os_system": stack_global,
            "in_dict": in_dict}


@pytest.mark.parametrize("variant", ["global_posix_system", "stack_global_os_system", "in_dict"])
def test_malicious_pickle_is_refused(tmp_path, variant):
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.pt"
    _zip_pt(evil, _evil_pickles("touch %s" % marker)[variant])
    good = save_both(tmp_path, "good", {"weight": torch.ones(2)})["pt"]
    for args in ((evil, good), (good, evil)):
        for extra in ((), ("--json",)):
            proc = run_tensors(args[0], args[1], *extra)
            assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
            assert "refused pickle global" in proc.stderr, proc.stderr
            assert "system" in proc.stderr, proc.stderr
            assert not marker.exists(), "the pickle's command ran"


def test_unreadable_inputs_exit_2(tmp_path):
    good = save_both(tmp_path, "good", {"x": torch.ones(3)})
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"not a tensor file at all")
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good["pt"].read_bytes()[:200])
    for bad in (garbage, truncated, tmp_path / "missing.pt"):
        proc = run_tensors(bad, good["safetensors"], "--json")
        assert proc.returncode == 2, (bad, proc.returncode, proc.stderr)
        assert str(bad.name) in proc.stderr, proc.stderr
