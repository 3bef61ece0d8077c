//! Remote dump sources: a capture on another machine, read through the system's OpenSSH
//! client and mirrored into a local cache, so that every local loader and analysis runs on
//! it unchanged (docs/remote.md).
//!
//! [`parse_source`] reads SOURCE as the user writes it; [`SshOptions`] says how to reach
//! hosts; a [`Mirror`] keeps one remote directory's dump files in the cache
//! ([`Mirror::sync`]: one listing, then a fetch of what changed) and fetches saved tensors on
//! demand ([`Mirror::fetch`]); [`snapshot`] is the one-shot use of it that the subcommands
//! make. A watcher calls `sync` every [`SshOptions::poll`] and, on
//! [`RemoteError::ConnectionLost`], waits [`Backoff::next_delay`] before the next.
//!
//! [`RemoteHost::run`] runs one program in a private temporary directory that it removes on
//! every way out (single-operator replay): the only thing dumpview writes on a remote host.
//! Its line loop (`child::pump`) and its spawn with `PR_SET_PDEATHSIG` serve the runtime's
//! local Python too.
//!
//! This layer runs child processes and writes the cache; it uses `crate::model` only, and
//! nothing of `model`, `app`, `ui` or `cli` uses it (`services::sources` maps remote sources
//! to local paths for the CLI and the workbench; the runtime uses it for watching).

mod backoff;
mod cache;
mod child;
mod control;
mod error;
mod exec;
mod mirror;
mod options;
mod script;
mod snapshot;
mod source;
mod ssh;

pub use backoff::Backoff;
// For the runtime's local child processes (`services::python`): the same spawn and the same
// line loop as a remote job's ssh client.
pub(crate) use child::{Stream, pump};
pub(crate) use control::spawn_with_parent_death;
pub use control::{control_dir, install_exit_cleanup, shutdown};
pub use error::RemoteError;
pub use exec::{ExecError, Finished, Job, RemoteHost, Word};
pub use mirror::{
    FULL_LISTING_EVERY, Mirror, OVERLAP_BYTES, PARALLEL_FETCHES, SETTLE, SyncReport,
    WATERMARK_OVERLAP_S,
};
pub use options::{
    DEFAULT_CACHE_SIZE, DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_POLL, SSH_COMMAND_ENV, SshOptions,
    default_cache_dir, parse_size, split_command,
};
pub use script::{Lister, RemoteMeta};
pub use snapshot::{Snapshot, snapshot};
pub use source::{RemoteSpec, SourceError, SourceSpec, parse_source};
pub use ssh::{QUIET_LIMIT, SERVER_ALIVE_COUNT_MAX, SERVER_ALIVE_INTERVAL_S};
