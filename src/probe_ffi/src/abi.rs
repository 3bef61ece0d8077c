//! The C ABI's types and constants, exactly as assets/dump_probe.h declares them.
//!
//! tests/native_probe.rs compiles a C program against the header that compares every constant
//! and the struct's size and field offsets with what [`crate::ffi`] reports from here.

use std::ffi::{c_char, c_void};

/// `DP_ABI_VERSION`: bumped when a function, the struct or a constant changes incompatibly.
pub const ABI_VERSION: i64 = 1;
/// `DP_MAX_NDIM`: the most dimensions a `dp_tensor` may have.
pub const MAX_NDIM: i32 = 16;
/// `DP_DEFAULT_BUDGET_BYTES`: the staging budget per window when `dp_open` is given 0 (1 GiB).
pub const DEFAULT_BUDGET_BYTES: u64 = 1 << 30;

/// `DP_DEVICE_HOST`: host memory, recorded as device `cpu`.
pub const DEVICE_HOST: i32 = 0;
/// `DP_DEVICE_NPU`: Ascend NPU memory, `npu:<index>`, read by the ACL backend.
pub const DEVICE_NPU: i32 = 1;
/// `DP_DEVICE_CUDA`: CUDA device memory, `cuda:<index>`, read by the CUDA backend.
pub const DEVICE_CUDA: i32 = 2;
/// How many device types there are (`DP_DEVICE_CUDA + 1`).
pub const DEVICE_COUNT: i64 = 3;

/// The statuses every entry point returns: 0 or negative (the header's `DP_OK`, `DP_ERR_*`).
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// `DP_OK`.
    Ok = 0,
    /// `DP_ERR_NULL_ARGUMENT`: a required pointer is NULL.
    NullArgument = -1,
    /// `DP_ERR_STRUCT_SIZE`: `struct_size` smaller than the header's `sizeof(dp_tensor)`.
    StructSize = -2,
    /// `DP_ERR_DTYPE`: an unknown dtype code.
    Dtype = -3,
    /// `DP_ERR_NDIM`: `ndim` negative or above [`MAX_NDIM`].
    Ndim = -4,
    /// `DP_ERR_LAYOUT`: negative sizes/strides/offset, a span overflowing int64, or one outside
    /// `storage_bytes`.
    Layout = -5,
    /// `DP_ERR_NAME`: a stage or label breaking the name rules ([`crate::names`]).
    Name = -6,
    /// `DP_ERR_METADATA`: `metadata_json` is not a JSON object.
    Metadata = -7,
    /// `DP_ERR_DEVICE`: the backend cannot read this device type.
    Device = -8,
    /// `DP_ERR_OVER_BUDGET`: skipped, recorded in `skipped_over_budget`.
    OverBudget = -9,
    /// `DP_ERR_GRAPH_CAPTURE`: the stream is being captured into a graph.
    GraphCapture = -10,
    /// `DP_ERR_RUNTIME`: a device runtime call failed (a manifest warning).
    Runtime = -11,
    /// `DP_ERR_IO`: the window could not be written.
    Io = -12,
    /// `DP_ERR_CONFIG`: a `DUMP_PROBE_*` variable is invalid; the session is disarmed.
    Config = -13,
    /// `DP_ERR_BACKEND`: `DUMP_PROBE_BACKEND` unknown or its runtime unloadable; disarmed.
    Backend = -14,
    /// `DP_ERR_CLOSED`: the session was closed.
    Closed = -15,
    /// `DP_ERR_INTERNAL`: a bug in the probe, caught at the boundary.
    Internal = -16,
}

impl Status {
    /// Every status, `Ok` first, then by decreasing value.
    pub const ALL: [Status; 17] = [
        Status::Ok,
        Status::NullArgument,
        Status::StructSize,
        Status::Dtype,
        Status::Ndim,
        Status::Layout,
        Status::Name,
        Status::Metadata,
        Status::Device,
        Status::OverBudget,
        Status::GraphCapture,
        Status::Runtime,
        Status::Io,
        Status::Config,
        Status::Backend,
        Status::Closed,
        Status::Internal,
    ];

    /// The header's name of the status, e.g. `DP_ERR_LAYOUT`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "DP_OK",
            Status::NullArgument => "DP_ERR_NULL_ARGUMENT",
            Status::StructSize => "DP_ERR_STRUCT_SIZE",
            Status::Dtype => "DP_ERR_DTYPE",
            Status::Ndim => "DP_ERR_NDIM",
            Status::Layout => "DP_ERR_LAYOUT",
            Status::Name => "DP_ERR_NAME",
            Status::Metadata => "DP_ERR_METADATA",
            Status::Device => "DP_ERR_DEVICE",
            Status::OverBudget => "DP_ERR_OVER_BUDGET",
            Status::GraphCapture => "DP_ERR_GRAPH_CAPTURE",
            Status::Runtime => "DP_ERR_RUNTIME",
            Status::Io => "DP_ERR_IO",
            Status::Config => "DP_ERR_CONFIG",
            Status::Backend => "DP_ERR_BACKEND",
            Status::Closed => "DP_ERR_CLOSED",
            Status::Internal => "DP_ERR_INTERNAL",
        }
    }

    /// The status with this code, if any.
    pub fn from_code(code: i32) -> Option<Status> {
        Status::ALL.into_iter().find(|s| *s as i32 == code)
    }
}

/// A failed call: the status returned and the message `dp_last_error` gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What the entry point returns.
    pub status: Status,
    /// For people: what was wrong, naming the argument or the runtime call.
    pub message: String,
}

impl Failure {
    /// A failure with `status` and `message`.
    pub fn new(status: Status, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
        }
    }
}

/// `dp_tensor`: one tensor view as the caller describes it (see the header for each field).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DpTensor {
    /// `sizeof(dp_tensor)` as the caller compiled it.
    pub struct_size: u32,
    /// Storage base address; recorded as `storage_ptr`.
    pub data: *const c_void,
    /// Bytes of the storage, 0 if unknown.
    pub storage_bytes: u64,
    /// The caller's identity of the live storage, 0 if unknown.
    pub storage_id: u64,
    /// A `DP_*` dtype code.
    pub dtype: i32,
    /// Dimensions, 0 ..= [`MAX_NDIM`].
    pub ndim: i32,
    /// `ndim` sizes.
    pub shape: *const i64,
    /// `ndim` strides, elements.
    pub strides: *const i64,
    /// Offset of element 0 from `data`, elements.
    pub storage_offset: i64,
    /// `DP_DEVICE_*`.
    pub device_type: i32,
    /// The device's index (`npu:3`).
    pub device_index: i32,
    /// `aclrtStream` / `cudaStream_t`; NULL is the default stream.
    pub stream: *mut c_void,
    /// NULL, or a shard annotation.
    pub shard: *const c_char,
}

/// Byte offsets of `dp_tensor`'s fields, in declaration order (for `dp_abi_tensor_offset`).
pub fn tensor_field_offsets() -> [usize; 13] {
    use std::mem::offset_of;
    [
        offset_of!(DpTensor, struct_size),
        offset_of!(DpTensor, data),
        offset_of!(DpTensor, storage_bytes),
        offset_of!(DpTensor, storage_id),
        offset_of!(DpTensor, dtype),
        offset_of!(DpTensor, ndim),
        offset_of!(DpTensor, shape),
        offset_of!(DpTensor, strides),
        offset_of!(DpTensor, storage_offset),
        offset_of!(DpTensor, device_type),
        offset_of!(DpTensor, device_index),
        offset_of!(DpTensor, stream),
        offset_of!(DpTensor, shard),
    ]
}
