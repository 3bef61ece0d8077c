//! Following a remote dump directory: every `--poll` its mirror lists the remote directory
//! and fetches what changed (`crate::remote::Mirror::sync`); a sync that brought anything is
//! a [`Signal::Changed`] for the consumer, which reads the mirror's local root. A lost
//! connection is said (`source` state `lost`, then `retrying`) and retried with backoff up to
//! 30 s; the view keeps what it has meanwhile.

use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Signal;
use crate::model::watch::SourceState;
use crate::remote::{Backoff, Mirror, RemoteError};

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
            let mut backoff = Backoff::default();
            let mut first = true;
            let mut connected = false;
            loop {
                let synced = mirror.lock().expect("the mirror's lock").sync();
                let sent = match synced {
                    Ok(report) => {
                        backoff.reset();
                        let mut ok = true;
                        if !connected {
                            connected = true;
                            ok &= signals
                                .send(Signal::State(
                                    index,
                                    SourceState::Connected,
                                    format!("{} dump files listed", report.listed),
                                ))
                                .is_ok();
                        }
                        if first || !report.changed.is_empty() || !report.removed.is_empty() {
                            first = false;
                            ok &= signals.send(Signal::Changed(index)).is_ok();
                        }
                        std::thread::sleep(poll);
                        ok
                    }
                    // A watch may start before the run writes anything: an empty directory
                    // is waited on, not an error (a snapshot of it is one).
                    Err(RemoteError::ListingEmpty { .. }) => {
                        backoff.reset();
                        let ok = connected
                            || signals
                                .send(Signal::State(
                                    index,
                                    SourceState::Connected,
                                    "no dump files yet; waiting".into(),
                                ))
                                .is_ok();
                        connected = true;
                        std::thread::sleep(poll);
                        ok
                    }
                    Err(error) => {
                        connected = false;
                        let delay = if error.is_transient() {
                            backoff.next_delay()
                        } else {
                            poll.max(Duration::from_secs(5))
                        };
                        let ok = signals
                            .send(Signal::State(index, SourceState::Lost, error.to_string()))
                            .is_ok()
                            && signals
                                .send(Signal::State(
                                    index,
                                    SourceState::Retrying,
                                    format!("{error}; retrying in {} s", delay.as_secs_f64()),
                                ))
                                .is_ok();
                        std::thread::sleep(delay);
                        if error.is_transient() {
                            let _ = mirror.lock().expect("the mirror's lock").reconnect();
                        }
                        ok
                    }
                };
                if !sent {
                    return;
                }
            }
        })
        .expect("spawn the remote watch thread");
}
