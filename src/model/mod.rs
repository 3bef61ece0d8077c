//! Pure logic: manifests, records and the answers computed from them.
//! No terminal, no threads, no UI types: everything here is testable on real dumps
//! and printed by the CLI and drawn by the workbench alike.

pub mod manifest;
pub mod summary;
