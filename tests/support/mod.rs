//! Shared test harnesses, one of each, for every test file (`mod support;`):
//! - [`run`]: the `dumpview` binary under test (builders and the shapes tests assert on);
//! - [`sshd`]: a real OpenSSH server, shared per test binary or a test's own;
//! - [`tmux`]: a real terminal running the binary;
//! - [`python`]: the Python with torch, the replay candidates;
//! - [`layouts`]: the layout fixtures loaded and diffed;
//! - [`watch`], [`deadline`]: watched captures, commands with a time limit.

#![allow(dead_code)]

pub mod deadline;
pub mod layouts;
pub mod python;
pub mod run;
pub mod sshd;
pub mod tmux;
pub mod watch;

use std::path::Path;

/// Copies the tree at `from` into `to` (created).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Every file and directory under `dir` (none when it cannot be read), directories after
/// their contents.
pub fn entries_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(entries_under(&path));
        }
        out.push(path);
    }
    out
}

/// Every file under `dir`, sorted.
pub fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = entries_under(dir)
        .into_iter()
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// The ssh control directories `/tmp/dvssh-<pid>-*` of process `pid`.
pub fn control_dirs(pid: u32) -> Vec<std::path::PathBuf> {
    std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("dvssh-{pid}-"))
        })
        .map(|e| e.path())
        .collect()
}
