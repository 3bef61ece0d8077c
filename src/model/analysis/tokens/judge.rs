//! How two aligned token rows compare (docs/diff.md, "Token rows"): each statistic's
//! difference over its tolerance, the worst of them deciding.

use serde::Serialize;

use crate::model::analysis::compare::{Tolerance, Tolerances, unit_roundoff};
pub use crate::model::analysis::row_evidence::RowVerdict;
use crate::model::dump::ROW_WIDTH;

/// Rows whose statistics differ by less than `ROW_ROUNDOFF_FACTOR · u` of their scale agree
/// whatever the user's `rtol` (`u`: unit roundoff of the coarser dtype): the rounding of one
/// element's last bit, twice, as the whole-tensor checksum's noise bound
/// ([`crate::model::analysis::compare::CHECKSUM_NOISE`], measured on bfloat16 pairs).
pub const ROW_ROUNDOFF_FACTOR: f64 = 2.0;

/// The smallest row `rtol` of any dtype: float32 rows of correct chunked-vs-whole,
/// batched-vs-alone and prefix-cache pairs (assets/token_examples, `figures`) differed by up
/// to 63 · 2^-24 of their scale (a row checksum after six layers); 128 · 2^-24 ≈ 7.6e-6 keeps
/// them agreeing, with a margin of two, when a user tightens `--rtol` below it. docs/diff.md,
/// "Token rows".
pub const ROW_RTOL_FLOOR: f64 = 128.0 / 16_777_216.0;

/// The statistics of one token row, as the sidecar holds them; a statistic a merge could not
/// know (the non-finite count, `max_abs` and `sum_squares` of a merged partial sum) is NaN
/// and compared nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RowStats {
    /// NaN and ±inf elements in the row.
    pub nonfinite_count: f32,
    /// Largest |x| over the row's finite elements.
    pub max_abs: f32,
    /// Sum of the finite elements.
    pub sum: f32,
    /// Sum of their squares.
    pub sum_squares: f32,
    /// `Σ x[j, c] · u(position · k + j) · v(c)` over the finite elements (docs/manifest.md).
    pub row_checksum: f32,
}

impl RowStats {
    /// From a sidecar row of five values.
    pub fn of(values: &[f32]) -> RowStats {
        RowStats {
            nonfinite_count: values[0],
            max_abs: values[1],
            sum: values[2],
            sum_squares: values[3],
            row_checksum: values[4],
        }
    }

    /// The five values in sidecar order.
    pub fn values(&self) -> [f32; ROW_WIDTH] {
        [
            self.nonfinite_count,
            self.max_abs,
            self.sum,
            self.sum_squares,
            self.row_checksum,
        ]
    }

    /// sqrt of `sum_squares`: the row's l2 norm; NaN where `sum_squares` is not known.
    pub fn l2(&self) -> f64 {
        let squares = f64::from(self.sum_squares);
        if squares.is_nan() {
            squares
        } else {
            squares.max(0.0).sqrt()
        }
    }
}

/// The smallest row `rtol` for rows of dtypes `dtype_a` and `dtype_b`:
/// `ROW_ROUNDOFF_FACTOR · u` of the coarser dtype, at least [`ROW_RTOL_FLOOR`].
pub fn rtol_floor(dtype_a: &str, dtype_b: &str) -> f64 {
    (ROW_ROUNDOFF_FACTOR * unit_roundoff(dtype_a).max(unit_roundoff(dtype_b))).max(ROW_RTOL_FLOOR)
}

/// Compares rows `a` and `b` of tensors of dtypes `dtype_a`, `dtype_b`:
/// non-finite counts must be equal (else the ratio is infinite); `max_abs` is held to
/// `atol + rtol · max(|a|, |b|)`, the l2 norm likewise, the sum to `atol + rtol · max l2`
/// (rounding moves a sum like a random walk over the row's magnitudes) and the row checksum
/// to `atol + rtol · max l2 / 3` (its weights u·v have an rms of 1/3), each `rtol` at least
/// [`rtol_floor`]. The statistics' tolerances are the user's: `max_abs`, `l2`, `mean` (for
/// the sum) and `pos_checksum`.
pub fn judge(
    a: &RowStats,
    b: &RowStats,
    dtype_a: &str,
    dtype_b: &str,
    tolerances: &Tolerances,
) -> RowVerdict {
    RowJudge::new(tolerances).judge(a, b, rtol_floor(dtype_a, dtype_b), dtype_a != dtype_b)
}

/// [`judge`] with the user's four tolerances looked up once: what a diff of millions of rows
/// calls per row.
#[derive(Debug, Clone, Copy)]
pub struct RowJudge {
    max_abs: Tolerance,
    l2: Tolerance,
    sum: Tolerance,
    checksum: Tolerance,
}

impl RowJudge {
    /// The tolerances of `max_abs`, `l2`, `mean` (for the sum) and `pos_checksum`.
    pub fn new(tolerances: &Tolerances) -> RowJudge {
        RowJudge {
            max_abs: tolerances.of("max_abs"),
            l2: tolerances.of("l2"),
            sum: tolerances.of("mean"),
            checksum: tolerances.of("pos_checksum"),
        }
    }

    /// [`judge`] of rows whose smallest `rtol` is `floor` ([`rtol_floor`]). Across a
    /// precision change (`precision_change`: the dtypes differ) only the non-finite counts
    /// and the magnitudes (`max_abs`, `l2`) decide: the sum and the row checksum of the
    /// coarser computation drift further than its magnitudes (measured: 1.1x their tolerance
    /// on the committed float16 and bfloat16 captures against float32), as the whole-tensor
    /// comparison holds a precision change to its magnitudes and the checksum's rounding bound.
    pub fn judge(
        &self,
        a: &RowStats,
        b: &RowStats,
        floor: f64,
        precision_change: bool,
    ) -> RowVerdict {
        let (ratio, stat) = self.kernel(a.values(), b.values(), floor, precision_change);
        RowVerdict {
            ratio,
            stat: STAT_NAMES[stat as usize],
        }
    }

    /// [`RowJudge::judge`] of many rows: row `n` of `a` against row `n` of `b` (sidecar rows
    /// of [`ROW_WIDTH`] values each, as many on both sides), each row's ratio and the index of
    /// its worst statistic in [`STAT_NAMES`] written to `out` (cleared first). The same
    /// arithmetic as one row at a time, without a branch per statistic: a diff judges millions
    /// of rows.
    pub fn judge_rows(
        &self,
        a: &[f32],
        b: &[f32],
        floor: f64,
        precision_change: bool,
        out: &mut Vec<(f64, u8)>,
    ) {
        out.clear();
        out.extend(
            a.chunks_exact(ROW_WIDTH)
                .zip(b.chunks_exact(ROW_WIDTH))
                .map(|(x, y)| {
                    let (x, y): (&[f32; ROW_WIDTH], &[f32; ROW_WIDTH]) = (
                        x.try_into().expect("chunks of ROW_WIDTH"),
                        y.try_into().expect("chunks of ROW_WIDTH"),
                    );
                    self.kernel(*x, *y, floor, precision_change)
                }),
        );
    }

    /// Whether rows `a` and `b` diverge in `max_abs` alone, as [`RowJudge::judge`] weighs it
    /// (which then finds them diverging too): a cheap first test where many pairs are tried
    /// (a permutation search).
    pub fn max_abs_diverges(&self, a: &RowStats, b: &RowStats, floor: f64) -> bool {
        let (x, y) = (f64::from(a.max_abs), f64::from(b.max_abs));
        if x.is_nan() || y.is_nan() || x == y {
            return false;
        }
        let allowed = self.max_abs.atol + self.max_abs.rtol.max(floor) * x.abs().max(y.abs());
        allowed <= 0.0 || (x - y).abs() / allowed >= 1.0
    }

    /// One row's judgment as (ratio, index into [`STAT_NAMES`]), its values in sidecar order
    /// (non-finite count, `max_abs`, sum, sum of squares, row checksum). Selects rather than
    /// early returns, so that a batch compiles to straight-line code.
    #[inline(always)]
    fn kernel(
        &self,
        a: [f32; ROW_WIDTH],
        b: [f32; ROW_WIDTH],
        floor: f64,
        precision_change: bool,
    ) -> (f64, u8) {
        // Bit-identical rows (a deterministic rerun, a stage before the first change): nothing
        // to weigh.
        let identical =
            (0..ROW_WIDTH).fold(true, |same, i| same & (a[i].to_bits() == b[i].to_bits()));
        // NaN: a statistic not known (a merged partial sum's), compared nowhere.
        let counts_differ = !a[0].is_nan() & !b[0].is_nan() & (a[0] != b[0]);
        let l2_of = |squares: f32| {
            let squares = f64::from(squares);
            if squares.is_nan() {
                squares
            } else {
                squares.max(0.0).sqrt()
            }
        };
        let (l2_a, l2_b) = (l2_of(a[3]), l2_of(b[3]));
        // The known side's l2 (f64::max skips a NaN); two unknown ones leave the larger |sum|.
        let l2 = match l2_a.max(l2_b) {
            l2 if l2.is_nan() => f64::from(a[2].abs().max(b[2].abs())),
            l2 => l2,
        };
        let (max_a, max_b) = (f64::from(a[1]), f64::from(b[1]));
        // In JUDGED order: max_abs, l2, sum, row_checksum. Σ x·u·v with u, v ∈ (0, 1):
        // per-element rounding moves the checksum by about rms(u·v) = 1/3 of what it moves
        // the l2 norm.
        let xs = [max_a, l2_a, f64::from(a[2]), f64::from(a[4])];
        let ys = [max_b, l2_b, f64::from(b[2]), f64::from(b[4])];
        let scales = [max_a.abs().max(max_b.abs()), l2, l2, l2 / 3.0];
        let tolerances = [self.max_abs, self.l2, self.sum, self.checksum];
        let decide = if precision_change { 2 } else { xs.len() };
        let (mut worst, mut worst_at) = (0.0f64, 1u8);
        for i in 0..xs.len() {
            let (x, y) = (xs[i], ys[i]);
            let allowed = tolerances[i].atol + tolerances[i].rtol.max(floor) * scales[i];
            let ratio = if x == y {
                0.0
            } else if allowed > 0.0 {
                (x - y).abs() / allowed
            } else {
                f64::INFINITY
            };
            let weighed = i < decide && !x.is_nan() && !y.is_nan();
            if weighed && (ratio > worst || ratio.is_nan()) {
                (worst, worst_at) = (ratio, i as u8 + 1);
            }
        }
        if identical {
            (0.0, 1)
        } else if counts_differ {
            (f64::INFINITY, 0)
        } else {
            (worst, worst_at)
        }
    }
}

/// The statistics a row judgment names, by the index [`RowJudge::judge_rows`] gives:
/// the non-finite count, then the four it weighs in order (a precision change, the first
/// two of those only).
pub const STAT_NAMES: [&str; 5] = ["nonfinite_count", "max_abs", "l2", "sum", "row_checksum"];

/// [`rtol_floor`] of the last dtype pair asked, and whether the dtypes differ, kept: the rows
/// of one stage share their dtypes (and mostly their dtype strings, so the check is by
/// address first, not a string comparison per row).
#[derive(Debug, Default)]
pub struct FloorCache {
    last: Option<(*const u8, usize, *const u8, usize, f64, bool)>,
}

impl FloorCache {
    /// [`rtol_floor`] of `dtype_a` and `dtype_b`, and whether they differ (a precision
    /// change).
    pub fn of(&mut self, dtype_a: &str, dtype_b: &str) -> (f64, bool) {
        let key = (
            dtype_a.as_ptr(),
            dtype_a.len(),
            dtype_b.as_ptr(),
            dtype_b.len(),
        );
        match self.last {
            Some((pa, la, pb, lb, floor, change)) if (pa, la, pb, lb) == key => (floor, change),
            _ => {
                let (floor, change) = (rtol_floor(dtype_a, dtype_b), dtype_a != dtype_b);
                self.last = Some((key.0, key.1, key.2, key.3, floor, change));
                (floor, change)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(max_abs: f32, sum: f32, sum_squares: f32, checksum: f32) -> RowStats {
        RowStats {
            nonfinite_count: 0.0,
            max_abs,
            sum,
            sum_squares,
            row_checksum: checksum,
        }
    }

    #[test]
    fn rounding_agrees_and_a_changed_row_diverges() {
        let t = Tolerances::default();
        let a = row(2.0, 1.0, 16.0, 0.5);
        let close = row(2.000_001, 1.000_001, 16.000_01, 0.500_000_1);
        assert!(!judge(&a, &close, "float32", "float32", &t).diverges());
        let moved = row(2.1, 1.0, 16.0, 0.5);
        let v = judge(&a, &moved, "float32", "float32", &t);
        assert!(v.diverges());
        assert_eq!(v.stat, "max_abs");
        // |2.1 - 2.0| (in float32) over atol + 1e-2 · 2.1.
        let want = f64::from(2.1f32 - 2.0) / (1e-6 + 1e-2 * f64::from(2.1f32));
        assert!((v.ratio - want).abs() < 1e-9, "{v:?} vs {want}");
    }

    #[test]
    fn non_finite_counts_must_be_equal() {
        let t = Tolerances::default();
        let a = row(1.0, 1.0, 1.0, 0.1);
        let mut b = a;
        b.nonfinite_count = 1.0;
        let v = judge(&a, &b, "float16", "float16", &t);
        assert_eq!(v.stat, "nonfinite_count");
        assert!(v.diverges());
    }

    #[test]
    fn many_rows_are_judged_as_one_at_a_time() {
        let t = RowJudge::new(&Tolerances::default());
        let rows = [
            row(2.0, 1.0, 16.0, 0.5),
            row(2.0, 1.0, 16.0, 0.5),
            row(2.1, 1.0, 16.0, 0.5),
            row(f32::NAN, 1.0, f32::NAN, 0.5),
            row(1.0, f32::INFINITY, 4.0, -0.25),
            RowStats {
                nonfinite_count: 3.0,
                ..row(1.0, 1.0, 1.0, 0.1)
            },
        ];
        let others = [
            row(2.0, 1.0, 16.0, 0.5),
            row(2.000_001, 1.000_001, 16.000_01, 0.500_000_1),
            row(2.0, 1.0, 16.0, 0.5),
            row(1.0, 1.5, f32::NAN, 0.5),
            row(1.0, 1.0, 4.0, -0.25),
            row(1.0, 1.0, 1.0, 0.1),
        ];
        let flat = |r: &[RowStats]| r.iter().flat_map(RowStats::values).collect::<Vec<f32>>();
        for precision_change in [false, true] {
            let mut out = Vec::new();
            t.judge_rows(
                &flat(&rows),
                &flat(&others),
                1e-6,
                precision_change,
                &mut out,
            );
            assert_eq!(out.len(), rows.len());
            for ((x, y), &(ratio, stat)) in rows.iter().zip(&others).zip(&out) {
                let one = t.judge(x, y, 1e-6, precision_change);
                assert_eq!(ratio.to_bits(), one.ratio.to_bits(), "{x:?} {y:?}");
                assert_eq!(STAT_NAMES[stat as usize], one.stat);
                // The cheap max_abs test never calls agreeing rows diverging.
                if t.max_abs_diverges(x, y, 1e-6) {
                    assert!(one.diverges(), "{x:?} {y:?}");
                }
            }
        }
        // Identical rows, a changed max_abs, an unknown l2 left to the sum, an infinite sum,
        // different non-finite counts.
        let mut out = Vec::new();
        t.judge_rows(&flat(&rows), &flat(&others), 1e-6, false, &mut out);
        let names: Vec<&str> = out.iter().map(|&(_, s)| STAT_NAMES[s as usize]).collect();
        assert_eq!(out[0], (0.0, 1));
        assert!(out[1].0 < 1.0);
        assert_eq!(names[2], "max_abs");
        assert!(out[2].0 > 1.0);
        assert_eq!(names[3], "sum");
        assert_eq!(names[4], "sum");
        assert_eq!(out[4].0, f64::INFINITY);
        assert_eq!((names[5], out[5].0), ("nonfinite_count", f64::INFINITY));
    }
}
