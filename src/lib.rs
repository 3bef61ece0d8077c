//! dumpview: find where the numbers of a model run first go wrong.
//!
//! `model` holds the pure logic over probe manifests (docs/manifest.md);
//! `cli` prints its answers (one file per subcommand); `services` starts what both the CLI
//! and the workbench start (the Python child, the replay and case-matrix runners, remote
//! sources mapped to local paths); `embedded` carries the probe and the example dumps inside
//! the binary. The workbench is `app` (state and `update`), `ui` (drawing and
//! hit-testing) and `runtime` (terminal, input, jobs, the event loop). With the cargo feature
//! `torch`, `reference` computes the built-in replay references in-process with libtorch.

pub mod app;
pub mod cli;
pub mod embedded;
#[cfg(feature = "export")]
pub mod export;
pub mod model;
#[cfg(feature = "torch")]
#[warn(missing_docs)]
pub mod reference;
#[warn(missing_docs)]
pub mod remote;
#[warn(missing_docs)]
pub mod runtime;
#[warn(missing_docs)]
pub mod services;
pub mod ui;
