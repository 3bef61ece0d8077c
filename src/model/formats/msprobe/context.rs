//! construct.json (each entry's parent module) and stack.json (each entry's call stack), read
//! into the lines the workbench's detail panel shows for every row of an entry.
//!
//! construct.json maps an entry to its parent module entry (`null` or `""` at the top; the
//! Megatron variant writes `[parent, micro step]`). stack.json comes in two formats: the
//! newer `{"0": [[entry names], [frames]], ...}`, where entries with one stack share it,
//! and the older `{entry name: [frames]}`; each value is read by its shape. Both files are
//! optional: a missing file gives no lines, a broken one a warning. Frames of msprobe's own
//! hooks and of `torch.nn.Module`'s call plumbing (`_call_impl`, `_wrapped_call_impl`,
//! `inner` in torch/nn/modules/module.py) are left out: they are in every stack and say
//! nothing about the call.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::json::{self, Reader};
use super::value::Value;

type Map<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// What construct.json and stack.json say, by entry name.
#[derive(Debug, Default)]
pub struct Sources {
    parents: Map<String>,
    stacks: Map<Arc<[String]>>,
}

/// Reads construct.json and stack.json from `dir`; problems as messages for warnings.
pub fn read(dir: &Path) -> (Sources, Vec<String>) {
    let (parents, stacks) = rayon::join(
        || read_one(&dir.join("construct.json"), "module", parents),
        || read_one(&dir.join("stack.json"), "stack", stacks),
    );
    let problems = [parents.as_ref().err(), stacks.as_ref().err()]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    let sources = Sources {
        parents: parents.unwrap_or_default(),
        stacks: stacks.unwrap_or_default(),
    };
    (sources, problems)
}

/// One file through `read`, as a map (empty when the file does not exist) or a warning.
fn read_one<V>(
    path: &Path,
    lines: &str,
    read: fn(&mut Reader<'_>, &mut Map<V>) -> Result<(), json::Error>,
) -> Result<Map<V>, String> {
    let file = path.file_name().unwrap_or_default().to_string_lossy();
    // Never mapped: a dump being written may still rewrite it in place.
    let bytes = match crate::model::io::FileBytes::read(path, false) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::default()),
        Err(e) => {
            return Err(format!(
                "{file} beside it cannot be read ({e}); rows have no {lines} lines"
            ));
        }
    };
    let mut map = Map::default();
    let mut reader = Reader::new(&bytes);
    read(&mut reader, &mut map)
        .and_then(|()| {
            if reader.at_end() {
                Ok(())
            } else {
                Err(json::Error {
                    offset: reader.offset(),
                    reason: "unexpected bytes after the JSON value",
                })
            }
        })
        .map_err(|e| format!("{file} beside it is not used ({e}); rows have no {lines} lines"))?;
    Ok(map)
}

/// construct.json, one member at a time.
fn parents(reader: &mut Reader<'_>, out: &mut Map<String>) -> Result<(), json::Error> {
    reader.object_start()?;
    let mut first = true;
    while let Some(entry) = reader.next_key(first)? {
        first = false;
        let parent = reader.value()?;
        let parent = match &parent {
            Value::String(p) => p,
            // Megatron: [parent, micro step].
            Value::Array(items) => match items.first() {
                Some(Value::String(p)) => p,
                _ => continue,
            },
            _ => continue,
        };
        if !parent.is_empty() {
            out.insert(entry.into_owned(), parent.to_string());
        }
    }
    Ok(())
}

/// stack.json, one member at a time: `[[names], [frames]]` (newer) or `[frames]` (older).
fn stacks(reader: &mut Reader<'_>, out: &mut Map<Arc<[String]>>) -> Result<(), json::Error> {
    let frames = |items: &[Value<'_>]| -> Arc<[String]> {
        items
            .iter()
            .filter_map(Value::as_str)
            .filter_map(frame)
            .collect::<Vec<_>>()
            .into()
    };
    reader.object_start()?;
    let mut first = true;
    while let Some(key) = reader.next_key(first)? {
        first = false;
        let Value::Array(value) = reader.value()? else {
            continue;
        };
        match value.as_slice() {
            [Value::Array(names), Value::Array(stack)] => {
                let stack = frames(stack);
                for name in names.iter().filter_map(Value::as_str) {
                    out.insert(name.to_string(), Arc::clone(&stack));
                }
            }
            stack => {
                out.insert(key.into_owned(), frames(stack));
            }
        }
    }
    Ok(())
}

/// One frame on one line: `File /x/site-packages/torch/nn/modules/conv.py, line 543, in
/// _conv_forward, \n return F.conv2d(` reads `torch/nn/modules/conv.py:543 _conv_forward:
/// return F.conv2d(`. Paths inside an installed package start at the package; other paths
/// (the model's own code) stay whole. Text of another shape is kept, on one line. `None`
/// for a frame left out (see the module's doc).
fn frame(text: &str) -> Option<String> {
    let one_line = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let parsed = (|| {
        let rest = text.strip_prefix("File ")?;
        let (path, rest) = rest.split_once(", line ")?;
        let (line, rest) = rest.split_once(", in ")?;
        let (function, code) = rest.split_once(", \n").unwrap_or((rest, ""));
        Some((path, line, function, one_line(code)))
    })();
    let Some((path, line, function, code)) = parsed else {
        return Some(one_line(text));
    };
    let plumbing = path.ends_with("torch/nn/modules/module.py")
        && matches!(function, "_call_impl" | "_wrapped_call_impl" | "inner");
    let hooks = ["msprobe/core/", "msprobe/pytorch/", "msprobe/mindspore/"]
        .iter()
        .any(|m| path.contains(m));
    if plumbing || hooks {
        return None;
    }
    let path = ["site-packages/", "dist-packages/"]
        .iter()
        .find_map(|marker| path.rfind(marker).map(|at| &path[at + marker.len()..]))
        .unwrap_or(path);
    Some(if code.is_empty() {
        format!("{path}:{line} {function}")
    } else {
        format!("{path}:{line} {function}: {code}")
    })
}

/// Parents of one entry in construct.json are followed at most this deep (a loop ends there).
const MAX_MODULE_DEPTH: usize = 256;

impl Sources {
    /// The lines of entry `name`: its module chain from the parent outward (innermost
    /// first), then its stack frames from the innermost call outward, as stack.json lists
    /// them.
    pub fn lines(&self, name: &str) -> Vec<(String, String)> {
        let mut lines = Vec::new();
        let mut at = name;
        while let Some(parent) = self.parents.get(at) {
            if lines.len() >= MAX_MODULE_DEPTH {
                break;
            }
            lines.push(("module".to_string(), parent.clone()));
            at = parent;
        }
        if let Some(stack) = self.stacks.get(name) {
            lines.extend(stack.iter().map(|f| ("stack".to_string(), f.clone())));
        }
        lines
    }

    /// What decides [`Sources::lines`] of `name`: where its parent and its (shared) stack
    /// are held (0: none). Entries with equal keys have equal lines.
    pub fn key(&self, name: &str) -> (usize, usize) {
        (
            self.parents.get(name).map_or(0, |p| p.as_ptr() as usize),
            self.stacks.get(name).map_or(0, |s| s.as_ptr() as usize),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map<V>(
        text: &[u8],
        read: fn(&mut Reader<'_>, &mut Map<V>) -> Result<(), json::Error>,
    ) -> Map<V> {
        let mut out = Map::default();
        read(&mut Reader::new(text), &mut out).unwrap();
        out
    }

    #[test]
    fn frames_read_on_one_line() {
        assert_eq!(
            frame(
                "File /root/miniconda3/lib/python3.12/site-packages/torch/nn/modules/conv.py, line 543, in _conv_forward, \n return F.conv2d("
            )
            .as_deref(),
            Some("torch/nn/modules/conv.py:543 _conv_forward: return F.conv2d(")
        );
        assert_eq!(
            frame("File /work/train.py, line 12, in main, \n loss.backward()").as_deref(),
            Some("/work/train.py:12 main: loss.backward()")
        );
        assert_eq!(frame("something\n else").as_deref(), Some("something else"));
        for plumbing in [
            "File /x/site-packages/torch/nn/modules/module.py, line 1773, in _wrapped_call_impl, \n return self._call_impl(*args, **kwargs)",
            "File /x/site-packages/msprobe/core/dump/api_dump/api_registry.py, line 95, in api_function, \n return api_instance(*args, **kwargs)",
        ] {
            assert_eq!(frame(plumbing), None);
        }
    }

    #[test]
    fn both_stack_formats_and_module_chains() {
        let s = map(
            br#"{"0": [["A.0.forward", "B.0.forward"], ["File a.py, line 1, in f, \n x()"]],
                 "1": [["C.0.forward"], []]}"#,
            stacks,
        );
        assert_eq!(&*s["B.0.forward"], ["a.py:1 f: x()"]);
        assert!(s["C.0.forward"].is_empty());
        let old = map(
            br#"{"A.0.forward": ["File a.py, line 2, in g, \n y()"]}"#,
            stacks,
        );
        assert_eq!(&*old["A.0.forward"], ["a.py:2 g: y()"]);

        let construct = map(
            br#"{"A.0.forward": "Module.m.M.forward.0", "Module.m.M.forward.0": "Module.top.T.forward.0",
                 "Module.top.T.forward.0": null, "B.0.forward": "", "C.0.forward": ["Module.x.X.forward.0", 2],
                 "L.0.forward": "L.0.forward"}"#,
            parents,
        );
        let sources = Sources {
            parents: construct,
            stacks: s,
        };
        assert_eq!(
            sources.lines("A.0.forward"),
            [
                ("module".to_string(), "Module.m.M.forward.0".to_string()),
                ("module".to_string(), "Module.top.T.forward.0".to_string()),
                ("stack".to_string(), "a.py:1 f: x()".to_string()),
            ]
        );
        assert_eq!(sources.lines("B.0.forward").len(), 1);
        assert_eq!(sources.lines("C.0.forward")[0].1, "Module.x.X.forward.0");
        assert_eq!(sources.lines("L.0.forward").len(), MAX_MODULE_DEPTH);
        assert_ne!(sources.key("A.0.forward"), sources.key("B.0.forward"));
        assert_eq!(sources.key("Z.0.forward"), (0, 0));
    }

    #[test]
    fn a_broken_file_is_a_warning_and_a_missing_one_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("stack.json"), b"{\"0\": [[").unwrap();
        let (sources, problems) = read(dir.path());
        assert!(sources.parents.is_empty() && sources.stacks.is_empty());
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("stack.json beside it is not used"),
            "{problems:?}"
        );
        assert!(problems[0].contains("byte 8"), "{problems:?}");
    }
}
