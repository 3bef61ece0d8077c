//! Load + diff of a manifest pair against the floor of merely parsing the same bytes.
//!
//!     cargo run --release --example load_diff -- A B [--reps N] [--name LABEL]
//!
//! A and B are what `dumpview diff` takes (a manifest file or a directory of them). Prints,
//! in one run:
//!
//! * the inputs: manifest files and bytes per side;
//! * the floor: `serde_json::from_slice::<serde::de::IgnoredAny>` over every input file, the
//!   bytes read into memory first (the read is not timed), best of N;
//! * `dumpview::model::load::load` of A and of B, then `dumpview::model::diff::diff` with the
//!   default tolerances, best of N (dropping the results is not timed);
//! * the ratio (load + diff) / floor — the goal is <= 2;
//! * the peak resident set (VmHWM) of a fresh child process that only loads and diffs, over
//!   the bytes of the inputs — the goal is <= 2;
//! * one `RESULT key=value ...` line that benches/load_diff.sh collects into its table.
//!
//! `load_diff --child A B` is that child: load + diff once, print `peak_rss_bytes=N`.
//! Thread count: whatever the library uses (`RAYON_NUM_THREADS` where it uses rayon).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dumpview::model::compare::Tolerances;
use dumpview::model::diff::{DiffReport, diff};
use dumpview::model::load::{Dump, discover, load};

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
    let bytes = files
        .iter()
        .map(|f| std::fs::metadata(f).expect("readable").len())
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
        let (dump_a, dump_b, report, _, _) = load_and_diff(&a, &b);
        let peak = peak_rss_bytes().unwrap_or(0);
        assert!(report.found_something());
        drop((dump_a, dump_b, report));
        println!("peak_rss_bytes={peak}");
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

    let (mut best, mut best_load, mut best_diff) = (Duration::MAX, Duration::MAX, Duration::MAX);
    let mut first = String::new();
    for _ in 0..reps {
        let (dump_a, dump_b, report, loaded, diffed) = load_and_diff(&a, &b);
        if loaded + diffed < best {
            best = loaded + diffed;
        }
        best_load = best_load.min(loaded);
        best_diff = best_diff.min(diffed);
        let records: usize = report.windows.iter().map(|w| w.pairs.len()).sum();
        let first_window = report
            .windows
            .iter()
            .filter_map(|w| w.first().map(|p| (p.position, w.rank, p.key.clone())))
            .min();
        first = format!(
            "{} windows, {records} pairs, {} records in A, {} warnings; first divergence: {}",
            report.windows.len(),
            dump_a
                .windows
                .iter()
                .map(|w| w.records.len())
                .sum::<usize>(),
            dump_a.warnings.len() + dump_b.warnings.len(),
            first_window.map_or("none".to_string(), |(pos, rank, key)| format!(
                "rank {rank} {key} (position {pos})"
            ))
        );
        drop((dump_a, dump_b, report));
    }
    let ratio = secs(best) / secs(floor);
    println!(
        "[{name}] load + diff: {:.3} s (load {:.3} s, diff {:.3} s), best of {reps}; {first}",
        secs(best),
        secs(best_load),
        secs(best_diff)
    );
    println!("[{name}] ratio (load + diff) / floor: {ratio:.2} (goal <= 2)");

    let exe = std::env::current_exe().expect("own path");
    let out = std::process::Command::new(exe)
        .arg("--child")
        .arg(&a)
        .arg(&b)
        .output()
        .expect("child runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let peak: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("peak_rss_bytes="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "child failed: {}{}",
                text,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let rss_ratio = peak as f64 / total_bytes as f64;
    println!(
        "[{name}] peak RSS of load + diff (child process): {:.1} MB = {rss_ratio:.2} x the {:.1} MB of input (goal <= 2)",
        peak as f64 / 1e6,
        total_bytes as f64 / 1e6
    );
    let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "default".into());
    println!(
        "RESULT name={name} threads={threads} files={} bytes={total_bytes} floor_s={:.4} load_s={:.4} diff_s={:.4} load_diff_s={:.4} ratio={ratio:.3} peak_rss={peak} rss_ratio={rss_ratio:.3}",
        files_a.len() + files_b.len(),
        secs(floor),
        secs(best_load),
        secs(best_diff),
        secs(best),
    );
}
