//! Comparing the statistics of two records: tolerances, per-statistic differences, verdict.
//!
//! Statistics are a coarse screen (seed 001: the default tolerance only
//! screens; an accuracy claim needs explicit tolerances and tensors). Each
//! statistic is compared against a scale that makes the tolerance mean the
//! same thing for every tensor:
//!
//! | statistic | scale |
//! |---|---|
//! | `max_abs`, `min`, `max`, `l2` | `max(|a|, |b|)` |
//! | `mean` | the larger root-mean-square, `l2 / sqrt(finite_count)`: a mean near zero is compared to the tensor's magnitude, not to itself |
//! | `pos_checksum` | the largest of the two `l2` and the two checksums: moving one row of `rows` changes it by about `l2 / sqrt(rows)`; rounding noise (`ε·l2`, or `ε·checksum` for same-signed values whose errors correlate) does not |
//!
//! A statistic differs when `|a − b| > atol + rtol · scale`.

use serde::Serialize;

use crate::model::dump::{Record, Stats};

/// The compared statistics, in report order.
pub const STATS: [&str; 6] = ["max_abs", "min", "max", "mean", "l2", "pos_checksum"];
/// Indexes into [`STATS`] of the statistics compared against a scale of their own.
const MEAN: usize = 3;
const POS_CHECKSUM: usize = 5;

/// `rtol` and `atol` of one statistic.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tolerance {
    /// Relative tolerance, multiplied by the statistic's scale (docs/diff.md, "Tolerances").
    pub rtol: f64,
    /// Absolute tolerance, added to `rtol · scale`: the noise floor for tensors near zero.
    pub atol: f64,
}

/// Per-statistic tolerances, indexed like [`STATS`], and the checksum tolerance for pairs
/// whose dtypes differ in precision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tolerances {
    /// One tolerance per statistic, in [`STATS`] order (`per_stat[5]`: `pos_checksum` between
    /// records of one dtype).
    pub per_stat: [Tolerance; 6],
    /// Used for `pos_checksum` instead of `per_stat[5]` when the two dtypes differ within one
    /// kind (float32 vs bfloat16): rounding then moves every element, and the checksum, a
    /// random projection of the values, sees that noise at about a third of the element-wise
    /// relative error. `None` when the user set the checksum's tolerance.
    pub precision_change_checksum: Option<Tolerance>,
}

/// Default relative tolerance of every statistic but `pos_checksum` (docs/diff.md).
pub const DEFAULT_RTOL: f64 = 1e-2;
/// Default absolute tolerance of every statistic.
pub const DEFAULT_ATOL: f64 = 1e-6;
/// Default relative tolerance of `pos_checksum` between records of one dtype.
pub const CHECKSUM_RTOL: f64 = 1e-3;
/// Default relative tolerance of `pos_checksum` across a precision change (float32 vs bfloat16).
pub const CHECKSUM_RTOL_PRECISION_CHANGE: f64 = 5e-2;

impl Default for Tolerances {
    /// The coarse screen: `rtol = 1e-2` (bfloat16 rounding, ~4e-3, passes; a wrong kernel does
    /// not) and `atol = 1e-6` (absolute noise floor for tensors near zero); `pos_checksum` at
    /// `rtol = 1e-3` between records of one dtype (a moved row of `rows` changes it by about
    /// `0.3 / sqrt(rows)`, summation-order noise by ~1e-6) and `rtol = 5e-2` across a precision
    /// change (bfloat16 noise over a few layers reaches ~1e-2).
    fn default() -> Self {
        let mut per_stat = [Tolerance {
            rtol: DEFAULT_RTOL,
            atol: DEFAULT_ATOL,
        }; 6];
        per_stat[POS_CHECKSUM] = Tolerance {
            rtol: CHECKSUM_RTOL,
            atol: DEFAULT_ATOL,
        };
        Tolerances {
            per_stat,
            precision_change_checksum: Some(Tolerance {
                rtol: CHECKSUM_RTOL_PRECISION_CHANGE,
                atol: DEFAULT_ATOL,
            }),
        }
    }
}

impl Tolerances {
    /// The same `rtol` and `atol` for every statistic, whatever the dtypes.
    pub fn uniform(rtol: f64, atol: f64) -> Self {
        Tolerances {
            per_stat: [Tolerance { rtol, atol }; 6],
            precision_change_checksum: None,
        }
    }

    /// Sets one statistic's tolerance (for `pos_checksum`, across precision changes too).
    ///
    /// # Errors
    /// `name` is not one of [`STATS`].
    pub fn set(&mut self, name: &str, tolerance: Tolerance) -> Result<(), String> {
        let index = STATS
            .iter()
            .position(|&s| s == name)
            .ok_or_else(|| format!("unknown statistic {name:?}; one of {}", STATS.join(", ")))?;
        self.per_stat[index] = tolerance;
        if name == "pos_checksum" {
            self.precision_change_checksum = None;
        }
        Ok(())
    }

    /// The tolerance of statistic `name` (one of [`STATS`]) for a pair with or without a precision change.
    pub fn of(&self, name: &str, precision_change: bool) -> Tolerance {
        self.at(
            STATS
                .iter()
                .position(|&s| s == name)
                .expect("a known statistic"),
            precision_change,
        )
    }

    /// [`Tolerances::of`] the statistic `STATS[index]`.
    pub fn at(&self, index: usize, precision_change: bool) -> Tolerance {
        match self.precision_change_checksum {
            Some(t) if precision_change && index == POS_CHECKSUM => t,
            _ => self.per_stat[index],
        }
    }
}

/// One statistic of a pair, with its difference and the bound it was held to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatDiff {
    /// The statistic, one of [`STATS`].
    pub name: &'static str,
    /// A's value; `None` when undefined (no finite element, or not recorded).
    pub a: Option<f64>,
    /// B's value (the reference); `None` when undefined.
    pub b: Option<f64>,
    /// `|a − b|`; null when either side is undefined.
    pub abs_diff: Option<f64>,
    /// `|a − b| / scale` (see the module table); null when the scale is 0 or undefined.
    pub rel_diff: Option<f64>,
    /// `|a − b| / |b|`, the relative error against B as the reference (msprobe compare's
    /// `MaxRelativeErr` … `NormRelativeErr`, there as a percentage): 0 when equal, +inf when
    /// `b` is 0 and `a` is not; null when either side is undefined or non-finite.
    pub rel_err: Option<f64>,
    /// `atol + rtol · scale`.
    pub bound: Option<f64>,
    /// True when `|a − b| > bound`, or one side is undefined or non-finite and the two are not
    /// equal (equal values, equal infinities included, never exceed).
    pub exceeds: bool,
}

/// How a paired record compares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// Every statistic within tolerance.
    Agree,
    /// Shape, or the kind of dtype (floating / integer / bool), differs.
    Structural {
        /// What differs, e.g. `shape [2, 3] vs [3, 2]`, `dtype float32 vs int64`, or
        /// `statistics on one side only`.
        reason: String,
    },
    /// NaN or infinity counts differ: always a divergence.
    NonFinite,
    /// Magnitude statistics differ beyond tolerance.
    Magnitude,
    /// Magnitudes agree but the position checksum does not: values were moved (a permutation).
    ValuesMoved,
}

impl Verdict {
    /// True for every verdict but `Agree`.
    pub fn diverges(&self) -> bool {
        *self != Verdict::Agree
    }
}

/// The comparison of one pair of records.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// The first verdict that applies, in the order of docs/diff.md ("Verdict of a pair").
    pub verdict: Verdict,
    /// One entry per statistic, in [`STATS`] order; empty when either side has no statistics.
    pub stats: Vec<StatDiff>,
    /// The dtypes differ within one kind (float32 vs bfloat16): a precision change, compared by value.
    pub precision_change: bool,
}

/// dtype family: values of different families are not comparable as numbers.
fn dtype_kind(dtype: &str) -> &'static str {
    if dtype == "bool" {
        "bool"
    } else if dtype.starts_with("float") || dtype.starts_with("bfloat") {
        "floating"
    } else if dtype.starts_with("complex") {
        "complex"
    } else {
        "integer"
    }
}

/// The value of the statistic `STATS[index]`.
fn stat_at(stats: &Stats, index: usize) -> Option<f64> {
    match index {
        0 => stats.max_abs,
        1 => stats.min,
        2 => stats.max,
        MEAN => stats.mean,
        4 => stats.l2,
        POS_CHECKSUM => stats.pos_checksum,
        _ => None,
    }
}

fn rms(stats: &Stats) -> Option<f64> {
    let finite = stats.finite_count?;
    (finite > 0)
        .then(|| stats.l2.map(|l2| l2 / (finite as f64).sqrt()))
        .flatten()
}

fn larger(x: Option<f64>, y: Option<f64>) -> Option<f64> {
    match (x, y) {
        (Some(x), Some(y)) => Some(x.abs().max(y.abs())),
        (Some(v), None) | (None, Some(v)) => Some(v.abs()),
        (None, None) => None,
    }
}

/// Compares one statistic of two stats objects.
pub fn compare_stat(name: &'static str, a: &Stats, b: &Stats, tolerance: Tolerance) -> StatDiff {
    match STATS.iter().position(|&s| s == name) {
        Some(index) => compare_stat_at(index, a, b, tolerance),
        None => compare_values(name, None, None, None, tolerance),
    }
}

/// [`compare_stat`] of `STATS[index]`.
fn compare_stat_at(index: usize, a: &Stats, b: &Stats, tolerance: Tolerance) -> StatDiff {
    let (va, vb) = (stat_at(a, index), stat_at(b, index));
    let scale = match index {
        MEAN => larger(rms(a), rms(b)),
        POS_CHECKSUM => larger(larger(a.l2, b.l2), larger(va, vb)),
        _ => larger(va, vb),
    };
    compare_values(STATS[index], va, vb, scale, tolerance)
}

/// One statistic's difference, held to `atol + rtol · scale`.
fn compare_values(
    name: &'static str,
    va: Option<f64>,
    vb: Option<f64>,
    scale: Option<f64>,
    tolerance: Tolerance,
) -> StatDiff {
    let (abs_diff, exceeds) = match (va, vb) {
        (Some(x), Some(y)) if x == y => (Some(0.0), false), // equal infinities included
        (Some(x), Some(y)) if x.is_finite() && y.is_finite() => {
            let d = (x - y).abs();
            let bound = tolerance.atol + tolerance.rtol * scale.unwrap_or(0.0);
            (Some(d), d > bound)
        }
        (None, None) => (None, false),
        _ => (None, true), // one side undefined or non-finite and not equal
    };
    let rel_diff = match (abs_diff, scale) {
        (Some(d), Some(s)) if s > 0.0 && s.is_finite() => Some(d / s),
        (Some(0.0), _) => Some(0.0),
        _ => None,
    };
    let bound = scale
        .filter(|s| s.is_finite())
        .map(|s| tolerance.atol + tolerance.rtol * s);
    let rel_err = match (abs_diff, vb) {
        (Some(0.0), _) => Some(0.0),
        (Some(d), Some(y)) if y != 0.0 => Some(d / y.abs()),
        (Some(_), Some(_)) => Some(f64::INFINITY),
        _ => None,
    };
    StatDiff {
        name,
        a: va,
        b: vb,
        abs_diff,
        rel_diff,
        rel_err,
        bound,
        exceeds,
    }
}

/// Compares two records captured at the same `stage#occurrence`.
pub fn compare_records(a: &Record, b: &Record, tolerances: &Tolerances) -> Comparison {
    let precision_change = a.dtype != b.dtype && dtype_kind(&a.dtype) == dtype_kind(&b.dtype);
    let structural = if a.shape != b.shape {
        Some(format!("shape {:?} vs {:?}", a.shape, b.shape))
    } else if dtype_kind(&a.dtype) != dtype_kind(&b.dtype) {
        Some(format!("dtype {} vs {}", a.dtype, b.dtype))
    } else {
        None
    };
    let (Some(sa), Some(sb)) = (&a.stats, &b.stats) else {
        let verdict = match structural {
            Some(reason) => Verdict::Structural { reason },
            None if a.stats.is_some() != b.stats.is_some() => Verdict::Structural {
                reason: "statistics on one side only".to_string(),
            },
            None => Verdict::Agree,
        };
        return Comparison {
            verdict,
            stats: Vec::new(),
            precision_change,
        };
    };
    let stats: Vec<StatDiff> = (0..STATS.len())
        .map(|i| compare_stat_at(i, sa, sb, tolerances.at(i, precision_change)))
        .collect();
    let magnitude_differs = stats.iter().any(|d| d.name != "pos_checksum" && d.exceeds);
    let checksum_differs = stats.iter().any(|d| d.name == "pos_checksum" && d.exceeds);
    let verdict = if let Some(reason) = structural {
        Verdict::Structural { reason }
    } else if sa.nan_count != sb.nan_count || sa.inf_count != sb.inf_count {
        Verdict::NonFinite
    } else if magnitude_differs {
        Verdict::Magnitude
    } else if checksum_differs {
        Verdict::ValuesMoved
    } else {
        Verdict::Agree
    };
    Comparison {
        verdict,
        stats,
        precision_change,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(min: f64, max: f64, mean: f64, l2: f64, checksum: f64, n: u64) -> Stats {
        Stats {
            nan_count: 0,
            inf_count: 0,
            finite_count: Some(n),
            max_abs: Some(min.abs().max(max.abs())),
            min: Some(min),
            max: Some(max),
            mean: Some(mean),
            l2: Some(l2),
            pos_checksum: Some(checksum),
            counts_known: true,
        }
    }

    #[test]
    fn mean_near_zero_is_compared_to_the_rms() {
        // rms = 10 / sqrt(100) = 1; a mean moving from 1e-4 to 2e-3 is 0.19% of it.
        let a = stats(-3.0, 3.0, 1e-4, 10.0, 1.0, 100);
        let b = stats(-3.0, 3.0, 2e-3, 10.0, 1.0, 100);
        let d = compare_stat(
            "mean",
            &a,
            &b,
            Tolerance {
                rtol: 1e-2,
                atol: 0.0,
            },
        );
        assert!(!d.exceeds);
        assert!((d.rel_diff.unwrap() - 1.9e-3).abs() < 1e-12);
    }

    #[test]
    fn stat_indexes_name_their_statistics() {
        assert_eq!((STATS[MEAN], STATS[POS_CHECKSUM]), ("mean", "pos_checksum"));
        let a = stats(-3.0, 3.0, 0.1, 10.0, 1.0, 100);
        let b = stats(-2.0, 3.5, 0.3, 12.0, 1.7, 100);
        let tolerances = Tolerances::default();
        for (i, &name) in STATS.iter().enumerate() {
            assert_eq!(tolerances.at(i, true), tolerances.of(name, true));
            assert_eq!(
                compare_stat(name, &a, &b, tolerances.of(name, false)),
                compare_stat_at(i, &a, &b, tolerances.at(i, false))
            );
        }
    }

    #[test]
    fn checksum_alone_differing_is_values_moved() {
        let a = stats(-3.0, 3.0, 0.1, 10.0, 1.0, 100);
        let b = stats(-3.0, 3.0, 0.1, 10.0, 2.0, 100); // 10% of l2: beyond the 5% checksum screen
        let ra = record_with(a);
        let rb = record_with(b);
        assert_eq!(
            compare_records(&ra, &rb, &Tolerances::default()).verdict,
            Verdict::ValuesMoved
        );
    }

    #[test]
    fn precision_change_is_compared_by_value_but_int_vs_float_is_structural() {
        let s = stats(-1.0, 1.0, 0.0, 1.0, 0.5, 4);
        let mut a = record_with(s.clone());
        let mut b = record_with(s);
        b.dtype = "bfloat16".into();
        let c = compare_records(&a, &b, &Tolerances::default());
        assert_eq!(c.verdict, Verdict::Agree);
        assert!(c.precision_change);
        a.dtype = "int64".into();
        assert_eq!(
            compare_records(&a, &b, &Tolerances::default()).verdict,
            Verdict::Structural {
                reason: "dtype int64 vs bfloat16".to_string()
            }
        );
    }

    #[test]
    fn equal_infinities_agree_and_one_sided_undefined_differs() {
        let mut a = stats(-1.0, 1.0, 0.0, 1.0, 0.5, 4);
        a.l2 = Some(f64::INFINITY);
        let b = a.clone();
        assert!(
            !compare_stat(
                "l2",
                &a,
                &b,
                Tolerance {
                    rtol: 0.0,
                    atol: 0.0
                }
            )
            .exceeds
        );
        let mut c = a.clone();
        c.mean = None;
        assert!(
            compare_stat(
                "mean",
                &a,
                &c,
                Tolerance {
                    rtol: 1.0,
                    atol: 1.0
                }
            )
            .exceeds
        );
    }

    fn record_with(stats: Stats) -> Record {
        Record {
            seq: 0,
            stage: "s".into(),
            occurrence: 1,
            mode: crate::model::dump::Mode::Eager,
            dtype: "float32".into(),
            shape: vec![2, 2].into(),
            stride: vec![2, 1].into(),
            storage_offset: 0,
            element_size: 4,
            numel: 4,
            storage_ptr: Some(64),
            storage_id: Some(1),
            storage_nbytes: Some(16),
            data_ptr: Some(64),
            device: "cpu".into(),
            device_format: None,
            is_contiguous: true,
            stats: Some(stats),
            tensor_file: None,
            rows_kept: None,
            rows_total: None,
            truncated: None,
        }
    }
}
