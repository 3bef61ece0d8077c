//! What the opcodes that would call something (`REDUCE`, `NEWOBJ`, `NEWOBJ_EX`) and the
//! persistent ids (`BINPERSID`) build: an allowed global is interpreted, never called — a
//! tensor from torch's rebuild functions, a dict, set, tuple, string or bytes from the
//! containers — and a persistent id resolves to a storage through the caller's `load_storage`.

use super::machine::Machine;
use super::{Element, Global, MAX_RANK, ObjId, Storage, Tensor, Value, shorten};
use crate::model::tensor::read::DType;

/// torch's names of the complex dtypes read as their real view (see `Tensor::complex`).
const COMPLEX64: &str = "complex64";
const COMPLEX128: &str = "complex128";

impl Machine<'_, '_> {
    /// `callable(*args)` for an allowed global, interpreted, never called.
    pub(super) fn apply(
        &mut self,
        callable: ObjId,
        args: ObjId,
        op: &str,
    ) -> Result<ObjId, String> {
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
        let mut storage_offset = self.usize_of(args[1], "storage_offset")?;
        let mut shape = self.dims(args[2], "size")?;
        let mut strides = self.dims(args[3], "stride")?;
        let dtype = match (dtype, storage.element) {
            (Some(Err("complex64" | "cfloat")), _) => Err(COMPLEX64),
            (Some(Err("complex128" | "cdouble")), _) => Err(COMPLEX128),
            (Some(dtype), _) => dtype,
            (None, Element::Typed(dtype)) => Ok(dtype),
            (None, Element::Complex(DType::Float64)) => Err(COMPLEX128),
            (None, Element::Complex(_)) => Err(COMPLEX64),
            (None, Element::Unread(name)) => Err(name),
            (None, Element::Untyped) => {
                return Err("a tensor on an UntypedStorage without a dtype".into());
            }
        };
        // A complex tensor is described as its real view (torch.view_as_real): the component
        // dtype, a last dimension of 2, and every stride and the offset in components.
        let complex = matches!(dtype, Err(COMPLEX64 | COMPLEX128));
        let dtype = match dtype {
            Err(COMPLEX64) => Ok(DType::Float32),
            Err(COMPLEX128) => Ok(DType::Float64),
            other => other,
        };
        if complex {
            let twice = |n: usize| {
                n.checked_mul(2)
                    .ok_or_else(|| "a complex tensor's layout overflows".to_string())
            };
            storage_offset = twice(storage_offset)?;
            strides = strides.into_iter().map(twice).collect::<Result<_, _>>()?;
            shape.push(2);
            strides.push(1);
            if shape.len() > MAX_RANK {
                return Err(format!(
                    "a complex tensor's real view has {} dimensions (at most {MAX_RANK})",
                    shape.len()
                ));
            }
        }
        self.new_object(Value::Tensor(Box::new(Tensor {
            dtype,
            storage: storage.bytes,
            storage_offset,
            shape,
            strides,
            complex,
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
    pub(super) fn persistent_load(&mut self, pid: ObjId) -> Result<Value, String> {
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
