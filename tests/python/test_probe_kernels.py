"""The fused statistics paths (Inductor on cpu, Triton on cuda/npu) give today's values.

Each case runs through the fused path and through the eager torch ops (_torch_statistics) and
the two are compared: counts, min and max exactly; sum, l2 and pos_checksum within tol * sum|x|
(tol 1e-6 where a float32 reduction is involved, 1e-12 where both reduce in float64). The Triton
kernels run on cpu tensors under Triton's interpreter (TRITON_INTERPRET=1), in a child pytest:
the interpreter must be on when triton is first imported (its standard library is decorated at
import), and this process imported it already (torch.compile does).
"""

import math
import os
import re
import subprocess
import sys

import pytest
import torch

from conftest import load_manifest, logical_values, record

INF, NAN = float("inf"), float("nan")
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
needs_interpreter = pytest.mark.skipif(
    not INTERPRETED, reason="run by test_triton_kernels_under_the_interpreter in a child with TRITON_INTERPRET=1")


@pytest.fixture
def probe(make_probe):
    """The probe with DUMP_PROBE_KERNEL=fused: auto does not compile on cpu (see below)."""
    return make_probe(DUMP_PROBE_KERNEL="fused")


def _randn(shape, seed, scale=3.0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).to(dtype)


def _with_nonfinite(dtype, seed):
    t = _randn((9, 13), seed, dtype=dtype)
    flat = t.view(-1)
    flat[[3, 40]] = NAN
    flat[[7]] = INF
    flat[[50, 51]] = -INF
    return t


CASES = {
    "float32": lambda: _randn((33, 47), 1),
    "float16": lambda: _randn((17, 9), 2, dtype=torch.float16),
    "bfloat16": lambda: _randn((21, 30), 3, dtype=torch.bfloat16),
    "float64": lambda: _randn((12, 11), 4, dtype=torch.float64),
    "float32_nonfinite": lambda: _with_nonfinite(torch.float32, 5),
    "float16_nonfinite": lambda: _with_nonfinite(torch.float16, 6),
    "bfloat16_nonfinite": lambda: _with_nonfinite(torch.bfloat16, 7),
    "float64_nonfinite": lambda: _with_nonfinite(torch.float64, 8),
    "all_nonfinite": lambda: torch.tensor([NAN, INF, -INF, NAN]),
    "float32_huge": lambda: _randn((5, 6), 9, scale=1e30),  # squares overflow float32: the l2 rescue
    "bfloat16_huge": lambda: _randn((4, 5), 10, scale=1e25, dtype=torch.bfloat16),
    "int8": lambda: torch.tensor([[-128, -1, 0], [1, 2, 127]], dtype=torch.int8),
    "int32": lambda: torch.randint(-1000, 1000, (6, 5), generator=torch.Generator().manual_seed(11), dtype=torch.int32),
    "int64": lambda: torch.randint(-(2**40), 2**40, (4, 6), generator=torch.Generator().manual_seed(12)),
    "uint8": lambda: torch.randint(0, 256, (3, 8), generator=torch.Generator().manual_seed(13), dtype=torch.uint8),
    "bool": lambda: torch.tensor([[True, False, True], [False, False, True]]),
    "transposed": lambda: _randn((40, 7), 14).t(),
    "strided_slice": lambda: _randn((20, 30), 15)[1::3, 2::2],
    "3d_permuted": lambda: _randn((3, 4, 5), 16).permute(2, 0, 1),
    "0d": lambda: torch.tensor(-2.5),
    "single": lambda: torch.tensor([[3.25]]),
    "row": lambda: _randn((1, 300), 17),
    "column": lambda: _randn((300, 1), 18),
    "several_programs": lambda: _randn((700, 800), 19),  # Triton: more than one program
}


def _tolerance(tensor, acc):
    if acc == torch.float64 and (tensor.dtype == torch.float64 or not tensor.is_floating_point()):
        return 1e-12
    return 1e-6


def assert_same_stats(fused, eager, tensor, acc):
    """Counts, min and max exact; sum, l2, pos_checksum within tol * sum over F of |x|."""
    a, b = fused.to(torch.float64).tolist(), eager.to(torch.float64).tolist()
    assert a[:2] == b[:2], (a, b)
    if a[0] + a[1] < tensor.numel():  # min and max of no finite element are not reported (null)
        assert a[2:4] == b[2:4], (a, b)
    abs_sum = math.fsum(abs(v) for v in logical_values(tensor) if math.isfinite(v))
    bound = _tolerance(tensor, acc) * abs_sum
    for name, x, y in zip(("sum", "l2", "pos_checksum"), a[4:], b[4:]):
        assert abs(x - y) <= bound, (name, x, y, bound)


# --------------------------------------------------------------------------- cpu: Inductor


@pytest.mark.parametrize("name", sorted(CASES))
def test_inductor_matches_torch_ops(probe, name):
    t = CASES[name]()
    fused = probe._inductor_statistics(t, torch.float64, None)
    assert_same_stats(fused, probe._torch_statistics(t, torch.float64), t, torch.float64)


def test_inductor_compiles_one_graph_per_dtype(probe):
    """Every shape above, 1-sized dimensions and views included, reuses one graph per dtype."""
    for make in CASES.values():
        probe._statistics(make())
    keys = [k for k in probe._KERNELS if isinstance(k, tuple) and k[0] == "compiles"]
    assert {k[1][2] for k in keys} == {torch.float32, torch.float16, torch.bfloat16, torch.float64}
    assert all(probe._KERNELS[k] == 1 for k in keys), {k: probe._KERNELS[k] for k in keys}


def test_inductor_rescues_float64_squares_that_overflow(probe):
    t = torch.tensor([3e200, -4e200, 1.0], dtype=torch.float64)
    l2 = probe._inductor_statistics(t, torch.float64, None)[5].item()
    assert l2 == pytest.approx(5e200, rel=1e-15)


def test_empty_and_complex_tensors_have_no_statistics(probe):
    for t in (torch.empty(0), torch.empty(3, 0, dtype=torch.bfloat16), torch.ones(2, dtype=torch.complex64)):
        assert probe._statistics(t) is None


# --------------------------------------------------------------------------- cuda/npu: Triton (interpreted)


@pytest.mark.skipif(INTERPRETED, reason="this is the child")
def test_triton_kernels_under_the_interpreter():
    """Runs this file's Triton tests in a child interpreter with TRITON_INTERPRET=1."""
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", "triton"],
                          env=env, capture_output=True, text=True, timeout=600, cwd=os.path.dirname(__file__))
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert re.search(r"\b(\d{2,}) passed", done.stdout), done.stdout[-2000:]


@pytest.fixture
def triton_probe(probe, monkeypatch):
    """The probe with a private kernel table, its Triton kernels defined under the interpreter."""
    pytest.importorskip("triton")
    monkeypatch.setattr(probe, "_KERNELS", {})
    return probe


@needs_interpreter
@pytest.mark.parametrize("acc", [torch.float64, torch.float32], ids=["float64", "float32_kahan"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_triton_matches_torch_ops(triton_probe, name, acc):
    t = CASES[name]()
    fused = triton_probe._triton_statistics(t, acc, None)
    assert fused.dtype == acc
    assert_same_stats(fused, triton_probe._torch_statistics(t, acc), t, acc)


@needs_interpreter
def test_triton_writes_a_slot_in_place(triton_probe):
    """Graph slots: the kernel writes the slot's vector through preallocated partials."""
    t = CASES["float32_nonfinite"]()
    out = torch.full((7,), NAN, dtype=torch.float64)
    scratch = triton_probe._triton_scratch(t.device, True)
    got = triton_probe._triton_statistics(t, torch.float64, None, out, scratch)
    assert got is out
    assert_same_stats(out, triton_probe._torch_statistics(t, torch.float64), t, torch.float64)


# --------------------------------------------------------------------------- sharded checksums


def _splits(probe):
    """(full tensor, [(local tensor, _Split)]) of each shard annotation kind."""
    full2 = _randn((6, 10), 20)
    full3 = _randn((2, 4, 3), 21)
    seq = _randn((8, 3), 22)
    S = probe._Split
    return {
        "last_dim": (full2, [(full2[:, 5 * r:5 * r + 5], S(1, 10, 5 * r, False, r, 2)) for r in range(2)]),
        "leading_dim": (full2, [(full2[3 * r:3 * r + 3], S(0, 6, 3 * r, False, r, 2)) for r in range(2)]),
        "middle_dim": (full3, [(full3[:, 2 * r:2 * r + 2], S(1, 4, 2 * r, False, r, 2)) for r in range(2)]),
        "uneven": (full2, [(full2[:, :7], S(1, 10, 0, False, 0, 2)), (full2[:, 7:], S(1, 10, 7, False, 1, 2))]),
        "zigzag": (seq, [(torch.cat([seq[0:2], seq[6:8]]), S(0, 8, 0, True, 0, 2)),
                         (torch.cat([seq[2:4], seq[4:6]]), S(0, 8, 0, True, 1, 2))]),
    }


@pytest.mark.parametrize("kind", ["last_dim", "leading_dim", "middle_dim", "uneven", "zigzag"])
@pytest.mark.parametrize("path", ["inductor", "triton"])
def test_fused_checksum_uses_global_coordinates(probe, monkeypatch, kind, path):
    """Each shard's fused checksum equals the torch ops' one, and the shards add up to the full tensor's."""
    if path == "triton":
        if not INTERPRETED:
            pytest.skip("run by test_triton_kernels_under_the_interpreter")
        monkeypatch.setattr(probe, "_KERNELS", {})
    elif INTERPRETED:
        pytest.skip("the parent runs the inductor ones")
    fused = probe._triton_statistics if path == "triton" else probe._inductor_statistics
    full, shards = _splits(probe)[kind]
    total = 0.0
    for local, split in shards:
        mine = fused(local.contiguous(), torch.float64, split)[6].item()
        eager = probe._torch_statistics(local.contiguous(), torch.float64, split)[6].item()
        assert mine == pytest.approx(eager, rel=1e-6, abs=1e-6)
        total += mine
    whole = probe._torch_statistics(full, torch.float64)[6].item()
    assert total == pytest.approx(whole, rel=1e-6, abs=1e-6)


# --------------------------------------------------------------------------- DUMP_PROBE_KERNEL


def test_auto_on_cpu_without_the_library_uses_the_torch_ops_and_compiles_nothing(make_probe, monkeypatch, capsys):
    """One window per process: a compile of seconds would cost more than the eager ops save."""
    probe = make_probe()
    monkeypatch.setattr(probe, "_KERNELS", {"native": (None, "no native statistics library (test)")})
    probe.arm("r")
    probe.capture("x", CASES["float32_nonfinite"]())
    manifest = load_manifest(probe.finish())
    assert record(manifest, "x")["stats_path"] == "torch"
    assert probe.compile_seconds() == {}
    assert capsys.readouterr().err == ""


def test_fused_path_on_cpu_without_the_library_is_inductor_and_recorded(probe):
    probe.arm("r")
    probe.capture("x", CASES["float32_nonfinite"]())
    probe.capture("ids", torch.arange(5))
    probe.capture("empty", torch.empty(0))
    manifest = load_manifest(probe.finish())
    assert record(manifest, "x")["stats_path"] == "inductor"
    assert record(manifest, "ids")["stats_path"] == "inductor"
    assert "stats_path" not in record(manifest, "empty")  # null stats: no path


def test_torch_kernel_is_recorded_and_gives_the_same_statistics(make_probe):
    values = {}
    for kernel in ("torch", "fused"):
        probe = make_probe(DUMP_PROBE_KERNEL=kernel)
        probe.arm("r")
        probe.capture("x", CASES["bfloat16_nonfinite"]())
        rec = record(load_manifest(probe.finish()), "x")
        values[rec["stats_path"]] = rec["stats"]
    assert set(values) == {"torch", "inductor"}
    a, b = values["torch"], values["inductor"]
    for name in ("nan_count", "inf_count", "finite_count", "min", "max", "max_abs"):
        assert a[name] == b[name]
    for name in ("mean", "l2", "pos_checksum"):
        assert a[name] == pytest.approx(b[name], rel=1e-6, abs=1e-6)


def test_invalid_kernel_value_leaves_the_probe_disarmed(make_probe, capsys):
    probe = make_probe(DUMP_PROBE_KERNEL="cuda")
    assert probe.arm("r") is False
    assert "DUMP_PROBE_KERNEL='cuda' must be 'auto', 'fused' or 'torch'" in capsys.readouterr().err


def test_forced_fused_that_cannot_run_warns_once_and_falls_back(make_probe, monkeypatch, capsys):
    probe = make_probe(DUMP_PROBE_KERNEL="fused")
    monkeypatch.setattr(probe, "_KERNELS", {"inductor_unusable": "no C++ compiler on PATH"})
    probe.arm("r")
    for stage in ("a", "b", "c"):
        probe.capture(stage, CASES["float32"]())
    manifest = load_manifest(probe.finish())
    err = capsys.readouterr().err.splitlines()
    assert err == ["dump_probe: warning: DUMP_PROBE_KERNEL=fused: no C++ compiler on PATH; cpu statistics use the torch ops"]
    assert {r["stats_path"] for r in manifest["records"]} == {"torch"}


def test_auto_without_a_compiler_falls_back_silently(make_probe, monkeypatch, capsys):
    probe = make_probe(DUMP_PROBE_KERNEL="auto")
    monkeypatch.setattr(probe, "_KERNELS", {"inductor_unusable": "no C++ compiler on PATH"})
    probe.arm("r")
    probe.capture("a", CASES["float32"]())
    assert record(load_manifest(probe.finish()), "a")["stats_path"] == "torch"
    assert capsys.readouterr().err == ""


def test_a_failing_fused_kernel_warns_once_and_the_record_says_torch(probe, monkeypatch, capsys):
    monkeypatch.setattr(probe, "_KERNELS", {})

    def broken(*args, **kwargs):
        raise RuntimeError("C++ compile failed")

    monkeypatch.setattr(probe, "_inductor_statistics", broken)
    t = CASES["float32_nonfinite"]()
    probe.arm("r")
    probe.capture("a", t)
    probe.capture("b", t)
    manifest = load_manifest(probe.finish())
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "the inductor kernel failed (RuntimeError: C++ compile failed)" in err[0], err
    assert [r["stats_path"] for r in manifest["records"]] == ["torch", "torch"]
    assert record(manifest, "a")["stats"]["nan_count"] == 2


def test_first_compile_is_reported_once_on_stderr(probe, monkeypatch, capsys):
    monkeypatch.setattr(probe, "_KERNELS", {})
    probe._statistics(torch.ones(3, 4))
    probe._statistics(torch.ones(5, 2))
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert re.fullmatch(r"dump_probe: compiled the fused inductor statistics for cpu float32 tensors in "
                        r"[0-9.]+ s \(first call only\)", err[0]), err
    assert list(probe.compile_seconds()) == [("inductor", "cpu", torch.float32)]


# --------------------------------------------------------------------------- still sync-free


def test_fused_capture_path_makes_no_host_reads(probe, monkeypatch):
    """The forbidden-host-read check of test_probe_syncfree.py, asserting the fused path ran."""
    from test_probe_syncfree import _forbid_host_reads

    tensors = {"x": CASES["float32_nonfinite"](), "h": CASES["bfloat16"](), "t": CASES["transposed"](),
               "ids": torch.arange(7), "mask": torch.ones(3, dtype=torch.bool)}
    log = []
    probe.arm("r")
    _forbid_host_reads(monkeypatch, log)
    for stage, t in tensors.items():
        probe.capture(stage, t)
    monkeypatch.undo()
    assert log == []
    manifest = load_manifest(probe.finish())
    assert {r["stats_path"] for r in manifest["records"]} == {"inductor"}


def test_meta_tensors_keep_the_shape_only_path(probe, capsys):
    probe.arm("r")
    probe.capture("m", torch.empty(8, 4, device="meta"))
    assert capsys.readouterr().err == ""
    rec = record(load_manifest(probe.finish()), "m")
    assert rec["stats"] is None and "stats_path" not in rec
