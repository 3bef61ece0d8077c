//! Arbitrary bytes as a probe window with token rows: a manifest whose `token_rows` names the
//! row-statistics sidecar beside it (`rows.f32`, float32 rows of `ROW_WIDTH` values;
//! docs/manifest.md, "Token rows"), read as the loader reads it (`read_window`: the manifest,
//! then `token_rows` and the sidecar, checked against each other), once with the sidecar read
//! (`MapChoice::Never`, a watched dump) and once as a loaded one is (`MapChoice::Lazy`,
//! mapped when large), which must agree; then every row of every record looked up, and
//! everything `scan` and `diff` do with the window (the token view: rows paired, judged and
//! sharpened).
//!
//! The input is the manifest, a NUL byte (which a JSON text never holds), then the sidecar's
//! bytes, written to `rows.f32` in a directory of this process's own under the temporary
//! directory ([`window_dir`]); without a NUL there is no sidecar. Any panic (overflow
//! included: cargo fuzz builds with debug assertions), stack overflow or outsized allocation
//! is a crash.

#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use dumpview::model::analysis::compare::Tolerances;
use dumpview::model::analysis::diff::diff;
use dumpview::model::analysis::scan::scan_window;
use dumpview::model::dump::ROW_WIDTH;
use dumpview::model::ingest::{read_window, read_window_with};
use dumpview::model::io::MapChoice;
use dumpview::model::present;
use libfuzzer_sys::fuzz_target;

/// The window directory, named as the probe names them: `<tmp>/dumpview-fuzz-rows/<pid>/
/// rank0/match1-occ1`, created once, where the sidecar is written. Tensor files the manifest
/// names are looked for there and not found; names that leave it (absolute, `..`) are refused
/// by the reader. The directories of earlier runs whose process is gone are removed then.
fn window_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let runs = std::env::temp_dir().join("dumpview-fuzz-rows");
        for entry in std::fs::read_dir(&runs).into_iter().flatten().flatten() {
            let gone = !Path::new("/proc").join(entry.file_name()).exists();
            if gone {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let dir = runs
            .join(std::process::id().to_string())
            .join("rank0/match1-occ1");
        std::fs::create_dir_all(&dir).expect("a directory for the sidecar");
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let (manifest, sidecar) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], Some(&data[at + 1..])),
        None => (data, None),
    };
    let dir = window_dir();
    let rows_file = dir.join("rows.f32");
    match sidecar {
        Some(bytes) => std::fs::write(&rows_file, bytes).expect("the sidecar written"),
        None => match std::fs::remove_file(&rows_file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("the old sidecar not removed: {e}"),
        },
    }
    let path = dir.join("manifest.json");

    let Ok((window, _warnings)) = read_window_with(manifest, &path, MapChoice::Never) else {
        return;
    };
    let (lazy, _) = read_window(manifest, &path).expect("read_window agrees with read_window_with");
    assert_eq!(
        lazy.token_rows, window.token_rows,
        "a mapped sidecar reads as a read one"
    );

    if let Some(rows) = &window.token_rows {
        assert!(rows.values.is_empty() || rows.values.len() as u64 == rows.rows * ROW_WIDTH as u64);
        let forward = rows.forward_rows();
        for block in &rows.records {
            for (_, stats) in rows.rows_of(block, &forward) {
                assert_eq!(stats.len(), ROW_WIDTH);
                std::hint::black_box(stats);
            }
        }
    }

    let scan = scan_window(&window);
    let _ = present::scan::text(&scan);
    let _ = serde_json::to_string(&scan);

    let windows = std::slice::from_ref(&window);
    let report = diff(windows, windows, &Tolerances::default());
    let _ = present::diff::text(&report);
    let _ = serde_json::to_string(&report);
});
