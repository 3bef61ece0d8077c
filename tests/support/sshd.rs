//! A real OpenSSH server for the remote tests: `/usr/sbin/sshd` on 127.0.0.1 on a free port,
//! as the current user, with a throwaway host key and client key and its own sshd_config in
//! a temporary directory, and an ssh_config for the client (`ssh -F <dir>/ssh_config`) so
//! that no test reads or writes the real `~/.ssh`.
//!
//! The remote login's HOME and TMPDIR are a fresh directory of the harness (sshd_config
//! `SetEnv`), and a `ForceCommand` wrapper starts every command there, so a test can prove
//! that nothing was written on the remote side. `Sshd::start` returns `None` (and the test
//! prints "skipped: no sshd") only where sshd or ssh-keygen is missing; scripts/test.sh
//! installs openssh-server.
//!
//! [`Sshd::shared`] is one server per test binary, started by the first test that asks and
//! ended when the test process exits, for tests that only connect through it. A test that
//! stops or restarts the server, counts its control masters, looks at its home or files, or
//! changes its setup starts its own with [`Sshd::start`] (each test's masters and files are
//! then its own). The host and client keys are made once per test binary either way.

#![allow(dead_code)]

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `Host` alias the ssh_config defines for this server (`dvtest:/path` is scp's form).
pub const ALIAS: &str = "dvtest";

/// What to change in the server's setup.
#[derive(Debug, Clone, Default)]
pub struct SshdSetup {
    /// Directories put before `/usr/bin:/bin` in the remote login's PATH (wrapper tools).
    pub path_prefix: Vec<PathBuf>,
}

/// A running sshd and its client configuration.
pub struct Sshd {
    /// Keys, configs, logs, and the remote home.
    pub dir: tempfile::TempDir,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    /// The login name (the current user).
    pub user: String,
    child: Option<Child>,
    sshd: PathBuf,
    /// The write end of the shared server's watchdog pipe (see [`Sshd::shared`]); `None` for
    /// a test's own server, which its `Drop` stops.
    lifeline: Option<ChildStdin>,
}

fn find_program(name: &str, candidates: &[&str]) -> Option<PathBuf> {
    for candidate in candidates {
        if Path::new(candidate).is_file() {
            return Some(PathBuf::from(candidate));
        }
    }
    let out = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .ok()?;
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (!path.is_empty()).then(|| PathBuf::from(path))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn current_user() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The host and client key pairs, made once per test binary: (file name, bytes) of
/// `host_key`, `host_key.pub`, `client_key`, `client_key.pub`.
fn keys(keygen: &Path) -> &'static [(String, Vec<u8>)] {
    static KEYS: OnceLock<Vec<(String, Vec<u8>)>> = OnceLock::new();
    KEYS.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("dv-sshd-keys-")
            .tempdir()
            .unwrap();
        let mut keys = Vec::new();
        for key in ["host_key", "client_key"] {
            let status = Command::new(keygen)
                .args(["-q", "-t", "ed25519", "-N", ""])
                .arg("-f")
                .arg(dir.path().join(key))
                .status()
                .unwrap();
            assert!(status.success(), "ssh-keygen failed");
            for name in [key.to_string(), format!("{key}.pub")] {
                let bytes = std::fs::read(dir.path().join(&name)).unwrap();
                keys.push((name, bytes));
            }
        }
        keys
    })
}

impl Sshd {
    /// The server this test binary shares, started on first use; or "skipped: no sshd" and
    /// None. Only for tests that connect through it and nothing more: it serves tests running
    /// in parallel, so its control masters, home and files are not any one test's.
    ///
    /// A static is never dropped, so the server cannot be stopped by `Drop`: it runs under a
    /// `sh` watchdog that reads a pipe whose write end only this process holds, and kills
    /// the server and removes its directory when the pipe closes, however the test process
    /// ends (even SIGKILL).
    pub fn shared() -> Option<Shared> {
        static SHARED: OnceLock<Option<Sshd>> = OnceLock::new();
        SHARED
            .get_or_init(|| {
                // Never dropped, so its TempDir is never removed by Rust: the watchdog
                // removes it after the server is gone.
                Sshd::start_as(SshdSetup::default(), true)
            })
            .as_ref()
            .map(Shared)
    }

    /// Starts a server with the default setup, or says "skipped: no sshd" and returns None.
    pub fn start() -> Option<Sshd> {
        Sshd::start_with(SshdSetup::default())
    }

    /// Starts a server with `setup`, or says "skipped: no sshd" and returns None.
    pub fn start_with(setup: SshdSetup) -> Option<Sshd> {
        Sshd::start_as(setup, false)
    }

    /// [`Sshd::start_with`]; `shared`: under the watchdog of [`Sshd::shared`].
    fn start_as(setup: SshdSetup, shared: bool) -> Option<Sshd> {
        let (Some(sshd), Some(keygen)) = (
            find_program("sshd", &["/usr/sbin/sshd", "/usr/local/sbin/sshd"]),
            find_program("ssh-keygen", &["/usr/bin/ssh-keygen"]),
        ) else {
            eprintln!("skipped: no sshd (install openssh-server; scripts/test.sh does)");
            return None;
        };
        if is_root() {
            // sshd's privilege separation directory (Debian makes it at boot).
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        let dir = tempfile::Builder::new()
            .prefix("dv-sshd-")
            .tempdir()
            .unwrap();
        let d = dir.path();
        for (name, bytes) in keys(&keygen) {
            use std::os::unix::fs::OpenOptionsExt;
            // ssh and sshd refuse private keys others can read.
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(d.join(name))
                .and_then(|mut f| f.write_all(bytes))
                .unwrap();
        }
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
        std::fs::create_dir_all(d.join("home")).unwrap();
        std::fs::write(d.join("known_hosts_empty"), "").unwrap();
        let mut path = setup
            .path_prefix
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>();
        path.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(String::from));
        // Every command starts in the fresh home, whatever the login's real home is.
        std::fs::write(
            d.join("force_command.sh"),
            "cd \"$HOME\" || exit 1\nexec /bin/sh -c \"$SSH_ORIGINAL_COMMAND\"\n",
        )
        .unwrap();
        let home = d.join("home");
        let config = format!(
            "ListenAddress 127.0.0.1\n\
             HostKey {d}/host_key\n\
             AuthorizedKeysFile {d}/authorized_keys\n\
             PidFile {d}/sshd.pid\n\
             StrictModes no\n\
             UsePAM no\n\
             PermitRootLogin prohibit-password\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             PrintMotd no\n\
             PrintLastLog no\n\
             MaxStartups 100:30:200\n\
             MaxSessions 100\n\
             Subsystem sftp internal-sftp\n\
             SetEnv HOME={home} TMPDIR={home} PATH={path}\n\
             ForceCommand /bin/sh {d}/force_command.sh\n",
            d = d.display(),
            home = home.display(),
            path = path.join(":"),
        );
        std::fs::write(d.join("sshd_config"), config).unwrap();
        let mut server = Sshd {
            dir,
            port: 0,
            user: current_user(),
            child: None,
            sshd,
            lifeline: None,
        };
        for _ in 0..5 {
            server.port = free_port();
            server.write_client_config("ssh_config", "known_hosts", "client_key");
            server.write_known_hosts();
            if server.launch(shared) {
                return Some(server);
            }
        }
        panic!(
            "sshd did not start; its log:\n{}",
            std::fs::read_to_string(server.dir.path().join("sshd.log")).unwrap_or_default()
        );
    }

    fn write_known_hosts(&self) {
        let key = std::fs::read_to_string(self.dir.path().join("host_key.pub")).unwrap();
        let key = key.trim();
        std::fs::write(
            self.dir.path().join("known_hosts"),
            format!(
                "[127.0.0.1]:{p} {key}\n[{ALIAS}]:{p} {key}\n",
                p = self.port
            ),
        )
        .unwrap();
    }

    /// Writes an ssh_config named `name` using known_hosts file `known_hosts` and identity
    /// `identity` (file names in the harness directory); returns its path.
    pub fn write_client_config(&self, name: &str, known_hosts: &str, identity: &str) -> PathBuf {
        let d = self.dir.path();
        let path = d.join(name);
        std::fs::write(
            &path,
            format!(
                "Host {ALIAS}\n  HostName 127.0.0.1\n  Port {port}\n\
                 Host *\n  User {user}\n  IdentityFile {d}/{identity}\n  IdentitiesOnly yes\n  \
                 UserKnownHostsFile {d}/{known_hosts}\n  GlobalKnownHostsFile /dev/null\n  \
                 StrictHostKeyChecking yes\n  PasswordAuthentication no\n  LogLevel ERROR\n",
                port = self.port,
                user = self.user,
                d = d.display(),
            ),
        )
        .unwrap();
        path
    }

    /// Runs sshd; `watched`: under the watchdog of [`Sshd::shared`] (sshd exits, and the
    /// `sh` with it, when the pipe on the watchdog's stdin closes).
    fn launch(&mut self, watched: bool) -> bool {
        let log = std::fs::File::create(self.dir.path().join("sshd.log")).unwrap();
        let mut command = if watched {
            // The background subshell reads fd 3 (a copy of stdin: an asynchronous list's
            // own stdin is /dev/null); sshd does not get it. `wait` makes the `sh` end when
            // sshd does, so a failed start shows as before.
            let mut command = Command::new("/bin/sh");
            command
                .arg("-c")
                .arg(
                    "exec 3<&0\n\
                     \"$0\" \"$@\" 3<&- </dev/null & pid=$!\n\
                     (read -r _ <&3; kill \"$pid\" 2>/dev/null; sleep 1; rm -rf \"$DV_SSHD_DIR\") &\n\
                     exec 3<&-\n\
                     wait \"$pid\"",
                )
                .arg(&self.sshd)
                .env("DV_SSHD_DIR", self.dir.path())
                .stdin(Stdio::piped());
            command
        } else {
            let mut command = Command::new(&self.sshd);
            command.stdin(Stdio::null());
            command
        };
        let mut child = command
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(self.dir.path().join("sshd_config"))
            .arg("-o")
            .arg(format!("Port={}", self.port))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.lifeline = child.stdin.take();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return true;
            }
            if let Some(child) = &mut self.child {
                if let Ok(Some(_)) = child.try_wait() {
                    self.child = None;
                    return false;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop();
        false
    }

    /// The harness's directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The remote login's HOME and TMPDIR (and where every command starts).
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// The client configuration (`ssh -F` takes it).
    pub fn ssh_config(&self) -> PathBuf {
        self.dir.path().join("ssh_config")
    }

    /// `ssh -F <dir>/ssh_config`, for `--ssh-command`.
    pub fn ssh_command(&self) -> String {
        format!("ssh -F {}", self.ssh_config().display())
    }

    /// `ssh://127.0.0.1:PORT/<path>` (`path` absolute).
    pub fn url(&self, path: &Path) -> String {
        assert!(path.is_absolute());
        format!("ssh://127.0.0.1:{}{}", self.port, path.display())
    }

    /// scp's form through the config's alias: `dvtest:<path>`.
    pub fn scp(&self, path: &Path) -> String {
        format!("{ALIAS}:{}", path.display())
    }

    /// Options for a mirror through this server's client config, caching into `cache`.
    pub fn options(&self, cache: &Path) -> dumpview::internals::remote::SshOptions {
        dumpview::internals::remote::SshOptions::new(
            Some(&self.ssh_command()),
            false,
            Some(cache.to_path_buf()),
            None,
            None,
        )
        .unwrap()
    }

    /// The source `ssh://127.0.0.1:PORT/<path>` parsed.
    pub fn spec(&self, path: &Path) -> dumpview::internals::remote::RemoteSpec {
        match dumpview::internals::remote::parse_source(&self.url(path)).unwrap() {
            dumpview::internals::remote::SourceSpec::Remote(spec) => spec,
            dumpview::internals::remote::SourceSpec::Local(_) => unreachable!(),
        }
    }

    /// Kills the server and every session it serves (the connections drop).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let pid = child.id() as i32;
            let all = descendants(pid);
            let _ = child.kill();
            for p in all {
                // SAFETY: signalling processes of our own server.
                unsafe {
                    libc::kill(p, libc::SIGKILL);
                }
            }
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, with the same keys.
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.launch(false) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("sshd did not restart on port {}", self.port);
    }

    /// The control masters running for this server (processes of its ssh_config with
    /// ControlMaster=yes).
    pub fn masters(&self) -> Vec<String> {
        processes_mentioning(&self.ssh_config().display().to_string())
            .into_iter()
            .filter(|p| p.contains("ControlMaster=yes"))
            .collect()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// Writes an executable script `name` with `body` into the harness directory.
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(body.as_bytes()).unwrap();
        drop(file);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }
}

/// The server of [`Sshd::shared`]; used as an `Sshd` (it derefs to one), so a test reads
/// the same whichever it has.
#[derive(Clone, Copy)]
pub struct Shared(&'static Sshd);

impl std::ops::Deref for Shared {
    type Target = Sshd;

    fn deref(&self) -> &Sshd {
        self.0
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Every process whose ancestry leads to `root` (read from /proc).
pub fn descendants(root: i32) -> Vec<i32> {
    let mut parent_of = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
            let Some(after) = stat.rfind(')') else {
                continue;
            };
            let fields: Vec<&str> = stat[after + 1..].split_whitespace().collect();
            if let Some(ppid) = fields.get(1).and_then(|p| p.parse::<i32>().ok()) {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}

/// Processes (not zombies) whose command line contains `needle`, as `pid: cmdline`.
pub fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let me = std::process::id().to_string();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.parse::<u32>().is_err() || name == me {
                continue;
            }
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains(needle) {
                found.push(format!("{name}: {text}"));
            }
        }
    }
    found
}
