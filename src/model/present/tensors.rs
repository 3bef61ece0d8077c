//! Plain-text rendering of a tensor comparison: what `dumpview tensors` prints (two files, or
//! two directory trees as a table) and what the first-mismatch report quotes.

use std::fmt::Write;

use crate::model::tensor::metrics::{
    DEFAULT_ATOL, DEFAULT_RTOL, Histogram, Location, Metrics, Options,
};
use crate::model::tensor::pairing::FileComparison;
use crate::model::tensor::trees::{RowVerdict, TreeComparison, TreeRow};

/// Bars of the histogram are at most this many characters wide.
const BAR_WIDTH: usize = 40;

/// The whole comparison: both files, the rule, each pair, unmatched keys, the verdict.
pub fn render(cmp: &FileComparison) -> String {
    let mut out = String::new();
    for (side, file) in [("A", &cmp.a), ("B", &cmp.b)] {
        let _ = writeln!(
            out,
            "{side}: {} ({}, {} tensor{})",
            file.path,
            file.format.name(),
            file.tensors,
            if file.tensors == 1 { "" } else { "s" }
        );
    }
    out.push_str(&rule(&cmp.options));
    for (side, file) in [("A", &cmp.a), ("B", &cmp.b)] {
        if file.tensors == 0 {
            let _ = writeln!(
                out,
                "{side} holds no tensors (only other values were saved)"
            );
        }
    }
    for pair in &cmp.pairs {
        let title = match &pair.key_b {
            Some(kb) => format!("{} vs {}", display_key(&pair.key), display_key(kb)),
            None => display_key(&pair.key),
        };
        let _ = writeln!(out, "\n== {title}");
        match (&pair.metrics, &pair.error) {
            (Some(m), _) => out.push_str(&render_metrics(m)),
            (None, Some(e)) => {
                let _ = writeln!(out, "   not compared: {e}");
            }
            (None, None) => {}
        }
    }
    if !cmp.only_a.is_empty() {
        let _ = writeln!(out, "\nonly in A: {}", keys(&cmp.only_a));
    }
    if !cmp.only_b.is_empty() {
        let _ = writeln!(out, "\nonly in B: {}", keys(&cmp.only_b));
    }
    let compared = cmp.pairs.iter().filter(|p| p.metrics.is_some()).count();
    let close = cmp
        .pairs
        .iter()
        .filter(|p| p.metrics.as_ref().is_some_and(|m| m.allclose))
        .count();
    let _ = writeln!(
        out,
        "\n{close} of {compared} compared pair{} close; {} not compared; {} key{} unmatched",
        if compared == 1 { "" } else { "s" },
        cmp.pairs.len() - compared,
        cmp.only_a.len() + cmp.only_b.len(),
        if cmp.only_a.len() + cmp.only_b.len() == 1 {
            ""
        } else {
            "s"
        },
    );
    out
}

/// A key as shown: `(tensor)` for a bare tensor's empty key.
pub fn display_key(key: &str) -> String {
    if key.is_empty() {
        "(tensor)".to_string()
    } else {
        key.to_string()
    }
}

fn keys(keys: &[String]) -> String {
    keys.iter()
        .map(|k| display_key(k))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One pair's metrics, indented under its key.
pub fn render_metrics(m: &Metrics) -> String {
    let mut out = String::new();
    let dtype = if m.dtype_a == m.dtype_b {
        m.dtype_a.to_string()
    } else {
        format!("{} vs {}", m.dtype_a, m.dtype_b)
    };
    let _ = writeln!(
        out,
        "   {dtype}, shape {:?}, {} elements{}",
        m.shape,
        m.numel,
        if m.compared_as != m.dtype_a || m.compared_as != m.dtype_b {
            format!(", compared as {}", m.compared_as)
        } else {
            String::new()
        }
    );
    if m.allclose {
        let _ = writeln!(out, "   allclose        yes");
    } else {
        let _ = writeln!(
            out,
            "   allclose        NO: {} of {} mismatch ({:.4}%)",
            m.mismatches,
            m.numel,
            m.mismatch_fraction * 100.0
        );
    }
    if let Some(at) = &m.first_mismatch {
        let _ = writeln!(out, "   first mismatch  {}", location(at));
    }
    match (&m.max_abs_diff, &m.max_abs_diff_at) {
        (Some(d), Some(at)) => {
            let _ = writeln!(out, "   max_abs_diff    {} {}", num(*d), location(at));
        }
        _ => {
            let _ = writeln!(out, "   max_abs_diff    – (no finite pair)");
        }
    }
    let _ = writeln!(
        out,
        "   mean_abs_diff   {}   rel_l2 {}   cosine {}",
        opt(m.mean_abs_diff),
        opt(m.rel_l2),
        m.cosine.map_or("–".to_string(), |c| format!("{c:.9}")
            .replace("NaN", "nan"))
    );
    if let (Some(ulp), Some(dtype)) = (m.max_ulp, m.ulp_dtype) {
        let at = m
            .max_ulp_at
            .as_ref()
            .map(|at| format!(" {}", location(at)))
            .unwrap_or_default();
        let _ = writeln!(out, "   max ULP         {ulp} ({dtype}){at}");
    }
    let nf = &m.nonfinite;
    let side = |nan: u64, pos: u64, neg: u64| {
        if nan + pos + neg == 0 {
            "none".to_string()
        } else {
            format!("{nan} NaN, {pos} +inf, {neg} -inf")
        }
    };
    if nf.nan_a + nf.nan_b + nf.posinf_a + nf.posinf_b + nf.neginf_a + nf.neginf_b > 0 {
        let _ = writeln!(
            out,
            "   non-finite      A: {}; B: {}; positions {}",
            side(nf.nan_a, nf.posinf_a, nf.neginf_a),
            side(nf.nan_b, nf.posinf_b, nf.neginf_b),
            match &nf.first_disagreement {
                None => "agree".to_string(),
                Some(at) => format!("differ, first {}", location(at)),
            }
        );
    }
    out.push_str(&render_histogram(&m.histogram));
    out
}

/// The |a - b| histogram as text bars, one line per decade (plus zero and non-finite).
pub fn render_histogram(h: &Histogram) -> String {
    let mut rows: Vec<(String, u64)> = Vec::new();
    if h.zero > 0 {
        rows.push(("0".into(), h.zero));
    }
    for d in &h.decades {
        rows.push((format!("1e{}", d.decade), d.count));
    }
    if h.nonfinite > 0 {
        rows.push(("non-finite".into(), h.nonfinite));
    }
    if rows.is_empty() {
        return String::new();
    }
    let most = rows.iter().map(|r| r.1).max().unwrap_or(1).max(1);
    let mut out = String::from("   |a-b| by decade (10^e <= |a-b| < 10^(e+1))\n");
    for (label, count) in rows {
        let width = ((count as f64 / most as f64) * BAR_WIDTH as f64).ceil() as usize;
        let _ = writeln!(
            out,
            "     {label:>10} {:<BAR_WIDTH$} {count}",
            "#".repeat(width)
        );
    }
    out
}

/// `at [1, 7] (flat 23): a=1.5 b=1.25`.
pub fn location(at: &Location) -> String {
    format!(
        "at {:?} (flat {}): a={} b={}",
        at.coords,
        at.index,
        num(at.a),
        num(at.b)
    )
}

fn opt(v: Option<f64>) -> String {
    v.map_or("–".to_string(), num)
}

pub use crate::model::present::number::precise as num;

/// Two trees compared ([`TreeComparison`]): both roots and the rule, a table with one row per
/// key of each paired file (relative path order), the files and entries on one side only, and
/// a count line.
pub fn render_tree(cmp: &TreeComparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "A: {}", cmp.a);
    let _ = writeln!(out, "B: {} (the reference)", cmp.b);
    out.push_str(&rule(&cmp.options));
    if let Some(key) = &cmp.key {
        let _ = writeln!(out, "only the key {} within each file", display_key(key));
    }
    if !cmp.rows.is_empty() {
        out.push('\n');
        out.push_str(&tree_table(&cmp.rows));
    }
    let problems: Vec<&TreeRow> = cmp.rows.iter().filter(|r| r.error.is_some()).collect();
    if !problems.is_empty() {
        out.push('\n');
        for row in problems {
            let key = row
                .key
                .as_deref()
                .map(|k| format!(" {}", display_key(k)))
                .unwrap_or_default();
            let what = if row.verdict == RowVerdict::Unreadable {
                "unreadable"
            } else {
                "not compared"
            };
            let _ = writeln!(
                out,
                "{}{key}: {what}: {}",
                row.path,
                row.error.as_deref().unwrap_or("")
            );
        }
    }
    for (side, files) in [("A", &cmp.only_a), ("B", &cmp.only_b)] {
        if !files.is_empty() {
            let _ = writeln!(out, "\nfiles only in {side} ({}):", files.len());
            for file in files {
                let _ = writeln!(out, "  {file}");
            }
        }
    }
    if !cmp.skipped.is_empty() {
        let _ = writeln!(out, "\nnot walked ({}):", cmp.skipped.len());
        for s in &cmp.skipped {
            let _ = writeln!(
                out,
                "  {}: {}: {}",
                s.side.to_ascii_uppercase(),
                s.path,
                s.reason
            );
        }
    }
    let c = &cmp.counts;
    let compared = c.close + c.not_close;
    let mut line = format!(
        "\n{} file{} paired: {} of {compared} compared key{} close, {} not compared, {} key{} in one file only, {} unreadable; {} file{} only in A, {} only in B",
        c.files_paired,
        plural(c.files_paired),
        c.close,
        plural(compared),
        c.not_compared,
        c.keys_only_in_a + c.keys_only_in_b,
        plural(c.keys_only_in_a + c.keys_only_in_b),
        c.unreadable,
        c.files_only_in_a,
        plural(c.files_only_in_a),
        c.files_only_in_b,
    );
    if c.skipped > 0 {
        let _ = write!(line, "; {} not walked", c.skipped);
    }
    if c.files_without_key > 0 {
        let _ = write!(line, "; {} without the key", c.files_without_key);
    }
    let _ = writeln!(out, "{line}");
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The closeness rule line (and the cast), as both renderings state it.
fn rule(o: &Options) -> String {
    let screen = if o.atol == DEFAULT_ATOL && o.rtol == DEFAULT_RTOL {
        " (the default: a coarse screen; give --atol/--rtol for a verdict)"
    } else {
        ""
    };
    let mut out = format!(
        "close: |a-b| <= atol + rtol*|b| with atol {:e}, rtol {:e}, equal_nan {}{screen}\n",
        o.atol, o.rtol, o.equal_nan
    );
    if let Some(cast) = o.cast {
        let _ = writeln!(out, "both sides rounded to {cast} before comparing");
    }
    out
}

/// The table of a tree comparison: path, key, dtype, shape, verdict, max_abs_diff, rel_l2,
/// cosine; `–` where a row has no metrics.
fn tree_table(rows: &[TreeRow]) -> String {
    let header = [
        "path",
        "key",
        "dtype",
        "shape",
        "verdict",
        "max_abs_diff",
        "rel_l2",
        "cosine",
    ];
    let dash = || "–".to_string();
    let cells: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            let key = match (&r.key, &r.key_b) {
                (Some(k), Some(kb)) => format!("{} vs {}", display_key(k), display_key(kb)),
                (Some(k), None) => display_key(k),
                (None, _) => dash(),
            };
            let (dtype, shape, max_abs, rel_l2, cosine) = match &r.metrics {
                Some(m) => (
                    if m.dtype_a == m.dtype_b {
                        m.dtype_a.to_string()
                    } else {
                        format!("{}/{}", m.dtype_a, m.dtype_b)
                    },
                    format!("{:?}", m.shape),
                    opt(m.max_abs_diff),
                    opt(m.rel_l2),
                    m.cosine
                        .map_or_else(dash, |c| format!("{c:.9}").replace("NaN", "nan")),
                ),
                None => (dash(), dash(), dash(), dash(), dash()),
            };
            [
                r.path.clone(),
                key,
                dtype,
                shape,
                r.verdict.text().to_string(),
                max_abs,
                rel_l2,
                cosine,
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &[&str]| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            let pad = w - cell.chars().count();
            // Numbers right-aligned, words left.
            if i >= 5 {
                text.push_str(&" ".repeat(pad));
                text.push_str(cell);
            } else {
                text.push_str(cell);
                text.push_str(&" ".repeat(pad));
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(&mut out, &header);
    for row in &cells {
        let refs: Vec<&str> = row.iter().map(String::as_str).collect();
        line(&mut out, &refs);
    }
    out
}
