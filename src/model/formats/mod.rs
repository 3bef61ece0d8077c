//! Dump formats behind one contract.
//!
//! Every reader implements [`Format`]: its name and facts, the file names discovery looks for,
//! whether it claims a file (from its name and first bytes), and how it reads one file into a
//! window plus warnings. [`REGISTRY`] lists the formats in the order they are asked to claim a
//! file; [`crate::model::ingest`] is the one pipeline that discovers, reads and checks windows
//! of every format alike.
//!
//! To add a format: a module here with a unit struct implementing [`Format`], a [`SourceFormat`](crate::model::dump::SourceFormat)
//! variant, an entry in [`REGISTRY`], fixtures under `tests/fixtures/<format>/` and a fuzz target
//! in `fuzz/fuzz_targets/` (scripts/fuzz.sh runs every target listed there).

/// How many leading bytes of a file [`Format::claims`] is shown.
pub const HEAD_BYTES: usize = 4096;

mod contract;
pub mod msprobe;
pub mod probe;
mod registry;
pub mod windowed;

pub use contract::{Format, FormatError};
pub use registry::{REGISTRY, claiming, file_names, mirrored_names};
