//! The workbench on the single-run fixtures (tests/fixtures/single_run, real gloo runs): the
//! records a finding from one run rests on are findings (`S`, the detail's sentence), and a
//! moved write is marked `M` on its row.

use super::*;

const ROOT: &str = "tests/fixtures/single_run";

fn open(a: &str, b: Option<&str>) -> Bench {
    let root = std::path::Path::new(ROOT);
    let b = b.map(|b| root.join(b));
    bench(App::new(
        load::open(&root.join(a), b.as_deref(), &mut |_| {}).unwrap(),
        false,
    ))
}

#[test]
fn duplicate_shards_are_findings_marked_s_with_their_sentence_in_the_detail() {
    let mut app = open("dup_shard", None);
    let marked: Vec<&str> = app
        .rows
        .iter()
        .filter(|r| r.single_run)
        .map(|r| r.key.as_str())
        .collect();
    assert_eq!(
        marked,
        ["layers.0.up.weight#1", "layers.0.up#1", "layers.0.act#1"]
    );
    assert_eq!(app.findings, 3);
    update(&mut app, Action::NextFinding);
    assert_eq!(key(&app), "layers.0.up.weight#1");
    let screen = text(&render(&mut app, 160, 40));
    let row = screen
        .lines()
        .find(|l| l.contains(" 9 ") && l.contains("layers.0.up.weight#1"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(row.contains(" S "), "{row}");
    assert!(
        screen.contains("DUPLICATE SHARDS: layers.0.up.weight#1 (tp:0) holds the same piece"),
        "{screen}"
    );
}

#[test]
fn a_moved_write_is_marked_m_and_kept_by_the_filter() {
    let mut app = open("moved_write/a", Some("moved_write/b"));
    let moved: Vec<&str> = app
        .rows
        .iter()
        .filter(|r| r.moved_write)
        .map(|r| r.key.as_str())
        .collect();
    assert_eq!(moved, ["layers.0.kv_write#1"]);
    update(&mut app, Action::PrevFinding);
    assert_eq!(key(&app), "layers.0.kv_write#1");
    let screen = text(&render(&mut app, 160, 40));
    assert!(
        screen.contains("MOVED WRITE: same values, written elsewhere"),
        "{screen}"
    );
    update(&mut app, Action::ToggleFilter);
    let index = app.rows.iter().position(|r| r.moved_write).unwrap();
    assert!(app.visible.as_ref().unwrap().contains(&index));
}

/// Issue 31, item 14: one finding is "1 finding", not "1 findings".
#[test]
fn the_timeline_title_counts_one_finding_in_the_singular() {
    let mut app = open("stale_output", None);
    update(&mut app, Action::NextWindow);
    update(&mut app, Action::NextWindow);
    assert_eq!(app.findings, 1);
    let screen = text(&render(&mut app, 160, 40));
    assert!(screen.contains("· 1 finding ─"), "{screen}");
}
