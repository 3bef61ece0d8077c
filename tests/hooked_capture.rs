//! A capture made with one `dp.hook(model, label=...)` line (issue 28): all-MiniLM-L6-v2's real
//! weights, every module hooked, float32 against bfloat16 (tests/fixtures/minilm_hooked, made by
//! examples/minilm_hooked.py; committed, since bfloat16 on cpu differs between machines).

mod support;

use std::path::{Path, PathBuf};

use dumpview::model::analysis::compare::Tolerances;
use dumpview::model::analysis::diff::{Identity, diff};
use dumpview::model::dump::Dump;

fn side(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/minilm_hooked")
        .join(name)
}

fn load(dir: &Path) -> Dump {
    dumpview::load(&[dir.to_path_buf()], &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_module_is_a_stage_named_by_its_path() {
    let a = load(&side("a"));
    let window = &a.windows[0];
    assert_eq!(window.label, "minilm-batch-0");
    assert_eq!(window.records.len(), 126);
    let stages: Vec<&str> = window.records.iter().map(|r| r.stage.as_ref()).collect();
    // Capture order: a module's output after its children's.
    assert_eq!(
        &stages[..6],
        &[
            "embeddings.word_embeddings",
            "embeddings.token_type_embeddings",
            "embeddings.position_embeddings",
            "embeddings.LayerNorm",
            "embeddings.dropout",
            "embeddings",
        ]
    );
    // The self-attention returns (context, probabilities): .output.N; the root's ModelOutput
    // (last hidden state, pooled output) under the root's class name.
    assert!(stages.contains(&"encoder.layer.0.attention.self.output.0"));
    assert!(stages.contains(&"encoder.layer.0.attention.self.output.1"));
    assert_eq!(
        &stages[124..],
        &["BertModel.output.0", "BertModel.output.1"]
    );
    // Hooked activations [batch, seq, hidden] carry token rows over (0, 1): 4 sentences x 23.
    let rows = window.token_rows.as_ref().expect("token rows");
    assert_eq!(rows.map.iter().map(|e| e.count).sum::<u64>(), 92);
    assert!(rows.records.iter().all(|b| b.rows == 92));
}

#[test]
fn float32_against_bfloat16_names_the_records_first_divergence_and_the_rows_drift_apart() {
    let (a, b) = (load(&side("a")), load(&side("b")));
    let report = diff(&a.windows, &b.windows, &Tolerances::default());
    let window = &report.windows[0];
    assert_eq!(window.pairs.len(), 126);
    assert!(
        matches!(window.identity, Identity::Same { .. }),
        "{:?}",
        window.identity
    );
    let first = window.first().expect("a divergence");
    assert_eq!(first.key, "encoder.layer.4.attention.self.output.0#1");
    // The headline is the records' first divergence, not the row that drifted across the
    // precision change earlier.
    let headline = report.headline.as_ref().expect("a headline");
    assert_eq!(headline.key, "encoder.layer.4.attention.self.output.0#1");
    let bad = report
        .tokens
        .as_ref()
        .and_then(|t| t.first.as_ref())
        .unwrap();
    assert_eq!(
        (bad.key.as_str(), bad.position, bad.token_id),
        ("encoder.layer.0.output.dense#1", 9, Some(3899))
    );
    assert_eq!(bad.dtypes, ("float32".to_string(), "bfloat16".to_string()));
    let (code, text, _) = support::run::text(&[
        "diff",
        side("a").to_str().unwrap(),
        side("b").to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("across a precision change (float32 vs bfloat16): a row drifts further"),
        "{text}"
    );
}
