//! `vary`: run-to-run variability of repeated captures of one request.
//!
//! An intermittent fault (a race, an uninitialised read, a nondeterministic
//! reduction) shows as statistics that change between captures of the same
//! input. For each `stage#occurrence` of the first capture, the spread of
//! each statistic over all captures is `(max − min) / scale`, with the
//! scales of [`crate::model::analysis::compare`]; a stage's variability is its largest
//! spread, and NaN/inf counts that differ between runs are variability of 1.

use serde::Serialize;

use crate::model::analysis::compare::STATS;
use crate::model::analysis::diff::pair_windows;
use crate::model::dump::{Stats, Window};

/// Default threshold: spreads up to this are float noise, not variability.
pub const DEFAULT_THRESHOLD: f64 = 1e-6;

/// One statistic's spread at one stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    /// The statistic, one of [`STATS`].
    pub name: &'static str,
    /// Smallest value over the captures that define it; `None` when none does.
    pub min: Option<f64>,
    /// Largest value over the captures that define it; `None` when none does.
    pub max: Option<f64>,
    /// `(max − min) / scale`; 1 when the statistic is undefined in some runs but not others.
    pub spread: f64,
}

/// The variability of one stage across the captures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageVariability {
    /// `stage#occurrence`.
    pub key: String,
    /// Position in the first capture's order.
    pub position: usize,
    /// How many captures hold this stage.
    pub present_in: usize,
    /// Largest spread of any statistic (NaN/inf count differences count as 1).
    pub variability: f64,
    /// The statistic with that spread.
    pub worst: &'static str,
    /// One per statistic, in [`STATS`] order; empty when fewer than two captures hold
    /// statistics for the stage.
    pub spreads: Vec<Spread>,
}

/// Variability of one rank's window across the captures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankVariability {
    /// The rank of the first capture's window.
    pub rank: u32,
    /// The window of each capture, in the order given.
    pub sources: Vec<String>,
    /// One per distinct `stage#occurrence` of the first capture's window, in its capture order.
    pub stages: Vec<StageVariability>,
    /// Index into `stages` of the first stage above the threshold.
    pub first_variable: Option<usize>,
}

/// The variability report over N captures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VaryReport {
    /// Number of captures compared.
    pub captures: usize,
    /// Spreads up to this are float noise ([`DEFAULT_THRESHOLD`] unless given).
    pub threshold: f64,
    /// One per window of the first capture, paired with the other captures' windows as
    /// `diff` pairs them.
    pub ranks: Vec<RankVariability>,
}

impl VaryReport {
    /// True when some stage varies beyond the threshold.
    pub fn found_something(&self) -> bool {
        self.ranks.iter().any(|r| r.first_variable.is_some())
    }
}

fn scale(name: &str, all: &[&Stats]) -> f64 {
    let largest = |f: &dyn Fn(&Stats) -> Option<f64>| {
        all.iter()
            .filter_map(|s| f(s))
            .map(f64::abs)
            .fold(0.0, f64::max)
    };
    match name {
        "mean" => {
            largest(&|s| Some(s.l2? / (s.finite_count? as f64).sqrt()).filter(|v| v.is_finite()))
        }
        "pos_checksum" => largest(&|s| s.l2).max(largest(&|s| s.pos_checksum)),
        _ => largest(&|s| s.get(name)),
    }
}

fn spread_of(name: &'static str, all: &[&Stats]) -> Spread {
    let values: Vec<Option<f64>> = all.iter().map(|s| s.get(name)).collect();
    let defined: Vec<f64> = values.iter().flatten().copied().collect();
    let min = defined.iter().copied().reduce(f64::min);
    let max = defined.iter().copied().reduce(f64::max);
    let spread = if defined.len() != values.len() && !defined.is_empty() {
        1.0
    } else {
        match (min, max) {
            (Some(lo), Some(hi)) if lo == hi => 0.0,
            (Some(lo), Some(hi)) if lo.is_finite() && hi.is_finite() => {
                let s = scale(name, all);
                if s > 0.0 { (hi - lo) / s } else { 1.0 }
            }
            (Some(_), Some(_)) => 1.0,
            _ => 0.0,
        }
    };
    Spread {
        name,
        min,
        max,
        spread,
    }
}

/// Variability across `captures` (each a list of windows as loaded; at least two).
pub fn vary(captures: &[Vec<Window>], threshold: f64) -> VaryReport {
    let mut ranks = Vec::new();
    if let Some((first, rest)) = captures.split_first() {
        for reference in first {
            // The window of each other capture that pairs with this one.
            let mut windows: Vec<&Window> = vec![reference];
            for other in rest {
                let (pairs, _, _) = pair_windows(std::slice::from_ref(reference), other);
                if let Some(&(_, w)) = pairs.first() {
                    windows.push(w);
                }
            }
            ranks.push(rank_variability(&windows, threshold));
        }
    }
    VaryReport {
        captures: captures.len(),
        threshold,
        ranks,
    }
}

fn rank_variability(windows: &[&Window], threshold: f64) -> RankVariability {
    let reference = windows[0];
    let indexes: Vec<std::collections::HashMap<(&str, u32), usize>> = windows
        .iter()
        .map(|w| {
            let mut index = std::collections::HashMap::with_capacity(w.records.len());
            for (i, r) in w.records.iter().enumerate() {
                index.entry((r.stage.as_str(), r.occurrence)).or_insert(i);
            }
            index
        })
        .collect();
    let mut stages = Vec::new();
    for (position, record) in reference.records.iter().enumerate() {
        let key = (record.stage.as_str(), record.occurrence);
        if indexes[0][&key] != position {
            continue; // a duplicate key: the first one stands for it
        }
        let present: Vec<&Stats> = windows
            .iter()
            .zip(&indexes)
            .filter_map(|(w, index)| w.records[*index.get(&key)?].stats.as_ref())
            .collect();
        let present_in = windows
            .iter()
            .zip(&indexes)
            .filter(|(_, index)| index.contains_key(&key))
            .count();
        let spreads: Vec<Spread> = if present.len() >= 2 {
            STATS
                .iter()
                .map(|&name| spread_of(name, &present))
                .collect()
        } else {
            Vec::new()
        };
        let counts_vary = present
            .windows(2)
            .any(|p| (p[0].nan_count, p[0].inf_count) != (p[1].nan_count, p[1].inf_count));
        let (mut variability, mut worst) =
            spreads
                .iter()
                .map(|s| (s.spread, s.name))
                .fold(
                    (0.0, "none"),
                    |best, next| if next.0 > best.0 { next } else { best },
                );
        if counts_vary {
            (variability, worst) = (1.0_f64.max(variability), "nan/inf counts");
        }
        stages.push(StageVariability {
            key: record.key(),
            position,
            present_in,
            variability,
            worst,
            spreads,
        });
    }
    let first_variable = stages.iter().position(|s| s.variability > threshold);
    RankVariability {
        rank: reference.rank,
        sources: windows
            .iter()
            .map(|w| w.source.display().to_string())
            .collect(),
        stages,
        first_variable,
    }
}
