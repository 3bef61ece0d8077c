//! Watch mode in the workbench: a new version of the followed captures arrives from the
//! runtime's watch thread ([`super::Action::Watched`]) and is installed in place, keeping the
//! user's place; each source's state is kept for the header.

use crate::model::watch::{FetchProgress, SourceState};

use super::{App, Session};

/// What the header says about a watch.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct WatchStatus {
    /// Each followed source: its name, its last state and why.
    pub sources: Vec<(String, Option<SourceState>, String)>,
    /// How many versions of the capture have been installed.
    pub updates: u64,
    /// Each source's background fetch of saved tensors while one runs.
    pub fetching: Vec<Option<FetchProgress>>,
}

impl WatchStatus {
    /// A watch of `names`, nothing read yet.
    pub fn of(names: Vec<String>) -> WatchStatus {
        WatchStatus {
            fetching: vec![None; names.len()],
            sources: names
                .into_iter()
                .map(|n| (n, None, String::new()))
                .collect(),
            updates: 0,
        }
    }

    /// The header's words: `watch: on · 2 sources · update 5` (with `· fetching tensor files
    /// 12/40 (3.1 MB) for 2 windows` while a background fetch runs), or the first lost source.
    pub fn describe(&self) -> (String, bool) {
        if let Some((name, _, reason)) = self
            .sources
            .iter()
            .find(|(_, s, _)| matches!(s, Some(SourceState::Lost | SourceState::Retrying)))
        {
            return (format!("watch: LOST {name}: {reason} (retrying)"), false);
        }
        let n = self.sources.len();
        let mut text = format!(
            "watch: on · {n} source{} · update {}",
            if n == 1 { "" } else { "s" },
            self.updates
        );
        for progress in self.fetching.iter().flatten() {
            text.push_str(" · ");
            text.push_str(&progress.describe());
        }
        (text, true)
    }
}

impl WatchStatus {
    /// One line per source for the screen shown before the first reading:
    /// `ssh://gpu0/dumps: connected: no dump files yet; waiting`, or `…: connecting`.
    pub fn waiting_lines(&self) -> Vec<String> {
        self.sources
            .iter()
            .zip(&self.fetching)
            .map(
                |((name, state, reason), fetching)| match (state, fetching) {
                    (_, Some(progress)) => format!("{name}: {}", progress.describe()),
                    (None, None) => format!("{name}: connecting"),
                    (Some(state), None) => {
                        let state = serde_json::to_value(state)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default();
                        format!("{name}: {state}: {reason}")
                    }
                },
            )
            .collect()
    }
}

impl App {
    /// Installs a new version of the followed captures (the first one as a first open).
    pub fn watched(&mut self, session: Session) {
        if self.loaded.is_some() {
            self.reload(session);
        } else {
            self.install(session);
        }
        if let Some(status) = &mut self.watch {
            status.updates += 1;
        }
    }

    /// Records that source `index` is in `state` for `reason`.
    pub fn watch_source(&mut self, index: usize, state: SourceState, reason: String) {
        if let Some(source) = self.watch.as_mut().and_then(|w| w.sources.get_mut(index)) {
            source.1 = Some(state);
            source.2 = reason;
        }
    }

    /// Records how far source `index`'s background fetch has got (a finished one is no
    /// longer shown).
    pub fn watch_fetching(&mut self, index: usize, progress: FetchProgress) {
        if let Some(slot) = self.watch.as_mut().and_then(|w| w.fetching.get_mut(index)) {
            *slot = (!progress.finished()).then_some(progress);
        }
    }
}
