//! The statistics of one staged view, with the Python probe's definitions (docs/manifest.md,
//! "stats"), computed on the host on rayon's threads with f64 accumulation.
//!
//! Let *F* be the finite elements: `nan_count`, `inf_count`, `finite_count`; `min`, `max`,
//! `mean` (Σ_F x / |F|), `max_abs` (max(|min|, |max|)); `l2` = sqrt(Σ_F x²); `pos_checksum` =
//! Σ_F x[r,c]·u(r)·v(c) over the view as a matrix [rows, cols] in logical row-major order
//! (`cols` the last dimension's size, a 0-d tensor is [1, 1]), u(r) = ((r+1)·2654435761 mod
//! 2³²)/2³², v(c) = ((c+1)·2246822519 mod 2³²)/2³². Integers and bools are summarised as their
//! values with counts 0. Every element decodes exactly to f64 ([`crate::dtype`]); sums run
//! sequentially within chunks of [`CHUNK`] elements and pairwise across them, so their
//! rounding error stays near (CHUNK + log₂ n)·2⁻⁵³·Σ|x|.

use rayon::prelude::*;

use crate::dtype::{self, Dtype, Element};
use crate::view::View;

/// Elements per unit of parallel work.
pub const CHUNK: u64 = 1 << 14;

const ROW_MUL: u64 = 2_654_435_761; // Knuth's multiplicative hash constant
const COL_MUL: u64 = 2_246_822_519; // xxHash32's second prime
const TWO_POW_MINUS_32: f64 = 1.0 / 4_294_967_296.0;

/// The weight of position `k` (0-based) for `multiplier`: ((k+1)·multiplier mod 2³²)/2³², exact.
#[inline(always)]
fn weight(k: u64, multiplier: u64) -> f64 {
    ((k + 1).wrapping_mul(multiplier) & 0xffff_ffff) as f64 * TWO_POW_MINUS_32
}

/// One record's statistics. `min`, `max`, `mean` and `max_abs` are `None` when no element is
/// finite; then `l2` and `pos_checksum` are 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// NaN elements.
    pub nan_count: u64,
    /// +inf or −inf elements.
    pub inf_count: u64,
    /// `numel − nan_count − inf_count`.
    pub finite_count: u64,
    /// max(|min|, |max|) over *F*.
    pub max_abs: Option<f64>,
    /// Smallest finite value.
    pub min: Option<f64>,
    /// Largest finite value.
    pub max: Option<f64>,
    /// Σ_F x / finite_count.
    pub mean: Option<f64>,
    /// sqrt(Σ_F x²).
    pub l2: f64,
    /// Σ_F x·u(r)·v(c).
    pub pos_checksum: f64,
}

#[derive(Debug, Clone, Copy)]
struct Acc {
    nan: u64,
    inf: u64,
    finite: u64,
    min: f64,
    max: f64,
    sum: f64,
    sumsq: f64,
    checksum: f64,
}

impl Acc {
    const EMPTY: Acc = Acc {
        nan: 0,
        inf: 0,
        finite: 0,
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        sum: 0.0,
        sumsq: 0.0,
        checksum: 0.0,
    };

    fn merge(a: Acc, b: Acc) -> Acc {
        Acc {
            nan: a.nan + b.nan,
            inf: a.inf + b.inf,
            finite: a.finite + b.finite,
            min: a.min.min(b.min),
            max: a.max.max(b.max),
            sum: a.sum + b.sum,
            sumsq: a.sumsq + b.sumsq,
            checksum: a.checksum + b.checksum,
        }
    }
}

/// The statistics of `view`, whose span (from `storage_offset`) is `staged`; `None` for a view
/// without elements.
///
/// # Panics
/// When `staged` is shorter than the view's span (a bug of the caller's, never of the input:
/// [`View::check`] bounds the span).
pub fn summarize(view: &View, staged: &[u8]) -> Option<Summary> {
    if view.numel == 0 {
        return None;
    }
    assert!(
        staged.len() as u64 >= view.span_bytes(),
        "staging shorter than the span"
    );
    let reduce = match view.dtype {
        Dtype::Float32 => reduce::<dtype::F32>,
        Dtype::Float16 => reduce::<dtype::F16>,
        Dtype::Bfloat16 => reduce::<dtype::BF16>,
        Dtype::Float64 => reduce::<dtype::F64>,
        Dtype::Float8E4m3fn => reduce::<dtype::E4m3fn>,
        Dtype::Float8E5m2 => reduce::<dtype::E5m2>,
        Dtype::Int8 => reduce::<dtype::I8>,
        Dtype::Int16 => reduce::<dtype::I16>,
        Dtype::Int32 => reduce::<dtype::I32>,
        Dtype::Int64 => reduce::<dtype::I64>,
        Dtype::Uint8 => reduce::<dtype::U8>,
        Dtype::Bool => reduce::<dtype::Bool>,
    };
    let acc = reduce(view, staged, 1.0);
    let mut l2 = acc.sumsq.sqrt();
    if l2.is_infinite() {
        // Squares of float64 values above ~1.3e154 overflow: take the norm of the values scaled
        // by an exact power of two and scale it back.
        const SCALE: f64 =
            1.0 / (1u128 << 100) as f64 / (1u128 << 100) as f64 / (1u128 << 100) as f64;
        l2 = reduce(view, staged, SCALE).sumsq.sqrt() / SCALE;
    }
    let finite = acc.finite > 0;
    Some(Summary {
        nan_count: acc.nan,
        inf_count: acc.inf,
        finite_count: acc.finite,
        max_abs: finite.then(|| acc.min.abs().max(acc.max.abs())),
        min: finite.then_some(acc.min),
        max: finite.then_some(acc.max),
        mean: finite.then(|| acc.sum / acc.finite as f64),
        l2: if finite { l2 } else { 0.0 },
        pos_checksum: if finite { acc.checksum } else { 0.0 },
    })
}

/// Columns up to this many get their weights computed once per view, not per element.
const WEIGHT_TABLE_MAX: u64 = 1 << 16;

/// The whole view's accumulators; `scale` multiplies values before squaring (1 but for the
/// overflow rescue).
fn reduce<E: Element>(view: &View, staged: &[u8], scale: f64) -> Acc {
    let n = view.numel;
    let cols = view.cols();
    let table: Option<Vec<f64>> = (cols <= WEIGHT_TABLE_MAX && n > cols)
        .then(|| (0..cols).map(|c| weight(c, COL_MUL)).collect());
    let table = table.as_deref();
    let chunks = n.div_ceil(CHUNK);
    if chunks == 1 {
        return chunk::<E>(view, staged, 0, n, scale, table);
    }
    (0..chunks)
        .into_par_iter()
        .map(|k| {
            chunk::<E>(
                view,
                staged,
                k * CHUNK,
                ((k + 1) * CHUNK).min(n),
                scale,
                table,
            )
        })
        .reduce(|| Acc::EMPTY, Acc::merge)
}

/// Element offset (from the span's start) of the first element of matrix row `row`.
fn row_base(view: &View, mut row: u64) -> u64 {
    let lead = view.shape.len().saturating_sub(1);
    let mut base = 0;
    for k in (0..lead).rev() {
        let size = view.shape[k];
        base += (row % size) * view.strides[k];
        row /= size;
    }
    base
}

/// One element into the accumulators; `w` is its column weight.
#[inline(always)]
fn take(acc: &mut Acc, partial: &mut f64, x: f64, w: f64, scale: f64) {
    if x.is_finite() {
        acc.finite += 1;
        acc.min = acc.min.min(x);
        acc.max = acc.max.max(x);
        acc.sum += x;
        let scaled = x * scale;
        acc.sumsq += scaled * scaled;
        *partial += x * w;
    } else if x.is_nan() {
        acc.nan += 1;
    } else {
        acc.inf += 1;
    }
}

/// Four interleaved accumulator sets, branch-free: a non-finite element adds 0 to the sums and
/// ±inf to neither extreme; the infinities are counted as what is neither finite nor NaN.
struct Lanes {
    seen: u64,
    finite: [u64; 4],
    nan: [u64; 4],
    min: [f64; 4],
    max: [f64; 4],
    sum: [f64; 4],
    sumsq: [f64; 4],
    partial: [f64; 4],
}

impl Default for Lanes {
    fn default() -> Lanes {
        Lanes {
            seen: 0,
            finite: [0; 4],
            nan: [0; 4],
            min: [f64::INFINITY; 4],
            max: [f64::NEG_INFINITY; 4],
            sum: [0.0; 4],
            sumsq: [0.0; 4],
            partial: [0.0; 4],
        }
    }
}

impl Lanes {
    #[inline(always)]
    fn take(&mut self, lane: usize, x: f64, w: f64, scale: f64) {
        let finite = x.is_finite();
        let v = if finite { x } else { 0.0 };
        self.seen += 1;
        self.finite[lane] += u64::from(finite);
        self.nan[lane] += u64::from(x.is_nan());
        let low = if finite { x } else { f64::INFINITY };
        let high = if finite { x } else { f64::NEG_INFINITY };
        self.min[lane] = if low < self.min[lane] {
            low
        } else {
            self.min[lane]
        };
        self.max[lane] = if high > self.max[lane] {
            high
        } else {
            self.max[lane]
        };
        self.sum[lane] += v;
        let scaled = v * scale;
        self.sumsq[lane] += scaled * scaled;
        self.partial[lane] += v * w;
    }

    fn fold_into(&self, acc: &mut Acc, partial: &mut f64) {
        let finite: u64 = self.finite.iter().sum();
        let nan: u64 = self.nan.iter().sum();
        acc.finite += finite;
        acc.nan += nan;
        acc.inf += self.seen - finite - nan;
        for lane in 0..4 {
            acc.min = acc.min.min(self.min[lane]);
            acc.max = acc.max.max(self.max[lane]);
        }
        acc.sum += (self.sum[0] + self.sum[1]) + (self.sum[2] + self.sum[3]);
        acc.sumsq += (self.sumsq[0] + self.sumsq[1]) + (self.sumsq[2] + self.sumsq[3]);
        *partial += (self.partial[0] + self.partial[1]) + (self.partial[2] + self.partial[3]);
    }
}

/// The accumulators of flat logical elements `lo..hi`; `table` holds the column weights when
/// they were precomputed.
fn chunk<E: Element>(
    view: &View,
    staged: &[u8],
    lo: u64,
    hi: u64,
    scale: f64,
    table: Option<&[f64]>,
) -> Acc {
    let cols = view.cols();
    let inner = view.strides.last().copied().unwrap_or(0) as usize;
    let size = E::SIZE;
    let mut acc = Acc::EMPTY;
    let mut row = lo / cols;
    let mut col = lo % cols;
    let mut at = lo;
    while at < hi {
        let end = (col + (hi - at)).min(cols);
        let base = row_base(view, row) as usize;
        let mut partial = 0.0;
        match table {
            // The common case, a row of adjacent elements: one slice, no per-element offsets,
            // and four independent lanes so the sums do not wait on each other.
            Some(weights) if inner == 1 => {
                let start = (base + col as usize) * size;
                let bytes = &staged[start..start + (end - col) as usize * size];
                let weights = &weights[col as usize..end as usize];
                let mut lanes = Lanes::default();
                let groups = bytes.chunks_exact(4 * size).zip(weights.chunks_exact(4));
                for (group, w) in groups {
                    for lane in 0..4 {
                        let x = E::load(&group[lane * size..]);
                        lanes.take(lane, x, w[lane], scale);
                    }
                }
                let done = weights.len() / 4 * 4;
                lanes.fold_into(&mut acc, &mut partial);
                for (element, &w) in bytes[done * size..]
                    .chunks_exact(size)
                    .zip(&weights[done..])
                {
                    take(&mut acc, &mut partial, E::load(element), w, scale);
                }
            }
            _ => {
                for c in col..end {
                    let offset = (base + c as usize * inner) * size;
                    let x = E::load(&staged[offset..offset + size]);
                    let w = table.map_or_else(|| weight(c, COL_MUL), |t| t[c as usize]);
                    take(&mut acc, &mut partial, x, w, scale);
                }
            }
        }
        acc.checksum += partial * weight(row, ROW_MUL);
        at += end - col;
        row += 1;
        col = 0;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::Device;

    fn view(dtype: Dtype, shape: &[u64], strides: &[u64]) -> View {
        let numel = shape.iter().product();
        let span = if numel == 0 {
            0
        } else {
            1 + shape
                .iter()
                .zip(strides)
                .map(|(s, t)| (s - 1) * t)
                .sum::<u64>()
        };
        View {
            dtype,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            storage_offset: 0,
            numel,
            span_elements: span,
            data: 0,
            storage_bytes: None,
            storage_id: None,
            device: Device::Host,
            stream: 0,
            shard: None,
        }
    }

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// The definitions, element by element, in logical order.
    fn reference(values: &[[f64; 3]; 2]) -> (f64, f64, f64) {
        let (mut sum, mut sq, mut checksum) = (0.0, 0.0, 0.0);
        for (r, row) in values.iter().enumerate() {
            for (c, &x) in row.iter().enumerate() {
                sum += x;
                sq += x * x;
                checksum += x * weight(r as u64, ROW_MUL) * weight(c as u64, COL_MUL);
            }
        }
        (sum, sq.sqrt(), checksum)
    }

    #[test]
    fn a_transposed_view_reads_in_logical_order() {
        // Storage [3, 2] row-major: [[1, -2], [7, 0.5], [3, 9]]; its transpose is [2, 3],
        // strides [1, 2]. (A linear ramp would not do: its checksum is transpose-invariant.)
        let bytes = f32_bytes(&[1.0, -2.0, 7.0, 0.5, 3.0, 9.0]);
        let s = summarize(&view(Dtype::Float32, &[2, 3], &[1, 2]), &bytes).unwrap();
        let (sum, l2, checksum) = reference(&[[1.0, 7.0, 3.0], [-2.0, 0.5, 9.0]]);
        assert_eq!(
            (s.min, s.max, s.max_abs),
            (Some(-2.0), Some(9.0), Some(9.0))
        );
        assert_eq!(s.mean, Some(sum / 6.0));
        assert_eq!(s.l2, l2);
        // Row sums are weighted by u(r) once per row, not per element: equal up to rounding.
        assert!(
            (s.pos_checksum - checksum).abs() < 1e-15 * 21.0,
            "{} vs {checksum}",
            s.pos_checksum
        );
        // The contiguous storage itself has the same multiset but another checksum.
        let plain = summarize(&view(Dtype::Float32, &[3, 2], &[2, 1]), &bytes).unwrap();
        assert_eq!(plain.l2, s.l2);
        assert_ne!(plain.pos_checksum, s.pos_checksum);
    }

    #[test]
    fn non_finite_elements_are_counted_and_excluded() {
        let bytes = f32_bytes(&[f32::NAN, -2.0, f32::INFINITY, f32::NEG_INFINITY, 0.5]);
        let s = summarize(&view(Dtype::Float32, &[5], &[1]), &bytes).unwrap();
        assert_eq!((s.nan_count, s.inf_count, s.finite_count), (1, 2, 2));
        assert_eq!(
            (s.min, s.max, s.max_abs),
            (Some(-2.0), Some(0.5), Some(2.0))
        );
        assert_eq!(s.mean, Some(-0.75));
        let all_nan = f32_bytes(&[f32::NAN, f32::NAN]);
        let s = summarize(&view(Dtype::Float32, &[2], &[1]), &all_nan).unwrap();
        assert_eq!(
            (s.min, s.mean, s.l2, s.pos_checksum),
            (None, None, 0.0, 0.0)
        );
    }

    #[test]
    fn a_scalar_is_a_one_by_one_matrix() {
        let s = summarize(&view(Dtype::Float64, &[], &[]), &(-3.0f64).to_le_bytes()).unwrap();
        assert_eq!(
            s.pos_checksum,
            -3.0 * weight(0, ROW_MUL) * weight(0, COL_MUL)
        );
        assert_eq!(s.l2, 3.0);
        assert!(summarize(&view(Dtype::Float64, &[0, 4], &[4, 1]), &[]).is_none());
    }

    #[test]
    fn chunked_parallel_sums_match_one_sequential_pass() {
        // 3 rows of 50_000 (several chunks, rows split across chunks), a strided slice of a wider buffer.
        let (rows, cols, width) = (3u64, 50_000u64, 50_003u64);
        let values: Vec<f32> = (0..rows * width)
            .map(|i| ((i * 7919) % 1000) as f32 / 7.0 - 60.0)
            .collect();
        let bytes = f32_bytes(&values);
        let s = summarize(&view(Dtype::Float32, &[rows, cols], &[width, 1]), &bytes).unwrap();
        let (mut sum, mut checksum) = (0.0f64, 0.0f64);
        for r in 0..rows {
            for c in 0..cols {
                let x = f64::from(values[(r * width + c) as usize]);
                sum += x;
                checksum += x * weight(r, ROW_MUL) * weight(c, COL_MUL);
            }
        }
        let scale: f64 = values.iter().map(|v| f64::from(v.abs())).sum();
        assert!((s.mean.unwrap() * (rows * cols) as f64 - sum).abs() < 1e-12 * scale);
        assert!((s.pos_checksum - checksum).abs() < 1e-12 * scale);
        assert_eq!(s.finite_count, rows * cols);
    }

    #[test]
    fn float64_squares_that_overflow_are_rescued() {
        let bytes: Vec<u8> = [1e200f64, -1e200]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let s = summarize(&view(Dtype::Float64, &[2], &[1]), &bytes).unwrap();
        assert!(
            (s.l2 / (1e200 * 2f64.sqrt()) - 1.0).abs() < 1e-15,
            "{}",
            s.l2
        );
    }

    #[test]
    fn integers_and_bools_are_their_values() {
        let s = summarize(&view(Dtype::Bool, &[4], &[1]), &[1, 0, 1, 1]).unwrap();
        assert_eq!((s.mean, s.max, s.nan_count), (Some(0.75), Some(1.0), 0));
        let bytes: Vec<u8> = [-7i64, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
        let s = summarize(&view(Dtype::Int64, &[2], &[1]), &bytes).unwrap();
        assert_eq!(
            (s.min, s.max, s.max_abs),
            (Some(-7.0), Some(9.0), Some(9.0))
        );
    }
}

#[cfg(test)]
mod speed {
    use super::*;
    use crate::view::Device;

    /// `cargo test -p dump_probe --release -- --ignored --nocapture stats_throughput`
    #[test]
    #[ignore]
    fn stats_throughput() {
        let n: u64 = 16 << 20;
        let bytes: Vec<u8> = (0..n)
            .flat_map(|i| (((i * 7919) % 2003) as f32 * 0.01 - 10.0).to_le_bytes())
            .collect();
        let view = View {
            dtype: Dtype::Float32,
            shape: vec![n / 256, 256],
            strides: vec![256, 1],
            storage_offset: 0,
            numel: n,
            span_elements: n,
            data: 0,
            storage_bytes: None,
            storage_id: None,
            device: Device::Host,
            stream: 0,
            shard: None,
        };
        for _ in 0..3 {
            let t = std::time::Instant::now();
            let s = summarize(&view, &bytes).unwrap();
            let dt = t.elapsed().as_secs_f64();
            println!(
                "{:.2} GB/s ({:.1} ms) mean {:?}",
                (n * 4) as f64 / dt * 1e-9,
                dt * 1e3,
                s.mean
            );
        }
    }
}
