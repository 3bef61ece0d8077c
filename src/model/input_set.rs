//! One captured operator input set read back from its `.pt` file: the values the probe's
//! `capture_inputs(stage, **named)` saved (docs/manifest.md "input_sets[]"), typed, in call
//! order, for replay.
//!
//! The file is the torch.save zip archive `inputs/<stage>#<N>.pt` that the manifest entry
//! [`dump::InputSet`](crate::model::dump::InputSet) names; this module reads its contents.
//! It runs no pickle code: the archive goes through the same allow-listed pickle machine as
//! every other `.pt` file ([`read_pickle`]), and the object it holds must be the probe's
//! encoding (assets/dump_probe.py `_input_value`):
//!
//! | saved | read as |
//! |---|---|
//! | `{"__dump_probe_tensor__": 1, "span", "dtype", "shape", "stride", "offset_in_span", "storage_offset", "device", "requires_grad"}` | [`InputValue::Tensor`] |
//! | `{"__dump_probe_dtype__": name}` | [`InputValue::DType`] |
//! | `{"__dump_probe_device__": name}` | [`InputValue::Device`] |
//! | `{"__dump_probe_seq__": "list"\|"tuple", "items": [...]}` | [`InputValue::List`], [`InputValue::Tuple`] |
//! | `{"__dump_probe_dict__": 1, "items": {...}}` | [`InputValue::Dict`] |
//! | `{"__dump_probe_repr__": text}` | [`InputValue::Repr`] |
//! | int, float, bool, None, str | the scalar variants |
//!
//! A tensor keeps the bytes of its span (the storage elements the view can touch, copied out
//! of the file) with the exact dtype, shape, stride and offset into the span, so a replay
//! rebuilds the view with `as_strided` and sees the same `stride()` the operator saw.

use std::path::{Path, PathBuf};

use crate::model::io::FileBytes;
use crate::model::tensor::pickle::{ObjId, Pickle, Value, shorten};
use crate::model::tensor::{DType, TensorView, read_pickle};

/// Deepest nesting of lists, tuples and dicts inside one argument.
pub const MAX_DEPTH: usize = 64;
/// Most values (scalars, containers, tensors) one input set may hold, shared values counted
/// each time they are reached.
pub const MAX_VALUES: usize = 1 << 20;
/// The span bytes copied out of a file stay below this many times its size.
pub const MAX_COPY_FACTOR: usize = 4;

/// A captured input set could not be read: names the file and the problem.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("input set {path}: {problem}")]
pub struct InputSetError {
    /// The `.pt` file as given.
    pub path: PathBuf,
    /// What is wrong, in words: "cannot read: No such file or directory", "damaged zip archive
    /// (truncated or not a torch.save file): ...", "archive/data.pkl: pickle ...: refused pickle
    /// global `posix.system` ...", "not an input set: ...".
    pub problem: String,
}

/// The arguments of one operator call, in the order `capture_inputs` received them.
#[derive(Debug, Clone, PartialEq)]
pub struct InputSet {
    /// The file it was read from.
    pub path: PathBuf,
    /// (argument name, value), in call order (Python keeps keyword order).
    pub args: Vec<(String, InputValue)>,
}

impl InputSet {
    /// Reads the input set saved in `path`.
    ///
    /// # Errors
    /// [`InputSetError`] naming the file: missing or unreadable, not a torch.save zip archive,
    /// truncated or damaged, a pickle global outside torch's tensor-rebuild allow-list, or an
    /// object that is not the probe's input-set encoding (the problem says which argument and
    /// which field).
    pub fn read(path: &Path) -> Result<InputSet, InputSetError> {
        let error = |problem: String| InputSetError {
            path: path.to_path_buf(),
            problem,
        };
        let bytes = FileBytes::read(path, true).map_err(|e| error(format!("cannot read: {e}")))?;
        Self::from_bytes(&bytes, path)
    }

    /// Reads an input set held in memory; `path` only names it in errors.
    ///
    /// # Errors
    /// As [`InputSet::read`], less the file system.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<InputSet, InputSetError> {
        let error = |problem: String| InputSetError {
            path: path.to_path_buf(),
            problem,
        };
        if bytes.is_empty() {
            return Err(error("empty file: not a torch.save archive".into()));
        }
        if !bytes.starts_with(b"PK") {
            return Err(error(
                "not a torch.save zip archive (it starts with PK); an input set is the .pt file \
                 capture_inputs writes"
                    .into(),
            ));
        }
        let pickle = read_pickle(bytes).map_err(error)?;
        let mut decoder = Decoder {
            pickle: &pickle,
            bytes,
            values: 0,
            copied: 0,
        };
        let args = decoder.root().map_err(error)?;
        Ok(InputSet {
            path: path.to_path_buf(),
            args,
        })
    }

    /// The argument named `name`.
    pub fn get(&self, name: &str) -> Option<&InputValue> {
        self.args.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

/// One argument value, as the probe saved it.
#[derive(Debug, Clone, PartialEq)]
pub enum InputValue {
    /// A tensor: layout and the bytes of its span.
    Tensor(CapturedTensor),
    /// A Python int (within `i64`).
    Int(i64),
    /// A Python float.
    Float(f64),
    /// A Python bool.
    Bool(bool),
    /// Python's `None`.
    None,
    /// A Python str.
    Str(String),
    /// A `torch.dtype`, by torch's name without `torch.` (`"float16"`; also names dumpview
    /// does not read, such as `"complex64"`).
    DType(String),
    /// A `torch.device`, as `str(device)` (`"cpu"`, `"cuda:0"`, `"npu:3"`).
    Device(String),
    /// A Python list.
    List(Vec<InputValue>),
    /// A Python tuple.
    Tuple(Vec<InputValue>),
    /// A Python dict, keys as `str(key)`, in insertion order.
    Dict(Vec<(String, InputValue)>),
    /// A value of another type, kept as its `repr()` only (the probe warns when it does this).
    Repr(String),
}

impl InputValue {
    /// A short name of the value's kind, as the manifest's `kind` field spells it: `"tensor"`,
    /// `"int"`, `"float"`, `"bool"`, `"none"`, `"str"`, `"dtype"`, `"device"`, `"list"`,
    /// `"tuple"`, `"dict"`, `"repr"`.
    pub fn kind(&self) -> &'static str {
        match self {
            InputValue::Tensor(_) => "tensor",
            InputValue::Int(_) => "int",
            InputValue::Float(_) => "float",
            InputValue::Bool(_) => "bool",
            InputValue::None => "none",
            InputValue::Str(_) => "str",
            InputValue::DType(_) => "dtype",
            InputValue::Device(_) => "device",
            InputValue::List(_) => "list",
            InputValue::Tuple(_) => "tuple",
            InputValue::Dict(_) => "dict",
            InputValue::Repr(_) => "repr",
        }
    }
}

/// A captured tensor argument: the exact layout the operator received and the bytes of the
/// storage span it reads.
///
/// The view is `torch.as_strided(span, shape, stride, offset_in_span)`; its absolute
/// `storage_offset` in the original storage is recorded, not reproduced.
#[derive(Debug, Clone, PartialEq)]
pub struct CapturedTensor {
    /// Element type.
    pub dtype: DType,
    /// Logical shape, in elements per dimension (empty for a 0-d tensor).
    pub shape: Vec<usize>,
    /// Strides in elements, one per dimension.
    pub stride: Vec<usize>,
    /// Offset of element 0 from the start of [`CapturedTensor::span`], in elements.
    pub offset_in_span: usize,
    /// Offset of element 0 from the start of the original storage, in elements (recorded).
    pub storage_offset: usize,
    /// The device it lived on when captured (`"cpu"`, `"cuda:0"`, `"npu:0"`).
    pub device: String,
    /// Whether it required grad when captured.
    pub requires_grad: bool,
    /// The span's elements, little-endian, contiguous: `span.len()` is a multiple of
    /// `dtype.size()`, and the view (`offset_in_span`, `shape`, `stride`) lies inside it.
    pub span: Vec<u8>,
}

impl CapturedTensor {
    /// Number of elements of the view (1 for a 0-d tensor).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Number of elements of the span.
    pub fn span_len(&self) -> usize {
        self.span.len() / self.dtype.size()
    }

    /// The view over the span, for reading values in logical order.
    pub fn view(&self) -> TensorView<'_> {
        TensorView::new(
            self.dtype,
            self.shape.clone(),
            self.stride.clone(),
            self.offset_in_span,
            &self.span,
        )
        .expect("Decoder::tensor checked the layout against the span")
    }

    /// The view's values in logical (C) order, as `f64` (exact except int64 beyond 2^53).
    pub fn values(&self) -> Vec<f64> {
        let view = self.view();
        (0..view.numel()).map(|i| view.get(i)).collect()
    }
}

/// The walk from the unpickled root to typed values.
struct Decoder<'p> {
    pickle: &'p Pickle,
    bytes: &'p [u8],
    values: usize,
    /// Span bytes copied so far.
    copied: usize,
}

impl Decoder<'_> {
    /// The root: a dict of argument name -> value.
    fn root(&mut self) -> Result<Vec<(String, InputValue)>, String> {
        let pickle = self.pickle;
        let Value::Dict(pairs) = pickle.get(pickle.root) else {
            return Err(format!(
                "not an input set: the saved object is a {}, not a dict of argument name -> value",
                pickle.get(pickle.root).kind()
            ));
        };
        let mut args = Vec::with_capacity(pairs.len());
        for &(key, value) in pairs {
            let Value::Str(name) = pickle.get(key) else {
                return Err(format!(
                    "not an input set: an argument name is a {}, not a str",
                    pickle.get(key).kind()
                ));
            };
            let value = self
                .value(value, 0)
                .map_err(|e| format!("not an input set: argument `{}`: {e}", shorten(name)))?;
            args.push((name.clone(), value));
        }
        Ok(args)
    }

    fn value(&mut self, id: ObjId, depth: usize) -> Result<InputValue, String> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "nested deeper than {MAX_DEPTH} levels (or holds a cycle)"
            ));
        }
        self.values += 1;
        if self.values > MAX_VALUES {
            return Err(format!("more than {MAX_VALUES} values"));
        }
        let pickle = self.pickle;
        Ok(match pickle.get(id) {
            Value::None => InputValue::None,
            Value::Bool(b) => InputValue::Bool(*b),
            Value::Int(i) => InputValue::Int(*i),
            Value::BigInt => return Err("an int outside the 64-bit range".into()),
            Value::Float(f) => InputValue::Float(*f),
            Value::Str(s) => InputValue::Str(s.clone()),
            Value::Dict(pairs) => self.marked(pairs, depth)?,
            Value::Tensor(_) => {
                return Err(
                    "a bare tensor: the probe saves tensors as {\"__dump_probe_tensor__\": 1, \
                     \"span\": ..., ...}"
                        .into(),
                );
            }
            other => {
                return Err(format!(
                    "a {} where the probe saves only its own encoding (tensors, dtypes, devices, \
                     sequences and dicts as marked dicts) or plain scalars",
                    other.kind()
                ));
            }
        })
    }

    /// A dict of the probe's encoding, told by its `__dump_probe_*__` key.
    fn marked(&mut self, pairs: &[(ObjId, ObjId)], depth: usize) -> Result<InputValue, String> {
        let pickle = self.pickle;
        let marker = pairs.iter().find_map(|&(k, _)| match pickle.get(k) {
            Value::Str(s) if s.starts_with("__dump_probe_") => Some(s.as_str()),
            _ => None,
        });
        let text = |name: &str| -> Result<String, String> {
            match self.field(pairs, name)? {
                Value::Str(s) => Ok(s.clone()),
                other => Err(format!("`{name}` is a {}, not a str", other.kind())),
            }
        };
        match marker {
            Some("__dump_probe_tensor__") => self.tensor(pairs).map(InputValue::Tensor),
            Some("__dump_probe_dtype__") => text("__dump_probe_dtype__").map(InputValue::DType),
            Some("__dump_probe_device__") => text("__dump_probe_device__").map(InputValue::Device),
            Some("__dump_probe_repr__") => text("__dump_probe_repr__").map(InputValue::Repr),
            Some("__dump_probe_seq__") => {
                let kind = text("__dump_probe_seq__")?;
                let items = match self.field(pairs, "items")? {
                    Value::List(items) | Value::Tuple(items) => items.clone(),
                    other => return Err(format!("`items` is a {}, not a list", other.kind())),
                };
                let items = items
                    .iter()
                    .enumerate()
                    .map(|(i, &item)| {
                        self.value(item, depth + 1)
                            .map_err(|e| format!("item {i}: {e}"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                match kind.as_str() {
                    "list" => Ok(InputValue::List(items)),
                    "tuple" => Ok(InputValue::Tuple(items)),
                    other => Err(format!(
                        "sequence kind `{}`, not list or tuple",
                        shorten(other)
                    )),
                }
            }
            Some("__dump_probe_dict__") => {
                let items = match self.field(pairs, "items")? {
                    Value::Dict(items) => items.clone(),
                    other => return Err(format!("`items` is a {}, not a dict", other.kind())),
                };
                let mut out = Vec::with_capacity(items.len());
                for (key, value) in items {
                    let Value::Str(key) = pickle.get(key) else {
                        return Err(format!(
                            "a dict key is a {}, not a str",
                            pickle.get(key).kind()
                        ));
                    };
                    let value = self
                        .value(value, depth + 1)
                        .map_err(|e| format!("key `{}`: {e}", shorten(key)))?;
                    out.push((key.clone(), value));
                }
                Ok(InputValue::Dict(out))
            }
            Some(other) => Err(format!("unknown probe encoding `{}`", shorten(other))),
            None => Err(
                "a plain dict: the probe saves dicts as {\"__dump_probe_dict__\": 1, \"items\": ...}"
                    .into(),
            ),
        }
    }

    /// The probe's tensor encoding: the span tensor and the view's layout over it.
    fn tensor(&mut self, pairs: &[(ObjId, ObjId)]) -> Result<CapturedTensor, String> {
        let pickle = self.pickle;
        let Value::Tensor(span) = self.field(pairs, "span")? else {
            return Err("`span` is not a tensor".into());
        };
        let span_dtype = span.dtype.map_err(|name| {
            format!("its span holds torch.{name} elements, a dtype dumpview does not read")
        })?;
        let dtype = match self.field(pairs, "dtype")? {
            Value::Str(name) => DType::from_name(name)
                .ok_or_else(|| format!("dtype `{}` is not read by dumpview", shorten(name)))?,
            other => return Err(format!("`dtype` is a {}, not a str", other.kind())),
        };
        if dtype != span_dtype {
            return Err(format!("dtype {dtype} but its span holds {span_dtype}"));
        }
        // The span is a 1-D contiguous run of storage elements (`_storage_span`).
        let span_len = match (span.shape.as_slice(), span.strides.as_slice()) {
            ([n], [1]) | ([n @ (0 | 1)], [_]) => *n,
            (shape, strides) => {
                return Err(format!(
                    "`span` has shape {shape:?} and stride {strides:?}, not a 1-D contiguous run"
                ));
            }
        };
        let start = span
            .storage_offset
            .checked_mul(dtype.size())
            .and_then(|s| s.checked_add(span.storage.start));
        let end = span_len
            .checked_mul(dtype.size())
            .zip(start)
            .and_then(|(len, s)| s.checked_add(len));
        let bytes = match (start, end) {
            (Some(s), Some(e)) if e <= span.storage.end && e <= self.bytes.len() => {
                &self.bytes[s..e]
            }
            _ => {
                return Err(format!(
                    "`span` ({span_len} elements at element {}) extends beyond its storage ({} bytes)",
                    span.storage_offset,
                    span.storage.len()
                ));
            }
        };
        let dims = |name: &str| -> Result<Vec<usize>, String> {
            let items = match self.field(pairs, name)? {
                Value::List(items) | Value::Tuple(items) => items,
                other => return Err(format!("`{name}` is a {}, not a list", other.kind())),
            };
            if items.len() > crate::model::tensor::pickle::MAX_RANK {
                return Err(format!("`{name}` has {} dimensions", items.len()));
            }
            items
                .iter()
                .map(|&i| non_negative(pickle.get(i)))
                .collect::<Option<_>>()
                .ok_or_else(|| format!("`{name}` holds a value that is not an int >= 0"))
        };
        let shape = dims("shape")?;
        let stride = dims("stride")?;
        let index = |name: &str| -> Result<usize, String> {
            non_negative(self.field(pairs, name)?)
                .ok_or_else(|| format!("`{name}` is not an int >= 0"))
        };
        let offset_in_span = index("offset_in_span")?;
        let storage_offset = index("storage_offset")?;
        let device = match self.field(pairs, "device")? {
            Value::Str(s) => s.clone(),
            other => return Err(format!("`device` is a {}, not a str", other.kind())),
        };
        let requires_grad = match self.field(pairs, "requires_grad")? {
            Value::Bool(b) => *b,
            other => return Err(format!("`requires_grad` is a {}, not a bool", other.kind())),
        };
        TensorView::new(dtype, shape.clone(), stride.clone(), offset_in_span, bytes)
            .map_err(|e| format!("the view does not fit its span: {e}"))?;
        // A pickle may name one large span from many places; the copies stay bounded by the
        // file's own size.
        self.copied = self.copied.saturating_add(bytes.len());
        if self.copied > MAX_COPY_FACTOR.saturating_mul(self.bytes.len()) {
            return Err(format!(
                "its spans, copied, exceed {MAX_COPY_FACTOR} times the file's size ({} bytes): \
                 one storage named from many places",
                self.bytes.len()
            ));
        }
        Ok(CapturedTensor {
            dtype,
            shape,
            stride,
            offset_in_span,
            storage_offset,
            device,
            requires_grad,
            span: bytes.to_vec(),
        })
    }

    /// The value under string key `name` of a probe dict.
    fn field(&self, pairs: &[(ObjId, ObjId)], name: &str) -> Result<&Value, String> {
        let pickle = self.pickle;
        pairs
            .iter()
            .find(|&&(k, _)| matches!(pickle.get(k), Value::Str(s) if s == name))
            .map(|&(_, v)| pickle.get(v))
            .ok_or_else(|| format!("no `{name}` field"))
    }
}

fn non_negative(value: &Value) -> Option<usize> {
    match value {
        Value::Int(v) => usize::try_from(*v).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Cursor, Write};

    use zip::CompressionMethod;
    use zip::write::{SimpleFileOptions, ZipWriter};

    use super::*;

    fn example(dump: &str, stage: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("assets/examples")
            .join(dump)
            .join("rank0/match1-occ1/inputs")
            .join(format!("{stage}#1.pt"))
    }

    fn tensor<'a>(set: &'a InputSet, name: &str) -> &'a CapturedTensor {
        match set.get(name) {
            Some(InputValue::Tensor(t)) => t,
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn rms_norm_input_set_of_the_float32_example() {
        let set = InputSet::read(&example("llama_kv_alias/a", "layers.0.input_norm")).unwrap();
        let names: Vec<_> = set.args.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["x", "weight", "eps"]);
        let x = tensor(&set, "x");
        assert_eq!(
            (x.dtype, x.shape.as_slice(), x.stride.as_slice()),
            (DType::Float32, &[12, 256][..], &[256, 1][..])
        );
        assert_eq!((x.offset_in_span, x.storage_offset), (0, 0));
        assert_eq!((x.device.as_str(), x.requires_grad), ("cpu", false));
        assert_eq!(x.span.len(), 12 * 256 * 4);
        assert_eq!(x.values().len(), 12 * 256);
        assert!(x.values().iter().all(|v| v.is_finite()));
        let w = tensor(&set, "weight");
        assert_eq!(
            (w.shape.as_slice(), w.stride.as_slice()),
            (&[256][..], &[1][..])
        );
        assert_eq!(set.get("eps"), Some(&InputValue::Float(1e-6)));
    }

    #[test]
    fn rope_input_set_of_the_float16_example() {
        let set = InputSet::read(&example("llama_fp16_overflow/b", "layers.0.rope")).unwrap();
        let names: Vec<_> = set.args.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["q", "k", "cos", "sin", "positions"]);
        let layouts: Vec<_> = set
            .args
            .iter()
            .map(|(n, _)| {
                let t = tensor(&set, n);
                (t.dtype, t.shape.clone(), t.stride.clone())
            })
            .collect();
        assert_eq!(
            layouts,
            [
                (DType::Float16, vec![12, 4, 64], vec![256, 64, 1]),
                (DType::Float16, vec![12, 2, 64], vec![128, 64, 1]),
                (DType::Float16, vec![12, 64], vec![64, 1]),
                (DType::Float16, vec![12, 64], vec![64, 1]),
                (DType::Int64, vec![12], vec![1]),
            ]
        );
        let positions = tensor(&set, "positions").values();
        assert_eq!(positions, (0..12).map(f64::from).collect::<Vec<_>>());
        // cos(0) = 1 at position 0.
        assert_eq!(tensor(&set, "cos").values()[0], 1.0);
    }

    /// A stored zip holding `archive/data.pkl` = `pickle` and the given storages.
    fn archive(pickle: &[u8], storages: &[(&str, &[u8])]) -> Vec<u8> {
        let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
        let options = SimpleFileOptions::default().compression_method(CompressionMethod::Stored);
        zip.start_file("archive/data.pkl", options).unwrap();
        zip.write_all(pickle).unwrap();
        for (key, bytes) in storages {
            zip.start_file(format!("archive/data/{key}"), options)
                .unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    #[test]
    fn a_hostile_pickle_is_refused_naming_the_file() {
        let evil = archive(b"\x80\x02cposix\nsystem\n(S'touch /tmp/pwned'\ntR.", &[]);
        let path = Path::new("inputs/layers.0.rope#1.pt");
        let err = InputSet::from_bytes(&evil, path).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("input set inputs/layers.0.rope#1.pt: "),
            "{text}"
        );
        assert!(
            text.contains("refused pickle global `posix.system`"),
            "{text}"
        );
    }

    #[test]
    fn missing_truncated_and_foreign_files_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("layers.0.input_norm#7.pt");
        let err = InputSet::read(&missing).unwrap_err().to_string();
        assert!(
            err.contains("layers.0.input_norm#7.pt: cannot read"),
            "{err}"
        );

        let good = std::fs::read(example("llama_kv_alias/a", "layers.0.input_norm")).unwrap();
        let truncated = dir.path().join("truncated.pt");
        std::fs::write(&truncated, &good[..good.len() / 2]).unwrap();
        let err = InputSet::read(&truncated).unwrap_err().to_string();
        assert!(err.contains("truncated.pt: damaged zip archive"), "{err}");

        let path = Path::new("x.pt");
        let err = InputSet::from_bytes(b"\x80\x02N.", path).unwrap_err();
        assert!(
            err.problem.contains("not a torch.save zip archive"),
            "{err}"
        );
        // A torch.save of a list, and of a dict holding a bare tensor: not input sets.
        let err = InputSet::from_bytes(&archive(b"\x80\x02].", &[]), path).unwrap_err();
        assert!(
            err.problem
                .contains("not an input set: the saved object is a list"),
            "{err}"
        );
        let bare = b"\x80\x02}X\x01\x00\x00\x00xctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\
            \x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x01tQK\
            \x00K\x01\x85K\x01\x85\x89NtRs.";
        let err = InputSet::from_bytes(&archive(bare, &[("0", &[0; 4])]), path).unwrap_err();
        assert!(err.problem.contains("argument `x`: a bare tensor"), "{err}");
    }

    #[test]
    fn scalars_sequences_dicts_and_layouts() {
        // {"a": {"__dump_probe_seq__": "tuple", "items": [1, 2.5, None, True]},
        //  "d": {"__dump_probe_dict__": 1, "items": {"k": "v"}},
        //  "t": {"__dump_probe_dtype__": "bfloat16"},
        //  "v": tensor [2] stride [2] offset_in_span 1 over a 4-element float32 span}
        fn text(s: &str) -> Vec<u8> {
            let mut out = vec![b'X'];
            out.extend((s.len() as u32).to_le_bytes());
            out.extend(s.as_bytes());
            out
        }
        let mut p = b"\x80\x02}(".to_vec();
        p.extend(text("a"));
        p.extend(b"}(");
        p.extend(text("__dump_probe_seq__"));
        p.extend(text("tuple"));
        p.extend(text("items"));
        p.extend(b"](K\x01G@\x04\x00\x00\x00\x00\x00\x00N\x88eu");
        p.extend(text("d"));
        p.extend(b"}(");
        p.extend(text("__dump_probe_dict__"));
        p.extend(b"K\x01");
        p.extend(text("items"));
        p.extend(b"}(");
        p.extend(text("k"));
        p.extend(text("v"));
        p.extend(b"uu");
        p.extend(text("t"));
        p.extend(b"}(");
        p.extend(text("__dump_probe_dtype__"));
        p.extend(text("bfloat16"));
        p.extend(b"u");
        p.extend(text("v"));
        p.extend(b"}(");
        p.extend(text("__dump_probe_tensor__"));
        p.extend(b"K\x01");
        p.extend(text("span"));
        p.extend(b"ctorch._utils\n_rebuild_tensor_v2\n((");
        p.extend(text("storage"));
        p.extend(b"ctorch\nFloatStorage\n");
        p.extend(text("0"));
        p.extend(text("cpu"));
        p.extend(b"K\x05tQK\x01K\x04\x85K\x01\x85\x89NtR");
        for (name, value) in [
            ("dtype", text("float32")),
            ("shape", b"]K\x02a".to_vec()),
            ("stride", b"]K\x02a".to_vec()),
            ("offset_in_span", b"K\x01".to_vec()),
            ("storage_offset", b"K\x09".to_vec()),
            ("device", text("cuda:1")),
            ("requires_grad", b"\x88".to_vec()),
        ] {
            p.extend(text(name));
            p.extend(value);
        }
        p.extend(b"uu.");
        // Storage elements 0..5; the span starts at element 1: [1, 2, 3, 4].
        let storage: Vec<u8> = (0..5).flat_map(|v| (v as f32).to_le_bytes()).collect();
        let set =
            InputSet::from_bytes(&archive(&p, &[("0", &storage)]), Path::new("s.pt")).unwrap();
        assert_eq!(
            set.get("a"),
            Some(&InputValue::Tuple(vec![
                InputValue::Int(1),
                InputValue::Float(2.5),
                InputValue::None,
                InputValue::Bool(true),
            ]))
        );
        assert_eq!(
            set.get("d"),
            Some(&InputValue::Dict(vec![(
                "k".into(),
                InputValue::Str("v".into())
            )]))
        );
        assert_eq!(set.get("t"), Some(&InputValue::DType("bfloat16".into())));
        let v = tensor(&set, "v");
        assert_eq!(
            (v.span_len(), v.offset_in_span, v.storage_offset),
            (4, 1, 9)
        );
        assert_eq!((v.device.as_str(), v.requires_grad), ("cuda:1", true));
        // Elements 1 and 3 of the span [1, 2, 3, 4].
        assert_eq!(v.values(), [2.0, 4.0]);
    }
}
