//! The committed example dumps (assets/examples/) read by the Rust model: every manifest
//! parses, and each pair's stated first non-finite record is what the model finds.

use std::path::{Path, PathBuf};

use dumpview::internals::embedded::example_pairs;
use dumpview::model::dump::Mode;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/examples")
}

fn manifests_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            manifests_under(&path, out);
        } else if path.file_name().is_some_and(|n| n == "manifest.json") {
            out.push(path);
        }
    }
}

#[test]
fn every_example_manifest_parses_with_consistent_records() {
    let mut files = Vec::new();
    manifests_under(&examples_dir(), &mut files);
    assert!(
        files.len() >= 10,
        "expected at least 5 pairs of manifests, found {}",
        files.len()
    );
    for file in files {
        let m = dumpview::model::formats::probe::read_file(&file).unwrap_or_else(|e| panic!("{e}"));
        assert!(!m.records.is_empty(), "{}: no records", file.display());
        for (i, r) in m.records.iter().enumerate() {
            assert_eq!(
                r.seq,
                i as u64,
                "{}: seq is the capture order",
                file.display()
            );
            assert_eq!(
                r.numel,
                r.shape.iter().product::<u64>(),
                "{}: {}",
                file.display(),
                r.key()
            );
            assert_eq!(
                r.shape.len(),
                r.stride.len(),
                "{}: {}",
                file.display(),
                r.key()
            );
            if let (Some(storage), Some(data)) = (r.storage_ptr, r.data_ptr) {
                assert_eq!(data, storage + r.storage_offset * u64::from(r.element_size));
            }
            if let Some(rel) = &r.tensor_file {
                assert!(
                    m.window_dir().join(rel).is_file(),
                    "{}: {rel} missing",
                    file.display()
                );
            }
        }
        for set in &m.input_sets {
            assert!(
                m.window_dir().join(&set.file).is_file(),
                "{}: {} missing",
                file.display(),
                set.file
            );
        }
    }
}

#[test]
fn first_nonfinite_matches_each_pairs_known_answer() {
    let pairs = example_pairs();
    assert!(pairs.len() >= 5, "found {} example pairs", pairs.len());
    for pair in &pairs {
        for (side, (source, bytes)) in [("a", &pair.a), ("b", &pair.b)] {
            let m = dumpview::model::formats::probe::from_slice(bytes, Path::new(source)).unwrap();
            let found = m.first_nonfinite().map(|r| r.key());
            let expected = pair.expected["first_nonfinite"][side]
                .as_str()
                .map(str::to_string);
            assert_eq!(found, expected, "{} side {side}", pair.name);
        }
    }
}

#[test]
fn graph_pair_has_graph_records_and_the_stated_counts() {
    let pair = example_pairs()
        .into_iter()
        .find(|p| p.name == "llama_eager_vs_graph")
        .expect("llama_eager_vs_graph example");
    let a = dumpview::model::formats::probe::from_slice(pair.a.1, Path::new(&pair.a.0)).unwrap();
    let b = dumpview::model::formats::probe::from_slice(pair.b.1, Path::new(&pair.b.0)).unwrap();
    assert_eq!(
        a.records.len() as u64,
        pair.expected["record_counts"]["a"].as_u64().unwrap()
    );
    assert_eq!(
        b.records.len() as u64,
        pair.expected["record_counts"]["b"].as_u64().unwrap()
    );
    assert!(a.records.iter().all(|r| r.mode == Mode::Eager));
    assert!(b.records.iter().any(|r| r.mode == Mode::Graph));
    assert!(
        b.records.len() * 4 < a.records.len(),
        "graph side should hold far fewer records"
    );
}

#[test]
fn input_set_op_is_read_and_absent_in_manifests_written_before_it() {
    let mut files = Vec::new();
    manifests_under(&examples_dir(), &mut files);
    let mut sets = 0;
    for file in &files {
        let m = dumpview::model::formats::probe::read_file(file).unwrap_or_else(|e| panic!("{e}"));
        for set in &m.input_sets {
            assert_eq!(set.op, None, "{}: {}", file.display(), set.file);
            sets += 1;
        }
    }
    assert!(
        sets >= 4,
        "the llama examples hold input sets, found {sets}"
    );
    // tests/fixtures/replay: written with capture_inputs(..., _op=...) for #1, without for #2.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/replay/dump/rank0/match1-occ1/manifest.json");
    let m = dumpview::model::formats::probe::read_file(&fixture).unwrap_or_else(|e| panic!("{e}"));
    let ops: Vec<_> = m
        .input_sets
        .iter()
        .map(|s| (s.stage.as_str(), s.occurrence, s.op.as_deref()))
        .collect();
    assert_eq!(
        ops,
        [
            (
                "attn.layout",
                1,
                Some("tests/python/replay_candidates.py:layout_probe")
            ),
            ("attn.layout", 2, None),
        ]
    );
}
