//! The answers: [`scan`] (storage aliases, first non-finite), [`layout`] (which bytes a view
//! reads), [`compare`] (one statistic, one record pair), [`diff`] (two captures), [`vary`]
//! (repeated captures), [`summary`], [`table`] and [`report`]; all computed from the capture
//! alone, never from a format's files. [`Analysis`] is the one value the workbench and every
//! subcommand render from.

pub mod compare;
pub mod diff;
pub mod layout;
pub mod report;
pub mod scan;
pub mod summary;
pub mod table;
pub mod vary;
