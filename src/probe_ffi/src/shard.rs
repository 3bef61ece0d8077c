//! Shard annotations (`dp_tensor.shard`) resolved against the window's parallel layout, the
//! `parallel` object of `dp_arm`'s metadata (docs/manifest.md, "Parallel layouts"), as
//! assets/dump_probe.py resolves `capture(..., shard=...)`: a slice (`tp:D`, `tp:D@OFFSET/FULL`,
//! `cp:D`, `cp:D:zigzag`) becomes the [`Split`] that puts the position checksum in the full
//! tensor's coordinates; `replicated:AXIS` and `partial:AXIS` keep the local ones.

use std::collections::BTreeMap;

use crate::stats::Split;
use crate::view::View;

/// axis (`tp`, `cp`, `dp`, `pp`, `ep`) → (rank in group, group size), from `metadata.parallel`.
pub type Layout = BTreeMap<String, (u64, u64)>;

/// The largest group `metadata.parallel` may give (2^20 ranks, as dumpview reads it): a larger
/// one is a typo.
pub const MAX_GROUP_SIZE: u64 = 1 << 20;

/// `layout` as `metadata.parallel` records it: `{"tp": [rank_in_group, group_size], ...}`.
pub fn layout_json(layout: &Layout) -> serde_json::Value {
    layout
        .iter()
        .map(|(axis, &(rank, size))| (axis.clone(), serde_json::json!([rank, size])))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// The warning dump_probe.py prints at arm when `DUMP_PROBE_RANKS` (`ranks`; `None`: all)
/// selects fewer ranks than a group of `layout` has: its sharded stages will be missing
/// evidence on the ranks left out.
pub fn unselected_group(
    layout: &Layout,
    ranks: Option<&std::collections::BTreeSet<u32>>,
) -> Option<String> {
    let ranks = ranks?;
    let (axis, &(_, size)) = layout
        .iter()
        .find(|&(_, &(_, size))| size > 1 && (ranks.len() as u64) < size)?;
    let list: Vec<String> = ranks.iter().map(u32::to_string).collect();
    Some(format!(
        "dp_arm's parallel layout gives a {axis} group of {size} ranks but DUMP_PROBE_RANKS={} selects {} rank{}: \
         stages sharded over {axis} will be missing evidence on the ranks left out; set DUMP_PROBE_RANKS=all \
         (or list every rank of the group)",
        list.join(","),
        ranks.len(),
        if ranks.len() == 1 { "" } else { "s" }
    ))
}

/// The valid axes of `metadata.parallel`, and one message per entry left out (the Python
/// probe's rule: each `[rank_in_group, group_size]` with `0 ≤ rank_in_group < group_size`).
pub fn layout_of(metadata: &serde_json::Value) -> (Layout, Vec<String>) {
    let mut layout = Layout::new();
    let mut problems = Vec::new();
    let Some(parallel) = metadata.get("parallel") else {
        return (layout, problems);
    };
    let Some(axes) = parallel.as_object() else {
        problems.push(format!(
            "metadata.parallel must be an object such as {{\"tp\": [rank_in_group, group_size]}}, not {parallel}; no parallel layout recorded"
        ));
        return (layout, problems);
    };
    for (axis, value) in axes {
        let pair = value
            .as_array()
            .filter(|a| a.len() == 2)
            .and_then(|a| Some((a[0].as_u64()?, a[1].as_u64()?)));
        match pair {
            Some((rank, size))
                if rank < size
                    && size <= MAX_GROUP_SIZE
                    && ["tp", "cp", "dp", "pp", "ep"].contains(&axis.as_str()) =>
            {
                layout.insert(axis.clone(), (rank, size));
            }
            _ => problems.push(format!(
                "metadata.parallel.{axis} = {value} left out: expected one of tp, cp, dp, pp, ep as [rank_in_group, group_size] with 0 <= rank_in_group < group_size <= 1048576"
            )),
        }
    }
    (layout, problems)
}

/// A resolved annotation: the text the manifest records, and the slice's coordinates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Normalised as dump_probe.py writes it: trimmed, D counted from the front (`tp:-1` of a
    /// 2-d tensor is `tp:1`), numbers without leading zeros.
    pub text: String,
    /// The full tensor's coordinates of a slice; `None` for `replicated:` and `partial:`.
    pub split: Option<Split>,
}

/// Resolves `shard` on `view` as dump_probe.py's `_shard_annotation` does (docs/manifest.md,
/// "Parallel layouts"): the grammar `tp:D`, `tp:D@OFFSET/FULL`, `cp:D`, `cp:D@OFFSET/FULL`,
/// `cp:D:zigzag`, `replicated:AXIS`, `partial:AXIS` with D possibly negative.
///
/// # Errors
/// Why the annotation cannot be used: it is not in the grammar, its axis is not in `layout`,
/// D is not a dimension of the view, OFFSET plus the local size passes FULL, or a zigzag
/// dimension is odd. The caller keeps the record without `shard`, with a warning.
pub fn resolve(shard: &str, view: &View, layout: &Layout) -> Result<Resolved, String> {
    static GRAMMAR: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let grammar = GRAMMAR.get_or_init(|| {
        regex::Regex::new(
            r"^(?:(replicated|partial):(\w+)|(tp|cp):(-?\d+)(?:@(\d+)/(\d+)|:(zigzag))?)$",
        )
        .expect("a valid pattern")
    });
    let Some(m) = grammar.captures(shard.trim()) else {
        return Err(
            "not 'tp:D', 'tp:D@OFFSET/FULL', 'cp:D', 'cp:D:zigzag', 'replicated:AXIS' or 'partial:AXIS'"
                .to_string(),
        );
    };
    let axis = m.get(2).or(m.get(3)).map_or("", |g| g.as_str());
    let &(rank, size) = layout.get(axis).ok_or_else(|| missing_axis(axis))?;
    if let Some(kind) = m.get(1) {
        return Ok(Resolved {
            text: format!("{}:{axis}", kind.as_str()),
            split: None,
        });
    }
    let ndim = view.shape.len() as i64;
    let dim: i64 = m[4]
        .parse()
        .map_err(|_| format!("dimension {} is not a number", &m[4]))?;
    if !(-ndim..ndim).contains(&dim) {
        return Err(format!(
            "dimension {dim} is out of range for a {ndim}-d tensor"
        ));
    }
    let dim = dim.rem_euclid(ndim.max(1)) as usize;
    let local = view.shape[dim];
    let number = |k: usize| -> Result<u64, String> {
        m[k].parse()
            .map_err(|_| format!("{} is not a whole number that fits 64 bits", &m[k]))
    };
    if m.get(5).is_some() {
        let (offset, full) = (number(5)?, number(6)?);
        if offset.checked_add(local).is_none_or(|end| end > full) {
            return Err(format!(
                "offset {offset} + local size {local} is past the full size {full}"
            ));
        }
        return Ok(Resolved {
            text: format!("{axis}:{dim}@{offset}/{full}"),
            split: Some(Split {
                dim,
                full,
                offset,
                zigzag: false,
                rank,
                size,
            }),
        });
    }
    if m.get(7).is_some() {
        if local % 2 == 1 {
            return Err(format!(
                "a zigzag shard holds two equal chunks, but dimension {dim} has odd size {local}"
            ));
        }
        return Ok(Resolved {
            text: format!("{axis}:{dim}:zigzag"),
            split: Some(Split {
                dim,
                full: local * size,
                offset: 0,
                zigzag: true,
                rank,
                size,
            }),
        });
    }
    Ok(Resolved {
        text: format!("{axis}:{dim}"),
        split: Some(Split {
            dim,
            full: local * size,
            offset: rank * local,
            zigzag: false,
            rank,
            size,
        }),
    })
}

fn missing_axis(axis: &str) -> String {
    format!(
        "dp_arm was given no parallel layout for {axis:?} (metadata_json {{\"parallel\": {{\"{axis}\": [rank_in_group, group_size]}}}})"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::Dtype;

    fn view(shape: &[u64]) -> View {
        let mut strides = vec![1u64; shape.len()];
        for k in (0..shape.len().saturating_sub(1)).rev() {
            strides[k] = strides[k + 1] * shape[k + 1];
        }
        View::for_tests(Dtype::Float64, shape, &strides)
    }

    fn tp(rank: u64, size: u64) -> Layout {
        let (layout, problems) =
            layout_of(&serde_json::json!({"parallel": {"tp": [rank, size], "cp": [rank, size]}}));
        assert!(problems.is_empty(), "{problems:?}");
        layout
    }

    #[test]
    fn the_forms_of_a_slice() {
        let split = |text: &str, shape: &[u64], layout: &Layout| {
            resolve(text, &view(shape), layout).unwrap().split.unwrap()
        };
        let equal = split("tp:1", &[4, 6], &tp(1, 2));
        assert_eq!((equal.dim, equal.full, equal.offset), (1, 12, 6));
        let uneven = split("tp:0@8/10", &[2, 3], &tp(2, 3));
        assert_eq!((uneven.full, uneven.offset), (10, 8));
        let zigzag = split("cp:0:zigzag", &[4, 3], &tp(1, 2));
        // c = 2; rank 1 of 2 holds chunks 1 and 2 of 4: global rows 2, 3, 4, 5.
        let rows: Vec<u64> = (0..4).map(|i| zigzag.global(i, 4)).collect();
        assert_eq!(rows, [2, 3, 4, 5]);
        let zigzag0 = split("cp:0:zigzag", &[4, 3], &tp(0, 2));
        let rows: Vec<u64> = (0..4).map(|i| zigzag0.global(i, 4)).collect();
        assert_eq!(rows, [0, 1, 6, 7]);
        let replicated = resolve(" replicated:tp ", &view(&[4]), &tp(0, 2)).unwrap();
        assert_eq!(
            (replicated.text.as_str(), replicated.split),
            ("replicated:tp", None)
        );
        // Written as dump_probe.py writes them: D from the front, no leading zeros.
        let text = |t: &str| resolve(t, &view(&[4, 6]), &tp(1, 2)).unwrap().text;
        assert_eq!(text("tp:-1"), "tp:1");
        assert_eq!(text("tp:01"), "tp:1");
        assert_eq!(text("cp:-2@004/8"), "cp:0@4/8");
    }

    #[test]
    fn what_is_refused() {
        let layout = tp(1, 2);
        assert!(
            resolve("tp:2", &view(&[4, 6]), &layout)
                .unwrap_err()
                .contains("out of range for a 2-d")
        );
        assert!(
            resolve("tp:0@9/10", &view(&[2, 3]), &layout)
                .unwrap_err()
                .contains("past the full size 10")
        );
        assert!(
            resolve("cp:0:zigzag", &view(&[3]), &layout)
                .unwrap_err()
                .contains("odd size 3")
        );
        assert!(
            resolve("partial:dp", &view(&[3]), &layout)
                .unwrap_err()
                .contains("no parallel layout for \"dp\"")
        );
        assert!(
            resolve("replicated:world", &view(&[3]), &layout)
                .unwrap_err()
                .contains("no parallel layout for \"world\"")
        );
        for bad in ["TP:1", "tp", "tp:x", "tp:1@8", ""] {
            let why = resolve(bad, &view(&[3]), &layout).unwrap_err();
            assert!(why.starts_with("not 'tp:D'"), "{bad:?}: {why}");
        }
        assert!(
            resolve("tp:-3", &view(&[4, 6]), &layout)
                .unwrap_err()
                .contains("-3 is out of range")
        );
        let (layout, problems) =
            layout_of(&serde_json::json!({"parallel": {"tp": [2, 2], "xp": [0, 1], "cp": [0, 2]}}));
        assert_eq!(layout.keys().collect::<Vec<_>>(), ["cp"]);
        assert_eq!(problems.len(), 2, "{problems:?}");
        let (layout, problems) = layout_of(
            &serde_json::json!({"parallel": {"tp": [0, 4_294_967_297u64], "cp": [1, 2]}}),
        );
        assert_eq!(layout_json(&layout), serde_json::json!({"cp": [1, 2]}));
        assert!(problems[0].contains("<= 1048576"), "{problems:?}");
        let ranks: std::collections::BTreeSet<u32> = [0].into();
        let warning = unselected_group(&layout, Some(&ranks)).unwrap();
        assert!(
            warning.starts_with("dp_arm's parallel layout gives a cp group of 2 ranks but DUMP_PROBE_RANKS=0 selects 1 rank:"),
            "{warning}"
        );
        assert_eq!(unselected_group(&layout, None), None);
        let (_, problems) = layout_of(&serde_json::json!({"parallel": "tp=2"}));
        assert!(problems[0].contains("must be an object"), "{problems:?}");
    }
}
