//! The diagnosis (`model::analysis::diagnosis`) on committed captures: each rule firing on a
//! real capture pair and staying silent on a control; every citation checked against the
//! records it names (`cites_hold`).

use std::path::PathBuf;

use dumpview::model::analysis::Analysis;
use dumpview::model::analysis::compare::Tolerances;
use dumpview::model::analysis::diagnosis::*;
use dumpview::model::analysis::scan::view_of;
use dumpview::model::dump::{Dump, Record};

fn load(path: &str) -> Dump {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path);
    dumpview::model::ingest::load(&[root], &mut |_| {}).unwrap()
}

/// The diagnosis of `pair`'s `a` against its `b` (or of `b` alone), every citation checked.
fn diagnose_pair(pair: &str) -> Diagnosis {
    let (a, b) = (load(&format!("{pair}/a")), load(&format!("{pair}/b")));
    let analysis = Analysis::compute(&a, Some(&b), &Tolerances::default());
    let d = diagnose(&a, Some(&b), &analysis);
    cites_hold(&a, Some(&b), &analysis, &d);
    d
}

fn diagnose_one(path: &str) -> (Dump, Diagnosis) {
    let a = load(path);
    let analysis = Analysis::compute(&a, None, &Tolerances::default());
    let d = diagnose(&a, None, &analysis);
    cites_hold(&a, None, &analysis, &d);
    (a, d)
}

/// Every record a diagnosis cites exists in the window it names, at the seq it names, and has
/// the property claimed; every address lies inside each cited writer's and reader's bytes.
fn cites_hold(a: &Dump, b: Option<&Dump>, analysis: &Analysis, d: &Diagnosis) {
    for f in &d.findings {
        for c in &f.evidence {
            let dump = if c.side == 'a' {
                a
            } else {
                b.expect("a B citation needs B")
            };
            let window = dump
                .windows
                .iter()
                .find(|w| w.source.display().to_string() == c.window)
                .unwrap_or_else(|| panic!("{c:?}: no such window"));
            assert_eq!(window.rank, c.rank, "{c:?}");
            let record = window
                .records
                .iter()
                .find(|r| r.key() == c.key)
                .unwrap_or_else(|| panic!("{c:?}: no such record"));
            assert_eq!(record.seq, c.seq, "{c:?}");
            let stats = || record.stats.as_ref().expect("claims need statistics");
            let pair_verdict = || {
                let windows = &analysis
                    .diff
                    .as_ref()
                    .expect("pair claims need a diff")
                    .windows;
                // A window pair merged over a pipeline group is numbered by its logical rank.
                let same_rank = windows.iter().filter(|w| w.rank == c.rank);
                same_rank
                    .chain(windows.iter())
                    .flat_map(|w| &w.pairs)
                    .find(|p| p.key == c.key)
                    .unwrap_or_else(|| panic!("{c:?}: not paired"))
                    .comparison
                    .verdict
                    .clone()
            };
            match c.claim {
                Claim::Diverges => assert!(pair_verdict().diverges(), "{c:?}"),
                Claim::Agrees => assert!(!pair_verdict().diverges(), "{c:?}"),
                Claim::NonFinite => assert!(stats().has_nonfinite(), "{c:?}"),
                Claim::Finite => assert!(!stats().has_nonfinite(), "{c:?}"),
                Claim::Collective => assert!(record.collective.is_some(), "{c:?}"),
                Claim::Captured => {}
            }
            if let Some(layout) = &c.layout {
                assert_eq!(*layout, layout_words(record), "{c:?}");
            }
            if let (Some(address), true) = (
                &f.address,
                matches!(
                    c.role,
                    Role::Writer | Role::Reader | Role::LastFiniteWriter | Role::FirstNonFinite
                ),
            ) {
                let (lo, hi) = view_of(record).unwrap().byte_range().unwrap();
                assert!(lo <= address.bytes.0 && address.bytes.1 <= hi, "{c:?}");
                assert_eq!(record.storage_id, address.storage_id, "{c:?}");
            }
        }
    }
}

fn rules(d: &Diagnosis) -> Vec<Rule> {
    d.findings.iter().map(|f| f.rule).collect()
}

fn cited(f: &Finding, role: Role) -> Vec<&str> {
    f.evidence
        .iter()
        .filter(|c| c.role == role)
        .map(|c| c.key.as_str())
        .collect()
}

#[test]
fn kv_alias_names_the_writer_the_address_and_the_reader() {
    let d = diagnose_pair("assets/examples/llama_kv_alias");
    assert!(d.found);
    let f = &d.findings[0];
    assert_eq!(f.rule, Rule::WriterAddressReader);
    assert_eq!(cited(f, Role::Writer), ["layers.0.k_cache_write#1"]);
    assert_eq!(cited(f, Role::Reader), ["layers.0.k_cache_read#1"]);
    assert!(f.evidence.iter().all(|c| c.side == 'b'));
    let address = f.address.as_ref().unwrap();
    assert_eq!(
        (address.storage_id, address.device.as_str()),
        (Some(13), "cpu")
    );
    assert_eq!(address.bytes.1 - address.bytes.0, 12 * 2 * 64 * 4);
    assert!(!f.presumed, "a prefill window: the writer is in it");
    assert!(
        f.text
            .contains("read as [12, 2, 64] stride [128, 64, 1] offset 0"),
        "{}",
        f.text
    );
    assert!(
        f.text
            .contains("written as [12, 2, 64] stride [64, 2048, 1] offset 0"),
        "{}",
        f.text
    );
    assert!(
        d.conclusion.contains("`layers.0.k_cache_write#1`"),
        "{}",
        d.conclusion
    );
    // The reader's divergence is explained: no "operator or inputs" unknown for it.
    assert!(
        !d.unknown
            .iter()
            .any(|u| u.contains("operator or its inputs")),
        "{:?}",
        d.unknown
    );
    let next = d.next.as_ref().unwrap();
    assert_eq!(next.step, Step::Capture);
    assert!(
        next.text
            .contains(r"'^(layers\.0\.k_cache_write|layers\.0\.k_cache_read)$'")
            || next.commands.iter().any(|c| c.contains(
                r"DUMP_PROBE_TENSOR='^(layers\.0\.k_cache_write|layers\.0\.k_cache_read)$'"
            )),
        "{next:?}"
    );
    assert_eq!(d.chain()[0].key, "layers.0.k_cache_write#1");
    assert_eq!(d.chain()[1].key, "layers.0.k_cache_read#1");
}

#[test]
fn kv_alias_bad_side_alone_names_its_first_stride_conflict() {
    // One capture: no divergence to tie the conflict to, but the conflict is the finding.
    let (_, d) = diagnose_one("assets/examples/llama_kv_alias/b");
    assert!(d.found, "{}", d.conclusion);
    let f = &d.findings[0];
    assert_eq!(f.rule, Rule::WriterAddressReader);
    assert_eq!(cited(f, Role::Writer), ["layers.0.k_cache_write#1"]);
    assert_eq!(cited(f, Role::Reader), ["layers.0.k_cache_read#1"]);
    assert!(
        f.text.contains("6 such groups in this window"),
        "{}",
        f.text
    );
    assert!(
        d.next.as_ref().unwrap().text.contains("in the capture"),
        "{:?}",
        d.next
    );
}

#[test]
fn kv_alias_correct_side_alone_has_no_diagnosis() {
    // A's K cache is written and read through one layout: aliases, no conflict, all finite.
    let (_, d) = diagnose_one("assets/examples/llama_kv_alias/a");
    assert!(!d.found);
    assert!(
        d.conclusion.starts_with("No diagnosis: "),
        "{}",
        d.conclusion
    );
    assert!(d.findings.is_empty() && d.next.is_none());
}

#[test]
fn a_later_call_presumes_its_writer() {
    let (a, mut b) = (
        load("assets/examples/llama_kv_alias/a"),
        load("assets/examples/llama_kv_alias/b"),
    );
    b.windows[0].occurrence = 2;
    let mut a = a;
    a.windows[0].occurrence = 2;
    let analysis = Analysis::compute(&a, Some(&b), &Tolerances::default());
    let d = diagnose(&a, Some(&b), &analysis);
    assert_eq!(d.findings[0].rule, Rule::WriterAddressReader);
    assert!(d.findings[0].presumed);
    assert!(
        d.findings[0].text.contains("presumed"),
        "{}",
        d.findings[0].text
    );
}

#[test]
fn fp16_overflow_origin_and_downstream() {
    let d = diagnose_pair("assets/examples/llama_fp16_overflow");
    assert_eq!(rules(&d), [Rule::Origin]);
    let f = &d.findings[0];
    assert_eq!(cited(f, Role::Origin), ["layers.3.mlp_up#1"]);
    assert_eq!(
        cited(f, Role::Downstream),
        [
            "layers.3.mlp_act#1",
            "layers.3.mlp_down#1",
            "layers.3.residual_mlp#1",
            "layers.4.input_norm#1"
        ]
    );
    assert!(
        f.text
            .contains("44 later records are downstream in capture order"),
        "{}",
        f.text
    );
    // A's float32 values exceed float16's range exactly where B goes non-finite.
    assert!(
        f.text.contains(
            "A's values reach |x| = 8.0959e4 there, beyond float16's largest finite value 65504, \
             so B's float16 overflows"
        ),
        "{}",
        f.text
    );
    // Downstream is not "caused by": no input storage links them.
    assert!(cited(f, Role::Propagated).is_empty());
    assert!(
        d.unknown
            .iter()
            .any(|u| u.contains("which of the 44 records")),
        "{:?}",
        d.unknown
    );
    // Controls: no alias conflict, no earlier finite writer over the overflowing bytes.
    assert!(!rules(&d).contains(&Rule::WriterAddressReader));
    assert!(!rules(&d).contains(&Rule::BadBytesWriter));
}

#[test]
fn bad_bytes_names_the_last_finite_writer() {
    let d = diagnose_pair("tests/fixtures/diagnosis/bad_bytes");
    let f = &d.findings[0];
    assert_eq!(f.rule, Rule::BadBytesWriter);
    assert_eq!(cited(f, Role::LastFiniteWriter), ["cache_write#1"]);
    assert_eq!(cited(f, Role::FirstNonFinite), ["cache_read#1"]);
    // The controls (another storage, disjoint bytes) are captured in between, never cited.
    assert!(f.evidence.len() == 2);
    assert!(f.text.contains("between seq 1 and seq 4"), "{}", f.text);
    assert_eq!(d.next.as_ref().unwrap().step, Step::Instrument);
    // Alone, the bad run gives the same finding.
    let (_, alone) = diagnose_one("tests/fixtures/diagnosis/bad_bytes/b");
    assert_eq!(alone.findings[0].rule, Rule::BadBytesWriter);
    // The correct run: nothing.
    let (_, good) = diagnose_one("tests/fixtures/diagnosis/bad_bytes/a");
    assert!(!good.found);
}

#[test]
fn moved_values_name_the_index_stage_that_differs() {
    let d = diagnose_pair("tests/fixtures/diagnosis/index_suspect");
    let f = &d.findings[0];
    assert_eq!(f.rule, Rule::MovedValues);
    assert_eq!(cited(f, Role::Suspect), ["slot_mapping#1"]);
    assert!(
        f.text.contains("`positions#1`") && f.text.contains("not suspects"),
        "{}",
        f.text
    );
    let next = d.next.as_ref().unwrap();
    assert_eq!(next.step, Step::Capture);
    assert_eq!(next.commands.len(), 2, "{next:?}");
    assert!(
        next.commands
            .iter()
            .all(|c| c.contains("DUMP_PROBE_TENSOR='^slot_mapping$'"))
    );
}

#[test]
fn moved_values_stay_silent_after_a_magnitude_divergence() {
    // kv_alias holds values_moved pairs, but only after its magnitude divergence.
    let d = diagnose_pair("assets/examples/llama_kv_alias");
    assert!(!rules(&d).contains(&Rule::MovedValues));
    assert!(
        !d.unknown.iter().any(|u| u.contains("moved")),
        "{:?}",
        d.unknown
    );
}

#[test]
fn first_nonfinite_rank_across_ranks() {
    let (_, d) = diagnose_one("tests/fixtures/layouts/tp2_nan");
    let f = &d.findings[0];
    assert_eq!(f.rule, Rule::AcrossRanks);
    assert_eq!(f.evidence[0].rank, 1);
    assert_eq!(cited(f, Role::Origin), ["layers.0.act#1"]);
    assert!(
        d.conclusion.starts_with("Rank 1 went non-finite first"),
        "{}",
        d.conclusion
    );
    // Rank 0 only received the NaN through the all-reduce: no origin finding of its own.
    assert!(
        d.findings
            .iter()
            .all(|f| f.evidence.iter().all(|c| c.rank == 1))
    );
    let (_, d4) = diagnose_one("tests/fixtures/layouts/tp4_nan");
    assert_eq!(d4.findings[0].evidence[0].rank, 2);
}

#[test]
fn the_collective_before_the_first_nonfinite_rank() {
    let mut a = load("tests/fixtures/layouts/tp2_nan");
    // Mark the record before rank 1's first non-finite one as an all-gather's output.
    for w in a.windows.iter_mut().filter(|w| w.rank == 1) {
        let up = w
            .records
            .iter_mut()
            .find(|r| r.stage.as_str() == "layers.0.up")
            .unwrap();
        up.collective = Some("all_gather".into());
    }
    let analysis = Analysis::compute(&a, None, &Tolerances::default());
    let d = diagnose(&a, None, &analysis);
    cites_hold(&a, None, &analysis, &d);
    let f = &d.findings[0];
    assert_eq!(cited(f, Role::Collective), ["layers.0.up#1"]);
    assert!(
        f.text.contains("`layers.0.up#1` (all_gather)"),
        "{}",
        f.text
    );
}

#[test]
fn replicated_tensor_that_differs_across_ranks() {
    let (_, d) = diagnose_one("tests/fixtures/layouts/tp2_bad_norm");
    let f = &d.findings[0];
    assert_eq!(f.rule, Rule::AcrossRanks);
    assert_eq!(
        cited(f, Role::Origin),
        ["layers.0.norm_weight#1", "layers.0.norm_weight#1"]
    );
    let ranks: Vec<u32> = f.evidence.iter().map(|c| c.rank).collect();
    assert_eq!(ranks, [0, 1]);
    // Control: the correct tp2 capture's replicas agree.
    let (_, good) = diagnose_one("tests/fixtures/layouts/tp2");
    assert!(!good.found, "{}", good.conclusion);
}

#[test]
fn agreeing_pairs_have_no_diagnosis() {
    for pair in [
        "assets/examples/llama_chunked_prefill",
        "assets/examples/llama_eager_vs_graph",
    ] {
        let d = diagnose_pair(pair);
        assert!(!d.found, "{pair}: {}", d.conclusion);
        assert!(d.conclusion.starts_with("No diagnosis: "));
    }
    let graph = diagnose_pair("assets/examples/llama_eager_vs_graph");
    assert!(
        graph
            .conclusion
            .contains("111 records were captured on one side only, MISSING DATA"),
        "{}",
        graph.conclusion
    );
}

#[test]
fn minilm_precision_change_is_an_origin_only() {
    let d = diagnose_pair("assets/examples/minilm_fp32_vs_bf16");
    assert_eq!(rules(&d), [Rule::Origin]);
    assert_eq!(
        cited(&d.findings[0], Role::Origin),
        ["sentence_embedding#1"]
    );
    assert_eq!(d.next.as_ref().unwrap().step, Step::Instrument);
}

#[test]
fn a_reader_shifted_against_the_other_run_names_its_writer() {
    // Both sides A's correct capture, but B's `layers.0.k_cache_read#1` reads one token row
    // further into the cache (same strides: no conflict inside B), and its values differ.
    let a = load("assets/examples/llama_kv_alias/a");
    let mut b = a.clone();
    let reader = b.windows[0]
        .records
        .iter_mut()
        .find(|r| r.key() == "layers.0.k_cache_read#1")
        .unwrap();
    reader.storage_offset += 128;
    reader.data_ptr = reader.data_ptr.map(|p| p + 128 * 4);
    reader.shape = vec![11, 2, 64].into();
    let stats = reader.stats.as_mut().unwrap();
    stats.l2 = stats.l2.map(|l2| l2 * 0.5);
    let analysis = Analysis::compute(&a, Some(&b), &Tolerances::default());
    assert!(
        analysis.scans_b[0]
            .alias_groups
            .iter()
            .all(|g| !g.stride_conflict)
    );
    let d = diagnose(&a, Some(&b), &analysis);
    cites_hold(&a, Some(&b), &analysis, &d);
    let f = &d.findings[0];
    assert_eq!(f.rule, Rule::WriterAddressReader);
    assert_eq!(cited(f, Role::Writer), ["layers.0.k_cache_write#1"]);
    assert_eq!(cited(f, Role::Reader), ["layers.0.k_cache_read#1"]);
    assert!(!f.text.contains("stride conflict"), "{}", f.text);
    assert!(
        f.text
            .contains("read as [11, 2, 64] stride [128, 64, 1] offset 128"),
        "{}",
        f.text
    );
    assert!(f.text.contains("In A the writer goes through [12, 2, 64] stride [128, 64, 1] offset 0 and the reader through [12, 2, 64] stride [128, 64, 1] offset 0"), "{}", f.text);
}

#[test]
fn hooked_inputs_agree_so_the_operator_differs_and_its_reader_is_propagated() {
    let d = diagnose_pair("tests/fixtures/diagnosis/hooked_op");
    let f = &d.findings[0];
    assert_eq!(f.rule, Rule::OperatorOrInputs);
    assert_eq!(cited(f, Role::Origin), ["norm#1"]);
    assert_eq!(cited(f, Role::Input), ["norm.input.0#1"]);
    assert_eq!(f.inputs.len(), 1);
    assert_eq!(f.inputs[0].verdict, "agree");
    assert!(
        f.text
            .contains("the operator (or its configuration) differs here"),
        "{}",
        f.text
    );
    let origin = d.findings.iter().find(|f| f.rule == Rule::Origin).unwrap();
    assert_eq!(
        cited(origin, Role::Propagated),
        ["proj.input.0#1", "proj#1"]
    );
    // The root's output is downstream only: no input of it was captured on those bytes.
    assert_eq!(cited(origin, Role::Downstream), ["Tiny#1"]);
}

#[test]
fn input_sets_agree_so_the_operator_differs() {
    let d = diagnose_pair("tests/fixtures/diagnosis/op_differs");
    let f = &d.findings[0];
    assert_eq!(f.rule, Rule::OperatorOrInputs);
    let verdicts: Vec<(&str, &str)> = f
        .inputs
        .iter()
        .map(|i| (i.name.as_str(), i.verdict.as_str()))
        .collect();
    assert_eq!(
        verdicts,
        [("eps", "agree"), ("weight", "agree"), ("x", "agree")]
    );
    assert!(
        f.text
            .contains("the operator (or its configuration) differs here"),
        "{}",
        f.text
    );
    assert!(
        f.text
            .contains("B called `tests/fixtures/diagnosis/ops.py:rms_norm_no_weight`"),
        "{}",
        f.text
    );
    let next = d.next.as_ref().unwrap();
    assert_eq!(next.step, Step::CrossReplay);
    assert_eq!(next.commands.len(), 1);
    assert!(
        next.commands[0].starts_with("dumpview replay --cross "),
        "{next:?}"
    );
    assert!(next.commands[0].ends_with(" --stage norm#1"), "{next:?}");
}

#[test]
fn input_sets_differ_so_look_upstream() {
    let d = diagnose_pair("tests/fixtures/diagnosis/inputs_differ");
    let f = &d.findings[0];
    assert_eq!(f.rule, Rule::OperatorOrInputs);
    let differing: Vec<&str> = f
        .inputs
        .iter()
        .filter(|i| i.verdict != "agree")
        .map(|i| i.name.as_str())
        .collect();
    assert_eq!(differing, ["x"]);
    assert_eq!(cited(f, Role::Upstream), ["embed#1"]);
    assert!(f.text.contains("inputs already differ"), "{}", f.text);
    assert!(!f.text.contains("differs here"), "{}", f.text);
    assert_eq!(d.next.as_ref().unwrap().step, Step::Instrument);
}

#[test]
fn inputs_on_one_side_only_are_not_known() {
    let a = load("tests/fixtures/diagnosis/op_differs/a");
    let mut b = load("tests/fixtures/diagnosis/op_differs/b");
    b.windows[0].input_sets.clear();
    let analysis = Analysis::compute(&a, Some(&b), &Tolerances::default());
    let d = diagnose(&a, Some(&b), &analysis);
    assert!(!rules(&d).contains(&Rule::OperatorOrInputs));
    assert!(
        d.unknown
            .iter()
            .any(|u| u.contains("only A captured its input set")),
        "{:?}",
        d.unknown
    );
}

#[test]
fn a_pipeline_stage_on_another_rank_is_found() {
    // pp2: layers.1 runs on rank 1; the diff pairs the merged pipeline as logical rank 0.
    let a = load("tests/fixtures/layouts/pp1");
    let b = load("tests/fixtures/layouts/pp2_bad_stage");
    let analysis = Analysis::compute(&a, Some(&b), &Tolerances::default());
    let d = diagnose(&a, Some(&b), &analysis);
    cites_hold(&a, Some(&b), &analysis, &d);
    assert!(d.found, "{}", d.conclusion);
    let origin = &d.findings[0];
    assert_eq!(origin.rule, Rule::Origin);
    assert_eq!(cited(origin, Role::Origin), ["layers.1.up#1"]);
    assert_eq!(origin.evidence[0].rank, 1);
}

/// The layout in the words the diagnosis uses (`[12, 2, 64] stride [64, 2048, 1] offset 0`).
fn layout_words(record: &Record) -> String {
    format!(
        "{:?} stride {:?} offset {}",
        record.shape.to_vec(),
        record.stride.to_vec(),
        record.storage_offset
    )
}

#[test]
fn the_first_bad_token_is_the_origin_when_the_headline_names_it() {
    let d = diagnose_pair("assets/token_examples/tokens_bug_in_one_chunk");
    let origin = d.findings.iter().find(|f| f.rule == Rule::Origin).unwrap();
    assert_eq!(cited(origin, Role::Origin), ["layers.0.q_rope#1"]);
    assert!(
        origin
            .text
            .contains("request `req-0` position 5 (token id 611)"),
        "{}",
        origin.text
    );
    assert!(
        origin
            .text
            .contains("The records' first divergence, `layers.0.k_cache_read#1`, comes later"),
        "{}",
        origin.text
    );
    // Batched against alone: no window pairs whole, every aligned row agrees.
    let agree = diagnose_pair("assets/token_examples/tokens_batched_vs_alone");
    assert!(!agree.found);
    assert!(
        agree
            .conclusion
            .contains("1484 aligned token rows compared, all agree"),
        "{}",
        agree.conclusion
    );
}

#[test]
fn a_nan_received_through_an_in_place_all_reduce_is_not_a_bad_bytes_finding() {
    // tp2_nan with rank 0's all-reduce in place: `layers.0.down#1` lies on the bytes of
    // `layers.0.down_partial#1`, captured finite before the collective brought rank 1's NaN.
    let mut a = load("tests/fixtures/layouts/tp2_nan");
    for w in a.windows.iter_mut() {
        let partial = w
            .records
            .iter()
            .find(|r| r.stage.as_str() == "layers.0.down_partial")
            .unwrap()
            .clone();
        let down = w
            .records
            .iter_mut()
            .find(|r| r.stage.as_str() == "layers.0.down")
            .unwrap();
        assert!(down.collective.is_some());
        down.storage_id = partial.storage_id;
        down.storage_ptr = partial.storage_ptr;
        down.data_ptr = partial.data_ptr;
        down.storage_offset = partial.storage_offset;
    }
    let analysis = Analysis::compute(&a, None, &Tolerances::default());
    let d = diagnose(&a, None, &analysis);
    cites_hold(&a, None, &analysis, &d);
    assert!(
        !rules(&d).contains(&Rule::BadBytesWriter),
        "{:#?}",
        d.findings
    );
    assert_eq!(d.findings[0].rule, Rule::AcrossRanks);
    assert_eq!(d.findings[0].evidence[0].rank, 1);
}

#[test]
fn a_replicated_record_that_is_itself_a_collective_says_so() {
    let (_, d) = diagnose_one("tests/fixtures/layouts/tp2_no_all_reduce");
    let f = d
        .findings
        .iter()
        .find(|f| f.rule == Rule::AcrossRanks)
        .expect("a replica finding");
    assert!(
        f.text.contains("is itself the output of a collective"),
        "{}",
        f.text
    );
    assert!(!f.text.contains("the collective before it"), "{}", f.text);
}

#[test]
fn moved_values_with_the_index_stages_saved_whole_ask_for_the_ablation() {
    let a = load("tests/fixtures/diagnosis/index_suspect/a");
    let mut b = load("tests/fixtures/diagnosis/index_suspect/b");
    let mut a = a;
    for dump in [&mut a, &mut b] {
        let slots = dump.windows[0]
            .records
            .iter_mut()
            .find(|r| r.stage.as_str() == "slot_mapping")
            .unwrap();
        slots.tensor_file = Some("tensors/slot_mapping#1.safetensors".into());
        slots.truncated = Some(false);
    }
    let analysis = Analysis::compute(&a, Some(&b), &Tolerances::default());
    let d = diagnose(&a, Some(&b), &analysis);
    let next = d.next.as_ref().unwrap();
    assert_eq!(next.step, Step::Ablation, "{next:?}");
    assert!(next.commands.is_empty());
}

#[test]
fn two_runs_recorded_with_one_directory_get_one_new_directory_each() {
    let mut a = load("tests/fixtures/diagnosis/index_suspect/a");
    let mut b = load("tests/fixtures/diagnosis/index_suspect/b");
    for dump in [&mut a, &mut b] {
        let run = dump.windows[0].run.as_mut().unwrap();
        run.env.remove("DUMP_PROBE_DIR");
        // Not a probe setting: never printed back.
        run.env.insert("EVIL".into(), "1".into());
    }
    let analysis = Analysis::compute(&a, Some(&b), &Tolerances::default());
    let d = diagnose(&a, Some(&b), &analysis);
    let commands = &d.next.as_ref().unwrap().commands;
    assert_eq!(commands.len(), 2);
    assert!(
        commands[0].contains("DUMP_PROBE_DIR=dump_probe_out-next-a "),
        "{}",
        commands[0]
    );
    assert!(
        commands[1].contains("DUMP_PROBE_DIR=dump_probe_out-next-b "),
        "{}",
        commands[1]
    );
    assert!(commands.iter().all(|c| !c.contains("EVIL")));
}

#[test]
fn a_rank_of_a_job_is_told_to_start_the_way_the_job_was_launched() {
    let mut a = load("tests/fixtures/layouts/tp2_nan");
    for w in &mut a.windows {
        w.run = Some(dumpview::model::dump::RunInfo {
            argv: vec!["tp.py".into()],
            cwd: "/work".into(),
            executable: Some("/usr/bin/python3".into()),
            env: [("DUMP_PROBE_DIR".to_string(), "out".to_string())]
                .into_iter()
                .collect(),
        });
    }
    let analysis = Analysis::compute(&a, None, &Tolerances::default());
    let d = diagnose(&a, None, &analysis);
    let next = d.next.as_ref().unwrap();
    assert_eq!(next.commands.len(), 1);
    assert!(
        next.commands[0].contains("DUMP_PROBE_RANKS=all"),
        "{}",
        next.commands[0]
    );
    assert!(
        next.text.contains("rank 1's, one process of a 2-rank job"),
        "{}",
        next.text
    );
}

#[test]
fn an_input_set_on_the_origins_bytes_shows_its_operator_reads_the_origin() {
    // hooked_op's B with an input set for `proj` whose argument is `proj.input.0#1`'s tensor
    // (the origin `norm#1`'s output), linked to `proj#1`.
    let a = load("tests/fixtures/diagnosis/hooked_op/a");
    let mut b = load("tests/fixtures/diagnosis/hooked_op/b");
    let window = &mut b.windows[0];
    let input = window
        .records
        .iter()
        .find(|r| r.key() == "proj.input.0#1")
        .unwrap()
        .clone();
    let desc = serde_json::json!({
        "kind": "tensor",
        "dtype": input.dtype.as_str(),
        "shape": input.shape.to_vec(),
        "stride": input.stride.to_vec(),
        "storage_offset": input.storage_offset,
        "element_size": input.element_size,
        "numel": input.numel,
        "storage_ptr": input.storage_ptr,
        "storage_id": input.storage_id,
        "data_ptr": input.data_ptr,
        "device": input.device.as_str(),
        "is_contiguous": input.is_contiguous,
    });
    window
        .input_sets
        .push(dumpview::model::dump::InputSetEntry {
            stage: "proj".into(),
            occurrence: 1,
            file: "inputs/proj#1.pt".into(),
            op: None,
            args: [("x".to_string(), desc)].into_iter().collect(),
            outputs: vec![dumpview::model::dump::InputSetOutput {
                key: "proj#1".into(),
                file: None,
            }],
        });
    window.records.retain(|r| !r.stage.contains(".input."));
    let analysis = Analysis::compute(&a, Some(&b), &Tolerances::default());
    let d = diagnose(&a, Some(&b), &analysis);
    let origin = d.findings.iter().find(|f| f.rule == Rule::Origin).unwrap();
    assert_eq!(
        cited(origin, Role::Propagated),
        ["proj#1"],
        "{}",
        origin.text
    );
    assert!(
        origin
            .text
            .contains("input set `proj#1` argument `x` is its output"),
        "{}",
        origin.text
    );
}

#[test]
fn a_duplicate_shard_points_at_the_loader_of_its_weights() {
    let (_, d) = diagnose_one("tests/fixtures/single_run/dup_shard");
    assert_eq!(rules(&d), [Rule::SingleRun; 3]);
    assert!(d.found);
    assert!(
        d.conclusion.starts_with(
            "Duplicate shards: layers.0.up.weight#1 (tp:0) holds the same piece on every tp \
             rank (0 and 1)"
        ),
        "{}",
        d.conclusion
    );
    let top = &d.findings[0];
    assert_eq!(cited(top, Role::Duplicate), ["layers.0.up.weight#1"; 2]);
    assert!(
        top.text
            .contains("Look at the code that loads or slices layers.0.up.weight's weights")
    );
    let next = d.next.as_ref().unwrap();
    assert_eq!(next.step, Step::Instrument);
    assert!(
        next.text
            .contains("which slice each rank's loader reads for `layers.0.up.weight#1`")
    );
}

#[test]
fn a_silent_rank_points_at_the_dispatch_and_a_stale_output_at_the_buffer() {
    let (_, d) = diagnose_one("tests/fixtures/single_run/silent_rank_dp");
    assert_eq!(rules(&d), [Rule::SingleRun]);
    assert_eq!(cited(&d.findings[0], Role::Silent), ["layers.0.experts#1"]);
    assert_eq!(cited(&d.findings[0], Role::Control), ["layers.0.experts#1"]);
    assert!(
        d.findings[0]
            .text
            .contains("Look at the dispatch or routing before layers.0.experts")
    );
    let (_, d) = diagnose_one("tests/fixtures/single_run/stale_output");
    assert_eq!(rules(&d), [Rule::SingleRun]);
    let f = &d.findings[0];
    assert_eq!(cited(f, Role::Stale), ["layers.0.attn_out#1"]);
    assert_eq!(cited(f, Role::Previous), ["layers.0.attn_out#1"]);
    assert_eq!(cited(f, Role::Before), ["layers.0.q#1", "layers.0.q#1"]);
    assert_eq!(d.next.as_ref().unwrap().step, Step::Capture);
    // The controls: nothing to diagnose.
    for control in ["dup_shard_ok", "silent_rank_ok", "stale_output_ok"] {
        let (_, d) = diagnose_one(&format!("tests/fixtures/single_run/{control}"));
        assert!(!d.found, "{control}: {}", d.conclusion);
    }
}

#[test]
fn a_moved_write_names_its_writer_and_the_address_before_the_read_it_spoils() {
    let d = diagnose_pair("tests/fixtures/single_run/moved_write");
    assert_eq!(rules(&d), [Rule::MovedWrite, Rule::Origin]);
    let f = &d.findings[0];
    assert_eq!(cited(f, Role::Writer), ["layers.0.kv_write#1"]);
    assert_eq!(f.evidence[0].side, 'b');
    assert_eq!(cited(f, Role::Partner), ["layers.0.kv_write#1"]);
    assert!(f.address.is_some());
    assert!(
        d.conclusion.starts_with(
            "Same values, written elsewhere: layers.0.kv_write#1 is written to block 2"
        ),
        "{}",
        d.conclusion
    );
    assert_eq!(cited(&d.findings[1], Role::Origin), ["layers.0.kv_read#1"]);
    let d = diagnose_pair("tests/fixtures/single_run/moved_write_ok");
    assert!(!d.found, "{}", d.conclusion);
}
