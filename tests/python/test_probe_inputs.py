"""capture_inputs(): complete operator input sets, their manifest description and the replayable .pt."""

import json
import os
import time

import jsonschema
import pytest
import torch

from conftest import REPO, load_manifest, record


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


# --------------------------------------------------------------------------- issue 29: input
# statistics, linked outputs, the run's command line


def _tensor_args(entry):
    return {name: arg for name, arg in entry["args"].items() if arg["kind"] == "tensor"}


@pytest.mark.parametrize("kernel", ["auto", "torch"])
def test_input_stats_equal_capture_stats_bit_for_bit(make_probe, kernel):
    probe = make_probe(DUMP_PROBE_KERNEL=kernel)
    g = torch.Generator().manual_seed(3)
    special = torch.randn(4, 5, generator=g)
    special[1, 2], special[3, 0] = float("nan"), float("inf")
    tensors = {
        "f32": torch.randn(7, 9, generator=g) * 100,
        "bf16": torch.randn(6, 8, generator=g).to(torch.bfloat16),
        "f16": torch.randn(3, 4, 5, generator=g).to(torch.float16),
        "f64": torch.randn(5, generator=g, dtype=torch.float64),
        "strided": torch.randn(8, 6, generator=g).t()[1:5],
        "special": special,
        "all_nan": torch.full((3,), float("nan")),
        "ints": torch.arange(-6, 14).reshape(4, 5),
        "flags": torch.tensor([True, False, True]),
        "empty": torch.empty(0, 4),
        "scalar": torch.tensor(2.5),
    }
    probe.arm("r")
    for name, tensor in tensors.items():
        probe.capture(name, tensor)
    probe.capture_inputs("op", nested=[tensors["f32"], {"inner": tensors["ints"]}], **tensors)
    manifest = load_manifest(probe.finish())
    entry = manifest["input_sets"][0]
    args = _tensor_args(entry)
    assert set(args) == set(tensors)
    for name in tensors:
        captured = [r for r in manifest["records"] if r["stage"] == name][0]
        # The same object as JSON (exact float text, same keys and order), null where capture() has null.
        assert json.dumps(args[name]["stats"]) == json.dumps(captured["stats"]), name
    assert args["empty"]["stats"] is None
    assert args["special"]["stats"]["nan_count"] == 1 and args["special"]["stats"]["inf_count"] == 1
    nested = entry["args"]["nested"]["items"]
    assert json.dumps(nested[0]["stats"]) == json.dumps(args["f32"]["stats"])
    assert json.dumps(nested[1]["items"]["inner"]["stats"]) == json.dumps(args["ints"]["stats"])


def test_input_stats_are_read_back_in_finish_not_in_capture_inputs(probe, monkeypatch):
    probe.arm("r")
    reads = []
    real = probe._read_back
    monkeypatch.setattr(probe, "_read_back", lambda rows, *rest: reads.append(len(rows)) or real(rows, *rest))
    probe.capture_inputs("op", x=torch.ones(3, 2))
    assert reads == []  # nothing read while the model runs
    probe.capture("y", torch.ones(2))
    manifest = load_manifest(probe.finish())
    assert reads == [2]  # the record's and the input's statistics, one read-back
    assert manifest["input_sets"][0]["args"]["x"]["stats"]["finite_count"] == 6


def _outputs_dir(path, entry):
    return [(o, torch.load(os.path.join(os.path.dirname(path), o["file"]), weights_only=True)) for o in entry["outputs"]]


def test_outputs_link_the_next_occurrence_and_are_saved_whole(make_probe):
    probe = make_probe(DUMP_PROBE_ROWS="2", DUMP_PROBE_TENSOR="q_rope")
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(6, 4, generator=g), torch.randn(5, 3, generator=g)
    q_out = torch.randn(4, 6, generator=g).to(torch.bfloat16).t()  # not contiguous, 6 rows
    k_out = torch.randn(5, 3, generator=g)
    probe.arm("r")
    probe.capture("layers.0.q_rope", q)  # an earlier occurrence of an output stage
    probe.capture_inputs("layers.0.rope", _op="rope", q=q, k=k, outputs=("layers.0.q_rope", "layers.0.k_rope"))
    probe.capture("layers.0.q_rope", q_out)
    probe.capture("layers.0.k_rope", k_out)
    probe.capture("layers.0.q_rope", q_out * 2)  # a later one is not linked
    path = probe.finish()
    manifest = load_manifest(path)
    entry = manifest["input_sets"][0]
    assert "outputs" not in entry["args"] and entry["op"] == "rope"
    assert entry["outputs"] == [
        {"key": "layers.0.q_rope#2", "file": "inputs/layers.0.rope#1.outputs/layers.0.q_rope#2.pt"},
        {"key": "layers.0.k_rope#1", "file": "inputs/layers.0.rope#1.outputs/layers.0.k_rope#1.pt"},
    ]
    saved = _outputs_dir(path, entry)
    assert saved[0][1].dtype == torch.bfloat16 and saved[0][1].shape == (6, 4) and torch.equal(saved[0][1], q_out)
    assert torch.equal(saved[1][1], k_out)
    # DUMP_PROBE_ROWS bounds the record's own tensor file, not the linked output.
    assert record(manifest, "layers.0.q_rope", 2)["rows_kept"] == 2
    assert "warnings" not in manifest
    jsonschema.validate(manifest, json.load(open(os.path.join(REPO, "assets", "manifest.schema.json"))))


def test_a_single_output_name_and_two_sets_naming_one_output(probe):
    out = torch.arange(6.0).reshape(2, 3)
    probe.arm("r")
    probe.capture_inputs("a", x=torch.ones(2), outputs="y")
    probe.capture_inputs("b", x=torch.zeros(2), outputs=["y"])
    probe.capture("y", out)
    path = probe.finish()
    manifest = load_manifest(path)
    for entry in manifest["input_sets"]:
        ((link, tensor),) = _outputs_dir(path, entry)
        assert link["key"] == "y#1" and torch.equal(tensor, out)
    assert [e["outputs"][0]["file"] for e in manifest["input_sets"]] == ["inputs/a#1.outputs/y#1.pt", "inputs/b#1.outputs/y#1.pt"]


def test_an_output_never_captured_is_left_out_and_warned(probe, capsys):
    probe.arm("r")
    probe.capture("gone", torch.ones(2))  # before the set: not its output
    probe.capture_inputs("op", x=torch.ones(2), outputs=("gone", "y"))
    probe.capture("y", torch.ones(3))
    manifest = load_manifest(probe.finish())
    entry = manifest["input_sets"][0]
    assert [o["key"] for o in entry["outputs"]] == ["y#1"]
    (warning,) = manifest["warnings"]
    assert "op#1" in warning and "'gone'" in warning and "gone#2" in warning
    assert warning in capsys.readouterr().err


def test_a_device_set_saves_its_outputs_in_finish(probe, monkeypatch):
    # A set that waits for finish() (a device payload) hands its outputs over after itself.
    monkeypatch.setattr(probe, "_host_only", lambda payload: False)
    probe.arm("r")
    probe.capture_inputs("op", x=torch.ones(2), outputs="y")
    probe.capture("y", torch.full((4,), 7.0))
    path = probe.finish()
    ((link, tensor),) = _outputs_dir(path, load_manifest(path)["input_sets"][0])
    assert link["key"] == "y#1" and torch.equal(tensor, torch.full((4,), 7.0))


def test_an_output_file_never_overwrites(probe):
    probe.arm("r")
    probe.capture_inputs("op", x=torch.ones(2), outputs="y")
    directory = probe._state.window["dir"][0]
    os.makedirs(os.path.join(directory, "inputs", "op#1.outputs"))
    open(os.path.join(directory, "inputs", "op#1.outputs", "y#1.pt"), "w").close()
    probe.capture("y", torch.ones(3))
    path = probe.finish()
    (link,) = load_manifest(path)["input_sets"][0]["outputs"]
    assert link == {"key": "y#1", "file": "inputs/op#1.outputs/y#1.2.pt"}
    assert os.path.getsize(os.path.join(directory, "inputs", "op#1.outputs", "y#1.pt")) == 0


def test_outputs_never_raise_into_the_model(probe, capsys):
    probe.arm("r")
    probe.capture_inputs("op", x=torch.ones(2), outputs=("y", 3, None))  # odd names become strings
    probe.capture("y", torch.ones(1))
    manifest = load_manifest(probe.finish())
    assert [o["key"] for o in manifest["input_sets"][0]["outputs"]] == ["y#1"]
    assert len(manifest["warnings"]) == 2


def test_the_run_is_recorded(tmp_path):
    from conftest import run_script

    work = tmp_path / "work"
    work.mkdir()
    result = run_script(
        """
        import sys, torch
        sys.argv = ["serve.py", "--model", "tiny", "--tp", "1"]
        dp.arm("r")
        dp.capture("x", torch.ones(2))
        print(dp.finish())
        """,
        env={"DUMP_PROBE": "1", "DUMP_PROBE_DIR": str(tmp_path / "out"), "DUMP_PROBE_ROWS": "all",
             "NOT_DUMP_PROBE": "no"},
        cwd=str(work),
    )
    assert result.returncode == 0, result.stderr
    manifest = load_manifest(result.stdout.strip().splitlines()[-1])
    run = manifest["run"]
    assert run["argv"] == ["serve.py", "--model", "tiny", "--tp", "1"]
    assert run["cwd"] == str(work)
    import sys

    assert run["executable"] == sys.executable
    assert run["env"] == {"DUMP_PROBE": "1", "DUMP_PROBE_DIR": str(tmp_path / "out"), "DUMP_PROBE_ROWS": "all",
                          "DUMP_PROBE_KERNEL": "torch"}
    jsonschema.validate(manifest, json.load(open(os.path.join(REPO, "assets", "manifest.schema.json"))))


def test_the_run_never_raises(probe, monkeypatch):
    monkeypatch.setattr(os, "getcwd", lambda: (_ for _ in ()).throw(FileNotFoundError("removed")))
    monkeypatch.setattr(probe.sys, "argv", None)
    probe.arm("r")
    manifest = load_manifest(probe.finish())
    assert manifest["run"]["argv"] == [] and manifest["run"]["cwd"] == ""
    assert manifest["run"]["env"]["DUMP_PROBE"] == "1"


def test_python_m_dump_probe_records_its_own_command(tmp_path):
    import shutil
    import subprocess
    import sys

    shutil.copy(os.path.join(REPO, "assets", "dump_probe.py"), tmp_path / "dump_probe.py")
    (tmp_path / "model.py").write_text(
        "import sys, torch\nassert sys.argv == ['model.py', '--steps', '1']\n"
        "torch.nn.Sequential(torch.nn.Linear(3, 3))(torch.ones(2, 3))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUMP_PROBE")}
    env.update(DUMP_PROBE_DIR="out", DUMP_PROBE_KERNEL="torch")
    run = subprocess.run([sys.executable, "-m", "dump_probe", "--hook", "^0$", "model.py", "--steps", "1"],
                         cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    manifest = load_manifest(str(tmp_path / "out" / "rank0" / "match1-occ1" / "manifest.json"))
    assert manifest["run"]["argv"] == ["-m", "dump_probe", "--hook", "^0$", "model.py", "--steps", "1"]
    assert manifest["run"]["cwd"] == str(tmp_path)
    assert manifest["run"]["env"] == {"DUMP_PROBE": "1", "DUMP_PROBE_DIR": "out", "DUMP_PROBE_KERNEL": "torch"}


class _Pair(torch.nn.Module):
    def forward(self, x, scale=1.0):
        return x * scale, None, x + 1


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.pair = _Pair()

    def forward(self, x):
        return self.pair(self.lin(x), scale=2.0)


def test_hook_input_sets_link_each_call_to_its_own_outputs(probe):
    torch.manual_seed(0)
    net = _Net()
    probe.hook(net, stages=r"^(lin|pair)$", input_sets=r"^(lin|pair)$")
    x = torch.randn(5, 4)
    probe.arm("r")
    with torch.no_grad():
        net(x)
        net(x * 3)
    path = probe.finish()
    probe.unhook()
    manifest = load_manifest(path)
    sets = {(e["stage"], e["occurrence"]): e for e in manifest["input_sets"]}
    assert sorted(sets) == [("lin", 1), ("lin", 2), ("pair", 1), ("pair", 2)]
    lin2 = sets[("lin", 2)]
    assert lin2["op"] == "torch.nn.modules.linear.Linear"
    assert list(lin2["args"]) == ["input.0"]
    assert lin2["outputs"] == [{"key": "lin#2", "file": "inputs/lin#2.outputs/lin#2.pt"}]
    assert json.dumps(lin2["args"]["input.0"]["stats"]) != json.dumps(sets[("lin", 1)]["args"]["input.0"]["stats"])
    with torch.no_grad():
        expected = net.lin(x * 3)
    ((_, tensor),) = _outputs_dir(path, lin2)
    assert torch.equal(tensor, expected)
    pair1 = sets[("pair", 1)]
    assert pair1["op"].endswith("test_probe_inputs._Pair")
    # Positional then keyword inputs, one index sequence; the None output keeps its index.
    assert pair1["args"]["input.1"] == {"kind": "float", "value": 2.0}
    assert [o["key"] for o in pair1["outputs"]] == ["pair.output.0#1", "pair.output.2#1"]
    data = torch.load(os.path.join(os.path.dirname(path), pair1["file"]), weights_only=True)
    assert torch.equal(_rebuild(data["input.0"]), net.lin(x).detach())


def test_hook_input_sets_off_by_default_and_only_where_the_regex_matches(make_probe):
    probe = make_probe(DUMP_PROBE_OCCURRENCE="all")
    net = _Net()
    probe.hook(net, input_sets=r"^pair$")
    probe.arm("r")
    with torch.no_grad():
        net(torch.ones(2, 4))
    manifest = load_manifest(probe.finish())
    probe.unhook()
    assert [e["stage"] for e in manifest["input_sets"]] == ["pair"]
    probe.hook(net)
    probe.arm("r")
    with torch.no_grad():
        net(torch.ones(2, 4))
    assert load_manifest(probe.finish())["input_sets"] == []
