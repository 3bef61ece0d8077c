//! The operator case matrix (seed 002; docs/cases.md): from one captured input set, an
//! explicit list of cases, each the baseline with one axis changed (dtype, layout, shape,
//! execution mode, an operator option), run through replay_op.py `--batch`, one result per
//! case recorded without overwriting evidence, and analysed into pass, numerical mismatch,
//! crash, unsupported combination and missing evidence, with the axis the failures follow.
//!
//! - [`plan`]: the cases from `--axis` specs (folding, duplicates, validation), `plan.json`;
//! - [`names`]: the one rule for NAME and case ids (`[A-Za-z0-9_.=-]+`);
//! - [`store`]: the matrix on disk (plan, baseline copy, attempts), the only part that touches
//!   files, as `replay::load` is for replay;
//! - [`analysis`]: each case's outcome on its newest attempt, the axis failures follow, the
//!   smallest failing case, operator-passes-integration-fails;
//! - [`vs`]: the `--vs` capture compared at the stage (dumpview diff's rule);
//! - [`export`]: the hand-run bundle's `run.sh` and the exported pytest regression test.
//!
//! Each case's verdict is `model::replay`'s judgement of its replay output directory under
//! the plan's standard. Running the batch is the runtime's (`services::cases`).

pub mod analysis;
pub mod create;
pub mod export;
pub mod names;
pub mod plan;
pub mod snapshot;
pub mod store;
pub mod vs;

pub use analysis::{CaseOutcome, CasesAnalysis, analyze};
pub use plan::{Case, Plan, Transform};
pub use store::Matrix;
