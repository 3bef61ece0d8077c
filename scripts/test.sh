#!/usr/bin/env bash
# Every test of the project: Rust (unit, integration, CLI) and Python (probe, examples).
# Installs what it needs first (the Python environment in .venv); quick when present.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/ensure-venv.sh
export DUMPVIEW_PYTHON="$PWD/.venv/bin/python"

echo "== cargo test" >&2
cargo test --all-targets --locked

echo "== pytest" >&2
.venv/bin/python -m pytest tests/python -q -p no:cacheprovider
