#!/usr/bin/env bash
# Every test of the project: Rust (unit, integration, CLI, the `export` feature), clippy with
# warnings as errors, a bounded fuzz run of every reader, and Python (probe, examples).
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

# One test build with every feature (export: CSV and Parquet through polars), so each feature
# is built and tested once.
echo "== cargo test --all-features" >&2
cargo test --all-targets --all-features --locked

echo "== cargo clippy --all-features -D warnings" >&2
cargo clippy --all-targets --all-features --locked -- -D warnings

# A total budget, split over the fuzz targets (scripts/fuzz.sh).
echo "== fuzz every reader for ${DUMPVIEW_FUZZ_SECONDS:-120} s in all" >&2
bash scripts/fuzz.sh "${DUMPVIEW_FUZZ_SECONDS:-120}"

echo "== pytest" >&2
.venv/bin/python -m pytest tests/python -q -p no:cacheprovider
