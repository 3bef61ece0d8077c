//! The replay dialog's earlier entries ([`Entry`]): what was run, newest first, at most
//! [`MAX_ENTRIES`] distinct ones. The file (`replay_history.json` in dumpview's state
//! directory) is read and written by the runtime; here are its format and the rule for
//! adding one ([`remember`]).
//!
//! ```json
//! {"format": "dumpview.replay_history", "version": 1,
//!  "entries": [{"candidate": "torch.ops.npu.npu_rms_norm", "reference": "builtin:rms_norm",
//!               "standard": "allclose", "atol": "1e-5", "rtol": "1e-3", "python": ""}]}
//! ```

use serde::{Deserialize, Serialize};

/// The file's `format`.
pub const FORMAT: &str = "dumpview.replay_history";
/// The newest `version` this build writes and reads.
pub const VERSION: u32 = 1;
/// How many distinct entries are kept.
pub const MAX_ENTRIES: usize = 20;
/// A history file larger than this is not read (it cannot be one this build wrote).
pub const MAX_BYTES: u64 = 1 << 20;

/// One replay as the dialog's fields held it when Enter started it: text as typed, empty
/// where a field was left empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Entry {
    /// The candidate operator.
    pub candidate: String,
    /// The reference.
    pub reference: String,
    /// `msprobe`, `dynamo` or `allclose`.
    pub standard: String,
    /// allclose's absolute tolerance (empty with the other standards).
    pub atol: String,
    /// allclose's relative tolerance.
    pub rtol: String,
    /// The Python interpreter; empty: dumpview's choice.
    pub python: String,
}

#[derive(Serialize, Deserialize)]
struct File {
    format: String,
    version: u32,
    entries: Vec<Entry>,
}

/// The entries of a history file's text, newest first (at most [`MAX_ENTRIES`]).
///
/// # Errors
/// What is wrong with it, in words: not JSON, another format, a newer version.
pub fn parse(text: &str) -> Result<Vec<Entry>, String> {
    let file: File = serde_json::from_str(text).map_err(|e| format!("not a history file: {e}"))?;
    if file.format != FORMAT {
        return Err(format!("format {:?}, not {FORMAT:?}", file.format));
    }
    if file.version > VERSION {
        return Err(format!(
            "version {} is newer than this dumpview reads ({VERSION})",
            file.version
        ));
    }
    let mut entries: Vec<Entry> = Vec::new();
    for entry in file.entries {
        if !entries.contains(&entry) && entries.len() < MAX_ENTRIES {
            entries.push(entry);
        }
    }
    Ok(entries)
}

/// The text of a history file holding `entries`.
pub fn to_json(entries: &[Entry]) -> String {
    let file = File {
        format: FORMAT.to_string(),
        version: VERSION,
        entries: entries.iter().take(MAX_ENTRIES).cloned().collect(),
    };
    serde_json::to_string_pretty(&file).expect("strings serialize") + "\n"
}

/// `entries` with `entry` first: an equal entry further down is dropped, and the oldest go
/// beyond [`MAX_ENTRIES`].
pub fn remember(entries: Vec<Entry>, entry: Entry) -> Vec<Entry> {
    let mut out = Vec::with_capacity(entries.len() + 1);
    out.extend(entries.into_iter().filter(|e| *e != entry));
    out.insert(0, entry);
    out.truncate(MAX_ENTRIES);
    out
}

/// The distinct non-empty values `field` took in `entries`, in their order (newest first):
/// what Up and Down walk through in one field of the dialog.
pub fn values(entries: &[Entry], field: impl Fn(&Entry) -> &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for entry in entries {
        let value = field(entry);
        if !value.is_empty() && !out.contains(&value) {
            out.push(value);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(candidate: &str) -> Entry {
        Entry {
            candidate: candidate.to_string(),
            reference: "builtin:rms_norm".to_string(),
            standard: "msprobe".to_string(),
            ..Entry::default()
        }
    }

    #[test]
    fn the_newest_comes_first_once_and_the_oldest_go() {
        let mut entries = Vec::new();
        for i in 0..25 {
            entries = remember(entries, entry(&format!("c{i}")));
        }
        assert_eq!(entries.len(), MAX_ENTRIES);
        assert_eq!(entries[0].candidate, "c24");
        assert_eq!(entries[MAX_ENTRIES - 1].candidate, "c5");
        let entries = remember(entries, entry("c10"));
        assert_eq!(entries.len(), MAX_ENTRIES);
        assert_eq!(entries[0].candidate, "c10");
        assert_eq!(
            entries.iter().filter(|e| e.candidate == "c10").count(),
            1,
            "an equal entry moves up, it is not kept twice"
        );
    }

    #[test]
    fn a_file_round_trips_and_a_foreign_one_is_refused() {
        let entries = vec![entry("b"), entry("a")];
        assert_eq!(parse(&to_json(&entries)).unwrap(), entries);
        // A file written by hand with a repeat keeps the first (newest) of them.
        let repeated = to_json(&[entry("b"), entry("a"), entry("b")]);
        assert_eq!(parse(&repeated).unwrap(), entries);
        // Fields this build does not know, or lacks, are no error.
        let text = r#"{"format": "dumpview.replay_history", "version": 1,
            "entries": [{"candidate": "x", "future": 1}]}"#;
        assert_eq!(parse(text).unwrap()[0].candidate, "x");
        for (text, problem) in [
            ("{", "not a history file"),
            ("[1, 2]", "not a history file"),
            (
                r#"{"format": "other", "version": 1, "entries": []}"#,
                "format \"other\"",
            ),
            (
                r#"{"format": "dumpview.replay_history", "version": 9, "entries": []}"#,
                "newer",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(problem), "{text}: {e}");
        }
    }

    #[test]
    fn values_are_distinct_and_non_empty() {
        let mut a = entry("x");
        a.python = "/opt/py".into();
        let entries = vec![a, entry("y"), entry("x")];
        assert_eq!(values(&entries, |e| &e.candidate), ["x", "y"]);
        assert_eq!(values(&entries, |e| &e.python), ["/opt/py"]);
    }
}
