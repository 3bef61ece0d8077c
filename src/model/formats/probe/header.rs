//! What identifies a probe manifest and what reading one can fail with: the file name, the
//! `format` and `schema_version` values, the format's facts, and [`ManifestError`].

use std::fmt;
use std::path::{Path, PathBuf};

use crate::model::dump::FormatFacts;

/// The manifest file name the probe writes (a windowed dump's has the same name, told apart by
/// its content).
pub const MANIFEST_NAME: &str = "manifest.json";

/// The probe's facts: token ids recorded in `metadata.token_ids`, non-finite elements counted.
pub static FACTS: FormatFacts = FormatFacts {
    name: "dump_probe manifest",
    records_input_ids: true,
    missing_data_advice: "The two captures recorded different sets of stages.",
    probe_conventions: true,
};

/// The only `schema_version` this build reads.
pub const SCHEMA_VERSION: u32 = 1;
/// The value of the manifest's `format` field.
pub const FORMAT: &str = "dumpview.manifest";

/// Why a manifest could not be read. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be opened or read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The manifest's path.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a JSON manifest of the expected shape.
    #[error("{path}: not a valid manifest: {source}")]
    Json {
        /// The manifest's path.
        path: PathBuf,
        /// serde_json's error, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// The file is JSON but says it is something else.
    #[error("{path}: `format` is {found:?}, expected {FORMAT:?}")]
    Format {
        /// The manifest's path.
        path: PathBuf,
        /// The `format` value the file holds instead of [`FORMAT`].
        found: String,
    },
    /// Written by a probe whose format this build does not know.
    #[error(
        "{path}: schema_version {found} is not supported (this dumpview reads {SCHEMA_VERSION})"
    )]
    Version {
        /// The manifest's path.
        path: PathBuf,
        /// The `schema_version` the file holds (this build reads only [`SCHEMA_VERSION`]).
        found: u64,
    },
    /// A header field every window needs is absent.
    #[error("{path}: required field `{field}` is missing")]
    Missing {
        /// The manifest's path.
        path: PathBuf,
        /// The absent header field, as named in the manifest (`label`, `rank`, …).
        field: &'static str,
    },
    /// The file is cut short or broken after its header (strict parsing only;
    /// [`crate::model::ingest`] keeps the records before the break instead).
    #[error("{path}: {stop}")]
    Truncated {
        /// The manifest's path.
        path: PathBuf,
        /// Where (byte offset) and why parsing stopped, and how many records came before.
        stop: Stop,
    },
}

impl ManifestError {
    /// Bytes from the start of the file to the problem, where known (a JSON type error is
    /// placed by line and column in its message instead).
    pub fn offset(&self) -> Option<u64> {
        match self {
            ManifestError::Truncated { stop, .. } => Some(stop.byte_offset),
            _ => None,
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            ManifestError::Io { path, .. }
            | ManifestError::Json { path, .. }
            | ManifestError::Format { path, .. }
            | ManifestError::Version { path, .. }
            | ManifestError::Missing { path, .. }
            | ManifestError::Truncated { path, .. } => path,
        }
    }
}

/// Where and why parsing stopped early; the records before it were kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    /// Byte offset of the problem from the start of the file.
    pub byte_offset: u64,
    /// serde_json's description, e.g. "EOF while parsing a list".
    pub reason: String,
    /// Records parsed and kept before the problem.
    pub kept_records: usize,
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stops being a valid manifest at byte {} ({}); kept the {} records before it",
            self.byte_offset, self.reason, self.kept_records
        )
    }
}
