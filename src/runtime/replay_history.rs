//! The replay dialog's earlier entries on disk: `$XDG_STATE_HOME/dumpview/replay_history.json`
//! (`~/.local/state/dumpview/` when `XDG_STATE_HOME` is unset or not absolute), in the format
//! of `model::replay::history`. Read when the app asks ([`load`]), one entry added at a time
//! ([`remember`]: read, add, write to a temporary file, rename over).
//!
//! A missing file is an empty history; a file that cannot be read or parsed is ignored with a
//! note for the user (the next entry replaces it), never an error that stops anything.

use std::path::{Path, PathBuf};

use crate::model::replay::history::{self, Entry};

/// The file's name inside dumpview's state directory.
pub const FILE: &str = "replay_history.json";

/// Where the history lives: `$XDG_STATE_HOME/dumpview/replay_history.json`, else
/// `$HOME/.local/state/dumpview/replay_history.json`; `None` without either (absolute).
pub fn path() -> Option<PathBuf> {
    let absolute = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base =
        absolute("XDG_STATE_HOME").or_else(|| absolute("HOME").map(|h| h.join(".local/state")))?;
    Some(base.join("dumpview").join(FILE))
}

/// The entries at `path`, newest first, and a note when the file was there but ignored.
pub fn load_from(path: &Path) -> (Vec<Entry>, Option<String>) {
    let ignored = |why: String| {
        (
            Vec::new(),
            Some(format!(
                "replay history {} ignored ({why}); the next replay starts a new one",
                path.display()
            )),
        )
    };
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Vec::new(), None),
        Err(e) => return ignored(e.to_string()),
        Ok(m) if !m.is_file() => return ignored("not a regular file".into()),
        Ok(m) if m.len() > history::MAX_BYTES => {
            return ignored(format!("{} bytes, more than a history holds", m.len()));
        }
        Ok(_) => {}
    }
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => return ignored(e.to_string()),
    };
    match history::parse(&text) {
        Ok(entries) => (entries, None),
        Err(why) => ignored(why),
    }
}

/// [`load_from`] the default [`path`]; no place for it is no history.
pub fn load() -> (Vec<Entry>, Option<String>) {
    match path() {
        Some(path) => load_from(&path),
        None => (Vec::new(), None),
    }
}

/// Adds `entry` to the history at `path` (newest first, bounded, without repeats),
/// creating its directory.
///
/// # Errors
/// What could not be written, with the path, for the status line.
pub fn remember_at(path: &Path, entry: Entry) -> Result<(), String> {
    let (entries, _) = load_from(path);
    let entries = history::remember(entries, entry);
    let failed = |what: &str, e: std::io::Error| {
        format!("replay history {}: cannot {what}: {e}", path.display())
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| failed("create its directory", e))?;
    }
    crate::model::io::write_atomically(path, history::to_json(&entries).as_bytes())
        .map_err(|e| failed("write", e))
}

/// [`remember_at`] the default [`path`].
///
/// # Errors
/// As [`remember_at`]; no place for the file (neither `XDG_STATE_HOME` nor `HOME` set).
pub fn remember(entry: Entry) -> Result<(), String> {
    let path = path().ok_or_else(|| {
        "replay history not kept: set XDG_STATE_HOME or HOME for dumpview's state directory"
            .to_string()
    })?;
    remember_at(&path, entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(candidate: &str) -> Entry {
        Entry {
            candidate: candidate.into(),
            reference: "builtin:rms_norm".into(),
            standard: "msprobe".into(),
            ..Entry::default()
        }
    }

    #[test]
    fn entries_are_added_newest_first_into_a_new_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/dumpview").join(FILE);
        assert_eq!(load_from(&path), (Vec::new(), None));
        remember_at(&path, entry("a")).unwrap();
        remember_at(&path, entry("b")).unwrap();
        remember_at(&path, entry("a")).unwrap();
        let (entries, note) = load_from(&path);
        assert_eq!(note, None);
        assert_eq!(entries, [entry("a"), entry("b")]);
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [FILE]);
    }

    #[test]
    fn a_corrupt_file_is_ignored_with_a_note_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        std::fs::write(&path, "{\"format\": \"dumpview.replay_history\", \"entr").unwrap();
        let (entries, note) = load_from(&path);
        assert!(entries.is_empty());
        let note = note.unwrap();
        assert!(
            note.contains(&path.display().to_string()) && note.contains("ignored"),
            "{note}"
        );
        remember_at(&path, entry("a")).unwrap();
        assert_eq!(load_from(&path), (vec![entry("a")], None));
        // A directory where the file should be: a note, no panic.
        let odd = dir.path().join("odd.json");
        std::fs::create_dir(&odd).unwrap();
        assert!(load_from(&odd).1.unwrap().contains("not a regular file"));
        assert!(remember_at(&odd, entry("a")).is_err());
    }
}
