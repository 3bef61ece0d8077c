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

Under tensor (or context) parallelism, say where each rank sits and how each stage is
split, so dumpview can merge a TP=2 capture's shards and compare it with a TP=1 one::

    dp.arm(request_id, token_ids=ids, parallel={"tp": (tp_rank, tp_size)})
    dp.capture("layers.3.qkv", qkv, shard="tp:-1")              # a slice of the last dim
    dp.capture("layers.3.o_partial", o, shard="partial:tp")     # before the all-reduce
    dp.capture("layers.3.o", o_sum, shard="replicated:tp", collective="all_reduce")

Environment (read once, at import):

    DUMP_PROBE             1/true/yes/on arms the probe; anything else (or unset) leaves it off
    DUMP_PROBE_DIR         output directory (default ./dump_probe_out)
    DUMP_PROBE_RANKS       ranks that write: "0" (default), "0,2", or "all"
    DUMP_PROBE_TENSOR      regex of stages whose full tensors are saved (default: none)
    DUMP_PROBE_ROWS        rows (dim 0) kept per saved tensor; 0 or "all" keeps every row (default 256)
    DUMP_PROBE_MATCH       which distinct label is captured, 1-based (default 1)
    DUMP_PROBE_OCCURRENCE  which call within that label is captured, 1-based (default 1)
    DUMP_PROBE_TENSOR_FORMAT  "safetensors" (default) or "pt"

An invalid value prints one warning and leaves the probe disarmed.  No
function here raises into the model it observes: an internal failure prints
one warning and disarms the probe.

Statistics are computed on the tensor's own device and stacked there; the host
reads them back in ``finish()``, in one transfer per device.  The capture path
never calls ``.cpu()``, ``.item()``, ``.tolist()`` or prints device values: a
dump that synchronises can complete the very asynchronous copy a bug depends
on.  The manifest format is described in docs/manifest.md of the dumpview
repository.
"""

import atexit
import json
import os
import re
import socket
import sys
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

_TRUE = ("1", "true", "yes", "on")

# The one boolean that every public call checks first.  True only while a
# selected window is open on a selected rank.
_active = False


class _Config:
    """Parsed environment; ``error`` names the first invalid variable."""

    def __init__(self, env):
        self.error = None
        self.enabled = env.get("DUMP_PROBE", "").strip().lower() in _TRUE
        self.directory = env.get("DUMP_PROBE_DIR", "") or "dump_probe_out"
        self.ranks = self._ranks(env.get("DUMP_PROBE_RANKS", "0"))
        pattern = env.get("DUMP_PROBE_TENSOR", "")
        self.tensor_pattern = pattern
        self.tensor_regex = None
        if pattern:
            try:
                self.tensor_regex = re.compile(pattern)
            except re.error as exc:
                self._fail("DUMP_PROBE_TENSOR=%r is not a valid regex (%s)" % (pattern, exc))
        rows = env.get("DUMP_PROBE_ROWS", "256").strip().lower()
        self.rows = 0 if rows == "all" else self._positive_int("DUMP_PROBE_ROWS", rows, allow_zero=True)
        self.match = self._positive_int("DUMP_PROBE_MATCH", env.get("DUMP_PROBE_MATCH", "1"))
        self.occurrence = self._positive_int("DUMP_PROBE_OCCURRENCE", env.get("DUMP_PROBE_OCCURRENCE", "1"))
        fmt = env.get("DUMP_PROBE_TENSOR_FORMAT", "safetensors").strip().lower()
        if fmt not in ("safetensors", "pt"):
            self._fail("DUMP_PROBE_TENSOR_FORMAT=%r must be 'safetensors' or 'pt'" % fmt)
        self.tensor_format = fmt

    def _fail(self, message):
        if self.error is None:
            self.error = message

    def _positive_int(self, name, text, allow_zero=False):
        try:
            value = int(text.strip())
        except ValueError:
            value = -1
        if value < 0 or (value == 0 and not allow_zero):
            self._fail("%s=%r must be a %s integer" % (name, text, "non-negative" if allow_zero else "positive"))
            return 1
        return value

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
    """One captured tensor: host-side layout now, device-side statistics until finish()."""

    __slots__ = ("meta", "stats", "saved")

    def __init__(self, meta, stats, saved):
        self.meta = meta  # dict of JSON-ready layout fields
        self.stats = stats  # 1-D device tensor in _DEVICE_STATS order, or None
        self.saved = saved  # device tensor (rows-bounded clone) to write in finish(), or None


class _Slot:
    """A preallocated graph-mode buffer set for one stage (see graph_slot)."""

    __slots__ = ("stage", "stats", "tensor", "meta", "index")

    def __init__(self, stage, stats, tensor, index):
        self.stage = stage
        self.stats = stats
        self.tensor = tensor
        self.meta = None  # layout of the tensor seen by capture_graph, host-side
        self.index = index


class _State:
    def __init__(self, config):
        self.config = config
        self.labels = {}  # label -> (1-based match index, calls so far)
        self.window = None  # dict describing the open window
        self.parallel = {}  # axis -> (rank in group, group size) of the open window (arm's parallel=)
        self.records = []
        self.input_sets = []
        self.occurrences = {}  # stage -> captures so far in this window
        self.input_occurrences = {}
        self.slots = {}  # stage -> _Slot
        self.storages = {}  # (device, storage_ptr) -> (weakref to the storage, storage_id)
        self.next_storage_id = 1
        self.warned = set()
        self.arms = 0  # arm() calls seen, selected or not
        self.last_rank = None  # the rank arm() last saw
        self.written = []  # (manifest path, records) of each window written
        self.report_at_exit = True  # _reset_for_tests turns it off: pytest's exit is not a run's


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
    global _active
    _active = False
    _state.window = None
    _warn("%s failed (%s: %s); the probe is disarmed" % (where, type(exc).__name__, exc), key="disarm")


if _config.enabled and _config.error:
    _warn(_config.error + "; the probe stays disarmed", key="config")


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
    return _active


def arm(label, **metadata):
    """Open a capture window for ``label`` when it is the selected one.

    ``label`` identifies one request (use the request id): selection counts
    distinct labels (DUMP_PROBE_MATCH), then calls with that label
    (DUMP_PROBE_OCCURRENCE), so the chunks of one chunked prefill are calls
    2, 3, ... of one label, not new requests.  ``metadata`` should carry what
    identifies the input: token ids themselves, sampling parameters, weights
    path, world size, topology; it is stored in the manifest (tensors are
    read back in finish(), not here).  A window still open from an earlier
    arm() is finished first.  Returns True when this call opened a window.
    """
    global _active
    if not _config.enabled:
        return False
    try:
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
        if match != _config.match or calls != _config.occurrence:
            return False
        parallel = _parallel_layout(metadata.get("parallel"))
        if parallel:
            metadata = dict(metadata, parallel={axis: list(v) for axis, v in parallel.items()})
            _warn_unselected_group(parallel)
        elif "parallel" in metadata:
            metadata = {k: v for k, v in metadata.items() if k != "parallel"}
        _state.parallel = parallel
        _state.window = {
            "label": label,
            "match": match,
            "occurrence": calls,
            "rank": rank,
            "world_size": _world_size(),
            "metadata": {key: _metadata_value(value) for key, value in metadata.items()},
            "armed_unix_s": time.time(),
        }
        _state.records = []
        _state.input_sets = []
        _state.occurrences = {}
        _state.input_occurrences = {}
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


# Axes of arm(parallel=...): tensor, context, data, pipeline and expert parallel.
PARALLEL_AXES = ("tp", "cp", "dp", "pp", "ep")
# Collectives a capture(collective=...) may name.
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce")


def _parallel_layout(value):
    """{axis: (rank_in_group, group_size)} from arm(parallel=...); {} (with a warning) when invalid.

    ``value`` maps an axis of PARALLEL_AXES to a pair of ints, 0 <= rank_in_group < group_size
    (tensors and lists of two ints are accepted).  None gives {}.
    """
    if value is None:
        return {}
    try:
        if not isinstance(value, dict) or not value:
            raise ValueError("a dict such as {'tp': (rank_in_group, group_size)}")
        layout = {}
        for axis, pair in value.items():
            if axis not in PARALLEL_AXES:
                raise ValueError("axis %r is not one of %s" % (axis, ", ".join(PARALLEL_AXES)))
            if isinstance(pair, torch.Tensor):
                pair = pair.tolist()
            rank, size = (int(v) for v in pair)
            if size < 1 or not 0 <= rank < size:
                raise ValueError("%s=(%d, %d) needs 0 <= rank_in_group < group_size" % (axis, rank, size))
            layout[axis] = (rank, size)
        return layout
    except Exception as exc:
        _warn("arm(parallel=%r) is not a parallel layout (%s); recorded without one" % (value, exc), key="parallel")
        return {}


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


def capture(stage, tensor, shard=None, collective=None):
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
    tensor's.  ``collective`` names the collective whose output this is
    (``"all_reduce"``, ``"all_gather"``, ...).  An invalid annotation prints one
    warning and the record is kept without it.
    """
    if not _active:
        return
    try:
        if not isinstance(tensor, torch.Tensor):
            _warn("capture(%r) got %s, not a tensor; skipped" % (stage, type(tensor).__name__))
            return
        stage = str(stage)
        occurrence = _state.occurrences.get(stage, 0) + 1
        _state.occurrences[stage] = occurrence
        tensor = tensor.detach()
        meta = _layout(tensor)
        meta.update(stage=stage, occurrence=occurrence, seq=len(_state.records), mode="eager")
        split = None
        if shard is not None:
            annotation = _shard_annotation(stage, shard, tensor)
            if annotation is not None:
                meta["shard"], split = annotation
        if collective is not None:
            if collective in COLLECTIVES:
                meta["collective"] = collective
            else:
                _warn("capture(%r, collective=%r): not one of %s; recorded without it"
                      % (stage, collective, ", ".join(COLLECTIVES)), key="collective:%s" % stage)
        saved = None
        if _config.tensor_regex is not None and _config.tensor_regex.search(stage):
            saved = _bounded_rows(tensor).clone()
            meta["rows_total"] = int(tensor.shape[0]) if tensor.dim() > 0 else 1
            meta["rows_kept"] = int(saved.shape[0]) if saved.dim() > 0 else 1
        try:
            stats = _statistics(tensor, split=split)
        except Exception as exc:  # a dtype or layout torch cannot reduce (float8, sparse): that record only
            _warn("no statistics for %s tensors (%s: %s); their records carry null stats"
                  % (tensor.dtype, type(exc).__name__, str(exc).splitlines()[0][:120]), key="stats:%s" % tensor.dtype)
            stats = None
        _state.records.append(_Record(meta, stats, saved))
    except Exception as exc:
        _disarm("capture(%r)" % (stage,), exc)


def capture_inputs(stage, _op=None, **named):
    """Save the complete input set of one operator call for replay.

    Every value is kept: tensors (exact dtype, shape, stride, storage_offset
    and device; the bytes of the storage span the view reads), ints, floats,
    bools, None, strings, dtypes and (nested) lists/tuples/dicts of these.
    Call it before any branch that picks an implementation, so the set is
    captured whichever branch runs.  Written in finish() as
    ``inputs/<stage>#<N>.pt``.

    ``_op`` (reserved, optional) names the operator that is called, e.g.
    ``"torch.ops.npu.npu_rms_norm"``; it is recorded as the input set's ``op``
    in the manifest (a string; anything else is stored as ``str(_op)``, or
    its ``__module__.__qualname__`` for a callable) and is not an argument.
    """
    if not _active:
        return
    try:
        stage = str(stage)
        op = _op_name(_op)
        occurrence = _state.input_occurrences.get(stage, 0) + 1
        _state.input_occurrences[stage] = occurrence
        described = {}
        payload = {}
        for name, value in named.items():
            described[name], payload[name] = _input_value(value)
        entry = {"stage": stage, "occurrence": occurrence, "args": described, "payload": payload}
        if op is not None:
            entry["op"] = op
        _state.input_sets.append(entry)
    except Exception as exc:
        _disarm("capture_inputs(%r)" % (stage,), exc)


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


def _input_value(value):
    """(JSON description, picklable payload) of one operator argument."""
    if isinstance(value, torch.Tensor):
        requires_grad = bool(value.requires_grad)  # before detach(), which always clears it
        value = value.detach()
        desc = {"kind": "tensor"}
        desc.update(_layout(value))
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
        pairs = [_input_value(v) for v in value]
        kind = "list" if isinstance(value, list) else "tuple"
        return {"kind": kind, "items": [p[0] for p in pairs]}, {"__dump_probe_seq__": kind, "items": [p[1] for p in pairs]}
    if isinstance(value, dict):
        pairs = {str(k): _input_value(v) for k, v in value.items()}
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


def graph_slot(stage, like):
    """Preallocate device buffers for ``stage`` before a graph is captured.

    Allocates a statistics vector on ``like``'s device and, when ``stage``
    matches DUMP_PROBE_TENSOR, a rows-bounded tensor buffer shaped like
    ``like``.  capture_graph() later writes into them with device-side work
    only, so the copies are part of the captured graph and run at every
    replay; finish() after a replay reads them back as records of mode
    "graph".  Needs DUMP_PROBE set, not an open window (a graph is usually
    captured before the request arrives).  Returns True when allocated.
    """
    if not _usable():
        return False
    try:
        stage = str(stage)
        if stage in _state.slots:
            return True
        stats = torch.zeros(len(_DEVICE_STATS), dtype=_stats_dtype(like.device), device=like.device)
        buffer = None
        if _config.tensor_regex is not None and _config.tensor_regex.search(stage):
            buffer = torch.empty_like(_bounded_rows(like), memory_format=torch.contiguous_format)
        _state.slots[stage] = _Slot(stage, stats, buffer, len(_state.slots))
        return True
    except Exception as exc:
        _disarm("graph_slot(%r)" % (stage,), exc)
        return False


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
        stats = _statistics(tensor, slot.stats.dtype)
        if stats is not None:  # empty or complex tensors get null stats in the record
            slot.stats.copy_(stats)
        if slot.tensor is not None:
            slot.tensor.copy_(_bounded_rows(tensor))
        meta = _layout(tensor)
        if slot.tensor is not None:
            meta["rows_total"] = int(tensor.shape[0]) if tensor.dim() > 0 else 1
            meta["rows_kept"] = int(slot.tensor.shape[0]) if slot.tensor.dim() > 0 else 1
        slot.meta = meta
    except Exception as exc:
        _disarm("capture_graph(%r)" % (stage,), exc)


def _stats_dtype(device):
    # float64 where the device has it; Ascend (npu) and mps reduce in float32.
    return torch.float64 if device.type in ("cpu", "cuda", "meta", "xpu") else torch.float32


def _statistics(tensor, acc=None, split=None):
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
    Cost matters (every capture point pays it): non-finite elements are
    excluded by nan_to_num replacement instead of boolean masks (bool-output
    kernels are several times slower on CPU), counts come from 0/1 indicators
    built by arithmetic into one reused buffer, the checksum is one
    matrix-vector product, and scalar arithmetic is left to the host.
    Floating tensors are reduced in float32 (float64 tensors, and tensors of
    2**24 or more elements where the device has float64, in float64), so
    counts are exact; integers and bools are summarised as float values.
    ``split`` (a _Split, from capture(shard=...)) puts the checksum's weights
    at the full tensor's coordinates.
    """
    acc = acc or _stats_dtype(tensor.device)
    n = tensor.numel()
    if n == 0 or tensor.is_complex():
        return None
    cols = tensor.shape[-1] if tensor.dim() > 0 else 1
    x = tensor.reshape(n // cols, cols)
    wide = tensor.dtype == torch.float64 or n >= 2**24 or not tensor.is_floating_point()
    red = acc if wide else torch.float32
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
    l2 = torch.linalg.vector_norm(values)
    if not wide:
        # float32 squares overflow above ~1.8e19 (exploding activations): there, use the norm of
        # the values scaled by an exact power of two, widened to acc before scaling back.
        rescued = torch.linalg.vector_norm(values * _L2_SCALE).to(acc) / _L2_SCALE
        l2 = torch.where(torch.isinf(l2), rescued, l2.to(acc))
    if split is None:
        row_weights = _position_weights(x.shape[0], _ROW_MUL, red, x.device)
        col_weights = _position_weights(cols, _COL_MUL, red, x.device)
    else:
        row_weights, col_weights = _shard_weights(list(tensor.shape), split, red, x.device)
    checksum = torch.dot(values @ col_weights, row_weights)
    return torch.stack([nan_count, inf_count, low, high, total, l2, checksum]).to(acc)


_INF = float("inf")
_L2_SCALE = 2.0 ** -64
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


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def _layout(tensor):
    """Logical and physical layout of ``tensor``: host metadata only, no sync."""
    try:
        storage = tensor.untyped_storage()
        storage_ptr = int(storage.data_ptr())
        storage_nbytes = int(storage.nbytes())
        storage_id = _storage_id(storage, storage_ptr, tensor.device)
    except Exception:  # e.g. tensors without storage (some wrapper subclasses)
        storage_ptr, storage_nbytes, storage_id = None, None, None
    try:
        data_ptr = int(tensor.data_ptr())
    except Exception:
        data_ptr = None
    return {
        "dtype": _dtype_name(tensor.dtype),
        "shape": list(tensor.shape),
        "stride": list(tensor.stride()),
        "storage_offset": int(tensor.storage_offset()),
        "element_size": int(tensor.element_size()),
        "numel": int(tensor.numel()),
        "storage_ptr": storage_ptr,
        "storage_id": storage_id,
        "storage_nbytes": storage_nbytes,
        "data_ptr": data_ptr,
        "device": str(tensor.device),
        "device_format": _device_format(tensor),
        "is_contiguous": bool(tensor.is_contiguous()),
    }


def _storage_id(storage, ptr, device):
    """Process-unique id of the live storage object at ``ptr`` (1, 2, ...), or None.

    An allocator hands a freed address to the next allocation, so two stages
    with equal storage_ptr may be different buffers that merely lived one
    after the other.  A weak reference (which does not extend the storage's
    life or change the allocator's behaviour) tells whether the storage seen
    earlier at this address is still the same object.
    """
    key = (str(device), ptr)
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
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return value


def _host_stats(values, numel):
    """The manifest's stats object from one read-back _DEVICE_STATS row (Python floats)."""
    raw = dict(zip(_DEVICE_STATS, values))
    nan_count, inf_count = int(raw["nan_count"]), int(raw["inf_count"])
    finite = numel - nan_count - inf_count
    stats = {"nan_count": nan_count, "inf_count": inf_count, "finite_count": finite}
    if finite > 0:
        stats["max_abs"] = max(abs(raw["min"]), abs(raw["max"]))
        stats["min"], stats["max"] = raw["min"], raw["max"]
        stats["mean"] = raw["sum"] / finite
    else:
        stats["max_abs"] = stats["min"] = stats["max"] = stats["mean"] = None
    stats["l2"], stats["pos_checksum"] = raw["l2"], raw["pos_checksum"]
    return {name: _json_float(stats[name]) if isinstance(stats[name], float) else stats[name] for name in STAT_NAMES}


def finish():
    """Read everything back (once per device), write the window, close it.

    Returns the manifest path, or None when no window was open or the write
    failed (a warning says why).  Graph slots that were written by
    capture_graph() are read here too, so call finish() after the replay.
    """
    global _active
    if not _active:
        return None
    _active = False
    window = _state.window
    _state.window = None
    try:
        return _write_window(window)
    except Exception as exc:
        _warn("finish failed (%s: %s); nothing written for this window" % (type(exc).__name__, exc), key="finish")
        return None


def _read_back(rows):
    """Host lists of floats from 1-D device stat vectors (None stays None); one transfer per device."""
    by_device = {}
    for index, row in enumerate(rows):
        if row is not None:
            by_device.setdefault((row.device, row.dtype), []).append(index)
    result = [None] * len(rows)
    for (device, _dtype), indices in by_device.items():
        if device.type == "meta":
            _warn("statistics of meta tensors have no values; recorded as null", key="meta")
            continue
        host = torch.stack([rows[i] for i in indices]).to("cpu", torch.float64).tolist()
        for i, values in zip(indices, host):
            result[i] = values
    return result


def _write_window(window):
    config = _config
    directory, attempt = _new_window_dir(config.directory, window)
    slots = [slot for slot in sorted(_state.slots.values(), key=lambda s: s.index) if slot.meta is not None]
    stat_rows = [r.stats for r in _state.records]
    stat_rows += [s.stats if s.meta["numel"] and not s.meta["dtype"].startswith("complex") else None for s in slots]
    host_stats = _read_back(stat_rows)

    records = []
    for record, stats in zip(_state.records, host_stats):
        meta = dict(record.meta)
        meta["stats"] = None if stats is None else _host_stats(stats, meta["numel"])
        meta["tensor_file"] = None
        if record.saved is not None:
            meta["tensor_file"] = _save_tensor_or_warn(directory, "%s#%d" % (meta["stage"], meta["occurrence"]), record.saved)
        records.append(_ordered_record(meta))
    for slot, stats in zip(slots, host_stats[len(_state.records):]):
        if stats is not None and stats[0] != stats[0]:  # still the NaN that arm() wrote
            _warn("graph slot %r was not written by a replay in this window; not reported" % slot.stage)
            continue
        meta = dict(slot.meta)
        meta.update(stage=slot.stage, occurrence=1, seq=len(records), mode="graph")
        meta["stats"] = None if stats is None else _host_stats(stats, meta["numel"])
        meta["tensor_file"] = None
        if slot.tensor is not None:
            meta["tensor_file"] = _save_tensor_or_warn(directory, "%s#1" % slot.stage, slot.tensor)
        records.append(_ordered_record(meta))

    input_sets = []
    for entry in _state.input_sets:
        name = "%s#%d" % (entry["stage"], entry["occurrence"])
        try:
            path = _unique_rel(directory, "inputs", name, ".pt")
            os.makedirs(os.path.join(directory, "inputs"), exist_ok=True)
            _atomic_torch_save(_payload_to_cpu(entry["payload"]), os.path.join(directory, path))
        except Exception as exc:  # keep the manifest: one lost file must not lose the window
            _warn("input set %s not saved (%s: %s)" % (name, type(exc).__name__, exc))
            continue
        written = {"stage": entry["stage"], "occurrence": entry["occurrence"], "file": path}
        if "op" in entry:
            written["op"] = entry["op"]
        written["args"] = entry["args"]
        input_sets.append(written)

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
        "records": records,
        "input_sets": input_sets,
    }
    path = os.path.join(directory, "manifest.json")
    _atomic_write_text(path, _manifest_text(manifest))
    _state.written.append((path, len(records)))
    return path


def _manifest_text(manifest):
    """Strict JSON, one top-level field per line and one record per line (greppable, diffable)."""

    def dump(value):
        return json.dumps(value, allow_nan=False, separators=(", ", ": "))

    lines = []
    for key, value in manifest.items():
        if key in ("records", "input_sets") and value:
            body = ",\n".join("  " + dump(item) for item in value)
            lines.append("%s: [\n%s\n ]" % (dump(key), body))
        else:
            lines.append("%s: %s" % (dump(key), dump(value)))
    return "{\n " + ",\n ".join(lines) + "\n}\n"


_RECORD_ORDER = (
    "seq", "stage", "occurrence", "mode", "dtype", "shape", "stride", "storage_offset", "element_size",
    "numel", "storage_ptr", "storage_id", "storage_nbytes", "data_ptr", "device", "device_format", "is_contiguous", "stats",
    "tensor_file", "rows_kept", "rows_total",
)
# Written after ``truncated``, only when given (older readers ignore them).
_RECORD_TAIL = ("shard", "collective")


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
    return re.sub(r"[^A-Za-z0-9_.#-]", "_", name)[:200]


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
    """Write to a temporary sibling, fsync, then rename over ``path`` (POSIX-atomic).

    A writer killed midway leaves only ``<path>.tmp.<pid>``, never a partial
    ``path``.  Refuses to replace a file that already exists.
    """
    if os.path.exists(path):
        raise FileExistsError("%s exists; dumps are never overwritten" % path)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "xb") as handle:
        for chunk in chunks:
            handle.write(chunk)
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(tmp, path)


def _atomic_write_text(path, text):
    _atomic_write_bytes(path, [text.encode("utf-8")])


def _atomic_torch_save(obj, path):
    import io

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    _atomic_write_bytes(path, [buffer.getvalue()])


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


def _nothing_written_reason():
    """Why an enabled probe on a selected rank wrote no window, in the user's terms."""
    if _state.arms == 0:
        return "arm() was never called"
    labels = len(_state.labels)
    if labels < _config.match:
        return "no label matched DUMP_PROBE_MATCH=%d: %d label%s seen" % (
            _config.match, labels, "" if labels == 1 else "s")
    label, (_, calls) = next((l, v) for l, v in _state.labels.items() if v[0] == _config.match)
    if calls < _config.occurrence:
        return "DUMP_PROBE_OCCURRENCE=%d is beyond the %d call%s of label %r (match %d)" % (
            _config.occurrence, calls, "" if calls == 1 else "s", label, _config.match)
    return "the selected window of label %r was not written (see the warning above)" % label


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
        lines = ["wrote %s (%d record%s)" % (path, n, "" if n == 1 else "s") for path, n in _state.written]
        if _active and _state.window is not None:
            lines.append("the window of label %r is still armed at exit: finish() was never called, "
                         "so it was not written" % _state.window["label"])
        elif not _state.written:
            lines.append("nothing written: " + _nothing_written_reason())
        for line in lines:
            sys.stderr.write("dump_probe: %s\n" % line)
    except Exception:
        pass


atexit.register(_report_at_exit)


def _reset_for_tests(env=None):
    """Re-read the environment and drop all state (used by the test-suite)."""
    global _config, _state, _active
    _active = False
    _config = _Config(os.environ if env is None else env)
    _state = _State(_config)
    _state.report_at_exit = False
    if _config.enabled and _config.error:
        _warn(_config.error + "; the probe stays disarmed", key="config")
