//! What a diff across parallel layouts puts first, on the gloo captures of
//! tests/fixtures/layouts/: replicas held to a near-exact bound (a shift the diff's own
//! tolerances pass is a finding), the headline naming a replicated disagreement at or before
//! the first divergence, and the report's merged pieces, partial sums and `Next:` capture.

mod support;

use dumpview::model::analysis::Analysis;
use dumpview::model::analysis::compare::{Tolerances, Verdict, compare_records};
use dumpview::model::analysis::replicated::{check, replica_tolerances};
use dumpview::model::analysis::report::Report;
use dumpview::model::dump::{Dump, Record};
use support::layouts::{across, capture, dir};
use support::run::stdout as dumpview;

fn record<'d>(dump: &'d mut Dump, rank: u32, stage: &str) -> &'d mut Record {
    dump.windows
        .iter_mut()
        .find(|w| w.rank == rank)
        .unwrap()
        .records
        .iter_mut()
        .find(|r| r.stage == stage)
        .unwrap()
}

/// Every element of rank 1's replica of `layers.0.out` shifted by `delta`: min, max and mean
/// move by `delta`, the rest as a shift moves them.
fn shifted(delta: f64) -> Dump {
    let mut tp2 = capture("tp2");
    let r = record(&mut tp2, 1, "layers.0.out");
    let s = r.stats.as_mut().unwrap();
    let n = s.finite_count.unwrap() as f64;
    let sum = s.mean.unwrap() * n;
    s.l2 = Some((s.l2.unwrap().powi(2) + 2.0 * delta * sum + n * delta * delta).sqrt());
    s.min = Some(s.min.unwrap() + delta);
    s.max = Some(s.max.unwrap() + delta);
    s.max_abs = Some(s.max.unwrap().abs().max(s.min.unwrap().abs()));
    s.mean = Some(s.mean.unwrap() + delta);
    // The weights' mean is 1/4: a shift of every element moves the checksum by about n·δ/4.
    s.pos_checksum = Some(s.pos_checksum.unwrap() + n * delta / 4.0);
    tp2
}

#[test]
fn a_shifted_float64_replica_is_a_finding_even_where_the_diff_tolerances_pass_it() {
    for (delta, stat) in [(0.3, "max_abs"), (1e-6, "max_abs"), (1e-12, "max_abs")] {
        let tp2 = shifted(delta);
        let (a, b) = (&tp2.windows[0].records[8], &tp2.windows[1].records[8]);
        assert_eq!(a.stage, "layers.0.out");
        if delta < 1e-3 {
            // The diff's coarse screen (rtol 1e-2) would call these replicas equal.
            assert_eq!(
                compare_records(a, b, &Tolerances::default()).verdict,
                Verdict::Agree,
                "{delta}"
            );
        }
        let findings = check('b', &tp2.windows);
        assert_eq!(findings.len(), 1, "{delta}: {findings:?}");
        let f = &findings[0];
        assert_eq!(
            (f.stage.as_str(), f.rank, f.other_rank, f.verdict.name()),
            ("layers.0.out", 0, 1, "magnitude")
        );
        assert_eq!(f.stat.as_deref(), Some(stat), "{delta}");
        assert!(f.abs_diff.unwrap() > f.bound.unwrap());
    }
}

#[test]
fn the_replica_bound_is_a_few_ulp_of_the_dtype_and_real_replicas_pass_it() {
    let tp2 = capture("tp2");
    let out = &tp2.windows[0].records[8];
    let t = replica_tolerances(out, out, Some("float64"));
    let u = 2f64.powi(-53);
    // min/max/max_abs: 4 ULP (8u) plus the stacking dtype's rounding (2u).
    assert_eq!((t.per_stat[0].rtol, t.per_stat[0].atol), (10.0 * u, 0.0));
    // l2: 4u·sqrt(48) relative, plus 2u.
    assert_eq!(t.per_stat[4].rtol, 4.0 * u * 48f64.sqrt() + 2.0 * u);
    // pos_checksum: 4u·sqrt(n)·Σ|x|, Σ|x| bounded by min(sqrt(n)·l2, n·max_abs).
    let s = out.stats.as_ref().unwrap();
    let sum_abs = (48f64.sqrt() * s.l2.unwrap()).min(48.0 * s.max_abs.unwrap());
    assert_eq!(t.per_stat[5].atol, 4.0 * u * 48f64.sqrt() * sum_abs);
    assert!(t.checksum_noise.is_none());
    // A bfloat16 tensor reduced in float32: extremes at 4 bfloat16 ULP, sums at float32's.
    let mut bf = out.clone();
    bf.dtype = "bfloat16".into();
    let t = replica_tolerances(&bf, &bf, Some("float64"));
    assert_eq!(t.per_stat[1].rtol, 8.0 / 256.0 + 2.0 * u);
    assert_eq!(
        t.per_stat[4].rtol,
        4.0 * 2f64.powi(-24) * 48f64.sqrt() + 2.0 * u
    );

    // One ULP of a float64 extreme is within the bound.
    let mut tp2 = capture("tp2");
    let min = &mut record(&mut tp2, 1, "layers.0.out")
        .stats
        .as_mut()
        .unwrap()
        .min;
    *min = min.map(|m| f64::from_bits(m.to_bits() + 1));
    assert!(check('b', &tp2.windows).is_empty());
    // The real replicas of every fixture, the all_reduce outputs included, pass.
    for name in [
        "tp2",
        "tp2_wrong_shard",
        "tp3_uneven",
        "cp2_zigzag",
        "tp2_nan",
    ] {
        assert!(
            check('b', &capture(name).windows).is_empty(),
            "{name}: {:?}",
            check('b', &capture(name).windows)
        );
    }
}

#[test]
fn the_headline_names_a_replicated_disagreement_before_the_first_divergence() {
    let report = across("tp1", "tp2_bad_norm");
    let h = report.headline.as_ref().unwrap();
    assert_eq!(
        (
            h.kind,
            h.key.as_str(),
            h.rank,
            h.first_divergence.as_deref()
        ),
        (
            "replicated",
            "layers.0.norm_weight#1",
            0,
            Some("layers.0.up#1")
        )
    );
    assert_eq!(
        h.text,
        "first sign: replicated tensor differs across tp ranks 0 and 1 at layers.0.norm_weight \
         (magnitude: max_abs by 4.633e-1, replica bound 1.695e-15) in B, before the first \
         divergence at layers.0.up#1 (rank 0): often the first sign of a broken collective or a \
         weight loaded differently on one rank"
    );
    let text = dumpview::model::present::diff::text(&report);
    let first_sign = text.find("first sign: replicated tensor differs").unwrap();
    let first_divergence = text.find("first divergence: layers.0.up#1").unwrap();
    assert!(first_sign < first_divergence, "{text}");

    // A skipped all_reduce: the replicas disagree at the divergence itself.
    let report = across("tp1", "tp2_no_all_reduce");
    let h = report.headline.as_ref().unwrap();
    assert_eq!(
        (h.kind, h.key.as_str(), h.first_divergence.as_deref()),
        ("replicated", "layers.0.down#1", Some("layers.0.down#1"))
    );
    assert!(
        h.text.ends_with(
            "at the first divergence itself (layers.0.down#1 on rank 0): the collective or the \
             replicas are the first thing to check"
        ),
        "{}",
        h.text
    );
    // Without a replicated disagreement the headline is the first divergence.
    let report = across("tp1", "tp2_wrong_shard");
    let h = report.headline.as_ref().unwrap();
    assert_eq!(
        (h.kind, h.key.as_str(), h.text.as_str()),
        (
            "divergence",
            "layers.0.up#1",
            "first divergence: layers.0.up#1 on rank 0 (magnitude)"
        )
    );
    assert!(across("tp1", "tp2").headline.is_none());
}

#[test]
fn json_and_the_report_carry_the_headline() {
    let (tp1, bad) = (dir("tp1"), dir("tp2_bad_norm"));
    let (tp1, bad) = (tp1.to_str().unwrap(), bad.to_str().unwrap());
    let (code, json) = dumpview(&["--json", "diff", tp1, bad]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["diff"]["headline"]["kind"], "replicated");
    assert_eq!(doc["diff"]["headline"]["key"], "layers.0.norm_weight#1");
    assert_eq!(doc["diff"]["replicated"][0]["stat"], "max_abs");

    let (code, md) = dumpview(&["report", tp1, bad]);
    assert_eq!(code, 1);
    assert!(
        md.contains(
            "**first sign: replicated tensor differs across tp ranks 0 and 1 at layers.0.norm_weight"
        ),
        "{md}"
    );
}

#[test]
fn the_report_names_the_merged_pieces_the_partial_sums_and_captures_every_rank_of_a_merged_side() {
    let (a, b) = (capture("tp1"), capture("tp2_wrong_shard"));
    let analysis = Analysis::compute_diff(&a, &b, &Tolerances::default());
    let report = Report::build(&a, Some(&b), &analysis);
    let w = &report.windows[0];
    assert_eq!(
        (w.merged_pairs, w.partial_pairs, w.partial_keys.clone()),
        (4, 1, vec!["layers.0.down_partial#1".to_string()])
    );
    let next = w.next_step.as_deref().unwrap();
    assert!(
        next.starts_with(
            "# A\nDUMP_PROBE=1 DUMP_PROBE_RANKS=0 DUMP_PROBE_TENSOR='^layers\\.0\\.up$'"
        ),
        "{next}"
    );
    assert!(
        next.contains("# B\nDUMP_PROBE=1 DUMP_PROBE_RANKS=all DUMP_PROBE_TENSOR="),
        "{next}"
    );
    let md = report.to_markdown();
    assert!(
        md.contains("- coverage: 10 paired (4 merged over a parallel group, 0 not compared)"),
        "{md}"
    );
    assert!(
        md.contains(
            "- partial sums: 1 pair compared on mean and pos_checksum only (min, max, max_abs and \
             l2 of a reduced tensor do not follow from its partial sums): `layers.0.down_partial#1`"
        ),
        "{md}"
    );
    let pieces = md
        .lines()
        .find(|l| l.starts_with("- B merged from: "))
        .unwrap();
    assert!(
        pieces.contains("rank 0 [6, 8] (`")
            && pieces.contains("tp2_wrong_shard/rank1/match1-occ1/manifest.json`)"),
        "{pieces}"
    );
    assert!(md.contains("DUMP_PROBE_RANKS=all"), "{md}");
}

#[test]
fn scan_checks_replicas_across_the_ranks_of_one_capture() {
    // One TP capture holds every rank of its group: a replica that differs (here the norm
    // weight rank 1 loaded wrong) is found without a second capture to diff against.
    let bad = dir("tp2_bad_norm");
    let (code, text) = dumpview(&["scan", bad.to_str().unwrap()]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "REPLICATED TENSOR DIFFERS: replicated tensor differs across tp ranks 0 and 1 at \
             layers.0.norm_weight (magnitude: max_abs by 4.633e-1, replica bound 1.695e-15)"
        ),
        "{text}"
    );
    let (code, json) = dumpview(&["scan", bad.to_str().unwrap(), "--json"]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let keys: Vec<&str> = doc["replicated"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["layers.0.norm_weight#1", "layers.0.input_norm#1"]);
    let (code, text) = dumpview(&["scan", dir("tp2").to_str().unwrap()]);
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("REPLICATED"), "{text}");
}

#[test]
fn a_replica_missing_or_not_annotated_on_one_rank_is_a_finding_not_a_pass() {
    let stage = "layers.0.norm_weight";
    // Not annotated on rank 1.
    let mut tp2 = capture("tp2");
    record(&mut tp2, 1, stage).shard = None;
    let findings = check('b', &tp2.windows);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(
        findings[0].describe(),
        "replicated tensor differs across tp ranks 0 and 1 at layers.0.norm_weight \
         (structural: rank 1 records it without replicated:tp)"
    );
    // Not captured on rank 1.
    let mut tp2 = capture("tp2");
    let w = tp2.windows.iter_mut().find(|w| w.rank == 1).unwrap();
    w.records.retain(|r| r.stage != stage);
    let findings = check('b', &tp2.windows);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(
        findings[0]
            .describe()
            .ends_with("(structural: not captured on rank 1)")
    );
    // Annotated on rank 1 only: the lowest rank, which stands for the group, lacks it.
    let mut tp2 = capture("tp2");
    record(&mut tp2, 0, stage).shard = None;
    let findings = check('b', &tp2.windows);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(
        findings[0]
            .describe()
            .ends_with("(structural: rank 0 records it without replicated:tp)")
    );
    // The capture as made has none.
    assert!(check('b', &capture("tp2").windows).is_empty());
}

#[test]
fn replicas_whose_statistics_accumulated_in_float64_are_held_to_float64_rounding() {
    let mut tp2 = capture("tp2");
    let r = record(&mut tp2, 0, "layers.0.norm_weight");
    r.dtype = "float32".into();
    let eager = replica_tolerances(r, r, Some("float64"));
    r.stats_path = Some("native".into());
    let native = replica_tolerances(r, r, Some("float64"));
    let mean = dumpview::model::analysis::compare::STATS
        .iter()
        .position(|s| *s == "mean")
        .unwrap();
    // u_r: float32's 2^-24 for the eager ops' float32 reduction, float64's 2^-53 for the
    // native path's float64 accumulation; the stacking term is the same.
    let ratio = eager.per_stat[mean].atol / native.per_stat[mean].atol;
    assert!((ratio / 2f64.powi(29) - 1.0).abs() < 1e-9, "{ratio}");
}

#[test]
fn the_first_non_finite_of_a_merged_side_names_the_rank_that_holds_it() {
    let (code, out) = dumpview(&[
        "diff",
        dir("tp1").to_str().unwrap(),
        dir("tp4_nan").to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("first non-finite: A none; B layers.0.act#1 on rank 2 (seq 5, 1 NaN, 0 inf)"),
        "{out}"
    );
}
