//! Saved tensors: safe readers for torch.save `.pt` archives and safetensors files, and the
//! element-wise comparison of two tensors (docs/tensors.md).
//!
//! Two layers, lowest first:
//! - `read`: the readers. They never copy tensor data (the file is memory-mapped) and never
//!   run pickle code: `.pt` pickles are interpreted by a small stack machine that honours only
//!   torch's tensor-rebuild globals. Exposed here as [`TensorFile`], [`TensorEntry`],
//!   [`TensorView`], [`DType`], [`FileFormat`] and [`TensorError`].
//! - `compare`: the comparison of two views ([`metrics`]), of two files key by key
//!   ([`pairing`]), and its plain-text rendering ([`text`]). It uses `read`, never the
//!   reverse.

mod compare;
mod read;

pub use compare::{metrics, pairing};
pub use read::{DType, FileFormat, TensorEntry, TensorError, TensorFile, TensorView};
