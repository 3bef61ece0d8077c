//! Origin and downstream: where the numbers first go wrong, and the later divergent (or
//! non-finite) records, "downstream in capture order". A later record is called propagated
//! from the origin only where its input storage is known to be the origin's output: an input
//! set (or a hooked module's input record) whose tensor lies on the origin's bytes.

use crate::model::analysis::scan::view_of;
use crate::model::dump::{Record, Window};

use super::alias::shorten;
use super::context::{Context, cite, nonfinite, record, side_name};
use super::types::{Claim, Finding, Role, Rule};

/// How many downstream records a finding cites (the text counts them all).
const CITED_DOWNSTREAM: usize = 4;

/// The origin finding: of the first divergence when B is given, else of each window's first
/// non-finite record. Lines for what cannot be told go to `unknown`.
pub(super) fn origin(cx: &Context, unknown: &mut Vec<String>) -> Vec<Finding> {
    // The diff's headline names a first bad token ahead of the records' first divergence
    // (a bug in one chunk that whole-record pairing cannot see): that token is the origin.
    if let Some(f) = first_bad_token(cx) {
        return vec![f];
    }
    if let Some(d) = cx.first_divergence() {
        let Some(first_index) = d.diff.first_divergence else {
            return Vec::new();
        };
        let Some(origin) = record(d.wb, &d.pair.key) else {
            return Vec::new();
        };
        let downstream: Vec<&str> = d.diff.pairs[first_index + 1..]
            .iter()
            .filter(|p| p.comparison.verdict.diverges())
            .map(|p| p.key.as_str())
            .collect();
        // One walk over B's records, not a lookup per downstream key (a million-record
        // capture can have most of them downstream).
        let nonfinite_keys: std::collections::HashSet<String> =
            d.wb.records
                .iter()
                .filter(|r| nonfinite(r))
                .map(Record::key)
                .collect();
        let nonfinite_later = downstream
            .iter()
            .filter(|k| nonfinite_keys.contains(**k))
            .count();
        let overflow = overflow_of((d.wa, 'a'), (d.wb, 'b'), &d.pair.key)
            .or_else(|| overflow_of((d.wb, 'b'), (d.wa, 'a'), &d.pair.key))
            .unwrap_or_default();
        let what = format!(
            "the first divergence ({}{}){overflow}",
            d.pair.comparison.verdict.name(),
            if d.diff.rank == 0
                && cx
                    .analysis
                    .diff
                    .as_ref()
                    .is_some_and(|r| r.windows.len() == 1)
            {
                String::new()
            } else {
                format!(", rank {}", d.diff.rank)
            }
        );
        let extra = if nonfinite_later > 0 {
            format!(
                " ({nonfinite_later} of them {} NaN or infinity in B)",
                if nonfinite_later == 1 {
                    "holds"
                } else {
                    "hold"
                }
            )
        } else {
            String::new()
        };
        let first_token = cx
            .analysis
            .diff
            .as_ref()
            .and_then(|r| r.tokens.as_ref())
            .and_then(|t| t.first.as_ref())
            .map(|bad| {
                format!(
                    " The first bad token: request `{}` position {}{} at `{}` ({}).",
                    bad.request_b,
                    bad.position,
                    bad.token_id
                        .map(|id| format!(" (token id {id})"))
                        .unwrap_or_default(),
                    bad.key,
                    bad.kind
                )
            })
            .unwrap_or_default();
        let mut f = finding(
            'b',
            d.wb,
            origin,
            Claim::Diverges,
            &what,
            &downstream,
            &extra,
            unknown,
        );
        f.text = f.text.replacen("B's numbers", "The numbers", 1);
        f.text.push_str(&first_token);
        return vec![f];
    }
    let mut out = Vec::new();
    for (side, window, origin) in cx.first_nonfinite_records() {
        // A rank that only received the NaN through a collective is told by the
        // across-ranks finding; its own origin would repeat it.
        if cx.received_nonfinite(side, window) {
            continue;
        }
        let keys: Vec<String> = window
            .records
            .iter()
            .filter(|r| r.seq > origin.seq && nonfinite(r))
            .map(Record::key)
            .collect();
        let keys_ref: Vec<&str> = keys.iter().map(String::as_str).collect();
        let counts = cx
            .scan_of(side, window)
            .and_then(|s| s.first_nonfinite.as_ref())
            .map(|nf| nf.counts_text())
            .unwrap_or_default();
        let what = format!("the first non-finite record, {counts}");
        out.push(finding(
            side,
            window,
            origin,
            Claim::NonFinite,
            &what,
            &keys_ref,
            "",
            unknown,
        ));
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn finding(
    side: char,
    window: &Window,
    origin: &Record,
    claim: Claim,
    what: &str,
    downstream: &[&str],
    extra: &str,
    unknown: &mut Vec<String>,
) -> Finding {
    let mut propagated = propagated_from(window, origin);
    let mut seen = std::collections::HashSet::new();
    propagated.retain(|(key, _)| seen.insert(key.clone()));
    let mut evidence = vec![cite(side, window, origin, Role::Origin, claim)];
    for key in downstream.iter().take(CITED_DOWNSTREAM) {
        if propagated.iter().any(|(k, _)| k == key) {
            continue;
        }
        if let Some(r) = record(window, key) {
            evidence.push(cite(side, window, r, Role::Downstream, claim));
        }
    }
    for (key, _) in &propagated {
        if let Some(r) = record(window, key) {
            evidence.push(cite(side, window, r, Role::Propagated, Claim::Captured));
        }
    }
    let owned: Vec<String> = downstream.iter().map(|k| k.to_string()).collect();
    let mut text = format!(
        "{}'s numbers first go wrong at `{}`, {what}.",
        side_name(side),
        origin.key()
    );
    match downstream.len() {
        0 => text.push_str(" Nothing captured after it goes wrong."),
        n => text.push_str(&format!(
            " {n} later {} downstream in capture order{extra}: {}.",
            if n == 1 { "record is" } else { "records are" },
            shorten(&owned, 6)
        )),
    }
    if !propagated.is_empty() {
        let shown: Vec<String> = propagated
            .iter()
            .map(|(k, how)| format!("`{k}` ({how})"))
            .collect();
        text.push_str(&format!(" Shown to read its output: {}.", shown.join(", ")));
    } else if !downstream.is_empty() {
        unknown.push(format!(
            "which of the {} records after `{}` it caused: none of their inputs is known to be \
             its output (capture their input sets, or hook their modules with inputs=True)",
            downstream.len(),
            origin.key()
        ));
    }
    Finding {
        rule: Rule::Origin,
        text,
        evidence,
        address: None,
        presumed: false,
        inputs: Vec::new(),
    }
}

/// Later records known to read `origin`'s output: hooked input records (`PATH.input.N`)
/// and input sets' tensor arguments on its bytes (the set's linked outputs are named), each
/// `(key, how)`.
fn propagated_from(window: &Window, origin: &Record) -> Vec<(String, String)> {
    let Some(range) = view_of(origin).and_then(|v| v.byte_range()) else {
        return Vec::new();
    };
    let on_bytes = |storage_id: Option<u64>, device: &str, lo: u64, hi: u64| {
        storage_id.is_some()
            && storage_id == origin.storage_id
            && device == origin.device.as_str()
            && lo < range.1
            && range.0 < hi
    };
    let mut out = Vec::new();
    for r in window.records.iter().filter(|r| r.seq > origin.seq) {
        if !r.stage.contains(".input.") {
            continue;
        }
        if let Some((lo, hi)) = view_of(r).and_then(|v| v.byte_range())
            && on_bytes(r.storage_id, &r.device, lo, hi)
        {
            out.push((
                r.key(),
                format!("a hooked input on `{}`'s bytes", origin.key()),
            ));
            // The module that took it as input: its outputs of the same call.
            if let Some((module, _)) = r.stage.rsplit_once(".input.") {
                for output in window.records.iter().filter(|o| o.seq > r.seq) {
                    let stage = output.stage.as_str();
                    let of_module = stage == module
                        || stage
                            .strip_prefix(module)
                            .is_some_and(|rest| rest.starts_with(".output."));
                    if of_module && output.occurrence == r.occurrence {
                        out.push((
                            output.key(),
                            format!("its module's input `{}` is on those bytes", r.key()),
                        ));
                    }
                }
            }
        }
    }
    for set in &window.input_sets {
        for output in &set.outputs {
            let Some(produced) = record(window, &output.key) else {
                continue;
            };
            if produced.seq <= origin.seq {
                continue;
            }
            let reads = set.args.iter().find(|(_, desc)| {
                let Some((lo, hi)) = arg_bytes(desc) else {
                    return false;
                };
                let device = desc.get("device").and_then(|d| d.as_str()).unwrap_or("");
                let storage_id = desc.get("storage_id").and_then(|v| v.as_u64());
                on_bytes(storage_id, device, lo, hi)
            });
            if let Some((arg, _)) = reads {
                out.push((
                    output.key.clone(),
                    format!(
                        "input set `{}#{}` argument `{arg}` is its output",
                        set.stage, set.occurrence
                    ),
                ));
            }
        }
    }
    out
}

/// The byte range `[lo, hi)` a tensor argument's description reads (read as a record,
/// [`super::inputs::as_record`]); `None` for other arguments or where its layout is missing.
fn arg_bytes(desc: &serde_json::Value) -> Option<(u64, u64)> {
    view_of(&super::inputs::as_record("arg", desc)?)?.byte_range()
}

/// The first bad token of the row alignment, where the diff's headline names it: no record
/// pair diverges (windows that pair only row by row: a chunk against a whole prefill, a batch
/// against a request alone), or the token comes before the records' first divergence.
fn first_bad_token(cx: &Context) -> Option<Finding> {
    let b = cx.b?;
    let report = cx.analysis.diff.as_ref()?;
    let bad = report.tokens.as_ref()?.first.as_ref()?;
    let records_first = cx.first_divergence().map(|d| d.pair.key.clone());
    let headline_is_token = report.headline.as_ref().is_some_and(|h| h.key == bad.key);
    if !headline_is_token || records_first.as_deref() == Some(bad.key.as_str()) {
        return None;
    }
    let later = records_first
        .map(|k| format!(" The records' first divergence, `{k}`, comes later."))
        .unwrap_or_default();
    let window = b
        .windows
        .iter()
        .find(|w| w.source.display().to_string() == bad.source_b.0)?;
    let record = window.records.iter().find(|r| r.seq == bad.source_b.1)?;
    Some(Finding {
        rule: Rule::Origin,
        text: format!(
            "The numbers first go wrong at request `{}` position {}{}, at `{}` ({}): the first \
             bad token of the rows aligned across the two runs' forwards.{later}",
            bad.request_b,
            bad.position,
            bad.token_id
                .map(|id| format!(" (token id {id})"))
                .unwrap_or_default(),
            record.key(),
            bad.kind
        ),
        evidence: vec![cite('b', window, record, Role::Origin, Claim::Captured)],
        address: None,
        presumed: false,
        inputs: Vec::new(),
    })
}

/// `: A's values reach |x| = 8.0959e4 there, beyond float16's largest finite value 65504, so
/// B's float16 overflows` when `key` is finite in the `wide` side's window and non-finite in
/// the `narrow` side's, whose dtype cannot hold the wide side's largest magnitude (largest
/// finite values: float16 65504, bfloat16 3.3895e38; IEEE 754 binary16 and bfloat16).
fn overflow_of(wide: (&Window, char), narrow: (&Window, char), key: &str) -> Option<String> {
    let (w, n) = (record(wide.0, key)?, record(narrow.0, key)?);
    let largest = match n.dtype.as_str() {
        "float16" => 65504.0,
        "bfloat16" => 3.389_531_389_251_535_5e38,
        _ => return None,
    };
    let reach = w.stats.as_ref()?.max_abs?;
    (nonfinite(n) && !nonfinite(w) && reach > largest).then(|| {
        format!(
            ": {}'s values reach |x| = {reach:.4e} there, beyond {}'s largest finite value \
             {largest}, so {}'s {} overflows",
            side_name(wide.1),
            n.dtype,
            side_name(narrow.1),
            n.dtype
        )
    })
}
