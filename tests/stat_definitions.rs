//! The statistics are defined once, in the `dump_stats` crate (src/dump_stats): these tests hold
//! every other place that names them to it: `assets/dump_probe.py` (its own torch and Triton
//! kernels), the manifest's schema and page, and the readers. Each fails until its place follows
//! a statistic added to the crate (docs/architecture.md, "Adding a statistic").

use std::path::{Path, PathBuf};

use dump_stats::{COL_MUL, ROW_MUL, STAT_NAMES, Stat, TWO_POW_32, VALUE_STAT_NAMES};
use dumpview::model::dump::Stats;
use dumpview::model::formats::probe::parse;
use regex::Regex;

fn repo_file(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The integer a Python assignment `NAME = <integer>` at the start of a line gives.
fn python_int(source: &str, name: &str) -> u64 {
    let pattern = Regex::new(&format!(r"(?m)^{name} = (\d+)\b")).unwrap();
    let found = pattern
        .captures(source)
        .unwrap_or_else(|| panic!("dump_probe.py assigns no integer to {name}"));
    found[1].parse().unwrap()
}

#[test]
fn dump_probe_py_lists_the_crates_statistics_in_order() {
    let source = repo_file("assets/dump_probe.py");
    let line = Regex::new(r"(?m)^STAT_NAMES = \(([^)]*)\)")
        .unwrap()
        .captures(&source)
        .expect("dump_probe.py defines STAT_NAMES = (...) on one line");
    let names: Vec<&str> = Regex::new(r#""([a-z0-9_]+)""#)
        .unwrap()
        .captures_iter(line.get(1).unwrap().as_str())
        .map(|c| c.get(1).unwrap().as_str())
        .collect();
    assert_eq!(names, STAT_NAMES, "dump_probe.py's STAT_NAMES");
    // What the device computes: statistics of the crate, or the sum that mean is made from.
    let device = Regex::new(r"(?m)^_DEVICE_STATS = \(([^)]*)\)")
        .unwrap()
        .captures(&source)
        .expect("dump_probe.py defines _DEVICE_STATS");
    for name in Regex::new(r#""([a-z0-9_]+)""#)
        .unwrap()
        .captures_iter(device.get(1).unwrap().as_str())
    {
        let name = &name[1];
        assert!(
            name == "sum" || Stat::from_name(name).is_some(),
            "_DEVICE_STATS names {name}, which is no statistic"
        );
    }
}

#[test]
fn dump_probe_py_weighs_positions_with_the_crates_constants() {
    let source = repo_file("assets/dump_probe.py");
    assert_eq!(python_int(&source, "_ROW_MUL"), ROW_MUL);
    assert_eq!(python_int(&source, "_COL_MUL"), COL_MUL);
    assert_eq!(python_int(&source, "_TWO_32"), TWO_POW_32);
    // The l2 rescue's scale.
    let scale = Regex::new(r"(?m)^_L2_WIDE_SCALE = 2\.0 \*\* -(\d+)")
        .unwrap()
        .captures(&source)
        .expect("dump_probe.py defines _L2_WIDE_SCALE = 2.0 ** -N");
    let exponent: i32 = scale[1].parse().unwrap();
    assert_eq!(2f64.powi(-exponent), dump_stats::acc::RESCUE_SCALE);
    // The Triton kernel and the docstrings spell the constants out: every (r + 1) * N is the
    // row multiplier, every (c + 1) * N the column one, and no other large literal is around.
    let spelled = Regex::new(r"\((r|c) \+ 1\)\s*\*\s*(\d+)").unwrap();
    let mut seen = 0;
    for found in spelled.captures_iter(&source) {
        let want = if &found[1] == "r" { ROW_MUL } else { COL_MUL };
        assert_eq!(found[2].parse::<u64>().unwrap(), want, "{}", &found[0]);
        seen += 1;
    }
    assert!(
        seen >= 2,
        "the kernel's weights are no longer spelled (r + 1) * N"
    );
    for found in Regex::new(r"\b\d{9,}\b").unwrap().find_iter(&source) {
        let n: u64 = found.as_str().parse().unwrap();
        if n >= 1 << 31 {
            assert!(
                [ROW_MUL, COL_MUL, TWO_POW_32].contains(&n),
                "dump_probe.py holds {n}, which is none of the checksum's constants"
            );
        }
    }
}

#[test]
fn the_schema_and_the_manifest_page_name_every_statistic() {
    let schema: serde_json::Value =
        serde_json::from_str(&repo_file("assets/manifest.schema.json")).unwrap();
    let stats = find_required(&schema, "pos_checksum").expect("the schema has a stats object");
    let required: Vec<&str> = stats["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(required, STAT_NAMES, "the schema's required statistics");
    let mut properties: Vec<&str> = stats["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    properties.sort_unstable();
    let mut names = STAT_NAMES.to_vec();
    names.sort_unstable();
    assert_eq!(properties, names, "the schema's statistics");

    // docs/manifest.md, "## stats": a table row per statistic, and the weights' constants.
    let page = repo_file("docs/manifest.md");
    let section = page
        .split("\n## stats\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("docs/manifest.md has a section \"## stats\"");
    let mut listed: Vec<&str> = section
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .flat_map(|line| {
            let cell = line.split(" |").next().unwrap_or("");
            cell.split(['`', ',', ' ']).filter(|w| !w.is_empty())
        })
        .collect();
    listed.sort_unstable();
    assert_eq!(listed, names, "docs/manifest.md's stats table");
    for constant in [ROW_MUL, COL_MUL] {
        assert!(
            section.contains(&constant.to_string()),
            "docs/manifest.md's stats section lacks {constant}"
        );
    }
}

/// The first object under `value` whose `required` list names `name`.
fn find_required(value: &serde_json::Value, name: &str) -> Option<serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => {
            let names = map.get("required").and_then(|r| r.as_array());
            if names.is_some_and(|r| r.iter().any(|v| v == name)) {
                return Some(value.clone());
            }
            map.values().find_map(|v| find_required(v, name))
        }
        serde_json::Value::Array(items) => items.iter().find_map(|v| find_required(v, name)),
        _ => None,
    }
}

/// A manifest in the probe's line layout with one record whose statistics are `stats`.
fn manifest(stats: &str) -> String {
    let names: Vec<String> = STAT_NAMES.iter().map(|n| format!("\"{n}\"")).collect();
    let header = [
        "\"format\": \"dumpview.manifest\"".to_string(),
        "\"schema_version\": 1".into(),
        "\"probe\": \"stat_definitions\"".into(),
        "\"label\": \"req\"".into(),
        "\"match\": 1".into(),
        "\"occurrence\": 1".into(),
        "\"rank\": 0".into(),
        "\"world_size\": 1".into(),
        "\"metadata\": {}".into(),
        format!("\"stat_names\": [{}]", names.join(", ")),
        "\"stats_dtype\": \"float64\"".into(),
        "\"tensor_rows\": 0".into(),
        "\"tensor_pattern\": \"\"".into(),
        "\"host\": \"h\"".into(),
        "\"pid\": 1".into(),
        "\"armed_unix_s\": 1".into(),
        "\"finished_unix_s\": 2".into(),
    ];
    let record = format!(
        "{{\"seq\": 0, \"stage\": \"s\", \"occurrence\": 1, \"mode\": \"eager\", \"dtype\": \"float32\", \
         \"shape\": [2, 3], \"stride\": [3, 1], \"storage_offset\": 0, \"element_size\": 4, \"numel\": 6, \
         \"storage_ptr\": 4096, \"storage_id\": 1, \"storage_nbytes\": 24, \"data_ptr\": 4096, \
         \"device\": \"cpu\", \"device_format\": null, \"is_contiguous\": true, \"stats\": {stats}, \
         \"tensor_file\": null}}"
    );
    let mut text = String::from("{\n ");
    for line in header {
        text.push_str(&line);
        text.push_str(",\n ");
    }
    text.push_str("\"records\": [\n  ");
    text.push_str(&record);
    text.push_str("\n ],\n \"input_sets\": []\n}\n");
    text
}

#[test]
fn the_readers_take_every_statistic_of_the_crate() {
    // Each statistic its own value, in the crate's order.
    let values: Vec<(Stat, f64)> = Stat::ALL
        .into_iter()
        .map(|s| {
            (
                s,
                if s.is_count() {
                    1.0
                } else {
                    0.5 + s.index() as f64
                },
            )
        })
        .collect();
    let fields: Vec<String> = values
        .iter()
        .map(|(s, v)| match s.is_count() {
            true => format!("\"{}\": {}", s.name(), *v as u64),
            false => format!("\"{}\": {v}", s.name()),
        })
        .collect();
    let text = manifest(&format!("{{{}}}", fields.join(", ")));
    let path = PathBuf::from("manifest.json");
    let by_lines = parse::parse_by_lines(text.as_bytes(), &path)
        .expect("the line reader reads the probe's layout");
    let one_pass = parse::parse_one_pass(text.as_bytes(), &path).unwrap();
    for (road, parsed) in [("line reader", by_lines), ("serde", one_pass)] {
        assert!(parsed.repaired.is_empty(), "{road}: {:?}", parsed.repaired);
        let stats: &Stats = parsed.manifest.records[0]
            .stats
            .as_ref()
            .unwrap_or_else(|| panic!("{road}: no statistics"));
        for (stat, value) in &values {
            let read = match stat {
                Stat::NanCount => Some(stats.nan_count as f64),
                Stat::InfCount => Some(stats.inf_count as f64),
                Stat::FiniteCount => stats.finite_count.map(|n| n as f64),
                value_stat => stats.get(value_stat.name()),
            };
            assert_eq!(read, Some(*value), "{road}: {}", stat.name());
        }
    }
    // The comparison and the reports list the value statistics of the crate.
    assert_eq!(dumpview::model::analysis::compare::STATS, VALUE_STAT_NAMES);
}
