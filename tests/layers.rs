//! The import rules of the workbench's layers (STYLE.md, "Where things go"), checked on the
//! source text: `app` touches no terminal, thread, file or process; `ui` draws from what it is
//! handed and reads no files. (The model's and the CLI's rules live beside these.)

use std::path::{Path, PathBuf};

fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Every line of `layer` (outside comments) that mentions one of `forbidden`.
fn violations(layer: &str, forbidden: &[&str]) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(layer);
    let mut found = Vec::new();
    for file in sources(&root) {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for word in forbidden {
                if code.contains(word) {
                    found.push(format!("{}:{}: {word}: {}", file.display(), n + 1, code));
                }
            }
        }
    }
    found
}

#[test]
fn app_touches_no_terminal_thread_file_or_process() {
    let found = violations(
        "app",
        &[
            "ratatui",
            "crossterm",
            "std::thread",
            "thread::spawn",
            "std::fs",
            "fs::",
            "File::",
            "std::process",
            "Command::",
            "crate::runtime",
            "crate::ui",
            "is_file()",
            "canonicalize",
        ],
    );
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn ui_imports_no_runtime_and_reads_no_files() {
    let found = violations(
        "ui",
        &[
            "crate::runtime",
            "crossterm",
            "std::thread",
            "std::fs",
            "fs::",
            "File::",
            "std::process",
            "model::load::load",
            "model::load::discover",
            "model::msprobe",
            "model::windowed",
            "model::parse",
            "model::ingest",
            "model::formats",
            "is_file()",
        ],
    );
    assert!(found.is_empty(), "{}", found.join("\n"));
}
