//! The workbench on diffs across parallel layouts (tests/fixtures/layouts, real gloo runs):
//! the title's merge note, replicated findings among the findings (`n`/`N`, the `R` glyph,
//! the detail's line), a merged record's full shape, scan mode's first non-finite across
//! ranks, and `--ignore` in the workbench's loading.

use super::*;
use dumpview::internals::runtime::Source;

const ROOT: &str = "tests/fixtures/layouts";

fn layouts(a: &str, b: Option<&str>) -> Bench {
    let root = std::path::Path::new(ROOT);
    let b = b.map(|b| root.join(b));
    bench(App::new(
        load::open(&root.join(a), b.as_deref(), &mut |_| {}).unwrap(),
        false,
    ))
}

#[test]
fn replicated_findings_are_findings_n_and_shift_n_stop_at() {
    let mut app = layouts("tp1", Some("tp2_bad_norm"));
    assert_eq!(key(&app), "layers.0.up#1", "opens on the first divergence");
    let replicated: Vec<&str> = app
        .rows
        .iter()
        .filter(|r| r.replicated)
        .map(|r| r.key.as_str())
        .collect();
    assert_eq!(
        replicated,
        ["layers.0.norm_weight#1", "layers.0.input_norm#1"]
    );
    // Two replicated stages before the first divergence, findings of their own, and the five
    // diverging pairs from layers.0.up to layers.0.down.
    assert_eq!(app.findings, 2 + 5);
    update(&mut app, Action::PrevFinding);
    assert_eq!(key(&app), "layers.0.input_norm#1");
    update(&mut app, Action::PrevFinding);
    assert_eq!(key(&app), "layers.0.norm_weight#1");
    update(&mut app, Action::NextFinding);
    update(&mut app, Action::NextFinding);
    assert_eq!(key(&app), "layers.0.up#1");
    // The filter keeps them though their merged pairs agree.
    update(&mut app, Action::ToggleFilter);
    assert!(app.visible.as_ref().unwrap().contains(&1));
}

#[test]
fn the_title_says_what_was_merged_and_the_detail_names_the_replicas_that_differ() {
    let mut app = layouts("tp1", Some("tp2_bad_norm"));
    update(&mut app, Action::PrevFinding);
    update(&mut app, Action::PrevFinding);
    let buffer = render(&mut app, 140, 40);
    let screen = text(&buffer);
    let title = screen.lines().next().unwrap();
    assert!(title.contains(" · A: tp=1 · B: tp=2 merged"), "{title}");
    let detail = boxed(&screen, "detail");
    assert_eq!(detail[0], "layers.0.norm_weight#1");
    assert_eq!(
        detail[1], "agrees within tolerance",
        "the merged pair agrees"
    );
    assert!(
        detail[2].starts_with("REPLICATED TENSOR DIFFERS in B: tp ranks 0 and 1 (max_abs by"),
        "{detail:#?}"
    );
    // Wide enough, the whole line: the statistic, by how much, and the replica bound.
    let wide = text(&render(&mut app, 240, 40));
    assert!(
        boxed(&wide, "detail")[2]
            == "REPLICATED TENSOR DIFFERS in B: tp ranks 0 and 1 (max_abs by 4.633e-1, bound \
                1.695e-15)",
        "{wide}"
    );
    let screen = text(&render(&mut app, 140, 40));
    // The R glyph (alias column) on the replicated rows, styled as a finding.
    let (x, y) = find(&buffer, "layers.0.norm_weight#1");
    let row = screen.lines().nth(y as usize).unwrap();
    assert!(row.starts_with("│ ·R 1 "), "{row:?}");
    assert_eq!(buffer[(3, y)].symbol(), "R");
    assert_eq!(buffer[(x, y)].fg, Color::Red, "{:?}", buffer[(x, y)]);
    insta::assert_snapshot!("layouts_bad_norm_140x40", screen);
}

#[test]
fn a_merged_record_shows_its_full_shape_and_its_own() {
    let mut app = layouts("tp1", Some("tp2_wrong_shard"));
    assert_eq!(key(&app), "layers.0.up#1");
    let screen = text(&render(&mut app, 140, 40));
    let detail = boxed(&screen, "detail");
    assert!(
        detail
            .iter()
            .any(|l| l == "B float64 6×16 merged from 2 ranks (this rank 6×8) on cpu"),
        "{detail:#?}"
    );
    assert!(
        detail.iter().any(|l| l == "A float64 6×16 on cpu"),
        "{detail:#?}"
    );
    // The timeline's shape column: the merged shape equals A's, so one shape, not 6×16/6×8.
    let row = screen
        .lines()
        .find(|l| l.contains(" layers.0.up#1 "))
        .unwrap();
    assert!(row.contains("f64   6×16 ") && !row.contains("6×8"), "{row}");
}

#[test]
fn scan_mode_says_which_rank_went_non_finite_first_and_which_propagated() {
    let mut app = layouts("tp2_nan", None);
    let screen = text(&render(&mut app, 200, 30));
    let second = screen.lines().nth(1).unwrap();
    assert!(
        second.contains(
            "across ranks: rank 1 went non-finite first, at layers.0.act#1; rank 0 propagated \
             (non-finite from layers.0.down#1, a collective)"
        ),
        "{second}"
    );
    insta::assert_snapshot!("layouts_scan_nan_200x30", screen);
}

#[test]
fn ignore_leaves_stages_out_of_the_workbench_as_of_the_cli() {
    let source = |ignore: &str| Source::Files {
        a: std::path::Path::new(ROOT).join("tp1"),
        b: Some(std::path::Path::new(ROOT).join("tp2_nan")),
        attempt_a: Default::default(),
        attempt_b: Default::default(),
        ignore: Some(ignore.to_string()),
    };
    let session = load::source(&source("act$"), &Default::default(), &mut |_| {}).unwrap();
    let b = session.b.as_ref().unwrap();
    assert!(
        b.windows
            .iter()
            .all(|w| w.records.iter().all(|r| r.stage != "layers.0.act"))
    );
    let notes: Vec<&str> = b.warnings.iter().map(|w| w.message.as_str()).collect();
    assert_eq!(
        notes,
        ["--ignore \"act$\": 1 record left out of the search (stage layers.0.act)"; 2]
    );
    // The analysis ran on what was left: B's first non-finite is the partial sum now.
    let app = bench(App::new(session, false));
    let report = app.loaded.as_ref().unwrap().diff().unwrap();
    assert_eq!(
        report.windows[0]
            .first_nonfinite_b
            .as_ref()
            .map(|n| n.key.as_str()),
        Some("layers.0.down_partial#1")
    );
    let error = load::source(&source("("), &Default::default(), &mut |_| {}).unwrap_err();
    assert!(
        error.starts_with("--ignore \"(\" is not a valid regular expression"),
        "{error}"
    );
}

#[test]
fn a_window_that_could_not_be_merged_whole_never_reads_as_clean() {
    // B is tp2 without rank 1: its sharded stages were never compared (tester B's finding:
    // the workbench said "0 findings", `d` "no divergence" and `w` "no load warnings").
    let mut app = layouts("tp1", Some("tp2/rank0"));
    assert_eq!(
        app.unmerged(),
        [
            "B's tp group of 2 (ranks 0) could not be merged whole: tp rank 1 of 2 not captured; 4 stages not merged"
        ]
    );
    let screen = text(&render(&mut app, 160, 40));
    let title = screen.lines().next().unwrap();
    assert!(
        title.contains("NOT MERGED: first divergence unknown (w)"),
        "{title}"
    );
    // The title does not also call the group merged, and a stage left unmerged shows no B
    // record (rank 0's local piece is not B's tensor).
    assert!(title.contains("B: tp=2 merged in part"), "{title}");
    let up = app.rows.iter().find(|r| r.key == "layers.0.up#1").unwrap();
    assert_eq!(
        (up.state, up.b),
        (dumpview::internals::app::RowState::OnlyA, None)
    );
    update(&mut app, Action::FirstDivergence);
    assert_eq!(
        app.message.as_deref(),
        Some(
            "first divergence unknown: B's tp group of 2 (ranks 0) could not be merged whole: tp rank 1 \
             of 2 not captured; 4 stages not merged"
        )
    );
    let (warnings, lost) = app.warning_counts();
    assert_eq!(
        (warnings, lost),
        (5, 5),
        "the merge's lost evidence is among the load warnings"
    );
    // A whole merge has none of it.
    let app = layouts("tp1", Some("tp2"));
    assert!(app.unmerged().is_empty());
    assert_eq!(app.warning_counts(), (0, 0));
}

#[test]
fn a_nan_on_another_rank_of_the_group_marks_its_own_stage_and_f_goes_there() {
    // tests/fixtures/layouts/tp2_nan: rank 1 plants a NaN at layers.0.act, before the
    // all_reduce; rank 0's own records turn non-finite only at layers.0.down. The rows follow
    // the merged records, as the diff does, not the selected rank's own.
    let mut app = layouts("tp1", Some("tp2_nan"));
    let marked: Vec<&str> = app
        .rows
        .iter()
        .filter(|r| r.first_nonfinite)
        .map(|r| r.key.as_str())
        .collect();
    assert_eq!(marked, ["layers.0.act#1"]);
    let act = app.rows.iter().find(|r| r.key == "layers.0.act#1").unwrap();
    assert!(act.nonfinite_b && !act.nonfinite_a);
    update(&mut app, Action::FirstNonFinite);
    assert_eq!(key(&app), "layers.0.act#1");
}

#[test]
fn help_and_r_explain_merged_ranks() {
    let mut app = layouts("tp1", Some("tp2"));
    update(&mut app, Action::NextRank);
    assert_eq!(
        app.message.as_deref(),
        Some(
            "only logical rank 0: a merged parallel group is one rank here; its per-rank pieces \
             are in the detail of each merged record"
        )
    );
    update(&mut app, Action::ToggleHelp);
    let screen = text(&render(&mut app, 140, 80));
    assert!(
        screen.contains("parallel layouts (the title says which side was merged)"),
        "{screen}"
    );
    assert!(
        screen.contains("a merged group is one logical rank"),
        "{screen}"
    );
    // A same-layout diff has no such section.
    let mut same = layouts("tp2", Some("tp2"));
    update(&mut same, Action::ToggleHelp);
    assert!(!text(&render(&mut same, 140, 80)).contains("parallel layouts ("));
}
