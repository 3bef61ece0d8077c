//! A judged replay as text (what `dumpview replay` prints) and as a Markdown section (what
//! the first-mismatch report's "Replays" holds).

use std::fmt::Write;

use super::number::precise as num;
use super::tensors::{location, render_metrics};
use crate::model::replay::judge::{BY_SCRIPT, OutputJudgement, Replay, SideSummary};
use crate::model::replay::msprobe;
use crate::model::replay::record::Status;
use crate::model::replay::{ReplayResult, Standard};

/// `1.2 ms`, `3.40 s`.
pub fn duration(seconds: f64) -> String {
    if seconds < 1.0 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{seconds:.2} s")
    }
}

/// `ok`, `crash`, `unsupported`.
pub fn status(status: Status) -> &'static str {
    match status {
        Status::Ok => "ok",
        Status::Crash => "crash",
        Status::Unsupported => "unsupported",
        Status::Skipped => "skipped",
    }
}

fn side_line(side: &SideSummary) -> String {
    let mut line = format!("{:<17} {}", side.role, side.spec);
    if let Some(resolved) = side.resolved.as_ref().filter(|r| **r != side.spec) {
        let _ = write!(line, " ({resolved})");
    }
    let _ = write!(line, ": {}", status(side.status));
    if side.computed_by != BY_SCRIPT {
        let _ = write!(line, " [{}]", side.computed_by);
    }
    if let Some(d) = side.duration_s {
        let _ = write!(line, ", {}", duration(d));
    }
    if let Some(input) = &side.input_dtype {
        let _ = write!(line, ", inputs {input}");
    }
    if let Some(e) = &side.exception {
        let _ = write!(line, "; raised {}", e.text());
    }
    line
}

fn window(replay: &Replay) -> String {
    let mut parts = vec![format!("rank {}", replay.rank)];
    if let Some(label) = &replay.label {
        parts.push(label.clone());
    }
    if let Some(m) = replay.match_number {
        parts.push(format!("match {m}"));
    }
    if replay.window_unfinished {
        parts.push(
            "unfinished window: no manifest.json, stage from the file name, storage sharing unknown"
                .into(),
        );
    }
    parts.join(", ")
}

fn pct(share: f64) -> String {
    format!("{:.4}%", share * 100.0)
}

/// msprobe's figures of one output, one line each.
fn msprobe_lines(f: &msprobe::Figures) -> Vec<String> {
    let mut lines = Vec::new();
    let mut first = Vec::new();
    match f.cosine {
        Some(c) if c.is_nan() => first.push("cosine nan (counts as a pass)".to_string()),
        Some(c) => first.push(format!("cosine {c:.9} (must be > 0.99)")),
        None => first.push("cosine –".to_string()),
    }
    if let Some(m) = f.max_abs_err {
        first.push(format!("max_abs_err {} (passes if < 0.001)", num(m)));
    }
    if let Some(u) = f.unequal {
        first.push(format!("{u} unequal elements"));
    }
    lines.push(first.join("   "));
    let shares: Vec<String> = [
        f.rel_err_hundredth,
        f.rel_err_thousandth,
        f.rel_err_ten_thousandth,
    ]
    .into_iter()
    .flatten()
    .map(|s| {
        format!(
            "{} below {} ({} > {})",
            pct(s.share),
            s.threshold,
            if s.passed { "is" } else { "NOT" },
            pct(1.0 - s.threshold)
        )
    })
    .collect();
    if !shares.is_empty() {
        lines.push(format!("rel err |c-r|/(|r|+eps): {}", shares.join("; ")));
    }
    lines.push(format!(
        "eps {:e}, computed in {} ({} output vs {} reference)",
        f.eps, f.computed_in, f.output_dtype, f.reference_dtype
    ));
    if let Some(s) = &f.small_values {
        lines.push(format!(
            "small values |r| <= {:e}: {} ({} with |c-r| > {:e}, ratio {}); others: max rel err {}, mean {}; rmse {}",
            s.threshold,
            s.count,
            s.errors,
            s.atol,
            num(s.error_ratio),
            num(s.normal_max_rel_err),
            num(s.normal_mean_rel_err),
            num(s.rmse)
        ));
    }
    if let Some(u) = &f.ulp {
        lines.push(format!(
            "ULP error ({} mantissa bits): max {}, mean {}, {} above {}",
            u.mantissa_bits,
            num(u.max),
            num(u.mean),
            pct(u.share_above),
            u.bound
        ));
    }
    lines
}

/// dynamo's figures of one output: one line.
fn dynamo_line(d: &crate::model::replay::dynamo::Figures) -> String {
    let mut line = format!(
        "allclose at {:e}: {}",
        d.tol,
        if d.allclose {
            "yes".to_string()
        } else {
            format!("no ({} elements)", d.not_close)
        }
    );
    if let (Some(c), Some(r), Some(m), Some(b)) =
        (d.rmse_candidate, d.rmse_reference, d.multiplier, d.bound)
    {
        let _ = write!(
            line,
            "; RMSE(candidate-golden) {} vs {m} x RMSE(reference-golden) {} + 1e-5 = {}",
            num(c),
            num(r),
            num(b)
        );
    }
    line
}

/// The standard's own figures of one output, as (the standard's name, one line each):
/// msprobe's cosine, max_abs_err, relative-error shares, eps, small values and ULP error, or
/// dynamo's allclose and RMSE comparison; `None` under allclose (its figures are the
/// metrics). What `dumpview replay` prints next to each output, and the workbench draws.
pub fn figures(o: &OutputJudgement) -> Option<(&'static str, Vec<String>)> {
    if let Some(f) = &o.msprobe {
        return Some(("msprobe", msprobe_lines(f)));
    }
    o.dynamo.as_ref().map(|d| ("dynamo", vec![dynamo_line(d)]))
}

fn output_text(o: &OutputJudgement, standard: &Standard, out: &mut String) {
    let dtypes = match (o.candidate_dtype, o.reference_dtype) {
        (Some(c), Some(r)) => format!("{c} against {} {r}", o.against),
        (Some(c), None) => c.to_string(),
        (None, Some(r)) => format!("{} {r}", o.against),
        (None, None) => String::new(),
    };
    let _ = writeln!(
        out,
        "\n== {}: {}  {dtypes} {:?}",
        o.name,
        o.verdict.name().to_uppercase(),
        o.shape
    );
    let _ = writeln!(out, "   {}", o.reason);
    if let Some((name, lines)) = figures(o) {
        for (i, line) in lines.iter().enumerate() {
            let label = if i == 0 { name } else { "" };
            let _ = writeln!(out, "   {label:<11}{line}");
        }
    }
    for quirk in &o.quirks {
        let _ = writeln!(out, "   quirk      {quirk}");
    }
    if let Some(m) = &o.metrics {
        let rule = match standard {
            Standard::Msprobe => " (msprobe's pass threshold)",
            Standard::Dynamo => " (dynamo's tol)",
            Standard::Allclose { .. } => "",
        };
        let _ = writeln!(
            out,
            "   metrics    candidate vs {}; close: |c-r| <= {:e} + {:e}*|r|{rule}",
            o.against, m.atol, m.rtol
        );
        out.push_str(&render_metrics(m));
    } else if let Some(e) = &o.metrics_error {
        let _ = writeln!(out, "   metrics    not computed: {e}");
    }
}

/// The judgement alone: the replayed call, each side, each output with the standard's
/// figures and the tensor metrics, and the verdict.
pub fn render_replay(replay: &Replay) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "replay {} of {} ({})",
        replay.stage,
        replay.dump,
        window(replay)
    );
    if let Some(op) = &replay.op_recorded {
        let _ = writeln!(out, "  recorded operator {op}");
    }
    let versions: Vec<String> = replay
        .versions
        .iter()
        .filter_map(|(k, v)| match v {
            serde_json::Value::Null => None,
            serde_json::Value::String(v) => Some(format!("{k} {v}")),
            other => Some(format!("{k} {other}")),
        })
        .collect();
    let _ = writeln!(
        out,
        "  device {}, {}; called with {}",
        if replay.device.is_empty() {
            "?"
        } else {
            &replay.device
        },
        versions.join(", "),
        if replay.call.is_empty() {
            "?"
        } else {
            &replay.call
        }
    );
    for side in &replay.sides {
        let _ = writeln!(out, "  {}", side_line(side));
    }
    let _ = writeln!(
        out,
        "standard: {}: {}",
        replay.standard.describe(),
        replay.standard_source
    );
    for o in &replay.outputs {
        output_text(o, &replay.standard, &mut out);
    }
    let _ = writeln!(
        out,
        "\nverdict: {}: {}",
        replay.verdict.name().to_uppercase(),
        replay.reason
    );
    for note in &replay.notes {
        let _ = writeln!(out, "note: {note}");
    }
    if replay.verdict == crate::model::replay::ReplayVerdict::Pass && !replay.nonfinite_pass {
        // The operator is right on these inputs; the model may still be wrong elsewhere.
        out.push_str(
            "(a passing replay does not establish a whole-model fix)
",
        );
    }
    out
}

/// What `dumpview replay` prints: the judgement, then how the replay ran.
pub fn render(result: &ReplayResult) -> String {
    let mut out = render_replay(&result.replay);
    let run = &result.run;
    let candidate = result
        .replay
        .sides
        .iter()
        .find(|s| s.role == "candidate")
        .and_then(|s| s.duration_s)
        .map(|d| format!(" (the candidate itself: {})", duration(d)))
        .unwrap_or_default();
    if let Some(reference) = result.replay.sides.iter().find(|s| s.role == "reference") {
        let _ = writeln!(out, "reference: {}", reference.computed_by);
    }
    let _ = writeln!(
        out,
        "ran {} with {} ({}) in {}{candidate}",
        run.host
            .as_deref()
            .map_or("here".to_string(), |h| format!("on {h}")),
        run.python,
        run.python_chosen_by,
        duration(run.wall_s)
    );
    let _ = writeln!(
        out,
        "outputs in {}{}",
        run.out_dir,
        if run.out_dir_default {
            " (dumpview's replay cache; --out chooses)"
        } else {
            ""
        }
    );
    for warning in &result.warnings {
        let _ = writeln!(out, "warning: {warning}");
    }
    out
}

/// One replay as a Markdown subsection of the report's "Replays".
pub fn markdown(replay: &Replay) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "### `{}`: {} ({})\n",
        replay.stage,
        replay.verdict,
        replay.standard.describe()
    );
    let _ = writeln!(md, "- dump `{}` ({})", replay.dump, window(replay));
    for side in &replay.sides {
        let _ = writeln!(
            md,
            "- {}",
            side_line(side)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    let _ = writeln!(md, "- verdict: {}", replay.reason);
    for o in &replay.outputs {
        let mut line = format!("- `{}`: {}: {}", o.name, o.verdict, o.reason);
        if let Some(m) = &o.metrics {
            if let (Some(d), Some(at)) = (m.max_abs_diff, &m.max_abs_diff_at) {
                let _ = write!(line, "; max_abs_diff {} {}", num(d), location(at));
            }
            if let Some(c) = m.cosine {
                let _ = write!(line, "; cosine {c:.9}");
            }
            if let Some(r) = m.rel_l2 {
                let _ = write!(line, "; rel_l2 {}", num(r));
            }
            if let Some(at) = &m.first_mismatch {
                let _ = write!(line, "; first mismatch {}", location(at));
            }
            if let (Some(u), Some(dt)) = (m.max_ulp, m.ulp_dtype) {
                let _ = write!(line, "; max ULP {u} ({dt})");
            }
        }
        let _ = writeln!(md, "{line}");
        for quirk in &o.quirks {
            let _ = writeln!(md, "  - quirk: {quirk}");
        }
    }
    let _ = writeln!(md, "- evidence: `{}`", replay.dir);
    md.push('\n');
    md
}
