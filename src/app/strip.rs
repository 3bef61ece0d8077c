//! Range-maximum indexes over the timeline, built once per window, so the strip plot and the
//! rank × stage overview cost the same per frame for 1,000 records or 1,000,000.

use crate::model::analysis::diff::{Cell, DiffReport};

/// Maximum of `values` over any index range in O(log n) (an iterative segment tree).
#[derive(Debug, Clone, Default)]
pub struct RangeMax {
    n: usize,
    tree: Vec<f32>,
}

impl RangeMax {
    /// Builds the index; `None` values never win a maximum.
    pub fn new(values: impl ExactSizeIterator<Item = Option<f64>>) -> RangeMax {
        let n = values.len();
        let mut tree = vec![f32::NEG_INFINITY; 2 * n];
        for (i, v) in values.enumerate() {
            tree[n + i] = v.map_or(f32::NEG_INFINITY, |v| v as f32);
        }
        for i in (1..n).rev() {
            tree[i] = tree[2 * i].max(tree[2 * i + 1]);
        }
        RangeMax { n, tree }
    }

    /// Largest value in `[start, end)`; `None` when the range is empty or holds no values.
    pub fn max(&self, start: usize, end: usize) -> Option<f64> {
        let (mut lo, mut hi) = (start.min(self.n) + self.n, end.min(self.n) + self.n);
        let mut best = f32::NEG_INFINITY;
        while lo < hi {
            if lo & 1 == 1 {
                best = best.max(self.tree[lo]);
                lo += 1;
            }
            if hi & 1 == 1 {
                hi -= 1;
                best = best.max(self.tree[hi]);
            }
            lo /= 2;
            hi /= 2;
        }
        (best > f32::NEG_INFINITY).then_some(f64::from(best))
    }

    /// Smallest and largest value overall, for the plot's scale.
    pub fn range(&self) -> Option<(f64, f64)> {
        let values = self.tree[self.n..].iter().filter(|v| v.is_finite());
        let (lo, hi) = values.fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
        (lo <= hi).then(|| (f64::from(lo), f64::from(hi)))
    }
}

/// Resolution of the precomputed rank × stage overview (buckets per rank).
pub const OVERVIEW_BUCKETS: usize = 1024;

/// Per rank, the worst cell state in each of up to [`OVERVIEW_BUCKETS`] stage buckets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overview {
    pub ranks: Vec<u32>,
    pub stages: usize,
    /// `cells[rank index][bucket]`.
    pub cells: Vec<Vec<Cell>>,
}

impl Overview {
    /// Compresses the diff's rank × stage table.
    pub fn of(report: &DiffReport) -> Overview {
        let stages = report.stages.len();
        let buckets = stages.clamp(1, OVERVIEW_BUCKETS);
        let mut out = Overview {
            ranks: Vec::new(),
            stages,
            cells: Vec::new(),
        };
        for (&rank, row) in &report.table {
            let mut cells = vec![Cell::Agrees; buckets];
            let mut seen = vec![false; buckets];
            for (i, &cell) in row.iter().enumerate() {
                let b = i * buckets / stages.max(1);
                if !seen[b] || cell.severity() > cells[b].severity() {
                    cells[b] = cell;
                    seen[b] = true;
                }
            }
            out.ranks.push(rank);
            out.cells.push(cells);
        }
        out
    }

    /// The worst state of `rank_index` over the stage fraction `[from, to)` (0..1).
    pub fn worst(&self, rank_index: usize, from: f64, to: f64) -> Option<Cell> {
        let row = self.cells.get(rank_index)?;
        let n = row.len();
        let lo = ((from * n as f64) as usize).min(n.saturating_sub(1));
        let hi = ((to * n as f64).ceil() as usize).clamp(lo + 1, n);
        row[lo..hi].iter().copied().max_by_key(|&c| c.severity())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_max_matches_a_scan() {
        let values: Vec<Option<f64>> = (0..1000)
            .map(|i| {
                if i % 7 == 0 {
                    None
                } else {
                    Some(((i * 37) % 101) as f64)
                }
            })
            .collect();
        let index = RangeMax::new(values.iter().copied());
        for (start, end) in [(0, 1000), (3, 4), (7, 8), (10, 500), (999, 1000), (5, 5)] {
            let expected = values[start..end]
                .iter()
                .flatten()
                .copied()
                .reduce(f64::max);
            assert_eq!(index.max(start, end), expected, "{start}..{end}");
        }
        assert_eq!(index.range(), Some((0.0, 100.0)));
    }
}
