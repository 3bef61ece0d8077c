"""Shared fixtures and helpers for the dump_probe test-suite.

Every test gets its own freshly loaded copy of ``assets/dump_probe.py`` (loaded
with importlib under a unique module name), reset with an explicit environment
dict through ``_reset_for_tests(env)`` so that nothing leaks between tests and
the real process environment is never consulted for configuration.
Process-level behaviour (import-time environment, torch.distributed ranks, a
writer killed mid-write) is exercised in subprocesses through ``run_script``.
"""

import importlib.util
import itertools
import json
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE_PATH = os.path.join(REPO, "assets", "dump_probe.py")
SCHEMA_PATH = os.path.join(REPO, "assets", "manifest.schema.json")

_counter = itertools.count()

# torch.compile's cache lives in the work tree (.gitignored), fresh in a fresh clone, so a warm
# cache elsewhere never hides the fused kernels' compile time, and it is bounded: every probe
# module loaded here shares one kernel table (SHARED_KERNELS), so each per-dtype kernel
# compiles once per pytest process, not once per test.
INDUCTOR_CACHE = os.path.join(REPO, ".inductor_cache")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = INDUCTOR_CACHE
SHARED_KERNELS = {}

STAT_KEYS = ("nan_count", "inf_count", "max_abs", "min", "max", "mean", "l2", "pos_checksum", "finite_count")
HASH_MUL = 2654435761
TWO_32 = 2**32


def load_probe_module():
    """A fresh, independent module object for assets/dump_probe.py."""
    name = "dump_probe_under_test_%d" % next(_counter)
    spec = importlib.util.spec_from_file_location(name, PROBE_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._KERNELS = SHARED_KERNELS
    return module


@pytest.fixture(scope="session", autouse=True)
def _fused_kernels_compiled():
    """Compile the cpu fused kernels once, before any test, so no test sees their compile note.

    Not in the child that test_probe_kernels.py runs under Triton's interpreter: it runs the
    Triton tests only.
    """
    import contextlib
    import io

    if os.environ.get("TRITON_INTERPRET") == "1":
        yield
        return

    module = load_probe_module()
    module._reset_for_tests({"DUMP_PROBE": "1", "DUMP_PROBE_KERNEL": "fused"})
    with contextlib.redirect_stderr(io.StringIO()):
        for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
            module._statistics(torch.ones(2, 3, dtype=dtype))
    yield


@pytest.fixture
def dump_dir(tmp_path):
    return str(tmp_path / "dumps")


@pytest.fixture
def make_probe(dump_dir, capsys):
    """make_probe(**env) -> probe module reset with DUMP_PROBE=1, DUMP_PROBE_DIR=<tmp> plus ``env``.

    Pass a key with value None to drop it from the environment.  Captured
    stderr from loading is discarded so tests see only what they cause.
    """

    def make(**env):
        full = {"DUMP_PROBE": "1", "DUMP_PROBE_DIR": dump_dir}
        for key, value in env.items():
            if value is None:
                full.pop(key, None)
            else:
                full[key] = value
        # Loading reads os.environ once; clear the probe variables so the
        # import itself is quiet whatever the outer environment holds.
        saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("DUMP_PROBE")}
        try:
            module = load_probe_module()
        finally:
            os.environ.update(saved)
        capsys.readouterr()
        module._reset_for_tests(full)
        return module

    return make


@pytest.fixture
def probe(make_probe):
    return make_probe()


@pytest.fixture
def dumpview():
    """The path of target/debug/dumpview; the test is skipped where it is not built."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "target", "debug", "dumpview")
    if not os.path.exists(path):
        pytest.skip("target/debug/dumpview is not built (cargo build)")
    return path


@pytest.fixture(autouse=True)
def _clean_rank_env(monkeypatch):
    """Rank and world size come from $RANK / $WORLD_SIZE at arm() time; start from neither."""
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)


def warning_lines(text):
    return [line for line in text.splitlines() if line.strip()]


def _reject_constant(token):
    raise ValueError("non-strict JSON constant %r in manifest" % token)


def load_manifest(path):
    """Parse a manifest strictly: NaN / Infinity / -Infinity tokens are an error."""
    with open(path, "rb") as handle:
        data = handle.read()
    return json.loads(data.decode("utf-8"), parse_constant=_reject_constant)


def all_manifests(root):
    found = []
    for dirpath, _dirs, files in os.walk(root):
        if "manifest.json" in files:
            found.append(os.path.join(dirpath, "manifest.json"))
    return sorted(found)


def all_files(root):
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)


def record(manifest, stage, occurrence=1):
    hits = [r for r in manifest["records"] if r["stage"] == stage and r["occurrence"] == occurrence]
    assert len(hits) == 1, (stage, occurrence, [(r["stage"], r["occurrence"]) for r in manifest["records"]])
    return hits[0]


def capture_one(probe, tensor, stage="t", label="req"):
    """Arm, capture one tensor, finish; return (manifest, record)."""
    assert probe.arm(label) is True
    probe.capture(stage, tensor)
    path = probe.finish()
    assert path is not None
    manifest = load_manifest(path)
    return manifest, record(manifest, stage)


# ---------------------------------------------------------------------------
# Independent float64 reference statistics (no probe code involved).


def _bf16_to_float64_list(t):
    """bfloat16 -> exact Python floats via the bit pattern (independent of torch's casts)."""
    import struct

    bits = t.contiguous().reshape(-1).view(torch.int16).tolist()
    return [struct.unpack("<f", struct.pack("<I", (b & 0xFFFF) << 16))[0] for b in bits]


def logical_values(t):
    """Flat row-major logical values of ``t`` as Python floats (exact for all real dtypes)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return _bf16_to_float64_list(t)
    if t.dtype == torch.bool:
        return [1.0 if v else 0.0 for v in t.reshape(-1).tolist()]
    if t.is_floating_point():
        # float16/float32 -> float64 is exact; go through numpy for independence of the probe.
        return [float(v) for v in t.contiguous().reshape(-1).to(torch.float64).numpy().tolist()]
    return [float(v) for v in t.reshape(-1).tolist()]


# pos_checksum as docs/manifest.md defines it: the tensor viewed as a matrix [rows, cols] in
# logical row-major order (cols = size of the last dimension, rows = leading dimensions flattened,
# a 0-d tensor is [1, 1]); sum over the finite elements of x[r, c] * u(r) * v(c) with
# u(r) = (((r + 1) * 2654435761) mod 2**32) / 2**32 and v(c) = (((c + 1) * 2246822519) mod 2**32) / 2**32.
# (An earlier revision used one flat weight w(i) = ((i * 2654435761) mod 2**32) / 2**32.)
CHECKSUM_DEFINITION = "matrix"
COL_MUL = 2246822519


def row_weight(r):
    return (((r + 1) * HASH_MUL) % TWO_32) / TWO_32


def col_weight(c):
    return (((c + 1) * COL_MUL) % TWO_32) / TWO_32


def position_weights(shape):
    """Checksum weight u(r) * v(c) of every flat (row-major) index of a tensor of ``shape``."""
    n = 1
    for s in shape:
        n *= s
    cols = shape[-1] if len(shape) else 1
    return [row_weight(i // cols) * col_weight(i % cols) for i in range(n)]


def reduction_eps(dtype):
    """Relative accuracy to expect of mean / l2 / pos_checksum for an input dtype.

    Float16/bfloat16/float32 inputs may be reduced in float32 (pairwise sums: ~1e-7 * log2 n);
    float64, integer and bool inputs are reduced in float64.
    """
    if dtype in (torch.float16, torch.bfloat16, torch.float32):
        return 2e-6
    return 1e-12


def reference_stats(t):
    """Stats as the manifest documents them, in float64 / exact Python arithmetic; None when empty.

    The private key ``_abs_sum`` (sum of |x| over F) and ``_eps`` carry the comparison scale.
    """
    values = logical_values(t)
    n = len(values)
    if n == 0:
        return None
    weights = position_weights(list(t.shape))
    nan = sum(1 for v in values if math.isnan(v))
    inf = sum(1 for v in values if math.isinf(v))
    finite = [(i, v) for i, v in enumerate(values) if math.isfinite(v)]
    out = {"nan_count": nan, "inf_count": inf, "finite_count": len(finite)}
    if finite:
        fv = [v for _, v in finite]
        out["min"] = min(fv)
        out["max"] = max(fv)
        out["max_abs"] = max(abs(v) for v in fv)
        out["mean"] = math.fsum(fv) / len(fv)
    else:
        out.update(min=None, max=None, max_abs=None, mean=None)
    out["l2"] = math.sqrt(math.fsum(v * v for _, v in finite))
    out["pos_checksum"] = math.fsum(v * weights[i] for i, v in finite)
    out["_abs_sum"] = math.fsum(abs(v) for _, v in finite)
    out["_eps"] = reduction_eps(t.dtype)
    return out


def assert_stats_match(actual, expected):
    """Compare a manifest stats object with reference_stats(): counts and extrema exact, sums to _eps."""
    if expected is None:
        assert actual is None
        return
    assert actual is not None
    assert set(actual) == set(STAT_KEYS), sorted(actual)
    for key in ("nan_count", "inf_count", "finite_count"):
        assert actual[key] == expected[key], key
        assert isinstance(actual[key], int), key
    for key in ("min", "max", "max_abs"):
        assert actual[key] == expected[key], (key, actual[key], expected[key])  # exact
    eps = expected["_eps"]
    abs_sum = expected["_abs_sum"]
    finite = max(expected["finite_count"], 1)
    if expected["mean"] is None:
        assert actual["mean"] is None
    else:
        assert actual["mean"] == pytest.approx(expected["mean"], rel=eps, abs=eps * abs_sum / finite + 1e-300), "mean"
    assert actual["l2"] == pytest.approx(expected["l2"], rel=eps, abs=1e-300), "l2"
    assert actual["pos_checksum"] == pytest.approx(expected["pos_checksum"], rel=eps, abs=eps * abs_sum + 1e-300), (
        "pos_checksum (%s definition)" % CHECKSUM_DEFINITION
    )


# ---------------------------------------------------------------------------
# Subprocesses.

_PRELUDE = textwrap.dedent(
    """
    import importlib.util, json, os, sys
    import torch
    _spec = importlib.util.spec_from_file_location("dump_probe", %r)
    dp = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(dp)
    """
) % PROBE_PATH


def run_script(body, env=None, cwd=None, timeout=120):
    """Run ``body`` in a fresh interpreter after loading the probe as ``dp`` (env read at import)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("DUMP_PROBE") and k not in ("RANK", "WORLD_SIZE")}
    full_env.update(env or {})
    full_env.setdefault("OMP_NUM_THREADS", "1")
    # A fresh interpreter would compile the fused kernels again (seconds, and a note on stderr);
    # these tests are about process behaviour, and the statistics paths are tested in-process.
    full_env.setdefault("DUMP_PROBE_KERNEL", "torch")
    code = _PRELUDE + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code], env=full_env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


# ---------------------------------------------------------------------------
# safetensors, parsed by hand (the format: u64 LE header length, JSON header, raw LE bytes).

SAFETENSORS_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}


def parse_safetensors(path):
    """(header dict, {name: tensor}) of a safetensors file, without the safetensors package."""
    with open(path, "rb") as handle:
        blob = handle.read()
    assert len(blob) >= 8
    header_len = int.from_bytes(blob[:8], "little")
    header_bytes = blob[8:8 + header_len]
    header = json.loads(header_bytes.decode("utf-8"), parse_constant=_reject_constant)
    data = blob[8 + header_len:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = SAFETENSORS_DTYPES[info["dtype"]]
        shape = info["shape"]
        raw = bytearray(data[begin:end])
        if len(raw):
            flat = torch.frombuffer(raw, dtype=dtype)
        else:
            flat = torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(shape).clone()
    return header, tensors, header_len, len(data)
