//! The tensor comparison job: `t` on a stage whose tensors both captures saved starts one
//! (one at a time), progress and the result come back as actions, finished results are kept
//! by rank and stage for the popup and the exported report.
//!
//! Only owned state lives here: the job runs in the runtime's [`Slot::Compare`], which
//! drops events of jobs that are no longer current, so every event that arrives here is the
//! running comparison's.

use std::path::{Path, PathBuf};

use super::jobs::{JobEvent, JobOutput, JobProgress, JobSpec, Slot};
use super::session::Side;
use super::{App, Effect};
use crate::model::dump::StageKey;
use crate::model::dump::Window;
use crate::model::tensor::pairing::FileComparison;

/// A comparison in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorJob {
    /// The rank of the compared stage.
    pub rank: u32,
    /// `stage#occurrence`.
    pub stage: String,
    /// Elements compared so far, of `total` (0 until the runtime has read the headers).
    pub done: u64,
    /// Elements to compare in all (0: not known yet).
    pub total: u64,
    /// Esc was pressed; waiting for the comparison to stop at its next chunk.
    pub cancelling: bool,
}

/// One finished comparison, kept for the popup and the exported report.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorResult {
    /// The rank of the compared stage.
    pub rank: u32,
    /// `stage#occurrence`.
    pub stage: String,
    /// Every key pair of the two files, or why they could not be compared.
    pub result: Result<FileComparison, String>,
}

/// The result popup: which kept result, and which of its key pairs is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorPopup {
    /// Index into [`App::tensor_results`].
    pub result: usize,
    /// Index into the comparison's `pairs`.
    pub pair: usize,
}

/// `t`: starts comparing the selected stage's saved tensors, or says why not.
pub(super) fn start(app: &mut App) -> Vec<Effect> {
    if let Some(job) = &app.tensor_job {
        app.message = Some(format!(
            "already comparing {}: one comparison at a time (Esc cancels it)",
            job.stage
        ));
        return Vec::new();
    }
    match locate(app) {
        Err(message) => {
            app.message = Some(message);
            Vec::new()
        }
        Ok(Located::Kept(index)) => {
            app.tensor_popup = Some(TensorPopup {
                result: index,
                pair: 0,
            });
            Vec::new()
        }
        Ok(Located::Files { rank, stage, a, b }) => {
            app.message = None;
            app.tensor_job = Some(TensorJob {
                rank,
                stage: stage.clone(),
                done: 0,
                total: 0,
                cancelling: false,
            });
            vec![Effect::Spawn(JobSpec::Compare { rank, stage, a, b })]
        }
    }
}

enum Located {
    /// Already compared without error: show it again.
    Kept(usize),
    /// Both saved tensor files of the selected stage.
    Files {
        rank: u32,
        stage: String,
        a: PathBuf,
        b: PathBuf,
    },
}

/// The selected stage's saved tensors in A and B, or a message saying what is missing.
fn locate(app: &App) -> Result<Located, String> {
    let (Some(loaded), Some(choice), Some(row)) = (&app.loaded, app.choice(), app.row()) else {
        return Err("no stage selected".to_string());
    };
    let (Some(dump_b), Some(bi)) = (&loaded.session.b, choice.b) else {
        return Err(
            "t compares a stage's saved tensors in A and B: open two captures (dumpview A B)"
                .to_string(),
        );
    };
    let key = &row.key;
    match (row.a, row.b) {
        (Some(_), Some(_)) => {}
        (None, _) => {
            return Err(format!(
                "{key} is captured in B only: no tensor of A to compare"
            ));
        }
        (_, None) => {
            return Err(format!(
                "{key} is captured in A only: no tensor of B to compare"
            ));
        }
    }
    if let Some(index) = app
        .tensor_results
        .iter()
        .position(|t| t.rank == choice.rank && t.stage == *key && t.result.is_ok())
    {
        return Ok(Located::Kept(index));
    }
    let side = |side: Side, index: usize, window: &Window| -> Result<Option<PathBuf>, String> {
        if loaded.session.on_disk(window).is_none() {
            if let Some(dir) = &loaded.session.checkout_differs {
                // The files are there, from another run: say so, and where to compare them.
                let dir = dir.display();
                return Err(format!(
                    "{dir} was regenerated since this dumpview was built: its saved tensors \
                     are not the embedded run's. Compare them there with `dumpview {dir}/a \
                     {dir}/b`, or rebuild dumpview"
                ));
            }
            // `embedded:assets/examples/<pair>/a/...`: name the pair's directory.
            let source = window.source.to_string_lossy();
            let pair: PathBuf = Path::new(source.trim_start_matches("embedded:"))
                .components()
                .take(3)
                .collect();
            return Err(format!(
                "the embedded example's saved tensors are not on disk here: open {0}/a and \
                 {0}/b of a dumpview checkout to compare {key}",
                pair.display()
            ));
        }
        Ok(loaded.session.saved.get(side, index, key).cloned())
    };
    let window_a = &loaded.session.a.windows[choice.a];
    let window_b = &dump_b.windows[bi];
    let (a, b) = (
        side(Side::A, choice.a, window_a)?,
        side(Side::B, bi, window_b)?,
    );
    let named = |window: &Window| {
        window
            .records
            .iter()
            .find(|r| r.key() == *key)
            .and_then(|r| r.tensor_file.clone())
    };
    let missing = |side: &str, window: &Window| match named(window) {
        Some(file) => format!(
            "{key}: {side}'s saved tensor {file} is missing or outside its window directory"
        ),
        None => format!(
            "no saved tensor for {key} in {side}: capture it with DUMP_PROBE_TENSOR='{}'",
            capture_regex(key)
        ),
    };
    match (a, b) {
        (Some(a), Some(b)) => Ok(Located::Files {
            rank: choice.rank,
            stage: key.clone(),
            a,
            b,
        }),
        (None, None) if named(window_a).is_none() && named(window_b).is_none() => Err(format!(
            "no saved tensor for {key} in A or B: capture it with DUMP_PROBE_TENSOR='{}'",
            capture_regex(key)
        )),
        (None, _) => Err(missing("A", window_a)),
        (_, None) => Err(missing("B", window_b)),
    }
}

/// `^stage$` for `stage#occurrence` (the one rule: [`StageKey`]).
fn capture_regex(key: &str) -> String {
    crate::model::dump::capture_regex(StageKey::stage_of(key))
}

/// Esc while a job runs: ask the runtime to stop it (once).
pub(super) fn cancel(app: &mut App) -> Vec<Effect> {
    let Some(job) = app.tensor_job.as_mut() else {
        return Vec::new();
    };
    if job.cancelling {
        return Vec::new();
    }
    job.cancelling = true;
    app.message = Some(format!("cancelling the comparison of {}…", job.stage));
    vec![Effect::Cancel(Slot::Compare)]
}

/// An event of the running comparison: progress moves the gauge; its end keeps the result
/// (unless cancelled) and shows it (unless Esc was pressed). With nothing running, stale.
pub(super) fn on_event(app: &mut App, event: JobEvent) {
    let Some(job) = app.tensor_job.as_mut() else {
        return;
    };
    let result = match event {
        JobEvent::Progress(JobProgress::Elements { done, total }) => {
            job.done = done;
            job.total = total;
            return;
        }
        JobEvent::Progress(_) => return,
        JobEvent::Cancelled => {
            app.tensor_job = None;
            app.message = Some("tensor comparison cancelled".to_string());
            return;
        }
        JobEvent::Done(JobOutput::Compared(comparison)) => Ok(comparison),
        JobEvent::Done(_) => return,
        JobEvent::Failed(error) => Err(error),
    };
    let Some(job) = app.tensor_job.take() else {
        return;
    };
    let index = keep(app, job.rank, job.stage.clone(), result);
    if job.cancelling {
        app.message = Some(format!(
            "the comparison of {} finished before the cancel: kept for the report, t shows it",
            job.stage
        ));
    } else {
        app.message = None;
        app.tensor_popup = Some(TensorPopup {
            result: index,
            pair: 0,
        });
    }
}

/// Keeps `result`, replacing an earlier one of the same rank and stage; returns its index.
fn keep(app: &mut App, rank: u32, stage: String, result: Result<FileComparison, String>) -> usize {
    let kept = TensorResult {
        rank,
        stage,
        result,
    };
    match app
        .tensor_results
        .iter()
        .position(|t| t.rank == kept.rank && t.stage == kept.stage)
    {
        Some(i) => {
            app.tensor_results[i] = kept;
            i
        }
        None => {
            app.tensor_results.push(kept);
            app.tensor_results.len() - 1
        }
    }
}

/// Up/Down in the popup: the previous / next key pair of a multi-tensor file.
pub(super) fn step_pair(app: &mut App, delta: i64) {
    let Some(popup) = app.tensor_popup.as_mut() else {
        return;
    };
    let pairs = app.tensor_results[popup.result]
        .result
        .as_ref()
        .map_or(0, |c| c.pairs.len());
    if pairs > 0 {
        popup.pair = (popup.pair as i64 + delta).clamp(0, pairs as i64 - 1) as usize;
    }
}
