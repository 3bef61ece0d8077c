//! dumpview's own probe manifest (docs/manifest.md, schema version 1): header constants, the
//! errors of reading one, and the parser ([`parse`], with a line-by-line fast path in `line`).

use std::path::Path;

use crate::model::dump::Window;

mod annotations;
mod format;
mod header;
mod line;
pub mod parse;
mod rows;
mod writer_notes;

pub use annotations::COLLECTIVES;
pub use format::Probe;
pub use writer_notes::{SkippedCapture, WriterNotes};

pub use header::{FACTS, FORMAT, MANIFEST_NAME, ManifestError, SCHEMA_VERSION};

/// Reads and parses the manifest at `path`.
///
/// # Errors
/// [`ManifestError`] naming `path`: unreadable file, invalid JSON or field
/// types (with line and column), wrong `format`, unknown `schema_version`.
pub fn read_file(path: &Path) -> Result<Window, ManifestError> {
    let bytes =
        crate::model::io::FileBytes::read(path, true).map_err(|source| ManifestError::Io {
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
