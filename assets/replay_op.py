"""replay_op: replay one captured operator input set through a candidate and a reference.

One file, torch only (like dump_probe.py, which captured the input set with
``capture_inputs``); copy it next to the dump or write it out with
``dumpview probe install DIR``.  Needs Python >= 3.9 and torch >= 2.1.

    python replay_op.py DUMP --list [--json]
    python replay_op.py DUMP --stage layers.0.rope#1 \\
        --candidate my_pkg.ops:rope --reference builtin:rope_neox --out replay_rope

DUMP is a window's manifest.json, a window directory, or a directory tree of
them (``--rank R`` and ``--window W`` pick one window, ``--attempt N`` one attempt
of a window re-run into one directory).  A probe window directory without
manifest.json (a run killed before finish(), e.g. by the operator it captured)
is replayed from the file names of its inputs/*.pt (UNFINISHED_NOTE).  OP and REF are
``module.path:function``, ``path/to/file.py:function``, a dotted torch callable
(``torch.nn.functional.silu``, ``torch.ops.npu.npu_rms_norm``) or
``builtin:NAME`` (``--list-builtins``).

The input set is rebuilt exactly (dtype, shape, stride, device; arguments that
shared one storage share one again; no cast, no ``.contiguous()``) and the
operator is called four times, each on freshly rebuilt inputs:

    candidate         the candidate on the inputs as captured       -> candidate.pt
    reference         the reference on the inputs upcast            -> reference.pt
                      (float16/bfloat16 -> float32, float32 -> float64)
    golden            the reference on the inputs in float64        -> golden.pt
    reference_native  the reference on the inputs as captured       -> reference_native.pt

then ``replay.json`` (versions, device, durations, argument layouts, output
layouts, exceptions with traceback) is written last.  ``--candidate-only`` runs
the candidate alone and records the three reference sides as ``"status":
"skipped"`` with no files, for a caller that computes the reference itself
(dumpview built with its ``torch`` feature does, for ``builtin:NAME``).  The output directory is
never overwritten.  Exit status: 0 when replay.json was written (whatever the
candidate did: ``status`` says ok, crash or unsupported), 2 for a usage or
input error (missing, truncated or refused .pt, unknown stage, ambiguous
``#N``).  Log lines go to stderr.  The format is described in docs/replay.md
of the dumpview repository.
"""

import argparse
import ctypes
import faulthandler
import importlib
import importlib.util
import inspect
import io
import json
import math
import os
import platform
import re
import socket
import sys
import time
import traceback

# torch is imported on first need (load_torch): --list and most usage errors answer without it.
torch = None

TOOL_VERSION = "replay_op.py 1"
FORMAT = "dumpview.replay"
FORMAT_VERSION = 1
LIST_FORMAT = "dumpview.replay.list"

# torch's refusals of a dtype or layout ("\"cholesky_cpu\" not implemented for 'Half'",
# "linalg.inv: Low precision dtypes not supported", "Unsupported dtype Half"): the candidate
# declined, it did not compute wrongly.
_UNSUPPORTED = re.compile(r"not implemented for|not supported|unsupported", re.IGNORECASE)

# The reference's input precision (msprobe's benchmark precision): one step up; filled by load_torch.
_UPCAST = {}

SIDES = ("candidate", "reference", "golden", "reference_native")

# Written before each side runs and removed once replay.json is: what is known so far and which
# side is about to run.  A side that kills the process (a segfaulting kernel, os._exit) leaves
# it behind, and dumpview turns it into that side's crash record (docs/replay.md, "A process
# that dies").
PARTIAL = "replay.partial.json"


# Set by dumpview for a remote replay it starts without --python: try the interpreter the
# capture recorded (run.executable) before the python3 this runs under.
TRY_RECORDED = "DUMPVIEW_TRY_RECORDED"


def _run_under_recorded(window):
    """Where TRY_RECORDED is "1" and ``window``'s manifest recorded an absolute interpreter
    (``run.executable``) other than this one that exists and is executable here, run this
    replay again under it (os.execv, once): a remote host's python3 often lacks torch where the
    model's own environment has it. The script read from stdin (``python3 - ...``, as dumpview
    sends it: a file) is read again from its start; where stdin cannot be rewound, nothing
    changes."""
    if os.environ.get(TRY_RECORDED) != "1":
        return
    os.environ[TRY_RECORDED] = "0"  # once: the interpreter started next does not try again
    run = (window.manifest or {}).get("run") or {}
    exe = run.get("executable") if isinstance(run, dict) else None
    if not isinstance(exe, str) or not os.path.isabs(exe) or not os.path.isfile(exe) \
            or not os.access(exe, os.X_OK) or os.path.realpath(exe) == os.path.realpath(sys.executable):
        return
    argv = list(sys.argv)
    if argv and argv[0] == "-":
        try:
            os.lseek(0, 0, os.SEEK_SET)
        except OSError:
            return
    _log("using the interpreter the capture recorded (run.executable): %s" % exe)
    sys.stderr.flush()
    sys.stdout.flush()
    os.execv(exe, [exe] + argv)


def load_torch():
    """Import torch (once) and the dtype tables that need it."""
    global torch
    if torch is not None:
        return torch
    try:
        import torch as module
    except Exception as exc:  # ImportError, or an OSError of a broken install's libraries
        # One clear line (exit 2) rather than a traceback: the fix is another interpreter.
        raise InputError("cannot import torch: %s: %s (replay_op.py needs a Python with torch >= 2.1; "
                         "this is %s)" % (type(exc).__name__, exc, sys.executable))

    torch = module
    _UPCAST.update({
        torch.float16: torch.float32,
        torch.bfloat16: torch.float32,
        torch.float32: torch.float64,
        torch.complex64: torch.complex128,
    })
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
        if hasattr(torch, name):
            _UPCAST[getattr(torch, name)] = torch.float32
    if hasattr(torch, "complex32"):
        _UPCAST[torch.complex32] = torch.complex64
    return torch


class InputError(Exception):
    """A usage or input problem: reported on stderr, exit status 2, nothing written."""


def _log(message):
    try:
        sys.stderr.write("replay_op: %s\n" % message)
        sys.stderr.flush()
    except Exception:
        pass


# --------------------------------------------------------------------------- finding the window


def _strict_json(path):
    def refuse(token):
        raise ValueError("non-strict JSON constant %s" % token)

    with open(path, "rb") as handle:
        return json.loads(handle.read().decode("utf-8"), parse_constant=refuse)


def _read_manifest(path):
    """The parsed probe manifest at ``path``; InputError naming the file otherwise."""
    try:
        manifest = _strict_json(path)
    except OSError as exc:
        raise InputError("%s: cannot read (%s)" % (path, exc.strerror or exc))
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError("%s: not a valid manifest (%s)" % (path, exc))
    if not isinstance(manifest, dict) or manifest.get("format") != "dumpview.manifest":
        raise InputError("%s: not a dump_probe manifest (format is not \"dumpview.manifest\")" % path)
    if manifest.get("schema_version") != 1:
        raise InputError("%s: schema_version %r; this replay_op.py reads version 1"
                         % (path, manifest.get("schema_version")))
    return manifest


class Window:
    """One rank's label window: its manifest and where it lives."""

    unfinished = False

    def __init__(self, path, manifest):
        self.path = path
        self.where = path  # what messages name: the manifest
        self.directory = os.path.dirname(path) or "."
        self.manifest = manifest
        self.rank = manifest.get("rank")
        self.label = manifest.get("label")
        self.match = manifest.get("match")
        self.occurrence = manifest.get("occurrence")
        self.attempt = manifest.get("attempt") or _attempt_from_dir(self.directory)
        self.input_sets = [e for e in manifest.get("input_sets") or [] if isinstance(e, dict)]
        self.cut_off = []

    def describe(self):
        return "%s (rank %s, label %r, match %s, occurrence %s%s)" % (
            self.path, self.rank, self.label, self.match, self.occurrence,
            "" if self.attempt == 1 else ", attempt %s" % self.attempt)


# What an unfinished window's input sets lack: said once on stderr when one is replayed, and by --list.
UNFINISHED_NOTE = (
    "no manifest.json (the run stopped before finish(), or is still inside the window): its input sets "
    "come from the file names under inputs/ (stage names as the file names spell them: characters other "
    "than A-Za-z0-9_.#- became '_'; a .K before .pt marks a name that collided), their arguments from the "
    ".pt files alone (no recorded op); which arguments shared one storage is recorded only in the "
    "manifest, so each tensor argument is rebuilt on a storage of its own")

# The probe's names (dump_probe.py _new_window_dir, _unique_rel, _atomic_write_bytes).
_RANK_DIR = re.compile(r"^rank(\d+)$")
_WINDOW_DIR = re.compile(r"^match(\d+)-occ(\d+)(?:\.(\d+))?$")
_INPUT_FILE = re.compile(r"^(.*)#(\d+)(?:\.(\d+))?\.pt$")
_CUT_OFF = re.compile(r"\.tmp\.\d+$")


def probe_window_ids(directory):
    """(rank, match, occurrence, attempt) of a directory named as the probe names a window
    (``rank<R>/match<M>-occ<O>`` or ``...-occ<O>.<N>`` with N >= 2), else None."""
    path = os.path.abspath(directory)
    window = _WINDOW_DIR.match(os.path.basename(path))
    rank = _RANK_DIR.match(os.path.basename(os.path.dirname(path)))
    if window is None or rank is None:
        return None
    attempt = int(window.group(3)) if window.group(3) is not None else 1
    if window.group(3) is not None and attempt < 2:
        return None
    return int(rank.group(1)), int(window.group(1)), int(window.group(2)), attempt


def _files_under(directory, sub):
    try:
        names = sorted(os.listdir(os.path.join(directory, sub)))
    except OSError:
        return []
    return [n for n in names if os.path.isfile(os.path.join(directory, sub, n))]


def input_sets_from_names(names):
    """The input-set entries of an unfinished window, from the file names under inputs/.

    ``<stage>#<N>.pt`` is stage#N; ``<stage>#<N>.<K>.pt`` (K >= 2) is a set whose sanitised name
    collided with an earlier one's (dump_probe.py ``_unique_rel``): it is stage#N too, picked by its
    own key ``<stage>#<N>.<K>``.  A name the probe cut at 200 characters has no ``#N``: the whole
    stem is the stage, captured once.  ``.tmp.<pid>`` files (a write cut off) are not sets.
    """
    entries = []
    for name in names:
        if _CUT_OFF.search(name) or not name.endswith(".pt"):
            continue
        found = _INPUT_FILE.match(name)
        if found and found.group(1) and (found.group(3) is None or int(found.group(3)) >= 2):
            stage, occurrence = found.group(1), int(found.group(2))
        else:
            stage, occurrence = name[:-len(".pt")], 1
        entries.append({"stage": stage, "occurrence": occurrence, "file": "inputs/" + name, "args": {},
                        "key": name[:-len(".pt")], "_order": int(found.group(3) or 1) if found else 1})
    entries.sort(key=lambda e: (e["stage"], e["occurrence"], e.pop("_order")))
    return entries


class UnfinishedWindow(Window):
    """A probe window directory without manifest.json (UNFINISHED_NOTE): rank, match, occurrence and
    attempt from the directory names, input sets from the file names under inputs/."""

    unfinished = True

    def __init__(self, directory, ids):
        self.path = None
        self.where = directory  # what messages name: the directory
        self.directory = directory
        self.manifest = None
        self.rank, self.match, self.occurrence, self.attempt = ids
        self.label = None
        self.input_sets = input_sets_from_names(_files_under(directory, "inputs"))
        self.cut_off = sorted(os.path.join(sub, n) if sub else n for sub in ("", "inputs", "tensors")
                              for n in _files_under(directory, sub) if _CUT_OFF.search(n))

    def describe(self):
        return "%s (unfinished: no manifest.json; rank %s, match %s, occurrence %s%s)" % (
            self.directory, self.rank, self.match, self.occurrence,
            "" if self.attempt == 1 else ", attempt %s" % self.attempt)


def _attempt_from_dir(directory):
    found = re.search(r"\.(\d+)$", os.path.basename(os.path.normpath(directory)))
    return int(found.group(1)) if found else 1


def _unfinished_at(directory):
    """An UnfinishedWindow for a probe window directory without manifest.json, else None."""
    ids = probe_window_ids(directory)
    if ids is None or os.path.isfile(os.path.join(directory, "manifest.json")):
        return None
    return UnfinishedWindow(os.path.normpath(directory), ids)


def _nothing_to_replay(window):
    """Why an unfinished window has no input set to replay."""
    if window.cut_off:
        return "no complete input set, only cut-off writes (%s: the run was killed while writing them)" % (
            ", ".join(window.cut_off))
    return "nothing under inputs/ (the run claimed the directory and stopped before an input set was written)"


def find_windows(dump, attempt=None):
    """Every probe window under DUMP (a manifest, a window directory or a tree of them), one
    attempt of each: the newest, or ``attempt`` (InputError for a window without it).

    A probe window directory without manifest.json (a run killed before finish()) that holds
    input sets is an UnfinishedWindow; a manifest, where there is one, is always what is read.
    """
    if not os.path.exists(dump):
        raise InputError("%s: no such file or directory" % dump)
    if os.path.isfile(dump):
        return _choose_attempts([Window(dump, _read_manifest(dump))], [], attempt)
    direct = os.path.normpath(os.path.join(dump, "manifest.json"))
    if os.path.isfile(direct):
        return _choose_attempts([Window(direct, _read_manifest(direct))], [], attempt)
    lone = _unfinished_at(dump)
    if lone is not None:
        if not lone.input_sets:
            raise InputError("%s: an unfinished window (no manifest.json) with %s" % (dump, _nothing_to_replay(lone)))
        return _choose_attempts([lone], [], attempt)
    windows, empty = [], []
    for dirpath, dirnames, filenames in os.walk(dump):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if "manifest.json" not in filenames:
            unfinished = _unfinished_at(dirpath)
            if unfinished is not None:
                (windows if unfinished.input_sets else empty).append(unfinished)
            continue
        path = os.path.normpath(os.path.join(dirpath, "manifest.json"))
        try:
            windows.append(Window(path, _read_manifest(path)))
        except InputError as exc:  # one unreadable window does not hide the others
            _log("note: skipped %s" % exc)
    for w in empty:
        _log("note: %s: an unfinished window (no manifest.json) with %s" % (w.directory, _nothing_to_replay(w)))
    if not windows:
        raise InputError("%s: no dump_probe manifest (manifest.json) found%s" % (
            dump, "; %d unfinished window%s without input sets" % (len(empty), "" if len(empty) == 1 else "s")
            if empty else ""))
    return _choose_attempts(windows, empty, attempt)


def _attempt_text(w):
    return "%d (%s)" % (w.attempt, ("unfinished, %d input set%s" % (len(w.input_sets), "" if len(w.input_sets) == 1 else "s")
                                    if w.input_sets else "unfinished, no input set") if w.unfinished else "finished")


def _choose_attempts(windows, empty, attempt):
    """Of several attempts of one window (same parent, rank, match, occurrence) keep the newest,
    or the one ``attempt`` names; a window without it is an InputError listing those it has."""
    def key(w):
        return (os.path.dirname(os.path.normpath(w.directory)), w.rank, w.match, w.occurrence)

    groups = {}
    for w in windows:
        groups.setdefault(key(w), []).append(w)
    claimed = {}
    for w in empty:
        claimed.setdefault(key(w), []).append(w)
    kept = []
    for k, group in groups.items():
        group.sort(key=lambda w: w.attempt)
        if attempt is None:
            chosen = group[-1]
        else:
            chosen = next((w for w in group if w.attempt == attempt), None)
            if chosen is None:
                every = sorted(group + claimed.get(k, []), key=lambda w: w.attempt)
                lacking = next((w for w in every if w.attempt == attempt), None)
                why = ("attempt %d is an unfinished window with %s" % (attempt, _nothing_to_replay(lacking))
                       if lacking is not None else "no such attempt")
                raise InputError("--attempt %d: %s; rank %s match %s occurrence %s in %s has attempt%s %s" % (
                    attempt, why, group[0].rank, group[0].match, group[0].occurrence, k[0] or ".",
                    "" if len(every) == 1 else "s", ", ".join(_attempt_text(w) for w in every)))
        if len(group) > 1:
            _log("note: %s: using attempt %d%s; left out %s%s" % (
                chosen.directory, chosen.attempt, " (unfinished: no manifest.json)" if chosen.unfinished else "",
                ", ".join("attempt %d%s" % (w.attempt, " (unfinished)" if w.unfinished else "")
                          for w in group if w is not chosen),
                "" if attempt is None else ", as --attempt %d asked" % attempt))
        kept.append(chosen)
    kept.sort(key=lambda w: os.path.join(w.directory, "manifest.json"))
    return kept


def select_windows(windows, rank=None, window=None):
    """The windows that --rank and --window leave (window: label, match number or directory name)."""
    if rank is not None:
        windows = [w for w in windows if w.rank == rank]
        if not windows:
            raise InputError("no window of rank %d in the dump" % rank)
    if window is not None:
        chosen = [w for w in windows if w.label == window or str(w.match) == window
                  or os.path.basename(os.path.normpath(w.directory)) == window]
        if not chosen:
            raise InputError("no window %r (a label, a match number or a window directory name); the dump has:\n  %s"
                             % (window, "\n  ".join(w.describe() for w in windows)))
        windows = chosen
    return windows


def parse_stage(text):
    """'layers.0.rope#2' -> ('layers.0.rope', 2); 'layers.0.rope' -> ('layers.0.rope', None);
    '#1' -> ('', 1): an empty stage name is picked as '#N' (as dumpview writes its key)."""
    found = re.match(r"^(.*)#(\d+)$", text)
    if found:
        return found.group(1), int(found.group(2))
    return text, None


def entry_key(entry):
    """``stage#N`` of an input set; an unfinished window's set whose file name collided is
    ``stage#N.K``, its file's stem."""
    return entry.get("key") or "%s#%s" % (entry.get("stage"), entry.get("occurrence"))


def _sanitised(name):
    """A stage#N key as the probe spells it in a file name (dump_probe.py ``_safe_name``)."""
    safe = re.sub(r"[^A-Za-z0-9_.#-]", "_", name)
    if len(safe) <= 200:
        return safe
    # A long stage name is cut, never its "#N" (or "#N.K") tail: two occurrences stay two.
    head, sep, tail = safe.rpartition("#")
    if sep and len(tail) <= 40:
        return head[:199 - len(tail)] + "#" + tail
    return safe[:200]


def _unfinished_hint(windows, stage_text):
    """What an unknown --stage may mean in unfinished windows, whose stages come from file names:
    the sanitised spelling of a set that is there, or a set whose write was cut off."""
    unfinished = [w for w in windows if w.unfinished]
    if not unfinished:
        return ""
    stage, occurrence = parse_stage(stage_text)
    key = _sanitised(stage_text if occurrence is not None else stage + "#1")
    if key != stage_text and any(entry_key(e) == key for w in unfinished for e in w.input_sets):
        return ("; an unfinished window knows stages by their file names, where characters other than "
                "A-Za-z0-9_.#- became '_': --stage %s" % key)
    cut = [os.path.join(w.directory, c) for w in unfinished for c in w.cut_off
           if os.path.basename(c).startswith(key + ".pt.tmp.")]
    if cut:
        return "; %s: its write was cut off when the run was killed (incomplete, not an input set)" % ", ".join(cut)
    return ""


def pick_input_set(windows, stage_text):
    """(window, input set entry) for --stage; InputError for unknown, ambiguous or missing."""
    stage, occurrence = parse_stage(stage_text)
    # An unfinished window's set is also picked by its file's stem (stage#N.K after a collision);
    # either way, a stage that several windows hold is ambiguous, finished or not.
    having = [w for w in windows
              if any(e.get("key") == stage_text or e.get("stage") == stage for e in w.input_sets)]
    if len(having) == 1:
        exact = [e for e in having[0].input_sets if e.get("key") == stage_text]
        if len(exact) == 1:
            return having[0], exact[0]
    if not having:
        known = sorted({entry_key(e) for w in windows for e in w.input_sets})
        where = windows[0].where if len(windows) == 1 else "%d windows" % len(windows)
        raise InputError("unknown stage %r: no input set of it in %s; captured input sets: %s%s"
                         % (stage, where, ", ".join(known) or "none", _unfinished_hint(windows, stage_text)))
    if len(having) > 1:
        raise InputError("stage %r has input sets in %d windows; pick one with --rank / --window or "
                         "point DUMP at one window:\n  %s" % (stage, len(having), "\n  ".join(w.describe() for w in having)))
    window = having[0]
    entries = sorted((e for e in window.input_sets if e.get("stage") == stage),
                     key=lambda e: (e.get("occurrence"), entry_key(e)))
    keys = ", ".join(entry_key(e) for e in entries)
    if occurrence is None:
        if len(entries) > 1:
            raise InputError("%s: stage %r was captured %d times; say which: %s"
                             % (window.where, stage, len(entries), keys))
        return window, entries[0]
    matching = [e for e in entries if e.get("occurrence") == occurrence]
    if len(matching) == 1:
        return window, matching[0]
    if matching:
        raise InputError("%s: %s#%d names %d input set files whose sanitised names collided; say which: %s"
                         % (window.where, stage, occurrence, len(matching), ", ".join(entry_key(e) for e in matching)))
    raise InputError("%s: no %s#%d; stage %r was captured as %s"
                     % (window.where, stage, occurrence, stage, keys))


# --------------------------------------------------------------------------- loading the .pt


def input_file(window, entry):
    rel = entry.get("file")
    if not isinstance(rel, str) or not rel or os.path.isabs(rel) or ".." in rel.replace("\\", "/").split("/"):
        raise InputError("%s: input set %s#%s names file %r outside its window directory"
                         % (window.where, entry.get("stage"), entry.get("occurrence"), rel))
    return os.path.join(window.directory, rel)


def load_payload(path, entry):
    """torch.load(weights_only=True) of an input set file; InputError naming the file otherwise."""
    key = "%s#%s" % (entry.get("stage"), entry.get("occurrence"))
    if not os.path.exists(path):
        raise InputError("%s: missing (the file of input set %s)" % (path, key))
    if not os.path.isfile(path):
        raise InputError("%s: not a regular file (the file of input set %s)" % (path, key))
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        text = str(exc)
        if "Weights only load failed" in text or type(exc).__name__ == "UnpicklingError":
            # torch 2.4-2.5: "Unsupported global: GLOBAL posix.system"; 2.6+: "unsupported GLOBAL posix.system whose ..."
            found = re.search(r"GLOBAL ([A-Za-z_][\w.]*)", text)
            what = "the pickle global %s" % found.group(1) if found else "pickle content"
            raise InputError("%s: refused: holds %s, which weights_only loading does not allow "
                             "(replay_op.py never runs pickle code from a dump)" % (path, what))
        first = text.strip().splitlines()[0] if text.strip() else ""
        first = re.split(r"(?<=\.)\s", first)[0][:200]  # torch's first sentence, not its advice
        raise InputError("%s: not a readable torch.save file, truncated or corrupt (%s%s)"
                         % (path, type(exc).__name__, ": " + first if first else ""))
    if not isinstance(payload, dict):
        raise InputError("%s: holds a %s, not the dict of arguments capture_inputs writes" % (path, type(payload).__name__))
    args = entry.get("args") or {}
    missing = [name for name in args if name not in payload]
    if missing:
        raise InputError("%s: lacks argument%s %s that the manifest lists"
                         % (path, "s" if len(missing) > 1 else "", ", ".join(missing)))
    return payload


# --------------------------------------------------------------------------- rebuilding the call


def _dtype(name, where):
    value = getattr(torch, str(name), None)
    if not isinstance(value, torch.dtype):
        raise InputError("%s: unknown dtype %r" % (where, name))
    return value


class Leaf:
    """One captured tensor: its saved span and the layout to rebuild on it."""

    def __init__(self, path, payload, desc, file):
        where = "%s: argument %s" % (file, path)
        span = payload.get("span")
        if not isinstance(span, torch.Tensor) or span.dim() != 1:
            raise InputError("%s: the saved span is not a 1-D tensor" % where)
        self.path = path
        self.span = span
        self.dtype = _dtype(payload.get("dtype"), where)
        if span.dtype != self.dtype:
            raise InputError("%s: span dtype %s differs from the recorded %s" % (where, span.dtype, self.dtype))
        self.shape = [int(s) for s in payload.get("shape", [])]
        self.stride = [int(s) for s in payload.get("stride", [])]
        if len(self.shape) != len(self.stride):
            raise InputError("%s: shape %s and stride %s differ in length" % (where, self.shape, self.stride))
        self.offset_in_span = int(payload.get("offset_in_span", 0))
        self.storage_offset = int(payload.get("storage_offset", 0))
        self.device = str(payload.get("device", "cpu"))
        self.requires_grad = bool(payload.get("requires_grad", False))
        numel = 1
        for s in self.shape:
            numel *= s
        extent = 0 if numel == 0 else 1 + sum((s - 1) * st for s, st in zip(self.shape, self.stride))
        if numel and (self.offset_in_span < 0 or self.offset_in_span + extent > span.numel()):
            raise InputError("%s: the view (offset_in_span %d, extent %d) does not fit its saved span of %d elements"
                             % (where, self.offset_in_span, extent, span.numel()))
        desc = desc if isinstance(desc, dict) else {}
        for key, mine in (("dtype", str(self.dtype).replace("torch.", "")), ("shape", self.shape), ("stride", self.stride),
                          ("storage_offset", self.storage_offset)):
            if key in desc and desc[key] != mine:
                raise InputError("%s: %s %s in the .pt, %s in the manifest" % (where, key, mine, desc[key]))
        self.storage_id = desc.get("storage_id")
        self.numel = numel
        # Where the span sits in the original storage, in elements (the probe saved the span from
        # storage_offset - offset_in_span on).
        self.span_start = self.storage_offset - self.offset_in_span


class _Device:
    """A captured torch.device argument (rebuilt on the replay device when it was the set's device)."""

    def __init__(self, name):
        self.name = name


def _decode(payload, desc, path, file, leaves):
    """Structure of one argument with Leaf objects in place of tensors (collected into ``leaves``)."""
    if isinstance(payload, dict):
        if payload.get("__dump_probe_tensor__") == 1:
            leaf = Leaf(path, payload, desc, file)
            leaves.append(leaf)
            return leaf
        if "__dump_probe_dtype__" in payload:
            return _dtype(payload["__dump_probe_dtype__"], "%s: argument %s" % (file, path))
        if "__dump_probe_device__" in payload:
            return _Device(str(payload["__dump_probe_device__"]))
        if "__dump_probe_seq__" in payload:
            items_desc = desc.get("items", []) if isinstance(desc, dict) else []
            items = [_decode(v, items_desc[i] if i < len(items_desc) else {}, "%s[%d]" % (path, i), file, leaves)
                     for i, v in enumerate(payload.get("items", []))]
            return items if payload["__dump_probe_seq__"] == "list" else tuple(items)
        if "__dump_probe_dict__" in payload:
            items_desc = desc.get("items", {}) if isinstance(desc, dict) else {}
            return {k: _decode(v, items_desc.get(k, {}), "%s.%s" % (path, k), file, leaves)
                    for k, v in payload.get("items", {}).items()}
        if "__dump_probe_repr__" in payload:
            return str(payload["__dump_probe_repr__"])
    return payload


def device_available(name):
    """True when torch can allocate on device ``name`` here (importing torch_npu for npu)."""
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError, TypeError):
        return False
    if device.type == "cpu":
        return True
    if device.type == "npu":
        try:
            import torch_npu  # noqa: F401  (registers the npu device)
        except Exception:
            return False
    module = getattr(torch, device.type, None)
    try:
        if module is None or not module.is_available():
            return False
        return device.index is None or device.index < module.device_count()
    except Exception:
        return False


def _synchronize(device):
    if device.type != "cpu":
        module = getattr(torch, device.type, None)
        sync = getattr(module, "synchronize", None)
        if sync is not None:
            sync()


class InputSet:
    """A decoded input set: argument structure, tensor leaves and their storage groups."""

    def __init__(self, window, entry, file, payload):
        self.window = window
        self.entry = entry
        self.file = file
        self.leaves = []
        args_desc = entry.get("args") or {}
        names = list(args_desc) + [n for n in payload if n not in args_desc]
        self.values = {name: _decode(payload[name], args_desc.get(name, {}), name, file, self.leaves) for name in names}
        self.descs = args_desc
        groups = {}
        for leaf in self.leaves:
            if leaf.storage_id is not None and leaf.numel:
                groups.setdefault((leaf.device, leaf.storage_id), []).append(leaf)
        self.groups = [g for g in groups.values() if len(g) > 1]
        devices = [leaf.device for leaf in self.leaves]
        self.captured_device = next((d for d in devices if not d.startswith("cpu")), "cpu")

    def replay_device(self, leaf, device):
        """Where ``leaf`` goes: the replay device, except host tensors of an accelerator set stay on cpu."""
        if leaf.device.startswith("cpu") and not self.captured_device.startswith("cpu"):
            return torch.device("cpu")
        return device

    def rebuild(self, device, upcast=None):
        """Fresh argument values: every tensor rebuilt with its exact layout.

        ``upcast``: None (as captured), "reference" (one step up) or "float64" (every floating
        tensor in float64, complex in complex128).  The cast applies to the storage buffer, so
        strides, offsets and sharing are the same in every precision.  Returns (values, notes).
        """
        notes = []
        built = {}
        for group in self.groups:
            self._rebuild_group(group, device, upcast, built, notes)
        for leaf in self.leaves:
            if id(leaf) not in built:
                # A copy, always: a candidate writing into its inputs must not reach the next side's.
                buffer = leaf.span.to(device=self.replay_device(leaf, device), dtype=_cast_dtype(leaf.dtype, upcast), copy=True)
                built[id(leaf)] = torch.as_strided(buffer, leaf.shape, leaf.stride, leaf.offset_in_span)

        def materialise(value):
            if isinstance(value, Leaf):
                return built[id(value)]
            if isinstance(value, list):
                return [materialise(v) for v in value]
            if isinstance(value, _Device):
                return device if value.name == self.captured_device else torch.device(value.name)
            if isinstance(value, tuple):
                return tuple(materialise(v) for v in value)
            if isinstance(value, dict):
                return {k: materialise(v) for k, v in value.items()}
            return value

        values = {name: materialise(v) for name, v in self.values.items()}
        for leaf in self.leaves:
            t = built[id(leaf)]
            if list(t.shape) != leaf.shape or (leaf.numel and list(t.stride()) != leaf.stride):
                raise RuntimeError("%s: argument %s rebuilt as shape %s stride %s, not %s %s"
                                 % (self.file, leaf.path, list(t.shape), list(t.stride()), leaf.shape, leaf.stride))
        return values, notes

    def _rebuild_group(self, group, device, upcast, built, notes):
        """One buffer over the union of the group's spans, each view placed at its own offset."""
        target = self.replay_device(group[0], device)
        dtypes = {leaf.dtype for leaf in group}
        if len(dtypes) > 1:
            self._rebuild_bytes(group, target, upcast, built, notes)
            return
        base = min(leaf.span_start for leaf in group)
        end = max(leaf.span_start + leaf.span.numel() for leaf in group)
        buffer = torch.zeros(end - base, dtype=group[0].dtype)
        for leaf in group:
            start = leaf.span_start - base
            buffer[start:start + leaf.span.numel()].copy_(leaf.span)
        for leaf in group:  # overlapping spans were saved from one snapshot: they must agree
            start = leaf.span_start - base
            if not _same_bits(buffer[start:start + leaf.span.numel()], leaf.span):
                notes.append("%s: its saved span disagrees with an overlapping argument's; the later one's bytes are used"
                             % leaf.path)
        buffer = buffer.to(device=target, dtype=_cast_dtype(buffer.dtype, upcast))
        for leaf in group:
            built[id(leaf)] = torch.as_strided(buffer, leaf.shape, leaf.stride, leaf.span_start - base + leaf.offset_in_span)

    def _rebuild_bytes(self, group, target, upcast, built, notes):
        """A storage shared by views of different dtypes: one byte buffer, typed views over it."""
        if upcast is not None:
            notes.append("%s share one storage with different dtypes: upcast copies do not share it"
                         % ", ".join(leaf.path for leaf in group))
            for leaf in group:
                buffer = leaf.span.to(device=target, dtype=_cast_dtype(leaf.dtype, upcast), copy=True)
                built[id(leaf)] = torch.as_strided(buffer, leaf.shape, leaf.stride, leaf.offset_in_span)
            return
        align = max(leaf.span.element_size() for leaf in group)
        starts = {id(leaf): leaf.span_start * leaf.span.element_size() for leaf in group}
        base = min(starts.values()) // align * align
        end = max(starts[id(leaf)] + leaf.span.numel() * leaf.span.element_size() for leaf in group)
        buffer = torch.zeros(end - base, dtype=torch.uint8)
        for leaf in group:
            start = starts[id(leaf)] - base
            raw = leaf.span.contiguous().view(torch.uint8)  # groups hold non-empty views only
            buffer[start:start + raw.numel()].copy_(raw)
        buffer = buffer.to(target)
        storage = buffer.untyped_storage()
        for leaf in group:
            offset = (starts[id(leaf)] - base) // leaf.span.element_size() + leaf.offset_in_span
            view = torch.empty((0,), dtype=leaf.dtype, device=target)
            view.set_(storage, offset, leaf.shape, leaf.stride)
            built[id(leaf)] = view

    def snapshot(self, values):
        """Bit copies of every tensor argument, to tell which ones a call wrote to."""
        return [(name, t, t.detach().clone()) for name, t in _tensors_of(values)]


def _tensors_of(values, prefix=None):
    out = []
    items = values.items() if isinstance(values, dict) else enumerate(values)
    for key, value in items:
        name = key if prefix is None else ("%s[%s]" % (prefix, key) if not isinstance(values, dict) else "%s.%s" % (prefix, key))
        if isinstance(value, torch.Tensor):
            out.append((name, value))
        elif isinstance(value, (list, tuple, dict)):
            out.extend(_tensors_of(value, name))
    return out


def _same_bits(a, b):
    """Bitwise equality of two tensors' logical values (NaN payloads included)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def _cast_dtype(dtype, upcast):
    """The dtype a captured tensor of ``dtype`` is rebuilt in: as captured, one step up, or float64."""
    if upcast is None:
        return dtype
    if upcast == "float64":
        if dtype.is_complex:
            return torch.complex128
        return torch.float64 if dtype.is_floating_point else dtype
    return _UPCAST.get(dtype, dtype)


def input_dtype_text(leaves, upcast):
    floats = sorted({str(leaf.dtype).replace("torch.", "") for leaf in leaves
                     if leaf.dtype.is_floating_point or leaf.dtype.is_complex})
    if upcast is None:
        return "as captured"
    if not floats:
        return "as captured (no floating tensors)"
    parts = []
    for name in floats:
        wide = str(_cast_dtype(getattr(torch, name), upcast)).replace("torch.", "")
        parts.append(wide if wide == name else "%s (upcast from %s)" % (wide, name))
    return ", ".join(dict.fromkeys(parts))


# --------------------------------------------------------------------------- built-in references


def _acc(dtype):
    """Accumulation dtype of a reduction: float32 for 16-bit and narrower floats, else the dtype itself."""
    if dtype in (torch.float16, torch.bfloat16) or (dtype.is_floating_point and torch.finfo(dtype).bits < 16):
        return torch.float32
    return dtype


def rms_norm(x, weight, eps=1e-6):
    """RMSNorm as HF transformers' LlamaRMSNorm.forward (models/llama/modeling_llama.py).

        variance = x.to(float32).pow(2).mean(-1, keepdim=True)
        y = weight * (x.to(float32) * rsqrt(variance + eps)).to(x.dtype)

    HF's ``.to(torch.float32)`` is read as "at least float32": float16/bfloat16 inputs reduce in
    float32 as HF does, float32 and float64 inputs are never narrowed (so golden stays float64).
    Zhang & Sennrich, "Root Mean Square Layer Normalization" (2019), eq. 4.
    """
    h = x.to(_acc(x.dtype))
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return weight * h.to(x.dtype)


def add_rms_norm(x, residual, weight, eps=1e-6):
    """Fused residual add + RMSNorm as vLLM's RMSNorm.forward_native with a residual
    (vllm/model_executor/layers/layernorm.py; the fused_add_rms_norm kernel's contract):

        s = x.to(float32) + residual.to(float32);  residual_out = s.to(x.dtype)
        y = (s * rsqrt(s.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight

    Returns (y, residual_out).  "float32" is read as "at least float32", as in rms_norm.
    """
    acc = _acc(x.dtype)
    s = x.to(acc) + residual.to(acc)
    residual_out = s.to(x.dtype)
    variance = s.pow(2).mean(-1, keepdim=True)
    y = (s * torch.rsqrt(variance + eps)).to(x.dtype) * weight
    return y, residual_out


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """torch.nn.functional.layer_norm over the last dimension(s), as the torch docs define it
    (https://pytorch.org/docs/stable/generated/torch.nn.LayerNorm.html):

        y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias,   Var biased (divides by N)

    normalized_shape is weight's (or bias's) shape, else x.shape[-1:].
    """
    shape = tuple(weight.shape) if weight is not None else tuple(bias.shape) if bias is not None else tuple(x.shape[-1:])
    return torch.nn.functional.layer_norm(x, shape, weight, bias, eps)


def softmax(x, dim=-1):
    """torch.softmax(x, dim) (https://pytorch.org/docs/stable/generated/torch.nn.functional.softmax.html):
    exp(x_i) / sum_j exp(x_j) along ``dim``, in x's dtype."""
    return torch.softmax(x, dim=dim)


def silu_and_mul(x):
    """vLLM's SiluAndMul.forward_native (vllm/model_executor/layers/activation.py):

        d = x.shape[-1] // 2;  y = silu(x[..., :d]) * x[..., d:]

    silu(v) = v * sigmoid(v) (torch.nn.functional.silu docs).
    """
    d = x.shape[-1] // 2
    return torch.nn.functional.silu(x[..., :d]) * x[..., d:]


def gelu(x):
    """Exact GELU, x * Phi(x) with Phi the standard normal CDF (torch.nn.functional.gelu,
    approximate='none'; https://pytorch.org/docs/stable/generated/torch.nn.GELU.html;
    Hendrycks & Gimpel 2016)."""
    return torch.nn.functional.gelu(x)


def gelu_tanh(x):
    """Tanh GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (torch.nn.functional.gelu,
    approximate='tanh'; https://pytorch.org/docs/stable/generated/torch.nn.GELU.html)."""
    return torch.nn.functional.gelu(x, approximate="tanh")


def _rope_tables(x, cos, sin, positions, interleaved):
    """cos/sin per token, broadcast over the head dimensions of x [T, ..., D] (or [T, H*D])."""
    tokens = x.shape[0]
    if positions is not None and cos.shape[0] != tokens:
        cos, sin = cos[positions.reshape(-1)], sin[positions.reshape(-1)]
    if cos.shape[0] != tokens:
        raise ValueError("rope: cos has %d rows for %d tokens (give positions to index a table)" % (cos.shape[0], tokens))
    cos, sin = cos.reshape(tokens, -1), sin.reshape(tokens, -1)
    head_dim = x.shape[-1] if x.dim() >= 3 else cos.shape[-1]
    if cos.shape[-1] * 2 == head_dim:  # one value per rotated pair: expand to the layout's pairing
        if interleaved:
            cos, sin = cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)
        else:
            cos, sin = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)
    return cos, sin, head_dim


def _rope_apply(x, cos, sin, positions, interleaved):
    cos, sin, head_dim = _rope_tables(x, cos, sin, positions, interleaved)
    shape = x.shape
    h = x.reshape(shape[0], -1, head_dim) if x.dim() == 2 else x
    view = [shape[0]] + [1] * (h.dim() - 2) + [cos.shape[-1]]
    cos, sin = cos.reshape(view), sin.reshape(view)
    rot = cos.shape[-1]  # partial rotary: only the first rot dims turn
    h_rot, h_pass = h[..., :rot], h[..., rot:]
    if interleaved:
        x1, x2 = h_rot[..., ::2], h_rot[..., 1::2]
        turned = torch.stack((-x2, x1), dim=-1).flatten(-2)
    else:
        half = rot // 2
        turned = torch.cat((-h_rot[..., half:], h_rot[..., :half]), dim=-1)
    out = h_rot * cos + turned * sin
    if h_pass.shape[-1]:
        out = torch.cat((out, h_pass), dim=-1)
    return out.reshape(shape)


def rope_neox(q, k, cos, sin, positions=None):
    """Rotary embedding, GPT-NeoX / rotate_half layout, as HF transformers' apply_rotary_pos_emb
    (models/llama/modeling_llama.py; EleutherAI gpt-neox positional_embeddings.py; vLLM
    is_neox_style=True):

        rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]);   y = x * cos + rotate_half(x) * sin

    q, k: [T, heads, D] (or [T, heads*D]); cos, sin: [T, D] per token, or [T, D/2] (repeated as
    cat(c, c)); with ``positions`` and cos.shape[0] != T, rows are cos[positions].  A table of
    another width R < D is HF's partial rotary [T, R]: the first R dims turn, the rest pass
    through (so a table of exactly D/2 columns always means per-pair values).  Returns (q', k').
    """
    return _rope_apply(q, cos, sin, positions, False), _rope_apply(k, cos, sin, positions, False)


def rope_gptj(q, k, cos, sin, positions=None):
    """Rotary embedding, GPT-J / interleaved-pairs layout (RoFormer, Su et al. 2021, eq. 34;
    HF transformers models/gptj/modeling_gptj.py rotate_every_two; vLLM is_neox_style=False):

        rotate_every_two(x) = stack(-x[..., 1::2], x[..., ::2]).flatten(-2)
        y = x * cos' + rotate_every_two(x) * sin'

    with cos' = cos.repeat_interleave(2) for a [T, D/2] table; a [T, D] table is taken as already
    interleaved.  Shapes and positions as rope_neox.  Returns (q', k').
    """
    return _rope_apply(q, cos, sin, positions, True), _rope_apply(k, cos, sin, positions, True)


def linear(x, weight, bias=None):
    """torch.nn.functional.linear: y = x @ weight.T + bias
    (https://pytorch.org/docs/stable/generated/torch.nn.functional.linear.html)."""
    return torch.nn.functional.linear(x, weight, bias)


def matmul(a, b):
    """torch.matmul (https://pytorch.org/docs/stable/generated/torch.matmul.html)."""
    return torch.matmul(a, b)


def _sdpa(q, k, v, mask, scale, causal):
    # The reference implementation printed in the torch docs of scaled_dot_product_attention
    # (https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html),
    # without dropout; grouped-query attention (enable_gqa) when q has more heads than k.
    L, S = q.size(-2), k.size(-2)
    scale_factor = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    bias = torch.zeros(L, S, dtype=q.dtype, device=q.device)
    if causal:
        keep = torch.ones(L, S, dtype=torch.bool, device=q.device).tril(diagonal=0)
        bias.masked_fill_(keep.logical_not(), float("-inf"))
    if mask is not None:
        if mask.dtype == torch.bool:
            bias = bias.masked_fill(mask.logical_not(), float("-inf"))
        else:
            bias = mask + bias
    if q.dim() >= 3 and k.dim() >= 3 and q.size(-3) != k.size(-3):
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    weight = q @ k.transpose(-2, -1) * scale_factor
    weight = weight + bias
    weight = torch.softmax(weight, dim=-1)
    return weight @ v


def sdpa(q, k, v, mask=None, scale=None):
    """Scaled dot-product attention softmax(q k^T * scale + mask) v, as the reference
    implementation in the torch docs of torch.nn.functional.scaled_dot_product_attention
    (q [..., L, E], k [..., S, E], v [..., S, Ev]; a bool mask keeps True; a float mask is added;
    scale defaults to 1/sqrt(E); more q heads than k heads is grouped-query attention)."""
    return _sdpa(q, k, v, mask, scale, False)


def sdpa_causal(q, k, v, scale=None):
    """sdpa with is_causal=True: the torch docs' mask ones(L, S).tril(0), aligned to the top left
    (query i sees keys 0..i; for a decode step against a cache use sdpa with a mask)."""
    return _sdpa(q, k, v, None, scale, True)


BUILTINS = {
    "rms_norm": rms_norm,
    "add_rms_norm": add_rms_norm,
    "layer_norm": layer_norm,
    "softmax": softmax,
    "silu_and_mul": silu_and_mul,
    "gelu": gelu,
    "gelu_tanh": gelu_tanh,
    "rope_neox": rope_neox,
    "rope_gptj": rope_gptj,
    "linear": linear,
    "sdpa": sdpa,
    "sdpa_causal": sdpa_causal,
    "matmul": matmul,
}


# --------------------------------------------------------------------------- resolving OP / REF


def resolve(spec):
    """(callable, resolved name) for an OP/REF spec; InputError when it names nothing."""
    if spec.startswith("builtin:"):
        name = spec[len("builtin:"):]
        if name not in BUILTINS:
            raise InputError("%s: no such built-in; built-ins: %s" % (spec, ", ".join(sorted(BUILTINS))))
        return BUILTINS[name], "replay_op.%s" % name
    if ":" in spec:
        where, _, attr = spec.rpartition(":")
        if not where or not attr:
            raise InputError("%s: expected module.path:function or path/to/file.py:function" % spec)
        if where.endswith(".py") or os.sep in where or "/" in where:
            module = _load_file(where, spec)
            resolved = "%s:%s" % (os.path.abspath(where), attr)
        else:
            try:
                module = importlib.import_module(where)
            except Exception as exc:
                hint = ""
                # A module file in the working directory is not on sys.path for a script run by
                # path; say the file form that loads it.
                as_file = os.path.join(*where.split(".")) + ".py"
                if isinstance(exc, ModuleNotFoundError) and os.path.isfile(as_file):
                    hint = "; %s is a file here: give it as ./%s:%s" % (as_file, as_file, attr)
                raise InputError("%s: cannot import %s (%s: %s)%s" % (spec, where, type(exc).__name__, exc, hint))
            resolved = "%s.%s" % (where, attr)
        target = module
        for part in attr.split("."):
            try:
                target = getattr(target, part)
            except Exception:
                raise InputError("%s: %s has no attribute %r" % (spec, where, part))
        if not callable(target):
            raise InputError("%s: not callable" % spec)
        return target, resolved
    return _resolve_dotted(spec), spec


def _load_file(path, spec):
    if not os.path.isfile(path):
        raise InputError("%s: %s: no such file" % (spec, path))
    name = "replay_op_user_%d" % abs(hash(os.path.abspath(path)))
    if name in sys.modules:
        return sys.modules[name]
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in sys.path:
        sys.path.insert(0, directory)  # so the file may import its siblings
    try:
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise InputError("%s: importing %s failed (%s: %s)" % (spec, path, type(exc).__name__, exc))
    return module


def _resolve_dotted(spec):
    """``torch.nn.functional.silu``, ``torch.ops.npu.npu_rms_norm``: the longest importable prefix, then attributes."""
    parts = spec.split(".")
    if not all(parts):
        raise InputError("%s: not a dotted name" % spec)
    if "npu" in parts or parts[0] == "torch_npu":
        try:
            import torch_npu  # noqa: F401  (registers torch.ops.npu)
        except Exception:
            pass
    module, used = None, 0
    for n in range(len(parts) - 1, 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:n]))
            used = n
            break
        except Exception:
            continue
    if module is None:
        raise InputError("%s: no importable module in it" % spec)
    target = module
    for part in parts[used:]:
        try:
            target = getattr(target, part)
        except Exception as exc:
            raise InputError("%s: %s has no %r (%s)" % (spec, ".".join(parts[:used]), part, type(exc).__name__))
    if not callable(target):
        raise InputError("%s: not callable" % spec)
    return target


def parameter_names(fn):
    """(names, accepts any keyword) of a callable: its signature, or a torch op's schemas; None if unknown."""
    schemas = []
    overloads = getattr(fn, "overloads", None)
    if callable(overloads) and type(fn).__module__ == "torch._ops":
        try:
            schemas = [getattr(fn, name)._schema for name in fn.overloads()]
        except Exception:
            schemas = []
    elif getattr(fn, "_schema", None) is not None:
        schemas = [fn._schema]
    if schemas:
        return [set(a.name for a in s.arguments) for s in schemas], False
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None, False
    names = set()
    any_keyword = False
    for p in signature.parameters.values():
        if p.kind == p.VAR_KEYWORD:
            any_keyword = True
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            names.add(p.name)
    return [names], any_keyword


def call_style(fn, names):
    """"keywords" when every name is a parameter of fn (its signature or one op schema), else "positional"."""
    sets, any_keyword = parameter_names(fn)
    if sets is None:
        return "positional"
    if any_keyword or any(set(names) <= s for s in sets):
        return "keywords"
    return "positional"


# --------------------------------------------------------------------------- running one side


def classify(exc):
    """"unsupported" for torch's refusal of a dtype/layout (or NotImplementedError), else "crash"."""
    # Python's own "unsupported operand type(s) for +" is a TypeError in the code, not a refusal.
    message = str(exc).replace("unsupported operand", "")
    if isinstance(exc, NotImplementedError) or _UNSUPPORTED.search(message):
        return "unsupported"
    return "crash"


def _exception(exc):
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    }


def _outputs(result, mutated):
    """{name: value} of a call's result: out, or out.0, out.1, ...; None -> the arguments written in place."""
    if isinstance(result, (tuple, list)):
        return {"out.%d" % i: v for i, v in enumerate(result)}, "return"
    if isinstance(result, dict):
        return {"out.%s" % k: v for k, v in result.items()}, "return"
    if result is None and mutated:
        tensors = [t for _, t in mutated]
        if len(tensors) == 1:
            return {"out": tensors[0]}, "mutated arguments %s" % mutated[0][0]
        return {"out.%d" % i: t for i, t in enumerate(tensors)}, "mutated arguments %s" % ", ".join(n for n, _ in mutated)
    return {"out": result}, "return"


def layout_of(t):
    return {
        "dtype": str(t.dtype).replace("torch.", ""),
        "shape": list(t.shape),
        "stride": list(t.stride()),
        "storage_offset": int(t.storage_offset()),
        "device": str(t.device),
        "is_contiguous": bool(t.is_contiguous()),
    }


def side_stub(spec, resolved, inputs, device, upcast, status="ok"):
    """The record of one side before it runs (``status`` "running" in replay.partial.json)."""
    return {
        "spec": spec, "resolved": resolved, "status": status, "duration_s": None, "exception": None,
        "input_dtype": input_dtype_text(inputs.leaves, upcast), "device": str(device), "call": None,
        "outputs": [], "output_layouts": [], "values": {}, "outputs_from": None, "mutated_args": [], "notes": [],
    }


class StdoutTo:
    """File descriptor 1 into ``path`` while a side runs, so what the operator prints (``print``,
    a kernel's ``printf``) is kept as ``<side>.stdout`` beside its outputs, even when it kills the
    process.  Nothing else of replay_op.py writes to stdout outside ``--list``."""

    def __init__(self, path):
        self.path = path
        self.saved = None

    def __enter__(self):
        try:
            sys.stdout.flush()
            self.saved = os.dup(1)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 1)
            os.close(fd)
        except OSError as exc:  # no stdout at all: nothing to keep
            _log("note: %s not kept (%s)" % (self.path, exc))
            self.saved = None
        return self

    def __exit__(self, *exc):
        if self.saved is None:
            return False
        try:
            sys.stdout.flush()
            ctypes.CDLL(None).fflush(None)  # C stdio's buffer belongs to this file, not to what comes after
        except Exception:
            pass
        os.dup2(self.saved, 1)
        os.close(self.saved)
        return False

    def report(self, side):
        """Logs what was printed (its first lines) and drops an empty file; returns the file name or None."""
        try:
            with open(self.path, "rb") as handle:
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            return None
        if not text:
            os.remove(self.path)
            return None
        lines = text.splitlines()
        for line in lines[:STDOUT_LOG_LINES]:
            _log("%s stdout: %s" % (side, line))
        if len(lines) > STDOUT_LOG_LINES:
            _log("%s stdout: ... %d more lines in %s" % (side, len(lines) - STDOUT_LOG_LINES,
                                                         os.path.basename(self.path)))
        return os.path.basename(self.path)


STDOUT_LOG_LINES = 50


def run_side(spec, fn, resolved, inputs, device, upcast, mapping, overrides, seed, stdout=None):
    """Rebuild inputs, call fn once, time it; (side record for replay.json, {output name: tensor}).
    ``stdout``: where fd 1 goes during the call (``<side>.stdout``), None to leave it."""
    side = side_stub(spec, resolved, inputs, device, upcast)
    try:
        values, notes = inputs.rebuild(device, upcast)
    except Exception as exc:  # e.g. out of device memory, or a dtype the device cannot hold
        side["status"] = classify(exc)
        side["exception"] = _exception(exc)
        side["notes"].append("the inputs could not be rebuilt on %s; the operator was not called" % device)
        return side, {}
    side["notes"].extend(notes)
    values.update(overrides)
    named = {mapping.get(k, k): v for k, v in values.items()}
    style = call_style(fn, list(named))
    side["call"] = style
    before = inputs.snapshot(values)
    torch.manual_seed(seed)
    result = None
    start = None
    captured = StdoutTo(stdout) if stdout else None
    try:
        with torch.no_grad(), (captured or _Nothing()):
            _synchronize(device)
            start = time.perf_counter()
            result = fn(**named) if style == "keywords" else fn(*named.values())
            _synchronize(device)  # a device fault of the call surfaces here, charged to this side
            side["duration_s"] = time.perf_counter() - start
    except (Exception, SystemExit) as exc:
        if start is not None:
            side["duration_s"] = time.perf_counter() - start  # time to the failure
        side["status"] = classify(exc)
        side["exception"] = _exception(exc)
        side["stdout"] = captured.report(side_name(stdout)) if captured else None
        return side, {}
    side["stdout"] = captured.report(side_name(stdout)) if captured else None
    try:
        mutated = [(n, t) for n, t, copy in before if not _same_bits(t.detach(), copy)]
    except Exception:
        mutated = []
    side["mutated_args"] = [n for n, _ in mutated]
    outputs, side["outputs_from"] = _outputs(result, mutated)
    tensors = {}
    for out_name, value in outputs.items():
        if isinstance(value, torch.Tensor):
            try:
                layout = layout_of(value)
                tensors[out_name] = value.detach().cpu().contiguous()
            except Exception as exc:  # e.g. a device fault that surfaces on the copy
                side["status"] = classify(exc)
                side["exception"] = _exception(exc)
                return side, {}
            side["output_layouts"].append(dict(name=out_name, **layout))
            side["outputs"].append(out_name)
        else:
            side["values"][out_name] = _json_value(value)
    return side, tensors


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def side_name(stdout_path):
    """``candidate`` of ``DIR/candidate.stdout``."""
    return os.path.basename(stdout_path).rsplit(".", 1)[0]


def write_partial(out, report, sides, running):
    """replay.partial.json: ``report`` with the sides finished so far and ``running``'s stub
    (status "running"), written atomically and fsynced before that side is called."""
    partial = dict(report)
    partial["sides"] = dict(sides)
    partial["sides"][running["name"]] = running["stub"]
    partial["running"] = running["name"]
    _atomic_write(os.path.join(out, PARTIAL), (dumps(_json_value(partial)) + "\n").encode("utf-8"))


def finish_record(out, report):
    """replay.json (last of the outputs), then the partial record it supersedes removed."""
    path = os.path.join(out, "replay.json")
    _atomic_write(path, (dumps(_json_value(report)) + "\n").encode("utf-8"))
    try:
        os.remove(os.path.join(out, PARTIAL))
    except FileNotFoundError:
        pass
    return path


def skipped_side(spec, resolved, inputs, device, upcast):
    """The record of a side not run (--candidate-only): status "skipped", no outputs, no file."""
    return {
        "spec": spec, "resolved": resolved, "status": "skipped", "duration_s": None, "exception": None,
        "input_dtype": input_dtype_text(inputs.leaves, upcast), "device": str(device), "call": None,
        "outputs": [], "output_layouts": [], "values": {}, "outputs_from": None, "mutated_args": [],
        "notes": ["not run: --candidate-only (the caller computes this side)"], "file": None,
    }


def _json_value(value):
    if isinstance(value, float):
        return value if math.isfinite(value) else ("nan" if value != value else ("inf" if value > 0 else "-inf"))
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if torch is not None and isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    return repr(value)


def parse_value(text):
    """--arg VALUE: JSON (1, 1e-5, true, null, [256]), else True/False/None, nan/inf, else the string."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    stripped = text.strip()
    if stripped in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[stripped]
    try:
        return float(stripped)  # nan, inf, -inf
    except ValueError:
        return text


# --------------------------------------------------------------------------- describing arguments


def describe_args(inputs, overrides, mapping):
    by_storage = {}
    for leaf in inputs.leaves:
        if leaf.storage_id is not None:
            by_storage.setdefault((leaf.device, leaf.storage_id), []).append(leaf.path)

    def one(name, value, desc):
        if isinstance(value, Leaf):
            return {
                "name": name, "kind": "tensor", "dtype": str(value.dtype).replace("torch.", ""),
                "shape": value.shape, "stride": value.stride, "storage_offset": value.storage_offset,
                "offset_in_span": value.offset_in_span, "span_numel": int(value.span.numel()),
                "storage_id": value.storage_id,
                "shares_storage_with": [p for p in by_storage.get((value.device, value.storage_id), []) if p != name]
                if value.storage_id is not None else [],
                "device": value.device, "requires_grad": value.requires_grad,
            }
        kind = desc.get("kind") if isinstance(desc, dict) else None
        if isinstance(value, (list, tuple)):
            items_desc = desc.get("items", []) if isinstance(desc, dict) else []
            return {"name": name, "kind": kind or ("list" if isinstance(value, list) else "tuple"),
                    "items": [one("%s[%d]" % (name, i), v, items_desc[i] if i < len(items_desc) else {})
                              for i, v in enumerate(value)]}
        if isinstance(value, _Device):
            return {"name": name, "kind": "device", "value": value.name}
        if isinstance(value, dict):
            items_desc = desc.get("items", {}) if isinstance(desc, dict) else {}
            return {"name": name, "kind": "dict",
                    "items": [one("%s.%s" % (name, k), v, items_desc.get(k, {})) for k, v in value.items()]}
        if isinstance(value, torch.dtype):
            return {"name": name, "kind": "dtype", "value": str(value).replace("torch.", "")}
        if value is None:
            return {"name": name, "kind": "none"}
        return {"name": name, "kind": kind or _kind(value), "value": _json_value(value)}

    out = []
    for name, value in inputs.values.items():
        entry = one(name, value, inputs.descs.get(name, {}))
        if name in overrides:
            captured = entry["value"] if "value" in entry else {k: v for k, v in entry.items() if k != "name"}
            entry = {"name": name, "kind": _kind(overrides[name]), "value": _json_value(overrides[name]),
                     "overridden": True, "captured_value": captured}
        if name in mapping:
            entry["passed_as"] = mapping[name]
        out.append(entry)
    for name, value in overrides.items():
        if name not in inputs.values:
            entry = {"name": name, "kind": _kind(value), "value": _json_value(value), "overridden": True, "captured": False}
            if name in mapping:
                entry["passed_as"] = mapping[name]
            out.append(entry)
    return out


def _kind(value):
    """The manifest's kind name of a plain value (bool before int: bool is an int in Python)."""
    for kind, types in (("none", type(None)), ("bool", bool), ("int", int), ("float", float), ("str", str),
                        ("list", list), ("tuple", tuple), ("dict", dict)):
        if isinstance(value, types):
            return kind
    return type(value).__name__


def versions():
    found = {"python": platform.python_version(), "torch": torch.__version__, "torch_npu": None,
             "cuda": getattr(torch.version, "cuda", None), "replay_op": TOOL_VERSION}
    module = sys.modules.get("torch_npu")
    if module is not None:
        found["torch_npu"] = getattr(module, "__version__", None)
    else:
        try:
            from importlib import metadata

            found["torch_npu"] = metadata.version("torch_npu")
        except Exception:
            pass
    return found


def device_name(device):
    try:
        if device.type == "cuda":
            return torch.cuda.get_device_name(device)
        if device.type == "npu":
            return torch.npu.get_device_name(device)
    except Exception:
        pass
    return _cpu_name() if device.type == "cpu" else None


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# --------------------------------------------------------------------------- writing


def dumps(value, indent=0, width=100):
    """Strict JSON, indented, with any array or object that fits in ``width`` characters kept on one line."""
    flat = json.dumps(value, allow_nan=False, separators=(", ", ": "))
    if len(flat) + indent <= width or not isinstance(value, (list, dict)) or not value:
        return flat
    pad = " " * (indent + 1)
    if isinstance(value, list):
        body = (",\n").join(pad + dumps(v, indent + 1, width) for v in value)
        return "[\n%s\n%s]" % (body, " " * indent)
    body = (",\n").join("%s%s: %s" % (pad, json.dumps(str(k)), dumps(v, indent + 1, width)) for k, v in value.items())
    return "{\n%s\n%s}" % (body, " " * indent)


def _atomic_write(path, data):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(tmp, path)


def save_tensors(path, tensors):
    buffer = io.BytesIO()
    torch.save(tensors, buffer)
    _atomic_write(path, buffer.getvalue())


def check_out(out):
    """InputError when ``out`` exists as a non-empty directory or as a file."""
    if os.path.isdir(out) and os.listdir(out):
        raise InputError("%s: exists and is not empty; replay_op.py never overwrites evidence "
                         "(choose another --out)" % out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise InputError("%s: exists and is not a directory" % out)


def prepare_out(out, explicit):
    """Create the output directory and return it.  An explicit ``out`` that exists non-empty is
    refused (evidence is never overwritten); the default name moves on to ``<out>.2``, ``.3``, ..."""
    if not explicit:
        n = 1
        base = out
        while os.path.exists(out) and not (os.path.isdir(out) and not os.listdir(out)):
            n += 1
            out = "%s.%d" % (base, n)
    check_out(out)
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as exc:
        raise InputError("%s: cannot create (%s)" % (out, exc.strerror or exc))
    check_out(out)  # another writer may have got there between the check and the mkdir
    return out


def _default_out(stage, occurrence):
    return "replay-" + re.sub(r"[^A-Za-z0-9_.#-]", "_", "%s#%d" % (stage, occurrence))[:200]


# --------------------------------------------------------------------------- --list


def list_sets(windows, dump, stage_filter=None):
    document = {"format": LIST_FORMAT, "version": FORMAT_VERSION, "dump": dump, "windows": []}
    for w in windows:
        counts = {}
        for e in w.input_sets:
            counts[e.get("stage")] = counts.get(e.get("stage"), 0) + 1
        sets = []
        for e in w.input_sets:
            if stage_filter is not None and e.get("stage") != stage_filter:
                continue
            try:
                path = input_file(w, e)
                present = os.path.isfile(path)
            except InputError:
                path, present = None, False
            args = []
            for name, desc in (e.get("args") or {}).items():
                args.append(_list_arg(name, desc))
            sets.append({
                "key": entry_key(e), "stage": e.get("stage"),
                "occurrence": e.get("occurrence"), "captured": counts[e.get("stage")], "op": e.get("op"),
                "file": e.get("file"), "file_present": present, "args": args,
            })
        document["windows"].append({
            "manifest": w.path, "directory": w.directory, "rank": w.rank, "label": w.label, "match": w.match,
            "occurrence": w.occurrence, "attempt": w.attempt, "unfinished": w.unfinished,
            "note": UNFINISHED_NOTE if w.unfinished else None, "cut_off": w.cut_off, "input_sets": sets,
        })
    return document


def _list_arg(name, desc):
    desc = desc if isinstance(desc, dict) else {}
    kind = desc.get("kind")
    entry = {"name": name, "kind": kind}
    if kind == "tensor":
        for key in ("dtype", "shape", "stride", "storage_offset", "device", "storage_id", "is_contiguous"):
            entry[key] = desc.get(key)
    elif kind in ("list", "tuple"):
        entry["items"] = [_list_arg("%s[%d]" % (name, i), d) for i, d in enumerate(desc.get("items", []))]
    elif kind == "dict":
        entry["items"] = [_list_arg("%s.%s" % (name, k), d) for k, d in desc.get("items", {}).items()]
    elif "value" in desc:
        entry["value"] = desc["value"]
    return entry


def _arg_text(arg, indent="    "):
    kind = arg["kind"]
    if kind == "tensor":
        text = "%s%-12s tensor %s %s stride %s offset %s %s" % (
            indent, arg["name"], arg["dtype"], arg["shape"], arg["stride"], arg["storage_offset"], arg["device"])
        if arg.get("storage_id") is not None:
            text += " storage %s" % arg["storage_id"]
        if arg.get("is_contiguous") is False:
            text += " non-contiguous"
        return [text]
    if kind in ("list", "tuple", "dict"):
        lines = ["%s%-12s %s of %d" % (indent, arg["name"], kind, len(arg["items"]))]
        for item in arg["items"]:
            lines.extend(_arg_text(item, indent + "  "))
        return lines
    if "value" in arg:
        return ["%s%-12s %s %s" % (indent, arg["name"], kind, json.dumps(arg["value"]))]
    return ["%s%-12s %s" % (indent, arg["name"], kind)]


def list_text(document):
    lines = []
    for w in document["windows"]:
        if w.get("unfinished"):
            lines.append("%s  UNFINISHED  rank %s  match %s  occurrence %s%s" % (
                w["directory"], w["rank"], w["match"], w["occurrence"],
                "" if w["attempt"] == 1 else "  attempt %s" % w["attempt"]))
            lines.append("  " + w["note"])
            for name in w.get("cut_off") or []:
                lines.append("  cut off: %s (a write the run did not finish; not an input set)" % name)
        else:
            lines.append("%s  rank %s  label %s  match %s  occurrence %s%s" % (
                w["manifest"], w["rank"], json.dumps(w["label"]), w["match"], w["occurrence"],
                "" if w["attempt"] == 1 else "  attempt %s" % w["attempt"]))
        if not w["input_sets"]:
            lines.append("  (no input sets)")
        for s in w["input_sets"]:
            head = "  %s  (stage captured %d time%s)" % (s["key"], s["captured"], "" if s["captured"] == 1 else "s")
            if s["op"]:
                head += "  op %s" % s["op"]
            if not s["file_present"]:
                head += "  FILE MISSING: %s" % s["file"]
            lines.append(head)
            for arg in s["args"]:
                lines.extend(_arg_text(arg))
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- --batch: a case matrix


# `dumpview cases` plans a matrix of cases over one captured input set (docs/cases.md): the
# baseline, then one case per axis value, each changing exactly one thing.  --batch runs them all
# in this one process (torch imported once), each case's transform applied to the rebuilt
# baseline inputs, each case's outputs written as a replay's are (DIR/<case id>/, replay.json last).

import copy as _copy  # noqa: E402  (only the batch mode needs it)

PLAN_FORMAT = "dumpview.cases.plan"
PLAN_VERSION = 1
# Case ids name directories: this alphabet and never "." or "..", so no id can leave --out-root.
_CASE_ID = re.compile(r"^[A-Za-z0-9_.=-]+$")
_TRANSFORM_KINDS = ("none", "dtype", "layout", "shape", "mode", "option")
_LAYOUTS = ("contiguous", "transposed", "strided")


def _batch_arguments(parser):
    parser.add_argument("--batch", metavar="PLAN",
                        help="run the cases of a dumpview case plan (PLAN.json, or the plan's JSON text); "
                             "needs --out-root (docs/cases.md)")
    parser.add_argument("--out-root", metavar="DIR", help="with --batch: case CASE's outputs go to DIR/CASE")
    parser.add_argument("--only", action="append", default=[], metavar="CASE",
                        help="with --batch: run only this case (repeatable)")


def valid_case_id(text):
    """True for a name a case (or a plan) may have: [A-Za-z0-9_.=-]+, not "." or ".."."""
    return isinstance(text, str) and bool(_CASE_ID.match(text)) and text not in (".", "..")


def _refuse_constant(token):
    raise ValueError("non-strict JSON constant %s" % token)


def read_plan(source):
    """(plan, where) for --batch PLAN (a path, or the plan's JSON text); InputError naming it."""
    if source.lstrip().startswith("{"):
        where = "--batch (the plan's JSON text)"
        try:
            plan = json.loads(source, parse_constant=_refuse_constant)
        except ValueError as exc:
            raise InputError("%s: not valid JSON (%s)" % (where, exc))
    else:
        where = source
        try:
            plan = _strict_json(source)
        except OSError as exc:
            raise InputError("%s: cannot read (%s)" % (source, exc.strerror or exc))
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError("%s: not a valid plan: truncated or not JSON (%s)" % (source, exc))
    if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
        raise InputError("%s: not a dumpview case plan (format is not \"%s\")" % (where, PLAN_FORMAT))
    if plan.get("version") != PLAN_VERSION:
        raise InputError("%s: plan version %r; this replay_op.py reads version %d" % (where, plan.get("version"), PLAN_VERSION))
    for key, kind in (("name", str), ("stage", str), ("candidate", str), ("reference", str), ("cases", list)):
        if not isinstance(plan.get(key), kind):
            raise InputError("%s: %r is missing or not a %s" % (where, key, kind.__name__))
    if not valid_case_id(plan["name"]):
        raise InputError("%s: name %r is not a plan name ([A-Za-z0-9_.=-]+)" % (where, plan["name"]))
    seen = set()
    for i, case in enumerate(plan["cases"]):
        if not isinstance(case, dict):
            raise InputError("%s: cases[%d] is not an object" % (where, i))
        if not valid_case_id(case.get("id")):
            raise InputError("%s: cases[%d]: id %r is not a case name ([A-Za-z0-9_.=-]+, not . or ..)"
                             % (where, i, case.get("id")))
        if case["id"] in seen:
            raise InputError("%s: case %s is planned twice" % (where, case["id"]))
        seen.add(case["id"])
        transform = case.get("transform")
        if not isinstance(transform, dict) or transform.get("kind") not in _TRANSFORM_KINDS:
            raise InputError("%s: case %s: transform is not one of %s" % (where, case["id"], ", ".join(_TRANSFORM_KINDS)))
    return plan, where


def contiguous_stride(shape):
    """Row-major strides of ``shape``, in elements."""
    stride, n = [], 1
    for size in reversed(shape):
        stride.append(n)
        n *= max(size, 1)
    return list(reversed(stride))


def dense_stride(shape, like):
    """Dense strides of ``shape`` with its dimensions nested as in the strides ``like`` (the
    largest stride outermost): contiguous when ``like`` is, a transpose stays a transpose."""
    order = sorted(range(len(shape)), key=lambda d: (-like[d], d))
    stride, n = [0] * len(shape), 1
    for d in reversed(order):
        stride[d] = n
        n *= max(shape[d], 1)
    return stride


def layout_stride(shape, layout):
    """The strides a ``layout[x]`` value gives x of ``shape``: contiguous; transposed (the
    last two dimensions' strides swapped: stored as the transpose of a contiguous tensor);
    strided (every other element of a buffer twice as long in the last dimension)."""
    shape = list(shape)
    if layout == "contiguous":
        return contiguous_stride(shape)
    if layout == "transposed":
        swapped = shape[:-2] + [shape[-1], shape[-2]]
        stride = contiguous_stride(swapped)
        return stride[:-2] + [stride[-1], stride[-2]]
    stride = contiguous_stride(shape[:-1] + [2 * shape[-1]])
    stride[-1] = 2
    return stride


def _logical(leaf):
    """The captured values of ``leaf``, as the view over its saved span."""
    return torch.as_strided(leaf.span, leaf.shape, leaf.stride, leaf.offset_in_span)


def _placed(leaf, values, stride, length=0):
    """A copy of ``leaf`` holding ``values`` stored with ``stride`` in a fresh buffer of at
    least ``length`` elements (the gaps NaN for floating dtypes, else 0), shared with nothing."""
    shape = list(values.shape)
    extent = 1 + sum((s - 1) * st for s, st in zip(shape, stride)) if values.numel() else 0
    length = max(extent, length)
    fill = float("nan") if values.dtype.is_floating_point or values.dtype.is_complex else 0
    buffer = torch.full((length,), fill, dtype=values.dtype)
    if values.numel():
        torch.as_strided(buffer, shape, list(stride), 0).copy_(values)
    new = _copy.copy(leaf)
    new.span, new.dtype, new.shape, new.stride = buffer, values.dtype, shape, list(stride)
    new.offset_in_span = new.storage_offset = new.span_start = 0
    new.storage_id = None
    new.numel = values.numel()
    return new


def _case_input_set(inputs, replaced):
    """``inputs`` with the leaves in ``replaced`` (id(old) -> new) swapped in, storages regrouped."""
    case = _copy.copy(inputs)

    def swap(value):
        if isinstance(value, Leaf):
            return replaced.get(id(value), value)
        if isinstance(value, list):
            return [swap(v) for v in value]
        if isinstance(value, tuple):
            return tuple(swap(v) for v in value)
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        return value

    case.values = {name: swap(v) for name, v in inputs.values.items()}
    case.leaves = [replaced.get(id(leaf), leaf) for leaf in inputs.leaves]
    groups = {}
    for leaf in case.leaves:
        if leaf.storage_id is not None and leaf.numel:
            groups.setdefault((leaf.device, leaf.storage_id), []).append(leaf)
    case.groups = [g for g in groups.values() if len(g) > 1]
    return case


def _tensor_arg(inputs, name, where):
    value = inputs.values.get(name)
    if not isinstance(value, Leaf):
        raise InputError("%s: %s is not a tensor argument of %s#%s (arguments: %s)"
                         % (where, name, inputs.entry["stage"], inputs.entry["occurrence"], ", ".join(inputs.values)))
    return value


def _shared_with(inputs, leaf):
    return [other.path for other in inputs.leaves
            if other is not leaf and leaf.storage_id is not None and other.storage_id == leaf.storage_id
            and other.device == leaf.device]


def apply_case(inputs, case, where):
    """(case inputs, scalar overrides, mode, notes) of one planned case: its transform applied to
    the baseline inputs.  InputError when the transform does not fit the input set."""
    transform = case["transform"]
    kind = transform["kind"]
    where = "%s: case %s" % (where, case["id"])
    replaced, overrides, notes, mode = {}, {}, [], "eager"
    if kind == "dtype":
        wanted = transform.get("args")
        if not isinstance(wanted, dict) or not wanted:
            raise InputError("%s: a dtype transform names no arguments" % where)
        for name, dtype_name in wanted.items():
            leaf = _tensor_arg(inputs, name, where)
            dtype = _dtype(dtype_name, where)
            if not (leaf.dtype.is_floating_point and dtype.is_floating_point):
                raise InputError("%s: %s is %s; dtype casts floating tensors to floating dtypes"
                                 % (where, name, str(leaf.dtype).replace("torch.", "")))
            new = _copy.copy(leaf)
            new.span, new.dtype = leaf.span.to(dtype), dtype
            replaced[id(leaf)] = new
        for leaf in inputs.leaves:  # a storage shared by arguments cast differently is shared no more
            others = [o for o in inputs.leaves if o is not leaf and o.storage_id is not None
                      and o.storage_id == leaf.storage_id and o.device == leaf.device]
            if id(leaf) in replaced and any(replaced.get(id(o), o).dtype != replaced[id(leaf)].dtype for o in others):
                replaced[id(leaf)].storage_id = None
                notes.append("%s no longer shares its storage with %s (cast to another dtype)"
                             % (leaf.path, ", ".join(o.path for o in others)))
    elif kind == "layout":
        name, layout = transform.get("arg"), transform.get("layout")
        leaf = _tensor_arg(inputs, name, where)
        if layout not in _LAYOUTS:
            raise InputError("%s: unknown layout %r (one of %s)" % (where, layout, ", ".join(_LAYOUTS)))
        if layout == "transposed" and len(leaf.shape) < 2:
            raise InputError("%s: %s has %d dimension(s); transposed needs two" % (where, name, len(leaf.shape)))
        if layout == "strided" and not leaf.shape:
            raise InputError("%s: %s is 0-d; strided needs a last dimension" % (where, name))
        stride = layout_stride(leaf.shape, layout)
        if transform.get("stride") is not None and list(transform["stride"]) != stride:
            raise InputError("%s: the plan gives %s stride %s, the input set's shape %s makes %s"
                             % (where, name, transform["stride"], leaf.shape, stride))
        length = 0
        if layout == "strided":
            length = 2 * leaf.shape[-1]
            for size in leaf.shape[:-1]:
                length *= size
        shared = _shared_with(inputs, leaf)
        replaced[id(leaf)] = _placed(leaf, _logical(leaf), stride, length)
        if shared:
            notes.append("%s no longer shares its storage with %s (stored anew)" % (name, ", ".join(shared)))
    elif kind == "shape":
        changes = transform.get("args")
        if not isinstance(changes, list) or not changes:
            raise InputError("%s: a shape transform names no arguments" % where)
        for change in changes:
            name = change.get("arg") if isinstance(change, dict) else None
            leaf = _tensor_arg(inputs, name, where)
            shape, stride = change.get("shape"), change.get("stride")
            if not isinstance(shape, list) or len(shape) != len(leaf.shape) or any(
                    not isinstance(s, int) or s < 0 or s > old for s, old in zip(shape, leaf.shape)):
                raise InputError("%s: %s shape %s cannot be cut from the captured %s" % (where, name, shape, leaf.shape))
            values = _logical(leaf)
            for dim, (size, old) in enumerate(zip(shape, leaf.shape)):
                if size != old:
                    values = values.narrow(dim, 0, size)
            expected = dense_stride(shape, leaf.stride)
            if stride is not None and list(stride) != expected:
                raise InputError("%s: the plan gives %s stride %s; shape %s stored as captured makes %s"
                                 % (where, name, stride, shape, expected))
            shared = _shared_with(inputs, leaf)
            replaced[id(leaf)] = _placed(leaf, values, expected)
            if shared:
                notes.append("%s no longer shares its storage with %s (cut to %s)" % (name, ", ".join(shared), shape))
    elif kind == "mode":
        mode = transform.get("mode")
        if mode not in ("eager", "compile"):
            raise InputError("%s: unknown mode %r (eager or compile)" % (where, mode))
        if mode == "compile":
            notes.append("the candidate ran under torch.compile (default backend); its duration includes the compilation")
    elif kind == "option":
        name = transform.get("name")
        if name not in inputs.values or _holds_tensor(inputs.values[name]):
            raise InputError("%s: %r is not a scalar argument of %s#%s" % (where, name, inputs.entry["stage"],
                                                                            inputs.entry["occurrence"]))
        value = transform.get("value")
        if isinstance(value, int) and not isinstance(value, bool) and isinstance(inputs.values[name], float):
            value = float(value)
        overrides[name] = value
    return _case_input_set(inputs, replaced), overrides, mode, notes


def _compiled(fn):
    compiled = {}

    def run(*args, **kwargs):
        if "fn" not in compiled:
            compiled["fn"] = torch.compile(fn)
        return compiled["fn"](*args, **kwargs)

    try:
        run.__signature__ = inspect.signature(fn)  # so the call style is the candidate's own
    except (TypeError, ValueError):
        pass
    return run


def _save_case_inputs(path, inputs, device, overrides):
    """inputs.pt: the arguments exactly as the candidate receives them (layouts, sharing, options),
    for the regression test `dumpview cases export-test` writes."""
    values, _ = inputs.rebuild(device, None)
    values.update(overrides)
    save_tensors(path, values)


def run_case(args, plan, case, inputs, window, entry, file, fns, device, ref_device, device_note, out, where):
    """Runs one case's four sides into ``out``; returns the candidate's side record."""
    case_inputs, overrides, mode, notes = apply_case(inputs, case, where)
    (candidate_fn, candidate_resolved), (reference_fn, reference_resolved) = fns
    if mode == "compile":
        candidate_fn = _compiled(candidate_fn)
    try:
        _save_case_inputs(os.path.join(out, "inputs.pt"), case_inputs, device, overrides)
        inputs_file = "inputs.pt"
    except Exception as exc:  # the candidate's side will say why the inputs could not be built
        inputs_file = None
        notes.append("inputs.pt not written (%s: %s)" % (type(exc).__name__, exc))
    runs = (
        ("candidate", plan["candidate"], candidate_fn, candidate_resolved, device, None),
        ("reference", plan["reference"], reference_fn, reference_resolved, ref_device, "reference"),
        ("golden", plan["reference"], reference_fn, reference_resolved, ref_device, "float64"),
        ("reference_native", plan["reference"], reference_fn, reference_resolved, ref_device, None),
    )
    report = {
        "format": FORMAT, "version": FORMAT_VERSION, "tool": TOOL_VERSION,
        "dump": args.dump, "manifest": window.path, "window_dir": window.directory,
        "rank": window.rank, "label": window.label, "match": window.match, "occurrence_window": window.occurrence,
        "attempt": window.attempt, "window_unfinished": window.unfinished,
        "stage": entry["stage"], "occurrence": entry["occurrence"], "input_file": file,
        "op_recorded": entry.get("op"),
        "device": str(device), "device_name": device_name(device), "captured_device": inputs.captured_device,
        "device_note": device_note, "reference_device": str(ref_device),
        "versions": versions(), "host": socket.gethostname(), "created_unix_s": time.time(), "seed": args.seed,
        "call": None,
        "arg_map": {}, "arg_overrides": {k: _json_value(v) for k, v in overrides.items()},
        "args": describe_args(case_inputs, overrides, {}),
        "outputs": [],
        "case": {"plan": plan["name"], "id": case["id"], "axis": case.get("axis"), "value": case.get("value"),
                 "transform": case["transform"], "mode": mode, "notes": notes, "inputs_file": inputs_file},
    }
    sides = {}
    for name, spec, fn, resolved, dev, upcast in runs:
        write_partial(out, report, sides, {"name": name,
                                           "stub": side_stub(spec, resolved, case_inputs, dev, upcast, "running")})
        side, tensors = run_side(spec, fn, resolved, case_inputs, dev, upcast, {}, overrides, args.seed,
                                 stdout=os.path.join(out, "%s.stdout" % name))
        side["file"] = None
        if side["status"] == "ok" and tensors:
            side["file"] = "%s.pt" % name
            save_tensors(os.path.join(out, side["file"]), tensors)
        sides[name] = side
    report["call"] = sides["candidate"]["call"]
    report["outputs"] = sides["candidate"]["output_layouts"]
    report["sides"] = sides
    finish_record(out, report)
    return sides["candidate"]


def batch(args):
    """--batch: every planned case (or --only's) into --out-root/<case id>; returns the number run."""
    if args.stage or args.candidate or args.reference or args.arg or args.arg_map or args.out:
        raise InputError("--batch takes the stage, candidate, reference and arguments from the plan; "
                         "--stage, --candidate, --reference, --arg, --arg-map and --out do not go with it")
    if not args.out_root:
        raise InputError("--batch needs --out-root DIR (case CASE's outputs go to DIR/CASE)")
    plan, where = read_plan(args.batch)
    cases = plan["cases"]
    if args.only:
        ids = [c["id"] for c in cases]
        unknown = [c for c in args.only if c not in ids]
        if unknown:
            raise InputError("%s: no case %s in the plan; its cases: %s" % (where, ", ".join(unknown), ", ".join(ids)))
        cases = [c for c in cases if c["id"] in args.only]
    for case in cases:  # refused before any work: evidence is never overwritten
        check_out(os.path.join(args.out_root, case["id"]))
    for directory in args.paths:
        if directory not in sys.path:
            sys.path.append(directory)
    for module in args.imports:
        try:
            importlib.import_module(module)
        except Exception as exc:
            raise InputError("--import %s failed (%s: %s)" % (module, type(exc).__name__, exc))
    windows = select_windows(find_windows(args.dump, args.attempt), args.rank, args.window)
    window, entry = pick_input_set(windows, plan["stage"])
    file = input_file(window, entry)
    if window.unfinished:
        _log("note: %s: an unfinished window: %s" % (window.directory, UNFINISHED_NOTE))
    load_torch()
    fns = (resolve(plan["candidate"]), resolve(plan["reference"]))
    inputs = InputSet(window, entry, file, load_payload(file, entry))
    for case in cases:  # every transform checked before the first case runs
        apply_case(inputs, case, where)
    device_note = None
    if args.device:
        if not device_available(args.device):
            raise InputError("--device %s: not available here" % args.device)
        device = torch.device(args.device)
    elif device_available(inputs.captured_device):
        device = torch.device(inputs.captured_device)
    else:
        device = torch.device("cpu")
        device_note = "captured on %s, which is not available here; replayed on cpu" % inputs.captured_device
        _log("note: " + device_note)
    if not device_available(args.reference_device):
        raise InputError("--reference-device %s: not available here" % args.reference_device)
    ref_device = torch.device(args.reference_device)
    _log("%s: plan %s, %s#%s, %d case%s, candidate on %s, reference on %s" % (
        window.where, plan["name"], entry["stage"], entry["occurrence"], len(cases), "" if len(cases) == 1 else "s",
        device, ref_device))
    for i, case in enumerate(cases, 1):
        head = "case %d/%d %s" % (i, len(cases), case["id"])
        out = prepare_out(os.path.join(args.out_root, case["id"]), True)
        _log("%s: start" % head)  # its directory exists from here on
        side = run_case(args, plan, case, inputs, window, entry, file, fns, device, ref_device, device_note, out, where)
        if side["status"] == "ok":
            said = "candidate ok in %.3g ms" % (side["duration_s"] * 1e3)
        else:
            said = "candidate %s: %s: %s" % (side["status"], side["exception"]["type"],
                                             (side["exception"]["message"].strip().splitlines() or [""])[0][:200])
        _log("%s: done (%s)" % (head, said))
    return len(cases)


# --------------------------------------------------------------------------- main


def _parser():
    parser = argparse.ArgumentParser(
        prog="replay_op.py",
        description="Replay one captured operator input set (dump_probe.capture_inputs) through a candidate "
                    "and a reference; write candidate.pt, reference.pt, golden.pt, reference_native.pt and "
                    "replay.json (docs/replay.md).",
    )
    parser.add_argument("dump", metavar="DUMP", nargs="?", help="manifest.json, a window directory, or a tree of them")
    parser.add_argument("--list", action="store_true", help="list the captured input sets")
    parser.add_argument("--json", action="store_true", help="with --list: one JSON document on stdout")
    parser.add_argument("--list-builtins", action="store_true", help="list the built-in references")
    parser.add_argument("--stage", metavar="X[#N]",
                        help="the input set: stage name and occurrence (#N may be left out when captured once)")
    parser.add_argument("--rank", type=int, metavar="R", help="the window's rank")
    parser.add_argument("--window", metavar="W", help="the window: its label, match number or directory name")
    parser.add_argument("--attempt", type=int, metavar="N",
                        help="attempt N of each window re-run into one directory (match1-occ1.N; default: the newest, "
                             "finished or not); a window without it is an error listing those it has")
    parser.add_argument("--candidate", metavar="OP",
                        help="module.path:fn, path/to/file.py:fn, a dotted torch callable, or builtin:NAME")
    parser.add_argument("--reference", metavar="REF", help="as --candidate; usually builtin:NAME")
    parser.add_argument("--device", metavar="D",
                        help="candidate device (default: the captured device if available, else cpu)")
    parser.add_argument("--reference-device", metavar="D", default="cpu",
                        help="device of the reference, golden and reference_native runs (default cpu)")
    parser.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                        help="override (or add) a scalar or list argument; VALUE is JSON (1e-5, true, [256]) or a string")
    parser.add_argument("--arg-map", action="append", default=[], metavar="CAPTURED=PARAM",
                        help="pass a captured argument under another parameter name")
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import MODULE first (e.g. one that registers torch.ops)")
    parser.add_argument("--path", dest="paths", action="append", default=[], metavar="DIR",
                        help="append DIR to the import path before OP and REF are resolved (repeatable): where the "
                             "captured run's own modules live (dumpview --cross gives the run's working directory)")
    parser.add_argument("--seed", type=int, default=0, help="torch.manual_seed before each call (default 0)")
    parser.add_argument("--out", metavar="DIR", help="output directory (created; an existing non-empty one is refused)")
    parser.add_argument("--candidate-only", action="store_true",
                        help="run the candidate only: the reference sides are recorded as skipped, with no files "
                             "(for a caller that computes the reference itself, e.g. dumpview's in-process built-ins)")
    _batch_arguments(parser)
    return parser


def _holds_tensor(value):
    if isinstance(value, Leaf):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_tensor(v) for v in value.values())
    return False


def _pairs(items, flag):
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InputError("%s %r: expected NAME=VALUE" % (flag, item))
        out[name] = value
    return out


def replay(args):
    """The replay proper; returns the path of replay.json."""
    for directory in args.paths:
        if directory not in sys.path:
            sys.path.append(directory)  # after the installed packages: it never shadows them
    for module in args.imports:
        try:
            importlib.import_module(module)
        except Exception as exc:
            raise InputError("--import %s failed (%s: %s)" % (module, type(exc).__name__, exc))
    if not args.candidate or not args.reference:
        raise InputError("--stage needs --candidate OP and --reference REF")
    windows = select_windows(find_windows(args.dump, args.attempt), args.rank, args.window)
    window, entry = pick_input_set(windows, args.stage)
    file = input_file(window, entry)
    if window.unfinished:
        _log("note: %s: an unfinished window: %s" % (window.directory, UNFINISHED_NOTE))
    explicit = args.out is not None
    out = args.out if explicit else _default_out(entry["stage"], entry["occurrence"])
    if explicit:
        check_out(out)  # refused before any work
    _run_under_recorded(window)
    load_torch()
    candidate_fn, candidate_resolved = resolve(args.candidate)
    reference_fn, reference_resolved = resolve(args.reference)
    payload = load_payload(file, entry)
    inputs = InputSet(window, entry, file, payload)

    overrides = {}
    for name, text in _pairs(args.arg, "--arg").items():
        if name in inputs.values and _holds_tensor(inputs.values[name]):
            raise InputError("--arg %s: %s is a tensor argument of %s#%s; --arg sets scalars and lists"
                             % (name, name, entry["stage"], entry["occurrence"]))
        value = parse_value(text)
        if isinstance(value, int) and not isinstance(value, bool) and isinstance(inputs.values.get(name), float):
            value = float(value)  # --arg eps=1 for a float argument
        overrides[name] = value
    mapping = _pairs(args.arg_map, "--arg-map")
    for name in mapping:
        if name not in inputs.values and name not in overrides:
            raise InputError("--arg-map %s: no argument %r in %s#%s (arguments: %s)"
                             % (name, name, entry["stage"], entry["occurrence"], ", ".join(inputs.values)))

    device_note = None
    if args.device:
        if not device_available(args.device):
            raise InputError("--device %s: not available here" % args.device)
        device = torch.device(args.device)
    elif device_available(inputs.captured_device):
        device = torch.device(inputs.captured_device)
    else:
        device = torch.device("cpu")
        device_note = "captured on %s, which is not available here; replayed on cpu" % inputs.captured_device
        _log("note: " + device_note)
    if not device_available(args.reference_device):
        raise InputError("--reference-device %s: not available here" % args.reference_device)
    ref_device = torch.device(args.reference_device)

    out = prepare_out(out, explicit)
    _log("%s: %s, %d argument%s, candidate on %s, reference on %s" % (
        window.where, entry_key(entry), len(inputs.values), "" if len(inputs.values) == 1 else "s",
        device, ref_device))

    plan = (
        ("candidate", args.candidate, candidate_fn, candidate_resolved, device, None),
        ("reference", args.reference, reference_fn, reference_resolved, ref_device, "reference"),
        ("golden", args.reference, reference_fn, reference_resolved, ref_device, "float64"),
        ("reference_native", args.reference, reference_fn, reference_resolved, ref_device, None),
    )
    report = {
        "format": FORMAT, "version": FORMAT_VERSION, "tool": TOOL_VERSION,
        "dump": args.dump, "manifest": window.path, "window_dir": window.directory,
        "rank": window.rank, "label": window.label, "match": window.match, "occurrence_window": window.occurrence,
        "attempt": window.attempt, "window_unfinished": window.unfinished,
        "stage": entry["stage"], "occurrence": entry["occurrence"], "input_file": file,
        "op_recorded": entry.get("op"),
        "device": str(device), "device_name": device_name(device), "captured_device": inputs.captured_device,
        "device_note": device_note, "reference_device": str(ref_device), "candidate_only": bool(args.candidate_only),
        "versions": versions(), "host": socket.gethostname(), "created_unix_s": time.time(), "seed": args.seed,
        "call": None,
        "arg_map": mapping, "arg_overrides": {k: _json_value(v) for k, v in overrides.items()},
        "args": describe_args(inputs, overrides, mapping),
        "outputs": [],
    }
    sides = {}
    for name, spec, fn, resolved, dev, upcast in plan:
        if args.candidate_only and name != "candidate":
            sides[name] = skipped_side(spec, resolved, inputs, dev, upcast)
            _log("%s %s: skipped (--candidate-only)" % (name, spec))
            continue
        write_partial(out, report, sides, {"name": name,
                                           "stub": side_stub(spec, resolved, inputs, dev, upcast, "running")})
        side, tensors = run_side(spec, fn, resolved, inputs, dev, upcast, mapping, overrides, args.seed,
                                 stdout=os.path.join(out, "%s.stdout" % name))
        side["file"] = None
        if side["status"] == "ok" and tensors:
            side["file"] = "%s.pt" % name
            save_tensors(os.path.join(out, side["file"]), tensors)
        sides[name] = side
        if side["status"] == "ok":
            _log("%s %s: ok in %.3g ms, outputs %s"
                 % (name, spec, side["duration_s"] * 1e3, ", ".join(side["outputs"]) or "none"))
        else:
            _log("%s %s: %s: %s: %s" % (name, spec, side["status"], side["exception"]["type"],
                                        (side["exception"]["message"].strip().splitlines() or [""])[0][:200]))

    report["call"] = sides["candidate"]["call"]
    report["outputs"] = sides["candidate"]["output_layouts"]
    report["sides"] = sides
    path = finish_record(out, report)
    _log("wrote %s" % path)
    return path


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.list_builtins:
            for name, fn in BUILTINS.items():  # their signatures and docs need no torch
                summary = (inspect.getdoc(fn) or "").splitlines()[0]
                sys.stdout.write("builtin:%-14s %s%s  %s\n" % (name, name, inspect.signature(fn), summary))
            return 0
        if not args.dump:
            parser.error("DUMP is required")
        if args.attempt is not None and args.attempt < 1:
            parser.error("--attempt N: N counts from 1")
        if args.list:
            windows = select_windows(find_windows(args.dump, args.attempt), args.rank, args.window)
            stage = parse_stage(args.stage)[0] if args.stage else None
            document = list_sets(windows, args.dump, stage)
            if args.json:
                sys.stdout.write(dumps(_json_value(document)) + "\n")
            else:
                sys.stdout.write(list_text(document))
            return 0
        if args.batch or args.stage:
            # A fatal signal (a segfaulting kernel) prints the Python stack of the call on
            # stderr before the process dies: dumpview keeps it in the crash record.
            faulthandler.enable()
        if args.batch:
            batch(args)
            return 0
        if args.json:
            parser.error("--json goes with --list")
        if not args.stage:
            parser.error("say --list, or --stage X[#N] with --candidate and --reference")
        replay(args)
        return 0
    except InputError as exc:
        sys.stderr.write("replay_op.py: error: %s\n" % exc)
        return 2


if __name__ == "__main__":
    sys.exit(main())
else:  # imported as a module (a test, another tool): the built-ins are ready to call
    load_torch()
