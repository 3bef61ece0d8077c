//! Per-token-row statistics of one host view (`dp_row_stats`): the five values of
//! [`dump_stats::ROW_STAT_NAMES`] per token row, the definitions of dump_stats's "Per-row
//! statistics of token rows". A token row is `k` rows of the view's matrix `[rows·k, cols]`
//! ([`row_cols`]); a contiguous row of finite values is one vectorized pass
//! ([`crate::stats::rows_fast`], the pass `dp_summarize` makes over whole matrix rows) with
//! the matrix rows weighted at the token's absolute position; a row holding a NaN or an
//! infinity, or a strided view, is read element by element.

use dump_stats::{COL_MUL, ROW_MUL, weight};

use crate::dtype::{self, Dtype, Element};
use crate::stats::{WEIGHT_TABLE_MAX, column_table, row_base, rows_fast};
use crate::view::View;

/// The column count of the matrix view whose rows make up the token rows of a view with `m`
/// elements per token row: its last dimension's size when that divides `m` and the view has
/// two dimensions or more, else 1 (a token row of a 1-D view, or of `[batch, seq]` with both
/// dimensions tokens, is one element). dump_probe.py's `_row_cols` is the same rule.
pub fn row_cols(view: &View, m: u64) -> u64 {
    let last = if view.shape.len() >= 2 {
        view.shape[view.shape.len() - 1]
    } else {
        1
    };
    if last > 0 && m % last == 0 && m >= last {
        last
    } else {
        1
    }
}

/// Values per token row in `out`.
pub const WIDTH: usize = dump_stats::ROW_STAT_NAMES.len();

/// Writes the statistics of `rows` token rows of `view` (its logical elements in row-major
/// order, `numel / rows` to a row) into `out` (`rows × WIDTH` float32); token row r holds the
/// token at absolute position `positions[r]` (negative: padding, whose checksum is 0), and
/// its matrix row j is weighted u(position·k + j).
///
/// # Errors
/// `rows` is 0 or does not divide the view's elements, or `row_weights` / `out` are shorter
/// than `rows` asks.
///
/// # Panics
/// When `staged` is shorter than the view's span (the caller's bug: [`View::check`] bounds it).
pub fn row_stats(
    view: &View,
    staged: &[u8],
    rows: u64,
    positions: &[i64],
    out: &mut [f32],
) -> Result<(), String> {
    row_stats_split(view, staged, rows, positions, out, None)
}

/// [`row_stats`] of a slice of the last dimension (`split`: a column-parallel shard, `tp:-1`):
/// each column weighted at the full tensor's column index, so the shards' rows add up to the
/// unsharded row (dump_probe.py's `_row_coordinates` for that case).
///
/// # Errors
/// As [`row_stats`], and a `split` of another dimension than the last, or of a last dimension
/// that is not the token rows' columns ([`row_cols`]): slices along the token dimensions or
/// between them and the last are not written natively.
pub fn row_stats_split(
    view: &View,
    staged: &[u8],
    rows: u64,
    positions: &[i64],
    out: &mut [f32],
    split: Option<&crate::stats::Split>,
) -> Result<(), String> {
    if rows == 0 || view.numel % rows != 0 {
        return Err(format!(
            "{rows} token rows do not divide a view of {} elements",
            view.numel
        ));
    }
    if (positions.len() as u64) < rows || (out.len() as u64) < rows * WIDTH as u64 {
        return Err("positions or out shorter than rows".to_string());
    }
    if let Some(split) = split {
        let last = view.shape.len().checked_sub(1);
        let cols = row_cols(view, view.numel / rows);
        if Some(split.dim) != last || view.shape.last().copied() != Some(cols) {
            return Err(format!(
                "a slice of dimension {} is not the token rows' columns: its rows are not written natively",
                split.dim
            ));
        }
    }
    assert!(
        staged.len() as u64 >= view.span_bytes(),
        "staging shorter than the span"
    );
    let each = match view.dtype {
        Dtype::Float32 => rows_of::<dtype::F32>,
        Dtype::Float16 => rows_of::<dtype::F16>,
        Dtype::Bfloat16 => rows_of::<dtype::BF16>,
        Dtype::Float64 => rows_of::<dtype::F64>,
        Dtype::Float8E4m3fn => rows_of::<dtype::E4m3fn>,
        Dtype::Float8E5m2 => rows_of::<dtype::E5m2>,
        Dtype::Int8 => rows_of::<dtype::I8>,
        Dtype::Int16 => rows_of::<dtype::I16>,
        Dtype::Int32 => rows_of::<dtype::I32>,
        Dtype::Int64 => rows_of::<dtype::I64>,
        Dtype::Uint8 => rows_of::<dtype::U8>,
        Dtype::Bool => rows_of::<dtype::Bool>,
    };
    each(view, staged, rows, positions, out, split);
    Ok(())
}

/// One token row's accumulators, element by element.
#[derive(Default)]
struct Slow {
    nonfinite: f64,
    max_abs: f64,
    sum: f64,
    sumsq: f64,
    partial: f64,
}

impl Slow {
    #[inline(always)]
    fn take(&mut self, x: f64, v: f64) {
        if x.is_finite() {
            self.max_abs = self.max_abs.max(x.abs());
            self.sum += x;
            self.sumsq = x.mul_add(x, self.sumsq);
            self.partial = x.mul_add(v, self.partial);
        } else {
            self.nonfinite += 1.0;
        }
    }
}

fn rows_of<E: Element>(
    view: &View,
    staged: &[u8],
    rows: u64,
    positions: &[i64],
    out: &mut [f32],
    split: Option<&crate::stats::Split>,
) {
    let m = view.numel / rows;
    let cols = row_cols(view, m);
    let k = m / cols;
    let owned: Vec<f64>;
    let weights: &[f64] = match split {
        // A column-parallel slice: each column at its full tensor's index.
        Some(split) => {
            owned = (0..cols)
                .map(|c| weight(split.global(c, cols), COL_MUL))
                .collect();
            &owned
        }
        None if cols <= WEIGHT_TABLE_MAX => &column_table()[..cols as usize],
        None => {
            owned = (0..cols).map(|c| weight(c, COL_MUL)).collect();
            &owned
        }
    };
    let size = E::SIZE;
    let contiguous = view.is_contiguous();
    let view_cols = view.cols().max(1);
    let inner = view.strides.last().copied().unwrap_or(0) as usize;
    for r in 0..rows {
        let slot = &mut out[r as usize * WIDTH..(r as usize + 1) * WIDTH];
        let position = positions[r as usize];
        // u of matrix row j of this token row: at the token's position; 0 for padding.
        let u = |j: u64| {
            if position < 0 {
                0.0
            } else {
                weight(position as u64 * k + j, ROW_MUL)
            }
        };
        if contiguous {
            let start = (r * m) as usize * size;
            let bytes = &staged[start..start + m as usize * size];
            if let Some(run) = rows_fast::<E>(bytes, cols as usize, weights, 0, &u) {
                let max_abs = run.min.abs().max(run.max.abs());
                slot.copy_from_slice(&[
                    0.0,
                    max_abs as f32,
                    run.sum as f32,
                    run.sumsq as f32,
                    run.partial as f32,
                ]);
                continue;
            }
        }
        let mut acc = Slow::default();
        for j in 0..k {
            let mut row = Slow::default();
            for (c, &v) in weights.iter().enumerate() {
                let g = r * m + j * cols + c as u64;
                let offset = if contiguous {
                    g as usize
                } else {
                    row_base(view, g / view_cols) as usize + (g % view_cols) as usize * inner
                };
                row.take(E::load(&staged[offset * size..offset * size + size]), v);
            }
            acc.nonfinite += row.nonfinite;
            acc.max_abs = acc.max_abs.max(row.max_abs);
            acc.sum += row.sum;
            acc.sumsq += row.sumsq;
            acc.partial = row.partial.mul_add(u(j), acc.partial);
        }
        slot.copy_from_slice(&[
            acc.nonfinite as f32,
            acc.max_abs as f32,
            acc.sum as f32,
            acc.sumsq as f32,
            acc.partial as f32,
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// The definitions, in f64, of one token row of `k` matrix rows of `cols` at `position`.
    fn reference(row: &[f32], cols: usize, position: u64) -> [f32; WIDTH] {
        let k = (row.len() / cols) as u64;
        let mut acc = Slow::default();
        for (i, &x) in row.iter().enumerate() {
            let (j, c) = ((i / cols) as u64, (i % cols) as u64);
            acc.take(
                f64::from(x),
                weight(c, COL_MUL) * weight(position * k + j, ROW_MUL),
            );
        }
        [
            acc.nonfinite as f32,
            acc.max_abs as f32,
            acc.sum as f32,
            acc.sumsq as f32,
            acc.partial as f32,
        ]
    }

    #[test]
    fn contiguous_rows_with_and_without_non_finite_values() {
        // 3 token rows of 2 × 20 elements ([3, 2, 20]): rows hold 40 values each.
        let mut values: Vec<f32> = (0..120).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
        values[45] = f32::NAN;
        values[50] = f32::NEG_INFINITY;
        let view = View::for_tests(Dtype::Float32, &[3, 2, 20], &[40, 20, 1]);
        let positions = [7, 8, 9];
        let mut out = [0f32; 3 * WIDTH];
        row_stats(&view, &f32_bytes(&values), 3, &positions, &mut out).unwrap();
        for r in 0..3 {
            let want = reference(&values[r * 40..(r + 1) * 40], 20, positions[r] as u64);
            let got = &out[r * WIDTH..(r + 1) * WIDTH];
            assert_eq!(got[0], want[0], "row {r}");
            for k in 1..WIDTH {
                assert!(
                    (got[k] - want[k]).abs() <= 1e-5 * want[k].abs().max(1.0),
                    "row {r} stat {k}: {got:?} vs {want:?}"
                );
            }
        }
        assert_eq!(out[WIDTH], 2.0, "row 1 holds the NaN and the -inf");
    }

    #[test]
    fn a_transposed_view_reads_its_rows_in_logical_order() {
        // Logical [4, 3] over a [3, 4] buffer (strides [1, 4]).
        let buffer: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let view = View::for_tests(Dtype::Float32, &[4, 3], &[1, 4]);
        let mut out = [0f32; 4 * WIDTH];
        row_stats(&view, &f32_bytes(&buffer), 4, &[0, 1, 2, 3], &mut out).unwrap();
        // Logical row 1 is buffer elements 1, 5, 9.
        assert_eq!(out[WIDTH + 2], 15.0);
        assert_eq!(out[WIDTH + 1], 9.0);
    }

    #[test]
    fn the_rows_of_column_slices_add_up_to_the_unsliced_rows() {
        // [3, 8] split into two [3, 4] column slices (tp:1 over 2 ranks).
        let values: Vec<f32> = (0..24).map(|i| (i as f32 * 0.43).sin()).collect();
        let full = View::for_tests(Dtype::Float32, &[3, 8], &[8, 1]);
        let mut whole = [0f32; 3 * WIDTH];
        row_stats(&full, &f32_bytes(&values), 3, &[5, 6, 7], &mut whole).unwrap();
        let mut sums = [0f64; 3 * WIDTH];
        for rank in 0..2u64 {
            let piece: Vec<f32> = (0..3)
                .flat_map(|r| {
                    values[r * 8 + rank as usize * 4..r * 8 + rank as usize * 4 + 4].to_vec()
                })
                .collect();
            let view = View::for_tests(Dtype::Float32, &[3, 4], &[4, 1]);
            let split = crate::stats::Split {
                dim: 1,
                full: 8,
                offset: rank * 4,
                zigzag: false,
                rank,
                size: 2,
            };
            let mut out = [0f32; 3 * WIDTH];
            row_stats_split(
                &view,
                &f32_bytes(&piece),
                3,
                &[5, 6, 7],
                &mut out,
                Some(&split),
            )
            .unwrap();
            for (s, v) in sums.iter_mut().zip(out) {
                *s += f64::from(v);
            }
        }
        for r in 0..3 {
            for k in [2, 3, 4] {
                let (got, want) = (sums[r * WIDTH + k], f64::from(whole[r * WIDTH + k]));
                assert!(
                    (got - want).abs() < 1e-5,
                    "row {r} stat {k}: {got} vs {want}"
                );
            }
        }
        // A slice of the token dimension is refused.
        let rows_split = crate::stats::Split {
            dim: 0,
            full: 6,
            offset: 0,
            zigzag: false,
            rank: 0,
            size: 2,
        };
        let mut out = [0f32; 3 * WIDTH];
        assert!(
            row_stats_split(
                &full,
                &f32_bytes(&values),
                3,
                &[0, 1, 2],
                &mut out,
                Some(&rows_split)
            )
            .is_err()
        );
    }

    #[test]
    fn rows_that_do_not_divide_the_view_are_refused() {
        let view = View::for_tests(Dtype::Float32, &[5, 2], &[2, 1]);
        let mut out = [0f32; 3 * WIDTH];
        assert!(row_stats(&view, &f32_bytes(&[0.0; 10]), 3, &[0; 3], &mut out).is_err());
    }

    #[test]
    fn the_row_checksums_of_rows_from_position_0_add_up_to_pos_checksum() {
        let values: Vec<f32> = (0..60).map(|i| (i as f32 * 0.71).cos()).collect();
        let view = View::for_tests(Dtype::Float32, &[3, 4, 5], &[20, 5, 1]);
        let mut out = [0f32; 3 * WIDTH];
        row_stats(&view, &f32_bytes(&values), 3, &[0, 1, 2], &mut out).unwrap();
        let rows: f64 = (0..3).map(|r| f64::from(out[r * WIDTH + 4])).sum();
        let whole = crate::stats::summarize(&view, &f32_bytes(&values), None)
            .unwrap()
            .pos_checksum;
        assert!((rows - whole).abs() < 1e-5, "{rows} vs {whole}");
        // Padding rows weigh nothing.
        row_stats(&view, &f32_bytes(&values), 3, &[0, -1, 2], &mut out).unwrap();
        assert_eq!(out[WIDTH + 4], 0.0);
    }
}
