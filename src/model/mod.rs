//! Pure logic: manifests, records and the answers computed from them.
//! No terminal, no threads, no UI types: everything here is testable on real dumps
//! and printed by the CLI and drawn by the workbench alike.

pub mod compare;
pub mod diff;
pub mod evidence;
pub mod layout;
pub mod load;
pub mod manifest;
pub mod msprobe;
pub mod parse;
pub mod report;
pub mod scan;
pub mod summary;
pub mod table;
pub mod tensor;
pub mod vary;
pub mod windowed;
