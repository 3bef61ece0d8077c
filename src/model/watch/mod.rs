//! Watch mode's findings as events: what a followed capture holds now
//! ([`snapshot`]), and the [`Tracker`] that turns successive snapshots into the events a
//! watcher prints: a later event of one kind for one window supersedes the earlier one, an
//! unchanged finding is not repeated. The wire format is `docs/watch.md`.

mod event;
mod tracker;

pub use event::{EVENT_VERSION, FetchProgress, SourceState, WatchEvent, WindowKey, snapshot};
pub use tracker::Tracker;
