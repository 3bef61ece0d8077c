//! The workbench run headless by the real event loop (`runtime::Runtime` over TestBackend):
//! actions and job events in through its channel, state out; and whole frames as the loop drew
//! them at fixed sizes (snapshots plus explicit style checks, since snapshots drop colour).

use std::ops::{Deref, DerefMut};

use dumpview::internals::app::jobs::{
    JobEvent, JobId, JobOutput, JobProgress, JobSpec, JobUpdate, Slot,
};
use dumpview::internals::app::{Action, App, Effect, Focus};
use dumpview::internals::embedded::example_pairs;
use dumpview::internals::runtime::{Message, Runtime, load};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::crossterm::event::Event;
use ratatui::style::{Color, Modifier};

#[path = "workbench/cases.rs"]
mod cases;
#[path = "workbench/diagnosis.rs"]
mod diagnosis;
#[path = "workbench/layouts.rs"]
mod layouts;
#[path = "workbench/single_run.rs"]
mod single_run;
mod support;
#[path = "workbench/tokens.rs"]
mod tokens;
#[path = "workbench/tree.rs"]
mod tree;

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
    // 10 timeline rows (under the header and the diagnosis banner).
    let mut app = sized(example_app("llama_kv_alias"), 100, 21);
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
    let effects = apply(&mut app, [Action::Export, Action::ExportSubmit]);
    let [Effect::Spawn(JobSpec::Export { markdown, .. })] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    let generation = app.0.jobs().current(Slot::Export).unwrap().0;
    assert_eq!(generation, 1);
    assert!(markdown.contains("`layers.3.mlp_up#1`"));
    apply(&mut app, [Action::Export, Action::ExportSubmit]);
    apply(&mut app, [exported(1, Ok("old.md".into()))]);
    assert_eq!(
        app.message.as_deref(),
        Some("exporting the report to ./…"),
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
    // Esc with nothing open never quits; q does.
    apply(&mut app, [Action::Escape, Action::Escape]);
    assert!(!app.should_quit);
    apply(&mut app, [Action::Quit]);
    assert!(app.should_quit);
}

#[test]
fn graph_pair_rows_mark_missing_evidence() {
    let app = example("llama_eager_vs_graph");
    let only_a = app
        .rows
        .iter()
        .filter(|r| r.state == dumpview::internals::app::RowState::OnlyA)
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
    // float16 rounding moved this checksum within its bound, above one moved row's shift:
    // inconclusive by the checksum alone, but its token rows all agree, which decides it.
    let (x, y) = find(&buffer, "layers.3.mlp_gate#1");
    assert_eq!(
        buffer[(x, y)].fg,
        Color::Reset,
        "a checksum its agreeing rows decide is plain"
    );
    // Without token rows (minilm's dumps predate them) bfloat16 rounding leaves the last
    // layer's output checksum inconclusive.
    let mut app = example("minilm_fp32_vs_bf16");
    let buffer = render(&mut app, 140, 40);
    let (x, y) = find(&buffer, "layers.5.output#1");
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
            .all(|r| r.state == dumpview::internals::app::RowState::Agrees)
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
        Some(dumpview::internals::app::TensorPopup { result: 0, pair: 0 })
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
    let effects = apply(&mut app, [Action::Export, Action::ExportSubmit]);
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
    // Nothing runs now: Esc has nothing to close and does not quit.
    apply(&mut app, [Action::Escape]);
    assert!(!app.should_quit);
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
    let (app, _) = dumpview::internals::runtime::run_with(
        terminal,
        example_app("llama_fp16_overflow"),
        script,
    )
    .unwrap();
    assert_eq!(key(&app), "layers.0.mlp_up#1");
    assert!(!app.should_quit);

    // A click on the third body row of the timeline (the header, the diagnosis banner, its
    // border and header row above it), then q.
    let terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    let script = vec![click(5, 2 + 1 + 2 + 2), key_press(KeyCode::Char('q'))];
    let (app, terminal) = dumpview::internals::runtime::run_with(
        terminal,
        example_app("llama_fp16_overflow"),
        script,
    )
    .unwrap();
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
        dumpview::internals::runtime::run_with(terminal, app, [key_press(KeyCode::Char('t'))])
            .unwrap();
    assert!(app.tensor_job.is_none());
    assert_eq!(app.tensor_results.len(), 1);
    assert!(app.tensor_popup.is_some());
    let screen = text(terminal.backend().buffer());
    assert!(
        screen.contains("allclose NO: 318 of 5504 mismatch"),
        "{screen}"
    );
}

// ---- issue 11, item 16: laid out by priority, cut visibly ----

/// The inner lines of the box whose top border holds `title` (text between its side borders).
fn boxed(screen: &str, title: &str) -> Vec<String> {
    let lines: Vec<&str> = screen.lines().collect();
    let (top, x) = lines
        .iter()
        .enumerate()
        .find_map(|(y, l)| {
            let at = l.find(title)?;
            let x = l[..at].chars().rev().position(|c| c == '┌')?;
            Some((y, l[..at].chars().count() - 1 - x))
        })
        .unwrap_or_else(|| panic!("no box titled {title:?}:\n{screen}"));
    let mut inner = Vec::new();
    for line in &lines[top + 1..] {
        let chars: Vec<char> = line.chars().collect();
        if chars.get(x) != Some(&'│') {
            break;
        }
        let text: String = chars[x + 1..].iter().take_while(|&&c| c != '│').collect();
        inner.push(text.trim_end().to_string());
    }
    inner
}

#[test]
fn help_lines_wrap_under_their_own_column_and_scroll_when_tall() {
    let mut app = example("llama_fp16_overflow");
    update(&mut app, Action::ToggleHelp);
    // 140 columns: as wide as its longest line, nothing wraps.
    let screen = text(&render(&mut app, 140, 40));
    let help = boxed(&screen, "help (? or Esc closes)");
    assert!(
        help.iter()
            .any(|l| l.ends_with("/ then Enter on an empty prompt repeats it")),
        "{screen}"
    );
    assert!(!help.iter().any(|l| l.trim() == "it"), "{screen}");
    // 80x24: explanations wrap under their column, never back to column 0; the overlay is
    // taller than the terminal, so it scrolls and says what is below.
    let screen = text(&render(&mut app, 80, 24));
    let help = boxed(&screen, "help (? or Esc closes)");
    let headings = ["keys", "timeline glyphs (non-finite, comparison, alias)"];
    for line in &help {
        let indent = line.len() - line.trim_start().len();
        assert!(
            line.is_empty() || headings.contains(&line.as_str()) || indent == 2 || indent >= 13,
            "{line:?} in\n{screen}"
        );
    }
    assert!(
        help.iter().any(|l| l.starts_with("             ")),
        "{screen}"
    );
    assert!(screen.contains("below · ↑↓ PgUp PgDn scroll"), "{screen}");
    apply(&mut app, [Action::Bottom]);
    let screen = text(&render(&mut app, 80, 24));
    assert!(
        screen.contains("stride-conflicting storage alias"),
        "G shows the last line:\n{screen}"
    );
    assert_eq!(key(&app), UP, "the timeline did not move under the help");
}

#[test]
fn pos_checksum_is_never_cut_where_the_detail_has_room() {
    let mut app = example("llama_fp16_overflow");
    for (width, height, wide) in [(80, 24, false), (140, 40, false), (140, 40, true)] {
        app.wide_detail = wide;
        let screen = text(&render(&mut app, width, height));
        let detail = boxed(&screen, "detail");
        assert!(
            detail
                .iter()
                .any(|l| l.starts_with("pos_checksum -2.647e5")),
            "{width}x{height} wide={wide}:\n{screen}"
        );
    }
}

#[test]
fn the_kept_rows_stay_on_their_tensor_line_and_b_stays_in_view() {
    let mut app = example("llama_fp16_overflow");
    let screen = text(&render(&mut app, 140, 40));
    let detail = boxed(&screen, "detail");
    let tensors: Vec<&String> = detail
        .iter()
        .filter(|l| l.contains("8 of 12 rows"))
        .collect();
    assert_eq!(tensors.len(), 2, "{screen}");
    assert!(
        tensors
            .iter()
            .all(|l| l.starts_with("  tensor 8 of 12 rows · ") && l.ends_with(".safetensors")),
        "{tensors:?}"
    );
    assert!(
        detail.last().unwrap().starts_with("  tensor"),
        "B's tensor line is the last one shown:\n{screen}"
    );
    assert!(
        detail.iter().any(|l| l == "B float16 12×688 on cpu"),
        "{screen}"
    );
}

#[test]
fn at_80x24_hints_shapes_and_layouts_give_way_visibly() {
    let mut app = example("llama_kv_alias");
    let all_shapes: std::collections::HashSet<String> =
        app.loaded.as_ref().unwrap().session.a.windows[0]
            .records
            .iter()
            .map(|r| {
                r.shape
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join("×")
            })
            .collect();
    for wide in [false, true] {
        app.wide_detail = wide;
        let screen = text(&render(&mut app, 80, 24));
        let status = screen.lines().last().unwrap();
        assert!(status.ends_with("? help · q quit"), "{status:?}");
        // Every shape cell is whole or ends in `…`: never `12×4` for `12×4×64`.
        for line in boxed(&screen, "timeline").iter().skip(1) {
            let cell = line.split(' ').next_back().unwrap();
            assert!(
                cell.ends_with('…') || all_shapes.contains(cell),
                "shape cell {cell:?} of {line:?} (wide={wide}):\n{screen}"
            );
        }
        // The detail says how many of its lines are not shown.
        assert!(screen.contains("more lines: "), "{screen}");
    }
}

#[test]
fn the_header_keeps_missing_data_and_identity_when_narrow() {
    let mut app = example("llama_eager_vs_graph");
    for width in [60, 80, 140] {
        let screen = text(&render(&mut app, width, 24));
        let second = screen.lines().nth(1).unwrap();
        assert!(
            // The decode step's one token: identity reads the row map (one row, position
            // 12), not the metadata's 13 ids of the request so far.
            second.contains("MISSING DATA") && second.contains("input: same 1 ids"),
            "{width}: {second:?}"
        );
        assert!(second.chars().count() <= usize::from(width));
        if width < 140 {
            assert!(second.contains('…'), "what gave way is marked: {second:?}");
        }
    }
}

#[test]
fn the_strip_marks_the_selection_in_diff_mode_too() {
    let mut app = example("llama_fp16_overflow");
    let screen = text(&render(&mut app, 140, 40));
    let lines: Vec<&str> = screen.lines().collect();
    let b = lines.iter().position(|l| l.starts_with("│B ")).unwrap();
    assert!(lines[b + 1].contains('▲'), "{screen}");
    // At the selected row's place: 74 of 119 rows across 136 columns.
    let x = lines[b + 1].chars().position(|c| c == '▲').unwrap();
    assert_eq!(x, 3 + 74 * 136 / 119);
}

// ---- issue 11, item 18 ----

#[test]
fn the_dtype_column_shows_both_sides_where_they_differ() {
    let mut app = example("llama_fp16_overflow");
    let screen = text(&render(&mut app, 140, 40));
    let line = screen
        .lines()
        .find(|l| l.contains(" layers.3.mlp_up#1 "))
        .unwrap();
    assert!(line.contains(" f32/f16 "), "{line:?}");
    // A pair of one dtype shows it once.
    let mut app = example("llama_kv_alias");
    let screen = text(&render(&mut app, 140, 40));
    let line = screen
        .lines()
        .find(|l| l.contains(" layers.0.k_cache_read#1 "))
        .unwrap();
    assert!(line.contains(" f32 ") && !line.contains('/'), "{line:?}");
}

#[test]
fn scan_mode_calls_nothing_a_and_offers_no_d_or_t() {
    let mut app = scan_of("llama_fp16_overflow", "b");
    let screen = text(&render(&mut app, 140, 40));
    let detail = boxed(&screen, "detail");
    assert!(
        detail
            .iter()
            .any(|l| l.starts_with("stat ") && l.ends_with("value")),
        "{screen}"
    );
    assert!(
        detail.iter().any(|l| l == "float16 12×688 on cpu"),
        "{screen}"
    );
    assert!(!detail.iter().any(|l| l.starts_with("A ")), "{screen}");
    assert!(screen.contains(" 119 records"), "{screen}");
    assert!(!screen.contains("A 119"), "{screen}");
    assert!(
        screen.lines().any(|l| l.starts_with("│  █")),
        "the strip has no A: {screen}"
    );
    let status = screen.lines().last().unwrap();
    assert!(
        !status.contains("d divergence") && !status.contains("t tensors"),
        "{status}"
    );
    update(&mut app, Action::ToggleHelp);
    let help = boxed(&text(&render(&mut app, 140, 40)), "help (? or Esc closes)");
    assert!(
        !help
            .iter()
            .any(|l| l.starts_with("  d ") || l.starts_with("  t ")),
        "{help:#?}"
    );
    assert!(help.iter().any(|l| l.starts_with("  f ")), "{help:#?}");
}

#[test]
fn the_window_counter_counts_the_ranks_windows_as_l_does() {
    let mut app = two_ranks();
    let screen = text(&render(&mut app, 140, 40));
    let second = screen.lines().nth(1).unwrap();
    assert!(
        second.starts_with("rank 0 [1/2] · window [1/1] "),
        "{second:?}"
    );
    apply(&mut app, [Action::NextRank, Action::NextWindow]);
    assert_eq!(app.message.as_deref(), Some("rank 1 has one label window"));
    let screen = text(&render(&mut app, 140, 40));
    let second = screen.lines().nth(1).unwrap();
    assert!(
        second.starts_with("rank 1 [2/2] · window [1/1] "),
        "{second:?}"
    );
}

#[test]
fn g_and_capital_g_move_in_the_alias_panel() {
    let mut app = example("llama_kv_alias");
    let selected = app.selected;
    let members: usize = app
        .alias_groups()
        .iter()
        .map(|(_, g)| g.members.len())
        .sum();
    apply(&mut app, [Action::FocusNext, Action::Bottom]);
    assert_eq!(app.alias_selected, members - 1);
    apply(&mut app, [Action::Top]);
    assert_eq!(app.alias_selected, 0);
    apply(&mut app, [Action::PageDown]);
    assert_eq!(app.alias_selected, app.view_height.min(members - 1));
    assert_eq!(app.selected, selected, "the timeline did not move");
}

#[test]
fn msprobe_records_say_what_msprobe_does_not_record() {
    let dir = std::path::Path::new("tests/fixtures/msprobe/mlp_nan");
    let mut app = bench(App::new(load::open(dir, None, &mut |_| {}).unwrap(), false));
    let screen = text(&render(&mut app, 140, 40));
    let detail = boxed(&screen, "detail");
    assert!(
        detail
            .iter()
            .any(|l| l == "  storage, device: not recorded by msprobe dump"),
        "{screen}"
    );
    assert!(detail.iter().any(|l| l == "float32 3×8"), "{screen}");
    assert!(
        !screen.contains(" on  ") && !screen.contains("· eager") && !screen.contains("at –"),
        "{screen}"
    );
}

// ---- issue 11, item 19: the load warnings, read in the workbench ----

#[test]
fn w_lists_the_load_warnings_with_their_kind_and_owns_the_keys() {
    use dumpview::model::dump::Warning;
    let bad = Path::new("tests/fixtures/bad/truncated_mid_record.json");
    let mut session = load::open(bad, None, &mut |_| {}).unwrap();
    session.a.warnings.push(Warning::note(
        "tests/fixtures/bad/attempt_1.json",
        "an older attempt of this window was ignored",
    ));
    let mut app = bench(App::new(session, false));
    assert_eq!(
        app.message.as_deref(),
        Some("2 load warnings (1 lost evidence): w lists them")
    );
    let screen = text(&render(&mut app, 140, 40));
    assert!(
        screen
            .lines()
            .next()
            .unwrap()
            .ends_with("2 load warnings: w"),
        "{screen}"
    );
    let (selected, offset) = (app.selected, app.offset);
    apply(&mut app, [Action::ToggleWarnings]);
    assert!(app.warnings_open);
    let screen = text(&render(&mut app, 140, 40));
    let view = boxed(&screen, "load warnings: 2 (1 lost evidence, 1 note)");
    assert!(
        view[0].starts_with("LOST EVIDENCE  tests/fixtures/bad/truncated_mid_record.json"),
        "{view:#?}"
    );
    assert!(
        view[1].starts_with("  truncated or damaged: stops being a valid manifest at byte 3914"),
        "{view:#?}"
    );
    assert!(
        view.iter()
            .any(|l| l.starts_with("note           tests/fixtures/bad/attempt_1.json")),
        "{view:#?}"
    );
    assert!(
        view.iter()
            .any(|l| l == "  an older attempt of this window was ignored")
    );
    // The view owns the keys: nothing moves or opens behind it.
    apply(
        &mut app,
        [
            Action::Down,
            Action::Bottom,
            Action::Enter,
            Action::NextFinding,
            Action::ToggleHelp,
        ],
    );
    assert_eq!((app.selected, app.offset), (selected, offset));
    assert!(!app.wide_detail && !app.help && app.warnings_open);
    apply(&mut app, [Action::Escape]);
    assert!(!app.warnings_open && !app.should_quit);
    apply(&mut app, [Action::ToggleWarnings, Action::ToggleWarnings]);
    assert!(!app.warnings_open, "w closes it too");
}

#[test]
fn many_warnings_scroll_and_a_clean_capture_has_none() {
    use dumpview::model::dump::Warning;
    let bad = Path::new("tests/fixtures/bad/truncated_mid_record.json");
    let mut session = load::open(bad, None, &mut |_| {}).unwrap();
    for i in 0..30 {
        session
            .a
            .warnings
            .push(Warning::note(format!("rank{i}/manifest.json"), "noted"));
    }
    let mut app = bench(App::new(session, false));
    apply(&mut app, [Action::ToggleWarnings]);
    let screen = text(&render(&mut app, 80, 24));
    assert!(screen.contains("below · ↑↓ PgUp PgDn scroll"), "{screen}");
    assert!(!screen.contains("rank29/manifest.json"), "{screen}");
    apply(&mut app, [Action::Bottom]);
    let screen = text(&render(&mut app, 80, 24));
    assert!(screen.contains("rank29/manifest.json"), "{screen}");
    assert_eq!(app.overlay_scroll, app.overlay_scroll_max);
    apply(&mut app, [Action::Up]);
    assert_eq!(
        app.overlay_scroll,
        app.overlay_scroll_max - 1,
        "one Up, one line"
    );

    let mut clean = example("llama_fp16_overflow");
    apply(&mut clean, [Action::ToggleWarnings]);
    assert!(!clean.warnings_open);
    assert_eq!(
        clean.message.as_deref(),
        Some("no load warnings: every input was read whole")
    );
}

// ---- issue 11, item 20: the export path, shown and editable before anything is written ----

#[test]
fn e_shows_the_path_first_and_the_prompt_owns_the_keys() {
    let mut app = example("llama_fp16_overflow");
    app.working_dir = Some(PathBuf::from("/work/runs"));
    let selected = app.selected;
    assert!(
        apply(&mut app, [Action::Export]).is_empty(),
        "nothing written yet"
    );
    assert_eq!(app.export.as_ref().unwrap().input, "/work/runs/");
    let screen = text(&render(&mut app, 100, 30));
    let prompt = boxed(&screen, "export the first-mismatch report");
    assert_eq!(prompt[0], "to /work/runs/▏", "{screen}");
    assert!(
        prompt
            .iter()
            .any(|l| l.contains("Enter writes · Esc cancels")),
        "{screen}"
    );
    // Keys are text: q, j and e do not quit, move or export.
    let typed: Vec<Action> = "qje.md".chars().map(Action::ExportChar).collect();
    apply(&mut app, typed);
    apply(&mut app, [Action::ExportBackspace, Action::ExportBackspace]);
    assert_eq!(app.export.as_ref().unwrap().input, "/work/runs/qje.");
    assert!(!app.should_quit && app.selected == selected);
    apply(&mut app, [Action::ExportClear]);
    for c in "/tmp/mine.md".chars() {
        apply(&mut app, [Action::ExportChar(c)]);
    }
    let effects = apply(&mut app, [Action::ExportSubmit]);
    let [Effect::Spawn(JobSpec::Export { target, .. })] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    assert_eq!(target, &PathBuf::from("/tmp/mine.md"));
    assert!(app.export.is_none());
    assert_eq!(
        app.message.as_deref(),
        Some("exporting the report to /tmp/mine.md…")
    );
    // Written: the next prompt proposes that directory.
    apply(
        &mut app,
        [exported(1, Ok("/tmp/mine.md".into())), Action::Export],
    );
    assert_eq!(app.export.as_ref().unwrap().input, "/tmp/");
    // Esc cancels without writing.
    assert!(apply(&mut app, [Action::Escape]).is_empty());
    assert!(app.export.is_none() && !app.should_quit);
    assert_eq!(
        app.message.as_deref(),
        Some("export cancelled: nothing written")
    );
    // An empty path is refused in the prompt.
    apply(&mut app, [Action::Export, Action::ExportClear]);
    assert!(apply(&mut app, [Action::ExportSubmit]).is_empty());
    assert_eq!(
        app.export.as_ref().unwrap().error.as_deref(),
        Some("give a directory or a file name")
    );
}

/// Issue 31, item 7: a failed export keeps its prompt open, on the path tried, with the error
/// under it; the next keys edit the path (they went to the timeline before: a typed path
/// became a search).
#[test]
fn a_failed_export_says_where_and_why_and_keeps_its_prompt_open() {
    let mut app = example("llama_fp16_overflow");
    app.working_dir = Some(PathBuf::from("/read-only"));
    apply(&mut app, [Action::Export, Action::ExportSubmit]);
    assert!(app.export.is_none(), "closed while the job runs");
    let why = "could not create /read-only/dumpview-report-llama_fp16_overflow-layers.3.mlp_up-1.md: \
               Read-only file system (os error 30)";
    apply(&mut app, [exported(1, Err(why.into()))]);
    let prompt = app.export.as_ref().expect("the prompt is open again");
    assert_eq!(prompt.input, "/read-only/");
    assert_eq!(
        prompt.error.as_deref(),
        Some(format!("export failed: {why}").as_str())
    );
    // The long error is not cut at 80 columns: it wraps in the prompt.
    let screen = text(&render(&mut app, 80, 24));
    let joined: String = screen.lines().map(str::trim).collect::<Vec<_>>().join(" ");
    assert!(joined.contains("(os error 30)"), "{screen}");
    // A key typed now edits the path; the timeline does not move.
    let selected = app.selected;
    send(
        &mut app,
        [key_press(ratatui::crossterm::event::KeyCode::Char('j'))],
    );
    assert_eq!(app.export.as_ref().unwrap().input, "/read-only/j");
    assert_eq!(app.selected, selected);
}

#[test]
fn the_export_job_writes_where_the_prompt_said() {
    use ratatui::crossterm::event::KeyCode;
    let dir = tempfile::tempdir().unwrap();
    let mut app = example_app("llama_fp16_overflow");
    app.working_dir = Some(dir.path().to_path_buf());
    let terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    let script = [key_press(KeyCode::Char('e')), key_press(KeyCode::Enter)];
    let (app, _) = dumpview::internals::runtime::run_with(terminal, app, script).unwrap();
    let written = dir
        .path()
        .join("dumpview-report-example_llama_fp16_overflow-layers_3_mlp_up-1.md");
    assert_eq!(
        app.message.as_deref(),
        Some(format!("report exported to {}", written.display()).as_str())
    );
    assert!(
        std::fs::read_to_string(&written)
            .unwrap()
            .contains("# First-mismatch report")
    );
}

// ---- issue 11, item 21: a regenerated example is not "not on disk" ----

/// The status bar's lines (every row below the last panel's border), joined.
fn status_of(screen: &str) -> String {
    let all: Vec<&str> = screen.lines().collect();
    let last_border = all.iter().rposition(|l| l.starts_with('└')).unwrap();
    all[last_border + 1..]
        .iter()
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn t_on_a_regenerated_example_says_so_and_where_to_compare_its_tensors() {
    // A checkout whose example was regenerated: the manifests differ from the embedded ones
    // by a byte, the tensors are there.
    let root = tempfile::tempdir().unwrap();
    for side in ["a", "b"] {
        let from = Path::new(FP16).join(side).join("rank0/match1-occ1");
        let to = root
            .path()
            .join("assets/examples/llama_fp16_overflow")
            .join(side)
            .join("rank0/match1-occ1");
        std::fs::create_dir_all(to.join("tensors")).unwrap();
        let mut manifest = std::fs::read(from.join("manifest.json")).unwrap();
        manifest.push(b'\n');
        std::fs::write(to.join("manifest.json"), manifest).unwrap();
        std::fs::copy(
            from.join(format!("tensors/{UP}.safetensors")),
            to.join(format!("tensors/{UP}.safetensors")),
        )
        .unwrap();
    }
    let pair = example_pairs()
        .into_iter()
        .find(|p| p.name == "llama_fp16_overflow")
        .unwrap();
    let session = load::embedded_in(&pair, root.path(), &Default::default()).unwrap();
    let dir = root.path().join("assets/examples/llama_fp16_overflow");
    assert_eq!(session.checkout, None);
    assert_eq!(session.checkout_differs.as_deref(), Some(dir.as_path()));
    let mut app = bench(App::new(session, false));
    assert!(apply(&mut app, [Action::CompareTensors]).is_empty());
    let said = format!(
        "{0} was regenerated since this dumpview was built: its saved tensors are not the \
         embedded run's. Compare them there with `dumpview {0}/a {0}/b`, or rebuild dumpview",
        dir.display()
    );
    assert_eq!(app.message.as_deref(), Some(said.as_str()));
    assert!(!said.contains("not on disk"));
    // Shown whole at 140 columns: wrapped onto the status lines, not cut.
    let screen = text(&render(&mut app, 140, 40));
    assert!(status_of(&screen).starts_with(&said), "{screen}");
}

#[test]
fn t_away_from_any_checkout_is_said_whole_at_140_columns() {
    let pair = example_pairs()
        .into_iter()
        .find(|p| p.name == "llama_fp16_overflow")
        .unwrap();
    let nowhere = tempfile::tempdir().unwrap();
    let session = load::embedded_in(&pair, nowhere.path(), &Default::default()).unwrap();
    assert_eq!(
        (session.checkout.as_ref(), session.checkout_differs.as_ref()),
        (None, None)
    );
    let mut app = bench(App::new(session, false));
    apply(&mut app, [Action::CompareTensors]);
    let said = app.message.clone().unwrap();
    assert!(said.contains("not on disk here"), "{said}");
    assert!(said.chars().count() > 140);
    let screen = text(&render(&mut app, 140, 40));
    assert!(status_of(&screen).starts_with(&said), "{screen}");
}

// ---- issue 11, item 22: the diff's tolerances on the workbench, and the filter (`a`) ----

#[test]
fn a_shows_only_rows_with_a_finding_and_keeps_the_selection_on_one() {
    let mut app = example("llama_kv_alias");
    let kept: Vec<String> = app
        .rows
        .iter()
        .filter(|r| r.kept_by_filter())
        .map(|r| r.key.clone())
        .collect();
    let hidden = app.rows.len() - kept.len();
    assert!(hidden > 0 && !kept.is_empty());
    assert!(
        app.rows
            .iter()
            .filter(|r| !r.kept_by_filter())
            .all(|r| r.state == dumpview::internals::app::RowState::Agrees && !r.conflict),
        "in diff mode only agreeing pairs are hidden"
    );
    // On a hidden row (the first, which agrees), `a` moves to the next row with a finding.
    apply(&mut app, [Action::Top]);
    assert!(!app.row().unwrap().kept_by_filter());
    apply(&mut app, [Action::ToggleFilter]);
    assert!(app.filter);
    assert_eq!(app.view_len(), kept.len());
    assert_eq!(key(&app), kept[0]);
    assert_eq!(
        app.message.as_deref(),
        Some(
            format!(
                "filter: {hidden} agreeing pairs hidden, {} shown (a shows all)",
                kept.len()
            )
            .as_str()
        )
    );
    // Movement stays in view.
    apply(&mut app, [Action::Down]);
    assert_eq!(key(&app), kept[1]);
    apply(&mut app, [Action::Bottom]);
    assert_eq!(key(&app), kept[kept.len() - 1]);
    apply(&mut app, [Action::Top, Action::FirstDivergence]);
    assert_eq!(key(&app), "layers.0.k_cache_read#1");
    let at = kept
        .iter()
        .position(|k| k == "layers.0.k_cache_read#1")
        .unwrap()
        + 1;
    let screen = text(&render(&mut app, 140, 40));
    // 109 findings: the 108 diverging pairs and the stride conflict's writer; with the token
    // rows the examples carry, the rows of the records whose checksum alone was inconclusive
    // after the K-cache read diverge (72 findings before them).
    assert!(
        screen.contains(&format!(
            " timeline {at}/{} · 109 findings · {hidden} hidden · (a shows all) ",
            kept.len()
        )),
        "{screen}"
    );
    for line in boxed(&screen, "timeline").iter().skip(1) {
        let key = line.split_whitespace().find(|w| w.contains('#')).unwrap();
        assert!(kept.iter().any(|k| k == key), "{key} is hidden: {line}");
    }
    // `a` again: every row, the same one selected.
    apply(&mut app, [Action::ToggleFilter]);
    assert!(!app.filter && app.visible.is_none());
    assert_eq!(key(&app), "layers.0.k_cache_read#1");
    assert_eq!(app.row_index(app.selected), app.selected);
}

#[test]
fn jumps_to_hidden_rows_say_so() {
    let mut app = example("llama_kv_alias");
    apply(&mut app, [Action::ToggleFilter]);
    // A search whose matches are all hidden says so and stays.
    let before = key(&app).to_string();
    apply(&mut app, [Action::StartSearch]);
    for c in "^embed".chars() {
        apply(&mut app, [Action::SearchChar(c)]);
    }
    apply(&mut app, [Action::SearchSubmit]);
    assert_eq!(key(&app), before);
    assert_eq!(
        app.message.as_deref(),
        Some("only rows the filter hides match /^embed/: a shows all")
    );
    // An alias member without a finding of its own: the jump turns the filter off.
    let groups = app.alias_groups();
    let (index, member) = groups
        .iter()
        .flat_map(|(_, g)| g.members.iter())
        .enumerate()
        .find(|(_, m)| {
            !app.rows
                .iter()
                .find(|r| r.key == m.key)
                .unwrap()
                .kept_by_filter()
        })
        .map(|(i, m)| (i, m.key.clone()))
        .unwrap();
    drop(groups);
    apply(&mut app, [Action::FocusNext]);
    app.alias_selected = index;
    apply(&mut app, [Action::Enter]);
    assert_eq!(key(&app), member);
    assert!(!app.filter);
    assert_eq!(
        app.message.as_deref(),
        Some(format!("filter off: {member} has no finding of its own").as_str())
    );
}

#[test]
fn in_scan_mode_the_filter_keeps_non_finite_and_conflicting_records() {
    let mut app = scan_of("llama_fp16_overflow", "b");
    apply(&mut app, [Action::ToggleFilter]);
    assert!(app.filter);
    let visible: Vec<&dumpview::internals::app::Row> = (0..app.view_len())
        .map(|p| &app.rows[app.row_index(p)])
        .collect();
    assert!(visible.iter().all(|r| r.nonfinite_a || r.conflict));
    assert_eq!(
        visible.len(),
        app.rows
            .iter()
            .filter(|r| r.nonfinite_a || r.conflict)
            .count()
    );
    assert_eq!(visible[0].key, "layers.3.mlp_up#1");
    assert_eq!(
        app.message.as_deref(),
        Some(
            format!(
                "filter: {} finite records outside stride conflicts hidden, {} shown (a shows all)",
                app.rows.len() - visible.len(),
                visible.len()
            )
            .as_str()
        )
    );
    // A capture with nothing to keep is not filtered to nothing.
    let mut clean = scan_of("llama_chunked_prefill", "a");
    apply(&mut clean, [Action::ToggleFilter]);
    assert!(!clean.filter);
    assert_eq!(
        clean.message.as_deref(),
        Some("no row has a finding: the filter would hide all 119")
    );
}

#[test]
fn the_filter_stays_across_windows_and_says_when_one_shows_nothing() {
    let mut app = two_ranks();
    apply(&mut app, [Action::ToggleFilter]);
    assert!(app.filter && app.view_len() > 0);
    // Rank 1 agrees everywhere: the filter stays on, the view is empty and says why.
    apply(&mut app, [Action::NextRank]);
    assert!(app.filter);
    assert_eq!(app.view_len(), 0);
    assert!(app.row().is_none());
    assert_eq!(
        app.message.as_deref(),
        Some("no row of this window has a finding: the filter hides all 119 (a shows all)")
    );
    let screen = text(&render(&mut app, 140, 40));
    assert!(
        screen.contains(" timeline 0/0 · 0 findings · 119 hidden · (a shows all) "),
        "{screen}"
    );
    apply(
        &mut app,
        [Action::Down, Action::NextFinding, Action::ToggleFilter],
    );
    assert!(!app.filter);
    assert_eq!(app.view_len(), 119);
}

#[test]
fn snapshot_filter_kv_alias_80x24() {
    let mut app = example("llama_kv_alias");
    update(&mut app, Action::ToggleFilter);
    insta::assert_snapshot!("filter_kv_alias_80x24", text(&render(&mut app, 80, 24)));
}

#[test]
fn tolerances_given_to_the_workbench_are_its_diffs() {
    use dumpview::model::analysis::compare::Tolerances;
    // The chunked prefill pair agrees under the default screen, not at rtol 1e-9, atol 0.
    let (a, b) = (
        Path::new("assets/examples/llama_chunked_prefill/a"),
        Path::new("assets/examples/llama_chunked_prefill/b"),
    );
    let default = bench(App::new(
        load::open(a, Some(b), &mut |_| {}).unwrap(),
        false,
    ));
    assert!(!default.rows.iter().any(|r| r.first_divergence));
    let tight = Tolerances::uniform(1e-9, 0.0);
    let mut app = bench(App::new(
        load::open_with(a, Some(b), Default::default(), &tight, &mut |_| {}).unwrap(),
        false,
    ));
    assert_eq!(key(&app), "layers.0.k_cache_read#1");
    assert!(app.row().unwrap().first_divergence);
    let screen = text(&render(&mut app, 140, 40));
    assert!(
        screen
            .lines()
            .next()
            .unwrap()
            .ends_with("tolerances: rtol 1e-9 atol 0e0"),
        "{screen}"
    );
}

#[test]
fn the_detail_says_what_gives_it_room() {
    let mut app = example("llama_kv_alias");
    let note = |app: &mut Bench| {
        let screen = text(&render(app, 140, 40));
        screen
            .lines()
            .find_map(|l| {
                l.split("more lines: ] or ")
                    .nth(1)
                    .map(|r| r.split(" ─").next().unwrap().to_string())
            })
            .unwrap_or_default()
    };
    // The alias panel focused takes half the column: Tab gives the room back (Enter would
    // jump to a member).
    apply(&mut app, [Action::FocusNext]);
    assert_eq!(note(&mut app), "Tab to the timeline");
    apply(&mut app, [Action::FocusNext]);
    assert_eq!(
        note(&mut app),
        "",
        "every line shown with the timeline focused"
    );
    let screen = text(&render(&mut app, 80, 24));
    assert!(screen.contains("more lines: ] or Enter widens"), "{screen}");
}

#[test]
fn the_detail_scrolls_to_its_layout_lines_at_80x24() {
    let mut app = example("llama_kv_alias");
    apply(&mut app, [Action::FirstDivergence]);
    let screen = text(&render(&mut app, 80, 24));
    assert!(
        !screen.contains("stride"),
        "not reached unscrolled:\n{screen}"
    );
    // `]` until the last page: the stride, storage and tensor path lines come into view.
    apply(&mut app, (0..40).map(|_| Action::DetailScroll(1)));
    let screen = text(&render(&mut app, 80, 24));
    assert!(screen.contains("stride"), "{screen}");
    assert!(screen.contains("storage"), "{screen}");
    assert!(screen.contains("tensor"), "{screen}");
    // 19 lines: 18, and the token rows' line ("token rows: 12 of 12 diverge, …").
    assert!(screen.contains("of 19: ] [ scroll"), "{screen}");
    insta::assert_snapshot!("detail_scrolled_kv_alias_80x24", screen);
    // Scrolling back up past the top and a new selection both start at the top again.
    apply(&mut app, (0..60).map(|_| Action::DetailScroll(-1)));
    assert_eq!(app.detail_scroll, 0);
    apply(&mut app, [Action::DetailScroll(3), Action::Down]);
    assert_eq!(app.detail_scroll, 0);
}

// ---- `p`: replay the operator of a stage on its captured input set ----

use dumpview::internals::app::jobs::{REPLAY_TICK_MS, ReplaySpec};
use dumpview::internals::app::replay::{HistoryEvent, ReplayField};
use dumpview::internals::app::session::Side;
use dumpview::model::replay::history::Entry;
use dumpview::model::replay::{Execution, ReplayDir, ReplayResult, ReplayVerdict, Standard};

const KV: &str = "assets/examples/llama_kv_alias";
const NORM: &str = "layers.0.input_norm#1";
const EPS_AFTER: &str = "tests/python/replay_candidates.py:rms_norm_eps_after";

/// The KV-alias pair (float32) from disk: both windows hold the input sets of
/// `layers.0.input_norm#1` and `layers.0.rope#1`.
fn kv_on_disk() -> Bench {
    let (a, b) = (Path::new(KV).join("a"), Path::new(KV).join("b"));
    bench(App::new(
        load::open(&a, Some(&b), &mut |_| {}).unwrap(),
        false,
    ))
}

/// Selects the row of `stage`.
fn select(app: &mut Bench, stage: &str) {
    let i = app.rows.iter().position(|r| r.key == stage).unwrap();
    app.select(i);
    assert_eq!(key(app), stage);
}

fn typed(text: &str) -> Vec<Action> {
    text.chars().map(Action::ReplayChar).collect()
}

fn window_dir(side: &str) -> PathBuf {
    Path::new(KV).join(side).join("rank0/match1-occ1")
}

/// A replay output directory committed for these tests (tests/fixtures/replay_results/make.sh),
/// judged as `services::replay::run` judges it, with a fixed account of the run.
fn replayed(name: &str) -> ReplayResult {
    let dir = Path::new("tests/fixtures/replay_results").join(name);
    let replay = ReplayDir::open(&dir)
        .unwrap()
        .judge(Standard::Msprobe)
        .unwrap();
    ReplayResult {
        replay,
        run: Execution {
            host: None,
            python: ".venv/bin/python".into(),
            python_chosen_by: "$DUMPVIEW_PYTHON".into(),
            out_dir: dir.display().to_string(),
            out_dir_default: false,
            wall_s: 2.99,
            log: Vec::new(),
        },
        warnings: Vec::new(),
    }
}

fn replay_event(id: u64, event: JobEvent) -> Action {
    job(id, Slot::Replay, event)
}

fn log_line(id: u64, elapsed_ms: u64, line: Option<&str>) -> Action {
    replay_event(
        id,
        JobEvent::Progress(JobProgress::Replay {
            elapsed_ms,
            line: line.map(str::to_string),
        }),
    )
}

/// The KV pair with `layers.0.input_norm#1`'s dialog filled in with the eps-after candidate
/// and started (job 1, its log streaming).
fn replay_started() -> Bench {
    let mut app = kv_on_disk();
    select(&mut app, NORM);
    apply(&mut app, [Action::Replay]);
    apply(&mut app, typed(EPS_AFTER));
    apply(&mut app, [Action::ReplaySubmit]);
    app
}

#[test]
fn timeline_marks_the_stages_with_an_input_set_and_help_and_status_name_p() {
    let mut app = kv_on_disk();
    let marked: Vec<&str> = app
        .rows
        .iter()
        .filter(|r| r.input_a || r.input_b)
        .map(|r| r.key.as_str())
        .collect();
    // layers.0.rope#1's input set has no record of its own in the timeline.
    assert_eq!(marked, [NORM]);
    let row = app.rows.iter().find(|r| r.key == NORM).unwrap();
    assert!(row.input_a && row.input_b, "both captures hold it");
    select(&mut app, NORM);
    let buffer = render(&mut app, 100, 30);
    let screen = text(&buffer);
    let line = screen
        .lines()
        .find(|l| l.contains(&format!("2   {NORM}")))
        .unwrap();
    assert!(line.starts_with("│ · ↻ 2 "), "{line}");
    let (x, y) = find(&buffer, "↻");
    assert_eq!(buffer[(x, y)].fg, Color::LightCyan);
    let others = screen.lines().find(|l| l.contains("layers.0.q#1")).unwrap();
    assert!(others.starts_with("│ ·   3 "), "{others}");
    assert!(status_of(&screen).contains("p replay"), "{screen}");
    update(&mut app, Action::ToggleHelp);
    let help = text(&render(&mut app, 120, 60));
    assert!(
        help.contains("replay the operator on this stage's captured input set (↻; Esc cancels)"),
        "{help}"
    );
    assert!(
        help.contains("timeline glyphs (non-finite, comparison, alias, input set)")
            && help.contains("a captured input set (capture_inputs): p replays"),
        "{help}"
    );
    update(&mut app, Action::ToggleHelp);

    // NO_COLOR: the glyph is the mark.
    let mut plain = kv_on_disk();
    plain.no_color = true;
    let buffer = render(&mut plain, 100, 30);
    let (x, y) = find(&buffer, "↻");
    assert_eq!(buffer[(x, y)].fg, Color::Reset);

    // A capture without input sets has no ↻ column and offers no p.
    let mut minilm = scan_of("minilm_fp32_vs_bf16", "a");
    let screen = text(&render(&mut minilm, 100, 30));
    assert!(
        !screen.contains('↻') && !screen.contains("p replay"),
        "{screen}"
    );
}

#[test]
fn p_on_a_stage_without_an_input_set_says_so() {
    let mut app = kv_on_disk();
    select(&mut app, "layers.0.q#1");
    let effects = apply(&mut app, [Action::Replay]);
    assert!(effects.is_empty() && app.replay_dialog.is_none());
    let message = app.message.clone().unwrap();
    assert!(
        message.starts_with("layers.0.q#1 has no captured input set to replay")
            && message.contains("capture_inputs(\"layers.0.q\", ...)"),
        "{message}"
    );
    // The window's input set without a row of its own is named, with the command for it.
    assert!(
        message.ends_with(
            "; layers.0.rope#1 has no row of its own: `dumpview replay \
             assets/examples/llama_kv_alias/a/rank0/match1-occ1 --stage STAGE#N`"
        ),
        "{message}"
    );
    let screen = text(&render(&mut app, 100, 30));
    assert!(screen.contains("has no captured input set"), "{screen}");
}

#[test]
fn p_on_an_embedded_example_names_the_checkout_path_a_command_takes() {
    // The embedded pair's sources are labelled `embedded:assets/examples/…`; a command given
    // that label reads `embedded` as an ssh host, so the hint names the checkout's path.
    let mut app = example("llama_fp16_overflow");
    let key = app
        .rows
        .iter()
        .find(|r| !r.input_a && !r.input_b)
        .unwrap()
        .key
        .clone();
    select(&mut app, &key);
    apply(&mut app, [Action::Replay]);
    let message = app.message.clone().unwrap();
    assert!(
        message.ends_with(
            "`dumpview replay assets/examples/llama_fp16_overflow/a/rank0/match1-occ1 \
             --stage STAGE#N`"
        ),
        "{message}"
    );
}

#[test]
fn p_opens_the_dialog_prefilled_from_the_stage_name_and_asks_for_the_history() {
    let mut app = kv_on_disk();
    select(&mut app, NORM);
    let effects = apply(&mut app, [Action::Replay]);
    assert_eq!(effects, vec![Effect::LoadReplayHistory]);
    let dialog = app.replay_dialog.clone().expect("the dialog");
    assert_eq!((dialog.rank, dialog.stage.as_str()), (0, NORM));
    // No operator recorded: the candidate is empty, the reference what the name suggests.
    assert_eq!(dialog.candidate, "");
    assert_eq!(dialog.reference, "builtin:rms_norm");
    assert_eq!(dialog.suggested, Some("builtin:rms_norm"));
    assert_eq!(dialog.standard, "msprobe");
    assert_eq!(dialog.focus, ReplayField::Candidate);
    // Two captures hold the set: the side is a field, A by default.
    let sides: Vec<(Side, PathBuf)> = dialog
        .targets
        .iter()
        .map(|t| (t.side, t.dump.clone()))
        .collect();
    assert_eq!(
        sides,
        [(Side::A, window_dir("a")), (Side::B, window_dir("b"))]
    );
    assert_eq!(dialog.chosen().side, Side::A);
    assert_eq!(
        dialog.fields(),
        [
            ReplayField::Side,
            ReplayField::Candidate,
            ReplayField::Reference,
            ReplayField::Standard,
            ReplayField::Python
        ]
    );
    // The dialog owns the keys: `q` and `/` are text, the timeline stays.
    apply(&mut app, typed("q/"));
    assert_eq!(app.replay_dialog.as_ref().unwrap().candidate, "q/");
    assert!(!app.should_quit && !app.search.editing);
    assert_eq!(key(&app), NORM);
    // Esc closes it; nothing ran.
    let effects = apply(&mut app, [Action::ReplayCancel]);
    assert!(effects.is_empty() && app.replay_dialog.is_none());
    assert_eq!(
        app.message.as_deref(),
        Some("replay cancelled: nothing was run")
    );
    // The history was asked for once: the next dialog does not ask again once it came.
    apply(
        &mut app,
        [Action::ReplayHistory(HistoryEvent::Loaded {
            entries: Vec::new(),
            note: None,
        })],
    );
    assert!(apply(&mut app, [Action::Replay]).is_empty());
}

#[test]
fn the_recorded_operator_prefills_the_candidate_and_decides_the_reference() {
    let mut app = kv_on_disk();
    for op in [
        "torch.ops.npu.npu_rms_norm",
        "torch.nn.functional.layer_norm",
    ] {
        {
            let session = &mut app.loaded.as_mut().unwrap().session;
            let set = session.a.windows[0]
                .input_sets
                .iter_mut()
                .find(|s| s.stage == "layers.0.input_norm")
                .unwrap();
            set.op = Some(op.to_string());
        }
        select(&mut app, NORM);
        apply(&mut app, [Action::Replay]);
        let dialog = app.replay_dialog.take().unwrap();
        assert_eq!(dialog.candidate, op);
        assert_eq!(dialog.chosen().op.as_deref(), Some(op));
        let expected = if op.contains("layer_norm") {
            "builtin:layer_norm"
        } else {
            "builtin:rms_norm"
        };
        assert_eq!(dialog.reference, expected, "{op}");
    }
}

#[test]
fn fields_are_edited_tabbed_through_and_walk_their_earlier_entries() {
    let mut app = kv_on_disk();
    select(&mut app, NORM);
    apply(&mut app, [Action::Replay]);
    let entry = |candidate: &str, python: &str| Entry {
        candidate: candidate.into(),
        reference: "builtin:rms_norm".into(),
        standard: "msprobe".into(),
        python: python.into(),
        ..Entry::default()
    };
    apply(
        &mut app,
        [Action::ReplayHistory(HistoryEvent::Loaded {
            entries: vec![
                entry("mine.py:newest", "/opt/py"),
                entry("mine.py:older", ""),
            ],
            note: None,
        })],
    );
    let dialog = |app: &Bench| app.replay_dialog.clone().unwrap();
    apply(&mut app, typed("draftx"));
    apply(&mut app, [Action::ReplayBackspace]);
    assert_eq!(dialog(&app).candidate, "draft");
    // Up: the newest earlier candidate, then the older; past the oldest it stays.
    apply(&mut app, [Action::ReplayEarlier]);
    assert_eq!(dialog(&app).candidate, "mine.py:newest");
    apply(&mut app, [Action::ReplayEarlier, Action::ReplayEarlier]);
    assert_eq!(dialog(&app).candidate, "mine.py:older");
    // Down comes back, and past the newest gives back what was typed.
    apply(&mut app, [Action::ReplayLater]);
    assert_eq!(dialog(&app).candidate, "mine.py:newest");
    apply(&mut app, [Action::ReplayLater]);
    assert_eq!(dialog(&app).candidate, "draft");
    apply(&mut app, [Action::ReplayClear]);
    assert_eq!(dialog(&app).candidate, "");
    // Tab: reference, standard, python, then round to the side.
    apply(&mut app, [Action::ReplayNextField, Action::ReplayNextField]);
    assert_eq!(dialog(&app).focus, ReplayField::Standard);
    // The standard walks its three names; allclose shows atol and rtol.
    apply(&mut app, [Action::ReplayLater]);
    assert_eq!(dialog(&app).standard, "dynamo");
    apply(&mut app, [Action::ReplayLater]);
    assert_eq!(dialog(&app).standard, "allclose");
    assert_eq!(
        dialog(&app).fields(),
        [
            ReplayField::Side,
            ReplayField::Candidate,
            ReplayField::Reference,
            ReplayField::Standard,
            ReplayField::Atol,
            ReplayField::Rtol,
            ReplayField::Python
        ]
    );
    apply(&mut app, [Action::ReplayNextField]);
    apply(&mut app, typed("1e-5"));
    apply(&mut app, [Action::ReplayNextField]);
    apply(&mut app, typed("1e-3"));
    apply(&mut app, [Action::ReplayNextField]);
    assert_eq!(dialog(&app).focus, ReplayField::Python);
    apply(&mut app, [Action::ReplayEarlier]);
    assert_eq!(dialog(&app).python, "/opt/py");
    apply(&mut app, [Action::ReplayNextField]);
    assert_eq!(dialog(&app).focus, ReplayField::Side);
    // Issue 31, item 3: letters typed after Tab wrapped round to the side (meant for the python
    // field) never switch it; the dialog says where the cursor is.
    apply(&mut app, typed("bin"));
    assert_eq!(dialog(&app).chosen().side, Side::A);
    assert!(
        dialog(&app)
            .error
            .as_deref()
            .is_some_and(|e| e.contains("the cursor is on the side field")),
        "{:?}",
        dialog(&app).error
    );
    // Space or Up/Down toggle it.
    apply(&mut app, typed(" "));
    assert_eq!(dialog(&app).chosen().side, Side::B);
    apply(&mut app, [Action::ReplayEarlier]);
    assert_eq!(dialog(&app).chosen().side, Side::A);
    apply(&mut app, [Action::ReplayLater]);
    assert_eq!(dialog(&app).chosen().side, Side::B);
}

#[test]
fn enter_starts_the_replay_job_with_the_fields_and_remembers_them() {
    let mut app = kv_on_disk();
    select(&mut app, NORM);
    apply(&mut app, [Action::Replay]);
    // An empty candidate: the dialog says what to give and stays open.
    apply(&mut app, [Action::ReplayNextField]);
    let effects = apply(&mut app, [Action::ReplaySubmit]);
    assert!(effects.is_empty());
    let dialog = app.replay_dialog.clone().unwrap();
    assert_eq!(dialog.focus, ReplayField::Candidate);
    assert!(
        dialog
            .error
            .as_deref()
            .unwrap()
            .starts_with("give the candidate: builtin:NAME"),
        "{:?}",
        dialog.error
    );
    apply(&mut app, typed(EPS_AFTER));
    // allclose without its tolerances is refused: a tolerance is never assumed.
    apply(&mut app, [Action::ReplayNextField, Action::ReplayNextField]);
    apply(&mut app, [Action::ReplayLater, Action::ReplayLater]);
    assert!(apply(&mut app, [Action::ReplaySubmit]).is_empty());
    let dialog = app.replay_dialog.clone().unwrap();
    assert_eq!(dialog.focus, ReplayField::Atol);
    assert_eq!(
        dialog.error.as_deref(),
        Some("allclose needs atol: a tolerance is never assumed")
    );
    apply(&mut app, typed("1e-5"));
    apply(&mut app, [Action::ReplayNextField]);
    apply(&mut app, typed("x"));
    apply(&mut app, [Action::ReplaySubmit]);
    assert_eq!(
        app.replay_dialog.as_ref().unwrap().error.as_deref(),
        Some("rtol: \"x\" is not a number")
    );
    apply(&mut app, [Action::ReplayClear]);
    apply(&mut app, typed("1e-3"));
    // Side B (Space toggles it), then Enter.
    apply(&mut app, [Action::ReplayNextField, Action::ReplayNextField]);
    apply(&mut app, typed(" "));
    let effects = apply(&mut app, [Action::ReplaySubmit]);
    let entry = Entry {
        candidate: EPS_AFTER.into(),
        reference: "builtin:rms_norm".into(),
        standard: "allclose".into(),
        atol: "1e-5".into(),
        rtol: "1e-3".into(),
        python: String::new(),
    };
    assert_eq!(
        effects,
        vec![
            Effect::Spawn(JobSpec::Replay(ReplaySpec {
                rank: 0,
                stage: NORM.into(),
                side: Side::B,
                dump: window_dir("b"),
                candidate: EPS_AFTER.into(),
                reference: "builtin:rms_norm".into(),
                standard: Standard::Allclose {
                    atol: 1e-5,
                    rtol: 1e-3
                },
                python: None,
            })),
            Effect::RememberReplay(entry.clone()),
        ]
    );
    assert_eq!(app.0.jobs().current(Slot::Replay), Some(JobId(1)));
    assert!(app.replay_dialog.is_none());
    let job = app.replay_job.clone().unwrap();
    assert_eq!((job.stage.as_str(), job.side), (NORM, Side::B));
    // Remembered at once (the file is the runtime's), first.
    assert_eq!(app.replay_history.as_deref(), Some(&[entry.clone()][..]));
    // A history that comes late is merged behind what was remembered meanwhile.
    apply(
        &mut app,
        [Action::ReplayHistory(HistoryEvent::Loaded {
            entries: vec![Entry {
                candidate: "older.py:f".into(),
                ..Entry::default()
            }],
            note: Some("replay history /x ignored (broken)".into()),
        })],
    );
    let history = app.replay_history.clone().unwrap();
    assert_eq!(history[0], entry);
    assert_eq!(history[1].candidate, "older.py:f");
    assert_eq!(
        app.message.as_deref(),
        Some("replay history /x ignored (broken)")
    );
}

#[test]
fn the_job_streams_its_log_and_its_result_opens_and_goes_into_the_report() {
    let mut app = replay_started();
    assert_eq!(
        app.0.take_effects(),
        Vec::<Effect>::new(),
        "replay_started took them"
    );
    apply(
        &mut app,
        [
            log_line(
                1,
                300,
                Some("replay_op: layers.0.input_norm#1, 3 arguments"),
            ),
            log_line(1, REPLAY_TICK_MS + 300, None),
            log_line(7, 999, Some("from another job")),
            log_line(1, 1_900, Some("replay_op: candidate ok")),
        ],
    );
    let job = app.replay_job.clone().unwrap();
    assert_eq!(
        job.log,
        [
            "replay_op: layers.0.input_norm#1, 3 arguments",
            "replay_op: candidate ok"
        ]
    );
    assert_eq!(job.elapsed_ms, 1_900);
    let screen = text(&render(&mut app, 100, 30));
    assert!(
        screen.contains("replay · rank 0 · layers.0.input_norm#1 · A · 1.9 s")
            && screen.contains("replay_op: candidate ok")
            && screen.contains("Esc cancels"),
        "{screen}"
    );
    // The log popup is modal: the timeline does not move under it.
    apply(&mut app, [Action::Bottom, Action::NextFinding]);
    assert_eq!(key(&app), NORM);

    apply(
        &mut app,
        [replay_event(
            1,
            JobEvent::Done(JobOutput::Replayed(Box::new(replayed("eps_after")))),
        )],
    );
    assert!(app.replay_job.is_none());
    let kept = &app.replay_results[0];
    let result = kept.outcome.as_ref().unwrap();
    assert_eq!(result.replay.verdict, ReplayVerdict::Error);
    assert_eq!(kept.log.len(), 2);
    assert_eq!(app.replay_view.map(|v| (v.result, v.output)), Some((0, 0)));
    let screen = text(&render(&mut app, 100, 30));
    for expected in [
        "ERROR  Relative error is greater than 0.001",
        "max_abs_diff    0.00464477 at [4, 206]",
        "first mismatch  [0, 0]",
        "max ULP         27185 in float32",
        "|a-b| by decade",
    ] {
        assert!(screen.contains(expected), "{expected:?} in:\n{screen}");
    }
    // Modal too; Esc closes it, and p opens the dialog on what was run.
    apply(&mut app, [Action::Down, Action::NextFinding]);
    assert_eq!(key(&app), NORM);
    apply(&mut app, [Action::Escape]);
    assert!(app.replay_view.is_none() && !app.should_quit);
    apply(&mut app, [Action::Replay]);
    assert_eq!(app.replay_dialog.as_ref().unwrap().candidate, EPS_AFTER);
    apply(&mut app, [Action::ReplayCancel]);

    // The export carries it in "Replays", with its files as evidence.
    let effects = apply(&mut app, [Action::Export, Action::ExportSubmit]);
    let [Effect::Spawn(JobSpec::Export { markdown, .. })] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    let section = &markdown[markdown.find("## Replays").expect(markdown)..];
    assert!(
        section.contains("### `layers.0.input_norm#1`: error (msprobe)")
            && section.contains("- evidence: `tests/fixtures/replay_results/eps_after`")
            && section.contains("max_abs_diff 0.00464477 at [4, 206]"),
        "{section}"
    );
}

#[test]
fn esc_cancels_the_running_replay_once_and_a_failure_is_shown_with_its_log() {
    let mut app = replay_started();
    let effects = apply(&mut app, [Action::Escape]);
    assert_eq!(effects, vec![Effect::Cancel(Slot::Replay)]);
    assert!(app.replay_job.as_ref().unwrap().cancelling);
    assert!(apply(&mut app, [Action::Escape]).is_empty());
    assert!(!app.should_quit);
    // After a cancel the runtime drops progress and reads a failure as Cancelled.
    apply(
        &mut app,
        [
            log_line(1, 5_000, Some("dropped")),
            replay_event(1, JobEvent::Failed("killed".into())),
        ],
    );
    assert!(app.replay_job.is_none() && app.replay_view.is_none());
    assert!(app.replay_results.is_empty(), "nothing kept");
    assert!(
        app.message
            .as_deref()
            .unwrap()
            .starts_with("replay of layers.0.input_norm#1 cancelled"),
        "{:?}",
        app.message
    );

    // p again reopens the dialog on what the cancelled replay was asked.
    apply(&mut app, [Action::Replay]);
    assert_eq!(app.replay_dialog.as_ref().unwrap().candidate, EPS_AFTER);
    // A replay that could not be judged: the popup says why, with the log's last lines.
    apply(&mut app, [Action::ReplaySubmit]);
    assert_eq!(app.0.jobs().current(Slot::Replay), Some(JobId(2)));
    assert!(app.replay_cancelled.is_none(), "a new start supersedes it");
    apply(
        &mut app,
        [
            log_line(2, 100, Some("replay_op: error: no stage named x")),
            replay_event(
                2,
                JobEvent::Failed("replay_op.py: error: no stage named x".into()),
            ),
        ],
    );
    let kept = &app.replay_results[0];
    assert_eq!(
        kept.outcome.as_ref().unwrap_err(),
        "replay_op.py: error: no stage named x"
    );
    let screen = text(&render(&mut app, 100, 30));
    assert!(
        screen.contains("NOT JUDGED") && screen.contains("replay_op: error: no stage named x"),
        "{screen}"
    );
    // Not evidence: the report has no Replays section.
    apply(&mut app, [Action::Escape]);
    let effects = apply(&mut app, [Action::Export, Action::ExportSubmit]);
    let [Effect::Spawn(JobSpec::Export { markdown, .. })] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    assert!(!markdown.contains("## Replays"), "{markdown}");
}

#[test]
fn snapshot_replay_dialog_log_and_results_100x30() {
    let mut app = kv_on_disk();
    select(&mut app, NORM);
    apply(&mut app, [Action::Replay]);
    apply(&mut app, typed(EPS_AFTER));
    insta::assert_snapshot!("replay_dialog_100x30", text(&render(&mut app, 100, 30)));
    apply(&mut app, [Action::ReplaySubmit]);
    apply(
        &mut app,
        [
            log_line(
                1,
                250,
                Some(
                    "replay_op: assets/examples/llama_kv_alias/a/rank0/match1-occ1/manifest.json: layers.0.input_norm#1, 3 arguments, candidate on cpu, reference on cpu",
                ),
            ),
            log_line(
                1,
                1_250,
                Some(
                    "replay_op: candidate tests/python/replay_candidates.py:rms_norm_eps_after: ok in 6.67 ms, outputs out",
                ),
            ),
        ],
    );
    insta::assert_snapshot!("replay_running_100x30", text(&render(&mut app, 100, 30)));
    apply(
        &mut app,
        [replay_event(
            1,
            JobEvent::Done(JobOutput::Replayed(Box::new(replayed("eps_after")))),
        )],
    );
    insta::assert_snapshot!("replay_result_100x30", text(&render(&mut app, 100, 30)));
    // Scrolled to its end: the output directory and the run.
    apply(&mut app, [Action::Bottom]);
    let screen = text(&render(&mut app, 100, 30));
    assert!(
        screen.contains("outputs    tests/fixtures/replay_results/eps_after")
            && screen
                .contains("ran        here with .venv/bin/python ($DUMPVIEW_PYTHON) in 2.99 s"),
        "{screen}"
    );
    apply(&mut app, [Action::Escape, Action::Replay]);
    apply(&mut app, [Action::ReplayClear]);
    apply(&mut app, typed("tests/python/replay_candidates.py:crash"));
    apply(&mut app, [Action::ReplaySubmit]);
    apply(
        &mut app,
        [replay_event(
            2,
            JobEvent::Done(JobOutput::Replayed(Box::new(replayed("crash")))),
        )],
    );
    insta::assert_snapshot!("replay_crash_100x30", text(&render(&mut app, 100, 30)));
}

#[test]
fn replay_verdicts_are_coloured_words_and_words_without_colour() {
    let mut app = replay_started();
    apply(
        &mut app,
        [replay_event(
            1,
            JobEvent::Done(JobOutput::Replayed(Box::new(replayed("eps_after")))),
        )],
    );
    let buffer = render(&mut app, 100, 30);
    let screen = text(&buffer);
    let (y, line) = screen
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("ERROR  Relative"))
        .unwrap();
    let x = line[..line.find("ERROR").unwrap()].chars().count() as u16;
    let cell = &buffer[(x, y as u16)];
    assert_eq!(cell.fg, Color::Red);
    assert!(cell.modifier.contains(Modifier::BOLD));
    app.no_color = true;
    let buffer = render(&mut app, 100, 30);
    for cell in buffer.content() {
        assert_eq!((cell.fg, cell.bg), (Color::Reset, Color::Reset), "NO_COLOR");
    }
    assert!(text(&buffer).contains("ERROR  Relative"));
}

#[test]
fn the_detail_of_a_merged_record_shows_the_merged_statistics_and_its_per_rank_pieces() {
    let root = std::path::Path::new("tests/fixtures/layouts");
    let mut app = bench(App::new(
        load::open(
            &root.join("tp1"),
            Some(&root.join("tp2_wrong_shard")),
            &mut |_| {},
        )
        .unwrap(),
        false,
    ));
    assert_eq!(
        key(&app),
        "layers.0.up#1",
        "opens on the merged first divergence"
    );
    let screen = text(&render(&mut app, 140, 40));
    let detail = boxed(&screen, "detail");
    let at = detail
        .iter()
        .position(|l| l == "B merged from 2 ranks")
        .unwrap_or_else(|| panic!("{detail:#?}"));
    assert!(
        detail[at + 1].starts_with("  rank 0 [6, 8] 0/0"),
        "{:?}",
        detail[at + 1]
    );
    assert!(
        detail[at + 2].starts_with("  rank 1 [6, 8] 0/0"),
        "{:?}",
        detail[at + 2]
    );
    // The B column holds the merged statistics the diff compared, not rank 0's piece: the
    // merged l2 is sqrt(2) times rank 0's (rank 1 holds a copy of rank 0's slice).
    let l2 = detail.iter().find(|l| l.starts_with("l2")).unwrap();
    let pair = app.loaded.as_ref().unwrap().diff().unwrap().windows[0].pairs[3].clone();
    let merged = pair.comparison.stats[4].b.unwrap();
    let own = pair.pieces_b[0].stats.as_ref().unwrap().l2.unwrap();
    assert!(
        (merged - own * 2f64.sqrt()).abs() < 1e-12,
        "{merged} vs {own}"
    );
    let shown: f64 = l2.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!((shown - merged).abs() < 1e-3 * merged, "{l2}: {merged}");
    assert!(
        detail
            .iter()
            .any(|l| l.starts_with("nan/inf") && l.contains("0/0")),
        "{detail:#?}"
    );
}

/// Issue 31, item 13: an msprobe scalar argument's dtype column names its Python type (`int`),
/// not a width-less abbreviation (`i`).
#[test]
fn msprobe_scalars_show_their_python_types() {
    let dir = std::path::Path::new("tests/fixtures/msprobe/resnet_gpu");
    let mut app = bench(App::new(load::open(dir, None, &mut |_| {}).unwrap(), false));
    let row = app
        .rows
        .iter()
        .position(|r| {
            let w = &app.loaded.as_ref().unwrap().session.a.windows[0];
            r.a.is_some_and(|i| &*w.records[i].dtype == "int")
        })
        .expect("an int scalar");
    app.selected = row;
    let screen = text(&render(&mut app, 140, 40));
    let key = &app.rows[row].key;
    // The timeline's row (not the detail's title, which names the key too).
    let line = screen
        .lines()
        .find(|l| l.contains(key.as_str()) && !l.contains("stage#occ"))
        .unwrap_or_else(|| panic!("{key} in\n{screen}"));
    assert!(line.contains(" int "), "{line}");
}

/// Issue 31, item 8: `e` on captures opened by absolute path names the report after the
/// captures' last components and the first finding, not after both whole paths.
#[test]
fn the_export_name_is_short_and_readable() {
    let root = std::fs::canonicalize("assets/examples/llama_fp16_overflow").unwrap();
    let mut app = bench(App::new(
        load::open(&root.join("a"), Some(&root.join("b")), &mut |_| {}).unwrap(),
        false,
    ));
    let effects = apply(&mut app, [Action::Export, Action::ExportSubmit]);
    let hint = effects
        .iter()
        .find_map(|e| match e {
            Effect::Spawn(JobSpec::Export { name_hint, .. }) => Some(name_hint.clone()),
            _ => None,
        })
        .expect("an export job");
    assert_eq!(
        hint,
        "llama_fp16_overflow-a_vs_llama_fp16_overflow-b-layers.3.mlp_up"
    );
}

/// Issue 31, item 6: the loading gauge names its phase and counts both captures: finding the
/// files, reading A then B (half the bar each), analysing.
#[test]
fn the_loading_gauge_names_the_phase_and_both_captures() {
    use dumpview::model::ingest::{LoadPhase, Progress};
    let mut app = bench(App::loading(false));
    let screen = text(&render(&mut app, 100, 30));
    assert!(
        screen.contains("finding the capture's manifests…"),
        "{screen}"
    );
    // (What the loading job's progress sets: the update's part is tested with the loop.)
    let mut show = |p: Progress| {
        app.loading = Some(p);
        text(&render(&mut app, 100, 30))
    };
    let reading_b = Progress {
        phase: LoadPhase::Reading,
        capture: 1,
        captures: 2,
        files_done: 2,
        files_total: 4,
        bytes_done: 1_000_000,
        bytes_total: 2_000_000,
        records: 300,
    };
    let screen = show(reading_b);
    assert!(
        screen.contains("reading B: 2/4 files, 1.0/2.0 MB, 300 records"),
        "{screen}"
    );
    let screen = show(Progress {
        phase: LoadPhase::Analysing,
        records: 600,
        ..reading_b
    });
    assert!(
        screen.contains("analysing 600 records: scans, diff, diagnosis"),
        "{screen}"
    );
    // A's half and B's half: reading B halfway fills three quarters of the bar.
    assert_eq!(dumpview::internals::app::loading::label(&reading_b).0, 0.75);
}

/// The load reports A's reading, B's, then the analysis, each with the totals known first.
#[test]
fn a_pair_load_reports_a_then_b_then_the_analysis() {
    use dumpview::model::ingest::LoadPhase;
    let root = std::path::Path::new("assets/examples/llama_fp16_overflow");
    let mut seen = Vec::new();
    load::open(&root.join("a"), Some(&root.join("b")), &mut |p| {
        seen.push(p)
    })
    .unwrap();
    let phases: Vec<(LoadPhase, usize, usize, usize)> = seen
        .iter()
        .map(|p| (p.phase, p.capture, p.files_done, p.files_total))
        .collect();
    assert_eq!(
        phases,
        [
            (LoadPhase::Reading, 0, 0, 1),
            (LoadPhase::Reading, 0, 1, 1),
            (LoadPhase::Reading, 1, 0, 1),
            (LoadPhase::Reading, 1, 1, 1),
            (LoadPhase::Analysing, 1, 1, 1),
        ]
    );
    assert!(seen.iter().all(|p| p.captures == 2));
    assert_eq!(seen.last().unwrap().records, 119 + 119);
}

/// Issue 31, item 14: `f` on a window without NaN or inf goes to the window that holds one and
/// says so (it said only "no non-finite record" before).
#[test]
fn f_goes_to_the_window_that_holds_a_non_finite_record_and_says_so() {
    // The fp16 pair's two runs under one root, scanned as one capture: two windows, the
    // first (A's run) finite, the second (B's) with the overflow.
    let root = std::path::Path::new("assets/examples/llama_fp16_overflow");
    let mut app = bench(App::new(
        load::open(root, None, &mut |_| {}).unwrap(),
        false,
    ));
    let windows = app.loaded.as_ref().unwrap().windows.len();
    assert_eq!(windows, 2);
    if app.rows.iter().any(|r| r.first_nonfinite) {
        update(&mut app, Action::NextWindow);
    }
    assert!(app.rows.iter().all(|r| !r.first_nonfinite));
    update(&mut app, Action::FirstNonFinite);
    assert!(app.row().unwrap().first_nonfinite, "{:?}", app.message);
    assert_eq!(key(&app), "layers.3.mlp_up#1");
    assert!(
        app.message
            .as_deref()
            .is_some_and(|m| m.starts_with("the window you were on holds no NaN or inf")),
        "{:?}",
        app.message
    );
}

/// Issue 31, item 14: at 80x24 the header keeps the tolerances the user set whole (the paths
/// give way).
#[test]
fn the_80x24_header_keeps_the_tolerances_whole() {
    let root = std::path::Path::new("assets/examples/llama_fp16_overflow");
    let tolerances = dumpview::model::analysis::compare::Tolerances::uniform(1e-3, 1e-6);
    let mut app = bench(App::new(
        load::open_with(
            &root.join("a"),
            Some(&root.join("b")),
            Default::default(),
            &tolerances,
            &mut |_| {},
        )
        .unwrap(),
        false,
    ));
    let screen = text(&render(&mut app, 80, 24));
    let title = screen.lines().next().unwrap().trim_end();
    assert!(
        title.ends_with("tolerances: rtol 1e-3 atol 1e-6"),
        "{title}"
    );
}

/// Issue 31, item 5: a dialog closed with Esc keeps what was typed; the next `p` on the same
/// stage opens on it (another stage opens fresh).
#[test]
fn a_cancelled_replay_dialog_prefills_the_next_one() {
    let mut app = kv_on_disk();
    select(&mut app, NORM);
    apply(&mut app, [Action::Replay]);
    apply(&mut app, [Action::ReplayClear]);
    apply(&mut app, typed("mine.py:norm"));
    apply(&mut app, [Action::ReplayCancel]);
    assert!(app.replay_dialog.is_none());
    apply(&mut app, [Action::Replay]);
    let dialog = app.replay_dialog.clone().unwrap();
    assert_eq!(dialog.candidate, "mine.py:norm");
    assert_eq!(dialog.error, None);
}
