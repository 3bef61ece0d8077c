//! The probe's statistics (docs/manifest.md, "stats") of a saved tensor, computed here from the
//! file: a windowed dump records none. The definitions, the accumulators and the checksum's
//! weights are the `dump_stats` crate's, the native probe's own.
//!
//! One pass over the stored elements in logical order, in `f64`, element by element
//! ([`Acc::take`]), cut into chunks of [`dump_stats::CHUNK`] elements that rayon's threads
//! reduce; the chunks' partial results are merged in chunk order, so equal tensors give
//! bit-equal statistics whatever the thread count. The native probe sums runs of all-finite
//! elements in lanes with fused multiply-adds instead, so the two agree within the crate's
//! rounding bound, not to the bit (docs/windowed.md, "Statistics").

use std::ops::Range;
use std::path::Path;

use dump_stats::{Acc, Summary, col_weight, row_weight};
use rayon::prelude::*;

use crate::model::dump::Stats;
use crate::model::io::MapChoice;
use crate::model::tensor::{DType, TensorEntry, TensorFile, TensorView};

/// Elements per chunk: the definition's (a chunk's sequential sum is what its rounding bound
/// counts), large enough that a chunk outweighs scheduling it.
const CHUNK: usize = dump_stats::CHUNK as usize;

/// What one tensor file holds, as read for a record.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// `None` for a tensor without elements (as the probe writes it).
    pub stats: Option<Stats>,
    /// The stored dtype, as the file holds it (checked against `storedDtype`).
    pub dtype: DType,
    /// The stored shape in elements, as the file holds it (a flat prefix for a truncated
    /// tensor): the record's shape when the manifest gives none; its element count is checked
    /// against `storedShape`.
    pub shape: Vec<usize>,
}

/// Opens `path` with the project's safe reader (mapped under `map`) and reduces the tensor in it: the only one,
/// or, in a file of several, the one saved under `name`.
///
/// # Errors
/// The reader's problem (cannot open, not a torch.save or safetensors file, damaged), or a
/// file that holds no tensor, or several and none named `name`. The path is not repeated.
pub fn measure(path: &Path, name: &str, map: MapChoice) -> Result<Measured, String> {
    let file = TensorFile::open_with(path, map).map_err(|e| e.problem)?;
    let entry = pick(&file, name)?;
    let view = file.view(entry);
    Ok(Measured {
        stats: reduce(&view),
        dtype: entry.dtype,
        shape: entry.shape.clone(),
    })
}

fn pick<'f>(file: &'f TensorFile, name: &str) -> Result<&'f TensorEntry, String> {
    match file.entries.as_slice() {
        [] => Err("the file holds no tensor".into()),
        [only] => Ok(only),
        many => many
            .iter()
            .find(|e| e.key == name || e.key.is_empty())
            .ok_or_else(|| {
                format!(
                    "the file holds {} tensors and none is named {name:?}",
                    many.len()
                )
            }),
    }
}

/// The record's statistics from the definition's [`Summary`].
fn stats(s: Summary) -> Stats {
    Stats {
        nan_count: s.nan_count,
        inf_count: s.inf_count,
        finite_count: Some(s.finite_count),
        max_abs: s.max_abs,
        min: s.min,
        max: s.max,
        mean: s.mean,
        l2: Some(s.l2),
        pos_checksum: Some(s.pos_checksum),
        counts_known: true,
        reduced_in_dtype: false,
    }
}

/// The statistics of `view`'s elements; `None` when it has none. Integers and bools count as
/// their values, never as NaN or infinity.
pub fn reduce(view: &TensorView) -> Option<Stats> {
    let numel = view.numel();
    if numel == 0 {
        return None;
    }
    // pos_checksum sees the tensor as [rows, cols]: cols the last dimension (1 for 0-d).
    let cols = view.shape().last().copied().unwrap_or(1);
    let summary = dump_stats::summarize(|scale| {
        if numel <= CHUNK {
            return reduce_range(view, 0..numel, cols, scale);
        }
        let mut parts = Vec::new();
        (0..numel.div_ceil(CHUNK))
            .into_par_iter()
            .map(|c| reduce_range(view, c * CHUNK..numel.min((c + 1) * CHUNK), cols, scale))
            .collect_into_vec(&mut parts);
        parts.into_iter().fold(Acc::EMPTY, Acc::merge)
    });
    Some(stats(summary))
}

/// The accumulators of logical elements `range`, in order: each row's weighted values summed
/// first and weighted by u(r) when the row (or the range) ends; `scale` as [`Acc::take`]'s.
fn reduce_range(view: &TensorView, range: Range<usize>, cols: usize, scale: f64) -> Acc {
    let mut acc = Acc::EMPTY;
    let mut partial = 0.0;
    let (mut row, mut col) = (range.start / cols, range.start % cols);
    let mut add = |x: f64| {
        acc.take(&mut partial, x, col_weight(col as u64), scale);
        col += 1;
        if col == cols {
            acc.close_row(partial, row_weight(row as u64));
            partial = 0.0;
            col = 0;
            row += 1;
        }
    };
    let dtype = view.dtype();
    if view.is_contiguous() {
        // Logical order is storage order: walk the bytes.
        let size = dtype.size();
        let start = (view.storage_offset() + range.start) * size;
        let bytes = &view.storage()[start..start + range.len() * size];
        bytes
            .chunks_exact(size)
            .for_each(|element| add(dtype.decode(element)));
    } else {
        range.for_each(|i| add(view.get(i)));
    }
    if col != 0 {
        // A row cut by the range's end: its piece is closed here, the rest in the next range.
        acc.close_row(partial, row_weight(row as u64));
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    // The weights at usize positions, as these tests index them.
    fn row_weight(row: usize) -> f64 {
        dump_stats::row_weight(row as u64)
    }

    fn col_weight(col: usize) -> f64 {
        dump_stats::col_weight(col as u64)
    }

    fn f32_bytes(values: &[f32]) -> (Vec<u8>, DType) {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        (bytes, DType::Float32)
    }

    #[test]
    fn non_finite_values_are_counted_not_summed() {
        let values = [1.0, f32::NAN, -3.0, f32::INFINITY, 2.0, f32::NEG_INFINITY];
        let (bytes, dtype) = f32_bytes(&values);
        let view = TensorView::new(dtype, vec![2, 3], vec![3, 1], 0, &bytes).unwrap();
        let s = reduce(&view).unwrap();
        assert_eq!((s.nan_count, s.inf_count, s.finite_count), (1, 2, Some(3)));
        assert_eq!(
            (s.min, s.max, s.max_abs),
            (Some(-3.0), Some(2.0), Some(3.0))
        );
        assert_eq!(s.mean, Some(0.0));
        assert_eq!(s.l2, Some(14f64.sqrt()));
        // 1 at [0,0], -3 at [0,2], 2 at [1,1]; each row's weighted sum weighted by u(r) once
        // (dump_stats' order: 1 ulp from the element-by-element x·u·v of before).
        let expected = (1.0 * col_weight(0) + -3.0 * col_weight(2)) * row_weight(0)
            + 2.0 * col_weight(1) * row_weight(1);
        assert_eq!(s.pos_checksum, Some(expected));
    }

    #[test]
    fn all_non_finite_leaves_values_undefined_and_empty_has_no_stats() {
        let (bytes, dtype) = f32_bytes(&[f32::NAN, f32::NAN]);
        let view = TensorView::new(dtype, vec![2], vec![1], 0, &bytes).unwrap();
        let s = reduce(&view).unwrap();
        assert_eq!((s.nan_count, s.finite_count), (2, Some(0)));
        assert_eq!((s.min, s.mean, s.max_abs), (None, None, None));
        assert_eq!((s.l2, s.pos_checksum), (Some(0.0), Some(0.0)));
        let empty = TensorView::new(dtype, vec![0, 4], vec![4, 1], 0, &[]).unwrap();
        assert_eq!(reduce(&empty), None);
    }

    #[test]
    fn strided_views_read_in_logical_order() {
        // The transpose of [[0, 1, 2], [3, 4, 5]]: logical [[0, 3], [1, 4], [2, 5]].
        let (bytes, dtype) = f32_bytes(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let view = TensorView::new(dtype, vec![3, 2], vec![1, 3], 0, &bytes).unwrap();
        let s = reduce(&view).unwrap();
        let logical = [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]];
        let mut expected = 0.0;
        for (r, row) in logical.iter().enumerate() {
            for (c, x) in row.iter().enumerate() {
                expected += x * row_weight(r) * col_weight(c);
            }
        }
        assert_eq!(s.pos_checksum, Some(expected));
        assert_eq!(s.mean, Some(2.5));
    }

    #[test]
    fn chunked_reduction_is_deterministic_and_matches_one_pass() {
        // Rows of 17 across chunk borders, the last chunk partly filled.
        let rows = 3 * CHUNK / 17 + 5;
        let n = rows * 17;
        let values: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 1000) as f32 / 7.0 - 60.0)
            .collect();
        let (bytes, dtype) = f32_bytes(&values);
        let view = TensorView::new(dtype, vec![rows, 17], vec![17, 1], 0, &bytes).unwrap();
        let a = reduce(&view).unwrap();
        let b = reduce(&view).unwrap();
        assert_eq!(a, b);
        let one = stats(dump_stats::summarize(|scale| {
            reduce_range(&view, 0..n, 17, scale)
        }));
        assert_eq!(a.finite_count, Some(n as u64));
        assert_eq!((a.min, a.max), (one.min, one.max));
        let close = |x: Option<f64>, y: Option<f64>| {
            let (x, y) = (x.unwrap(), y.unwrap());
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
        };
        assert!(close(a.mean, one.mean) && close(a.l2, one.l2));
        assert!(close(a.pos_checksum, one.pos_checksum));
    }

    #[test]
    fn integers_and_bools_are_values() {
        let bytes: Vec<u8> = [-2i64, 5, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let view = TensorView::new(DType::Int64, vec![3], vec![1], 0, &bytes).unwrap();
        let s = reduce(&view).unwrap();
        assert_eq!(
            (s.min, s.max, s.max_abs, s.nan_count),
            (Some(-2.0), Some(5.0), Some(5.0), 0)
        );
        let flags = [1u8, 0, 1, 1];
        let view = TensorView::new(DType::Bool, vec![4], vec![1], 0, &flags).unwrap();
        assert_eq!(reduce(&view).unwrap().mean, Some(0.75));
    }
}
