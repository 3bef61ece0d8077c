//! What a probe says about its own window beyond the records: the native probe's `warnings`
//! (runtime errors), `skipped_over_budget` (captures it did not make) and `storage_identity`
//! (how aliases can be grouped), turned into the load's [`Warning`]s so that scan, diff and the
//! workbench say so. Manifests without these fields (every dump_probe.py manifest) give none.

use std::path::Path;

use serde::Deserialize;

use crate::model::dump::Warning;

/// A capture the probe skipped because its span would have exceeded the window's staging
/// budget (`skipped_over_budget[]`, docs/manifest.md).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SkippedCapture {
    /// The `seq` it would have had.
    pub seq: u64,
    /// Its stage.
    pub stage: String,
    /// The N of `stage#N` it took (later captures of the stage keep their numbers).
    pub occurrence: u32,
    /// Bytes its span would have staged.
    pub bytes: u64,
    /// Bytes of the budget that were left.
    #[serde(default)]
    pub budget_left: Option<u64>,
}

/// The writer's own notes on a window, as read from the manifest's top level.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriterNotes {
    /// `warnings[]`: what went wrong while capturing (a failed device copy, a stream that did
    /// not synchronize), in the writer's words.
    pub warnings: Vec<String>,
    /// `skipped_over_budget[]`.
    pub skipped_over_budget: Vec<SkippedCapture>,
    /// Entries of those two arrays that did not read, described.
    pub unreadable: Vec<String>,
    /// `budget_bytes`: the window's staging budget.
    pub budget_bytes: Option<u64>,
    /// `storage_identity`: `storage_id`, `storage_ptr`, `mixed` or `none`.
    pub storage_identity: Option<String>,
    /// Why the `run` object did not read, when it did not.
    pub run_unreadable: Option<String>,
}

impl WriterNotes {
    /// Reads `warnings` (an array of strings; another value is kept as its JSON text).
    pub fn set_warnings(&mut self, value: serde_json::Value) {
        match value {
            serde_json::Value::Array(items) => {
                self.warnings
                    .extend(items.into_iter().map(|item| match item {
                        serde_json::Value::String(text) => text,
                        other => other.to_string(),
                    }));
            }
            serde_json::Value::Null => {}
            other => self
                .unreadable
                .push(format!("`warnings` is not an array: {other}")),
        }
    }

    /// Reads `skipped_over_budget`; an entry that does not read is described in `unreadable`.
    pub fn set_skipped(&mut self, value: serde_json::Value) {
        let serde_json::Value::Array(items) = value else {
            if !value.is_null() {
                self.unreadable
                    .push(format!("`skipped_over_budget` is not an array: {value}"));
            }
            return;
        };
        for (index, item) in items.into_iter().enumerate() {
            match serde_json::from_value::<SkippedCapture>(item.clone()) {
                Ok(skipped) => self.skipped_over_budget.push(skipped),
                Err(e) => self.unreadable.push(format!(
                    "skipped_over_budget[{index}] does not read ({e}): {item}"
                )),
            }
        }
    }

    /// The warnings a load reports for the manifest at `path`: each writer warning and each
    /// skipped capture is lost evidence; a window whose aliases fall back to `storage_ptr` gets
    /// a note.
    pub fn to_warnings(&self, path: &Path) -> Vec<Warning> {
        let mut out = Vec::new();
        for text in &self.warnings {
            out.push(Warning::lost(path, format!("the probe warned: {text}")));
        }
        for s in &self.skipped_over_budget {
            let budget = match (s.budget_left, self.budget_bytes) {
                (Some(left), Some(budget)) => format!(
                    " ({} bytes; {left} of the {budget}-byte budget were left)",
                    s.bytes
                ),
                _ => format!(" ({} bytes)", s.bytes),
            };
            out.push(Warning::lost(
                path,
                format!(
                    "{}#{} (seq {}) was not captured: over the staging budget{budget}; a larger budget_bytes in dp_open captures it",
                    s.stage, s.occurrence, s.seq
                ),
            ));
        }
        for text in &self.unreadable {
            out.push(Warning::lost(path, text.clone()));
        }
        if let Some(why) = &self.run_unreadable {
            out.push(Warning::note(
                path,
                format!(
                    "run (the command line) does not read ({why}): a next capture is printed as \
                     settings in words, not as a command"
                ),
            ));
        }
        match self.storage_identity.as_deref() {
            Some("storage_ptr") | Some("mixed") => out.push(Warning::note(
                path,
                "some records carry no storage_id: their aliases are grouped by storage_ptr, which also \
                 groups two buffers that used one address one after the other",
            )),
            _ => {}
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_become_warnings() {
        let mut notes = WriterNotes {
            budget_bytes: Some(1000),
            storage_identity: Some("storage_ptr".into()),
            ..WriterNotes::default()
        };
        notes.set_warnings(serde_json::json!(["aclrtMemcpyAsync failed", 3]));
        notes.set_skipped(serde_json::json!([
            {"seq": 2, "stage": "kv", "occurrence": 1, "bytes": 400, "budget_left": 200},
            {"seq": "x"}
        ]));
        let warnings = notes.to_warnings(Path::new("m.json"));
        let text: Vec<String> = warnings.iter().map(|w| w.message.clone()).collect();
        assert_eq!(text[0], "the probe warned: aclrtMemcpyAsync failed");
        assert_eq!(text[1], "the probe warned: 3");
        assert!(text[2].starts_with("kv#1 (seq 2) was not captured: over the staging budget (400 bytes; 200 of the 1000-byte budget were left)"), "{}", text[2]);
        assert!(
            text[3].starts_with("skipped_over_budget[1] does not read"),
            "{}",
            text[3]
        );
        assert!(warnings[..4].iter().all(Warning::loses_evidence));
        assert!(!warnings[4].loses_evidence());
        assert!(
            WriterNotes::default()
                .to_warnings(Path::new("m.json"))
                .is_empty()
        );
    }
}
