//! Following dump directories as they are written: a [`follow`] thread per source reports
//! into one channel that something may have changed ([`Signal`]); the consumer (the headless
//! [`headless::run`] loop, or the workbench's watch thread) then refreshes each source's
//! [`Incremental`] capture, which re-reads only the files that changed. The consumer is one
//! loop (`consumer.rs`) whose findings go to a sink: the headless events or the workbench's
//! channel.
//!
//! Local directories are followed with notify's events plus a periodic refresh
//! (file systems without events, such as network mounts, still update, at the tick).

mod consumer;
pub mod headless;
mod local;
mod remote;
pub mod workbench;

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::time::Duration;

use crate::model::dump::{Changes, Dump, Warning};
use crate::model::ingest::AttemptChoice;
use crate::model::watch::{FetchProgress, SourceState};

pub use crate::services::sources::Followed;
pub use local::follow_local;

/// How often a followed source is refreshed without an event: the fallback for file systems
/// without change events, and the remote listing interval (`--poll`).
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);

/// Events are coalesced for this long after the first (a probe writes a manifest and renames
/// it; msprobe rewrites dump.json in several writes).
pub const SETTLE: Duration = Duration::from_millis(50);

/// What a follower reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Signal {
    /// Something under source `index` may have changed: refresh it.
    Changed(usize),
    /// Source `index` is now in `state`, for `reason`.
    State(usize, SourceState, String),
    /// Source `index`'s dump files whose saved tensors are being fetched: leave them unread
    /// ([`crate::model::ingest::Incremental::hold`]).
    Hold(usize, Vec<PathBuf>),
    /// Source `index`'s held dump files whose tensors are in: read them now.
    Release(usize, Vec<PathBuf>),
    /// How far source `index`'s background fetch has got.
    Fetching(usize, FetchProgress),
}

/// Options of a watch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WatchOptions {
    /// The refresh interval without events.
    pub poll: Duration,
    /// Which attempt of each window.
    pub attempt: AttemptChoice,
}

impl Default for WatchOptions {
    fn default() -> Self {
        WatchOptions {
            poll: DEFAULT_POLL,
            attempt: AttemptChoice::Newest,
        }
    }
}

/// Starts following `source` (number `index`), reporting into `signals` until the receiver
/// is dropped: a local directory by file events and a tick, a remote one by syncing its
/// mirror every `poll`. Returns the guard of a local watcher: dropping it stops the events.
/// A watcher that cannot be set up (inotify limits) is reported as a `source` state and the
/// tick still runs.
pub fn follow(
    index: usize,
    source: &Followed,
    poll: Duration,
    signals: Sender<Signal>,
) -> Follower {
    match &source.mirror {
        Some(mirror) => {
            remote::follow_remote(index, mirror.clone(), poll, signals);
            Follower { _watcher: None }
        }
        None => follow_local(index, &source.root, poll, signals),
    }
}

/// Keeps a follower running; dropping it stops it.
pub struct Follower {
    _watcher: Option<notify::RecommendedWatcher>,
}

/// The windows of every source as one capture, with the SOURCE of each window, and a warning
/// for each rank that two sources hold (their windows are told apart by source).
pub(crate) fn merge(
    followed: &[&Followed],
    dumps: &[Option<Dump>],
) -> (Dump, Vec<String>, Vec<(String, Warning)>) {
    let mut merged = Dump::default();
    let mut sources = Vec::new();
    let mut ranks: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, dump) in dumps.iter().enumerate() {
        let Some(dump) = dump else { continue };
        for window in &dump.windows {
            let holders = ranks.entry(window.rank).or_default();
            if !holders.contains(&i) {
                holders.push(i);
            }
            merged.windows.push(window.clone());
            sources.push(followed[i].name.clone());
        }
        merged.warnings.extend(dump.warnings.iter().cloned());
    }
    let clashes = ranks
        .iter()
        .filter(|(_, holders)| holders.len() > 1)
        .map(|(rank, holders)| {
            let names: Vec<&str> = holders.iter().map(|&i| followed[i].name.as_str()).collect();
            (
                names[0].to_string(),
                Warning::note(
                    followed[holders[0]].root.clone(),
                    format!(
                        "rank {rank} is in {}: its windows are keyed by (source, rank)",
                        names.join(" and ")
                    ),
                ),
            )
        })
        .collect();
    (merged, sources, clashes)
}

/// The followed sources as they are now: a follower and an [`Incremental`] capture per source,
/// and each source's last reading and state. What the headless loop and the workbench's
/// watch thread share.
pub(crate) struct Captures {
    _followers: Vec<Follower>,
    received: std::sync::mpsc::Receiver<Signal>,
    captures: Vec<crate::model::ingest::Incremental>,
    /// Each source's last reading (`None` until it has been read once).
    pub dumps: Vec<Option<Dump>>,
    states: Vec<Option<SourceState>>,
    /// Each source's files read since the last [`Captures::take_changes`].
    changed: Vec<HashSet<PathBuf>>,
}

/// What one batch of signals did.
pub(crate) struct Batch {
    /// Sources whose state changed: (index, state, reason), in order.
    pub states: Vec<(usize, SourceState, String)>,
    /// True when some source's capture changed (a file read or gone): analyse again.
    pub changed: bool,
    /// Background fetches that moved on: (index, progress), in order.
    pub fetching: Vec<(usize, FetchProgress)>,
}

impl Captures {
    /// Starts following every one of `followed`.
    pub fn start(followed: &[&Followed], options: WatchOptions) -> Captures {
        let (signals, received) = std::sync::mpsc::channel();
        let followers = followed
            .iter()
            .enumerate()
            .map(|(i, f)| follow(i, f, options.poll, signals.clone()))
            .collect();
        Captures {
            _followers: followers,
            received,
            captures: followed
                .iter()
                .map(|f| {
                    crate::model::ingest::Incremental::new(vec![f.root.clone()], options.attempt)
                })
                .collect(),
            dumps: vec![None; followed.len()],
            states: vec![None; followed.len()],
            changed: vec![HashSet::new(); followed.len()],
        }
    }

    /// The files read again in the sources `sources` since the last call: the windows of
    /// their merged capture that may differ from the version analysed last (for
    /// `Analysis::refresh_with`). Taken: the next call starts afresh.
    pub fn take_changes(&mut self, sources: std::ops::Range<usize>) -> Changes {
        let mut changed = HashSet::new();
        for files in &mut self.changed[sources] {
            changed.extend(files.drain());
        }
        Changes::Sources(changed)
    }

    /// Waits up to `wait` for a signal, lets a burst settle ([`SETTLE`]), then refreshes the
    /// sources that signalled.
    ///
    /// # Errors
    /// `Timeout` when nothing came in `wait`; `Disconnected` when every follower ended.
    pub fn next(&mut self, wait: Duration) -> Result<Batch, std::sync::mpsc::RecvTimeoutError> {
        // A provisional reading (a file mid-rewrite) is read again once it had time to
        // settle, signal or not.
        let mut signalled: Vec<bool> = self.captures.iter().map(|c| c.unsettled()).collect();
        let recheck = signalled.contains(&true);
        let limit = if recheck {
            wait.min(crate::model::ingest::SETTLE_AGE)
        } else {
            wait
        };
        let first = match self.received.recv_timeout(limit) {
            Ok(signal) => {
                std::thread::sleep(SETTLE);
                Some(signal)
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if recheck => None,
            Err(error) => return Err(error),
        };
        let mut batch = Batch {
            states: Vec::new(),
            changed: false,
            fetching: Vec::new(),
        };
        for signal in first.into_iter().chain(self.received.try_iter()) {
            match signal {
                Signal::Changed(i) => signalled[i] = true,
                Signal::State(i, state, reason) => {
                    // The follower's own word on the connection: a refresh that finds the
                    // same state says nothing again (`connected` printed once per start).
                    self.states[i] = Some(state);
                    batch.states.push((i, state, reason));
                }
                Signal::Hold(i, paths) => self.captures[i].hold(&paths),
                Signal::Release(i, paths) => {
                    self.captures[i].release(&paths);
                    signalled[i] = true;
                }
                Signal::Fetching(i, progress) => batch.fetching.push((i, progress)),
            }
        }
        for (i, capture) in self.captures.iter_mut().enumerate() {
            if !signalled[i] {
                continue;
            }
            let (state, reason) = match capture.refresh() {
                Ok((dump, stats)) => {
                    self.changed[i].extend(stats.changed);
                    if self.dumps[i].is_none() || stats.read > 0 || stats.removed > 0 {
                        self.dumps[i] = Some(dump);
                        batch.changed = true;
                    }
                    (SourceState::Connected, "reading".to_string())
                }
                Err(error) => (SourceState::Lost, error.to_string()),
            };
            if self.states[i] != Some(state) {
                self.states[i] = Some(state);
                batch.states.push((i, state, reason));
            }
        }
        Ok(batch)
    }
}
