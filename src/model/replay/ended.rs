//! A replay whose process died while one side ran (a segfaulting kernel, `os._exit`): what
//! `assets/replay_op.py` left, made into the `replay.json` every reader reads (docs/replay.md,
//! "A process that dies").
//!
//! Before each side replay_op.py writes [`PARTIAL_FILE`]: the record so far, the sides that
//! finished, and the side about to run with `"status": "running"` and `"running": SIDE`. A
//! process that ends without `replay.json` but with that file died in that side.
//! [`crash_record`] turns it into a record whose running side is a crash with a
//! [`DIED`] exception naming how the process ended, and an `ended` object saying so; the
//! judge reads it as any other crash ([`super::judge`]): the candidate's death is the
//! verdict crash, a reference side's death leaves nothing to judge against ("the reference
//! died": missing evidence for a case matrix).

use super::load::SIDE_NAMES;
use super::record::{DIED, ProcessEnd};

/// What replay_op.py writes before each side, removed once `replay.json` is written.
pub const PARTIAL_FILE: &str = "replay.partial.json";

/// `partial` (the bytes of [`PARTIAL_FILE`]) completed into `replay.json`'s text: the
/// running side's status `crash`, its exception `{"type": DIED, "message": "the SIDE SPEC
/// ended the process (HOW)", "traceback": said}` (`said`: the process's last stderr lines,
/// which hold Python's fault handler stack on a fatal signal), and `ended`
/// ([`ProcessEnd`]). Returns the side and the text.
///
/// # Errors
/// A message (without the file name): not JSON, no `running` side or one that is not a
/// side name, no record of that side.
pub fn crash_record(partial: &[u8], how: &str, said: &str) -> Result<(String, String), String> {
    let mut record: serde_json::Value =
        serde_json::from_slice(partial).map_err(|e| format!("not JSON: {e}"))?;
    let side = record
        .get("running")
        .and_then(|r| r.as_str())
        .filter(|r| SIDE_NAMES.contains(r))
        .ok_or("no running side named (\"running\")")?
        .to_string();
    let entry = record
        .get_mut("sides")
        .and_then(|s| s.get_mut(&side))
        .and_then(|s| s.as_object_mut())
        .ok_or_else(|| format!("no record of the running side {side}"))?;
    let spec = entry
        .get("spec")
        .and_then(|s| s.as_str())
        .unwrap_or("?")
        .to_string();
    entry.insert("status".into(), "crash".into());
    entry.insert(
        "exception".into(),
        serde_json::json!({
            "type": DIED,
            "message": format!("the {side} {spec} ended the process ({how})"),
            "traceback": if said.is_empty() { serde_json::Value::Null } else { said.into() },
        }),
    );
    if let Some(notes) = entry
        .entry("notes")
        .or_insert_with(|| serde_json::json!([]))
        .as_array_mut()
    {
        notes.push(
            "replay_op.py died in this side; dumpview wrote this record from replay.partial.json"
                .into(),
        );
    }
    let object = record.as_object_mut().ok_or("not a JSON object")?;
    object.remove("running");
    // The call style is known once a side is called; a record read as a string needs one.
    if object.get("call").is_none_or(|c| !c.is_string()) {
        object.insert("call".into(), "".into());
    }
    object.insert(
        "ended".into(),
        serde_json::to_value(ProcessEnd {
            side: side.clone(),
            how: how.to_string(),
            recorded_by: "dumpview".into(),
        })
        .map_err(|e| e.to_string())?,
    );
    let text = serde_json::to_string_pretty(&record).map_err(|e| e.to_string())? + "\n";
    Ok((side, text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::replay::record::{ReplayRecord, Status};

    const PARTIAL: &str = r#"{"format": "dumpview.replay", "version": 1, "stage": "layers.0.input_norm",
 "occurrence": 1, "running": "reference",
 "sides": {"candidate": {"spec": "m:f", "status": "ok", "outputs": ["out"]},
           "reference": {"spec": "builtin:rms_norm", "status": "running", "notes": []}}}"#;

    #[test]
    fn the_running_side_becomes_a_crash_naming_how_the_process_ended() {
        let (side, text) = crash_record(
            PARTIAL.as_bytes(),
            "killed by SIGSEGV (signal 11)",
            "Fatal Python error: Segmentation fault",
        )
        .unwrap();
        assert_eq!(side, "reference");
        let record = ReplayRecord::parse(text.as_bytes()).unwrap();
        let reference = record.sides.reference.unwrap();
        assert_eq!(reference.status, Status::Crash);
        let exception = reference.exception.unwrap();
        assert_eq!(exception.kind, DIED);
        assert_eq!(
            exception.message,
            "the reference builtin:rms_norm ended the process (killed by SIGSEGV (signal 11))"
        );
        assert_eq!(
            exception.traceback.as_deref(),
            Some("Fatal Python error: Segmentation fault")
        );
        assert_eq!(record.sides.candidate.unwrap().status, Status::Ok);
        let ended = record.ended.unwrap();
        assert_eq!(
            (ended.side.as_str(), ended.how.as_str()),
            ("reference", "killed by SIGSEGV (signal 11)")
        );
    }

    #[test]
    fn a_partial_record_without_a_running_side_is_refused() {
        let e = crash_record(b"{\"running\": \"nobody\"}", "x", "").unwrap_err();
        assert!(e.contains("no running side"), "{e}");
        assert!(
            crash_record(b"{", "x", "")
                .unwrap_err()
                .starts_with("not JSON")
        );
        let e = crash_record(b"{\"running\": \"golden\", \"sides\": {}}", "x", "").unwrap_err();
        assert!(e.contains("no record of the running side golden"), "{e}");
    }
}
