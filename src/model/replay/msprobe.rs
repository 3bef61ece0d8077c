//! msprobe's single-device accuracy rule, as mindstudio-probe 26.2.0 applies it to one output
//! tensor (the wheel's `msprobe/pytorch/api_accuracy_checker/compare/`, the repository's
//! `python/msprobe/pytorch/api_accuracy_checker/compare/`).
//!
//! The verdict follows `Comparator._compare_torch_tensor` and `_compare_float_tensor`
//! (`compare.py`), with the figures of `algorithm.py` (`cosine_sim`, `get_abs_err`,
//! `get_max_abs_err`, `get_rel_err_origin`, `get_rel_err_ratio`, `get_abs_bench_with_eps`,
//! `compare_bool_tensor`), in this order:
//!
//! 1. dtypes must be comparable (`compare_utils.check_dtype_comparable`: float with float,
//!    bool/uint8 with bool/uint8, int8/int32/int64 with those; int16 is in neither list, so
//!    an int16 output is an error there, and here);
//! 2. an empty output is skipped (counted as a pass by `_compare_core_wrapper`);
//! 3. integer and bool outputs must be equal element by element;
//! 4. cosine similarity of both outputs, each divided by its max |value|, must exceed 0.99,
//!    else error (one element, or both all zero: no cosine, not an error; one side all zero:
//!    error; a NaN cosine — any NaN or infinity in either output makes one — passes);
//! 5. `max |c - r| < 0.001`: pass;
//! 6. float16/bfloat16: error unless more than 99% of the elements have a relative error
//!    `|c - r| / (|r| + eps)` below 0.01; pass when more than 99.9% are below 0.001, else
//!    warning. float32/float64: error unless more than 99.9% are below 0.001; warning unless
//!    more than 99.99% are below 0.0001; else pass.
//!
//! `eps` is `2^-8` for a bfloat16 output (`CompareConst.BFLOAT16_EPS`), else numpy's
//! `finfo(bench.dtype).eps` of the *reference's* array (float32's 2^-23 for a float16
//! output judged against a float32 reference): not the output dtype's.
//!
//! numpy evaluates all of this in the promoted dtype of the two arrays (float32 for a
//! float16 or bfloat16 output against a float32 reference, float64 against float64), and
//! compares with a Python float threshold in the array's dtype (numpy 2, NEP 50: `0.001`
//! becomes float32's `0.0010000000475`). This module rounds every intermediate to that
//! dtype, so each element is judged as msprobe judges it; sums (the cosine's dot products,
//! the means) are taken in float64.
//!
//! The small-value split and the relative-error figures over normal values come from the
//! benchmark standard (`precision_standard/benchmark_compare.py`, `BenchmarkCompare`, with
//! `standard_config.py` `StandardConfig`: small values `|r| <= 2^-10` for float16/bfloat16,
//! `2^-20` otherwise; their error when `|c - r| > 1e-16` (float16/bfloat16) or `2^-30`), and
//! the ULP error from `algorithm.get_ulp_err` (`compare_utils.ULP_PARAMETERS`: mantissa bits
//! 10, 7, 23 and minimum exponents -14, -126, -126 for float16, bfloat16, float32). They are
//! reported, not judged: msprobe's single-device status does not use them.

use half::f16;
use serde::Serialize;

use super::standard::ReplayVerdict;
use crate::model::tensor::DType;

/// The cosine similarity must exceed this (`cosine_sim`: `cos > 0.99`).
pub const COSINE_THRESHOLD: f64 = 0.99;
/// `get_max_abs_err`: a maximum absolute error below this passes at once.
pub const MAX_ABS_ERR_THRESHOLD: f64 = 0.001;
/// `CompareConst.HUNDRED_RATIO_THRESHOLD`.
pub const HUNDREDTH: f64 = 0.01;
/// `CompareConst.THOUSAND_RATIO_THRESHOLD`.
pub const THOUSANDTH: f64 = 0.001;
/// `CompareConst.TEN_THOUSAND_RATIO_THRESHOLD`.
pub const TEN_THOUSANDTH: f64 = 0.0001;
/// `CompareConst.BFLOAT16_EPS`: 2^-8.
pub const BFLOAT16_EPS: f64 = 0.00390625;
/// `np.finfo(float).eps`, below which `cosine_sim` calls a side all zero.
const FLOAT_EPS: f64 = f64::EPSILON;

/// One side of a comparison: its dtype as saved and its values in flat C order.
#[derive(Debug, Clone, Copy)]
pub struct Values<'a> {
    /// The dtype the values were saved in.
    pub dtype: DType,
    /// Every element, decoded exactly to `f64`.
    pub values: &'a [f64],
}

/// The share of elements whose relative error lies below a threshold
/// (`get_rel_err_ratio`), and whether that share exceeds `1 - threshold`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RelErrShare {
    /// The threshold `t`.
    pub threshold: f64,
    /// Elements with `|c - r| / (|r| + eps) < t`, over all elements (NaN counts as not below).
    pub share: f64,
    /// `share > 1 - t`.
    pub passed: bool,
}

/// The benchmark standard's split of the elements by the reference's magnitude.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SmallValues {
    /// `|r| <= threshold` (both values finite) makes an element small.
    pub threshold: f64,
    /// A small element is in error when `|c - r|` exceeds this.
    pub atol: f64,
    /// Small elements.
    pub count: u64,
    /// Small elements in error.
    pub errors: u64,
    /// `errors / count` (0 without small elements): `small_value_err_ratio`.
    pub error_ratio: f64,
    /// Largest relative error over the other finite elements (`get_max_rel_err`, 0 if none).
    pub normal_max_rel_err: f64,
    /// Mean relative error over them (`get_mean_rel_err`).
    pub normal_mean_rel_err: f64,
    /// `get_rmse`: the root mean square of `|c - r|` with small and non-finite elements
    /// counted as 0 and the mean rescaled to the others.
    pub rmse: f64,
}

/// msprobe's ULP error: `|c - r| * 2^(mantissa_bits - e)`, `e = max(floor(log2|r|), min_e)`
/// (`e = 0` where `r == 0`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct UlpError {
    /// Mantissa bits of the output dtype: 10 (float16), 7 (bfloat16), 23 (float32).
    pub mantissa_bits: u32,
    /// Largest ULP error (NaN when any element's is).
    #[serde(serialize_with = "float")]
    pub max: f64,
    /// Mean ULP error (NaN when any element's is).
    #[serde(serialize_with = "float")]
    pub mean: f64,
    /// ULP errors above 32 (float32) or 1 (float16, bfloat16), over all elements
    /// (`UlpCompare._stat_ulp_error_proportion`).
    pub share_above: f64,
    /// That bound: 32 or 1.
    pub bound: f64,
}

/// Every figure msprobe's rule looked at for one output, and the ones it reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// The candidate's dtype, which selects the thresholds.
    pub output_dtype: DType,
    /// The reference's dtype (the benchmark).
    pub reference_dtype: DType,
    /// The dtype numpy computes the errors in (the two arrays' promoted dtype).
    pub computed_in: DType,
    /// The `eps` of the relative error.
    pub eps: f64,
    /// The cosine similarity of the max-scaled outputs, clipped to [-1, 1]; `None` when
    /// msprobe computes none (one element, an all-zero side) or the output is not float.
    #[serde(serialize_with = "optional_float")]
    pub cosine: Option<f64>,
    /// `max |c - r|` in `computed_in` (NaN when any difference is); `None` when not reached.
    #[serde(serialize_with = "optional_float")]
    pub max_abs_err: Option<f64>,
    /// Relative errors below 0.01 (float16/bfloat16 only), when reached.
    pub rel_err_hundredth: Option<RelErrShare>,
    /// Relative errors below 0.001, when reached.
    pub rel_err_thousandth: Option<RelErrShare>,
    /// Relative errors below 0.0001 (float32/float64 only), when reached.
    pub rel_err_ten_thousandth: Option<RelErrShare>,
    /// Elements that differ (integer and bool outputs: the rule is equality).
    pub unequal: Option<u64>,
    /// The small-value split (float outputs).
    pub small_values: Option<SmallValues>,
    /// The ULP error (float16, bfloat16, float32 outputs; msprobe has no ULP parameters for
    /// float64).
    pub ulp: Option<UlpError>,
    /// The element-wise relative-error threshold the verdict's pass rests on (0.001 for
    /// float16/bfloat16, 0.0001 otherwise): [`super::judge`] marks the elements beyond it as
    /// the metrics' mismatches.
    pub pass_threshold: f64,
}

/// What the rule decided for one output.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// pass, warning or error (unsupported for an output dtype msprobe cannot read).
    pub verdict: ReplayVerdict,
    /// The step that decided it, as msprobe's message says it.
    pub reason: String,
    /// The figures.
    pub figures: Figures,
    /// msprobe behaviours that decided or shaped this verdict and differ from what one might
    /// expect (a NaN cosine passing, …).
    pub quirks: Vec<String>,
}

/// The arithmetic of one numpy dtype: every result rounded to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Arith {
    F16,
    F32,
    F64,
}

impl Arith {
    /// numpy's array dtype for a saved dtype; bfloat16 arrives as float32 (msprobe converts
    /// both sides with `.to(torch.float32)` before `.numpy()` when the output is bfloat16).
    fn of(dtype: DType) -> Arith {
        match dtype {
            DType::Float16 => Arith::F16,
            DType::Float64 => Arith::F64,
            _ => Arith::F32,
        }
    }

    fn dtype(self) -> DType {
        match self {
            Arith::F16 => DType::Float16,
            Arith::F32 => DType::Float32,
            Arith::F64 => DType::Float64,
        }
    }

    /// `x` rounded to this dtype. One IEEE operation on values of this dtype computed in
    /// float64 and rounded once gives that operation's result in this dtype (53 >= 2p + 2).
    fn q(self, x: f64) -> f64 {
        match self {
            Arith::F16 => f16::from_f64(x).to_f64(),
            Arith::F32 => f64::from(x as f32),
            Arith::F64 => x,
        }
    }

    /// `np.finfo(dtype).eps`.
    fn eps(self) -> f64 {
        match self {
            Arith::F16 => 2f64.powi(-10),
            Arith::F32 => 2f64.powi(-23),
            Arith::F64 => f64::EPSILON,
        }
    }
}

enum Class {
    Float,
    Bool,
    Int,
    Other,
}

/// `check_dtype_comparable`'s classes (`Const.FLOAT_TYPE`, `BOOL_TYPE`, `INT_TYPE`).
fn class(dtype: DType) -> Class {
    match dtype {
        DType::Float16 | DType::BFloat16 | DType::Float32 | DType::Float64 => Class::Float,
        DType::Bool | DType::Uint8 => Class::Bool,
        DType::Int8 | DType::Int32 | DType::Int64 => Class::Int,
        _ => Class::Other,
    }
}

/// Judges `candidate` against `reference` (the benchmark) by msprobe's rule; both hold the
/// same number of elements (the caller checked the shapes).
pub fn judge(candidate: Values, reference: Values) -> Judged {
    let (c, r) = (candidate.values, reference.values);
    debug_assert_eq!(c.len(), r.len());
    let is_bf16 = candidate.dtype == DType::BFloat16;
    // bfloat16 outputs: both sides go to float32 before numpy sees them.
    let device = if is_bf16 {
        Arith::F32
    } else {
        Arith::of(candidate.dtype)
    };
    let bench = if is_bf16 {
        Arith::F32
    } else {
        Arith::of(reference.dtype)
    };
    let arith = device.max(bench);
    let eps = if is_bf16 { BFLOAT16_EPS } else { bench.eps() };
    let pass_threshold = match candidate.dtype {
        DType::Float16 | DType::BFloat16 => THOUSANDTH,
        _ => TEN_THOUSANDTH,
    };
    let mut figures = Figures {
        output_dtype: candidate.dtype,
        reference_dtype: reference.dtype,
        computed_in: arith.dtype(),
        eps,
        cosine: None,
        max_abs_err: None,
        rel_err_hundredth: None,
        rel_err_thousandth: None,
        rel_err_ten_thousandth: None,
        unequal: None,
        small_values: None,
        ulp: None,
        pass_threshold,
    };
    let mut quirks = Vec::new();
    let done = |verdict, reason: &str, figures, quirks| Judged {
        verdict,
        reason: reason.to_string(),
        figures,
        quirks,
    };
    let comparable = matches!(
        (class(reference.dtype), class(candidate.dtype)),
        (Class::Float, Class::Float) | (Class::Bool, Class::Bool) | (Class::Int, Class::Int)
    );
    if matches!(candidate.dtype, DType::Float8E4M3Fn | DType::Float8E5M2) {
        return done(
            ReplayVerdict::Unsupported,
            "float8 outputs: msprobe's single-device rule reads outputs through numpy, which has no float8 dtype",
            figures,
            quirks,
        );
    }
    if !comparable {
        if matches!(candidate.dtype, DType::Int16) || matches!(reference.dtype, DType::Int16) {
            quirks.push(
                "int16 is in none of msprobe's dtype lists (Const.INT_TYPE holds int8, int32, int64), so check_dtype_comparable refuses it"
                    .into(),
            );
        }
        return done(
            ReplayVerdict::Error,
            &format!(
                "Bench out dtype is {} but npu output dtype is {}, cannot compare",
                reference.dtype, candidate.dtype
            ),
            figures,
            quirks,
        );
    }
    if c.is_empty() {
        quirks.push(
            "an empty output is skipped by msprobe (SKIP), which its summary counts as a pass"
                .into(),
        );
        return done(
            ReplayVerdict::Pass,
            "There is not bench calculation result (no elements)",
            figures,
            quirks,
        );
    }
    if !matches!(class(reference.dtype), Class::Float) {
        let unequal = c.iter().zip(r).filter(|(a, b)| a != b).count() as u64;
        figures.unequal = Some(unequal);
        let verdict = if unequal == 0 {
            ReplayVerdict::Pass
        } else {
            ReplayVerdict::Error
        };
        return done(
            verdict,
            &format!(
                "{} data: only binary comparison ({unequal} of {} elements differ)",
                reference.dtype,
                c.len()
            ),
            figures,
            quirks,
        );
    }
    figures.small_values = Some(small_values(
        c,
        r,
        candidate.dtype,
        device,
        bench,
        arith,
        eps,
    ));
    figures.ulp = ulp_error(c, r, candidate.dtype, bench);

    // cosine_sim
    match cosine(c, r, device, bench) {
        Cosine::Scalar => quirks.push(
            "a one-element output gets no cosine (cosine_sim: 'the data is scalar'), which does not count against it"
                .into(),
        ),
        Cosine::BothZero => quirks.push(
            "both outputs are all zero (max |v| <= 2.2e-16): no cosine, which does not count against it"
                .into(),
        ),
        Cosine::CandidateZero => {
            return done(
                ReplayVerdict::Error,
                "All the data is zero in device dump data: cosine similarity fails",
                figures,
                quirks,
            );
        }
        Cosine::ReferenceZero => {
            return done(
                ReplayVerdict::Error,
                "All the data is zero in bench dump data: cosine similarity fails",
                figures,
                quirks,
            );
        }
        Cosine::Nan => {
            figures.cosine = Some(f64::NAN);
            quirks.push(
                "the cosine similarity is NaN (a NaN or infinity in an output), which msprobe's cosine_sim counts as a pass"
                    .into(),
            );
        }
        Cosine::Value(cos) => {
            figures.cosine = Some(cos);
            if cos <= COSINE_THRESHOLD {
                return done(
                    ReplayVerdict::Error,
                    &format!("Cosine similarity {cos:.9} is not above 0.99"),
                    figures,
                    quirks,
                );
            }
        }
    }

    // get_abs_err, get_max_abs_err (np.max propagates NaN; `< 0.001` in the array's dtype).
    let abs_err: Vec<f64> = c
        .iter()
        .zip(r)
        .map(|(&cv, &rv)| arith.q(cv - rv).abs())
        .collect();
    let max_abs_err = abs_err.iter().copied().fold(f64::NEG_INFINITY, nan_max);
    figures.max_abs_err = Some(max_abs_err);
    if max_abs_err < arith.q(MAX_ABS_ERR_THRESHOLD) {
        return done(
            ReplayVerdict::Pass,
            &format!("Max abs error {max_abs_err:e} is less than 0.001"),
            figures,
            quirks,
        );
    }

    // get_rel_err_origin with get_abs_bench_with_eps: |r| + eps in the reference's dtype.
    let rel_err: Vec<f64> = abs_err
        .iter()
        .zip(r)
        .map(|(&ae, &rv)| arith.q(ae / bench.q(rv.abs() + eps)).abs())
        .collect();
    let share = |t: f64| {
        let below = rel_err.iter().filter(|&&e| e < arith.q(t)).count();
        let share = below as f64 / rel_err.len() as f64;
        RelErrShare {
            threshold: t,
            share,
            passed: share > 1.0 - t,
        }
    };
    let half_precision = matches!(candidate.dtype, DType::Float16 | DType::BFloat16);
    if half_precision {
        let hundredth = share(HUNDREDTH);
        figures.rel_err_hundredth = Some(hundredth);
        if !hundredth.passed {
            return done(
                ReplayVerdict::Error,
                &format!(
                    "Relative error is greater than 0.01 ({:.4}% of elements below 0.01, not above 99%)",
                    hundredth.share * 100.0
                ),
                figures,
                quirks,
            );
        }
    }
    let thousandth = share(THOUSANDTH);
    figures.rel_err_thousandth = Some(thousandth);
    if half_precision {
        return if thousandth.passed {
            done(
                ReplayVerdict::Pass,
                &format!(
                    "Relative error is less than 0.001 ({:.4}% of elements below 0.001, above 99.9%)",
                    thousandth.share * 100.0
                ),
                figures,
                quirks,
            )
        } else {
            done(
                ReplayVerdict::Warning,
                &format!(
                    "Relative error is greater than 0.001 ({:.4}% of elements below 0.001, not above 99.9%; {:.4}% below 0.01)",
                    thousandth.share * 100.0,
                    hundredth_share(&figures) * 100.0
                ),
                figures,
                quirks,
            )
        };
    }
    let ten_thousandth = share(TEN_THOUSANDTH);
    figures.rel_err_ten_thousandth = Some(ten_thousandth);
    if !thousandth.passed {
        return done(
            ReplayVerdict::Error,
            &format!(
                "Relative error is greater than 0.001 ({:.4}% of elements below 0.001, not above 99.9%)",
                thousandth.share * 100.0
            ),
            figures,
            quirks,
        );
    }
    if !ten_thousandth.passed {
        return done(
            ReplayVerdict::Warning,
            &format!(
                "Relative error is greater than 0.0001 ({:.4}% of elements below 0.0001, not above 99.99%)",
                ten_thousandth.share * 100.0
            ),
            figures,
            quirks,
        );
    }
    done(
        ReplayVerdict::Pass,
        &format!(
            "Relative error is less than 0.0001 ({:.4}% of elements below 0.0001, above 99.99%)",
            ten_thousandth.share * 100.0
        ),
        figures,
        quirks,
    )
}

fn hundredth_share(figures: &Figures) -> f64 {
    figures.rel_err_hundredth.map_or(f64::NAN, |s| s.share)
}

/// `max` as `np.max` takes it: NaN wins.
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

enum Cosine {
    Scalar,
    BothZero,
    CandidateZero,
    ReferenceZero,
    Nan,
    Value(f64),
}

/// `cosine_sim(bench, device)`.
fn cosine(c: &[f64], r: &[f64], device: Arith, bench: Arith) -> Cosine {
    if c.len() == 1 {
        return Cosine::Scalar;
    }
    let _ = (device, bench); // max |v| is exact in every dtype; the eps is a float64 scalar
    let max_c = c.iter().map(|v| v.abs()).fold(f64::NEG_INFINITY, nan_max);
    let max_r = r.iter().map(|v| v.abs()).fold(f64::NEG_INFINITY, nan_max);
    match (max_c <= FLOAT_EPS, max_r <= FLOAT_EPS) {
        (true, true) => return Cosine::BothZero,
        (true, false) => return Cosine::CandidateZero,
        (false, true) => return Cosine::ReferenceZero,
        (false, false) => {}
    }
    let (mut dot, mut nc, mut nr) = (0.0f64, 0.0f64, 0.0f64);
    for (&cv, &rv) in c.iter().zip(r) {
        let (a, b) = (cv / max_c, rv / max_r);
        dot += a * b;
        nc += a * a;
        nr += b * b;
    }
    let cos = dot / (nc.sqrt() * nr.sqrt());
    if cos.is_nan() {
        Cosine::Nan
    } else {
        Cosine::Value(cos.clamp(-1.0, 1.0))
    }
}

/// `BenchmarkCompare`'s masks and figures (`_pre_compare`, `_compute_metrics`).
fn small_values(
    c: &[f64],
    r: &[f64],
    output: DType,
    device: Arith,
    bench: Arith,
    arith: Arith,
    eps: f64,
) -> SmallValues {
    let half = matches!(output, DType::Float16 | DType::BFloat16);
    // StandardConfig._small_value and _benchmark_small_value_atol.
    let threshold = if half { 2f64.powi(-10) } else { 2f64.powi(-20) };
    let atol = match output {
        DType::Float16 | DType::BFloat16 => 1e-16,
        _ => 2f64.powi(-30),
    };
    let (mut count, mut errors, mut masked, mut squares) = (0u64, 0u64, 0u64, 0.0f64);
    let (mut max_rel, mut sum_rel, mut normal) = (f64::NEG_INFINITY, 0.0f64, 0u64);
    for (&cv, &rv) in c.iter().zip(r) {
        // get_finite_and_infinite_mask: the reference cast to the output's array dtype.
        let finite = cv.is_finite() && device.q(rv).is_finite();
        let abs_err = arith.q(cv - rv).abs();
        let small = finite && rv.abs() <= bench.q(threshold);
        if small {
            count += 1;
            if abs_err > arith.q(atol) {
                errors += 1;
            }
        }
        if small || !finite {
            masked += 1;
        } else {
            squares += abs_err * abs_err;
            let rel = arith.q(abs_err / bench.q(rv.abs() + eps));
            max_rel = nan_max(max_rel, rel);
            sum_rel += rel;
            normal += 1;
        }
    }
    let size = c.len() as f64;
    let mse = squares / size * (size / (size - masked as f64 + 0.0001) + 0.0001);
    SmallValues {
        threshold,
        atol,
        count,
        errors,
        error_ratio: if count == 0 {
            0.0
        } else {
            errors as f64 / count as f64
        },
        normal_max_rel_err: if normal == 0 || max_rel < 0.0 {
            0.0
        } else {
            max_rel
        },
        normal_mean_rel_err: if normal == 0 {
            0.0
        } else {
            sum_rel / normal as f64
        },
        rmse: mse.sqrt(),
    }
}

/// `get_ulp_err` with `ULP_PARAMETERS`; `None` for dtypes it has no parameters for.
fn ulp_error(c: &[f64], r: &[f64], output: DType, bench: Arith) -> Option<UlpError> {
    let (min_e, bits, bound, t) = match output {
        DType::Float16 => (-14.0, 10, 1.0, Arith::F32),
        DType::BFloat16 => (-126.0, 7, 1.0, Arith::F32),
        DType::Float32 => (-126.0, 23, 32.0, Arith::F64),
        _ => return None,
    };
    let (mut max, mut sum, mut above) = (f64::NEG_INFINITY, 0.0f64, 0u64);
    for (&cv, &rv) in c.iter().zip(r) {
        let abs = rv.abs();
        // np.where(abs == 0, 0, floor(log2(abs))) in the reference's dtype; np.maximum
        // propagates NaN.
        let e = if abs == 0.0 {
            0.0
        } else {
            bench.q(abs.log2()).floor()
        };
        let e = if e.is_nan() { e } else { e.max(min_e) };
        let scale = t.q(bench.q(-e + f64::from(bits)).exp2());
        let ulp = t.q(t.q(cv - rv) * scale).abs();
        max = nan_max(max, ulp);
        sum += ulp;
        if ulp > bound {
            above += 1;
        }
    }
    Some(UlpError {
        mantissa_bits: bits,
        max,
        mean: sum / c.len() as f64,
        share_above: above as f64 / c.len() as f64,
        bound,
    })
}

fn float<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    super::standard::json_float(*v, s)
}

fn optional_float<S: serde::Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => super::standard::json_float(*v, s),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cd: DType, c: &[f64], rd: DType, r: &[f64]) -> Judged {
        judge(
            Values {
                dtype: cd,
                values: c,
            },
            Values {
                dtype: rd,
                values: r,
            },
        )
    }

    /// 1000 reference values of 1.0 and a candidate with `k` elements off by `delta`.
    fn ones_with(k: usize, delta: f64) -> (Vec<f64>, Vec<f64>) {
        let r = vec![1.0; 1000];
        let mut c = r.clone();
        for v in c.iter_mut().take(k) {
            *v += delta;
        }
        (c, r)
    }

    #[test]
    fn a_small_max_abs_error_passes_at_once() {
        // 0.0009765625 = 2^-10 < 0.001: pass whatever the relative errors say.
        let (c, r) = ones_with(1000, 2f64.powi(-10));
        let j = run(DType::Float32, &c, DType::Float64, &r);
        assert_eq!(j.verdict, ReplayVerdict::Pass, "{}", j.reason);
        assert_eq!(j.figures.max_abs_err, Some(2f64.powi(-10)));
        assert!(j.figures.rel_err_thousandth.is_none());
    }

    #[test]
    fn float32_bands_cross_at_the_stated_shares() {
        // |c - r| = 2e-3 on 1 element of 1000: rel 2e-3 > 0.001, so 999/1000 = 0.999 are
        // below 0.001, not above 1 - 0.001 = 0.999: error.
        let (c, r) = ones_with(1, 2e-3);
        let j = run(DType::Float32, &c, DType::Float64, &r);
        assert_eq!(j.verdict, ReplayVerdict::Error, "{}", j.reason);
        let t = j.figures.rel_err_thousandth.unwrap();
        assert_eq!((t.share, t.passed), (0.999, false));
        // 10,000 elements with 9 off by 2e-3: 0.9991 > 0.999 below 0.001, and 0.9991 is not
        // above 0.9999 below 0.0001: warning.
        let r = vec![1.0; 10_000];
        let mut c = r.clone();
        for v in c.iter_mut().take(9) {
            *v += 2e-3;
        }
        let j = run(DType::Float32, &c, DType::Float64, &r);
        assert_eq!(j.verdict, ReplayVerdict::Warning, "{}", j.reason);
        assert_eq!(j.figures.rel_err_ten_thousandth.unwrap().share, 0.9991);
        // Only 1 of 10,000 off: 0.9999 is not above 0.9999 at 0.0001 either: still warning.
        let mut c = r.clone();
        c[0] += 2e-3;
        assert_eq!(
            run(DType::Float32, &c, DType::Float64, &r).verdict,
            ReplayVerdict::Warning
        );
        // 1 of 100,000: 0.99999 > 0.9999: pass.
        let r = vec![1.0; 100_000];
        let mut c = r.clone();
        c[7] += 2e-3;
        let j = run(DType::Float32, &c, DType::Float64, &r);
        assert_eq!(j.verdict, ReplayVerdict::Pass, "{}", j.reason);
    }

    #[test]
    fn float16_bands_cross_at_the_stated_shares() {
        // Reference float32, candidate float16, eps = float32's 2^-23.
        // 11 of 1000 off by 0.02 (rel 0.02 >= 0.01): 0.989 <= 0.99: error.
        let (c, r) = ones_with(11, 0.015625); // 2^-6, exact in float16
        let j = run(DType::Float16, &c, DType::Float32, &r);
        assert_eq!(j.verdict, ReplayVerdict::Error, "{}", j.reason);
        assert_eq!(j.figures.rel_err_hundredth.unwrap().share, 0.989);
        assert_eq!(j.figures.eps, 2f64.powi(-23));
        // 10 of 1000: 0.99 is not above 0.99: error still (the rule is `>`).
        let (c, r) = ones_with(10, 0.015625);
        assert_eq!(
            run(DType::Float16, &c, DType::Float32, &r).verdict,
            ReplayVerdict::Error
        );
        // 9 of 1000: 0.991 > 0.99 at 0.01, and 0.991 <= 0.999 at 0.001: warning.
        let (c, r) = ones_with(9, 0.015625);
        let j = run(DType::Float16, &c, DType::Float32, &r);
        assert_eq!(j.verdict, ReplayVerdict::Warning, "{}", j.reason);
        // 1 of 10,000 (off by 2^-6): 0.9999 > 0.999 at 0.001: pass.
        let r = vec![1.0; 10_000];
        let mut c = r.clone();
        c[3] += 0.015625;
        let j = run(DType::Float16, &c, DType::Float32, &r);
        assert_eq!(j.verdict, ReplayVerdict::Pass, "{}", j.reason);
        assert_eq!(j.figures.rel_err_thousandth.unwrap().share, 0.9999);
    }

    #[test]
    fn the_threshold_is_compared_in_the_arrays_dtype() {
        // float16 101 against float32 100: |c - r| = 1, |r| + 2^-23 rounds to 100 in
        // float32, and 1/100 rounds to float32(0.01) = 0.0099999998. numpy compares `< 0.01`
        // in float32, where it is not below (in float64 it would be). With 11 such elements
        // of 1000 the share below 0.01 is 0.989: error (float64 thresholds would say 1.0,
        // then a warning at 0.001).
        let r = vec![100.0; 1000];
        let mut c = r.clone();
        for v in c.iter_mut().take(11) {
            *v = 101.0;
        }
        let j = run(DType::Float16, &c, DType::Float32, &r);
        assert_eq!(j.figures.computed_in, DType::Float32);
        assert_eq!(j.figures.rel_err_hundredth.unwrap().share, 0.989, "{j:?}");
        assert_eq!(j.verdict, ReplayVerdict::Error);
    }

    #[test]
    fn bfloat16_uses_two_to_the_minus_eight_as_eps() {
        // r = 0: rel err = |c| / 2^-8 (the eps of bfloat16, not float32's): 0.25 gives 64.
        let mut r = vec![1.0; 1000];
        let mut c = r.clone();
        r[0] = 0.0;
        c[0] = 2f64.powi(-2); // max abs err 0.25 ≥ 0.001 forces the ratio steps
        let j = run(DType::BFloat16, &c, DType::Float32, &r);
        assert_eq!(j.figures.eps, BFLOAT16_EPS);
        assert_eq!(j.figures.rel_err_hundredth.unwrap().share, 0.999);
        // 999/1000 > 0.99 at 0.01; 0.999 is not above 0.999 at 0.001: warning.
        assert_eq!(j.verdict, ReplayVerdict::Warning, "{}", j.reason);
    }

    #[test]
    fn cosine_at_most_0_99_is_an_error_and_nan_passes() {
        // Orthogonal halves: cosine 0.
        let c = [1.0, 0.0];
        let r = [0.0, 1.0];
        let j = run(DType::Float32, &c, DType::Float64, &r);
        assert_eq!(j.verdict, ReplayVerdict::Error);
        assert_eq!(j.figures.cosine, Some(0.0));
        // A NaN in the candidate: cosine NaN, counted as a pass; the max abs error (NaN)
        // is not below 0.001 and the NaN element is not below any threshold.
        let c = [f64::NAN, 1.0, 1.0, 1.0];
        let r = [1.0, 1.0, 1.0, 1.0];
        let j = run(DType::Float32, &c, DType::Float64, &r);
        assert!(j.figures.cosine.unwrap().is_nan());
        assert!(j.quirks.iter().any(|q| q.contains("NaN")), "{:?}", j.quirks);
        assert!(j.figures.max_abs_err.unwrap().is_nan());
        assert_eq!(j.verdict, ReplayVerdict::Error); // 3/4 below 0.001
        // One element: no cosine at all.
        let j = run(DType::Float32, &[1.0], DType::Float64, &[1.0]);
        assert_eq!(j.verdict, ReplayVerdict::Pass);
        assert_eq!(j.figures.cosine, None);
        // The candidate all zero, the reference not: error.
        let j = run(DType::Float32, &[0.0, 0.0], DType::Float64, &[1.0, 0.0]);
        assert_eq!(j.verdict, ReplayVerdict::Error);
        assert!(j.reason.contains("zero in device"), "{}", j.reason);
        // Both all zero: no cosine, max abs err 0: pass.
        let j = run(DType::Float32, &[0.0, 0.0], DType::Float64, &[0.0, 0.0]);
        assert_eq!(j.verdict, ReplayVerdict::Pass);
    }

    #[test]
    fn a_cosine_just_above_0_99_goes_on_to_the_other_steps() {
        // c = (1, x), r = (1, 0): cos = 1/sqrt(1 + x^2) > 0.99 for x = 0.1 (0.99504).
        let j = run(DType::Float32, &[1.0, 0.1], DType::Float64, &[1.0, 0.0]);
        assert!(j.figures.cosine.unwrap() > 0.99);
        assert_eq!(j.verdict, ReplayVerdict::Error); // then 1/2 below 0.001
        // x = 0.15: 0.98894 <= 0.99: error at the cosine.
        let j = run(DType::Float32, &[1.0, 0.15], DType::Float64, &[1.0, 0.0]);
        assert!(j.reason.starts_with("Cosine"), "{}", j.reason);
    }

    #[test]
    fn integers_must_be_equal_and_int16_is_refused() {
        let j = run(DType::Int64, &[1.0, 2.0], DType::Int64, &[1.0, 2.0]);
        assert_eq!(j.verdict, ReplayVerdict::Pass);
        let j = run(DType::Int64, &[1.0, 3.0], DType::Int64, &[1.0, 2.0]);
        assert_eq!(
            (j.verdict, j.figures.unequal),
            (ReplayVerdict::Error, Some(1))
        );
        let j = run(DType::Bool, &[1.0, 0.0], DType::Bool, &[1.0, 0.0]);
        assert_eq!(j.verdict, ReplayVerdict::Pass);
        let j = run(DType::Int16, &[1.0], DType::Int16, &[1.0]);
        assert_eq!(j.verdict, ReplayVerdict::Error);
        assert!(j.quirks[0].contains("int16"));
        let j = run(DType::Float32, &[1.0], DType::Int64, &[1.0]);
        assert_eq!(j.verdict, ReplayVerdict::Error);
    }

    #[test]
    fn small_values_and_ulp_errors_follow_the_benchmark_definitions() {
        // float16 output, float32 reference. r = 2^-10 is small (<=), r = 2^-9 is not.
        let r = [2f64.powi(-10), 2f64.powi(-9), 1.0, 0.0];
        let c = [
            2f64.powi(-10) + 2f64.powi(-20),
            2f64.powi(-9),
            1.0 + 2f64.powi(-10),
            0.0,
        ];
        let j = run(DType::Float16, &c, DType::Float32, &r);
        let s = j.figures.small_values.unwrap();
        // Small: r[0] (error: 2^-20 > 1e-16) and r[3] = 0 (no error).
        assert_eq!((s.count, s.errors, s.error_ratio), (2, 1, 0.5));
        // ULP: r = 1 has e = 0, so |c - r| = 2^-10 is 2^-10 * 2^10 = 1 ULP; r[0] = 2^-10,
        // e = -10: 2^-20 * 2^20 = 1; r = 0 takes e = 0 (msprobe's np.where), c = 0: 0.
        let u = j.figures.ulp.unwrap();
        assert_eq!((u.mantissa_bits, u.max), (10, 1.0));
        assert_eq!(u.mean, 0.5);
        assert_eq!(u.share_above, 0.0);
        // float32: 23 bits, e clamped at -126; float64 outputs get none.
        let j = run(
            DType::Float32,
            &[1.0 + 2f64.powi(-22)],
            DType::Float64,
            &[1.0],
        );
        assert_eq!(j.figures.ulp.unwrap().max, 2.0);
        assert!(
            run(DType::Float64, &[1.0], DType::Float64, &[1.0])
                .figures
                .ulp
                .is_none()
        );
    }
}
