//! The stack machine: one opcode at a time over the pickle's bytes, with a stack, marks and
//! a memo, every length checked and every cap enforced. Opcodes that would call a global
//! hand it to [`rebuild`](super::rebuild), which interprets it.

use std::collections::HashMap;
use std::ops::Range;

use super::opcodes::*;
use super::{
    MAX_MARK_DEPTH, MAX_OBJECTS, MAX_STACK, ObjId, Pickle, Value, resolve_global, shorten,
};

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

/// The state of one unpickling: the input and position, the object arena, the stack, the
/// open marks and the memo.
pub(super) struct Machine<'a, 'f> {
    data: &'a [u8],
    pos: usize,
    /// The arena: every object created so far, by [`ObjId`].
    pub(super) objects: Vec<Value>,
    stack: Vec<ObjId>,
    /// Stack lengths at each open `MARK`.
    marks: Vec<usize>,
    memo: HashMap<u64, ObjId>,
    /// Elements (ids, bytes) that copying operations may still create.
    budget: usize,
    /// The caller's map from a persistent id's key to the storage's byte range.
    pub(super) load_storage: &'f mut dyn FnMut(&str) -> Result<Range<usize>, String>,
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

    /// Spends `n` elements of the copy budget; an error once it is exhausted.
    pub(super) fn charge(&mut self, n: usize) -> Result<(), String> {
        self.budget = self.budget.checked_sub(n).ok_or(
            "the pickle expands to more than 4 times its size (repeated copies of memoized objects)",
        )?;
        Ok(())
    }

    /// Adds `value` to the arena; an error beyond [`MAX_OBJECTS`].
    pub(super) fn new_object(&mut self, value: Value) -> Result<ObjId, String> {
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

    /// The text of str object `id`; an error naming `what` for any other kind.
    pub(super) fn str_of(&self, id: ObjId, what: &str) -> Result<&str, String> {
        match &self.objects[id] {
            Value::Str(s) => Ok(s),
            other => Err(format!("{what} is a {}, not a str", other.kind())),
        }
    }

    /// One opcode; `Some(root)` at `STOP`.
    fn step(&mut self, op: u8) -> Step {
        match op {
            // Framing and protocol.
            PROTO => {
                let protocol = self.take(1)?[0];
                if protocol > 5 {
                    return Err(format!("pickle protocol {protocol} is newer than 5"));
                }
            }
            FRAME => {
                self.take_len::<8>()?;
            }
            STOP => return self.pop().map(Some),
            // Stack manipulation.
            MARK => {
                if self.marks.len() >= MAX_MARK_DEPTH {
                    return Err(format!("nesting deeper than {MAX_MARK_DEPTH} MARKs"));
                }
                self.marks.push(self.stack.len());
            }
            POP => {
                if self.stack.len() > self.floor() {
                    self.stack.pop();
                } else {
                    self.pop_mark()?;
                }
            }
            POP_MARK => {
                self.pop_mark()?;
            }
            DUP => {
                let id = self.top()?;
                self.push_id(id)?;
            }
            // Memo.
            PUT => {
                let index = parse_index(self.line()?)?;
                self.memo_put(index)?;
            }
            BINPUT => {
                let index = self.take(1)?[0];
                self.memo_put(u64::from(index))?;
            }
            LONG_BINPUT => {
                let index = u32::from_le_bytes(self.take_array()?);
                self.memo_put(u64::from(index))?;
            }
            MEMOIZE => {
                let index = self.memo.len() as u64;
                self.memo_put(index)?;
            }
            GET => {
                let index = parse_index(self.line()?)?;
                self.memo_get(index)?;
            }
            BINGET => {
                let index = self.take(1)?[0];
                self.memo_get(u64::from(index))?;
            }
            LONG_BINGET => {
                let index = u32::from_le_bytes(self.take_array()?);
                self.memo_get(u64::from(index))?;
            }
            // Constants.
            NONE => self.push(Value::None)?,
            NEWTRUE => self.push(Value::Bool(true))?,
            NEWFALSE => self.push(Value::Bool(false))?,
            INT => {
                let line = self.line()?;
                let value = match line {
                    b"00" => Value::Bool(false),
                    b"01" => Value::Bool(true),
                    _ => parse_decimal(line)?,
                };
                self.push(value)?;
            }
            LONG => {
                let line = self.line()?;
                let digits = line.strip_suffix(b"L").unwrap_or(line);
                let value = parse_decimal(digits)?;
                self.push(value)?;
            }
            BININT => {
                let value = i32::from_le_bytes(self.take_array()?);
                self.push(Value::Int(i64::from(value)))?;
            }
            BININT1 => {
                let value = self.take(1)?[0];
                self.push(Value::Int(i64::from(value)))?;
            }
            BININT2 => {
                let value = u16::from_le_bytes(self.take_array()?);
                self.push(Value::Int(i64::from(value)))?;
            }
            LONG1 => {
                let n = self.take_len::<1>()?;
                let value = long_le(self.take(n)?);
                self.push(value)?;
            }
            LONG4 => {
                let n = self.take_len::<4>()?;
                let value = long_le(self.take(n)?);
                self.push(value)?;
            }
            FLOAT => {
                let line = self.line()?;
                let text = std::str::from_utf8(line).map_err(|_| "FLOAT is not text")?;
                let value = text
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| format!("FLOAT `{}` is not a number", shorten(text)))?;
                self.push(Value::Float(value))?;
            }
            BINFLOAT => {
                let value = f64::from_be_bytes(self.take_array()?);
                self.push(Value::Float(value))?;
            }
            // Strings and bytes.
            STRING => {
                let line = self.line()?;
                let bytes = unquote_string(line)?;
                let text = String::from_utf8(bytes).map_err(|_| "STRING is not UTF-8")?;
                self.push(Value::Str(text))?;
            }
            BINSTRING => {
                let n = self.take_len::<4>()?;
                self.push_text(n, "BINSTRING")?;
            }
            SHORT_BINSTRING => {
                let n = self.take_len::<1>()?;
                self.push_text(n, "SHORT_BINSTRING")?;
            }
            UNICODE => {
                let line = self.line()?;
                let text = raw_unicode_escape(line)?;
                self.push(Value::Str(text))?;
            }
            BINUNICODE => {
                let n = self.take_len::<4>()?;
                self.push_text(n, "BINUNICODE")?;
            }
            SHORT_BINUNICODE => {
                let n = self.take_len::<1>()?;
                self.push_text(n, "SHORT_BINUNICODE")?;
            }
            BINUNICODE8 => {
                let n = self.take_len::<8>()?;
                self.push_text(n, "BINUNICODE8")?;
            }
            BINBYTES => {
                let n = self.take_len::<4>()?;
                self.push_bytes(n)?;
            }
            SHORT_BINBYTES => {
                let n = self.take_len::<1>()?;
                self.push_bytes(n)?;
            }
            BINBYTES8 | BYTEARRAY8 => {
                let n = self.take_len::<8>()?;
                self.push_bytes(n)?;
            }
            // Containers.
            EMPTY_LIST => self.push(Value::List(Vec::new()))?,
            EMPTY_DICT => self.push(Value::Dict(Vec::new()))?,
            EMPTY_TUPLE => self.push(Value::Tuple(Vec::new()))?,
            EMPTY_SET => self.push(Value::Set(Vec::new()))?,
            LIST => {
                let items = self.pop_mark()?;
                self.push(Value::List(items))?;
            }
            TUPLE => {
                let items = self.pop_mark()?;
                self.push(Value::Tuple(items))?;
            }
            FROZENSET => {
                let items = self.pop_mark()?;
                self.push(Value::Set(items))?;
            }
            TUPLE1 | TUPLE2 | TUPLE3 => {
                let n = usize::from(op - TUPLE1) + 1;
                if self.stack.len() < self.floor() + n {
                    return Err("stack underflow".into());
                }
                let items = self.stack.split_off(self.stack.len() - n);
                self.push(Value::Tuple(items))?;
            }
            DICT => {
                let items = self.pop_mark()?;
                let pairs = pairs(items)?;
                self.push(Value::Dict(pairs))?;
            }
            APPEND => {
                let item = self.pop()?;
                let list = self.top()?;
                self.extend_list(list, vec![item])?;
            }
            APPENDS => {
                let items = self.pop_mark()?;
                let list = self.top()?;
                self.extend_list(list, items)?;
            }
            SETITEM => {
                let value = self.pop()?;
                let key = self.pop()?;
                let dict = self.top()?;
                self.extend_dict(dict, vec![(key, value)])?;
            }
            SETITEMS => {
                let items = self.pop_mark()?;
                let dict = self.top()?;
                self.extend_dict(dict, pairs(items)?)?;
            }
            ADDITEMS => {
                let items = self.pop_mark()?;
                let set = self.top()?;
                match &mut self.objects[set] {
                    Value::Set(existing) => existing.extend(items),
                    other => return Err(format!("ADDITEMS on a {}", other.kind())),
                }
            }
            // Globals and the operations that would call them.
            GLOBAL => {
                let module = text_line(self.line()?)?;
                let name = text_line(self.line()?)?;
                let global = resolve_global(&module, &name)?;
                self.push(Value::Global(global))?;
            }
            STACK_GLOBAL => {
                let name = self.pop()?;
                let module = self.pop()?;
                let global = resolve_global(
                    self.str_of(module, "STACK_GLOBAL's module")?,
                    self.str_of(name, "STACK_GLOBAL's name")?,
                )?;
                self.push(Value::Global(global))?;
            }
            REDUCE => {
                let args = self.pop()?;
                let callable = self.pop()?;
                let result = self.apply(callable, args, "REDUCE")?;
                self.push_id(result)?;
            }
            NEWOBJ => {
                let args = self.pop()?;
                let class = self.pop()?;
                let result = self.apply(class, args, "NEWOBJ")?;
                self.push_id(result)?;
            }
            NEWOBJ_EX => {
                let kwargs = self.pop()?;
                let args = self.pop()?;
                let class = self.pop()?;
                if !matches!(&self.objects[kwargs], Value::Dict(d) if d.is_empty()) {
                    return Err("NEWOBJ_EX with keyword arguments".into());
                }
                let result = self.apply(class, args, "NEWOBJ_EX")?;
                self.push_id(result)?;
            }
            BUILD => {
                // Sets attributes (a Parameter's or an OrderedDict's `__dict__`); dumpview
                // keeps none of them, so only the target is checked.
                self.pop()?;
                let target = self.top()?;
                match &self.objects[target] {
                    Value::Tensor(_) | Value::Dict(_) => {}
                    other => return Err(format!("BUILD on a {} refused", other.kind())),
                }
            }
            BINPERSID => {
                let pid = self.pop()?;
                let storage = self.persistent_load(pid)?;
                self.push(storage)?;
            }
            PERSID => {
                let line = self.line()?;
                return Err(format!(
                    "text persistent id `{}` is not a torch storage reference",
                    shorten(&String::from_utf8_lossy(line))
                ));
            }
            INST | OBJ => return Err("INST/OBJ (class instantiation) refused".into()),
            EXT1 | EXT2 | EXT4 => {
                return Err("EXT opcodes (the copyreg extension registry) refused".into());
            }
            NEXT_BUFFER | READONLY_BUFFER => {
                return Err("out-of-band buffers (protocol 5) are not supported".into());
            }
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
    pub(super) fn items(&self, id: ObjId, what: &str) -> Result<Vec<ObjId>, String> {
        match &self.objects[id] {
            Value::Tuple(items) | Value::List(items) => Ok(items.clone()),
            other => Err(format!("{what} is a {}, not a tuple", other.kind())),
        }
    }
}

/// `[k0, v0, k1, v1, ...]` to pairs.
fn pairs(items: Vec<ObjId>) -> Result<Vec<(ObjId, ObjId)>, String> {
    if items.len() % 2 != 0 {
        return Err("odd number of items for a dict".into());
    }
    Ok(items.chunks_exact(2).map(|p| (p[0], p[1])).collect())
}
