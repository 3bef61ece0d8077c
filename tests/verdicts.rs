//! The verdicts on committed fixtures (tests/fixtures/verdicts/, made once by make_verdicts.py):
//! one llama-shaped decoder (128 tokens, 8 heads of 64, 4 layers) in float32, bfloat16 and
//! float16, eager against a fused RoPE (rounding noise of about one ulp from `q_rope` on) and
//! against one K-cache row written to another token's place (a moved row); and a float8 record
//! that the probe could not reduce. Every expected value is read from those files, never
//! recomputed with this CPU's kernels.

mod support;

use std::path::{Path, PathBuf};

use dumpview::model::analysis::compare::{CHECKSUM_RTOL, Tolerances, Verdict};
use dumpview::model::analysis::diff::{Cell, WindowDiff, diff};
use dumpview::model::dump::Dump;
use dumpview::model::ingest::load;
use support::run::dumpview;

fn dir(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/verdicts")
        .join(path)
}

fn side(path: &str) -> Dump {
    let dump = load(&[dir(path)], &mut |_| {}).unwrap();
    assert_eq!(dump.windows.len(), 1, "{path}");
    dump
}

fn window_diff(a: &str, b: &str, tolerances: &Tolerances) -> WindowDiff {
    let report = diff(&side(a).windows, &side(b).windows, tolerances);
    assert_eq!(report.windows.len(), 1);
    report.windows.into_iter().next().unwrap()
}

/// The checksum held to its same-dtype rtol alone: the rule before the noise bound.
fn checksum_rtol_only() -> Tolerances {
    let mut tolerances = Tolerances::default();
    tolerances
        .set("pos_checksum", tolerances.of("pos_checksum"))
        .unwrap();
    tolerances
}

fn keys_with(w: &WindowDiff, verdict: &Verdict) -> Vec<String> {
    w.pairs
        .iter()
        .filter(|p| p.comparison.verdict == *verdict)
        .map(|p| p.key.clone())
        .collect()
}

#[test]
fn rounding_noise_is_never_values_moved() {
    // (dtype, pairs whose checksum is inconclusive, the first of them)
    for (dtype, inconclusive, first) in [
        ("float32", 0, None),
        ("bfloat16", 42, Some("layers.0.mlp_act#1")),
        ("float16", 1, Some("layers.2.mlp_gate#1")),
    ] {
        let (a, b) = (format!("{dtype}/eager"), format!("{dtype}/fused"));
        let w = window_diff(&a, &b, &Tolerances::default());
        assert_eq!(w.pairs.len(), 79, "{dtype}");
        assert_eq!(w.first_divergence, None, "{dtype}");
        assert_eq!(w.checksum_inconclusive, inconclusive, "{dtype}");
        assert_eq!(
            w.pairs.len() - inconclusive,
            keys_with(&w, &Verdict::Agree).len()
        );
        let listed = keys_with(&w, &Verdict::ChecksumInconclusive);
        assert_eq!(listed.first().map(String::as_str), first, "{dtype}");
        // Up to q_rope both sides compute the same values: identical statistics.
        let q_rope = w
            .pairs
            .iter()
            .position(|p| p.key == "layers.0.q_rope#1")
            .unwrap();
        for p in &w.pairs[..q_rope] {
            assert!(
                p.comparison.stats.iter().all(|d| d.abs_diff == Some(0.0)),
                "{}",
                p.key
            );
        }
        for p in w.pairs.iter().filter(|p| listed.contains(&p.key)) {
            let checksum = p.comparison.stats.last().unwrap();
            let bound = p.comparison.checksum_bound.unwrap();
            assert!(
                p.comparison.stats[..5].iter().all(|d| !d.exceeds),
                "{}",
                p.key
            );
            let moved = checksum.rel_diff.unwrap();
            assert!(moved > CHECKSUM_RTOL && moved <= bound.bound, "{}", p.key);
            assert!(
                bound.bound > bound.moved_row && bound.beyond_rtol,
                "{}",
                p.key
            );
            assert_eq!(
                bound.rows,
                dumpview::model::analysis::compare::checksum_rows(&p.shape_a)
            );
        }
        // The same pairs under the checksum's same-dtype rtol alone: the issue, reproduced.
        let old = window_diff(&a, &b, &checksum_rtol_only());
        match first {
            Some(key) => {
                let p = old.first().unwrap();
                assert_eq!(
                    (p.key.as_str(), &p.comparison.verdict),
                    (key, &Verdict::ValuesMoved)
                );
                assert_eq!(keys_with(&old, &Verdict::ValuesMoved), listed, "{dtype}");
            }
            None => assert_eq!(old.first_divergence, None),
        }
    }
}

#[test]
fn a_moved_row_is_values_moved_in_every_dtype() {
    for (dtype, bound) in [
        ("float32", CHECKSUM_RTOL),
        ("bfloat16", 2.0 * 2f64.powi(-8)),
        ("float16", CHECKSUM_RTOL),
    ] {
        let w = window_diff(
            &format!("{dtype}/eager"),
            &format!("{dtype}/swapped"),
            &Tolerances::default(),
        );
        let first = w.first().unwrap();
        assert_eq!(first.key, "layers.1.k_cache_write#1", "{dtype}");
        assert_eq!(first.comparison.verdict, Verdict::ValuesMoved, "{dtype}");
        // Everything before it is bit-identical; the write has the same multiset of values.
        assert!(
            w.pairs[..first.position]
                .iter()
                .all(|p| p.comparison.verdict == Verdict::Agree)
        );
        let stats = &first.comparison.stats;
        for d in &stats[..3] {
            assert_eq!(
                d.a, d.b,
                "{dtype} {}: max_abs, min, max are elements",
                d.name
            );
        }
        assert!(stats[..5].iter().all(|d| !d.exceeds));
        let checksum_bound = first.comparison.checksum_bound.unwrap();
        assert_eq!(
            (checksum_bound.bound, checksum_bound.rows),
            (bound, 1024),
            "{dtype}"
        );
        assert!(stats[5].rel_diff.unwrap() > bound, "{dtype}");
        // The cache read after it holds the same moved row.
        let read = w
            .pairs
            .iter()
            .find(|p| p.key == "layers.1.k_cache_read#1")
            .unwrap();
        assert_eq!(
            (read.key.as_str(), &read.comparison.verdict),
            ("layers.1.k_cache_read#1", &Verdict::ValuesMoved)
        );
    }
}

#[test]
fn inconclusive_checksums_are_said_plainly_and_exit_0() {
    let (a, b) = (dir("bfloat16/eager"), dir("bfloat16/fused"));
    let out = dumpview().arg("diff").arg(&a).arg(&b).assert().code(0);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains("CHECKSUM INCONCLUSIVE: 42 paired records"),
        "{text}"
    );
    assert!(
        text.contains("   first layers.0.mlp_act#1: moved "),
        "{text}"
    );
    assert!(
        text.contains(
            "first divergence: none among the compared records (42 checksum inconclusive, 0 not compared"
        ),
        "{text}"
    );
    assert!(!text.contains("VALUES MOVED"), "{text}");
    let out = dumpview()
        .args(["diff", "--json"])
        .arg(&a)
        .arg(&b)
        .assert()
        .code(0);
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let w = &json["diff"]["windows"][0];
    assert_eq!(w["checksum_inconclusive"], 42);
    assert_eq!(w["first_divergence"], serde_json::Value::Null);
    let pair = w["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == "layers.0.mlp_act#1")
        .unwrap();
    assert_eq!(pair["verdict"]["kind"], "checksum_inconclusive");
    let bound = &pair["checksum_bound"];
    assert_eq!(bound["roundoff"], 2.0 * 2f64.powi(-8));
    assert_eq!(bound["rows"], 128);
    assert!(bound["bound"].as_f64() >= bound["roundoff"].as_f64());
    assert!(
        json["diff"]["table"]["0"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("inconclusive"))
    );
    let report = diff(
        &side("bfloat16/eager").windows,
        &side("bfloat16/fused").windows,
        &Tolerances::default(),
    );
    let rows = dumpview::model::analysis::table::stage_rows(&report);
    let row = rows.iter().find(|r| r.key == "layers.0.mlp_act#1").unwrap();
    assert_eq!(row.status, "checksum_inconclusive");
    // The report lists them in its own line.
    let out = dumpview().args(["report"]).arg(&a).arg(&b).assert();
    let md = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(md.contains("- **checksum inconclusive** (42 pairs"), "{md}");
    assert!(md.contains("`layers.0.mlp_act#1`"), "{md}");
}

#[test]
fn a_pair_without_statistics_is_not_compared_and_hides_no_divergence() {
    let w = window_diff("not_compared/a", "not_compared/b", &Tolerances::default());
    let verdicts: Vec<(&str, &Verdict)> = w
        .pairs
        .iter()
        .map(|p| (p.key.as_str(), &p.comparison.verdict))
        .collect();
    let not_compared = Verdict::NotCompared {
        reason: "no statistics on either side".to_string(),
    };
    assert_eq!(
        verdicts,
        [
            ("x#1", &Verdict::Agree),
            ("x_fp8#1", &not_compared),
            ("y#1", &Verdict::Magnitude)
        ]
    );
    assert_eq!(&*w.pairs[1].dtype_a, "float8_e4m3fn");
    assert_eq!(w.first().map(|p| p.key.as_str()), Some("y#1"));
    assert_eq!(w.not_compared, 1);
    let report = diff(
        &side("not_compared/a").windows,
        &side("not_compared/b").windows,
        &Tolerances::default(),
    );
    assert_eq!(
        report.table[&0],
        [Cell::Agrees, Cell::Missing, Cell::Diverges]
    );
    let statuses: Vec<&str> = dumpview::model::analysis::table::stage_rows(&report)
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, ["agree", "not_compared", "magnitude"]);

    let (a, b) = (dir("not_compared/a"), dir("not_compared/b"));
    let out = dumpview().arg("diff").arg(&a).arg(&b).assert().code(1);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains(
            "coverage: 3 paired, 1 not compared (no statistics on either side), 0 only in A, 0 only in B (pairs not compared are missing evidence)"
        ),
        "{text}"
    );
    assert!(text.contains("not compared: x_fp8#1\n"), "{text}");
    assert!(text.contains("first divergence: y#1 (position 2"), "{text}");
    let out = dumpview()
        .args(["diff", "--json"])
        .arg(&a)
        .arg(&b)
        .assert()
        .code(1);
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let w = &json["diff"]["windows"][0];
    assert_eq!(w["not_compared"], 1);
    assert_eq!(w["first_divergence"], 2);
    assert_eq!(
        w["pairs"][1]["verdict"],
        serde_json::json!({"kind": "not_compared", "reason": "no statistics on either side"})
    );
    let out = dumpview().args(["report"]).arg(&a).arg(&b).assert();
    let md = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        md.contains("- coverage: 3 paired (1 not compared), 0 only in A, 0 only in B"),
        "{md}"
    );
    assert!(
        md.contains("- not compared (missing evidence): `x_fp8#1 (no statistics on either side)`"),
        "{md}"
    );
}

/// Issue 31, item 25: a pair whose B side recorded no magnitudes (null max_abs, min, max, mean,
/// l2) and whose checksum moved is not said to have "magnitudes agree": a move cannot be told
/// from a change there.
#[test]
fn values_moved_without_magnitudes_on_b_does_not_claim_they_agree() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples/llama_kv_alias/a/rank0/match1-occ1/manifest.json");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&example).unwrap()).unwrap();
    let mut b = manifest.clone();
    let stats = &mut b["records"][1]["stats"];
    for name in ["max_abs", "min", "max", "mean", "l2"] {
        stats[name] = serde_json::Value::Null;
    }
    let checksum = stats["pos_checksum"].as_f64().unwrap();
    stats["pos_checksum"] = (checksum + 1.0 + checksum.abs()).into();
    let root = tempfile::tempdir().unwrap();
    for (side, m) in [("a", &manifest), ("b", &b)] {
        let window = root.path().join(side).join("rank0/match1-occ1");
        std::fs::create_dir_all(&window).unwrap();
        std::fs::write(window.join("manifest.json"), serde_json::to_vec(m).unwrap()).unwrap();
    }
    let out = dumpview()
        .arg("diff")
        .arg(root.path().join("a"))
        .arg(root.path().join("b"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("first divergence: embed#1")
            && text.contains("VALUES MOVED OR CHANGED")
            && text.contains("the magnitudes were not compared (not recorded on both sides)"),
        "{text}"
    );
    assert!(!text.contains("VALUES MOVED: magnitudes agree"), "{text}");
}
