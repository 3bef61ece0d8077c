//! Detail of the selected stage: A vs B statistics with differences, the source format's
//! context, logical and physical layout.
//!
//! Laid out by priority: every line has a level ([`KEY`] … [`CONTEXT`]); when the panel is
//! too short for all of them, the lines of the levels that fit whole are shown with the
//! first lines of the next, and the bottom border says how many lines are not shown. Lines are never wrapped by the widget: each is cut with `…`
//! to the panel's width (a path keeps its end), or wrapped here under a hanging indent (the
//! format's context), so what is counted is what is drawn.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::format::{Piece, bar};
use super::{Theme, format};
use crate::app::App;
use crate::model::analysis::compare::{STATS, Verdict};
use crate::model::analysis::diff::MergedCounts;
use crate::model::dump::{Mode, Record, Stats};

/// The stage and the verdict.
const KEY: u8 = 0;
/// The statistics table.
const TABLE: u8 = 1;
/// Each side's dtype, shape and device.
const SUMMARY: u8 = 2;
/// Each side's stride, offset and storage.
const STRIDE: u8 = 3;
/// Each side's saved tensor.
const TENSOR: u8 = 4;
/// What the source format adds (msprobe's module and stack, a windowed dump's roles): often
/// many lines, so last; a panel too short for all of them shows their first lines.
const CONTEXT: u8 = 5;

/// Width of the statistic names' column: `pos_checksum`, the longest.
const NAME: usize = 12;
/// Indent of a context line's continuation: under its value.
const CONTEXT_INDENT: usize = 9;

struct Entry {
    level: u8,
    line: Line<'static>,
}

fn stat(stats: Option<&Stats>, name: &str) -> Option<f64> {
    stats?.get(name)
}

fn counts(s: Option<&Stats>) -> String {
    s.map_or("–".to_string(), |s| {
        if s.counts_known {
            format!("{}/{}", s.nan_count, s.inf_count)
        } else {
            // Inferred from max/min by a format that counts nothing: yes/no, not a count.
            let seen = |n: u64| if n > 0 { "yes" } else { "no" };
            format!("{}/{}?", seen(s.nan_count), seen(s.inf_count))
        }
    })
}

/// One side's layout lines: `side` is `Some(("A", style))` in diff mode, `None` in scan
/// mode (one capture is not "A"); `format_name` names the source format for what it does
/// not record.
fn layout_entries(
    side: Option<(&str, Style)>,
    r: &Record,
    format_name: &str,
    width: usize,
    merged: Option<(&[u64], usize)>,
) -> Vec<Entry> {
    // A record merged over a parallel group: the full shape the diff compared, then this
    // rank's own (the layout below is this rank's piece).
    let mut summary = match merged {
        Some((full, ranks)) if full != &r.shape[..] => format!(
            "{} {} merged from {ranks} rank{} (this rank {})",
            r.dtype,
            format::shape(full),
            if ranks == 1 { "" } else { "s" },
            format::shape(&r.shape)
        ),
        _ => format!("{} {}", r.dtype, format::shape(&r.shape)),
    };
    if !r.device.is_empty() {
        summary.push_str(&format!(" on {}", r.device));
    }
    if r.mode == Mode::Graph {
        summary.push_str(" · graph slot");
    }
    let summary = match side {
        Some((label, style)) => Line::from(vec![
            Span::styled(format!("{label} "), style),
            Span::raw(format::fit(&summary, width.saturating_sub(2))),
        ]),
        None => Line::from(format::fit(&summary, width)),
    };
    let plain = Style::new();
    let indent = || Piece::new(" ", plain, 0);
    let stride = bar(
        vec![
            indent(),
            Piece::new(format!("stride {}", format::stride(&r.stride)), plain, 0),
            Piece::new(format!("offset {}", r.storage_offset), plain, 1),
            Piece::new(
                if r.is_contiguous {
                    "contiguous"
                } else {
                    "non-contiguous"
                },
                plain,
                2,
            ),
        ],
        " ",
        plain,
        width,
    );
    let recorded = r.storage_ptr.is_some() || r.storage_id.is_some() || r.storage_nbytes.is_some();
    // The continuation lines of a "not recorded" storage line.
    let mut not_recorded: Vec<Line<'static>> = Vec::new();
    let storage = if recorded {
        let mut pieces = vec![
            indent(),
            Piece::new(
                format!(
                    "storage {}",
                    r.storage_id.map_or("–".to_string(), |i| i.to_string())
                ),
                plain,
                0,
            ),
            Piece::new(
                format!(
                    "at {}",
                    r.storage_ptr.map_or("–".to_string(), |p| format!("{p:#x}"))
                ),
                plain,
                1,
            ),
            Piece::new(
                r.storage_nbytes
                    .map_or("size –".to_string(), |n| format!("{n} B")),
                plain,
                2,
            ),
        ];
        if let Some(f) = r.device_format {
            pieces.push(Piece::new(format!("device format {f}"), plain, 3));
        }
        if let Some(path) = r.stats_path.as_deref() {
            // Which kernel computed the statistics: worth a glance when two captures disagree.
            pieces.push(Piece::new(format!("stats by {path}"), plain, 3));
        }
        bar(pieces, " ", plain, width)
    } else {
        // Said in full, wrapped: what a format does not record is worth reading.
        let what = if r.device.is_empty() {
            "storage, device"
        } else {
            "storage"
        };
        let text = format!("{what}: not recorded by {format_name}");
        let mut lines = format::wrap(&text, width.saturating_sub(2), 2)
            .into_iter()
            .map(|l| Line::from(format!("  {l}")));
        let first = lines.next().unwrap_or_default();
        not_recorded.extend(lines);
        first
    };
    let mut entries = vec![
        Entry {
            level: SUMMARY,
            line: summary,
        },
        Entry {
            level: STRIDE,
            line: stride,
        },
        Entry {
            level: STRIDE,
            line: storage,
        },
    ];
    entries.extend(not_recorded.into_iter().map(|line| Entry {
        level: STRIDE,
        line,
    }));
    if let Some(file) = r.tensor_file.as_deref() {
        // What was kept, then the path cut from its start (the file name says the most; the
        // stage is the panel's title already).
        let rows = match (r.rows_kept, r.rows_total) {
            (Some(k), Some(t)) if k < t => format!("{k} of {t} rows · "),
            _ => String::new(),
        };
        let head = format!("  tensor {rows}");
        let room = width.saturating_sub(format::width(&head));
        entries.push(Entry {
            level: TENSOR,
            line: Line::from(format::fit(
                &format!("{head}{}", format::fit_start(file, room)),
                width,
            )),
        });
    }
    entries
}

/// Every line the detail would show for the selected row in `width` columns, in order.
fn entries(app: &App, width: usize, theme: Theme) -> Vec<Entry> {
    let (Some(loaded), Some(choice), Some(row)) = (&app.loaded, app.choice(), app.row()) else {
        return Vec::new();
    };
    let window_a = &loaded.session.a.windows[choice.a];
    let window_b = choice
        .b
        .and_then(|bi| loaded.session.b.as_ref().map(|d| &d.windows[bi]));
    let a = row.a.map(|i| &window_a.records[i]);
    let b = match (row.b, window_b) {
        (Some(j), Some(w)) => Some(&w.records[j]),
        _ => None,
    };
    let pair = match (row.pair, choice.pair, loaded.diff()) {
        (Some(p), Some(w), Some(report)) => Some(&report.windows[w].pairs[p]),
        _ => None,
    };
    let diffing = loaded.diff().is_some();
    let mut out = vec![Entry {
        level: KEY,
        line: Line::from(Span::styled(
            format::fit_middle(&row.key, width),
            theme.title(),
        )),
    }];
    let verdict = if let Some(p) = pair {
        Some(match &p.comparison.verdict {
            Verdict::Agree => ("agrees within tolerance".to_string(), theme.good()),
            Verdict::Magnitude => ("statistics differ".to_string(), theme.warn()),
            Verdict::ValuesMoved => ("values moved (checksum only)".to_string(), theme.warn()),
            Verdict::ChecksumInconclusive => (
                "checksum inconclusive (within rounding; a moved row would hide)".to_string(),
                theme.dim(),
            ),
            Verdict::NotCompared { reason } => (format!("not compared: {reason}"), theme.missing()),
            Verdict::NonFinite => ("NaN/inf counts differ".to_string(), theme.bad()),
            Verdict::Structural { reason } => (format!("structural: {reason}"), theme.bad()),
        })
    } else if diffing {
        let side = if a.is_some() { "A" } else { "B" };
        Some((
            format!("captured in {side} only: missing evidence"),
            theme.missing(),
        ))
    } else {
        None
    };
    if let Some((text, style)) = verdict {
        out.push(Entry {
            level: KEY,
            line: Line::from(Span::styled(format::fit(&text, width), style)),
        });
    }
    // What the token rows showed, where they judged this pair.
    if let Some(rows) = pair.and_then(|p| p.comparison.rows.as_ref()) {
        let text = crate::model::present::diff::rows_text(rows);
        out.push(Entry {
            level: KEY,
            line: Line::from(Span::styled(format::fit(&text, width), theme.dim())),
        });
    }
    // The replicated findings at this stage: the ranks that disagree, and by how much.
    if row.replicated
        && let Some(report) = loaded.diff()
    {
        for f in report.replicated.iter().filter(|f| f.key == row.key) {
            let text = format!(
                "REPLICATED TENSOR DIFFERS in {}: {} ranks {} and {}{}",
                f.side.to_ascii_uppercase(),
                f.axis,
                f.rank,
                f.other_rank,
                match (&f.stat, f.abs_diff, f.bound) {
                    (Some(stat), Some(d), Some(bound)) => {
                        format!(" ({stat} by {d:.3e}, bound {bound:.3e})")
                    }
                    _ => format!(" ({})", f.verdict.name()),
                }
            );
            out.push(Entry {
                level: KEY,
                line: Line::from(Span::styled(format::fit(&text, width), theme.bad())),
            });
        }
    }

    // The findings from one run this record is part of, and a write moved in its pool.
    if row.single_run {
        let analysis = &loaded.session.analysis;
        for f in analysis
            .single_run_a
            .findings
            .iter()
            .chain(&analysis.single_run_b.findings)
            .filter(|f| f.subjects().iter().any(|r| r.key == row.key))
        {
            // Wrapped, not cut: the sentence and where to look are the finding.
            for line in format::wrap(&f.paragraph(), width, 2) {
                out.push(Entry {
                    level: KEY,
                    line: Line::from(Span::styled(line, theme.bad())),
                });
            }
        }
    }
    if row.moved_write
        && let Some(report) = loaded.diff()
    {
        for m in report
            .layout_differences
            .moved
            .iter()
            .filter(|m| m.key == row.key)
        {
            let text = format!("MOVED WRITE: {}", m.text);
            for line in format::wrap(&text, width, 2) {
                out.push(Entry {
                    level: KEY,
                    line: Line::from(Span::styled(line, theme.bad())),
                });
            }
        }
    }

    // The statistics: values sized to what is shown (numbers are never cut), then the names
    // as wide as what is left allows, up to `pos_checksum`.
    let sa = a.and_then(|r| r.stats.as_ref());
    let sb = b.and_then(|r| r.stats.as_ref());
    let diffs: Vec<_> = STATS
        .iter()
        .map(|name| pair.and_then(|p| p.comparison.stats.iter().find(|d| d.name == *name)))
        .collect();
    // A record merged over a parallel group shows the merged statistics the diff compared,
    // not its lowest rank's piece (the pieces follow below).
    let merged =
        |pieces: fn(&crate::model::analysis::diff::PairDiff) -> bool| pair.is_some_and(pieces);
    let (merged_a, merged_b) = (
        merged(|p| !p.pieces_a.is_empty()),
        merged(|p| !p.pieces_b.is_empty()),
    );
    let value = |i: usize, name: &str, side_merged: bool, own: Option<&Stats>, b_side: bool| {
        if side_merged {
            diffs[i].and_then(|d| if b_side { d.b } else { d.a })
        } else {
            stat(own, name)
        }
    };
    let values_a: Vec<String> = STATS
        .iter()
        .enumerate()
        .map(|(i, n)| format::num(value(i, n, merged_a, sa, false)))
        .collect();
    let values_b: Vec<String> = STATS
        .iter()
        .enumerate()
        .map(|(i, n)| format::num(value(i, n, merged_b, sb, true)))
        .collect();
    let rels: Vec<String> = diffs
        .iter()
        .map(|d| {
            d.and_then(|d| d.rel_diff)
                .map_or("–".to_string(), |r| format!("{r:.1e}"))
        })
        .collect();
    let abss: Vec<String> = diffs
        .iter()
        .map(|d| format::num(d.and_then(|d| d.abs_diff)))
        .collect();
    let widest = |values: &[String], header: &str| {
        values
            .iter()
            .map(|v| format::width(v))
            .chain([format::width(header)])
            .max()
            .unwrap_or(1)
    };
    // A merged record's counts: its pieces' summed (a replicated one's: its lowest rank's).
    let merged_text = |merged: MergedCounts| match merged {
        MergedCounts::Replica(stats) => counts(stats),
        MergedCounts::Summed { nan, inf } => format!("{nan}/{inf}"),
        MergedCounts::Unknown => "–".to_string(),
    };
    let (ca, cb) = match pair {
        Some(p) if merged_a || merged_b => (
            if merged_a {
                merged_text(p.merged_counts_a())
            } else {
                counts(sa)
            },
            if merged_b {
                merged_text(p.merged_counts_b())
            } else {
                counts(sb)
            },
        ),
        _ => (counts(sa), counts(sb)),
    };
    let first_header = if diffing { "A" } else { "value" };
    let wa = widest(&values_a, first_header).max(format::width(&ca));
    let wb = widest(&values_b, "B").max(format::width(&cb));
    let wr = widest(&rels, "rel");
    let wabs = widest(&abss, "|A-B|");
    // Values and their separators, and the exceeds mark.
    let core = if diffing {
        wa + 1 + wb + 1 + wr + 1
    } else {
        wa
    };
    let name_width = width.saturating_sub(core + 1).clamp(4, NAME);
    let with_abs = diffing && width >= NAME + 1 + core + 2 + wabs;
    let row_text = |name: &str, va: &str, vb: &str, rel: &str, abs: &str| {
        let mut t = format!("{:<name_width$} {va:>wa$}", format::fit(name, name_width));
        if diffing {
            t.push_str(&format!(" {vb:>wb$} {rel:>wr$}"));
        }
        if with_abs {
            t.push_str(&format!("  {abs:>wabs$}"));
        }
        t
    };
    out.push(Entry {
        level: TABLE,
        line: Line::from(Span::styled(
            format::fit(&row_text("stat", first_header, "B", "rel", "|A-B|"), width),
            theme.dim(),
        )),
    });
    out.push(Entry {
        level: TABLE,
        line: Line::from(format::fit(&row_text("nan/inf", &ca, &cb, "", ""), width)),
    });
    for (i, name) in STATS.iter().enumerate() {
        let exceeds = diffs[i].is_some_and(|d| d.exceeds);
        let text = row_text(name, &values_a[i], &values_b[i], &rels[i], &abss[i]);
        let style = if exceeds { theme.bad() } else { Style::new() };
        out.push(Entry {
            level: TABLE,
            line: Line::from(Span::styled(
                format::fit(&format!("{text}{}", if exceeds { "<" } else { "" }), width),
                style,
            )),
        });
    }

    // The per-rank pieces of a merged record: rank, local shape, and its own statistics.
    if let Some(p) = pair {
        for (side, pieces) in [("A", &p.pieces_a), ("B", &p.pieces_b)] {
            if pieces.is_empty() {
                continue;
            }
            out.push(Entry {
                level: SUMMARY,
                line: Line::from(Span::styled(
                    format::fit(
                        &format!(
                            "{side} merged from {} rank{}",
                            pieces.len(),
                            if pieces.len() == 1 { "" } else { "s" }
                        ),
                        width,
                    ),
                    theme.dim(),
                )),
            });
            for piece in pieces.iter() {
                let s = piece.stats.as_ref();
                let text = format!(
                    "  rank {} {:?} {} max_abs {} mean {}",
                    piece.rank,
                    piece.shape,
                    counts(s),
                    format::num(stat(s, "max_abs")),
                    format::num(stat(s, "mean"))
                );
                out.push(Entry {
                    level: SUMMARY,
                    line: Line::from(format::fit(&text, width)),
                });
            }
        }
    }
    let sides = [
        (a, "A", theme.side_a(), window_a.facts.name),
        (
            b,
            "B",
            theme.side_b(),
            window_b.map_or("", |w| w.facts.name),
        ),
    ];
    for (record, label, style, format_name) in sides {
        if let Some(r) = record {
            let side = diffing.then_some((label, style));
            let merged = pair.and_then(|p| {
                let (shape, pieces) = if label == "A" {
                    (&p.shape_a, &p.pieces_a)
                } else {
                    (&p.shape_b, &p.pieces_b)
                };
                (pieces.len() > 1).then_some((&shape[..], pieces.len()))
            });
            out.extend(layout_entries(side, r, format_name, width, merged));
        }
    }
    // What the source format adds (msprobe's module and stack, a windowed dump's roles).
    let context_a = row
        .a
        .zip(window_a.context.as_ref())
        .map(|(i, c)| c.of(i))
        .unwrap_or_default();
    for (side, window, index) in [("A", Some(window_a), row.a), ("B", window_b, row.b)] {
        let (Some(window), Some(index)) = (window, index) else {
            continue;
        };
        let Some(context) = &window.context else {
            continue;
        };
        let notes = context.of(index);
        if notes.is_empty() || (side == "B" && notes == context_a) {
            continue;
        }
        let title = if diffing {
            format!("{side} context")
        } else {
            "context".to_string()
        };
        out.push(Entry {
            level: CONTEXT,
            line: Line::from(Span::styled(title, theme.dim())),
        });
        for (label, value) in notes {
            let label = format!("{label:<8} ");
            let indent = format::width(&label).min(CONTEXT_INDENT.max(width / 3));
            let parts = format::wrap(value, width.saturating_sub(indent), 0);
            for (i, part) in parts.into_iter().enumerate() {
                let lead = if i == 0 {
                    format::fit(&label, indent)
                } else {
                    " ".repeat(indent)
                };
                out.push(Entry {
                    level: CONTEXT,
                    line: Line::from(format!("{lead}{part}")),
                });
            }
        }
    }

    out
}

/// Of `entries`, those shown in `rows` rows, in order: every line of the levels that fit
/// whole, then the first lines of the next level; the number left out.
fn choose(entries: Vec<Entry>, rows: usize) -> (Vec<Line<'static>>, usize) {
    let total = entries.len();
    let fits = |l: u8| entries.iter().filter(|e| e.level <= l).count() <= rows;
    let whole = (KEY..=CONTEXT).rev().find(|&l| fits(l));
    let mut room =
        rows.saturating_sub(whole.map_or(0, |l| entries.iter().filter(|e| e.level <= l).count()));
    let next = whole.map_or(KEY, |l| l + 1);
    // A single line of the next level would be a heading alone.
    if room < 2 {
        room = 0;
    }
    let shown: Vec<Line<'static>> = entries
        .into_iter()
        .filter(|e| {
            if whole.is_some_and(|l| e.level <= l) {
                true
            } else if e.level == next && room > 0 {
                room -= 1;
                true
            } else {
                false
            }
        })
        .map(|e| e.line)
        .collect();
    let left_out = total - shown.len();
    (shown, left_out)
}

/// Rows (borders included) the detail needs for the selected row in a panel `width`
/// columns wide: `(core, full)`, with the lines up to each side's dtype and shape, and with
/// every line.
pub fn needed(app: &App, width: u16) -> (u16, u16) {
    let entries = entries(
        app,
        usize::from(width.saturating_sub(2)),
        Theme { color: false },
    );
    let core = entries.iter().filter(|e| e.level <= SUMMARY).count();
    (core as u16 + 2, entries.len() as u16 + 2)
}

/// The width (borders included) at which the statistics table shows whole names next to
/// A, B and rel (|A-B| needs more).
pub fn natural_width(app: &App) -> u16 {
    // Values of the compact number format take at most 10 columns, rel 6.
    let diffing = app.diffing();
    let core = if diffing { 10 + 1 + 10 + 1 + 6 + 1 } else { 10 };
    (2 + NAME + 1 + core) as u16
}

pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let mut block = Block::bordered().title(Span::styled(" detail ", theme.title()));
    let width = usize::from(area.width.saturating_sub(2));
    let rows = usize::from(area.height.saturating_sub(2));
    let all = entries(app, width, theme);
    let total = all.len();
    if app.detail_scroll > 0 && total > rows {
        // Scrolled: the lines in their order, from the scrolled-to one, the last page full.
        let start = app.detail_scroll.min(total - rows);
        let lines: Vec<Line> = all
            .into_iter()
            .skip(start)
            .take(rows)
            .map(|e| e.line)
            .collect();
        let note = format!(
            " lines {}-{} of {total}: ] [ scroll ",
            start + 1,
            start + rows
        );
        block = block.title_bottom(Span::styled(
            format::fit(&note, width.saturating_sub(2)),
            theme.dim(),
        ));
        frame.render_widget(Paragraph::new(lines).block(block), area);
        return;
    }
    let (lines, left_out) = choose(all, rows);
    if left_out > 0 {
        // What gives the detail more room: Tab back from the alias panel, Enter on the
        // timeline (wider and taller), else a bigger terminal.
        let how = if app.focus == crate::app::Focus::Aliases {
            "Tab to the timeline"
        } else if app.wide_detail {
            "enlarge the terminal"
        } else {
            "Enter widens"
        };
        let note = format!(
            " {left_out} more line{}: ] or {how} ",
            if left_out == 1 { "" } else { "s" }
        );
        block = block.title_bottom(Span::styled(
            format::fit(&note, width.saturating_sub(2)),
            theme.dim(),
        ));
    }
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
