//! The fast path of a run of adjacent all-finite elements: [`LANES`] accumulators per sum, each
//! lane's square and weighted value a fused multiply-add (`f64::mul_add`: one rounding, by the
//! FMA unit where the CPU has one, else by libm's exact `fma`, so every CPU gets the same bits),
//! the lanes folded in one fixed order ([`fold`]). A caller loads its dtype's elements into the
//! lanes (the native probe: sixteen lanes, two AVX-512 registers per sum) and calls [`step`] per
//! element and [`weigh_row`] per row; the result is a [`crate::Run`].

/// Accumulators per sum.
pub const LANES: usize = 16;

/// One finite element `x` of column weight `w` into its lane's sums.
#[inline(always)]
pub fn step(sum: &mut f64, sumsq: &mut f64, row_partial: &mut f64, x: f64, w: f64) {
    *sum += x;
    *sumsq = x.mul_add(x, *sumsq);
    *row_partial = x.mul_add(w, *row_partial);
}

/// A row's lane of weighted values, `row_partial`, times u(r) into the run's lane `partial`.
#[inline(always)]
pub fn weigh_row(partial: &mut f64, row_partial: f64, u: f64) {
    *partial = row_partial.mul_add(u, *partial);
}

/// The pairwise sum of the lanes, in one fixed order.
#[inline(always)]
pub fn fold(v: [f64; LANES]) -> f64 {
    let mut half = [0.0; LANES / 2];
    for k in 0..LANES / 2 {
        half[k] = v[k] + v[k + LANES / 2];
    }
    ((half[0] + half[4]) + (half[2] + half[6])) + ((half[1] + half[5]) + (half[3] + half[7]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_step_is_fused() {
        // (1 + 2⁻³⁰)² = 1 + 2⁻²⁹ + 2⁻⁶⁰: the last term survives only without a rounding
        // between the product and the sum.
        let x = 1.0 + 2f64.powi(-30);
        let (mut sum, mut sumsq, mut partial) = (0.0, -(1.0 + 2f64.powi(-29)), 0.0);
        step(&mut sum, &mut sumsq, &mut partial, x, x);
        assert_eq!(sumsq, 2f64.powi(-60), "one rounding at the end");
        assert_eq!((sum, partial), (x, 1.0 + 2f64.powi(-29)));
        let mut lanes = [0.0; LANES];
        lanes
            .iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = i as f64);
        assert_eq!(fold(lanes), 120.0);
    }
}
