//! `dumpview diagnose` end to end: the real binary on committed captures (exit status, JSON,
//! text), the report opening with the diagnosis, and a printed capture command run as printed.

mod support;

use std::path::Path;

use serde_json::Value;

use support::python::{python, repo};
use support::run::{json, text};

fn pair(name: &str) -> [String; 2] {
    ["a", "b"].map(|side| repo(&format!("{name}/{side}")).display().to_string())
}

#[test]
fn kv_alias_json_names_writer_address_and_reader() {
    let [a, b] = pair("assets/examples/llama_kv_alias");
    let (code, doc, _) = json(&["diagnose", &a, &b, "--json"]);
    assert_eq!(code, 1);
    assert_eq!(doc["found"], true);
    let first = &doc["findings"][0];
    assert_eq!(first["rule"], "writer_address_reader");
    let keys: Vec<(&str, &str)> = first["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["role"].as_str().unwrap(), c["key"].as_str().unwrap()))
        .collect();
    assert_eq!(
        keys,
        [
            ("writer", "layers.0.k_cache_write#1"),
            ("reader", "layers.0.k_cache_read#1")
        ]
    );
    assert_eq!(first["address"]["storage_id"], 13);
    assert_eq!(
        first["evidence"][0]["layout"],
        "[12, 2, 64] stride [64, 2048, 1] offset 0"
    );
    assert_eq!(
        first["evidence"][1]["layout"],
        "[12, 2, 64] stride [128, 64, 1] offset 0"
    );
}

#[test]
fn agreeing_pair_says_no_diagnosis_and_exits_0() {
    let [a, b] = pair("assets/examples/llama_chunked_prefill");
    let (code, out, _) = text(&["diagnose", &a, &b]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("Diagnosis: No diagnosis: A and B agree"),
        "{out}"
    );
}

#[test]
fn report_opens_with_the_diagnosis() {
    let [a, b] = pair("assets/examples/llama_fp16_overflow");
    let (_, md, _) = text(&["report", &a, &b]);
    let diagnosis = md.find("## Diagnosis").expect("a Diagnosis section");
    let inputs = md.find("## Inputs").unwrap();
    assert!(diagnosis < inputs, "the diagnosis comes first");
    assert!(
        md.contains("**The numbers first go wrong at `layers.3.mlp_up#1`, the first divergence (non_finite): A's values reach |x| = 8.0959e4 there, beyond float16's largest finite value 65504, so B's float16 overflows.**"),
        "{}",
        &md[diagnosis..inputs]
    );
    let (_, doc, _) = json(&["report", &a, &b, "--json"]);
    assert_eq!(doc["diagnosis"]["findings"][0]["rule"], "origin");
    assert_eq!(
        doc["diagnosis"]["findings"][0]["evidence"][0]["key"],
        "layers.3.mlp_up#1"
    );
}

#[test]
fn diagnose_one_capture_exit_status() {
    let (code, out, _) = text(&[
        "diagnose",
        &repo("tests/fixtures/diagnosis/bad_bytes/b")
            .display()
            .to_string(),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("[bad_bytes_writer]"), "{out}");
    let (code, _, err) = text(&["diagnose", "/nonexistent/dump"]);
    assert_eq!(code, 2, "{err}");
}

/// The capture command the diagnosis prints for the index-stage pair, run as printed, saves
/// the suspect's whole tensor. The pair's recorded `run` names this machine's paths at the
/// time it was made: a copy of B records where this checkout is instead, as a rerun here would.
#[test]
fn next_capture_runs_as_printed() {
    let Some(py) = python() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let b = tmp.path().join("b");
    support::copy_tree(&repo("tests/fixtures/diagnosis/index_suspect/b"), &b);
    let manifest = b.join("rank0/match1-occ1/manifest.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    let run = doc["run"]
        .as_object_mut()
        .expect("the probe recorded the run");
    run.insert("cwd".into(), repo("").display().to_string().into());
    run.insert("executable".into(), py.into());
    let argv = run["argv"].as_array_mut().unwrap();
    let script = Path::new(argv[0].as_str().unwrap())
        .file_name()
        .unwrap()
        .to_owned();
    argv[0] = repo("examples").join(script).display().to_string().into();
    run["env"]["DUMP_PROBE_DIR"] = b.display().to_string().into();
    std::fs::write(&manifest, serde_json::to_vec(&doc).unwrap()).unwrap();

    let a = repo("tests/fixtures/diagnosis/index_suspect/a");
    let (code, d, _) = json(&[
        "diagnose",
        &a.display().to_string(),
        &b.display().to_string(),
        "--json",
    ]);
    assert_eq!(code, 1);
    assert_eq!(d["next"]["step"], "capture");
    let command = d["next"]["commands"][1].as_str().unwrap().to_string();
    assert!(
        command.contains("DUMP_PROBE_TENSOR='^slot_mapping$'"),
        "{command}"
    );
    let status = std::process::Command::new("sh")
        .args(["-c", &command])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let saved = tmp
        .path()
        .join("b-next/rank0/match1-occ1/tensors/slot_mapping#1.safetensors");
    assert!(saved.is_file(), "{command}");
    // The new capture is a dump dumpview reads, with the tensor saved whole.
    let (_, summary, _) = json(&[
        "summary",
        &tmp.path().join("b-next").display().to_string(),
        "--json",
    ]);
    assert_eq!(summary["windows"][0]["saved_tensors"], 1, "{summary}");
    assert_eq!(summary["windows"][0]["records"], 5, "{summary}");
}

/// The cross-fed replay the diagnosis prints for the operator pair runs as printed (from the
/// repository, where its relative paths point) and finds the operators differ.
#[test]
fn next_cross_replay_runs_as_printed() {
    let Some(py) = python() else { return };
    let [a, b] = ["a", "b"].map(|s| format!("tests/fixtures/diagnosis/op_differs/{s}"));
    let (code, d, _) = support::run::json_of(
        support::run::dumpview_in_repo()
            .args(["diagnose", &a, &b, "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(code, 1);
    assert_eq!(d["next"]["step"], "cross_replay");
    let command = d["next"]["commands"][0].as_str().unwrap();
    let words: Vec<&str> = command.split(' ').collect();
    assert_eq!(words[..3], ["dumpview", "replay", "--cross"], "{command}");
    let cache = tempfile::tempdir().unwrap();
    let out = support::run::with_python(cache.path())
        .env("DUMPVIEW_PYTHON", py)
        .args(&words[1..])
        .arg("--json")
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(doc["outcome"], "operator_differs", "{doc}");
}

/// The example pairs record the command that captures each side again (relative to the
/// repository), so the capture the diagnosis prints for them runs from a checkout as printed.
#[test]
fn kv_alias_next_capture_is_the_recorded_command_with_new_settings() {
    let (_, d, _) = support::run::json_of(
        support::run::dumpview_in_repo()
            .args([
                "diagnose",
                "assets/examples/llama_kv_alias/a",
                "assets/examples/llama_kv_alias/b",
                "--json",
            ])
            .output()
            .unwrap(),
    );
    assert_eq!(d["next"]["step"], "capture");
    assert_eq!(
        d["next"]["commands"][0],
        "DUMP_PROBE=1 DUMP_PROBE_DIR=assets/examples/llama_kv_alias/b-next DUMP_PROBE_MATCH=1 \
         DUMP_PROBE_OCCURRENCE=1 DUMP_PROBE_RANKS=0 DUMP_PROBE_ROWS=all \
         DUMP_PROBE_TENSOR='^(layers\\.0\\.k_cache_write|layers\\.0\\.k_cache_read)$' \
         DUMP_PROBE_TENSOR_FORMAT=safetensors .venv/bin/python examples/llama_decoder.py \
         --side llama_kv_alias b"
    );
}

/// A manifest cut short by a killed run: what it holds is diagnosed, the lost evidence is a
/// warning in the JSON and makes the exit status 1, whatever the diagnosis.
#[test]
fn a_truncated_manifest_is_a_warning_and_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let b = tmp.path().join("b");
    support::copy_tree(&repo("assets/examples/llama_chunked_prefill/b"), &b);
    let manifest = b.join("rank0/match1-occ4/manifest.json");
    let bytes = std::fs::read(&manifest).unwrap();
    std::fs::write(&manifest, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let a = repo("assets/examples/llama_chunked_prefill/a");
    let (code, doc, _) = json(&[
        "diagnose",
        &a.display().to_string(),
        &b.display().to_string(),
        "--json",
    ]);
    assert_eq!(code, 1, "{doc}");
    let warnings = doc["warnings"].as_array().expect("a warnings list");
    assert!(!warnings.is_empty(), "{doc}");
    assert!(
        doc.as_object().unwrap().contains_key("next"),
        "next is null, not absent"
    );
}

/// A `run` that does not read is a note naming the file, not silence: the next capture is then
/// given in words.
#[test]
fn a_malformed_run_is_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    let b = tmp.path().join("b");
    support::copy_tree(&repo("tests/fixtures/diagnosis/bad_bytes/b"), &b);
    let manifest = b.join("rank0/match1-occ1/manifest.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    doc["run"] = "oops".into();
    std::fs::write(&manifest, serde_json::to_vec(&doc).unwrap()).unwrap();
    let (code, d, _) = json(&["diagnose", &b.display().to_string(), "--json"]);
    assert_eq!(code, 1);
    let warnings = d["warnings"].to_string();
    assert!(
        warnings.contains("run (the command line) does not read"),
        "{warnings}"
    );
    assert!(warnings.contains("manifest.json"), "{warnings}");
}
