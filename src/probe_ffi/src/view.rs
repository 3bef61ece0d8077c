//! A caller's `dp_tensor`, checked into an owned [`View`]: every rule of the header's
//! `DP_ERR_*` statuses for a tensor, and the span of storage the view reads.
//!
//! Nothing here dereferences `data`: the span is computed from the layout alone, in checked
//! int64 arithmetic, so a hostile shape cannot wrap an offset into memory the view does not own.

use std::ffi::CStr;

use crate::abi::{DEVICE_CUDA, DEVICE_HOST, DEVICE_NPU, DpTensor, Failure, MAX_NDIM, Status};
use crate::dtype::Dtype;

/// Where a tensor lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    /// Host memory (`cpu`).
    Host,
    /// An Ascend NPU (`npu:<index>`).
    Npu(i32),
    /// A CUDA device (`cuda:<index>`).
    Cuda(i32),
}

impl Device {
    /// The manifest's `device` string: `cpu`, `npu:3`, `cuda:0`.
    pub fn name(self) -> String {
        match self {
            Device::Host => "cpu".to_string(),
            Device::Npu(i) => format!("npu:{i}"),
            Device::Cuda(i) => format!("cuda:{i}"),
        }
    }
}

/// A checked tensor view: logical layout, physical layout, and the bytes it reads.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// Element type.
    pub dtype: Dtype,
    /// Logical sizes, elements (empty for a 0-d scalar).
    pub shape: Vec<u64>,
    /// Strides, elements (non-negative).
    pub strides: Vec<u64>,
    /// Offset of element 0 from the storage base, elements.
    pub storage_offset: u64,
    /// Product of `shape` (1 for a scalar).
    pub numel: u64,
    /// Elements from `storage_offset` that the view can touch (0 when `numel` is 0):
    /// `1 + Σ (sizeₖ − 1)·strideₖ`.
    pub span_elements: u64,
    /// The storage base address (`storage_ptr`), bytes.
    pub data: usize,
    /// Bytes of the storage, when the caller knows them.
    pub storage_bytes: Option<u64>,
    /// The caller's identity of the live storage, when given.
    pub storage_id: Option<u64>,
    /// Where the storage lives.
    pub device: Device,
    /// The stream the copy is ordered on (0: the default stream).
    pub stream: usize,
    /// The caller's shard annotation, if any.
    pub shard: Option<String>,
}

impl View {
    /// A host view of `shape` and `strides` (elements) at offset 0, for unit tests.
    #[cfg(test)]
    pub(crate) fn for_tests(dtype: Dtype, shape: &[u64], strides: &[u64]) -> View {
        let numel = shape.iter().product();
        let span_elements = if numel == 0 {
            0
        } else {
            1 + shape
                .iter()
                .zip(strides)
                .map(|(s, t)| (s - 1) * t)
                .sum::<u64>()
        };
        View {
            dtype,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            storage_offset: 0,
            numel,
            span_elements,
            data: 0,
            storage_bytes: None,
            storage_id: None,
            device: Device::Host,
            stream: 0,
            shard: None,
        }
    }

    /// Checks `t` (`dp_capture`'s argument).
    ///
    /// # Safety
    /// `t` is NULL or points to a readable `dp_tensor` of at least `struct_size` bytes whose
    /// `shape` and `strides` point to `ndim` readable int64 each and whose `shard` is NULL or a
    /// NUL-terminated string. `data` is not read.
    ///
    /// # Errors
    /// The header's statuses: `NullArgument`, `StructSize`, `Dtype`, `Ndim`, `Layout`, `Device`.
    pub unsafe fn check(t: *const DpTensor) -> Result<View, Failure> {
        if t.is_null() {
            return Err(Failure::new(Status::NullArgument, "tensor is NULL"));
        }
        // The size is read first and alone: a caller compiled against a smaller, older struct
        // must not have the fields it lacks read.
        // SAFETY: t is non-NULL and points to a dp_tensor (caller's contract); struct_size is
        // its first field, present in every version.
        let struct_size = unsafe { std::ptr::read_unaligned(t.cast::<u32>()) };
        let expected = std::mem::size_of::<DpTensor>();
        if (struct_size as usize) < expected {
            return Err(Failure::new(
                Status::StructSize,
                format!(
                    "tensor.struct_size is {struct_size}, this library's dp_tensor has {expected} bytes \
                     (set struct_size = sizeof(dp_tensor) and rebuild against this dump_probe.h)"
                ),
            ));
        }
        // SAFETY: struct_size says the whole current struct is there.
        let t = unsafe { &*t };
        let dtype = Dtype::from_code(t.dtype).ok_or_else(|| {
            Failure::new(
                Status::Dtype,
                format!(
                    "tensor.dtype {} is not a DP_* dtype (DP_FLOAT32 .. DP_BOOL)",
                    t.dtype
                ),
            )
        })?;
        if !(0..=MAX_NDIM).contains(&t.ndim) {
            return Err(Failure::new(
                Status::Ndim,
                format!("tensor.ndim {} is outside 0 ..= {MAX_NDIM}", t.ndim),
            ));
        }
        let ndim = t.ndim as usize;
        if ndim > 0 && (t.shape.is_null() || t.strides.is_null()) {
            return Err(Failure::new(
                Status::NullArgument,
                format!("tensor.shape or tensor.strides is NULL with ndim {ndim}"),
            ));
        }
        let (shape, strides) = if ndim == 0 {
            (&[][..], &[][..])
        } else {
            // SAFETY: both non-NULL and holding ndim elements (caller's contract).
            unsafe {
                (
                    std::slice::from_raw_parts(t.shape, ndim),
                    std::slice::from_raw_parts(t.strides, ndim),
                )
            }
        };
        let device = match t.device_type {
            DEVICE_HOST => Device::Host,
            DEVICE_NPU => Device::Npu(t.device_index),
            DEVICE_CUDA => Device::Cuda(t.device_index),
            other => {
                return Err(Failure::new(
                    Status::Device,
                    format!("tensor.device_type {other} is not a DP_DEVICE_*"),
                ));
            }
        };
        let span = span_of(shape, strides, t.storage_offset, dtype.size() as i64)?;
        if span.numel > 0 && t.data.is_null() {
            return Err(Failure::new(
                Status::NullArgument,
                "tensor.data is NULL for a tensor with elements",
            ));
        }
        let storage_bytes = (t.storage_bytes > 0).then_some(t.storage_bytes);
        if let Some(bytes) = storage_bytes {
            if span.end_byte > bytes {
                return Err(Failure::new(
                    Status::Layout,
                    format!(
                        "the view reads up to byte {} of its storage, beyond storage_bytes {bytes}",
                        span.end_byte
                    ),
                ));
            }
        }
        if (t.data as usize)
            .checked_add(span.end_byte as usize)
            .is_none()
        {
            return Err(Failure::new(
                Status::Layout,
                "data + the view's span overflows the address space",
            ));
        }
        let shard = (!t.shard.is_null()).then(|| {
            // SAFETY: non-NULL shard is a NUL-terminated string (caller's contract).
            unsafe { CStr::from_ptr(t.shard) }
                .to_string_lossy()
                .into_owned()
        });
        Ok(View {
            dtype,
            shape: shape.iter().map(|&s| s as u64).collect(),
            strides: strides.iter().map(|&s| s as u64).collect(),
            storage_offset: t.storage_offset as u64,
            numel: span.numel,
            span_elements: span.elements,
            data: t.data as usize,
            storage_bytes,
            storage_id: (t.storage_id > 0).then_some(t.storage_id),
            device,
            stream: t.stream as usize,
            shard,
        })
    }

    /// Bytes per element.
    pub fn element_size(&self) -> usize {
        self.dtype.size()
    }

    /// Bytes the view's span covers (what is staged).
    pub fn span_bytes(&self) -> u64 {
        self.span_elements * self.element_size() as u64
    }

    /// Address of the span's first byte (`data + storage_offset · element_size`).
    pub fn span_start(&self) -> usize {
        self.data + (self.storage_offset as usize) * self.element_size()
    }

    /// torch's `is_contiguous()`: strides of a row-major layout, ignoring dimensions of size 1;
    /// a tensor without elements is contiguous.
    pub fn is_contiguous(&self) -> bool {
        if self.numel == 0 {
            return true;
        }
        let mut expected = 1u64;
        for (&size, &stride) in self.shape.iter().zip(&self.strides).rev() {
            if size != 1 {
                if stride != expected {
                    return false;
                }
                expected *= size;
            }
        }
        true
    }

    /// Rows of the matrix view the statistics use: the leading dimensions flattened (1 for a
    /// scalar, 0 without elements).
    pub fn rows(&self) -> u64 {
        if self.numel == 0 {
            return 0;
        }
        self.numel / self.cols()
    }

    /// Columns of that matrix: the last dimension's size (1 for a scalar).
    pub fn cols(&self) -> u64 {
        self.shape.last().copied().unwrap_or(1).max(1)
    }

    /// Rows of dimension 0 (`rows_total` of a saved tensor): 1 for a scalar.
    pub fn dim0(&self) -> u64 {
        self.shape.first().copied().unwrap_or(1)
    }
}

/// What [`span_of`] finds.
#[derive(Debug, PartialEq, Eq)]
struct Span {
    numel: u64,
    elements: u64,
    end_byte: u64,
}

/// Checks sizes, strides and offset and computes the span, all in checked int64.
fn span_of(
    shape: &[i64],
    strides: &[i64],
    storage_offset: i64,
    element_size: i64,
) -> Result<Span, Failure> {
    let layout = |message: String| Failure::new(Status::Layout, message);
    if let Some((k, size)) = shape.iter().enumerate().find(|(_, s)| **s < 0) {
        return Err(layout(format!("tensor.shape[{k}] is negative ({size})")));
    }
    if let Some((k, stride)) = strides.iter().enumerate().find(|(_, s)| **s < 0) {
        return Err(layout(format!(
            "tensor.strides[{k}] is negative ({stride}): describe the view from its lowest \
             element with non-negative strides, as torch does"
        )));
    }
    if storage_offset < 0 {
        return Err(layout(format!(
            "tensor.storage_offset is negative ({storage_offset})"
        )));
    }
    let overflow = || {
        layout(format!(
            "the view's span overflows int64 (shape {shape:?}, strides {strides:?}, offset {storage_offset})"
        ))
    };
    let numel = shape
        .iter()
        .try_fold(1i64, |n, &s| n.checked_mul(s))
        .ok_or_else(overflow)?;
    if numel == 0 {
        return Ok(Span {
            numel: 0,
            elements: 0,
            end_byte: 0,
        });
    }
    let mut last = 0i64;
    for (&size, &stride) in shape.iter().zip(strides) {
        last = (size - 1)
            .checked_mul(stride)
            .and_then(|step| last.checked_add(step))
            .ok_or_else(overflow)?;
    }
    let elements = last.checked_add(1).ok_or_else(overflow)?;
    let end_byte = storage_offset
        .checked_add(elements)
        .and_then(|end| end.checked_mul(element_size))
        .ok_or_else(overflow)?;
    // The staged span must also be addressable in bytes on its own.
    elements.checked_mul(element_size).ok_or_else(overflow)?;
    Ok(Span {
        numel: numel as u64,
        elements: elements as u64,
        end_byte: end_byte as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_of_a_transposed_slice() {
        // A [3, 4] slice at offset 5 of rows of 10, transposed: shape [4, 3], strides [1, 10].
        let span = span_of(&[4, 3], &[1, 10], 5, 4).unwrap();
        assert_eq!(
            span,
            Span {
                numel: 12,
                elements: 24,
                end_byte: 116
            }
        );
    }

    #[test]
    fn overflowing_and_negative_layouts_are_refused() {
        let err = span_of(&[1 << 40, 1 << 40], &[1, 1], 0, 4).unwrap_err();
        assert_eq!(err.status, Status::Layout);
        assert!(err.message.contains("overflows int64"), "{}", err.message);
        let err = span_of(&[2, 2], &[i64::MAX / 2, 1], 0, 4).unwrap_err();
        assert!(err.message.contains("overflows"), "{}", err.message);
        let err = span_of(&[2], &[-1], 1, 4).unwrap_err();
        assert!(
            err.message.contains("strides[0] is negative"),
            "{}",
            err.message
        );
        assert_eq!(span_of(&[0, 5], &[5, 1], 0, 2).unwrap().elements, 0);
        assert_eq!(span_of(&[], &[], 7, 2).unwrap().end_byte, 16);
    }
}
