//! Arbitrary bytes as a tensor file, through `TensorFile::from_bytes` (format told by content
//! as for real files), then every element of every entry read through its view; and the same
//! bytes as a captured input set (`InputSet::from_bytes`, the probe's encoding over the same
//! pickle machine), every tensor argument's values read.
//!
//! Inputs that start like a zip (`PK`) or a safetensors header are read as they are: the zip
//! directory, the archive checks, safetensors' header. Any other input is wrapped as the
//! `archive/data.pkl` of a torch.save-style archive with storages `0`..`3`, so mutations reach
//! the pickle machine and the flattening without having to keep a zip directory consistent.
//!
//! Any panic (overflow included: cargo fuzz builds with debug assertions), stack overflow,
//! out-of-bounds read or outsized allocation is a crash.

#![no_main]

use std::io::{Cursor, Write};
use std::path::Path;

use dumpview::model::input_set::{InputSet, InputValue};
use dumpview::model::tensor::TensorFile;
use libfuzzer_sys::fuzz_target;
use zip::CompressionMethod;
use zip::write::{SimpleFileOptions, ZipWriter};

/// Most elements read per input, so huge-but-valid views do not turn into timeouts.
const MAX_ELEMENTS: usize = 1_000_000;

fuzz_target!(|data: &[u8]| {
    let raw = data.starts_with(b"PK") || data.get(8) == Some(&b'{');
    let bytes = if raw { data.to_vec() } else { wrap(data) };
    read_input_set(&bytes);
    read_all(bytes);
});

fn read_input_set(bytes: &[u8]) {
    let Ok(set) = InputSet::from_bytes(bytes, Path::new("fuzz.pt")) else {
        return;
    };
    let mut budget = MAX_ELEMENTS;
    let mut stack: Vec<&InputValue> = set.args.iter().map(|(_, v)| v).collect();
    while let Some(value) = stack.pop() {
        match value {
            InputValue::Tensor(t) => {
                assert_eq!(t.span.len() % t.dtype.size(), 0);
                let view = t.view();
                let n = view.numel().min(budget);
                budget -= n;
                std::hint::black_box((0..n).map(|i| view.get(i)).sum::<f64>());
            }
            InputValue::List(items) | InputValue::Tuple(items) => stack.extend(items),
            InputValue::Dict(pairs) => stack.extend(pairs.iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

fn read_all(bytes: Vec<u8>) {
    let Ok(file) = TensorFile::from_bytes(bytes, Path::new("fuzz.pt")) else {
        return;
    };
    let mut budget = MAX_ELEMENTS;
    for entry in &file.entries {
        assert!(entry.storage.end <= file.len());
        let view = file.view(entry);
        assert_eq!(view.numel(), entry.numel());
        let n = view.numel().min(budget);
        budget -= n;
        let mut sum = 0.0f64;
        for i in 0..n {
            sum += view.get(i);
        }
        std::hint::black_box(sum);
        if budget == 0 {
            break;
        }
    }
}

/// `pickle` as `archive/data.pkl`, with byteorder `little` and storages `0`..`3` of 0, 8, 64
/// and 256 bytes (every byte value, so all dtypes decode specials).
fn wrap(pickle: &[u8]) -> Vec<u8> {
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Stored)
        .with_alignment(64);
    let mut add = |name: &str, bytes: &[u8]| {
        zip.start_file(name, options).expect("in-memory zip");
        zip.write_all(bytes).expect("in-memory zip");
    };
    add("archive/data.pkl", pickle);
    add("archive/byteorder", b"little");
    let all: Vec<u8> = (0..=255).collect();
    for (key, len) in [("0", 0), ("1", 8), ("2", 64), ("3", 256)] {
        add(&format!("archive/data/{key}"), &all[..len]);
    }
    zip.finish().expect("in-memory zip").into_inner()
}
