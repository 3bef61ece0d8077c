//! diff across parallel layouts on the real TP=1 / TP=2 gloo captures of
//! tests/fixtures/layouts/ (make_layouts_fixture.py): merged pairing, planted bugs found at the
//! right stage, replicated checks, partial sums, missing shards.

mod support;

use dumpview::model::analysis::compare::{ExclusionKind, Tolerances, Verdict};
use dumpview::model::analysis::diff::diff;
use dumpview::model::dump::Shard;
use support::layouts::{across, capture, dir};
use support::run::text as dumpview;

const STAGES: [&str; 10] = [
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
];

#[test]
fn the_reader_reads_layout_and_annotations() {
    let tp2 = capture("tp2");
    assert_eq!(tp2.windows.len(), 2);
    let w = &tp2.windows[1];
    assert_eq!(w.parallel().unwrap()["tp"], (1, 2));
    let up = w.records.iter().find(|r| r.stage == "layers.0.up").unwrap();
    assert_eq!(
        up.shard.as_ref().map(Shard::to_string).as_deref(),
        Some("tp:1")
    );
    let down = w
        .records
        .iter()
        .find(|r| r.stage == "layers.0.down")
        .unwrap();
    assert_eq!(down.collective.as_deref(), Some("all_reduce"));
    assert_eq!(
        down.shard.as_ref().map(Shard::to_string).as_deref(),
        Some("replicated:tp")
    );
}

#[test]
fn tp1_against_tp2_pairs_the_merged_stages_and_every_one_agrees() {
    let report = across("tp1", "tp2");
    let layouts = report
        .layouts
        .as_ref()
        .expect("different tp sizes are merged");
    assert_eq!(layouts.axes, ["tp"]);
    assert_eq!(layouts.sizes["tp"], (1, 2));
    assert!(layouts.a.groups.is_empty(), "a group of one is not merged");
    let g = &layouts.b.groups[0];
    assert_eq!(
        (g.size, g.ranks.clone(), g.logical_rank),
        (2, vec![0, 1], 0)
    );
    assert_eq!((g.merged, g.replicated), (4, 6));
    assert!(g.warnings.is_empty() && g.missing_ranks.is_empty(), "{g:?}");

    assert_eq!(
        report.windows.len(),
        1,
        "rank 1 is part of rank 0's merged window"
    );
    assert!(report.unpaired_b.is_empty());
    let w = &report.windows[0];
    let keys: Vec<&str> = w.pairs.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, STAGES);
    for p in &w.pairs {
        assert_eq!(p.comparison.verdict, Verdict::Agree, "{}", p.key);
        assert_eq!(
            p.shape_a, p.shape_b,
            "{}: the merged shape is the full shape",
            p.key
        );
    }
    let merged: Vec<&str> = w
        .pairs
        .iter()
        .filter(|p| p.merged())
        .map(|p| p.key.as_str())
        .collect();
    assert_eq!(
        merged,
        [
            "layers.0.up#1",
            "layers.0.up_heads#1",
            "layers.0.act#1",
            "layers.0.down_partial#1"
        ]
    );
    assert_eq!(w.first_divergence, None);
    // The merged group is one logical rank: no "configuration differs: parallel" beside the
    // layouts line that says what was merged.
    assert!(
        w.metadata_differences
            .iter()
            .all(|d| !d.starts_with("parallel")),
        "{:?}",
        w.metadata_differences
    );
    assert!(report.replicated.is_empty());
    assert!(!report.found_something());

    // The merged statistics equal the unsharded run's: float64 sums of 96 elements.
    let up = &w.pairs[3];
    assert_eq!(up.shape_b.to_vec(), vec![6, 16]);
    assert_eq!(
        up.pieces_b.iter().map(|p| p.rank).collect::<Vec<_>>(),
        [0, 1]
    );
    assert_eq!(up.pieces_b[1].shape, [6, 8]);
    assert!(
        up.pieces_b[1]
            .source
            .ends_with("tp2/rank1/match1-occ1/manifest.json")
    );
    for d in &up.comparison.stats {
        let (a, b) = (d.a.unwrap(), d.b.unwrap());
        assert!(
            (a - b).abs() <= 1e-12 * a.abs().max(1.0),
            "{}: {a} vs {b}",
            d.name
        );
    }
    let heads = &w.pairs[4];
    assert_eq!(
        heads.shape_b.to_vec(),
        vec![6, 4, 4],
        "a middle-dim (heads) shard merges back"
    );
}

#[test]
fn a_partial_sum_is_compared_on_mean_and_checksum_only() {
    let report = across("tp1", "tp2");
    let partial = &report.windows[0].pairs[6];
    assert_eq!(partial.key, "layers.0.down_partial#1");
    let excluded: Vec<&str> = partial
        .comparison
        .stats
        .iter()
        .filter(|d| {
            d.excluded
                .as_ref()
                .is_some_and(|e| e.kind == ExclusionKind::Partial)
        })
        .map(|d| d.name)
        .collect();
    assert_eq!(excluded, ["max_abs", "min", "max", "l2"]);
    let compared: Vec<(&str, f64, f64)> = partial
        .comparison
        .stats
        .iter()
        .filter(|d| d.excluded.is_none())
        .map(|d| (d.name, d.a.unwrap(), d.b.unwrap()))
        .collect();
    assert_eq!(
        compared.iter().map(|c| c.0).collect::<Vec<_>>(),
        ["mean", "pos_checksum"]
    );
    for (name, a, b) in compared {
        assert!((a - b).abs() <= 1e-12, "{name}: {a} vs {b}");
    }
    let text = dumpview::model::present::diff::text(&report);
    assert!(
        text.contains("partial sums: 1 pair compared on mean and pos_checksum only"),
        "{text}"
    );
    assert!(
        text.contains("tp group of 2 (ranks 0, 1) merged as rank 0: 4 stages merged"),
        "{text}"
    );
}

#[test]
fn a_wrong_weight_shard_on_rank_1_is_the_first_divergence_at_up() {
    let report = across("tp1", "tp2_wrong_shard");
    let w = &report.windows[0];
    let first = w.first().unwrap();
    assert_eq!(first.key, "layers.0.up#1");
    assert_eq!(first.comparison.verdict, Verdict::Magnitude);
    assert_eq!(first.pieces_b.len(), 2);
    // Everything before it agrees, including the replicated input of the projection.
    assert!(
        w.pairs[..3]
            .iter()
            .all(|p| p.comparison.verdict == Verdict::Agree)
    );
    assert!(report.replicated.is_empty());
    assert!(report.found_something());
}

#[test]
fn a_replicated_norm_weight_that_differs_on_rank_1_is_the_replicated_finding() {
    let report = across("tp1", "tp2_bad_norm");
    let findings: Vec<String> = report.replicated.iter().map(|f| f.describe()).collect();
    assert_eq!(
        findings,
        [
            "replicated tensor differs across tp ranks 0 and 1 at layers.0.norm_weight \
             (magnitude: max_abs by 4.633e-1, replica bound 1.695e-15)",
            "replicated tensor differs across tp ranks 0 and 1 at layers.0.input_norm \
             (magnitude: max_abs by 6.828e-1, replica bound 3.330e-15)",
        ]
    );
    assert!(report.replicated.iter().all(|f| f.side == 'b'));
    // Rank 0's record stands for the group: the merged diff sees the bug where rank 1's
    // wrong norm first reaches a merged stage.
    assert_eq!(report.windows[0].first().unwrap().key, "layers.0.up#1");
    let text = dumpview::model::present::diff::text(&report);
    assert!(text.contains(
        "REPLICATED TENSOR DIFFERS in B: replicated tensor differs across tp ranks 0 and 1 at layers.0.norm_weight"
    ), "{text}");

    // The same check in a same-layout diff, which stays rank by rank.
    let same = across("tp2", "tp2_bad_norm");
    assert!(same.layouts.is_none());
    assert_eq!(same.windows.len(), 2);
    assert_eq!(
        same.windows[1].first().unwrap().key,
        "layers.0.norm_weight#1"
    );
    assert_eq!(same.replicated.len(), 2);
}

#[test]
fn same_layout_diffs_stay_rank_by_rank() {
    let report = across("tp2", "tp2_wrong_shard");
    assert!(report.layouts.is_none());
    assert_eq!(report.windows.len(), 2);
    // Rank 0 is right until rank 1's wrong slice reaches it through the all_reduce.
    assert_eq!(report.windows[0].first().unwrap().key, "layers.0.down#1");
    let first = report.windows[1].first().unwrap();
    assert_eq!(
        (first.key.as_str(), report.first_rank),
        ("layers.0.up#1", Some(1))
    );
    assert!(first.pieces_b.is_empty());
}

#[test]
fn a_rank_missing_from_the_group_leaves_its_sharded_stages_missing_evidence() {
    let a = capture("tp1");
    let mut b = capture("tp2");
    b.windows.retain(|w| w.rank == 0);
    let report = diff(&a.windows, &b.windows, &Tolerances::default());
    let g = &report.layouts.as_ref().unwrap().b.groups[0];
    assert_eq!(g.missing_ranks, [1]);
    assert_eq!(g.warnings.len(), 4);
    assert!(
        g.warnings[0]
            .starts_with("layers.0.up#1: tp:1 but tp rank 1 of 2 not captured: missing evidence"),
        "{}",
        g.warnings[0]
    );
    let w = &report.windows[0];
    assert_eq!(
        w.only_a,
        [
            "layers.0.up#1",
            "layers.0.up_heads#1",
            "layers.0.act#1",
            "layers.0.down_partial#1"
        ]
    );
    assert_eq!(w.pairs.len(), 6);
    assert!(report.found_something());
}

#[test]
fn shards_that_do_not_add_up_are_named_with_stage_and_ranks() {
    let a = capture("tp1");
    let mut b = capture("tp2");
    // Rank 1's `act` loses a column: the equal split no longer adds up.
    let act = b.windows[1]
        .records
        .iter_mut()
        .find(|r| r.stage == "layers.0.act")
        .unwrap();
    act.shape = dumpview::model::dump::dims(&[6, 7]);
    let report = diff(&a.windows, &b.windows, &Tolerances::default());
    let warnings = &report.layouts.as_ref().unwrap().b.groups[0].warnings;
    assert_eq!(
        warnings,
        &[
            "layers.0.act#1: an equal split of 2 needs equal local sizes along dimension 1, got [8, 7] (ranks 0, 1)"
        ]
    );
    assert_eq!(report.windows[0].only_a, ["layers.0.act#1"]);
}

#[test]
fn a_nan_planted_on_rank_1_before_the_all_reduce_originates_there_and_rank_0_is_propagated() {
    use dumpview::model::analysis::ranks::first_nonfinite_across;
    let across = first_nonfinite_across(&capture("tp2_nan").windows);
    assert_eq!(across.len(), 1);
    let x = &across[0];
    assert_eq!(
        (x.label.as_str(), x.ranks.clone()),
        ("req-layouts", vec![0, 1])
    );
    assert_eq!(
        (x.origin_key.as_str(), x.origin_position),
        ("layers.0.act#1", 5)
    );
    assert_eq!(x.origin_ranks, [1]);
    let rank0 = x.firsts.iter().find(|f| f.rank == 0).unwrap();
    assert_eq!(rank0.first.key, "layers.0.down#1");
    assert_eq!(rank0.first.nan_count, 8);
    assert_eq!(rank0.propagated_via.as_deref(), Some("layers.0.down#1"));
    assert!(x.finite_ranks.is_empty());
    assert_eq!(
        x.describe(),
        "rank 1 went non-finite first, at layers.0.act#1; rank 0 propagated (non-finite from \
         layers.0.down#1, a collective)"
    );
    // A capture whose ranks are all finite has nothing to say.
    assert!(first_nonfinite_across(&capture("tp2").windows).is_empty());
}

#[test]
fn a_rank_non_finite_after_a_collective_that_came_out_finite_is_an_origin_of_its_own() {
    use dumpview::model::analysis::ranks::first_nonfinite_across;
    // TP=2, all finite, then: an inf in rank 0's up (a mask, say), and a NaN in rank 1's
    // logits, after the all_reduce (layers.0.down), which stays finite on both ranks.
    let mut dump = capture("tp2");
    for w in &mut dump.windows {
        let stage = if w.rank == 0 { "layers.0.up" } else { "logits" };
        let record = w
            .records
            .iter_mut()
            .find(|r| r.key() == format!("{stage}#1"))
            .unwrap();
        let stats = record.stats.as_mut().unwrap();
        if w.rank == 0 {
            stats.inf_count = 1;
        } else {
            stats.nan_count = 1;
        }
    }
    let across = first_nonfinite_across(&dump.windows);
    let x = &across[0];
    assert_eq!(
        (x.origin_key.as_str(), x.origin_ranks.clone()),
        ("layers.0.up#1", vec![0])
    );
    let rank1 = x.firsts.iter().find(|f| f.rank == 1).unwrap();
    assert_eq!(rank1.first.key, "logits#1");
    assert_eq!(
        rank1.propagated_via, None,
        "the collective carried nothing to it"
    );
    assert_eq!(
        x.describe(),
        "rank 0 went non-finite first, at layers.0.up#1; rank 1 non-finite later, at logits#1, \
         not through a collective: an origin of its own"
    );
}

#[test]
fn scan_names_the_origin_rank_and_ignore_leaves_stages_out_of_scan_diff_and_report() {
    let nan = dir("tp2_nan");
    let nan = nan.to_str().unwrap();
    let (code, text, _) = dumpview(&["scan", nan]);
    assert_eq!(code, 1);
    assert!(
        text.contains("first non-finite across ranks: rank 1 went non-finite first, at layers.0.act#1; rank 0 propagated"),
        "{text}"
    );
    assert!(text.contains("   rank 0: layers.0.down#1 (shared position 7, 8 NaN, 0 inf): propagated via layers.0.down#1"));

    let (code, json, err) = dumpview(&["--json", "scan", nan, "--ignore", "act$"]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        doc["across_ranks"][0]["origin_key"],
        "layers.0.down_partial#1"
    );
    assert_eq!(
        doc["across_ranks"][0]["origin_ranks"],
        serde_json::json!([1])
    );
    let notes: Vec<&str> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        notes,
        ["--ignore \"act$\": 1 record left out of the search (stage layers.0.act)"; 2]
    );
    assert!(err.contains("note:"), "{err}");

    let tp1 = dir("tp1");
    let (code, text, _) = dumpview(&["diff", tp1.to_str().unwrap(), nan, "--ignore", "act|down"]);
    assert_eq!(code, 1);
    assert!(
        text.contains("coverage: 7 paired (2 merged over a parallel group)"),
        "{text}"
    );
    assert!(text.contains("first divergence: layers.0.out#1"), "{text}");

    let (code, md, _) = dumpview(&["report", tp1.to_str().unwrap(), nan, "--ignore", "logits"]);
    assert_eq!(code, 1);
    assert!(md.contains("## First non-finite across ranks\n\n- side B, label `req-layouts`: rank 1 went non-finite first, at layers.0.act#1"), "{md}");
    assert!(md.contains("## Ignored stages\n"), "{md}");
    assert!(
        md.contains("--ignore \"logits\": 1 record left out of the search (stage logits)"),
        "{md}"
    );

    let (code, _, err) = dumpview(&["scan", nan, "--ignore", "("]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--ignore \"(\" is not a valid regular expression"),
        "{err}"
    );
}

#[test]
fn an_uneven_tp3_split_merges_back_to_the_tp1_run() {
    let report = across("tp1", "tp3_uneven");
    let g = &report.layouts.as_ref().unwrap().b.groups[0];
    assert_eq!((g.size, g.ranks.clone(), g.merged), (3, vec![0, 1, 2], 3));
    let w = &report.windows[0];
    assert_eq!(
        w.only_a,
        ["layers.0.up_heads#1"],
        "4 heads do not split over 3 ranks"
    );
    let up = w.pairs.iter().find(|p| p.key == "layers.0.up#1").unwrap();
    assert_eq!(up.shape_b.to_vec(), vec![6, 16]);
    let shapes: Vec<Vec<u64>> = up.pieces_b.iter().map(|p| p.shape.clone()).collect();
    assert_eq!(shapes, [vec![6, 6], vec![6, 5], vec![6, 5]]);
    assert_eq!(up.shard_b.as_ref().unwrap().to_string(), "tp:1@0/16");
    for p in &w.pairs {
        assert_eq!(p.comparison.verdict, Verdict::Agree, "{}", p.key);
    }
    assert_eq!(w.first_divergence, None);
}

#[test]
fn a_cp_zigzag_split_merges_back_to_the_cp1_run() {
    let report = across("cp1", "cp2_zigzag");
    let layouts = report.layouts.as_ref().unwrap();
    assert_eq!(layouts.axes, ["cp"]);
    let w = &report.windows[0];
    let keys: Vec<&str> = w.pairs.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "embed#1",
            "layers.0.input_norm#1",
            "layers.0.norm_weight#1",
            "layers.0.up#1"
        ]
    );
    assert!(
        w.pairs
            .iter()
            .all(|p| p.comparison.verdict == Verdict::Agree)
    );
    assert_eq!(w.pairs[0].shape_b.to_vec(), vec![8, 8]);
    // The checksums of the zigzag chunks add up to the whole run's exactly (float64).
    let embed = &w.pairs[0].comparison.stats[5];
    assert!(
        (embed.a.unwrap() - embed.b.unwrap()).abs() < 1e-12,
        "{embed:?}"
    );
}

#[test]
fn an_unannotated_tp1_capture_pairs_with_the_merged_tp2_groups() {
    // A TP=1 run captured without parallel= or shard= (an older probe): its whole tensors
    // pair with the merged TP=2 records all the same.
    let mut a = capture("tp1");
    for w in &mut a.windows {
        w.metadata.remove("parallel");
        for r in &mut w.records {
            r.shard = None;
            r.collective = None;
        }
    }
    let report = diff(&a.windows, &capture("tp2").windows, &Tolerances::default());
    assert_eq!(report.layouts.as_ref().unwrap().sizes["tp"], (1, 2));
    let w = &report.windows[0];
    assert_eq!(w.pairs.len(), 10);
    assert!(
        w.pairs
            .iter()
            .all(|p| p.comparison.verdict == Verdict::Agree)
    );
    assert!(!report.found_something());
}

#[test]
fn a_missing_all_reduce_is_the_first_divergence_at_down_and_its_ranks_disagree() {
    let report = across("tp1", "tp2_no_all_reduce");
    let w = &report.windows[0];
    let first = w.first().unwrap();
    assert_eq!(first.key, "layers.0.down#1");
    assert_eq!(first.comparison.verdict, Verdict::Magnitude);
    // Everything up to the partial sums agrees: the shards were right.
    assert!(
        w.pairs[..7]
            .iter()
            .all(|p| p.comparison.verdict == Verdict::Agree)
    );
    let stages: Vec<&str> = report.replicated.iter().map(|f| f.stage.as_str()).collect();
    assert_eq!(stages, ["layers.0.down", "layers.0.out", "logits"]);
    assert_eq!(
        (report.replicated[0].rank, report.replicated[0].other_rank),
        (0, 1)
    );
}

#[test]
fn an_uneven_tp4_split_of_four_gloo_processes_merges_back_to_the_tp1_run() {
    let report = across("tp1", "tp4_uneven");
    let g = &report.layouts.as_ref().unwrap().b.groups[0];
    assert_eq!(
        (g.size, g.ranks.clone(), g.merged),
        (4, vec![0, 1, 2, 3], 3)
    );
    let w = &report.windows[0];
    assert_eq!(
        w.only_a,
        ["layers.0.up_heads#1"],
        "an uneven split has no heads view"
    );
    let up = w.pairs.iter().find(|p| p.key == "layers.0.up#1").unwrap();
    assert_eq!(up.shape_b.to_vec(), vec![6, 16]);
    let shapes: Vec<Vec<u64>> = up.pieces_b.iter().map(|p| p.shape.clone()).collect();
    assert_eq!(shapes, [vec![6, 5], vec![6, 4], vec![6, 4], vec![6, 3]]);
    for p in &w.pairs {
        assert_eq!(p.comparison.verdict, Verdict::Agree, "{}", p.key);
    }
    assert_eq!(w.first_divergence, None);
}

#[test]
fn a_nan_planted_on_rank_2_of_four_originates_there_and_the_others_are_propagated() {
    use dumpview::model::analysis::ranks::first_nonfinite_across;
    let across = first_nonfinite_across(&capture("tp4_nan").windows);
    assert_eq!(across.len(), 1);
    let x = &across[0];
    assert_eq!(x.ranks, [0, 1, 2, 3]);
    assert_eq!(
        (x.origin_key.as_str(), x.origin_ranks.clone()),
        ("layers.0.act#1", vec![2])
    );
    for rank in [0, 1, 3] {
        let f = x.firsts.iter().find(|f| f.rank == rank).unwrap();
        assert_eq!(f.first.key, "layers.0.down#1", "rank {rank}");
        assert_eq!(
            f.propagated_via.as_deref(),
            Some("layers.0.down#1"),
            "rank {rank}"
        );
    }
    assert_eq!(
        x.describe(),
        "rank 2 went non-finite first, at layers.0.act#1; rank 0 propagated (non-finite from \
         layers.0.down#1, a collective); rank 1 propagated (non-finite from layers.0.down#1, a \
         collective); rank 3 propagated (non-finite from layers.0.down#1, a collective)"
    );
}
