#!/usr/bin/env bash
# PNG screenshots of the real workbench from a real terminal: the binary runs in a detached
# tmux session of 140x40, keys go in with `tmux send-keys`, the screen comes back with its
# escapes (`tmux capture-pane -e -p`) and scripts/ansi_to_png.py draws it with Pillow and
# DejaVu Sans Mono. No browser.
#
#   bash scripts/screenshots.sh [OUT_DIR]        (default: screenshots/)
#
# Writes scan.png, tokens.png, diff.png, tree.png, aliases.png, diagnosis.png, help.png,
# tensors.png, layouts.png, single-run.png, replay-dialog.png, replay.png, cases-form.png and
# cases-board.png
# (DUMPVIEW_SHOTS="NAME ..." takes only those); the replay and case shots run a real replay with
# .venv's torch. Installs what is missing first: tmux and fonts-dejavu-core with apt-get, Pillow
# into .venv with pip.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
OUT="${1:-screenshots}"
COLS=140 ROWS=40

as_root=()
[[ $(id -u) == 0 ]] || as_root=(sudo -n)
apt_install() { # apt_install PACKAGE...
    echo "screenshots: installing $* (apt-get)" >&2
    "${as_root[@]}" apt-get update -qq >/dev/null
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
command -v tmux >/dev/null || apt_install tmux
[[ -f /usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf && -f /usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf ]] ||
    apt_install fonts-dejavu-core
[[ -x .venv/bin/python ]] || python3 -m venv .venv
if ! .venv/bin/python -c 'import PIL' 2>/dev/null; then
    echo "screenshots: installing Pillow into .venv (pip)" >&2
    .venv/bin/python -m pip install --quiet pillow
fi

cargo build --quiet --bin dumpview
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/dumpview"
mkdir -p "$OUT"
SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/dumpview-shots.XXXXXX")"
SOCK="$SCRATCH/tmux.sock"
tmx() { tmux -S "$SOCK" "$@"; }
cleanup() { tmx kill-server 2>/dev/null || true; rm -rf "$SCRATCH"; }
trap cleanup EXIT

# wait_for TEXT [BEFORE]: polls the screen, escapes included (60 s at most: a replay starts
# Python and torch), until TEXT shows, the screen differs from BEFORE (a capture taken before
# the last key) and it has settled.
wait_for() {
    local previous="" screen
    for _ in $(seq 1200); do
        screen="$(tmx capture-pane -e -p -t shot)"
        if [[ $screen == "$previous" && $screen != "${2-}" && "$(tmx capture-pane -p -t shot)" == *"$1"* ]]; then
            return 0
        fi
        previous="$screen"
        sleep 0.05
    done
    echo "screenshots: timed out waiting for \"$1\"; screen:" >&2
    tmx capture-pane -p -t shot >&2
    return 1
}

# shot NAME READY_TEXT [KEY TEXT]... -- dumpview ARGS...
#   after READY_TEXT shows, each KEY is sent and its TEXT awaited (with the screen changed).
shot() {
    local name="$1" ready="$2"
    shift 2
    # DUMPVIEW_SHOTS="tokens diff" takes only the shots named.
    if [[ -n ${DUMPVIEW_SHOTS:-} && " $DUMPVIEW_SHOTS " != *" $name "* ]]; then return 0; fi
    local steps=()
    while [[ $1 != -- ]]; do steps+=("$1"); shift; done
    shift
    # The working directory is the repository root so relative capture paths stay short in
    # the header; the export key is never pressed here. A replay's history and outputs go
    # into the scratch directory, and so do case matrices.
    tmx -f "$SCRATCH/tmux.conf" new-session -d -s shot -x "$COLS" -y "$ROWS" -c "$ROOT" \
        env -u NO_COLOR DUMPVIEW_PYTHON=.venv/bin/python XDG_STATE_HOME="$SCRATCH/state" \
        XDG_CACHE_HOME="$SCRATCH/cache" DUMPVIEW_CASES_DIR="$SCRATCH/cases" "$BIN" "$@"
    wait_for "$ready"
    local i before
    for ((i = 0; i < ${#steps[@]}; i += 2)); do
        before="$(tmx capture-pane -e -p -t shot)"
        tmx send-keys -t shot "${steps[i]}"
        wait_for "${steps[i + 1]}" "$before"
    done
    tmx capture-pane -e -p -t shot > "$SCRATCH/$name.ansi"
    tmx kill-server
    .venv/bin/python scripts/ansi_to_png.py "$SCRATCH/$name.ansi" "$OUT/$name.png" --cols "$COLS" --rows "$ROWS"
}
printf 'set -g status off\n' > "$SCRATCH/tmux.conf"

# Scan mode on one capture, `f`: the first non-finite record (the fp16 overflow).
shot scan "timeline " g "timeline 1/" f "│!    74" -- assets/examples/llama_fp16_overflow/b
# The token x stage view, `b`: the first bad token of a chunked prefill whose second chunk
# computes RoPE from position 0 (assets/token_examples/tokens_bug_in_one_chunk).
shot tokens "timeline" b "first bad token:" -- \
    assets/token_examples/tokens_bug_in_one_chunk/a assets/token_examples/tokens_bug_in_one_chunk/b
# Diff mode on the embedded fp16 pair: it opens on the first divergence.
shot diff "NaN/inf counts differ" -- demo --pair llama_fp16_overflow
# The module tree of a capture made with one dp.hook(model, label=...) line: all-MiniLM-L6-v2,
# every module hooked, float32 vs bfloat16 (tests/fixtures/minilm_hooked), opened on the path of
# the first divergence.
shot tree "timeline" m "tree " -- tests/fixtures/minilm_hooked/a tests/fixtures/minilm_hooked/b
# The KV-cache alias pair, Tab: focus on the storage aliases (6 stride conflicts).
shot aliases "6 conflicts" Tab "6 conflicts" -- assets/examples/llama_kv_alias/a assets/examples/llama_kv_alias/b
# The KV-cache alias pair's diagnosis banner under the header, `D`: the chain's first record, the
# writer, selected in the timeline and marked in the alias panel, its step in the status line.
shot diagnosis "6 conflicts" D "writer 1/" -- assets/examples/llama_kv_alias/a assets/examples/llama_kv_alias/b
# The help overlay.
shot help "NaN/inf counts differ" "?" "help (? or Esc closes)" -- demo --pair llama_fp16_overflow
# `t` on the fp16 pair's first divergence: its saved tensors compared, the popup with the histogram.
shot tensors "NaN/inf counts differ" t "|a-b| by decade" -- assets/examples/llama_fp16_overflow/a assets/examples/llama_fp16_overflow/b

# A diff across parallel layouts (TP=1 vs TP=4, a NaN planted on rank 2 before the all_reduce),
# opening on the merged record where it went non-finite (and diverges), rank 2 holding the NaN.
shot layouts "rank 2 [6, 4] 1/0" -- tests/fixtures/layouts/tp1 tests/fixtures/layouts/tp4_nan
# Findings from one run: S marks a duplicate shard's records, n walks to them.
shot single-run "timeline " n "DUPLICATE SHARDS" -- tests/fixtures/single_run/dup_shard

# `p` on layers.0.input_norm#1 of the float32 pair (↻ marks it): the dialog with a candidate
# typed, then Enter: the replay's verdict, figures, metrics and |diff| histogram.
NORM_SEARCH='layers\.0\.input_norm#1$'
CANDIDATE=tests/python/replay_candidates.py:rms_norm_eps_after
shot replay-dialog "6 conflicts" / "/▏" "$NORM_SEARCH" 'norm#1$▏' Enter "agrees within" p "replay · rank 0" \
    "$CANDIDATE" "eps_after▏" -- assets/examples/llama_kv_alias/a assets/examples/llama_kv_alias/b
shot replay "6 conflicts" / "/▏" "$NORM_SEARCH" 'norm#1$▏' Enter "agrees within" p "replay · rank 0" \
    "$CANDIDATE" "eps_after▏" Enter "|a-b| by decade" -- assets/examples/llama_kv_alias/a assets/examples/llama_kv_alias/b

# `c` on that verdict: the case-matrix form (the captured baseline, one line per axis); with a
# candidate wrong in three ways and float64 added, Enter: the board, every outcome on it, the
# cursor on bfloat16.
FAULTS=tests/fixtures/cases_board/candidates.py:rms_norm_three_faults
shot cases-form "6 conflicts" / "/▏" "$NORM_SEARCH" 'norm#1$▏' Enter "agrees within" p "replay · rank 0" \
    "$FAULTS" "faults▏" Enter "|a-b| by decade" c "› dtype" -- assets/examples/llama_kv_alias/a assets/examples/llama_kv_alias/b
shot cases-board "6 conflicts" / "/▏" "$NORM_SEARCH" 'norm#1$▏' Enter "agrees within" p "replay · rank 0" \
    "$FAULTS" "faults▏" Enter "|a-b| by decade" c "› dtype" ",float64" "float64▏" Enter "r runs missing" \
    Down "selected   dtype=float16" Right "selected   dtype=bfloat16" \
    -- assets/examples/llama_kv_alias/a assets/examples/llama_kv_alias/b

ls -l "$OUT"/*.png
