//! The one-shot use of a mirror that every subcommand taking a capture makes ([`snapshot`]).

use std::path::PathBuf;

use super::error::RemoteError;
use super::mirror::{Mirror, SyncReport};
use super::options::SshOptions;
use super::source::RemoteSpec;

/// A remote source brought into the cache once: the mirror (keep it alive while its files
/// are read: dropping it ends the connection), and what the sync did.
pub struct Snapshot {
    /// The mirror; [`Mirror::root`] is the local path to load.
    pub mirror: Mirror,
    /// The one sync.
    pub report: SyncReport,
    /// Bytes of the saved tensors fetched because windows compute their statistics from
    /// them (windowed dumps).
    pub statistics_bytes: u64,
}

/// Opens a mirror of `spec`, syncs it once, and fetches what loading its windows reads
/// besides the dump files: the tensor files of windowed dumps, whose statistics are computed
/// from them ([`Mirror::statistics_to_fetch`]). Other saved tensors and input sets stay remote
/// until [`Mirror::fetch`] asks for them.
///
/// # Errors
/// As [`Mirror::open`], [`Mirror::sync`] and [`Mirror::fetch_many`].
pub fn snapshot(spec: &RemoteSpec, options: &SshOptions) -> Result<Snapshot, RemoteError> {
    let mut mirror = Mirror::open(spec, options)?;
    let report = mirror.sync()?;
    let mut needed: Vec<PathBuf> = mirror
        .statistics_to_fetch(&report.changed, true)
        .into_iter()
        .flat_map(|(_, tensors)| tensors)
        .collect();
    needed.sort();
    needed.dedup();
    let statistics_bytes = mirror.fetch_many(&needed)?;
    Ok(Snapshot {
        mirror,
        report,
        statistics_bytes,
    })
}
