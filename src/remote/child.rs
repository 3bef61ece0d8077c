//! A child process's output read as lines while a cancel is watched ([`pump`]): the one loop
//! behind [`RemoteHost::run`](super::RemoteHost::run) (the ssh client of a remote job) and
//! the runtime's local Python (`services::python`), which may use this layer. It lives here,
//! not in the runtime, because this layer may not name the runtime.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ExitStatus};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// How often the caller's cancel is asked.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// How long the outputs of a child that ended may stay silent before they are no longer
/// read: they are closed by then unless a process outside its group holds them.
const DRAIN: Duration = Duration::from_secs(2);

/// Which of the child's outputs a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    /// Its standard output.
    Stdout,
    /// Its standard error.
    Stderr,
}

/// How a [`pump`] ended.
#[derive(Debug)]
pub(crate) struct Pumped {
    /// The child's exit status (an error when it could not be waited for).
    pub status: std::io::Result<ExitStatus>,
    /// Whether the cancel fired (the child's process group was killed).
    pub cancelled: bool,
}

/// Reads each of `streams` line by line on a thread of its own and hands every line (without
/// its line end, invalid UTF-8 replaced) to `on_line` on the calling thread as it comes;
/// asks `cancelled` every 50 ms and, when it says so, kills the child's process group with
/// SIGKILL. When the child ends, what is left of its group is killed, so nothing it started
/// outlives it (nor holds its outputs open); its outputs are then read to their end, or
/// until they stay silent for 2 s while held open by a process outside the group (an ssh
/// control master holds its clients' outputs). A child that closes its outputs and runs on
/// is waited for, the cancel still honoured.
///
/// `child` must lead its own process group (`setsid`, or `process_group(0)`) and be
/// unreaped: the group id is then ours until its last member is gone.
pub(crate) fn pump(
    child: &mut Child,
    streams: Vec<(Stream, Box<dyn Read + Send>)>,
    on_line: &mut dyn FnMut(Stream, &str),
    cancelled: &dyn Fn() -> bool,
) -> Pumped {
    let pid = child.id() as i32;
    let kill_group = || {
        // SAFETY: kill(2) on the group the unreaped child leads (see above); ESRCH when no
        // member is left.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    };
    let (lines_tx, lines) = channel::<(Stream, String)>();
    let readers: Vec<_> = streams
        .into_iter()
        .map(|(stream, read)| {
            let tx = lines_tx.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(read);
                let mut line = Vec::new();
                while let Ok(1..) = reader.read_until(b'\n', &mut line) {
                    let text = String::from_utf8_lossy(&line)
                        .trim_end_matches(['\n', '\r'])
                        .to_string();
                    if tx.send((stream, text)).is_err() {
                        break;
                    }
                    line.clear();
                }
            })
        })
        .collect();
    drop(lines_tx);
    let mut was_cancelled = false;
    let mut status: Option<std::io::Result<ExitStatus>> = None;
    // Set once the child ended: how long its output may still take to drain.
    let mut drain_until: Option<Instant> = None;
    loop {
        match lines.recv_timeout(POLL) {
            Ok((stream, line)) => {
                on_line(stream, &line);
                if let Some(until) = drain_until.as_mut() {
                    *until = Instant::now() + DRAIN;
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if !was_cancelled && cancelled() {
            was_cancelled = true;
            kill_group();
        }
        if status.is_none() {
            match child.try_wait() {
                Ok(None) => {}
                ended => {
                    // What the child started and left running goes with it; one of those
                    // holding an output open would otherwise keep us here for ever.
                    kill_group();
                    status = Some(ended.map(|s| s.expect("ended")));
                    drain_until = Some(Instant::now() + DRAIN);
                }
            }
        }
        // The child ended and its group is gone, yet an output stays open: held by a
        // process outside the group (an ssh control master holds a client's), silent
        // for DRAIN. What it said is all here; stop reading.
        if drain_until.is_some_and(|until| Instant::now() > until) {
            break;
        }
    }
    // Every stream closed (or the drain gave up): the child ended, or closed its outputs
    // and is still running; that one is waited for, the cancel still asked.
    let status = match status {
        Some(status) => status,
        None => loop {
            match child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) => {
                    if !was_cancelled && cancelled() {
                        was_cancelled = true;
                        kill_group();
                    }
                    std::thread::sleep(POLL);
                }
                Err(e) => break Err(e),
            }
        },
    };
    kill_group();
    if drain_until.is_some_and(|until| Instant::now() > until) {
        // Readers still blocked on an output held open elsewhere: left to end with it.
        return Pumped {
            status,
            cancelled: was_cancelled,
        };
    }
    for reader in readers {
        let _ = reader.join();
    }
    Pumped {
        status,
        cancelled: was_cancelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn spawn(script: &str) -> Child {
        use std::os::unix::process::CommandExt;
        Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap()
    }

    #[test]
    fn lines_of_both_streams_arrive_and_the_status_is_the_child_s() {
        let mut child = spawn("echo out1; echo err1 >&2; printf 'out2'; exit 3");
        let streams: Vec<(Stream, Box<dyn Read + Send>)> = vec![
            (Stream::Stdout, Box::new(child.stdout.take().unwrap())),
            (Stream::Stderr, Box::new(child.stderr.take().unwrap())),
        ];
        let mut seen = Vec::new();
        let pumped = pump(
            &mut child,
            streams,
            &mut |s, l| seen.push((s, l.to_string())),
            &|| false,
        );
        assert_eq!(pumped.status.unwrap().code(), Some(3));
        assert!(!pumped.cancelled);
        seen.sort_by_key(|(s, l)| (*s == Stream::Stderr, l.clone()));
        assert_eq!(
            seen,
            vec![
                (Stream::Stdout, "out1".to_string()),
                (Stream::Stdout, "out2".to_string()),
                (Stream::Stderr, "err1".to_string()),
            ]
        );
    }

    #[test]
    fn what_the_child_left_running_ends_with_it_and_never_holds_the_pump() {
        // (exit code, stderr lines, seconds) of `script` pumped to its end.
        let pumped_stderr = |script: &str| {
            let mut child = spawn(script);
            let streams: Vec<(Stream, Box<dyn Read + Send>)> =
                vec![(Stream::Stderr, Box::new(child.stderr.take().unwrap()))];
            let started = std::time::Instant::now();
            let mut seen = Vec::new();
            let pumped = pump(
                &mut child,
                streams,
                &mut |_, l| seen.push(l.to_string()),
                &|| false,
            );
            (pumped.status.unwrap().code(), seen, started.elapsed())
        };
        // In its group: killed when the child ends.
        let (code, seen, took) = pumped_stderr("sleep 60 & echo started >&2; exit 4");
        assert_eq!((code, seen), (Some(4), vec!["started".to_string()]));
        assert!(took < Duration::from_secs(5), "{took:?}");
        // Outside its group (a session of its own), holding stderr open: read until silent.
        // (The child ends only once the other has its session: a group kill cannot reach it.)
        let (code, seen, took) = pumped_stderr(
            "f=$(mktemp -u); setsid sh -c \"echo one >&2; : >$f; exec sleep 60\" & \
             while [ ! -e $f ]; do sleep 0.01; done; rm -f $f; echo two >&2; exit 0",
        );
        assert_eq!(
            (code, seen),
            (Some(0), vec!["one".to_string(), "two".to_string()])
        );
        assert!(
            took >= DRAIN && took < DRAIN + Duration::from_secs(3),
            "{took:?}"
        );
        let _ = Command::new("pkill").args(["-f", "^sleep 60$"]).status();
    }

    #[test]
    fn a_cancel_kills_the_group_within_a_poll_or_two() {
        let mut child = spawn("sleep 60 & sleep 60");
        let streams: Vec<(Stream, Box<dyn Read + Send>)> =
            vec![(Stream::Stderr, Box::new(child.stderr.take().unwrap()))];
        let started = std::time::Instant::now();
        let pumped = pump(&mut child, streams, &mut |_, _| {}, &|| {
            started.elapsed() > Duration::from_millis(100)
        });
        assert!(pumped.cancelled);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(pumped.status.unwrap().signal(), Some(libc::SIGKILL));
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
