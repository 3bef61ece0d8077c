//! Forwards paired whole by the rows they hold: a decode step is call 2 after a whole prefill
//! and call 4 after a three-chunk one, and they pair all the same.

use super::plan::Map;
use super::requests::{self, SideRequests};
use crate::model::dump::Window;

/// The rows each window holds, as (matched pair, position) sorted, or `None` where a row
/// belongs to a request without a partner (the window cannot pair whole).
fn row_set(w: &Window, pair_of: &Map<&str, u32>) -> Option<Vec<(u32, u64)>> {
    let rows = w.token_rows.as_ref()?;
    let mut set = Vec::new();
    for (entry, position) in rows.forward_rows() {
        let Some(request) = &rows.map[entry as usize].request else {
            continue; // padding: never compared
        };
        set.push((*pair_of.get(request.as_str())?, position));
    }
    set.sort_unstable();
    Some(set)
}

/// Pairs A's windows with B's that hold the same matched (request, position) rows and no
/// rows of unmatched requests, the same rank first: `(a index, b index)` into the given
/// slices. Windows without token rows are left to the other pairing.
pub fn pair_by_rows(a: &[Window], b: &[Window]) -> Vec<(usize, usize)> {
    let (ra, rb) = (
        SideRequests::of(&a.iter().collect::<Vec<_>>()),
        SideRequests::of(&b.iter().collect::<Vec<_>>()),
    );
    let matches = requests::match_requests(&ra, &rb);
    let mut pair_a: Map<&str, u32> = Map::default();
    let mut pair_b: Map<&str, u32> = Map::default();
    for (n, (i, j, _)) in matches.iter().enumerate() {
        pair_a.insert(ra.names[*i].as_str(), n as u32);
        pair_b.insert(rb.names[*j].as_str(), n as u32);
    }
    let sets_b: Vec<Option<Vec<(u32, u64)>>> = b.iter().map(|w| row_set(w, &pair_b)).collect();
    let mut used = vec![false; b.len()];
    let mut out = Vec::new();
    for (i, w) in a.iter().enumerate() {
        let Some(set) = row_set(w, &pair_a).filter(|s| !s.is_empty()) else {
            continue;
        };
        let candidates = |same_rank: bool| {
            (0..b.len()).find(|&j| {
                !used[j] && (!same_rank || b[j].rank == w.rank) && sets_b[j].as_ref() == Some(&set)
            })
        };
        if let Some(j) = candidates(true).or_else(|| candidates(false)) {
            used[j] = true;
            out.push((i, j));
        }
    }
    out
}
