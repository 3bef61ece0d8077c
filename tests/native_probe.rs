//! The native probe (src/probe_ffi, docs/native_probe.md) through its C ABI: C programs from
//! tests/native/, compiled here with `cc` against assets/dump_probe.h and libdump_probe.so,
//! drive it, and what they print ("fact NAME VALUE") and write (manifests, saved tensors) is
//! checked here; `dumpview scan` and `dumpview diff` then read the dumps.
//!
//! Without a C compiler every test says so and returns (the library itself is still built and
//! unit-tested by `cargo test`). Without the project's .venv the Python-vs-native test says so.

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use support::run::json_stdout as dumpview;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// The variables of the probe's environment, removed from every child before the test's own.
const PROBE_VARS: [&str; 11] = [
    "DUMP_PROBE",
    "DUMP_PROBE_DIR",
    "DUMP_PROBE_RANKS",
    "DUMP_PROBE_TENSOR",
    "DUMP_PROBE_ROWS",
    "DUMP_PROBE_MATCH",
    "DUMP_PROBE_OCCURRENCE",
    "DUMP_PROBE_BACKEND",
    "DUMP_PROBE_TENSOR_FORMAT",
    "RANK",
    "WORLD_SIZE",
];

/// The C compiler and where the library is.
struct Toolchain {
    cc: String,
    lib_dir: PathBuf,
}

/// `cc` and the freshest libdump_probe.so of this test's profile, or `None` (with a message)
/// when there is no C compiler.
fn toolchain() -> Option<Toolchain> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    if Command::new(&cc).arg("--version").output().is_err() {
        eprintln!("skipped: no C compiler ({cc}) to build the native probe's C test drivers");
        return None;
    }
    Some(Toolchain {
        cc,
        lib_dir: library_dir(),
    })
}

/// The directory of libdump_probe.so: beside the test executable (`target/<profile>/deps`, where
/// the dev-dependency puts it) or one level up (`target/<profile>`, a build of the workspace),
/// whichever is newer.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable");
    let deps = exe.parent().expect("deps").to_path_buf();
    let candidates = [deps.clone(), deps.parent().expect("profile").to_path_buf()];
    candidates
        .iter()
        .filter_map(|dir| {
            let modified = std::fs::metadata(dir.join("libdump_probe.so"))
                .and_then(|m| m.modified())
                .ok()?;
            Some((modified, dir.clone()))
        })
        .max()
        .map(|(_, dir)| dir)
        .unwrap_or_else(|| {
            panic!(
                "libdump_probe.so is in neither {} nor its parent: build it with `cargo build -p dump_probe` \
                 (a `cargo test` at the repository root builds it)",
                deps.display()
            )
        })
}

fn native(file: &str) -> String {
    format!("{REPO}/tests/native/{file}")
}

impl Toolchain {
    /// Compiles `source` (in tests/native/) into `out`, linked against libdump_probe.so with an
    /// rpath to it; `extra` flags come first.
    fn driver(&self, source: &str, out: &Path, extra: &[&str]) {
        let mut cmd = Command::new(&self.cc);
        cmd.args(extra)
            .args([
                "-std=c11",
                "-D_GNU_SOURCE",
                "-O1",
                "-g",
                "-Wall",
                "-Wextra",
                "-Werror",
            ])
            .arg(format!("-I{REPO}/assets"))
            .arg(format!("-I{REPO}/tests/native"))
            .arg(native(source))
            .arg("-o")
            .arg(out)
            .arg(format!("-L{}", self.lib_dir.display()))
            .arg(format!("-Wl,-rpath,{}", self.lib_dir.display()))
            .args(["-ldump_probe", "-ldl", "-lm", "-lpthread"]);
        let output = cmd.output().expect("run cc");
        assert!(
            output.status.success(),
            "{cmd:?} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Compiles a mock runtime into the shared library `out` with soname `soname`.
    fn mock(&self, source: &str, out: &Path, soname: &str) {
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let output = Command::new(&self.cc)
            .args([
                "-shared",
                "-fPIC",
                "-O1",
                "-Wall",
                "-Werror",
                "-Wno-unused-function",
            ])
            .arg(format!("-Wl,-soname,{soname}"))
            .arg(native(source))
            .arg("-o")
            .arg(out)
            .arg("-lpthread")
            .output()
            .expect("run cc");
        assert!(
            output.status.success(),
            "mock {source} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// A run of a driver: its facts, stdout and stderr.
struct Run {
    facts: HashMap<String, String>,
    stdout: String,
    stderr: String,
    output: Output,
}

impl Run {
    fn fact(&self, name: &str) -> &str {
        self.facts.get(name).unwrap_or_else(|| {
            panic!(
                "no fact {name:?}; stdout:\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    fn int(&self, name: &str) -> i64 {
        self.fact(name)
            .parse()
            .unwrap_or_else(|_| panic!("fact {name} = {:?} is not an integer", self.fact(name)))
    }
}

/// Runs `exe args` with a clean probe environment plus `env`.
fn run(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(exe);
    cmd.args(args);
    for var in PROBE_VARS {
        cmd.env_remove(var);
    }
    // And any other DUMP_PROBE_* setting of the test's own environment (the manifest's run.env
    // lists them all).
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("DUMP_PROBE") {
            cmd.env_remove(name);
        }
    }
    cmd.env_remove("LD_LIBRARY_PATH");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let output = cmd.output().expect("run the driver");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{} {args:?} exited {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        exe.display(),
        output.status
    );
    let facts = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("fact "))
        .map(|l| match l.split_once(' ') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect();
    Run {
        facts,
        stdout,
        stderr,
        output,
    }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

/// The records of a manifest by `stage#occurrence`.
fn records(manifest: &Value) -> HashMap<String, Value> {
    manifest["records"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| {
            (
                format!("{}#{}", r["stage"].as_str().unwrap(), r["occurrence"]),
                r.clone(),
            )
        })
        .collect()
}

fn stages(manifest: &Value) -> Vec<String> {
    manifest["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["stage"].as_str().unwrap().to_string())
        .collect()
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("a temporary directory")
}

#[test]
fn the_header_matches_the_library() {
    let Some(tc) = toolchain() else { return };
    let dir = tempdir();
    let exe = dir.path().join("abi_check");
    tc.driver("abi_check.c", &exe, &[]);
    let run = run(
        &exe,
        &[],
        &[("DUMP_PROBE_DIR", dir.path().join("out").to_str().unwrap())],
    );
    assert!(
        run.stdout.lines().any(|l| l.starts_with("abi ok ")),
        "{}",
        run.stdout
    );
    let checks: u32 = run.stdout.lines().last().unwrap()["abi ok ".len()..]
        .parse()
        .unwrap();
    assert!(checks >= 60, "only {checks} checks ran");
    // It ran disarmed (no DUMP_PROBE): nothing may be written.
    assert!(!dir.path().join("out").exists());
    // C++ callers (serving code) include the same header.
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".to_string());
    if Command::new(&cxx).arg("--version").output().is_err() {
        eprintln!("skipped the C++ half: no {cxx}");
        return;
    }
    let source = dir.path().join("header.cpp");
    std::fs::write(
        &source,
        "#include \"dump_probe.h\"\nint main() { dp_session *s = nullptr; int st = dp_open(nullptr, 0, 0, &s); dp_close(s); return st; }\n",
    )
    .unwrap();
    let exe = dir.path().join("header_cpp");
    let output = Command::new(&cxx)
        .args(["-std=c++17", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-I{REPO}/assets"))
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", tc.lib_dir.display()))
        .arg(format!("-Wl,-rpath,{}", tc.lib_dir.display()))
        .arg("-ldump_probe")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(Command::new(&exe).status().unwrap().success());
}

/// Runs host_e2e for run `which` into `out`; DUMP_PROBE_MATCH=2 selects req-7's first call.
fn host_run(exe: &Path, which: &str, out: &Path) -> Run {
    run(
        exe,
        &[which],
        &[
            ("DUMP_PROBE", "1"),
            ("DUMP_PROBE_DIR", out.to_str().unwrap()),
            ("DUMP_PROBE_MATCH", "2"),
            ("DUMP_PROBE_TENSOR", "^logits$"),
            ("DUMP_PROBE_ROWS", "1"),
            ("DUMP_PROBE_BACKEND", "host"),
        ],
    )
}

#[test]
fn the_host_backend_end_to_end_then_scan_and_diff_find_what_was_planted() {
    let Some(tc) = toolchain() else { return };
    let dir = tempdir();
    let exe = dir.path().join("host_e2e");
    tc.driver("host_e2e.c", &exe, &[]);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for (which, out) in [("a", &a), ("b", &b)] {
        let run = host_run(&exe, which, out);
        for (name, value) in &run.facts {
            if !name.ends_with(".error") {
                assert_eq!(
                    value,
                    "0",
                    "{name} in run {which}: {}",
                    run.fact(&format!("{name}.error"))
                );
            }
        }
        assert!(
            // dp_arm without a map: one request, the label, its rows told by the first capture
            // (the records whose first dimension matches get token rows).
            run.stderr.contains("dump_probe: wrote ")
                && run
                    .stderr
                    .contains("(9 records, 240 bytes of token rows in rows.f32)"),
            "{}",
            run.stderr
        );
    }
    let manifest_b = read_json(&b.join("rank0/match2-occ1/manifest.json"));
    assert_eq!(manifest_b["format"], "dumpview.manifest");
    assert_eq!(manifest_b["label"], "req-7");
    assert_eq!(
        (
            manifest_b["match"].as_u64(),
            manifest_b["occurrence"].as_u64()
        ),
        (Some(2), Some(1))
    );
    assert_eq!(manifest_b["attempt"], 1);
    assert_eq!(manifest_b["backend"], "host");
    assert_eq!(
        manifest_b["metadata"]["token_ids"],
        serde_json::json!([1, 2, 3])
    );
    assert_eq!(manifest_b["storage_identity"], "storage_id");
    assert_eq!(manifest_b["warnings"], serde_json::json!([]));
    // How the driver was started: its arguments after the program, the program, the working
    // directory at dp_arm, and every DUMP_PROBE* variable (run() removes the others).
    let started = &manifest_b["run"];
    assert_eq!(started["argv"], serde_json::json!(["b"]));
    assert_eq!(
        started["executable"].as_str().map(Path::new),
        Some(exe.canonicalize().unwrap().as_path())
    );
    assert_eq!(
        started["cwd"].as_str().map(Path::new),
        Some(std::env::current_dir().unwrap().as_path())
    );
    assert_eq!(
        started["env"],
        serde_json::json!({
            "DUMP_PROBE": "1",
            "DUMP_PROBE_BACKEND": "host",
            "DUMP_PROBE_DIR": b.to_str().unwrap(),
            "DUMP_PROBE_MATCH": "2",
            "DUMP_PROBE_ROWS": "1",
            "DUMP_PROBE_TENSOR": "^logits$",
        })
    );
    let loaded = dumpview::load(std::slice::from_ref(&b), &mut |_| {}).unwrap();
    let run_b = loaded.windows[0].run.as_ref().expect("ingest reads run");
    assert_eq!(run_b.argv, ["b"]);
    assert_eq!(run_b.env["DUMP_PROBE_MATCH"], "2");
    assert_eq!(
        stages(&manifest_b),
        [
            "embed.out",
            "mlp.out",
            "attn.scores",
            "kv.cache",
            "kv.cache.T",
            "kv.slice",
            "kv.misread",
            "logits",
            "loss"
        ]
    );
    let r = records(&manifest_b);
    // The NaN written into embed.out after its capture is not seen.
    assert_eq!(r["embed.out#1"]["stats"]["nan_count"], 0);
    assert_eq!(r["embed.out#1"]["stats"]["finite_count"], 32);
    let scores = &r["attn.scores#1"]["stats"];
    assert_eq!(
        (scores["nan_count"].as_u64(), scores["inf_count"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(scores["finite_count"], 6);
    assert_eq!(scores["max"], 1.75);
    let (cache, transposed, slice) = (&r["kv.cache#1"], &r["kv.cache.T#1"], &r["kv.slice#1"]);
    assert_eq!(transposed["stride"], serde_json::json!([1, 4]));
    assert_eq!(transposed["is_contiguous"], false);
    assert_eq!(cache["is_contiguous"], true);
    assert_eq!(transposed["storage_ptr"], cache["storage_ptr"]);
    assert_eq!(slice["storage_offset"], 4);
    assert_eq!(
        slice["data_ptr"].as_u64(),
        cache["storage_ptr"].as_u64().map(|p| p + 16)
    );
    // Rows 1, 3, 5 of i - 10: 4 - 10 = -6 .. 23 - 10 = 13.
    assert_eq!(
        (
            slice["stats"]["min"].as_f64(),
            slice["stats"]["max"].as_f64()
        ),
        (Some(-6.0), Some(13.0))
    );
    assert_eq!(transposed["stats"]["l2"], cache["stats"]["l2"]);
    assert_ne!(
        transposed["stats"]["pos_checksum"],
        cache["stats"]["pos_checksum"]
    );
    let logits = &r["logits#1"];
    assert_eq!(logits["dtype"], "bfloat16");
    assert_eq!(logits["element_size"], 2);
    assert_eq!(
        (
            logits["stats"]["min"].as_f64(),
            logits["stats"]["max"].as_f64()
        ),
        (Some(-2.0), Some(2.5))
    );
    assert_eq!(logits["tensor_file"], "tensors/logits#1.safetensors");
    assert_eq!(
        (logits["rows_kept"].as_u64(), logits["rows_total"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(logits["truncated"], true);
    let loss = &r["loss#1"];
    assert_eq!(
        (loss["shape"].clone(), loss["numel"].as_u64()),
        (serde_json::json!([]), Some(1))
    );
    assert_eq!(loss["stats"]["mean"], 2.5);
    assert_eq!(loss["dtype"], "float64");

    // The saved tensor: one safetensors tensor, the first row's logical bfloat16 values.
    let bytes = std::fs::read(b.join("rank0/match2-occ1/tensors/logits#1.safetensors")).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    assert_eq!(header["logits#1"]["dtype"], "BF16");
    assert_eq!(header["logits#1"]["shape"], serde_json::json!([1, 5]));
    let values: Vec<f32> = bytes[8 + header_len..]
        .chunks(2)
        .map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16))
        .collect();
    assert_eq!(values, [-2.0, -1.5, -1.0, -0.5, 0.0]);

    // scan: the first non-finite stage, and the stride conflict of the column-major misreading
    // (the transpose and the slice alias the cache without a conflict).
    let (status, scan, text) = dumpview(&["scan", b.to_str().unwrap(), "--json"]);
    assert_eq!(status, 1, "a finding exits 1: {text}");
    let window = &scan["windows"][0];
    assert_eq!(window["first_nonfinite"]["key"], "attn.scores#1");
    assert_eq!(window["first_nonfinite"]["nan_count"], 1);
    assert_eq!(window["first_nonfinite"]["inf_count"], 1);
    let group = &window["alias_groups"][0];
    assert_eq!(group["stride_conflict"], true, "{text}");
    assert_eq!(group["storage_id"], 7);
    let members: Vec<&str> = group["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        members,
        ["kv.cache#1", "kv.cache.T#1", "kv.slice#1", "kv.misread#1"]
    );
    let conflicts: Vec<(&str, &str)> = group["conflicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| (pair[0].as_str().unwrap(), pair[1].as_str().unwrap()))
        .collect();
    assert!(
        conflicts.contains(&("kv.cache#1", "kv.misread#1")),
        "{conflicts:?}"
    );
    assert!(
        !conflicts.contains(&("kv.cache#1", "kv.cache.T#1")),
        "{conflicts:?}"
    );
    assert_eq!(scan["warnings"], serde_json::json!([]), "{text}");
    // diff: the first divergence is mlp.out, scaled by 1.5 in run b.
    let (status, diff, text) =
        dumpview(&["diff", a.to_str().unwrap(), b.to_str().unwrap(), "--json"]);
    assert_eq!(status, 1, "{text}");
    let window = &diff["diff"]["windows"][0];
    let first = window["first_divergence"]
        .as_u64()
        .expect("a first divergence") as usize;
    assert_eq!(window["pairs"][first]["key"], "mlp.out#1", "{text}");
    assert_eq!(
        window["identity"]["kind"], "same",
        "token ids recorded by dp_arm's metadata"
    );
    assert_eq!(
        window["first_nonfinite_b"]["key"], "attn.scores#1",
        "{text}"
    );

    // Running again into the same directory never overwrites: attempt 2 beside attempt 1.
    let before = std::fs::read(a.join("rank0/match2-occ1/manifest.json")).unwrap();
    let again = host_run(&exe, "a", &a);
    assert!(
        again.stderr.contains("already holds a dump"),
        "{}",
        again.stderr
    );
    assert_eq!(
        std::fs::read(a.join("rank0/match2-occ1/manifest.json")).unwrap(),
        before
    );
    let second = read_json(&a.join("rank0/match2-occ1.2/manifest.json"));
    assert_eq!(second["attempt"], 2);
}

#[test]
fn an_invalid_environment_disarms_with_a_status() {
    let Some(tc) = toolchain() else { return };
    let dir = tempdir();
    let exe = dir.path().join("host_e2e");
    tc.driver("host_e2e.c", &exe, &[]);
    let out = dir.path().join("out");
    let run = run(
        &exe,
        &["a"],
        &[
            ("DUMP_PROBE", "1"),
            ("DUMP_PROBE_DIR", out.to_str().unwrap()),
            ("DUMP_PROBE_MATCH", "0"),
        ],
    );
    assert_eq!(run.int("open"), -13, "DP_ERR_CONFIG");
    assert!(
        run.fact("open.error")
            .contains("DUMP_PROBE_MATCH=\"0\" must be a positive integer")
    );
    assert_eq!(
        run.int("capture.embed"),
        0,
        "a disarmed session's calls are no-ops"
    );
    assert_eq!(run.int("finish"), 0);
    assert!(!out.exists());
}

/// Σ|x| tolerance of a statistic: 4·u·√n·Σ|x| (u = 2⁻²⁴) for the Python probe's float32
/// reductions, 1e-12·Σ|x| for float64 ones.
fn tolerance(abs_sum: f64, numel: f64, wide: bool) -> f64 {
    if wide {
        1e-12 * abs_sum
    } else {
        4.0 * 2f64.powi(-24) * numel.sqrt() * abs_sum
    }
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) if s == "nan" => Some(f64::NAN),
        Value::String(s) if s == "inf" => Some(f64::INFINITY),
        Value::String(s) if s == "-inf" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

#[test]
fn python_and_native_probes_agree_on_the_same_values() {
    let Some(tc) = toolchain() else { return };
    let python =
        std::env::var("DUMPVIEW_PYTHON").unwrap_or_else(|_| format!("{REPO}/.venv/bin/python"));
    let has_torch = Command::new(&python)
        .args(["-c", "import torch"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_torch {
        eprintln!(
            "skipped: no Python with torch at {python} (run scripts/ensure-venv.sh) for the Python-vs-native comparison"
        );
        return;
    }
    let dir = tempdir();
    let views = dir.path().join("views");
    let py_out = dir.path().join("py");
    let native_out = dir.path().join("native");
    let output = Command::new(&python)
        .arg(native("python_side.py"))
        .arg(format!("{REPO}/assets/dump_probe.py"))
        .arg(&views)
        .env("DUMP_PROBE", "1")
        .env("DUMP_PROBE_DIR", &py_out)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let exe = dir.path().join("replay_views");
    tc.driver("replay_views.c", &exe, &[]);
    let run = run(
        &exe,
        &[views.to_str().unwrap()],
        &[
            ("DUMP_PROBE", "1"),
            ("DUMP_PROBE_DIR", native_out.to_str().unwrap()),
        ],
    );
    assert_eq!(run.int("finish"), 0, "{}", run.fact("finish.error"));
    let py = read_json(&py_out.join("rank0/match1-occ1/manifest.json"));
    let nat = read_json(&native_out.join("rank0/match1-occ1/manifest.json"));
    let sums = read_json(&views.join("abs_sums.json"));
    assert_eq!(stages(&py), stages(&nat));
    assert!(stages(&nat).len() >= 18, "{:?}", stages(&nat));
    let (py_records, nat_records) = (records(&py), records(&nat));
    let mut compared = 0;
    for (key, p) in &py_records {
        let n = &nat_records[key];
        for field in [
            "dtype",
            "shape",
            "stride",
            "storage_offset",
            "element_size",
            "numel",
            "is_contiguous",
        ] {
            assert_eq!(p[field], n[field], "{key}: {field}");
        }
        if p["stats"].is_null() {
            // The Python probe could not reduce this dtype on this device (float8 on cpu); the
            // native one decodes it by table.
            assert!(key.starts_with("f8"), "{key}: Python stats null");
            assert!(n["stats"]["finite_count"].as_u64().unwrap() > 0, "{key}");
            continue;
        }
        let (ps, ns) = (&p["stats"], &n["stats"]);
        for exact in [
            "nan_count",
            "inf_count",
            "finite_count",
            "min",
            "max",
            "max_abs",
        ] {
            assert_eq!(ps[exact], ns[exact], "{key}: {exact}");
        }
        let stage = key.split('#').next().unwrap();
        let abs_sum = sums[stage]["abs_sum"].as_f64().unwrap();
        let wide = sums[stage]["wide"].as_bool().unwrap();
        let numel = n["numel"].as_f64().unwrap();
        let finite = ns["finite_count"].as_f64().unwrap();
        let tol = tolerance(abs_sum, numel, wide);
        let sum = |s: &Value| number(&s["mean"]).unwrap() * finite;
        for (what, a, b) in [
            ("sum", sum(ps), sum(ns)),
            ("l2", number(&ps["l2"]).unwrap(), number(&ns["l2"]).unwrap()),
            (
                "pos_checksum",
                number(&ps["pos_checksum"]).unwrap(),
                number(&ns["pos_checksum"]).unwrap(),
            ),
        ] {
            // The mean's division adds one rounding on each side.
            let slack = tol + 4.0 * f64::EPSILON * a.abs().max(b.abs());
            assert!(
                (a - b).abs() <= slack,
                "{key}: {what} python {a} native {b} (tolerance {slack})"
            );
        }
        compared += 1;
    }
    assert!(compared >= 16, "only {compared} stages compared");
}

/// The mocks, compiled once per test into `dir`: (acl library dir, cuda library dir).
fn mocks(tc: &Toolchain, dir: &Path) -> (PathBuf, PathBuf) {
    let acl = dir.join("acl");
    tc.mock("mock_acl.c", &acl.join("libascendcl.so"), "libascendcl.so");
    let cuda = dir.join("cuda");
    tc.mock(
        "mock_cudart.c",
        &cuda.join("libcudart.so.12"),
        "libcudart.so.12",
    );
    // The development name, as a link: the loader then sees one file whichever name opens it.
    std::os::unix::fs::symlink("libcudart.so.12", cuda.join("libcudart.so")).unwrap();
    (acl, cuda)
}

struct MockCase {
    exe: PathBuf,
    lib_dir: PathBuf,
    lib: PathBuf,
    device: &'static str,
    backend: &'static str,
    out: PathBuf,
}

impl MockCase {
    fn new(tc: &Toolchain, dir: &Path, backend: &'static str) -> MockCase {
        let (acl, cuda) = mocks(tc, dir);
        let exe = dir.join("mock_driver");
        tc.driver("mock_driver.c", &exe, &[]);
        let (lib_dir, lib, device) = if backend == "acl" {
            (acl.clone(), acl.join("libascendcl.so"), "npu")
        } else {
            (cuda.clone(), cuda.join("libcudart.so.12"), "cuda")
        };
        MockCase {
            exe,
            lib_dir,
            lib,
            device,
            backend,
            out: dir.join("out"),
        }
    }

    fn run(&self, scenario: &str, env: &[(&str, &str)]) -> Run {
        let mut all = vec![
            ("DUMP_PROBE", "1"),
            ("DUMP_PROBE_DIR", self.out.to_str().unwrap()),
            ("DUMP_PROBE_BACKEND", self.backend),
            ("LD_LIBRARY_PATH", self.lib_dir.to_str().unwrap()),
        ];
        all.extend_from_slice(env);
        run(
            &self.exe,
            &[scenario, self.lib.to_str().unwrap(), self.device],
            &all,
        )
    }

    fn manifest(&self, attempt: &str) -> Value {
        read_json(
            &self
                .out
                .join(format!("rank0/match1-occ1{attempt}/manifest.json")),
        )
    }
}

fn copies_are_asynchronous_and_synchronized_once_per_stream(backend: &'static str) {
    let Some(tc) = toolchain() else { return };
    let dir = tempdir();
    let case = MockCase::new(&tc, dir.path(), backend);
    let run = case.run("copies", &[]);
    for capture in ["a", "b", "c", "host", "e"] {
        assert_eq!(
            run.int(&format!("capture.{capture}")),
            0,
            "{capture}: {}",
            run.fact(&format!("capture.{capture}.error"))
        );
    }
    // Capture enqueued four device copies (the host tensor is copied by the probe) and
    // synchronized nothing; the mock performs none until a stream is synchronized.
    assert_eq!(run.int("captured.memcpy_async"), 4);
    assert_eq!(run.int("captured.synchronize"), 0);
    assert_eq!(run.int("captured.pending_copies"), 4);
    assert_eq!(
        run.int("captured.bad_kind"),
        0,
        "every copy is device-to-host"
    );
    assert_eq!(run.int("captured.bad_destmax"), 0);
    assert_eq!(
        run.int("captured.capture_query"),
        4,
        "each device capture asks whether its stream is captured"
    );
    assert_eq!(
        run.int("captured.malloc_host"),
        1,
        "one pinned chunk for the window"
    );
    // finish: one synchronize per stream used (two streams and the default one), every copy done:
    // 128 (a) + 64 (b) + 44 (c: 11 elements of span) + 20 (e) bytes.
    assert_eq!(run.int("finish"), 0);
    assert_eq!(run.int("finished.synchronize"), 3);
    assert_eq!(
        (
            run.int("finished.syncs_of_stream0"),
            run.int("finished.syncs_of_stream1"),
            run.int("finished.syncs_of_stream2")
        ),
        (1, 1, 1)
    );
    assert_eq!(run.int("finished.pending_copies"), 0);
    assert_eq!(run.int("finished.copied_bytes"), 256);
    // A second session's window on stream 0 synchronizes stream 0 once more and no other.
    assert_eq!(
        (
            run.int("second.syncs_of_stream0"),
            run.int("second.syncs_of_stream1"),
            run.int("second.syncs_of_stream2")
        ),
        (2, 1, 1)
    );
    // Close frees every pinned chunk.
    assert_eq!(run.int("closed.live_allocs"), 0);
    assert_eq!(run.int("closed.free_host"), run.int("closed.malloc_host"));

    // The statistics are those of the data, so they were computed after the synchronize.
    let manifest = case.manifest("");
    assert_eq!(manifest["backend"], backend);
    let r = records(&manifest);
    let device = if backend == "acl" { "npu:0" } else { "cuda:0" };
    assert_eq!(r["a#1"]["device"], device);
    assert_eq!(r["a#1"]["stats"]["max"], 15.5);
    assert_eq!(r["b#1"]["stats"]["min"], -15.0);
    // c = a[0:2, 2:5] at offset 2: 1, 1.5, 2 and 5, 5.5, 6.
    assert_eq!(
        (
            r["c#1"]["stats"]["min"].as_f64(),
            r["c#1"]["stats"]["max"].as_f64()
        ),
        (Some(1.0), Some(6.0))
    );
    assert_eq!(r["host#1"]["device"], "cpu");
    assert_eq!(r["host#1"]["stats"]["mean"], 8.0);
    assert_eq!(r["e#1"]["dtype"], "int32");
    assert_eq!(r["e#1"]["stats"]["max"], 400.0);
    assert_eq!(manifest["staged_bytes"], 256 + 12);
    let second = case.manifest(".2");
    assert_eq!(second["attempt"], 2);
    assert_eq!(records(&second)["b#1"]["stats"]["max"], 0.0);
}

#[test]
fn acl_copies_are_asynchronous_and_synchronized_once_per_stream() {
    copies_are_asynchronous_and_synchronized_once_per_stream("acl");
}

#[test]
fn cuda_copies_are_asynchronous_and_synchronized_once_per_stream() {
    copies_are_asynchronous_and_synchronized_once_per_stream("cuda");
}

#[test]
fn captures_over_the_budget_are_skipped_and_recorded() {
    let Some(tc) = toolchain() else { return };
    let dir = tempdir();
    let case = MockCase::new(&tc, dir.path(), "acl");
    let run = case.run("budget", &[]);
    assert_eq!(
        (run.int("capture.first"), run.int("capture.second")),
        (0, 0)
    );
    assert_eq!(run.int("capture.third"), -9, "DP_ERR_OVER_BUDGET");
    assert!(
        run.fact("capture.third.error")
            .contains("third#1 (seq 2) skipped: its span of 400 bytes is over the 200 bytes left"),
        "{}",
        run.fact("capture.third.error")
    );
    assert_eq!(run.int("capture.fourth"), 0, "a smaller capture still fits");
    // A 4-byte span with 1000 elements: the budget bounds the statistics' work too.
    assert_eq!(run.int("capture.broadcast"), -9);
    assert!(
        run.fact("capture.broadcast.error").contains(
            "broadcast#1 (seq 4) skipped: its 1000 elements are 4000 bytes as a dense tensor (read from a span of 4 bytes)"
        ),
        "{}",
        run.fact("capture.broadcast.error")
    );
    assert_eq!(run.int("captured.memcpy_async"), 3);
    let manifest = case.manifest("");
    assert_eq!(manifest["budget_bytes"], 1000);
    assert_eq!(manifest["staged_bytes"], 900);
    assert_eq!(
        manifest["skipped_over_budget"],
        serde_json::json!([
            {"seq": 2, "stage": "third", "occurrence": 1, "bytes": 400, "budget_left": 200},
            {"seq": 4, "stage": "broadcast", "occurrence": 1, "bytes": 4000, "budget_left": 100}
        ])
    );
    let seqs: Vec<u64> = manifest["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [0, 1, 3]);
    assert_eq!(
        manifest["warnings"],
        serde_json::json!([]),
        "a budget skip is not a runtime warning"
    );

    // dumpview says so: a lost-evidence warning naming the stage, and scan exits 1.
    let (status, scan, text) = dumpview(&["scan", case.out.to_str().unwrap(), "--json"]);
    assert_eq!(status, 1, "{text}");
    let warnings = scan["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w["kind"] == "lost_evidence"
            && w["message"]
                .as_str()
                .unwrap()
                .contains("third#1 (seq 2) was not captured: over the staging budget")),
        "{text}"
    );
}

#[test]
fn a_failing_copy_is_a_status_and_a_warning() {
    for backend in ["acl", "cuda"] {
        let Some(tc) = toolchain() else { return };
        let dir = tempdir();
        let case = MockCase::new(&tc, dir.path(), backend);
        let run = case.run("fail", &[]);
        assert_eq!(run.int("capture.a"), 0);
        assert_eq!(run.int("capture.b"), -11, "DP_ERR_RUNTIME");
        let error = run.fact("capture.b.error");
        let expected = if backend == "acl" {
            "b#1 (seq 1) not captured: aclrtMemcpyAsync(64 bytes, ACL_MEMCPY_DEVICE_TO_HOST"
        } else {
            "b#1 (seq 1) not captured: cudaMemcpyAsync(64 bytes, cudaMemcpyDeviceToHost"
        };
        assert!(error.starts_with(expected), "{error}");
        let code = if backend == "acl" {
            "failed with ACL error 107000 (ACL_ERROR_RT_PARAM_INVALID): EE1001: mock: the copy was refused"
        } else {
            "failed with CUDA error 1 (invalid argument)"
        };
        assert!(error.ends_with(code), "{error}");
        assert!(
            run.stderr
                .contains("dump_probe: warning: b#1 (seq 1) not captured"),
            "{}",
            run.stderr
        );
        assert_eq!(run.int("capture.c"), 0, "later captures go on");
        assert_eq!(run.int("finish"), 0);
        let manifest = case.manifest("");
        assert_eq!(manifest["warnings"], serde_json::json!([error]));
        assert_eq!(stages(&manifest), ["a", "c", "host", "e"]);
        let (status, scan, text) = dumpview(&["scan", case.out.to_str().unwrap(), "--json"]);
        assert_eq!(status, 1, "{text}");
        assert!(
            scan["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["message"].as_str().unwrap().contains(expected)),
            "{text}"
        );
    }
}

#[test]
fn a_stream_under_graph_capture_is_refused() {
    for backend in ["acl", "cuda"] {
        let Some(tc) = toolchain() else { return };
        let dir = tempdir();
        let case = MockCase::new(&tc, dir.path(), backend);
        let run = case.run("graph", &[]);
        assert_eq!(run.int("capture.a"), 0);
        assert_eq!(run.int("capture.b"), -10, "DP_ERR_GRAPH_CAPTURE");
        assert!(
            run.fact("capture.b.error")
                .contains("is being captured into a graph")
        );
        assert_eq!(
            run.int("captured.memcpy_async"),
            3,
            "nothing enqueued on the captured stream"
        );
        assert_eq!(run.int("finished.syncs_of_stream1"), 0, "nor synchronized");
    }
}

#[test]
fn auto_picks_a_loaded_runtime_that_reports_a_device() {
    let Some(tc) = toolchain() else { return };
    let dir = tempdir();
    for (backend, devices, scenario, expected, reason) in [
        (
            "acl",
            "1",
            "auto",
            "acl",
            "auto: libascendcl.so is loaded and reports 1 device",
        ),
        (
            "acl",
            "0",
            "auto",
            "host",
            "libascendcl.so is loaded but reports 0 devices",
        ),
        // (The development name finds the loaded libcudart.so.12 through its link on LD_LIBRARY_PATH.)
        (
            "cuda",
            "2",
            "auto",
            "cuda",
            "is loaded and reports 2 devices",
        ),
        (
            "cuda",
            "0",
            "auto",
            "host",
            "is loaded but reports no device (cudaGetDeviceCount failed with CUDA error 100 (no CUDA-capable device is detected))",
        ),
        // On the loader's path but not loaded: auto never loads a runtime.
        ("acl", "1", "auto-none", "host", "auto: no device runtime"),
        ("cuda", "1", "auto-none", "host", "auto: no device runtime"),
    ] {
        let sub = dir.path().join(format!("{backend}-{devices}-{scenario}"));
        let mut case = MockCase::new(&tc, &sub, backend);
        case.backend = "auto";
        let run = case.run(scenario, &[("MOCK_DEVICE_COUNT", devices)]);
        let manifest = case.manifest("");
        assert_eq!(
            manifest["backend"], expected,
            "{backend} {devices} {scenario}"
        );
        assert!(
            manifest["backend_reason"]
                .as_str()
                .unwrap()
                .contains(reason),
            "{}",
            manifest["backend_reason"]
        );
        let device_status = run.int("capture.device");
        if expected == "host" {
            assert_eq!(
                device_status, -8,
                "DP_ERR_DEVICE: the host backend cannot read device memory"
            );
            assert_eq!(stages(&manifest), ["host"]);
        } else {
            assert_eq!(device_status, 0);
            assert_eq!(stages(&manifest), ["device", "host"]);
        }
    }
}

/// The statuses bad_calls.c must get, by fact name.
const BAD_CALLS: [(&str, i64); 30] = [
    ("null.open_out", -1),
    ("null.arm", -1),
    ("null.capture", -1),
    ("null.finish", -1),
    ("open", 0),
    ("arm.null_label", -1),
    ("arm.newline_label", -6),
    ("arm.metadata_array", -7),
    ("arm.metadata_broken", -7),
    ("arm", 0),
    ("capture.null_stage", -1),
    ("capture.null_tensor", -1),
    ("capture.newline_stage", -6),
    ("capture.empty_stage", -6),
    ("capture.non_utf8_stage", -6),
    ("capture.struct_size", -2),
    ("capture.dtype", -3),
    ("capture.ndim_17", -4),
    ("capture.ndim_negative", -4),
    ("capture.negative_stride", -5),
    ("capture.span_overflow", -5),
    ("capture.stride_overflow", -5),
    ("capture.beyond_storage", -5),
    ("capture.null_data", -1),
    ("capture.null_shape", -1),
    ("capture.unknown_device", -8),
    ("capture.npu_on_host_backend", -8),
    ("capture.good", 0),
    ("capture.empty", 0),
    ("finish", 0),
];

fn check_bad_calls(run: &Run, out: &Path) {
    for (name, status) in BAD_CALLS {
        assert_eq!(
            run.int(name),
            status,
            "{name}: {}",
            run.fact(&format!("{name}.error"))
        );
        if status != 0 {
            assert!(
                !run.fact(&format!("{name}.error")).is_empty(),
                "{name} has no message"
            );
        }
    }
    for name in ["closed.arm", "closed.capture", "closed.finish"] {
        assert_eq!(run.int(name), -15, "{name}: DP_ERR_CLOSED");
    }
    assert_eq!(run.int("finish.again"), 0);
    assert_eq!(run.int("null.last_error_is_string"), 1);
    assert_eq!(run.fact("null.finish.error"), "session is NULL");
    assert!(
        run.fact("capture.newline_stage.error")
            .contains("control character '\\n'")
    );
    assert!(
        run.fact("capture.span_overflow.error")
            .contains("overflows int64")
    );
    assert!(
        run.fact("capture.negative_stride.error")
            .contains("strides[0] is negative (-1)")
    );
    assert!(
        run.fact("capture.beyond_storage.error")
            .contains("up to byte 36 of its storage, beyond storage_bytes 32")
    );
    assert!(
        run.fact("capture.struct_size.error")
            .contains("struct_size is 8")
    );
    // Only the good captures were recorded; the bad calls consumed no sequence number.
    let manifest = read_json(&out.join("rank0/match1-occ1/manifest.json"));
    assert_eq!(stages(&manifest), ["x", "empty"]);
    let r = records(&manifest);
    assert_eq!(r["x#1"]["seq"], 0);
    assert_eq!(r["empty#1"]["stats"], Value::Null);
    assert_eq!(r["empty#1"]["numel"], 0);
}

#[test]
fn bad_calls_get_a_status_each_and_no_crash() {
    let Some(tc) = toolchain() else { return };
    let dir = tempdir();
    let exe = dir.path().join("bad_calls");
    tc.driver("bad_calls.c", &exe, &[]);
    let out = dir.path().join("out");
    let run = run(
        &exe,
        &[],
        &[
            ("DUMP_PROBE", "1"),
            ("DUMP_PROBE_DIR", out.to_str().unwrap()),
            ("DUMP_PROBE_BACKEND", "host"),
        ],
    );
    check_bad_calls(&run, &out);
}

#[test]
fn bad_calls_under_address_sanitizer() {
    let Some(tc) = toolchain() else { return };
    let dir = tempdir();
    // Does this toolchain build and run an ASan program at all?
    let probe_src = dir.path().join("asan_probe.c");
    std::fs::write(&probe_src, "int main(void) { return 0; }\n").unwrap();
    let probe_exe = dir.path().join("asan_probe");
    let works = Command::new(&tc.cc)
        .args(["-fsanitize=address,undefined", "-o"])
        .arg(&probe_exe)
        .arg(&probe_src)
        .output()
        .is_ok_and(|o| o.status.success())
        && Command::new(&probe_exe)
            .output()
            .is_ok_and(|o| o.status.success());
    if !works {
        eprintln!(
            "skipped: {} cannot build and run -fsanitize=address,undefined programs here",
            tc.cc
        );
        return;
    }
    let exe = dir.path().join("bad_calls_asan");
    tc.driver(
        "bad_calls.c",
        &exe,
        &["-fsanitize=address,undefined", "-fno-omit-frame-pointer"],
    );
    let out = dir.path().join("out");
    // Leak checking is off: a closed session's shell is kept on purpose (late calls stay
    // safe), and the probe's thread pool lives until exit.
    let run = run(
        &exe,
        &[],
        &[
            ("DUMP_PROBE", "1"),
            ("DUMP_PROBE_DIR", out.to_str().unwrap()),
            ("DUMP_PROBE_BACKEND", "host"),
            (
                "ASAN_OPTIONS",
                "detect_leaks=0:abort_on_error=0:halt_on_error=1",
            ),
            ("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1"),
        ],
    );
    assert!(
        !run.stderr.contains("ERROR: AddressSanitizer"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("runtime error:"), "{}", run.stderr);
    assert!(run.output.status.success());
    check_bad_calls(&run, &out);
}

#[test]
fn probe_install_native_writes_the_header_and_the_library_once() {
    let dir = tempdir();
    let pkg = dir.path().join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    let install = || {
        Command::new(env!("CARGO_BIN_EXE_dumpview"))
            .args(["probe", "install"])
            .arg(&pkg)
            .arg("--native")
            .output()
            .unwrap()
    };
    let first = install();
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(
        stdout.contains("dump_probe.h") && stdout.contains("libdump_probe.so"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(pkg.join("dump_probe.h")).unwrap(),
        std::fs::read_to_string(format!("{REPO}/assets/dump_probe.h")).unwrap()
    );
    let second = install();
    assert_eq!(second.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&second.stderr).contains("already exists"));
    // What was installed is enough to build and run a caller.
    let Some(tc) = toolchain() else { return };
    let exe = dir.path().join("abi_check");
    let output = Command::new(&tc.cc)
        .args(["-std=c11", "-Wall", "-Werror"])
        .arg(format!("-I{}", pkg.display()))
        .arg(format!("-I{REPO}/tests/native"))
        .arg(native("abi_check.c"))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", pkg.display()))
        .arg(format!("-Wl,-rpath,{}", pkg.display()))
        .arg("-ldump_probe")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let run = run(&exe, &[], &[]);
    assert!(run.stdout.contains("abi ok"), "{}", run.stdout);
}

/// The project's Python with `module`, or `None` after saying why the test is skipped.
fn python_with(module: &str, why: &str) -> Option<String> {
    let python =
        std::env::var("DUMPVIEW_PYTHON").unwrap_or_else(|_| format!("{REPO}/.venv/bin/python"));
    let ok = Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!(
            "skipped: no Python with {module} at {python} (run scripts/ensure-venv.sh) for {why}"
        );
        return None;
    }
    Some(python)
}

#[test]
fn native_manifests_follow_the_schema() {
    let Some(tc) = toolchain() else { return };
    let Some(python) = python_with(
        "jsonschema",
        "validating native manifests against assets/manifest.schema.json",
    ) else {
        return;
    };
    let dir = tempdir();
    let exe = dir.path().join("host_e2e");
    tc.driver("host_e2e.c", &exe, &[]);
    host_run(&exe, "b", &dir.path().join("e2e"));
    let mut manifests = vec![dir.path().join("e2e/rank0/match2-occ1/manifest.json")];
    for scenario in ["budget", "fail"] {
        let sub = dir.path().join(scenario);
        let case = MockCase::new(&tc, &sub, "acl");
        case.run(scenario, &[]);
        manifests.push(case.out.join("rank0/match1-occ1/manifest.json"));
    }
    let script = "import json, sys, jsonschema\n\
        schema = json.load(open(sys.argv[1]))\n\
        for path in sys.argv[2:]:\n\
        \x20   jsonschema.validate(json.load(open(path)), schema)\n\
        \x20   print('valid', path)\n";
    let output = Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(format!("{REPO}/assets/manifest.schema.json"))
        .args(&manifests)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("valid ")).count(),
        3,
        "{stdout}"
    );
    // The budget and fail manifests carry the new fields the schema now describes.
    let budget = read_json(&manifests[1]);
    assert_eq!(budget["skipped_over_budget"].as_array().unwrap().len(), 2);
    let fail = read_json(&manifests[2]);
    assert_eq!(fail["warnings"].as_array().unwrap().len(), 1);
}

/// The CUDA runtime the project's pip torch wheel ships, if present.
fn wheel_cudart() -> Option<PathBuf> {
    let site = Path::new(REPO).join(".venv/lib");
    let mut found = Vec::new();
    let mut stack = vec![site];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() && !entry.file_type().is_ok_and(|t| t.is_symlink()) {
                stack.push(path);
            } else if name.starts_with("libcudart.so.") {
                found.push(path);
            }
        }
    }
    found.sort();
    found.pop()
}

#[test]
fn auto_with_the_wheels_real_cuda_runtime_loaded_asks_it_for_devices() {
    let Some(tc) = toolchain() else { return };
    let Some(cudart) = wheel_cudart() else {
        eprintln!("skipped: no libcudart.so.* under {REPO}/.venv (the pip torch wheel ships one)");
        return;
    };
    let dir = tempdir();
    let exe = dir.path().join("mock_driver");
    tc.driver("mock_driver.c", &exe, &[]);
    let out = dir.path().join("out");
    let run = run(
        &exe,
        &["auto-real", cudart.to_str().unwrap(), "cuda"],
        &[
            ("DUMP_PROBE", "1"),
            ("DUMP_PROBE_DIR", out.to_str().unwrap()),
            ("DUMP_PROBE_BACKEND", "auto"),
        ],
    );
    assert_eq!(run.int("finish"), 0);
    let manifest = read_json(&out.join("rank0/match1-occ1/manifest.json"));
    let reason = manifest["backend_reason"].as_str().unwrap();
    let name = cudart.file_name().unwrap().to_string_lossy().into_owned();
    assert!(reason.contains(&format!("{name} is loaded")), "{reason}");
    // Loaded is not enough: on a machine without a GPU the runtime reports no device and the
    // probe stays on the host; with one, it takes cuda.
    if reason.contains("reports no device") || reason.contains("reports 0 devices") {
        assert_eq!(manifest["backend"], "host", "{reason}");
    } else {
        assert_eq!(manifest["backend"], "cuda", "{reason}");
    }
    eprintln!("backend_reason with the wheel's runtime: {reason}");
}

#[test]
fn one_session_shared_by_threads_records_every_capture_once() {
    let Some(tc) = toolchain() else { return };
    let dir = tempdir();
    let exe = dir.path().join("threads");
    tc.driver("threads.c", &exe, &["-pthread"]);
    let out = dir.path().join("out");
    let run = run(
        &exe,
        &[],
        &[
            ("DUMP_PROBE", "1"),
            ("DUMP_PROBE_DIR", out.to_str().unwrap()),
            ("DUMP_PROBE_BACKEND", "host"),
        ],
    );
    assert_eq!((run.int("failures"), run.int("finish")), (0, 0));
    let manifest = read_json(&out.join("rank0/match1-occ1/manifest.json"));
    let all = manifest["records"].as_array().unwrap();
    assert_eq!(all.len(), 800);
    // seq is the order captures were taken in, 0..800 without a gap or a repeat; each thread's
    // stage has occurrences 1..=100 in that order, and its own values.
    let seqs: Vec<u64> = all.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..800).collect::<Vec<_>>());
    for k in 0..8 {
        let stage = format!("thread{k}");
        let mine: Vec<&Value> = all
            .iter()
            .filter(|r| r["stage"] == stage.as_str())
            .collect();
        let occurrences: Vec<u64> = mine
            .iter()
            .map(|r| r["occurrence"].as_u64().unwrap())
            .collect();
        assert_eq!(occurrences, (1..=100).collect::<Vec<_>>(), "{stage}");
        assert!(
            mine.iter().all(|r| r["stats"]["min"] == (k * 1000) as f64),
            "{stage}"
        );
    }
}

#[test]
fn a_child_forked_after_a_window_finishes_its_own() {
    let Some(tc) = toolchain() else { return };
    let dir = tempdir();
    let exe = dir.path().join("fork");
    tc.driver("fork.c", &exe, &[]);
    let (parent, child) = (dir.path().join("parent"), dir.path().join("child"));
    let run = run(
        &exe,
        &[parent.to_str().unwrap(), child.to_str().unwrap()],
        &[("DUMP_PROBE", "1"), ("DUMP_PROBE_BACKEND", "host")],
    );
    assert_eq!(run.fact("parent.finish"), "0", "{}", run.stdout);
    // The statistics' pool of the parent has no threads in the child: a hang there was an
    // alarm (signal 14) here.
    assert_eq!(
        (run.fact("child.signal"), run.fact("child.exited")),
        ("0", "0"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(run.fact("child.finish"), "0", "{}", run.stdout);
    let manifest = |root: &Path| read_json(&root.join("rank0/match1-occ1/manifest.json"));
    assert_eq!(stages(&manifest(&parent)), ["before0", "before1"]);
    assert_eq!(stages(&manifest(&child)), ["after0", "after1"]);
}

#[test]
fn a_program_that_never_closes_its_session_is_told_at_exit() {
    let Some(tc) = toolchain() else { return };
    let dir = tempdir();
    let exe = dir.path().join("no_close");
    tc.driver("no_close.c", &exe, &[]);
    let out = dir.path().join("out");
    let env = [
        ("DUMP_PROBE", "1"),
        ("DUMP_PROBE_DIR", out.to_str().unwrap()),
        ("DUMP_PROBE_BACKEND", "host"),
    ];
    let finished = run(&exe, &["finished"], &env);
    let manifest = out.join("rank0/match1-occ1/manifest.json");
    assert!(
        finished.stderr.contains(&format!(
            "dump_probe: wrote {} (1 record, 80 bytes of token rows in rows.f32)",
            manifest.display()
        )),
        "{}",
        finished.stderr
    );
    let armed = run(&exe, &["armed"], &env);
    assert!(
        armed.stderr.contains(
            "dump_probe: the window of label \"req\" is still armed at exit: dp_finish was never called, so it was not written"
        ),
        "{}",
        armed.stderr
    );
    assert!(
        !out.join("rank0/match1-occ1.2").exists(),
        "nothing more written"
    );
    // A mistyped $RANK is said, not silently rank 0.
    let mut env = env.to_vec();
    env.push(("RANK", "abc"));
    std::fs::remove_dir_all(&out).unwrap();
    let mistyped = run(&exe, &["finished"], &env);
    assert!(
        mistyped
            .stderr
            .contains("dump_probe: warning: RANK=\"abc\" is not a rank; using rank 0"),
        "{}",
        mistyped.stderr
    );
}

#[test]
fn a_forced_runtime_without_a_device_is_refused_at_open() {
    let Some(tc) = toolchain() else { return };
    let dir = tempdir();
    for backend in ["acl", "cuda"] {
        let case = MockCase::new(&tc, &dir.path().join(backend), backend);
        let run = case.run("budget", &[("MOCK_DEVICE_COUNT", "0")]);
        assert_eq!(run.int("open"), -14, "DP_ERR_BACKEND\n{}", run.stdout);
        let error = run.fact("open.error");
        assert!(
            error.starts_with(&format!("DUMP_PROBE_BACKEND={backend}: "))
                && error.contains("nothing to copy from"),
            "{error}"
        );
        // Disarmed: nothing written.
        assert!(!case.out.join("rank0").exists());
    }
}

#[test]
fn sliced_captures_checksum_in_the_full_tensors_coordinates_and_merge_back() {
    let Some(tc) = toolchain() else { return };
    let dir = tempdir();
    let exe = dir.path().join("shards");
    tc.driver("shards.c", &exe, &[]);
    let (full, tp) = (dir.path().join("full"), dir.path().join("tp"));
    let env = |out: &Path| {
        vec![
            ("DUMP_PROBE", "1".to_string()),
            ("DUMP_PROBE_DIR", out.to_str().unwrap().to_string()),
            ("DUMP_PROBE_BACKEND", "host".to_string()),
            ("DUMP_PROBE_RANKS", "all".to_string()),
        ]
    };
    let as_refs = |v: &[(&'static str, String)]| -> Vec<(&'static str, String)> { v.to_vec() };
    for (out, mode) in [(&full, "full"), (&tp, "tp")] {
        let vars = as_refs(&env(out));
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let run = run(&exe, &[out.to_str().unwrap(), mode], &vars);
        assert!(!run.stdout.contains("fact capture."), "{}", run.stdout);
        if mode == "tp" {
            for expected in [
                "bad#1 (seq 5): shard \"tp:5\": dimension 5 is out of range for a 2-d tensor; recorded without a shard",
                "typo#1 (seq 7): shard \"TP:0\": not 'tp:D', 'tp:D@OFFSET/FULL', 'cp:D', 'cp:D:zigzag', 'replicated:AXIS' or 'partial:AXIS'; recorded without a shard",
                "metadata.parallel.xp = [0,1] left out",
            ] {
                assert!(
                    run.stderr.contains(expected),
                    "{expected:?} in:\n{}",
                    run.stderr
                );
            }
        }
    }
    // Without DUMP_PROBE_RANKS=all, arm says once that the group's other rank is left out.
    let partial = dir.path().join("rank0-only");
    let only_zero = run(
        &exe,
        &[partial.to_str().unwrap(), "tp"],
        &[
            ("DUMP_PROBE", "1"),
            ("DUMP_PROBE_DIR", partial.to_str().unwrap()),
            ("DUMP_PROBE_BACKEND", "host"),
        ],
    );
    let warning = "dp_arm's parallel layout gives a tp group of 2 ranks but DUMP_PROBE_RANKS=0 selects 1 rank: \
                   stages sharded over tp will be missing evidence on the ranks left out";
    assert_eq!(
        only_zero.stderr.matches(warning).count(),
        2,
        "once per session:\n{}",
        only_zero.stderr
    );
    let whole = records(&read_json(&full.join("rank0/match1-occ1/manifest.json")));
    let ranks: Vec<Value> = (0..2)
        .map(|r| read_json(&tp.join(format!("rank{r}/match1-occ1/manifest.json"))))
        .collect();
    let pieces: Vec<HashMap<String, Value>> = ranks.iter().map(records).collect();
    for stage in ["col#1", "row#1", "uneven#1", "mid#1", "zig#1", "neg#1"] {
        let full_sum = whole[stage]["stats"]["pos_checksum"].as_f64().unwrap();
        let abs = whole[stage]["stats"]["mean"].as_f64().unwrap().abs() * 100.0 + 100.0;
        let sum: f64 = pieces
            .iter()
            .map(|p| p[stage]["stats"]["pos_checksum"].as_f64().unwrap())
            .sum();
        // float64 sums of at most 48 elements of magnitude < 20: rounding far below 1e-12.
        assert!(
            (sum - full_sum).abs() < 1e-12 * abs,
            "{stage}: the shards' checksums add up to {sum}, the full tensor's is {full_sum}"
        );
        // Local coordinates would not: the shards' local checksums differ from these.
        assert!(pieces[1][stage]["shard"].is_string(), "{stage}");
    }
    // The refused annotations: the records are kept, without `shard`, and the manifest says
    // why; a negative D is written counted from the front, as dump_probe.py writes it.
    assert!(pieces[1]["bad#1"].get("shard").is_none());
    assert!(pieces[1]["typo#1"].get("shard").is_none());
    assert_eq!(pieces[1]["neg#1"]["shard"], "tp:1");
    // The layout recorded is what was used: the unknown axis is left out.
    assert_eq!(
        ranks[1]["metadata"]["parallel"],
        serde_json::json!({"tp": [1, 2]})
    );
    let warnings = ranks[1]["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("\"tp:5\"")),
        "{warnings:?}"
    );
    // dumpview merges the slices over the group and finds the full run's values, stage by stage
    // (`bad` is per-rank on B and compared rank 0 to rank 0: the first 3 rows against all 6).
    let (code, json, text) = dumpview(&[
        "diff",
        full.to_str().unwrap(),
        tp.to_str().unwrap(),
        "--ignore",
        "^(bad|typo)$",
        "--json",
    ]);
    let window = &json["diff"]["windows"][0];
    assert!(window.is_object(), "{text}");
    assert_eq!(window["first_divergence"], Value::Null, "{text}");
    // Exit 1 for the probe's warnings about `bad` alone (README: evidence lost counts).
    let warned: Vec<&str> = json["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["message"].as_str().unwrap())
        .filter(|m| m.starts_with("the probe warned"))
        .collect();
    // bad, typo and the left-out axis, on each rank.
    assert_eq!(warned.len(), 6, "{warned:?}");
    assert!(
        warned.iter().any(|w| w.contains("shard \"tp:5\"")),
        "{warned:?}"
    );
    assert_eq!(code, 1, "{text}");
    let merged: Vec<&str> = window["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["pieces_b"].as_array().is_some_and(|a| a.len() == 2))
        .map(|p| p["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        merged,
        ["col#1", "row#1", "uneven#1", "mid#1", "zig#1", "neg#1"],
        "{text}"
    );
}

/// Token rows through the native ABI (tests/native/rows.c): `dp_arm_rows` writes the row map,
/// captures whose dimension 0 (or, declared, dimensions 0 and 1) hold the forward's rows get
/// the statistics `dp_row_stats` gives at the map's positions, bit for bit, in `rows.f32`; a
/// declared capture that does not fit, an unknown rows mode and a bad map are each said. Then
/// a request captured whole against the same request in two chunks: dumpview aligns the
/// rows and finds nothing; a changed value in the second chunk is named by stage and position.
#[test]
fn the_native_probe_writes_token_rows_that_dumpview_aligns() {
    let Some(tc) = toolchain() else { return };
    let dir = tempdir();
    let exe = dir.path().join("rows");
    tc.driver("rows.c", &exe, &[]);
    let env = |out: &Path, occurrence: &str| -> Vec<(&'static str, String)> {
        vec![
            ("DUMP_PROBE", "1".to_string()),
            ("DUMP_PROBE_DIR", out.to_str().unwrap().to_string()),
            ("DUMP_PROBE_BACKEND", "host".to_string()),
            ("DUMP_PROBE_OCCURRENCE", occurrence.to_string()),
        ]
    };
    let go = |mode: &str, out: &Path, occurrence: &str| {
        let vars = env(out, occurrence);
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        run(&exe, &[mode, out.to_str().unwrap()], &vars)
    };

    let out = dir.path().join("map");
    let ran = go("map", &out, "1");
    assert_eq!(ran.int("arm"), 0, "{}", ran.stdout);
    assert_eq!(
        ran.int("capture.short"),
        0,
        "a declared misfit is a warning, not a failure"
    );
    assert_eq!(ran.int("capture.badmode"), -5, "{}", ran.stdout);
    assert!(
        ran.stderr
            .contains("(6 records, 360 bytes of token rows in rows.f32)"),
        "{}",
        ran.stderr
    );
    let manifest = read_json(&out.join("rank0/match1-occ1/manifest.json"));
    let t = &manifest["token_rows"];
    assert_eq!(
        t["map"],
        serde_json::json!([
            {"request": "r1", "first_position": 4, "count": 2},
            {"request": null, "first_position": 0, "count": 1},
            {"request": "r0", "first_position": 0, "count": 3, "token_ids": [101, 102, 103]},
        ])
    );
    let by_stage = records(&manifest);
    let seq = |key: &str| by_stage[key]["seq"].as_u64().unwrap();
    let listed: Vec<(u64, u64, u64, Value)> = t["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r[0].as_u64().unwrap(),
                r[1].as_u64().unwrap(),
                r[2].as_u64().unwrap(),
                r[3].clone(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        vec![
            (seq("h#1"), 0, 6, serde_json::json!([0])),
            (seq("ids#1"), 6, 6, serde_json::json!([0])),
            (seq("s#1"), 12, 6, serde_json::json!([0, 1])),
        ],
        "w (3 rows), h_none and h_short have none"
    );
    assert_eq!(
        (t["rows"].as_u64(), t["bytes"].as_u64()),
        (Some(18), Some(360))
    );
    let sidecar = std::fs::read(out.join("rank0/match1-occ1/rows.f32")).unwrap();
    assert_eq!(sidecar.len(), 360);
    for r in 0..6 {
        let expected: Vec<u32> = ran
            .fact(&format!("row.{r}"))
            .split(' ')
            .map(|h| u32::from_str_radix(h, 16).unwrap())
            .collect();
        let got: Vec<u32> = (0..5)
            .map(|k| {
                let at = (r * 5 + k) * 4;
                u32::from_le_bytes(sidecar[at..at + 4].try_into().unwrap())
            })
            .collect();
        assert_eq!(got, expected, "row {r} of h");
    }
    let warnings = manifest["warnings"].to_string();
    assert!(
        warnings.contains("h_short#1 (seq 5): token rows declared in the first 1 dimension of shape [5, 8], but the forward holds 6 rows; recorded without token rows"),
        "{warnings}"
    );
    // dumpview reads the window's rows.
    let dump = dumpview::load(std::slice::from_ref(&out), &mut |_| {}).unwrap();
    let rows = dump.windows[0]
        .token_rows
        .as_ref()
        .expect("token rows read");
    assert_eq!(rows.records.len(), 3);

    // dp_arm without a map: the label is the request, its positions counted on over the
    // calls the selection left out (their first token-row capture says how many rows).
    for (occurrence, first, count) in [("1", 0, 5), ("3", 6, 1)] {
        let counted = dir.path().join(format!("counted{occurrence}"));
        let ran = go("counted", &counted, occurrence);
        let manifest =
            read_json(&counted.join(format!("rank0/match1-occ{occurrence}/manifest.json")));
        let t = &manifest["token_rows"];
        assert_eq!(t["positions_inferred"], true, "{}", ran.stderr);
        assert_eq!(
            (
                t["map"][0]["request"].as_str(),
                t["map"][0]["first_position"].as_u64(),
                t["map"][0]["count"].as_u64()
            ),
            (Some("gen"), Some(first), Some(count)),
            "{t}"
        );
        // h's rows over (0, 1); bias, without rows, has none.
        assert_eq!(t["records"].as_array().unwrap().len(), 1, "{t}");
        assert_eq!(t["records"][0][3], serde_json::json!([0, 1]));
    }

    // DUMP_PROBE_ROW_POSITIONS=0-2 keeps the first three of the prompt's five rows, with the
    // same bits as the first three rows of the whole run.
    let whole_rows = std::fs::read(dir.path().join("counted1/rank0/match1-occ1/rows.f32")).unwrap();
    let bounded = dir.path().join("counted-bounded");
    let mut vars = env(&bounded, "1");
    vars.push(("DUMP_PROBE_ROW_POSITIONS", "0-2".to_string()));
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let ran = run(&exe, &["counted", bounded.to_str().unwrap()], &vars);
    let m = read_json(&bounded.join("rank0/match1-occ1/manifest.json"));
    assert_eq!(
        m["token_rows"]["records"][0][4],
        serde_json::json!([[0, 0], [0, 1], [0, 2]]),
        "{}",
        ran.stderr
    );
    let kept = std::fs::read(bounded.join("rank0/match1-occ1/rows.f32")).unwrap();
    assert_eq!(kept, whole_rows[..3 * 20]);
    // The same over dimension 0 alone ([6, 8] captures of "whole"), where only the kept
    // leading rows are computed: each record's first three rows, bit for bit.
    let full = dir.path().join("whole-full");
    go("whole", &full, "1");
    let full_rows = std::fs::read(full.join("rank0/match1-occ1/rows.f32")).unwrap();
    let bounded = dir.path().join("whole-bounded");
    let mut vars = env(&bounded, "1");
    vars.push(("DUMP_PROBE_ROW_POSITIONS", "0-2".to_string()));
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    run(&exe, &["whole", bounded.to_str().unwrap()], &vars);
    let kept = std::fs::read(bounded.join("rank0/match1-occ1/rows.f32")).unwrap();
    let first_three: Vec<u8> = full_rows
        .chunks(6 * 20)
        .flat_map(|record| record[..3 * 20].to_vec())
        .collect();
    assert_eq!(kept, first_three);

    // DUMP_PROBE_REQUEST: the forwards whose map holds the request, counted for
    // DUMP_PROBE_OCCURRENCE (the second forward of "gen": position 5); a request no forward
    // holds captures nothing; a batch whose map lists the request is selected by it.
    for (request, mode, written) in [
        ("gen", "counted", Some((2, 5))),
        ("other", "counted", None),
        ("r0", "map", Some((1, 0))),
    ] {
        let out = dir.path().join(format!("request-{request}"));
        let occurrence = if mode == "counted" { "2" } else { "1" };
        let mut vars = env(&out, occurrence);
        vars.push(("DUMP_PROBE_REQUEST", request.to_string()));
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let ran = run(&exe, &[mode, out.to_str().unwrap()], &vars);
        let manifests = std::fs::read_dir(out.join("rank0")).map_or(0, |d| d.count());
        match written {
            None => assert_eq!(manifests, 0, "{}", ran.stderr),
            Some((occ, first)) => {
                assert_eq!(manifests, 1, "{}", ran.stderr);
                let m = read_json(&out.join(format!("rank0/match1-occ{occ}/manifest.json")));
                let held = m["token_rows"]["map"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|e| e["request"] == request)
                    .cloned()
                    .unwrap_or_default();
                assert_eq!(held["first_position"].as_u64(), Some(first), "{m}");
            }
        }
    }

    let bad = dir.path().join("bad");
    let ran = go("bad", &bad, "1");
    assert_eq!(ran.int("arm"), -7, "{}", ran.stdout);
    assert!(
        ran.fact("arm.error")
            .contains("entry 0: a negative count (-1)"),
        "{}",
        ran.stdout
    );
    assert_eq!(ran.int("capture"), 0);
    let manifest = read_json(&bad.join("rank0/match1-occ1/manifest.json"));
    assert!(manifest.get("token_rows").is_none());
    assert_eq!(manifest["records"].as_array().unwrap().len(), 1);

    let huge = dir.path().join("huge");
    let ran = go("huge", &huge, "1");
    assert_eq!(ran.int("arm.count"), -7, "{}", ran.stdout);
    assert!(
        ran.fact("arm.count.error")
            .contains("more than 16777216 rows in the map"),
        "{}",
        ran.stdout
    );
    assert_eq!(ran.int("arm.n_rows"), 0, "{}", ran.stdout);

    // Column slices over a tp group of 2: their rows merge into the whole run's.
    let tp = dir.path().join("tp");
    let vars = [
        ("DUMP_PROBE", "1"),
        ("DUMP_PROBE_DIR", tp.to_str().unwrap()),
        ("DUMP_PROBE_BACKEND", "host"),
        ("DUMP_PROBE_RANKS", "all"),
    ];
    let ran = run(&exe, &["tp", tp.to_str().unwrap()], &vars);
    assert_eq!(
        (ran.int("arm.0"), ran.int("arm.1")),
        (0, 0),
        "{}",
        ran.stdout
    );
    let rank1 = read_json(&tp.join("rank1/match1-occ1/manifest.json"));
    assert_eq!(rank1["token_rows"]["records"].as_array().unwrap().len(), 2);

    // A request whole against the same request in two chunks, and with a bug in chunk 2.
    let (whole, chunked, bug) = (
        dir.path().join("whole"),
        dir.path().join("chunked"),
        dir.path().join("bug"),
    );
    go("whole", &whole, "1");
    // One process writes both chunks' windows (`all`); the bug's run, one call each.
    go("chunk", &chunked, "all");
    for k in ["1", "2"] {
        go("bug", &bug, k);
    }
    assert!(chunked.join("rank0/match1-occ2/manifest.json").is_file());
    let diff = |b: &Path| {
        dumpview(&[
            "diff",
            whole.to_str().unwrap(),
            b.to_str().unwrap(),
            "--json",
        ])
    };
    for agreeing in [&chunked, &tp] {
        let (code, json, text) = diff(agreeing);
        assert_eq!(code, 0, "{text}");
        let tokens = &json["diff"]["tokens"];
        assert_eq!(tokens["rows_compared"], 12, "{text}");
        assert_eq!(tokens["rows_diverging"], 0, "{text}");
    }
    let (code, json, text) = diff(&bug);
    assert_eq!(code, 1, "{text}");
    let first = &json["diff"]["tokens"]["first"];
    assert_eq!(
        (
            first["key"].as_str(),
            first["position"].as_u64(),
            first["token_id"].as_i64()
        ),
        (Some("q#1"), Some(4), Some(15)),
        "{text}"
    );
}
