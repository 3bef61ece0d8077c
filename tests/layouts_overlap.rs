//! Parallel groups that coincide (issue 31, item 27): a capture annotated with `tp` and `ep`
//! over the same ranks (vLLM without data parallelism), or `tp` and `dp` over the same ranks,
//! is one group of 2, not two groups of one; `ep` alone merges as `tp` does. Real gloo
//! captures of tests/fixtures/layouts/ (make_layouts_fixture.py: `moe_*`, `tp2_dp2`).

mod support;

use dumpview::model::analysis::compare::Verdict;
use dumpview::model::analysis::diff::DiffReport;
use dumpview::model::analysis::groups::{Overlap, overlapping_axes, parallel_groups};
use dumpview::model::analysis::merge::GroupMerge;
use support::layouts::{across, capture, dir};
use support::run::text as dumpview;

const MOE_STAGES: [&str; 10] = [
    "embed#1",
    "layers.0.norm_weight#1",
    "layers.0.input_norm#1",
    "layers.0.router#1",
    "layers.0.expert_up#1",
    "layers.0.expert_act#1",
    "layers.0.experts_partial#1",
    "layers.0.moe_out#1",
    "layers.0.out#1",
    "logits#1",
];

/// B's one merged group: every rank placed, nothing lost; A merged nothing.
fn one_whole_group(report: &DiffReport) -> &GroupMerge {
    let layouts = report.layouts.as_ref().expect("the layouts differ");
    assert!(layouts.a.groups.is_empty(), "{:?}", layouts.a.groups);
    assert_eq!(layouts.b.groups.len(), 1, "{:?}", layouts.b.groups);
    let g = &layouts.b.groups[0];
    assert_eq!(
        (g.size, g.ranks.clone(), g.logical_rank),
        (2, vec![0, 1], 0)
    );
    assert!(
        g.missing_ranks.is_empty()
            && g.unplaced.is_empty()
            && g.warnings.is_empty()
            && g.inconsistent.is_empty()
            && g.rows_not_merged.is_empty(),
        "{g:?}"
    );
    assert!(layouts.b.warnings("B").is_empty());
    g
}

/// One window, every stage of `stages` paired and agreeing, nothing found.
fn every_stage_agrees(report: &DiffReport, stages: &[&str]) {
    assert_eq!(report.windows.len(), 1, "rank 1 is part of rank 0's window");
    assert!(report.unpaired_a.is_empty() && report.unpaired_b.is_empty());
    let w = &report.windows[0];
    let keys: Vec<&str> = w.pairs.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, stages);
    for p in &w.pairs {
        assert_eq!(p.comparison.verdict, Verdict::Agree, "{}", p.key);
        assert_eq!(p.shape_a, p.shape_b, "{}", p.key);
    }
    assert_eq!(w.first_divergence, None);
    assert!(report.replicated.is_empty(), "{:?}", report.replicated);
    assert!(!report.found_something());
}

#[test]
fn tp_and_ep_over_the_same_ranks_are_read_as_one_group() {
    let b = capture("moe_tp2_ep2").windows;
    let tp = overlapping_axes(&b, "tp");
    assert_eq!(tp.get("ep"), Some(&Overlap::Same));
    assert_eq!(overlapping_axes(&b, "ep").get("tp"), Some(&Overlap::Same));
    // The replication check sees a tp group and an ep group, each of both ranks.
    let groups: Vec<(String, Vec<u32>)> = parallel_groups(&b)
        .iter()
        .map(|g| (g.axis.clone(), g.members.iter().map(|m| m.1.rank).collect()))
        .collect();
    assert_eq!(
        groups,
        [
            ("ep".to_string(), vec![0, 1]),
            ("tp".to_string(), vec![0, 1])
        ]
    );
    // tp × dp over 4 ranks are independent axes: the existing dp tests keep them apart.
    assert!(overlapping_axes(&capture("tp2").windows, "tp").is_empty());
}

#[test]
fn tp2_with_ep2_over_the_same_ranks_merges_as_one_group_and_agrees_with_tp1() {
    let report = across("moe_tp1_ep1", "moe_tp2_ep2");
    let layouts = report.layouts.as_ref().unwrap();
    assert_eq!(layouts.axes, ["tp", "ep"]);
    assert_eq!(layouts.sizes["ep"], (1, 2));
    let g = one_whole_group(&report);
    assert_eq!(g.axis, "tp");
    assert_eq!(g.same_group, ["ep"]);
    // expert_up, expert_act (tp:1) and experts_partial (partial:ep) merged; the replicated
    // stages over tp and over ep stand for the group.
    assert_eq!((g.merged, g.replicated), (3, 7));
    every_stage_agrees(&report, &MOE_STAGES);
    let merged: Vec<&str> = report.windows[0]
        .pairs
        .iter()
        .filter(|p| p.merged())
        .map(|p| p.key.as_str())
        .collect();
    assert_eq!(
        merged,
        [
            "layers.0.expert_up#1",
            "layers.0.expert_act#1",
            "layers.0.experts_partial#1"
        ]
    );

    let (a, b) = (dir("moe_tp1_ep1"), dir("moe_tp2_ep2"));
    let (code, text, err) = dumpview(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, 0, "{text}{err}");
    assert!(
        !text.contains("not captured") && !err.contains("not captured"),
        "{text}{err}"
    );
    assert!(!text.contains("DUMP_PROBE_RANKS"), "{text}");
    assert!(
        text.contains("B: tp group of 2 (ranks 0, 1; ep the same group) merged as rank 0"),
        "{text}"
    );
    let (code, json, _) = dumpview(&["--json", "diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, 0);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        doc["diff"]["layouts"]["b"]["groups"][0]["same_group"],
        serde_json::json!(["ep"])
    );
    assert_eq!(doc["warnings"], serde_json::json!([]));
}

#[test]
fn a_wrong_expert_weight_on_rank_1_is_the_first_divergence_at_expert_up() {
    let report = across("moe_tp1_ep1", "moe_tp2_ep2_bad_expert");
    one_whole_group(&report);
    let w = &report.windows[0];
    let first = w.first().unwrap();
    assert_eq!(first.key, "layers.0.expert_up#1");
    assert_eq!(first.comparison.verdict, Verdict::Magnitude);
    assert_eq!(first.pieces_b.len(), 2);
    assert!(
        w.pairs[..4]
            .iter()
            .all(|p| p.comparison.verdict == Verdict::Agree)
    );
    assert!(report.replicated.is_empty());
    assert!(report.found_something());

    let (a, b) = (dir("moe_tp1_ep1"), dir("moe_tp2_ep2_bad_expert"));
    let (code, text, _) = dumpview(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        text.contains("first divergence: layers.0.expert_up#1"),
        "{text}"
    );
    assert!(!text.contains("not captured"), "{text}");
}

#[test]
fn tp2_with_dp2_over_the_same_ranks_merges_as_one_group_and_agrees_with_tp1() {
    let b = capture("tp2_dp2").windows;
    assert_eq!(overlapping_axes(&b, "tp").get("dp"), Some(&Overlap::Same));
    let report = across("tp1", "tp2_dp2");
    assert_eq!(report.layouts.as_ref().unwrap().axes, ["tp"]);
    let g = one_whole_group(&report);
    assert_eq!(g.same_group, ["dp"]);
    assert_eq!((g.merged, g.replicated), (4, 6));
    every_stage_agrees(
        &report,
        &[
            "embed#1",
            "layers.0.norm_weight#1",
            "layers.0.input_norm#1",
            "layers.0.up#1",
            "layers.0.up_heads#1",
            "layers.0.act#1",
            "layers.0.down_partial#1",
            "layers.0.down#1",
            "layers.0.out#1",
            "logits#1",
        ],
    );
    let (a, b) = (dir("tp1"), dir("tp2_dp2"));
    let (code, text, err) = dumpview(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, 0, "{text}{err}");
    assert!(!text.contains("not captured"), "{text}");
}

#[test]
fn ep2_alone_merges_its_partial_sums_and_agrees_with_ep1() {
    let report = across("moe_ep1", "moe_ep2");
    let layouts = report.layouts.as_ref().unwrap();
    assert_eq!(layouts.axes, ["ep"]);
    assert_eq!(layouts.sizes["ep"], (1, 2));
    let g = one_whole_group(&report);
    assert_eq!(g.axis, "ep");
    assert!(g.same_group.is_empty());
    assert_eq!((g.merged, g.replicated), (1, 7));
    let stages: Vec<&str> = MOE_STAGES
        .iter()
        .copied()
        .filter(|k| !k.starts_with("layers.0.expert_"))
        .collect();
    every_stage_agrees(&report, &stages);
    let (a, b) = (dir("moe_ep1"), dir("moe_ep2"));
    let (code, text, err) = dumpview(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, 0, "{text}{err}");
    assert!(!text.contains("not captured"), "{text}");

    let report = across("moe_ep1", "moe_ep2_bad_expert");
    one_whole_group(&report);
    let first = report.windows[0].first().unwrap();
    assert_eq!(first.key, "layers.0.experts_partial#1");
    assert_eq!(first.pieces_b.len(), 2);
    assert!(report.found_something());
}

/// `tp_name`'s windows as data parallel rank `dp` of 2 with vLLM's expert-parallel group over
/// every dp rank's tp group (ep = dp × tp: ep rank `dp × n + tp rank` of `2n`).
fn as_dp_rank_with_ep(tp_name: &str, dp: u32) -> Vec<dumpview::model::dump::Window> {
    let mut windows = capture(tp_name).windows;
    let n = windows.len() as u32;
    for w in &mut windows {
        let tp = w.rank;
        w.rank += dp * n;
        w.world_size = 2 * n;
        w.label = format!("req-dp{dp}");
        if let Some(serde_json::Value::Object(parallel)) = w.metadata.get_mut("parallel") {
            parallel.insert("dp".into(), serde_json::json!([dp, 2]));
            parallel.insert("ep".into(), serde_json::json!([dp * n + tp, 2 * n]));
        }
    }
    windows
}

#[test]
fn an_ep_group_around_the_tp_groups_of_two_dp_ranks_splits_no_tp_group_and_is_not_merged() {
    use dumpview::model::analysis::merge::{axes_to_merge, merge_side};
    let a: Vec<_> = [as_dp_rank_with_ep("tp1", 0), as_dp_rank_with_ep("tp1", 1)].concat();
    let b: Vec<_> = [as_dp_rank_with_ep("tp2", 0), as_dp_rank_with_ep("tp2", 1)].concat();
    // B: the ep group of 4 holds both tp groups; dp is independent of tp, and ep of 4 holds
    // the dp ranks' groups too.
    let tp = overlapping_axes(&b, "tp");
    assert_eq!(tp.get("ep"), Some(&Overlap::Around));
    assert_eq!(tp.get("dp"), None, "tp × dp over 4 ranks are independent");
    assert_eq!(overlapping_axes(&b, "ep").get("tp"), Some(&Overlap::Within));
    // A: dp and ep over the same 2 ranks.
    assert_eq!(overlapping_axes(&a, "ep").get("dp"), Some(&Overlap::Same));
    // tp merges within each dp rank; the ep group spans the dp ranks' requests: not merged.
    assert_eq!(axes_to_merge(&a, &b), ["tp"]);
    let (merged, side) = merge_side(&b, &["tp"]);
    let groups: Vec<(Vec<u32>, Vec<u32>)> = side
        .groups
        .iter()
        .map(|g| (g.ranks.clone(), g.missing_ranks.clone()))
        .collect();
    assert_eq!(groups, [(vec![0, 1], vec![]), (vec![2, 3], vec![])]);
    assert!(
        side.groups
            .iter()
            .all(|g| g.warnings.is_empty() && g.same_group.is_empty())
    );
    assert_eq!(merged.len(), 2);
    // The replication check: one tp group per dp rank.
    let groups: Vec<(String, Vec<u32>)> = parallel_groups(&b)
        .iter()
        .map(|g| (g.axis.clone(), g.members.iter().map(|m| m.1.rank).collect()))
        .collect();
    assert!(
        groups.contains(&("tp".to_string(), vec![0, 1])),
        "{groups:?}"
    );
    assert!(
        groups.contains(&("tp".to_string(), vec![2, 3])),
        "{groups:?}"
    );
    // An ep group's windows of one request: each dp rank's label is its own.
    assert!(
        groups.contains(&("ep".to_string(), vec![2, 3])),
        "{groups:?}"
    );
}
