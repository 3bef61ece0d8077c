//! Taking the terminal and giving it back: raw mode, the alternate screen and mouse capture,
//! restored on every exit path (return, error, panic).

use std::io;

use ratatui::DefaultTerminal;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{EnterAlternateScreen, enable_raw_mode};

/// Held while the workbench owns the terminal; dropping it gives the terminal back.
pub struct TerminalGuard(());

impl TerminalGuard {
    /// Takes the terminal (raw mode, alternate screen, mouse capture) and installs a panic
    /// hook that restores it before the panic is reported. Only a panic on this thread ends
    /// the workbench: a job's panic is caught where it runs and shown as that job's error,
    /// so for other threads the hook leaves the terminal alone and prints nothing over the
    /// frame. (`ratatui::init` is not used: its hook restores the terminal on any thread.)
    ///
    /// # Errors
    /// When the terminal cannot be set up; it is restored then.
    pub fn take() -> io::Result<(TerminalGuard, DefaultTerminal)> {
        let ui_thread = std::thread::current().id();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().id() != ui_thread {
                return;
            }
            restore();
            previous(info);
        }));
        let guard = TerminalGuard(());
        enable_raw_mode()?;
        execute!(io::stdout(), EnterAlternateScreen, EnableMouseCapture)?;
        let terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
        Ok((guard, terminal))
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Mouse capture off, raw mode off, the main screen back.
fn restore() {
    let _ = execute!(io::stdout(), DisableMouseCapture);
    ratatui::restore();
}
