//! The msprobe reader behind the [`Format`] contract.

use std::path::Path;

use super::FACTS;
use super::MSPROBE_NAME;
use crate::model::dump::{FormatFacts, SourceFormat, Warning, Window};
use crate::model::formats::contract::{Format, FormatError};

/// msprobe (MindStudio probe) `dump.json` files.
pub struct Msprobe;

impl Format for Msprobe {
    fn id(&self) -> SourceFormat {
        SourceFormat::Msprobe
    }
    fn facts(&self) -> &'static FormatFacts {
        &FACTS
    }
    fn file_names(&self) -> &'static [&'static str] {
        &[MSPROBE_NAME]
    }
    /// Read beside every dump.json for the records' modules and call stacks.
    fn companion_names(&self) -> &'static [&'static str] {
        &["construct.json", "stack.json"]
    }
    /// By name: msprobe always writes `dump.json`, and no other format uses that name.
    fn claims(&self, path: &Path, _head: &[u8]) -> bool {
        path.file_name().is_some_and(|n| n == MSPROBE_NAME)
    }
    fn read(&self, path: &Path, bytes: &[u8]) -> Result<(Window, Vec<Warning>), FormatError> {
        super::load_window(path, bytes).map_err(|cause| FormatError::Msprobe {
            path: path.to_path_buf(),
            cause,
        })
    }
}
