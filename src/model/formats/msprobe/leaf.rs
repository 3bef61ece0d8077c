//! msprobe's leaf dicts (a tensor's or a value's description), read straight into a
//! [`Leaf`] instead of a general JSON object.
//!
//! A leaf is a dict with a string `type` (msprobe's `is_leaf_data`); msprobe writes `type`
//! first, so [`super::json::Reader`] hands an object whose first key is `type` with a
//! string value to [`read_rest`], and a dump's hundreds of thousands of tensor dicts cost no
//! general object each. A leaf dict of another key order is read as an object and converted
//! by [`Leaf::from_fields`]: the same leaf either way.

use std::borrow::Cow;

use super::json::{Error, Reader, Value};
use crate::model::dump::{Dims, dims};

/// A statistic as written: a number (NaN and ±inf included), a bool, or nothing (absent,
/// `null`, anything else).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Stat {
    #[default]
    Absent,
    Null,
    Number(f64),
    Bool(bool),
}

impl Stat {
    fn of(value: &Value<'_>) -> Stat {
        match *value {
            Value::Number(v) => Stat::Number(v),
            Value::Bool(b) => Stat::Bool(b),
            _ => Stat::Null,
        }
    }
}

/// A leaf's `value` (scalars, sizes, strings…).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Scalar {
    #[default]
    Absent,
    Number(f64),
    Bool(bool),
    /// A list of non-negative integers (a `torch.Size`, a slice's bounds).
    Sizes(Dims),
    /// A string, `null`, or anything else.
    Other,
}

impl Scalar {
    fn of(value: &Value<'_>) -> Scalar {
        match value {
            &Value::Number(v) => Scalar::Number(v),
            &Value::Bool(b) => Scalar::Bool(b),
            Value::Array(items) => match sizes(items) {
                Some(s) => Scalar::Sizes(dims(&s)),
                None => Scalar::Other,
            },
            _ => Scalar::Other,
        }
    }
}

/// One leaf dict: the fields dumpview reads (others are stepped over).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Leaf<'a> {
    /// `type`: `torch.Tensor`, `int`, `float`, `bool`, `str`, `torch.Size`, `slice`, …
    pub kind: Cow<'a, str>,
    /// `dtype`, as written (`torch.float32`); tensors and arrays have one.
    pub dtype: Option<Cow<'a, str>>,
    /// `shape`, when it is a list of sizes.
    pub shape: Option<Dims>,
    /// `Max`, `Min`, `Mean`, `Norm`.
    pub stats: [Stat; 4],
    pub value: Scalar,
    /// `data_name` (tensor mode): the file in dump_tensor_data/.
    pub data_name: Option<Cow<'a, str>>,
    /// `md5` (summary_mode md5 or xor).
    pub md5: Option<Cow<'a, str>>,
}

const STAT_KEYS: [&str; 4] = ["Max", "Min", "Mean", "Norm"];

impl<'a> Leaf<'a> {
    /// A leaf from a general object's fields (when `type` was not its first key); the last
    /// of a repeated key counts, as in Python.
    pub fn from_fields(fields: &[(Cow<'a, str>, Value<'a>)]) -> Leaf<'a> {
        let mut leaf = Leaf::default();
        for (key, value) in fields {
            let text = || value.as_str().map(|s| Cow::Owned(s.to_owned()));
            match &**key {
                "type" => leaf.kind = text().unwrap_or_default(),
                "dtype" => leaf.dtype = text(),
                "shape" => {
                    leaf.shape = match value {
                        Value::Array(items) => sizes(items).map(|s| dims(&s)),
                        _ => None,
                    }
                }
                "value" => leaf.value = Scalar::of(value),
                "data_name" => leaf.data_name = text(),
                "md5" => leaf.md5 = text(),
                other => {
                    if let Some(i) = STAT_KEYS.iter().position(|k| *k == other) {
                        leaf.stats[i] = Stat::of(value);
                    }
                }
            }
        }
        leaf
    }
}

/// A list as sizes: `None` unless every item is a non-negative integer.
fn sizes(items: &[Value<'_>]) -> Option<Vec<u64>> {
    items
        .iter()
        .map(|v| match *v {
            Value::Number(n) if n >= 0.0 && n.fract() == 0.0 && n < 2f64.powi(63) => Some(n as u64),
            _ => None,
        })
        .collect()
}

/// The rest of a leaf dict whose first member, `"type": kind`, is read: members up to and
/// including its `}`.
pub fn read_rest<'a>(reader: &mut Reader<'a>, kind: Cow<'a, str>) -> Result<Leaf<'a>, Error> {
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
mod tests {
    use super::*;
    use crate::model::formats::msprobe::json::parse;

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
