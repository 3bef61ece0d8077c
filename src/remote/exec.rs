//! A program run on the remote host in a private temporary directory ([`RemoteHost::run`]):
//! the one thing dumpview writes on a remote host, for single-operator replay
//! (docs/replay.md). Everything else in this layer only reads.
//!
//! One command through the host's control master runs a shell script that makes one
//! directory with `mktemp -d` (mode 0700, in the login's `$TMPDIR` or `/tmp`), writes the
//! program's stdin there from a here-document (the script text), starts the program with
//! its stdout into the directory and its stderr streamed back line by line, then sends
//! the files the program left in one subdirectory back on stdout, framed with their sizes,
//! and removes the directory. The directory is removed on every way out:
//!
//! - the program's end (the script's `EXIT` trap);
//! - a cancel or a disconnect: killing the local ssh client closes the session's channel,
//!   and a heartbeat the script writes every second then fails and ends the script, whose
//!   trap kills the program and removes the directory (no terminal, so no SIGHUP to rely
//!   on); dumpview's death kills the client (`PR_SET_PDEATHSIG`) and its master with it;
//! - HUP, INT, TERM and PIPE delivered to the script.

use std::io::{Read, Write};
use std::sync::Arc;

use super::child::{Stream, pump};
use super::error::RemoteError;
use super::options::SshOptions;
use super::script::quote;
use super::source::RemoteSpec;
use super::ssh::Connection;

/// One word of the remote command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Word {
    /// Taken literally (single-quoted in the script).
    Literal(String),
    /// A path inside the temporary directory: `$d/<name>`.
    InTemp(String),
}

/// What to run remotely.
#[derive(Debug, Clone)]
pub struct Job<'a> {
    /// The program (a name looked up in the remote PATH, or a path).
    pub program: &'a str,
    /// Its arguments.
    pub args: &'a [Word],
    /// Environment assignments for it.
    pub env: &'a [(&'a str, &'a str)],
    /// Its standard input (a here-document: text, a trailing newline added if missing).
    pub stdin: &'a str,
    /// The subdirectory of the temporary directory whose regular files come back (those at
    /// its top level and one directory down).
    pub collect: &'a str,
}

/// What a remote job left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The program's exit status (127: not found; 128 + N: killed by signal N).
    pub status: i32,
    /// All it wrote to stdout.
    pub stdout: Vec<u8>,
    /// The regular files it left in [`Job::collect`], by name: `NAME` at its top level,
    /// `DIR/NAME` one directory down (a case matrix's `CASE/replay.json`).
    pub files: Vec<(String, Vec<u8>)>,
}

/// Why a remote job gave no [`Finished`].
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The connection or ssh failed.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// The caller cancelled it; the remote side was ended.
    #[error("cancelled")]
    Cancelled,
    /// The script did not finish its answer (mktemp failed, the shell died).
    #[error("{host}: the remote job ended without its answer: {detail}")]
    Incomplete {
        /// `[user@]host[:port]`.
        host: String,
        /// The remote shell's stderr (its last lines) or the framing problem.
        detail: String,
    },
}

/// A connection to one host for running jobs.
pub struct RemoteHost {
    connection: Arc<Connection>,
}

/// The exit status the script uses when `mktemp -d` fails.
const NO_TEMP_DIR: i32 = 97;

/// The script's exit status when the program's stdin could not be written into the
/// temporary directory (a full disk).
const NO_STDIN_FILE: i32 = 96;

impl RemoteHost {
    /// Connects to `spec`'s host (sharing a live master to the same destination).
    ///
    /// # Errors
    /// As [`crate::remote::Mirror::open`]: unreachable, authentication, host keys, no ssh.
    pub fn connect(spec: &RemoteSpec, options: &SshOptions) -> Result<RemoteHost, RemoteError> {
        Ok(RemoteHost {
            connection: Connection::open(spec, options)?,
        })
    }

    /// `[user@]host[:port]`.
    pub fn authority(&self) -> &str {
        self.connection.authority()
    }

    /// Runs `job` in a fresh temporary directory on the host (see the module doc), handing
    /// each line the program writes to stderr to `on_stderr` as it comes, and checking
    /// `cancelled` every 50 ms: a cancel kills the local ssh client, which ends the remote
    /// side and removes its directory.
    ///
    /// # Errors
    /// [`ExecError::Cancelled`]; [`ExecError::Remote`] for ssh's own failure;
    /// [`ExecError::Incomplete`] when the script's answer is cut short.
    pub fn run(
        &self,
        job: &Job,
        on_stderr: &mut dyn FnMut(&str),
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Finished, ExecError> {
        let script = script(job);
        self.connection.ensure_master()?;
        let mut child = self.connection.spawn_shell()?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&script);
        });
        let mut stdout = child.stdout.take().expect("piped stdout");
        let reader = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stdout.read_to_end(&mut bytes);
            bytes
        });
        let stderr = child.stderr.take().expect("piped stderr");
        let mut tail: Vec<String> = Vec::new();
        let pumped = pump(
            &mut child,
            vec![(Stream::Stderr, Box::new(stderr))],
            &mut |_, line| {
                on_stderr(line);
                tail.push(line.to_string());
                if tail.len() > 50 {
                    tail.remove(0);
                }
            },
            cancelled,
        );
        let _ = writer.join();
        let out = reader.join().unwrap_or_default();
        if pumped.cancelled {
            return Err(ExecError::Cancelled);
        }
        let status = pumped.status;
        let status = status.map_err(|e| RemoteError::Ssh {
            host: self.authority().to_string(),
            reason: format!("waiting for ssh: {e}"),
        })?;
        if status.code() == Some(255) && !out.windows(MARK.len()).any(|w| w == MARK) {
            return Err(self.connection.ssh_failure(&tail.join("\n")).into());
        }
        parse(&out).map_err(|detail| {
            let said = tail.join("\n");
            let detail = match status.code() {
                Some(NO_TEMP_DIR) => format!("mktemp -d failed: {said}"),
                Some(NO_STDIN_FILE) => {
                    format!(
                        "writing the program's stdin into the temporary directory failed: {said}"
                    )
                }
                _ if said.is_empty() => detail,
                _ => format!("{detail}; it said: {said}"),
            };
            ExecError::Incomplete {
                host: self.authority().to_string(),
                detail,
            }
        })
    }
}

/// The line that starts the framed answer.
const MARK: &[u8] = b"\ndumpview-files\n";

/// A here-document delimiter that is no line of `text`.
fn delimiter(text: &str) -> String {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id());
    (0u64..)
        .map(|n| {
            format!(
                "DUMPVIEW_STDIN_{:016x}",
                seed.wrapping_add(n.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            )
        })
        .find(|d| !text.lines().any(|line| line == d))
        .expect("some delimiter is free")
}

/// The shell script of `job` (see the module doc).
fn script(job: &Job) -> Vec<u8> {
    let mut s: Vec<u8> = Vec::new();
    s.extend_from_slice(
        format!(
            "umask 077\n\
             d=$(mktemp -d) || exit {NO_TEMP_DIR}\n\
             p= h= e=\n\
             cleanup() {{\n\
             trap '' HUP INT TERM PIPE\n\
             if [ -n \"$h\" ]; then kill -KILL \"$h\" 2>/dev/null; fi\n\
             if [ -n \"$e\" ]; then kill -KILL \"$e\" 2>/dev/null; fi\n\
             if [ -n \"$p\" ]; then kill -KILL \"$p\" 2>/dev/null; fi\n\
             rm -rf \"$d\"\n\
             }}\n\
             trap cleanup EXIT\n\
             trap 'exit 129' HUP\n\
             trap 'exit 130' INT\n\
             trap 'exit 141' PIPE\n\
             trap 'exit 143' TERM\n\
             ( trap '' PIPE; while sleep 1 </dev/null >/dev/null 2>&1; do printf . 2>/dev/null || {{ kill -TERM $$ 2>/dev/null; exit 0; }}; done ) </dev/null &\n\
             h=$!\n"
        )
        .as_bytes(),
    );
    let program_at = s.len();
    for (name, value) in job.env {
        s.extend_from_slice(name.as_bytes());
        s.push(b'=');
        s.extend(quote(value.as_bytes()));
        s.push(b' ');
    }
    s.extend(quote(job.program.as_bytes()));
    for word in job.args {
        s.push(b' ');
        match word {
            Word::Literal(text) => s.extend(quote(text.as_bytes())),
            Word::InTemp(name) => {
                s.extend_from_slice(b"\"$d\"/");
                s.extend(quote(name.as_bytes()));
            }
        }
    }
    s.extend_from_slice(b" >\"$d/.stdout\" <\"$d/.stdin\" 2>\"$d/.err\" &\n");
    // The program's stdin goes into a file first, read whole by a foreground `cat`: a
    // here-document on the program itself (105 kB for replay_op.py, past a pipe's 64 kB)
    // leaves the shell's writer blocked when the program never reads it (an interpreter
    // not found), and the session open.
    let delim = delimiter(job.stdin);
    let mut head = format!("cat >\"$d/.stdin\" <<'{delim}' || exit {NO_STDIN_FILE}\n").into_bytes();
    head.extend_from_slice(job.stdin.as_bytes());
    if !job.stdin.ends_with('\n') {
        head.push(b'\n');
    }
    head.extend_from_slice(format!("{delim}\n").as_bytes());
    // The program's stderr reaches the session through a FIFO and a relay `cat`, never
    // directly: a process the program leaves running (a candidate's child) then holds only the
    // FIFO, and once the program has ended the relay is given 2 s to drain and is killed, so
    // the leftover cannot hold the ssh session open (no job control in a non-interactive sh).
    head.extend_from_slice(
        format!(
            "mkfifo \"$d/.err\" || exit {NO_TEMP_DIR}\n\
             cat \"$d/.err\" >&2 &\n\
             e=$!\n"
        )
        .as_bytes(),
    );
    s.splice(program_at..program_at, head);
    // The heartbeat is ended with SIGKILL: a SIGTERM sent to it by `kill "$h"` was seen lost
    // (dash 0.5.12, under load: the script then waited on the live heartbeat forever, its
    // program long finished), and it holds nothing to clean up.
    s.extend_from_slice(
        format!(
            "p=$!\n\
             wait \"$p\"\n\
             s=$?\n\
             p=\n\
             ( sleep 2; kill -KILL \"$e\" ) </dev/null >/dev/null 2>&1 &\n\
             k=$!\n\
             wait \"$e\" 2>/dev/null\n\
             e=\n\
             kill -KILL \"$k\" 2>/dev/null\n\
             kill -KILL \"$h\" 2>/dev/null\n\
             wait \"$h\" 2>/dev/null\n\
             h=\n\
             printf '\\ndumpview-files\\n' || exit 141\n\
             n=$(wc -c <\"$d/.stdout\")\n\
             printf 'stdout %s\\n' $n\n\
             cat \"$d/.stdout\"\n\
             c=\"$d\"/{collect}\n\
             for f in \"$c\"/* \"$c\"/*/*; do\n\
             [ -f \"$f\" ] || continue\n\
             n=$(wc -c <\"$f\")\n\
             r=${{f#\"$c\"/}}\n\
             printf 'file %s %s\\n' $n \"$r\"\n\
             cat \"$f\"\n\
             done\n\
             printf 'dumpview-end %s\\n' \"$s\"\n\
             exit 0\n",
            collect = String::from_utf8_lossy(&quote(job.collect.as_bytes())),
        )
        .as_bytes(),
    );
    s
}

/// Reads the framed answer: heartbeat dots, the mark, `stdout N` and its bytes, then
/// `file N NAME` records and `dumpview-end STATUS`.
fn parse(out: &[u8]) -> Result<Finished, String> {
    let start = out
        .windows(MARK.len())
        .position(|w| w == MARK)
        .ok_or("no answer (the script stopped before its end)")?;
    let mut rest = &out[start + MARK.len()..];
    let line = |rest: &mut &[u8]| -> Result<String, String> {
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or("the answer is cut short")?;
        let text = String::from_utf8_lossy(&rest[..end]).into_owned();
        *rest = &rest[end + 1..];
        Ok(text)
    };
    let take = |rest: &mut &[u8], n: usize| -> Result<Vec<u8>, String> {
        if rest.len() < n {
            return Err(format!(
                "the answer is cut short ({} of {n} bytes)",
                rest.len()
            ));
        }
        let bytes = rest[..n].to_vec();
        *rest = &rest[n..];
        Ok(bytes)
    };
    let size = |word: Option<&str>| -> Result<usize, String> {
        word.and_then(|w| w.parse().ok())
            .ok_or_else(|| "a malformed size in the answer".to_string())
    };
    let header = line(&mut rest)?;
    let mut words = header.split(' ');
    if words.next() != Some("stdout") {
        return Err(format!("unexpected answer line {header:?}"));
    }
    let stdout = take(&mut rest, size(words.next())?)?;
    let mut files = Vec::new();
    loop {
        let header = line(&mut rest)?;
        if let Some(status) = header.strip_prefix("dumpview-end ") {
            let status = status
                .trim()
                .parse()
                .map_err(|_| format!("a malformed status {status:?}"))?;
            return Ok(Finished {
                status,
                stdout,
                files,
            });
        }
        let mut words = header.splitn(3, ' ');
        if words.next() != Some("file") {
            return Err(format!("unexpected answer line {header:?}"));
        }
        let n = size(words.next())?;
        let name = words.next().unwrap_or_default().to_string();
        let parts: Vec<&str> = name.split('/').collect();
        if parts.len() > 2
            || parts
                .iter()
                .any(|p| p.is_empty() || *p == "." || *p == "..")
        {
            return Err(format!("a file name the answer may not hold: {name:?}"));
        }
        files.push((name, take(&mut rest, n)?));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_read_past_the_heartbeats() {
        let mut out = b"...".to_vec();
        out.extend_from_slice(MARK);
        out.extend_from_slice(
            b"stdout 3\nhi\nfile 4 a.pt\nabcdfile 0 replay.json\ndumpview-end 2\n",
        );
        let f = parse(&out).unwrap();
        assert_eq!(f.status, 2);
        assert_eq!(f.stdout, b"hi\n");
        assert_eq!(
            f.files,
            vec![
                ("a.pt".to_string(), b"abcd".to_vec()),
                ("replay.json".to_string(), Vec::new())
            ]
        );
        assert!(parse(b"....").unwrap_err().contains("no answer"));
        let mut cut = MARK.to_vec();
        cut.extend_from_slice(b"stdout 3\nhi\nfile 9 x\nabc");
        assert!(parse(&cut).unwrap_err().contains("cut short"));
        for bad in ["../x", "a/../x", "a/b/c", "/x", "a//b", "."] {
            let mut evil = MARK.to_vec();
            evil.extend_from_slice(format!("stdout 0\nfile 1 {bad}\na").as_bytes());
            assert!(parse(&evil).unwrap_err().contains("may not hold"), "{bad}");
        }
        let mut nested = MARK.to_vec();
        nested.extend_from_slice(b"stdout 0\nfile 1 dtype=bfloat16/replay.json\nadumpview-end 0\n");
        assert_eq!(
            parse(&nested).unwrap().files[0].0,
            "dtype=bfloat16/replay.json"
        );
    }

    #[test]
    fn the_script_quotes_every_word_and_picks_a_free_delimiter() {
        let job = Job {
            program: "py thon",
            args: &[
                Word::Literal("it's; $(rm -rf /)".into()),
                Word::InTemp("out".into()),
            ],
            env: &[("PYTHONDONTWRITEBYTECODE", "1")],
            stdin: "print('x')",
            collect: "out",
        };
        let text = String::from_utf8(script(&job)).unwrap();
        assert!(
            text.contains("PYTHONDONTWRITEBYTECODE='1' 'py thon' 'it'\\''s; $(rm -rf /)' \"$d\"/'out' >\"$d/.stdout\" <\"$d/.stdin\" 2>\"$d/.err\" &\n"),
            "{text}"
        );
        // Its stderr reaches the session through the relayed FIFO, made before it starts.
        let relay = text
            .find("mkfifo \"$d/.err\" || exit 97\ncat \"$d/.err\" >&2 &\ne=$!\n")
            .expect("the stderr relay");
        assert!(relay < text.find("'py thon'").unwrap(), "{text}");
        // The stdin is written whole before the program starts.
        let cat = text
            .find("cat >\"$d/.stdin\" <<'DUMPVIEW_STDIN_")
            .expect("the stdin file");
        assert!(cat < text.find("'py thon'").unwrap(), "{text}");
        assert!(text.contains("print('x')\nDUMPVIEW_STDIN_"));
        let d = delimiter("a\nb");
        assert!(!d.is_empty() && d != "a");
    }
}
