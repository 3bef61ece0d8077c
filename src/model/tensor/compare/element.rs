//! Reading one element of a compared tensor: its value as `f64` and its ULP ordinal, for
//! each storage format the kernels read (float32, float64, bfloat16, float16, any dtype through
//! [`DType::decode`], and a `--cast` rounding), and the storage formats the SIMD kernel packs.

use half::f16;

use crate::model::tensor::read::DType;

/// The storage formats of the SIMD kernel ([`simd`](super::simd)).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Packed {
    /// float32: the bits as they are.
    F32,
    /// bfloat16: the top half of a float32.
    BF16,
}

/// Reads one element: its value as `f64` and its ULP ordinal in the compared dtype.
pub(super) trait ElementReader: Copy + Send + Sync {
    /// Bytes per element in storage.
    fn size(self) -> usize;
    /// The value of the element whose bytes start `bytes`.
    fn value(self, bytes: &[u8]) -> f64;
    /// The ULP ordinal ([`DType::ordinal`]) of that element, `None` for NaN or non-floats.
    fn ordinal(self, bytes: &[u8], value: f64) -> Option<i64>;
    /// `|a - b|` computed exactly from the elements' bytes where `f64` values are not exact
    /// (int64 beyond 2^53), then rounded once; `None`: `|a - b|` of the values is exact enough.
    #[inline(always)]
    fn exact_abs_diff(self, _a: &[u8], _b: &[u8]) -> Option<f64> {
        None
    }
    /// The storage format of the SIMD kernel ([`simd`](super::simd)) when this reader is a
    /// plain float32 or bfloat16 reader; `None` for the others.
    #[inline(always)]
    fn packed(self) -> Option<Packed> {
        None
    }
}

/// Sign-magnitude bit pattern as a signed integer: the ULP ordinal of a float's bits.
#[inline(always)]
fn ordinal_of_bits(bits: u64, sign_bit: u64) -> i64 {
    let magnitude = (bits & (sign_bit - 1)) as i64;
    if bits & sign_bit != 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// float32 storage.
#[derive(Clone, Copy)]
pub(super) struct F32;
impl ElementReader for F32 {
    #[inline(always)]
    fn size(self) -> usize {
        4
    }
    #[inline(always)]
    fn value(self, bytes: &[u8]) -> f64 {
        f64::from(f32::from_le_bytes(bytes[..4].try_into().unwrap()))
    }
    #[inline(always)]
    fn ordinal(self, bytes: &[u8], value: f64) -> Option<i64> {
        let bits = u32::from_le_bytes(bytes[..4].try_into().unwrap());
        (!value.is_nan()).then(|| ordinal_of_bits(u64::from(bits), 1 << 31))
    }
    #[inline(always)]
    fn packed(self) -> Option<Packed> {
        Some(Packed::F32)
    }
}

/// float64 storage.
#[derive(Clone, Copy)]
pub(super) struct F64;
impl ElementReader for F64 {
    #[inline(always)]
    fn size(self) -> usize {
        8
    }
    #[inline(always)]
    fn value(self, bytes: &[u8]) -> f64 {
        f64::from_le_bytes(bytes[..8].try_into().unwrap())
    }
    #[inline(always)]
    fn ordinal(self, bytes: &[u8], value: f64) -> Option<i64> {
        let bits = u64::from_le_bytes(bytes[..8].try_into().unwrap());
        (!value.is_nan()).then(|| ordinal_of_bits(bits, 1 << 63))
    }
}

/// bfloat16 storage: the top half of a float32.
#[derive(Clone, Copy)]
pub(super) struct BF16;
impl ElementReader for BF16 {
    #[inline(always)]
    fn size(self) -> usize {
        2
    }
    #[inline(always)]
    fn value(self, bytes: &[u8]) -> f64 {
        let bits = u16::from_le_bytes([bytes[0], bytes[1]]);
        f64::from(f32::from_bits(u32::from(bits) << 16))
    }
    #[inline(always)]
    fn ordinal(self, bytes: &[u8], value: f64) -> Option<i64> {
        let bits = u16::from_le_bytes([bytes[0], bytes[1]]);
        (!value.is_nan()).then(|| ordinal_of_bits(u64::from(bits), 1 << 15))
    }
    #[inline(always)]
    fn packed(self) -> Option<Packed> {
        Some(Packed::BF16)
    }
}

/// float16 storage.
#[derive(Clone, Copy)]
pub(super) struct F16;
impl ElementReader for F16 {
    #[inline(always)]
    fn size(self) -> usize {
        2
    }
    #[inline(always)]
    fn value(self, bytes: &[u8]) -> f64 {
        f64::from(f16::from_bits(u16::from_le_bytes([bytes[0], bytes[1]])).to_f32())
    }
    #[inline(always)]
    fn ordinal(self, bytes: &[u8], value: f64) -> Option<i64> {
        let bits = u16::from_le_bytes([bytes[0], bytes[1]]);
        (!value.is_nan()).then(|| ordinal_of_bits(u64::from(bits), 1 << 15))
    }
}

/// Any dtype through [`DType::decode`]: integers, bool, FP8.
#[derive(Clone, Copy)]
pub(super) struct Decoded(pub DType);
impl ElementReader for Decoded {
    fn size(self) -> usize {
        self.0.size()
    }
    fn value(self, bytes: &[u8]) -> f64 {
        self.0.decode(bytes)
    }
    fn ordinal(self, bytes: &[u8], value: f64) -> Option<i64> {
        match self.0 {
            DType::Float8E4M3Fn | DType::Float8E5M2 if !value.is_nan() => {
                Some(ordinal_of_bits(u64::from(bytes[0]), 1 << 7))
            }
            _ => None,
        }
    }
    fn exact_abs_diff(self, a: &[u8], b: &[u8]) -> Option<f64> {
        (self.0 == DType::Int64).then(|| {
            let a = i64::from_le_bytes(a[..8].try_into().unwrap());
            let b = i64::from_le_bytes(b[..8].try_into().unwrap());
            (i128::from(a) - i128::from(b)).unsigned_abs() as f64
        })
    }
}

/// A value of dtype `from`, rounded to dtype `to` (`--cast`); ULP distances are counted in
/// dtype `ulp` (the coarser side of a precision-change pair, else `to`).
#[derive(Clone, Copy)]
pub(super) struct Cast {
    /// The dtype as stored.
    pub from: DType,
    /// The dtype values are rounded to.
    pub to: DType,
    /// The dtype ULP distances are counted in.
    pub ulp: DType,
}
impl ElementReader for Cast {
    fn size(self) -> usize {
        self.from.size()
    }
    fn value(self, bytes: &[u8]) -> f64 {
        self.to.round(self.from.decode(bytes))
    }
    fn ordinal(self, _bytes: &[u8], value: f64) -> Option<i64> {
        if self.ulp == self.to {
            self.to.ordinal(value)
        } else {
            self.ulp.ordinal(self.ulp.round(value))
        }
    }
}
