//! The device runtimes a session copies through: [`Runtime`], its three implementations, and
//! [`select`] (which one `DUMP_PROBE_BACKEND` and the process give).
//!
//! ACL and CUDA are loaded at run time with libloading, so building the probe needs no SDK and
//! a process without either runtime still loads libdump_probe.so. Every runtime call's error
//! comes back as a message naming the call and the runtime's error code; the session turns it
//! into a status and a manifest warning.

use std::ffi::c_void;

use crate::view::Device;

mod acl;
mod cuda;
mod host;
mod select;

pub use select::{Selected, select};

/// A device runtime as the session uses it: pinned host staging, one asynchronous
/// device-to-host copy per capture, one synchronize per stream per window.
///
/// Implementations are called with the session's lock held, from the caller's threads; they
/// never call back into the probe.
pub trait Runtime: Send + Sync {
    /// `host`, `acl` or `cuda` (the manifest's `backend`).
    fn name(&self) -> &'static str;

    /// Whether this runtime can copy from `device` (host memory is always read directly).
    fn reads(&self, device: Device) -> bool;

    /// Allocates `bytes` of page-locked host memory (host: ordinary memory), 64-byte aligned.
    ///
    /// # Errors
    /// The runtime's allocation call failing, as a message.
    fn alloc_staging(&self, bytes: usize) -> Result<*mut u8, String>;

    /// Frees what [`Runtime::alloc_staging`] returned. Errors are reported, not returned: there
    /// is nothing a caller could do.
    fn free_staging(&self, ptr: *mut u8, bytes: usize) -> Option<String>;

    /// Whether `stream` is being captured into a graph (a copy enqueued there would become a
    /// graph node, not a copy now). `Ok(false)` where the runtime cannot tell.
    ///
    /// # Errors
    /// The query failing.
    fn is_capturing(&self, stream: *mut c_void) -> Result<bool, String>;

    /// Enqueues one copy of `bytes` from device address `src` to staging `dst` on `stream`;
    /// returns without waiting for it.
    ///
    /// # Errors
    /// The runtime refusing the copy.
    fn copy_to_host_async(
        &self,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        stream: *mut c_void,
    ) -> Result<(), String>;

    /// Waits for everything enqueued on `stream`.
    ///
    /// # Errors
    /// The runtime reporting a failure of the stream's work.
    fn synchronize(&self, stream: *mut c_void) -> Result<(), String>;
}

/// The byte alignment of every staging allocation and slot.
pub const STAGING_ALIGN: usize = 64;
