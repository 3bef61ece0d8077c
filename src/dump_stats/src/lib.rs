//! The one definition of the tensor statistics (docs/manifest.md, "stats") that every probe and
//! reader of dumpview computes or reads: their names and order ([`names`]), the position
//! checksum's weights ([`weights`]), and how the sums are accumulated ([`acc`], [`lanes`]).
//!
//! Who uses it: the native probe (`src/probe_ffi`, whose `dp_summarize` also serves
//! `assets/dump_probe.py` on cpu) reduces staged views with [`Acc`] and [`lanes`]; the windowed
//! reader (`src/model/formats/windowed/stats.rs`) reduces saved tensors with [`Acc`]; the
//! manifest readers and the comparison take the names from [`STAT_NAMES`] and
//! [`VALUE_STAT_NAMES`]. `assets/dump_probe.py` keeps its own torch and Triton kernels;
//! `tests/stat_definitions.rs` holds its name list and weight constants to this crate.
//!
//! # The statistics
//!
//! Let *F* be the finite elements of a tensor with at least one element (a tensor without
//! elements has no statistics):
//!
//! | name | definition |
//! |---|---|
//! | `nan_count`, `inf_count` | NaN elements; +inf or −inf elements (0 for integers and bools) |
//! | `finite_count` | \|F\| = numel − nan_count − inf_count |
//! | `max_abs` | max(\|min\|, \|max\|); none when F is empty |
//! | `min`, `max` | smallest and largest element of F; none when F is empty |
//! | `mean` | Σ_F x / \|F\|; none when F is empty |
//! | `l2` | sqrt(Σ_F x²); 0 when F is empty |
//! | `pos_checksum` | Σ_F x\[r,c\]·u(r)·v(c) over the tensor viewed as a matrix \[rows, cols\] in logical row-major order (cols the last dimension's size, rows the leading dimensions flattened, a 0-d tensor \[1, 1\]), with the weights of [`weights`]; 0 when F is empty |
//!
//! Integers and bools are summarised as their values (`false` 0, `true` 1).
//!
//! # Accumulation
//!
//! Every element is decoded exactly to `f64` and every sum runs in `f64`. The matrix is reduced
//! in chunks of [`CHUNK`] logical elements; within a chunk, element by element in logical order
//! ([`Acc::take`]), or, for runs of adjacent all-finite elements, in [`lanes::LANES`] lanes with
//! fused multiply-adds ([`lanes`]); a row's weighted values are summed first and weighted by u(r)
//! once ([`Acc::close_row`]); chunks are merged with [`Acc::merge`]. [`summarize`] turns the
//! whole tensor's [`Acc`] into a [`Summary`], with the one rescue of an `l2` whose squares
//! overflow. Sums are therefore not exact float64 results: their error stays near
//! (CHUNK + log₂ n)·2⁻⁵³·Σ|x|, and two implementations that order or fuse differently agree to
//! that bound, not to the bit.
//!
//! # Per-row statistics of token rows
//!
//! A record whose leading dimension(s) hold the forward's tokens also gets, per token row,
//! the five values of [`ROW_STAT_NAMES`]. A token row is `k` rows of the tensor's matrix view
//! `[rows·k, cols]` (cols: the last dimension's size; 1 when the last dimension is itself a
//! token dimension, as for a 1-D tensor); F is its finite elements, `x[j, c]` its element in
//! matrix row `j` and column `c`, p the token's absolute position:
//!
//! | name | definition |
//! |---|---|
//! | `nonfinite_count` | NaN and ±inf elements of the row |
//! | `max_abs` | max over F of \|x\|; 0 when F is empty |
//! | `sum` | Σ_F x |
//! | `sum_squares` | Σ_F x² |
//! | `row_checksum` | Σ_F x\[j, c\]·u(p·k + j)·v(c): `pos_checksum`'s terms at the token's position; 0 for padding |
//!
//! With the token's position in place of its index, the row checksums of a forward whose rows
//! start at position 0 sum to its `pos_checksum` (at any rank), and the rows of prefill chunks
//! add up to the whole prompt's. They are reduced in float32 (float64 for float64 tensors) on the tensor's device
//! and stored as float32 (docs/manifest.md, "Token rows"). The Python probe computes them with
//! torch ops; the native probe's pass is still [`Reduction::Whole`] alone.

#![deny(missing_docs)]

pub mod acc;
pub mod lanes;
pub mod names;
pub mod reduction;
pub mod weights;

pub use acc::{Acc, Run, Summary, summarize};
pub use names::{ROW_STAT_NAMES, STAT_NAMES, Stat, VALUE_STAT_NAMES};
pub use reduction::{Axis, Reduction};
pub use weights::{COL_MUL, ROW_MUL, TWO_POW_32, col_weight, row_weight, weight};

/// Logical elements per chunk: the unit of parallel work, and the length of the sequential sums
/// whose rounding error the bound in the crate's docs counts.
pub const CHUNK: u64 = 1 << 14;
