//! Captures named as SOURCEs mapped to local paths: a local path is itself; a remote one
//! (`ssh://[user@]host[:port]/path`, `[user@]host:path`; docs/remote.md) becomes its mirror's
//! root in the local cache. [`Sources`] holds the mirrors for the process (their ssh masters
//! end when it is dropped); [`MirrorFetcher`] brings their saved tensors on demand
//! ([`super::fetch`]); [`Followed`] is a SOURCE a watch follows.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::fetch::{Fetcher, RemotePlace};
use crate::remote;

pub use crate::remote::parse_size;

/// An error for the user (exit status 2).
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// How captures on other machines are reached: the remote options every subcommand takes
/// (`--ssh-command`, `--accept-new-host-key`, `--cache-dir`, `--cache-size`, `--poll`).
#[derive(Debug, Clone, Default)]
pub struct Reach {
    /// The ssh program and its options, split like a shell would; `None`: `$DUMPVIEW_SSH`,
    /// else ssh.
    pub ssh_command: Option<String>,
    /// Trust a host's key the first time it is seen (StrictHostKeyChecking=accept-new).
    pub accept_new_host_key: bool,
    /// The local cache of remote captures; `None`: `$XDG_CACHE_HOME/dumpview/remote`.
    pub cache_dir: Option<PathBuf>,
    /// The cache's cap in bytes; `None`: 2 GB.
    pub cache_size: Option<u64>,
    /// The interval between two listings of a watched remote source; `None`: one second.
    pub poll: Option<Duration>,
}

impl Reach {
    fn ssh_options(&self) -> Result<remote::SshOptions, Error> {
        Ok(remote::SshOptions::new(
            self.ssh_command.as_deref(),
            self.accept_new_host_key,
            self.cache_dir.clone(),
            self.cache_size,
            self.poll,
        )?)
    }
}

/// True when `source` names a capture on another host (`host:path`, `ssh://…`).
///
/// # Errors
/// A SOURCE that reads as remote but cannot be parsed.
pub fn is_remote(source: &str) -> Result<bool, Error> {
    Ok(matches!(
        remote::parse_source(source)?,
        remote::SourceSpec::Remote(_)
    ))
}

/// One source to follow, as resolved to a local directory.
#[derive(Clone)]
pub struct Followed {
    /// The SOURCE as the user wrote it (events name it).
    pub name: String,
    /// The local directory or file it is read from (a remote source's mirror root).
    pub root: PathBuf,
    /// A remote source's mirror, synced by its follower; `None` for a local directory.
    pub mirror: Option<SharedMirror>,
}

impl std::fmt::Debug for Followed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Followed")
            .field("name", &self.name)
            .field("root", &self.root)
            .field("remote", &self.mirror.is_some())
            .finish()
    }
}

impl Followed {
    /// A local directory (or file), named as the user wrote it.
    pub fn local(name: &str) -> Followed {
        Followed {
            name: name.to_string(),
            root: PathBuf::from(name),
            mirror: None,
        }
    }
}

/// The captures' local paths: a remote SOURCE becomes its mirror's root after one snapshot
/// (`remote::snapshot`); the mirrors stay alive (their connections open) until this is
/// dropped at exit, which ends their ssh masters.
pub struct Sources {
    reach: Reach,
    json: bool,
    options: Option<remote::SshOptions>,
    mirrors: Vec<SharedMirror>,
}

impl Sources {
    /// No capture mapped yet; `json` keeps the snapshot's progress line off stderr.
    pub fn new(reach: Reach, json: bool) -> Sources {
        Sources {
            reach,
            json,
            options: None,
            mirrors: Vec::new(),
        }
    }

    /// How remote captures are reached, as given.
    pub fn reach(&self) -> &Reach {
        &self.reach
    }

    /// The ssh options, made (and the exit cleanup of ssh masters installed) on first use.
    fn options(&mut self) -> Result<&remote::SshOptions, Error> {
        if self.options.is_none() {
            remote::install_exit_cleanup()?;
            self.options = Some(self.reach.ssh_options()?);
        }
        Ok(self.options.as_ref().expect("just set"))
    }

    /// The ssh options for a child process run on `source`'s host (a replay, a case matrix),
    /// `None` for a local source. Made apart from the mirrors' options, without the exit
    /// cleanup: the run ends its connection itself when it is cancelled.
    ///
    /// # Errors
    /// A SOURCE that cannot be parsed, ssh options that cannot be made.
    pub fn run_options(&self, source: &str) -> Result<Option<remote::SshOptions>, Error> {
        Ok(match remote::parse_source(source)? {
            remote::SourceSpec::Remote(_) => Some(self.reach.ssh_options()?),
            remote::SourceSpec::Local(_) => None,
        })
    }

    /// The local path to read for `path` as the user wrote it: a remote capture is
    /// snapshotted into its mirror first (once per process).
    ///
    /// # Errors
    /// A SOURCE that cannot be parsed, a snapshot that failed (with a hint when the text is
    /// also a local path).
    pub fn local(&mut self, path: &Path) -> Result<PathBuf, Error> {
        let Some(text) = path.to_str() else {
            return Ok(path.to_path_buf());
        };
        let spec = match remote::parse_source(text)? {
            remote::SourceSpec::Local(local) => return Ok(local),
            remote::SourceSpec::Remote(spec) => spec,
        };
        if let Some(mirror) = self.mirrors.iter().find(|m| lock(m).spec() == &spec) {
            return Ok(lock(mirror).root().to_path_buf());
        }
        let options = self.options()?;
        let snapshot = remote::snapshot(&spec, options).map_err(|error| {
            // `run:10:00` in the current directory reads as host `run`: say how to read it.
            let mut message = error.to_string();
            if path.exists() {
                message.push_str(&format!(
                    "; {text} is also a local path here: write ./{text} to read that"
                ));
            }
            message
        })?;
        let mirror = &snapshot.mirror;
        if mirror.lister() != remote::Lister::GnuFind {
            eprintln!(
                "dumpview: note: {}: no GNU find on the remote host; listing with {}",
                mirror.source(),
                mirror.lister().describe()
            );
        }
        for warning in &snapshot.report.warnings {
            eprintln!("dumpview: warning: {}: {warning}", mirror.source());
        }
        if !self.json && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            eprintln!(
                "dumpview: {}: {} dump files, {} fetched ({:.1} MB)",
                mirror.source(),
                snapshot.report.listed,
                snapshot.report.changed.len(),
                (snapshot.report.bytes + snapshot.statistics_bytes) as f64 / 1e6
            );
        }
        let root = mirror.root().to_path_buf();
        self.mirrors.push(Arc::new(Mutex::new(snapshot.mirror)));
        Ok(root)
    }

    /// A SOURCE to follow: a local directory as it is, a remote one connected (its mirror
    /// is synced by the watch, not here).
    ///
    /// # Errors
    /// A SOURCE that cannot be parsed, a mirror that cannot be opened.
    pub fn watched(&mut self, text: &str) -> Result<Followed, Error> {
        let spec = match remote::parse_source(text)? {
            remote::SourceSpec::Local(_) => return Ok(Followed::local(text)),
            remote::SourceSpec::Remote(spec) => spec,
        };
        let options = self.options()?;
        let mirror = remote::Mirror::open(&spec, options)?;
        let root = mirror.root().to_path_buf();
        let mirror = Arc::new(Mutex::new(mirror));
        // Also the fetcher's: the workbench's `t` brings a followed capture's saved tensors.
        self.mirrors.push(mirror.clone());
        Ok(Followed {
            name: text.to_string(),
            root,
            mirror: Some(mirror),
        })
    }

    /// [`Sources::local`] for each of `paths`.
    ///
    /// # Errors
    /// The first path's error.
    pub fn locals(&mut self, paths: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
        paths.iter().map(|p| self.local(p)).collect()
    }

    /// Brings `file` into the cache when it lies in a remote capture's mirror (a saved
    /// tensor a report compares); nothing for a local file.
    ///
    /// # Errors
    /// Why the mirror could not fetch it.
    pub fn fetch(&mut self, file: &Path) -> Result<(), String> {
        MirrorFetcher(self.mirrors.clone()).fetch_if_owned(file)
    }

    /// The fetcher of the remote captures' saved tensors, for the workbench (`t`); `None`
    /// when every capture is local.
    pub fn fetcher(&self) -> Option<Arc<dyn Fetcher>> {
        (!self.mirrors.is_empty())
            .then(|| Arc::new(MirrorFetcher(self.mirrors.clone())) as Arc<dyn Fetcher>)
    }
}

/// A remote capture's mirror, shared with the workbench's comparison job that fetches its
/// saved tensors on demand.
pub type SharedMirror = Arc<Mutex<remote::Mirror>>;

fn lock(mirror: &SharedMirror) -> MutexGuard<'_, remote::Mirror> {
    mirror.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Fetches files of the mirrors it holds.
pub struct MirrorFetcher(Vec<SharedMirror>);

impl MirrorFetcher {
    fn owner(&self, path: &Path) -> Option<&SharedMirror> {
        self.0.iter().find(|m| path.starts_with(lock(m).root()))
    }

    fn fetch_if_owned(&self, file: &Path) -> Result<(), String> {
        match self.owner(file) {
            Some(mirror) => lock(mirror).fetch(file).map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }
}

impl Fetcher for MirrorFetcher {
    fn owns(&self, path: &Path) -> bool {
        self.owner(path).is_some()
    }

    fn fetch(&self, path: &Path) -> Result<(), String> {
        self.fetch_if_owned(path)
    }

    fn remote(&self, path: &Path) -> Option<Result<RemotePlace, String>> {
        // The root's parent too: a mirrored manifest file's window directory.
        let mirror = self.0.iter().find(|m| {
            let m = lock(m);
            path.starts_with(m.root()) || m.root().parent() == Some(path)
        })?;
        let mirror = lock(mirror);
        let spec = mirror.remote_spec_of(path)?;
        if spec.port.is_some() && !spec.path.starts_with('/') {
            // scp's host:path form has no place for a port.
            return Some(Err(format!(
                "{}: a path relative to the remote home on a host with a port cannot be \
                 replayed there; open the capture as ssh://{}/ABSOLUTE/PATH",
                mirror.source(),
                spec.authority()
            )));
        }
        Some(Ok(RemotePlace {
            source: spec.to_string(),
            ssh: mirror.options().clone(),
        }))
    }
}

/// Ends every ssh master and removes the control directory, whatever still holds a mirror (a
/// watch's followers outlive `main`'s return): what the binary calls last.
pub fn shutdown() {
    remote::shutdown();
}
