"""GPU checks of the fused Triton statistics path of assets/dump_probe.py (issue 17).

Sync-free under torch.cuda.set_sync_debug_mode("error"), capturable in a CUDA graph with
graph slots (no allocation inside the capture), and the same values as the eager torch ops on
the same device tensors. Skipped cleanly where torch.cuda or triton is unavailable; run with
tests/gpu/run_gpu_checks.sh.
"""

import math
import time

import pytest
import torch

from test_gpu_probe import DEV, HAS_CUDA, _sync_mode_reset, load_manifest, make_probe  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(not HAS_CUDA, reason="torch.cuda is not available on this machine")
INF, NAN = float("inf"), float("nan")


def _cases():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(257, 1031, generator=g) * 3
    bad = x.clone()
    bad.view(-1)[[5, 900, 70000]] = NAN
    bad.view(-1)[[6, 901]] = INF
    bad.view(-1)[[7]] = -INF
    return {
        "f32": x, "f16": x.half(), "bf16": x.bfloat16(), "f64": x.double(),
        "f32_nonfinite": bad, "bf16_nonfinite": bad.bfloat16(),
        "huge_f32": x[:8] * 1e30, "transposed": x.t(), "strided": x[1::3, ::2],
        "int64": torch.randint(-(2**40), 2**40, (33, 17), generator=g), "bool": x > 0,
        "scalar": torch.tensor(2.5), "row": x[:1], "big": torch.randn(2048, 4096, generator=g),
    }


def _assert_same(fused, eager, tensor):
    a, b = fused.double().cpu().tolist(), eager.double().cpu().tolist()
    assert a[:2] == b[:2], (a, b)
    if a[0] + a[1] < tensor.numel():
        assert a[2:4] == b[2:4], (a, b)
    t = tensor.double()
    abs_sum = t[torch.isfinite(t)].abs().sum().item()
    tol = 1e-12 if tensor.dtype == torch.float64 or not tensor.is_floating_point() else 1e-6
    for x, y in zip(a[4:], b[4:]):
        assert abs(x - y) <= tol * abs_sum + 1e-300, (x, y, tol * abs_sum)


@pytest.fixture
def triton_probe(make_probe):
    pytest.importorskip("triton")
    probe = make_probe()
    if probe._stats_path(torch.ones(2, device=DEV)) != "triton":
        pytest.skip("the Triton path is not usable here: %s" % probe._triton_unusable("cuda"))
    return probe


def test_triton_matches_torch_ops_on_the_device(triton_probe):
    for name, t in _cases().items():
        t = t.to(DEV)
        fused = triton_probe._statistics(t)
        assert fused.device == t.device
        _assert_same(fused, triton_probe._torch_statistics(t, torch.float64), t)


def test_triton_path_is_sync_free(triton_probe):
    cases = {name: t.to(DEV) for name, t in _cases().items()}
    triton_probe.arm("warm")
    for name, t in cases.items():  # compile every specialisation first: compiling is not capturing
        triton_probe.capture(name, t)
    triton_probe.finish()
    torch.cuda.synchronize()
    assert triton_probe.arm("r") is True
    torch.cuda.set_sync_debug_mode("error")
    for name, t in cases.items():
        triton_probe.capture(name, t)
    torch.cuda.set_sync_debug_mode(0)
    manifest = load_manifest(triton_probe.finish())
    assert {r["stats_path"] for r in manifest["records"]} == {"triton"}


def test_triton_kernel_is_captured_and_replayed_in_a_cuda_graph(triton_probe):
    static = torch.zeros(64, 96, device=DEV)
    assert triton_probe.graph_slot("h", static) is True
    triton_probe.capture_graph("h", static)  # compile outside the capture
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats().get("allocation.all.allocated", 0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        triton_probe.capture_graph("h", static)
    after = torch.cuda.memory_stats().get("allocation.all.allocated", 0)
    assert after == before, "capture_graph allocated %d blocks inside the capture" % (after - before)
    g = torch.Generator().manual_seed(9)
    values = torch.randn(64, 96, generator=g)
    values[3, 4] = NAN
    static.copy_(values.to(DEV))
    graph.replay()
    torch.cuda.synchronize()
    assert triton_probe.arm("r") is True
    rec = [r for r in load_manifest(triton_probe.finish())["records"] if r["mode"] == "graph"][0]
    assert rec["stats_path"] == "triton"
    assert rec["stats"]["nan_count"] == 1
    finite = values[torch.isfinite(values)].double()
    assert rec["stats"]["l2"] == pytest.approx(math.sqrt((finite ** 2).sum().item()), rel=1e-9)


def test_triton_per_capture_cost_is_printed(triton_probe, capsys):
    """Not a goal, a figure: per-capture time of each path on one large tensor."""
    t = torch.randn(4096, 4096, device=DEV)
    for fn in (triton_probe._statistics, lambda x: triton_probe._torch_statistics(x, torch.float64)):
        fn(t)
    times = {}
    for name, fn in (("triton", triton_probe._statistics),
                     ("torch", lambda x: triton_probe._torch_statistics(x, torch.float64))):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(20):
            fn(t)
        torch.cuda.synchronize()
        times[name] = (time.perf_counter() - start) / 20 * 1e6
    with capsys.disabled():
        print("\nper capture, 4096x4096 float32: triton %.0f us, torch ops %.0f us" % (times["triton"], times["torch"]))


def test_triton_local_checksum_is_the_unsharded_captures_pos_checksum(triton_probe, tmp_path):
    """A sliced capture's local_checksum on the Triton path equals, bit for bit, the
    pos_checksum of the same device tensor captured without a shard (issue 30)."""
    g = torch.Generator().manual_seed(5)
    piece = (torch.randn(24, 40, generator=g) * 2).to(DEV)
    probe = triton_probe
    probe.arm("req", parallel={"tp": (1, 2)})
    probe.capture("sliced", piece, shard="tp:1")
    probe.capture("whole", piece)
    manifest = load_manifest(probe.finish())
    by_stage = {r["stage"]: r for r in manifest["records"]}
    sliced, whole = by_stage["sliced"], by_stage["whole"]
    assert sliced["stats_path"] == whole["stats_path"] == "triton"
    assert sliced["local_checksum"] == whole["stats"]["pos_checksum"]
    assert sliced["stats"]["pos_checksum"] != whole["stats"]["pos_checksum"]
