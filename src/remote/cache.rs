//! The local cache of remote files: `<cache_dir>/<host>[_<port>]/<path…>`, written atomically
//! ([`write_atomically`]), capped in size with least recently used files evicted first
//! ([`evict`]), and what each mirror knows of the remote files kept beside it
//! ([`MirrorState`], in `<cache_dir>/.state/`), so a later run fetches only what changed.

use std::collections::{BTreeMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use super::script::RemoteMeta;

/// The directory under the cache root that holds the mirrors' states (not a host's).
pub const STATE_DIR: &str = ".state";

// The cache's temporary files are `model::io`'s (`.<name>.dvtmp<pid>-<n>`), never a dump
// file's name, so discovery skips one left by a killed run and eviction tells it apart.
pub use crate::model::io::is_temp;

/// Writes `bytes` to `path` atomically (`model::io::write_atomically`), creating the
/// directories above it: a reader sees the old file or the new one, never half of one.
///
/// # Errors
/// What the file system says.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    crate::model::io::write_atomically(path, bytes)
}

/// Sets `path`'s modification time to now: the cache's "last used" (the access time is not
/// kept on many file systems).
pub fn touch(path: &Path) {
    if let Ok(file) = std::fs::File::options().write(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// What one mirror knows of the remote files it holds, saved between runs.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MirrorState {
    /// The source as written (a check that the state is the mirror's).
    pub source: String,
    /// Dump files mirrored eagerly, by path relative to the mirror's root (UTF-8 paths only;
    /// others are fetched again by the next run).
    pub files: BTreeMap<String, RemoteMeta>,
    /// Files fetched on demand (saved tensors, input sets), likewise.
    pub on_demand: BTreeMap<String, RemoteMeta>,
}

impl MirrorState {
    /// Where the state of the mirror at `root` is kept: `<cache_dir>/.state/<hash>.json`.
    pub fn path(cache_dir: &Path, source: &str) -> PathBuf {
        // FNV-1a: a stable name across runs and builds.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for b in source.as_bytes() {
            hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        cache_dir.join(STATE_DIR).join(format!("{hash:016x}.json"))
    }

    /// The state saved at `path` for `source`, or an empty one (none saved, unreadable, or
    /// another source's).
    pub fn load(path: &Path, source: &str) -> MirrorState {
        std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<MirrorState>(&bytes).ok())
            .filter(|s| s.source == source)
            .unwrap_or_else(|| MirrorState {
                source: source.to_string(),
                ..MirrorState::default()
            })
    }

    /// Saves the state atomically.
    ///
    /// # Errors
    /// What the file system says.
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let bytes = serde_json::to_vec(self).map_err(io::Error::other)?;
        write_atomically(path, &bytes)
    }
}

/// Files no eviction may remove, by mirror: each live mirror's dump files.
fn protected() -> &'static Mutex<BTreeMap<u64, HashSet<PathBuf>>> {
    static PROTECTED: OnceLock<Mutex<BTreeMap<u64, HashSet<PathBuf>>>> = OnceLock::new();
    PROTECTED.get_or_init(Default::default)
}

/// Declares the files mirror `id` must keep (its dump files); an empty set releases them.
pub fn protect(id: u64, files: HashSet<PathBuf>) {
    let mut all = protected().lock().unwrap_or_else(|e| e.into_inner());
    if files.is_empty() {
        all.remove(&id);
    } else {
        all.insert(id, files);
    }
}

/// What an eviction did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Evicted {
    /// Files removed, oldest use first.
    pub removed: Vec<PathBuf>,
    /// Bytes under the cache root afterwards.
    pub used: u64,
}

/// Removes the least recently used files under `cache_dir` (by modification time, which the
/// mirrors set on every use) until it holds at most `cap` bytes. Never removes a live
/// mirror's dump file (declared with `protect`), a file in `also_keep` (the current sync's), the mirrors'
/// states, or another process's temporary file younger than an hour; when those alone exceed
/// the cap, the cache stays over it.
///
/// # Errors
/// The cache root cannot be listed.
pub fn evict(cache_dir: &Path, cap: u64, also_keep: &HashSet<PathBuf>) -> io::Result<Evicted> {
    let mut files = Vec::new();
    let mut used = 0u64;
    let mut stack = vec![cache_dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if dir == cache_dir => return Err(e),
            Err(_) => continue,
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                if dir != cache_dir || entry.file_name() != STATE_DIR {
                    stack.push(path);
                }
            } else if meta.is_file() {
                used += meta.len();
                let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                files.push((modified, meta.len(), path));
            }
        }
    }
    let mut evicted = Evicted {
        removed: Vec::new(),
        used,
    };
    if used <= cap {
        return Ok(evicted);
    }
    let keep: HashSet<PathBuf> = protected()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .flatten()
        .cloned()
        .collect();
    files.sort();
    let an_hour_ago = SystemTime::now() - std::time::Duration::from_secs(3600);
    for (modified, len, path) in files {
        if evicted.used <= cap {
            break;
        }
        if keep.contains(&path) || also_keep.contains(&path) {
            continue;
        }
        if is_temp(&path) && modified > an_hour_ago {
            continue;
        }
        if std::fs::remove_file(&path).is_ok() {
            evicted.used -= len;
            evicted.removed.push(path);
        }
    }
    Ok(evicted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, len: usize, age_s: u64) -> PathBuf {
        let path = dir.join(name);
        write_atomically(&path, &vec![b'x'; len]).unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(SystemTime::now() - std::time::Duration::from_secs(age_s))
            .unwrap();
        path
    }

    #[test]
    fn eviction_removes_least_recently_used_first_and_spares_what_is_kept() {
        let cache = tempfile::tempdir().unwrap();
        let root = cache.path();
        let oldest = file(root, "h/a/oldest.pt", 100, 300);
        let current = file(root, "h/a/current.json", 100, 250);
        let protected_file = file(root, "h/b/manifest.json", 100, 200);
        let older = file(root, "h/a/older.pt", 100, 100);
        let newest = file(root, "h/a/newest.pt", 100, 10);
        let state = file(root, ".state/0.json", 100, 400);
        protect(u64::MAX, HashSet::from([protected_file.clone()]));
        let keep = HashSet::from([current.clone()]);
        let evicted = evict(root, 300, &keep).unwrap();
        protect(u64::MAX, HashSet::new());
        assert_eq!(evicted.removed, [oldest.clone(), older.clone()]);
        assert_eq!(evicted.used, 300);
        for (path, kept) in [
            (&oldest, false),
            (&current, true),
            (&protected_file, true),
            (&older, false),
            (&newest, true),
            (&state, true),
        ] {
            assert_eq!(path.exists(), kept, "{}", path.display());
        }
        // Under the cap, nothing goes.
        assert!(
            evict(root, 1 << 20, &HashSet::new())
                .unwrap()
                .removed
                .is_empty()
        );
    }

    #[test]
    fn states_round_trip_and_belong_to_their_source() {
        let cache = tempfile::tempdir().unwrap();
        let path = MirrorState::path(cache.path(), "h:/d");
        assert_ne!(path, MirrorState::path(cache.path(), "h:/e"));
        let mut state = MirrorState::load(&path, "h:/d");
        assert!(state.files.is_empty());
        state.files.insert(
            "rank0/manifest.json".into(),
            RemoteMeta {
                inode: 1,
                size: 2,
                mtime: "3.5".into(),
            },
        );
        state.save(&path).unwrap();
        assert_eq!(MirrorState::load(&path, "h:/d"), state);
        assert!(MirrorState::load(&path, "h:/other").files.is_empty());
    }
}
