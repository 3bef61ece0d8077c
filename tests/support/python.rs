//! What tests/replay.rs and tests/cases.rs both set up: the repository's paths, the Python
//! with torch that runs replay_op.py, the candidates of tests/python/replay_candidates.py,
//! and a finished command's output.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

// Where tests/cases.rs and tests/unfinished_windows.rs have always imported them from.
#[allow(unused_imports)]
pub use super::run::{Ran, ran};

/// The candidates' module, relative to the repository.
pub const CANDIDATES: &str = "tests/python/replay_candidates.py";

/// `path` under the repository.
pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The Python with torch the tests run replay_op.py with: `$DUMPVIEW_PYTHON`, else the
/// venv's; `None` (the test says "skipped") when neither imports torch.
pub fn python() -> Option<&'static str> {
    static PYTHON: OnceLock<Option<String>> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let candidate = std::env::var("DUMPVIEW_PYTHON")
                .ok()
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| repo(".venv/bin/python").display().to_string());
            let ok = Command::new(&candidate)
                .args(["-c", "import torch"])
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                eprintln!(
                    "skipped: no Python with torch ({candidate}); scripts/test.sh makes .venv"
                );
            }
            ok.then_some(candidate)
        })
        .as_deref()
}

/// `ABSOLUTE/tests/python/replay_candidates.py:NAME`.
pub fn candidate(name: &str) -> String {
    format!("{}:{name}", repo(CANDIDATES).display())
}

/// A Python that has no torch: the test's interpreter with `-S` (no site-packages), as a
/// script in `dir`.
pub fn python_without_torch(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("python-without-torch");
    let real = python().unwrap_or("python3");
    std::fs::write(&path, format!("#!/bin/sh\nexec '{real}' -S \"$@\"\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}
