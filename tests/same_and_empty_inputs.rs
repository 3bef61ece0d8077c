//! Identical or empty inputs are said, not passed over (issue 11, item 6): the same path as A
//! and B, byte-identical captures, `vary` given one capture three times, two identical
//! captures that are both non-finite, and a manifest with `records: []`.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::run::json as run;

fn example(pair: &str, side: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples")
        .join(pair)
        .join(side)
}

fn notes(json: &Value) -> Vec<String> {
    json["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["kind"] == "note")
        .map(|w| w["message"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_same_path_as_a_and_b_is_a_note_and_a_finite_capture_still_exits_0() {
    let a = example("llama_eager_vs_graph", "a");
    let (code, json, stderr) = run(&[
        "diff".as_ref(),
        a.as_os_str(),
        a.as_os_str(),
        "--json".as_ref(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        notes(&json),
        ["A and B: the same input given twice (one path): every pair agrees by construction"]
    );
    assert!(stderr.contains("the same input given twice"), "{stderr}");
}

#[test]
fn a_byte_identical_copy_is_named_as_identical_records() {
    let a = example("llama_eager_vs_graph", "a");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("rank0/match1-occ2");
    std::fs::create_dir_all(&copy).unwrap();
    // The manifest and the token-row sidecar (rows.f32) its token_rows names.
    for file in ["manifest.json", "rows.f32"] {
        std::fs::copy(a.join("rank0/match1-occ2").join(file), copy.join(file)).unwrap();
    }
    let (code, json, _) = run(&[
        "diff".as_ref(),
        a.as_os_str(),
        dir.path().as_os_str(),
        "--json".as_ref(),
    ]);
    assert_eq!(code, 0);
    let notes = notes(&json);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with("A and B: identical records (1 window(s)"),
        "{notes:?}"
    );
}

#[test]
fn vary_of_one_capture_three_times_names_each_repeat() {
    let a = example("llama_eager_vs_graph", "a");
    let (code, json, _) = run(&[
        "vary".as_ref(),
        a.as_os_str(),
        a.as_os_str(),
        a.as_os_str(),
        "--json".as_ref(),
    ]);
    assert_eq!(code, 0);
    let notes = notes(&json);
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes[0].starts_with("captures 1 and 2: the same input"),
        "{notes:?}"
    );
    assert!(
        notes[1].starts_with("captures 1 and 3: the same input"),
        "{notes:?}"
    );
}

/// Two captures that agree on a NaN are both wrong: the diff names the first non-finite
/// record of each side and exits 1, though every pair agrees.
#[test]
fn two_identical_non_finite_captures_report_their_first_non_finite_record() {
    let b = example("llama_fp16_overflow", "b");
    let (code, json, _) = run(&[
        "diff".as_ref(),
        b.as_os_str(),
        b.as_os_str(),
        "--json".as_ref(),
    ]);
    assert_eq!(code, 1);
    let window = &json["diff"]["windows"][0];
    assert_eq!(window["first_divergence"], Value::Null);
    assert_eq!(window["first_nonfinite_a"]["key"], "layers.3.mlp_up#1");
    assert_eq!(window["first_nonfinite_b"]["key"], "layers.3.mlp_up#1");
    assert_eq!(window["first_nonfinite_b"]["inf_count"], 4);
    let text = support::run::output([std::ffi::OsStr::new("diff"), b.as_os_str(), b.as_os_str()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("first non-finite: layers.3.mlp_up#1 (seq 74, 0 NaN, 4 inf) in both A and B"),
        "{text}"
    );
}

/// `records: []` loses nothing but compares nothing: a note on scan and diff, exit 0.
#[test]
fn a_manifest_with_no_records_is_a_note() {
    let source = example("llama_eager_vs_graph", "a").join("rank0/match1-occ2/manifest.json");
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(source).unwrap()).unwrap();
    manifest["records"] = Value::Array(Vec::new());
    manifest["input_sets"] = Value::Array(Vec::new());
    // No records, no token rows: the probe writes none for a window that captured nothing.
    manifest.as_object_mut().unwrap().remove("token_rows");
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("manifest.json");
    std::fs::write(&empty, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let (code, json, _) = run(&["scan".as_ref(), empty.as_os_str(), "--json".as_ref()]);
    assert_eq!(code, 0);
    assert_eq!(
        notes(&json),
        ["holds no records: nothing was captured in this window, so nothing here can be compared"]
    );
    let other = example("llama_eager_vs_graph", "b");
    let (code, json, _) = run(&[
        "diff".as_ref(),
        empty.as_os_str(),
        other.as_os_str(),
        "--json".as_ref(),
    ]);
    assert_eq!(notes(&json).len(), 1);
    // 0 records against 119 is missing data: a finding, as before.
    assert_eq!(code, 1);
}
