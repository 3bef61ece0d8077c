//! A forward's row map (`dp_arm_rows`): which request and token position each row of its
//! token-row tensors holds, in the engine's row order after the batch is condensed
//! (docs/manifest.md, "Token rows"; dump_probe.py's `arm(label, rows=[...])`).

/// The most rows a forward's map may hold (16,777,216: far beyond a serving engine's tokens
/// per forward). A count from C is input: a larger one is refused, never allocated (a failed
/// allocation would abort the host process).
pub const MAX_ROWS: u64 = 1 << 24;

/// One entry: `count` rows of one request (or padding), at consecutive positions from
/// `first_position` or at the listed `positions`.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The request; `None` for padding rows (a graph's fixed batch), never compared.
    pub request: Option<String>,
    /// The first row's 0-based token position in its request.
    pub first_position: u64,
    /// Rows.
    pub count: u64,
    /// Each row's position, where the rows are not consecutive.
    pub positions: Option<Vec<u64>>,
    /// Each row's token id, where given.
    pub token_ids: Option<Vec<i64>>,
}

/// The rows of one forward.
#[derive(Debug, Clone, PartialEq)]
pub struct RowMap {
    entries: Vec<Entry>,
    /// Per row: its entry and its position as the map lists it (empty where `run` says).
    rows: Vec<(u32, u64)>,
    /// A map of one request at consecutive positions (`first`, `count`), the common case and
    /// the one `dp_arm` makes: its rows are known without a list (a 1-D capture of 16M
    /// elements teaches a forward of 16M rows, which a list would hold in 256 MB).
    run: Option<(u64, u64)>,
    /// A map `dp_arm` made without entries ([`RowMap::counted`]) whose row count the forward's
    /// first token-row capture has not told yet.
    pending: bool,
    /// Its first position was counted on over the label's earlier calls, not given.
    inferred: bool,
}

impl RowMap {
    /// The map of `entries`.
    ///
    /// # Errors
    /// An entry whose positions or token ids are not `count` many; a position beyond
    /// `i64::MAX`; more than [`MAX_ROWS`] rows in all.
    pub fn new(entries: Vec<Entry>) -> Result<RowMap, String> {
        let total = entries
            .iter()
            .try_fold(0u64, |sum, e| sum.checked_add(e.count))
            .filter(|&n| n <= MAX_ROWS)
            .ok_or_else(|| format!("more than {MAX_ROWS} rows in the map"))?;
        if let [e] = entries.as_slice() {
            let consecutive = e.request.is_some() && e.positions.is_none();
            let fits = e
                .first_position
                .checked_add(e.count)
                .is_some_and(|end| i64::try_from(end).is_ok());
            let ids_fit = e
                .token_ids
                .as_ref()
                .is_none_or(|ids| ids.len() as u64 == e.count);
            if consecutive && fits && ids_fit {
                let run = Some((e.first_position, e.count));
                return Ok(RowMap {
                    entries,
                    rows: Vec::new(),
                    run,
                    pending: false,
                    inferred: false,
                });
            }
        }
        let mut rows = Vec::with_capacity(total as usize);
        for (index, e) in entries.iter().enumerate() {
            let count =
                usize::try_from(e.count).map_err(|_| format!("entry {index}: too many rows"))?;
            if let Some(p) = &e.positions {
                if p.len() != count {
                    return Err(format!(
                        "entry {index}: {} positions for {count} rows",
                        p.len()
                    ));
                }
            }
            if let Some(ids) = &e.token_ids {
                if ids.len() != count {
                    return Err(format!(
                        "entry {index}: {} token ids for {count} rows",
                        ids.len()
                    ));
                }
            }
            for i in 0..count {
                let position = match &e.positions {
                    Some(p) => p[i],
                    None => e.first_position.saturating_add(i as u64),
                };
                if i64::try_from(position).is_err() {
                    return Err(format!("entry {index}: position {position} beyond 2^63"));
                }
                rows.push((index as u32, position));
            }
        }
        Ok(RowMap {
            entries,
            rows,
            run: None,
            pending: false,
            inferred: false,
        })
    }

    /// The map of a forward armed without one (`dp_arm`): one request, the label, from
    /// `first_position` (counted on over the label's earlier calls), its row count told by
    /// the forward's first token-row capture ([`RowMap::learn`]), as dump_probe.py's.
    pub fn counted(request: String, first_position: u64) -> RowMap {
        RowMap {
            entries: vec![Entry {
                request: Some(request),
                first_position,
                count: 0,
                positions: None,
                token_ids: None,
            }],
            rows: Vec::new(),
            run: None,
            pending: true,
            inferred: true,
        }
    }

    /// Whether the row count is still to be learned ([`RowMap::counted`]).
    pub fn pending(&self) -> bool {
        self.pending
    }

    /// Whether the first position was counted on, not given.
    pub fn inferred(&self) -> bool {
        self.inferred
    }

    /// A [`RowMap::counted`] map's row count, from the forward's first token-row capture.
    ///
    /// # Errors
    /// More than [`MAX_ROWS`] rows, or positions beyond 2^63.
    pub fn learn(&mut self, count: u64) -> Result<(), String> {
        let mut entry = self.entries[0].clone();
        entry.count = count;
        let learned = RowMap::new(vec![entry])?;
        self.entries = learned.entries;
        self.rows = learned.rows;
        self.run = learned.run;
        self.pending = false;
        Ok(())
    }

    /// Each request's next position after this forward (its last row's position + 1): where
    /// the label's next forward armed without a map counts on from.
    pub fn request_ends(&self) -> Vec<(String, u64)> {
        self.entries
            .iter()
            .filter(|e| e.count > 0)
            .filter_map(|e| {
                let last = match &e.positions {
                    Some(p) => *p.iter().max()?,
                    None => e.first_position + e.count - 1,
                };
                Some((e.request.clone()?, last + 1))
            })
            .collect()
    }

    /// Rows in all.
    pub fn count(&self) -> u64 {
        match self.run {
            Some((_, count)) => count,
            None => self.rows.len() as u64,
        }
    }

    /// The positions of the first `k` rows (at most [`RowMap::count`]), -1 for padding rows:
    /// what [`crate::rows::row_stats`] weights by.
    pub fn positions(&self, k: u64) -> Vec<i64> {
        let k = k.min(self.count());
        match self.run {
            Some((first, _)) => (0..k).map(|i| (first + i) as i64).collect(),
            None => self.rows[..k as usize]
                .iter()
                .map(
                    |&(entry, position)| match self.entries[entry as usize].request {
                        Some(_) => position as i64,
                        None => -1,
                    },
                )
                .collect(),
        }
    }

    /// The rows (by index) whose listed positions lie in `first..=last`; `None` when that
    /// is every row (`DUMP_PROBE_ROW_POSITIONS`).
    pub fn kept(&self, (first, last): (u64, u64)) -> Option<Vec<usize>> {
        if let Some((start, count)) = self.run {
            // Consecutive positions start..start + count: the kept ones are one range.
            let lo = first.max(start);
            let hi = last.min(start.saturating_add(count).saturating_sub(1));
            if count > 0 && lo == start && hi == start + count - 1 {
                return None;
            }
            return Some(if lo > hi || count == 0 {
                Vec::new()
            } else {
                ((lo - start) as usize..=(hi - start) as usize).collect()
            });
        }
        let keep: Vec<usize> = (0..self.rows.len())
            .filter(|&i| (first..=last).contains(&self.rows[i].1))
            .collect();
        (keep.len() != self.rows.len()).then_some(keep)
    }

    /// `(entry, position)` of row `i` as the manifest lists it.
    pub fn listed(&self, i: usize) -> (u32, u64) {
        match self.run {
            Some((first, _)) => (0, first + i as u64),
            None => self.rows[i],
        }
    }

    /// The manifest's `map`: one `{"request", "first_position", "count"}` per entry, with
    /// `positions` and `token_ids` where given.
    pub fn manifest(&self) -> serde_json::Value {
        self.entries
            .iter()
            .map(|e| {
                let mut item = serde_json::json!({
                    "request": e.request,
                    "first_position": e.first_position,
                    "count": e.count,
                });
                if let Some(p) = &e.positions {
                    item["positions"] = serde_json::json!(p);
                }
                if let Some(ids) = &e.token_ids {
                    item["token_ids"] = serde_json::json!(ids);
                }
                item
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(request: Option<&str>, first: u64, count: u64) -> Entry {
        Entry {
            request: request.map(str::to_string),
            first_position: first,
            count,
            positions: None,
            token_ids: None,
        }
    }

    #[test]
    fn rows_follow_the_entries_and_padding_weighs_nothing() {
        let mut listed = entry(Some("r1"), 0, 2);
        listed.positions = Some(vec![7, 9]);
        let map = RowMap::new(vec![listed, entry(None, 0, 1), entry(Some("r0"), 3, 2)]).unwrap();
        assert_eq!(map.count(), 5);
        assert_eq!(map.positions(5), vec![7, 9, -1, 3, 4]);
        assert_eq!(map.positions(2), vec![7, 9]);
        assert_eq!(map.listed(2), (1, 0));
        assert_eq!(map.kept((0, 8)), Some(vec![0, 2, 3, 4]));
        assert_eq!(map.kept((0, 100)), None);
        assert_eq!(map.manifest()[0]["positions"], serde_json::json!([7, 9]));
        assert_eq!(map.manifest()[1]["request"], serde_json::Value::Null);
    }

    #[test]
    fn a_count_beyond_the_bound_is_refused_without_allocating() {
        let huge = vec![entry(Some("a"), 0, 1 << 62), entry(Some("b"), 0, 1 << 62)];
        assert_eq!(
            RowMap::new(huge).unwrap_err(),
            format!("more than {MAX_ROWS} rows in the map")
        );
    }

    #[test]
    fn lists_of_the_wrong_length_are_refused() {
        let mut e = entry(Some("r"), 0, 3);
        e.token_ids = Some(vec![1, 2]);
        assert_eq!(
            RowMap::new(vec![e]).unwrap_err(),
            "entry 0: 2 token ids for 3 rows"
        );
    }

    #[test]
    fn one_request_at_consecutive_positions_needs_no_list() {
        let map = RowMap::new(vec![entry(Some("r"), 10, 1 << 24)]).unwrap();
        assert_eq!(map.count(), 1 << 24);
        assert!(map.rows.is_empty());
        assert_eq!(map.positions(3), vec![10, 11, 12]);
        assert_eq!(map.listed(5), (0, 15));
        assert_eq!(map.kept((0, 12)), Some(vec![0, 1, 2]));
        assert_eq!(map.kept((0, u64::MAX)), None);
        assert_eq!(map.kept((0, 5)), Some(vec![]));
        assert_eq!(map.request_ends(), vec![("r".to_string(), 10 + (1 << 24))]);
        // The same answers as the listed form.
        let listed = RowMap::new(vec![entry(Some("r"), 10, 4), entry(None, 0, 0)]).unwrap();
        let run = RowMap::new(vec![entry(Some("r"), 10, 4)]).unwrap();
        assert_eq!(listed.positions(4), run.positions(4));
        assert_eq!(listed.kept((11, 12)), run.kept((11, 12)));
        assert_eq!(listed.listed(3), run.listed(3));
        assert_eq!(listed.request_ends(), run.request_ends());
    }
}
