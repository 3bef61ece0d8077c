//! Attempts: a run re-run into the same `DUMP_PROBE_DIR` writes its window beside the old one
//! (`match1-occ1` is attempt 1, `match1-occ1.2` attempt 2, ...; the probe never overwrites a
//! dump). A comparison wants one attempt of each window: the newest by default, or the one
//! `--attempt N` names. Which was chosen, and that older ones exist, is said in a note.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::model::dump::{Dump, Warning, Window};

use super::LoadError;

/// Which attempt of each window to keep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Attempt {
    /// The highest attempt number of each window (never the newest file time: a copied or
    /// touched directory must not change the answer).
    #[default]
    Newest,
    /// Exactly this attempt, 1-based; a window that has several attempts but not this one
    /// is an error.
    Number(u32),
}

/// The attempt a window directory's name says: `match1-occ1.3` is 3, `match1-occ1` is 1.
/// Only the probe's own directory names carry a suffix; anything else is 1.
pub fn attempt_of_dir(window_dir: &Path) -> u32 {
    let name = window_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    name.rsplit_once('.')
        .filter(|(base, _)| is_probe_window_name(base))
        .and_then(|(_, n)| n.parse::<u32>().ok())
        .filter(|&n| n >= 2)
        .unwrap_or(1)
}

/// `match<M>-occ<O>`, the probe's window directory name.
fn is_probe_window_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("match") else {
        return false;
    };
    let Some((m, o)) = rest.split_once("-occ") else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(m) && digits(o)
}

/// Where a window's attempts live side by side: the directory holding the window directory,
/// and the window's rank, match and occurrence.
type Slot = (PathBuf, u32, u32, u32);

fn slot(window: &Window) -> Slot {
    let parent = window
        .window_dir()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    (parent, window.rank, window.match_index, window.occurrence)
}

/// Keeps one attempt of every window of `dump` (see [`Attempt`]) and adds a note for each
/// window that had others: which attempt was chosen and which were left out.
///
/// # Errors
/// [`Attempt::Number`] naming an attempt that a window with several attempts lacks, or that
/// no window of the dump has.
pub fn choose_attempts(dump: &mut Dump, choice: Attempt) -> Result<(), LoadError> {
    let mut slots: BTreeMap<Slot, Vec<u32>> = BTreeMap::new();
    for window in &dump.windows {
        slots.entry(slot(window)).or_default().push(window.attempt);
    }
    let mut keep: BTreeMap<Slot, u32> = BTreeMap::new();
    for (key, attempts) in &mut slots {
        attempts.sort_unstable();
        attempts.dedup();
        let chosen = match choice {
            Attempt::Newest => *attempts.last().expect("a slot holds a window"),
            Attempt::Number(n) if attempts.contains(&n) => n,
            Attempt::Number(n) if attempts.len() > 1 || n != 1 => {
                return Err(LoadError::Input {
                    path: key.0.clone(),
                    problem: format!(
                        "--attempt {n}: rank {} match {} occurrence {} has attempt{} {}",
                        key.1,
                        key.2,
                        key.3,
                        if attempts.len() == 1 { "" } else { "s" },
                        join(attempts)
                    ),
                });
            }
            Attempt::Number(_) => attempts[0],
        };
        keep.insert(key.clone(), chosen);
    }
    let mut notes = Vec::new();
    dump.windows.retain(|window| {
        let key = slot(window);
        let chosen = keep[&key];
        if window.attempt != chosen {
            return false;
        }
        let attempts = &slots[&key];
        if attempts.len() > 1 {
            let others: Vec<u32> = attempts.iter().copied().filter(|&a| a != chosen).collect();
            let how = match choice {
                Attempt::Newest => "the newest",
                Attempt::Number(_) => "as --attempt asked",
            };
            notes.push(Warning::note(
                window.window_dir(),
                format!(
                    "attempt {chosen} of {} used ({how}); attempt{} {} of this window left out (--attempt N picks one)",
                    attempts.len(),
                    if others.len() == 1 { "" } else { "s" },
                    join(&others)
                ),
            ));
        }
        true
    });
    dump.warnings.extend(notes);
    Ok(())
}

fn join(numbers: &[u32]) -> String {
    numbers
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_names_give_attempts() {
        assert_eq!(attempt_of_dir(Path::new("d/rank0/match1-occ1")), 1);
        assert_eq!(attempt_of_dir(Path::new("d/rank0/match1-occ1.2")), 2);
        assert_eq!(attempt_of_dir(Path::new("d/rank0/match12-occ3.17")), 17);
        // Not the probe's names: no attempt is read from them.
        assert_eq!(attempt_of_dir(Path::new("d/step1.2")), 1);
        assert_eq!(attempt_of_dir(Path::new("d/rank0/match1-occ1.x")), 1);
        assert_eq!(attempt_of_dir(Path::new("d/rank0/match1-occ1.1")), 1);
    }
}
