//! safetensors files, through the `safetensors` crate: the header gives each tensor's dtype,
//! shape and byte range; data stays in the memory map.
//!
//! Format: <https://github.com/huggingface/safetensors> (8-byte little-endian header length,
//! UTF-8 JSON header, then the tensors' bytes, row-major, little-endian).

use super::{DType, TensorEntry};
use ::safetensors::{Dtype, SafeTensors};

/// Reads the table of tensors of a safetensors file held in `bytes`, in header order.
///
/// # Errors
/// The crate's message for a damaged header or data section; a dtype dumpview does not read
/// (unsigned 16/32/64-bit, FP4/FP6, ...), named.
pub fn read_entries(bytes: &[u8]) -> Result<Vec<TensorEntry>, String> {
    let file = SafeTensors::deserialize(bytes)
        .map_err(|e| format!("not a valid safetensors file: {e}"))?;
    let base = bytes.as_ptr() as usize;
    let mut entries = Vec::new();
    // Header order: the crate's `iter` follows the data offsets, which writers lay out in
    // header order.
    for (name, tensor) in file.iter() {
        let dtype = dtype(tensor.dtype()).ok_or_else(|| {
            format!(
                "tensor {name:?}: dtype {:?} is not read by dumpview",
                tensor.dtype()
            )
        })?;
        let shape = tensor.shape().to_vec();
        let data = tensor.data();
        let start = data.as_ptr() as usize - base;
        entries.push(TensorEntry::new(
            name.to_string(),
            dtype,
            shape.clone(),
            contiguous_strides(&shape),
            0,
            start..start + data.len(),
            bytes.len(),
        )?);
    }
    Ok(entries)
}

/// Row-major strides (in elements) of `shape`.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1]);
    }
    strides
}

fn dtype(dtype: Dtype) -> Option<DType> {
    Some(match dtype {
        Dtype::BOOL => DType::Bool,
        Dtype::U8 => DType::Uint8,
        Dtype::I8 => DType::Int8,
        Dtype::I16 => DType::Int16,
        Dtype::I32 => DType::Int32,
        Dtype::I64 => DType::Int64,
        Dtype::F16 => DType::Float16,
        Dtype::BF16 => DType::BFloat16,
        Dtype::F32 => DType::Float32,
        Dtype::F64 => DType::Float64,
        Dtype::F8_E4M3 => DType::Float8E4M3Fn,
        Dtype::F8_E5M2 => DType::Float8E5M2,
        _ => return None,
    })
}
