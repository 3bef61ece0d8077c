//! dumpview's own probe manifest (docs/manifest.md, schema version 1): header constants, the
//! errors of reading one, and the parser ([`parse`], with a line-by-line fast path in `line`).

use std::path::{Path, PathBuf};

use crate::model::dump::{FormatFacts, SourceFormat, Warning, Window};
use crate::model::formats::{Format, FormatError};

/// The manifest file name the probe writes (a windowed dump's has the same name, told apart by
/// its content).
pub const MANIFEST_NAME: &str = "manifest.json";

/// The probe's facts: token ids recorded in `metadata.token_ids`, non-finite elements counted.
pub static FACTS: FormatFacts = FormatFacts {
    name: "dump_probe manifest",
    records_input_ids: true,
    counts_nonfinite: true,
    missing_data_advice: "In graph mode capture() inside the graph does not run at replay; only \
                          graph slots and code outside the graph are recorded.",
};

/// dumpview's probe manifest (assets/dump_probe.py, the native probe).
pub struct Probe;

impl Format for Probe {
    fn id(&self) -> SourceFormat {
        SourceFormat::Probe
    }
    fn facts(&self) -> &'static FormatFacts {
        &FACTS
    }
    fn file_names(&self) -> &'static [&'static str] {
        &[MANIFEST_NAME]
    }
    /// Anything the other formats do not claim: a file named on the command line is taken
    /// as it is, whatever its name, and its header says whether it is a manifest.
    fn claims(&self, _path: &Path, _head: &[u8]) -> bool {
        true
    }
    fn read(&self, path: &Path, bytes: &[u8]) -> Result<(Window, Vec<Warning>), FormatError> {
        let parsed = parse::parse_manifest(bytes, path)?;
        let mut warnings = Vec::new();
        if let Some(stop) = &parsed.stopped {
            warnings.push(Warning {
                file: path.to_path_buf(),
                message: format!("truncated or damaged: {stop}"),
            });
        }
        Ok((parsed.manifest, warnings))
    }
}

mod line;
pub mod parse;


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
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a JSON manifest of the expected shape.
    #[error("{path}: not a valid manifest: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The file is JSON but says it is something else.
    #[error("{path}: `format` is {found:?}, expected {FORMAT:?}")]
    Format { path: PathBuf, found: String },
    /// Written by a probe whose format this build does not know.
    #[error(
        "{path}: schema_version {found} is not supported (this dumpview reads {SCHEMA_VERSION})"
    )]
    Version { path: PathBuf, found: u64 },
    /// A header field every window needs is absent.
    #[error("{path}: required field `{field}` is missing")]
    Missing { path: PathBuf, field: &'static str },
    /// The file is cut short or broken after its header (strict parsing only;
    /// [`crate::model::ingest`] keeps the records before the break instead).
    #[error("{path}: {stop}")]
    Truncated {
        path: PathBuf,
        stop: parse::Stop,
    },
}


impl ManifestError {
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

/// Reads and parses the manifest at `path`.
///
/// # Errors
/// [`ManifestError`] naming `path`: unreadable file, invalid JSON or field
/// types (with line and column), wrong `format`, unknown `schema_version`.
pub fn read_file(path: &Path) -> Result<Window, ManifestError> {
    let bytes = std::fs::read(path).map_err(|source| ManifestError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    from_slice(&bytes, path)
}

/// Parses complete manifest bytes; `path` names the source in errors.
///
/// # Errors
/// As [`read_file`], plus [`ManifestError::Truncated`] when the
/// bytes stop being a manifest after the header.
pub fn from_slice(bytes: &[u8], path: &Path) -> Result<Window, ManifestError> {
    let parsed = parse::parse_manifest(bytes, path)?;
    match parsed.stopped {
        None => Ok(parsed.manifest),
        Some(stop) => Err(ManifestError::Truncated {
            path: path.to_path_buf(),
            stop,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Window, ManifestError> {
        from_slice(text.as_bytes(), Path::new("m.json"))
    }

    #[test]
    fn unknown_version_is_named() {
        let err = parse(r#"{"format":"dumpview.manifest","schema_version":7}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "m.json: schema_version 7 is not supported (this dumpview reads 1)"
        );
    }

    #[test]
    fn wrong_format_is_named() {
        let err = parse(r#"{"format":"other","schema_version":1}"#).unwrap_err();
        assert!(
            err.to_string().starts_with("m.json: `format` is \"other\""),
            "{err}"
        );
    }

    #[test]
    fn wrong_type_names_line_and_column() {
        let text = "{\"format\":\"dumpview.manifest\",\"schema_version\":1,\n\"label\":3}";
        let err = parse(text).unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with("m.json: not a valid manifest: invalid type"),
            "{message}"
        );
        assert!(message.contains("line 2"), "{message}");
    }
}
