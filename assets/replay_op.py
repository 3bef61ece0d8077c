"""PLACEHOLDER stand-in for replay_op.py, written on the replay-rs branch only so that the Rust
side compiles (include_str!) and its end-to-end tests run against /work/wt/replay-contract.md.
The real script (branch replay-py) replaces this file when the branches are merged.

It implements the contract's subset the tests use: --list [--json]; --stage X[#N] with
--candidate/--reference (builtin:rms_norm, builtin:rope_neox, module:fn, file.py:fn, dotted
torch callables), --rank, --window, --device, --arg, --arg-map, --out; outputs candidate.pt,
reference.pt, golden.pt, reference_native.pt and replay.json.
"""

import argparse
import importlib
import importlib.util
import inspect
import json
import os
import platform
import sys
import time
import traceback

EXIT_INPUT = 2


class InputError(Exception):
    pass


def log(message):
    sys.stderr.write("replay_op: %s\n" % message)
    sys.stderr.flush()


def manifests(dump):
    if os.path.isfile(dump):
        return [dump]
    if not os.path.isdir(dump):
        raise InputError("%s: no such file or directory" % dump)
    found = []
    for root, _dirs, files in os.walk(dump):
        if "manifest.json" in files:
            found.append(os.path.join(root, "manifest.json"))
    if not found:
        raise InputError("%s: no manifest.json below it" % dump)
    return sorted(found)


def load_manifest(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise InputError("%s: cannot read: %s" % (path, e))


def windows(dump, rank, window):
    out = []
    for path in manifests(dump):
        m = load_manifest(path)
        if rank is not None and int(m.get("rank", 0)) != rank:
            continue
        if window is not None and window not in (str(m.get("label")), str(m.get("match"))):
            continue
        out.append((path, m))
    return out


def cmd_list(args):
    sets = []
    for path, m in windows(args.dump, args.rank, args.window):
        counts = {}
        for s in m.get("input_sets", []):
            counts[s["stage"]] = counts.get(s["stage"], 0) + 1
        for s in m.get("input_sets", []):
            sets.append({"manifest": path, "rank": m.get("rank", 0), "label": m.get("label"),
                         "stage": "%s#%d" % (s["stage"], s["occurrence"]),
                         "captured": counts[s["stage"]], "op": s.get("op"), "args": s["args"]})
    if args.json:
        print(json.dumps({"input_sets": sets}, indent=1))
    else:
        for s in sets:
            print("%s (rank %s, %s): captured %d time(s), op %s" % (
                s["stage"], s["rank"], s["label"], s["captured"], s["op"]))
            for name, a in s["args"].items():
                if a.get("kind") == "tensor":
                    print("  %s: %s %s stride %s on %s" % (name, a["dtype"], a["shape"], a["stride"], a["device"]))
                else:
                    print("  %s: %s %s" % (name, a.get("kind"), a.get("value")))
    return 0


def find_set(args):
    stage, _, n = args.stage.partition("#")
    hits = []
    for path, m in windows(args.dump, args.rank, args.window):
        for s in m.get("input_sets", []):
            if s["stage"] == stage and (not n or str(s["occurrence"]) == n):
                hits.append((path, m, s))
    if not hits:
        raise InputError("%s: no captured input set %r" % (args.dump, args.stage))
    if len(hits) > 1:
        raise InputError("%s: %r is ambiguous: %s" % (
            args.dump, args.stage, ", ".join("%s#%d" % (h[2]["stage"], h[2]["occurrence"]) for h in hits)))
    return hits[0]


def rebuild(value, torch, device):
    if isinstance(value, dict) and value.get("__dump_probe_tensor__"):
        span = value["span"].to(device)
        dtype = getattr(torch, value["dtype"])
        if span.dtype != dtype:
            raise InputError("span dtype %s != %s" % (span.dtype, dtype))
        t = torch.as_strided(span, value["shape"], value["stride"], value.get("offset_in_span", 0))
        return t
    if isinstance(value, dict) and "__dump_probe_dtype__" in value:
        return getattr(torch, value["__dump_probe_dtype__"])
    if isinstance(value, dict) and "__dump_probe_device__" in value:
        return torch.device(value["__dump_probe_device__"])
    if isinstance(value, dict) and "__dump_probe_seq__" in value:
        items = [rebuild(v, torch, device) for v in value["items"]]
        return tuple(items) if value["__dump_probe_seq__"] == "tuple" else items
    return value


def rms_norm(x, weight, eps=1e-6):
    """HF LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * weight, in the dtype of the inputs."""
    import torch
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rotate_half(x):
    d = x.shape[-1] // 2
    import torch
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


def rope_neox(q, k, cos, sin, positions=None):
    """GPT-NeoX rotate_half layout: x*cos + rotate_half(x)*sin, cos/sin [T, head_dim]."""
    if positions is not None and cos.shape[0] != q.shape[0]:
        cos, sin = cos[positions], sin[positions]
    if cos.shape[-1] * 2 == q.shape[-1]:
        import torch
        cos, sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


BUILTINS = {"rms_norm": rms_norm, "rope_neox": rope_neox}


def resolve(spec):
    if spec.startswith("builtin:"):
        name = spec[len("builtin:"):]
        if name not in BUILTINS:
            raise InputError("no built-in %r; one of %s" % (name, ", ".join(sorted(BUILTINS))))
        return BUILTINS[name], "builtin." + name
    if ":" in spec:
        where, fn = spec.rsplit(":", 1)
        if where.endswith(".py"):
            if not os.path.isfile(where):
                raise InputError("%s: no such file" % where)
            s = importlib.util.spec_from_file_location("replay_candidate_%d" % abs(hash(where)), where)
            module = importlib.util.module_from_spec(s)
            s.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        return getattr(module, fn), "%s.%s" % (getattr(module, "__name__", where), fn)
    module, _, fn = spec.rpartition(".")
    obj = importlib.import_module(module.split(".")[0])
    for part in module.split(".")[1:] + [fn]:
        obj = getattr(obj, part)
    return obj, spec


def upcast(value, torch, mode):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        if mode == "golden":
            return value.to(torch.float64)
        if mode == "reference":
            return value.to(torch.float32 if value.dtype in (torch.float16, torch.bfloat16) else torch.float64)
    if isinstance(value, (list, tuple)):
        return type(value)(upcast(v, torch, mode) for v in value)
    return value


def outputs_of(result, torch):
    if isinstance(result, torch.Tensor):
        return {"out": result}
    if isinstance(result, (list, tuple)):
        return {"out.%d" % i: r for i, r in enumerate(result) if isinstance(r, torch.Tensor)}
    return {}


def run_side(name, fn, spec, resolved, named, torch, mode, device, dtype_text):
    call_args = {k: upcast(v, torch, mode) for k, v in named.items()}
    try:
        params = inspect.signature(fn).parameters
        keywords = all(k in params for k in call_args)
    except (TypeError, ValueError):
        keywords = False
    start = time.perf_counter()
    status, exc, outs = "ok", None, {}
    try:
        result = fn(**call_args) if keywords else fn(*call_args.values())
        outs = outputs_of(result, torch)
    except Exception as e:  # noqa: BLE001 - a candidate's failure is the evidence
        text = str(e)
        unsupported = any(s in text for s in ("not implemented for", "unsupported", "is not supported"))
        status = "unsupported" if unsupported else "crash"
        exc = {"type": type(e).__name__, "message": text, "traceback": traceback.format_exc()}
    duration = time.perf_counter() - start
    log("%s %s: %s in %.4f s" % (name, spec, status, duration))
    side = {"spec": spec, "resolved": resolved, "status": status, "duration_s": duration,
            "exception": exc, "input_dtype": dtype_text, "outputs": sorted(outs)}
    return side, outs, keywords


def cmd_replay(args):
    import torch
    out_dir = args.out
    if os.path.exists(out_dir) and os.listdir(out_dir):
        raise InputError("%s: exists and is not empty (never overwritten)" % out_dir)
    path, manifest, entry = find_set(args)
    pt = os.path.join(os.path.dirname(path), entry["file"])
    if not os.path.isfile(pt):
        raise InputError("%s: input set file missing" % pt)
    try:
        payload = torch.load(pt, weights_only=True)
    except Exception as e:  # noqa: BLE001
        raise InputError("%s: cannot load: %s" % (pt, e))
    device = args.device or "cpu"
    named = {k: rebuild(v, torch, device) for k, v in payload.items()}
    renames = dict(a.split("=", 1) for a in args.arg_map)
    overrides = {}
    for a in args.arg:
        k, v = a.split("=", 1)
        overrides[k] = json.loads(v)
        named[k] = overrides[k]
    named = {renames.get(k, k): v for k, v in named.items()}
    cand_fn, cand_res = resolve(args.candidate)
    ref_fn, ref_res = resolve(args.reference)
    os.makedirs(out_dir, exist_ok=True)
    sides = {}
    first_float = next((v.dtype for v in named.values() if isinstance(v, torch.Tensor) and v.is_floating_point()), None)
    up = {torch.float16: "float32 (upcast from float16)", torch.bfloat16: "float32 (upcast from bfloat16)",
          torch.float32: "float64 (upcast from float32)"}.get(first_float, "as captured")
    runs = [("candidate", cand_fn, args.candidate, cand_res, "native", "as captured"),
            ("reference", ref_fn, args.reference, ref_res, "reference", up),
            ("golden", ref_fn, args.reference, ref_res, "golden", "float64"),
            ("reference_native", ref_fn, args.reference, ref_res, "native", "as captured")]
    outputs_meta = []
    call = "keywords"
    for name, fn, spec, res, mode, text in runs:
        side, outs, keywords = run_side(name, fn, spec, res, named, torch, mode, device, text)
        if name == "candidate":
            call = "keywords" if keywords else "positional"
            outputs_meta = [{"name": k, "dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape),
                             "stride": list(v.stride())} for k, v in sorted(outs.items())]
        sides[name] = side
        if outs:
            torch.save({k: v.detach().cpu().contiguous() for k, v in outs.items()},
                       os.path.join(out_dir, name + ".pt"))
    args_meta = []
    for k, v in named.items():
        if isinstance(v, torch.Tensor):
            args_meta.append({"name": k, "kind": "tensor", "dtype": str(v.dtype).replace("torch.", ""),
                              "shape": list(v.shape), "stride": list(v.stride()), "storage_offset": 0})
        else:
            args_meta.append({"name": k, "kind": type(v).__name__, "value": v if isinstance(v, (int, float, str, bool, type(None))) else str(v)})
    record = {"format": "dumpview.replay", "version": 1, "dump": args.dump, "manifest": path,
              "rank": manifest.get("rank", 0), "label": manifest.get("label"), "match": manifest.get("match"),
              "occurrence_window": manifest.get("occurrence"), "stage": entry["stage"],
              "occurrence": entry["occurrence"], "op_recorded": entry.get("op"), "device": device,
              "versions": {"python": platform.python_version(), "torch": torch.__version__, "torch_npu": None},
              "call": call, "arg_map": renames, "arg_overrides": overrides, "args": args_meta,
              "outputs": outputs_meta, "sides": sides}
    tmp = os.path.join(out_dir, ".replay.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    os.replace(tmp, os.path.join(out_dir, "replay.json"))
    log("wrote %s" % out_dir)
    return 0


def main(argv):
    p = argparse.ArgumentParser(prog="replay_op.py")
    p.add_argument("dump")
    p.add_argument("--list", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--stage")
    p.add_argument("--candidate")
    p.add_argument("--reference")
    p.add_argument("--rank", type=int)
    p.add_argument("--window")
    p.add_argument("--device")
    p.add_argument("--arg", action="append", default=[])
    p.add_argument("--arg-map", action="append", default=[])
    p.add_argument("--out")
    args = p.parse_args(argv)
    try:
        if args.list:
            return cmd_list(args)
        if not (args.stage and args.candidate and args.reference and args.out):
            raise InputError("--stage, --candidate, --reference and --out are needed")
        return cmd_replay(args)
    except InputError as e:
        sys.stderr.write("replay_op.py: error: %s\n" % e)
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
