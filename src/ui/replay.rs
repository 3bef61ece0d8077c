//! The replay popups (`p`): the dialog, the running replay's log, the judged result.
//!
//! ```text
//! ┌ replay · rank 0 · layers.0.input_norm#1 ─────────────────────────────────────┐
//! │  candidate  tests/python/replay_candidates.py:rms_norm_eps_after▏            │
//! │  reference  builtin:rms_norm                  suggested by the stage name    │
//! │  standard   msprobe                           ↑↓ msprobe · dynamo · allclose │
//! │  python                                     empty: $DUMPVIEW_PYTHON, the …   │
//! │input set  A: assets/examples/llama_kv_alias/a/rank0/match1-occ1             │
//! │Enter runs · Tab next field · ↑↓ earlier entries · Ctrl-U clears · Esc closes │
//! └──────────────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! The result draws each output's figures and metrics with the tensor popup's lines and its
//! |diff| histogram ([`super::tensors`]); its text scrolls above the histogram.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::{Theme, centered, format, tensors};
use crate::app::App;
use crate::app::replay::{ReplayDialog, ReplayField, ReplayJob, ReplayKept, ReplayView};
use crate::app::session::Side;
use crate::model::present::replay::{duration, figures, status};
use crate::model::replay::ReplayVerdict;
use crate::model::replay::judge::{OutputJudgement, SideSummary};

/// Widest the popups get.
pub(super) const MAX_WIDTH: u16 = 110;
/// The label column of the dialog's fields and of the result's lines.
pub(super) const LABEL: usize = 11;
/// Rows the result's |diff| histogram takes (its title line, bars, labels, legend).
pub(super) const HISTOGRAM: u16 = 7;

/// How far the open result popup's text can scroll in a frame of size `area`.
pub fn scroll_max(area: Rect, app: &App) -> usize {
    let (Some(view), None) = (app.replay_view, &app.replay_dialog) else {
        return 0;
    };
    let Some(kept) = app.replay_results.get(view.result) else {
        return 0;
    };
    let layout = result_layout(kept, view, area, Theme { color: false });
    layout
        .lines
        .len()
        .saturating_sub(usize::from(layout.text_rows))
}

fn title(rank: u32, stage: &str, side: Option<Side>, extra: &str, theme: Theme) -> Span<'static> {
    let side = match side {
        Some(Side::A) => " · A",
        Some(Side::B) => " · B",
        None => "",
    };
    Span::styled(
        format!(" replay · rank {rank} · {stage}{side}{extra} "),
        theme.title(),
    )
}

pub(super) fn width_in(area: Rect) -> u16 {
    area.width.saturating_sub(4).min(MAX_WIDTH)
}

/// `label     value`, the value wrapped under itself.
pub(super) fn labelled(label: &str, value: &str, width: usize, style: Style) -> Vec<Line<'static>> {
    tensors::wrap(&format!("{label:<LABEL$}{value}"), width, LABEL)
        .into_iter()
        .map(|l| Line::from(Span::styled(l, style)))
        .collect()
}

pub(super) fn wrapped(text: &str, width: usize, indent: usize, style: Style) -> Vec<Line<'static>> {
    format::wrap(text, width, indent)
        .into_iter()
        .map(|l| Line::from(Span::styled(l, style)))
        .collect()
}

fn side_name(side: Side) -> &'static str {
    match side {
        Side::A => "A",
        Side::B => "B",
    }
}

pub(super) fn draw_dialog(frame: &mut Frame, dialog: &ReplayDialog, area: Rect, theme: Theme) {
    let width = width_in(area);
    let inner = usize::from(width.saturating_sub(2)).max(30);
    let mut lines = Vec::new();
    for field in dialog.fields() {
        let focused = field == dialog.focus;
        let text = dialog.text(field);
        let note = note(dialog, field);
        let marker = if focused { "› " } else { "  " };
        let label = format!("{marker}{:<LABEL$}", field.label());
        let room = inner.saturating_sub(format::width(&label));
        let mut value = text.to_string();
        if focused && field != ReplayField::Side {
            value.push('▏');
        }
        let label_style = if focused { theme.title() } else { theme.dim() };
        let mut spans = vec![Span::styled(label, label_style)];
        match (!note.is_empty()).then_some(note) {
            // The note right-aligned after the value where both fit, else it gives way.
            Some(note) if format::width(&value) + 2 + format::width(note) <= room => {
                let pad = room - format::width(&value) - format::width(note);
                spans.push(Span::raw(value));
                spans.push(Span::raw(" ".repeat(pad)));
                spans.push(Span::styled(note.to_string(), theme.dim()));
            }
            _ => {
                // The end of what is typed, where the cursor is, stays in view.
                spans.push(Span::raw(format::fit_start(&value, room)));
            }
        }
        lines.push(Line::from(spans));
    }
    // Under the fields, as far in as they are.
    let info = |label: &str, value: &str| -> Vec<Line<'static>> {
        tensors::wrap(&format!("  {label:<LABEL$}{value}"), inner, LABEL + 2)
            .into_iter()
            .map(|l| Line::from(Span::styled(l, theme.dim())))
            .collect()
    };
    let target = dialog.chosen();
    lines.extend(info(
        "input set",
        &format!("{}: {}", side_name(target.side), target.shown),
    ));
    let op = match &target.op {
        Some(op) => format!("{op} (recorded by capture_inputs)"),
        None => "not recorded (capture_inputs(..., _op=\"torch.ops.npu.npu_rms_norm\") records it)"
            .to_string(),
    };
    lines.extend(info("operator", &op));
    lines.extend(info(
        "specs",
        "builtin:NAME · module:function · path/to/file.py:function · torch.ops.NS.OP",
    ));
    if let Some(error) = &dialog.error {
        lines.extend(wrapped(error, inner, 2, theme.bad()));
    }
    lines.push(Line::from(Span::styled(
        format::fit(
            "Enter runs · Tab next field · ↑↓ earlier entries · Ctrl-U clears · Esc closes",
            inner,
        ),
        theme.dim(),
    )));
    let rect = centered(area, width, lines.len() as u16 + 2);
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title(
            dialog.rank,
            &dialog.stage,
            None,
            "",
            theme,
        ))),
        rect,
    );
}

/// What the dialog says beside a field.
fn note(dialog: &ReplayDialog, field: ReplayField) -> &'static str {
    match field {
        ReplayField::Side => "Space or ↑↓: which capture's input set",
        ReplayField::Candidate
            if dialog.chosen().op.as_deref() == Some(dialog.candidate.trim()) =>
        {
            "the recorded operator"
        }
        ReplayField::Candidate if dialog.candidate.is_empty() => "the operator under test",
        ReplayField::Reference
            if dialog.suggested.is_some() && dialog.suggested == Some(dialog.reference.trim()) =>
        {
            "suggested by the stage or its operator"
        }
        ReplayField::Standard => "↑↓ msprobe · dynamo · allclose",
        ReplayField::Atol | ReplayField::Rtol if dialog.text(field).is_empty() => {
            "required: never assumed"
        }
        ReplayField::Python if dialog.python.is_empty() => {
            "empty: $DUMPVIEW_PYTHON, the recorded python, then PATH"
        }
        _ => "",
    }
}

pub(super) fn draw_running(frame: &mut Frame, job: &ReplayJob, area: Rect, theme: Theme) {
    let width = width_in(area);
    let inner = usize::from(width.saturating_sub(2)).max(20);
    let height = (area.height * 2 / 3)
        .max(10)
        .min(area.height.saturating_sub(2));
    let rect = centered(area, width, height);
    let elapsed = format!(" · {:.1} s", job.elapsed_ms as f64 / 1000.0);
    let keys = if job.cancelling {
        " cancelling… "
    } else {
        " ↑↓ scroll · Esc cancels "
    };
    let block = Block::bordered()
        .title(title(job.rank, &job.stage, Some(job.side), &elapsed, theme))
        .title(Line::from(Span::styled(keys, theme.dim())).right_aligned());
    let body = block.inner(rect);
    frame.render_widget(Clear, rect);
    frame.render_widget(block, rect);
    let mut head = labelled("candidate", &job.entry.candidate, inner, Style::new());
    head.extend(labelled(
        "reference",
        &format!(
            "{} · standard {}",
            job.entry.reference,
            standard(&job.entry)
        ),
        inner,
        Style::new(),
    ));
    let head_rows = head.len() as u16;
    let [head_area, log_area] =
        Layout::vertical([Constraint::Length(head_rows), Constraint::Min(0)]).areas(body);
    frame.render_widget(Paragraph::new(head), head_area);
    let log_block = Block::new().borders(Borders::TOP).title(Span::styled(
        if job.log.is_empty() {
            " replay_op.py: starting Python and torch… ".to_string()
        } else {
            format!(" replay_op.py's log · {} lines ", job.log.len())
        },
        theme.dim(),
    ));
    let rows = usize::from(log_block.inner(log_area).height);
    // The newest lines, `scroll` lines back; long lines cut (the full log is in the result).
    let end = job.log.len().saturating_sub(job.scroll);
    let start = end.saturating_sub(rows);
    let lines: Vec<Line> = job.log[start..end]
        .iter()
        .map(|l| Line::from(format::fit(l, inner)))
        .collect();
    frame.render_widget(Paragraph::new(lines).block(log_block), log_area);
}

fn standard(entry: &crate::model::replay::history::Entry) -> String {
    match entry.standard.as_str() {
        "allclose" => format!("allclose (atol {}, rtol {})", entry.atol, entry.rtol),
        "" => "msprobe".to_string(),
        other => other.to_string(),
    }
}

/// A verdict as its word, in its colour (bold, so NO_COLOR still marks it).
fn verdict_span(verdict: ReplayVerdict, theme: Theme) -> Span<'static> {
    let style = match verdict {
        ReplayVerdict::Pass => theme.good(),
        ReplayVerdict::Warning => theme.warn(),
        ReplayVerdict::Unsupported => theme.missing(),
        ReplayVerdict::Error | ReplayVerdict::Crash => theme.bad(),
    };
    Span::styled(
        verdict.name().to_uppercase(),
        style.add_modifier(Modifier::BOLD),
    )
}

/// The result popup's rectangle, its text lines, the rows the text gets and whether the
/// histogram is drawn (of which output's metrics).
pub(super) struct ResultLayout<'k> {
    pub(super) rect: Rect,
    pub(super) lines: Vec<Line<'static>>,
    pub(super) text_rows: u16,
    pub(super) histogram: Option<&'k crate::model::tensor::metrics::Histogram>,
    pub(super) keys: String,
}

fn result_layout<'k>(
    kept: &'k ReplayKept,
    view: ReplayView,
    area: Rect,
    theme: Theme,
) -> ResultLayout<'k> {
    let width = width_in(area);
    let inner = usize::from(width.saturating_sub(2)).max(30);
    let mut lines: Vec<Line<'static>> = Vec::new();
    let mut histogram = None;
    let mut outputs = 0;
    match &kept.outcome {
        Err(error) => {
            lines.push(Line::from(Span::styled(
                "NOT JUDGED",
                theme.bad().add_modifier(Modifier::BOLD),
            )));
            lines.extend(wrapped(error, inner, 2, theme.bad()));
            lines.extend(labelled(
                "candidate",
                &kept.entry.candidate,
                inner,
                Style::new(),
            ));
            lines.extend(labelled(
                "reference",
                &kept.entry.reference,
                inner,
                Style::new(),
            ));
            if !kept.log.is_empty() {
                lines.push(Line::from(Span::styled(
                    "replay_op.py's log, last lines:",
                    theme.dim(),
                )));
                let from = kept.log.len().saturating_sub(12);
                for line in &kept.log[from..] {
                    lines.extend(wrapped(line, inner, 2, theme.dim()));
                }
            }
            lines.push(Line::from(Span::styled(
                "p on the row opens the dialog on these fields again",
                theme.dim(),
            )));
        }
        Ok(result) => {
            let replay = &result.replay;
            outputs = replay.outputs.len();
            histogram = judged_lines(replay, view.output, inner, theme, &mut lines);
            // Where it ran and where its evidence is, after the figures.
            let run = &result.run;
            lines.extend(labelled("outputs", &run.out_dir, inner, Style::new()));
            let candidate = replay
                .sides
                .iter()
                .find(|s| s.role == "candidate")
                .and_then(|s| s.duration_s)
                .map(|d| format!(" (the candidate itself: {})", duration(d)))
                .unwrap_or_default();
            lines.extend(labelled(
                "ran",
                &format!(
                    "{} with {} ({}) in {}{candidate}",
                    run.host
                        .as_deref()
                        .map_or("here".to_string(), |h| format!("on {h}")),
                    run.python,
                    run.python_chosen_by,
                    duration(run.wall_s)
                ),
                inner,
                theme.dim(),
            ));
            for warning in &result.warnings {
                lines.extend(labelled("warning", warning, inner, theme.warn()));
            }
        }
    }
    let histogram_rows = if histogram.is_some() && area.height >= 20 {
        HISTOGRAM
    } else {
        0
    };
    let max_height = area.height.saturating_sub(2);
    let wanted = lines.len() as u16 + histogram_rows + 2;
    let height = wanted.min(max_height);
    let text_rows = height.saturating_sub(2 + histogram_rows);
    let rect = centered(area, width, height);
    let mut keys = String::new();
    if outputs > 1 {
        keys.push_str(&format!("↑↓ output {}/{outputs} · ", view.output + 1));
    }
    if lines.len() > usize::from(text_rows) {
        keys.push_str("PgUp PgDn scroll · ");
    }
    keys.push_str("c case matrix · Esc closes");
    ResultLayout {
        rect,
        lines,
        text_rows,
        histogram: histogram.filter(|_| histogram_rows > 0),
        keys,
    }
}

/// A judged replay's lines: the verdict and its reason, the candidate's and the reference's
/// runs, and output `output`'s figures and metrics; returns that output's |diff| histogram.
pub(super) fn judged_lines<'r>(
    replay: &'r crate::model::replay::Replay,
    output: usize,
    inner: usize,
    theme: Theme,
    lines: &mut Vec<Line<'static>>,
) -> Option<&'r crate::model::tensor::metrics::Histogram> {
    let outputs = replay.outputs.len();
    // `ERROR  reason`, the reason wrapped under itself.
    let word = replay.verdict.name().to_uppercase();
    let text = format!("{word}  {}", replay.reason);
    for (i, line) in tensors::wrap(&text, inner, word.len() + 2)
        .into_iter()
        .enumerate()
    {
        lines.push(match i {
            0 => Line::from(vec![
                verdict_span(replay.verdict, theme),
                Span::raw(line[word.len()..].to_string()),
            ]),
            _ => Line::from(line),
        });
    }
    for side in &replay.sides {
        if side.role == "candidate" || side.role == "reference" {
            lines.extend(side_lines(side, replay, inner, theme));
        }
    }
    let o = replay.outputs.get(output.min(outputs.saturating_sub(1)))?;
    output_lines(o, &replay.reason, outputs > 1, inner, theme, lines);
    o.metrics.as_ref().map(|m| &m.histogram)
}

/// `candidate  SPEC: ok, 6.67 ms` (and what it raised); the reference with its golden and
/// native runs' times.
fn side_lines(
    side: &SideSummary,
    replay: &crate::model::replay::Replay,
    width: usize,
    theme: Theme,
) -> Vec<Line<'static>> {
    let mut text = format!("{}: {}", side.spec, status(side.status));
    if let Some(d) = side.duration_s {
        text.push_str(&format!(", {}", duration(d)));
    }
    if side.role == "reference" {
        for other in replay
            .sides
            .iter()
            .filter(|s| s.role == "golden" || s.role == "reference_native")
        {
            text.push_str(&format!(" · {} {}", other.role, status(other.status)));
            if let Some(d) = other.duration_s {
                text.push_str(&format!(" {}", duration(d)));
            }
        }
    }
    let style = match side.status {
        crate::model::replay::record::Status::Ok => Style::new(),
        _ => theme.bad(),
    };
    let mut lines = labelled(side.role, &text, width, style);
    if let Some(e) = &side.exception {
        lines.extend(labelled("raised", &e.text(), width, theme.bad()));
    }
    lines
}

/// One output: its verdict, the standard's figures, its quirks, the tensor metrics.
fn output_lines(
    o: &OutputJudgement,
    replay_reason: &str,
    several: bool,
    width: usize,
    theme: Theme,
    lines: &mut Vec<Line<'static>>,
) {
    let dtypes = match (o.candidate_dtype, o.reference_dtype) {
        (Some(c), Some(r)) => format!("{c} against {} {r}", o.against),
        (Some(c), None) => c.to_string(),
        (None, Some(r)) => format!("{} {r}", o.against),
        (None, None) => String::new(),
    };
    let head = format!("{:<LABEL$}", o.name);
    lines.push(Line::from(vec![
        Span::styled(head, theme.title()),
        verdict_span(o.verdict, theme),
        Span::raw(format::fit(
            &format!("  {dtypes} · shape {:?}", o.shape),
            width.saturating_sub(LABEL + o.verdict.name().len()),
        )),
    ]));
    if several || o.reason != replay_reason {
        lines.extend(labelled("", &o.reason, width, Style::new()));
    }
    // The figures that decided the verdict (msprobe's cosine and max_abs_err, its
    // relative-error shares; dynamo's line) come first, the metrics next, then the rest of
    // the standard's figures (eps, small values, ULP error), so that the numbers a reader
    // looks for first are in view without scrolling.
    let (name, figure_lines) = figures(o).unwrap_or(("", Vec::new()));
    let decisive = figure_lines
        .iter()
        .position(|l| l.starts_with("eps "))
        .unwrap_or(figure_lines.len());
    for (i, line) in figure_lines[..decisive].iter().enumerate() {
        let label = if i == 0 { name } else { "" };
        lines.extend(labelled(label, line, width, Style::new()));
    }
    for quirk in &o.quirks {
        lines.extend(labelled("quirk", quirk, width, theme.warn()));
    }
    metric_block(o, width, theme, lines);
    for (i, line) in figure_lines[decisive..].iter().enumerate() {
        let label = if i == 0 { name } else { "" };
        lines.extend(labelled(label, line, width, theme.dim()));
    }
}

/// The tensor metrics of an output, candidate (a) against the side its standard compares
/// with (b).
fn metric_block(o: &OutputJudgement, width: usize, theme: Theme, lines: &mut Vec<Line<'static>>) {
    match &o.metrics {
        Some(m) => {
            lines.extend(labelled(
                "metrics",
                &format!(
                    "a = candidate, b = {} · close: |a-b| <= atol + rtol*|b|",
                    o.against
                ),
                width,
                theme.dim(),
            ));
            tensors::metric_lines(m, None, width, theme, lines);
        }
        None => {
            if let Some(e) = &o.metrics_error {
                lines.extend(labelled(
                    "metrics",
                    &format!("not computed: {e}"),
                    width,
                    theme.dim(),
                ));
            }
        }
    }
}

pub(super) fn draw_result(
    frame: &mut Frame,
    kept: &ReplayKept,
    view: ReplayView,
    area: Rect,
    theme: Theme,
) {
    let layout = result_layout(kept, view, area, theme);
    let title = title(
        kept.rank,
        &kept.stage,
        Some(kept.side),
        &kept.outcome.as_ref().map_or(String::new(), |r| {
            format!(" · {}", r.replay.standard.describe())
        }),
        theme,
    );
    draw_judged(frame, layout, title, view.scroll, theme);
}

/// A judged replay's popup (the replay result, a case of the matrix): `title` and the keys
/// on its border, its text from line `scroll` on, the histogram under it.
pub(super) fn draw_judged(
    frame: &mut Frame,
    layout: ResultLayout,
    title: Span<'static>,
    scroll: usize,
    theme: Theme,
) {
    // The keys give way from the first on (Esc closes stays) where the title needs the room.
    let room = usize::from(layout.rect.width).saturating_sub(format::width(&title.content) + 4);
    let mut keys: Vec<&str> = layout.keys.split(" · ").collect();
    while keys.len() > 1 && format::width(&keys.join(" · ")) + 2 > room {
        keys.remove(0);
    }
    let block = Block::bordered().title(title).title(
        Line::from(Span::styled(format!(" {} ", keys.join(" · ")), theme.dim())).right_aligned(),
    );
    let inner = block.inner(layout.rect);
    frame.render_widget(Clear, layout.rect);
    frame.render_widget(block, layout.rect);
    let [text_area, chart_area] =
        Layout::vertical([Constraint::Length(layout.text_rows), Constraint::Min(0)]).areas(inner);
    let max = layout
        .lines
        .len()
        .saturating_sub(usize::from(layout.text_rows));
    let first = scroll.min(max);
    let shown: Vec<Line> = layout
        .lines
        .into_iter()
        .skip(first)
        .take(usize::from(layout.text_rows))
        .collect();
    frame.render_widget(Paragraph::new(shown), text_area);
    if let Some(histogram) = layout.histogram {
        tensors::draw_histogram(frame, histogram, chart_area, theme);
    }
}
