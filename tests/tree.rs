//! The module tree (`diff --tree`, `scan --tree`, and the model's rollups) on committed
//! captures: the llama example pairs (dotted stage paths) and msprobe's ResNet pair (its
//! module chain from construct.json), asserting node names, counts and where the first
//! divergence sits.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;

use dumpview::model::analysis::compare::Tolerances;
use dumpview::model::analysis::diff::{Cell, diff};
use dumpview::model::analysis::tree::{ModuleTree, leaves};
use dumpview::model::ingest::load;
use support::run::{json, text};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

const FP16_A: &str = "assets/examples/llama_fp16_overflow/a";
const FP16_B: &str = "assets/examples/llama_fp16_overflow/b";
const RESNET_0: &str = "tests/fixtures/msprobe/resnet_gpu/step0";
const RESNET_1: &str = "tests/fixtures/msprobe/resnet_gpu/step1";

/// (path, records, diverging, nonfinite, missing, worst, first_divergence, holds first) of
/// the first window's nodes.
type Summary = (String, u64, u64, u64, u64, String, String, bool);

fn nodes(doc: &Value) -> Vec<Summary> {
    doc["windows"][0]["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| {
            (
                n["path"].as_str().unwrap().to_string(),
                n["records"].as_u64().unwrap(),
                n["diverging"].as_u64().unwrap(),
                n["nonfinite"].as_u64().unwrap(),
                n["missing"].as_u64().unwrap(),
                n["worst"].as_str().unwrap_or("-").to_string(),
                n["first_divergence"].as_str().unwrap_or("-").to_string(),
                n["holds_first_divergence"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn s(path: &str, counts: [u64; 4], worst: &str, first: &str, holds: bool) -> Summary {
    let [r, d, n, m] = counts;
    (path.into(), r, d, n, m, worst.into(), first.into(), holds)
}

#[test]
fn diff_tree_of_the_fp16_overflow_pair_rolls_layers_up_to_the_first_divergence() {
    let (code, doc, err) = json(&[
        "diff",
        "--tree",
        "--depth",
        "1",
        "--json",
        &repo(FP16_A).display().to_string(),
        &repo(FP16_B).display().to_string(),
    ]);
    assert_eq!(code, 1, "found something, as the plain diff: {err}");
    assert_eq!(
        nodes(&doc),
        [
            s(
                "runner",
                [2, 1, 1, 0],
                "non_finite",
                "runner.logits#1",
                false
            ),
            s("embed", [1, 0, 0, 0], "agrees", "-", false),
            s(
                "layers",
                [114, 42, 42, 0],
                "non_finite",
                "layers.3.mlp_up#1",
                true
            ),
            s(
                "final_norm",
                [1, 1, 1, 0],
                "non_finite",
                "final_norm#1",
                false
            ),
            s("logits", [1, 1, 1, 0], "non_finite", "logits#1", false),
        ]
    );
    // One level down: the decoder layers, layer 3 holding the first divergence.
    let (_, doc, _) = json(&[
        "diff",
        "--tree",
        "--depth",
        "2",
        "--json",
        &repo(FP16_A).display().to_string(),
        &repo(FP16_B).display().to_string(),
    ]);
    let layers: Vec<Summary> = nodes(&doc)
        .into_iter()
        .filter(|n| n.0.starts_with("layers/"))
        .collect();
    assert_eq!(layers.len(), 6);
    assert_eq!(
        layers[0],
        s("layers/0", [19, 0, 0, 0], "agrees", "-", false)
    );
    assert_eq!(
        layers[3],
        s(
            "layers/3",
            [19, 4, 4, 0],
            "non_finite",
            "layers.3.mlp_up#1",
            true
        )
    );
}

#[test]
fn diff_tree_text_indents_by_depth_and_marks_the_first_divergence() {
    let (code, out, _) = text(&[
        "diff",
        "--tree",
        &repo(FP16_A).display().to_string(),
        &repo(FP16_B).display().to_string(),
    ]);
    assert_eq!(code, 1);
    assert!(
        out.contains(
            "module tree: 127 nodes, 119 records, 45 diverging, 45 non-finite; first divergence \
         layers.3.mlp_up#1, first non-finite layers.3.mlp_up#1"
        ),
        "{out}"
    );
    assert!(out.contains("\n◆! layers  [non_finite] 114 records, 42 diverging, 42 non-finite; first divergence layers.3.mlp_up#1"), "{out}");
    assert!(
        out.contains("\n◆!   3  [non_finite] 19 records, 4 diverging, 4 non-finite"),
        "{out}"
    );
    assert!(
        out.contains("\n◆!     mlp_up#1  [non_finite] 1 record, 1 diverging, 1 non-finite\n"),
        "{out}"
    );
    assert!(
        out.contains("\n       mlp_gate#1  [agrees] 1 record\n"),
        "{out}"
    );
}

#[test]
fn msprobe_resnet_tree_follows_construct_json() {
    let (code, doc, err) = json(&[
        "diff",
        "--tree",
        "--depth",
        "1",
        "--json",
        &repo(RESNET_0).display().to_string(),
        &repo(RESNET_1).display().to_string(),
    ]);
    assert_eq!(
        code, 1,
        "a divergence, as the plain diff of the pair: {err}"
    );
    let top = nodes(&doc);
    assert_eq!(
        top[..6],
        [
            s(
                "Module.conv1.Conv2d.forward.0",
                [14, 4, 0, 0],
                "diverges",
                "Functional.conv2d.0.forward.input.1#1",
                true
            ),
            s(
                "Module.bn1.BatchNorm2d.forward.0",
                [16, 12, 0, 0],
                "diverges",
                "Tensor.add_.0.forward.input.0#1",
                false
            ),
            s(
                "Module.relu.ReLU.forward.0",
                [5, 4, 0, 0],
                "diverges",
                "Functional.relu.0.forward.input.0#1",
                false
            ),
            s(
                "Module.maxpool.MaxPool2d.forward.0",
                [10, 4, 0, 0],
                "diverges",
                "Functional.max_pool2d.0.forward.input.0#1",
                false
            ),
            s(
                "Module.layer1.Sequential.forward.0",
                [364, 229, 0, 0],
                "diverges",
                "Functional.conv2d.1.forward.input.0#1",
                false
            ),
            s(
                "Module.layer2.Sequential.forward.0",
                [474, 262, 0, 0],
                "diverges",
                "Functional.conv2d.11.forward.input.0#1",
                false
            ),
        ]
    );
    // Every record is somewhere: A's 2822 and B's 161 unpaired parameter gradients.
    let total: u64 = top.iter().map(|n| n.1).sum();
    assert_eq!(total, 2822 + 161);
    let missing: Vec<&Summary> = top
        .iter()
        .filter(|n| n.0.contains(".parameters_grad."))
        .collect();
    assert!(missing.iter().all(|n| n.5 == "missing"), "{missing:?}");
    assert_eq!(missing.iter().map(|n| n.4).sum::<u64>(), 322);
    // Depth 2: a Bottleneck under its Sequential, as construct.json chains them.
    let (_, doc, _) = json(&[
        "diff",
        "--tree",
        "--depth",
        "2",
        "--json",
        &repo(RESNET_0).display().to_string(),
        &repo(RESNET_1).display().to_string(),
    ]);
    let nested = nodes(&doc);
    assert!(nested.contains(&s(
        "Module.layer1.Sequential.forward.0/Module.layer1.0.Bottleneck.forward.0",
        [142, 91, 0, 0],
        "diverges",
        "Functional.conv2d.1.forward.input.0#1",
        false
    )));
    assert!(nested.contains(&s(
        "Module.conv1.Conv2d.forward.0/Functional.conv2d.0.forward",
        [11, 2, 0, 0],
        "diverges",
        "Functional.conv2d.0.forward.input.1#1",
        true
    )));
}

#[test]
fn scan_tree_names_the_first_nonfinite_per_module() {
    let (code, doc, _) = json(&[
        "scan",
        "--tree",
        "--depth",
        "2",
        "--json",
        &repo(FP16_B).display().to_string(),
    ]);
    assert_eq!(code, 1);
    let window = &doc["windows"][0];
    assert_eq!(window["label"], "req-llama_fp16_overflow");
    // Which window: several of one label (a generate loop) are told apart.
    assert_eq!(
        (window["match"].as_u64(), window["occurrence"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(
        window["source"]
            .as_str()
            .unwrap()
            .ends_with("manifest.json"),
        "{window}"
    );
    let layers: Vec<&Value> = window["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["path"].as_str().unwrap().starts_with("layers"))
        .collect();
    assert_eq!(layers[0]["path"], "layers");
    assert_eq!(layers[0]["records"], 114);
    assert_eq!(layers[0]["nonfinite"], 42);
    assert_eq!(layers[0]["first_nonfinite"], "layers.3.mlp_up#1");
    assert_eq!(layers[0]["holds_first_nonfinite"], true);
    assert_eq!(layers[0]["worst"], Value::Null);
    assert_eq!(layers[3]["path"], "layers/2");
    assert_eq!(layers[3]["nonfinite"], 0);
    assert_eq!(layers[4]["first_nonfinite"], "layers.3.mlp_up#1");
    // A clean capture: exit 0, as the plain scan.
    let (code, out, _) = text(&["scan", "--tree", &repo(FP16_A).display().to_string()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("module tree: 127 nodes, 119 records; first non-finite none"),
        "{out}"
    );
}

#[test]
fn depth_needs_the_tree_and_a_positive_number() {
    let a = repo(FP16_A).display().to_string();
    let (code, _, err) = text(&["scan", "--depth", "2", &a]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--tree"), "{err}");
    let (code, _, err) = text(&["scan", "--tree", "--depth", "0", &a]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--depth"), "{err}");
}

#[test]
fn model_tree_of_a_diff_places_only_b_stages_and_every_record_once() {
    let load = |p: &str| load(&[repo(p)], &mut |_| {}).unwrap();
    let (a, b) = (load(RESNET_0), load(RESNET_1));
    let report = diff(&a.windows, &b.windows, &Tolerances::default());
    let tree: ModuleTree = leaves::of_diff(&a.windows[0], &b.windows[0], &report.windows[0]);
    let root = &tree.nodes[ModuleTree::ROOT].rollup;
    assert_eq!(root.records, 2822 + 161);
    assert_eq!(root.worst, Some(Cell::Diverges));
    assert_eq!(root.diverging, 1736);
    let first = tree.first_divergence.expect("a first divergence");
    assert_eq!(tree.keys[first], "Functional.conv2d.0.forward.input.1#1");
    assert_eq!(
        tree.path_name(tree.leaf_node[first]),
        "Module.conv1.Conv2d.forward.0/Functional.conv2d.0.forward/input.1"
    );
    // Each leaf is in exactly one node; leaf counts add up to the root's.
    let placed: usize = tree.nodes.iter().map(|n| n.leaves.len()).sum();
    assert_eq!(placed, tree.keys.len());
}
