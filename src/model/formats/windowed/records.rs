//! From a windowed manifest's invocations to dumpview records, one per saved tensor, with the
//! lines of context the workbench shows beside each (docs/windowed.md, "What maps to what").

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::schema::{Invocation, Read, Task, Tensor};
use crate::model::dump::{Name, Record, dims, strides};
use crate::model::tensor::DType;

/// One record to be, before its statistics are computed.
#[derive(Debug)]
pub struct Planned {
    /// `stats: None` until the file is measured.
    pub record: Record,
    /// Labelled lines for [`crate::model::dump::Context`].
    pub context: Vec<(String, String)>,
    /// The tensor file to measure, when the manifest names one inside the window.
    pub source: Option<Source>,
    /// Why there is nothing to measure (no `file`, or a path that leaves the window).
    pub problem: Option<String>,
    /// Whether the manifest gave the shape (else the file's is used).
    pub shape_known: bool,
}

/// Where a record's values are, and what the manifest says was stored there.
#[derive(Debug)]
pub struct Source {
    /// Resolved inside the window directory (symbolic links followed).
    pub path: PathBuf,
    /// The window directory joined with the name as written: what warnings show.
    pub shown: PathBuf,
    /// The tensor's name, to pick it from a file of several.
    pub name: String,
    /// `storedDtype`, when it names a dtype dumpview reads.
    pub stored_dtype: Option<DType>,
    /// Elements of `storedShape`, or of `actualShape` when nothing says the file holds less.
    pub stored_numel: Option<u64>,
}

/// Every tensor of `read`, in file order: L0 invocations' tensors as listed (the writer puts
/// external inputs first, then the graph's order), L1 tasks as listed with their tensors.
pub fn plan(read: &Read, window_dir: &Path) -> Vec<Planned> {
    let mut planned = Vec::new();
    for inv in &read.invocations {
        let kernel = inv.kernel_name.as_deref();
        let direction = inv.direction.as_deref().filter(|d| *d != "forward");
        let invocation = describe_invocation(inv);
        if inv.has_tasks {
            for task in &inv.tasks {
                let task_part = task
                    .stage_task_index
                    .map(|i| format!("task{i}"))
                    .or_else(|| task.task_id.map(|id| format!("id{id}")));
                for t in &task.tensors {
                    let stage = join(&[
                        kernel,
                        direction,
                        Some(&task.stage),
                        task_part.as_deref(),
                        t.io.as_deref(),
                        Some(&t.name),
                    ]);
                    let mut context = vec![("level".to_string(), "L1".to_string())];
                    context.extend(task_lines(task));
                    context.extend(tensor_lines(t, kernel, &invocation));
                    planned.push(plan_one(planned.len(), stage, t, inv, context, window_dir));
                }
            }
        } else {
            for t in &inv.tensors {
                let stage = join(&[kernel, direction, t.role.as_deref(), Some(&t.name)]);
                let mut context = vec![("level".to_string(), "L0".to_string())];
                if let Some(role) = &t.role {
                    context.push(("role".into(), role.clone()));
                }
                context.extend(tensor_lines(t, kernel, &invocation));
                planned.push(plan_one(planned.len(), stage, t, inv, context, window_dir));
            }
        }
    }
    // `stage#occurrence`: the N-th record of a name in this window (the kernel's N-th launch).
    let mut seen: HashMap<Name, u32> = HashMap::new();
    for p in &mut planned {
        let n = seen.entry(p.record.stage.clone()).or_insert(0);
        *n += 1;
        p.record.occurrence = *n;
    }
    planned
}

/// Non-empty parts joined with `.`.
fn join(parts: &[Option<&str>]) -> String {
    parts
        .iter()
        .flatten()
        .filter(|p| !p.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(".")
}

/// `torch.float32` → `float32`.
fn dtype_text(text: &str) -> &str {
    text.strip_prefix("torch.").unwrap_or(text)
}

/// Row-major strides of `shape`, in elements.
pub fn contiguous(shape: &[u64]) -> Vec<i64> {
    let mut out = vec![0i64; shape.len()];
    let mut step = 1i64;
    for (s, &size) in out.iter_mut().zip(shape).rev() {
        *s = step;
        step = step.saturating_mul(i64::try_from(size.max(1)).unwrap_or(i64::MAX));
    }
    out
}

fn plan_one(
    seq: usize,
    stage: String,
    t: &Tensor,
    inv: &Invocation,
    context: Vec<(String, String)>,
    window_dir: &Path,
) -> Planned {
    let dtype_name = t
        .original_dtype
        .as_deref()
        .or(t.stored_dtype.as_deref())
        .map_or("unknown", dtype_text);
    let element_size = DType::from_name(dtype_name).map_or(0, DType::size);
    let shape_known = t.actual_shape.is_some() || t.stored_shape.is_some();
    let shape: Vec<u64> = t
        .actual_shape
        .clone()
        .or_else(|| t.stored_shape.clone())
        .unwrap_or_default();
    // An L1 tile's place in its parameter, in elements when it falls on one.
    let storage_offset = match (t.source_offset_bytes, element_size as u64) {
        (Some(bytes), size) if size > 0 && bytes % size == 0 => bytes / size,
        _ => 0,
    };
    let stored_numel = t
        .stored_shape
        .as_ref()
        .or(if t.truncated == Some(true) {
            None
        } else {
            t.actual_shape.as_ref()
        })
        .map(|s| s.iter().product());
    let (source, problem) = match t.file.as_deref() {
        None => (None, Some("the manifest names no file for it".to_string())),
        Some(file) => match crate::model::dump::evidence::resolve(window_dir, file) {
            Ok(path) => (
                Some(Source {
                    path,
                    shown: window_dir.join(file),
                    name: t.name.clone(),
                    stored_dtype: t
                        .stored_dtype
                        .as_deref()
                        .and_then(|d| DType::from_name(dtype_text(d))),
                    stored_numel,
                }),
                None,
            ),
            Err(message) => (None, Some(format!("{message}; the file is not used"))),
        },
    };
    let record = Record {
        seq: seq as u64,
        stage: Name::new(&stage),
        dtype: Name::new(dtype_name),
        stride: strides(&contiguous(&shape)),
        numel: shape.iter().product(),
        shape: dims(&shape),
        storage_offset,
        element_size: element_size as u32,
        device: Name::new(inv.device.as_deref().unwrap_or("unknown")),
        is_contiguous: true,
        tensor_file: source.as_ref().and(t.file.clone()),
        truncated: t.truncated,
        ..Record::default()
    };
    Planned {
        record,
        context,
        source,
        problem,
        shape_known,
    }
}

/// `3 · step 1 · forward`.
fn describe_invocation(inv: &Invocation) -> String {
    let mut parts = vec![
        inv.invocation_id
            .map_or("?".to_string(), |id| id.to_string()),
    ];
    if let Some(step) = inv.step {
        parts.push(format!("step {step}"));
    }
    if let Some(direction) = &inv.direction {
        parts.push(direction.clone());
    }
    parts.join(" · ")
}

fn task_lines(task: &Task) -> Vec<(String, String)> {
    let mut lines = Vec::new();
    let mut what = Vec::new();
    if let Some(id) = task.task_id {
        what.push(format!("id {id}"));
    }
    what.push(match task.stage_task_index {
        Some(i) => format!("{} task {i}", task.stage),
        None => task.stage.clone(),
    });
    lines.push(("task".into(), what.join(" · ")));
    if let Some(owner) = &task.owner {
        let text = match (&owner.label, owner.id) {
            (Some(label), Some(id)) => format!("{label} (id {id})"),
            (Some(label), None) => label.clone(),
            (None, Some(id)) => format!("id {id}"),
            (None, None) => String::new(),
        };
        if !text.is_empty() {
            lines.push(("owner".into(), text));
        }
    }
    match (&task.core_type, task.core_id) {
        (Some(kind), Some(id)) => lines.push(("core".into(), format!("{kind} {id}"))),
        (Some(kind), None) => lines.push(("core".into(), kind.clone())),
        (None, Some(id)) => lines.push(("core".into(), id.to_string())),
        (None, None) => {}
    }
    lines
}

fn shape_text(shape: &[u64]) -> String {
    let parts: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// The L0 `ports` value, whose shape the seed does not show: a list of objects reads as
/// `key=value` pairs without the file paths (the record shows its file), anything else as
/// compact JSON; cut to 120 characters.
fn ports_text(ports: &serde_json::Value) -> String {
    const MAX: usize = 120;
    let text = match ports.as_array() {
        Some(items) if items.iter().all(serde_json::Value::is_object) => items
            .iter()
            .filter_map(serde_json::Value::as_object)
            .map(|port| {
                port.iter()
                    .filter(|(key, _)| !key.contains("file") && !key.contains("path"))
                    .map(|(key, value)| match value.as_str() {
                        Some(text) => format!("{key}={text}"),
                        None => format!("{key}={value}"),
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("; "),
        _ => ports.to_string(),
    };
    if text.chars().count() > MAX {
        format!("{}…", text.chars().take(MAX - 1).collect::<String>())
    } else {
        text
    }
}

fn tensor_lines(t: &Tensor, kernel: Option<&str>, invocation: &str) -> Vec<(String, String)> {
    let mut lines = Vec::new();
    let mut what = vec![t.name.clone()];
    if let Some(io) = &t.io {
        what.push(match t.index {
            Some(i) => format!("{io} {i}"),
            None => io.clone(),
        });
    }
    if let Some(p) = t.param_position {
        what.push(format!("param {p}"));
    }
    if let Some(phase) = &t.capture_phase {
        what.push(format!("captured {phase}"));
    }
    lines.push(("tensor".into(), what.join(" · ")));
    for (label, list) in [("producer", &t.producers), ("consumer", &t.consumers)] {
        if let Some(list) = list.as_ref().filter(|l| !l.is_empty()) {
            lines.push((label.into(), list.join(", ")));
        }
    }
    let launch = match kernel {
        Some(kernel) => format!("{invocation} · {kernel}"),
        None => invocation.to_string(),
    };
    lines.push(("invocation".into(), launch));
    if let (Some(declared), Some(actual)) = (&t.declared_shape, &t.actual_shape) {
        let same = declared.len() == actual.len()
            && declared
                .iter()
                .zip(actual)
                .all(|(&d, &a)| d >= 0 && d as u64 == a);
        if !same {
            let parts: Vec<String> = declared.iter().map(i64::to_string).collect();
            lines.push(("declared".into(), format!("[{}]", parts.join(", "))));
        }
    }
    if let Some(offset) = t.source_offset_bytes {
        lines.push(("source".into(), format!("byte {offset} of the parameter")));
    }
    let original = t.original_dtype.as_deref().map(dtype_text);
    let stored = t.stored_dtype.as_deref().map(dtype_text);
    let mut stored_parts = Vec::new();
    if stored.is_some() && stored != original {
        stored_parts.push(format!("as {}", stored.unwrap_or_default()));
    }
    match (&t.stored_shape, &t.actual_shape) {
        (Some(s), Some(a)) if s != a => stored_parts.push(format!("shape {}", shape_text(s))),
        _ => {}
    }
    if t.truncated == Some(true) {
        let bytes = match (t.stored_bytes, t.full_bytes) {
            (Some(s), Some(f)) => format!(" ({s} of {f} B)"),
            _ => String::new(),
        };
        stored_parts.push(format!(
            "TRUNCATED to a flattened prefix{bytes}: statistics cover the prefix"
        ));
    }
    if !stored_parts.is_empty() {
        lines.push(("stored".into(), stored_parts.join(", ")));
    }
    if let Some(note) = t.note.as_ref().filter(|n| !n.is_empty()) {
        lines.push(("note".into(), note.clone()));
    }
    if let Some(ports) = &t.ports {
        lines.push(("ports".into(), ports_text(ports)));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_are_contiguous_and_names_skip_missing_parts() {
        assert_eq!(contiguous(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(contiguous(&[]), Vec::<i64>::new());
        assert_eq!(contiguous(&[0, 3]), vec![3, 1]);
        assert_eq!(join(&[Some("k"), None, Some("mlp"), Some("")]), "k.mlp");
        assert_eq!(dtype_text("torch.bfloat16"), "bfloat16");
    }

    #[test]
    fn stage_names_carry_kernel_direction_stage_task_and_port() {
        let text = r#"{"schemaVersion": 4, "rank": 0, "invocations": [
          {"invocationId": 0, "direction": "backward", "kernelName": "k", "tensors": [
            {"name": "g", "role": "stage_output", "actualShape": [2], "originalDtype": "torch.float16", "file": "a.pt"}]},
          {"invocationId": 1, "direction": "forward", "kernelName": "k", "tasks": [
            {"taskId": 9, "stage": "mlp", "coreType": "AIV", "coreId": 3, "tensors": [
              {"name": "h", "io": "output", "index": 0, "sourceOffsetBytes": 64, "originalDtype": "torch.float32", "file": "b.pt"},
              {"name": "h", "io": "output", "index": 1, "originalDtype": "torch.float32"}]}]}]}"#;
        let read = super::super::schema::read(text.as_bytes());
        let planned = plan(&read, Path::new("/nonexistent/window"));
        let keys: Vec<String> = planned.iter().map(|p| p.record.key()).collect();
        assert_eq!(
            keys,
            [
                "k.backward.stage_output.g#1",
                "k.mlp.id9.output.h#1",
                "k.mlp.id9.output.h#2"
            ]
        );
        let first = &planned[0].record;
        assert_eq!((first.dtype.as_str(), first.element_size), ("float16", 2));
        assert_eq!(planned[1].record.storage_offset, 16);
        assert!(!planned[1].shape_known);
        assert!(planned[2].source.is_none());
        assert!(planned[2].problem.as_deref().unwrap().contains("no file"));
        assert!(
            planned[1]
                .context
                .contains(&("core".into(), "AIV 3".into()))
        );
    }
}
