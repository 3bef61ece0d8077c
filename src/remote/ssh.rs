//! One multiplexed ssh connection per destination ([`Connection`]): a control master that
//! dumpview starts, owns and ends, and the commands it runs through it ([`Connection::run`]).
//!
//! Every ssh dumpview starts is `PROGRAM <dumpview's -o options> [-p PORT] [-l USER]
//! <the user's options> … -- HOST …`: OpenSSH keeps the first value it is given for an
//! option, so dumpview's (BatchMode, the ControlPath in its own directory, timeouts) win over
//! the user's command line and config files, while everything dumpview leaves unset (keys,
//! ProxyJump, the agent, `Host` blocks) comes from them.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::control;
use super::error::{RemoteError, classify, ssh_message};
use super::options::SshOptions;
use super::source::RemoteSpec;

/// `ServerAliveInterval`: a silent server is asked every 5 s…
pub const SERVER_ALIVE_INTERVAL_S: u32 = 5;
/// …and given up after 3 unanswered asks (`ServerAliveCountMax`): 15 s.
pub const SERVER_ALIVE_COUNT_MAX: u32 = 3;

/// A command that sends no byte for this long is ended and its connection taken as lost
/// (a hung remote file system, a server that went away without closing the connection).
pub const QUIET_LIMIT: Duration = Duration::from_secs(60);

/// Where two mirrors share a connection: the same ssh command, trust and destination.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Destination {
    command: Vec<String>,
    accept_new_host_key: bool,
    connect_timeout_s: u32,
    user: Option<String>,
    host: String,
    port: Option<u16>,
}

/// One destination's control master and the commands run through it.
pub(crate) struct Connection {
    destination: Destination,
    /// `[user@]host[:port]` for messages.
    authority: String,
    /// The directory holding this master's socket (`ControlPath=<dir>/%C`).
    dir: PathBuf,
    master: Mutex<Option<Master>>,
    /// The running master's pid (0: none), readable without the lock by [`control::shutdown`].
    master_pid: AtomicI32,
}

struct Master {
    child: Child,
}

/// What a command run through [`Connection::run`] ended with.
#[derive(Debug)]
pub(crate) struct Ran {
    /// The remote command's exit status (never 255: that is ssh's own failure, an error).
    pub status: i32,
    /// What it wrote to stderr.
    pub stderr: String,
    /// Bytes it wrote to stdout (all handed to the sink).
    pub stdout_bytes: u64,
}

impl control::Master for Connection {
    fn stop_master(&self) {
        Connection::stop_master(self);
    }

    fn as_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }
}

impl Connection {
    /// The live connection to `spec`'s destination with these options, or a new one with
    /// its master started.
    ///
    /// # Errors
    /// The master could not be started: [`RemoteError::Unreachable`], `AuthFailed`,
    /// `UnknownHostKey`, `HostKeyChanged`, `Ssh` (the program is missing), `Cache` (no
    /// control directory).
    pub fn open(spec: &RemoteSpec, options: &SshOptions) -> Result<Arc<Connection>, RemoteError> {
        let destination = Destination {
            command: options.command.clone(),
            accept_new_host_key: options.accept_new_host_key,
            connect_timeout_s: options.connect_timeout_s,
            user: spec.user.clone(),
            host: spec.host.clone(),
            port: spec.port,
        };
        if let Some(live) = control::find(|c: &Connection| c.destination == destination) {
            live.ensure_master()?;
            return Ok(live);
        }
        let dir = control::connection_dir().map_err(|source| RemoteError::Cache {
            path: std::env::temp_dir(),
            source,
        })?;
        let connection = Arc::new(Connection {
            destination,
            authority: spec.authority(),
            dir,
            master: Mutex::new(None),
            master_pid: AtomicI32::new(0),
        });
        let weak: std::sync::Weak<Connection> = Arc::downgrade(&connection);
        control::register(weak);
        connection.ensure_master()?;
        Ok(connection)
    }

    /// `[user@]host[:port]`.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// dumpview's options, the destination and the user's options, in the order that lets
    /// dumpview's win; `master` for the control master, else a client of it.
    fn command(&self, master: bool) -> Command {
        let d = &self.destination;
        let mut command = Command::new(&d.command[0]);
        let mut option = |o: String| {
            command.arg("-o").arg(o);
        };
        option("BatchMode=yes".into());
        option(format!("ControlPath={}/%C", self.dir.display()));
        option(format!(
            "ControlMaster={}",
            if master { "yes" } else { "no" }
        ));
        if master {
            option("ControlPersist=no".into());
        }
        option(format!("ConnectTimeout={}", d.connect_timeout_s));
        option(format!("ServerAliveInterval={SERVER_ALIVE_INTERVAL_S}"));
        option(format!("ServerAliveCountMax={SERVER_ALIVE_COUNT_MAX}"));
        // Nothing but the commands dumpview sends: no forwardings from the user's config
        // (a port in use would fail the master), no terminal, no local command.
        option("ClearAllForwardings=yes".into());
        option("ForwardX11=no".into());
        option("ForwardAgent=no".into());
        option("RequestTTY=no".into());
        option("PermitLocalCommand=no".into());
        if d.accept_new_host_key {
            option("StrictHostKeyChecking=accept-new".into());
        }
        if let Some(port) = d.port {
            command.arg("-p").arg(port.to_string());
        }
        if let Some(user) = &d.user {
            command.arg("-l").arg(user);
        }
        command.args(&d.command[1..]);
        command
    }

    /// Starts the master unless one is running; a master that died (the connection broke)
    /// is started again.
    ///
    /// # Errors
    /// As [`Connection::open`].
    pub fn ensure_master(&self) -> Result<(), RemoteError> {
        let mut slot = self.master.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(master) = slot.as_mut() {
            match master.child.try_wait() {
                Ok(None) if self.socket_ready() => return Ok(()),
                _ => {
                    let _ = master.child.kill();
                    let _ = master.child.wait();
                    self.master_pid.store(0, Ordering::SeqCst);
                    *slot = None;
                }
            }
        }
        *slot = Some(self.start_master()?);
        Ok(())
    }

    /// Whether the master is running right now (false after the connection broke).
    pub fn master_alive(&self) -> bool {
        let mut slot = self.master.lock().unwrap_or_else(|e| e.into_inner());
        slot.as_mut()
            .is_some_and(|m| matches!(m.child.try_wait(), Ok(None)))
            && self.socket_ready()
    }

    fn socket_ready(&self) -> bool {
        std::fs::read_dir(&self.dir).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                // ssh binds `<path>.<random>` and links it to `<path>` once listening.
                !e.file_name().to_string_lossy().contains('.')
            })
        })
    }

    fn start_master(&self) -> Result<Master, RemoteError> {
        let mut command = self.command(true);
        command
            .arg("-N")
            .arg("--")
            .arg(&self.destination.host)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = control::spawn_long_lived(command).map_err(|e| self.cannot_run(e))?;
        self.master_pid.store(child.id() as i32, Ordering::SeqCst);
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let sink = Arc::clone(&stderr);
            let _ = std::thread::Builder::new()
                .name("dumpview-ssh-master-stderr".into())
                .spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n @ 1..) = pipe.read(&mut buf) {
                        let mut all = sink.lock().unwrap_or_else(|e| e.into_inner());
                        all.extend_from_slice(&buf[..n]);
                        // Keep the end: the message that matters comes last.
                        if all.len() > 64 * 1024 {
                            let cut = all.len() - 32 * 1024;
                            all.drain(..cut);
                        }
                    }
                });
        }
        // ConnectTimeout bounds the TCP connection and the banner; a login that then hangs
        // (a stuck ProxyJump, a server that never answers the key exchange) ends here.
        let deadline = Instant::now()
            + Duration::from_secs(u64::from(self.destination.connect_timeout_s) + 20);
        loop {
            if self.socket_ready() {
                return Ok(Master { child });
            }
            match child.try_wait() {
                Ok(Some(_)) => {
                    self.master_pid.store(0, Ordering::SeqCst);
                    // Let the reader take the last of stderr.
                    std::thread::sleep(Duration::from_millis(20));
                    let text =
                        String::from_utf8_lossy(&stderr.lock().unwrap_or_else(|e| e.into_inner()))
                            .into_owned();
                    return Err(classify(&self.authority, &self.by_hand(), &text));
                }
                Ok(None) => {}
                Err(e) => return Err(self.cannot_run(e)),
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                self.master_pid.store(0, Ordering::SeqCst);
                return Err(RemoteError::Unreachable {
                    host: self.authority.clone(),
                    reason: format!(
                        "no session after {} s (connected, but the login did not finish)",
                        self.destination.connect_timeout_s + 20
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The ssh command line that reaches the destination by hand, for messages: the user's
    /// command, `-p`, `-l`, the host.
    fn by_hand(&self) -> String {
        let d = &self.destination;
        let mut words: Vec<String> = d.command.clone();
        if let Some(port) = d.port {
            words.extend(["-p".to_string(), port.to_string()]);
        }
        if let Some(user) = &d.user {
            words.extend(["-l".to_string(), user.clone()]);
        }
        words.push(d.host.clone());
        words
            .iter()
            .map(|w| shlex::try_quote(w).map_or_else(|_| w.clone(), |q| q.into_owned()))
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn cannot_run(&self, e: std::io::Error) -> RemoteError {
        RemoteError::Ssh {
            host: self.authority.clone(),
            reason: format!(
                "cannot run `{}`: {e} (choose the program with --ssh-command or DUMPVIEW_SSH)",
                self.destination.command.join(" ")
            ),
        }
    }

    /// Ends the master: `ssh -O exit`, then SIGTERM if it is still there; removes its
    /// directory. Lock-free on purpose, so that a signal's [`control::shutdown`] never
    /// waits on a thread that is inside [`Connection::ensure_master`].
    pub fn stop_master(&self) {
        let pid = self.master_pid.swap(0, Ordering::SeqCst);
        if pid > 0 {
            let mut exit = self.command(false);
            exit.arg("-O")
                .arg("exit")
                .arg("--")
                .arg(&self.destination.host)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let asked = exit.status().is_ok_and(|s| s.success());
            let deadline = Instant::now() + Duration::from_secs(2);
            // SAFETY: kill(2) with signal 0 only checks for the process.
            while asked && Instant::now() < deadline && unsafe { libc::kill(pid, 0) } == 0 {
                if let Ok(mut slot) = self.master.try_lock() {
                    if let Some(m) = slot.as_mut() {
                        if !matches!(m.child.try_wait(), Ok(None)) {
                            break;
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            if let Ok(mut slot) = self.master.try_lock() {
                if let Some(mut m) = slot.take() {
                    let _ = m.child.kill();
                    let _ = m.child.wait();
                }
            } else {
                // SAFETY: the pid is our own child's, not yet reaped (the slot holds it).
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// Starts the remote `sh -s` through the master with stdin, stdout and stderr piped, for
    /// a caller that streams them itself ([`super::exec`]). The ssh client runs in a session
    /// of its own and gets SIGKILL when dumpview dies; killing it (its pid is its process
    /// group) closes the remote session's channel.
    ///
    /// # Errors
    /// [`RemoteError::Ssh`] when the ssh program cannot be started.
    pub fn spawn_shell(&self) -> Result<Child, RemoteError> {
        let mut command = self.command(false);
        command
            .arg("--")
            .arg(&self.destination.host)
            .arg("sh -s")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        control::spawn_with_parent_death(&mut command, libc::SIGKILL)
            .map_err(|e| self.cannot_run(e))
    }

    /// ssh's own failure as [`classify`] reads its stderr (exit status 255).
    pub fn ssh_failure(&self, stderr: &str) -> RemoteError {
        classify(&self.authority, &self.by_hand(), stderr)
    }

    /// Runs `script` with the remote `sh` (sent on stdin, so the login shell parses only
    /// `sh -s`), handing its stdout to `stdout` as it comes.
    ///
    /// # Errors
    /// ssh's own failure (exit 255) as [`classify`] reads it; a command silent for
    /// [`QUIET_LIMIT`] as [`RemoteError::ConnectionLost`]; `sink` failing as
    /// [`RemoteError::Cache`] for `sink_path`.
    pub fn run(
        &self,
        script: &[u8],
        stdout: &mut dyn Write,
        sink_path: &std::path::Path,
    ) -> Result<Ran, RemoteError> {
        let mut command = self.command(false);
        command
            .arg("--")
            .arg(&self.destination.host)
            .arg("sh -s")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = control::spawn_with_parent_death(&mut command, libc::SIGKILL)
            .map_err(|e| self.cannot_run(e))?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let script = script.to_vec();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&script);
        });
        let mut stderr_pipe = child.stderr.take().expect("piped stderr");
        let stderr_reader = std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = stderr_pipe.read_to_end(&mut text);
            text
        });
        let progress = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let killed = Arc::new(AtomicBool::new(false));
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let pid = child.id() as i32;
        let watchdog = {
            let (progress, killed) = (Arc::clone(&progress), Arc::clone(&killed));
            std::thread::spawn(move || {
                loop {
                    match finished.recv_timeout(Duration::from_millis(500)) {
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                    let last = Duration::from_millis(progress.load(Ordering::Relaxed));
                    if started.elapsed().saturating_sub(last) > QUIET_LIMIT {
                        killed.store(true, Ordering::SeqCst);
                        // SAFETY: the child is not reaped before this thread is joined.
                        unsafe {
                            libc::kill(pid, libc::SIGKILL);
                        }
                        return;
                    }
                }
            })
        };
        let mut pipe = child.stdout.take().expect("piped stdout");
        let mut buf = vec![0u8; 256 * 1024];
        let mut bytes = 0u64;
        let mut sink_error = None;
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    bytes += n as u64;
                    progress.store(started.elapsed().as_millis() as u64, Ordering::Relaxed);
                    if sink_error.is_none() {
                        if let Err(e) = stdout.write_all(&buf[..n]) {
                            sink_error = Some(e);
                            let _ = child.kill();
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        drop(done);
        let _ = watchdog.join();
        let status = child.wait();
        let _ = writer.join();
        let stderr =
            String::from_utf8_lossy(&stderr_reader.join().unwrap_or_default()).into_owned();
        if let Some(source) = sink_error {
            return Err(RemoteError::Cache {
                path: sink_path.to_path_buf(),
                source,
            });
        }
        if killed.load(Ordering::SeqCst) {
            return Err(RemoteError::ConnectionLost {
                host: self.authority.clone(),
                reason: format!("no answer for {} s", QUIET_LIMIT.as_secs()),
            });
        }
        let status = status.map_err(|e| self.cannot_run(e))?;
        match status.code() {
            Some(255) => Err(classify(&self.authority, &self.by_hand(), &stderr)),
            Some(code) => Ok(Ran {
                status: code,
                stderr,
                stdout_bytes: bytes,
            }),
            None => Err(RemoteError::ConnectionLost {
                host: self.authority.clone(),
                reason: format!("ssh ended by a signal ({})", ssh_message(&stderr)),
            }),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.stop_master();
        control::connection_closed();
    }
}
