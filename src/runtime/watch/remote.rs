//! Following a remote dump directory: every `--poll` its mirror lists the remote directory
//! and fetches what changed (`crate::remote::Mirror::sync`); a sync that brought anything is
//! a [`Signal::Changed`] for the consumer, which reads the mirror's local root. A lost
//! connection is said (`source` state `lost` once, then `retrying` at each try) and retried
//! with backoff up to 30 s; the view keeps what it has meanwhile.
//!
//! Windowed dumps compute their statistics from their saved tensor files, so those are
//! fetched too, in the background: the dump files that need them are held
//! ([`Signal::Hold`]) while the tensors come in chunks between listings, with progress
//! ([`Signal::Fetching`]), and released ([`Signal::Release`]) once all of theirs are in. A
//! big fetch never delays the listing: a manifest that lands meanwhile still shows within
//! a poll.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Signal;
use crate::model::watch::{FetchProgress, SourceState};
use crate::remote::{Backoff, Mirror, RemoteError};

/// Tensor files fetched per round trip of the background fetch: the mirror's lock (which an
/// on-demand fetch from the workbench also takes) is given up between chunks.
const CHUNK_FILES: usize = 32;

/// Polls `mirror` (source number `index`) every `poll` on its own thread until the receiver
/// of `signals` is dropped.
pub fn follow_remote(
    index: usize,
    mirror: Arc<Mutex<Mirror>>,
    poll: Duration,
    signals: Sender<Signal>,
) {
    std::thread::Builder::new()
        .name(format!("watch-remote-{index}"))
        .spawn(move || {
            RemoteFollower {
                index,
                mirror,
                poll,
                signals,
                backoff: Backoff::default(),
                first: true,
                connected: false,
                lost_said: false,
                waiting: VecDeque::new(),
                missing: Vec::new(),
                progress: FetchProgress::default(),
            }
            .run();
        })
        .expect("spawn the remote watch thread");
}

/// A dump file held until its saved tensors are fetched.
struct Waiting {
    /// The dump file (local, under the mirror's root).
    dump: PathBuf,
    /// Its tensor files not fetched yet.
    tensors: Vec<PathBuf>,
}

/// The receiver is gone: the watch ended.
struct Ended;

struct RemoteFollower {
    index: usize,
    mirror: Arc<Mutex<Mirror>>,
    poll: Duration,
    signals: Sender<Signal>,
    backoff: Backoff,
    first: bool,
    connected: bool,
    /// `lost` was said since the last connection: a further failed try says only `retrying`.
    lost_said: bool,
    waiting: VecDeque<Waiting>,
    /// Tensor files the remote host did not have when asked: asked again at the next full
    /// listing (their dump files are shown meanwhile, with the reader's warning).
    missing: Vec<Waiting>,
    progress: FetchProgress,
}

impl RemoteFollower {
    fn run(mut self) {
        let mut next_sync = Instant::now();
        loop {
            if Instant::now() >= next_sync {
                match self.sync() {
                    Ok(()) => next_sync = Instant::now() + self.poll,
                    Err(Ended) => return,
                }
            }
            if self.connected && !self.waiting.is_empty() {
                if self.fetch_chunk().is_err() {
                    return;
                }
                continue;
            }
            std::thread::sleep(next_sync.saturating_duration_since(Instant::now()));
        }
    }

    fn send(&self, signal: Signal) -> Result<(), Ended> {
        self.signals.send(signal).map_err(|_| Ended)
    }

    fn state(&self, state: SourceState, reason: String) -> Result<(), Ended> {
        self.send(Signal::State(self.index, state, reason))
    }

    /// One listing: what changed is fetched by the sync; what its windows' statistics need
    /// is queued, and those dump files held, before the consumer is told to read.
    fn sync(&mut self) -> Result<(), Ended> {
        let synced = self.mirror.lock().expect("the mirror's lock").sync();
        match synced {
            Ok(report) => {
                self.backoff.reset();
                if !self.connected {
                    self.connected = true;
                    self.lost_said = false;
                    self.state(
                        SourceState::Connected,
                        format!("{} dump files listed", report.listed),
                    )?;
                }
                self.forget(&report.removed)?;
                if report.full && report.listed == 0 && !report.removed.is_empty() {
                    self.state(
                        SourceState::Connected,
                        format!(
                            "no dump file there any more: {} removed",
                            report.removed.len()
                        ),
                    )?;
                }
                let needed = self
                    .mirror
                    .lock()
                    .expect("the mirror's lock")
                    .statistics_to_fetch(&report.changed, self.first);
                self.queue(needed, true)?;
                if report.full && !self.missing.is_empty() {
                    let again = std::mem::take(&mut self.missing)
                        .into_iter()
                        .map(|w| (w.dump, w.tensors))
                        .collect();
                    self.queue(again, false)?;
                }
                if self.first || !report.changed.is_empty() || !report.removed.is_empty() {
                    self.first = false;
                    self.send(Signal::Changed(self.index))?;
                }
                Ok(())
            }
            // A watch may start before the run writes anything: an empty directory is
            // waited on, not an error (a snapshot of it is one).
            Err(RemoteError::ListingEmpty { .. }) => {
                self.backoff.reset();
                if !self.connected {
                    self.connected = true;
                    self.lost_said = false;
                    self.state(SourceState::Connected, "no dump files yet; waiting".into())?;
                }
                if self.first {
                    // Read once, empty, so the view opens on "no window has landed yet"
                    // as for a local directory; the mirror's root is in dumpview's cache.
                    self.first = false;
                    let root = self
                        .mirror
                        .lock()
                        .expect("the mirror's lock")
                        .root()
                        .to_path_buf();
                    let _ = std::fs::create_dir_all(root);
                    self.send(Signal::Changed(self.index))?;
                }
                Ok(())
            }
            Err(error) => self.lost(&error),
        }
    }

    /// Says the connection is lost, waits (backing off when it may come back), reconnects.
    fn lost(&mut self, error: &RemoteError) -> Result<(), Ended> {
        self.connected = false;
        let delay = if error.is_transient() {
            self.backoff.next_delay()
        } else {
            self.poll.max(Duration::from_secs(5))
        };
        if !self.lost_said {
            self.lost_said = true;
            self.state(SourceState::Lost, error.to_string())?;
        }
        self.state(
            SourceState::Retrying,
            format!("{error}; retrying in {} s", delay.as_secs_f64()),
        )?;
        std::thread::sleep(delay);
        if error.is_transient() {
            let _ = self.mirror.lock().expect("the mirror's lock").reconnect();
        }
        Ok(())
    }

    /// Queues what `needed` names (a dump file queued already is queued again with its new
    /// list: it changed), holds the dump files when `hold` (not for files asked again, which
    /// are shown already), and says the new total.
    fn queue(&mut self, needed: Vec<(PathBuf, Vec<PathBuf>)>, hold: bool) -> Result<(), Ended> {
        if needed.is_empty() {
            return Ok(());
        }
        if self.waiting.is_empty() {
            self.progress = FetchProgress::default();
        }
        let dumps: Vec<PathBuf> = needed.iter().map(|(d, _)| d.clone()).collect();
        for (dump, tensors) in needed {
            if let Some(at) = self.waiting.iter().position(|w| w.dump == dump) {
                let old = self.waiting.remove(at).expect("found");
                self.progress.files_total -= old.tensors.len();
                self.progress.windows -= 1;
            }
            self.progress.files_total += tensors.len();
            self.progress.windows += 1;
            self.waiting.push_back(Waiting { dump, tensors });
        }
        if hold {
            self.send(Signal::Hold(self.index, dumps))?;
        }
        self.send(Signal::Fetching(self.index, self.progress))
    }

    /// Drops removed dump files from the queue (and from the consumer's held set).
    fn forget(&mut self, removed: &[PathBuf]) -> Result<(), Ended> {
        let before = self.waiting.len();
        let mut gone = Vec::new();
        self.waiting.retain(|w| {
            let keep = !removed.contains(&w.dump);
            if !keep {
                gone.push(w.dump.clone());
            }
            keep
        });
        if self.waiting.len() == before {
            return Ok(());
        }
        self.send(Signal::Release(self.index, gone))
    }

    /// Fetches the next [`CHUNK_FILES`] queued tensor files; releases the dump files whose
    /// tensors are then all in. A tensor file gone from the remote host is given up on (the
    /// window's reader says it is missing); a lost connection is retried.
    fn fetch_chunk(&mut self) -> Result<(), Ended> {
        let chunk: Vec<PathBuf> = self
            .waiting
            .iter()
            .flat_map(|w| w.tensors.iter().cloned())
            .take(CHUNK_FILES)
            .collect();
        let fetched = self
            .mirror
            .lock()
            .expect("the mirror's lock")
            .fetch_many(&chunk);
        match fetched {
            Ok(bytes) => self.progress.bytes += bytes,
            Err(error) if error.is_transient() => return self.lost(&error),
            // One file of the chunk vanished: the others are fetched one by one.
            Err(_) => {
                for file in &chunk {
                    let one = self
                        .mirror
                        .lock()
                        .expect("the mirror's lock")
                        .fetch_many(std::slice::from_ref(file));
                    match one {
                        Ok(bytes) => self.progress.bytes += bytes,
                        Err(error) if error.is_transient() => return self.lost(&error),
                        Err(_) => {}
                    }
                }
            }
        }
        self.progress.files_done += chunk.len();
        let mut ready = Vec::new();
        for waiting in &mut self.waiting {
            let (fetched, rest): (Vec<PathBuf>, Vec<PathBuf>) =
                std::mem::take(&mut waiting.tensors)
                    .into_iter()
                    .partition(|t| chunk.contains(t));
            waiting.tensors = rest;
            let absent: Vec<PathBuf> = fetched.into_iter().filter(|t| !t.is_file()).collect();
            if !absent.is_empty() {
                self.progress.files_missing += absent.len();
                match self.missing.iter_mut().find(|m| m.dump == waiting.dump) {
                    Some(m) => m.tensors.extend(absent),
                    None => self.missing.push(Waiting {
                        dump: waiting.dump.clone(),
                        tensors: absent,
                    }),
                }
            }
        }
        while self.waiting.front().is_some_and(|w| w.tensors.is_empty()) {
            ready.push(self.waiting.pop_front().expect("checked").dump);
        }
        self.send(Signal::Fetching(self.index, self.progress))?;
        if !ready.is_empty() {
            self.send(Signal::Release(self.index, ready))?;
        }
        Ok(())
    }
}
