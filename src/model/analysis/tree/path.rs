//! Where a record sits in the module tree: the segments of its path, outermost first.
//!
//! Two sources name a module. Dotted stage paths (the probe's hand-placed stages, module
//! hooks, windowed dumps): `model.layers.3.mlp` is `model` › `layers` › `3` › `mlp`; a hooked
//! module's `.input.N` / `.output.N` tail stays one segment (`input.1`), and an operator-level
//! stage `<module path>/<op>` keeps its op as one segment under its module. msprobe dumps:
//! the record's module chain from construct.json (the context lines labelled `module`,
//! innermost first), outermost first, then the API or module call the record belongs to
//! (`Functional.conv2d.0.forward`, `Module.layer1.0.conv1.Conv2d.forward.0`), then what it
//! is of that call (`input.1`, `output.0`).

/// The context label under which msprobe's module chain is held (innermost first):
/// [`crate::model::dump::Context`].
pub const MODULE_LINE: &str = "module";

/// The segments of `stage`'s path, outermost first, given its context lines (`context`:
/// the record's `(label, line)` pairs; only [`MODULE_LINE`] lines are read). Never empty.
pub fn segments<'a>(stage: &'a str, context: &'a [(String, String)]) -> Vec<&'a str> {
    let mut out: Vec<&'a str> = context
        .iter()
        .filter(|(label, _)| label == MODULE_LINE)
        .map(|(_, line)| line.as_str())
        .collect();
    out.reverse();
    if !out.is_empty() || is_msprobe_call(stage) {
        let (call, rest) = split_call(stage);
        out.push(call);
        if !rest.is_empty() {
            out.push(rest);
        }
        return out;
    }
    let (module, op) = match stage.split_once('/') {
        Some((module, op)) if !module.is_empty() && !op.is_empty() => (module, Some(op)),
        _ => (stage, None),
    };
    dotted(module, &mut out);
    out.extend(op);
    out
}

/// `model.layers.3.mlp.input.1` → `model`, `layers`, `3`, `mlp`, `input.1`.
fn dotted<'a>(path: &'a str, out: &mut Vec<&'a str>) {
    let first = out.len();
    let mut start = 0;
    for (at, _) in path.match_indices('.') {
        out.push(&path[start..at]);
        start = at + 1;
    }
    out.push(&path[start..]);
    // A hook's `.input.N` / `.output.N` tail (N a number): one segment, so an input never
    // reads as a module. `attention.output.dense` is a module path (a child `output` module).
    let n = out.len();
    let numbered = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if n - first >= 3 && matches!(out[n - 2], "input" | "output") && numbered(out[n - 1]) {
        let tail_start = path.len() - out[n - 1].len() - out[n - 2].len() - 1;
        out.truncate(n - 2);
        out.push(&path[tail_start..]);
    }
    out.retain(|s| !s.is_empty());
    if out.len() == first {
        out.push(path);
    }
}

/// msprobe's call names: `Functional.conv2d.0.forward…`, `Module.conv1.Conv2d.forward.0…`,
/// `Tensor.add_.2.backward…`: a capitalised API kind, then a `forward`/`backward` segment.
fn is_msprobe_call(stage: &str) -> bool {
    stage.starts_with(|c: char| c.is_ascii_uppercase())
        && stage.contains('.')
        && call_end(stage).is_some()
}

/// The byte offset where the call's name ends: after `forward`/`backward` (or a module's
/// `parameters_grad`), and for a `Module.` call after the call number that follows it.
fn call_end(stage: &str) -> Option<usize> {
    let mut offset = 0;
    let mut parts = stage.split('.').peekable();
    while let Some(part) = parts.next() {
        offset += part.len();
        if offset > part.len() && matches!(part, "forward" | "backward" | "parameters_grad") {
            if stage.starts_with("Module.")
                && let Some(next) = parts.peek()
                && !next.is_empty()
                && next.bytes().all(|b| b.is_ascii_digit())
            {
                offset += 1 + next.len();
            }
            return Some(offset);
        }
        offset += 1;
    }
    None
}

/// `Functional.conv2d.0.forward.input.1` → (`Functional.conv2d.0.forward`, `input.1`).
fn split_call(stage: &str) -> (&str, &str) {
    match call_end(stage) {
        Some(end) if end < stage.len() => (&stage[..end], &stage[end + 1..]),
        _ => (stage, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(lines: &[&str]) -> Vec<(String, String)> {
        lines
            .iter()
            .map(|l| ("module".to_string(), l.to_string()))
            .chain([("stack".to_string(), "model.py:3 forward".to_string())])
            .collect()
    }

    #[test]
    fn dotted_paths_split_at_dots_keeping_input_and_output_tails() {
        assert_eq!(
            segments("model.layers.3.mlp", &[]),
            ["model", "layers", "3", "mlp"]
        );
        assert_eq!(
            segments("model.layers.3.mlp.output.0", &[]),
            ["model", "layers", "3", "mlp", "output.0"]
        );
        assert_eq!(
            segments("model.layers.3.self_attn.input.1", &[]),
            ["model", "layers", "3", "self_attn", "input.1"]
        );
        // A child module named `output` (BERT's BertSelfOutput) is a module, not a tail.
        assert_eq!(
            segments("encoder.layer.4.attention.output.dense", &[]),
            ["encoder", "layer", "4", "attention", "output", "dense"]
        );
        assert_eq!(segments("logits", &[]), ["logits"]);
        assert_eq!(
            segments("layers.0.mlp/aten.mm", &[]),
            ["layers", "0", "mlp", "aten.mm"]
        );
        assert_eq!(segments("a..b", &[]), ["a", "b"]);
    }

    #[test]
    fn msprobe_records_sit_under_their_module_chain_and_call() {
        let context = chain(&[
            "Module.layer1.0.conv1.Conv2d.forward.0",
            "Module.layer1.0.Bottleneck.forward.0",
        ]);
        assert_eq!(
            segments("Functional.conv2d.1.forward.input.0", &context),
            [
                "Module.layer1.0.Bottleneck.forward.0",
                "Module.layer1.0.conv1.Conv2d.forward.0",
                "Functional.conv2d.1.forward",
                "input.0"
            ]
        );
        // A module's own record: its call is the node its children's chains name.
        assert_eq!(
            segments("Module.conv1.Conv2d.forward.0.output.0", &[]),
            ["Module.conv1.Conv2d.forward.0", "output.0"]
        );
        assert_eq!(
            segments("Functional.cross_entropy.0.forward.input.reduction", &[]),
            ["Functional.cross_entropy.0.forward", "input.reduction"]
        );
        assert_eq!(
            segments("Module.fc.Linear.parameters_grad.0.bias", &[]),
            ["Module.fc.Linear.parameters_grad.0", "bias"]
        );
        assert_eq!(
            segments("Tensor.to.0.forward", &[]),
            ["Tensor.to.0.forward"]
        );
    }
}
