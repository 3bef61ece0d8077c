//! Moved values: a floating record whose magnitudes agree but whose position checksum says
//! its values moved (`values_moved`), after integer index stages that differ (block tables,
//! slot mappings, positions): those stages are the suspects.

use crate::model::analysis::compare::Verdict;

use super::alias::shorten;
use super::context::{Context, Divergence, cite, is_integer, record};
use super::types::{Claim, Finding, Role, Rule};

/// The finding for the first divergence's window pair; `Ok(None)` when no floating record
/// there moved, `Err(line)` for [`super::Diagnosis::unknown`] when values moved but no
/// differing integer stage was captured before them.
pub(super) fn moved_values(cx: &Context, d: &Divergence) -> Result<Option<Finding>, String> {
    let pairs = &d.diff.pairs;
    // The first floating record that diverges must be one whose values moved: a move after
    // a magnitude divergence is downstream of it, not a finding of its own.
    let Some(moved_at) = pairs
        .iter()
        .position(|p| p.comparison.verdict.diverges() && !is_integer(&p.dtype_b))
        .filter(|&i| {
            // Rows moved between positions, as the token rows show, count too.
            let rows_permuted = cx
                .analysis
                .diff
                .as_ref()
                .and_then(|r| r.tokens.as_ref())
                .and_then(|t| t.first.as_ref())
                .is_some_and(|bad| bad.kind == "rows_permuted" && bad.key == pairs[i].key);
            rows_permuted || matches!(pairs[i].comparison.verdict, Verdict::ValuesMoved)
        })
    else {
        return Ok(None);
    };
    let moved = &pairs[moved_at];
    let integer_before = || {
        pairs[..moved_at]
            .iter()
            .filter(|p| is_integer(&p.dtype_a) && is_integer(&p.dtype_b))
    };
    let suspects: Vec<_> = integer_before()
        .filter(|p| p.comparison.verdict.diverges())
        .collect();
    let agreeing: Vec<String> = integer_before()
        .filter(|p| !p.comparison.verdict.diverges())
        .map(|p| p.key.clone())
        .collect();
    if suspects.is_empty() {
        return Err(format!(
            "what moved `{}`'s values: no integer index stage captured before it differs \
             (capture the block tables, slot mappings or positions that place them)",
            moved.key
        ));
    }
    let mut evidence = Vec::new();
    for s in &suspects {
        if let Some(r) = record(d.wb, &s.key) {
            evidence.push(cite('b', d.wb, r, Role::Suspect, Claim::Diverges));
        }
    }
    if let Some(r) = record(d.wb, &moved.key) {
        evidence.push(cite('b', d.wb, r, Role::Moved, Claim::Diverges));
    }
    let suspect_keys: Vec<String> = suspects.iter().map(|p| p.key.clone()).collect();
    let controls = if agreeing.is_empty() {
        String::new()
    } else {
        format!(
            " Integer stages before it that agree (not suspects): {}.",
            shorten(&agreeing, 4)
        )
    };
    Ok(Some(Finding {
        rule: Rule::MovedValues,
        text: format!(
            "`{}`'s values moved (magnitudes agree, the position checksum does not) after \
             {} {}, which {} between A and B.{controls}",
            moved.key,
            if suspects.len() == 1 {
                "the integer index stage"
            } else {
                "the integer index stages"
            },
            shorten(&suspect_keys, 6),
            if suspects.len() == 1 {
                "differs"
            } else {
                "differ"
            },
        ),
        evidence,
        address: None,
        presumed: false,
        inputs: Vec::new(),
    }))
}
