//! The running sums, maxima, firsts and |a - b| histogram of a comparison over a range of
//! flat indices ([`Accumulator`]), the closeness rule it applies ([`Rule`]), and the decade
//! table the histogram is binned by ([`octaves`]). Both kernels ([`kernel`](super::kernel)
//! and [`simd`](super::simd)) accumulate into it; it knows neither.

use std::sync::OnceLock;

use super::element::ElementReader;

/// The thresholds of closeness and what is measured, fixed for one comparison.
#[derive(Clone, Copy)]
pub(super) struct Rule {
    /// Absolute tolerance, in the values' unit.
    pub atol: f64,
    /// Relative tolerance, times `|b|`.
    pub rtol: f64,
    /// NaN in both at one position counts as close.
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

/// Running sums and firsts over a contiguous range of flat indices.
pub(super) struct Accumulator {
    /// Positions where both values are finite.
    pub finite_pairs: u64,
    /// Σ |a - b| over finite pairs.
    pub sum_abs: f64,
    /// Σ a·b over finite pairs.
    pub dot: f64,
    /// Σ a² over finite pairs.
    pub norm_a: f64,
    /// Σ b² over finite pairs.
    pub norm_b: f64,
    /// Σ (a - b)² over finite pairs.
    pub norm_diff: f64,
    /// Largest |a - b| over finite pairs (-1 before the first).
    pub max_abs: f64,
    /// (flat index, a, b) of the first position attaining `max_abs`.
    pub max_abs_at: Option<(usize, f64, f64)>,
    /// Positions that are not close.
    pub mismatches: u64,
    /// (flat index, a, b) of the first position that is not close.
    pub first_mismatch: Option<(usize, f64, f64)>,
    /// NaN, NaN, +inf, +inf, -inf, -inf counts of A and B.
    pub counts: [u64; 6],
    /// (flat index, a, b) of the first position whose value classes differ.
    pub first_disagreement: Option<(usize, f64, f64)>,
    /// Largest ULP distance measured.
    pub max_ulp: u64,
    /// (flat index, a, b) of the first position attaining `max_ulp`.
    pub max_ulp_at: Option<(usize, f64, f64)>,
    /// Positions whose ULP distance was measured (neither value NaN).
    pub ulp_pairs: u64,
    /// Positions where either value is not finite.
    pub nonfinite_pairs: u64,
    /// `ROWS` interleaved histograms: slot s of row r at `s * ROWS + r` (padded to a power
    /// of two so a masked index needs no bounds check).
    histogram: Box<[u64; HISTOGRAM]>,
    octaves: &'static [(u16, f64); 2048],
}

impl Accumulator {
    /// Nothing accumulated yet: zero sums and counts, no firsts, `max_abs` below any
    /// difference.
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
    pub(super) fn step<RA: ElementReader, RB: ElementReader>(
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

    /// Counts a position that is not close, remembering the first.
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

    /// Counts the finite differences `d` (each `>= 0`) of `N` consecutive positions, position
    /// `k` in histogram row `k % ROWS`.
    #[inline(always)]
    pub(super) fn count_lanes<const N: usize>(&mut self, d: &[f64; N]) {
        let octaves = self.octaves;
        for (k, &d) in d.iter().enumerate() {
            self.histogram[(slot(d, octaves) * ROWS + k % ROWS) & (HISTOGRAM - 1)] += 1;
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
