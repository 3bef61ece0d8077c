//! The probe manifest behind the [`Format`] contract.

use std::path::Path;

use super::header::{FACTS, MANIFEST_NAME};
use super::parse;
use crate::model::dump::{FormatFacts, SourceFormat, Warning, Window};
use crate::model::formats::contract::{Format, FormatError};

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
            warnings.push(Warning::lost(
                path.to_path_buf(),
                format!("truncated or damaged: {stop}"),
            ));
        }
        warnings.extend(
            parsed
                .repaired
                .iter()
                .map(|problem| Warning::lost(path.to_path_buf(), problem.to_string())),
        );
        warnings.extend(parsed.notes.to_warnings(path));
        Ok((parsed.manifest, warnings))
    }
}
