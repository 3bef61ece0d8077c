//! One rank's label window ([`Window`]) as every format's reader produces it: its records in
//! capture order, the operator input sets, the source format and its facts.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::record::{Record, Stats};

/// One `capture_inputs()` call: a complete operator input set saved for replay.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct InputSet {
    pub stage: String,
    pub occurrence: u32,
    /// `.pt` file relative to the window directory.
    pub file: String,
    /// Argument name → description (`kind` plus layout or value), as written.
    pub args: serde_json::Map<String, serde_json::Value>,
}

/// One rank's label window, as written by `finish()`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Window {
    /// Where it was read from (not part of the file).
    #[serde(skip)]
    pub source: PathBuf,
    pub schema_version: u32,
    #[serde(default)]
    pub probe: String,
    pub label: String,
    #[serde(rename = "match")]
    pub match_index: u32,
    pub occurrence: u32,
    pub rank: u32,
    pub world_size: u32,
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    pub stats_dtype: Option<String>,
    pub records: Vec<Record>,
    #[serde(default)]
    pub input_sets: Vec<InputSet>,
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
    /// Whether NaN/inf elements are counted; where they are not, a non-finite record is known
    /// only from a non-finite extreme and its counts are unknown.
    pub counts_nonfinite: bool,
    /// Why a capture of this format may hold far fewer records than another of the same
    /// format, for the missing-data message.
    pub missing_data_advice: &'static str,
}

/// The facts of a window made without a format (a hand-built window in a test): input ids
/// and non-finite counts as the probe records them.
pub static UNKNOWN_FORMAT: FormatFacts = FormatFacts {
    name: "unknown format",
    records_input_ids: true,
    counts_nonfinite: true,
    missing_data_advice: "The two captures recorded different sets of tensors.",
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
    pub groups: Vec<Vec<(String, String)>>,
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

    /// The token ids in `metadata.token_ids`, when present and all integers.
    pub fn token_ids(&self) -> Option<Vec<i64>> {
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
