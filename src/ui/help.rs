//! The help overlay: keys (from the one keymap, `app::keymap`) and the meaning of every glyph.
//!
//! As wide as its longest line where the terminal allows; narrower, each explanation wraps at
//! word boundaries under its own column (never back to column 0). Taller than the terminal,
//! it scrolls (↑↓, PgUp PgDn, g G) and its bottom border says what is below.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{Theme, format, popup};
use crate::app::{App, keymap};

const GLYPHS: &[(&str, &str)] = &[
    ("!  n", "first non-finite record / holds NaN or inf"),
    ("◆", "first divergence"),
    (
        "≠ ⇄ # N",
        "statistics differ / values moved / shape or dtype kind / NaN-inf counts",
    ),
    (
        "·  A  B",
        "agrees / captured in A only / in B only (missing evidence)",
    ),
    (
        "?  ∅",
        "checksum inconclusive / not compared (no statistics)",
    ),
    (
        "X  =",
        "stride-conflicting storage alias / alias without conflict",
    ),
    (
        "R",
        "a replicated stage whose ranks disagree (REPLICATED TENSOR DIFFERS)",
    ),
    (
        "S  M",
        "a finding from one run rests on it / a write moved in its pool (MOVED WRITE)",
    ),
    (
        "f32/f16",
        "dtype (or shape) of A / of B, where the two differ",
    ),
    (
        "↻",
        "a captured input set (capture_inputs): p replays the operator on it",
    ),
    (
        "▸  ▾",
        "module tree (m): a folded / an open module; its glyphs are the worst below it",
    ),
];

/// Width of the keys column.
const KEYS: usize = 10;
/// Where an explanation starts: two spaces, the keys, one space.
const TEXT: usize = 2 + KEYS + 1;
/// Widest the overlay gets.
const MAX_WIDTH: usize = 110;

/// The overlay's content for `app`: (is a heading, keys, explanation).
fn content(app: &App) -> Vec<(bool, &'static str, &'static str)> {
    let diffing = app.diffing();
    let inputs = app.has_input_sets();
    let mut out = vec![(true, "", "keys")];
    out.extend(keymap::help_lines(diffing, inputs).map(|(k, v)| (false, k, v)));
    out.push((false, "", ""));
    out.push((
        true,
        "",
        if inputs {
            "timeline glyphs (non-finite, comparison, alias, input set)"
        } else {
            "timeline glyphs (non-finite, comparison, alias)"
        },
    ));
    out.extend(
        GLYPHS
            .iter()
            .filter(|(k, _)| diffing || !matches!(*k, "◆" | "≠ ⇄ # N" | "·  A  B" | "f32/f16"))
            .filter(|(k, _)| inputs || *k != "↻")
            .map(|(k, v)| (false, *k, *v)),
    );
    if app.merged_layouts() {
        out.push((false, "", ""));
        out.extend(MERGED.iter().map(|&(heading, k, v)| (heading, k, v)));
    }
    out
}

/// What a diff across parallel layouts changes in the workbench (docs/diff.md).
const MERGED: &[(bool, &str, &str)] = &[
    (
        true,
        "",
        "parallel layouts (the title says which side was merged)",
    ),
    (
        false,
        "rows",
        "one per stage of the whole group: a sliced or partial stage merged from every rank's \
         piece, a replicated one stood for by the lowest rank",
    ),
    (
        false,
        "detail",
        "the merged statistics and full shape, then each rank's piece (rank, local shape, \
         counts): the rank holding a NaN is named there",
    ),
    (
        false,
        "r",
        "a merged group is one logical rank; ranks that were not merged still step",
    ),
];

/// The popup's width in `area` and its lines, wrapped to it.
fn lines(app: &App, area: Rect, theme: Theme) -> (u16, Vec<Line<'static>>) {
    let content = content(app);
    let natural = content
        .iter()
        .map(|(heading, _, v)| {
            if *heading {
                format::width(v)
            } else {
                TEXT + format::width(v)
            }
        })
        .max()
        .unwrap_or(0)
        + 2;
    let width = natural
        .min(MAX_WIDTH)
        .min(usize::from(area.width.saturating_sub(2)));
    let inner = width.saturating_sub(2).max(TEXT + 8);
    let mut lines = Vec::new();
    for (heading, keys, text) in content {
        if heading {
            lines.push(Line::from(Span::styled(text, theme.title())));
            continue;
        }
        let wrapped = format::wrap(text, inner - TEXT, 0);
        for (i, part) in wrapped.into_iter().enumerate() {
            let keys = if i == 0 { keys } else { "" };
            lines.push(Line::from(format!("  {keys:<KEYS$} {part}")));
        }
    }
    (width as u16, lines)
}

/// How far the overlay can scroll in `area`.
pub fn scroll_max(area: Rect, app: &App) -> usize {
    let (_, lines) = lines(app, area, Theme { color: false });
    popup::scroll_max(area, lines.len())
}

/// Draws the overlay centred in `area`, scrolled to `app.overlay_scroll`.
pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let (width, lines) = lines(app, area, theme);
    let title = Span::raw(" help (? or Esc closes) ");
    popup::draw_scrolling(frame, area, width, title, lines, app.overlay_scroll, theme);
}
