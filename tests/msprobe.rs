//! msprobe dumps (tests/fixtures/msprobe/): real ones (resnet_gpu from a GPU training run,
//! torch_npu_ops from Ascend) and small ones made on CPU by make_msprobe.py. Answers are
//! asserted exactly; names and pairing are checked against `msprobe compare`'s own table.

mod support;

use std::path::{Path, PathBuf};

use dumpview::model::dump::Dump;
use dumpview::model::dump::{Record, SourceFormat, Window};
use dumpview::model::formats::FormatError;
use dumpview::model::ingest::{LoadError, load};
use support::run::dumpview_in_repo as dumpview;

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/msprobe")
        .join(path)
}

fn load_clean(path: &str) -> Dump {
    let dump = load(&[fixture(path)], &mut |_| {}).unwrap();
    assert!(dump.warnings.is_empty(), "{:?}", dump.warnings);
    dump
}

fn window(path: &str) -> Window {
    let mut dump = load_clean(path);
    assert_eq!(dump.windows.len(), 1, "{path}");
    dump.windows.remove(0)
}

fn record<'m>(window: &'m Window, stage: &str) -> (usize, &'m Record) {
    window
        .records
        .iter()
        .enumerate()
        .find(|(_, r)| r.stage == stage)
        .unwrap_or_else(|| panic!("no record {stage}"))
}

fn context<'m>(window: &'m Window, index: usize, label: &str) -> Vec<&'m str> {
    window
        .context
        .as_ref()
        .expect("msprobe windows carry context")
        .of(index)
        .iter()
        .filter(|(l, _)| l == label)
        .map(|(_, v)| v.as_str())
        .collect()
}

const RESNET0: &str = "tests/fixtures/msprobe/resnet_gpu/step0";
const RESNET1: &str = "tests/fixtures/msprobe/resnet_gpu/step1";

#[test]
fn resnet_step0_is_one_window_of_msprobe_rows() {
    let w = window("resnet_gpu/step0");
    assert_eq!(w.format, SourceFormat::Msprobe);
    assert_eq!((w.rank, w.world_size), (0, 1));
    assert_eq!(
        (w.label.as_str(), w.match_index, w.occurrence),
        ("step0", 1, 1)
    );
    let meta = serde_json::Value::Object(w.metadata.clone());
    assert_eq!(
        meta,
        serde_json::json!({"task": "statistics", "level": "mix", "framework": "pytorch",
                           "summary_mode": "statistics", "step": 0, "pid": 2016})
    );
    // Every row msprobe compare makes of this file (its table has 2822 rows).
    assert_eq!(w.records.len(), 2822);

    let first = &w.records[0];
    assert_eq!(first.key(), "Functional.conv2d.0.forward.input.0#1");
    assert_eq!(
        (first.seq, &*first.dtype, first.element_size),
        (0, "float32", 4)
    );
    assert_eq!(&*first.shape, &[32, 3, 224, 224]);
    assert_eq!(&*first.stride, &[150528, 50176, 224, 1]);
    assert_eq!(
        (first.numel, first.storage_offset, first.storage_ptr),
        (4816896, 0, None)
    );
    let s = first.stats.as_ref().unwrap();
    assert_eq!((s.max, s.min), (Some(1.0), Some(0.0)));
    assert_eq!(
        (s.mean, s.l2),
        (Some(0.4993983507156372), Some(1267.74462890625))
    );
    assert_eq!((s.max_abs, s.pos_checksum), (Some(1.0), None));
    assert!(!s.counts_known);
    assert_eq!(
        (s.nan_count, s.inf_count, s.finite_count),
        (0, 0, Some(4816896))
    );

    // Rows of an entry: inputs (a None bias, nested int lists), then outputs.
    let stages: Vec<&str> = w.records[..9].iter().map(|r| r.stage.as_str()).collect();
    assert_eq!(
        stages,
        [
            "Functional.conv2d.0.forward.input.0",
            "Functional.conv2d.0.forward.input.1",
            "Functional.conv2d.0.forward.input.2",
            "Functional.conv2d.0.forward.input.3.0",
            "Functional.conv2d.0.forward.input.3.1",
            "Functional.conv2d.0.forward.input.4.0",
            "Functional.conv2d.0.forward.input.4.1",
            "Functional.conv2d.0.forward.input.5.0",
            "Functional.conv2d.0.forward.input.5.1",
        ]
    );
    assert_eq!(
        (&*w.records[2].dtype, w.records[2].stats.as_ref()),
        ("None", None)
    );
    let stride = &w.records[3];
    assert_eq!(
        (&*stride.dtype, stride.shape.len(), stride.numel),
        ("int", 0, 1)
    );
    let s = stride.stats.as_ref().unwrap();
    assert_eq!(
        (s.max, s.min, s.mean, s.l2, s.counts_known),
        (Some(2.0), Some(2.0), Some(2.0), Some(2.0), true)
    );
    // A module's parameters come before its outputs.
    let (i, _) = record(&w, "Module.conv1.Conv2d.forward.0.parameters.weight");
    assert_eq!(
        w.records[i + 1].stage,
        "Module.conv1.Conv2d.forward.0.output.0"
    );
}

/// The original row name of record `i`: its stage, or for a renumbered backward call the
/// dump.json key (the context's `entry` line) with the stage's row path.
fn msprobe_name(w: &Window, i: usize) -> String {
    let stage = w.records[i].stage.as_str();
    match context(w, i, "entry").first() {
        Some(entry) => {
            let depth = entry.split('.').count();
            let rest: Vec<&str> = stage.split('.').skip(depth).collect();
            format!("{entry}.{}", rest.join("."))
        }
        None => stage.to_string(),
    }
}

#[test]
fn names_and_pairing_are_msprobe_compares() {
    // msprobe compare -tp step1/.../dump.json -gp step0/.../dump.json: NPU Name, matched.
    let table = std::fs::read_to_string(fixture("resnet_gpu/compare_step1_vs_step0.csv")).unwrap();
    let rows: Vec<(&str, bool)> = table
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (name, matched) = l.rsplit_once(',').unwrap();
            (name, matched == "1")
        })
        .collect();
    let (step0, step1) = (window("resnet_gpu/step0"), window("resnet_gpu/step1"));
    assert_eq!(step1.records.len(), rows.len());
    let in_step0: std::collections::HashSet<&str> =
        step0.records.iter().map(|r| r.stage.as_str()).collect();
    let mut renamed = 0;
    for (i, (name, matched)) in rows.iter().enumerate() {
        let ours = msprobe_name(&step1, i);
        assert_eq!(ours, *name, "row {i}");
        renamed += usize::from(ours != step1.records[i].stage);
        assert_eq!(
            in_step0.contains(step1.records[i].stage.as_str()),
            *matched,
            "row {i}: {name}"
        );
    }
    assert_eq!(rows.iter().filter(|(_, m)| *m).count(), 2661);
    // Backward API calls come in reverse order, so most pair under a renumbered call.
    assert!(renamed > 500, "{renamed}");
    let (i, r) = record(&step1, "Functional.conv2d.0.backward.input.0");
    assert_eq!(
        context(&step1, i, "entry"),
        ["Functional.conv2d.52.backward"]
    );
    assert_eq!(&*r.shape, &[32, 2048, 7, 7]);
}

#[test]
fn diff_of_two_steps_pairs_rows_as_msprobe_does() {
    let out = dumpview()
        .args(["diff", RESNET0, RESNET1])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    // cross_entropy's `reduction` string is named, not compared: the one pair without statistics.
    assert!(
        text.contains(
            "coverage: 2661 paired, 1 not compared (no statistics on either side), 161 only in A, 161 only in B"
        ),
        "{text}"
    );
    assert!(
        text.contains("not compared: Functional.cross_entropy.0.forward.input.reduction#1\n"),
        "{text}"
    );
    assert!(
        text.contains("first divergence: Functional.conv2d.0.forward.input.1#1 (position 1, seq 1 / 1): statistics differ beyond tolerance"),
        "{text}"
    );
    // The input batch (same images, other order) agrees: its mean is judged against its RMS.
    let json = dumpview()
        .args(["diff", "--json", RESNET0, RESNET1])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let w = &value["diff"]["windows"][0];
    assert_eq!(w["pairs"].as_array().unwrap().len(), 2661);
    assert_eq!(
        w["pairs"][0]["key"],
        "Functional.conv2d.0.forward.input.0#1"
    );
    assert_eq!(w["pairs"][0]["verdict"]["kind"], "agree");
    // msprobe leaves these unmatched too: parameters_grad.0 in step0, .1 in step1.
    assert_eq!(w["only_a"][0], "Module.fc.Linear.parameters_grad.0.bias#1");
    assert_eq!(w["only_b"][0], "Module.fc.Linear.parameters_grad.1.bias#1");
}

#[test]
fn scan_names_the_first_non_finite_row_with_counts_unknown() {
    let out = dumpview()
        .args(["scan", "tests/fixtures/msprobe/mlp_nan"])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("label \"step0\""), "{text}");
    assert!(
        text.contains("first non-finite: Functional.linear.0.forward.input.0#1 (position 0, seq 0): NaN/inf present (counts unknown); 12 non-finite records in all"),
        "{text}"
    );
    let json = dumpview()
        .args(["scan", "--json", "tests/fixtures/msprobe/mlp_nan/step1"])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let nf = &value["windows"][0]["first_nonfinite"];
    assert_eq!(nf["key"], "Functional.linear.0.forward.input.0#1");
    assert_eq!(
        (nf["inf_count"].as_u64(), nf["counts_known"].as_bool()),
        (Some(1), Some(false))
    );

    // The inf in the input: Max is inf, the rest follows; rank0 of a one-rank world.
    let w = window("mlp_nan/step1");
    assert_eq!((w.rank, w.world_size, w.occurrence), (0, 1, 2));
    let s = w.records[0].stats.as_ref().unwrap();
    assert_eq!(
        (s.max, s.nan_count, s.inf_count),
        (Some(f64::INFINITY), 0, 1)
    );
    assert!(w.metadata.get("pid").is_none());
}

#[test]
fn a_bool_tensor_with_null_mean_and_norm_loads() {
    let w = window("torch_npu_ops");
    assert_eq!((w.label.as_str(), w.occurrence, w.rank), ("", 1, 0));
    assert_eq!(w.records.len(), 71);
    let (i, r) = record(&w, "Tensor.__or__.0.forward.input.0");
    assert_eq!(
        (&*r.dtype, &*r.shape, r.element_size),
        ("bool", &[1, 4096][..], 1)
    );
    let s = r.stats.as_ref().unwrap();
    assert_eq!(
        (s.max, s.min, s.mean, s.l2),
        (Some(0.0), Some(0.0), None, None)
    );
    assert_eq!(
        (s.max_abs, s.finite_count, s.nan_count),
        (Some(0.0), Some(4096), 0)
    );
    // The old stack.json format ({name: [frames]}) and construct.json's "" for the top.
    assert_eq!(
        context(&w, i, "module"),
        [
            "Module.module.module.language_model.embedding.word_embeddings.VocabParallelEmbedding.forward.0",
            "Module.module.module.language_model.embedding.Embedding.forward.0",
        ]
    );
    let stack = context(&w, i, "stack");
    assert_eq!(
        stack[0],
        "/path_to_package/third_party/MindSpeed/mindspeed/core/tensor_parallel/layers.py:19 vocab_parallel_embedding_forward: input_mask = (input_ < self.vocab_start_index) | \\"
    );
    assert_eq!(
        *stack.last().unwrap(),
        "/path_to_net/PanGu/pretrain_gpt.py:392 <module>: main()"
    );
    let (i, _) = record(&w, "Tensor.__add__.0.forward.input.0");
    assert!(context(&w, i, "module").is_empty());
}

#[test]
fn rows_carry_their_module_chain_and_stack() {
    let w = window("resnet_gpu/step0");
    let (i, _) = record(&w, "Functional.conv2d.1.forward.output.0");
    // Innermost first: the parent, then its parents.
    assert_eq!(
        context(&w, i, "module"),
        [
            "Module.layer1.0.conv1.Conv2d.forward.0",
            "Module.layer1.0.Bottleneck.forward.0",
            "Module.layer1.Sequential.forward.0",
        ]
    );
    // Innermost call first; msprobe's hook and torch.nn.Module's call plumbing left out.
    assert_eq!(
        context(&w, i, "stack"),
        [
            "torch/nn/modules/conv.py:543 _conv_forward: return F.conv2d(",
            "torch/nn/modules/conv.py:548 forward: return self._conv_forward(input, self.weight, self.bias)",
            "torchvision/models/resnet.py:146 forward: out = self.conv1(x)",
            "torch/nn/modules/container.py:244 forward: input = module(input)",
            "torchvision/models/resnet.py:273 _forward_impl: x = self.layer1(x)",
            "torchvision/models/resnet.py:285 forward: return self._forward_impl(x)",
            "/root/precision_sample.py:32 <module>: loss = criterion(model(images), target)",
        ]
    );
    // Every row of the entry shares its lines.
    let (j, _) = record(&w, "Functional.conv2d.1.forward.input.0");
    assert_eq!(
        w.context.as_ref().unwrap().of(j),
        w.context.as_ref().unwrap().of(i)
    );
}

#[test]
fn a_cut_dump_keeps_its_rows_and_says_where() {
    let full = window("resnet_gpu/step0");
    let bytes = std::fs::read(fixture("resnet_gpu/step0/proc2016/dump.json")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let proc = dir.path().join("step0/proc2016");
    std::fs::create_dir_all(&proc).unwrap();
    let cut = bytes.len() / 2;
    std::fs::write(proc.join("dump.json"), &bytes[..cut]).unwrap();

    let dump = load(&[dir.path().to_path_buf()], &mut |_| {}).unwrap();
    assert_eq!(dump.warnings.len(), 1, "{:?}", dump.warnings);
    let warning = dump.warnings[0].to_string();
    assert!(warning.contains("proc2016/dump.json"), "{warning}");
    assert!(
        warning.contains(&format!(
            "truncated or damaged: stops being valid JSON at byte {cut} (the file ends early (EOF))"
        )),
        "{warning}"
    );
    let kept = &dump.windows[0].records;
    assert!(
        kept.len() > 1000 && kept.len() < full.records.len(),
        "{}",
        kept.len()
    );
    assert_eq!(kept[..], full.records[..kept.len()]);
    // No construct.json or stack.json beside it: no lines, no complaint.
    assert!(dump.windows[0].context.as_ref().unwrap().groups.is_empty());
}

#[test]
fn a_dump_json_that_is_not_json_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dump.json");
    std::fs::write(&file, "<html>rate limited</html>").unwrap();
    let error = load(&[dir.path().to_path_buf()], &mut |_| {}).unwrap_err();
    assert!(matches!(
        error,
        LoadError::Format(FormatError::Msprobe { .. })
    ));
    assert_eq!(
        error.to_string(),
        format!(
            "{}: not an msprobe dump.json: expected `{{` at byte 0",
            file.display()
        )
    );
    let out = dumpview()
        .arg("scan")
        .arg(&file)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    assert!(
        String::from_utf8(out)
            .unwrap()
            .contains("dump.json: not an msprobe dump.json")
    );
}

fn proc_dir(path: &str) -> PathBuf {
    let dir = fixture(path);
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("proc"))
        .unwrap_or_else(|| panic!("no proc dir in {}", dir.display()))
}

#[test]
fn tensor_mode_rows_point_at_their_pt_files() {
    let w = window("mlp_tensor/step0");
    assert_eq!(w.metadata["task"], "tensor");
    let (_, r) = record(&w, "Functional.linear.0.forward.output.0");
    assert_eq!(
        r.tensor_file.as_deref(),
        Some("dump_tensor_data/Functional.linear.0.forward.output.0.pt")
    );
    let path = r.tensor_path(w.window_dir()).unwrap().unwrap();
    assert!(path.is_file(), "{}", path.display());
    // A tensor passed as a keyword argument: named by its file, as msprobe names it then.
    let (_, kwarg) = record(&w, "Functional.linear.1.forward.kwargs.weight");
    assert_eq!(&*kwarg.shape, &[4, 16]);
    let saved = w.records.iter().filter(|r| r.tensor_file.is_some()).count();
    let files = std::fs::read_dir(proc_dir("mlp_tensor/step0").join("dump_tensor_data"))
        .unwrap()
        .count();
    assert_eq!(saved, files);

    let name = "dump_tensor_data/Functional.linear.0.forward.output.0.pt";
    let (a, b) = (
        proc_dir("mlp_tensor/step0").join(name),
        proc_dir("mlp_tensor/step1").join(name),
    );
    let out = dumpview()
        .arg("tensors")
        .arg(&a)
        .arg(&b)
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("float32, shape [3, 16], 48 elements"),
        "{text}"
    );
    assert!(text.contains("0 of 1 compared pair close"), "{text}");
}

#[test]
fn md5_dumps_keep_their_checksums_as_context() {
    let w = &load_clean("mlp_md5").windows[0];
    assert_eq!(w.metadata["summary_mode"], "md5");
    let (i, r) = record(w, "Functional.linear.0.forward.output.0");
    assert!(r.stats.is_some());
    let sums = context(w, i, "md5");
    assert_eq!(sums.len(), 4, "{sums:?}");
    assert!(
        sums[3].starts_with("output.0 ") && sums[3].len() == "output.0 ".len() + 8,
        "{sums:?}"
    );
}

#[test]
fn generated_steps_load_as_two_windows_of_one_rank() {
    let dump = load_clean("mlp_mix");
    let labels: Vec<(&str, u32)> = dump
        .windows
        .iter()
        .map(|w| (w.label.as_str(), w.occurrence))
        .collect();
    assert_eq!(labels, [("step0", 1), ("step1", 2)]);
    assert_eq!(dump.windows[0].records.len(), 82);
    let w = &dump.windows[0];
    // A 0-d int64 tensor (a bool mask summed) and the bool mask itself.
    let (_, count) = record(w, "Tensor.sum.0.forward.output.0");
    assert_eq!((&*count.dtype, count.shape.len()), ("int64", 0));
    let (_, mask) = record(w, "Tensor.__gt__.0.forward.output.0");
    assert_eq!(&*mask.dtype, "bool");
    let (_, grads) = record(w, "Module.head.Head.parameters_grad.0.weight");
    assert_eq!(&*grads.shape, &[4, 16]);
}

const FP16: &str = "tests/fixtures/msprobe/mlp_fp16/float16";
const FP32: &str = "tests/fixtures/msprobe/mlp_fp16/float32";
const LARGE_WEIGHT: &str = "Functional.linear.2.forward.input.1";
const FIRST_OVERFLOW: &str = "Functional.linear.2.forward.output.0";

/// Issue 11, item 7: msprobe reduces a float16 tensor in float16, so the large last weight's
/// `Norm` is inf although its every element is finite; that is msprobe's overflow, not the
/// model's: the weight is not the first divergence, the linear's output (which does overflow
/// float16) is, and the overflowed Norm is named in every output.
#[test]
fn a_norm_msprobe_overflowed_in_float16_is_named_and_not_a_divergence() {
    let w = window("mlp_fp16/float16");
    let (position, weight) = record(&w, LARGE_WEIGHT);
    let s = weight.stats.as_ref().unwrap();
    assert_eq!(
        (&*weight.dtype, &*weight.shape),
        ("float16", &[256, 256][..])
    );
    assert!(
        s.max_abs.is_some_and(|m| m.is_finite() && m <= 65504.0),
        "{s:?}"
    );
    assert_eq!(
        (s.l2, s.nan_count, s.inf_count),
        (Some(f64::INFINITY), 0, 0)
    );
    assert!(s.reduced_in_dtype);
    assert_eq!(position, 27);
    let (output_position, _) = record(&w, FIRST_OVERFLOW);
    assert_eq!(output_position, 29);

    // scan: the first non-finite row is the output, not the weight.
    let out = dumpview().args(["scan", FP16]).assert().code(1);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains(&format!(
            "first non-finite: {FIRST_OVERFLOW}#1 (position 29, seq 29): NaN/inf present (counts unknown)"
        )),
        "{text}"
    );

    // diff: float16 (A, msprobe's target) against float32 (B, the golden).
    let out = dumpview().args(["diff", FP16, FP32]).assert().code(1);
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains(&format!(
            "first divergence: {FIRST_OVERFLOW}#1 (position 29, seq 29 / 29): NaN/inf counts differ"
        )),
        "{text}"
    );
    assert!(
        text.contains("overflowed in the dump tool (not compared): 2 paired records"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "   {LARGE_WEIGHT}#1: l2 overflowed in the dump's float16 accumulation on side A (inf while every element is finite, max_abs 4.6592e4)"
        )),
        "{text}"
    );
    let out = dumpview()
        .args(["diff", "--json", FP16, FP32])
        .assert()
        .code(1);
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let w = &json["diff"]["windows"][0];
    assert_eq!(w["first_divergence"], 29);
    assert_eq!(w["overflowed"], 2);
    let weight = &w["pairs"][27];
    assert_eq!(
        (&weight["key"], &weight["verdict"]["kind"]),
        (
            &serde_json::json!(format!("{LARGE_WEIGHT}#1")),
            &serde_json::json!("agree")
        )
    );
    let l2 = &weight["stats"][4];
    assert_eq!(
        (&l2["name"], &l2["exceeds"]),
        (&serde_json::json!("l2"), &serde_json::json!(false))
    );
    assert_eq!(l2["excluded"]["kind"], "overflow");
    assert_eq!(l2["excluded"]["side"], "a");
    // The parameters row of the module holds the same weight.
    assert_eq!(
        w["pairs"][31]["key"],
        "Module.4.Linear.forward.0.parameters.weight#1"
    );
    assert_eq!(w["pairs"][31]["stats"][4]["excluded"]["kind"], "overflow");

    // report: named in the findings of the window.
    let out = dumpview().args(["report", FP16, FP32]).assert().code(1);
    let md = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        md.contains("- overflowed in the dump tool, not compared (2 pairs):"),
        "{md}"
    );
    assert!(
        md.contains(&format!(
            "  - {LARGE_WEIGHT}#1: l2 overflowed in the dump's float16 accumulation on side A"
        )),
        "{md}"
    );
    assert!(
        md.contains(&format!(
            "- first divergence: `{FIRST_OVERFLOW}#1` (position 29"
        )),
        "{md}"
    );
}

/// `MSPROBE_BENCH=path/to/dump.json cargo test --release --test msprobe -- --ignored`:
/// load time of one large dump.json (and its construct.json, stack.json).
#[test]
#[ignore]
fn load_time_of_a_large_dump() {
    let Some(path) = std::env::var_os("MSPROBE_BENCH") else {
        return;
    };
    let path = PathBuf::from(path);
    let bytes = std::fs::metadata(&path).unwrap().len();
    let mut best = f64::INFINITY;
    let mut records = 0;
    for _ in 0..3 {
        let start = std::time::Instant::now();
        let dump = load(std::slice::from_ref(&path), &mut |_| {}).unwrap();
        best = best.min(start.elapsed().as_secs_f64());
        records = dump.windows.iter().map(|w| w.records.len()).sum();
    }
    eprintln!(
        "{}: {:.1} MB, {records} records, best load {best:.3} s ({:.0} MB/s)",
        path.display(),
        bytes as f64 / 1e6,
        bytes as f64 / 1e6 / best
    );
}
