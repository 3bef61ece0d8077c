//! dumpview: find where the numbers of a model run first go wrong.
//!
//! `model` holds the pure logic over probe manifests (docs/manifest.md);
//! `cli` prints its answers; `embedded` carries the probe and the example
//! dumps inside the binary. The workbench is `app` (state and `update`), `ui` (drawing and
//! hit-testing) and `runtime` (terminal, input, jobs, the event loop).

pub mod app;
pub mod cli;
pub mod embedded;
#[cfg(feature = "export")]
pub mod export;
pub mod model;
#[warn(missing_docs)]
pub mod remote;
#[warn(missing_docs)]
pub mod runtime;
pub mod ui;
