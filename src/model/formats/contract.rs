//! The contract every dump format implements ([`Format`]) and the error of reading one file
//! ([`FormatError`]).

use std::path::{Path, PathBuf};

use crate::model::dump::{FormatFacts, SourceFormat, Warning, Window};
use crate::model::formats::msprobe::MsprobeError;
use crate::model::formats::probe::ManifestError;
use crate::model::formats::windowed::WindowedError;
use crate::model::io::MapChoice;

/// One dump format's reader.
pub trait Format: Sync {
    /// Which format this is; every window it reads carries it.
    fn id(&self) -> SourceFormat;

    /// What the analyses need to know of windows of this format (input ids recorded, advice
    /// when records go missing, its name).
    fn facts(&self) -> &'static FormatFacts;

    /// File names a directory search collects for this format (`manifest.json`, `dump.json`).
    fn file_names(&self) -> &'static [&'static str];

    /// Files beside a dump file that reading it also opens (msprobe's `construct.json` and
    /// `stack.json`), by name in the same directory: a copy of a dump (the remote mirror)
    /// must hold them too. Saved tensors and input sets are not among them.
    fn companion_names(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether [`Format::read`] computes statistics from the saved tensor files a window
    /// names ([`Format::statistics_files`] lists them), rather than reading them from the file.
    fn statistics_from_tensor_files(&self) -> bool {
        false
    }

    /// The saved tensor files that [`Format::read`] computes the statistics of the window in
    /// `bytes` (read from `path`) from, resolved inside the window directory: none for a
    /// format that records its statistics, every file a windowed manifest names. A copy of
    /// a dump (the remote mirror) fetches them before the window is read. Never reads them.
    fn statistics_files(&self, path: &Path, bytes: &[u8]) -> Vec<PathBuf> {
        let _ = (path, bytes);
        Vec::new()
    }

    /// Whether this format reads `path`, judged from its file name and its first
    /// [`super::HEAD_BYTES`] bytes (`head`, shorter for a shorter file). The first format of
    /// [`super::REGISTRY`] that claims a file reads it.
    fn claims(&self, path: &Path, head: &[u8]) -> bool;

    /// Reads one file's bytes into one window with the warnings a user should see. A file
    /// cut short keeps what it holds, with a warning; only a file that holds no window at all
    /// is an error. The checks every window gets (`crate::model::ingest::check_window`) are not applied here.
    ///
    /// # Errors
    /// [`FormatError`] naming `path`, the byte offset where known, and the cause.
    fn read(&self, path: &Path, bytes: &[u8]) -> Result<(Window, Vec<Warning>), FormatError>;

    /// [`Format::read`], with the other files it reads (a windowed manifest's saved tensors)
    /// read under `map`: [`MapChoice::Never`] for a watched window, whose files another
    /// process may still rewrite. A format that reads no other file reads as [`Format::read`].
    ///
    /// # Errors
    /// As [`Format::read`].
    fn read_with(
        &self,
        path: &Path,
        bytes: &[u8],
        map: MapChoice,
    ) -> Result<(Window, Vec<Warning>), FormatError> {
        let _ = map;
        self.read(path, bytes)
    }
}

/// Why one file could not be read as a window. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// A probe manifest's header is broken, of another format or another schema version.
    #[error(transparent)]
    Probe(#[from] ManifestError),
    /// The file could not be opened or read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// An msprobe dump.json that holds no window.
    #[error("{path}: {cause}")]
    Msprobe {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        cause: MsprobeError,
    },
    /// A windowed manifest that holds no window.
    #[error("{path}: {cause}")]
    Windowed {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        cause: WindowedError,
    },
}

impl FormatError {
    /// Bytes from the start of the file to the problem, where the format knows one place.
    pub fn offset(&self) -> Option<u64> {
        match self {
            FormatError::Probe(e) => e.offset(),
            FormatError::Msprobe { cause, .. } => cause.offset(),
            FormatError::Io { .. } | FormatError::Windowed { .. } => None,
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            FormatError::Probe(e) => e.path(),
            FormatError::Io { path, .. }
            | FormatError::Msprobe { path, .. }
            | FormatError::Windowed { path, .. } => path,
        }
    }
}
