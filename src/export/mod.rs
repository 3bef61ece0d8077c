//! The per-stage comparison table written for other tools: CSV always ([`csv`], a small
//! well-kept crate), Parquet with the cargo feature `export` ([`parquet`], through polars).

pub mod csv;
#[cfg(feature = "export")]
pub mod parquet;
