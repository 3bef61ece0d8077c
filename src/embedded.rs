//! Files compiled into the binary: the probe and the replay tool (for `dumpview probe
//! install`) and the example dumps under assets/examples/ (the default input when no file
//! is given).

use include_dir::{Dir, include_dir};

/// Source of assets/dump_probe.py.
pub const PROBE_SOURCE: &str = include_str!("../assets/dump_probe.py");

/// Source of assets/replay_op.py (single-operator replay, docs/replay.md).
pub const REPLAY_SOURCE: &str = include_str!("../assets/replay_op.py");

/// assets/examples/: one directory per example pair, each with `expected.json`,
/// `README.md` and sides `a/` and `b/` holding probe dumps.
pub static EXAMPLES: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/assets/examples");

/// One embedded example pair.
#[derive(Debug, Clone)]
pub struct ExamplePair {
    /// Directory name, e.g. `llama_fp16_overflow`.
    pub name: String,
    /// The parsed `expected.json` (the known answer of the pair).
    pub expected: serde_json::Value,
    /// `(embedded path, bytes)` of side a's and side b's manifest.
    pub a: (String, &'static [u8]),
    pub b: (String, &'static [u8]),
}

/// The embedded example pairs, sorted by name.
///
/// # Panics
/// Never for a binary built from this repository: the test-suite checks that
/// every pair has a parseable `expected.json` naming existing manifests.
pub fn example_pairs() -> Vec<ExamplePair> {
    let mut pairs: Vec<ExamplePair> = EXAMPLES
        .dirs()
        .filter_map(|dir| {
            let expected_file = dir.get_file(dir.path().join("expected.json"))?;
            let expected: serde_json::Value = serde_json::from_slice(expected_file.contents())
                .expect("embedded expected.json parses");
            let side = |key: &str| {
                let rel = expected[key]
                    .as_str()
                    .expect("expected.json names side manifests");
                let path = dir.path().join(rel);
                let file = EXAMPLES
                    .get_file(&path)
                    .unwrap_or_else(|| panic!("embedded {} is missing", path.display()));
                (
                    format!("embedded:assets/examples/{}", path.display()),
                    file.contents(),
                )
            };
            Some(ExamplePair {
                name: dir.path().display().to_string(),
                a: side("a"),
                b: side("b"),
                expected,
            })
        })
        .collect();
    pairs.sort_by(|x, y| x.name.cmp(&y.name));
    pairs
}
