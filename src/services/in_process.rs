//! Feature `torch`: the reference sides of a replay computed in this process, with
//! libtorch (`crate::reference`), after replay_op.py ran the candidate alone
//! (`--candidate-only`).
//!
//! From the replay's own record: the input set replay_op.py read (`input_file`, local), with
//! its `--arg` overrides and `--arg-map` renames applied as the script applied them
//! (`model::replay::prepare`); then `reference` (inputs upcast, msprobe's benchmark
//! precision), `golden` (float64) and `reference_native` (as captured). Each is saved as
//! `<side>.safetensors` with the three side records in `inprocess.json` (evidence that
//! `dumpview report --replay` judges again without feature torch), and put into the
//! [`ReplayDir`] in memory for the judge.

use std::path::Path;
use std::time::Instant;

use crate::model::input_set::InputSet;
use crate::model::replay::load::{IN_PROCESS_FILE, ReplayDir, SAVED_EXTENSION};
use crate::model::replay::prepare;
use crate::model::replay::record::{
    Exception, IN_PROCESS_FORMAT, InProcessRecord, Side, Sides, Status, VERSION,
};
use crate::model::replay::side::{ComputedTensor, SideTensors, safetensors_bytes};
use crate::reference::{self, COMPUTED_BY, Upcast};

/// One side computed: its record and its outputs (`None` when it failed).
struct Computed {
    side: Side,
    outputs: Option<Vec<(String, ComputedTensor)>>,
}

/// Runs builtin `spec` on `set` with `upcast`, timed, as replay_op.py records a side.
fn side(spec: &str, set: &InputSet, upcast: Upcast) -> Computed {
    let name = spec.strip_prefix("builtin:").unwrap_or(spec);
    let widen = |d| upcast.apply(d);
    let mut side = Side {
        spec: spec.to_string(),
        resolved: Some(format!("dumpview::reference::{name}")),
        status: Status::Ok,
        duration_s: None,
        exception: None,
        input_dtype: Some(prepare::input_dtype_text(
            set,
            (upcast != Upcast::None).then_some(&widen as &dyn Fn(_) -> _),
        )),
        outputs: Vec::new(),
        computed_by: Some(COMPUTED_BY.to_string()),
    };
    let started = Instant::now();
    let result = reference::run_builtin(spec, set, upcast);
    side.duration_s = Some(started.elapsed().as_secs_f64());
    match result {
        Ok(outputs) => {
            side.outputs = outputs.iter().map(|(n, _)| n.clone()).collect();
            Computed {
                side,
                outputs: Some(outputs),
            }
        }
        Err(e) => {
            let message = e.to_string();
            side.status = match e {
                reference::ReferenceError::Torch { .. } => prepare::classify(&message),
                _ => Status::Crash,
            };
            side.exception = Some(Exception {
                kind: "ReferenceError".into(),
                message,
                traceback: None,
            });
            Computed {
                side,
                outputs: None,
            }
        }
    }
}

/// Computes the reference sides of the replay in `dir` (replay_op.py's record, the candidate
/// run) with built-in `spec`, saves them into the directory and puts them into `dir`.
/// Each side's outcome goes to `log` as one line.
///
/// # Errors
/// Why (the caller's `ReplayError::Failed`): replay.json names no input file, the input set cannot be read
/// again or does not hold what replay.json lists, or an output cannot be saved.
pub(crate) fn compute(
    dir: &mut ReplayDir,
    spec: &str,
    log: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let input_file = dir.record.input_file.clone().ok_or_else(|| {
        format!(
            "{}: replay.json names no input_file to compute the reference from",
            dir.dir.display()
        )
    })?;
    let captured = InputSet::read(Path::new(&input_file)).map_err(|e| e.to_string())?;
    let set = prepare::call_inputs(&dir.record, &captured)?;
    let mut sides = Sides::default();
    let mut outputs = Vec::new();
    for (role, upcast) in [
        ("reference", Upcast::Benchmark),
        ("golden", Upcast::Float64),
        ("reference_native", Upcast::None),
    ] {
        let computed = side(spec, &set, upcast);
        let s = &computed.side;
        let ms = s.duration_s.unwrap_or(0.0) * 1e3;
        match &s.exception {
            None => log(&format!(
                "dumpview: {role} {spec}: ok in {ms:.3} ms {COMPUTED_BY}, outputs {}",
                if s.outputs.is_empty() {
                    "none".to_string()
                } else {
                    s.outputs.join(", ")
                }
            )),
            Some(e) => log(&format!(
                "dumpview: {role} {spec}: {} {COMPUTED_BY}: {}",
                match s.status {
                    Status::Unsupported => "unsupported",
                    _ => "crash",
                },
                e.message
            )),
        }
        let saved = match &computed.outputs {
            Some(tensors) if !tensors.is_empty() => {
                let path = dir.dir.join(format!("{role}.{SAVED_EXTENSION}"));
                let bytes =
                    safetensors_bytes(tensors).map_err(|e| format!("{}: {e}", path.display()))?;
                std::fs::write(&path, bytes)
                    .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
                Some(path)
            }
            _ => None,
        };
        outputs.push(
            computed
                .outputs
                .filter(|t| !t.is_empty())
                .map(|tensors| SideTensors::Memory { tensors, saved }),
        );
        let slot = match role {
            "reference" => &mut sides.reference,
            "golden" => &mut sides.golden,
            _ => &mut sides.reference_native,
        };
        *slot = Some(computed.side);
    }
    let record = InProcessRecord {
        format: IN_PROCESS_FORMAT.into(),
        version: VERSION,
        computed_by: COMPUTED_BY.into(),
        input_file,
        sides,
    };
    let path = dir.dir.join(IN_PROCESS_FILE);
    let json = serde_json::to_string_pretty(&record).map_err(|e| e.to_string())?;
    std::fs::write(&path, json + "\n")
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    dir.record.fill_skipped(&record.sides);
    let mut outputs = outputs.into_iter();
    dir.files.reference = outputs.next().flatten();
    dir.files.golden = outputs.next().flatten();
    dir.files.reference_native = outputs.next().flatten();
    Ok(())
}
