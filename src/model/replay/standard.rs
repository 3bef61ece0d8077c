//! The standards a replay is judged by ([`Standard`]) and the verdict levels ([`ReplayVerdict`]).

use serde::{Deserialize, Serialize};

/// How far a candidate's output may stray from the reference before it is a finding
/// (docs/replay.md, "Verdicts", gives each rule with its source).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "lowercase")]
pub enum Standard {
    /// The single-device rule of msprobe's API accuracy checker (mindstudio-probe 26.2.0,
    /// `msprobe/pytorch/api_accuracy_checker/compare/compare.py`,
    /// `Comparator._compare_float_tensor`): the candidate against the reference run on
    /// upcast inputs, thresholds by the candidate's output dtype ([`super::msprobe`]).
    Msprobe,
    /// PyTorch's `torch._dynamo.utils.same` (torch 2.13) with its defaults: allclose at 1e-4,
    /// else the candidate's RMSE against the float64 golden within a multiple of the
    /// reference-in-the-candidate's-dtype's RMSE ([`super::dynamo`]).
    Dynamo,
    /// `|candidate - reference| <= atol + rtol * |reference|` at every element, as
    /// `dumpview tensors` evaluates it (float64, B = the reference).
    Allclose {
        /// Absolute tolerance, in the values' unit.
        atol: f64,
        /// Relative tolerance, times `|reference|`.
        rtol: f64,
    },
}

/// The standard's name when none is given.
pub const DEFAULT_STANDARD: &str = "msprobe";

impl Standard {
    /// Every name `--standard` takes.
    pub const NAMES: [&'static str; 3] = ["msprobe", "dynamo", "allclose"];

    /// The standard named `name` (default [`DEFAULT_STANDARD`]); `atol` and `rtol` belong to
    /// `allclose` only, which needs both.
    ///
    /// # Errors
    /// An unknown name; `--atol`/`--rtol` with another standard; `allclose` without both,
    /// or with a negative or non-finite one.
    pub fn from_args(
        name: Option<&str>,
        atol: Option<f64>,
        rtol: Option<f64>,
    ) -> Result<Standard, String> {
        let name = name.unwrap_or(DEFAULT_STANDARD);
        match name {
            "msprobe" | "dynamo" if atol.is_some() || rtol.is_some() => Err(format!(
                "--atol and --rtol belong to --standard allclose; the {name} standard sets its own thresholds"
            )),
            "msprobe" => Ok(Standard::Msprobe),
            "dynamo" => Ok(Standard::Dynamo),
            "allclose" => match (atol, rtol) {
                (Some(atol), Some(rtol))
                    if atol.is_finite() && rtol.is_finite() && atol >= 0.0 && rtol >= 0.0 =>
                {
                    Ok(Standard::Allclose { atol, rtol })
                }
                (Some(_), Some(_)) => {
                    Err("--atol and --rtol must be finite, non-negative numbers".into())
                }
                _ => Err(
                    "--standard allclose needs explicit --atol and --rtol (there is no default: a verdict needs a stated tolerance)"
                        .into(),
                ),
            },
            other => Err(format!(
                "unknown standard {other:?}; one of {}",
                Standard::NAMES.join(", ")
            )),
        }
    }

    /// `msprobe`, `dynamo` or `allclose`.
    pub fn name(&self) -> &'static str {
        match self {
            Standard::Msprobe => "msprobe",
            Standard::Dynamo => "dynamo",
            Standard::Allclose { .. } => "allclose",
        }
    }

    /// The side this standard compares the candidate with.
    pub fn against(&self) -> Against {
        match self {
            Standard::Msprobe | Standard::Allclose { .. } => Against::Reference,
            Standard::Dynamo => Against::ReferenceNative,
        }
    }

    /// The reference sides the standard reads, as replay.json names them (`reference`,
    /// `reference_native`, `golden`): the files an exported test of a case must carry.
    pub fn reads(&self) -> &'static [&'static str] {
        match self {
            Standard::Msprobe | Standard::Allclose { .. } => &["reference"],
            Standard::Dynamo => &["reference_native", "golden"],
        }
    }

    /// Where the rule comes from, for people.
    pub fn source(&self) -> &'static str {
        match self {
            Standard::Msprobe => {
                "msprobe's single-device API accuracy rule (mindstudio-probe 26.2.0, msprobe/pytorch/api_accuracy_checker/compare/compare.py Comparator._compare_float_tensor)"
            }
            Standard::Dynamo => {
                "PyTorch's torch._dynamo.utils.same (torch 2.13.0) with its defaults (tol 1e-4, RMSE against the float64 golden)"
            }
            Standard::Allclose { .. } => {
                "|candidate - reference| <= atol + rtol*|reference| at every element (dumpview tensors' rule)"
            }
        }
    }

    /// The standard as one phrase: `msprobe`, `allclose (atol 1e-5, rtol 1e-3)`.
    pub fn describe(&self) -> String {
        match self {
            Standard::Allclose { atol, rtol } => format!("allclose (atol {atol:e}, rtol {rtol:e})"),
            other => other.name().to_string(),
        }
    }
}

/// The side a standard judges the candidate against: what the judge reads for each
/// standard, so that [`super::judge`] names no standard but to call its rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Against {
    /// The reference run on the inputs upcast (`reference.pt`): msprobe, allclose. That side
    /// failing or missing leaves nothing to judge against (an error).
    Reference,
    /// The reference run on the inputs as captured, in the candidate's dtype
    /// (`reference_native.pt`): dynamo. It may refuse the dtype as a candidate may, so that
    /// side failing or missing while the upcast reference ran makes the output unsupported,
    /// not an error.
    ReferenceNative,
}

impl Against {
    /// The side's role as replay.json and the report name it: `reference`, `reference_native`.
    pub fn role(self) -> &'static str {
        match self {
            Against::Reference => "reference",
            Against::ReferenceNative => "reference_native",
        }
    }

    /// Whether this side may refuse the inputs' dtype: its failure or absence then makes an
    /// output unsupported instead of leaving nothing to judge against.
    pub fn may_refuse_the_dtype(self) -> bool {
        self == Against::ReferenceNative
    }
}

/// The outcome of one output or of a whole replay, least severe first: the worst output's
/// verdict is the replay's ([`ReplayVerdict::worst`]). `Crash` and `Unsupported` are what the
/// candidate did (replay.json's `status`), never a numerical mismatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplayVerdict {
    /// Within the standard.
    Pass,
    /// msprobe's middle band: not an error, not a pass (exit status 0, said).
    Warning,
    /// The candidate refused the dtype or layout (torch's "not implemented for", "unsupported"),
    /// or the standard cannot judge the output (a side it needs is missing).
    Unsupported,
    /// Outside the standard: a numerical mismatch, a missing or extra output, a shape or
    /// dtype that differs.
    Error,
    /// The candidate raised.
    Crash,
}

impl ReplayVerdict {
    /// `pass`, `warning`, `unsupported`, `error`, `crash`.
    pub fn name(self) -> &'static str {
        match self {
            ReplayVerdict::Pass => "pass",
            ReplayVerdict::Warning => "warning",
            ReplayVerdict::Unsupported => "unsupported",
            ReplayVerdict::Error => "error",
            ReplayVerdict::Crash => "crash",
        }
    }

    /// The most severe of `verdicts`; `Pass` for none.
    pub fn worst(verdicts: impl IntoIterator<Item = ReplayVerdict>) -> ReplayVerdict {
        verdicts.into_iter().max().unwrap_or(ReplayVerdict::Pass)
    }

    /// Whether the verdict is a finding (exit status 1): error, crash or unsupported.
    pub fn is_finding(self) -> bool {
        !matches!(self, ReplayVerdict::Pass | ReplayVerdict::Warning)
    }
}

impl std::fmt::Display for ReplayVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Serializes a float as a JSON number, or "nan" / "inf" / "-inf".
pub(crate) fn json_float<S: serde::Serializer>(v: f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_nan() {
        s.serialize_str("nan")
    } else if v.is_infinite() {
        s.serialize_str(if v > 0.0 { "inf" } else { "-inf" })
    } else {
        s.serialize_f64(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerances_belong_to_allclose_only() {
        assert_eq!(Standard::from_args(None, None, None), Ok(Standard::Msprobe));
        assert_eq!(
            Standard::from_args(Some("dynamo"), None, None),
            Ok(Standard::Dynamo)
        );
        assert_eq!(
            Standard::from_args(Some("allclose"), Some(1e-5), Some(1e-3)),
            Ok(Standard::Allclose {
                atol: 1e-5,
                rtol: 1e-3
            })
        );
        let e = Standard::from_args(Some("msprobe"), Some(1e-3), None).unwrap_err();
        assert!(e.contains("belong to --standard allclose"), "{e}");
        let e = Standard::from_args(Some("allclose"), Some(1e-3), None).unwrap_err();
        assert!(e.contains("needs explicit --atol and --rtol"), "{e}");
        let e = Standard::from_args(Some("allclose"), Some(-1.0), Some(0.0)).unwrap_err();
        assert!(e.contains("non-negative"), "{e}");
        let e = Standard::from_args(Some("ulp"), None, None).unwrap_err();
        assert!(e.contains("one of msprobe, dynamo, allclose"), "{e}");
    }

    #[test]
    fn the_worst_verdict_wins_and_only_pass_and_warning_are_clean() {
        use ReplayVerdict::*;
        assert_eq!(ReplayVerdict::worst([Pass, Warning, Pass]), Warning);
        assert_eq!(ReplayVerdict::worst([Warning, Unsupported]), Unsupported);
        assert_eq!(ReplayVerdict::worst([Unsupported, Error]), Error);
        assert_eq!(ReplayVerdict::worst([]), Pass);
        assert!(!Pass.is_finding() && !Warning.is_finding());
        assert!(Error.is_finding() && Crash.is_finding() && Unsupported.is_finding());
        let json = serde_json::to_string(&Standard::Allclose {
            atol: 0.5,
            rtol: 0.25,
        })
        .unwrap();
        assert_eq!(json, r#"{"name":"allclose","atol":0.5,"rtol":0.25}"#);
    }
}
