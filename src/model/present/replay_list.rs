//! `dumpview replay DUMP --list`: the document (`--json`) and its text, as
//! assets/replay_op.py's `--list` has always printed them (docs/replay.md), built by
//! `services::replay_list` from the manifests and the file names under `inputs/` without
//! any Python.
//!
//! Argument descriptions keep the manifest's key order (the order `capture_inputs()` received
//! them), so they are held as [`Ordered`] JSON rather than `serde_json::Value`, whose maps
//! sort their keys in this build.

use std::fmt::Write as _;

use serde::ser::{SerializeMap, SerializeSeq};

/// The `format` of the `--json` document.
pub const LIST_FORMAT: &str = "dumpview.replay.list";
/// Its `version`.
pub const LIST_VERSION: u32 = 1;

/// What an unfinished window's input sets lack (replay_op.py's `UNFINISHED_NOTE`).
pub const UNFINISHED_NOTE: &str = "no manifest.json (the run stopped before finish(), or is still inside the window): its input sets come from the file names under inputs/ (stage names as the file names spell them: characters other than A-Za-z0-9_.#- became '_'; a .K before .pt marks a name that collided), their arguments from the .pt files alone (no recorded op); which arguments shared one storage is recorded only in the manifest, so each tensor argument is rebuilt on a storage of its own";

/// A JSON value that keeps its objects' key order as written.
#[derive(Debug, Clone, PartialEq)]
pub enum Ordered {
    /// `null`.
    Null,
    /// `true`, `false`.
    Bool(bool),
    /// A number, as serde_json reads it.
    Number(serde_json::Number),
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Ordered>),
    /// An object, in the order written (a repeated key keeps its first place, last value).
    Object(Vec<(String, Ordered)>),
}

impl Ordered {
    /// The value under `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Ordered> {
        match self {
            Ordered::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string it is, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Ordered::String(s) => Some(s),
            _ => None,
        }
    }

    /// Python's `str()` of the value as `json.loads` gives it (`None`, `True`, `[4, 2]`,
    /// `'x'` inside containers): what replay_op.py's `%s` printed.
    pub fn py_str(&self) -> String {
        match self {
            Ordered::String(s) => s.clone(),
            other => other.py_repr(),
        }
    }

    fn py_repr(&self) -> String {
        match self {
            Ordered::Null => "None".into(),
            Ordered::Bool(true) => "True".into(),
            Ordered::Bool(false) => "False".into(),
            Ordered::Number(n) => py_number(n),
            Ordered::String(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
            Ordered::Array(items) => {
                let items: Vec<String> = items.iter().map(Ordered::py_repr).collect();
                format!("[{}]", items.join(", "))
            }
            Ordered::Object(fields) => {
                let fields: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("'{k}': {}", v.py_repr()))
                    .collect();
                format!("{{{}}}", fields.join(", "))
            }
        }
    }

    /// Python's `json.dumps` of the value (`", "` and `": "` separators, ASCII only).
    pub fn py_json(&self) -> String {
        let mut out = String::new();
        self.write_py_json(&mut out);
        out
    }

    fn write_py_json(&self, out: &mut String) {
        match self {
            Ordered::Null => out.push_str("null"),
            Ordered::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Ordered::Number(n) => out.push_str(&py_number(n)),
            Ordered::String(s) => py_json_string(s, out),
            Ordered::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write_py_json(out);
                }
                out.push(']');
            }
            Ordered::Object(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    py_json_string(k, out);
                    out.push_str(": ");
                    v.write_py_json(out);
                }
                out.push('}');
            }
        }
    }
}

/// Python's `repr()` of a JSON number as `json.loads` reads it: an int as written, a float
/// as `float.__repr__` spells it (`1e-05`, `0.0001`, `1.0`, `1e+16`).
fn py_number(n: &serde_json::Number) -> String {
    let Some(f) = n.as_f64().filter(|_| n.is_f64()) else {
        return n.to_string();
    };
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..16).contains(&exp) {
        let fixed = format!("{f}");
        return match fixed.contains('.') {
            true => fixed,
            false => format!("{fixed}.0"),
        };
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

fn py_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

impl serde::Serialize for Ordered {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Ordered::Null => serializer.serialize_unit(),
            Ordered::Bool(b) => serializer.serialize_bool(*b),
            Ordered::Number(n) => n.serialize(serializer),
            Ordered::String(s) => serializer.serialize_str(s),
            Ordered::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Ordered::Object(fields) => {
                let mut map = serializer.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Ordered, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> Result<Ordered, E> {
                Ok(Ordered::Null)
            }
            fn visit_none<E>(self) -> Result<Ordered, E> {
                Ok(Ordered::Null)
            }
            fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Ordered, D::Error> {
                <Ordered as serde::Deserialize>::deserialize(d)
            }
            fn visit_bool<E>(self, b: bool) -> Result<Ordered, E> {
                Ok(Ordered::Bool(b))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Ordered, E> {
                Ok(Ordered::Number(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Ordered, E> {
                Ok(Ordered::Number(n.into()))
            }
            fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Ordered, E> {
                serde_json::Number::from_f64(n)
                    .map(Ordered::Number)
                    .ok_or_else(|| E::custom("a non-finite number"))
            }
            fn visit_str<E>(self, s: &str) -> Result<Ordered, E> {
                Ok(Ordered::String(s.to_string()))
            }
            fn visit_string<E>(self, s: String) -> Result<Ordered, E> {
                Ok(Ordered::String(s))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Ordered, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Ordered::Array(items))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Ordered, A::Error> {
                let mut fields: Vec<(String, Ordered)> = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Ordered>()? {
                    match fields.iter_mut().find(|(k, _)| *k == key) {
                        Some(slot) => slot.1 = value,
                        None => fields.push((key, value)),
                    }
                }
                Ok(Ordered::Object(fields))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// The `--json` document of `replay --list`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ListDocument {
    /// [`LIST_FORMAT`].
    pub format: &'static str,
    /// [`LIST_VERSION`].
    pub version: u32,
    /// The dump as given.
    pub dump: String,
    /// Every window listed, in manifest path order.
    pub windows: Vec<ListWindow>,
}

/// One window of a listing.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ListWindow {
    /// The manifest's path; `None` for an unfinished window.
    pub manifest: Option<String>,
    /// The window directory.
    pub directory: String,
    /// The manifest's `rank` (an unfinished window's, from its directory name).
    pub rank: Ordered,
    /// The manifest's `label`; `null` for an unfinished window.
    pub label: Ordered,
    /// The manifest's `match`.
    #[serde(rename = "match")]
    pub match_: Ordered,
    /// The manifest's `occurrence`.
    pub occurrence: Ordered,
    /// The attempt (the manifest's, else the directory name's `.N`, else 1).
    pub attempt: Ordered,
    /// No manifest.json: the sets come from the file names.
    pub unfinished: bool,
    /// [`UNFINISHED_NOTE`] for an unfinished window.
    pub note: Option<&'static str>,
    /// Cut-off writes (`.tmp.<pid>`) of an unfinished window, relative to it.
    pub cut_off: Vec<String>,
    /// The input sets.
    pub input_sets: Vec<ListSet>,
}

/// One input set of a listing.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ListSet {
    /// `stage#N` (`stage#N.K` for an unfinished window's collided file name).
    pub key: String,
    /// The stage.
    pub stage: Ordered,
    /// N.
    pub occurrence: Ordered,
    /// How many input sets of this stage the window holds.
    pub captured: usize,
    /// The recorded operator.
    pub op: Ordered,
    /// The `.pt` file, relative to the window directory, as the manifest names it.
    pub file: Ordered,
    /// Whether that file is there (a path leaving the window is never there).
    pub file_present: bool,
    /// The file is there and holds 0 bytes: an input set lost (its write never happened).
    pub file_empty: bool,
    /// Every argument, in captured order.
    pub args: Vec<ListArg>,
}

/// One argument of an input set, as replay_op.py's `_list_arg` describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListArg {
    /// The argument's path (`caches[1]`, `opts.eps`).
    pub name: String,
    /// The manifest's `kind`.
    pub kind: Ordered,
    /// A tensor's `dtype`, `shape`, `stride`, `storage_offset`, `device`, `storage_id`,
    /// `is_contiguous`, in that order; a scalar's `value`.
    pub fields: Vec<(&'static str, Ordered)>,
    /// A list's, tuple's or dict's items.
    pub items: Option<Vec<ListArg>>,
}

/// The tensor fields a listing shows, in order.
pub const TENSOR_FIELDS: [&str; 7] = [
    "dtype",
    "shape",
    "stride",
    "storage_offset",
    "device",
    "storage_id",
    "is_contiguous",
];

impl ListArg {
    /// The listing of argument `name` described by `desc` (the manifest's `args[name]`).
    pub fn new(name: &str, desc: &Ordered) -> ListArg {
        let empty = Ordered::Object(Vec::new());
        let desc = match desc {
            Ordered::Object(_) => desc,
            _ => &empty,
        };
        let kind = desc.get("kind").cloned().unwrap_or(Ordered::Null);
        let mut arg = ListArg {
            name: name.to_string(),
            kind: kind.clone(),
            fields: Vec::new(),
            items: None,
        };
        match kind.as_str() {
            Some("tensor") => {
                for key in TENSOR_FIELDS {
                    let value = desc.get(key).cloned().unwrap_or(Ordered::Null);
                    arg.fields.push((key, value));
                }
            }
            Some("list" | "tuple") => {
                let items = match desc.get("items") {
                    Some(Ordered::Array(items)) => items
                        .iter()
                        .enumerate()
                        .map(|(i, d)| ListArg::new(&format!("{name}[{i}]"), d))
                        .collect(),
                    _ => Vec::new(),
                };
                arg.items = Some(items);
            }
            Some("dict") => {
                let items = match desc.get("items") {
                    Some(Ordered::Object(items)) => items
                        .iter()
                        .map(|(k, d)| ListArg::new(&format!("{name}.{k}"), d))
                        .collect(),
                    _ => Vec::new(),
                };
                arg.items = Some(items);
            }
            _ => {
                if let Some(value) = desc.get("value") {
                    arg.fields.push(("value", value.clone()));
                }
            }
        }
        arg
    }

    fn field(&self, key: &str) -> &Ordered {
        self.fields
            .iter()
            .find(|(k, _)| *k == key)
            .map_or(&Ordered::Null, |(_, v)| v)
    }
}

impl serde::Serialize for ListArg {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("kind", &self.kind)?;
        for (k, v) in &self.fields {
            map.serialize_entry(k, v)?;
        }
        if let Some(items) = &self.items {
            map.serialize_entry("items", items)?;
        }
        map.end()
    }
}

/// Python's `"%-12s" % text`.
fn pad12(text: &str) -> String {
    format!("{text:<12}")
}

fn arg_text(arg: &ListArg, indent: &str, lines: &mut Vec<String>) {
    let kind = arg.kind.py_str();
    if kind == "tensor" {
        let mut text = format!(
            "{indent}{} tensor {} {} stride {} offset {} {}",
            pad12(&arg.name),
            arg.field("dtype").py_str(),
            arg.field("shape").py_str(),
            arg.field("stride").py_str(),
            arg.field("storage_offset").py_str(),
            arg.field("device").py_str(),
        );
        let storage = arg.field("storage_id");
        if *storage != Ordered::Null {
            let _ = write!(text, " storage {}", storage.py_str());
        }
        if *arg.field("is_contiguous") == Ordered::Bool(false) {
            text.push_str(" non-contiguous");
        }
        lines.push(text);
        return;
    }
    if let Some(items) = &arg.items {
        lines.push(format!(
            "{indent}{} {kind} of {}",
            pad12(&arg.name),
            items.len()
        ));
        let deeper = format!("{indent}  ");
        for item in items {
            arg_text(item, &deeper, lines);
        }
        return;
    }
    match arg.fields.iter().find(|(k, _)| *k == "value") {
        Some((_, value)) => lines.push(format!(
            "{indent}{} {kind} {}",
            pad12(&arg.name),
            value.py_json()
        )),
        None => lines.push(format!("{indent}{} {kind}", pad12(&arg.name))),
    }
}

/// The text of a listing, line for line what replay_op.py's `--list` printed, and a 0-byte
/// input-set file called out on its set's line.
pub fn render_list(document: &ListDocument) -> String {
    let mut lines = Vec::new();
    for w in &document.windows {
        let attempt = match &w.attempt {
            Ordered::Number(n) if n.as_u64() == Some(1) => String::new(),
            other => format!("  attempt {}", other.py_str()),
        };
        if w.unfinished {
            lines.push(format!(
                "{}  UNFINISHED  rank {}  match {}  occurrence {}{attempt}",
                w.directory,
                w.rank.py_str(),
                w.match_.py_str(),
                w.occurrence.py_str()
            ));
            lines.push(format!("  {}", w.note.unwrap_or(UNFINISHED_NOTE)));
            for name in &w.cut_off {
                lines.push(format!(
                    "  cut off: {name} (a write the run did not finish; not an input set)"
                ));
            }
        } else {
            lines.push(format!(
                "{}  rank {}  label {}  match {}  occurrence {}{attempt}",
                w.manifest.as_deref().unwrap_or(""),
                w.rank.py_str(),
                w.label.py_json(),
                w.match_.py_str(),
                w.occurrence.py_str()
            ));
        }
        if w.input_sets.is_empty() {
            lines.push("  (no input sets)".into());
        }
        for s in &w.input_sets {
            let mut head = format!(
                "  {}  (stage captured {} time{})",
                s.key,
                s.captured,
                if s.captured == 1 { "" } else { "s" }
            );
            let op_given = match &s.op {
                Ordered::Null | Ordered::Bool(false) => false,
                Ordered::String(op) => !op.is_empty(),
                _ => true,
            };
            if op_given {
                let _ = write!(head, "  op {}", s.op.py_str());
            }
            if !s.file_present {
                let _ = write!(head, "  FILE MISSING: {}", s.file.py_str());
            } else if s.file_empty {
                let _ = write!(
                    head,
                    "  EMPTY FILE (0 bytes, the input set is lost): {}",
                    s.file.py_str()
                );
            }
            lines.push(head);
            for arg in &s.args {
                arg_text(arg, "    ", &mut lines);
            }
        }
    }
    lines.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_keep_their_order_and_print_as_python_did() {
        let desc: Ordered = serde_json::from_str(
            r#"{"kind": "tensor", "dtype": "float32", "shape": [4, 2], "stride": [1, 4],
                "storage_offset": 0, "device": "cpu", "storage_id": 2, "is_contiguous": false}"#,
        )
        .unwrap();
        let mut lines = Vec::new();
        arg_text(&ListArg::new("k", &desc), "    ", &mut lines);
        assert_eq!(
            lines,
            [
                "    k            tensor float32 [4, 2] stride [1, 4] offset 0 cpu storage 2 non-contiguous"
            ]
        );
        let args: Ordered = serde_json::from_str(
            r#"{"z": {"kind": "float", "value": 1e-05}, "a": {"kind": "str", "value": "é"}}"#,
        )
        .unwrap();
        let Ordered::Object(fields) = args else {
            panic!()
        };
        let names: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["z", "a"]);
        let mut lines = Vec::new();
        arg_text(&ListArg::new("a", &fields[1].1), "", &mut lines);
        assert_eq!(lines, ["a            str \"\\u00e9\""]);
        let numbers: Vec<String> = ["1e-05", "0.0001", "1.0", "1e+16", "123.5", "-2.5e-07", "7"]
            .iter()
            .map(|t| serde_json::from_str::<Ordered>(t).unwrap().py_str())
            .collect();
        assert_eq!(
            numbers,
            ["1e-05", "0.0001", "1.0", "1e+16", "123.5", "-2.5e-07", "7"]
        );
    }
}
