"""dump_probe: bounded, sync-free tensor dumps for numerical debugging.

Copy this single file into the package under test (or write it out with
``dumpview probe install DIR``).  It needs Python >= 3.9 and torch >= 2.1 and
nothing else; it works on any torch device (cpu, cuda, npu through torch_npu).

Usage inside the code under test::

    from . import dump_probe as dp
    dp.arm(request_id, token_ids=ids, temperature=0.0)    # at a scheduling boundary
    dp.capture("layers.3.attn_out", attn_out)              # at candidate stages
    dp.capture_inputs("layers.3.rope", q=q, k=k, pos=pos)  # a full operator input set
    dp.finish()                                            # once the logits exist

Or without an edit per stage: forward hooks on the modules whose paths match a regex, and a
window per forward of the model (``python -m dump_probe --hook REGEX script.py`` needs no
edit at all)::

    hooks = dp.hook(model, stages=r"(self_attn|mlp)$", label=True)
    model.generate(**inputs)                               # a window per forward
    dp.unhook()

Under tensor (or context) parallelism, say where each rank sits and how each stage is
split, so dumpview can merge a TP=2 capture's shards and compare it with a TP=1 one::

    dp.arm(request_id, token_ids=ids, parallel={"tp": (tp_rank, tp_size)})
    dp.capture("layers.3.qkv", qkv, shard="tp:-1")              # a slice of the last dim
    dp.capture("layers.3.o_partial", o, shard="partial:tp")     # before the all-reduce
    dp.capture("layers.3.o", o_sum, shard="replicated:tp", collective="all_reduce")

Environment (read once, at import):

    DUMP_PROBE             1/true/yes/on arms the probe; 0/false/no/off (or unset) leaves it off;
                           any other value leaves it off with a warning
    DUMP_PROBE_DIR         output directory (default ./dump_probe_out)
    DUMP_PROBE_RANKS       ranks that write: "0" (default), "0,2", or "all"
    DUMP_PROBE_TENSOR      regex of stages whose full tensors are saved (default: none)
    DUMP_PROBE_ROWS        rows (dim 0) kept per saved tensor; 0 or "all" keeps every row (default 256)
    DUMP_PROBE_MATCH       which distinct label is captured, 1-based (default 1)
    DUMP_PROBE_OCCURRENCE  which calls of that label are captured, 1-based: one ("3", default 1),
                           a range ("2-5") or "all"; each call is a window of its own
    DUMP_PROBE_REQUEST     capture the forwards whose row map holds this request id (instead
                           of DUMP_PROBE_MATCH; DUMP_PROBE_OCCURRENCE then counts those forwards)
    DUMP_PROBE_HOOK        regex of module paths that hook() captures, replacing its stages=
    DUMP_PROBE_ROW_STATS   per-row statistics of token rows (rows.f32 beside the manifest):
                           "on" (default), "off", or a regex of the stages that get them
    DUMP_PROBE_ROW_POSITIONS  token positions whose rows get them, "FIRST-LAST" (default 0-65535)
    DUMP_PROBE_TENSOR_FORMAT  "safetensors" (default) or "pt"
    DUMP_PROBE_KERNEL      statistics path: "auto" (default: one fused pass per tensor where it
                           runs without a compile on cpu: a Triton kernel on cuda/npu; on cpu
                           the native library's dp_summarize when libdump_probe.so is found,
                           else the torch ops), "fused" (the same, but on cpu without the
                           library torch.compile, seconds per dtype on the first capture; a
                           warning where no fused path can run), or "torch"
    DUMP_PROBE_LIB         the native library for the cpu path (default: libdump_probe.so
                           beside this file)
    DUMP_PROBE_SYNC_INPUTS 1: capture_inputs() returns once its set is written and fsynced
                           (for an operator that kills the process); 0 (default): host sets
                           are written on a writer thread while the model runs on

An empty value is the same as an unset variable (its default applies).  Invalid
values print one warning at import that names every one of them (an unwritable
or impossible DUMP_PROBE_DIR included; nothing is created then) and leave the
probe disarmed; a DUMP_PROBE value that is neither on nor off is said too.  No
function here raises into the model it observes: an internal failure prints
one warning and disarms the probe.  A tensor the probe cannot capture (a nested
tensor, a __torch_dispatch__ subclass such as TwoTensor, a sparse tensor in an
input set or a graph slot) skips that one record or set, with a warning on
stderr and in the window's ``warnings``; the rest of the window is written.  A
window finish() cannot write (a full disk: ENOSPC) is named at exit with the
error, its directory and its incomplete ``.tmp.<pid>`` files.

Statistics are computed on the tensor's own device and stacked there; the host
reads them back in ``finish()``, in one transfer per device.  The capture path
never calls ``.cpu()``, ``.item()``, ``.tolist()`` or prints device values: a
dump that synchronises can complete the very asynchronous copy a bug depends
on.  The manifest format is described in docs/manifest.md of the dumpview
repository.
"""

import atexit
import ctypes
import errno
import json
import operator
import os
import re
import socket
import sys
import threading
import time
import weakref

import torch

PROBE_VERSION = "dump_probe.py 1"
SCHEMA_VERSION = 1

# The statistics of each record, in the manifest's order (docs/manifest.md).
STAT_NAMES = ("nan_count", "inf_count", "finite_count", "max_abs", "min", "max", "mean", "l2", "pos_checksum")
# What the device computes per record; finish() derives the rest on the host.
_DEVICE_STATS = ("nan_count", "inf_count", "min", "max", "sum", "l2", "pos_checksum")

_TWO_32 = 4294967296

# Per-row statistics of token rows, in the sidecar's column order (docs/manifest.md, "Token rows").
ROW_STAT_NAMES = ("nonfinite_count", "max_abs", "sum", "sum_squares", "row_checksum")
# The sidecar beside manifest.json that holds them: little-endian float32, one row of
# len(ROW_STAT_NAMES) values per token row.
ROWS_FILE = "rows.f32"
# Token positions whose rows get statistics by default (DUMP_PROBE_ROW_POSITIONS).
ROW_POSITIONS_DEFAULT_LAST = 65535

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")
# DUMP_PROBE_KERNEL values (see _stats_path).
_KERNEL_CHOICES = ("auto", "fused", "torch")

# The one boolean that every public call checks first.  True only while a
# selected window is open on a selected rank.
_active = False
# True while an armed process runs a call that is not captured but whose row count is not
# known from arm(): the call's first capture counts its rows (a shape, never a device value),
# so the label's positions go on counting; _active is True too, so the disarmed path stays
# the one boolean above.
_counting = False
# True while capture() computes a record: operators run then are the probe's, not the model's
# (ops() leaves them out).
_probe_busy = False


class _Config:
    """Parsed environment; ``errors`` names every invalid variable, ``error`` joins them.

    An empty (or blank) value is the same as an unset variable: its default applies.
    """

    def __init__(self, env):
        self.errors = []
        self.warnings = []  # said at import whether armed or not (DUMP_PROBE's own value)
        self.env = env  # read again at arm() for the manifest's run.env (os.environ outside the tests)

        def get(name, default=""):
            value = env.get(name)
            return default if value is None or not value.strip() else value

        switch = get("DUMP_PROBE").strip().lower()
        self.enabled = switch in _TRUE
        if switch not in _TRUE + _FALSE:
            self.warnings.append("DUMP_PROBE=%r is neither 1/true/yes/on (armed) nor 0/false/no/off (off); "
                                 "the probe stays off" % get("DUMP_PROBE"))
        self.directory = get("DUMP_PROBE_DIR", "dump_probe_out")
        self.ranks = self._ranks(get("DUMP_PROBE_RANKS", "0"))
        self.tensor_pattern = get("DUMP_PROBE_TENSOR")
        self.tensor_regex = self._regex("DUMP_PROBE_TENSOR", self.tensor_pattern)
        rows = get("DUMP_PROBE_ROWS", "256").strip().lower()
        self.rows = 0 if rows == "all" else self._positive_int("DUMP_PROBE_ROWS", rows, allow_zero=True)
        self.match = self._positive_int("DUMP_PROBE_MATCH", get("DUMP_PROBE_MATCH", "1"))
        self.occurrences = self._occurrences(get("DUMP_PROBE_OCCURRENCE", "1"))
        self.occurrence = self.occurrences[0]  # the first call selected (messages name it)
        self.request = get("DUMP_PROBE_REQUEST").strip() or None
        self.hook_pattern = self._regex("DUMP_PROBE_HOOK", get("DUMP_PROBE_HOOK"))
        self.row_stats, self.row_regex = self._row_stats(get("DUMP_PROBE_ROW_STATS", "on"))
        self.row_positions = self._row_positions(get("DUMP_PROBE_ROW_POSITIONS"))
        fmt = get("DUMP_PROBE_TENSOR_FORMAT", "safetensors").strip().lower()
        if fmt not in ("safetensors", "pt"):
            self._fail("DUMP_PROBE_TENSOR_FORMAT=%r must be 'safetensors' or 'pt'" % fmt)
        self.tensor_format = fmt
        kernel = get("DUMP_PROBE_KERNEL", "auto").strip().lower()
        if kernel not in _KERNEL_CHOICES:
            self._fail("DUMP_PROBE_KERNEL=%r must be 'auto', 'fused' or 'torch'" % kernel)
            kernel = "auto"
        self.kernel = kernel
        sync = get("DUMP_PROBE_SYNC_INPUTS", "0").strip().lower()
        if sync not in _TRUE + _FALSE:
            self._fail("DUMP_PROBE_SYNC_INPUTS=%r must be 1 or 0" % sync)
        self.sync_inputs = sync in _TRUE
        if self.enabled:
            self._directory(self.directory)

    @property
    def error(self):
        """Every invalid variable's message, joined; None when the configuration is valid."""
        return "; ".join(self.errors) if self.errors else None

    def _directory(self, path):
        """DUMP_PROBE_DIR: a directory that exists and is writable, or one that can be created
        (its nearest existing ancestor a writable directory). Nothing is created here."""
        name = "DUMP_PROBE_DIR=%r" % path
        try:
            probe = os.path.abspath(path)
            while not os.path.lexists(probe):
                parent = os.path.dirname(probe)
                if parent == probe:
                    break
                probe = parent
            if not os.path.isdir(probe):
                self._fail("%s cannot be a directory: %s is not one" % (name, probe))
            elif not os.access(probe, os.W_OK | os.X_OK):
                self._fail("%s is not writable: %s %s" % (
                    name, probe, "is read-only" if probe == os.path.abspath(path) else "does not let it be created"))
        except (OSError, ValueError) as exc:
            self._fail("%s is not a usable path (%s)" % (name, exc))

    def _regex(self, name, pattern):
        """The compiled regex of variable ``name``; None when it is empty or invalid (then the
        configuration fails, naming it)."""
        if not pattern:
            return None
        try:
            return re.compile(pattern)
        except re.error as exc:
            self._fail("%s=%r is not a valid regex (%s)" % (name, pattern, exc))
            return None

    def _fail(self, message):
        self.errors.append(message)

    def _positive_int(self, name, text, allow_zero=False):
        try:
            value = int(text.strip())
        except ValueError:
            value = -1
        if value < 0 or (value == 0 and not allow_zero):
            self._fail("%s=%r must be a %s integer" % (name, text, "non-negative" if allow_zero else "positive"))
            return 1
        return value

    def _occurrences(self, text):
        """DUMP_PROBE_OCCURRENCE: (first, last) calls selected, 1-based, inclusive; last None
        for "all" (every call from the first)."""
        text = text.strip().lower()
        if text == "all":
            return 1, None
        low, dash, high = text.partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            first = last = 0
        if first < 1 or last < first:
            self._fail("DUMP_PROBE_OCCURRENCE=%r must be a positive integer, a range like 2-5, or 'all'" % text)
            return 1, 1
        return first, last

    def _row_stats(self, text):
        """DUMP_PROBE_ROW_STATS: (on, stage regex or None). "on" (default) or "off", or a
        regex: per-row statistics only for the stages it matches."""
        text = text.strip()
        if text.lower() in _TRUE:
            return True, None
        if text.lower() in _FALSE:
            return False, None
        try:
            return True, re.compile(text)
        except re.error as exc:
            self._fail("DUMP_PROBE_ROW_STATS=%r is neither on/off nor a valid regex (%s)" % (text, exc))
            return False, None

    def _row_positions(self, text):
        """DUMP_PROBE_ROW_POSITIONS: the (first, last) token positions, inclusive, whose rows
        get per-row statistics (default 0-65535); rows outside are left out of the sidecar."""
        text = text.strip()
        if not text:
            return 0, ROW_POSITIONS_DEFAULT_LAST
        low, dash, high = text.partition("-")
        try:
            first, last = int(low), int(high)
        except ValueError:
            first, last = -1, -2
        if not dash or first < 0 or last < first:
            self._fail("DUMP_PROBE_ROW_POSITIONS=%r must be a range FIRST-LAST of token positions" % text)
            return 0, ROW_POSITIONS_DEFAULT_LAST
        return first, last

    def _ranks(self, text):
        text = text.strip().lower()
        if text == "all":
            return None
        try:
            ranks = {int(part) for part in text.split(",") if part.strip()}
        except ValueError:
            ranks = set()
        if not ranks or min(ranks) < 0:
            self._fail("DUMP_PROBE_RANKS=%r must be 'all' or a comma-separated list of ranks" % text)
        return ranks


class _Record:
    """One captured tensor: its layout as read at capture time (_layout_raw), its device-side
    statistics until finish().

    The JSON fields are built in finish() (``meta``), not in capture(): there they would run
    once per capture between the model's operators, with cold caches, at several times the
    cost of one loop over every record.
    """

    __slots__ = ("stage", "occurrence", "seq", "layout", "extra", "stats", "saved", "rows", "local")

    def __init__(self, stage, layout, extra, stats, saved, rows=None, local=None):
        self.stage = stage
        self.occurrence = self.seq = None  # set under _state.lock when the record is placed
        self.layout = layout  # _layout_raw's tuple
        # dict of the optional fields (shard, collective, rows_*, stats_path, local_checksum: None
        # until finish(), received: an int or a device tensor until finish()), or None
        self.extra = extra
        # 1-D device tensor in _DEVICE_STATS order; a (host block, offset) pair on the native path
        # (_NativeCall.block); or None
        self.stats = stats
        self.saved = saved  # device tensor (rows-bounded clone) to write in finish(), or None
        self.rows = rows  # _TokenRows of the record's token rows, or None
        # The statistics row (as ``stats``) whose checksum is local_checksum's, or None
        self.local = local

    def head(self):
        """The record's JSON fields up to is_contiguous, in the manifest's order (_RECORD_ORDER)."""
        head = {"seq": self.seq, "stage": self.stage, "occurrence": self.occurrence, "mode": "eager"}
        head.update(_layout_fields(self.layout))
        return head

    @property
    def meta(self):
        """The record's JSON fields but stats and tensor_file (for inspection before finish())."""
        meta = self.head()
        if self.extra:
            meta.update(self.extra)
        return meta


class _Slot:
    """A preallocated graph-mode buffer set for one stage (see graph_slot)."""

    __slots__ = ("stage", "stats", "tensor", "meta", "index", "scratch", "rows")

    def __init__(self, stage, stats, tensor, index, scratch=None, rows=None):
        self.stage = stage
        self.stats = stats
        self.tensor = tensor
        self.meta = None  # layout of the tensor seen by capture_graph, host-side
        self.index = index
        self.scratch = scratch  # the Triton kernel's partials, so a captured graph allocates nothing
        self.rows = rows  # a _SlotRows, or None: no token rows for this stage


class _State:
    def __init__(self, config):
        self.config = config
        self.labels = {}  # label -> (1-based match index, calls so far)
        self.window = None  # dict describing the open window
        self.parallel = {}  # axis -> (rank in group, group size) of the open window (arm's parallel=)
        self.records = []
        self.input_sets = []
        self.occurrences = {}  # stage -> captures so far in this window
        self.lock = threading.Lock()  # occurrences, records and input sets, across threads
        self.input_occurrences = {}
        # stage -> {occurrence -> [links]}: records that input sets' outputs= wait for (_expect_outputs)
        self.output_waits = {}
        self.slots = {}  # stage -> _Slot
        self.storages = {}  # (device, storage_ptr) -> (weakref to the storage, storage_id)
        self.next_storage_id = 1
        self.warned = set()
        self.arms = 0  # arm() calls seen, selected or not
        self.last_rank = None  # the rank arm() last saw
        self.written = []  # (manifest path, records) of each window written
        self.failed = []  # (label, window directory or None, exception) of each window finish() could not write
        self.report_at_exit = True  # _reset_for_tests turns it off: pytest's exit is not a run's
        self.forked = False  # this process is a fork() child of the one that imported the probe
        self.positions = {}  # request -> the next token position (counted over the label's calls)
        self.request_calls = {}  # request -> forwards seen holding it (DUMP_PROBE_REQUEST)
        self.count_into = None  # (request, first position) that the counting call's rows extend
        self.hooks = []  # the Hooks of hook() calls still installed
        self.hook_armed = None  # (label, label new then, owner) of the window a hook armed
        self.arming_by_hook = False  # arm() is called by a hook's _arm_for_hook


_config = _Config(os.environ)
_state = _State(_config)


def _warn(message, key=None):
    """Print one line to stderr, once per key; never raises."""
    key = key or message
    if key in _state.warned:
        return
    _state.warned.add(key)
    try:
        sys.stderr.write("dump_probe: warning: %s\n" % message)
    except Exception:
        pass


def _disarm(where, exc):
    global _active, _counting
    _active = _counting = False
    _state.window = None
    _warn("%s failed (%s: %s); the probe is disarmed" % (where, type(exc).__name__, exc), key="disarm")


def _config_warnings():
    """The configuration's messages, at import: an unknown DUMP_PROBE value, and when armed every
    invalid variable in one line."""
    for message in _config.warnings:
        _warn(message, key="config-switch")
    if _config.enabled and _config.error:
        _warn(_config.error + "; the probe stays disarmed", key="config")


_config_warnings()


def _usable():
    return _config.enabled and _config.error is None


def current_rank():
    """Rank of this process: torch.distributed's when initialised, else $RANK, else 0."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        _warn("RANK=%r is not an integer; using rank 0" % os.environ.get("RANK"), key="rank")
        return 0


def _world_size():
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return int(dist.get_world_size())
    except Exception:
        pass
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def armed():
    """True while a selected window is open: captures are being recorded."""
    return _active and not _counting


def arm(label, rows=None, first_position=None, **metadata):
    """Open a capture window for ``label`` when it is the selected one.

    ``label`` identifies one request (use the request id): selection counts
    distinct labels (DUMP_PROBE_MATCH), then calls with that label
    (DUMP_PROBE_OCCURRENCE: one call, a range ``2-5`` or ``all``, each a window
    of its own), so the chunks of one chunked prefill are calls 2, 3, ... of
    one label, not new requests.  DUMP_PROBE_REQUEST=ID selects instead the
    forwards whose row map holds request ID.  ``metadata`` should carry what
    identifies the input: token ids themselves, sampling parameters, weights
    path, world size, topology; it is stored in the manifest (tensors are
    read back in finish(), not here).  A window still open from an earlier
    arm() is finished first.  Returns True when this call opened a window.

    ``rows`` is the forward's row map: which request and token position each
    row of its token-row tensors holds, in the engine's row order after the
    batch is condensed, as ``(request_id, first_position, count)`` entries
    (rows ``first_position .. first_position + count - 1`` of that request),
    ``(request_id, [positions])`` where a request's rows are not consecutive,
    and ``None`` as request for padding rows (never compared). An optional
    last element gives the entry's token ids. A position is the token's
    0-based index in its request. Without ``rows`` the forward holds one
    request, the label, from ``first_position`` (or metadata
    ``positions=[start, end]``, a half-open range) or else counted on from the
    label's earlier calls, captured or not; its row count is then the first
    capture's (docs/manifest.md, "Token rows").

    Metadata keys with a meaning to dumpview (docs/manifest.md, "metadata keys
    with a meaning"): ``parallel`` (this rank's place in each parallel group),
    ``step=N`` (int: the engine step this forward belongs to, the same on every
    rank of the job; dumpview groups ranks by it where their labels differ, as
    with data-parallel attention where one rank runs "prefill" and another
    "decode" in one step), ``block_ids=[...]`` (ints: the KV/state pool blocks
    this forward's block table assigns, in allocation order) with
    ``block_numel=N`` (int: the elements of one block in the pool's storage,
    the pool's stride along its block dimension); dumpview compares where a
    record was written in its pool with these. A value of the wrong type prints
    one warning and is kept as given.
    """
    global _active, _counting
    if not _config.enabled:
        return False
    try:
        if _state.hook_armed is not None and not _state.arming_by_hook:
            _yield_to_code()
        if _active:
            finish()
        if _config.error is not None:
            return False
        label = str(label)
        match, calls = _state.labels.get(label, (len(_state.labels) + 1, 0))
        calls += 1
        _state.labels[label] = (match, calls)
        rank = current_rank()
        _state.arms += 1
        _state.last_rank = rank
        if _config.ranks is not None and rank not in _config.ranks:
            return False
        row_map = _row_map(label, rows, first_position, metadata)
        if not _selected(match, calls, row_map):
            if row_map is not None and row_map.count is None:
                _state.count_into = (row_map.entries[0][0], row_map.entries[0][1])
                _counting = _active = True
            return False
        _check_known_metadata(metadata)
        parallel = _parallel_layout(metadata.get("parallel"))
        if parallel:
            metadata = dict(metadata, parallel={axis: list(v) for axis, v in parallel.items()})
            _warn_unselected_group(parallel)
        elif "parallel" in metadata:
            metadata = {k: v for k, v in metadata.items() if k != "parallel"}
        _state.parallel = parallel
        if _state.window is not None and "writer" in _state.window:
            _state.window["writer"].abandon()  # re-armed before finish(): that window is dropped
        _state.window = {
            "label": label,
            "match": match,
            "occurrence": calls,
            "rank": rank,
            "world_size": _world_size(),
            "metadata": {key: _metadata_value(value) for key, value in metadata.items()},
            "armed_unix_s": time.time(),
            "row_map": row_map,
            "run": _run_info(),
            "warnings": [],
        }
        _state.records = []
        _state.input_sets = []
        _state.occurrences = {}
        _state.input_occurrences = {}
        _state.output_waits = {}
        # Ids stay stable for as long as a storage lives (graph slots keep theirs);
        # entries of freed storages are dropped here to bound the table.
        _state.storages = {k: v for k, v in _state.storages.items() if v[0]() is not None}
        for slot in _state.slots.values():
            # A device-side fill, not a read: slots still NaN at finish() were not
            # written by a replay in this window and are dropped, never reported stale.
            slot.stats.fill_(float("nan"))
        _active = True
        return True
    except Exception as exc:  # the probe never raises into the model
        _disarm("arm", exc)
        return False


# The command line of ``python -m dump_probe ...`` (or ``python path/dump_probe.py ...``) as
# typed after ``python`` (_main sets it): sys.argv then holds the script's own argv, which would
# not rerun the probe's hooks.
_command_argv = None


def _run_info():
    """The manifest's ``run``: how this process was started, enough to run it again with other
    DUMP_PROBE_* settings. ``argv`` is sys.argv (under ``python -m dump_probe``, the probe's own
    command: ``["-m", "dump_probe", "--hook", REGEX, "script.py", ...]``), ``cwd`` the working
    directory now (at arm()), ``executable`` sys.executable (None where Python does not know
    it), ``env`` every DUMP_PROBE_* variable of the environment the probe reads. Never raises:
    a field that cannot be read is left at what is known (an empty list, "", None, {})."""
    run = {"argv": [], "cwd": "", "executable": None, "env": {}}
    try:
        argv = _command_argv if _command_argv is not None else sys.argv
        run["argv"] = [str(a) for a in argv]
    except Exception:
        pass
    try:
        run["cwd"] = os.getcwd()
    except Exception:  # the working directory was removed
        pass
    try:
        run["executable"] = str(sys.executable) if sys.executable else None
    except Exception:
        pass
    try:
        env = _config.env
        run["env"] = {str(k): str(env[k]) for k in sorted(env)
                      if str(k) == "DUMP_PROBE" or str(k).startswith("DUMP_PROBE_")}
    except Exception:
        pass
    return run


# --------------------------------------------------------------------------- token rows
#
# A forward's row map says which (request, position) each row of its token-row tensors holds;
# a token-row record gets one row of ROW_STAT_NAMES per row, computed on the device beside its
# whole-tensor statistics and read back in finish(). docs/manifest.md, "Token rows", gives the
# format; dumpview aligns these rows across chunking and batching.


class _RowMap:
    """One forward's rows: ``entries`` of [request or None, first position, count or None,
    positions list or None, token ids or None], in row order; ``count`` the rows in all
    (None until the forward's first capture says it); ``inferred``: the first position was
    counted on from the label's earlier calls, not given."""

    __slots__ = ("entries", "count", "inferred", "position_cache", "keep", "declared", "matched")

    def __init__(self, entries, inferred):
        self.entries = entries
        self.inferred = inferred
        counts = [e[2] for e in entries]
        self.count = None if None in counts else sum(counts)
        self.position_cache = {}  # device -> [count] int64 position of each row (-1 for padding)
        self.declared = self.count is not None  # rows= gave every count: a capture must match it
        self.matched = False  # some capture of the forward had exactly its rows
        self.keep = None  # row indexes inside DUMP_PROBE_ROW_POSITIONS, None for all; set with count
        if self.count is not None:
            self._counted()

    def learn(self, count):
        """The forward's row count, from its first capture (a map without counts only)."""
        self.entries[0][2] = count
        self.count = count
        self._counted()

    def _counted(self):
        for request, first, count, positions, _ids in self.entries:
            if request is not None and count:
                last = max(positions) if positions else first + count - 1
                _state.positions[request] = max(_state.positions.get(request, 0), last + 1)
        low, high = _config.row_positions
        keep = [i for i, (_, p) in enumerate(self.rows()) if low <= p <= high]
        self.keep = None if len(keep) == self.count else keep

    def rows(self):
        """(entry index, position) of every row, in row order."""
        out = []
        for index, (_request, first, count, positions, _ids) in enumerate(self.entries):
            out.extend((index, p) for p in (positions if positions is not None else range(first, first + count)))
        return out

    def requests(self):
        return {e[0] for e in self.entries if e[0] is not None}

    def token_rows(self, stats, dims):
        """The _TokenRows of a capture of the forward's rows in order, ``stats`` one row per row
        of the map: only the rows inside DUMP_PROBE_ROW_POSITIONS kept, each listed then."""
        if self.keep is None:
            return _TokenRows(stats, list(dims), None)
        rows_of = self.rows()
        kept = stats[torch.tensor(self.keep, dtype=torch.int64).to(stats.device)]
        return _TokenRows(kept, list(dims), [list(rows_of[i]) for i in self.keep])

    def positions_on(self, device):
        """[count] int64 position of each row on ``device`` (-1 for padding rows), cached."""
        positions = self.position_cache.get(device)
        if positions is None:
            parts = []
            for request, first, count, listed, _ids in self.entries:
                if request is None:
                    parts.append(torch.full((count,), -1, dtype=torch.int64))
                elif listed is None:
                    parts.append(torch.arange(first, first + count, dtype=torch.int64))
                else:
                    parts.append(torch.tensor(listed, dtype=torch.int64))
            # Made on the host and copied once per forward and device: no device value is read.
            positions = self.position_cache[device] = torch.cat(parts).to(device)
        return positions

    def manifest(self, metadata):
        """The manifest's ``map``: one object per entry; a one-request forward's token ids come
        from metadata ``token_ids`` (the rows' own, or the request's from position 0)."""
        out = []
        ids = metadata.get("token_ids")
        for request, first, count, positions, entry_ids in self.entries:
            item = {"request": request, "first_position": first, "count": count}
            if positions is not None:
                item["positions"] = positions
            if entry_ids is None and len(self.entries) == 1 and isinstance(ids, list) \
                    and all(type(v) is int for v in ids):
                if len(ids) == count:
                    entry_ids = ids
                elif positions is None and len(ids) >= first + count:
                    entry_ids = ids[first:first + count]
            if entry_ids is not None:
                item["token_ids"] = [int(v) for v in entry_ids]
            out.append(item)
        return out


def _row_map(label, rows, first_position, metadata):
    """arm()'s row map (_RowMap), or None (and one warning) where ``rows`` is malformed."""
    try:
        if rows is not None:
            entries = []
            for item in rows:
                item = tuple(item)
                request = None if item[0] is None else str(item[0])
                if isinstance(item[1], (list, tuple, range)) or (isinstance(item[1], torch.Tensor) and item[1].dim() == 1):
                    positions = [int(p) for p in (item[1].tolist() if isinstance(item[1], torch.Tensor) else item[1])]
                    if any(p < 0 for p in positions):
                        raise ValueError("negative position in %r" % (item,))
                    ids = item[2] if len(item) > 2 else None
                    entries.append([request, min(positions) if positions else 0, len(positions), positions, ids])
                else:
                    first, count = int(item[1]), int(item[2])
                    if first < 0 or count < 0:
                        raise ValueError("negative position or count in %r" % (item,))
                    entries.append([request, first, count, None, item[3] if len(item) > 3 else None])
            for entry in entries:
                if isinstance(entry[4], torch.Tensor):
                    entry[4] = entry[4].tolist()  # arm() is a scheduling boundary: ids are host lists there
                if entry[4] is not None and len(entry[4]) != entry[2]:
                    raise ValueError("%d token ids for %d rows of request %r" % (len(entry[4]), entry[2], entry[0]))
            if not entries:
                raise ValueError("no entries")
            return _RowMap(entries, False)
        span = metadata.get("positions")
        if first_position is None and isinstance(span, (list, tuple)) and len(span) == 2 \
                and all(type(v) is int for v in span) and 0 <= span[0] <= span[1]:
            return _RowMap([[label, span[0], span[1] - span[0], None, None]], False)
        if first_position is not None:
            if int(first_position) < 0:
                raise ValueError("first_position=%d is negative" % int(first_position))
            return _RowMap([[label, int(first_position), None, None, None]], False)
        return _RowMap([[label, _state.positions.get(label, 0), None, None, None]], True)
    except Exception as exc:
        _warn("arm(%r, rows=..., first_position=...): rows is not a list of (request, first_position, count) "
              "or (request, [positions]) with positions >= 0 (%s: %s); that forward has no row map and no token rows"
              % (label, type(exc).__name__, exc), key="rowmap:%s:%s" % (label, exc))
        return None


def _selected(match, calls, row_map):
    """Whether this forward is captured: DUMP_PROBE_MATCH and DUMP_PROBE_OCCURRENCE over the
    label's calls, or DUMP_PROBE_REQUEST and DUMP_PROBE_OCCURRENCE over the forwards that hold
    that request."""
    first, last = _config.occurrences
    if _config.request is not None:
        if row_map is None or _config.request not in row_map.requests():
            return False
        calls = _state.request_calls.get(_config.request, 0) + 1
        _state.request_calls[_config.request] = calls
    elif match != _config.match:
        return False
    return first <= calls and (last is None or calls <= last)


def _count_rows(tensor, token_dims=(0,)):
    """The counting call's first capture: its rows (the product of its token dimensions'
    sizes) extend the label's positions."""
    global _active, _counting
    _active = _counting = False
    request, first = _state.count_into
    rows = 1
    if isinstance(tensor, torch.Tensor):
        two = tuple(token_dims) == (0, 1) if isinstance(token_dims, (tuple, list)) else False
        for d in range(min(tensor.dim(), 2 if two else 1)):
            rows *= int(tensor.shape[d])
    _state.positions[request] = max(_state.positions.get(request, 0), first + rows)


def _row_weights(positions, dtype):
    """u(index) of each entry of the int64 tensor ``positions`` (any shape), on its device:
    pos_checksum's row weights; 0 where the entry is negative (padding)."""
    index = torch.bitwise_and((positions + 1) * _ROW_MUL, _TWO_32 - 1)
    return torch.where(positions < 0, 0.0, index.to(dtype) / _TWO_32).to(dtype)


def _row_cols(tensor, n):
    """The column count of ``tensor``'s matrix view whose rows make up its token rows: its last
    dimension's size when that is not itself a token dimension, else 1 (a token row of a 1-D
    tensor, or of [batch, seq] with token dims (0, 1), is a single element)."""
    last = tensor.shape[-1] if tensor.dim() >= 2 else 1
    rest = tensor.numel() // n
    return last if last and rest % last == 0 and rest >= last else 1


class _TokenRows:
    """A record's token rows until finish(): ``stats`` the [rows, len(ROW_STAT_NAMES)] device
    tensor, ``token_dims`` the dimensions that hold tokens, ``positions`` None (the rows are
    the forward's, as its map says) or [[entry index, position], ...] of each row kept."""

    __slots__ = ("stats", "token_dims", "positions")

    def __init__(self, stats, token_dims, positions):
        self.stats = stats
        self.token_dims = token_dims
        self.positions = positions


# rows="auto" takes a capture's leading dimension (or two) as token rows only up to this many
# rows: a 1-D buffer of 50M elements taken as 50M rows cost 34 times its size in row statistics.
_AUTO_ROWS_MAX = 1 << 20


def _token_rows(stage, tensor, rows, token_dims, positions, row_map, split=None):
    """The _TokenRows of one capture, or None where it has no token rows (docs/manifest.md,
    "Token rows": which captures get them). ``split`` (a _Split of capture(shard=...)): a
    slice along a token dimension holds some of the forward's rows (their positions are
    listed), a slice inside the token row is weighted at the full row's coordinates, so the
    pieces' rows add up to the unsharded row."""
    declared = rows == "tokens"
    if rows == "requests" and positions is None:
        positions = _request_rows(stage, tensor, row_map)
        if positions is None:
            return None
        rows = "tokens"
    if rows not in ("auto", "tokens"):
        if rows is not None:
            _warn("capture(%r, rows=%r): rows is 'auto', 'tokens', 'requests' or None; recorded without token rows"
                  % (stage, rows), key="rows:%s" % stage)
        return None
    try:
        # A string ("01") is iterable too: only a tuple or list of ints names dimensions.
        dims = token_dims if token_dims == (0,) else (
            tuple(int(d) for d in token_dims) if isinstance(token_dims, (tuple, list)) else None)
    except (TypeError, ValueError):
        dims = None
    if dims not in ((0,), (0, 1)):
        _warn("capture(%r, token_dims=%r): token dims are (0,) or (0, 1); recorded without token rows"
              % (stage, token_dims), key="rows:%s" % stage)
        return None
    if tensor.dim() < len(dims) or tensor.is_complex() or tensor.numel() == 0:
        if declared:
            _warn("capture(%r, rows='tokens', token_dims=%r): token dims are (0,) or (0, 1) of a non-empty real "
                  "tensor; recorded without token rows" % (stage, token_dims), key="rows:%s" % stage)
        return None
    n = tensor.shape[0] * (tensor.shape[1] if len(dims) == 2 else 1)
    if not declared and n > _AUTO_ROWS_MAX:
        # rows="auto" on a tensor of millions of leading elements (a flat buffer, not a
        # forward's tokens): per-row statistics would hold tens of times its size.
        _warn("capture(%r): %d leading elements are too many for rows='auto' (at most %d); recorded without "
              "token rows (rows='tokens' declares them)" % (stage, n, _AUTO_ROWS_MAX), key="rowsmax:%s" % stage)
        return None
    # A slice along a token dimension (sequence or context parallel) holds some of the
    # forward's rows: it is measured against the full tensor's row count.
    sliced = split is not None and split.dim < len(dims) and positions is None
    whole = n // int(tensor.shape[split.dim]) * split.full if sliced else n
    if row_map.count is None:
        row_map.learn(whole)  # "the first dimension of the call's first capture" (token_dims' product)
    if positions is None and whole == row_map.count:
        row_map.matched = True
    if not _config.row_stats or (_config.row_regex is not None and not _config.row_regex.search(stage)):
        return None  # the row map stands: forwards still pair by the rows they hold
    if sliced:
        return _sliced_token_rows(stage, tensor, n, dims, split, row_map, whole)
    if positions is not None:
        return _declared_rows(stage, tensor, n, dims, positions, row_map)
    if n != row_map.count:
        if declared:
            _warn("capture(%r, rows='tokens'): %d rows but the forward holds %d; recorded without token rows"
                  % (stage, n, row_map.count), key="rows:%s" % stage)
        return None
    return row_map.token_rows(_row_statistics(tensor, n, row_map.positions_on(tensor.device), split), dims)


def _request_rows(stage, tensor, row_map):
    """capture(rows="requests"): [(request, its last position in this forward)] of each
    request entry of the row map, in order; None (with a warning) where the tensor's first
    dimension is not that many rows or the map's counts are not known yet."""
    entries = [e for e in row_map.entries if e[0] is not None]
    if row_map.count is None:
        _warn("capture(%r, rows='requests') before the forward's row count is known (arm(rows=...) gives it, or "
              "an earlier capture of the forward's tokens); recorded without token rows" % stage,
              key="rowreq:%s" % stage)
        return None
    last = []
    for request, first, count, listed, _ids in entries:
        if listed:
            last.append((request, max(listed)))
        elif count:
            last.append((request, first + count - 1))
    if tensor.dim() == 0 or int(tensor.shape[0]) != len(last):
        _warn("capture(%r, rows='requests'): %s rows, but the forward's row map holds %d requests; recorded without "
              "token rows" % (stage, "no" if tensor.dim() == 0 else int(tensor.shape[0]), len(last)),
              key="rowreq:%s" % stage)
        return None
    return last


def _sliced_token_rows(stage, tensor, n, dims, split, row_map, full):
    """Token rows of a slice along a token dimension (sequence or context parallel) of a
    tensor whose whole holds ``full`` rows: local row i is the forward's row at its
    full-tensor index, and is listed with that row's position."""
    if full != row_map.count:
        _warn("capture(%r): a slice of %d of the forward's rows, but the forward holds %d; recorded without token "
              "rows" % (stage, full, row_map.count), key="rows:%s" % stage)
        return None
    along = _global_index(split, int(tensor.shape[split.dim]), torch.device("cpu"))
    if len(dims) == 1:
        index = along
    elif split.dim == 0:
        index = (along[:, None] * int(tensor.shape[1]) + torch.arange(int(tensor.shape[1]))).reshape(-1)
    else:
        index = (torch.arange(int(tensor.shape[0]))[:, None] * split.full + along[None, :]).reshape(-1)
    every = row_map.rows()
    pairs = [list(every[i]) for i in index.tolist()]  # host ints, from the annotation: no device read
    low, high = _config.row_positions
    keep = [i for i, (_, p) in enumerate(pairs) if low <= p <= high]
    if not keep:
        return None
    stats = _row_statistics(tensor, n, row_map.positions_on(torch.device("cpu"))[index].to(tensor.device))
    if len(keep) != n:
        stats = stats[torch.tensor(keep, dtype=torch.int64).to(stats.device)]
        pairs = [pairs[i] for i in keep]
    return _TokenRows(stats, list(dims), pairs)


def _declared_rows(stage, tensor, n, dims, positions, row_map):
    """Token rows at positions the capture declares (a KV-cache read holds key positions):
    ints of the forward's only request, or (request, position) pairs."""
    if isinstance(positions, torch.Tensor):
        positions = positions.tolist() if positions.device.type == "cpu" else None
        if positions is None:
            _warn("capture(%r, positions=...) on a device: pass host positions (a range or list), the probe never "
                  "reads a device value while the model runs; recorded without token rows" % stage,
                  key="rowpos:%s" % stage)
            return None
    pairs = []
    names = {e[0]: i for i, e in enumerate(row_map.entries) if e[0] is not None}
    for p in positions:
        if isinstance(p, (tuple, list)):
            index = names.get(str(p[0]))
            pairs.append([index, int(p[1])])
        else:
            pairs.append([next(iter(names.values())) if len(names) == 1 else None, int(p)])
    if any(p < 0 for _, p in pairs):
        _warn("capture(%r, positions=...): a negative position (positions are 0-based indexes in their request); "
              "recorded without token rows" % stage, key="rowpos:%s" % stage)
        return None
    if len(pairs) != n:
        _warn("capture(%r, positions=...): %d positions for %d rows; recorded without token rows"
              % (stage, len(pairs), n), key="rowpos:%s" % stage)
        return None
    unknown = [p for p, (i, _) in zip(positions, pairs) if i is None]
    if unknown:
        why = ("plain positions need a forward of one request (this one's row map holds %d)" % len(names)
               if not isinstance(unknown[0], (tuple, list)) else
               "request %r is not in the forward's row map" % (str(unknown[0][0]),))
        _warn("capture(%r, positions=...): %s; recorded without token rows" % (stage, why), key="rowpos:%s" % stage)
        return None
    low, high = _config.row_positions
    keep = [i for i, (_, p) in enumerate(pairs) if low <= p <= high]
    if not keep:
        return None
    stats = _row_statistics(tensor, n, torch.tensor([p for _, p in pairs], dtype=torch.int64).to(tensor.device))
    if len(keep) != n:
        stats = stats[torch.tensor(keep, dtype=torch.int64).to(stats.device)]
        pairs = [pairs[i] for i in keep]
    return _TokenRows(stats, list(dims), pairs)


def _row_dtype(tensor):
    return torch.float64 if tensor.dtype == torch.float64 else torch.float32


def _row_statistics(tensor, n, positions, split=None):
    """_row_statistics_torch's rows, by the native library's dp_row_stats where the tensor is
    one it reads (a strided cpu tensor of a dtype it knows, the native statistics path in use,
    not a slice inside the token row): one vectorized pass per row instead of a dozen torch ops."""
    if tensor.device.type == "cpu" and _config.kernel != "torch" and split is None:
        native = _native_rows()
        if native is not None and tensor.dtype in _NATIVE_DTYPES and tensor.layout == torch.strided \
                and not tensor.is_neg() and not tensor.is_conj() and tensor.dim() <= 16 \
                and type(tensor).__torch_dispatch__ is torch.Tensor.__torch_dispatch__:
            try:
                return _native_row_statistics(native, tensor, n, positions)
            except Exception as exc:  # that tensor only: the torch ops below
                _warn("dp_row_stats failed (%s: %s); token rows take the torch ops"
                      % (type(exc).__name__, str(exc).splitlines()[0][:120]), key="native-rows")
    return _row_statistics_torch(tensor, n, positions, split)


def _native_rows():
    """dp_row_stats of the native library, or None (no library, or one from before token rows)."""
    cached = _KERNELS.get("native_rows")
    if cached is None:
        call, _ = _native()
        cached = (None,)
        if call is not None:
            try:
                fn = call._lib_handle.dp_row_stats
                fn.argtypes = [ctypes.POINTER(_DpTensor), ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
                fn.restype = ctypes.c_int
                cached = (fn,)
            except Exception:
                pass
        _KERNELS["native_rows"] = cached
    return cached[0]


def _native_row_statistics(call, tensor, n, positions):
    """[n, 5] float32 row statistics of a cpu tensor by dp_row_stats, read in place."""
    held = _NATIVE_CALL
    t = held.tensor
    shape, stride = tensor.shape, tensor.stride()
    ndim = len(shape)
    t.data = tensor.data_ptr()
    t.dtype = _NATIVE_DTYPES[tensor.dtype]
    t.ndim = ndim
    held.shape[:ndim] = shape
    held.strides[:ndim] = stride
    if not positions.is_contiguous():
        positions = positions.contiguous()
    out = torch.empty((n, len(ROW_STAT_NAMES)), dtype=torch.float32)
    status = call(held.ref, n, positions.data_ptr(), out.data_ptr())
    if status != 0:
        raise RuntimeError("dp_row_stats returned status %d" % status)
    return out


def _row_statistics_torch(tensor, n, positions, split=None):
    """[n, len(ROW_STAT_NAMES)] per-row statistics of ``tensor`` whose n token rows each hold k
    rows of its matrix view [n * k, cols] (cols: _row_cols), on its device.

    Per token row r at position p (F: its finite elements; j, c: an element's matrix row
    within the token row and its column):
      nonfinite_count  elements that are NaN or +-inf
      max_abs          max over F of |x|            (0 for a row without finite elements)
      sum              sum over F of x
      sum_squares      sum over F of x**2
      row_checksum     sum over F of x[j, c] * u(p * k + j) * v(c): pos_checksum's terms with
                       the token's absolute position in place of its index, so the row
                       checksums of a forward whose rows start at position 0 add up to the
                       record's pos_checksum, and the rows of chunks to the whole prompt's
                       (0 for padding rows, p = -1).
    Reduced in float32 (float64 for float64 tensors); stored as float32. A ``split`` inside
    the token row (a tp:D shard of a dimension after the token dims) puts j, c and k at the
    full row's coordinates (_row_coordinates).
    """
    dtype = _row_dtype(tensor)
    cols = _row_cols(tensor, n)
    k = tensor.numel() // (n * cols)
    col_weights, row_in_token, k_full = _row_coordinates(tensor, n, k, cols, split, dtype, tensor.device)
    parts = _row_parts(tensor, n, k, cols, col_weights, dtype)
    return _rows_from_parts(parts, positions, row_in_token, k_full)


def _row_parts(tensor, n, k, cols, col_weights, dtype):
    """[n, 4 + k] partial row statistics of ``tensor`` viewed as [n, k, cols]: nonfinite_count,
    max_abs, sum, sum_squares, then each matrix row's column-weighted sum (sum over finite c of
    x[j, c] * v(c)), which _rows_from_parts weights by position. Device work only, no read
    back and no allocation that depends on a value: a graph slot records it inside a graph and
    the positions come at finish()."""
    x = tensor.reshape(n, k, cols)
    if x.is_floating_point():
        nonfinite = torch.isfinite(x).logical_not_().sum((1, 2), dtype=dtype)
        values = torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0).to(dtype)
    else:
        values = x.to(dtype)
        nonfinite = torch.zeros(n, dtype=dtype, device=x.device)
    max_abs = values.abs().amax((1, 2))
    total = values.sum((1, 2))
    squares = (values * values).sum((1, 2))
    inner = values @ col_weights  # [n, k]
    return torch.cat([torch.stack([nonfinite, max_abs, total, squares], 1), inner], 1)


def _rows_from_parts(parts, positions, row_in_token, k_full):
    """[n, len(ROW_STAT_NAMES)] row statistics from _row_parts' partials and each row's
    position (negative: padding, checksum 0): row_checksum = sum over j of inner[j] *
    u(position * k_full + j)."""
    inner = parts[:, 4:]
    index = positions.to(torch.int64)[:, None] * k_full + row_in_token
    index = torch.where(positions[:, None] < 0, -1, index)
    checksum = (inner * _row_weights(index, parts.dtype)).sum(1)
    return torch.cat([parts[:, :4], checksum[:, None]], 1)


def _row_coordinates(tensor, n, k, cols, split, dtype, device):
    """(column weights v(c) [cols], each local matrix row's index j within its token row [k],
    the full token row's matrix row count) of a token-row tensor viewed as [n, k, cols]. A
    split inside the token row moves c (a slice of the last dimension) or j (a slice of a
    dimension between the token dims and the last: j's multi-index with the full size there)."""
    plain = _position_weights(cols, _COL_MUL, dtype, device), torch.arange(k, device=device), k
    if split is None:
        return plain
    shape = [int(d) for d in tensor.shape]
    last = len(shape) - 1
    tokens, size = 0, 1  # the token dims: the leading dims whose sizes multiply to n
    while tokens < len(shape) and size < n:
        size *= shape[tokens]
        tokens += 1
    if size != n or split.dim < tokens:
        return plain
    if split.dim == last and cols == shape[-1]:
        return _weights_at(_global_index(split, cols, device), _COL_MUL, dtype), torch.arange(k, device=device), k
    if split.dim == last or cols != shape[-1]:
        return plain
    outer = 1
    for d in range(tokens, split.dim):
        outer *= shape[d]
    inner = k // (outer * shape[split.dim])
    along = _global_index(split, shape[split.dim], device)
    j = (torch.arange(outer, device=device).view(-1, 1, 1) * (split.full * inner) + along.view(1, -1, 1) * inner
         + torch.arange(inner, device=device).view(1, 1, -1)).reshape(-1)
    return plain[0], j, outer * split.full * inner


# Axes of arm(parallel=...): tensor, context, data, pipeline and expert parallel.
PARALLEL_AXES = ("tp", "cp", "dp", "pp", "ep")
# Collectives a capture(collective=...) may name.
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce")


def _parallel_layout(value):
    """{axis: (rank_in_group, group_size)} from arm(parallel=...); each invalid entry is left out.

    ``value`` maps an axis of PARALLEL_AXES to a pair of ints, 0 <= rank_in_group < group_size
    (tensors and lists of two ints are accepted).  None gives {}.  Each axis is checked on its
    own: a valid one is kept whatever its neighbours hold, an invalid one gets its own warning
    (naming the axis, the value and why) and is dropped.  A value that is not a non-empty dict
    warns once and gives {}.
    """
    if value is None:
        return {}
    if not isinstance(value, dict) or not value:
        _warn("arm(parallel=%r) is not a parallel layout (a dict such as {'tp': (rank_in_group, group_size)}); "
              "recorded without one" % (value,), key="parallel")
        return {}
    layout = {}
    for axis, pair in value.items():
        entry, problem = _parallel_entry(axis, pair)
        if entry is not None:
            layout[axis] = entry
        else:
            _warn("arm(parallel=...): %r: %r left out (%s)" % (axis, pair, problem),
                  key="parallel:%r:%r:%s" % (axis, pair, problem))
    return layout


def _parallel_entry(axis, pair):
    """((rank_in_group, group_size), None) for a valid entry of arm(parallel=...), else (None, why not)."""
    try:
        if axis not in PARALLEL_AXES:
            return None, "axis %r is not one of %s" % (axis, ", ".join(PARALLEL_AXES))
        if isinstance(pair, torch.Tensor):
            pair = pair.tolist()
        if isinstance(pair, (str, bytes, dict)) or len(pair) != 2 \
                or any(isinstance(v, (bool, float)) for v in pair):
            return None, "not a (rank_in_group, group_size) pair of ints"
        try:
            rank, size = (operator.index(v) for v in pair)
        except TypeError:
            return None, "not a (rank_in_group, group_size) pair of ints"
        if size < 1:
            return None, "group size %d is < 1" % size
        if not 0 <= rank < size:
            return None, "rank_in_group %d is out of range 0..%d; needs 0 <= rank_in_group < group_size" % (rank, size - 1)
        return (rank, size), None
    except Exception:  # an object with no len() or iteration: the probe never raises into the model
        return None, "not a (rank_in_group, group_size) pair of ints"


def _warn_unselected_group(parallel):
    """One warning when DUMP_PROBE_RANKS cannot select every rank of a group of ``parallel``."""
    if _config.ranks is None:
        return
    for axis, (_, size) in sorted(parallel.items()):
        if size > 1 and len(_config.ranks) < size:
            _warn("arm(parallel=...) gives a %s group of %d ranks but DUMP_PROBE_RANKS=%s selects %d rank%s: "
                  "stages sharded over %s will be missing evidence on the ranks left out; set "
                  "DUMP_PROBE_RANKS=all (or list every rank of the group)"
                  % (axis, size, ",".join(str(r) for r in sorted(_config.ranks)), len(_config.ranks),
                     "" if len(_config.ranks) == 1 else "s", axis), key="parallel-ranks")
            return


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_int_tensor(value, ndim):
    return (isinstance(value, torch.Tensor) and value.dim() == ndim and value.dtype != torch.bool
            and not value.is_floating_point() and not value.is_complex())


def _check_known_metadata(metadata):
    """One warning each where arm()'s ``step``, ``block_ids`` or ``block_numel`` is not of its
    documented type (the values are kept as given: only a reader's use of them is lost)."""
    problems = []
    if "step" in metadata and not (_is_int(metadata["step"]) or _is_int_tensor(metadata["step"], 0)):
        problems.append(("step", "an int"))
    if "block_ids" in metadata:
        ids = metadata["block_ids"]
        if not (isinstance(ids, (list, tuple)) and all(_is_int(i) for i in ids) or _is_int_tensor(ids, 1)):
            problems.append(("block_ids", "a list of ints"))
    if "block_numel" in metadata and not (_is_int(metadata["block_numel"]) and metadata["block_numel"] >= 1):
        problems.append(("block_numel", "an int >= 1"))
    for key, want in problems:
        _warn("arm(%s=...): not %s (%s); kept as given, but dumpview cannot use it"
              % (key, want, type(metadata[key]).__name__), key="metadata:%s" % key)


def _metadata_value(value):
    """Keep metadata JSON-ready; tensors stay on device (cloned) until finish()."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return [_metadata_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _metadata_value(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return _json_float(value)
    if isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    return repr(value)


def capture(stage, tensor, shard=None, collective=None, rows="auto", token_dims=(0,), positions=None,
            received=None):
    """Record statistics and layout of ``tensor`` as the next occurrence of ``stage``.

    Costs one boolean check when no window is open.  Only device-side work
    happens here; nothing is read back until finish().  A tensor whose stage
    matches DUMP_PROBE_TENSOR is also kept (first DUMP_PROBE_ROWS rows).

    ``shard`` says how this rank's tensor relates to the full one, over an axis
    given to arm(parallel=...): ``"tp:D"`` (an equal slice along dimension D, in
    group-rank order), ``"tp:D@OFFSET/FULL"`` (an uneven slice: OFFSET elements
    into a full size FULL), ``"cp:D"`` / ``"cp:D@OFFSET/FULL"`` / ``"cp:D:zigzag"``
    (context-parallel chunks; zigzag: chunks r and 2n-1-r of 2n), ``"replicated:tp"``
    (the same values on every rank) or ``"partial:tp"`` (a partial sum still to be
    reduced).  The position checksum of a sliced tensor uses each element's
    coordinates in the full tensor, so the shards' checksums add up to the full
    tensor's; such a record also gets ``local_checksum``, the position checksum
    at the local tensor's own coordinates (exactly the ``pos_checksum`` a capture
    of the same tensor without ``shard`` records, through the same statistics
    path), which is equal on ranks holding equal pieces (a loader that read
    shard 0 on every rank).  ``collective`` names the collective whose output
    this is (``"all_reduce"``, ``"all_gather"``, ...).  An invalid annotation
    prints one warning and the record is kept without it.

    ``received`` (expert-parallel stages): how many tokens this rank's stage
    received in this call, a Python int >= 0 or a 0-d / 1-element integer
    tensor (kept on its device, read in finish()); written as the record's
    ``received``, so that a rank whose output is all zeros although it received
    tokens can be named.  An invalid value (negative, a float, a bool, a
    multi-element or non-integer tensor) prints one warning naming the stage and
    the record is kept without it.

    ``rows`` says whether the tensor holds the forward's tokens: ``"tokens"``
    (declared: dimensions ``token_dims``, ``(0,)`` or ``(0, 1)`` for
    ``[batch, seq, hidden]``, hold the forward's rows in its row map's order),
    ``None`` (no token rows: attention scores, weights, scalars, cache state)
    or ``"auto"`` (the default: token rows when the product of the
    ``token_dims`` sizes equals the forward's row count). ``"requests"``: one row
    per request of the row map, in its order (padding entries aside), for
    per-request state (a recurrent state, a request's last hidden row): each
    row is keyed by its request's last position in this forward, so a chunked
    run's state after its last chunk pairs with an unchunked run's.
    ``positions`` (host ints of a one-request forward, or ``(request,
    position)`` pairs) gives the position of each row where the rows are not
    the forward's tokens in order, e.g. a KV-cache read of key positions
    ``range(end)``. Each token row gets per-row statistics (ROW_STAT_NAMES),
    written to the window's rows.f32.
    """
    if not _active:
        return
    if _counting:
        if rows is not None:
            _count_rows(tensor, token_dims)
        return
    global _probe_busy
    _probe_busy = True  # the statistics' operators below are not the model's (ops())
    try:
        if not isinstance(tensor, torch.Tensor):
            _warn("capture(%r) got %s, not a tensor; skipped" % (stage, type(tensor).__name__))
            return
        if type(stage) is not str:
            stage = str(stage)
        if tensor.is_nested or type(tensor).__torch_dispatch__ is not torch.Tensor.__torch_dispatch__:
            _skip_unsupported(stage, "capture", _state.occurrences, tensor)
            return
        if tensor.requires_grad:  # (detach costs a microsecond: only where autograd would record)
            tensor = tensor.detach()
        layout = _layout_raw(tensor)
        extra = {}
        split = None
        if shard is not None:
            annotation = _shard_annotation(stage, shard, tensor)
            if annotation is not None:
                extra["shard"], split = annotation
        if collective is not None:
            if collective in COLLECTIVES:
                extra["collective"] = collective
            else:
                _warn("capture(%r, collective=%r): not one of %s; recorded without it"
                      % (stage, collective, ", ".join(COLLECTIVES)), key="collective:%s" % stage)
        if received is not None:
            count = _received_value(stage, received)
            if count is not None:
                extra["received"] = count
        saved = None
        if _config.tensor_regex is not None and _config.tensor_regex.search(stage):
            saved = _bounded_rows(tensor).clone()
            extra["rows_kept"] = int(saved.shape[0]) if saved.dim() > 0 else 1
            extra["rows_total"] = int(tensor.shape[0]) if tensor.dim() > 0 else 1
        stats, path = _record_statistics(tensor, layout, split)
        if stats is not None and layout[0].type != "meta":
            extra["stats_path"] = path
        local = None
        if split is not None:
            if stats is not None:
                local = _local_statistics(stage, tensor, layout, path)
            if stats is None or local is not None:
                extra["local_checksum"] = None  # null, or the local row's checksum in finish()
        token_rows = None
        row_map = _state.window["row_map"]
        if row_map is not None and rows is not None and layout[0].type != "meta":
            try:
                token_rows = _token_rows(stage, tensor, rows, token_dims, positions, row_map, split)
            except Exception as exc:  # that record only: its whole-tensor statistics stand
                _warn("no token rows for %s (%s: %s)" % (stage, type(exc).__name__, str(exc).splitlines()[0][:120]),
                      key="rowfail:%s" % stage)
        record = _Record(stage, layout, extra, stats, saved, token_rows, local)
        # The occurrence, the seq and the record's place are taken together, after the
        # statistics: threads capturing at once get distinct seqs in record order.
        links = None
        with _state.lock:
            occurrence = _state.occurrences.get(stage, 0) + 1
            _state.occurrences[stage] = occurrence
            record.occurrence = occurrence
            record.seq = len(_state.records)
            _state.records.append(record)
            if stats is None and tensor.layout != torch.strided:
                # A sparse (or other non-strided) tensor keeps its record with null statistics:
                # said in the manifest, so the reader knows why (issue 31, item 19).
                _state.window["warnings"].append(
                    "capture(%r) occurrence %d: a %s tensor has no statistics the probe can take; "
                    "recorded with null stats" % (stage, occurrence, str(tensor.layout).replace("torch.", "")))
            if _state.output_waits:  # an input set named this stage in outputs= (one dict test otherwise)
                waits = _state.output_waits.get(stage)
                if waits:
                    links = waits.pop(occurrence, None)
        if links:
            _keep_output(tensor, layout, links)
    except Exception as exc:
        _disarm("capture(%r)" % (stage,), exc)
    finally:
        _probe_busy = False


def _record_statistics(tensor, layout, split=None):
    """(statistics row, path) of ``tensor`` as a record keeps them until finish() (see
    _statistics_by_path with ``host_block``), or (None, None) with one warning per dtype where
    torch cannot reduce it (float8, sparse): that record (or input) alone carries null stats.
    capture() and capture_inputs() both take their statistics from here, so an input's stats
    equal those of a capture() of the same tensor."""
    try:
        return _statistics_by_path(tensor, split=split, host_block=True, layout=layout)
    except Exception as exc:
        _warn("no statistics for %s tensors (%s: %s); their records carry null stats"
              % (tensor.dtype, type(exc).__name__, str(exc).splitlines()[0][:120]), key="stats:%s" % tensor.dtype)
        return None, None


def _local_statistics(stage, tensor, layout, path):
    """The statistics row of ``tensor`` without its shard (kept until finish(), as the record's
    own: a device vector or a native host block's pair), whose checksum element is the record's
    ``local_checksum``: the same call a capture without ``shard`` makes, so the value is that
    capture's pos_checksum bit for bit. None, with one warning, where it fails or would come
    from another path than the record's ``path`` (a fused path that failed just now)."""
    try:
        row, local_path = _statistics_by_path(tensor, host_block=True, layout=layout)
        if row is not None and local_path != path:
            raise RuntimeError("computed by %s, the record's statistics by %s" % (local_path, path))
    except Exception as exc:
        _warn("capture(%r): no local_checksum (%s: %s); recorded without it"
              % (stage, type(exc).__name__, str(exc).splitlines()[0][:120]), key="local:%s" % stage)
        return None
    return row


def _received_value(stage, value):
    """capture(received=...) as kept until finish(): a Python int >= 0, or a 0-d int64 clone of
    a one-element integer tensor (device-side: no read here); None with one warning naming the
    stage where it is neither (a negative tensor value is found in finish())."""
    why = None
    if isinstance(value, bool):
        why = "a bool"
    elif isinstance(value, int):
        if 0 <= value < 2**63:
            return value
        why = "negative" if value < 0 else "beyond a 64-bit count"
    elif isinstance(value, torch.Tensor):
        if value.numel() != 1:
            why = "a tensor of %d elements, not one" % value.numel()
        elif value.dtype == torch.bool or value.is_floating_point() or value.is_complex():
            why = "a %s tensor, not an integer one" % _dtype_name(value.dtype)
        else:
            return value.detach().reshape(()).to(torch.int64, copy=True)
    else:
        why = "a %s" % type(value).__name__
    _warn("capture(%r, received=%s): not a token count (%s; an int >= 0 or a one-element integer tensor); "
          "recorded without it" % (stage, "<tensor>" if isinstance(value, torch.Tensor) else repr(value), why),
          key="received:%s" % stage)
    return None


def _received_to_host(records):
    """{record index: int} of the records whose ``received`` is a device tensor, read in one
    transfer per device; a negative or unreadable count is left out (the record loses the
    field) with one warning naming the stage."""
    by_device = {}
    for index, record in enumerate(records):
        if record.extra and isinstance(record.extra.get("received"), torch.Tensor):
            by_device.setdefault(record.extra["received"].device, []).append(index)
    counts = {}
    for device, indices in by_device.items():
        try:
            if device.type == "meta":
                raise ValueError("a meta tensor has no value")
            values = torch.stack([records[i].extra["received"] for i in indices]).cpu().tolist()
        except Exception as exc:
            for i in indices:
                _warn("capture(%r, received=...): not read (%s: %s); recorded without it"
                      % (records[i].stage, type(exc).__name__, str(exc).splitlines()[0][:120]),
                      key="received:%s" % records[i].stage)
            continue
        for i, value in zip(indices, values):
            if value >= 0:
                counts[i] = int(value)
            else:
                _warn("capture(%r, received=%d): negative; recorded without it" % (records[i].stage, value),
                      key="received:%s" % records[i].stage)
    return counts


def _keep_output(tensor, layout, links):
    """Keeps the whole of ``tensor`` (a device-side contiguous clone, every row) for the input
    sets whose ``links`` name its record, to be saved beside each set; a host tensor whose set
    is already on the writer thread is handed to it at once. A meta tensor keeps nothing."""
    whole = None if layout[0].type == "meta" else tensor.clone(memory_format=torch.contiguous_format)
    window = _state.window
    for link in links:
        link["captured"] = True
        link["whole"] = whole
        entry = link["entry"]
        if whole is not None and whole.device.type == "cpu" and entry.get("submitted") and "writer" in window:
            link["submitted"] = True
            window["writer"].submit_output(entry, link, whole)


def _output_names(outputs):
    """capture_inputs(outputs=...) as a list of stage names: a str is one name, None none."""
    if outputs is None:
        return []
    if isinstance(outputs, str):
        return [outputs]
    return [str(name) for name in outputs]


def _expect_outputs(entry, names):
    """Links input set ``entry`` to the next occurrence of each stage in ``names``: the records
    capture() makes next for them. Call under _state.lock (occurrences are read there)."""
    links = entry.setdefault("links", [])
    for name in names:
        occurrence = _state.occurrences.get(name, 0) + 1
        link = {"stage": name, "occurrence": occurrence, "entry": entry, "captured": False, "whole": None}
        links.append(link)
        _state.output_waits.setdefault(name, {}).setdefault(occurrence, []).append(link)


def capture_inputs(stage, _op=None, outputs=None, **named):
    """Save the complete input set of one operator call for replay.

    Every value is kept: tensors (exact dtype, shape, stride, storage_offset
    and device; the bytes of the storage span the view reads), ints, floats,
    bools, None, strings, dtypes and (nested) lists/tuples/dicts of these.
    Call it before any branch that picks an implementation, so the set is
    captured whichever branch runs.  Saved as ``inputs/<stage>#<N>.pt``
    in the window's directory (claimed by the first input set): a set whose
    tensors are all on the host is written at once on the probe's writer
    thread while the model runs on; one holding device tensors is read and
    written in finish(), so capture_inputs() never synchronizes.  The
    manifest, written last, names only files already written and fsynced.

    With DUMP_PROBE_SYNC_INPUTS=1 the set is written (and fsynced) before
    capture_inputs() returns, on the calling thread, device tensors read at
    once (a synchronization): for hunting an operator that kills the process,
    which would otherwise take a set still on its way to the disk with it.

    ``_op`` (reserved, optional) names the operator that is called, e.g.
    ``"torch.ops.npu.npu_rms_norm"``; it is recorded as the input set's ``op``
    in the manifest (a string; anything else is stored as ``str(_op)``, or
    its ``__module__.__qualname__`` for a callable) and is not an argument.

    Each tensor argument's description in the manifest carries ``stats``: the
    statistics object a capture() record of that tensor gets, computed the
    same way (on its device, read back in finish(); null for empty and
    complex tensors), so two runs' operator inputs compare from the manifests.

    ``outputs`` (reserved, optional): a stage name or a sequence of them, the
    records this call's operator produces, e.g. ``outputs=("layers.0.q_rope",
    "layers.0.k_rope")``. Each links the set to the next occurrence of that
    stage captured in this window after this call (capture() of it must
    follow); the manifest's entry gets ``outputs``, ``[{"key":
    "layers.0.q_rope#1", "file": "inputs/<stage>#<N>.outputs/layers.0.q_rope#1.pt"}, ...]``
    in the order named, and each linked output's whole tensor (every row,
    whatever DUMP_PROBE_ROWS says; a plain torch.save of one contiguous
    tensor) is saved beside the set, as durably as the set itself. A name
    with no such capture in the window is left out of ``outputs`` and said
    in the manifest's ``warnings``.
    """
    if not _active or _counting:
        return
    _input_set(stage, _op, outputs, named)


class _Unsupported(Exception):
    """A tensor the probe cannot describe or save (_unsupported) inside capture_inputs()' values."""

    def __init__(self, tensor):
        Exception.__init__(self, _unsupported(tensor))
        self.tensor = tensor


def _unsupported(tensor):
    """What makes ``tensor`` one the probe skips (a nested tensor, a sparse one where its
    storage is to be saved, a __torch_dispatch__ subclass such as TwoTensor, whose values are
    not its storage's and whose host read in finish() fails), or None."""
    if tensor.is_nested:
        return "a nested tensor"
    if type(tensor).__torch_dispatch__ is not torch.Tensor.__torch_dispatch__:
        return "a __torch_dispatch__ subclass (%s)" % type(tensor).__name__
    if tensor.layout != torch.strided:
        return "a %s tensor" % str(tensor.layout).replace("torch.", "")
    return None


def _skip_unsupported(stage, call, occurrences, tensor, where=None):
    """Skip one capture of an unsupported tensor: its occurrence is counted (later ones keep
    their numbers), a warning goes to stderr (once per call and stage) and, each time, to the
    window's ``warnings``; the rest of the window is written."""
    reason = _unsupported(tensor) or type(tensor).__name__
    with _state.lock:
        occurrence = occurrences.get(stage, 0) + 1
        occurrences[stage] = occurrence
        message = "%s(%r) occurrence %d skipped: %s is %s, which the probe cannot capture (no statistics, " \
                  "no file); the rest of the window is written" % (call, stage, occurrence, where or "the tensor", reason)
        window = _state.window
        if window is not None:
            window["warnings"].append(message)
    _warn(message, key="unsupported:%s:%s" % (call, stage))


def _input_set(stage, op, outputs, named):
    """capture_inputs(); returns the input set's entry, or None where nothing was captured.
    Never raises (a failure disarms the probe)."""
    global _probe_busy
    busy, _probe_busy = _probe_busy, True  # the statistics' and clones' operators are not the model's (ops())
    try:
        stage = str(stage)
        op = _op_name(op)
        names = _output_names(outputs)
        described = {}
        payload = {}
        stats = []
        try:
            for name, value in named.items():
                described[name], payload[name] = _input_value(value, stats)
        except _Unsupported as exc:
            _skip_unsupported(stage, "capture_inputs", _state.input_occurrences, exc.tensor,
                              "argument %r" % name)
            return None
        sync = _config.sync_inputs
        if sync and not _host_only(payload):
            payload = _payload_to_cpu(payload)  # asked for: the set is on disk before the operator runs
        entry = {"stage": stage, "args": described, "payload": payload, "stats": stats, "window": _state.window}
        if op is not None:
            entry["op"] = op
        with _state.lock:
            occurrence = _state.input_occurrences.get(stage, 0) + 1
            _state.input_occurrences[stage] = occurrence
            entry["occurrence"] = occurrence
            _state.input_sets.append(entry)
            if names:
                _expect_outputs(entry, names)
            # A host payload is written while the model runs on; a device payload waits for
            # finish() (reading it here would synchronize).
            writer = _input_writer(_state.window, inline=sync) if sync or _host_only(payload) else None
            if writer is not None:
                entry["submitted"] = True
        if writer is not None:
            writer.submit(entry, payload)
        return entry
    except Exception as exc:
        _disarm("capture_inputs(%r)" % (stage,), exc)
        return None
    finally:
        _probe_busy = busy


_SHARD = re.compile(r"^(?:(replicated|partial):(\w+)|(tp|cp):(-?\d+)(?:@(\d+)/(\d+)|:(zigzag))?)$")


class _Split:
    """Where a sliced tensor's indices along ``dim`` lie in the full tensor (see _global_index)."""

    __slots__ = ("dim", "full", "offset", "zigzag", "rank", "size")

    def __init__(self, dim, full, offset, zigzag, rank, size):
        self.dim, self.full, self.offset, self.zigzag, self.rank, self.size = dim, full, offset, zigzag, rank, size

    def key(self):
        return (self.dim, self.full, self.offset, self.zigzag, self.rank, self.size)


def _shard_annotation(stage, shard, tensor):
    """(the manifest's ``shard`` string, a _Split or None) of capture(shard=...), or None with a warning.

    The string is written normalised: a negative dimension counted from the front.
    """
    def refuse(why):
        _warn("capture(%r, shard=%r): %s; recorded without a shard" % (stage, shard, why), key="shard:%s" % stage)
        return None

    m = _SHARD.match(str(shard).strip())
    if m is None:
        return refuse("not 'tp:D', 'tp:D@OFFSET/FULL', 'cp:D', 'cp:D:zigzag', 'replicated:AXIS' or 'partial:AXIS'")
    kind_axis, axis = m.group(1), m.group(2) or m.group(3)
    if axis not in _state.parallel:
        return refuse("arm() was given no parallel layout for %r (arm(..., parallel={%r: (rank_in_group, group_size)}))"
                      % (axis, axis))
    rank, size = _state.parallel[axis]
    if kind_axis is not None:
        return "%s:%s" % (kind_axis, axis), None
    ndim = tensor.dim()
    dim = int(m.group(4))
    if not -ndim <= dim < ndim:
        return refuse("dimension %d is out of range for a %d-d tensor" % (dim, ndim))
    dim %= ndim
    local = int(tensor.shape[dim])
    if m.group(5) is not None:
        offset, full = int(m.group(5)), int(m.group(6))
        if offset + local > full:
            return refuse("offset %d + local size %d is past the full size %d" % (offset, local, full))
        return "%s:%d@%d/%d" % (axis, dim, offset, full), _Split(dim, full, offset, False, rank, size)
    if m.group(7) is not None:
        if local % 2:
            return refuse("a zigzag shard holds two equal chunks, but dimension %d has odd size %d" % (dim, local))
        return "%s:%d:zigzag" % (axis, dim), _Split(dim, local * size, 0, True, rank, size)
    return "%s:%d" % (axis, dim), _Split(dim, local * size, rank * local, False, rank, size)


def _global_index(split, local, device):
    """[local] int64 indices, along ``split.dim``, of this rank's elements in the full tensor.

    An offset slice holds offset .. offset+local-1.  A zigzag shard of n ranks splits the full
    dimension into 2n chunks of c = local/2 and holds chunks ``rank`` and ``2n-1-rank``.
    """
    index = torch.arange(local, dtype=torch.int64, device=device)
    if not split.zigzag:
        return index + split.offset
    c = local // 2
    second = (2 * split.size - 1 - split.rank) * c - c
    return torch.where(index < c, index + split.rank * c, index + second)


def _shard_weights(shape, split, dtype, device):
    """(row weights [rows], column weights [cols]) at the full tensor's coordinates; cached.

    The local tensor is viewed as [rows, cols] as for an unsharded one; a slice along the
    last dimension moves the column indices, one along a leading dimension the row index of
    each local row, which is that row's multi-index with the full size at ``split.dim``.
    """
    key = ("shard", tuple(shape), split.key(), dtype, device)
    cached = _weights_cache.get(key)
    if cached is not None:
        return cached
    cols = shape[-1]
    rows = 1
    for size in shape[:-1]:
        rows *= size
    if split.dim == len(shape) - 1:
        col_index = _global_index(split, cols, device)
        row_index = torch.arange(rows, dtype=torch.int64, device=device)
    else:
        outer = 1
        for size in shape[: split.dim]:
            outer *= size
        inner = 1
        for size in shape[split.dim + 1: -1]:
            inner *= size
        along = _global_index(split, shape[split.dim], device)
        row_index = (torch.arange(outer, dtype=torch.int64, device=device).view(-1, 1, 1) * (split.full * inner)
                     + along.view(1, -1, 1) * inner
                     + torch.arange(inner, dtype=torch.int64, device=device).view(1, 1, -1)).reshape(-1)
        col_index = torch.arange(cols, dtype=torch.int64, device=device)
    weights = (_weights_at(row_index, _ROW_MUL, dtype), _weights_at(col_index, _COL_MUL, dtype))
    if len(_weights_cache) < _WEIGHTS_CACHE_MAX and rows + cols <= _WEIGHTS_CACHE_LENGTH:
        _weights_cache[key] = weights
    return weights


def _weights_at(index, multiplier, dtype):
    """(((index + 1) * multiplier) mod 2**32) / 2**32 for 0-based int64 ``index``."""
    return torch.bitwise_and((index + 1) * multiplier, _TWO_32 - 1).to(dtype) / _TWO_32


def _op_name(op):
    """The manifest's ``op`` string for capture_inputs(_op=...); None stays None; never raises.

    A string is kept as given; a torch op (``torch.ops.aten.add``) becomes
    ``"torch.ops.aten.add"``, a function ``"<module>.<name>"`` (how a replay spells it).
    """
    try:
        if op is None or isinstance(op, str):
            return op
        if type(op).__module__ == "torch._ops":  # OpOverloadPacket / OpOverload: str() is "ns.name[.overload]"
            return "torch.ops." + str(op)
        name, module = getattr(op, "__name__", None), getattr(op, "__module__", None)
        if isinstance(name, str) and isinstance(module, str):
            return "%s.%s" % (module, name)
        return str(op)
    except Exception:
        return object.__repr__(op)


def _input_value(value, stats=None):
    """(JSON description, picklable payload) of one operator argument. A tensor's description
    gets ``stats`` (null until finish() reads them back); its statistics row is appended to
    ``stats`` as (description, row)."""
    if isinstance(value, torch.Tensor):
        if _unsupported(value) is not None:
            raise _Unsupported(value)
        requires_grad = bool(value.requires_grad)  # before detach(), which always clears it
        value = value.detach()
        desc = {"kind": "tensor"}
        layout = _layout_raw(value)
        desc.update(_layout_fields(layout))
        desc["stats"] = None
        if stats is not None:
            row = _record_statistics(value, layout)[0]
            if row is not None:
                stats.append((desc, row))
        span = _storage_span(value)
        payload = {
            "__dump_probe_tensor__": 1,
            "span": span.clone(),
            "dtype": _dtype_name(value.dtype),
            "shape": list(value.shape),
            "stride": list(value.stride()),
            "offset_in_span": 0,
            "storage_offset": int(value.storage_offset()),
            "device": str(value.device),
            "requires_grad": requires_grad,
        }
        return desc, payload
    if isinstance(value, torch.dtype):
        name = _dtype_name(value)
        return {"kind": "dtype", "value": name}, {"__dump_probe_dtype__": name}
    if isinstance(value, torch.device):
        return {"kind": "device", "value": str(value)}, {"__dump_probe_device__": str(value)}
    if value is None:
        return {"kind": "none"}, None
    if isinstance(value, bool):
        return {"kind": "bool", "value": value}, value
    if isinstance(value, int):
        return {"kind": "int", "value": value}, value
    if isinstance(value, float):
        return {"kind": "float", "value": _json_float(value)}, value
    if isinstance(value, str):
        return {"kind": "str", "value": value}, value
    if isinstance(value, (list, tuple)):
        pairs = [_input_value(v, stats) for v in value]
        kind = "list" if isinstance(value, list) else "tuple"
        return {"kind": kind, "items": [p[0] for p in pairs]}, {"__dump_probe_seq__": kind, "items": [p[1] for p in pairs]}
    if isinstance(value, dict):
        pairs = {str(k): _input_value(v, stats) for k, v in value.items()}
        return {"kind": "dict", "items": {k: p[0] for k, p in pairs.items()}}, {
            "__dump_probe_dict__": 1,
            "items": {k: p[1] for k, p in pairs.items()},
        }
    _warn("capture_inputs: %s values are stored as their repr" % type(value).__name__)
    return {"kind": "repr", "value": repr(value)}, {"__dump_probe_repr__": repr(value)}


def _storage_span(tensor):
    """1-D view of the storage elements a strided view can touch, [lo, hi).

    Cloning this span (not the whole storage) keeps a slice of a large cache
    small while the stride and relative offset still rebuild the exact view.
    Views with negative strides do not exist in torch, so lo is the offset.
    """
    if tensor.numel() == 0:
        return tensor.new_empty((0,))
    extent = 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))
    return tensor.as_strided((extent,), (1,), tensor.storage_offset())


def graph_slot(stage, like, rows="auto", token_dims=(0,)):
    """Preallocate device buffers for ``stage`` before a graph is captured.

    Allocates a statistics vector on ``like``'s device and, when ``stage``
    matches DUMP_PROBE_TENSOR, a rows-bounded tensor buffer shaped like
    ``like``.  capture_graph() later writes into them with device-side work
    only, so the copies are part of the captured graph and run at every
    replay; finish() after a replay reads them back as records of mode
    "graph".  Needs DUMP_PROBE set, not an open window (a graph is usually
    captured before the request arrives).  Returns True when allocated.

    ``rows`` and ``token_dims`` are capture()'s: with row statistics on, the
    slot also holds per-token-row partials that the replay writes, and
    finish() weights them by the positions of the row map of the window the
    replay ran in (arm(label, rows=...), the padding rows of the graph's
    fixed batch as request None).  With ``rows="auto"`` the record gets
    token rows when its row count is the forward's.
    """
    if not _usable():
        return False
    try:
        stage = str(stage)
        if stage in _state.slots:
            held = _state.slots[stage]
            if held.rows is not None and tuple(like.shape) != held.rows.shape:
                _warn("graph_slot(%r): already allocated for shape %s; this call's %s is not used"
                      % (stage, list(held.rows.shape), list(like.shape)), key="slot-twice:%s" % stage)
            return True
        if like.is_nested or like.layout != torch.strided:
            message = "graph_slot(%r): %s has no slot the graph can write into; not captured" % (
                stage, _unsupported(like))
            if _state.window is not None:
                _state.window["warnings"].append(message)
            _warn(message, key="unsupported:graph_slot:%s" % stage)
            return False
        stats = torch.zeros(len(_DEVICE_STATS), dtype=_stats_dtype(like.device), device=like.device)
        buffer = None
        if _config.tensor_regex is not None and _config.tensor_regex.search(stage):
            buffer = torch.empty_like(_bounded_rows(like), memory_format=torch.contiguous_format)
        scratch = None
        if like.device.type in _TRITON_DEVICES and _config.kernel != "torch":
            scratch = _triton_scratch(like.device, stats.dtype == torch.float64)
        rows_buffer = _slot_rows(stage, like, rows, token_dims)
        _state.slots[stage] = _Slot(stage, stats, buffer, len(_state.slots), scratch, rows_buffer)
        return True
    except Exception as exc:
        _disarm("graph_slot(%r)" % (stage,), exc)
        return False


class _SlotRows:
    """A graph slot's token rows: ``parts`` the preallocated [n, 4 + k] buffer of _row_parts'
    partials that capture_graph writes inside the graph; the positions are applied in
    finish(), from the row map of the window the replay ran in (a graph's rows are fixed when
    it is captured, the requests in them are not)."""

    __slots__ = ("shape", "n", "k", "cols", "dims", "declared", "col_weights", "parts", "fits")

    def __init__(self, like, n, dims, declared):
        dtype = _row_dtype(like)
        self.shape = tuple(like.shape)
        self.n = n
        self.cols = _row_cols(like, n)
        self.k = like.numel() // (n * self.cols)
        self.dims = list(dims)
        self.declared = declared
        self.col_weights = _position_weights(self.cols, _COL_MUL, dtype, like.device)
        self.parts = torch.zeros((n, 4 + self.k), dtype=dtype, device=like.device)
        # Whether the last capture_graph (the graph being replayed) wrote the rows: a host
        # flag, set when the graph is captured, as true at every replay of it.
        self.fits = False

    def write(self, tensor):
        self.parts.copy_(_row_parts(tensor, self.n, self.k, self.cols, self.col_weights, self.parts.dtype))


def _slot_rows(stage, like, rows, token_dims):
    """graph_slot's _SlotRows for ``like``, or None where the stage gets no token rows (rows
    None, row statistics off or not for this stage, a tensor token rows cannot describe)."""
    if rows is None or not _config.row_stats or (_config.row_regex is not None and not _config.row_regex.search(stage)):
        return None
    dims = tuple(token_dims) if isinstance(token_dims, (tuple, list)) else None
    if rows not in ("auto", "tokens") or dims not in ((0,), (0, 1)) or like.dim() < len(dims) \
            or like.is_complex() or like.numel() == 0:
        _warn("graph_slot(%r, rows=%r, token_dims=%r): token rows are rows='auto' or 'tokens' with token_dims "
              "(0,) or (0, 1) of a non-empty real tensor; the slot has no token rows" % (stage, rows, token_dims),
              key="rows:%s" % stage)
        return None
    n = int(like.shape[0]) * (int(like.shape[1]) if len(dims) == 2 else 1)
    return _SlotRows(like, n, dims, rows == "tokens")


class _SlotRecord:
    """A graph record's seq and token rows, for _write_token_rows beside the eager records."""

    __slots__ = ("seq", "rows")

    def __init__(self, seq, rows):
        self.seq = seq
        self.rows = rows


def _slot_token_rows(slot, row_map, label):
    """The _TokenRows of a graph slot written in this window, from its partials and the
    window's row map; None where the slot's rows are not the forward's (with a warning where
    they were declared to be)."""
    rows = slot.rows
    if row_map is None:
        return None
    if row_map.count is None:
        row_map.learn(rows.n)
    if rows.n != row_map.count:
        if rows.declared:
            _warn("graph slot %r (rows='tokens'): %d rows but the forward of %r holds %d; recorded without token rows"
                  % (slot.stage, rows.n, label, row_map.count), key="rows:%s" % slot.stage)
        return None
    row_map.matched = True
    device = rows.parts.device
    stats = _rows_from_parts(rows.parts, row_map.positions_on(device), torch.arange(rows.k, device=device), rows.k)
    return row_map.token_rows(stats, rows.dims)


def capture_graph(stage, tensor):
    """Write statistics (and the bounded tensor) of ``tensor`` into ``stage``'s slot.

    Only device-side reductions and ``copy_`` happen, so inside a graph
    capture the work becomes graph nodes and repeats at every replay.  It is
    deliberately not gated on armed(): a runtime condition would be frozen at
    capture time anyway.  Without a slot for ``stage`` it does nothing.
    """
    slot = _state.slots.get(str(stage)) if _config.enabled else None
    if slot is None:
        return
    try:
        tensor = tensor.detach()
        stats, path = _statistics_by_path(tensor, slot.stats.dtype, out=slot.stats, scratch=slot.scratch)
        if stats is not None and stats is not slot.stats:  # empty or complex tensors get null stats
            slot.stats.copy_(stats)
        if slot.tensor is not None:
            slot.tensor.copy_(_bounded_rows(tensor))
        if slot.rows is not None:
            slot.rows.fits = tuple(tensor.shape) == slot.rows.shape
            if slot.rows.fits:
                slot.rows.write(tensor)
            elif slot.rows.declared:  # a graph's shapes are fixed: not the write the slot was made for
                _warn("capture_graph(%r): shape %s, the slot's rows were made for %s; its token rows are not written"
                      % (stage, list(tensor.shape), list(slot.rows.shape)), key="slot-rows:%s" % stage)
        meta = _layout(tensor)
        if slot.tensor is not None:
            meta["rows_total"] = int(tensor.shape[0]) if tensor.dim() > 0 else 1
            meta["rows_kept"] = int(slot.tensor.shape[0]) if slot.tensor.dim() > 0 else 1
        if stats is not None and tensor.device.type != "meta":
            meta["stats_path"] = path
        slot.meta = meta
    except Exception as exc:
        _disarm("capture_graph(%r)" % (stage,), exc)


# --------------------------------------------------------------------------- module hooks
#
# Capture without editing the model: forward hooks named by the module path
# (nn.Module.named_modules), and an operator level inside ``with ops(...)``. Every hook returns
# on the one boolean ``_active`` when no window is open, and never raises into the model.

# Flattening a module's outputs stops this deep (a cache object of nested lists is not walked).
_FLATTEN_DEPTH = 4


def _flat_tensors(value, depth=0, at=""):
    """The tensors of a module's inputs or outputs as (index path, tensor), in order: a tensor
    is at ``""``; item i of a tuple or list, value i of a dict (HF's ModelOutput is one) or
    field i of a dataclass at ``"i"``, nested ones joined (``"1.0"``). None and non-tensors
    keep their index, so a module returning ``(out, None)`` names ``out`` as one returning
    ``(out, weights)`` does; cache objects and anything deeper than _FLATTEN_DEPTH are skipped."""
    if isinstance(value, torch.Tensor):
        return [(at, value)]
    if depth >= _FLATTEN_DEPTH:
        return []
    if isinstance(value, (tuple, list)):
        items = value
    elif isinstance(value, dict):
        items = list(value.values())
    elif hasattr(value, "__dataclass_fields__"):
        items = [getattr(value, f, None) for f in value.__dataclass_fields__]
    else:
        return []
    out = []
    for i, item in enumerate(items):
        out.extend(_flat_tensors(item, depth + 1, "%s.%d" % (at, i) if at else str(i)))
    return out


def _hook_token_dims(tensor):
    """capture()'s (rows, token_dims) for a hooked tensor: (0, 1) for [batch, seq, ...]
    activations and [batch, seq] ids, (0,) for [tokens, ...], as the forward's row count says
    where it is known; before it is known (the forward's first capture teaches it) by rank:
    3-D and 2-D integer tensors (0, 1), 1-D and 2-D floating ones (0,). Higher ranks (attention
    probabilities [batch, heads, q, k]) and scalars get no token rows."""
    dim = tensor.dim()
    if dim == 0 or dim > 3:
        return None, (0,)
    row_map = _state.window["row_map"] if _state.window is not None else None
    count = row_map.count if row_map is not None else None
    shape = tensor.shape
    if count is not None:
        if dim >= 2 and int(shape[0]) * int(shape[1]) == count:
            return "auto", (0, 1)
        return "auto", (0,)
    if dim == 3 or (dim == 2 and not tensor.is_floating_point() and not tensor.is_complex()):
        return "auto", (0, 1)
    return "auto", (0,)


def _capture_hooked(stage, tensors, part, token_rows=True):
    """Captures a hooked module's tensors (``_flat_tensors``' (index, tensor) pairs): an output
    that is a tensor by the bare path, the tensors of a tuple, list, dict or dataclass output as
    ``.output.I`` (I their index in it, ``.output.1.0`` nested); inputs always ``.input.I``.
    ``token_rows`` False: no token rows (the operator level's default)."""
    for at, tensor in tensors:
        rows, dims = _hook_token_dims(tensor) if token_rows else (None, (0,))
        capture(_hooked_name(stage, part, at), tensor, rows=rows, token_dims=dims)


def _hooked_name(stage, part, at):
    """The stage of a hooked module's tensor at index path ``at`` (see _capture_hooked)."""
    if at == "" and part == "output":
        return stage
    return "%s.%s.%s" % (stage, part, at or "0")


class Hooks:
    """The hooks one hook() call installed; ``remove()`` takes them out (unhook() takes out
    every hook() call's)."""

    def __init__(self, stages):
        self.stages = stages  # the module paths hooked, in named_modules order
        self.modules = []  # the modules hooked (to free their place in _hooked)
        self.handles = []
        self.depth = 0  # nesting of the root module's forward (label mode)
        self.armed_here = False  # the root pre-hook opened the window it will finish

    def remove(self):
        for handle in self.handles:
            try:
                handle.remove()
            except Exception:
                pass
        self.handles = []
        for module in self.modules:
            _hooked.pop(module, None)
        self.modules = []
        try:
            _state.hooks.remove(self)
        except ValueError:
            pass


def hook(model, stages=None, inputs=False, outputs=True, label=None, input_sets=False):
    """Capture the submodules of ``model`` whose qualified names (``named_modules``) match the
    regex ``stages`` (``re.search``; None: every module), with forward hooks: no edit at each
    stage. The stage is the module path (``model.layers.3.mlp``; the root module itself is
    named by its class; a torch.compile'd model's paths as the eager model's); an output that
    is a tensor is recorded under the bare path, the tensors of a tuple, list, dict or
    dataclass output as ``PATH.output.N``, N the tensor's index in it (None and non-tensors
    keep their index and are skipped: ``(out, None)`` and ``(out, weights)`` name ``out``
    alike; nested ``PATH.output.1.0``); with ``inputs=True`` its inputs (positional, then
    keyword, one index sequence) as ``PATH.input.N``, captured before the module runs, so an
    input and an output never share a name and an input changed in place is seen as it came
    in. A module a live hook() already hooks is left as it is, with a warning. Occurrences count per stage as
    with capture(). Token rows: (0, 1) for [batch, seq, hidden] activations, (0,) for
    [tokens, hidden], as the forward's row count says (see _hook_token_dims).

    ``label``: None (default) captures only inside windows the code arms itself; a string, or
    a callable ``label(args, kwargs)`` giving one, also arms a window at the root module's
    forward pre-hook (``True``: the root's class name, as ``python -m dump_probe`` labels, a
    constant, so the calls of a ``generate()`` loop are calls 1, 2, ... of one label, each a
    window of its own under DUMP_PROBE_OCCURRENCE=all) and finishes it after the root's
    forward. Where the code already armed a window (armed()), the hook neither arms nor
    finishes it; where the code arms inside the forward, its arm() takes over (the hook's
    window is dropped unwritten and uncounted), so an engine labelling by request keeps its
    own boundaries. The root's integer input (``input_ids``)
    on the cpu is recorded as the window's token ids; on a device it is not read (that would
    synchronise), and dumpview says the input identity is unknown.

    ``input_sets``: False (default), True, or a regex of module paths (``re.search``) among
    the hooked ones: each call of such a module also saves its complete input set, as
    capture_inputs() would, under the module path as stage, its positional then keyword
    inputs as the arguments ``input.0``, ``input.1``, ... (one index sequence, as ``inputs``
    names them), ``_op`` the module's class as ``"<module>.<qualname>"``, linked to the
    records of that call's own outputs (``outputs=True`` makes them), whose whole tensors are
    saved beside the set (capture_inputs(outputs=...)).

    DUMP_PROBE_HOOK=REGEX replaces ``stages`` without an edit. Returns a Hooks whose
    ``remove()`` takes these hooks out; unhook() takes out all. Never raises: a problem prints
    one warning and returns a Hooks with nothing installed.
    """
    hooks = Hooks([])
    try:
        pattern = _config.hook_pattern if _config.hook_pattern is not None else stages
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        root_name = _root_name(model)
        sets = re.compile(input_sets) if isinstance(input_sets, str) else input_sets
        already = []
        for path, module in model.named_modules():
            if path == "_orig_mod":
                continue  # the model inside torch.compile's wrapper: the wrapper is the root
            name = _module_path(path) or root_name
            if regex is not None and not regex.search(name):
                continue
            if module in _hooked:
                already.append(name)  # a second hook() would record each call twice
                continue
            _hooked[module] = True
            hooks.modules.append(module)
            hooks.stages.append(name)
            if inputs:
                hooks.handles.append(module.register_forward_pre_hook(_input_hook(name), with_kwargs=True))
            open_sets = None
            if sets is True or (sets not in (None, False) and sets.search(name)):
                open_sets = []  # this module's input sets whose outputs are still to come (nested calls)
                cls = type(module)
                op = "%s.%s" % (cls.__module__, cls.__qualname__)
                hooks.handles.append(module.register_forward_pre_hook(_input_set_hook(name, op, open_sets),
                                                                      with_kwargs=True))
            if outputs or open_sets is not None:
                hooks.handles.append(module.register_forward_hook(_output_hook(name, open_sets, outputs)))
        if already:
            _warn("hook(%s): %d module(s) already hooked (%s%s) are left as they are; unhook() first to hook them "
                  "again" % (root_name, len(already), ", ".join(already[:3]), ", ..." if len(already) > 3 else ""),
                  key="hook-twice:%s" % root_name)
        if label is not None and label is not False:
            name = root_name if label is True else label
            try:  # before the root's own input hook, so that its inputs land in the window
                arming = model.register_forward_pre_hook(_arming_hook(hooks, name), with_kwargs=True, prepend=True)
            except TypeError:  # torch < 2.0
                arming = model.register_forward_pre_hook(_arming_hook(hooks, name), with_kwargs=True)
            hooks.handles.append(arming)
            # always_call: the window is finished even when the forward raises.
            hooks.handles.append(_register_post(model, _finishing_hook(hooks)))
        _state.hooks.append(hooks)
        if not hooks.stages:
            _warn("hook(%s, stages=%r): no module path matches; nothing is captured" % (root_name, pattern),
                  key="hook-none:%s" % pattern)
    except Exception as exc:
        _warn("hook() failed (%s: %s); no module hooks installed" % (type(exc).__name__, exc), key="hook")
        hooks.remove()
    return hooks


# The modules a live hook() call hooked: a second call leaves them, with a warning.
_hooked = weakref.WeakKeyDictionary()


def _module_path(path):
    """A named_modules path without torch.compile's wrapper (``_orig_mod.``), so that a
    compiled model's stages are named as the eager model's."""
    if path == "_orig_mod":
        return ""
    return path[len("_orig_mod."):] if path.startswith("_orig_mod.") else path


def _root_name(model):
    """The stage of the root module: its class name (a compiled model's, the model's own)."""
    inner = getattr(model, "_orig_mod", None)
    return type(inner if isinstance(inner, torch.nn.Module) else model).__name__


def unhook():
    """Removes every hook that hook() installed."""
    for hooks in list(_state.hooks):
        hooks.remove()


def _register_post(model, fn):
    try:
        return model.register_forward_hook(fn, with_kwargs=True, always_call=True)
    except TypeError:  # torch < 2.1: no always_call
        return model.register_forward_hook(fn, with_kwargs=True)


def _input_hook(name):
    def pre_hook(module, args, kwargs):
        if not _active:
            return None
        try:
            # Positional, then keyword arguments, one index sequence.
            tensors = _flat_tensors(tuple(args) + tuple((kwargs or {}).values()))
            if tensors:
                _capture_hooked(name, tensors, "input")
        except Exception as exc:
            _disarm("hook(%r) inputs" % name, exc)
        return None
    return pre_hook


def _input_set_hook(name, op, open_sets):
    """hook(input_sets=...)'s pre-hook: the call's input set (capture_inputs), pushed on
    ``open_sets`` (None outside a window) for the post-hook to link to the call's outputs."""
    def pre_hook(module, args, kwargs):
        entry = None
        if _active and not _counting:
            try:
                values = list(args) + list((kwargs or {}).values())
                entry = _input_set(name, op, None, {"input.%d" % i: v for i, v in enumerate(values)})
            except Exception as exc:
                _disarm("hook(%r) input set" % name, exc)
        open_sets.append(entry)
        return None
    return pre_hook


def _output_hook(name, open_sets=None, outputs=True):
    def post_hook(module, args, output):
        # The call's input set is taken off first, captured or not, so nested calls stay paired.
        entry = open_sets.pop() if open_sets else None
        if not _active or not outputs:
            return None
        try:
            tensors = _flat_tensors(output)
            if entry is not None and entry.get("window") is _state.window and tensors:
                with _state.lock:
                    _expect_outputs(entry, [_hooked_name(name, "output", at) for at, _t in tensors])
            if tensors:
                _capture_hooked(name, tensors, "output")
        except Exception as exc:
            _disarm("hook(%r) outputs" % name, exc)
        return None
    return post_hook


def _arming_hook(hooks, label):
    def pre_hook(module, args, kwargs):
        hooks.depth += 1
        if hooks.depth > 1 or not _config.enabled or _active:
            return None  # a nested call, or the code's own window: not ours to arm
        try:
            name = label(args, kwargs) if callable(label) else label
            metadata = {}
            ids = _root_token_ids(args, kwargs)
            if ids is not None:
                metadata["token_ids"] = ids
            _arm_for_hook(hooks, str(name), metadata)
        except Exception as exc:
            _warn("hook(label=...) could not arm (%s: %s); that forward is not captured" % (type(exc).__name__, exc),
                  key="hook-arm")
        return None
    return pre_hook


def _finishing_hook(hooks):
    def post_hook(module, args, kwargs, output):
        hooks.depth = max(0, hooks.depth - 1)
        if hooks.depth == 0 and hooks.armed_here:
            hooks.armed_here = False
            _state.hook_armed = None
            finish()  # a no-op where the forward was not selected; ends a counting call too
        return None
    return post_hook


def _arm_for_hook(owner, label, metadata):
    """arm() of a window opened by a hook (``owner`` a Hooks, or the global hooks' state, with
    an ``armed_here`` flag): remembered, so that the code's own arm() inside that forward takes
    the window over (_yield_to_code) instead of finishing it empty."""
    was_new = label not in _state.labels
    _state.arming_by_hook = True
    try:
        arm(label, **metadata)
    finally:
        _state.arming_by_hook = False
    if _state.window is not None:
        _state.window["by_hook"] = True
    _state.hook_armed = (label, was_new, owner)
    owner.armed_here = True


def _yield_to_code():
    """The code under test calls arm() inside a forward a hook armed: the hook's window is
    dropped unwritten and its call uncounted (the label's calls and match as if the hook had not
    armed), and the hook will not finish the code's window."""
    global _active, _counting
    label, was_new, owner = _state.hook_armed
    _state.hook_armed = None
    owner.armed_here = False
    window = _state.window
    if window is not None and window.get("by_hook"):
        if "writer" in window:
            window["writer"].abandon()
        _state.window = None
        _active = _counting = False
    elif _counting:
        _active = _counting = False
    match, calls = _state.labels.get(label, (0, 0))
    if calls <= 1 and was_new:
        _state.labels.pop(label, None)
    elif calls:
        _state.labels[label] = (match, calls - 1)
    _state.arms = max(0, _state.arms - 1)


def _root_token_ids(args, kwargs):
    """The root forward's token ids as a host list: ``input_ids`` (or the first integer tensor
    argument) when it lives on the cpu; None on a device (reading it would synchronise)."""
    ids = kwargs.get("input_ids") if isinstance(kwargs, dict) else None
    if not isinstance(ids, torch.Tensor):
        ids = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if ids is None or ids.is_floating_point() or ids.is_complex() or ids.device.type != "cpu" or ids.dim() > 2:
        return None
    return [int(v) for v in ids.reshape(-1).tolist()]


class _ModulePaths:
    """The module path of every module call, through torch's global module hooks (for
    ``python -m dump_probe --hook`` and ``ops()``): the outermost module called is a root,
    named by its class, and a module inside it by its path under that root (named_modules);
    a module called inside a root it does not belong to is named by its class. ``on_root``
    and ``on_root_end`` run at a root's start and end; ``on_module`` after each module
    (name, module, args, output)."""

    def __init__(self):
        self.stack = []  # (module, path) of the calls under way, outermost first
        self.paths = weakref.WeakKeyDictionary()  # root -> {id(module): path}
        self.handles = []
        self.users = 0
        self.on_pre = []  # callbacks (path, module, args)
        self.on_post = []  # callbacks (path, module, args, output)
        self.on_root = []  # callbacks (root module, args) at a root's start
        self.on_root_end = []  # callbacks () at a root's end

    def current(self):
        """The innermost module path under way, or None outside every module."""
        return self.stack[-1][1] if self.stack else None

    def start(self):
        self.users += 1
        if self.handles:
            return
        from torch.nn.modules import module as modules

        self.handles.append(modules.register_module_forward_pre_hook(self._pre))
        try:
            self.handles.append(modules.register_module_forward_hook(self._post, always_call=True))
        except TypeError:  # torch < 2.1
            self.handles.append(modules.register_module_forward_hook(self._post))

    def stop(self):
        self.users = max(0, self.users - 1)
        if self.users == 0:
            for handle in self.handles:
                handle.remove()
            self.handles = []
            self.stack = []

    def _path_of(self, module):
        if not self.stack:
            return _root_name(module)
        return self.paths_of(self.stack[0][0]).get(id(module)) or type(module).__name__

    def paths_of(self, root):
        """{id(module): its path} of the modules under ``root`` (the root: its class name)."""
        paths = self.paths.get(root)
        if paths is None:
            paths = {id(m): (_module_path(p) or _root_name(root)) for p, m in root.named_modules()}
            self.paths[root] = paths
        return paths

    def _pre(self, module, args):
        try:
            root = not self.stack
            path = self._path_of(module)
            self.stack.append((module, path))
            if root:
                for fn in self.on_root:
                    fn(module, args)
            for fn in self.on_pre:
                fn(path, module, args)
        except Exception as exc:
            _disarm("module hook", exc)
        return None

    def _post(self, module, args, output):
        try:
            while self.stack and self.stack[-1][0] is not module:
                self.stack.pop()  # a call that raised under a torch without always_call
            if not self.stack:
                return None
            path = self.stack[-1][1]
            for fn in self.on_post:
                fn(path, module, args, output)
            self.stack.pop()
            if not self.stack:
                for fn in self.on_root_end:
                    fn()
        except Exception as exc:
            _disarm("module hook", exc)
        return None


_paths = _ModulePaths()


def hook_all(stages=None, inputs=False, label=True):
    """Module hooks on every module of every model, through torch's global module hooks:
    what ``python -m dump_probe --hook REGEX`` installs. Names as hook()'s, taken from the
    outermost module called (a module called outside any parent is its own root, named by its
    class); inputs are the positional ones only (global hooks do not see keyword arguments).
    ``label`` arms a window per outermost forward as in hook() (True: the root's class name),
    for the roots that hold submodules and a module the regex takes. DUMP_PROBE_HOOK replaces
    ``stages``. Returns a function that removes them."""
    pattern = _config.hook_pattern if _config.hook_pattern is not None else stages
    regex = re.compile(pattern) if isinstance(pattern, str) else pattern
    owner = Hooks([])
    eligible = weakref.WeakKeyDictionary()

    def holds_stages(module):
        """A root worth a window: a module with submodules, one of which (or itself) the regex
        takes (a LayerNorm applied before the model is not the model's forward)."""
        known = eligible.get(module)
        if known is None:
            paths = _paths.paths_of(module).values()
            known = any(True for _ in module.children()) and (
                regex is None or any(regex.search(p) for p in paths))
            eligible[module] = known
        return known

    def pre(path, module, args):
        if _active and inputs and (regex is None or regex.search(path)):
            tensors = _flat_tensors(args)
            if tensors:
                _capture_hooked(path, tensors, "input")

    def post(path, module, args, output):
        if _active and (regex is None or regex.search(path)):
            tensors = _flat_tensors(output)
            if tensors:
                _capture_hooked(path, tensors, "output")

    def root(module, args):
        if label is None or label is False or not _config.enabled or _active or not holds_stages(module):
            return
        name = label(args, {}) if callable(label) else (_root_name(module) if label is True else label)
        ids = _root_token_ids(args, {})
        _arm_for_hook(owner, str(name), {"token_ids": ids} if ids is not None else {})

    def root_end():
        if owner.armed_here:
            owner.armed_here = False
            _state.hook_armed = None
            finish()

    callbacks = ((_paths.on_pre, pre), (_paths.on_post, post), (_paths.on_root, root), (_paths.on_root_end, root_end))
    for where, fn in callbacks:
        where.append(fn)
    _paths.start()

    def remove():
        for where, fn in callbacks:
            if fn in where:
                where.remove(fn)
        _paths.stop()
    return remove


def _op_mode_class():
    """The TorchDispatchMode behind ops(), made on first use (its import stays off the
    probe's import path)."""
    global _OpMode
    if _OpMode is not None:
        return _OpMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpMode(TorchDispatchMode):
        """Captures the outputs of the aten operators that run inside it. A dispatch mode,
        not a function mode: it sees every operator the dispatcher runs (also those a torch
        function or a C++ kernel calls internally, and an npu's custom operators), under the
        dispatcher's names (``aten.mm.default``), which are the same on every device and do
        not depend on which Python API the model used. While its __torch_dispatch__ runs the
        mode is off, so the probe's own statistics operators are not captured again."""

        def __init__(self, regex, rows):
            super().__init__()
            self.regex = regex
            self.rows = rows

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if _active and not _counting and not _probe_busy and not _is_view_op(func):
                try:
                    where = _paths.current() or "-"
                    stage = "%s/%s" % (where, func)
                    if self.regex is None or self.regex.search(stage):
                        tensors = _flat_tensors(out)
                        if tensors:
                            _capture_hooked(stage, tensors, "output", token_rows=self.rows)
                except Exception as exc:
                    _disarm("ops()", exc)
            return out

    _OpMode = OpMode
    return OpMode


_OpMode = None
# Operators whose output is a view of an input though their schema does not say so, and
# operators whose output is uninitialized memory (its bytes are whatever was there).
_UNMARKED_VIEWS = ("_unsafe_view", "_reshape_alias", "lift_fresh")
_UNINITIALIZED = ("empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided", "empty_permuted")
_view_ops = {}  # operator -> whether ops() leaves its outputs out


def _is_view_op(func):
    """Whether ops() leaves ``func``'s outputs out: they only alias its inputs (a view, a
    transpose, an expand: no value computed, its input's captured where made) or are
    uninitialized memory (``empty``: garbage that would differ between identical runs). An
    in-place operator writes through its alias, and is captured."""
    known = _view_ops.get(func)
    if known is None:
        try:
            returns = func._schema.returns
            known = bool(returns) and all(
                r.alias_info is not None and not r.alias_info.is_write for r in returns)
            known = known or func._schema.name.split("::")[-1] in _UNMARKED_VIEWS + _UNINITIALIZED
        except Exception:
            known = False
        _view_ops[func] = known
    return known


class ops:
    """``with ops(REGEX):`` captures the outputs of the torch operators called inside, as
    stages ``<enclosing module path>/<operator>`` (``model.layers.0.mlp/aten.mm.default``;
    ``-/...`` outside every module), occurrences counted as with capture(), bounded by the
    regex (``re.search`` on that name; None: every operator). Views (view, transpose, expand,
    slice: outputs that only alias an input) are not captured: they compute no value. msprobe's L1 without a config
    file. Eager mode only: a compiled graph or a captured CUDA graph runs its operators
    outside Python (use graph_slot()/capture_graph() there), and a torch.compile'd model
    called inside runs eagerly (dynamo does not trace under a dispatch mode). Disarmed
    (DUMP_PROBE unset) it installs nothing; armed, outside an open window, it costs the
    dispatch itself. The probe's own statistics operators are never captured. Operator
    outputs get no token rows unless ``rows=True`` (then as hook()'s): per-row statistics cost
    about as much as the record's own, and at this level a failure is usually reduced within
    one forward rather than aligned across chunkings. Never raises."""

    def __init__(self, stages=None, rows=False):
        self.regex, self.mode, self.usable, self.rows = None, None, True, bool(rows)
        try:
            self.regex = re.compile(stages) if isinstance(stages, str) else stages
        except re.error as exc:
            _warn("ops(%r): not a valid regex (%s); operators are not captured" % (stages, exc), key="ops-regex")
            self.usable = False

    def __enter__(self):
        # Disarmed (DUMP_PROBE unset or invalid): no mode at all, so the model runs, and
        # compiles, as without the probe.
        if not self.usable or not _config.enabled or _config.error is not None:
            return self
        try:
            _paths.start()
            self.mode = _op_mode_class()(self.regex, self.rows)
            self.mode.__enter__()
        except Exception as exc:
            _warn("ops() could not start (%s: %s); operators are not captured" % (type(exc).__name__, exc),
                  key="ops")
            self.mode = None
        return self

    def __exit__(self, *exc_info):
        if self.mode is None:
            return False
        try:
            self.mode.__exit__(*exc_info)
        finally:
            self.mode = None
            _paths.stop()
        return False


def _stats_dtype(device):
    # float64 where the device has it; Ascend (npu) and mps reduce in float32.
    return torch.float64 if device.type in ("cpu", "cuda", "meta", "xpu") else torch.float32


def _statistics(tensor, acc=None, split=None, out=None, scratch=None):
    """The _DEVICE_STATS vector of ``tensor``, computed on its device, no host read.

    Definitions (x: the tensor's values, F: its finite elements):
      nan_count, inf_count  number of NaN and of +-inf elements
      min, max, sum         over F (finish() derives mean = sum / |F| and
                            max_abs = max(|min|, |max|))
      l2                    sqrt(sum over F of x**2)
      pos_checksum          sum over F of x[r, c] * u(r) * v(c), with the
                            tensor viewed as a matrix [rows, cols] (cols =
                            size of the last dimension, rows = all leading
                            dimensions flattened, row-major logical order)
                            and the fixed pseudo-random position weights
                            u(r) = (((r + 1) * 2654435761) mod 2**32) / 2**32,
                            v(c) = (((c + 1) * 2246822519) mod 2**32) / 2**32.
                            Moving rows (tokens, cache blocks) or elements
                            within a row changes it; min/max/mean/l2 stay.
    ``split`` (a _Split, from capture(shard=...)) puts the checksum's weights
    at the full tensor's coordinates.  Returns None for empty and complex tensors.

    The path is _stats_path's: one fused pass (a Triton kernel on cuda/npu,
    torch.compile's Inductor C++ kernel on cpu) or the eager torch ops of
    _torch_statistics.  A fused path that fails warns once, is not tried again
    for that key, and this call falls back to the torch ops.  ``out`` (a
    [7] vector of ``acc``) and ``scratch`` (a graph slot's preallocated
    partials) let the Triton kernel write a slot without allocating, so it can
    be captured in a CUDA graph.
    """
    return _statistics_by_path(tensor, acc, split, out, scratch)[0]


def _statistics_by_path(tensor, acc=None, split=None, out=None, scratch=None, host_block=False, layout=None):
    """(_statistics' vector or None, the path that computed it, or None without statistics).

    capture() records the path from here, so _stats_path runs once per capture and a fused
    path that failed on this very call is recorded as "torch". ``host_block``: the native
    path writes into a host block of its thread and returns (block, offset) in place of a
    tensor (_NativeCall.block; _read_back reads it). ``layout``: _layout_raw(tensor), read
    already (capture()): its shape, stride, dtype and data pointer are not asked again.
    """
    if layout is None:
        acc = acc or _stats_dtype(tensor.device)
        if tensor.numel() == 0 or tensor.is_complex():
            return None, None
    else:
        acc = acc or _stats_dtype(layout[0])
        if 0 in layout[2] or layout[1].is_complex:
            return None, None
    path = _stats_path(tensor)
    if path != "torch" and (tensor.layout != torch.strided or tensor.is_mkldnn
                            or tensor.is_neg() or tensor.is_conj()
                            or type(tensor).__torch_dispatch__ is not torch.Tensor.__torch_dispatch__
                            or (path == "native" and tensor.dim() > 16)):
        # Sparse and mkldnn tensors have no strided storage for a fused pass to read, a view
        # with torch's lazy negation (or conjugation) bit holds the other sign in memory, a
        # __torch_dispatch__ subclass's data_ptr is not its values (a Parameter's is), and the
        # ABI reads 16 dimensions at
        # most: this tensor alone takes the torch ops (which may
        # refuse it: its record then carries null statistics), its dtype keeps its path.
        path = "torch"
    if path != "torch":
        try:
            if path == "triton":
                return _triton_statistics(tensor, acc, split, out, scratch), path
            if path == "native":
                return _native_statistics(tensor, acc, split, host_block and acc == torch.float64, layout), path
            return _inductor_statistics(tensor, acc, split), path
        except Exception as exc:  # never into the model: this key goes back to the eager ops
            _fused_failed(_fused_key(path, tensor), exc)
    return _torch_statistics(tensor, acc, split), "torch"


def _torch_statistics(tensor, acc, split=None):
    """_statistics with eager torch ops (about fourteen passes; every device, meta included).

    Cost matters (every capture point pays it): non-finite elements are
    excluded by nan_to_num replacement instead of boolean masks (bool-output
    kernels are several times slower on CPU), counts come from 0/1 indicators
    built by arithmetic into one reused buffer, the checksum is one
    matrix-vector product, and scalar arithmetic is left to the host.
    Floating tensors are reduced in float32 (float64 tensors, and tensors of
    2**24 or more elements where the device has float64, in float64), so
    counts are exact; integers and bools are summarised as float values.
    """
    n = tensor.numel()
    cols = tensor.shape[-1] if tensor.dim() > 0 else 1
    x = tensor.reshape(n // cols, cols)
    wide = tensor.dtype == torch.float64 or n >= 2**24 or not tensor.is_floating_point()
    red = acc if wide else torch.float32
    if split is None and n > _STATS_BLOCK:
        return _torch_statistics_blocked(x, acc, red, wide)
    if tensor.is_floating_point():
        values = torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)
        scratch = torch.nan_to_num(x, nan=1.0, posinf=0.0, neginf=0.0)
        nan_count = scratch.sub_(values).sum(dtype=red)  # v - v == 0 exactly; 1 at NaN
        torch.nan_to_num(x, nan=0.0, posinf=1.0, neginf=1.0, out=scratch)
        inf_count = scratch.sub_(values).sum(dtype=red)
        low = torch.nan_to_num(x, nan=_INF, neginf=_INF, out=scratch).amin().to(red)
        high = torch.nan_to_num(x, nan=-_INF, posinf=-_INF, out=scratch).amax().to(red)
        values = values.to(red)
    else:
        values = x.to(red)
        nan_count = inf_count = torch.zeros((), dtype=red, device=x.device)
        low, high = torch.aminmax(values)
    total = values.sum()
    l2 = _l2_norm(values, low, high, wide, red, acc)
    if split is None:
        row_weights = _position_weights(x.shape[0], _ROW_MUL, red, x.device)
        col_weights = _position_weights(cols, _COL_MUL, red, x.device)
    else:
        row_weights, col_weights = _shard_weights(list(tensor.shape), split, red, x.device)
    checksum = torch.dot(values @ col_weights, row_weights)
    return torch.stack([nan_count, inf_count, low, high, total, l2, checksum]).to(acc)


def _l2_norm(values, low, high, wide, red, acc, scratch=None):
    """sqrt(sum of squares) of ``values`` (finite, in ``red``; ``low``/``high`` their extrema);
    ``scratch``, a free tensor like ``values``, holds the rescue's scaled copy where given."""
    l2 = torch.linalg.vector_norm(values)
    if not wide:
        # float32 squares overflow above ~1.8e19 (exploding activations) and underflow below
        # ~1e-18 (to 0 for denormals such as 1e-40): there, use the norm of the values scaled
        # by an exact power of two, widened to acc before scaling back. The scale is chosen on
        # the device from the largest magnitude (the extrema above, no host read): 2**100 where
        # it is below _L2_TINY, else _L2_SCALE (2**-64). One rescue pass, as before; where the
        # plain norm is finite and the largest magnitude is not tiny it is kept bit for bit.
        tiny = torch.maximum(-low, high) < _L2_TINY  # also when no element is finite: l2 is 0 then
        scale = torch.where(tiny, _L2_UP, _L2_SCALE).to(red)
        scaled = values * scale if scratch is None else torch.mul(values, scale, out=scratch)
        rescued = torch.linalg.vector_norm(scaled).to(acc) / scale.to(acc)
        l2 = torch.where(torch.isinf(l2) | tiny, rescued, l2.to(acc))
    return l2


# A tensor of more elements than this is reduced block by block, each block at most this many
# elements: the eager ops' temporaries (the wide copy, its scratch, the position weights) then
# stay a few tens of MiB instead of about eight times the tensor (a large input set was
# summarised at 8-9x its size: benches/input_set_rss.py).
_STATS_BLOCK = 1 << 20


def _torch_statistics_blocked(x, acc, red, wide):
    """_torch_statistics of the [rows, cols] matrix ``x`` (reduced in ``red``), in blocks of
    rows (or of one row's columns, where a row alone exceeds _STATS_BLOCK). Counts, extrema and
    the checksum's terms are those of the one-pass reduction; sums are added block by block
    (rounding differs from the one pass by a few ULPs of ``red``), and l2 is combined from the
    blocks' norms (each with _l2_norm's rescue) scaled by the largest, in ``acc``. Every
    capture of the same tensor gets the same blocks. The blocks' temporaries are allocated
    once and reused: freeing and allocating blocks of megabytes left the allocator's heap, and
    so the resident size, growing with the tensor."""
    rows, cols = x.shape
    row_step = max(1, _STATS_BLOCK // cols)
    col_step = min(cols, _STATS_BLOCK)
    size = min(rows, row_step) * col_step
    device = x.device
    floating = x.is_floating_point()
    values_buf = torch.empty(size, dtype=x.dtype, device=device) if floating else None
    scratch_buf = torch.empty(size, dtype=x.dtype if floating else red, device=device)
    wide_buf = torch.empty(size, dtype=red, device=device) if (not floating or red != x.dtype) else None
    index_buf = torch.empty(max(row_step, col_step), dtype=torch.int64, device=device)
    row_buf = torch.empty(row_step, dtype=red, device=device)
    col_buf = torch.empty(col_step, dtype=red, device=device)
    zero = torch.zeros((), dtype=red, device=device)
    nan_count, inf_count, total, checksum = zero, zero, zero, zero
    low = torch.full((), _INF, dtype=red, device=device)
    high = torch.full((), -_INF, dtype=red, device=device)
    norms = []
    for r0 in range(0, rows, row_step):
        r1 = min(rows, r0 + row_step)
        row_weights = _position_weight_range(r0, r1, _ROW_MUL, index_buf, row_buf)
        for c0 in range(0, cols, col_step):
            c1 = min(cols, c0 + col_step)
            block = x[r0:r1, c0:c1]
            shape = (r1 - r0, c1 - c0)
            count = shape[0] * shape[1]
            scratch = scratch_buf[:count].view(shape)
            if floating:
                values = torch.nan_to_num(block, nan=0.0, posinf=0.0, neginf=0.0, out=values_buf[:count].view(shape))
                torch.nan_to_num(block, nan=1.0, posinf=0.0, neginf=0.0, out=scratch)
                nan_count = nan_count + scratch.sub_(values).sum(dtype=red)
                torch.nan_to_num(block, nan=0.0, posinf=1.0, neginf=1.0, out=scratch)
                inf_count = inf_count + scratch.sub_(values).sum(dtype=red)
                block_low = torch.nan_to_num(block, nan=_INF, neginf=_INF, out=scratch).amin().to(red)
                block_high = torch.nan_to_num(block, nan=-_INF, posinf=-_INF, out=scratch).amax().to(red)
                if wide_buf is not None:
                    values = wide_buf[:count].view(shape).copy_(values)
            else:
                values = wide_buf[:count].view(shape).copy_(block)
                block_low, block_high = torch.aminmax(values)
            low, high = torch.minimum(low, block_low), torch.maximum(high, block_high)
            total = total + values.sum()
            rescue = scratch if scratch.dtype == red else None
            norms.append(_l2_norm(values, block_low, block_high, wide, red, acc, rescue).to(acc))
            col_weights = _position_weight_range(c0, c1, _COL_MUL, index_buf, col_buf)
            checksum = checksum + torch.dot(values @ col_weights, row_weights)
    norms = torch.stack(norms)
    largest = norms.amax()
    # sqrt(sum of squares) of the blocks' norms, scaled by the largest so no square overflows.
    # A block whose norm overflowed (inf) makes l2 inf, as the one pass gives it (inf / inf
    # would be NaN).
    scaled = largest * torch.linalg.vector_norm(norms / largest.clamp_min(_TINY_NORM))
    l2 = torch.where((largest > 0) & torch.isfinite(largest), scaled, largest)
    return torch.stack([nan_count, inf_count, low, high, total.to(acc), l2, checksum.to(acc)]).to(acc)


def _position_weight_range(start, stop, multiplier, index_buf, out):
    """_position_weights(length, ...)[start:stop] without the whole vector: the same values, the
    same operations, written into ``out[:stop - start]`` (``index_buf``: int64 scratch)."""
    count = stop - start
    index = torch.arange(start + 1, stop + 1, dtype=torch.int64, out=index_buf[:count])
    torch.bitwise_and(index.mul_(multiplier), _TWO_32 - 1, out=index)
    return out[:count].copy_(index).div_(_TWO_32)


# The smallest divisor _torch_statistics_blocked scales its blocks' norms by (never 0).
_TINY_NORM = 1e-300



# --------------------------------------------------------------------------- fused statistics
#
# One pass over each captured tensor instead of _torch_statistics' fourteen. Compiled kernels,
# their compile counts and the keys that failed live in _KERNELS, one dict per process (the
# test-suite shares one across its many module copies so that each kernel compiles once).
_KERNELS = {}
# Compilations a per-dtype Inductor function may need: one graph, sizes unbacked (see
# _inductor_statistics). More means a guard we did not foresee is recompiling on every shape,
# which would end at dynamo's recompile limit and its silent eager fallback; we stop first.
_INDUCTOR_MAX_COMPILES = 2
# Dtypes the fused kernels read directly; integers and bools are widened to float64 first.
_FUSED_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_TRITON_DEVICES = ("cuda", "npu")


def _stats_path(tensor):
    """Which path computes ``tensor``'s statistics: "triton", "native", "inductor" or "torch".

    DUMP_PROBE_KERNEL=torch, meta tensors (shape only), tensors traced by an outer
    torch.compile, dtypes outside the fused kernels' set and any key that failed before get
    "torch". Otherwise cuda/npu get "triton" where Triton imports (triton-ascend on npu), and
    cpu gets "native" where the native library is found (_native), else "torch" under "auto"
    and "inductor" under "fused" where a C++ compiler is on PATH; "fused" that cannot run warns
    once.
    """
    kernel = _config.kernel
    if kernel == "torch":
        return "torch"
    if _compiling():
        return "torch"  # inside an outer torch.compile the eager ops are what gets traced
    device = tensor.device.type
    # Every capture asks; the answer depends on the device type and dtype alone until a key
    # fails (_fused_failed clears this) or the configuration changes (_reset_for_tests).
    memo = _KERNELS.setdefault(("path", kernel), {})
    key = (device, tensor.dtype)
    path = memo.get(key)
    if path is None:
        path = memo[key] = _choose_stats_path(kernel, device, tensor)
    return path


def _forget_paths():
    """Drops _stats_path's memo (a key failed, or the configuration changed)."""
    for key in [k for k in _KERNELS if isinstance(k, tuple) and k[0] == "path"]:
        del _KERNELS[key]


def _choose_stats_path(kernel, device, tensor):
    """_stats_path's decision for one device type and dtype (warning once when "fused" cannot)."""
    if device == "meta":
        return "torch"
    if not (tensor.dtype in _FUSED_FLOATS or tensor.dtype == torch.bool or not tensor.is_floating_point()):
        return "torch"  # float8 and other narrow floats: the eager ops decide (or give null stats)
    if device in _TRITON_DEVICES:
        path, why = "triton", _triton_unusable(device)
    elif device == "cpu" and tensor.dtype in _NATIVE_DTYPES and _native()[0] is not None:
        path, why = "native", None
    elif device == "cpu" and kernel == "auto":
        # Not Inductor: the probe captures one window per process, and compiling costs 4-19 s
        # per dtype (benches/README.md) against about 0.1 s for a whole window of eager ops.
        # It pays off only over thousands of captures in one process, so it is opted into.
        return "torch"
    elif device == "cpu":
        path, why = "inductor", _inductor_unusable()
    else:
        path, why = None, "no fused kernel for %s tensors" % device
    if why is None:
        if _KERNELS.get(("failed", _fused_key(path, tensor))) is not None:
            return "torch"  # _fused_failed said so when it failed
        return path
    if kernel == "fused":
        _warn("DUMP_PROBE_KERNEL=fused: %s; %s statistics use the torch ops" % (why, device),
              key="kernel:%s:%s" % (device, why))
    return "torch"


# ---- cpu: the native probe's statistics (libdump_probe.so's dp_summarize)
#
# On CPU the tensor's memory is the host's: the native library's one pass over it (vectorized,
# float64 lanes, src/probe_ffi/src/stats.rs) costs a few microseconds of call and about what a
# read of the bytes costs, with no compile. Found at $DUMP_PROBE_LIB, else beside this file
# (`dumpview probe install DIR` copies it there when it is beside dumpview).
_NATIVE_DTYPES = {
    torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3, torch.int8: 6,
    torch.int16: 7, torch.int32: 8, torch.int64: 9, torch.uint8: 10, torch.bool: 11,
}


class _DpTensor(ctypes.Structure):
    """assets/dump_probe.h's dp_tensor."""

    _fields_ = [
        ("struct_size", ctypes.c_uint32), ("data", ctypes.c_void_p), ("storage_bytes", ctypes.c_uint64),
        ("storage_id", ctypes.c_uint64), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
        ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("storage_offset", ctypes.c_int64), ("device_type", ctypes.c_int32),
        ("device_index", ctypes.c_int32), ("stream", ctypes.c_void_p), ("shard", ctypes.c_char_p),
    ]


def _native():
    """(dp_summarize, None) from the native library, or (None, why not); looked up once."""
    cached = _KERNELS.get("native")
    if cached is None:
        given = os.environ.get("DUMP_PROBE_LIB")
        # Absolute: ctypes would search the loader's path for a bare name, not this directory.
        path = os.path.abspath(given) if given else os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "libdump_probe.so")
        try:
            if not os.path.isfile(path):
                raise OSError("%s not found" % path)
            library = ctypes.CDLL(path)
            call = library.dp_summarize
            call.argtypes = [ctypes.POINTER(_DpTensor), ctypes.c_void_p, ctypes.c_void_p]
            call.restype = ctypes.c_int
            call._lib_handle = library  # dp_row_stats (token rows) is looked up from it
            cached = (call, None)
        except Exception as exc:  # AttributeError: an older library without dp_summarize
            cached = (None, "no native statistics library (%s)" % exc)
            if given:  # asked for by name: say why it is not used (beside this file: silent)
                _warn("DUMP_PROBE_LIB=%s cannot be used (%s: %s); cpu statistics take another path"
                      % (given, type(exc).__name__, str(exc).splitlines()[0][:160] if str(exc) else ""),
                      key="native-lib")
        _KERNELS["native"] = cached
    return cached


# Records per host block of native statistics (7 float64 each: 14 KiB).
_BLOCK_RECORDS = 256


class _NativeCall(threading.local):
    """One dp_tensor and its shape/stride arrays per thread, filled anew for each call: building
    them per call cost more than a small tensor's statistics (the ABI allows 16 dimensions).

    ``block`` is where capture()'s statistics go: dp_summarize writes a record's seven float64
    into the next seven doubles of a ctypes array, the record keeps (block, offset), and
    finish() reads a whole block's slice as Python floats. A torch tensor per record cost
    more than small tensors' statistics. A full block is left to the records that hold it.
    """

    def __init__(self):
        self.shape = (ctypes.c_int64 * 16)()
        self.strides = (ctypes.c_int64 * 16)()
        self.tensor = _DpTensor()
        self.tensor.struct_size = ctypes.sizeof(_DpTensor)
        self.tensor.shape = self.shape
        self.tensor.strides = self.strides
        self.ref = ctypes.byref(self.tensor)
        self.block = None
        self.block_address = 0
        self.block_used = _BLOCK_RECORDS * 7

    def next_host_slot(self):
        """(block, offset in doubles, address) of seven unused doubles."""
        if self.block_used == _BLOCK_RECORDS * 7:
            self.block = (ctypes.c_double * (_BLOCK_RECORDS * 7))()
            self.block_address = ctypes.addressof(self.block)
            self.block_used = 0
        offset = self.block_used
        self.block_used = offset + 7
        return self.block, offset, self.block_address + 8 * offset


_NATIVE_CALL = _NativeCall()


def _native_statistics(tensor, acc, split=None, host_block=False, layout=None):
    """_statistics of a CPU tensor by dp_summarize, read in place (strides and all); with
    ``host_block``, written into the thread's host block and returned as (block, offset).
    ``layout``: _layout_raw(tensor), whose pointer, dtype, shape and stride are used."""
    call, _ = _native()
    held = _NATIVE_CALL
    t = held.tensor
    if layout is None:
        data_ptr, dtype, shape, stride = tensor.data_ptr(), tensor.dtype, tensor.shape, tensor.stride()
    else:
        _, dtype, shape, stride, _, _, _, _, data_ptr, _ = layout
    ndim = len(shape)
    t.data = data_ptr
    t.dtype = _NATIVE_DTYPES[dtype]
    t.ndim = ndim
    held.shape[:ndim] = shape
    held.strides[:ndim] = stride
    where = None
    if split is not None:
        where = (ctypes.c_int64 * 6)(split.dim, split.full, split.offset, int(split.zigzag), split.rank, split.size)
    # dp_summarize writes the seven float64 statistics straight into the block or the vector:
    # torch.empty costs a microsecond, torch.tensor(list) twenty.
    if host_block:
        block, offset, address = held.next_host_slot()
    else:
        out = torch.empty(7, dtype=torch.float64)
        address = out.data_ptr()
    status = call(held.ref, where, address)
    if status != 0:
        raise RuntimeError("dp_summarize returned status %d" % status)
    if host_block:
        return block, offset
    return out if acc == torch.float64 else out.to(acc)


def _compiling():
    try:
        return bool(torch.compiler.is_compiling())
    except Exception:
        return False


def _fused_key(path, tensor):
    """The unit that compiles and fails together: one device type and input dtype."""
    return (path, tensor.device.type, tensor.dtype if tensor.dtype in _FUSED_FLOATS else torch.float64)


def _fused_failed(key, exc):
    """Remember that ``key`` cannot run (it is not tried again) and say so once."""
    why = "the %s kernel failed (%s: %s)" % (key[0], type(exc).__name__, str(exc).splitlines()[0][:160] if str(exc) else "")
    _KERNELS[("failed", key)] = why
    _forget_paths()  # this key's path is now "torch"
    _warn("%s for %s %s tensors; they use the torch ops from now on" % (why, key[1], _dtype_name(key[2])),
          key="fused-failed:%s" % (key,))


def _note_compile(key, seconds):
    """One stderr line per compiled kernel: the first-call cost, apart from every later call."""
    _KERNELS.setdefault("compile_s", {})[key] = seconds
    try:
        sys.stderr.write("dump_probe: compiled the fused %s statistics for %s %s tensors in %.1f s "
                         "(first call only)\n" % (key[0], key[1], _dtype_name(key[2]), seconds))
    except Exception:
        pass


def compile_seconds():
    """{(path, device type, dtype): seconds} spent compiling fused kernels in this process."""
    return dict(_KERNELS.get("compile_s", {}))


# ---- cpu: torch.compile (Inductor's C++ backend)


def _inductor_unusable():
    """None when torch.compile can build C++ kernels here, else why not."""
    cached = _KERNELS.get("inductor_unusable", False)
    if cached is not False:
        return cached
    why = None
    if not hasattr(torch, "compile"):
        why = "this torch has no torch.compile"
    else:
        import shutil

        compilers = [os.environ.get("CXX", "")] + ["g++", "c++", "clang++"]
        if not any(c and shutil.which(c) for c in compilers):
            why = "no C++ compiler on PATH (g++, c++, clang++ or $CXX) for torch.compile"
    _KERNELS["inductor_unusable"] = why
    return why


def _fused_body(x, u, v):
    """All seven statistics of a [rows, cols] tensor in one Inductor loop (traced, never run eagerly).

    Floating inputs are compared and masked in float32 (float64 for float64), and every
    reduction accumulates in float64, so float32 squares cannot overflow and counts are exact;
    float64 squares that overflow (|x| > 1e154) are rescued by a sum of squares scaled by 2**-600.
    """
    red = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(red)
    nan = xf != xf
    finite = xf.abs() < _INF
    values = torch.where(finite, xf, 0.0)
    wide = values.to(torch.float64)
    squares = (wide * wide).sum()
    l2 = squares.sqrt()
    if red == torch.float64:  # decided while tracing: only float64 squares can overflow float64
        scaled = wide * _L2_WIDE_SCALE
        l2 = torch.where(torch.isinf(squares), (scaled * scaled).sum().sqrt() / _L2_WIDE_SCALE, l2)
    return torch.stack([
        nan.sum(dtype=torch.float64),
        torch.logical_not(finite | nan).sum(dtype=torch.float64),
        torch.where(finite, xf, _INF).amin().to(torch.float64),
        torch.where(finite, xf, -_INF).amax().to(torch.float64),
        wide.sum(),
        l2,
        (values * u.view(-1, 1) * v.view(1, -1)).sum(dtype=torch.float64),
    ])


def _counting_backend(key):
    """Inductor, counting the graphs it compiles for ``key`` (a recompile is a bug, see above)."""

    def backend(graph, example_inputs):
        from torch._inductor.compile_fx import compile_fx

        _KERNELS[("compiles", key)] = _KERNELS.get(("compiles", key), 0) + 1
        return compile_fx(graph, example_inputs)

    return backend


def _inductor_kernel(key):
    """The compiled _fused_body for one input dtype: its own code object, so its own dynamo cache."""
    fn = _KERNELS.get(key)
    if fn is None:
        import types

        code = _fused_body.__code__.replace(co_name="_fused_stats_" + _dtype_name(key[2]))
        body = types.FunctionType(code, _fused_body.__globals__, code.co_name)
        fn = torch.compile(body, dynamic=True, fullgraph=True, backend=_counting_backend(key))
        _KERNELS[key] = fn
    return fn


def _plain_alias(x):
    """A tensor over ``x``'s memory that is not a view, made under inference mode.

    dynamo guards a view's base sizes too, which would specialise (and recompile) on every
    base shape, and guards each input's dispatch keys, which differ between tensors made in and
    out of inference mode; these aliases carry only their own sizes and always the same keys.
    """
    return x.new_empty(0).set_(x.untyped_storage(), x.storage_offset(), x.size(), x.stride())


def _weights_alias(weights):
    """_plain_alias of a weight vector, marked unbacked, kept while the vector is cached."""
    from torch._dynamo.decorators import mark_unbacked

    aliases = _KERNELS.setdefault("aliases", {})
    entry = aliases.get(id(weights))
    if entry is not None and entry[0] is weights:
        return entry[1]
    alias = _plain_alias(weights)
    mark_unbacked(alias, 0)
    # Bounded like the weights cache, and only for vectors it would keep: holding a vector
    # pins its id (no reuse by another), so an unbounded table would pin every long one.
    if len(aliases) < _WEIGHTS_CACHE_MAX and weights.numel() <= _WEIGHTS_CACHE_LENGTH:
        aliases[id(weights)] = (weights, alias)
    return alias


def _inductor_statistics(tensor, acc, split):
    """_statistics on cpu through the compiled per-dtype kernel (float64 results, cast to ``acc``).

    The tensor goes in contiguous as [rows, cols] with both sizes (and the weights' lengths)
    marked unbacked: dynamo then compiles one graph for every shape, 1-sized dimensions
    included, instead of specialising and recompiling. Integers and bools are widened to float64
    first (one eager pass), so four functions cover every dtype.
    """
    key = _fused_key("inductor", tensor)
    n = tensor.numel()
    cols = tensor.shape[-1] if tensor.dim() > 0 else 1
    x = tensor.reshape(n // cols, cols)
    if key[2] != tensor.dtype:
        x = x.to(torch.float64)
    red = torch.float64 if key[2] == torch.float64 else torch.float32
    if split is None:
        u = _position_weights(x.shape[0], _ROW_MUL, red, x.device)
        v = _position_weights(cols, _COL_MUL, red, x.device)
    else:
        u, v = _shard_weights(list(tensor.shape), split, red, x.device)
    from torch._dynamo.decorators import mark_unbacked

    fn = _inductor_kernel(key)
    first = ("compiles", key) not in _KERNELS
    start = time.perf_counter()
    with torch.inference_mode():  # one mode for every alias and the call (see _plain_alias)
        x = _plain_alias(x.contiguous())
        mark_unbacked(x, 0)
        mark_unbacked(x, 1)
        stats = fn(x, _weights_alias(u), _weights_alias(v))
    if first:
        _note_compile(key, time.perf_counter() - start)
    if _KERNELS.get(("compiles", key), 0) > _INDUCTOR_MAX_COMPILES:
        raise RuntimeError("torch.compile recompiled it %d times" % _KERNELS[("compiles", key)])
    return stats if acc == torch.float64 else stats.to(acc)


# ---- cuda / npu: a Triton kernel


def _triton_unusable(device):
    """None when Triton kernels can be launched on ``device`` tensors, else why not."""
    cached = _KERNELS.get(("triton_unusable", device), False)
    if cached is not False:
        return cached
    why = None
    try:
        _triton_kernels()
    except Exception as exc:
        why = "Triton is not importable (%s: %s)" % (type(exc).__name__, exc)
    if why is None and device == "npu":
        try:
            import importlib.util

            if importlib.util.find_spec("triton.backends.ascend") is None:
                why = "the installed Triton has no Ascend backend (triton-ascend)"
        except Exception as exc:
            why = "the installed Triton has no Ascend backend (%s)" % exc
    _KERNELS[("triton_unusable", device)] = why
    return why


# Partial results per program of the first pass: sum, sum of squares, squares scaled for
# overflow, checksum, min, max (floats) and nan, inf counts (int64). A slot holds room for
# _TRITON_PROGRAMS programs, so the same kernels replay in a CUDA graph with no allocation.
_TRITON_PROGRAMS = 256
_TRITON_BLOCK = 1024
_PARTIAL_FLOATS = 6


def _triton_kernels():
    """(first pass, second pass), defined on first use (TRITON_INTERPRET is read here)."""
    # Triton resolves the names a kernel uses from its module's globals (closures are not
    # seen), so the modules and helpers are bound there, on first use only: the probe itself
    # must import without Triton.
    global triton, tl, _triton_kahan_add, _triton_kahan_total, _triton_global_index
    kernels = _KERNELS.get("triton")
    if kernels is not None:
        return kernels
    import triton
    import triton.language as tl

    @triton.jit
    def _triton_kahan_add(total, comp, value):
        y = value - comp
        t = total + y
        return t, (t - total) - y

    @triton.jit
    def _triton_kahan_total(total, comp):
        # An overflowed lane's compensation is inf - inf = nan: its total is the plain inf.
        return tl.sum(tl.where(tl.abs(total) < float("inf"), total - comp, total), axis=0)

    @triton.jit
    def _triton_global_index(index, cut, off1, off2):
        return index + tl.where(index < cut, off1, off2)

    @triton.jit
    def stats_partial(x_ptr, part_f, part_i, n, cols, stride_r, stride_c,
                      split_len, inner, full, cut, off1, off2, per,
                      SPLIT: tl.constexpr, WIDE: tl.constexpr, BLOCK: tl.constexpr, SCALE: tl.constexpr):
        # One program reduces elements [pid * per, (pid + 1) * per) of the logical [rows, cols]
        # view, BLOCK lanes at a time, each lane keeping its own (compensated) accumulators.
        pid = tl.program_id(0)
        acc_t = tl.float64 if WIDE else tl.float32
        lanes = tl.arange(0, BLOCK).to(tl.int64)
        lo = pid.to(tl.int64) * per
        hi = tl.minimum(lo + per, n)
        s = tl.zeros([BLOCK], acc_t)
        s_c = tl.zeros([BLOCK], acc_t)
        q = tl.zeros([BLOCK], acc_t)
        q_c = tl.zeros([BLOCK], acc_t)
        qs = tl.zeros([BLOCK], acc_t)
        qs_c = tl.zeros([BLOCK], acc_t)
        k = tl.zeros([BLOCK], acc_t)
        k_c = tl.zeros([BLOCK], acc_t)
        low = tl.full([BLOCK], float("inf"), acc_t)
        high = tl.full([BLOCK], float("-inf"), acc_t)
        nans = tl.zeros([BLOCK], tl.int64)
        infs = tl.zeros([BLOCK], tl.int64)
        for start in range(lo, hi, BLOCK):
            i = start + lanes
            inside = i < hi
            r = i // cols
            c = i - r * cols
            x = tl.load(x_ptr + r * stride_r + c * stride_c, mask=inside, other=0).to(acc_t)
            is_nan = (x != x) & inside
            finite = (tl.abs(x) < float("inf")) & inside
            nans += is_nan.to(tl.int64)
            infs += (inside & ~finite & ~is_nan).to(tl.int64)
            v = tl.where(finite, x, 0.0)
            low = tl.minimum(low, tl.where(finite, x, float("inf")))
            high = tl.maximum(high, tl.where(finite, x, float("-inf")))
            # Global coordinates of a sliced capture (docs/manifest.md, "Parallel layouts").
            if SPLIT == 1:
                c = _triton_global_index(c, cut, off1, off2)
            if SPLIT == 2:
                a = r // (split_len * inner)
                rest = r - a * (split_len * inner)
                along = rest // inner
                r = a * (full * inner) + _triton_global_index(along, cut, off1, off2) * inner + (rest - along * inner)
            u = (((r + 1) * 2654435761) & 0xFFFFFFFF).to(acc_t) / 4294967296.0
            w = (((c + 1) * 2246822519) & 0xFFFFFFFF).to(acc_t) / 4294967296.0
            if WIDE:
                s += v
                q += v * v
                qs += (v * SCALE) * (v * SCALE)
                k += v * u * w
            else:  # float32 only (npu): Kahan-compensated lanes
                s, s_c = _triton_kahan_add(s, s_c, v)
                q, q_c = _triton_kahan_add(q, q_c, v * v)
                qs, qs_c = _triton_kahan_add(qs, qs_c, (v * SCALE) * (v * SCALE))
                k, k_c = _triton_kahan_add(k, k_c, v * u * w)
        base = part_f + pid * 6
        tl.store(base + 0, _triton_kahan_total(s, s_c))
        tl.store(base + 1, _triton_kahan_total(q, q_c))
        tl.store(base + 2, _triton_kahan_total(qs, qs_c))
        tl.store(base + 3, _triton_kahan_total(k, k_c))
        tl.store(base + 4, tl.min(low, axis=0))
        tl.store(base + 5, tl.max(high, axis=0))
        tl.store(part_i + pid * 2 + 0, tl.sum(nans, axis=0))
        tl.store(part_i + pid * 2 + 1, tl.sum(infs, axis=0))

    @triton.jit
    def stats_final(part_f, part_i, out, programs, PROGRAMS: tl.constexpr, SCALE: tl.constexpr):
        # The partials in a fixed order, so equal inputs give bit-equal statistics run after run.
        p = tl.arange(0, PROGRAMS)
        used = p < programs
        total = tl.sum(tl.load(part_f + p * 6 + 0, mask=used, other=0.0), axis=0)
        squares = tl.sum(tl.load(part_f + p * 6 + 1, mask=used, other=0.0), axis=0)
        scaled = tl.sum(tl.load(part_f + p * 6 + 2, mask=used, other=0.0), axis=0)
        checksum = tl.sum(tl.load(part_f + p * 6 + 3, mask=used, other=0.0), axis=0)
        low = tl.min(tl.load(part_f + p * 6 + 4, mask=used, other=float("inf")), axis=0)
        high = tl.max(tl.load(part_f + p * 6 + 5, mask=used, other=float("-inf")), axis=0)
        nans = tl.sum(tl.load(part_i + p * 2 + 0, mask=used, other=0), axis=0)
        infs = tl.sum(tl.load(part_i + p * 2 + 1, mask=used, other=0), axis=0)
        l2 = tl.sqrt(squares)
        l2 = tl.where(l2 < float("inf"), l2, tl.sqrt(scaled) / SCALE)
        ty = out.dtype.element_ty
        tl.store(out + 0, nans.to(ty))
        tl.store(out + 1, infs.to(ty))
        tl.store(out + 2, low.to(ty))
        tl.store(out + 3, high.to(ty))
        tl.store(out + 4, total.to(ty))
        tl.store(out + 5, l2.to(ty))
        tl.store(out + 6, checksum.to(ty))

    kernels = (stats_partial, stats_final)
    _KERNELS["triton"] = kernels
    return kernels


def _triton_scratch(device, wide):
    """Partials for _TRITON_PROGRAMS programs: (floats [P * 6] of the accumulator dtype, int64 [P * 2])."""
    dtype = torch.float64 if wide else torch.float32
    return (torch.empty(_TRITON_PROGRAMS * _PARTIAL_FLOATS, dtype=dtype, device=device),
            torch.empty(_TRITON_PROGRAMS * 2, dtype=torch.int64, device=device))


def _split_args(tensor, split):
    """(SPLIT, split_len, inner, full, cut, off1, off2) for the kernel's global coordinates.

    SPLIT 0: no split; 1: along the last dimension (columns move); 2: along a leading one (rows
    move: row r = a * (split_len * inner) + l * inner + b maps to a * (full * inner) + g(l) *
    inner + b). g(l) = l + (off1 if l < cut else off2) is _global_index as arithmetic.
    """
    if split is None:
        return 0, 1, 1, 1, 0, 0, 0
    local = int(tensor.shape[split.dim])
    if split.zigzag:
        c = local // 2
        cut, off1, off2 = c, split.rank * c, (2 * split.size - 1 - split.rank) * c - c
    else:
        cut, off1, off2 = local, split.offset, 0
    inner = 1
    for size in tensor.shape[split.dim + 1: -1]:
        inner *= int(size)
    mode = 1 if split.dim == tensor.dim() - 1 else 2
    return mode, local, inner, int(split.full), cut, off1, off2


def _triton_statistics(tensor, acc, split, out=None, scratch=None):
    """_statistics by the two Triton kernels; ``out`` [7] of ``acc`` is allocated when not given.

    Strided views are read in place when they flatten to [rows, cols] (torch's reshape gives a
    view); others are copied contiguous first. No host read, no sync: sizes come from the shape.
    """
    partial, final = _triton_kernels()
    n = tensor.numel()
    cols = tensor.shape[-1] if tensor.dim() > 0 else 1
    x = tensor.reshape(n // cols, cols)
    if x.dtype == torch.bool:
        x = x.view(torch.uint8)
    wide = acc == torch.float64
    key = _fused_key("triton", tensor)
    if out is None:
        out = torch.empty(len(_DEVICE_STATS), dtype=acc, device=tensor.device)
    if scratch is None or scratch[0].dtype != (torch.float64 if wide else torch.float32):
        scratch = _triton_scratch(tensor.device, wide)
    programs = min(_TRITON_PROGRAMS, -(-n // _TRITON_BLOCK))
    per = -(-(-(-n // programs)) // _TRITON_BLOCK) * _TRITON_BLOCK
    mode, split_len, inner, full, cut, off1, off2 = _split_args(tensor, split)
    scale = 2.0 ** -600 if wide else _L2_SCALE
    first = ("compiled", key) not in _KERNELS
    start = time.perf_counter()
    with _device_guard(tensor.device):
        partial[(programs,)](x, scratch[0], scratch[1], n, cols, x.stride(0), x.stride(1),
                             split_len, inner, full, cut, off1, off2, per,
                             SPLIT=mode, WIDE=wide, BLOCK=_TRITON_BLOCK, SCALE=scale)
        final[(1,)](scratch[0], scratch[1], out, programs, PROGRAMS=_TRITON_PROGRAMS, SCALE=scale)
    if first:
        _KERNELS[("compiled", key)] = True
        _note_compile(key, time.perf_counter() - start)
    return out


def _device_guard(device):
    """Triton launches on the current device: make it the tensor's for the launch."""
    module = getattr(torch, device.type, None)
    if device.index is not None and module is not None and hasattr(module, "device"):
        return module.device(device)
    import contextlib

    return contextlib.nullcontext()


_INF = float("inf")
_L2_SCALE = 2.0 ** -64
# Below this largest magnitude float32 squares lose bits to underflow (2**-120 is near the
# smallest normal float32, 2**-126); _torch_statistics then scales by _L2_UP: the largest
# magnitude lands in [2**-49, 2**40), its square far from both ends, and the sum of up to
# 2**24 squares stays finite.
_L2_TINY = 2.0 ** -60
_L2_UP = 2.0 ** 100
_L2_WIDE_SCALE = 2.0 ** -600  # float64 squares overflow above |x| ~ 1.3e154
_ROW_MUL = 2654435761  # Knuth's multiplicative hash constant, floor(2**32 / golden ratio)
_COL_MUL = 2246822519  # the second prime of xxHash32
_weights_cache = {}
_WEIGHTS_CACHE_MAX = 512
_WEIGHTS_CACHE_LENGTH = 1 << 16


def _position_weights(length, multiplier, dtype, device):
    """[length] weights (((k + 1) * multiplier) mod 2**32) / 2**32, cached per (length, dtype, device).

    Cached tensors are never freed, so graph slots may keep using them.
    """
    key = (length, multiplier, dtype, device)
    weights = _weights_cache.get(key)
    if weights is None:
        index = torch.arange(1, length + 1, dtype=torch.int64, device=device)
        weights = torch.bitwise_and(index * multiplier, _TWO_32 - 1).to(dtype) / _TWO_32
        # Only short vectors are kept: a 1-D tensor of 50M elements must not leave 200 MB behind.
        if len(_weights_cache) < _WEIGHTS_CACHE_MAX and length <= _WEIGHTS_CACHE_LENGTH:
            _weights_cache[key] = weights
    return weights


def _bounded_rows(tensor):
    if _config.rows and tensor.dim() > 0 and tensor.shape[0] > _config.rows:
        return tensor[: _config.rows]
    return tensor


_DTYPE_NAMES = {}


def _dtype_name(dtype):
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return name


def _layout(tensor):
    """Logical and physical layout of ``tensor`` as the manifest's fields: host metadata only,
    no sync."""
    return _layout_fields(_layout_raw(tensor))


def _layout_raw(tensor):
    """What _layout_fields needs of ``tensor``, read now (the storage's id is its identity at
    this moment) and formatted later: (device, dtype, shape, stride, storage_offset,
    storage_ptr, storage_id, storage_nbytes, data_ptr, device_format). The element size, the
    element count and contiguity follow from dtype, shape and stride (_layout_fields)."""
    device = tensor.device
    try:
        storage = tensor.untyped_storage()
        storage_ptr = storage.data_ptr()
        storage_nbytes = storage.nbytes()
        storage_id = _storage_id(storage, storage_ptr, device)
    except Exception:  # e.g. tensors without storage (some wrapper subclasses)
        storage_ptr, storage_nbytes, storage_id = None, None, None
    try:
        data_ptr = tensor.data_ptr()
    except Exception:
        data_ptr = None
    return (device, tensor.dtype, tensor.shape, tensor.stride(), tensor.storage_offset(), storage_ptr, storage_id,
            storage_nbytes, data_ptr, _device_format(tensor))


def _layout_fields(raw):
    """_layout_raw's tuple as the manifest's layout fields, in its order."""
    device, dtype, shape, stride, offset, storage_ptr, storage_id, storage_nbytes, data_ptr, device_format = raw
    numel = 1
    for size in shape:
        numel *= size
    return {
        "dtype": _dtype_name(dtype),
        "shape": list(shape),
        "stride": list(stride),
        "storage_offset": int(offset),
        "element_size": _element_size(dtype),
        "numel": int(numel),
        "storage_ptr": None if storage_ptr is None else int(storage_ptr),
        "storage_id": storage_id,
        "storage_nbytes": None if storage_nbytes is None else int(storage_nbytes),
        "data_ptr": None if data_ptr is None else int(data_ptr),
        "device": str(device),
        "device_format": device_format,
        "is_contiguous": _is_contiguous(shape, stride, numel),
    }


_ELEMENT_SIZES = {}


def _element_size(dtype):
    """Bytes per element of ``dtype`` (asked of torch once per dtype)."""
    size = _ELEMENT_SIZES.get(dtype)
    if size is None:
        size = _ELEMENT_SIZES[dtype] = int(torch.empty((), dtype=dtype, device="meta").element_size())
    return size


def _is_contiguous(shape, stride, numel):
    """torch's is_contiguous() (default memory format) from shape and stride: row-major
    strides, dimensions of size 1 aside; an empty tensor is contiguous (c10's
    TensorImpl::compute_contiguous)."""
    if numel == 0:
        return True
    expected = 1
    for size, step in zip(reversed(shape), reversed(stride)):
        if size != 1:
            if step != expected:
                return False
            expected *= size
    return True


def _storage_id(storage, ptr, device):
    """Process-unique id of the live storage object at ``ptr`` (1, 2, ...), or None.

    An allocator hands a freed address to the next allocation, so two stages
    with equal storage_ptr may be different buffers that merely lived one
    after the other.  A weak reference (which does not extend the storage's
    life or change the allocator's behaviour) tells whether the storage seen
    earlier at this address is still the same object.
    """
    key = (device, ptr)
    entry = _state.storages.get(key)
    if entry is not None and entry[0]() is not None:
        # The storage seen before is still alive at this address: the same object, or
        # another storage object over the same memory (from_numpy, DLPack, from_blob):
        # either way the same bytes, so the same id.
        return entry[1]
    try:
        ref = weakref.ref(storage)
    except TypeError:
        _warn("this torch's storages take no weak references; storage_id is null", key="storage_id")
        return None
    storage_id = _state.next_storage_id
    _state.next_storage_id += 1
    _state.storages[key] = (ref, storage_id)
    return storage_id


def _device_format(tensor):
    """torch_npu's internal format id (e.g. 2 ND, 29 FRACTAL_NZ) on npu; else None."""
    if tensor.device.type != "npu":
        return None
    try:
        import torch_npu  # noqa: F401  (only present on Ascend machines)

        return int(torch_npu.get_npu_format(tensor))
    except Exception:
        return None


def _json_float(value):
    """A float as strict JSON: a number when finite, else "nan", "inf" or "-inf"."""
    if value - value == 0.0:  # finite (inf - inf and nan - nan are nan)
        return value
    if value != value:
        return "nan"
    return "inf" if value > 0 else "-inf"


def _host_stats(values, numel):
    """The manifest's stats object (STAT_NAMES, in order) from one read-back _DEVICE_STATS row
    (Python floats)."""
    nan_f, inf_f, low, high, total, l2, checksum = values
    nan_count, inf_count = int(nan_f), int(inf_f)
    finite = numel - nan_count - inf_count
    if finite > 0:
        low, high = _json_float(low), _json_float(high)
        max_abs = _json_float(max(abs(values[2]), abs(values[3])))
        mean = _json_float(total / finite)
    else:
        max_abs = low = high = mean = None
    return {"nan_count": nan_count, "inf_count": inf_count, "finite_count": finite, "max_abs": max_abs,
            "min": low, "max": high, "mean": mean, "l2": _json_float(l2), "pos_checksum": _json_float(checksum)}


def finish():
    """Read everything back (once per device), write the window, close it.

    Returns the manifest path, or None when no window was open or the write
    failed (a warning says why).  Graph slots that were written by
    capture_graph() are read here too, so call finish() after the replay.
    """
    global _active, _counting
    if not _active:
        return None
    _active = False
    if _counting:  # a call that was not captured, and captured nothing to count its rows by
        _counting = False
        return None
    window = _state.window
    _state.window = None
    try:
        return _write_window(window)
    except Exception as exc:
        _warn("finish failed (%s: %s); nothing written for this window" % (type(exc).__name__, exc), key="finish")
        _state.failed.append((window.get("label"), window.get("dir", (None,))[0], exc))
        return None


def _read_back(rows, warnings=None):
    """Host lists of floats from 1-D device stat vectors and native host blocks' (block,
    offset) pairs (None stays None); one transfer per device. A row the host cannot read is
    None, said once on stderr and in ``warnings`` (the window's list) when given."""
    by_device = {}
    result = [None] * len(rows)
    for index, row in enumerate(rows):
        if type(row) is tuple:
            block, offset = row
            result[index] = block[offset:offset + 7]
        elif row is not None:
            by_device.setdefault((row.device, row.dtype), []).append(index)
    for (device, _dtype), indices in by_device.items():
        if device.type == "meta":
            _warn("statistics of meta tensors have no values; recorded as null", key="meta")
            continue
        try:
            host = torch.stack([rows[i] for i in indices]).to("cpu", torch.float64).tolist()
        except Exception as exc:  # one row the host cannot read (a tensor subclass's) costs that row only
            host = []
            for i in indices:
                try:
                    host.append(rows[i].to("cpu", torch.float64).tolist())
                except Exception:
                    host.append(None)
            message = "statistics of %d of %d records could not be read back (%s: %s); recorded as null" % (
                host.count(None), len(indices), type(exc).__name__, str(exc).splitlines()[0][:120])
            if warnings is not None:
                warnings.append(message)
            _warn(message, key="readback")
        for i, values in zip(indices, host):
            result[i] = values
    return result


def _write_window(window):
    config = _config
    directory, attempt = _window_dir(window)
    slots = [slot for slot in sorted(_state.slots.values(), key=lambda s: s.index) if slot.meta is not None]
    stat_rows = [r.stats for r in _state.records]
    stat_rows += [s.stats if s.meta["numel"] and not s.meta["dtype"].startswith("complex") else None for s in slots]
    # The local checksums' rows (capture(shard=...)) in the same transfer.
    local_at = [index for index, r in enumerate(_state.records) if r.local is not None]
    local_from = len(stat_rows)
    stat_rows += [_state.records[index].local for index in local_at]
    # The input sets' tensor arguments are read back in the same transfer as the records.
    input_stats = [pair for entry in _state.input_sets for pair in entry.get("stats", ())]
    stat_rows += [row for _desc, row in input_stats]
    host_stats = _read_back(stat_rows, window.get("warnings"))
    local_values = dict(zip(local_at, host_stats[local_from:local_from + len(local_at)]))
    received = _received_to_host(_state.records)
    for (desc, _row), values in zip(input_stats, host_stats[len(stat_rows) - len(input_stats):]):
        desc["stats"] = None if values is None else _host_stats(values, desc["numel"])

    records = []
    for index, (record, stats) in enumerate(zip(_state.records, host_stats)):
        # In the manifest's order (_RECORD_ORDER, then the tail) without a second dict.
        out = record.head()
        out["stats"] = None if stats is None else _host_stats(stats, out["numel"])
        extra = record.extra
        if record.saved is not None:
            out["tensor_file"] = _save_tensor_or_warn(directory, "%s#%d" % (record.stage, record.occurrence), record.saved)
        else:
            out["tensor_file"] = None
        if out["tensor_file"] is not None:
            out["rows_kept"], out["rows_total"] = extra["rows_kept"], extra["rows_total"]
            out["truncated"] = out["rows_kept"] < out["rows_total"]
        if extra:
            for key in _RECORD_TAIL:
                if key in extra:
                    out[key] = extra[key]
            if "local_checksum" in out:
                local = local_values.get(index)
                out["local_checksum"] = None if out["stats"] is None or local is None else _json_float(local[6])
            if isinstance(out.get("received"), torch.Tensor):
                if index in received:
                    out["received"] = received[index]
                else:
                    del out["received"]
        records.append(out)
    slot_rows = []
    for slot, stats in zip(slots, host_stats[len(_state.records):len(_state.records) + len(slots)]):
        if stats is not None and stats[0] != stats[0]:  # still the NaN that arm() wrote
            _warn("graph slot %r was not written by a replay in this window; not reported" % slot.stage)
            continue
        meta = dict(slot.meta)
        meta.update(stage=slot.stage, occurrence=1, seq=len(records), mode="graph")
        if slot.rows is not None and slot.rows.fits:
            try:
                token_rows = _slot_token_rows(slot, window.get("row_map"), window["label"])
            except Exception as exc:  # the record stands without its rows
                _warn("graph slot %r: token rows not computed (%s: %s)"
                      % (slot.stage, type(exc).__name__, str(exc).splitlines()[0][:120]), key="slot-rows:%s" % slot.stage)
                token_rows = None
            if token_rows is not None:
                slot_rows.append(_SlotRecord(meta["seq"], token_rows))
        meta["stats"] = None if stats is None else _host_stats(stats, meta["numel"])
        meta["tensor_file"] = None
        if slot.tensor is not None:
            meta["tensor_file"] = _save_tensor_or_warn(directory, "%s#1" % slot.stage, slot.tensor)
        records.append(_ordered_record(meta))

    def rows_lost(exc):  # the window's records stand without their token rows
        _warn("token rows not written (%s: %s); the window is written without them"
              % (type(exc).__name__, str(exc).splitlines()[0][:160]), key="rowswrite")

    try:
        token_rows, sidecar = _write_token_rows(directory, window, _state.records + slot_rows)
    except Exception as exc:
        rows_lost(exc)
        token_rows = sidecar = None

    # Published last: the manifest names only input-set files already written and fsynced.
    input_sets = _input_set_entries(window)

    device_types = sorted({r["device"].split(":")[0] for r in records})
    manifest = {
        "format": "dumpview.manifest",
        "schema_version": SCHEMA_VERSION,
        "probe": PROBE_VERSION,
        "label": window["label"],
        "match": window["match"],
        "occurrence": window["occurrence"],
        "attempt": attempt,
        "rank": window["rank"],
        "world_size": window["world_size"],
        "metadata": _metadata_to_host(window["metadata"]),
        "stat_names": list(STAT_NAMES),
        "stats_dtype": _dtype_name(_stats_dtype(torch.device(device_types[0]))) if device_types else "float64",
        "tensor_rows": config.rows,
        "tensor_pattern": config.tensor_pattern,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "torch_version": torch.__version__,
        "armed_unix_s": window["armed_unix_s"],
        "finished_unix_s": time.time(),
        "run": window.get("run") or {"argv": [], "cwd": "", "executable": None, "env": {}},
    }
    if window.get("warnings"):
        manifest["warnings"] = list(window["warnings"])
    manifest["records"] = records
    manifest["input_sets"] = input_sets
    if token_rows is not None:
        manifest["token_rows"] = token_rows
    path = os.path.join(directory, "manifest.json")
    text = _manifest_text(manifest)  # made while the sidecar is written and fsynced
    failed = sidecar.wait() if sidecar is not None else None
    if failed is not None:
        rows_lost(failed)
        manifest.pop("token_rows", None)
        token_rows = None
        text = _manifest_text(manifest)
    _atomic_write_text(path, text)
    _state.written.append((path, len(records), token_rows["bytes"] if token_rows else 0))
    return path


def _write_token_rows(directory, window, records):
    """Starts writing the window's per-row statistics to ROWS_FILE (atomically, one transfer
    per device, on a _BackgroundWrite) and returns the manifest's ``token_rows`` object and
    that write (None where there are no rows); (None, None) when the forward has no row map.
    docs/manifest.md, "Token rows", gives the layout."""
    row_map = window.get("row_map")
    if row_map is None or row_map.count is None:  # no capture told the forward's row count
        return None, None
    if row_map.declared and not row_map.matched and records:
        _warn("arm(%r, rows=...) declares %d rows, but no capture of that forward had %d rows along its token_dims: "
              "its records have no token rows (is a padded or flattened batch declared as its requests alone?)"
              % (window["label"], row_map.count, row_map.count), key="rows-unmatched:%s" % window["label"])
    ids = window["metadata"].get("token_ids")
    if not row_map.declared and len(row_map.entries) == 1 and isinstance(ids, list) and records:
        # A forward from position 0 with fewer ids than rows: a batch padded to a graph's size,
        # most likely (a decode step after a prompt whose ids were given is not warned about).
        if row_map.entries[0][1] == 0 and len(ids) < row_map.count:
            _warn("arm(%r): %d token_ids for a forward of %d rows: its rows are not matched to the ids "
                  "(a padded batch? declare it: arm(label, rows=[(request, first, %d, ids), (None, 0, %d)]))"
                  % (window["label"], len(ids), row_map.count, len(ids), max(row_map.count - len(ids), 0)),
                  key="rows-ids:%s" % window["label"])
    with_rows = [r for r in records if r.rows is not None and r.rows.stats.device.type != "meta"]
    by_device = {}
    for record in with_rows:
        by_device.setdefault(record.rows.stats.device, []).append(record)
    host = {}
    for device, group in by_device.items():
        flat = torch.cat([r.rows.stats.reshape(-1) for r in group]).to("cpu", torch.float32)
        at = 0
        for record in group:
            size = record.rows.stats.numel()
            host[id(record)] = flat[at:at + size]
            at += size
    entries, blocks, first_row = [], [], 0
    for record in with_rows:
        block = host[id(record)]
        count = block.numel() // len(ROW_STAT_NAMES)
        entries.append([record.seq, first_row, count, record.rows.token_dims, record.rows.positions])
        blocks.append(block)
        first_row += count
    data = _float32_bytes(torch.cat(blocks)) if blocks else b""
    sidecar = _BackgroundWrite(os.path.join(directory, ROWS_FILE), data) if data else None
    metadata = _metadata_to_host(window["metadata"])
    return {
        "file": ROWS_FILE if data else None,
        "dtype": "float32",
        "byteorder": "little",
        "stats": list(ROW_STAT_NAMES),
        "map": row_map.manifest(metadata),
        "positions_inferred": row_map.inferred,
        "row_positions": list(_config.row_positions),
        "stage_filter": _config.row_regex.pattern if _config.row_regex is not None else None,
        "rows": first_row,
        "bytes": len(data),
        "records": entries,
    }, sidecar


class _BackgroundWrite(threading.Thread):
    """_atomic_write_bytes of one file on a thread of its own, so that its fsync overlaps
    the manifest's making; ``wait()`` joins it and gives its exception, or None. The manifest
    is written only after, so it still names only files already written and fsynced."""

    def __init__(self, path, data):
        super().__init__(name="dump_probe rows.f32", daemon=True)
        self.path, self.data, self.error = path, data, None
        self.start()

    def run(self):
        try:
            _atomic_write_bytes(self.path, [self.data])
        except Exception as exc:
            self.error = exc

    def wait(self):
        self.join()
        return self.error


def _float32_bytes(values):
    """Little-endian float32 bytes of a 1-D cpu float32 tensor (numpy where torch has it)."""
    try:
        data = values.numpy().astype("<f4", copy=False).tobytes()
    except Exception:  # torch without numpy
        import array

        buffer = array.array("f", values.tolist())
        if sys.byteorder != "little":
            buffer.byteswap()
        data = buffer.tobytes()
    return data


# One encoder for every manifest: json.dumps with options builds a new JSONEncoder per call,
# which was a third of the manifest's formatting time (one call per record).
_JSON = json.JSONEncoder(allow_nan=False, separators=(", ", ": "))


def _manifest_text(manifest):
    """Strict JSON, one top-level field per line and one record per line (greppable, diffable)."""

    dump = _JSON.encode
    lines = []
    for key, value in manifest.items():
        if key in ("records", "input_sets") and value:
            body = ",\n".join("  " + dump(item) for item in value)
            lines.append("%s: [\n%s\n ]" % (dump(key), body))
        else:
            lines.append("%s: %s" % (dump(key), dump(value)))
    return "{\n " + ",\n ".join(lines) + "\n}\n"


class _InputSetWriter:
    """One window's input-set files (``inputs/<stage>#<occurrence>.pt``, each written atomically
    and fsynced), written in capture order on one thread of their own.

    capture_inputs() hands a host payload over at once, so its file is pickled and made durable
    while the model runs on (fsync waits on the disk, about 1.5 ms a file here); a payload on a
    device is handed over in finish(), after finish() itself moved it to the host on the model's
    thread, so no device read ever leaves that thread. Each entry gets ``file`` (its path
    relative to the window directory) or ``error`` (the exception), and drops its payload once
    written. Where no thread can be started (interpreter shutdown) the file is written in
    submit() itself. A file that cannot be written costs its own entry, never the window.
    """

    def __init__(self, directory, inline=False):
        self.directory = directory
        self.queue = None
        self.thread = None
        if inline:
            return
        try:
            import queue

            self.queue = queue.SimpleQueue()
            self.thread = threading.Thread(target=self._run, name="dump_probe-inputs", daemon=True)
            self.thread.start()
        except Exception:
            self.thread = None

    def submit(self, entry, payload):
        self._job(self._write, entry, payload)

    def submit_output(self, entry, link, tensor):
        """Saves one linked output's whole host ``tensor`` beside ``entry``'s set (after it:
        the queue keeps submission order), as ``link["file"]`` or ``link["error"]``."""
        self._job(self._write_output, entry, link, tensor)

    def _job(self, fn, *args):
        if self.thread is not None:
            self.queue.put((fn, args))
        else:
            fn(*args)

    def close(self):
        """Wait until every submitted file is written (or failed)."""
        if self.thread is not None:
            self.queue.put(None)
            self.thread.join()
            self.thread = None

    def abandon(self):
        """Let the thread finish what it holds and end, without waiting (a window re-armed)."""
        if self.thread is not None:
            self.queue.put(None)
            self.thread = None

    def _run(self):
        while True:
            job = self.queue.get()
            if job is None:
                return
            job[0](*job[1])

    def _write(self, entry, payload):
        name = "%s#%d" % (entry["stage"], entry["occurrence"])
        try:
            path = _unique_rel(self.directory, "inputs", name, ".pt")
            os.makedirs(os.path.join(self.directory, "inputs"), exist_ok=True)
            _atomic_torch_save(payload, os.path.join(self.directory, path))
            entry["file"] = path
        except Exception as exc:  # keep the manifest: one lost file must not lose the window
            entry["error"] = exc
        entry["payload"] = None

    def _write_output(self, entry, link, tensor):
        # inputs/<stage>#<N>.outputs/<stage>#<occurrence>.pt beside the set's own file
        try:
            if "file" not in entry:
                raise RuntimeError("its input set was not saved")
            sub = entry["file"][:-len(".pt")] + ".outputs"
            path = _unique_rel(self.directory, sub, "%s#%d" % (link["stage"], link["occurrence"]), ".pt")
            os.makedirs(os.path.join(self.directory, sub), exist_ok=True)
            _atomic_torch_save(tensor, os.path.join(self.directory, path))
            link["file"] = path
        except Exception as exc:
            link["error"] = exc
        link["whole"] = None


def _host_only(payload):
    """True when every tensor of an input-set payload is on the host (its file can be written now)."""
    if isinstance(payload, dict):
        if "__dump_probe_tensor__" in payload:
            return payload["device"] == "cpu"
        return all(_host_only(v) for v in payload.values())
    if isinstance(payload, list):
        return all(_host_only(v) for v in payload)
    return True


def _window_dir(window):
    """(directory, attempt) of the open window, claimed on first use (the first input set, or
    finish()): a window without input sets makes its directory only when it is written."""
    if "dir" not in window:
        window["dir"] = _new_window_dir(_config.directory, window)
    return window["dir"]


def _input_writer(window, inline=False):
    """The open window's _InputSetWriter, started on first use; ``inline``: one that writes in
    submit() itself (DUMP_PROBE_SYNC_INPUTS)."""
    if "writer" not in window:
        window["writer"] = _InputSetWriter(_window_dir(window)[0], inline)
    return window["writer"]


def _input_set_entries(window):
    """The manifest's input_sets of ``window``: device payloads are moved to the host and
    written now, then the linked outputs not yet handed over (after their sets, in the
    writer's order), then every file is waited for; a file not written is a warning, and so
    is a linked output never captured (also in the manifest's ``warnings``)."""
    pending = [e for e in _state.input_sets if "file" not in e and "error" not in e and not e.get("submitted")]
    if pending:
        writer = _input_writer(window)
        for entry in pending:
            try:
                payload = _payload_to_cpu(entry["payload"])
            except Exception as exc:
                entry["error"] = exc
                continue
            entry["submitted"] = True
            writer.submit(entry, payload)
    for entry in _state.input_sets:
        for link in entry.get("links", ()):
            if link["whole"] is None or link.get("submitted"):
                continue
            if not entry.get("submitted"):
                link["whole"] = None  # its set was not saved: neither is the output
                continue
            try:
                whole = _payload_to_cpu(link["whole"])
            except Exception as exc:
                link["error"], link["whole"] = exc, None
                continue
            link["submitted"] = True
            _input_writer(window).submit_output(entry, link, whole)
    if "writer" in window:
        window["writer"].close()
    written = []
    for entry in _state.input_sets:
        name = "%s#%d" % (entry["stage"], entry["occurrence"])
        if "file" not in entry:
            exc = entry.get("error") or RuntimeError("the input-set writer stopped before it")
            _warn("input set %s not saved (%s: %s)" % (name, type(exc).__name__, exc))
            continue
        item = {"stage": entry["stage"], "occurrence": entry["occurrence"], "file": entry["file"]}
        if "op" in entry:
            item["op"] = entry["op"]
        item["args"] = entry["args"]
        if "links" in entry:
            item["outputs"] = _output_entries(window, name, entry["links"])
        written.append(item)
    return written


def _output_entries(window, name, links):
    """An input set's manifest ``outputs``: {"key", "file"} per linked output that was captured,
    in the order named; one not captured is left out with a warning (stderr and the manifest's
    ``warnings``), and one captured but not saved gets file null with a warning."""
    out = []
    for link in links:
        key = "%s#%d" % (link["stage"], link["occurrence"])
        if not link["captured"]:
            message = ("input set %s: output %r was not captured in this window after the set (no record %s); "
                       "not linked" % (name, link["stage"], key))
            window["warnings"].append(message)
            _warn(message)
            continue
        if "file" not in link:
            exc = link.get("error") or RuntimeError("no tensor to save (a meta tensor)")
            message = "input set %s: output %s not saved (%s: %s)" % (name, key, type(exc).__name__, exc)
            window["warnings"].append(message)
            _warn(message)
        out.append({"key": key, "file": link.get("file")})
    return out


_RECORD_ORDER = (
    "seq", "stage", "occurrence", "mode", "dtype", "shape", "stride", "storage_offset", "element_size",
    "numel", "storage_ptr", "storage_id", "storage_nbytes", "data_ptr", "device", "device_format", "is_contiguous", "stats",
    "tensor_file", "rows_kept", "rows_total",
)
# Written after ``truncated``, only when given (older readers ignore them).
_RECORD_TAIL = ("shard", "collective", "stats_path", "local_checksum", "received")


def _ordered_record(meta):
    out = {key: meta[key] for key in _RECORD_ORDER if key in meta}
    if out.get("tensor_file") is None:
        out.pop("rows_kept", None)
        out.pop("rows_total", None)
    else:
        out["truncated"] = out["rows_kept"] < out["rows_total"]
    for key in _RECORD_TAIL:
        if key in meta:
            out[key] = meta[key]
    return out


def _metadata_to_host(value):
    if isinstance(value, torch.Tensor):
        if value.device.type == "meta":
            return {"dtype": _dtype_name(value.dtype), "shape": list(value.shape)}
        if not (value.is_floating_point() or value.is_complex()):
            return value.cpu().tolist()  # ints and bools: JSON as they are (token ids: no walk)
        return _metadata_to_host(value.cpu().tolist())  # NaN/inf elements become strings (strict JSON)
    if isinstance(value, list):
        return [_metadata_to_host(v) for v in value]
    if isinstance(value, dict):
        return {k: _metadata_to_host(v) for k, v in value.items()}
    if isinstance(value, float):
        return _json_float(value)
    return value


def _payload_to_cpu(value):
    if isinstance(value, torch.Tensor):
        if value.device.type == "meta":
            raise ValueError("meta tensors have no values to save")
        return value.cpu()
    if isinstance(value, dict):
        return {k: _payload_to_cpu(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_payload_to_cpu(v) for v in value]
    return value


def _safe_name(name):
    """A file name for a stage#N key: path separators and odd characters become '_'."""
    safe = re.sub(r"[^A-Za-z0-9_.#-]", "_", name)
    if len(safe) <= 200:
        return safe
    # A long stage name is cut, never its "#N" (or "#N.K") tail: two occurrences stay two.
    head, sep, tail = safe.rpartition("#")
    if sep and len(tail) <= 40:
        return head[:199 - len(tail)] + "#" + tail
    return safe[:200]


def _unique_rel(directory, sub, key, ext):
    """``<sub>/<safe key><ext>`` relative to ``directory``; when two keys sanitise to one name
    (e.g. "a/b#1" and "a_b#1", or long names cut at 200 characters) the later one gets .2, .3, ...
    before ``ext`` instead of failing the whole window on an existing file."""
    stem = os.path.join(sub, _safe_name(key))
    rel, n = stem + ext, 1
    while os.path.exists(os.path.join(directory, rel)):
        n += 1
        rel = "%s.%d%s" % (stem, n, ext)
    return rel


def _new_window_dir(root, window):
    """Create a fresh directory for this window; never reuse an existing one.

    Layout: <root>/rank<R>/match<M>-occ<O>/ ; if that exists (an earlier run
    into the same root) a suffix .2, .3, ... is added and a warning printed.
    os.mkdir is atomic, so two processes can never share a directory.
    Returns (directory, attempt): attempt N is the directory with suffix .N
    (1 for none), recorded in the manifest as ``attempt``.
    """
    base = os.path.join(root, "rank%d" % window["rank"], "match%d-occ%d" % (window["match"], window["occurrence"]))
    os.makedirs(os.path.dirname(base), exist_ok=True)
    candidate, n = base, 1
    while True:
        try:
            os.mkdir(candidate)
            break
        except FileExistsError:
            n += 1
            candidate = "%s.%d" % (base, n)
    if candidate != base:
        _warn("%s already holds a dump; writing %s instead" % (base, candidate), key="exists:" + base)
    return candidate, n


def _atomic_write_bytes(path, chunks):
    """_atomic_write of the byte strings ``chunks``, in order."""
    def write(handle):
        for chunk in chunks:
            handle.write(chunk)
    _atomic_write(path, write)


def _atomic_write(path, write):
    """Call ``write(handle)`` on a temporary sibling, fsync, then rename over ``path`` (POSIX-atomic).

    A writer killed midway leaves only ``<path>.tmp.<pid>``, never a partial
    ``path``.  Refuses to replace a file that already exists, also when another
    process publishes ``path`` between the check and the rename: the file is
    published with link(2), which fails on an existing name where rename(2) would
    replace it (rename is the fallback only where the file system has no hard links).
    """
    if os.path.exists(path):
        raise FileExistsError("%s exists; dumps are never overwritten" % path)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        with open(tmp, "xb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        if exc.filename is None:  # a failed write (ENOSPC) names no file: name the one being written
            exc.filename = tmp
        raise
    try:
        os.link(tmp, path)
    except FileExistsError:
        os.unlink(tmp)
        raise FileExistsError("%s was written by another process meanwhile; dumps are never overwritten" % path)
    except OSError:  # no hard links here (some FUSE and SMB mounts)
        if os.path.exists(path):
            os.unlink(tmp)
            raise FileExistsError("%s exists; dumps are never overwritten" % path)
        os.rename(tmp, path)
        return
    os.unlink(tmp)


def _atomic_write_text(path, text):
    _atomic_write_bytes(path, [text.encode("utf-8")])


def _atomic_torch_save(obj, path):
    # torch.save streams into the temporary file: a host tensor's bytes are written from its
    # storage, with no in-memory copy of the archive (a BytesIO and its getvalue() held the
    # set three more times while it was written: benches/input_set_rss.py).
    _atomic_write(path, lambda handle: torch.save(obj, handle))


# safetensors dtype codes (https://github.com/huggingface/safetensors, format.md).
_SAFETENSORS_DTYPES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
    torch.bool: "BOOL",
}
for _name, _code in (("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2")):
    if hasattr(torch, _name):
        _SAFETENSORS_DTYPES[getattr(torch, _name)] = _code


def _save_tensor_or_warn(directory, key, tensor):
    """_save_tensor, or None with a warning: a tensor that cannot be written (a meta
    tensor, a full disk) costs its own file, never the window's manifest."""
    try:
        return _save_tensor(directory, key, tensor)
    except Exception as exc:
        _warn("tensor %s not saved (%s: %s)" % (key, type(exc).__name__, exc))
        return None


def _save_tensor(directory, key, tensor):
    """Write one tensor's logical values; returns its path relative to the window directory."""
    os.makedirs(os.path.join(directory, "tensors"), exist_ok=True)
    host = tensor.detach().to("cpu").contiguous()
    if _config.tensor_format == "pt" or host.dtype not in _SAFETENSORS_DTYPES:
        rel = _unique_rel(directory, "tensors", key, ".pt")
        _atomic_torch_save({key: host}, os.path.join(directory, rel))
        return rel
    rel = _unique_rel(directory, "tensors", key, ".safetensors")
    _atomic_write_bytes(os.path.join(directory, rel), _safetensors_chunks(key, host))
    return rel


def _safetensors_chunks(key, host):
    """One-tensor safetensors file: u64 LE header size, JSON header, raw little-endian bytes."""
    import ctypes

    nbytes = host.numel() * host.element_size()
    header = {key: {"dtype": _SAFETENSORS_DTYPES[host.dtype], "shape": list(host.shape), "data_offsets": [0, nbytes]}}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)  # the format pads the header to 8 bytes
    data = ctypes.string_at(host.data_ptr(), nbytes) if nbytes else b""
    if sys.byteorder != "little" and host.element_size() > 1:
        raise RuntimeError("safetensors output needs a little-endian host; set DUMP_PROBE_TENSOR_FORMAT=pt")
    return [len(text).to_bytes(8, "little"), text, data]


def _occurrence_text():
    """DUMP_PROBE_OCCURRENCE as selected: "3", "5-9" or "all"."""
    first, last = _config.occurrences
    if last is None:
        return "all"
    return str(first) if first == last else "%d-%d" % (first, last)


def _nothing_written_reason():
    """Why an enabled probe on a selected rank wrote no window, in the user's terms."""
    if _state.arms == 0:
        return "arm() was never called"
    if _config.request is not None:
        held = _state.request_calls.get(_config.request, 0)
        if held == 0:
            return "no forward's row map held request %r (DUMP_PROBE_REQUEST): %d forward%s armed; " \
                   "arm(label, rows=[(request, first_position, count), ...]) names the requests" % (
                       _config.request, _state.arms, "" if _state.arms == 1 else "s")
        if held < _config.occurrence:
            return "DUMP_PROBE_OCCURRENCE=%s is beyond the %d forward%s that held request %r" % (
                _occurrence_text(), held, "" if held == 1 else "s", _config.request)
    labels = len(_state.labels)
    if labels < _config.match:
        return "no label matched DUMP_PROBE_MATCH=%d: %d label%s seen" % (
            _config.match, labels, "" if labels == 1 else "s")
    label, (_, calls) = next((l, v) for l, v in _state.labels.items() if v[0] == _config.match)
    if calls < _config.occurrence:
        return "DUMP_PROBE_OCCURRENCE=%s is beyond the %d call%s of label %r (match %d)" % (
            _occurrence_text(), calls, "" if calls == 1 else "s", label, _config.match)
    return "the selected window of label %r was not written (see the warning above)" % label


def _failed_window_line(label, directory, exc):
    """The exit report's line for a window finish() could not write: its label and directory,
    the error by its errno name (ENOSPC), and what was left there."""
    code = getattr(exc, "errno", None)
    name = errno.errorcode.get(code) if isinstance(code, int) else None
    error = "%s: %s" % (name or type(exc).__name__, getattr(exc, "strerror", None) or exc)
    if getattr(exc, "filename", None):
        error += " (writing %s)" % os.path.basename(str(exc.filename))
    line = "the window of label %r was not completed: finish() failed with %s" % (label, error)
    if directory is not None:
        line += "; %s holds what was written before" % directory
        if code == errno.ENOSPC or code == getattr(errno, "EDQUOT", None):
            line += " (files ending .tmp.%d are incomplete: the disk was full)" % os.getpid()
    return line


def _report_at_exit():
    """At interpreter exit: the path of each window written, or one line saying why none was.

    Silent when the probe is off, misconfigured (already said at import), or on a rank that
    DUMP_PROBE_RANKS leaves out. Never raises.
    """
    try:
        if not _state.report_at_exit or not _config.enabled or _config.error is not None:
            return
        rank = _state.last_rank if _state.last_rank is not None else current_rank()
        if _config.ranks is not None and rank not in _config.ranks:
            return
        lines = ["wrote %s (%d record%s%s)" % (path, n, "" if n == 1 else "s",
                                             ", %d bytes of token rows in %s" % (rows, ROWS_FILE) if rows else "")
                 for path, n, rows in _state.written]
        if _state.forked and not lines and not _active:
            return  # a fork child that armed nothing of its own: the parent reports its windows
        for label, directory, exc in _state.failed:
            lines.append(_failed_window_line(label, directory, exc))
        if _active and _state.window is not None:
            line = ("the window of label %r is still armed at exit: finish() was never called, "
                    "so it was not written" % _state.window["label"])
            if "writer" in _state.window:
                _state.window["writer"].close()  # the input sets already handed over are completed
                line += "; its input sets are in %s" % _state.window["dir"][0]
            lines.append(line)
        if not lines:
            lines.append("nothing written: " + _nothing_written_reason())
        for line in lines:
            sys.stderr.write("dump_probe: %s\n" % line)
    except Exception:
        pass


atexit.register(_report_at_exit)


def _after_fork_in_child():
    """os.fork() in a process that imported the probe: the child starts with no open window.

    The child inherits a copy of the parent's window (its directory, records, input sets and a
    writer whose thread did not survive the fork). The parent writes that window; were the
    child to finish its copy too, two processes would publish into one directory and one
    window would be lost or replaced. So the child drops it (one warning), keeps only what
    selection needs (labels and arms seen), and records nothing until it arms a window of its
    own, which claims a directory of its own. Locks a parent thread held at the fork are
    made anew, and the windows the parent wrote are not reported again at the child's exit.
    """
    global _active
    try:
        _state.lock = threading.Lock()
        _state.written = []
        _state.forked = True
        window = _state.window
        if _active and window is not None:
            _active = False
            _state.window = None
            _state.records = []
            _state.input_sets = []
            _warn("forked (child pid %d) while the window of label %r was open: the parent writes that "
                  "window, so this child records nothing until it arms a window of its own"
                  % (os.getpid(), window["label"]), key="fork")
    except Exception:
        pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _reset_for_tests(env=None):
    """Re-read the environment and drop all state (used by the test-suite)."""
    global _config, _state, _active, _counting
    _active = _counting = False
    if _state.window is not None and "writer" in _state.window:
        _state.window["writer"].close()  # no thread of a dropped window writes on into a test's files
    _config = _Config(os.environ if env is None else env)
    _state = _State(_config)
    _state.report_at_exit = False
    _forget_paths()  # its "fused" warnings are said again after a reset
    _config_warnings()


class _ThisProbe:
    """An import finder that answers any module named ``dump_probe`` (``pkg.dump_probe``
    too) with this one (``python -m dump_probe``)."""

    def __init__(self, module):
        self.module = module

    def find_spec(self, fullname, path=None, target=None):
        if fullname.rsplit(".", 1)[-1] != "dump_probe":
            return None
        import importlib.util

        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        pass


def _main(argv):
    """``python -m dump_probe --hook REGEX [--inputs] [--label LABEL] script.py [args...]``:
    runs a script with module hooks on every module whose path matches REGEX (hook_all) and a
    window per outermost forward, with no edit to the script or the model. DUMP_PROBE is set
    to 1 unless the environment sets it (to a non-empty value); the other DUMP_PROBE_* variables apply as usual."""
    import argparse
    import runpy

    parser = argparse.ArgumentParser(
        prog="python -m dump_probe",
        description="Run a script with dump_probe's module hooks installed: a window per outermost forward.")
    parser.add_argument("--hook", metavar="REGEX", default=None,
                        help="module paths to capture (re.search; default: every module)")
    parser.add_argument("--inputs", action="store_true", help="also capture modules' positional inputs")
    parser.add_argument("--label", default=None,
                        help="the windows' label (default: the outermost module's class name)")
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    options = parser.parse_args(argv)
    if not os.path.isfile(options.script):
        parser.error("%s: no such file" % options.script)
    if options.hook is not None:
        try:
            re.compile(options.hook)
        except re.error as exc:
            parser.error("--hook %r is not a valid regex (%s)" % (options.hook, exc))
    global _config, _state, _command_argv
    # How this command was typed after ``python``: ``-m dump_probe`` (the spec's name) or the
    # file's path as given, then the probe's own arguments.
    spec = globals().get("__spec__")
    _command_argv = (["-m", spec.name] if spec is not None else [sys.argv[0]]) + list(argv)
    if not os.environ.get("DUMP_PROBE", "").strip():  # unset or empty: the same (see _Config)
        os.environ["DUMP_PROBE"] = "1"
        _config = _Config(os.environ)
        _state = _State(_config)
        _config_warnings()
    # The script's own `import dump_probe`, or of a copy in its package (`from pkg import
    # dump_probe`), gets this module, not a second copy with a state of its own (its windows
    # would be written beside these as attempts of one window).
    sys.modules.setdefault("dump_probe", sys.modules[__name__])
    sys.meta_path.insert(0, _ThisProbe(sys.modules[__name__]))
    hook_all(options.hook, inputs=options.inputs, label=options.label if options.label is not None else True)
    sys.argv = [options.script] + list(options.args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(options.script)))
    runpy.run_path(options.script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
