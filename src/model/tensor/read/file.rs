//! A tensor file opened for reading: the bytes (through `model::io`'s policy: mapped when
//! large, never when watched) and the tensors it holds.

use std::ops::Range;
use std::path::{Path, PathBuf};

use super::{DType, TensorView, pt, safetensors};
use crate::model::io::{FileBytes, MapChoice, OpenError};

/// A tensor file could not be read: names the file and the problem.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct TensorError {
    /// The file as given.
    pub path: PathBuf,
    /// What is wrong, in words ("not a torch.save archive or safetensors file", "refused
    /// pickle global `posix.system` ...").
    pub problem: String,
}

/// The container a tensor file uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileFormat {
    /// torch.save's zip archive (`archive/data.pkl` + `archive/data/<key>` storages).
    TorchZip,
    /// safetensors: 8-byte little-endian header length, JSON header, data.
    Safetensors,
}

impl FileFormat {
    /// How the format is named to users.
    pub fn name(self) -> &'static str {
        match self {
            FileFormat::TorchZip => "torch.save (.pt)",
            FileFormat::Safetensors => "safetensors",
        }
    }
}

/// One tensor inside a file: its key and layout, and where its storage lies in the file.
///
/// Readers build entries with [`TensorEntry::new`], which proves the layout stays inside the
/// storage and the storage inside the file, so [`TensorFile::view`] never reads out of bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorEntry {
    /// Path of the tensor inside the saved object: `""` for a bare tensor, dict keys and
    /// list indices joined by `.` (`"q"`, `"layers.0.weight"`, `"2"`).
    pub key: String,
    /// Element type.
    pub dtype: DType,
    /// Logical shape, in elements per dimension (empty for a 0-d tensor).
    pub shape: Vec<usize>,
    /// Strides in elements.
    pub strides: Vec<usize>,
    /// Offset of the first element in the storage, in elements.
    pub storage_offset: usize,
    /// Byte range of the whole storage inside the file.
    pub storage: Range<usize>,
}

impl TensorEntry {
    /// Checks that `storage` lies inside a file of `file_len` bytes and that the layout stays
    /// inside `storage`.
    ///
    /// # Errors
    /// A message naming the key and what does not fit.
    pub fn new(
        key: String,
        dtype: DType,
        shape: Vec<usize>,
        strides: Vec<usize>,
        storage_offset: usize,
        storage: Range<usize>,
        file_len: usize,
    ) -> Result<Self, String> {
        if storage.start > storage.end || storage.end > file_len {
            return Err(format!(
                "tensor {key:?}: storage bytes {}..{} lie outside the file ({file_len} bytes)",
                storage.start, storage.end
            ));
        }
        let needed = super::view::layout_bytes(dtype, &shape, &strides, storage_offset)
            .map_err(|e| format!("tensor {key:?}: {e}"))?;
        if needed > storage.len() {
            return Err(format!(
                "tensor {key:?}: storage holds {} bytes, the view (shape {shape:?}, stride {strides:?}, storage_offset {storage_offset}, {dtype}) needs {needed}",
                storage.len()
            ));
        }
        Ok(TensorEntry {
            key,
            dtype,
            shape,
            strides,
            storage_offset,
            storage,
        })
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// An opened tensor file: its format and the tensors it holds, in the order they were saved.
pub struct TensorFile {
    /// The path as given.
    pub path: PathBuf,
    /// The container format, told by the content.
    pub format: FileFormat,
    /// Every tensor, in save order (pickle order for `.pt`, header order for safetensors).
    pub entries: Vec<TensorEntry>,
    bytes: FileBytes,
}

impl std::fmt::Debug for TensorFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorFile")
            .field("path", &self.path)
            .field("format", &self.format)
            .field("entries", &self.entries)
            .finish_non_exhaustive()
    }
}

impl TensorFile {
    /// Opens `path` and reads its table of tensors (no tensor data is read): mapped, its
    /// pages read as they are touched, when large ([`MapChoice::Lazy`]). The format is told by
    /// the content, not the extension.
    ///
    /// # Errors
    /// [`TensorError`] naming the file: cannot be opened, neither format, or damaged
    /// (truncated archive, refused pickle global, storage smaller than a view needs, ...).
    pub fn open(path: &Path) -> Result<TensorFile, TensorError> {
        Self::open_with(path, MapChoice::Lazy)
    }

    /// [`TensorFile::open`] under the caller's [`MapChoice`]: [`MapChoice::Never`] for a file
    /// that a watched window names (read whole, never mapped: another process may still
    /// rewrite it).
    ///
    /// # Errors
    /// As [`TensorFile::open`].
    pub fn open_with(path: &Path, map: MapChoice) -> Result<TensorFile, TensorError> {
        let error = |problem: String| TensorError {
            path: path.to_path_buf(),
            problem,
        };
        // A FIFO (or device) would block or never end: io refuses it unopened.
        let bytes = FileBytes::open(path, map).map_err(|e| {
            error(match e {
                OpenError::Directory => "is a directory, not a tensor file".into(),
                other => other.to_string(),
            })
        })?;
        Self::from_parts(path.to_path_buf(), bytes)
    }

    /// Reads a tensor file held in memory; `path` only names it in errors.
    ///
    /// # Errors
    /// As [`TensorFile::open`].
    pub fn from_bytes(bytes: Vec<u8>, path: &Path) -> Result<TensorFile, TensorError> {
        Self::from_parts(path.to_path_buf(), FileBytes::Read(bytes))
    }

    fn from_parts(path: PathBuf, bytes: FileBytes) -> Result<TensorFile, TensorError> {
        let (format, entries) = match sniff(&bytes) {
            Some(FileFormat::TorchZip) => (FileFormat::TorchZip, pt::read_entries(&bytes)),
            Some(FileFormat::Safetensors) => {
                (FileFormat::Safetensors, safetensors::read_entries(&bytes))
            }
            None => (FileFormat::TorchZip, Err(not_a_tensor_file(&bytes))),
        };
        match entries {
            Ok(entries) => Ok(TensorFile {
                path,
                format,
                entries,
                bytes,
            }),
            Err(problem) => Err(TensorError { path, problem }),
        }
    }

    /// The entry saved under `key`, if any.
    pub fn get(&self, key: &str) -> Option<&TensorEntry> {
        self.entries.iter().find(|e| e.key == key)
    }

    /// A view over `entry`'s data. `entry` must come from this file's [`TensorFile::entries`].
    pub fn view(&self, entry: &TensorEntry) -> TensorView<'_> {
        let storage = &self.bytes[entry.storage.clone()];
        TensorView::new(
            entry.dtype,
            entry.shape.clone(),
            entry.strides.clone(),
            entry.storage_offset,
            storage,
        )
        .expect("TensorEntry::new checked the layout against this file")
    }

    /// Size of the file in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the file is empty (never true for a file that opened).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// The format told by the first bytes: `PK\x03\x04` is a zip (torch.save); an 8-byte length
/// followed by `{` is safetensors.
fn sniff(bytes: &[u8]) -> Option<FileFormat> {
    if bytes.starts_with(b"PK\x03\x04") {
        return Some(FileFormat::TorchZip);
    }
    if bytes.len() >= 9 && bytes[8] == b'{' {
        return Some(FileFormat::Safetensors);
    }
    None
}

/// Why bytes that are neither format were refused, with a hint for the common cases.
fn not_a_tensor_file(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "empty file: not a torch.save archive or safetensors file".into();
    }
    if bytes[0] == 0x80 {
        return "a bare pickle or the legacy torch.save format (before torch 1.6, or \
                _use_new_zipfile_serialization=False); save again with torch.save's default zip format"
            .into();
    }
    let head: String = bytes
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "not a torch.save archive (starts with PK\\x03\\x04) or a safetensors file (8-byte header length, then `{{`); first bytes: {head}"
    )
}
