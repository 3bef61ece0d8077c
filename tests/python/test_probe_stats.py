"""Every statistic against an independent float64 reference, across dtypes, values and views."""

import math

import pytest
import torch

from conftest import (
    COL_MUL, HASH_MUL, STAT_KEYS, TWO_32, assert_stats_match, capture_one, load_manifest, position_weights,
    reference_stats,
)


def _gen(seed):
    g = torch.Generator().manual_seed(seed)
    return g


def _float_tensor(dtype, shape=(7, 5), seed=0, scale=3.0):
    return (torch.randn(shape, generator=_gen(seed), dtype=torch.float32) * scale).to(dtype)


def test_weight_definition_spelled_out():
    """The documented position weights, spelled out for a [2, 3] tensor (checks the reference)."""
    w = position_weights([2, 3])
    u = [2654435761 / 2**32, (2 * 2654435761 - 2**32) / 2**32]
    v = [2246822519 / 2**32, (2 * 2246822519 - 2**32) / 2**32, (3 * 2246822519 - 2**32) / 2**32]
    assert w == [u[r] * v[c] for r in range(2) for c in range(3)]
    assert all(0.0 < x < 1.0 for x in w)
    assert position_weights([]) == [u[0] * v[0]]  # 0-d: a [1, 1] matrix


def test_checksum_matches_documented_formula_on_3d(probe):
    """[2, 3, 4] is a [6, 4] matrix: rows are the flattened leading dimensions."""
    t = torch.arange(24, dtype=torch.float64).reshape(2, 3, 4) - 11.5
    _m, rec = capture_one(probe, t)
    expected = math.fsum(
        float(t[i, j, c]) * (((3 * i + j + 1) * HASH_MUL % 2**32) / 2**32) * (((c + 1) * COL_MUL % 2**32) / 2**32)
        for i in range(2) for j in range(3) for c in range(4)
    )
    assert rec["stats"]["pos_checksum"] == pytest.approx(expected, rel=1e-12)


CASES = {
    "float32_random": lambda: _float_tensor(torch.float32, (9, 11), seed=1),
    "float16_random": lambda: _float_tensor(torch.float16, (6, 7), seed=2),
    "bfloat16_random": lambda: _float_tensor(torch.bfloat16, (5, 13), seed=3),
    "float64_random": lambda: _float_tensor(torch.float64, (4, 4), seed=4),
    "float32_3d": lambda: _float_tensor(torch.float32, (2, 3, 4), seed=5),
    "float32_large_magnitude": lambda: _float_tensor(torch.float32, (3, 3), seed=6, scale=1e30),
    "bfloat16_large_magnitude": lambda: _float_tensor(torch.bfloat16, (4, 5), seed=61, scale=1e25),
    "float16_extremes": lambda: torch.tensor([65504.0, -65504.0, 6e-8, -0.0, 0.0], dtype=torch.float16),
    "int32": lambda: torch.randint(-1000, 1000, (6, 5), generator=_gen(7), dtype=torch.int32),
    "int64": lambda: torch.randint(-(2**40), 2**40, (4, 6), generator=_gen(8), dtype=torch.int64),
    "uint8": lambda: torch.randint(0, 256, (3, 8), generator=_gen(9), dtype=torch.uint8),
    "int8_negative": lambda: torch.tensor([-128, -1, 0, 127], dtype=torch.int8),
    "bool": lambda: torch.tensor([[True, False, True], [False, False, True]]),
    "bool_all_false": lambda: torch.zeros(4, dtype=torch.bool),
    "scalar_0d": lambda: torch.tensor(-2.5),
    "scalar_0d_int": lambda: torch.tensor(42),
    "single_element": lambda: torch.tensor([[3.25]]),
    "all_zero": lambda: torch.zeros(3, 4),
    "constant_negative": lambda: torch.full((5,), -7.0),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_stats_match_float64_reference(probe, name):
    t = CASES[name]()
    _manifest, rec = capture_one(probe, t)
    assert rec["dtype"] == str(t.dtype).replace("torch.", "")
    assert_stats_match(rec["stats"], reference_stats(t))


def test_stats_explicit_values_small_float():
    """Hand-computed values, so the reference itself is checked too."""
    t = torch.tensor([1.0, -2.0, 4.0])
    w = position_weights([3])
    ref = reference_stats(t)
    assert {k: v for k, v in ref.items() if not k.startswith("_")} == {
        "nan_count": 0, "inf_count": 0, "finite_count": 3,
        "min": -2.0, "max": 4.0, "max_abs": 4.0, "mean": 1.0,
        "l2": math.sqrt(21.0), "pos_checksum": pytest.approx(1.0 * w[0] - 2.0 * w[1] + 4.0 * w[2], rel=1e-15),
    }


def test_stats_explicit_values_from_probe(probe):
    _m, rec = capture_one(probe, torch.tensor([1.0, -2.0, 4.0]))
    s = rec["stats"]
    assert (s["nan_count"], s["inf_count"], s["finite_count"]) == (0, 0, 3)
    assert (s["min"], s["max"], s["max_abs"], s["mean"]) == (-2.0, 4.0, 4.0, 1.0)
    assert s["l2"] == pytest.approx(math.sqrt(21.0), rel=1e-7)
    w = position_weights([3])
    assert s["pos_checksum"] == pytest.approx(1.0 * w[0] - 2.0 * w[1] + 4.0 * w[2], rel=1e-6)


def test_max_abs_comes_from_negative_side(probe):
    _m, rec = capture_one(probe, torch.tensor([[-9.5, 2.0], [3.0, 1.0]]))
    assert rec["stats"]["max_abs"] == 9.5
    assert rec["stats"]["min"] == -9.5


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_nonfinite_values_are_counted_and_excluded(probe, dtype):
    t = _float_tensor(dtype, (6, 6), seed=11)
    flat = t.view(-1)
    flat[3] = float("nan")
    flat[10] = float("nan")
    flat[17] = float("inf")
    flat[20] = float("-inf")
    flat[21] = float("-inf")
    _m, rec = capture_one(probe, t)
    s = rec["stats"]
    assert (s["nan_count"], s["inf_count"], s["finite_count"]) == (2, 3, 31)
    assert_stats_match(s, reference_stats(t))
    # non-finite values excluded: the same statistics as the finite values with zeros in their places
    finite = torch.where(torch.isfinite(t), t, torch.zeros((), dtype=dtype))
    ref0 = reference_stats(finite)
    eps = ref0["_eps"]
    assert s["l2"] == pytest.approx(ref0["l2"], rel=eps)
    assert s["pos_checksum"] == pytest.approx(ref0["pos_checksum"], rel=eps, abs=eps * ref0["_abs_sum"])
    assert s["mean"] == pytest.approx(ref0["_abs_sum"] * 0 + math.fsum(finite.double().view(-1).tolist()) / 31,
                                      rel=eps, abs=eps * ref0["_abs_sum"] / 31)


@pytest.mark.parametrize(
    "values,nan,inf",
    [
        ([float("nan")] * 5, 5, 0),
        ([float("inf"), float("-inf")], 0, 2),
        ([float("nan"), float("inf"), float("nan")], 2, 1),
    ],
)
def test_no_finite_values_gives_null_extrema(probe, values, nan, inf):
    t = torch.tensor(values, dtype=torch.float32)
    _m, rec = capture_one(probe, t)
    s = rec["stats"]
    assert s == {
        "nan_count": nan, "inf_count": inf, "finite_count": 0,
        "max_abs": None, "min": None, "max": None, "mean": None,
        "l2": 0.0, "pos_checksum": 0.0,
    }
    assert_stats_match(s, reference_stats(t))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("shape", [(0,), (0, 5), (3, 0, 2)])
def test_empty_tensor_has_null_stats(probe, dtype, shape):
    t = torch.empty(shape, dtype=dtype)
    _m, rec = capture_one(probe, t)
    assert rec["stats"] is None
    assert rec["numel"] == 0
    assert rec["shape"] == list(shape)


def test_complex_tensor_has_null_stats(probe):
    _m, rec = capture_one(probe, torch.ones(3, dtype=torch.complex64))
    assert rec["stats"] is None


VIEWS = {
    "transpose": lambda base: base.t(),
    "strided_slice": lambda base: base[1::2, ::3],
    "column": lambda base: base[:, 2],
    "offset_row_slice": lambda base: base[3:6],
    "expand": lambda base: base[:1, :4].expand(5, 4),
    "expand_new_dim": lambda base: base[2].unsqueeze(0).expand(3, -1),
    "permute_3d": lambda base: base.reshape(2, 4, 9).permute(2, 0, 1),
    "diagonal": lambda base: base[:8, :8].diagonal(),
    "as_strided_overlap": lambda base: base.reshape(-1).as_strided((5, 4), (2, 1), 3),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_noncontiguous_views_use_logical_order(probe, name, dtype):
    base = (torch.randn(8, 9, generator=_gen(21)) * 10).to(dtype)
    view = VIEWS[name](base)
    _m, rec = capture_one(probe, view)
    assert_stats_match(rec["stats"], reference_stats(view))
    # the same as the stats of the contiguous copy: only the logical values matter
    _m2, rec2 = capture_one_fresh(probe, view.contiguous())
    for key, value in rec["stats"].items():
        if key in ("mean", "l2", "pos_checksum"):
            assert rec2["stats"][key] == pytest.approx(value, rel=1e-6, abs=1e-6 * rec["stats"]["l2"]), key
        else:
            assert rec2["stats"][key] == value, key


def capture_one_fresh(probe, tensor):
    probe._reset_for_tests({"DUMP_PROBE": "1", "DUMP_PROBE_DIR": probe._config.directory})
    return capture_one(probe, tensor)


def test_row_permutation_changes_only_pos_checksum(probe):
    t = torch.randn(6, 5, generator=_gen(31), dtype=torch.float32)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    probe.arm("r")
    probe.capture("orig", t)
    probe.capture("perm", t[perm])
    probe.capture("flip", t.flip(0))
    manifest = load_manifest(probe.finish())
    a, b, c = (r["stats"] for r in manifest["records"])
    for other in (b, c):
        for key in ("nan_count", "inf_count", "finite_count", "min", "max", "max_abs"):
            assert other[key] == a[key]
        for key in ("mean", "l2"):
            assert other[key] == pytest.approx(a[key], rel=1e-6, abs=1e-7)
        assert abs(other["pos_checksum"] - a["pos_checksum"]) > 1e-3 * a["l2"]
    assert_stats_match(b, reference_stats(t[perm]))


def test_swapping_two_elements_changes_pos_checksum(probe):
    t = torch.arange(1.0, 17.0).reshape(4, 4)
    swapped = t.clone()
    swapped[0, 1], swapped[2, 3] = t[2, 3].clone(), t[0, 1].clone()
    probe.arm("r")
    probe.capture("a", t)
    probe.capture("b", swapped)
    a, b = (r["stats"] for r in load_manifest(probe.finish())["records"])
    assert a["l2"] == b["l2"] and a["mean"] == b["mean"]
    w = position_weights([4, 4])
    expected_delta = (t[2, 3].item() - t[0, 1].item()) * (w[1] - w[11])
    assert abs(expected_delta) > 0.1
    assert b["pos_checksum"] - a["pos_checksum"] == pytest.approx(expected_delta, rel=1e-5)


def test_swapping_within_a_row_and_between_rows(probe):
    """Moving a whole row, or two elements inside one row, changes the checksum."""
    t = torch.randn(5, 6, generator=_gen(41))
    rows = t[[1, 0, 2, 3, 4]]
    cols = t.clone()
    cols[2, [0, 5]] = t[2, [5, 0]]
    probe.arm("r")
    for stage, x in (("t", t), ("rows", rows), ("cols", cols)):
        probe.capture(stage, x)
    s = {r["stage"]: r["stats"] for r in load_manifest(probe.finish())["records"]}
    for other in ("rows", "cols"):
        assert s[other]["l2"] == pytest.approx(s["t"]["l2"], rel=1e-6)
        assert abs(s[other]["pos_checksum"] - s["t"]["pos_checksum"]) > 1e-4 * s["t"]["l2"]
        assert_stats_match(s[other], reference_stats({"rows": rows, "cols": cols}[other]))


@pytest.mark.parametrize("shape", [(70000,), (2, 35000), (35000, 2)])
def test_checksum_indices_beyond_32_bits_of_product(probe, shape):
    """Indices whose product with the multiplier exceeds 2**32 many times (and int32 range) stay exact."""
    t = torch.ones(shape, dtype=torch.float64)
    _m, rec = capture_one(probe, t)
    assert_stats_match(rec["stats"], reference_stats(t))


def test_overflowing_statistic_is_a_string(probe):
    """A reduction that overflows float64 is written as "inf", never as a bare Infinity token."""
    big = torch.tensor([1.5e308, 1.5e308, -1.0e308], dtype=torch.float64)
    _m, rec = capture_one(probe, big)
    s = rec["stats"]
    assert s["max"] == 1.5e308 and s["min"] == -1.0e308 and s["max_abs"] == 1.5e308
    assert s["l2"] == "inf"  # sqrt of an overflowing sum of squares
    assert s["nan_count"] == 0 and s["finite_count"] == 3


def test_negative_overflow_is_minus_inf_string(probe):
    _m, rec = capture_one(probe, torch.tensor([-1.5e308, -1.5e308], dtype=torch.float64))
    s = rec["stats"]
    assert s["mean"] == "-inf" and s["l2"] == "inf"
    assert s["min"] == -1.5e308 and s["max_abs"] == 1.5e308


def test_json_float(probe):
    assert probe._json_float(float("nan")) == "nan"
    assert probe._json_float(float("inf")) == "inf"
    assert probe._json_float(float("-inf")) == "-inf"
    assert probe._json_float(-0.5) == -0.5
    assert probe._json_float(1e308) == 1e308


def test_stats_dtype_is_float64_on_cpu(probe):
    manifest, _rec = capture_one(probe, torch.ones(2, dtype=torch.float16))
    assert manifest["stats_dtype"] == "float64"
    assert set(manifest["stat_names"]) == set(STAT_KEYS)
    assert manifest["stat_names"] == list(_rec["stats"])  # the order of the stats objects


# --------------------------------------------------------------------------- l2 at the float32 extremes


@pytest.mark.parametrize("value,n", [(1e-40, 1000), (-1e-40, 7), (1e-45, 64), (1e-25, 300), (3e-20, 5)])
def test_torch_path_l2_of_float32_tiny_values_is_not_zero(make_probe, value, n):
    """Eager path: float32 squares of denormals (and of values below ~1e-19) underflow; l2 is
    |value| * sqrt(n) all the same (issue 31, item 22)."""
    probe = make_probe(DUMP_PROBE_KERNEL="torch")
    t = torch.full((n,), value, dtype=torch.float32)
    _m, rec = capture_one(probe, t)
    assert rec["stats_path"] == "torch"
    exact = abs(float(t[0])) * math.sqrt(n)  # the float32 value, not the decimal literal
    assert rec["stats"]["l2"] == pytest.approx(exact, rel=1e-6, abs=0)


def test_torch_path_l2_of_mixed_tiny_values_matches_reference(make_probe):
    probe = make_probe(DUMP_PROBE_KERNEL="torch")
    t = (torch.randn(40, 30, generator=_gen(12)) * 1e-41).to(torch.float32)
    _m, rec = capture_one(probe, t)
    ref = math.sqrt(math.fsum(float(v) ** 2 for v in t.flatten().tolist()))
    assert rec["stats"]["l2"] == pytest.approx(ref, rel=1e-5, abs=0)


@pytest.mark.parametrize("scale", [1.0, 1e-10, 1e-17, 1e10, 1e16])
def test_torch_path_l2_of_normal_range_float32_is_the_plain_norm(make_probe, scale):
    """Bit for bit what the eager norm gives where no rescue is needed."""
    probe = make_probe(DUMP_PROBE_KERNEL="torch")
    t = _float_tensor(torch.float32, (33, 17), seed=13, scale=scale)
    _m, rec = capture_one(probe, t)
    assert rec["stats"]["l2"] == float(torch.linalg.vector_norm(t).to(torch.float64))


def test_torch_path_l2_of_float32_overflowing_squares_is_rescued(make_probe):
    probe = make_probe(DUMP_PROBE_KERNEL="torch")
    t = _float_tensor(torch.float32, (9, 4), seed=14, scale=1e30)
    _m, rec = capture_one(probe, t)
    expected = float(torch.linalg.vector_norm(t * 2.0 ** -64).to(torch.float64)) * 2.0 ** 64
    assert rec["stats"]["l2"] == expected
