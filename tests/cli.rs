//! The real binary: default command, summary, probe install, exit status and errors.

use std::path::Path;

use assert_cmd::Command;

fn dumpview() -> Command {
    Command::cargo_bin("dumpview").unwrap()
}

#[test]
fn default_command_summarises_every_embedded_pair() {
    let out = dumpview().assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    for pair in dumpview::embedded::example_pairs() {
        assert!(
            text.contains(&format!("== {}:", pair.name)),
            "missing {} in:\n{text}",
            pair.name
        );
    }
    let overflow = dumpview::embedded::example_pairs()
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
fn default_json_is_an_array_of_pairs() {
    let out = dumpview()
        .arg("--json")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let pairs = value.as_array().unwrap();
    assert_eq!(pairs.len(), dumpview::embedded::example_pairs().len());
    assert_eq!(pairs[0]["sides"].as_array().unwrap().len(), 2);
}

#[test]
fn summary_exits_1_on_a_non_finite_record_and_names_it() {
    let pair = dumpview::embedded::example_pairs()
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
        value[0]["first_nonfinite"]["key"],
        pair.expected["first_nonfinite"]["b"]
    );
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
