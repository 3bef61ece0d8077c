//! The per-element work of a tensor comparison, for one chunk of flat indices.
//!
//! Contiguous chunks of finite values take a lane-parallel path: [`LANES`] independent sets of
//! running sums, maxima and histogram rows, so the additions do not wait on each other and
//! the compiler can vectorize them. Anything else (non-finite values, strided views) takes
//! the scalar path. Both produce the same counts, firsts and maxima; sums differ only in
//! rounding order. On x86-64 with AVX2, contiguous float32 and bfloat16 pairs take the
//! hand-vectorized kernel of [`simd`](super::simd) instead, with the same results.

use std::ops::Range;

use super::accumulate::{Accumulator, Rule};
use super::element::ElementReader;
use crate::model::tensor::read::TensorView;

/// Elements per lane group of the fast path.
const LANES: usize = 4;

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
pub(super) fn chunk<RA: ElementReader, RB: ElementReader>(
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
fn contiguous_bytes<'v, RA: ElementReader, RB: ElementReader>(
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
fn chunk_avx2<RA: ElementReader, RB: ElementReader>(
    a: &TensorView,
    b: &TensorView,
    range: Range<usize>,
    rule: Rule,
    ra: RA,
    rb: RB,
) -> Accumulator {
    chunk_portable(a, b, range, rule, ra, rb)
}

/// Accumulates the flat indices `range` of both views without the AVX2 kernel: the lane path
/// for contiguous views, the scalar path position by position for strided ones.
#[inline(always)]
pub(super) fn chunk_portable<RA: ElementReader, RB: ElementReader>(
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
fn contiguous<RA: ElementReader, RB: ElementReader>(
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
        acc.count_lanes(&d);
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
fn fold<RA: ElementReader, RB: ElementReader>(
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
