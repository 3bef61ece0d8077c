//! Element types of saved tensors and how their bytes decode to `f64`.
//!
//! Names follow torch (`float32`, `bfloat16`, `float8_e4m3fn`); safetensors' short names
//! (`F32`, `BF16`, `F8_E4M3`) map onto the same set. All data is little-endian.

use half::{bf16, f16};

/// An element type dumpview reads from `.pt` and safetensors files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DType {
    /// IEEE binary64 (`torch.float64`, `torch.double`), 8 bytes.
    Float64,
    /// IEEE binary32 (`torch.float32`, `torch.float`), 4 bytes.
    Float32,
    /// IEEE binary16 (`torch.float16`, `torch.half`), 2 bytes.
    Float16,
    /// bfloat16: the top 16 bits of a float32 (8 exponent bits, 7 mantissa bits), 2 bytes.
    #[serde(rename = "bfloat16")]
    BFloat16,
    /// OCP FP8 E4M3, "fn" variant: no infinities, one NaN pattern per sign (S.1111.111).
    #[serde(rename = "float8_e4m3fn")]
    Float8E4M3Fn,
    /// OCP FP8 E5M2: IEEE-like, with infinities and NaNs.
    #[serde(rename = "float8_e5m2")]
    Float8E5M2,
    /// Signed 64-bit integer (`torch.int64`, `torch.long`), 8 bytes.
    Int64,
    /// Signed 32-bit integer (`torch.int32`, `torch.int`), 4 bytes.
    Int32,
    /// Signed 16-bit integer (`torch.int16`, `torch.short`), 2 bytes.
    Int16,
    /// Signed 8-bit integer (`torch.int8`), 1 byte.
    Int8,
    /// Unsigned 8-bit integer (`torch.uint8`), 1 byte.
    Uint8,
    /// Boolean, one byte per element (0 is false, anything else true).
    Bool,
}

impl DType {
    /// Every dtype, in the order `--help` lists them.
    pub const ALL: [DType; 12] = [
        DType::Float64,
        DType::Float32,
        DType::Float16,
        DType::BFloat16,
        DType::Float8E4M3Fn,
        DType::Float8E5M2,
        DType::Int64,
        DType::Int32,
        DType::Int16,
        DType::Int8,
        DType::Uint8,
        DType::Bool,
    ];

    /// torch's name without the `torch.` prefix: `float32`, `bfloat16`, `float8_e4m3fn`.
    pub fn name(self) -> &'static str {
        match self {
            DType::Float64 => "float64",
            DType::Float32 => "float32",
            DType::Float16 => "float16",
            DType::BFloat16 => "bfloat16",
            DType::Float8E4M3Fn => "float8_e4m3fn",
            DType::Float8E5M2 => "float8_e5m2",
            DType::Int64 => "int64",
            DType::Int32 => "int32",
            DType::Int16 => "int16",
            DType::Int8 => "int8",
            DType::Uint8 => "uint8",
            DType::Bool => "bool",
        }
    }

    /// Parses torch's names and common aliases (`f32`, `half`, `bf16`, `float`, `long`).
    pub fn from_name(name: &str) -> Option<DType> {
        let name = name.strip_prefix("torch.").unwrap_or(name);
        Some(match name {
            "float64" | "double" | "f64" => DType::Float64,
            "float32" | "float" | "f32" => DType::Float32,
            "float16" | "half" | "f16" => DType::Float16,
            "bfloat16" | "bf16" => DType::BFloat16,
            "float8_e4m3fn" | "f8_e4m3" | "e4m3" => DType::Float8E4M3Fn,
            "float8_e5m2" | "f8_e5m2" | "e5m2" => DType::Float8E5M2,
            "int64" | "long" | "i64" => DType::Int64,
            "int32" | "int" | "i32" => DType::Int32,
            "int16" | "short" | "i16" => DType::Int16,
            "int8" | "i8" => DType::Int8,
            "uint8" | "u8" => DType::Uint8,
            "bool" => DType::Bool,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Float64 | DType::Int64 => 8,
            DType::Float32 | DType::Int32 => 4,
            DType::Float16 | DType::BFloat16 | DType::Int16 => 2,
            DType::Float8E4M3Fn | DType::Float8E5M2 | DType::Int8 | DType::Uint8 | DType::Bool => 1,
        }
    }

    /// Whether the type is a floating-point format (ULP distances exist, NaN/inf may occur).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DType::Float64
                | DType::Float32
                | DType::Float16
                | DType::BFloat16
                | DType::Float8E4M3Fn
                | DType::Float8E5M2
        )
    }

    /// Significand precision in bits, the implicit bit included (float64 53, float32 24,
    /// float16 11, bfloat16 8, float8_e4m3fn 4, float8_e5m2 3); `None` for integers and bool.
    /// The unit roundoff is `2^-digits`.
    pub fn mantissa_digits(self) -> Option<u32> {
        match self {
            DType::Float64 => Some(53),
            DType::Float32 => Some(24),
            DType::Float16 => Some(11),
            DType::BFloat16 => Some(8),
            DType::Float8E4M3Fn => Some(4),
            DType::Float8E5M2 => Some(3),
            _ => None,
        }
    }

    /// The floating type of fewest significand bits among `dtypes` (bfloat16 before float16:
    /// 8 bits against 11), the dtype whose ULP says "one rounding of the lower precision".
    pub fn coarsest_float(dtypes: impl IntoIterator<Item = DType>) -> Option<DType> {
        dtypes
            .into_iter()
            .filter_map(|d| d.mantissa_digits().map(|m| (m, d)))
            .min_by_key(|&(m, _)| m)
            .map(|(_, d)| d)
    }

    /// Decodes the element whose bytes start at `bytes[0]` (little-endian) to `f64`; exact for
    /// every type except int64 beyond 2^53. `bytes` holds at least [`DType::size`] bytes.
    #[inline]
    pub fn decode(self, bytes: &[u8]) -> f64 {
        match self {
            DType::Float64 => f64::from_le_bytes(bytes[..8].try_into().unwrap()),
            DType::Float32 => f64::from(f32::from_le_bytes(bytes[..4].try_into().unwrap())),
            DType::Float16 => f16::from_bits(u16::from_le_bytes([bytes[0], bytes[1]])).to_f64(),
            DType::BFloat16 => bf16::from_bits(u16::from_le_bytes([bytes[0], bytes[1]])).to_f64(),
            DType::Float8E4M3Fn => e4m3fn_to_f64(bytes[0]),
            DType::Float8E5M2 => e5m2_to_f64(bytes[0]),
            DType::Int64 => i64::from_le_bytes(bytes[..8].try_into().unwrap()) as f64,
            DType::Int32 => f64::from(i32::from_le_bytes(bytes[..4].try_into().unwrap())),
            DType::Int16 => f64::from(i16::from_le_bytes([bytes[0], bytes[1]])),
            DType::Int8 => f64::from(bytes[0] as i8),
            DType::Uint8 => f64::from(bytes[0]),
            DType::Bool => f64::from(u8::from(bytes[0] != 0)),
        }
    }

    /// The position of a floating value on the line of representable values of this dtype:
    /// consecutive representable values differ by 1, +0 and -0 are both 0, so
    /// `|ordinal(a) - ordinal(b)|` is the ULP distance. `None` for NaN and non-float types.
    ///
    /// `value` must be representable in this dtype (it was decoded from it, or rounded to it).
    pub fn ordinal(self, value: f64) -> Option<i64> {
        if value.is_nan() {
            return None;
        }
        let magnitude: i64 = match self {
            DType::Float64 => (value.abs().to_bits() & !(1 << 63)) as i64,
            DType::Float32 => i64::from((value as f32).abs().to_bits()),
            DType::Float16 => i64::from(f16::from_f64(value.abs()).to_bits()),
            DType::BFloat16 => i64::from(bf16::from_f64(value.abs()).to_bits()),
            DType::Float8E4M3Fn => i64::from(f64_to_e4m3fn(value.abs()) & 0x7f),
            DType::Float8E5M2 => i64::from(f64_to_e5m2(value.abs()) & 0x7f),
            _ => return None,
        };
        Some(if value.is_sign_negative() {
            -magnitude
        } else {
            magnitude
        })
    }

    /// Rounds `value` to the nearest value of this dtype (ties to even), returned as `f64`:
    /// the explicit cast `--cast` applies before comparing tensors of different dtypes.
    /// Integer types round to nearest and saturate; bool is `value != 0`.
    pub fn round(self, value: f64) -> f64 {
        match self {
            DType::Float64 => value,
            DType::Float32 => f64::from(value as f32),
            DType::Float16 => f16::from_f64(value).to_f64(),
            DType::BFloat16 => bf16::from_f64(value).to_f64(),
            DType::Float8E4M3Fn => e4m3fn_to_f64(f64_to_e4m3fn(value)),
            DType::Float8E5M2 => e5m2_to_f64(f64_to_e5m2(value)),
            DType::Int64 => value.round_ties_even() as i64 as f64,
            DType::Int32 => value.round_ties_even() as i32 as f64,
            DType::Int16 => value.round_ties_even() as i16 as f64,
            DType::Int8 => value.round_ties_even() as i8 as f64,
            DType::Uint8 => value.round_ties_even() as u8 as f64,
            DType::Bool => f64::from(u8::from(value != 0.0)),
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// FP8 E4M3FN (bias 7, 3 mantissa bits, S.1111.111 is NaN, no infinities) to `f64`.
pub fn e4m3fn_to_f64(bits: u8) -> f64 {
    let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((bits >> 3) & 0x0f);
    let mantissa = f64::from(bits & 0x07);
    if exponent == 0x0f && bits & 0x07 == 0x07 {
        return f64::NAN;
    }
    if exponent == 0 {
        sign * mantissa / 8.0 * 2f64.powi(-6)
    } else {
        sign * (1.0 + mantissa / 8.0) * 2f64.powi(exponent - 7)
    }
}

/// FP8 E5M2 (bias 15, 2 mantissa bits, IEEE specials) to `f64`.
pub fn e5m2_to_f64(bits: u8) -> f64 {
    let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((bits >> 2) & 0x1f);
    let mantissa = f64::from(bits & 0x03);
    match exponent {
        0x1f if mantissa == 0.0 => sign * f64::INFINITY,
        0x1f => f64::NAN,
        0 => sign * mantissa / 4.0 * 2f64.powi(-14),
        _ => sign * (1.0 + mantissa / 4.0) * 2f64.powi(exponent - 15),
    }
}

/// Nearest FP8 pattern (ties to even) by search over the 128 magnitudes: exact and simple,
/// used only by `--cast` and ULP distances of FP8 data, never in the per-element hot loop
/// of same-dtype comparisons except through [`DType::ordinal`].
fn nearest_fp8(value: f64, decode: fn(u8) -> f64, saturate_to: u8, nan: u8) -> u8 {
    if value.is_nan() {
        return nan;
    }
    let sign = if value.is_sign_negative() { 0x80 } else { 0 };
    let magnitude = value.abs();
    let mut best = 0u8;
    let mut best_error = f64::INFINITY;
    for bits in 0..=saturate_to {
        let candidate = decode(bits);
        let error = (candidate - magnitude).abs();
        // Ties go to the even pattern (lowest mantissa bit clear).
        if error < best_error || (error == best_error && bits & 1 == 0) {
            best = bits;
            best_error = error;
        }
    }
    sign | best
}

/// `f64` to the nearest FP8 E4M3FN pattern; beyond the largest finite value (448) saturates.
pub fn f64_to_e4m3fn(value: f64) -> u8 {
    nearest_fp8(value, e4m3fn_to_f64, 0x7e, 0x7f)
}

/// `f64` to the nearest FP8 E5M2 pattern; infinities stay infinite, large finite values
/// saturate at 57344.
pub fn f64_to_e5m2(value: f64) -> u8 {
    if value.is_infinite() {
        return if value > 0.0 { 0x7c } else { 0xfc };
    }
    nearest_fp8(value, e5m2_to_f64, 0x7b, 0x7f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp8_known_values() {
        assert_eq!(e4m3fn_to_f64(0x7e), 448.0);
        assert!(e4m3fn_to_f64(0x7f).is_nan());
        assert_eq!(e4m3fn_to_f64(0x01), 2f64.powi(-9));
        assert_eq!(e5m2_to_f64(0x7b), 57344.0);
        assert_eq!(e5m2_to_f64(0x7c), f64::INFINITY);
        assert_eq!(e5m2_to_f64(0x01), 2f64.powi(-16));
        for bits in 0..=255u8 {
            let v = e4m3fn_to_f64(bits);
            if !v.is_nan() && v != 0.0 {
                assert_eq!(f64_to_e4m3fn(v), bits, "e4m3fn {bits:#x}");
            }
            let v = e5m2_to_f64(bits);
            if !v.is_nan() && v != 0.0 {
                assert_eq!(f64_to_e5m2(v), bits, "e5m2 {bits:#x}");
            }
        }
    }

    #[test]
    fn ordinals_count_representable_values() {
        let one = DType::Float32.ordinal(1.0).unwrap();
        let next = DType::Float32.ordinal(f64::from(f32::from_bits(1.0f32.to_bits() + 1)));
        assert_eq!(next.unwrap() - one, 1);
        assert_eq!(DType::Float32.ordinal(0.0), DType::Float32.ordinal(-0.0));
        let below_zero = DType::BFloat16.ordinal(-f64::from(bf16::from_bits(1).to_f32()));
        assert_eq!(below_zero, Some(-1));
        assert_eq!(DType::Int32.ordinal(3.0), None);
    }
}
