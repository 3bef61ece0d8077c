//! The registry: every format dumpview reads, and the look-ups over it.

use std::path::Path;

use crate::model::formats::contract::Format;
use crate::model::formats::{msprobe, probe, windowed};

/// Every format, in the order they are asked to claim a file: the specific ones first, the
/// probe manifest (which claims anything else) last.
pub static REGISTRY: [&dyn Format; 3] = [&msprobe::Msprobe, &windowed::Windowed, &probe::Probe];

/// The format that reads `path` (never `None` with today's registry: the probe claims the rest).
pub fn claiming(path: &Path, head: &[u8]) -> Option<&'static dyn Format> {
    REGISTRY.iter().copied().find(|f| f.claims(path, head))
}

/// Every file name a directory search collects, over all formats.
pub fn file_names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().flat_map(|f| f.file_names().iter().copied())
}

/// Every file name a copy of a dump needs for loading it: [`file_names`] and each format's
/// [`Format::companion_names`], without repeats (`manifest.json`, `dump.json`,
/// `construct.json`, `stack.json`).
pub fn mirrored_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for name in REGISTRY
        .iter()
        .flat_map(|f| f.file_names().iter().chain(f.companion_names()).copied())
    {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}
