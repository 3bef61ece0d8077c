//! What the workbench has open: one capture (scan mode) or two (diff mode), as owned data.
//!
//! Sessions are built by the runtime (`crate::runtime::load`), which reads the files; the
//! app only ever receives the result.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;

use crate::model::analysis::Analysis;
use crate::model::analysis::diagnosis::{Diagnosis, diagnose};
use crate::model::dump::Dump;
use crate::model::dump::Window;

/// How an embedded example's manifest sources start (`embedded:assets/examples/...`).
pub const EMBEDDED: &str = "embedded:";

/// The open captures and how to name them.
#[derive(Debug, Clone)]
pub struct Session {
    /// Shown in the header and used to name exported reports.
    pub title: String,
    /// The input format, shown in the header.
    pub format: String,
    /// Capture A (the one under scan, or the compared one in diff mode).
    pub a: Dump,
    /// Capture B, the reference, in diff mode.
    pub b: Option<Dump>,
    /// Scans of A and B and their diff, computed once when the session is made (on the
    /// loading thread, never the UI's); every panel and the exported report render from it.
    pub analysis: Analysis,
    /// The findings of [`Session::analysis`] connected into one answer
    /// ([`crate::model::analysis::diagnosis`]), computed with it on the same thread and
    /// recomputed only when it is: the banner and the `D` walk read it.
    pub diagnosis: Diagnosis,
    /// For an embedded example: the checkout the binary was built from, when its
    /// `assets/examples/` still holds the same manifests byte for byte. The embedded
    /// manifests name their saved tensors relative to a window directory that exists only
    /// there (tensors are memory-mapped from files, never from the binary).
    pub checkout: Option<PathBuf>,
    /// For an embedded example without a [`Session::checkout`]: the pair's directory in the
    /// checkout the binary was built from, when it still holds the pair but its manifests
    /// differ from the embedded ones (the examples were regenerated since the build). Its
    /// saved tensors belong to that other run, so they are not compared with the embedded
    /// statistics; the user is told to open the directory instead.
    pub checkout_differs: Option<PathBuf>,
    /// The saved tensor files found on disk when the session was built.
    pub saved: SavedTensors,
    /// The captures as opened, on this machine (A's, then B's; a remote capture's mirror
    /// root); empty for an embedded example and a watch. A case matrix may not be written
    /// inside one of them.
    pub roots: Vec<PathBuf>,
    /// Where each window directory of a remote capture that holds input sets lies on its host,
    /// as a SOURCE (`gpu1:/data/run/rank0/match1-occ1`, `ssh://gpu1:2222/...`): what the
    /// replay dialog shows instead of the local mirror's path. Empty for local captures.
    pub remote_dirs: std::collections::HashMap<PathBuf, String>,
}

/// Which capture of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Capture A.
    A,
    /// Capture B.
    B,
}

/// The saved tensor file of each stage that has one, per side and window: the files a
/// record names that resolve inside their window directory and exist, as found by the
/// loader (`crate::runtime::load::with_saved_tensors`). A stage without an entry has no usable
/// file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SavedTensors {
    /// Per window of A (same indices as `Dump::windows`): `stage#occurrence` to its file.
    pub a: Vec<HashMap<String, PathBuf>>,
    /// Per window of B.
    pub b: Vec<HashMap<String, PathBuf>>,
}

impl SavedTensors {
    /// The saved tensor file of `key` (`stage#occurrence`) in window `window` of `side`.
    pub fn get(&self, side: Side, window: usize, key: &str) -> Option<&PathBuf> {
        let windows = match side {
            Side::A => &self.a,
            Side::B => &self.b,
        };
        windows.get(window)?.get(key)
    }
}

impl Session {
    /// Recomputes [`Session::analysis`] and [`Session::diagnosis`] from `a` and `b` under the
    /// default tolerances, after they were changed in place (tests and tools that build a
    /// session by hand). The runtime never calls this on the UI thread: it analyses while
    /// loading.
    pub fn reanalyse(&mut self) {
        self.analysis = Analysis::compute(&self.a, self.b.as_ref(), &Default::default());
        self.diagnosis = diagnose(&self.a, self.b.as_ref(), &self.analysis);
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
