#!/usr/bin/env bash
# Fuzz dumpview's parsers of untrusted files for a bounded time, one target after the other:
#   manifest  fuzz/fuzz_targets/manifest.rs: the manifest parser, then scan and diff of what
#             it kept;
#   pt        fuzz/fuzz_targets/pt.rs: tensor files (torch.save zip archives: zip directory,
#             pickle machine, flattening; safetensors), every element of every view read;
#             the same bytes as a captured input set (model::input_set);
#   msprobe   fuzz/fuzz_targets/msprobe.rs: an msprobe dump.json through msprobe::load_window
#             (the one-pass JSON reader, entry names, leaf statistics), then scan and diff;
#   windowed  fuzz/fuzz_targets/windowed.rs: a windowed dump's manifest.json through
#             windowed::is_windowed and windowed::load_window, then scan and diff;
#   row_stats fuzz/fuzz_targets/row_stats.rs: a manifest and its row-statistics sidecar
#             (rows.f32) through read_window, the sidecar read and mapped, every row looked
#             up, then scan and diff (the token view);
#   ssh_listing fuzz/fuzz_targets/ssh_listing.rs: what a remote host prints over ssh: the
#             file listing (parse_listing of src/remote/script.rs, compiled into the target;
#             every kept path checked to stay in the mirror), the probe's answer, `inode size
#             mtime` lines;
#   case_plan fuzz/fuzz_targets/case_plan.rs: a case matrix's plan.json through Plan::parse,
#             then its text, the analysis of an unrecorded matrix, the run script, and the
#             plan written back and read again.
#
#   scripts/fuzz.sh [--build-only | --run-only] [SECONDS] [libFuzzer options...]
#
# SECONDS is the total fuzzing time, split evenly over the seven targets (default 120: 17 s
# each; at least 1 s each); building the targets comes on top. Options after it go to every
# target's libFuzzer (e.g. -jobs=2, -max_len=4096). --build-only builds the targets and stops;
# --run-only fuzzes what an earlier --build-only built (scripts/test.sh builds them in the
# background while the Rust tests run, whose processes leave a core idle a third of the time).
# DUMPVIEW_FUZZ_JOBS=N runs N targets at once (default 1), each still for its share of
# SECONDS: on two cores, 2 halves the wall time of the same fuzzing. Each target's output then
# goes to fuzz/logs/<target>.log and is printed when it ends.
#
# Uses cargo-fuzz where it is installed. Where it is not, the targets are built and run
# without it, as cargo-fuzz 0.13 builds and runs them (see fuzz_build below): installing it
# on a clean machine (`cargo install cargo-fuzz`) compiles it for minutes, and it only wraps
# cargo and each target's libFuzzer. The flags are nightly-only (-Zsanitizer=address,
# -Cpasses=sancov-module); on a stable toolchain RUSTC_BOOTSTRAP=1 lets them build.
# Corpora (fuzz/corpus/<target>, ignored by git) are seeded from fuzz/seeds/<target>/, the
# minimized corpus of the last long campaign (benches/README.md, "Fuzz campaign"), and from
# tests/fixtures/bad/ and a real example manifest (manifest); from tests/fixtures/tensors/*.pt,
# the data.pkl inside each and tests/fixtures/bad_tensors/* (pt); from
# tests/fixtures/msprobe/**/dump.json (msprobe); from tests/fixtures/windowed/**/manifest.json
# (windowed); from each manifest of tests/fixtures and assets/examples with a rows.f32 beside
# it, the two joined by a NUL as the target reads them (row_stats); from GNU find's listings
# of fixture and example dumps as the listing script prints them, and a probe answer
# (ssh_listing); and from tests/fixtures/cases_board/demo/plan.json (case_plan). Each target
# has a dictionary, fuzz/<target>.dict. Exits non-zero when libFuzzer finds a crash, a timeout or an
# out-of-memory input (later targets are then not run); the input is left in
# fuzz/artifacts/<target>/ — reproduce it with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run <target> fuzz/artifacts/<target>/<file>
# (without cargo-fuzz: fuzz/target/<host triple>/release/<target> fuzz/artifacts/<target>/<file>)
# and, once fixed, add it to tests/fixtures/bad/ (manifest), tests/fixtures/bad_tensors/ (pt),
# or as a regression test beside the reader's other tests (msprobe, windowed, row_stats,
# ssh_listing, case_plan).
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(manifest pt msprobe windowed row_stats ssh_listing case_plan)

phase=all
case ${1:-} in
    --build-only) phase=build; shift ;;
    --run-only) phase=run; shift ;;
esac
jobs=${DUMPVIEW_FUZZ_JOBS:-1}
case $jobs in
    '' | *[!0-9]* | 0) echo "scripts/fuzz.sh: DUMPVIEW_FUZZ_JOBS must be a positive integer, not '$jobs'" >&2; exit 2 ;;
esac

total=${1:-120}
shift || true
case $total in
    '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS] [libFuzzer options...]" >&2; exit 2 ;;
esac
seconds=$((total / ${#targets[@]}))
[ "$seconds" -ge 1 ] || seconds=1

export RUSTC_BOOTSTRAP=1
triple=$(rustc -vV | sed -n 's/^host: //p')

# DUMPVIEW_FUZZ_OPT_LEVEL=N builds the targets at that opt-level instead, with the default
# codegen units: a quicker build for a short, bounded run (scripts/test.sh uses 1); unset, the
# build is cargo-fuzz's.
codegen_units=-Ccodegen-units=1
opt_level_config=()
if [ -n "${DUMPVIEW_FUZZ_OPT_LEVEL:-}" ]; then
    codegen_units=
    opt_level_config=(--config "profile.release.opt-level=${DUMPVIEW_FUZZ_OPT_LEVEL}")
fi

# What `cargo fuzz build` does with its default options (cargo-fuzz 0.13.2,
# src/project.rs, Project::cargo): release with line tables, debug assertions,
# AddressSanitizer, SanitizerCoverage with comparison tracing, --cfg fuzzing, one codegen
# unit; --target so that build scripts get no sanitizer flags.
fuzz_build() {
    RUSTFLAGS="-Cpasses=sancov-module \
-Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
-Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares \
--cfg fuzzing \
-Cllvm-args=-simplifycfg-branch-fold-threshold=0 \
-Zsanitizer=address \
-Cllvm-args=-sanitizer-coverage-stack-depth \
-Cdebug-assertions \
${codegen_units} ${RUSTFLAGS:-}" \
        cargo build --manifest-path fuzz/Cargo.toml --target "$triple" --release \
        --config 'profile.release.debug="line-tables-only"' ${opt_level_config[@]+"${opt_level_config[@]}"} --bins
}

# What `cargo fuzz run TARGET CORPUS -- OPTIONS` runs once built.
fuzz_run() {
    local target=$1
    shift
    mkdir -p "fuzz/artifacts/$target"
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0" \
        "fuzz/target/$triple/release/$target" -artifact_prefix="fuzz/artifacts/$target/" "$@"
}

if [ -z "${DUMPVIEW_FUZZ_OPT_LEVEL:-}" ] && cargo fuzz --version >/dev/null 2>&1; then
    fuzz_build() { cargo fuzz build; }
    fuzz_run() {
        cargo fuzz run "$1" "$2" -- "${@:3}"
    }
fi

# Build every target before fuzzing any, so a build error shows before the first target's time
# is spent and the budget is fuzzing time only.
if [ "$phase" != run ]; then
    echo "== building ${targets[*]}" >&2
    build_start=$SECONDS
    fuzz_build
    echo "== built ${targets[*]} in $((SECONDS - build_start)) s" >&2
fi
[ "$phase" != build ] || exit 0
for target in "${targets[@]}"; do
    if [ ! -x "fuzz/target/$triple/release/$target" ]; then
        echo "scripts/fuzz.sh: fuzz/target/$triple/release/$target is not built (run scripts/fuzz.sh --build-only first)" >&2
        exit 2
    fi
done

seed() { # copy $2 into corpus $1 under a name derived from its path
    local name
    name=seed-$(printf '%s' "$2" | tr '/' '_')
    [ -e "$1/$name" ] || cp "$2" "$1/$name"
}

saved_seeds() { # copy fuzz/seeds/$1 (the last campaign's minimized corpus) into corpus $2
    local file
    [ -d "fuzz/seeds/$1" ] || return 0
    for file in "fuzz/seeds/$1"/*; do
        [ -f "$file" ] && [ ! -e "$2/${file##*/}" ] || continue
        cp "$file" "$2/"
    done
}

fuzz_one() { # fuzz target $1 on corpus $2 with dictionary $3, then the caller's options
    local target=$1 corpus=$2 dict=$3
    shift 3
    # -timeout: an input that takes 10 s is a finding too (a hostile file must not hang a reader).
    fuzz_run "$target" "$corpus" \
        -max_total_time="$seconds" \
        -dict="$dict" \
        -timeout=10 \
        -rss_limit_mb=4096 \
        -print_final_stats=1 \
        "$@"
}

running=()  # "pid target" of the targets fuzzing in the background (DUMPVIEW_FUZZ_JOBS > 1)
# Waits for the oldest running target, prints its log, and exits with its status if it failed.
reap() {
    local pid=${running[0]%% *} target=${running[0]#* } status=0
    running=("${running[@]:1}")
    wait "$pid" || status=$?
    cat "fuzz/logs/$target.log" >&2
    echo "== fuzzed $target: exit $status" >&2
    if [ "$status" != 0 ]; then
        for entry in "${running[@]}"; do kill "${entry%% *}" 2>/dev/null || true; done
        exit "$status"
    fi
}

run() { # run target $1 on corpus $2 with dictionary $3, then the caller's options
    local target=$1
    echo "== fuzzing $target for ${seconds} s (of ${total} s for ${#targets[@]} targets, $jobs at once)" >&2
    if [ "$jobs" = 1 ]; then
        fuzz_one "$@"
        return
    fi
    [ "${#running[@]}" -lt "$jobs" ] || reap
    mkdir -p fuzz/logs
    fuzz_one "$@" >"fuzz/logs/$target.log" 2>&1 &
    running+=("$! $target")
}

corpus=fuzz/corpus/manifest
mkdir -p "$corpus"
saved_seeds manifest "$corpus"
while IFS= read -r -d '' file; do
    case $file in */README.md) continue ;; esac
    seed "$corpus" "$file"
done < <(find tests/fixtures/bad -type f -print0)
seed "$corpus" assets/examples/llama_eager_vs_graph/b/rank0/match1-occ2/manifest.json
run manifest "$corpus" fuzz/manifest.dict "$@"

corpus=fuzz/corpus/pt
mkdir -p "$corpus"
saved_seeds pt "$corpus"
for file in tests/fixtures/tensors/*.pt tests/fixtures/bad_tensors/*.pt; do
    seed "$corpus" "$file"
done
seed "$corpus" "assets/examples/llama_chunked_prefill/a/rank0/match1-occ2/inputs/layers.0.rope#1.pt"
# The pickles alone: the target wraps any input that is not a zip as an archive's data.pkl.
if command -v python3 >/dev/null 2>&1; then
    python3 - "$corpus" tests/fixtures/tensors/*.pt <<'PY'
import os, sys, zipfile
corpus = sys.argv[1]
for path in sys.argv[2:]:
    out = os.path.join(corpus, "seed-pkl-" + os.path.basename(path))
    if not os.path.exists(out):
        with zipfile.ZipFile(path) as z:
            name = next(n for n in z.namelist() if n.endswith("/data.pkl"))
            with open(out, "wb") as f:
                f.write(z.read(name))
PY
fi
run pt "$corpus" fuzz/pt.dict "$@"

corpus=fuzz/corpus/msprobe
mkdir -p "$corpus"
saved_seeds msprobe "$corpus"
while IFS= read -r -d '' file; do
    seed "$corpus" "$file"
done < <(find tests/fixtures/msprobe -name dump.json -type f -print0)
# The largest fixtures are 700 KiB: mutating them whole runs ~60 inputs/s, their first 64 KiB
# (cut short, which the reader must handle too) ~200/s.
run msprobe "$corpus" fuzz/msprobe.dict -max_len=65536 "$@"

corpus=fuzz/corpus/windowed
mkdir -p "$corpus"
saved_seeds windowed "$corpus"
while IFS= read -r -d '' file; do
    seed "$corpus" "$file"
done < <(find tests/fixtures/windowed -name manifest.json -type f -print0)
run windowed "$corpus" fuzz/windowed.dict "$@"

corpus=fuzz/corpus/row_stats
mkdir -p "$corpus"
saved_seeds row_stats "$corpus"
# The manifest, a NUL, the sidecar: the windows of up to 64 KiB in all (the larger ones are
# the same structure, with more rows).
while IFS= read -r -d '' rows; do
    dir=${rows%/rows.f32}
    [ -f "$dir/manifest.json" ] || continue
    name=$corpus/seed-$(printf '%s' "$dir" | tr '/' '_')
    [ ! -e "$name" ] || continue
    { cat "$dir/manifest.json"; printf '\0'; cat "$rows"; } >"$name"
    [ "$(wc -c <"$name")" -le 65536 ] || rm "$name"
done < <(find tests/fixtures assets/examples -name rows.f32 -type f -print0)
run row_stats "$corpus" fuzz/row_stats.dict -max_len=65536 "$@"

corpus=fuzz/corpus/ssh_listing
mkdir -p "$corpus"
saved_seeds ssh_listing "$corpus"
# Listings as src/remote/script.rs's `list` prints them with GNU find (whole-second times as
# its stat listers print them, too), of fixture and example dumps; and the probe's answer.
if find / -maxdepth 0 -printf '' >/dev/null 2>&1; then
    for dir in tests/fixtures/layouts tests/fixtures/msprobe tests/fixtures/windowed \
        assets/examples/llama_kv_alias; do
        name=$corpus/seed-list-$(printf '%s' "$dir" | tr '/' '_')
        [ -e "$name" ] && [ -e "$name-stat" ] && continue
        find -L "$dir" -type f \( -name manifest.json -o -name dump.json -o -name rows.f32 \) \
            -printf '%i %s %T@ %P\0' >"$name.files"
        { printf 'dumpview-list 1 %s\0' 1765000000.123456789; cat "$name.files"; } >"$name"
        { printf 'dumpview-list 1 %s\0' 1765000000
            sed -z 's/^\([0-9]* [0-9]* [0-9]*\)\.[0-9]*/\1/' "$name.files"; } >"$name-stat"
        rm "$name.files"
    done
fi
printf 'dumpview-probe 1 dir gnu-find head-c\n' >"$corpus/seed-probe"
# An incremental listing: one file changed since the watermark, two unchanged (`=`).
printf 'dumpview-list 1 1765000000.5\0%s\0=\0=\0' '12 34 1765000000.25 rank0/match1-occ1/manifest.json' \
    >"$corpus/seed-incremental"
run ssh_listing "$corpus" fuzz/ssh_listing.dict "$@"

corpus=fuzz/corpus/case_plan
mkdir -p "$corpus"
saved_seeds case_plan "$corpus"
seed "$corpus" tests/fixtures/cases_board/demo/plan.json
run case_plan "$corpus" fuzz/case_plan.dict "$@"
while [ "${#running[@]}" -gt 0 ]; do reap; done
