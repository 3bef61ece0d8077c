//! The probe manifest behind the [`Format`] contract.

use std::path::Path;

use super::header::{FACTS, MANIFEST_NAME};
use super::parse;
use crate::model::dump::{FormatFacts, SourceFormat, Warning, Window};
use crate::model::formats::contract::{Format, FormatError};
use crate::model::io::MapChoice;

/// dumpview's probe manifest (assets/dump_probe.py, the native probe).
pub struct Probe;

impl Format for Probe {
    fn id(&self) -> SourceFormat {
        SourceFormat::Probe
    }
    fn facts(&self) -> &'static FormatFacts {
        &FACTS
    }
    fn file_names(&self) -> &'static [&'static str] {
        &[MANIFEST_NAME]
    }
    /// The token rows' sidecar (`token_rows.file`, always this name from the probes).
    fn companion_names(&self) -> &'static [&'static str] {
        &["rows.f32"]
    }
    /// Anything the other formats do not claim: a file named on the command line is taken
    /// as it is, whatever its name, and its header says whether it is a manifest.
    fn claims(&self, _path: &Path, _head: &[u8]) -> bool {
        true
    }
    fn read(&self, path: &Path, bytes: &[u8]) -> Result<(Window, Vec<Warning>), FormatError> {
        self.read_with(path, bytes, MapChoice::Never)
    }

    /// The token-row sidecar is mapped under `map` ([`super::rows::read`]).
    fn read_with(
        &self,
        path: &Path,
        bytes: &[u8],
        map: MapChoice,
    ) -> Result<(Window, Vec<Warning>), FormatError> {
        let mut parsed = parse::parse_manifest(bytes, path)?;
        let mut warnings = Vec::new();
        if let Some(stop) = &parsed.stopped {
            warnings.push(Warning::lost(
                path.to_path_buf(),
                format!("truncated or damaged: {stop}"),
            ));
        }
        warnings.extend(
            parsed
                .repaired
                .iter()
                .map(|problem| Warning::lost(path.to_path_buf(), problem.to_string())),
        );
        warnings.extend(parsed.notes.to_warnings(path));
        warnings.extend(super::annotations::check(&mut parsed.manifest, path));
        if let Some(json) = &parsed.token_rows {
            parsed.manifest.token_rows =
                super::rows::read(json, path, map, &mut warnings).map(std::sync::Arc::new);
        }
        Ok((parsed.manifest, warnings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NATIVE: &str = r#"{
 "format": "dumpview.manifest", "schema_version": 1, "probe": "libdump_probe 0.1.0", "label": "r", "match": 1, "occurrence": 1, "rank": 0, "world_size": 1,
 "budget_bytes": 1000, "storage_identity": "storage_ptr",
 "skipped_over_budget": [{"seq": 1, "stage": "kv", "occurrence": 1, "bytes": 800, "budget_left": 600}],
 "warnings": ["q#1 (seq 2) not captured: aclrtMemcpyAsync(64 bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream 0x1) failed with ACL error 107000"],
 "records": [
  {"seq": 0, "stage": "x", "occurrence": 1, "mode": "eager", "dtype": "float32", "shape": [2], "stride": [1], "storage_offset": 0, "element_size": 4, "numel": 2, "storage_ptr": 64, "storage_id": null, "storage_nbytes": 8, "data_ptr": 64, "device": "npu:0", "device_format": null, "is_contiguous": true, "stats": null, "tensor_file": null}
 ],
 "input_sets": []
}"#;

    #[test]
    fn the_native_probes_notes_are_load_warnings() {
        let (window, warnings) = Probe.read(Path::new("m.json"), NATIVE.as_bytes()).unwrap();
        assert_eq!(window.records.len(), 1);
        let messages: Vec<&str> = warnings.iter().map(|w| w.message.as_str()).collect();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert!(
            messages[0].starts_with("the probe warned: q#1 (seq 2) not captured: aclrtMemcpyAsync")
        );
        assert!(messages[1].starts_with(
            "kv#1 (seq 1) was not captured: over the staging budget (800 bytes; 600 of the 1000-byte budget were left)"
        ));
        assert!(messages[2].contains("grouped by storage_ptr"));
        assert!(warnings[0].loses_evidence() && warnings[1].loses_evidence());
        assert!(!warnings[2].loses_evidence());
    }

    #[test]
    fn a_python_manifest_gets_no_such_warnings() {
        let python = NATIVE
            .lines()
            .filter(|l| !l.contains("budget") && !l.contains("\"warnings\""))
            .collect::<Vec<_>>()
            .join("\n");
        let (_, warnings) = Probe.read(Path::new("m.json"), python.as_bytes()).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}
