"""Candidate operators for tests/python/test_replay_op.py, loaded by replay_op.py as
``tests/python/replay_candidates.py:NAME``.

Written the way model code writes them (the formulas of examples/tiny_llama.py), not
copied from replay_op.py's built-ins, so agreement is evidence and not a tautology.
"""

import json
import os
import subprocess
import time

import torch


def rms_norm_ok(x, weight, eps):
    """HF LlamaRMSNorm, as tiny_llama.py computes it."""
    x32 = x.to(torch.float32)
    variance = x32.pow(2).mean(-1, keepdim=True)
    return weight * (x32 * torch.rsqrt(variance + eps)).to(x.dtype)


def rms_norm_eps_after(x, weight, eps):
    """Wrong on purpose: eps added after the normalization instead of inside the rsqrt."""
    x32 = x.to(torch.float32)
    variance = x32.pow(2).mean(-1, keepdim=True)
    return weight * (x32 * torch.rsqrt(variance) + eps).to(x.dtype)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rotate_wrong_half(x):
    # Wrong on purpose: the sign lands on the first half instead of the second.
    half = x.shape[-1] // 2
    return torch.cat((x[..., half:], -x[..., :half]), dim=-1)


def rope_ok(q, k, cos, sin, positions):
    """apply_rope of tiny_llama.py: x * cos + rotate_half(x) * sin, cos/sin [T, head_dim]."""
    c, s = cos[:, None, :], sin[:, None, :]
    return q * c + _rotate_half(q) * s, k * c + _rotate_half(k) * s


def rope_wrong_half(q, k, cos, sin, positions):
    c, s = cos[:, None, :], sin[:, None, :]
    return q * c + _rotate_wrong_half(q) * s, k * c + _rotate_wrong_half(k) * s


def rope_in_place(q, k, cos, sin, positions):
    """Like vLLM's rotary_embedding op: writes q and k in place and returns None."""
    c, s = cos[:, None, :], sin[:, None, :]
    q_new = q * c + _rotate_half(q) * s
    k_new = k * c + _rotate_half(k) * s
    q.copy_(q_new)
    k.copy_(k_new)


def rms_norm_slow(x, weight, eps):
    """Never finishes (for the workbench's cancel test): starts a child ``sleep`` in its own
    process group, writes {"pid", "pgid", "child"} to $REPLAY_SLOW_PID, then sleeps."""
    child = subprocess.Popen(["sleep", "600"])
    path = os.environ.get("REPLAY_SLOW_PID")
    if path:
        with open(path + ".tmp", "w") as handle:
            json.dump({"pid": os.getpid(), "pgid": os.getpgid(0), "child": child.pid}, handle)
        os.replace(path + ".tmp", path)
    time.sleep(600)
    return rms_norm_ok(x, weight, eps)


def crash(**named):
    raise RuntimeError("replay test candidate: illegal memory access (simulated)")


def unsupported(x, weight, eps):
    """Calls a torch kernel that has no float16 CPU implementation (torch 2.13: NotImplementedError
    "\"zeta_cpu\" not implemented for 'Half'"); should a later torch add one, raises that message."""
    torch.special.zeta(x, x)
    raise RuntimeError("\"zeta_cpu\" not implemented for '%s'"
                       % {torch.float16: "Half", torch.bfloat16: "BFloat16"}.get(x.dtype, str(x.dtype)))


def layout_probe(**named):
    """Records what it was handed (stride, storage_offset, dtype, device, values, which storages are shared)
    into the JSON files $REPLAY_LAYOUT_OUT.1, .2, ... (one per call), and returns h16 * 2."""
    seen = {}
    flat = {}
    for name, value in named.items():
        flat[name] = value
        if isinstance(value, (list, tuple)):  # tensors inside lists are looked at one by one too
            flat.update(("%s[%d]" % (name, i), v) for i, v in enumerate(value) if isinstance(v, torch.Tensor))
    for name, value in flat.items():
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage()
            seen[name] = {
                "dtype": str(value.dtype).replace("torch.", ""),
                "shape": list(value.shape),
                "stride": list(value.stride()),
                "storage_offset": int(value.storage_offset()),
                "device": str(value.device),
                "is_contiguous": bool(value.is_contiguous()),
                "storage_ptr": int(storage.data_ptr()),
                "storage_nbytes": int(storage.nbytes()),
                "data_ptr": int(value.data_ptr()),
                "values": value.detach().to(torch.float64).reshape(-1).tolist(),
            }
        else:
            seen[name] = {"type": type(value).__name__, "value": repr(value)}
    tensors = [n for n in seen if "storage_ptr" in seen[n]]
    shared = sorted(
        [a, b] for i, a in enumerate(tensors) for b in tensors[i + 1:]
        if seen[a]["storage_ptr"] == seen[b]["storage_ptr"]
    )
    path = os.environ.get("REPLAY_LAYOUT_OUT")
    if path:
        # One file per side: the candidate writes first, then reference, golden, reference_native.
        n = 1
        while os.path.exists("%s.%d" % (path, n)):
            n += 1
        with open("%s.%d" % (path, n), "w") as handle:
            json.dump({"args": seen, "shared": shared}, handle)
    h16 = named.get("h16")
    return h16 * 2 if isinstance(h16, torch.Tensor) else None


# --------------------------------------------------------------------------- case matrices
# tests/cases.rs and tests/python/test_cases_batch.py: RMSNorm candidates, each correct on the
# captured float32 call and wrong in one way the case matrix must tell apart.  Their verdicts
# never rest on the CPU's float16/bfloat16 kernels: the arithmetic is float64, rounded once, and
# the wrong one is off by 1.0.


def _rms_norm_f64(x, weight, eps):
    x64 = x.to(torch.float64)
    out = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps) * weight.to(torch.float64)
    return out.to(x.dtype)


def rms_norm_exact(x, weight, eps):
    """Correct for every dtype, layout and shape: float64 arithmetic rounded once."""
    return _rms_norm_f64(x, weight, eps)


def rms_norm_wrong_in_bf16(x, weight, eps):
    """Correct, except for bfloat16 inputs, where it adds 1.0 (a wrong bfloat16 kernel)."""
    out = _rms_norm_f64(x, weight, eps)
    return out + 1.0 if x.dtype == torch.bfloat16 else out


def rms_norm_needs_contiguous(x, weight, eps):
    """Correct on contiguous x; crashes on any other layout (a kernel that assumes dense rows)."""
    if not x.is_contiguous():
        raise RuntimeError("rms_norm kernel: illegal memory access reading x with stride %s" % (tuple(x.stride()),))
    return _rms_norm_f64(x, weight, eps)


def rms_norm_no_float64(x, weight, eps):
    """Correct, but refuses float64 as torch refuses a dtype (an unsupported combination)."""
    if x.dtype == torch.float64:
        raise RuntimeError("\"rms_norm_kernel\" not implemented for 'Double'")
    return _rms_norm_f64(x, weight, eps)


def rms_norm_hangs_on_eps(x, weight, eps):
    """Correct at the captured eps; sleeps 10 minutes at any other (a case to interrupt)."""
    if abs(eps - 1e-6) > 1e-12:
        time.sleep(600)
    return _rms_norm_f64(x, weight, eps)


# --------------------------------------------------------------------------- processes that die
# tests/replay.rs and tests/cases.rs: an NPU kernel that faults takes the whole process with it
# (no exception to catch).  ctypes.string_at(0) reads address 0: SIGSEGV, as a bad kernel does.


def _segfault():
    import ctypes

    ctypes.string_at(0)


def rms_norm_segfaults(x, weight, eps):
    """Prints a line (print-debugging, kept as candidate.stdout), then dies of SIGSEGV."""
    print("rms_norm_segfaults: x %s stride %s" % (tuple(x.shape), tuple(x.stride())), flush=True)
    _segfault()


def rms_norm_exits(x, weight, eps):
    """Ends the process with os._exit(3): no exception, no cleanup."""
    os._exit(3)


def rms_norm_segfaults_transposed(x, weight, eps):
    """Correct, except on a transposed x (stride 1 in the second-to-last dimension), where it
    dies of SIGSEGV, as a kernel that assumes dense rows reads out of bounds."""
    if x.dim() >= 2 and x.stride(-2) == 1 and x.shape[-1] > 1:
        print("rms_norm_segfaults_transposed: stride %s" % (tuple(x.stride()),), flush=True)
        _segfault()
    return _rms_norm_f64(x, weight, eps)


def rms_norm_reference_segfaults(x, weight, eps):
    """A reference that dies of SIGSEGV on float64 inputs (for a float32 capture: its reference
    run already) and is correct otherwise."""
    if x.dtype == torch.float64 and weight.dtype == torch.float64:
        _segfault()
    return _rms_norm_f64(x, weight, eps)


def rms_norm_prints(x, weight, eps):
    """Correct, and prints as a developer print-debugging a candidate does (kept as candidate.stdout)."""
    print("rms_norm_prints: x %s %s" % (tuple(x.shape), str(x.dtype).replace("torch.", "")))
    print("rms_norm_prints: eps %r" % (eps,))
    return _rms_norm_f64(x, weight, eps)


def rms_norm_one_inf(x, weight, eps):
    """Wrong on purpose: right but for one infinity, which msprobe's NaN cosine passes."""
    out = rms_norm_ok(x, weight, eps).clone()
    out.view(-1)[0] = float("inf")
    return out


def spectrum(x):
    """A complex output: the FFT along the last dimension (issue 31, item 5)."""
    return torch.fft.fft(x)


def spectrum_conjugated(x):
    """The same spectrum with its imaginary parts' signs flipped: a wrong complex output."""
    return torch.fft.fft(x).conj().resolve_conj()


def rms_norm_leaves_a_child(x, weight, eps):
    """Correct, but leaves a process running that holds the candidate's stderr (120 s): a
    remote replay must end anyway (issue 31, item 5)."""
    import subprocess
    subprocess.Popen(["sleep", "120.0042"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return rms_norm_ok(x, weight, eps)
