//! Following a local directory: notify's file events, and a tick every `poll` as the
//! fallback for file systems that send none. Bursts of events (a write then a rename, msprobe
//! rewriting dump.json in several writes) are coalesced by the consumer ([`super::SETTLE`]).

use std::path::Path;
use std::sync::mpsc::Sender;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};

use super::{Follower, Signal};
use crate::model::watch::SourceState;

/// Follows `root` (number `index`): a [`Signal::Changed`] on every file event under it, and
/// one every `poll` regardless (the refresh re-reads only files whose size, time or inode
/// changed, so a tick with nothing new costs a listing).
pub fn follow_local(
    index: usize,
    root: &Path,
    poll: Duration,
    signals: Sender<Signal>,
) -> Follower {
    let events = signals.clone();
    let watcher = notify::recommended_watcher(move |result: notify::Result<notify::Event>| {
        let signal = match result {
            // Reads (access events) change nothing.
            Ok(event) if event.kind.is_access() => return,
            Ok(_) => Signal::Changed(index),
            Err(error) => Signal::State(index, SourceState::Lost, error.to_string()),
        };
        let _ = events.send(signal);
    });
    let watcher = match watcher {
        Ok(mut watcher) => match watcher.watch(root, RecursiveMode::Recursive) {
            Ok(()) => Some(watcher),
            Err(error) => {
                let _ = signals.send(Signal::State(
                    index,
                    SourceState::Retrying,
                    format!(
                        "no file events ({error}); refreshing every {} ms",
                        poll.as_millis()
                    ),
                ));
                None
            }
        },
        Err(_) => None,
    };
    std::thread::Builder::new()
        .name(format!("watch-tick-{index}"))
        .spawn(move || {
            while signals.send(Signal::Changed(index)).is_ok() {
                std::thread::sleep(poll);
            }
        })
        .expect("spawn the watch tick thread");
    Follower { _watcher: watcher }
}
