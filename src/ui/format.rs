//! Compact text for numbers, shapes and dtypes in narrow columns, and the rules that make
//! text fit a width: cut visibly ([`fit`], [`fit_start`]), wrap under a hanging indent
//! ([`wrap`]), or give way by priority ([`bar`]). Nothing drawn is ever cut silently.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

pub use crate::model::present::number::compact as num;

/// Columns `text` takes (one per character: everything drawn here is narrow).
pub fn width(text: &str) -> usize {
    text.chars().count()
}

/// `[12, 2, 64]` → `12×2×64`; scalars → `()`.
pub fn shape(dims: &[u64]) -> String {
    if dims.is_empty() {
        return "()".to_string();
    }
    dims.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join("×")
}

/// Stride list as `[128,64,1]`.
pub fn stride(dims: &[i64]) -> String {
    format!(
        "[{}]",
        dims.iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// `float32` → `f32`, `bfloat16` → `bf16`, `int64` → `i64`, `bool` → `bool`; a Python type
/// (`int`, `float`, `None`, `torch.Size` → `Size`) as Python names it.
pub fn dtype(name: &str) -> String {
    // A Python value's type (an msprobe scalar's `int`, `float`, `bool`, `None`, `str`,
    // `torch.Size`) has no width to shorten: it is shown as Python names it.
    if !name.chars().any(|c| c.is_ascii_digit()) {
        return name
            .strip_prefix("torch.")
            .unwrap_or(name)
            .chars()
            .take(6)
            .collect();
    }
    let short = name
        .replace("bfloat", "bf")
        .replace("float", "f")
        .replace("uint", "u")
        .replace("int", "i")
        .replace("complex", "c");
    short.chars().take(6).collect()
}

/// Cuts `text` to `width` characters, marking the cut with `…`.
pub fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(width - 1).collect();
    out.push('…');
    out
}

/// Cuts `text` to `width` characters in the middle, marking the cut with `…`: for stage names,
/// whose start says which model and whose end says which layer, input or output
/// (`Module.module…encoder.layers.3.self_attention.forward.0`). The head keeps about a third
/// (a sixth below 25 columns; cut back to the end of a dotted segment where one ends there), the tail the rest, so two
/// names that differ only at the end still read differently.
pub fn fit_middle(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width {
        return text.to_string();
    }
    if width < 4 {
        return fit(text, width);
    }
    let room = width - 1;
    // Narrow: nearly all to the tail, where two names of one module differ.
    let mut head = if room >= 24 {
        room / 3
    } else {
        (room / 6).max(1)
    };
    // End the head at a segment boundary when that keeps at least half of it.
    let head_text: String = text.chars().take(head).collect();
    if let Some(dot) = head_text.rfind(['.', '/'])
        && dot >= head / 2
        && dot > 0
    {
        head = head_text[..dot].chars().count();
    }
    let tail = room - head;
    let mut out: String = text.chars().take(head).collect();
    out.push('…');
    out.extend(text.chars().skip(n - tail));
    out
}

/// Cuts `text` to `width` characters keeping its end, marking the cut with a leading `…`
/// (for paths, whose file name says the most).
pub fn fit_start(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = String::from("…");
    out.extend(text.chars().skip(n - (width - 1)));
    out
}

/// Word-wraps `text` into lines of at most `width` characters; every line after the first
/// starts with `indent` spaces (a hanging indent, so a continuation never starts at column
/// 0). A word longer than a line is cut into pieces.
pub fn wrap(text: &str, width: usize, indent: usize) -> Vec<String> {
    let width = width.max(1);
    let indent = if indent * 2 > width { 0 } else { indent };
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut len = 0;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let lead = if lines.is_empty() { 0 } else { indent };
            let room = width - lead;
            let gap = usize::from(len > 0);
            if len + gap + word.len() <= room {
                if gap == 1 {
                    line.push(' ');
                }
                line.extend(word.iter());
                len += gap + word.len();
                break;
            }
            if len > 0 {
                lines.push(std::mem::take(&mut line));
                len = 0;
                line.push_str(&" ".repeat(indent));
                continue;
            }
            // A word wider than a whole line: cut it.
            let (head, tail) = word.split_at(room.min(word.len()));
            line.extend(head.iter());
            lines.push(std::mem::take(&mut line));
            line.push_str(&" ".repeat(indent));
            word = tail.to_vec();
            if word.is_empty() {
                break;
            }
        }
    }
    if len > 0 || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// One piece of a one-line bar (the header's lines, the status bar) and how readily it gives
/// way when the line is too narrow for all of them.
#[derive(Debug, Clone)]
pub struct Piece {
    /// The text.
    pub text: String,
    /// Its style.
    pub style: Style,
    /// 0: kept to the last; higher ranks give way first (the last of equal ranks first).
    pub rank: u8,
    /// Shortest it may be cut to (with `…`) before it is dropped; 0: never cut, only
    /// dropped whole.
    pub shrink_to: usize,
    /// The rank at which it is cut while it can still be (at or above `rank`): a long label
    /// is cut early and dropped late.
    pub cut_rank: u8,
}

impl Piece {
    /// A piece that is dropped whole when the line is short.
    pub fn new(text: impl Into<String>, style: Style, rank: u8) -> Piece {
        Piece {
            text: text.into(),
            style,
            rank,
            shrink_to: 0,
            cut_rank: rank,
        }
    }

    /// A piece that is first cut (down to `shrink_to` characters), then dropped, both at
    /// `rank`.
    pub fn shrinking(text: impl Into<String>, style: Style, rank: u8, shrink_to: usize) -> Piece {
        Piece {
            shrink_to,
            ..Piece::new(text, style, rank)
        }
    }

    /// This piece cut at `cut_rank` (before pieces of lower ranks give way), dropped at its
    /// own rank.
    pub fn cut_at(self, cut_rank: u8) -> Piece {
        Piece {
            cut_rank: cut_rank.max(self.rank),
            ..self
        }
    }

    fn can_shrink(&self) -> bool {
        self.shrink_to > 0 && width(&self.text) > self.shrink_to
    }

    /// The rank at which it gives way next: cut, or dropped.
    fn giving_rank(&self) -> u8 {
        if self.can_shrink() {
            self.cut_rank
        } else {
            self.rank
        }
    }
}

/// `pieces` joined by `separator` in `width` characters: while the line is too long, the
/// piece of the highest rank is cut to its `shrink_to`, or dropped; dropped pieces leave one
/// `…` where they were, so a reader sees that something gave way. Rank-0 pieces stay; if
/// they alone are too long, the line is cut at the end with `…`.
pub fn bar(
    pieces: Vec<Piece>,
    separator: &str,
    separator_style: Style,
    width: usize,
) -> Line<'static> {
    // `None`: dropped (shown as one `…` with its dropped neighbours).
    let originals: Vec<String> = pieces.iter().map(|p| p.text.clone()).collect();
    let mut kept: Vec<Option<Piece>> = pieces.into_iter().map(Some).collect();
    let total = |kept: &[Option<Piece>]| -> usize {
        let mut n = 0;
        let mut items: usize = 0;
        let mut previous_dropped = false;
        for piece in kept {
            match piece {
                Some(p) => {
                    n += self::width(&p.text);
                    items += 1;
                    previous_dropped = false;
                }
                None if !previous_dropped => {
                    n += 1;
                    items += 1;
                    previous_dropped = true;
                }
                None => {}
            }
        }
        n + items.saturating_sub(1) * self::width(separator)
    };
    loop {
        let excess = total(&kept).saturating_sub(width);
        if excess == 0 {
            break;
        }
        let Some((index, _)) = kept
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.as_ref().map(|p| (i, p)))
            .filter(|(_, p)| p.giving_rank() > 0)
            .max_by_key(|(i, p)| (p.giving_rank(), *i))
        else {
            break;
        };
        let piece = kept[index].as_mut().expect("kept");
        let len = self::width(&piece.text);
        if piece.can_shrink() {
            let to = len.saturating_sub(excess).max(piece.shrink_to);
            piece.text = fit(&piece.text, to);
        } else {
            kept[index] = None;
        }
    }
    // A piece cut before a later one was dropped gets back what that left free.
    let mut spare = width.saturating_sub(total(&kept));
    for (piece, original) in kept.iter_mut().zip(&originals) {
        let Some(piece) = piece else { continue };
        let (now, whole) = (self::width(&piece.text), self::width(original));
        if spare > 0 && now < whole {
            let to = whole.min(now + spare);
            piece.text = fit(original, to);
            spare -= to - now;
        }
    }
    let mut spans = Vec::new();
    let mut previous_dropped = false;
    for piece in &kept {
        if piece.is_none() && previous_dropped {
            continue;
        }
        if !spans.is_empty() {
            spans.push(Span::styled(separator.to_string(), separator_style));
        }
        match piece {
            Some(p) => {
                spans.push(Span::styled(p.text.clone(), p.style));
                previous_dropped = false;
            }
            None => {
                spans.push(Span::styled("…", separator_style));
                previous_dropped = true;
            }
        }
    }
    let line = Line::from(spans);
    if line.width() <= width {
        return line;
    }
    // Only rank-0 pieces are left and they are too long: cut the end, visibly.
    let mut left = width;
    let mut cut = Vec::new();
    for span in line.spans {
        let n = self::width(&span.content);
        if n < left {
            left -= n;
            cut.push(span);
        } else {
            cut.push(Span::styled(
                fit(&format!("{}…", span.content), left),
                span.style,
            ));
            break;
        }
    }
    Line::from(cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_names_are_cut_in_the_middle_keeping_their_tail() {
        let name = "Module.module.module.language_model.encoder.layers.3.self_attention.forward.0";
        assert_eq!(
            fit_middle(name, 55),
            "Module.module…encoder.layers.3.self_attention.forward.0"
        );
        assert_eq!(fit_middle(name, 55).chars().count(), 55);
        assert_eq!(fit_middle(name, name.len()), name);
        assert_eq!(fit_middle("short", 10), "short");
        // Two names that differ only at the end stay apart at every width.
        let input = "Module.module.module.language_model.encoder.layers.11.mlp.forward.0.input.0";
        let output = "Module.module.module.language_model.encoder.layers.11.mlp.forward.0.output.0";
        for width in 8..input.len() {
            assert_ne!(
                fit_middle(input, width),
                fit_middle(output, width),
                "width {width}"
            );
            assert!(fit_middle(output, width).chars().count() <= width);
            assert!(fit_middle(output, width).ends_with('0'));
        }
        assert_eq!(fit_middle(output, 24), "Mod…p.forward.0.output.0");
        assert_eq!(fit_middle(output, 3), "Mo…");
    }

    #[test]
    fn numbers_fit_ten_columns() {
        assert_eq!(num(Some(80958.8)), "80959");
        assert_eq!(num(Some(-71.61245)), "-71.612");
        assert_eq!(num(Some(0.0171)), "0.0171");
        assert_eq!(num(Some(189530.0)), "1.895e5");
        assert_eq!(num(Some(1.5)), "1.5");
        assert_eq!(num(Some(-0.0029)), "-2.900e-3");
        assert_eq!(num(None), "–");
        assert_eq!(num(Some(f64::NEG_INFINITY)), "-inf");
        assert_eq!(shape(&[12, 2, 64]), "12×2×64");
        assert_eq!(dtype("bfloat16"), "bf16");
        // Issue 31, item 13: msprobe scalars keep their Python type's name.
        assert_eq!(
            [
                "int",
                "float",
                "bool",
                "None",
                "str",
                "torch.Size",
                "uint8",
                "float8_e4m3fn"
            ]
            .map(dtype),
            [
                "int", "float", "bool", "None", "str", "Size", "u8", "f8_e4m"
            ]
        );
        assert_eq!(fit("layers.10.mlp_down#1", 10), "layers.10…");
        assert_eq!(
            fit_start("tensors/layers.3.mlp_up#1.safetensors", 16),
            "…p#1.safetensors"
        );
    }

    #[test]
    fn wrapping_hangs_under_the_first_line_and_never_starts_at_column_0() {
        let lines = wrap(
            "regex search on stage names; / then Enter repeats it",
            24,
            4,
        );
        assert_eq!(
            lines,
            [
                "regex search on stage",
                "    names; / then Enter",
                "    repeats it"
            ]
        );
        assert!(lines.iter().all(|l| width(l) <= 24));
        assert_eq!(wrap("abcdefghij", 4, 0), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("", 10, 2), [""]);
    }

    #[test]
    fn a_bar_gives_way_by_rank_and_shows_where() {
        let s = Style::new();
        let pieces = || {
            vec![
                Piece::new("rank 0", s, 0),
                Piece::shrinking("window \"req-llama_fp16_overflow\"", s, 3, 12),
                Piece::new("(match 1, call 1)", s, 4),
                Piece::new("INPUTS DIFFER at id 3", s, 1),
            ]
        };
        let text = |line: Line| {
            line.spans
                .iter()
                .map(|s| s.content.as_ref())
                .collect::<String>()
        };
        let all = text(bar(pieces(), " · ", s, 200));
        assert_eq!(
            all,
            "rank 0 · window \"req-llama_fp16_overflow\" · (match 1, call 1) · INPUTS DIFFER at id 3"
        );
        // Narrower: the call goes first (one `…` marks it), then the label is cut.
        let line = text(bar(pieces(), " · ", s, 70));
        assert_eq!(
            line,
            "rank 0 · window \"req-llama_fp16_overflow\" · … · INPUTS DIFFER at id 3"
        );
        let line = text(bar(pieces(), " · ", s, 50));
        assert_eq!(line, "rank 0 · window \"req-… · … · INPUTS DIFFER at id 3");
        assert!(width(&line) <= 50);
        // Rank 0 and 1 stay longest; only rank 0 is cut at the very end.
        let line = text(bar(pieces(), " · ", s, 20));
        assert_eq!(line, "rank 0 · …");
        let line = text(bar(
            vec![Piece::new("a very long rank-0 text", s, 0)],
            " · ",
            s,
            10,
        ));
        assert_eq!(line, "a very lo…");
    }
}
