//! Header: what is open, which rank and label window, whether the inputs are the same.
//!
//! Both lines are laid out by priority ([`super::format::bar`]): the mode, the rank, MISSING
//! DATA and the input identity stay longest; the watch state gives way first, then the
//! window label is cut, then the match and call, the window and the record counts go, each
//! leaving a `…`.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::widgets::Paragraph;

use super::Theme;
use super::format::{Piece, bar};
use crate::app::App;
use crate::model::analysis::compare::{STATS, Tolerance, Tolerances};
use crate::model::analysis::diff::Identity;
use crate::model::present::attempt_text;

const SEPARATOR: &str = " · ";

/// The diff's tolerances where they are not the defaults, as the header says them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToleranceText {
    /// One pair for every statistic: `tolerances: rtol 1e-3 atol 1e-6` (never cut).
    Uniform(String),
    /// Each statistic that differs from its default: `tolerances: mean 1e-2:1e-5, …` (shrinks).
    PerStat(String),
}

/// The diff's tolerances where they are not the defaults: `rtol 1e-3 atol 1e-6` when one
/// pair holds for every statistic, else each statistic that differs from its default.
pub fn tolerances(tolerances: &Tolerances) -> Option<ToleranceText> {
    let defaults = Tolerances::default();
    if *tolerances == defaults {
        return None;
    }
    let changed: Vec<(&str, Tolerance)> = STATS
        .iter()
        .zip(tolerances.per_stat.iter().zip(&defaults.per_stat))
        .filter(|(_, (t, d))| t != d)
        .map(|(name, (t, _))| (*name, *t))
        .collect();
    let first = tolerances.per_stat[0];
    if tolerances.per_stat.iter().all(|t| *t == first) {
        return Some(ToleranceText::Uniform(format!(
            "tolerances: rtol {:e} atol {:e}",
            first.rtol, first.atol
        )));
    }
    let listed: Vec<String> = changed
        .iter()
        .map(|(name, t)| format!("{name} {:e}:{:e}", t.rtol, t.atol))
        .collect();
    Some(ToleranceText::PerStat(format!(
        "tolerances: {}",
        listed.join(", ")
    )))
}

pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let Some(loaded) = &app.loaded else { return };
    let width = usize::from(area.width);
    let diffing = loaded.diff().is_some();
    let mode = if diffing { "diff" } else { "scan" };
    let mut first = vec![
        Piece::new("dumpview", theme.title(), 0),
        Piece::new(mode, ratatui::style::Style::new(), 0),
        // The inputs' paths are cut before the format's name is.
        Piece::shrinking(
            loaded.session.title.clone(),
            ratatui::style::Style::new(),
            2,
            16,
        )
        .cut_at(4),
        Piece::shrinking(loaded.session.format.clone(), theme.dim(), 3, 12),
    ];
    // The user's own setting, which every verdict rests on: one pair is never cut (the paths
    // give way), a per-statistic list shrinks last.
    match tolerances(&loaded.session.analysis.tolerances) {
        Some(ToleranceText::Uniform(text)) => first.push(Piece::new(text, theme.warn(), 0)),
        Some(ToleranceText::PerStat(text)) => {
            first.push(Piece::shrinking(text, theme.warn(), 1, 16).cut_at(3));
        }
        None => {}
    }
    // A diff across parallel layouts says which side was merged (`A: tp=1 · B: tp=2 merged`).
    if let Some(banner) = loaded
        .diff()
        .and_then(crate::model::present::layouts::banner)
    {
        first.push(Piece::shrinking(banner, theme.warn(), 1, 12).cut_at(3));
    }
    // A window that could not be merged whole has no known first divergence: said where
    // "0 findings" would otherwise read as clean.
    if !app.unmerged().is_empty() {
        first.push(Piece::new(
            "NOT MERGED: first divergence unknown (w)".to_string(),
            theme.bad(),
            0,
        ));
    }
    let (warnings, lost) = app.warning_counts();
    if warnings > 0 {
        first.push(Piece::new(
            format!(
                "{warnings} load warning{}: w",
                if warnings == 1 { "" } else { "s" }
            ),
            if lost > 0 { theme.bad() } else { theme.warn() },
            1,
        ));
    }
    let mut second = Vec::new();
    if let (Some(choice), Some(((rank_at, ranks), (window_at, windows)))) =
        (app.choice(), app.window_place())
    {
        let a = &loaded.session.a.windows[choice.a];
        let rank = if ranks > 1 {
            format!("rank {} [{rank_at}/{ranks}]", choice.rank)
        } else {
            format!("rank {}", choice.rank)
        };
        second.push(Piece::new(rank, ratatui::style::Style::new(), 0));
        // The counter first: the label is what gets cut.
        let counter = format!("window [{window_at}/{windows}] ");
        second.push(
            Piece::shrinking(
                format!("{counter}{:?}", a.label),
                ratatui::style::Style::new(),
                4,
                counter.len() + 6,
            )
            .cut_at(6),
        );
        second.push(Piece::new(
            format!(
                "(match {}, call {}{})",
                a.match_index,
                a.occurrence,
                attempt_text(a.attempt)
            ),
            ratatui::style::Style::new(),
            5,
        ));
        // The matched request selected (`R`), beside rank and window.
        if let Some(tokens) = app.token_diff().filter(|t| !t.requests.is_empty()) {
            let at = app.request.min(tokens.requests.len() - 1);
            second.push(Piece::new(
                format!(
                    "request {:?} [{}/{}]",
                    tokens.requests[at].a,
                    at + 1,
                    tokens.requests.len()
                ),
                ratatui::style::Style::new(),
                5,
            ));
        }
        if diffing {
            second.push(Piece::new(
                format!("A {}", a.records.len()),
                theme.side_a(),
                3,
            ));
        } else {
            second.push(Piece::new(
                crate::model::present::number::counted(a.records.len(), "record"),
                ratatui::style::Style::new(),
                3,
            ));
        }
        if let (Some(bi), Some(b)) = (choice.b, &loaded.session.b) {
            let w = &b.windows[bi];
            // B's call only where it is not A's (a chunked prefill's other chunk).
            let call = if w.occurrence == a.occurrence && w.attempt == a.attempt {
                String::new()
            } else {
                format!(" (B call {}{})", w.occurrence, attempt_text(w.attempt))
            };
            second.push(Piece::new(
                format!("B {} rec{call}", w.records.len()),
                theme.side_b(),
                3,
            ));
        }
        if let (Some(pair), Some(report)) = (choice.pair, loaded.diff()) {
            if report.windows[pair].missing_data.is_some() {
                second.push(Piece::new("MISSING DATA", theme.bad(), 0));
            }
            let identity = &report.windows[pair].identity;
            let (text, style) = match identity {
                Identity::Same { tokens } => (format!("input: same {tokens} ids"), theme.good()),
                Identity::Different {
                    first_difference, ..
                } => (
                    format!("INPUTS DIFFER at id {first_difference}"),
                    theme.bad(),
                ),
                Identity::MissingOnOneSide { side } => (
                    format!("INPUT UNKNOWN: no ids in {}", side.to_ascii_uppercase()),
                    theme.bad(),
                ),
                Identity::MissingOnBoth => ("input: unchecked (no ids)".to_string(), theme.warn()),
                Identity::NotRecorded { .. } => {
                    ("input: not recorded by format".to_string(), theme.dim())
                }
            };
            second.push(Piece::new(text, style, 1));
        }
    }
    // Scan mode over several ranks: which rank went non-finite first, and which only
    // propagated it (docs/scan.md, "Across ranks").
    if let (false, Some(choice)) = (diffing, app.choice()) {
        let a = &loaded.session.a.windows[choice.a];
        if let Some(across) = loaded.session.analysis.ranks_a.iter().find(|x| {
            (x.label.as_str(), x.match_index, x.occurrence)
                == (a.label.as_str(), a.match_index, a.occurrence)
        }) {
            second.push(Piece::shrinking(
                format!("across ranks: {}", across.describe()),
                theme.bad(),
                1,
                24,
            ));
        }
    }
    // Nothing followed: nothing to say (an "off" the user never asked about only took room).
    if let Some(status) = &app.watch {
        let (text, healthy) = status.describe();
        let style = if healthy { theme.good() } else { theme.bad() };
        // A lost source is as loud as MISSING DATA; a healthy watch gives way early, unless
        // a fetch runs (the windows it holds back are not shown yet: say why).
        let fetching = status.fetching.iter().any(Option::is_some);
        let priority = match (healthy, fetching) {
            (false, _) => 0,
            (true, true) => 2,
            (true, false) => 6,
        };
        second.push(Piece::new(text, style, priority));
    }
    frame.render_widget(
        Paragraph::new(vec![
            bar(first, SEPARATOR, ratatui::style::Style::new(), width),
            bar(second, SEPARATOR, ratatui::style::Style::new(), width),
        ]),
        area,
    );
}
