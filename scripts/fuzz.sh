#!/usr/bin/env bash
# Fuzz the manifest parser (fuzz/fuzz_targets/manifest.rs: parse, then scan and diff of what it
# kept) for a bounded time.
#
#   scripts/fuzz.sh [SECONDS] [libFuzzer options...]      default 60 s
#
# Installs cargo-fuzz when missing. cargo-fuzz passes nightly-only flags (-Zsanitizer=address,
# -Cpasses=sancov-module); on a stable toolchain RUSTC_BOOTSTRAP=1 lets it build.
# The corpus (fuzz/corpus/manifest, ignored by git) is seeded from tests/fixtures/bad/ and a
# real example manifest. Exits non-zero when libFuzzer finds a crash, a timeout or an
# out-of-memory input; the input is left in fuzz/artifacts/manifest/ — reproduce it with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run manifest fuzz/artifacts/manifest/<file>
# and add it to tests/fixtures/bad/ once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
case $seconds in
    '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS] [libFuzzer options...]" >&2; exit 2 ;;
esac

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi
export RUSTC_BOOTSTRAP=1

corpus=fuzz/corpus/manifest
mkdir -p "$corpus"
seed() { # copy $1 into the corpus under a name derived from its path
    local name
    name=seed-$(printf '%s' "$1" | tr '/' '_')
    [ -e "$corpus/$name" ] || cp "$1" "$corpus/$name"
}
while IFS= read -r -d '' file; do
    case $file in */README.md) continue ;; esac
    seed "$file"
done < <(find tests/fixtures/bad -type f -print0)
seed assets/examples/llama_eager_vs_graph/b/rank0/match1-occ2/manifest.json

echo "== fuzzing manifest for ${seconds} s" >&2
# -timeout: an input that takes 10 s is a finding too (a hostile manifest must not hang scan).
cargo fuzz run manifest "$corpus" -- \
    -max_total_time="$seconds" \
    -dict=fuzz/manifest.dict \
    -timeout=10 \
    -rss_limit_mb=4096 \
    -print_final_stats=1 \
    "$@"
