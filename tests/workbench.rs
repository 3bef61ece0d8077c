//! The workbench without a terminal: actions in, state out; and whole frames drawn with
//! TestBackend at fixed sizes (snapshots plus explicit style checks, since snapshots drop colour).

use dumpview::app::{Action, App, Effect, Focus, Session, update};
use dumpview::embedded::example_pairs;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

fn example(name: &str) -> App {
    let pair = example_pairs()
        .into_iter()
        .find(|p| p.name == name)
        .unwrap();
    App::new(Session::embedded(&pair).unwrap(), false)
}

fn scan_of(name: &str, side: &str) -> App {
    // Relative to the package root (cargo test's working directory): the title is the same in any clone.
    let path = std::path::Path::new("assets/examples")
        .join(name)
        .join(side);
    App::new(Session::open(&path, None, &mut |_| {}).unwrap(), false)
}

fn key(app: &App) -> &str {
    &app.row().unwrap().key
}

fn apply(app: &mut App, actions: impl IntoIterator<Item = Action>) -> Vec<Effect> {
    actions.into_iter().flat_map(|a| update(app, a)).collect()
}

fn render(app: &App, width: u16, height: u16) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|f| dumpview::ui::draw(f, app)).unwrap();
    terminal.backend().buffer().clone()
}

fn text(buffer: &Buffer) -> String {
    let area = buffer.area;
    (0..area.height)
        .map(|y| {
            (0..area.width)
                .map(|x| buffer[(x, y)].symbol())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The (x, y) of `needle` in the timeline (the left border column starts each row with `│`).
fn find(buffer: &Buffer, needle: &str) -> (u16, u16) {
    let t = text(buffer);
    for (y, line) in t.lines().enumerate() {
        if let Some(byte) = line
            .find(needle)
            .filter(|&b| line[..b].chars().count() < 60 && line.starts_with('│'))
        {
            return (line[..byte].chars().count() as u16, y as u16);
        }
    }
    panic!("{needle:?} not on screen:\n{t}")
}

#[test]
fn opens_on_the_first_divergence_and_jumps_between_findings() {
    let mut app = example("llama_fp16_overflow");
    assert_eq!(key(&app), "layers.3.mlp_up#1");
    apply(&mut app, [Action::Top]);
    assert_eq!(key(&app), "runner.input_ids#1");
    apply(&mut app, [Action::FirstNonFinite]);
    assert_eq!(key(&app), "layers.3.mlp_up#1");
    apply(&mut app, [Action::NextFinding]);
    assert_eq!(key(&app), "layers.3.mlp_act#1");
    apply(&mut app, [Action::PrevFinding, Action::PrevFinding]);
    assert_eq!(app.message.as_deref(), Some("no finding above"));
    assert_eq!(key(&app), "layers.3.mlp_up#1");
    apply(&mut app, [Action::Bottom]);
    assert_eq!(app.selected, 118);
    apply(&mut app, [Action::FirstDivergence]);
    assert_eq!(key(&app), "layers.3.mlp_up#1");
}

#[test]
fn movement_is_clamped_and_scrolls_the_view() {
    let mut app = example("llama_kv_alias");
    apply(&mut app, [Action::ViewHeight(10), Action::Top, Action::Up]);
    assert_eq!((app.selected, app.offset), (0, 0));
    apply(&mut app, [Action::PageDown, Action::PageDown]);
    assert_eq!(app.selected, 20);
    assert_eq!(
        app.offset, 11,
        "the selection stays on the last visible row"
    );
    apply(&mut app, [Action::Scroll(1000)]);
    assert_eq!(app.offset, 119 - 10);
    assert!(app.selected >= app.offset);
    apply(&mut app, [Action::ClickRow(2)]);
    assert_eq!(app.selected, app.offset + 2);
    apply(&mut app, [Action::ClickRow(500)]);
    assert_eq!(
        app.selected,
        app.offset + 2,
        "a click below the last row selects nothing"
    );
}

#[test]
fn search_selects_the_next_match_and_reports_bad_patterns() {
    let mut app = example("llama_kv_alias");
    apply(&mut app, [Action::Top, Action::StartSearch]);
    for c in "k_cache_r".chars() {
        apply(&mut app, [Action::SearchChar(c)]);
    }
    apply(&mut app, [Action::SearchSubmit]);
    assert_eq!(key(&app), "layers.0.k_cache_read#1");
    // Enter on an empty prompt repeats the last search.
    apply(&mut app, [Action::StartSearch, Action::SearchSubmit]);
    assert_eq!(key(&app), "layers.1.k_cache_read#1");
    apply(
        &mut app,
        [
            Action::StartSearch,
            Action::SearchChar('('),
            Action::SearchSubmit,
        ],
    );
    assert!(
        app.search
            .error
            .as_deref()
            .unwrap()
            .contains("unclosed group"),
        "{:?}",
        app.search.error
    );
    assert_eq!(key(&app), "layers.1.k_cache_read#1");
    // Keys typed into the prompt are text, not commands.
    apply(
        &mut app,
        [
            Action::StartSearch,
            Action::SearchChar('q'),
            Action::SearchCancel,
        ],
    );
    assert!(!app.should_quit);
}

#[test]
fn alias_panel_focus_and_jump_to_a_member() {
    let mut app = example("llama_kv_alias");
    let conflicts: Vec<_> = app
        .alias_groups()
        .iter()
        .filter(|(_, g)| g.stride_conflict)
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(conflicts, vec!['B'; 6]);
    apply(&mut app, [Action::Top, Action::FocusNext]);
    assert_eq!(app.focus, Focus::Aliases);
    apply(&mut app, [Action::Down, Action::Enter]);
    assert_eq!(app.focus, Focus::Timeline);
    assert_eq!(key(&app), "layers.0.k_cache_read#1");
    assert!(app.row().unwrap().conflict);
}

#[test]
fn export_is_an_effect_with_a_generation_and_stale_results_are_dropped() {
    let mut app = example("llama_fp16_overflow");
    let effects = apply(&mut app, [Action::Export]);
    let [
        Effect::Export {
            generation,
            markdown,
            ..
        },
    ] = effects.as_slice()
    else {
        panic!("{effects:?}")
    };
    assert_eq!(*generation, 1);
    assert!(markdown.contains("`layers.3.mlp_up#1`"));
    apply(&mut app, [Action::Export]);
    apply(
        &mut app,
        [Action::ExportDone {
            generation: 1,
            result: Ok("old.md".into()),
        }],
    );
    assert_eq!(
        app.message.as_deref(),
        Some("exporting the report…"),
        "a stale result is dropped"
    );
    apply(
        &mut app,
        [Action::ExportDone {
            generation: 2,
            result: Ok("new.md".into()),
        }],
    );
    assert_eq!(app.message.as_deref(), Some("report exported to new.md"));
}

#[test]
fn ranks_windows_help_and_quit() {
    let mut app = example("llama_chunked_prefill");
    apply(&mut app, [Action::NextRank]);
    assert_eq!(app.message.as_deref(), Some("only rank 0 is loaded"));
    apply(&mut app, [Action::NextWindow]);
    assert_eq!(app.message.as_deref(), Some("rank 0 has one label window"));
    apply(&mut app, [Action::ToggleHelp, Action::Escape]);
    assert!(!app.help && !app.should_quit);
    apply(&mut app, [Action::Escape]);
    assert!(app.should_quit);
}

#[test]
fn graph_pair_rows_mark_missing_evidence() {
    let app = example("llama_eager_vs_graph");
    let only_a = app
        .rows
        .iter()
        .filter(|r| r.state == dumpview::app::RowState::OnlyA)
        .count();
    assert_eq!((app.rows.len(), only_a), (119, 111));
    assert_eq!(
        app.selected, 0,
        "nothing diverges, nothing non-finite: the view opens at the top"
    );
}

#[test]
fn snapshot_diff_80x24() {
    let app = example("llama_fp16_overflow");
    insta::assert_snapshot!("diff_fp16_80x24", text(&render(&app, 80, 24)));
}

#[test]
fn snapshot_diff_140x40() {
    let app = example("llama_kv_alias");
    insta::assert_snapshot!("diff_kv_alias_140x40", text(&render(&app, 140, 40)));
}

#[test]
fn snapshot_scan_80x24_and_140x40() {
    let mut app = scan_of("llama_fp16_overflow", "b");
    update(&mut app, Action::ViewHeight(15));
    insta::assert_snapshot!("scan_fp16_b_80x24", text(&render(&app, 80, 24)));
    update(&mut app, Action::ViewHeight(31));
    insta::assert_snapshot!("scan_fp16_b_140x40", text(&render(&app, 140, 40)));
}

#[test]
fn snapshot_help_and_too_small() {
    let mut app = example("llama_fp16_overflow");
    update(&mut app, Action::ToggleHelp);
    insta::assert_snapshot!("help_100x30", text(&render(&app, 100, 30)));
    let small = text(&render(&app, 50, 12)).replace('\n', " ");
    assert!(
        small.contains("needs a terminal of at least 60x16; this one is 50x12"),
        "{small}"
    );
}

#[test]
fn highlighted_rows_have_their_styles() {
    let app = example("llama_fp16_overflow");
    let buffer = render(&app, 140, 40);
    // The selected row is the first divergence (and first non-finite): reversed on top of red.
    let (x, y) = find(&buffer, "layers.3.mlp_up#1");
    let cell = &buffer[(x, y)];
    assert_eq!(cell.bg, Color::Red, "first non-finite rows are red");
    assert!(
        cell.modifier.contains(Modifier::REVERSED),
        "the selection is reversed"
    );
    let (x, y) = find(&buffer, "layers.3.mlp_act#1");
    assert_eq!(
        buffer[(x, y)].fg,
        Color::Red,
        "non-finite rows after it are red text"
    );
    let (x, y) = find(&buffer, "layers.3.mlp_gate#1");
    assert_eq!(buffer[(x, y)].fg, Color::Reset, "agreeing rows are plain");
}

#[test]
fn no_color_keeps_glyphs_and_drops_colours() {
    let pair = example_pairs()
        .into_iter()
        .find(|p| p.name == "llama_fp16_overflow")
        .unwrap();
    let app = App::new(Session::embedded(&pair).unwrap(), true);
    let buffer = render(&app, 140, 40);
    for cell in buffer.content() {
        assert_eq!(
            (cell.fg, cell.bg),
            (Color::Reset, Color::Reset),
            "NO_COLOR: no colour anywhere"
        );
    }
    let (_, y) = find(&buffer, "layers.3.mlp_up#1");
    let line: String = (0..140)
        .map(|x| buffer[(x, y)].symbol().to_string())
        .collect();
    assert!(line.contains("!◆"), "{line}");
    let (x, y) = find(&buffer, "layers.3.mlp_up#1");
    assert!(buffer[(x, y)].modifier.contains(Modifier::BOLD));
}

/// Two ranks: rank 0 is the kv_alias pair, rank 1 the same capture on both sides (agrees).
fn two_ranks() -> App {
    let pair = example_pairs()
        .into_iter()
        .find(|p| p.name == "llama_kv_alias")
        .unwrap();
    let mut session = Session::embedded(&pair).unwrap();
    let mut rank1 = session.a.windows[0].clone();
    rank1.rank = 1;
    session.a.windows.push(rank1.clone());
    session.b.as_mut().unwrap().windows.push(rank1);
    App::new(session, false)
}

#[test]
fn several_ranks_show_the_overview_and_which_rank_diverges_first() {
    let mut app = two_ranks();
    let loaded = app.loaded.as_ref().unwrap();
    assert_eq!(loaded.overview.ranks, vec![0, 1]);
    assert_eq!(loaded.diff.as_ref().unwrap().first_rank, Some(0));
    let screen = text(&render(&app, 140, 40));
    assert!(
        screen.contains("ranks × stages: rank 0 diverges first"),
        "{screen}"
    );
    assert!(screen.contains(">r0") && screen.contains(" r1"), "{screen}");
    // r moves to rank 1, whose rows all agree; a click on rank 0's strip comes back.
    apply(&mut app, [Action::NextRank]);
    assert_eq!(app.choice().unwrap().rank, 1);
    assert!(
        app.rows
            .iter()
            .all(|r| r.state == dumpview::app::RowState::Agrees)
    );
    apply(
        &mut app,
        [Action::ClickOverview {
            rank: 0,
            fraction: 0.0,
        }],
    );
    assert_eq!((app.choice().unwrap().rank, app.selected), (0, 0));
}
