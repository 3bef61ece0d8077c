//! A case matrix for people: the plan as `dumpview cases plan` prints it ([`plan_text`]), the
//! per-case table `cases run` prints ([`table_text`]), and the analysis as Markdown with links
//! to each case's evidence files ([`markdown`], `dumpview cases analyze`).

use std::fmt::Write;

use crate::model::cases::analysis::{CaseOutcome, CaseResult, CasesAnalysis};
use crate::model::cases::plan::{Plan, Transform};

/// `plan.json` in words: the baseline, each case and what it changes, what folded.
pub fn plan_text(plan: &Plan, path: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "case matrix {}: {} of {} (rank {}, window {}), candidate {}, reference {}, standard {}",
        plan.name,
        plan.stage,
        plan.dump,
        plan.rank,
        plan.window,
        plan.candidate,
        plan.reference,
        plan.standard.describe()
    );
    let _ = writeln!(out, "baseline:");
    for arg in &plan.baseline.args {
        match (&arg.dtype, &arg.shape, &arg.stride, &arg.value) {
            (Some(d), Some(shape), Some(stride), _) => {
                let _ = writeln!(out, "  {:<12} {d} {shape:?} stride {stride:?}", arg.name);
            }
            (_, _, _, Some(v)) => {
                let _ = writeln!(out, "  {:<12} {} {v}", arg.name, arg.kind);
            }
            _ => {
                let _ = writeln!(out, "  {:<12} {}", arg.name, arg.kind);
            }
        }
    }
    let _ = writeln!(out, "{} cases:", plan.cases.len());
    for case in &plan.cases {
        let _ = writeln!(out, "  {:<28} {}", case.id, transform_text(&case.transform));
    }
    for f in &plan.folded {
        let _ = writeln!(
            out,
            "folded into the baseline: {} from --axis {} ({})",
            f.value, f.spec, f.why
        );
    }
    if let Some(vs) = &plan.vs {
        let _ = writeln!(out, "--vs {}: {}", vs.dump, vs.detail);
    }
    let _ = writeln!(out, "wrote {path}");
    out
}

/// What a transform changes, in words.
pub fn transform_text(t: &Transform) -> String {
    match t {
        Transform::None => "the captured call".into(),
        Transform::Dtype { args } => args
            .iter()
            .map(|(a, d)| format!("{a} as {d}"))
            .collect::<Vec<_>>()
            .join(", "),
        Transform::Layout {
            arg,
            layout,
            stride,
        } => format!("{arg} stored {layout}, stride {stride:?}"),
        Transform::Shape { shape, args } => format!(
            "{shape}: {}",
            args.iter()
                .map(|a| format!("{} {:?}", a.arg, a.shape))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Transform::Mode { mode } => format!("the candidate under torch.{mode}"),
        Transform::Option { name, value } => format!("{name} = {value}"),
    }
}

fn counts_line(a: &CasesAnalysis) -> String {
    let c = &a.counts;
    let mut parts = vec![format!("{} pass", c.pass)];
    for (n, what) in [
        (c.numerical_mismatch, "numerical mismatch"),
        (c.crash, "crash"),
        (c.unsupported_combination, "unsupported combination"),
        (c.missing_evidence, "missing evidence"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    format!("{} cases: {}", a.cases.len(), parts.join(", "))
}

fn outcome_text(c: &CaseResult) -> String {
    match (c.outcome, c.verdict) {
        (CaseOutcome::Pass, Some(v)) if v.name() != "pass" => format!("pass ({v})"),
        (o, _) => o.name().to_string(),
    }
}

/// One line per case, then the counts: what `cases run` prints when it is done.
pub fn table_text(a: &CasesAnalysis) -> String {
    let mut out = String::new();
    let width = a.cases.iter().map(|c| c.id.len()).max().unwrap_or(4).max(4);
    for c in &a.cases {
        let attempt = c.attempt.map_or("-".to_string(), |n| format!("#{n}"));
        let _ = writeln!(
            out,
            "{:<width$}  {:<24} {:<4} {}",
            c.id,
            outcome_text(c),
            attempt,
            first_line(&c.reason, 140)
        );
    }
    let _ = writeln!(out, "{}", counts_line(a));
    for f in &a.follows {
        let _ = writeln!(out, "{}", f.text);
    }
    if let Some(s) = &a.smallest_failing {
        let _ = writeln!(
            out,
            "smallest failing case: {} ({}, {} elements)",
            s.id, s.outcome, s.elements
        );
    }
    if let Some(i) = &a.integration {
        let _ = writeln!(out, "{}", i.text);
    }
    out
}

fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > max {
        format!("{}…", line.chars().take(max).collect::<String>())
    } else {
        line.to_string()
    }
}

/// Markdown table cells cannot hold `|` or line breaks.
fn cell(text: &str) -> String {
    first_line(text, 300).replace('|', "\\|")
}

/// A Markdown link to `path` (`<…>` so `=` and `#` need no escaping).
fn link(name: &str, path: &str) -> String {
    format!("[{name}](<{path}>)")
}

/// The analysis as Markdown; `path` maps each evidence path to the link written (relative to
/// the report's directory).
pub fn markdown(a: &CasesAnalysis, path: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Case matrix {}\n", a.name);
    let _ = writeln!(
        out,
        "Input set `{}` of `{}`; candidate `{}`, reference `{}`; standard {}. Plan: {}.\n",
        a.stage,
        a.dump,
        a.candidate,
        a.reference,
        a.standard.describe(),
        link("plan.json", &path(&a.plan))
    );
    let _ = writeln!(out, "**{}.**\n", counts_line(a));
    let _ = writeln!(out, "| case | outcome | why | attempt | evidence |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for c in &a.cases {
        let evidence: Vec<String> = c
            .evidence
            .iter()
            .map(|e| link(&e.name, &path(&e.path)))
            .collect();
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} |",
            c.id,
            outcome_text(c),
            cell(&c.reason),
            c.attempt.map_or("-".to_string(), |n| n.to_string()),
            if evidence.is_empty() {
                "—".to_string()
            } else {
                evidence.join(" ")
            }
        );
    }
    if !a.folded.is_empty() {
        let _ = writeln!(out, "\nFolded into the baseline:");
        for f in &a.folded {
            let _ = writeln!(out, "- `{}` of `--axis {}`: {}", f.value, f.spec, f.why);
        }
    }
    let _ = writeln!(out, "\n## Which axis the outcomes follow\n");
    if a.follows.is_empty() {
        let _ = writeln!(out, "No case fails or is refused.");
    }
    for f in &a.follows {
        let _ = writeln!(out, "- **{}**: {}", f.outcome, f.text);
    }
    let _ = writeln!(out, "\n## Smallest failing case\n");
    match &a.smallest_failing {
        Some(s) => {
            let _ = writeln!(
                out,
                "`{}` ({}, {} input elements, {} bytes): `{}` writes it as a regression test.",
                s.id,
                s.outcome,
                s.elements,
                s.bytes,
                export_test_command(&a.name, &s.id)
            );
        }
        None => {
            let _ = writeln!(out, "None: no numerical mismatch or crash.");
        }
    }
    if let Some(i) = &a.integration {
        let _ = writeln!(out, "\n## Operator against integration\n");
        let _ = writeln!(out, "{} (`--vs {}`, record `{}`).", i.text, i.vs, i.key);
        if let Some(first) = &i.first_divergence {
            let _ = writeln!(out, "\nThe window's first divergence: `{first}`.");
        }
    }
    let older: Vec<&CaseResult> = a.cases.iter().filter(|c| c.attempts.len() > 1).collect();
    if !older.is_empty() {
        let _ = writeln!(out, "\n## Attempts\n");
        let _ = writeln!(
            out,
            "The newest finished attempt decides; every attempt is kept.\n"
        );
        for c in older {
            for t in &c.attempts {
                let _ = writeln!(
                    out,
                    "- `{}` attempt {} ({}{}): {} — {}",
                    c.id,
                    t.attempt,
                    t.source,
                    if t.complete { "" } else { ", interrupted" },
                    t.outcome,
                    link("dir", &path(&t.dir))
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "\nA passing case does not establish a whole-model fix: rerun the model after the operator fix."
    );
    out
}

/// `dumpview cases export-test NAME CASE -o test_CASE.py`: the command that writes case `id` of
/// matrix `name` as a regression test (the file named after the case, `_` for what a Python
/// module name cannot hold).
pub fn export_test_command(name: &str, id: &str) -> String {
    format!(
        "dumpview cases export-test {name} {id} -o test_{}.py",
        id.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
    )
}
