//! The real binary: default command, summary, probe install, exit status and errors.

mod support;

use std::path::Path;

use support::run::dumpview;

#[test]
fn default_command_summarises_every_embedded_pair() {
    let out = dumpview().assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    for pair in dumpview::internals::embedded::example_pairs() {
        assert!(
            text.contains(&format!("== {}:", pair.name)),
            "missing {} in:\n{text}",
            pair.name
        );
    }
    let overflow = dumpview::internals::embedded::example_pairs()
        .into_iter()
        .find(|p| p.name == "llama_fp16_overflow")
        .unwrap();
    let stage = overflow.expected["first_nonfinite"]["b"].as_str().unwrap();
    assert!(
        text.contains(&format!("first non-finite: {stage} ")),
        "{text}"
    );
}

#[test]
fn default_json_lists_the_pairs_and_no_warnings() {
    let out = dumpview()
        .arg("--json")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(value["warnings"], serde_json::json!([]));
    let pairs = value["pairs"].as_array().unwrap();
    assert_eq!(
        pairs.len(),
        dumpview::internals::embedded::example_pairs().len()
    );
    assert_eq!(pairs[0]["sides"].as_array().unwrap().len(), 2);
}

#[test]
fn summary_exits_1_on_a_non_finite_record_and_names_it() {
    let pair = dumpview::internals::embedded::example_pairs()
        .into_iter()
        .find(|p| p.name == "llama_fp16_overflow")
        .unwrap();
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples")
        .join(&pair.name)
        .join(pair.expected["b"].as_str().unwrap());
    let out = dumpview()
        .args(["summary", "--json"])
        .arg(&file)
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        value["windows"][0]["first_nonfinite"]["key"],
        pair.expected["first_nonfinite"]["b"]
    );
}

/// msprobe records no NaN/inf counts: summary says so, as scan does, instead of the made-up
/// "0 NaN, 1 inf" it once printed (its own non-finite type had no `counts_known`).
#[test]
fn summary_of_an_msprobe_dump_says_the_nonfinite_counts_are_unknown() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/msprobe/mlp_nan");
    let out = dumpview()
        .arg("summary")
        .arg(&dir)
        .assert()
        .code(1)
        .get_output()
        .clone();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "first non-finite: Functional.linear.0.forward.input.0#1 (seq 0, NaN/inf present (counts unknown))"
        ),
        "{text}"
    );
    assert!(!text.contains(" NaN, "), "{text}");
    let json = dumpview()
        .args(["summary", "--json"])
        .arg(&dir)
        .assert()
        .code(1)
        .get_output()
        .clone();
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let first = &value["windows"][1]["first_nonfinite"];
    assert_eq!(value["warnings"], serde_json::json!([]));
    assert_eq!(first["key"], "Functional.linear.0.forward.input.0#1");
    assert_eq!(first["counts_known"], false);
    // The scan of the same window names the same record, from the same analysis.
    let scan = dumpview()
        .args(["scan", "--json"])
        .arg(&dir)
        .assert()
        .code(1)
        .get_output()
        .clone();
    let scan: serde_json::Value = serde_json::from_slice(&scan.stdout).unwrap();
    assert_eq!(scan["windows"][1]["first_nonfinite"], *first);
}

#[test]
fn missing_and_malformed_files_exit_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.json");
    let out = dumpview()
        .arg("summary")
        .arg(&missing)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(out).unwrap();
    assert!(err.contains("nope.json: cannot read"), "{err}");

    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        "{\"format\": \"dumpview.manifest\", \"schema_version\": 1, \"records\": [",
    )
    .unwrap();
    let out = dumpview()
        .arg("summary")
        .arg(&bad)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(out).unwrap();
    assert!(err.contains("bad.json: not a valid manifest"), "{err}");
}

/// Issue 31, item 14: `probe --help` lists only what applies to it; the global options stay
/// in the help of the subcommands they apply to, and `probe install --json` is still refused.
#[test]
fn probe_help_leaves_out_the_global_options() {
    for args in [&["probe", "--help"][..], &["probe", "install", "--help"]] {
        let out = dumpview()
            .args(args)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let help = String::from_utf8(out).unwrap();
        for global in [
            "--ssh-command",
            "--cache-dir",
            "--poll",
            "--attempt",
            "--json",
        ] {
            assert!(!help.contains(global), "{args:?} lists {global}:\n{help}");
        }
    }
    let install = String::from_utf8(
        dumpview()
            .args(["probe", "install", "--help"])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone(),
    )
    .unwrap();
    assert!(install.contains("--native"), "{install}");
    let diff = String::from_utf8(
        dumpview()
            .args(["diff", "--help"])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone(),
    )
    .unwrap();
    assert!(
        diff.contains("--ssh-command") && diff.contains("--json"),
        "{diff}"
    );
    let dir = tempfile::tempdir().unwrap();
    let refused = dumpview()
        .args(["probe", "install", "--json"])
        .arg(dir.path())
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8(refused).unwrap().contains("--json"));
}

#[test]
fn probe_install_writes_the_probe_once_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    dumpview()
        .args(["probe", "install"])
        .arg(dir.path())
        .assert()
        .success();
    let written = std::fs::read_to_string(dir.path().join("dump_probe.py")).unwrap();
    let source =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/dump_probe.py"))
            .unwrap();
    assert_eq!(written, source);

    std::fs::write(dir.path().join("dump_probe.py"), "edited").unwrap();
    let out = dumpview()
        .args(["probe", "install"])
        .arg(dir.path())
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8(out).unwrap().contains("already exists"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("dump_probe.py")).unwrap(),
        "edited"
    );
}

#[test]
fn probe_install_writes_the_replay_tool_too_and_an_existing_one_blocks_both() {
    let dir = tempfile::tempdir().unwrap();
    let out = dumpview()
        .args(["probe", "install"])
        .arg(dir.path())
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let stdout = String::from_utf8(out).unwrap();
    assert!(
        stdout.contains("dump_probe.py") && stdout.contains("replay_op.py"),
        "{stdout}"
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("replay_op.py")).unwrap(),
        std::fs::read_to_string(root.join("assets/replay_op.py")).unwrap()
    );

    // Only replay_op.py present: refused, and dump_probe.py is not written either.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("replay_op.py"), "mine").unwrap();
    let out = dumpview()
        .args(["probe", "install"])
        .arg(other.path())
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let stderr = String::from_utf8(out).unwrap();
    assert!(stderr.contains("replay_op.py: already exists"), "{stderr}");
    assert!(!other.path().join("dump_probe.py").exists());
    assert_eq!(
        std::fs::read_to_string(other.path().join("replay_op.py")).unwrap(),
        "mine"
    );
}

fn example(pair: &str, side: &str) -> String {
    format!("assets/examples/{pair}/{side}")
}

/// Runs the binary from the repository root with relative paths, so its output is stable.
fn run_in_repo(args: &[&str]) -> (i32, String, String) {
    let out = dumpview()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn scan_exit_status_follows_the_findings() {
    assert_eq!(
        run_in_repo(&["scan", &example("llama_chunked_prefill", "a")]).0,
        0
    );
    let (code, out, _) = run_in_repo(&["scan", &example("llama_kv_alias", "b")]);
    assert_eq!(code, 1);
    assert!(
        out.contains("storage aliases: 13 groups, 6 with a stride conflict"),
        "{out}"
    );
    let (code, out, _) = run_in_repo(&["scan", &example("llama_fp16_overflow", "b")]);
    assert_eq!(code, 1);
    assert!(out.contains("first non-finite: layers.3.mlp_up#1 (position 74, seq 74): 0 NaN, 4 inf; 45 non-finite records in all"), "{out}");
}

#[test]
fn diff_exit_status_and_text() {
    let (code, out, _) = run_in_repo(&[
        "diff",
        &example("llama_chunked_prefill", "a"),
        &example("llama_chunked_prefill", "b"),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("first divergence: none: every paired record agrees within tolerance"));
    let (code, out, _) = run_in_repo(&[
        "diff",
        &example("llama_eager_vs_graph", "a"),
        &example("llama_eager_vs_graph", "b"),
    ]);
    assert_eq!(
        code, 1,
        "a large drop in records is missing data, something to act on:\n{out}"
    );
    assert!(out.contains(
        "coverage: 8 paired, 111 only in A, 0 only in B (unpaired stages are missing evidence)"
    ));
    assert!(out.contains("MISSING DATA: B holds 8 records against 119."));
    let (code, out, _) = run_in_repo(&[
        "diff",
        &example("llama_kv_alias", "a"),
        &example("llama_kv_alias", "b"),
        "--tol",
        "l2=0.5:0",
    ]);
    assert_eq!(code, 1);
    assert!(
        out.contains("first divergence: layers.0.k_cache_read#1 (position 10, seq 10 / 10)"),
        "{out}"
    );
}

#[test]
fn bad_tolerances_are_usage_errors() {
    let (code, _, err) = run_in_repo(&[
        "diff",
        &example("llama_kv_alias", "a"),
        &example("llama_kv_alias", "b"),
        "--tol",
        "median=1:0",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown statistic \"median\""), "{err}");
    let (code, _, err) = run_in_repo(&["diff", "x", "y", "--rtol=-1"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--rtol and --atol must be non-negative"),
        "{err}"
    );
    let (code, _, err) = run_in_repo(&["vary", &example("llama_kv_alias", "a")]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn report_writes_markdown_and_json_without_overwriting_half_files() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("r.md");
    let json = dir.path().join("r.json");
    for (out, check) in [
        (&md, "# First-mismatch report"),
        (&json, "\"first_divergence\""),
    ] {
        let status = dumpview()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "report",
                &example("llama_fp16_overflow", "a"),
                &example("llama_fp16_overflow", "b"),
                "-o",
            ])
            .arg(out)
            .assert()
            .code(1);
        drop(status);
        let text = std::fs::read_to_string(out).unwrap();
        assert!(text.contains(check), "{text}");
    }
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        value["windows"][0]["first_divergence"]["key"],
        "layers.3.mlp_up#1"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        2,
        "no temporary files left"
    );
}

/// Issue 31, item 9: CSV needs no dataframe library: `report --csv` writes the table in every
/// build, beside the report.
#[test]
fn table_exports_to_csv_in_every_build() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, md) = (dir.path().join("t.csv"), dir.path().join("r.md"));
    let (code, _, err) = run_in_repo(&[
        "report",
        &example("llama_eager_vs_graph", "a"),
        &example("llama_eager_vs_graph", "b"),
        "-o",
        md.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "the graph pair is missing data: {err}");
    assert!(md.is_file());
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 119, "a header and one row per stage");
    assert!(lines[0].starts_with(
        "rank,position,key,status,dtype_a,dtype_b,shape_a,shape_b,max_abs_a,max_abs_b"
    ));
    assert_eq!(lines.iter().filter(|l| l.contains(",only_a,")).count(), 111);
    // Every row has every column (a shape `[1, 256]` is one quoted field).
    let mut reader = csv::Reader::from_path(&csv).unwrap();
    assert_eq!(reader.headers().unwrap().len(), 8 + 6 * 5);
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 119);
    assert!(rows.iter().all(|r| r.len() == 8 + 6 * 5));
    assert_eq!(&rows[1][6], "[1, 256]");
}

/// Without the `export` feature, `--parquet` says how to get it, after the report and the CSV
/// are written: a missing feature never costs the Markdown.
#[cfg(not(feature = "export"))]
#[test]
fn parquet_without_the_feature_says_how_to_get_it_and_keeps_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, md) = (dir.path().join("t.csv"), dir.path().join("r.md"));
    let (code, _, err) = run_in_repo(&[
        "report",
        &example("llama_kv_alias", "a"),
        &example("llama_kv_alias", "b"),
        "-o",
        md.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--parquet",
        "/tmp/never.parquet",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--features export"), "{err}");
    assert!(md.is_file() && csv.is_file());
}

#[cfg(feature = "export")]
#[test]
fn table_exports_to_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let parquet = dir.path().join("t.parquet");
    let (code, _, err) = run_in_repo(&[
        "report",
        &example("llama_eager_vs_graph", "a"),
        &example("llama_eager_vs_graph", "b"),
        "--parquet",
        parquet.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "the graph pair is missing data: {err}");
    let bytes = std::fs::read(&parquet).unwrap();
    assert_eq!(&bytes[..4], b"PAR1");
}

#[test]
fn json_outputs_are_stable() {
    let (_, scan, _) = run_in_repo(&["scan", "--json", &example("llama_kv_alias", "b")]);
    let scan: serde_json::Value = serde_json::from_str(&scan).unwrap();
    // Addresses and storage ids change when the examples are regenerated; the rest must not.
    let mut group = scan["windows"][0]["alias_groups"][0].clone();
    group.as_object_mut().unwrap().remove("storage_ptr");
    group.as_object_mut().unwrap().remove("storage_id");
    insta::assert_json_snapshot!("scan_kv_alias_b_conflicts", group);
    let (_, diff, _) = run_in_repo(&[
        "diff",
        "--json",
        &example("llama_eager_vs_graph", "a"),
        &example("llama_eager_vs_graph", "b"),
    ]);
    let diff: serde_json::Value = serde_json::from_str(&diff).unwrap();
    let w = &diff["diff"]["windows"][0];
    insta::assert_json_snapshot!(
        "diff_eager_vs_graph_summary",
        serde_json::json!({"identity": w["identity"], "missing_data": w["missing_data"], "paired": w["pairs"].as_array().unwrap().iter().map(|p| &p["key"]).collect::<Vec<_>>(), "only_b": w["only_b"], "first_divergence": w["first_divergence"]})
    );
}

/// Issue 11, item 2: an empty manifest in one rank directory of a tree costs that window only;
/// `scan` shows the other ranks, names the file, and exits 1 (lost evidence).
#[test]
fn scan_of_a_tree_with_one_unreadable_rank_shows_the_others_and_names_it() {
    let tree = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples/llama_fp16_overflow/a/rank0/match1-occ1/manifest.json");
    for rank in 0..3 {
        let dir = tree.path().join(format!("rank{rank}/match1-occ1"));
        std::fs::create_dir_all(&dir).unwrap();
        let text = std::fs::read_to_string(&example).unwrap().replacen(
            "\"rank\": 0",
            &format!("\"rank\": {rank}"),
            1,
        );
        std::fs::write(
            dir.join("manifest.json"),
            if rank == 1 { String::new() } else { text },
        )
        .unwrap();
    }
    let out = dumpview()
        .arg("scan")
        .arg(tree.path())
        .assert()
        .code(1)
        .get_output()
        .clone();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stdout.contains("== rank 0,") && stdout.contains("== rank 2,"),
        "{stdout}"
    );
    assert!(!stdout.contains("== rank 1,"), "{stdout}");
    let bad = tree.path().join("rank1/match1-occ1/manifest.json");
    assert!(
        stderr.contains(&format!(
            "UNREADABLE WINDOW {}: not a valid manifest",
            bad.display()
        )),
        "{stderr}"
    );
    // Named on its own, the same file stays an input error.
    dumpview().arg("scan").arg(&bad).assert().code(2);
}

/// Issue 11, items 10 and 13: the tolerance help comes from the rule's constants, and `--json`
/// is refused where there is nothing to say in JSON.
#[test]
fn diff_help_states_the_checksum_defaults_and_json_is_refused_where_meaningless() {
    let help = dumpview()
        .args(["diff", "--help"])
        .assert()
        .success()
        .get_output()
        .clone();
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(
        help.contains(
            "pos_checksum 1e-3, widened to the larger of 2 unit roundoffs of the coarser dtype and 4 \
             times the change the magnitudes show"
        ),
        "{help}"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dumpview()
        .args(["probe", "install", "--json"])
        .arg(dir.path())
        .assert()
        .code(2);
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("--json is not supported"), "{stderr}");
    assert!(!dir.path().join("dump_probe.py").exists());
    dumpview()
        .args(["completions", "bash", "--json"])
        .assert()
        .code(2);
}

/// Issue 11, item 14: one non-finite record is "1 non-finite record".
#[test]
fn one_nonfinite_record_is_singular() {
    let scan = dumpview::model::analysis::scan::WindowScan {
        source: "m.json".into(),
        rank: 0,
        label: "l".into(),
        match_index: 1,
        occurrence: 1,
        records: 3,
        first_nonfinite: Some(dumpview::model::analysis::scan::NonFinite {
            key: "s#1".into(),
            seq: 2,
            position: 2,
            nan_count: 1,
            inf_count: 0,
            counts_known: true,
        }),
        nonfinite_records: 1,
        nonfinite_only_in_padding: 0,
        alias_groups: Vec::new(),
    };
    let text = dumpview::model::present::scan::text(&scan);
    assert!(
        text.contains("1 NaN, 0 inf; 1 non-finite record in all"),
        "{text}"
    );
}

/// Issue 11, item 11: the MISSING DATA advice follows the evidence. Two unrelated captures with
/// no graph records are not told about graph mode; the eager vs graph pair still is.
#[test]
fn missing_data_advice_follows_the_evidence() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/examples");
    let diff_text = |a: &str, b: &str| {
        let out = dumpview()
            .arg("diff")
            .arg(root.join(a))
            .arg(root.join(b))
            .assert()
            .code(1)
            .get_output()
            .clone();
        String::from_utf8(out.stdout).unwrap()
    };
    let text = diff_text("llama_fp16_overflow/a", "minilm_fp32_vs_bf16/a");
    assert!(
        text.contains("MISSING DATA: B holds 39 records against 119."),
        "{text}"
    );
    assert!(!text.contains("graph mode"), "{text}");
    assert!(text.contains("The labels differ"), "{text}");
    let text = diff_text("llama_eager_vs_graph/a", "llama_eager_vs_graph/b");
    assert!(
        text.contains("In graph mode capture() inside the graph"),
        "{text}"
    );
}

/// Issue 11, item 8: `summary` follows the exit rule of `scan`: a manifest cut short (all
/// finite, no conflict) is lost evidence, exit 1, with the warning on stderr.
#[test]
fn summary_of_a_truncated_manifest_exits_1_like_scan() {
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad/truncated_mid_record.json");
    for command in ["summary", "scan"] {
        let out = dumpview()
            .arg(command)
            .arg(&file)
            .assert()
            .code(1)
            .get_output()
            .clone();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains("truncated or damaged"),
            "{command}: {stderr}"
        );
    }
}

/// Issue 11, item 22: `dumpview --rtol 1e-3 A B` was rejected. The workbench takes the diff's
/// tolerance options; without a terminal it answers as `dumpview diff` does with them.
#[test]
fn the_workbench_takes_the_diffs_tolerances() {
    let (a, b) = (
        example("llama_chunked_prefill", "a"),
        example("llama_chunked_prefill", "b"),
    );
    let tight = ["--rtol", "1e-9", "--atol", "0"];
    let workbench: Vec<&str> = tight
        .iter()
        .copied()
        .chain([a.as_str(), b.as_str()])
        .collect();
    let (code, out, err) = run_in_repo(&workbench);
    let diff: Vec<&str> = ["diff", a.as_str(), b.as_str()]
        .into_iter()
        .chain(tight)
        .collect();
    let (diff_code, diff_out, _) = run_in_repo(&diff);
    assert_eq!(
        (code, out.as_str()),
        (diff_code, diff_out.as_str()),
        "{err}"
    );
    assert_eq!(code, 1);
    assert!(
        out.contains("first divergence: layers.0.k_cache_read#1"),
        "{out}"
    );
    // The same pair under the defaults agrees.
    assert_eq!(run_in_repo(&[a.as_str(), b.as_str()]).0, 0);
    // `--tol` too, and its errors are usage errors.
    let (code, out, _) = run_in_repo(&["--tol", "l2=1e-9:0", a.as_str(), b.as_str()]);
    assert_eq!(code, 1, "{out}");
    let (code, _, err) = run_in_repo(&["--tol", "median=1:0", a.as_str(), b.as_str()]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown statistic \"median\""), "{err}");
    // One capture has nothing to compare: refused, not ignored.
    let (code, _, err) = run_in_repo(&["--rtol", "1e-3", a.as_str()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--rtol, --atol and --tol compare two captures: give A and B"),
        "{err}"
    );
    // The embedded demo takes them as well.
    let (code, _, err) = run_in_repo(&["demo", "--rtol", "1e-3"]);
    assert_ne!(code, 2, "{err}");
}

/// With `--json`, an input error is a JSON document too (and exit 2): a script always has
/// something to parse.
#[test]
fn an_input_error_with_json_prints_an_error_document() {
    let out = dumpview()
        .args(["scan", "/nonexistent/dump", "--json"])
        .assert()
        .code(2)
        .get_output()
        .clone();
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        value["error"]
            .as_str()
            .unwrap()
            .starts_with("/nonexistent/dump: "),
        "{value}"
    );
    assert_eq!(value["warnings"], serde_json::json!([]));
    assert!(String::from_utf8_lossy(&out.stderr).contains("dumpview: error: /nonexistent/dump"));
}

/// A usage error with `--json` is the same error document, with clap's message on one line
/// (its usage lines on stderr only); without `--json`, clap's text alone; help is no error.
#[test]
fn a_usage_error_with_json_prints_an_error_document() {
    let out = dumpview()
        .args(["diff", "a.json", "--json"])
        .assert()
        .code(2)
        .get_output()
        .clone();
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        value,
        serde_json::json!({
            "error": "the following required arguments were not provided: <B>",
            "warnings": []
        })
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage: dumpview diff"));
    let out = dumpview().args(["diff", "a.json"]).assert().code(2);
    assert!(out.get_output().stdout.is_empty());
    dumpview()
        .args(["diff", "--help", "--json"])
        .assert()
        .code(0);
}

#[test]
fn a_global_option_may_come_before_the_subcommand_and_workbench_options_may_not() {
    let kv = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/examples/llama_kv_alias");
    // `--json` before `scan` is the same as after it.
    let before = dumpview()
        .arg("--json")
        .arg("scan")
        .arg(kv.join("b"))
        .output()
        .unwrap();
    let after = dumpview()
        .arg("scan")
        .arg(kv.join("b"))
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(before.status.code(), after.status.code());
    assert_eq!(before.stdout, after.stdout);
    let value: serde_json::Value = serde_json::from_slice(&before.stdout).unwrap();
    assert!(value["windows"].is_array(), "{value}");
    // The workbench's --rtol before `diff` would be silently lost: refused, saying where it goes.
    let out = dumpview()
        .args(["--rtol", "1e-3", "diff"])
        .arg(kv.join("a"))
        .arg(kv.join("b"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("give a subcommand's own after its name (`dumpview diff --rtol 1e-3 A B`)"),
        "{stderr}"
    );
}

/// Issue 31, item 10: `diff --json` gives the first divergence's key beside its index, and the
/// tolerances per statistic as an object keyed by the statistic's name.
#[test]
fn diff_json_names_the_first_divergence_and_its_tolerances_by_name() {
    let (code, out, _) = run_in_repo(&[
        "diff",
        "--json",
        &example("llama_fp16_overflow", "a"),
        &example("llama_fp16_overflow", "b"),
    ]);
    assert_eq!(code, 1);
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    let window = &value["diff"]["windows"][0];
    let index = window["first_divergence"].as_u64().unwrap() as usize;
    assert_eq!(
        window["first_divergence_key"],
        window["pairs"][index]["key"]
    );
    assert_eq!(window["first_divergence_key"], "layers.3.mlp_up#1");
    let per_stat = value["diff"]["tolerances"]["per_stat"].as_object().unwrap();
    // (serde_json's map sorts its keys; the document keeps STATS order: test_examples.py.)
    let names: Vec<&str> = per_stat.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["l2", "max", "max_abs", "mean", "min", "pos_checksum"]
    );
    assert_eq!(per_stat["pos_checksum"]["rtol"], 1e-3);
    assert_eq!(per_stat["max_abs"]["atol"], 1e-6);
}

/// Issue 31, item 14: `probe install DIR` makes a missing DIR (and its parents), as `mkdir -p`
/// would; a path that is a file is still refused.
#[test]
fn probe_install_makes_a_missing_directory() {
    let dir = tempfile::tempdir().unwrap();
    let package = dir.path().join("new/pkg");
    dumpview()
        .args(["probe", "install"])
        .arg(&package)
        .assert()
        .success();
    assert!(package.join("dump_probe.py").is_file());
    assert!(package.join("replay_op.py").is_file());
    let file = dir.path().join("a_file");
    std::fs::write(&file, "x").unwrap();
    let out = dumpview()
        .args(["probe", "install"])
        .arg(&file)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8(out).unwrap().contains("not a directory"));
}

/// Issue 31, item 5: a negative tolerance written `--atol -1` (not only `--atol=-1`) reaches
/// dumpview's own check, which says what is wrong, instead of clap's "unexpected argument".
#[test]
fn a_negative_tolerance_is_refused_by_name_in_either_spelling() {
    let (code, _, err) = run_in_repo(&[
        "diff",
        &example("llama_fp16_overflow", "a"),
        &example("llama_fp16_overflow", "b"),
        "--rtol",
        "-1",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--rtol and --atol must be non-negative numbers"),
        "{err}"
    );
    let (code, _, err) = run_in_repo(&[
        "replay",
        "tests/fixtures/replay/dump",
        "--stage",
        "x",
        "--candidate",
        "a",
        "--reference",
        "b",
        "--standard",
        "allclose",
        "--atol",
        "-1",
        "--rtol",
        "0",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--atol and --rtol must be finite, non-negative numbers"),
        "{err}"
    );
}
