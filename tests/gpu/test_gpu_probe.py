"""GPU-only checks of assets/dump_probe.py (skipped cleanly where torch.cuda is unavailable).

Run with tests/gpu/run_gpu_checks.sh (or: .venv/bin/python -m pytest -q -rs tests/gpu).
Self-contained on purpose: no conftest, so it never collides with tests/python's helpers.
"""

import importlib.util
import itertools
import json
import math
import os
import struct

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE_PATH = os.path.join(REPO, "assets", "dump_probe.py")

HAS_CUDA = torch.cuda.is_available()
# Every test is collected and skipped with the reason (exit status 0), rather than skipping the
# module (pytest's "no tests collected" exit status 5).
pytestmark = pytest.mark.skipif(not HAS_CUDA, reason="torch.cuda is not available on this machine")

_counter = itertools.count()
DEV = torch.device("cuda", torch.cuda.current_device()) if HAS_CUDA else None


def _reject(token):
    raise ValueError("non-strict JSON constant %r" % token)


def load_manifest(path):
    with open(path, "rb") as handle:
        return json.loads(handle.read().decode("utf-8"), parse_constant=_reject)


@pytest.fixture
def make_probe(tmp_path):
    def make(**env):
        spec = importlib.util.spec_from_file_location("dump_probe_gpu_%d" % next(_counter), PROBE_PATH)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        full = {"DUMP_PROBE": "1", "DUMP_PROBE_DIR": str(tmp_path / "dumps")}
        full.update(env)
        module._reset_for_tests(full)
        return module

    return make


@pytest.fixture(autouse=True)
def _sync_mode_reset():
    if not HAS_CUDA:
        pytest.skip("torch.cuda is not available on this machine")
    torch.cuda.synchronize()
    yield
    torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()


def _tensors(device):
    """The same logical tensors and views (same shapes, strides, offsets) on ``device``."""
    g = torch.Generator().manual_seed(1234)
    base = (torch.randn(64, 48, generator=g) * 4).to(device)
    with_bad = base.clone()
    with_bad[3, 5] = float("nan")
    with_bad[10, 0] = float("inf")
    with_bad[63, 47] = float("-inf")
    return {
        "f32": base,
        "f32_t": base.t(),
        "f32_strided": base[1::3, ::5],
        "f32_expand": base[:1].expand(7, 48),
        "f32_nonfinite": with_bad,
        "f16": base.to(torch.float16),
        "bf16": base.to(torch.bfloat16)[5:40],
        "all_nan": torch.full((5, 3), float("nan"), device=device),
        "i32": torch.randint(-1000, 1000, (33, 7), generator=g, dtype=torch.int32).to(device),
        "i64": torch.randint(-(2**40), 2**40, (9, 4), generator=g).to(device),
        "u8": torch.randint(0, 256, (100,), generator=g, dtype=torch.uint8).to(device),
        "bool": base > 0,
        "scalar": torch.tensor(-3.25, device=device),
        "empty": torch.empty(0, 5, device=device),
        "large": torch.randn(300, 1000, generator=g).to(device),
    }


def _capture_all(probe, tensors):
    assert probe.arm("r", token_ids=torch.arange(5, device=tensors["f32"].device)) is True
    for name, t in tensors.items():
        probe.capture(name, t)
    return probe


# --------------------------------------------------------------------------- (1) no sync on the capture path


def test_capture_path_is_sync_free_under_sync_debug_error(make_probe):
    probe = make_probe(DUMP_PROBE_TENSOR="^(f32_t|bf16)$", DUMP_PROBE_ROWS="4")
    tensors = _tensors(DEV)
    # warm up kernels and lazily-initialised state outside the checked region
    warm = make_probe()
    _capture_all(warm, tensors)
    warm.capture_inputs("op", x=tensors["f32_strided"])
    warm.finish()
    slot_like = tensors["f32"]
    assert probe.graph_slot("slot", slot_like) is True
    torch.cuda.synchronize()

    torch.cuda.set_sync_debug_mode("error")
    try:
        _capture_all(probe, tensors)
        probe.capture_inputs("rope", q=tensors["f32_strided"], pos=tensors["i64"][:, 0], n=3, eps=1e-6,
                             dtype=torch.bfloat16, dims=[1, 2])
        probe.capture_graph("slot", tensors["f32"] * 2)
        still_armed = probe.armed()
        n_records = len(probe._state.records)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert still_armed is True, "the probe disarmed itself on the capture path (a sync raised inside it?)"
    assert n_records == len(tensors)

    path = probe.finish()
    assert path is not None
    manifest = load_manifest(path)
    assert [r["stage"] for r in manifest["records"] if r["mode"] == "eager"] == list(tensors)
    assert manifest["metadata"]["token_ids"] == [0, 1, 2, 3, 4]
    assert manifest["stats_dtype"] == "float64"
    for r in manifest["records"]:
        assert r["device"] == str(DEV)
        assert r["device_format"] is None
    rec = {r["stage"]: r for r in manifest["records"]}
    assert rec["f32"]["storage_ptr"] == tensors["f32"].untyped_storage().data_ptr()
    assert rec["f32_strided"]["data_ptr"] == tensors["f32_strided"].data_ptr()
    assert rec["bf16"]["rows_kept"] == 4 and rec["bf16"]["truncated"] is True
    # the input set was copied to the host at finish()
    entry = manifest["input_sets"][0]
    data = torch.load(os.path.join(os.path.dirname(path), entry["file"]), weights_only=True)
    q = data["q"]
    rebuilt = torch.as_strided(q["span"], q["shape"], q["stride"], q["offset_in_span"])
    assert q["device"] == str(DEV)
    assert torch.equal(rebuilt, tensors["f32_strided"].cpu())


def test_sync_debug_mode_really_catches_a_sync():
    """Guard for the test above: the mode does raise on a device-to-host read."""
    x = torch.ones(4, device=DEV)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with pytest.raises(RuntimeError):
            x.sum().item()
    finally:
        torch.cuda.set_sync_debug_mode(0)


# --------------------------------------------------------------------------- (2) CUDA graph slots


def test_graph_slot_reads_replayed_values(make_probe):
    probe = make_probe(DUMP_PROBE_TENSOR="^logits$", DUMP_PROBE_ROWS="3")
    static_in = torch.zeros(8, 16, device=DEV)
    weight = torch.linspace(-1, 1, 16 * 16, device=DEV).reshape(16, 16)
    assert probe.graph_slot("hidden", static_in) is True
    assert probe.graph_slot("logits", static_in) is True

    def body():
        hidden = torch.tanh(static_in @ weight)
        logits = hidden * 3 + 1
        probe.capture_graph("hidden", hidden)
        probe.capture_graph("logits", logits)
        return logits

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):  # warm-up on a side stream, as torch.cuda.graph expects
            body()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = body()
    assert probe._state.slots["hidden"].meta is not None

    # capture-time (and warm-up) values: input zeros -> hidden 0, logits 1 everywhere
    g = torch.Generator().manual_seed(7)
    new_in = torch.randn(8, 16, generator=g) * 2
    static_in.copy_(new_in.to(DEV))
    # arm() marks every slot stale (NaN, on the device): only a replay inside the window counts.
    # The replay's 8 rows: request "a" at positions 0-4, "b" at 2-3, one padding row.
    assert probe.arm("r", rows=[("a", 0, 5), ("b", 2, 2), (None, 0, 1)]) is True
    graph.replay()
    torch.cuda.synchronize()
    # The graph's own output, captured eagerly in the same window: the same tensor.
    probe.capture("logits_eager", static_out)

    expected_hidden = torch.tanh(new_in.double() @ weight.cpu().double())
    expected_logits = static_out.cpu()
    assert torch.allclose(expected_logits.double(), expected_hidden * 3 + 1, atol=1e-4)

    path = probe.finish()
    manifest = load_manifest(path)
    rec = {r["stage"]: r for r in manifest["records"]}
    assert [r["mode"] for r in manifest["records"]] == ["eager", "graph", "graph"]
    # The slot's token rows, weighted at this window's positions, are the eager capture's rows
    # of the same replayed tensor, bit for bit (the same torch ops on the same device).
    t = manifest["token_rows"]
    with open(os.path.join(os.path.dirname(path), t["file"]), "rb") as handle:
        values = struct.unpack("<%df" % (t["rows"] * 5), handle.read())
    listed = {seq: (first, count, positions) for seq, first, count, _dims, positions in t["records"]}

    def rows(stage):
        first, count, positions = listed[rec[stage]["seq"]]
        assert (count, positions) == (8, None)
        return [values[(first + n) * 5:(first + n + 1) * 5] for n in range(count)]

    assert rows("logits") == rows("logits_eager")
    assert rows("logits")[7][4] == 0.0  # padding weighs nothing in the checksum
    assert len(rows("hidden")) == 8
    h, lg = rec["hidden"]["stats"], rec["logits"]["stats"]
    assert lg["min"] != 1.0 or lg["max"] != 1.0, "slot still holds capture-time values"
    assert lg["min"] == pytest.approx(float(expected_logits.min()), rel=1e-6)
    assert lg["max"] == pytest.approx(float(expected_logits.max()), rel=1e-6)
    assert lg["mean"] == pytest.approx(float(expected_logits.double().mean()), rel=1e-5)
    assert h["l2"] == pytest.approx(float(expected_hidden.norm()), rel=1e-4)
    assert h["finite_count"] == 128 and h["nan_count"] == 0
    assert rec["hidden"]["device"] == str(DEV)
    # the saved bounded tensor is the replayed one too
    assert rec["logits"]["rows_kept"] == 3 and rec["logits"]["rows_total"] == 8
    saved_path = os.path.join(os.path.dirname(path), rec["logits"]["tensor_file"])
    with open(saved_path, "rb") as handle:
        blob = handle.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    assert header["logits#1"]["shape"] == [3, 16]
    saved = torch.frombuffer(bytearray(blob[8 + n:]), dtype=torch.float32).reshape(3, 16)
    assert torch.equal(saved, expected_logits[:3])

    # a second replay with other values: the next window sees those. Slots survive windows.
    # Only one window is selected per process, so select the label's second call directly
    # (test-only poke at the parsed configuration).
    probe._config.occurrences = (2, 2)
    assert probe.arm("r") is True
    static_in.copy_(torch.full((8, 16), 0.5, device=DEV))
    graph.replay()
    torch.cuda.synchronize()
    lg2 = {r["stage"]: r for r in load_manifest(probe.finish())["records"]}["logits"]["stats"]
    assert lg2["mean"] == pytest.approx(float(static_out.double().mean().cpu()), rel=1e-6)
    assert lg2["max"] == pytest.approx(float(static_out.max().cpu()), rel=1e-6)
    assert lg2["mean"] != pytest.approx(lg["mean"])


# --------------------------------------------------------------------------- (3) cuda stats == cpu stats


def test_cuda_stats_equal_cpu_stats(make_probe):
    cpu_t = _tensors(torch.device("cpu"))
    dev_t = _tensors(DEV)
    for name in cpu_t:
        assert torch.equal(dev_t[name].cpu(), cpu_t[name]) or torch.allclose(
            dev_t[name].cpu().double(), cpu_t[name].double(), equal_nan=True), name
        assert dev_t[name].stride() == cpu_t[name].stride(), name

    cpu_m = load_manifest(_capture_all(make_probe(), cpu_t).finish())
    dev_m = load_manifest(_capture_all(make_probe(), dev_t).finish())
    assert cpu_m["stats_dtype"] == dev_m["stats_dtype"] == "float64"
    for a, b in zip(cpu_m["records"], dev_m["records"]):
        assert a["stage"] == b["stage"]
        for key in ("dtype", "shape", "stride", "storage_offset", "numel", "is_contiguous", "element_size"):
            assert a[key] == b[key], (a["stage"], key)
        assert a["device"] == "cpu" and b["device"] == str(DEV)
        if a["stats"] is None:
            assert b["stats"] is None, a["stage"]
            continue
        sa, sb = a["stats"], b["stats"]
        assert list(sa) == list(sb)
        for key in ("nan_count", "inf_count", "finite_count", "min", "max", "max_abs"):
            assert sa[key] == sb[key], (a["stage"], key, sa[key], sb[key])
        # both sides may reduce low-precision floats in float32, in different orders
        n = max(a["numel"], 1)
        l2 = sa["l2"] if isinstance(sa["l2"], float) else 0.0
        eps = 5e-6
        assert sb["l2"] == pytest.approx(sa["l2"], rel=eps, abs=1e-300), (a["stage"], "l2")
        if sa["mean"] is None:
            assert sb["mean"] is None
        else:
            assert sb["mean"] == pytest.approx(sa["mean"], rel=eps, abs=eps * l2 / math.sqrt(n)), (a["stage"], "mean")
        assert sb["pos_checksum"] == pytest.approx(sa["pos_checksum"], rel=eps, abs=eps * l2 * math.sqrt(n)), (
            a["stage"], "pos_checksum")
