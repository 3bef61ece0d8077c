//! The workbench's watch thread: follows the sources, and sends each new version of the
//! capture, analysed, into the runtime's channel as [`Action::Watched`] (the UI thread only
//! installs it), and each source's state as [`Action::WatchSource`].

use std::sync::mpsc::{Sender, channel};

use super::{Followed, SETTLE, Signal, WatchOptions, follow, merge};
use crate::app::{Action, Session};
use crate::model::analysis::Analysis;
use crate::model::analysis::compare::Tolerances;
use crate::model::dump::Dump;
use crate::model::ingest::Incremental;
use crate::model::watch::SourceState;
use crate::runtime::Message;
use crate::runtime::load::{format_names, with_saved_tensors};

/// Starts the watch thread for `sources` (merged into capture A) and `vs` (capture B),
/// reporting into `messages` until the runtime drops its receiver.
pub fn spawn(
    sources: Vec<Followed>,
    vs: Option<Followed>,
    options: WatchOptions,
    tolerances: Tolerances,
    messages: Sender<Message>,
) {
    std::thread::Builder::new()
        .name("watch".into())
        .spawn(move || watch(&sources, vs.as_ref(), options, &tolerances, &messages))
        .expect("spawn the watch thread");
}

fn watch(
    sources: &[Followed],
    vs: Option<&Followed>,
    options: WatchOptions,
    tolerances: &Tolerances,
    messages: &Sender<Message>,
) {
    let followed: Vec<&Followed> = sources.iter().chain(vs).collect();
    let (signals, received) = channel();
    let _followers: Vec<_> = followed
        .iter()
        .enumerate()
        .map(|(i, f)| follow(i, f, options.poll, signals.clone()))
        .collect();
    drop(signals);
    let mut captures: Vec<Incremental> = followed
        .iter()
        .map(|f| Incremental::new(vec![f.root.clone()], options.attempt))
        .collect();
    let mut dumps: Vec<Option<Dump>> = vec![None; followed.len()];
    let mut states: Vec<Option<SourceState>> = vec![None; followed.len()];
    let send_state = |index: usize, state: SourceState, reason: String| {
        messages
            .send(Message::Action(Action::WatchSource {
                index,
                state,
                reason,
            }))
            .is_ok()
    };
    let mut last: Option<(Dump, Option<Dump>, Analysis)> = None;
    while let Ok(first) = received.recv() {
        // Let a burst (a write, then a rename) arrive before reading.
        std::thread::sleep(SETTLE);
        let mut changed = vec![false; followed.len()];
        for signal in std::iter::once(first).chain(received.try_iter()) {
            match signal {
                Signal::Changed(i) => changed[i] = true,
                Signal::State(i, state, reason) => {
                    if !send_state(i, state, reason) {
                        return;
                    }
                }
            }
        }
        let mut new_version = false;
        for (i, capture) in captures.iter_mut().enumerate().filter(|(i, _)| changed[*i]) {
            match capture.refresh() {
                Ok((dump, stats)) => {
                    if states[i] != Some(SourceState::Connected) {
                        states[i] = Some(SourceState::Connected);
                        if !send_state(i, SourceState::Connected, "reading".into()) {
                            return;
                        }
                    }
                    if dumps[i].is_none() || stats.read > 0 || stats.removed > 0 {
                        dumps[i] = Some(dump);
                        new_version = true;
                    }
                }
                Err(error) => {
                    if states[i] != Some(SourceState::Lost) {
                        states[i] = Some(SourceState::Lost);
                        if !send_state(i, SourceState::Lost, error.to_string()) {
                            return;
                        }
                    }
                }
            }
        }
        if !new_version {
            continue;
        }
        let (mut a, _, clashes) = merge(&followed[..sources.len()], &dumps[..sources.len()]);
        a.warnings.extend(clashes.into_iter().map(|(_, w)| w));
        let b = vs.and_then(|_| dumps[sources.len()].clone());
        let names: Vec<&str> = sources.iter().map(|s| s.name.as_str()).collect();
        let session = Session {
            title: match vs {
                Some(vs) => format!("watch {} vs {}", names.join(" + "), vs.name),
                None => format!("watch {}", names.join(" + ")),
            },
            format: format_names(&a, b.as_ref()),
            // Only windows that changed are scanned and diffed again.
            analysis: match &last {
                Some((old_a, old_b, old)) => old.refresh((old_a, old_b.as_ref()), (&a, b.as_ref())),
                None => Analysis::compute(&a, b.as_ref(), tolerances),
            },
            a,
            b,
            checkout: None,
            checkout_differs: None,
            saved: Default::default(),
        };
        last = Some((
            session.a.clone(),
            session.b.clone(),
            session.analysis.clone(),
        ));
        let session = with_saved_tensors(session);
        if messages
            .send(Message::Action(Action::Watched(Box::new(session))))
            .is_err()
        {
            return;
        }
    }
}
