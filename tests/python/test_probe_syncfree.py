"""The capture path never reads device values on the host: checked on `meta` and with host reads forbidden."""

import pytest
import torch

from conftest import assert_stats_match, load_manifest, record, reference_stats

HOST_READS = ("item", "cpu", "tolist", "numpy", "__repr__", "__str__", "__format__",
              "__bool__", "__float__", "__int__", "__index__", "__array__")


class HostRead(AssertionError):
    pass


def _forbid_host_reads(monkeypatch, log):
    for name in HOST_READS:
        def raiser(self, *args, _name=name, **kwargs):
            log.append(_name)
            raise HostRead("Tensor.%s called on the capture path" % _name)

        monkeypatch.setattr(torch.Tensor, name, raiser)


# --------------------------------------------------------------------------- meta device


def test_meta_capture_path_never_reads_values(make_probe, dump_dir, capsys):
    probe = make_probe(DUMP_PROBE_TENSOR="")
    big = torch.empty(64, 128, device="meta", dtype=torch.bfloat16)
    assert probe.arm("r", token_ids=torch.empty(16, dtype=torch.int64, device="meta"), step=3) is True
    probe.capture("hidden", big)
    probe.capture("hidden_t", big.t())
    probe.capture("ids", torch.empty(7, dtype=torch.int32, device="meta"))
    probe.capture("mask", torch.empty(4, 4, dtype=torch.bool, device="meta"))
    probe.capture("empty", torch.empty(0, 3, device="meta"))
    probe.capture("scalar", torch.empty((), device="meta"))
    probe.capture_inputs("op", x=big[2:10, ::2], scale=0.5, dims=[1, 2], dtype=torch.float16, flag=None)
    # nothing went wrong before finish: no warning, still armed, every call recorded
    assert capsys.readouterr().err == ""
    assert probe.armed() is True
    assert len(probe._state.records) == 6
    assert all(r.stats is None or r.stats.device.type == "meta" for r in probe._state.records)
    assert len(probe._state.input_sets) == 1
    assert probe._state.input_sets[0]["args"]["x"]["shape"] == [8, 64]
    assert probe._state.input_sets[0]["args"]["x"]["stride"] == [128, 2]
    # finish() cannot read meta values; whatever it does, it does not raise into the caller
    probe.finish()
    assert probe.armed() is False


def test_meta_capture_only_window_writes_null_stats(make_probe, capsys):
    probe = make_probe(DUMP_PROBE_TENSOR="")
    probe.arm("r", token_ids=torch.empty(16, dtype=torch.int64, device="meta"))
    probe.capture("hidden", torch.empty(8, 4, device="meta"))
    probe.capture("hidden", torch.empty(8, 4, device="meta").t())
    assert capsys.readouterr().err == ""
    path = probe.finish()
    assert path is not None
    err = capsys.readouterr().err.splitlines()
    assert err == ["dump_probe: warning: statistics of meta tensors have no values; recorded as null"]
    manifest = load_manifest(path)
    assert manifest["metadata"]["token_ids"] == {"dtype": "int64", "shape": [16]}
    h1, h2 = manifest["records"]
    assert h1["stats"] is None and h2["stats"] is None
    assert h1["device"] == "meta"
    assert (h1["shape"], h1["stride"], h2["shape"], h2["stride"]) == ([8, 4], [4, 1], [4, 8], [1, 4])
    assert (h1["occurrence"], h2["occurrence"]) == (1, 2)


# --------------------------------------------------------------------------- host reads forbidden on cpu


def test_capture_path_makes_no_host_reads(make_probe, monkeypatch, capsys):
    probe = make_probe(DUMP_PROBE_TENSOR="^saved$", DUMP_PROBE_ROWS="2")
    g = torch.Generator().manual_seed(5)
    x = torch.randn(6, 4, generator=g)
    x[1, 1] = float("nan")
    x[2, 3] = float("-inf")
    ids = torch.tensor([11, 12, 13])
    tensors = {
        "x": x,
        "xt": x.t(),
        "saved": x[::2],
        "ints": torch.arange(10, dtype=torch.int64),
        "mask": x > 0,
        "half": x.to(torch.float16),
        "scalar": torch.tensor(2.5),
        "empty": torch.empty(0),
    }
    log = []
    _forbid_host_reads(monkeypatch, log)
    assert probe.arm("r", token_ids=ids, temperature=0.7, dtype=torch.bfloat16) is True
    for stage, t in tensors.items():
        probe.capture(stage, t)
    probe.capture_inputs("op", x=x[1:5, 1:3], ids=ids, n=3, scale=0.5, flag=True, none=None,
                         dims=[0, (1, 2)], dtype=torch.float16, name="silu")
    slot_ok = probe.graph_slot("g", x)
    probe.capture_graph("g", x * 2)
    monkeypatch.undo()

    assert log == []
    assert capsys.readouterr().err == ""
    assert slot_ok is True
    assert probe.armed() is True
    assert [r.meta["stage"] for r in probe._state.records] == list(tensors)
    # statistics are still device tensors, not host numbers, until finish()
    assert all(isinstance(r.stats, torch.Tensor) for r in probe._state.records if r.meta["numel"])

    manifest = load_manifest(probe.finish())
    for stage, t in tensors.items():
        assert_stats_match(record(manifest, stage)["stats"], reference_stats(t))
    assert record(manifest, "saved")["rows_kept"] == 2
    g_rec = [r for r in manifest["records"] if r["mode"] == "graph"]
    assert len(g_rec) == 1
    assert_stats_match(g_rec[0]["stats"], reference_stats(x * 2))
    assert manifest["metadata"] == {"token_ids": [11, 12, 13], "temperature": 0.7, "dtype": "bfloat16"}
    assert manifest["input_sets"][0]["args"]["n"] == {"kind": "int", "value": 3}


def test_arm_marks_slots_stale_without_host_reads(probe, monkeypatch):
    """arm() writes the NaN sentinel into every slot on the device (fill_), never reading a slot back."""
    probe.graph_slot("g", torch.ones(3))
    probe.graph_slot("h", torch.ones(3))
    probe.capture_graph("g", torch.full((3,), 2.0))
    log = []
    _forbid_host_reads(monkeypatch, log)
    assert probe.arm("r") is True
    probe.capture_graph("h", torch.full((3,), 4.0))
    monkeypatch.undo()
    assert log == []
    assert torch.isnan(probe._state.slots["g"].stats).all().item()
    assert probe._state.slots["h"].stats[0].item() == 0.0
    recs = load_manifest(probe.finish())["records"]
    assert [(r["stage"], r["stats"]["mean"]) for r in recs] == [("h", 4.0)]


def test_forbidding_host_reads_really_catches_them(monkeypatch):
    """Guard for the test above: the patches do fire on a synchronising call."""
    log = []
    _forbid_host_reads(monkeypatch, log)
    t = torch.ones(2)
    with pytest.raises(HostRead):
        t.sum().item()
    with pytest.raises(HostRead):
        "%s" % (t,)
    with pytest.raises(HostRead):
        if t.sum():
            pass
    monkeypatch.undo()
    assert log == ["item", "__str__", "__bool__"]


def test_finish_reads_back_in_one_transfer_per_device(probe, monkeypatch):
    """All record statistics (and slots) of one device come back in a single stacked copy."""
    probe.arm("r")
    for i in range(5):
        probe.capture("s%d" % i, torch.full((3,), float(i)))
    probe.graph_slot("g", torch.ones(2))
    probe.capture_graph("g", torch.ones(2))
    stacks = []
    real_stack = torch.stack

    def counting_stack(tensors, *args, **kwargs):
        stacks.append(len(tensors))
        return real_stack(tensors, *args, **kwargs)

    monkeypatch.setattr(probe.torch, "stack", counting_stack)
    path = probe.finish()
    monkeypatch.undo()
    assert stacks == [6]
    assert len(load_manifest(path)["records"]) == 6
