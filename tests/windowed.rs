//! Windowed mega-kernel dumps (schemaVersion 4, docs/windowed.md) on the fixtures of
//! tests/fixtures/windowed (written by make_windowed.py from the seed's description): loading,
//! names and layout, context, statistics against torch's, the CLI's answers, damaged inputs,
//! and the workbench's header and detail.

mod support;

use std::path::{Path, PathBuf};

use dumpview::model::dump::Dump;
use dumpview::model::dump::{SourceFormat, Stats, Window};
use dumpview::model::ingest::load;
use support::run::dumpview_in_repo as dumpview;

const KERNEL: &str = "pipeline_mk";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/windowed")
}

fn expected() -> serde_json::Value {
    let text = std::fs::read_to_string(fixtures().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn load_dir(path: &Path) -> Dump {
    load(&[path.to_path_buf()], &mut |_| {}).unwrap()
}

/// The window whose manifest lies under `run/level/rank_R/window_NNNN`.
fn window<'d>(dump: &'d Dump, level: &str, rank: u32, window: u32) -> &'d Window {
    let tail = Path::new(level)
        .join(format!("rank_{rank}"))
        .join(format!("window_{window:04}"))
        .join("manifest.json");
    dump.windows
        .iter()
        .find(|w| w.source.ends_with(&tail))
        .unwrap_or_else(|| panic!("no window {}", tail.display()))
}

fn keys(window: &Window) -> Vec<String> {
    window.records.iter().map(|r| r.key()).collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn every_window_loads_as_one_rank_window_with_a_record_per_tensor() {
    let dump = load_dir(&fixtures().join("A"));
    assert!(dump.warnings.is_empty(), "{:?}", dump.warnings);
    assert_eq!(dump.windows.len(), 8, "2 levels x 2 ranks x 2 windows");
    for w in &dump.windows {
        assert_eq!(w.format, SourceFormat::Windowed);
        assert_eq!(w.label, format!("window_{:04}", w.match_index));
        assert_eq!(w.occurrence, 1);
        assert_eq!(w.schema_version, 4);
        assert!(
            w.source
                .to_string_lossy()
                .contains(&format!("rank_{}", w.rank))
        );
        assert!(w.records.iter().all(|r| r.stats.is_some()));
    }
    // L0: one launch in window 0 (4 tensors), two in window 1; L1: 4 tasks x 2 tensors.
    for rank in [0, 1] {
        assert_eq!(window(&dump, "l0", rank, 0).records.len(), 4);
        assert_eq!(window(&dump, "l0", rank, 1).records.len(), 8);
        assert_eq!(window(&dump, "l1", rank, 0).records.len(), 8);
        assert_eq!(window(&dump, "l1", rank, 1).records.len(), 8);
    }
    // Sorted by rank, then window number.
    let order: Vec<(u32, u32)> = dump
        .windows
        .iter()
        .map(|w| (w.rank, w.match_index))
        .collect();
    assert_eq!(
        order,
        [
            (0, 0),
            (0, 0),
            (0, 1),
            (0, 1),
            (1, 0),
            (1, 0),
            (1, 1),
            (1, 1)
        ]
    );
    // The header is the metadata; rank and window number are mapped, not repeated.
    let m = &window(&dump, "l1", 0, 0).metadata;
    assert_eq!(m["level"], "L1");
    assert_eq!(m["capturePhaseSemantics"], "task_boundary");
    assert_eq!(m["invocationCount"], 1);
    assert!(!m.contains_key("rank") && !m.contains_key("windowIndex"));
    assert!(!m.contains_key("invocations"));
}

#[test]
fn records_are_named_and_ordered_as_captured() {
    let dump = load_dir(&fixtures().join("A"));
    let l0: Vec<String> = ["1", "2"]
        .iter()
        .flat_map(|n| {
            [
                "external_input.x",
                "stage_output.h1",
                "stage_output.h2",
                "final_output.y",
            ]
            .map(|s| format!("{KERNEL}.{s}#{n}"))
        })
        .collect();
    assert_eq!(keys(window(&dump, "l0", 1, 1)), l0);
    let l1: Vec<String> = [
        "mlp.task0.input.h1",
        "mlp.task0.output.h2",
        "mlp.task1.input.h1",
        "mlp.task1.output.h2",
        "out.task0.input.h2",
        "out.task0.output.y",
        "out.task1.input.h2",
        "out.task1.output.y",
    ]
    .map(|s| format!("{KERNEL}.{s}#1"))
    .to_vec();
    assert_eq!(keys(window(&dump, "l1", 0, 1)), l1);
    let seqs: Vec<u64> = window(&dump, "l1", 0, 1)
        .records
        .iter()
        .map(|r| r.seq)
        .collect();
    assert_eq!(seqs, (0..8).collect::<Vec<u64>>());
}

#[test]
fn layouts_are_as_recorded_with_contiguous_strides() {
    let dump = load_dir(&fixtures().join("A"));
    let l0 = window(&dump, "l0", 0, 1);
    let y = &l0.records[3];
    // originalDtype float16, stored as float32: the record keeps the original.
    assert_eq!((y.dtype.as_str(), y.element_size), ("float16", 2));
    assert_eq!((&*y.shape, &*y.stride), (&[4u64, 8][..], &[8i64, 1][..]));
    assert_eq!((y.numel, y.storage_offset, y.is_contiguous), (32, 0, true));
    assert_eq!(
        (y.storage_ptr, y.storage_id, y.data_ptr),
        (None, None, None)
    );
    assert_eq!(y.device.as_str(), "cpu");
    assert_eq!(
        y.tensor_file.as_deref(),
        Some("invocation_000001_forward/stages/out/output_y.pt")
    );
    assert_eq!(l0.records[1].dtype.as_str(), "bfloat16");
    // An L1 tile: sourceOffsetBytes 64 of a float32 parameter is element 16.
    let l1 = window(&dump, "l1", 0, 1);
    let tile = &l1.records[3];
    assert_eq!(tile.key(), format!("{KERNEL}.mlp.task1.output.h2#1"));
    assert_eq!((&*tile.shape, tile.storage_offset), (&[2u64, 8][..], 16));
    assert_eq!(tile.truncated, Some(false));
    assert!(
        l1.window_dir()
            .join(tile.tensor_file.as_deref().unwrap())
            .is_file()
    );
}

#[test]
fn context_carries_roles_tasks_owners_and_cores() {
    let dump = load_dir(&fixtures().join("A"));
    let lines = |w: &Window, i: usize| -> Vec<(String, String)> {
        w.context.as_ref().expect("context").of(i).to_vec()
    };
    let has = |lines: &[(String, String)], label: &str, value: &str| {
        lines.iter().any(|(l, v)| l == label && v == value)
    };
    let l0 = window(&dump, "l0", 1, 1);
    let roles: Vec<String> = (0..4)
        .map(|i| {
            let lines = lines(l0, i);
            assert!(has(&lines, "level", "L0"), "{lines:?}");
            lines.into_iter().find(|(l, _)| l == "role").unwrap().1
        })
        .collect();
    assert_eq!(
        roles,
        [
            "external_input",
            "stage_output",
            "stage_output",
            "final_output"
        ]
    );
    let h2 = lines(l0, 2);
    assert!(
        has(&h2, "producer", "mlp") && has(&h2, "consumer", "out"),
        "{h2:?}"
    );
    assert!(
        has(&h2, "tensor", "h2 · param 5 · captured after"),
        "{h2:?}"
    );
    assert!(
        has(&h2, "invocation", "1 · step 1 · forward · pipeline_mk"),
        "{h2:?}"
    );
    assert!(has(&lines(l0, 3), "stored", "as float32"));
    // The second launch in the window is invocation 2 (ids count on across windows).
    assert!(
        lines(l0, 6)
            .iter()
            .any(|(l, v)| l == "invocation" && v.starts_with("2 ·"))
    );

    let l1 = window(&dump, "l1", 1, 1);
    let out = lines(l1, 7);
    for (label, value) in [
        ("level", "L1"),
        ("task", "id 5 · out task 1"),
        ("owner", "decoder.out (id 12)"),
        ("core", "AIC 1"),
        ("tensor", "y · output 0 · param 6 · captured after"),
        ("source", "byte 32 of the parameter"),
    ] {
        assert!(has(&out, label, value), "{label} {value} not in {out:?}");
    }
    assert!(has(&lines(l1, 0), "core", "AIV 1"));
}

fn close(actual: Option<f64>, expected: &serde_json::Value) -> bool {
    match (actual, expected.as_f64()) {
        (None, None) => expected.is_null(),
        (Some(a), Some(e)) => (a - e).abs() <= 1e-12 * a.abs().max(e.abs()).max(1.0),
        _ => false,
    }
}

fn assert_stats(stats: &Stats, expected: &serde_json::Value, what: &str) {
    assert_eq!(stats.nan_count, expected["nan_count"], "{what}");
    assert_eq!(stats.inf_count, expected["inf_count"], "{what}");
    assert_eq!(
        stats.finite_count,
        expected["finite_count"].as_u64(),
        "{what}"
    );
    for name in ["max_abs", "min", "max", "mean", "l2", "pos_checksum"] {
        assert!(
            close(stats.get(name), &expected[name]),
            "{what}: {name} {:?} vs torch {}",
            stats.get(name),
            expected[name]
        );
    }
}

#[test]
fn statistics_equal_torchs_for_every_tensor_file() {
    let expected = expected();
    let by_file = expected["stats"].as_object().unwrap();
    let root = fixtures();
    let mut seen = 0;
    for run in ["A", "B", "truncated"] {
        for w in load_dir(&root.join(run)).windows {
            for r in &w.records {
                let file = w.window_dir().join(r.tensor_file.as_deref().unwrap());
                let rel = file.strip_prefix(&root).unwrap().to_string_lossy();
                let want = &by_file[rel.as_ref()];
                assert_stats(r.stats.as_ref().unwrap(), want, &rel);
                seen += 1;
            }
        }
    }
    assert_eq!(seen, by_file.len(), "every tensor file is a record");
}

#[test]
fn a_truncated_tensor_is_marked_and_summarised_from_its_stored_prefix() {
    let dump = load_dir(&fixtures().join("truncated"));
    assert!(dump.warnings.is_empty(), "{:?}", dump.warnings);
    let w = &dump.windows[0];
    let x = &w.records[0];
    assert_eq!(x.key(), format!("{KERNEL}.proj.task0.input.x#1"));
    assert_eq!(
        (x.truncated, &*x.shape, x.numel),
        (Some(true), &[2u64, 8][..], 16)
    );
    // 32 bytes of float32 kept: the statistics see 8 elements.
    assert_eq!(x.stats.as_ref().unwrap().finite_count, Some(8));
    let stored = w.context.as_ref().unwrap().of(0).to_vec();
    assert!(
        stored
            .iter()
            .any(|(l, v)| l == "stored" && v.contains("TRUNCATED") && v.contains("32 of 64 B")),
        "{stored:?}"
    );
    assert_eq!(w.records[1].truncated, Some(false));
}

#[test]
fn scan_names_the_planted_nan() {
    let answer = &expected()["answers"]["nan"];
    let key = answer["key"].as_str().unwrap();
    let out = dumpview()
        .args(["scan", "tests/fixtures/windowed/B"])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains(&format!(
            "first non-finite: {key} (position 7, seq 7): 1 NaN, 0 inf"
        )),
        "{text}"
    );
    assert_eq!(text.matches("first non-finite: none").count(), 7, "{text}");

    let out = dumpview()
        .args(["scan", "--json", "tests/fixtures/windowed/B"])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let found: Vec<&serde_json::Value> = value["windows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| !w["first_nonfinite"].is_null())
        .collect();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0]["rank"], answer["rank"]);
    assert_eq!(found[0]["label"], answer["window_label"]);
    assert_eq!(found[0]["first_nonfinite"]["key"], key);
    assert!(
        found[0]["source"]
            .as_str()
            .unwrap()
            .ends_with("B/l1/rank_1/window_0001/manifest.json")
    );
    // A holds no NaN.
    dumpview()
        .args(["scan", "tests/fixtures/windowed/A"])
        .assert()
        .code(0);
}

#[test]
fn diff_names_the_planted_first_divergence() {
    let answer = &expected()["answers"]["divergence"];
    let out = dumpview()
        .args([
            "diff",
            "tests/fixtures/windowed/A",
            "tests/fixtures/windowed/B",
        ])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    for key in ["l0_key", "l1_key"] {
        let key = answer[key].as_str().unwrap();
        assert!(
            text.contains(&format!("first divergence: {key} ")),
            "{key}:\n{text}"
        );
    }
    assert!(text.contains("ranks: rank 1 diverges first"), "{text}");
    assert_eq!(text.matches("first divergence: none").count(), 6, "{text}");

    let out = dumpview()
        .args([
            "diff",
            "--json",
            "tests/fixtures/windowed/A",
            "tests/fixtures/windowed/B",
        ])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let report = &value["diff"];
    assert_eq!(report["first_rank"], answer["rank"]);
    let diverging: Vec<(String, String, String)> = report["windows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| {
            let at = w["first_divergence"].as_u64()? as usize;
            Some((
                w["rank"].to_string(),
                w["a"]["label"].as_str().unwrap().to_string(),
                w["pairs"][at]["key"].as_str().unwrap().to_string(),
            ))
        })
        .collect();
    let rank = answer["rank"].to_string();
    let label = answer["window_label"].as_str().unwrap().to_string();
    assert_eq!(
        diverging,
        [
            (
                rank.clone(),
                label.clone(),
                answer["l0_key"].as_str().unwrap().into()
            ),
            (rank, label, answer["l1_key"].as_str().unwrap().into()),
        ]
    );
    assert!(report["unpaired_a"].as_array().unwrap().is_empty());
}

#[test]
fn a_deleted_tensor_file_costs_its_statistics_and_a_warning_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("rank_0/window_0001");
    copy_dir(&fixtures().join("A/l1/rank_0/window_0001"), &copy);
    let gone = "invocation_000001_forward/stages/out/task_000004/output_00_y.pt";
    std::fs::remove_file(copy.join(gone)).unwrap();
    // And one that is not a tensor file at all.
    let garbled = "invocation_000001_forward/stages/mlp/task_000002_worker_001/input_00_h1.pt";
    std::fs::write(copy.join(garbled), b"not a zip").unwrap();

    let dump = load_dir(dir.path());
    let w = &dump.windows[0];
    assert_eq!(w.records.len(), 8);
    let missing: Vec<String> = w
        .records
        .iter()
        .filter(|r| r.stats.is_none())
        .map(|r| r.key())
        .collect();
    assert_eq!(
        missing,
        [
            format!("{KERNEL}.mlp.task0.input.h1#1"),
            format!("{KERNEL}.out.task0.output.y#1")
        ]
    );
    assert_eq!(dump.warnings.len(), 2, "{:?}", dump.warnings);
    let texts: Vec<String> = dump.warnings.iter().map(ToString::to_string).collect();
    assert!(
        texts.iter().any(|t| t.contains("output_00_y.pt")
            && t.contains("cannot open")
            && t.contains(&format!("{KERNEL}.out.task0.output.y#1"))),
        "{texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("input_00_h1.pt") && t.contains("not a torch.save archive")),
        "{texts:?}"
    );
    // The CLI still scans the window and says so on stderr.
    let out = dumpview().arg("scan").arg(dir.path()).output().unwrap();
    assert_ne!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("output_00_y.pt"), "{stderr}");
}

#[test]
fn a_manifest_cut_short_keeps_what_it_holds_or_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let window_dir = dir.path().join("rank_1/window_0001");
    copy_dir(&fixtures().join("B/l1/rank_1/window_0001"), &window_dir);
    let manifest = window_dir.join("manifest.json");
    let bytes = std::fs::read(&manifest).unwrap();
    // Cut inside the third task (stage out, task 0): two tasks whole, 4 records.
    let third = String::from_utf8_lossy(&bytes)
        .find("\"taskId\": 4")
        .unwrap();
    std::fs::write(&manifest, &bytes[..third + 40]).unwrap();
    let dump = load_dir(dir.path());
    let w = &dump.windows[0];
    assert_eq!((w.rank, w.label.as_str()), (1, "window_0001"));
    assert_eq!(w.records.len(), 4);
    assert!(w.records.iter().all(|r| r.stats.is_some()));
    assert_eq!(dump.warnings.len(), 1, "{:?}", dump.warnings);
    let warning = dump.warnings[0].to_string();
    assert!(
        warning.starts_with(&manifest.display().to_string()),
        "{warning}"
    );
    assert!(
        warning.contains("truncated or damaged")
            && warning.contains("kept the 4 records before it"),
        "{warning}"
    );

    // Cut inside the header: nothing to keep, an error naming the file (exit status 2).
    std::fs::write(&manifest, &bytes[..12]).unwrap();
    let error = load(&[dir.path().to_path_buf()], &mut |_| {}).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(&manifest.display().to_string()),
        "{error}"
    );
    let out = dumpview().arg("scan").arg(&manifest).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("manifest.json")
    );
}

#[test]
fn workbench_header_names_the_format_and_detail_shows_roles_and_tasks() {
    use dumpview::internals::app::{Action, App, update};
    use dumpview::internals::runtime::load;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    let (a, b) = (fixtures().join("A"), fixtures().join("B"));
    let mut app = App::new(load::open(&a, Some(&b), &mut |_| {}).unwrap(), false);
    let screen = |app: &App| {
        let mut terminal = Terminal::new(TestBackend::new(140, 40)).unwrap();
        terminal
            .draw(|f| dumpview::internals::ui::draw(f, app))
            .unwrap();
        let buffer = terminal.backend().buffer().clone();
        (0..buffer.area.height)
            .map(|y| {
                (0..buffer.area.width)
                    .map(|x| buffer[(x, y)].symbol())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let text = screen(&app);
    assert!(text.contains("windowed dump (schemaVersion 4)"), "{text}");
    assert!(text.contains("rank 1 diverges first"), "{text}");
    // It opens on a window of rank 1 at its first divergence (the mlp stage, L0 or L1).
    let (l0, l1) = (
        expected()["answers"]["divergence"]["l0_key"].clone(),
        expected()["answers"]["divergence"]["l1_key"].clone(),
    );
    let opened = serde_json::Value::from(app.row().unwrap().key.clone());
    assert!(opened == l0 || opened == l1, "opened on {opened}");
    // Rank 1's L1 window: the first divergence is the mlp tile.
    for _ in 0..4 {
        if app.row().unwrap().key == l1 {
            break;
        }
        update(&mut app, Action::NextWindow);
        update(&mut app, Action::FirstDivergence);
    }
    assert_eq!(serde_json::Value::from(app.row().unwrap().key.clone()), l1);
    let text = screen(&app);
    for needle in [
        "A context",
        "level    L1",
        "task     id 2 · mlp task 0",
        "owner    decoder.mlp (id 11)",
        "core     AIV 1",
    ] {
        assert!(text.contains(needle), "{needle} not in\n{text}");
    }
}

#[test]
fn files_named_outside_the_window_are_refused_and_many_problems_summarised() {
    let dir = tempfile::tempdir().unwrap();
    let window_dir = dir.path().join("rank_0/window_0000");
    std::fs::create_dir_all(&window_dir).unwrap();
    std::fs::write(dir.path().join("outside.pt"), b"secret").unwrap();
    let tensor = |name: String, file: &str| {
        serde_json::json!({"name": name, "role": "stage_output", "actualShape": [2],
            "originalDtype": "torch.float32", "storedDtype": "torch.float32", "file": file})
    };
    let mut tensors = vec![tensor("escape".into(), "../../outside.pt")];
    tensors.extend((0..12).map(|i| tensor(format!("t{i}"), &format!("missing_{i}.pt"))));
    let manifest = serde_json::json!({"schemaVersion": 4, "level": "L0", "windowIndex": 0,
        "rank": 0, "invocationCount": 1, "invocations": [{"invocationId": 0, "step": 0,
        "direction": "forward", "kernelName": "k", "device": "npu:0", "tensorCount": 13,
        "tensors": tensors}]});
    std::fs::write(
        window_dir.join("manifest.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
    let dump = load_dir(dir.path());
    let w = &dump.windows[0];
    assert_eq!(w.records.len(), 13);
    assert!(w.records.iter().all(|r| r.stats.is_none()));
    assert_eq!(w.records[0].tensor_file, None, "never opened");
    assert_eq!(w.records[1].tensor_file.as_deref(), Some("missing_0.pt"));
    assert_eq!(w.records[0].device.as_str(), "npu:0");
    let texts: Vec<String> = dump.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(texts.len(), 11, "{texts:?}");
    assert!(
        texts[0].contains("k.stage_output.escape#1") && texts[0].contains("climbs out"),
        "{texts:?}"
    );
    assert!(
        texts[10].ends_with("… and 3 more problems with this window's tensor files"),
        "{texts:?}"
    );
}
