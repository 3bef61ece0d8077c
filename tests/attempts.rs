//! Re-runs into one dump directory (issue 11, item 4): attempt 1 is `match1-occ1`, attempt N
//! `match1-occ1.N`; every command uses the newest attempt and says so, `--attempt N` (both
//! sides) and `--attempt-a/-b N` pick one, and the workbench header shows it.

mod support;

use std::path::{Path, PathBuf};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::Value;

use dumpview::internals::app::App;
use dumpview::internals::runtime::load;
use dumpview::model::ingest::AttemptChoice;
use support::run::json as dumpview;

const PAIR: &str = "llama_fp16_overflow";

fn example_manifest(side: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples")
        .join(PAIR)
        .join(side)
        .join("rank0/match1-occ1/manifest.json")
}

/// Puts example side `side`'s window into `window` (created) as a probe written before the
/// manifest's `attempt` field wrote it: the manifest without its `"attempt"` line, so the
/// attempt comes from the directory name, and the token-row sidecar `rows.f32` it names.
fn place_without_attempt(side: &str, window: &Path) {
    std::fs::create_dir_all(window).unwrap();
    let manifest = std::fs::read_to_string(example_manifest(side)).unwrap();
    let kept: Vec<&str> = manifest
        .split('\n')
        .filter(|line| !line.starts_with(" \"attempt\": "))
        .collect();
    assert_eq!(
        kept.len() + 1,
        manifest.split('\n').count(),
        "one attempt line"
    );
    std::fs::write(window.join("manifest.json"), kept.join("\n")).unwrap();
    std::fs::copy(
        example_manifest(side).with_file_name("rows.f32"),
        window.join("rows.f32"),
    )
    .unwrap();
}

/// A dump directory re-run into: attempt 1 is example side `a` (finite), attempt 2 side `b`
/// (float16, overflows). The manifests are made older ones without an `attempt` field, so the
/// attempts come from the directory names, as for dumps written before the field existed.
fn rerun_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, side) in [("match1-occ1", "a"), ("match1-occ1.2", "b")] {
        place_without_attempt(side, &dir.path().join("rank0").join(name));
    }
    dir
}

fn notes(json: &Value) -> Vec<&str> {
    json["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["kind"] == "note")
        .map(|w| w["message"].as_str().unwrap())
        .collect()
}

#[test]
fn the_newest_attempt_is_used_and_the_older_one_named() {
    let dir = rerun_dir();
    let path = dir.path().to_str().unwrap();
    let (code, json, _) = dumpview(&["scan", path, "--json"]);
    let windows = json["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 1);
    assert!(
        windows[0]["source"]
            .as_str()
            .unwrap()
            .ends_with("match1-occ1.2/manifest.json")
    );
    // Attempt 2 is the float16 run: its first non-finite record is found (exit 1).
    assert_eq!(windows[0]["first_nonfinite"]["key"], "layers.3.mlp_up#1");
    assert_eq!(code, 1);
    assert_eq!(
        notes(&json),
        ["attempt 2 used (the newest); finished attempt 1 left out (--attempt N picks one)"]
    );
}

#[test]
fn attempt_picks_one_on_both_sides_and_attempt_a_b_per_side() {
    let dir = rerun_dir();
    let path = dir.path().to_str().unwrap();
    let (code, json, _) = dumpview(&["scan", path, "--attempt", "1", "--json"]);
    assert_eq!(code, 0, "attempt 1 is the finite run");
    assert!(
        json["windows"][0]["source"]
            .as_str()
            .unwrap()
            .ends_with("match1-occ1/manifest.json")
    );
    assert_eq!(
        notes(&json),
        [
            "attempt 1 used (as --attempt asked); finished attempt 2 left out (--attempt N picks one)"
        ]
    );
    // The re-run against the first run: the example's own answer, from one directory.
    let (_, json, _) = dumpview(&[
        "diff",
        path,
        path,
        "--attempt-a",
        "1",
        "--attempt-b",
        "2",
        "--json",
    ]);
    let (_, direct, _) = dumpview(&[
        "diff",
        example_manifest("a").to_str().unwrap(),
        example_manifest("b").to_str().unwrap(),
        "--json",
    ]);
    let first = |j: &Value| {
        let w = &j["diff"]["windows"][0];
        w["pairs"][w["first_divergence"].as_u64().unwrap() as usize]["key"].clone()
    };
    assert_eq!(first(&json), first(&direct));
    // One path at two attempts is two inputs: no "same input" note.
    assert!(
        notes(&json).iter().all(|n| !n.contains("same input")),
        "{:?}",
        notes(&json)
    );
    assert_eq!(json["diff"]["windows"][0]["a"]["attempt"], 1);
    assert_eq!(json["diff"]["windows"][0]["b"]["attempt"], 2);
    // --attempt sets both sides; --attempt-b overrides it for B.
    let (_, json, _) = dumpview(&[
        "diff",
        path,
        path,
        "--attempt",
        "1",
        "--attempt-b",
        "2",
        "--json",
    ]);
    assert_eq!(json["diff"]["windows"][0]["a"]["attempt"], 1);
    assert_eq!(json["diff"]["windows"][0]["b"]["attempt"], 2);
}

#[test]
fn an_attempt_that_does_not_exist_is_an_error_listing_those_that_do() {
    let dir = rerun_dir();
    let (code, _, stderr) = dumpview(&["scan", dir.path().to_str().unwrap(), "--attempt", "3"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--attempt 3: rank 0 match 1 occurrence 1 has attempts 1, 2"),
        "{stderr}"
    );
    let (code, _, stderr) = dumpview(&["scan", dir.path().to_str().unwrap(), "--attempt", "0"]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn the_workbench_header_shows_the_attempt() {
    let dir = rerun_dir();
    let session = load::open_with(
        dir.path(),
        None,
        [AttemptChoice::Newest; 2],
        &Default::default(),
        &mut |_| {},
    )
    .unwrap();
    let app = App::new(session, false);
    let mut terminal = Terminal::new(TestBackend::new(140, 30)).unwrap();
    terminal
        .draw(|frame| dumpview::internals::ui::draw(frame, &app))
        .unwrap();
    let buffer = terminal.backend().buffer();
    let line: String = (0..buffer.area.width)
        .map(|x| buffer[(x, 1)].symbol().to_string())
        .collect();
    assert!(line.contains("(match 1, call 1, attempt 2)"), "{line}");
}

#[test]
fn cases_plan_takes_the_attempt_asked_for() {
    // The KV example's window (it holds input sets) run twice into one directory.
    let dump = tempfile::tempdir().unwrap();
    let window = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples/llama_kv_alias/a/rank0/match1-occ1");
    for name in ["match1-occ1", "match1-occ1.2"] {
        let to = dump.path().join("rank0").join(name);
        for file in [
            "manifest.json",
            "rows.f32",
            "inputs/layers.0.input_norm#1.pt",
        ] {
            std::fs::create_dir_all(to.join(file).parent().unwrap()).unwrap();
            std::fs::copy(window.join(file), to.join(file)).unwrap();
        }
        // The manifest says attempt 1; written before that field, the directory name decides.
        let manifest = to.join("manifest.json");
        let text = std::fs::read_to_string(&manifest).unwrap();
        assert!(text.contains("\n \"attempt\": 1,\n"));
        std::fs::write(&manifest, text.replace("\n \"attempt\": 1,\n", "\n")).unwrap();
    }
    let cases = tempfile::tempdir().unwrap();
    let plan = |name: &str, attempt: &[&str]| {
        let cases_dir = cases.path().display().to_string();
        let from = dump.path().display().to_string();
        let mut args = vec![
            "cases",
            "--cases-dir",
            &cases_dir,
            "plan",
            name,
            "--from",
            &from,
            "--stage",
            "layers.0.input_norm#1",
            "--candidate",
            "builtin:rms_norm",
            "--reference",
            "builtin:rms_norm",
            "--axis",
            "dtype=float16",
            "--json",
        ];
        args.extend_from_slice(attempt);
        let (code, json, stderr) = dumpview(&args);
        assert_eq!(code, 0, "{stderr}");
        json["window"].as_str().unwrap().to_string()
    };
    assert_eq!(plan("newest", &[]), "match1-occ1.2");
    assert_eq!(plan("first", &["--attempt", "1"]), "match1-occ1");
    assert_eq!(plan("first_a", &["--attempt-a", "1"]), "match1-occ1");
}

/// A re-run whose first attempt never finished: `match1-occ1` is the directory a killed run
/// claimed and left empty (the probe makes it with `mkdir` before writing into it), attempt 2
/// is example side `b`.
fn unfinished_first_attempt() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("rank0/match1-occ1")).unwrap();
    place_without_attempt("b", &dir.path().join("rank0/match1-occ1.2"));
    dir
}

#[test]
fn an_attempt_without_a_manifest_is_an_error_not_attempt_2() {
    let dir = unfinished_first_attempt();
    let path = dir.path().to_str().unwrap();
    let (code, json, stderr) = dumpview(&["scan", path, "--attempt", "1", "--json"]);
    assert_eq!(code, 2, "{stderr}");
    let first = dir.path().join("rank0/match1-occ1");
    assert_eq!(
        json["error"],
        format!(
            "{}: --attempt 1: rank 0 match 1 occurrence 1 has attempts 1, 2 (finished: 2; \
             unfinished, without manifest.json: 1); attempt 1 ({}) is unfinished: the run \
             stopped before finish(), so it has no statistics to use (its input sets, if any, \
             replay with `dumpview replay`)",
            dir.path().join("rank0").display(),
            first.display()
        )
    );
    // The default keeps the newest finished attempt, and says what the empty one is.
    let (code, json, _) = dumpview(&["scan", path, "--json"]);
    assert_eq!(code, 1, "attempt 2 is the float16 run that overflows");
    assert!(
        json["windows"][0]["source"]
            .as_str()
            .unwrap()
            .ends_with("match1-occ1.2/manifest.json")
    );
    assert_eq!(
        notes(&json),
        [
            "UNFINISHED WINDOW: no manifest.json (the run stopped before finish(), or is still \
          inside the window), so no statistics; it holds no file: the run claimed the directory \
          and stopped before writing one, so there is nothing to read or replay",
            "attempt 2 used (the newest); unfinished attempt 1 (no manifest.json) without \
             statistics (--attempt N picks one)"
        ]
    );
    assert_eq!(json["warnings"][0]["file"], first.to_str().unwrap());
}

#[test]
fn an_attempt_of_only_cut_off_writes_was_written_but_not_completed() {
    // Attempt 1's finish() ran on a full disk: its files are all `.tmp.<pid>` (issue 31,
    // item 18), so it did not stop before finish().
    let dir = unfinished_first_attempt();
    let first = dir.path().join("rank0/match1-occ1");
    std::fs::write(first.join("rows.f32.tmp.4242"), b"").unwrap();
    std::fs::write(first.join("manifest.json.tmp.4242"), b"").unwrap();
    let path = dir.path().to_str().unwrap();
    let (code, json, stderr) = dumpview(&["scan", path, "--attempt", "1", "--json"]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(
        json["error"],
        format!(
            "{}: --attempt 1: rank 0 match 1 occurrence 1 has attempts 1, 2 (finished: 2; \
             unfinished, without manifest.json: 1); attempt 1 ({}) is unfinished: written but \
             not completed (the disk may have been full), so it has no statistics to use (its \
             input sets, if any, replay with `dumpview replay`)",
            dir.path().join("rank0").display(),
            first.display()
        )
    );
    // The default keeps attempt 2, and the note says the same of attempt 1.
    let (_, json, _) = dumpview(&["scan", path, "--json"]);
    assert!(
        notes(&json)[0].starts_with(
            "UNFINISHED WINDOW: no manifest.json (written but not completed (the disk may have \
             been full)), so no statistics; 2 cut-off writes"
        ),
        "{:?}",
        notes(&json)
    );
}

/// Attempt 1 finished (example side a) in `rank0/match1-occ1`, and the directory of its
/// re-run, attempt 2, made and left empty; returns that directory.
fn finished_then_rerun() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    place_without_attempt("a", &dir.path().join("rank0/match1-occ1"));
    let second = dir.path().join("rank0/match1-occ1.2");
    std::fs::create_dir_all(&second).unwrap();
    (dir, second)
}

fn first_source(json: &Value) -> &str {
    json["windows"][0]["source"].as_str().unwrap()
}

#[test]
fn a_newer_attempt_that_never_finished_is_said_beside_the_older_one_used() {
    // The re-run, attempt 2, was killed before finish().
    let (dir, _) = finished_then_rerun();
    let (code, json, stderr) = dumpview(&["scan", dir.path().to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(first_source(&json).ends_with("rank0/match1-occ1/manifest.json"));
    assert_eq!(
        notes(&json)[1],
        "attempt 1 used (the newest finished one: attempt 2 newer but unfinished); unfinished \
         attempt 2 (no manifest.json) without statistics (--attempt N picks one)"
    );
}

#[test]
fn an_attempt_1_that_was_never_made_is_an_error_too() {
    // Only the re-run's directory is here (the first was moved away): attempt 1 is not
    // quietly taken to mean the only attempt there is.
    let dir = tempfile::tempdir().unwrap();
    place_without_attempt("b", &dir.path().join("rank0/match1-occ1.2"));
    let (code, _, stderr) = dumpview(&["scan", dir.path().to_str().unwrap(), "--attempt", "1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("--attempt 1: rank 0 match 1 occurrence 1 has attempt 2 (finished)"),
        "{stderr}"
    );
}

#[test]
fn an_unreadable_attempt_is_named_in_the_note_and_in_the_attempt_error() {
    // Attempt 2's manifest is damaged.
    let (dir, second) = finished_then_rerun();
    std::fs::write(second.join("manifest.json"), "{}").unwrap();
    let path = dir.path().to_str().unwrap();
    let (code, json, stderr) = dumpview(&["scan", path, "--json"]);
    assert_eq!(code, 1, "lost evidence: {stderr}");
    assert!(first_source(&json).ends_with("rank0/match1-occ1/manifest.json"));
    assert_eq!(
        notes(&json),
        [
            "attempt 1 used (the newest usable one: attempt 2 newer but unreadable); attempt 2 \
          with a manifest that could not be read (its UNREADABLE WINDOW warning says why) \
          (--attempt N picks one)"
        ]
    );
    let (code, json, stderr) = dumpview(&["scan", path, "--attempt", "2", "--json"]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(
        json["error"],
        format!(
            "{}: --attempt 2: rank 0 match 1 occurrence 1 has attempts 1, 2 (finished: 1; \
             manifest unreadable: 2); attempt 2's manifest {} could not be read (its \
             UNREADABLE WINDOW warning says why)",
            dir.path().join("rank0").display(),
            second.join("manifest.json").display()
        )
    );
}
