//! Reloading in place (`App::reload`, what watch mode calls): actions in, state out.

use dumpview::internals::app::{Action, App, Session, update};
use dumpview::internals::embedded::example_pairs;
use dumpview::internals::runtime::load;
use dumpview::model::dump::{Name, Record};

/// Two ranks: rank 0 the kv_alias pair, and rank 1 a copy of it.
fn two_ranks() -> Session {
    let pair = example_pairs()
        .into_iter()
        .find(|p| p.name == "llama_kv_alias")
        .unwrap();
    let mut session = load::embedded(&pair).unwrap();
    // A window of its own: windows are told apart by their source.
    let of_rank1 = |window: &dumpview::model::dump::Window| {
        let mut rank1 = window.clone();
        rank1.rank = 1;
        rank1.source = window.source.with_file_name("rank1-manifest.json");
        rank1
    };
    let a1 = of_rank1(&session.a.windows[0]);
    let b1 = of_rank1(&session.b.as_ref().unwrap().windows[0]);
    session.a.windows.push(a1);
    session.b.as_mut().unwrap().windows.push(b1);
    session.reanalyse();
    session
}

/// `session` with `f` applied to rank 1's window on both sides.
fn edit_rank1(mut session: Session, f: impl Fn(&mut Vec<Record>)) -> Session {
    f(&mut session.a.windows[1].records);
    f(&mut session.b.as_mut().unwrap().windows[1].records);
    session.reanalyse();
    session
}

fn key(app: &App) -> &str {
    &app.row().unwrap().key
}

/// On rank 1, row 50 selected, 10 rows high, scrolled so row 45 is on top.
fn placed() -> App {
    let mut app = App::new(two_ranks(), false);
    for action in [Action::ViewHeight(10), Action::NextRank, Action::Top] {
        update(&mut app, action);
    }
    app.select(50);
    update(&mut app, Action::Scroll(4));
    assert_eq!(app.choice().unwrap().rank, 1);
    assert_eq!((app.selected, app.offset), (50, 45));
    app
}

#[test]
fn a_reload_with_more_records_keeps_rank_window_stage_and_scroll() {
    let mut app = placed();
    let stage = key(&app).to_string();
    let rows = app.rows.len();
    // The capture grew: two more records at the end of rank 1's window.
    let grown = edit_rank1(two_ranks(), |records| {
        let last = records.last().unwrap().clone();
        for i in 0..2 {
            let mut extra = last.clone();
            extra.stage = Name::new(&format!("extra.{i}"));
            extra.seq += 1 + i;
            records.push(extra);
        }
    });
    app.reload(grown);
    assert_eq!(app.rows.len(), rows + 2);
    assert_eq!(app.choice().unwrap().rank, 1);
    assert_eq!(key(&app), stage);
    assert_eq!((app.selected, app.offset), (50, 45));

    // Records added before it: the stage is followed to its new row, still on screen.
    let shifted = edit_rank1(two_ranks(), |records| {
        let mut first = records[0].clone();
        first.stage = Name::new("warmup");
        records.insert(0, first);
    });
    app.reload(shifted);
    assert_eq!(key(&app), stage);
    assert_eq!(app.selected, 51);
    assert!(app.offset <= 51 && 51 < app.offset + 10, "{}", app.offset);
}

#[test]
fn a_reload_without_the_stage_keeps_the_place_and_says_so() {
    let mut app = placed();
    let stage = key(&app).to_string();
    let gone = edit_rank1(two_ranks(), |records| {
        records.retain(|r| r.key() != stage);
    });
    app.reload(gone);
    assert_eq!(app.choice().unwrap().rank, 1, "same rank and window");
    assert_eq!(
        (app.selected, app.offset),
        (50, 45),
        "same row, same scroll"
    );
    assert_ne!(key(&app), stage);
    assert_eq!(
        app.message.as_deref(),
        Some(format!("{stage} is not in the reloaded capture").as_str())
    );
}

#[test]
fn a_reload_without_the_rank_opens_where_a_fresh_open_would() {
    let mut app = placed();
    let fresh = App::new(
        load::embedded(
            &example_pairs()
                .into_iter()
                .find(|p| p.name == "llama_kv_alias")
                .unwrap(),
        )
        .unwrap(),
        false,
    );
    let one_rank = {
        let mut s = two_ranks();
        s.a.windows.truncate(1);
        s.b.as_mut().unwrap().windows.truncate(1);
        s.reanalyse();
        s
    };
    app.reload(one_rank);
    assert_eq!(app.choice().unwrap().rank, 0);
    assert_eq!(key(&app), key(&fresh));
    assert_eq!(
        app.message.as_deref(),
        Some("rank 1 is not in the reloaded capture")
    );
}

#[test]
fn a_reload_keeps_the_open_panels() {
    let mut app = placed();
    update(&mut app, Action::ToggleHelp);
    update(&mut app, Action::Enter);
    let wide = app.wide_detail;
    app.reload(two_ranks());
    assert!(app.help);
    assert_eq!(app.wide_detail, wide);
    assert_eq!((app.selected, app.offset), (50, 45));
}

#[test]
fn a_reload_keeps_the_filter_and_the_selected_stage() {
    let mut app = App::new(two_ranks(), false);
    update(&mut app, Action::ViewHeight(10));
    update(&mut app, Action::ToggleFilter);
    update(&mut app, Action::NextFinding);
    let (stage, shown) = (key(&app).to_string(), app.view_len());
    assert!(app.filter && shown < app.rows.len());
    app.reload(two_ranks());
    assert!(app.filter, "the filter stays on");
    assert_eq!(app.view_len(), shown);
    assert_eq!(key(&app), stage);
    assert!(app.row().unwrap().kept_by_filter());
}

/// The header's watch words follow the source states and the background fetch, whatever
/// popup is open: a fetch shows while it runs and goes when it finishes; a lost source wins.
#[test]
fn the_watch_status_follows_source_states_and_the_background_fetch() {
    use dumpview::internals::app::watch::WatchStatus;
    use dumpview::model::watch::{FetchProgress, SourceState};
    let mut app = placed();
    app.watch = Some(WatchStatus::of(vec!["ssh://gpu0/dumps".into()]));
    update(&mut app, Action::ToggleHelp);
    let fetching = FetchProgress {
        files_done: 12,
        files_total: 40,
        bytes: 3_100_000,
        windows: 2,
        files_missing: 0,
    };
    update(
        &mut app,
        Action::WatchFetching {
            index: 0,
            progress: fetching,
        },
    );
    let status = app.watch.as_ref().unwrap();
    assert_eq!(
        status.describe(),
        (
            "watch: on · 1 source · update 0 · fetching tensor files 12/40 (3.1 MB) for 2 windows"
                .to_string(),
            true
        )
    );
    update(
        &mut app,
        Action::WatchFetching {
            index: 0,
            progress: FetchProgress {
                files_done: 40,
                ..fetching
            },
        },
    );
    assert_eq!(
        app.watch.as_ref().unwrap().describe().0,
        "watch: on · 1 source · update 0"
    );
    update(
        &mut app,
        Action::WatchSource {
            index: 0,
            state: SourceState::Lost,
            reason: "connection closed".into(),
        },
    );
    assert_eq!(
        app.watch.as_ref().unwrap().describe(),
        (
            "watch: LOST ssh://gpu0/dumps: connection closed (retrying)".to_string(),
            false
        )
    );
}

/// Before a watch's first reading the screen says what each source is doing.
#[test]
fn before_the_first_reading_each_source_says_what_it_is_doing() {
    use dumpview::internals::app::watch::WatchStatus;
    use dumpview::model::watch::SourceState;
    let mut status = WatchStatus::of(vec!["gpu0:dumps".into(), "ssh://gpu1/dumps".into()]);
    status.sources[1].1 = Some(SourceState::Connected);
    status.sources[1].2 = "no dump files yet; waiting".into();
    assert_eq!(
        status.waiting_lines(),
        vec![
            "gpu0:dumps: connecting".to_string(),
            "ssh://gpu1/dumps: connected: no dump files yet; waiting".to_string(),
        ]
    );
}
