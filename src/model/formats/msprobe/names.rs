//! Row names as `msprobe compare` gives them, and the keys it pairs rows by.
//!
//! msprobe 26.2.0, `core/compare/utils.py` (read_op, op_item_parse, gen_op_item,
//! reorder_index) and `core/compare/acc_compare.py` (split_data_name_components,
//! gen_data_df, update_backward_call). One entry of dump.json becomes one row per leaf:
//! `<entry>.input.<path>` for `input_args`, `input_kwargs` and a backward's `input`,
//! `<entry>.output.<path>`, `<entry>.parameters.<name>`, and for a parameters_grad entry
//! `<entry>.<name>` (its one-element lists add no index). A leaf with a `data_name`
//! (tensor mode) is named by that file name without its extension instead. Rows of an
//! entry come inputs first, then parameters, outputs, parameters_grad.
//!
//! Rows pair by name after one rewrite: every backward entry's call number is replaced by
//! its ordinal among the backward entries of the same operator in file order
//! (`Functional.conv2d.52.backward`, the first conv2d backward in the file, pairs as
//! `Functional.conv2d.0.backward`). Forward numbers and parameters_grad stay.

use std::borrow::Cow;
use std::collections::HashMap;

use super::value::Leaf;
use super::value::Value;

/// What part of a call a row shows; decides its place in the entry (msprobe's `state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    /// Arguments (positional and keyword) of a forward call, incoming gradients of a backward.
    Input,
    Parameters,
    Output,
    ParametersGrad,
}

/// One row of an entry: its name as msprobe's table shows it, and its leaf (`None`: a
/// `null`, or a P2POp without a tensor).
#[derive(Debug)]
pub struct Row<'v, 'a> {
    pub name: String,
    pub part: Part,
    pub leaf: Option<Cow<'v, Leaf<'a>>>,
}

const PARAMS_GRAD: &str = "parameters_grad";
const P2POP: &str = "torch.distributed.P2POp";

/// The keys of an entry that hold rows, in the order msprobe reads them
/// (`CompareConst.IO_NAME_MAPPING`), with the name part each adds.
const IO_KEYS: [(&str, &str, Part); 5] = [
    ("input_args", ".input", Part::Input),
    ("input_kwargs", ".input", Part::Input),
    ("input", ".input", Part::Input),
    ("output", ".output", Part::Output),
    ("parameters", ".parameters", Part::Parameters),
];

/// The rows of entry `name`, in msprobe's row order (inputs, parameters, outputs,
/// parameters_grad; file order within each).
pub fn rows<'v, 'a>(name: &str, entry: &'v Value<'a>) -> Vec<Row<'v, 'a>> {
    let mut out = Vec::new();
    let mut path = String::with_capacity(name.len() + 32);
    path.push_str(name);
    let (second_last, last) = last_two(name);
    if last == PARAMS_GRAD || second_last == PARAMS_GRAD {
        // Its lists are one-element: no index is added below an entry named so.
        walk(entry, &mut path, Part::ParametersGrad, true, &mut out);
    } else if matches!(entry, Value::Object(_)) {
        let grads = name.split('.').any(|p| p == PARAMS_GRAD);
        for (key, suffix, part) in IO_KEYS {
            if let Some(value) = entry.get(key) {
                path.push_str(suffix);
                walk(value, &mut path, part, grads, &mut out);
                path.truncate(name.len());
            }
        }
    }
    // A stable sort on the part is reorder_index's regrouping.
    out.sort_by_key(|row| row.part);
    out
}

/// The last two dot-separated parts of a name (`""` where there are fewer).
fn last_two(name: &str) -> (&str, &str) {
    let mut parts = name.rsplit('.');
    let last = parts.next().unwrap_or("");
    (parts.next().unwrap_or(""), last)
}

/// op_item_parse below `path`: one row per leaf, `null` included; empty lists and dicts
/// (and bare numbers or strings, which msprobe never writes) give none. `grads`: the
/// name has a `parameters_grad` part, so list items add no index.
fn walk<'v, 'a>(
    value: &'v Value<'a>,
    path: &mut String,
    part: Part,
    grads: bool,
    out: &mut Vec<Row<'v, 'a>>,
) {
    let at = path.len();
    match value {
        Value::Null => out.push(Row {
            name: path.clone(),
            part,
            leaf: None,
        }),
        Value::Leaf(leaf) => out.push(row(path, part, Some(Cow::Borrowed(&**leaf)))),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                if !grads {
                    use std::fmt::Write;
                    let _ = write!(path, ".{i}");
                }
                walk(item, path, part, grads, out);
                path.truncate(at);
            }
        }
        Value::Object(fields) if !fields.is_empty() => {
            if value.get("class_type").and_then(Value::as_str) == Some(P2POP) {
                let tensor = match value.get("tensor") {
                    Some(Value::Leaf(leaf)) => Some(Cow::Borrowed(&**leaf)),
                    Some(Value::Object(fields)) => Some(Cow::Owned(Leaf::from_fields(fields))),
                    _ => None,
                };
                out.push(row(path, part, tensor));
            } else if matches!(value.get("type"), Some(Value::String(_))) {
                out.push(row(path, part, Some(Cow::Owned(Leaf::from_fields(fields)))));
            } else {
                for (key, child) in fields {
                    path.push('.');
                    path.push_str(key);
                    let grads = grads || key.split('.').any(|p| p == PARAMS_GRAD);
                    walk(child, path, part, grads, out);
                    path.truncate(at);
                }
            }
        }
        _ => {}
    }
}

/// gen_op_item's name: a non-empty `data_name` minus its extension, else the path.
fn row<'v, 'a>(path: &str, part: Part, leaf: Option<Cow<'v, Leaf<'a>>>) -> Row<'v, 'a> {
    let data_name = leaf
        .as_ref()
        .and_then(|l| l.data_name.as_deref())
        .filter(|d| !d.is_empty());
    let name = match data_name {
        Some(d) => d.rsplit_once('.').map_or(d, |(stem, _)| stem).to_string(),
        None => path.to_string(),
    };
    Row { name, part, leaf }
}

/// How an entry name splits (split_data_name_components).
#[derive(Debug, PartialEq, Eq)]
struct Split<'n> {
    /// The name without its call number and direction: `Functional.conv2d`, `Module.fc.Linear`.
    op: String,
    /// The two last parts: `("0", "backward")` for an API, `("backward", "0")` for a module.
    call: (&'n str, &'n str),
    backward: bool,
}

fn split(name: &str) -> Option<Split<'_>> {
    let parts: Vec<&str> = name.split('.').collect();
    let n = parts.len();
    let last = parts[n - 1];
    let second_last = if n >= 2 { parts[n - 2] } else { "" };
    if last == PARAMS_GRAD || second_last == PARAMS_GRAD {
        let op = if n > 1 {
            parts[..n - 1].join(".")
        } else {
            String::new()
        };
        return (!op.is_empty()).then_some(Split {
            op,
            call: (second_last, last),
            backward: false,
        });
    }
    for direction in ["forward", "backward"] {
        if last == direction || second_last == direction {
            let op = if n > 2 {
                parts[..n - 2].join(".")
            } else {
                String::new()
            };
            return (!op.is_empty()).then_some(Split {
                op,
                call: (second_last, last),
                backward: direction == "backward",
            });
        }
    }
    None
}

/// Whether entry `name` is a backward call, whose rows [`Keys`] renumbers.
pub fn is_backward(name: &str) -> bool {
    split(name).is_some_and(|s| s.backward)
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Pairing keys for the rows of each entry in file order (update_backward_call).
#[derive(Default)]
pub struct Keys {
    backward_calls: HashMap<String, u32>,
}

/// What [`Keys::entry`] says about one entry.
pub enum EntryKeys {
    /// msprobe compare skips the entry (its name has no direction): no rows.
    Skipped,
    /// Rows pair by their own names.
    Same,
    /// A backward entry: rows pair by `new_entry` + the row's suffix ([`renamed`]), where
    /// `new_entry` is the name with the call number replaced (possibly by itself).
    Renamed { new_entry: String },
}

impl Keys {
    /// Looks at the next entry in file order.
    pub fn entry(&mut self, name: &str) -> EntryKeys {
        let Some(split) = split(name) else {
            return EntryKeys::Skipped;
        };
        if !split.backward {
            return EntryKeys::Same;
        }
        let count = self.backward_calls.entry(split.op.clone()).or_insert(0);
        let order = *count;
        *count += 1;
        let (head, tail) = split.call;
        let call = match (is_digits(head), is_digits(tail)) {
            (true, true) => format!("{order}.{order}"),
            (true, false) => format!("{order}.{tail}"),
            (false, true) => format!("{head}.{order}"),
            (false, false) => return EntryKeys::Same,
        };
        EntryKeys::Renamed {
            new_entry: format!("{}.{call}", split.op),
        }
    }
}

/// The pairing key of row `row_name` of entry `entry` (msprobe's `op_name_update`):
/// `new_entry` + the row name with every `entry` in it removed, as Python's `replace`.
pub fn renamed(row_name: &str, entry: &str, new_entry: &str) -> String {
    format!("{new_entry}{}", row_name.replace(entry, ""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::formats::msprobe::json::parse;

    fn names(entry: &str, json: &str) -> Vec<String> {
        let value = parse(json.as_bytes()).unwrap();
        rows(entry, &value).into_iter().map(|l| l.name).collect()
    }

    #[test]
    fn leaves_flatten_as_msprobe_names_rows() {
        let t = r#"{"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2]}"#;
        let i = r#"{"type": "int", "value": 2}"#;
        let entry = format!(
            r#"{{"output": [{t}], "input_args": [{t}, null, [{i}, {i}], [], {i}],
                "input_kwargs": {{"weight": {t}, "group": null, "opts": {{}}}},
                "parameters": {{"bias": {t}}}, "is_recompute": false}}"#
        );
        assert_eq!(
            names("Functional.conv2d.0.forward", &entry),
            [
                "Functional.conv2d.0.forward.input.0",
                "Functional.conv2d.0.forward.input.1",
                "Functional.conv2d.0.forward.input.2.0",
                "Functional.conv2d.0.forward.input.2.1",
                "Functional.conv2d.0.forward.input.4",
                "Functional.conv2d.0.forward.input.weight",
                "Functional.conv2d.0.forward.input.group",
                "Functional.conv2d.0.forward.parameters.bias",
                "Functional.conv2d.0.forward.output.0",
            ]
        );
        let grads = format!(r#"{{"weight": [{t}], "bias": [{t}]}}"#);
        assert_eq!(
            names("Module.fc.Linear.parameters_grad.0", &grads),
            [
                "Module.fc.Linear.parameters_grad.0.weight",
                "Module.fc.Linear.parameters_grad.0.bias"
            ]
        );
        let tensor_mode = r#"{"input_kwargs": {"weight": {"type": "torch.Tensor",
            "data_name": "Functional.linear.0.forward.kwargs.weight.pt"}}}"#;
        assert_eq!(
            names("Functional.linear.0.forward", tensor_mode),
            ["Functional.linear.0.forward.kwargs.weight"]
        );
    }

    #[test]
    fn backward_calls_are_renumbered_in_file_order() {
        let mut keys = Keys::default();
        let mut seen = Vec::new();
        for name in [
            "Functional.conv2d.1.forward",
            "Functional.conv2d.1.backward",
            "Module.fc.Linear.backward.3",
            "Functional.conv2d.0.backward",
            "Module.fc.Linear.parameters_grad.1",
            "Module.fc.Linear.backward.0",
            "optimizer",
        ] {
            seen.push(match keys.entry(name) {
                EntryKeys::Skipped => "skipped".to_string(),
                EntryKeys::Same => name.to_string(),
                EntryKeys::Renamed { new_entry } => new_entry,
            });
        }
        assert_eq!(
            seen,
            [
                "Functional.conv2d.1.forward",
                "Functional.conv2d.0.backward",
                "Module.fc.Linear.backward.0",
                "Functional.conv2d.1.backward",
                "Module.fc.Linear.parameters_grad.1",
                "Module.fc.Linear.backward.1",
                "skipped",
            ]
        );
        assert_eq!(
            renamed(
                "Functional.conv2d.0.backward.input.0",
                "Functional.conv2d.0.backward",
                "Functional.conv2d.1.backward"
            ),
            "Functional.conv2d.1.backward.input.0"
        );
    }
}
