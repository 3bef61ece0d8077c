//! The built-in references: canonical formulas, each with its source, written with libtorch's
//! ops in the order the source writes them, so that the same libtorch computes the same values
//! in Rust and in replay_op.py.
//!
//! "Compute dtype" below: the source's own upcast, if any, and otherwise the dtype of the
//! inputs as [`Upcast`](super::Upcast) left them; torch's type promotion applies where inputs
//! differ (a float16 `x` times a float32 `weight` is float32, as in Python).

use tch::{Kind, Tensor};

use super::args::{Args, Builtin};
use super::failure::{Computed, Failure};

/// Every built-in, in the order docs/replay.md lists them.
pub static BUILTINS: &[Builtin] = &[
    Builtin {
        name: "rms_norm",
        params: &["x", "weight", "eps"],
        required: 2,
        outputs: &["out"],
        source: "HF transformers LlamaRMSNorm.forward (models/llama/modeling_llama.py)",
        compute: rms_norm,
    },
    Builtin {
        name: "add_rms_norm",
        params: &["x", "residual", "weight", "eps"],
        required: 3,
        outputs: &["out.0", "out.1"],
        source: "vLLM RMSNorm.forward_static with a residual \
                 (vllm/model_executor/layers/layernorm.py), fused_add_rms_norm",
        compute: add_rms_norm,
    },
    Builtin {
        name: "layer_norm",
        params: &["x", "weight", "bias", "eps"],
        required: 1,
        outputs: &["out"],
        source: "torch.nn.functional.layer_norm over the last dim(s), normalized_shape = \
                 weight.shape (else bias.shape, else x.shape[-1:])",
        compute: layer_norm,
    },
    Builtin {
        name: "softmax",
        params: &["x", "dim"],
        required: 1,
        outputs: &["out"],
        source: "torch.softmax(x, dim)",
        compute: softmax,
    },
    Builtin {
        name: "silu_and_mul",
        params: &["x"],
        required: 1,
        outputs: &["out"],
        source: "vLLM SiluAndMul.forward_native (vllm/model_executor/layers/activation.py)",
        compute: silu_and_mul,
    },
    Builtin {
        name: "gelu",
        params: &["x"],
        required: 1,
        outputs: &["out"],
        source: "torch.nn.functional.gelu(x), exact: x * 0.5 * (1 + erf(x / sqrt(2)))",
        compute: gelu,
    },
    Builtin {
        name: "gelu_tanh",
        params: &["x"],
        required: 1,
        outputs: &["out"],
        source: "torch.nn.functional.gelu(x, approximate='tanh'): \
                 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))",
        compute: gelu_tanh,
    },
    Builtin {
        name: "rope_neox",
        params: &["q", "k", "cos", "sin", "positions"],
        required: 4,
        outputs: &["out.0", "out.1"],
        source: "GPT-NeoX / HF apply_rotary_pos_emb (rotate_half layout, RoFormer \
                 arXiv:2104.09864): x * cos + rotate_half(x) * sin",
        compute: rope_neox,
    },
    Builtin {
        name: "rope_gptj",
        params: &["q", "k", "cos", "sin", "positions"],
        required: 4,
        outputs: &["out.0", "out.1"],
        source: "GPT-J apply_rotary_pos_emb (interleaved pairs, rotate_every_two; RoFormer \
                 arXiv:2104.09864): x * cos + rotate_every_two(x) * sin",
        compute: rope_gptj,
    },
    Builtin {
        name: "linear",
        params: &["x", "weight", "bias"],
        required: 2,
        outputs: &["out"],
        source: "torch.nn.functional.linear: x @ weight.T + bias",
        compute: linear,
    },
    Builtin {
        name: "sdpa",
        params: &["q", "k", "v", "mask", "scale"],
        required: 3,
        outputs: &["out"],
        source: "torch.nn.functional.scaled_dot_product_attention, the reference \
                 implementation in its documentation (torch 2.13)",
        compute: sdpa,
    },
    Builtin {
        name: "sdpa_causal",
        params: &["q", "k", "v", "scale"],
        required: 3,
        outputs: &["out"],
        source: "torch.nn.functional.scaled_dot_product_attention(is_causal=True), the \
                 reference implementation in its documentation (torch 2.13)",
        compute: sdpa_causal,
    },
    Builtin {
        name: "matmul",
        params: &["a", "b"],
        required: 2,
        outputs: &["out"],
        source: "torch.matmul(a, b)",
        compute: matmul,
    },
];

/// The names, comma-separated, for messages.
pub(crate) fn names() -> String {
    BUILTINS
        .iter()
        .map(|b| b.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The dtype HF and vLLM normalize in: float32, or float64 when the input already is (so the
/// float64 golden is not narrowed).
fn norm_kind(kind: Kind) -> Kind {
    match kind {
        Kind::Double => Kind::Double,
        _ => Kind::Float,
    }
}

/// `x * rsqrt(mean(x^2, -1) + eps)`, in `x`'s dtype.
fn normalize(x: &Tensor, eps: f64) -> Computed<Tensor> {
    let variance = x.f_pow_tensor_scalar(2)?.f_mean_dim(-1, true, None)?;
    Ok(x.f_mul(&variance.f_add_scalar(eps)?.f_rsqrt()?)?)
}

/// HF LlamaRMSNorm:
/// ```python
/// input_dtype = hidden_states.dtype
/// hidden_states = hidden_states.to(torch.float32)
/// variance = hidden_states.pow(2).mean(-1, keepdim=True)
/// hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
/// return self.weight * hidden_states.to(input_dtype)
/// ```
/// with float64 kept as float64 instead of narrowed to float32.
fn rms_norm(a: &Args<'_>) -> Computed<Vec<Tensor>> {
    let x = a.tensor("x")?;
    let weight = a.tensor("weight")?;
    let eps = a.float("eps")?.unwrap_or(1e-6);
    let input = x.kind();
    let h = normalize(&x.f_to_kind(norm_kind(input))?, eps)?;
    Ok(vec![weight.f_mul(&h.f_to_kind(input)?)?])
}

/// vLLM RMSNorm.forward_static with a residual (the semantics of `fused_add_rms_norm`):
/// ```python
/// orig_dtype = x.dtype
/// x = x.to(torch.float32)
/// x = x + residual.to(torch.float32)
/// residual = x.to(orig_dtype)
/// variance = x.pow(2).mean(dim=-1, keepdim=True)
/// x = x * torch.rsqrt(variance + variance_epsilon)
/// x = x.to(orig_dtype)
/// x = x * weight
/// return x, residual
/// ```
/// with float64 kept as float64.
fn add_rms_norm(a: &Args<'_>) -> Computed<Vec<Tensor>> {
    let x = a.tensor("x")?;
    let residual = a.tensor("residual")?;
    let weight = a.tensor("weight")?;
    let eps = a.float("eps")?.unwrap_or(1e-6);
    let orig = x.kind();
    let wide = norm_kind(orig);
    let sum = x.f_to_kind(wide)?.f_add(&residual.f_to_kind(wide)?)?;
    let residual_out = sum.f_to_kind(orig)?;
    let out = normalize(&sum, eps)?.f_to_kind(orig)?.f_mul(&weight)?;
    Ok(vec![out, residual_out])
}

/// `torch.nn.functional.layer_norm(x, normalized_shape, weight, bias, eps)` with
/// `normalized_shape = weight.shape` (else `bias.shape`, else `x.shape[-1:]`): `(x - E[x]) / sqrt(Var[x] + eps)
/// * weight + bias`, biased variance, over the normalized dims.
fn layer_norm(a: &Args<'_>) -> Computed<Vec<Tensor>> {
    let x = a.tensor("x")?;
    let weight = a.opt_tensor("weight")?;
    let bias = a.opt_tensor("bias")?;
    let eps = a.float("eps")?.unwrap_or(1e-5);
    let shape = match (&weight, &bias) {
        (Some(w), _) => w.size(),
        (None, Some(b)) => b.size(),
        (None, None) => vec![last_dim(&x, "x")?],
    };
    Ok(vec![x.f_layer_norm(
        shape.as_slice(),
        weight.as_ref(),
        bias.as_ref(),
        eps,
        false,
    )?])
}

/// `torch.softmax(x, dim)`: `exp(x - max) / sum(exp(x - max))` along `dim`.
fn softmax(a: &Args<'_>) -> Computed<Vec<Tensor>> {
    let x = a.tensor("x")?;
    let dim = a.int("dim")?.unwrap_or(-1);
    Ok(vec![x.f_softmax(dim, None)?])
}

/// vLLM SiluAndMul.forward_native:
/// ```python
/// d = x.shape[-1] // 2
/// return F.silu(x[..., :d]) * x[..., d:]
/// ```
fn silu_and_mul(a: &Args<'_>) -> Computed<Vec<Tensor>> {
    let x = a.tensor("x")?;
    let last = last_dim(&x, "x")?;
    if last % 2 != 0 {
        return Err(Failure::Arguments(format!(
            "parameter `x` has an odd last dimension ({last}): silu_and_mul halves it"
        )));
    }
    let d = last / 2;
    let gate = x.f_narrow(-1, 0, d)?.f_silu()?;
    Ok(vec![gate.f_mul(&x.f_narrow(-1, d, d)?)?])
}

/// `torch.nn.functional.gelu(x)` (approximate='none'): `x * 0.5 * (1 + erf(x / sqrt(2)))`.
fn gelu(a: &Args<'_>) -> Computed<Vec<Tensor>> {
    Ok(vec![a.tensor("x")?.f_gelu("none")?])
}

/// `torch.nn.functional.gelu(x, approximate='tanh')`:
/// `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`.
fn gelu_tanh(a: &Args<'_>) -> Computed<Vec<Tensor>> {
    Ok(vec![a.tensor("x")?.f_gelu("tanh")?])
}

/// The rotary layouts.
#[derive(Clone, Copy)]
enum Rotary {
    /// GPT-NeoX / HF: the two halves of the head dim rotate together.
    Neox,
    /// GPT-J: adjacent pairs (0, 1), (2, 3), ... rotate together.
    Gptj,
}

/// GPT-NeoX / HF `rotate_half`:
/// ```python
/// x1 = x[..., : x.shape[-1] // 2]
/// x2 = x[..., x.shape[-1] // 2 :]
/// return torch.cat((-x2, x1), dim=-1)
/// ```
fn rotate_half(x: &Tensor) -> Computed<Tensor> {
    let half = last_dim(x, "q/k")? / 2;
    let x1 = x.f_narrow(-1, 0, half)?;
    let x2 = x.f_narrow(-1, half, half)?;
    Ok(Tensor::f_cat(&[x2.f_neg()?, x1], -1)?)
}

/// GPT-J `rotate_every_two`:
/// ```python
/// x1 = x[:, :, :, ::2]
/// x2 = x[:, :, :, 1::2]
/// x = torch.stack((-x2, x1), dim=-1)
/// return x.flatten(-2)
/// ```
fn rotate_every_two(x: &Tensor) -> Computed<Tensor> {
    let x1 = x.f_slice(-1, 0, None, 2)?;
    let x2 = x.f_slice(-1, 1, None, 2)?;
    Ok(Tensor::f_stack(&[x2.f_neg()?, x1], -1)?.f_flatten(-2, -1)?)
}

/// `x * cos + rotate(x) * sin` for `x` of shape `[T, ..., head_dim]` (tokens first, the
/// dims between are heads) or `[T, heads * head_dim]`, and `cos`/`sin` of `[T, head_dim]` per
/// token, or `[T, head_dim / 2]` (repeated to `head_dim`: concatenated twice for NeoX, each
/// value twice in a row for GPT-J). When `positions` is given and `cos.shape[0] != T`, `cos`
/// and `sin` are a table indexed by `positions` (`cos[positions]`). A table narrower than
/// that rotates the first dims only and passes the rest (partial rotary), as replay_op.py's
/// `_rope_apply`. For a 2-D `x`, `head_dim` is the table's width.
fn rope(a: &Args<'_>, layout: Rotary) -> Computed<Vec<Tensor>> {
    let q = a.tensor("q")?;
    let k = a.tensor("k")?;
    let cos = a.tensor("cos")?;
    let sin = a.tensor("sin")?;
    let positions = a.opt_tensor("positions")?;
    let apply = |x: &Tensor, name: &str| -> Computed<Tensor> {
        rope_apply(x, name, &cos, &sin, positions.as_ref(), layout)
    };
    Ok(vec![apply(&q, "q")?, apply(&k, "k")?])
}

/// One of `q`, `k` through [`rope`]'s formula.
fn rope_apply(
    x: &Tensor,
    name: &str,
    cos: &Tensor,
    sin: &Tensor,
    positions: Option<&Tensor>,
    layout: Rotary,
) -> Computed<Tensor> {
    let shape = x.size();
    if shape.len() < 2 {
        return Err(Failure::Arguments(format!(
            "parameter `{name}` has {} dimensions; rope needs [T, ..., head_dim]",
            shape.len()
        )));
    }
    let tokens = shape[0];
    let (mut cos, mut sin) = (cos.shallow_clone(), sin.shallow_clone());
    if let Some(positions) = positions {
        if cos.size().first() != Some(&tokens) {
            let index = positions.f_to_kind(Kind::Int64)?.f_reshape([-1])?;
            cos = cos.f_index_select(0, &index)?;
            sin = sin.f_index_select(0, &index)?;
        }
    }
    if cos.size().first() != Some(&tokens) {
        return Err(Failure::Arguments(format!(
            "`cos` has {:?} rows for {tokens} tokens (give positions to index a table)",
            cos.size().first()
        )));
    }
    cos = cos.f_reshape([tokens, -1])?;
    sin = sin.f_reshape([tokens, -1])?;
    let head_dim = if shape.len() >= 3 {
        shape[shape.len() - 1]
    } else {
        last_dim(&cos, "cos")?
    };
    if last_dim(&cos, "cos")? * 2 == head_dim {
        let widen = |t: &Tensor| -> Computed<Tensor> {
            Ok(match layout {
                Rotary::Neox => Tensor::f_cat(&[t, t], -1)?,
                Rotary::Gptj => t.f_repeat_interleave_self_int(2, -1, None)?,
            })
        };
        cos = widen(&cos)?;
        sin = widen(&sin)?;
    }
    let h = if shape.len() == 2 {
        x.f_reshape([tokens, -1, head_dim])?
    } else {
        x.shallow_clone()
    };
    // [T, D] -> [T, 1, ..., 1, D]: broadcast over the head dims.
    let rot = last_dim(&cos, "cos")?;
    let mut view = vec![tokens];
    view.extend(std::iter::repeat_n(1, h.dim() - 2));
    view.push(rot);
    let (cos, sin) = (
        cos.f_reshape(view.as_slice())?,
        sin.f_reshape(view.as_slice())?,
    );
    let h_rot = h.f_slice(-1, 0, rot, 1)?;
    let h_pass = h.f_slice(-1, rot, None, 1)?;
    let turned = match layout {
        Rotary::Neox => rotate_half(&h_rot)?,
        Rotary::Gptj => rotate_every_two(&h_rot)?,
    };
    let mut out = h_rot.f_mul(&cos)?.f_add(&turned.f_mul(&sin)?)?;
    if last_dim(&h_pass, name)? > 0 {
        out = Tensor::f_cat(&[out, h_pass], -1)?;
    }
    Ok(out.f_reshape(shape.as_slice())?)
}

/// Rotary embedding, GPT-NeoX / HF layout (`rotate_half`), as HF `apply_rotary_pos_emb`:
/// `q * cos + rotate_half(q) * sin`, the same for `k`.
fn rope_neox(a: &Args<'_>) -> Computed<Vec<Tensor>> {
    rope(a, Rotary::Neox)
}

/// Rotary embedding, GPT-J layout (interleaved pairs, `rotate_every_two`):
/// `q * cos + rotate_every_two(q) * sin`, the same for `k`.
fn rope_gptj(a: &Args<'_>) -> Computed<Vec<Tensor>> {
    rope(a, Rotary::Gptj)
}

/// `torch.nn.functional.linear(x, weight, bias)`: `x @ weight.T + bias`.
fn linear(a: &Args<'_>) -> Computed<Vec<Tensor>> {
    let x = a.tensor("x")?;
    let weight = a.tensor("weight")?;
    let bias = a.opt_tensor("bias")?;
    Ok(vec![x.f_linear(&weight, bias.as_ref())?])
}

/// The reference implementation of `torch.nn.functional.scaled_dot_product_attention` in
/// its documentation:
/// ```python
/// L, S = query.size(-2), key.size(-2)
/// scale_factor = 1 / math.sqrt(query.size(-1)) if scale is None else scale
/// attn_bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
/// if is_causal:
///     temp_mask = torch.ones(L, S, dtype=torch.bool).tril(diagonal=0)
///     attn_bias.masked_fill_(temp_mask.logical_not(), float("-inf"))
/// if attn_mask is not None:
///     if attn_mask.dtype == torch.bool:
///         attn_bias.masked_fill_(attn_mask.logical_not(), float("-inf"))
///     else:
///         attn_bias = attn_mask + attn_bias
/// attn_weight = query @ key.transpose(-2, -1) * scale_factor
/// attn_weight += attn_bias
/// attn_weight = torch.softmax(attn_weight, dim=-1)
/// return attn_weight @ value
/// ```
/// (a boolean mask with batch dims broadcasts: `masked_fill`, not in place), and, when `q` has
/// more heads (dim -3) than `k`, grouped-query attention as `enable_gqa=True`: each key and
/// value head repeated (`repeat_interleave`) for its group of query heads.
fn attention(a: &Args<'_>, causal: bool, mask: Option<Tensor>) -> Computed<Vec<Tensor>> {
    let q = a.tensor("q")?;
    let mut k = a.tensor("k")?;
    let mut v = a.tensor("v")?;
    let (l, s) = (dim_from_end(&q, 2, "q")?, dim_from_end(&k, 2, "k")?);
    let scale = match a.float("scale")? {
        Some(scale) => scale,
        None => 1.0 / (last_dim(&q, "q")? as f64).sqrt(),
    };
    let options = (q.kind(), q.device());
    let mut bias = Tensor::f_zeros([l, s], options)?;
    if causal {
        let keep = Tensor::f_ones([l, s], (Kind::Bool, q.device()))?.f_tril(0)?;
        bias = bias.f_masked_fill(&keep.f_logical_not()?, f64::NEG_INFINITY)?;
    }
    if let Some(mask) = mask {
        bias = match mask.kind() {
            Kind::Bool => bias.f_masked_fill(&mask.f_logical_not()?, f64::NEG_INFINITY)?,
            _ => mask.f_add(&bias)?,
        };
    }
    if q.dim() >= 3 && k.dim() >= 3 {
        let (hq, hk) = (dim_from_end(&q, 3, "q")?, dim_from_end(&k, 3, "k")?);
        if hq != hk && hk > 0 {
            k = k.f_repeat_interleave_self_int(hq / hk, -3, None)?;
            v = v.f_repeat_interleave_self_int(hq / dim_from_end(&v, 3, "v")?.max(1), -3, None)?;
        }
    }
    let weight = q
        .f_matmul(&k.f_transpose(-2, -1)?)?
        .f_mul_scalar(scale)?
        .f_add(&bias)?
        .f_softmax(-1, None)?;
    Ok(vec![weight.f_matmul(&v)?])
}

/// Scaled dot-product attention with an optional additive or boolean mask.
fn sdpa(a: &Args<'_>) -> Computed<Vec<Tensor>> {
    let mask = a.opt_tensor("mask")?;
    attention(a, false, mask)
}

/// Scaled dot-product attention, causal (`is_causal=True`: query i sees keys 0..=i).
fn sdpa_causal(a: &Args<'_>) -> Computed<Vec<Tensor>> {
    attention(a, true, None)
}

/// `torch.matmul(a, b)`.
fn matmul(a: &Args<'_>) -> Computed<Vec<Tensor>> {
    Ok(vec![a.tensor("a")?.f_matmul(&a.tensor("b")?)?])
}

/// The size of the last dimension of `t`.
fn last_dim(t: &Tensor, name: &str) -> Computed<i64> {
    dim_from_end(t, 1, name)
}

/// The size of dimension `-from_end` of `t`.
fn dim_from_end(t: &Tensor, from_end: usize, name: &str) -> Computed<i64> {
    let size = t.size();
    size.len()
        .checked_sub(from_end)
        .map(|i| size[i])
        .ok_or_else(|| {
            Failure::Arguments(format!(
                "parameter `{name}` has {} dimensions; at least {from_end} needed",
                size.len()
            ))
        })
}
