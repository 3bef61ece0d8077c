//! Arbitrary bytes as what a remote host printed over ssh: `parse_listing` (the file listing,
//! `dumpview-list 1 TIME\0` then `inode size mtime path\0` per file, `=\0` per file an
//! incremental listing found unchanged), `parse_probe` (the probe's answer line) and
//! `RemoteMeta::parse` on every line (a fetch's `inode size mtime` header), as the mirror reads
//! them (src/remote/mirror.rs). A hostile host must not make the parser panic nor get a path
//! past it that would leave the mirror's cache: every path it keeps is checked to stay below
//! the cache directory, and every identity it keeps to print and read back the same. Any panic
//! (overflow included: cargo fuzz builds with debug assertions) is a crash.

#![no_main]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use libfuzzer_sys::fuzz_target;
use script::{RemoteMeta, check_relative, parse_listing, parse_probe};

/// The remote scripts and the parsers of what they print, compiled here from their source:
/// `remote` is part of the workbench, which the fuzz targets' build of dumpview leaves out
/// (fuzz/Cargo.toml), and this file needs nothing else of it. Only the parsers are used.
#[allow(dead_code)]
#[path = "../../src/remote/script.rs"]
mod script;

fuzz_target!(|data: &[u8]| {
    let _ = parse_probe(data);
    for line in data.split(|&b| b == b'\n') {
        if let Some(meta) = RemoteMeta::parse(&String::from_utf8_lossy(line)) {
            assert_eq!(RemoteMeta::parse(&meta.line()), Some(meta));
        }
    }

    let Ok(listing) = parse_listing(data) else {
        return;
    };
    assert!(!listing.started.contains('\0'));
    for (rel, meta) in &listing.files {
        assert!(check_relative(rel).is_ok());
        // What the mirror makes of it: the cache directory joined with the path, which must
        // name something below the cache directory (no root, no `..`, no `.`).
        let rel = Path::new(OsStr::from_bytes(rel));
        assert!(
            rel.components().all(|c| matches!(c, Component::Normal(_))),
            "{rel:?} leaves the mirror"
        );
        assert!(
            Path::new("/cache/host/dir")
                .join(rel)
                .starts_with("/cache/host/dir")
        );
        assert_eq!(RemoteMeta::parse(&meta.line()).as_ref(), Some(meta));
        std::hint::black_box(meta.age_at(&listing.started));
    }
});
