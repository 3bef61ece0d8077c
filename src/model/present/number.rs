//! The number formatters, one per width: [`compact`] for narrow columns (the workbench's
//! tables), [`precise`] where close values must be told apart (tensor metrics, reports).

/// A statistic in at most 10 characters: `-1.234e-5`, `12.5`, `–` for none, `inf`/`nan`.
pub fn compact(v: Option<f64>) -> String {
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

/// A number with enough digits to tell close values apart: `1.2345678e-3`, `nan`, `inf`.
pub fn precise(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else if v == 0.0 || (1e-3..1e6).contains(&v.abs()) {
        let s = format!("{v:.8}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        s.to_string()
    } else {
        format!("{v:.7e}")
    }
}

/// A byte count for people, in decimal megabytes as the loading progress shows them:
/// `3.1 MB`, `0.0 MB`.
pub fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}
