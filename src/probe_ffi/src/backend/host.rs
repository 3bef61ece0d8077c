//! The host backend: ordinary memory, for tests and CPU code. `dp_capture` copies the span
//! itself (so a later write to the caller's buffer is not seen, as stream order would have it).

use std::ffi::c_void;

use super::Runtime;
use crate::view::Device;

/// Host memory only.
pub struct Host;

/// The size of a transparent huge page on x86-64 and aarch64 (4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

/// `MADV_POPULATE_WRITE` (Linux 5.14, include/uapi/asm-generic/mman-common.h): fault the range
/// in, writable, now. Older kernels answer EINVAL and the pages fault on first write instead.
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// The mapping behind a chunk of `bytes`: whole pages, huge-page aligned for large chunks.
fn mapped_len(bytes: usize) -> usize {
    let page = if bytes >= HUGE_PAGE { HUGE_PAGE } else { 4096 };
    bytes.max(1).div_ceil(page) * page
}

impl Runtime for Host {
    fn name(&self) -> &'static str {
        "host"
    }

    fn reads(&self, device: Device) -> bool {
        device == Device::Host
    }

    fn alloc_staging(&self, bytes: usize) -> Result<*mut u8, String> {
        let len = mapped_len(bytes);
        // Over-map by a huge page so that the chunk can start on a huge-page boundary.
        let extra = if len >= HUGE_PAGE { HUGE_PAGE } else { 0 };
        // SAFETY: an anonymous private mapping; no file, no fixed address.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len + extra,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!(
                "out of host memory for {bytes} bytes of staging ({})",
                std::io::Error::last_os_error()
            ));
        }
        let start = (base as usize).div_ceil(extra.max(1)) * extra.max(1);
        // SAFETY: the head and tail trimmed lie inside the mapping just made.
        unsafe {
            if start > base as usize {
                libc::munmap(base, start - base as usize);
            }
            let end = base as usize + len + extra;
            if end > start + len {
                libc::munmap((start + len) as *mut libc::c_void, end - start - len);
            }
        }
        let ptr = start as *mut libc::c_void;
        // Staging is written once per window, right after it is reserved. Faulting it in here,
        // in one call and with 2 MiB pages where the kernel has them, costs about 40% less than
        // 4 KiB faults taken one by one inside the copies (benches/README.md, "Native probe").
        // Both calls are hints: their failure leaves ordinary lazily-faulted memory.
        // SAFETY: the range is the mapping just made.
        unsafe {
            if len >= HUGE_PAGE {
                libc::madvise(ptr, len, libc::MADV_HUGEPAGE);
            }
            libc::madvise(ptr, len, MADV_POPULATE_WRITE);
        }
        Ok(ptr.cast())
    }

    fn free_staging(&self, ptr: *mut u8, bytes: usize) -> Option<String> {
        // SAFETY: ptr came from alloc_staging(bytes), which mapped mapped_len(bytes) there.
        let status = unsafe { libc::munmap(ptr.cast(), mapped_len(bytes)) };
        (status != 0).then(|| {
            format!(
                "freeing {bytes} bytes of host staging: {}",
                std::io::Error::last_os_error()
            )
        })
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
