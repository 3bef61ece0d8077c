//! The one keymap: which key does what, with the words the status bar and the help overlay
//! show for it. The runtime dispatches key presses through [`action_for`]; `ui::status` draws
//! [`status_hints`] and `ui::help` draws [`help_lines`], so a key added here appears in all
//! three places at once.
//!
//! Context decides first: while the search prompt, the export prompt or the replay dialog
//! is open ([`Mode::Search`], [`Mode::Export`], [`Mode::Replay`]) characters are text, not
//! commands. The help, the load warnings view and the tensor result popup are
//! modal in [`super::update`], which keeps the keys each uses and drops the others.

use super::{Action, App, Focus, Popup};

/// A key press, as the keymap sees it (no terminal types: the runtime translates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    /// A printable character (shifted letters arrive as themselves: `G`, `N`).
    Char(char),
    /// A character typed with Ctrl held.
    Ctrl(char),
    /// Arrow up.
    Up,
    /// Arrow down.
    Down,
    /// Arrow left.
    Left,
    /// Arrow right.
    Right,
    /// Page up.
    PageUp,
    /// Page down.
    PageDown,
    /// Home.
    Home,
    /// End.
    End,
    /// Tab.
    Tab,
    /// Enter.
    Enter,
    /// Escape.
    Esc,
    /// Backspace.
    Backspace,
}

/// Which keys are live: the prompts take text, everything else takes commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Commands ([`BINDINGS`]).
    Normal,
    /// Typing a search pattern ([`SEARCH`], any other character is text).
    Search,
    /// Typing the export path ([`EXPORT`], any other character is text).
    Export,
    /// Filling in the replay dialog ([`REPLAY`], any other character is text).
    Replay,
    /// Filling in the case-matrix form ([`CASES_FORM`], any other character is text).
    CasesForm,
    /// The case-matrix board ([`CASES_BOARD`]).
    CasesBoard,
    /// The token × stage view ([`TOKENS`]).
    Tokens,
    /// The module tree in the timeline pane, with the focus there ([`TREE`], then
    /// [`BINDINGS`]).
    Tree,
}

impl Mode {
    /// The mode `app` is in.
    pub fn of(app: &App) -> Mode {
        // The popup that owns the keys decides, in the one order of `Popup::ALL`.
        match app.popup() {
            Some(Popup::Export) => Mode::Export,
            Some(Popup::ReplayDialog) => Mode::Replay,
            Some(Popup::CasesForm) => Mode::CasesForm,
            Some(Popup::SearchPrompt) => Mode::Search,
            Some(Popup::CasesBoard) => Mode::CasesBoard,
            Some(Popup::Tokens) => Mode::Tokens,
            None | Some(Popup::TensorProgress)
                if app.tree.is_some() && app.focus == Focus::Timeline =>
            {
                Mode::Tree
            }
            _ => Mode::Normal,
        }
    }
}

/// One row of the keymap: keys, what they do, and how the screen names them.
#[derive(Debug)]
pub struct Binding {
    /// The keys that trigger `action` (none: a row that only documents, such as the mouse).
    pub keys: &'static [Key],
    /// What the keys do; `None` only for documenting rows.
    pub action: Option<Action>,
    /// The status bar's hint for this row, and its place there (0 first): the bar orders
    /// hints by how often they are wanted, the help overlay by topic.
    pub hint: Option<(u8, &'static str)>,
    /// The help overlay line this row opens: keys as written there, and the explanation.
    /// `None`: the row is explained by the line of a row above it.
    pub help: Option<(&'static str, &'static str)>,
    /// The row acts on two captures (diff mode): with one capture open, neither the status
    /// bar nor the help offers it (the key still says why it does nothing).
    pub needs_b: bool,
    /// The row acts on captured input sets: without any in the open captures, neither the
    /// status bar nor the help offers it.
    pub needs_inputs: bool,
}

const fn bind(
    keys: &'static [Key],
    action: Action,
    hint: Option<(u8, &'static str)>,
    help: Option<(&'static str, &'static str)>,
) -> Binding {
    Binding {
        keys,
        action: Some(action),
        hint,
        help,
        needs_b: false,
        needs_inputs: false,
    }
}

/// [`bind`] for a row that needs two captures ([`Binding::needs_b`]).
const fn bind_diff(
    keys: &'static [Key],
    action: Action,
    hint: Option<(u8, &'static str)>,
    help: Option<(&'static str, &'static str)>,
) -> Binding {
    Binding {
        keys,
        action: Some(action),
        hint,
        help,
        needs_b: true,
        needs_inputs: false,
    }
}

/// [`bind`] for a row that needs captured input sets ([`Binding::needs_inputs`]).
const fn bind_inputs(
    keys: &'static [Key],
    action: Action,
    hint: Option<(u8, &'static str)>,
    help: Option<(&'static str, &'static str)>,
) -> Binding {
    Binding {
        keys,
        action: Some(action),
        hint,
        help,
        needs_b: false,
        needs_inputs: true,
    }
}

/// The commands of [`Mode::Normal`], in the help overlay's order.
pub static BINDINGS: &[Binding] = &[
    bind(
        &[Key::Up, Key::Char('k')],
        Action::Up,
        None,
        Some(("↑ ↓  j k", "move; PgUp PgDn page; g G first, last row")),
    ),
    bind(&[Key::Down, Key::Char('j')], Action::Down, None, None),
    bind(&[Key::PageUp], Action::PageUp, None, None),
    bind(
        &[Key::PageDown, Key::Char(' ')],
        Action::PageDown,
        None,
        None,
    ),
    bind(&[Key::Home, Key::Char('g')], Action::Top, None, None),
    bind(&[Key::End, Key::Char('G')], Action::Bottom, None, None),
    bind(
        &[Key::Char('n')],
        Action::NextFinding,
        Some((1, "n/N finding")),
        Some(("n  N", "next / previous finding")),
    ),
    bind(&[Key::Char('N')], Action::PrevFinding, None, None),
    bind(
        &[Key::Char('f')],
        Action::FirstNonFinite,
        Some((2, "f non-finite")),
        Some(("f", "first non-finite record")),
    ),
    bind_diff(
        &[Key::Char('d')],
        Action::FirstDivergence,
        Some((3, "d divergence")),
        Some(("d", "first divergence (of the rank that diverges first)")),
    ),
    bind(
        &[Key::Char('D')],
        Action::WalkDiagnosis,
        None,
        Some((
            "D",
            "walk the diagnosis in the banner: the next record it cites, in its window",
        )),
    ),
    bind(
        &[Key::Char('/')],
        Action::StartSearch,
        Some((6, "/ search")),
        Some((
            "/",
            "regex search on stage names; / then Enter on an empty prompt repeats it",
        )),
    ),
    bind(
        &[Key::Char('a')],
        Action::ToggleFilter,
        Some((7, "a filter")),
        Some(("a", "hide the rows without a finding (a again shows all)")),
    ),
    bind(
        &[Key::Char('r')],
        Action::NextRank,
        Some((8, "r rank")),
        Some(("r  l", "next rank / next label window on this rank")),
    ),
    bind(
        &[Key::Char('l')],
        Action::NextWindow,
        Some((9, "l window")),
        None,
    ),
    bind(
        &[Key::Tab],
        Action::FocusNext,
        Some((11, "Tab aliases")),
        Some(("Tab", "focus timeline or storage aliases")),
    ),
    bind(
        &[Key::Enter],
        Action::Enter,
        None,
        Some(("Enter", "wide detail (timeline) / jump to member (aliases)")),
    ),
    bind(
        &[Key::Char(']')],
        Action::DetailScroll(1),
        None,
        Some((
            "]  [",
            "scroll the detail panel down / up (a new selection starts at its top)",
        )),
    ),
    bind(&[Key::Char('[')], Action::DetailScroll(-1), None, None),
    bind_diff(
        &[Key::Char('t')],
        Action::CompareTensors,
        Some((4, "t tensors")),
        Some((
            "t",
            "compare this stage's saved tensors of A and B (Esc cancels)",
        )),
    ),
    bind_inputs(
        &[Key::Char('p')],
        Action::Replay,
        Some((5, "p replay")),
        Some((
            "p",
            "replay the operator on this stage's captured input set (↻; Esc cancels)",
        )),
    ),
    bind_inputs(
        &[Key::Char('c')],
        Action::CaseMatrix,
        None,
        Some((
            "c",
            "on a replay's result: plan and run a case matrix on its input set; else its board",
        )),
    ),
    bind_diff(
        &[Key::Char('R')],
        Action::NextRequest,
        None,
        Some((
            "R",
            "next matched request (token rows): its first window; the token view opens on it",
        )),
    ),
    bind_diff(
        &[Key::Char('T')],
        Action::ToggleTokens,
        None,
        Some((
            "T  b",
            "token × stage view (Tab or R next request, Enter both rows) / the first bad token",
        )),
    ),
    bind_diff(&[Key::Char('b')], Action::FirstBadToken, None, None),
    bind(
        &[Key::Char('m')],
        Action::ToggleTree,
        None,
        Some((
            "m",
            "module tree of the window / timeline (tree: Enter Space fold, ← → close open)",
        )),
    ),
    bind(
        &[Key::Char('e')],
        Action::Export,
        Some((10, "e export")),
        Some((
            "e",
            "export the first-mismatch report (the path is asked for first)",
        )),
    ),
    bind(
        &[Key::Char('w')],
        Action::ToggleWarnings,
        None,
        Some((
            "w",
            "load warnings: what was lost or noted reading the inputs",
        )),
    ),
    Binding {
        keys: &[],
        action: None,
        hint: None,
        help: Some(("mouse", "wheel scrolls, click selects (timeline, ranks)")),
        needs_b: false,
        needs_inputs: false,
    },
    bind(
        &[Key::Char('?')],
        Action::ToggleHelp,
        Some((12, "? help")),
        Some(("?", "this help (? or Esc closes it)")),
    ),
    bind(
        &[Key::Esc],
        Action::Escape,
        None,
        Some((
            "Esc",
            "closes a popup, cancels a comparison or a replay, narrows the detail",
        )),
    ),
    bind(
        &[Key::Char('q')],
        Action::Quit,
        Some((13, "q quit")),
        Some(("q  Ctrl-C", "quit")),
    ),
];

/// The keys of [`Mode::Search`] besides text: every other character is typed into the prompt.
pub static SEARCH: &[Binding] = &[
    bind(&[Key::Backspace], Action::SearchBackspace, None, None),
    bind(&[Key::Enter], Action::SearchSubmit, None, None),
    bind(&[Key::Esc], Action::SearchCancel, None, None),
];

/// The keys of [`Mode::Export`] besides text: every other character is typed into the path.
pub static EXPORT: &[Binding] = &[
    bind(&[Key::Backspace], Action::ExportBackspace, None, None),
    bind(&[Key::Ctrl('u')], Action::ExportClear, None, None),
    bind(&[Key::Enter], Action::ExportSubmit, None, None),
    bind(&[Key::Esc], Action::ExportCancel, None, None),
];

/// The keys of [`Mode::Replay`] besides text: every other character is typed into the
/// focused field.
pub static REPLAY: &[Binding] = &[
    bind(&[Key::Backspace], Action::ReplayBackspace, None, None),
    bind(&[Key::Ctrl('u')], Action::ReplayClear, None, None),
    bind(&[Key::Tab], Action::ReplayNextField, None, None),
    bind(&[Key::Up], Action::ReplayEarlier, None, None),
    bind(&[Key::Down], Action::ReplayLater, None, None),
    bind(&[Key::Enter], Action::ReplaySubmit, None, None),
    bind(&[Key::Esc], Action::ReplayCancel, None, None),
];

/// The keys of [`Mode::CasesForm`] besides text: every other character is typed into the
/// focused line.
pub static CASES_FORM: &[Binding] = &[
    bind(&[Key::Backspace], Action::CasesBackspace, None, None),
    bind(&[Key::Ctrl('u')], Action::CasesClear, None, None),
    bind(&[Key::Tab, Key::Down], Action::CasesNextField, None, None),
    bind(&[Key::Up], Action::CasesPrevField, None, None),
    bind(&[Key::Enter], Action::CasesSubmit, None, None),
    bind(&[Key::Esc], Action::CasesCancel, None, None),
];

/// The keys of [`Mode::CasesBoard`]: the grid's cursor, a case's metrics, running and
/// cancelling, and the keys every view keeps (help, quit).
pub static CASES_BOARD: &[Binding] = &[
    bind(&[Key::Up, Key::Char('k')], Action::Up, None, None),
    bind(&[Key::Down, Key::Char('j')], Action::Down, None, None),
    bind(&[Key::Left, Key::Char('h')], Action::Left, None, None),
    bind(&[Key::Right, Key::Char('l')], Action::Right, None, None),
    bind(&[Key::PageUp], Action::PageUp, None, None),
    bind(&[Key::PageDown], Action::PageDown, None, None),
    bind(&[Key::Home, Key::Char('g')], Action::Top, None, None),
    bind(&[Key::End, Key::Char('G')], Action::Bottom, None, None),
    bind(&[Key::Enter], Action::Enter, None, None),
    bind(&[Key::Esc, Key::Char('c')], Action::Escape, None, None),
    bind(&[Key::Char('r')], Action::CasesRun, None, None),
    bind(&[Key::Char('R')], Action::CasesRerun, None, None),
    bind(&[Key::Char('x')], Action::CasesStop, None, None),
    bind(&[Key::Char('?')], Action::ToggleHelp, None, None),
    bind(&[Key::Char('q')], Action::Quit, None, None),
];

/// The keys of [`Mode::Tokens`]: the cursor over stages and positions, the requests, a
/// cell's rows.
pub static TOKENS: &[Binding] = &[
    bind(&[Key::Up, Key::Char('k')], Action::Up, None, None),
    bind(&[Key::Down, Key::Char('j')], Action::Down, None, None),
    bind(&[Key::Left, Key::Char('h')], Action::Left, None, None),
    bind(&[Key::Right, Key::Char('l')], Action::Right, None, None),
    bind(&[Key::PageUp], Action::PageUp, None, None),
    bind(
        &[Key::PageDown, Key::Char(' ')],
        Action::PageDown,
        None,
        None,
    ),
    bind(&[Key::Home, Key::Char('g')], Action::Top, None, None),
    bind(&[Key::End, Key::Char('G')], Action::Bottom, None, None),
    bind(&[Key::Tab], Action::FocusNext, None, None),
    bind(&[Key::Char('R')], Action::NextRequest, None, None),
    bind(&[Key::Enter], Action::Enter, None, None),
    bind(&[Key::Char('b')], Action::FirstBadToken, None, None),
    bind(
        &[Key::Esc, Key::Char('T')],
        Action::ToggleTokens,
        None,
        None,
    ),
    bind(&[Key::Char('?')], Action::ToggleHelp, None, None),
    bind(&[Key::Char('q')], Action::Quit, None, None),
];

/// The keys of [`Mode::Tree`] that differ from [`BINDINGS`]: Enter and Space fold and
/// unfold the module under the cursor, Left (`h`) folds it or goes up, Right unfolds it or
/// goes down into it. Every other key is [`BINDINGS`]'.
pub static TREE: &[Binding] = &[
    bind(&[Key::Enter, Key::Char(' ')], Action::Enter, None, None),
    bind(&[Key::Left, Key::Char('h')], Action::Left, None, None),
    bind(&[Key::Right], Action::Right, None, None),
];

/// Keys that act in every mode: Ctrl-C quits even from the search prompt.
pub static GLOBAL: &[Binding] = &[bind(&[Key::Ctrl('c')], Action::Quit, None, None)];

fn lookup(table: &[Binding], key: Key) -> Option<Action> {
    table
        .iter()
        .find(|b| b.keys.contains(&key))
        .and_then(|b| b.action.clone())
}

/// What `key` does in `mode`, if anything. A Ctrl-chord without a binding of its own acts
/// as its plain character.
pub fn action_for(key: Key, mode: Mode) -> Option<Action> {
    if let Some(action) = lookup(GLOBAL, key) {
        return Some(action);
    }
    let table = match mode {
        Mode::Normal => BINDINGS,
        Mode::Search => SEARCH,
        Mode::Export => EXPORT,
        Mode::Replay => REPLAY,
        Mode::CasesForm => CASES_FORM,
        Mode::CasesBoard => CASES_BOARD,
        Mode::Tokens => TOKENS,
        Mode::Tree => TREE,
    };
    // The tree's own keys first, then the commands.
    let find = |key: Key| {
        lookup(table, key).or_else(|| {
            (mode == Mode::Tree)
                .then(|| lookup(BINDINGS, key))
                .flatten()
        })
    };
    if let Some(action) = find(key) {
        return Some(action);
    }
    let key = match key {
        Key::Ctrl(c) => Key::Char(c),
        other => other,
    };
    find(key).or(match (mode, key) {
        (Mode::Search, Key::Char(c)) => Some(Action::SearchChar(c)),
        (Mode::Export, Key::Char(c)) => Some(Action::ExportChar(c)),
        (Mode::Replay, Key::Char(c)) => Some(Action::ReplayChar(c)),
        (Mode::CasesForm, Key::Char(c)) => Some(Action::CasesChar(c)),
        _ => None,
    })
}

/// One key hint of the status bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hint {
    /// As shown: `n/N finding`.
    pub text: &'static str,
    /// Kept when the bar is too narrow for every hint (`? help`, `q quit`): the others give
    /// way, from the last place on.
    pub pinned: bool,
}

/// Whether a binding is offered: those that need two captures only when `diffing`, those
/// that need captured input sets only with `inputs`.
fn offered(binding: &Binding, diffing: bool, inputs: bool) -> bool {
    (diffing || !binding.needs_b) && (inputs || !binding.needs_inputs)
}

/// The status bar's key hints in their places, those that need two captures only when
/// `diffing`, those that need captured input sets only with `inputs`.
pub fn status_hints(diffing: bool, inputs: bool) -> Vec<Hint> {
    let mut hints: Vec<(u8, Hint)> = BINDINGS
        .iter()
        .filter(|b| offered(b, diffing, inputs))
        .filter_map(|b| {
            let (place, text) = b.hint?;
            let pinned = matches!(b.action, Some(Action::ToggleHelp | Action::Quit));
            Some((place, Hint { text, pinned }))
        })
        .collect();
    hints.sort_by_key(|(place, _)| *place);
    hints.into_iter().map(|(_, hint)| hint).collect()
}

/// The help overlay's key lines: (keys as written, explanation), in table order; offered
/// as [`status_hints`] offers them.
pub fn help_lines(
    diffing: bool,
    inputs: bool,
) -> impl Iterator<Item = (&'static str, &'static str)> {
    BINDINGS
        .iter()
        .filter(move |b| offered(b, diffing, inputs))
        .filter_map(|b| b.help)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_key_is_bound_once_and_documented() {
        let mut seen = std::collections::HashSet::new();
        for binding in BINDINGS {
            for key in binding.keys {
                assert!(seen.insert(*key), "{key:?} bound twice");
            }
        }
        // Every bound row is explained by its own help line or one above it.
        assert!(BINDINGS[0].help.is_some());
        let places: Vec<u8> = BINDINGS
            .iter()
            .filter_map(|b| b.hint.map(|h| h.0))
            .collect();
        let mut sorted = places.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), places.len(), "two hints in one place");
    }

    #[test]
    fn the_tree_takes_enter_space_and_the_arrows_and_passes_the_rest_on() {
        for (key, expected) in [
            (Key::Char(' '), "Enter"),
            (Key::Enter, "Enter"),
            (Key::Left, "Left"),
            (Key::Char('h'), "Left"),
            (Key::Right, "Right"),
            (Key::Char('j'), "Down"),
            (Key::Char('d'), "FirstDivergence"),
            (Key::Char('m'), "ToggleTree"),
            (Key::Ctrl('c'), "Quit"),
        ] {
            let action = action_for(key, Mode::Tree);
            assert_eq!(
                format!("{action:?}"),
                format!("Some({expected})"),
                "{key:?}"
            );
        }
        assert!(matches!(
            action_for(Key::Char(' '), Mode::Normal),
            Some(Action::PageDown)
        ));
        assert!(help_lines(false, false).any(|(k, _)| k == "m"));
    }

    #[test]
    fn context_decides_what_a_key_means() {
        assert!(matches!(
            action_for(Key::Char('q'), Mode::Normal),
            Some(Action::Quit)
        ));
        assert!(matches!(
            action_for(Key::Char('q'), Mode::Search),
            Some(Action::SearchChar('q'))
        ));
        assert!(matches!(
            action_for(Key::Esc, Mode::Search),
            Some(Action::SearchCancel)
        ));
        assert!(matches!(
            action_for(Key::Ctrl('c'), Mode::Search),
            Some(Action::Quit)
        ));
        assert!(matches!(
            action_for(Key::Ctrl('j'), Mode::Normal),
            Some(Action::Down)
        ));
        assert!(action_for(Key::Char('z'), Mode::Normal).is_none());
        assert!(action_for(Key::Tab, Mode::Search).is_none());
        // The export prompt: text, Ctrl-U clears, Esc cancels, Ctrl-C still quits.
        assert!(matches!(
            action_for(Key::Char('q'), Mode::Export),
            Some(Action::ExportChar('q'))
        ));
        assert!(matches!(
            action_for(Key::Ctrl('u'), Mode::Export),
            Some(Action::ExportClear)
        ));
        assert!(matches!(
            action_for(Key::Esc, Mode::Export),
            Some(Action::ExportCancel)
        ));
        assert!(matches!(
            action_for(Key::Ctrl('c'), Mode::Export),
            Some(Action::Quit)
        ));
    }

    #[test]
    fn p_is_offered_where_input_sets_are_and_the_dialog_takes_text() {
        let offers_p = |inputs| {
            status_hints(false, inputs)
                .iter()
                .any(|h| h.text == "p replay")
        };
        assert!(offers_p(true) && !offers_p(false));
        assert!(help_lines(false, true).any(|(k, _)| k == "p"));
        assert!(!help_lines(true, false).any(|(k, _)| k == "p"));
        assert!(matches!(
            action_for(Key::Char('p'), Mode::Normal),
            Some(Action::Replay)
        ));
        for (key, expected) in [
            (Key::Char('q'), "ReplayChar('q')"),
            (Key::Char('/'), "ReplayChar('/')"),
            (Key::Tab, "ReplayNextField"),
            (Key::Up, "ReplayEarlier"),
            (Key::Down, "ReplayLater"),
            (Key::Enter, "ReplaySubmit"),
            (Key::Esc, "ReplayCancel"),
            (Key::Backspace, "ReplayBackspace"),
            (Key::Ctrl('u'), "ReplayClear"),
            (Key::Ctrl('c'), "Quit"),
        ] {
            let action = action_for(key, Mode::Replay);
            assert_eq!(
                format!("{action:?}"),
                format!("Some({expected})"),
                "{key:?}"
            );
        }
    }

    #[test]
    fn scan_mode_offers_no_key_that_needs_two_captures() {
        let texts = |diffing| -> Vec<&str> {
            status_hints(diffing, false)
                .iter()
                .map(|h| h.text)
                .collect()
        };
        assert!(texts(true).contains(&"d divergence") && texts(true).contains(&"t tensors"));
        assert!(
            !texts(false)
                .iter()
                .any(|t| t.starts_with("d ") || t.starts_with("t "))
        );
        let keys: Vec<&str> = help_lines(false, false).map(|(k, _)| k).collect();
        assert!(!keys.contains(&"d") && !keys.contains(&"t"), "{keys:?}");
        assert!(help_lines(true, false).any(|(k, _)| k == "t"));
        let pinned: Vec<&str> = status_hints(false, false)
            .iter()
            .filter(|h| h.pinned)
            .map(|h| h.text)
            .collect();
        assert_eq!(pinned, ["? help", "q quit"]);
    }
}
