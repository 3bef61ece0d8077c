//! What the probe says when the process exits with armed sessions that were never closed
//! (`dp_close` is where a session reports what it wrote): the same lines, from an `atexit`
//! hook, as the Python probe says them at exit. Sessions are never freed (see `ffi`), so
//! the registry's addresses stay valid to the end.

use std::sync::{Mutex, Once};

use crate::session::Session;

/// The armed sessions opened by this process, by address.
static OPEN: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static HOOK: Once = Once::new();

/// Adds `session` to those reported at exit (the hook is installed on the first call).
pub fn register(session: &'static Session) {
    HOOK.call_once(|| {
        // SAFETY: `at_exit` is an `extern "C" fn()` that never unwinds (it catches panics).
        unsafe {
            libc::atexit(at_exit);
        }
    });
    OPEN.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(std::ptr::from_ref(session) as usize);
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        // A thread holding the registry at exit is mid-dp_open: say nothing rather than wait.
        let Ok(open) = OPEN.try_lock() else { return };
        for &address in open.iter() {
            // SAFETY: registered from a `&'static Session` (dp_open leaks the box).
            let session = unsafe { &*(address as *const Session) };
            session.report_at_exit();
        }
    });
}
