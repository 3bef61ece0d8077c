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
/// from them ([`Mirror::statistics_files`]): all of those of windows that changed, and those
/// missing from the cache for the others. Other saved tensors and input sets stay remote
/// until [`Mirror::fetch`] asks for them.
///
/// # Errors
/// As [`Mirror::open`], [`Mirror::sync`] and [`Mirror::fetch_many`].
pub fn snapshot(spec: &RemoteSpec, options: &SshOptions) -> Result<Snapshot, RemoteError> {
    let mut mirror = Mirror::open(spec, options)?;
    let report = mirror.sync()?;
    let changed: std::collections::HashSet<&PathBuf> = report.changed.iter().collect();
    let mut needed = Vec::new();
    for file in mirror.files() {
        let wanted = mirror.statistics_files(std::slice::from_ref(&file));
        if changed.contains(&file) {
            needed.extend(wanted);
        } else {
            needed.extend(wanted.into_iter().filter(|p| !p.is_file()));
        }
    }
    needed.sort();
    needed.dedup();
    let statistics_bytes = mirror.fetch_many(&needed)?;
    Ok(Snapshot {
        mirror,
        report,
        statistics_bytes,
    })
}
