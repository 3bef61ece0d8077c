//! msprobe (MindStudio probe, mindstudio-probe 26.x) dumps read as dumpview windows.
//!
//! One `dump.json` is one window: `<dump_path>/step<N>/<rank<R>|proc<pid>>/dump.json`, with
//! `construct.json` and `stack.json` beside it and, in tensor mode, `dump_tensor_data/`.
//! Every leaf of every entry becomes one record, named and ordered as `msprobe compare`
//! names and orders its rows (`names`), so pairing by `stage#occurrence` (occurrence is
//! always 1) pairs what msprobe pairs. What the statistics mean: `record`. The module and
//! stack of each entry go into the window's [`Context`]. docs/msprobe.md has the mapping.
//!
//! dump.json is read in one pass from the mapped file, one entry at a time
//! (`json::Reader`); it may hold the bare tokens `NaN`, `Infinity` and `-Infinity`. A file
//! cut short keeps the entries before the cut, with a warning naming the byte offset.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use rayon::prelude::*;
use serde_json::{Map, Value as JsonValue};

use crate::model::dump::{Context, FormatFacts, SourceFormat, Warning, Window};
use crate::model::formats::probe::SCHEMA_VERSION;

mod context;
mod dump;
mod error;
mod format;
mod json;
mod names;
mod record;
mod value;

use dump::{Parsed, parse};
pub use error::MsprobeError;
pub use format::Msprobe;

/// The file an msprobe dump writes per step and rank.
pub const MSPROBE_NAME: &str = "dump.json";

/// msprobe's facts: no input ids. (Its NaN/inf counts are inferred from `Max`/`Min`, which each
/// record says itself: `Stats::counts_known`.)
pub static FACTS: FormatFacts = FormatFacts {
    name: "msprobe dump",
    records_input_ids: false,
    missing_data_advice: "msprobe's level (L0 modules, L1 APIs, mix), scope or list may differ \
                          between the runs.",
    probe_conventions: false,
};

/// Loads one msprobe `dump.json` (with the construct.json and stack.json beside it) as a
/// window.
///
/// # Errors
/// A message naming the file when it is not a JSON object with a `data` object, or breaks
/// before `data` starts. A break inside or after `data` is a warning instead: the entries
/// before it are kept.
pub fn load_window(path: &Path, bytes: &[u8]) -> Result<(Window, Vec<Warning>), MsprobeError> {
    let dir = path.parent().unwrap_or(Path::new(""));
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let (parsed, (sources, problems)) = rayon::join(|| parse(bytes), || context::read(dir));
    let parsed = parsed?;
    let warn = |message: String| Warning::lost(path.to_path_buf(), message);
    let mut warnings: Vec<Warning> = problems.into_iter().map(warn).collect();
    if let Some(stop) = &parsed.stop {
        warnings.push(warn(format!(
            "truncated or damaged: stops being valid JSON at byte {} ({}); kept the {} rows of the {} entries before it",
            stop.offset,
            stop.reason,
            parsed.records.len(),
            parsed.entries.len()
        )));
    }
    if let Some(first) = &parsed.skipped_first {
        warnings.push(warn(format!(
            "{} entries without a forward, backward or parameters_grad name (e.g. {first:?}) are not read, as msprobe compare skips them",
            parsed.skipped
        )));
    }

    let place = Place::of(dir);
    let mut metadata = Map::new();
    for (key, value) in [
        ("task", &parsed.task),
        ("level", &parsed.level),
        ("framework", &parsed.framework),
    ] {
        if let Some(value) = value {
            metadata.insert(key.into(), JsonValue::String(value.clone()));
        }
    }
    metadata.insert(
        "summary_mode".into(),
        JsonValue::String(parsed.summary_mode().into()),
    );
    if let Some(step) = place.step {
        metadata.insert("step".into(), step.into());
    }
    if let Some(pid) = place.pid {
        metadata.insert("pid".into(), pid.into());
    }
    let context = build_context(&parsed, &sources);
    let manifest = Window {
        source: path.to_path_buf(),
        schema_version: SCHEMA_VERSION,
        probe: "msprobe".into(),
        label: place.label,
        match_index: 1,
        occurrence: place.step.map_or(1, |s| s.saturating_add(1)),
        attempt: 1,
        rank: place.rank,
        world_size: place.world_size,
        metadata,
        stats_dtype: None,
        records: parsed.records,
        input_sets: Vec::new(),
        run: None,
        format: SourceFormat::Msprobe,
        facts: &FACTS,
        context: Some(Arc::new(context)),
        token_rows: None,
    };
    Ok((manifest, warnings))
}

/// Where a window sits in msprobe's directory tree.
#[derive(Debug, PartialEq, Eq)]
struct Place {
    rank: u32,
    world_size: u32,
    pid: Option<u64>,
    step: Option<u32>,
    label: String,
}

impl Place {
    /// From the directory holding dump.json: `rank<R>` (world size: the `rank*` directories
    /// beside it) or `proc<pid>` (rank 0), inside `step<N>` (label `step<N>`), which
    /// MindSpore's mix level puts inside `graph/` or `pynative/` (label `graph/step<N>`).
    fn of(dir: &Path) -> Place {
        let name = |p: &Path| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let number = |text: &str, prefix: &str| -> Option<u64> {
            let digits = text.strip_prefix(prefix)?;
            (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                .then(|| digits.parse().ok())
                .flatten()
        };
        let here = name(dir);
        let rank = number(&here, "rank").and_then(|r| u32::try_from(r).ok());
        let pid = number(&here, "proc");
        let step_dir = if rank.is_some() || pid.is_some() {
            dir.parent()
        } else {
            Some(dir)
        };
        let step_name = step_dir.map(name).unwrap_or_default();
        let step = number(&step_name, "step").and_then(|s| u32::try_from(s).ok());
        let mut label = if step.is_some() {
            step_name
        } else {
            String::new()
        };
        if let Some(mix) = step_dir
            .filter(|_| step.is_some())
            .and_then(Path::parent)
            .map(name)
            .filter(|n| n == "graph" || n == "pynative")
        {
            label = format!("{mix}/{label}");
        }
        let world_size = match (rank, step_dir) {
            (Some(_), Some(step_dir)) => crate::model::io::subdirectory_names(step_dir)
                .map(|names| names.iter().filter(|n| number(n, "rank").is_some()).count())
                .unwrap_or(1)
                .max(1),
            _ => 1,
        };
        Place {
            rank: rank.unwrap_or(0),
            world_size: u32::try_from(world_size).unwrap_or(u32::MAX),
            pid,
            step,
            label,
        }
    }
}

/// One context group per distinct set of lines; every row of an entry points at its entry's.
/// Entries with the same parent and stack (and no lines of their own) share a group.
fn build_context(parsed: &Parsed<'_>, sources: &context::Sources) -> Context {
    let entries = &parsed.entries;
    let keys: Vec<(usize, usize)> = entries.par_iter().map(|e| sources.key(&e.name)).collect();
    // The entry whose lines each group shows, and each entry's group.
    let mut shown = Vec::new();
    let mut group_of = vec![u32::MAX; entries.len()];
    let mut shared: HashMap<(usize, usize), u32, foldhash::fast::RandomState> = HashMap::default();
    for (i, entry) in entries.iter().enumerate() {
        let own = entry.renamed || !entry.md5.is_empty();
        if keys[i] == (0, 0) && !own {
            continue;
        }
        let next = u32::try_from(shown.len()).unwrap_or(u32::MAX - 1);
        group_of[i] = if own {
            shown.push(i);
            next
        } else {
            *shared.entry(keys[i]).or_insert_with(|| {
                shown.push(i);
                next
            })
        };
    }
    let checksum = parsed.summary_mode();
    let groups = shown
        .par_iter()
        .map(|&i| {
            let entry = &entries[i];
            let mut lines = Vec::new();
            if entry.renamed {
                // The rows pair under a renumbered call; this is the key in dump.json.
                lines.push(("entry".to_string(), entry.name.to_string()));
            }
            lines.extend(sources.lines(&entry.name));
            lines.extend(
                entry
                    .md5
                    .iter()
                    .map(|(row, sum)| (checksum.to_string(), format!("{row} {sum}"))),
            );
            lines
        })
        .collect();
    let mut record_group = vec![u32::MAX; parsed.records.len()];
    for (entry, &group) in entries.iter().zip(&group_of) {
        record_group[entry.first..entry.first + entry.rows].fill(group);
    }
    Context {
        groups,
        record_group,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_placed_by_their_directories() {
        let dir = tempfile::tempdir().unwrap();
        for rank in ["rank0", "rank1", "rank3", "rankx"] {
            std::fs::create_dir_all(dir.path().join("dump/step2").join(rank)).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("ms/graph/step0/rank0")).unwrap();
        assert_eq!(
            Place::of(&dir.path().join("dump/step2/rank3")),
            Place {
                rank: 3,
                world_size: 3,
                pid: None,
                step: Some(2),
                label: "step2".into()
            }
        );
        assert_eq!(
            Place::of(Path::new("/x/step11/proc2016")),
            Place {
                rank: 0,
                world_size: 1,
                pid: Some(2016),
                step: Some(11),
                label: "step11".into()
            }
        );
        assert_eq!(
            Place::of(&dir.path().join("ms/graph/step0/rank0")).label,
            "graph/step0"
        );
        assert_eq!(
            Place::of(Path::new("/x/torch_npu_ops")),
            Place {
                rank: 0,
                world_size: 1,
                pid: None,
                step: None,
                label: String::new()
            }
        );
    }
}
