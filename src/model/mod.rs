//! Pure logic: the in-memory capture, the formats it is read from, and the answers computed
//! from it. No terminal, no threads of the UI, no UI types: everything here is testable on real
//! dumps, printed by the CLI and drawn by the workbench alike.
//!
//! Layers, lowest first (each may use only those before it; `tests/layering.rs` enforces it):
//!
//! | module | holds |
//! |---|---|
//! | [`dump`] | the capture: windows, records, stats, [`dump::StageKey`], warnings, the evidence-path rule |
//! | [`io`] | the one policy for reading a file's bytes (mapped or owned, FIFO refusal) |
//! | [`tensor`] | saved tensors: safe readers and element-wise comparison |
//! | [`formats`] | one module per dump format behind the [`formats::Format`] contract, and the registry |
//! | [`ingest`] | discovery, parallel reading with progress, the checks every window gets |
//! | [`replay`] | a replay's outputs read back and judged under a named standard (msprobe, dynamo, allclose) |
//! | [`analysis`] | scan, memory layout, diff, vary, summary, table, report; computed once into [`analysis::Analysis`] |
//! | [`input_set`] | one captured operator input set read back from its `.pt` file, for replay |
//! | [`cases`] | the operator case matrix: plan, attempts on disk, analysis, exports (its verdicts are [`replay`]'s) |
//! | [`present`] | text, Markdown and JSON rendering of analyses; the number formatters |

#![warn(missing_docs)]

pub mod analysis;
pub mod cases;
pub mod dump;
pub mod formats;
pub mod ingest;
pub mod input_set;
pub mod io;
pub mod present;
pub mod replay;
pub mod tensor;
pub mod watch;
