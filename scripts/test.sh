#!/usr/bin/env bash
# Every test of the project: Rust (unit, integration, CLI, the `export` feature, a bounded fuzz
# run of the manifest parser) and Python (probe, examples).
# Installs what it needs first (the Python environment in .venv); quick when present.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/ensure-venv.sh
export DUMPVIEW_PYTHON="$PWD/.venv/bin/python"

# tests/e2e_tmux.rs drives the real binary in tmux; install tmux where it is missing
# (Debian/Ubuntu). Without apt-get those tests say so and skip.
if ! command -v tmux >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        as_root=()
        [ "$(id -u)" = 0 ] || as_root=(sudo -n)
        echo "== installing tmux (apt-get) for tests/e2e_tmux.rs" >&2
        "${as_root[@]}" apt-get update -qq >/dev/null
        "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null
    else
        echo "test.sh: tmux is missing and there is no apt-get: tests/e2e_tmux.rs will skip" >&2
    fi
fi

echo "== cargo test" >&2
cargo test --all-targets --locked

echo "== cargo test --features export (CSV and Parquet through polars)" >&2
cargo test --locked --features export --test cli

echo "== fuzz the manifest parser for ${DUMPVIEW_FUZZ_SECONDS:-60} s" >&2
bash scripts/fuzz.sh "${DUMPVIEW_FUZZ_SECONDS:-60}"

echo "== pytest" >&2
.venv/bin/python -m pytest tests/python -q -p no:cacheprovider
