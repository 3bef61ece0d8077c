//! The values msprobe's JSON reader ([`super::json`]) produces: general JSON ([`Value`]) and
//! msprobe's leaf dicts ([`Leaf`], a tensor's or a value's description), read straight into
//! their fields instead of a general object. Data only; reading is in `json`.
//!
//! A leaf is a dict with a string `type` (msprobe's `is_leaf_data`); msprobe writes `type`
//! first, so the reader hands an object whose first key is `type` with a string value to its
//! leaf reader, and a dump's hundreds of thousands of tensor dicts cost no general object each.
//! A leaf dict of another key order is read as an object and converted by
//! [`Leaf::from_fields`]: the same leaf either way.

use std::borrow::Cow;

use crate::model::dump::{Dims, dims};

/// A parsed JSON value. Numbers are `f64` (msprobe's integers are shapes, sizes and small
/// scalars, all exact below 2⁵³); objects keep their keys in file order, repeats included.
/// An object whose first key is `type` with a string value is an msprobe leaf dict and is
/// read as a [`Leaf`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Null,
    Bool(bool),
    Number(f64),
    String(Cow<'a, str>),
    Array(Vec<Value<'a>>),
    Object(Vec<(Cow<'a, str>, Value<'a>)>),
    Leaf(Box<Leaf<'a>>),
}

impl<'a> Value<'a> {
    /// The value of `key` in an object (the last one when the key repeats, as Python's
    /// `json` keeps it); `None` for a missing key or a value that is not an object.
    pub fn get(&self, key: &str) -> Option<&Value<'a>> {
        match self {
            Value::Object(fields) => fields.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }
}

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
    pub(super) fn of(value: &Value<'_>) -> Stat {
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
    pub(super) fn of(value: &Value<'_>) -> Scalar {
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
pub(super) fn sizes(items: &[Value<'_>]) -> Option<Vec<u64>> {
    items
        .iter()
        .map(|v| match *v {
            Value::Number(n) if n >= 0.0 && n.fract() == 0.0 && n < 2f64.powi(63) => Some(n as u64),
            _ => None,
        })
        .collect()
}
