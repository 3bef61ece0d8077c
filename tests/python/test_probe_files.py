"""What lands on disk: never-overwrite, atomic writes, strict JSON, safetensors files, the JSON schema."""

import json
import os

import pytest
import torch

from conftest import (
    SCHEMA_PATH, all_files, all_manifests, load_manifest, parse_safetensors, record, run_script, warning_lines,
)


def _window(probe, label="r", value=1.0, **meta):
    probe.arm(label, **meta)
    probe.capture("x", torch.full((3, 2), value))
    return probe.finish()


# --------------------------------------------------------------------------- never overwrite


def test_second_run_into_same_dir_gets_suffix(make_probe, dump_dir, capsys):
    first = _window(make_probe(), value=1.0)
    with open(first, "rb") as handle:
        first_bytes = handle.read()
    assert capsys.readouterr().err == ""
    second = _window(make_probe(), value=2.0)
    err2 = capsys.readouterr().err
    third = _window(make_probe(), value=3.0)
    err3 = capsys.readouterr().err
    base = os.path.join(dump_dir, "rank0", "match1-occ1")
    assert first == os.path.join(base, "manifest.json")
    assert second == os.path.join(base + ".2", "manifest.json")
    assert third == os.path.join(base + ".3", "manifest.json")
    with open(first, "rb") as handle:
        assert handle.read() == first_bytes  # byte-identical afterwards
    assert record(load_manifest(first), "x")["stats"]["max"] == 1.0
    assert record(load_manifest(second), "x")["stats"]["max"] == 2.0
    assert warning_lines(err2) == ["dump_probe: warning: %s already holds a dump; writing %s.2 instead" % (base, base)]
    assert warning_lines(err3) == ["dump_probe: warning: %s already holds a dump; writing %s.3 instead" % (base, base)]


def test_existing_window_dir_with_foreign_content_is_kept(make_probe, dump_dir):
    base = os.path.join(dump_dir, "rank0", "match1-occ1")
    os.makedirs(base)
    with open(os.path.join(base, "manifest.json"), "w") as handle:
        handle.write("precious")
    path = _window(make_probe())
    assert path == os.path.join(base + ".2", "manifest.json")
    with open(os.path.join(base, "manifest.json")) as handle:
        assert handle.read() == "precious"


def test_atomic_write_refuses_existing_path(probe, tmp_path):
    target = tmp_path / "out.bin"
    probe._atomic_write_bytes(str(target), [b"abc", b"def"])
    assert target.read_bytes() == b"abcdef"
    with pytest.raises(FileExistsError):
        probe._atomic_write_bytes(str(target), [b"other"])
    assert target.read_bytes() == b"abcdef"
    assert sorted(os.listdir(tmp_path)) == ["out.bin"]  # no temporary left behind


def test_atomic_write_leaves_no_temp_on_success(probe, dump_dir):
    probe.arm("r")
    probe.capture("x", torch.ones(2))
    probe.capture_inputs("op", a=torch.ones(2))
    path = probe.finish()
    files = all_files(os.path.dirname(path))
    assert files == ["inputs/op#1.pt", "manifest.json", "rows.f32"]
    assert not any(".tmp." in f for f in files)


def test_writer_killed_mid_manifest_leaves_only_tmp(tmp_path):
    """A writer killed halfway through the manifest bytes leaves <manifest>.tmp.<pid>, never manifest.json."""
    out = tmp_path / "dumps"
    body = """
        import builtins
        real_open = builtins.open

        class Dying:
            def __init__(self, handle):
                self.handle = handle
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                self.handle.close()
            def write(self, data):
                self.handle.write(data[: len(data) // 2])
                self.handle.flush()
                os.fsync(self.handle.fileno())
                print("PID=%d LEN=%d" % (os.getpid(), len(data)), flush=True)
                os._exit(9)
            def __getattr__(self, name):
                return getattr(self.handle, name)

        def dying_open(path, mode="r", *args, **kwargs):
            handle = real_open(path, mode, *args, **kwargs)
            if "manifest.json" in os.fspath(path):
                return Dying(handle)
            return handle

        dp.open = dying_open  # module global shadows the builtin inside dump_probe only
        assert dp.arm("r", token_ids=[1, 2, 3]) is True
        dp.capture("x", torch.arange(6.0))
        dp.capture_inputs("op", a=torch.ones(3))
        dp.finish()
        print("NOT REACHED")
    """
    proc = run_script(body, env={"DUMP_PROBE": "1", "DUMP_PROBE_DIR": str(out), "DUMP_PROBE_TENSOR": "x"})
    assert proc.returncode == 9, (proc.returncode, proc.stdout, proc.stderr)
    assert "NOT REACHED" not in proc.stdout
    info = dict(part.split("=") for part in proc.stdout.split()[:2])
    pid, full_len = int(info["PID"]), int(info["LEN"])
    window = out / "rank0" / "match1-occ1"
    files = all_files(str(window))
    assert "manifest.json" not in files
    # The token rows are written before the manifest, which publishes them.
    assert files == ["inputs/op#1.pt", "manifest.json.tmp.%d" % pid, "rows.f32", "tensors/x#1.safetensors"]
    partial = (window / ("manifest.json.tmp.%d" % pid)).read_bytes()
    assert 0 < len(partial) == full_len // 2
    with pytest.raises(ValueError):
        json.loads(partial)  # the half-written bytes are not a manifest
    assert all_manifests(str(out)) == []


# --------------------------------------------------------------------------- strict JSON


def test_manifest_is_strict_json(make_probe):
    probe = make_probe(DUMP_PROBE_TENSOR=".")
    probe.arm("r", temperature=float("nan"), limit=float("inf"), ids=torch.tensor([1, 2]))
    probe.capture("nan", torch.tensor([float("nan"), 1.0, float("inf")]))
    probe.capture("allnan", torch.full((3,), float("nan")))
    probe.capture("overflow", torch.tensor([1.7e308, 1.7e308], dtype=torch.float64))
    probe.capture("empty", torch.empty(0))
    probe.capture_inputs("op", eps=float("-inf"), x=torch.tensor([float("nan")]))
    path = probe.finish()
    with open(path, "rb") as handle:
        text = handle.read().decode("utf-8")
    for token in ("NaN", "Infinity"):
        assert token not in text
    manifest = load_manifest(path)  # parse_constant raises on NaN/Infinity
    assert manifest["metadata"]["temperature"] == "nan"
    assert manifest["metadata"]["limit"] == "inf"
    assert manifest["input_sets"][0]["args"]["eps"] == {"kind": "float", "value": "-inf"}
    over = record(manifest, "overflow")["stats"]
    assert over["mean"] == "inf" and over["l2"] == "inf"
    assert record(manifest, "allnan")["stats"]["min"] is None
    assert record(manifest, "empty")["stats"] is None
    assert text.endswith("}\n")


def test_manifest_top_level_fields(make_probe, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    probe = make_probe(DUMP_PROBE_TENSOR="^x$", DUMP_PROBE_ROWS="7")
    probe.arm("req-42", step=1)
    probe.capture("x", torch.ones(2))
    path = probe.finish()
    manifest = load_manifest(path)
    assert manifest["format"] == "dumpview.manifest"
    assert manifest["schema_version"] == 1
    assert manifest["probe"] == probe.PROBE_VERSION
    assert (manifest["label"], manifest["match"], manifest["occurrence"]) == ("req-42", 1, 1)
    assert (manifest["rank"], manifest["world_size"]) == (0, 2)
    assert manifest["tensor_rows"] == 7 and manifest["tensor_pattern"] == "^x$"
    assert manifest["pid"] == os.getpid()
    assert manifest["torch_version"] == torch.__version__
    assert isinstance(manifest["host"], str) and manifest["host"]
    assert 0 < manifest["armed_unix_s"] <= manifest["finished_unix_s"]
    assert manifest["stats_dtype"] == "float64"


def test_manifest_validates_against_schema(make_probe, monkeypatch):
    jsonschema = pytest.importorskip("jsonschema")
    with open(SCHEMA_PATH) as handle:
        schema = json.load(handle)
    probe = make_probe(DUMP_PROBE_TENSOR="^(x|g)$", DUMP_PROBE_ROWS="1")
    probe.graph_slot("g", torch.ones(3, 2))
    probe.graph_slot("empty_g", torch.ones(3, 2))
    probe.arm("r", token_ids=torch.tensor([5, 6]), t=float("nan"), d=torch.float16, n={"a": [1, None]})
    probe.capture_graph("g", torch.ones(3, 2))  # the replay, inside the window
    probe.capture_graph("empty_g", torch.empty(0, 2))
    probe.capture("x", torch.randn(4, 3).t())
    probe.capture("nan", torch.tensor([float("nan")]))
    probe.capture("empty", torch.empty(0, 2))
    probe.capture("b", torch.tensor([True]))
    probe.capture_inputs("op", a=torch.ones(4)[1:], n=1, f=2.5, b=False, s="x", z=None, d=torch.int8,
                         dev=torch.device("cpu"), seq=(1, [2.0]), m={"k": torch.ones(1)}, o=object())
    manifest = load_manifest(probe.finish())
    jsonschema.validate(manifest, schema, cls=jsonschema.Draft202012Validator)
    assert [r["mode"] for r in manifest["records"]] == ["eager"] * 4 + ["graph"] * 2
    ids = [r["storage_id"] for r in manifest["records"]] + [manifest["input_sets"][0]["args"]["a"]["storage_id"]]
    assert all(isinstance(i, int) and i >= 1 for i in ids)


# --------------------------------------------------------------------------- safetensors files


ST_CASES = {
    "float32": lambda: torch.randn(5, 3, generator=torch.Generator().manual_seed(2)),
    "bfloat16": lambda: torch.randn(4, 6, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16),
    "float16": lambda: torch.randn(3, 3, generator=torch.Generator().manual_seed(4)).to(torch.float16),
    "int64": lambda: torch.arange(-10, 20).reshape(6, 5) * 123456789,
    "int32": lambda: torch.arange(12, dtype=torch.int32).reshape(3, 4),
    "uint8": lambda: torch.arange(250, 256, dtype=torch.uint8),
    "bool": lambda: torch.tensor([[True, False], [False, True], [True, True]]),
    "float32_noncontig": lambda: torch.arange(40.0).reshape(5, 8)[:, 1::3],
    "float32_0d": lambda: torch.tensor(3.5),
    "float32_nan": lambda: torch.tensor([float("nan"), float("inf"), -1.0]),
}


@pytest.mark.parametrize("name", sorted(ST_CASES))
def test_safetensors_file_contents(make_probe, name):
    t = ST_CASES[name]()
    probe = make_probe(DUMP_PROBE_TENSOR=".", DUMP_PROBE_ROWS="4")
    probe.arm("r")
    probe.capture("layers.0/out", t)
    path = probe.finish()
    rec = record(load_manifest(path), "layers.0/out")
    assert rec["tensor_file"] == "tensors/layers.0_out#1.safetensors"  # '/' replaced in the file name
    full = os.path.join(os.path.dirname(path), rec["tensor_file"])
    expected = t[:4] if t.dim() else t
    header, tensors, header_len, data_len = parse_safetensors(full)
    assert header_len % 8 == 0
    assert list(header) == ["layers.0/out#1"]
    info = header["layers.0/out#1"]
    assert info["shape"] == list(expected.shape)
    assert info["data_offsets"] == [0, expected.numel() * expected.element_size()]
    assert data_len == expected.numel() * expected.element_size()
    got = tensors["layers.0/out#1"]
    assert got.dtype == t.dtype
    assert torch.equal(got, expected) or (got.is_floating_point() and torch.allclose(got, expected, equal_nan=True))
    assert rec["rows_kept"] == (expected.shape[0] if t.dim() else 1)

    st = pytest.importorskip("safetensors.torch")
    loaded = st.load_file(full)
    assert list(loaded) == ["layers.0/out#1"]
    assert loaded["layers.0/out#1"].dtype == t.dtype
    assert torch.equal(loaded["layers.0/out#1"], got) or torch.allclose(
        loaded["layers.0/out#1"], got, equal_nan=True)


def test_safetensors_header_is_plain_json(make_probe):
    probe = make_probe(DUMP_PROBE_TENSOR=".")
    probe.arm("r")
    probe.capture("x", torch.ones(2, 2, dtype=torch.int64))
    path = probe.finish()
    raw = open(os.path.join(os.path.dirname(path), "tensors", "x#1.safetensors"), "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    assert header == {"x#1": {"dtype": "I64", "shape": [2, 2], "data_offsets": [0, 32]}}
    assert raw[8 + n:] == torch.ones(4, dtype=torch.int64).numpy().tobytes()


def test_saved_tensor_is_snapshot_at_capture_time(make_probe):
    """The saved tensor is a copy made at capture(): later in-place updates do not change the file."""
    probe = make_probe(DUMP_PROBE_TENSOR=".")
    buf = torch.zeros(3)
    probe.arm("r")
    probe.capture("buf", buf)
    buf.fill_(7.0)
    probe.capture("buf", buf)
    path = probe.finish()
    window = os.path.dirname(path)
    first = parse_safetensors(os.path.join(window, "tensors", "buf#1.safetensors"))[1]["buf#1"]
    second = parse_safetensors(os.path.join(window, "tensors", "buf#2.safetensors"))[1]["buf#2"]
    assert torch.equal(first, torch.zeros(3)) and torch.equal(second, torch.full((3,), 7.0))
    m = load_manifest(path)
    assert record(m, "buf", 1)["stats"]["max"] == 0.0 and record(m, "buf", 2)["stats"]["max"] == 7.0


def test_safe_name(probe):
    assert probe._safe_name("model.layers.3/attn out#2") == "model.layers.3_attn_out#2"
    assert probe._safe_name("../../etc/passwd#1") == ".._.._etc_passwd#1"
    assert len(probe._safe_name("x" * 500)) == 200
    # Issue 31, item 26: a name cut at 200 characters keeps its "#N" (and "#N.K") tail, so two
    # occurrences of a long stage name stay two files, and replay_op.py spells them alike.
    long = "m." * 150 + "attn"
    first, second = probe._safe_name(long + "#1"), probe._safe_name(long + "#2")
    assert (len(first), first[-2:], second[-2:]) == (200, "#1", "#2")
    assert probe._safe_name(long + "#3.12").endswith("#3.12")
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "replay_op_names", os.path.join(os.path.dirname(probe.__file__), "replay_op.py"))
    replay_op = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(replay_op)
    for key in (long + "#1", long + "#3.12", "x" * 500, "a/b#2"):
        assert replay_op._sanitised(key) == probe._safe_name(key)


def test_stage_names_that_sanitise_to_one_file_name_do_not_collide(make_probe):
    """'a/b' and 'a_b' (and names cut at 200 characters) map to one file name; both are kept."""
    probe = make_probe(DUMP_PROBE_TENSOR=".")
    long_a, long_b = "x" * 300 + "a", "x" * 300 + "b"
    probe.arm("r")
    probe.capture("a/b", torch.zeros(2))
    probe.capture("a_b", torch.ones(2))
    probe.capture(long_a, torch.full((1,), 2.0))
    probe.capture(long_b, torch.full((1,), 3.0))
    probe.capture_inputs("op/1", n=1)
    probe.capture_inputs("op_1", n=2)
    path = probe.finish()
    assert path is not None
    manifest = load_manifest(path)
    window = os.path.dirname(path)
    files = [r["tensor_file"] for r in manifest["records"]]
    assert files[:2] == ["tensors/a_b#1.safetensors", "tensors/a_b#1.2.safetensors"]
    assert len(set(files)) == 4
    for rec, value in zip(manifest["records"], (0.0, 1.0, 2.0, 3.0)):
        _header, tensors, _n, _d = parse_safetensors(os.path.join(window, rec["tensor_file"]))
        key = "%s#1" % rec["stage"]
        assert list(tensors) == [key]  # the tensor keeps its real (unsanitised) name
        assert float(tensors[key].max()) == value
    inputs = [e["file"] for e in manifest["input_sets"]]
    assert inputs == ["inputs/op_1#1.pt", "inputs/op_1#1.2.pt"]
    assert [torch.load(os.path.join(window, f), weights_only=True)["n"] for f in inputs] == [1, 2]


def test_a_file_published_meanwhile_by_another_process_is_never_replaced(probe, tmp_path, monkeypatch):
    """The existence check and the publish are apart in time: another process may publish the
    same name between them. link(2) refuses an existing name where rename(2) would replace it."""
    path = str(tmp_path / "manifest.json")
    with open(path, "wb") as handle:
        handle.write(b"the other process's window")
    monkeypatch.setattr(probe.os.path, "exists", lambda _p: False)  # the check ran before it
    with pytest.raises(FileExistsError, match="written by another process meanwhile"):
        probe._atomic_write_bytes(path, [b"this process's window"])
    monkeypatch.undo()
    with open(path, "rb") as handle:
        assert handle.read() == b"the other process's window"
    assert os.listdir(str(tmp_path)) == ["manifest.json"]  # no temporary file left behind
