//! Bad inputs (tests/fixtures/bad/, described in its README.md) through the real binary and the
//! model: exact exit status, a message naming the file and the problem, and never a panic.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use dumpview::model::analysis::compare::Tolerances;
use dumpview::model::analysis::diff::diff;
use dumpview::model::analysis::layout::{self, View};
use dumpview::model::analysis::scan::scan_window;
use dumpview::model::formats::probe::parse::parse_manifest;
use dumpview::model::ingest::{load, read_window};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures/bad").join(name)
}

/// A real, small, clean manifest (8 records): the "good" side of every diff.
fn good() -> PathBuf {
    root().join("assets/examples/llama_eager_vs_graph/b/rank0/match1-occ2/manifest.json")
}

/// Copies good()'s token-row sidecar (`rows.f32`, which its `token_rows` names) into `dir`, so
/// that a manifest written there from good()'s text loses no evidence but what a test damages.
fn with_good_rows(dir: &Path) {
    std::fs::copy(good().with_file_name("rows.f32"), dir.join("rows.f32")).unwrap();
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn dumpview<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let Output {
        status,
        stdout,
        stderr,
    } = support::run::output(args);
    let run = Run {
        code: status.code().expect("dumpview was killed by a signal"),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    };
    for word in ["panicked", "overflowed its stack", "RUST_BACKTRACE"] {
        assert!(!run.stderr.contains(word), "{word}:\n{}", run.stderr);
    }
    run
}

/// One corpus entry: exit status of `scan FILE` and of `diff FILE GOOD`, the messages stderr
/// must hold (each printed after `<path>: `), and the records scan reports (`None`: an error).
struct Case {
    name: &'static str,
    scan: i32,
    diff: i32,
    messages: &'static [&'static str],
    records: Option<usize>,
}

const CASES: &[Case] = &[
    Case {
        name: "truncated_mid_record.json",
        scan: 1,
        diff: 1,
        messages: &[
            "truncated or damaged: stops being a valid manifest at byte 3914 (EOF while parsing a string); kept the 4 records before it",
        ],
        records: Some(4),
    },
    Case {
        name: "truncated_in_header.json",
        scan: 2,
        diff: 2,
        messages: &["not a valid manifest: EOF while parsing a string at line 9 column 6"],
        records: None,
    },
    Case {
        name: "nan_infinity_tokens.json",
        scan: 1,
        diff: 1,
        messages: &[
            "truncated or damaged: stops being a valid manifest at byte 2720 (expected value); kept the 2 records before it",
        ],
        records: Some(2),
    },
    Case {
        name: "shape_is_string.json",
        scan: 1,
        diff: 1,
        messages: &[
            "record 2 (seq 2, at byte 2291): `shape`: invalid type: string \"[1, 256]\", expected a sequence; the record is left out",
        ],
        records: Some(3),
    },
    Case {
        name: "seq_negative.json",
        scan: 1,
        diff: 1,
        messages: &[
            "record 1 (seq unreadable, at byte 1591): `seq`: invalid value: integer `-1`, expected u64; the record is left out",
        ],
        records: Some(3),
    },
    Case {
        name: "header_rank_is_string.json",
        scan: 2,
        diff: 2,
        messages: &[
            "not a valid manifest: invalid type: string \"0\", expected u32 at line 8 column 12",
        ],
        records: None,
    },
    Case {
        name: "missing_header_match.json",
        scan: 2,
        diff: 2,
        messages: &["required field `match` is missing"],
        records: None,
    },
    Case {
        name: "missing_format.json",
        scan: 2,
        diff: 2,
        messages: &["`format` is \"(missing)\", expected \"dumpview.manifest\""],
        records: None,
    },
    Case {
        name: "record_missing_dtype.json",
        scan: 1,
        diff: 1,
        messages: &[
            "record 3 (seq 3, at byte 2918): `dtype`: missing field `dtype`; the record is left out",
        ],
        records: Some(3),
    },
    Case {
        name: "duplicate_stage_occurrence.json",
        scan: 1,
        diff: 1,
        messages: &["layers.0.residual_mlp#1 appears twice (seq 2 and 3); pairing uses seq 2"],
        records: Some(4),
    },
    Case {
        name: "empty.json",
        scan: 2,
        diff: 2,
        messages: &["not a valid manifest: EOF while parsing a value at line 1 column 0"],
        records: None,
    },
    Case {
        name: "dir_without_manifests",
        scan: 2,
        diff: 2,
        messages: &[
            "no manifest.json (dumpview probe, windowed dump) or dump.json (msprobe) found in this directory or below it",
        ],
        records: None,
    },
    Case {
        name: "binary_garbage.bin",
        scan: 2,
        diff: 2,
        messages: &["not a valid manifest: expected value at line 1 column 1"],
        records: None,
    },
    Case {
        name: "schema_version_2.json",
        scan: 2,
        diff: 2,
        messages: &["schema_version 2 is not supported (this dumpview reads 1)"],
        records: None,
    },
    Case {
        name: "format_other.json",
        scan: 2,
        diff: 2,
        messages: &["`format` is \"safetensors.index\", expected \"dumpview.manifest\""],
        records: None,
    },
    Case {
        name: "tensor_file_parent_escape.json",
        scan: 1,
        diff: 1,
        messages: &[
            "runner.logits#1 (seq 1): evidence file \"../../etc/passwd\" refused: it climbs out of the window directory with `..`; the tensor file is not used",
        ],
        records: Some(3),
    },
    Case {
        name: "tensor_file_absolute.json",
        scan: 1,
        diff: 1,
        messages: &[
            "runner.logits#1 (seq 1): evidence file \"/etc/passwd\" refused: it is absolute; manifests name files relative to the window; the tensor file is not used",
        ],
        records: Some(3),
    },
    Case {
        name: "deeply_nested_metadata.json",
        scan: 1,
        diff: 1,
        messages: &[
            "truncated or damaged: stops being a valid manifest at byte 331 (recursion limit exceeded); kept the 0 records before it",
            "holds no records: nothing was captured in this window, so nothing here can be compared",
        ],
        records: Some(0),
    },
    Case {
        name: "huge_shape_overflow.json",
        scan: 1,
        diff: 1,
        // numel 2^64-1 is not the product of the shape (which overflows): docs/manifest.md,
        // "Values that cannot be true".
        messages: &[
            "layers.0.residual_mlp#1 (seq 2): `numel`: 18446744073709551615 is not the product of \
             shape [4294967296, 4294967296, 16] (more than 2^64) (and 1 more record); kept as \
             written: the record's size and counts are in doubt",
        ],
        records: Some(4),
    },
    Case {
        name: "stride_byte_range_overflow.json",
        scan: 1,
        diff: 1,
        messages: &[
            "layers.0.residual_mlp#1 (seq 2): `numel`: 18446744073709551615 is not the product of \
             shape [18446744073709551615, 18446744073709551615, 18446744073709551615] (more than \
             2^64) (and 1 more record); kept as written: the record's size and counts are in doubt",
        ],
        records: Some(4),
    },
    Case {
        name: "zero_records.json",
        // A note (nothing lost): scan exits 0; the diff against a full capture is missing data.
        scan: 0,
        diff: 1,
        messages: &[
            "holds no records: nothing was captured in this window, so nothing here can be compared",
        ],
        records: Some(0),
    },
    Case {
        name: "json_array.json",
        scan: 2,
        diff: 2,
        messages: &[
            "not a valid manifest: invalid type: sequence, expected a dumpview manifest object at line 1 column 0",
        ],
        records: None,
    },
];

/// How stderr names `message` of an input with exit `status`: an error (exit 2), a note (the
/// one note of the corpus: a window with no records, nothing lost), else a warning.
fn kind_of(status: i32, message: &str) -> &'static str {
    match status {
        2 => "error",
        _ if message.starts_with("holds no records") => "note",
        _ => "warning",
    }
}

fn assert_named(stderr: &str, path: &Path, kind: &str, message: &str) {
    let line = format!("dumpview: {kind}: {}: {message}", path.display());
    assert!(stderr.contains(&line), "expected {line:?} in:\n{stderr}");
}

#[test]
fn every_corpus_entry_is_listed_in_the_readme_and_tested() {
    let readme = std::fs::read_to_string(fixture("README.md")).unwrap();
    let mut on_disk: Vec<String> = std::fs::read_dir(fixture(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "README.md")
        .collect();
    on_disk.sort();
    let mut tested: Vec<String> = CASES.iter().map(|c| c.name.to_string()).collect();
    tested.sort();
    assert_eq!(on_disk, tested);
    for name in &on_disk {
        assert!(
            readme.contains(&format!("`{name}`")),
            "{name} not in README"
        );
    }
}

#[test]
fn scan_of_each_bad_input_has_the_exact_status_and_names_file_and_problem() {
    for case in CASES {
        let path = fixture(case.name);
        let run = dumpview([Path::new("scan"), &path]);
        assert_eq!(run.code, case.scan, "{}:\n{}", case.name, run.stderr);
        for message in case.messages {
            assert_named(&run.stderr, &path, kind_of(case.scan, message), message);
        }
        match case.records {
            Some(n) => {
                assert!(
                    run.stdout.contains(&format!("): {n} records\n")),
                    "{}: {n} records:\n{}",
                    case.name,
                    run.stdout
                );
                if case.messages.is_empty() {
                    assert_eq!(run.stderr, "", "{}", case.name);
                }
            }
            None => {
                assert_eq!(run.stdout, "", "{}", case.name);
                assert_eq!(
                    run.stderr.lines().count(),
                    1,
                    "{}: one error line:\n{}",
                    case.name,
                    run.stderr
                );
            }
        }
    }
}

#[test]
fn scan_json_carries_the_same_warnings() {
    for case in CASES.iter().filter(|c| c.scan != 2) {
        let path = fixture(case.name);
        let run = dumpview([Path::new("scan"), Path::new("--json"), &path]);
        assert_eq!(run.code, case.scan, "{}", case.name);
        let value: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        let warnings = value["warnings"].as_array().unwrap();
        assert_eq!(warnings.len(), case.messages.len(), "{}", case.name);
        for (w, message) in warnings.iter().zip(case.messages) {
            assert_eq!(w["file"].as_str(), path.to_str());
            assert_eq!(w["message"].as_str(), Some(*message));
        }
        assert_eq!(
            value["windows"][0]["records"].as_u64(),
            case.records.map(|n| n as u64)
        );
    }
}

#[test]
fn diff_of_each_bad_input_against_a_good_manifest_has_the_exact_status() {
    for case in CASES {
        let path = fixture(case.name);
        let run = dumpview([Path::new("diff"), &path, &good()]);
        assert_eq!(run.code, case.diff, "{}:\n{}", case.name, run.stderr);
        for message in case.messages {
            assert_named(&run.stderr, &path, kind_of(case.diff, message), message);
        }
        // The other way round: the bad side is B; the same message, no panic.
        let run = dumpview([Path::new("diff"), &good(), &path]);
        assert!(
            (run.code == 2) == (case.diff == 2),
            "{}: {}",
            case.name,
            run.code
        );
        for message in case.messages {
            assert_named(&run.stderr, &path, kind_of(case.diff, message), message);
        }
    }
}

#[test]
fn overflowing_layouts_are_reported_as_conflicts_without_panicking() {
    for name in [
        "huge_shape_overflow.json",
        "stride_byte_range_overflow.json",
    ] {
        let run = dumpview([Path::new("scan"), &fixture(name)]);
        assert_eq!(run.code, 1);
        assert!(
            run.stdout
                .contains("! STRIDE CONFLICT storage 99 on cpu at 0x5651ccf19900"),
            "{name}:\n{}",
            run.stdout
        );
    }
}

#[test]
fn views_whose_sizes_overflow_do_not_panic() {
    let max = u64::MAX;
    let views = [
        View {
            data_ptr: 1 << 40,
            element_size: 4,
            shape: vec![1 << 32, 1 << 32, 16],
            stride: vec![1 << 36, 16, 1],
        },
        View {
            data_ptr: max,
            element_size: u64::from(u32::MAX),
            shape: vec![max, max, max],
            stride: vec![i64::MAX, i64::MAX, i64::MIN],
        },
        View {
            data_ptr: 0,
            element_size: 8,
            shape: vec![max; 5],
            stride: vec![i64::MIN; 5],
        },
        View {
            data_ptr: 0,
            element_size: 2,
            shape: vec![1 << 62, 4, 8],
            stride: vec![32, 8, 1],
        },
    ];
    assert_eq!(views[0].numel(), max, "saturates");
    assert_eq!(views[1].byte_range(), Some((0, max)));
    assert_eq!(views[2].byte_range(), Some((0, 8)));
    // [1 << 62, 4, 8] with contiguous strides would merge into 2^67 elements: kept apart.
    assert_eq!(views[3].canonical(), vec![(1 << 62, 32), (32, 1)]);
    for a in &views {
        assert!(a.byte_runs(layout::MAX_RUNS).is_none());
        for b in &views {
            if layout::overlaps(a, b) {
                let _ = layout::relation(a, b);
            }
        }
    }
}

/// Writes `metadata`-position JSON nested `depth` deep into an otherwise valid manifest.
fn nested_manifest(depth: usize, key: &str) -> Vec<u8> {
    let good = std::fs::read_to_string(good()).unwrap();
    let deep = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    good.replacen(
        "\"metadata\": {",
        &format!("\"{key}\": {deep},\n \"metadata\": {{"),
        1,
    )
    .into_bytes()
}

#[test]
fn deep_nesting_does_not_overflow_the_stack() {
    let dir = tempfile::tempdir().unwrap();
    with_good_rows(dir.path());
    // An unknown field is skipped without recursion: the manifest loads whole.
    for depth in [100_000, 1_000_000] {
        let file = dir.path().join(format!("unknown_{depth}.json"));
        std::fs::write(&file, nested_manifest(depth, "future")).unwrap();
        let run = dumpview([Path::new("scan"), &file]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(run.stderr, "");
        assert!(run.stdout.contains("): 8 records\n"), "{}", run.stdout);
    }
    // Inside metadata (a JSON value), serde_json's recursion limit (128) stops it.
    let file = dir.path().join("metadata.json");
    let good = std::fs::read_to_string(good()).unwrap();
    let deep = "[".repeat(100_000);
    std::fs::write(
        &file,
        good.replacen(
            "\"metadata\": {",
            &format!("\"metadata\": {{\"x\": {deep}"),
            1,
        ),
    )
    .unwrap();
    let run = dumpview([Path::new("scan"), &file]);
    assert_eq!(run.code, 1, "a warning is something found");
    assert!(
        run.stderr
            .contains("(recursion limit exceeded); kept the 0 records before it"),
        "{}",
        run.stderr
    );
    // Inside a record's statistics and an unknown record field.
    for (what, key) in [("stats", "\"max_abs\": "), ("record", "\"device\": ")] {
        let file = dir.path().join(format!("{what}.json"));
        let at = good.find("\"seq\": 3").unwrap();
        let at = at + good[at..].find(key).unwrap();
        let text = format!(
            "{}\"deep\": {}{}",
            &good[..at],
            "[".repeat(100_000),
            "]".repeat(100_000)
        ) + ", "
            + &good[at..];
        std::fs::write(&file, text).unwrap();
        let run = dumpview([Path::new("scan"), &file]);
        assert_eq!(run.code, 0, "{what}: {}", run.stderr);
        // Unknown fields are ignored even when deep; stats does not know "deep" either.
        assert!(run.stdout.contains("): 8 records\n"), "{}", run.stdout);
    }
    let file = dir.path().join("stat_value.json");
    let at = good.find("\"seq\": 3").unwrap();
    let at = at + good[at..].find("\"max_abs\": ").unwrap() + "\"max_abs\": ".len();
    let end = at + good[at..].find(',').unwrap();
    let text = format!("{}{}{}", &good[..at], "[".repeat(100_000), &good[end..]);
    std::fs::write(&file, text).unwrap();
    let run = dumpview([Path::new("scan"), &file]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    // The reason depends on how the statistic is read (recursion limit, or an unclosed list
    // skipped to the end of the file); the records before it are kept either way.
    assert!(
        run.stderr.contains("; kept the 3 records before it"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_symbolic_link_out_of_the_window_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let window = dir.path().join("rank0/match1-occ2");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(window.join("tensors")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), "x").unwrap();
    std::fs::write(window.join("tensors/inside.safetensors"), "x").unwrap();
    let text = std::fs::read_to_string(good())
        .unwrap()
        .replace(
            "tensors/runner.logits#1.safetensors",
            "escape/runner.logits#1.safetensors",
        )
        .replace(
            "tensors/layers.5.residual_mlp#1.safetensors",
            "link.safetensors",
        );
    std::fs::write(window.join("manifest.json"), text).unwrap();
    with_good_rows(&window);
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&outside, window.join("escape")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), window.join("link.safetensors"))
            .unwrap();
        // A link that stays inside the window is fine.
        std::os::unix::fs::symlink("tensors", window.join("alias")).unwrap();
    }
    let run = dumpview([Path::new("scan"), dir.path()]);
    let manifest = window.join("manifest.json");
    #[cfg(unix)]
    {
        assert_eq!(run.code, 1, "a warning is something found");
        let real = |p: &Path| std::fs::canonicalize(p).unwrap().display().to_string();
        assert_named(
            &run.stderr,
            &manifest,
            "warning",
            &format!(
                "runner.logits#1 (seq 1): evidence file \"escape/runner.logits#1.safetensors\" refused: it resolves to {}, outside the window directory {}; the tensor file is not used",
                real(&outside),
                real(&window)
            ),
        );
        assert_named(
            &run.stderr,
            &manifest,
            "warning",
            &format!(
                "layers.5.residual_mlp#1 (seq 7): evidence file \"link.safetensors\" refused: it resolves to {}, outside the window directory {}; the tensor file is not used",
                real(&outside.join("secret")),
                real(&window)
            ),
        );
        assert_eq!(run.stderr.lines().count(), 2, "{}", run.stderr);
    }
    #[cfg(not(unix))]
    assert_eq!(run.stderr, "", "missing files inside the window are fine");

    // The model: refused paths are dropped, good ones resolve inside the window.
    let dump = load(&[dir.path().to_path_buf()], &mut |_| {}).unwrap();
    let records = &dump.windows[0].records;
    let saved: Vec<_> = records.iter().filter(|r| r.tensor_file.is_some()).collect();
    #[cfg(unix)]
    assert!(saved.is_empty(), "{saved:?}");
    let mut record = records[0].clone();
    for (file, inside) in [
        ("tensors/inside.safetensors", true),
        ("alias/inside.safetensors", true),
        ("tensors/not_yet.safetensors", true),
        ("./tensors/../../x", false),
    ] {
        record.tensor_file = Some(file.to_string());
        let resolved = record.tensor_path(&window);
        assert_eq!(resolved.is_ok(), inside, "{file}: {resolved:?}");
        if let Ok(Some(path)) = resolved {
            assert!(path.starts_with(std::fs::canonicalize(&window).unwrap()));
        }
    }
    record.tensor_file = None;
    assert_eq!(record.tensor_path(&window), Ok(None));
}

#[test]
fn an_input_set_outside_the_window_is_dropped_with_a_warning() {
    let text = std::fs::read_to_string(good()).unwrap().replace(
        "\"input_sets\": []",
        r#""input_sets": [{"stage": "a", "occurrence": 1, "file": "inputs/a#1.pt", "args": {}},
                          {"stage": "b", "occurrence": 1, "file": "../../../b.pt", "args": {}}]"#,
    );
    // Named as good()'s own window, whose rows.f32 its token_rows reads; inputs/a#1.pt is not
    // on disk there, and need not be: only the path is judged.
    let file = good();
    let (manifest, warnings) = read_window(text.as_bytes(), &file).unwrap();
    assert_eq!(manifest.input_sets.len(), 1);
    assert_eq!(manifest.input_sets[0].stage, "a");
    assert_eq!(warnings.len(), 1);
    assert_eq!(
        warnings[0].to_string(),
        format!(
            "{}: input set b#1: evidence file \"../../../b.pt\" refused: it climbs out of the window directory with `..`; the input set is not used",
            file.display()
        )
    );
}

#[test]
fn a_bad_manifest_found_in_a_directory_is_named_by_its_own_path() {
    let dir = tempfile::tempdir().unwrap();
    let window = dir.path().join("rank0/match1-occ1");
    std::fs::create_dir_all(&window).unwrap();
    let manifest = window.join("manifest.json");
    std::fs::copy(fixture("truncated_mid_record.json"), &manifest).unwrap();
    let run = dumpview([Path::new("scan"), dir.path()]);
    assert_eq!(run.code, 1, "a warning is something found");
    assert_named(
        &run.stderr,
        &manifest,
        "warning",
        "truncated or damaged: stops being a valid manifest at byte 3914 (EOF while parsing a string); kept the 4 records before it",
    );
    std::fs::copy(fixture("schema_version_2.json"), &manifest).unwrap();
    let run = dumpview([Path::new("diff"), dir.path(), &good()]);
    assert_eq!(run.code, 2);
    assert_named(
        &run.stderr,
        &manifest,
        "error",
        "schema_version 2 is not supported (this dumpview reads 1)",
    );
}

#[test]
fn every_prefix_of_a_real_manifest_parses_without_panic_and_keeps_more_as_it_grows() {
    let bytes = std::fs::read(good()).unwrap();
    let path = Path::new("prefix.json");
    let full = parse_manifest(&bytes, path).unwrap();
    assert!(full.stopped.is_none());
    let total = full.manifest.records.len();
    assert_eq!(total, 8);
    let mut kept = 0;
    let mut header_complete_at = None;
    for len in 0..=bytes.len() {
        let prefix = &bytes[..len];
        match parse_manifest(prefix, path) {
            Err(e) => {
                assert!(
                    header_complete_at.is_none(),
                    "prefix {len}: an error after the header was complete at {header_complete_at:?}: {e}"
                );
                assert!(e.to_string().starts_with("prefix.json: "), "{e}");
            }
            Ok(parsed) => {
                header_complete_at.get_or_insert(len);
                let n = parsed.manifest.records.len();
                assert!(n >= kept, "prefix {len}: {n} records after {kept}");
                kept = n;
                match &parsed.stopped {
                    Some(stop) => {
                        assert_eq!(stop.kept_records, n);
                        assert!(stop.byte_offset <= len as u64, "{stop:?} at {len}");
                    }
                    None => assert!(
                        bytes[len..].iter().all(u8::is_ascii_whitespace),
                        "prefix {len}: complete before the end"
                    ),
                }
                for (i, r) in parsed.manifest.records.iter().enumerate() {
                    assert_eq!(*r, full.manifest.records[i]);
                }
                let _ = scan_window(&parsed.manifest);
                let _ = diff(
                    std::slice::from_ref(&parsed.manifest),
                    std::slice::from_ref(&full.manifest),
                    &Tolerances::default(),
                );
            }
        }
    }
    assert_eq!(kept, total);
    // The header ends where "records" begins.
    let records_at = bytes.windows(9).position(|w| w == b"\"records\"").unwrap();
    assert!(header_complete_at.unwrap() <= records_at);
}

/// Issue 11, item 1: one bad value costs its field (a statistic that is not a number becomes
/// null) or its record (a layout field of the wrong type), never the records after it; the
/// warning names the record index, its seq, the field and the byte offset.
#[test]
fn one_bad_value_costs_one_field_or_one_record() {
    let good = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples/llama_fp16_overflow/a/rank0/match1-occ1/manifest.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    let records = value["records"].as_array_mut().unwrap();
    assert_eq!(records.len(), 119);
    let (seq4, seq10) = (
        records[4]["seq"].as_u64().unwrap(),
        records[10]["seq"].as_u64().unwrap(),
    );
    let key10 = format!(
        "{}#{}",
        records[10]["stage"].as_str().unwrap(),
        records[10]["occurrence"]
    );
    records[4]["stats"]["max"] = "big".into();
    records[10]["stride"] = "x".into();
    let text = serde_json::to_string(&value).unwrap();
    let records = value["records"].as_array().unwrap();
    // Where record `index` starts in the damaged text.
    let offset = |index: usize| {
        text.find(&serde_json::to_string(&records[index]).unwrap())
            .unwrap()
    };
    // In the example's window, so that its token_rows find their rows.f32.
    let path = &good.with_file_name("damaged.json");
    let (window, warnings) = dumpview::model::ingest::read_window(text.as_bytes(), path).unwrap();
    let (clean, _) =
        dumpview::model::ingest::read_window(&std::fs::read(&good).unwrap(), path).unwrap();
    // 118 records: only the one with a bad layout is left out; record 4 keeps every other stat.
    assert_eq!(window.records.len(), 118);
    assert!(window.records.iter().all(|r| r.key() != key10));
    let (damaged, original) = (&window.records[4], &clean.records[4]);
    assert_eq!(damaged.seq, seq4);
    let (ds, os) = (
        damaged.stats.as_ref().unwrap(),
        original.stats.as_ref().unwrap(),
    );
    assert_eq!(ds.max, None);
    assert_eq!(
        (ds.min, ds.mean, ds.l2, ds.max_abs),
        (os.min, os.mean, os.l2, os.max_abs)
    );
    assert_eq!(window.records[117], clean.records[118]);
    let messages: Vec<&str> = warnings.iter().map(|w| w.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            format!(
                "record 4 (seq {seq4}, at byte {}): `stats.max`: statistic \"big\" is not a number, null, \"nan\", \"inf\" or \"-inf\"; that statistic is null (not compared); the record is kept",
                offset(4)
            ),
            format!(
                "record 10 (seq {seq10}, at byte {}): `stride`: invalid type: string \"x\", expected a sequence; the record is left out",
                offset(10)
            ),
        ]
    );
}

/// Issue 31, item 24: a symbolic link out of the searched directory is followed, and said once
/// per link (a note: nothing is lost); a link back inside the tree is no note.
#[cfg(unix)]
#[test]
fn a_link_out_of_the_tree_is_followed_and_said_once() {
    use std::os::unix::fs::symlink;
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples/llama_kv_alias/a/rank0/match1-occ1/manifest.json");
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let place = |dir: &Path| {
        std::fs::create_dir_all(dir).unwrap();
        for name in ["manifest.json", "rows.f32"] {
            std::fs::copy(example.with_file_name(name), dir.join(name)).unwrap();
        }
    };
    let tree = root.path().join("tree");
    place(&tree.join("rank0/match1-occ1"));
    place(&outside.path().join("run/rank0/match1-occ2"));
    place(&outside.path().join("run/rank0/match1-occ3"));
    symlink(outside.path().join("run"), tree.join("linked")).unwrap();
    symlink(tree.join("rank0"), tree.join("again")).unwrap();
    let dump = load(std::slice::from_ref(&tree), &mut |_| {}).unwrap();
    let notes: Vec<String> = dump
        .warnings
        .iter()
        .filter(|w| w.message.contains("symbolic link"))
        .map(|w| format!("{}: {}", w.file.display(), w.message))
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].starts_with(&format!("{}: ", tree.join("linked").display())));
    assert!(
        !dump.warnings.iter().any(|w| w.loses_evidence()),
        "{:?}",
        dump.warnings
    );
}

/// Issue 31, item 16: a `manifest.json` that is not a dump of any known format (a Python
/// package's, found by a search over a whole home directory) is skipped with one note; a
/// damaged file in a probe window directory stays lost evidence.
#[test]
fn a_manifest_json_of_something_else_is_skipped_with_a_note() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples/llama_kv_alias/a/rank0/match1-occ1/manifest.json");
    let home = tempfile::tempdir().unwrap();
    let window = home.path().join("run/rank0/match1-occ1");
    std::fs::create_dir_all(&window).unwrap();
    for name in ["manifest.json", "rows.f32"] {
        std::fs::copy(example.with_file_name(name), window.join(name)).unwrap();
    }
    let package = home.path().join(".local/lib/somepkg");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::write(
        package.join("manifest.json"),
        r#"{"name": "somepkg", "version": "1.2.3", "files": ["a.py"]}"#,
    )
    .unwrap();
    let dump = load(&[home.path().to_path_buf()], &mut |_| {}).unwrap();
    assert_eq!(dump.windows.len(), 1);
    let said: Vec<(String, bool)> = dump
        .warnings
        .iter()
        .map(|w| (w.to_string(), w.loses_evidence()))
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].0.contains("not a dump of any known format"),
        "{said:?}"
    );
    assert!(!said[0].1, "a note, not lost evidence");
    // The same bytes in a probe window directory: a damaged dump, lost evidence.
    let damaged = home.path().join("run/rank1/match1-occ1");
    std::fs::create_dir_all(&damaged).unwrap();
    std::fs::copy(package.join("manifest.json"), damaged.join("manifest.json")).unwrap();
    let dump = load(&[home.path().to_path_buf()], &mut |_| {}).unwrap();
    assert!(
        dump.warnings.iter().any(|w| w.loses_evidence()),
        "{:?}",
        dump.warnings
    );
}
