//! Strided views as sets of bytes, and when two views of one storage disagree.
//!
//! A record's view reads, for every index tuple `i < shape`, the element at
//! byte `data_ptr + Σ iₖ·strideₖ·element_size`. Two views of one storage
//! *alias* when those byte sets intersect. They *conflict* (stride
//! conflict) when they read the shared bytes through layouts that cannot
//! both describe one array; docs/scan.md states the rule with examples:
//!
//! * consistent if their canonical strides are equal ([`View::canonical`]:
//!   size-1 and stride-0 dimensions dropped, dimensions ordered by stride,
//!   adjacent dimensions that are contiguous with each other merged; sizes
//!   may differ). This
//!   covers the same view captured twice, slices of one layout
//!   (`cache[:t]` beside `cache`), contiguous reshapes (`[t, h·d]` beside
//!   `[t, h, d]`) and transposed views of one layout;
//! * consistent if one view's bytes are a subset of the other's: a strided
//!   sub-view inside a larger view (one head of a KV cache beside the cache);
//! * otherwise a conflict: a strided slice read as if contiguous, an NHD
//!   cache re-viewed as HND, a block table pointing two writers at one block.

/// Byte layout of one strided view. Units: `data_ptr` in bytes, `shape`
/// in elements, `stride` in elements, `element_size` in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// Address of element 0 (`storage_ptr + storage_offset × element_size`), bytes.
    pub data_ptr: u64,
    /// Bytes per element.
    pub element_size: u64,
    /// Size per dimension, elements.
    pub shape: Vec<u64>,
    /// Stride per dimension, elements, one per entry of `shape`: 0 for an expanded dimension;
    /// negative only in a hand-written manifest (torch makes none).
    pub stride: Vec<i64>,
}

/// Dimensions `(size, stride)` of a canonical layout, outermost first, strides in elements.
pub type Canonical = Vec<(u64, i64)>;

/// Most byte runs a view is expanded into for the subset test; beyond it the
/// test is not run and the pair counts as a conflict marked unchecked.
pub const MAX_RUNS: usize = 1 << 22;

/// How two overlapping views relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// Equal canonical strides: slices, reshapes or transposes of one array.
    SameLayout,
    /// Slices of one common strided array (e.g. `cache[:5]` and `cache[:, 0]`).
    SlicesOfOneLayout,
    /// The first view's bytes lie inside the second's (a strided sub-view).
    FirstInsideSecond,
    /// The second view's bytes lie inside the first's.
    SecondInsideFirst,
    /// The layouts disagree on the shared bytes.
    Conflict,
    /// Too many byte runs to test (see [`MAX_RUNS`]); treated as a conflict.
    Unchecked,
}

impl Relation {
    /// True for the relations that make a stride conflict.
    pub fn is_conflict(self) -> bool {
        matches!(self, Relation::Conflict | Relation::Unchecked)
    }
}

impl View {
    /// Number of elements, saturating at `u64::MAX` (a hand-written shape may claim more;
    /// zero stays exact, so `numel() == 0` tells an empty view).
    pub fn numel(&self) -> u64 {
        self.shape
            .iter()
            .fold(1u64, |n, &size| n.saturating_mul(size))
    }

    /// Half-open byte range `[lo, hi)` the view can touch; `None` for an empty view.
    ///
    /// Negative strides do not occur in torch, but a hand-written manifest
    /// may hold one, so both ends are computed.
    pub fn byte_range(&self) -> Option<(u64, u64)> {
        if self.numel() == 0 {
            return None;
        }
        // (2^64 - 1) * 2^63 fits in i128, sums of several do not: saturate, then clamp to u64.
        let (mut low, mut high) = (0i128, 0i128);
        for (&size, &stride) in self.shape.iter().zip(&self.stride) {
            let reach = i128::from(size - 1) * i128::from(stride);
            if reach < 0 {
                low = low.saturating_add(reach)
            } else {
                high = high.saturating_add(reach)
            }
        }
        let es = i128::from(self.element_size);
        let start = i128::from(self.data_ptr).saturating_add(low.saturating_mul(es));
        let end =
            i128::from(self.data_ptr).saturating_add(high.saturating_add(1).saturating_mul(es));
        Some((to_u64(start), to_u64(end)))
    }

    /// The canonical layout: dimensions of size 1 or stride 0 dropped (they add
    /// no bytes), the rest ordered by |stride| descending, and each dimension
    /// merged into the next outer one when `outer.stride == size·stride`.
    pub fn canonical(&self) -> Canonical {
        let mut dims: Vec<(u64, i64)> = self
            .shape
            .iter()
            .zip(&self.stride)
            .filter(|&(&size, &stride)| size > 1 && stride != 0)
            .map(|(&size, &stride)| (size, stride))
            .collect();
        dims.sort_by_key(|&(size, stride)| (std::cmp::Reverse(stride.unsigned_abs()), size));
        let mut merged: Canonical = Vec::with_capacity(dims.len());
        for (size, stride) in dims.into_iter().rev() {
            // Walking from the innermost dimension outwards.
            // In i128: a hand-written layout's size × stride may overflow i64, and a merged
            // size that would overflow u64 stays a separate dimension.
            match merged.last_mut() {
                Some(inner)
                    if i128::from(stride) == i128::from(inner.1) * i128::from(inner.0)
                        && inner.0.checked_mul(size).is_some() =>
                {
                    inner.0 *= size
                }
                _ => merged.push((size, stride)),
            }
        }
        merged.reverse();
        merged
    }

    /// The bytes the view touches as sorted, disjoint, non-adjacent half-open
    /// runs `[start, end)`; `None` when more than `limit` runs would be needed.
    pub fn byte_runs(&self, limit: usize) -> Option<Vec<(u64, u64)>> {
        if self.numel() == 0 {
            return Some(Vec::new());
        }
        let canonical = self.canonical();
        // The innermost canonical dimension of stride ±1 is one contiguous run.
        let (run_elems, outer): (u64, &[(u64, i64)]) = match canonical.last() {
            Some(&(size, 1)) => (size, &canonical[..canonical.len() - 1]),
            _ => (1, &canonical[..]),
        };
        let count = outer
            .iter()
            .try_fold(1u128, |n, &(s, _)| n.checked_mul(u128::from(s)))
            .filter(|&n| n <= limit as u128)?;
        let es = self.element_size as i128;
        let base = self.data_ptr as i128;
        let mut runs = Vec::with_capacity(count as usize);
        let mut index = vec![0u64; outer.len()];
        loop {
            let offset: i128 = index
                .iter()
                .zip(outer)
                .map(|(&i, &(_, stride))| i128::from(i) * i128::from(stride))
                .fold(0, i128::saturating_add);
            let start = base.saturating_add(offset.saturating_mul(es));
            runs.push((
                to_u64(start),
                to_u64(start.saturating_add(i128::from(run_elems) * es)),
            ));
            // Odometer over the outer dimensions.
            let mut d = outer.len();
            loop {
                if d == 0 {
                    return Some(normalize(runs));
                }
                d -= 1;
                index[d] += 1;
                if index[d] < outer[d].0 {
                    break;
                }
                index[d] = 0;
            }
        }
    }
}

/// A byte address computed in i128, clamped to the u64 address space.
fn to_u64(address: i128) -> u64 {
    address.clamp(0, i128::from(u64::MAX)) as u64
}

/// Sorts runs and merges overlapping or adjacent ones.
fn normalize(mut runs: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    runs.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
    for (start, end) in runs {
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

/// True when every byte of `inner` lies in `outer` (both normalized).
fn runs_inside(inner: &[(u64, u64)], outer: &[(u64, u64)]) -> bool {
    let mut j = 0;
    for &(start, end) in inner {
        while j < outer.len() && outer[j].1 <= start {
            j += 1;
        }
        match outer.get(j) {
            Some(&(o_start, o_end)) if o_start <= start && end <= o_end => {}
            _ => return false,
        }
    }
    true
}

/// True when the two views share at least one byte.
pub fn overlaps(a: &View, b: &View) -> bool {
    Expanded::new(a.clone()).overlaps(&Expanded::new(b.clone()))
}

/// A view whose byte runs are computed at most once: an alias group tests each member
/// against many others, and a hostile layout can need millions of runs.
#[derive(Debug, Clone)]
pub struct Expanded {
    /// The view itself.
    pub view: View,
    runs: std::cell::OnceCell<Option<Vec<(u64, u64)>>>,
}

impl Expanded {
    /// Wraps `view`; its byte runs are computed on first use.
    pub fn new(view: View) -> Expanded {
        Expanded {
            view,
            runs: std::cell::OnceCell::new(),
        }
    }

    /// [`View::byte_runs`] with [`MAX_RUNS`], cached.
    pub fn runs(&self) -> Option<&[(u64, u64)]> {
        self.runs
            .get_or_init(|| self.view.byte_runs(MAX_RUNS))
            .as_deref()
    }

    /// True when the two views share at least one byte.
    pub fn overlaps(&self, other: &Expanded) -> bool {
        let (Some((a_lo, a_hi)), Some((b_lo, b_hi))) =
            (self.view.byte_range(), other.view.byte_range())
        else {
            return false;
        };
        if a_lo >= b_hi || b_lo >= a_hi {
            return false;
        }
        // Ranges intersect; strided views may still interleave without sharing a byte.
        match (self.runs(), other.runs()) {
            (Some(ra), Some(rb)) => runs_intersect(ra, rb),
            _ => true,
        }
    }

    /// How the two views relate (call only for views that overlap).
    pub fn relation(&self, other: &Expanded) -> Relation {
        let (a, b) = (&self.view, &other.view);
        if a.element_size != b.element_size {
            // Bytes reinterpreted as another dtype: never one array.
            return Relation::Conflict;
        }
        // One logical shape read through two address maps that are not a permutation of each
        // other: the two stages believe they hold the same tensor but disagree on where each
        // element lives (an NHD cache re-viewed as HND, a strided slice read as contiguous).
        if same_shape_other_map(a, b) {
            return Relation::Conflict;
        }
        let strides = |v: &View| {
            v.canonical()
                .into_iter()
                .map(|(_, stride)| stride)
                .collect::<Vec<_>>()
        };
        if strides(a) == strides(b) {
            return Relation::SameLayout;
        }
        if slices_of_one_layout(a, b) {
            return Relation::SlicesOfOneLayout;
        }
        let (Some(ra), Some(rb)) = (self.runs(), other.runs()) else {
            return Relation::Unchecked;
        };
        // Strictly inside: equal byte sets through different maps are not a sub-view.
        if runs_inside(ra, rb) && ra != rb {
            Relation::FirstInsideSecond
        } else if runs_inside(rb, ra) && ra != rb {
            Relation::SecondInsideFirst
        } else {
            Relation::Conflict
        }
    }
}

/// Dimensions of size > 1 as (size, stride), in logical order.
fn significant(v: &View) -> Vec<(u64, i64)> {
    v.shape
        .iter()
        .zip(&v.stride)
        .filter(|&(&n, _)| n > 1)
        .map(|(&n, &s)| (n, s))
        .collect()
}

/// Same logical shape, different strides, and not a transpose (a permutation of
/// (size, stride) pairs that keeps the shape, as `x.t()` of a square `x`).
fn same_shape_other_map(a: &View, b: &View) -> bool {
    let (da, db) = (significant(a), significant(b));
    let shape = |d: &[(u64, i64)]| d.iter().map(|&(n, _)| n).collect::<Vec<_>>();
    if shape(&da) != shape(&db) || da == db {
        return false;
    }
    let (mut sa, mut sb) = (da.clone(), db.clone());
    sa.sort_unstable();
    sb.sort_unstable();
    sa != sb
}

/// True when both views are slices of one common strided array: the union of their
/// strides forms a divisibility chain, and no dimension of either view reaches past the
/// next coarser stride of the union (so no dimension wraps into another).
fn slices_of_one_layout(a: &View, b: &View) -> bool {
    let dims: Vec<(u64, i64)> = significant(a)
        .into_iter()
        .chain(significant(b))
        .filter(|&(_, s)| s != 0)
        .collect();
    if dims.iter().any(|&(_, s)| s < 0) {
        return false;
    }
    let mut strides: Vec<i64> = dims.iter().map(|&(_, s)| s).collect();
    strides.sort_unstable_by(|x, y| y.cmp(x));
    strides.dedup();
    if strides.windows(2).any(|w| w[0] % w[1] != 0) {
        return false;
    }
    dims.iter().all(|&(n, s)| {
        let coarser = strides.iter().rev().find(|&&t| t > s);
        coarser.is_none_or(|&t| i128::from(n) * i128::from(s) <= i128::from(t))
    })
}

fn runs_intersect(a: &[(u64, u64)], b: &[(u64, u64)]) -> bool {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].0 < b[j].1 && b[j].0 < a[i].1 {
            return true;
        }
        if a[i].1 <= b[j].1 { i += 1 } else { j += 1 }
    }
    false
}

/// How two views of one storage relate (call only for views that overlap).
pub fn relation(a: &View, b: &View) -> Relation {
    Expanded::new(a.clone()).relation(&Expanded::new(b.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(offset: u64, shape: &[u64], stride: &[i64]) -> View {
        View {
            data_ptr: 1000 + offset * 4,
            element_size: 4,
            shape: shape.to_vec(),
            stride: stride.to_vec(),
        }
    }

    // An NHD KV cache of 32 tokens, 2 heads, head_dim 64: strides [128, 64, 1].
    fn cache() -> View {
        view(0, &[32, 2, 64], &[128, 64, 1])
    }

    #[test]
    fn canonical_merges_contiguous_and_orders_by_stride() {
        assert_eq!(cache().canonical(), vec![(4096, 1)]);
        assert_eq!(
            view(0, &[2, 32, 64], &[64, 128, 1]).canonical(),
            vec![(4096, 1)]
        );
        assert_eq!(
            view(0, &[32, 1, 64], &[128, 64, 1]).canonical(),
            vec![(32, 128), (64, 1)]
        );
        assert_eq!(view(0, &[4, 1, 8], &[0, 5, 1]).canonical(), vec![(8, 1)]);
    }

    #[test]
    fn legitimate_aliases_do_not_conflict() {
        // A slice of the cache for the first 12 positions.
        assert_eq!(
            relation(&view(0, &[12, 2, 64], &[128, 64, 1]), &cache()),
            Relation::SameLayout
        );
        // The same view captured twice.
        assert_eq!(relation(&cache(), &cache()), Relation::SameLayout);
        // A contiguous reshape of one buffer: [32, 128] beside [32, 2, 64], [64, 64] beside [32, 128].
        assert_eq!(
            relation(&view(0, &[32, 128], &[128, 1]), &cache()),
            Relation::SameLayout
        );
        assert_eq!(
            relation(
                &view(0, &[64, 64], &[64, 1]),
                &view(0, &[32, 128], &[128, 1])
            ),
            Relation::SameLayout
        );
        // A transposed (HND-ordered) view of the NHD cache: same bytes, same array.
        assert_eq!(
            relation(&view(0, &[2, 32, 64], &[64, 128, 1]), &cache()),
            Relation::SameLayout
        );
        // One head of the cache: a strided sub-view inside the whole.
        assert_eq!(
            relation(&view(64, &[32, 1, 64], &[128, 64, 1]), &cache()),
            Relation::SlicesOfOneLayout
        );
        // Overlapping slices of one cache (positions 0..10 and 5..15).
        assert_eq!(
            relation(
                &view(0, &[10, 2, 64], &[128, 64, 1]),
                &view(5 * 128, &[10, 2, 64], &[128, 64, 1])
            ),
            Relation::SameLayout
        );
    }

    #[test]
    fn partial_slices_of_one_cache_do_not_conflict() {
        // A [16, 4, 32] cache: its first 5 positions, head 0, and the first half of every head.
        let cache_5 = view(0, &[5, 4, 32], &[128, 32, 1]);
        let head_0 = view(0, &[16, 32], &[128, 1]);
        let half = view(0, &[16, 4, 16], &[128, 32, 1]);
        assert_eq!(relation(&cache_5, &head_0), Relation::SlicesOfOneLayout);
        assert_eq!(relation(&head_0, &half), Relation::SlicesOfOneLayout);
        // A square transpose is the same array read the other way round.
        assert_eq!(
            relation(&view(0, &[64, 64], &[64, 1]), &view(0, &[64, 64], &[1, 64])),
            Relation::SameLayout
        );
    }

    #[test]
    fn a_full_cache_re_viewed_as_hnd_still_conflicts() {
        // Every slot written: both views cover the same bytes, through different maps.
        let writer = view(0, &[32, 2, 64], &[64, 2048, 1]);
        let reader = view(0, &[32, 2, 64], &[128, 64, 1]);
        assert_eq!(relation(&writer, &reader), Relation::Conflict);
    }

    #[test]
    fn strided_slice_read_as_contiguous_conflicts() {
        // x[:, :64] of a [16, 128] buffer, and a contiguous [16, 64] view of the same start.
        let strided = view(0, &[16, 64], &[128, 1]);
        let contiguous = view(0, &[16, 64], &[64, 1]);
        assert!(overlaps(&strided, &contiguous));
        assert_eq!(relation(&strided, &contiguous), Relation::Conflict);
    }

    #[test]
    fn nhd_cache_re_viewed_as_hnd_conflicts() {
        // The writer believes the NHD buffer is HND: cache.view(2, 32, 64)[:, 0:12].transpose(0, 1).
        let writer = view(0, &[12, 2, 64], &[64, 2048, 1]);
        let reader = view(0, &[13, 2, 64], &[128, 64, 1]);
        assert!(overlaps(&writer, &reader));
        assert_eq!(relation(&writer, &reader), Relation::Conflict);
    }

    #[test]
    fn interleaved_views_without_a_shared_byte_do_not_overlap() {
        // Head 0 and head 1 of the cache: byte ranges intersect, bytes do not.
        let head0 = view(0, &[32, 64], &[128, 1]);
        let head1 = view(64, &[32, 64], &[128, 1]);
        assert!(!overlaps(&head0, &head1));
        assert!(overlaps(&head0, &cache()));
    }

    #[test]
    fn byte_runs_and_ranges() {
        let head1 = view(64, &[2, 64], &[128, 1]);
        assert_eq!(head1.byte_range(), Some((1256, 1000 + (128 + 64 + 64) * 4)));
        assert_eq!(head1.byte_runs(10), Some(vec![(1256, 1512), (1768, 2024)]));
        assert_eq!(head1.byte_runs(1), None);
        assert_eq!(view(0, &[0, 4], &[4, 1]).byte_range(), None);
    }
}
