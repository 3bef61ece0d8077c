//! The statistics of one staged view, computed on the host on rayon's threads. The definitions,
//! the accumulators, the lane arithmetic and the checksum's weights are the `dump_stats`
//! crate's (docs/manifest.md, "stats"); this module walks a view's elements in logical order
//! into them: every element decodes exactly to f64 ([`crate::dtype`]), whole rows of
//! all-finite elements go through the lanes on the widest vector unit the CPU has, the rest
//! element by element; sums run sequentially within chunks of [`CHUNK`] elements (lanes folded
//! pairwise), and across chunks [`summarize`] merges them in one fixed pairwise tree
//! (`merge_pairwise`) while [`summarize_with`] without `parallel` folds them left to right, so
//! their rounding error stays near (CHUNK + log₂ n)·2⁻⁵³·Σ|x| on the pool and
//! (CHUNK + n/CHUNK)·2⁻⁵³·Σ|x| on the calling thread.

use dump_stats::lanes::{self, LANES, fold};
use dump_stats::{Acc, COL_MUL, ROW_MUL, Run, weight};
use rayon::prelude::*;

use crate::dtype::{self, Dtype, Element, Narrow};
use crate::view::View;

/// Elements per unit of parallel work: the definition's chunk.
pub const CHUNK: u64 = dump_stats::CHUNK;

pub use dump_stats::Summary;

/// Where a shard's indices along one dimension lie in the full tensor (docs/manifest.md,
/// "Parallel layouts"): the shard annotation `tp:D` / `tp:D@OFFSET/FULL` / `cp:D:zigzag` with the
/// group's `(rank, size)` from the window's `parallel` metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// The sharded dimension of the view.
    pub dim: usize,
    /// Its size in the full tensor.
    pub full: u64,
    /// Global index of local index 0 (offset slices; 0 for zigzag).
    pub offset: u64,
    /// Zigzag context parallel: chunks `rank` and `2·size−1−rank` of `2·size`.
    pub zigzag: bool,
    /// This rank's position in the group.
    pub rank: u64,
    /// The group's size.
    pub size: u64,
}

impl Split {
    /// The full tensor's index of local index `i` along [`Split::dim`], whose local size is
    /// `local`. An offset slice holds `offset .. offset+local`; a zigzag shard of n ranks holds
    /// chunks `rank` and `2n−1−rank` of c = local/2 each.
    pub fn global(&self, i: u64, local: u64) -> u64 {
        if !self.zigzag {
            return i + self.offset;
        }
        let c = local / 2;
        if i < c {
            i + self.rank * c
        } else {
            i - c + (2 * self.size - 1 - self.rank) * c
        }
    }
}

/// The statistics of `view`, whose span (from `storage_offset`) is `staged`; `None` for a view
/// without elements. With a `split` the position checksum uses the full tensor's coordinates of
/// each element, so the checksums of a tensor's shards add up to the whole tensor's.
///
/// # Panics
/// When `staged` is shorter than the view's span (a bug of the caller's, never of the input:
/// [`View::check`] bounds the span).
pub fn summarize(view: &View, staged: &[u8], split: Option<&Split>) -> Option<Summary> {
    summarize_with(view, staged, split, true)
}

/// [`summarize`] of a capture, and its local checksum where `split` slices the tensor: the
/// pos_checksum of the same view at its own coordinates, exactly what a capture without a shard
/// records (a second [`summarize`] of the same bytes, so equal pieces on two ranks give equal
/// bits). `None` for the local checksum without a `split` or without statistics.
pub fn summarize_sliced(
    view: &View,
    staged: &[u8],
    split: Option<&Split>,
) -> (Option<Summary>, Option<f64>) {
    let summary = summarize(view, staged, split);
    let local = match (&summary, split) {
        (Some(_), Some(_)) => summarize(view, staged, None).map(|s| s.pos_checksum),
        _ => None,
    };
    (summary, local)
}

/// [`summarize`] on the calling thread alone (`parallel` false): no pool thread is woken, so
/// a caller that summarises one tensor at a time inside its own hot loop (dump_probe.py's cpu
/// path) pays no hand-off and leaves the other cores to the model.
pub fn summarize_with(
    view: &View,
    staged: &[u8],
    split: Option<&Split>,
    parallel: bool,
) -> Option<Summary> {
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
    let coords = Coords::new(view, split);
    // The rescue of squares that overflow reduces once more with a scale: dump_stats::summarize.
    Some(dump_stats::summarize(|scale| {
        reduce(view, staged, scale, &coords, parallel)
    }))
}

/// Columns up to this many take their weights from one table made once per process.
pub(crate) const WEIGHT_TABLE_MAX: u64 = 1 << 16;

/// v(c) for c in 0..[`WEIGHT_TABLE_MAX`] (512 KiB, made on first use).
pub(crate) fn column_table() -> &'static [f64] {
    static TABLE: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| (0..WEIGHT_TABLE_MAX).map(|c| weight(c, COL_MUL)).collect())
}

/// The checksum's coordinates of one view: each column's weight, and each matrix row's index
/// in the full tensor.
struct Coords<'a> {
    /// v(global column) for each of the view's columns.
    cols: std::borrow::Cow<'a, [f64]>,
    /// How a local matrix row maps to the full tensor's row.
    rows: RowMap,
}

enum RowMap {
    /// The local row is the global row.
    Same,
    /// A split along leading dimension `dim`: local row r = (o·along + a)·inner + i becomes
    /// (o·full + global(a))·inner + i.
    Split {
        split: Split,
        along: u64,
        inner: u64,
    },
}

impl<'a> Coords<'a> {
    fn new(view: &View, split: Option<&Split>) -> Coords<'a> {
        let cols = view.cols();
        let last = view.shape.len().saturating_sub(1);
        let col_split = split.filter(|s| s.dim == last && !view.shape.is_empty());
        let table = column_table();
        let weights = match col_split {
            None if cols <= WEIGHT_TABLE_MAX => std::borrow::Cow::Borrowed(&table[..cols as usize]),
            Some(s) if !s.zigzag && s.offset + cols <= WEIGHT_TABLE_MAX => {
                std::borrow::Cow::Borrowed(&table[s.offset as usize..(s.offset + cols) as usize])
            }
            _ => std::borrow::Cow::Owned(
                (0..cols)
                    .map(|c| weight(col_split.map_or(c, |s| s.global(c, cols)), COL_MUL))
                    .collect(),
            ),
        };
        let rows = match split {
            Some(s) if s.dim < last => RowMap::Split {
                split: *s,
                along: view.shape[s.dim],
                inner: view.shape[s.dim + 1..last].iter().product(),
            },
            _ => RowMap::Same,
        };
        Coords {
            cols: weights,
            rows,
        }
    }

    /// u(global row) of local matrix row `row`.
    fn row_weight(&self, row: u64) -> f64 {
        let global = match &self.rows {
            RowMap::Same => row,
            RowMap::Split {
                split,
                along,
                inner,
            } => {
                let (outer, rest) = (row / (along * inner), row % (along * inner));
                let (a, i) = (rest / inner, rest % inner);
                (outer * split.full + split.global(a, *along)) * inner + i
            }
        };
        weight(global, ROW_MUL)
    }
}

/// The whole view's accumulators; `scale` multiplies values before squaring (1 but for the
/// overflow rescue).
fn reduce<E: Element>(
    view: &View,
    staged: &[u8],
    scale: f64,
    coords: &Coords,
    parallel: bool,
) -> Acc {
    let n = view.numel;
    let chunks = n.div_ceil(CHUNK);
    if chunks == 1 {
        return chunk::<E>(view, staged, 0, n, scale, coords);
    }
    let one = |k: u64| {
        chunk::<E>(
            view,
            staged,
            k * CHUNK,
            ((k + 1) * CHUNK).min(n),
            scale,
            coords,
        )
    };
    if !parallel {
        // Sequential: the same chunks folded left to right (the parallel reduce merges them in
        // another tree, so the sums may differ in the last bits, within the stated bound).
        return (0..chunks).map(one).fold(Acc::EMPTY, Acc::merge);
    }
    // Merged in one fixed tree, not by rayon's reduce, whose tree follows how the work was
    // split and stolen: the same bytes give the same bits on every run and every rank (a
    // sliced record's local_checksum is compared across ranks for equality).
    let parts: Vec<Acc> = (0..chunks).into_par_iter().map(one).collect();
    merge_pairwise(&parts)
}

/// `parts` merged pairwise, halves first, in an order fixed by their count alone.
fn merge_pairwise(parts: &[Acc]) -> Acc {
    match parts {
        [] => Acc::EMPTY,
        [one] => *one,
        _ => {
            let (left, right) = parts.split_at(parts.len() / 2);
            Acc::merge(merge_pairwise(left), merge_pairwise(right))
        }
    }
}

/// Element offset (from the span's start) of the first element of matrix row `row`.
pub(crate) fn row_base(view: &View, mut row: u64) -> u64 {
    let lead = view.shape.len().saturating_sub(1);
    let mut base = 0;
    for k in (0..lead).rev() {
        let size = view.shape[k];
        base += (row % size) * view.strides[k];
        row /= size;
    }
    base
}

/// [`Run`] of `bytes`: whole matrix rows of `cols` elements of `E` each, adjacent in memory,
/// the first being matrix row `first_row`; `weights` holds the `cols` column weights and
/// `row_weight` gives u(r). `None` when an element is NaN or infinite (or a float64 square
/// overflows): those rows take the counting path. No per-element test is needed to know: a NaN
/// or an infinity makes the plain sum non-finite, and the sum of finite float32/16/bfloat16/
/// float8 values in float64 cannot overflow.
///
/// The lanes accumulate across rows: a row costs two vector multiply-adds (its checksum
/// lanes times u(r)) and the lanes are folded once per call, not once per row, which for rows
/// of 64 to 256 elements cost as much as the row itself. Squares and weighted values are fused
/// multiply-adds (`mul_add`: one rounding), on every CPU — by the FMA unit where the CPU has one,
/// else by libm's exact `fma` — so every CPU gets the same bits.
#[inline(always)]
fn rows_body<E: Element>(
    bytes: &[u8],
    cols: usize,
    weights: &[f64],
    first_row: u64,
    row_weight: &dyn Fn(u64) -> f64,
) -> Option<Run> {
    let mut min = [<E::Narrow as Narrow>::INFINITY; LANES];
    let mut max = [<E::Narrow as Narrow>::NEG_INFINITY; LANES];
    let mut sum = [0.0f64; LANES];
    let mut sumsq = [0.0f64; LANES];
    let mut partial = [0.0f64; LANES];
    let full = cols / LANES * LANES;
    for (r, row) in bytes.chunks_exact(cols * E::SIZE).enumerate() {
        let mut row_partial = [0.0f64; LANES];
        let (body, tail) = row.split_at(full * E::SIZE);
        for (group, w) in body
            .chunks_exact(LANES * E::SIZE)
            .zip(weights.chunks_exact(LANES))
        {
            for lane in 0..LANES {
                let n = E::load_narrow(&group[lane * E::SIZE..]);
                min[lane] = if n < min[lane] { n } else { min[lane] };
                max[lane] = if n > max[lane] { n } else { max[lane] };
                let x = n.wide();
                lanes::step(
                    &mut sum[lane],
                    &mut sumsq[lane],
                    &mut row_partial[lane],
                    x,
                    w[lane],
                );
            }
        }
        for (lane, (element, &w)) in tail
            .chunks_exact(E::SIZE)
            .zip(&weights[full..cols])
            .enumerate()
        {
            let n = E::load_narrow(element);
            min[lane] = if n < min[lane] { n } else { min[lane] };
            max[lane] = if n > max[lane] { n } else { max[lane] };
            let x = n.wide();
            lanes::step(
                &mut sum[lane],
                &mut sumsq[lane],
                &mut row_partial[lane],
                x,
                w,
            );
        }
        let u = row_weight(first_row + r as u64);
        for lane in 0..LANES {
            lanes::weigh_row(&mut partial[lane], row_partial[lane], u);
        }
    }
    let run = Run {
        min: min.iter().fold(f64::INFINITY, |a, &b| a.min(b.wide())),
        max: max.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b.wide())),
        sum: fold(sum),
        sumsq: fold(sumsq),
        partial: fold(partial),
    };
    (run.sum.is_finite() && run.sumsq.is_finite() && run.partial.is_finite()).then_some(run)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
fn rows_avx512<E: Element>(
    bytes: &[u8],
    cols: usize,
    weights: &[f64],
    first_row: u64,
    row_weight: &dyn Fn(u64) -> f64,
) -> Option<Run> {
    rows_body::<E>(bytes, cols, weights, first_row, row_weight)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn rows_avx2<E: Element>(
    bytes: &[u8],
    cols: usize,
    weights: &[f64],
    first_row: u64,
    row_weight: &dyn Fn(u64) -> f64,
) -> Option<Run> {
    rows_body::<E>(bytes, cols, weights, first_row, row_weight)
}

/// [`rows_body`] compiled for the widest vector unit this CPU has (the library itself is built
/// for the baseline x86-64, so the wide versions are chosen at run time).
pub(crate) fn rows_fast<E: Element>(
    bytes: &[u8],
    cols: usize,
    weights: &[f64],
    first_row: u64,
    row_weight: &dyn Fn(u64) -> f64,
) -> Option<Run> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("fma") {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has AVX-512F and FMA.
                return unsafe { rows_avx512::<E>(bytes, cols, weights, first_row, row_weight) };
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2 and FMA.
                return unsafe { rows_avx2::<E>(bytes, cols, weights, first_row, row_weight) };
            }
        }
    }
    rows_body::<E>(bytes, cols, weights, first_row, row_weight)
}

/// [`rows_fast`] of one run of adjacent elements with weights `weights`, its checksum lanes
/// unweighted by row (the caller multiplies by u(r)).
pub(crate) fn run_fast<E: Element>(bytes: &[u8], weights: &[f64]) -> Option<Run> {
    rows_fast::<E>(bytes, weights.len(), weights, 0, &|_| 1.0)
}

/// The accumulators of flat logical elements `lo..hi`.
fn chunk<E: Element>(
    view: &View,
    staged: &[u8],
    lo: u64,
    hi: u64,
    scale: f64,
    coords: &Coords,
) -> Acc {
    let cols = view.cols();
    let inner = view.strides.last().copied().unwrap_or(0) as usize;
    let size = E::SIZE;
    let weights: &[f64] = &coords.cols;
    let mut acc = Acc::EMPTY;
    let mut row = lo / cols;
    let mut col = lo % cols;
    let mut at = lo;
    // Row r of a contiguous view starts at r·cols: whole rows are one slice, summed in one call.
    // Cleared by a block holding a non-finite element: the rest of the chunk goes row by row,
    // so one NaN costs one extra pass over the chunk, never one per row.
    let mut dense = view.is_contiguous() && cols > 1 && scale == 1.0;
    let row_weight = |r: u64| coords.row_weight(r);
    while at < hi {
        let rows = (hi - at) / cols;
        if dense && col == 0 && rows >= 2 {
            let start = (row * cols) as usize * size;
            let bytes = &staged[start..start + (rows * cols) as usize * size];
            if let Some(run) = rows_fast::<E>(bytes, cols as usize, weights, row, &row_weight) {
                // Whole rows: the run's checksum part is already weighted by u(r).
                acc.checksum += acc.add_run(rows * cols, &run);
                at += rows * cols;
                row += rows;
                continue;
            }
            dense = false;
        }
        let end = (col + (hi - at)).min(cols);
        let base = row_base(view, row) as usize;
        let mut partial = 0.0;
        let w = &weights[col as usize..end as usize];
        if inner == 1 || end - col == 1 {
            // A row of adjacent elements: one slice, no per-element offsets.
            let start = (base + col as usize * inner) * size;
            let bytes = &staged[start..start + (end - col) as usize * size];
            match run_fast::<E>(bytes, w).filter(|_| scale == 1.0) {
                Some(run) => partial = acc.add_run(end - col, &run),
                None => {
                    for (element, &w) in bytes.chunks_exact(size).zip(w) {
                        acc.take(&mut partial, E::load(element), w, scale);
                    }
                }
            }
        } else {
            for (c, &w) in (col..end).zip(w) {
                let offset = (base + c as usize * inner) * size;
                let x = E::load(&staged[offset..offset + size]);
                acc.take(&mut partial, x, w, scale);
            }
        }
        acc.close_row(partial, coords.row_weight(row));
        at += end - col;
        row += 1;
        col = 0;
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(dtype: Dtype, shape: &[u64], strides: &[u64]) -> View {
        View::for_tests(dtype, shape, strides)
    }

    fn summarize_plain(view: &View, staged: &[u8]) -> Option<Summary> {
        summarize(view, staged, None)
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
        let s = summarize_plain(&view(Dtype::Float32, &[2, 3], &[1, 2]), &bytes).unwrap();
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
        let plain = summarize_plain(&view(Dtype::Float32, &[3, 2], &[2, 1]), &bytes).unwrap();
        assert_eq!(plain.l2, s.l2);
        assert_ne!(plain.pos_checksum, s.pos_checksum);
    }

    #[test]
    fn non_finite_elements_are_counted_and_excluded() {
        let bytes = f32_bytes(&[f32::NAN, -2.0, f32::INFINITY, f32::NEG_INFINITY, 0.5]);
        let s = summarize_plain(&view(Dtype::Float32, &[5], &[1]), &bytes).unwrap();
        assert_eq!((s.nan_count, s.inf_count, s.finite_count), (1, 2, 2));
        assert_eq!(
            (s.min, s.max, s.max_abs),
            (Some(-2.0), Some(0.5), Some(2.0))
        );
        assert_eq!(s.mean, Some(-0.75));
        let all_nan = f32_bytes(&[f32::NAN, f32::NAN]);
        let s = summarize_plain(&view(Dtype::Float32, &[2], &[1]), &all_nan).unwrap();
        assert_eq!(
            (s.min, s.mean, s.l2, s.pos_checksum),
            (None, None, 0.0, 0.0)
        );
    }

    #[test]
    fn a_scalar_is_a_one_by_one_matrix() {
        let s = summarize_plain(&view(Dtype::Float64, &[], &[]), &(-3.0f64).to_le_bytes()).unwrap();
        assert_eq!(
            s.pos_checksum,
            -3.0 * weight(0, ROW_MUL) * weight(0, COL_MUL)
        );
        assert_eq!(s.l2, 3.0);
        assert!(summarize_plain(&view(Dtype::Float64, &[0, 4], &[4, 1]), &[]).is_none());
    }

    #[test]
    fn chunked_parallel_sums_match_one_sequential_pass() {
        // 3 rows of 50_000 (several chunks, rows split across chunks), a strided slice of a wider buffer.
        let (rows, cols, width) = (3u64, 50_000u64, 50_003u64);
        let values: Vec<f32> = (0..rows * width)
            .map(|i| ((i * 7919) % 1000) as f32 / 7.0 - 60.0)
            .collect();
        let bytes = f32_bytes(&values);
        let s = summarize_plain(&view(Dtype::Float32, &[rows, cols], &[width, 1]), &bytes).unwrap();
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
        let s = summarize_plain(&view(Dtype::Float64, &[2], &[1]), &bytes).unwrap();
        assert!(
            (s.l2 / (1e200 * 2f64.sqrt()) - 1.0).abs() < 1e-15,
            "{}",
            s.l2
        );
        // Up to the largest float64 (a fresh tester's 1e300 and 1e308 overflowed 2^-300).
        for (x, n) in [(1e300f64, 20usize), (1e308, 2), (f64::MAX, 1)] {
            let bytes: Vec<u8> = std::iter::repeat_n(x, n)
                .flat_map(|v| v.to_le_bytes())
                .collect();
            let s = summarize_plain(&view(Dtype::Float64, &[n as u64], &[1]), &bytes).unwrap();
            let want = x * (n as f64).sqrt();
            assert!((s.l2 / want - 1.0).abs() < 1e-15, "{x} x {n}: {}", s.l2);
        }
    }

    /// [`rows_body`] of `bytes` (float32 rows of `cols`) in the baseline build, after checking
    /// that the AVX-512 and AVX2 builds this CPU can run give the same bits.
    fn same_bits_on_every_width(
        bytes: &[u8],
        cols: usize,
        first_row: u64,
        row_weight: &dyn Fn(u64) -> f64,
    ) -> Run {
        let weights = &column_table()[..cols];
        let plain = rows_body::<dtype::F32>(bytes, cols, weights, first_row, row_weight).unwrap();
        let bits = |r: Run| [r.min, r.max, r.sum, r.sumsq, r.partial].map(f64::to_bits);
        #[cfg(target_arch = "x86_64")]
        {
            let fma = std::arch::is_x86_feature_detected!("fma");
            if fma && std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has AVX-512F and FMA.
                let wide = unsafe {
                    rows_avx512::<dtype::F32>(bytes, cols, weights, first_row, row_weight)
                };
                assert_eq!(bits(wide.unwrap()), bits(plain));
            }
            if fma && std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2 and FMA.
                let wide =
                    unsafe { rows_avx2::<dtype::F32>(bytes, cols, weights, first_row, row_weight) };
                assert_eq!(bits(wide.unwrap()), bits(plain));
            }
        }
        plain
    }

    /// [`rows_body`] of one row (the baseline build, whatever the CPU).
    fn run_body<E: Element>(bytes: &[u8], weights: &[f64]) -> Option<Run> {
        rows_body::<E>(bytes, weights.len(), weights, 0, &|_| 1.0)
    }

    #[test]
    fn whole_rows_in_one_pass_match_row_by_row_and_every_vector_width() {
        // 40 columns (two lane groups and a tail of 8) by 300 rows, contiguous: chunk() takes
        // the rows as blocks; a transposed copy's transpose is the same matrix read row by row.
        let (rows, cols) = (300usize, 40usize);
        let values: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919) % 2003) as f32 * 0.37 - 300.0)
            .collect();
        let dense = summarize_plain(
            &view(
                Dtype::Float32,
                &[rows as u64, cols as u64],
                &[cols as u64, 1],
            ),
            &f32_bytes(&values),
        )
        .unwrap();
        let mut transposed = vec![0.0f32; rows * cols];
        for r in 0..rows {
            for c in 0..cols {
                transposed[c * rows + r] = values[r * cols + c];
            }
        }
        let strided = summarize_plain(
            &view(
                Dtype::Float32,
                &[rows as u64, cols as u64],
                &[1, rows as u64],
            ),
            &f32_bytes(&transposed),
        )
        .unwrap();
        let scale: f64 = values.iter().map(|v| f64::from(v.abs())).sum();
        assert_eq!((dense.min, dense.max), (strided.min, strided.max));
        assert_eq!(dense.finite_count, strided.finite_count);
        for (a, b) in [
            (dense.sum, strided.sum),
            (dense.l2 * dense.l2, strided.l2 * strided.l2),
            (dense.pos_checksum, strided.pos_checksum),
        ] {
            assert!(
                (a - b).abs() <= 1e-12 * scale.max(1.0) * scale.max(1.0),
                "{a} vs {b}"
            );
        }
        let bytes = f32_bytes(&values);
        let row_weight = |r: u64| weight(r, ROW_MUL);
        same_bits_on_every_width(&bytes, cols, 7, &row_weight);
        // A NaN in the last row: counted, and the rows before it still summed.
        let mut holed = values.clone();
        holed[rows * cols - 3] = f32::NAN;
        let with_nan = summarize_plain(
            &view(
                Dtype::Float32,
                &[rows as u64, cols as u64],
                &[cols as u64, 1],
            ),
            &f32_bytes(&holed),
        )
        .unwrap();
        assert_eq!(with_nan.nan_count, 1);
        assert_eq!(with_nan.finite_count, (rows * cols - 1) as u64);
        let expected = dense.sum - f64::from(values[rows * cols - 3]);
        assert!((with_nan.sum - expected).abs() <= 1e-12 * scale);
    }

    #[test]
    fn every_vector_width_gives_the_same_bits() {
        // Fused multiply-adds everywhere and one fixed lane order: the AVX-512, AVX2 and
        // baseline (libm fma) builds of the fast path agree to the bit, so a dump does not
        // depend on the CPU that summarised it.
        let values: Vec<f32> = (0..1003)
            .map(|i| ((i * 7919) % 2003) as f32 * 0.37 - 300.0)
            .collect();
        let plain = same_bits_on_every_width(&f32_bytes(&values), values.len(), 0, &|_| 1.0);
        let (mut sum, mut partial) = (0.0f64, 0.0f64);
        for (c, &v) in values.iter().enumerate() {
            sum += f64::from(v);
            partial += f64::from(v) * weight(c as u64, COL_MUL);
        }
        let scale: f64 = values.iter().map(|v| f64::from(v.abs())).sum();
        assert!((plain.sum - sum).abs() < 1e-13 * scale);
        assert!((plain.partial - partial).abs() < 1e-13 * scale);
        assert_eq!(plain.min, -300.0);
    }

    #[test]
    fn a_row_holding_a_nan_or_an_infinity_is_counted_element_by_element() {
        let mut values: Vec<f32> = (0..600).map(|i| i as f32 - 100.0).collect();
        let finite_sum: f64 = values.iter().map(|&v| f64::from(v)).sum::<f64>();
        values[17] = f32::NAN;
        values[400] = f32::NEG_INFINITY;
        let weights = &column_table()[..values.len()];
        assert!(run_body::<dtype::F32>(&f32_bytes(&values), weights).is_none());
        let s = summarize_plain(
            &view(Dtype::Float32, &[2, 300], &[300, 1]),
            &f32_bytes(&values),
        )
        .unwrap();
        assert_eq!((s.nan_count, s.inf_count, s.finite_count), (1, 1, 598));
        let expected = finite_sum - f64::from(17.0f32 - 100.0) - f64::from(400.0f32 - 100.0);
        assert_eq!(s.mean.unwrap() * 598.0, expected);
        assert_eq!((s.min, s.max), (Some(-100.0), Some(499.0)));
    }

    #[test]
    fn a_sliced_view_checksums_at_the_full_tensors_coordinates() {
        // The full [4, 6] float64 tensor against its two column halves and two row halves.
        let full: Vec<f64> = (0..24)
            .map(|i| ((i * 13) % 7) as f64 - 2.5 + i as f64 * 0.5)
            .collect();
        let bytes: Vec<u8> = full.iter().flat_map(|v| v.to_le_bytes()).collect();
        let whole = summarize_plain(&view(Dtype::Float64, &[4, 6], &[6, 1]), &bytes).unwrap();
        let split = |dim: usize, rank: u64, local: u64, full: u64| Split {
            dim,
            full,
            offset: rank * local,
            zigzag: false,
            rank,
            size: 2,
        };
        let cols: f64 = (0..2)
            .map(|r| {
                let mut v = view(Dtype::Float64, &[4, 3], &[6, 1]);
                v.storage_offset = r * 3;
                let staged = &bytes[(r * 3 * 8) as usize..];
                summarize(&v, staged, Some(&split(1, r, 3, 6)))
                    .unwrap()
                    .pos_checksum
            })
            .sum();
        let rows: f64 = (0..2)
            .map(|r| {
                let staged = &bytes[(r * 12 * 8) as usize..];
                summarize(
                    &view(Dtype::Float64, &[2, 6], &[6, 1]),
                    staged,
                    Some(&split(0, r, 2, 4)),
                )
                .unwrap()
                .pos_checksum
            })
            .sum();
        let tolerance = 1e-13 * full.iter().map(|v| v.abs()).sum::<f64>();
        assert!(
            (cols - whole.pos_checksum).abs() < tolerance,
            "{cols} vs {}",
            whole.pos_checksum
        );
        assert!(
            (rows - whole.pos_checksum).abs() < tolerance,
            "{rows} vs {}",
            whole.pos_checksum
        );
    }

    #[test]
    fn the_local_checksum_is_the_unsharded_captures_pos_checksum_bit_for_bit() {
        // A [4, 6] float32 tensor; a piece of it captured with every kind of slice.
        let values: Vec<f32> = (0..24)
            .map(|i| ((i * 7919) % 31) as f32 * 0.37 - 5.0)
            .collect();
        let bytes = f32_bytes(&values);
        let piece = view(Dtype::Float32, &[4, 6], &[6, 1]);
        let plain = summarize(&piece, &bytes, None).unwrap();
        let slice = |dim: usize, full: u64, offset: u64, zigzag: bool, rank: u64| Split {
            dim,
            full,
            offset,
            zigzag,
            rank,
            size: 2,
        };
        for split in [
            slice(1, 12, 6, false, 1), // tp:1, rank 1 of 2
            slice(0, 10, 3, false, 0), // tp:0@3/10
            slice(0, 8, 0, true, 1),   // cp:0:zigzag, rank 1 of 2
        ] {
            let (summary, local) = summarize_sliced(&piece, &bytes, Some(&split));
            let summary = summary.unwrap();
            assert_eq!(
                local.map(f64::to_bits),
                Some(plain.pos_checksum.to_bits()),
                "{split:?}"
            );
            assert_ne!(summary.pos_checksum, plain.pos_checksum, "{split:?}");
        }
        // Two ranks holding equal pieces (a loader that read shard 0 twice): equal local
        // checksums, different checksums at the full tensor's coordinates.
        let (rank0, local0) = summarize_sliced(&piece, &bytes, Some(&slice(1, 12, 0, false, 0)));
        let (rank1, local1) = summarize_sliced(&piece, &bytes, Some(&slice(1, 12, 6, false, 1)));
        assert_eq!(local0.map(f64::to_bits), local1.map(f64::to_bits));
        assert_ne!(rank0.unwrap().pos_checksum, rank1.unwrap().pos_checksum);
        // Several chunks summed on the pool: the same bits again, every time.
        let (rows, cols) = (40u64, 1000u64);
        let big: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919) % 2003) as f32 * 0.37 - 300.0)
            .collect();
        let big_bytes = f32_bytes(&big);
        let big_view = view(Dtype::Float32, &[rows, cols], &[cols, 1]);
        assert!(rows * cols > 2 * CHUNK);
        let plain = summarize(&big_view, &big_bytes, None).unwrap().pos_checksum;
        for _ in 0..20 {
            let (_, local) =
                summarize_sliced(&big_view, &big_bytes, Some(&slice(0, 80, 40, false, 1)));
            assert_eq!(local.map(f64::to_bits), Some(plain.to_bits()));
        }
        // No split, or no elements: no local checksum.
        assert_eq!(summarize_sliced(&piece, &bytes, None).1, None);
        let empty = view(Dtype::Float32, &[0, 6], &[6, 1]);
        assert_eq!(
            summarize_sliced(&empty, &[], Some(&slice(1, 12, 6, false, 1))),
            (None, None)
        );
    }

    #[test]
    fn integers_and_bools_are_their_values() {
        let s = summarize_plain(&view(Dtype::Bool, &[4], &[1]), &[1, 0, 1, 1]).unwrap();
        assert_eq!((s.mean, s.max, s.nan_count), (Some(0.75), Some(1.0), 0));
        let bytes: Vec<u8> = [-7i64, 9].iter().flat_map(|v| v.to_le_bytes()).collect();
        let s = summarize_plain(&view(Dtype::Int64, &[2], &[1]), &bytes).unwrap();
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
            let s = summarize(&view, &bytes, None).unwrap();
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
