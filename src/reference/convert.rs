//! Between dumpview's tensors and libtorch's: a captured tensor rebuilt with its exact
//! layout, and a computed tensor copied out.

use tch::{Kind, Tensor};

use super::failure::{Computed, Failure};
use super::{ComputedTensor, Upcast};
use crate::model::input_set::CapturedTensor;
use crate::model::tensor::DType;

/// libtorch's kind of a dtype.
pub(crate) fn kind(dtype: DType) -> Kind {
    match dtype {
        DType::Float64 => Kind::Double,
        DType::Float32 => Kind::Float,
        DType::Float16 => Kind::Half,
        DType::BFloat16 => Kind::BFloat16,
        DType::Float8E4M3Fn => Kind::Float8e4m3fn,
        DType::Float8E5M2 => Kind::Float8e5m2,
        DType::Int64 => Kind::Int64,
        DType::Int32 => Kind::Int,
        DType::Int16 => Kind::Int16,
        DType::Int8 => Kind::Int8,
        DType::Uint8 => Kind::Uint8,
        DType::Bool => Kind::Bool,
    }
}

/// The dtype of a libtorch kind, or `None` for one dumpview does not read (complex,
/// quantized, the fnuz float8 variants).
pub(crate) fn dtype(kind: Kind) -> Option<DType> {
    Some(match kind {
        Kind::Double => DType::Float64,
        Kind::Float => DType::Float32,
        Kind::Half => DType::Float16,
        Kind::BFloat16 => DType::BFloat16,
        Kind::Float8e4m3fn => DType::Float8E4M3Fn,
        Kind::Float8e5m2 => DType::Float8E5M2,
        Kind::Int64 => DType::Int64,
        Kind::Int => DType::Int32,
        Kind::Int16 => DType::Int16,
        Kind::Int8 => DType::Int8,
        Kind::Uint8 => DType::Uint8,
        Kind::Bool => DType::Bool,
        _ => return None,
    })
}

/// The captured view rebuilt on the CPU: a storage holding the span, `as_strided` with the
/// captured shape, stride and offset into the span (the layout the operator saw, never made
/// contiguous), then brought to `upcast`'s dtype with `Tensor.to` (which keeps the strides of
/// a dense view).
pub(crate) fn captured(t: &CapturedTensor, upcast: Upcast) -> Computed<Tensor> {
    let dims = |v: &[usize]| -> Computed<Vec<i64>> {
        v.iter()
            .map(|&d| i64::try_from(d))
            .collect::<Result<_, _>>()
            .map_err(|_| Failure::Arguments(format!("a dimension of {v:?} exceeds i64")))
    };
    let span_len = i64::try_from(t.span_len())
        .map_err(|_| Failure::Arguments("the span exceeds i64 elements".into()))?;
    let offset = i64::try_from(t.offset_in_span)
        .map_err(|_| Failure::Arguments("offset_in_span exceeds i64".into()))?;
    let storage = Tensor::f_from_data_size(&t.span, &[span_len], kind(t.dtype))?;
    let view = storage.f_as_strided(dims(&t.shape)?, dims(&t.stride)?, offset)?;
    let target = upcast.apply(t.dtype);
    if target == t.dtype {
        Ok(view)
    } else {
        Ok(view.f_to_kind(kind(target))?)
    }
}

/// A computed tensor copied out, contiguous, to the CPU.
pub(crate) fn computed(t: &Tensor) -> Computed<ComputedTensor> {
    let kind = t.f_kind()?;
    let dtype = dtype(kind).ok_or_else(|| {
        Failure::Arguments(format!(
            "an output of kind {kind:?}, which dumpview does not read"
        ))
    })?;
    let t = t.f_to_device(tch::Device::Cpu)?.f_contiguous()?;
    let shape: Vec<usize> = t
        .size()
        .iter()
        .map(|&d| usize::try_from(d).unwrap_or(0))
        .collect();
    let numel: usize = shape.iter().product();
    let mut bytes = vec![0u8; numel * dtype.size()];
    t.f_copy_data_u8(&mut bytes, numel)?;
    Ok(ComputedTensor {
        dtype,
        shape,
        bytes,
    })
}
