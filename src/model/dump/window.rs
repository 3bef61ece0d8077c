//! One rank's label window ([`Window`]) as every format's reader produces it: its records in
//! capture order, the operator input sets, the source format and its facts.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::parallel::{AXES, Layout};
use super::record::{Record, Stats};

/// One `capture_inputs()` call: a complete operator input set saved for replay.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct InputSetEntry {
    /// The stage name given to `capture_inputs()`.
    pub stage: String,
    /// The N of `stage#N`, 1-based: which `capture_inputs()` call of that stage this is.
    pub occurrence: u32,
    /// `.pt` file relative to the window directory.
    pub file: String,
    /// The operator that was called, from `capture_inputs(stage, _op="torch.ops.npu.npu_rms_norm")`
    /// (e.g. `torch.nn.functional.silu`); `None` when `_op` was not given and in manifests
    /// written before the field existed.
    #[serde(default)]
    pub op: Option<String>,
    /// Argument name → description (`kind` plus layout or value), as written. A tensor
    /// argument's description also holds its `stats` (the records' statistics object) where
    /// the probe computed them.
    pub args: serde_json::Map<String, serde_json::Value>,
    /// The records this call's operator produced, named by `capture_inputs(..., outputs=...)`
    /// (or a hooked module's own outputs), in the order named; empty when not linked and in
    /// manifests written before the field existed.
    #[serde(default)]
    pub outputs: Vec<InputSetOutput>,
}

/// One output of an input set's operator call: the record that captured it and, when the
/// set was saved, the whole tensor as the run produced it (for judging a replay).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct InputSetOutput {
    /// The linked record's key, `stage#occurrence`, in the same window.
    pub key: String,
    /// The whole output tensor (every row, whatever `DUMP_PROBE_ROWS` says), relative to the
    /// window directory; `None` when it was not saved.
    #[serde(default)]
    pub file: Option<String>,
}

/// How the captured process was started, as the probe saw it: enough to run it again with
/// other `DUMP_PROBE_*` settings (the diagnosis prints that command).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct RunInfo {
    /// `sys.argv` of the process (for `python -m dump_probe --hook ... script.py`, the
    /// probe's own command line as given).
    #[serde(default)]
    pub argv: Vec<String>,
    /// The working directory when the window was armed.
    #[serde(default)]
    pub cwd: String,
    /// The interpreter that ran the model (`sys.executable`); `None` when not recorded.
    #[serde(default)]
    pub executable: Option<String>,
    /// Every `DUMP_PROBE_*` variable of the environment, name → value.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
}

/// One rank's label window, as written by `finish()`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Window {
    /// Where it was read from (not part of the file).
    #[serde(skip)]
    pub source: PathBuf,
    /// The format's schema version: the probe manifest's `schema_version` (1), a windowed
    /// dump's `schemaVersion` (4); msprobe windows carry 1.
    pub schema_version: u32,
    /// The writer's name and version, e.g. `"dump_probe.py 1"` (a marker, not checked).
    #[serde(default)]
    pub probe: String,
    /// The window's label: the request id given to `arm()` (msprobe `step<N>`, windowed
    /// `window_<NNNN>`).
    pub label: String,
    /// Which distinct label this is, 1-based in first-seen order (`DUMP_PROBE_MATCH`); a
    /// windowed dump's window number, 0-based.
    #[serde(rename = "match")]
    pub match_index: u32,
    /// Which `arm()` call of that label this is, 1-based (`DUMP_PROBE_OCCURRENCE`: a chunked
    /// prefill's N-th chunk); msprobe step N + 1.
    pub occurrence: u32,
    /// Which run into the same dump directory wrote this window, 1-based: the probe writes a
    /// re-run's window to `match<M>-occ<O>.<N>` and records `attempt: N`. Read from the
    /// directory name where the manifest does not say (older manifests); 1 for other formats.
    #[serde(default)]
    pub attempt: u32,
    /// torch.distributed rank of the writer (else `$RANK`, else 0).
    pub rank: u32,
    /// torch.distributed world size (else `$WORLD_SIZE`, else 1); 0 when unknown (windowed).
    pub world_size: u32,
    /// The keyword arguments of `arm()`, JSON-encoded; input identity is checked from
    /// `token_ids` here (docs/diff.md).
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// dtype the statistics were stacked and read back in (`float64` on cpu/cuda, `float32`
    /// on npu/mps); `None` where not recorded.
    #[serde(default)]
    pub stats_dtype: Option<String>,
    /// One per captured tensor, in capture order (`seq`).
    pub records: Vec<Record>,
    /// One per `capture_inputs()` call, for replay.
    #[serde(default)]
    pub input_sets: Vec<InputSetEntry>,
    /// How the process that wrote this window was started (the manifest's `run`); `None` in
    /// manifests written before the field existed and in other formats.
    #[serde(default)]
    pub run: Option<RunInfo>,
    /// The format the window was read from (not part of the file).
    #[serde(skip)]
    pub format: SourceFormat,
    /// What the analyses need to know of that format (not part of the file).
    #[serde(skip)]
    pub facts: &'static FormatFacts,
    /// What the source format says about records beyond the probe's fields (msprobe's module
    /// hierarchy and call stack, a windowed dump's tensor roles and task metadata); `None`
    /// for dumpview's own manifests.
    #[serde(skip)]
    pub context: Option<std::sync::Arc<Context>>,
    /// The forward's row map and the per-row statistics of its token rows (the manifest's
    /// `token_rows` and its sidecar, docs/manifest.md); `None` for windows captured without
    /// a row map and for other formats.
    #[serde(skip)]
    pub token_rows: Option<std::sync::Arc<super::TokenRows>>,
}

/// The dump format a window was read from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceFormat {
    /// dumpview's probe manifest (docs/manifest.md).
    #[default]
    Probe,
    /// An msprobe (MindStudio probe) `dump.json` with its construct.json and stack.json.
    Msprobe,
    /// A windowed mega-kernel dump: `rank_R/window_NNNN/manifest.json`, schemaVersion 4.
    Windowed,
}

/// What the analyses need to know of a window's format, stated by the format
/// ([`crate::model::formats::Format::facts`]) so that no analysis matches on the format itself.
#[derive(Debug, PartialEq, Eq)]
pub struct FormatFacts {
    /// How the format is named in the workbench header and in reports.
    pub name: &'static str,
    /// Whether windows record the input's token ids (`metadata.token_ids`), so input identity
    /// can be checked; where they do not, identity is "not recorded", not "missing".
    pub records_input_ids: bool,
    /// Why a capture of this format may hold far fewer records than another of the same
    /// format, for the missing-data message.
    pub missing_data_advice: &'static str,
    /// Whether records follow the probe's conventions, which the reader's value checks then
    /// hold them to: `dtype` is a torch dtype name and `occurrence` counts from 1 (msprobe's
    /// scalars carry Python type names; a windowed dump may say `unknown`).
    pub probe_conventions: bool,
}

/// The facts of a window made without a format (a hand-built window in a test): input ids
/// and non-finite counts as the probe records them.
pub static UNKNOWN_FORMAT: FormatFacts = FormatFacts {
    name: "unknown format",
    records_input_ids: true,
    missing_data_advice: "The two captures recorded different sets of tensors.",
    probe_conventions: false,
};

impl Default for &'static FormatFacts {
    fn default() -> Self {
        &UNKNOWN_FORMAT
    }
}

/// Per-record notes from a source format, shared by groups of records: `groups[g]` holds
/// labelled lines (`("module", "Module.layer1.0.conv1.Conv2d.forward.0")`,
/// `("stack", "File model.py, line 12, in forward")`, `("role", "stage_output")`), and
/// `record_group[i]` names the group of record `i` (`u32::MAX`: none).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    /// Shared groups of `(label, line)` pairs, each shown in order in the detail panel.
    pub groups: Vec<Vec<(String, String)>>,
    /// Per record, by position in `records`: index into `groups`, `u32::MAX` for none.
    pub record_group: Vec<u32>,
}

impl Context {
    /// The labelled lines of record `index` (empty when it has none).
    pub fn of(&self, index: usize) -> &[(String, String)] {
        self.record_group
            .get(index)
            .and_then(|&g| self.groups.get(g as usize))
            .map_or(&[], Vec::as_slice)
    }
}

impl Window {
    /// The directory that holds this window's `tensors/` and `inputs/`.
    pub fn window_dir(&self) -> &Path {
        self.source.parent().unwrap_or(Path::new("."))
    }

    /// The first record in capture order with a NaN or infinity, if any.
    pub fn first_nonfinite(&self) -> Option<&Record> {
        self.records
            .iter()
            .find(|r| r.stats.as_ref().is_some_and(Stats::has_nonfinite))
    }

    /// The token ids in `metadata.token_ids`, when present and all integers; else those of the
    /// forward's row map (its entries' ids in row order, padding left out), when every entry
    /// of a request has them.
    pub fn token_ids(&self) -> Option<Vec<i64>> {
        self.metadata_token_ids().or_else(|| {
            let rows = self.token_rows.as_ref()?;
            let mut ids = Vec::new();
            for entry in rows.map.iter().filter(|e| e.request.is_some()) {
                ids.extend(entry.token_ids.as_ref()?);
            }
            (!ids.is_empty()).then_some(ids)
        })
    }

    fn metadata_token_ids(&self) -> Option<Vec<i64>> {
        fn flatten(value: &serde_json::Value, out: &mut Vec<i64>) -> Option<()> {
            match value {
                serde_json::Value::Array(items) => items.iter().try_for_each(|v| flatten(v, out)),
                other => {
                    out.push(other.as_i64()?);
                    Some(())
                }
            }
        }
        let mut ids = Vec::new();
        flatten(self.metadata.get("token_ids")?, &mut ids)?;
        Some(ids)
    }
}

/// The largest parallel group [`Window::parallel`] reads (2^20 ranks): a larger one is a typo,
/// and merging one would allocate per rank.
pub const MAX_GROUP_SIZE: u32 = 1 << 20;

impl Window {
    /// The window's parallel layout from `metadata.parallel`.
    ///
    /// # Errors
    /// A message naming the window's file when `parallel` is not an object of documented axes
    /// mapping to `[rank_in_group, group_size]` with `rank_in_group < group_size`.
    pub fn parallel(&self) -> Result<Layout, String> {
        let Some(value) = self.metadata.get("parallel") else {
            return Ok(Layout::new());
        };
        let refuse = |why: String| {
            format!(
                "{}: metadata.parallel {value}: {why}",
                self.source.display()
            )
        };
        let object = value
            .as_object()
            .ok_or_else(|| refuse("not an object".into()))?;
        let mut layout = Layout::new();
        for (axis, pair) in object {
            if !AXES.contains(&axis.as_str()) {
                return Err(refuse(format!("axis {axis:?} is not one of {AXES:?}")));
            }
            let numbers: Option<Vec<u32>> = pair.as_array().and_then(|items| {
                items
                    .iter()
                    .map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok()))
                    .collect()
            });
            match numbers.as_deref() {
                Some(&[_, size]) if size > MAX_GROUP_SIZE => {
                    return Err(refuse(format!(
                        "{axis} group size {size} is beyond {MAX_GROUP_SIZE} ranks: not a layout a run has"
                    )));
                }
                Some(&[rank, size]) if rank < size => {
                    layout.insert(axis.clone(), (rank, size));
                }
                _ => {
                    return Err(refuse(format!(
                        "{axis} must be [rank_in_group, group_size] with rank_in_group < group_size"
                    )));
                }
            }
        }
        Ok(layout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_comes_from_metadata_parallel() {
        let mut window: Window = serde_json::from_value(serde_json::json!({
            "schema_version": 1, "label": "r", "match": 1, "occurrence": 1, "rank": 1,
            "world_size": 2, "records": []
        }))
        .unwrap();
        window.source = "rank1/m.json".into();
        assert!(window.parallel().unwrap().is_empty());
        window
            .metadata
            .insert("parallel".into(), serde_json::json!({"tp": [1, 2]}));
        assert_eq!(window.parallel().unwrap()["tp"], (1, 2));
        window
            .metadata
            .insert("parallel".into(), serde_json::json!({"tp": [2, 2]}));
        let err = window.parallel().unwrap_err();
        assert!(err.starts_with("rank1/m.json: metadata.parallel"), "{err}");
        // A group of 4294967295 ranks is a typo, not a layout: refused before any merge
        // allocates per rank.
        window.metadata.insert(
            "parallel".into(),
            serde_json::json!({"tp": [0, 4_294_967_295u64]}),
        );
        let err = window.parallel().unwrap_err();
        assert!(
            err.ends_with(
                "tp group size 4294967295 is beyond 1048576 ranks: not a layout a run has"
            ),
            "{err}"
        );
    }
}
