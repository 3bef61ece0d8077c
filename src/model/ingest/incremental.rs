//! A capture read again as its files change (watch mode): each dump file is re-read only
//! when its fingerprint (size, modification time, inode) changed since the last read, and a
//! watched file is never memory-mapped (a writer truncating a mapped file is a SIGBUS).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use crate::model::dump::{Dump, Warning, Window};
use crate::model::io::{FileBytes, MapChoice};

use super::{
    AttemptChoice, LoadError, choose_attempts, discover_watched, read_window_with, sort_windows,
};

/// What identifies one version of a file: a change of any field means "read it again". A
/// file rewritten in place keeps its inode but changes size or time; a renamed-in manifest
/// changes inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    /// Bytes.
    pub len: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i128,
    /// Inode number (0 where the platform has none).
    pub inode: u64,
}

impl Fingerprint {
    /// How long ago the file last changed (zero for a time in the future).
    pub fn age(&self) -> std::time::Duration {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        std::time::Duration::from_nanos((now - self.mtime_ns).clamp(0, u64::MAX as i128) as u64)
    }

    /// The fingerprint of `path` now.
    ///
    /// # Errors
    /// As [`std::fs::metadata`].
    pub fn of(path: &std::path::Path) -> std::io::Result<Fingerprint> {
        let meta = std::fs::metadata(path)?;
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128);
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let inode = 0;
        Ok(Fingerprint {
            len: meta.len(),
            mtime_ns,
            inode,
        })
    }
}

/// How long after its last change a file is taken as written: a younger one that reads as
/// less than before may be mid-rewrite.
pub const SETTLE_AGE: std::time::Duration = std::time::Duration::from_millis(500);

/// True when `new` holds fewer records than `old`, or lost evidence `old` did not (a cut).
fn holds_less(new: &(Window, Vec<Warning>), old: &(Window, Vec<Warning>)) -> bool {
    new.0.records.len() < old.0.records.len()
        || (crate::model::dump::any_lost(&new.1) && !crate::model::dump::any_lost(&old.1))
}

/// The files that `path` (a dump file whose format computes statistics from tensor files)
/// names and that do not exist (yet).
fn missing_statistics_files(path: &std::path::Path, bytes: &[u8]) -> Vec<PathBuf> {
    let head = &bytes[..bytes.len().min(crate::model::formats::HEAD_BYTES)];
    match crate::model::formats::claiming(path, head) {
        Some(format) if format.statistics_from_tensor_files() => format
            .statistics_files(path, bytes)
            .into_iter()
            .filter(|p| !p.exists())
            .collect(),
        _ => Vec::new(),
    }
}

/// How a warning about a file that became unreadable after a good reading begins.
const UNREADABLE_NOW: &str = "cannot be read now";

/// One file's last reading.
struct Cached {
    /// `None` when the file changed while it was read: read it again next time.
    fingerprint: Option<Fingerprint>,
    /// Files its statistics come from that were missing when it was read (a windowed
    /// manifest that landed before its tensors): read it again when one appears.
    waiting_on: Vec<PathBuf>,
    /// The window and its warnings, or why the file could not be read as one.
    result: Result<(Window, Vec<Warning>), String>,
}

/// What a [`Incremental::refresh`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RefreshStats {
    /// Files read (new or changed).
    pub read: usize,
    /// Files whose last reading was reused.
    pub reused: usize,
    /// Files gone since the last refresh.
    pub removed: usize,
    /// Held files ([`Incremental::hold`]) left unread.
    pub held: usize,
    /// The files read (new or changed), in listing order: the only windows that may differ
    /// from the last refresh's (gone files' windows are simply absent); what
    /// `Analysis::refresh_with` takes as [`crate::model::dump::Changes::Sources`].
    pub changed: Vec<PathBuf>,
}

/// The dump files under some watched directories, read incrementally.
pub struct Incremental {
    inputs: Vec<PathBuf>,
    attempt: AttemptChoice,
    files: HashMap<PathBuf, Cached>,
    held: HashSet<PathBuf>,
}

impl Incremental {
    /// Follows `inputs` (directories or files), keeping `attempt` of each window. Nothing
    /// is read until [`Incremental::refresh`].
    pub fn new(inputs: Vec<PathBuf>, attempt: AttemptChoice) -> Incremental {
        Incremental {
            inputs,
            attempt,
            files: HashMap::new(),
            held: HashSet::new(),
        }
    }

    /// Leaves `paths` unread until [`Incremental::release`]: a remote window whose saved
    /// tensors (which its statistics come from) are still being fetched. A held file that was
    /// read before keeps that reading; one never read is left out of the capture.
    pub fn hold(&mut self, paths: &[PathBuf]) {
        self.held.extend(paths.iter().cloned());
    }

    /// True when a file's last reading is provisional (it was mid-rewrite, or read as less
    /// than before while young): refresh again once it has had [`SETTLE_AGE`] to settle,
    /// whether or not anything signals a change (a remote mirror signals only new copies).
    pub fn unsettled(&self) -> bool {
        self.files
            .iter()
            .any(|(path, cached)| cached.fingerprint.is_none() && !self.held.contains(path))
    }

    /// Ends [`Incremental::hold`] for `paths`: the next refresh reads them whatever their
    /// fingerprint (what they read from changed, not they).
    pub fn release(&mut self, paths: &[PathBuf]) {
        for path in paths {
            self.held.remove(path);
            if let Some(cached) = self.files.get_mut(path) {
                cached.fingerprint = None;
            }
        }
    }

    /// The inputs followed.
    pub fn inputs(&self) -> &[PathBuf] {
        &self.inputs
    }

    /// Lists the inputs again and returns the capture as it is now: new and changed files are
    /// read (never mapped), the others reused. A file that changed while it was read (a
    /// writer mid-rewrite) keeps its previous reading and is read again on the next refresh
    /// ([`Incremental::unsettled`]). A settled file that cannot be read as a window keeps its
    /// last good reading with a lost-evidence warning (`cannot be read now`), and costs an
    /// `UNREADABLE WINDOW` warning when it never had one.
    ///
    /// # Errors
    /// An input that is missing or cannot be listed (a directory with no dump files yet is
    /// an empty capture, not an error); an `--attempt` a window lacks.
    pub fn refresh(&mut self) -> Result<(Dump, RefreshStats), LoadError> {
        let mut listed = Vec::new();
        for input in &self.inputs {
            listed.extend(discover_watched(input)?);
        }
        let mut stats = RefreshStats::default();
        let before = self.files.len();
        let present: HashSet<&PathBuf> = listed.iter().collect();
        self.files.retain(|path, _| present.contains(path));
        stats.removed = before - self.files.len();
        for path in &listed {
            if self.held.contains(path) {
                stats.held += 1;
                continue;
            }
            let now = Fingerprint::of(path).ok();
            let fresh = self.files.get(path).is_some_and(|c| {
                c.fingerprint.is_some()
                    && c.fingerprint == now
                    && c.waiting_on.iter().all(|p| !p.exists())
            });
            if fresh {
                stats.reused += 1;
                continue;
            }
            stats.read += 1;
            stats.changed.push(path.clone());
            let mut waiting_on = Vec::new();
            let result = FileBytes::read(path, false)
                .map_err(|e| format!("cannot read: {e}"))
                .and_then(|bytes| {
                    waiting_on = missing_statistics_files(path, &bytes);
                    read_window_with(&bytes, path, MapChoice::Never).map_err(|e| e.to_string())
                });
            // Read again next time if the file moved under the reader.
            let after = Fingerprint::of(path).ok();
            let stable = now.is_some() && now == after;
            let previous = self.files.remove(path);
            // A file written in place (msprobe's dump.json: truncated, then written) is cut
            // short or empty for a moment: a reading of a file younger than SETTLE_AGE that
            // holds less than the last good one keeps the last good one, and is read again.
            let young = now.is_some_and(|f| f.age() < SETTLE_AGE);
            let (result, settled) = match (result, previous) {
                (
                    Ok(read),
                    Some(Cached {
                        result: Ok(old), ..
                    }),
                ) if young && holds_less(&read, &old) => (Ok(old), false),
                (Ok(read), _) => (Ok(read), true),
                (
                    Err(_),
                    Some(Cached {
                        result: Ok(old), ..
                    }),
                ) if !stable || young => (Ok(old), false),
                // Settled and unreadable (cut to nothing, overwritten with garbage): the last
                // good reading stays, said as lost evidence.
                (
                    Err(e),
                    Some(Cached {
                        result: Ok((window, mut warnings)),
                        ..
                    }),
                ) => {
                    warnings.retain(|w| !w.message.starts_with(UNREADABLE_NOW));
                    let cause = e
                        .strip_prefix(&format!("{}: ", path.display()))
                        .unwrap_or(&e);
                    warnings.push(Warning::lost(
                        path.clone(),
                        format!("{UNREADABLE_NOW} ({cause}); its last good reading is shown"),
                    ));
                    (Ok((window, warnings)), true)
                }
                (Err(e), _) => (Err(e), true),
            };
            self.files.insert(
                path.clone(),
                Cached {
                    fingerprint: (stable && settled).then_some(now).flatten(),
                    waiting_on,
                    result,
                },
            );
        }
        let mut dump = Dump::default();
        for path in &listed {
            let Some(cached) = self.files.get(path) else {
                continue; // held, never read
            };
            match &cached.result {
                Ok((window, warnings)) => {
                    dump.windows.push(window.clone());
                    dump.warnings.extend(warnings.iter().cloned());
                }
                Err(cause) => {
                    let prefix = format!("{}: ", path.display());
                    let cause = cause.strip_prefix(&prefix).unwrap_or(cause).to_string();
                    dump.warnings.push(Warning::unreadable_window(path, cause));
                }
            }
        }
        // A watch's discovery keeps no unfinished windows: an --attempt error lists the
        // finished attempts alone.
        choose_attempts(&mut dump, self.attempt, &[], &[])?;
        sort_windows(&mut dump.windows);
        Ok((dump, stats))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// llama_fp16_overflow's two sides as ranks 0 and 1 of one directory.
    fn two_ranks() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("assets/examples/llama_fp16_overflow");
        let dir = tempfile::tempdir().unwrap();
        let mut paths = Vec::new();
        for (rank, side) in [(0, "a"), (1, "b")] {
            let to = dir
                .path()
                .join(format!("rank{rank}/match1-occ1/manifest.json"));
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            let from = examples.join(side).join("rank0/match1-occ1/manifest.json");
            let mut manifest: serde_json::Value =
                serde_json::from_slice(&std::fs::read(from).unwrap()).unwrap();
            manifest["rank"] = rank.into();
            std::fs::write(&to, serde_json::to_vec(&manifest).unwrap()).unwrap();
            paths.push(to);
        }
        let b = paths.pop().unwrap();
        (dir, paths.pop().unwrap(), b)
    }

    fn ranks(dump: &Dump) -> Vec<u32> {
        dump.windows.iter().map(|w| w.rank).collect()
    }

    #[test]
    fn only_changed_files_are_read_again() {
        let (dir, a, _) = two_ranks();
        let mut capture = Incremental::new(vec![dir.path().to_path_buf()], AttemptChoice::Newest);
        let (dump, stats) = capture.refresh().unwrap();
        assert_eq!((ranks(&dump), stats.read, stats.reused), (vec![0, 1], 2, 0));
        let (_, stats) = capture.refresh().unwrap();
        assert_eq!((stats.read, stats.reused), (0, 2));
        let bytes = std::fs::read(&a).unwrap();
        std::fs::remove_file(&a).unwrap();
        std::fs::write(&a, bytes).unwrap(); // a new inode: a manifest renamed into place
        let (_, stats) = capture.refresh().unwrap();
        assert_eq!((stats.read, stats.reused), (1, 1));
    }

    #[test]
    fn a_held_file_is_left_unread_until_released_and_then_read_whatever_its_fingerprint() {
        let (dir, a, b) = two_ranks();
        let mut capture = Incremental::new(vec![dir.path().to_path_buf()], AttemptChoice::Newest);
        // Held before it was ever read: left out of the capture.
        capture.hold(std::slice::from_ref(&b));
        let (dump, stats) = capture.refresh().unwrap();
        assert_eq!((ranks(&dump), stats.read, stats.held), (vec![0], 1, 1));
        capture.release(std::slice::from_ref(&b));
        let (dump, stats) = capture.refresh().unwrap();
        assert_eq!((ranks(&dump), stats.read, stats.held), (vec![0, 1], 1, 0));
        // Held after a reading: that reading stays, unchanged file or not, until released,
        // and the release reads it again though its own fingerprint did not change.
        capture.hold(std::slice::from_ref(&a));
        let (dump, stats) = capture.refresh().unwrap();
        assert_eq!(
            (ranks(&dump), stats.read, stats.reused, stats.held),
            (vec![0, 1], 0, 1, 1)
        );
        capture.release(std::slice::from_ref(&a));
        let (_, stats) = capture.refresh().unwrap();
        assert_eq!((stats.read, stats.reused), (1, 1));
    }

    /// Sets `path`'s modification time `ago` in the past (a file that has settled).
    fn age(path: &std::path::Path, ago: std::time::Duration) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(std::time::SystemTime::now() - ago)
            .unwrap();
    }

    #[test]
    fn a_settled_file_cut_to_nothing_keeps_its_last_good_reading_with_a_warning() {
        let (dir, a, _) = two_ranks();
        let mut capture = Incremental::new(vec![dir.path().to_path_buf()], AttemptChoice::Newest);
        let (dump, _) = capture.refresh().unwrap();
        let records = dump.windows[0].records.len();
        std::fs::write(&a, b"").unwrap();
        // Young: provisional, read again later.
        let (dump, _) = capture.refresh().unwrap();
        assert_eq!(dump.windows[0].records.len(), records);
        assert!(capture.unsettled());
        age(&a, std::time::Duration::from_secs(5));
        let (dump, stats) = capture.refresh().unwrap();
        assert_eq!((ranks(&dump), stats.read), (vec![0, 1], 1));
        assert_eq!(dump.windows[0].records.len(), records);
        assert!(!capture.unsettled());
        let said: Vec<&str> = dump
            .warnings
            .iter()
            .filter(|w| w.message.starts_with(UNREADABLE_NOW))
            .map(|w| w.message.as_str())
            .collect();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].ends_with("its last good reading is shown"),
            "{said:?}"
        );
        assert!(dump.warnings.iter().any(|w| w.loses_evidence()));
    }
}
