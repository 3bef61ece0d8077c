//! [`OutputWithin`]: `Command::output` with a deadline, so that a process that hangs fails
//! its test with what it said and the process tree, instead of stalling the whole run
//! until CI's own limit ends it with nothing to read.

use std::io::Read;
use std::process::{Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Generous for any one dumpview command of the tests (the slowest, a remote replay that
/// imports torch on both sides, takes about 10 s here); a hang is what it catches.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(300);

/// `output()` that gives up after a limit.
pub trait OutputWithin {
    /// As [`Command::output`] (stdin null, stdout and stderr captured), within
    /// [`COMMAND_LIMIT`].
    ///
    /// # Panics
    /// When the process (or something holding its output open) is still running at the
    /// limit: the panic holds the command, its stderr so far and `ps`'s process forest, and
    /// the process and its descendants are killed first.
    fn output_within_limit(&mut self) -> Output;
}

impl OutputWithin for Command {
    fn output_within_limit(&mut self) -> Output {
        output_within(self, COMMAND_LIMIT)
    }
}

/// A pipe read to its end on a thread of its own, into a buffer readable meanwhile.
struct Drain {
    bytes: Arc<Mutex<Vec<u8>>>,
    done: std::thread::JoinHandle<()>,
}

impl Drain {
    fn start(mut pipe: impl Read + Send + 'static) -> Drain {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&bytes);
        let done = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Drain { bytes, done }
    }

    fn so_far(&self) -> Vec<u8> {
        self.bytes.lock().unwrap().clone()
    }
}

/// [`OutputWithin::output_within_limit`] with the limit given.
pub fn output_within(command: &mut Command, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    let stdout = Drain::start(child.stdout.take().expect("piped"));
    let stderr = Drain::start(child.stderr.take().expect("piped"));
    let mut status: Option<ExitStatus> = None;
    while Instant::now() < deadline {
        if status.is_none() {
            status = child.try_wait().expect("wait for the child");
        }
        // Done when it ended and its pipes closed (a descendant may hold them open).
        if status.is_some() && stdout.done.is_finished() && stderr.done.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let finished = status.is_some() && stdout.done.is_finished() && stderr.done.is_finished();
    if !finished {
        let forest = Command::new("ps")
            .args(["-eo", "pid,ppid,pgid,stat,etimes,args", "--forest"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_else(|e| format!("(ps failed: {e})"));
        let pid = child.id() as i32;
        for p in super::sshd::descendants(pid).into_iter().chain([pid]) {
            // SAFETY: kill(2) on processes this test started (the unreaped child, and its
            // descendants read from /proc a moment ago).
            unsafe {
                libc::kill(p, libc::SIGKILL);
            }
        }
        let _ = child.wait();
        panic!(
            "{command:?} {} after {} s\n--- its stderr so far ---\n{}\n--- its stdout so far ---\n{}\n--- processes ---\n{forest}",
            if status.is_some() {
                "ended, but its output was still held open"
            } else {
                "was still running"
            },
            limit.as_secs(),
            String::from_utf8_lossy(&stderr.so_far()),
            String::from_utf8_lossy(&stdout.so_far()),
        );
    }
    let _ = stdout.done.join();
    let _ = stderr.done.join();
    Output {
        // Reaped already by try_wait: wait() gives the status it kept.
        status: child.wait().expect("wait for the child"),
        stdout: std::mem::take(&mut *stdout.bytes.lock().unwrap()),
        stderr: std::mem::take(&mut *stderr.bytes.lock().unwrap()),
    }
}
