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
    assert!(
        err.contains("/nonexistent/b.pt: no such file or directory"),
        "{err}"
    );
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

/// Writes a safetensors file of float32 tensors, each `(key, shape, values)`.
fn write_safetensors(path: &std::path::Path, tensors: &[(&str, &[usize], &[f32])]) {
    let mut header = String::from("{");
    let mut data = Vec::new();
    for (i, (key, shape, values)) in tensors.iter().enumerate() {
        let start = data.len();
        for v in *values {
            data.extend_from_slice(&v.to_le_bytes());
        }
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            r#""{key}":{{"dtype":"F32","shape":{shape:?},"data_offsets":[{start},{}]}}"#,
            data.len()
        ));
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(&data);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tensors")
        .join(name)
}

fn copy_to(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(from, to).unwrap();
}

/// Two trees holding every case: a close pair (a real torch.save file on both sides), a
/// pair that is not close, a key only one file holds, a file only in A, a file only in B, a
/// damaged file, and a file that is no tensor file (never listed).
fn two_trees() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    copy_to(&fixture("state_dict.pt"), &a.join("close/model.pt"));
    copy_to(&fixture("state_dict.pt"), &b.join("close/model.pt"));
    write_safetensors(
        &a.join("sub/far.safetensors"),
        &[("x", &[2, 2], &[1.0, 2.0, 3.0, 4.0])],
    );
    write_safetensors(
        &b.join("sub/far.safetensors"),
        &[("x", &[2, 2], &[1.0, 2.0, 3.0, 5.0])],
    );
    write_safetensors(
        &a.join("keys.safetensors"),
        &[("x", &[2], &[1.0, 2.0]), ("y", &[2], &[3.0, 4.0])],
    );
    write_safetensors(&b.join("keys.safetensors"), &[("x", &[2], &[1.0, 2.0])]);
    copy_to(&fixture("single.pt"), &a.join("only_a.pt"));
    copy_to(&fixture("single.pt"), &b.join("deeper/only_b.pth"));
    let whole = std::fs::read(fixture("single.pt")).unwrap();
    std::fs::write(a.join("damaged.pt"), &whole[..whole.len() / 2]).unwrap();
    copy_to(&fixture("single.pt"), &b.join("damaged.pt"));
    std::fs::write(a.join("notes.txt"), "not a tensor").unwrap();
    std::fs::write(b.join("notes.txt"), "not a tensor either").unwrap();
    dir
}

/// `dumpview tensors DIR DIR` (issue 31, item 11): every file both trees hold, by relative
/// path, one row per key, in relative path order; the files of one side only; exit 1.
#[test]
fn two_directories_compare_every_file_by_relative_path() {
    let dir = two_trees();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let (code, out, err) = dumpview(&["tensors", a, b, "--json"]);
    assert_eq!(code, 1, "{err}");
    let json: Value = serde_json::from_str(&out).unwrap();
    let rows: Vec<(String, String, String)> = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().to_string(),
                r["key"].as_str().unwrap_or("-").to_string(),
                r["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected = [
        ("close/model.pt", "0.weight", "close"),
        ("close/model.pt", "0.bias", "close"),
        ("close/model.pt", "2.weight", "close"),
        ("close/model.pt", "2.bias", "close"),
        ("damaged.pt", "-", "unreadable"),
        ("keys.safetensors", "x", "close"),
        ("keys.safetensors", "y", "only_in_a"),
        ("sub/far.safetensors", "x", "not_close"),
    ];
    let expected: Vec<(String, String, String)> = expected
        .iter()
        .map(|(p, k, v)| (p.to_string(), k.to_string(), v.to_string()))
        .collect();
    assert_eq!(rows, expected, "{out}");
    assert_eq!(json["only_a"], serde_json::json!(["only_a.pt"]));
    assert_eq!(json["only_b"], serde_json::json!(["deeper/only_b.pth"]));
    assert_eq!(json["all_close"], false);
    assert_eq!(json["warnings"], serde_json::json!([]));
    let counts = &json["counts"];
    assert_eq!(counts["files_paired"], 4);
    assert_eq!(counts["close"], 5);
    assert_eq!(counts["not_close"], 1);
    assert_eq!(counts["keys_only_in_a"], 1);
    assert_eq!(counts["unreadable"], 1);
    assert_eq!(counts["files_only_in_a"], 1);
    assert_eq!(counts["files_only_in_b"], 1);
    // The not-close pair: |5 - 4| = 1 at [1, 1]; every value exact in float32.
    let far = &json["rows"][7]["metrics"];
    assert_eq!(far["max_abs_diff"], 1.0);
    assert_eq!(far["max_abs_diff_at"]["coords"], serde_json::json!([1, 1]));
    assert_eq!(far["mismatches"], 1);
    let rel_l2 = far["rel_l2"].as_f64().unwrap();
    assert!((rel_l2 - 1.0 / 39f64.sqrt()).abs() < 1e-12, "{rel_l2}");
    let cosine = far["cosine"].as_f64().unwrap();
    assert!((cosine - 34.0 / 1170f64.sqrt()).abs() < 1e-12, "{cosine}");
    let damaged = &json["rows"][4];
    assert!(damaged["key"].is_null());
    assert!(
        damaged["error"].as_str().unwrap().contains("damaged.pt"),
        "{damaged}"
    );

    let (code, text, _) = dumpview(&["tensors", a, b]);
    assert_eq!(code, 1);
    // A table line with its runs of spaces made one.
    let line = |start: &str| {
        text.lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start:?} in\n{text}"))
    };
    assert!(
        line("path").starts_with("path key dtype shape verdict max_abs_diff rel_l2 cosine"),
        "{text}"
    );
    assert!(
        line("sub/far.safetensors")
            .starts_with("sub/far.safetensors x float32 [2, 2] NOT CLOSE 1 "),
        "{text}"
    );
    assert_eq!(
        line("keys.safetensors y"),
        "keys.safetensors y – – only in A – – –"
    );
    assert_eq!(line("damaged.pt"), "damaged.pt – – – unreadable – – –");
    assert!(
        text.contains("\nfiles only in A (1):\n  only_a.pt\n"),
        "{text}"
    );
    assert!(
        text.contains("\nfiles only in B (1):\n  deeper/only_b.pth\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "4 files paired: 5 of 6 compared keys close, 0 not compared, 1 key in one file only, 1 unreadable; 1 file only in A, 1 only in B"
        ),
        "{text}"
    );
    assert!(!text.contains("notes.txt"), "{text}");
}

/// Two trees whose every file pairs and every key is close exit 0; `--key` compares one key
/// within each file.
#[test]
fn close_trees_exit_0_and_key_selects_within_each_file() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for side in [&a, &b] {
        copy_to(&fixture("state_dict.pt"), &side.join("m/model.pt"));
        copy_to(&fixture("nested.pt"), &side.join("nested.pt"));
    }
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let (code, out, err) = dumpview(&["tensors", a, b]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, _) = dumpview(&["tensors", a, b, "--key", "0.bias", "--json"]);
    assert_eq!(code, 0, "{out}");
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["rows"].as_array().unwrap().len(), 1, "{out}");
    assert_eq!(json["rows"][0]["path"], "m/model.pt");
    assert_eq!(json["rows"][0]["key"], "0.bias");
    assert_eq!(json["counts"]["files_without_key"], 1);
    let (code, _, err) = dumpview(&["tensors", a, b, "--key", "nope"]);
    assert_eq!(code, 2);
    assert!(err.contains("holds a tensor \"nope\""), "{err}");
    // --max-elements holds in every file: the 12-element weight is refused, not compared.
    let args = [
        "tensors",
        a,
        b,
        "--key",
        "0.weight",
        "--max-elements",
        "11",
        "--json",
    ];
    let (code, out, _) = dumpview(&args);
    assert_eq!(code, 1, "{out}");
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["rows"][0]["verdict"], "not_compared");
    assert!(
        json["rows"][0]["error"]
            .as_str()
            .unwrap()
            .contains("12 elements exceed the budget of 11"),
        "{out}"
    );
}

/// A directory against a file is refused naming both; trees without a tensor file too.
#[test]
fn a_directory_against_a_file_is_an_error_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let file = fixture("single.pt");
    let (d, f) = (dir.path().to_str().unwrap(), file.to_str().unwrap());
    for args in [["tensors", d, f], ["tensors", f, d]] {
        let (code, _, err) = dumpview(&args);
        assert_eq!(code, 2);
        assert!(
            err.contains(&format!("{d} is a directory and {f} is not")),
            "{err}"
        );
    }
    let (code, _, err) = dumpview(&["tensors", d, d]);
    assert_eq!(code, 2);
    assert!(err.contains("holds a tensor file"), "{err}");
}

/// A link out of the tree is not followed: listed as not walked, a `lost_evidence` warning,
/// exit 1; a link to a file inside the tree is compared under its own path.
#[cfg(unix)]
#[test]
fn links_out_of_a_tree_are_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for side in [&a, &b] {
        copy_to(&fixture("single.pt"), &side.join("x.pt"));
        std::os::unix::fs::symlink("x.pt", side.join("alias.pt")).unwrap();
    }
    std::os::unix::fs::symlink(fixture("single.pt"), a.join("outside.pt")).unwrap();
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let (code, out, _) = dumpview(&["tensors", a, b, "--json"]);
    assert_eq!(code, 1, "{out}");
    let json: Value = serde_json::from_str(&out).unwrap();
    let paths: Vec<&str> = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["alias.pt", "x.pt"]);
    assert_eq!(json["only_a"], serde_json::json!([]));
    assert_eq!(json["skipped"][0]["path"], "outside.pt");
    assert_eq!(json["skipped"][0]["side"], "a");
    assert_eq!(json["warnings"][0]["kind"], "lost_evidence");
}

/// `report` compares every saved pair of matched records (issue 31, item 11), the first
/// divergence's first; a budget too small for the rest lists what it left out.
#[test]
fn report_compares_every_saved_pair_within_the_tensor_budget() {
    let dir = format!("{}/{FP16}", env!("CARGO_MANIFEST_DIR"));
    let (a, b) = (format!("{dir}/a"), format!("{dir}/b"));
    let stages = |json: &Value| -> Vec<String> {
        json["tensor_comparisons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["stage"].as_str().unwrap().to_string())
            .collect()
    };
    let (_, out, err) = dumpview(&["report", &a, &b, "--json"]);
    let json: Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{err}"));
    assert_eq!(stages(&json), ["layers.3.mlp_up#1", "logits#1"]);
    assert_eq!(json["tensor_budget"]["budget_bytes"], 1u64 << 30);
    assert_eq!(json["tensor_budget"]["left_out"], serde_json::json!([]));

    // 1 KiB: less than the first divergence's own files, which are compared all the same.
    let (code, out, _) = dumpview(&["report", &a, &b, "--json", "--tensor-budget", "1K"]);
    assert_eq!(code, 1);
    let json: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(stages(&json), ["layers.3.mlp_up#1"]);
    let budget = &json["tensor_budget"];
    assert_eq!(budget["budget_bytes"], 1024);
    let sizes: u64 = ["a", "b"]
        .iter()
        .map(|side| {
            std::fs::metadata(saved(side, "layers.3.mlp_up#1"))
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(budget["bytes_compared"], sizes);
    assert_eq!(budget["left_out"].as_array().unwrap().len(), 1);
    assert_eq!(budget["left_out"][0]["stage"], "logits#1");
    assert_eq!(budget["left_out"][0]["rank"], 0);

    let (_, md, _) = dumpview(&["report", &a, &b, "--tensor-budget", "1K"]);
    let section = &md[md.find("## Tensor comparisons").expect(&md)..];
    assert!(
        section.contains(
            "Left out for the tensor budget (1 KiB): 1 pair not compared (give a larger `--tensor-budget` to compare them):"
        ),
        "{section}"
    );
    assert!(section.contains("- rank 0: `logits#1` (A: "), "{section}");
    assert!(
        section.contains("| 0 | `layers.3.mlp_up#1` | `layers.3.mlp_up#1` | **not close** |"),
        "{section}"
    );
    assert!(!section.contains("### Rank 0: `logits#1`"), "{section}");
}
