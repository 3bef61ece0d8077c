//! The element-wise comparison of saved tensors, lowest first:
//! - `element`: reading one element's value and ULP ordinal per storage format;
//! - `accumulate`: the running sums, firsts and histogram of a range, and the closeness rule;
//! - `simd`: the AVX2 kernel of contiguous float32 and bfloat16 pairs;
//! - `kernel`: one chunk of flat indices, by the portable lane path, the scalar path or
//!   `simd`;
//! - [`metrics`]: two views compared in parallel chunks, the results;
//! - [`pairing`]: two files compared key by key;
//! - [`trees`]: two directory trees compared file by file, by relative path.
//!
//! Each module uses only those listed before it (`simd`'s tests also run `kernel`'s
//! scalar path, to check that both agree).

mod accumulate;
mod element;
mod kernel;
pub mod metrics;
pub mod pairing;
mod simd;
pub mod trees;
