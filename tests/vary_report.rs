//! vary and report on the real example dumps.

use std::path::{Path, PathBuf};

use dumpview::model::analysis::Analysis;
use dumpview::model::analysis::compare::Tolerances;
use dumpview::model::analysis::report::Report;
use dumpview::model::analysis::vary::{DEFAULT_THRESHOLD, vary};
use dumpview::model::dump::Dump;
use dumpview::model::ingest::load;

fn side(pair: &str, side: &str) -> Dump {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples")
        .join(pair)
        .join(side);
    load(&[path], &mut |_| {}).unwrap()
}

#[test]
fn identical_captures_do_not_vary() {
    let a = side("llama_fp16_overflow", "a").windows;
    let report = vary(&[a.clone(), a.clone(), a], 0.0);
    assert_eq!(report.captures, 3);
    assert_eq!(report.ranks[0].first_variable, None);
    assert!(
        report.ranks[0]
            .stages
            .iter()
            .all(|s| s.variability == 0.0 && s.present_in == 3)
    );
}

#[test]
fn chunked_and_whole_prefill_vary_only_by_float_noise() {
    let (a, b) = (
        side("llama_chunked_prefill", "a").windows,
        side("llama_chunked_prefill", "b").windows,
    );
    let report = vary(&[a.clone(), b.clone()], DEFAULT_THRESHOLD);
    assert_eq!(report.ranks[0].first_variable, None);
    let largest = report.ranks[0]
        .stages
        .iter()
        .map(|s| s.variability)
        .fold(0.0, f64::max);
    assert!(largest > 0.0 && largest < 1e-6, "{largest}");
    // Below float noise, the first stage that moves at all is the attention over the cache.
    let strict = vary(&[a, b], 1e-7);
    let first = &strict.ranks[0].stages[strict.ranks[0].first_variable.unwrap()];
    assert_eq!(first.key, "layers.0.attn#1");
}

#[test]
fn an_intermittent_change_is_the_first_variable_stage() {
    let a = side("llama_kv_alias", "a").windows;
    let mut flaky = a.clone();
    let record = flaky[0]
        .records
        .iter_mut()
        .find(|r| r.key() == "layers.2.mlp_act#1")
        .unwrap();
    let stats = record.stats.as_mut().unwrap();
    stats.max = stats.max.map(|m| m * 1.5);
    stats.max_abs = stats.max_abs.map(|m| m.max(stats.max.unwrap().abs()));
    let report = vary(&[a.clone(), flaky, a], DEFAULT_THRESHOLD);
    let rank = &report.ranks[0];
    let first = &rank.stages[rank.first_variable.unwrap()];
    assert_eq!(first.key, "layers.2.mlp_act#1");
    assert!(first.worst == "max" || first.worst == "max_abs");
    assert!(report.found_something());
}

#[test]
fn report_names_inputs_findings_and_evidence() {
    let (a, b) = (
        side("llama_fp16_overflow", "a"),
        side("llama_fp16_overflow", "b"),
    );
    let analysis = Analysis::compute(&a, Some(&b), &Tolerances::default());
    let report = Report::build(&a, Some(&b), &analysis);
    assert!(report.found_something());
    let w = &report.windows[0];
    assert_eq!(
        w.first_divergence.as_ref().unwrap().key,
        "layers.3.mlp_up#1"
    );
    assert_eq!((w.paired, w.only_a, w.only_b), (119, 0, 0));
    let b_first = report.nonfinite.iter().find(|n| n.side == 'b').unwrap();
    assert_eq!(b_first.first.as_ref().unwrap().key, "layers.3.mlp_up#1");
    assert!(report.alias_suspects.is_empty());
    // Both sides saved that stage's tensor: the report points at the files.
    let tensors: Vec<&str> = report
        .evidence
        .iter()
        .filter(|e| e.what.contains("tensor"))
        .map(|e| e.path.as_str())
        .collect();
    assert_eq!(tensors.len(), 2, "{tensors:?}");
    assert!(tensors.iter().all(|p| p.ends_with("tensors/layers.3.mlp_up#1.safetensors") && Path::new(p).is_file()));
    let md = report.to_markdown();
    assert!(md.contains("- first divergence: `layers.3.mlp_up#1` (position 74, 45 diverging pairs in all): NaN/inf counts differ"));
    assert!(md.contains("DUMP_PROBE_TENSOR='^layers\\.3\\.mlp_up$'"));
    assert!(md.contains(
        "- side B, rank 0: `layers.3.mlp_up#1` (position 74): 0 NaN, 4 inf; 45 non-finite records"
    ));
}

#[test]
fn report_of_the_alias_pair_lists_the_conflicts_of_b_only() {
    let (a, b) = (side("llama_kv_alias", "a"), side("llama_kv_alias", "b"));
    let analysis = Analysis::compute(&a, Some(&b), &Tolerances::default());
    let report = Report::build(&a, Some(&b), &analysis);
    assert_eq!(report.alias_suspects.len(), 1);
    assert_eq!(report.alias_suspects[0].side, 'b');
    assert_eq!(report.alias_suspects[0].groups.len(), 6);
    let md = report.to_markdown();
    assert!(
        md.contains("`layers.0.k_cache_write#1` shape [12, 2, 64] stride [64, 2048, 1] offset 0"),
        "{md}"
    );
}

#[test]
fn report_of_a_single_capture_has_no_diff_section() {
    let b = side("llama_eager_vs_graph", "b");
    let analysis = Analysis::compute(&b, None, &Tolerances::default());
    let report = Report::build(&b, None, &analysis);
    assert!(report.windows.is_empty() && report.tolerances.is_none());
    assert!(!report.found_something());
    assert!(!report.to_markdown().contains("## First divergence"));
}
