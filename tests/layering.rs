//! The import rules of ../shared/STYLE.md ("Where things go"), checked on the source text:
//! which layer may name which, and no import cycle between the files of `src/model/`.
//!
//! The check reads `use` lines and `crate::…` / `super::…` paths outside comments and
//! outside each file's `#[cfg(test)]` module (a test may reach anywhere). `pub use` lines are
//! re-exports, not dependencies, and are not counted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, as (path relative to `src/`, text without its test module).
fn sources(dir: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    let mut stack = vec![root.join(dir)];
    if root.join(format!("{dir}.rs")).is_file() {
        stack = vec![root.join(format!("{dir}.rs"))];
    }
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            let rel = path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.push((rel, code_of(&text)));
        }
    }
    out.sort();
    out
}

/// The text without `//` comments and without the `#[cfg(test)] mod tests` block at its end.
fn code_of(text: &str) -> String {
    let body = match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    };
    body.lines()
        .map(|line| match line.trim_start().starts_with("//") {
            true => "",
            false => line,
        })
        .filter(|line| !line.trim_start().starts_with("pub use "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The (file, word) pairs where a file of `dir` names one of `forbidden`.
fn violations(dir: &str, forbidden: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for (file, code) in sources(dir) {
        for word in forbidden {
            if code.contains(word) {
                found.push(format!("{file} names `{word}`"));
            }
        }
    }
    found
}

#[test]
fn the_model_uses_no_terminal_cli_or_watch_crate() {
    let found = violations(
        "model",
        &["ratatui", "crossterm", "clap", "notify::", "use notify"],
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn each_model_layer_uses_only_the_layers_below_it() {
    let above_dump = [
        "model::io",
        "model::formats",
        "model::ingest",
        "model::analysis",
        "model::present",
        "model::tensor",
    ];
    let mut found = violations("model/dump", &above_dump);
    found.extend(violations(
        "model/io",
        &[
            "model::formats",
            "model::ingest",
            "model::analysis",
            "model::present",
        ],
    ));
    found.extend(violations(
        "model/tensor",
        &[
            "model::dump",
            "model::formats",
            "model::ingest",
            "model::analysis",
            "model::present",
        ],
    ));
    found.extend(violations(
        "model/formats",
        &["model::ingest", "model::analysis", "model::present"],
    ));
    found.extend(violations(
        "model/ingest",
        &["model::analysis", "model::present"],
    ));
    // The analyses know the capture, not a format's files, and read no files themselves. They
    // use `dump`, `tensor` and `replay` (the report carries a replay's judgement as evidence),
    // never the layers above them.
    found.extend(violations(
        "model/analysis",
        &[
            "model::formats",
            "model::ingest",
            "model::io",
            "std::fs",
            "File::open",
            "model::present",
            "model::cases",
            "model::input_set",
            "model::watch",
        ],
    ));
    // A replay is read back and judged from its own directory: it knows tensors and the input
    // set, not the capture's analyses, the case matrix or any rendering; only `load.rs` reads.
    found.extend(
        violations(
            "model/replay",
            &[
                "model::formats",
                "model::ingest",
                "model::analysis",
                "model::cases",
                "model::present",
                "model::watch",
                "model::io",
                "std::fs",
            ],
        )
        .into_iter()
        .filter(|v| *v != "model/replay/load.rs names `model::io`"),
    );
    // Watch events are built from the analysis and its rendering, never from files.
    found.extend(violations(
        "model/watch",
        &[
            "model::formats",
            "model::ingest",
            "model::io",
            "model::cases",
            "std::fs",
        ],
    ));
    // The case matrix judges through `replay` and compares through `analysis`; it knows no
    // format, loads no capture and renders nothing. Its files (the matrix on disk, the input
    // set it plans on) are read and written through `model::io` by `store` and `create` only.
    found.extend(
        violations(
            "model/cases",
            &[
                "model::formats",
                "model::ingest",
                "model::io",
                "model::present",
            ],
        )
        .into_iter()
        .filter(|v| {
            !["model/cases/store.rs", "model/cases/create.rs"]
                .iter()
                .any(|file| *v == format!("{file} names `model::io`"))
        }),
    );
    // Rendering: text, Markdown and JSON of the analyses, the replays' judgements and the case
    // matrix's analysis. Nothing it renders is computed here from files or formats, and the
    // watch events (which render through it) are above it.
    found.extend(violations(
        "model/present",
        &[
            "model::formats",
            "model::ingest",
            "model::io",
            "model::watch",
            "std::fs",
            "File::open",
        ],
    ));
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_app_holds_no_terminal_threads_files_or_processes() {
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
            "model::io",
        ],
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_ui_computes_no_analysis() {
    // The ui draws the values it is handed; every number it shows was computed in the model
    // (STYLE: derived numbers come from analysis, not `ui`). These are the model's entry
    // points that compute: a call of one from `ui/` is analysis done while drawing.
    let found = violations(
        "ui",
        &[
            "Analysis::compute",
            "Analysis::refresh",
            "compute_diff(",
            "with_tolerances(",
            "Report::build",
            "compare_records(",
            "scan_window(",
            "MergedCounts::of(",
            "diff::diff(",
            "metrics::compare(",
            "pairing::compare(",
            "judge(",
            "analyze(",
        ],
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_ui_draws_only() {
    let found = violations(
        "ui",
        &[
            "crate::runtime",
            "crate::tui",
            "crossterm",
            "model::ingest",
            "model::formats",
            "model::io",
            "std::fs",
            "fs::",
            "File::",
            "std::thread",
            "std::process",
        ],
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_cli_prints_the_model_and_nothing_of_the_workbench() {
    let mut found = violations("cli", &["crate::app", "crate::ui", "crate::tui"]);
    // Only the two commands that open the workbench or follow sources hand over to the
    // runtime; every other command starts what it needs through the services.
    let openers = ["cli/workbench.rs", "cli/watch.rs"];
    found.extend(
        violations("cli", &["crate::runtime"])
            .into_iter()
            .filter(|v| !openers.iter().any(|file| v.starts_with(file))),
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn main_only_parses_dispatches_and_maps_the_exit_status() {
    let found = violations("main", &["dumpview::internals", "dumpview::model"]);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_services_use_the_model_and_remote_only() {
    // The Python child, the replay and case-matrix runners and the remote sources' mapping:
    // what both the CLI and the workbench start, below both.
    let found = violations(
        "services",
        &[
            "crate::app",
            "crate::ui",
            "crate::runtime",
            "crate::cli",
            "crate::tui",
            "ratatui",
            "crossterm",
            "clap",
        ],
    );
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_runtime_is_below_the_cli_and_nothing_below_it_names_it_or_the_services() {
    let mut found = violations("runtime", &["crate::cli", "clap"]);
    for layer in ["model", "remote", "services", "app", "ui"] {
        found.extend(violations(layer, &["crate::runtime"]));
    }
    for layer in ["model", "remote", "app", "ui"] {
        found.extend(violations(layer, &["crate::services", "services::"]));
    }
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_remote_layer_uses_the_model_only_and_nothing_below_it_uses_it() {
    // `remote` runs ssh and writes the cache; the services map remote sources to local paths
    // for the CLI and the workbench, and the runtime uses it for watching.
    let mut found = violations(
        "remote",
        &[
            "crate::app",
            "crate::ui",
            "crate::cli",
            "crate::runtime",
            "crate::services",
            "crate::tui",
            "ratatui",
            "crossterm",
            "clap",
        ],
    );
    for layer in ["model", "app", "ui", "cli"] {
        found.extend(violations(layer, &["crate::remote", "remote::"]));
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// The module a file of `src/` is (`model/formats/probe/mod.rs` → `model::formats::probe`).
fn module_of(file: &str) -> String {
    let path = PathBuf::from(file.trim_end_matches(".rs"));
    let mut parts: Vec<String> = path
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// The modules of `known` that `code`, the code of module `module`, names.
fn references(module: &str, code: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let parent = module.rsplit_once("::").map_or("", |(p, _)| p).to_string();
    let mut add = |path: String| {
        // The longest known module that is a prefix of the path.
        let mut best = None;
        for candidate in known {
            if (path == *candidate || path.starts_with(&format!("{candidate}::")))
                && best
                    .as_ref()
                    .is_none_or(|b: &String| candidate.len() > b.len())
            {
                best = Some(candidate.clone());
            }
        }
        if let Some(best) = best.filter(|b| b != module) {
            out.insert(best);
        }
    };
    for (at, _) in code.match_indices("crate::") {
        let rest: String = code[at + 7..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        add(rest.trim_end_matches(':').to_string());
    }
    // A child module named by its bare name (`probe::Probe` in `formats`).
    for child in known
        .iter()
        .filter_map(|k| k.strip_prefix(&format!("{module}::")))
    {
        if child.contains("::") {
            continue;
        }
        let bare = format!("{child}::");
        let named = code.match_indices(&bare).any(|(at, _)| {
            at == 0 || {
                let before = code.as_bytes()[at - 1];
                !(before.is_ascii_alphanumeric() || before == b'_' || before == b':')
            }
        });
        if named {
            add(format!("{module}::{child}"));
        }
    }
    for (at, _) in code.match_indices("super::") {
        if at > 0 && code.as_bytes()[at - 1] == b':' {
            continue;
        }
        let rest: String = code[at + 7..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        add(format!("{parent}::{}", rest.trim_end_matches(':')));
    }
    out
}

#[test]
fn the_files_of_the_model_import_no_cycle() {
    let files = sources("model");
    let modules: BTreeMap<String, String> = files
        .iter()
        .map(|(file, code)| (module_of(file), code.clone()))
        .collect();
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    let edges: BTreeMap<String, BTreeSet<String>> = modules
        .iter()
        .map(|(m, code)| (m.clone(), references(m, code, &known)))
        .collect();
    // Depth-first search for a back edge; report the cycle it closes.
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
        cycles: &mut Vec<String>,
    ) {
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for next in edges.get(m).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => {
                    let from = path.iter().position(|p| p == next).unwrap();
                    cycles.push(format!("{} -> {next}", path[from..].join(" -> ")));
                }
                Some(_) => {}
                None => visit(next, edges, state, path, cycles),
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
    }
    let (mut state, mut cycles) = (BTreeMap::new(), Vec::new());
    for m in edges.keys() {
        if !state.contains_key(m) {
            visit(m, &edges, &mut state, &mut Vec::new(), &mut cycles);
        }
    }
    assert!(cycles.is_empty(), "{cycles:#?}");
}

/// One I/O boundary (../shared/STYLE.md, `model/io`): in the model, only `model/io` and the
/// modules that must touch files (ingest, the case matrix's store and its planning, a replay
/// directory read back) call the file system; the analyses, the renderers, the formats and
/// the tensor readers are handed bytes or paths that ingest resolved. Two known exceptions
/// stay listed until they move: the evidence rule (`dump/evidence.rs`, which resolves a path
/// for ingest) and a case attempt's file list (`cases/analysis.rs`).
#[test]
fn the_model_touches_files_only_through_io() {
    const MAY_TOUCH_FILES: &[&str] = &[
        "model/io/",
        "model/ingest/",
        "model/cases/store.rs",
        "model/cases/create.rs",
        "model/replay/load.rs",
        "model/dump/evidence.rs",
        "model/cases/analysis.rs",
    ];
    const FILE_SYSTEM: &[&str] = &[
        "std::fs",
        "canonicalize",
        ".is_file()",
        ".is_dir()",
        ".exists()",
        "metadata(",
        "read_dir(",
        "memmap2",
    ];
    let mut found = Vec::new();
    for (file, code) in sources("model") {
        if MAY_TOUCH_FILES
            .iter()
            .any(|allowed| file.starts_with(allowed))
        {
            continue;
        }
        for word in FILE_SYSTEM {
            if code.contains(word) {
                found.push(format!("{file} names `{word}`"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the model touches files outside model/io:\n{}",
        found.join("\n")
    );
}

/// The backticked names of docs/architecture.md's "Where to add" section: every file or folder
/// path (`src/ui/`, `model/dump/window.rs`, `scripts/fuzz.sh`; relative to the repository or to
/// `src/`) exists, and every module path of the crate (`runtime::replay::run`) names a module
/// file that exists and, for its last segment, an item that file mentions. Placeholders
/// (`<name>`) are skipped.
#[test]
fn every_path_where_to_add_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let start = doc
        .find("## Where to add")
        .expect("docs/architecture.md has a \"## Where to add\" section");
    // "Where to add" and the steps of "Adding a statistic" it points to, up to the heading
    // after that.
    let steps = doc[start..]
        .find("## Adding a statistic")
        .expect("docs/architecture.md has an \"## Adding a statistic\" section")
        + start;
    let section = &doc[start..];
    let section = match doc[steps + 3..].find("\n## ") {
        Some(end) => &section[..steps + 3 + end - start],
        None => section,
    };
    let tops = [
        "model",
        "app",
        "ui",
        "cli",
        "runtime",
        "services",
        "remote",
        "reference",
    ];
    let (mut checked, mut missing) = (0, Vec::new());
    for (i, quoted) in section.split('`').enumerate() {
        // Placeholders: `<name>`, and names in capitals (`CASE/FILE`).
        let placeholder = quoted.contains('<') || !quoted.chars().any(|c| c.is_lowercase());
        if i % 2 == 0 || placeholder || quoted.contains(' ') {
            continue;
        }
        let looks_like_path = quoted.contains('/')
            && quoted
                .chars()
                .all(|c| c.is_alphanumeric() || "_-./".contains(c));
        if looks_like_path {
            checked += 1;
            let rel = quoted.trim_end_matches('/');
            // Relative to the root, to `src/` or (the model's own paths) to `src/model/`.
            let exists = ["", "src", "src/model"]
                .iter()
                .any(|base| root.join(base).join(rel).exists());
            if !exists {
                missing.push(format!("path `{quoted}`"));
            }
            continue;
        }
        let segments: Vec<&str> = quoted.split("::").collect();
        let is_module_path = segments.len() >= 2
            && tops.contains(&segments[0])
            && segments
                .iter()
                .all(|s| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_'));
        if !is_module_path {
            continue;
        }
        checked += 1;
        // The longest prefix of the path that is a module file; what follows it must be
        // mentioned in that file (an item, a variant, a method).
        let mut found = None;
        for n in (1..=segments.len()).rev() {
            let dir = root.join("src").join(segments[..n].join("/"));
            for file in [dir.with_extension("rs"), dir.join("mod.rs")] {
                if file.is_file() && found.is_none() {
                    found = Some((n, file));
                }
            }
        }
        match found {
            None => missing.push(format!("module `{quoted}`")),
            Some((n, file)) if n < segments.len() => {
                let text = std::fs::read_to_string(&file).unwrap();
                if !text.contains(segments[n]) {
                    missing.push(format!(
                        "`{quoted}`: {} does not name `{}`",
                        file.display(),
                        segments[n]
                    ));
                }
            }
            Some(_) => {}
        }
    }
    assert!(
        checked >= 10,
        "only {checked} names checked: did the section's format change?"
    );
    assert!(
        missing.is_empty(),
        "docs/architecture.md \"Where to add\" names what does not exist: {missing:#?}"
    );
}

#[test]
fn the_library_makes_public_only_what_callers_need() {
    // docs/architecture.md, "The library's public surface": `model`, `cli`, `export`, and the
    // one hidden module for this repository's tests; the workbench's machinery is private.
    let lib = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs"))
        .expect("src/lib.rs");
    let public: Vec<&str> = lib
        .lines()
        .filter_map(|line| line.strip_prefix("pub mod "))
        .map(|rest| rest.trim_end_matches([' ', '{', ';']))
        .collect();
    assert_eq!(public, ["cli", "export", "model", "internals"]);
    let hidden = lib.find("#[doc(hidden)]\npub mod internals").is_some();
    assert!(hidden, "internals must be #[doc(hidden)]");
}
