//! A pickle reader that runs no pickle code: a stack machine over the opcodes of protocols 0-5
//! that torch.save emits, producing a tree of plain [`Value`]s.
//!
//! Globals (`GLOBAL`, `STACK_GLOBAL`) resolve only through an allow-list of torch's
//! tensor-rebuild functions, storage classes, dtypes and a few containers ([`Global`]); any
//! other global (`posix.system`, `builtins.eval`, ...) is refused the moment it is named.
//! `REDUCE`, `NEWOBJ` and `BUILD` never call anything: they interpret allowed globals.
//!
//! Objects live in an arena ([`Pickle::objects`]) and refer to each other by [`ObjId`], so a
//! memo `GET` costs nothing and containers filled after memoization (`EMPTY_LIST`, `BINPUT`,
//! `APPENDS`) are seen filled everywhere, exactly as in Python. The graph may share nodes or
//! hold cycles; walkers must bound their depth and visits.
//!
//! Every length is checked against the bytes left before use; stack, memo, mark depth and
//! object count are capped, and values derived by copying (e.g. `set(list)` on a memoized
//! list) are charged against a budget proportional to the input, so no input makes the reader
//! allocate much more than its own size, recurse, panic or read out of bounds.

use std::collections::HashMap;
use std::ops::Range;

use super::DType;

/// Index of an object in [`Pickle::objects`].
pub type ObjId = usize;

/// Deepest nesting of `MARK`s (open tuples, lists, dicts being built).
pub const MAX_MARK_DEPTH: usize = 1000;
/// Most values the stack holds at once.
pub const MAX_STACK: usize = 1 << 20;
/// Most objects one pickle creates.
pub const MAX_OBJECTS: usize = 1 << 23;
/// Most dimensions of a rebuilt tensor.
pub const MAX_RANK: usize = 64;

/// A value of the unpickled object graph.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Python's `None`.
    None,
    Bool(bool),
    /// An integer within `i64` (every int, long and binint form).
    Int(i64),
    /// An integer outside `i64` (its digits are not kept).
    BigInt,
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
    /// Logical shape (at most [`MAX_RANK`] dimensions; empty for a 0-d tensor).
    pub shape: Vec<usize>,
    /// Strides in elements, one per dimension.
    pub strides: Vec<usize>,
}

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
    "ComplexFloatStorage",
    "ComplexDoubleStorage",
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

/// At most 120 characters of `text`, for messages about hostile input.
fn shorten(text: &str) -> String {
    let mut out: String = text.chars().take(120).collect();
    if out.len() < text.len() {
        out.push_str("...");
    }
    out.escape_debug().to_string()
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

/// Unpickles `data` without running code.
///
/// `load_storage(key)` maps the key of a persistent id `('storage', type, key, location,
/// numel)` to the storage's byte range (for `.pt` archives: the entry `<prefix>/data/<key>`).
///
/// # Errors
/// A message with the byte offset of the opcode: a refused global, an unsupported opcode,
/// truncated data, a stack or memo misuse, a cap exceeded, or `load_storage`'s error.
pub fn unpickle(
    data: &[u8],
    load_storage: &mut dyn FnMut(&str) -> Result<Range<usize>, String>,
) -> Result<Pickle, String> {
    let mut machine = Machine {
        data,
        pos: 0,
        objects: Vec::new(),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
        budget: data.len().saturating_mul(4).saturating_add(4096),
        load_storage,
    };
    loop {
        let at = machine.pos;
        let op = machine.take(1).map_err(|e| format!("pickle: {e}"))?[0];
        match machine.step(op) {
            Ok(Some(root)) => {
                return Ok(Pickle {
                    objects: machine.objects,
                    root,
                });
            }
            Ok(None) => {}
            Err(e) => return Err(format!("pickle (opcode {op:#04x} at byte {at}): {e}")),
        }
    }
}

type Step = Result<Option<ObjId>, String>;

struct Machine<'a, 'f> {
    data: &'a [u8],
    pos: usize,
    objects: Vec<Value>,
    stack: Vec<ObjId>,
    /// Stack lengths at each open `MARK`.
    marks: Vec<usize>,
    memo: HashMap<u64, ObjId>,
    /// Elements (ids, bytes) that copying operations may still create.
    budget: usize,
    load_storage: &'f mut dyn FnMut(&str) -> Result<Range<usize>, String>,
}

impl Machine<'_, '_> {
    /// The next `n` bytes.
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let left = self.data.len() - self.pos;
        if n > left {
            return Err(format!(
                "truncated: needs {n} bytes at byte {}, {left} left",
                self.pos
            ));
        }
        let bytes = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let bytes = self.take(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    /// A little-endian length of `N` bytes, checked against the bytes left.
    fn take_len<const N: usize>(&mut self) -> Result<usize, String> {
        let raw = self.take_array::<N>()?;
        let mut wide = [0u8; 8];
        wide[..N].copy_from_slice(&raw);
        let len = u64::from_le_bytes(wide);
        let left = (self.data.len() - self.pos) as u64;
        if len > left {
            return Err(format!("truncated: claims {len} bytes, only {left} left"));
        }
        Ok(len as usize)
    }

    /// Bytes up to the next `\n` (excluded), for protocol 0's text opcodes.
    fn line(&mut self) -> Result<&[u8], String> {
        let rest = &self.data[self.pos..];
        let end = memchr::memchr(b'\n', rest).ok_or("truncated: a text argument has no newline")?;
        self.pos += end + 1;
        Ok(&rest[..end])
    }

    fn charge(&mut self, n: usize) -> Result<(), String> {
        self.budget = self.budget.checked_sub(n).ok_or(
            "the pickle expands to more than 4 times its size (repeated copies of memoized objects)",
        )?;
        Ok(())
    }

    fn new_object(&mut self, value: Value) -> Result<ObjId, String> {
        if self.objects.len() >= MAX_OBJECTS {
            return Err(format!("more than {MAX_OBJECTS} objects"));
        }
        self.objects.push(value);
        Ok(self.objects.len() - 1)
    }

    fn push_id(&mut self, id: ObjId) -> Result<(), String> {
        if self.stack.len() >= MAX_STACK {
            return Err(format!("stack deeper than {MAX_STACK} values"));
        }
        self.stack.push(id);
        Ok(())
    }

    fn push(&mut self, value: Value) -> Result<(), String> {
        let id = self.new_object(value)?;
        self.push_id(id)
    }

    /// The stack length below which values belong to an open mark.
    fn floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn pop(&mut self) -> Result<ObjId, String> {
        if self.stack.len() <= self.floor() {
            return Err("stack underflow".into());
        }
        Ok(self.stack.pop().expect("checked above"))
    }

    fn top(&self) -> Result<ObjId, String> {
        if self.stack.len() <= self.floor() {
            return Err("stack underflow".into());
        }
        Ok(*self.stack.last().expect("checked above"))
    }

    /// The values pushed since the last `MARK`, which is closed.
    fn pop_mark(&mut self) -> Result<Vec<ObjId>, String> {
        let mark = self.marks.pop().ok_or("no MARK to close")?;
        Ok(self.stack.split_off(mark))
    }

    fn memo_put(&mut self, index: u64) -> Result<(), String> {
        let id = self.top()?;
        if self.memo.len() >= MAX_OBJECTS && !self.memo.contains_key(&index) {
            return Err(format!("memo larger than {MAX_OBJECTS} entries"));
        }
        self.memo.insert(index, id);
        Ok(())
    }

    fn memo_get(&mut self, index: u64) -> Result<(), String> {
        let id = *self
            .memo
            .get(&index)
            .ok_or_else(|| format!("memo GET of missing index {index}"))?;
        self.push_id(id)
    }

    fn str_of(&self, id: ObjId, what: &str) -> Result<&str, String> {
        match &self.objects[id] {
            Value::Str(s) => Ok(s),
            other => Err(format!("{what} is a {}, not a str", other.kind())),
        }
    }

    /// One opcode; `Some(root)` at `STOP`.
    fn step(&mut self, op: u8) -> Step {
        match op {
            // Framing and protocol.
            0x80 => {
                let protocol = self.take(1)?[0];
                if protocol > 5 {
                    return Err(format!("pickle protocol {protocol} is newer than 5"));
                }
            }
            0x95 => {
                self.take_len::<8>()?;
            }
            b'.' => return self.pop().map(Some),
            // Stack manipulation.
            b'(' => {
                if self.marks.len() >= MAX_MARK_DEPTH {
                    return Err(format!("nesting deeper than {MAX_MARK_DEPTH} MARKs"));
                }
                self.marks.push(self.stack.len());
            }
            b'0' => {
                if self.stack.len() > self.floor() {
                    self.stack.pop();
                } else {
                    self.pop_mark()?;
                }
            }
            b'1' => {
                self.pop_mark()?;
            }
            b'2' => {
                let id = self.top()?;
                self.push_id(id)?;
            }
            // Memo.
            b'p' => {
                let index = parse_index(self.line()?)?;
                self.memo_put(index)?;
            }
            b'q' => {
                let index = self.take(1)?[0];
                self.memo_put(u64::from(index))?;
            }
            b'r' => {
                let index = u32::from_le_bytes(self.take_array()?);
                self.memo_put(u64::from(index))?;
            }
            0x94 => {
                let index = self.memo.len() as u64;
                self.memo_put(index)?;
            }
            b'g' => {
                let index = parse_index(self.line()?)?;
                self.memo_get(index)?;
            }
            b'h' => {
                let index = self.take(1)?[0];
                self.memo_get(u64::from(index))?;
            }
            b'j' => {
                let index = u32::from_le_bytes(self.take_array()?);
                self.memo_get(u64::from(index))?;
            }
            // Constants.
            b'N' => self.push(Value::None)?,
            0x88 => self.push(Value::Bool(true))?,
            0x89 => self.push(Value::Bool(false))?,
            b'I' => {
                let line = self.line()?;
                let value = match line {
                    b"00" => Value::Bool(false),
                    b"01" => Value::Bool(true),
                    _ => parse_decimal(line)?,
                };
                self.push(value)?;
            }
            b'L' => {
                let line = self.line()?;
                let digits = line.strip_suffix(b"L").unwrap_or(line);
                let value = parse_decimal(digits)?;
                self.push(value)?;
            }
            b'J' => {
                let value = i32::from_le_bytes(self.take_array()?);
                self.push(Value::Int(i64::from(value)))?;
            }
            b'K' => {
                let value = self.take(1)?[0];
                self.push(Value::Int(i64::from(value)))?;
            }
            b'M' => {
                let value = u16::from_le_bytes(self.take_array()?);
                self.push(Value::Int(i64::from(value)))?;
            }
            0x8a => {
                let n = self.take_len::<1>()?;
                let value = long_le(self.take(n)?);
                self.push(value)?;
            }
            0x8b => {
                let n = self.take_len::<4>()?;
                let value = long_le(self.take(n)?);
                self.push(value)?;
            }
            b'F' => {
                let line = self.line()?;
                let text = std::str::from_utf8(line).map_err(|_| "FLOAT is not text")?;
                let value = text
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| format!("FLOAT `{}` is not a number", shorten(text)))?;
                self.push(Value::Float(value))?;
            }
            b'G' => {
                let value = f64::from_be_bytes(self.take_array()?);
                self.push(Value::Float(value))?;
            }
            // Strings and bytes.
            b'S' => {
                let line = self.line()?;
                let bytes = unquote_string(line)?;
                let text = String::from_utf8(bytes).map_err(|_| "STRING is not UTF-8")?;
                self.push(Value::Str(text))?;
            }
            b'T' => {
                let n = self.take_len::<4>()?;
                self.push_text(n, "BINSTRING")?;
            }
            b'U' => {
                let n = self.take_len::<1>()?;
                self.push_text(n, "SHORT_BINSTRING")?;
            }
            b'V' => {
                let line = self.line()?;
                let text = raw_unicode_escape(line)?;
                self.push(Value::Str(text))?;
            }
            b'X' => {
                let n = self.take_len::<4>()?;
                self.push_text(n, "BINUNICODE")?;
            }
            0x8c => {
                let n = self.take_len::<1>()?;
                self.push_text(n, "SHORT_BINUNICODE")?;
            }
            0x8d => {
                let n = self.take_len::<8>()?;
                self.push_text(n, "BINUNICODE8")?;
            }
            b'B' => {
                let n = self.take_len::<4>()?;
                self.push_bytes(n)?;
            }
            b'C' => {
                let n = self.take_len::<1>()?;
                self.push_bytes(n)?;
            }
            0x8e | 0x96 => {
                let n = self.take_len::<8>()?;
                self.push_bytes(n)?;
            }
            // Containers.
            b']' => self.push(Value::List(Vec::new()))?,
            b'}' => self.push(Value::Dict(Vec::new()))?,
            b')' => self.push(Value::Tuple(Vec::new()))?,
            0x8f => self.push(Value::Set(Vec::new()))?,
            b'l' => {
                let items = self.pop_mark()?;
                self.push(Value::List(items))?;
            }
            b't' => {
                let items = self.pop_mark()?;
                self.push(Value::Tuple(items))?;
            }
            0x91 => {
                let items = self.pop_mark()?;
                self.push(Value::Set(items))?;
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                if self.stack.len() < self.floor() + n {
                    return Err("stack underflow".into());
                }
                let items = self.stack.split_off(self.stack.len() - n);
                self.push(Value::Tuple(items))?;
            }
            b'd' => {
                let items = self.pop_mark()?;
                let pairs = pairs(items)?;
                self.push(Value::Dict(pairs))?;
            }
            b'a' => {
                let item = self.pop()?;
                let list = self.top()?;
                self.extend_list(list, vec![item])?;
            }
            b'e' => {
                let items = self.pop_mark()?;
                let list = self.top()?;
                self.extend_list(list, items)?;
            }
            b's' => {
                let value = self.pop()?;
                let key = self.pop()?;
                let dict = self.top()?;
                self.extend_dict(dict, vec![(key, value)])?;
            }
            b'u' => {
                let items = self.pop_mark()?;
                let dict = self.top()?;
                self.extend_dict(dict, pairs(items)?)?;
            }
            0x90 => {
                let items = self.pop_mark()?;
                let set = self.top()?;
                match &mut self.objects[set] {
                    Value::Set(existing) => existing.extend(items),
                    other => return Err(format!("ADDITEMS on a {}", other.kind())),
                }
            }
            // Globals and the operations that would call them.
            b'c' => {
                let module = text_line(self.line()?)?;
                let name = text_line(self.line()?)?;
                let global = resolve_global(&module, &name)?;
                self.push(Value::Global(global))?;
            }
            0x93 => {
                let name = self.pop()?;
                let module = self.pop()?;
                let global = resolve_global(
                    self.str_of(module, "STACK_GLOBAL's module")?,
                    self.str_of(name, "STACK_GLOBAL's name")?,
                )?;
                self.push(Value::Global(global))?;
            }
            b'R' => {
                let args = self.pop()?;
                let callable = self.pop()?;
                let result = self.apply(callable, args, "REDUCE")?;
                self.push_id(result)?;
            }
            0x81 => {
                let args = self.pop()?;
                let class = self.pop()?;
                let result = self.apply(class, args, "NEWOBJ")?;
                self.push_id(result)?;
            }
            0x92 => {
                let kwargs = self.pop()?;
                let args = self.pop()?;
                let class = self.pop()?;
                if !matches!(&self.objects[kwargs], Value::Dict(d) if d.is_empty()) {
                    return Err("NEWOBJ_EX with keyword arguments".into());
                }
                let result = self.apply(class, args, "NEWOBJ_EX")?;
                self.push_id(result)?;
            }
            b'b' => {
                // Sets attributes (a Parameter's or an OrderedDict's `__dict__`); dumpview
                // keeps none of them, so only the target is checked.
                self.pop()?;
                let target = self.top()?;
                match &self.objects[target] {
                    Value::Tensor(_) | Value::Dict(_) => {}
                    other => return Err(format!("BUILD on a {} refused", other.kind())),
                }
            }
            b'Q' => {
                let pid = self.pop()?;
                let storage = self.persistent_load(pid)?;
                self.push(storage)?;
            }
            b'P' => {
                let line = self.line()?;
                return Err(format!(
                    "text persistent id `{}` is not a torch storage reference",
                    shorten(&String::from_utf8_lossy(line))
                ));
            }
            b'i' | b'o' => return Err("INST/OBJ (class instantiation) refused".into()),
            0x82..=0x84 => {
                return Err("EXT opcodes (the copyreg extension registry) refused".into());
            }
            0x97 | 0x98 => return Err("out-of-band buffers (protocol 5) are not supported".into()),
            _ => return Err("unknown opcode".into()),
        }
        Ok(None)
    }

    fn push_text(&mut self, n: usize, what: &str) -> Result<(), String> {
        let bytes = self.take(n)?;
        let text = std::str::from_utf8(bytes)
            .map_err(|_| format!("{what} is not UTF-8"))?
            .to_owned();
        self.push(Value::Str(text))
    }

    fn push_bytes(&mut self, n: usize) -> Result<(), String> {
        let bytes = self.take(n)?.to_vec();
        self.push(Value::Bytes(bytes))
    }

    fn extend_list(&mut self, list: ObjId, items: Vec<ObjId>) -> Result<(), String> {
        match &mut self.objects[list] {
            Value::List(existing) => {
                existing.extend(items);
                Ok(())
            }
            other => Err(format!("APPEND to a {}", other.kind())),
        }
    }

    fn extend_dict(&mut self, dict: ObjId, items: Vec<(ObjId, ObjId)>) -> Result<(), String> {
        match &mut self.objects[dict] {
            Value::Dict(existing) => {
                existing.extend(items);
                Ok(())
            }
            other => Err(format!("SETITEM on a {}", other.kind())),
        }
    }

    /// The items of a tuple (or list) object.
    fn items(&self, id: ObjId, what: &str) -> Result<Vec<ObjId>, String> {
        match &self.objects[id] {
            Value::Tuple(items) | Value::List(items) => Ok(items.clone()),
            other => Err(format!("{what} is a {}, not a tuple", other.kind())),
        }
    }

    /// `callable(*args)` for an allowed global, interpreted, never called.
    fn apply(&mut self, callable: ObjId, args: ObjId, op: &str) -> Result<ObjId, String> {
        let global = match &self.objects[callable] {
            Value::Global(global) => *global,
            other => return Err(format!("{op} on a {} refused", other.kind())),
        };
        let args = match &self.objects[args] {
            Value::Tuple(items) => items.clone(),
            other => {
                return Err(format!(
                    "{op} arguments are a {}, not a tuple",
                    other.kind()
                ));
            }
        };
        self.charge(args.len())?;
        let arity = |n: std::ops::RangeInclusive<usize>| -> Result<(), String> {
            if n.contains(&args.len()) {
                Ok(())
            } else {
                Err(format!(
                    "{global:?} takes {} to {} arguments, got {}",
                    n.start(),
                    n.end(),
                    args.len()
                ))
            }
        };
        match global {
            Global::RebuildTensor => {
                arity(4..=4)?;
                self.rebuild_tensor(&args, None)
            }
            Global::RebuildTensorV2 => {
                arity(6..=7)?;
                self.rebuild_tensor(&args, None)
            }
            Global::RebuildTensorV3 => {
                arity(7..=8)?;
                let dtype = match &self.objects[args[6]] {
                    Value::Global(Global::Dtype(dtype)) => *dtype,
                    other => {
                        return Err(format!("_rebuild_tensor_v3's dtype is a {}", other.kind()));
                    }
                };
                self.rebuild_tensor(&args, Some(dtype))
            }
            Global::RebuildParameter | Global::RebuildParameterWithState => {
                arity(if global == Global::RebuildParameter {
                    3..=3
                } else {
                    4..=4
                })?;
                match &self.objects[args[0]] {
                    Value::Tensor(_) => Ok(args[0]),
                    other => Err(format!("a Parameter's data is a {}", other.kind())),
                }
            }
            Global::RebuildFromTypeV2 => {
                arity(4..=4)?;
                if self.objects[args[1]] != Value::Global(Global::TensorType) {
                    return Err(
                        "_rebuild_from_type_v2 of a type other than torch.Tensor or \
                                torch.nn.parameter.Parameter refused"
                            .into(),
                    );
                }
                match &self.objects[args[0]] {
                    Value::Global(
                        Global::RebuildTensor | Global::RebuildTensorV2 | Global::RebuildTensorV3,
                    ) => {}
                    _ => {
                        return Err("_rebuild_from_type_v2 of a function other than a \
                                     _rebuild_tensor refused"
                            .into());
                    }
                }
                self.apply(args[0], args[2], op)
            }
            Global::OrderedDict => {
                arity(0..=1)?;
                let pairs = match args.first() {
                    None => Vec::new(),
                    Some(&items) => {
                        let items = self.items(items, "OrderedDict's argument")?;
                        self.charge(items.len() * 2)?;
                        let mut pairs = Vec::with_capacity(items.len());
                        for item in items {
                            match self.items(item, "an OrderedDict item")?.as_slice() {
                                &[key, value] => pairs.push((key, value)),
                                _ => return Err("an OrderedDict item is not a pair".into()),
                            }
                        }
                        pairs
                    }
                };
                self.new_object(Value::Dict(pairs))
            }
            Global::Set | Global::FrozenSet => {
                arity(0..=1)?;
                let items = match args.first() {
                    None => Vec::new(),
                    Some(&items) => match &self.objects[items] {
                        Value::List(v) | Value::Tuple(v) | Value::Set(v) => v.clone(),
                        other => return Err(format!("set of a {}", other.kind())),
                    },
                };
                self.charge(items.len())?;
                self.new_object(Value::Set(items))
            }
            Global::Size => {
                arity(0..=1)?;
                let items = match args.first() {
                    None => Vec::new(),
                    Some(&items) => self.items(items, "torch.Size's argument")?,
                };
                self.charge(items.len())?;
                self.new_object(Value::Tuple(items))
            }
            Global::Device => {
                arity(1..=2)?;
                let kind = self.str_of(args[0], "torch.device's type")?.to_owned();
                self.charge(kind.len())?;
                let text = match args.get(1).map(|&i| &self.objects[i]) {
                    None | Some(Value::None) => kind,
                    Some(Value::Int(index)) => format!("{kind}:{index}"),
                    Some(other) => return Err(format!("torch.device index is a {}", other.kind())),
                };
                self.new_object(Value::Str(text))
            }
            Global::CodecsEncode => {
                arity(1..=2)?;
                let text = self.str_of(args[0], "_codecs.encode's text")?;
                let encoding = match args.get(1) {
                    Some(&e) => self.str_of(e, "_codecs.encode's encoding")?,
                    None => "utf-8",
                };
                let bytes = match encoding.to_ascii_lowercase().replace('_', "-").as_str() {
                    "latin1" | "latin-1" | "iso-8859-1" => text
                        .chars()
                        .map(|c| u8::try_from(u32::from(c)).map_err(|_| "not latin-1"))
                        .collect::<Result<Vec<u8>, _>>()?,
                    "utf-8" | "utf8" => text.as_bytes().to_vec(),
                    _ => return Err(format!("_codecs.encode to `{}`", shorten(encoding))),
                };
                self.charge(bytes.len())?;
                self.new_object(Value::Bytes(bytes))
            }
            Global::TensorType | Global::StorageClass(_) | Global::Dtype(_) => Err(format!(
                "{op} on {global:?} refused (not a rebuild function)"
            )),
        }
    }

    /// `_rebuild_tensor*(storage, storage_offset, size, stride, ...)`; `dtype` is v3's.
    fn rebuild_tensor(
        &mut self,
        args: &[ObjId],
        dtype: Option<Result<DType, &'static str>>,
    ) -> Result<ObjId, String> {
        let storage = match &self.objects[args[0]] {
            Value::Storage(storage) => (**storage).clone(),
            other => return Err(format!("a tensor's storage is a {}", other.kind())),
        };
        let storage_offset = self.usize_of(args[1], "storage_offset")?;
        let shape = self.dims(args[2], "size")?;
        let strides = self.dims(args[3], "stride")?;
        let dtype = match (dtype, storage.element) {
            (Some(dtype), _) => dtype,
            (None, Element::Typed(dtype)) => Ok(dtype),
            (None, Element::Unread(name)) => Err(name),
            (None, Element::Untyped) => {
                return Err("a tensor on an UntypedStorage without a dtype".into());
            }
        };
        self.new_object(Value::Tensor(Box::new(Tensor {
            dtype,
            storage: storage.bytes,
            storage_offset,
            shape,
            strides,
        })))
    }

    fn usize_of(&self, id: ObjId, what: &str) -> Result<usize, String> {
        match &self.objects[id] {
            Value::Int(v) => {
                usize::try_from(*v).map_err(|_| format!("a tensor's {what} {v} is negative"))
            }
            Value::BigInt => Err(format!("a tensor's {what} exceeds 64 bits")),
            other => Err(format!("a tensor's {what} is a {}", other.kind())),
        }
    }

    fn dims(&self, id: ObjId, what: &str) -> Result<Vec<usize>, String> {
        let items = match &self.objects[id] {
            Value::Tuple(items) | Value::List(items) => items,
            other => return Err(format!("a tensor's {what} is a {}", other.kind())),
        };
        if items.len() > MAX_RANK {
            return Err(format!(
                "a tensor's {what} has {} dimensions (at most {MAX_RANK})",
                items.len()
            ));
        }
        items.iter().map(|&i| self.usize_of(i, what)).collect()
    }

    /// `('storage', storage_type, key, location, numel)` to a storage.
    fn persistent_load(&mut self, pid: ObjId) -> Result<Value, String> {
        let items = match &self.objects[pid] {
            Value::Tuple(items) if items.len() == 5 => items.clone(),
            other => {
                return Err(format!(
                    "persistent id is a {} of {}, not torch's ('storage', type, key, location, numel)",
                    other.kind(),
                    match other {
                        Value::Tuple(v) => v.len(),
                        _ => 1,
                    }
                ));
            }
        };
        if self.str_of(items[0], "persistent id's tag")? != "storage" {
            return Err("persistent id is not a 'storage' reference".into());
        }
        let element = match &self.objects[items[1]] {
            Value::Global(Global::StorageClass(element)) => *element,
            other => {
                return Err(format!(
                    "persistent id's storage type is a {}",
                    other.kind()
                ));
            }
        };
        // Field by field, so the key stays borrowed from `objects` while `load_storage` runs.
        let key = match &self.objects[items[2]] {
            Value::Str(key) => key,
            other => return Err(format!("persistent id's key is a {}", other.kind())),
        };
        let bytes = (self.load_storage)(key)?;
        Ok(Value::Storage(Box::new(Storage { element, bytes })))
    }
}

/// `[k0, v0, k1, v1, ...]` to pairs.
fn pairs(items: Vec<ObjId>) -> Result<Vec<(ObjId, ObjId)>, String> {
    if items.len() % 2 != 0 {
        return Err("odd number of items for a dict".into());
    }
    Ok(items.chunks_exact(2).map(|p| (p[0], p[1])).collect())
}

/// A memo index written as decimal text.
fn parse_index(line: &[u8]) -> Result<u64, String> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .ok_or_else(|| "memo index is not a decimal number".into())
}

/// A text line as a UTF-8 string (a GLOBAL's module or name).
fn text_line(line: &[u8]) -> Result<String, String> {
    String::from_utf8(line.to_vec()).map_err(|_| "GLOBAL name is not UTF-8".into())
}

/// Protocol 0's decimal integers: `Int`, or `BigInt` beyond 64 bits.
fn parse_decimal(line: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(line)
        .map_err(|_| "INT/LONG is not text")?
        .trim();
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "INT/LONG `{}` is not a decimal integer",
            shorten(text)
        ));
    }
    Ok(text.parse::<i64>().map_or(Value::BigInt, Value::Int))
}

/// LONG1/LONG4's little-endian two's-complement bytes.
fn long_le(bytes: &[u8]) -> Value {
    if bytes.is_empty() {
        return Value::Int(0);
    }
    let negative = bytes[bytes.len() - 1] & 0x80 != 0;
    let fill = if negative { 0xff } else { 0x00 };
    let mut wide = [fill; 8];
    let n = bytes.len().min(8);
    wide[..n].copy_from_slice(&bytes[..n]);
    let value = i64::from_le_bytes(wide);
    // Fits when every byte beyond the eighth is sign fill and the sign survives.
    if bytes.len() > 8 && (bytes[8..].iter().any(|&b| b != fill) || (value < 0) != negative) {
        return Value::BigInt;
    }
    Value::Int(value)
}

/// Protocol 0's STRING argument: a Python `repr` of a str, quotes included.
fn unquote_string(line: &[u8]) -> Result<Vec<u8>, String> {
    let inner = match line {
        [q, inner @ .., last] if (*q == b'\'' || *q == b'"') && last == q => inner,
        _ => return Err("STRING is not quoted".into()),
    };
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        let b = inner[i];
        i += 1;
        if b != b'\\' || i == inner.len() {
            out.push(b);
            continue;
        }
        let e = inner[i];
        i += 1;
        match e {
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'r' => out.push(b'\r'),
            b'a' => out.push(0x07),
            b'b' => out.push(0x08),
            b'f' => out.push(0x0c),
            b'v' => out.push(0x0b),
            b'\\' | b'\'' | b'"' => out.push(e),
            b'\n' => {}
            b'x' => {
                let hex = inner.get(i..i + 2).ok_or("STRING has a short \\x escape")?;
                let text = std::str::from_utf8(hex).map_err(|_| "bad \\x escape")?;
                out.push(u8::from_str_radix(text, 16).map_err(|_| "bad \\x escape")?);
                i += 2;
            }
            b'0'..=b'7' => {
                let mut value = u32::from(e - b'0');
                for _ in 0..2 {
                    match inner.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push((value & 0xff) as u8);
            }
            _ => {
                out.push(b'\\');
                out.push(e);
            }
        }
    }
    Ok(out)
}

/// Protocol 0's UNICODE argument: latin-1 bytes with `\uXXXX` and `\UXXXXXXXX` escapes.
fn raw_unicode_escape(line: &[u8]) -> Result<String, String> {
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < line.len() {
        let b = line[i];
        let width = match (b, line.get(i + 1)) {
            (b'\\', Some(b'u')) => 4,
            (b'\\', Some(b'U')) => 8,
            _ => {
                out.push(char::from(b));
                i += 1;
                continue;
            }
        };
        let hex = line
            .get(i + 2..i + 2 + width)
            .ok_or("UNICODE has a short escape")?;
        let code = std::str::from_utf8(hex)
            .ok()
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .and_then(char::from_u32)
            .ok_or("UNICODE has a bad escape")?;
        out.push(code);
        i += 2 + width;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_storage(key: &str) -> Result<Range<usize>, String> {
        Err(format!("no storage {key}"))
    }

    fn run(data: &[u8]) -> Result<Pickle, String> {
        unpickle(data, &mut no_storage)
    }

    #[test]
    fn malicious_globals_are_refused_by_name() {
        let cases: [(&[u8], &str); 4] = [
            (b"cposix\nsystem\n(S'touch /tmp/pwned'\ntR.", "posix.system"),
            (b"cbuiltins\neval\n.", "builtins.eval"),
            (b"\x80\x04\x8c\x02os\x8c\x06system\x93.", "os.system"),
            (b"csubprocess\nPopen\n.", "subprocess.Popen"),
        ];
        for (data, name) in cases {
            let err = run(data).unwrap_err();
            assert!(
                err.contains(&format!("refused pickle global `{name}`")),
                "{err}"
            );
            assert!(err.contains("_rebuild_tensor_v2"), "{err}");
        }
    }

    #[test]
    fn containers_memo_and_scalars() {
        // {'a': [1, 2**40, -3], 'b': 'x', 'c': (1.5, True, None)} plus a memo GET of the list.
        let data = b"\x80\x02}q\x00(X\x01\x00\x00\x00a]q\x01(K\x01\x8a\x06\x00\x00\x00\x00\
            \x00\x01J\xfd\xff\xff\xffeX\x01\x00\x00\x00bX\x01\x00\x00\x00xX\x01\x00\x00\x00c\
            G?\xf8\x00\x00\x00\x00\x00\x00\x88N\x87X\x01\x00\x00\x00dh\x01u.";
        let p = run(data).unwrap();
        let Value::Dict(pairs) = p.get(p.root) else {
            panic!()
        };
        assert_eq!(pairs.len(), 4);
        let Value::List(list) = p.get(pairs[0].1) else {
            panic!()
        };
        let values: Vec<_> = list.iter().map(|&i| p.get(i).clone()).collect();
        assert_eq!(
            values,
            vec![Value::Int(1), Value::Int(1 << 40), Value::Int(-3)]
        );
        // The memo GET sees the list filled after it was memoized.
        assert_eq!(pairs[3].1, pairs[0].1);
        let Value::Tuple(t) = p.get(pairs[2].1) else {
            panic!()
        };
        assert_eq!(p.get(t[0]), &Value::Float(1.5));
        assert_eq!(p.get(t[1]), &Value::Bool(true));
    }

    #[test]
    fn protocol_zero_text_forms() {
        let data = b"(lp0\nI42\naL-7L\naF2.5\naS'a\\'b\\n'\naVx\\u00e9\naI01\na.";
        let p = run(data).unwrap();
        let Value::List(items) = p.get(p.root) else {
            panic!()
        };
        let values: Vec<_> = items.iter().map(|&i| p.get(i).clone()).collect();
        assert_eq!(
            values,
            vec![
                Value::Int(42),
                Value::Int(-7),
                Value::Float(2.5),
                Value::Str("a'b\n".into()),
                Value::Str("x\u{e9}".into()),
                Value::Bool(true),
            ]
        );
    }

    #[test]
    fn tensor_rebuild_through_persistent_id() {
        let data = b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storage\
            ctorch\nHalfStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x06tQK\x01K\x02K\x02\
            \x86K\x01K\x02\x86\x89ccollections\nOrderedDict\n)RtR.";
        let mut seen = Vec::new();
        let p = unpickle(data, &mut |key: &str| {
            seen.push(key.to_owned());
            Ok(100..112)
        })
        .unwrap();
        assert_eq!(seen, ["0"]);
        let Value::Tensor(t) = p.get(p.root) else {
            panic!("{:?}", p.get(p.root))
        };
        assert_eq!(t.dtype, Ok(DType::Float16));
        assert_eq!((t.storage.clone(), t.storage_offset), (100..112, 1));
        assert_eq!(
            (t.shape.as_slice(), t.strides.as_slice()),
            (&[2, 2][..], &[1, 2][..])
        );
    }

    #[test]
    fn hostile_shapes_never_panic() {
        // Deep MARK nesting, memo misses, truncation, huge claimed lengths, odd dicts.
        let deep: Vec<u8> = std::iter::repeat_n(b'(', 100_000).collect();
        assert!(run(&deep).unwrap_err().contains("deeper than 1000"));
        assert!(
            run(b"h\x05.")
                .unwrap_err()
                .contains("memo GET of missing index 5")
        );
        assert!(run(b"X\xff\xff\xff\x7fab").unwrap_err().contains("claims"));
        assert!(
            run(b"\x8d\xff\xff\xff\xff\xff\xff\xff\xff")
                .unwrap_err()
                .contains("claims")
        );
        assert!(run(b"(K\x01d.").unwrap_err().contains("odd number"));
        assert!(
            run(b"K\x01K\x02R.")
                .unwrap_err()
                .contains("REDUCE on a int")
        );
        assert!(run(b"(.").unwrap_err().contains("underflow"));
        assert!(run(b"").unwrap_err().contains("truncated"));
        // A list nested 100k levels deep by APPEND: built fine, walkers bound their depth.
        let mut nested = b"]".repeat(100_000);
        nested.extend(b"a".repeat(99_999));
        nested.push(b'.');
        assert!(run(&nested).is_ok());
    }

    #[test]
    fn copies_of_memoized_objects_are_budgeted() {
        // A 1000-item list, then set(list) 10000 times from the memo: a bomb.
        let mut data = b"]q\x00(".to_vec();
        data.extend(b"K\x01".repeat(1000));
        data.extend(b"e0");
        for _ in 0..10_000 {
            data.extend(b"c__builtin__\nset\nh\x00\x85R0");
        }
        data.extend(b"N.");
        assert!(run(&data).unwrap_err().contains("expands"));
    }

    #[test]
    fn longs_decode_two_complement() {
        assert_eq!(long_le(&[0xff]), Value::Int(-1));
        assert_eq!(long_le(&[0x00, 0x80]), Value::Int(-32768));
        assert_eq!(long_le(&[0, 0, 0, 0, 0, 0, 0, 0x40]), Value::Int(1 << 62));
        assert_eq!(long_le(&[0, 0, 0, 0, 0, 0, 0, 0x80, 0x00]), Value::BigInt);
        assert_eq!(long_le(&[0xff; 12]), Value::Int(-1));
        assert_eq!(long_le(&[0, 0, 0, 0, 0, 0, 0, 0, 1]), Value::BigInt);
    }
}
