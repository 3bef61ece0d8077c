//! The tensor comparison popups: a gauge while a comparison runs, then its result.
//!
//! ```text
//! ┌ tensors · rank 0 · layers.3.mlp_up#1 ───────────── key 1/2 ↑↓ · Esc closes ┐
//! │float32 vs float16 · shape [8, 688] · 5504 elements · compared as float64   │
//! │allclose NO: 318 of 5504 mismatch (5.7776%) · atol 1e-5, rtol 1e-2          │
//! │first mismatch  [0, 16]  a=4.5317411e-4  b=-2.4342537e-4                    │
//! │max_abs_diff    127.91015625 at [5, 100]  a=-27663.91015625  b=-27536       │
//! │mean_abs_diff   0.0459288   rel_l2 0.00172365   cosine 0.999999241          │
//! │max ULP         …   non-finite      A none · B 4 -inf · positions DIFFER …  │
//! │ |a-b| by decade · count on each bar, height log-scaled ────────────────────│
//! │            █████ █████ █████                           ▇▇▇▇▇ ▂▂▂▂▂ █████   │
//! │      ██8██ █122█ 1247█ 4110█ ██9██                     ██3██ ██1██ ██4██   │
//! │ =0   1e-7  1e-6  1e-5  1e-4  1e-3  1e-2  1e-1   1e0    1e1   1e2   !fin    │
//! │=0: a == b · 1eN: 1eN <= |a-b| < 1e(N+1) · !fin: a or b NaN/inf             │
//! └────────────────────────────────────────────────────────────────────────────┘
//! ```

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Bar, BarChart, BarGroup, Block, Borders, Clear, Gauge, Paragraph};

use super::{Theme, centered};
use crate::app::{App, TensorJob, TensorPopup};
use crate::model::present::tensors::{display_key, num};
use crate::model::tensor::metrics::{Histogram, Location, Metrics};
use crate::model::tensor::pairing::FileComparison;

/// Width of the label column of the result's metric lines.
const LABEL: usize = 16;
/// Widest the result popup gets: wider only stretches the bars.
const MAX_WIDTH: u16 = 110;

pub(super) fn draw_progress(frame: &mut Frame, job: &TensorJob, area: Rect, theme: Theme) {
    let popup = centered(area, area.width.saturating_sub(4).min(76), 4);
    let text = if job.cancelling {
        format!("cancelling the comparison of {}…", job.stage)
    } else if job.total > 0 {
        format!(
            "comparing {}: {}/{} elements — Esc cancels",
            job.stage,
            compact(job.done),
            compact(job.total)
        )
    } else {
        format!(
            "comparing {}: {} elements — Esc cancels",
            job.stage,
            compact(job.done)
        )
    };
    let ratio = if job.total > 0 {
        (job.done as f64 / job.total as f64).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let block = Block::bordered().title(Span::styled(
        format!(" tensors · rank {} ", job.rank),
        theme.title(),
    ));
    let inner = block.inner(popup);
    frame.render_widget(Clear, popup);
    frame.render_widget(block, popup);
    let [line, bar] = Layout::vertical([Constraint::Length(1), Constraint::Length(1)]).areas(inner);
    frame.render_widget(Paragraph::new(text), line);
    frame.render_widget(
        Gauge::default()
            .gauge_style(theme.bar())
            .use_unicode(true)
            .ratio(ratio),
        bar,
    );
}

pub(super) fn draw_result(
    frame: &mut Frame,
    app: &App,
    popup: TensorPopup,
    area: Rect,
    theme: Theme,
) {
    let Some(kept) = app.tensor_results.get(popup.result) else {
        return;
    };
    let width = area.width.saturating_sub(4).min(MAX_WIDTH);
    let text_width = width.saturating_sub(2) as usize;
    let title = Span::styled(
        format!(" tensors · rank {} · {} ", kept.rank, kept.stage),
        theme.title(),
    );
    let (lines, metrics, keys) = match &kept.result {
        Err(e) => (error_lines(e, text_width, theme), None, String::new()),
        Ok(c) => {
            let rows = rows_saved(app, kept.rank, &kept.stage);
            let (lines, metrics) = comparison_lines(
                c,
                &kept.stage,
                rows.as_deref(),
                popup.pair,
                text_width,
                theme,
            );
            let keys = if c.pairs.len() > 1 {
                format!("key {}/{} ↑↓ · ", popup.pair + 1, c.pairs.len())
            } else {
                String::new()
            };
            (lines, metrics, keys)
        }
    };
    let text_height = lines.len() as u16;
    let chart_wanted = if metrics.is_some() {
        // A separator line with the chart's title, the bars, their labels, a legend line.
        (area.height / 3).max(8) + 1
    } else {
        0
    };
    let height = (text_height + chart_wanted + 2).min(area.height.saturating_sub(2));
    let rect = centered(area, width, height);
    let block = Block::bordered().title(title).title(
        Line::from(Span::styled(format!(" {keys}Esc closes "), theme.dim())).right_aligned(),
    );
    let inner = block.inner(rect);
    frame.render_widget(Clear, rect);
    frame.render_widget(block, rect);
    let [text_area, chart_area] =
        Layout::vertical([Constraint::Length(text_height), Constraint::Min(0)]).areas(inner);
    frame.render_widget(Paragraph::new(lines), text_area);
    if let Some(m) = metrics {
        draw_histogram(frame, &m.histogram, chart_area, theme);
    }
}

/// `8 of 12 rows saved` where the stage's saved tensor on either side holds fewer rows than
/// its record (`DUMP_PROBE_ROWS`); both sides' counts where they differ.
fn rows_saved(app: &App, rank: u32, stage: &str) -> Option<String> {
    let loaded = app.loaded.as_ref()?;
    let rows_of = |dump: &crate::model::dump::Dump| {
        dump.windows
            .iter()
            .filter(|w| w.rank == rank)
            .flat_map(|w| &w.records)
            .find(|r| r.key() == stage && r.tensor_file.is_some())
            .and_then(|r| Some((r.rows_kept?, r.rows_total?)))
    };
    let a = rows_of(&loaded.session.a);
    let b = loaded.session.b.as_ref().and_then(rows_of);
    let cut = |r: Option<(u64, u64)>| r.filter(|(kept, total)| kept < total);
    let text = |(kept, total): (u64, u64)| format!("{kept} of {total} rows saved");
    match (cut(a), cut(b)) {
        (None, None) => None,
        (Some(x), Some(y)) if x == y => Some(text(x)),
        (x, y) => {
            let side =
                |name: &str, r: Option<(u64, u64)>, whole: Option<(u64, u64)>| match (r, whole) {
                    (Some(r), _) => format!("{name}: {}", text(r)),
                    (None, Some((_, total))) => format!("{name}: all {total} rows saved"),
                    (None, None) => format!("{name}: rows unknown"),
                };
            Some(format!("{}, {}", side("A", x, a), side("B", y, b)))
        }
    }
}

/// A comparison that could not be made at all (a file unreadable, refused).
fn error_lines(error: &str, width: usize, theme: Theme) -> Vec<Line<'static>> {
    let mut lines: Vec<Line> = wrap(&format!("not compared: {error}"), width, 2)
        .into_iter()
        .map(|l| Line::from(Span::styled(l, theme.bad())))
        .collect();
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        "t on the row tries again",
        theme.dim(),
    )));
    lines
}

/// The text part of the popup for key pair `index`, and its metrics when it was compared.
fn comparison_lines<'c>(
    c: &'c FileComparison,
    stage: &str,
    rows: Option<&str>,
    index: usize,
    width: usize,
    theme: Theme,
) -> (Vec<Line<'static>>, Option<&'c Metrics>) {
    let mut lines = Vec::new();
    let push = |lines: &mut Vec<Line<'static>>, text: String, indent: usize, style: Style| {
        lines.extend(
            wrap(&text, width, indent)
                .into_iter()
                .map(|l| Line::from(Span::styled(l, style))),
        );
    };
    let pair = c.pairs.get(index);
    if let Some(p) = pair {
        let key = match &p.key_b {
            Some(kb) => format!("{} vs {}", display_key(&p.key), display_key(kb)),
            None => display_key(&p.key),
        };
        if c.pairs.len() > 1 || key != stage {
            push(&mut lines, format!("key {key}"), 4, theme.title());
        }
    } else {
        push(
            &mut lines,
            "the two files share no tensor key".to_string(),
            2,
            theme.bad(),
        );
    }
    let metrics = pair.and_then(|p| p.metrics.as_ref());
    match (pair, metrics) {
        (Some(_), Some(m)) => metric_lines(m, rows, width, theme, &mut lines),
        (Some(p), None) => push(
            &mut lines,
            format!(
                "not compared: {}",
                p.error.as_deref().unwrap_or("no metrics")
            ),
            2,
            theme.bad(),
        ),
        (None, _) => {}
    }
    for (side, keys) in [("A", &c.only_a), ("B", &c.only_b)] {
        if !keys.is_empty() {
            let names: Vec<String> = keys.iter().map(|k| display_key(k)).collect();
            push(
                &mut lines,
                format!("only in {side}: {}", names.join(", ")),
                4,
                theme.missing(),
            );
        }
    }
    (lines, metrics)
}

/// The metric lines of one comparison (dtypes, allclose, first mismatch, max_abs_diff,
/// mean_abs_diff with rel_l2 and cosine, max ULP, non-finite), wrapped to `width`: also
/// what the replay result shows of each output.
pub(super) fn metric_lines(
    m: &Metrics,
    rows: Option<&str>,
    width: usize,
    theme: Theme,
    lines: &mut Vec<Line<'static>>,
) {
    let mut push = |text: String, style: Style| {
        lines.extend(
            wrap(&text, width, LABEL)
                .into_iter()
                .map(|l| Line::from(Span::styled(l, style))),
        );
    };
    let dtypes = if m.dtype_a == m.dtype_b {
        m.dtype_a.to_string()
    } else {
        format!("{} vs {}", m.dtype_a, m.dtype_b)
    };
    let cast = if m.compared_as != m.dtype_a || m.compared_as != m.dtype_b {
        format!(" · compared as {}", m.compared_as)
    } else {
        String::new()
    };
    // A saved tensor cut to its first rows (DUMP_PROBE_ROWS) says so by its shape.
    let rows = rows.map_or(String::new(), |r| format!(" ({r})"));
    push(
        format!(
            "{dtypes} · shape {:?}{rows} · {} elements{cast}",
            m.shape, m.numel
        ),
        Style::new(),
    );
    let rule = format!("atol {:e}, rtol {:e}", m.atol, m.rtol);
    if m.allclose {
        push(
            format!("allclose yes: all {} elements within {rule}", m.numel),
            theme.good().add_modifier(Modifier::BOLD),
        );
    } else {
        push(
            format!(
                "allclose NO: {} of {} mismatch ({:.4}%) · {rule}",
                m.mismatches,
                m.numel,
                m.mismatch_fraction * 100.0
            ),
            theme.bad().add_modifier(Modifier::BOLD),
        );
    }
    if let Some(at) = &m.first_mismatch {
        push(labelled("first mismatch", &where_(at)), Style::new());
    }
    let max = match (m.max_abs_diff, &m.max_abs_diff_at) {
        (Some(d), Some(at)) => format!("{} at {}", num(d), where_(at)),
        _ => "– (no finite pair)".to_string(),
    };
    push(labelled("max_abs_diff", &max), Style::new());
    let opt = |v: Option<f64>| v.map_or("–".to_string(), num);
    push(
        labelled(
            "mean_abs_diff",
            &format!(
                "{}   rel_l2 {}   cosine {}",
                opt(m.mean_abs_diff),
                opt(m.rel_l2),
                m.cosine.map_or("–".to_string(), |c| format!("{c:.9}"))
            ),
        ),
        Style::new(),
    );
    if let Some(ulp) = m.max_ulp {
        // Where: the values are those of a line above more often than not.
        let at = m
            .max_ulp_at
            .as_ref()
            .map_or(String::new(), |at| format!(" at {:?}", at.coords));
        push(
            labelled(
                "max ULP",
                &format!("{ulp} in {}{at}", m.ulp_dtype.unwrap_or(m.compared_as)),
            ),
            Style::new(),
        );
    }
    let nf = &m.nonfinite;
    let side = |nan: u64, pos: u64, neg: u64| {
        let parts: Vec<String> = [(nan, "NaN"), (pos, "+inf"), (neg, "-inf")]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        }
    };
    let any = nf.nan_a + nf.nan_b + nf.posinf_a + nf.posinf_b + nf.neginf_a + nf.neginf_b > 0;
    let (text, style) = match (&nf.first_disagreement, any) {
        (_, false) => ("none on either side".to_string(), Style::new()),
        (None, true) => (
            format!(
                "A {} · B {} · positions agree",
                side(nf.nan_a, nf.posinf_a, nf.neginf_a),
                side(nf.nan_b, nf.posinf_b, nf.neginf_b)
            ),
            theme.good(),
        ),
        (Some(at), true) => (
            format!(
                "A {} · B {} · positions DIFFER, first {}",
                side(nf.nan_a, nf.posinf_a, nf.neginf_a),
                side(nf.nan_b, nf.posinf_b, nf.neginf_b),
                where_(at)
            ),
            theme.bad(),
        ),
    };
    push(labelled("non-finite", &text), style);
}

fn labelled(label: &str, value: &str) -> String {
    format!("{label:<LABEL$}{value}")
}

/// `[5, 100]  a=-27663.91  b=-27536`.
fn where_(at: &Location) -> String {
    format!("{:?}  a={}  b={}", at.coords, num(at.a), num(at.b))
}

/// One bar per decade of |a-b| (the empty decades between the smallest and the largest
/// too, when they fit), exact zeros first and non-finite pairs last, in their own styles.
/// Heights are log-scaled so a handful of outliers stays visible next to thousands of
/// small differences; the count is written on each bar.
/// (Also the replay result's histogram of each output, candidate against reference.)
pub(super) fn draw_histogram(frame: &mut Frame, h: &Histogram, area: Rect, theme: Theme) {
    if area.height < 4 {
        return;
    }
    let [chart_area, legend_area] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(1)]).areas(area);
    let width = chart_area.width as usize;
    let mut decades: Vec<(i32, u64)> = Vec::new();
    if let (Some(first), Some(last)) = (h.decades.first(), h.decades.last()) {
        decades = (first.decade..=last.decade)
            .map(|d| {
                let count = h
                    .decades
                    .iter()
                    .find(|x| x.decade == d)
                    .map_or(0, |x| x.count);
                (d, count)
            })
            .collect();
    }
    let bar_width = |decades: &[(i32, u64)]| {
        decades
            .iter()
            .map(|&(d, c)| decade_label(d).len().max(compact(c).len() + 1))
            .chain([4, compact(h.zero).len() + 1, compact(h.nonfinite).len() + 1])
            .max()
            .unwrap_or(4)
    };
    let fits = |decades: &[(i32, u64)]| (decades.len() + 2) * (bar_width(decades) + 1) <= width + 1;
    if !fits(&decades) {
        decades.retain(|&(_, c)| c > 0);
    }
    // Wider bars fill a wide popup, up to twice what the labels need.
    let needed = bar_width(&decades);
    let bw = ((width + 1) / (decades.len() + 2))
        .saturating_sub(1)
        .clamp(needed, 2 * needed);
    let shown = ((width + 1) / (bw + 1)).saturating_sub(2);
    // Too many even so: the smallest differences go, the largest matter.
    let cut = decades.len().saturating_sub(shown);
    decades.drain(..cut);

    let mut bars = vec![bar("=0", h.zero, theme.good())];
    bars.extend(
        decades
            .iter()
            .map(|&(d, c)| bar(&decade_label(d), c, theme.bar())),
    );
    bars.push(bar("!fin", h.nonfinite, theme.bad()));
    let max = bars_max(h, &decades);
    let chart = BarChart::default()
        .block(Block::new().borders(Borders::TOP).title(Span::styled(
            " |a-b| by decade · count on each bar, height log-scaled ",
            theme.title(),
        )))
        .data(BarGroup::default().bars(&bars))
        .bar_width(bw as u16)
        .bar_gap(1)
        .max(max)
        .value_style(Style::new().add_modifier(Modifier::REVERSED));
    frame.render_widget(chart, chart_area);
    let legend = match decades.first() {
        Some((first, _)) if cut > 0 => {
            format!("{cut} decades below 1e{first} not drawn · =0: a == b · !fin: a or b NaN/inf")
        }
        _ => "=0: a == b · 1eN: 1eN <= |a-b| < 1e(N+1) · !fin: a or b NaN/inf".to_string(),
    };
    frame.render_widget(
        Paragraph::new(Span::styled(legend, theme.dim())),
        legend_area,
    );
}

fn bar(label: &str, count: u64, style: Style) -> Bar<'static> {
    Bar::default()
        .label(Line::from(label.to_string()))
        .value(height(count))
        .text_value(compact(count))
        .style(style)
}

fn bars_max(h: &Histogram, decades: &[(i32, u64)]) -> u64 {
    decades
        .iter()
        .map(|&(_, c)| c)
        .chain([h.zero, h.nonfinite])
        .map(height)
        .max()
        .unwrap_or(1)
        .max(1)
}

/// A bar's height for `count`: 0 for none, else 100 × (1 + log10 count), so a single pair
/// is still a visible bar.
fn height(count: u64) -> u64 {
    if count == 0 {
        0
    } else {
        (100.0 * (1.0 + (count as f64).log10())).round() as u64
    }
}

/// `1e-4`.
fn decade_label(decade: i32) -> String {
    format!("1e{decade}")
}

/// A count in at most four characters: `4110`, `12k`, `1.2M`, `3G`.
fn compact(n: u64) -> String {
    let scaled = |div: f64, unit: &str| {
        let v = n as f64 / div;
        if v < 9.95 {
            format!("{v:.1}{unit}")
        } else {
            format!("{}{unit}", v.round() as u64)
        }
    };
    match n {
        0..=9_999 => n.to_string(),
        10_000..=999_499 => scaled(1e3, "k"),
        999_500..=999_499_999 => scaled(1e6, "M"),
        _ => scaled(1e9, "G"),
    }
}

/// Greedy word wrap of `text` to `width` columns; continuation lines are indented by
/// `indent` spaces (under the value of a labelled line). Words longer than a line are cut.
/// Runs of spaces inside a line are kept (a label's padding, aligned columns).
pub(super) fn wrap(text: &str, width: usize, indent: usize) -> Vec<String> {
    let width = width.max(indent + 8);
    let mut lines = Vec::new();
    let (mut line, mut len, mut fresh) = (String::new(), 0, true);
    for word in text.split(' ') {
        let w = word.chars().count();
        if !fresh && len + 1 + w > width {
            lines.push(std::mem::replace(&mut line, " ".repeat(indent)));
            (len, fresh) = (indent, true);
        }
        if fresh && w == 0 && !lines.is_empty() {
            continue; // no run of spaces at the start of a continuation line
        }
        if !fresh {
            line.push(' ');
            len += 1;
        }
        line.push_str(word);
        len += w;
        fresh = false;
    }
    lines.push(line);
    // Cut what still overflows (a word longer than a line).
    lines
        .into_iter()
        .flat_map(|l| {
            let chars: Vec<char> = l.chars().collect();
            if chars.is_empty() {
                return vec![String::new()];
            }
            chars.chunks(width).map(|c| c.iter().collect()).collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_counts_fit_four_columns() {
        for (n, s) in [
            (0, "0"),
            (4110, "4110"),
            (12_345, "12k"),
            (999_499, "999k"),
            (999_500, "1.0M"),
            (1_234_567, "1.2M"),
            (12_345_678_901, "12G"),
        ] {
            assert_eq!(compact(n), s);
            assert!(compact(n).len() <= 4);
        }
    }

    #[test]
    fn wrap_indents_continuation_lines() {
        let lines = wrap("label     one two three four five six", 20, 10);
        assert_eq!(
            lines,
            vec![
                "label     one two",
                "          three four",
                "          five six"
            ]
        );
        assert_eq!(wrap("abcdefghijkl", 8, 0), vec!["abcdefgh", "ijkl"]);
        assert_eq!(wrap("", 10, 2), vec![""]);
    }

    #[test]
    fn too_many_decades_keep_the_largest_and_say_so() {
        use crate::model::tensor::metrics::DecadeCount;
        let h = Histogram {
            zero: 5,
            decades: (-30..=2)
                .map(|decade| DecadeCount { decade, count: 10 })
                .collect(),
            nonfinite: 0,
        };
        let mut terminal =
            ratatui::Terminal::new(ratatui::backend::TestBackend::new(74, 12)).unwrap();
        terminal
            .draw(|f| draw_histogram(f, &h, f.area(), Theme { color: true }))
            .unwrap();
        let buffer = terminal.backend().buffer();
        let row = |y: u16| -> String { (0..74).map(|x| buffer[(x, y)].symbol()).collect() };
        let labels = row(10);
        assert!(labels.contains("=0") && labels.contains("1e2") && labels.contains("!fin"));
        assert!(
            labels.contains("1e-7") && !labels.contains("1e-8"),
            "{labels}"
        );
        assert!(
            row(11).contains("23 decades below 1e-7 not drawn"),
            "{}",
            row(11)
        );
    }

    #[test]
    fn heights_are_log_scaled_and_keep_single_pairs_visible() {
        assert_eq!(height(0), 0);
        assert_eq!(height(1), 100);
        assert_eq!(height(1000), 400);
    }
}
