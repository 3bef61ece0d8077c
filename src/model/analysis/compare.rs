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
//! | `pos_checksum` | the largest of the two `l2` and the two checksums |
//!
//! A statistic differs when `|a − b| > atol + rtol · scale`. The position checksum is held to
//! a bound that also follows rounding ([`ChecksumNoise`]): the unit roundoff of the coarser
//! dtype and the per-element change the magnitude statistics show (docs/diff.md, "The
//! checksum's noise bound", has the derivation and the measurements behind its factors).
//!
//! Two kinds of statistic are not compared at all ([`Exclusion`]): one recorded on one side
//! only (it says nothing about the values), and a sum (`mean`, `l2`, `pos_checksum`) that is
//! non-finite while every element is finite, which is the dump tool's own overflow (msprobe
//! reduces a float16 tensor in float16, so a `Norm` above 65504 is written as inf).

use dump_stats::Stat;
use serde::Serialize;

use crate::model::dump::{Record, Stats};

/// The compared statistics, in report order: the value statistics of `dump_stats`, in the
/// manifest's order.
pub const STATS: [&str; 6] = dump_stats::VALUE_STAT_NAMES;
/// Indexes into [`STATS`] of the statistics compared against a scale of their own.
const MEAN: usize = Stat::Mean.value_index();
#[cfg(test)] // scale_at compares l2 like the others; the tests name it.
const L2: usize = Stat::L2.value_index();
const POS_CHECKSUM: usize = Stat::PosChecksum.value_index();

/// `rtol` and `atol` of one statistic.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Tolerance {
    /// Relative tolerance, multiplied by the statistic's scale (docs/diff.md, "Tolerances").
    pub rtol: f64,
    /// Absolute tolerance, added to `rtol · scale`: the noise floor for tensors near zero.
    pub atol: f64,
}

/// How far the position checksum may move by rounding alone (docs/diff.md, "The checksum's
/// noise bound").
///
/// The checksum of a pair differs when it moves by more than `atol + bound · scale`, with
/// `bound = max(rtol, roundoff_factor · u, evidence_factor · e)`: `u` the unit roundoff of the
/// coarser of the two dtypes ([`unit_roundoff`]), `e` the per-element change the magnitude
/// statistics show, relative to the checksum's scale ([`noise_evidence`]). A checksum that moved
/// beyond `rtol` but not beyond the bound is [`Verdict::ChecksumInconclusive`] where the bound
/// is above `moved_row_shift / sqrt(rows)`, the shift of one moved row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ChecksumNoise {
    /// `k`: rounding noise of up to `k` unit roundoffs of the coarser dtype is passed (where
    /// `c · e` understated the noise, measured bfloat16 pairs needed up to 1.3; 2 also keeps
    /// float16's floor, 9.8e-4, at the same-dtype `rtol`).
    pub roundoff_factor: f64,
    /// `c`: the checksum may move `c · e` (independent element errors move it by about `e / 3`;
    /// measured ratios to `e` reached 3.0, and 8.5 where `k · u` held the noise).
    pub evidence_factor: f64,
    /// `s`: one moved row of `rows` shifts the checksum by about `s / sqrt(rows)` of its scale
    /// (measured medians of single-row swaps 0.039 at 128 rows and 0.083 at 1024; 0.3 is the
    /// mean for rows unrelated to each other).
    pub moved_row_shift: f64,
}

/// The default [`ChecksumNoise`]: `k = 2`, `c = 4`, `s = 0.05` (docs/diff.md).
pub const CHECKSUM_NOISE: ChecksumNoise = ChecksumNoise {
    roundoff_factor: 2.0,
    evidence_factor: 4.0,
    moved_row_shift: 0.05,
};

/// Per-statistic tolerances, indexed like [`STATS`], and the checksum's noise bound.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tolerances {
    /// One tolerance per statistic, in [`STATS`] order (`per_stat[5]`: `pos_checksum`);
    /// serialized as an object keyed by the statistic's name (`{"max_abs": {"rtol", "atol"},
    /// …}`).
    #[serde(serialize_with = "by_stat_name")]
    pub per_stat: [Tolerance; 6],
    /// The checksum's rounding-noise bound on top of its `rtol`; `None` when the user set the
    /// checksum's tolerance (or every statistic's): the checksum is then held to it alone.
    pub checksum_noise: Option<ChecksumNoise>,
}

/// `per_stat` as a JSON object keyed by [`STATS`] names, in their order.
fn by_stat_name<S: serde::Serializer>(
    per_stat: &[Tolerance; 6],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(Some(per_stat.len()))?;
    for (name, tolerance) in STATS.iter().zip(per_stat) {
        map.serialize_entry(name, tolerance)?;
    }
    map.end()
}

/// Default relative tolerance of every statistic but `pos_checksum` (docs/diff.md).
pub const DEFAULT_RTOL: f64 = 1e-2;
/// Default absolute tolerance of every statistic.
pub const DEFAULT_ATOL: f64 = 1e-6;
/// Default relative tolerance of `pos_checksum`: the screen of a pair of one dtype, below
/// which the checksum agrees whatever the noise bound.
pub const CHECKSUM_RTOL: f64 = 1e-3;

impl Default for Tolerances {
    /// The coarse screen: `rtol = 1e-2` (bfloat16 rounding, ~4e-3, passes; a wrong kernel does
    /// not) and `atol = 1e-6` (absolute noise floor for tensors near zero); `pos_checksum` at
    /// `rtol = 1e-3` (summation-order noise is ~1e-6) with the noise bound [`CHECKSUM_NOISE`].
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
            checksum_noise: Some(CHECKSUM_NOISE),
        }
    }
}

impl Tolerances {
    /// The same `rtol` and `atol` for every statistic, whatever the dtypes, and no noise bound.
    pub fn uniform(rtol: f64, atol: f64) -> Self {
        Tolerances {
            per_stat: [Tolerance { rtol, atol }; 6],
            checksum_noise: None,
        }
    }

    /// Sets one statistic's tolerance (for `pos_checksum`, the noise bound goes: the checksum
    /// is then held to `tolerance` alone).
    ///
    /// # Errors
    /// `name` is not one of [`STATS`].
    pub fn set(&mut self, name: &str, tolerance: Tolerance) -> Result<(), String> {
        let index = STATS
            .iter()
            .position(|&s| s == name)
            .ok_or_else(|| format!("unknown statistic {name:?}; one of {}", STATS.join(", ")))?;
        self.per_stat[index] = tolerance;
        if index == POS_CHECKSUM {
            self.checksum_noise = None;
        }
        Ok(())
    }

    /// The tolerance of statistic `name` (one of [`STATS`]).
    ///
    /// # Panics
    /// `name` is not one of [`STATS`].
    pub fn of(&self, name: &str) -> Tolerance {
        self.per_stat[STATS
            .iter()
            .position(|&s| s == name)
            .expect("a known statistic")]
    }
}

/// Unit roundoff `u = 2^-p` of a floating dtype with `p` significand bits (implicit bit
/// included): float64 2^-53, float32 2^-24, float16 2^-11, bfloat16 2^-8, float8 e4m3 2^-4,
/// e5m2 2^-3. 0 for integers, bools and names it does not know (taken as exact).
pub fn unit_roundoff(dtype: &str) -> f64 {
    match dtype {
        "float64" | "double" => 2f64.powi(-53),
        "float32" | "float" => 2f64.powi(-24),
        "float16" | "half" => 2f64.powi(-11),
        "bfloat16" => 2f64.powi(-8),
        d if d.starts_with("float8_e4m3") => 2f64.powi(-4),
        d if d.starts_with("float8_e5m2") => 2f64.powi(-3),
        _ => 0.0,
    }
}

/// The largest finite value of a floating dtype; `None` where unknown (or unbounded).
fn dtype_max(dtype: &str) -> Option<f64> {
    match dtype {
        "float16" | "half" => Some(65504.0),
        "bfloat16" => Some(3.389_531_389_251_535_5e38),
        "float32" | "float" => Some(f64::from(f32::MAX)),
        "float8_e4m3fn" => Some(448.0),
        "float8_e4m3fnuz" => Some(240.0),
        "float8_e5m2" | "float8_e5m2fnuz" => Some(57344.0),
        _ => None,
    }
}

/// The rows of `pos_checksum`'s matrix view of `shape` (docs/manifest.md): the product of all
/// dimensions but the last (saturating at `u64::MAX`: a damaged manifest may hold any sizes);
/// 1 for a 0-d tensor.
pub fn checksum_rows(shape: &[u64]) -> u64 {
    match shape.split_last() {
        Some((_, leading)) => leading.iter().fold(1u64, |n, &d| n.saturating_mul(d)),
        None => 1,
    }
}

/// Why a statistic of a pair was not compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExclusionKind {
    /// Recorded on one side only: it says nothing about the values.
    OneSide,
    /// A sum that is non-finite although every element is finite and inside its dtype's range:
    /// the dump tool's own accumulation overflowed.
    Overflow,
    /// A statistic of a partial sum merged over a parallel group (`partial:tp`): only the sum
    /// (so the mean) and the position checksum merge exactly; `min`, `max`, `max_abs` and `l2`
    /// of the reduced tensor do not follow from the partial sums' (docs/diff.md).
    Partial,
}

/// A statistic left out of a pair's verdict, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Exclusion {
    /// Why.
    pub kind: ExclusionKind,
    /// The side the reason applies to: `"a"`, `"b"` or `"both"`.
    pub side: &'static str,
    /// For people, e.g. `l2 overflowed in the dump's float16 accumulation on side A (inf while
    /// every element is finite, max_abs 2.516e2)`.
    pub text: String,
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
    /// `atol + rtol · scale`; for `pos_checksum` under the noise bound, `atol + bound · scale`
    /// ([`ChecksumBound::bound`]).
    pub bound: Option<f64>,
    /// True when `|a − b| > bound`, or one side is undefined or non-finite and the two are not
    /// equal (equal values, equal infinities included, never exceed); false when excluded.
    pub exceeds: bool,
    /// Why this statistic is not part of the verdict; absent when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excluded: Option<Exclusion>,
}

/// The bound a pair's position checksum was held to, term by term (docs/diff.md, "The
/// checksum's noise bound"); all but `rows` relative to the checksum's scale.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ChecksumBound {
    /// The checksum's `rtol`.
    pub rtol: f64,
    /// `k · u`, `u` the unit roundoff of the coarser dtype.
    pub roundoff: f64,
    /// `c · e`, `e` the per-element change the magnitude statistics show.
    pub evidence: f64,
    /// `max(rtol, roundoff, evidence)`.
    pub bound: f64,
    /// `rows` of the checksum's matrix view ([`checksum_rows`]).
    pub rows: u64,
    /// `s / sqrt(rows)`: about what one moved row shifts.
    pub moved_row: f64,
    /// Whether the checksum moved by more than `atol + rtol · scale`.
    pub beyond_rtol: bool,
}

/// How a paired record compares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Verdict {
    /// Every compared statistic within tolerance.
    Agree,
    /// Shape, or the kind of dtype (floating / integer / bool), differs.
    Structural {
        /// What differs, e.g. `shape [2, 3] vs [3, 2]` or `dtype float32 vs int64`.
        reason: String,
    },
    /// NaN or infinity counts differ: always a divergence.
    NonFinite,
    /// Magnitude statistics differ beyond tolerance.
    Magnitude,
    /// Magnitudes agree but the position checksum moved beyond its noise bound: values were
    /// moved (a permutation).
    ValuesMoved,
    /// Magnitudes agree; the position checksum moved beyond its `rtol` but within its rounding
    /// bound, and that bound is above what one moved row shifts: rounding noise and a moved row
    /// cannot be told apart. Not a divergence, not agreement.
    ChecksumInconclusive,
    /// Nothing was compared: statistics on neither side or on one side only (a float8 view, a
    /// dtype the dump tool cannot reduce, a string argument), or no statistic recorded on both.
    /// Missing evidence, never a divergence. (Records without elements, an empty tensor or a
    /// `None` argument, agree when their shapes and dtype kinds do.)
    NotCompared {
        /// Why, e.g. `no statistics on either side` or `statistics on side A only`.
        reason: String,
    },
}

impl Verdict {
    /// The verdict's name as the JSON `kind` spells it (`agree`, `magnitude`, `non_finite`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Agree => "agree",
            Verdict::Structural { .. } => "structural",
            Verdict::NonFinite => "non_finite",
            Verdict::Magnitude => "magnitude",
            Verdict::ValuesMoved => "values_moved",
            Verdict::ChecksumInconclusive => "checksum_inconclusive",
            Verdict::NotCompared { .. } => "not_compared",
        }
    }

    /// True for the verdicts a first divergence is made of: structural, non-finite, magnitude
    /// and values moved (not agree, checksum inconclusive or not compared).
    pub fn diverges(&self) -> bool {
        !matches!(
            self,
            Verdict::Agree | Verdict::ChecksumInconclusive | Verdict::NotCompared { .. }
        )
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
    /// The position checksum's noise bound, when the checksum was compared under one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checksum_bound: Option<ChecksumBound>,
    /// What the records' token rows showed, where both have them in forwards paired whole
    /// ([`crate::model::analysis::tokens::sharpen`], which decides with them): they may have decided the verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<crate::model::analysis::row_evidence::RowEvidence>,
}

/// dtype family (`bool`, `floating`, `complex` or `integer`): values of different families
/// are not comparable as numbers.
pub fn dtype_kind(dtype: &str) -> &'static str {
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
    // Every statistic named: a new one fails to compile here until it is compared.
    match Stat::VALUES.get(index)? {
        Stat::MaxAbs => stats.max_abs,
        Stat::Min => stats.min,
        Stat::Max => stats.max,
        Stat::Mean => stats.mean,
        Stat::L2 => stats.l2,
        Stat::PosChecksum => stats.pos_checksum,
        Stat::NanCount | Stat::InfCount | Stat::FiniteCount => None,
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

/// Compares one statistic of two stats objects, plainly: no exclusion, no noise bound.
pub fn compare_stat(name: &'static str, a: &Stats, b: &Stats, tolerance: Tolerance) -> StatDiff {
    match STATS.iter().position(|&s| s == name) {
        Some(index) => compare_stat_at(index, a, b, tolerance),
        None => compare_values(name, None, None, None, tolerance),
    }
}

/// The scale `STATS[index]` is compared against (the module table).
fn scale_at(index: usize, a: &Stats, b: &Stats) -> Option<f64> {
    let (va, vb) = (stat_at(a, index), stat_at(b, index));
    match index {
        MEAN => larger(rms(a), rms(b)),
        POS_CHECKSUM => larger(larger(a.l2, b.l2), larger(va, vb)),
        _ => larger(va, vb),
    }
}

/// [`compare_stat`] of `STATS[index]`.
fn compare_stat_at(index: usize, a: &Stats, b: &Stats, tolerance: Tolerance) -> StatDiff {
    compare_values(
        STATS[index],
        stat_at(a, index),
        stat_at(b, index),
        scale_at(index, a, b),
        tolerance,
    )
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
        excluded: None,
    }
}

/// `e` of the checksum's noise bound: the per-element change the magnitude statistics show,
/// relative to the checksum's `scale`, as three estimates of what moves the checksum by about
/// `e · scale / 3` (docs/diff.md, "The checksum's noise bound"): the change of the sum
/// `n · mean` and of `sqrt(n) · l2` (projections of every element with weights of
/// root-mean-square 1; the checksum is one with weights of root-mean-square 1/3), and `l2`
/// times the largest relative change of `min` or `max` (a relative rounding of every element).
/// 0 without a common `finite_count` or a positive finite scale.
pub fn noise_evidence(a: &Stats, b: &Stats, scale: f64) -> f64 {
    let Some(n) = a
        .finite_count
        .filter(|&n| n > 0 && Some(n) == b.finite_count)
    else {
        return 0.0;
    };
    if !(scale > 0.0 && scale.is_finite()) {
        return 0.0;
    }
    let finite = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) if x.is_finite() && y.is_finite() => Some((x, y)),
        _ => None,
    };
    let change = |x, y| finite(x, y).map_or(0.0, |(x, y): (f64, f64)| (x - y).abs());
    let relative = |x, y| {
        finite(x, y)
            .filter(|(x, y)| x.abs().max(y.abs()) > 0.0)
            .map_or(0.0, |(x, y)| (x - y).abs() / x.abs().max(y.abs()))
    };
    let l2 = [a.l2, b.l2]
        .into_iter()
        .flatten()
        .filter(|v| v.is_finite())
        .reduce(f64::max);
    let spread = l2.map_or(0.0, |l2| {
        l2 * relative(a.min, b.min).max(relative(a.max, b.max))
    });
    let n = n as f64;
    (n * change(a.mean, b.mean))
        .max(n.sqrt() * change(a.l2, b.l2))
        .max(spread)
        / scale
}

/// Holds the position checksum `d` (compared at its `rtol`) to the noise bound instead.
fn checksum_under_noise(
    d: &mut StatDiff,
    records: (&Record, &Record),
    stats: (&Stats, &Stats),
    tolerance: Tolerance,
    noise: ChecksumNoise,
) -> Option<ChecksumBound> {
    let (Some(va), Some(vb)) = (d.a, d.b) else {
        return None;
    };
    let scale = scale_at(POS_CHECKSUM, stats.0, stats.1)?;
    if !(va.is_finite() && vb.is_finite() && scale.is_finite()) {
        return None;
    }
    let u = unit_roundoff(&records.0.dtype).max(unit_roundoff(&records.1.dtype));
    let roundoff = noise.roundoff_factor * u;
    let evidence = noise.evidence_factor * noise_evidence(stats.0, stats.1, scale);
    let bound = tolerance.rtol.max(roundoff).max(evidence);
    let rows = checksum_rows(&records.0.shape).max(1);
    let checksum = ChecksumBound {
        rtol: tolerance.rtol,
        roundoff,
        evidence,
        bound,
        rows,
        moved_row: noise.moved_row_shift / (rows as f64).sqrt(),
        beyond_rtol: d.exceeds,
    };
    let limit = tolerance.atol + bound * scale;
    d.bound = Some(limit);
    d.exceeds = (va - vb).abs() > limit;
    Some(checksum)
}

/// The text of an overflowed statistic on one side, when it is one: a sum (`mean`, `l2`,
/// `pos_checksum`) that is non-finite while the side's `max_abs` is finite and inside the
/// record's dtype range.
fn overflow(index: usize, record: &Record, stats: &Stats, side: char) -> Option<String> {
    let value = stat_at(stats, index)?;
    let top = stats.max_abs?;
    let inside = top.is_finite() && dtype_max(&record.dtype).is_none_or(|max| top <= max);
    if index < MEAN || value.is_finite() || !inside {
        return None;
    }
    let arithmetic = if stats.reduced_in_dtype {
        format!("the dump's {} accumulation", record.dtype)
    } else {
        "the dump tool's own accumulation".to_string()
    };
    Some(format!(
        "{} overflowed in {arithmetic} on side {} ({value} while every element is finite, max_abs {top:.4e})",
        STATS[index],
        side.to_ascii_uppercase()
    ))
}

/// Why `STATS[index]` of a pair is not compared, if it is not.
fn exclusion(
    index: usize,
    records: (&Record, &Record),
    stats: (&Stats, &Stats),
) -> Option<Exclusion> {
    let (va, vb) = (stat_at(stats.0, index), stat_at(stats.1, index));
    let partial = |r: &Record| {
        r.merged_from.is_some()
            && matches!(r.shard, Some(crate::model::dump::Shard::Partial { .. }))
    };
    if STATS[index] != "mean"
        && STATS[index] != "pos_checksum"
        && (partial(records.0) || partial(records.1))
    {
        let (side, record) = if partial(records.0) {
            ("a", records.0)
        } else {
            ("b", records.1)
        };
        let axis = record.shard.as_ref().map_or("tp", |s| s.axis());
        return Some(Exclusion {
            kind: ExclusionKind::Partial,
            side,
            text: format!(
                "{} of a partial sum merged over {axis} on side {} does not follow from its pieces: \
                 compared on mean and pos_checksum only",
                STATS[index],
                side.to_ascii_uppercase()
            ),
        });
    }
    if va.is_some() != vb.is_some() {
        let side = if va.is_some() { "a" } else { "b" };
        return Some(Exclusion {
            kind: ExclusionKind::OneSide,
            side,
            text: format!(
                "{} recorded on side {} only",
                STATS[index],
                side.to_ascii_uppercase()
            ),
        });
    }
    let over_a = overflow(index, records.0, stats.0, 'a');
    let over_b = overflow(index, records.1, stats.1, 'b');
    let side = match (&over_a, &over_b) {
        (Some(_), Some(_)) => "both",
        (Some(_), None) => "a",
        (None, Some(_)) => "b",
        (None, None) => return None,
    };
    Some(Exclusion {
        kind: ExclusionKind::Overflow,
        side,
        text: [over_a, over_b]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; "),
    })
}

/// True for a record with no elements: an empty tensor, a `None` argument, a `torch.Size`
/// (whose value is its shape): nothing beyond its shape and dtype to differ.
fn is_empty(record: &Record) -> bool {
    record.numel == 0
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
        let verdict = match (structural, &a.stats, &b.stats) {
            (Some(reason), _, _) => Verdict::Structural { reason },
            // Equal shapes and no element on either side: nothing else to differ.
            (None, _, _) if is_empty(a) && is_empty(b) => Verdict::Agree,
            (None, None, None) => Verdict::NotCompared {
                reason: "no statistics on either side".to_string(),
            },
            (None, Some(_), _) | (None, _, Some(_)) => Verdict::NotCompared {
                reason: format!(
                    "statistics on side {} only",
                    if a.stats.is_some() { "A" } else { "B" }
                ),
            },
        };
        return Comparison {
            verdict,
            stats: Vec::new(),
            precision_change,
            checksum_bound: None,
            rows: None,
        };
    };
    let mut checksum_bound = None;
    let stats: Vec<StatDiff> = (0..STATS.len())
        .map(|i| {
            let tolerance = tolerances.per_stat[i];
            let mut d = compare_stat_at(i, sa, sb, tolerance);
            if let Some(excluded) = exclusion(i, (a, b), (sa, sb)) {
                d.exceeds = false;
                d.excluded = Some(excluded);
            } else if let (POS_CHECKSUM, Some(noise)) = (i, tolerances.checksum_noise) {
                checksum_bound = checksum_under_noise(&mut d, (a, b), (sa, sb), tolerance, noise);
            }
            d
        })
        .collect();
    let magnitude_differs = stats[..POS_CHECKSUM].iter().any(|d| d.exceeds);
    let compared = stats
        .iter()
        .any(|d| d.excluded.is_none() && (d.a.is_some() || d.b.is_some()));
    let verdict = if let Some(reason) = structural {
        Verdict::Structural { reason }
    } else if sa.nan_count != sb.nan_count || sa.inf_count != sb.inf_count {
        Verdict::NonFinite
    } else if magnitude_differs {
        Verdict::Magnitude
    } else if stats[POS_CHECKSUM].exceeds {
        Verdict::ValuesMoved
    } else if checksum_bound.is_some_and(|c| c.beyond_rtol && c.bound > c.moved_row) {
        Verdict::ChecksumInconclusive
    } else if !(compared || is_empty(a) && is_empty(b)) {
        Verdict::NotCompared {
            reason: "no statistic recorded on both sides".to_string(),
        }
    } else {
        Verdict::Agree
    };
    Comparison {
        verdict,
        stats,
        precision_change,
        checksum_bound,
        rows: None,
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
            reduced_in_dtype: false,
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
        assert_eq!(
            (STATS[MEAN], STATS[L2], STATS[POS_CHECKSUM]),
            ("mean", "l2", "pos_checksum")
        );
        let a = stats(-3.0, 3.0, 0.1, 10.0, 1.0, 100);
        let b = stats(-2.0, 3.5, 0.3, 12.0, 1.7, 100);
        let tolerances = Tolerances::default();
        for (i, &name) in STATS.iter().enumerate() {
            assert_eq!(tolerances.per_stat[i], tolerances.of(name));
            assert_eq!(
                compare_stat(name, &a, &b, tolerances.of(name)),
                compare_stat_at(i, &a, &b, tolerances.per_stat[i])
            );
        }
    }

    #[test]
    fn checksum_alone_differing_is_values_moved() {
        let a = stats(-3.0, 3.0, 0.1, 10.0, 1.0, 100);
        let b = stats(-3.0, 3.0, 0.1, 10.0, 2.0, 100); // 10% of l2: far beyond any noise bound
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

    /// A [128 tokens, 8 heads, 64] tensor: 1024 checksum rows, one moved row shifts ~1.6e-3.
    fn kv(dtype: &str, checksum: f64) -> Record {
        let mut r = record_with(stats(-4.0, 4.0, 0.01, 100.0, checksum, 65536));
        r.dtype = dtype.into();
        r.shape = vec![128, 8, 64].into();
        r
    }

    #[test]
    fn the_checksum_bound_follows_the_dtype_and_the_row_count() {
        let tolerances = Tolerances::default();
        // Moved 0.3% of l2 with identical magnitudes.
        let (a, b) = (kv("bfloat16", 10.0), kv("bfloat16", 10.3));
        let c = compare_records(&a, &b, &tolerances);
        // bfloat16: bound 2 · 2^-8 = 7.8e-3, above one moved row of 1024 (0.05 / 32).
        assert_eq!(c.verdict, Verdict::ChecksumInconclusive);
        let bound = c.checksum_bound.unwrap();
        assert_eq!(
            (bound.bound, bound.rows, bound.moved_row, bound.beyond_rtol),
            (2f64.powi(-7), 1024, 0.05 / 32.0, true)
        );
        assert_eq!(
            c.stats[POS_CHECKSUM].bound,
            Some(1e-6 + 2f64.powi(-7) * 100.0)
        );
        // float32 and float16 (2 · 2^-11 < 1e-3): the same move is beyond the bound.
        for dtype in ["float32", "float16"] {
            let c = compare_records(&kv(dtype, 10.0), &kv(dtype, 10.3), &tolerances);
            assert_eq!(c.verdict, Verdict::ValuesMoved, "{dtype}");
            assert_eq!(c.checksum_bound.unwrap().bound, CHECKSUM_RTOL, "{dtype}");
        }
        // A precision change takes the coarser dtype's roundoff.
        let c = compare_records(&kv("float32", 10.0), &kv("bfloat16", 10.3), &tolerances);
        assert_eq!(c.verdict, Verdict::ChecksumInconclusive);
        // Beyond the bfloat16 bound: moved.
        let c = compare_records(&kv("bfloat16", 10.0), &kv("bfloat16", 11.0), &tolerances);
        assert_eq!(c.verdict, Verdict::ValuesMoved);
        // Within rtol: agree, whatever the bound.
        let c = compare_records(&kv("bfloat16", 10.0), &kv("bfloat16", 10.05), &tolerances);
        assert_eq!(c.verdict, Verdict::Agree);
        // Four rows: one moved row shifts ~0.025, above the bound: a move would have shown.
        let (mut a, mut b) = (kv("bfloat16", 10.0), kv("bfloat16", 10.3));
        a.shape = vec![4, 16384].into();
        b.shape = a.shape.clone();
        assert_eq!(compare_records(&a, &b, &tolerances).verdict, Verdict::Agree);
        // Explicit tolerances hold the checksum to its rtol alone.
        let mut plain = Tolerances::default();
        plain.set("pos_checksum", plain.of("pos_checksum")).unwrap();
        let c = compare_records(&kv("bfloat16", 10.0), &kv("bfloat16", 10.3), &plain);
        assert_eq!((c.verdict, c.checksum_bound), (Verdict::ValuesMoved, None));
    }

    #[test]
    fn magnitudes_that_moved_widen_the_checksum_bound() {
        // float32, the mean moved by 1e-5 of 65536 elements: the sum by 0.655, e = 6.55e-3 of l2.
        let a = kv("float32", 10.0);
        let mut b = kv("float32", 10.3);
        b.stats.as_mut().unwrap().mean = Some(0.01 + 1e-5);
        let c = compare_records(&a, &b, &Tolerances::default());
        let bound = c.checksum_bound.unwrap();
        let e = 65536.0 * ((0.01f64 + 1e-5) - 0.01).abs() / 100.0;
        assert!((bound.evidence - 4.0 * e).abs() < 1e-15, "{bound:?}");
        assert_eq!(bound.bound, bound.evidence);
        assert_eq!(c.verdict, Verdict::ChecksumInconclusive);
        // l2 counts with sqrt(n): moved by 1e-3 → e = 256 · 1e-3 / 100.
        let mut b = kv("float32", 10.3);
        b.stats.as_mut().unwrap().l2 = Some(100.001);
        let bound = compare_records(&a, &b, &Tolerances::default())
            .checksum_bound
            .unwrap();
        assert!(
            (bound.evidence - 4.0 * 256.0 * 1e-3 / 100.001).abs() < 1e-9,
            "{bound:?}"
        );
        // min and max by their relative change, times l2: max 4 → 4.01 is 2.5e-3 of it.
        let mut b = kv("float32", 10.3);
        b.stats.as_mut().unwrap().max = Some(4.01);
        let bound = compare_records(&a, &b, &Tolerances::default())
            .checksum_bound
            .unwrap();
        assert!(
            (bound.evidence - 4.0 * 0.01 / 4.01).abs() < 1e-12,
            "{bound:?}"
        );
    }

    #[test]
    fn the_dump_tools_own_overflow_is_not_compared() {
        // msprobe: a float16 weight whose Norm overflowed float16 while Max/Min are finite.
        let mut a = record_with(stats(-300.0, 250.0, 0.5, 1.0, 0.0, 65536));
        a.dtype = "float16".into();
        {
            let s = a.stats.as_mut().unwrap();
            s.l2 = Some(f64::INFINITY);
            s.pos_checksum = None;
            s.reduced_in_dtype = true;
        }
        let mut b = record_with(stats(-300.0, 250.0, 0.5, 70000.0, 0.0, 65536));
        b.stats.as_mut().unwrap().pos_checksum = None;
        let c = compare_records(&a, &b, &Tolerances::default());
        assert_eq!(c.verdict, Verdict::Agree);
        let l2 = &c.stats[L2];
        let excluded = l2.excluded.as_ref().unwrap();
        assert_eq!(
            (excluded.kind, excluded.side),
            (ExclusionKind::Overflow, "a")
        );
        assert!(
            excluded
                .text
                .starts_with("l2 overflowed in the dump's float16 accumulation on side A (inf"),
            "{}",
            excluded.text
        );
        assert!(!l2.exceeds);
        // max_abs itself non-finite: the data overflowed, not the tool; compared as before.
        a.stats.as_mut().unwrap().max_abs = Some(f64::INFINITY);
        assert!(compare_records(&a, &b, &Tolerances::default()).stats[L2].exceeds);
    }

    #[test]
    fn a_statistic_on_one_side_only_is_not_compared() {
        let a = record_with(stats(-3.0, 3.0, 0.1, 10.0, 1.0, 100));
        let mut b = a.clone();
        b.stats.as_mut().unwrap().mean = None;
        let c = compare_records(&a, &b, &Tolerances::default());
        assert_eq!(c.verdict, Verdict::Agree);
        let excluded = c.stats[MEAN].excluded.as_ref().unwrap();
        assert_eq!(
            (excluded.kind, excluded.side, excluded.text.as_str()),
            (ExclusionKind::OneSide, "a", "mean recorded on side A only")
        );
    }

    #[test]
    fn pairs_without_statistics_are_not_compared() {
        let with = record_with(stats(-3.0, 3.0, 0.1, 10.0, 1.0, 100));
        let mut without = with.clone();
        without.stats = None;
        let verdict =
            |a: &Record, b: &Record| compare_records(a, b, &Tolerances::default()).verdict;
        assert_eq!(
            verdict(&without, &without),
            Verdict::NotCompared {
                reason: "no statistics on either side".to_string()
            }
        );
        assert_eq!(
            verdict(&with, &without),
            Verdict::NotCompared {
                reason: "statistics on side A only".to_string()
            }
        );
        assert!(!verdict(&with, &without).diverges());
        // An empty tensor (or a None argument) of one shape on both sides: nothing to differ.
        let mut empty = without.clone();
        (empty.shape, empty.numel) = (vec![0, 4].into(), 0);
        assert_eq!(verdict(&empty, &empty), Verdict::Agree);
        // Statistics objects whose every value is null.
        let mut nulls = with.clone();
        let s = nulls.stats.as_mut().unwrap();
        (s.max_abs, s.min, s.max, s.mean, s.l2, s.pos_checksum) =
            (None, None, None, None, None, None);
        assert_eq!(
            verdict(&nulls, &nulls),
            Verdict::NotCompared {
                reason: "no statistic recorded on both sides".to_string()
            }
        );
        // A shape change is structural whatever the statistics.
        let mut other = without.clone();
        other.shape = vec![4, 2].into();
        assert!(matches!(
            verdict(&without, &other),
            Verdict::Structural { .. }
        ));
    }

    #[test]
    fn unit_roundoff_and_rows() {
        assert_eq!(unit_roundoff("bfloat16"), 1.0 / 256.0);
        assert_eq!(unit_roundoff("float16"), 1.0 / 2048.0);
        assert_eq!(unit_roundoff("float32"), 2f64.powi(-24));
        assert_eq!(unit_roundoff("float8_e4m3fn"), 1.0 / 16.0);
        assert_eq!(unit_roundoff("int64"), 0.0);
        assert_eq!(checksum_rows(&[128, 8, 64]), 1024);
        assert_eq!(checksum_rows(&[512]), 1);
        assert_eq!(checksum_rows(&[]), 1);
        assert_eq!(checksum_rows(&[u64::MAX, 3, 8]), u64::MAX);
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
            ..Record::default()
        }
    }
}
