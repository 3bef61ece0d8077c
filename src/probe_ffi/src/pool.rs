//! The statistics' thread pool, one per process.
//!
//! rayon's global pool is made once per address space; after `fork()` the child inherits the
//! pool's state but none of its threads, so the first parallel call there waits forever (a
//! server that forks workers after a first capture would hang in `dp_finish`). [`current`]
//! hands out a pool made by this process, making a new one after a fork.

use std::sync::{Arc, Mutex};

/// The pool and the process that made it.
static POOL: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);

/// A pool whose threads run in this process; `None` when none can be made (the caller then
/// computes on its own thread).
pub fn current() -> Option<Arc<rayon::ThreadPool>> {
    let pid = std::process::id();
    let mut slot = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((made_by, pool)) = slot.as_ref()
        && *made_by == pid
    {
        return Some(Arc::clone(pool));
    }
    // A parent's pool: its threads are not here, so it must not be joined or dropped.
    if let Some((_, inherited)) = slot.take() {
        std::mem::forget(inherited);
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("dump_probe-stats-{i}"))
        .build()
        .ok()
        .map(Arc::new)?;
    *slot = Some((pid, Arc::clone(&pool)));
    Some(pool)
}

/// Runs `op` on this process's pool (its `par_iter`s use that pool's threads), or on this
/// thread when there is none.
pub fn run<R: Send>(op: impl FnOnce() -> R + Send) -> R {
    match current() {
        Some(pool) => pool.install(op),
        None => op(),
    }
}
