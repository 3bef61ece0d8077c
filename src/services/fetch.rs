//! Saved tensors of a capture copied from another machine (a remote mirror) are fetched only
//! when a comparison needs them. Whoever opened the capture registers a [`Fetcher`] for the
//! session; the loader then lists the tensor files the fetcher owns even before they are
//! here, and the comparison job fetches them before reading.

use std::path::Path;
use std::sync::{Arc, Mutex};

/// Brings files into place on demand: `owns` says whether a path is one it can bring (it
/// lies in a mirror), `fetch` brings it.
pub trait Fetcher: Send + Sync {
    /// True when `path` lies where this fetcher brings files from.
    fn owns(&self, path: &Path) -> bool;
    /// Brings `path` into place.
    ///
    /// # Errors
    /// Why it could not be brought, for the user.
    fn fetch(&self, path: &Path) -> Result<(), String>;
    /// Where `path` (a local copy this fetcher owns) lies on its remote host, and how to
    /// reach it: what a replay of a remote capture's input set runs on. `None` for a path
    /// it does not own (the default).
    ///
    /// # Errors
    /// Why the remote place cannot be named (for the user).
    fn remote(&self, path: &Path) -> Option<Result<RemotePlace, String>> {
        let _ = path;
        None
    }
}

/// A directory on a remote host, as a replay needs it.
#[derive(Debug, Clone)]
pub struct RemotePlace {
    /// The SOURCE naming it (`ssh://host:port/abs/path`, `host:relative/path`).
    pub source: String,
    /// How the capture's connection reaches that host.
    pub ssh: crate::remote::SshOptions,
}

/// Where `path` lies on a remote host, when a registered fetcher owns it: `None` for a
/// local path.
///
/// # Errors
/// The fetcher's reason it cannot be named.
pub fn remote_of(path: &Path) -> Option<Result<RemotePlace, String>> {
    current().and_then(|f| f.remote(path))
}

static CURRENT: Mutex<Option<Arc<dyn Fetcher>>> = Mutex::new(None);

/// Registers `fetcher` for the captures being opened, until the returned guard is dropped.
pub fn register(fetcher: Arc<dyn Fetcher>) -> Registered {
    *CURRENT.lock().expect("the fetcher's lock") = Some(fetcher);
    Registered
}

/// Keeps a fetcher registered; dropping it unregisters it (and drops what it holds: a
/// mirror's connection ends with its last owner).
pub struct Registered;

impl Drop for Registered {
    fn drop(&mut self) {
        CURRENT.lock().expect("the fetcher's lock").take();
    }
}

fn current() -> Option<Arc<dyn Fetcher>> {
    CURRENT.lock().expect("the fetcher's lock").clone()
}

/// True when `path` is a file a registered fetcher can bring (it need not be here yet).
pub fn fetchable(path: &Path) -> bool {
    current().is_some_and(|f| f.owns(path))
}

/// Brings `path` into place when a registered fetcher owns it and it is not here yet.
///
/// # Errors
/// The fetcher's error, with the path.
pub fn ensure(path: &Path) -> Result<(), String> {
    match current() {
        Some(f) if f.owns(path) && !path.is_file() => f
            .fetch(path)
            .map_err(|e| format!("{}: cannot fetch it: {e}", path.display())),
        _ => Ok(()),
    }
}
