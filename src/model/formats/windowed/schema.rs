//! The JSON of a windowed manifest (schemaVersion 4) as written: header fields, invocations,
//! and under them L0 tensors or L1 tasks with their tensors (docs/windowed.md).
//!
//! The writer is not atomic (it writes `manifest.json` in place after every tensor file), so a
//! killed run can leave the file cut short. [`read`] keeps what it read before the break: the
//! header, every invocation begun, and every tensor and task read whole.

use std::fmt;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A manifest as read, possibly cut short.
#[derive(Debug, Default)]
pub struct Read {
    /// Top-level fields other than `invocations`, in file order.
    pub header: serde_json::Map<String, serde_json::Value>,
    /// In file order; the last may be incomplete when [`Read::stopped`] is set.
    pub invocations: Vec<Invocation>,
    /// Why reading stopped before the end of a complete manifest, if it did.
    pub stopped: Option<serde_json::Error>,
}

/// One kernel launch: L0 (`tensors`) or L1 (`tasks`).
#[derive(Debug, Default)]
pub struct Invocation {
    pub invocation_id: Option<u64>,
    pub step: Option<u64>,
    /// `forward` or `backward`.
    pub direction: Option<String>,
    pub kernel_name: Option<String>,
    /// `str(torch.device)` of the launch.
    pub device: Option<String>,
    /// L1: bytes of device memory the launch set aside for the copies.
    pub device_buffer_bytes: Option<u64>,
    /// `tensorCount` (L0) or `taskCount` (L1) as written.
    pub declared_count: Option<u64>,
    /// L0: the kernel's graph tensors.
    pub tensors: Vec<Tensor>,
    /// L1: the tasks, each with its tensors.
    pub tasks: Vec<Task>,
    /// Whether a `tasks` array was seen (an L1 invocation).
    pub has_tasks: bool,
    /// Whether the invocation's object was read to its end.
    pub complete: bool,
}

/// One L1 task: a unit of a stage's work on one core.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// Stable global task id (RuntimeConfig).
    pub task_id: Option<u64>,
    /// The task's index within its stage.
    pub stage_task_index: Option<u64>,
    pub stage: String,
    pub owner: Option<Owner>,
    /// `AIC` (cube) or `AIV` (vector).
    pub core_type: Option<String>,
    pub core_id: Option<u64>,
    pub tensor_count: Option<u64>,
    #[serde(default)]
    pub tensors: Vec<Tensor>,
    // `metadataFile` (the task's own task.json, a copy of this object) is not read.
}

/// The business owner a task works for (a layer, a module).
#[derive(Debug, Deserialize)]
pub struct Owner {
    pub label: Option<String>,
    pub id: Option<u64>,
}

/// One saved tensor, L0 or L1 (each level writes its own subset of these fields).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tensor {
    /// Logical tensor name in the kernel's graph.
    pub name: String,
    pub param_position: Option<i64>,
    /// L0: `external_input`, `stage_output` or `final_output`.
    pub role: Option<String>,
    /// L1: `input` or `output` port of the task.
    pub io: Option<String>,
    /// L1: the port index.
    pub index: Option<u64>,
    /// When the copy was taken (`before` / `after` the launch at L0).
    pub capture_phase: Option<String>,
    pub producers: Option<Vec<String>>,
    pub consumers: Option<Vec<String>>,
    /// L0: the stage views of the tensor (shape not documented; shown, not interpreted).
    pub ports: Option<serde_json::Value>,
    pub declared_shape: Option<Vec<i64>>,
    pub actual_shape: Option<Vec<u64>>,
    /// L1: the shape saved (a flattened prefix when truncated).
    pub stored_shape: Option<Vec<u64>>,
    pub original_dtype: Option<String>,
    pub stored_dtype: Option<String>,
    /// L1: where the task's tile starts in its parameter, bytes.
    pub source_offset_bytes: Option<u64>,
    pub full_bytes: Option<u64>,
    pub stored_bytes: Option<u64>,
    pub truncated: Option<bool>,
    pub note: Option<String>,
    /// The torch.save file, relative to the window directory.
    pub file: Option<String>,
}

/// Reads manifest bytes, keeping everything read before a break (see the module doc).
pub fn read(bytes: &[u8]) -> Read {
    let mut out = Read::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let result = Top(&mut out).deserialize(&mut de).and_then(|()| de.end());
    out.stopped = result.err();
    out
}

/// The top-level object: header fields into `header`, `invocations` one by one.
struct Top<'a>(&'a mut Read);

impl<'de> DeserializeSeed<'de> for Top<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a windowed manifest object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "invocations" {
                map.next_value_seed(Invocations(&mut self.0.invocations))?;
            } else {
                let value = map.next_value::<serde_json::Value>()?;
                self.0.header.insert(key, value);
            }
        }
        Ok(())
    }
}

/// The `invocations` array: each element is pushed before it is read, so a cut keeps it.
struct Invocations<'a>(&'a mut Vec<Invocation>);

impl<'de> DeserializeSeed<'de> for Invocations<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Invocations<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of invocations")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        loop {
            self.0.push(Invocation::default());
            let last = self.0.last_mut().expect("just pushed");
            if seq.next_element_seed(InvocationSeed(last))?.is_none() {
                self.0.pop();
                return Ok(());
            }
        }
    }
}

/// One invocation object, field by field into the [`Invocation`] already in place.
struct InvocationSeed<'a>(&'a mut Invocation);

impl<'de> DeserializeSeed<'de> for InvocationSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for InvocationSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an invocation object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let inv = self.0;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "invocationId" => inv.invocation_id = map.next_value()?,
                "step" => inv.step = map.next_value()?,
                "direction" => inv.direction = map.next_value()?,
                "kernelName" => inv.kernel_name = map.next_value()?,
                "device" => inv.device = map.next_value()?,
                "deviceBufferBytes" => inv.device_buffer_bytes = map.next_value()?,
                "tensorCount" | "taskCount" => inv.declared_count = map.next_value()?,
                "tensors" => map.next_value_seed(Items(&mut inv.tensors))?,
                "tasks" => {
                    inv.has_tasks = true;
                    map.next_value_seed(Items(&mut inv.tasks))?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        inv.complete = true;
        Ok(())
    }
}

/// An array whose whole elements are pushed as they are read (`null` reads as empty).
struct Items<'a, T>(&'a mut Vec<T>);

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Items<'_, T> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Items<'_, T> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(item) = seq.next_element::<T>()? {
            self.0.push(item);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L1: &str = r#"{
  "schemaVersion": 4,
  "level": "L1",
  "rank": 1,
  "invocations": [
    {"invocationId": 3, "kernelName": "k", "taskCount": 2, "tasks": [
      {"taskId": 7, "stageTaskIndex": 0, "stage": "mlp", "tensors": [{"name": "h", "io": "output", "file": "a.pt"}]},
      {"taskId": 8, "stageTaskIndex": 1, "stage": "mlp", "tensors": [{"name": "h", "io": "output", "file": "b.pt"}]}
    ]}
  ]
}"#;

    #[test]
    fn reads_a_whole_manifest() {
        let read = read(L1.as_bytes());
        assert!(read.stopped.is_none(), "{:?}", read.stopped);
        assert_eq!(read.header["rank"], 1);
        assert!(!read.header.contains_key("invocations"));
        let inv = &read.invocations[0];
        assert!(inv.complete && inv.has_tasks);
        assert_eq!((inv.invocation_id, inv.declared_count), (Some(3), Some(2)));
        assert_eq!(inv.tasks[1].task_id, Some(8));
        assert_eq!(inv.tasks[1].tensors[0].file.as_deref(), Some("b.pt"));
    }

    #[test]
    fn a_cut_keeps_the_header_and_the_whole_tasks_before_it() {
        let cut = L1.find("\"taskId\": 8").unwrap() + 5;
        let read = read(&L1.as_bytes()[..cut]);
        assert!(read.stopped.is_some());
        assert_eq!(read.header["level"], "L1");
        let inv = &read.invocations[0];
        assert!(!inv.complete);
        assert_eq!(inv.kernel_name.as_deref(), Some("k"));
        assert_eq!(inv.tasks.len(), 1, "the task cut in half is dropped");
    }

    #[test]
    fn a_wrong_type_stops_like_a_cut() {
        let broken = L1.replace("\"taskId\": 8", "\"taskId\": \"8\"");
        let read = read(broken.as_bytes());
        let stop = read.stopped.expect("stopped").to_string();
        assert!(stop.contains("invalid type: string \"8\""), "{stop}");
        assert_eq!(read.invocations[0].tasks.len(), 1);
    }

    #[test]
    fn trailing_bytes_after_the_object_are_reported() {
        let read = read(format!("{L1} x").as_bytes());
        assert!(read.stopped.is_some());
        assert_eq!(read.invocations[0].tasks.len(), 2);
    }
}
