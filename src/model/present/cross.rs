//! A cross-feeding (`model::replay::cross::Cross`) as text: what `dumpview replay --cross`
//! prints. `--json` is the value itself.

use std::fmt::Write;

use super::number::compact;
use crate::model::replay::Replay;
use crate::model::replay::cross::{Cross, Direction};

/// The whole report: the outcome and its meaning first, then each direction with its
/// judgements (per output: verdict, reason, max_abs_diff, cosine, mismatches), why a
/// direction was not judged and its fix, and the caveat.
pub fn render(cross: &Cross) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cross-feeding {}  standard {}",
        cross.stage,
        cross.standard.name()
    );
    let _ = writeln!(out, "  A  {}", cross.a);
    let _ = writeln!(out, "  B  {}", cross.b);
    let _ = writeln!(out);
    let _ = writeln!(out, "OUTCOME: {}", cross.outcome.name().to_uppercase());
    let _ = writeln!(out, "  {}", cross.meaning);
    for direction in &cross.directions {
        let _ = writeln!(out);
        render_direction(&mut out, direction, cross.reference.as_deref());
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "note: {}", cross.caveat);
    for warning in &cross.warnings {
        let _ = writeln!(out, "warning: {warning}");
    }
    out
}

fn render_direction(out: &mut String, d: &Direction, reference: Option<&str>) {
    let verdict = match d.reproduces {
        Some(true) => format!("REPRODUCES {}'s output", d.inputs_of),
        Some(false) => format!("DOES NOT REPRODUCE {}'s output", d.inputs_of),
        None => "NOT JUDGED".to_string(),
    };
    let _ = writeln!(out, "{}: {verdict}", d.title());
    let _ = writeln!(
        out,
        "  operator  {} (from {})",
        d.operator.as_deref().unwrap_or("none"),
        d.operator_from
    );
    let _ = writeln!(out, "  inputs    {}", d.input_set);
    if d.saved_outputs.is_empty() {
        let _ = writeln!(out, "  saved     none");
    }
    for saved in &d.saved_outputs {
        let _ = writeln!(out, "  saved     {saved}");
    }
    if let Some(replay) = &d.against_saved {
        let _ = writeln!(out, "  against {}'s saved output:", d.inputs_of);
        judgement(out, replay);
    }
    if let (Some(replay), Some(reference)) = (&d.against_reference, reference) {
        let _ = writeln!(out, "  against the reference {reference}:");
        judgement(out, replay);
    }
    if let Some(nj) = &d.not_judged {
        let _ = writeln!(out, "  not judged: {}", nj.why);
        let _ = writeln!(out, "  fix: {}", nj.fix);
    }
    if let Some(dir) = &d.out_dir {
        let _ = writeln!(
            out,
            "  ran {}, outputs in {dir}",
            d.host
                .as_deref()
                .map_or("here".to_string(), |h| format!("on {h}"))
        );
    }
}

fn judgement(out: &mut String, replay: &Replay) {
    let _ = writeln!(
        out,
        "    {}: {}",
        replay.verdict.name().to_uppercase(),
        replay.reason
    );
    for output in &replay.outputs {
        let mut line = format!("    {:<6} {:<8}", output.name, output.verdict.name());
        if let Some(m) = &output.metrics {
            let _ = write!(
                line,
                " max_abs_diff {}  cosine {}  mismatches {}/{}",
                compact(m.max_abs_diff),
                compact(m.cosine),
                m.mismatches,
                m.numel
            );
        }
        let _ = writeln!(out, "{line}");
    }
}
