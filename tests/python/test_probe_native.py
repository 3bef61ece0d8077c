"""The native statistics path on cpu: dump_probe.py calling libdump_probe.so's dp_summarize.

With the library found ($DUMP_PROBE_LIB here: the one `cargo test` builds under target/),
cpu tensors get one pass of the native probe's statistics (src/probe_ffi/src/stats.rs) instead
of a compiled or eager torch kernel. Each case of test_probe_kernels.CASES gives the eager torch
ops' values (counts, min and max exactly; sums within tol * sum|x|), sharded checksums use the
full tensor's coordinates, and the manifest records stats_path "native".
"""

import os

import pytest
import torch

from conftest import REPO, load_manifest, record
from test_probe_kernels import CASES, _splits, assert_same_stats


def _library():
    """The newest libdump_probe.so under target/ (a workspace build's, or `cargo test`'s in
    deps/), or None."""
    found = [os.path.join(REPO, "target", profile, sub, "libdump_probe.so")
             for profile in ("debug", "release") for sub in ("", "deps")]
    found = [p for p in found if os.path.isfile(p)]
    return max(found, key=os.path.getmtime) if found else None


LIBRARY = _library()
pytestmark = pytest.mark.skipif(LIBRARY is None, reason="libdump_probe.so not built (cargo build -p dump_probe)")


@pytest.fixture
def native(make_probe, monkeypatch):
    probe = make_probe()
    monkeypatch.setenv("DUMP_PROBE_LIB", LIBRARY)
    monkeypatch.setattr(probe, "_KERNELS", {})
    call, why = probe._native()
    assert call is not None, why
    return probe


@pytest.mark.parametrize("name", sorted(CASES))
def test_native_matches_torch_ops(native, name):
    t = CASES[name]()
    if t.dtype not in native._NATIVE_DTYPES:
        pytest.skip("no native dtype")
    mine = native._native_statistics(t, torch.float64, None)
    assert_same_stats(mine, native._torch_statistics(t, torch.float64), t, torch.float64)


@pytest.mark.parametrize("kind", ["last_dim", "leading_dim", "middle_dim", "uneven", "zigzag"])
def test_native_checksum_uses_global_coordinates(native, kind):
    full, shards = _splits(native)[kind]
    total = 0.0
    for local, split in shards:
        mine = native._native_statistics(local, torch.float64, split)[6].item()
        eager = native._torch_statistics(local.contiguous(), torch.float64, split)[6].item()
        assert mine == pytest.approx(eager, rel=1e-6, abs=1e-6)
        total += mine
    assert total == pytest.approx(native._torch_statistics(full, torch.float64)[6].item(), rel=1e-6, abs=1e-6)


def test_the_default_cpu_path_is_native_when_the_library_is_found_and_recorded(native):
    native.arm("r")
    native.capture("x", CASES["float32_nonfinite"]())
    native.capture("ids", torch.arange(5))
    native.capture("half", CASES["float16"]())
    manifest = load_manifest(native.finish())
    for stage in ("x", "ids", "half"):
        assert record(manifest, stage)["stats_path"] == "native", stage
    x = record(manifest, "x")["stats"]
    assert (x["nan_count"], x["inf_count"], x["finite_count"]) == (2, 3, 9 * 13 - 5)


def test_a_missing_library_leaves_the_other_paths(make_probe, monkeypatch, tmp_path):
    probe = make_probe()
    monkeypatch.setenv("DUMP_PROBE_LIB", str(tmp_path / "nowhere.so"))
    monkeypatch.setattr(probe, "_KERNELS", {})
    call, why = probe._native()
    assert call is None and "nowhere.so not found" in why
    assert probe._stats_path(torch.ones(3)) == "torch"  # auto on cpu: no compile without the library


def test_a_failing_native_call_warns_once_and_the_record_says_torch(native, monkeypatch, capsys):
    def broken(*args):
        raise RuntimeError("dp_summarize returned status -2")

    monkeypatch.setattr(native, "_native_statistics", broken)
    native.arm("r")
    native.capture("a", torch.ones(4))
    native.capture("b", torch.ones(4))
    manifest = load_manifest(native.finish())
    assert record(manifest, "a")["stats_path"] == "torch"
    assert record(manifest, "b")["stats"]["finite_count"] == 4
    assert capsys.readouterr().err.count("dp_summarize returned status -2") == 1


def test_a_tensor_beyond_16_dimensions_takes_the_torch_ops_alone(native):
    native.arm("r")
    native.capture("deep", torch.ones([1] * 17 + [3]))
    native.capture("flat", torch.ones(3))
    manifest = load_manifest(native.finish())
    assert record(manifest, "deep")["stats_path"] == "torch"
    assert record(manifest, "deep")["stats"]["mean"] == 1.0
    assert record(manifest, "flat")["stats_path"] == "native"


def test_threads_capturing_at_once_get_distinct_seqs_in_record_order(native):
    import threading

    native.arm("r")
    start = threading.Barrier(4)

    def work(k):
        start.wait()
        for i in range(30):
            native.capture("t%d.s%d" % (k, i), torch.full((64, 64), float(k)))
            native.capture("shared", torch.ones(8))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    records = load_manifest(native.finish())["records"]
    assert [r["seq"] for r in records] == list(range(4 * 30 * 2))
    shared = [r["occurrence"] for r in records if r["stage"] == "shared"]
    assert shared == list(range(1, 4 * 30 + 1))
    for r in records:
        if r["stage"].startswith("t"):
            assert r["stats"]["mean"] == float(r["stage"][1]), r


def test_a_sparse_tensor_takes_the_torch_ops_alone_and_keeps_the_native_path(native, capsys):
    native.arm("r")
    native.capture("sparse", torch.eye(3).to_sparse())
    native.capture("dense", torch.ones(3))
    manifest = load_manifest(native.finish())
    assert record(manifest, "dense")["stats_path"] == "native"
    assert "native kernel failed" not in capsys.readouterr().err


def test_a_named_library_that_cannot_be_used_is_said_once(make_probe, monkeypatch, tmp_path, capsys):
    probe = make_probe()
    bogus = tmp_path / "libdump_probe.so"
    bogus.write_text("not a library")
    monkeypatch.setenv("DUMP_PROBE_LIB", str(bogus))
    monkeypatch.setattr(probe, "_KERNELS", {})
    probe.arm("r")
    probe.capture("a", torch.ones(3))
    probe.capture("b", torch.ones(3))
    manifest = load_manifest(probe.finish())
    err = [line for line in capsys.readouterr().err.splitlines() if "DUMP_PROBE_LIB" in line]
    assert len(err) == 1 and err[0].startswith("dump_probe: warning: DUMP_PROBE_LIB=%s cannot be used (OSError" % bogus), err
    assert {r["stats_path"] for r in manifest["records"]} == {"torch"}


def test_a_view_with_the_negation_bit_takes_the_torch_ops_with_its_true_sign(make_probe):
    """z.conj().imag is a float32 view whose memory holds the negated values (torch's lazy
    negation bit): reading it natively flipped every signed statistic (a fresh tester's find)."""
    import torch

    probe = make_probe(DUMP_PROBE_KERNEL="auto")
    z = torch.complex(torch.zeros(2, 2), torch.tensor([[2.0, -4.0], [8.0, -1.0]]))
    view = z.conj().imag
    assert view.is_neg()
    probe.arm("neg")
    probe.capture("neg", view)
    probe.capture("plain", torch.ones(3))
    manifest = load_manifest(probe.finish())
    neg, plain = manifest["records"]
    assert (neg["stats"]["min"], neg["stats"]["max"], neg["stats"]["mean"]) == (-8.0, 4.0, -1.25)
    assert neg["stats_path"] == "torch"
    assert plain["stats_path"] == probe._stats_path(torch.ones(3))  # its dtype keeps its path


@pytest.mark.parametrize("shape,transpose", [((6, 40), False), ((5, 3, 7), False), ((9, 4), True)])
def test_native_token_rows_match_the_definitions(native, shape, transpose):
    """dp_row_stats against the float64 definitions (test_probe_rows.expected_row), contiguous
    and strided, with a NaN and an infinity in one row."""
    from test_probe_rows import expected_row

    t = torch.randn(*shape, dtype=torch.float64)
    if transpose:
        t = t.t().contiguous().t()  # same logical values, column-major strides
    t[1].view(-1)[0] = float("nan") if not transpose else 0.0
    t32 = t.to(torch.float32)
    n = t.shape[0]
    fn = native._native_rows()
    assert fn is not None, "the library exports dp_row_stats"
    got = native._native_row_statistics(fn, t32, n, torch.arange(3, 3 + n))
    torch_ops = native._row_statistics_torch(t32, n, torch.arange(3, 3 + n))
    cols = native._row_cols(t32, n)
    for r in range(n):
        want = expected_row(t32[r].to(torch.float64), 3 + r, cols=cols)
        assert torch_ops[r, 1:].tolist() == pytest.approx(want[1:], rel=1e-4, abs=1e-4)
        assert got[r, 0].item() == want[0]
        assert got[r, 1:].tolist() == pytest.approx(want[1:], rel=1e-5, abs=1e-5), (r, got[r], want)
