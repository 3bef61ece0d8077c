"""Logical and physical layout fields of records, checked against torch's own values."""

import pytest
import torch

from conftest import capture_one, load_manifest

LAYOUT_KEYS = [
    "seq", "stage", "occurrence", "mode", "dtype", "shape", "stride", "storage_offset", "element_size",
    "numel", "storage_ptr", "storage_id", "storage_nbytes", "data_ptr", "device", "device_format", "is_contiguous",
    "stats", "tensor_file",
]


def _expected_layout(t):
    return {
        "dtype": str(t.dtype).replace("torch.", ""),
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "storage_offset": t.storage_offset(),
        "element_size": t.element_size(),
        "numel": t.numel(),
        "storage_ptr": t.untyped_storage().data_ptr(),
        "storage_id": 1,  # a fresh probe state numbers storages 1, 2, ... in first-seen order
        "storage_nbytes": t.untyped_storage().nbytes(),
        "data_ptr": t.data_ptr(),
        "device": str(t.device),
        "device_format": None,
        "is_contiguous": t.is_contiguous(),
    }


BASE = torch.arange(120, dtype=torch.float32).reshape(10, 12)
VIEWS = {
    "contiguous": lambda: BASE,
    "transpose": lambda: BASE.t(),
    "row_slice_offset": lambda: BASE[4:7],
    "strided": lambda: BASE[1::3, 2::5],
    "expand": lambda: BASE[0:1, :3].expand(4, 3),
    "scalar_element": lambda: BASE[3, 4],
    "bf16": lambda: BASE.to(torch.bfloat16)[2:, 1:],
    "int64_col": lambda: torch.arange(30).reshape(5, 6)[:, 5],
    "bool": lambda: BASE > 50,
    "uint8_3d": lambda: torch.zeros(2, 3, 4, dtype=torch.uint8).permute(1, 2, 0),
    "empty_slice": lambda: BASE[5:5],
    "0d": lambda: torch.tensor(1.5),
    # contiguity is derived from shape and stride: size-1 dimensions may have any stride
    "size1_odd_stride": lambda: torch.zeros(3, 1, 4).as_strided((3, 1, 4), (4, 99, 1)),
    "size1_last_odd_stride": lambda: torch.zeros(12).as_strided((3, 4, 1), (4, 1, 7)),
    "unsqueeze_transposed": lambda: BASE.t().unsqueeze(1),
    "channels_last": lambda: torch.zeros(2, 3, 4, 5).to(memory_format=torch.channels_last),
    "all_zero_strides": lambda: torch.tensor(2.0, dtype=torch.float64).expand(3, 4),
    "complex64": lambda: torch.zeros(3, 4, dtype=torch.complex64)[:, 1:],
    "empty_transposed": lambda: torch.zeros(0, 3).t(),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_layout_fields_equal_torch_values(probe, name):
    t = VIEWS[name]()
    _m, rec = capture_one(probe, t)
    expected = _expected_layout(t)
    for key, value in expected.items():
        assert rec[key] == value, (key, rec[key], value)
        assert type(rec[key]) is type(value), key
    assert list(rec)[: len(LAYOUT_KEYS)] == LAYOUT_KEYS
    # the documented relation between the two addresses (torch reports data_ptr 0 for empty tensors)
    if t.numel():
        assert rec["data_ptr"] == rec["storage_ptr"] + rec["storage_offset"] * rec["element_size"]
    else:
        assert rec["data_ptr"] == 0


def test_views_of_one_buffer_share_storage_ptr(probe):
    """Alias evidence: two stages reading one storage with different strides report the same storage_ptr."""
    cache = torch.zeros(4, 8, 16)
    writer = cache[:, 2]  # (4, 16), strides (128, 1)
    reader = cache.view(4, 128)[:, 32:48]  # same bytes, other strides
    other = torch.zeros(4, 16)
    probe.arm("r")
    probe.capture("kv.write", writer)
    probe.capture("kv.read", reader)
    probe.capture("other", other)
    recs = load_manifest(probe.finish())["records"]
    assert recs[0]["storage_ptr"] == recs[1]["storage_ptr"] == cache.untyped_storage().data_ptr()
    assert recs[0]["data_ptr"] == recs[1]["data_ptr"] == writer.data_ptr()
    assert recs[0]["stride"] == [128, 1] and recs[1]["stride"] == [128, 1]
    assert recs[0]["storage_nbytes"] == recs[1]["storage_nbytes"] == 4 * 8 * 16 * 4
    assert recs[2]["storage_ptr"] == other.untyped_storage().data_ptr() != recs[0]["storage_ptr"]
    assert [r["storage_id"] for r in recs] == [1, 1, 2]


def test_layout_of_requires_grad_tensor(probe):
    w = torch.randn(3, 4, requires_grad=True)
    y = w * 2  # non-leaf with grad_fn
    _m, rec = capture_one(probe, y)
    assert rec["shape"] == [3, 4]
    assert rec["data_ptr"] == y.data_ptr()
    assert rec["stats"]["max"] == pytest.approx(y.detach().max().item())


def test_device_and_format_on_cpu(probe):
    _m, rec = capture_one(probe, torch.ones(2))
    assert rec["device"] == "cpu"
    assert rec["device_format"] is None


def test_record_key_order(make_probe):
    probe = make_probe(DUMP_PROBE_TENSOR="^s$", DUMP_PROBE_ROWS="2")
    probe.arm("r")
    probe.capture("s", torch.ones(3, 2))
    probe.capture("n", torch.ones(3, 2))
    saved, plain = load_manifest(probe.finish())["records"]
    assert list(saved) == LAYOUT_KEYS + ["rows_kept", "rows_total", "truncated", "stats_path"]
    assert list(plain) == LAYOUT_KEYS + ["stats_path"]
    assert (saved["rows_kept"], saved["rows_total"], saved["truncated"]) == (2, 3, True)
