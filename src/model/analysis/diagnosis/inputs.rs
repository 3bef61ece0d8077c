//! Operator or inputs: where both sides captured the first divergent stage's inputs (its input
//! set, linked by `outputs=` or named as the stage, or a hooked module's `PATH.input.N`
//! records), the inputs are compared first. Inputs agree and the output differs: the operator
//! (or its configuration) differs here. Inputs differ: the difference is upstream.

use crate::model::analysis::compare::{Verdict, compare_records};
use crate::model::dump::{InputSetEntry, Record, Window};

use super::context::{Context, Divergence, cite, record};
use super::types::{Claim, Finding, InputCompared, Role, Rule};

/// The finding, `Ok(None)` when silent with nothing to say, `Err(line)` for
/// [`super::Diagnosis::unknown`] when the inputs were not captured on both sides.
pub(super) fn operator_or_inputs(cx: &Context, d: &Divergence) -> Result<Option<Finding>, String> {
    let key = &d.pair.key;
    let compared = match (input_set(d.wa, key), input_set(d.wb, key)) {
        (Some(sa), Some(sb)) => Compared::Sets(sa, sb, compare_sets(cx, sa, sb)),
        (sa, sb) => match hooked_inputs(d) {
            Some(inputs) => Compared::Hooked(inputs),
            None => {
                return Err(match (sa, sb) {
                    (None, None) => format!(
                        "whether `{key}`'s operator or its inputs differ: neither side captured \
                         its inputs (an input set linked to it, or hooked inputs)"
                    ),
                    (Some(_), None) => format!(
                        "whether `{key}`'s operator or its inputs differ: only A captured its \
                         input set"
                    ),
                    _ => format!(
                        "whether `{key}`'s operator or its inputs differ: only B captured its \
                         input set"
                    ),
                });
            }
        },
    };
    let (inputs, set_name, ops) = match &compared {
        Compared::Sets(sa, sb, inputs) => (
            inputs.clone(),
            format!("input set `{}#{}`", sa.stage, sa.occurrence),
            (sa.op.clone(), sb.op.clone()),
        ),
        Compared::Hooked(inputs) => (inputs.clone(), "hooked inputs".to_string(), (None, None)),
    };
    if inputs.is_empty() {
        return Ok(None);
    }
    let unknown: Vec<&str> = inputs
        .iter()
        .filter(|i| i.verdict == "unknown")
        .map(|i| i.name.as_str())
        .collect();
    let differing: Vec<&InputCompared> = inputs.iter().filter(|i| i.differs()).collect();
    let output = d.wb.records.iter().find(|r| r.key() == *key);
    let mut evidence = Vec::new();
    if let Some(out) = output {
        evidence.push(cite('b', d.wb, out, Role::Origin, Claim::Diverges));
    }
    if let Compared::Hooked(_) = &compared {
        for i in &inputs {
            if let Some(r) = record(d.wb, &i.name) {
                let claim = if i.differs() {
                    Claim::Diverges
                } else {
                    Claim::Agrees
                };
                evidence.push(cite('b', d.wb, r, Role::Input, claim));
            }
        }
    }
    let listed = |xs: &[&InputCompared]| {
        xs.iter()
            .map(|i| {
                if i.values.is_empty() {
                    format!("`{}` ({})", i.name, i.verdict)
                } else {
                    format!("`{}` ({})", i.name, i.values)
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let text = if differing.is_empty() {
        if !unknown.is_empty() {
            return Err(format!(
                "whether `{key}`'s operator or its inputs differ: its {set_name} holds tensors \
                 without statistics ({}); capture them with a probe that records input \
                 statistics",
                unknown.join(", ")
            ));
        }
        let ops_text = match ops {
            (Some(a), Some(b)) if a != b => format!(" A called `{a}`, B called `{b}`."),
            (Some(a), Some(_)) => format!(" Both called `{a}`."),
            _ => String::new(),
        };
        format!(
            "`{key}`'s inputs agree between A and B ({set_name}: {}) and its output diverges: \
             the operator (or its configuration) differs here.{ops_text}",
            inputs
                .iter()
                .map(|i| format!("`{}`", i.name))
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        let upstream = upstream_of(d);
        let at = match upstream {
            Some(u) => {
                evidence.push(cite('b', d.wb, u, Role::Upstream, Claim::Agrees));
                format!(
                    "look upstream, between `{}` (the last record captured before it, which \
                     agrees) and `{key}`",
                    u.key()
                )
            }
            None => format!("look upstream of `{key}`, before the first captured record"),
        };
        format!(
            "`{key}`'s inputs already differ between A and B ({set_name}: {}): {at}. Its \
             operator is not shown to differ.",
            listed(&differing)
        )
    };
    Ok(Some(Finding {
        rule: Rule::OperatorOrInputs,
        text,
        evidence,
        address: None,
        presumed: false,
        inputs,
    }))
}

enum Compared<'w> {
    Sets(&'w InputSetEntry, &'w InputSetEntry, Vec<InputCompared>),
    Hooked(Vec<InputCompared>),
}

/// The input set of `window` whose operator produced record `key`: linked by `outputs`, else
/// named as the stage with the same occurrence.
pub(super) fn input_set<'w>(window: &'w Window, key: &str) -> Option<&'w InputSetEntry> {
    window
        .input_sets
        .iter()
        .find(|s| s.outputs.iter().any(|o| o.key == key))
        .or_else(|| {
            window
                .input_sets
                .iter()
                .find(|s| format!("{}#{}", s.stage, s.occurrence) == key)
        })
}

/// Every argument of both sets compared: tensors by their statistics under the diff's
/// tolerances, scalars by value.
fn compare_sets(cx: &Context, a: &InputSetEntry, b: &InputSetEntry) -> Vec<InputCompared> {
    let (mut fa, mut fb) = (Vec::new(), Vec::new());
    for (name, value) in &a.args {
        flatten(name, value, &mut fa);
    }
    for (name, value) in &b.args {
        flatten(name, value, &mut fb);
    }
    let mut out = Vec::new();
    for (name, va) in &fa {
        let Some((_, vb)) = fb.iter().find(|(n, _)| n == name) else {
            out.push(InputCompared {
                name: name.clone(),
                verdict: "structural".into(),
                values: "given in A only".into(),
            });
            continue;
        };
        out.push(compare_value(cx, name, va, vb));
    }
    for (name, _) in fb.iter().filter(|(n, _)| !fa.iter().any(|(m, _)| m == n)) {
        out.push(InputCompared {
            name: name.clone(),
            verdict: "structural".into(),
            values: "given in B only".into(),
        });
    }
    out
}

/// `(name, description)` of every leaf argument: nested lists and dicts as `name.i`.
fn flatten(name: &str, value: &serde_json::Value, out: &mut Vec<(String, serde_json::Value)>) {
    let kind = value.get("kind").and_then(|k| k.as_str()).unwrap_or("");
    match (kind, value.get("items")) {
        ("list" | "tuple", Some(serde_json::Value::Array(items))) => {
            for (i, item) in items.iter().enumerate() {
                flatten(&format!("{name}.{i}"), item, out);
            }
        }
        ("dict", Some(serde_json::Value::Object(items))) => {
            for (k, item) in items {
                flatten(&format!("{name}.{k}"), item, out);
            }
        }
        _ => out.push((name.to_string(), value.clone())),
    }
}

fn compare_value(
    cx: &Context,
    name: &str,
    a: &serde_json::Value,
    b: &serde_json::Value,
) -> InputCompared {
    let kind = |v: &serde_json::Value| {
        v.get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or("")
            .to_string()
    };
    if kind(a) == "tensor" && kind(b) == "tensor" {
        let (Some(ra), Some(rb)) = (as_record(name, a), as_record(name, b)) else {
            return InputCompared {
                name: name.into(),
                verdict: "unknown".into(),
                values: String::new(),
            };
        };
        if ra.stats.is_none() || rb.stats.is_none() {
            return InputCompared {
                name: name.into(),
                verdict: "unknown".into(),
                values: String::new(),
            };
        }
        let verdict = compare_records(&ra, &rb, &cx.analysis.tolerances).verdict;
        let verdict = match verdict {
            Verdict::Agree | Verdict::ChecksumInconclusive => "agree".to_string(),
            Verdict::NotCompared { .. } => "unknown".to_string(),
            v => v.name().to_string(),
        };
        return InputCompared {
            name: name.into(),
            verdict,
            values: String::new(),
        };
    }
    let value = |v: &serde_json::Value| {
        v.get("value")
            .map(|x| x.to_string())
            .unwrap_or_else(|| kind(v))
    };
    let same = kind(a) == kind(b) && a.get("value") == b.get("value");
    InputCompared {
        name: name.into(),
        verdict: if same { "agree" } else { "differs" }.into(),
        values: if same {
            String::new()
        } else {
            format!("{} vs {}", value(a), value(b))
        },
    }
}

/// A tensor argument's description read as a record (its layout and statistics), to be
/// compared as the diff compares records.
pub(super) fn as_record(name: &str, desc: &serde_json::Value) -> Option<Record> {
    let mut object = desc.as_object()?.clone();
    object.remove("kind");
    object.insert("seq".into(), 0.into());
    object.insert("stage".into(), name.into());
    object.insert("occurrence".into(), 1.into());
    object.entry("mode").or_insert("eager".into());
    object.entry("stats").or_insert(serde_json::Value::Null);
    object
        .entry("tensor_file")
        .or_insert(serde_json::Value::Null);
    object
        .entry("device_format")
        .or_insert(serde_json::Value::Null);
    serde_json::from_value(serde_json::Value::Object(object)).ok()
}

/// Hooked inputs of the module whose output is the first divergence (`PATH` or
/// `PATH.output.N`): its `PATH.input.M` pairs of the same occurrence, with their verdicts.
fn hooked_inputs(d: &Divergence) -> Option<Vec<InputCompared>> {
    let (stage, occurrence) = d.pair.key.rsplit_once('#')?;
    let module = match stage.rsplit_once(".output.") {
        Some((module, index)) if index.chars().all(|c| c.is_ascii_digit() || c == '.') => module,
        _ => stage,
    };
    let prefix = format!("{module}.input.");
    let suffix = format!("#{occurrence}");
    let inputs: Vec<InputCompared> = d
        .diff
        .pairs
        .iter()
        .filter(|p| p.key.starts_with(&prefix) && p.key.ends_with(&suffix))
        .map(|p| InputCompared {
            name: p.key.clone(),
            verdict: match &p.comparison.verdict {
                Verdict::Agree | Verdict::ChecksumInconclusive => "agree".into(),
                Verdict::NotCompared { .. } => "unknown".into(),
                v => v.name().into(),
            },
            values: String::new(),
        })
        .collect();
    (!inputs.is_empty()).then_some(inputs)
}

/// The last record of B captured before the first divergence whose pair agrees.
fn upstream_of<'w>(d: &Divergence<'w>) -> Option<&'w Record> {
    let before = d.diff.first_divergence?;
    let last = d.diff.pairs[..before]
        .iter()
        .rev()
        .find(|p| !p.comparison.verdict.diverges())?;
    record(d.wb, &last.key)
}
