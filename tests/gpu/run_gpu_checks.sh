#!/usr/bin/env bash
# GPU-only checks of assets/dump_probe.py: sync-free capture under
# torch.cuda.set_sync_debug_mode("error"), CUDA-graph slots read after replay,
# and cuda-vs-cpu statistics; and of the native probe's CUDA backend
# (test_native_cuda.py: libdump_probe.so against torch's statistics of the same device
# tensors; build it first with `cargo build --release -p dump_probe`).
# Skips (exit 0, with the reason) where CUDA is unavailable.
#
#   tests/gpu/run_gpu_checks.sh            # from anywhere
#   PYTHON=/path/to/python tests/gpu/run_gpu_checks.sh -x -v
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${PYTHON:-$repo/.venv/bin/python}"
cd "$repo"
"$python" - <<'PY'
import torch
if torch.cuda.is_available():
    print("torch %s, CUDA %s, device %s" % (torch.__version__, torch.version.cuda, torch.cuda.get_device_name()))
else:
    print("torch %s: CUDA not available, the GPU checks will be skipped" % torch.__version__)
PY
exec "$python" -m pytest -q -rs -p no:cacheprovider "$here" "$@"
