//! Process services: what both the CLI (`crate::cli`) and the workbench's runtime
//! (`crate::runtime`) start, below both. It uses `model` and `remote` only.
//!
//! - [`python`]: the local Python with torch that runs the embedded `replay_op.py`.
//! - [`replay`]: a single-operator replay run where the dump lives, and judged;
//!   [`replay_list`]: `replay --list` of a local dump, read here without Python.
//! - [`cases`]: a case matrix's batch run, each case filed as a new attempt.
//! - [`sources`]: remote SOURCEs (`host:path`, `ssh://…`) mapped to local paths (mirrors in
//!   the cache), and [`fetch`]: their saved tensors brought on demand.

pub mod cases;
pub mod cross;
pub mod fetch;
#[cfg(feature = "torch")]
mod in_process;
pub mod python;
pub mod replay;
pub mod replay_list;
pub mod sources;
