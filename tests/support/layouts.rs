//! The layout fixtures of tests/fixtures/layouts/ (make_layouts_fixture.py), as the
//! tests/layouts*.rs files load and diff them.

use std::path::{Path, PathBuf};

use dumpview::model::analysis::compare::Tolerances;
use dumpview::model::analysis::diff::{DiffReport, diff};
use dumpview::model::dump::Dump;
use dumpview::model::ingest::load;

/// The fixture capture `name` (e.g. `tp2`, `tp2_nan`).
pub fn dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/layouts")
        .join(name)
}

/// The fixture capture `name` loaded.
///
/// # Panics
/// When it does not load or loads with warnings.
pub fn capture(name: &str) -> Dump {
    let dump = load(&[dir(name)], &mut |_| {}).unwrap();
    assert!(dump.warnings.is_empty(), "{:?}", dump.warnings);
    dump
}

/// The diff of fixture captures `a` and `b` under the default tolerances.
pub fn across(a: &str, b: &str) -> DiffReport {
    diff(
        &capture(a).windows,
        &capture(b).windows,
        &Tolerances::default(),
    )
}

/// The capture at `dir` loaded, warnings and all.
pub fn loaded(dir: &Path) -> Dump {
    load(&[dir.to_path_buf()], &mut |_| {}).unwrap()
}
