//! A child process's output read as lines while a cancel is watched ([`pump`]): the one loop
//! behind [`RemoteHost::run`](super::RemoteHost::run) (the ssh client of a remote job) and
//! the runtime's local Python (`runtime::python`), which may use this layer. It lives here,
//! not in the runtime, because this layer may not name the runtime.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ExitStatus};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::Duration;

/// How often the caller's cancel is asked.
pub(crate) const POLL: Duration = Duration::from_millis(50);

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
/// SIGKILL. Once every stream is closed the child is waited for (a cancel still honoured);
/// then what is left of its group is killed, so nothing it started outlives it.
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
    loop {
        match lines.recv_timeout(POLL) {
            Ok((stream, line)) => on_line(stream, &line),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if !was_cancelled && cancelled() {
            was_cancelled = true;
            kill_group();
        }
    }
    // Every stream closed: the child ended (or closed them); one still running is waited
    // for, the cancel still asked.
    let status = loop {
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
    };
    kill_group();
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
