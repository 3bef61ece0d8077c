//! Rendering of analyses for people and scripts: text, Markdown and JSON, and the number
//! formatters every renderer (and the workbench) uses.

pub mod diff;
pub mod number;
pub mod report;
pub mod scan;
pub mod summary;
pub mod tensors;
pub mod vary;
