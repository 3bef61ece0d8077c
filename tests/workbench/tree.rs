//! The module tree in the timeline pane (`m`) on real captures: the hooked MiniLM pair
//! (tests/fixtures/minilm_hooked: every module of all-MiniLM-L6-v2, float32 vs bfloat16) and
//! msprobe's ResNet pair (its module chain from construct.json): toggling, folds, the jumps
//! that open the path to their target, what a reload keeps, and the frames at fixed sizes.

use super::*;
use dumpview::internals::app::TreeLine;

const MINILM: &str = "tests/fixtures/minilm_hooked";
const RESNET: &str = "tests/fixtures/msprobe/resnet_gpu";
const MINILM_FIRST: &str = "encoder.layer.4.attention.self.output.0#1";

fn pair(a: &str, b: &str) -> App {
    App::new(
        load::open(Path::new(a), Some(Path::new(b)), &mut |_| {}).unwrap(),
        false,
    )
}

fn minilm() -> Bench {
    sized(
        pair(&format!("{MINILM}/a"), &format!("{MINILM}/b")),
        140,
        40,
    )
}

fn resnet() -> Bench {
    sized(
        pair(&format!("{RESNET}/step0"), &format!("{RESNET}/step1")),
        140,
        40,
    )
}

/// The lines of the open tree as names: a module's path (`encoder/layer/4`), a record's key.
fn lines(app: &App) -> Vec<String> {
    let view = app.tree.as_ref().expect("the tree is open");
    view.lines
        .iter()
        .map(|&line| match line {
            TreeLine::Node(id) if view.foldable(id) => view.tree.path_name(id),
            line => view.tree.keys[view.target(line)].clone(),
        })
        .collect()
}

/// The open modules of the tree, by path.
fn open(app: &App) -> Vec<String> {
    let view = app.tree.as_ref().expect("the tree is open");
    (0..view.open.len())
        .filter(|&id| view.open[id])
        .map(|id| view.tree.path_name(id))
        .collect()
}

/// The name of the line under the cursor, as [`lines`] gives it.
fn cursor(app: &App) -> String {
    lines(app)[app.tree.as_ref().unwrap().cursor].clone()
}

#[test]
fn m_opens_the_tree_on_the_path_of_the_first_divergence_and_closes_it() {
    let mut app = minilm();
    assert_eq!(key(&app), MINILM_FIRST);
    update(&mut app, Action::ToggleTree);
    assert_eq!(
        open(&app),
        [
            "encoder",
            "encoder/layer",
            "encoder/layer/4",
            "encoder/layer/4/attention",
            "encoder/layer/4/attention/self"
        ]
    );
    assert_eq!(cursor(&app), MINILM_FIRST);
    assert_eq!(key(&app), MINILM_FIRST, "the selection is the timeline's");
    let shown = lines(&app);
    // The top-level modules, layers 0-3 folded above layer 4, its attention's five stages.
    assert_eq!(&shown[..3], ["embeddings", "encoder", "encoder/layer"]);
    assert_eq!(
        &shown[3..8],
        [
            "encoder/layer/0",
            "encoder/layer/1",
            "encoder/layer/2",
            "encoder/layer/3",
            "encoder/layer/4"
        ]
    );
    let at = shown.iter().position(|l| l == MINILM_FIRST).unwrap();
    assert_eq!(shown[at - 4], "encoder/layer/4/attention/self");
    assert_eq!(shown[at - 3], "encoder.layer.4.attention.self.query#1");
    let view = app.tree.as_ref().unwrap();
    let root = &view.tree.nodes[0].rollup;
    assert_eq!((root.records, root.diverging), (126, 3));
    // m again: the flat timeline, on the same record.
    update(&mut app, Action::ToggleTree);
    assert!(app.tree.is_none());
    assert_eq!(key(&app), MINILM_FIRST);
}

#[test]
fn arrows_enter_and_space_fold_unfold_and_select_the_record() {
    use ratatui::crossterm::event::KeyCode;
    let mut app = minilm();
    update(&mut app, Action::ToggleTree);
    update(&mut app, Action::Top);
    assert_eq!(cursor(&app), "embeddings");
    // A module line selects the record it leads to: here its first record.
    assert_eq!(key(&app), "embeddings.word_embeddings#1");
    let before = lines(&app).len();
    update(&mut app, Action::Right);
    assert_eq!(
        lines(&app).len(),
        before + 6,
        "embeddings holds five stages and its own output"
    );
    update(&mut app, Action::Right);
    assert_eq!(cursor(&app), "embeddings.word_embeddings#1");
    update(&mut app, Action::Down);
    assert_eq!(key(&app), "embeddings.token_type_embeddings#1");
    // Left: up to the module, then folds it.
    update(&mut app, Action::Left);
    assert_eq!(cursor(&app), "embeddings");
    update(&mut app, Action::Left);
    assert_eq!(lines(&app).len(), before);
    // Through the keymap: Space and Enter fold in the tree, j moves, m closes it.
    send(&mut app, [key_press(KeyCode::Char(' '))]);
    assert_eq!(lines(&app).len(), before + 6);
    send(&mut app, [key_press(KeyCode::Enter)]);
    assert_eq!(lines(&app).len(), before);
    assert!(
        !app.wide_detail,
        "Enter folds; it does not widen the detail"
    );
    send(&mut app, [key_press(KeyCode::Char('j'))]);
    assert_eq!(cursor(&app), "encoder");
    // The module holding the first divergence leads to it.
    assert_eq!(key(&app), MINILM_FIRST);
    send(&mut app, [key_press(KeyCode::Char('m'))]);
    assert!(app.tree.is_none());
}

#[test]
fn d_n_and_search_open_the_path_to_their_target() {
    let mut app = minilm();
    update(&mut app, Action::ToggleTree);
    // Fold `encoder`: the first divergence is out of sight.
    apply(&mut app, [Action::Top, Action::Down, Action::Left]);
    assert_eq!(cursor(&app), "encoder");
    assert!(!lines(&app).iter().any(|l| l == MINILM_FIRST));
    update(&mut app, Action::Top);
    assert_eq!(key(&app), "embeddings.word_embeddings#1");
    update(&mut app, Action::FirstDivergence);
    assert_eq!(cursor(&app), MINILM_FIRST);
    assert_eq!(key(&app), MINILM_FIRST);
    assert!(open(&app).contains(&"encoder/layer/4/attention/self".to_string()));
    // n: the next finding below, its path opened the same way.
    update(&mut app, Action::NextFinding);
    let next = key(&app).to_string();
    assert_ne!(next, MINILM_FIRST);
    assert_eq!(cursor(&app), next);
    // A search: layer 5's output dense, under a module that was folded.
    assert!(!open(&app).contains(&"encoder/layer/5".to_string()));
    let mut search = vec![Action::StartSearch];
    search.extend("layer.5.output.dense".chars().map(Action::SearchChar));
    search.push(Action::SearchSubmit);
    apply(&mut app, search);
    assert_eq!(key(&app), "encoder.layer.5.output.dense#1");
    assert_eq!(cursor(&app), "encoder.layer.5.output.dense#1");
    assert!(open(&app).contains(&"encoder/layer/5".to_string()));
}

#[test]
fn a_reload_keeps_the_folds_the_module_and_the_record() {
    let mut app = minilm();
    update(&mut app, Action::ToggleTree);
    // Open layer 0 and stand on its attention module.
    let at = lines(&app)
        .iter()
        .position(|l| l == "encoder/layer/0")
        .unwrap();
    apply(&mut app, [Action::Top]);
    apply(&mut app, (0..at).map(|_| Action::Down));
    apply(&mut app, [Action::Right, Action::Down]);
    assert_eq!(cursor(&app), "encoder/layer/0/attention");
    let (folds, shown, selected) = (open(&app), lines(&app), key(&app).to_string());
    let session = load::open(
        &Path::new(MINILM).join("a"),
        Some(&Path::new(MINILM).join("b")),
        &mut |_| {},
    )
    .unwrap();
    update(&mut app, Action::Watched(Box::new(session)));
    assert_eq!(open(&app), folds);
    assert_eq!(lines(&app), shown);
    assert_eq!(cursor(&app), "encoder/layer/0/attention");
    assert_eq!(key(&app), selected);
}

#[test]
fn scan_mode_opens_on_the_first_non_finite_record() {
    let mut app = scan_of("llama_fp16_overflow", "b");
    update(&mut app, Action::ToggleTree);
    let first = key(&app).to_string();
    assert_eq!(first, "layers.3.mlp_up#1");
    assert_eq!(cursor(&app), first);
    assert_eq!(open(&app), ["layers", "layers/3"]);
    let screen = text(&render(&mut app, 140, 40));
    // The tree pane only: the detail's title beside it names the record too.
    let pane: Vec<&str> = screen
        .lines()
        .filter_map(|l| l.split("││").next())
        .collect();
    let line = pane
        .iter()
        .find(|l| l.starts_with('│') && l.contains("mlp_up#1"))
        .expect("the record's line");
    assert!(line.starts_with("│!"), "{line}");
    let layers = pane
        .iter()
        .find(|l| l.contains("▾ layers"))
        .expect("the layers line");
    assert!(layers.starts_with("│! "), "{layers}");
}

#[test]
fn snapshot_tree_minilm_140x40_and_80x24() {
    let mut app = minilm();
    update(&mut app, Action::ToggleTree);
    insta::assert_snapshot!("tree_minilm_140x40", text(&render(&mut app, 140, 40)));
    insta::assert_snapshot!("tree_minilm_80x24", text(&render(&mut app, 80, 24)));
}

#[test]
fn snapshot_tree_resnet_140x40_and_80x24() {
    let mut app = resnet();
    update(&mut app, Action::ToggleTree);
    insta::assert_snapshot!("tree_resnet_140x40", text(&render(&mut app, 140, 40)));
    insta::assert_snapshot!("tree_resnet_80x24", text(&render(&mut app, 80, 24)));
}

#[test]
fn tree_marks_have_their_styles_and_glyphs_without_colour() {
    let mut app = minilm();
    update(&mut app, Action::ToggleTree);
    let buffer = render(&mut app, 140, 40);
    let (x, y) = find(&buffer, "▾ encoder");
    // The glyph columns sit right of the border: `◆` second.
    let diamond = &buffer[(1 + 1, y)];
    assert_eq!(diamond.symbol(), "◆");
    assert_eq!(diamond.bg, Color::Yellow, "the first divergence's mark");
    assert_eq!(
        buffer[(x, y)].fg,
        Color::Yellow,
        "a diverging module is yellow"
    );
    let (x, y) = find(&buffer, "▸ embeddings");
    assert_eq!(
        buffer[(x, y)].fg,
        Color::Reset,
        "an agreeing module is plain"
    );
    let (_, y) = find(&buffer, "output.0#1");
    assert!(buffer[(x, y)].modifier.contains(Modifier::REVERSED));

    let mut plain = sized(
        App::new(
            load::open(
                &Path::new(MINILM).join("a"),
                Some(&Path::new(MINILM).join("b")),
                &mut |_| {},
            )
            .unwrap(),
            true,
        ),
        140,
        40,
    );
    update(&mut plain, Action::ToggleTree);
    let buffer = render(&mut plain, 140, 40);
    assert!(
        buffer
            .content()
            .iter()
            .all(|c| (c.fg, c.bg) == (Color::Reset, Color::Reset)),
        "NO_COLOR: no colour anywhere"
    );
    let screen = text(&buffer);
    let encoder = screen.lines().find(|l| l.contains("▾ encoder")).unwrap();
    assert!(encoder.starts_with("│ ◆≠"), "{encoder}");
    let embeddings = screen.lines().find(|l| l.contains("▸ embeddings")).unwrap();
    assert!(embeddings.starts_with("│  · "), "{embeddings}");
}

#[test]
fn clicks_and_the_wheel_move_the_tree_not_the_timeline() {
    let mut app = resnet();
    update(&mut app, Action::ToggleTree);
    let total = lines(&app).len();
    assert_eq!(total, 244);
    update(&mut app, Action::ClickRow(1));
    assert_eq!(
        cursor(&app),
        "Module.conv1.Conv2d.forward.0/Functional.conv2d.0.forward"
    );
    update(&mut app, Action::Scroll(10));
    let view = app.tree.as_ref().unwrap();
    assert_eq!(
        (view.offset, view.cursor),
        (10, 10),
        "the cursor stays in view"
    );
    assert_eq!(key(&app), lines(&app)[10], "and selects its record");
    // Beyond the last line: clamped to the last full page.
    update(&mut app, Action::Scroll(10_000));
    let view = app.tree.as_ref().unwrap();
    assert_eq!(view.offset, total - app.view_height);
    update(&mut app, Action::Bottom);
    assert_eq!(app.tree.as_ref().unwrap().cursor, total - 1);
}
