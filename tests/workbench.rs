//! The workbench run headless by the real event loop (`runtime::Runtime` over TestBackend):
//! actions and job events in through its channel, state out; and whole frames as the loop drew
//! them at fixed sizes (snapshots plus explicit style checks, since snapshots drop colour).

use std::ops::{Deref, DerefMut};

use dumpview::app::jobs::{JobEvent, JobId, JobOutput, JobProgress, JobSpec, JobUpdate, Slot};
use dumpview::app::{Action, App, Effect, Focus};
use dumpview::embedded::example_pairs;
use dumpview::runtime::{Message, Runtime, load};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::Event;
use ratatui::style::{Color, Modifier};

/// The real loop over a TestBackend terminal, jobs held: tests send their events.
struct Bench(Runtime<TestBackend>);

impl Deref for Bench {
    type Target = App;
    fn deref(&self) -> &App {
        self.0.app()
    }
}

impl DerefMut for Bench {
    fn deref_mut(&mut self) -> &mut App {
        self.0.app_mut()
    }
}

/// `app` in the loop on a 100x30 terminal: 20 timeline rows, the height App starts with.
fn bench(app: App) -> Bench {
    sized(app, 100, 30)
}

fn sized(app: App, width: u16, height: u16) -> Bench {
    let terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    let mut bench = Bench(Runtime::new(terminal, app).hold_jobs());
    apply(&mut bench, []);
    bench
}

fn example_app(name: &str) -> App {
    let pair = example_pairs()
        .into_iter()
        .find(|p| p.name == name)
        .unwrap();
    App::new(load::embedded(&pair).unwrap(), false)
}

fn example(name: &str) -> Bench {
    bench(example_app(name))
}

fn scan_of(name: &str, side: &str) -> Bench {
    // Relative to the package root (cargo test's working directory): the title is the same in any clone.
    let path = std::path::Path::new("assets/examples")
        .join(name)
        .join(side);
    bench(App::new(
        load::open(&path, None, &mut |_| {}).unwrap(),
        false,
    ))
}

fn key(app: &App) -> &str {
    &app.row().unwrap().key
}

/// Sends `messages` into the loop and runs it until it has applied them all.
fn send(app: &mut Bench, messages: impl IntoIterator<Item = Message>) {
    let sender = app.0.sender();
    for message in messages {
        sender.send(message).unwrap();
    }
    sender.send(Message::InputEnded).unwrap();
    app.0.run().unwrap();
}

/// Runs `actions` through the loop (job events through its job channel); the effects it
/// carried out.
fn apply(app: &mut Bench, actions: impl IntoIterator<Item = Action>) -> Vec<Effect> {
    let messages: Vec<Message> = actions
        .into_iter()
        .map(|action| match action {
            Action::Job(update) => Message::Job(update),
            action => Message::Action(action),
        })
        .collect();
    send(app, messages);
    app.0.take_effects()
}

fn update(app: &mut Bench, action: Action) {
    apply(app, [action]);
}

/// The terminal resized to `width` x `height` and the frame the loop drew.
fn render(app: &mut Bench, width: u16, height: u16) -> Buffer {
    app.0.terminal_mut().backend_mut().resize(width, height);
    send(app, [Message::Input(Event::Resize(width, height))]);
    app.0.terminal().backend().buffer().clone()
}

/// An event of job `id` in `slot`.
fn job(id: u64, slot: Slot, event: JobEvent) -> Action {
    Action::Job(JobUpdate {
        id: JobId(id),
        slot,
        event,
    })
}

fn exported(id: u64, result: Result<String, String>) -> Action {
    job(
        id,
        Slot::Export,
        match result {
            Ok(path) => JobEvent::Done(JobOutput::Exported(path)),
            Err(e) => JobEvent::Failed(e),
        },
    )
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
    // 10 timeline rows.
    let mut app = sized(example_app("llama_kv_alias"), 100, 20);
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
    let [Effect::Spawn(JobSpec::Export { markdown, .. })] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    let generation = app.0.jobs().current(Slot::Export).unwrap().0;
    assert_eq!(generation, 1);
    assert!(markdown.contains("`layers.3.mlp_up#1`"));
    apply(&mut app, [Action::Export]);
    apply(&mut app, [exported(1, Ok("old.md".into()))]);
    assert_eq!(
        app.message.as_deref(),
        Some("exporting the report…"),
        "a stale result is dropped"
    );
    apply(&mut app, [exported(2, Ok("new.md".into()))]);
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
    let mut app = example("llama_fp16_overflow");
    insta::assert_snapshot!("diff_fp16_80x24", text(&render(&mut app, 80, 24)));
}

#[test]
fn snapshot_diff_140x40() {
    let mut app = example("llama_kv_alias");
    insta::assert_snapshot!("diff_kv_alias_140x40", text(&render(&mut app, 140, 40)));
}

#[test]
fn snapshot_scan_80x24_and_140x40() {
    let mut app = scan_of("llama_fp16_overflow", "b");
    update(&mut app, Action::ViewHeight(15));
    insta::assert_snapshot!("scan_fp16_b_80x24", text(&render(&mut app, 80, 24)));
    update(&mut app, Action::ViewHeight(31));
    insta::assert_snapshot!("scan_fp16_b_140x40", text(&render(&mut app, 140, 40)));
}

#[test]
fn snapshot_help_and_too_small() {
    let mut app = example("llama_fp16_overflow");
    update(&mut app, Action::ToggleHelp);
    insta::assert_snapshot!("help_100x30", text(&render(&mut app, 100, 30)));
    let small = text(&render(&mut app, 50, 12)).replace('\n', " ");
    assert!(
        small.contains("needs a terminal of at least 60x16; this one is 50x12"),
        "{small}"
    );
}

#[test]
fn highlighted_rows_have_their_styles() {
    let mut app = example("llama_fp16_overflow");
    let buffer = render(&mut app, 140, 40);
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
    let (x, y) = find(&buffer, "layers.3.post_norm#1");
    assert_eq!(buffer[(x, y)].fg, Color::Reset, "agreeing rows are plain");
    // float16 rounding moved this checksum within its bound, above one moved row's shift.
    let (x, y) = find(&buffer, "layers.3.mlp_gate#1");
    assert_eq!(
        buffer[(x, y)].fg,
        Color::DarkGray,
        "inconclusive rows are dim"
    );
}

#[test]
fn no_color_keeps_glyphs_and_drops_colours() {
    let pair = example_pairs()
        .into_iter()
        .find(|p| p.name == "llama_fp16_overflow")
        .unwrap();
    let mut app = bench(App::new(load::embedded(&pair).unwrap(), true));
    let buffer = render(&mut app, 140, 40);
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
fn two_ranks() -> Bench {
    let pair = example_pairs()
        .into_iter()
        .find(|p| p.name == "llama_kv_alias")
        .unwrap();
    let mut session = load::embedded(&pair).unwrap();
    let mut rank1 = session.a.windows[0].clone();
    rank1.rank = 1;
    session.a.windows.push(rank1.clone());
    session.b.as_mut().unwrap().windows.push(rank1);
    session.reanalyse();
    bench(App::new(session, false))
}

#[test]
fn several_ranks_show_the_overview_and_which_rank_diverges_first() {
    let mut app = two_ranks();
    let loaded = app.loaded.as_ref().unwrap();
    assert_eq!(loaded.overview.ranks, vec![0, 1]);
    assert_eq!(loaded.diff().unwrap().first_rank, Some(0));
    let screen = text(&render(&mut app, 140, 40));
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

// ---- `t`: the selected stage's saved tensors, compared in the background ----

use dumpview::model::tensor::metrics::CompareProgress as TensorProgress;
use dumpview::model::tensor::pairing::{FileComparison, compare_saved};
use std::path::{Path, PathBuf};

const FP16: &str = "assets/examples/llama_fp16_overflow";
const UP: &str = "layers.3.mlp_up#1";

/// The fp16 pair opened from disk (its window directories hold the saved tensors).
fn fp16_on_disk() -> Bench {
    let (a, b) = (Path::new(FP16).join("a"), Path::new(FP16).join("b"));
    bench(App::new(
        load::open(&a, Some(&b), &mut |_| {}).unwrap(),
        false,
    ))
}

fn saved(side: &str, stage: &str) -> PathBuf {
    Path::new(FP16)
        .join(side)
        .join("rank0/match1-occ1/tensors")
        .join(format!("{stage}.safetensors"))
}

fn compared(stage: &str) -> FileComparison {
    compare_saved(
        &saved("a", stage),
        &saved("b", stage),
        &TensorProgress::default(),
    )
    .unwrap()
}

/// The end of comparison job `generation` (the app knows the stage it started).
fn done(generation: u64, _stage: &str, result: Result<FileComparison, String>) -> Action {
    job(
        generation,
        Slot::Compare,
        match result {
            Ok(comparison) => JobEvent::Done(JobOutput::Compared(comparison)),
            Err(e) => JobEvent::Failed(e),
        },
    )
}

fn cancelled(generation: u64) -> Action {
    job(generation, Slot::Compare, JobEvent::Cancelled)
}

fn progress(generation: u64, done: u64, total: u64) -> Action {
    job(
        generation,
        Slot::Compare,
        JobEvent::Progress(JobProgress::Elements { done, total }),
    )
}

#[test]
fn t_on_the_first_divergence_starts_one_comparison_of_both_saved_tensors() {
    let mut app = fp16_on_disk();
    assert_eq!(key(&app), UP);
    let effects = apply(&mut app, [Action::CompareTensors]);
    // saved_tensor resolves the window directory: compare the files, not the spelling.
    let canonical = |p: &Path| p.canonicalize().unwrap();
    assert_eq!(
        effects,
        vec![Effect::Spawn(JobSpec::Compare {
            rank: 0,
            stage: UP.to_string(),
            a: canonical(&saved("a", UP)),
            b: canonical(&saved("b", UP)),
        })]
    );
    assert_eq!(app.0.jobs().current(Slot::Compare), Some(JobId(1)));
    let job = app.tensor_job.clone().expect("running");
    assert_eq!((job.stage.as_str(), job.done, job.total), (UP, 0, 0));
    // One at a time.
    assert!(apply(&mut app, [Action::CompareTensors]).is_empty());
    assert!(
        app.message
            .as_deref()
            .unwrap()
            .starts_with("already comparing layers.3.mlp_up#1"),
        "{:?}",
        app.message
    );
    // Progress of this job updates the gauge; of another generation, nothing.
    apply(&mut app, [progress(1, 1024, 5504), progress(7, 9, 9)]);
    let job = app.tensor_job.as_ref().unwrap();
    assert_eq!((job.done, job.total), (1024, 5504));
    // The navigation goes on under the gauge.
    apply(&mut app, [Action::Down]);
    assert_eq!(key(&app), "layers.3.mlp_act#1");
}

#[test]
fn t_without_saved_tensors_says_how_to_capture_them() {
    let mut app = fp16_on_disk();
    apply(&mut app, [Action::Top]);
    assert_eq!(key(&app), "runner.input_ids#1");
    assert!(apply(&mut app, [Action::CompareTensors]).is_empty());
    assert_eq!(
        app.message.as_deref(),
        Some(
            "no saved tensor for runner.input_ids#1 in A or B: capture it with \
             DUMP_PROBE_TENSOR='^runner\\.input_ids$'"
        )
    );
    assert!(app.tensor_job.is_none());

    // Scan mode has nothing to compare with.
    let mut scan = scan_of("llama_fp16_overflow", "b");
    assert!(apply(&mut scan, [Action::CompareTensors]).is_empty());
    assert!(
        scan.message
            .as_deref()
            .unwrap()
            .contains("open two captures"),
        "{:?}",
        scan.message
    );
}

#[test]
fn t_names_the_side_without_a_saved_tensor() {
    // B's manifest copied without its tensors directory: A has the file, B names a missing one.
    let dir = tempfile::tempdir().unwrap();
    let window = dir.path().join("rank0/match1-occ1");
    std::fs::create_dir_all(&window).unwrap();
    std::fs::copy(
        Path::new(FP16).join("b/rank0/match1-occ1/manifest.json"),
        window.join("manifest.json"),
    )
    .unwrap();
    let a = Path::new(FP16).join("a");
    let mut app = bench(App::new(
        load::open(&a, Some(dir.path()), &mut |_| {}).unwrap(),
        false,
    ));
    assert_eq!(key(&app), UP);
    assert!(apply(&mut app, [Action::CompareTensors]).is_empty());
    let message = app.message.clone().unwrap();
    assert!(
        message.starts_with("layers.3.mlp_up#1: B's saved tensor ")
            && message.ends_with("is missing or outside its window directory"),
        "{message}"
    );
}

#[test]
fn a_finished_comparison_opens_the_popup_and_goes_into_the_exported_report() {
    let mut app = fp16_on_disk();
    apply(&mut app, [Action::CompareTensors]);
    apply(&mut app, [done(1, UP, Ok(compared(UP)))]);
    assert!(app.tensor_job.is_none());
    assert_eq!(
        app.tensor_popup,
        Some(dumpview::app::TensorPopup { result: 0, pair: 0 })
    );
    let kept = &app.tensor_results[0];
    let metrics = kept.result.as_ref().unwrap().pairs[0]
        .metrics
        .clone()
        .unwrap();
    assert_eq!((kept.rank, kept.stage.as_str()), (0, UP));
    assert!(
        !metrics.allclose && metrics.mismatches == 318,
        "{metrics:?}"
    );

    // The popup is modal: movement keys do not move the timeline under it.
    apply(&mut app, [Action::Down, Action::NextFinding]);
    assert_eq!(key(&app), UP);
    apply(&mut app, [Action::Escape]);
    assert!(app.tensor_popup.is_none() && !app.should_quit);
    // t on a compared stage shows the kept result again, without a new job.
    assert!(apply(&mut app, [Action::CompareTensors]).is_empty());
    assert!(app.tensor_popup.is_some());
    apply(&mut app, [Action::CompareTensors]);
    assert!(app.tensor_popup.is_none(), "t closes it too");

    // The second saved stage, then the export carries both, in order.
    apply(&mut app, [Action::StartSearch]);
    for c in "^logits".chars() {
        apply(&mut app, [Action::SearchChar(c)]);
    }
    apply(&mut app, [Action::SearchSubmit]);
    assert_eq!(key(&app), "logits#1");
    let effects = apply(&mut app, [Action::CompareTensors]);
    assert!(matches!(
        effects[..],
        [Effect::Spawn(JobSpec::Compare { .. })]
    ));
    assert_eq!(app.0.jobs().current(Slot::Compare), Some(JobId(2)));
    apply(
        &mut app,
        [done(2, "logits#1", Ok(compared("logits#1"))), Action::Enter],
    );
    assert_eq!(app.tensor_results.len(), 2);
    let effects = apply(&mut app, [Action::Export]);
    let [Effect::Spawn(JobSpec::Export { markdown, .. })] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    let section = &markdown[markdown.find("## Tensor comparisons").expect(markdown)..];
    let up = section
        .find("### Rank 0: `layers.3.mlp_up#1`")
        .expect(section);
    let logits = section.find("### Rank 0: `logits#1`").expect(section);
    assert!(up < logits, "{section}");
    assert!(
        section.contains("allclose        NO: 318 of 5504 mismatch"),
        "{section}"
    );
}

#[test]
fn stale_tensor_results_are_dropped() {
    let mut app = fp16_on_disk();
    apply(&mut app, [Action::CompareTensors]);
    apply(
        &mut app,
        [
            done(0, UP, Ok(compared(UP))),
            done(2, UP, Err("from elsewhere".into())),
        ],
    );
    assert!(app.tensor_job.is_some(), "still waiting for generation 1");
    assert!(app.tensor_results.is_empty() && app.tensor_popup.is_none());
    // A result that arrives with nothing running is stale too.
    apply(
        &mut app,
        [done(1, UP, Ok(compared(UP))), done(1, UP, Ok(compared(UP)))],
    );
    assert_eq!(app.tensor_results.len(), 1);
}

#[test]
fn esc_cancels_a_running_comparison_once() {
    let mut app = fp16_on_disk();
    apply(&mut app, [Action::CompareTensors]);
    let effects = apply(&mut app, [Action::Escape]);
    assert_eq!(effects, vec![Effect::Cancel(Slot::Compare)]);
    assert_eq!(app.0.jobs().current(Slot::Compare), Some(JobId(1)));
    assert!(app.tensor_job.as_ref().unwrap().cancelling);
    assert!(apply(&mut app, [Action::Escape]).is_empty());
    assert!(!app.should_quit, "Esc while cancelling does not quit");
    apply(&mut app, [cancelled(1)]);
    assert_eq!(app.message.as_deref(), Some("tensor comparison cancelled"));
    assert!(app.tensor_job.is_none() && app.tensor_popup.is_none());
    assert!(
        app.tensor_results.is_empty(),
        "a cancelled comparison is not reported"
    );
    // Nothing runs now: Esc quits as before.
    apply(&mut app, [Action::Escape]);
    assert!(app.should_quit);
}

#[test]
fn a_comparison_that_fails_is_shown_and_reported_with_its_reason() {
    let mut app = fp16_on_disk();
    apply(&mut app, [Action::CompareTensors]);
    apply(
        &mut app,
        [done(1, UP, Err("a.safetensors: truncated header".into()))],
    );
    assert!(app.tensor_popup.is_some());
    let screen = text(&render(&mut app, 80, 24));
    assert!(
        screen.contains("not compared: a.safetensors: truncated header"),
        "{screen}"
    );
    // t on the row tries again (a failed result is not simply shown again).
    apply(&mut app, [Action::Escape]);
    let effects = apply(&mut app, [Action::CompareTensors]);
    assert!(matches!(
        effects[..],
        [Effect::Spawn(JobSpec::Compare { .. })]
    ));
    assert_eq!(app.0.jobs().current(Slot::Compare), Some(JobId(2)));
}

#[test]
fn the_embedded_example_resolves_its_tensors_in_the_checkout() {
    let mut app = example("llama_fp16_overflow");
    let effects = apply(&mut app, [Action::CompareTensors]);
    let [Effect::Spawn(JobSpec::Compare { a, b, .. })] = effects.as_slice() else {
        panic!("{effects:?} {:?}", app.message)
    };
    assert!(a.is_file() && b.is_file(), "{a:?} {b:?}");
    assert_eq!(
        std::fs::read(a).unwrap(),
        std::fs::read(saved("a", UP)).unwrap()
    );

    // A binary away from its checkout says where the tensors are.
    let pair = example_pairs()
        .into_iter()
        .find(|p| p.name == "llama_fp16_overflow")
        .unwrap();
    let mut session = load::embedded(&pair).unwrap();
    session.checkout = None;
    let mut app = bench(App::new(session, false));
    assert!(apply(&mut app, [Action::CompareTensors]).is_empty());
    assert_eq!(
        app.message.as_deref(),
        Some(
            "the embedded example's saved tensors are not on disk here: open \
             assets/examples/llama_fp16_overflow/a and assets/examples/llama_fp16_overflow/b of \
             a dumpview checkout to compare layers.3.mlp_up#1"
        )
    );
}

/// The fp16 pair from disk with the first divergence's tensors compared: the popup open.
fn with_result() -> Bench {
    let mut app = fp16_on_disk();
    apply(&mut app, [Action::CompareTensors]);
    apply(&mut app, [done(1, UP, Ok(compared(UP)))]);
    app
}

#[test]
fn snapshot_tensor_result_80x24_and_140x40() {
    let mut app = with_result();
    update(&mut app, Action::ViewHeight(15));
    insta::assert_snapshot!("tensors_result_80x24", text(&render(&mut app, 80, 24)));
    update(&mut app, Action::ViewHeight(31));
    insta::assert_snapshot!("tensors_result_140x40", text(&render(&mut app, 140, 40)));
}

#[test]
fn snapshot_tensor_progress_80x24() {
    let mut app = fp16_on_disk();
    update(&mut app, Action::ViewHeight(15));
    apply(&mut app, [Action::CompareTensors, progress(1, 2048, 5504)]);
    insta::assert_snapshot!("tensors_progress_80x24", text(&render(&mut app, 80, 24)));
}

#[test]
fn tensor_popup_styles_and_no_color() {
    let mut app = with_result();
    let buffer = render(&mut app, 140, 40);
    let screen = text(&buffer);
    let cell_of = |needle: &str| {
        let (y, line) = screen
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle:?} not on screen:\n{screen}"));
        let x = line[..line.find(needle).unwrap()].chars().count() as u16;
        buffer[(x, y as u16)].clone()
    };
    let verdict = cell_of("allclose NO");
    assert_eq!(verdict.fg, Color::Red);
    assert!(verdict.modifier.contains(Modifier::BOLD));
    // Bars: exact zeros green, decades cyan, non-finite red; labels under them.
    let labels = screen
        .lines()
        .find(|l| l.contains("!fin") && l.contains("1e-4"))
        .unwrap_or_else(|| panic!("bar labels:\n{screen}"));
    let y = screen.lines().position(|l| l == labels).unwrap() as u16;
    let bar_x = |label: &str| labels[..labels.find(label).unwrap()].chars().count() as u16;
    assert_eq!(buffer[(bar_x("1e-4"), y - 1)].fg, Color::Cyan);
    assert_eq!(buffer[(bar_x("!fin"), y - 1)].fg, Color::Red);
    assert_eq!(buffer[(bar_x("=0"), y - 1)].fg, Color::Green);
    assert_eq!(
        buffer[(bar_x("1e2"), y - 1)].symbol(),
        "█",
        "one pair is a visible bar"
    );
    // The counts are on the bars.
    assert!(screen.contains("4110"), "{screen}");

    let mut plain = with_result();
    plain.no_color = true;
    let buffer = render(&mut plain, 140, 40);
    for cell in buffer.content() {
        assert_eq!((cell.fg, cell.bg), (Color::Reset, Color::Reset), "NO_COLOR");
    }
    let screen = text(&buffer);
    assert!(
        screen.contains("allclose NO") && screen.contains("!fin"),
        "{screen}"
    );
}

#[test]
fn help_and_status_name_the_t_key() {
    let mut app = example("llama_fp16_overflow");
    let screen = text(&render(&mut app, 140, 40));
    assert!(screen.contains("t tensors"), "{screen}");
    update(&mut app, Action::ToggleHelp);
    let screen = text(&render(&mut app, 100, 30));
    assert!(
        screen.contains("compare this stage's saved tensors"),
        "{screen}"
    );
}

#[test]
fn up_and_down_pick_a_key_of_a_multi_tensor_file() {
    // One comparison holding three pairs (as two torch.save dicts would): compared, compared,
    // refused; and a key only B holds.
    let mut several = compared(UP);
    let mut logits = compared("logits#1").pairs.remove(0);
    logits.key = "logits".into();
    let mut refused = logits.clone();
    refused.key = "mask".into();
    refused.metrics = None;
    refused.error = Some("shape differs: [2] vs [3]".into());
    several.pairs.extend([logits, refused]);
    several.only_b = vec!["extra".into()];
    let mut app = fp16_on_disk();
    apply(&mut app, [Action::CompareTensors, done(1, UP, Ok(several))]);
    let screen = text(&render(&mut app, 80, 24));
    assert!(screen.contains("key 1/3 ↑↓ · Esc closes"), "{screen}");
    assert!(screen.contains("only in B: extra"), "{screen}");
    apply(&mut app, [Action::Down]);
    let screen = text(&render(&mut app, 80, 24));
    assert!(
        screen.contains("key 2/3") && screen.contains("key logits"),
        "{screen}"
    );
    apply(&mut app, [Action::Down, Action::Down]);
    assert_eq!(app.tensor_popup.unwrap().pair, 2, "clamped at the last key");
    let screen = text(&render(&mut app, 80, 24));
    assert!(
        screen.contains("not compared: shape differs: [2] vs [3]"),
        "{screen}"
    );
    apply(&mut app, [Action::Top]);
    assert_eq!(app.tensor_popup.unwrap().pair, 0);
    assert_eq!(key(&app), UP, "the timeline did not move");
}

// ---- the loop's own paths: terminal events and real jobs ----

fn key_press(code: ratatui::crossterm::event::KeyCode) -> Message {
    use ratatui::crossterm::event::{KeyEvent, KeyModifiers};
    Message::Input(Event::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn chars(text: &str) -> Vec<Message> {
    use ratatui::crossterm::event::KeyCode;
    text.chars().map(|c| key_press(KeyCode::Char(c))).collect()
}

#[test]
fn keys_and_clicks_go_through_the_keymap_and_the_hit_test() {
    use ratatui::crossterm::event::{KeyCode, MouseButton, MouseEvent, MouseEventKind};
    let click = |column, row| {
        Message::Input(Event::Mouse(MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column,
            row,
            modifiers: ratatui::crossterm::event::KeyModifiers::NONE,
        }))
    };
    let terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    // g: top; / opens the prompt, where q is text; Enter searches.
    let mut script = chars("g/");
    script.extend(chars("mlp_up"));
    script.push(key_press(KeyCode::Enter));
    let (app, _) =
        dumpview::runtime::run_with(terminal, example_app("llama_fp16_overflow"), script).unwrap();
    assert_eq!(key(&app), "layers.0.mlp_up#1");
    assert!(!app.should_quit);

    // A click on the third body row of the timeline (border and header above it), then q.
    let terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    let script = vec![click(5, 2 + 2 + 2), key_press(KeyCode::Char('q'))];
    let (app, terminal) =
        dumpview::runtime::run_with(terminal, example_app("llama_fp16_overflow"), script).unwrap();
    assert_eq!(app.selected, app.offset + 2);
    assert!(app.should_quit);
    let screen = text(terminal.backend().buffer());
    assert!(screen.contains("t tensors"), "{screen}");
}

#[test]
fn t_runs_the_comparison_as_a_job_and_its_result_opens_the_popup() {
    use ratatui::crossterm::event::KeyCode;
    let (a, b) = (Path::new(FP16).join("a"), Path::new(FP16).join("b"));
    let app = App::new(load::open(&a, Some(&b), &mut |_| {}).unwrap(), false);
    let terminal = Terminal::new(TestBackend::new(140, 40)).unwrap();
    // The loop returns once the script has ended and no job runs.
    let (app, terminal) =
        dumpview::runtime::run_with(terminal, app, [key_press(KeyCode::Char('t'))]).unwrap();
    assert!(app.tensor_job.is_none());
    assert_eq!(app.tensor_results.len(), 1);
    assert!(app.tensor_popup.is_some());
    let screen = text(terminal.backend().buffer());
    assert!(
        screen.contains("allclose NO: 318 of 5504 mismatch"),
        "{screen}"
    );
}
