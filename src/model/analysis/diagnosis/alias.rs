//! Findings over shared bytes: writer → address → reader (a layout conflict, or a layout that
//! differs between A and B, on the target's alias group), and the bad bytes' writer (the last
//! record that captured a non-finite record's bytes finite).

use crate::model::analysis::layout::Expanded;
use crate::model::analysis::scan::{AliasGroup, view_of};
use crate::model::dump::{Record, Window};

use super::context::{Context, Target, cite, layout_words, nonfinite, record, side_name};
use super::types::{Address, Claim, Finding, Role, Rule};

/// The writer → address → reader finding of `target`, when it reads an alias group's bytes
/// that an earlier member wrote through a conflicting layout (on either side), or through a
/// layout that differs between A and B. Silent when the target has no earlier group member
/// or the records carry no addresses.
pub(super) fn writer_address_reader(cx: &Context, target: &Target) -> Option<Finding> {
    let sides = std::iter::once((target.side, target.window, target.partner)).chain(
        target
            .partner
            .map(|p| (other(target.side), p, Some(target.window))),
    );
    // A conflict on either side first; then a layout that differs between the sides.
    let mut differing = None;
    for (side, window, partner) in sides {
        let Some(scan) = cx.scan_of(side, window) else {
            continue;
        };
        let Some(group) = scan
            .alias_groups
            .iter()
            .find(|g| g.members.iter().any(|m| m.key == target.key))
        else {
            continue;
        };
        let reader = record(window, &target.key)?;
        if let Some(writer) = conflicting_writer(group, window, reader) {
            return finding(cx, target, side, window, partner, writer, reader, true);
        }
        if differing.is_none()
            && let Some(partner) = partner
            && let Some(writer) = writer_with_other_layout(group, window, partner, reader)
        {
            differing = Some((side, window, writer, reader, partner));
        }
    }
    let (side, window, writer, reader, partner) = differing?;
    finding(
        cx,
        target,
        side,
        window,
        Some(partner),
        writer,
        reader,
        false,
    )
}

fn other(side: char) -> char {
    if side == 'a' { 'b' } else { 'a' }
}

/// The last member of `group` captured before `reader` whose layout conflicts with it.
fn conflicting_writer<'w>(
    group: &AliasGroup,
    window: &'w Window,
    reader: &Record,
) -> Option<&'w Record> {
    let key = reader.key();
    group
        .conflicts
        .iter()
        .filter_map(|(x, y)| {
            if *y == key {
                Some(x)
            } else if *x == key {
                Some(y)
            } else {
                None
            }
        })
        .filter_map(|k| record(window, k))
        .filter(|w| w.seq < reader.seq)
        .max_by_key(|w| w.seq)
}

/// The last member of `group` captured before `reader` whose layout, or the reader's, differs
/// from the same record's in `partner` (the other side).
fn writer_with_other_layout<'w>(
    group: &AliasGroup,
    window: &'w Window,
    partner: &Window,
    reader: &Record,
) -> Option<&'w Record> {
    let differs = |r: &Record| {
        record(partner, &r.key())
            .is_some_and(|p| p.stride != r.stride || p.storage_offset != r.storage_offset)
    };
    let reader_differs = differs(reader);
    group
        .members
        .iter()
        .filter(|m| m.seq < reader.seq)
        .filter_map(|m| record(window, &m.key))
        .filter(|w| reader_differs || differs(w))
        .max_by_key(|w| w.seq)
}

#[allow(clippy::too_many_arguments)]
fn finding(
    cx: &Context,
    target: &Target,
    side: char,
    window: &Window,
    partner: Option<&Window>,
    writer: &Record,
    reader: &Record,
    conflict: bool,
) -> Option<Finding> {
    let address = shared_bytes(writer, reader)?;
    let presumed = may_have_earlier_writer(window);
    let reader_claim = claim_of(cx, target, side, window, reader);
    let mut writer_cite = cite(side, window, writer, Role::Writer, Claim::Captured);
    writer_cite.layout = Some(layout_words(writer));
    let mut reader_cite = cite(side, window, reader, Role::Reader, reader_claim);
    reader_cite.layout = Some(layout_words(reader));
    let presumed_text = if presumed {
        " (presumed: this is a later call of the label, so an uncaptured write in an earlier \
         window may be the real writer)"
    } else {
        ""
    };
    let mut text = format!(
        "{} `{}` ({}) reads bytes that `{}`{presumed_text} wrote through another layout: \
         written as {}, read as {}, at {}.",
        cx.whose(side, window),
        reader.key(),
        target.why,
        writer.key(),
        layout_words(writer),
        layout_words(reader),
        address.describe(),
    );
    if conflict {
        text.push_str(" The two layouts disagree on the shared bytes (a stride conflict).");
    }
    if let Some(partner) = partner {
        let (pw, pr) = (
            record(partner, &writer.key()),
            record(partner, &reader.key()),
        );
        if let (Some(pw), Some(pr)) = (pw, pr) {
            text.push_str(&format!(
                " In {} the writer goes through {} and the reader through {}.",
                side_name(other(side)),
                layout_words(pw),
                layout_words(pr)
            ));
        }
    }
    Some(Finding {
        rule: Rule::WriterAddressReader,
        text,
        evidence: vec![writer_cite, reader_cite],
        address: Some(address),
        presumed,
        inputs: Vec::new(),
    })
}

/// What the finding claims of the reader: its pair diverges (a divergence target, or a record
/// paired and diverging), or it holds NaN/inf.
fn claim_of(cx: &Context, target: &Target, side: char, window: &Window, reader: &Record) -> Claim {
    if target.why == "first non-finite" && nonfinite(reader) {
        return Claim::NonFinite;
    }
    let diverges = cx.partner_of(side, window).is_some_and(|(diff, _)| {
        diff.pairs
            .iter()
            .any(|p| p.key == target.key && p.comparison.verdict.diverges())
    });
    if diverges {
        Claim::Diverges
    } else if nonfinite(reader) {
        Claim::NonFinite
    } else {
        Claim::Captured
    }
}

/// A later call of the label (decode after prefill): writes of earlier calls were not in
/// this window.
fn may_have_earlier_writer(window: &Window) -> bool {
    window.occurrence > 1
        || window
            .metadata
            .get("phase")
            .and_then(|p| p.as_str())
            .is_some_and(|p| p == "decode")
}

/// The bytes both records touch, when they share a storage and their byte ranges meet.
fn shared_bytes(x: &Record, y: &Record) -> Option<Address> {
    if x.device != y.device || x.storage_id != y.storage_id {
        return None;
    }
    if x.storage_id.is_none() && x.storage_ptr != y.storage_ptr {
        return None;
    }
    let (xl, xh) = view_of(x)?.byte_range()?;
    let (yl, yh) = view_of(y)?.byte_range()?;
    let (lo, hi) = (xl.max(yl), xh.min(yh));
    (lo < hi).then(|| Address {
        device: x.device.to_string(),
        storage_id: x.storage_id,
        storage_ptr: x.storage_ptr.unwrap_or(0),
        bytes: (lo, hi),
    })
}

/// For each window whose first non-finite record reads bytes an earlier record captured
/// finite (same storage, elements overlapping): that last finite writer. Silent where the
/// records carry no addresses or no earlier record overlaps.
pub(super) fn bad_bytes_writer(cx: &Context) -> Vec<Finding> {
    cx.first_nonfinite_records()
        .into_iter()
        // A record that is a collective's output got its bytes from the collective, and a rank
        // that received its NaN that way is the across-ranks finding's: no writer to find here.
        .filter(|(side, window, bad)| {
            bad.collective.is_none() && !cx.received_nonfinite(*side, window)
        })
        .filter_map(|(side, window, bad)| last_finite_writer(cx, side, window, bad))
        .collect()
}

fn last_finite_writer(cx: &Context, side: char, window: &Window, bad: &Record) -> Option<Finding> {
    let bad_view = Expanded::new(view_of(bad)?);
    let writer = window
        .records
        .iter()
        .filter(|r| r.seq < bad.seq && !nonfinite(r) && r.stats.is_some())
        .filter(|r| shared_bytes(r, bad).is_some())
        .filter(|r| view_of(r).is_some_and(|v| Expanded::new(v).overlaps(&bad_view)))
        .max_by_key(|r| r.seq)?;
    let address = shared_bytes(writer, bad)?;
    let between: Vec<String> = window
        .records
        .iter()
        .filter(|r| r.seq > writer.seq && r.seq < bad.seq)
        .map(Record::key)
        .collect();
    let between_text = match between.len() {
        0 => " No record was captured in between.".to_string(),
        n => format!(" Captured in between ({n}): {}.", shorten(&between, 6)),
    };
    let mut w = cite(side, window, writer, Role::LastFiniteWriter, Claim::Finite);
    w.layout = Some(layout_words(writer));
    let mut r = cite(side, window, bad, Role::FirstNonFinite, Claim::NonFinite);
    r.layout = Some(layout_words(bad));
    Some(Finding {
        rule: Rule::BadBytesWriter,
        text: format!(
            "{} first non-finite record `{}` (seq {}) reads {}, which `{}` (seq {}) captured \
             finite: what wrote the NaN or infinity into them ran between seq {} and seq {}, \
             after the last captured writer.{between_text}",
            cx.whose(side, window),
            bad.key(),
            bad.seq,
            address.describe(),
            writer.key(),
            writer.seq,
            writer.seq,
            bad.seq,
        ),
        evidence: vec![w, r],
        address: Some(address),
        presumed: false,
        inputs: Vec::new(),
    })
}

/// `a, b, c and 4 more`.
pub(super) fn shorten(keys: &[String], limit: usize) -> String {
    let shown: Vec<String> = keys.iter().take(limit).map(|k| format!("`{k}`")).collect();
    if keys.len() > limit {
        format!("{} and {} more", shown.join(", "), keys.len() - limit)
    } else {
        shown.join(", ")
    }
}

/// Stride conflicts no writer → reader finding covers: with one capture, a finding for each
/// window's first conflicting pair (there is no divergence to tie it to); with two, a line for
/// [`super::Diagnosis::unknown`] per window.
pub(super) fn untied_conflicts(
    cx: &Context,
    findings: &[Finding],
    unknown: &mut Vec<String>,
) -> Vec<Finding> {
    let cited = |key: &str| {
        findings
            .iter()
            .any(|f| f.rule == Rule::WriterAddressReader && f.evidence.iter().any(|c| c.key == key))
    };
    let mut out = Vec::new();
    for (side, dump) in std::iter::once(('a', cx.a)).chain(cx.b.map(|b| ('b', b))) {
        for window in &dump.windows {
            let Some(scan) = cx.scan_of(side, window) else {
                continue;
            };
            let groups: Vec<&AliasGroup> = scan
                .alias_groups
                .iter()
                .filter(|g| g.stride_conflict && !g.members.iter().any(|m| cited(&m.key)))
                .collect();
            let Some(first) = groups.first() else {
                continue;
            };
            let Some((w, r)) = first.conflicts.first() else {
                continue;
            };
            if cx.b.is_some() {
                unknown.push(format!(
                    "whether the {} stride-conflicting alias group{} of {} rank {} (first: `{w}` \
                     and `{r}`) matter: none holds the first divergence",
                    groups.len(),
                    if groups.len() == 1 { "" } else { "s" },
                    side_name(side),
                    window.rank
                ));
                continue;
            }
            let (Some(writer), Some(reader)) = (record(window, w), record(window, r)) else {
                continue;
            };
            let Some(address) = shared_bytes(writer, reader) else {
                continue;
            };
            let mut wc = cite(side, window, writer, Role::Writer, Claim::Captured);
            wc.layout = Some(layout_words(writer));
            let mut rc = cite(side, window, reader, Role::Reader, Claim::Captured);
            rc.layout = Some(layout_words(reader));
            out.push(Finding {
                rule: Rule::WriterAddressReader,
                text: format!(
                    "{} `{}` reads bytes that `{}` wrote through a conflicting layout: written \
                     as {}, read as {}, at {} (a stride conflict; {} such group{} in this \
                     window, the first shown). One capture has no divergence to tie it to: \
                     diagnose it against a correct run (`dumpview diagnose GOOD BAD`).",
                    cx.whose(side, window),
                    reader.key(),
                    writer.key(),
                    layout_words(writer),
                    layout_words(reader),
                    address.describe(),
                    groups.len(),
                    if groups.len() == 1 { "" } else { "s" },
                ),
                evidence: vec![wc, rc],
                address: Some(address),
                presumed: may_have_earlier_writer(window),
                inputs: Vec::new(),
            });
        }
    }
    out
}
