//! What the probe writes for issue 29, read back by ingest: the window's `run` (argv, working
//! directory, interpreter, `DUMP_PROBE_*` settings), an input set's linked `outputs` and its
//! tensor arguments' `stats`, and the whole output tensors in files dumpview's `.pt` reader
//! opens. Made by the real probe (assets/dump_probe.py) in the test's Python.

mod support;

use std::path::Path;
use std::process::Command;

use dumpview::model::tensor::{DType, TensorFile};
use support::python::{python, ran, repo};

/// Runs the probe into `dump` from the working directory `cwd`, with `sys.argv` set to a
/// command line of the test's choosing.
fn capture(dump: &Path, cwd: &Path) -> support::python::Ran {
    let body = format!(
        r#"
import importlib.util, sys
import torch
sys.argv = ["serve.py", "--tp", "1"]
_spec = importlib.util.spec_from_file_location("dump_probe", {probe:?})
dp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dp)
q = torch.arange(24, dtype=torch.float32).reshape(6, 4)
dp.arm("req")
dp.capture("layers.0.q_rope", q)
dp.capture_inputs("layers.0.rope", _op="rope", q=q, pos=torch.arange(6),
                  outputs=("layers.0.q_rope", "layers.0.k_rope", "layers.0.never"))
dp.capture("layers.0.q_rope", (q * 0.5).to(torch.bfloat16).t())  # 4 rows, not contiguous
dp.capture("layers.0.k_rope", q[:, :2] - 1)
print(dp.finish())
"#,
        probe = repo("assets/dump_probe.py").display().to_string(),
    );
    ran(Command::new(python().unwrap())
        .args(["-c", &body])
        .current_dir(cwd)
        .env("DUMP_PROBE", "1")
        .env("DUMP_PROBE_DIR", dump)
        .env("DUMP_PROBE_ROWS", "2")
        .env("DUMP_PROBE_KERNEL", "torch")
        .output()
        .unwrap())
}

#[test]
fn ingest_reads_the_run_and_the_linked_outputs_the_probe_wrote() {
    if python().is_none() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let dump = root.path().join("dump");
    let cwd = root.path().join("work");
    std::fs::create_dir(&cwd).unwrap();
    let run = capture(&dump, &cwd);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let loaded = dumpview::load(std::slice::from_ref(&dump), &mut |_| {}).unwrap();
    let window = &loaded.windows[0];
    let info = window.run.as_ref().expect("the manifest's run");
    assert_eq!(info.argv, ["serve.py", "--tp", "1"]);
    assert_eq!(Path::new(&info.cwd), cwd.canonicalize().unwrap());
    assert!(
        info.executable
            .as_deref()
            .is_some_and(|e| Path::new(e).is_absolute())
    );
    assert_eq!(
        info.env.get("DUMP_PROBE_ROWS").map(String::as_str),
        Some("2")
    );
    assert_eq!(info.env.get("DUMP_PROBE").map(String::as_str), Some("1"));
    assert!(info.env.keys().all(|k| k.starts_with("DUMP_PROBE")));

    let set = &window.input_sets[0];
    assert_eq!(set.op.as_deref(), Some("rope"));
    let keys: Vec<&str> = set.outputs.iter().map(|o| o.key.as_str()).collect();
    // The next occurrence after the call; the stage never captured is left out.
    assert_eq!(keys, ["layers.0.q_rope#2", "layers.0.k_rope#1"]);
    for output in &set.outputs {
        let (stage, occurrence) = output.key.rsplit_once('#').unwrap();
        assert!(
            window
                .records
                .iter()
                .any(|r| r.stage.as_ref() == stage && r.occurrence.to_string() == occurrence),
            "{} names a record of the window",
            output.key
        );
    }
    // The input's statistics are a record's statistics object.
    let stats = &set.args["q"]["stats"];
    assert_eq!(stats["finite_count"], 24);
    assert_eq!(stats["max"], 23.0);

    // The whole output, every row whatever DUMP_PROBE_ROWS says, read by dumpview's .pt reader.
    let window_dir = window.source.parent().unwrap();
    let q_file = set.outputs[0].file.as_deref().expect("saved");
    assert_eq!(
        q_file,
        "inputs/layers.0.rope#1.outputs/layers.0.q_rope#2.pt"
    );
    let file = TensorFile::open(&window_dir.join(q_file)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(file.entries.len(), 1);
    let entry = &file.entries[0];
    assert_eq!(
        (entry.key.as_str(), entry.dtype, entry.shape.as_slice()),
        ("", DType::BFloat16, &[4usize, 6][..])
    );
    let view = file.view(entry);
    // Element [r, c] of q.t() * 0.5 is q[c, r] * 0.5 = (4c + r) / 2, exact in bfloat16.
    for flat in 0..24 {
        let (r, c) = (flat / 6, flat % 6);
        assert_eq!(
            view.get(flat),
            (4 * c + r) as f64 / 2.0,
            "element [{r}, {c}]"
        );
    }
    let k = TensorFile::open(&window_dir.join(set.outputs[1].file.as_deref().unwrap())).unwrap();
    assert_eq!(k.entries[0].shape, [6, 2]);
    assert_eq!(k.view(&k.entries[0]).get(11), 20.0);
}
