//! Property: shuffling records within a window never changes the pairing (records pair by
//! stage#occurrence, not by position), and shuffling only B never changes the first divergence.

use std::collections::BTreeMap;
use std::path::Path;

use dumpview::model::analysis::compare::Tolerances;
use dumpview::model::analysis::diff::{WindowDiff, diff_windows};
use dumpview::model::dump::Window;
use dumpview::model::ingest::load;
use proptest::prelude::*;

fn window(pair: &str, side: &str) -> Window {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples")
        .join(pair)
        .join(side);
    load(&[path], &mut |_| {}).unwrap().windows.remove(0)
}

/// key → (verdict, seq in A, seq in B): everything pairing decides, independent of order.
fn pairing(w: &WindowDiff) -> BTreeMap<String, (String, u64, u64)> {
    w.pairs
        .iter()
        .map(|p| {
            (
                p.key.clone(),
                (format!("{:?}", p.comparison.verdict), p.seq_a, p.seq_b),
            )
        })
        .collect()
}

fn shuffled(mut m: Window, order: &[usize]) -> Window {
    let records = std::mem::take(&mut m.records);
    let mut keyed: Vec<(usize, _)> = order.iter().copied().zip(records).collect();
    keyed.sort_by_key(|(k, _)| *k);
    m.records = keyed.into_iter().map(|(_, r)| r).collect();
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn shuffling_records_never_changes_the_pairing(
        pair in prop::sample::select(vec!["llama_kv_alias", "llama_fp16_overflow", "llama_eager_vs_graph"]),
        keys_a in prop::collection::vec(any::<usize>(), 119),
        keys_b in prop::collection::vec(any::<usize>(), 119),
    ) {
        let (a, b) = (window(pair, "a"), window(pair, "b"));
        let tolerances = Tolerances::default();
        let reference = diff_windows(&a, &b, &tolerances);

        let b_shuffled = shuffled(b.clone(), &keys_b[..b.records.len()]);
        let only_b = diff_windows(&a, &b_shuffled, &tolerances);
        prop_assert_eq!(pairing(&only_b), pairing(&reference));
        prop_assert_eq!(only_b.first().map(|p| p.key.clone()), reference.first().map(|p| p.key.clone()));
        prop_assert_eq!(&only_b.only_a, &reference.only_a);

        let both = diff_windows(&shuffled(a.clone(), &keys_a[..a.records.len()]), &b_shuffled, &tolerances);
        prop_assert_eq!(pairing(&both), pairing(&reference));
        let mut x = both.only_a.clone();
        let mut y = reference.only_a.clone();
        x.sort();
        y.sort();
        prop_assert_eq!(x, y);
    }
}
