//! Tokens as the unit of comparison, on the committed pairs of assets/token_examples/
//! (examples/token_rows.py): every pair's designed answer from the model, the CLI's exit code
//! and `--json`, and the text a user reads.

mod support;

use std::path::{Path, PathBuf};

use dumpview::model::analysis::Analysis;
use dumpview::model::analysis::compare::Tolerances;
use dumpview::model::analysis::tokens;
use dumpview::model::dump::Dump;
use serde_json::Value;
use support::run::{dumpview_in_repo, json_of, ran};

fn pair_dir(pair: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/token_examples")
        .join(pair)
}

fn load(dir: &Path) -> Dump {
    dumpview::load(&[dir.to_path_buf()], &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

/// [`Analysis::compute_diff`], after checking that judging forwards paired whole once
/// (`tokens::whole`) gives the answers of the bucket alignment with the sharpening after it:
/// the same report and the same token view cells.
fn checked_diff(a: &Dump, b: &Dump, tolerances: &Tolerances) -> Analysis {
    use dumpview::model::analysis::diff;
    let once = diff::diff(&a.windows, &b.windows, tolerances);
    let by_buckets = diff::diff_by_buckets(&a.windows, &b.windows, tolerances);
    assert_eq!(
        serde_json::to_value(&once).unwrap(),
        serde_json::to_value(&by_buckets).unwrap()
    );
    let cells = |report: &diff::DiffReport| -> Vec<Vec<(u32, u32, u32)>> {
        report.tokens.as_ref().map_or(Vec::new(), |t| {
            t.per_request
                .iter()
                .map(|r| {
                    let mut c: Vec<(u32, u32, u32)> = r
                        .cells
                        .iter()
                        .map(|&(s, p, x)| (s, p, x.to_bits()))
                        .collect();
                    c.sort_unstable();
                    c
                })
                .collect()
        })
    };
    assert_eq!(cells(&once), cells(&by_buckets));
    Analysis::compute_diff(a, b, tolerances)
}

fn expected(pair: &str) -> Value {
    let text = std::fs::read_to_string(pair_dir(pair).join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn analysis(pair: &str) -> Analysis {
    let dir = pair_dir(pair);
    checked_diff(
        &load(&dir.join("a")),
        &load(&dir.join("b")),
        &Tolerances::default(),
    )
}

const PAIRS: [&str; 15] = [
    "tokens_chunked_vs_whole",
    "tokens_chunked_vs_whole_bf16",
    "tokens_chunked_vs_whole_fp16",
    "tokens_chunk_budgets",
    "tokens_bug_in_one_chunk",
    "tokens_batched_vs_alone",
    "tokens_batched_vs_alone_bf16",
    "tokens_prefix_cache",
    "tokens_rows_permuted",
    "tokens_tp2_vs_tp1",
    "tokens_tp2_wrong_shard",
    "tokens_cp2_vs_cp1",
    "tokens_without_row_stats",
    "tokens_without_row_stats_bug",
    "tokens_dp_rank",
];

#[test]
fn every_committed_pair_is_listed_here() {
    let mut found: Vec<String> = std::fs::read_dir(pair_dir(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| pair_dir(n).join("expected.json").is_file())
        .collect();
    found.sort();
    let mut listed: Vec<String> = PAIRS.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(found, listed);
}

/// Each pair's designed answer: correct pairs have no divergence and every aligned row of
/// the request compared; a bug names its stage#k, request, position and token id.
#[test]
fn every_pair_gives_its_designed_answer() {
    for pair in PAIRS {
        let answer = &expected(pair)["answer"];
        let analysis = analysis(pair);
        let diff = analysis.diff.as_ref().unwrap();
        let tokens = diff
            .tokens
            .as_ref()
            .unwrap_or_else(|| panic!("{pair}: no token alignment"));
        assert_eq!(
            tokens.requests.len() as u64,
            answer["requests"].as_u64().unwrap(),
            "{pair}: {:?}",
            tokens.requests
        );
        if let Some(unmatched) = answer.get("unmatched_b") {
            let want: Vec<String> = serde_json::from_value(unmatched.clone()).unwrap();
            assert_eq!(tokens.unmatched_b, want, "{pair}");
        }
        if let Some(summed_answer) = answer.get("summed") {
            // B from before token rows: its records against A's rows summed.
            let summed = tokens
                .summed
                .as_ref()
                .unwrap_or_else(|| panic!("{pair}: no summed comparison"));
            assert_eq!(summed.whole_side, "B", "{pair}");
            assert_eq!(tokens.maps_from_metadata, (0, 5), "{pair}");
            assert!(summed.records_compared > 400, "{pair}: {summed:?}");
            match summed_answer["first"].as_object() {
                None => {
                    assert_eq!(summed.records_diverging, 0, "{pair}");
                    assert!(!diff.found_something(), "{pair}: {:?}", diff.headline);
                }
                Some(want) => {
                    let first = summed.first.as_ref().unwrap();
                    assert_eq!(first.key, want["key"].as_str().unwrap(), "{pair}");
                    assert_eq!(first.requests.0, want["request"].as_str().unwrap());
                    let positions: (u64, u64) =
                        serde_json::from_value(want["positions"].clone()).unwrap();
                    assert_eq!(first.positions, positions, "{pair}");
                    assert_eq!(first.token_id, want["token_id"].as_i64(), "{pair}");
                    assert_eq!(diff.headline.as_ref().unwrap().key, first.key, "{pair}");
                    assert!(diff.found_something(), "{pair}");
                }
            }
            continue;
        }
        assert!(tokens.rows_compared > 0, "{pair}: nothing compared");
        match answer["first_bad_token"].as_object() {
            None => {
                assert_eq!(tokens.first, None, "{pair}");
                assert_eq!(tokens.rows_diverging, 0, "{pair}");
                assert!(
                    !diff.found_something(),
                    "{pair}: a correct pair must find nothing: {:?}",
                    diff.headline
                );
            }
            Some(bad) => {
                let first = tokens
                    .first
                    .as_ref()
                    .unwrap_or_else(|| panic!("{pair}: no bad token"));
                assert_eq!(first.key, bad["key"].as_str().unwrap(), "{pair}");
                assert_eq!(first.position, bad["position"].as_u64().unwrap(), "{pair}");
                assert_eq!(first.token_id, bad["token_id"].as_i64(), "{pair}");
                assert_eq!(first.request_a, bad["request"].as_str().unwrap(), "{pair}");
                assert_eq!(first.kind, bad["kind"].as_str().unwrap(), "{pair}");
                let headline = diff.headline.as_ref().unwrap();
                assert_eq!(
                    headline.key, first.key,
                    "{pair}: the headline is the bad token"
                );
                assert!(diff.found_something(), "{pair}");
            }
        }
    }
}

/// A correct chunked prefill against the same request unchunked: before token rows this was
/// a structural divergence with MISSING WINDOWs and exit 1.
#[test]
fn a_chunked_prefill_agrees_with_the_whole_one_from_the_cli() {
    let dir = pair_dir("tokens_chunked_vs_whole");
    let out = ran(dumpview_in_repo()
        .args(["diff"])
        .arg(dir.join("a"))
        .arg(dir.join("b"))
        .output()
        .unwrap());
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(!out.stdout.contains("MISSING WINDOW"), "{}", out.stdout);
    assert!(!out.stdout.contains("structural"), "{}", out.stdout);
    assert!(
        out.stdout.contains(
            "token rows: 1 request matched, 1484 aligned rows compared, 0 diverge (3 windows of A, 5 of B)"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("every aligned row agrees"),
        "{}",
        out.stdout
    );
    // The decode steps pair whole by the rows they hold: call 2 of A with call 4 of B.
    assert!(
        out.stdout.contains(r#"A "req-0" (match 1, call 2, 106 records) vs B "req-0" (match 1, call 4, 106 records)"#),
        "{}",
        out.stdout
    );
}

/// A bug in the second chunk only: the stage, the position and the token, in text and JSON.
#[test]
fn a_bug_in_one_chunk_is_named_by_stage_and_position() {
    let dir = pair_dir("tokens_bug_in_one_chunk");
    let out = ran(dumpview_in_repo()
        .args(["diff"])
        .arg(dir.join("a"))
        .arg(dir.join("b"))
        .output()
        .unwrap());
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stdout.starts_with(
            "first divergence: layers.0.q_rope#1 at request \"req-0\" position 5 (token id 611)"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("first bad token: position 5, token id 611 at layers.0.q_rope#1"),
        "{}",
        out.stdout
    );
    let (code, json, stderr) = json_of(
        dumpview_in_repo()
            .args(["diff", "--json"])
            .arg(dir.join("a"))
            .arg(dir.join("b"))
            .output()
            .unwrap(),
    );
    assert_eq!(code, 1, "{stderr}");
    let first = &json["diff"]["tokens"]["first"];
    assert_eq!(first["key"], "layers.0.q_rope#1");
    assert_eq!(first["position"], 5);
    assert_eq!(first["token_id"], 611);
    assert_eq!(first["kind"], "row_changed");
    // The rows of positions 0..4 (the first chunk) agree at that stage: A's whole prefill
    // and B's first chunk hold them.
    let per_request = &json["diff"]["tokens"]["per_request"][0];
    assert_eq!(per_request["first_bad_token"]["position"], 5);
}

/// A row permutation is `rows_permuted`, a changed row `row_changed`: the multiset decides.
#[test]
fn a_permutation_of_rows_is_told_from_a_changed_row() {
    let permuted = analysis("tokens_rows_permuted");
    let first = permuted.diff.unwrap().tokens.unwrap().first.unwrap();
    assert_eq!((first.kind, first.position), ("rows_permuted", 2));
    let changed = analysis("tokens_bug_in_one_chunk");
    assert_eq!(
        changed.diff.unwrap().tokens.unwrap().first.unwrap().kind,
        "row_changed"
    );
}

/// A prefix-cache hit on one side: only the positions both computed are compared, and the
/// rest is coverage, not a divergence.
#[test]
fn after_a_prefix_cache_hit_only_the_computed_positions_compare() {
    let analysis = analysis("tokens_prefix_cache");
    let tokens = analysis.diff.unwrap().tokens.unwrap();
    assert_eq!(
        tokens.requests[0].common_positions, 6,
        "{:?}",
        tokens.requests
    );
    assert!(tokens.rows_only.0 > 0, "A's positions 0..19 are A's alone");
    assert_eq!(tokens.rows_only.1, 0);
    assert_eq!(tokens.first, None);
}

/// `diff --tokens`: the grid marks the first bad token where the second chunk starts, and the
/// first chunk's positions agree at that stage; `--tokens --json` gives each request's first
/// bad token.
#[test]
fn the_token_view_marks_the_first_bad_token() {
    let dir = pair_dir("tokens_bug_in_one_chunk");
    let out = ran(dumpview_in_repo()
        .env("COLUMNS", "100")
        .args(["diff", "--tokens"])
        .arg(dir.join("a"))
        .arg(dir.join("b"))
        .output()
        .unwrap());
    assert_eq!(out.code, 1, "{}", out.stderr);
    let line = out
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("layers.0.q_rope#1 "))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    let cells = line.trim_start().trim_start_matches("layers.0.q_rope#1 ");
    // Positions 0..4 agree ('.'), 5 is the first bad token ('*'), 5..8 diverge, 9.. agree.
    assert_eq!(&cells[..6], ".....*", "{line}");
    assert!(cells[6..9].chars().all(|c| c.is_ascii_digit()), "{line}");
    assert_eq!(&cells[9..], ".....", "{line}");
    let (code, json, stderr) = json_of(
        dumpview_in_repo()
            .args(["diff", "--tokens", "--json"])
            .arg(dir.join("a"))
            .arg(dir.join("b"))
            .output()
            .unwrap(),
    );
    assert_eq!(code, 1, "{stderr}");
    let bad = &json["tokens"]["per_request"][0]["first_bad_token"];
    assert_eq!(
        (bad["key"].as_str(), bad["position"].as_u64()),
        (Some("layers.0.q_rope#1"), Some(5))
    );
    // The llama examples hold token rows since their regeneration: the KV pair's first bad
    // token is the first token at its designed fault, the K-cache read (its first divergence).
    let kv = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/examples/llama_kv_alias");
    let (code, json, stderr) = json_of(
        dumpview_in_repo()
            .args(["diff", "--tokens", "--json"])
            .arg(kv.join("a"))
            .arg(kv.join("b"))
            .output()
            .unwrap(),
    );
    assert_eq!(code, 1, "{stderr}");
    let bad = &json["tokens"]["per_request"][0]["first_bad_token"];
    assert_eq!(
        (bad["key"].as_str(), bad["position"].as_u64()),
        (Some("layers.0.k_cache_read#1"), Some(0))
    );
    // Captures without token rows (minilm's dumps predate them): a clear error, not an empty
    // view.
    let plain = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/examples/minilm_fp32_vs_bf16");
    let out = ran(dumpview_in_repo()
        .args(["diff", "--tokens"])
        .arg(plain.join("a"))
        .arg(plain.join("b"))
        .output()
        .unwrap());
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("the captures do not both hold token rows"),
        "{}",
        out.stderr
    );
}

/// The exported report names the first bad token per request, with both rows.
#[test]
fn the_report_has_a_first_bad_token_section() {
    let dir = pair_dir("tokens_bug_in_one_chunk");
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("r.md");
    let out = ran(dumpview_in_repo()
        .args(["report", "-o"])
        .arg(&path)
        .arg(dir.join("a"))
        .arg(dir.join("b"))
        .output()
        .unwrap());
    assert_eq!(out.code, 1, "{}", out.stderr);
    let md = std::fs::read_to_string(&path).unwrap();
    assert!(md.contains("### First bad token"), "{md}");
    assert!(
        md.contains("| `req-0` | 1484 | 5 | 611 | `layers.0.q_rope#1` | row_changed"),
        "{md}"
    );
}

/// Two requests whose ids agree only up to a position: matched by the longest common
/// prefix, the rows from there on are different inputs (not compared), and that is a finding.
#[test]
fn requests_that_part_are_matched_by_their_common_prefix_and_flagged() {
    let a = load(&pair_dir("tokens_chunked_vs_whole").join("a"));
    let b = load(&pair_dir("tokens_prefix_cache").join("a"));
    let analysis = checked_diff(&a, &b, &Tolerances::default());
    let diff = analysis.diff.unwrap();
    let tokens = diff.tokens.as_ref().unwrap();
    let m = &tokens.requests[0];
    assert_eq!(
        serde_json::to_value(&m.by).unwrap(),
        "longest_prefix",
        "{m:?}"
    );
    // A's prompt is the first 12 ids of B's 24; A's first generated token is not B's 13th id.
    assert_eq!(m.ids_differ_from, Some(12));
    assert!(tokens.rows_different_input > 0);
    assert_eq!(tokens.first, None, "the common positions agree");
    assert!(diff.found_something(), "different inputs are a finding");
}

/// Two captures whose requests share no position (A's prompt at 0-13, B's prefix-cache hit
/// computing 20-25): nothing aligns, and the headline says why instead of ending silent.
#[test]
fn captures_without_a_common_position_say_so_in_the_headline() {
    let a = pair_dir("tokens_rows_permuted").join("a");
    let b = pair_dir("tokens_prefix_cache").join("b");
    let analysis = checked_diff(&load(&a), &load(&b), &Tolerances::default());
    let diff = analysis.diff.unwrap();
    let tokens = diff.tokens.as_ref().unwrap();
    assert_eq!(tokens.rows_compared, 0);
    assert_eq!(
        tokens.nothing_compared,
        Some(dumpview::model::analysis::tokens::NothingCompared::NoCommonPositions)
    );
    let headline = diff.headline.as_ref().expect("a headline");
    assert_eq!(headline.kind, "no_rows_aligned");
    assert!(
        headline
            .text
            .contains("no pair of them holds a common position"),
        "{}",
        headline.text
    );
    assert!(diff.found_something());
    let (code, text, _) = support::run::text(&["diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("no token rows aligned"), "{text}");
    assert!(
        !text.contains("compared by their token rows alone"),
        "{text}"
    );
    // --tokens concludes as diff does.
    let (code, text, _) =
        support::run::text(&["diff", "--tokens", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(code, 1, "{text}");
}

/// A window whose sidecar is gone keeps its row map: its token ids still identify the
/// input (no INPUT IDENTITY UNKNOWN), it still pairs by its rows, and a warning names the file.
#[test]
fn a_missing_sidecar_costs_the_rows_but_keeps_the_row_map() {
    let tmp = copied("tokens_chunked_vs_whole");
    let gone = tmp.path().join("b/rank0/match1-occ1/rows.f32");
    std::fs::remove_file(&gone).unwrap_or_else(|e| panic!("{}: {e}", gone.display()));
    let (a, b) = (load(&tmp.path().join("a")), load(&tmp.path().join("b")));
    let window = window_at(&b, "match1-occ1");
    let rows = window.token_rows.as_ref().expect("the row map is kept");
    assert!(!rows.map.is_empty());
    assert!(rows.records.is_empty() && rows.values.is_empty());
    assert!(window.token_ids().is_some(), "the map's token ids stand");
    assert!(
        b.warnings.iter().any(
            |w| w.to_string().contains("rows.f32") && w.to_string().contains("row map is kept")
        ),
        "{:?}",
        b.warnings
    );
    let analysis = checked_diff(&a, &b, &Tolerances::default());
    let diff = analysis.diff.unwrap();
    // The rows lost are said as missing evidence, not as rows the other side did not capture.
    let tokens = diff.tokens.as_ref().unwrap();
    assert_eq!(tokens.windows_without_statistics, (0, 1));
    let text = dumpview::model::present::tokens::summary_text(tokens, &diff.aligned_only);
    assert!(
        text.contains("0 windows of A and 1 of B hold a row map without row statistics"),
        "{text}"
    );
    // The chunk still holds its rows by the map: left to the row alignment, not a MISSING
    // WINDOW (without the map it would pair with nothing).
    assert!(diff.unpaired_b.is_empty(), "{:?}", diff.unpaired_b);
    assert_eq!(diff.aligned_only.1.len(), 3, "{:?}", diff.aligned_only);
    for w in &diff.windows {
        assert!(
            matches!(
                w.identity,
                dumpview::model::analysis::diff::Identity::Same { .. }
            ),
            "{}: {:?}",
            w.a.source,
            w.identity
        );
    }
}

/// The window of `dump` whose directory is `name` (`match1-occ1`).
fn window_at<'d>(dump: &'d Dump, name: &str) -> &'d dumpview::model::dump::Window {
    dump.windows
        .iter()
        .find(|w| w.source.ends_with(format!("{name}/manifest.json")))
        .unwrap_or_else(|| panic!("no window {name}"))
}

/// Rewrites the manifest at `file` through `edit`.
fn edit_manifest(file: &Path, edit: impl FnOnce(&mut Value)) {
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    edit(&mut m);
    std::fs::write(file, serde_json::to_string(&m).unwrap()).unwrap();
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Copies pair `pair` into a temp dir (both sides), for a test that edits it.
fn copied(pair: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let src = pair_dir(pair);
    for side in ["a", "b"] {
        for entry in walk(&src.join(side)) {
            let to = tmp.path().join(entry.strip_prefix(&src).unwrap());
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&entry, &to).unwrap();
        }
    }
    tmp
}

/// In forwards paired whole, a changed row is a divergence with its position even where
/// the whole tensor's statistics agree (they blur one row into many): here one decode step's
/// `layers.0.q` row sum is moved in the sidecar alone, so the whole-tensor statistics are
/// exactly as before and only the row shows it.
#[test]
fn a_changed_row_makes_an_agreeing_record_a_divergence_with_its_position() {
    let tmp = copied("tokens_chunked_vs_whole");
    let window = tmp.path().join("b/rank0/match1-occ4");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(window.join("manifest.json")).unwrap())
            .unwrap();
    let seq = manifest["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["stage"] == "layers.0.q")
        .unwrap()["seq"]
        .as_u64()
        .unwrap();
    let block = manifest["token_rows"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b[0].as_u64() == Some(seq))
        .unwrap();
    let first_row = block[1].as_u64().unwrap() as usize;
    let mut bytes = std::fs::read(window.join("rows.f32")).unwrap();
    let at = (first_row * 5 + 2) * 4; // the row's `sum`
    let sum = f32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    bytes[at..at + 4].copy_from_slice(&(sum * 1.5 + 1.0).to_le_bytes());
    std::fs::write(window.join("rows.f32"), bytes).unwrap();

    let analysis = checked_diff(
        &load(&tmp.path().join("a")),
        &load(&tmp.path().join("b")),
        &Tolerances::default(),
    );
    let diff = analysis.diff.unwrap();
    let w = diff
        .windows
        .iter()
        .find(|w| w.b.source.ends_with("match1-occ4/manifest.json"))
        .expect("the decode step pairs whole");
    let p = w.pairs.iter().find(|p| p.key == "layers.0.q#1").unwrap();
    assert_eq!(p.comparison.verdict.name(), "magnitude", "{p:?}");
    let rows = p.comparison.rows.as_ref().unwrap();
    assert_eq!((rows.compared, rows.diverging), (1, 1));
    assert_eq!(rows.kind, "row_changed");
    assert_eq!(rows.first, Some(("req-0".to_string(), 12)));
    assert_eq!(rows.worst.unwrap().stat, "sum");
    assert_eq!(rows.replaced, Some("agree"));
    assert_eq!(w.first().map(|p| p.key.as_str()), Some("layers.0.q#1"));
    // The records that agree keep their verdict, now with their rows' evidence.
    let embed = w.pairs.iter().find(|p| p.key == "embed#1").unwrap();
    assert_eq!(embed.comparison.verdict.name(), "agree");
    assert_eq!(embed.comparison.rows.as_ref().unwrap().kind, "rows_agree");
}

/// A permutation of rows keeps its `values_moved` verdict, now resting on the rows: the
/// diverging rows are one multiset in two orders.
#[test]
fn a_permutation_stays_values_moved_with_the_rows_as_evidence() {
    let analysis = analysis("tokens_rows_permuted");
    let diff = analysis.diff.as_ref().unwrap();
    let p = diff
        .windows
        .iter()
        .flat_map(|w| &w.pairs)
        .find(|p| p.key == "layers.1.mlp_down#1" && p.comparison.rows.is_some())
        .expect("the permuted stage, judged by its rows");
    assert_eq!(p.comparison.verdict.name(), "values_moved", "{p:?}");
    assert_eq!(p.comparison.rows.as_ref().unwrap().kind, "rows_permuted");
}

/// A tp=2 capture's rows merge with its records: a column slice's rows add up to the tp=1
/// row (the probe weights a slice's columns at the full row's coordinates), a partial sum's
/// sum and checksum add up and its other statistics are not known (NaN, not compared).
#[test]
fn a_tp2_capture_s_rows_merge_into_the_tp1_rows() {
    let dir = pair_dir("tokens_tp2_vs_tp1");
    let (a, b) = (load(&dir.join("a")), load(&dir.join("b")));
    let analysis = checked_diff(&a, &b, &Tolerances::default());
    let diff = analysis.diff.as_ref().unwrap();
    assert!(diff.layouts.is_some(), "tp=1 vs tp=2 merges");
    let tokens = diff.tokens.as_ref().unwrap();
    // 9 records with token rows (every stage but the norm weight) × 6 tokens.
    assert_eq!((tokens.rows_compared, tokens.rows_diverging), (54, 0));
    // The windows as the diff (and the token view's Enter) compare them: B merged.
    let compared = dumpview::model::analysis::diff::Compared::of(&a.windows, &b.windows);
    let (ma, mb) = (&compared.a, &compared.b);
    let up = tokens::rows_at(ma, mb, 0, "layers.0.up#1", 2).expect("both sides hold the row");
    // float64 activations, rows stored as float32: the merged sum is the two halves' sum.
    assert!(
        (up.a.sum - up.b.sum).abs() <= 1e-5 * up.a.l2() as f32,
        "{up:?}"
    );
    assert!(
        (up.a.row_checksum - up.b.row_checksum).abs() <= 1e-5 * up.a.l2() as f32,
        "{up:?}"
    );
    assert_eq!(up.a.max_abs, up.b.max_abs);
    let partial = tokens::rows_at(ma, mb, 0, "layers.0.down_partial#1", 2).unwrap();
    assert!(
        partial.b.max_abs.is_nan() && partial.b.sum_squares.is_nan(),
        "{partial:?}"
    );
    assert!(!partial.a.max_abs.is_nan());
    assert!((partial.a.sum - partial.b.sum).abs() <= 1e-5 * partial.a.l2() as f32);
}

/// A rank of the group without token rows costs the merged rows of the stages sliced over it
/// (said as a warning naming the rank), never a wrong row.
#[test]
fn a_rank_without_rows_costs_the_merged_rows_with_a_warning() {
    let tmp = copied("tokens_tp2_vs_tp1");
    edit_manifest(&tmp.path().join("b/rank1/match1-occ1/manifest.json"), |m| {
        m.as_object_mut().unwrap().remove("token_rows");
    });
    std::fs::remove_file(tmp.path().join("b/rank1/match1-occ1/rows.f32")).unwrap();
    let analysis = checked_diff(
        &load(&tmp.path().join("a")),
        &load(&tmp.path().join("b")),
        &Tolerances::default(),
    );
    let diff = analysis.diff.unwrap();
    let warnings: Vec<String> = diff
        .merge_warnings()
        .iter()
        .map(|w| w.to_string())
        .collect();
    assert!(
        warnings.iter().any(|w| w.contains(
            "layers.0.up#1: token rows not merged: no token rows on rank [1] (the others have them)"
        )),
        "{warnings:?}"
    );
    let tokens = diff.tokens.unwrap();
    assert_eq!(tokens.rows_diverging, 0);
    // The three sliced stages and the partial sum lose their rows: 5 records × 6 rows remain.
    assert_eq!(tokens.rows_compared, 30);
}

/// A side from before token rows (no row map, no statistics; metadata positions): from the
/// CLI, the text says what was compared and how, the exit code is the answer's, and the
/// checksum is compared only where the record's rows start at position 0.
#[test]
fn a_side_without_row_statistics_is_compared_against_the_rows_summed() {
    for (pair, code) in [
        ("tokens_without_row_stats", 0),
        ("tokens_without_row_stats_bug", 1),
    ] {
        let dir = pair_dir(pair);
        let out = ran(dumpview_in_repo()
            .args(["diff"])
            .arg(dir.join("a"))
            .arg(dir.join("b"))
            .output()
            .unwrap());
        assert_eq!(out.code, code, "{pair}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stdout.contains(
                "B holds no row statistics (5 windows; 5 of their row maps made from metadata positions \
                 (a manifest from before token rows)): 470 of its records compared whole with A's rows \
                 summed over the same positions (position checksums where the rows start at position 0: 93)"
            ),
            "{pair}: {}",
            out.stdout
        );
        if code == 1 {
            assert!(
                out.stdout.starts_with(
                    "first divergence: layers.0.q_rope#1 at request \"req-0\" positions 5..=8 (token id 611) \
                     (a record without row statistics against the other side's rows summed: sum off by"
                ),
                "{}",
                out.stdout
            );
            // Chunk 2's record starts at position 5: its checksum is not comparable.
            assert!(
                out.stdout.contains(
                    "tokens_without_row_stats_bug/b/rank0/match1-occ2/manifest.json seq 6)"
                ),
                "{}",
                out.stdout
            );
            assert!(out.stdout.contains("checksum n/a  ("), "{}", out.stdout);
        }
    }
}

/// tp ranks whose row maps disagree on which token a row is: the merged window keeps no
/// rows (said, naming both files), and its records are still merged and compared whole, so
/// the wrong slice is still the first divergence.
#[test]
fn tp_ranks_with_disagreeing_row_maps_keep_the_record_comparison() {
    let tmp = copied("tokens_tp2_wrong_shard");
    edit_manifest(&tmp.path().join("b/rank1/match1-occ1/manifest.json"), |m| {
        m["token_rows"]["map"][0]["first_position"] = 3.into()
    });
    let diff = checked_diff(
        &load(&tmp.path().join("a")),
        &load(&tmp.path().join("b")),
        &Tolerances::default(),
    )
    .diff
    .unwrap();
    let warnings: Vec<String> = diff
        .merge_warnings()
        .iter()
        .map(|w| w.to_string())
        .collect();
    assert!(
        warnings.iter().any(|w| w.contains(
            "token rows not merged: ranks 0 and 1 declare different row maps that both hold request \
             \"req-layouts\" position 3"
        ) && w.contains("rank1/match1-occ1/manifest.json")),
        "{warnings:?}"
    );
    assert_eq!(diff.headline.as_ref().unwrap().key, "layers.0.up#1");
    assert_eq!(
        diff.windows.len(),
        1,
        "the merged window pairs by call number"
    );
    assert!(diff.token_notes.is_empty(), "{:?}", diff.token_notes);
    // Only rows were lost: no stage left out of the merge.
    assert!(
        diff.windows[0].unmerged.is_empty(),
        "{:?}",
        diff.windows[0].unmerged
    );
}

/// Metadata positions that do not name the window's rows give it no row map, with a note
/// naming the file and the reason (never a hang on a huge range, never silence); positions
/// that name other tokens' rows are different inputs, not a numeric divergence.
#[test]
fn bad_metadata_positions_are_refused_with_a_note_naming_the_window() {
    let cases: [(serde_json::Value, &str); 4] = [
        (
            serde_json::json!([0, 10_000_000_000_000_000_000u64]),
            "names 10000000000000000000 rows, but its first capture (runner.input_ids#1) holds 5",
        ),
        (
            serde_json::json!([5, 8]),
            "names 3 rows, but its first capture (runner.input_ids#1) holds 4",
        ),
        (
            serde_json::json!(["x"]),
            "metadata positions=[\"x\"] is not a [start, end] pair of integers",
        ),
        (
            serde_json::json!([9, 5]),
            "metadata positions=[9, 5] is an empty or reversed range",
        ),
    ];
    for (occ, (positions, why)) in [1, 2, 2, 3].into_iter().zip(cases) {
        let tmp = copied("tokens_without_row_stats");
        edit_manifest(
            &tmp.path()
                .join(format!("b/rank0/match1-occ{occ}/manifest.json")),
            |m| m["metadata"]["positions"] = positions.clone(),
        );
        let diff = checked_diff(
            &load(&tmp.path().join("a")),
            &load(&tmp.path().join("b")),
            &Tolerances::default(),
        )
        .diff
        .unwrap();
        assert!(
            diff.token_notes.iter().any(|n| n.contains(why)
                && n.contains(&format!("match1-occ{occ}/manifest.json"))
                && n.ends_with(
                    "this window of B is not aligned by rows (it pairs by call number)"
                )),
            "{positions}: {:?}",
            diff.token_notes
        );
        // The refused window is missing evidence: something found, exit 1.
        assert!(diff.found_something(), "{positions}");
    }
    // B's second chunk (positions 5..9) claimed at 6..10: the ids there differ from A's, so
    // its records are different inputs, not a divergence of values.
    let tmp = copied("tokens_without_row_stats");
    edit_manifest(&tmp.path().join("b/rank0/match1-occ2/manifest.json"), |m| {
        m["metadata"]["positions"] = serde_json::json!([6, 10])
    });
    let diff = checked_diff(
        &load(&tmp.path().join("a")),
        &load(&tmp.path().join("b")),
        &Tolerances::default(),
    )
    .diff
    .unwrap();
    let tokens = diff.tokens.as_ref().unwrap();
    let summed = tokens.summed.as_ref().unwrap();
    assert_eq!(summed.first, None, "{summed:?}");
    assert!(summed.records_different_input > 0);
    assert_eq!(tokens.requests[0].ids_differ_from, Some(6));
    assert!(diff.found_something());
}

/// Data-parallel attention: a gathered stage holds every dp rank's tokens on each rank, so one
/// forward's (stage#k, request, position) appears on two dp ranks. Those rows are said to be
/// not aligned yet and left out, never one rank's row picked for the token.
#[test]
fn rows_one_forward_holds_on_two_dp_ranks_are_said_and_not_compared() {
    let tmp = copied("tokens_dp_rank");
    let (from, to) = (
        tmp.path().join("b/rank1/match1-occ1"),
        tmp.path().join("b/rank0/match1-occ1"),
    );
    for file in ["manifest.json", "rows.f32"] {
        std::fs::copy(from.join(file), to.join(file)).unwrap();
    }
    edit_manifest(&to.join("manifest.json"), |m| {
        m["rank"] = 0.into();
        m["metadata"]["parallel"] = serde_json::json!({"dp": [0, 2]});
    });
    let analysis = checked_diff(
        &load(&tmp.path().join("a")),
        &load(&tmp.path().join("b")),
        &Tolerances::default(),
    );
    let tokens = analysis.diff.as_ref().unwrap().tokens.clone().unwrap();
    // The prefill forward's rows (12 positions × its records with token rows) are on both.
    let spread = tokens.rows_spread_over_dp.1;
    assert!(spread > 0 && spread % 12 == 0, "{spread}");
    assert_eq!(tokens.rows_spread_over_dp.0, 0);
    assert_eq!(tokens.rows_compared + spread, 1484);
    assert_eq!(tokens.rows_diverging, 0);
    let text = dumpview::model::present::tokens::summary_text(&tokens, &Default::default());
    assert!(
        text.contains(&format!(
            "rows held by several data-parallel ranks in one forward (data-parallel attention gathers every \
             rank's tokens): 0 in A, {spread} in B, not aligned yet and not compared"
        )),
        "{text}"
    );
}

/// Under data parallelism a request is matched wherever it ran: A's request served by dp
/// rank 1 pairs with B's, batched on dp rank 0, by its token ids and rows, not rank by rank
/// (which would be MISSING WINDOWs on both sides and no comparison).
#[test]
fn a_request_on_another_dp_rank_is_matched_by_its_rows() {
    let tmp = copied("tokens_batched_vs_alone");
    std::fs::rename(tmp.path().join("a/rank0"), tmp.path().join("a/rank1")).unwrap();
    for (side, rank) in [("a", 1), ("b", 0)] {
        for file in walk(&tmp.path().join(side)) {
            if file.file_name().is_none_or(|n| n != "manifest.json") {
                continue;
            }
            edit_manifest(&file, |m| {
                m["rank"] = rank.into();
                m["world_size"] = 2.into();
                m["metadata"]["parallel"] = serde_json::json!({"dp": [rank, 2]});
            });
        }
    }
    let (a, b) = (load(&tmp.path().join("a")), load(&tmp.path().join("b")));
    assert!(a.windows.iter().all(|w| w.rank == 1));
    assert!(b.windows.iter().all(|w| w.rank == 0));
    let analysis = checked_diff(&a, &b, &Tolerances::default());
    let diff = analysis.diff.unwrap();
    assert!(
        diff.unpaired_a.is_empty() && diff.unpaired_b.is_empty(),
        "no MISSING WINDOW"
    );
    let tokens = diff.tokens.as_ref().unwrap();
    assert_eq!(tokens.requests.len(), 1);
    assert_eq!(
        (tokens.requests[0].a.as_str(), tokens.requests[0].b.as_str()),
        ("req-0", "seq-17")
    );
    assert!(tokens.rows_compared > 0);
    assert_eq!(tokens.rows_diverging, 0);
    assert_eq!(tokens.unmatched_b, vec!["seq-16".to_string()]);
    assert!(!diff.found_something(), "{:?}", diff.headline);
}

/// A precision change (the float16 capture against the float32 one of the same run): rows of
/// the coarser computation drift in their sums and checksums, which neither makes a
/// divergence nor reads as a permutation; the records keep their whole-tensor verdicts.
#[test]
fn a_precision_change_is_not_made_a_divergence_or_a_permutation_by_its_rows() {
    let a = load(&pair_dir("tokens_chunked_vs_whole_fp16").join("a"));
    let b = load(&pair_dir("tokens_chunked_vs_whole").join("a"));
    let analysis = checked_diff(&a, &b, &Tolerances::default());
    let diff = analysis.diff.unwrap();
    let tokens = diff.tokens.as_ref().unwrap();
    assert!(tokens.rows_compared > 0);
    assert_eq!(tokens.first, None, "{:?}", tokens.first);
    for p in diff.windows.iter().flat_map(|w| &w.pairs) {
        if let Some(rows) = &p.comparison.rows {
            assert_ne!(rows.kind, "rows_permuted", "{}: {rows:?}", p.key);
            // Rows may settle an inconclusive checksum, never make a divergence here.
            if rows.replaced.is_some() {
                assert_eq!(p.comparison.verdict.name(), "agree", "{}: {rows:?}", p.key);
            }
        }
    }
    assert!(!diff.found_something(), "{:?}", diff.headline);
}

/// One malformed entry of the manifest's `token_rows` (a record's row block) costs the row
/// statistics, not the row map: the window still pairs by its rows and its ids stand.
#[test]
fn a_malformed_row_block_keeps_the_row_map() {
    let tmp = copied("tokens_chunked_vs_whole");
    let file = tmp.path().join("b/rank0/match1-occ1/manifest.json");
    edit_manifest(&file, |m| {
        m["token_rows"]["records"][0] = serde_json::json!([0, 1, 2])
    });
    let (a, b) = (load(&tmp.path().join("a")), load(&tmp.path().join("b")));
    let window = window_at(&b, "match1-occ1");
    let rows = window.token_rows.as_ref().expect("the row map is kept");
    assert!(!rows.map.is_empty() && rows.records.is_empty());
    assert!(
        b.warnings
            .iter()
            .any(|w| w.to_string().contains("is not readable")
                && w.to_string().contains("row map is kept")),
        "{:?}",
        b.warnings
    );
    let diff = checked_diff(&a, &b, &Tolerances::default()).diff.unwrap();
    assert!(diff.unpaired_b.is_empty(), "{:?}", diff.unpaired_b);
    // Token dims the probe never writes: the same, named.
    let tmp = copied("tokens_chunked_vs_whole");
    let file = tmp.path().join("b/rank0/match1-occ1/manifest.json");
    edit_manifest(&file, |m| {
        m["token_rows"]["records"][0][3] = serde_json::json!([2])
    });
    let b = load(&tmp.path().join("b"));
    let window = window_at(&b, "match1-occ1");
    assert!(
        window
            .token_rows
            .as_ref()
            .is_some_and(|t| t.records.is_empty())
    );
    assert!(
        b.warnings.iter().any(|w| w
            .to_string()
            .contains("token dims [2], not [0] or [0, 1]; the window's token rows are not compared (its row map is kept)")),
        "{:?}",
        b.warnings
    );
}

/// Forwards paired whole are judged in one pass, record by record (`tokens::whole`); the
/// bucket alignment with the sharpening after it, which judged those rows twice, gives the
/// same answers on every committed pair ([`checked_diff`], as in every test here). Some
/// pairs do hold forwards judged whole (decode steps, whole prefills).
#[test]
fn judging_forwards_paired_whole_once_gives_the_bucket_alignment_s_answers() {
    let tolerances = Tolerances::default();
    let mut judged_whole = 0;
    for pair in PAIRS {
        let dir = pair_dir(pair);
        let (a, b) = (load(&dir.join("a")), load(&dir.join("b")));
        checked_diff(&a, &b, &tolerances);
        let paired = tokens::pair_by_rows(&a.windows, &b.windows);
        judged_whole += tokens::align_judged(&a.windows, &b.windows, &tolerances, &paired)
            .map_or(0, |(_, judged)| judged.windows());
    }
    assert!(judged_whole >= 10, "{judged_whole} windows judged whole");
}
