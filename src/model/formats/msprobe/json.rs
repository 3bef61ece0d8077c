//! A JSON reader for msprobe's files: Python's `json.dump` with `allow_nan=True`.
//!
//! msprobe writes a NaN or infinite statistic as the bare tokens `NaN`, `Infinity` and
//! `-Infinity`, which serde_json refuses; this reader takes them as numbers. It reads from
//! a byte slice without copying it: strings borrow from the input unless they hold escapes.
//! The caller walks the top level itself ([`Reader::object_start`], [`Reader::next_key`]),
//! so one entry of a large `data` object is built at a time and dropped once used, and a
//! file cut short keeps the entries before the cut. Every error carries its byte offset.

use std::borrow::Cow;
use std::fmt;

use super::value::{Leaf, Scalar, Stat, Value, sizes};
use crate::model::dump::Dims;
use crate::model::dump::dims;

/// Why reading stopped: what was wrong, and at which byte of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub offset: usize,
    pub reason: &'static str,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.reason, self.offset)
    }
}

/// Nesting deeper than this is refused (msprobe's own limit is 400 levels of arguments, and
/// real dumps nest a handful), so hostile input cannot exhaust the stack.
const MAX_DEPTH: usize = 512;

/// What ends an object's member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Separator {
    Comma,
    Close,
}

/// A position in JSON bytes.
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, pos: 0 }
    }

    /// A reader of `bytes` from byte `pos` on.
    pub fn at(bytes: &'a [u8], pos: usize) -> Reader<'a> {
        Reader { bytes, pos }
    }

    /// Byte offset of the next unread byte.
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// All the bytes read from.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    fn error<T>(&self, reason: &'static str) -> Result<T, Error> {
        Err(Error {
            offset: self.pos,
            reason,
        })
    }

    /// The error for the byte at the current position: end of input, or something else.
    fn unexpected<T>(&self, expected: &'static str) -> Result<T, Error> {
        if self.pos >= self.bytes.len() {
            self.error("the file ends early (EOF)")
        } else {
            self.error(expected)
        }
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    pub fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.bytes.get(self.pos).copied()
    }

    /// True when nothing but whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    /// Consumes the `{` that opens an object.
    pub fn object_start(&mut self) -> Result<(), Error> {
        if self.peek() == Some(b'{') {
            self.pos += 1;
            Ok(())
        } else {
            self.unexpected("expected `{`")
        }
    }

    /// The next key of the object being read (its `:` consumed), or `None` at its `}`.
    /// `first` says whether any key of this object was read yet (a `,` must come before the
    /// others).
    pub fn next_key(&mut self, first: bool) -> Result<Option<Cow<'a, str>>, Error> {
        if first {
            if self.peek() == Some(b'}') {
                self.pos += 1;
                return Ok(None);
            }
        } else if self.separator()? == Separator::Close {
            return Ok(None);
        }
        self.key().map(Some)
    }

    /// A key and its `:`.
    pub fn key(&mut self) -> Result<Cow<'a, str>, Error> {
        if self.peek() != Some(b'"') {
            return self.unexpected("expected a string key");
        }
        let key = self.string()?;
        if self.peek() != Some(b':') {
            return self.unexpected("expected `:` after an object key");
        }
        self.pos += 1;
        Ok(key)
    }

    /// What follows an object's value: its `,` or its `}`, consumed; whitespace after a `,`
    /// is consumed too.
    pub fn separator(&mut self) -> Result<Separator, Error> {
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                self.ws();
                Ok(Separator::Comma)
            }
            Some(b'}') => {
                self.pos += 1;
                Ok(Separator::Close)
            }
            _ => self.unexpected("expected `,` or `}` after an object value"),
        }
    }

    /// Reads one whole value.
    pub fn value(&mut self) -> Result<Value<'a>, Error> {
        self.value_at(0)
    }

    /// Steps over one value without building it (bytes are still checked).
    pub fn skip(&mut self) -> Result<(), Error> {
        self.value_at(0).map(drop)
    }

    fn value_at(&mut self, depth: usize) -> Result<Value<'a>, Error> {
        if depth > MAX_DEPTH {
            return self.error("nesting too deep");
        }
        match self.peek() {
            Some(b'{') => {
                self.pos += 1;
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                    return Ok(Value::Object(Vec::new()));
                }
                let key = self.key()?;
                let value = self.value_at(depth + 1)?;
                let value = match (&*key, value) {
                    ("type", Value::String(kind)) => {
                        return read_leaf_rest(self, kind).map(|l| Value::Leaf(Box::new(l)));
                    }
                    (_, value) => value,
                };
                let mut fields = Vec::with_capacity(4);
                fields.push((key, value));
                while let Some(key) = self.next_key(false)? {
                    let value = self.value_at(depth + 1)?;
                    fields.push((key, value));
                }
                Ok(Value::Object(fields))
            }
            Some(b'[') => {
                self.pos += 1;
                let mut items = Vec::with_capacity(4);
                loop {
                    match self.peek() {
                        Some(b']') => {
                            self.pos += 1;
                            return Ok(Value::Array(items));
                        }
                        Some(b',') if !items.is_empty() => self.pos += 1,
                        _ if items.is_empty() => {}
                        _ => return self.unexpected("expected `,` or `]` after an array element"),
                    }
                    items.push(self.value_at(depth + 1)?);
                }
            }
            Some(b'"') => self.string().map(Value::String),
            Some(b'-' | b'0'..=b'9' | b'N' | b'I') => self.number().map(Value::Number),
            Some(b't') => self.literal(b"true", Value::Bool(true)),
            Some(b'f') => self.literal(b"false", Value::Bool(false)),
            Some(b'n') => self.literal(b"null", Value::Null),
            _ => self.unexpected("expected a value"),
        }
    }

    /// A number, bool, `null` or string at the current position; `None` (nothing read) for
    /// an array or object.
    pub fn scalar(&mut self) -> Result<Option<Value<'a>>, Error> {
        match self.peek() {
            Some(b'{' | b'[') => Ok(None),
            _ => self.value_at(0).map(Some),
        }
    }

    /// A list of at most `buf.len()` plain non-negative integers below 2⁵³ (a shape), read
    /// into `buf`: `Some(count)`; `None` for any other list, with the position then
    /// somewhere inside it (the caller starts over).
    pub fn small_sizes(&mut self, buf: &mut [u64]) -> Result<Option<usize>, Error> {
        if self.peek() != Some(b'[') {
            return Ok(None);
        }
        self.pos += 1;
        let mut n = 0;
        loop {
            match self.peek() {
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Some(n));
                }
                Some(b',') if n > 0 => {
                    self.pos += 1;
                    self.ws();
                }
                _ if n == 0 => {}
                _ => return Ok(None),
            }
            let from = self.pos;
            let mut v: u64 = 0;
            while let Some(&d @ b'0'..=b'9') = self.bytes.get(self.pos) {
                v = v * 10 + u64::from(d - b'0');
                self.pos += 1;
                if self.pos - from > 15 {
                    return Ok(None);
                }
            }
            let digits = self.pos - from;
            let plain = digits > 0 && !(digits > 1 && self.bytes[from] == b'0');
            if !plain
                || n == buf.len()
                || matches!(self.bytes.get(self.pos), Some(b'.' | b'e' | b'E'))
            {
                return Ok(None);
            }
            buf[n] = v;
            n += 1;
        }
    }

    fn literal(&mut self, word: &'static [u8], value: Value<'a>) -> Result<Value<'a>, Error> {
        let rest = &self.bytes[self.pos..];
        if rest.starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else if word.starts_with(rest) {
            self.pos = self.bytes.len();
            self.error("the file ends early (EOF)")
        } else {
            self.error("expected a value")
        }
    }

    /// A number, or Python's `NaN`, `Infinity`, `-Infinity`.
    fn number(&mut self) -> Result<f64, Error> {
        let start = self.pos;
        let negative = self.bytes[start] == b'-';
        let body = start + usize::from(negative);
        match self.bytes.get(body) {
            Some(b'I') => {
                self.pos = body;
                let sign = if negative { -1.0 } else { 1.0 };
                return self
                    .literal(b"Infinity", Value::Null)
                    .map(|_| sign * f64::INFINITY);
            }
            Some(b'N') if !negative => return self.literal(b"NaN", Value::Null).map(|_| f64::NAN),
            _ => {}
        }
        // JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
        let mut at = body;
        let digits = |at: &mut usize, bytes: &[u8]| {
            let from = *at;
            while bytes.get(*at).is_some_and(u8::is_ascii_digit) {
                *at += 1;
            }
            *at - from
        };
        let integer = digits(&mut at, self.bytes);
        let mut plain = true;
        let bad = integer == 0 || (integer > 1 && self.bytes[body] == b'0');
        if !bad && self.bytes.get(at) == Some(&b'.') {
            at += 1;
            plain = false;
            if digits(&mut at, self.bytes) == 0 {
                self.pos = at;
                return self.unexpected("invalid number");
            }
        }
        if !bad && matches!(self.bytes.get(at), Some(b'e' | b'E')) {
            at += 1;
            plain = false;
            if matches!(self.bytes.get(at), Some(b'+' | b'-')) {
                at += 1;
            }
            if digits(&mut at, self.bytes) == 0 {
                self.pos = at;
                return self.unexpected("invalid number");
            }
        }
        if bad {
            self.pos = at;
            return self.unexpected("invalid number");
        }
        self.pos = at;
        let text = &self.bytes[start..at];
        if plain && integer <= 15 {
            // Exact in f64: no rounding to get right.
            let magnitude = text[usize::from(negative)..]
                .iter()
                .fold(0u64, |n, d| n * 10 + u64::from(d - b'0')) as f64;
            return Ok(if negative { -magnitude } else { magnitude });
        }
        // ASCII by construction; std's conversion is correctly rounded.
        std::str::from_utf8(text)
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
            .map_or_else(|| self.error("invalid number"), Ok)
    }

    /// A string at the current position (its opening quote next).
    fn string(&mut self) -> Result<Cow<'a, str>, Error> {
        self.pos += 1; // the opening quote
        let start = self.pos;
        let Some(end) = memchr::memchr2(b'"', b'\\', &self.bytes[start..]) else {
            self.pos = self.bytes.len();
            return self.error("the file ends early (EOF)");
        };
        let end = start + end;
        if self.bytes[end] == b'"' {
            let raw = &self.bytes[start..end];
            if raw.iter().any(|&b| b < 0x20) {
                self.pos = start + raw.iter().position(|&b| b < 0x20).unwrap_or(0);
                return self.error("control character in a string");
            }
            self.pos = end + 1;
            return match std::str::from_utf8(raw) {
                Ok(text) => Ok(Cow::Borrowed(text)),
                Err(e) => {
                    self.pos = start + e.valid_up_to();
                    self.error("invalid UTF-8 in a string")
                }
            };
        }
        self.pos = start;
        self.escaped_string().map(Cow::Owned)
    }

    /// The rest of a string that holds escapes, from its first byte after the quote.
    fn escaped_string(&mut self) -> Result<String, Error> {
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(&b) = self.bytes.get(self.pos) else {
                return self.error("the file ends early (EOF)");
            };
            match b {
                b'"' => {
                    self.pos += 1;
                    break;
                }
                b'\\' => {
                    self.pos += 1;
                    let Some(&e) = self.bytes.get(self.pos) else {
                        return self.error("the file ends early (EOF)");
                    };
                    self.pos += 1;
                    match e {
                        b'"' => out.push(b'"'),
                        b'\\' => out.push(b'\\'),
                        b'/' => out.push(b'/'),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let c = self.unicode_escape()?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => {
                            self.pos -= 1;
                            return self.error("invalid escape in a string");
                        }
                    }
                }
                0..=0x1f => return self.error("control character in a string"),
                _ => {
                    out.push(b);
                    self.pos += 1;
                }
            }
        }
        String::from_utf8(out).or_else(|_| self.error("invalid UTF-8 in a string"))
    }

    /// The character of a `\uXXXX` escape (its `\u` consumed), a surrogate pair included;
    /// a lone surrogate becomes U+FFFD, as Python's decoder would keep it unpaired.
    fn unicode_escape(&mut self) -> Result<char, Error> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first)
            && self.bytes.get(self.pos..self.pos + 2) == Some(b"\\u")
        {
            let save = self.pos;
            self.pos += 2;
            let second = self.hex4()?;
            if (0xDC00..0xE000).contains(&second) {
                let c = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return Ok(char::from_u32(c).unwrap_or('\u{fffd}'));
            }
            self.pos = save;
        }
        Ok(char::from_u32(first).unwrap_or('\u{fffd}'))
    }

    fn hex4(&mut self) -> Result<u32, Error> {
        let Some(digits) = self.bytes.get(self.pos..self.pos + 4) else {
            self.pos = self.bytes.len();
            return self.error("the file ends early (EOF)");
        };
        let mut n = 0;
        for &d in digits {
            let v = match d {
                b'0'..=b'9' => d - b'0',
                b'a'..=b'f' => d - b'a' + 10,
                b'A'..=b'F' => d - b'A' + 10,
                _ => return self.error("invalid \\u escape in a string"),
            };
            n = n * 16 + u32::from(v);
        }
        self.pos += 4;
        Ok(n)
    }
}

// msprobe's leaf dicts, read member by member (see `super::value`).

/// The rest of a leaf dict whose first member, `"type": kind`, is read: members up to and
/// including its `}`.
fn read_leaf_rest<'a>(reader: &mut Reader<'a>, kind: Cow<'a, str>) -> Result<Leaf<'a>, Error> {
    let mut leaf = Leaf {
        kind,
        ..Leaf::default()
    };
    while let Some(key) = reader.next_key(false)? {
        match &*key {
            "dtype" => leaf.dtype = string(reader)?,
            "shape" => leaf.shape = read_sizes(reader)?,
            "Max" => leaf.stats[0] = stat(reader)?,
            "Min" => leaf.stats[1] = stat(reader)?,
            "Mean" => leaf.stats[2] = stat(reader)?,
            "Norm" => leaf.stats[3] = stat(reader)?,
            "value" => leaf.value = Scalar::of(&reader.value()?),
            "data_name" => leaf.data_name = string(reader)?,
            "md5" => leaf.md5 = string(reader)?,
            // A repeated `type` that is not a string would make this no leaf in Python;
            // msprobe never writes one, so the first `type` stands.
            _ => reader.skip()?,
        }
    }
    Ok(leaf)
}

fn string<'a>(reader: &mut Reader<'a>) -> Result<Option<Cow<'a, str>>, Error> {
    Ok(match reader.value()? {
        Value::String(s) => Some(s),
        _ => None,
    })
}

fn stat(reader: &mut Reader<'_>) -> Result<Stat, Error> {
    Ok(match reader.scalar()? {
        Some(Value::Number(v)) => Stat::Number(v),
        Some(Value::Bool(b)) => Stat::Bool(b),
        Some(_) => Stat::Null,
        None => Stat::of(&reader.value()?),
    })
}

/// A shape: sizes read without building a list (up to 8 dimensions; more, or anything odd,
/// through the general reader).
fn read_sizes(reader: &mut Reader<'_>) -> Result<Option<Dims>, Error> {
    let start = reader.offset();
    if reader.peek() == Some(b'[') {
        let mut buf = [0u64; 8];
        if let Some(n) = reader.small_sizes(&mut buf)? {
            return Ok(Some(dims(&buf[..n])));
        }
    }
    *reader = Reader::at(reader.bytes(), start);
    Ok(match reader.value()? {
        Value::Array(items) => sizes(&items).map(|s| dims(&s)),
        _ => None,
    })
}

#[cfg(test)]
/// Parses a whole text into one value (tests).
pub fn parse(bytes: &[u8]) -> Result<Value<'_>, Error> {
    let mut reader = Reader::new(bytes);
    let value = reader.value()?;
    if !reader.at_end() {
        return reader.error("unexpected bytes after the JSON value");
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(text: &str) -> Option<f64> {
        match parse(text.as_bytes()) {
            Ok(Value::Number(v)) => Some(v),
            _ => None,
        }
    }

    #[test]
    fn numbers_read_as_python_writes_them() {
        assert_eq!(num("0"), Some(0.0));
        assert_eq!(num("-0.0").map(f64::to_bits), Some((-0.0f64).to_bits()));
        assert_eq!(num("954.3693237304688"), Some(954.3693237304688));
        assert_eq!(num("7.441285561071709e-05"), Some(7.441285561071709e-05));
        assert_eq!(num("1E+300"), Some(1e300));
        assert_eq!(num("123456789012345678901"), Some(123456789012345678901.0));
        assert_eq!(num("-423"), Some(-423.0));
        assert!(num("NaN").unwrap().is_nan());
        assert_eq!(num("Infinity"), Some(f64::INFINITY));
        assert_eq!(num("-Infinity"), Some(f64::NEG_INFINITY));
        for bad in [
            "01", "1.", ".5", "-", "1e", "+1", "-NaN", "Inf", "nan", "1.5.2",
        ] {
            assert_eq!(num(bad), None, "{bad}");
        }
    }

    #[test]
    fn strings_borrow_unless_escaped() {
        let Ok(Value::String(s)) = parse(br#""plain""#) else {
            panic!()
        };
        assert!(matches!(s, Cow::Borrowed("plain")));
        let Ok(Value::String(s)) = parse(br#""a, \n b\"\u00e9\ud83d\ude00\/""#) else {
            panic!()
        };
        assert_eq!(s, "a, \n b\"\u{e9}\u{1f600}/");
        assert!(parse(b"\"a\x01\"").is_err());
        assert!(parse(br#""\x""#).is_err());
    }

    #[test]
    fn structure_and_errors_carry_offsets() {
        let v = parse(br#" {"a": [1, null, true, {"b": "c"}], "a": false} "#).unwrap();
        assert_eq!(v.get("a"), Some(&Value::Bool(false)));
        assert_eq!(
            parse(br#"{"a": [1, 2"#).unwrap_err(),
            Error {
                offset: 11,
                reason: "the file ends early (EOF)"
            }
        );
        assert_eq!(parse(br#"{"a" 1}"#).unwrap_err().offset, 5);
        assert_eq!(parse(b"[1,]").unwrap_err().offset, 3);
        assert_eq!(parse(b"{} x").unwrap_err().offset, 3);
        assert_eq!(
            parse(b"tru").unwrap_err().reason,
            "the file ends early (EOF)"
        );
        assert!(parse(&[b'['; 600]).is_err());
    }
}

#[cfg(test)]
mod leaf_tests {
    use super::*;

    /// The leaf read straight and the leaf read as an object agree.
    fn both(text: &str) -> Leaf<'static> {
        let fast = match parse(text.as_bytes()).unwrap() {
            Value::Leaf(leaf) => *leaf,
            other => panic!("not read as a leaf: {other:?}"),
        };
        // The same members behind another first key: read as an object, then converted.
        let moved = format!(
            "{{\"z\": 0, {}}}",
            text.trim()
                .strip_prefix('{')
                .and_then(|t| t.strip_suffix('}'))
                .unwrap()
        );
        let Value::Object(fields) = parse(moved.as_bytes()).unwrap() else {
            panic!()
        };
        let slow = Leaf::from_fields(&fields);
        // Debug forms: a NaN statistic is not equal to itself.
        assert_eq!(format!("{fast:?}"), format!("{slow:?}"), "{text}");
        owned(fast)
    }

    fn owned(leaf: Leaf<'_>) -> Leaf<'static> {
        let own = |c: Option<Cow<'_, str>>| c.map(|s| Cow::Owned(s.into_owned()));
        Leaf {
            kind: Cow::Owned(leaf.kind.into_owned()),
            dtype: own(leaf.dtype),
            shape: leaf.shape,
            stats: leaf.stats,
            value: leaf.value,
            data_name: own(leaf.data_name),
            md5: own(leaf.md5),
        }
    }

    #[test]
    fn leaf_dicts_read_the_same_in_any_key_order() {
        let t = both(
            r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [32, 3, 224, 224],
               "Max": 1.0, "Min": -0.0, "Mean": NaN, "Norm": null, "requires_grad": false,
               "data_name": "x.pt", "md5": "e771d6e6", "extra": {"a": [1, {"b": 2}]}}"#,
        );
        assert_eq!(t.shape.as_deref(), Some(&[32, 3, 224, 224][..]));
        assert_eq!(t.stats[0], Stat::Number(1.0));
        assert!(matches!(t.stats[2], Stat::Number(v) if v.is_nan()));
        assert_eq!(t.stats[3], Stat::Null);
        assert_eq!(
            (t.data_name.as_deref(), t.md5.as_deref()),
            (Some("x.pt"), Some("e771d6e6"))
        );
        let deep = both(
            r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [1,2,3,4,5,6,7,8,9]}"#,
        );
        assert_eq!(deep.shape.unwrap().len(), 9);
        let odd = both(r#"{"type": "torch.Tensor", "shape": [2, -1], "Max": true, "Min": "x"}"#);
        assert_eq!(
            (odd.shape, odd.stats[0], odd.stats[1]),
            (None, Stat::Bool(true), Stat::Null)
        );
        let size = both(r#"{"type": "torch.Size", "value": [2, 3]}"#);
        assert_eq!(size.value, Scalar::Sizes(dims(&[2, 3])));
        assert_eq!(
            both(r#"{"type": "int", "value": 3}"#).value,
            Scalar::Number(3.0)
        );
        assert_eq!(
            both(r#"{"type": "str", "value": "mean"}"#).value,
            Scalar::Other
        );
    }
}
