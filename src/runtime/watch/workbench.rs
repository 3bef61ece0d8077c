//! The workbench's watch thread: follows the sources, and sends each new version of the
//! capture, analysed, into the runtime's channel as [`Action::Watched`] (the UI thread only
//! installs it), and each source's state as [`Action::WatchSource`].

use std::ops::ControlFlow;
use std::sync::mpsc::Sender;

use super::consumer::{Sink, Version, consume};
use super::{Followed, WatchOptions};
use crate::app::{Action, Session};
use crate::model::analysis::compare::Tolerances;
use crate::model::watch::{FetchProgress, SourceState};
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
    let names: Vec<&str> = sources.iter().map(|s| s.name.as_str()).collect();
    let mut sink = Channel {
        title: match vs {
            Some(vs) => format!("watch {} vs {}", names.join(" + "), vs.name),
            None => format!("watch {}", names.join(" + ")),
        },
        messages,
    };
    consume(sources, vs, options, tolerances, None, &mut sink);
}

/// The workbench's sink: source states and each new version as actions on the runtime's
/// channel; the watch ends when the runtime has dropped its receiver.
struct Channel<'m> {
    /// The session's title.
    title: String,
    messages: &'m Sender<Message>,
}

impl Channel<'_> {
    fn send(&self, action: Action) -> ControlFlow<()> {
        match self.messages.send(Message::Action(action)) {
            Ok(()) => ControlFlow::Continue(()),
            Err(_) => ControlFlow::Break(()),
        }
    }
}

impl Sink for Channel<'_> {
    fn states(
        &mut self,
        states: Vec<(usize, SourceState, String)>,
        fetching: Vec<(usize, FetchProgress)>,
    ) -> ControlFlow<()> {
        for (index, state, reason) in states {
            self.send(Action::WatchSource {
                index,
                state,
                reason,
            })?;
        }
        for (index, progress) in fetching {
            self.send(Action::WatchFetching { index, progress })?;
        }
        ControlFlow::Continue(())
    }

    fn version(&mut self, version: Version<'_>) -> ControlFlow<()> {
        let mut a = version.merged.clone();
        a.warnings
            .extend(version.clashes.iter().map(|(_, w)| w.clone()));
        let b = version.vs.cloned();
        let session = Session {
            title: self.title.clone(),
            format: format_names(&a, b.as_ref()),
            analysis: version.analysis.clone(),
            diagnosis: version.diagnosis.clone(),
            a,
            b,
            checkout: None,
            checkout_differs: None,
            saved: Default::default(),
            remote_dirs: Default::default(),
            roots: Vec::new(),
        };
        self.send(Action::Watched(Box::new(with_saved_tensors(session))))
    }
}
