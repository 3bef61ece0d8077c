//! Saved tensors: safe readers for torch.save `.pt` archives and safetensors files, and the
//! element-wise comparison of two tensors (docs/tensors.md).
//!
//! Readers never copy tensor data (the file is memory-mapped) and never run pickle code:
//! `.pt` pickles are interpreted by a small stack machine that honours only torch's
//! tensor-rebuild globals ([`pickle`]).

pub mod dtype;
pub mod file;
mod kernel;
pub mod metrics;
pub mod pairing;
pub mod pickle;
pub mod pt;
pub mod safetensors;
mod simd;
pub mod text;
pub mod view;

pub use dtype::DType;
pub use file::{FileFormat, TensorEntry, TensorError, TensorFile};
pub use view::TensorView;
