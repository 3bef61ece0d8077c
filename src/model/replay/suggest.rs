//! Which built-in reference a captured input set most likely wants: the workbench's replay
//! dialog prefills its reference field with [`reference_for`], from the operator the probe
//! recorded (`capture_inputs(..., _op=...)`) and the stage's name.
//!
//! A guess, always shown and editable, never applied silently: the recorded operator is
//! asked first (it names what was called), then the stage name; each is matched on its last
//! dotted part, lower-cased (`layers.0.attention.query` is `query`, a linear layer, not
//! attention), by the rules of [`RULES`] in order. Nothing matches: `None`.

/// `(built-in, words)`: the first rule with a word in the name wins. A word of four letters
/// or more matches anywhere in the name (`norm` in `post_norm`); a shorter one only as a whole
/// `_`-separated part (`act` in `mlp_act`, not in `fact`). More specific words come first
/// (`add_rms_norm` and `layer_norm` before `norm`). `layernorm` in one word is what the Llama
/// family calls its RMSNorm (`input_layernorm`), so only `layer_norm` suggests layer_norm.
pub const RULES: &[(&str, &[&str])] = &[
    ("builtin:add_rms_norm", &["add_rms_norm", "add_rmsnorm"]),
    ("builtin:layer_norm", &["layer_norm"]),
    ("builtin:rms_norm", &["rms_norm", "rmsnorm", "norm"]),
    ("builtin:rope_neox", &["rope", "rotary"]),
    ("builtin:softmax", &["softmax"]),
    ("builtin:gelu", &["gelu"]),
    ("builtin:silu_and_mul", &["silu", "swiglu", "act"]),
    ("builtin:sdpa", &["sdpa", "attention", "attn"]),
    ("builtin:linear", &["linear", "proj", "dense"]),
    ("builtin:matmul", &["matmul", "bmm", "mm"]),
];

/// The built-in reference (`builtin:NAME`) that the recorded operator `op`, else the stage
/// name `stage` (`layers.0.input_norm`, with or without `#N`), suggests; `None` when neither
/// does.
///
/// `torch.ops.npu.npu_rms_norm` and `input_norm` give `builtin:rms_norm`;
/// `torch.nn.functional.silu` and `mlp_act` give `builtin:silu_and_mul`; `layers.0.rope` gives
/// `builtin:rope_neox`; `self_attn` gives `builtin:sdpa`.
pub fn reference_for(stage: &str, op: Option<&str>) -> Option<&'static str> {
    op.and_then(|op| matching(last_part(op)))
        .or_else(|| matching(last_part(stage.split('#').next().unwrap_or(stage))))
}

/// The last dotted part of `name` (`torch.ops.npu.npu_rms_norm` → `npu_rms_norm`), lower-case.
fn last_part(name: &str) -> String {
    name.rsplit(['.', ':'])
        .next()
        .unwrap_or(name)
        .to_lowercase()
}

fn matching(name: String) -> Option<&'static str> {
    let found = |word: &str| match word.len() {
        4.. => name.contains(word),
        _ => name
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|part| part == word),
    };
    RULES
        .iter()
        .find(|(_, words)| words.iter().any(|w| found(w)))
        .map(|(builtin, _)| *builtin)
}

#[cfg(test)]
mod tests {
    use super::reference_for;

    #[test]
    fn the_recorded_operator_decides_first() {
        for (op, expected) in [
            ("torch.ops.npu.npu_rms_norm", "builtin:rms_norm"),
            ("torch.ops._C.rms_norm", "builtin:rms_norm"),
            ("torch.ops.npu.npu_add_rms_norm", "builtin:add_rms_norm"),
            ("torch.nn.functional.layer_norm", "builtin:layer_norm"),
            ("torch.nn.functional.silu", "builtin:silu_and_mul"),
            ("torch.ops._C.silu_and_mul", "builtin:silu_and_mul"),
            ("torch.nn.functional.gelu", "builtin:gelu"),
            ("torch.softmax", "builtin:softmax"),
            ("torch.ops.npu.npu_rotary_mul", "builtin:rope_neox"),
            (
                "torch.nn.functional.scaled_dot_product_attention",
                "builtin:sdpa",
            ),
            ("torch.nn.functional.linear", "builtin:linear"),
            ("torch.matmul", "builtin:matmul"),
            ("my/kernels.py:fused_rope", "builtin:rope_neox"),
        ] {
            // The stage name says something else: the operator wins.
            assert_eq!(
                reference_for("layers.0.mystery#1", Some(op)),
                Some(expected),
                "{op}"
            );
        }
        assert_eq!(
            reference_for("layers.0.input_norm#1", Some("torch.nn.functional.gelu")),
            Some("builtin:gelu")
        );
    }

    #[test]
    fn the_stage_name_decides_without_a_telling_operator() {
        for (stage, expected) in [
            ("layers.0.input_norm#1", Some("builtin:rms_norm")),
            (
                "layers.3.post_attention_layernorm",
                Some("builtin:rms_norm"),
            ),
            ("encoder.layer_norm#1", Some("builtin:layer_norm")),
            ("model.norm#2", Some("builtin:rms_norm")),
            ("layers.0.rope#1", Some("builtin:rope_neox")),
            ("layers.0.rotary_emb", Some("builtin:rope_neox")),
            ("layers.3.mlp_act#1", Some("builtin:silu_and_mul")),
            ("layers.3.self_attn#1", Some("builtin:sdpa")),
            ("layers.3.attention", Some("builtin:sdpa")),
            ("layers.0.qkv_proj", Some("builtin:linear")),
            ("layers.3.softmax#4", Some("builtin:softmax")),
            ("runner.input_ids#1", None),
            ("layers.0.kv_write", None),
            ("layers.0.attention.query", None),
            ("layers.0.fact", None),
            ("summary", None),
        ] {
            assert_eq!(reference_for(stage, None), expected, "{stage}");
            // An operator that suggests nothing leaves the stage name to decide.
            assert_eq!(
                reference_for(stage, Some("my_ops.fused_kernel")),
                expected,
                "{stage}"
            );
        }
    }
}
