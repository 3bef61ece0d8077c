#!/usr/bin/env bash
# The native probe's cost per capture (benches/README.md, "Native probe"): builds
# libdump_probe.so (release) and benches/native_probe.c against it, runs it once, and ends with
# a RESULT line. Disarmed ns per dp_capture; armed µs per capture on the host backend for 1 KB,
# 1 MB and 64 MB float32 tensors against memcpy + one read of the same bytes.
#
#   bash benches/native_probe.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p dump_probe --locked >&2
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cc -O2 -std=c11 -Iassets benches/native_probe.c -o "$out/native_probe" \
    -Ltarget/release -Wl,-rpath,"$PWD/target/release" -ldump_probe
echo "commit $(git rev-parse --short HEAD)$(git diff --quiet || echo +dirty), $(nproc) cores" >&2
BENCH_DIR="$out/dumps" "$out/native_probe" 2> >(grep -v '^dump_probe: wrote' >&2)
