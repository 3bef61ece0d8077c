//! What a side computed outside replay_op.py needs to be the same call replay_op.py makes:
//! the captured input set with replay.json's `--arg` overrides and `--arg-map` renames
//! applied in the script's order ([`call_inputs`]), the `input_dtype` words it records
//! ([`input_dtype_text`]), and its split of failures into crash and unsupported
//! ([`classify`]). Pure: feature `torch`'s in-process references (`services::replay`) use
//! these on what they read.

use super::record::{ReplayRecord, Status};
use crate::model::input_set::{InputSet, InputValue};
use crate::model::tensor::DType;

/// The arguments replay_op.py passed the candidate, rebuilt from the captured `set`:
/// `--arg` overrides (replay.json's `arg_overrides`, already parsed by the script: an int
/// given for a captured float is a float there) replace captured values in place or are
/// added after them, in the order of replay.json's `args`; `--arg-map` renames
/// (`arg_map`) then give each its parameter name. A non-finite float override is recorded
/// as the string `"nan"`, `"inf"` or `"-inf"` and read back as that float.
///
/// # Errors
/// An argument replay.json lists that is neither captured nor overridden (a record of
/// another input set).
pub fn call_inputs(record: &ReplayRecord, set: &InputSet) -> Result<InputSet, String> {
    let mut names: Vec<&str> = record.args.iter().map(|a| a.name.as_str()).collect();
    if names.is_empty() {
        names = set.args.iter().map(|(n, _)| n.as_str()).collect();
        names.extend(
            record
                .arg_overrides
                .keys()
                .map(String::as_str)
                .filter(|n| set.get(n).is_none()),
        );
    }
    let mut args = Vec::with_capacity(names.len());
    for name in names {
        let value = match (record.arg_overrides.get(name), set.get(name)) {
            (Some(v), _) => from_json(v),
            (None, Some(v)) => v.clone(),
            (None, None) => {
                return Err(format!(
                    "replay.json lists argument `{name}`, which {} does not hold and no --arg sets",
                    set.path.display()
                ));
            }
        };
        let passed_as = record.arg_map.get(name).map_or(name, String::as_str);
        args.push((passed_as.to_string(), value));
    }
    Ok(InputSet {
        path: set.path.clone(),
        args,
    })
}

/// An `--arg` value as replay.json records it (replay_op.py's `_json_value`), as the Python
/// value the script passed.
fn from_json(value: &serde_json::Value) -> InputValue {
    use serde_json::Value;
    match value {
        Value::Null => InputValue::None,
        Value::Bool(b) => InputValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => InputValue::Int(i),
            None => InputValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => match s.as_str() {
            "nan" => InputValue::Float(f64::NAN),
            "inf" => InputValue::Float(f64::INFINITY),
            "-inf" => InputValue::Float(f64::NEG_INFINITY),
            _ => InputValue::Str(s.clone()),
        },
        Value::Array(items) => InputValue::List(items.iter().map(from_json).collect()),
        Value::Object(map) => {
            InputValue::Dict(map.iter().map(|(k, v)| (k.clone(), from_json(v))).collect())
        }
    }
}

/// Every tensor of `value`, nested ones included.
fn tensor_dtypes(value: &InputValue, out: &mut Vec<DType>) {
    match value {
        InputValue::Tensor(t) => out.push(t.dtype),
        InputValue::List(items) | InputValue::Tuple(items) => {
            items.iter().for_each(|v| tensor_dtypes(v, out));
        }
        InputValue::Dict(items) => items.iter().for_each(|(_, v)| tensor_dtypes(v, out)),
        _ => {}
    }
}

/// The words replay_op.py records as a side's `input_dtype`: `as captured` when `widen` is
/// `None`, else each floating dtype of the set (in name order) with what `widen` makes of
/// it, `float64 (upcast from float32)`, or `as captured (no floating tensors)`.
pub fn input_dtype_text(set: &InputSet, widen: Option<&dyn Fn(DType) -> DType>) -> String {
    let Some(widen) = widen else {
        return "as captured".into();
    };
    let mut dtypes = Vec::new();
    set.args
        .iter()
        .for_each(|(_, v)| tensor_dtypes(v, &mut dtypes));
    let mut floats: Vec<&'static str> = dtypes
        .into_iter()
        .filter(|d| d.is_float())
        .map(DType::name)
        .collect();
    floats.sort_unstable();
    floats.dedup();
    if floats.is_empty() {
        return "as captured (no floating tensors)".into();
    }
    let mut parts: Vec<String> = Vec::new();
    for name in floats {
        let dtype = DType::from_name(name).expect("a DType's own name");
        let wide = widen(dtype).name();
        let part = if wide == name {
            wide.to_string()
        } else {
            format!("{wide} (upcast from {name})")
        };
        if !parts.contains(&part) {
            parts.push(part);
        }
    }
    parts.join(", ")
}

/// replay_op.py's `classify`: a failure whose message says `not implemented for`, `not
/// supported` or `unsupported` (any case; Python's `unsupported operand type(s)` excepted)
/// is torch refusing a dtype or layout,
/// [`Status::Unsupported`]; anything else is a [`Status::Crash`].
pub fn classify(message: &str) -> Status {
    let lower = message.to_lowercase();
    // Python's "unsupported operand type(s) for +" is a TypeError in the code, not a refusal.
    let lower = lower.replace("unsupported operand", "");
    if ["not implemented for", "not supported", "unsupported"]
        .iter()
        .any(|w| lower.contains(w))
    {
        Status::Unsupported
    } else {
        Status::Crash
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::model::input_set::CapturedTensor;

    fn tensor(dtype: DType) -> InputValue {
        InputValue::Tensor(CapturedTensor {
            dtype,
            shape: vec![1],
            stride: vec![1],
            offset_in_span: 0,
            storage_offset: 0,
            device: "cpu".into(),
            requires_grad: false,
            span: vec![0; dtype.size()],
        })
    }

    fn record(json: &str) -> ReplayRecord {
        let text = format!(
            r#"{{"format": "dumpview.replay", "version": 1, "stage": "s", "occurrence": 1, {json}}}"#
        );
        ReplayRecord::parse(text.as_bytes()).unwrap()
    }

    fn captured() -> InputSet {
        InputSet {
            path: PathBuf::from("inputs/s#1.pt"),
            args: vec![
                ("x".into(), tensor(DType::Float16)),
                ("weight".into(), tensor(DType::Float32)),
                ("eps".into(), InputValue::Float(1e-6)),
            ],
        }
    }

    #[test]
    fn overrides_replace_in_place_or_follow_and_renames_name_the_parameter() {
        let r = record(
            r#""arg_overrides": {"eps": 1.0, "shape": [256], "scale": "-inf", "mode": "nanny", "n": 3, "flag": null},
               "arg_map": {"x": "input"},
               "args": [{"name": "x"}, {"name": "weight"}, {"name": "eps"}, {"name": "shape"},
                        {"name": "scale"}, {"name": "mode"}, {"name": "n"}, {"name": "flag"}]"#,
        );
        let set = call_inputs(&r, &captured()).unwrap();
        let names: Vec<&str> = set.args.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "input", "weight", "eps", "shape", "scale", "mode", "n", "flag"
            ]
        );
        assert_eq!(set.args[0].1, tensor(DType::Float16));
        assert_eq!(set.get("eps"), Some(&InputValue::Float(1.0)));
        assert_eq!(
            set.get("shape"),
            Some(&InputValue::List(vec![InputValue::Int(256)]))
        );
        assert_eq!(
            set.get("scale"),
            Some(&InputValue::Float(f64::NEG_INFINITY))
        );
        assert_eq!(set.get("mode"), Some(&InputValue::Str("nanny".into())));
        assert_eq!(set.get("n"), Some(&InputValue::Int(3)));
        assert_eq!(set.get("flag"), Some(&InputValue::None));
        // Without args in the record: the captured order, then the added ones.
        let r = record(r#""arg_overrides": {"eps": 0.5, "zz": true}"#);
        let set = call_inputs(&r, &captured()).unwrap();
        let names: Vec<&str> = set.args.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["x", "weight", "eps", "zz"]);
        // A record of another input set.
        let r = record(r#""args": [{"name": "q"}]"#);
        let e = call_inputs(&r, &captured()).unwrap_err();
        assert!(e.contains("`q`") && e.contains("inputs/s#1.pt"), "{e}");
        assert_eq!(set.path, Path::new("inputs/s#1.pt"));
    }

    #[test]
    fn input_dtype_words_are_replay_op_pys() {
        let set = captured();
        let benchmark = |d: DType| match d {
            DType::Float16 => DType::Float32,
            _ => DType::Float64,
        };
        assert_eq!(input_dtype_text(&set, None), "as captured");
        assert_eq!(
            input_dtype_text(&set, Some(&benchmark)),
            "float32 (upcast from float16), float64 (upcast from float32)"
        );
        assert_eq!(
            input_dtype_text(&set, Some(&|_| DType::Float64)),
            "float64 (upcast from float16), float64 (upcast from float32)"
        );
        let ints = InputSet {
            path: PathBuf::from("i.pt"),
            args: vec![(
                "l".into(),
                InputValue::List(vec![tensor(DType::Int64), tensor(DType::Float64)]),
            )],
        };
        assert_eq!(input_dtype_text(&ints, Some(&benchmark)), "float64");
        let ints = InputSet {
            path: PathBuf::from("i.pt"),
            args: vec![("i".into(), tensor(DType::Int64))],
        };
        assert_eq!(
            input_dtype_text(&ints, Some(&benchmark)),
            "as captured (no floating tensors)"
        );
    }

    #[test]
    fn refusals_are_unsupported_and_the_rest_crashes() {
        assert_eq!(
            classify("\"rsqrt_cpu\" not implemented for 'Long'"),
            Status::Unsupported
        );
        assert_eq!(classify("Unsupported dtype Half"), Status::Unsupported);
        assert_eq!(
            classify("linalg.inv: Low precision dtypes not supported"),
            Status::Unsupported
        );
        assert_eq!(
            classify("shape '[12, 4]' is invalid for input of size 3"),
            Status::Crash
        );
        // A TypeError in the candidate's own code is its crash, whatever word it uses.
        assert_eq!(
            classify("unsupported operand type(s) for +: 'Tensor' and 'str'"),
            Status::Crash
        );
    }
}
