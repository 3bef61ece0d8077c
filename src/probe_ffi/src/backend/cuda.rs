//! The CUDA runtime (`libcudart.so*`), loaded at run time.
//!
//! Declarations followed: CUDA 11.6 `cuda_runtime_api.h` (`CUDART_VERSION 11060`) and
//! `driver_types.h` (as vendored in ggerganov/llama.cpp `include/cuda/` at f555db4):
//! `cudaError_t` is an enum with `cudaSuccess` 0, `cudaStream_t` a pointer,
//! `cudaMemcpyDeviceToHost` 2, `cudaStreamCaptureStatusNone` 0 (`Active` 1, `Invalidated` 2);
//! `cudaMallocHost(void **, size_t)`, `cudaFreeHost(void *)`,
//! `cudaMemcpyAsync(void *, const void *, size_t, cudaMemcpyKind, cudaStream_t)`,
//! `cudaStreamSynchronize(cudaStream_t)`, `cudaStreamIsCapturing(cudaStream_t,
//! cudaStreamCaptureStatus *)`, `cudaGetDeviceCount(int *)`, `cudaGetErrorString(cudaError_t)`.
//! These have kept their signatures and values through CUDA 12 and 13.

use std::ffi::{CStr, c_char, c_int, c_void};

use libloading::Library;

use super::Runtime;
use super::acl::symbol;
use crate::view::Device;

/// `cudaMemcpyDeviceToHost`.
pub const CUDA_MEMCPY_DEVICE_TO_HOST: c_int = 2;
/// `cudaStreamCaptureStatusNone`.
const CAPTURE_STATUS_NONE: c_int = 0;

/// The library names tried, in order: the development link name, then the sonames of the
/// releases a process is likely to hold (torch wheels load `libcudart.so.12` or `.13`).
pub const LIBRARY_NAMES: [&str; 4] = [
    "libcudart.so",
    "libcudart.so.13",
    "libcudart.so.12",
    "libcudart.so.11.0",
];

type MallocHost = unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int;
type FreeHost = unsafe extern "C" fn(*mut c_void) -> c_int;
type MemcpyAsync =
    unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, *mut c_void) -> c_int;
type StreamSynchronize = unsafe extern "C" fn(*mut c_void) -> c_int;
type StreamIsCapturing = unsafe extern "C" fn(*mut c_void, *mut c_int) -> c_int;
type GetDeviceCount = unsafe extern "C" fn(*mut c_int) -> c_int;
type GetErrorString = unsafe extern "C" fn(c_int) -> *const c_char;

/// The CUDA runtime entry points the probe uses.
pub struct Cuda {
    malloc_host: MallocHost,
    free_host: FreeHost,
    memcpy_async: MemcpyAsync,
    stream_synchronize: StreamSynchronize,
    stream_is_capturing: StreamIsCapturing,
    get_device_count: GetDeviceCount,
    get_error_string: Option<GetErrorString>,
    _library: Library,
}

// SAFETY: the CUDA runtime API is thread-safe; the Library handle is too.
unsafe impl Send for Cuda {}
unsafe impl Sync for Cuda {}

impl Cuda {
    /// Binds the entry points of an opened CUDA runtime.
    ///
    /// # Errors
    /// A required symbol missing, named.
    pub fn bind(library: Library) -> Result<Cuda, String> {
        // SAFETY: the symbols are looked up with the signatures cuda_runtime_api.h declares.
        unsafe {
            Ok(Cuda {
                malloc_host: *symbol(&library, b"cudaMallocHost\0")?,
                free_host: *symbol(&library, b"cudaFreeHost\0")?,
                memcpy_async: *symbol(&library, b"cudaMemcpyAsync\0")?,
                stream_synchronize: *symbol(&library, b"cudaStreamSynchronize\0")?,
                stream_is_capturing: *symbol(&library, b"cudaStreamIsCapturing\0")?,
                get_device_count: *symbol(&library, b"cudaGetDeviceCount\0")?,
                get_error_string: symbol(&library, b"cudaGetErrorString\0").ok().map(|s| *s),
                _library: library,
            })
        }
    }

    /// `cudaGetDeviceCount`.
    ///
    /// # Errors
    /// The call failing (`cudaErrorNoDevice` 100 on a machine without a GPU).
    pub fn device_count(&self) -> Result<u32, String> {
        let mut count: c_int = 0;
        // SAFETY: count is a valid out-pointer.
        let code = unsafe { (self.get_device_count)(&mut count) };
        self.check("cudaGetDeviceCount", code)?;
        Ok(count.max(0) as u32)
    }

    fn check(&self, call: &str, code: c_int) -> Result<(), String> {
        if code == 0 {
            return Ok(());
        }
        let text = self
            .get_error_string
            // SAFETY: cudaGetErrorString returns a static NUL-terminated string.
            .map(|f| unsafe { f(code) })
            .filter(|p| !p.is_null())
            .map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
        Err(match text {
            Some(t) => format!("{call} failed with CUDA error {code} ({t})"),
            None => format!("{call} failed with CUDA error {code}"),
        })
    }
}

impl Runtime for Cuda {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn reads(&self, device: Device) -> bool {
        matches!(device, Device::Host | Device::Cuda(_))
    }

    fn alloc_staging(&self, bytes: usize) -> Result<*mut u8, String> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: ptr is a valid out-pointer.
        let code = unsafe { (self.malloc_host)(&mut ptr, bytes.max(1)) };
        self.check(&format!("cudaMallocHost({bytes} bytes)"), code)?;
        if ptr.is_null() {
            return Err(format!("cudaMallocHost({bytes} bytes) returned NULL"));
        }
        Ok(ptr.cast())
    }

    fn free_staging(&self, ptr: *mut u8, _bytes: usize) -> Option<String> {
        // SAFETY: ptr came from cudaMallocHost.
        let code = unsafe { (self.free_host)(ptr.cast()) };
        self.check("cudaFreeHost", code).err()
    }

    fn is_capturing(&self, stream: *mut c_void) -> Result<bool, String> {
        let mut status: c_int = CAPTURE_STATUS_NONE;
        // SAFETY: status is a valid out-pointer; stream is the caller's.
        let code = unsafe { (self.stream_is_capturing)(stream, &mut status) };
        self.check("cudaStreamIsCapturing", code)?;
        Ok(status != CAPTURE_STATUS_NONE)
    }

    fn copy_to_host_async(
        &self,
        dst: *mut u8,
        src: *const u8,
        bytes: usize,
        stream: *mut c_void,
    ) -> Result<(), String> {
        // SAFETY: dst has `bytes` of pinned staging; src is the caller's device span.
        let code = unsafe {
            (self.memcpy_async)(
                dst.cast(),
                src.cast(),
                bytes,
                CUDA_MEMCPY_DEVICE_TO_HOST,
                stream,
            )
        };
        self.check(
            &format!("cudaMemcpyAsync({bytes} bytes, cudaMemcpyDeviceToHost, stream {stream:p})"),
            code,
        )
    }

    fn synchronize(&self, stream: *mut c_void) -> Result<(), String> {
        // SAFETY: stream is one a capture used.
        let code = unsafe { (self.stream_synchronize)(stream) };
        self.check(&format!("cudaStreamSynchronize(stream {stream:p})"), code)
    }
}
