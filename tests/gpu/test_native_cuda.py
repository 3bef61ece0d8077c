"""The native probe's CUDA backend on a real GPU (skipped cleanly without one).

libdump_probe.so is driven through ctypes from torch's own CUDA tensors: the probe's statistics
are compared with torch's of the same device tensors (float64 on the device), auto must pick the
CUDA runtime torch loaded, dp_capture must return while the stream is still busy (it enqueues a
copy and never synchronizes) and still see the values the stream order gives, and a stream under
CUDA-graph capture is refused with DP_ERR_GRAPH_CAPTURE.

Run with tests/gpu/run_gpu_checks.sh; the library is $DUMP_PROBE_LIB, else the newest of
target/release and target/debug (build it with `cargo build --release -p dump_probe`).
"""

import ctypes
import glob
import json
import math
import os
import time

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HAS_CUDA = torch.cuda.is_available()

DP_OK, DP_ERR_GRAPH_CAPTURE = 0, -10
DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3, torch.int32: 8, torch.bool: 11}
DP_DEVICE_CUDA = 2
U = lambda k: (((k + 1) * 2654435761) % 2**32) / 2**32  # noqa: E731
V = lambda k: (((k + 1) * 2246822519) % 2**32) / 2**32  # noqa: E731


class DpTensor(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("data", ctypes.c_void_p), ("storage_bytes", ctypes.c_uint64),
        ("storage_id", ctypes.c_uint64), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
        ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("storage_offset", ctypes.c_int64), ("device_type", ctypes.c_int32), ("device_index", ctypes.c_int32),
        ("stream", ctypes.c_void_p), ("shard", ctypes.c_char_p),
    ]


def library_path():
    if os.environ.get("DUMP_PROBE_LIB"):
        return os.environ["DUMP_PROBE_LIB"]
    found = [p for p in (os.path.join(REPO, "target", d, "libdump_probe.so") for d in ("release", "debug")) if os.path.exists(p)]
    return max(found, key=os.path.getmtime) if found else None


pytestmark = pytest.mark.skipif(not HAS_CUDA or library_path() is None,
                                reason="needs torch.cuda and a built libdump_probe.so")


@pytest.fixture
def lib():
    lib = ctypes.CDLL(library_path())
    lib.dp_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint64, ctypes.POINTER(ctypes.c_void_p)]
    lib.dp_arm.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.dp_capture.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(DpTensor)]
    lib.dp_finish.argtypes = [ctypes.c_void_p]
    lib.dp_close.argtypes = [ctypes.c_void_p]
    lib.dp_last_error.argtypes = [ctypes.c_void_p]
    lib.dp_last_error.restype = ctypes.c_char_p
    assert lib.dp_abi_tensor_size() == ctypes.sizeof(DpTensor)
    return lib


def describe(t, storage_id):
    shape = (ctypes.c_int64 * max(t.dim(), 1))(*t.shape)
    strides = (ctypes.c_int64 * max(t.dim(), 1))(*t.stride())
    d = DpTensor(ctypes.sizeof(DpTensor), t.untyped_storage().data_ptr(), t.untyped_storage().nbytes(), storage_id,
                 DTYPES[t.dtype], t.dim(), shape, strides, t.storage_offset(), DP_DEVICE_CUDA, t.device.index or 0,
                 torch.cuda.current_stream().cuda_stream, None)
    d._keep = (shape, strides)
    return d


def open_session(lib, tmp_path, backend):
    os.environ.update(DUMP_PROBE="1", DUMP_PROBE_DIR=str(tmp_path), DUMP_PROBE_BACKEND=backend)
    s = ctypes.c_void_p()
    assert lib.dp_open(None, 0, 0, ctypes.byref(s)) == DP_OK, lib.dp_last_error(s)
    return s


def manifest(tmp_path):
    (path,) = glob.glob(str(tmp_path / "rank0" / "match1-occ1*" / "manifest.json"))
    with open(path) as handle:
        return json.load(handle)


def torch_stats(t):
    x = t.to(torch.float64)
    finite = torch.isfinite(x)
    f = torch.where(finite, x, torch.zeros_like(x))
    cols = t.shape[-1] if t.dim() else 1
    m = f.reshape(-1, cols)
    u = torch.tensor([U(r) for r in range(m.shape[0])], dtype=torch.float64, device=t.device)
    v = torch.tensor([V(c) for c in range(cols)], dtype=torch.float64, device=t.device)
    return {
        "nan_count": int(torch.isnan(x).sum()), "inf_count": int(torch.isinf(x).sum()),
        "min": float(x[finite].min()), "max": float(x[finite].max()),
        "sum": float(f.sum()), "l2": float(f.square().sum().sqrt()), "pos_checksum": float(u @ m @ v),
        "abs_sum": float(f.abs().sum()),
    }


@pytest.mark.parametrize("backend", ["auto", "cuda"])
def test_statistics_match_torch_on_device_tensors(lib, tmp_path, backend):
    g = torch.Generator(device="cuda").manual_seed(3)
    base = torch.randn(257, 129, device="cuda", generator=g)
    base[5, 7] = float("nan")
    base[9, 1] = float("inf")
    tensors = {
        "plain": base, "transposed": base.t(), "slice": base[3:200:5, 2:100:3],
        "bf16": base[:64].to(torch.bfloat16), "f16": base[:32, :32].to(torch.float16),
        "f64": torch.randn(33, 65, device="cuda", dtype=torch.float64, generator=g),
        "i32": torch.randint(-50, 50, (100,), device="cuda", dtype=torch.int32, generator=g),
        "large": torch.randn(4, 1 << 20, device="cuda", generator=g),
    }
    s = open_session(lib, tmp_path, backend)
    assert lib.dp_arm(s, b"gpu", b"{}") == DP_OK
    for i, (stage, t) in enumerate(tensors.items()):
        assert lib.dp_capture(s, stage.encode(), ctypes.byref(describe(t, i + 1))) == DP_OK, lib.dp_last_error(s)
    assert lib.dp_finish(s) == DP_OK, lib.dp_last_error(s)
    lib.dp_close(s)
    m = manifest(tmp_path)
    assert m["backend"] == "cuda", m["backend_reason"]
    records = {r["stage"]: r for r in m["records"]}
    for stage, t in tensors.items():
        got, want = records[stage]["stats"], torch_stats(t)
        assert records[stage]["device"] == "cuda:%d" % (t.device.index or 0)
        assert (got["nan_count"], got["inf_count"]) == (want["nan_count"], want["inf_count"]), stage
        assert (got["min"], got["max"]) == (want["min"], want["max"]), stage
        tol = 1e-12 * want["abs_sum"] + 1e-300
        assert math.isclose(got["mean"] * got["finite_count"], want["sum"], abs_tol=tol), stage
        assert math.isclose(got["l2"], want["l2"], rel_tol=1e-12), stage
        assert math.isclose(got["pos_checksum"], want["pos_checksum"], abs_tol=tol), stage


def test_capture_enqueues_without_waiting_and_sees_stream_order(lib, tmp_path):
    x = torch.zeros(1 << 22, device="cuda")
    a = torch.randn(4096, 4096, device="cuda")
    s = open_session(lib, tmp_path, "cuda")
    assert lib.dp_arm(s, b"async", b"{}") == DP_OK
    torch.cuda.synchronize()
    for _ in range(30):  # a few hundred ms of work queued on the stream
        a = a @ a
        a = a / a.norm()
    x.fill_(2.0)  # ordered after the matmuls on the same stream
    t0 = time.perf_counter()
    assert lib.dp_capture(s, b"x", ctypes.byref(describe(x, 1))) == DP_OK
    capture_s = time.perf_counter() - t0
    busy = torch.cuda.current_stream().query() is False
    assert lib.dp_finish(s) == DP_OK, lib.dp_last_error(s)
    lib.dp_close(s)
    assert busy, "the stream finished before the capture returned: the test did not queue enough work"
    assert capture_s < 0.01, "dp_capture took %.3f s: it waited for the stream" % capture_s
    stats = manifest(tmp_path)["records"][0]["stats"]
    assert (stats["min"], stats["max"]) == (2.0, 2.0), "the copy ran before fill_ in stream order"


def test_a_stream_under_graph_capture_is_refused(lib, tmp_path):
    x = torch.ones(1024, device="cuda")
    s = open_session(lib, tmp_path, "cuda")
    assert lib.dp_arm(s, b"graph", b"{}") == DP_OK
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            y = x * 2
            status = lib.dp_capture(s, b"y", ctypes.byref(describe(y, 1)))
    assert status == DP_ERR_GRAPH_CAPTURE, lib.dp_last_error(s)
    assert b"captured into a graph" in lib.dp_last_error(s)
    assert lib.dp_finish(s) == DP_OK
    lib.dp_close(s)
    assert "captured into a graph" in manifest(tmp_path)["warnings"][0]
