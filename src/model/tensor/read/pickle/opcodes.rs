//! The opcodes of pickle protocols 0-5, named as Python's `pickletools` names them, and the
//! decoding of their text and binary arguments (decimal and two's-complement integers, quoted
//! and raw-unicode-escaped strings).

use super::{Value, shorten};

/// Push a mark: the start of the items of a tuple, list, dict or set being built.
pub(super) const MARK: u8 = b'(';
/// End: the top of the stack is the unpickled object.
pub(super) const STOP: u8 = b'.';
/// Discard the top of the stack (or an empty open mark).
pub(super) const POP: u8 = b'0';
/// Discard the stack down to the last mark, and the mark.
pub(super) const POP_MARK: u8 = b'1';
/// Push the top of the stack again.
pub(super) const DUP: u8 = b'2';
/// A float as decimal text, newline-terminated.
pub(super) const FLOAT: u8 = b'F';
/// An int as decimal text (`00`/`01`: False/True), newline-terminated.
pub(super) const INT: u8 = b'I';
/// A 4-byte signed little-endian int.
pub(super) const BININT: u8 = b'J';
/// A 1-byte unsigned int.
pub(super) const BININT1: u8 = b'K';
/// A long as decimal text with an optional `L` suffix, newline-terminated.
pub(super) const LONG: u8 = b'L';
/// A 2-byte unsigned little-endian int.
pub(super) const BININT2: u8 = b'M';
/// Push `None`.
pub(super) const NONE: u8 = b'N';
/// A persistent id as text (never torch's: refused).
pub(super) const PERSID: u8 = b'P';
/// A persistent id from the stack: torch's storage references.
pub(super) const BINPERSID: u8 = b'Q';
/// Apply a callable to an argument tuple.
pub(super) const REDUCE: u8 = b'R';
/// A quoted Python `repr` of a str, newline-terminated.
pub(super) const STRING: u8 = b'S';
/// A str of a 4-byte length.
pub(super) const BINSTRING: u8 = b'T';
/// A str of a 1-byte length.
pub(super) const SHORT_BINSTRING: u8 = b'U';
/// A raw-unicode-escaped str, newline-terminated.
pub(super) const UNICODE: u8 = b'V';
/// A UTF-8 str of a 4-byte length.
pub(super) const BINUNICODE: u8 = b'X';
/// Append the top of the stack to the list below it.
pub(super) const APPEND: u8 = b'a';
/// Set an object's state (`__setstate__` or `__dict__`).
pub(super) const BUILD: u8 = b'b';
/// Push a global named by two text lines, module and name.
pub(super) const GLOBAL: u8 = b'c';
/// Build a dict from the key-value items since the last mark.
pub(super) const DICT: u8 = b'd';
/// Push an empty dict.
pub(super) const EMPTY_DICT: u8 = b'}';
/// Extend the list below the last mark with the items since it.
pub(super) const APPENDS: u8 = b'e';
/// Push a memo entry named by decimal text.
pub(super) const GET: u8 = b'g';
/// Push a memo entry of a 1-byte index.
pub(super) const BINGET: u8 = b'h';
/// Instantiate a class named by text lines (refused).
pub(super) const INST: u8 = b'i';
/// Push a memo entry of a 4-byte index.
pub(super) const LONG_BINGET: u8 = b'j';
/// Build a list from the items since the last mark.
pub(super) const LIST: u8 = b'l';
/// Push an empty list.
pub(super) const EMPTY_LIST: u8 = b']';
/// Instantiate a class from the stack (refused).
pub(super) const OBJ: u8 = b'o';
/// Store the top of the stack in the memo under decimal text.
pub(super) const PUT: u8 = b'p';
/// Store the top of the stack in the memo under a 1-byte index.
pub(super) const BINPUT: u8 = b'q';
/// Store the top of the stack in the memo under a 4-byte index.
pub(super) const LONG_BINPUT: u8 = b'r';
/// Add one key-value pair to the dict below them.
pub(super) const SETITEM: u8 = b's';
/// Build a tuple from the items since the last mark.
pub(super) const TUPLE: u8 = b't';
/// Push an empty tuple.
pub(super) const EMPTY_TUPLE: u8 = b')';
/// Add the key-value items since the last mark to the dict below it.
pub(super) const SETITEMS: u8 = b'u';
/// An 8-byte big-endian float.
pub(super) const BINFLOAT: u8 = b'G';
/// Protocol 2+: the protocol number (1 byte).
pub(super) const PROTO: u8 = 0x80;
/// Protocol 2: `cls.__new__(cls, *args)`.
pub(super) const NEWOBJ: u8 = 0x81;
/// Protocol 2: a copyreg extension code of 1 byte (refused).
pub(super) const EXT1: u8 = 0x82;
/// Protocol 2: a copyreg extension code of 2 bytes (refused).
pub(super) const EXT2: u8 = 0x83;
/// Protocol 2: a copyreg extension code of 4 bytes (refused).
pub(super) const EXT4: u8 = 0x84;
/// Protocol 2: a tuple of the top item.
pub(super) const TUPLE1: u8 = 0x85;
/// Protocol 2: a tuple of the top two items.
pub(super) const TUPLE2: u8 = 0x86;
/// Protocol 2: a tuple of the top three items.
pub(super) const TUPLE3: u8 = 0x87;
/// Protocol 2: push `True`.
pub(super) const NEWTRUE: u8 = 0x88;
/// Protocol 2: push `False`.
pub(super) const NEWFALSE: u8 = 0x89;
/// Protocol 2: a two's-complement little-endian int of a 1-byte length.
pub(super) const LONG1: u8 = 0x8a;
/// Protocol 2: a two's-complement little-endian int of a 4-byte length.
pub(super) const LONG4: u8 = 0x8b;
/// Protocol 3: bytes of a 4-byte length.
pub(super) const BINBYTES: u8 = b'B';
/// Protocol 3: bytes of a 1-byte length.
pub(super) const SHORT_BINBYTES: u8 = b'C';
/// Protocol 4: a UTF-8 str of a 1-byte length.
pub(super) const SHORT_BINUNICODE: u8 = 0x8c;
/// Protocol 4: a UTF-8 str of an 8-byte length.
pub(super) const BINUNICODE8: u8 = 0x8d;
/// Protocol 4: bytes of an 8-byte length.
pub(super) const BINBYTES8: u8 = 0x8e;
/// Protocol 4: push an empty set.
pub(super) const EMPTY_SET: u8 = 0x8f;
/// Protocol 4: add the items since the last mark to the set below it.
pub(super) const ADDITEMS: u8 = 0x90;
/// Protocol 4: build a frozenset from the items since the last mark.
pub(super) const FROZENSET: u8 = 0x91;
/// Protocol 4: `cls.__new__(cls, *args, **kwargs)`.
pub(super) const NEWOBJ_EX: u8 = 0x92;
/// Protocol 4: push a global named by two strs on the stack.
pub(super) const STACK_GLOBAL: u8 = 0x93;
/// Protocol 4: store the top of the stack in the memo at the next index.
pub(super) const MEMOIZE: u8 = 0x94;
/// Protocol 4: a frame of an 8-byte length follows (framing only).
pub(super) const FRAME: u8 = 0x95;
/// Protocol 5: a bytearray of an 8-byte length.
pub(super) const BYTEARRAY8: u8 = 0x96;
/// Protocol 5: an out-of-band buffer (not supported).
pub(super) const NEXT_BUFFER: u8 = 0x97;
/// Protocol 5: make the top buffer read-only (not supported).
pub(super) const READONLY_BUFFER: u8 = 0x98;

/// A memo index written as decimal text.
pub(super) fn parse_index(line: &[u8]) -> Result<u64, String> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .ok_or_else(|| "memo index is not a decimal number".into())
}

/// A text line as a UTF-8 string (a GLOBAL's module or name).
pub(super) fn text_line(line: &[u8]) -> Result<String, String> {
    String::from_utf8(line.to_vec()).map_err(|_| "GLOBAL name is not UTF-8".into())
}

/// Protocol 0's decimal integers: `Int`, or `BigInt` beyond 64 bits.
pub(super) fn parse_decimal(line: &[u8]) -> Result<Value, String> {
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
pub(super) fn long_le(bytes: &[u8]) -> Value {
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
pub(super) fn unquote_string(line: &[u8]) -> Result<Vec<u8>, String> {
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
pub(super) fn raw_unicode_escape(line: &[u8]) -> Result<String, String> {
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
