//! Reading a file's bytes, under one policy ([`FileBytes::open`]): large regular files are
//! mapped unless the caller says the file is watched ([`MapChoice`]), small ones read;
//! anything that is not a regular file (a FIFO, a device) is refused before it is opened,
//! since opening a FIFO for reading waits for a writer forever.

use std::io::Read;
use std::path::Path;

/// Files from this size on are mapped rather than read: no copy, no fresh pages to fault in.
pub const MAP_FROM_BYTES: u64 = 1 << 20;

/// Whether a file may be mapped, and how: the caller knows whether another process may still
/// rewrite the file and how much of it will be touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapChoice {
    /// Never map: the file is read whole. For a watched file (a dump being written, or a
    /// saved tensor a watched window names): another process may truncate it in place, and a
    /// truncation under a mapping ends this process with SIGBUS.
    Never,
    /// Map a file of [`MAP_FROM_BYTES`] or more with its pages faulted in at once: the whole
    /// file is parsed right away (a manifest, an input set).
    Whole,
    /// Map a file of [`MAP_FROM_BYTES`] or more, its pages read as they are touched: a tensor
    /// file, of which a listing reads only the table and a comparison only the views it
    /// compares.
    Lazy,
}

/// Why [`FileBytes::open`] gave no bytes.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The file could not be found or opened.
    #[error("cannot open: {0}")]
    Open(std::io::Error),
    /// The path names a directory.
    #[error("is a directory")]
    Directory,
    /// A FIFO, socket or device: refused without being opened.
    #[error("not a regular file")]
    NotRegular,
    /// The file was opened but could not be read.
    #[error("cannot read: {0}")]
    Read(std::io::Error),
}

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
    /// Opens a regular file and maps it (a large one, where `map` allows) or reads it whole.
    /// A mapping that fails falls back to reading.
    ///
    /// # Errors
    /// [`OpenError`]: a FIFO, socket or device is refused before it is opened, a directory
    /// is named as one.
    pub fn open(path: &Path, map: MapChoice) -> Result<FileBytes, OpenError> {
        let (mut file, meta) = open_regular(path)?;
        if map != MapChoice::Never && meta.is_file() && meta.len() >= MAP_FROM_BYTES {
            let mut options = memmap2::MmapOptions::new();
            if map == MapChoice::Whole {
                options.populate();
            }
            // SAFETY: the mapping is read-only. Its bytes could change under us only if another
            // process rewrote the file in place meanwhile: a watched file, which callers open
            // with `MapChoice::Never`; the probe never does (it writes a temporary file and
            // renames), and saved tensors are written once.
            if let Ok(map) = unsafe { options.map(&file) } {
                return Ok(FileBytes::Mapped(map));
            }
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.read_to_end(&mut bytes).map_err(OpenError::Read)?;
        Ok(FileBytes::Read(bytes))
    }

    /// Maps a large regular file, reads a small one: [`FileBytes::open`] with
    /// [`MapChoice::Whole`], or [`MapChoice::Never`] when `may_map` is false (a watched file).
    ///
    /// # Errors
    /// As [`std::fs::read`] gives them (a directory, a missing file); a FIFO, socket or device
    /// is refused with "not a regular file" without being opened.
    pub fn read(path: &Path, may_map: bool) -> std::io::Result<FileBytes> {
        let map = if may_map {
            MapChoice::Whole
        } else {
            MapChoice::Never
        };
        FileBytes::open(path, map).map_err(|e| match e {
            OpenError::Open(e) | OpenError::Read(e) => e,
            OpenError::NotRegular => std::io::Error::other("not a regular file"),
            // The system's own words for reading a directory, as std::fs::read gives them.
            OpenError::Directory => std::fs::File::open(path)
                .and_then(|mut f| f.read_to_end(&mut Vec::new()))
                .err()
                .unwrap_or_else(|| std::io::Error::other("is a directory")),
        })
    }

    /// Drops the bytes; a large mapping is unmapped on a thread of its own, since unmapping
    /// takes a while and nothing waits for it (where no thread can be started, here).
    pub fn release(self) {
        if let FileBytes::Mapped(map) = self {
            let _ = std::thread::Builder::new().spawn(move || drop(map));
        }
    }
}

/// Opens `path` when it is a regular file: a FIFO, socket or device is refused before it is
/// opened, a directory named as one.
fn open_regular(path: &Path) -> Result<(std::fs::File, std::fs::Metadata), OpenError> {
    let kind = std::fs::metadata(path)
        .map_err(OpenError::Open)?
        .file_type();
    if kind.is_dir() {
        return Err(OpenError::Directory);
    }
    if !kind.is_file() {
        return Err(OpenError::NotRegular);
    }
    let file = std::fs::File::open(path).map_err(OpenError::Open)?;
    let meta = file.metadata().map_err(OpenError::Read)?;
    if meta.is_dir() {
        return Err(OpenError::Directory);
    }
    Ok((file, meta))
}

/// Reads a regular file of little-endian float32 values straight into a vector (one
/// allocation, no byte copy: a token-row sidecar runs to hundreds of MB), never mapped (the
/// values are kept after the file may have changed). Returns the values and the file's size
/// in bytes; a size that is not a multiple of 4 leaves its last bytes unread, for the caller
/// to refuse by the size.
///
/// # Errors
/// As [`FileBytes::open`]; a file that shrinks while it is read is a read error.
pub fn read_f32_le(path: &Path) -> Result<(Vec<f32>, u64), OpenError> {
    let (mut file, meta) = open_regular(path)?;
    let count = usize::try_from(meta.len() / 4).map_err(|_| {
        OpenError::Read(std::io::Error::other("too large for this machine's memory"))
    })?;
    let mut values = vec![0f32; count];
    file.read_exact(bytemuck::cast_slice_mut(&mut values))
        .map_err(OpenError::Read)?;
    if cfg!(target_endian = "big") {
        for v in &mut values {
            *v = f32::from_bits(u32::from_le(v.to_bits()));
        }
    }
    Ok((values, meta.len()))
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

    #[test]
    fn float32_files_are_read_little_endian_with_their_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.f32");
        let mut bytes: Vec<u8> = [1.5f32, -2.0, f32::NAN]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        std::fs::write(&path, &bytes).unwrap();
        let (values, size) = read_f32_le(&path).unwrap();
        assert_eq!(size, 12);
        assert_eq!(&values[..2], &[1.5, -2.0]);
        assert!(values[2].is_nan());
        // A torn last value is left unread; the size says so.
        bytes.extend_from_slice(&[0, 0]);
        std::fs::write(&path, &bytes).unwrap();
        let (values, size) = read_f32_le(&path).unwrap();
        assert_eq!((values.len(), size), (3, 14));
        assert!(matches!(read_f32_le(dir.path()), Err(OpenError::Directory)));
        assert!(matches!(
            read_f32_le(&dir.path().join("missing.f32")),
            Err(OpenError::Open(_))
        ));
    }
}
