//! The workbench's runtime: the terminal, input, background jobs and the event loop, around
//! [`crate::app::update`].
//!
//! Everything the workbench reacts to arrives as a [`Message`] on one channel: terminal
//! input (read on its own thread, [`input`]), job events ([`jobs`]), and actions sent from
//! outside (a watch timer, a test). The loop blocks on that channel, applies what arrives
//! (draining what is queued, so a held key costs one frame), carries out the
//! [`Effect`]s that `update` returns, and draws only when something arrived that
//! changed the screen: an action, a resize, a job event. Idle, it neither wakes nor draws.
//!
//! [`Runtime`] is generic over the ratatui backend: [`run`] drives a real terminal, and
//! headless runs ([`run_with`], or a `Runtime` over `TestBackend`) drive the same loop with
//! scripted input.

pub mod input;
pub mod jobs;
pub mod load;
mod matrix_job;
pub mod replay_history;
mod terminal;
pub mod watch;
mod work;

use std::io;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::crossterm::event::Event;
use ratatui::layout::Rect;

pub use crate::app::jobs::Source;
use crate::app::jobs::{JobEvent, JobOutput, JobProgress, JobUpdate, Slot};
use crate::app::{Action, App, Effect, update};
use crate::model::analysis::compare::Tolerances;
use crate::ui;
use jobs::Jobs;

/// What arrives on the runtime's one channel.
#[derive(Debug)]
pub enum Message {
    /// A terminal event: translated through the keymap or the UI's hit-testing.
    Input(Event),
    /// An action, applied as it is (a watch timer, a script).
    Action(Action),
    /// A job's event; dropped unless its job is its slot's current ([`Jobs::accept`]).
    Job(JobUpdate),
    /// The input source has ended (a script ran out): the loop returns once no job runs.
    InputEnded,
    /// Reading the terminal failed: the loop returns this error.
    InputFailed(io::Error),
}

impl From<JobUpdate> for Message {
    fn from(update: JobUpdate) -> Message {
        Message::Job(update)
    }
}

/// Why the workbench could not run (the binary prints it and exits 2).
#[derive(Debug)]
pub enum RunError {
    /// The captures could not be opened: found before the terminal was taken when the load
    /// fails within [`PRELOAD_WAIT`], else behind the loading gauge, which then closes.
    Load(String),
    /// The terminal could not be set up, read or drawn on.
    Terminal(io::Error),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Load(message) => f.write_str(message),
            RunError::Terminal(error) => write!(f, "terminal: {error}"),
        }
    }
}

impl std::error::Error for RunError {}

/// How long [`run`] waits for the load before it takes the terminal: a load that fails or
/// ends sooner (an unreadable input fails at once) never shows the loading gauge.
pub const PRELOAD_WAIT: Duration = Duration::from_millis(300);

/// How long quitting waits for a running replay to stop: its cancel is seen within 50 ms on
/// the job's own thread, which then kills the Python's process group (or ends the remote
/// side); a process that exits first would leave the group's other members running.
pub const REPLAY_STOP_WAIT: Duration = Duration::from_secs(2);

/// What the loading thread started by [`run`] reports.
enum Preload {
    Progress(crate::model::ingest::Progress),
    Done(Result<Box<crate::app::Session>, String>),
}

/// Runs the workbench on the terminal until the user quits. `source` is loaded (and
/// diffed under `tolerances`) on its own thread, started before the terminal is taken: a
/// load that ends within [`PRELOAD_WAIT`] opens the workbench on its result, or returns its
/// error without touching the terminal; a longer one goes on behind the loading gauge.
///
/// Returns how it ended: quit, or quit before the load finished ([`Ended`]).
///
/// # Errors
/// [`RunError::Load`] when the captures cannot be opened (the terminal is given back
/// first); [`RunError::Terminal`] on terminal I/O errors.
pub fn run(source: Source, tolerances: Tolerances) -> Result<Ended, RunError> {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let (preload, loaded) = channel();
    std::thread::spawn(move || {
        let mut limit = work::ProgressLimit::new();
        let progress_sink = preload.clone();
        let mut progress = |p| {
            if limit.passes(&p) {
                let _ = progress_sink.send(Preload::Progress(p));
            }
        };
        let result = jobs::caught("loading", || {
            load::source(&source, &tolerances, &mut progress)
                .map(Box::new)
                .map_err(jobs::JobError::Failed)
        })
        .map_err(|e| match e {
            jobs::JobError::Failed(message) => message,
            jobs::JobError::Cancelled => "loading was cancelled".to_string(),
        });
        let _ = preload.send(Preload::Done(result));
    });
    let deadline = Instant::now() + PRELOAD_WAIT;
    let mut progress = None;
    let first = loop {
        match loaded.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Preload::Progress(p)) => progress = Some(p),
            Ok(Preload::Done(result)) => break Some(result),
            Err(RecvTimeoutError::Timeout) => break None,
            Err(RecvTimeoutError::Disconnected) => {
                break Some(Err("loading stopped without a result".to_string()));
            }
        }
    };
    let still_loading = first.is_none();
    let mut app = match first {
        Some(Err(error)) => return Err(RunError::Load(error)),
        Some(Ok(session)) => App::new(*session, no_color),
        None => {
            let mut app = App::loading(no_color);
            app.loading = progress.or(app.loading);
            app
        }
    };
    app.working_dir = std::env::current_dir().ok();
    let (guard, terminal) = terminal::TerminalGuard::take().map_err(RunError::Terminal)?;
    let mut runtime = Runtime::new(terminal, app);
    runtime.end_on_load_error = true;
    if still_loading {
        // The loading thread becomes the Reload slot's current job: its events go through
        // the one channel like any job's.
        let cx = runtime.jobs.start(Slot::Reload);
        std::thread::spawn(move || {
            for event in loaded {
                match event {
                    Preload::Progress(p) => cx.progress(JobProgress::Load(p)),
                    Preload::Done(Ok(session)) => {
                        cx.send(JobEvent::Done(JobOutput::Loaded(session)))
                    }
                    Preload::Done(Err(error)) => cx.send(JobEvent::Failed(error)),
                }
            }
        });
    }
    input::spawn_terminal_reader(runtime.sender());
    let result = runtime.run();
    let (load_error, loaded) = match runtime.app() {
        app if app.loaded.is_none() => (app.load_error.clone(), false),
        _ => (None, true),
    };
    // Jobs are cancelled (children killed) before the terminal is given back.
    runtime.stop_children(REPLAY_STOP_WAIT);
    drop(runtime);
    drop(guard);
    result.map_err(RunError::Terminal)?;
    match (load_error, loaded) {
        (Some(e), _) => Err(RunError::Load(e)),
        (None, true) => Ok(Ended::Quit),
        (None, false) => Ok(Ended::BeforeLoaded),
    }
}

/// How a workbench session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The user quit the loaded workbench.
    Quit,
    /// The user quit (`q`, Ctrl-C) while the captures were still loading: no answer was given.
    BeforeLoaded,
}

/// Runs the workbench following `sources` (merged into capture A) and, with `vs`, diffing
/// against it (itself followed): each new version of the captures is installed in place as
/// it lands, keeping the user's place.
///
/// # Errors
/// Terminal I/O errors.
pub fn run_watch(
    sources: Vec<watch::Followed>,
    vs: Option<watch::Followed>,
    options: watch::WatchOptions,
    tolerances: crate::model::analysis::compare::Tolerances,
) -> io::Result<()> {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let (guard, terminal) = terminal::TerminalGuard::take()?;
    let mut app = App::loading(no_color);
    let names = sources.iter().chain(&vs).map(|s| s.name.clone()).collect();
    app.watch = Some(crate::app::watch::WatchStatus::of(names));
    let mut runtime = Runtime::new(terminal, app);
    input::spawn_terminal_reader(runtime.sender());
    watch::workbench::spawn(sources, vs, options, tolerances, runtime.sender());
    let result = runtime.run();
    runtime.stop_children(REPLAY_STOP_WAIT);
    drop(runtime);
    drop(guard);
    result
}

/// Runs the real loop headless: `app` on `terminal`, input from `script` (sent into the
/// channel on its own thread), until the app quits or the script has ended and no job
/// runs. Returns the app and the terminal, whose buffer holds the last frame.
///
/// # Errors
/// The backend's errors.
pub fn run_with<B>(
    terminal: Terminal<B>,
    app: App,
    script: impl IntoIterator<Item = Message> + Send + 'static,
) -> io::Result<(App, Terminal<B>)>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
{
    let mut runtime = Runtime::new(terminal, app);
    input::spawn_script(runtime.sender(), script);
    runtime.run()?;
    Ok(runtime.into_parts())
}

/// The event loop's state: the terminal, the app, the channel and the jobs.
pub struct Runtime<B: Backend> {
    terminal: Terminal<B>,
    app: App,
    sender: Sender<Message>,
    inbox: Receiver<Message>,
    jobs: Jobs<Message>,
    /// Headless tests: spawned jobs are made current but not run, and effects are logged.
    hold_jobs: bool,
    performed: Vec<Effect>,
    /// Something changed since the last frame.
    dirty: bool,
    input_ended: bool,
    /// [`run`]: the loop ends when the first load fails (the error goes to stderr).
    end_on_load_error: bool,
}

impl<B> Runtime<B>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
{
    /// A runtime over `terminal` and `app`; the first [`Runtime::run`] draws a frame.
    pub fn new(terminal: Terminal<B>, app: App) -> Runtime<B> {
        let (sender, inbox) = channel();
        Runtime {
            terminal,
            app,
            jobs: Jobs::new(sender.clone()),
            sender,
            inbox,
            hold_jobs: false,
            performed: Vec::new(),
            dirty: true,
            input_ended: false,
            end_on_load_error: false,
        }
    }

    /// For headless tests that script job events themselves: a spawned job becomes its
    /// slot's current job (ids from 1 up, as always) but nothing runs it, and every effect
    /// performed is kept for [`Runtime::take_effects`].
    pub fn hold_jobs(mut self) -> Runtime<B> {
        self.hold_jobs = true;
        self
    }

    /// A sender into the loop's channel (input sources, job sinks, tests).
    pub fn sender(&self) -> Sender<Message> {
        self.sender.clone()
    }

    /// The app as the loop left it.
    pub fn app(&self) -> &App {
        &self.app
    }

    /// The app, to change it from outside the loop; the next frame is drawn anew.
    pub fn app_mut(&mut self) -> &mut App {
        self.dirty = true;
        &mut self.app
    }

    /// The terminal (its backend holds the last frame).
    pub fn terminal(&self) -> &Terminal<B> {
        &self.terminal
    }

    /// The terminal, to resize a test backend; the next frame is drawn anew.
    pub fn terminal_mut(&mut self) -> &mut Terminal<B> {
        self.dirty = true;
        &mut self.terminal
    }

    /// The jobs, to ask which is current in a slot.
    pub fn jobs(&self) -> &Jobs<Message> {
        &self.jobs
    }

    /// With [`Runtime::hold_jobs`]: the effects performed since the last call.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.performed)
    }

    /// Cancels the running replay and case-matrix run, if any, and waits up to `timeout` for
    /// their jobs to end: their runners kill the Python's process group (or end the remote
    /// side) from the job's thread once they see the cancel, which must happen before the
    /// process exits. Other jobs are only cancelled when the runtime is dropped (their
    /// children die with their [`jobs::CancelHandle`]).
    pub fn stop_children(&mut self, timeout: Duration) {
        const SLOTS: [Slot; 2] = [Slot::Replay, Slot::Cases];
        let running = |jobs: &jobs::Jobs<Message>| SLOTS.iter().any(|s| jobs.current(*s).is_some());
        if !running(&self.jobs) {
            return;
        }
        for slot in SLOTS {
            if self.jobs.current(slot).is_some() {
                self.jobs.cancel(slot);
            }
        }
        let deadline = Instant::now() + timeout;
        while running(&self.jobs) {
            match self
                .inbox
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(Message::Job(update)) => {
                    // Only its slot's bookkeeping: the app is past drawing.
                    let _ = self.jobs.accept(update);
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }

    /// The app and the terminal, the runtime's jobs cancelled.
    pub fn into_parts(self) -> (App, Terminal<B>) {
        let Runtime { terminal, app, .. } = self;
        (app, terminal)
    }

    /// The loop: draws when something changed, blocks for the next message, applies it and
    /// everything queued behind it. Returns when the app quits, or when the input has ended
    /// ([`Message::InputEnded`]) and no job runs (held jobs do not count); a later call
    /// goes on from there.
    ///
    /// # Errors
    /// The backend's errors; [`Message::InputFailed`].
    pub fn run(&mut self) -> io::Result<()> {
        loop {
            if self.app.should_quit
                || (self.end_on_load_error
                    && self.app.loaded.is_none()
                    && self.app.load_error.is_some())
            {
                return Ok(());
            }
            if self.dirty {
                self.draw()?;
            }
            if self.input_ended && (self.hold_jobs || !self.jobs.any_running()) {
                self.input_ended = false;
                return Ok(());
            }
            let Ok(message) = self.inbox.recv() else {
                return Ok(());
            };
            self.handle(message)?;
            while !self.app.should_quit {
                let Ok(message) = self.inbox.try_recv() else {
                    break;
                };
                self.handle(message)?;
            }
        }
    }

    /// Applies one message.
    fn handle(&mut self, message: Message) -> io::Result<()> {
        match message {
            Message::Input(event) => {
                let size = self.terminal.size().map_err(io::Error::other)?;
                let area = Rect::new(0, 0, size.width, size.height);
                for event in input::split_meta(event) {
                    if let Some(action) = input::translate(event, &self.app, area) {
                        self.apply(action);
                    }
                }
            }
            Message::Action(action) => self.apply(action),
            Message::Job(update) => {
                if let Some(update) = self.jobs.accept(update) {
                    self.apply(Action::Job(update));
                }
            }
            Message::InputEnded => self.input_ended = true,
            Message::InputFailed(e) => return Err(e),
        }
        Ok(())
    }

    fn apply(&mut self, action: Action) {
        let effects = update(&mut self.app, action);
        self.dirty = true;
        self.perform(effects);
    }

    /// Carries out effects: jobs started in their slots, or cancelled; the replay history
    /// read (the answer goes into the channel as [`Action::ReplayHistory`]) or added to.
    pub fn perform(&mut self, effects: Vec<Effect>) {
        for effect in effects {
            if self.hold_jobs {
                match &effect {
                    Effect::Spawn(spec) => drop(self.jobs.start(spec.slot())),
                    Effect::Cancel(slot) => self.jobs.cancel(*slot),
                    // Tests answer for the history file themselves.
                    Effect::LoadReplayHistory | Effect::RememberReplay(_) => {}
                }
                self.performed.push(effect);
                continue;
            }
            match effect {
                Effect::Spawn(spec) => work::spawn(&mut self.jobs, spec),
                Effect::Cancel(slot) => self.jobs.cancel(slot),
                // A small file (bounded, `history::MAX_BYTES`), read on this thread; the app
                // merges what it remembered before the answer came.
                Effect::LoadReplayHistory => {
                    let (entries, note) = replay_history::load();
                    let event = crate::app::replay::HistoryEvent::Loaded { entries, note };
                    let _ = self
                        .sender
                        .send(Message::Action(Action::ReplayHistory(event)));
                }
                Effect::RememberReplay(entry) => {
                    if let Err(why) = replay_history::remember(entry) {
                        let event = crate::app::replay::HistoryEvent::NotSaved(why);
                        let _ = self
                            .sender
                            .send(Message::Action(Action::ReplayHistory(event)));
                    }
                }
            }
        }
    }

    /// One frame: the terminal's size, the timeline's height and the open overlay's scroll
    /// range reported to the app when they changed, then drawn.
    fn draw(&mut self) -> io::Result<()> {
        let size = self.terminal.size().map_err(io::Error::other)?;
        let area = Rect::new(0, 0, size.width, size.height);
        if (size.width, size.height) != self.app.size {
            update(&mut self.app, Action::Resize(size.width, size.height));
        }
        // Laid out once: the sizes reported below change no input of the layout.
        let screen = ui::screen(area, &self.app);
        let rows = screen.areas.timeline_rows();
        if rows != self.app.view_height && self.app.loaded.is_some() {
            update(&mut self.app, Action::ViewHeight(rows));
        }
        let scroll_max = ui::overlay_scroll_max(area, &self.app);
        if scroll_max != self.app.overlay_scroll_max {
            update(&mut self.app, Action::OverlayScrollMax(scroll_max));
        }
        self.terminal
            .draw(|frame| ui::draw_screen(frame, &self.app, &screen))
            .map_err(io::Error::other)?;
        self.dirty = false;
        Ok(())
    }
}
