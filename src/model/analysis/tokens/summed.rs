//! Where one side holds no row statistics (an old manifest, statistics turned off): each of
//! its records that holds its forward's rows is compared whole against the other side's rows
//! summed over the same (request, position) rows (docs/diff.md, "Token rows").
//!
//! The summed rows give the whole record's non-finite count, `max_abs` (the largest), sum
//! (`mean · finite_count`) and sum of squares (`l2²`); the position checksum too where the
//! record's rows are its request's positions 0, 1, … in order and its last dimension is not a
//! token dimension (its checksum weights row r of its matrix view by its index in the tensor,
//! a row's checksum by its position: the two agree only there).

use serde::Serialize;

use super::judge::{FloorCache, RowJudge, RowStats};
use super::plan::{Map, Planned, Row, SidePlan, Stages};
use crate::model::analysis::compare::Tolerances;
use crate::model::analysis::row_evidence::RowVerdict;
use crate::model::dump::{ROW_WIDTH, Record, Window};

/// What comparing one side's records with the other side's summed rows found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summed {
    /// The side without row statistics (`"A"` or `"B"`), whose records were compared whole.
    pub whole_side: &'static str,
    /// Its windows whose records were compared: a row map (the manifest's, or one made from
    /// its metadata `positions`) and no row statistics.
    pub windows: usize,
    /// Records compared with summed rows.
    pub records_compared: u64,
    /// Of those, how many had their position checksum compared too.
    pub checksums_compared: u64,
    /// Records that diverge.
    pub records_diverging: u64,
    /// Records holding their forward's rows that could not be compared: the other side lacks
    /// some of the rows (other positions captured, a stage captured on one side only), or
    /// the forward holds padding or rows of requests with no partner.
    pub records_not_compared: u64,
    /// Records some of whose positions hold other token ids on the two sides (different
    /// inputs): not compared.
    pub records_different_input: u64,
    /// The earliest diverging record in the rows side's capture order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<SummedDivergence>,
}

/// A record whose whole-tensor statistics differ from the other side's rows summed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummedDivergence {
    /// `stage#k`.
    pub key: String,
    /// The request's id on the side with rows, and on the whole side.
    pub requests: (String, String),
    /// The first and last position the record holds.
    pub positions: (u64, u64),
    /// Its first position's token id, where recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_id: Option<i64>,
    /// The worst statistic's difference over its tolerance.
    pub verdict: RowVerdict,
    /// The rows summed (the side with rows).
    pub rows: RowStats,
    /// The record's own statistics, as a row (its checksum NaN where not comparable).
    pub record: RowStats,
    /// The record's window (manifest path) and seq.
    pub source: (String, u64),
}

/// Compares every record of the windows in `whole` (those of the side without row
/// statistics to check, by address among its windows) with the rows of the other side;
/// `rows_are_a` says which side holds the rows. `None` when no window qualifies.
pub(super) fn compare(
    planned: &Planned,
    whole: &[&Window],
    rows_are_a: bool,
    tolerances: &Tolerances,
) -> Option<Summed> {
    let (rows_plan, whole_plan) = if rows_are_a {
        (&planned.a, &planned.b)
    } else {
        (&planned.b, &planned.a)
    };
    let dims = token_dims_by_stage(rows_plan, &planned.stages);
    let judge = RowJudge::new(tolerances);
    let mut floors = FloorCache::default();
    let mut cache: Map<u32, Vec<Row>> = Map::default();
    let mut out = Summed {
        whole_side: if rows_are_a { "B" } else { "A" },
        windows: 0,
        records_compared: 0,
        checksums_compared: 0,
        records_diverging: 0,
        records_not_compared: 0,
        records_different_input: 0,
        first: None,
    };
    let mut first: Option<((u32, u32, u64), SummedDivergence)> = None;
    for (wi, w) in whole_plan.windows.iter().enumerate() {
        if !whole.iter().any(|x| std::ptr::eq(*x, *w)) {
            continue;
        }
        out.windows += 1;
        let forward = &whole_plan.forward[wi];
        // Every row must be a matched request's: padding and unmatched rows are in the
        // record's statistics and in no row of the other side.
        let keys: Option<Vec<(u32, u64)>> = forward
            .iter()
            .map(|&(entry, p)| Some((whole_plan.entry_pair[wi].get(entry as usize).copied()??, p)))
            .collect();
        // Positions where the matched requests' ids differ are different inputs.
        let different_input = keys.as_ref().is_some_and(|keys| {
            keys.iter().any(|&(pair, p)| {
                planned.matches[pair as usize]
                    .2
                    .ids_differ_from
                    .is_some_and(|from| p >= from)
            })
        });
        let from_zero = forward
            .iter()
            .enumerate()
            .all(|(i, &(entry, p))| entry == forward[0].0 && p == i as u64);
        let mut calls: Map<&str, u32> = Map::default();
        for record in &w.records {
            let Some((name, token_dims)) = dims.get(record.stage.as_ref()) else {
                continue;
            };
            let held: u64 = record.shape.iter().take(*token_dims).product();
            if record.shape.len() < *token_dims || held != forward.len() as u64 {
                continue; // not its forward's rows
            }
            let k = calls.entry(record.stage.as_ref()).or_insert(0);
            *k += 1;
            if different_input {
                out.records_different_input += 1;
                continue;
            }
            let (Some(keys), Some(&stage)) = (&keys, planned.stages.ordinal.get(&(*name, *k)))
            else {
                out.records_not_compared += 1;
                continue;
            };
            let rows = cache
                .entry(stage)
                .or_insert_with(|| bucket_rows(rows_plan, stage));
            let shard = whole_plan.shard[wi];
            let Some((summed, dtype)) = sum_rows(rows_plan, rows, keys, shard) else {
                out.records_not_compared += 1;
                continue;
            };
            let Some(mut own) = as_row(record) else {
                out.records_not_compared += 1;
                continue;
            };
            // The record's checksum weights the rows of its matrix view [rows, last dim]:
            // they are its token rows' only where the last dimension is not a token dim.
            let checksum = from_zero && record.shape.len() > *token_dims;
            if !checksum {
                own.row_checksum = f32::NAN;
            }
            out.records_compared += 1;
            out.checksums_compared += u64::from(checksum);
            let (floor, precision_change) = floors.of(dtype, &record.dtype);
            let verdict = judge.judge(&summed, &own, floor, precision_change);
            if !verdict.diverges() {
                continue;
            }
            out.records_diverging += 1;
            let order = (stage, keys[0].0, keys[0].1);
            if first.as_ref().is_some_and(|(at, _)| *at <= order) {
                continue;
            }
            let (pair, p0) = keys[0];
            let m = &planned.matches[pair as usize].2;
            let token_id = planned
                .ra
                .index(&m.a)
                .and_then(|i| planned.ra.tokens[i].get(&p0).copied());
            let (mine, theirs) = if rows_are_a {
                (m.a.clone(), m.b.clone())
            } else {
                (m.b.clone(), m.a.clone())
            };
            let last = keys.iter().map(|k| k.1).max().unwrap_or(p0);
            first = Some((
                order,
                SummedDivergence {
                    key: planned.stages.keys[stage as usize].clone(),
                    requests: (mine, theirs),
                    positions: (p0, last),
                    token_id,
                    verdict,
                    rows: summed,
                    record: own,
                    source: (w.source.display().to_string(), record.seq),
                },
            ));
        }
    }
    out.first = first.map(|(_, d)| d);
    (out.windows > 0).then_some(out)
}

/// Per stage name of the rows side: its name id and how many leading dims hold tokens, from
/// its records of the forward's own rows (declared positions, such as KV-cache reads, are
/// not a forward's rows and are left out).
fn token_dims_by_stage<'s>(plan: &SidePlan, stages: &'s Stages) -> Map<&'s str, (u32, usize)> {
    let mut out: Map<&str, (u32, usize)> = Map::default();
    for (wi, w) in plan.windows.iter().enumerate() {
        let rows = w.token_rows.as_ref().expect("a planned window has rows");
        for (bi, block) in rows.records.iter().enumerate() {
            if block.positions.is_some() {
                continue;
            }
            let ri = plan.block_record[wi][bi];
            let Some(record) = w.records.get(ri as usize) else {
                continue;
            };
            if let Some((name, stage)) = stages.names.get_key_value(record.stage.as_ref()) {
                out.entry(name.as_str())
                    .or_insert((*stage, block.token_dims.len()));
            }
        }
    }
    out
}

/// The rows of stage ordinal `stage` on the rows side, in key order.
fn bucket_rows(plan: &SidePlan, stage: u32) -> Vec<Row> {
    let lo = plan.items.partition_point(|x| x.0 < stage);
    let hi = plan.items.partition_point(|x| x.0 <= stage);
    plan.rows(stage, &plan.item_list[lo..hi], &[]).rows
}

/// The rows at `keys` (matched pair, position) of shard `shard` summed, and their dtype;
/// `None` unless every key has a row.
fn sum_rows<'w>(
    plan: &SidePlan<'w>,
    rows: &[Row],
    keys: &[(u32, u64)],
    shard: u32,
) -> Option<(RowStats, &'w str)> {
    let mut total = [0f64; ROW_WIDTH];
    let mut dtype = None;
    for &(pair, p) in keys {
        let position = u32::try_from(p).ok()?;
        let at = rows.partition_point(|r| (r.pair, r.position, r.shard) < (pair, position, shard));
        let row = rows
            .get(at)
            .filter(|r| (r.pair, r.position, r.shard) == (pair, position, shard))?;
        let w = plan.windows[row.window as usize];
        let values = &w.token_rows.as_ref()?.values[row.at as usize..row.at as usize + ROW_WIDTH];
        total[0] += f64::from(values[0]);
        total[1] = total[1].max(f64::from(values[1]));
        for i in 2..ROW_WIDTH {
            total[i] += f64::from(values[i]);
        }
        dtype.get_or_insert(w.records[row.record as usize].dtype.as_ref());
    }
    let stats = RowStats {
        nonfinite_count: total[0] as f32,
        max_abs: total[1] as f32,
        sum: total[2] as f32,
        sum_squares: total[3] as f32,
        row_checksum: total[4] as f32,
    };
    Some((stats, dtype?))
}

/// A record's whole-tensor statistics as one row; `None` without statistics.
fn as_row(record: &Record) -> Option<RowStats> {
    let s = record.stats.as_ref()?;
    let finite = s.finite_count? as f64;
    let l2 = s.l2?;
    Some(RowStats {
        nonfinite_count: (s.nan_count + s.inf_count) as f32,
        max_abs: s.max_abs.unwrap_or(0.0) as f32,
        sum: (s.mean.unwrap_or(0.0) * finite) as f32,
        sum_squares: (l2 * l2) as f32,
        row_checksum: s.pos_checksum.map_or(f32::NAN, |c| c as f32),
    })
}
