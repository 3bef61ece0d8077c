//! A reader for one record line, as the probe writes it, several times faster than serde.
//!
//! It takes the plain JSON the probe writes (keys without escapes, strings without
//! escapes, integers, `null`, booleans, number statistics) and answers `None` for
//! anything else: an unknown or repeated key, an escape, a number where it wants an
//! integer, a value out of range. The caller then reads the line with serde instead, so
//! this reader only has to agree with serde where it answers; it does by reading the same
//! types with the same rules, and by converting every statistic through serde itself
//! ([`StatValue`]), so floats come out bit for bit as serde_json makes them.

use crate::model::manifest::{Mode, Record, StatValue, Stats};

/// Reads one record (the text of a JSON object, surrounding whitespace allowed).
pub(super) fn record(text: &[u8]) -> Option<Record> {
    let mut c = Cursor { b: text, i: 0 };
    let record = c.record()?;
    c.ws();
    (c.i == text.len()).then_some(record)
}

/// Record keys in the probe's order, which is tried first.
const RECORD_KEYS: [&[u8]; 22] = [
    b"seq",
    b"stage",
    b"occurrence",
    b"mode",
    b"dtype",
    b"shape",
    b"stride",
    b"storage_offset",
    b"element_size",
    b"numel",
    b"storage_ptr",
    b"storage_id",
    b"storage_nbytes",
    b"data_ptr",
    b"device",
    b"device_format",
    b"is_contiguous",
    b"stats",
    b"tensor_file",
    b"rows_kept",
    b"rows_total",
    b"truncated",
];

const STATS_KEYS: [&[u8]; 9] = [
    b"nan_count",
    b"inf_count",
    b"finite_count",
    b"max_abs",
    b"min",
    b"max",
    b"mean",
    b"l2",
    b"pos_checksum",
];

/// `"key": ` for every key, as the probe writes them.
macro_rules! literals {
    ($($key:literal),* $(,)?) => {
        [$(concat!("\"", $key, "\": ").as_bytes()),*]
    };
}

const RECORD_LITERALS: [&[u8]; 22] = literals!(
    "seq",
    "stage",
    "occurrence",
    "mode",
    "dtype",
    "shape",
    "stride",
    "storage_offset",
    "element_size",
    "numel",
    "storage_ptr",
    "storage_id",
    "storage_nbytes",
    "data_ptr",
    "device",
    "device_format",
    "is_contiguous",
    "stats",
    "tensor_file",
    "rows_kept",
    "rows_total",
    "truncated",
);

const STATS_LITERALS: [&[u8]; 9] = literals!(
    "nan_count",
    "inf_count",
    "finite_count",
    "max_abs",
    "min",
    "max",
    "mean",
    "l2",
    "pos_checksum",
);

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// JSON whitespace.
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.ws();
        (self.peek()? == byte).then(|| self.i += 1)
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            true
        } else {
            false
        }
    }

    /// `null` (after whitespace), consumed.
    fn null(&mut self) -> bool {
        self.ws();
        self.literal(b"null")
    }

    /// The bytes of a string without escapes or control characters, as valid UTF-8.
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        let len = memchr::memchr2(b'"', b'\\', &self.b[start..])?;
        let raw = &self.b[start..start + len];
        if self.b[start + len] != b'"' || raw.iter().any(|&b| b < 0x20) {
            return None;
        }
        self.i = start + len + 1;
        std::str::from_utf8(raw).ok()
    }

    /// A non-negative JSON integer (no sign, no leading zero, no fraction or exponent).
    fn u64(&mut self) -> Option<u64> {
        self.ws();
        self.digits()
    }

    /// The digits of an integer at the cursor, whitespace not skipped.
    fn digits(&mut self) -> Option<u64> {
        let start = self.i;
        let mut value: u64 = 0;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            self.i += 1;
        }
        let digits = self.i - start;
        if digits == 0 || (digits > 1 && self.b[start] == b'0') {
            return None;
        }
        match self.peek() {
            Some(b'.' | b'e' | b'E') => None,
            _ => Some(value),
        }
    }

    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.u64()?).ok()
    }

    /// A JSON integer that fits an `i64` (`-0` is left to serde).
    fn i64(&mut self) -> Option<i64> {
        self.ws();
        if self.peek()? == b'-' {
            self.i += 1;
            let magnitude = self.digits()?;
            if magnitude == 0 || magnitude > i64::MAX as u64 {
                return None;
            }
            Some(-(magnitude as i64))
        } else {
            i64::try_from(self.u64()?).ok()
        }
    }

    fn bool(&mut self) -> Option<bool> {
        self.ws();
        if self.literal(b"true") {
            Some(true)
        } else if self.literal(b"false") {
            Some(false)
        } else {
            None
        }
    }

    fn option<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.null() {
            Some(None)
        } else {
            read(self).map(Some)
        }
    }

    fn array<T>(&mut self, read: impl Fn(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        self.eat(b'[')?;
        let mut items = Vec::new();
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(items);
        }
        loop {
            items.push(read(self)?);
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(items);
                }
                _ => return None,
            }
        }
    }

    /// A statistic: `null`, `"nan"`, `"inf"`, `"-inf"`, or a number converted by serde.
    fn stat(&mut self) -> Option<Option<f64>> {
        if self.null() {
            return Some(None);
        }
        match self.peek()? {
            b'"' => match self.string()? {
                "nan" => Some(Some(f64::NAN)),
                "inf" => Some(Some(f64::INFINITY)),
                "-inf" => Some(Some(f64::NEG_INFINITY)),
                _ => None,
            },
            b'-' | b'0'..=b'9' => {
                let start = self.i;
                while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') = self.peek() {
                    self.i += 1;
                }
                serde_json::from_slice::<StatValue>(&self.b[start..self.i])
                    .ok()
                    .map(|v| v.0)
            }
            _ => None,
        }
    }

    /// Which of `keys` the next key is (`expected` is tried first), with its `:` consumed.
    fn key(&mut self, keys: &[&[u8]], expected: usize) -> Option<usize> {
        self.eat(b'"')?;
        let from = self.i;
        while *self.b.get(self.i)? != b'"' {
            self.i += 1;
        }
        let name = &self.b[from..self.i];
        self.i += 1;
        self.eat(b':')?;
        // A known key has no escapes, so comparing raw bytes is comparing names.
        if keys.get(expected).is_some_and(|k| *k == name) {
            return Some(expected);
        }
        keys.iter().position(|k| *k == name)
    }

    /// `{` then, per key, `read(self, index)`, then `}`; every key once, unknown keys refused.
    /// `literals[i]` is key `i` as the probe writes it (`"name": `), tried before parsing.
    fn object<const N: usize>(
        &mut self,
        keys: &[&[u8]; N],
        literals: &[&[u8]; N],
        mut read: impl FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<[bool; N]> {
        self.eat(b'{')?;
        let mut seen = [false; N];
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(seen);
        }
        let mut expected = 0;
        loop {
            self.ws();
            let index = match literals.get(expected) {
                Some(literal) if self.b[self.i..].starts_with(literal) => {
                    self.i += literal.len();
                    expected
                }
                _ => self.key(keys, expected)?,
            };
            if std::mem::replace(&mut seen[index], true) {
                return None;
            }
            read(self, index)?;
            expected = index + 1;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(seen);
                }
                _ => return None,
            }
        }
    }

    fn stats(&mut self) -> Option<Stats> {
        let (mut nan_count, mut inf_count, mut finite_count) = (0, 0, None);
        let mut values: [Option<f64>; 6] = [None; 6];
        let seen = self.object(&STATS_KEYS, &STATS_LITERALS, |c, index| {
            match index {
                0 => nan_count = c.u64()?,
                1 => inf_count = c.u64()?,
                2 => finite_count = c.option(Self::u64)?,
                _ => values[index - 3] = c.stat()?,
            }
            Some(())
        })?;
        // nan_count, inf_count and the four value statistics are required; the rest default.
        if !(seen[0] && seen[1] && seen[3] && seen[4] && seen[5] && seen[6]) {
            return None;
        }
        let [max_abs, min, max, mean, l2, pos_checksum] = values;
        Some(Stats {
            nan_count,
            inf_count,
            finite_count,
            max_abs,
            min,
            max,
            mean,
            l2,
            pos_checksum,
        })
    }

    fn record(&mut self) -> Option<Record> {
        let mut r = Record {
            seq: 0,
            stage: String::new(),
            occurrence: 0,
            mode: Mode::Eager,
            dtype: String::new(),
            shape: Vec::new(),
            stride: Vec::new(),
            storage_offset: 0,
            element_size: 0,
            numel: 0,
            storage_ptr: None,
            storage_id: None,
            storage_nbytes: None,
            data_ptr: None,
            device: String::new(),
            device_format: None,
            is_contiguous: false,
            stats: None,
            tensor_file: None,
            rows_kept: None,
            rows_total: None,
            truncated: None,
        };
        let seen = self.object(&RECORD_KEYS, &RECORD_LITERALS, |c, index| {
            match index {
                0 => r.seq = c.u64()?,
                1 => r.stage = c.string()?.to_owned(),
                2 => r.occurrence = c.u32()?,
                3 => {
                    r.mode = match c.string()? {
                        "eager" => Mode::Eager,
                        "graph" => Mode::Graph,
                        _ => return None,
                    }
                }
                4 => r.dtype = c.string()?.to_owned(),
                5 => r.shape = c.array(Self::u64)?,
                6 => r.stride = c.array(Self::i64)?,
                7 => r.storage_offset = c.u64()?,
                8 => r.element_size = c.u32()?,
                9 => r.numel = c.u64()?,
                10 => r.storage_ptr = c.option(Self::u64)?,
                11 => r.storage_id = c.option(Self::u64)?,
                12 => r.storage_nbytes = c.option(Self::u64)?,
                13 => r.data_ptr = c.option(Self::u64)?,
                14 => r.device = c.string()?.to_owned(),
                15 => r.device_format = c.option(Self::i64)?,
                16 => r.is_contiguous = c.bool()?,
                17 => r.stats = c.option(Self::stats)?,
                18 => r.tensor_file = c.option(|c| c.string().map(str::to_owned))?,
                19 => r.rows_kept = c.option(Self::u64)?,
                20 => r.rows_total = c.option(Self::u64)?,
                21 => r.truncated = c.option(Self::bool)?,
                _ => return None,
            }
            Some(())
        })?;
        // Required: seq..numel (0..=9), device (14), is_contiguous (16); the options default to None.
        let required = (0..=9).chain([14, 16]);
        required.into_iter().all(|i| seen[i]).then_some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// serde's answer for the same text, when it has one.
    fn serde(text: &str) -> Option<Record> {
        serde_json::from_str(text).ok()
    }

    const LINE: &str = r#"  {"seq": 19, "stage": "layers.1.q", "occurrence": 3, "mode": "eager", "dtype": "bfloat16", "shape": [8, 64, 192], "stride": [12800, 192, 1], "storage_offset": 0, "element_size": 2, "numel": 98304, "storage_ptr": 140166886544384, "storage_id": 18, "storage_nbytes": 204800, "data_ptr": 140166886544384, "device": "cuda:1", "device_format": null, "is_contiguous": false, "stats": {"nan_count": 0, "inf_count": 0, "finite_count": 98304, "max_abs": 15.853062629699707, "min": -15.853062629699707, "max": 14.714829444885254, "mean": 0.017306514084339142, "l2": 657.6638793945312, "pos_checksum": 1e-05}, "tensor_file": null}"#;

    #[test]
    fn a_probe_line_reads_as_serde_reads_it() {
        let fast = record(LINE.as_bytes()).expect("the probe's layout");
        assert_eq!(Some(fast), serde(LINE));
    }

    #[test]
    fn agrees_with_serde_or_declines() {
        // Variations serde accepts, refuses, or reads differently; the reader must either
        // decline (None) or give serde's record.
        let cases = [
            LINE.replace("\"device_format\": null", "\"device_format\": -3"),
            LINE.replace("\"seq\": 19", "\"seq\": 019"),
            LINE.replace("\"seq\": 19", "\"seq\": -0"),
            LINE.replace("\"seq\": 19", "\"seq\": 1.0"),
            LINE.replace("\"seq\": 19", "\"seq\": 1e2"),
            LINE.replace("\"seq\": 19", "\"seq\": 18446744073709551616"),
            LINE.replace("\"occurrence\": 3", "\"occurrence\": 4294967296"),
            LINE.replace("\"stride\": [12800, 192, 1]", "\"stride\": [-9223372036854775808]"),
            LINE.replace("\"stride\": [12800, 192, 1]", "\"stride\": [9223372036854775808]"),
            LINE.replace("\"stride\": [12800, 192, 1]", "\"stride\": []"),
            LINE.replace("\"shape\": [8, 64, 192]", "\"shape\": [8,,64]"),
            LINE.replace("\"shape\": [8, 64, 192]", "\"shape\": [8, 64,]"),
            LINE.replace("layers.1.q", "layers.1.\\u0071"),
            LINE.replace("layers.1.q", "layers.1.\u{e9}"),
            LINE.replace("layers.1.q", "layers.1\t.q"),
            LINE.replace("\"mode\": \"eager\"", "\"mode\": \"graph\""),
            LINE.replace("\"mode\": \"eager\"", "\"mode\": \"lazy\""),
            LINE.replace("\"seq\": 19, ", ""),
            LINE.replace("\"storage_id\": 18, ", ""),
            LINE.replace("\"storage_id\": 18", "\"storage_id\": 18, \"storage_id\": 18"),
            LINE.replace("\"storage_id\": 18", "\"future\": [1, {\"x\": 2}]"),
            LINE.replace("\"max_abs\": 15.853062629699707", "\"max_abs\": \"inf\""),
            LINE.replace("\"max_abs\": 15.853062629699707", "\"max_abs\": \"big\""),
            LINE.replace("\"max_abs\": 15.853062629699707", "\"max_abs\": null"),
            LINE.replace("\"max_abs\": 15.853062629699707", "\"max_abs\": 3"),
            LINE.replace("\"max_abs\": 15.853062629699707", "\"max_abs\": -0.0"),
            LINE.replace("\"max_abs\": 15.853062629699707", "\"max_abs\": 1.5E+300"),
            LINE.replace("\"max_abs\": 15.853062629699707", "\"max_abs\": 1e400"),
            LINE.replace("\"max_abs\": 15.853062629699707", "\"max_abs\": 12345678901234567890123"),
            LINE.replace("\"max_abs\": 15.853062629699707, ", ""),
            LINE.replace(", \"pos_checksum\": 1e-05", ""),
            LINE.replace("\"finite_count\": 98304, ", ""),
            LINE.replace("\"tensor_file\": null", "\"tensor_file\": \"tensors/x#1.pt\", \"rows_kept\": 2, \"rows_total\": 4, \"truncated\": true"),
            LINE.replace("\"is_contiguous\": false", "\"is_contiguous\": 0"),
            LINE.replace("\"stats\": {", "\"stats\": null, \"x\": {"),
            LINE.replace(", ", ","),
            LINE.replace(": ", " : "),
            format!("{LINE} x"),
            format!("{LINE},"),
            LINE[..LINE.len() - 1].to_string(),
        ];
        let mut read = 0;
        for case in &cases {
            if let Some(fast) = record(case.as_bytes()) {
                read += 1;
                assert_eq!(Some(fast), serde(case), "{case}");
            }
        }
        assert!(read >= 12, "the reader declined too much: {read}");
    }
}
