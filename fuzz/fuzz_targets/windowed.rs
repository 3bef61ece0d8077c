//! Arbitrary bytes as a windowed dump's `manifest.json`: `windowed::is_windowed` (the sniff
//! the loader uses), then `windowed::load_window` on every input, sniffed or not (the schema
//! reader, the planning of records, the header checks), then everything `scan` and `diff` do
//! with the window it kept. Any panic (overflow included: cargo fuzz builds with debug
//! assertions), stack overflow or outsized allocation is a crash.

#![no_main]

use std::path::Path;

use dumpview::model::analysis::compare::Tolerances;
use dumpview::model::analysis::diff::diff;
use dumpview::model::analysis::scan::scan_window;
use dumpview::model::formats::windowed;
use dumpview::model::present;
use libfuzzer_sys::fuzz_target;

/// A window directory that does not exist, named as the writer names them (so the rank and
/// window number can come from it): tensor files are named relative to it (absolute names
/// and `..` are refused), so none is found and nothing on the fuzzing machine is opened.
const SOURCE: &str = "/nonexistent-dumpview-fuzz/rank_0/window_0000/manifest.json";

fuzz_target!(|data: &[u8]| {
    std::hint::black_box(windowed::is_windowed(data));
    let Ok((manifest, _warnings)) = windowed::load_window(Path::new(SOURCE), data) else {
        return;
    };
    // As load_window documents: one occurrence, labelled by the window number.
    assert_eq!(manifest.occurrence, 1);
    assert_eq!(
        manifest.label,
        format!("window_{:04}", manifest.match_index)
    );

    let scan = scan_window(&manifest);
    let _ = present::scan::text(&scan);
    let _ = serde_json::to_string(&scan);

    let windows = std::slice::from_ref(&manifest);
    let report = diff(windows, windows, &Tolerances::default());
    let _ = present::diff::text(&report);
    let _ = serde_json::to_string(&report);
});
