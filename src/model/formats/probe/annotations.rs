//! Checks of a manifest's parallel annotations (docs/manifest.md, "Parallel layouts") that a
//! record's own fields cannot make: `metadata.parallel` must be an object of
//! `[rank_in_group, group_size]` pairs, a record's `shard` must be over an axis that layout
//! gives, and `collective` one of the documented names. A bad annotation is dropped with a
//! warning naming the file, the records and the problem; the records are kept, per rank, as
//! the Python probe records a capture whose annotation it refuses.

use std::collections::BTreeMap;
use std::path::Path;

use crate::model::dump::{Placement, Shard, Warning, Window};

/// The collectives a record may name (`capture(..., collective=...)`, the schema's enum).
pub const COLLECTIVES: [&str; 6] = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
];

/// At most this many records are named in one warning (the count says how many in all).
const NAMED: usize = 4;

/// Drops the annotations of `window` that do not fit its layout, one lost-evidence warning per
/// problem (naming `path`, the records and what was wrong).
pub fn check(window: &mut Window, path: &Path) -> Vec<Warning> {
    let mut warnings = Vec::new();
    let layout = match window.parallel() {
        Ok(layout) => Some(layout),
        Err(why) => {
            let prefix = format!("{}: ", window.source.display());
            let why = why.strip_prefix(&prefix).unwrap_or(&why);
            warnings.push(Warning::lost(
                path,
                format!(
                    "{why}; metadata.parallel must be an object such as {{\"tp\": [0, 2]}}: the \
                     window is kept per rank and its records' shard annotations are dropped"
                ),
            ));
            None
        }
    };
    // problem → the records it concerns (`stage#occurrence (seq N)`), in file order.
    let mut problems: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for record in &mut window.records {
        let name = format!("{} (seq {})", record.key(), record.seq);
        if let Some(shard) = &record.shard {
            let axis = shard.axis().to_string();
            let problem = match &layout {
                None => Some(format!(
                    "shard {shard} with no readable metadata.parallel; recorded without the shard"
                )),
                Some(l) if !l.contains_key(&axis) => Some(format!(
                    "shard {shard} but metadata.parallel has no {axis} group (arm(..., \
                     parallel={{\"{axis}\": (rank_in_group, group_size)}})); recorded without the \
                     shard, per rank"
                )),
                Some(_) => split_problem(shard, &record.shape),
            };
            if let Some(problem) = problem {
                record.shard = None;
                problems.entry(problem).or_default().push(name.clone());
            }
        }
        if let Some(collective) = &record.collective
            && !COLLECTIVES.contains(&collective.as_str())
        {
            let problem = format!(
                "collective {:?} is not one of {}; recorded without it",
                collective.as_str(),
                COLLECTIVES.join(", ")
            );
            record.collective = None;
            problems.entry(problem).or_default().push(name);
        }
    }
    for (problem, records) in problems {
        let mut named = records[..records.len().min(NAMED)].join(", ");
        if records.len() > NAMED {
            named.push_str(&format!(", … ({} records in all)", records.len()));
        }
        let noun = if records.len() == 1 {
            "record"
        } else {
            "records"
        };
        warnings.push(Warning::lost(path, format!("{noun} {named}: {problem}")));
    }
    warnings
}

/// Why a slice annotation cannot describe a record of `shape` (the rules the probe applies at
/// capture: the dimension exists, an offset slice lies inside its full size, a zigzag
/// dimension holds two chunks), or `None`.
fn split_problem(shard: &Shard, shape: &[u64]) -> Option<String> {
    let Shard::Split { dim, placement, .. } = shard else {
        return None;
    };
    let Some(&local) = shape.get(*dim as usize) else {
        return Some(format!(
            "shard {shard}: dimension {dim} is out of range for a {}-d record; recorded without \
             the shard, per rank",
            shape.len()
        ));
    };
    match placement {
        Placement::At { offset, full } if offset.saturating_add(local) > *full => Some(format!(
            "shard {shard}: offset {offset} + local size {local} is past the full size {full}; \
             recorded without the shard, per rank"
        )),
        Placement::Zigzag if local % 2 == 1 => Some(format!(
            "shard {shard}: zigzag needs an even local size along dimension {dim}, not {local}; \
             recorded without the shard, per rank"
        )),
        _ => None,
    }
}
