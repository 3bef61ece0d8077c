"""capture_inputs(): complete operator input sets, their manifest description and the replayable .pt."""

import json
import os
import time

import jsonschema
import pytest
import torch

from conftest import REPO, load_manifest


def _rebuild(payload):
    """Inverse of the documented .pt encoding (what a replay tool does)."""
    if isinstance(payload, dict):
        if payload.get("__dump_probe_tensor__") == 1:
            return torch.as_strided(payload["span"], payload["shape"], payload["stride"], payload["offset_in_span"])
        if "__dump_probe_dtype__" in payload:
            return getattr(torch, payload["__dump_probe_dtype__"])
        if "__dump_probe_device__" in payload:
            return torch.device(payload["__dump_probe_device__"])
        if "__dump_probe_seq__" in payload:
            items = [_rebuild(v) for v in payload["items"]]
            return items if payload["__dump_probe_seq__"] == "list" else tuple(items)
        if "__dump_probe_dict__" in payload:
            return {k: _rebuild(v) for k, v in payload["items"].items()}
        if "__dump_probe_repr__" in payload:
            return payload["__dump_probe_repr__"]
    return payload


def _capture_and_load(probe, stage="op", **named):
    probe.arm("r")
    probe.capture_inputs(stage, **named)
    path = probe.finish()
    manifest = load_manifest(path)
    entry = manifest["input_sets"][-1]
    data = torch.load(os.path.join(os.path.dirname(path), entry["file"]), weights_only=True)
    return manifest, entry, data


def test_slice_of_large_buffer_saves_only_the_span(probe):
    cache = torch.randn(64, 32, 16, generator=torch.Generator().manual_seed(0))  # 32768 elements
    view = cache[10:13, 4:9:2, 3:11]  # shape (3, 3, 8), strides (512, 16, 1)
    _m, entry, data = _capture_and_load(probe, k_cache=view)
    payload = data["k_cache"]
    assert payload["__dump_probe_tensor__"] == 1
    span = payload["span"]
    extent = 1 + sum((s - 1) * st for s, st in zip(view.shape, view.stride()))
    assert span.shape == (extent,) and extent == 2 * 512 + 2 * 32 + 7 + 1
    assert span.numel() < cache.numel() // 10  # small: not the whole storage
    assert payload["shape"] == [3, 3, 8]
    assert payload["stride"] == [512, 32, 1]
    assert payload["storage_offset"] == view.storage_offset() == 10 * 512 + 4 * 16 + 3
    assert payload["offset_in_span"] == 0
    assert payload["dtype"] == "float32" and payload["device"] == "cpu"
    rebuilt = torch.as_strided(span, payload["shape"], payload["stride"], payload["offset_in_span"])
    assert rebuilt.stride() == view.stride()
    assert torch.equal(rebuilt, view)
    # the span holds exactly the storage elements [storage_offset, storage_offset + extent)
    assert torch.equal(span, cache.reshape(-1)[view.storage_offset(): view.storage_offset() + extent])
    # the manifest describes the original view's layout
    desc = entry["args"]["k_cache"]
    assert desc["kind"] == "tensor"
    assert (desc["shape"], desc["stride"], desc["storage_offset"]) == ([3, 3, 8], [512, 32, 1], view.storage_offset())
    assert desc["storage_ptr"] == cache.untyped_storage().data_ptr()
    assert desc["storage_nbytes"] == cache.numel() * 4
    assert desc["data_ptr"] == view.data_ptr()
    assert desc["is_contiguous"] is False
    assert desc["dtype"] == "float32" and desc["numel"] == 72 and desc["element_size"] == 4


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(4, 5).t(),
        lambda: torch.arange(10.0)[::3],
        lambda: torch.arange(6.0)[2:3].expand(4, 5),
        lambda: torch.arange(24, dtype=torch.int64).reshape(2, 3, 4).permute(2, 0, 1)[1:],
        lambda: torch.tensor(7, dtype=torch.int32),
        lambda: torch.empty(0, 3),
        lambda: (torch.arange(12).reshape(3, 4) % 2 == 0)[:, 1:],
        lambda: torch.randn(8, 8).to(torch.bfloat16)[2:6, ::2],
        lambda: torch.randn(3, 3).to(torch.float16).diagonal(),
    ],
    ids=["transpose", "strided", "expand", "permute", "0d", "empty", "bool", "bf16", "diagonal"],
)
def test_tensor_views_rebuild_exactly(probe, make):
    t = make()
    _m, entry, data = _capture_and_load(probe, x=t)
    rebuilt = _rebuild(data["x"])
    assert rebuilt.dtype == t.dtype
    assert rebuilt.shape == t.shape
    if t.numel():
        assert rebuilt.stride() == t.stride()
    assert torch.equal(rebuilt, t)
    assert entry["args"]["x"]["stride"] == list(t.stride())


def test_all_value_kinds(probe):
    q = torch.randn(2, 4, generator=torch.Generator().manual_seed(1))
    _m, entry, data = _capture_and_load(
        probe,
        "layers.0.rope",
        q=q,
        pos=17,
        eps=1e-6,
        neox=True,
        bias=None,
        dims=[1, 2, 3],
        pair=(4, 5.5),
        dtype=torch.bfloat16,
        mode="neox",
        device=torch.device("cpu"),
        opts={"k": 1, "t": [torch.ones(2)], "dt": torch.float32},
        nested=[[1, None], (True, "s")],
        big=2**70,
        neg=-3,
    )
    args = entry["args"]
    assert entry["stage"] == "layers.0.rope" and entry["occurrence"] == 1
    assert entry["file"] == "inputs/layers.0.rope#1.pt"
    assert args["pos"] == {"kind": "int", "value": 17}
    assert args["eps"] == {"kind": "float", "value": 1e-6}
    assert args["neox"] == {"kind": "bool", "value": True}
    assert args["bias"] == {"kind": "none"}
    assert args["dims"] == {"kind": "list", "items": [{"kind": "int", "value": v} for v in (1, 2, 3)]}
    assert args["pair"] == {"kind": "tuple", "items": [{"kind": "int", "value": 4}, {"kind": "float", "value": 5.5}]}
    assert args["dtype"] == {"kind": "dtype", "value": "bfloat16"}
    assert args["mode"] == {"kind": "str", "value": "neox"}
    assert args["device"] == {"kind": "device", "value": "cpu"}
    assert args["opts"]["kind"] == "dict"
    assert args["opts"]["items"]["k"] == {"kind": "int", "value": 1}
    assert args["opts"]["items"]["t"]["items"][0]["kind"] == "tensor"
    assert args["opts"]["items"]["dt"] == {"kind": "dtype", "value": "float32"}
    assert args["nested"] == {"kind": "list", "items": [
        {"kind": "list", "items": [{"kind": "int", "value": 1}, {"kind": "none"}]},
        {"kind": "tuple", "items": [{"kind": "bool", "value": True}, {"kind": "str", "value": "s"}]},
    ]}
    assert args["big"] == {"kind": "int", "value": 2**70}
    assert args["neg"] == {"kind": "int", "value": -3}
    assert args["q"]["kind"] == "tensor" and args["q"]["shape"] == [2, 4]
    assert list(args) == list(data)  # one payload entry per argument, same order

    # payload values, decoded
    assert torch.equal(_rebuild(data["q"]), q)
    assert data["pos"] == 17 and data["eps"] == 1e-6 and data["neox"] is True and data["bias"] is None
    assert _rebuild(data["dims"]) == [1, 2, 3]
    assert _rebuild(data["pair"]) == (4, 5.5)
    assert _rebuild(data["dtype"]) is torch.bfloat16
    assert data["mode"] == "neox"
    assert _rebuild(data["device"]) == torch.device("cpu")
    opts = _rebuild(data["opts"])
    assert opts["k"] == 1 and opts["dt"] is torch.float32 and torch.equal(opts["t"][0], torch.ones(2))
    assert _rebuild(data["nested"]) == [[1, None], (True, "s")]
    assert data["big"] == 2**70


def test_unknown_values_are_stored_as_repr_with_one_warning(probe, capsys):
    class Cfg:
        def __repr__(self):
            return "Cfg(block=16)"

    _m, entry, data = _capture_and_load(probe, cfg=Cfg(), other=Cfg())
    assert entry["args"]["cfg"] == {"kind": "repr", "value": "Cfg(block=16)"}
    assert data["cfg"] == {"__dump_probe_repr__": "Cfg(block=16)"}
    assert capsys.readouterr().err.splitlines() == ["dump_probe: warning: capture_inputs: Cfg values are stored as their repr"]


def test_input_values_are_snapshots(probe):
    """Inputs are copied at capture time; an in-place op afterwards (the usual case) does not leak in."""
    x = torch.arange(6.0)
    probe.arm("r")
    probe.capture_inputs("op", x=x[1:4])
    x.mul_(100)
    path = probe.finish()
    data = torch.load(os.path.join(os.path.dirname(path), "inputs", "op#1.pt"), weights_only=True)
    assert torch.equal(_rebuild(data["x"]), torch.tensor([1.0, 2.0, 3.0]))


def test_requires_grad_is_recorded(probe):
    w = torch.randn(3, requires_grad=True)
    _m, _entry, data = _capture_and_load(probe, w=w, plain=torch.ones(2))
    assert data["w"]["requires_grad"] is True
    assert data["plain"]["requires_grad"] is False
    assert data["w"]["span"].requires_grad is False


def test_occurrences_and_file_names(probe):
    probe.arm("r")
    for i in range(3):
        probe.capture_inputs("layers.x/rope", n=i)
    probe.capture_inputs("other", n=9)
    path = probe.finish()
    manifest = load_manifest(path)
    got = [(e["stage"], e["occurrence"], e["file"]) for e in manifest["input_sets"]]
    assert got == [
        ("layers.x/rope", 1, "inputs/layers.x_rope#1.pt"),
        ("layers.x/rope", 2, "inputs/layers.x_rope#2.pt"),
        ("layers.x/rope", 3, "inputs/layers.x_rope#3.pt"),
        ("other", 1, "inputs/other#1.pt"),
    ]
    window = os.path.dirname(path)
    for i in range(3):
        data = torch.load(os.path.join(window, "inputs", "layers.x_rope#%d.pt" % (i + 1)), weights_only=True)
        assert data == {"n": i}
    # input-set occurrences are counted separately from capture() occurrences
    assert manifest["records"] == []


def test_empty_input_set(probe):
    _m, entry, data = _capture_and_load(probe)
    assert entry["args"] == {} and data == {}


def test_probe_records_op_and_keeps_it_out_of_the_arguments(probe):
    x = torch.randn(3, 4)
    probe.arm("req")
    probe.capture_inputs("norm", _op="torch.ops.npu.npu_rms_norm", x=x, eps=1e-6)
    probe.capture_inputs("norm", x=x, eps=1e-6)
    probe.capture_inputs("act", _op=torch.nn.functional.silu, x=x)
    probe.capture_inputs("add", _op=torch.ops.aten.add.Tensor, a=x, b=x)
    probe.capture_inputs("none", _op=None, x=x)
    path = probe.finish()
    manifest = load_manifest(path)
    sets = manifest["input_sets"]
    assert sets[0]["op"] == "torch.ops.npu.npu_rms_norm"
    assert "op" not in sets[1] and "op" not in sets[4]
    assert sets[2]["op"] == "torch.nn.functional.silu"
    assert sets[3]["op"] == "torch.ops.aten.add.Tensor"
    assert list(sets[0]) == ["stage", "occurrence", "file", "op", "args"]
    assert list(sets[0]["args"]) == ["x", "eps"]
    data = torch.load(os.path.join(os.path.dirname(path), sets[0]["file"]), weights_only=True)
    assert sorted(data) == ["eps", "x"]
    with open(os.path.join(REPO, "assets", "manifest.schema.json")) as handle:
        jsonschema.Draft202012Validator(json.load(handle)).validate(manifest)


def test_probe_op_never_raises_into_the_model(probe, capsys):
    class Hostile:
        def __getattribute__(self, name):
            raise RuntimeError("no attributes here")

        def __str__(self):
            raise RuntimeError("no str either")

    probe.arm("req")
    probe.capture_inputs("s", _op=Hostile(), x=torch.ones(2))
    assert probe.armed()
    path = probe.finish()
    entry = load_manifest(path)["input_sets"][0]
    assert isinstance(entry["op"], str) and "Hostile" in entry["op"]


def test_a_host_input_set_is_written_while_the_model_runs_on(probe, dump_dir):
    """Its file is pickled and fsynced on the probe's writer thread before finish(): the window
    directory is claimed by the first input set and the file appears there with no manifest yet."""
    x = torch.arange(12.0).reshape(3, 4)
    probe.arm("r")
    probe.capture_inputs("op", x=x)
    window = os.path.join(dump_dir, "rank0", "match1-occ1")
    target = os.path.join(window, "inputs", "op#1.pt")
    for _ in range(500):  # the writer needs milliseconds; give a loaded machine ten seconds
        if os.path.exists(target):
            break
        time.sleep(0.02)
    assert os.path.exists(target), "the input set was not written before finish()"
    assert not os.path.exists(os.path.join(window, "manifest.json"))
    x.add_(100)  # a later write to the argument changes nothing saved
    path = probe.finish()
    assert os.path.dirname(path) == window
    entry = load_manifest(path)["input_sets"][0]
    assert entry["file"] == "inputs/op#1.pt"
    saved = _rebuild(torch.load(target, weights_only=True)["x"])
    assert torch.equal(saved, torch.arange(12.0).reshape(3, 4))


def test_an_input_set_that_cannot_be_written_costs_its_own_entry_only(probe, monkeypatch, capsys):
    real = probe._atomic_torch_save

    def failing(obj, path):
        if "bad#" in path:
            raise OSError(28, "No space left on device")
        return real(obj, path)

    monkeypatch.setattr(probe, "_atomic_torch_save", failing)
    probe.arm("r")
    probe.capture_inputs("good", x=torch.ones(2))
    probe.capture_inputs("bad", x=torch.ones(3))
    probe.capture("y", torch.ones(4))
    path = probe.finish()
    manifest = load_manifest(path)
    assert [e["stage"] for e in manifest["input_sets"]] == ["good"]
    assert [r["stage"] for r in manifest["records"]] == ["y"]
    err = capsys.readouterr().err
    assert "input set bad#1 not saved (OSError: [Errno 28] No space left on device)" in err


def test_a_device_input_set_is_written_in_finish(probe, capsys):
    """A payload on a device is not read before finish() (that would synchronize); a meta tensor,
    which has no values, is the device stand-in here: its set is refused in finish() with a
    warning and the host set beside it is kept."""
    probe.arm("r")
    probe.capture_inputs("dev", x=torch.empty(2, 3, device="meta"))
    probe.capture_inputs("host", x=torch.ones(2))
    path = probe.finish()
    manifest = load_manifest(path)
    assert [e["stage"] for e in manifest["input_sets"]] == ["host"]
    assert "input set dev#1 not saved (ValueError: meta tensors have no values to save)" in capsys.readouterr().err
