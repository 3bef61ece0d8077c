//! The diagnosis in the workbench: the banner under the header (the conclusion, cut to the
//! width, red when something was found, dim for "No diagnosis") and `D`, which walks the
//! chain of records it cites: writer, reader, then what is downstream, each in its window,
//! the writer and the reader also marked in the alias panel.

use super::*;

/// The chain's keys as `dumpview diagnose` cites them on the kv_alias pair: B's writer, B's
/// reader (also the origin), then the first record downstream of it. That is the attention
/// output right after the read: its token rows (the examples carry them since their
/// regeneration) show its rows diverging, where its whole-tensor checksum alone was
/// inconclusive and the first diverging record after the read was `layers.0.post_norm#1`.
const WRITER: &str = "layers.0.k_cache_write#1";
const READER: &str = "layers.0.k_cache_read#1";
const DOWNSTREAM: &str = "layers.0.attn#1";

/// The text of row `y` of `buffer`.
fn row(buffer: &Buffer, y: u16) -> String {
    text(buffer)
        .lines()
        .nth(usize::from(y))
        .unwrap_or("")
        .to_string()
}

#[test]
fn d_walks_the_chain_writer_then_reader_then_downstream_and_wraps() {
    let mut app = example("llama_kv_alias");
    let chain: Vec<String> = app
        .diagnosis()
        .expect("open")
        .chain()
        .iter()
        .map(|c| format!("{}{}", c.side, c.key))
        .collect();
    assert_eq!(
        chain[..3],
        [
            format!("b{WRITER}"),
            format!("b{READER}"),
            format!("b{DOWNSTREAM}")
        ]
    );
    // Away from the chain first, so each step is a move.
    update(&mut app, Action::Top);
    assert_ne!(key(&app), WRITER);

    update(&mut app, Action::WalkDiagnosis);
    assert_eq!(key(&app), WRITER);
    let message = app.message.clone().unwrap();
    let n = chain.len();
    assert!(
        message.starts_with(&format!("writer 1/{n}: B rank 0 `{WRITER}` (seq ")),
        "{message}"
    );
    assert!(message.contains("stride [64, 2048, 1]"), "{message}");
    // The address the writer and the reader share.
    assert!(
        message.contains(" · storage 13 on cpu, bytes [0x"),
        "{message}"
    );
    // The writer is a member of a conflicting alias group of B: marked there too.
    let member = app
        .walked_alias_member()
        .expect("the writer in the alias panel");
    assert_eq!(app.alias_selected, member);
    let groups = app.alias_groups();
    let (side, marked) = groups
        .iter()
        .flat_map(|(s, g)| g.members.iter().map(move |m| (*s, m)))
        .nth(member)
        .unwrap();
    assert_eq!((side, marked.key.as_str()), ('B', WRITER));

    update(&mut app, Action::WalkDiagnosis);
    assert_eq!(key(&app), READER);
    let message = app.message.clone().unwrap();
    assert!(
        message.starts_with(&format!("reader, origin 2/{n}: B rank 0 `{READER}`")),
        "{message}"
    );
    assert!(app.walked_alias_member().is_some());
    assert!(
        message.contains(" · storage 13 on cpu, bytes [0x"),
        "{message}"
    );

    update(&mut app, Action::WalkDiagnosis);
    assert_eq!(key(&app), DOWNSTREAM);
    assert!(
        app.message
            .as_deref()
            .unwrap()
            .starts_with(&format!("downstream 3/{n}: B rank 0 `{DOWNSTREAM}`")),
        "{:?}",
        app.message
    );
    // Not an alias member: nothing marked in the panel, no address.
    assert_eq!(app.walked_alias_member(), None);
    assert!(!app.message.as_deref().unwrap().contains(" · storage"));

    // Round the chain: back to the writer.
    apply(&mut app, (3..n).map(|_| Action::WalkDiagnosis));
    assert!(
        app.message
            .as_deref()
            .unwrap()
            .contains(&format!("{n}/{n}"))
    );
    update(&mut app, Action::WalkDiagnosis);
    assert_eq!(key(&app), WRITER);
    // Any other key replaces the step's message.
    update(&mut app, Action::Down);
    assert!(
        app.message
            .as_deref()
            .is_none_or(|m| !m.contains("writer 1/"))
    );
}

#[test]
fn d_with_no_diagnosis_says_so_and_moves_nothing() {
    // One capture against itself: every pair agrees, nothing is non-finite.
    let a = std::path::Path::new("assets/examples/llama_kv_alias/a");
    let mut app = bench(App::new(
        load::open(a, Some(a), &mut |_| {}).unwrap(),
        false,
    ));
    let diagnosis = app.diagnosis().unwrap().clone();
    assert!(!diagnosis.found, "{}", diagnosis.conclusion);
    let before = (app.window, app.selected);
    update(&mut app, Action::WalkDiagnosis);
    assert_eq!((app.window, app.selected), before);
    assert_eq!(app.message.as_deref(), Some(diagnosis.conclusion.as_str()));
    assert!(diagnosis.conclusion.starts_with("No diagnosis: "));
    // The banner says it, dim.
    let buffer = render(&mut app, 100, 30);
    assert!(
        row(&buffer, 2).starts_with("Diagnosis (D): No diagnosis: "),
        "{}",
        row(&buffer, 2)
    );
    assert_eq!(buffer[(20, 2)].fg, Color::DarkGray);
}

#[test]
fn snapshot_diagnosis_banner_kv_alias_100x30() {
    let mut app = example("llama_kv_alias");
    update(&mut app, Action::WalkDiagnosis);
    let buffer = render(&mut app, 100, 30);
    insta::assert_snapshot!("diagnosis_banner_kv_alias_100x30", text(&buffer));
    // Under the header's two lines, the conclusion cut to the width with an ellipsis.
    let banner = row(&buffer, 2);
    assert!(
        banner.starts_with(&format!(
            "Diagnosis (D): B's `{READER}` (first divergence) reads"
        )),
        "{banner}"
    );
    assert_eq!(banner.chars().count(), 100);
    assert!(banner.ends_with('…'), "{banner}");
    // Found: red, its name bold.
    assert_eq!(buffer[(20, 2)].fg, Color::Red);
    assert!(buffer[(0, 2)].modifier.contains(Modifier::BOLD));
    // The walked writer is marked in the alias panel without the focus.
    let member = format!("  {WRITER} 12×2×64");
    let (y, line) = text(&buffer)
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(&member))
        .map(|(y, l)| (y as u16, l.to_string()))
        .expect("the writer in the alias panel");
    let x = line[..line.find(&member).unwrap()].chars().count() as u16 + 2;
    assert!(
        buffer[(x, y)].modifier.contains(Modifier::REVERSED),
        "the walked writer is reversed in the alias panel"
    );
}

#[test]
fn the_help_lists_d() {
    let mut app = example("llama_kv_alias");
    update(&mut app, Action::ToggleHelp);
    let buffer = render(&mut app, 100, 30);
    assert!(
        text(&buffer).contains("walk the diagnosis"),
        "{}",
        text(&buffer)
    );
}
