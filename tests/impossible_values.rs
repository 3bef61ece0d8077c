//! Values a reader accepted that cannot be true (issue 31, item 23; docs/manifest.md "Values
//! that cannot be true"), through the real binary: each is a warning naming its record and
//! field, of the kind the rule gives, and costs that field alone, never the record.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::run::json as dumpview;

fn example_window(side: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples/llama_fp16_overflow")
        .join(side)
        .join("rank0/match1-occ1")
}

/// Writes example side `a`'s window into `window`, its manifest changed by `edit`.
fn place(window: &Path, edit: impl FnOnce(&mut Value)) {
    std::fs::create_dir_all(window).unwrap();
    let source = example_window("a");
    let mut manifest: Value =
        serde_json::from_slice(&std::fs::read(source.join("manifest.json")).unwrap()).unwrap();
    edit(&mut manifest);
    std::fs::write(
        window.join("manifest.json"),
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
    std::fs::copy(source.join("rows.f32"), window.join("rows.f32")).unwrap();
}

/// `(kind, message)` of every warning of a `--json` document.
fn warnings(json: &Value) -> Vec<(String, String)> {
    json["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["kind"].as_str().unwrap().to_string(),
                w["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn each_impossible_value_is_named_with_its_record_and_field_and_costs_that_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut records = 0;
    place(&dir.path().join("rank0/match1-occ1"), |m| {
        let list = m["records"].as_array_mut().unwrap();
        records = list.len();
        list[0]["dtype"] = "floaty32".into();
        list[1]["numel"] = (list[1]["numel"].as_u64().unwrap() + 4).into();
        list[2]["stats"]["l2"] = (-1.5).into();
        list[3]["stats"]["nan_count"] = (-1).into();
        list[4]["stats"]["finite_count"] = "many".into();
        list[5]["stats"]["l2"] = (-2.0).into();
    });
    let path = dir.path().to_str().unwrap();
    let (code, json, stderr) = dumpview(&["scan", path, "--json"]);
    // Lost evidence exits 1; nothing is an input error.
    assert_eq!(code, 1, "{stderr}");
    let windows = json["windows"].as_array().unwrap();
    assert_eq!(windows[0]["records"], records, "no record is left out");
    let said = warnings(&json);
    let find = |field: &str| {
        said.iter()
            .find(|(_, m)| m.contains(&format!("`{field}`")))
            .unwrap_or_else(|| panic!("no warning names `{field}`: {said:#?}"))
            .clone()
    };
    let (kind, message) = find("dtype");
    assert_eq!(kind, "note");
    assert!(
        message.contains("\"floaty32\" is not a torch dtype"),
        "{message}"
    );
    let (kind, message) = find("numel");
    assert_eq!(kind, "lost_evidence");
    assert!(message.contains("is not the product of shape"), "{message}");
    // Two records with a negative l2: one warning, the first named, the other counted.
    let (kind, message) = find("stats.l2");
    assert_eq!(kind, "lost_evidence");
    assert!(
        message.contains("-1.5 is negative") && message.contains("(and 1 more record)"),
        "{message}"
    );
    // A bad count costs the record's statistics, not the record.
    let (kind, message) = find("stats.nan_count");
    assert_eq!(kind, "lost_evidence");
    assert!(message.contains("-1 is negative, not a count"), "{message}");
    assert!(message.contains("the record is kept"), "{message}");
    let (kind, message) = find("stats.finite_count");
    assert_eq!(kind, "lost_evidence");
    assert!(message.contains("\"many\" is not a count"), "{message}");
    // Every warning names the manifest.
    for w in json["warnings"].as_array().unwrap() {
        assert!(
            w["file"].as_str().unwrap().ends_with("manifest.json"),
            "{w}"
        );
    }
}

#[test]
fn occurrence_zero_is_a_note() {
    let dir = tempfile::tempdir().unwrap();
    place(&dir.path().join("rank0/match1-occ1"), |m| {
        m["records"][0]["occurrence"] = 0.into();
    });
    let path = dir.path().to_str().unwrap();
    let (_, json, _) = dumpview(&["scan", path, "--json"]);
    let said = warnings(&json);
    let zero: Vec<&(String, String)> = said
        .iter()
        .filter(|(_, m)| m.contains("`occurrence`: 0, where occurrences count from 1"))
        .collect();
    assert_eq!(zero.len(), 1, "{said:#?}");
    assert_eq!(zero[0].0, "note");
}

/// A copied attempt directory (`.2` copied to `.3`) records attempt 2 twice: the copy is left
/// out with a warning naming both directories, and attempt 2 is used once.
#[test]
fn a_duplicated_attempt_number_leaves_the_copy_out() {
    let dir = tempfile::tempdir().unwrap();
    let rank = dir.path().join("rank0");
    place(&rank.join("match1-occ1"), |m| m["attempt"] = 1.into());
    place(&rank.join("match1-occ1.2"), |m| m["attempt"] = 2.into());
    place(&rank.join("match1-occ1.3"), |m| m["attempt"] = 2.into());
    let path = dir.path().to_str().unwrap();
    let (code, json, stderr) = dumpview(&["scan", path, "--json"]);
    assert_eq!(code, 1, "{stderr}");
    let windows = json["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 1, "{windows:#?}");
    assert!(
        windows[0]["source"]
            .as_str()
            .unwrap()
            .ends_with("match1-occ1.2/manifest.json"),
        "{}",
        windows[0]["source"]
    );
    let said = warnings(&json);
    let copy = said
        .iter()
        .find(|(_, m)| m.contains("a copied directory?"))
        .unwrap_or_else(|| panic!("{said:#?}"));
    assert_eq!(copy.0, "lost_evidence");
    assert!(
        copy.1.starts_with("records attempt 2 as ") && copy.1.contains("match1-occ1.2"),
        "{}",
        copy.1
    );
}
