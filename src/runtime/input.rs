//! Where input comes from: the terminal, read on its own thread, or a script of events (for
//! headless runs); both go into the runtime's one channel. And what a terminal event means:
//! keys through the keymap, the mouse through the UI's hit-testing.

use std::sync::mpsc::Sender;

use ratatui::crossterm::event::{
    self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent,
    MouseEventKind,
};
use ratatui::layout::Rect;

use super::Message;
use crate::app::keymap::{self, Key, Mode};
use crate::app::{Action, App};
use crate::ui::{self, Target};

/// Reads terminal events on a new thread into `sink` until the channel closes; a read error
/// is sent as [`Message::InputFailed`] and ends the thread.
pub fn spawn_terminal_reader(sink: Sender<Message>) {
    std::thread::spawn(move || {
        loop {
            let message = match event::read() {
                Ok(event) => Message::Input(event),
                Err(e) => Message::InputFailed(e),
            };
            let failed = matches!(message, Message::InputFailed(_));
            if sink.send(message).is_err() || failed {
                return;
            }
        }
    });
}

/// Sends `script` into `sink` on a new thread, then [`Message::InputEnded`]: input for a
/// headless run of the real loop.
pub fn spawn_script(
    sink: Sender<Message>,
    script: impl IntoIterator<Item = Message> + Send + 'static,
) {
    std::thread::spawn(move || {
        for message in script {
            if sink.send(message).is_err() {
                return;
            }
        }
        let _ = sink.send(Message::InputEnded);
    });
}

/// What terminal `event` asks of `app`, drawn in a frame of size `area`.
pub fn translate(event: Event, app: &App, area: Rect) -> Option<Action> {
    match event {
        Event::Key(key) => keymap::action_for(self::key(key)?, Mode::of(app)),
        Event::Mouse(mouse) => translate_mouse(mouse, app, area),
        Event::Resize(w, h) => Some(Action::Resize(w, h)),
        _ => None,
    }
}

/// The presses behind one terminal event: Esc and a key that arrive in one read (a quick
/// Esc-then-q, or any two keys coalesced by ssh) are parsed by crossterm as Alt+key, and
/// dumpview binds no Alt keys, so such an event is split back into Esc and the key. Any other
/// event is itself.
pub fn split_meta(event: Event) -> Vec<Event> {
    match event {
        Event::Key(key)
            if key.modifiers.contains(KeyModifiers::ALT)
                && !key.modifiers.contains(KeyModifiers::CONTROL)
                && key.kind != KeyEventKind::Release =>
        {
            let plain =
                KeyEvent::new_with_kind(key.code, key.modifiers - KeyModifiers::ALT, key.kind);
            let esc = KeyEvent::new_with_kind(KeyCode::Esc, KeyModifiers::NONE, key.kind);
            vec![Event::Key(esc), Event::Key(plain)]
        }
        other => vec![other],
    }
}

/// The keymap's name for a terminal key press (releases and unnamed keys: `None`).
pub fn key(event: KeyEvent) -> Option<Key> {
    if event.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = event.modifiers.contains(KeyModifiers::CONTROL);
    Some(match event.code {
        KeyCode::Char(c) if ctrl => Key::Ctrl(c),
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::Left => Key::Left,
        KeyCode::Right => Key::Right,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Home => Key::Home,
        KeyCode::End => Key::End,
        KeyCode::Tab => Key::Tab,
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Backspace => Key::Backspace,
        _ => return None,
    })
}

fn translate_mouse(mouse: MouseEvent, app: &App, area: Rect) -> Option<Action> {
    let target = ui::hit_test(area, app, mouse.column, mouse.row)?;
    match (mouse.kind, target) {
        (MouseEventKind::ScrollDown, Target::Timeline | Target::TimelineRow(_)) => {
            Some(Action::Scroll(3))
        }
        (MouseEventKind::ScrollUp, Target::Timeline | Target::TimelineRow(_)) => {
            Some(Action::Scroll(-3))
        }
        (MouseEventKind::Down(MouseButton::Left), Target::TimelineRow(row)) => {
            Some(Action::ClickRow(row))
        }
        (MouseEventKind::Down(MouseButton::Left), Target::Overview { rank, fraction }) => {
            Some(Action::ClickOverview { rank, fraction })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alt_key_is_esc_then_the_key() {
        let alt_q = Event::Key(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::ALT));
        let keys: Vec<Option<Key>> = split_meta(alt_q)
            .into_iter()
            .map(|e| match e {
                Event::Key(k) => key(k),
                _ => None,
            })
            .collect();
        assert_eq!(keys, vec![Some(Key::Esc), Some(Key::Char('q'))]);
        let plain = Event::Key(KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE));
        assert_eq!(split_meta(plain.clone()), vec![plain]);
    }
}
