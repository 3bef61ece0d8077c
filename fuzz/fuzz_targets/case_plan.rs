//! Arbitrary bytes as a case matrix's `plan.json`, through `Plan::parse` (the JSON, the plan's
//! schema, its checks: names, the baseline's files, the cases' transforms against the
//! baseline's arguments), then what the `cases` commands do with a plan they read: its case
//! ids, each case's family, target and the arguments its transform names, its text (`cases
//! plan`), the analysis of a matrix with no case recorded yet and its table and Markdown
//! (`cases analyze`), the exported run script, and the plan written back and read again. Any
//! panic (overflow included: cargo fuzz builds with debug assertions), stack overflow or
//! outsized allocation is a crash.

#![no_main]

use dumpview::model::cases::Plan;
use dumpview::model::cases::analyze;
use dumpview::model::cases::export::run_script;
use dumpview::model::present;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(plan) = Plan::parse(data, "plan.json") else {
        return;
    };
    for id in plan.ids() {
        assert!(plan.case(id).is_some());
    }
    for case in &plan.cases {
        std::hint::black_box((case.family(), case.target(), case.transform.arguments()));
        let _ = present::cases::transform_text(&case.transform);
    }
    let _ = present::cases::plan_text(&plan, "plan.json");

    // Nothing recorded: every case is missing its evidence.
    let analysis = analyze(&plan, "plan.json", &[], None);
    let _ = serde_json::to_string(&analysis);
    let _ = present::cases::table_text(&analysis);
    let _ = present::cases::markdown(&analysis, &|id| format!("cases/{id}"));
    let _ = run_script(&plan);

    // What `cases` writes back (a plan is rewritten as it is run) reads again as a plan.
    let written = serde_json::to_vec_pretty(&plan).expect("a plan serializes");
    let again = Plan::parse(&written, "plan.json").expect("a written plan reads back");
    assert_eq!(again.ids(), plan.ids());
});
