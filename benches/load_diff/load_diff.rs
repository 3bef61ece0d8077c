//! Load + diff of a manifest pair against the floor of merely parsing the same bytes.
//!
//!     cargo run --release --example load_diff -- A B [--reps N] [--name LABEL]
//!
//! A and B are what `dumpview diff` takes (a manifest file or a directory of them). Prints,
//! in one run:
//!
//! * the inputs: manifest files and bytes per side;
//! * the floor: `serde_json::from_slice::<serde::de::IgnoredAny>` over every input file, the
//!   bytes read into memory first (the read is not timed), best of N in this process;
//! * `dumpview::model::ingest::load` of A and of B, then `dumpview::model::analysis::diff::diff` with the
//!   default tolerances, each run in a fresh child process as the CLI would run it (so it pays
//!   for fresh memory, which a second run in one process would not), best of N; dropping the
//!   results is not timed;
//! * the ratio (load + diff) / floor — the goal is <= 2;
//! * the peak resident set (VmHWM) of those children (the largest), over the bytes of the
//!   inputs — the goal is <= 2;
//! * one `RESULT key=value ...` line that benches/load_diff.sh collects into its table.
//!
//! `load_diff --child A B` is that child: load + diff once, print `load_s=... diff_s=...
//! peak_rss_bytes=...`. Thread count: whatever the library uses (`RAYON_NUM_THREADS`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dumpview::model::analysis::compare::Tolerances;
use dumpview::model::analysis::diff::{DiffReport, diff};
use dumpview::model::dump::Dump;
use dumpview::model::ingest::{discover, load};

fn load_side(path: &Path) -> Dump {
    load(&[path.to_path_buf()], &mut |_| {}).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn load_and_diff(a: &Path, b: &Path) -> (Dump, Dump, DiffReport, Duration, Duration) {
    let start = Instant::now();
    let dump_a = load_side(a);
    let dump_b = load_side(b);
    let loaded = start.elapsed();
    let report = diff(&dump_a.windows, &dump_b.windows, &Tolerances::default());
    let total = start.elapsed();
    (dump_a, dump_b, report, loaded, total - loaded)
}

/// Peak resident set of this process, from /proc/self/status (Linux).
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn files_and_bytes(path: &Path) -> (Vec<PathBuf>, u64) {
    let files = discover(&[path.to_path_buf()]).expect("inputs exist");
    // Token-row sidecars count as input: `rows.f32` beside a `manifest.json`, or the
    // generator's `<stem>.rows.f32` beside any other name.
    let sidecar = |f: &PathBuf| {
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        let name = if stem == "manifest" {
            "rows.f32".to_string()
        } else {
            format!("{stem}.rows.f32")
        };
        std::fs::metadata(f.with_file_name(name)).map_or(0, |m| m.len())
    };
    let bytes = files
        .iter()
        .map(|f| std::fs::metadata(f).expect("readable").len() + sidecar(f))
        .sum();
    (files, bytes)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let child = args.first().is_some_and(|a| a == "--child");
    if child {
        args.remove(0);
    }
    let mut reps = 3usize;
    let mut name = String::from("run");
    let mut paths = Vec::new();
    let mut iter = args.into_iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--reps" => reps = iter.next().and_then(|v| v.parse().ok()).expect("--reps N"),
            "--name" => name = iter.next().expect("--name LABEL"),
            _ => paths.push(PathBuf::from(arg)),
        }
    }
    let [a, b] = <[PathBuf; 2]>::try_from(paths)
        .expect("usage: load_diff [--child] A B [--reps N] [--name LABEL]");

    if child {
        let (dump_a, dump_b, report, loaded, diffed) = load_and_diff(&a, &b);
        let peak = peak_rss_bytes().unwrap_or(0);
        let records: usize = report.windows.iter().map(|w| w.pairs.len()).sum();
        let first = report
            .windows
            .iter()
            .filter_map(|w| w.first().map(|p| (p.position, w.rank, p.key.clone())))
            .min();
        println!(
            "load_s={} diff_s={} peak_rss_bytes={peak} windows={} pairs={records} warnings={} first={}",
            secs(loaded),
            secs(diffed),
            report.windows.len(),
            dump_a.warnings.len() + dump_b.warnings.len(),
            first.map_or("none".to_string(), |(pos, rank, key)| format!(
                "rank:{rank}:{key}:position:{pos}"
            ))
        );
        return;
    }

    let (files_a, bytes_a) = files_and_bytes(&a);
    let (files_b, bytes_b) = files_and_bytes(&b);
    let total_bytes = bytes_a + bytes_b;
    println!(
        "[{name}] inputs: A {} ({} files, {} bytes), B {} ({} files, {} bytes), {:.1} MB in all",
        a.display(),
        files_a.len(),
        bytes_a,
        b.display(),
        files_b.len(),
        bytes_b,
        total_bytes as f64 / 1e6
    );

    // The floor: parse every input into IgnoredAny, from memory.
    let mut floor = Duration::MAX;
    {
        let buffers: Vec<Vec<u8>> = files_a
            .iter()
            .chain(&files_b)
            .map(|f| std::fs::read(f).expect("readable"))
            .collect();
        for _ in 0..reps {
            let start = Instant::now();
            for bytes in &buffers {
                let _: serde::de::IgnoredAny =
                    serde_json::from_slice(bytes).expect("inputs are complete JSON");
            }
            floor = floor.min(start.elapsed());
        }
    }
    println!(
        "[{name}] floor: serde_json IgnoredAny over the same bytes: {:.3} s ({:.0} MB/s), best of {reps}",
        secs(floor),
        total_bytes as f64 / 1e6 / secs(floor)
    );

    // load + diff, each in a fresh process.
    let exe = std::env::current_exe().expect("own path");
    let (mut best, mut best_load, mut best_diff) = (f64::MAX, f64::MAX, f64::MAX);
    let (mut peak, mut about) = (0u64, String::new());
    for _ in 0..reps {
        let out = std::process::Command::new(&exe)
            .arg("--child")
            .arg(&a)
            .arg(&b)
            .output()
            .expect("child runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let field = |name: &str| -> String {
            text.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
                .unwrap_or_else(|| {
                    panic!(
                        "child failed: {text}{}",
                        String::from_utf8_lossy(&out.stderr)
                    )
                })
                .to_string()
        };
        let (load_s, diff_s): (f64, f64) = (
            field("load_s").parse().unwrap(),
            field("diff_s").parse().unwrap(),
        );
        if load_s + diff_s < best {
            best = load_s + diff_s;
        }
        best_load = best_load.min(load_s);
        best_diff = best_diff.min(diff_s);
        peak = peak.max(field("peak_rss_bytes").parse().unwrap());
        about = format!(
            "{} windows, {} pairs, {} warnings; first divergence: {}",
            field("windows"),
            field("pairs"),
            field("warnings"),
            field("first").replace(':', " ")
        );
    }
    let ratio = best / secs(floor);
    println!(
        "[{name}] load + diff (fresh process): {best:.3} s (load {best_load:.3} s, diff {best_diff:.3} s), best of {reps}; {about}"
    );
    println!("[{name}] ratio (load + diff) / floor: {ratio:.2} (goal <= 2)");
    let rss_ratio = peak as f64 / total_bytes as f64;
    println!(
        "[{name}] peak RSS of load + diff: {:.1} MB = {rss_ratio:.2} x the {:.1} MB of input (goal <= 2)",
        peak as f64 / 1e6,
        total_bytes as f64 / 1e6
    );
    let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "default".into());
    println!(
        "RESULT name={name} threads={threads} files={} bytes={total_bytes} floor_s={:.4} load_s={:.4} diff_s={:.4} load_diff_s={:.4} ratio={ratio:.3} peak_rss={peak} rss_ratio={rss_ratio:.3}",
        files_a.len() + files_b.len(),
        secs(floor),
        best_load,
        best_diff,
        best,
    );
}
