//! The token × stage view on the committed token example pairs (assets/token_examples):
//! `b` opens it on the first bad token, the arrows and Tab move, Enter reads both rows, and
//! the frame at a fixed size.

use super::*;

fn tokens(pair: &str) -> Bench {
    let root = std::path::Path::new("assets/token_examples").join(pair);
    sized(
        App::new(
            load::open(&root.join("a"), Some(&root.join("b")), &mut |_| {}).unwrap(),
            false,
        ),
        110,
        30,
    )
}

#[test]
fn b_opens_the_view_on_the_first_bad_token_and_enter_reads_both_rows() {
    let mut app = tokens("tokens_bug_in_one_chunk");
    apply(&mut app, [Action::FirstBadToken]);
    let view = app.token_view.clone().expect("b opens the view");
    let grid = app.token_grid(view.request).unwrap();
    assert_eq!(grid.stages[view.row], "layers.0.q_rope#1");
    assert_eq!(grid.columns[view.column], (5, 5));
    assert_eq!(grid.first, Some((view.row, view.column)));
    apply(&mut app, [Action::Enter]);
    let detail = app
        .token_view
        .as_ref()
        .unwrap()
        .detail
        .clone()
        .unwrap()
        .unwrap();
    assert_eq!(detail.0, 5);
    let bad = app.token_diff().unwrap().first.clone().unwrap();
    assert_eq!(
        (detail.1.a, detail.1.b),
        (bad.a, bad.b),
        "the cell's rows are the bad token's"
    );
    // The cursor moves (and drops the rows read), clamped to the grid.
    apply(&mut app, [Action::Left, Action::Left, Action::Down]);
    let view = app.token_view.clone().unwrap();
    assert_eq!(
        (grid.stages[view.row].as_str(), view.column),
        ("layers.0.k_rope#1", 3)
    );
    assert!(view.detail.is_none());
    apply(&mut app, [Action::Top]);
    let view = app.token_view.clone().unwrap();
    assert_eq!((view.row, view.column), (0, 0));
    // Esc closes it; the timeline's keys are the timeline's again.
    apply(&mut app, [Action::Escape]);
    assert!(app.token_view.is_none());
}

#[test]
fn the_view_says_when_there_is_nothing_to_show() {
    let mut app = tokens("tokens_chunked_vs_whole");
    apply(&mut app, [Action::FirstBadToken]);
    assert_eq!(
        app.message.as_deref(),
        Some("no bad token: every aligned row agrees")
    );
    assert!(app.token_view.is_some(), "the view opens all the same");
    apply(&mut app, [Action::ToggleTokens]);
    assert!(app.token_view.is_none());
    // minilm's dumps predate token rows (the llama examples carry them).
    let mut plain = example("minilm_fp32_vs_bf16");
    apply(&mut plain, [Action::ToggleTokens]);
    assert!(plain.token_view.is_none());
    assert!(
        plain
            .message
            .as_deref()
            .unwrap()
            .starts_with("no token rows"),
        "{:?}",
        plain.message
    );
}

#[test]
fn snapshot_token_view_110x30() {
    let mut app = tokens("tokens_bug_in_one_chunk");
    apply(&mut app, [Action::FirstBadToken]);
    let buffer = render(&mut app, 110, 30);
    insta::assert_snapshot!("token_view_110x30", text(&buffer));
    // The first bad token is marked by style as well as by its `*`.
    let (x, y) = text(&buffer)
        .lines()
        .enumerate()
        .find_map(|(y, l)| {
            l.find('*')
                .map(|b| (l[..b].chars().count() as u16, y as u16))
        })
        .unwrap();
    assert!(buffer[(x, y)].modifier.contains(Modifier::BOLD));
}

/// `R` selects the next matched request beside rank and window: the header names it, the
/// timeline shows a window that holds it, and the token view opens on it and follows it.
#[test]
fn r_selects_the_next_matched_request_beside_rank_and_window() {
    // The batched capture against itself: both of its requests match.
    let root = std::path::Path::new("assets/token_examples/tokens_batched_vs_alone/b");
    let mut app = sized(
        App::new(load::open(root, Some(root), &mut |_| {}).unwrap(), false),
        140,
        30,
    );
    let names: Vec<String> = app
        .token_diff()
        .unwrap()
        .requests
        .iter()
        .map(|m| m.a.clone())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(app.request, 0);
    let screen = text(&render(&mut app, 140, 30));
    assert!(
        screen.contains(&format!("request {:?} [1/2]", names[0])),
        "{screen}"
    );
    apply(&mut app, [Action::NextRequest]);
    assert_eq!(app.request, 1);
    let screen = text(&render(&mut app, 140, 30));
    assert!(
        screen.contains(&format!("request {:?} [2/2]", names[1])),
        "{screen}"
    );
    let loaded = app.loaded.as_ref().unwrap();
    let shown = &loaded.session.a.windows[loaded.windows[app.window].a];
    assert!(
        shown
            .token_rows
            .as_ref()
            .unwrap()
            .map
            .iter()
            .any(|e| e.request.as_deref() == Some(names[1].as_str())),
        "the window shown holds the request selected"
    );
    apply(&mut app, [Action::ToggleTokens]);
    assert_eq!(app.token_view.as_ref().unwrap().request, 1);
    apply(&mut app, [Action::NextRequest]);
    assert_eq!(app.request, 0);
    assert_eq!(app.token_view.as_ref().unwrap().request, 0);
}

/// A pair whose forwards all went to the row alignment (none pairs whole) has an empty
/// timeline: the status says so and points at the token view, not at missing ranks.
#[test]
fn a_pair_compared_by_its_rows_alone_points_at_the_token_view() {
    let mut app = tokens("tokens_batched_vs_alone");
    let screen = text(&render(&mut app, 140, 30));
    assert!(
        screen.contains("no forward pairs whole: every one was compared by its token rows"),
        "{screen}"
    );
    assert!(!screen.contains("share no rank"), "{screen}");
}
