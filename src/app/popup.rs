//! The popup stack: which popups are open, in the one order that both routes the keys
//! ([`super::update`]) and stacks the overlays (`ui::draw`).
//!
//! Each popup keeps its own state where it always was (`App::help`, `App::tensor_popup`,
//! `App::replay_dialog`, …: tests and the drawing read them there); what this module adds is
//! the order, written once in [`Popup::ALL`], so that the popup that takes the keys is always
//! the one drawn on top.

use super::App;

/// One popup, prompt or overlay drawn over the panels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Popup {
    /// `p`: the replay dialog ([`App::replay_dialog`]); characters are its fields' text.
    ReplayDialog,
    /// `e`: the export prompt ([`App::export`]); characters are the path.
    Export,
    /// `c` on a replay's result: the case-matrix form ([`App::cases_form`]).
    CasesForm,
    /// `/`: the search prompt ([`App::search`]); drawn in the status bar, not over the panels.
    /// Keys it does not use go on to what is below it.
    SearchPrompt,
    /// `?`: the help overlay ([`App::help`]).
    Help,
    /// `w`: the load warnings view ([`App::warnings_open`]).
    Warnings,
    /// `T` or `b`: the token × stage view ([`App::token_view`]).
    Tokens,
    /// `t`: a tensor comparison's result ([`App::tensor_popup`]).
    TensorResult,
    /// A replay's result ([`App::replay_view`]).
    ReplayResult,
    /// The running replay's log ([`App::replay_job`]); Esc cancels it.
    ReplayLog,
    /// The case-matrix board, with a case's view over it ([`App::cases_board`]).
    CasesBoard,
    /// The running tensor comparison's gauge ([`App::tensor_job`]). It takes no keys: Esc
    /// cancels the comparison through the workbench behind it.
    TensorProgress,
}

impl Popup {
    /// Every popup, topmost first. The first open one that takes keys owns them
    /// ([`App::popup`]); the open ones are drawn from the last to the first, so the one that
    /// owns the keys is the one on top. The one place this order is written.
    pub const ALL: [Popup; 12] = [
        Popup::ReplayDialog,
        Popup::Export,
        Popup::CasesForm,
        Popup::SearchPrompt,
        Popup::Help,
        Popup::Warnings,
        Popup::Tokens,
        Popup::TensorResult,
        Popup::ReplayResult,
        Popup::ReplayLog,
        Popup::CasesBoard,
        Popup::TensorProgress,
    ];

    /// Whether this popup is open in `app`.
    pub fn is_open(self, app: &App) -> bool {
        match self {
            Popup::ReplayDialog => app.replay_dialog.is_some(),
            Popup::Export => app.export.is_some(),
            Popup::CasesForm => app.cases_form.is_some(),
            Popup::SearchPrompt => app.search.editing,
            Popup::Help => app.help,
            Popup::Warnings => app.warnings_open,
            Popup::Tokens => app.token_view.is_some(),
            Popup::TensorResult => app.tensor_popup.is_some(),
            Popup::ReplayResult => app.replay_view.is_some(),
            Popup::ReplayLog => app.replay_job.is_some(),
            Popup::CasesBoard => app.cases_board.as_ref().is_some_and(|b| b.open),
            // A result shown replaces the gauge of the comparison still running.
            Popup::TensorProgress => app.tensor_job.is_some() && app.tensor_popup.is_none(),
        }
    }

    /// Whether this popup owns the keys while it is the topmost open one.
    pub fn takes_keys(self) -> bool {
        self != Popup::TensorProgress
    }
}

impl App {
    /// The open popups, topmost first (reverse it to draw them).
    pub fn popups(&self) -> impl DoubleEndedIterator<Item = Popup> + '_ {
        Popup::ALL.into_iter().filter(|p| p.is_open(self))
    }

    /// The popup that owns the keys: the topmost open one that takes keys, if any.
    pub fn popup(&self) -> Option<Popup> {
        self.popups().find(|p| p.takes_keys())
    }

    /// The popup that owns the keys `above` passes on: the topmost open one below it.
    pub fn popup_below(&self, above: Popup) -> Option<Popup> {
        let below = Popup::ALL
            .iter()
            .position(|&p| p == above)
            .map_or(0, |i| i + 1);
        Popup::ALL[below..]
            .iter()
            .copied()
            .find(|p| p.takes_keys() && p.is_open(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_popup_is_listed_once() {
        for popup in Popup::ALL {
            assert_eq!(Popup::ALL.iter().filter(|&&p| p == popup).count(), 1);
        }
    }

    #[test]
    fn the_popup_that_owns_the_keys_is_the_one_drawn_last() {
        let mut app = App::loading(false);
        assert_eq!(app.popup(), None);
        app.help = true;
        app.warnings_open = true;
        app.search.editing = true;
        let open: Vec<Popup> = app.popups().collect();
        assert_eq!(
            open,
            [Popup::SearchPrompt, Popup::Help, Popup::Warnings],
            "topmost first"
        );
        assert_eq!(app.popup(), Some(Popup::SearchPrompt));
        let drawn: Vec<Popup> = app.popups().rev().collect();
        assert_eq!(drawn.last().copied(), app.popup(), "drawn bottom first");
        assert_eq!(app.popup_below(Popup::SearchPrompt), Some(Popup::Help));
        assert_eq!(app.popup_below(Popup::Warnings), None);
    }
}
