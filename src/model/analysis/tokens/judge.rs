//! How two aligned token rows compare (docs/diff.md, "Token rows"): each statistic's
//! difference over its tolerance, the worst of them deciding.

use serde::Serialize;

use crate::model::analysis::compare::{Tolerance, Tolerances, unit_roundoff};
pub use crate::model::analysis::row_evidence::RowVerdict;

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
        // Bit-identical rows (a deterministic rerun, a stage before the first change): nothing
        // to weigh.
        if a.nonfinite_count.to_bits() == b.nonfinite_count.to_bits()
            && a.max_abs.to_bits() == b.max_abs.to_bits()
            && a.sum.to_bits() == b.sum.to_bits()
            && a.sum_squares.to_bits() == b.sum_squares.to_bits()
            && a.row_checksum.to_bits() == b.row_checksum.to_bits()
        {
            return RowVerdict {
                ratio: 0.0,
                stat: "max_abs",
            };
        }
        // NaN: a statistic not known (a merged partial sum's), compared nowhere.
        let known = |x: f32, y: f32| !x.is_nan() && !y.is_nan();
        if known(a.nonfinite_count, b.nonfinite_count) && a.nonfinite_count != b.nonfinite_count {
            return RowVerdict {
                ratio: f64::INFINITY,
                stat: "nonfinite_count",
            };
        }
        let (l2_a, l2_b) = (a.l2(), b.l2());
        // The known side's l2 (f64::max skips a NaN); two unknown ones leave the larger |sum|.
        let l2 = match l2_a.max(l2_b) {
            l2 if l2.is_nan() => f64::from(a.sum.abs().max(b.sum.abs())),
            l2 => l2,
        };
        let (max_a, max_b) = (f64::from(a.max_abs), f64::from(b.max_abs));
        // Σ x·u·v with u, v ∈ (0, 1): per-element rounding moves the checksum by about
        // rms(u·v) = 1/3 of what it moves the l2 norm.
        let checks: [(&'static str, f64, f64, Tolerance, f64); 4] = [
            (
                "max_abs",
                max_a,
                max_b,
                self.max_abs,
                max_a.abs().max(max_b.abs()),
            ),
            ("l2", l2_a, l2_b, self.l2, l2),
            ("sum", f64::from(a.sum), f64::from(b.sum), self.sum, l2),
            (
                "row_checksum",
                f64::from(a.row_checksum),
                f64::from(b.row_checksum),
                self.checksum,
                l2 / 3.0,
            ),
        ];
        let mut worst = RowVerdict {
            ratio: 0.0,
            stat: "max_abs",
        };
        let decide = if precision_change { 2 } else { checks.len() };
        for &(stat, x, y, tolerance, scale) in &checks[..decide] {
            if x.is_nan() || y.is_nan() {
                continue;
            }
            let allowed = tolerance.atol + tolerance.rtol.max(floor) * scale;
            let ratio = if x == y {
                0.0
            } else if allowed > 0.0 {
                (x - y).abs() / allowed
            } else {
                f64::INFINITY
            };
            if ratio > worst.ratio || ratio.is_nan() {
                worst = RowVerdict { ratio, stat };
            }
        }
        worst
    }
}

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
}
