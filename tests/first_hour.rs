//! Workbench defects a new user met in the first hour (issue 11), as update tests: actions in,
//! state out.

use dumpview::internals::app::{Action, App, update};
use dumpview::internals::embedded::example_pairs;
use dumpview::internals::runtime::load;

fn app(pair: &str) -> App {
    let pair = example_pairs()
        .into_iter()
        .find(|p| p.name == pair)
        .unwrap();
    let mut app = App::new(load::embedded(&pair).unwrap(), false);
    update(&mut app, Action::ViewHeight(20));
    app
}

/// Item 15: the help overlay owns the keys while open (`?`, `j j Enter`, `Esc` used to move
/// the selection and open the wide detail behind it).
#[test]
fn the_help_overlay_takes_the_keys() {
    let mut app = app("llama_fp16_overflow");
    let (selected, wide) = (app.selected, app.wide_detail);
    for action in [
        Action::ToggleHelp,
        Action::Down,
        Action::Down,
        Action::Enter,
    ] {
        update(&mut app, action);
    }
    assert!(app.help);
    assert_eq!((app.selected, app.wide_detail), (selected, wide));
    update(&mut app, Action::Escape);
    assert!(!app.help && !app.should_quit);
    assert_eq!((app.selected, app.wide_detail), (selected, wide));
    // Outside the overlay the same keys act.
    update(&mut app, Action::Down);
    assert_eq!(app.selected, selected + 1);
}

/// Item 17: a status message answers the key that set it and goes with the next key.
#[test]
fn status_messages_do_not_outlive_their_truth() {
    let mut app = app("llama_fp16_overflow");
    update(&mut app, Action::NextRank);
    assert_eq!(app.message.as_deref(), Some("only rank 0 is loaded"));
    for (name, action) in [
        ("j", Action::Down),
        ("G", Action::Bottom),
        ("Tab", Action::FocusNext),
    ] {
        update(&mut app, action);
        assert_eq!(app.message, None, "after {name}");
    }
    // A key that says something again says it again.
    update(&mut app, Action::NextRank);
    assert_eq!(app.message.as_deref(), Some("only rank 0 is loaded"));
}

/// The tester's note: Esc in the main view quit the workbench. It closes and clears (the wide
/// detail, the alias focus, a search error); only `q` quits.
#[test]
fn esc_closes_and_clears_but_never_quits() {
    let mut app = app("llama_kv_alias");
    for action in [Action::Enter, Action::FocusNext] {
        update(&mut app, action);
    }
    assert!(app.wide_detail);
    assert_eq!(app.focus, dumpview::internals::app::Focus::Aliases);
    update(&mut app, Action::Escape);
    assert!(!app.wide_detail, "the first Esc narrows the detail");
    update(&mut app, Action::Escape);
    assert_eq!(
        app.focus,
        dumpview::internals::app::Focus::Timeline,
        "the next gives the focus back"
    );
    for c in ['/', '('] {
        update(
            &mut app,
            if c == '/' {
                Action::StartSearch
            } else {
                Action::SearchChar(c)
            },
        );
    }
    update(&mut app, Action::SearchSubmit);
    assert!(app.search.error.is_some());
    update(&mut app, Action::Escape);
    assert!(
        app.search.error.is_none(),
        "then it clears the search error"
    );
    for _ in 0..3 {
        update(&mut app, Action::Escape);
    }
    assert!(!app.should_quit, "Esc never quits");
    update(&mut app, Action::Quit);
    assert!(app.should_quit);
}
