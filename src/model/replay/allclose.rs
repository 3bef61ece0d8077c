//! The `allclose` standard: `|candidate - reference| <= atol + rtol * |reference|` at every
//! element, exactly as `dumpview tensors` evaluates it (float64, B = the reference), so its
//! verdict is the metrics' `allclose` and needs no figures of its own.

use super::standard::ReplayVerdict;
use crate::model::tensor::metrics::Metrics;

/// The verdict of one output and its reason, from the metrics computed under the standard's
/// own `atol` and `rtol` (`None` with the reason the metrics could not be computed).
pub fn judge(metrics: Option<&Metrics>, metrics_error: Option<&str>) -> (ReplayVerdict, String) {
    match metrics {
        Some(m) if m.allclose => (
            ReplayVerdict::Pass,
            format!(
                "every element within atol {:e} + rtol {:e} * |reference|",
                m.atol, m.rtol
            ),
        ),
        Some(m) => (
            ReplayVerdict::Error,
            format!(
                "{} of {} elements beyond atol {:e} + rtol {:e} * |reference|",
                m.mismatches, m.numel, m.atol, m.rtol
            ),
        ),
        None => (
            ReplayVerdict::Error,
            format!("not compared: {}", metrics_error.unwrap_or_default()),
        ),
    }
}
