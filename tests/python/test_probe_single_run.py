"""What one run's records carry for dumpview's single-run rules (docs/manifest.md, records[]).

``local_checksum``: a record whose shard slices the tensor also gets the position checksum at
its own coordinates, bit for bit the ``pos_checksum`` of the same tensor captured without a
shard, on every statistics path (torch ops, Inductor, the native library), so ranks holding equal
pieces (a loader that read shard 0 on every rank) record equal values; proved in-process and on
a real 2-process gloo group. ``received``: the tokens an expert-parallel stage received, an int
or a one-element integer tensor read in finish(); invalid values warn and leave the field out.
``step``, ``block_ids`` and ``block_numel``: arm() metadata, kept, with a warning when mistyped.
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import jsonschema
import pytest
import torch

from conftest import REPO, SCHEMA_PATH, load_manifest, record, warning_lines

VALIDATOR = jsonschema.Draft202012Validator(json.loads(pathlib.Path(SCHEMA_PATH).read_text()))

# (shard, rank in group, group size, the local tensor's shape)
SLICES = [
    ("tp:1", 1, 2, (6, 8)),
    ("tp:0@4/10", 1, 3, (6, 8)),
    ("cp:0:zigzag", 1, 2, (6, 8)),
    ("tp:1", 0, 2, (3, 2, 4)),  # a middle dimension: rows move, not columns
]


def _library():
    found = [os.path.join(REPO, "target", profile, sub, "libdump_probe.so")
             for profile in ("debug", "release") for sub in ("", "deps")]
    found = [p for p in found if os.path.isfile(p)]
    return max(found, key=os.path.getmtime) if found else None


def _path_probe(make_probe, monkeypatch, path):
    """The probe with its cpu statistics on ``path`` ("torch", "inductor" or "native")."""
    if path == "torch":
        return make_probe(DUMP_PROBE_KERNEL="torch")
    if path == "inductor":
        probe = make_probe(DUMP_PROBE_KERNEL="fused")
        why = probe._inductor_unusable()
        if why:
            pytest.skip("inductor cannot compile here: %s" % why)
        return probe
    library = _library()
    if library is None:
        pytest.skip("libdump_probe.so not built (cargo build -p dump_probe)")
    probe = make_probe()
    monkeypatch.setenv("DUMP_PROBE_LIB", library)
    monkeypatch.setattr(probe, "_KERNELS", {})
    call, why = probe._native()
    assert call is not None, why
    return probe


def _bits(value):
    return torch.tensor(value, dtype=torch.float64).view(torch.int64).item()


@pytest.mark.parametrize("path", ["torch", "inductor", "native"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_local_checksum_is_the_unsharded_pos_checksum_bit_for_bit(make_probe, monkeypatch, path, dtype):
    probe = _path_probe(make_probe, monkeypatch, path)
    torch.manual_seed(7)
    probe.arm("req", parallel={"tp": (1, 3), "cp": (1, 2)})
    tensors = []
    for k, (shard, rank, size, shape) in enumerate(SLICES):
        probe._state.parallel = {"tp": (rank, size), "cp": (rank, size)}
        t = torch.randn(shape, dtype=torch.float64).to(dtype)
        t[0, 0] = float("nan") if k == 0 else t[0, 0]  # a non-finite element is left out of both
        tensors.append(t)
        probe.capture("sliced%d" % k, t, shard=shard)
        probe.capture("plain%d" % k, t)
    manifest = load_manifest(probe.finish())
    VALIDATOR.validate(manifest)
    for k, (shard, _rank, _size, _shape) in enumerate(SLICES):
        sliced, plain = record(manifest, "sliced%d" % k), record(manifest, "plain%d" % k)
        assert sliced["stats_path"] == plain["stats_path"] == path
        assert sliced["shard"] == shard
        assert _bits(sliced["local_checksum"]) == _bits(plain["stats"]["pos_checksum"]), (shard, path)
        assert sliced["local_checksum"] != sliced["stats"]["pos_checksum"], shard
        assert "local_checksum" not in plain
        # In the record's tail, after stats_path.
        keys = list(sliced)
        assert keys[-3:] == ["shard", "stats_path", "local_checksum"], keys


def test_no_local_checksum_without_a_slicing_shard(probe):
    probe.arm("req", parallel={"tp": (0, 2)})
    t = torch.randn(4, 6)
    probe.capture("none", t)
    probe.capture("replicated", t, shard="replicated:tp")
    probe.capture("partial", t, shard="partial:tp")
    probe.capture("refused", t, shard="tp:5")
    probe.capture("empty", torch.empty(0, 6), shard="tp:1")
    manifest = load_manifest(probe.finish())
    for stage in ("none", "replicated", "partial", "refused"):
        assert "local_checksum" not in record(manifest, stage), stage
    # Null statistics, null local checksum.
    empty = record(manifest, "empty")
    assert empty["stats"] is None and empty["shard"] == "tp:1" and empty["local_checksum"] is None
    VALIDATOR.validate(manifest)


def test_a_failing_local_computation_warns_once_and_leaves_the_field_out(make_probe, monkeypatch, capsys):
    probe = make_probe(DUMP_PROBE_KERNEL="torch", DUMP_PROBE_RANKS="all")
    real = probe._statistics_by_path

    def no_unsharded(tensor, acc=None, split=None, *args, **kwargs):
        if split is None:
            raise RuntimeError("out of device memory")
        return real(tensor, acc, split, *args, **kwargs)

    monkeypatch.setattr(probe, "_statistics_by_path", no_unsharded)
    probe.arm("req", parallel={"tp": (0, 2)})
    probe.capture("up", torch.ones(2, 4), shard="tp:1")
    probe.capture("up", torch.ones(2, 4), shard="tp:1")
    manifest = load_manifest(probe.finish())
    for occurrence in (1, 2):
        rec = record(manifest, "up", occurrence)
        assert rec["stats"] is not None and rec["shard"] == "tp:1" and "local_checksum" not in rec
    err = warning_lines(capsys.readouterr().err)
    assert len(err) == 1 and "capture('up'): no local_checksum (RuntimeError: out of device memory)" in err[0], err


def test_a_local_checksum_from_another_path_is_left_out(make_probe, monkeypatch, capsys):
    probe = make_probe(DUMP_PROBE_KERNEL="torch", DUMP_PROBE_RANKS="all")
    real = probe._statistics_by_path

    def other_path(tensor, acc=None, split=None, *args, **kwargs):
        row, path = real(tensor, acc, split, *args, **kwargs)
        return row, (path if split is not None else "inductor")

    monkeypatch.setattr(probe, "_statistics_by_path", other_path)
    probe.arm("req", parallel={"tp": (0, 2)})
    probe.capture("up", torch.ones(2, 4), shard="tp:1")
    rec = record(load_manifest(probe.finish()), "up")
    assert "local_checksum" not in rec
    assert "computed by inductor, the record's statistics by torch" in capsys.readouterr().err


_GLOO = textwrap.dedent("""
    import importlib.util, os, sys
    import torch, torch.distributed as dist, torch.multiprocessing as mp

    def worker(rank, out, init, probe_path):
        os.environ.update(DUMP_PROBE="1", DUMP_PROBE_DIR=out, DUMP_PROBE_RANKS="all", DUMP_PROBE_KERNEL="torch")
        dist.init_process_group("gloo", init_method="file://" + init, rank=rank, world_size=2)
        spec = importlib.util.spec_from_file_location("dump_probe", probe_path)
        probe = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(probe)
        torch.manual_seed(0)
        full = torch.randn(6, 8, dtype=torch.float32)
        probe.arm("req", parallel={"tp": (rank, 2)})
        probe.capture("loaded", full[:, :4], shard="tp:1")  # every rank read shard 0
        probe.capture("right", full[:, 4 * rank:4 * rank + 4], shard="tp:1")
        probe.capture("experts", full, received=torch.tensor(3 * rank))
        assert probe.finish() is not None
        dist.destroy_process_group()

    if __name__ == "__main__":
        out, init, probe_path = sys.argv[1:]
        mp.spawn(worker, args=(out, init, probe_path), nprocs=2, join=True)
""")


def test_equal_pieces_on_a_gloo_group_have_equal_local_checksums(tmp_path):
    script = tmp_path / "gloo_pieces.py"
    script.write_text(_GLOO)
    out = tmp_path / "dumps"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUMP_PROBE")}
    done = subprocess.run([sys.executable, str(script), str(out), str(tmp_path / "init"),
                           os.path.join(REPO, "assets", "dump_probe.py")],
                          capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr
    windows = [load_manifest(out / ("rank%d" % r) / "match1-occ1" / "manifest.json") for r in (0, 1)]
    for window in windows:
        VALIDATOR.validate(window)
    loaded = [record(w, "loaded") for w in windows]
    assert loaded[0]["local_checksum"] == loaded[1]["local_checksum"]
    assert loaded[0]["stats"]["pos_checksum"] != loaded[1]["stats"]["pos_checksum"]
    right = [record(w, "right") for w in windows]
    assert right[0]["local_checksum"] != right[1]["local_checksum"]
    assert [record(w, "experts")["received"] for w in windows] == [0, 3]


def test_received_is_written_from_an_int_or_an_integer_tensor(probe, capsys):
    probe.arm("req")
    t = torch.ones(3, 4)
    probe.capture("int", t, received=5)
    probe.capture("zero", t, received=0)
    probe.capture("tensor", t, received=torch.tensor(7, dtype=torch.int64))
    probe.capture("one_element", t, received=torch.tensor([2], dtype=torch.int32))
    probe.capture("none", t)
    manifest = load_manifest(probe.finish())
    VALIDATOR.validate(manifest)
    assert [record(manifest, s).get("received") for s in ("int", "zero", "tensor", "one_element", "none")] \
        == [5, 0, 7, 2, None]
    assert type(record(manifest, "tensor")["received"]) is int
    assert list(record(manifest, "int"))[-2:] == ["stats_path", "received"]
    assert capsys.readouterr().err == ""


def test_received_tensor_is_not_read_in_capture(probe, monkeypatch):
    probe.arm("req")
    count = torch.tensor(4)
    monkeypatch.setattr(torch.Tensor, "item", lambda self: pytest.fail("read in capture()"))
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: pytest.fail("read in capture()"))
    probe.capture("moe", torch.ones(2, 2), received=count)
    monkeypatch.undo()
    count.fill_(9)  # the model reuses its buffer: the value at capture time is kept
    assert record(load_manifest(probe.finish()), "moe")["received"] == 4


@pytest.mark.parametrize("value,why", [
    (-1, "negative"),
    (2.5, "a float"),
    (True, "a bool"),
    (torch.tensor(3.0), "a float32 tensor"),
    (torch.tensor([1, 2]), "a tensor of 2 elements"),
    (torch.tensor(True), "a bool tensor"),
    ("3", "a str"),
    (10**30, "beyond a 64-bit count"),
])
def test_an_invalid_received_warns_once_naming_the_stage_and_is_left_out(probe, capsys, value, why):
    probe.arm("req")
    probe.capture("moe.experts", torch.ones(2, 2), received=value)
    probe.capture("moe.experts", torch.ones(2, 2), received=value)
    manifest = load_manifest(probe.finish())
    assert probe.armed() is False  # finished, not disarmed by an error
    for occurrence in (1, 2):
        rec = record(manifest, "moe.experts", occurrence)
        assert "received" not in rec and rec["stats"] is not None
    err = warning_lines(capsys.readouterr().err)
    assert len(err) == 1, err
    assert "capture('moe.experts', received=" in err[0] and why in err[0] and "recorded without it" in err[0], err


def test_a_negative_received_tensor_is_found_in_finish(probe, capsys):
    probe.arm("req")
    probe.capture("moe", torch.ones(2), received=torch.tensor(-2))
    probe.capture("ok", torch.ones(2), received=torch.tensor(1))
    manifest = load_manifest(probe.finish())
    assert "received" not in record(manifest, "moe") and record(manifest, "ok")["received"] == 1
    err = warning_lines(capsys.readouterr().err)
    assert len(err) == 1 and "capture('moe', received=-2): negative; recorded without it" in err[0], err


def test_step_and_block_metadata_are_kept_and_mistyped_ones_warned(make_probe, capsys):
    probe = make_probe(DUMP_PROBE_OCCURRENCE="all")
    probe.arm("req", step=12, block_ids=[4, 9, 2], block_numel=2048)
    manifest = load_manifest(probe.finish())
    assert manifest["metadata"] == {"step": 12, "block_ids": [4, 9, 2], "block_numel": 2048}
    probe.arm("req", step=torch.tensor(13), block_ids=torch.tensor([1, 5]))
    manifest = load_manifest(probe.finish())
    assert manifest["metadata"] == {"step": 13, "block_ids": [1, 5]}
    assert capsys.readouterr().err == ""
    probe.arm("req", step="12", block_ids=[1, 2.0], block_numel=0)
    manifest = load_manifest(probe.finish())
    assert manifest["metadata"] == {"step": "12", "block_ids": [1, 2.0], "block_numel": 0}
    err = warning_lines(capsys.readouterr().err)
    assert len(err) == 3, err
    assert "arm(step=...): not an int (str)" in err[0]
    assert "arm(block_ids=...): not a list of ints (list)" in err[1]
    assert "arm(block_numel=...): not an int >= 1 (int)" in err[2]
