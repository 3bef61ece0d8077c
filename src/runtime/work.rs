//! What each [`JobSpec`] does when the runtime runs it: the bodies of the jobs.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use super::jobs::{JobContext, JobError, JobOutput, JobProgress, JobUpdate, Jobs};
use super::load;
use crate::app::jobs::JobSpec;
use crate::model::tensor::metrics::CompareProgress as TensorProgress;
use crate::model::tensor::pairing;

/// How often a running tensor comparison reports its progress (and passes a cancel on).
const TENSOR_PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// How often loading reports its progress at most.
pub(super) const LOAD_PROGRESS_EVERY: Duration = Duration::from_millis(30);

/// Starts `spec` as the current job of its slot.
pub fn spawn<E: From<JobUpdate> + Send + 'static>(jobs: &mut Jobs<E>, spec: JobSpec) {
    let slot = spec.slot();
    match spec {
        JobSpec::Compare { a, b, .. } => {
            jobs.spawn(slot, "the comparison", move |cx| compare(cx, a, b));
        }
        JobSpec::Export {
            markdown,
            name_hint,
        } => {
            jobs.spawn(slot, "the export", move |_| {
                write_report(&markdown, &name_hint)
                    .map(JobOutput::Exported)
                    .map_err(JobError::Failed)
            });
        }
        JobSpec::Load { source, tolerances } => {
            jobs.spawn(slot, "loading", move |cx| {
                let mut last = Instant::now();
                let mut progress = |p| {
                    if last.elapsed() > LOAD_PROGRESS_EVERY {
                        last = Instant::now();
                        cx.progress(JobProgress::Load(p));
                    }
                };
                load::source(&source, &tolerances, &mut progress)
                    .map(|session| JobOutput::Loaded(Box::new(session)))
                    .map_err(JobError::Failed)
            });
        }
    }
}

/// Compares `a` with `b` on a worker thread while this job's thread reports the progress
/// every [`TENSOR_PROGRESS_EVERY`] and hands a cancel on to the comparison's own flag.
fn compare(cx: &JobContext, a: PathBuf, b: PathBuf) -> Result<JobOutput, JobError> {
    let progress = Arc::new(TensorProgress::default());
    let (done_tx, done_rx) = channel();
    let worker = {
        let progress = Arc::clone(&progress);
        std::thread::spawn(move || {
            let result = super::jobs::caught("the comparison", || {
                pairing::compare_saved(&a, &b, &progress).map_err(JobError::Failed)
            });
            let _ = done_tx.send(result);
        })
    };
    // The comparison sets the total once it has read both headers.
    let report = || {
        cx.progress(JobProgress::Elements {
            done: progress.done.load(Ordering::Relaxed),
            total: progress.total.load(Ordering::Relaxed),
        });
    };
    report();
    let result = loop {
        match done_rx.recv_timeout(TENSOR_PROGRESS_EVERY) {
            Ok(result) => break result,
            Err(RecvTimeoutError::Timeout) => {
                if cx.is_cancelled() {
                    progress.cancel.store(true, Ordering::Relaxed);
                }
                report();
            }
            Err(RecvTimeoutError::Disconnected) => {
                break Err(JobError::Failed(
                    "the comparison stopped without a result".into(),
                ));
            }
        }
    };
    let _ = worker.join();
    result.map(JobOutput::Compared)
}

/// Writes the report to a new file in the current directory; never replaces one.
fn write_report(markdown: &str, name_hint: &str) -> Result<String, String> {
    let stem: String = name_hint
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    for n in 1..1000 {
        let path = PathBuf::from(format!("dumpview-report-{stem}-{n}.md"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut file) => {
                file.write_all(markdown.as_bytes())
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                return Ok(path.display().to_string());
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    Err("too many reports with this name in the current directory".to_string())
}
