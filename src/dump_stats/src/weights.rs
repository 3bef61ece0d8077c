//! The position checksum's weights: u(r) = ((r+1)·[`ROW_MUL`] mod 2³²)/2³² for matrix row r and
//! v(c) = ((c+1)·[`COL_MUL`] mod 2³²)/2³² for column c, both 0-based. Each is a multiple of 2⁻³²
//! in [0, 1) and exact in `f64`, so every implementation that follows these formulas has the
//! same weights to the bit (`assets/dump_probe.py` computes them in torch and Triton from the
//! same constants; `tests/stat_definitions.rs` checks them).
//!
//! Why these: a pseudo-random function of the position, fixed, so that values moved without
//! changing their multiset (a wrong block table, a misplaced cache write) change the sum; the
//! separable form u(r)·v(c) makes it one matrix-vector product on a device.

/// The row multiplier: Knuth's multiplicative hash constant, ⌊2³²/φ⌋.
pub const ROW_MUL: u64 = 2_654_435_761;

/// The column multiplier: xxHash32's second prime.
pub const COL_MUL: u64 = 2_246_822_519;

/// 2³², the modulus and the divisor of both weights.
pub const TWO_POW_32: u64 = 1 << 32;

const TWO_POW_MINUS_32: f64 = 1.0 / TWO_POW_32 as f64;

/// The weight of position `k` (0-based) for `multiplier`: ((k+1)·multiplier mod 2³²)/2³², exact.
#[inline(always)]
pub fn weight(k: u64, multiplier: u64) -> f64 {
    ((k.wrapping_add(1)).wrapping_mul(multiplier) & (TWO_POW_32 - 1)) as f64 * TWO_POW_MINUS_32
}

/// u(r), the weight of matrix row `row` (0-based).
#[inline(always)]
pub fn row_weight(row: u64) -> f64 {
    weight(row, ROW_MUL)
}

/// v(c), the weight of column `col` (0-based).
#[inline(always)]
pub fn col_weight(col: u64) -> f64 {
    weight(col, COL_MUL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_the_stated_fractions() {
        assert_eq!(row_weight(0), 2_654_435_761.0 / 4_294_967_296.0);
        assert_eq!(col_weight(0), 2_246_822_519.0 / 4_294_967_296.0);
        // (2·ROW_MUL) mod 2³², divided by 2³²: the same bits as a division.
        assert_eq!(
            row_weight(1),
            ((2 * ROW_MUL) % TWO_POW_32) as f64 / TWO_POW_32 as f64
        );
        for k in [0, 1, 7, 1 << 20, u64::MAX - 1] {
            let (u, v) = (row_weight(k), col_weight(k));
            assert!((0.0..1.0).contains(&u) && (0.0..1.0).contains(&v));
        }
    }
}
