//! A reader for one record line, as the probe writes it, several times faster than serde.
//!
//! It takes the plain JSON the probe writes (keys without escapes, strings without
//! escapes, integers, `null`, booleans, number statistics) and answers `None` for
//! anything else: an unknown or repeated key, an escape, a number where it wants an
//! integer, a value out of range. The caller then reads the line with serde instead, so
//! this reader only has to agree with serde where it answers; it does by reading the same
//! types with the same rules, and by converting every statistic through serde itself
//! ([`StatValue`]), so floats come out bit for bit as serde_json makes them.

use dump_stats::{STAT_NAMES, Stat};

use crate::model::dump::{Dims, Mode, Name, Record, StatValue, Stats, Strides, dims, strides};

/// Reads records, remembering the last dtype, device, shape and strides it read: consecutive
/// records mostly share them, and then they are not looked up again.
#[derive(Default)]
pub(super) struct LineReader {
    dtype: Name,
    device: Name,
    shape: Dims,
    stride: Strides,
}

impl LineReader {
    /// Reads one record (the text of a JSON object, surrounding whitespace allowed) into
    /// `out`; false, with `out` in any state, where it declines.
    pub(super) fn read(&mut self, text: &[u8], out: &mut Record) -> bool {
        let mut c = Cursor {
            b: text,
            i: 0,
            last: self,
        };
        if c.record(out).is_none() {
            return false;
        }
        c.ws();
        c.i == text.len()
    }
}

/// Reads one record on its own.
#[cfg(test)]
fn record(text: &[u8]) -> Option<Record> {
    let mut out = crate::model::dump::Record::default();
    LineReader::default().read(text, &mut out).then_some(out)
}

/// A statistic that is a number, converted exactly as serde_json converts it; `None` where
/// serde_json refuses it.
fn number(token: &[u8]) -> Option<Option<f64>> {
    match serde_json_floats() {
        Some(pow10) => match serde_json_f64(token, pow10) {
            Some(value) => Some(Some(value)),
            None => serde_json::from_slice::<StatValue>(token).ok().map(|v| v.0),
        },
        None => serde_json::from_slice::<StatValue>(token).ok().map(|v| v.0),
    }
}

/// Powers of ten `1e0..=1e308` when this build's serde_json converts decimals as
/// [`serde_json_f64`] does (its default: the significand as an `f64`, then one multiplication
/// or division by a power of ten; not always the nearest float to a 17-digit decimal); `None`
/// when it converts otherwise (its `float_roundtrip` feature), and then serde_json converts
/// every number. Decided once, on a decimal where the two ways give different floats.
fn serde_json_floats() -> Option<&'static [f64; 309]> {
    static POW10: std::sync::OnceLock<Option<[f64; 309]>> = std::sync::OnceLock::new();
    POW10
        .get_or_init(|| {
            let pow10: [f64; 309] =
                std::array::from_fn(|i| format!("1e{i}").parse().expect("a power of ten"));
            let probes: [&[u8]; 4] = [
                b"0.17976991766744273",
                b"-12.5e-3",
                b"7",
                b"-9223372036854775808",
            ];
            probes
                .iter()
                .all(|probe| {
                    let serde = serde_json::from_slice::<StatValue>(probe)
                        .ok()
                        .and_then(|v| v.0);
                    let ours = serde_json_f64(probe, &pow10);
                    serde.map(f64::to_bits) == ours.map(f64::to_bits)
                })
                .then_some(pow10)
        })
        .as_ref()
}

/// serde_json's conversion of a JSON number to `f64` (`parse_integer`, `parse_decimal`,
/// `parse_exponent`, `f64_from_parts`), for numbers whose digits fit its `u64` significand;
/// `None` for anything else (longer significands, malformed or out-of-range numbers), which
/// is then left to serde_json itself.
fn serde_json_f64(token: &[u8], pow10: &[f64; 309]) -> Option<f64> {
    // `overflow!(a * 10 + b, max)` of serde_json.
    fn grows(a: u64, b: u64) -> Option<u64> {
        let max = u64::MAX;
        (!(a >= max / 10 && (a > max / 10 || b > max % 10))).then(|| a * 10 + b)
    }
    let digit = |i: usize| match token.get(i) {
        Some(&c @ b'0'..=b'9') => Some(u64::from(c - b'0')),
        _ => None,
    };
    let positive = token.first() != Some(&b'-');
    let mut i = usize::from(!positive);
    let mut significand = match digit(i)? {
        // There can be only one leading '0'.
        0 if digit(i + 1).is_some() => return None,
        d => d,
    };
    i += 1;
    if significand > 0 {
        while let Some(d) = digit(i) {
            significand = grows(significand, d)?;
            i += 1;
        }
    }
    let mut exponent: i32 = 0;
    let mut float = false;
    if token.get(i) == Some(&b'.') {
        float = true;
        i += 1;
        while let Some(d) = digit(i) {
            significand = grows(significand, d)?;
            exponent -= 1;
            i += 1;
        }
        if exponent == 0 {
            return None;
        }
    }
    if let Some(b'e' | b'E') = token.get(i) {
        float = true;
        i += 1;
        let positive_exp = match token.get(i) {
            Some(b'+') => {
                i += 1;
                true
            }
            Some(b'-') => {
                i += 1;
                false
            }
            _ => true,
        };
        let mut exp = i32::try_from(digit(i)?).expect("a digit");
        i += 1;
        while let Some(d) = digit(i) {
            let d = i32::try_from(d).expect("a digit");
            if exp >= i32::MAX / 10 && (exp > i32::MAX / 10 || d > i32::MAX % 10) {
                return None;
            }
            exp = exp * 10 + d;
            i += 1;
        }
        exponent = if positive_exp {
            exponent.saturating_add(exp)
        } else {
            exponent.saturating_sub(exp)
        };
    }
    if i != token.len() {
        return None;
    }
    if !float {
        // `ParserNumber::U64`, `I64` or (for `-0` and what `i64` cannot hold) `F64`.
        return Some(if positive {
            significand as f64
        } else {
            let neg = (significand as i64).wrapping_neg();
            if neg >= 0 {
                -(significand as f64)
            } else {
                neg as f64
            }
        });
    }
    let mut f = significand as f64;
    loop {
        match pow10.get(exponent.unsigned_abs() as usize) {
            Some(&pow) => {
                if exponent >= 0 {
                    f *= pow;
                    if f.is_infinite() {
                        return None;
                    }
                } else {
                    f /= pow;
                }
                break;
            }
            None => {
                if f == 0.0 {
                    break;
                }
                if exponent >= 0 {
                    return None;
                }
                f /= 1e308;
                exponent += 308;
            }
        }
    }
    Some(if positive { f } else { -f })
}

/// Record keys in the probe's order, which is tried first.
const RECORD_KEYS: [&[u8]; 27] = [
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
    b"shard",
    b"collective",
    b"stats_path",
    b"local_checksum",
    b"received",
];

/// Every key as bytes.
macro_rules! keys {
    ($($key:literal),* $(,)?) => {
        [$($key.as_bytes()),*]
    };
}

/// The statistics' keys, from the one list (`dump_stats`).
const STATS_KEYS: [&[u8]; STAT_NAMES.len()] = dump_stats::with_stat_names!(keys);

/// `"key": ` for every key, as the probe writes them.
macro_rules! literals {
    ($($key:literal),* $(,)?) => {
        [$(concat!("\"", $key, "\": ").as_bytes()),*]
    };
}

const RECORD_LITERALS: [&[u8]; 27] = literals!(
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
    "shard",
    "collective",
    "stats_path",
    "local_checksum",
    "received",
);

const STATS_LITERALS: [&[u8]; STAT_NAMES.len()] = dump_stats::with_stat_names!(literals);

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
    last: &'a mut LineReader,
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

    /// A JSON array of at most 8 items (dimensions), read into `items`; returns how many.
    fn array<T: Copy>(
        &mut self,
        items: &mut [T; 8],
        read: impl Fn(&mut Self) -> Option<T>,
    ) -> Option<usize> {
        self.eat(b'[')?;
        self.ws();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(0);
        }
        let mut n = 0;
        loop {
            *items.get_mut(n)? = read(self)?;
            n += 1;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(n);
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
                number(&self.b[start..self.i])
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
        let mut values: [Option<f64>; Stat::VALUES.len()] = [None; Stat::VALUES.len()];
        let seen = self.object(&STATS_KEYS, &STATS_LITERALS, |c, index| {
            match Stat::ALL[index] {
                Stat::NanCount => nan_count = c.u64()?,
                Stat::InfCount => inf_count = c.u64()?,
                Stat::FiniteCount => finite_count = c.option(Self::u64)?,
                value => values[value.value_index()] = c.stat()?,
            }
            Some(())
        })?;
        // nan_count, inf_count and the four value statistics are required; the rest default.
        let required = [
            Stat::NanCount,
            Stat::InfCount,
            Stat::MaxAbs,
            Stat::Min,
            Stat::Max,
            Stat::Mean,
        ];
        if !required.iter().all(|s| seen[s.index()]) {
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
            counts_known: true,
            reduced_in_dtype: false,
        })
    }

    fn record(&mut self, r: &mut Record) -> Option<()> {
        *r = Record::default();
        let seen = self.object(&RECORD_KEYS, &RECORD_LITERALS, |c, index| {
            match index {
                0 => r.seq = c.u64()?,
                1 => r.stage = Name::new(c.string()?),
                2 => r.occurrence = c.u32()?,
                3 => {
                    r.mode = match c.string()? {
                        "eager" => Mode::Eager,
                        "graph" => Mode::Graph,
                        _ => return None,
                    }
                }
                4 => {
                    let text = c.string()?;
                    if *c.last.dtype != *text {
                        c.last.dtype = Name::new(text);
                    }
                    r.dtype = c.last.dtype.clone();
                }
                5 => {
                    let mut items = [0; 8];
                    let n = c.array(&mut items, Self::u64)?;
                    if *c.last.shape != items[..n] {
                        c.last.shape = dims(&items[..n]);
                    }
                    r.shape = c.last.shape.clone();
                }
                6 => {
                    let mut items = [0; 8];
                    let n = c.array(&mut items, Self::i64)?;
                    if *c.last.stride != items[..n] {
                        c.last.stride = strides(&items[..n]);
                    }
                    r.stride = c.last.stride.clone();
                }
                7 => r.storage_offset = c.u64()?,
                8 => r.element_size = c.u32()?,
                9 => r.numel = c.u64()?,
                10 => r.storage_ptr = c.option(Self::u64)?,
                11 => r.storage_id = c.option(Self::u64)?,
                12 => r.storage_nbytes = c.option(Self::u64)?,
                13 => r.data_ptr = c.option(Self::u64)?,
                14 => {
                    let text = c.string()?;
                    if *c.last.device != *text {
                        c.last.device = Name::new(text);
                    }
                    r.device = c.last.device.clone();
                }
                15 => r.device_format = c.option(Self::i64)?,
                16 => r.is_contiguous = c.bool()?,
                17 => r.stats = c.option(Self::stats)?,
                18 => r.tensor_file = c.option(|c| c.string().map(str::to_owned))?,
                19 => r.rows_kept = c.option(Self::u64)?,
                20 => r.rows_total = c.option(Self::u64)?,
                21 => r.truncated = c.option(Self::bool)?,
                // An annotation that does not parse is left to serde, whose error names it.
                22 => r.shard = c.option(|c| c.string().and_then(|t| t.parse().ok()))?,
                23 => r.collective = c.option(|c| c.string().map(Name::new))?,
                24 => r.stats_path = c.option(|c| c.string().map(Name::new))?,
                25 => r.local_checksum = c.stat()?,
                26 => r.received = c.option(Self::u64)?,
                _ => return None,
            }
            Some(())
        })?;
        // Required: seq..numel (0..=9), device (14), is_contiguous (16); the options default to None.
        let required = (0..=9).chain([14, 16]);
        required.into_iter().all(|i| seen[i]).then_some(())
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
    fn numbers_convert_bit_for_bit_as_serde_json_converts_them() {
        let pow10 = serde_json_floats().expect("this build's serde_json converts the default way");
        let mut seed: u64 = 3;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let mut converted = 0;
        for round in 0..200_000 {
            let mut text = String::new();
            if next(3) == 0 {
                text.push('-');
            }
            let digits = 1 + next(if round % 10 == 0 { 24 } else { 18 });
            for d in 0..digits {
                let c = if d == 0 && next(4) != 0 {
                    1 + next(9)
                } else {
                    next(10)
                };
                text.push(char::from(b'0' + c as u8));
            }
            if next(2) == 0 {
                text.push('.');
                for _ in 0..next(19) {
                    text.push(char::from(b'0' + next(10) as u8));
                }
            }
            if next(3) == 0 {
                text.push(['e', 'E'][next(2) as usize]);
                match next(3) {
                    0 => text.push('-'),
                    1 => text.push('+'),
                    _ => {}
                }
                let exp = if round % 50 == 0 {
                    next(100_000)
                } else {
                    next(400)
                };
                if round % 97 != 0 {
                    text.push_str(&exp.to_string());
                }
            }
            let serde = serde_json::from_str::<StatValue>(&text).ok().map(|v| v.0);
            if let Some(ours) = serde_json_f64(text.as_bytes(), pow10) {
                converted += 1;
                assert_eq!(
                    serde.map(|v| v.map(f64::to_bits)),
                    Some(Some(ours.to_bits())),
                    "{text}"
                );
            }
            assert_eq!(
                number(text.as_bytes()).map(|v| v.map(f64::to_bits)),
                serde.map(|v| v.map(f64::to_bits)),
                "{text}"
            );
        }
        assert!(converted > 100_000, "{converted}");
        for edge in [
            "0",
            "-0",
            "-0.0",
            "0e999999",
            "1e308",
            "1e309",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775809",
            "1.",
            "01",
            "-",
            "1e",
            "1e+",
            "2.5E-400",
        ] {
            assert_eq!(
                number(edge.as_bytes()).map(|v| v.map(f64::to_bits)),
                serde_json::from_str::<StatValue>(edge)
                    .ok()
                    .map(|v| v.0.map(f64::to_bits)),
                "{edge}"
            );
        }
    }

    #[test]
    fn a_probe_line_reads_as_serde_reads_it() {
        let fast = record(LINE.as_bytes()).expect("the probe's layout");
        assert_eq!(Some(fast), serde(LINE));
    }

    #[test]
    fn stats_path_is_read_after_the_annotations() {
        let line = LINE.replace(
            "\"tensor_file\": null",
            "\"tensor_file\": null, \"collective\": \"all_reduce\", \"stats_path\": \"inductor\"",
        );
        let fast = record(line.as_bytes()).expect("the probe's layout");
        assert_eq!(fast.stats_path.as_deref(), Some("inductor"));
        assert_eq!(Some(fast), serde(&line));
        let without = record(LINE.as_bytes()).expect("the probe's layout");
        assert_eq!(without.stats_path, None);
    }

    #[test]
    fn local_checksum_and_received_are_read_as_serde_reads_them() {
        let line = LINE.replace(
            "\"tensor_file\": null",
            "\"tensor_file\": null, \"shard\": \"tp:1\", \"stats_path\": \"torch\", \
             \"local_checksum\": -0.123456789012345, \"received\": 7",
        );
        let fast = record(line.as_bytes()).expect("the probe's layout");
        assert_eq!(fast.local_checksum, Some(-0.123456789012345));
        assert_eq!(fast.received, Some(7));
        assert_eq!(Some(fast), serde(&line));
        let nan = line.replace("-0.123456789012345", "\"nan\"");
        assert!(
            record(nan.as_bytes())
                .unwrap()
                .local_checksum
                .unwrap()
                .is_nan()
        );
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
