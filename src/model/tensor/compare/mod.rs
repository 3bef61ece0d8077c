//! The element-wise comparison of saved tensors, lowest first: the per-chunk kernels
//! (`kernel`, with the AVX2 path in `simd`), the metrics of two views ([`metrics`]), two files
//! compared key by key ([`pairing`]), and the plain-text rendering of a comparison
//! ([`text`]).

mod kernel;
pub mod metrics;
pub mod pairing;
mod simd;
pub mod text;
