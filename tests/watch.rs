//! `dumpview watch` on a local directory while files land in it (issue 12): the real binary,
//! its JSON events read line by line as a script writes manifests the way the probe does (a
//! temporary file renamed into place), and msprobe rewrites its dump.json (in place, cut short).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use support::watch::Watch;

/// `dumpview watch ARGS` polling every 0.2 s, for at most a minute.
fn start(args: &[&std::ffi::OsStr]) -> Watch {
    let mut all: Vec<&std::ffi::OsStr> = args.to_vec();
    all.extend(["--poll", "0.2", "--timeout", "60"].map(std::ffi::OsStr::new));
    Watch::start(all)
}

fn example(side: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples/llama_fp16_overflow")
        .join(side)
        .join("rank0/match1-occ1/manifest.json")
}

/// Writes `side`'s example manifest as rank `rank` into `root`, as the probe does: a
/// temporary file first, then renamed into place.
fn land(root: &Path, side: &str, rank: u32) {
    let mut manifest: Value =
        serde_json::from_slice(&std::fs::read(example(side)).unwrap()).unwrap();
    manifest["rank"] = rank.into();
    let dir = root.join(format!("rank{rank}/match1-occ1"));
    std::fs::create_dir_all(&dir).unwrap();
    let partial = dir.join(".manifest.json.tmp");
    let text = serde_json::to_vec_pretty(&manifest).unwrap();
    // Half of it first: a reader must not mistake the partial file for a window.
    std::fs::write(&partial, &text[..text.len() / 2]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&partial, &text).unwrap();
    std::fs::rename(&partial, dir.join("manifest.json")).unwrap();
}

fn is(kind: &str) -> impl Fn(&Value) -> bool + '_ {
    move |e| e["kind"] == kind
}

#[test]
fn windows_and_their_first_non_finite_record_appear_as_they_land() {
    let dir = tempfile::tempdir().unwrap();
    let watch = start(&[dir.path().as_os_str()]);
    let connected = watch.next("source", is("source"));
    assert_eq!(connected["state"], "connected");
    assert_eq!(connected["v"], 3);
    land(dir.path(), "a", 0);
    let window = watch.next("window", is("window"));
    assert_eq!(
        (window["rank"].clone(), window["records"].clone()),
        (0.into(), 119.into())
    );
    assert_eq!(window["source"], dir.path().to_str().unwrap());
    assert!(window["ts"].as_f64().unwrap() > 1.7e9);
    // A new rank directory, whose run overflowed.
    land(dir.path(), "b", 1);
    let nonfinite = watch.next("first_nonfinite", |e| {
        e["kind"] == "first_nonfinite" && e.get("cleared").is_none()
    });
    assert_eq!(nonfinite["rank"], 1);
    assert_eq!(nonfinite["stage"], "layers.3.mlp_up#1");
    assert_eq!(nonfinite["inf_count"], 4);
    // The diagnosis of that version follows its findings: rank 1's record is the origin.
    let diagnosis = watch.next("diagnosis", |e| {
        e["kind"] == "diagnosis" && e["found"] == true
    });
    assert_eq!(
        (
            diagnosis["chain"][0]["rank"].clone(),
            diagnosis["chain"][0]["key"].clone()
        ),
        (1.into(), "layers.3.mlp_up#1".into())
    );
    // Nothing repeats while nothing changes: the next events are source or none at all.
    std::thread::sleep(Duration::from_millis(800));
    let repeated: Vec<Value> = watch
        .lines
        .try_iter()
        .filter(|e| e["kind"] != "source")
        .collect();
    assert!(repeated.is_empty(), "{repeated:?}");
    // Replaced in place by the finite run: the finding is cleared, once.
    land(dir.path(), "a", 1);
    let cleared = watch.next("cleared", |e| {
        e["kind"] == "first_nonfinite" && e["rank"] == 1
    });
    assert_eq!(cleared["cleared"], true);
}

#[test]
fn until_finding_stops_at_the_first_finding_with_exit_1_and_vs_names_the_first_divergence() {
    let dir = tempfile::tempdir().unwrap();
    let b = example("b");
    let child = Command::new(support::run::BIN)
        .args([
            "watch",
            dir.path().to_str().unwrap(),
            "--vs",
            b.to_str().unwrap(),
        ])
        .args([
            "--json",
            "--until-finding",
            "--poll",
            "0.2",
            "--timeout",
            "60",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    land(dir.path(), "a", 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let divergence = events
        .iter()
        .find(|e| e["kind"] == "first_divergence")
        .expect("a divergence event");
    // The same first divergence as `dumpview diff` of the two files.
    let diff = Command::new(support::run::BIN)
        .args([
            "diff",
            example("a").to_str().unwrap(),
            b.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    let diff: Value = serde_json::from_slice(&diff.stdout).unwrap();
    let w = &diff["diff"]["windows"][0];
    let first = &w["pairs"][w["first_divergence"].as_u64().unwrap() as usize];
    assert_eq!(divergence["stage"], first["key"]);
    assert_eq!(divergence["verdict"], first["verdict"]);
    assert_eq!(divergence["vs"], b.to_str().unwrap());
}

/// msprobe rewrites dump.json in place (same inode) every 1,000 entries, and a killed run
/// leaves it cut short: what parses is read, with a warning, and read again when it changes.
#[test]
fn an_msprobe_dump_json_rewritten_in_place_and_truncated_is_read_again() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/msprobe/mlp_mix/step0/proc4841");
    let dir = tempfile::tempdir().unwrap();
    let rank = dir.path().join("step0/proc4841");
    std::fs::create_dir_all(&rank).unwrap();
    for name in ["construct.json", "stack.json"] {
        std::fs::copy(fixture.join(name), rank.join(name)).unwrap();
    }
    let full = std::fs::read(fixture.join("dump.json")).unwrap();
    let complete = Command::new(support::run::BIN)
        .args([
            "scan",
            fixture.join("dump.json").to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    let complete: Value = serde_json::from_slice(&complete.stdout).unwrap();
    let records = complete["windows"][0]["records"].as_u64().unwrap();
    // Cut short first, written in place.
    std::fs::write(rank.join("dump.json"), &full[..full.len() * 2 / 3]).unwrap();
    let watch = start(&[dir.path().as_os_str()]);
    // The warning comes first (a refresh's warnings, then its windows and findings).
    let warning = watch.next("warning", is("warning"));
    assert_eq!(warning["warning_kind"], "lost_evidence");
    assert!(
        warning["file"].as_str().unwrap().ends_with("dump.json"),
        "{warning}"
    );
    let partial = watch.next("window", is("window"));
    assert!(partial["records"].as_u64().unwrap() < records, "{partial}");
    // The same file, rewritten whole in place (same inode).
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(rank.join("dump.json"))
        .unwrap();
    file.write_all(&full).unwrap();
    drop(file);
    let whole = watch.next("window", |e| {
        e["kind"] == "window" && e["records"] == records
    });
    assert_eq!(whole["label"], complete["windows"][0]["label"]);
}

#[test]
fn a_source_that_cannot_be_read_at_start_exits_2() {
    let out = Command::new(support::run::BIN)
        .args(["watch", "/nonexistent/dumps", "--json", "--timeout", "5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let event: Value =
        serde_json::from_slice(out.stdout.split(|&b| b == b'\n').next().unwrap()).unwrap();
    assert_eq!(
        (event["kind"].clone(), event["state"].clone()),
        ("source".into(), "lost".into())
    );
}

/// Two runs under one watched directory hold windows alike in rank, label, match, occurrence
/// and attempt: they are two windows (told apart by `file`), each with its own findings.
#[test]
fn two_runs_under_one_directory_are_two_windows() {
    let dir = tempfile::tempdir().unwrap();
    let watch = start(&[dir.path().as_os_str()]);
    watch.next("source", is("source"));
    land(&dir.path().join("run_a"), "a", 0);
    land(&dir.path().join("run_b"), "b", 0);
    let mut files = Vec::new();
    while files.len() < 2 {
        let w = watch.next("window", is("window"));
        files.push(w["file"].as_str().unwrap().to_string());
    }
    files.sort();
    assert!(
        files[0].contains("run_a/") && files[1].contains("run_b/"),
        "{files:?}"
    );
    let nonfinite = watch.next("first_nonfinite", |e| {
        e["kind"] == "first_nonfinite" && e.get("cleared").is_none()
    });
    assert!(
        nonfinite["file"].as_str().unwrap().contains("run_b/"),
        "{nonfinite}"
    );
    // Touching the finite run changes nothing: no event flips.
    std::thread::sleep(Duration::from_millis(600));
    let _ = watch.lines.try_iter().count();
    let a = dir.path().join("run_a/rank0/match1-occ1/manifest.json");
    let bytes = std::fs::read(&a).unwrap();
    std::fs::write(&a, &bytes).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let flips: Vec<Value> = watch
        .lines
        .try_iter()
        .filter(|e| e["kind"] == "first_nonfinite")
        .collect();
    assert!(flips.is_empty(), "{flips:?}");
}

/// A windowed manifest that lands before the tensor files its statistics come from is read
/// again when they arrive: rank 1's non-finite record shows without the manifest changing.
#[test]
fn a_windowed_manifest_landing_before_its_tensors_is_read_again_when_they_arrive() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/windowed/B/l1/rank_1/window_0001");
    let dir = tempfile::tempdir().unwrap();
    let window = dir.path().join("rank_1/window_0001");
    std::fs::create_dir_all(&window).unwrap();
    std::fs::copy(fixture.join("manifest.json"), window.join("manifest.json")).unwrap();
    let watch = start(&[dir.path().as_os_str()]);
    // Its warnings come before the window's event.
    watch.next("a missing tensor's warning", |e| {
        e["kind"] == "warning" && e["warning_kind"] == "lost_evidence"
    });
    let first = watch.next("the window", is("window"));
    assert_eq!(first["records"], 8);
    // The tensors land after the manifest (each file whole, by rename).
    for entry in support::files_under(&fixture) {
        if entry.file_name().unwrap() == "manifest.json" {
            continue;
        }
        let target = window.join(entry.strip_prefix(&fixture).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        let partial = target.with_extension("partial");
        std::fs::copy(&entry, &partial).unwrap();
        std::fs::rename(&partial, &target).unwrap();
    }
    let nonfinite = watch.next("the first non-finite record", |e| {
        e["kind"] == "first_nonfinite" && e.get("cleared").is_none()
    });
    assert_eq!(nonfinite["stage"], "pipeline_mk.out.task1.output.y#1");
}

/// Copies `example`'s `side` window (its manifest and the files beside it) into `root` as
/// rank 0, the manifest last and by rename, as the probe lands it.
fn land_window(root: &Path, example: &str, side: &str) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples")
        .join(example)
        .join(side)
        .join("rank0/match1-occ1");
    let to = root.join("rank0/match1-occ1");
    for file in support::files_under(&from) {
        if file.file_name().unwrap() == "manifest.json" {
            continue;
        }
        let target = to.join(file.strip_prefix(&from).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(&file, &target).unwrap();
    }
    let partial = to.join(".manifest.json.tmp");
    std::fs::copy(from.join("manifest.json"), &partial).unwrap();
    std::fs::rename(&partial, to.join("manifest.json")).unwrap();
}

/// The diagnosis against `--vs` as an event: said when it changes (the kv_alias writer →
/// reader chain when A lands; "No diagnosis" once A is replaced by B's own window), never
/// again while it stays the same, and as one text line without `--json`.
#[test]
fn the_diagnosis_is_an_event_when_it_changes_and_only_then() {
    let dir = tempfile::tempdir().unwrap();
    let b = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/examples/llama_kv_alias/b");
    let watch = start(&[dir.path().as_os_str(), "--vs".as_ref(), b.as_os_str()]);
    watch.next("source", is("source"));
    land_window(dir.path(), "llama_kv_alias", "a");
    let found = watch.next("a diagnosis", |e| {
        e["kind"] == "diagnosis" && e["found"] == true
    });
    assert_eq!(found["v"], 3);
    assert_eq!(found["source"], dir.path().to_str().unwrap());
    assert!(found.get("rank").is_none(), "not a window's event: {found}");
    let conclusion = found["conclusion"].as_str().unwrap();
    assert!(
        conclusion.starts_with("B's `layers.0.k_cache_read#1` (first divergence) reads"),
        "{conclusion}"
    );
    assert_eq!(found["rules"][0], "writer_address_reader");
    let chain: Vec<(String, String, String)> = found["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["side"].as_str().unwrap().to_string(),
                c["key"].as_str().unwrap().to_string(),
                c["role"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        chain[..2],
        [
            (
                "b".into(),
                "layers.0.k_cache_write#1".into(),
                "writer".into()
            ),
            (
                "b".into(),
                "layers.0.k_cache_read#1".into(),
                "reader".into()
            ),
        ]
    );
    assert_eq!(found["next"]["step"], "capture");
    // Nothing repeats while the diagnosis stays the same: the manifest written again.
    std::thread::sleep(Duration::from_millis(600));
    let _ = watch.lines.try_iter().count();
    let manifest = dir.path().join("rank0/match1-occ1/manifest.json");
    let bytes = std::fs::read(&manifest).unwrap();
    std::fs::write(&manifest, &bytes).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let repeated: Vec<Value> = watch
        .lines
        .try_iter()
        .filter(|e| e["kind"] == "diagnosis")
        .collect();
    assert!(repeated.is_empty(), "{repeated:?}");
    // A replaced by B's own window: A and B agree, and the diagnosis says so, once.
    land_window(dir.path(), "llama_kv_alias", "b");
    let none = watch.next("no diagnosis", |e| e["kind"] == "diagnosis");
    assert_eq!(none["found"], false, "{none}");
    assert!(
        none["conclusion"]
            .as_str()
            .unwrap()
            .starts_with("No diagnosis: "),
        "{none}"
    );
    assert_eq!(none["chain"], serde_json::json!([]));
}

#[test]
fn the_diagnosis_is_one_text_line_without_json() {
    let dir = tempfile::tempdir().unwrap();
    land_window(dir.path(), "llama_kv_alias", "a");
    let b = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/examples/llama_kv_alias/b");
    let out = Command::new(support::run::BIN)
        .args([
            "watch",
            dir.path().to_str().unwrap(),
            "--vs",
            b.to_str().unwrap(),
        ])
        .args(["--poll", "0.2", "--timeout", "3"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("] diagnosis: "))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    let prefix = format!(
        "[{}] diagnosis: B's `layers.0.k_cache_read#1` (first divergence) reads",
        dir.path().display()
    );
    assert!(lines[0].starts_with(&prefix), "{}", lines[0]);
    assert!(lines[0].ends_with(" records cited)"), "{}", lines[0]);
}

/// Copies rank `rank`'s window of the single-run fixture `scenario` into `root`, its manifest
/// last and renamed into place.
fn land_rank(root: &Path, scenario: &str, rank: u32) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/single_run")
        .join(scenario)
        .join(format!("rank{rank}/match1-occ1"));
    let to = root.join(format!("rank{rank}/match1-occ1"));
    std::fs::create_dir_all(&to).unwrap();
    for file in support::files_under(&from) {
        if file.file_name().unwrap() != "manifest.json" {
            std::fs::copy(&file, to.join(file.file_name().unwrap())).unwrap();
        }
    }
    let partial = to.join(".manifest.json.tmp");
    std::fs::copy(from.join("manifest.json"), &partial).unwrap();
    std::fs::rename(&partial, to.join("manifest.json")).unwrap();
}

/// A finding from one run is an event once the second rank of the group lands: the capture's
/// `single_run` event (no window key) names the duplicate shards, and it is a finding.
#[test]
fn duplicate_shards_are_a_single_run_event_once_both_ranks_landed() {
    let dir = tempfile::tempdir().unwrap();
    let watch = start(&[dir.path().as_os_str()]);
    watch.next("source", is("source"));
    land_rank(dir.path(), "dup_shard", 0);
    watch.next("rank 0's window", |e| {
        e["kind"] == "window" && e["rank"] == 0
    });
    land_rank(dir.path(), "dup_shard", 1);
    let found = watch.next("single_run", is("single_run"));
    assert_eq!(found["v"], 3);
    assert!(found.get("rank").is_none(), "not a window's event: {found}");
    let findings = found["findings"].as_array().unwrap();
    let stages: Vec<&str> = findings
        .iter()
        .map(|f| f["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        ["layers.0.up.weight#1", "layers.0.up#1", "layers.0.act#1"]
    );
    assert_eq!(findings[0]["finding"], "duplicate_shards");
    assert_eq!(findings[0]["ranks"], serde_json::json!([0, 1]));
}
