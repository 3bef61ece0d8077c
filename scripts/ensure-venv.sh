#!/usr/bin/env bash
# Create or reuse the project-local Python environment .venv (ignored by git).
# Idempotent: pip runs only when requirements-dev.txt changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
stamp=.venv/.requirements.sha256
want=$(sha256sum requirements-dev.txt | cut -d' ' -f1)

if [ ! -x .venv/bin/python ]; then
    echo "ensure-venv: creating .venv with $($python --version)" >&2
    "$python" -m venv .venv
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "ensure-venv: installing requirements-dev.txt (torch is ~4.7 GB the first time)" >&2
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -r requirements-dev.txt
    echo "$want" > "$stamp"
fi
