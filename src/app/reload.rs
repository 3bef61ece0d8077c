//! Installing a new version of the open captures in place (what watch mode calls): the user
//! keeps their rank, window, stage and scroll position where those still exist.

use std::path::PathBuf;

use super::{App, Focus, Loaded, Session};

/// Where the user is, in terms that survive a reload: names, not indices.
struct Place {
    rank: u32,
    /// The source of the window's A manifest, which names the window across versions.
    source: PathBuf,
    /// The window's position among its rank's windows, for when the source changed.
    nth_of_rank: usize,
    /// The selected row's `stage#occurrence`.
    key: Option<String>,
    /// The selected row's index, for when its stage is gone.
    selected: usize,
    offset: usize,
}

impl App {
    /// Installs `session`, a new version of the open captures, keeping the user's place:
    /// the same rank and window (by its A manifest's source, else by its position among the
    /// rank's windows), the same stage (by `stage#occurrence`) and the same scroll offset,
    /// each where it still exists. Fallbacks: a window that is gone → the window a fresh
    /// open would choose; a stage that is gone → the row at the same position (clamped), the
    /// offset kept, and the message says so. Kept tensor comparisons, a running one, the
    /// search and the panels stay as they are. Without an open capture, the same as a first
    /// install.
    pub fn reload(&mut self, session: Session) {
        let place = self.place();
        self.install_loaded(Loaded::analyse(session));
        let Some(place) = place else {
            let start = self.diverging_window().unwrap_or(0);
            self.select_window(start);
            return;
        };
        let loaded = self.loaded.as_ref().expect("just installed");
        let same_rank = |i: &usize| loaded.windows[*i].rank == place.rank;
        let indices = || (0..loaded.windows.len()).filter(same_rank);
        let window = indices()
            .find(|&i| loaded.session.a.windows[loaded.windows[i].a].source == place.source)
            .or_else(|| indices().nth(place.nth_of_rank));
        let Some(window) = window else {
            let start = self.diverging_window().unwrap_or(0);
            self.select_window(start);
            self.message = Some(format!(
                "rank {} is not in the reloaded capture",
                place.rank
            ));
            return;
        };
        self.select_window(window);
        if self.rows.is_empty() {
            return;
        }
        let found = place
            .key
            .as_ref()
            .and_then(|key| self.rows.iter().position(|r| &r.key == key));
        let max_offset = self.view_len().saturating_sub(self.view_height.max(1));
        self.offset = place.offset.min(max_offset);
        match found {
            Some(index) => self.select_near(index),
            None => {
                self.select(place.selected);
                if let Some(key) = place.key {
                    self.message = Some(format!("{key} is not in the reloaded capture"));
                }
            }
        }
        if self.alias_groups().is_empty() {
            self.focus = Focus::Timeline;
        }
        let members: usize = self
            .alias_groups()
            .iter()
            .map(|(_, g)| g.members.len())
            .sum();
        self.alias_selected = self.alias_selected.min(members.saturating_sub(1));
    }

    fn place(&self) -> Option<Place> {
        let loaded = self.loaded.as_ref()?;
        let choice = self.choice()?;
        Some(Place {
            rank: choice.rank,
            source: loaded.session.a.windows[choice.a].source.clone(),
            nth_of_rank: loaded.windows[..self.window]
                .iter()
                .filter(|w| w.rank == choice.rank)
                .count(),
            key: self.row().map(|r| r.key.clone()),
            selected: self.selected,
            offset: self.offset,
        })
    }
}
