//! Pipeline and data parallel layouts on the gloo captures of tests/fixtures/layouts/
//! (make_layouts_fixture.py): pp ranks' stages concatenated in pp order into one logical
//! window and paired stage by stage with the unpipelined run; dp ranks kept as separate
//! windows, compared rank by rank, with tp merged inside each dp rank.

mod support;

use dumpview::model::analysis::compare::{Tolerances, Verdict};
use dumpview::model::analysis::diff::{DiffReport, diff};
use dumpview::model::dump::Window;
use support::layouts::capture;

fn across(a: &[Window], b: &[Window]) -> DiffReport {
    diff(a, b, &Tolerances::default())
}

const PP_STAGES: [&str; 12] = [
    "embed#1",
    "layers.0.input_norm#1",
    "layers.0.up#1",
    "layers.0.act#1",
    "layers.0.down#1",
    "layers.0.out#1",
    "layers.1.input_norm#1",
    "layers.1.up#1",
    "layers.1.act#1",
    "layers.1.down#1",
    "layers.1.out#1",
    "logits#1",
];

#[test]
fn pp2_stages_are_concatenated_in_pp_order_and_pair_stage_by_stage_with_pp1() {
    let report = across(&capture("pp1").windows, &capture("pp2").windows);
    let layouts = report.layouts.as_ref().unwrap();
    assert_eq!(layouts.axes, ["pp"]);
    assert_eq!(layouts.sizes["pp"], (1, 2));
    let g = &layouts.b.groups[0];
    assert_eq!(
        (
            g.axis.as_str(),
            g.ranks.clone(),
            g.concatenated,
            g.logical_rank
        ),
        ("pp", vec![0, 1], 6, 0)
    );
    assert!(g.warnings.is_empty() && g.missing_ranks.is_empty());
    assert_eq!(report.windows.len(), 1);
    let w = &report.windows[0];
    let keys: Vec<&str> = w.pairs.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, PP_STAGES);
    assert!(w.only_a.is_empty() && w.only_b.is_empty());
    for p in &w.pairs {
        assert_eq!(p.comparison.verdict, Verdict::Agree, "{}", p.key);
        // The hidden state crossed dist.send / dist.recv exactly.
        for d in &p.comparison.stats {
            assert_eq!(d.abs_diff, Some(0.0), "{} {}", p.key, d.name);
        }
    }
    // Each of pp rank 1's stages names its file; none counts as merged from pieces.
    let from: Vec<(&str, u32)> = w
        .pairs
        .iter()
        .filter_map(|p| p.pieces_b.first().map(|x| (p.key.as_str(), x.rank)))
        .collect();
    assert_eq!(from.len(), 6);
    assert_eq!(from[0], ("layers.1.input_norm#1", 1));
    assert!(w.pairs.iter().all(|p| !p.merged()));
    assert!(!report.found_something());
    let text = dumpview::model::present::diff::text(&report);
    assert!(
        text.contains(
            "parallel layouts differ: pp 1 in A vs 2 in B: the pp ranks' stages are concatenated \
             in pp order into one logical window\n   B: pp group of 2 (ranks 0, 1) concatenated in \
             pp order as rank 0: 6 records from the later pp ranks after rank 0's"
        ),
        "{text}"
    );
}

#[test]
fn a_bug_on_pp_rank_1_is_found_at_its_stage() {
    let report = across(&capture("pp1").windows, &capture("pp2_bad_stage").windows);
    let w = &report.windows[0];
    let first = w.first().unwrap();
    assert_eq!(
        (
            first.key.as_str(),
            first.position,
            first.comparison.verdict.name()
        ),
        ("layers.1.up#1", 7, "magnitude")
    );
    // Its record came from pp rank 1's file; pp rank 0's stages all agree.
    assert_eq!(first.pieces_b.len(), 1);
    assert_eq!(first.pieces_b[0].rank, 1);
    assert!(
        first.pieces_b[0]
            .source
            .ends_with("pp2_bad_stage/rank1/match1-occ1/manifest.json")
    );
    assert!(
        w.pairs[..7]
            .iter()
            .all(|p| p.comparison.verdict == Verdict::Agree)
    );
    assert_eq!(
        w.pairs
            .iter()
            .filter(|p| p.comparison.verdict.diverges())
            .count(),
        5,
        "layers.1.up, act, down, out and logits"
    );
    let text = dumpview::model::present::diff::text(&report);
    assert!(
        text.contains("   B captured on: rank 1 [6, 16] ("),
        "{text}"
    );
}

#[test]
fn a_pp_rank_not_captured_leaves_its_stages_missing_evidence() {
    let mut b = capture("pp2");
    b.windows.retain(|w| w.rank == 1);
    let report = across(&capture("pp1").windows, &b.windows);
    let g = &report.layouts.as_ref().unwrap().b.groups[0];
    assert_eq!(
        (g.missing_ranks.clone(), g.ranks.clone()),
        (vec![0], vec![1])
    );
    let w = &report.windows[0];
    assert_eq!(w.only_a, PP_STAGES[..6]);
    assert_eq!(
        w.unmerged,
        ["B's pp group of 2 (ranks 1) could not be merged whole: pp rank 0 of 2 not captured"]
    );
    assert!(report.found_something());
}

/// `tp_name`'s windows as data parallel rank `dp` of 2: global ranks offset by `dp × n`,
/// `metadata.parallel.dp` set, a label of the dp rank's own request.
fn as_dp_rank(tp_name: &str, dp: u32) -> Vec<Window> {
    let mut windows = capture(tp_name).windows;
    let n = windows.len() as u32;
    for w in &mut windows {
        w.rank += dp * n;
        w.world_size = 2 * n;
        w.label = format!("req-dp{dp}");
        if let Some(serde_json::Value::Object(parallel)) = w.metadata.get_mut("parallel") {
            parallel.insert("dp".into(), serde_json::json!([dp, 2]));
        }
    }
    windows
}

#[test]
fn dp_ranks_stay_separate_windows_compared_rank_by_rank() {
    // A: dp=2 × tp=1 (ranks 0, 1); B: dp=2 × tp=2 (ranks 0..3), dp rank 1 with a wrong
    // weight shard. tp merges within each dp rank; the dp ranks never merge.
    let a: Vec<Window> = [as_dp_rank("tp1", 0), as_dp_rank("tp1", 1)].concat();
    let b: Vec<Window> = [as_dp_rank("tp2", 0), as_dp_rank("tp2_wrong_shard", 1)].concat();
    let report = across(&a, &b);
    let layouts = report.layouts.as_ref().unwrap();
    assert_eq!(layouts.axes, ["tp"], "dp is not merged");
    let groups: Vec<(Vec<u32>, u32)> = layouts
        .b
        .groups
        .iter()
        .map(|g| (g.ranks.clone(), g.logical_rank))
        .collect();
    assert_eq!(groups, [(vec![0, 1], 0), (vec![2, 3], 1)]);
    assert_eq!(report.windows.len(), 2, "one window per dp rank");
    let labels: Vec<(u32, &str, &str)> = report
        .windows
        .iter()
        .map(|w| (w.rank, w.a.label.as_str(), w.b.label.as_str()))
        .collect();
    assert_eq!(
        labels,
        [(0, "req-dp0", "req-dp0"), (1, "req-dp1", "req-dp1")]
    );
    assert_eq!(report.windows[0].first_divergence, None);
    assert_eq!(report.windows[1].first().unwrap().key, "layers.0.up#1");
    assert_eq!(report.first_rank, Some(1));

    // Same layout on both sides (dp=2 × tp=2): rank by rank, nothing merged.
    let same = across(&b, &[as_dp_rank("tp2", 0), as_dp_rank("tp2", 1)].concat());
    assert!(same.layouts.is_none());
    assert_eq!(same.windows.len(), 4);
    assert_eq!(
        same.first_rank,
        Some(3),
        "global rank 3 is dp 1's tp rank 1"
    );
}

#[test]
fn a_nan_carried_to_the_next_pipeline_stage_is_propagated_not_a_second_origin() {
    // pp2 with one NaN in pp rank 0's layers.0.out, so rank 1's first record (the activation
    // it received) holds it too: rank 0 is the origin, rank 1 propagated by the handoff.
    let mut windows = capture("pp2").windows;
    let plant = |w: &mut Window, stage: &str| {
        let r = w
            .records
            .iter_mut()
            .find(|r| r.stage.as_str() == stage)
            .unwrap();
        let stats = r.stats.as_mut().unwrap();
        stats.nan_count = 1;
        stats.finite_count = stats.finite_count.map(|n| n - 1);
    };
    plant(&mut windows[0], "layers.0.out");
    plant(&mut windows[1], "layers.1.input_norm");
    let across = dumpview::model::analysis::ranks::first_nonfinite_across(&windows);
    assert_eq!(across.len(), 1);
    let a = &across[0];
    assert_eq!(
        (a.origin_ranks.as_slice(), a.origin_key.as_str()),
        (&[0][..], "layers.0.out#1")
    );
    let one = a.firsts.iter().find(|f| f.rank == 1).unwrap();
    assert_eq!(
        (one.propagated_via.as_deref(), one.propagated_by),
        (Some("layers.1.input_norm#1"), Some("pipeline"))
    );
    assert!(
        a.describe().contains(
            "rank 1 propagated (non-finite from layers.1.input_norm#1, the activation pp stage 1 \
             received from the stage before)"
        ),
        "{}",
        a.describe()
    );
}
