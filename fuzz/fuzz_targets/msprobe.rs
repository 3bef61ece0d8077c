//! Arbitrary bytes as an msprobe `dump.json`, through `msprobe::load_window` (the one-pass
//! JSON reader, entry naming, leaf statistics), then everything `scan` and `diff` do with the
//! window it kept. Any panic (overflow included: cargo fuzz builds with debug assertions),
//! stack overflow or outsized allocation is a crash.

#![no_main]

use std::path::Path;

use dumpview::model::analysis::compare::Tolerances;
use dumpview::model::analysis::diff::diff;
use dumpview::model::analysis::scan::scan_window;
use dumpview::model::formats::msprobe;
use dumpview::model::present;
use libfuzzer_sys::fuzz_target;

/// A dump directory that does not exist: construct.json and stack.json beside the dump are
/// looked for there and not found, and nothing on the fuzzing machine is opened.
const SOURCE: &str = "/nonexistent-dumpview-fuzz/step0/rank0/dump.json";

fuzz_target!(|data: &[u8]| {
    let Ok((manifest, _warnings)) = msprobe::load_window(Path::new(SOURCE), data) else {
        return;
    };

    let scan = scan_window(&manifest);
    let _ = present::scan::text(&scan);
    let _ = serde_json::to_string(&scan);

    let windows = std::slice::from_ref(&manifest);
    let report = diff(windows, windows, &Tolerances::default());
    let _ = present::diff::text(&report);
    let _ = serde_json::to_string(&report);
});
