//! `dumpview watch SOURCE… [--vs SOURCE] [--json]`: the findings of followed captures as
//! events on stdout, one per line, until interrupted, `--until-finding` or `--timeout`.

use std::collections::HashSet;
use std::io::Write;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{Captures, Followed, WatchOptions, merge};
use crate::model::analysis::Analysis;
use crate::model::analysis::compare::Tolerances;
use crate::model::dump::{Dump, Warning};
use crate::model::watch::{SourceState, Tracker, WatchEvent, snapshot};

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
    let mut captures = Captures::start(&followed, args.options);
    let mut tracker = Tracker::new();
    let mut warned: HashSet<(String, String)> = HashSet::new();
    let deadline = args.timeout.map(|t| Instant::now() + t);
    let mut found = false;
    let mut last: Option<(Dump, Option<Dump>, Analysis)> = None;
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let wait = deadline.map_or(Duration::from_secs(3600), |d| {
            d.saturating_duration_since(Instant::now())
        });
        let batch = match captures.next(wait) {
            Ok(batch) => batch,
            Err(RecvTimeoutError::Timeout) if deadline.is_some_and(|d| Instant::now() >= d) => {
                break;
            }
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let mut events: Vec<WatchEvent> = batch
            .states
            .iter()
            .map(|(i, state, reason)| WatchEvent::source(&followed[*i].name, *state, reason, now()))
            .chain(
                batch
                    .fetching
                    .iter()
                    .map(|(i, progress)| WatchEvent::fetching(&followed[*i].name, progress, now())),
            )
            .collect();
        let changes = [
            captures.take_changes(0..args.sources.len()),
            captures.take_changes(args.sources.len()..captures.dumps.len()),
        ];
        let dumps = &captures.dumps;
        if batch.changed {
            let (merged, sources, clashes) = merge(
                &followed[..args.sources.len()],
                &dumps[..args.sources.len()],
            );
            let vs_dump = vs_index.and_then(|i| dumps[i].as_ref());
            // Only windows that changed are scanned and diffed again.
            let analysis = match &last {
                Some((old_a, old_b, old)) => old.refresh_with(
                    (old_a, old_b.as_ref()),
                    (&merged, vs_dump),
                    [&changes[0], &changes[1]],
                ),
                None => Analysis::compute(&merged, vs_dump, &args.tolerances),
            };
            let ts = now();
            for (source, warning) in clashes.iter().map(|(s, w)| (s, w)).chain(
                merged
                    .warnings
                    .iter()
                    .map(|w| (source_of_warning(&sources, &merged, w), w)),
            ) {
                if warned.insert((warning.file.display().to_string(), warning.message.clone())) {
                    events.push(WatchEvent::warning(source, warning, ts));
                }
            }
            if let Some(vs_dump) = vs_dump {
                let name = &followed[vs_index.expect("a --vs source")].name;
                for warning in &vs_dump.warnings {
                    if warned.insert((warning.file.display().to_string(), warning.message.clone()))
                    {
                        events.push(WatchEvent::warning(name, warning, ts));
                    }
                }
            }
            let vs_name = vs_index.map(|i| followed[i].name.as_str());
            events.extend(tracker.update(snapshot(&merged, &sources, &analysis, vs_name, ts)));
            last = Some((merged, vs_dump.cloned(), analysis));
        }
        for event in &events {
            found |= event.is_finding();
            if write_event(out, event, args.json).is_err() {
                return Ok(u8::from(found));
            }
        }
        if found && args.until_finding {
            break;
        }
    }
    Ok(u8::from(found))
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
