//! `replay.json`, what `assets/replay_op.py` writes last into its output directory
//! (docs/replay.md): the replayed call, its arguments' layouts, and what each side did.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `format` value of a replay record.
pub const FORMAT: &str = "dumpview.replay";
/// The `version` this reader knows.
pub const VERSION: u64 = 1;

/// One replay as `replay_op.py` recorded it. Fields it may leave out default to empty;
/// fields this version does not know are ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayRecord {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`VERSION`] for this reader.
    pub version: u64,
    /// The dump as given to `replay_op.py`.
    #[serde(default)]
    pub dump: String,
    /// The manifest whose input set was replayed; empty for an unfinished window (null in
    /// replay.json: see [`ReplayRecord::window_unfinished`]).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub manifest: String,
    /// The input set came from a probe window directory without `manifest.json` (a run killed
    /// before `finish()`): its stage from the file name, its arguments from the `.pt` alone,
    /// storage sharing between arguments unknown (docs/replay.md, "Unfinished windows").
    #[serde(default)]
    pub window_unfinished: bool,
    /// The window's rank.
    #[serde(default)]
    pub rank: u32,
    /// The window's label.
    #[serde(default)]
    pub label: Option<String>,
    /// The window's match number.
    #[serde(default, rename = "match")]
    pub match_number: Option<u64>,
    /// The window's occurrence.
    #[serde(default)]
    pub occurrence_window: Option<u64>,
    /// The stage replayed, without `#N`.
    pub stage: String,
    /// Which capture of the stage (`N` of `stage#N`), from 1.
    pub occurrence: u64,
    /// The operator the probe recorded (`capture_inputs(..., _op=...)`).
    #[serde(default)]
    pub op_recorded: Option<String>,
    /// The input set's `.pt` file, as replay_op.py opened it (relative to its working
    /// directory).
    #[serde(default)]
    pub input_file: Option<String>,
    /// Whether replay_op.py ran the candidate only (`--candidate-only`: the reference sides
    /// are [`Status::Skipped`], for the caller to compute).
    #[serde(default)]
    pub candidate_only: bool,
    /// The device the sides ran on (`cpu`, `cuda:0`, `npu:0`).
    #[serde(default)]
    pub device: String,
    /// `python`, `torch`, `torch_npu`, … versions (null when not installed).
    #[serde(default)]
    pub versions: BTreeMap<String, serde_json::Value>,
    /// `keywords` or `positional`.
    #[serde(default)]
    pub call: String,
    /// `--arg-map` renames, captured name -> parameter.
    #[serde(default)]
    pub arg_map: BTreeMap<String, String>,
    /// `--arg` overrides, name -> value.
    #[serde(default)]
    pub arg_overrides: BTreeMap<String, serde_json::Value>,
    /// The arguments as rebuilt, in call order.
    #[serde(default)]
    pub args: Vec<Argument>,
    /// The outputs the candidate returned, with their layouts before they were saved
    /// contiguous.
    #[serde(default)]
    pub outputs: Vec<OutputLayout>,
    /// What each side did: `candidate`, `reference`, `golden`, `reference_native`.
    #[serde(default)]
    pub sides: Sides,
    /// Set when the process died while a side ran and dumpview wrote this record
    /// (`model::replay::ended`): which side, and how the process ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<ProcessEnd>,
}

/// One argument of the replayed call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Argument {
    /// The captured name.
    pub name: String,
    /// `tensor`, `float`, `int`, `bool`, `none`, `str`, `dtype`, `device`, `list`, `tuple`.
    #[serde(default)]
    pub kind: String,
    /// A tensor's dtype.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// A tensor's shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<u64>>,
    /// A tensor's strides, in elements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stride: Option<Vec<i64>>,
    /// A tensor's storage offset at capture, in elements (not reproduced: the rebuilt view's
    /// offset is relative to the saved span).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_offset: Option<u64>,
    /// Arguments rebuilt on the same storage as this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shares_storage_with: Vec<String>,
    /// A scalar's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
}

/// One output's layout as the candidate returned it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputLayout {
    /// `out`, or `out.0`, `out.1`, … for a tuple or list.
    pub name: String,
    /// Its dtype.
    #[serde(default)]
    pub dtype: Option<String>,
    /// Its shape.
    #[serde(default)]
    pub shape: Option<Vec<u64>>,
    /// Its strides (the saved copy is contiguous).
    #[serde(default)]
    pub stride: Option<Vec<i64>>,
}

/// How the process of a replay ended while a side ran (`replay.json`'s `ended`, written by dumpview from `replay.partial.json`: `model::replay::ended`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessEnd {
    /// The side that was running: `candidate`, `reference`, `golden` or `reference_native`.
    pub side: String,
    /// How the process ended: `killed by SIGSEGV (signal 11)`, `exited with status 3`.
    pub how: String,
    /// Who wrote the record: `dumpview` (replay_op.py could not).
    pub recorded_by: String,
}

/// The exception type (`sides.*.exception.type`) of a side that killed its process: its
/// message says how the process ended (`model::replay::ended`).
pub const DIED: &str = "ProcessDied";

/// The four runs of a replay.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sides {
    /// The candidate on the inputs as captured.
    #[serde(default)]
    pub candidate: Option<Side>,
    /// The reference on the inputs upcast (float16/bfloat16 -> float32, float32 -> float64).
    #[serde(default)]
    pub reference: Option<Side>,
    /// The reference on the inputs in float64.
    #[serde(default)]
    pub golden: Option<Side>,
    /// The reference on the inputs as captured (the dynamo standard's `ref`).
    #[serde(default)]
    pub reference_native: Option<Side>,
}

/// How one side's run went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// The OP or REF as given.
    #[serde(default)]
    pub spec: String,
    /// What it resolved to (`module.fn`).
    #[serde(default)]
    pub resolved: Option<String>,
    /// `ok`, `crash` or `unsupported`.
    pub status: Status,
    /// Wall time of the call, seconds (device synchronised); `None` when not measured (or
    /// not a finite number: replay.json writes those as strings).
    #[serde(default, deserialize_with = "lenient_seconds")]
    pub duration_s: Option<f64>,
    /// What it raised.
    #[serde(default)]
    pub exception: Option<Exception>,
    /// The inputs' dtype for this side, in words (`float32 (upcast from float16)`).
    #[serde(default)]
    pub input_dtype: Option<String>,
    /// The outputs it produced.
    #[serde(default)]
    pub outputs: Vec<String>,
    /// Who computed it when not replay_op.py: `in-process (tch, libtorch 2.13)` for the
    /// built-in references dumpview computes with feature `torch` (never in replay.json).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computed_by: Option<String>,
}

/// A side's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// It returned.
    Ok,
    /// It raised.
    Crash,
    /// It refused the dtype or layout (torch's "not implemented for", "unsupported", "is not
    /// supported").
    Unsupported,
    /// It was not run: replay_op.py's `--candidate-only` leaves the reference sides to the
    /// caller (dumpview computes them in-process).
    Skipped,
}

/// An exception a side raised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exception {
    /// The exception's type name (`RuntimeError`).
    #[serde(rename = "type", default)]
    pub kind: String,
    /// Its message.
    #[serde(default)]
    pub message: String,
    /// The formatted traceback.
    #[serde(default)]
    pub traceback: Option<String>,
}

/// The `format` value of [`InProcessRecord`].
pub const IN_PROCESS_FORMAT: &str = "dumpview.replay.inprocess";

/// The sides dumpview computed itself (feature `torch`: the built-in references
/// in-process), as it saves them next to replay.json (`inprocess.json`, docs/replay.md);
/// they stand in for the sides replay.json records as skipped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InProcessRecord {
    /// Always [`IN_PROCESS_FORMAT`].
    pub format: String,
    /// Always [`VERSION`].
    pub version: u64,
    /// What computed them: `in-process (tch, libtorch 2.13)`.
    pub computed_by: String,
    /// The input set they were computed from.
    pub input_file: String,
    /// `reference`, `golden` and `reference_native` (never `candidate`).
    pub sides: Sides,
}

impl InProcessRecord {
    /// Parses `bytes`, the contents of `inprocess.json`.
    ///
    /// # Errors
    /// A message (without the file name): not JSON, another format or version, damaged.
    pub fn parse(bytes: &[u8]) -> Result<InProcessRecord, String> {
        let record: InProcessRecord =
            serde_json::from_slice(bytes).map_err(|e| format!("not an in-process record: {e}"))?;
        if record.format != IN_PROCESS_FORMAT || record.version != VERSION {
            return Err(format!(
                "format {:?} version {}; this dumpview reads {IN_PROCESS_FORMAT:?} version {VERSION}",
                record.format, record.version
            ));
        }
        Ok(record)
    }
}

/// A number, or `None` for null, a string (`"nan"`) or anything else.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

fn lenient_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Ok(serde_json::Value::deserialize(d)?.as_f64())
}

impl Exception {
    /// `RuntimeError: message`.
    pub fn text(&self) -> String {
        if self.kind.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.kind, self.message)
        }
    }
}

impl ReplayRecord {
    /// Parses `bytes`, the contents of `replay.json`.
    ///
    /// # Errors
    /// A message (without the file name, which the caller adds): not JSON, not a replay
    /// record, or a version this reader does not know.
    pub fn parse(bytes: &[u8]) -> Result<ReplayRecord, String> {
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
        let format = value.get("format").and_then(|f| f.as_str());
        if format != Some(FORMAT) {
            return Err(format!(
                "not a replay record (format {}, expected {FORMAT:?})",
                format.map_or("missing".to_string(), |f| format!("{f:?}"))
            ));
        }
        match value.get("version").and_then(|v| v.as_u64()) {
            Some(VERSION) => {}
            Some(other) => {
                return Err(format!(
                    "replay record version {other}; this dumpview reads version {VERSION} (a newer replay_op.py? use the dumpview that ships it)"
                ));
            }
            None => return Err("replay record without a numeric version".into()),
        }
        serde_json::from_value(value).map_err(|e| format!("damaged replay record: {e}"))
    }

    /// Puts the sides of `computed` in place of the reference sides this record says were
    /// skipped (or does not have); the candidate is always replay_op.py's.
    pub fn fill_skipped(&mut self, computed: &Sides) {
        let slots = [
            (&mut self.sides.reference, &computed.reference),
            (&mut self.sides.golden, &computed.golden),
            (&mut self.sides.reference_native, &computed.reference_native),
        ];
        for (slot, side) in slots {
            let open = slot.as_ref().is_none_or(|s| s.status == Status::Skipped);
            if let (true, Some(side)) = (open, side) {
                *slot = Some(side.clone());
            }
        }
    }

    /// `stage#occurrence`.
    pub fn stage_key(&self) -> String {
        format!("{}#{}", self.stage, self.occurrence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contracts_example_parses_and_other_versions_are_refused() {
        let text = r#"{"format": "dumpview.replay", "version": 1,
 "dump": "d", "manifest": "d/m.json", "rank": 0, "label": "req", "match": 1,
 "occurrence_window": 1, "stage": "layers.0.rope", "occurrence": 1, "op_recorded": null,
 "device": "cpu", "versions": {"python": "3.11", "torch": "2.13.0", "torch_npu": null},
 "call": "keywords", "arg_map": {"captured": "param"}, "arg_overrides": {"eps": 1e-5},
 "args": [{"name": "q", "kind": "tensor", "dtype": "float32", "shape": [12,4,64], "stride": [256,64,1],
           "storage_offset": 0, "offset_in_span": 0, "storage_id": 5, "shares_storage_with": ["k"]},
          {"name": "eps", "kind": "float", "value": 1e-06}],
 "outputs": [{"name": "out.0", "dtype": "float32", "shape": [12,4,64], "stride": [256,64,1]}],
 "sides": {
   "candidate": {"spec": "m:f", "resolved": "m.f", "status": "crash", "duration_s": 0.0012,
                 "exception": {"type": "RuntimeError", "message": "boom", "traceback": "..."},
                 "input_dtype": "as captured", "outputs": []},
   "reference": {"spec": "builtin:rope_neox", "status": "ok", "duration_s": "nan", "outputs": ["out.0"]}
 }}"#;
        let r = ReplayRecord::parse(text.as_bytes()).unwrap();
        assert_eq!(r.stage_key(), "layers.0.rope#1");
        let c = r.sides.candidate.as_ref().unwrap();
        assert_eq!(c.status, Status::Crash);
        assert_eq!(c.exception.as_ref().unwrap().text(), "RuntimeError: boom");
        assert_eq!(r.args[0].shares_storage_with, vec!["k"]);
        assert_eq!(r.sides.reference.as_ref().unwrap().duration_s, None);
        assert!(r.sides.golden.is_none());
        let newer = text.replace("\"version\": 1", "\"version\": 2");
        let e = ReplayRecord::parse(newer.as_bytes()).unwrap_err();
        assert!(e.contains("version 2"), "{e}");
        let e = ReplayRecord::parse(b"{\"format\": \"x\"}").unwrap_err();
        assert!(e.contains("not a replay record"), "{e}");
        assert!(
            ReplayRecord::parse(b"{")
                .unwrap_err()
                .starts_with("not JSON")
        );
    }
}
