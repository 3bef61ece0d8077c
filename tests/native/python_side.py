"""The Python side of tests/native_probe.rs's equality test.

    python python_side.py PROBE_PATH DIR

Builds the same views the native probe will capture (plain, transposed, strided slice, a
broadcast with stride 0, non-finite values, every dtype, 0-d scalars, a tensor large enough to be
split into chunks), captures them with assets/dump_probe.py (DUMP_PROBE=1 and DUMP_PROBE_DIR set
by the caller), and writes for tests/native/replay_views.c:

  DIR/views.txt       one line per view: stage dtype ndim sizes strides storage_offset
                      storage_bytes storage_id file
  DIR/storage<N>.bin  each storage's bytes
  DIR/abs_sums.json   stage -> sum of |x| over the finite elements (float64) and whether the
                      Python probe reduced it in float64 ("wide")
"""

import importlib.util
import json
import os
import sys

import torch

DTYPES = {
    torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3,
    torch.int8: 6, torch.int16: 7, torch.int32: 8, torch.int64: 9, torch.uint8: 10, torch.bool: 11,
}
if hasattr(torch, "float8_e4m3fn"):
    DTYPES[torch.float8_e4m3fn] = 4
    DTYPES[torch.float8_e5m2] = 5


def views():
    g = torch.Generator().manual_seed(15)
    base = torch.randn(64, 33, generator=g)
    nonfinite = torch.randn(10, 10, generator=g)
    nonfinite.view(-1)[[3, 17, 42]] = float("nan")
    nonfinite.view(-1)[55] = float("inf")
    nonfinite.view(-1)[77] = float("-inf")
    out = [
        ("f32.plain", base),
        ("f32.transposed", base.t()),
        ("f32.slice", base[2:50:3, 1:30:2]),
        ("f32.broadcast", torch.randn(1, 5, generator=g).expand(4, 5)),
        ("f32.nonfinite", nonfinite),
        ("f32.large", torch.randn(3, 20000, generator=g) * 3 + 1),
        ("f32.3d", torch.randn(4, 6, 5, generator=g).permute(2, 0, 1)),
        ("bf16", (torch.randn(17, 9, generator=g) * 4).to(torch.bfloat16)),
        ("f16", (torch.randn(5, 7, generator=g) * 100).to(torch.float16)),
        ("f64", torch.randn(40, 41, generator=g, dtype=torch.float64)),
        ("i32", torch.randint(-1000, 1000, (7, 9), generator=g, dtype=torch.int32)),
        ("i64", torch.randint(-(2**40), 2**40, (50,), generator=g, dtype=torch.int64)),
        ("i16", torch.randint(-300, 300, (6,), generator=g, dtype=torch.int16)),
        ("i8", torch.randint(-128, 127, (3, 3), generator=g, dtype=torch.int8)),
        ("u8", torch.randint(0, 255, (11,), generator=g, dtype=torch.uint8)),
        ("bool", torch.rand(4, 6, generator=g) > 0.5),
        ("scalar", torch.tensor(3.75)),
        ("scalar64", torch.tensor(-1.0e-3, dtype=torch.float64)),
    ]
    if hasattr(torch, "float8_e4m3fn"):
        out.append(("f8e4m3fn", (torch.randn(6, 8, generator=g) * 10).to(torch.float8_e4m3fn)))
        out.append(("f8e5m2", (torch.randn(6, 8, generator=g) * 10).to(torch.float8_e5m2)))
    return out


def main():
    probe_path, directory = sys.argv[1], sys.argv[2]
    spec = importlib.util.spec_from_file_location("dump_probe", probe_path)
    dp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dp)
    os.makedirs(directory, exist_ok=True)
    storages = {}
    lines, sums = [], {}
    dp.arm("same-values", token_ids=[5, 6, 7])
    for stage, t in views():
        dp.capture(stage, t)
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key not in storages:
            storages[key] = (len(storages) + 1, bytes(storage))
        sid, data = storages[key]
        name = "storage%d.bin" % sid
        with open(os.path.join(directory, name), "wb") as handle:
            handle.write(data)
        dims = " ".join(str(s) for s in t.shape)
        strides = " ".join(str(s) for s in t.stride())
        lines.append("%s %d %d %s %s %d %d %d %s" % (
            stage, DTYPES[t.dtype], t.dim(), dims, strides, t.storage_offset(), len(data), sid, name))
        x = t.to(torch.float64)
        finite = x[torch.isfinite(x)]
        wide = t.dtype == torch.float64 or not t.is_floating_point() or t.numel() >= 2**24
        sums[stage] = {"abs_sum": float(finite.abs().sum()), "wide": wide}
    dp.finish()
    with open(os.path.join(directory, "views.txt"), "w") as handle:
        handle.write("\n".join(lines) + "\n")
    with open(os.path.join(directory, "abs_sums.json"), "w") as handle:
        json.dump(sums, handle)


if __name__ == "__main__":
    main()
