//! `c`: the case-matrix form, board and case popup (src/app/cases.rs, src/ui/cases.rs), driven
//! through the real loop as the rest of tests/workbench.rs is. The board's matrix is the one
//! committed in tests/fixtures/cases_board/demo (its make.sh: a real `cases plan` and `cases
//! run` of a candidate that is wrong for bfloat16, crashes on non-contiguous x and refuses
//! float64), copied to a temporary directory so that nothing is written into the checkout.

use std::path::Path;

use super::*;
use dumpview::internals::app::cases::{CaseView, CasesField, CellState, grid};
use dumpview::internals::app::jobs::{CaseEvent, CasesPlanSpec, CasesRunSpec};
use dumpview::internals::app::keymap::{Key, Mode, action_for};
use dumpview::model::cases::snapshot::MatrixSnapshot;
use dumpview::model::cases::{CaseOutcome, Matrix};

const DEMO: &str = "tests/fixtures/cases_board";

/// The kept replay of `layers.0.input_norm#1` open (job 1 done), as `c` finds it.
fn replay_result_open() -> Bench {
    let mut app = replay_started();
    apply(
        &mut app,
        [replay_event(
            1,
            JobEvent::Done(JobOutput::Replayed(Box::new(replayed("eps_after")))),
        )],
    );
    assert!(app.replay_view.is_some());
    app
}

/// `c` on the open replay result: the form.
fn form_open() -> Bench {
    let mut app = replay_result_open();
    let effects = apply(&mut app, [Action::CaseMatrix]);
    assert!(effects.is_empty(), "{effects:?}");
    assert!(app.replay_view.is_none() && app.cases_form.is_some());
    app
}

/// The demo matrix copied under a temporary directory: (the directory, the copy's
/// snapshot with every attempt, and one as just planned, no case run).
fn demo_copy() -> (tempfile::TempDir, MatrixSnapshot, MatrixSnapshot) {
    let dir = tempfile::tempdir().unwrap();
    support::copy_tree(&Path::new(DEMO).join("demo"), &dir.path().join("demo"));
    let matrix = Matrix::open(dir.path(), "demo").unwrap();
    let done = MatrixSnapshot::read(&matrix);
    let cases = dir.path().join("demo/cases");
    let aside = dir.path().join("cases-aside");
    std::fs::rename(&cases, &aside).unwrap();
    let planned = MatrixSnapshot::read(&matrix);
    std::fs::rename(&aside, &cases).unwrap();
    (dir, done, planned)
}

fn cases_event(id: u64, event: JobEvent) -> Action {
    job(id, Slot::Cases, event)
}

fn progress_of(id: u64, event: CaseEvent) -> Action {
    cases_event(
        id,
        JobEvent::Progress(JobProgress::Cases {
            elapsed_ms: 1200,
            event,
        }),
    )
}

/// The form submitted (job 2) and the demo matrix planned: the board, its run started.
fn board_planned() -> (Bench, tempfile::TempDir, MatrixSnapshot) {
    let mut app = form_open();
    let effects = apply(&mut app, [Action::CasesSubmit]);
    assert!(matches!(
        &effects[..],
        [Effect::Spawn(JobSpec::PlanCases(_))]
    ));
    let (dir, done, planned) = demo_copy();
    apply(
        &mut app,
        [progress_of(2, CaseEvent::Planned(Box::new(planned)))],
    );
    (app, dir, done)
}

/// The board of the finished demo matrix.
fn board_done() -> (Bench, tempfile::TempDir) {
    let (mut app, dir, done) = board_planned();
    apply(
        &mut app,
        [cases_event(
            2,
            JobEvent::Done(JobOutput::Cases(Box::new(done))),
        )],
    );
    (app, dir)
}

fn case_index(app: &App, id: &str) -> usize {
    let board = app.cases_board.as_ref().unwrap();
    board
        .snapshot
        .plan
        .cases
        .iter()
        .position(|c| c.id == id)
        .unwrap()
}

#[test]
fn c_on_a_replay_result_opens_the_form_on_its_baseline_with_a_small_matrix() {
    let app = form_open();
    let form = app.cases_form.clone().unwrap();
    assert_eq!(form.stage, NORM);
    assert_eq!(form.side, Side::A);
    assert_eq!(form.window.manifest, window_dir("a").join("manifest.json"));
    assert_eq!(form.candidate, EPS_AFTER);
    assert_eq!(form.reference, "builtin:rms_norm");
    assert_eq!(form.standard, Standard::Msprobe);
    // The captured call, in call order, as the replay rebuilt it.
    let baseline: Vec<(String, String)> = form
        .baseline
        .iter()
        .map(|b| (b.name.clone(), b.text.clone()))
        .collect();
    assert_eq!(
        baseline,
        [
            (
                "x".into(),
                "tensor float32 [12, 256] stride [256, 1]".into()
            ),
            ("weight".into(), "tensor float32 [256] stride [1]".into()),
            ("eps".into(), "float 1e-6".into()),
        ]
    );
    assert_eq!(form.text(CasesField::Name), "layers.0.input_norm-1");
    assert_eq!(form.text(CasesField::Dtype), "float16,bfloat16,float32");
    assert_eq!(form.text(CasesField::Layout), "x=transposed,strided");
    assert_eq!(form.text(CasesField::Mode), "");
    assert_eq!(form.focus, CasesField::Dtype);
    // Diff mode: B at the stage, from the workbench's own diff.
    let vs = form.vs.clone().expect("diff mode gives the other capture");
    assert!(vs.paired && !vs.diverges, "{vs:?}");
    assert_eq!(
        vs.dump, "assets/examples/llama_kv_alias/b",
        "B by the path it was opened from"
    );
    // c without a replay result open and no matrix yet says how to get one.
    let mut plain = kv_on_disk();
    apply(&mut plain, [Action::CaseMatrix]);
    assert_eq!(
        plain.message.as_deref(),
        Some("no case matrix yet: replay a stage (p), then c on its result plans one")
    );
}

#[test]
fn the_form_turns_its_lines_into_axis_specs_and_enter_spawns_the_plan() {
    let mut app = form_open();
    // Down to the shape line, then mode, option and tie.
    apply(&mut app, [Action::CasesNextField, Action::CasesNextField]);
    assert_eq!(app.cases_form.as_ref().unwrap().focus, CasesField::Shape);
    apply(&mut app, "half_rows".chars().map(Action::CasesChar));
    apply(&mut app, [Action::CasesNextField, Action::CasesNextField]);
    apply(&mut app, "eps=1e-5, 1e-4".chars().map(Action::CasesChar));
    apply(&mut app, [Action::CasesNextField]);
    apply(&mut app, "x.-1=weight.0".chars().map(Action::CasesChar));
    let effects = apply(&mut app, [Action::CasesSubmit]);
    let [Effect::Spawn(JobSpec::PlanCases(spec))] = &effects[..] else {
        panic!("{effects:?}")
    };
    let CasesPlanSpec {
        name,
        auto_name,
        axes,
        ties,
        candidate,
        standard,
        ..
    } = spec.as_ref();
    assert_eq!(name, "layers.0.input_norm-1");
    assert!(auto_name, "the default name is numbered when taken");
    assert_eq!(
        axes,
        &[
            "dtype=float16,bfloat16,float32",
            "layout[x]=transposed,strided",
            "shape=half_rows",
            "option:eps=1e-5,1e-4",
        ]
    );
    assert_eq!(ties, &["x.-1=weight.0"]);
    // The open captures, so that the job refuses a cases directory inside either.
    assert_eq!(
        spec.captures,
        [Path::new(KV).join("a"), Path::new(KV).join("b")]
    );
    assert_eq!(candidate, EPS_AFTER);
    assert_eq!(*standard, Standard::Msprobe);
    let form = app.cases_form.as_ref().unwrap();
    assert!(form.planning && form.error.is_none());
    // The plan's refusal comes back into the form, on the line it is about.
    apply(
        &mut app,
        [cases_event(
            2,
            JobEvent::Failed("--tie x.-1=weight.0: x.-1 is 256, weight.0 is 512".into()),
        )],
    );
    let form = app.cases_form.as_ref().unwrap();
    assert!(!form.planning);
    assert_eq!(form.focus, CasesField::Ties);
    assert_eq!(
        form.error.as_deref(),
        Some("--tie x.-1=weight.0: x.-1 is 256, weight.0 is 512")
    );
}

#[test]
fn a_bad_line_keeps_the_form_open_on_it_and_a_typed_name_is_not_numbered() {
    let mut app = form_open();
    // The layout line without ARG=.
    apply(&mut app, [Action::CasesNextField, Action::CasesClear]);
    apply(&mut app, "transposed".chars().map(Action::CasesChar));
    let effects = apply(&mut app, [Action::CasesSubmit]);
    assert!(effects.is_empty(), "{effects:?}");
    let form = app.cases_form.as_ref().unwrap();
    assert_eq!(form.focus, CasesField::Layout);
    assert_eq!(
        form.error.as_deref(),
        Some("layout: give ARG=VALUES (x=transposed,strided), not \"transposed\"")
    );
    // On a small terminal the error and the keys stay; the baseline lines give way.
    let small = text(&render(&mut app, 60, 20));
    assert!(
        small.contains("layout: give ARG=VALUES") && small.contains("Enter plans and runs"),
        "{small}"
    );
    render(&mut app, 100, 30);
    // No axis at all.
    apply(
        &mut app,
        [
            Action::CasesClear,
            Action::CasesPrevField,
            Action::CasesClear,
        ],
    );
    apply(&mut app, [Action::CasesSubmit]);
    let form = app.cases_form.as_ref().unwrap();
    assert_eq!(form.focus, CasesField::Dtype);
    assert!(
        form.error
            .as_deref()
            .unwrap()
            .starts_with("give at least one axis"),
        "{form:?}"
    );
    // A hostile name is refused in the form; a typed one is used as typed.
    apply(&mut app, "float16".chars().map(Action::CasesChar));
    apply(&mut app, [Action::CasesPrevField, Action::CasesClear]);
    apply(&mut app, "../x".chars().map(Action::CasesChar));
    assert!(apply(&mut app, [Action::CasesSubmit]).is_empty());
    let form = app.cases_form.as_ref().unwrap();
    assert_eq!(form.focus, CasesField::Name);
    assert!(form.error.as_deref().unwrap().contains("../x"), "{form:?}");
    apply(&mut app, [Action::CasesClear]);
    apply(&mut app, "mine".chars().map(Action::CasesChar));
    let effects = apply(&mut app, [Action::CasesSubmit]);
    let [Effect::Spawn(JobSpec::PlanCases(spec))] = &effects[..] else {
        panic!("{effects:?}")
    };
    assert_eq!((spec.name.as_str(), spec.auto_name), ("mine", false));
    assert_eq!(spec.axes, ["dtype=float16"]);
    // On the tie line, a dimension alone keeps its size (--untie).
    let mut app = form_open();
    for _ in 0..5 {
        apply(&mut app, [Action::CasesNextField]);
    }
    assert_eq!(app.cases_form.as_ref().unwrap().focus, CasesField::Ties);
    apply(&mut app, "weight.0; x.0=x.0".chars().map(Action::CasesChar));
    let effects = apply(&mut app, [Action::CasesSubmit]);
    let [Effect::Spawn(JobSpec::PlanCases(spec))] = &effects[..] else {
        panic!("{effects:?}")
    };
    assert_eq!(
        (&spec.ties[..], &spec.untied[..]),
        (&["x.0=x.0".to_string()][..], &["weight.0".to_string()][..])
    );
    // An axis refusal lands on its line.
    apply(
        &mut app,
        [cases_event(
            2,
            JobEvent::Failed(
                "--axis layout[y]=strided: layers.0.input_norm#1 has no argument \"y\"".into(),
            ),
        )],
    );
    assert_eq!(app.cases_form.as_ref().unwrap().focus, CasesField::Layout);
    // Esc closes the form, nothing written, and gives the replay's result back.
    let mut app = form_open();
    apply(&mut app, [Action::CasesCancel]);
    assert!(app.cases_form.is_none());
    assert_eq!(app.replay_view.map(|v| v.result), Some(0));
    assert_eq!(
        app.message.as_deref(),
        Some("case matrix not planned: nothing was written")
    );
}

#[test]
fn the_board_follows_the_run_case_by_case_and_installs_the_analysis() {
    let (mut app, _dir, done) = board_planned();
    assert!(app.cases_form.is_none(), "the board took over");
    let board = app.cases_board.as_ref().unwrap();
    assert!(board.open && board.run.is_some());
    // The grid: the baseline, then dtype (float32 folded into the baseline) and layout[x].
    let rows = grid(&board.snapshot.plan);
    let shown: Vec<(String, Vec<(String, bool)>)> = rows
        .iter()
        .map(|r| {
            (
                r.label.clone(),
                r.cells
                    .iter()
                    .map(|c| (c.value.clone(), c.folded))
                    .collect(),
            )
        })
        .collect();
    let cells = |values: &[(&str, bool)]| -> Vec<(String, bool)> {
        values.iter().map(|(v, f)| (v.to_string(), *f)).collect()
    };
    assert_eq!(
        shown,
        [
            ("baseline".to_string(), cells(&[("captured", false)])),
            (
                "dtype".to_string(),
                cells(&[
                    ("float16", false),
                    ("bfloat16", false),
                    ("float32", true),
                    ("float64", false)
                ])
            ),
            (
                "layout[x]".to_string(),
                cells(&[("transposed", false), ("strided", false)])
            ),
        ]
    );
    // Nothing ran yet: every case queued.
    let states = |app: &App| -> Vec<CellState> {
        let board = app.cases_board.as_ref().unwrap();
        (0..board.snapshot.plan.cases.len())
            .map(|i| board.state(i))
            .collect()
    };
    assert!(states(&app).iter().all(|s| *s == CellState::Queued));
    apply(
        &mut app,
        [
            progress_of(
                2,
                CaseEvent::Started {
                    id: "baseline".into(),
                    index: 1,
                    total: 6,
                },
            ),
            progress_of(
                2,
                CaseEvent::Filed {
                    id: "baseline".into(),
                    outcome: CaseOutcome::Pass,
                },
            ),
            progress_of(
                2,
                CaseEvent::Started {
                    id: "dtype=float16".into(),
                    index: 2,
                    total: 6,
                },
            ),
        ],
    );
    let now = states(&app);
    assert_eq!(now[0], CellState::Done(CaseOutcome::Pass));
    assert_eq!(now[case_index(&app, "dtype=float16")], CellState::Running);
    assert_eq!(now[case_index(&app, "dtype=bfloat16")], CellState::Queued);
    let run = app.cases_board.as_ref().unwrap().run.clone().unwrap();
    assert_eq!((run.index, run.total), (2, 6));
    // The end: the analysis read back, the run gone, the status line says what it found.
    apply(
        &mut app,
        [cases_event(
            2,
            JobEvent::Done(JobOutput::Cases(Box::new(done))),
        )],
    );
    let board = app.cases_board.as_ref().unwrap();
    assert!(board.run.is_none() && board.filed.is_empty());
    let outcome = |id: &str| states(&app)[case_index(&app, id)];
    assert_eq!(
        outcome("dtype=bfloat16"),
        CellState::Done(CaseOutcome::NumericalMismatch)
    );
    assert_eq!(
        outcome("dtype=float64"),
        CellState::Done(CaseOutcome::UnsupportedCombination)
    );
    assert_eq!(
        outcome("layout.x=transposed"),
        CellState::Done(CaseOutcome::Crash)
    );
    assert_eq!(
        outcome("layout.x=strided"),
        CellState::Done(CaseOutcome::Crash)
    );
    assert_eq!(outcome("dtype=float16"), CellState::Done(CaseOutcome::Pass));
    assert_eq!(
        app.message.as_deref(),
        Some(
            "case matrix demo: 2 pass, 1 numerical mismatch, 2 crash, 1 unsupported combination \
             · numerical mismatch follows dtype=bfloat16 · crash follows layout[x]=non-contiguous"
        )
    );
}

#[test]
fn arrows_select_a_cell_and_enter_opens_its_metrics() {
    let (mut app, _dir) = board_done();
    // Down to dtype, right to bfloat16 (past the end it stays).
    apply(&mut app, [Action::Down, Action::Right]);
    let bf16 = case_index(&app, "dtype=bfloat16");
    assert_eq!(
        app.cases_board.as_ref().unwrap().selected_case(),
        Some(bf16)
    );
    apply(
        &mut app,
        [Action::Down, Action::Right, Action::Right, Action::Right],
    );
    assert_eq!(app.cases_board.as_ref().unwrap().cursor, (2, 1));
    apply(&mut app, [Action::Up, Action::Left]);
    assert_eq!(app.cases_board.as_ref().unwrap().cursor, (1, 0));
    apply(&mut app, [Action::Right, Action::Enter]);
    let board = app.cases_board.as_ref().unwrap();
    assert_eq!(
        board.case_view,
        Some(CaseView {
            case: bf16,
            output: 0,
            scroll: 0
        })
    );
    let replay = board.snapshot.replays[bf16].as_ref().expect("judged");
    assert_eq!(replay.verdict, ReplayVerdict::Error);
    let screen = text(&render(&mut app, 120, 40));
    for expected in [
        "case dtype=bfloat16 · demo",
        "outcome    ✗ numerical mismatch",
        "why        Cosine similarity 0.706596730 is not above 0.99",
        "changes    dtype = bfloat16",
        "ERROR  Cosine similarity 0.706596730 is not above 0.99",
        "|a-b| by decade",
    ] {
        assert!(screen.contains(expected), "{expected:?} in:\n{screen}");
    }
    // Esc closes the case, then the board; c shows the board again.
    apply(&mut app, [Action::Escape]);
    assert!(app.cases_board.as_ref().unwrap().case_view.is_none());
    apply(&mut app, [Action::Escape]);
    assert!(!app.cases_board.as_ref().unwrap().open);
    apply(&mut app, [Action::CaseMatrix]);
    assert!(app.cases_board.as_ref().unwrap().open);
}

#[test]
fn r_runs_what_has_no_result_big_r_reruns_the_selected_case_and_x_cancels() {
    let (mut app, _dir) = board_done();
    let effects = apply(&mut app, [Action::CasesRun]);
    assert!(effects.is_empty());
    assert_eq!(
        app.message.as_deref(),
        Some("every case has a result: R runs the selected one again (a new attempt)")
    );
    apply(&mut app, [Action::Down, Action::Right]);
    let effects = apply(&mut app, [Action::CasesRerun]);
    let dir = app.cases_board.as_ref().unwrap().snapshot.dir.clone();
    assert_eq!(
        effects,
        [Effect::Spawn(JobSpec::RunCases(CasesRunSpec {
            dir,
            rerun: true,
            only: vec!["dtype=bfloat16".into()],
            python: None,
        }))]
    );
    let bf16 = case_index(&app, "dtype=bfloat16");
    assert_eq!(
        app.cases_board.as_ref().unwrap().state(bf16),
        CellState::Queued
    );
    // One run at a time; x cancels it once; the cancel leaves the board.
    assert!(apply(&mut app, [Action::CasesRerun]).is_empty());
    assert_eq!(
        app.message.as_deref(),
        Some("the matrix is running (x cancels it)")
    );
    assert_eq!(
        apply(&mut app, [Action::CasesStop]),
        [Effect::Cancel(Slot::Cases)]
    );
    assert!(apply(&mut app, [Action::CasesStop]).is_empty(), "once");
    // The cancel has the matrix read again (job 4), so the board shows what was filed.
    let effects = apply(&mut app, [cases_event(3, JobEvent::Cancelled)]);
    let dir = app.cases_board.as_ref().unwrap().snapshot.dir.clone();
    assert_eq!(effects, [Effect::Spawn(JobSpec::ReadCases { dir })]);
    let board = app.cases_board.as_ref().unwrap();
    assert!(board.run.is_none() && board.open && board.refreshing);
    assert_eq!(
        app.message.as_deref(),
        Some("case matrix demo cancelled: 0 case(s) filed before; r runs the rest")
    );
    // The matrix read back changes no message; a failed run (job 5) says why on the board.
    let dir = app.cases_board.as_ref().unwrap().snapshot.dir.clone();
    let again = Matrix::open(dir.parent().unwrap(), "demo").unwrap();
    let done = MatrixSnapshot::read(&again);
    apply(
        &mut app,
        [cases_event(
            4,
            JobEvent::Done(JobOutput::Cases(Box::new(done))),
        )],
    );
    assert!(app.message.as_deref().unwrap().contains("cancelled"));
    apply(&mut app, [Action::CasesRerun]);
    apply(
        &mut app,
        [cases_event(
            5,
            JobEvent::Failed("replay_op.py --batch exited with status 1".into()),
        )],
    );
    let board = app.cases_board.as_ref().unwrap();
    assert_eq!(
        board.error.as_deref(),
        Some("replay_op.py --batch exited with status 1")
    );
}

#[test]
fn the_form_and_the_board_own_their_keys() {
    let form = form_open();
    let mode = Mode::of(&form);
    assert_eq!(mode, Mode::CasesForm);
    for (key, expected) in [
        (Key::Char('q'), "CasesChar('q')"),
        (Key::Char('r'), "CasesChar('r')"),
        (Key::Tab, "CasesNextField"),
        (Key::Down, "CasesNextField"),
        (Key::Up, "CasesPrevField"),
        (Key::Enter, "CasesSubmit"),
        (Key::Esc, "CasesCancel"),
        (Key::Ctrl('u'), "CasesClear"),
        (Key::Ctrl('c'), "Quit"),
    ] {
        assert_eq!(
            format!("{:?}", action_for(key, mode)),
            format!("Some({expected})"),
            "{key:?}"
        );
    }
    let (board, _dir) = board_done();
    let mode = Mode::of(&board);
    assert_eq!(mode, Mode::CasesBoard);
    for (key, expected) in [
        (Key::Char('r'), "CasesRun"),
        (Key::Char('R'), "CasesRerun"),
        (Key::Char('x'), "CasesStop"),
        (Key::Left, "Left"),
        (Key::Char('l'), "Right"),
        (Key::Enter, "Enter"),
        (Key::Char('c'), "Escape"),
        (Key::Char('q'), "Quit"),
    ] {
        assert_eq!(
            format!("{:?}", action_for(key, mode)),
            format!("Some({expected})"),
            "{key:?}"
        );
    }
    // The help names c.
    let mut app = kv_on_disk();
    update(&mut app, Action::ToggleHelp);
    let help = text(&render(&mut app, 160, 50));
    assert!(
        help.contains(
            "on a replay's result: plan and run a case matrix on its input set; else its board"
        ),
        "{help}"
    );
}

#[test]
fn snapshot_form_100x30_and_board_120x40_with_their_colours() {
    let mut app = form_open();
    insta::assert_snapshot!("cases_form_100x30", text(&render(&mut app, 100, 30)));
    let (mut app, _dir) = board_done();
    apply(&mut app, [Action::Down, Action::Right]);
    let buffer = render(&mut app, 120, 40);
    let screen = text(&buffer);
    // The evidence path is the temporary copy's: blank it for the snapshot.
    let dir = app
        .cases_board
        .as_ref()
        .unwrap()
        .snapshot
        .dir
        .display()
        .to_string();
    let placeholder = format!("{:<1$}", "<matrix dir>", dir.chars().count());
    insta::assert_snapshot!("cases_board_120x40", screen.replace(&dir, &placeholder));
    // Each outcome's glyph in its colour; the cursor in reverse video.
    let cell = |needle: &str| {
        let (x, y) = screen
            .lines()
            .enumerate()
            .find_map(|(y, l)| {
                l.find(needle)
                    .map(|b| (l[..b].chars().count() as u16, y as u16))
            })
            .unwrap_or_else(|| panic!("{needle:?} not on screen:\n{screen}"));
        buffer[(x, y)].clone()
    };
    assert_eq!(cell("✓ captured").fg, Color::Green);
    let bf16 = cell("✗ bfloat16");
    assert_eq!(bf16.fg, Color::Red);
    assert!(bf16.modifier.contains(Modifier::REVERSED), "the cursor");
    assert_eq!(cell("‼ transposed").fg, Color::LightMagenta);
    assert!(cell("‼ strided").modifier.contains(Modifier::BOLD));
    assert_eq!(cell("⊘ float64").fg, Color::Yellow);
    assert!(
        cell("✓ float32 =").modifier.contains(Modifier::DIM),
        "folded"
    );
    // On a 60-column terminal a row continues under its first cell: every value in view.
    let narrow = text(&render(&mut app, 60, 40));
    for value in [
        "✓ captured",
        "✗ bfloat16",
        "✓ float32 =",
        "⊘ float64",
        "‼ transposed",
        "‼ strided",
        "? missing 0",
    ] {
        assert!(narrow.contains(value), "{value:?} in:\n{narrow}");
    }
    // 60x20 (issue 31, item 14): the candidate lines and the details below the grid give way,
    // every cell and the keys stay in view.
    let short = text(&render(&mut app, 60, 20));
    for value in [
        "✓ captured",
        "✗ bfloat16",
        "⊘ float64",
        "‼ strided",
        "←↑↓→ select",
        "…",
    ] {
        assert!(short.contains(value), "{value:?} in:\n{short}");
    }
    assert!(!short.contains("candidate  "), "{short}");
}
