//! Detail of the selected stage: A vs B statistics with differences, logical and physical layout.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};

use super::{Theme, format};
use crate::app::App;
use crate::model::analysis::compare::{STATS, Verdict};
use crate::model::dump::{Record, Stats};

fn stat(stats: Option<&Stats>, name: &str) -> Option<f64> {
    stats?.get(name)
}

fn layout_lines(side: &str, r: &Record, style: Style) -> Vec<Line<'static>> {
    let ptr = r.storage_ptr.map_or("–".to_string(), |p| format!("{p:#x}"));
    let id = r.storage_id.map_or("–".to_string(), |i| i.to_string());
    let fmt = r.device_format.map_or("–".to_string(), |f| f.to_string());
    let mut lines = vec![
        Line::from(vec![
            Span::styled(format!("{side} "), style),
            Span::raw(format!(
                "{} {} on {} · {}",
                r.dtype,
                format::shape(&r.shape),
                r.device,
                r.mode_name()
            )),
        ]),
        Line::from(format!(
            "  stride {} offset {} {}",
            format::stride(&r.stride),
            r.storage_offset,
            if r.is_contiguous {
                "contiguous"
            } else {
                "non-contiguous"
            }
        )),
        Line::from(format!(
            "  storage {id} at {ptr} · {} B · format {fmt}",
            r.storage_nbytes.unwrap_or(0)
        )),
    ];
    if let Some(file) = r.tensor_file.as_deref() {
        let rows = match (r.rows_kept, r.rows_total) {
            (Some(k), Some(t)) if k < t => format!(" ({k} of {t} rows)"),
            _ => String::new(),
        };
        lines.push(Line::from(format!("  tensor {file}{rows}")));
    }
    lines
}

pub fn draw(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let block = Block::bordered().title(Span::styled(" detail ", theme.title()));
    let (Some(loaded), Some(choice), Some(row)) = (&app.loaded, app.choice(), app.row()) else {
        frame.render_widget(block, area);
        return;
    };
    let a = row
        .a
        .map(|i| &loaded.session.a.windows[choice.a].records[i]);
    let b = match (row.b, choice.b, &loaded.session.b) {
        (Some(j), Some(bi), Some(dump)) => Some(&dump.windows[bi].records[j]),
        _ => None,
    };
    let pair = match (row.pair, choice.pair, loaded.diff()) {
        (Some(p), Some(w), Some(report)) => Some(&report.windows[w].pairs[p]),
        _ => None,
    };
    let mut lines = vec![Line::from(Span::styled(row.key.clone(), theme.title()))];
    if let Some(p) = pair {
        let (text, style) = match &p.comparison.verdict {
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
        };
        lines.push(Line::from(Span::styled(text, style)));
    } else if loaded.diff().is_some() {
        let side = if a.is_some() { "A" } else { "B" };
        lines.push(Line::from(Span::styled(
            format!("captured in {side} only: missing evidence"),
            theme.missing(),
        )));
    }
    let counts = |s: Option<&Stats>| {
        s.map_or("–".to_string(), |s| {
            if s.counts_known {
                format!("{}/{}", s.nan_count, s.inf_count)
            } else {
                // Inferred from max/min by a format that counts nothing: yes/no, not a count.
                let seen = |n: u64| if n > 0 { "yes" } else { "no" };
                format!("{}/{}?", seen(s.nan_count), seen(s.inf_count))
            }
        })
    };
    let sa = a.and_then(|r| r.stats.as_ref());
    let sb = b.and_then(|r| r.stats.as_ref());
    // Columns that fit: stat, A, then B and rel in diff mode, then |A-B| when wide enough.
    let width = area.width.saturating_sub(2) as usize;
    let diffing = loaded.diff().is_some();
    let with_abs = diffing && width >= 52;
    let (wn, wv, wr) = if width < 41 { (7, 9, 7) } else { (9, 10, 9) };
    let row_text = |name: &str, va: String, vb: String, rel: String, abs: String| {
        let mut t = format!("{:<wn$} {:>wv$}", format::fit(name, wn), va);
        if diffing {
            t.push_str(&format!(" {vb:>wv$} {rel:>wr$}"));
        }
        if with_abs {
            t.push_str(&format!(" {abs:>9}"));
        }
        t
    };
    lines.push(Line::from(Span::styled(
        row_text("stat", "A".into(), "B".into(), "rel".into(), "|A-B|".into()),
        theme.dim(),
    )));
    lines.push(Line::from(row_text(
        "nan/inf",
        counts(sa),
        counts(sb),
        String::new(),
        String::new(),
    )));
    for name in STATS {
        let d = pair.and_then(|p| p.comparison.stats.iter().find(|d| d.name == name));
        let exceeds = d.is_some_and(|d| d.exceeds);
        let text = row_text(
            name,
            format::num(stat(sa, name)),
            format::num(stat(sb, name)),
            d.and_then(|d| d.rel_diff)
                .map_or("–".to_string(), |r| format!("{r:.1e}")),
            format::num(d.and_then(|d| d.abs_diff)),
        );
        let style = if exceeds { theme.bad() } else { Style::new() };
        lines.push(Line::from(Span::styled(
            format!("{text}{}", if exceeds { "<" } else { "" }),
            style,
        )));
    }
    // What the source format adds (msprobe's module and stack, a windowed dump's roles).
    for (side, window, index) in [
        ("A", Some(&loaded.session.a.windows[choice.a]), row.a),
        (
            "B",
            choice
                .b
                .and_then(|bi| loaded.session.b.as_ref().map(|d| &d.windows[bi])),
            row.b,
        ),
    ] {
        let (Some(window), Some(index)) = (window, index) else {
            continue;
        };
        let Some(context) = &window.context else {
            continue;
        };
        let notes = context.of(index);
        if notes.is_empty()
            || (side == "B"
                && row.a.is_some()
                && loaded.session.a.windows[choice.a]
                    .context
                    .as_ref()
                    .is_some_and(|c| c.of(row.a.unwrap_or(0)) == notes))
        {
            continue;
        }
        lines.push(Line::from(Span::styled(
            format!("{side} context"),
            theme.dim(),
        )));
        for (label, value) in notes {
            lines.push(Line::from(format!("{label:<8} {value}")));
        }
    }
    if let Some(r) = a {
        lines.extend(layout_lines("A", r, theme.side_a()));
    }
    if let Some(r) = b {
        lines.extend(layout_lines("B", r, theme.side_b()));
    }
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block),
        area,
    );
}
