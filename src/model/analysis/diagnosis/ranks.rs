//! Across ranks: the rank that went non-finite first, or a replicated tensor whose ranks
//! disagree, and the collective captured before it on that rank.

use crate::model::dump::{Dump, Record, Window};

use super::context::{Context, cite, record, side_name};
use super::types::{Claim, Finding, Role, Rule};

/// One finding per request whose first non-finite rank is known, and per replicated stage
/// whose ranks disagree.
pub(super) fn across_ranks(cx: &Context) -> Vec<Finding> {
    let mut out = Vec::new();
    let sides = [
        ('a', Some(cx.a), &cx.analysis.ranks_a),
        ('b', cx.b, &cx.analysis.ranks_b),
    ];
    for (side, dump, across) in sides {
        let Some(dump) = dump else { continue };
        for x in across {
            let &[rank] = x.origin_ranks.as_slice() else {
                continue;
            };
            let Some(window) = dump.windows.iter().find(|w| {
                w.rank == rank
                    && w.label == x.label
                    && w.match_index == x.match_index
                    && w.occurrence == x.occurrence
            }) else {
                continue;
            };
            let Some(origin) = record(window, &x.origin_key) else {
                continue;
            };
            let mut evidence = vec![cite(side, window, origin, Role::Origin, Claim::NonFinite)];
            let collective = collective_before(window, origin);
            let tail = match collective {
                Some(c) if c.seq == origin.seq => {
                    evidence.push(cite(side, window, c, Role::Collective, Claim::Collective));
                    format!(
                        "; `{}` is itself the output of a collective ({}): check what each rank \
                         sent into it",
                        c.key(),
                        c.collective.as_deref().unwrap_or("collective")
                    )
                }
                Some(c) => {
                    evidence.push(cite(side, window, c, Role::Collective, Claim::Collective));
                    format!(
                        "; the collective before it on rank {rank} is `{}` ({}): check what \
                         rank {rank} sent and received there",
                        c.key(),
                        c.collective.as_deref().unwrap_or("collective")
                    )
                }
                None => format!(
                    "; no collective is captured before it on rank {rank}, so nothing captured \
                     carried it in from another rank"
                ),
            };
            out.push(Finding {
                rule: Rule::AcrossRanks,
                text: format!("In {}, {}{tail}.", side_name(side), x.describe()),
                evidence,
                address: None,
                presumed: false,
                inputs: Vec::new(),
            });
        }
    }
    // A diff checked both sides' replicas; one capture holds every rank of its groups too.
    let replicated = match &cx.analysis.diff {
        Some(report) => report.replicated.clone(),
        None => crate::model::analysis::replicated::check('a', &cx.a.windows),
    };
    {
        for f in &replicated {
            let dump = if f.side == 'a' { Some(cx.a) } else { cx.b };
            let Some(dump) = dump else { continue };
            let (Some((w1, r1)), Some((w2, r2))) = (
                holding(dump, f.rank, &f.key),
                holding(dump, f.other_rank, &f.key),
            ) else {
                continue;
            };
            let mut evidence = vec![
                cite(f.side, w1, r1, Role::Origin, Claim::Captured),
                cite(f.side, w2, r2, Role::Origin, Claim::Captured),
            ];
            let tail = match collective_before(w2, r2).or_else(|| collective_before(w1, r1)) {
                Some(c) => {
                    let w = if collective_before(w2, r2).is_some() {
                        w2
                    } else {
                        w1
                    };
                    evidence.push(cite(f.side, w, c, Role::Collective, Claim::Collective));
                    if c.seq == r2.seq || c.seq == r1.seq {
                        format!(
                            "; `{}` is itself the output of a collective ({}): the ranks \
                             received different results from it",
                            c.key(),
                            c.collective.as_deref().unwrap_or("collective"),
                        )
                    } else {
                        format!(
                            "; the collective before it is `{}` ({}) on rank {}",
                            c.key(),
                            c.collective.as_deref().unwrap_or("collective"),
                            w.rank
                        )
                    }
                }
                None => "; no collective is captured before it: the replicas were made \
                         differently (a weight loaded differently on one rank, or a missing \
                         collective)"
                    .to_string(),
            };
            out.push(Finding {
                rule: Rule::AcrossRanks,
                text: format!("In {}, {}{tail}.", side_name(f.side), f.describe()),
                evidence,
                address: None,
                presumed: false,
                inputs: Vec::new(),
            });
        }
    }
    out
}

/// The window of `rank` holding record `key`, with the record.
fn holding<'d>(dump: &'d Dump, rank: u32, key: &str) -> Option<(&'d Window, &'d Record)> {
    dump.windows
        .iter()
        .filter(|w| w.rank == rank)
        .find_map(|w| record(w, key).map(|r| (w, r)))
}

/// The last record marked as a collective's output captured before `record` (or `record`
/// itself when it is one).
fn collective_before<'w>(window: &'w Window, record: &Record) -> Option<&'w Record> {
    window
        .records
        .iter()
        .filter(|r| r.seq <= record.seq && r.collective.is_some())
        .max_by_key(|r| r.seq)
}
