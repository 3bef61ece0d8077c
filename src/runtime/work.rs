//! What each [`JobSpec`] does when the runtime runs it: the bodies of the jobs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use super::jobs::{JobContext, JobError, JobOutput, JobProgress, JobUpdate, Jobs};
use super::load;
use crate::app::jobs::{JobSpec, REPLAY_TICK_MS, ReplaySpec};
use crate::model::ingest::{LoadPhase, Progress};
use crate::model::tensor::metrics::CompareProgress as TensorProgress;
use crate::model::tensor::pairing;
use crate::services::replay::{ReplayError, ReplayRequest};

/// How often a running tensor comparison reports its progress (and passes a cancel on).
const TENSOR_PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// How often loading reports its progress at most.
pub(super) const LOAD_PROGRESS_EVERY: Duration = Duration::from_millis(30);

/// Starts `spec` as the current job of its slot.
pub fn spawn<E: From<JobUpdate> + Send + 'static>(jobs: &mut Jobs<E>, spec: JobSpec) {
    let slot = spec.slot();
    match spec {
        JobSpec::Compare { a, b, .. } => {
            jobs.spawn(slot, "the comparison", move |cx| {
                // A remote capture's tensors come now, when the comparison needs them.
                for file in [&a, &b] {
                    crate::services::fetch::ensure(file).map_err(JobError::Failed)?;
                }
                compare(cx, a, b)
            });
        }
        JobSpec::Export {
            markdown,
            name_hint,
            target,
        } => {
            jobs.spawn(slot, "the export", move |_| {
                write_report(&markdown, &name_hint, &target)
                    .map(JobOutput::Exported)
                    .map_err(JobError::Failed)
            });
        }
        JobSpec::Load { source, tolerances } => {
            jobs.spawn(slot, "loading", move |cx| {
                let mut limit = ProgressLimit::new();
                let mut progress = |p| {
                    if limit.passes(&p) {
                        cx.progress(JobProgress::Load(p));
                    }
                };
                load::source(&source, &tolerances, &mut progress)
                    .map(|session| JobOutput::Loaded(Box::new(session)))
                    .map_err(JobError::Failed)
            });
        }
        JobSpec::Replay(spec) => {
            jobs.spawn(slot, "the replay", move |cx| replay(cx, spec));
        }
        JobSpec::PlanCases(spec) => {
            jobs.spawn(slot, "the case matrix", move |cx| {
                super::matrix_job::plan_and_run(cx, *spec)
            });
        }
        JobSpec::RunCases(spec) => {
            jobs.spawn(slot, "the case matrix", move |cx| {
                super::matrix_job::run_again(cx, spec)
            });
        }
        JobSpec::ReadCases { dir } => {
            jobs.spawn(slot, "reading the case matrix", move |_| {
                super::matrix_job::read(&dir)
            });
        }
    }
}

/// Runs one replay through `services::replay::run`, as `dumpview replay` does: on this
/// machine, or for a remote capture's window (its mirror's copy) on its host through the
/// capture's ssh options. Each log line goes out as progress with the time so far, and the
/// cancel predicate, which `run` asks every 50 ms, also sends the clock every
/// [`REPLAY_TICK_MS`]; a cancel kills the Python's process group (or ends the remote side).
fn replay(cx: &JobContext, spec: ReplaySpec) -> Result<JobOutput, JobError> {
    let started = Instant::now();
    let (dump, ssh) = match crate::services::fetch::remote_of(&spec.dump) {
        Some(place) => {
            let place = place.map_err(JobError::Failed)?;
            (place.source, Some(place.ssh))
        }
        None => (spec.dump.display().to_string(), None),
    };
    let request = ReplayRequest {
        dump,
        stage: spec.stage,
        candidate: spec.candidate,
        reference: spec.reference,
        standard: spec.standard,
        rank: None,
        window: None,
        attempt: None,
        device: None,
        python: spec.python,
        out: None,
        args: Vec::new(),
        arg_maps: Vec::new(),
        python_reference: false,
        import_path: Vec::new(),
    };
    let elapsed_ms = || started.elapsed().as_millis() as u64;
    let mut log = |line: &str| {
        cx.progress(JobProgress::Replay {
            elapsed_ms: elapsed_ms(),
            line: Some(line.to_string()),
        });
    };
    let last_tick = std::cell::Cell::new(0u64);
    let cancelled = || {
        let now = elapsed_ms();
        if now >= last_tick.get() + REPLAY_TICK_MS {
            last_tick.set(now);
            cx.progress(JobProgress::Replay {
                elapsed_ms: now,
                line: None,
            });
        }
        cx.is_cancelled()
    };
    match crate::services::replay::run(&request, ssh.as_ref(), &mut log, &cancelled) {
        Ok(result) => Ok(JobOutput::Replayed(Box::new(result))),
        Err(ReplayError::Cancelled) => Err(JobError::Cancelled),
        Err(e) => Err(JobError::Failed(e.to_string())),
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

/// `~/…` with the home directory for `~`; any other path as it is.
fn expand_home(path: &Path) -> PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => path.to_path_buf(),
    }
}

/// Writes the report to `target`: a new `dumpview-report-<name_hint>-N.md` (the first N
/// free) when `target` is a directory or ends with `/`, else `target` itself. Never
/// replaces a file. Returns the path written, as shown to the user.
///
/// # Errors
/// Where it tried and why: a missing directory, a file that exists, the system's error
/// (permission denied, a read-only file system).
pub(super) fn write_report(
    markdown: &str,
    name_hint: &str,
    target: &Path,
) -> Result<String, String> {
    let target = expand_home(target);
    let as_directory = target.as_os_str().to_string_lossy().ends_with('/') || target.is_dir();
    // Not `model::io::write_atomically`: a report the user asked for never replaces a file
    // (create_new), and that check and the creation must be one step.
    let create = |path: &Path| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
    };
    let write = |path: &Path, mut file: std::fs::File| {
        file.write_all(markdown.as_bytes())
            .map(|()| path.display().to_string())
            .map_err(|e| format!("could not write {}: {e}", path.display()))
    };
    if !as_directory {
        return match create(&target) {
            Ok(file) => write(&target, file),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(format!(
                "{} exists: not replaced (give another name or a directory)",
                target.display()
            )),
            Err(e) => Err(format!("could not create {}: {e}", target.display())),
        };
    }
    if !target.is_dir() {
        return Err(format!("{}: no such directory", target.display()));
    }
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
        let path = target.join(format!("dumpview-report-{stem}-{n}.md"));
        match create(&path) {
            Ok(file) => return write(&path, file),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("could not create {}: {e}", path.display())),
        }
    }
    Err(format!(
        "{}: 999 reports with this name already; give a file name",
        target.display()
    ))
}

/// Which load progress reports reach the screen: at most one per [`LOAD_PROGRESS_EVERY`],
/// except that a new phase or a new capture always does (B's reading and the analysis would
/// otherwise hide behind A's last report).
pub(super) struct ProgressLimit {
    sent: Option<(Instant, LoadPhase, usize)>,
}

impl ProgressLimit {
    pub(super) fn new() -> ProgressLimit {
        ProgressLimit { sent: None }
    }

    /// Whether `p` is sent; remembers it when it is.
    pub(super) fn passes(&mut self, p: &Progress) -> bool {
        let passes = match self.sent {
            None => true,
            Some((at, phase, capture)) => {
                phase != p.phase || capture != p.capture || at.elapsed() > LOAD_PROGRESS_EVERY
            }
        };
        if passes {
            self.sent = Some((Instant::now(), p.phase, p.capture));
        }
        passes
    }
}

#[cfg(test)]
mod tests {
    use super::write_report;

    #[test]
    fn a_directory_gets_a_new_file_and_a_file_name_is_written_as_named() {
        let dir = tempfile::tempdir().unwrap();
        let target = format!("{}/", dir.path().display());
        let first = write_report("# r", "example x/y", std::path::Path::new(&target)).unwrap();
        assert!(
            first.ends_with("dumpview-report-example_x_y-1.md"),
            "{first}"
        );
        let second = write_report("# r", "example x/y", dir.path()).unwrap();
        assert!(
            second.ends_with("dumpview-report-example_x_y-2.md"),
            "{second}"
        );
        let named = dir.path().join("mine.md");
        assert_eq!(
            write_report("# mine", "x", &named).unwrap(),
            named.display().to_string()
        );
        assert_eq!(std::fs::read_to_string(&named).unwrap(), "# mine");
        // Never over an existing file.
        let again = write_report("# other", "x", &named).unwrap_err();
        assert_eq!(
            again,
            format!(
                "{} exists: not replaced (give another name or a directory)",
                named.display()
            )
        );
        assert_eq!(std::fs::read_to_string(&named).unwrap(), "# mine");
    }

    #[test]
    fn a_failure_says_where_it_tried_and_why() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/dir/");
        let error = write_report("# r", "x", &missing).unwrap_err();
        assert_eq!(error, format!("{}: no such directory", missing.display()));
        // A file where a directory should be: the system's reason, and the path tried.
        std::fs::write(dir.path().join("plain"), "").unwrap();
        let inside = dir.path().join("plain/r.md");
        let error = write_report("# r", "x", &inside).unwrap_err();
        assert!(
            error.starts_with(&format!("could not create {}: ", inside.display()))
                && error.to_lowercase().contains("not a directory"),
            "{error}"
        );
    }
}
