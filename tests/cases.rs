//! `dumpview cases` end to end on the Llama example's float32 `layers.0.input_norm#1`
//! (assets/examples/llama_kv_alias/a) and the committed pair tests/fixtures/cases/{a,b},
//! through the real binary and the embedded replay_op.py `--batch`: a candidate wrong only for
//! bfloat16 follows `dtype=bfloat16`; one that crashes on non-contiguous input is a crash
//! following `layout`; one that refuses float64 is unsupported, not failed; an interrupted case
//! is missing evidence; `record` refuses a case outside the plan and keeps every attempt; the
//! exported pytest fails on the wrong candidate and passes on the right one, agreeing with
//! dumpview's verdict on every case; operator-passes-integration-fails on the fixture pair; bad
//! plan files are clear errors naming the file; and a remote dump's matrix runs on its host.
//!
//! The candidates are tests/python/replay_candidates.py's: they compute in float64 and round
//! once, and the wrong one is off by 1.0, so no verdict rests on the CPU's float16/bfloat16
//! kernels. One `mode=compile` case in all (an Inductor compile costs seconds).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::python::{CANDIDATES, Ran, python, ran, repo};
use support::sshd::{Sshd, processes_mentioning};

const F32: &str = "assets/examples/llama_kv_alias/a";
const STAGE: &str = "layers.0.input_norm#1";
/// `tests/python/replay_candidates.py:NAME`, relative: the plan keeps it as written.
fn candidate(name: &str) -> String {
    format!("{CANDIDATES}:{name}")
}

/// `dumpview cases` with the test's Python, run in the repository (the candidates' paths are
/// relative to it), its matrices in `cases`.
fn dumpview(cases: &Path) -> Command {
    let mut command = support::run::with_python(&cases.join(".cache"));
    command.env("DUMPVIEW_CASES_DIR", cases).arg("cases");
    command
}

fn cases(dir: &Path, args: &[&str]) -> Ran {
    ran(dumpview(dir).args(args).output().unwrap())
}

/// `cases plan NAME --from F32 --stage STAGE --candidate CAND --reference builtin:rms_norm`
/// plus `extra`, which must succeed.
fn plan(dir: &Path, name: &str, cand: &str, extra: &[&str]) {
    let cand = candidate(cand);
    let mut args = vec![
        "plan",
        name,
        "--from",
        F32,
        "--stage",
        STAGE,
        "--candidate",
        &cand,
        "--reference",
        "builtin:rms_norm",
    ];
    args.extend_from_slice(extra);
    let r = cases(dir, &args);
    assert_eq!(r.code, 0, "plan {name}: {}\n{}", r.stdout, r.stderr);
}

fn analysis(dir: &Path, name: &str) -> Value {
    let r = cases(dir, &["analyze", name, "--json"]);
    assert!(r.code == 0 || r.code == 1, "analyze {name}: {}", r.stderr);
    let a: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout));
    // Every --json document carries `warnings` (README).
    assert_eq!(a["warnings"], serde_json::json!([]), "{a}");
    a
}

/// case id -> outcome.
fn outcomes(a: &Value) -> Vec<(String, String)> {
    a["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn follows<'a>(a: &'a Value, outcome: &str) -> &'a Value {
    a["follows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["outcome"] == outcome)
        .unwrap_or_else(|| panic!("nothing follows for {outcome}: {}", a["follows"]))
}

/// Runs pytest on `files`; returns (file name, passed) for each test.
fn pytest(files: &[PathBuf], env: &[(&str, &str)]) -> Vec<(String, bool)> {
    let out = Command::new(python().unwrap())
        .args(["-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider"])
        .args(files)
        .envs(env.iter().copied())
        .current_dir(files[0].parent().unwrap())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut results = Vec::new();
    for line in text.lines() {
        for (word, passed) in [("PASSED ", true), ("FAILED ", false), ("ERROR ", false)] {
            if let Some(rest) = line.strip_prefix(word) {
                let file = rest.split("::").next().unwrap().to_string();
                results.push((file, passed));
            }
        }
    }
    assert_eq!(results.len(), files.len(), "pytest said:\n{text}");
    results
}

#[test]
fn a_bfloat16_only_bug_follows_dtype_bfloat16_and_its_exported_test_agrees() {
    let Some(_) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    plan(
        d,
        "bf16",
        "rms_norm_wrong_in_bf16",
        &[
            "--axis",
            "dtype=float16,bfloat16,float32",
            "--axis",
            "option:eps=1e-6,1e-5",
        ],
    );
    let plan_json: Value =
        serde_json::from_slice(&std::fs::read(d.join("bf16/plan.json")).unwrap()).unwrap();
    assert_eq!(plan_json["folded"].as_array().unwrap().len(), 2);
    assert!(
        d.join("bf16/baseline/inputs/layers.0.input_norm#1.pt")
            .is_file()
    );

    let r = cases(d, &["run", "bf16"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("every numerical mismatch is dtype=bfloat16"),
        "{}",
        r.stdout
    );
    let a = analysis(d, "bf16");
    assert_eq!(
        outcomes(&a),
        pairs(&[
            ("baseline", "pass"),
            ("dtype=float16", "pass"),
            ("dtype=bfloat16", "numerical_mismatch"),
            ("option.eps=1e-5", "pass"),
        ])
    );
    let f = follows(&a, "numerical mismatch");
    assert_eq!(
        (f["axis"].as_str(), f["value"].as_str()),
        (Some("dtype"), Some("bfloat16"))
    );
    assert_eq!(f["passing_on_axis"], serde_json::json!(["dtype=float16"]));
    assert_eq!(a["smallest_failing"]["id"], "dtype=bfloat16");
    assert_eq!(a["all_pass"], false);

    // A second run skips what is recorded.
    let r = cases(d, &["run", "bf16"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr.matches("recorded already, skipped").count(),
        4,
        "{}",
        r.stderr
    );

    // The Markdown report links each case's evidence, relative to where it is written.
    let report = d.join("out/report.md");
    std::fs::create_dir_all(report.parent().unwrap()).unwrap();
    let r = cases(d, &["analyze", "bf16", "-o", report.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let md = std::fs::read_to_string(&report).unwrap();
    let links: Vec<&str> = md
        .split("](<")
        .skip(1)
        .map(|rest| rest.split(">)").next().unwrap())
        .collect();
    assert!(links.len() >= 4 * 6, "{md}");
    for link in &links {
        assert!(
            report.parent().unwrap().join(link).exists(),
            "dead link {link}"
        );
    }
    assert!(md.contains("`dtype=bfloat16` | numerical mismatch"), "{md}");

    // Every case exported as a regression test: pytest's verdict is dumpview's.
    let tests = d.join("tests");
    let mut files = Vec::new();
    for (id, _) in outcomes(&a) {
        let file = tests.join(format!("test_{}.py", id.replace(['=', '.', '-'], "_")));
        let r = cases(
            d,
            &["export-test", "bf16", &id, "-o", file.to_str().unwrap()],
        );
        assert_eq!(r.code, 0, "{id}: {}", r.stderr);
        files.push(file);
    }
    let wrong = pytest(&files, &[]);
    for (id, outcome) in outcomes(&a) {
        let file = format!("test_{}.py", id.replace(['=', '.', '-'], "_"));
        let passed = wrong.iter().find(|(f, _)| *f == file).map(|(_, p)| *p);
        assert_eq!(
            passed,
            Some(outcome == "pass"),
            "{id} ({outcome}): {wrong:?}"
        );
    }
    let fixed = format!("{}:rms_norm_exact", repo(CANDIDATES).display());
    let right = pytest(&files, &[("DUMPVIEW_CANDIDATE", &fixed)]);
    assert!(right.iter().all(|(_, p)| *p), "{right:?}");
    let text = std::fs::read_to_string(tests.join("test_dtype_bfloat16.py")).unwrap();
    assert!(
        text.contains("compare.py") && text.contains("\"rtol\": 0.01"),
        "the bfloat16 tolerances and their source: {text}"
    );
    // Nothing is overwritten.
    let r = cases(
        d,
        &[
            "export-test",
            "bf16",
            "baseline",
            "-o",
            files[0].to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("exists"), "{}", r.stderr);
}

#[test]
fn a_crash_on_non_contiguous_input_follows_layout() {
    let Some(_) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    plan(
        d,
        "layout",
        "rms_norm_needs_contiguous",
        &[
            "--axis",
            "layout[x]=contiguous,transposed,strided",
            "--axis",
            "dtype=float16",
        ],
    );
    let r = cases(d, &["run", "layout", "--jobs", "2"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let a = analysis(d, "layout");
    assert_eq!(
        outcomes(&a),
        pairs(&[
            ("baseline", "pass"),
            ("layout.x=transposed", "crash"),
            ("layout.x=strided", "crash"),
            ("dtype=float16", "pass"),
        ])
    );
    let f = follows(&a, "crash");
    assert_eq!(f["axis"], "layout");
    assert_eq!(f["target"], "x");
    assert_eq!(f["value"], "non-contiguous");
    assert!(
        a["cases"][1]["reason"]
            .as_str()
            .unwrap()
            .contains("illegal memory access reading x with stride (1, 12)")
    );
    // The strided case really was strided: its replay.json says how x was stored.
    let record: Value = serde_json::from_slice(
        &std::fs::read(d.join("layout/cases/layout.x=strided/attempt-1/replay.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(record["args"][0]["stride"], serde_json::json!([512, 2]));
    assert_eq!(record["case"]["id"], "layout.x=strided");
}

#[test]
fn an_operator_refusing_float64_is_unsupported_not_failed() {
    let Some(_) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    plan(
        d,
        "f64",
        "rms_norm_no_float64",
        &["--axis", "dtype=float64,bfloat16"],
    );
    let r = cases(d, &["run", "f64"]);
    assert_eq!(r.code, 1, "not every case passes: {}", r.stderr);
    let a = analysis(d, "f64");
    assert_eq!(
        outcomes(&a),
        pairs(&[
            ("baseline", "pass"),
            ("dtype=float64", "unsupported_combination"),
            ("dtype=bfloat16", "pass"),
        ])
    );
    assert_eq!(a["counts"]["crash"], 0);
    assert_eq!(a["counts"]["numerical_mismatch"], 0);
    assert_eq!(
        a["smallest_failing"],
        Value::Null,
        "unsupported is no failure"
    );
    let f = follows(&a, "unsupported combination");
    assert_eq!(
        (f["axis"].as_str(), f["value"].as_str()),
        (Some("dtype"), Some("float64"))
    );
    assert!(
        a["follows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["outcome"] != "failure"),
        "{}",
        a["follows"]
    );
}

#[test]
fn an_interrupted_case_is_missing_evidence_and_a_rerun_is_a_new_attempt() {
    let Some(_) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    plan(
        d,
        "hang",
        "rms_norm_hangs_on_eps",
        &["--axis", "dtype=float16", "--axis", "option:eps=1e-5"],
    );
    let child = dumpview(d)
        .args(["run", "hang"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The third case starts once the second is filed; it hangs until interrupted.
    let filed = d.join("hang/cases/dtype=float16/attempt-1/verdict.json");
    let deadline = Instant::now() + Duration::from_secs(120);
    let staged = || {
        std::fs::read_dir(d.join("hang"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".staging-"))
            .any(|e| e.path().join("option.eps=1e-5").is_dir())
    };
    while !(filed.is_file() && staged()) {
        assert!(Instant::now() < deadline, "the hanging case never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill of our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "a cancel is exit 2: {stderr}");
    assert!(stderr.contains("cancelled"), "{stderr}");
    assert!(
        processes_mentioning(&d.join("hang").display().to_string()).is_empty(),
        "Python left running: {:?}",
        processes_mentioning(&d.join("hang").display().to_string())
    );
    let a = analysis(d, "hang");
    assert_eq!(
        outcomes(&a),
        pairs(&[
            ("baseline", "pass"),
            ("dtype=float16", "pass"),
            ("option.eps=1e-5", "missing_evidence"),
        ])
    );
    let hung = &a["cases"][2];
    assert_eq!(hung["attempts"][0]["complete"], false);
    assert!(
        hung["reason"].as_str().unwrap().contains("interrupted"),
        "{hung}"
    );
    assert!(
        !d.join("hang/cases/option.eps=1e-5/attempt-1/replay.json")
            .exists()
    );
    assert_eq!(a["all_pass"], false);

    // A recorded case is skipped; --rerun writes a new attempt beside the old.
    let r = cases(d, &["run", "hang", "--only", "dtype=float16"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("recorded already, skipped"),
        "{}",
        r.stderr
    );
    let r = cases(d, &["run", "hang", "--only", "dtype=float16", "--rerun"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let a = analysis(d, "hang");
    let case = &a["cases"][1];
    assert_eq!(case["attempt"], 2);
    assert_eq!(case["attempts"].as_array().unwrap().len(), 2);
    assert!(
        d.join("hang/cases/dtype=float16/attempt-1/replay.json")
            .is_file()
    );
    let r = cases(d, &["run", "hang", "--only", "nope"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no such case"), "{}", r.stderr);

    // dumpview killed outright: its Python dies with it, and the next run files what the
    // killed one left as an attempt (interrupted: missing evidence still).
    let mut child = dumpview(d)
        .args(["run", "hang", "--only", "option.eps=1e-5", "--rerun"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !staged() {
        assert!(
            Instant::now() < deadline,
            "the hanging case never started again"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_mentioning(&d.join("hang").display().to_string()).is_empty() {
        assert!(Instant::now() < deadline, "Python outlived dumpview");
        std::thread::sleep(Duration::from_millis(100));
    }
    let r = cases(d, &["run", "hang", "--only", "dtype=float16"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("option.eps=1e-5: attempt 2: interrupted"),
        "{}",
        r.stderr
    );
    let a = analysis(d, "hang");
    let hung = &a["cases"][2];
    assert_eq!(hung["outcome"], "missing_evidence");
    assert_eq!(hung["attempts"].as_array().unwrap().len(), 2);
    assert!(!staged(), "the staging directory is gone once filed");
}

#[test]
fn record_refuses_a_case_outside_the_plan_and_keeps_both_attempts() {
    let Some(_) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    plan(d, "byhand", "rms_norm_exact", &["--axis", "dtype=float16"]);
    let bundle = d.join("bundle");
    let r = cases(d, &["export-run", "byhand", "-o", bundle.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for file in [
        "replay_op.py",
        "plan.json",
        "run.sh",
        "baseline/manifest.json",
    ] {
        assert!(bundle.join(file).is_file(), "{file}");
    }
    // Run by hand, as on an NPU host: from the directory the candidate path is relative to.
    let run_sh = || {
        Command::new("sh")
            .arg(bundle.join("run.sh"))
            .env("PYTHON", python().unwrap())
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap()
    };
    let out = run_sh();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = bundle.join("results");
    let out = run_sh();
    assert_eq!(out.status.code(), Some(2), "results are never overwritten");

    let baseline = results.join("baseline");
    let base = baseline.to_str().unwrap();
    let r = cases(d, &["record", "byhand", "nope", base]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no case \"nope\""), "{}", r.stderr);
    let r = cases(d, &["record", "byhand", "dtype=float16", base]);
    assert_eq!(r.code, 2, "the baseline's result is not dtype=float16's");
    assert!(
        r.stderr.contains("the result of case \"baseline\""),
        "{}",
        r.stderr
    );
    let r = cases(d, &["record", "byhand", "../x", base]);
    assert_eq!(r.code, 2);
    let r = cases(d, &["record", "byhand", "baseline", d.to_str().unwrap()]);
    assert_eq!(r.code, 2, "not a replay output directory");
    for n in 1..=2 {
        let r = cases(d, &["record", "byhand", "baseline", base]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(
            r.stdout.contains(&format!("as attempt {n}")),
            "{}",
            r.stdout
        );
    }
    let f16 = results.join("dtype=float16");
    let r = cases(
        d,
        &["record", "byhand", "dtype=float16", f16.to_str().unwrap()],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    for n in 1..=2 {
        assert!(
            d.join(format!("byhand/cases/baseline/attempt-{n}/replay.json"))
                .is_file()
        );
    }
    let a = analysis(d, "byhand");
    assert_eq!(a["all_pass"], true, "{a}");
    assert_eq!(a["cases"][0]["attempt"], 2);
    assert_eq!(a["cases"][0]["attempts"][0]["source"], "record");
    assert!(
        baseline.join("replay.json").is_file(),
        "the user's directory is left as it was"
    );
}

#[test]
fn an_operator_that_passes_every_case_where_the_capture_diverges_is_an_integration_failure() {
    let Some(_) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cand = candidate("rms_norm_exact");
    let r = cases(
        d,
        &[
            "plan",
            "integration",
            "--from",
            "tests/fixtures/cases/b",
            "--vs",
            "tests/fixtures/cases/a",
            "--stage",
            "layers.0.input_norm",
            "--candidate",
            &cand,
            "--reference",
            "builtin:rms_norm",
            "--axis",
            "dtype=float16,bfloat16",
            "--axis",
            "layout[x]=transposed",
            "--axis",
            "shape=half_rows,odd_last_dim",
            "--tie",
            "x.-1=weight.0",
            "--axis",
            "mode=compile",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("diverges from DUMP at layers.0.input_norm#1 (magnitude)"),
        "{}",
        r.stdout
    );
    let r = cases(d, &["run", "integration", "--jobs", "2"]);
    assert_eq!(r.code, 0, "every case passes: {}\n{}", r.stdout, r.stderr);
    let a = analysis(d, "integration");
    assert!(
        outcomes(&a).iter().all(|(_, o)| o == "pass"),
        "{:?}",
        outcomes(&a)
    );
    assert_eq!(a["cases"].as_array().unwrap().len(), 7);
    let i = &a["integration"];
    assert_eq!(i["conclusion"], "operator_passes_integration_fails", "{i}");
    assert!(
        i["text"]
            .as_str()
            .unwrap()
            .starts_with("operator passes, integration fails"),
        "{i}"
    );
    let half: Value = serde_json::from_slice(
        &std::fs::read(d.join("integration/cases/shape=half_rows/attempt-1/replay.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(half["args"][0]["shape"], serde_json::json!([4, 64]));
    let odd: Value = serde_json::from_slice(
        &std::fs::read(d.join("integration/cases/shape=odd_last_dim/attempt-1/replay.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        odd["args"][1]["shape"],
        serde_json::json!([63]),
        "weight follows x.-1"
    );
    let md = cases(d, &["analyze", "integration"]).stdout;
    assert!(md.contains("## Operator against integration"), "{md}");
}

#[test]
fn bad_plans_and_names_are_clear_errors_naming_them() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    plan(d, "good", "rms_norm_exact", &["--axis", "dtype=float16"]);
    let plan_path = d.join("good/plan.json");
    let good = std::fs::read_to_string(&plan_path).unwrap();

    // The plan validates against its JSON Schema; the schema refuses a hostile id.
    let schema_check = r#"
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
plan = json.load(open(sys.argv[2]))
errors = [e.message for e in validator.iter_errors(plan)]
assert not errors, errors
for mutate in ("id", "name", "kind", "version"):
    bad = json.loads(json.dumps(plan))
    if mutate == "id": bad["cases"][1]["id"] = "../x"
    if mutate == "name": bad["name"] = ".."
    if mutate == "kind": bad["cases"][1]["transform"]["kind"] = "rm"
    if mutate == "version": bad["version"] = 2
    assert not validator.is_valid(bad), mutate
print("ok")
"#;
    let out = Command::new(python)
        .args(["-c", schema_check])
        .arg(repo("assets/cases_plan.schema.json"))
        .arg(&plan_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let shown = plan_path.display().to_string();
    for (bad, said) in [
        (good[..good.len() / 2].to_string(), "truncated"),
        (
            good.replacen("\"cases\": [", "\"cases\": 3, \"x\": [", 1),
            "not a version-1 case plan",
        ),
        (
            good.replace("\"dtype=float16\"", "\"../x\""),
            "\"../x\" is refused",
        ),
        (
            good.replace("dumpview.cases.plan", "other"),
            "not a dumpview case plan",
        ),
    ] {
        std::fs::write(&plan_path, &bad).unwrap();
        for command in [
            &["analyze", "good"][..],
            &["run", "good"],
            &["export-run", "good", "-o", "/nonexistent/x"],
        ] {
            let r = cases(d, command);
            assert_eq!(
                r.code, 2,
                "{command:?} on a bad plan ({said}): {}",
                r.stderr
            );
            assert!(
                r.stderr.contains(&shown) && r.stderr.contains(said),
                "{command:?} ({said}): {}",
                r.stderr
            );
        }
    }
    std::fs::write(&plan_path, &good).unwrap();

    // replay_op.py refuses a hostile plan by itself too.
    let hostile = d.join("hostile.json");
    std::fs::write(&hostile, good.replace("\"dtype=float16\"", "\"../x\"")).unwrap();
    let out = Command::new(python)
        .arg(repo("assets/replay_op.py"))
        .arg(repo(F32))
        .arg("--batch")
        .arg(&hostile)
        .arg("--out-root")
        .arg(d.join("escape"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a case name"));
    assert!(!d.join("x").exists() && !d.join("escape").exists());

    // Names, axes and the cases directory.
    let cand = candidate("rms_norm_exact");
    let base = [
        "--from",
        F32,
        "--stage",
        STAGE,
        "--candidate",
        &cand,
        "--reference",
        "builtin:rms_norm",
    ];
    for (name, axes, said) in [
        (
            "../x",
            &["--axis", "dtype=float16"][..],
            "\"../x\" is refused",
        ),
        ("", &["--axis", "dtype=float16"], "is refused"),
        (
            "good",
            &["--axis", "dtype=float16"],
            "a plan is never replaced",
        ),
        ("n1", &["--axis", "colour=red"], "unknown axis \"colour\""),
        (
            "n2",
            &["--axis", "layout[weight]=transposed"],
            "needs two dimensions",
        ),
        (
            "n3",
            &["--axis", "shape=odd_last_dim"],
            "--tie x.-1=weight.0",
        ),
        (
            "n4",
            &["--axis", "option:eps=1e-5", "--axis", "option:eps=0.00001"],
            "make the same case",
        ),
    ] {
        let mut args = vec!["plan", name];
        args.extend_from_slice(&base);
        args.extend_from_slice(axes);
        let r = cases(d, &args);
        assert_eq!(r.code, 2, "{name} {axes:?}: {}", r.stdout);
        assert!(r.stderr.contains(said), "{name} {axes:?}: {}", r.stderr);
    }
    let inside = tempfile::tempdir().unwrap();
    support::copy_tree(&repo(F32), inside.path());
    let r = ran(dumpview(d)
        .args(["plan", "in", "--from"])
        .arg(inside.path())
        .args([
            "--stage",
            STAGE,
            "--candidate",
            &cand,
            "--reference",
            "builtin:rms_norm",
        ])
        .args(["--axis", "dtype=float16", "--cases-dir"])
        .arg(inside.path().join("rank0/cases"))
        .output()
        .unwrap());
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("lies inside the dump"), "{}", r.stderr);
    // Nor inside the --vs capture: its directory search would then find the baseline copy.
    let other = tempfile::tempdir().unwrap();
    support::copy_tree(&repo(F32), other.path());
    let r = ran(dumpview(d)
        .args(["plan", "vs-inside", "--from"])
        .arg(repo(F32))
        .arg("--vs")
        .arg(other.path())
        .args([
            "--stage",
            STAGE,
            "--candidate",
            &cand,
            "--reference",
            "builtin:rms_norm",
        ])
        .args(["--axis", "dtype=float16", "--cases-dir"])
        .arg(other.path().join(".dumpview/cases"))
        .output()
        .unwrap());
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("lies inside the dump") && !other.path().join(".dumpview").exists(),
        "{}",
        r.stderr
    );
    let r = cases(d, &["analyze", "never-planned"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("no case matrix \"never-planned\""),
        "{}",
        r.stderr
    );
}

#[test]
fn a_remote_dump_s_matrix_runs_on_its_host_and_leaves_nothing_behind() {
    let Some(python) = python() else { return };
    let Some(server) = Sshd::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The remote login starts in its own HOME: the candidate's path is absolute.
    let cand = format!("{}:rms_norm_wrong_in_bf16", repo(CANDIDATES).display());
    let remote_args = ["--ssh-command", &server.ssh_command()];
    let r = ran(dumpview(d)
        .args(["plan", "remote", "--from", &server.url(&repo(F32))])
        .args([
            "--stage",
            STAGE,
            "--candidate",
            &cand,
            "--reference",
            "builtin:rms_norm",
        ])
        .args(["--axis", "dtype=bfloat16", "--axis", "layout[x]=transposed"])
        .args(remote_args)
        .output()
        .unwrap());
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = ran(dumpview(d)
        .args(["run", "remote", "--python", python, "--jobs", "2"])
        .args(remote_args)
        .output()
        .unwrap());
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let a = analysis(d, "remote");
    assert_eq!(
        outcomes(&a),
        pairs(&[
            ("baseline", "pass"),
            ("dtype=bfloat16", "numerical_mismatch"),
            ("layout.x=transposed", "pass"),
        ])
    );
    let record: Value = serde_json::from_slice(
        &std::fs::read(d.join("remote/cases/dtype=bfloat16/attempt-1/replay.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        record["manifest"].as_str().unwrap(),
        repo(&format!("{F32}/rank0/match1-occ1/manifest.json"))
            .display()
            .to_string(),
        "it ran on the dump itself"
    );
    let info: Value = serde_json::from_slice(
        &std::fs::read(d.join("remote/cases/dtype=bfloat16/attempt-1/attempt.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(info["host"], format!("127.0.0.1:{}", server.port));
    let left: Vec<String> = std::fs::read_dir(server.home())
        .map(|e| {
            e.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(left, Vec::<String>::new(), "left on the remote side");
}

/// The closing figure: a 20-case matrix, run once locally (docs/cases.md).
/// `cargo test --release --test cases -- --ignored --nocapture twenty`
#[test]
#[ignore = "the figure for docs/cases.md"]
fn twenty_cases_timed() {
    let Some(_) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    plan(
        d,
        "twenty",
        "rms_norm_exact",
        &[
            "--axis",
            "dtype=float16,bfloat16,float64",
            "--axis",
            "dtype[x]=float16,bfloat16,float64",
            "--axis",
            "dtype[weight]=float16,bfloat16,float64",
            "--axis",
            "layout[x]=transposed,strided",
            "--axis",
            "layout[weight]=strided",
            "--axis",
            "shape=half_rows",
            "--axis",
            "option:eps=1e-5,1e-4,1e-3,1e-2,0.1,1e-7",
        ],
    );
    let n = serde_json::from_slice::<Value>(&std::fs::read(d.join("twenty/plan.json")).unwrap())
        .unwrap()["cases"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(n, 20);
    let start = Instant::now();
    let r = cases(d, &["run", "twenty"]);
    let wall = start.elapsed().as_secs_f64();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let start = Instant::now();
    let r = cases(d, &["run", "twenty", "--rerun", "--jobs", "2"]);
    let wall2 = start.elapsed().as_secs_f64();
    assert_eq!(r.code, 0, "{}", r.stderr);
    eprintln!("20 cases: {wall:.2} s (1 job), {wall2:.2} s (2 jobs)");
}

#[test]
fn a_candidate_that_segfaults_on_a_transposed_x_is_that_case_s_crash_and_the_rest_is_judged() {
    let Some(_) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    plan(
        d,
        "segv",
        "rms_norm_segfaults_transposed",
        &[
            "--axis",
            "layout[x]=contiguous,transposed,strided",
            "--axis",
            "dtype=float16",
        ],
    );
    let r = cases(d, &["run", "segv"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(
            "dumpview: replay_op.py --batch killed by SIGSEGV (signal 11) in case \
             layout.x=transposed; the 2 case(s) it had not started run in a new Python"
        ),
        "{}",
        r.stderr
    );
    let a = analysis(d, "segv");
    assert_eq!(
        outcomes(&a),
        pairs(&[
            ("baseline", "pass"),
            ("layout.x=transposed", "crash"),
            ("layout.x=strided", "pass"),
            ("dtype=float16", "pass"),
        ])
    );
    let f = follows(&a, "crash");
    assert_eq!(
        (
            f["axis"].as_str(),
            f["target"].as_str(),
            f["value"].as_str()
        ),
        (Some("layout"), Some("x"), Some("transposed"))
    );
    assert_eq!(
        f["passing_on_axis"],
        serde_json::json!(["layout.x=strided"])
    );
    assert_eq!(
        a["cases"][1]["reason"],
        format!(
            "the candidate {} ended the process (killed by SIGSEGV (signal 11))",
            candidate("rms_norm_segfaults_transposed")
        )
    );
    assert_eq!(a["smallest_failing"]["id"], "layout.x=transposed");
    // The crashed case's evidence: the record dumpview completed, what the candidate printed.
    let attempt = d.join("segv/cases/layout.x=transposed/attempt-1");
    let record: Value =
        serde_json::from_slice(&std::fs::read(attempt.join("replay.json")).unwrap()).unwrap();
    assert_eq!(record["ended"]["side"], "candidate");
    assert_eq!(record["case"]["id"], "layout.x=transposed");
    assert_eq!(record["args"][0]["stride"], serde_json::json!([1, 12]));
    assert!(!attempt.join("replay.partial.json").exists());
    assert_eq!(
        std::fs::read_to_string(attempt.join("candidate.stdout")).unwrap(),
        "rms_norm_segfaults_transposed: stride (1, 12)\n"
    );
    assert_eq!(
        a["cases"][1]["attempts"].as_array().unwrap().len(),
        1,
        "one attempt per case: the restart ran only the cases left"
    );
}

#[test]
fn a_reference_that_dies_leaves_its_case_missing_evidence_not_a_crash() {
    let Some(_) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cand = candidate("rms_norm_exact");
    let reference = candidate("rms_norm_reference_segfaults");
    let r = cases(
        d,
        &[
            "plan",
            "refdies",
            "--from",
            F32,
            "--stage",
            STAGE,
            "--candidate",
            &cand,
            "--reference",
            &reference,
            "--axis",
            "dtype=float16",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = cases(d, &["run", "refdies"]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    let a = analysis(d, "refdies");
    assert_eq!(
        outcomes(&a),
        pairs(&[
            ("baseline", "missing_evidence"),
            ("dtype=float16", "missing_evidence"),
        ])
    );
    assert_eq!(a["counts"]["crash"], 0);
    // float32 inputs die in the reference run (float64 already), float16 ones in the golden.
    for (case, run) in [(0, "reference"), (1, "golden")] {
        let reason = a["cases"][case]["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!(
                "the reference died: its {run} run ({reference}) ended the process (killed by SIGSEGV (signal 11))"
            )),
            "{reason}"
        );
    }
}

#[test]
fn a_remote_batch_killed_by_its_candidate_files_the_crash_and_runs_the_rest_there() {
    let Some(python) = python() else { return };
    let Some(server) = Sshd::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cand = format!(
        "{}:rms_norm_segfaults_transposed",
        repo(CANDIDATES).display()
    );
    let remote_args = ["--ssh-command", &server.ssh_command()];
    let r = ran(dumpview(d)
        .args(["plan", "rsegv", "--from", &server.url(&repo(F32))])
        .args([
            "--stage",
            STAGE,
            "--candidate",
            &cand,
            "--reference",
            "builtin:rms_norm",
        ])
        .args(["--axis", "layout[x]=transposed", "--axis", "dtype=float16"])
        .args(remote_args)
        .output()
        .unwrap());
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = ran(dumpview(d)
        .args(["run", "rsegv", "--python", python])
        .args(remote_args)
        .output()
        .unwrap());
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "replay_op.py --batch on 127.0.0.1:{} killed by SIGSEGV (signal 11) in case layout.x=transposed; the 1 case(s) it had not started run in a new Python",
            server.port
        )),
        "{}",
        r.stderr
    );
    let a = analysis(d, "rsegv");
    assert_eq!(
        outcomes(&a),
        pairs(&[
            ("baseline", "pass"),
            ("layout.x=transposed", "crash"),
            ("dtype=float16", "pass"),
        ])
    );
    assert_eq!(
        std::fs::read_to_string(
            d.join("rsegv/cases/layout.x=transposed/attempt-1/candidate.stdout")
        )
        .unwrap(),
        "rms_norm_segfaults_transposed: stride (1, 12)\n"
    );
    let left: Vec<String> = std::fs::read_dir(server.home())
        .map(|e| {
            e.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(left, Vec::<String>::new(), "left on the remote side");
}
