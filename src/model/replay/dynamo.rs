//! PyTorch's accuracy rule for compiled code, `torch._dynamo.utils.same` in torch 2.13.0
//! (`torch/_dynamo/utils.py`), for one output tensor, with its defaults (`tol=1e-4`,
//! `equal_nan=False`, `exact_dtype=True`, `use_larger_multiplier_for_smaller_tensor=False`,
//! `force_max_multiplier=False`, `cos_similarity=False`):
//!
//! - `ref` is the reference run on the inputs as captured (its output in the candidate's
//!   dtype: `reference_native.pt`), `res` the candidate, `fp64_ref` the float64 golden;
//! - `exact_dtype`: `ref` and `res` of different dtypes fail ("dtype mismatch");
//! - bool outputs: `torch.allclose` of both as uint8 at `tol`;
//! - `torch.allclose(ref, res, atol=tol, rtol=tol)` passes: `|ref - res| <= tol + tol*|res|`
//!   at every element (NaN is never close) — torch's rtol scales `|res|`, the candidate;
//! - else, only with a float64 `fp64_ref`: a `ref` holding NaN where `res` and `fp64_ref` hold
//!   none passes when `allclose(fp64_ref.to(res.dtype), res, 0.04, 0.04)`; otherwise
//!   `RMSE(fp64_ref - res) <= multiplier * RMSE(fp64_ref - ref) + tol / 10`, with
//!   `multiplier` from `get_multiplier()`: 3.0 for a float16 or bfloat16 `res`, else 2.0, and
//!   3.0 when `fp64_ref.numel() < 1000` or `ref` is 4-d with its last two sizes 1 (or
//!   `tol >= 2e-2`, not with the default). A NaN RMSE fails (`equal_nan` is off).
//!
//! dumpview evaluates allclose in float64; torch evaluates it in the tensors' dtype, so an
//! element within one ULP of the bound can be judged differently. RMSEs are float64 in both.

use serde::Serialize;

use super::msprobe::Values;
use super::standard::ReplayVerdict;
use crate::model::tensor::DType;

/// `same()`'s default `tol`: the allclose atol and rtol, and a tenth of it the RMSE slack.
pub const TOL: f64 = 1e-4;

/// The figures of one output under the dynamo rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// `tol`.
    pub tol: f64,
    /// Whether `torch.allclose(ref, res, atol=tol, rtol=tol)` held.
    pub allclose: bool,
    /// Elements that were not close.
    pub not_close: u64,
    /// `RMSE(fp64_ref - res)`, when reached.
    #[serde(serialize_with = "optional_float")]
    pub rmse_candidate: Option<f64>,
    /// `RMSE(fp64_ref - ref)`, when reached.
    #[serde(serialize_with = "optional_float")]
    pub rmse_reference: Option<f64>,
    /// The multiplier, when reached.
    pub multiplier: Option<f64>,
    /// `multiplier * rmse_reference + tol / 10`, when reached.
    #[serde(serialize_with = "optional_float")]
    pub bound: Option<f64>,
}

/// What the rule decided for one output.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// pass or error (unsupported when the reference in the candidate's dtype is missing).
    pub verdict: ReplayVerdict,
    /// The step that decided it.
    pub reason: String,
    /// The figures (`None` when not even allclose was reached).
    pub figures: Option<Figures>,
    /// torch behaviours worth knowing about this verdict.
    pub quirks: Vec<String>,
}

/// `torch.isclose(ref, res)` at one element, as torch defines it: equal (infinities of one
/// sign included), or both finite and within `atol + rtol * |res|`.
fn close(reference: f64, candidate: f64, atol: f64, rtol: f64) -> bool {
    reference == candidate
        || (reference.is_finite()
            && candidate.is_finite()
            && (reference - candidate).abs() <= atol + rtol * candidate.abs())
}

fn rmse(golden: &[f64], other: &[f64]) -> f64 {
    let sum: f64 = golden
        .iter()
        .zip(other)
        .map(|(g, o)| (g - o) * (g - o))
        .sum();
    (sum / golden.len() as f64).sqrt()
}

/// Judges `candidate` (`res`) against `native` (`ref`, the reference in the candidate's
/// dtype) and `golden` (`fp64_ref`), all of `shape`.
pub fn judge(
    candidate: Values,
    native: Option<Values>,
    golden: Option<Values>,
    shape: &[usize],
) -> Judged {
    let mut quirks = Vec::new();
    let Some(native) = native else {
        return Judged {
            verdict: ReplayVerdict::Unsupported,
            reason: "the dynamo standard needs the reference run in the candidate's dtype (reference_native.pt), which is missing".into(),
            figures: None,
            quirks,
        };
    };
    if native.dtype != candidate.dtype {
        return Judged {
            verdict: ReplayVerdict::Error,
            reason: format!(
                "dtype mismatch {}, {} (exact_dtype)",
                native.dtype, candidate.dtype
            ),
            figures: None,
            quirks,
        };
    }
    let (res, reference) = (candidate.values, native.values);
    let not_close = reference
        .iter()
        .zip(res)
        .filter(|&(&r, &c)| !close(r, c, TOL, TOL))
        .count() as u64;
    let mut figures = Figures {
        tol: TOL,
        allclose: not_close == 0,
        not_close,
        rmse_candidate: None,
        rmse_reference: None,
        multiplier: None,
        bound: None,
    };
    if not_close == 0 {
        return Judged {
            verdict: ReplayVerdict::Pass,
            reason: format!(
                "allclose at atol = rtol = {TOL:e} to the reference in {}",
                candidate.dtype
            ),
            figures: Some(figures),
            quirks,
        };
    }
    quirks.push(
        "torch.allclose(ref, res) scales rtol by |res|: the candidate's magnitude, not the reference's"
            .into(),
    );
    let golden = golden.filter(|g| g.dtype == DType::Float64);
    let Some(golden) = golden.filter(|_| candidate.dtype != DType::Bool) else {
        let why = if candidate.dtype == DType::Bool {
            "bool outputs are judged by allclose alone"
        } else {
            "no float64 golden (fp64_ref), so same() stops at allclose"
        };
        return Judged {
            verdict: ReplayVerdict::Error,
            reason: format!(
                "Accuracy failed: allclose not within tol={TOL:e} ({not_close} elements; {why})"
            ),
            figures: Some(figures),
            quirks,
        };
    };
    let has_nan = |v: &[f64]| v.iter().any(|x| x.is_nan());
    if !has_nan(golden.values) && !has_nan(res) && has_nan(reference) {
        let loose = 1e-2 * 4.0;
        let rounded = golden.values.iter().map(|&g| candidate.dtype.round(g));
        if rounded.zip(res).all(|(g, &c)| close(g, c, loose, loose)) {
            quirks.push(
                "the reference holds NaN where the golden and the candidate hold none, and the candidate is allclose to the golden at 0.04: same() counts that as a pass"
                    .into(),
            );
            return Judged {
                verdict: ReplayVerdict::Pass,
                reason:
                    "the reference has NaN, the candidate matches the golden (atol = rtol = 0.04)"
                        .into(),
                figures: Some(figures),
                quirks,
            };
        }
    }
    let ref_error = rmse(golden.values, reference);
    let res_error = rmse(golden.values, res);
    let mut multiplier = match candidate.dtype {
        DType::Float16 | DType::BFloat16 => 3.0,
        _ => 2.0,
    };
    let numel: usize = golden.values.len();
    let one_by_one = shape.len() == 4 && shape[shape.len() - 1] == 1 && shape[shape.len() - 2] == 1;
    if numel < 1000 || one_by_one {
        multiplier = 3.0;
    }
    let bound = multiplier * ref_error + TOL / 10.0;
    figures.rmse_candidate = Some(res_error);
    figures.rmse_reference = Some(ref_error);
    figures.multiplier = Some(multiplier);
    figures.bound = Some(bound);
    if ref_error.is_nan() {
        quirks.push(
            "the reference's RMSE is NaN (\"Found nan in reference\"): the comparison fails with equal_nan off"
                .into(),
        );
    }
    let passes = res_error <= bound;
    Judged {
        verdict: if passes {
            ReplayVerdict::Pass
        } else {
            ReplayVerdict::Error
        },
        reason: format!(
            "RMSE (res-fp64) {res_error:.7e} {} {multiplier} x RMSE (ref-fp64) {ref_error:.7e} + {:e}",
            if passes { "<=" } else { ">" },
            TOL / 10.0
        ),
        figures: Some(figures),
        quirks,
    }
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

    fn v(dtype: DType, values: &[f64]) -> Values<'_> {
        Values { dtype, values }
    }

    #[test]
    fn allclose_at_1e_4_passes_and_rtol_scales_the_candidate() {
        // |ref - res| = 2e-4, res = 1: bound 1e-4 + 1e-4 * 1 = 2e-4: close.
        let j = judge(
            v(DType::Float32, &[1.0, 2.0]),
            Some(v(DType::Float32, &[1.0002, 2.0])),
            None,
            &[2],
        );
        assert_eq!(j.verdict, ReplayVerdict::Pass, "{}", j.reason);
        // |ref - res| = 3e-4 at res = 1 fails allclose; no golden: error.
        let j = judge(
            v(DType::Float32, &[1.0]),
            Some(v(DType::Float32, &[1.0003])),
            None,
            &[1],
        );
        assert_eq!(j.verdict, ReplayVerdict::Error);
        assert_eq!(j.figures.unwrap().not_close, 1);
    }

    #[test]
    fn the_rmse_rule_uses_the_stated_multiplier() {
        // 1000 float32 elements (multiplier 2): golden 0, ref 1e-3 everywhere (RMSE 1e-3),
        // res 2e-3 + 1e-5 - 1e-9 passes (<= 2 * 1e-3 + 1e-5), 2e-3 + 2e-5 fails.
        let golden = vec![0.0; 1000];
        let reference = vec![1e-3; 1000];
        let pass = vec![2e-3 + 1e-5 - 1e-9; 1000];
        let fail = vec![2e-3 + 2e-5; 1000];
        let j = judge(
            v(DType::Float32, &pass),
            Some(v(DType::Float32, &reference)),
            Some(v(DType::Float64, &golden)),
            &[1000],
        );
        assert_eq!(j.verdict, ReplayVerdict::Pass, "{}", j.reason);
        assert_eq!(j.figures.as_ref().unwrap().multiplier, Some(2.0));
        let j = judge(
            v(DType::Float32, &fail),
            Some(v(DType::Float32, &reference)),
            Some(v(DType::Float64, &golden)),
            &[1000],
        );
        assert_eq!(j.verdict, ReplayVerdict::Error, "{}", j.reason);
        // 999 elements: multiplier 3, so 3e-3 passes there.
        let (g, r, c) = (vec![0.0; 999], vec![1e-3; 999], vec![3e-3; 999]);
        let j = judge(
            v(DType::Float32, &c),
            Some(v(DType::Float32, &r)),
            Some(v(DType::Float64, &g)),
            &[999],
        );
        assert_eq!(j.verdict, ReplayVerdict::Pass, "{}", j.reason);
        assert_eq!(j.figures.unwrap().multiplier, Some(3.0));
        // float16 at 1000 elements: 3 as well; a [10, 100, 1, 1] float32 tensor: 3.
        let (g, r, c) = (vec![0.0; 1000], vec![1e-3; 1000], vec![3e-3; 1000]);
        let j = judge(
            v(DType::Float16, &c),
            Some(v(DType::Float16, &r)),
            Some(v(DType::Float64, &g)),
            &[1000],
        );
        assert_eq!(j.figures.unwrap().multiplier, Some(3.0));
        let j = judge(
            v(DType::Float32, &c),
            Some(v(DType::Float32, &r)),
            Some(v(DType::Float64, &g)),
            &[10, 100, 1, 1],
        );
        assert_eq!(
            (j.verdict, j.figures.unwrap().multiplier),
            (ReplayVerdict::Pass, Some(3.0))
        );
    }

    #[test]
    fn dtype_mismatch_missing_native_and_nan_reference() {
        let j = judge(
            v(DType::Float16, &[1.0]),
            Some(v(DType::Float32, &[1.0])),
            None,
            &[1],
        );
        assert_eq!(j.verdict, ReplayVerdict::Error);
        assert!(j.reason.contains("dtype mismatch"));
        let j = judge(v(DType::Float16, &[1.0]), None, None, &[1]);
        assert_eq!(j.verdict, ReplayVerdict::Unsupported);
        // ref NaN, res and golden finite and within 0.04: pass by torch's corner case.
        let j = judge(
            v(DType::Float32, &[1.0, 2.01]),
            Some(v(DType::Float32, &[f64::NAN, 2.0])),
            Some(v(DType::Float64, &[1.0, 2.0])),
            &[2],
        );
        assert_eq!(j.verdict, ReplayVerdict::Pass, "{}", j.reason);
        // ref NaN and res far off: NaN RMSE of the reference fails.
        let j = judge(
            v(DType::Float32, &[1.0, 3.0]),
            Some(v(DType::Float32, &[f64::NAN, 2.0])),
            Some(v(DType::Float64, &[1.0, 2.0])),
            &[2],
        );
        assert_eq!(j.verdict, ReplayVerdict::Error);
        assert!(j.quirks.iter().any(|q| q.contains("NaN")));
    }
}
