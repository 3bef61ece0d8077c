//! What the workbench has open: one capture (scan mode) or two (diff mode).

use std::path::{Path, PathBuf};

use crate::embedded::ExamplePair;
use crate::model::load::{Dump, LoadError, Progress, load, parse_with_warnings};

/// The open captures and how to name them.
#[derive(Debug, Clone)]
pub struct Session {
    /// Shown in the header and used to name exported reports.
    pub title: String,
    /// The input format, shown in the header.
    pub format: String,
    pub a: Dump,
    pub b: Option<Dump>,
}

impl Session {
    /// Loads one or two captures from disk (each a manifest file or a directory).
    ///
    /// # Errors
    /// The first input that cannot be loaded, named.
    pub fn open(
        a: &Path,
        b: Option<&Path>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Session, LoadError> {
        let dump_a = load(&[a.to_path_buf()], progress)?;
        let dump_b = match b {
            Some(b) => Some(load(&[b.to_path_buf()], progress)?),
            None => None,
        };
        let title = match b {
            Some(b) => format!("{} vs {}", a.display(), b.display()),
            None => a.display().to_string(),
        };
        Ok(Session {
            title,
            format: "dump_probe manifest".to_string(),
            a: dump_a,
            b: dump_b,
        })
    }

    /// An example pair embedded in the binary (the default when no file is given).
    ///
    /// # Errors
    /// Only if an embedded manifest fails to parse, which the test-suite rules out.
    pub fn embedded(pair: &ExamplePair) -> Result<Session, LoadError> {
        let side = |(source, bytes): &(String, &[u8])| -> Result<Dump, LoadError> {
            let (manifest, warnings) = parse_with_warnings(bytes, &PathBuf::from(source))?;
            Ok(Dump {
                windows: vec![manifest],
                warnings,
            })
        };
        Ok(Session {
            title: format!("example {}", pair.name),
            format: "dump_probe manifest (embedded example)".to_string(),
            a: side(&pair.a)?,
            b: Some(side(&pair.b)?),
        })
    }
}
