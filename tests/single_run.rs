//! Findings from one run (`model::analysis::single_run`) and layout differences
//! (`model::analysis::layout_diff`) on the committed gloo captures of tests/fixtures/single_run:
//! each rule names its stage, ranks and records on the bad capture and stays silent on every
//! control; the answers are also checked against the fixtures' expected.json, which the
//! generator derived from the manifests with plain-Python rules.

mod support;

use std::path::PathBuf;

use dumpview::model::analysis::Analysis;
use dumpview::model::analysis::compare::Tolerances;
use dumpview::model::analysis::single_run::{Kind, SingleRun, check};
use dumpview::model::dump::Dump;
use serde_json::Value;

fn dir(scenario: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/single_run")
        .join(scenario)
}

fn load(scenario: &str) -> Dump {
    dumpview::model::ingest::load(&[dir(scenario)], &mut |_| {}).unwrap()
}

fn run(scenario: &str) -> SingleRun {
    check(&load(scenario).windows)
}

/// `(kind, key, ranks, (rank, seq) of the records)`: one finding as the tests state it.
type Answer<K> = (K, String, Vec<u32>, Vec<(u32, u64)>);

/// Every finding of `run` as an [`Answer`].
fn answers(run: &SingleRun) -> Vec<Answer<Kind>> {
    run.findings
        .iter()
        .map(|f| {
            (
                f.kind,
                f.key.clone(),
                f.ranks.clone(),
                f.records.iter().map(|r| (r.rank, r.seq)).collect(),
            )
        })
        .collect()
}

fn reasons(run: &SingleRun) -> Vec<String> {
    run.not_checked
        .iter()
        .map(|n| format!("{}: {}", n.kind.title(), n.reason))
        .collect()
}

#[test]
fn a_loader_reading_shard_0_on_every_rank_is_a_duplicate_shard_from_the_weight_on() {
    let found = run("dup_shard");
    assert_eq!(
        answers(&found),
        vec![
            (
                Kind::DuplicateShards,
                "layers.0.up.weight#1".to_string(),
                vec![0, 1],
                vec![(0, 9), (1, 9)]
            ),
            (
                Kind::DuplicateShards,
                "layers.0.up#1".to_string(),
                vec![0, 1],
                vec![(0, 11), (1, 11)]
            ),
            (
                Kind::DuplicateShards,
                "layers.0.act#1".to_string(),
                vec![0, 1],
                vec![(0, 12), (1, 12)]
            ),
        ]
    );
    let first = &found.findings[0];
    assert!(
        first.sentence.contains("every tp rank (0 and 1)"),
        "{}",
        first.sentence
    );
    assert!(
        first.sentence.contains("annotate it `replicated:tp`"),
        "{}",
        first.sentence
    );
    assert!(
        first
            .look_at
            .contains("loads or slices layers.0.up.weight's weights")
    );
    // Later duplicates point back at the first rather than at a loader of their own.
    assert!(
        found.findings[1]
            .look_at
            .starts_with("layers.0.up.weight#1 first")
    );
    // The pieces' pos_checksums differ (full-tensor coordinates): only local_checksum tells.
    let dump = load("dup_shard");
    let pieces: Vec<_> = dump
        .windows
        .iter()
        .map(|w| w.records.iter().find(|r| r.seq == 9).unwrap())
        .collect();
    let global: Vec<f64> = pieces
        .iter()
        .map(|r| r.stats.as_ref().unwrap().pos_checksum.unwrap())
        .collect();
    assert_ne!(global[0], global[1]);
    assert_eq!(pieces[0].local_checksum, pieces[1].local_checksum);
    assert!(pieces[0].local_checksum.is_some());
}

#[test]
fn correct_shards_replicas_zero_biases_tied_weights_masks_and_rotary_tables_are_silent() {
    let found = run("dup_shard_ok");
    assert_eq!(answers(&found), vec![]);
    // Both ranks and their layouts were there: nothing of the rule went unchecked.
    assert!(
        !reasons(&found)
            .iter()
            .any(|r| r.starts_with("duplicate shards")),
        "{:?}",
        reasons(&found)
    );
}

#[test]
fn without_local_checksum_or_every_rank_duplicate_shards_says_not_checked() {
    // A capture from before local_checksum (tests/fixtures/layouts was made without it).
    let layouts = check(&support::layouts::capture("tp2").windows);
    assert!(layouts.findings.is_empty());
    assert!(
        reasons(&layouts).contains(
            &"duplicate shards: 3 sliced stages without local_checksum (a probe from before it, \
              or a format without it): pos_checksum weighs pieces at the full tensor's \
              coordinates and cannot tell equal pieces"
                .to_string()
        ),
        "{:?}",
        reasons(&layouts)
    );
    // One rank of the bad tp group: the pieces cannot be compared, and it says so.
    let mut one = load("dup_shard");
    one.windows.retain(|w| w.rank == 1);
    let alone = check(&one.windows);
    assert!(alone.findings.is_empty());
    assert_eq!(
        reasons(&alone)[..2],
        [
            "duplicate shards: one rank captured: ranks cannot be compared (DUMP_PROBE_RANKS=all)",
            "silent rank: one rank captured: ranks cannot be compared (DUMP_PROBE_RANKS=all)"
        ]
    );
}

#[test]
fn global_expert_ids_leave_ranks_1_to_3_silent_although_they_received_tokens() {
    let found = run("silent_rank");
    let silent = |key: &str, seq: u64| {
        (
            Kind::SilentRank,
            key.to_string(),
            vec![1, 2, 3],
            vec![(1, seq), (2, seq), (3, seq), (0, seq)],
        )
    };
    assert_eq!(
        answers(&found),
        vec![
            silent("layers.0.experts_buffer#1", 4),
            silent("layers.0.experts#1", 5),
            silent("layers.0.moe_partial#1", 6),
        ]
    );
    let first = &found.findings[0];
    assert!(
        first
            .sentence
            .contains("(rank 1: 1 received; rank 2: 3 received; rank 3: 1 received)"),
        "{}",
        first.sentence
    );
    assert!(
        first
            .look_at
            .starts_with("the dispatch or routing before layers.0.experts_buffer")
    );
}

#[test]
fn ranks_that_received_no_tokens_and_idle_capacity_buffers_are_not_silent_ranks() {
    let found = run("silent_rank_ok");
    assert_eq!(answers(&found), vec![]);
    assert!(!reasons(&found).iter().any(|r| r.starts_with("silent rank")));
}

#[test]
fn ranks_whose_labels_differ_are_grouped_by_their_step() {
    let dump = load("silent_rank_dp");
    let labels: Vec<&str> = dump.windows.iter().map(|w| w.label.as_str()).collect();
    assert_eq!(labels, ["prefill", "decode"]);
    assert_eq!(
        answers(&check(&dump.windows)),
        vec![(
            Kind::SilentRank,
            "layers.0.experts#1".to_string(),
            vec![1],
            vec![(1, 2), (0, 2)]
        )]
    );
    // Without the step the two labels are two forwards of one rank each: nothing to compare.
    let mut no_step = dump.clone();
    for w in &mut no_step.windows {
        w.metadata.remove("step");
    }
    assert_eq!(answers(&check(&no_step.windows)), vec![]);
}

#[test]
fn a_buffer_not_refreshed_at_step_3_is_a_stale_output_naming_both_occurrences() {
    let found = run("stale_output");
    assert_eq!(
        answers(&found),
        vec![(
            Kind::StaleOutput,
            "layers.0.attn_out#1".to_string(),
            vec![0],
            vec![(0, 7), (0, 7), (0, 6), (0, 6)]
        )]
    );
    let f = &found.findings[0];
    let calls: Vec<u32> = f.records.iter().map(|r| r.call).collect();
    assert_eq!(calls, [3, 2, 3, 2]);
    assert!(
        f.sentence.contains("its rows moved from position 5 to 6")
            && f.sentence.contains("layers.0.q#1, changed"),
        "{}",
        f.sentence
    );
}

#[test]
fn a_stage_repeating_its_previous_occurrence_within_one_forward_is_stale() {
    let found = run("stale_output_tbo");
    assert_eq!(
        answers(&found),
        vec![(
            Kind::StaleOutput,
            "layers.0.attn_out#2".to_string(),
            vec![0],
            vec![(0, 4), (0, 2), (0, 3), (0, 1)]
        )]
    );
}

#[test]
fn repeated_tokens_constant_tables_and_zero_states_are_not_stale() {
    let found = run("stale_output_ok");
    assert_eq!(answers(&found), vec![]);
    assert!(
        !reasons(&found)
            .iter()
            .any(|r| r.starts_with("stale output"))
    );
    // One call of a label and no repeated stage: nothing earlier, said once.
    let mut first_call = load("stale_output_ok");
    first_call.windows.retain(|w| w.occurrence == 1);
    assert!(
        reasons(&check(&first_call.windows)).contains(
            &"stale output: no label has two consecutive calls captured and no stage repeats \
          within a forward: nothing earlier to compare with (DUMP_PROBE_OCCURRENCE=all)"
                .to_string()
        )
    );
}

fn diff_of(pair: &str) -> dumpview::model::analysis::diff::DiffReport {
    let (a, b) = (load(&format!("{pair}/a")), load(&format!("{pair}/b")));
    dumpview::model::analysis::diff::diff(&a.windows, &b.windows, &Tolerances::default())
}

#[test]
fn a_state_written_to_the_wrong_block_is_a_moved_write_not_the_first_divergence() {
    let report = diff_of("moved_write");
    let moved = &report.layout_differences.moved;
    assert_eq!(moved.len(), 1, "{moved:?}");
    let m = &moved[0];
    assert_eq!(
        (m.key.as_str(), m.block_a, m.block_b, m.offset_a, m.offset_b),
        ("layers.0.kv_write#1", 2, 1, 64, 32)
    );
    assert_eq!((m.table_a.clone(), m.table_b.clone()), (vec![2], vec![2]));
    assert_eq!(
        m.text,
        "same values, written elsewhere: layers.0.kv_write#1 is written to block 2 (its \
         table's 1st) in A and to block 1, not in its table [2] in B (rank 0, storage_offset \
         64 vs 32)"
    );
    // The values' first divergence is the read through the table, never the write.
    let w = &report.windows[0];
    assert_eq!(w.first().unwrap().key, "layers.0.kv_read#1");
    assert!(report.found_something());
    // An offset explained by the tables is no note either.
    assert!(
        !report
            .layout_differences
            .notes
            .iter()
            .any(|n| n.field == "storage_offset"),
        "{:?}",
        report.layout_differences.notes
    );
}

#[test]
fn blocks_allocated_in_another_order_by_each_sides_table_are_no_difference() {
    let report = diff_of("moved_write_ok");
    assert!(
        report.layout_differences.is_empty(),
        "{:?}",
        report.layout_differences
    );
    assert!(report.windows[0].first().is_none());
    assert!(!report.found_something());
    // Without the tables the same offsets are a note, grouped, never a finding.
    let (mut a, mut b) = (load("moved_write_ok/a"), load("moved_write_ok/b"));
    for w in a.windows.iter_mut().chain(b.windows.iter_mut()) {
        w.metadata.remove("block_ids");
    }
    let bare =
        dumpview::model::analysis::diff::diff(&a.windows, &b.windows, &Tolerances::default());
    assert!(bare.layout_differences.moved.is_empty());
    let notes: Vec<(&str, &str, &str, usize)> = bare
        .layout_differences
        .notes
        .iter()
        .map(|n| (n.field, n.a.as_str(), n.b.as_str(), n.count))
        .collect();
    assert_eq!(notes, [("storage_offset", "64", "32", 1)]);
    assert!(!bare.found_something());
}

/// `(kind, key, ranks, [(rank, seq)])` of expected.json's findings for `scenario`, the records
/// the generator lists (for a silent rank: the silent ranks only; for a stale output: the
/// stale record).
fn expected(scenario: &str) -> Vec<Answer<String>> {
    let text = std::fs::read_to_string(dir("expected.json")).unwrap();
    let all: Value = serde_json::from_str(&text).unwrap();
    all[scenario]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let ints = |v: &Value| -> Vec<u64> {
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap())
                    .collect()
            };
            (
                f["kind"].as_str().unwrap().to_string(),
                f["stage"].as_str().unwrap().to_string(),
                ints(&f["ranks"]).into_iter().map(|r| r as u32).collect(),
                f["records"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| {
                        (
                            r["rank"].as_u64().unwrap() as u32,
                            r["seq"].as_u64().unwrap(),
                        )
                    })
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn every_single_capture_scenario_gives_the_generators_answer() {
    for scenario in [
        "dup_shard",
        "dup_shard_ok",
        "silent_rank",
        "silent_rank_ok",
        "silent_rank_dp",
        "stale_output",
        "stale_output_tbo",
        "stale_output_ok",
        "partial_zero_ok",
        "cp_repeat_ok",
        "stale_constant_ok",
    ] {
        let found = run(scenario);
        let ours: Vec<Answer<String>> = found
            .findings
            .iter()
            .map(|f| {
                let kind = serde_json::to_value(f.kind).unwrap();
                let cited: Vec<(u32, u64)> = match f.kind {
                    Kind::DuplicateShards => f.records.iter().map(|r| (r.rank, r.seq)).collect(),
                    Kind::SilentRank => f.records[..f.records.len() - 1]
                        .iter()
                        .map(|r| (r.rank, r.seq))
                        .collect(),
                    Kind::StaleOutput => vec![(f.records[0].rank, f.records[0].seq)],
                };
                (
                    kind.as_str().unwrap().to_string(),
                    f.key.clone(),
                    f.ranks.clone(),
                    cited,
                )
            })
            .collect();
        assert_eq!(ours, expected(scenario), "{scenario}");
    }
}

#[test]
fn scan_says_the_findings_and_exits_1_and_0_on_the_controls() {
    let bad = dir("silent_rank").display().to_string();
    let (code, json, _) = support::run::json_of(support::run::output(["scan", "--json", &bad]));
    assert_eq!(code, 1);
    let findings = json["single_run"]["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 3);
    assert_eq!(findings[1]["kind"], "silent_rank");
    assert_eq!(findings[1]["key"], "layers.0.experts#1");
    assert_eq!(findings[1]["ranks"], serde_json::json!([1, 2, 3]));
    let (code, text, _) =
        support::run::text(&["scan", &dir("silent_rank_ok").display().to_string()]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("findings from one run: none\n"), "{text}");
    assert!(
        text.contains("not checked: stale output: no label has two consecutive calls captured")
    );
    let (code, text, _) = support::run::text(&["scan", &dir("stale_output").display().to_string()]);
    assert_eq!(code, 1);
    assert!(
        text.contains("STALE OUTPUT: layers.0.attn_out#1 in call 3 of \"decode\""),
        "{text}"
    );
}

#[test]
fn diff_says_the_moved_write_and_exits_1() {
    let (a, b) = (dir("moved_write/a"), dir("moved_write/b"));
    let (code, text, _) =
        support::run::text(&["diff", &a.display().to_string(), &b.display().to_string()]);
    assert_eq!(code, 1);
    assert!(
        text.contains("MOVED WRITE: same values, written elsewhere: layers.0.kv_write#1"),
        "{text}"
    );
    let (code, json, _) = support::run::json_of(support::run::output([
        "diff",
        "--json",
        &a.display().to_string(),
        &b.display().to_string(),
    ]));
    assert_eq!(code, 1);
    assert_eq!(json["diff"]["layout_differences"]["moved"][0]["block_b"], 1);
}

#[test]
fn the_analysis_carries_the_findings_of_each_capture() {
    let dump = load("dup_shard");
    let analysis = Analysis::compute(&dump, None, &Tolerances::default());
    assert_eq!(analysis.single_run_a.findings.len(), 3);
    assert!(analysis.found_something());
    let ok = load("dup_shard_ok");
    let both = Analysis::compute(&ok, Some(&dump), &Tolerances::default());
    assert!(both.single_run_a.findings.is_empty());
    assert_eq!(both.single_run_b.findings.len(), 3);
}

#[test]
fn the_report_has_the_findings_from_one_run_and_the_layout_differences() {
    let out = tempfile::tempdir().unwrap();
    let md = out.path().join("stale.md");
    let (code, _, err) = support::run::text(&[
        "report",
        &dir("stale_output").display().to_string(),
        "-o",
        &md.display().to_string(),
    ]);
    assert_eq!(code, 1, "{err}");
    let text = std::fs::read_to_string(&md).unwrap();
    let section = text
        .split("## Findings from one run\n\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        section
            .starts_with("- side A: **stale output**: layers.0.attn_out#1 in call 3 of \"decode\""),
        "{section}"
    );
    let md = out.path().join("moved.md");
    let (code, _, err) = support::run::text(&[
        "report",
        &dir("moved_write/a").display().to_string(),
        &dir("moved_write/b").display().to_string(),
        "-o",
        &md.display().to_string(),
    ]);
    assert_eq!(code, 1, "{err}");
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(
        text.contains(
            "## Layout differences\n\n- MOVED WRITE: same values, written elsewhere: \
             layers.0.kv_write#1"
        ),
        "{text}"
    );
}

#[test]
fn a_step_that_does_not_read_and_ranks_that_never_meet_say_not_checked() {
    let mut dump = load("silent_rank_dp");
    dump.windows[1]
        .metadata
        .insert("step".into(), Value::String("x".into()));
    let found = check(&dump.windows);
    assert_eq!(answers(&found), vec![]);
    let reasons = reasons(&found);
    assert!(
        reasons.contains(
            &"silent rank: 1 window declares a metadata step that is not a non-negative \
              integer: grouped by label and call instead (arm(..., step=N))"
                .to_string()
        ),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(
            &"silent rank: no forward was captured on two ranks: the ranks' windows share no \
              label and call and declare no common step (arm(..., step=N) where labels differ)"
                .to_string()
        ),
        "{reasons:?}"
    );
}

#[test]
fn an_unusable_block_table_is_said_and_a_write_moved_within_its_block_is_named() {
    let (a, mut b) = (load("moved_write/a"), load("moved_write/b"));
    b.windows[0]
        .metadata
        .insert("block_numel".into(), Value::from(0));
    let report =
        dumpview::model::analysis::diff::diff(&a.windows, &b.windows, &Tolerances::default());
    let d = &report.layout_differences;
    assert!(d.moved.is_empty());
    assert_eq!(
        d.unusable_tables,
        [
            "B rank 0 \"req-0\" call 1: block_numel 0 is not a positive integer; its offsets are \
          compared as they are"
        ]
    );
    assert!(d.notes.iter().any(|n| n.field == "storage_offset"));
    // B writes the right block of its table, four elements in: moved within the block.
    let (a, mut b) = (load("moved_write_ok/a"), load("moved_write_ok/b"));
    let write = b.windows[0]
        .records
        .iter_mut()
        .find(|r| r.key() == "layers.0.kv_write#1")
        .unwrap();
    write.storage_offset += 4;
    let report =
        dumpview::model::analysis::diff::diff(&a.windows, &b.windows, &Tolerances::default());
    let moved = &report.layout_differences.moved;
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(
        moved[0].text,
        "same values, written elsewhere: layers.0.kv_write#1 is written to block 2 (its \
         table's 1st) at element 0 of it in A and to block 1 (its table's 1st) at element 4 of \
         it in B (rank 0, storage_offset 64 vs 36)"
    );
}

#[test]
fn zero_partial_sums_equal_cp_pieces_and_constants_are_no_findings() {
    // A vocabulary-parallel embedding whose prompt falls in rank 0's half: rank 1's partial
    // sum is zero with rows mapped to it, and only a received count could judge it.
    let partial = run("partial_zero_ok");
    assert_eq!(answers(&partial), vec![]);
    assert!(reasons(&partial).contains(
        &"silent rank: 1 partial sum exactly zero on a rank without a declared received count: \
          a rank's share of a sum may be zero by design, so only capture(..., received=N) tells"
            .to_string()
    ));
    // A repeated prompt split over cp ranks: equal pieces, equal local checksums, no finding.
    let dump = load("cp_repeat_ok");
    let embeds: Vec<_> = dump
        .windows
        .iter()
        .map(|w| w.records.iter().find(|r| r.key() == "embed#1").unwrap())
        .collect();
    assert_eq!(embeds[0].local_checksum, embeds[1].local_checksum);
    assert_eq!(answers(&check(&dump.windows)), vec![]);
    // A bias broadcast over the rows and a greedy one-hot, identical in all four calls.
    assert_eq!(answers(&run("stale_constant_ok")), vec![]);
}

#[test]
fn graph_records_are_left_out_of_stale_outputs_and_said() {
    let mut dump = load("stale_output");
    for w in &mut dump.windows {
        for r in w
            .records
            .iter_mut()
            .filter(|r| r.key() == "layers.0.attn_out#1")
        {
            r.mode = dumpview::model::dump::Mode::Graph;
        }
    }
    let found = check(&dump.windows);
    assert_eq!(answers(&found), vec![]);
    assert!(
        reasons(&found).contains(
            &"stale output: 3 graph records keep only their last replay: not compared with an \
          earlier one"
                .to_string()
        )
    );
}
