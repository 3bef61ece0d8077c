//! Values a reader accepted that cannot be true of a captured tensor: an unknown dtype, an
//! occurrence 0, a `numel` that is not the product of the shape, a negative magnitude, counts
//! beyond `numel`. One rule for every field (docs/manifest.md, "Values that cannot be true"):
//! the record is kept; a field that is impossible and optional is dropped (a lost-evidence
//! warning); one that is required is kept as written with a warning that says what it costs;
//! one that is only unusual is a note. Each problem is said once per window and field, naming
//! its first record and how many records share it.

use crate::model::dump::{Record, Warning, WarningKind, Window};

/// Every dtype torch names (`torch.<name>`, without the prefix), as of torch 2.13: what the
/// probes write in `dtype`.
const TORCH_DTYPES: &[&str] = &[
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "complex32",
    "complex64",
    "complex128",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint64",
    "uint32",
    "uint16",
    "uint8",
    "bool",
    "qint8",
    "quint8",
    "qint32",
    "quint4x2",
    "quint2x4",
    "bits1x8",
    "bits2x4",
    "bits4x2",
    "bits8",
    "bits16",
    "int1",
    "int2",
    "int3",
    "int4",
    "int5",
    "int6",
    "int7",
    "uint1",
    "uint2",
    "uint3",
    "uint4",
    "uint5",
    "uint6",
    "uint7",
];

/// One impossible or unusual value met in a record.
struct Problem {
    /// The field, as docs/manifest.md names it (`dtype`, `stats.l2`).
    field: &'static str,
    /// What is wrong with this record's value, in words.
    what: String,
    /// What dumpview did about it.
    cost: &'static str,
    kind: WarningKind,
}

/// Checks every record of `window` (see the module doc), dropping impossible optional
/// statistics in place. Returns one warning per field and kind of problem, in record order.
pub fn check_values(window: &mut Window) -> Vec<Warning> {
    let conventions = window.facts.probe_conventions;
    // (field, first record's key and seq, its problem, how many records).
    let mut met: Vec<(String, u64, Problem, usize)> = Vec::new();
    for record in &mut window.records {
        for problem in problems_of(record, conventions) {
            match met.iter_mut().find(|(_, _, p, _)| p.field == problem.field) {
                Some((_, _, _, count)) => *count += 1,
                None => met.push((record.key(), record.seq, problem, 1)),
            }
        }
    }
    met.into_iter()
        .map(|(key, seq, p, count)| {
            let others = match count {
                1 => String::new(),
                n => format!(
                    " (and {} more record{})",
                    n - 1,
                    if n == 2 { "" } else { "s" }
                ),
            };
            let message = format!(
                "{key} (seq {seq}): `{}`: {}{others}; {}",
                p.field, p.what, p.cost
            );
            Warning {
                file: window.source.clone(),
                message,
                kind: p.kind,
            }
        })
        .collect()
}

/// The problems of one record, dropping what its rule drops.
fn problems_of(record: &mut Record, conventions: bool) -> Vec<Problem> {
    let mut problems = Vec::new();
    if conventions && !TORCH_DTYPES.contains(&record.dtype.as_str()) {
        problems.push(Problem {
            field: "dtype",
            what: format!("{:?} is not a torch dtype", record.dtype.as_str()),
            cost: "kept as written: compared by name, with no precision or ULP notes",
            kind: WarningKind::Note,
        });
    }
    if conventions && record.occurrence == 0 {
        problems.push(Problem {
            field: "occurrence",
            what: "0, where occurrences count from 1".into(),
            cost: "kept as written: the record pairs with another side's occurrence 0 only",
            kind: WarningKind::Note,
        });
    }
    let product = record.shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
    // Only a tensor of a known element size: msprobe's non-tensor values (None, torch.Size)
    // have numel 0 by design.
    let tensor = record.element_size > 0;
    if tensor && product != Some(record.numel) {
        let product = product.map_or("more than 2^64".to_string(), |p| p.to_string());
        problems.push(Problem {
            field: "numel",
            what: format!(
                "{} is not the product of shape {:?} ({product})",
                record.numel, &*record.shape
            ),
            cost: "kept as written: the record's size and counts are in doubt",
            kind: WarningKind::LostEvidence,
        });
    }
    let Some(stats) = &mut record.stats else {
        return problems;
    };
    for (field, value) in [
        ("stats.max_abs", &mut stats.max_abs),
        ("stats.l2", &mut stats.l2),
    ] {
        if let Some(v) = value.filter(|v| *v < 0.0) {
            problems.push(Problem {
                field,
                what: format!("{v} is negative, where a magnitude cannot be"),
                cost: "that statistic is null (not compared); the record is kept",
                kind: WarningKind::LostEvidence,
            });
            *value = None;
        }
    }
    if let (Some(min), Some(max)) = (stats.min, stats.max)
        && min > max
    {
        problems.push(Problem {
            field: "stats.min",
            what: format!("{min} is above stats.max {max}"),
            cost: "min and max are null (not compared); the record is kept",
            kind: WarningKind::LostEvidence,
        });
        (stats.min, stats.max) = (None, None);
    }
    let counted = stats.nan_count.checked_add(stats.inf_count);
    let finite = stats.finite_count.unwrap_or(0);
    let total = counted.and_then(|c| c.checked_add(finite));
    if tensor
        && stats.counts_known
        && product == Some(record.numel)
        && total.is_none_or(|t| t > record.numel)
    {
        problems.push(Problem {
            field: "stats.nan_count",
            what: format!(
                "nan_count {} + inf_count {} + finite_count {finite} exceed numel {}",
                stats.nan_count, stats.inf_count, record.numel
            ),
            cost: "kept as written: its non-finite counts are in doubt",
            kind: WarningKind::LostEvidence,
        });
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::dump::{Name, Stats};

    fn record(seq: u64, dtype: &str, shape: &[u64], numel: u64) -> Record {
        Record {
            seq,
            stage: Name::new("layers.0.q"),
            occurrence: seq as u32 + 1,
            dtype: Name::new(dtype),
            element_size: 4,
            shape: shape.to_vec().into(),
            numel,
            stats: Some(Stats {
                nan_count: 0,
                inf_count: 0,
                finite_count: Some(numel),
                max_abs: Some(2.0),
                min: Some(-2.0),
                max: Some(1.0),
                mean: Some(0.1),
                l2: Some(3.0),
                pos_checksum: Some(0.5),
                counts_known: true,
                reduced_in_dtype: false,
            }),
            ..Record::default()
        }
    }

    fn window(records: Vec<Record>) -> Window {
        Window {
            source: "run/rank0/match1-occ1/manifest.json".into(),
            schema_version: 1,
            probe: "dump_probe".into(),
            label: "req".into(),
            match_index: 1,
            occurrence: 1,
            attempt: 1,
            rank: 0,
            world_size: 1,
            metadata: Default::default(),
            stats_dtype: None,
            records,
            input_sets: Vec::new(),
            run: None,
            format: crate::model::dump::SourceFormat::Probe,
            facts: &crate::model::formats::probe::FACTS,
            context: None,
            token_rows: None,
        }
    }

    #[test]
    fn sound_records_give_no_warning() {
        let mut w = window(vec![
            record(0, "bfloat16", &[2, 3], 6),
            record(1, "int64", &[], 1),
        ]);
        assert!(check_values(&mut w).is_empty());
    }

    #[test]
    fn each_field_is_named_once_per_window_with_its_first_record() {
        let mut a = record(0, "floaty", &[2, 3], 6);
        a.occurrence = 0;
        let b = record(1, "floaty", &[2, 3], 6);
        let mut w = window(vec![a, b]);
        let warnings = check_values(&mut w);
        let messages: Vec<&str> = warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "layers.0.q#0 (seq 0): `dtype`: \"floaty\" is not a torch dtype (and 1 more \
                 record); kept as written: compared by name, with no precision or ULP notes",
                "layers.0.q#0 (seq 0): `occurrence`: 0, where occurrences count from 1; kept \
                 as written: the record pairs with another side's occurrence 0 only",
            ]
        );
        assert!(warnings.iter().all(|w| w.kind == WarningKind::Note));
        assert_eq!(warnings[0].file, w.source);
    }

    #[test]
    fn an_impossible_statistic_costs_that_field_only() {
        let mut r = record(4, "float32", &[2, 3], 6);
        r.stats.as_mut().unwrap().l2 = Some(-1.5);
        let mut w = window(vec![r]);
        let warnings = check_values(&mut w);
        assert_eq!(warnings.len(), 1);
        assert_eq!(warnings[0].kind, WarningKind::LostEvidence);
        assert!(
            warnings[0]
                .message
                .starts_with("layers.0.q#5 (seq 4): `stats.l2`: -1.5 is negative")
        );
        let stats = w.records[0].stats.as_ref().unwrap();
        assert_eq!(
            (stats.l2, stats.max_abs, stats.mean),
            (None, Some(2.0), Some(0.1))
        );
    }

    #[test]
    fn numel_and_counts_are_checked_against_the_shape() {
        let mut w = window(vec![record(0, "float32", &[8, 12], 100)]);
        let warnings = check_values(&mut w);
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0]
                .message
                .contains("`numel`: 100 is not the product of shape [8, 12] (96)")
        );
        let mut r = record(0, "float32", &[4], 4);
        r.stats.as_mut().unwrap().nan_count = 3;
        let mut w = window(vec![r]);
        let warnings = check_values(&mut w);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0]
                .message
                .contains("nan_count 3 + inf_count 0 + finite_count 4 exceed numel 4")
        );
    }

    #[test]
    fn formats_with_their_own_dtype_names_are_not_held_to_torch_names() {
        let mut w = window(vec![record(0, "int", &[], 1)]);
        w.records[0].occurrence = 0;
        w.facts = &crate::model::formats::msprobe::FACTS;
        assert!(check_values(&mut w).is_empty());
    }
}
