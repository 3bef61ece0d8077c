//! Arbitrary bytes as an msprobe `dump.json`, through `msprobe::load_window` (the one-pass
//! JSON reader, entry naming, leaf statistics), then everything `scan` and `diff` do with the
//! window it kept. Any panic (overflow included: cargo fuzz builds with debug assertions),
//! stack overflow or outsized allocation is a crash.

#![no_main]

use std::path::Path;

use dumpview::cli;
use dumpview::model::compare::Tolerances;
use dumpview::model::diff::diff;
use dumpview::model::msprobe;
use dumpview::model::scan::scan_window;
use libfuzzer_sys::fuzz_target;

/// A dump directory that does not exist: construct.json and stack.json beside the dump are
/// looked for there and not found, and nothing on the fuzzing machine is opened.
const SOURCE: &str = "/nonexistent-dumpview-fuzz/step0/rank0/dump.json";

fuzz_target!(|data: &[u8]| {
    let Ok((manifest, _warnings)) = msprobe::load_window(Path::new(SOURCE), data) else {
        return;
    };

    let scan = scan_window(&manifest);
    let _ = cli::scan::render(&scan);
    let _ = serde_json::to_string(&scan);

    let windows = std::slice::from_ref(&manifest);
    let report = diff(windows, windows, &Tolerances::default());
    let _ = cli::diff::render(&report);
    let _ = serde_json::to_string(&report);
});
