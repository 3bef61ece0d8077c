//! One remote dump directory mirrored into the local cache ([`Mirror`]): listed, and what
//! changed fetched, on every [`Mirror::sync`]; saved tensors and input sets fetched on demand
//! ([`Mirror::fetch`]).

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::cache::{self, MirrorState};
use super::error::RemoteError;
use super::options::SshOptions;
use super::script::{self, Lister, PathKind, RemoteMeta, status};
use super::source::RemoteSpec;
use super::ssh::Connection;
use crate::model::io::AtomicFile;

/// A file that only grew is fetched from this many bytes before its old end, and those bytes
/// compared with the cached ones: equal, the rest is appended; different (rewritten in place,
/// as msprobe rewrites its dump.json), the file is fetched whole.
pub const OVERLAP_BYTES: u64 = 4096;

/// An incremental listing asks for files changed since the previous listing started, less
/// this much (seconds): equal or coarse timestamps, and a remote clock that reads a little
/// ahead of the file system's, cannot hide a change.
pub const WATERMARK_OVERLAP_S: u64 = 2;

/// A full listing (which finds removed files) at least this often; listings in between ask
/// only for what changed.
pub const FULL_LISTING_EVERY: Duration = Duration::from_secs(10);

/// Files fetched at once over one connection (sshd allows 10 sessions per connection).
pub const PARALLEL_FETCHES: usize = 4;

/// A file rewritten in place (same inode, other size or mtime) is fetched only once its
/// mtime is this old at the listing's start: a writer that truncated it and is still writing
/// (msprobe's `open(…, "w")`) is not caught half way. New files (the probe renames complete
/// manifests into place) come at once.
pub const SETTLE: Duration = Duration::from_millis(500);

/// How many times [`Mirror::fetch`] reads a file that keeps changing before giving up.
const FETCH_TRIES: usize = 3;

/// What one [`Mirror::sync`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SyncReport {
    /// Local files (under [`Mirror::root`]) written since the last sync: new or changed on
    /// the remote host. Also those of an earlier sync that failed part way.
    pub changed: Vec<PathBuf>,
    /// Local files removed because the remote file is gone (found by full listings).
    pub removed: Vec<PathBuf>,
    /// File content bytes transferred (the overlap of grown files and files fetched again
    /// included; the listing not): what a benchmark compares with the size of what changed.
    pub bytes: u64,
    /// Files in the listing (a full listing: every dump file; an incremental one: those that
    /// changed recently).
    pub listed: usize,
    /// Whether the listing was a full one.
    pub full: bool,
    /// Bytes of the listing itself.
    pub listing_bytes: u64,
    /// Local files left as they were because the remote file changed while it was read;
    /// the next sync fetches them.
    pub deferred: Vec<PathBuf>,
    /// Files the cache evicted to stay under its cap.
    pub evicted: usize,
    /// What the remote side complained of without failing the sync (a directory it could
    /// not enter, an entry refused), one message each.
    pub warnings: Vec<String>,
}

/// One remote dump directory (or file) mirrored into the local cache, through one ssh
/// connection shared with every other mirror of the same destination.
///
/// The mirror holds the remote tree's dump files (`manifest.json`, `dump.json`,
/// `construct.json`, `stack.json`: [`crate::model::formats::mirrored_names`]) at the same
/// relative paths under [`Mirror::root`], so the local loaders run on it unchanged. It only
/// ever reads on the remote host. Dropping it ends its connection's master when it was the
/// last user.
pub struct Mirror {
    spec: RemoteSpec,
    source: String,
    options: SshOptions,
    connection: Arc<Connection>,
    lister: Lister,
    /// Whether the host's `head` takes `-c`, so many files come in one command.
    batches: bool,
    is_file: bool,
    root: PathBuf,
    remote_root: Vec<u8>,
    names: Vec<&'static str>,
    /// The dump files mirrored, by path relative to the root, as last fetched.
    known: BTreeMap<Vec<u8>, RemoteMeta>,
    /// Files fetched on demand, likewise.
    on_demand: BTreeMap<Vec<u8>, RemoteMeta>,
    state_path: PathBuf,
    /// The remote time the last wholly successful listing started at.
    watermark: Option<String>,
    last_full: Option<Instant>,
    needs_full: bool,
    id: u64,
    /// Changes written by a sync that then failed, for the next report.
    unreported: (Vec<PathBuf>, Vec<PathBuf>),
    /// Bytes under the cache root as this mirror last counted them, plus what it wrote since.
    cache_used: Option<u64>,
}

/// Files per command of [`script::fetch_batch`].
pub const BATCH_FILES: usize = 256;

/// One file of a batch fetch.
struct Item<'a> {
    rel: &'a [u8],
    local: &'a Path,
    expect: Option<&'a RemoteMeta>,
    unless: Option<&'a RemoteMeta>,
}

/// Reads [`script::fetch_batch`]'s stream: each file's header line, its bytes into a
/// temporary file, its trailer; a file whose trailer agrees with its header is renamed into
/// place at once.
struct BatchSink<'a> {
    mirror: &'a Mirror,
    items: &'a [Item<'a>],
    results: Vec<Result<Fetched, RemoteError>>,
    /// The header or trailer line read so far.
    line: Vec<u8>,
    /// The file being received: its temporary copy, its header, bytes still to come.
    body: Option<(Temp, RemoteMeta, u64)>,
}

impl BatchSink<'_> {
    fn bad(what: &str, line: &[u8]) -> io::Error {
        io::Error::other(format!(
            "unexpected {what} in the fetch stream: {:?}",
            String::from_utf8_lossy(&line[..line.len().min(200)])
        ))
    }

    /// A complete line: a header (no body pending) or a trailer (the body done).
    fn line_done(&mut self) -> io::Result<()> {
        let line = std::mem::take(&mut self.line);
        let text = String::from_utf8_lossy(&line);
        let Some(item) = self.items.get(self.results.len()) else {
            return Err(Self::bad("line after the last file", &line));
        };
        if let Some((temp, meta, _)) = self.body.take() {
            let after = text
                .strip_prefix("E ")
                .ok_or_else(|| Self::bad("trailer", &line))?;
            let size = meta.size;
            let result = if RemoteMeta::parse(after).as_ref() == Some(&meta) {
                temp.persist(item.local)
                    .map(|()| Fetched::Done { meta, bytes: size })
            } else {
                Ok(Fetched::Unstable { bytes: size })
            };
            self.results.push(result);
            return Ok(());
        }
        let rel = item.rel;
        let unreadable = |reason: &str| RemoteError::PathUnreadable {
            host: self.mirror.connection.authority().to_string(),
            path: String::from_utf8_lossy(&self.mirror.remote_of(rel)).into_owned(),
            reason: reason.to_string(),
        };
        let result = match text.as_ref() {
            "U" => Ok(Fetched::Unchanged),
            "X 3" => Ok(Fetched::Vanished { bytes: 0 }),
            "X 5" => Ok(Fetched::Unstable { bytes: 0 }),
            "X 4" => Err(unreadable("permission denied or a read error")),
            "X 6" => Err(unreadable("not a regular file")),
            header => {
                let meta = header
                    .strip_prefix("F ")
                    .and_then(RemoteMeta::parse)
                    .ok_or_else(|| Self::bad("header", &line))?;
                let temp = Temp::create(item.local).map_err(|e| io::Error::other(e.to_string()))?;
                let size = meta.size;
                self.body = Some((temp, meta, size));
                return Ok(());
            }
        };
        self.results.push(result);
        Ok(())
    }
}

impl Write for BatchSink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        while !rest.is_empty() {
            if let Some((temp, _, remaining)) = self.body.as_mut().filter(|b| b.2 > 0) {
                let n = (*remaining).min(rest.len() as u64) as usize;
                temp.file().write_all(&rest[..n])?;
                *remaining -= n as u64;
                rest = &rest[n..];
                continue;
            }
            match memchr::memchr(b'\n', rest) {
                Some(at) => {
                    self.line.extend_from_slice(&rest[..at]);
                    rest = &rest[at + 1..];
                    self.line_done()?;
                }
                None => {
                    self.line.extend_from_slice(rest);
                    if self.line.len() > 4096 {
                        return Err(Self::bad("line", &self.line));
                    }
                    rest = &[];
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One file a sync fetches.
struct Plan {
    /// Its path relative to the root.
    rel: Vec<u8>,
    /// Its copy in the cache.
    local: PathBuf,
    /// What the cache holds of it, when the copy is there as fetched.
    old: Option<RemoteMeta>,
    /// What the listing says of it now.
    listed: RemoteMeta,
}

impl Plan {
    /// The cached copy, when the file may only have grown from it (same inode, larger).
    fn grown(&self) -> Option<&RemoteMeta> {
        self.old.as_ref().filter(|old| {
            old.size > 0 && self.listed.inode == old.inode && self.listed.size > old.size
        })
    }
}

/// What fetching one file came to.
enum Fetched {
    /// Written to the cache; the remote file's identity when it was read.
    Done { meta: RemoteMeta, bytes: u64 },
    /// It changed while it was read; the cache keeps the old copy.
    Unstable { bytes: u64 },
    /// It is gone.
    Vanished { bytes: u64 },
    /// It is what the cache holds already.
    Unchanged,
}

impl Mirror {
    /// Connects to `spec`'s host (starting its master, or sharing one that runs), checks the
    /// remote path, and finds which listing tool the host has. Lists nothing yet.
    ///
    /// # Errors
    /// [`RemoteError::Unreachable`], `AuthFailed`, `UnknownHostKey`, `HostKeyChanged`,
    /// `Ssh` from the connection; `PathMissing`, `PathUnreadable` for the path; `Cache` when
    /// the cache directory cannot be made.
    pub fn open(spec: &RemoteSpec, options: &SshOptions) -> Result<Mirror, RemoteError> {
        let connection = Connection::open(spec, options)?;
        let remote_root = script::remote_path(&spec.path);
        let host = connection.authority().to_string();
        let shown = String::from_utf8_lossy(&remote_root).into_owned();
        let mut out = Vec::new();
        let ran = connection.run(&script::probe(&remote_root), &mut out, Path::new("-"))?;
        let (kind, lister, batches) =
            script::parse_probe(&out).map_err(|reason| RemoteError::Ssh {
                host: host.clone(),
                reason: format!("{reason} (stderr: {})", ran.stderr.trim()),
            })?;
        let is_file = match kind {
            PathKind::Dir => false,
            PathKind::File => true,
            PathKind::Missing => {
                return Err(RemoteError::PathMissing { host, path: shown });
            }
            PathKind::Unreadable => {
                return Err(RemoteError::PathUnreadable {
                    host,
                    path: shown,
                    reason: "permission denied".into(),
                });
            }
            PathKind::Other => {
                return Err(RemoteError::PathUnreadable {
                    host,
                    path: shown,
                    reason: "not a regular file or a directory".into(),
                });
            }
        };
        let cache_error = |path: &Path| {
            let path = path.to_path_buf();
            move |source| RemoteError::Cache { path, source }
        };
        let local = spec.cache_path(&options.cache_dir);
        let root = if is_file {
            let parent = local.parent().unwrap_or(&options.cache_dir);
            std::fs::create_dir_all(parent).map_err(cache_error(parent))?;
            let parent = std::fs::canonicalize(parent).map_err(cache_error(parent))?;
            parent.join(local.file_name().unwrap_or(OsStr::new("file")))
        } else {
            std::fs::create_dir_all(&local).map_err(cache_error(&local))?;
            std::fs::canonicalize(&local).map_err(cache_error(&local))?
        };
        let source = spec.to_string();
        let state_path = MirrorState::path(&options.cache_dir, &source);
        let state = MirrorState::load(&state_path, &source);
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        let key = |(k, v): (String, RemoteMeta)| (k.into_bytes(), v);
        Ok(Mirror {
            spec: spec.clone(),
            source,
            options: options.clone(),
            connection,
            lister,
            batches,
            is_file,
            root,
            remote_root,
            names: crate::model::formats::mirrored_names(),
            known: state.files.into_iter().map(key).collect(),
            on_demand: state.on_demand.into_iter().map(key).collect(),
            state_path,
            watermark: None,
            last_full: None,
            needs_full: true,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            unreported: (Vec::new(), Vec::new()),
            cache_used: None,
        })
    }

    /// The local directory (or file, for a remote file) that mirrors the remote path:
    /// `<cache_dir>/<host>[_<port>]/<path…>`, canonical.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The source as written back (`ssh://host/path`, `host:path`).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The source this mirror follows.
    pub fn spec(&self) -> &RemoteSpec {
        &self.spec
    }

    /// The ssh options its connection was opened with.
    pub fn options(&self) -> &SshOptions {
        &self.options
    }

    /// The remote place that `local`, the root or a directory below it, stands for: the
    /// source with its path extended by `local`'s path below the root. For a mirrored file,
    /// the file itself, or its remote directory for the root's parent. `None` for a path
    /// the mirror does not hold.
    pub fn remote_spec_of(&self, local: &Path) -> Option<RemoteSpec> {
        let mut spec = self.spec.clone();
        if self.is_file {
            if local == self.root {
                return Some(spec);
            }
            if Some(local) == self.root.parent() {
                spec.path = match spec.path.rsplit_once('/') {
                    Some(("", _)) => "/".to_string(),
                    Some((dir, _)) => dir.to_string(),
                    None => String::new(),
                };
                return Some(spec);
            }
            return None;
        }
        let rest = local.strip_prefix(&self.root).ok()?;
        for component in rest.components() {
            let Component::Normal(name) = component else {
                return None;
            };
            if !spec.path.is_empty() && !spec.path.ends_with('/') {
                spec.path.push('/');
            }
            spec.path.push_str(name.to_str()?);
        }
        Some(spec)
    }

    /// The local copies of the dump files the mirror holds, in path order.
    pub fn files(&self) -> Vec<PathBuf> {
        self.known.keys().map(|rel| self.local_of(rel)).collect()
    }

    /// How the remote host lists files (GNU find, or the `stat` fallback).
    pub fn lister(&self) -> Lister {
        self.lister
    }

    /// Whether the connection's master is running (false once the connection broke, until
    /// the next [`Mirror::sync`] or [`Mirror::reconnect`]).
    pub fn connected(&self) -> bool {
        self.connection.master_alive()
    }

    /// Starts the connection's master again after it broke; the next sync lists in full.
    ///
    /// # Errors
    /// As [`Mirror::open`]'s connection errors, with a connection that cannot be made again
    /// as [`RemoteError::ConnectionLost`].
    pub fn reconnect(&mut self) -> Result<(), RemoteError> {
        self.needs_full = true;
        self.connection
            .ensure_master()
            .map_err(RemoteError::in_session)
    }

    /// Makes the next [`Mirror::sync`] list everything (and so notice removed files) even
    /// when an incremental listing is due.
    pub fn request_full_listing(&mut self) {
        self.needs_full = true;
    }

    /// One listing of the remote path, and a fetch of every dump file that is new or
    /// changed (by path, inode, size and mtime); removes the copies of files that are gone.
    /// The first sync, one after a reconnection, and one every [`FULL_LISTING_EVERY`] list
    /// everything; the others only what changed since the previous listing (GNU find), less
    /// [`WATERMARK_OVERLAP_S`]. A broken connection is started again first.
    ///
    /// A file that only grew is fetched from [`OVERLAP_BYTES`] before its old end; one whose
    /// inode changed, that shrank or whose overlap differs is fetched whole. Each file lands
    /// in the cache through a temporary file and a rename. Then the cache is brought under
    /// its cap (never evicting a dump file of a live mirror) and the mirror's state saved.
    ///
    /// # Errors
    /// [`RemoteError::ConnectionLost`] (retry with [`crate::remote::Backoff`]; what was
    /// fetched before the break is kept and reported by the next sync); `PathMissing` when
    /// the path went away; `ListingEmpty` when a full listing finds no dump file (unless this
    /// mirror listed some before: then they are all `removed`);
    /// `ListingUnreadable` when the listing fails; `PathUnreadable` for a file that cannot
    /// be read; `Cache` when the cache cannot be written.
    pub fn sync(&mut self) -> Result<SyncReport, RemoteError> {
        if !self.connection.master_alive() {
            self.reconnect()?;
        }
        let full = self.needs_full
            || !self.lister.incremental()
            || self.watermark.is_none()
            || self
                .last_full
                .is_none_or(|t| t.elapsed() >= FULL_LISTING_EVERY);
        let since = match full {
            true => None,
            false => self.watermark.as_deref().and_then(minus_overlap),
        };
        let full = full || since.is_none();
        let host = self.connection.authority().to_string();
        let shown = String::from_utf8_lossy(&self.remote_root).into_owned();
        let mut out = Vec::new();
        let ran = self
            .connection
            .run(
                &script::list(
                    &self.remote_root,
                    &self.names,
                    self.lister,
                    since.as_deref(),
                ),
                &mut out,
                Path::new("-"),
            )
            .map_err(RemoteError::in_session)?;
        if ran.status == status::MISSING {
            return Err(RemoteError::PathMissing { host, path: shown });
        }
        let listing =
            script::parse_listing(&out).map_err(|reason| RemoteError::ListingUnreadable {
                host: host.clone(),
                path: shown.clone(),
                reason: match ran.stderr.trim() {
                    "" => reason,
                    said => format!("{reason}; the remote side said: {said}"),
                },
            })?;
        if !full && self.deleted_since_last(&listing) {
            // A file this mirror holds is gone: list in full now, so the removal shows at
            // this poll, not at the next full listing.
            self.needs_full = true;
            return self.sync();
        }
        let mut report = SyncReport {
            listed: listing.files.len(),
            full,
            listing_bytes: ran.stdout_bytes,
            ..SyncReport::default()
        };
        report.warnings.extend(listing.refused.iter().cloned());
        if ran.status != 0 {
            let said = ran.stderr.trim();
            if listing.files.is_empty() {
                return Err(RemoteError::ListingUnreadable {
                    host,
                    path: shown,
                    reason: format!("the listing exited with status {}: {said}", ran.status),
                });
            }
            report
                .warnings
                .extend(said.lines().take(20).map(|l| format!("{host}: {l}")));
        }
        let is_dump_file = |rel: &[u8]| {
            let name = rel.rsplit(|&b| b == b'/').next().unwrap_or(rel);
            rel.is_empty() || crate::model::formats::file_names().any(|n| n.as_bytes() == name)
        };
        // An empty directory is an error, never "no findings"; one whose every dump file was
        // deleted since this process last listed it is a removal of them all (the follower
        // says so). A cache left by an earlier run does not count: its files may be stale.
        let listed_here = self.last_full.is_some() && !self.known.is_empty();
        if full && !listed_here && !listing.files.iter().any(|(rel, _)| is_dump_file(rel)) {
            return Err(RemoteError::ListingEmpty {
                host,
                path: shown,
                names: {
                    let mut names: Vec<&str> = crate::model::formats::file_names().collect();
                    names.sort_unstable();
                    names.dedup();
                    names.join(" or ")
                },
            });
        }

        // What changed: de-duplicated on (path, inode, size, mtime) against what the cache
        // holds (an incremental listing's overlap lists files again).
        let mut plans = Vec::new();
        let mut listed = HashSet::new();
        for (rel, meta) in &listing.files {
            let local = self.local_of(rel);
            listed.insert(rel.clone());
            let cached = std::fs::metadata(&local).map(|m| m.len()).ok();
            match self.known.get(rel) {
                Some(old) if old == meta && cached == Some(meta.size) => {
                    if full {
                        cache::touch(&local);
                    }
                }
                Some(old)
                    if old.inode == meta.inode
                        && meta
                            .age_at(&listing.started)
                            .is_some_and(|age| age < SETTLE.as_secs_f64()) =>
                {
                    report.deferred.push(local);
                }
                old => plans.push(Plan {
                    rel: rel.clone(),
                    local,
                    // An incremental fetch needs the old copy as it was fetched.
                    old: old.cloned().filter(|o| cached == Some(o.size)),
                    listed: meta.clone(),
                }),
            }
        }
        let (mut changed, mut removed) = std::mem::take(&mut self.unreported);
        if full {
            let gone: Vec<Vec<u8>> = self
                .known
                .keys()
                .filter(|rel| !listed.contains(*rel))
                .cloned()
                .collect();
            for rel in gone {
                let local = self.local_of(&rel);
                let _ = std::fs::remove_file(&local);
                self.known.remove(&rel);
                removed.push(local);
            }
        }

        let results = self.fetch_all(&plans);
        let mut first_error = None;
        let mut all_done = report.deferred.is_empty();
        for (Plan { rel, local, .. }, result) in plans.into_iter().zip(results) {
            match result {
                Ok(Fetched::Done { meta, bytes }) => {
                    report.bytes += bytes;
                    self.known.insert(rel, meta);
                    changed.push(local);
                }
                Ok(Fetched::Unstable { bytes }) => {
                    report.bytes += bytes;
                    all_done = false;
                    report.deferred.push(local);
                }
                Ok(Fetched::Vanished { bytes }) => {
                    report.bytes += bytes;
                    if self.known.remove(&rel).is_some() {
                        let _ = std::fs::remove_file(&local);
                        removed.push(local);
                    }
                }
                Ok(Fetched::Unchanged) => {}
                Err(error) => {
                    all_done = false;
                    first_error.get_or_insert(error);
                }
            }
        }
        self.add_used(report.bytes);
        let protected: HashSet<PathBuf> = self.known.keys().map(|rel| self.local_of(rel)).collect();
        cache::protect(self.id, protected);
        self.save_state();
        if let Some(error) = first_error {
            self.unreported = (changed, removed);
            return Err(error);
        }
        if all_done {
            self.watermark = Some(listing.started);
            if full {
                self.last_full = Some(Instant::now());
                self.needs_full = false;
            }
        }
        report.evicted = self.keep_under_cap(&changed.iter().cloned().collect());
        report.changed = changed;
        report.removed = removed;
        Ok(report)
    }

    /// Whether an incremental `listing` shows fewer of the known files than this mirror
    /// knows: those it lists again (changed, or in the watermark's overlap) and those it
    /// counts as unchanged are all the known files that are still there.
    fn deleted_since_last(&self, listing: &script::Listing) -> bool {
        let relisted = listing
            .files
            .iter()
            .filter(|(rel, _)| self.known.contains_key(rel))
            .count() as u64;
        relisted + listing.unchanged < self.known.len() as u64
    }

    /// Fetches `local`, a file under [`Mirror::root`] that the mirror does not hold eagerly
    /// (a saved tensor, an input set), unless the cache holds it as the remote host has it.
    /// A file that keeps changing while it is read is tried three times.
    ///
    /// # Errors
    /// [`RemoteError::NotInMirror`] for a path outside the root; `PathMissing` when the
    /// remote file is not there; `PathUnreadable`; `ConnectionLost`; `Cache`.
    pub fn fetch(&mut self, local: &Path) -> Result<(), RemoteError> {
        let rel = self.relative_of(local)?;
        if !self.connection.master_alive() {
            self.reconnect()?;
        }
        let local = self.local_of(&rel);
        let host = self.connection.authority().to_string();
        let shown = String::from_utf8_lossy(&self.remote_of(&rel)).into_owned();
        let cached = std::fs::metadata(&local).map(|m| m.len()).ok();
        let unless = self
            .on_demand
            .get(&rel)
            .or_else(|| self.known.get(&rel))
            .filter(|m| cached == Some(m.size))
            .cloned();
        for _ in 0..FETCH_TRIES {
            match self.fetch_whole(&rel, &local, unless.as_ref(), None)? {
                Fetched::Done { meta, bytes } => {
                    self.add_used(bytes);
                    self.on_demand.insert(rel, meta);
                    self.save_state();
                    self.keep_under_cap(&HashSet::from([local]));
                    return Ok(());
                }
                Fetched::Unchanged => {
                    cache::touch(&local);
                    return Ok(());
                }
                Fetched::Vanished { .. } => {
                    return Err(RemoteError::PathMissing { host, path: shown });
                }
                Fetched::Unstable { .. } => continue,
            }
        }
        Err(RemoteError::PathUnreadable {
            host,
            path: shown,
            reason: format!("it kept changing while it was read ({FETCH_TRIES} tries)"),
        })
    }

    /// [`Mirror::fetch`] for each of `files`, several at once; stops at the first error.
    /// Returns the bytes transferred.
    ///
    /// # Errors
    /// As [`Mirror::fetch`].
    pub fn fetch_many(&mut self, files: &[PathBuf]) -> Result<u64, RemoteError> {
        let mut plans = Vec::new();
        for local in files {
            let rel = self.relative_of(local)?;
            let cached = std::fs::metadata(self.local_of(&rel)).map(|m| m.len()).ok();
            let unless = self
                .on_demand
                .get(&rel)
                .filter(|m| cached == Some(m.size))
                .cloned();
            plans.push((rel.clone(), self.local_of(&rel), unless));
        }
        if !self.connection.master_alive() {
            self.reconnect()?;
        }
        let items: Vec<Item<'_>> = plans
            .iter()
            .map(|(rel, local, unless)| Item {
                rel,
                local,
                expect: None,
                unless: unless.as_ref(),
            })
            .collect();
        let results = self.fetch_items(&items);
        let mut bytes = 0;
        let mut keep = HashSet::new();
        let mut retry = Vec::new();
        for ((rel, local, _), result) in plans.into_iter().zip(results) {
            match result? {
                Fetched::Done { meta, bytes: b } => {
                    bytes += b;
                    self.on_demand.insert(rel, meta);
                    keep.insert(local);
                }
                Fetched::Unchanged => cache::touch(&local),
                Fetched::Unstable { bytes: b } => {
                    bytes += b;
                    retry.push(local);
                }
                Fetched::Vanished { .. } => {
                    return Err(RemoteError::PathMissing {
                        host: self.connection.authority().to_string(),
                        path: String::from_utf8_lossy(&self.remote_of(&rel)).into_owned(),
                    });
                }
            }
        }
        self.add_used(bytes);
        self.save_state();
        for local in retry {
            self.fetch(&local)?;
            keep.insert(local);
        }
        self.keep_under_cap(&keep);
        Ok(bytes)
    }

    /// The saved tensor files that the dump files among `files` (local paths, as
    /// [`SyncReport::changed`] names them) compute their statistics from (windowed dumps;
    /// [`crate::model::formats::Format::statistics_files`]): to [`Mirror::fetch_many`] before
    /// those windows are loaded.
    pub fn statistics_files(&self, files: &[PathBuf]) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for file in files {
            // The first bytes say the format; only a format that needs them reads the rest.
            let mut head = Vec::new();
            let Ok(mut opened) = File::open(file) else {
                continue;
            };
            let limit = crate::model::formats::HEAD_BYTES as u64;
            if (&mut opened).take(limit).read_to_end(&mut head).is_err() {
                continue;
            }
            let Some(format) = crate::model::formats::claiming(file, &head) else {
                continue;
            };
            if !format.statistics_from_tensor_files() {
                continue;
            }
            if let Ok(bytes) = std::fs::read(file) {
                out.extend(
                    format
                        .statistics_files(file, &bytes)
                        .into_iter()
                        .filter(|p| p.starts_with(&self.root)),
                );
            }
        }
        out
    }

    /// Per dump file, the saved tensor files to fetch before its window is read
    /// ([`Mirror::statistics_files`]): every one for the files in `changed` (a new version
    /// may name new tensors, or the tensors may have been rewritten with it), and for the
    /// other dump files, when `every` is set, those missing from the cache (a cache left
    /// by an earlier run). Dump files that need nothing are left out.
    pub fn statistics_to_fetch(
        &self,
        changed: &[PathBuf],
        every: bool,
    ) -> Vec<(PathBuf, Vec<PathBuf>)> {
        let changed_set: std::collections::HashSet<&PathBuf> = changed.iter().collect();
        let files = match every {
            true => self.files(),
            false => changed.to_vec(),
        };
        let mut out = Vec::new();
        for file in files {
            let mut wanted = self.statistics_files(std::slice::from_ref(&file));
            if !changed_set.contains(&file) {
                wanted.retain(|p| !p.is_file());
            }
            wanted.sort();
            wanted.dedup();
            if !wanted.is_empty() {
                out.push((file, wanted));
            }
        }
        out
    }

    /// Fetches what a sync planned: files that may only have grown one by one
    /// ([`Mirror::fetch_grown`]), the others whole in batches ([`Mirror::fetch_items`]).
    /// Results in plan order.
    fn fetch_all(&self, plans: &[Plan]) -> Vec<Result<Fetched, RemoteError>> {
        let grown = Plan::grown;
        let (grew, whole): (Vec<usize>, Vec<usize>) =
            (0..plans.len()).partition(|&i| grown(&plans[i]).is_some());
        let mut results: Vec<Option<Result<Fetched, RemoteError>>> =
            plans.iter().map(|_| None).collect();
        let grew_results = self.run_parallel(&grew, |mirror, &i| {
            let plan = &plans[i];
            let old = grown(plan).expect("partitioned on it");
            mirror.fetch_grown(&plan.rel, &plan.local, old, &plan.listed)
        });
        for (i, result) in grew.iter().zip(grew_results) {
            results[*i] = Some(result);
        }
        let items: Vec<Item<'_>> = whole
            .iter()
            .map(|&i| Item {
                rel: &plans[i].rel,
                local: &plans[i].local,
                expect: Some(&plans[i].listed),
                unless: None,
            })
            .collect();
        for (i, result) in whole.iter().zip(self.fetch_items(&items)) {
            results[*i] = Some(result);
        }
        results
            .into_iter()
            .map(|r| r.expect("every plan fetched"))
            .collect()
    }

    /// Fetches `items` whole, in batches of at most [`BATCH_FILES`] files per command
    /// ([`script::fetch_batch`]), [`PARALLEL_FETCHES`] commands at once (one file per
    /// command where the host's `head` lacks `-c`). Results in item order.
    fn fetch_items(&self, items: &[Item<'_>]) -> Vec<Result<Fetched, RemoteError>> {
        if !self.batches {
            return self.run_parallel(items, |mirror, item| {
                mirror.fetch_whole(item.rel, item.local, item.unless, item.expect)
            });
        }
        let per_batch = items.len().div_ceil(PARALLEL_FETCHES).clamp(1, BATCH_FILES);
        let batches: Vec<&[Item<'_>]> = items.chunks(per_batch).collect();
        self.run_parallel(&batches, |mirror, batch| mirror.fetch_batch(batch))
            .into_iter()
            .flatten()
            .collect()
    }

    /// One command fetching `items` whole; a result per item (those after a broken stream
    /// get its error).
    fn fetch_batch(&self, items: &[Item<'_>]) -> Vec<Result<Fetched, RemoteError>> {
        let files: Vec<Vec<u8>> = items.iter().map(|i| self.remote_of(i.rel)).collect();
        let script = script::fetch_batch(
            &items
                .iter()
                .zip(&files)
                .map(|(item, path)| script::BatchFile {
                    path,
                    expect: item.expect,
                    unless: item.unless,
                })
                .collect::<Vec<_>>(),
            self.lister,
        );
        let mut sink = BatchSink {
            mirror: self,
            items,
            results: Vec::with_capacity(items.len()),
            line: Vec::new(),
            body: None,
        };
        let ran = self
            .connection
            .run(&script, &mut sink, items[0].local)
            .map_err(RemoteError::in_session);
        let mut results = std::mem::take(&mut sink.results);
        let stopped = match ran {
            Ok(_) if results.len() == items.len() => return results,
            Ok(ran) => RemoteError::ListingUnreadable {
                host: self.connection.authority().to_string(),
                path: String::from_utf8_lossy(&self.remote_root).into_owned(),
                reason: format!(
                    "the fetch of {} files stopped after {} (status {}): {}",
                    items.len(),
                    results.len(),
                    ran.status,
                    ran.stderr.trim()
                ),
            },
            Err(error) => error,
        };
        let reason = stopped.to_string();
        results.push(Err(stopped));
        while results.len() < items.len() {
            results.push(Err(RemoteError::ConnectionLost {
                host: self.connection.authority().to_string(),
                reason: format!("not fetched: {reason}"),
            }));
        }
        results
    }

    /// `work` on every plan, [`PARALLEL_FETCHES`] at once, results in plan order.
    fn run_parallel<P: Sync, T: Send>(
        &self,
        plans: &[P],
        work: impl Fn(&Mirror, &P) -> T + Sync,
    ) -> Vec<T> {
        if plans.len() < 2 {
            return plans.iter().map(|p| work(self, p)).collect();
        }
        let next = AtomicU64::new(0);
        let mut results: Vec<Option<T>> = plans.iter().map(|_| None).collect();
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..PARALLEL_FETCHES.min(plans.len()))
                .map(|_| {
                    scope.spawn(|| {
                        let mut done = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                            let Some(plan) = plans.get(i) else {
                                return done;
                            };
                            done.push((i, work(self, plan)));
                        }
                    })
                })
                .collect();
            for worker in workers {
                for (i, result) in worker.join().expect("a fetch thread panicked") {
                    results[i] = Some(result);
                }
            }
        });
        results
            .into_iter()
            .map(|r| r.expect("every plan ran"))
            .collect()
    }

    /// Fetches the whole file into the cache (unless it is `unless` already; unstable unless
    /// it is `expect`, what the listing said of it).
    fn fetch_whole(
        &self,
        rel: &[u8],
        local: &Path,
        unless: Option<&RemoteMeta>,
        expect: Option<&RemoteMeta>,
    ) -> Result<Fetched, RemoteError> {
        let temp = Temp::create(local)?;
        let mut sink = MetaThenBytes::new(temp.file());
        let ran = self
            .connection
            .run(
                &script::fetch(&self.remote_of(rel), 0, self.lister, unless, expect),
                &mut sink,
                local,
            )
            .map_err(RemoteError::in_session)?;
        let bytes = sink.payload;
        if let Some(other) = self.status_outcome(rel, &ran, bytes)? {
            return Ok(other);
        }
        let meta = self.fetched_meta(rel, &sink)?;
        if bytes != meta.size {
            return Ok(Fetched::Unstable { bytes });
        }
        temp.persist(local)?;
        Ok(Fetched::Done { meta, bytes })
    }

    /// Fetches a file that may only have grown since `old`: from [`OVERLAP_BYTES`] before its
    /// old end, appended to the cached copy when the overlap is unchanged; else whole.
    fn fetch_grown(
        &self,
        rel: &[u8],
        local: &Path,
        old: &RemoteMeta,
        listed: &RemoteMeta,
    ) -> Result<Fetched, RemoteError> {
        let from = old.size - OVERLAP_BYTES.min(old.size);
        let temp = Temp::create(local)?;
        let cache_error = |source| RemoteError::Cache {
            path: local.to_path_buf(),
            source,
        };
        let mut cached = File::open(local).map_err(cache_error)?;
        io::copy(&mut (&mut cached).take(from), &mut temp.file()).map_err(cache_error)?;
        let mut sink = MetaThenBytes::new(temp.file());
        let ran = self
            .connection
            .run(
                &script::fetch(&self.remote_of(rel), from, self.lister, None, Some(listed)),
                &mut sink,
                local,
            )
            .map_err(RemoteError::in_session)?;
        let bytes = sink.payload;
        if let Some(other) = self.status_outcome(rel, &ran, bytes)? {
            return Ok(other);
        }
        let meta = self.fetched_meta(rel, &sink)?;
        let whole_again = |this: &Mirror| -> Result<Fetched, RemoteError> {
            Ok(match this.fetch_whole(rel, local, None, Some(listed))? {
                Fetched::Done { meta, bytes: b } => Fetched::Done {
                    meta,
                    bytes: bytes + b,
                },
                Fetched::Unstable { bytes: b } => Fetched::Unstable { bytes: bytes + b },
                Fetched::Vanished { bytes: b } => Fetched::Vanished { bytes: bytes + b },
                Fetched::Unchanged => Fetched::Unchanged,
            })
        };
        if meta.inode != old.inode || meta.size < old.size {
            return whole_again(self);
        }
        if bytes != meta.size - from {
            return Ok(Fetched::Unstable { bytes });
        }
        // The overlap: the cached bytes before the old end against the fetched ones.
        let length = (old.size - from) as usize;
        let mut before = vec![0u8; length];
        let mut now = vec![0u8; length];
        cached.seek(SeekFrom::Start(from)).map_err(cache_error)?;
        cached.read_exact(&mut before).map_err(cache_error)?;
        let mut fetched = temp.file();
        fetched.seek(SeekFrom::Start(from)).map_err(cache_error)?;
        fetched.read_exact(&mut now).map_err(cache_error)?;
        if before != now {
            return whole_again(self);
        }
        temp.persist(local)?;
        Ok(Fetched::Done { meta, bytes })
    }

    /// The outcome a script's exit status decides by itself (`None`: it succeeded).
    fn status_outcome(
        &self,
        rel: &[u8],
        ran: &super::ssh::Ran,
        bytes: u64,
    ) -> Result<Option<Fetched>, RemoteError> {
        let unreadable = |reason: String| RemoteError::PathUnreadable {
            host: self.connection.authority().to_string(),
            path: String::from_utf8_lossy(&self.remote_of(rel)).into_owned(),
            reason,
        };
        Ok(match ran.status {
            0 => None,
            status::MISSING => Some(Fetched::Vanished { bytes }),
            status::UNSTABLE => Some(Fetched::Unstable { bytes }),
            status::UNCHANGED => Some(Fetched::Unchanged),
            status::NOT_A_FILE => return Err(unreadable("not a regular file".into())),
            status::UNREADABLE => {
                return Err(unreadable(match ran.stderr.trim() {
                    "" => "permission denied or a read error".into(),
                    said => said.to_string(),
                }));
            }
            other => {
                return Err(unreadable(format!(
                    "the remote shell exited with status {other}: {}",
                    ran.stderr.trim()
                )));
            }
        })
    }

    fn fetched_meta(
        &self,
        rel: &[u8],
        sink: &MetaThenBytes<'_>,
    ) -> Result<RemoteMeta, RemoteError> {
        RemoteMeta::parse(&String::from_utf8_lossy(&sink.head)).ok_or_else(|| {
            RemoteError::PathUnreadable {
                host: self.connection.authority().to_string(),
                path: String::from_utf8_lossy(&self.remote_of(rel)).into_owned(),
                reason: format!(
                    "the remote side did not answer as expected: {:?}",
                    String::from_utf8_lossy(&sink.head)
                ),
            }
        })
    }

    /// The remote path of the file at `rel` under the remote root.
    fn remote_of(&self, rel: &[u8]) -> Vec<u8> {
        match (rel.is_empty(), self.remote_root.as_slice()) {
            (true, _) => self.remote_root.clone(),
            (false, b"/") => [b"/", rel].concat(),
            (false, root) => [root, b"/", rel].concat(),
        }
    }

    /// The local path of the file at `rel` under the root.
    fn local_of(&self, rel: &[u8]) -> PathBuf {
        match rel.is_empty() {
            true => self.root.clone(),
            false => self.root.join(OsStr::from_bytes(rel)),
        }
    }

    fn relative_of(&self, local: &Path) -> Result<Vec<u8>, RemoteError> {
        let not_inside = || RemoteError::NotInMirror {
            path: local.to_path_buf(),
            root: self.root.clone(),
            source_text: self.source.clone(),
        };
        let rest = local
            .strip_prefix(&self.root)
            .ok()
            .map(Path::to_path_buf)
            .or_else(|| {
                // A path written through a link to the cache: compare canonical parents.
                let parent = std::fs::canonicalize(local.parent()?).ok()?;
                let rest = parent.strip_prefix(&self.root).ok()?;
                Some(rest.join(local.file_name()?))
            })
            .ok_or_else(not_inside)?;
        if self.is_file || rest.as_os_str().is_empty() {
            return Err(not_inside());
        }
        if !rest.components().all(|c| matches!(c, Component::Normal(_))) {
            return Err(not_inside());
        }
        Ok(rest.as_os_str().as_bytes().to_vec())
    }

    fn save_state(&self) {
        let utf8 = |map: &BTreeMap<Vec<u8>, RemoteMeta>| {
            map.iter()
                .filter_map(|(k, v)| Some((String::from_utf8(k.clone()).ok()?, v.clone())))
                .collect()
        };
        let state = MirrorState {
            source: self.source.clone(),
            files: utf8(&self.known),
            on_demand: utf8(&self.on_demand),
        };
        // A state that cannot be saved costs the next run a full fetch, nothing more.
        let _ = state.save(&self.state_path);
    }

    fn add_used(&mut self, bytes: u64) {
        if let Some(used) = &mut self.cache_used {
            *used += bytes;
        }
    }

    /// Evicts least recently used files when the cache may be over its cap; counts the
    /// cache once, then adds what this mirror writes.
    fn keep_under_cap(&mut self, current: &HashSet<PathBuf>) -> usize {
        if self
            .cache_used
            .is_some_and(|used| used <= self.options.cache_size)
        {
            return 0;
        }
        match cache::evict(&self.options.cache_dir, self.options.cache_size, current) {
            Ok(evicted) => {
                for path in &evicted.removed {
                    if let Ok(rel) = self.relative_of(path) {
                        self.on_demand.remove(&rel);
                    }
                }
                if !evicted.removed.is_empty() {
                    self.save_state();
                }
                self.cache_used = Some(evicted.used);
                evicted.removed.len()
            }
            Err(_) => 0,
        }
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        cache::protect(self.id, HashSet::new());
    }
}

/// `t` (seconds since the epoch, maybe with fractions) less [`WATERMARK_OVERLAP_S`].
fn minus_overlap(t: &str) -> Option<String> {
    let (whole, fraction) = t.split_once('.').unwrap_or((t, ""));
    let whole: u64 = whole.parse().ok()?;
    let earlier = whole.checked_sub(WATERMARK_OVERLAP_S)?;
    Some(match fraction {
        "" => earlier.to_string(),
        f if f.bytes().all(|b| b.is_ascii_digit()) => format!("{earlier}.{f}"),
        _ => return None,
    })
}

/// A temporary file beside its destination (`model::io::AtomicFile`: flushed and renamed
/// over it by [`Temp::persist`], removed unless persisted).
struct Temp(AtomicFile);

impl Temp {
    fn create(local: &Path) -> Result<Temp, RemoteError> {
        let error = |source| RemoteError::Cache {
            path: local.to_path_buf(),
            source,
        };
        if let Some(parent) = local.parent() {
            std::fs::create_dir_all(parent).map_err(error)?;
        }
        AtomicFile::create(local).map(Temp).map_err(error)
    }

    fn file(&self) -> &File {
        self.0.file()
    }

    fn persist(self, local: &Path) -> Result<(), RemoteError> {
        self.0.commit().map_err(|source| RemoteError::Cache {
            path: local.to_path_buf(),
            source,
        })
    }
}

/// The fetch script's output: a first line (`inode size mtime`) kept apart, the rest
/// written to the file.
struct MetaThenBytes<'a> {
    head: Vec<u8>,
    in_head: bool,
    file: &'a File,
    payload: u64,
}

impl<'a> MetaThenBytes<'a> {
    fn new(file: &'a File) -> MetaThenBytes<'a> {
        MetaThenBytes {
            head: Vec::new(),
            in_head: true,
            file,
            payload: 0,
        }
    }
}

impl Write for MetaThenBytes<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        if self.in_head {
            match memchr::memchr(b'\n', rest) {
                Some(at) => {
                    self.head.extend_from_slice(&rest[..at]);
                    self.in_head = false;
                    rest = &rest[at + 1..];
                }
                None => {
                    self.head.extend_from_slice(rest);
                    if self.head.len() > 512 {
                        return Err(io::Error::other("the remote side sent no file header"));
                    }
                    return Ok(buf.len());
                }
            }
        }
        self.file.write_all(rest)?;
        self.payload += rest.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_can_move_to_a_watcher_thread() {
        fn send_and_sync<T: Send + Sync>() {}
        send_and_sync::<Mirror>();
    }

    #[test]
    fn the_watermark_overlaps_the_previous_listing() {
        assert_eq!(
            minus_overlap("1700000000.123456789").unwrap(),
            "1699999998.123456789"
        );
        assert_eq!(minus_overlap("1700000000").unwrap(), "1699999998");
        assert!(minus_overlap("1").is_none());
        assert!(minus_overlap("abc").is_none());
        assert!(minus_overlap("17.1e3").is_none());
    }
}
