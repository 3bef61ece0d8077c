//! `dumpview watch SOURCE… [--vs SOURCE] [--json]`: the findings of followed captures as
//! events on stdout, one per line, until interrupted, `--until-finding` or `--timeout`.

use std::collections::HashSet;
use std::io::Write;
use std::ops::ControlFlow;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::consumer::{Sink, Version, consume};
use super::{Followed, WatchOptions};
use crate::model::analysis::compare::Tolerances;
use crate::model::dump::{Dump, Warning};
use crate::model::watch::{FetchProgress, SourceState, Tracker, WatchEvent, snapshot};

/// What `dumpview watch` was asked.
#[derive(Debug, Clone)]
pub struct Headless {
    /// The sources merged into the followed capture.
    pub sources: Vec<Followed>,
    /// The capture compared against (`--vs`), itself followed.
    pub vs: Option<Followed>,
    /// One JSON object per line instead of text.
    pub json: bool,
    /// Stop at the first finding.
    pub until_finding: bool,
    /// Stop after this long.
    pub timeout: Option<Duration>,
    /// Tolerances of the `--vs` diff.
    pub tolerances: Tolerances,
    /// Poll interval and attempt.
    pub options: WatchOptions,
}

/// Unix seconds now.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Runs the watch, writing events to `out`. Returns the exit status: 0 no finding, 1 a
/// finding, 2 when no source could be read at start.
///
/// # Errors
/// Writing to `out` failed (a closed pipe ends the watch quietly: that is `Ok`).
pub fn run(args: &Headless, out: &mut dyn Write) -> std::io::Result<u8> {
    let followed: Vec<&Followed> = args.sources.iter().chain(args.vs.as_ref()).collect();
    let vs_index = args.vs.as_ref().map(|_| args.sources.len());
    let unreachable: Vec<&&Followed> = followed.iter().filter(|f| !f.root.exists()).collect();
    if unreachable.len() == args.sources.len()
        || vs_index.is_some_and(|i| !followed[i].root.exists())
    {
        for f in unreachable {
            let event = WatchEvent::source(
                &f.name,
                SourceState::Lost,
                "no such file or directory",
                now(),
            );
            write_event(out, &event, args.json)?;
        }
        return Ok(2);
    }
    let mut events = Events {
        out,
        json: args.json,
        until_finding: args.until_finding,
        names: followed.iter().map(|f| f.name.clone()).collect(),
        vs_name: args.vs.as_ref().map(|v| v.name.clone()),
        tracker: Tracker::new(),
        warned: HashSet::new(),
        found: false,
    };
    let deadline = args.timeout.map(|t| Instant::now() + t);
    consume(
        &args.sources,
        args.vs.as_ref(),
        args.options,
        &args.tolerances,
        deadline,
        &mut events,
    );
    Ok(u8::from(events.found))
}

/// The headless sink: each finding and source state as an event line on `out`.
struct Events<'o> {
    out: &'o mut dyn Write,
    json: bool,
    until_finding: bool,
    /// The SOURCE of each followed source, `--vs` last.
    names: Vec<String>,
    vs_name: Option<String>,
    tracker: Tracker,
    /// The warnings said already, (file, message).
    warned: HashSet<(String, String)>,
    found: bool,
}

impl Events<'_> {
    /// Writes `events`; a write that fails (a closed pipe) ends the watch quietly.
    fn write(&mut self, events: &[WatchEvent]) -> ControlFlow<()> {
        for event in events {
            self.found |= event.is_finding();
            if write_event(self.out, event, self.json).is_err() {
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    }
}

impl Sink for Events<'_> {
    fn states(
        &mut self,
        states: Vec<(usize, SourceState, String)>,
        fetching: Vec<(usize, FetchProgress)>,
    ) -> ControlFlow<()> {
        let events: Vec<WatchEvent> = states
            .iter()
            .map(|(i, state, reason)| WatchEvent::source(&self.names[*i], *state, reason, now()))
            .chain(
                fetching
                    .iter()
                    .map(|(i, progress)| WatchEvent::fetching(&self.names[*i], progress, now())),
            )
            .collect();
        self.write(&events)
    }

    fn version(&mut self, version: Version<'_>) -> ControlFlow<()> {
        let Version {
            merged,
            sources,
            clashes,
            vs,
            analysis,
            diagnosis,
        } = version;
        let mut events = Vec::new();
        let ts = now();
        for (source, warning) in clashes.iter().map(|(s, w)| (s, w)).chain(
            merged
                .warnings
                .iter()
                .map(|w| (source_of_warning(sources, merged, w), w)),
        ) {
            if self
                .warned
                .insert((warning.file.display().to_string(), warning.message.clone()))
            {
                events.push(WatchEvent::warning(source, warning, ts));
            }
        }
        if let Some(vs_dump) = vs {
            let name = self.vs_name.as_deref().expect("a --vs source");
            for warning in &vs_dump.warnings {
                if self
                    .warned
                    .insert((warning.file.display().to_string(), warning.message.clone()))
                {
                    events.push(WatchEvent::warning(name, warning, ts));
                }
            }
        }
        let vs_name = self.vs_name.as_deref();
        let mut now = snapshot(merged, sources, analysis, vs_name, ts);
        // The diagnosis after the findings it connects; the tracker says it only when its
        // conclusion or its cited records changed.
        now.push(WatchEvent::diagnosis(&self.names[0], diagnosis, ts));
        events.extend(self.tracker.update(now));
        self.write(&events)?;
        if self.found && self.until_finding {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

fn write_event(out: &mut dyn Write, event: &WatchEvent, json: bool) -> std::io::Result<()> {
    if json {
        writeln!(out, "{}", event.to_json())?;
    } else {
        writeln!(out, "{}", event.to_text())?;
    }
    out.flush()
}

/// The SOURCE whose window a warning's file belongs to (the first source when none does).
fn source_of_warning<'s>(sources: &'s [String], merged: &Dump, warning: &Warning) -> &'s String {
    merged
        .windows
        .iter()
        .position(|w| warning.file.starts_with(w.window_dir()))
        .map_or(&sources[0], |i| &sources[i])
}
