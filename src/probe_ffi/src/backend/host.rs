//! The host backend: ordinary memory, for tests and CPU code. `dp_capture` copies the span
//! itself (so a later write to the caller's buffer is not seen, as stream order would have it).

use std::alloc::Layout;
use std::ffi::c_void;

use super::{Runtime, STAGING_ALIGN};
use crate::view::Device;

/// Host memory only.
pub struct Host;

/// The size of a transparent huge page on x86-64 and aarch64 (4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

/// Large chunks are aligned to huge pages so that the kernel can back them with them.
fn align_for(bytes: usize) -> usize {
    if bytes >= HUGE_PAGE {
        HUGE_PAGE
    } else {
        STAGING_ALIGN
    }
}

impl Runtime for Host {
    fn name(&self) -> &'static str {
        "host"
    }

    fn reads(&self, device: Device) -> bool {
        device == Device::Host
    }

    fn alloc_staging(&self, bytes: usize) -> Result<*mut u8, String> {
        let layout = Layout::from_size_align(bytes.max(1), align_for(bytes))
            .map_err(|e| format!("staging of {bytes} bytes: {e}"))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            return Err(format!("out of host memory for {bytes} bytes of staging"));
        }
        if bytes >= HUGE_PAGE {
            // Fresh staging is written once per window: with 2 MiB pages the first write faults
            // 512 times less often (a hint; ignored where transparent huge pages are off).
            // SAFETY: the range is the allocation just made.
            unsafe { libc::madvise(ptr.cast(), bytes, libc::MADV_HUGEPAGE) };
        }
        Ok(ptr)
    }

    fn free_staging(&self, ptr: *mut u8, bytes: usize) -> Option<String> {
        let layout = Layout::from_size_align(bytes.max(1), align_for(bytes)).ok()?;
        // SAFETY: ptr came from alloc_staging(bytes), which used this layout.
        unsafe { std::alloc::dealloc(ptr, layout) };
        None
    }

    fn is_capturing(&self, _stream: *mut c_void) -> Result<bool, String> {
        Ok(false)
    }

    fn copy_to_host_async(
        &self,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        _stream: *mut c_void,
    ) -> Result<(), String> {
        // SAFETY: the session checked the span and reserved `bytes` at dst; host views are
        // readable memory of the caller's (dp_capture's contract).
        unsafe { std::ptr::copy_nonoverlapping(src, dst, bytes) };
        Ok(())
    }

    fn synchronize(&self, _stream: *mut c_void) -> Result<(), String> {
        Ok(())
    }
}
