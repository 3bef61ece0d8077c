//! The allow-list of pickle globals: torch's tensor-rebuild functions, storage classes,
//! dtypes and a few containers. Any other `module.name` is refused the moment it is named.

use super::{Element, shorten};
use crate::model::tensor::read::DType;

/// A global on the allow-list: the only names a pickle may mention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Global {
    /// `torch._utils._rebuild_tensor(storage, storage_offset, size, stride)`.
    RebuildTensor,
    /// `torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
    /// backward_hooks[, metadata])`.
    RebuildTensorV2,
    /// `torch._utils._rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad,
    /// backward_hooks, dtype[, metadata])`: untyped storages (float8, uint16, ...).
    RebuildTensorV3,
    /// `torch._utils._rebuild_parameter(data, requires_grad, backward_hooks)`.
    RebuildParameter,
    /// `torch._utils._rebuild_parameter_with_state(data, requires_grad, backward_hooks, state)`.
    RebuildParameterWithState,
    /// `torch._tensor._rebuild_from_type_v2(func, new_type, args, state)`.
    RebuildFromTypeV2,
    /// `torch.Tensor` or `torch.nn.parameter.Parameter`, as `new_type` of
    /// `_rebuild_from_type_v2`.
    TensorType,
    /// A storage class: `torch.FloatStorage`, ..., `torch.UntypedStorage`.
    StorageClass(Element),
    /// A dtype (`torch.float32`), or torch's name of one dumpview does not read.
    Dtype(Result<DType, &'static str>),
    /// `torch.device(type[, index])`, rebuilt as its string (`"cuda:0"`).
    Device,
    /// `torch.Size(tuple)`, rebuilt as a tuple.
    Size,
    /// `collections.OrderedDict`, rebuilt as a dict.
    OrderedDict,
    /// `_codecs.encode(str, encoding)`, protocol 2's spelling of `bytes`.
    CodecsEncode,
    /// `builtins.set` (also `__builtin__.set`).
    Set,
    /// `builtins.frozenset`.
    FrozenSet,
}

/// The allow-list as users read it in the refusal message.
pub const ALLOWED_GLOBALS: &str = "torch._utils._rebuild_tensor_v2, _rebuild_tensor, \
    _rebuild_tensor_v3, _rebuild_parameter, _rebuild_parameter_with_state, \
    torch._tensor._rebuild_from_type_v2, torch.Tensor, torch.nn.parameter.Parameter, \
    torch.<Type>Storage, torch.UntypedStorage, torch.<dtype>, torch.device, torch.Size, \
    collections.OrderedDict, _codecs.encode, builtins.set, builtins.frozenset";

/// Torch dtype attribute names that exist but that dumpview does not read.
const UNREAD_DTYPES: &[&str] = &[
    "complex32",
    "complex64",
    "complex128",
    "chalf",
    "cfloat",
    "cdouble",
    "uint16",
    "uint32",
    "uint64",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "qint8",
    "quint8",
    "qint32",
    "quint4x2",
    "quint2x4",
    "bits1x8",
    "bits2x4",
    "bits4x2",
    "bits8",
    "bits16",
];

/// Torch storage classes that exist but that dumpview does not read.
const UNREAD_STORAGES: &[&str] = &[
    "QInt8Storage",
    "QUInt8Storage",
    "QInt32Storage",
    "QUInt4x2Storage",
    "QUInt2x4Storage",
];

/// Resolves `module.name` against the allow-list.
///
/// # Errors
/// "refused pickle global `module.name`: ..." for everything not on the list.
pub fn resolve_global(module: &str, name: &str) -> Result<Global, String> {
    let global = match (module, name) {
        ("torch._utils", "_rebuild_tensor") => Some(Global::RebuildTensor),
        ("torch._utils", "_rebuild_tensor_v2") => Some(Global::RebuildTensorV2),
        ("torch._utils", "_rebuild_tensor_v3") => Some(Global::RebuildTensorV3),
        ("torch._utils", "_rebuild_parameter") => Some(Global::RebuildParameter),
        ("torch._utils", "_rebuild_parameter_with_state") => {
            Some(Global::RebuildParameterWithState)
        }
        ("torch._tensor", "_rebuild_from_type_v2") => Some(Global::RebuildFromTypeV2),
        ("torch", "Tensor") | ("torch._tensor", "Tensor") => Some(Global::TensorType),
        ("torch.nn.parameter", "Parameter") => Some(Global::TensorType),
        ("torch" | "torch.storage", "UntypedStorage") => {
            Some(Global::StorageClass(Element::Untyped))
        }
        ("torch", "device") => Some(Global::Device),
        ("torch", "Size") => Some(Global::Size),
        ("collections", "OrderedDict") => Some(Global::OrderedDict),
        ("_codecs", "encode") => Some(Global::CodecsEncode),
        ("builtins" | "__builtin__", "set") => Some(Global::Set),
        ("builtins" | "__builtin__", "frozenset") => Some(Global::FrozenSet),
        ("torch", name) => torch_attribute(name),
        _ => None,
    };
    global.ok_or_else(|| {
        format!(
            "refused pickle global `{}.{}`: dumpview runs no pickle code and accepts only torch's \
             tensor-rebuild globals ({ALLOWED_GLOBALS})",
            shorten(module),
            shorten(name)
        )
    })
}

/// `torch.<name>` as a storage class or a dtype.
fn torch_attribute(name: &str) -> Option<Global> {
    let typed = |dtype| Some(Global::StorageClass(Element::Typed(dtype)));
    match name {
        "DoubleStorage" => return typed(DType::Float64),
        "FloatStorage" => return typed(DType::Float32),
        "HalfStorage" => return typed(DType::Float16),
        "BFloat16Storage" => return typed(DType::BFloat16),
        "LongStorage" => return typed(DType::Int64),
        "IntStorage" => return typed(DType::Int32),
        "ShortStorage" => return typed(DType::Int16),
        "CharStorage" => return typed(DType::Int8),
        "ByteStorage" => return typed(DType::Uint8),
        "BoolStorage" => return typed(DType::Bool),
        "ComplexFloatStorage" => {
            return Some(Global::StorageClass(Element::Complex(DType::Float32)));
        }
        "ComplexDoubleStorage" => {
            return Some(Global::StorageClass(Element::Complex(DType::Float64)));
        }
        _ => {}
    }
    if let Some(&unread) = UNREAD_STORAGES.iter().find(|&&n| n == name) {
        return Some(Global::StorageClass(Element::Unread(unread)));
    }
    const TORCH_DTYPES: &[&str] = &[
        "float64",
        "double",
        "float32",
        "float",
        "float16",
        "half",
        "bfloat16",
        "float8_e4m3fn",
        "float8_e5m2",
        "int64",
        "long",
        "int32",
        "int",
        "int16",
        "short",
        "int8",
        "uint8",
        "bool",
    ];
    if TORCH_DTYPES.contains(&name) {
        return DType::from_name(name).map(|d| Global::Dtype(Ok(d)));
    }
    UNREAD_DTYPES
        .iter()
        .find(|&&n| n == name)
        .map(|&n| Global::Dtype(Err(n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_names_resolve_and_others_are_refused() {
        assert_eq!(
            resolve_global("torch._utils", "_rebuild_tensor_v2"),
            Ok(Global::RebuildTensorV2)
        );
        assert_eq!(
            resolve_global("torch", "BFloat16Storage"),
            Ok(Global::StorageClass(Element::Typed(DType::BFloat16)))
        );
        assert_eq!(
            resolve_global("torch", "uint16"),
            Ok(Global::Dtype(Err("uint16")))
        );
        let err = resolve_global("torch", "load").unwrap_err();
        assert!(err.contains("refused pickle global `torch.load`"), "{err}");
    }
}
