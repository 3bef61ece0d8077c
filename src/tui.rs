//! The workbench's runtime: terminal setup and restore, the event loop, and background jobs.
//!
//! Everything here is plumbing around [`crate::app::update`]: terminal events
//! become [`Action`]s, [`Effect`]s become threads, and every thread reports
//! its owned result back through one channel as another action. The terminal
//! is restored on every exit path, panics included.

use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{
    self, DisableMouseCapture, EnableMouseCapture, Event, KeyCode, KeyEvent, KeyEventKind,
    KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::crossterm::execute;

use crate::app::{Action, App, Effect, Session, update};
use crate::ui;

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
    spawn_load(source, tx.clone());

    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = execute!(std::io::stdout(), DisableMouseCapture);
        ratatui::restore();
        previous(info);
    }));
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
                        spawn_effect(effect, tx.clone());
                    }
                }
                if app.should_quit || !event::poll(Duration::ZERO)? {
                    break;
                }
            }
        }
        for action in rx.try_iter().collect::<Vec<_>>() {
            for effect in update(&mut app, action) {
                spawn_effect(effect, tx.clone());
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
        let result = match source {
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
        };
        let _ = tx.send(Action::Loaded(Box::new(result)));
    });
}

fn spawn_effect(effect: Effect, tx: Sender<Action>) {
    match effect {
        Effect::Export {
            generation,
            markdown,
            name_hint,
        } => {
            std::thread::spawn(move || {
                let result = write_report(&markdown, &name_hint);
                let _ = tx.send(Action::ExportDone { generation, result });
            });
        }
    }
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
