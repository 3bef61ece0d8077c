//! What every rule reads: the captures, their analysis, and the records the findings start
//! from (the first divergence, each window's first non-finite), found once.

use crate::model::analysis::Analysis;
use crate::model::analysis::diff::{PairDiff, WindowDiff};
use crate::model::analysis::scan::WindowScan;
use crate::model::dump::{Dump, Record, Window};

use super::types::{Cite, Claim, Role};

/// The captures and their analysis.
pub(super) struct Context<'a> {
    pub a: &'a Dump,
    pub b: Option<&'a Dump>,
    pub analysis: &'a Analysis,
}

/// The first divergence of the diff: the window pair of the rank that diverges first.
pub(super) struct Divergence<'a> {
    pub diff: &'a WindowDiff,
    pub pair: &'a PairDiff,
    pub wa: &'a Window,
    pub wb: &'a Window,
}

/// A record a finding starts from.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    /// `'a'` or `'b'`: the side whose record is meant (for a divergence: B, the run under
    /// suspicion; its partner is A's record of the same key).
    pub side: char,
    /// The window holding it.
    pub window: &'a Window,
    /// The other side's window of the same rank and request, when paired.
    pub partner: Option<&'a Window>,
    /// `stage#occurrence`.
    pub key: String,
    /// Why it is a target: `first divergence` or `first non-finite`.
    pub why: &'static str,
}

impl<'a> Context<'a> {
    pub fn new(a: &'a Dump, b: Option<&'a Dump>, analysis: &'a Analysis) -> Context<'a> {
        Context { a, b, analysis }
    }

    fn dump(&self, side: char) -> Option<&'a Dump> {
        if side == 'a' { Some(self.a) } else { self.b }
    }

    /// The scan of `window` of `side`, by position in its capture.
    pub fn scan_of(&self, side: char, window: &Window) -> Option<&'a WindowScan> {
        let dump = self.dump(side)?;
        let scans = if side == 'a' {
            &self.analysis.scans_a
        } else {
            &self.analysis.scans_b
        };
        let index = dump.windows.iter().position(|w| std::ptr::eq(w, window))?;
        scans.get(index)
    }

    /// The first divergence of the diff (the rank that diverges first), with both windows.
    pub fn first_divergence(&self) -> Option<Divergence<'a>> {
        let b = self.b?;
        let report = self.analysis.diff.as_ref()?;
        let rank = report.first_rank?;
        let diff = report
            .windows
            .iter()
            .find(|w| w.rank == rank && w.first().is_some())?;
        let pair = diff.first()?;
        let wa = holding(self.a, self.a.window(diff.a.id?)?, &pair.key);
        let wb = holding(b, b.window(diff.b.id?)?, &pair.key);
        Some(Divergence { diff, pair, wa, wb })
    }

    /// The window pair of `window` (of `side`) in the diff, and the partner window.
    pub fn partner_of(&self, side: char, window: &Window) -> Option<(&'a WindowDiff, &'a Window)> {
        let report = self.analysis.diff.as_ref()?;
        let (own, other) = if side == 'a' {
            (self.a, self.b?)
        } else {
            (self.b?, self.a)
        };
        let index = own.windows.iter().position(|w| std::ptr::eq(w, window))?;
        report.windows.iter().find_map(|w| {
            let (mine, theirs) = if side == 'a' {
                (w.a.id, w.b.id)
            } else {
                (w.b.id, w.a.id)
            };
            (mine.map(|m| m.0) == Some(index))
                .then(|| Some((w, other.window(theirs?)?)))
                .flatten()
        })
    }

    /// The records findings start from: the first divergence, then each window's first
    /// non-finite (B's before A's), each key once per side.
    pub fn targets(&self) -> Vec<Target<'a>> {
        let mut out: Vec<Target<'a>> = Vec::new();
        if let Some(d) = self.first_divergence() {
            out.push(Target {
                side: 'b',
                window: d.wb,
                partner: Some(d.wa),
                key: d.pair.key.clone(),
                why: "first divergence",
            });
        }
        for side in ['b', 'a'] {
            let Some(dump) = self.dump(side) else {
                continue;
            };
            for window in &dump.windows {
                let Some(nf) = self
                    .scan_of(side, window)
                    .and_then(|s| s.first_nonfinite.as_ref())
                else {
                    continue;
                };
                if out
                    .iter()
                    .any(|t| std::ptr::eq(t.window, window) && t.key == nf.key)
                {
                    continue;
                }
                out.push(Target {
                    side,
                    window,
                    partner: self.partner_of(side, window).map(|(_, w)| w),
                    key: nf.key.clone(),
                    why: "first non-finite",
                });
            }
        }
        out
    }

    /// Every window's first non-finite record, A's windows then B's: `(side, window, record)`.
    pub fn first_nonfinite_records(&self) -> Vec<(char, &'a Window, &'a Record)> {
        let mut out = Vec::new();
        for (side, dump) in std::iter::once(('a', self.a)).chain(self.b.map(|b| ('b', b))) {
            for window in &dump.windows {
                let first = self
                    .scan_of(side, window)
                    .and_then(|s| s.first_nonfinite.as_ref())
                    .and_then(|nf| record(window, &nf.key));
                if let Some(first) = first {
                    out.push((side, window, first));
                }
            }
        }
        out
    }

    /// Whether `window` (of `side`) is a rank that went non-finite only after another rank of
    /// its request did (the across-ranks answer): its NaN came in through a collective or a
    /// pipeline stage.
    pub fn received_nonfinite(&self, side: char, window: &Window) -> bool {
        let across = if side == 'a' {
            &self.analysis.ranks_a
        } else {
            &self.analysis.ranks_b
        };
        across.iter().any(|x| {
            x.label == window.label
                && x.match_index == window.match_index
                && x.occurrence == window.occurrence
                && !x.origin_ranks.contains(&window.rank)
        })
    }

    /// `B's` or, for a capture of several ranks, `B's rank 1's` (how a finding names whose
    /// record it is).
    pub fn whose(&self, side: char, window: &Window) -> String {
        if window.world_size > 1 {
            format!("{}'s rank {}", side_name(side), window.rank)
        } else {
            format!("{}'s", side_name(side))
        }
    }

    /// The window a citation names (by side and source).
    pub fn window_of(&self, cite: &Cite) -> Option<&'a Window> {
        self.dump(cite.side)?
            .windows
            .iter()
            .find(|w| w.source.display().to_string() == cite.window)
    }

    /// Why no rule applied, for "No diagnosis: …".
    pub fn why_nothing(&self) -> String {
        let rows = self
            .analysis
            .diff
            .as_ref()
            .and_then(|r| r.tokens.as_ref())
            .filter(|t| t.rows_compared > 0 && t.first.is_none())
            .map(|t| {
                format!(
                    " ({} aligned token rows compared, all agree)",
                    t.rows_compared
                )
            })
            .unwrap_or_default();
        match (self.b, self.analysis.diff.as_ref()) {
            (Some(_), Some(report)) if report.windows.is_empty() && !rows.is_empty() => {
                format!(
                    "no window of A pairs with a window of B as a whole, and their token rows \
                     agree{rows}"
                )
            }
            (Some(_), Some(report)) if report.windows.is_empty() => {
                "no window of A pairs with a window of B (different ranks or requests), so \
                 nothing was compared"
                    .to_string()
            }
            (Some(_), Some(report)) => {
                let one_side: usize = report
                    .windows
                    .iter()
                    .map(|w| w.only_a.len() + w.only_b.len())
                    .sum();
                let missing = report.windows.iter().any(|w| w.missing_data.is_some());
                let mut why = format!(
                    "A and B agree on every compared record{rows} and neither holds a NaN or \
                     an infinity"
                );
                if missing || one_side > 0 {
                    why.push_str(&format!(
                        " ({one_side} {} captured on one side only{}: missing evidence, \
                         not agreement)",
                        if one_side == 1 {
                            "record was"
                        } else {
                            "records were"
                        },
                        if missing { ", MISSING DATA" } else { "" }
                    ));
                }
                why
            }
            _ => "the capture holds no NaN or infinity, no stride conflict and no finding from \
                  one run; diagnosing a divergence needs a second capture to compare with"
                .to_string(),
        }
    }
}

/// `window`, or where a diff merged a parallel group (a pipeline's stages on other ranks),
/// the window of the same request in `dump` that holds record `key`.
fn holding<'d>(dump: &'d Dump, window: &'d Window, key: &str) -> &'d Window {
    if record(window, key).is_some() {
        return window;
    }
    dump.windows
        .iter()
        .find(|w| {
            w.label == window.label
                && w.match_index == window.match_index
                && w.occurrence == window.occurrence
                && record(w, key).is_some()
        })
        .unwrap_or(window)
}

/// The record of `window` with key `key`.
pub(super) fn record<'w>(window: &'w Window, key: &str) -> Option<&'w Record> {
    let (stage, occurrence) = key.rsplit_once('#')?;
    let occurrence: u32 = occurrence.parse().ok()?;
    window
        .records
        .iter()
        .find(|r| r.occurrence == occurrence && r.stage.as_str() == stage)
}

/// A citation of `record` in `window`.
pub(super) fn cite(side: char, window: &Window, record: &Record, role: Role, claim: Claim) -> Cite {
    Cite {
        side,
        rank: window.rank,
        window: window.source.display().to_string(),
        key: record.key(),
        seq: record.seq,
        role,
        claim,
        layout: None,
        call: None,
    }
}

/// `[12, 2, 64] stride [64, 2048, 1] offset 0`.
pub(super) fn layout_words(record: &Record) -> String {
    format!(
        "{:?} stride {:?} offset {}",
        record.shape.to_vec(),
        record.stride.to_vec(),
        record.storage_offset
    )
}

/// Whether `record` holds NaN or infinity.
pub(super) fn nonfinite(record: &Record) -> bool {
    record.stats.as_ref().is_some_and(|s| s.has_nonfinite())
}

/// `a`'s label for people: `A` or `B`.
pub(super) fn side_name(side: char) -> char {
    side.to_ascii_uppercase()
}

/// Integer (or bool) dtypes: index stages.
pub(super) fn is_integer(dtype: &str) -> bool {
    matches!(
        crate::model::analysis::compare::dtype_kind(dtype),
        "integer" | "bool"
    )
}
