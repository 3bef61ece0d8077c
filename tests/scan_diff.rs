//! scan and diff on the real example dumps (assets/examples/), asserting the exact answers.

use std::path::{Path, PathBuf};

use dumpview::model::analysis::compare::{Tolerances, Verdict};
use dumpview::model::analysis::diff::{Cell, Identity, diff};
use dumpview::model::analysis::scan::scan_window;
use dumpview::model::dump::Dump;
use dumpview::model::ingest::load;

fn pair_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples")
        .join(name)
}

fn side(name: &str, side: &str) -> Dump {
    let dump = load(&[pair_dir(name).join(side)], &mut |_| {}).unwrap();
    assert!(dump.warnings.is_empty(), "{:?}", dump.warnings);
    assert_eq!(dump.windows.len(), 1);
    dump
}

fn expected(name: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(pair_dir(name).join("expected.json")).unwrap())
        .unwrap()
}

fn keys(groups: &serde_json::Value) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = serde_json::from_value(groups.clone()).unwrap();
    out.sort();
    out
}

#[test]
fn fp16_overflow_first_nonfinite_and_first_divergence() {
    let (a, b) = (
        side("llama_fp16_overflow", "a"),
        side("llama_fp16_overflow", "b"),
    );
    assert_eq!(scan_window(&a.windows[0]).first_nonfinite, None);
    let nf = scan_window(&b.windows[0]).first_nonfinite.unwrap();
    assert_eq!(nf.key, "layers.3.mlp_up#1");
    assert_eq!((nf.nan_count, nf.inf_count), (0, 4));
    assert_eq!(
        Some(nf.key.as_str()),
        expected("llama_fp16_overflow")["first_nonfinite"]["b"].as_str()
    );

    let report = diff(&a.windows, &b.windows, &Tolerances::default());
    let w = &report.windows[0];
    let first = w.first().unwrap();
    assert_eq!(first.key, "layers.3.mlp_up#1");
    assert_eq!(first.comparison.verdict, Verdict::NonFinite);
    assert_eq!(w.identity, Identity::Same { tokens: 12 });
    // float32 against float16 everywhere except the int64 input ids.
    assert_eq!(w.precision_changes, 118);
    assert!(report.found_something());
}

#[test]
fn kv_alias_conflicts_are_exactly_the_faulty_cache_views() {
    let expected = expected("llama_kv_alias");
    for s in ["a", "b"] {
        let scan = scan_window(&side("llama_kv_alias", s).windows[0]);
        let conflicts: Vec<Vec<String>> = scan
            .alias_groups
            .iter()
            .filter(|g| g.stride_conflict)
            .map(|g| g.members.iter().map(|m| m.key.clone()).collect())
            .collect();
        let mut sorted = conflicts.clone();
        sorted.sort();
        assert_eq!(sorted, keys(&expected["alias_conflicts"][s]), "side {s}");
        // Conflicts are listed before plain aliases.
        let first_plain = scan
            .alias_groups
            .iter()
            .position(|g| !g.stride_conflict)
            .unwrap();
        assert_eq!(first_plain, conflicts.len());
        // Without conflict: the designed cache aliases, and logits captured twice under two stage names.
        let mut plain: Vec<Vec<String>> = scan
            .alias_groups
            .iter()
            .filter(|g| !g.stride_conflict)
            .map(|g| g.members.iter().map(|m| m.key.clone()).collect())
            .collect();
        plain.sort();
        assert_eq!(
            plain,
            keys(&expected["aliases_without_conflict"][s]),
            "side {s}"
        );
    }
    let b = scan_window(&side("llama_kv_alias", "b").windows[0]);
    let group = &b.alias_groups[0];
    assert_eq!(
        group.conflicts,
        vec![(
            "layers.0.k_cache_write#1".to_string(),
            "layers.0.k_cache_read#1".to_string()
        )]
    );
    assert_eq!(group.members[0].stride, vec![64, 2048, 1]);
    assert_eq!(group.members[1].stride, vec![128, 64, 1]);
}

#[test]
fn kv_alias_first_divergence_is_the_cache_read() {
    let report = diff(
        &side("llama_kv_alias", "a").windows,
        &side("llama_kv_alias", "b").windows,
        &Tolerances::default(),
    );
    let first = report.windows[0].first().unwrap();
    assert_eq!(first.key, "layers.0.k_cache_read#1");
    assert_eq!(
        Some(first.key.as_str()),
        expected("llama_kv_alias")["first_divergence"].as_str()
    );
    assert_eq!(first.comparison.verdict, Verdict::Magnitude);
    // The write just before it carries the right values, only to the wrong places.
    let write = report.windows[0]
        .pairs
        .iter()
        .find(|p| p.key == "layers.0.k_cache_write#1")
        .unwrap();
    assert_eq!(write.comparison.verdict, Verdict::Agree);
}

#[test]
fn chunked_prefill_decode_step_agrees_with_whole_prefill() {
    let report = diff(
        &side("llama_chunked_prefill", "a").windows,
        &side("llama_chunked_prefill", "b").windows,
        &Tolerances::default(),
    );
    let w = &report.windows[0];
    assert_eq!((w.a.occurrence, w.b.occurrence), (2, 4));
    assert_eq!(w.pairs.len(), 119);
    assert!(w.only_a.is_empty() && w.only_b.is_empty());
    assert_eq!(w.first_divergence, None);
    // Identity reads the row map, which holds the forward's own rows: the decode step's one
    // token (position 12; the metadata's token_ids list all 13 ids of the request so far).
    assert_eq!(w.identity, Identity::Same { tokens: 1 });
    assert!(!report.found_something());
    // Tighter than the screen: the largest relative difference of any statistic is below 1e-4.
    let worst = w
        .pairs
        .iter()
        .flat_map(|p| &p.comparison.stats)
        .filter_map(|d| d.rel_diff)
        .fold(0.0, f64::max);
    assert!(worst < 1e-4, "{worst}");
}

#[test]
fn graph_capture_is_missing_data_not_agreement() {
    let (a, b) = (
        side("llama_eager_vs_graph", "a"),
        side("llama_eager_vs_graph", "b"),
    );
    let report = diff(&a.windows, &b.windows, &Tolerances::default());
    let w = &report.windows[0];
    assert_eq!((w.a.records, w.b.records), (119, 8));
    assert_eq!(w.pairs.len(), 8);
    assert_eq!(w.only_a.len(), 111);
    assert!(w.only_b.is_empty());
    assert_eq!(w.first_divergence, None);
    assert!(
        w.missing_data
            .as_deref()
            .unwrap()
            .starts_with("MISSING DATA: B holds 8 records against 119")
    );
    let row = &report.table[&0];
    assert_eq!(row.iter().filter(|&&c| c == Cell::Agrees).count(), 8);
    assert_eq!(row.iter().filter(|&&c| c == Cell::Missing).count(), 111);
}

#[test]
fn minilm_fp32_vs_bf16_agrees_until_the_final_embedding() {
    let report = diff(
        &side("minilm_fp32_vs_bf16", "a").windows,
        &side("minilm_fp32_vs_bf16", "b").windows,
        &Tolerances::default(),
    );
    let w = &report.windows[0];
    assert_eq!(w.pairs.len(), 39);
    assert_eq!(w.precision_changes, 39);
    let first = w.first().unwrap();
    assert_eq!(first.key, "sentence_embedding#1");
    let max = first
        .comparison
        .stats
        .iter()
        .find(|d| d.name == "max")
        .unwrap();
    assert!(max.exceeds);
    assert!(
        (max.rel_diff.unwrap() - 1.05e-2).abs() < 1e-4,
        "{:?}",
        max.rel_diff
    );
    assert_eq!(
        w.pairs
            .iter()
            .filter(|p| p.comparison.verdict.diverges())
            .count(),
        1
    );
}

#[test]
fn different_token_ids_are_an_identity_mismatch() {
    let a = side("llama_kv_alias", "a");
    let mut b = side("llama_kv_alias", "a");
    let ids = b.windows[0]
        .metadata
        .get_mut("token_ids")
        .unwrap()
        .as_array_mut()
        .unwrap();
    ids[5] = serde_json::json!(7);
    // The row map holds the same ids (the window's one request, positions 0..=11), and
    // identity reads it first: B's input is changed there too, as a probe would record it.
    let rows = std::sync::Arc::make_mut(b.windows[0].token_rows.as_mut().unwrap());
    assert_eq!(rows.map.len(), 1);
    let row_ids = rows.map[0].token_ids.as_mut().unwrap();
    assert_eq!(row_ids.len(), 12);
    row_ids[5] = 7;
    let report = diff(&a.windows, &b.windows, &Tolerances::default());
    assert_eq!(
        report.windows[0].identity,
        Identity::Different {
            tokens_a: 12,
            tokens_b: 12,
            first_difference: 5
        }
    );
    assert!(report.found_something());
    // B without token ids: none in its metadata and no row map (whose ids a window without
    // metadata ids is read by).
    b.windows[0].metadata.remove("token_ids");
    b.windows[0].token_rows = None;
    let report = diff(&a.windows, &b.windows, &Tolerances::default());
    assert_eq!(
        report.windows[0].identity,
        Identity::MissingOnOneSide { side: 'b' }
    );
    assert!(report.found_something());
}
