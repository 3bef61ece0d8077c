//! The runtime's job system on its own: events in order, cancelling a thread job and a child
//! process, and the one rule that drops stale events (`Jobs::accept`).

use std::process::Command;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use dumpview::internals::runtime::jobs::{
    JobError, JobEvent, JobId, JobOutput, JobProgress, JobUpdate, Jobs, Slot,
};

const PATIENCE: Duration = Duration::from_secs(20);

fn next(rx: &Receiver<JobUpdate>) -> JobUpdate {
    rx.recv_timeout(PATIENCE).expect("a job event in time")
}

/// The accepted events of the jobs until `id` has ended.
fn accepted_until_end(
    jobs: &mut Jobs<JobUpdate>,
    rx: &Receiver<JobUpdate>,
    id: JobId,
) -> Vec<JobUpdate> {
    let mut out = Vec::new();
    loop {
        let update = next(rx);
        let end = update.id == id && update.event.is_final();
        out.extend(jobs.accept(update));
        if end {
            return out;
        }
    }
}

fn elements(done: u64) -> JobProgress {
    JobProgress::Elements { done, total: 4 }
}

#[test]
fn a_job_reports_its_progress_in_order_then_its_result() {
    let (tx, rx) = channel();
    let mut jobs = Jobs::new(tx);
    let id = jobs.spawn(Slot::Export, "the test job", |cx| {
        for done in 0..=4 {
            cx.progress(elements(done));
        }
        Ok(JobOutput::Exported("report.md".into()))
    });
    assert_eq!(id, JobId(1));
    assert_eq!(jobs.current(Slot::Export), Some(id));
    let events = accepted_until_end(&mut jobs, &rx, id);
    let progress: Vec<u64> = events
        .iter()
        .filter_map(|u| match u.event {
            JobEvent::Progress(JobProgress::Elements { done, .. }) => Some(done),
            _ => None,
        })
        .collect();
    assert_eq!(progress, vec![0, 1, 2, 3, 4]);
    assert!(events.iter().all(|u| u.id == id && u.slot == Slot::Export));
    assert!(matches!(
        &events.last().unwrap().event,
        JobEvent::Done(JobOutput::Exported(path)) if path == "report.md"
    ));
    assert_eq!(jobs.current(Slot::Export), None, "its end ends the job");
    assert!(!jobs.any_running());
}

#[test]
fn a_failing_or_panicking_job_reports_why() {
    let (tx, rx) = channel();
    let mut jobs = Jobs::new(tx);
    let id = jobs.spawn(Slot::Export, "the export", |_| {
        Err(JobError::Failed("disk full".into()))
    });
    let events = accepted_until_end(&mut jobs, &rx, id);
    assert!(
        matches!(&events[..], [JobUpdate { event: JobEvent::Failed(e), .. }] if e == "disk full")
    );
    let id = jobs.spawn(Slot::Export, "the export", |_| panic!("boom"));
    let events = accepted_until_end(&mut jobs, &rx, id);
    assert!(
        matches!(&events[..], [JobUpdate { event: JobEvent::Failed(e), .. }] if e == "the export panicked: boom"),
        "{events:?}"
    );
}

#[test]
fn cancelling_a_thread_job_stops_it_and_drops_its_later_progress() {
    let (tx, rx) = channel();
    let mut jobs = Jobs::new(tx);
    let id = jobs.spawn(Slot::Compare, "the comparison", |cx| {
        let start = Instant::now();
        let mut done = 0;
        while !cx.is_cancelled() {
            assert!(start.elapsed() < PATIENCE, "never cancelled");
            cx.progress(elements(done));
            done += 1;
            std::thread::sleep(Duration::from_millis(5));
        }
        // Progress sent after the cancel is dropped.
        cx.progress(elements(999));
        Err(JobError::Cancelled)
    });
    // It runs: its first progress arrives.
    let first = next(&rx);
    assert!(matches!(
        jobs.accept(first).map(|u| u.event),
        Some(JobEvent::Progress(_))
    ));
    jobs.cancel(Slot::Compare);
    let events = accepted_until_end(&mut jobs, &rx, id);
    assert!(
        matches!(events.last().map(|u| &u.event), Some(JobEvent::Cancelled)),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .all(|u| !matches!(u.event, JobEvent::Progress(_))),
        "no progress after the cancel: {events:?}"
    );
    assert!(!jobs.any_running());
}

#[cfg(unix)]
#[test]
fn cancelling_a_child_process_kills_and_reaps_it() {
    let (tx, rx) = channel();
    let mut jobs = Jobs::new(tx);
    let id = jobs.spawn(Slot::Replay, "the replay", |cx| {
        let mut command = Command::new("sleep");
        command.arg("60");
        let output = cx.run_child(command)?;
        Ok(JobOutput::Exported(format!("exited {}", output.status)))
    });
    let update = jobs.accept(next(&rx)).expect("the job's own event");
    let JobEvent::Progress(JobProgress::Child { pid }) = update.event else {
        panic!("before the child started: {:?}", update.event)
    };
    let pid = pid as i32;
    // SAFETY: kill with signal 0 only checks that the process exists.
    assert_eq!(unsafe { libc::kill(pid, 0) }, 0, "sleep 60 is running");
    let started = Instant::now();
    jobs.cancel(Slot::Replay);
    let events = accepted_until_end(&mut jobs, &rx, id);
    assert!(
        matches!(events.last().map(|u| &u.event), Some(JobEvent::Cancelled)),
        "{events:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "killed, not waited for"
    );
    // The job reaps its child before it ends: the pid and its process group are gone.
    for target in [pid, -pid] {
        // SAFETY: as above.
        let r = unsafe { libc::kill(target, 0) };
        assert_eq!(r, -1, "{target} still exists");
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::ESRCH)
        );
    }
}

#[cfg(unix)]
#[test]
fn a_child_runs_to_its_end_with_its_output() {
    let (tx, rx) = channel();
    let mut jobs = Jobs::new(tx);
    let id = jobs.spawn(Slot::Replay, "the replay", |cx| {
        let mut command = Command::new("sh");
        command.args(["-c", "echo out; echo err >&2; exit 3"]);
        let output = cx.run_child(command)?;
        Ok(JobOutput::Exported(format!(
            "{:?} {} {}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    });
    let events = accepted_until_end(&mut jobs, &rx, id);
    assert!(
        matches!(events.last().map(|u| &u.event), Some(JobEvent::Done(JobOutput::Exported(s))) if s == "Some(3) out err"),
        "{events:?}"
    );
}

#[test]
fn a_newer_job_in_the_same_slot_makes_the_older_ones_events_stale() {
    let (tx, rx) = channel();
    let mut jobs = Jobs::new(tx);
    let (release_tx, release_rx) = channel::<()>();
    let old = jobs.spawn(Slot::Compare, "the comparison", move |cx| {
        // Ignores its cancel and finishes anyway, once released.
        release_rx.recv_timeout(PATIENCE).unwrap();
        cx.progress(elements(1));
        Ok(JobOutput::Exported("old".into()))
    });
    let new = jobs.spawn(Slot::Compare, "the comparison", |_| {
        Ok(JobOutput::Exported("new".into()))
    });
    assert_eq!((old, new), (JobId(1), JobId(2)));
    assert_eq!(jobs.current(Slot::Compare), Some(new));
    // Another slot is not affected.
    let export = jobs.spawn(Slot::Export, "the export", |_| {
        Ok(JobOutput::Exported("export".into()))
    });
    release_tx.send(()).unwrap();
    let mut raw = Vec::new();
    let mut accepted = Vec::new();
    while raw
        .iter()
        .filter(|u: &&JobUpdate| u.event.is_final())
        .count()
        < 3
    {
        let update = next(&rx);
        raw.push(update.clone());
        accepted.extend(jobs.accept(update));
    }
    assert!(
        raw.iter().any(|u| u.id == old && u.event.is_final()),
        "the old job did send its result"
    );
    let names: Vec<(JobId, String)> = accepted
        .iter()
        .map(|u| match &u.event {
            JobEvent::Done(JobOutput::Exported(s)) => (u.id, s.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&(new, "new".into())) && names.contains(&(export, "export".into())));
    // A result that arrives after its job ended is stale too.
    assert!(
        jobs.accept(JobUpdate {
            id: new,
            slot: Slot::Compare,
            event: JobEvent::Done(JobOutput::Exported("again".into())),
        })
        .is_none()
    );
}

#[test]
fn a_job_that_finishes_before_the_cancel_reaches_it_keeps_its_result() {
    let (tx, rx) = channel();
    let mut jobs = Jobs::new(tx);
    let (release_tx, release_rx) = channel::<()>();
    let id = jobs.spawn(Slot::Compare, "the comparison", move |_| {
        release_rx.recv_timeout(PATIENCE).unwrap();
        Ok(JobOutput::Exported("finished".into()))
    });
    jobs.cancel(Slot::Compare);
    release_tx.send(()).unwrap();
    let events = accepted_until_end(&mut jobs, &rx, id);
    assert!(
        matches!(events.last().map(|u| &u.event), Some(JobEvent::Done(JobOutput::Exported(s))) if s == "finished"),
        "{events:?}"
    );
}
