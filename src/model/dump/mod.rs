//! The in-memory capture: [`Dump`] (all windows of one capture), [`Window`] (one rank's label
//! window), [`Record`] (one captured tensor) with its [`Stats`], the [`StageKey`] that pairs
//! records, [`Warning`]s, and the one rule for evidence paths ([`evidence`]).
//!
//! Nothing here knows a file format or touches the file system, except [`evidence::resolve`],
//! which must look at the file a path names to refuse symbolic links leading out of a dump.

mod capture;
pub mod evidence;
mod parallel;
mod record;
mod stage_key;
mod token_rows;
mod warning;
mod window;

pub use capture::{Changes, Dump, WindowId};
pub use parallel::{AXES, Layout, Placement, Shard};
pub use record::*;
pub use stage_key::{StageKey, capture_regex};
pub use token_rows::*;
pub use warning::{
    STOPPED_BEFORE_FINISH, UNFINISHED_WINDOW, UNREADABLE_WINDOW, UnfinishedWindow,
    WRITTEN_NOT_COMPLETED, Warning, WarningKind, any_lost,
};
pub use window::*;
