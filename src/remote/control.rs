//! The ssh control masters' lifetime: a private directory for their sockets, and a teardown
//! that runs at every exit ([`shutdown`]: on drop, on unwinding panics through the mirrors'
//! drops, on SIGTERM/SIGINT/SIGHUP through [`install_exit_cleanup`]). On Linux each master
//! also gets SIGTERM from the kernel when dumpview dies any other way (`PR_SET_PDEATHSIG`),
//! so no master outlives dumpview even after SIGKILL.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, Weak, mpsc};

/// What the registry holds of a connection: a master it can end at shutdown. A trait, so
/// that this module never names the connection type (`ssh` uses this module, not the other
/// way round).
pub(crate) trait Master: Send + Sync + 'static {
    /// Ends the connection's master now, without waiting on its locks.
    fn stop_master(&self);
    /// The connection as `Any`, for [`find`] to hand back its own type.
    fn as_any(self: std::sync::Arc<Self>) -> std::sync::Arc<dyn std::any::Any + Send + Sync>;
}

/// The process's control directory and the connections whose sockets live in it.
struct Registry {
    /// `/tmp/dvssh-<pid>-<n>` (mode 0700), created with the first connection and removed
    /// with the last.
    dir: Option<PathBuf>,
    /// Every connection made, live or not (dead ones are pruned as new ones come).
    connections: Vec<Weak<dyn Master>>,
}

fn registry() -> &'static Mutex<Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        Mutex::new(Registry {
            dir: None,
            connections: Vec::new(),
        })
    })
}

fn lock() -> std::sync::MutexGuard<'static, Registry> {
    registry().lock().unwrap_or_else(|e| e.into_inner())
}

/// A fresh directory (mode 0700) for one connection's control socket, inside the process's
/// control directory. Short on purpose: a socket's path must fit in 104–108 bytes, and ssh
/// adds the 40 characters of `%C` and a temporary suffix of 17.
pub(crate) fn connection_dir() -> io::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut registry = lock();
    let top = match &registry.dir {
        Some(dir) if dir.is_dir() => dir.clone(),
        _ => {
            let dir = private_dir()?;
            registry.dir = Some(dir.clone());
            dir
        }
    };
    let dir = top.join(NEXT.fetch_add(1, Ordering::Relaxed).to_string());
    make_private(&dir)?;
    Ok(dir)
}

/// Registers a live connection so that [`shutdown`] can reach it.
pub(crate) fn register(connection: Weak<dyn Master>) {
    let mut registry = lock();
    registry.connections.retain(|c| c.strong_count() > 0);
    registry.connections.push(connection);
}

/// A live connection to the same destination, to share one master per host.
pub(crate) fn find<T: Master>(same: impl Fn(&T) -> bool) -> Option<std::sync::Arc<T>> {
    // Upgraded under the lock, compared and dropped after it: dropping the last handle of a
    // connection runs its teardown, which takes the lock.
    let live: Vec<_> = lock()
        .connections
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    live.into_iter()
        .filter_map(|c| c.as_any().downcast::<T>().ok())
        .find(|c| same(c))
}

/// Called by a connection that has stopped: removes the control directory when no live
/// connection is left.
pub(crate) fn connection_closed() {
    let mut registry = lock();
    registry.connections.retain(|c| c.strong_count() > 0);
    if registry.connections.is_empty() {
        if let Some(dir) = registry.dir.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The process's control directory while one exists (tests look inside it).
pub fn control_dir() -> Option<PathBuf> {
    lock().dir.clone()
}

/// Ends every master (`ssh -O exit`, then SIGTERM to one that is still there) and removes
/// the control directory: for the end of the process (a mirror used afterwards cannot
/// connect again). Safe to call more than once and from any thread.
pub fn shutdown() {
    let (connections, dir) = {
        let mut registry = lock();
        let live: Vec<_> = registry
            .connections
            .drain(..)
            .filter_map(|c| c.upgrade())
            .collect();
        (live, registry.dir.take())
    };
    for connection in &connections {
        connection.stop_master();
    }
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Makes SIGTERM, SIGINT and SIGHUP end the masters and remove the control directory
/// ([`shutdown`]) before dumpview dies of the signal as it would have without this. Call it
/// once before the first connection (more calls do nothing). A caller with its own handling
/// of these signals calls [`shutdown`] from it instead.
///
/// # Errors
/// The signal handlers could not be installed.
pub fn install_exit_cleanup() -> io::Result<()> {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    if INSTALLED.get().is_some() {
        return Ok(());
    }
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    std::thread::Builder::new()
        .name("dumpview-ssh-exit".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                shutdown();
                let _ = signal_hook::low_level::emulate_default_handler(signal);
                // A signal whose default is not to end the process: end it anyway.
                std::process::exit(128 + signal);
            }
        })?;
    let _ = INSTALLED.set(());
    Ok(())
}

/// Spawns `command` as a child that the kernel sends `signal` when its parent thread ends
/// (masters are spawned from one thread that lives as long as the process,
/// [`spawn_long_lived`], so only dumpview's end ends them), in a session of its own: with
/// no controlling terminal, no ssh it starts (a ProxyJump's too, which BatchMode does not
/// reach) can ask for a password or a host key over the workbench.
pub(crate) fn spawn_with_parent_death(command: &mut Command, signal: i32) -> io::Result<Child> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id();
        // SAFETY: setsid, prctl and getppid are async-signal-safe system calls; nothing else
        // runs between fork and exec.
        unsafe {
            command.pre_exec(move || {
                if libc::setsid() == -1 {
                    return Err(io::Error::last_os_error());
                }
                if libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // The parent died before prctl took effect: end as it would have.
                if libc::getppid() as u32 != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        use std::os::unix::process::CommandExt;
        let _ = signal;
        // SAFETY: setsid is an async-signal-safe system call.
        unsafe {
            command.pre_exec(|| match libc::setsid() {
                -1 => Err(io::Error::last_os_error()),
                _ => Ok(()),
            });
        }
    }
    command.spawn()
}

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `command` from a thread that never ends, with SIGTERM on dumpview's death: for
/// masters, which outlive the thread that asked for them.
pub(crate) fn spawn_long_lived(command: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (send, receive) = mpsc::channel::<SpawnRequest>();
        let _ = std::thread::Builder::new()
            .name("dumpview-ssh-spawner".into())
            .spawn(move || {
                for (mut command, reply) in receive {
                    let _ = reply.send(spawn_with_parent_death(&mut command, libc::SIGTERM));
                }
            });
        Mutex::new(send)
    });
    let (reply, answer) = mpsc::channel();
    sender
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((command, reply))
        .map_err(|_| io::Error::other("the ssh spawner thread is gone"))?;
    answer
        .recv()
        .map_err(|_| io::Error::other("the ssh spawner thread is gone"))?
}

/// `/tmp/dvssh-<pid>-<n>`, mode 0700 (the system temp directory where `/tmp` is missing).
fn private_dir() -> io::Result<PathBuf> {
    let base = match Path::new("/tmp").is_dir() {
        true => PathBuf::from("/tmp"),
        false => std::env::temp_dir(),
    };
    let pid = std::process::id();
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| sweep_stale(&base, pid));
    for n in 0..1000 {
        let dir = base.join(format!("dvssh-{pid}-{n}"));
        match make_private(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!(
        "no free name for a control directory in {}",
        base.display()
    )))
}

/// Removes the control directories a dumpview killed with SIGKILL left behind (it cannot remove
/// its own then; the kernel ends its masters, PR_SET_PDEATHSIG): every `dvssh-<p>-<n>` of a
/// process `p` that is gone, and those named with this process's own pid, which an earlier
/// process of that pid left (this runs before this process makes its first). Best effort: a
/// directory another user owns (`/tmp` is sticky) or one that cannot be read stays.
fn sweep_stale(base: &Path, own: u32) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("dvssh-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, n)| n.parse::<u32>().ok().and(pid.parse::<u32>().ok()))
        else {
            continue;
        };
        if pid == own || !alive(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Whether process `pid` exists (signal 0: permission errors mean it does).
fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 sends nothing; it only checks that the process exists.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

fn make_private(dir: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_removes_control_directories_of_gone_processes_and_of_its_own_pid() {
        let base = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let own = std::process::id();
        let names = [
            format!("dvssh-{gone}-0"),
            format!("dvssh-{own}-0"),
            "dvssh-1-0".to_string(),
            "dvssh-notapid-0".to_string(),
            "other".to_string(),
        ];
        for name in &names {
            std::fs::create_dir_all(base.path().join(name).join("0")).unwrap();
        }
        sweep_stale(base.path(), own);
        let mut left: Vec<String> = std::fs::read_dir(base.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        // pid 1 lives; a name that is not dumpview's and another file stay.
        assert_eq!(left, ["dvssh-1-0", "dvssh-notapid-0", "other"]);
    }
}
