#!/usr/bin/env bash
# Every test of the project: Rust (unit, integration, CLI, the `export` and `torch` features), clippy with
# warnings as errors, a bounded fuzz run of every reader, and Python (probe, examples).
# Installs what it needs first (the Python environment in .venv); quick when present.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's wall time is printed when it ends and again in a summary at the end (also when
# a step fails), so a slow CI run says where its time went.
started=$SECONDS
timings=()
# Prints and records that step $1 took since second $2, with exit status $3.
took() {
    local seconds=$((SECONDS - $2)) note=
    [ "$3" = 0 ] || note=" (FAILED: exit $3)"
    timings+=("$(printf '%6d s  %s%s' "$seconds" "$1" "$note")")
    echo "== $1: ${seconds} s$note" >&2
}
summary() {
    echo "== wall time per step" >&2
    printf '%s\n' "${timings[@]}" >&2
    printf '%6d s  total\n' "$((SECONDS - started))" >&2
}
# Runs step $1: the command after it; on failure prints the summary and exits with its status.
step() {
    local name=$1 start=$SECONDS status=0
    shift
    echo "== $name" >&2
    "$@" || status=$?
    took "$name" "$start" "$status"
    if [ "$status" != 0 ]; then
        summary
        exit "$status"
    fi
}

# Waits for background step $1 (process $2, output in file $3, started at second $4), prints
# its output, records its time; on failure prints the summary and exits with its status.
join_background() {
    local status=0
    wait "$2" || status=$?
    cat "$3" >&2
    took "$1" "$4" "$status"
    if [ "$status" != 0 ]; then
        summary
        exit "$status"
    fi
}

# The Rust test build needs no Python (only feature `torch` asks the venv's torch for
# libtorch), and installing the venv the first time is mostly download and unpacking: build the
# test binaries of the first cargo step in the background meanwhile (on a clean 2-core machine
# this takes the venv's ~140 s off the total). Its output goes to a log printed when the step
# that needs it starts.
# target/ made before the two background builds start: on a clean clone the first cargo makes
# it atomically (a temporary `target<random>` beside it, then a rename), and the other one,
# listing the package's files for its build script's fingerprint at that moment, failed on the
# vanished temporary ("failed to read the directory at '.../targetv7Cyfc'", seen once in CI).
mkdir -p target
build_log=$(mktemp "${TMPDIR:-/tmp}/dumpview-test-build.XXXXXX")
build_start=$SECONDS
cargo test --all-targets --features export --locked --no-run >"$build_log" 2>&1 &
build_pid=$!
# The fuzz targets (their own workspace and target directory, fuzz/) build in the background
# too, at low priority, until the fuzz step needs them: the two cargo builds and the Rust tests
# leave a core idle part of the time (one crate compiling alone at the end of a build; tests
# waiting on Python, tmux and sshd children: 219 s wall, 291 s of CPU on two cores), which the
# fuzz build soaks up without slowing them much. It built in 224 s alone on this machine.
# The targets are built at opt-level 1 here (DUMPVIEW_FUZZ_OPT_LEVEL): CI's fuzzing is a
# bounded smoke run, and optimizing every dependency with AddressSanitizer and coverage at
# opt-level 3 in one codegen unit cost more than the fuzzing itself (338 s of 465 s).
fuzz_build_log=$(mktemp "${TMPDIR:-/tmp}/dumpview-fuzz-build.XXXXXX")
fuzz_build_start=$SECONDS
# Its own process group (setsid), so that a failing step stops its cargo too.
setsid nice -n 15 env DUMPVIEW_FUZZ_OPT_LEVEL="${DUMPVIEW_FUZZ_OPT_LEVEL:-1}" \
    bash scripts/fuzz.sh --build-only >"$fuzz_build_log" 2>&1 &
fuzz_build_pid=$!
# A step that fails first (the venv) leaves no build running behind it.
trap 'kill "$build_pid" 2>/dev/null || true; kill -- -"$fuzz_build_pid" 2>/dev/null || true
      rm -f "$build_log" "$fuzz_build_log"' EXIT

step "python venv (scripts/ensure-venv.sh)" bash scripts/ensure-venv.sh
export DUMPVIEW_PYTHON="$PWD/.venv/bin/python"

as_root=()
[ "$(id -u)" = 0 ] || as_root=(sudo -n)
apt_updated=
# Installs Debian packages (apt-get update once first).
apt_install() {
    if [ -z "$apt_updated" ]; then
        "${as_root[@]}" apt-get update -qq >/dev/null
        apt_updated=1
    fi
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

setup_start=$SECONDS
# tests/e2e_tmux.rs drives the real binary in tmux; install tmux where it is missing
# (Debian/Ubuntu). Without apt-get those tests say so and skip.
if ! command -v tmux >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        echo "== installing tmux (apt-get) for tests/e2e_tmux.rs" >&2
        apt_install tmux
    else
        echo "test.sh: tmux is missing and there is no apt-get: tests/e2e_tmux.rs will skip" >&2
    fi
fi

# tests/remote.rs starts a real OpenSSH server on 127.0.0.1 (tests/support/sshd.rs); install
# openssh-server (and the client) where they are missing. Without apt-get those tests say
# "skipped: no sshd".
if [ ! -x /usr/sbin/sshd ] || ! command -v ssh >/dev/null 2>&1 || ! command -v ssh-keygen >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        echo "== installing openssh-server (apt-get) for tests/remote.rs" >&2
        apt_install openssh-server openssh-client
    else
        echo "test.sh: sshd is missing and there is no apt-get: tests/remote.rs will skip" >&2
    fi
fi
# sshd run as root needs its privilege separation directory, which the service makes at
# boot and a container lacks.
if [ "$(id -u)" = 0 ] && [ ! -d /run/sshd ]; then
    mkdir -p /run/sshd
    chmod 0755 /run/sshd
fi
took "system packages (tmux, openssh)" "$setup_start" 0

# One test build with every feature but `torch` (export: CSV and Parquet through polars), so
# each feature is built and tested once; a new feature goes into this list. Feature `torch` is
# tested in its one test binary instead: with it, every binary of the package links torch-sys's
# C++ shim, whose static initializers need libtorch, and loading libtorch costs each process
# 0.35 s and 120 MB at start, which would slow every test that runs the dumpview binary
# (tests/bad_inputs.rs: 1.7 s -> 43 s; tests/cli.rs: 0.7 s -> 17 s).
# The test binaries the background build above made (its wall time counts from the start,
# overlapped with the venv); then the tests, building nothing more.
join_background "cargo test --features export: build (beside the venv)" \
    "$build_pid" "$build_log" "$build_start"
step "cargo test --features export" cargo test --all-targets --features export --locked

# Feature `torch` (tch) links the libtorch of the venv's pip torch: torch-sys's build script
# asks that python (LIBTORCH_USE_PYTORCH=1; it runs `python3`, so the venv's goes first on
# PATH) for libtorch's headers and libraries. build.rs puts libtorch's directory into every
# binary's rpath, so tests run without LD_LIBRARY_PATH. Only the cargo commands that build
# the feature get this environment (clippy --all-features compiles torch-sys too).
torch_env=(env "PATH=$PWD/.venv/bin:$PATH" LIBTORCH_USE_PYTORCH=1)
# `--features torch` alone: tch's dependencies widen the features of crates polars shares
# (flate2, num-traits), so `--all-features` would build polars a second time.
step "cargo test --features torch --test reference_tch" \
    "${torch_env[@]}" cargo test --features torch --locked --test reference_tch

step "cargo clippy --all-features -D warnings" \
    "${torch_env[@]}" cargo clippy --all-targets --all-features --locked -- -D warnings

# The background fuzz build (its wall time counts from the start).
join_background "fuzz targets: build (in the background from the start)" \
    "$fuzz_build_pid" "$fuzz_build_log" "$fuzz_build_start"
# A total budget, split over the fuzz targets (scripts/fuzz.sh), two targets at a time (one per
# core): the same fuzzing in half the wall time.
step "fuzz every reader for ${DUMPVIEW_FUZZ_SECONDS:-120} s in all, ${DUMPVIEW_FUZZ_JOBS:-2} at once" \
    env DUMPVIEW_FUZZ_OPT_LEVEL="${DUMPVIEW_FUZZ_OPT_LEVEL:-1}" DUMPVIEW_FUZZ_JOBS="${DUMPVIEW_FUZZ_JOBS:-2}" \
    bash scripts/fuzz.sh --run-only "${DUMPVIEW_FUZZ_SECONDS:-120}"

# Two workers (pytest-xdist): most of these tests wait on a child Python importing torch, one
# core each, so two cores run them in about 0.6 of the time (292 s -> 173 s here). Every test
# writes under its own tmp_path; DUMPVIEW_PYTEST_WORKERS=0 runs them in one process.
step "pytest" .venv/bin/python -m pytest tests/python -q -p no:cacheprovider --durations=15 \
    -n "${DUMPVIEW_PYTEST_WORKERS:-2}"

summary
