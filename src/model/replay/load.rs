//! A replay's output directory read back: `replay.json` and the four `.pt` files, through
//! the tensor readers (no pickle code runs), and the standard a `dumpview replay` judged it
//! by (`verdict.json`). Where dumpview computed the reference sides in-process (feature
//! `torch`), their records are in `inprocess.json` and their outputs in `<side>.safetensors`.

use std::path::{Path, PathBuf};

use super::judge::{self, Replay, SideOutputs};
use super::record::{InProcessRecord, ReplayRecord};
use super::side::SideTensors;
use super::standard::Standard;
use crate::model::io::FileBytes;
use crate::model::tensor::TensorFile;

/// The record `replay_op.py` writes last.
pub const RECORD_FILE: &str = "replay.json";
/// What `dumpview replay` writes next to it: its judgement, as `--json` prints it.
pub const VERDICT_FILE: &str = "verdict.json";
/// The output files, in [`SideOutputs`] order.
pub const SIDE_FILES: [&str; 4] = [
    "candidate.pt",
    "reference.pt",
    "golden.pt",
    "reference_native.pt",
];
/// The sides, in [`SideOutputs`] order.
pub const SIDE_NAMES: [&str; 4] = ["candidate", "reference", "golden", "reference_native"];
/// The records of the sides dumpview computed in-process ([`InProcessRecord`]).
pub const IN_PROCESS_FILE: &str = "inprocess.json";
/// The extension of the outputs dumpview saved of a side it computed (`reference.safetensors`).
pub const SAVED_EXTENSION: &str = "safetensors";

/// A replay output directory, read.
#[derive(Debug)]
pub struct ReplayDir {
    /// The directory as given.
    pub dir: PathBuf,
    /// Its `replay.json`, with the sides of `inprocess.json` in place of skipped ones.
    pub record: ReplayRecord,
    /// Its output files (each `None` when absent: that side returned no tensor), or outputs
    /// computed in memory.
    pub files: SideOutputs,
}

impl ReplayDir {
    /// Reads `dir/replay.json` (and `dir/inprocess.json` when there is one) and opens the
    /// output files that exist: `<side>.pt`, else `<side>.safetensors`.
    ///
    /// # Errors
    /// A message naming the file: no `replay.json` (not a replay output directory, or a
    /// replay that did not finish), one that is not a version-1 replay record, a damaged
    /// `inprocess.json`, or an output file the reader refuses (damaged, a disallowed pickle
    /// global).
    pub fn open(dir: &Path) -> Result<ReplayDir, String> {
        let record_path = dir.join(RECORD_FILE);
        let bytes = FileBytes::read(&record_path, true).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "{}: not found (not a replay output directory, or the replay did not finish)",
                record_path.display()
            ),
            _ => format!("{}: cannot read: {e}", record_path.display()),
        })?;
        let mut record = ReplayRecord::parse(&bytes)
            .map_err(|problem| format!("{}: {problem}", record_path.display()))?;
        let in_process = dir.join(IN_PROCESS_FILE);
        if in_process.exists() {
            let computed = FileBytes::read(&in_process, true)
                .map_err(|e| e.to_string())
                .and_then(|bytes| InProcessRecord::parse(&bytes))
                .map_err(|problem| format!("{}: {problem}", in_process.display()))?;
            record.fill_skipped(&computed.sides);
        }
        let open = |side: &str| -> Result<Option<SideTensors>, String> {
            for path in [
                dir.join(format!("{side}.pt")),
                dir.join(format!("{side}.{SAVED_EXTENSION}")),
            ] {
                if path.exists() {
                    return TensorFile::open(&path)
                        .map(|f| Some(SideTensors::File(f)))
                        .map_err(|e| e.to_string());
                }
            }
            Ok(None)
        };
        let files = SideOutputs {
            candidate: open(SIDE_NAMES[0])?,
            reference: open(SIDE_NAMES[1])?,
            golden: open(SIDE_NAMES[2])?,
            reference_native: open(SIDE_NAMES[3])?,
        };
        Ok(ReplayDir {
            dir: dir.to_path_buf(),
            record,
            files,
        })
    }

    /// Judges the replay under `standard` ([`judge::judge`]).
    ///
    /// # Errors
    /// As [`judge::judge`].
    pub fn judge(&self, standard: Standard) -> Result<Replay, String> {
        judge::judge(
            &self.record,
            &self.files,
            standard,
            &self.dir.display().to_string(),
        )
    }
}

/// The standard `dir/verdict.json` says the replay was judged by; `None` when there is no
/// such file or it names none.
pub fn saved_standard(dir: &Path) -> Option<Standard> {
    let bytes = FileBytes::read(&dir.join(VERDICT_FILE), true).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    serde_json::from_value(value.get("standard")?.clone()).ok()
}

/// Reads and judges `dir` under `standard`, or under the standard its `verdict.json` names,
/// else msprobe's.
///
/// # Errors
/// As [`ReplayDir::open`] and [`judge::judge`].
pub fn judge_dir(dir: &Path, standard: Option<Standard>) -> Result<Replay, String> {
    let standard = standard
        .or_else(|| saved_standard(dir))
        .unwrap_or(Standard::Msprobe);
    ReplayDir::open(dir)?.judge(standard)
}
