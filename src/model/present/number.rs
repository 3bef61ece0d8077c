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

/// A float32 value with the digits that tell it from its float32 neighbours, no more
/// (Rust's shortest round-trip form): `4.1231055`, `1.5e-5`, `nan`. Values a capture holds as
/// float32 (token rows) print this way, so two of them always show comparable digits.
pub fn precise_f32(v: f32) -> String {
    if !v.is_finite() {
        precise(f64::from(v))
    } else if v == 0.0 || (1e-3..1e6).contains(&v.abs()) {
        format!("{v}")
    } else {
        format!("{v:e}")
    }
}

/// A byte count for people, in decimal megabytes as the loading progress shows them:
/// `3.1 MB`, `0.0 MB`.
pub fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// `n` and `noun`, plural unless `n` is 1: `1 record`, `0 records`, `12 records`.
pub fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float32_values_print_their_shortest_round_trip_digits() {
        assert_eq!(precise_f32(0.1), "0.1");
        assert_eq!(precise_f32(17.0f32.sqrt()), "4.1231055");
        assert_eq!(precise_f32(1.5e-5), "1.5e-5");
        assert_eq!(precise_f32(f32::NAN), "nan");
        assert_eq!(precise_f32(0.0), "0");
    }
}
