//! Background jobs: each runs on its own thread in a [`Slot`], reports typed
//! [`JobEvent`]s into the runtime's one channel, and can be cancelled through its
//! [`CancelHandle`], which sets a flag the job checks and kills the child process the job
//! runs, if any, with its process group.
//!
//! # Which events reach the app
//! One rule, kept here and nowhere else: an event passes [`Jobs::accept`] only while its job
//! is its slot's current job. Starting a job in a slot makes it current (and cancels the one
//! before it), and a job's final event (`Done`, `Failed`, `Cancelled`) ends it, so results of
//! superseded jobs and anything after a job's end are dropped. After a cancel, progress is
//! dropped and a failure reads as `Cancelled` (a killed child fails because it was killed);
//! a `Done` still passes, since the work finished before the cancel reached it (a finished
//! comparison still goes into the report).

use std::collections::HashMap;
use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};

pub use crate::app::jobs::{JobEvent, JobId, JobOutput, JobProgress, JobUpdate, Slot};

/// How a job stopped short of its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobError {
    /// It failed; the message is for the user.
    Failed(String),
    /// It saw its cancel flag (or its child was killed) and stopped.
    Cancelled,
}

impl From<String> for JobError {
    fn from(message: String) -> JobError {
        JobError::Failed(message)
    }
}

/// Stops one job: sets its flag, and kills its child process's group when it runs one.
/// Cloned into the job's [`JobContext`]; cancelling twice is harmless.
#[derive(Debug, Clone, Default)]
pub struct CancelHandle {
    flag: Arc<AtomicBool>,
    /// The process group (= pid, see [`JobContext::run_child`]) of the running child, while
    /// it is unreaped. Held under the lock while it is killed, so a reaped pid is never hit.
    child: Arc<Mutex<Option<i32>>>,
}

impl CancelHandle {
    /// Asks the job to stop: the flag is set, and a running child's process group gets
    /// SIGKILL (the job's thread then reaps it).
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
        let child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pgid) = *child {
            // SAFETY: kill(2) with a negative pid signals that process group; the group's
            // leader is our unreaped child, so the id cannot have been reused.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }

    /// True once [`CancelHandle::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}

/// What a running job is handed: its identity, a way to report progress, its cancel flag,
/// and a way to run a child process that the cancel kills.
pub struct JobContext {
    id: JobId,
    slot: Slot,
    sink: Box<dyn Fn(JobUpdate) + Send>,
    cancel: CancelHandle,
}

impl JobContext {
    /// This job's id.
    pub fn id(&self) -> JobId {
        self.id
    }

    /// Sends a progress event (dropped by [`Jobs::accept`] once the job is cancelled or
    /// superseded).
    pub fn progress(&self, progress: JobProgress) {
        self.send(JobEvent::Progress(progress));
    }

    /// True once the job was cancelled: a job checks this between steps and returns
    /// [`JobError::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Sends this job's final (or any) event into the runtime's channel.
    pub fn send(&self, event: JobEvent) {
        (self.sink)(JobUpdate {
            id: self.id,
            slot: self.slot,
            event,
        });
    }

    /// Runs `command` to its end as the leader of a new process group, with stdin closed and
    /// stdout and stderr captured; a cancel kills the whole group. Sends
    /// [`JobProgress::Child`] once it started. The child is always reaped before this
    /// returns.
    ///
    /// # Errors
    /// [`JobError::Cancelled`] when cancelled before or while it ran; `Failed` when it
    /// cannot be started or its output cannot be read.
    pub fn run_child(&self, mut command: Command) -> Result<ChildOutput, JobError> {
        use std::os::unix::process::CommandExt;
        command
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = {
            let mut slot = self.cancel.child.lock().unwrap_or_else(|e| e.into_inner());
            // Checked under the lock: a cancel either came before (nothing is started) or
            // waits for the lock and then finds the child to kill.
            if self.is_cancelled() {
                return Err(JobError::Cancelled);
            }
            let child = command
                .spawn()
                .map_err(|e| JobError::Failed(format!("cannot start {command:?}: {e}")))?;
            *slot = Some(child.id() as i32);
            child
        };
        let pid = child.id() as i32;
        self.progress(JobProgress::Child { pid: pid as u32 });
        let readers = [
            child
                .stdout
                .take()
                .map(|o| Box::new(o) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|e| Box::new(e) as Box<dyn Read + Send>),
        ]
        .map(|pipe| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut pipe) = pipe {
                    let _ = pipe.read_to_end(&mut bytes);
                }
                bytes
            })
        });
        // Wait for the exit without reaping (WNOWAIT), forget the pid under the lock, then
        // reap: a cancel in between finds no pid instead of a possibly reused one.
        loop {
            // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid(2).
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: waits on our own child; `info` is a valid pointer.
            let r = unsafe {
                libc::waitid(
                    libc::P_PID,
                    pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if r == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break;
            }
        }
        *self.cancel.child.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let status = child
            .wait()
            .map_err(|e| JobError::Failed(format!("waiting for {command:?}: {e}")))?;
        let [stdout, stderr] = readers.map(|r| r.join().unwrap_or_default());
        if self.is_cancelled() {
            return Err(JobError::Cancelled);
        }
        Ok(ChildOutput {
            pid: pid as u32,
            status,
            stdout,
            stderr,
        })
    }
}

/// What a child process left: its pid (reaped by now), exit status and output.
#[derive(Debug, Clone)]
pub struct ChildOutput {
    /// The child's pid (and process group id), no longer alive.
    pub pid: u32,
    /// How it ended.
    pub status: ExitStatus,
    /// All it wrote to stdout.
    pub stdout: Vec<u8>,
    /// All it wrote to stderr.
    pub stderr: Vec<u8>,
}

/// A slot's current job.
#[derive(Debug)]
struct Current {
    id: JobId,
    cancel: CancelHandle,
}

/// The running jobs, one current per slot, and the rule for which of their events count.
/// Each job's events go into the sink (the runtime's channel) as `E::from(JobUpdate)`.
pub struct Jobs<E> {
    sink: Sender<E>,
    last: u64,
    current: HashMap<Slot, Current>,
}

impl<E: From<JobUpdate> + Send + 'static> Jobs<E> {
    /// No jobs yet; their events will go into `sink`.
    pub fn new(sink: Sender<E>) -> Jobs<E> {
        Jobs {
            sink,
            last: 0,
            current: HashMap::new(),
        }
    }

    /// Makes a new job current in `slot` (cancelling the one before it) without running
    /// anything: the caller runs the work and sends its events through the context. Used by
    /// [`Jobs::spawn`], and by headless tests that script a job's events themselves.
    pub fn start(&mut self, slot: Slot) -> JobContext {
        self.cancel(slot);
        self.last += 1;
        let id = JobId(self.last);
        let cancel = CancelHandle::default();
        self.current.insert(
            slot,
            Current {
                id,
                cancel: cancel.clone(),
            },
        );
        let sink = self.sink.clone();
        JobContext {
            id,
            slot,
            sink: Box::new(move |update| {
                // The runtime gone: nobody is left to tell.
                let _ = sink.send(E::from(update));
            }),
            cancel,
        }
    }

    /// Starts `work` on a new thread as the current job of `slot` (cancelling the one before
    /// it). The job sends its progress through the context and always ends with exactly one
    /// final event: `Done` with what `work` returned, `Failed` (a panic included, named
    /// `what`), or `Cancelled`.
    pub fn spawn(
        &mut self,
        slot: Slot,
        what: &'static str,
        work: impl FnOnce(&JobContext) -> Result<JobOutput, JobError> + Send + 'static,
    ) -> JobId {
        let context = self.start(slot);
        let id = context.id;
        std::thread::spawn(move || {
            let result = caught(what, || work(&context));
            context.send(match result {
                Ok(output) => JobEvent::Done(output),
                Err(_) if context.is_cancelled() => JobEvent::Cancelled,
                Err(JobError::Cancelled) => JobEvent::Cancelled,
                Err(JobError::Failed(message)) => JobEvent::Failed(message),
            });
        });
        id
    }

    /// Cancels the current job of `slot`, if any ([`CancelHandle::cancel`]); it stays
    /// current until its final event arrives.
    pub fn cancel(&mut self, slot: Slot) {
        if let Some(current) = self.current.get(&slot) {
            current.cancel.cancel();
        }
    }

    /// The current job of `slot`.
    pub fn current(&self, slot: Slot) -> Option<JobId> {
        self.current.get(&slot).map(|c| c.id)
    }

    /// True while any slot has a current job.
    pub fn any_running(&self) -> bool {
        !self.current.is_empty()
    }

    /// The one place stale events are dropped (see the module doc): `Some` when `update`
    /// belongs to its slot's current job, rewritten after a cancel; a final event ends the
    /// job.
    pub fn accept(&mut self, update: JobUpdate) -> Option<JobUpdate> {
        let current = self.current.get(&update.slot)?;
        if current.id != update.id {
            return None;
        }
        let cancelled = current.cancel.is_cancelled();
        let event = match update.event {
            JobEvent::Progress(_) if cancelled => return None,
            JobEvent::Failed(_) if cancelled => JobEvent::Cancelled,
            event => event,
        };
        if event.is_final() {
            self.current.remove(&update.slot);
        }
        Some(JobUpdate { event, ..update })
    }
}

impl<E> Drop for Jobs<E> {
    /// Cancels every job, so no child process outlives the runtime.
    fn drop(&mut self) {
        for current in self.current.values() {
            current.cancel.cancel();
        }
    }
}

/// Runs `job`, turning a panic into an error naming `what` (for jobs off the UI thread).
pub(crate) fn caught<T>(
    what: &str,
    job: impl FnOnce() -> Result<T, JobError>,
) -> Result<T, JobError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        Err(JobError::Failed(format!("{what} panicked: {message}")))
    })
}

#[cfg(test)]
mod tests {
    use super::{JobError, caught};

    #[test]
    fn a_panicking_job_becomes_its_error() {
        let result: Result<(), JobError> = caught("the comparison", || panic!("index {} out", 3));
        assert_eq!(
            result,
            Err(JobError::Failed(
                "the comparison panicked: index 3 out".to_string()
            ))
        );
        let result: Result<(), JobError> = caught("loading", || std::panic::panic_any(7_u8));
        assert_eq!(
            result,
            Err(JobError::Failed("loading panicked: no message".to_string()))
        );
        assert_eq!(caught("x", || Ok::<_, JobError>(1)), Ok(1));
    }
}
