//! What one pass over a tensor yields: the shape of the API that per-row statistics will
//! extend (designed here, not built).

/// A dimension of a tensor's logical shape, 0-based: the axis per-row statistics are kept
/// along (tokens: usually 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Axis(pub usize);

impl Axis {
    /// The number of rows along this axis of `shape` (a vector of that many entries per
    /// statistic); `None` when the tensor has no such dimension.
    pub fn rows(self, shape: &[u64]) -> Option<u64> {
        shape.get(self.0).copied()
    }
}

/// What one reduction of a tensor yields.
///
/// Only [`Reduction::Whole`] is built. Per-row statistics will be a variant
/// `PerRow(Axis, &'static [Stat])`: the same single pass, yielding beside the whole tensor's
/// [`crate::Summary`] one [`crate::Acc`] per index along the [`Axis`] (merged in index order
/// with [`crate::Acc::merge`], so chunking stays free), of which the named statistics are kept
/// as a small vector per record. Whatever walks the elements (the native probe's chunks, the
/// windowed reader's ranges) already knows each element's matrix row; per-row adds the map from
/// that row (or, for the last axis, the column) to the index along the axis. The manifest will
/// name the axis and the statistics beside `stat_names` (docs/manifest.md), and old readers
/// ignore the new field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Reduction {
    /// One [`crate::Summary`] for the whole tensor.
    #[default]
    Whole,
}
