//! Ascend ACL (`libascendcl.so`), loaded at run time.
//!
//! Declarations followed: CANN runtime `include/external/acl/acl_rt.h` ("Current version is
//! 1.17.0", hicann/runtime at 681ef76) and `acl_base_rt.h` / `error_codes/rt_error_codes.h`
//! beside it: `aclError` is `int` (`ACL_SUCCESS` 0), `aclrtStream` is `void *`,
//! `aclrtMemcpyKind` numbers `ACL_MEMCPY_HOST_TO_HOST` 0, `ACL_MEMCPY_HOST_TO_DEVICE` 1,
//! `ACL_MEMCPY_DEVICE_TO_HOST` 2, and `aclmdlRICaptureStatus` has
//! `ACL_MODEL_RI_CAPTURE_STATUS_NONE` 0, `_ACTIVE` 1, `_INVALIDATED` 2.
//!
//! The probe never calls `aclInit` or `aclrtSetDevice`: the process under test has done so, and
//! captures are made from its threads, whose current context owns the streams.

use std::ffi::{CStr, c_char, c_int, c_void};

use libloading::Library;

use super::Runtime;
use crate::view::Device;

/// `ACL_MEMCPY_DEVICE_TO_HOST`.
pub const ACL_MEMCPY_DEVICE_TO_HOST: c_int = 2;
/// `ACL_MODEL_RI_CAPTURE_STATUS_NONE`.
const CAPTURE_STATUS_NONE: c_int = 0;

/// The library names tried, in order.
pub const LIBRARY_NAMES: [&str; 1] = ["libascendcl.so"];

type MallocHost = unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int;
type FreeHost = unsafe extern "C" fn(*mut c_void) -> c_int;
type MemcpyAsync =
    unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize, c_int, *mut c_void) -> c_int;
type SynchronizeStream = unsafe extern "C" fn(*mut c_void) -> c_int;
type GetDeviceCount = unsafe extern "C" fn(*mut u32) -> c_int;
type CaptureGetInfo = unsafe extern "C" fn(*mut c_void, *mut c_int, *mut *mut c_void) -> c_int;
type RecentErrMsg = unsafe extern "C" fn() -> *const c_char;

/// The ACL entry points the probe uses.
pub struct Acl {
    malloc_host: MallocHost,
    free_host: FreeHost,
    memcpy_async: MemcpyAsync,
    synchronize_stream: SynchronizeStream,
    get_device_count: GetDeviceCount,
    /// `aclmdlRICaptureGetInfo`: absent in older CANN releases, where a stream under capture
    /// cannot be told from one that is not.
    capture_get_info: Option<CaptureGetInfo>,
    /// `aclGetRecentErrMsg`: the runtime's own description of the last error, when present.
    recent_err_msg: Option<RecentErrMsg>,
    /// Keeps the functions above loaded.
    _library: Library,
}

// SAFETY: the entry points are plain C functions that ACL documents as callable from any
// thread; the Library handle itself is thread-safe (dlopen/dlsym are).
unsafe impl Send for Acl {}
unsafe impl Sync for Acl {}

impl Acl {
    /// Binds the entry points of an opened `libascendcl.so`.
    ///
    /// # Errors
    /// A required symbol missing, named.
    pub fn bind(library: Library) -> Result<Acl, String> {
        // SAFETY: the symbols are looked up with the signatures acl_rt.h declares.
        unsafe {
            Ok(Acl {
                malloc_host: *symbol(&library, b"aclrtMallocHost\0")?,
                free_host: *symbol(&library, b"aclrtFreeHost\0")?,
                memcpy_async: *symbol(&library, b"aclrtMemcpyAsync\0")?,
                synchronize_stream: *symbol(&library, b"aclrtSynchronizeStream\0")?,
                get_device_count: *symbol(&library, b"aclrtGetDeviceCount\0")?,
                capture_get_info: symbol(&library, b"aclmdlRICaptureGetInfo\0")
                    .ok()
                    .map(|s| *s),
                recent_err_msg: symbol(&library, b"aclGetRecentErrMsg\0").ok().map(|s| *s),
                _library: library,
            })
        }
    }

    /// `aclrtGetDeviceCount`.
    ///
    /// # Errors
    /// The call failing.
    pub fn device_count(&self) -> Result<u32, String> {
        let mut count = 0u32;
        // SAFETY: count is a valid out-pointer.
        let code = unsafe { (self.get_device_count)(&mut count) };
        self.check("aclrtGetDeviceCount", code)?;
        Ok(count)
    }

    fn check(&self, call: &str, code: c_int) -> Result<(), String> {
        if code == 0 {
            return Ok(());
        }
        let detail = self
            .recent_err_msg
            // SAFETY: aclGetRecentErrMsg returns NULL or a NUL-terminated string it owns.
            .map(|f| unsafe { f() })
            .filter(|p| !p.is_null())
            .map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            .filter(|m| !m.is_empty());
        let name = acl_error_name(code).map_or(String::new(), |n| format!(" ({n})"));
        Err(match detail {
            Some(d) => format!("{call} failed with ACL error {code}{name}: {d}"),
            None => format!("{call} failed with ACL error {code}{name}"),
        })
    }
}

/// Names of the ACL error codes the probe's calls are documented to return (acl_base_rt.h,
/// rt_error_codes.h).
pub fn acl_error_name(code: c_int) -> Option<&'static str> {
    Some(match code {
        100000 => "ACL_ERROR_INVALID_PARAM",
        200000 => "ACL_ERROR_BAD_ALLOC",
        500000 => "ACL_ERROR_INTERNAL_ERROR",
        500001 => "ACL_ERROR_FAILURE",
        107000 => "ACL_ERROR_RT_PARAM_INVALID",
        107027 => "ACL_ERROR_RT_STREAM_CAPTURED",
        207000 => "ACL_ERROR_RT_FEATURE_NOT_SUPPORT",
        207001 => "ACL_ERROR_RT_MEMORY_ALLOCATION",
        207004 => "ACL_ERROR_RT_NO_DEVICE",
        507000 => "ACL_ERROR_RT_INTERNAL_ERROR",
        _ => return None,
    })
}

/// Looks up `name` (NUL-terminated) in `library`.
///
/// # Safety
/// `T` is the symbol's true type.
pub(super) unsafe fn symbol<'l, T>(
    library: &'l Library,
    name: &[u8],
) -> Result<libloading::Symbol<'l, T>, String> {
    // SAFETY: forwarded to the caller.
    unsafe { library.get::<T>(name) }.map_err(|e| {
        format!(
            "{}: {e}",
            String::from_utf8_lossy(&name[..name.len().saturating_sub(1)])
        )
    })
}

impl Runtime for Acl {
    fn name(&self) -> &'static str {
        "acl"
    }

    fn reads(&self, device: Device) -> bool {
        matches!(device, Device::Host | Device::Npu(_))
    }

    fn alloc_staging(&self, bytes: usize) -> Result<*mut u8, String> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: ptr is a valid out-pointer.
        let code = unsafe { (self.malloc_host)(&mut ptr, bytes.max(1)) };
        self.check(&format!("aclrtMallocHost({bytes} bytes)"), code)?;
        if ptr.is_null() {
            return Err(format!("aclrtMallocHost({bytes} bytes) returned NULL"));
        }
        Ok(ptr.cast())
    }

    fn free_staging(&self, ptr: *mut u8, _bytes: usize) -> Option<String> {
        // SAFETY: ptr came from aclrtMallocHost.
        let code = unsafe { (self.free_host)(ptr.cast()) };
        self.check("aclrtFreeHost", code).err()
    }

    fn is_capturing(&self, stream: *mut c_void) -> Result<bool, String> {
        let Some(get_info) = self.capture_get_info else {
            return Ok(false);
        };
        let mut status: c_int = CAPTURE_STATUS_NONE;
        let mut model: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out-pointers; stream is the caller's.
        let code = unsafe { get_info(stream, &mut status, &mut model) };
        self.check("aclmdlRICaptureGetInfo", code)?;
        Ok(status != CAPTURE_STATUS_NONE)
    }

    fn copy_to_host_async(
        &self,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        stream: *mut c_void,
    ) -> Result<(), String> {
        // SAFETY: dst has `bytes` of staging; src is the caller's device span.
        let code = unsafe {
            (self.memcpy_async)(
                dst.cast(),
                bytes,
                src.cast(),
                bytes,
                ACL_MEMCPY_DEVICE_TO_HOST,
                stream,
            )
        };
        self.check(
            &format!(
                "aclrtMemcpyAsync({bytes} bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream {stream:p})"
            ),
            code,
        )
    }

    fn synchronize(&self, stream: *mut c_void) -> Result<(), String> {
        // SAFETY: stream is one a capture used.
        let code = unsafe { (self.synchronize_stream)(stream) };
        self.check(&format!("aclrtSynchronizeStream(stream {stream:p})"), code)
    }
}
