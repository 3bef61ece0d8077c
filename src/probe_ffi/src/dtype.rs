//! The dtypes a `dp_tensor` may hold: their codes, torch names, sizes, safetensors codes, and
//! the exact decoding of one element to f64.
//!
//! Every value of every dtype here is exactly representable in f64, so decoding loses nothing:
//! float16 and bfloat16 through the `half` crate, float8 through 256-entry tables built from the
//! formats' definitions (e4m3fn: 4 exponent bits, bias 7, no infinities, NaN at S.1111.111;
//! e5m2: the high byte of an IEEE float16).

use std::sync::OnceLock;

/// One element type; the discriminant is the header's `DP_*` code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Dtype {
    /// `DP_FLOAT32`.
    Float32 = 0,
    /// `DP_FLOAT16`.
    Float16 = 1,
    /// `DP_BFLOAT16`.
    Bfloat16 = 2,
    /// `DP_FLOAT64`.
    Float64 = 3,
    /// `DP_FLOAT8_E4M3FN`.
    Float8E4m3fn = 4,
    /// `DP_FLOAT8_E5M2`.
    Float8E5m2 = 5,
    /// `DP_INT8`.
    Int8 = 6,
    /// `DP_INT16`.
    Int16 = 7,
    /// `DP_INT32`.
    Int32 = 8,
    /// `DP_INT64`.
    Int64 = 9,
    /// `DP_UINT8`.
    Uint8 = 10,
    /// `DP_BOOL`: one byte, 0 false, anything else true.
    Bool = 11,
}

/// How many dtypes there are (`DP_BOOL + 1`).
pub const DTYPE_COUNT: i64 = 12;

impl Dtype {
    /// The dtype with header code `code`, or `None` for an unknown code.
    pub fn from_code(code: i32) -> Option<Dtype> {
        use Dtype::*;
        [
            Float32,
            Float16,
            Bfloat16,
            Float64,
            Float8E4m3fn,
            Float8E5m2,
            Int8,
            Int16,
            Int32,
            Int64,
            Uint8,
            Bool,
        ]
        .into_iter()
        .find(|d| *d as i32 == code)
    }

    /// torch's name without `torch.` (the manifest's `dtype`).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Float32 => "float32",
            Dtype::Float16 => "float16",
            Dtype::Bfloat16 => "bfloat16",
            Dtype::Float64 => "float64",
            Dtype::Float8E4m3fn => "float8_e4m3fn",
            Dtype::Float8E5m2 => "float8_e5m2",
            Dtype::Int8 => "int8",
            Dtype::Int16 => "int16",
            Dtype::Int32 => "int32",
            Dtype::Int64 => "int64",
            Dtype::Uint8 => "uint8",
            Dtype::Bool => "bool",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::Float64 | Dtype::Int64 => 8,
            Dtype::Float32 | Dtype::Int32 => 4,
            Dtype::Float16 | Dtype::Bfloat16 | Dtype::Int16 => 2,
            Dtype::Float8E4m3fn | Dtype::Float8E5m2 | Dtype::Int8 | Dtype::Uint8 | Dtype::Bool => 1,
        }
    }

    /// The safetensors dtype code (huggingface/safetensors, docs: "dtype").
    pub fn safetensors_code(self) -> &'static str {
        match self {
            Dtype::Float32 => "F32",
            Dtype::Float16 => "F16",
            Dtype::Bfloat16 => "BF16",
            Dtype::Float64 => "F64",
            Dtype::Float8E4m3fn => "F8_E4M3",
            Dtype::Float8E5m2 => "F8_E5M2",
            Dtype::Int8 => "I8",
            Dtype::Int16 => "I16",
            Dtype::Int32 => "I32",
            Dtype::Int64 => "I64",
            Dtype::Uint8 => "U8",
            Dtype::Bool => "BOOL",
        }
    }

    /// True for the floating dtypes, whose NaN and infinities are counted; integers and bools
    /// are summarised as their float values with counts 0 (docs/manifest.md, "stats").
    pub fn is_floating(self) -> bool {
        matches!(
            self,
            Dtype::Float32
                | Dtype::Float16
                | Dtype::Bfloat16
                | Dtype::Float64
                | Dtype::Float8E4m3fn
                | Dtype::Float8E5m2
        )
    }
}

/// Reads one element from little-endian bytes as an exact f64. `bytes` holds at least
/// [`Element::SIZE`] bytes.
pub trait Element {
    /// Bytes per element.
    const SIZE: usize;
    /// The narrowest float type that holds every value of the dtype exactly (f32 for the
    /// floats of 32 bits and fewer and the integers of 16 bits and fewer, else f64): min and
    /// max compare in it, twice as many lanes per vector as in f64, with the same answer.
    type Narrow: Narrow;
    /// The element at the start of `bytes`, exactly, as [`Element::Narrow`].
    fn load_narrow(bytes: &[u8]) -> Self::Narrow;
    /// The element at the start of `bytes`, exactly.
    #[inline(always)]
    fn load(bytes: &[u8]) -> f64 {
        Self::load_narrow(bytes).wide()
    }
}

/// f32 or f64: an [`Element::Narrow`].
pub trait Narrow: Copy + PartialOrd {
    /// +∞.
    const INFINITY: Self;
    /// −∞.
    const NEG_INFINITY: Self;
    /// The value as f64 (exact).
    fn wide(self) -> f64;
}

impl Narrow for f32 {
    const INFINITY: f32 = f32::INFINITY;
    const NEG_INFINITY: f32 = f32::NEG_INFINITY;
    #[inline(always)]
    fn wide(self) -> f64 {
        f64::from(self)
    }
}

impl Narrow for f64 {
    const INFINITY: f64 = f64::INFINITY;
    const NEG_INFINITY: f64 = f64::NEG_INFINITY;
    #[inline(always)]
    fn wide(self) -> f64 {
        self
    }
}

macro_rules! element {
    ($name:ident, $size:expr, $narrow:ty, |$b:ident| $body:expr) => {
        /// A decoder of one dtype (see [`Element`]).
        pub struct $name;
        impl Element for $name {
            const SIZE: usize = $size;
            type Narrow = $narrow;
            #[inline(always)]
            fn load_narrow(bytes: &[u8]) -> $narrow {
                let $b: [u8; $size] = bytes[..$size].try_into().expect("sized");
                $body
            }
        }
    };
}

element!(F32, 4, f32, |b| f32::from_le_bytes(b));
element!(F64, 8, f64, |b| f64::from_le_bytes(b));
element!(F16, 2, f32, |b| half::f16::from_bits(u16::from_le_bytes(b))
    .to_f32());
// bfloat16 is the upper half of a float32, NaN payloads included: a shift decodes it exactly.
element!(BF16, 2, f32, |b| f32::from_bits(
    u32::from(u16::from_le_bytes(b)) << 16
));
element!(E4m3fn, 1, f32, |b| f8_tables().e4m3fn[usize::from(b[0])]);
element!(E5m2, 1, f32, |b| f8_tables().e5m2[usize::from(b[0])]);
element!(I8, 1, f32, |b| f32::from(i8::from_le_bytes(b)));
element!(I16, 2, f32, |b| f32::from(i16::from_le_bytes(b)));
element!(I32, 4, f64, |b| f64::from(i32::from_le_bytes(b)));
// int64 values beyond 2^53 round to the nearest f64, as torch's `.to(float64)` does.
element!(I64, 8, f64, |b| i64::from_le_bytes(b) as f64);
element!(U8, 1, f32, |b| f32::from(b[0]));
element!(Bool, 1, f32, |b| if b[0] != 0 { 1.0 } else { 0.0 });

/// The float8 decoding tables, built once.
pub struct F8Tables {
    /// float8_e4m3fn byte → value.
    pub e4m3fn: [f32; 256],
    /// float8_e5m2 byte → value.
    pub e5m2: [f32; 256],
}

/// The tables of [`E4m3fn`] and [`E5m2`].
pub fn f8_tables() -> &'static F8Tables {
    static TABLES: OnceLock<F8Tables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let mut tables = F8Tables {
            e4m3fn: [0.0; 256],
            e5m2: [0.0; 256],
        };
        for byte in 0..=255u8 {
            tables.e4m3fn[usize::from(byte)] = e4m3fn_value(byte);
            // e5m2 is float16 with the low 8 mantissa bits dropped: same sign, exponent, bias.
            tables.e5m2[usize::from(byte)] = half::f16::from_bits(u16::from(byte) << 8).to_f32();
        }
        tables
    })
}

/// float8_e4m3fn (OCP 8-bit floating point, "E4M3"; torch.float8_e4m3fn): sign, 4 exponent
/// bits with bias 7, 3 mantissa bits; exponent 0 is subnormal (m/8 · 2^-6); S.1111.111 is NaN;
/// there are no infinities.
fn e4m3fn_value(byte: u8) -> f32 {
    let sign = if byte & 0x80 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((byte >> 3) & 0x0f);
    let mantissa = f32::from(byte & 0x07);
    if exponent == 0x0f && byte & 0x07 == 0x07 {
        return f32::NAN;
    }
    let magnitude = if exponent == 0 {
        mantissa / 8.0 * 2f32.powi(-6)
    } else {
        (1.0 + mantissa / 8.0) * 2f32.powi(exponent - 7)
    };
    sign * magnitude
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_refused() {
        for code in 0..DTYPE_COUNT as i32 {
            assert_eq!(Dtype::from_code(code).map(|d| d as i32), Some(code));
        }
        assert_eq!(Dtype::from_code(-1), None);
        assert_eq!(Dtype::from_code(DTYPE_COUNT as i32), None);
    }

    #[test]
    fn e4m3fn_has_its_known_values() {
        let t = f8_tables();
        assert_eq!(t.e4m3fn[0x7e], 448.0); // the largest finite value
        assert_eq!(t.e4m3fn[0xfe], -448.0);
        assert_eq!(t.e4m3fn[0x38], 1.0);
        assert_eq!(t.e4m3fn[0x01], 2f32.powi(-9)); // the smallest subnormal
        assert_eq!(t.e4m3fn[0x08], 2f32.powi(-6)); // the smallest normal
        assert!(t.e4m3fn[0x7f].is_nan() && t.e4m3fn[0xff].is_nan());
        assert_eq!(t.e4m3fn.iter().filter(|v| v.is_nan()).count(), 2);
        assert!(t.e4m3fn.iter().all(|v| !v.is_infinite()));
    }

    #[test]
    fn e5m2_has_its_known_values() {
        let t = f8_tables();
        assert_eq!(t.e5m2[0x7b], 57344.0); // the largest finite value
        assert_eq!(t.e5m2[0x3c], 1.0);
        assert_eq!(t.e5m2[0x7c], f32::INFINITY);
        assert_eq!(t.e5m2[0xfc], f32::NEG_INFINITY);
        assert!(t.e5m2[0x7d].is_nan());
        assert_eq!(t.e5m2[0x01], 2f32.powi(-16)); // the smallest subnormal
        assert_eq!(t.e5m2.iter().filter(|v| v.is_nan()).count(), 6);
    }

    #[test]
    fn half_types_decode_exactly() {
        assert_eq!(BF16::load(&0x3f80u16.to_le_bytes()), 1.0);
        assert_eq!(BF16::load(&0x7f7fu16.to_le_bytes()), 3.3895313892515355e38);
        assert_eq!(F16::load(&0x7bffu16.to_le_bytes()), 65504.0);
        assert_eq!(F16::load(&0x0001u16.to_le_bytes()), 2f64.powi(-24));
        assert!(F16::load(&0x7e00u16.to_le_bytes()).is_nan());
        assert_eq!(I64::load(&(-5i64).to_le_bytes()), -5.0);
        assert_eq!(Bool::load(&[2]), 1.0);
    }
}
