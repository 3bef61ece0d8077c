//! The per-element work of a tensor comparison, for one chunk of flat indices.
//!
//! Contiguous chunks of finite values take a lane-parallel path: eight independent sets of
//! running sums, maxima and histogram rows, so the additions do not wait on each other and
//! the compiler can vectorize them. Anything else (non-finite values, strided views) takes
//! the scalar path. Both produce the same counts, firsts and maxima; sums differ only in
//! rounding order. On x86-64 with AVX2, contiguous float32 and bfloat16 pairs take the
//! hand-vectorized kernel of [`simd`](super::simd) instead, with the same results.

use std::ops::Range;
use std::sync::OnceLock;

use half::f16;

use super::simd::Packed;
use crate::model::tensor::read::{DType, TensorView};

/// Reads one element: its value as `f64` and its ULP ordinal in the compared dtype.
pub(super) trait Reader: Copy + Send + Sync {
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
impl Reader for F32 {
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
impl Reader for F64 {
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
impl Reader for BF16 {
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
impl Reader for F16 {
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
impl Reader for Decoded {
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
    pub from: DType,
    pub to: DType,
    pub ulp: DType,
}
impl Reader for Cast {
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

/// The thresholds of closeness and what is measured, fixed for one comparison.
#[derive(Clone, Copy)]
pub(super) struct Rule {
    pub atol: f64,
    pub rtol: f64,
    pub equal_nan: bool,
    /// Measure ULP distances (the compared dtype is floating).
    pub ulp: bool,
}

/// The histogram's lowest decade: normal `f64` differences start at 2.2e-308; subnormal
/// differences (only possible between float64 tensors) are counted here too.
pub(super) const MIN_DECADE: i32 = -308;
/// The highest decade of a finite `f64`.
pub(super) const MAX_DECADE: i32 = 308;
/// Histogram slots: slot 0 counts exact zeros, slot `e - MIN_DECADE + 1` decade `e`.
const SLOTS: usize = (MAX_DECADE - MIN_DECADE + 2) as usize;
/// Independent histogram rows, so consecutive increments of one slot do not wait on each
/// other (store-to-load forwarding).
const ROWS: usize = 4;
/// Length of the interleaved histogram array: `SLOTS * ROWS` rounded up to a power of two.
const HISTOGRAM: usize = (SLOTS * ROWS).next_power_of_two();

/// For each `f64` exponent field: the slot of the octave's lower end and the power of ten
/// inside the octave (values at or above it belong to the next slot; +inf when none).
pub(super) fn octaves() -> &'static [(u16, f64); 2048] {
    static TABLE: OnceLock<[(u16, f64); 2048]> = OnceLock::new();
    TABLE.get_or_init(|| {
        // 10^e as the nearest f64 — the boundary between decades e-1 and e.
        let power = |e: i32| format!("1e{e}").parse::<f64>().unwrap_or(f64::INFINITY);
        let slot = |e: i32| (e.clamp(MIN_DECADE, MAX_DECADE) - MIN_DECADE + 1) as u16;
        let mut table = [(0u16, f64::INFINITY); 2048];
        // Exponent field 0: zero (slot 0) or a subnormal (at or above the smallest one).
        table[0] = (0, f64::from_bits(1));
        // Field 2047: the difference of two finite float64 values overflowed to +inf; it is
        // larger than any finite value, so it joins the top decade.
        table[2047] = (slot(MAX_DECADE), f64::NAN); // `d >= NaN` is false: no next slot
        let mut e = MIN_DECADE;
        for (field, entry) in table.iter_mut().enumerate().take(2047).skip(1) {
            let low = f64::from_bits((field as u64) << 52);
            let high = low * 2.0;
            while power(e + 1) <= low {
                e += 1;
            }
            let next = power(e + 1);
            *entry = if next < high {
                (slot(e), next)
            } else {
                (slot(e), f64::INFINITY)
            };
        }
        table
    })
}

/// The histogram slot of a finite difference `d >= 0`.
#[inline(always)]
fn slot(d: f64, octaves: &[(u16, f64); 2048]) -> usize {
    let (low, boundary) = octaves[(d.to_bits() >> 52) as usize & 0x7ff];
    usize::from(low) + usize::from(d >= boundary)
}

/// Class of a value for the position-agreement check.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Finite,
    Nan,
    PosInf,
    NegInf,
}

fn class(v: f64) -> Class {
    if v.is_nan() {
        Class::Nan
    } else if v == f64::INFINITY {
        Class::PosInf
    } else if v == f64::NEG_INFINITY {
        Class::NegInf
    } else {
        Class::Finite
    }
}

/// Elements per lane group of the fast path.
const LANES: usize = 4;

/// Running sums and firsts over a contiguous range of flat indices.
pub(super) struct Accumulator {
    pub finite_pairs: u64,
    pub sum_abs: f64,
    pub dot: f64,
    pub norm_a: f64,
    pub norm_b: f64,
    pub norm_diff: f64,
    pub max_abs: f64,
    /// (flat index, a, b) of the first position attaining `max_abs`.
    pub max_abs_at: Option<(usize, f64, f64)>,
    pub mismatches: u64,
    pub first_mismatch: Option<(usize, f64, f64)>,
    /// NaN, NaN, +inf, +inf, -inf, -inf counts of A and B.
    pub counts: [u64; 6],
    pub first_disagreement: Option<(usize, f64, f64)>,
    pub max_ulp: u64,
    pub max_ulp_at: Option<(usize, f64, f64)>,
    /// Positions whose ULP distance was measured (neither value NaN).
    pub ulp_pairs: u64,
    pub nonfinite_pairs: u64,
    /// `ROWS` interleaved histograms: slot s of row r at `s * ROWS + r` (padded to a power
    /// of two so a masked index needs no bounds check).
    histogram: Box<[u64; HISTOGRAM]>,
    octaves: &'static [(u16, f64); 2048],
}

impl Accumulator {
    pub fn new() -> Self {
        Accumulator {
            finite_pairs: 0,
            sum_abs: 0.0,
            dot: 0.0,
            norm_a: 0.0,
            norm_b: 0.0,
            norm_diff: 0.0,
            max_abs: -1.0,
            max_abs_at: None,
            mismatches: 0,
            first_mismatch: None,
            counts: [0; 6],
            first_disagreement: None,
            max_ulp: 0,
            max_ulp_at: None,
            ulp_pairs: 0,
            nonfinite_pairs: 0,
            histogram: Box::new([0; HISTOGRAM]),
            octaves: octaves(),
        }
    }

    /// Finite pairs with `a == b`.
    pub fn zero(&self) -> u64 {
        self.histogram[..ROWS].iter().sum()
    }

    /// `(decade, count)` for each decade holding any finite pair, ascending.
    pub fn decade_counts(&self) -> impl Iterator<Item = (i32, u64)> + '_ {
        self.histogram[..SLOTS * ROWS]
            .chunks_exact(ROWS)
            .enumerate()
            .skip(1)
            .map(|(s, rows)| (s as i32 - 1 + MIN_DECADE, rows.iter().sum::<u64>()))
            .filter(|(_, count)| *count > 0)
    }

    /// One position, any values (the scalar path).
    #[inline(always)]
    pub(super) fn step<RA: Reader, RB: Reader>(
        &mut self,
        flat: usize,
        bytes_a: &[u8],
        bytes_b: &[u8],
        rule: Rule,
        ra: RA,
        rb: RB,
    ) {
        let a = ra.value(bytes_a);
        let b = rb.value(bytes_b);
        if a.is_finite() && b.is_finite() {
            let d = ra
                .exact_abs_diff(bytes_a, bytes_b)
                .unwrap_or_else(|| (a - b).abs());
            self.finite_pairs += 1;
            self.sum_abs += d;
            self.dot += a * b;
            self.norm_a += a * a;
            self.norm_b += b * b;
            self.norm_diff += d * d;
            if d > self.max_abs {
                self.max_abs = d;
                self.max_abs_at = Some((flat, a, b));
            }
            self.histogram[(slot(d, self.octaves) * ROWS) & (HISTOGRAM - 1)] += 1;
            if d > rule.atol + rule.rtol * b.abs() {
                self.mismatch(flat, a, b);
            }
        } else {
            self.nonfinite(flat, a, b, rule);
        }
        if rule.ulp {
            if let (Some(oa), Some(ob)) = (ra.ordinal(bytes_a, a), rb.ordinal(bytes_b, b)) {
                let ulp = oa.abs_diff(ob);
                self.ulp_pairs += 1;
                // The first position attains the maximum even when it is 0.
                if ulp > self.max_ulp || self.max_ulp_at.is_none() {
                    self.max_ulp = ulp;
                    self.max_ulp_at = Some((flat, a, b));
                }
            }
        }
    }

    #[inline(always)]
    pub(super) fn mismatch(&mut self, flat: usize, a: f64, b: f64) {
        self.mismatches += 1;
        if self.first_mismatch.is_none() {
            self.first_mismatch = Some((flat, a, b));
        }
    }

    #[cold]
    fn nonfinite(&mut self, flat: usize, a: f64, b: f64, rule: Rule) {
        self.nonfinite_pairs += 1;
        let (ca, cb) = (class(a), class(b));
        for (side, c) in [(0, ca), (1, cb)] {
            match c {
                Class::Nan => self.counts[side] += 1,
                Class::PosInf => self.counts[2 + side] += 1,
                Class::NegInf => self.counts[4 + side] += 1,
                Class::Finite => {}
            }
        }
        if ca != cb && self.first_disagreement.is_none() {
            self.first_disagreement = Some((flat, a, b));
        }
        let close = a == b || (rule.equal_nan && ca == Class::Nan && cb == Class::Nan);
        if !close {
            self.mismatch(flat, a, b);
        }
    }

    /// Counts `count` finite pairs in histogram slot `slot` (0: exact zeros, `s`: decade
    /// `s - 1 + MIN_DECADE`).
    pub(super) fn add_to_slot(&mut self, slot: usize, count: u64) {
        self.histogram[(slot * ROWS) & (HISTOGRAM - 1)] += count;
    }

    /// Offers a lane's largest `|a - b|`, first attained at flat index `at`: it replaces the
    /// current maximum when larger, or equal and earlier (the first position attaining the
    /// maximum, as the scalar path finds it). `values` gives both values at `at`.
    #[inline]
    pub(super) fn offer_max_abs(&mut self, d: f64, at: usize, values: impl FnOnce() -> (f64, f64)) {
        let current = self.max_abs_at.map_or(usize::MAX, |m| m.0);
        if d > self.max_abs || (d == self.max_abs && at < current) {
            let (va, vb) = values();
            self.max_abs = d;
            self.max_abs_at = Some((at, va, vb));
        }
    }

    /// Offers a lane's largest ULP distance, first attained at flat index `at` (the rule of
    /// [`Accumulator::offer_max_abs`]).
    #[inline]
    pub(super) fn offer_max_ulp(
        &mut self,
        ulp: u64,
        at: usize,
        values: impl FnOnce() -> (f64, f64),
    ) {
        let current = self.max_ulp_at.map_or(usize::MAX, |m| m.0);
        if ulp > self.max_ulp || (ulp == self.max_ulp && at < current) {
            let (va, vb) = values();
            self.max_ulp = ulp;
            self.max_ulp_at = Some((at, va, vb));
        }
    }

    /// Adds `later`, the accumulator of positions after all of this one's.
    pub fn merge(&mut self, later: Accumulator) {
        self.finite_pairs += later.finite_pairs;
        self.sum_abs += later.sum_abs;
        self.dot += later.dot;
        self.norm_a += later.norm_a;
        self.norm_b += later.norm_b;
        self.norm_diff += later.norm_diff;
        if later.max_abs > self.max_abs {
            self.max_abs = later.max_abs;
            self.max_abs_at = later.max_abs_at;
        }
        self.mismatches += later.mismatches;
        self.first_mismatch = self.first_mismatch.or(later.first_mismatch);
        for (mine, theirs) in self.counts.iter_mut().zip(later.counts) {
            *mine += theirs;
        }
        self.first_disagreement = self.first_disagreement.or(later.first_disagreement);
        if later.max_ulp_at.is_some() && (later.max_ulp > self.max_ulp || self.max_ulp_at.is_none())
        {
            self.max_ulp = later.max_ulp;
            self.max_ulp_at = later.max_ulp_at;
        }
        self.ulp_pairs += later.ulp_pairs;
        self.nonfinite_pairs += later.nonfinite_pairs;
        for (mine, theirs) in self.histogram.iter_mut().zip(later.histogram.iter()) {
            *mine += theirs;
        }
    }
}

/// The lane-parallel state of the fast path: per-lane sums and maxima, folded into an
/// [`Accumulator`] when the chunk ends.
struct Lanes {
    sum_abs: [f64; LANES],
    dot: [f64; LANES],
    norm_a: [f64; LANES],
    norm_b: [f64; LANES],
    norm_diff: [f64; LANES],
    max_abs: [f64; LANES],
    max_abs_at: [usize; LANES],
    max_ulp: [u64; LANES],
    max_ulp_at: [usize; LANES],
    finite_pairs: u64,
}

impl Lanes {
    fn new() -> Self {
        Lanes {
            sum_abs: [0.0; LANES],
            dot: [0.0; LANES],
            norm_a: [0.0; LANES],
            norm_b: [0.0; LANES],
            norm_diff: [0.0; LANES],
            max_abs: [-1.0; LANES],
            max_abs_at: [usize::MAX; LANES],
            max_ulp: [0; LANES],
            max_ulp_at: [usize::MAX; LANES],
            finite_pairs: 0,
        }
    }
}

/// Accumulates the flat indices `range` of both views.
///
/// On x86-64 with AVX2 the same code is compiled a second time for AVX2 (twice the vector
/// width for the lane arithmetic) and chosen at run time; results are identical, since no
/// fused multiply-add is enabled.
pub(super) fn chunk<RA: Reader, RB: Reader>(
    a: &TensorView,
    b: &TensorView,
    range: Range<usize>,
    rule: Rule,
    ra: RA,
    rb: RB,
) -> Accumulator {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        let packed = ra.packed().filter(|&p| rb.packed() == Some(p) && rule.ulp);
        if let Some(packed) = packed.filter(|_| a.is_contiguous() && b.is_contiguous()) {
            let mut acc = Accumulator::new();
            let (bytes_a, bytes_b) = contiguous_bytes(a, b, &range, ra, rb);
            // SAFETY: the CPU supports AVX2, checked just above.
            unsafe {
                super::simd::contiguous_avx2(
                    &mut acc,
                    range.start,
                    bytes_a,
                    bytes_b,
                    rule,
                    ra,
                    rb,
                    packed,
                )
            };
            return acc;
        }
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { chunk_avx2(a, b, range, rule, ra, rb) };
    }
    chunk_portable(a, b, range, rule, ra, rb)
}

/// The storage bytes of the flat indices `range` of two contiguous views.
#[inline(always)]
fn contiguous_bytes<'v, RA: Reader, RB: Reader>(
    a: &'v TensorView,
    b: &'v TensorView,
    range: &Range<usize>,
    ra: RA,
    rb: RB,
) -> (&'v [u8], &'v [u8]) {
    let (sa, sb) = (a.storage(), b.storage());
    let (oa, ob) = (a.storage_offset(), b.storage_offset());
    (
        &sa[(oa + range.start) * ra.size()..(oa + range.end) * ra.size()],
        &sb[(ob + range.start) * rb.size()..(ob + range.end) * rb.size()],
    )
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn chunk_avx2<RA: Reader, RB: Reader>(
    a: &TensorView,
    b: &TensorView,
    range: Range<usize>,
    rule: Rule,
    ra: RA,
    rb: RB,
) -> Accumulator {
    chunk_portable(a, b, range, rule, ra, rb)
}

#[inline(always)]
pub(super) fn chunk_portable<RA: Reader, RB: Reader>(
    a: &TensorView,
    b: &TensorView,
    range: Range<usize>,
    rule: Rule,
    ra: RA,
    rb: RB,
) -> Accumulator {
    let mut acc = Accumulator::new();
    let (sa, sb) = (a.storage(), b.storage());
    if a.is_contiguous() && b.is_contiguous() {
        let (bytes_a, bytes_b) = contiguous_bytes(a, b, &range, ra, rb);
        contiguous(&mut acc, range.start, bytes_a, bytes_b, rule, ra, rb);
    } else {
        let mut wa = Walk::new(a, range.start);
        let mut wb = Walk::new(b, range.start);
        for flat in range {
            let ia = wa.next_index() * ra.size();
            let ib = wb.next_index() * rb.size();
            acc.step(flat, &sa[ia..], &sb[ib..], rule, ra, rb);
        }
    }
    acc
}

/// Storage order is logical order: groups of [`LANES`] finite pairs go through the lanes,
/// any group with a non-finite value (and the tail) through [`Accumulator::step`].
#[inline(always)]
fn contiguous<RA: Reader, RB: Reader>(
    acc: &mut Accumulator,
    start: usize,
    bytes_a: &[u8],
    bytes_b: &[u8],
    rule: Rule,
    ra: RA,
    rb: RB,
) {
    let (wa, wb) = (ra.size(), rb.size());
    let mut lanes = Lanes::new();
    let groups_a = bytes_a.chunks_exact(wa * LANES);
    let groups_b = bytes_b.chunks_exact(wb * LANES);
    let (tail_a, tail_b) = (groups_a.remainder(), groups_b.remainder());
    let octaves = acc.octaves;
    for (g, (ga, gb)) in groups_a.zip(groups_b).enumerate() {
        let flat = start + g * LANES;
        let mut va = [0.0; LANES];
        let mut vb = [0.0; LANES];
        let mut finite = true;
        for k in 0..LANES {
            va[k] = ra.value(&ga[k * wa..]);
            vb[k] = rb.value(&gb[k * wb..]);
            finite &= va[k].is_finite() & vb[k].is_finite();
        }
        if !finite {
            for k in 0..LANES {
                acc.step(flat + k, &ga[k * wa..], &gb[k * wb..], rule, ra, rb);
            }
            continue;
        }
        let mut d = [0.0; LANES];
        let mut far = false;
        for k in 0..LANES {
            d[k] = (va[k] - vb[k]).abs();
            lanes.sum_abs[k] += d[k];
            lanes.dot[k] += va[k] * vb[k];
            lanes.norm_a[k] += va[k] * va[k];
            lanes.norm_b[k] += vb[k] * vb[k];
            lanes.norm_diff[k] += d[k] * d[k];
            far |= d[k] > rule.atol + rule.rtol * vb[k].abs();
            let larger = d[k] > lanes.max_abs[k];
            lanes.max_abs[k] = if larger { d[k] } else { lanes.max_abs[k] };
            lanes.max_abs_at[k] = if larger {
                flat + k
            } else {
                lanes.max_abs_at[k]
            };
        }
        lanes.finite_pairs += LANES as u64;
        if far {
            for k in 0..LANES {
                if d[k] > rule.atol + rule.rtol * vb[k].abs() {
                    acc.mismatch(flat + k, va[k], vb[k]);
                }
            }
        }
        for k in 0..LANES {
            acc.histogram[(slot(d[k], octaves) * ROWS + k % ROWS) & (HISTOGRAM - 1)] += 1;
        }
        if rule.ulp {
            acc.ulp_pairs += LANES as u64;
            for k in 0..LANES {
                // Finite values: the ordinal exists.
                let oa = ra.ordinal(&ga[k * wa..], va[k]).unwrap_or(0);
                let ob = rb.ordinal(&gb[k * wb..], vb[k]).unwrap_or(0);
                let ulp = oa.abs_diff(ob);
                let larger = ulp > lanes.max_ulp[k] || lanes.max_ulp_at[k] == usize::MAX;
                lanes.max_ulp[k] = if larger { ulp } else { lanes.max_ulp[k] };
                lanes.max_ulp_at[k] = if larger {
                    flat + k
                } else {
                    lanes.max_ulp_at[k]
                };
            }
        }
    }
    let tail_start = start + (bytes_a.len() - tail_a.len()) / wa;
    for (k, (ea, eb)) in tail_a
        .chunks_exact(wa)
        .zip(tail_b.chunks_exact(wb))
        .enumerate()
    {
        acc.step(tail_start + k, ea, eb, rule, ra, rb);
    }
    fold(acc, &lanes, bytes_a, bytes_b, start, ra, rb);
}

/// Folds the lanes into `acc`: sums added, maxima compared with ties going to the lowest
/// flat index (the first position attaining the maximum, as the scalar path finds it).
#[inline(always)]
fn fold<RA: Reader, RB: Reader>(
    acc: &mut Accumulator,
    lanes: &Lanes,
    bytes_a: &[u8],
    bytes_b: &[u8],
    start: usize,
    ra: RA,
    rb: RB,
) {
    let values = |flat: usize| {
        let k = flat - start;
        (
            ra.value(&bytes_a[k * ra.size()..]),
            rb.value(&bytes_b[k * rb.size()..]),
        )
    };
    acc.finite_pairs += lanes.finite_pairs;
    acc.sum_abs += lanes.sum_abs.iter().sum::<f64>();
    acc.dot += lanes.dot.iter().sum::<f64>();
    acc.norm_a += lanes.norm_a.iter().sum::<f64>();
    acc.norm_b += lanes.norm_b.iter().sum::<f64>();
    acc.norm_diff += lanes.norm_diff.iter().sum::<f64>();
    for k in 0..LANES {
        let at = lanes.max_abs_at[k];
        if at != usize::MAX {
            acc.offer_max_abs(lanes.max_abs[k], at, || values(at));
        }
        let at = lanes.max_ulp_at[k];
        if at != usize::MAX {
            acc.offer_max_ulp(lanes.max_ulp[k], at, || values(at));
        }
    }
}

/// Storage indices of a strided view in logical (C) order, from a starting flat index:
/// an odometer over the coordinates, so each step costs O(1) amortized.
struct Walk<'v> {
    shape: &'v [usize],
    strides: &'v [usize],
    coords: Vec<usize>,
    index: usize,
}

impl<'v> Walk<'v> {
    fn new(view: &'v TensorView, flat: usize) -> Self {
        Walk {
            shape: view.shape(),
            strides: view.strides(),
            coords: view.coords(flat),
            index: view.storage_index(flat),
        }
    }

    /// The storage index of the current position; then advances one position.
    #[inline]
    fn next_index(&mut self) -> usize {
        let current = self.index;
        for d in (0..self.shape.len()).rev() {
            self.coords[d] += 1;
            self.index += self.strides[d];
            if self.coords[d] < self.shape[d] {
                return current;
            }
            self.index -= self.strides[d] * self.coords[d];
            self.coords[d] = 0;
        }
        current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_decades() {
        let t = octaves();
        let decade = |d: f64| slot(d, t) as i32 - 1 + MIN_DECADE;
        assert_eq!(slot(0.0, t), 0);
        assert_eq!(decade(1.0), 0);
        assert_eq!(decade(9.999), 0);
        assert_eq!(decade(10.0), 1);
        assert_eq!(decade(1e-3), -3);
        assert_eq!(decade(0.00099999), -4);
        assert_eq!(decade(1.5e-7), -7);
        assert_eq!(decade(3e38), 38);
        assert_eq!(decade(f64::MAX), 308);
        assert_eq!(decade(1e-310), MIN_DECADE);
        for e in -300..300 {
            let p: f64 = format!("1e{e}").parse().unwrap();
            assert_eq!(decade(p), e, "10^{e}");
            assert_eq!(decade(p * 0.999_999), e - 1, "below 10^{e}");
        }
    }
}
