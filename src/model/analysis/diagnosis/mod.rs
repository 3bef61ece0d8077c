//! The diagnosis: the findings of one analysis connected into one answer, in the terms of a
//! localization (seed 000): the writer, the address and the reader; the operator or its
//! inputs; the origin and what is only downstream of it; the rank and the collective; and the
//! next cheapest experiment that separates what is left (docs/diagnosis.md).
//!
//! Each rule ([`Rule`]) reads what the scans and the diff already computed and the records
//! they rest on, names its evidence ([`Cite`]: a record with the property claimed of it, a
//! storage with a byte range) and stays silent where that evidence is missing: a rule that
//! cannot be checked adds a line to [`Diagnosis::unknown`], never a guess. Computed once from
//! the captures and their [`Analysis`]; the report, `dumpview diagnose`, the workbench and
//! `watch` render this value.

mod alias;
mod context;
mod inputs;
mod moved;
mod next;
mod origin;
mod ranks;
mod single_run;
mod types;

use crate::model::analysis::Analysis;
use crate::model::dump::Dump;

pub use context::Target;
pub use types::*;

/// Diagnoses capture `a`, against `b` when given, from their `analysis` (computed with B
/// when B is given; the scans must be present: [`Analysis::compute`], not
/// [`Analysis::compute_diff`]).
pub fn diagnose(a: &Dump, b: Option<&Dump>, analysis: &Analysis) -> Diagnosis {
    let cx = context::Context::new(a, b, analysis);
    let mut findings = Vec::new();
    let mut unknown = Vec::new();
    for target in cx.targets() {
        findings.extend(alias::writer_address_reader(&cx, &target));
    }
    let untied = alias::untied_conflicts(&cx, &findings, &mut unknown);
    findings.extend(untied);
    findings.extend(alias::bad_bytes_writer(&cx));
    if let Some(first) = cx.first_divergence() {
        let explained = findings.iter().any(|f: &Finding| {
            f.rule == Rule::WriterAddressReader
                && f.evidence
                    .iter()
                    .any(|c| c.role == Role::Reader && c.key == first.pair.key)
        });
        match inputs::operator_or_inputs(&cx, &first) {
            Ok(found) => findings.extend(found),
            // A reader explained by its writer needs no operator to blame.
            Err(_) if explained => {}
            Err(why) => unknown.push(why),
        }
        match moved::moved_values(&cx, &first) {
            Ok(found) => findings.extend(found),
            Err(why) => unknown.push(why),
        }
    }
    findings.extend(single_run::moved_writes(&cx));
    findings.extend(single_run::single_run(&cx));
    findings.extend(ranks::across_ranks(&cx));
    findings.extend(origin::origin(&cx, &mut unknown));
    findings.sort_by_key(|f| f.rule);
    if b.is_none() {
        // One capture has no "A" to tell apart from a "B".
        for f in &mut findings {
            f.text = capitalized(
                &f.text
                    .replacen("A's ", "The capture's ", 1)
                    .replacen("In A, ", "", 1),
            );
        }
    }
    let mut next = next::experiment(&cx, &findings);
    if b.is_none()
        && let Some(next) = &mut next
    {
        next.text = next
            .text
            .replace(" in A ", " in the capture ")
            .replace(" of A ", " of the capture ");
    }
    let mut seen = std::collections::HashSet::new();
    unknown.retain(|line| seen.insert(line.clone()));
    let conclusion = conclusion(&cx, &findings);
    Diagnosis {
        found: conclusion.is_ok(),
        conclusion: conclusion.unwrap_or_else(|why| format!("No diagnosis: {why}")),
        findings,
        unknown,
        next,
    }
}

/// The conclusion sentence from the most specific finding; `Err(reason)` when none applied.
fn conclusion(cx: &context::Context, findings: &[Finding]) -> Result<String, String> {
    let Some(top) = findings.first() else {
        return Err(cx.why_nothing());
    };
    let first_sentence = top
        .text
        .split_once(". ")
        .map_or(top.text.as_str(), |(s, _)| s);
    Ok(format!(
        "{}.",
        capitalized(first_sentence.trim_end_matches('.'))
    ))
}

/// `text` with its first letter upper-case.
fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    let capital: String = chars
        .next()
        .map(|c| c.to_uppercase().collect())
        .unwrap_or_default();
    format!("{capital}{}", chars.as_str())
}
