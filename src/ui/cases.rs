//! The case-matrix popups (`c`): the form, the board and a case's metrics.
//!
//! ```text
//! ┌ case matrix layers.0.input_norm-1 · rank 0 · layers.0.input_norm#1 · A ── running 3/5 · 4.1 s ┐
//! │candidate  tests/python/replay_candidates.py:rms_norm_wrong_in_bf16                             │
//! │reference  builtin:rms_norm · standard msprobe                                                  │
//! │                                                                                                │
//! │  baseline    ✓ captured                                                                        │
//! │  dtype       ✗ float16      ✗ bfloat16     ✓ float32 =                                         │
//! │  layout[x]   ▶ transposed   · strided                                                          │
//! │                                                                                                │
//! │✓ pass 1 · ✗ numerical mismatch 2 · ‼ crash 0 · ⊘ unsupported 0 · ? missing evidence 2          │
//! │selected   dtype=bfloat16: numerical mismatch · cosine 0.99987 < 0.99999 …                     │
//! │follows    …                                                                                    │
//! │←↑↓→ select · Enter metrics · r run missing · R rerun selected · x cancel · Esc hides           │
//! └────────────────────────────────────────────────────────────────────────────────────────────────┘
//! ```

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use super::replay::{
    HISTOGRAM, LABEL, ResultLayout, draw_judged, judged_lines, labelled, width_in, wrapped,
};
use super::{Theme, centered, format};
use crate::app::App;
use crate::app::cases::{CaseView, CasesBoard, CasesField, CasesForm, CellState, grid};
use crate::app::session::Side;
use crate::model::cases::CaseOutcome;
use crate::model::cases::plan::{DTYPES, LAYOUTS, MODES, SHAPES};

/// The glyph of a cell: ✓ pass, ✗ numerical mismatch, ‼ crash, ⊘ unsupported combination,
/// ? missing evidence, ▶ running, · queued.
pub fn glyph(state: CellState) -> &'static str {
    match state {
        CellState::Done(CaseOutcome::Pass) => "✓",
        CellState::Done(CaseOutcome::NumericalMismatch) => "✗",
        CellState::Done(CaseOutcome::Crash) => "‼",
        CellState::Done(CaseOutcome::UnsupportedCombination) => "⊘",
        CellState::Done(CaseOutcome::MissingEvidence) => "?",
        CellState::Running => "▶",
        CellState::Queued => "·",
    }
}

/// The colour of a cell's state.
fn style(state: CellState, theme: Theme) -> Style {
    match state {
        CellState::Done(CaseOutcome::Pass) => theme.good(),
        CellState::Done(CaseOutcome::NumericalMismatch) => theme.bad(),
        CellState::Done(CaseOutcome::Crash) => theme.crash(),
        CellState::Done(CaseOutcome::UnsupportedCombination) => theme.warn(),
        CellState::Done(CaseOutcome::MissingEvidence) => theme.missing(),
        CellState::Running => theme.title(),
        CellState::Queued => theme.dim(),
    }
}

/// The legend's word for an outcome (the case lines give the full name).
fn short_name(outcome: CaseOutcome) -> &'static str {
    match outcome {
        CaseOutcome::Pass => "pass",
        CaseOutcome::NumericalMismatch => "mismatch",
        CaseOutcome::Crash => "crash",
        CaseOutcome::UnsupportedCombination => "unsupported",
        CaseOutcome::MissingEvidence => "missing",
    }
}

fn side_name(side: Side) -> &'static str {
    match side {
        Side::A => "A",
        Side::B => "B",
    }
}

/// How far the open case popup's text can scroll in a frame of size `area`.
pub fn scroll_max(area: Rect, app: &App) -> usize {
    let Some(board) = app.cases_board.as_ref().filter(|b| b.open) else {
        return 0;
    };
    let Some(view) = board.case_view else {
        return 0;
    };
    let layout = case_layout(board, view, area, Theme { color: false });
    layout
        .lines
        .len()
        .saturating_sub(usize::from(layout.text_rows))
}

/// What the form says beside a line.
fn note(form: &CasesForm, field: CasesField) -> String {
    let scalars: Vec<&str> = form
        .baseline
        .iter()
        .filter(|b| {
            ["float ", "int ", "bool "]
                .iter()
                .any(|k| b.text.starts_with(k))
        })
        .map(|b| b.name.as_str())
        .collect();
    match field {
        CasesField::Name if !form.name_edited => {
            "in the cases directory; .2, .3 … when taken".into()
        }
        CasesField::Name => "in the cases directory".into(),
        CasesField::Dtype => DTYPES.join(" "),
        CasesField::Layout => format!("ARG={}", LAYOUTS.join(",")),
        CasesField::Shape => format!("{} (ARG= for one)", SHAPES.join(",")),
        CasesField::Mode => format!("{} (compile: Inductor, slow)", MODES.join(",")),
        CasesField::Options if scalars.is_empty() => "NAME=V1,V2".into(),
        CasesField::Options => format!("NAME=V1,V2 · scalars: {}", scalars.join(" ")),
        CasesField::Ties => "A.D=B.E ties · A.D alone keeps its size".into(),
    }
}

pub(super) fn draw_form(frame: &mut Frame, form: &CasesForm, area: Rect, theme: Theme) {
    let width = width_in(area);
    let inner = usize::from(width.saturating_sub(2)).max(30);
    let mut lines: Vec<Line<'static>> = Vec::new();
    lines.extend(labelled("candidate", &form.candidate, inner, Style::new()));
    lines.extend(labelled(
        "reference",
        &format!("{} · standard {}", form.reference, form.standard.describe()),
        inner,
        Style::new(),
    ));
    // The captured baseline, one argument a line: what every case starts from.
    let name_width = form
        .baseline
        .iter()
        .map(|b| format::width(&b.name))
        .max()
        .unwrap_or(0);
    for (i, arg) in form.baseline.iter().enumerate() {
        let label = if i == 0 { "baseline" } else { "" };
        lines.extend(labelled(
            label,
            &format!("{:<name_width$}  {}", arg.name, arg.text),
            inner,
            theme.dim(),
        ));
    }
    if let Some(vs) = &form.vs {
        lines.extend(labelled("vs", &vs.detail, inner, theme.dim()));
    }
    lines.push(Line::from(""));
    let info = lines.len();
    for field in CasesField::ALL {
        let focused = field == form.focus;
        let marker = if focused { "› " } else { "  " };
        let label = format!("{marker}{:<LABEL$}", field.label());
        let room = inner.saturating_sub(format::width(&label));
        let mut value = form.text(field).to_string();
        if focused && !form.planning {
            value.push('▏');
        }
        let note = note(form, field);
        let label_style = if focused { theme.title() } else { theme.dim() };
        let mut spans = vec![Span::styled(label, label_style)];
        if format::width(&value) + 2 + format::width(&note) <= room {
            let pad = room - format::width(&value) - format::width(&note);
            spans.push(Span::raw(value));
            spans.push(Span::raw(" ".repeat(pad)));
            spans.push(Span::styled(note, theme.dim()));
        } else {
            spans.push(Span::raw(format::fit_start(&value, room)));
        }
        lines.push(Line::from(spans));
    }
    if let Some(error) = &form.error {
        lines.extend(wrapped(error, inner, 2, theme.bad()));
    }
    let keys = if form.planning {
        "planning: reading the input set and writing the plan… · Esc hides"
    } else {
        "Enter plans and runs · Tab ↑↓ line · Ctrl-U clears · Esc closes"
    };
    lines.push(Line::from(Span::styled(
        format::fit(keys, inner),
        theme.dim(),
    )));
    // Too few rows: the candidate, baseline and vs lines give way, never a line to edit, the
    // error or the keys.
    let room = usize::from(area.height.saturating_sub(2));
    if lines.len() > room {
        let cut = (lines.len() - room).min(info);
        lines.drain(..cut);
    }
    let rect = centered(area, width, lines.len() as u16 + 2);
    frame.render_widget(Clear, rect);
    let title = Span::styled(
        format!(
            " case matrix · rank {} · {} · {} ",
            form.rank,
            form.stage,
            side_name(form.side)
        ),
        theme.title(),
    );
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        rect,
    );
}

/// The board's lines (without the grid's cursor style decided elsewhere), and how many of them
/// come before the grid (the candidate and reference lines: what gives way first on a short
/// terminal).
fn board_lines(board: &CasesBoard, inner: usize, theme: Theme) -> (Vec<Line<'static>>, usize) {
    let plan = &board.snapshot.plan;
    let analysis = &board.snapshot.analysis;
    let mut lines: Vec<Line<'static>> = Vec::new();
    lines.extend(labelled("candidate", &plan.candidate, inner, Style::new()));
    lines.extend(labelled(
        "reference",
        &format!("{} · standard {}", plan.reference, plan.standard.describe()),
        inner,
        Style::new(),
    ));
    lines.push(Line::from(""));
    let info = lines.len();
    // The grid: one row per axis spec, each value a cell `G value`, columns aligned.
    let rows = grid(plan);
    let label_width = rows
        .iter()
        .map(|r| format::width(&r.label))
        .max()
        .unwrap_or(0)
        .max(8);
    let cell_width = rows
        .iter()
        .flat_map(|r| r.cells.iter())
        .map(|c| format::width(&c.value) + if c.folded { 2 } else { 0 })
        .max()
        .unwrap_or(0)
        + 4;
    // A row wider than the popup continues on the next line under its first cell, so every
    // cell stays in view on a narrow terminal (the cursor still moves by grid position).
    let per_line = (inner.saturating_sub(label_width + 4) / cell_width).max(1);
    for (r, row) in rows.iter().enumerate() {
        let mut spans = vec![Span::styled(
            format!("  {:<label_width$}  ", row.label),
            theme.title(),
        )];
        for (c, cell) in row.cells.iter().enumerate() {
            if c > 0 && c % per_line == 0 {
                lines.push(Line::from(std::mem::take(&mut spans)));
                spans.push(Span::raw(" ".repeat(label_width + 4)));
            }
            let state = board.state(cell.case);
            let mut style = style(state, theme);
            if cell.folded {
                style = style.add_modifier(Modifier::DIM);
            }
            let text = if cell.folded {
                format!("{} {} =", glyph(state), cell.value)
            } else {
                format!("{} {}", glyph(state), cell.value)
            };
            let pad = " ".repeat(cell_width.saturating_sub(format::width(&text)));
            if board.cursor == (r, c) {
                // Reverse video marks the cursor without colour (NO_COLOR).
                style = style.add_modifier(Modifier::REVERSED | Modifier::BOLD);
            }
            spans.push(Span::styled(text, style));
            spans.push(Span::raw(pad));
        }
        lines.push(Line::from(spans));
    }
    lines.push(Line::from(""));
    // The legend doubles as the counts.
    let counts = [
        (CellState::Done(CaseOutcome::Pass), analysis.counts.pass),
        (
            CellState::Done(CaseOutcome::NumericalMismatch),
            analysis.counts.numerical_mismatch,
        ),
        (CellState::Done(CaseOutcome::Crash), analysis.counts.crash),
        (
            CellState::Done(CaseOutcome::UnsupportedCombination),
            analysis.counts.unsupported_combination,
        ),
        (
            CellState::Done(CaseOutcome::MissingEvidence),
            analysis.counts.missing_evidence,
        ),
    ];
    let live = !board.filed.is_empty() || board.run.is_some();
    let mut legend: Vec<Span<'static>> = Vec::new();
    let mut used = 0;
    for (i, (state, n)) in counts.iter().enumerate() {
        let CellState::Done(outcome) = state else {
            continue;
        };
        // While a run goes on the counts are the board's cells, not the last analysis.
        let n = if live {
            (0..plan.cases.len())
                .filter(|&k| board.state(k) == *state)
                .count()
        } else {
            *n
        };
        let entry = format!("{} {} {n}", glyph(*state), short_name(*outcome));
        // Entries that would pass the popup's edge start the next line (narrow terminals).
        if i > 0 && used + 3 + format::width(&entry) > inner {
            lines.push(Line::from(std::mem::take(&mut legend)));
            used = 0;
        } else if i > 0 {
            legend.push(Span::styled(" · ", theme.dim()));
            used += 3;
        }
        used += format::width(&entry);
        legend.push(Span::styled(entry, style(*state, theme)));
    }
    if board.run.is_some() {
        let running = " · ▶ running · · queued";
        if used + format::width(running) > inner {
            lines.push(Line::from(std::mem::take(&mut legend)));
        }
        legend.push(Span::styled(running, theme.dim()));
    }
    lines.push(Line::from(legend));
    if let Some(case) = board.selected_case()
        && let Some(result) = analysis.cases.get(case)
    {
        let state = board.state(case);
        let what = match state {
            CellState::Running => "running now".to_string(),
            CellState::Queued => "queued".to_string(),
            CellState::Done(outcome) if board.filed.contains_key(&result.id) => {
                format!("{outcome} (just filed; Enter once the run ends for its metrics)")
            }
            CellState::Done(outcome) => format!("{outcome}: {}", result.reason),
        };
        lines.extend(labelled(
            "selected",
            &format!("{}  {what}", result.id),
            inner,
            style(state, theme),
        ));
    }
    if board.run.is_none() {
        for follows in &analysis.follows {
            lines.extend(labelled("follows", &follows.text, inner, Style::new()));
        }
        if let Some(smallest) = &analysis.smallest_failing {
            lines.extend(labelled(
                "smallest",
                &format!(
                    "{} ({}, {} elements): `{}`",
                    smallest.id,
                    smallest.outcome,
                    smallest.elements,
                    crate::model::present::cases::export_test_command(&plan.name, &smallest.id)
                ),
                inner,
                Style::new(),
            ));
        }
        if let Some(integration) = &analysis.integration {
            lines.extend(labelled("vs", &integration.text, inner, theme.warn()));
        }
    }
    if let Some(error) = &board.error {
        lines.extend(labelled("failed", error, inner, theme.bad()));
    }
    if let Some(run) = &board.run {
        let now = match &run.running {
            Some(id) => format!("{id} ({}/{})", run.index, run.total),
            None if run.index == 0 => "starting Python and torch…".to_string(),
            None => format!("filing ({}/{})", run.index, run.total),
        };
        lines.extend(labelled("running", &now, inner, theme.dim()));
        // replay_op.py's latest line that is not a case's progress (a warning, a print).
        if let Some(last) = run.log.last() {
            let fitted = format::fit(last, inner.saturating_sub(LABEL));
            lines.extend(labelled("log", &fitted, inner, theme.dim()));
        }
    }
    lines.extend(labelled(
        "evidence",
        &board.snapshot.dir.display().to_string(),
        inner,
        theme.dim(),
    ));
    (lines, info)
}

pub(super) fn draw_board(frame: &mut Frame, board: &CasesBoard, area: Rect, theme: Theme) {
    let width = area.width.saturating_sub(2).min(120);
    let inner = usize::from(width.saturating_sub(2)).max(30);
    let (mut lines, info) = board_lines(board, inner, theme);
    // Too few rows: the candidate and reference lines give way first, then the lines after the
    // grid from the bottom up (a `…` says so); the grid and the keys always stay.
    let room = usize::from(area.height.saturating_sub(3));
    if lines.len() > room {
        let cut = (lines.len() - room).min(info);
        lines.drain(..cut);
    }
    if lines.len() > room {
        lines.truncate(room.saturating_sub(1));
        lines.push(Line::from(Span::styled("…", theme.dim())));
    }
    let keys = match &board.run {
        Some(run) if run.cancelling => "cancelling… · Esc hides".to_string(),
        Some(_) => "←↑↓→ select · Enter metrics · x cancels · Esc hides (it runs on)".to_string(),
        None => "←↑↓→ select · Enter metrics · r runs missing · R reruns selected · Esc closes"
            .to_string(),
    };
    lines.push(Line::from(Span::styled(
        format::fit(&keys, inner),
        theme.dim(),
    )));
    let height = (lines.len() as u16 + 2).min(area.height);
    let rect = centered(area, width, height);
    let status = match &board.run {
        Some(run) => format!(
            " · running {}/{} · {:.1} s",
            run.index.max(1).min(run.total.max(1)),
            run.total,
            run.elapsed_ms as f64 / 1000.0
        ),
        None => String::new(),
    };
    let plan = &board.snapshot.plan;
    // The progress first: a narrow terminal cuts the title's end.
    let title = Span::styled(
        format!(
            " case matrix {}{status} · rank {} · {} · {} ",
            plan.name,
            board.rank,
            plan.stage,
            side_name(board.side)
        ),
        theme.title(),
    );
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        rect,
    );
}

fn case_layout<'b>(
    board: &'b CasesBoard,
    view: CaseView,
    area: Rect,
    theme: Theme,
) -> ResultLayout<'b> {
    let width = width_in(area);
    let inner = usize::from(width.saturating_sub(2)).max(30);
    let mut lines: Vec<Line<'static>> = Vec::new();
    let mut histogram = None;
    let mut outputs = 0;
    let result = board.snapshot.analysis.cases.get(view.case);
    let state = board.state(view.case);
    if let Some(result) = result {
        lines.extend(labelled(
            "outcome",
            &format!(
                "{} {}",
                glyph(state),
                match state {
                    CellState::Done(o) => o.name().to_string(),
                    CellState::Running => "running now".into(),
                    CellState::Queued => "queued".into(),
                }
            ),
            inner,
            style(state, theme),
        ));
        lines.extend(labelled("why", &result.reason, inner, Style::new()));
        if let Some(case) = board.snapshot.plan.cases.get(view.case) {
            lines.extend(labelled(
                "changes",
                &match (&case.axis, &case.value) {
                    (Some(axis), Some(value)) => format!("{axis} = {value}"),
                    _ => "nothing: the captured call".into(),
                },
                inner,
                theme.dim(),
            ));
        }
        for attempt in &result.attempts {
            lines.extend(labelled(
                if Some(attempt.attempt) == result.attempt {
                    "attempt ▸"
                } else {
                    "attempt"
                },
                &format!(
                    "{} ({}{}): {} · {}",
                    attempt.attempt,
                    attempt.source,
                    if attempt.complete {
                        ""
                    } else {
                        ", interrupted"
                    },
                    attempt.outcome,
                    attempt.dir
                ),
                inner,
                theme.dim(),
            ));
        }
    }
    if let Some(replay) = board
        .snapshot
        .replays
        .get(view.case)
        .and_then(Option::as_ref)
    {
        outputs = replay.outputs.len();
        lines.push(Line::from(""));
        histogram = judged_lines(replay, view.output, inner, theme, &mut lines);
    }
    let histogram_rows = if histogram.is_some() && area.height >= 20 {
        HISTOGRAM
    } else {
        0
    };
    let height = (lines.len() as u16 + histogram_rows + 2).min(area.height.saturating_sub(2));
    let text_rows = height.saturating_sub(2 + histogram_rows);
    let mut keys = String::new();
    if outputs > 1 {
        keys.push_str(&format!("↑↓ output {}/{outputs} · ", view.output + 1));
    }
    if lines.len() > usize::from(text_rows) {
        keys.push_str("PgUp PgDn scroll · ");
    }
    keys.push_str("Esc closes");
    ResultLayout {
        rect: centered(area, width, height),
        lines,
        text_rows,
        histogram: histogram.filter(|_| histogram_rows > 0),
        keys,
    }
}

pub(super) fn draw_case(
    frame: &mut Frame,
    board: &CasesBoard,
    view: CaseView,
    area: Rect,
    theme: Theme,
) {
    let layout = case_layout(board, view, area, theme);
    let id = board
        .snapshot
        .plan
        .cases
        .get(view.case)
        .map_or("?", |c| c.id.as_str());
    let title = Span::styled(
        format!(" case {id} · {} ", board.snapshot.plan.name),
        theme.title(),
    );
    draw_judged(frame, layout, title, view.scroll, theme);
}
