//! Saved tensors: safe readers for torch.save `.pt` archives and safetensors files, and the
//! element-wise comparison of two tensors (docs/tensors.md).
//!
//! Two layers, lowest first:
//! - `read`: the readers. They never copy tensor data (the file is memory-mapped) and never
//!   run pickle code: `.pt` pickles are interpreted by a small stack machine that honours only
//!   torch's tensor-rebuild globals. Exposed here as [`TensorFile`], [`TensorEntry`],
//!   [`TensorView`], [`DType`], [`FileFormat`] and [`TensorError`]; the unpickled object of a
//!   `.pt` archive itself as [`read_pickle`] and [`pickle`] (input sets read it, `model::input_set`).
//! - `compare`: the comparison of two views ([`metrics`]) and of two files key by key
//!   ([`pairing`]), and of two directory trees file by file ([`trees`]). It uses `read`,
//!   never the reverse; the text rendering of a comparison is
//!   `model::present::tensors`.

mod compare;
mod read;

pub use compare::{metrics, pairing, trees};
pub use read::{
    DType, FileFormat, TensorEntry, TensorError, TensorFile, TensorView, pickle, read_pickle,
};
