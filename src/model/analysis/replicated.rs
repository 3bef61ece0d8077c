//! Replication checks: a stage captured `replicated:AXIS` must hold the same values on every
//! rank of its group. Replicas are one tensor, so their statistics must be (near-)bit-identical:
//! they are held to a near-exact, dtype-aware bound ([`replica_tolerances`]), never the diff's
//! coarse screen. Ranks that disagree are a finding of their own, often the first sign of a
//! broken collective or a weight loaded differently on one rank (docs/diff.md, "Replicated
//! stages").

use serde::Serialize;

use crate::model::analysis::compare::{
    STATS, Tolerance, Tolerances, Verdict, compare_records, unit_roundoff,
};
use crate::model::analysis::groups::{ParallelGroup, parallel_groups};
use crate::model::dump::{Record, Shard, Window};

/// `K`: replicas may differ by `K` ULP of their dtype at an extreme's magnitude, and by `K`
/// unit roundoffs of the reduction's dtype times `sqrt(n) · Σ|x|` in an accumulated
/// statistic (docs/diff.md, "Replicated stages").
pub const REPLICA_FACTOR: f64 = 4.0;

/// Two ranks of a group whose `replicated` records of one stage disagree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplicationFinding {
    /// The capture it was found in, `'a'` or `'b'`.
    pub side: char,
    /// The group axis (`tp`, `cp`, …).
    pub axis: String,
    /// `stage#occurrence`.
    pub key: String,
    /// The stage name.
    pub stage: String,
    /// The global rank whose record stands for the group (its lowest group rank).
    pub rank: u32,
    /// The global rank that disagrees with it.
    pub other_rank: u32,
    /// How the two records compare under [`replica_tolerances`] (never agree).
    pub verdict: Verdict,
    /// The first statistic beyond its replica bound, in [`STATS`] order (`None` for a shape,
    /// dtype or non-finite count that differs).
    pub stat: Option<String>,
    /// `|a − b|` of that statistic.
    pub abs_diff: Option<f64>,
    /// The replica bound it exceeded, in the statistic's units.
    pub bound: Option<f64>,
    /// Position of the stage in the lowest rank's capture order (0-based).
    pub position: usize,
}

impl ReplicationFinding {
    /// `replicated tensor differs across tp ranks 0 and 1 at layers.3.attn_norm (magnitude)`.
    pub fn describe(&self) -> String {
        let by = match (&self.stat, self.abs_diff, self.bound, &self.verdict) {
            (Some(stat), Some(d), Some(bound), _) => {
                format!(": {stat} by {d:.3e}, replica bound {bound:.3e}")
            }
            (_, _, _, Verdict::Structural { reason }) => format!(": {reason}"),
            _ => String::new(),
        };
        format!(
            "replicated tensor differs across {} ranks {} and {} at {} ({}{by})",
            self.axis,
            self.rank,
            self.other_rank,
            self.stage,
            self.verdict.name()
        )
    }
}

/// The near-exact bound two replicas `a` and `b` of one tensor are held to, per statistic
/// (docs/diff.md, "Replicated stages"), with `K` = [`REPLICA_FACTOR`]:
///
/// - `min`, `max`, `max_abs` are elements: `K` ULP of the dtype at their magnitude,
///   `rtol = 2K · u(dtype)` (one ULP at `|x|` is at most `2u · |x|`);
/// - `mean`, `l2`, `pos_checksum` are reductions, whose order may differ: `K · u_r · sqrt(n) ·
///   Σ|x|` (`/ n` for the mean; `l2` relative: `K · u_r · sqrt(n) · l2`), `u_r` the unit
///   roundoff the reduction ran in (the dtype's own when `reduced_in_dtype`, float64 for a
///   float64 tensor or records whose `stats_path` accumulated in float64, float32 otherwise) and `Σ|x| ≤ min(sqrt(n) · l2, n · max_abs)`;
/// - every statistic also passes the rounding of `stats_dtype` (`2 · u · scale`).
///
/// Integers and bools take float64's roundoff (their statistics are float64 sums).
pub fn replica_tolerances(a: &Record, b: &Record, stats_dtype: Option<&str>) -> Tolerances {
    let float64 = 2f64.powi(-53);
    let u = unit_roundoff(&a.dtype)
        .max(unit_roundoff(&b.dtype))
        .max(float64);
    let reduced_in_dtype = [a, b]
        .iter()
        .any(|r| r.stats.as_ref().is_some_and(|s| s.reduced_in_dtype));
    let u_stack = stats_dtype.map_or(float64, unit_roundoff).max(float64);
    // dump_probe.py's fused paths accumulate in float64 (docs/manifest.md "Statistics
    // paths"): `native` and `inductor` always, `triton` where the statistics are float64.
    let accumulated_in_float64 = [a, b].iter().all(|r| match r.stats_path.as_deref() {
        Some("native" | "inductor") => true,
        Some("triton") => u_stack <= float64,
        _ => false,
    });
    let u_reduce = if reduced_in_dtype {
        u
    } else if u <= float64 || accumulated_in_float64 {
        float64
    } else {
        2f64.powi(-24)
    };
    let pick = |f: fn(&crate::model::dump::Stats) -> Option<f64>| {
        [a, b]
            .iter()
            .filter_map(|r| r.stats.as_ref().and_then(f))
            .filter(|x| x.is_finite())
            .map(f64::abs)
            .fold(0.0, f64::max)
    };
    let n = [a, b]
        .iter()
        .map(|r| {
            r.stats
                .as_ref()
                .and_then(|s| s.finite_count)
                .unwrap_or(r.numel)
        })
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let (l2, max_abs) = (pick(|s| s.l2), pick(|s| s.max_abs));
    let sum_abs = (n.sqrt() * l2).min(n * max_abs);
    let k = REPLICA_FACTOR;
    let reduce = k * u_reduce * n.sqrt();
    let element = Tolerance {
        rtol: 2.0 * k * u + 2.0 * u_stack,
        atol: 0.0,
    };
    let mut per_stat = [element; 6];
    for (i, name) in STATS.iter().enumerate() {
        per_stat[i] = match *name {
            "mean" => Tolerance {
                rtol: 2.0 * u_stack,
                atol: reduce * sum_abs / n,
            },
            "l2" => Tolerance {
                rtol: reduce + 2.0 * u_stack,
                atol: 0.0,
            },
            "pos_checksum" => Tolerance {
                rtol: 2.0 * u_stack,
                atol: reduce * sum_abs,
            },
            _ => element,
        };
    }
    Tolerances {
        per_stat,
        checksum_noise: None,
    }
}

/// Checks every `replicated` stage of `windows` across its group, each pair of replicas under
/// [`replica_tolerances`]; findings in order of side, group and capture position.
pub fn check(side: char, windows: &[Window]) -> Vec<ReplicationFinding> {
    let mut findings = Vec::new();
    for ParallelGroup { axis, members, .. } in parallel_groups(windows) {
        let (_, base) = members[0];
        let start = findings.len();
        let is_replica =
            |r: &Record| matches!(&r.shard, Some(Shard::Replicated { axis: a }) if *a == axis);
        // A stage only a later rank records as replicated: the lowest rank, which stands for
        // the group, lacks it or records it as something else.
        for &(_, other) in &members[1..] {
            for record in other.records.iter().filter(|r| is_replica(r)) {
                let mine = base
                    .records
                    .iter()
                    .position(|r| r.stage == record.stage && r.occurrence == record.occurrence);
                let reason = match mine.map(|i| (i, &base.records[i].shard)) {
                    Some((_, Some(Shard::Replicated { axis: a }))) if *a == axis => continue,
                    None => format!("not captured on rank {}", base.rank),
                    Some((_, Some(shard))) => format!(
                        "rank {} records it as {shard}, not replicated:{axis}",
                        base.rank
                    ),
                    Some((_, None)) => {
                        format!("rank {} records it without replicated:{axis}", base.rank)
                    }
                };
                findings.push(ReplicationFinding {
                    side,
                    axis: axis.clone(),
                    key: record.key(),
                    stage: record.stage.to_string(),
                    rank: base.rank,
                    other_rank: other.rank,
                    verdict: Verdict::Structural { reason },
                    stat: None,
                    abs_diff: None,
                    bound: None,
                    position: mine.unwrap_or(base.records.len()),
                });
            }
        }
        for (position, record) in base.records.iter().enumerate() {
            if !is_replica(record) {
                continue;
            }
            for &(_, other) in &members[1..] {
                let theirs = other
                    .records
                    .iter()
                    .find(|r| r.stage == record.stage && r.occurrence == record.occurrence);
                // A replica that is missing, or recorded as something else, is no evidence
                // that the ranks agree: said as a finding, never passed over.
                let missing = match theirs.map(|r| &r.shard) {
                    None => Some(format!("not captured on rank {}", other.rank)),
                    Some(Some(Shard::Replicated { axis: a })) if *a == axis => None,
                    Some(Some(shard)) => Some(format!(
                        "rank {} records it as {shard}, not replicated:{axis}",
                        other.rank
                    )),
                    Some(None) => Some(format!(
                        "rank {} records it without replicated:{axis}",
                        other.rank
                    )),
                };
                if let Some(reason) = missing {
                    findings.push(ReplicationFinding {
                        side,
                        axis: axis.clone(),
                        key: record.key(),
                        stage: record.stage.to_string(),
                        rank: base.rank,
                        other_rank: other.rank,
                        verdict: Verdict::Structural { reason },
                        stat: None,
                        abs_diff: None,
                        bound: None,
                        position,
                    });
                    continue;
                }
                let Some(theirs) = theirs else { continue };
                let tolerances = replica_tolerances(record, theirs, base.stats_dtype.as_deref());
                let comparison = compare_records(record, theirs, &tolerances);
                if comparison.verdict.diverges() {
                    let beyond = comparison.stats.iter().find(|d| d.exceeds);
                    findings.push(ReplicationFinding {
                        side,
                        axis: axis.clone(),
                        key: record.key(),
                        stage: record.stage.to_string(),
                        rank: base.rank,
                        other_rank: other.rank,
                        verdict: comparison.verdict,
                        stat: beyond.map(|d| d.name.to_string()),
                        abs_diff: beyond.and_then(|d| d.abs_diff),
                        bound: beyond.and_then(|d| d.bound),
                        position,
                    });
                }
            }
        }
        findings[start..].sort_by_key(|f| f.position);
    }
    findings
}
