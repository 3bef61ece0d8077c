//! The workbench's watch thread: follows the sources, and sends each new version of the
//! capture, analysed, into the runtime's channel as [`Action::Watched`] (the UI thread only
//! installs it), and each source's state as [`Action::WatchSource`].

use std::sync::mpsc::{RecvTimeoutError, Sender};
use std::time::Duration;

use super::{Captures, Followed, WatchOptions, merge};
use crate::app::{Action, Session};
use crate::model::analysis::Analysis;
use crate::model::analysis::compare::Tolerances;
use crate::model::dump::Dump;
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
    let mut captures = Captures::start(&followed, options);
    let mut last: Option<(Dump, Option<Dump>, Analysis)> = None;
    loop {
        let batch = match captures.next(Duration::from_secs(3600)) {
            Ok(batch) => batch,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        for (index, state, reason) in batch.states {
            let sent = messages.send(Message::Action(Action::WatchSource {
                index,
                state,
                reason,
            }));
            if sent.is_err() {
                return;
            }
        }
        for (index, progress) in batch.fetching {
            let sent = messages.send(Message::Action(Action::WatchFetching { index, progress }));
            if sent.is_err() {
                return;
            }
        }
        if !batch.changed {
            continue;
        }
        let changes = [
            captures.take_changes(0..sources.len()),
            captures.take_changes(sources.len()..captures.dumps.len()),
        ];
        let dumps = &captures.dumps;
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
                Some((old_a, old_b, old)) => old.refresh_with(
                    (old_a, old_b.as_ref()),
                    (&a, b.as_ref()),
                    [&changes[0], &changes[1]],
                ),
                None => Analysis::compute(&a, b.as_ref(), tolerances),
            },
            a,
            b,
            checkout: None,
            checkout_differs: None,
            saved: Default::default(),
            roots: Vec::new(),
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
