//! The windowed reader behind the [`Format`] contract.

use std::path::{Path, PathBuf};

use super::FACTS;
use super::is_windowed;
use crate::model::dump::{FormatFacts, SourceFormat, Warning, Window};
use crate::model::formats::contract::{Format, FormatError};
use crate::model::formats::probe::MANIFEST_NAME;
use crate::model::io::MapChoice;

/// Windowed mega-kernel dumps (seed 003): `rank_R/window_NNNN/manifest.json`.
pub struct Windowed;

impl Format for Windowed {
    fn id(&self) -> SourceFormat {
        SourceFormat::Windowed
    }
    fn facts(&self) -> &'static FormatFacts {
        &FACTS
    }
    fn file_names(&self) -> &'static [&'static str] {
        &[MANIFEST_NAME]
    }
    /// By content ([`is_windowed`]): its manifests share the probe's file name.
    fn claims(&self, _path: &Path, head: &[u8]) -> bool {
        is_windowed(head)
    }
    fn statistics_from_tensor_files(&self) -> bool {
        true
    }
    /// Every tensor file the manifest names (its records' statistics come from them).
    fn statistics_files(&self, path: &Path, bytes: &[u8]) -> Vec<PathBuf> {
        super::statistics_files(path, bytes)
    }
    fn read(&self, path: &Path, bytes: &[u8]) -> Result<(Window, Vec<Warning>), FormatError> {
        self.read_with(path, bytes, MapChoice::Lazy)
    }
    fn read_with(
        &self,
        path: &Path,
        bytes: &[u8],
        map: MapChoice,
    ) -> Result<(Window, Vec<Warning>), FormatError> {
        super::load_window_with(path, bytes, map).map_err(|cause| FormatError::Windowed {
            path: path.to_path_buf(),
            cause,
        })
    }
}
