//! Element-wise comparison of two tensors: one parallel pass over both, `f64` accumulation.
//!
//! Definitions (docs/tensors.md):
//! - a *finite pair* is a position where both values are finite; the difference metrics
//!   (`max_abs_diff`, `mean_abs_diff`, `cosine`, `rel_l2`, the histogram) are over finite
//!   pairs only, and non-finite values are reported by class (NaN, +inf, -inf) instead;
//! - closeness is torch.isclose's rule (torch docs, `torch.isclose`): `a == b`, or both
//!   finite and `|a - b| <= atol + rtol * |b|`, or `equal_nan` and both NaN — B is the
//!   reference. dumpview evaluates it in `f64`; torch evaluates it in the tensors' dtype, so
//!   a difference within one ULP of the threshold can be judged differently;
//! - `rel_l2 = ||a - b||₂ / ||b||₂`, `cosine = a·b / (||a||₂ ||b||₂)`;
//! - the ULP distance counts representable values of the compared dtype between a and b
//!   (sign-magnitude bit patterns as signed integers, +0 = -0), for floating dtypes, over
//!   positions where neither value is NaN;
//! - the histogram counts finite pairs by decade `floor(log10 |a - b|)`, exact zeros apart.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rayon::prelude::*;
use serde::Serialize;

use super::accumulate::{Accumulator, Rule};
use super::element::{BF16, Cast, Decoded, ElementReader, F16, F32, F64};
use super::kernel;
use crate::model::tensor::read::{DType, TensorView};

/// The default absolute tolerance: a coarse screen, not a verdict (give `--atol`).
pub const DEFAULT_ATOL: f64 = 1e-5;
/// The default relative tolerance: a coarse screen that bfloat16 rounding (2^-8) passes.
pub const DEFAULT_RTOL: f64 = 1e-2;

/// How two tensors are compared.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Options {
    /// Absolute tolerance of the closeness rule (same unit as the values).
    pub atol: f64,
    /// Relative tolerance of the closeness rule, times `|b|`.
    pub rtol: f64,
    /// Whether NaN in both at one position counts as close.
    pub equal_nan: bool,
    /// Round both sides to this dtype before comparing. `None` compares the values as they
    /// are: in their dtype when both sides share it, else losslessly as float64 (an int64 on
    /// either side of a mixed pair is refused: it is not exact in float64).
    pub cast: Option<DType>,
    /// Count ULP distances in this dtype (both values rounded to it first). `None`: the
    /// coarsest floating dtype of the two sides and the cast, so a float32-vs-bfloat16 pair,
    /// compared as float64, counts ULPs of bfloat16.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ulp_in: Option<DType>,
    /// Refuse tensors of more elements than this ([`CompareError::TooLarge`]): a stride-0
    /// expanded view of a few bytes on disk can claim 2^40 elements.
    #[serde(skip)]
    pub max_elements: u64,
}

/// The default element budget of one comparison: 2^32 elements (16 GiB of float32 per side,
/// tens of seconds on a laptop).
pub const DEFAULT_MAX_ELEMENTS: u64 = 1 << 32;

impl Default for Options {
    fn default() -> Self {
        Options {
            atol: DEFAULT_ATOL,
            rtol: DEFAULT_RTOL,
            equal_nan: false,
            cast: None,
            ulp_in: None,
            max_elements: DEFAULT_MAX_ELEMENTS,
        }
    }
}

/// Progress and cancellation shared between a comparison and whoever watches it.
#[derive(Debug, Default)]
pub struct CompareProgress {
    /// Elements compared so far (summed over every comparison sharing this value).
    pub done: AtomicU64,
    /// Elements to compare in all, set by [`super::pairing::compare_files`] before it starts
    /// (0 until then), so a watcher needs no second look at the files.
    pub total: AtomicU64,
    /// Set to stop: the comparison returns [`CompareError::Cancelled`] at its next chunk.
    pub cancel: AtomicBool,
}

/// Why two tensors were not compared.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompareError {
    /// The shapes differ (no broadcasting).
    #[error("shape differs: {a:?} vs {b:?}")]
    Shape {
        /// A's shape.
        a: Vec<usize>,
        /// B's shape.
        b: Vec<usize>,
    },
    /// The dtypes differ, one is int64 (not exact in float64), and no [`Options::cast`] was
    /// given.
    #[error(
        "dtype differs: {a} vs {b}, and int64 is not exact in float64; give --cast <dtype> to compare both rounded to one dtype"
    )]
    DType {
        /// A's dtype.
        a: DType,
        /// B's dtype.
        b: DType,
    },
    /// The tensors hold more elements than [`Options::max_elements`].
    #[error(
        "{numel} elements exceed the budget of {max} (a stride-0 expanded view?); give --max-elements to compare anyway"
    )]
    TooLarge {
        /// Elements of each tensor.
        numel: u64,
        /// The budget.
        max: u64,
    },
    /// [`CompareProgress::cancel`] was set.
    #[error("cancelled")]
    Cancelled,
}

/// One position in the compared tensors, with both values.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Location {
    /// Flat index in C (row-major) order.
    pub index: u64,
    /// Logical coordinates, one per dimension.
    pub coords: Vec<usize>,
    /// A's value (after `--cast`); NaN and infinities are written as "nan", "inf", "-inf".
    #[serde(serialize_with = "value")]
    pub a: f64,
    /// B's value (after `--cast`).
    #[serde(serialize_with = "value")]
    pub b: f64,
}

/// How many values of each non-finite class (NaN, +inf, -inf) each tensor holds, and whether
/// they sit at the same positions in both (over all positions, not only finite pairs).
///
/// Not the scan's first non-finite record of a dump (`model::scan::NonFinite`): this one
/// counts the elements of two saved tensors.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NonFiniteCounts {
    /// NaN elements of A.
    pub nan_a: u64,
    /// NaN elements of B.
    pub nan_b: u64,
    /// +inf elements of A.
    pub posinf_a: u64,
    /// +inf elements of B.
    pub posinf_b: u64,
    /// -inf elements of A.
    pub neginf_a: u64,
    /// -inf elements of B.
    pub neginf_b: u64,
    /// Every position holds the same class (finite, NaN, +inf, -inf) in A and B.
    pub positions_agree: bool,
    /// The first position whose classes differ.
    pub first_disagreement: Option<Location>,
}

/// How many finite pairs have `|a - b|` in each decade.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Histogram {
    /// Finite pairs with `a == b`.
    pub zero: u64,
    /// Ascending decades `e` (`10^e <= |a - b| < 10^(e+1)`) that hold any pair.
    pub decades: Vec<DecadeCount>,
    /// Pairs where a value is not finite (not in any decade).
    pub nonfinite: u64,
}

/// One bar of the [`Histogram`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DecadeCount {
    /// `floor(log10 |a - b|)`.
    pub decade: i32,
    /// Finite pairs whose `|a - b|` lies in the decade.
    pub count: u64,
}

/// Every metric of one pair of tensors (module docs give the definitions).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// A's dtype as stored.
    pub dtype_a: DType,
    /// B's dtype as stored.
    pub dtype_b: DType,
    /// The dtype values were compared in: the common dtype, or the `--cast` target.
    pub compared_as: DType,
    /// The common shape, in elements per dimension (empty for a 0-d tensor).
    pub shape: Vec<usize>,
    /// Elements of each tensor (the product of `shape`).
    pub numel: u64,
    /// Positions where both values are finite.
    pub finite_pairs: u64,
    /// Largest `|a - b|` over finite pairs, in the values' unit; `None` without finite pairs.
    pub max_abs_diff: Option<f64>,
    /// The first position attaining `max_abs_diff`.
    pub max_abs_diff_at: Option<Location>,
    /// Mean `|a - b|` over finite pairs; `None` without finite pairs.
    pub mean_abs_diff: Option<f64>,
    /// `a·b / (||a||₂ ||b||₂)` over finite pairs; `None` when either side's norm is zero (or
    /// the sums overflowed).
    pub cosine: Option<f64>,
    /// `||a - b||₂ / ||b||₂` over finite pairs; `None` when B's norm is zero (or the sums
    /// overflowed).
    pub rel_l2: Option<f64>,
    /// No mismatch at all.
    pub allclose: bool,
    /// The absolute tolerance applied ([`Options::atol`]).
    pub atol: f64,
    /// The relative tolerance applied ([`Options::rtol`]).
    pub rtol: f64,
    /// Whether NaN at one position in both counted as close ([`Options::equal_nan`]).
    pub equal_nan: bool,
    /// Positions that are not close.
    pub mismatches: u64,
    /// `mismatches / numel` (0 for an empty tensor).
    pub mismatch_fraction: f64,
    /// The first position (in flat order) that is not close.
    pub first_mismatch: Option<Location>,
    /// NaN and infinity counts of each side, and whether their positions agree.
    pub nonfinite: NonFiniteCounts,
    /// Largest ULP distance in `ulp_dtype`; `None` for integer dtypes or when every position
    /// holds a NaN.
    pub max_ulp: Option<u64>,
    /// The dtype ULPs are counted in (`Options::ulp_in`, else the coarsest of the pair's dtypes).
    pub ulp_dtype: Option<DType>,
    /// The first position attaining `max_ulp`.
    pub max_ulp_at: Option<Location>,
    /// Finite pairs by decade of `|a - b|`.
    pub histogram: Histogram,
}

/// Elements per unit of parallel work and per progress/cancel step (4 MiB of float32).
const CHUNK: usize = 1 << 20;

/// Compares `a` with `b` (the reference) element by element.
///
/// One pass over both tensors, split into chunks of 2^20 elements (`CHUNK`) run on rayon's
/// pool; per-chunk sums are combined in chunk order, so results do not depend on the
/// thread count. `progress.done` grows by each chunk's element count.
///
/// # Errors
/// [`CompareError::Shape`] or [`CompareError::DType`] (without `options.cast`) before any
/// element is read; [`CompareError::Cancelled`] when `progress.cancel` was set.
pub fn compare(
    a: &TensorView,
    b: &TensorView,
    options: &Options,
    progress: &CompareProgress,
) -> Result<Metrics, CompareError> {
    if a.shape() != b.shape() {
        return Err(CompareError::Shape {
            a: a.shape().to_vec(),
            b: b.shape().to_vec(),
        });
    }
    let compared_as = match options.cast {
        Some(cast) => cast,
        None if a.dtype() == b.dtype() => a.dtype(),
        // Every value of every other dtype is exact in float64: a precision-change pair is
        // compared as it is, never rounded first.
        None if a.dtype() != DType::Int64 && b.dtype() != DType::Int64 => DType::Float64,
        None => {
            return Err(CompareError::DType {
                a: a.dtype(),
                b: b.dtype(),
            });
        }
    };
    if a.numel() as u64 > options.max_elements {
        return Err(CompareError::TooLarge {
            numel: a.numel() as u64,
            max: options.max_elements,
        });
    }
    let ulp = ulp_dtype(a.dtype(), b.dtype(), options);
    // Counting ULPs in another dtype, or reading two dtypes, takes the rounding reader.
    let cast = options
        .cast
        .or((ulp != compared_as || a.dtype() != b.dtype()).then_some(compared_as));
    let accumulated = match (cast, a.dtype()) {
        (None, DType::Float32) => run(a, b, options, ulp, progress, F32, F32),
        (None, DType::BFloat16) => run(a, b, options, ulp, progress, BF16, BF16),
        (None, DType::Float16) => run(a, b, options, ulp, progress, F16, F16),
        (None, DType::Float64) => run(a, b, options, ulp, progress, F64, F64),
        (None, dtype) => run(a, b, options, ulp, progress, Decoded(dtype), Decoded(dtype)),
        (Some(cast), _) => run(
            a,
            b,
            options,
            ulp,
            progress,
            Cast {
                from: a.dtype(),
                to: cast,
                ulp,
            },
            Cast {
                from: b.dtype(),
                to: cast,
                ulp,
            },
        ),
    }?;
    Ok(finish(accumulated, a, b, compared_as, options))
}

fn run<RA: ElementReader, RB: ElementReader>(
    a: &TensorView,
    b: &TensorView,
    options: &Options,
    ulp: DType,
    progress: &CompareProgress,
    ra: RA,
    rb: RB,
) -> Result<Accumulator, CompareError> {
    let rule = Rule {
        atol: options.atol,
        rtol: options.rtol,
        equal_nan: options.equal_nan,
        ulp: ulp.is_float(),
    };
    let numel = a.numel();
    let chunks: Vec<Range<usize>> = (0..numel.div_ceil(CHUNK))
        .map(|c| c * CHUNK..((c + 1) * CHUNK).min(numel))
        .collect();
    let partial: Vec<Accumulator> = chunks
        .into_par_iter()
        .map(|range| {
            if progress.cancel.load(Ordering::Relaxed) {
                return Err(CompareError::Cancelled);
            }
            let len = range.len() as u64;
            let accumulated = kernel::chunk(a, b, range, rule, ra, rb);
            progress.done.fetch_add(len, Ordering::Relaxed);
            Ok(accumulated)
        })
        .collect::<Result<_, _>>()?;
    let mut total = Accumulator::new();
    for part in partial {
        total.merge(part);
    }
    Ok(total)
}

/// The dtype ULP distances are counted in: `options.ulp_in` when given, else the coarsest
/// floating dtype of the two sides and the cast (float32 vs float16 compared as float64 counts
/// float16 ULPs: "1 ULP" is one rounding of the lower precision), else the compared dtype.
fn ulp_dtype(a: DType, b: DType, options: &Options) -> DType {
    options
        .ulp_in
        .or_else(|| DType::coarsest_float([a, b].into_iter().chain(options.cast)))
        .or(options.cast)
        .unwrap_or(a)
}

/// The metrics of one comparison's accumulated sums.
fn finish(
    acc: Accumulator,
    a: &TensorView,
    b: &TensorView,
    compared_as: DType,
    options: &Options,
) -> Metrics {
    let locate = |found: Option<(usize, f64, f64)>| {
        found.map(|(flat, va, vb)| Location {
            index: flat as u64,
            coords: a.coords(flat),
            a: va,
            b: vb,
        })
    };
    let numel = a.numel() as u64;
    let ulp_dtype = ulp_dtype(a.dtype(), b.dtype(), options);
    let any = acc.finite_pairs > 0;
    let norms = acc.norm_a.sqrt() * acc.norm_b.sqrt();
    Metrics {
        dtype_a: a.dtype(),
        dtype_b: b.dtype(),
        compared_as,
        shape: a.shape().to_vec(),
        numel,
        finite_pairs: acc.finite_pairs,
        max_abs_diff: any.then_some(acc.max_abs),
        max_abs_diff_at: locate(acc.max_abs_at),
        mean_abs_diff: any.then(|| acc.sum_abs / acc.finite_pairs as f64),
        // Sums of float64 values near the type's limit can overflow: no number then.
        cosine: (norms > 0.0)
            .then(|| acc.dot / norms)
            .filter(|c| c.is_finite()),
        rel_l2: (acc.norm_b > 0.0)
            .then(|| acc.norm_diff.sqrt() / acc.norm_b.sqrt())
            .filter(|r| r.is_finite()),
        allclose: acc.mismatches == 0,
        atol: options.atol,
        rtol: options.rtol,
        equal_nan: options.equal_nan,
        mismatches: acc.mismatches,
        mismatch_fraction: if numel == 0 {
            0.0
        } else {
            acc.mismatches as f64 / numel as f64
        },
        first_mismatch: locate(acc.first_mismatch),
        nonfinite: NonFiniteCounts {
            nan_a: acc.counts[0],
            nan_b: acc.counts[1],
            posinf_a: acc.counts[2],
            posinf_b: acc.counts[3],
            neginf_a: acc.counts[4],
            neginf_b: acc.counts[5],
            positions_agree: acc.first_disagreement.is_none(),
            first_disagreement: locate(acc.first_disagreement),
        },
        max_ulp: (ulp_dtype.is_float() && acc.ulp_pairs > 0).then_some(acc.max_ulp),
        ulp_dtype: ulp_dtype.is_float().then_some(ulp_dtype),
        max_ulp_at: locate(acc.max_ulp_at),
        histogram: Histogram {
            zero: acc.zero(),
            decades: acc
                .decade_counts()
                .map(|(decade, count)| DecadeCount { decade, count })
                .collect(),
            nonfinite: acc.nonfinite_pairs,
        },
    }
}

/// Serializes a value as a JSON number, or "nan" / "inf" / "-inf" (JSON has no such numbers).
fn value<S: serde::Serializer>(v: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    if v.is_nan() {
        serializer.serialize_str("nan")
    } else if v.is_infinite() {
        serializer.serialize_str(if *v > 0.0 { "inf" } else { "-inf" })
    } else {
        serializer.serialize_f64(*v)
    }
}
