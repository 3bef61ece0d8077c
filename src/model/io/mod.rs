//! The one boundary between the model and file contents: how a file's bytes are read
//! ([`FileBytes::open`], [`FileBytes::read`]) and how a file is written so that no reader ever
//! sees half of it ([`write_atomically`], [`AtomicFile`]) or so that nothing is ever replaced
//! ([`create_new`]).
//!
//! Reading (`read.rs`): large regular files are mapped, small ones read whole; a watched file
//! (one another process may still rewrite in place) is never mapped, since a truncation under
//! a mapping ends this process with SIGBUS ([`MapChoice::Never`]); anything that is not a
//! regular file (a FIFO, a device, a socket) is refused before it is opened, since opening a
//! FIFO for reading waits for a writer forever.
//!
//! Writing (`write.rs`): the new contents go to a temporary sibling (same directory, so the
//! rename is atomic; its name holds [`TEMP_MARK`], which no dump file's name does, so discovery
//! and the cache's eviction tell a temporary left by a killed run), are flushed to disk, and
//! the sibling is renamed over the destination.
//!
//! Only this module, `ingest`, `cases/store`, `cases/create` and `replay/load` of the model
//! touch the file system (`tests/layering.rs`); `analysis` and `present` are handed paths that
//! ingest resolved.

mod list;
mod read;
mod write;

pub use list::{TreeListing, files_under, subdirectory_names};
pub use read::{FileBytes, MAP_FROM_BYTES, MapChoice, OpenError, read_f32_le};
pub use write::{AtomicFile, TEMP_MARK, create_new, is_temp, temp_path, write_atomically};
