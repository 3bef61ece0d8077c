//! The one watch consumer: follows the sources, refreshes their captures as signals arrive,
//! analyses each new version against the previous one, and hands what it saw to a [`Sink`]:
//! the headless events of `dumpview watch` (`headless.rs`) or the workbench's channel
//! (`workbench.rs`).

use std::ops::ControlFlow;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use super::{Captures, Followed, WatchOptions, merge};
use crate::model::analysis::Analysis;
use crate::model::analysis::compare::Tolerances;
use crate::model::analysis::diagnosis::{Diagnosis, diagnose};
use crate::model::dump::{Dump, Warning};
use crate::model::watch::{FetchProgress, SourceState};

/// A new version of the followed capture, analysed.
pub(crate) struct Version<'a> {
    /// Capture A: the windows of every source merged (without the clash warnings).
    pub merged: &'a Dump,
    /// The SOURCE of each window of `merged`, in order.
    pub sources: &'a [String],
    /// A warning for each rank two sources hold, with the first SOURCE holding it.
    pub clashes: &'a [(String, Warning)],
    /// Capture B (`--vs`), once it has been read.
    pub vs: Option<&'a Dump>,
    /// `merged` analysed against `vs`.
    pub analysis: &'a Analysis,
    /// `analysis`'s findings connected into one answer, computed once per version on the
    /// watch thread: the workbench's banner and `dumpview watch`'s `diagnosis` event.
    pub diagnosis: &'a Diagnosis,
}

/// Where a watch's findings go. Each method's `ControlFlow::Break` ends the watch (a closed
/// pipe, a finding with `--until-finding`, the workbench gone); `Continue` waits for more.
pub(crate) trait Sink {
    /// Sources whose state changed, `(index, state, reason)`, and background fetches that
    /// moved on, `(index, progress)`, in the order they came; called for every batch of
    /// signals, before a new version is analysed.
    fn states(
        &mut self,
        states: Vec<(usize, SourceState, String)>,
        fetching: Vec<(usize, FetchProgress)>,
    ) -> ControlFlow<()>;

    /// A new version of the capture, after a batch that changed some source's files.
    fn version(&mut self, version: Version<'_>) -> ControlFlow<()>;
}

/// Follows `sources` (merged into capture A) and `vs` (capture B) until the sink breaks,
/// every follower has ended, or `deadline` passes. Only the windows that changed are scanned
/// and diffed again ([`Analysis::refresh_with`], given the files ingest read again).
pub(crate) fn consume(
    sources: &[Followed],
    vs: Option<&Followed>,
    options: WatchOptions,
    tolerances: &Tolerances,
    deadline: Option<Instant>,
    sink: &mut dyn Sink,
) {
    let followed: Vec<&Followed> = sources.iter().chain(vs).collect();
    let n = sources.len();
    let mut captures = Captures::start(&followed, options);
    let mut last: Option<(Dump, Option<Dump>, Analysis)> = None;
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return;
        }
        let wait = deadline.map_or(Duration::from_secs(3600), |d| {
            d.saturating_duration_since(Instant::now())
        });
        let batch = match captures.next(wait) {
            Ok(batch) => batch,
            Err(RecvTimeoutError::Timeout) if deadline.is_some_and(|d| Instant::now() >= d) => {
                return;
            }
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        if sink.states(batch.states, batch.fetching).is_break() {
            return;
        }
        if !batch.changed {
            continue;
        }
        // The files ingest read again since the last version, per side: what
        // `refresh_with` analyses again (the rest is reused without comparing windows).
        let changes = [
            captures.take_changes(0..n),
            captures.take_changes(n..captures.dumps.len()),
        ];
        let dumps = &captures.dumps;
        let (merged, names, clashes) = merge(&followed[..n], &dumps[..n]);
        let vs_dump = vs.and_then(|_| dumps[n].as_ref());
        let analysis = match &last {
            Some((old_a, old_b, old)) => old.refresh_with(
                (old_a, old_b.as_ref()),
                (&merged, vs_dump),
                [&changes[0], &changes[1]],
            ),
            None => Analysis::compute(&merged, vs_dump, tolerances),
        };
        let diagnosis = diagnose(&merged, vs_dump, &analysis);
        let flow = sink.version(Version {
            merged: &merged,
            sources: &names,
            clashes: &clashes,
            vs: vs_dump,
            analysis: &analysis,
            diagnosis: &diagnosis,
        });
        last = Some((merged, vs_dump.cloned(), analysis));
        if flow.is_break() {
            return;
        }
    }
}
