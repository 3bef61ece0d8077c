//! Writes a realistic manifest pair for the load + diff benchmark (benches/README.md).
//!
//!     cargo run --release --example gen_manifests -- OUT_DIR [--records N] [--ranks R] [--layout split|single|both] [--token-rows N]
//!
//! Layout written under OUT_DIR (never inside the repository; the script passes a temp dir):
//!
//!   split/a/rank<R>/match1-occ1/manifest.json   R ranks, N/R records each (capture A)
//!   split/b/rank<R>/match1-occ1/manifest.json   the same for capture B
//!   single/a.json, single/b.json                one rank holding all N records
//!
//! Records are shaped like a DeepSeek-V3-sized model (61 layers, tensor parallel over the
//! ranks, 8 decode tokens): per forward step `input_ids`, `embed`, 16 stages per layer
//! (`layers.{i}.input_norm`, `q`/`k`/`v` views of one fused qkv buffer, `rope_q`, `attn`,
//! `o_proj`, router, MLP, ...), `final_norm`, `logits`; a window holds as many steps as
//! fit (occurrence = step + 1). Text is exactly what `dump_probe.py` writes: one top-level
//! field per line, one record per line, `json.dumps(..., separators=(", ", ": "))`, floats as
//! Python's `repr` (shortest round-trip, 16–17 significant digits for float32 values read back
//! as float64, `1e-05` style exponents).
//!
//! With `--token-rows N` every record also has N token rows (docs/manifest.md, "Token rows"):
//! each window's row map holds one request at positions 2048..2048+N, the manifest's
//! `token_rows` names the sidecar (`rows.f32` beside `manifest.json`, `<side>.rows.f32` beside
//! the single layout's `<side>.json`), and B's rows carry the same noise and drift as its
//! statistics.
//!
//! B is A with ~2e-4 relative noise on every statistic (bfloat16-like rounding noise, inside
//! the default tolerances), different pointers and timestamps, and from the middle of each
//! window on (earliest on rank 7) a 3% drift that `diff` reports as a divergence.

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

const LAYERS: usize = 61;
const TOKENS: u64 = 8;
const HIDDEN: u64 = 7168;

/// splitmix64: deterministic, fast, good enough for synthetic values.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    /// Roughly normal (sum of uniforms).
    fn normal(&mut self) -> f64 {
        (0..4).map(|_| self.unit()).sum::<f64>() * 1.7320508 - 3.4641016
    }
}

/// Python's `repr(float)` (what `json.dumps` writes): shortest round-trip digits,
/// fixed notation for exponents -4..16, else `d.ddde-05` / `1e+16`.
fn py_float(out: &mut String, x: f64) {
    if x == 0.0 {
        out.push_str(if x.is_sign_negative() { "-0.0" } else { "0.0" });
        return;
    }
    // `{:e}` gives the shortest round-trip digit count; where two strings of that length
    // round-trip, Python takes the correctly rounded one (ties to even), so reformat exactly.
    let shortest = format!("{:e}", x.abs());
    let len = shortest
        .split_once('e')
        .map_or(1, |(m, _)| m.chars().filter(char::is_ascii_digit).count());
    let sci = format!("{:.*e}", len - 1, x.abs());
    let (mantissa, exp) = sci.split_once('e').expect("LowerExp has an exponent");
    let exp: i32 = exp.parse().expect("integer exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if x < 0.0 {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
}

/// A float32 statistic read back as float64, as the probe stores it.
fn f32_stat(x: f64) -> f64 {
    f64::from(x as f32)
}

#[derive(Clone, Copy)]
enum Dtype {
    Bf16,
    F32,
    I64,
}

impl Dtype {
    fn name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "bfloat16",
            Dtype::F32 => "float32",
            Dtype::I64 => "int64",
        }
    }
    fn size(self) -> u64 {
        match self {
            Dtype::Bf16 => 2,
            Dtype::F32 => 4,
            Dtype::I64 => 8,
        }
    }
}

/// One capture point of a forward step.
struct Stage {
    name: String,
    dtype: Dtype,
    shape: Vec<u64>,
    /// (stride, storage_offset, storage elements) for a view into a shared buffer.
    view: Option<(Vec<i64>, u64, u64)>,
    /// Shares the storage of the previous stage (q/k/v of one fused qkv output).
    shares_previous: bool,
    /// Typical magnitude of the values.
    scale: f64,
}

fn contiguous_stride(shape: &[u64]) -> Vec<i64> {
    let mut stride = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        stride[d] = stride[d + 1] * shape[d + 1] as i64;
    }
    stride
}

fn stages(ranks: u64) -> Vec<Stage> {
    let tp = ranks.max(1);
    let heads = (128 / tp).max(1);
    let inter = (18432 / tp).max(1);
    let vocab = (129280 / tp).max(1);
    let plain = |name: String, dtype, shape: Vec<u64>, scale| Stage {
        name,
        dtype,
        shape,
        view: None,
        shares_previous: false,
        scale,
    };
    let mut out = vec![
        plain("input_ids".into(), Dtype::I64, vec![TOKENS], 60000.0),
        plain("embed".into(), Dtype::Bf16, vec![TOKENS, HIDDEN], 0.02),
    ];
    let qkv_row = heads * 192 + 2 * 2 * 128;
    for i in 0..LAYERS {
        let growth = 1.0 + i as f64 * 0.15;
        let l = |s: &str| format!("layers.{i}.{s}");
        out.push(plain(
            l("input_norm"),
            Dtype::Bf16,
            vec![TOKENS, HIDDEN],
            1.0,
        ));
        for (k, (s, shape, offset)) in [
            ("q", vec![TOKENS, heads, 192], 0),
            ("k", vec![TOKENS, 2, 128], heads * 192),
            ("v", vec![TOKENS, 2, 128], heads * 192 + 256),
        ]
        .into_iter()
        .enumerate()
        {
            let inner = shape[2] as i64;
            out.push(Stage {
                name: l(s),
                dtype: Dtype::Bf16,
                shape,
                view: Some((vec![qkv_row as i64, inner, 1], offset, TOKENS * qkv_row)),
                shares_previous: k > 0,
                scale: 2.0,
            });
        }
        out.push(plain(
            l("rope_q"),
            Dtype::Bf16,
            vec![TOKENS, heads, 192],
            2.0,
        ));
        out.push(plain(l("rope_k"), Dtype::Bf16, vec![TOKENS, 2, 128], 2.0));
        out.push(plain(l("attn"), Dtype::Bf16, vec![TOKENS, heads, 128], 0.5));
        out.push(plain(
            l("o_proj"),
            Dtype::Bf16,
            vec![TOKENS, HIDDEN],
            0.3 * growth,
        ));
        out.push(plain(
            l("post_attn_norm"),
            Dtype::Bf16,
            vec![TOKENS, HIDDEN],
            1.0,
        ));
        out.push(plain(l("router"), Dtype::F32, vec![TOKENS, 256], 3.0));
        out.push(plain(l("topk_ids"), Dtype::I64, vec![TOKENS, 8], 128.0));
        out.push(plain(l("mlp_gate"), Dtype::Bf16, vec![TOKENS, inter], 1.5));
        out.push(plain(l("mlp_up"), Dtype::Bf16, vec![TOKENS, inter], 1.5));
        out.push(plain(l("mlp_act"), Dtype::Bf16, vec![TOKENS, inter], 0.4));
        out.push(plain(
            l("mlp_down"),
            Dtype::Bf16,
            vec![TOKENS, HIDDEN],
            0.2 * growth,
        ));
        out.push(plain(
            l("residual"),
            Dtype::Bf16,
            vec![TOKENS, HIDDEN],
            0.5 * growth,
        ));
    }
    out.push(plain(
        "final_norm".into(),
        Dtype::Bf16,
        vec![TOKENS, HIDDEN],
        1.0,
    ));
    out.push(plain("logits".into(), Dtype::F32, vec![TOKENS, vocab], 8.0));
    out
}

/// Statistics of one record: the values of A, before B's perturbation.
struct Values {
    min: f64,
    max: f64,
    mean: f64,
    l2: f64,
    checksum: f64,
}

fn values(rng: &mut Rng, stage: &Stage, numel: u64) -> Values {
    let s = stage.scale;
    match stage.dtype {
        Dtype::I64 => {
            let min = (rng.unit() * s * 0.1).floor();
            let max = (s * rng.range(0.5, 1.0)).floor();
            let mean = f32_stat((min + max) / 2.0 + rng.normal() * s * 0.01);
            Values {
                min,
                max,
                mean,
                l2: f32_stat(mean * (numel as f64).sqrt() * 1.1),
                checksum: f32_stat(mean * numel as f64 * 0.25 * rng.range(0.8, 1.2)),
            }
        }
        _ => {
            let l2 = f32_stat(s * (numel as f64).sqrt() * rng.range(0.8, 1.2));
            Values {
                min: f32_stat(-s * rng.range(3.0, 8.0)),
                max: f32_stat(s * rng.range(3.0, 8.0)),
                mean: f32_stat(s * rng.normal() * 0.01),
                l2,
                checksum: f32_stat(l2 * rng.normal() * 0.3),
            }
        }
    }
}

struct Side {
    /// 0 for A, 1 for B.
    index: u64,
    noise: f64,
}

struct Window<'a> {
    out: &'a Path,
    /// Token rows per record (0: no `token_rows`, no sidecar).
    token_rows: u64,
    rank: u64,
    world_size: u64,
    records: u64,
    /// Records from this position on drift by 3% in B.
    diverge_at: u64,
}

fn write_window(w: &Window, side: &Side, stages: &[Stage], tokens: &[u64]) -> std::io::Result<u64> {
    if let Some(parent) = w.out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let file = std::fs::File::create(w.out)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    // Values of A and B come from one stream per rank so that B is A perturbed.
    let mut values_rng = Rng(0xD0_0D + w.rank * 7919);
    let mut noise_rng = Rng(0xBEEF + w.rank * 104_729 + side.index * 31);
    let mut line = String::with_capacity(1024);
    // Token rows: one stream for A's values, B's perturbed as its statistics are.
    let mut row_values: Vec<u8> = Vec::new();
    let mut row_rng = Rng(0x5EED + w.rank * 7);

    let ids: Vec<String> = tokens.iter().map(u64::to_string).collect();
    let armed = 1_795_943_698.600_407_8 + side.index as f64 * 3600.0 + w.rank as f64 * 0.013;
    let mut header = String::new();
    header.push_str("{\n \"format\": \"dumpview.manifest\",\n \"schema_version\": 1,\n \"probe\": \"dump_probe.py 1\",\n");
    let _ = write!(
        header,
        " \"label\": \"req-{}\",\n \"match\": 1,\n \"occurrence\": 1,\n \"rank\": {},\n \"world_size\": {},\n",
        if side.index == 0 { "7f3a9c" } else { "51be20" },
        w.rank,
        w.world_size
    );
    let _ = writeln!(
        header,
        " \"metadata\": {{\"token_ids\": [{}], \"positions\": [2048, 2055], \"phase\": \"decode\", \"sampling\": {{\"temperature\": 0.0, \"greedy\": true}}, \"weights\": \"/models/deepseek-v3\", \"dtype\": \"bfloat16\", \"world_size\": {}}},",
        ids.join(", "),
        w.world_size
    );
    header.push_str(" \"stat_names\": [\"nan_count\", \"inf_count\", \"finite_count\", \"max_abs\", \"min\", \"max\", \"mean\", \"l2\", \"pos_checksum\"],\n \"stats_dtype\": \"float64\",\n \"tensor_rows\": 256,\n \"tensor_pattern\": \"^logits$\",\n");
    let _ = write!(
        header,
        " \"host\": \"node-{:02}\",\n \"pid\": {},\n \"torch_version\": \"2.7.1+cu128\",\n \"armed_unix_s\": ",
        w.rank / 8,
        40_000 + w.rank * 17 + side.index * 1000
    );
    py_float(&mut header, armed);
    header.push_str(",\n \"finished_unix_s\": ");
    py_float(&mut header, armed + 412.733_918_190_002_4);
    header.push_str(",\n \"records\": [\n");
    out.write_all(header.as_bytes())?;

    let pointer_base: u64 = 0x7f3a_0000_0000 + side.index * 0x1_2340_0000 + w.rank * 0x40_0000_0000;
    let mut storage_id: u64 = 0;
    let mut storage_ptr: u64 = pointer_base;
    let mut bump: u64 = 0;
    let mut written: u64 = 0;
    let mut step: u64 = 0;
    'steps: loop {
        for stage in stages {
            if written == w.records {
                break 'steps;
            }
            let seq = written;
            let numel: u64 = stage.shape.iter().product();
            let es = stage.dtype.size();
            let (stride, offset, storage_elems, contiguous) = match &stage.view {
                Some((stride, offset, elems)) => (stride.clone(), *offset, *elems, false),
                None => (contiguous_stride(&stage.shape), 0, numel, true),
            };
            if !stage.shares_previous {
                storage_id += 1;
                // A caching allocator: addresses come from a pool and are reused.
                let nbytes = (storage_elems * es).div_ceil(512) * 512;
                storage_ptr = pointer_base + bump;
                bump = (bump + nbytes + 0x20_0000) % 0x4000_0000;
            }
            let storage_nbytes = (storage_elems * es).div_ceil(512) * 512;
            let v = values(&mut values_rng, stage, numel);
            let noise = if side.index == 1 && seq >= w.diverge_at {
                0.03
            } else {
                side.noise
            };
            let mut jitter = |x: f64, int: bool| {
                if side.index == 0 || int {
                    x
                } else {
                    f32_stat(x * (1.0 + noise * noise_rng.range(0.5, 1.0)))
                }
            };
            let int = matches!(stage.dtype, Dtype::I64);
            let (min, max) = (jitter(v.min, int), jitter(v.max, int));
            let (mean, l2, checksum) = (
                jitter(v.mean, false),
                jitter(v.l2, false),
                jitter(v.checksum, false),
            );

            line.clear();
            let _ = write!(
                line,
                "  {{\"seq\": {seq}, \"stage\": \"{}\", \"occurrence\": {}, \"mode\": \"eager\", \"dtype\": \"{}\", \"shape\": [",
                stage.name,
                step + 1,
                stage.dtype.name()
            );
            join(&mut line, &stage.shape);
            line.push_str("], \"stride\": [");
            join(&mut line, &stride);
            let _ = write!(
                line,
                "], \"storage_offset\": {offset}, \"element_size\": {es}, \"numel\": {numel}, \"storage_ptr\": {storage_ptr}, \"storage_id\": {storage_id}, \"storage_nbytes\": {storage_nbytes}, \"data_ptr\": {}, \"device\": \"cuda:{}\", \"device_format\": null, \"is_contiguous\": {contiguous}, \"stats\": {{\"nan_count\": 0, \"inf_count\": 0, \"finite_count\": {numel}, \"max_abs\": ",
                storage_ptr + offset * es,
                w.rank % 8
            );
            py_float(&mut line, min.abs().max(max.abs()));
            line.push_str(", \"min\": ");
            py_float(&mut line, min);
            line.push_str(", \"max\": ");
            py_float(&mut line, max);
            line.push_str(", \"mean\": ");
            py_float(&mut line, mean);
            line.push_str(", \"l2\": ");
            py_float(&mut line, l2);
            line.push_str(", \"pos_checksum\": ");
            py_float(&mut line, checksum);
            if stage.name == "logits" {
                let _ = write!(
                    line,
                    "}}, \"tensor_file\": \"tensors/logits#{}.safetensors\", \"rows_kept\": {TOKENS}, \"rows_total\": {TOKENS}, \"truncated\": false}}",
                    step + 1
                );
            } else {
                line.push_str("}, \"tensor_file\": null}");
            }
            written += 1;
            if written < w.records {
                line.push(',');
            }
            line.push('\n');
            out.write_all(line.as_bytes())?;
            let cols = (numel / TOKENS).max(1) as f64;
            for r in 0..w.token_rows {
                let scale = min.abs().max(max.abs());
                let max_abs = scale * row_rng.range(0.5, 1.0);
                let sum = mean * cols * row_rng.range(0.5, 1.5);
                let sum_squares = l2 * l2 / w.token_rows as f64 * row_rng.range(0.8, 1.2);
                let checksum =
                    dump_stats::row_weight(2048 + r) * sum_squares.sqrt() * row_rng.normal() * 0.3;
                for v in [0.0, max_abs, sum, sum_squares, checksum] {
                    let v = if side.index == 0 {
                        v
                    } else {
                        v * (1.0 + noise * noise_rng.range(0.5, 1.0))
                    };
                    row_values.extend_from_slice(&(v as f32).to_le_bytes());
                }
            }
        }
        step += 1;
    }
    out.write_all(b" ],\n \"input_sets\": []")?;
    let mut sidecar_bytes = 0;
    if w.token_rows > 0 {
        let name = sidecar_name(w.out);
        let rows = w.records * w.token_rows;
        let mut entry = String::new();
        let _ = write!(
            entry,
            ",\n \"token_rows\": {{\"file\": \"{name}\", \"dtype\": \"float32\", \"byteorder\": \"little\", \"stats\": [\"nonfinite_count\", \"max_abs\", \"sum\", \"sum_squares\", \"row_checksum\"], \"map\": [{{\"request\": \"req-{}\", \"first_position\": 2048, \"count\": {}, \"token_ids\": [",
            if side.index == 0 { "7f3a9c" } else { "51be20" },
            w.token_rows
        );
        join(&mut entry, &tokens[..w.token_rows as usize]);
        let _ = write!(
            entry,
            "]}}], \"positions_inferred\": false, \"row_positions\": [0, 65535], \"stage_filter\": null, \"rows\": {rows}, \"bytes\": {}, \"records\": [",
            row_values.len()
        );
        out.write_all(entry.as_bytes())?;
        for seq in 0..w.records {
            let mut item = String::new();
            if seq > 0 {
                item.push_str(", ");
            }
            let _ = write!(
                item,
                "[{seq}, {}, {}, [0], null]",
                seq * w.token_rows,
                w.token_rows
            );
            out.write_all(item.as_bytes())?;
        }
        out.write_all(b"]}")?;
        std::fs::write(w.out.with_file_name(&name), &row_values)?;
        sidecar_bytes = row_values.len() as u64;
    }
    out.write_all(b"\n}\n")?;
    out.flush()?;
    Ok(out.get_ref().metadata()?.len() + sidecar_bytes)
}

/// The token rows' sidecar beside manifest `path`: `rows.f32` beside `manifest.json` (as the
/// probe names it), `<stem>.rows.f32` beside any other name (the single layout's two files
/// share a directory).
pub fn sidecar_name(path: &Path) -> String {
    match path.file_name().and_then(|n| n.to_str()) {
        Some("manifest.json") | None => "rows.f32".to_string(),
        Some(name) => format!("{}.rows.f32", name.trim_end_matches(".json")),
    }
}

fn join<T: std::fmt::Display>(out: &mut String, items: &[T]) {
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{x}");
    }
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut out_dir: Option<PathBuf> = None;
    let (mut records, mut ranks, mut layout) = (1_000_000u64, 16u64, "both".to_string());
    let mut token_rows = 0u64;
    while let Some(arg) = args.next() {
        let mut value = || args.next().expect("option needs a value");
        match arg.as_str() {
            "--records" => records = value().parse().expect("--records N"),
            "--ranks" => ranks = value().parse().expect("--ranks R"),
            "--layout" => layout = value(),
            "--token-rows" => token_rows = value().parse().expect("--token-rows N"),
            other if !other.starts_with('-') && out_dir.is_none() => out_dir = Some(other.into()),
            other => panic!(
                "unknown argument {other:?}; usage: gen_manifests OUT_DIR [--records N] [--ranks R] [--layout split|single|both]"
            ),
        }
    }
    let out_dir = out_dir.expect(
        "usage: gen_manifests OUT_DIR [--records N] [--ranks R] [--layout split|single|both]",
    );
    let mut token_rng = Rng(42);
    let tokens: Vec<u64> = (0..2048).map(|_| token_rng.next() % 129_280).collect();
    let sides = [
        (
            Side {
                index: 0,
                noise: 0.0,
            },
            "a",
        ),
        (
            Side {
                index: 1,
                noise: 2e-4,
            },
            "b",
        ),
    ];
    if layout == "split" || layout == "both" {
        let stages = stages(ranks);
        let per_rank = records / ranks;
        let mut total = 0;
        for (side, name) in &sides {
            for rank in 0..ranks {
                let path = out_dir
                    .join("split")
                    .join(name)
                    .join(format!("rank{rank}"))
                    .join("match1-occ1")
                    .join("manifest.json");
                // Rank 7 drifts first (at 40% of its window), the others at 50% and later.
                let diverge_at = if rank == 7 {
                    per_rank * 2 / 5
                } else {
                    per_rank / 2 + rank * 97
                };
                let window = Window {
                    out: &path,
                    token_rows,
                    rank,
                    world_size: ranks,
                    records: per_rank,
                    diverge_at,
                };
                total += write_window(&window, side, &stages, &tokens)?;
            }
        }
        println!("split: {ranks} ranks x {per_rank} records per side, {total} bytes in all");
    }
    if layout == "single" || layout == "both" {
        let stages = stages(ranks);
        let mut total = 0;
        for (side, name) in &sides {
            let path = out_dir.join("single").join(format!("{name}.json"));
            let window = Window {
                out: &path,
                token_rows,
                rank: 0,
                world_size: ranks,
                records,
                diverge_at: records / 2,
            };
            total += write_window(&window, side, &stages, &tokens)?;
        }
        println!("single: 1 rank x {records} records per side, {total} bytes in all");
    }
    Ok(())
}
