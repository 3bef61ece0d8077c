//! What the workbench has open: one capture (scan mode) or two (diff mode).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use crate::embedded::ExamplePair;
use crate::model::analysis::Analysis;
use crate::model::analysis::compare::Tolerances;
use crate::model::dump::Dump;
use crate::model::ingest::{LoadError, Progress, load, read_window};
use crate::model::dump::Window;

/// How an embedded example's manifest sources start (`embedded:assets/examples/...`).
const EMBEDDED: &str = "embedded:";

/// The open captures and how to name them.
#[derive(Debug, Clone)]
pub struct Session {
    /// Shown in the header and used to name exported reports.
    pub title: String,
    /// The input format, shown in the header.
    pub format: String,
    pub a: Dump,
    pub b: Option<Dump>,
    /// Scans of A and B and their diff, computed once when the session is made (on the
    /// loading thread, never the UI's).
    pub analysis: Analysis,
    /// For an embedded example: the checkout the binary was built from, when its
    /// `assets/examples/` still holds the same manifests byte for byte. The embedded
    /// manifests name their saved tensors relative to a window directory that exists only
    /// there (tensors are memory-mapped from files, never from the binary).
    pub checkout: Option<PathBuf>,
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
            format: format_names(&dump_a, dump_b.as_ref()),
            analysis: Analysis::compute(&dump_a, dump_b.as_ref(), &Tolerances::default()),
            a: dump_a,
            b: dump_b,
            checkout: None,
        })
    }

    /// An example pair embedded in the binary (the default when no file is given).
    ///
    /// # Errors
    /// Only if an embedded manifest fails to parse, which the test-suite rules out.
    pub fn embedded(pair: &ExamplePair) -> Result<Session, LoadError> {
        let side = |(source, bytes): &(String, &[u8])| -> Result<Dump, LoadError> {
            let (manifest, warnings) = read_window(bytes, &PathBuf::from(source))?;
            Ok(Dump {
                windows: vec![manifest],
                warnings,
            })
        };
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let same_on_disk = |(source, bytes): &(String, &[u8])| {
            source
                .strip_prefix(EMBEDDED)
                .and_then(|rel| std::fs::read(root.join(rel)).ok())
                .is_some_and(|disk| disk == *bytes)
        };
        let (a, b) = (side(&pair.a)?, side(&pair.b)?);
        Ok(Session {
            title: format!("example {}", pair.name),
            format: "dump_probe manifest (embedded example)".to_string(),
            analysis: Analysis::compute(&a, Some(&b), &Tolerances::default()),
            a,
            b: Some(b),
            checkout: (same_on_disk(&pair.a) && same_on_disk(&pair.b)).then(|| root.to_path_buf()),
        })
    }

    /// `window` as it lies on disk, so paths relative to its window directory resolve:
    /// itself for a capture opened from disk; for an embedded example, a copy whose source
    /// is the checkout's manifest; `None` for an embedded example without a checkout.
    pub fn on_disk<'m>(&self, window: &'m Window) -> Option<Cow<'m, Window>> {
        let source = window.source.to_str().unwrap_or_default();
        let Some(rel) = source.strip_prefix(EMBEDDED) else {
            return Some(Cow::Borrowed(window));
        };
        let mut copy = window.clone();
        copy.source = self.checkout.as_ref()?.join(rel);
        Some(Cow::Owned(copy))
    }
}

/// The formats of the open captures, for the header: `msprobe dump`, or
/// `dump_probe manifest vs msprobe dump` when the two differ.
fn format_names(a: &Dump, b: Option<&Dump>) -> String {
    let names = |d: &Dump| {
        let mut names: Vec<&str> = d.windows.iter().map(|w| w.facts.name).collect();
        names.sort_unstable();
        names.dedup();
        names.join(" + ")
    };
    match b.map(names) {
        Some(nb) if nb != names(a) => format!("{} vs {nb}", names(a)),
        _ => names(a),
    }
}
