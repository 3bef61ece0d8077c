//! Writing files: atomically replaced ([`write_atomically`], [`AtomicFile`]) or created only
//! when absent ([`create_new`]).

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Temporary files hold this in their name (with the pid and a counter after it): never part
/// of a dump file's name, so discovery skips a temporary file left by a killed run and the
/// remote cache tells one from a cached file ([`is_temp`]).
pub const TEMP_MARK: &str = ".dvtmp";

/// A fresh temporary sibling of `path` (`.<name>.dvtmp<pid>-<n>`), in the same directory so
/// that renaming it over `path` is atomic. Unique within this process and across processes.
pub fn temp_path(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_os_string());
    let mut temp = std::ffi::OsString::from(".");
    temp.push(name);
    temp.push(format!(
        "{TEMP_MARK}{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    path.with_file_name(temp)
}

/// Whether `path` is one of [`temp_path`]'s temporary files.
pub fn is_temp(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().contains(TEMP_MARK))
}

/// A file being written in place of `target`: a temporary sibling ([`temp_path`]) that
/// [`AtomicFile::commit`] flushes and renames over `target`, and that is removed if it is
/// dropped uncommitted (an error, a cancel). A reader of `target` sees the old file or the
/// new one, never half of one.
#[derive(Debug)]
pub struct AtomicFile {
    temp: PathBuf,
    target: PathBuf,
    file: File,
    committed: bool,
}

impl AtomicFile {
    /// Creates the temporary sibling of `target` (read and write, so the writer may read
    /// back what it wrote). The directory must exist: it is not created.
    ///
    /// # Errors
    /// What the file system says (a missing directory, permission denied).
    pub fn create(target: &Path) -> io::Result<AtomicFile> {
        let temp = temp_path(target);
        let file = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&temp)?;
        Ok(AtomicFile {
            temp,
            target: target.to_path_buf(),
            file,
            committed: false,
        })
    }

    /// The temporary file, to write the contents to.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Flushes the contents to disk (`fsync` of the data) and renames the temporary file over
    /// the target, replacing any file there.
    ///
    /// # Errors
    /// What the file system says; the temporary file is then removed and the target is left
    /// as it was.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.sync_data()?;
        std::fs::rename(&self.temp, &self.target)?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// Writes `bytes` to `path` atomically: to a temporary sibling, flushed to disk, renamed over
/// `path` ([`AtomicFile`]). A reader sees the old file or the new one, never half of one; a
/// failure leaves `path` as it was and no temporary file behind. The directory must exist.
///
/// # Errors
/// What the file system says (a missing directory, permission denied, a full disk).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut temp = AtomicFile::create(path)?;
    temp.file.write_all(bytes)?;
    temp.commit()
}

/// Writes `bytes` to a new file at `path`, never replacing one: another contract than
/// [`write_atomically`], for files that are evidence once written (a case matrix's baseline,
/// a report the user named). Not atomic: a reader may see the file while it is written.
///
/// # Errors
/// [`io::ErrorKind::AlreadyExists`] when `path` exists; what the file system says.
pub fn create_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = File::options().write(true).create_new(true).open(path)?;
    file.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.json");
        write_atomically(&path, b"one").unwrap();
        write_atomically(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let dropped = AtomicFile::create(&path).unwrap();
        assert!(is_temp(&dropped.temp));
        drop(dropped);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(write_atomically(&dir.path().join("missing/x"), b"").is_err());
    }

    #[test]
    fn create_new_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("manifest.json");
        create_new(&path, b"one").unwrap();
        let e = create_new(&path, b"two").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&path).unwrap(), b"one");
    }
}
