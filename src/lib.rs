//! dumpview: find where the numbers of a model run first go wrong.
//!
//! The library's public surface is what its callers need:
//! - [`model`], the pure logic over probe manifests (docs/manifest.md): load a capture
//!   ([`load`]), analyse one or two ([`Analysis`]), build the first-mismatch [`Report`], and
//!   the formats, tensors, replays and case matrix behind them;
//! - [`cli`], the subcommands (one file each) that the `dumpview` binary dispatches to;
//! - [`export`], the tabular exports: CSV always, Parquet with the cargo feature `export`.
//!
//! Everything else is the binary's own machinery, private to the crate: `app` (the
//! workbench's state and `update`), `ui` (drawing and hit-testing), `runtime` (terminal, input,
//! jobs, the event loop), `services` (what both the CLI and the workbench start: the Python
//! child, the replay and case-matrix runners, remote sources mapped to local paths), `remote`
//! (ssh mirrors), `embedded` (the probe and the example dumps carried in the binary) and, with
//! the cargo feature `torch`, `reference` (the built-in replay references computed in-process
//! with libtorch). Tests and benchmarks reach those through `internals`. All of it is the
//! default cargo feature `workbench`; without it (the fuzz targets' build) the crate is
//! `model` and `export` alone.

#[cfg(feature = "workbench")]
pub mod cli;
pub mod export;
pub mod model;

#[cfg(feature = "workbench")]
mod app;
#[cfg(feature = "workbench")]
mod embedded;
#[cfg(feature = "torch")]
#[warn(missing_docs)]
mod reference;
#[cfg(feature = "workbench")]
#[warn(missing_docs)]
mod remote;
#[cfg(feature = "workbench")]
#[warn(missing_docs)]
mod runtime;
#[cfg(feature = "workbench")]
#[warn(missing_docs)]
mod services;
#[cfg(feature = "workbench")]
mod ui;

pub use model::analysis::Analysis;
pub use model::analysis::compare::Tolerances;
pub use model::analysis::report::Report;
pub use model::dump::Dump;
pub use model::ingest::{LoadError, load};

/// The crate's private machinery, for this repository's own tests, benchmarks and fuzz
/// targets only: not a stable API, hidden from the documentation.
///
/// Each module here re-exports one private module of the crate under its own name
/// (`dumpview::internals::app::App` is the crate's `app::App`), so a test reads like the code
/// it tests. A caller outside this repository uses [`crate::model`] and [`crate::cli`].
#[cfg(feature = "workbench")]
#[doc(hidden)]
pub mod internals {
    /// The workbench's state, actions and `update` (`src/app/`).
    pub mod app {
        pub use crate::app::*;
    }
    /// The probe and example dumps carried in the binary (`src/embedded.rs`).
    pub mod embedded {
        pub use crate::embedded::*;
    }
    /// Built-in replay references computed with libtorch (`src/reference/`, feature `torch`).
    #[cfg(feature = "torch")]
    pub mod reference {
        pub use crate::reference::*;
    }
    /// ssh mirrors of remote dump directories (`src/remote/`).
    pub mod remote {
        pub use crate::remote::*;
    }
    /// The workbench's terminal, input, jobs and event loop (`src/runtime/`).
    pub mod runtime {
        pub use crate::runtime::*;
    }
    /// Process services shared by the CLI and the workbench (`src/services/`).
    pub mod services {
        pub use crate::services::*;
    }
    /// Drawing and hit-testing (`src/ui/`).
    pub mod ui {
        pub use crate::ui::*;
    }
}
