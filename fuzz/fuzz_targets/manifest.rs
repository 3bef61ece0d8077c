//! Arbitrary bytes as a manifest: the parser, then everything `scan` and `diff` do with
//! what it kept. Any panic (overflow included: cargo fuzz builds with debug assertions)
//! or stack overflow is a crash.

#![no_main]

use std::path::Path;

use dumpview::model::analysis::compare::Tolerances;
use dumpview::model::analysis::diff::diff;
use dumpview::model::analysis::scan::scan_window;
use dumpview::model::formats::probe::parse::parse_manifest;
use dumpview::model::ingest::read_window;
use dumpview::model::present;
use libfuzzer_sys::fuzz_target;

/// A window directory that does not exist: evidence paths are checked by their text only,
/// and nothing on the fuzzing machine is opened.
const SOURCE: &str = "/nonexistent-dumpview-fuzz/rank0/match1-occ1/manifest.json";

fuzz_target!(|data: &[u8]| {
    let path = Path::new(SOURCE);
    let Ok(parsed) = parse_manifest(data, path) else {
        return;
    };
    if let Some(stop) = &parsed.stopped {
        assert_eq!(stop.kept_records, parsed.manifest.records.len());
        assert!(stop.byte_offset <= data.len() as u64);
    }
    let manifest = parsed.manifest;

    let scan = scan_window(&manifest);
    let _ = present::scan::text(&scan);
    let _ = serde_json::to_string(&scan);

    let windows = std::slice::from_ref(&manifest);
    let report = diff(windows, windows, &Tolerances::default());
    let _ = present::diff::text(&report);
    let _ = serde_json::to_string(&report);

    // The loader's checks: duplicate keys, capture order, evidence paths.
    let (checked, _warnings) =
        read_window(data, path).expect("read_window agrees with parse_manifest");
    assert_eq!(checked.records.len(), manifest.records.len());
});
