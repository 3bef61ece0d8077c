//! The built-in replay references computed in-process with libtorch (tch), from a captured
//! input set: `dumpview replay --reference builtin:NAME` needs no Python for the reference.
//! Built only with the cargo feature `torch` (README "The torch feature").
//!
//! The built-ins are the ones `assets/replay_op.py` has under the same names, with the same
//! argument conventions and the same formulas (docs/replay.md), each citing its canonical
//! source in [`builtins`]:
//!
//! | name | parameters | outputs |
//! |---|---|---|
//! | `rms_norm` | `x, weight, eps=1e-6` | `out` |
//! | `add_rms_norm` | `x, residual, weight, eps=1e-6` | `out.0` (normalized), `out.1` (x + residual) |
//! | `layer_norm` | `x, weight=None, bias=None, eps=1e-5` | `out` |
//! | `softmax` | `x, dim=-1` | `out` |
//! | `silu_and_mul` | `x` | `out` |
//! | `gelu`, `gelu_tanh` | `x` | `out` |
//! | `rope_neox`, `rope_gptj` | `q, k, cos, sin, positions=None` | `out.0` (q), `out.1` (k) |
//! | `linear` | `x, weight, bias=None` | `out` |
//! | `sdpa` | `q, k, v, mask=None, scale=None` | `out` |
//! | `sdpa_causal` | `q, k, v, scale=None` | `out` |
//! | `matmul` | `a, b` | `out` |
//!
//! Arguments bind as replay_op.py binds them: by keyword when every captured name is a
//! parameter of the built-in, else positionally in captured order. Each tensor is rebuilt on
//! the CPU with its exact dtype, shape and stride (`as_strided` over a storage holding its
//! span), then upcast as [`Upcast`] says; the formula runs in the dtype of its inputs (no
//! internal upcast other than what its source does). Outputs are copied out contiguous.
//!
//! No tch type is part of this API: callers hand in an [`InputSet`] and get plain
//! [`ComputedTensor`]s back.

mod args;
pub mod builtins;
mod convert;
mod failure;

use crate::model::input_set::InputSet;
use crate::model::tensor::DType;

pub use crate::model::replay::ComputedTensor;
pub use args::Builtin;
pub use builtins::BUILTINS;

/// Who computes these references, in the words a replay's output gives each side it
/// computed: tch 0.26 binds libtorch 2.13 (torch-sys refuses any other at build time).
pub const COMPUTED_BY: &str = "in-process (tch, libtorch 2.13)";

/// Whether `spec` is `builtin:NAME` with NAME one of [`BUILTINS`].
pub fn is_builtin(spec: &str) -> bool {
    spec.strip_prefix("builtin:")
        .is_some_and(|name| BUILTINS.iter().any(|b| b.name == name))
}

/// Which precision the captured float tensors are brought to before the formula runs.
/// Integer and bool tensors and all scalars are passed unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upcast {
    /// As captured: the reference in the candidate's dtype (replay_op.py's
    /// `reference_native.pt`).
    None,
    /// msprobe's benchmark precision: float16, bfloat16 and float8 to float32, float32 to
    /// float64 (replay_op.py's `reference.pt`).
    Benchmark,
    /// Every float to float64 (replay_op.py's `golden.pt`).
    Float64,
}

impl Upcast {
    /// The dtype a captured float tensor of `dtype` is computed in.
    pub fn apply(self, dtype: DType) -> DType {
        match (self, dtype) {
            (_, d) if !d.is_float() => d,
            (Upcast::None, d) => d,
            (Upcast::Float64, _) => DType::Float64,
            (Upcast::Benchmark, DType::Float32 | DType::Float64) => DType::Float64,
            (Upcast::Benchmark, _) => DType::Float32,
        }
    }
}

/// A built-in reference could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReferenceError {
    /// No built-in of that name.
    #[error(
        "unknown built-in reference `{name}`; the built-ins are {}",
        builtins::names()
    )]
    Unknown {
        /// The name asked for (without `builtin:`).
        name: String,
    },
    /// The input set does not fit the built-in's parameters: a missing or surplus argument,
    /// a value of the wrong kind, a dtype libtorch cannot hold.
    #[error("builtin:{builtin}: {problem}")]
    Arguments {
        /// The built-in.
        builtin: &'static str,
        /// What does not fit, naming the argument.
        problem: String,
    },
    /// libtorch refused the computation (mismatched shapes, a dtype an op does not
    /// implement): its message, without the C++ backtrace.
    #[error("builtin:{builtin}: libtorch: {message}")]
    Torch {
        /// The built-in.
        builtin: &'static str,
        /// libtorch's message, e.g. `"\"rsqrt_cpu\" not implemented for 'Long'"`.
        message: String,
    },
}

/// Computes built-in reference `name` (with or without the `builtin:` prefix) on `inputs`,
/// the captured float tensors brought to the precision `upcast` says, on the CPU.
///
/// Returns the outputs in order, named as replay_op.py names them: `out` for a single
/// tensor, `out.0`, `out.1`, … for a tuple.
///
/// # Errors
/// [`ReferenceError::Unknown`] for a name that is no built-in; [`ReferenceError::Arguments`]
/// when the input set does not bind to its parameters; [`ReferenceError::Torch`] when
/// libtorch raises.
pub fn run_builtin(
    name: &str,
    inputs: &InputSet,
    upcast: Upcast,
) -> Result<Vec<(String, ComputedTensor)>, ReferenceError> {
    let bare = name.strip_prefix("builtin:").unwrap_or(name);
    let builtin = BUILTINS
        .iter()
        .find(|b| b.name == bare)
        .ok_or_else(|| ReferenceError::Unknown { name: bare.into() })?;
    let bound = args::Args::bind(builtin, inputs, upcast)?;
    let outputs =
        tch::no_grad(|| (builtin.compute)(&bound)).map_err(|e| e.into_error(builtin.name))?;
    let named: Vec<(String, tch::Tensor)> = match outputs.len() {
        1 => outputs
            .into_iter()
            .map(|t| ("out".to_string(), t))
            .collect(),
        _ => outputs
            .into_iter()
            .enumerate()
            .map(|(i, t)| (format!("out.{i}"), t))
            .collect(),
    };
    named
        .into_iter()
        .map(|(n, t)| {
            convert::computed(&t)
                .map(|c| (n, c))
                .map_err(|e| e.into_error(builtin.name))
        })
        .collect()
}
