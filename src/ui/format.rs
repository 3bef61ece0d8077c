//! Compact text for numbers, shapes and dtypes in narrow columns.

/// A statistic in at most 10 characters: `-1.234e-5`, `12.5`, `–` for none, `inf`/`nan`.
pub fn num(v: Option<f64>) -> String {
    match v {
        None => "–".to_string(),
        Some(x) if x.is_nan() => "nan".to_string(),
        Some(x) if x.is_infinite() => if x > 0.0 { "inf" } else { "-inf" }.to_string(),
        Some(0.0) => "0".to_string(),
        Some(x) if (1e-2..1e5).contains(&x.abs()) => {
            // Five significant digits at most: 80959, 1.2757, 0.0171.
            let decimals = (4 - x.abs().log10().floor() as i32).clamp(0, 6) as usize;
            let s = format!("{x:.decimals$}");
            if s.contains('.') {
                s.trim_end_matches('0').trim_end_matches('.').to_string()
            } else {
                s
            }
        }
        Some(x) => format!("{x:.3e}"),
    }
}

/// `[12, 2, 64]` → `12×2×64`; scalars → `()`.
pub fn shape(dims: &[u64]) -> String {
    if dims.is_empty() {
        return "()".to_string();
    }
    dims.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join("×")
}

/// Stride list as `[128,64,1]`.
pub fn stride(dims: &[i64]) -> String {
    format!(
        "[{}]",
        dims.iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// `float32` → `f32`, `bfloat16` → `bf16`, `int64` → `i64`, `bool` → `bool`.
pub fn dtype(name: &str) -> String {
    let short = name
        .replace("bfloat", "bf")
        .replace("float", "f")
        .replace("uint", "u")
        .replace("int", "i")
        .replace("complex", "c");
    short.chars().take(6).collect()
}

/// Cuts `text` to `width` characters, marking the cut with `…`.
pub fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_fit_ten_columns() {
        assert_eq!(num(Some(80958.8)), "80959");
        assert_eq!(num(Some(-71.61245)), "-71.612");
        assert_eq!(num(Some(0.0171)), "0.0171");
        assert_eq!(num(Some(189530.0)), "1.895e5");
        assert_eq!(num(Some(1.5)), "1.5");
        assert_eq!(num(Some(-0.0029)), "-2.900e-3");
        assert_eq!(num(None), "–");
        assert_eq!(num(Some(f64::NEG_INFINITY)), "-inf");
        assert_eq!(shape(&[12, 2, 64]), "12×2×64");
        assert_eq!(dtype("bfloat16"), "bf16");
        assert_eq!(fit("layers.10.mlp_down#1", 10), "layers.10…");
    }
}
