//! The workbench's state and its one update function (The Elm Architecture).
//!
//! [`App`] holds everything the screen shows; [`update`] applies one
//! [`Action`] synchronously and returns the [`Effect`]s the runtime must
//! carry out (background jobs, [`jobs`]). Nothing here touches a terminal, a thread, a
//! file or a process, so tests drive it with actions and read the state back. [`keymap`]
//! says which key sends which action.

mod action;
#[warn(missing_docs)]
pub mod cases;
#[warn(missing_docs)]
mod diagnosis;
#[warn(missing_docs)]
pub mod export;
#[warn(missing_docs)]
mod filter;
#[warn(missing_docs)]
pub mod jobs;
#[warn(missing_docs)]
pub mod keymap;
pub mod loading;
#[warn(missing_docs)]
mod popup;
#[warn(missing_docs)]
mod reload;
#[warn(missing_docs)]
pub mod replay;
pub mod rows;
#[warn(missing_docs)]
pub mod session;
mod state;
pub mod strip;
pub mod tensors;
pub mod tokens;
#[warn(missing_docs)]
pub mod tree;
mod update;
pub mod watch;

pub use action::{Action, Effect};
pub use popup::Popup;
pub use replay::{ReplayDialog, ReplayField, ReplayJob, ReplayKept, ReplayView};
pub use rows::{Row, RowState};
pub use session::Session;
pub use state::{App, Focus, Loaded, Search, WindowChoice};
pub use tensors::{TensorJob, TensorPopup, TensorResult};
pub use tree::{TreeLine, TreeView};
pub use update::update;
