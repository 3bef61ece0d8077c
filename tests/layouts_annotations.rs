//! Bad parallel annotations in a manifest (tests/fixtures/layouts/tp2, edited): each is a
//! warning naming the file, the record and the problem, the record kept without the
//! annotation; a window that cannot be merged whole says so, in the text, `--json`
//! (`warnings` too) and the exit status.

mod support;

use std::path::{Path, PathBuf};

use dumpview::model::analysis::compare::Tolerances;
use dumpview::model::analysis::diff::diff;
use dumpview::model::dump::WarningKind;
use support::layouts::{dir as fixture, loaded};
use support::run::stdout as dumpview;

const MANIFEST: &str = "match1-occ1/manifest.json";

/// A copy of the tp2 fixture with `edit` applied to rank `rank`'s manifest text.
fn edited(rank: u32, edit: impl Fn(String) -> String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for r in 0..2 {
        let from = fixture("tp2").join(format!("rank{r}")).join(MANIFEST);
        let to = dir.path().join(format!("rank{r}")).join(MANIFEST);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        let text = std::fs::read_to_string(from).unwrap();
        std::fs::write(&to, if r == rank { edit(text) } else { text }).unwrap();
    }
    dir
}

/// Replaces the `n`-th (0-based) occurrence of `from` in `text`.
fn replace_nth(text: &str, from: &str, to: &str, n: usize) -> String {
    let at = text.match_indices(from).nth(n).unwrap().0;
    format!("{}{to}{}", &text[..at], &text[at + from.len()..])
}

#[test]
fn a_collective_that_is_not_one_of_the_names_is_dropped_with_a_warning() {
    let dir = edited(0, |t| {
        t.replace(
            "\"collective\": \"all_reduce\"",
            "\"collective\": \"bogus\"",
        )
    });
    let dump = loaded(dir.path());
    let file = dir.path().join("rank0").join(MANIFEST);
    let messages: Vec<(&Path, &str)> = dump
        .warnings
        .iter()
        .map(|w| (w.file.as_path(), w.message.as_str()))
        .collect();
    assert_eq!(
        messages,
        [(
            file.as_path(),
            "record layers.0.down#1 (seq 7): collective \"bogus\" is not one of all_reduce, \
             all_gather, reduce_scatter, all_to_all, broadcast, reduce; recorded without it"
        )]
    );
    assert_eq!(dump.warnings[0].kind, WarningKind::LostEvidence);
    let w = dump.windows.iter().find(|w| w.rank == 0).unwrap();
    let down = w
        .records
        .iter()
        .find(|r| r.stage == "layers.0.down")
        .unwrap();
    assert_eq!(down.collective, None);
    assert_eq!(down.shard.as_ref().unwrap().to_string(), "replicated:tp");
    assert_eq!(w.records.len(), 10);
}

#[test]
fn a_cp_shard_without_a_cp_group_and_an_unknown_axis_keep_their_records() {
    let dir = edited(1, |t| {
        let t = replace_nth(&t, "\"shard\": \"replicated:tp\"", "\"shard\": \"cp:0\"", 0);
        replace_nth(
            &t,
            "\"shard\": \"replicated:tp\"",
            "\"shard\": \"replicated:world\"",
            4,
        )
    });
    let dump = loaded(dir.path());
    let messages: Vec<&str> = dump.warnings.iter().map(|w| w.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "record 9 (seq 9, at byte 6339): `shard`: shard \"replicated:world\": axis \"world\" \
             is not one of tp, cp, dp, pp, ep (replicated:AXIS); the record is kept without it \
             (per rank)",
            "record embed#1 (seq 0): shard cp:0 but metadata.parallel has no cp group (arm(..., \
             parallel={\"cp\": (rank_in_group, group_size)})); recorded without the shard, per rank",
        ]
    );
    assert!(
        dump.warnings
            .iter()
            .all(|w| w.file == dir.path().join("rank1").join(MANIFEST))
    );
    let w = dump.windows.iter().find(|w| w.rank == 1).unwrap();
    assert_eq!(w.records.len(), 10, "no record is dropped");
    let logits = w.records.iter().find(|r| r.stage == "logits").unwrap();
    assert_eq!((logits.seq, logits.shard.clone()), (9, None));
    assert_eq!(w.records[0].shard, None);
}

#[test]
fn parallel_given_as_a_string_is_a_warning_and_the_window_stays_per_rank() {
    let dir = edited(0, |t| {
        t.replace("\"parallel\": {\"tp\": [0, 2]}", "\"parallel\": \"tp=2\"")
    });
    let dump = loaded(dir.path());
    let messages: Vec<&str> = dump.warnings.iter().map(|w| w.message.as_str()).collect();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert_eq!(
        messages[0],
        "metadata.parallel \"tp=2\": not an object; metadata.parallel must be an object such as \
         {\"tp\": [0, 2]}: the window is kept per rank and its records' shard annotations are \
         dropped"
    );
    assert!(
        messages.contains(
            &"records layers.0.up#1 (seq 3), layers.0.up_heads#1 (seq 4), layers.0.act#1 (seq 5): \
              shard tp:1 with no readable metadata.parallel; recorded without the shard"
        ),
        "{messages:?}"
    );
    let w = dump.windows.iter().find(|w| w.rank == 0).unwrap();
    assert!(w.records.iter().all(|r| r.shard.is_none()));
    assert_eq!(w.records.len(), 10);
}

#[test]
fn a_window_that_cannot_be_merged_says_so_and_exits_1_for_missing_evidence() {
    let (tp1, tp2_rank0) = (fixture("tp1"), fixture("tp2").join("rank0"));
    let (tp1, tp2_rank0) = (tp1.to_str().unwrap(), tp2_rank0.to_str().unwrap());
    let (code, text) = dumpview(&["diff", tp1, tp2_rank0]);
    assert_eq!(code, 1);
    assert!(!text.contains("first divergence: none"), "{text}");
    assert!(
        text.contains(
            "NOT MERGED: B's tp group of 2 (ranks 0) could not be merged whole: tp rank 1 of 2 not \
             captured; 4 stages not merged\nfirst divergence: unknown: the window could not be \
             merged whole (4 stages captured on one side only, 6 paired)"
        ),
        "{text}"
    );
    assert!(text.contains("(exit 1: missing evidence)"), "{text}");

    let (code, json) = dumpview(&["--json", "diff", tp1, tp2_rank0]);
    assert_eq!(code, 1);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["diff"]["headline"]["kind"], "unmerged");
    assert_eq!(
        doc["diff"]["windows"][0]["unmerged"][0],
        "B's tp group of 2 (ranks 0) could not be merged whole: tp rank 1 of 2 not captured; 4 \
         stages not merged"
    );
    let warnings: Vec<(&str, &str)> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["kind"].as_str().unwrap(), w["message"].as_str().unwrap()))
        .collect();
    assert_eq!(warnings.len(), 5, "{warnings:?}");
    assert_eq!(
        warnings[0],
        (
            "lost_evidence",
            "B: tp group of 2 (ranks 0): tp rank 1 not captured: its sharded stages are missing \
             evidence (capture every rank: DUMP_PROBE_RANKS=all)"
        )
    );
    assert!(warnings[1].1.starts_with(
        "B: tp group of 2 (ranks 0): not merged: layers.0.up#1: tp:1 but tp rank 1 of 2 not captured"
    ));
    assert!(
        doc["warnings"][0]["file"]
            .as_str()
            .unwrap()
            .ends_with("tp2/rank0/match1-occ1/manifest.json")
    );

    // The same through the library: the report of a whole merge has no such line.
    let whole = diff(
        &loaded(&fixture("tp1")).windows,
        &loaded(&fixture("tp2")).windows,
        &Tolerances::default(),
    );
    assert!(whole.windows[0].unmerged.is_empty() && whole.merge_warnings().is_empty());
}

/// `text` without the record line of `stage` (one record per line, as the probe writes).
fn without_record(text: String, stage: &str) -> String {
    text.lines()
        .filter(|l| !l.contains(&format!("\"stage\": \"{stage}\"")))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("},\n ]", "}\n ]")
}

#[test]
fn a_piece_the_lowest_rank_lacks_is_missing_evidence_not_dropped() {
    // Rank 0 lacks layers.0.act; rank 1 holds its tp:1 piece. Before, the merge walked rank
    // 0's records only, so the stage vanished and the diff exited 0.
    let dir = edited(0, |t| without_record(t, "layers.0.act"));
    let report = diff(
        &loaded(&fixture("tp1")).windows,
        &loaded(dir.path()).windows,
        &Tolerances::default(),
    );
    let w = &report.windows[0];
    assert_eq!(
        w.unmerged,
        ["B's tp group of 2 (ranks 0, 1) could not be merged whole: 1 stage not merged"]
    );
    let warnings: Vec<String> = report
        .merge_warnings()
        .iter()
        .map(|w| w.message.clone())
        .collect();
    assert_eq!(
        warnings,
        [
            "B: tp group of 2 (ranks 0, 1): not merged: layers.0.act#1: captured on rank 1 but not on \
          rank 0 (the group's lowest): missing evidence"
        ]
    );
    assert_eq!(report.headline.as_ref().map(|h| h.kind), Some("unmerged"));
}

#[test]
fn what_one_request_window_lost_is_told_on_that_window_alone() {
    // Two labels in one capture: req-layouts whole, req2 without rank 1.
    let dir = tempfile::tempdir().unwrap();
    let two = |src: &Path, rank: u32, relabel: bool| {
        let text = std::fs::read_to_string(src.join(format!("rank{rank}")).join(MANIFEST)).unwrap();
        if relabel {
            text.replace("\"label\": \"req-layouts\"", "\"label\": \"req2\"")
                .replace("\"match\": 1", "\"match\": 2")
        } else {
            text
        }
    };
    for (side, ranks) in [("a", vec![0]), ("b", vec![0, 1])] {
        let src = fixture(if side == "a" { "tp1" } else { "tp2" });
        for &r in &ranks {
            for (dir_name, relabel) in [("match1-occ1", false), ("match2-occ1", true)] {
                if side == "b" && r == 1 && relabel {
                    continue; // req2 has no rank 1 on B
                }
                let to = dir
                    .path()
                    .join(side)
                    .join(format!("rank{r}"))
                    .join(dir_name)
                    .join("manifest.json");
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::write(to, two(&src, r, relabel)).unwrap();
            }
        }
    }
    let report = diff(
        &loaded(&dir.path().join("a")).windows,
        &loaded(&dir.path().join("b")).windows,
        &Tolerances::default(),
    );
    let by_label: Vec<(String, usize)> = report
        .windows
        .iter()
        .map(|w| (w.b.label.clone(), w.unmerged.len()))
        .collect();
    assert_eq!(
        by_label,
        [("req-layouts".to_string(), 0), ("req2".to_string(), 1)],
        "{:?}",
        report
            .windows
            .iter()
            .map(|w| &w.unmerged)
            .collect::<Vec<_>>()
    );
}

/// tp1's or tp2's rank `rank` manifest as one rank of a pipeline: its stages prefixed by
/// `prefix`, its seqs moved by `seq_from`, and `parallel` set to `parallel`.
fn pipeline_piece(
    src: &str,
    rank: u32,
    prefix: &str,
    seq_from: u64,
    parallel: serde_json::Value,
) -> serde_json::Value {
    let text =
        std::fs::read_to_string(fixture(src).join(format!("rank{rank}")).join(MANIFEST)).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    for r in doc["records"].as_array_mut().unwrap() {
        r["stage"] = format!("{prefix}{}", r["stage"].as_str().unwrap()).into();
        r["seq"] = (r["seq"].as_u64().unwrap() + seq_from).into();
    }
    doc["metadata"]["parallel"] = parallel;
    doc
}

#[test]
fn a_tp_group_lost_inside_a_pipeline_stage_is_told_on_the_concatenated_window() {
    // A: pp=1 × tp=1, one window holding both pipeline stages. B: pp=2 × tp=2 (ranks 0..3,
    // pp stage 1 on ranks 2 and 3), with rank 3 missing. Before, the tp group of pp stage 1
    // was told on logical rank 2, which the pp concatenation had absorbed: the window read as
    // "first divergence: none".
    let dir = tempfile::tempdir().unwrap();
    let write = |path: PathBuf, doc: &serde_json::Value| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, serde_json::to_string(doc).unwrap()).unwrap();
    };
    let mut a = pipeline_piece("tp1", 0, "", 0, serde_json::json!({"tp": [0, 1]}));
    let second = pipeline_piece("tp1", 0, "p1.", 100, serde_json::json!({"tp": [0, 1]}));
    let more = second["records"].as_array().unwrap().clone();
    a["records"].as_array_mut().unwrap().extend(more);
    write(dir.path().join("a/rank0").join(MANIFEST), &a);
    for (global, (tp, pp)) in [(0, 0), (1, 0), (0, 1)].into_iter().enumerate() {
        let prefix = if pp == 0 { "" } else { "p1." };
        let mut doc = pipeline_piece(
            "tp2",
            tp,
            prefix,
            100 * pp as u64,
            serde_json::json!({"tp": [tp, 2], "pp": [pp, 2]}),
        );
        doc["rank"] = global.into();
        doc["world_size"] = 4.into();
        write(
            dir.path().join(format!("b/rank{global}")).join(MANIFEST),
            &doc,
        );
    }
    let report = diff(
        &loaded(&dir.path().join("a")).windows,
        &loaded(&dir.path().join("b")).windows,
        &Tolerances::default(),
    );
    assert_eq!(report.windows.len(), 1);
    let w = &report.windows[0];
    assert!(
        w.unmerged.iter().any(|l| l.starts_with(
            "B's tp group of 2 (ranks 2) could not be merged whole: tp rank 1 of 2 not captured"
        )),
        "{:?}",
        w.unmerged
    );
    assert_eq!(report.headline.as_ref().map(|h| h.kind), Some("unmerged"));
}

#[test]
fn a_group_whose_ranks_saw_other_inputs_or_other_attempts_is_not_merged_as_one() {
    // Rank 1 recorded other token ids: its pieces are not of the tensor rank 0's are of.
    let dir = edited(1, |t| {
        t.replace(
            "\"token_ids\": [3, 1, 4, 1, 5, 9]",
            "\"token_ids\": [3, 1, 4, 1, 5, 8]",
        )
    });
    let report = diff(
        &loaded(&fixture("tp1")).windows,
        &loaded(dir.path()).windows,
        &Tolerances::default(),
    );
    assert_eq!(
        report.windows[0].unmerged,
        [
            "B's tp group of 2 (ranks 0, 1) could not be merged whole: the tp group's ranks saw \
          different inputs: rank 1 recorded other token_ids than rank 0; its pieces are not of one \
          tensor"
        ]
    );
    // Rank 1's window is a second attempt (a re-run into the same directory).
    let dir = edited(1, |t| t.replace("\"attempt\": 1", "\"attempt\": 2"));
    let report = diff(
        &loaded(&fixture("tp1")).windows,
        &loaded(dir.path()).windows,
        &Tolerances::default(),
    );
    let warnings: Vec<String> = report
        .merge_warnings()
        .iter()
        .map(|w| w.message.clone())
        .collect();
    assert_eq!(
        warnings,
        [
            "B: tp group of 2 (ranks 0, 1): the tp group's windows come from different attempts \
          (attempt 1 on rank 0, attempt 2 on rank 1): pieces of different runs; choose one with \
          --attempt N"
        ]
    );
}

#[test]
fn a_replica_holding_nan_on_a_higher_rank_is_the_first_non_finite() {
    // Rank 1's logits (replicated:tp) holds a NaN; rank 0's does not. The merged window used
    // rank 0's replica alone, so B's first non-finite was never named.
    let dir = edited(1, |t| {
        let at = t.find("\"stage\": \"logits\"").unwrap();
        let (head, tail) = t.split_at(at);
        format!(
            "{head}{}",
            tail.replacen(
                "\"nan_count\": 0, \"inf_count\": 0, \"finite_count\": 192",
                "\"nan_count\": 1, \"inf_count\": 0, \"finite_count\": 191",
                1
            )
        )
    });
    let report = diff(
        &loaded(&fixture("tp1")).windows,
        &loaded(dir.path()).windows,
        &Tolerances::default(),
    );
    let first = report.windows[0].first_nonfinite_b.as_ref().expect("named");
    assert_eq!(first.key, "logits#1");
    assert!(!report.replicated.is_empty(), "and the replicas disagree");
}

#[test]
fn a_group_rank_missing_because_a_captured_window_was_not_placed_is_not_blamed_on_the_capture() {
    // Rank 1 claims tp rank 0 too: it was captured, so "capture every rank" would be wrong.
    let dup = edited(1, |t| {
        t.replace(
            "\"parallel\": {\"tp\": [1, 2]}",
            "\"parallel\": {\"tp\": [0, 2]}",
        )
    });
    let tp1 = fixture("tp1");
    let (code, text) = dumpview(&["diff", tp1.to_str().unwrap(), dup.path().to_str().unwrap()]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("ranks 0 and 1 both claim tp rank 0; rank 1 left out"),
        "{text}"
    );
    assert!(
        text.contains(
            "tp rank 1 of the group not captured; its sharded stages are left out (global rank 1 \
             was captured but not placed in this group: a layout not read, no entry for the axis, \
             or a group rank claimed twice; see the other warnings)"
        ),
        "{text}"
    );
    assert!(!text.contains("DUMP_PROBE_RANKS=all"), "{text}");
    // A rank truly left out of the capture still gets the advice.
    let rank0 = fixture("tp2").join("rank0");
    let (_, text) = dumpview(&["diff", tp1.to_str().unwrap(), rank0.to_str().unwrap()]);
    assert!(
        text.contains("(capture every rank: DUMP_PROBE_RANKS=all)"),
        "{text}"
    );
}

#[test]
fn a_slice_that_cannot_describe_its_record_is_dropped_with_a_warning() {
    let bad = edited(1, |t| {
        let t = replace_nth(&t, "\"shard\": \"tp:1\"", "\"shard\": \"tp:7\"", 0);
        replace_nth(&t, "\"shard\": \"tp:1\"", "\"shard\": \"tp:1@6/6\"", 0)
    });
    let dump = loaded(bad.path());
    let texts: Vec<String> = dump.warnings.iter().map(|w| w.to_string()).collect();
    let has = |needle: &str| texts.iter().any(|t| t.contains(needle));
    assert!(
        has(
            "layers.0.up#1 (seq 3): shard tp:7: dimension 7 is out of range for a 2-d record; recorded without the shard, per rank"
        ),
        "{texts:#?}"
    );
    assert!(
        has(
            "layers.0.up_heads#1 (seq 4): shard tp:1@6/6: offset 6 + local size 2 is past the full size 6"
        ),
        "{texts:#?}"
    );
    assert!(dump.warnings.iter().all(|w| w.loses_evidence()));
}

#[test]
fn a_piece_without_statistics_is_missing_evidence_naming_its_rank() {
    let nostats = edited(1, |t| {
        t.lines()
            .map(|line| {
                if line.contains("\"stage\": \"layers.0.up\",") {
                    let at = line.find("\"stats\": {").unwrap();
                    let end = at + line[at..].find('}').unwrap() + 1;
                    format!("{}\"stats\": null{}", &line[..at], &line[end..])
                } else {
                    line.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    let tp1 = fixture("tp1");
    let (code, text) = dumpview(&[
        "diff",
        tp1.to_str().unwrap(),
        nostats.path().to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "layers.0.up#1: tp:1: no statistics on rank 1 (the others have them): missing evidence"
        ),
        "{text}"
    );
}
