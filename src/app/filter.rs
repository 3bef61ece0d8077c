//! The filter (`a`): a view of the timeline that shows only rows with a finding
//! ([`super::Row::kept_by_filter`]). It is a view state: `rows` stay whole (the strip plot,
//! the overview, the report and `n`/`N` see every row); `visible` maps view positions to
//! rows, and the selection always stays on a row in view.

use super::App;

impl App {
    /// `a`: shows only the rows with a finding, or all rows again. The selected row stays
    /// selected when it is kept, else the nearest kept row after it (else before it) is.
    pub(super) fn toggle_filter(&mut self) {
        if self.loaded.is_none() {
            return;
        }
        let current = self.row().map(|_| self.row_index(self.selected));
        if self.filter {
            self.filter = false;
            self.visible = None;
            self.message = Some(format!("all {} rows shown", self.rows.len()));
        } else {
            let kept = self.rows.iter().filter(|r| r.kept_by_filter()).count();
            if kept == 0 {
                self.message = Some(format!(
                    "no row has a finding: the filter would hide all {}",
                    self.rows.len()
                ));
                return;
            }
            self.filter = true;
            self.refilter();
            let what = if self.diffing() {
                "agreeing pairs"
            } else {
                "finite records outside stride conflicts"
            };
            self.message = Some(format!(
                "filter: {} {what} hidden, {kept} shown (a shows all)",
                self.rows.len() - kept,
            ));
        }
        self.select_near(current.unwrap_or(0));
    }

    /// Rebuilds the view of the current rows (after the rows changed: another window, a
    /// reload). Without the filter every row is in view.
    pub(super) fn refilter(&mut self) {
        self.visible = self.filter.then(|| {
            self.rows
                .iter()
                .enumerate()
                .filter(|(_, r)| r.kept_by_filter())
                .map(|(i, _)| i)
                .collect()
        });
    }

    /// The view position of row `index` (an index into `rows`), if it is in view.
    pub fn position_of(&self, index: usize) -> Option<usize> {
        match &self.visible {
            None => (index < self.rows.len()).then_some(index),
            Some(visible) => visible.binary_search(&index).ok(),
        }
    }

    /// Selects row `index` (an index into `rows`). A row the filter hides is shown by
    /// turning the filter off, and the message says so: a jump the user asked for (an
    /// alias member) lands where it was asked to.
    pub fn select_row(&mut self, index: usize) {
        if self.position_of(index).is_none() && self.filter && index < self.rows.len() {
            self.filter = false;
            self.visible = None;
            self.message = Some(format!(
                "filter off: {} has no finding of its own",
                self.rows[index].key
            ));
        }
        if let Some(position) = self.position_of(index) {
            self.select(position);
        }
    }

    /// Selects the row in view nearest to row `index`: itself when in view, else the next
    /// one after it, else the last one before it.
    pub(super) fn select_near(&mut self, index: usize) {
        let position = match &self.visible {
            None => index,
            Some(visible) => match visible.binary_search(&index) {
                Ok(p) => p,
                Err(p) if p < visible.len() => p,
                Err(p) => p.saturating_sub(1),
            },
        };
        self.select(position);
    }
}
