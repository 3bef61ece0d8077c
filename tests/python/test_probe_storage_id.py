"""storage_id: one id per live storage object, so allocator address reuse is no alias evidence.

storage_ptr alone cannot tell one buffer seen through several views from two
buffers that lived one after the other at the same address (the allocator
hands a freed block to the next allocation of that size).  storage_id can:
views of one live storage share it, a new storage at a reused address gets a
new one.  Ids are 1, 2, ... in first-seen order of a fresh probe state.
"""

import gc
import weakref

import numpy as np
import pytest
import torch

from conftest import load_manifest, warning_lines


def _next_window(probe, label="r"):
    """Open the next window of ``label`` in the same probe state (see test_probe_graph)."""
    calls = probe._state.labels.get(label, (0, 0))[1]
    probe._config.occurrences = (calls + 1, calls + 1)
    assert probe.arm(label) is True


def _ids(manifest):
    return {r["stage"]: r["storage_id"] for r in manifest["records"]}


def _allocate_until_address_repeats(probe, stage, numel, attempts=500):
    """Allocate, capture (as ``stage``) and free tensors of ``numel`` floats until an allocation
    lands on the address of one captured and freed before; return (that occurrence, the new tensor).

    torch's CPU allocator asks for 64-byte-aligned blocks, so whether one freed block is handed
    out again to the very next request depends on its neighbours; a few rounds always get there.
    The probe must keep no reference, or no address could ever repeat.
    """
    freed = {}
    for round_ in range(1, attempts + 1):
        t = torch.full((numel,), float(round_))
        ptr = t.data_ptr()
        if ptr in freed:
            return freed[ptr], t
        probe.capture(stage, t)
        probe.capture(stage + ".view", t[1:])
        freed[ptr] = round_
        alive = weakref.ref(t.untyped_storage())
        del t
        assert alive() is None, "the probe keeps the captured storage alive"
    pytest.fail("no address repeated in %d allocations of %d floats" % (attempts, numel))


def _reallocate_at(ptrs, numel, attempts=2000):
    """A new tensor of ``numel`` floats at one of the freed addresses ``ptrs`` (misses kept alive)."""
    misses = []
    for _ in range(attempts):
        t = torch.empty(numel)
        if t.data_ptr() in ptrs:
            return t
        misses.append(t)
    pytest.fail("the allocator never handed any of %d freed addresses out again" % len(ptrs))


def test_views_of_one_storage_share_one_id(probe):
    base = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    other = torch.zeros(6, 8)
    views = {
        "base": base,
        "row_slice": base[2:4],
        "transpose": base.t(),
        "strided": base[1::2, ::3],
        "element": base[5, 7],
        "expand": base[0:1, :4].expand(3, 4),
        "reinterpret": base.view(torch.int32),
        "flat": base.view(-1)[10:20],
        "empty_view": base[3:3],
    }
    probe.arm("r")
    for stage, t in views.items():
        probe.capture(stage, t)
    probe.capture("other", other)
    probe.capture("clone", base.clone())
    probe.capture_inputs("op", x=base[1:, 2:], y=other.t())
    probe.capture("base_again", base[0])
    manifest = load_manifest(probe.finish())
    ids = _ids(manifest)
    assert {stage: ids[stage] for stage in views} == {stage: 1 for stage in views}
    assert (ids["other"], ids["clone"], ids["base_again"]) == (2, 3, 1)
    args = manifest["input_sets"][0]["args"]
    assert (args["x"]["storage_id"], args["y"]["storage_id"]) == (1, 2)
    # the ptr agrees with the id here: one live buffer each
    ptrs = {r["stage"]: r["storage_ptr"] for r in manifest["records"]}
    assert {ptrs[s] for s in views} == {base.untyped_storage().data_ptr()}
    assert ptrs["other"] == other.untyped_storage().data_ptr() != ptrs["base"]


def test_freed_address_reused_within_one_window_gets_a_new_id(probe):
    """The address-reuse false alias: equal storage_ptr, different storage_id."""
    probe.arm("r")
    occurrence, second = _allocate_until_address_repeats(probe, "buf", 1024)
    probe.capture("second", second)
    probe.capture("second.view", second[::2])
    manifest = load_manifest(probe.finish())
    recs = {(r["stage"], r["occurrence"]): r for r in manifest["records"]}
    first, first_view = recs[("buf", occurrence)], recs[("buf.view", occurrence)]
    now, now_view = recs[("second", 1)], recs[("second.view", 1)]
    assert first["storage_ptr"] == now["storage_ptr"] == first["data_ptr"] == now["data_ptr"] == second.data_ptr()
    assert first["storage_nbytes"] == now["storage_nbytes"] == 4096
    # every allocation got its own id (1, 2, ...), shared by its view; the reused address a new one
    rounds = max(o for (stage, o) in recs if stage == "buf")
    assert [recs[("buf", o)]["storage_id"] for o in range(1, rounds + 1)] == list(range(1, rounds + 1))
    assert [recs[("buf.view", o)]["storage_id"] for o in range(1, rounds + 1)] == list(range(1, rounds + 1))
    assert first_view["storage_id"] == first["storage_id"] == occurrence
    assert now["storage_id"] == now_view["storage_id"] == rounds + 1 != first["storage_id"]
    # statistics are the tensors' own: the reuse mixes nothing up
    assert (first["stats"]["mean"], now["stats"]["mean"]) == (float(occurrence), float(rounds + 1))


def test_ids_are_stable_across_windows_for_live_storages_only(probe):
    cache = torch.zeros(4, 16)  # lives for the whole run, like a KV cache
    probe.arm("r")
    scratch = [torch.full((4096,), float(i)) for i in range(8)]  # one request's temporaries
    probe.capture("cache", cache[1])
    for t in scratch:
        probe.capture("scratch", t)
    first = load_manifest(probe.finish())
    assert [r["storage_id"] for r in first["records"]] == list(range(1, 10))
    ptr_ids = {r["storage_ptr"]: r["storage_id"] for r in first["records"] if r["stage"] == "scratch"}
    del scratch, t
    gc.collect()
    reused = _reallocate_at(set(ptr_ids), 4096)  # the next request's buffer, at a freed address
    _next_window(probe)
    # arm() dropped the entries of the freed storages; the live cache keeps its entry and id
    assert list(probe._state.storages) == [(torch.device("cpu"), cache.untyped_storage().data_ptr())]
    probe.capture("scratch", reused)
    probe.capture("cache", cache.t())
    second = load_manifest(probe.finish())
    recs = {r["stage"]: r for r in second["records"]}
    assert recs["scratch"]["storage_ptr"] == reused.data_ptr() in ptr_ids
    assert recs["scratch"]["storage_id"] == 10 != ptr_ids[reused.data_ptr()]
    assert recs["cache"]["storage_id"] == 1


def test_graph_records_carry_the_storage_id_of_the_replayed_tensor(probe):
    hidden = torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
    probe.graph_slot("g", hidden)
    probe.arm("r")
    probe.capture("hidden", hidden)
    probe.capture_graph("g", hidden[1:])
    probe.capture("fresh", torch.ones(2))
    recs = load_manifest(probe.finish())["records"]
    assert [(r["stage"], r["mode"], r["storage_id"]) for r in recs] == [
        ("hidden", "eager", 1), ("fresh", "eager", 2), ("g", "graph", 1)]
    # the slot's own statistics buffer is probe-internal: it is never numbered
    assert probe._state.next_storage_id == 3


def test_storage_id_is_null_without_weak_references(probe, capsys, monkeypatch):
    def no_weakref(obj):
        raise TypeError("cannot create weak reference to %r object" % type(obj).__name__)

    monkeypatch.setattr(probe.weakref, "ref", no_weakref)
    probe.arm("r")
    t = torch.ones(3)
    probe.capture("a", t)
    probe.capture("b", t[1:])
    probe.capture_inputs("op", x=t)
    monkeypatch.undo()
    manifest = load_manifest(probe.finish())
    assert [r["storage_id"] for r in manifest["records"]] == [None, None]
    assert manifest["input_sets"][0]["args"]["x"]["storage_id"] is None
    assert [r["storage_ptr"] for r in manifest["records"]] == [t.untyped_storage().data_ptr()] * 2
    assert warning_lines(capsys.readouterr().err) == [
        "dump_probe: warning: this torch's storages take no weak references; storage_id is null"]


def test_one_live_storage_keeps_its_id_when_another_storage_shares_its_address(probe):
    buffer = np.zeros(8, dtype=np.float32)
    x, y = torch.from_numpy(buffer), torch.from_numpy(buffer)  # two storage objects, one memory block
    assert x.untyped_storage() is not y.untyped_storage()
    assert x.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
    probe.arm("r")
    probe.capture("x", x)
    probe.capture("y", y)
    probe.capture("x_view", x[2:])
    ids = _ids(load_manifest(probe.finish()))
    # Two storage objects over one live memory block are the same bytes: one id for all three.
    assert ids["x"] == ids["y"] == ids["x_view"]
