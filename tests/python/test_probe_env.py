"""Environment variables of the probe: arming, directory, ranks, tensors, rows, format, invalid values."""

import os

import pytest
import torch

from conftest import all_files, all_manifests, load_manifest, parse_safetensors, record, run_script, warning_lines


def _one_window(probe, stages=("a",), label="req"):
    opened = probe.arm(label)
    for stage in stages:
        probe.capture(stage, torch.arange(12, dtype=torch.float32).reshape(4, 3))
    return opened, probe.finish()


# --------------------------------------------------------------------------- DUMP_PROBE


@pytest.mark.parametrize("value", [None, "0", "", " ", "false", "no", "off", "2", "enabled"])
def test_dump_probe_off_values_leave_probe_inert(make_probe, dump_dir, capsys, value):
    probe = make_probe(DUMP_PROBE=value)
    assert probe.arm("req", token_ids=[1, 2]) is False
    assert probe.armed() is False
    probe.capture("a", torch.ones(3))
    probe.capture_inputs("op", x=torch.ones(3))
    assert probe.graph_slot("g", torch.ones(3)) is False
    probe.capture_graph("g", torch.ones(3))
    assert probe.finish() is None
    assert not os.path.exists(dump_dir)
    err = capsys.readouterr().err
    if value in ("2", "enabled"):
        # an unknown value is not silently off: one line says so, once
        assert warning_lines(err) == [
            "dump_probe: warning: DUMP_PROBE=%r is neither 1/true/yes/on (armed) nor 0/false/no/off (off); "
            "the probe stays off" % value]
    else:
        assert err == ""


def test_unknown_dump_probe_value_is_said_at_import(tmp_path):
    out = tmp_path / "dumps"
    proc = run_script("assert dp.arm('r') is False\n", env={"DUMP_PROBE": "2", "DUMP_PROBE_DIR": str(out)})
    assert proc.returncode == 0, proc.stderr
    lines = warning_lines(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("dump_probe: warning: DUMP_PROBE='2' is neither"), lines
    assert not out.exists()


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes", "on", " On "])
def test_dump_probe_on_values_arm(make_probe, dump_dir, value):
    probe = make_probe(DUMP_PROBE=value)
    opened, path = _one_window(probe)
    assert opened is True
    assert path == os.path.join(dump_dir, "rank0", "match1-occ1", "manifest.json")
    assert os.path.isfile(path)


def test_invalid_values_are_silent_when_probe_is_off(make_probe, capsys):
    probe = make_probe(DUMP_PROBE="0", DUMP_PROBE_MATCH="x", DUMP_PROBE_TENSOR="(")
    assert probe.arm("req") is False
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- DUMP_PROBE_DIR


def test_dump_dir_is_used(make_probe, tmp_path):
    target = tmp_path / "elsewhere" / "deep"
    probe = make_probe(DUMP_PROBE_DIR=str(target))
    _opened, path = _one_window(probe)
    assert path == os.path.join(str(target), "rank0", "match1-occ1", "manifest.json")
    assert all_files(str(target)) == [os.path.join("rank0", "match1-occ1", name) for name in ("manifest.json", "rows.f32")]


def test_dump_dir_default_is_relative_dump_probe_out(make_probe, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for value in (None, ""):
        probe = make_probe(DUMP_PROBE_DIR=value)
        _opened, path = _one_window(probe)
        assert path.startswith("dump_probe_out" + os.sep)
    assert sorted(os.listdir(tmp_path / "dump_probe_out" / "rank0")) == ["match1-occ1", "match1-occ1.2"]


# --------------------------------------------------------------------------- DUMP_PROBE_RANKS


def test_ranks_default_is_rank_zero_only(make_probe, dump_dir, monkeypatch):
    probe = make_probe()
    assert probe._config.ranks == {0}
    monkeypatch.setenv("RANK", "1")
    assert probe.arm("req") is False
    monkeypatch.setenv("RANK", "0")
    probe = make_probe()
    opened, path = _one_window(probe)
    assert opened and load_manifest(path)["rank"] == 0


@pytest.mark.parametrize("rank,writes", [(0, False), (1, True), (2, True), (3, False)])
def test_ranks_list(make_probe, dump_dir, monkeypatch, rank, writes):
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", "4")
    probe = make_probe(DUMP_PROBE_RANKS="1,2")
    assert probe._config.ranks == {1, 2}
    opened, path = _one_window(probe)
    assert opened is writes
    if writes:
        assert path == os.path.join(dump_dir, "rank%d" % rank, "match1-occ1", "manifest.json")
        manifest = load_manifest(path)
        assert manifest["rank"] == rank
        assert manifest["world_size"] == 4
    else:
        assert path is None
        assert not os.path.exists(dump_dir)


def test_ranks_all(make_probe, dump_dir, monkeypatch):
    monkeypatch.setenv("RANK", "7")
    probe = make_probe(DUMP_PROBE_RANKS="all")
    assert probe._config.ranks is None
    opened, path = _one_window(probe)
    assert opened is True
    assert load_manifest(path)["rank"] == 7
    assert path == os.path.join(dump_dir, "rank7", "match1-occ1", "manifest.json")


def test_ranks_with_spaces_and_empty_parts(make_probe):
    assert make_probe(DUMP_PROBE_RANKS=" 3, ,5 ")._config.ranks == {3, 5}
    assert make_probe(DUMP_PROBE_RANKS="ALL")._config.ranks is None


def test_unselected_rank_still_counts_labels(make_probe, monkeypatch):
    """Selection is per label on every rank; a rank that does not write keeps the same counters."""
    monkeypatch.setenv("RANK", "1")
    probe = make_probe()
    assert probe.arm("a") is False
    assert probe.arm("b") is False
    assert probe._state.labels == {"a": (1, 1), "b": (2, 1)}


def test_rank_from_torch_distributed_overrides_env(tmp_path):
    """An initialised gloo group (world 1, rank 0) decides the rank, not $RANK."""
    out = tmp_path / "dumps"
    body = """
        import torch.distributed as dist
        x = torch.arange(6, dtype=torch.float32)
        # Before init: $RANK=3 decides, rank 3 is not selected.
        assert dp.current_rank() == 3, dp.current_rank()
        assert dp.arm("before") is False
        dist.init_process_group("gloo", init_method="file://%s", rank=0, world_size=1)
        assert dp.current_rank() == 0
        assert dp._world_size() == 1
        dp._reset_for_tests(dict(os.environ))
        assert dp.arm("after", step=1) is True
        dp.capture("x", x)
        path = dp.finish()
        print("PATH=" + path)
        dp._reset_for_tests(dict(os.environ, DUMP_PROBE_RANKS="1"))
        assert dp.arm("after") is False
        dist.destroy_process_group()
    """ % (tmp_path / "pg_store")
    proc = run_script(
        body, env={"DUMP_PROBE": "1", "DUMP_PROBE_DIR": str(out), "RANK": "3", "WORLD_SIZE": "8"}
    )
    assert proc.returncode == 0, proc.stderr
    path = [line[5:] for line in proc.stdout.splitlines() if line.startswith("PATH=")][0]
    assert path == os.path.join(str(out), "rank0", "match1-occ1", "manifest.json")
    manifest = load_manifest(path)
    assert manifest["rank"] == 0
    assert manifest["world_size"] == 1  # from the group, not $WORLD_SIZE=8
    assert manifest["label"] == "after"
    assert all_manifests(str(out)) == [path]


def test_environment_is_read_at_import(tmp_path):
    """A plain import picks the configuration up from os.environ; later env changes do not matter."""
    out = tmp_path / "dumps"
    body = """
        assert dp._config.enabled is True
        assert dp._config.match == 2 and dp._config.occurrence == 1
        assert dp._config.rows == 3 and dp._config.tensor_pattern == "^keep$"
        os.environ["DUMP_PROBE"] = "0"
        os.environ["DUMP_PROBE_MATCH"] = "1"
        assert dp.arm("first") is False
        assert dp.arm("second") is True
        dp.capture("keep", torch.arange(10.0))
        print("PATH=" + dp.finish())
    """
    proc = run_script(
        body,
        env={"DUMP_PROBE": "1", "DUMP_PROBE_DIR": str(out), "DUMP_PROBE_MATCH": "2",
             "DUMP_PROBE_ROWS": "3", "DUMP_PROBE_TENSOR": "^keep$"},
    )
    assert proc.returncode == 0, proc.stderr
    path = [line[5:] for line in proc.stdout.splitlines() if line.startswith("PATH=")][0]
    # the only line on stderr: the window's path, once, at exit
    assert warning_lines(proc.stderr) == ["dump_probe: wrote %s (1 record, 200 bytes of token rows in rows.f32)" % path]
    manifest = load_manifest(path)
    assert manifest["label"] == "second" and manifest["match"] == 2
    rec = record(manifest, "keep")
    assert (rec["rows_kept"], rec["rows_total"], rec["truncated"]) == (3, 10, True)


def test_invalid_environment_at_import_warns_once(tmp_path):
    out = tmp_path / "dumps"
    body = """
        assert dp.arm("r") is False
        dp.capture("a", torch.ones(2))
        assert dp.finish() is None
    """
    proc = run_script(body, env={"DUMP_PROBE": "1", "DUMP_PROBE_DIR": str(out), "DUMP_PROBE_ROWS": "-1"})
    assert proc.returncode == 0, proc.stderr
    lines = warning_lines(proc.stderr)
    assert len(lines) == 1, lines
    assert lines[0].startswith("dump_probe: warning: DUMP_PROBE_ROWS=")
    assert not out.exists()


# --------------------------------------------------------------------------- invalid values


INVALID = [
    ({"DUMP_PROBE_MATCH": "x"}, "DUMP_PROBE_MATCH"),
    ({"DUMP_PROBE_MATCH": "1.5"}, "DUMP_PROBE_MATCH"),
    ({"DUMP_PROBE_MATCH": "0"}, "DUMP_PROBE_MATCH"),
    ({"DUMP_PROBE_MATCH": "-2"}, "DUMP_PROBE_MATCH"),
    ({"DUMP_PROBE_OCCURRENCE": "two"}, "DUMP_PROBE_OCCURRENCE"),
    ({"DUMP_PROBE_OCCURRENCE": "0"}, "DUMP_PROBE_OCCURRENCE"),
    ({"DUMP_PROBE_TENSOR": "layers.(3"}, "DUMP_PROBE_TENSOR"),
    ({"DUMP_PROBE_TENSOR": "[a-"}, "DUMP_PROBE_TENSOR"),
    ({"DUMP_PROBE_RANKS": "x"}, "DUMP_PROBE_RANKS"),
    ({"DUMP_PROBE_RANKS": "0,-1"}, "DUMP_PROBE_RANKS"),
    ({"DUMP_PROBE_RANKS": "0;1"}, "DUMP_PROBE_RANKS"),
    ({"DUMP_PROBE_ROWS": "-1"}, "DUMP_PROBE_ROWS"),
    ({"DUMP_PROBE_ROWS": "many"}, "DUMP_PROBE_ROWS"),
    ({"DUMP_PROBE_TENSOR_FORMAT": "npy"}, "DUMP_PROBE_TENSOR_FORMAT"),
    ({"DUMP_PROBE_SYNC_INPUTS": "always"}, "DUMP_PROBE_SYNC_INPUTS"),
    # several invalid values still give a single line, starting with the first one checked
    ({"DUMP_PROBE_RANKS": "x", "DUMP_PROBE_ROWS": "-1", "DUMP_PROBE_MATCH": "y"}, "DUMP_PROBE_RANKS"),
]


def test_every_invalid_value_is_named(make_probe, capsys):
    """Not only the first: one line names each invalid variable, in the order they are read."""
    make_probe(DUMP_PROBE_RANKS="x", DUMP_PROBE_ROWS="-1", DUMP_PROBE_MATCH="y", DUMP_PROBE_KERNEL="fast")
    lines = warning_lines(capsys.readouterr().err)
    assert len(lines) == 1, lines
    line = lines[0]
    names = ["DUMP_PROBE_RANKS='x'", "DUMP_PROBE_ROWS='-1'", "DUMP_PROBE_MATCH='y'", "DUMP_PROBE_KERNEL='fast'"]
    positions = [line.find(name) for name in names]
    assert all(p >= 0 for p in positions), line
    assert positions == sorted(positions)
    assert line.endswith("; the probe stays disarmed")


EMPTY_IS_UNSET = ["DUMP_PROBE_DIR", "DUMP_PROBE_RANKS", "DUMP_PROBE_TENSOR", "DUMP_PROBE_ROWS", "DUMP_PROBE_MATCH",
                  "DUMP_PROBE_OCCURRENCE", "DUMP_PROBE_REQUEST", "DUMP_PROBE_HOOK", "DUMP_PROBE_ROW_STATS",
                  "DUMP_PROBE_ROW_POSITIONS", "DUMP_PROBE_TENSOR_FORMAT", "DUMP_PROBE_KERNEL",
                  "DUMP_PROBE_SYNC_INPUTS"]


@pytest.mark.parametrize("name", EMPTY_IS_UNSET)
@pytest.mark.parametrize("empty", ["", "  "])
def test_empty_value_is_the_same_as_unset(make_probe, capsys, monkeypatch, tmp_path, name, empty):
    """One rule for every variable: an empty or blank value is the default, never an error."""
    monkeypatch.chdir(tmp_path)
    unset = make_probe(DUMP_PROBE_DIR=None)._config
    capsys.readouterr()
    env = {"DUMP_PROBE_DIR": None, name: empty}
    got = make_probe(**env)._config
    assert capsys.readouterr().err == ""
    assert got.error is None
    fields = ("directory", "ranks", "tensor_pattern", "rows", "match", "occurrences", "request", "row_stats",
              "row_positions", "tensor_format", "kernel", "sync_inputs")
    assert {f: getattr(got, f) for f in fields} == {f: getattr(unset, f) for f in fields}
    assert (got.tensor_regex, got.hook_pattern, got.row_regex) == (None, None, None)


# --------------------------------------------------------------------------- DUMP_PROBE_DIR checked at import


def test_impossible_dump_dir_is_one_warning_at_import(tmp_path):
    """A directory under a regular file can never be made: said once at import, nothing created, and
    the model's captures are quiet no-ops (not a disarm at the first capture)."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = blocker / "dumps"
    body = """
        assert dp.arm("r") is False
        dp.capture("a", torch.ones(2))
        assert dp.finish() is None
    """
    proc = run_script(body, env={"DUMP_PROBE": "1", "DUMP_PROBE_DIR": str(out)})
    assert proc.returncode == 0, proc.stderr
    lines = warning_lines(proc.stderr)
    assert len(lines) == 1, lines
    assert lines[0].startswith("dump_probe: warning: DUMP_PROBE_DIR=%r cannot be a directory" % str(out)), lines
    assert lines[0].endswith("the probe stays disarmed")
    assert "failed" not in lines[0]
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_unwritable_dump_dir_is_one_warning_at_import(make_probe, capsys, tmp_path, monkeypatch):
    """A directory the process may not write (os.access says so; root may write anywhere, so the test
    says it for the process) is one warning naming it, and nothing is created."""
    parent = tmp_path / "ro"
    parent.mkdir()
    real_access = os.access

    def access(path, mode, *args, **kwargs):
        if os.path.abspath(path) == str(parent) and mode & os.W_OK:
            return False
        return real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)
    for target in (parent, parent / "dumps" / "deep"):
        probe = make_probe(DUMP_PROBE_DIR=str(target))
        lines = warning_lines(capsys.readouterr().err)
        assert len(lines) == 1, lines
        assert lines[0].startswith("dump_probe: warning: DUMP_PROBE_DIR=%r is not writable: %s" % (str(target), parent))
        assert probe.arm("req") is False
        probe.capture("a", torch.ones(3))
        assert probe.finish() is None
        assert capsys.readouterr().err == ""
    assert os.listdir(parent) == []


def test_dump_dir_that_can_be_created_is_not_created_at_import(make_probe, capsys, tmp_path):
    target = tmp_path / "a" / "b"
    probe = make_probe(DUMP_PROBE_DIR=str(target))
    assert capsys.readouterr().err == ""
    assert probe._config.error is None
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("env,name", INVALID, ids=[str(sorted(e.items())) for e, _ in INVALID])
def test_invalid_value_warns_once_and_disarms(make_probe, dump_dir, capsys, env, name):
    probe = make_probe(DUMP_PROBE_TENSOR=".", **env) if "DUMP_PROBE_TENSOR" not in env else make_probe(**env)
    err = capsys.readouterr().err
    lines = warning_lines(err)
    assert len(lines) == 1, lines
    assert lines[0].startswith("dump_probe: warning: %s=" % name), lines[0]
    assert lines[0].endswith("the probe stays disarmed")
    assert probe._config.error is not None

    # Every entry point is a quiet no-op: nothing raised, nothing written, no further warnings.
    assert probe.arm("req", token_ids=torch.arange(4)) is False
    assert probe.armed() is False
    probe.capture("a", torch.ones(4))
    probe.capture_inputs("op", x=torch.ones(4))
    assert probe.graph_slot("g", torch.ones(4)) is False
    probe.capture_graph("g", torch.ones(4))
    assert probe.arm("req") is False
    assert probe.finish() is None
    assert not os.path.exists(dump_dir)
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- DUMP_PROBE_TENSOR


def test_tensor_regex_selects_stages(make_probe):
    probe = make_probe(DUMP_PROBE_TENSOR=r"attn_out$|^embed")
    probe.arm("req")
    probe.capture("embed", torch.ones(2, 2))
    probe.capture("layers.0.attn_out", torch.ones(2, 2))
    probe.capture("layers.0.attn_out.norm", torch.ones(2, 2))  # search(), not match: $ excludes it
    probe.capture("layers.0.mlp", torch.ones(2, 2))
    probe.capture("layers.1.attn_out", torch.ones(2, 2))
    manifest = load_manifest(probe.finish())
    files = {r["stage"]: r["tensor_file"] for r in manifest["records"]}
    assert files == {
        "embed": "tensors/embed#1.safetensors",
        "layers.0.attn_out": "tensors/layers.0.attn_out#1.safetensors",
        "layers.0.attn_out.norm": None,
        "layers.0.mlp": None,
        "layers.1.attn_out": "tensors/layers.1.attn_out#1.safetensors",
    }
    assert manifest["tensor_pattern"] == r"attn_out$|^embed"
    for rec in manifest["records"]:
        if rec["tensor_file"] is None:
            assert "rows_kept" not in rec and "rows_total" not in rec and "truncated" not in rec


@pytest.mark.parametrize("pattern", [None, ""])
def test_tensor_regex_empty_saves_nothing(make_probe, dump_dir, pattern):
    probe = make_probe(DUMP_PROBE_TENSOR=pattern)
    assert probe._config.tensor_regex is None
    probe.arm("req")
    probe.capture("a", torch.ones(3, 3))
    probe.capture_inputs("op", x=torch.ones(1))
    path = probe.finish()
    manifest = load_manifest(path)
    assert manifest["tensor_pattern"] == ""
    assert [r["tensor_file"] for r in manifest["records"]] == [None]
    window = os.path.dirname(path)
    assert not os.path.exists(os.path.join(window, "tensors"))
    assert os.listdir(os.path.join(window, "inputs")) == ["op#1.pt"]  # input sets do not depend on it


def test_tensor_regex_saved_per_occurrence(make_probe):
    probe = make_probe(DUMP_PROBE_TENSOR="^h$")
    probe.arm("req")
    probe.capture("h", torch.zeros(2))
    probe.capture("h", torch.ones(2))
    path = probe.finish()
    manifest = load_manifest(path)
    assert [r["tensor_file"] for r in manifest["records"]] == ["tensors/h#1.safetensors", "tensors/h#2.safetensors"]
    window = os.path.dirname(path)
    assert torch.equal(parse_safetensors(os.path.join(window, "tensors/h#1.safetensors"))[1]["h#1"], torch.zeros(2))
    assert torch.equal(parse_safetensors(os.path.join(window, "tensors/h#2.safetensors"))[1]["h#2"], torch.ones(2))


# --------------------------------------------------------------------------- DUMP_PROBE_ROWS


@pytest.mark.parametrize(
    "rows,shape,kept,total,truncated",
    [
        (None, (300, 2), 256, 300, True),  # default 256
        (None, (256, 2), 256, 256, False),
        ("5", (12, 3), 5, 12, True),
        ("5", (5, 3), 5, 5, False),
        ("5", (2, 3), 2, 2, False),
        ("0", (300, 2), 300, 300, False),
        ("all", (300, 2), 300, 300, False),
        ("ALL", (7,), 7, 7, False),
        ("1", (), 1, 1, False),  # 0-d: one "row"
        ("3", (0, 4), 0, 0, False),
    ],
)
def test_rows_bound(make_probe, rows, shape, kept, total, truncated):
    probe = make_probe(DUMP_PROBE_TENSOR=".", DUMP_PROBE_ROWS=rows)
    numel = 1
    for s in shape:
        numel *= s
    t = torch.arange(numel, dtype=torch.float32).reshape(shape)
    probe.arm("req")
    probe.capture("t", t)
    path = probe.finish()
    manifest = load_manifest(path)
    expected_rows = {None: 256, "0": 0, "all": 0, "ALL": 0}[rows] if rows in (None, "0", "all", "ALL") else int(rows)
    assert manifest["tensor_rows"] == expected_rows
    rec = record(manifest, "t")
    assert (rec["rows_kept"], rec["rows_total"], rec["truncated"]) == (kept, total, truncated)
    saved = parse_safetensors(os.path.join(os.path.dirname(path), rec["tensor_file"]))[1]["t#1"]
    expected = t[:kept] if t.dim() else t
    assert saved.shape == expected.shape
    assert torch.equal(saved, expected)
    assert rec["shape"] == list(shape)  # the record describes the whole tensor
    # statistics always cover the whole tensor, not only the kept rows
    if numel:
        assert rec["stats"]["max"] == float(numel - 1)


# --------------------------------------------------------------------------- DUMP_PROBE_TENSOR_FORMAT


@pytest.mark.parametrize("fmt,suffix", [(None, ".safetensors"), ("safetensors", ".safetensors"),
                                        ("SafeTensors", ".safetensors"), ("pt", ".pt"), (" PT ", ".pt")])
def test_tensor_format(make_probe, fmt, suffix):
    probe = make_probe(DUMP_PROBE_TENSOR="x", DUMP_PROBE_TENSOR_FORMAT=fmt)
    t = torch.randn(4, 3)
    probe.arm("req")
    probe.capture("x", t)
    path = probe.finish()
    rec = record(load_manifest(path), "x")
    assert rec["tensor_file"] == "tensors/x#1" + suffix
    full = os.path.join(os.path.dirname(path), rec["tensor_file"])
    if suffix == ".pt":
        loaded = torch.load(full, weights_only=True)
        assert list(loaded) == ["x#1"]
        assert torch.equal(loaded["x#1"], t)
    else:
        assert torch.equal(parse_safetensors(full)[1]["x#1"], t)


def test_dtype_outside_safetensors_falls_back_to_pt(make_probe):
    probe = make_probe(DUMP_PROBE_TENSOR=".")
    t = torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64)
    probe.arm("req")
    probe.capture("c", t)
    path = probe.finish()
    rec = record(load_manifest(path), "c")
    assert rec["stats"] is None  # complex tensors have no statistics
    assert rec["tensor_file"] == "tensors/c#1.pt"
    loaded = torch.load(os.path.join(os.path.dirname(path), rec["tensor_file"]), weights_only=True)
    assert torch.equal(loaded["c#1"], t)
