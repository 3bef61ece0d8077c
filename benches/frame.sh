#!/usr/bin/env bash
# The workbench frame benchmark (benches/frame.rs) of the working tree, and with --baseline the
# same benchmark of commit REV, run in interleaved rounds (baseline, current, baseline, ...) so
# that both see the same machine load (benches/README.md).
#
#   benches/frame.sh [--baseline REV] [--rounds K] [-- FRAME_ARGS...]
#
# FRAME_ARGS go to the example as they are (--records N --small N --frames K --reps R).
# Prints each run's RESULT line, then the median of each build over the K rounds (default 3)
# and, with --baseline, one line
#   RESULT rounds=K frame_big_ms_before=.. frame_big_ms_after=.. frame_big_ratio=.. ...
# where each ratio is after / before of the medians ("not slower": at most 1.05).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASELINE="" ROUNDS=3 FRAME_ARGS=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --baseline) BASELINE="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --) shift; FRAME_ARGS=("$@"); break ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "unknown option $1 (frame.rs's own options go after --)" >&2; exit 2 ;;
    esac
done

SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/dumpview-frame.XXXXXX")"
trap 'rm -rf "$SCRATCH"' EXIT

echo "== building the working tree"
(cd "$ROOT" && cargo build --release --quiet --example frame)
declare -A BIN=([current]="$ROOT/target/release/examples/frame")
BUILDS="current"

if [[ -n $BASELINE ]]; then
    echo "== building baseline $BASELINE from a snapshot"
    SNAP="$SCRATCH/baseline"
    mkdir -p "$SNAP"
    git -C "$ROOT" archive "$BASELINE" | tar -x -C "$SNAP"
    # The baseline's own frame.rs names its module paths; the embedded examples are data.
    [[ -d $SNAP/assets/examples ]] || cp -r "$ROOT/assets/examples" "$SNAP/assets/"
    # A target dir kept between runs, keyed by the commit, so a second run does not rebuild it.
    BTARGET="$ROOT/target/bench-baseline-$(git -C "$ROOT" rev-parse --short "$BASELINE")"
    (cd "$SNAP" && CARGO_TARGET_DIR="$BTARGET" cargo build --release --quiet --example frame)
    BIN[baseline]="$BTARGET/release/examples/frame"
    BUILDS="baseline current"
fi

echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A LINES=()
for round in $(seq 1 "$ROUNDS"); do
    for build in $BUILDS; do
        echo "== round $round, $build"
        out="$("${BIN[$build]}" "${FRAME_ARGS[@]}")"
        line="$(grep '^RESULT' <<<"$out")"
        echo "$line"
        LINES[$build]+="$line"$'\n'
    done
done

# median KEY BUILD: the median over the rounds of one RESULT field.
median() {
    grep -o "$1=[0-9.]*" <<<"${LINES[$2]}" | cut -d= -f2 | sort -g |
        awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

KEYS="frame_small_ms frame_big_ms frame_big_p99_ms frame_tree_ms frame_tree_p99_ms tree_open_ms first_frame_s headless_s"
echo
echo "== medians over $ROUNDS rounds"
for build in $BUILDS; do
    printf '%-9s' "$build"
    for key in $KEYS; do printf ' %s=%s' "$key" "$(median "$key" "$build")"; done
    echo
done
if [[ -n $BASELINE ]]; then
    result="RESULT rounds=$ROUNDS baseline=$BASELINE"
    for key in $KEYS; do
        before="$(median "$key" baseline)" after="$(median "$key" current)"
        # A key the baseline's benchmark did not print yet (the tree's) has no ratio.
        ratio="$(awk -v a="$after" -v b="$before" 'BEGIN { if (b + 0 > 0) printf "%.3f", a / b; else printf "n/a" }')"
        result+=" ${key}_before=$before ${key}_after=$after ${key}_ratio=$ratio"
    done
    echo "$result"
fi
