//! [`Dump`]: one loaded capture, all windows of all ranks.

use super::{Warning, Window};

/// One loaded capture: all windows of all ranks found under the inputs given.
#[derive(Debug, Clone, Default)]
pub struct Dump {
    /// Sorted by (rank, match, occurrence, source path).
    pub windows: Vec<Window>,
    /// What the user should know about the inputs, in file order.
    pub warnings: Vec<Warning>,
}

/// Which windows of a new version of a capture may differ from the previous version's: what
/// ingest knows from the files it read again (`ingest::RefreshStats::changed`), so that an
/// analysis of the new version takes over what it computed for the rest without comparing
/// windows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Changes {
    /// Not known: each window is compared with the previous version's at its source.
    #[default]
    Unknown,
    /// Only the windows read from these files (their `Window::source`) may differ; every
    /// other window is the previous version's window at the same source, unchanged.
    Sources(std::collections::HashSet<std::path::PathBuf>),
}

impl Changes {
    /// Whether the window read from `source` may differ from the previous version's; `None`
    /// when that is not known ([`Changes::Unknown`]).
    pub fn may_differ(&self, source: &std::path::Path) -> Option<bool> {
        match self {
            Changes::Unknown => None,
            Changes::Sources(changed) => Some(changed.contains(source)),
        }
    }
}

/// One window of a loaded capture, named by its place in [`Dump::windows`] (the one window
/// order: rank, match, occurrence, source path). The one internal window identity: analyses
/// name windows by it, never by comparing path strings. Valid for the `Dump` it was taken
/// from (a reload may order windows anew: an analysis of the new version gives new ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WindowId(pub usize);

impl Dump {
    /// The window `id` names; `None` when it names none (an id of another capture).
    pub fn window(&self, id: WindowId) -> Option<&Window> {
        self.windows.get(id.0)
    }

    /// Leaves out of every window the records whose stage matches `regex` (uninitialized
    /// outputs of `empty`, receive buffers, masks), so no analysis sees them; one note per
    /// window that lost records names `pattern`, the count and the stages. Returns the number
    /// of records left out.
    pub fn ignore_stages(&mut self, regex: &regex::Regex, pattern: &str) -> usize {
        let mut total = 0;
        for window in &mut self.windows {
            let mut stages: Vec<String> = Vec::new();
            let before = window.records.len();
            window.records.retain(|r| {
                let ignored = regex.is_match(&r.stage);
                if ignored && !stages.iter().any(|s| *s == *r.stage) {
                    stages.push(r.stage.to_string());
                }
                !ignored
            });
            let left_out = before - window.records.len();
            if left_out > 0 {
                total += left_out;
                self.warnings.push(Warning::note(
                    window.source.clone(),
                    format!(
                        "--ignore {pattern:?}: {left_out} record{} left out of the search (stage{} {})",
                        if left_out == 1 { "" } else { "s" },
                        if stages.len() == 1 { "" } else { "s" },
                        stages.join(", ")
                    ),
                ));
            }
        }
        total
    }
}
