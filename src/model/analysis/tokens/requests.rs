//! Which request of A is which request of B: matched by their token ids over the positions
//! both sides hold (exactly, then by the longest common prefix), the request id a hint only,
//! since two runs name their requests differently (docs/diff.md, "Token rows").

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::dump::Window;

/// One side's requests: name → position → token id (`None` where the capture gave no ids).
#[derive(Debug, Default)]
pub struct SideRequests {
    /// Request names in first-seen order over the side's windows.
    pub names: Vec<String>,
    /// Per request (same index as `names`): position → token id where recorded.
    pub tokens: Vec<BTreeMap<u64, i64>>,
    /// Per request: every position any window holds.
    pub positions: Vec<BTreeMap<u64, ()>>,
}

impl SideRequests {
    /// The requests of every window with token rows.
    pub fn of(windows: &[&Window]) -> SideRequests {
        let mut side = SideRequests::default();
        for w in windows {
            let Some(rows) = &w.token_rows else { continue };
            for entry in &rows.map {
                let Some(name) = &entry.request else { continue };
                let index = side.index_or_insert(name);
                for i in 0..entry.count as usize {
                    let Some(p) = entry.position(i) else { break };
                    side.positions[index].insert(p, ());
                    if let Some(id) = entry.token_ids.as_ref().and_then(|ids| ids.get(i)) {
                        side.tokens[index].insert(p, *id);
                    }
                }
            }
        }
        side
    }

    /// The index of request `name`, added when new.
    pub fn index_or_insert(&mut self, name: &str) -> usize {
        match self.names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                self.names.push(name.to_string());
                self.tokens.push(BTreeMap::new());
                self.positions.push(BTreeMap::new());
                self.names.len() - 1
            }
        }
    }

    /// The index of request `name`, if the side has it.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }
}

/// How a request of A was matched with one of B.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchedBy {
    /// Every position both hold has the same token id.
    TokenIds,
    /// The ids agree up to `common_prefix_end` (exclusive) and differ there: rows from that
    /// position on are different inputs and not compared.
    LongestPrefix,
    /// Neither side recorded token ids: matched by request id (or as the only request of
    /// each side); input identity is unchecked.
    RequestId,
}

/// One request of A matched with one of B.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestMatch {
    /// The request's id in A.
    pub a: String,
    /// Its id in B.
    pub b: String,
    /// How they were matched.
    pub by: MatchedBy,
    /// Positions both sides hold.
    pub common_positions: u64,
    /// Where the token ids first differ (rows from here on are different inputs and not
    /// compared); `None` when they agree wherever both are recorded.
    pub ids_differ_from: Option<u64>,
}

/// Matches A's requests with B's: first pairs whose ids agree at every common position (most
/// common positions first, the same id preferred), then by the longest run of agreeing ids
/// from the first common position, then, where either side has no ids, by request id or as
/// the only request of each side (the input unchecked).
pub fn match_requests(a: &SideRequests, b: &SideRequests) -> Vec<(usize, usize, RequestMatch)> {
    let mut out = Vec::new();
    let mut used_a = vec![false; a.names.len()];
    let mut used_b = vec![false; b.names.len()];
    // (agreeing positions, common positions, first difference) of every pair with ids.
    let judge = |i: usize, j: usize| -> Option<(u64, u64, Option<u64>)> {
        let (ta, tb) = (&a.tokens[i], &b.tokens[j]);
        if ta.is_empty() || tb.is_empty() {
            return None;
        }
        let mut common = 0;
        let mut prefix = 0;
        let mut first_difference = None;
        for (p, id) in ta {
            let Some(other) = tb.get(p) else { continue };
            common += 1;
            if first_difference.is_none() {
                if other == id {
                    prefix += 1;
                } else {
                    first_difference = Some(*p);
                }
            }
        }
        (common > 0).then_some((prefix, common, first_difference))
    };
    let mut candidates: Vec<Candidate> = Vec::new();
    for i in 0..a.names.len() {
        for j in 0..b.names.len() {
            if let Some((prefix, common, differ)) = judge(i, j) {
                if prefix == 0 {
                    continue;
                }
                candidates.push(Candidate {
                    exact: differ.is_none(),
                    prefix,
                    same_name: a.names[i] == b.names[j],
                    i,
                    j,
                    common,
                    differ,
                });
            }
        }
    }
    // Exact before prefix; then the longer agreement; then the same request id.
    candidates.sort_by(|x, y| {
        (y.exact, y.prefix, y.same_name)
            .cmp(&(x.exact, x.prefix, x.same_name))
            .then((x.i, x.j).cmp(&(y.i, y.j)))
    });
    for Candidate {
        exact,
        i,
        j,
        common,
        differ,
        ..
    } in candidates
    {
        if used_a[i] || used_b[j] {
            continue;
        }
        used_a[i] = true;
        used_b[j] = true;
        out.push((
            i,
            j,
            RequestMatch {
                a: a.names[i].clone(),
                b: b.names[j].clone(),
                by: if exact {
                    MatchedBy::TokenIds
                } else {
                    MatchedBy::LongestPrefix
                },
                common_positions: common,
                ids_differ_from: differ,
            },
        ));
    }
    // Where either side has no ids (a device run records none, a cpu run does): by request
    // id, or the only request left on each side; the input is then unchecked, never judged
    // different. Two sides whose ids disagree from the first position are different inputs.
    let no_ids = |t: &BTreeMap<u64, i64>| t.is_empty();
    let unchecked = |i: usize, j: usize| no_ids(&a.tokens[i]) || no_ids(&b.tokens[j]);
    for (i, name) in a.names.iter().enumerate() {
        if used_a[i] {
            continue;
        }
        if let Some(j) = b.index(name).filter(|&j| !used_b[j] && unchecked(i, j)) {
            used_a[i] = true;
            used_b[j] = true;
            out.push((i, j, by_id(a, b, i, j)));
        }
    }
    let left_a: Vec<usize> = (0..a.names.len()).filter(|&i| !used_a[i]).collect();
    let left_b: Vec<usize> = (0..b.names.len()).filter(|&j| !used_b[j]).collect();
    if let ([i], [j]) = (left_a.as_slice(), left_b.as_slice()) {
        if unchecked(*i, *j) {
            out.push((*i, *j, by_id(a, b, *i, *j)));
        }
    }
    out.sort_by_key(|(i, ..)| *i);
    out
}

/// A pair of requests whose ids agree on `prefix` positions from the first common one.
struct Candidate {
    exact: bool,
    prefix: u64,
    same_name: bool,
    i: usize,
    j: usize,
    common: u64,
    differ: Option<u64>,
}

fn by_id(a: &SideRequests, b: &SideRequests, i: usize, j: usize) -> RequestMatch {
    let common = a.positions[i]
        .keys()
        .filter(|p| b.positions[j].contains_key(p))
        .count() as u64;
    RequestMatch {
        a: a.names[i].clone(),
        b: b.names[j].clone(),
        by: MatchedBy::RequestId,
        common_positions: common,
        ids_differ_from: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(requests: &[(&str, &[(u64, i64)])]) -> SideRequests {
        let mut s = SideRequests::default();
        for (name, ids) in requests {
            let i = s.index_or_insert(name);
            for &(p, id) in *ids {
                s.tokens[i].insert(p, id);
                s.positions[i].insert(p, ());
            }
        }
        s
    }

    #[test]
    fn requests_match_by_ids_not_by_name() {
        let a = side(&[("r0", &[(0, 5), (1, 6)]), ("r1", &[(0, 7), (1, 8)])]);
        let b = side(&[("x", &[(0, 7), (1, 8)]), ("r0", &[(0, 9), (1, 9)])]);
        let m = match_requests(&a, &b);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!((m[0].2.a.as_str(), m[0].2.b.as_str()), ("r1", "x"));
        assert_eq!(m[0].2.by, MatchedBy::TokenIds);
    }

    #[test]
    fn a_longest_prefix_says_where_the_ids_part() {
        let a = side(&[("r", &[(0, 1), (1, 2), (2, 3)])]);
        let b = side(&[("s", &[(0, 1), (1, 2), (2, 4)])]);
        let m = match_requests(&a, &b);
        assert_eq!(m[0].2.by, MatchedBy::LongestPrefix);
        assert_eq!(m[0].2.ids_differ_from, Some(2));
    }

    #[test]
    fn without_ids_the_only_requests_match() {
        let a = side(&[("r", &[])]);
        let b = side(&[("s", &[])]);
        let m = match_requests(&a, &b);
        assert_eq!(m[0].2.by, MatchedBy::RequestId);
    }

    #[test]
    fn ids_on_one_side_only_match_by_request_id_unchecked() {
        // A cpu run recorded the ids, a device run did not: the same request, input unchecked.
        let a = side(&[("forward", &[(0, 5), (1, 6)])]);
        let b = side(&[("forward", &[])]);
        let m = match_requests(&a, &b);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].2.by, MatchedBy::RequestId);
        assert_eq!(m[0].2.ids_differ_from, None);
        // Ids on both sides that disagree from the first position stay different inputs.
        let c = side(&[("forward", &[(0, 9), (1, 9)])]);
        assert!(match_requests(&a, &c).is_empty());
    }
}
