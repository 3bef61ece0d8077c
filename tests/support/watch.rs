//! `dumpview watch … --json` as a child process whose events a test reads line by line.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Generous: CI machines are shared; benches/watch.py measures latency, not this.
pub const WAIT: Duration = Duration::from_secs(30);

/// A running `dumpview watch ARGS --json`; killed when dropped.
pub struct Watch {
    child: Child,
    /// Its events, one JSON object each.
    pub lines: Receiver<Value>,
}

impl Watch {
    /// Starts `dumpview watch` with `args` (sources and options; `--json` is added).
    pub fn start<I, S>(args: I) -> Watch
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dumpview"))
            .arg("watch")
            .args(args)
            .arg("--json")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value =
                    serde_json::from_str(&line).expect("each line is one JSON object");
                if send.send(value).is_err() {
                    break;
                }
            }
        });
        Watch { child, lines }
    }

    /// The next event matching `wanted`, skipping others; panics after [`WAIT`].
    pub fn next(&self, what: &str, mut wanted: impl FnMut(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(event) if wanted(&event) => return event,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => panic!("no {what} event within {WAIT:?}"),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("watch ended before a {what} event")
                }
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
