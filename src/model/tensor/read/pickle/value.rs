//! The unpickled object graph: an arena of plain [`Value`]s referring to each other by
//! [`ObjId`], and the storages and tensors torch's rebuild functions describe.

use std::ops::Range;

use super::Global;
use crate::model::tensor::read::DType;

/// Index of an object in [`Pickle::objects`].
pub type ObjId = usize;

/// A value of the unpickled object graph.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Python's `None`.
    None,
    /// `True` or `False` (`NEWTRUE`, `NEWFALSE`, protocol 0's `I01`/`I00`).
    Bool(bool),
    /// An integer within `i64` (every int, long and binint form).
    Int(i64),
    /// An integer outside `i64` (its digits are not kept).
    BigInt,
    /// A float (`BINFLOAT`, protocol 0's `FLOAT`).
    Float(f64),
    /// Any string form (protocol 0 `STRING`, `BINUNICODE`, ...), as UTF-8.
    Str(String),
    /// `bytes` and `bytearray`, and `_codecs.encode`'s result.
    Bytes(Vec<u8>),
    /// Items by id; filled in place by `APPEND(S)` after creation.
    List(Vec<ObjId>),
    /// Items by id (`torch.Size` is rebuilt as a tuple).
    Tuple(Vec<ObjId>),
    /// Key-value pairs in insertion order (`dict` and `collections.OrderedDict`).
    Dict(Vec<(ObjId, ObjId)>),
    /// `set` or `frozenset`, in pickle order.
    Set(Vec<ObjId>),
    /// An allowed global (a function, class or dtype), not yet applied.
    Global(Global),
    /// A storage named by a persistent id.
    Storage(Box<Storage>),
    /// A tensor rebuilt by one of torch's rebuild functions.
    Tensor(Box<Tensor>),
}

impl Value {
    /// A short name of the value's kind for messages: `"list"`, `"tensor"`, ...
    pub fn kind(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::BigInt => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
            Value::Set(_) => "set",
            Value::Global(_) => "global",
            Value::Storage(_) => "storage",
            Value::Tensor(_) => "tensor",
        }
    }
}

/// What a storage's bytes hold: one dtype (legacy typed storage classes such as
/// `torch.FloatStorage`), untyped bytes (`torch.UntypedStorage`, the tensor's dtype comes from
/// `_rebuild_tensor_v3`), or a type dumpview does not read (named).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Element {
    /// A legacy typed storage: elements of this dtype.
    Typed(DType),
    /// Bytes; the tensor's dtype comes from `_rebuild_tensor_v3`.
    Untyped,
    /// A complex storage (`ComplexFloatStorage`, `ComplexDoubleStorage`): pairs (real,
    /// imaginary) of this real dtype, read as `torch.view_as_real` reads them.
    Complex(DType),
    /// A storage class torch has but dumpview does not read, e.g. `ComplexFloatStorage`.
    Unread(&'static str),
}

/// A storage resolved from a persistent id `('storage', storage_type, key, location, numel)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    /// What the bytes hold, from the persistent id's storage class.
    pub element: Element,
    /// The storage's bytes, as the caller's `load_storage` resolved the key (for `.pt`
    /// archives: the byte range of `<prefix>/data/<key>` inside the file).
    pub bytes: Range<usize>,
}

/// A tensor as torch's rebuild functions describe it. Sizes are in elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor {
    /// The element type, or torch's name of a dtype dumpview does not read (`"uint16"`).
    pub dtype: Result<DType, &'static str>,
    /// Byte range of the whole storage (as [`Storage::bytes`]).
    pub storage: Range<usize>,
    /// First element's index in the storage, in elements.
    pub storage_offset: usize,
    /// Logical shape (at most [`MAX_RANK`](super::MAX_RANK) dimensions; empty for a 0-d tensor).
    pub shape: Vec<usize>,
    /// Strides in elements, one per dimension.
    pub strides: Vec<usize>,
    /// True for a complex tensor, described here as `torch.view_as_real` gives it: `dtype` is
    /// the real component's, `shape` ends in 2 (real, imaginary), and `strides` and
    /// `storage_offset` count real components.
    pub complex: bool,
}

/// The unpickled object graph.
#[derive(Debug)]
pub struct Pickle {
    /// Every object, by [`ObjId`].
    pub objects: Vec<Value>,
    /// The object `STOP` returned.
    pub root: ObjId,
}

impl Pickle {
    /// The object `id` (ids come from this pickle's values, so they are in range).
    pub fn get(&self, id: ObjId) -> &Value {
        &self.objects[id]
    }
}
