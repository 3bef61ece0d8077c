"""Window selection by label / call, arm() metadata, per-stage occurrences, seq, and the disarmed fast path."""

import os

import pytest
import torch

from conftest import all_manifests, load_manifest, record


def _run_calls(probe, labels):
    """Simulate forward passes: arm(label), capture one tensor tagged with the call number, finish."""
    opened = []
    for call, label in enumerate(labels, 1):
        opened.append(probe.arm(label, call=call))
        probe.capture("logits", torch.full((2, 3), float(call)))
        probe.finish()
    return opened


@pytest.mark.parametrize(
    "match,occurrence,expected_call,label",
    [
        ("1", "1", 1, "r1"),
        ("1", "2", 2, "r1"),
        ("1", "3", 3, "r1"),  # third chunk of the first request, not the third request
        ("2", "1", 4, "r2"),
        (None, None, 1, "r1"),  # defaults: first label, first call
    ],
)
def test_chunked_prefill_selection(make_probe, dump_dir, match, occurrence, expected_call, label):
    probe = make_probe(DUMP_PROBE_MATCH=match, DUMP_PROBE_OCCURRENCE=occurrence)
    opened = _run_calls(probe, ["r1", "r1", "r1", "r2"])
    assert opened == [call == expected_call for call in range(1, 5)]
    paths = all_manifests(dump_dir)
    m, o = int(match or 1), int(occurrence or 1)
    assert paths == [os.path.join(dump_dir, "rank0", "match%d-occ%d" % (m, o), "manifest.json")]
    manifest = load_manifest(paths[0])
    assert manifest["label"] == label
    assert manifest["match"] == m
    assert manifest["occurrence"] == o
    assert manifest["metadata"] == {"call": expected_call}
    assert record(manifest, "logits")["stats"]["mean"] == float(expected_call)


@pytest.mark.parametrize("match,occurrence", [("3", "1"), ("2", "2"), ("1", "4")])
def test_selection_that_never_happens_writes_nothing(make_probe, dump_dir, match, occurrence):
    probe = make_probe(DUMP_PROBE_MATCH=match, DUMP_PROBE_OCCURRENCE=occurrence)
    assert _run_calls(probe, ["r1", "r1", "r1", "r2"]) == [False] * 4
    assert not os.path.exists(dump_dir)


def test_labels_are_counted_by_first_appearance_and_interleaving(make_probe, dump_dir):
    """Interleaved chunks of two requests: call numbers are per label, match numbers by first sight."""
    probe = make_probe(DUMP_PROBE_MATCH="2", DUMP_PROBE_OCCURRENCE="2")
    opened = _run_calls(probe, ["a", "b", "a", "c", "b", "a"])
    assert opened == [False, False, False, False, True, False]
    manifest = load_manifest(all_manifests(dump_dir)[0])
    assert (manifest["label"], manifest["match"], manifest["occurrence"]) == ("b", 2, 2)
    assert manifest["metadata"] == {"call": 5}


def test_label_is_stringified(make_probe):
    probe = make_probe(DUMP_PROBE_OCCURRENCE="2")
    assert probe.arm(17) is False
    assert probe.arm("17") is True  # the same label as the int 17
    assert load_manifest(probe.finish())["label"] == "17"


def test_arm_while_open_finishes_previous_window(make_probe, dump_dir):
    probe = make_probe()
    assert probe.arm("r1") is True
    probe.capture("x", torch.ones(2))
    assert probe.arm("r2") is False  # finishes r1's window, r2 is not selected
    assert probe.armed() is False
    probe.capture("late", torch.ones(2))  # not recorded anywhere
    assert probe.finish() is None
    paths = all_manifests(dump_dir)
    assert len(paths) == 1
    manifest = load_manifest(paths[0])
    assert [r["stage"] for r in manifest["records"]] == ["x"]


def test_armed_and_finish_return_values(probe):
    assert probe.armed() is False
    assert probe.finish() is None
    assert probe.arm("r") is True
    assert probe.armed() is True
    path = probe.finish()
    assert path.endswith(os.path.join("rank0", "match1-occ1", "manifest.json"))
    assert probe.armed() is False
    assert probe.finish() is None  # a second finish has nothing to write


def test_empty_window_writes_manifest(probe):
    probe.arm("r")
    manifest = load_manifest(probe.finish())
    assert manifest["records"] == [] and manifest["input_sets"] == []
    assert manifest["stats_dtype"] == "float64"


# --------------------------------------------------------------------------- seq and occurrences


def test_seq_and_occurrence_per_stage(probe):
    probe.arm("r")
    stages = ["embed", "layer.attn", "layer.mlp", "layer.attn", "layer.mlp", "layer.attn", "logits"]
    for i, stage in enumerate(stages):
        probe.capture(stage, torch.full((2,), float(i)))
    manifest = load_manifest(probe.finish())
    got = [(r["seq"], r["stage"], r["occurrence"], r["stats"]["max"]) for r in manifest["records"]]
    assert got == [
        (0, "embed", 1, 0.0),
        (1, "layer.attn", 1, 1.0),
        (2, "layer.mlp", 1, 2.0),
        (3, "layer.attn", 2, 3.0),
        (4, "layer.mlp", 2, 4.0),
        (5, "layer.attn", 3, 5.0),
        (6, "logits", 1, 6.0),
    ]
    assert all(r["mode"] == "eager" for r in manifest["records"])


def test_occurrences_restart_in_each_window(make_probe, dump_dir):
    probe = make_probe(DUMP_PROBE_OCCURRENCE="2")
    probe.arm("r")
    probe.capture("s", torch.ones(1))
    probe.capture("s", torch.ones(1))
    probe.finish()
    probe.arm("r")
    probe.capture("s", torch.ones(1))
    manifest = load_manifest(probe.finish())
    assert [(r["seq"], r["occurrence"]) for r in manifest["records"]] == [(0, 1)]


def test_stage_is_stringified(probe):
    probe.arm("r")
    probe.capture(3, torch.ones(1))
    probe.capture(("a", 1), torch.ones(1))
    manifest = load_manifest(probe.finish())
    assert [r["stage"] for r in manifest["records"]] == ["3", "('a', 1)"]


# --------------------------------------------------------------------------- arm metadata


def test_metadata_token_ids_list_and_tensor(probe):
    ids = [151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30]
    probe.arm(
        "r",
        token_ids=torch.tensor(ids),
        token_ids_list=ids,
        token_ids_int32=torch.tensor(ids, dtype=torch.int32),
        positions=torch.arange(6).reshape(2, 3),
    )
    manifest = load_manifest(probe.finish())
    meta = manifest["metadata"]
    assert meta["token_ids"] == ids
    assert meta["token_ids_list"] == ids
    assert meta["token_ids_int32"] == ids
    assert meta["positions"] == [[0, 1, 2], [3, 4, 5]]


def test_metadata_tensor_is_snapshot_at_arm_time(probe):
    """arm() keeps a device-side copy: later in-place edits of the caller's tensor do not leak in."""
    ids = torch.tensor([1, 2, 3])
    probe.arm("r", token_ids=ids)
    ids.fill_(0)
    assert load_manifest(probe.finish())["metadata"]["token_ids"] == [1, 2, 3]


def test_metadata_scalars_dtypes_nested(probe):
    probe.arm(
        "r",
        temperature=0.0,
        top_p=0.95,
        seed=1234,
        greedy=True,
        weights="/models/qwen3-0.6b",
        none=None,
        dtype=torch.bfloat16,
        nested={"tp": 2, "sub": {"dtype": torch.float16, "list": [1, 2.5, "x", None]}, 3: "int key"},
        pair=(1, 2),
        bad_float=float("nan"),
        pos_inf=float("inf"),
        neg_inf=float("-inf"),
        device=torch.device("cpu"),
        obj=object,
    )
    manifest = load_manifest(probe.finish())
    meta = manifest["metadata"]
    assert meta["temperature"] == 0.0 and isinstance(meta["temperature"], float)
    assert meta["top_p"] == 0.95
    assert meta["seed"] == 1234
    assert meta["greedy"] is True
    assert meta["weights"] == "/models/qwen3-0.6b"
    assert meta["none"] is None
    assert meta["dtype"] == "bfloat16"
    assert meta["nested"] == {"tp": 2, "sub": {"dtype": "float16", "list": [1, 2.5, "x", None]}, "3": "int key"}
    assert meta["pair"] == [1, 2]
    assert (meta["bad_float"], meta["pos_inf"], meta["neg_inf"]) == ("nan", "inf", "-inf")
    assert meta["device"] == repr(torch.device("cpu"))
    assert meta["obj"] == repr(object)


def test_metadata_float_tensor_with_nonfinite_values_keeps_manifest_strict(probe):
    """A float tensor in the metadata holding NaN/inf must not break the (strict JSON) manifest."""
    probe.arm("r", logits_bias=torch.tensor([0.5, float("nan"), float("inf"), float("-inf")]))
    path = probe.finish()
    assert path is not None
    assert load_manifest(path)["metadata"]["logits_bias"] == [0.5, "nan", "inf", "-inf"]


# --------------------------------------------------------------------------- disarmed fast path


def test_capture_when_not_armed_does_no_work(make_probe, monkeypatch):
    probe = make_probe(DUMP_PROBE_MATCH="2", DUMP_PROBE_TENSOR=".")
    calls = []

    def forbidden(*args, **kwargs):
        calls.append(args)
        raise AssertionError("must not be called while disarmed")

    for name in ("_statistics", "_layout", "_input_value", "_bounded_rows", "_warn", "_disarm"):
        monkeypatch.setattr(probe, name, forbidden)

    t = torch.randn(4, 4)
    probe.capture("x", t)  # before any arm()
    probe.capture_inputs("op", x=t)
    assert probe.arm("first") is False  # not the selected label
    probe.capture("x", t)
    probe.capture("x", "not a tensor either")
    probe.capture_inputs("op", x=t, y=object())
    assert probe.finish() is None
    assert calls == []
    assert probe._state.records == [] and probe._state.input_sets == []
    assert probe._state.occurrences == {}


def test_capture_when_probe_off_does_no_work(make_probe, monkeypatch):
    probe = make_probe(DUMP_PROBE="0")
    monkeypatch.setattr(probe, "_statistics_by_path", lambda *a, **k: (_ for _ in ()).throw(AssertionError("called")))
    monkeypatch.setattr(probe, "current_rank", lambda: (_ for _ in ()).throw(AssertionError("called")))
    assert probe.arm("r") is False
    probe.capture("x", torch.ones(2))
    assert probe._state.labels == {}  # off: not even label counting
