//! The AVX2 kernel of contiguous float32 / float32 and bfloat16 / bfloat16 comparisons.
//!
//! Eight positions per step, with the same results as the scalar path of
//! [`kernel`](super::kernel) (every count, first position, maximum, ULP distance and
//! histogram bin; the `f64` sums differ only in the order of their additions):
//! - a group holding a non-finite value (exponent bits all ones) goes to the scalar
//!   [`Accumulator::step`], position by position;
//! - values are widened to `f64` (exact) and the sums kept in `f64` vectors, without fused
//!   multiply-add, so the answer does not depend on the CPU;
//! - the ULP distance comes from the bits: the sign-magnitude pattern as a signed integer,
//!   `|oa - ob|` as `max - min` (it fits in 32 bits unsigned for finite values); bfloat16
//!   values are handled as float32 values whose low 16 bits are zero, so their distance is the
//!   float32 distance divided by 2^16;
//! - maxima are kept per lane with the group of their first occurrence (a later equal value
//!   does not replace it), then folded with ties going to the lowest flat index;
//! - the closeness rule is a vector compare; a group with a mismatch is rechecked position by
//!   position, in order, so `first_mismatch` is the first one;
//! - the histogram: `|a - b|` of two finite float32 values is 0 or at least 2^-149 and below
//!   2^129, so its `f64` exponent field is 0 or one of 278 values. Each position counts in a
//!   per-lane row by (exponent field, at or above the octave's power of ten), the power of ten
//!   gathered from a table; rows are turned into decades when the block ends.

// The kernel is x86-64 only; elsewhere its tables and constants are unused.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_imports))]

use std::sync::OnceLock;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::accumulate::{Accumulator, Rule, octaves};
use super::element::{ElementReader, Packed};

/// Positions per step.
const WIDTH: usize = 8;
/// The exponent field just below the smallest nonzero difference of two finite float32
/// values (2^-149, field 874); a difference of 0 (field 0) is clamped to it.
const FIELD_BASE: i32 = 873;
/// The exponent field of the largest difference of two finite float32 values (< 2^129).
const FIELD_TOP: i32 = 1151;
/// Histogram bins per lane: (field - FIELD_BASE) * 2 + (at or above the power of ten).
const BINS: usize = ((FIELD_TOP - FIELD_BASE + 1) * 2) as usize;
/// Groups per block: bounds the per-lane `u32` counters and group indices.
const BLOCK_GROUPS: usize = 1 << 24;

/// For each `f64` exponent field, the power of ten inside its octave (+inf when none; NaN
/// for field 2047): the second half of [`octaves`], as a flat array a gather can read.
fn boundaries() -> &'static [f64; 2048] {
    static TABLE: OnceLock<[f64; 2048]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let octaves = octaves();
        std::array::from_fn(|field| octaves[field].1)
    })
}

/// Accumulates contiguous positions `start..` whose bytes are `bytes_a` and `bytes_b`
/// (whole elements of the `packed` format, as `ra` and `rb` read them) into `acc`.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn contiguous_avx2<RA: ElementReader, RB: ElementReader>(
    acc: &mut Accumulator,
    start: usize,
    bytes_a: &[u8],
    bytes_b: &[u8],
    rule: Rule,
    ra: RA,
    rb: RB,
    packed: Packed,
) {
    let size = match packed {
        Packed::F32 => 4,
        Packed::BF16 => 2,
    };
    debug_assert!(ra.size() == size && rb.size() == size && rule.ulp);
    let n = (bytes_a.len() / size).min(bytes_b.len() / size);
    let groups = n / WIDTH;
    let mut hist = vec![0u32; BINS * WIDTH];
    let mut g = 0;
    while g < groups {
        let count = (groups - g).min(BLOCK_GROUPS);
        let block = g * WIDTH * size..(g + count) * WIDTH * size;
        // SAFETY: AVX2 (this function's precondition); the block holds `count` groups.
        let (block_a, block_b) = (&bytes_a[block.clone()], &bytes_b[block]);
        let first = start + g * WIDTH;
        unsafe {
            match packed {
                Packed::F32 => block_avx2::<RA, RB, false>(
                    acc, first, block_a, block_b, count, rule, ra, rb, &mut hist,
                ),
                Packed::BF16 => block_avx2::<RA, RB, true>(
                    acc, first, block_a, block_b, count, rule, ra, rb, &mut hist,
                ),
            }
        };
        g += count;
    }
    let tail = groups * WIDTH;
    for k in tail..n {
        acc.step(
            start + k,
            &bytes_a[k * size..],
            &bytes_b[k * size..],
            rule,
            ra,
            rb,
        );
    }
}

/// Horizontal sum of four `f64` lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn sum_pd(v: __m256d) -> f64 {
    let mut lanes = [0.0; 4];
    // SAFETY: `lanes` holds four f64.
    unsafe { _mm256_storeu_pd(lanes.as_mut_ptr(), v) };
    (lanes[0] + lanes[1]) + (lanes[2] + lanes[3])
}

/// [`block`] compiled for AVX2.
///
/// # Safety
/// The CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn block_avx2<RA: ElementReader, RB: ElementReader, const BF16: bool>(
    acc: &mut Accumulator,
    start: usize,
    bytes_a: &[u8],
    bytes_b: &[u8],
    groups: usize,
    rule: Rule,
    ra: RA,
    rb: RB,
    hist: &mut [u32],
) {
    // SAFETY: AVX2 (precondition).
    unsafe { block::<RA, RB, BF16>(acc, start, bytes_a, bytes_b, groups, rule, ra, rb, hist) }
}

/// Groups whose positions are handled one by one after the vector loop: a non-finite value
/// (flag [`NONFINITE`]) or a mismatch.
const QUEUE: usize = 64;
/// Flag of a queued group holding a non-finite value.
const NONFINITE: u32 = 1 << 31;

/// One block of `groups` groups of [`WIDTH`] positions, from flat index `start`, of float32
/// (`BF16` false) or bfloat16 elements; `hist` is zero on entry and on return.
///
/// The vector loop calls nothing (so its state stays in registers): groups needing the
/// scalar path are queued and handled in index order when the queue is full or the block
/// ends, which keeps every "first" position right; a new per-lane maximum is recorded inline.
///
/// # Safety
/// The CPU supports AVX2 (the caller is compiled for it).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn block<RA: ElementReader, RB: ElementReader, const BF16: bool>(
    acc: &mut Accumulator,
    start: usize,
    bytes_a: &[u8],
    bytes_b: &[u8],
    groups: usize,
    rule: Rule,
    ra: RA,
    rb: RB,
    hist: &mut [u32],
) {
    let size = if BF16 { 2 } else { 4 };
    debug_assert!(ra.size() == size && rb.size() == size);
    assert!(bytes_a.len() >= groups * WIDTH * size && bytes_b.len() >= groups * WIDTH * size);
    assert!(hist.len() == BINS * WIDTH && groups <= BLOCK_GROUPS);
    let bounds = boundaries();
    let values = |flat: usize| {
        let at = (flat - start) * size;
        (ra.value(&bytes_a[at..]), rb.value(&bytes_b[at..]))
    };
    // SAFETY: AVX2 (precondition); every load reads inside the asserted lengths, every
    // gather index is an exponent field (< 2048), every histogram index is clamped to
    // `lane * BINS + (0..BINS)`.
    unsafe {
        let abs_pd = _mm256_castsi256_pd(_mm256_set1_epi64x(i64::MAX));
        let magnitude = _mm256_set1_epi32(0x7fff_ffff);
        let largest_finite = _mm256_set1_epi32(0x7f7f_ffff);
        let atol = _mm256_set1_pd(rule.atol);
        let rtol = _mm256_set1_pd(rule.rtol);
        let field_base = _mm256_set1_epi32(FIELD_BASE);
        let field_span = _mm256_set1_epi32(FIELD_TOP - FIELD_BASE);
        let rows = _mm256_setr_epi32(
            0,
            BINS as i32,
            2 * BINS as i32,
            3 * BINS as i32,
            4 * BINS as i32,
            5 * BINS as i32,
            6 * BINS as i32,
            7 * BINS as i32,
        );
        let ones = _mm256_set1_epi32(-1);

        let mut sum_abs = _mm256_setzero_pd();
        let mut dot = _mm256_setzero_pd();
        let mut norm_a = _mm256_setzero_pd();
        let mut norm_b = _mm256_setzero_pd();
        let mut norm_diff = _mm256_setzero_pd();
        // Per lane (positions 0-3 and 4-7 of a group): the largest |a - b| and the group
        // that first attained it (u32::MAX: none).
        let mut max_lo = _mm256_set1_pd(-1.0);
        let mut max_hi = _mm256_set1_pd(-1.0);
        let mut max_at = [u32::MAX; WIDTH];
        // Per lane: the largest ULP distance (times 2^16 for bfloat16) and its first group.
        let mut ulp_max = _mm256_setzero_si256();
        let mut ulp_at = [u32::MAX; WIDTH];
        let mut finite_groups = 0u64;
        // The first all-finite group: where a ULP maximum of 0 is first attained.
        let mut first_finite_group = u32::MAX;
        let mut slots = [0u32; WIDTH];
        let mut queue = [0u32; QUEUE];
        // Mismatches of finite groups are counted here; only the first group holding one is
        // queued, to locate the first mismatch (earlier queued groups are handled first).
        let mut far_count = 0u64;
        let mut far_queued = false;

        let pa = bytes_a.as_ptr();
        let pb = bytes_b.as_ptr();
        let mut g = 0;
        while g < groups {
            let mut queued = 0;
            while g < groups && queued < QUEUE {
                let (ia, ib) = if !BF16 {
                    (
                        _mm256_loadu_si256(pa.add(g * 32).cast()),
                        _mm256_loadu_si256(pb.add(g * 32).cast()),
                    )
                } else {
                    (
                        _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(
                            pa.add(g * 16).cast(),
                        ))),
                        _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(
                            pb.add(g * 16).cast(),
                        ))),
                    )
                };
                let ma = _mm256_and_si256(ia, magnitude);
                let mb = _mm256_and_si256(ib, magnitude);
                let nonfinite = _mm256_cmpgt_epi32(_mm256_max_epu32(ma, mb), largest_finite);
                if _mm256_testz_si256(nonfinite, nonfinite) == 0 {
                    queue[queued] = g as u32 | NONFINITE;
                    queued += 1;
                    g += 1;
                    continue;
                }
                finite_groups += 1;
                first_finite_group = first_finite_group.min(g as u32);

                let fa = _mm256_castsi256_ps(ia);
                let fb = _mm256_castsi256_ps(ib);
                let a_lo = _mm256_cvtps_pd(_mm256_castps256_ps128(fa));
                let a_hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(fa));
                let b_lo = _mm256_cvtps_pd(_mm256_castps256_ps128(fb));
                let b_hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(fb));
                let d_lo = _mm256_and_pd(_mm256_sub_pd(a_lo, b_lo), abs_pd);
                let d_hi = _mm256_and_pd(_mm256_sub_pd(a_hi, b_hi), abs_pd);

                sum_abs = _mm256_add_pd(sum_abs, _mm256_add_pd(d_lo, d_hi));
                dot = _mm256_add_pd(
                    dot,
                    _mm256_add_pd(_mm256_mul_pd(a_lo, b_lo), _mm256_mul_pd(a_hi, b_hi)),
                );
                norm_a = _mm256_add_pd(
                    norm_a,
                    _mm256_add_pd(_mm256_mul_pd(a_lo, a_lo), _mm256_mul_pd(a_hi, a_hi)),
                );
                norm_b = _mm256_add_pd(
                    norm_b,
                    _mm256_add_pd(_mm256_mul_pd(b_lo, b_lo), _mm256_mul_pd(b_hi, b_hi)),
                );
                norm_diff = _mm256_add_pd(
                    norm_diff,
                    _mm256_add_pd(_mm256_mul_pd(d_lo, d_lo), _mm256_mul_pd(d_hi, d_hi)),
                );

                // Closeness: d > atol + rtol * |b| (no fused multiply-add).
                let far_lo = _mm256_cmp_pd::<_CMP_GT_OQ>(
                    d_lo,
                    _mm256_add_pd(atol, _mm256_mul_pd(rtol, _mm256_and_pd(b_lo, abs_pd))),
                );
                let far_hi = _mm256_cmp_pd::<_CMP_GT_OQ>(
                    d_hi,
                    _mm256_add_pd(atol, _mm256_mul_pd(rtol, _mm256_and_pd(b_hi, abs_pd))),
                );
                // A new maximum |a - b| in a lane.
                let larger_lo = _mm256_cmp_pd::<_CMP_GT_OQ>(d_lo, max_lo);
                let larger_hi = _mm256_cmp_pd::<_CMP_GT_OQ>(d_hi, max_hi);
                // ULP distance: |ordinal(a) - ordinal(b)|, ordinals as signed integers.
                let sa = _mm256_srai_epi32::<31>(ia);
                let sb = _mm256_srai_epi32::<31>(ib);
                let oa = _mm256_sub_epi32(_mm256_xor_si256(ma, sa), sa);
                let ob = _mm256_sub_epi32(_mm256_xor_si256(mb, sb), sb);
                let ulp = _mm256_sub_epi32(_mm256_max_epi32(oa, ob), _mm256_min_epi32(oa, ob));
                let ulp_new = _mm256_max_epu32(ulp_max, ulp);
                // All ones where the ULP maximum is unchanged.
                let ulp_kept = _mm256_cmpeq_epi32(ulp_new, ulp_max);
                let rare = _mm256_or_pd(
                    _mm256_or_pd(far_lo, far_hi),
                    _mm256_or_pd(larger_lo, larger_hi),
                );
                if _mm256_testc_si256(
                    _mm256_andnot_si256(_mm256_castpd_si256(rare), ulp_kept),
                    ones,
                ) == 0
                {
                    let far = _mm256_movemask_pd(far_lo) | _mm256_movemask_pd(far_hi) << 4;
                    if far != 0 {
                        far_count += u64::from(far.count_ones());
                        if !far_queued {
                            far_queued = true;
                            queue[queued] = g as u32;
                            queued += 1;
                        }
                    }
                    let larger = _mm256_movemask_pd(larger_lo) | _mm256_movemask_pd(larger_hi) << 4;
                    if larger != 0 {
                        max_lo = _mm256_max_pd(d_lo, max_lo);
                        max_hi = _mm256_max_pd(d_hi, max_hi);
                        for (k, at) in max_at.iter_mut().enumerate() {
                            if larger & (1 << k) != 0 {
                                *at = g as u32;
                            }
                        }
                    }
                    let larger =
                        !_mm256_movemask_ps(_mm256_castsi256_ps(ulp_kept)) & ((1 << WIDTH) - 1);
                    if larger != 0 {
                        ulp_max = ulp_new;
                        for (k, at) in ulp_at.iter_mut().enumerate() {
                            if larger & (1 << k) != 0 {
                                *at = g as u32;
                            }
                        }
                    }
                }

                // Histogram: (exponent field, at or above the power of ten) per lane row.
                let field_lo = _mm256_srli_epi64::<52>(_mm256_castpd_si256(d_lo));
                let field_hi = _mm256_srli_epi64::<52>(_mm256_castpd_si256(d_hi));
                let power_lo = _mm256_i64gather_pd::<8>(bounds.as_ptr(), field_lo);
                let power_hi = _mm256_i64gather_pd::<8>(bounds.as_ptr(), field_hi);
                let above_lo = _mm256_cmp_pd::<_CMP_GE_OQ>(d_lo, power_lo);
                let above_hi = _mm256_cmp_pd::<_CMP_GE_OQ>(d_hi, power_hi);
                // The low 32 bits of each 64-bit lane, in the order 0 1 4 5 2 3 6 7 (the
                // histogram does not care which row a position counts in).
                let field = _mm256_castps_si256(_mm256_shuffle_ps::<0x88>(
                    _mm256_castsi256_ps(field_lo),
                    _mm256_castsi256_ps(field_hi),
                ));
                let above = _mm256_castps_si256(_mm256_shuffle_ps::<0x88>(
                    _mm256_castpd_ps(above_lo),
                    _mm256_castpd_ps(above_hi),
                ));
                // max(field - FIELD_BASE, 0) clamped to FIELD_TOP - FIELD_BASE: 16-bit
                // saturating arithmetic (fields are below 2^11, the upper halves stay 0).
                let field = _mm256_min_epu16(_mm256_subs_epu16(field, field_base), field_span);
                // Each lane's row, then bin 2·field + above (`above` is 0 or -1).
                let bin = _mm256_sub_epi32(
                    _mm256_add_epi32(_mm256_add_epi32(field, field), rows),
                    above,
                );
                _mm256_storeu_si256(slots.as_mut_ptr().cast(), bin);
                for &slot in &slots {
                    *hist.get_unchecked_mut(slot as usize) += 1;
                }
                g += 1;
            }
            // The queued groups, in index order.
            for &entry in &queue[..queued] {
                let group = (entry & !NONFINITE) as usize;
                let flat = start + group * WIDTH;
                for k in 0..WIDTH {
                    let at = (group * WIDTH + k) * size;
                    let (ea, eb) = (&bytes_a[at..], &bytes_b[at..]);
                    if entry & NONFINITE != 0 {
                        acc.step(flat + k, ea, eb, rule, ra, rb);
                    } else {
                        // Counted in far_count: only where the first one is.
                        let (va, vb) = (ra.value(ea), rb.value(eb));
                        if (va - vb).abs() > rule.atol + rule.rtol * vb.abs() {
                            acc.first_mismatch.get_or_insert((flat + k, va, vb));
                        }
                    }
                }
            }
        }

        acc.mismatches += far_count;
        acc.finite_pairs += finite_groups * WIDTH as u64;
        acc.ulp_pairs += finite_groups * WIDTH as u64;
        acc.sum_abs += sum_pd(sum_abs);
        acc.dot += sum_pd(dot);
        acc.norm_a += sum_pd(norm_a);
        acc.norm_b += sum_pd(norm_b);
        acc.norm_diff += sum_pd(norm_diff);

        let mut maxima = [0.0; WIDTH];
        _mm256_storeu_pd(maxima.as_mut_ptr(), max_lo);
        _mm256_storeu_pd(maxima.as_mut_ptr().add(4), max_hi);
        let mut ulps = [0u32; WIDTH];
        _mm256_storeu_si256(ulps.as_mut_ptr().cast(), ulp_max);
        let shift = if BF16 { 16 } else { 0 };
        for k in 0..WIDTH {
            if max_at[k] != u32::MAX {
                let flat = start + max_at[k] as usize * WIDTH + k;
                acc.offer_max_abs(maxima[k], flat, || values(flat));
            }
            if ulp_at[k] != u32::MAX {
                let flat = start + ulp_at[k] as usize * WIDTH + k;
                acc.offer_max_ulp(u64::from(ulps[k] >> shift), flat, || values(flat));
            } else if first_finite_group != u32::MAX {
                // The lane's maximum stayed 0: first attained in the first finite group.
                let flat = start + first_finite_group as usize * WIDTH + k;
                acc.offer_max_ulp(0, flat, || values(flat));
            }
        }

        let octaves = octaves();
        for row in hist.chunks_exact_mut(BINS) {
            for (bin, count) in row.iter_mut().enumerate() {
                if *count > 0 {
                    let field = match bin / 2 {
                        0 => 0,
                        f => f + FIELD_BASE as usize,
                    };
                    let slot = usize::from(octaves[field].0) + bin % 2;
                    acc.add_to_slot(slot, u64::from(*count));
                    *count = 0;
                }
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::super::element::{BF16, F32};
    // The scalar path the kernel must agree with (a test-only edge back to `kernel`).
    use super::super::kernel::chunk_portable;
    use super::*;
    use crate::model::tensor::read::{DType, TensorView};

    /// xorshift64: reproducible test data without a dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A float32 value of a mixed population: ordinary, tiny, huge, zero, subnormal, NaN, inf.
    fn value32(rng: &mut Rng) -> f32 {
        let sign = if rng.below(2) == 0 { 1.0 } else { -1.0 };
        match rng.below(40) {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => f32::NEG_INFINITY,
            3 => 0.0,
            4 => -0.0,
            5 => f32::from_bits(rng.below(1 << 23) as u32) * sign, // subnormal
            6 => f32::MAX * sign,
            7 => f32::MIN_POSITIVE * sign,
            8 => 1e-3 * sign, // decade boundaries
            9 => 10.0 * sign,
            10..=12 => f32::from_bits(rng.next() as u32), // any pattern
            _ => (rng.below(1 << 24) as f32 / (1 << 22) as f32 - 2.0) * sign,
        }
    }

    /// B from A: equal, near (a few ULPs or noise), far, sign-crossed or unrelated.
    fn partner32(rng: &mut Rng, a: f32) -> f32 {
        match rng.below(12) {
            0 => a,
            1 => f32::from_bits(a.to_bits().wrapping_add(rng.below(5) as u32)),
            2 => -a,
            3 => value32(rng),
            4 => a + 1e-3, // ties of |a - b| across lanes (same a, same shift)
            5 => 0.0,      // ties of ULP distance across lanes for equal a
            6 => a * 1.000_001,
            _ => a + (rng.below(1 << 20) as f32 / (1 << 20) as f32 - 0.5) * 1e-4,
        }
    }

    /// Both paths of one chunk: the SIMD kernel (contiguous) and the portable scalar one.
    fn both(
        dtype: DType,
        bytes_a: &[u8],
        bytes_b: &[u8],
        n: usize,
        offset: usize,
        rule: Rule,
    ) -> (Accumulator, Accumulator) {
        let va = TensorView::new(dtype, vec![n], vec![1], offset, bytes_a).unwrap();
        let vb = TensorView::new(dtype, vec![n], vec![1], offset, bytes_b).unwrap();
        let size = dtype.size();
        let (ea, eb) = (
            &bytes_a[offset * size..(offset + n) * size],
            &bytes_b[offset * size..(offset + n) * size],
        );
        let mut simd = Accumulator::new();
        let scalar = match dtype {
            DType::Float32 => {
                // SAFETY: AVX2 checked by the caller.
                unsafe { contiguous_avx2(&mut simd, 0, ea, eb, rule, F32, F32, Packed::F32) };
                chunk_portable(&va, &vb, 0..n, rule, F32, F32)
            }
            DType::BFloat16 => {
                // SAFETY: AVX2 checked by the caller.
                unsafe { contiguous_avx2(&mut simd, 0, ea, eb, rule, BF16, BF16, Packed::BF16) };
                chunk_portable(&va, &vb, 0..n, rule, BF16, BF16)
            }
            _ => unreachable!(),
        };
        (simd, scalar)
    }

    fn assert_same(simd: &Accumulator, scalar: &Accumulator, what: &str) {
        let close = |x: f64, y: f64| {
            (x == y) || (x - y).abs() <= 1e-12 * x.abs().max(y.abs()) || (x.is_nan() && y.is_nan())
        };
        let bits = |v: Option<(usize, f64, f64)>| v.map(|(i, a, b)| (i, a.to_bits(), b.to_bits()));
        assert_eq!(
            simd.finite_pairs, scalar.finite_pairs,
            "{what}: finite_pairs"
        );
        assert_eq!(
            simd.max_abs.to_bits(),
            scalar.max_abs.to_bits(),
            "{what}: max_abs"
        );
        assert_eq!(
            bits(simd.max_abs_at),
            bits(scalar.max_abs_at),
            "{what}: max_abs_at"
        );
        assert_eq!(simd.mismatches, scalar.mismatches, "{what}: mismatches");
        assert_eq!(
            bits(simd.first_mismatch),
            bits(scalar.first_mismatch),
            "{what}: first_mismatch"
        );
        assert_eq!(simd.counts, scalar.counts, "{what}: counts");
        assert_eq!(
            bits(simd.first_disagreement),
            bits(scalar.first_disagreement),
            "{what}: first_disagreement"
        );
        assert_eq!(simd.max_ulp, scalar.max_ulp, "{what}: max_ulp");
        assert_eq!(
            bits(simd.max_ulp_at),
            bits(scalar.max_ulp_at),
            "{what}: max_ulp_at"
        );
        assert_eq!(simd.ulp_pairs, scalar.ulp_pairs, "{what}: ulp_pairs");
        assert_eq!(
            simd.nonfinite_pairs, scalar.nonfinite_pairs,
            "{what}: nonfinite_pairs"
        );
        assert_eq!(simd.zero(), scalar.zero(), "{what}: zero");
        assert_eq!(
            simd.decade_counts().collect::<Vec<_>>(),
            scalar.decade_counts().collect::<Vec<_>>(),
            "{what}: histogram"
        );
        for (x, y, name) in [
            (simd.sum_abs, scalar.sum_abs, "sum_abs"),
            (simd.norm_a, scalar.norm_a, "norm_a"),
            (simd.norm_b, scalar.norm_b, "norm_b"),
            (simd.norm_diff, scalar.norm_diff, "norm_diff"),
        ] {
            assert!(close(x, y), "{what}: {name} {x} vs {y}");
        }
        // Σab cancels: its rounding error is relative to Σ|ab| <= (Σa² + Σb²) / 2.
        let scale = scalar.norm_a + scalar.norm_b;
        assert!(
            (simd.dot - scalar.dot).abs() <= 1e-12 * scale || !scale.is_finite(),
            "{what}: dot {} vs {}",
            simd.dot,
            scalar.dot
        );
    }

    fn rules() -> [Rule; 3] {
        let rule = |atol, rtol, equal_nan| Rule {
            atol,
            rtol,
            equal_nan,
            ulp: true,
        };
        [
            rule(1e-5, 1e-2, false),
            rule(0.0, 0.0, true),
            rule(1e-3, 0.0, false),
        ]
    }

    #[test]
    fn float32_kernel_matches_the_scalar_path() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..400 {
            // Sizes around multiples of 8, and an occasional long run of finite values.
            let n = match case % 4 {
                0 => rng.below(40) as usize,
                1 => 8 * rng.below(20) as usize + 7,
                2 => 1000 + rng.below(9) as usize,
                _ => 3000,
            };
            let finite_only = case % 3 == 0;
            let offset = rng.below(3) as usize;
            let mut a = Vec::new();
            let mut b = Vec::new();
            for _ in 0..offset + n {
                let mut x = value32(&mut rng);
                let mut y = partner32(&mut rng, x);
                if finite_only {
                    if !x.is_finite() {
                        x = 1.5;
                    }
                    if !y.is_finite() {
                        y = -0.25;
                    }
                }
                a.push(x);
                b.push(y);
            }
            let ba: Vec<u8> = a.iter().flat_map(|v| v.to_le_bytes()).collect();
            let bb: Vec<u8> = b.iter().flat_map(|v| v.to_le_bytes()).collect();
            for rule in rules() {
                let (simd, scalar) = both(DType::Float32, &ba, &bb, n, offset, rule);
                assert_same(&simd, &scalar, &format!("float32 case {case} n {n}"));
            }
        }
    }

    #[test]
    fn bfloat16_kernel_matches_the_scalar_path() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for case in 0..400 {
            let n = match case % 3 {
                0 => rng.below(40) as usize,
                1 => 8 * rng.below(20) as usize + 5,
                _ => 2000 + rng.below(9) as usize,
            };
            let finite_only = case % 2 == 0;
            let bf16 = |v: f32| (v.to_bits() >> 16) as u16;
            let mut a = Vec::new();
            let mut b = Vec::new();
            for _ in 0..n {
                let x = value32(&mut rng);
                let y = partner32(&mut rng, x);
                let (mut x, mut y) = (bf16(x), bf16(y));
                if rng.below(8) == 0 {
                    y = x.wrapping_add(rng.below(3) as u16); // a few ULPs apart
                }
                let finite = |v: u16| v & 0x7f80 != 0x7f80;
                if finite_only {
                    if !finite(x) {
                        x = 0x3fc0;
                    }
                    if !finite(y) {
                        y = 0x8000;
                    }
                }
                a.push(x);
                b.push(y);
            }
            let ba: Vec<u8> = a.iter().flat_map(|v| v.to_le_bytes()).collect();
            let bb: Vec<u8> = b.iter().flat_map(|v| v.to_le_bytes()).collect();
            for rule in rules() {
                let (simd, scalar) = both(DType::BFloat16, &ba, &bb, n, 0, rule);
                assert_same(&simd, &scalar, &format!("bfloat16 case {case} n {n}"));
            }
        }
    }

    /// Ties of the largest |a - b| and ULP distance in different lanes and groups go to the
    /// first position; a non-finite value in the middle of a group and a tail are handled.
    #[test]
    fn ties_go_to_the_first_position() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let n = 8 * 6 + 3;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let mut b = a.clone();
        for i in [13, 5, 29, 40, 49] {
            b[i] = a[i] + 0.5; // equal differences, the first at 5 (lane 5)
        }
        b[20] = f32::NAN; // a group through the scalar path
        b[2] = f32::from_bits(a[2].to_bits() + 3);
        b[11] = f32::from_bits(a[11].to_bits() + 3); // 3 ULPs at 2 and 11
        let ba: Vec<u8> = a.iter().flat_map(|v| v.to_le_bytes()).collect();
        let bb: Vec<u8> = b.iter().flat_map(|v| v.to_le_bytes()).collect();
        for rule in rules() {
            let (simd, scalar) = both(DType::Float32, &ba, &bb, n, 0, rule);
            assert_same(&simd, &scalar, "ties");
            assert_eq!(simd.max_abs_at.unwrap().0, 5);
        }
    }
}
