//! `dumpview tensors` through the real binary on the saved tensors of the example dumps:
//! exit status, text, JSON values, and errors that name the file.

mod support;

use serde_json::Value;
use support::run::text as dumpview;

const FP16: &str = "assets/examples/llama_fp16_overflow";

fn saved(side: &str, stage: &str) -> String {
    format!(
        "{}/{FP16}/{side}/rank0/match1-occ1/tensors/{stage}.safetensors",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn overflowing_stage_shows_where_fp16_went_infinite() {
    let (a, b) = (
        saved("a", "layers.3.mlp_up#1"),
        saved("b", "layers.3.mlp_up#1"),
    );
    let (code, out, _) = dumpview(&["tensors", &a, &b, "--cast", "float32", "--json"]);
    assert_eq!(code, 1);
    let json: Value = serde_json::from_str(&out).unwrap();
    let m = &json["pairs"][0]["metrics"];
    assert_eq!(json["pairs"][0]["key"], "layers.3.mlp_up#1");
    assert_eq!(m["dtype_a"], "float32");
    assert_eq!(m["dtype_b"], "float16");
    assert_eq!(m["compared_as"], "float32");
    assert_eq!(m["shape"], serde_json::json!([8, 688]));
    // fp32 -80958.8 became -inf in fp16: the first position whose class differs.
    let nf = &m["nonfinite"];
    assert_eq!(nf["neginf_b"], 4);
    assert_eq!(nf["neginf_a"], 0);
    assert_eq!(nf["positions_agree"], false);
    assert_eq!(
        nf["first_disagreement"]["coords"],
        serde_json::json!([0, 100])
    );
    assert_eq!(nf["first_disagreement"]["b"], "-inf");
    assert!((nf["first_disagreement"]["a"].as_f64().unwrap() + 80958.8046875).abs() < 1e-9);
    assert_eq!(m["max_abs_diff_at"]["coords"], serde_json::json!([5, 100]));
    assert!((m["max_abs_diff"].as_f64().unwrap() - 127.91015625).abs() < 1e-12);
    assert_eq!(m["histogram"]["nonfinite"], 4);
    assert_eq!(m["finite_pairs"], 8 * 688 - 4);
    assert_eq!(m["allclose"], false);
}

/// One behaviour everywhere (issue 11, item 9): without `--cast` a float32/float16 pair is
/// compared losslessly as float64 with ULPs counted in float16, the same numbers as `--cast
/// float64` and as the workbench's `t` and the report (which call `compare_saved`).
#[test]
fn a_precision_change_pair_compares_losslessly_and_counts_ulps_in_the_coarser_dtype() {
    let (a, b) = (
        saved("a", "layers.3.mlp_up#1"),
        saved("b", "layers.3.mlp_up#1"),
    );
    let (code, out, _) = dumpview(&["tensors", &a, &b, "--json"]);
    assert_eq!(code, 1);
    let json: Value = serde_json::from_str(&out).unwrap();
    let m = &json["pairs"][0]["metrics"];
    assert_eq!(m["compared_as"], "float64");
    assert_eq!(m["ulp_dtype"], "float16");
    let (_, cast64, _) = dumpview(&["tensors", &a, &b, "--cast", "float64", "--json"]);
    let cast64: Value = serde_json::from_str(&cast64).unwrap();
    assert_eq!(cast64["pairs"][0]["metrics"]["max_ulp"], m["max_ulp"]);
    assert_eq!(cast64["pairs"][0]["metrics"]["ulp_dtype"], "float16");
    let saved = dumpview::model::tensor::pairing::compare_saved(
        std::path::Path::new(&a),
        std::path::Path::new(&b),
        &Default::default(),
    )
    .unwrap();
    let workbench = saved.pairs[0].metrics.as_ref().unwrap();
    assert_eq!(Some(workbench.max_ulp.unwrap()), m["max_ulp"].as_u64());
    assert_eq!(m["max_ulp"], 7015);
    assert_eq!(json["warnings"], serde_json::json!([]));
}

#[test]
fn a_file_against_itself_is_close_and_exits_0() {
    let a = saved("a", "logits#1");
    let (code, out, _) = dumpview(&["tensors", &a, &a, "--atol", "0", "--rtol", "0"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("allclose        yes"), "{out}");
    assert!(out.contains("1 of 1 compared pair close"), "{out}");
}

#[test]
fn probe_input_sets_compare_argument_by_argument() {
    let dir = format!(
        "{}/assets/examples/llama_chunked_prefill",
        env!("CARGO_MANIFEST_DIR")
    );
    let a = format!("{dir}/a/rank0/match1-occ2/inputs/layers.0.rope#1.pt");
    let b = format!("{dir}/b/rank0/match1-occ4/inputs/layers.0.rope#1.pt");
    let (code, out, err) = dumpview(&["tensors", &a, &b, "--json"]);
    assert_ne!(code, 2, "{err}");
    let json: Value = serde_json::from_str(&out).unwrap();
    let keys: Vec<&str> = json["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["q", "k", "cos", "sin", "positions"]);
    let (code, out, _) = dumpview(&["tensors", &a, &b, "--key", "positions", "--json"]);
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["pairs"].as_array().unwrap().len(), 1);
    assert_eq!(json["pairs"][0]["metrics"]["dtype_a"], "int64");
    assert!(code == 0 || code == 1);
}

#[test]
fn unreadable_inputs_exit_2_naming_the_file() {
    let manifest = format!(
        "{}/{FP16}/a/rank0/match1-occ1/manifest.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let a = saved("a", "logits#1");
    let (code, _, err) = dumpview(&["tensors", &manifest, &a]);
    assert_eq!(code, 2);
    assert!(err.contains("manifest.json"), "{err}");
    assert!(err.contains("not a torch.save archive"), "{err}");
    let (code, _, err) = dumpview(&["tensors", &a, "/nonexistent/b.pt"]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent/b.pt: cannot open"), "{err}");
    let (code, _, err) = dumpview(&["tensors", &a, &a, "--key", "nope"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no tensor \"nope\"; it holds logits#1"),
        "{err}"
    );
    let (code, _, err) = dumpview(&["tensors", &a, &a, "--cast", "float7"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown dtype"), "{err}");
    let (code, _, err) = dumpview(&["tensors", &a, &a, "--atol=-1"]);
    assert_eq!(code, 2);
    assert!(err.contains("non-negative"), "{err}");
}

/// The comparison announces its total before it starts, so a watcher (the workbench gauge)
/// needs no second look at the files; at the end every element is done.
#[test]
fn progress_total_is_set_by_the_comparison() {
    use dumpview::model::tensor::metrics::CompareProgress as Progress;
    use std::sync::atomic::Ordering;
    let (a, b) = (
        saved("a", "layers.3.mlp_up#1"),
        saved("b", "layers.3.mlp_up#1"),
    );
    let progress = Progress::default();
    dumpview::model::tensor::pairing::compare_saved(a.as_ref(), b.as_ref(), &progress).unwrap();
    assert_eq!(progress.total.load(Ordering::Relaxed), 8 * 688);
    assert_eq!(progress.done.load(Ordering::Relaxed), 8 * 688);
}

/// A FIFO is not opened (opening it would wait for a writer forever): a tensor file, and a
/// dump.json given by name, are refused at once with exit 2.
#[cfg(unix)]
#[test]
fn fifos_are_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["x.pt", "dump.json"] {
        let fifo = dir.path().join(name);
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("SKIPPED: mkfifo unavailable");
            return;
        }
    }
    let pt = dir.path().join("x.pt").display().to_string();
    let (code, _, err) = dumpview(&["tensors", &pt, &pt]);
    assert_eq!(code, 2);
    assert!(err.contains("x.pt: not a regular file"), "{err}");
    let dump = dir.path().join("dump.json").display().to_string();
    let (code, _, err) = dumpview(&["scan", &dump]);
    assert_eq!(code, 2);
    assert!(err.contains("not a regular file"), "{err}");
    // Found by a directory search, it is skipped unopened, and the error names it.
    let searched = dir.path().display().to_string();
    let (code, _, err) = dumpview(&["scan", &searched]);
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!(
            "{dump} has a dump file's name and is not a regular file (a FIFO, socket or device): skipped"
        )),
        "{err}"
    );
}
