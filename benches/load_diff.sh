#!/usr/bin/env bash
# Load + diff of a 1,000,000-record manifest pair (benches/README.md).
#
#   benches/load_diff.sh [--records N] [--ranks R] [--reps K] [--threads "1 2"]
#                        [--baseline REV] [--rounds K] [--data DIR] [--layouts "split single"]
#                        [--cli-json] [--token-rows N]
#
# Generates the pair into a temp dir (or reuses --data DIR, which it then keeps), and for each
# layout (split: R manifests per side in dump directories; single: one file per side), each
# build (the working tree, and with --baseline the commit REV built from a snapshot) and each
# thread count prints: the floor (serde_json IgnoredAny over the same bytes, in memory),
# dumpview's load + diff, their ratio (goal <= 2), the peak RSS of load + diff over the input
# bytes (goal <= 2), and the wall time and peak RSS of the real CLI
# (`dumpview diff A B > /dev/null`; with --cli-json also `--json`, whose JSON value tree needs
# about 10x the input in memory). A table of all runs ends the output. --rounds K (default 1)
# repeats every run K times, the builds interleaved within each round so both see the same
# machine load; with --baseline the last line is
#   RESULT rounds=K <layout>_t<threads>_<what>_{before,after,ratio}=...
# for what in load_diff_s and cli_s: the medians over the rounds, ratio = after / before.
# --token-rows N gives every record N token rows (a sidecar per window, counted in the input
# bytes): the diff then aligns them (docs/diff.md, "Token rows"); a baseline from before token
# rows reads the same files and ignores them.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RECORDS=1000000 RANKS=16 REPS=3 ROUNDS=1 THREADS="1 2" BASELINE="" DATA="" LAYOUTS="split single" MODES="text" TOKEN_ROWS=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --records) RECORDS="$2"; shift 2 ;;
        --ranks) RANKS="$2"; shift 2 ;;
        --reps) REPS="$2"; shift 2 ;;
        --threads) THREADS="$2"; shift 2 ;;
        --baseline) BASELINE="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --data) DATA="$2"; shift 2 ;;
        --layouts) LAYOUTS="$2"; shift 2 ;;
        --cli-json) MODES="text json"; shift ;;
        --token-rows) TOKEN_ROWS="$2"; shift 2 ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

TIME=/usr/bin/time
if [[ ! -x $TIME ]]; then
    echo "/usr/bin/time is missing: apt-get update && apt-get install -y time" >&2
    exit 2
fi

SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/dumpview-bench.XXXXXX")"
cleanup() { rm -rf "$SCRATCH"; }
trap cleanup EXIT

build() { # build DIR TARGET_DIR: the two examples and the binary
    (cd "$1" && CARGO_TARGET_DIR="$2" cargo build --release --quiet --example gen_manifests --example load_diff)
    (cd "$1" && CARGO_TARGET_DIR="$2" cargo build --release --quiet --bin dumpview) ||
        echo "note: the dumpview binary of $1 does not build; CLI timings are skipped for it" >&2
}

echo "== building the working tree"
build "$ROOT" "$ROOT/target"
declare -A BIN_DIR=([current]="$ROOT/target/release")
BUILDS="current"

if [[ -n $BASELINE ]]; then
    echo "== building baseline $BASELINE from a snapshot"
    SNAP="$SCRATCH/baseline"
    mkdir -p "$SNAP"
    git -C "$ROOT" archive "$BASELINE" | tar -x -C "$SNAP"
    # The baseline's own benchmark sources where it has them (they name its module paths),
    # else the working tree's.
    if [[ ! -f $SNAP/benches/load_diff/load_diff.rs ]]; then
        mkdir -p "$SNAP/benches/load_diff"
        cp "$ROOT"/benches/load_diff/*.rs "$SNAP/benches/load_diff/"
    fi
    # Untracked data the crate embeds at build time.
    [[ -d $SNAP/assets/examples ]] || cp -r "$ROOT/assets/examples" "$SNAP/assets/"
    if ! grep -q 'name = "load_diff"' "$SNAP/Cargo.toml"; then
        printf '\n[[example]]\nname = "gen_manifests"\npath = "benches/load_diff/gen_manifests.rs"\n\n[[example]]\nname = "load_diff"\npath = "benches/load_diff/load_diff.rs"\n' >> "$SNAP/Cargo.toml"
    fi
    cp "$ROOT/Cargo.lock" "$SNAP/Cargo.lock" 2>/dev/null || true
    # A target dir that survives between runs, keyed by the commit.
    BTARGET="$ROOT/target/bench-baseline-$(git -C "$ROOT" rev-parse --short "$BASELINE")"
    build "$SNAP" "$BTARGET"
    BIN_DIR[baseline]="$BTARGET/release"
    BUILDS="baseline current"
fi

if [[ -z $DATA ]]; then
    DATA="$SCRATCH/data"
    echo "== generating $RECORDS records per side into $DATA"
    "$ROOT/target/release/examples/gen_manifests" "$DATA" --records "$RECORDS" --ranks "$RANKS" --token-rows "$TOKEN_ROWS"
elif [[ ! -d $DATA/split || ! -d $DATA/single ]]; then
    echo "== generating $RECORDS records per side into $DATA (kept)"
    "$ROOT/target/release/examples/gen_manifests" "$DATA" --records "$RECORDS" --ranks "$RANKS" --token-rows "$TOKEN_ROWS"
fi

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
ROWS=()
for round in $(seq 1 "$ROUNDS"); do
for layout in $LAYOUTS; do
    if [[ $layout == split ]]; then A="$DATA/split/a" B="$DATA/split/b"; else A="$DATA/single/a.json" B="$DATA/single/b.json"; fi
    # Warm the page cache so every build reads the files from memory.
    find "$DATA/$layout" -type f -exec cat {} + >/dev/null
    for build in $BUILDS; do
        dir="${BIN_DIR[$build]}"
        for threads in $THREADS; do
            echo "== $layout, $build, RAYON_NUM_THREADS=$threads"
            out="$(RAYON_NUM_THREADS=$threads "$dir/examples/load_diff" "$A" "$B" --reps "$REPS" --name "$layout/$build/t$threads")"
            echo "$out" | grep -v '^RESULT'
            result="$(echo "$out" | grep '^RESULT')"
            cli="-" cli_rss="-" json="-" json_rss="-"
            if [[ -x $dir/dumpview ]]; then
                for mode in $MODES; do
                    flag=(); [[ $mode == json ]] && flag=(--json)
                    set +e
                    RAYON_NUM_THREADS=$threads $TIME -f "%e %M" -o "$SCRATCH/time" "$dir/dumpview" diff "$A" "$B" "${flag[@]}" >/dev/null 2>"$SCRATCH/err"
                    status=$?
                    set -e
                    # time(1) puts "Command exited with non-zero status N" before its own line.
                    read -r wall kib < <(tail -n 1 "$SCRATCH/time") || true
                    # Exit 1 is "found something" (the divergence); anything else is a failure.
                    if [[ $status -gt 1 ]]; then wall="fail($status)" kib=0; tail -3 "$SCRATCH/err" >&2; fi
                    rss_ratio="$(awk -v k="$kib" -v r="$result" 'BEGIN { split(r, f, " "); for (i in f) if (f[i] ~ /^bytes=/) { sub("bytes=", "", f[i]); b = f[i] } printf "%.2f", k * 1024 / b }')"
                    echo "[$layout/$build/t$threads] CLI dumpview diff${flag[*]:+ ${flag[*]}} > /dev/null: ${wall} s wall, peak RSS $((kib / 1024)) MiB = ${rss_ratio} x input"
                    if [[ $mode == text ]]; then cli="$wall" cli_rss="$rss_ratio"; else json="$wall" json_rss="$rss_ratio"; fi
                done
            fi
            ROWS+=("$result cli_s=$cli cli_rss=$cli_rss json_s=$json json_rss=$json_rss round=$round build=$build layout=$layout")
        done
    done
done
done

echo
echo "== summary (times in s; ratio = (load+diff)/floor, goal <= 2; rss = peak RSS / input bytes, goal <= 2)"
printf '%-26s %6s %8s %8s %8s %8s %7s %7s %8s %7s %8s %7s\n' \
    run files MB floor load diff ratio rss cli cli_rss json json_rss
for row in "${ROWS[@]}"; do
    awk -v row="$row" 'BEGIN {
        n = split(row, f, " ")
        for (i = 1; i <= n; i++) { split(f[i], kv, "="); v[kv[1]] = kv[2] }
        printf "%-26s %6s %8.1f %8.3f %8.3f %8.3f %7.2f %7.2f %8s %7s %8s %7s\n",
            v["name"], v["files"], v["bytes"] / 1e6, v["floor_s"], v["load_s"], v["diff_s"],
            v["ratio"], v["rss_ratio"], v["cli_s"], v["cli_rss"], v["json_s"], v["json_rss"]
    }'
done

if [[ -n $BASELINE ]]; then
    # median LAYOUT BUILD THREADS KEY: the median over the rounds of one field of the rows.
    median() {
        for row in "${ROWS[@]}"; do
            [[ " $row " == *" layout=$1 "* && " $row " == *" build=$2 "* && " $row " == *" threads=$3 "* ]] || continue
            grep -o " $4=[0-9.]*" <<<" $row" | cut -d= -f2
        done | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
    }
    result="RESULT rounds=$ROUNDS baseline=$BASELINE"
    for layout in $LAYOUTS; do
        for threads in $THREADS; do
            for key in load_diff_s cli_s; do
                before="$(median "$layout" baseline "$threads" "$key")"
                after="$(median "$layout" current "$threads" "$key")"
                ratio="$(awk -v a="$after" -v b="$before" 'BEGIN { if (b + 0 > 0 && a + 0 > 0) printf "%.3f", a / b; else print "-" }')"
                result+=" ${layout}_t${threads}_${key}_before=$before ${layout}_t${threads}_${key}_after=$after ${layout}_t${threads}_${key}_ratio=$ratio"
            done
        done
    done
    echo
    echo "$result"
fi
