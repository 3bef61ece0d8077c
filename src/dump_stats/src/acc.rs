//! The accumulators of one reduction and the statistics they give.

/// The running sums of some elements of one tensor: a chunk, a run of rows, the whole tensor
/// (or, with per-row statistics, one row of an axis: [`crate::Reduction`]). A monoid:
/// [`Acc::EMPTY`] is its identity and [`Acc::merge`] combines two in order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Acc {
    /// NaN elements.
    pub nan: u64,
    /// +inf or −inf elements.
    pub inf: u64,
    /// Finite elements.
    pub finite: u64,
    /// Smallest finite element (+inf with none).
    pub min: f64,
    /// Largest finite element (−inf with none).
    pub max: f64,
    /// Σ x over the finite elements.
    pub sum: f64,
    /// Σ (x·scale)² over the finite elements ([`summarize`]'s `scale`).
    pub sumsq: f64,
    /// Σ x·u(r)·v(c) over the finite elements of the rows closed so far ([`Acc::close_row`]).
    pub checksum: f64,
}

impl Acc {
    /// No element.
    pub const EMPTY: Acc = Acc {
        nan: 0,
        inf: 0,
        finite: 0,
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        sum: 0.0,
        sumsq: 0.0,
        checksum: 0.0,
    };

    /// `a`'s elements followed by `b`'s.
    #[inline]
    pub fn merge(a: Acc, b: Acc) -> Acc {
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

    /// One element `x` (decoded exactly to `f64`) of the current row: counted if not finite,
    /// else into the sums, its square scaled by `scale` (1 but for [`summarize`]'s rescue), and
    /// `x·w` into `row_partial`, the row's weighted sum, where `w` is its column's v(c). Each
    /// product and sum is rounded on its own (no fused multiply-add): the native probe's
    /// element path, whose manifests are kept to the bit.
    #[inline(always)]
    pub fn take(&mut self, row_partial: &mut f64, x: f64, w: f64, scale: f64) {
        if x.is_finite() {
            self.finite += 1;
            self.min = self.min.min(x);
            self.max = self.max.max(x);
            self.sum += x;
            let scaled = x * scale;
            self.sumsq += scaled * scaled;
            *row_partial += x * w;
        } else if x.is_nan() {
            self.nan += 1;
        } else {
            self.inf += 1;
        }
    }

    /// Ends (a piece of) a row: its weighted sum `row_partial` (Σ x·v(c)) times u(r) into the
    /// checksum. A row cut by a chunk's end is closed in each chunk.
    #[inline(always)]
    pub fn close_row(&mut self, row_partial: f64, u: f64) {
        self.checksum += row_partial * u;
    }

    /// `n` adjacent all-finite elements summed by [`crate::lanes`], into the counts, extremes
    /// and sums; returns the run's checksum part ([`Run::partial`]), which the caller adds as its
    /// rows require (already weighted by u(r), or a row's partial still to be closed).
    #[inline(always)]
    pub fn add_run(&mut self, n: u64, run: &Run) -> f64 {
        self.finite += n;
        self.min = self.min.min(run.min);
        self.max = self.max.max(run.max);
        self.sum += run.sum;
        self.sumsq += run.sumsq;
        run.partial
    }
}

/// The sums of a run of adjacent elements that are all finite ([`crate::lanes`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    /// Smallest element.
    pub min: f64,
    /// Largest element.
    pub max: f64,
    /// Σ x.
    pub sum: f64,
    /// Σ x².
    pub sumsq: f64,
    /// Σ x·v(c), each row's part weighted by u(r) where the run covers whole rows.
    pub partial: f64,
}

/// One tensor's statistics, in `f64` (docs/manifest.md, "stats"). `min`, `max`, `mean` and
/// `max_abs` are `None` when no element is finite; then `l2` and `pos_checksum` are 0.
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
    /// Σ_F x itself (0 when no element is finite): not a manifest statistic, but what
    /// dump_probe.py's device vector carries (`_DEVICE_STATS`).
    pub sum: f64,
    /// sqrt(Σ_F x²).
    pub l2: f64,
    /// Σ_F x·u(r)·v(c).
    pub pos_checksum: f64,
}

/// The factor [`summarize`] scales values by before squaring them again when Σx² overflowed:
/// 2⁻⁶⁰⁰ (as dump_probe.py's Inductor path) brings the largest float64, 1.8e308, to 4e127,
/// whose square summed over 2⁶⁴ elements stays finite; 2⁻³⁰⁰ left squares of 1e300 overflowing.
pub const RESCUE_SCALE: f64 = f64::from_bits((1023 - 600) << 52);

/// The statistics of a whole tensor with at least one element, from `reduce(scale)`, the
/// caller's pass over every element ([`Acc::take`] with that `scale`, or [`crate::lanes`] runs
/// when it is 1). Called with 1; when sqrt(Σx²) is infinite (squares of float64 values above
/// ~1.3e154 overflow), called once more with [`RESCUE_SCALE`] for `l2` alone.
pub fn summarize(mut reduce: impl FnMut(f64) -> Acc) -> Summary {
    let acc = reduce(1.0);
    let mut l2 = acc.sumsq.sqrt();
    if l2.is_infinite() {
        l2 = reduce(RESCUE_SCALE).sumsq.sqrt() / RESCUE_SCALE;
    }
    let finite = acc.finite > 0;
    Summary {
        nan_count: acc.nan,
        inf_count: acc.inf,
        finite_count: acc.finite,
        max_abs: finite.then(|| acc.min.abs().max(acc.max.abs())),
        min: finite.then_some(acc.min),
        max: finite.then_some(acc.max),
        mean: finite.then(|| acc.sum / acc.finite as f64),
        sum: if finite { acc.sum } else { 0.0 },
        l2: if finite { l2 } else { 0.0 },
        pos_checksum: if finite { acc.checksum } else { 0.0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::{col_weight, row_weight};

    /// A row-major `[rows, cols]` matrix element by element, one row partial per row.
    fn reduce(values: &[f64], cols: usize, scale: f64) -> Acc {
        let mut acc = Acc::EMPTY;
        for (r, row) in values.chunks(cols).enumerate() {
            let mut partial = 0.0;
            for (c, &x) in row.iter().enumerate() {
                acc.take(&mut partial, x, col_weight(c as u64), scale);
            }
            acc.close_row(partial, row_weight(r as u64));
        }
        acc
    }

    #[test]
    fn the_definitions_hold() {
        let values = [1.0, f64::NAN, -3.0, f64::INFINITY, 2.0, f64::NEG_INFINITY];
        let s = summarize(|scale| reduce(&values, 3, scale));
        assert_eq!((s.nan_count, s.inf_count, s.finite_count), (1, 2, 3));
        assert_eq!(
            (s.min, s.max, s.max_abs),
            (Some(-3.0), Some(2.0), Some(3.0))
        );
        assert_eq!((s.mean, s.sum, s.l2), (Some(0.0), 0.0, 14f64.sqrt()));
        let expected = (1.0 * col_weight(0) + -3.0 * col_weight(2)) * row_weight(0)
            + 2.0 * col_weight(1) * row_weight(1);
        assert_eq!(s.pos_checksum, expected);
    }

    #[test]
    fn no_finite_element_leaves_the_values_undefined() {
        let s = summarize(|scale| reduce(&[f64::NAN, f64::INFINITY], 2, scale));
        assert_eq!((s.nan_count, s.inf_count, s.finite_count), (1, 1, 0));
        assert_eq!((s.min, s.max, s.mean, s.max_abs), (None, None, None, None));
        assert_eq!((s.sum, s.l2, s.pos_checksum), (0.0, 0.0, 0.0));
    }

    #[test]
    fn merging_in_order_is_one_pass() {
        let values: Vec<f64> = (0..40).map(|i| f64::from(i) * 0.25 - 3.0).collect();
        let whole = reduce(&values, 8, 1.0);
        let halves = Acc::merge(reduce(&values[..16], 8, 1.0), {
            // Rows 2.. of the same matrix: their row weights start at u(2).
            let mut acc = Acc::EMPTY;
            for (r, row) in values[16..].chunks(8).enumerate() {
                let mut partial = 0.0;
                for (c, &x) in row.iter().enumerate() {
                    acc.take(&mut partial, x, col_weight(c as u64), 1.0);
                }
                acc.close_row(partial, row_weight(r as u64 + 2));
            }
            acc
        });
        assert_eq!(
            (whole.finite, whole.min, whole.max),
            (halves.finite, halves.min, halves.max)
        );
        // Exact here: quarter-integers sum exactly in f64.
        assert_eq!((whole.sum, whole.sumsq), (halves.sum, halves.sumsq));
        assert_eq!(Acc::merge(Acc::EMPTY, whole), whole);
    }

    #[test]
    fn squares_that_overflow_are_rescued() {
        for (x, n) in [(1e200f64, 2usize), (1e300, 20), (f64::MAX, 1)] {
            let values = vec![x; n];
            let s = summarize(|scale| reduce(&values, n, scale));
            let want = x * (n as f64).sqrt();
            assert!((s.l2 / want - 1.0).abs() < 1e-15, "{x} x {n}: {}", s.l2);
        }
    }
}
