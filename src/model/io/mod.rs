//! Reading a file's bytes, under one policy ([`FileBytes::read`]): large regular files are
//! mapped, small ones read; anything that is not a regular file (a FIFO, a device) is refused
//! before it is opened, since opening a FIFO for reading waits for a writer forever.

use std::io::Read;
use std::path::Path;

/// Files from this size on are mapped rather than read: no copy, no fresh pages to fault in.
pub const MAP_FROM_BYTES: u64 = 1 << 20;

/// A file's bytes: the file mapped into memory, or read.
#[derive(Debug)]
pub enum FileBytes {
    /// A read-only mapping of the whole file.
    Mapped(memmap2::Mmap),
    /// The file read into memory.
    Read(Vec<u8>),
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mapped(map) => map,
            FileBytes::Read(bytes) => bytes,
        }
    }
}

impl FileBytes {
    /// Maps a large regular file, reads a small one.
    ///
    /// `may_map: false` always reads: a file another process may still rewrite in place (a
    /// watched file) must not be mapped, since a truncation under the mapping would end this
    /// process with SIGBUS.
    ///
    /// # Errors
    /// As [`std::fs::read`] gives them (a directory, a missing file); a FIFO, socket or device
    /// is refused with "not a regular file" without being opened.
    pub fn read(path: &Path, may_map: bool) -> std::io::Result<FileBytes> {
        let kind = std::fs::metadata(path)?.file_type();
        if !kind.is_file() && !kind.is_dir() {
            return Err(std::io::Error::other("not a regular file"));
        }
        let mut file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        if may_map && meta.is_file() && meta.len() >= MAP_FROM_BYTES {
            // SAFETY: the mapping is read-only and lives only while this file is parsed. Its
            // bytes could change under us only if another process rewrote the file in place
            // meanwhile; the probe never does (it writes `manifest.json.tmp.<pid>` and renames).
            if let Ok(map) = unsafe { memmap2::MmapOptions::new().populate().map(&file) } {
                return Ok(FileBytes::Mapped(map));
            }
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.read_to_end(&mut bytes)?;
        Ok(FileBytes::Read(bytes))
    }

    /// Drops the bytes; a large mapping is unmapped on a thread of its own, since unmapping
    /// takes a while and nothing waits for it (where no thread can be started, here).
    pub fn release(self) {
        if let FileBytes::Mapped(map) = self {
            let _ = std::thread::Builder::new().spawn(move || drop(map));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_files_are_mapped_small_ones_read() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small.json");
        let large = dir.path().join("large.json");
        std::fs::write(&small, b"{}").unwrap();
        std::fs::write(&large, vec![b' '; MAP_FROM_BYTES as usize]).unwrap();
        assert!(
            matches!(FileBytes::read(&small, true).unwrap(), FileBytes::Read(ref b) if &b[..] == b"{}")
        );
        assert!(
            matches!(FileBytes::read(&large, true).unwrap(), FileBytes::Mapped(ref m) if m.len() == MAP_FROM_BYTES as usize)
        );
        assert!(matches!(
            FileBytes::read(&large, false).unwrap(),
            FileBytes::Read(_)
        ));
        let missing = FileBytes::read(&dir.path().join("missing.json"), true).unwrap_err();
        assert_eq!(
            missing.kind(),
            std::fs::read(dir.path().join("missing.json"))
                .unwrap_err()
                .kind()
        );
        let directory = FileBytes::read(dir.path(), true).unwrap_err();
        assert_eq!(
            directory.kind(),
            std::fs::read(dir.path()).unwrap_err().kind()
        );
    }
}
