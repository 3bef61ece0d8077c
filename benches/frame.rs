//! Frame cost of the workbench for a 1,000,000-record window against a 1,000-record one, and the
//! wait for the first frame against the headless `dumpview scan` of the same data.
//!
//!     cargo run --release --example frame -- [--records N] [--small N] [--frames K] [--reps R]
//!
//! Writes two captures into a temp dir (removed at the end): one window (rank 0) of N records
//! (default 1,000,000) and one of 1,000, shaped like a DeepSeek-V3-sized decode (61 layers of
//! 16 stages per step, q/k/v views of one fused buffer, a KV-cache write and read of one storage
//! through different strides in layer 0 — stride conflicts — and NaN from 60% of the window on).
//! Then, in one run, it prints:
//!
//! * per frame, for each capture: an `App` in scan mode drawn into ratatui's `TestBackend` at
//!   140x40, K times (default 500), the selection moving between frames (j, j, j, PgDn, k, ...)
//!   as a user's keys move it; each frame is what the runtime does per loop: `ui::layout`, the
//!   `ViewHeight` update when it changed, `terminal.draw(ui::draw)`. Mean, median, p99 and max;
//!   the goal is <= 5 ms, and the ratio of the 1M mean to the 1k mean near 1; then the same
//!   on the big capture with the module tree open in the timeline pane (`m`: the keys move
//!   the tree's cursor), with the time `m` took to build the tree (once per window);
//! * the first frame on the big capture: `runtime::load::open` (load) + `App::new` (scan, rows,
//!   indexes) + the first layout and draw, best of R (default 2), against the headless
//!   `dumpview scan` work on the same files: `model::load::load` + `scan_window` of every window,
//!   best of R; the ratio's goal is <= 1.5. The files are read once before either is timed, so
//!   both read from the page cache.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dumpview::internals::app::{Action, App, update};
use dumpview::internals::runtime::load;
use dumpview::internals::ui;
use dumpview::model::analysis::scan::scan_window;
use dumpview::model::ingest::load;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::Rect;

const COLS: u16 = 140;
const ROWS: u16 = 40;
const LAYERS: usize = 61;
const TOKENS: u64 = 8;
const HIDDEN: u64 = 7168;

/// splitmix64: deterministic and fast.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One capture point of a decode step: name, dtype, element size, shape, stride, offset,
/// and which shared storage it views (0: its own).
struct Stage {
    name: String,
    dtype: &'static str,
    size: u64,
    shape: Vec<u64>,
    stride: Vec<i64>,
    offset: u64,
    shared: u8,
}

fn contiguous(shape: &[u64]) -> Vec<i64> {
    let mut stride = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        stride[d] = stride[d + 1] * shape[d + 1] as i64;
    }
    stride
}

fn stages() -> Vec<Stage> {
    let plain = |name: String, dtype: &'static str, size: u64, shape: Vec<u64>| Stage {
        stride: contiguous(&shape),
        name,
        dtype,
        size,
        shape,
        offset: 0,
        shared: 0,
    };
    let mut out = vec![
        plain("input_ids".into(), "int64", 8, vec![TOKENS]),
        plain("embed".into(), "bfloat16", 2, vec![TOKENS, HIDDEN]),
    ];
    let (heads, qkv_row) = (16u64, 16 * 192 + 512);
    for i in 0..LAYERS {
        let l = |s: &str| format!("layers.{i}.{s}");
        out.push(plain(l("input_norm"), "bfloat16", 2, vec![TOKENS, HIDDEN]));
        for (s, shape, offset) in [
            ("q", vec![TOKENS, heads, 192], 0),
            ("k", vec![TOKENS, 2, 128], heads * 192),
            ("v", vec![TOKENS, 2, 128], heads * 192 + 256),
        ] {
            let inner = shape[2] as i64;
            out.push(Stage {
                name: l(s),
                dtype: "bfloat16",
                size: 2,
                shape,
                stride: vec![qkv_row as i64, inner, 1],
                offset,
                shared: 1,
            });
        }
        if i == 0 {
            // One cache storage written and read through different strides: a stride conflict.
            out.push(Stage {
                name: l("k_cache_write"),
                dtype: "bfloat16",
                size: 2,
                shape: vec![TOKENS, 2, 128],
                stride: vec![128, 2048, 1],
                offset: 0,
                shared: 2,
            });
            out.push(Stage {
                name: l("k_cache_read"),
                dtype: "bfloat16",
                size: 2,
                shape: vec![TOKENS, 2, 128],
                stride: vec![256, 128, 1],
                offset: 0,
                shared: 2,
            });
        } else {
            out.push(plain(l("rope_q"), "bfloat16", 2, vec![TOKENS, heads, 192]));
            out.push(plain(l("rope_k"), "bfloat16", 2, vec![TOKENS, 2, 128]));
        }
        out.push(plain(l("attn"), "bfloat16", 2, vec![TOKENS, heads, 128]));
        out.push(plain(l("o_proj"), "bfloat16", 2, vec![TOKENS, HIDDEN]));
        out.push(plain(
            l("post_attn_norm"),
            "bfloat16",
            2,
            vec![TOKENS, HIDDEN],
        ));
        out.push(plain(l("router"), "float32", 4, vec![TOKENS, 256]));
        out.push(plain(l("topk_ids"), "int64", 8, vec![TOKENS, 8]));
        out.push(plain(l("mlp_gate"), "bfloat16", 2, vec![TOKENS, 1152]));
        out.push(plain(l("mlp_up"), "bfloat16", 2, vec![TOKENS, 1152]));
        out.push(plain(l("mlp_act"), "bfloat16", 2, vec![TOKENS, 1152]));
        out.push(plain(l("mlp_down"), "bfloat16", 2, vec![TOKENS, HIDDEN]));
        out.push(plain(l("residual"), "bfloat16", 2, vec![TOKENS, HIDDEN]));
    }
    out.push(plain(
        "final_norm".into(),
        "bfloat16",
        2,
        vec![TOKENS, HIDDEN],
    ));
    out.push(plain("logits".into(), "float32", 4, vec![TOKENS, 8080]));
    out
}

fn list<T: ToString>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Writes `dir/rank0/match1-occ1/manifest.json` holding `records` records; returns its size.
fn write_capture(dir: &Path, records: usize) -> std::io::Result<(PathBuf, u64)> {
    let window = dir.join("rank0/match1-occ1");
    std::fs::create_dir_all(&window)?;
    let path = window.join("manifest.json");
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path)?);
    write!(
        out,
        "{{\n \"format\": \"dumpview.manifest\",\n \"schema_version\": 1,\n \"probe\": \"dump_probe.py 1\",\n \"label\": \"req-bench\",\n \"match\": 1,\n \"occurrence\": 1,\n \"rank\": 0,\n \"world_size\": 1,\n \"metadata\": {{\"token_ids\": [1, 2, 3, 4, 5, 6, 7, 8], \"phase\": \"decode\"}},\n \"stat_names\": [\"nan_count\", \"inf_count\", \"finite_count\", \"max_abs\", \"min\", \"max\", \"mean\", \"l2\", \"pos_checksum\"],\n \"stats_dtype\": \"float32\",\n \"tensor_rows\": 256,\n \"tensor_pattern\": \"\",\n \"records\": [\n"
    )?;
    let stages = stages();
    let mut rng = Rng(0xF4A3E);
    let nan_from = records * 3 / 5;
    let (mut ptr, mut storage_id) = (0x7f00_0000_0000u64, 0u64);
    let mut shared = [(0u64, 0u64); 3];
    for seq in 0..records {
        let step = seq / stages.len();
        let stage = &stages[seq % stages.len()];
        let starts_storage = match stage.shared {
            0 => true,
            1 => stage.name.ends_with(".q"),
            _ => stage.name.ends_with(".k_cache_write"),
        };
        if starts_storage {
            // A new storage for this record (or for the views that follow it).
            storage_id += 1;
            ptr += 1 << 20;
            shared[stage.shared as usize] = (ptr, storage_id);
        }
        let (base, id) = shared[stage.shared as usize];
        let numel: u64 = stage.shape.iter().product();
        let nbytes = match stage.shared {
            1 => TOKENS * (16 * 192 + 512) * stage.size,
            2 => TOKENS * 2 * 2048 * stage.size,
            _ => numel * stage.size,
        };
        let scale = 0.5 + rng.unit() * 4.0;
        let (nan, finite) = if seq >= nan_from && stage.dtype == "bfloat16" {
            (numel / 64 + 1, numel - numel / 64 - 1)
        } else {
            (0, numel)
        };
        let contiguous = stage.stride == contiguous(&stage.shape);
        writeln!(
            out,
            "  {{\"seq\": {seq}, \"stage\": \"{}\", \"occurrence\": {}, \"mode\": \"eager\", \"dtype\": \"{}\", \"shape\": [{}], \"stride\": [{}], \"storage_offset\": {}, \"element_size\": {}, \"numel\": {numel}, \"storage_ptr\": {base}, \"storage_id\": {id}, \"storage_nbytes\": {nbytes}, \"data_ptr\": {}, \"device\": \"npu:0\", \"device_format\": 2, \"is_contiguous\": {contiguous}, \"stats\": {{\"nan_count\": {nan}, \"inf_count\": 0, \"finite_count\": {finite}, \"max_abs\": {}, \"min\": {}, \"max\": {}, \"mean\": {}, \"l2\": {}, \"pos_checksum\": {}}}, \"tensor_file\": null}}{}",
            stage.name,
            step + 1,
            stage.dtype,
            list(&stage.shape),
            list(&stage.stride),
            stage.offset,
            stage.size,
            base + stage.offset * stage.size,
            scale * 4.0,
            -scale * 3.9,
            scale * 4.0,
            (rng.unit() - 0.5) * scale * 0.01,
            scale * (numel as f64).sqrt(),
            (rng.unit() - 0.5) * scale * 100.0,
            if seq + 1 < records { "," } else { "" }
        )?;
    }
    write!(out, " ],\n \"input_sets\": []\n}}\n")?;
    out.flush()?;
    let bytes = std::fs::metadata(&path)?.len();
    Ok((dir.to_path_buf(), bytes))
}

/// What the runtime does once per loop iteration: layout, the view-height update, the draw.
fn frame(terminal: &mut Terminal<TestBackend>, app: &mut App) {
    let areas = ui::layout(Rect::new(0, 0, COLS, ROWS), app);
    if areas.timeline_rows() != app.view_height {
        update(app, Action::ViewHeight(areas.timeline_rows()));
    }
    terminal
        .draw(|f| ui::draw(f, app))
        .expect("TestBackend draws");
}

struct Frames {
    mean: Duration,
    median: Duration,
    p99: Duration,
    max: Duration,
}

/// Draws `frames` frames of `app`, moving the selection between them; the moves are not timed.
fn time_frames(app: &mut App, frames: usize) -> Frames {
    let mut terminal = Terminal::new(TestBackend::new(COLS, ROWS)).expect("TestBackend");
    frame(&mut terminal, app); // warm-up: the first draw paints every cell
    let keys = [
        Action::Down,
        Action::Down,
        Action::Down,
        Action::PageDown,
        Action::Up,
        Action::Down,
        Action::PageUp,
        Action::Down,
    ];
    let mut times = Vec::with_capacity(frames);
    for i in 0..frames {
        update(app, keys[i % keys.len()].clone());
        let start = Instant::now();
        frame(&mut terminal, app);
        times.push(start.elapsed());
        std::hint::black_box(terminal.backend());
    }
    times.sort_unstable();
    Frames {
        mean: times.iter().sum::<Duration>() / frames as u32,
        median: times[frames / 2],
        p99: times[(frames * 99 / 100).min(frames - 1)],
        max: times[frames - 1],
    }
}

/// Best of 20 runs of `f`.
fn best(mut f: impl FnMut()) -> Duration {
    (0..20)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .expect("runs")
}

/// The parts of a frame that grow with the window, timed alone through the public API:
/// (what, where, time of one call, calls per frame).
fn growing_parts(app: &App) -> Vec<(&'static str, &'static str, Duration, u32)> {
    vec![
        (
            "findings count (rows.iter().filter(is_finding))",
            "src/ui/timeline.rs",
            best(|| {
                std::hint::black_box(app.rows.iter().filter(|r| r.is_finding()).count());
            }),
            1,
        ),
        (
            "strip scale (RangeMax::range of A and B)",
            "src/ui/strip.rs, src/app/strip.rs",
            best(|| {
                std::hint::black_box((app.strip_a.range(), app.strip_b.range()));
            }),
            1,
        ),
        (
            "App::alias_groups (collect + sort)",
            "ui::layout twice, src/ui/aliases.rs once",
            best(|| {
                std::hint::black_box(app.alias_groups().len());
            }),
            3,
        ),
    ]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn open(capture: &Path) -> App {
    let session = load::open(capture, None, &mut |_| {}).expect("the generated capture loads");
    App::new(session, false)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut records, mut small, mut frames, mut reps) =
        (1_000_000usize, 1_000usize, 500usize, 2usize);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .and_then(|v| v.replace('_', "").parse().ok())
                .unwrap_or_else(|| panic!("{arg} N"))
        };
        match arg.as_str() {
            "--records" => records = value(),
            "--small" => small = value(),
            "--frames" => frames = value(),
            "--reps" => reps = value(),
            _ => panic!("usage: frame [--records N] [--small N] [--frames K] [--reps R]"),
        }
    }
    let scratch = tempfile::tempdir().expect("temp dir");
    let start = Instant::now();
    let (big, big_bytes) =
        write_capture(&scratch.path().join("big"), records).expect("write the big capture");
    let (little, little_bytes) =
        write_capture(&scratch.path().join("small"), small).expect("write the small capture");
    println!(
        "captures: {records} records ({:.1} MB) and {small} records ({:.1} kB), one window each, written in {:.1} s; {} cores",
        big_bytes as f64 / 1e6,
        little_bytes as f64 / 1e3,
        start.elapsed().as_secs_f64(),
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    // Page cache: both timings below read the files from memory.
    std::hint::black_box(
        std::fs::read(big.join("rank0/match1-occ1/manifest.json")).expect("readable"),
    );

    // Headless (what `dumpview scan BIG` does before printing) and the workbench's first frame
    // (load, App::new, layout + draw) on the same files, alternating, best of `reps` each.
    let (mut headless, mut headless_parts) = (Duration::MAX, (Duration::ZERO, Duration::ZERO));
    let (mut first, mut parts) = (
        Duration::MAX,
        (Duration::ZERO, Duration::ZERO, Duration::ZERO),
    );
    let mut kept = None;
    for _ in 0..reps {
        drop(kept.take()); // free the previous rep's workbench before loading again
        let start = Instant::now();
        let dump = load(std::slice::from_ref(&big), &mut |_| {}).expect("loads");
        let loaded = start.elapsed();
        let scans: Vec<_> = dump.windows.iter().map(scan_window).collect();
        let total = start.elapsed();
        if total < headless {
            headless = total;
            headless_parts = (loaded, total - loaded);
        }
        assert!(
            dump.warnings.is_empty(),
            "the generated capture loads cleanly: {:?}",
            dump.warnings
        );
        assert!(
            scans[0].first_nonfinite.is_some()
                && scans[0].alias_groups.iter().any(|g| g.stride_conflict)
        );
        drop((dump, scans));

        let start = Instant::now();
        let session = load::open(&big, None, &mut |_| {}).expect("loads");
        let loaded = start.elapsed();
        let mut app = App::new(session, false);
        let installed = start.elapsed();
        let mut terminal = Terminal::new(TestBackend::new(COLS, ROWS)).expect("TestBackend");
        frame(&mut terminal, &mut app);
        let total = start.elapsed();
        if total < first {
            first = total;
            parts = (loaded, installed - loaded, total - installed);
        }
        kept = Some(app);
    }
    let mut app_big = kept.expect("reps >= 1");
    let first_ratio = first.as_secs_f64() / headless.as_secs_f64();

    let mut app_small = open(&little);
    let f_small = time_frames(&mut app_small, frames);
    let f_big = time_frames(&mut app_big, frames);
    let ratio = f_big.mean.as_secs_f64() / f_small.mean.as_secs_f64();
    // The module tree open (`m`): built once, then the same keys move its cursor.
    let start = Instant::now();
    update(&mut app_big, Action::ToggleTree);
    let tree_open = start.elapsed();
    let tree_lines = app_big.tree.as_ref().map_or(0, |t| t.lines.len());
    assert!(tree_lines > 0, "m opens the tree of the big window");
    let f_tree = time_frames(&mut app_big, frames);
    update(&mut app_big, Action::ToggleTree);

    for (name, n, f) in [("small", small, &f_small), ("big", records, &f_big)] {
        println!(
            "frame {name:>5} ({n} rows, {COLS}x{ROWS}, {frames} frames): mean {:.3} ms, median {:.3} ms, p99 {:.3} ms, max {:.3} ms (goal <= 5 ms)",
            ms(f.mean),
            ms(f.median),
            ms(f.p99),
            ms(f.max)
        );
    }
    println!("frame ratio big / small (means): {ratio:.2} (goal: near 1)");
    println!(
        "frame  tree ({records} rows, module tree open: {tree_lines} lines unfolded, built by m in {:.1} ms): mean {:.3} ms, median {:.3} ms, p99 {:.3} ms, max {:.3} ms (goal <= 5 ms)",
        ms(tree_open),
        ms(f_tree.mean),
        ms(f_tree.median),
        ms(f_tree.p99),
        ms(f_tree.max)
    );
    println!(
        "  per-frame work that grows with the window, on the big one ({} alias groups; the alias panel also formats every member line of every group, not timed here):",
        app_big.alias_groups().len()
    );
    for (what, place, time, calls) in growing_parts(&app_big) {
        println!(
            "    {what} [{place}]: {:.3} ms x {calls} per frame",
            ms(time)
        );
    }
    println!(
        "first frame on {records} records: {:.3} s (load {:.3} s, App::new {:.3} s, first draw {:.2} ms), best of {reps}",
        first.as_secs_f64(),
        parts.0.as_secs_f64(),
        parts.1.as_secs_f64(),
        ms(parts.2)
    );
    println!(
        "headless load + scan of the same files: {:.3} s (load {:.3} s, scan {:.3} s), best of {reps}",
        headless.as_secs_f64(),
        headless_parts.0.as_secs_f64(),
        headless_parts.1.as_secs_f64()
    );
    println!("first frame / headless: {first_ratio:.2} (goal <= 1.5)");
    println!(
        "RESULT records={records} small={small} frames={frames} frame_small_ms={:.4} frame_big_ms={:.4} frame_big_p99_ms={:.4} frame_ratio={ratio:.3} frame_tree_ms={:.4} frame_tree_p99_ms={:.4} tree_open_ms={:.2} first_frame_s={:.4} headless_s={:.4} first_ratio={first_ratio:.3}",
        ms(f_small.mean),
        ms(f_big.mean),
        ms(f_big.p99),
        ms(f_tree.mean),
        ms(f_tree.p99),
        ms(tree_open),
        first.as_secs_f64(),
        headless.as_secs_f64()
    );
}
