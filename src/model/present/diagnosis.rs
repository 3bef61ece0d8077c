//! The diagnosis as text (`dumpview diagnose`) and as the report's Markdown section.

use std::fmt::Write;

use crate::model::analysis::diagnosis::{Cite, Diagnosis, Finding, Role, Step};

/// A role in words.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::Writer => "writer",
        Role::Reader => "reader",
        Role::LastFiniteWriter => "last finite writer",
        Role::FirstNonFinite => "first non-finite",
        Role::Origin => "origin",
        Role::Downstream => "downstream",
        Role::Propagated => "reads the origin's output",
        Role::Suspect => "suspect",
        Role::Moved => "values moved",
        Role::Collective => "collective",
        Role::Input => "input",
        Role::Upstream => "upstream, agrees",
        Role::Duplicate => "equal piece",
        Role::Silent => "zero although tokens arrived",
        Role::Control => "not zero",
        Role::Stale => "stale output",
        Role::Previous => "the occurrence it repeats",
        Role::Before => "the record before, changed",
        Role::Partner => "the other side's write",
    }
}

/// A step of the ladder in words.
pub fn step_name(step: Step) -> &'static str {
    match step {
        Step::Ablation => "ablation",
        Step::Capture => "capture",
        Step::CrossReplay => "cross-fed replay",
        Step::Replay => "single-operator replay",
        Step::Instrument => "instrument the code",
    }
}

/// `B rank 0 `layers.0.k_cache_write#1` (seq 8): writer, [12, 2, 64] stride [64, 2048, 1] offset 0`.
pub fn cite_line(c: &Cite) -> String {
    let mut line = format!(
        "{} rank {}{} `{}` (seq {}): {}",
        c.side.to_ascii_uppercase(),
        c.rank,
        c.call
            .as_ref()
            .map_or(String::new(), |call| format!(" {call}")),
        c.key,
        c.seq,
        role_name(c.role)
    );
    if let Some(layout) = &c.layout {
        let _ = write!(line, ", {layout}");
    }
    line
}

fn finding_lines(f: &Finding) -> Vec<String> {
    let mut lines: Vec<String> = f.evidence.iter().map(cite_line).collect();
    if let Some(a) = &f.address {
        lines.push(format!("address: {}", a.describe()));
    }
    for i in &f.inputs {
        lines.push(if i.values.is_empty() {
            format!("input `{}`: {}", i.name, i.verdict)
        } else {
            format!("input `{}`: {} ({})", i.name, i.verdict, i.values)
        });
    }
    lines
}

/// The diagnosis for a terminal.
pub fn text(d: &Diagnosis) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Diagnosis: {}", d.conclusion);
    for (n, f) in d.findings.iter().enumerate() {
        let _ = writeln!(out, "\n{}. [{}] {}", n + 1, f.rule.name(), f.text);
        for line in finding_lines(f) {
            let _ = writeln!(out, "   - {line}");
        }
    }
    if !d.unknown.is_empty() {
        let _ = writeln!(out, "\nNot known:");
        for line in &d.unknown {
            let _ = writeln!(out, "  - {line}");
        }
    }
    if let Some(next) = &d.next {
        let _ = writeln!(
            out,
            "\nNext experiment ({}): {}",
            step_name(next.step),
            next.text
        );
        for command in &next.commands {
            let _ = writeln!(out, "  $ {command}");
        }
    }
    out
}

/// The report's `## Diagnosis` section.
pub fn markdown(d: &Diagnosis) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "## Diagnosis\n");
    let _ = writeln!(md, "**{}**\n", d.conclusion);
    if !d.findings.is_empty() {
        let _ = writeln!(md, "### Chain\n");
        for (n, f) in d.findings.iter().enumerate() {
            let _ = writeln!(md, "{}. **{}**: {}", n + 1, f.rule.name(), f.text);
            for line in finding_lines(f) {
                let _ = writeln!(md, "   - {line}");
            }
        }
        md.push('\n');
    }
    if !d.unknown.is_empty() {
        let _ = writeln!(md, "### Not known\n");
        for line in &d.unknown {
            let _ = writeln!(md, "- {line}");
        }
        md.push('\n');
    }
    if let Some(next) = &d.next {
        let _ = writeln!(md, "### Next experiment ({})\n", step_name(next.step));
        let _ = writeln!(md, "{}\n", next.text);
        if !next.commands.is_empty() {
            let _ = writeln!(md, "```sh\n{}\n```\n", next.commands.join("\n"));
        }
    }
    md
}
