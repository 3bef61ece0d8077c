//! The workbench's runtime: terminal setup and restore, the event loop, and background jobs.
//!
//! Everything here is plumbing around [`crate::app::update`]: terminal events
//! become [`Action`]s, [`Effect`]s become threads, and every thread reports
//! its owned result back through one channel as another action. The terminal
//! is restored on every exit path, panics included.
//!
//! The only shared state is a running tensor comparison's [`TensorProgress`] (its element
//! counter and cancel flag): the runtime keeps it by generation in [`Jobs`], the App only
//! ever sees the numbers sent as actions.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{
    self, DisableMouseCapture, EnableMouseCapture, Event, KeyCode, KeyEvent, KeyEventKind,
    KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::crossterm::execute;

use crate::app::{Action, App, Effect, Session, update};
use crate::model::tensor::metrics::Progress as TensorProgress;
use crate::model::tensor::pairing;
use crate::ui;

/// How often a running tensor comparison reports its progress.
const TENSOR_PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// What the runtime holds of its running jobs: each tensor comparison's shared progress,
/// by generation, so Esc can set its cancel flag. Removed when its result comes back.
#[derive(Default)]
struct Jobs {
    tensors: HashMap<u64, Arc<TensorProgress>>,
}

/// What to open.
pub enum Source {
    /// One or two captures on disk.
    Files { a: PathBuf, b: Option<PathBuf> },
    /// An embedded example pair, by name.
    Example(String),
}

/// Runs the workbench until the user quits.
///
/// # Errors
/// Terminal I/O errors; load errors are shown on screen instead.
pub fn run(source: Source) -> std::io::Result<()> {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let (tx, rx) = channel();

    // A panic on this thread ends the workbench: restore the terminal, then report it. A
    // background thread's panic is caught where it runs (`caught`) and shown on screen as
    // that job's error while the workbench goes on, so it must leave the terminal alone and
    // print nothing over the frame.
    let ui_thread = std::thread::current().id();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().id() != ui_thread {
            return;
        }
        let _ = execute!(std::io::stdout(), DisableMouseCapture);
        ratatui::restore();
        previous(info);
    }));
    spawn_load(source, tx.clone());
    let mut terminal = ratatui::init();
    execute!(std::io::stdout(), EnableMouseCapture)?;
    let result = event_loop(&mut terminal, App::loading(no_color), &tx, &rx);
    let _ = execute!(std::io::stdout(), DisableMouseCapture);
    ratatui::restore();
    result
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    mut app: App,
    tx: &Sender<Action>,
    rx: &Receiver<Action>,
) -> std::io::Result<()> {
    let mut jobs = Jobs::default();
    loop {
        let size = terminal.size()?;
        let areas = ui::layout(
            ratatui::layout::Rect::new(0, 0, size.width, size.height),
            &app,
        );
        if areas.timeline_rows() != app.view_height && app.loaded.is_some() {
            update(&mut app, Action::ViewHeight(areas.timeline_rows()));
        }
        terminal.draw(|frame| ui::draw(frame, &app))?;
        if event::poll(Duration::from_millis(50))? {
            // Drain what is queued so a held key or a wheel burst costs one frame. Each key is
            // applied before the next is translated: after `/`, what follows is search text.
            loop {
                if let Some(action) = translate(event::read()?, &app, &areas) {
                    for effect in update(&mut app, action) {
                        jobs.run(effect, tx.clone());
                    }
                }
                if app.should_quit || !event::poll(Duration::ZERO)? {
                    break;
                }
            }
        }
        for action in rx.try_iter().collect::<Vec<_>>() {
            if let Action::TensorsDone { generation, .. } = &action {
                jobs.tensors.remove(generation);
            }
            for effect in update(&mut app, action) {
                jobs.run(effect, tx.clone());
            }
        }
        if app.should_quit {
            return Ok(());
        }
    }
}

fn translate(event: Event, app: &App, areas: &ui::Areas) -> Option<Action> {
    match event {
        Event::Key(key) if key.kind != KeyEventKind::Release => translate_key(key, app),
        Event::Mouse(mouse) => translate_mouse(mouse, areas),
        Event::Resize(w, h) => Some(Action::Resize(w, h)),
        _ => None,
    }
}

fn translate_key(key: KeyEvent, app: &App) -> Option<Action> {
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
        return Some(Action::Quit);
    }
    if app.search.editing {
        return Some(match key.code {
            KeyCode::Char(c) => Action::SearchChar(c),
            KeyCode::Backspace => Action::SearchBackspace,
            KeyCode::Enter => Action::SearchSubmit,
            KeyCode::Esc => Action::SearchCancel,
            _ => return None,
        });
    }
    Some(match key.code {
        KeyCode::Up | KeyCode::Char('k') => Action::Up,
        KeyCode::Down | KeyCode::Char('j') => Action::Down,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::PageDown | KeyCode::Char(' ') => Action::PageDown,
        KeyCode::Home | KeyCode::Char('g') => Action::Top,
        KeyCode::End | KeyCode::Char('G') => Action::Bottom,
        KeyCode::Char('n') => Action::NextFinding,
        KeyCode::Char('N') => Action::PrevFinding,
        KeyCode::Char('f') => Action::FirstNonFinite,
        KeyCode::Char('d') => Action::FirstDivergence,
        KeyCode::Char('/') => Action::StartSearch,
        KeyCode::Char('r') => Action::NextRank,
        KeyCode::Char('l') => Action::NextWindow,
        KeyCode::Tab => Action::FocusNext,
        KeyCode::Enter => Action::Enter,
        KeyCode::Char('e') => Action::Export,
        KeyCode::Char('t') => Action::CompareTensors,
        KeyCode::Char('?') => Action::ToggleHelp,
        KeyCode::Char('q') => Action::Quit,
        KeyCode::Esc => Action::Escape,
        _ => return None,
    })
}

fn inside(area: ratatui::layout::Rect, column: u16, row: u16) -> bool {
    column >= area.x && column < area.x + area.width && row >= area.y && row < area.y + area.height
}

fn translate_mouse(mouse: MouseEvent, areas: &ui::Areas) -> Option<Action> {
    let (column, row) = (mouse.column, mouse.row);
    match mouse.kind {
        MouseEventKind::ScrollDown if inside(areas.timeline, column, row) => {
            Some(Action::Scroll(3))
        }
        MouseEventKind::ScrollUp if inside(areas.timeline, column, row) => Some(Action::Scroll(-3)),
        MouseEventKind::Down(MouseButton::Left) if inside(areas.timeline, column, row) => {
            // Border and table header take the first two lines.
            row.checked_sub(areas.timeline.y + 2)
                .map(|r| Action::ClickRow(r as usize))
        }
        MouseEventKind::Down(MouseButton::Left) if inside(areas.overview, column, row) => {
            let rank = row.checked_sub(areas.overview.y + 1)? as usize;
            let x0 = areas.overview.x + 1 + ui::OVERVIEW_LABEL_WIDTH;
            let width = areas
                .overview
                .width
                .saturating_sub(2 + ui::OVERVIEW_LABEL_WIDTH)
                .max(1);
            let fraction = f64::from(column.checked_sub(x0)?) / f64::from(width);
            Some(Action::ClickOverview { rank, fraction })
        }
        _ => None,
    }
}

fn spawn_load(source: Source, tx: Sender<Action>) {
    std::thread::spawn(move || {
        let progress_tx = tx.clone();
        let mut last = Instant::now();
        let mut progress = move |p| {
            if last.elapsed() > Duration::from_millis(30) {
                last = Instant::now();
                let _ = progress_tx.send(Action::Progress(p));
            }
        };
        let result = caught("loading", || match source {
            Source::Files { a, b } => {
                Session::open(&a, b.as_deref(), &mut progress).map_err(|e| e.to_string())
            }
            Source::Example(name) => match crate::embedded::example_pairs()
                .into_iter()
                .find(|p| p.name == name)
            {
                Some(pair) => Session::embedded(&pair).map_err(|e| e.to_string()),
                None => Err(format!("no embedded example named {name:?}")),
            },
        });
        let _ = tx.send(Action::Loaded(Box::new(result)));
    });
}

impl Jobs {
    /// Carries out one effect: a thread per job, results back through `tx`.
    fn run(&mut self, effect: Effect, tx: Sender<Action>) {
        match effect {
            Effect::Export {
                generation,
                markdown,
                name_hint,
            } => {
                std::thread::spawn(move || {
                    let result = caught("the export", || write_report(&markdown, &name_hint));
                    let _ = tx.send(Action::ExportDone { generation, result });
                });
            }
            Effect::CompareTensors {
                generation,
                rank,
                stage,
                a,
                b,
            } => {
                let progress = Arc::new(TensorProgress::default());
                self.tensors.insert(generation, Arc::clone(&progress));
                spawn_tensor_job(generation, rank, stage, a, b, progress, tx);
            }
            Effect::CancelTensors { generation } => {
                if let Some(progress) = self.tensors.get(&generation) {
                    progress.cancel.store(true, Ordering::Relaxed);
                }
            }
        }
    }
}

/// Runs `job`, turning a panic into an error naming `what` (for jobs off the UI thread).
fn caught<T>(what: &str, job: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        Err(format!("{what} panicked: {message}"))
    })
}

/// Compares `a` with `b` on a worker thread while this job's thread reports the progress
/// every [`TENSOR_PROGRESS_EVERY`], then sends the result. Always sends `TensorsDone`, even
/// when the comparison panics, so the workbench never waits on a job that is gone.
fn spawn_tensor_job(
    generation: u64,
    rank: u32,
    stage: String,
    a: PathBuf,
    b: PathBuf,
    progress: Arc<TensorProgress>,
    tx: Sender<Action>,
) {
    std::thread::spawn(move || {
        let (done_tx, done_rx) = channel();
        let worker = {
            let (a, b, progress) = (a.clone(), b.clone(), Arc::clone(&progress));
            std::thread::spawn(move || {
                let result = caught("the comparison", || {
                    pairing::compare_saved(&a, &b, &progress)
                });
                let _ = done_tx.send(result);
            })
        };
        // The comparison sets the total once it has read both headers.
        let report = |done: u64| {
            let _ = tx.send(Action::TensorProgress {
                generation,
                done,
                total: progress.total.load(Ordering::Relaxed),
            });
        };
        report(progress.done.load(Ordering::Relaxed));
        let result = loop {
            match done_rx.recv_timeout(TENSOR_PROGRESS_EVERY) {
                Ok(result) => break result,
                Err(RecvTimeoutError::Timeout) => report(progress.done.load(Ordering::Relaxed)),
                Err(RecvTimeoutError::Disconnected) => {
                    break Err("the comparison stopped without a result".into());
                }
            }
        };
        let _ = worker.join();
        let _ = tx.send(Action::TensorsDone {
            generation,
            rank,
            stage,
            result: Box::new(result),
        });
    });
}

/// Writes the report to a new file in the current directory; never replaces one.
fn write_report(markdown: &str, name_hint: &str) -> Result<String, String> {
    let stem: String = name_hint
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    for n in 1..1000 {
        let path = PathBuf::from(format!("dumpview-report-{stem}-{n}.md"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut file) => {
                file.write_all(markdown.as_bytes())
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                return Ok(path.display().to_string());
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    Err("too many reports with this name in the current directory".to_string())
}

#[cfg(test)]
mod tests {
    use super::caught;

    #[test]
    fn a_panicking_job_becomes_its_error() {
        let result: Result<(), String> = caught("the comparison", || panic!("index {} out", 3));
        assert_eq!(
            result,
            Err("the comparison panicked: index 3 out".to_string())
        );
        let result: Result<(), String> = caught("loading", || std::panic::panic_any(7_u8));
        assert_eq!(result, Err("loading panicked: no message".to_string()));
        assert_eq!(caught("x", || Ok::<_, String>(1)), Ok(1));
    }
}
