//! The tensor readers against torch itself: every fixture of tests/fixtures/tensors/ (written
//! by make_fixtures.py) and committed probe outputs, entry by entry and value by value against
//! expected.json; and the bad-input corpus of tests/fixtures/bad_tensors/ (README.md there),
//! each refused with a message naming the file and the problem, never a panic.

use std::path::{Path, PathBuf};

use dumpview::model::tensor::{DType, FileFormat, TensorFile};
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn expected() -> serde_json::Map<String, Value> {
    let path = root().join("tests/fixtures/tensors/expected.json");
    let text = std::fs::read_to_string(&path).expect("expected.json");
    match serde_json::from_str(&text).expect("expected.json parses") {
        Value::Object(map) => map,
        _ => panic!("expected.json is an object"),
    }
}

/// A fixture name, or a path relative to the repository root for committed probe outputs.
fn path_of(name: &str) -> PathBuf {
    if name.contains('/') {
        root().join(name)
    } else {
        root().join("tests/fixtures/tensors").join(name)
    }
}

fn usizes(value: &Value) -> Vec<usize> {
    value
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v.as_u64().expect("non-negative integer") as usize)
        .collect()
}

/// A value written as Python's shortest round-trip decimal (`repr`), `nan`, `inf` or `-inf`:
/// strings, because serde_json's default float parsing may miss the last bit.
fn number(value: &Value) -> f64 {
    let text = value.as_str().expect("values are strings");
    text.parse()
        .unwrap_or_else(|_| panic!("{text:?} is not a number"))
}

/// Same value, NaN equal to NaN, -0 distinct from +0.
fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

fn check_file(name: &str, entries: &[Value]) -> usize {
    let path = path_of(name);
    let file = TensorFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let want_format = if name.ends_with(".safetensors") {
        FileFormat::Safetensors
    } else {
        FileFormat::TorchZip
    };
    assert_eq!(file.format, want_format, "{name}");
    let keys: Vec<&str> = file.entries.iter().map(|e| e.key.as_str()).collect();
    let want_keys: Vec<&str> = entries.iter().map(|e| e["key"].as_str().unwrap()).collect();
    assert_eq!(keys, want_keys, "{name}: keys in save order");
    let mut values = 0;
    for (entry, want) in file.entries.iter().zip(entries) {
        let what = format!("{name} [{:?}]", entry.key);
        let dtype = DType::from_name(want["dtype"].as_str().unwrap()).expect("known dtype");
        assert_eq!(entry.dtype, dtype, "{what}: dtype");
        assert_eq!(entry.shape, usizes(&want["shape"]), "{what}: shape");
        assert_eq!(entry.strides, usizes(&want["stride"]), "{what}: stride");
        assert_eq!(
            entry.storage_offset,
            want["storage_offset"].as_u64().unwrap() as usize,
            "{what}: storage_offset"
        );
        let view = file.view(entry);
        let want_values = want["values"].as_array().unwrap();
        assert_eq!(view.numel(), want_values.len(), "{what}: numel");
        for (i, w) in want_values.iter().enumerate() {
            let (got, w) = (view.get(i), number(w));
            assert!(same(got, w), "{what}: element {i} is {got}, torch says {w}");
        }
        values += want_values.len();
    }
    values
}

#[test]
fn fixtures_match_torch_value_by_value() {
    let expected = expected();
    let mut checked = 0;
    for (name, entries) in &expected {
        if name.contains('/') {
            continue;
        }
        checked += check_file(name, entries.as_array().unwrap());
    }
    // Every fixture make_fixtures.py writes is listed, and every listed one was read.
    let on_disk = std::fs::read_dir(root().join("tests/fixtures/tensors"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "pt")
        })
        .count();
    let listed = expected.keys().filter(|k| !k.contains('/')).count();
    assert_eq!(on_disk, listed, "fixtures on disk vs expected.json");
    assert!(
        listed >= 15 && checked > 100,
        "{listed} files, {checked} values"
    );
}

#[test]
fn views_share_their_storage_bytes() {
    let file = TensorFile::open(&path_of("shared_storage.pt")).unwrap();
    let storages: Vec<_> = file.entries.iter().map(|e| e.storage.clone()).collect();
    assert_eq!(storages.len(), 3);
    assert!(storages.iter().all(|s| *s == storages[0]), "{storages:?}");
    // torch aligns storages to 64 bytes; the range points into the file itself.
    assert_eq!(storages[0].start % 64, 0);
    assert!(storages[0].end <= file.len());
    let view = TensorFile::open(&path_of("view_offset.pt")).unwrap();
    assert_eq!(view.entries[0].storage_offset, 8);
    assert!(!view.view(&view.entries[0]).is_contiguous());
}

#[test]
fn probe_outputs_match_torch() {
    let expected = expected();
    let external: Vec<_> = expected.iter().filter(|(k, _)| k.contains('/')).collect();
    assert!(
        external
            .iter()
            .any(|(k, _)| k.ends_with("inputs/layers.0.rope#1.pt")),
        "the probe input set is listed"
    );
    assert!(
        external.iter().any(|(k, _)| k.ends_with(".safetensors")),
        "a probe safetensors file is listed"
    );
    for (name, entries) in external {
        check_file(name, entries.as_array().unwrap());
    }
    // The input set's tensors are the manifest's arguments, by name, not the raw spans.
    let rope = TensorFile::open(&root().join(
        "assets/examples/llama_chunked_prefill/a/rank0/match1-occ2/inputs/layers.0.rope#1.pt",
    ))
    .unwrap();
    let keys: Vec<_> = rope.entries.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["q", "k", "cos", "sin", "positions"]);
    assert_eq!(rope.get("positions").unwrap().dtype, DType::Int64);
}

/// Each bad file and a phrase its error must contain (README.md in the directory).
const BAD: &[(&str, &str)] = &[
    ("empty.pt", "empty file"),
    ("wrong_magic.pt", "not a torch.save archive"),
    ("legacy.pt", "legacy torch.save format"),
    ("truncated.pt", "damaged zip archive"),
    ("no_data_pkl.pt", "without `<prefix>/data.pkl`"),
    ("big_endian.pt", "big-endian archive"),
    (
        "compressed_storage.pt",
        "entry `archive/data/0` is compressed (deflate, method 8)",
    ),
    (
        "missing_storage.pt",
        "storage `3` is missing from the archive",
    ),
    (
        "malicious_global.pt",
        "refused pickle global `posix.system`",
    ),
    (
        "malicious_stack_global.pt",
        "refused pickle global `builtins.eval`",
    ),
    ("short_storage.pt", "tensor \"\": storage holds 8 bytes"),
    ("huge_shape.pt", "overflows the address space"),
    ("deep_nesting.pt", "nesting deeper than 1000 MARKs"),
    ("deep_list.pt", "nested deeper than 1000 levels"),
    (
        "cycle.pt",
        "nested deeper than 1000 levels (or holds a cycle)",
    ),
    ("memo_missing.pt", "memo GET of missing index 7"),
    (
        "truncated_pickle.pt",
        "truncated: claims 7 bytes, only 4 left",
    ),
];

#[test]
fn bad_files_are_refused_with_the_file_and_the_reason() {
    let dir = root().join("tests/fixtures/bad_tensors");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    for &(name, phrase) in BAD {
        let path = dir.join(name);
        assert!(path.exists(), "{name} missing: run make_bad.py");
        assert!(
            readme.contains(&format!("`{name}`")),
            "{name} not in README.md"
        );
        let result = std::panic::catch_unwind(|| TensorFile::open(&path));
        let err = match result {
            Ok(Ok(file)) => panic!("{name} was accepted: {file:?}"),
            Ok(Err(err)) => err.to_string(),
            Err(_) => panic!("{name} panicked"),
        };
        assert!(
            err.contains(name),
            "{name}: the message names the file: {err}"
        );
        assert!(
            err.contains(phrase),
            "{name}: expected {phrase:?} in: {err}"
        );
        // The same bytes through from_bytes (the fuzz target's path) give the same answer.
        let bytes = std::fs::read(&path).unwrap();
        let again = TensorFile::from_bytes(bytes, &path)
            .unwrap_err()
            .to_string();
        assert_eq!(again, err, "{name}");
    }
    // Every file in the corpus is covered.
    let files = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".pt"))
        .count();
    assert_eq!(files, BAD.len(), "bad_tensors/*.pt vs the table above");
}

#[test]
fn nothing_was_executed() {
    // The malicious pickles name `touch /tmp/pwned`; reading them must not run it. (A stale
    // file from elsewhere would not prove execution, so only check it was not created now.)
    let marker = Path::new("/tmp/pwned");
    let before = marker.metadata().ok().and_then(|m| m.modified().ok());
    let dir = root().join("tests/fixtures/bad_tensors");
    for name in ["malicious_global.pt", "malicious_stack_global.pt"] {
        assert!(TensorFile::open(&dir.join(name)).is_err());
    }
    let after = marker.metadata().ok().and_then(|m| m.modified().ok());
    assert_eq!(before, after);
}
