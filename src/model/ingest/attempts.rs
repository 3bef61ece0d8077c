//! Attempts: a run re-run into the same `DUMP_PROBE_DIR` writes its window beside the old one
//! (`match1-occ1` is attempt 1, `match1-occ1.2` attempt 2, ...; the probe never overwrites a
//! dump). A comparison wants one attempt of each window: the newest by default, or the one
//! `--attempt N` names. Which was chosen, and that older ones exist, is said in a note.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::model::dump::{Dump, UnfinishedWindow, WRITTEN_NOT_COMPLETED, Warning, Window};

use super::LoadError;

/// Which attempt of each window to keep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AttemptChoice {
    /// The highest attempt number of each window (never the newest file time: a copied or
    /// touched directory must not change the answer).
    #[default]
    Newest,
    /// Exactly this attempt, 1-based; a window that lacks it finished (no such attempt, or
    /// an unfinished one without `manifest.json`) is an error listing those it has.
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
    match_and_occurrence(name).is_some()
}

/// (M, O) of `match<M>-occ<O>`.
fn match_and_occurrence(name: &str) -> Option<(u32, u32)> {
    let (m, o) = name.strip_prefix("match")?.split_once("-occ")?;
    Some((number(m)?, number(o)?))
}

/// A decimal number written with digits only (no sign, no space).
fn number(text: &str) -> Option<u32> {
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// Where a probe window directory sits among its attempts, read from its names alone (no
/// manifest needed: an unfinished window has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeWindowDir {
    /// R of the parent `rank<R>`.
    pub rank: u32,
    /// M of `match<M>-occ<O>`.
    pub match_index: u32,
    /// O of `match<M>-occ<O>`.
    pub occurrence: u32,
    /// N of the suffix `.N` (N >= 2), else 1.
    pub attempt: u32,
}

/// The ids of a directory named as the probe names a window, `rank<R>/match<M>-occ<O>` or
/// `rank<R>/match<M>-occ<O>.<N>` with N >= 2; `None` for any other name.
pub fn probe_window_dir(dir: &Path) -> Option<ProbeWindowDir> {
    let name = dir.file_name()?.to_str()?;
    let rank = dir
        .parent()?
        .file_name()?
        .to_str()?
        .strip_prefix("rank")
        .and_then(number)?;
    let (base, attempt) = match name.rsplit_once('.') {
        Some((base, n)) => (base, number(n).filter(|&n| n >= 2)?),
        None => (name, 1),
    };
    let (match_index, occurrence) = match_and_occurrence(base)?;
    Some(ProbeWindowDir {
        rank,
        match_index,
        occurrence,
        attempt,
    })
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

/// Keeps one attempt of every window of `dump` (see [`AttemptChoice`]) and adds a note for each
/// window that had others: which attempt was chosen and which were left out. `unfinished`
/// are the window directories without a manifest met beside them, `unreadable` the manifests
/// that could not be read (each has its UNREADABLE WINDOW warning): never chosen (they have
/// no statistics), named in the note and in the error when `--attempt` asks for one.
///
/// # Errors
/// [`AttemptChoice::Number`] naming an attempt that a window of the dump lacks or has only
/// unfinished: the error lists the window's attempts and which are finished.
pub fn choose_attempts(
    dump: &mut Dump,
    choice: AttemptChoice,
    unfinished: &[UnfinishedWindow],
    unreadable: &[PathBuf],
) -> Result<(), LoadError> {
    let mut slots: BTreeMap<Slot, Vec<u32>> = BTreeMap::new();
    for window in &dump.windows {
        slots.entry(slot(window)).or_default().push(window.attempt);
    }
    let mut keep: BTreeMap<Slot, u32> = BTreeMap::new();
    for (key, attempts) in &mut slots {
        attempts.sort_unstable();
        attempts.dedup();
        let chosen = match choice {
            AttemptChoice::Newest => *attempts.last().expect("a slot holds a window"),
            AttemptChoice::Number(n) if attempts.contains(&n) => n,
            AttemptChoice::Number(n) => {
                return Err(LoadError::Input {
                    path: key.0.clone(),
                    problem: lacking(n, key, attempts, unfinished, unreadable),
                });
            }
        };
        keep.insert(key.clone(), chosen);
    }
    let mut notes = copies_left_out(dump);
    dump.windows.retain(|window| {
        let key = slot(window);
        let chosen = keep[&key];
        if window.attempt != chosen {
            return false;
        }
        let attempts = &slots[&key];
        let open = numbers(&unfinished_of(&key, unfinished));
        let broken = numbers(&unreadable_of(&key, unreadable));
        if attempts.len() > 1 || !open.is_empty() || !broken.is_empty() {
            let others: Vec<u32> = attempts.iter().copied().filter(|&a| a != chosen).collect();
            let newer_open: Vec<u32> = open.iter().copied().filter(|&a| a > chosen).collect();
            let newer_broken: Vec<u32> = broken.iter().copied().filter(|&a| a > chosen).collect();
            let mut newer = Vec::new();
            if !newer_open.is_empty() {
                newer.push(format!(
                    "{} newer but unfinished",
                    attempts_text(&newer_open)
                ));
            }
            if !newer_broken.is_empty() {
                newer.push(format!(
                    "{} newer but unreadable",
                    attempts_text(&newer_broken)
                ));
            }
            let how = match choice {
                AttemptChoice::Number(_) => "as --attempt asked".to_string(),
                AttemptChoice::Newest if newer.is_empty() => "the newest".to_string(),
                AttemptChoice::Newest if newer_broken.is_empty() => {
                    format!("the newest finished one: {}", newer.join(", "))
                }
                AttemptChoice::Newest => format!("the newest usable one: {}", newer.join(", ")),
            };
            let mut message = format!("attempt {chosen} used ({how})");
            if !others.is_empty() {
                message += &format!("; finished {} left out", attempts_text(&others));
            }
            if !open.is_empty() {
                message += &format!(
                    "; unfinished {} (no manifest.json) without statistics",
                    attempts_text(&open)
                );
            }
            if !broken.is_empty() {
                message += &format!(
                    "; {} with a manifest that could not be read (its UNREADABLE WINDOW warning \
                     says why)",
                    attempts_text(&broken)
                );
            }
            message += " (--attempt N picks one)";
            notes.push(Warning::note(window.window_dir(), message));
        }
        true
    });
    dump.warnings.extend(notes);
    Ok(())
}

/// Leaves out every copied attempt directory: a window whose probe directory name says another
/// attempt than its manifest records (`match1-occ1.3` recording attempt 2, a copy of `.2`),
/// where another window of its slot records that attempt under its own name. Each copy left
/// out has a lost-evidence warning naming both directories. Returns those warnings.
fn copies_left_out(dump: &mut Dump) -> Vec<Warning> {
    let named = |w: &Window| probe_window_dir(w.window_dir()).map(|ids| ids.attempt);
    let mut originals: BTreeMap<(Slot, u32), usize> = BTreeMap::new();
    for (i, window) in dump.windows.iter().enumerate() {
        if named(window) == Some(window.attempt) {
            originals.entry((slot(window), window.attempt)).or_insert(i);
        }
    }
    let mut left_out = Vec::new();
    let mut warnings = Vec::new();
    for (i, window) in dump.windows.iter().enumerate() {
        if named(window).is_none_or(|n| n == window.attempt) {
            continue;
        }
        if let Some(&original) = originals.get(&(slot(window), window.attempt)) {
            warnings.push(Warning::lost(
                window.source.clone(),
                format!(
                    "records attempt {} as {} does (a copied directory?): this window is left \
                     out",
                    window.attempt,
                    dump.windows[original].window_dir().display()
                ),
            ));
            left_out.push(i);
        }
    }
    for i in left_out.into_iter().rev() {
        dump.windows.remove(i);
    }
    warnings
}

/// `attempt 5` / `attempts 2, 3, 5`.
fn attempts_text(numbers: &[u32]) -> String {
    format!(
        "attempt{} {}",
        if numbers.len() == 1 { "" } else { "s" },
        join(numbers)
    )
}

/// The attempt number of `dir` when it is a probe window directory of the window of `key`.
fn attempt_in_slot(key: &Slot, dir: &Path) -> Option<u32> {
    let ids = probe_window_dir(dir)?;
    let same = dir.parent() == Some(key.0.as_path())
        && (ids.rank, ids.match_index, ids.occurrence) == (key.1, key.2, key.3);
    same.then_some(ids.attempt)
}

/// The attempts among `unfinished` of the window of `key`, with their directories.
fn unfinished_of<'a>(key: &Slot, unfinished: &'a [UnfinishedWindow]) -> Vec<(u32, &'a Path)> {
    unfinished_windows_of(key, unfinished)
        .into_iter()
        .map(|(a, w)| (a, w.dir.as_path()))
        .collect()
}

/// [`unfinished_of`], with the windows themselves.
fn unfinished_windows_of<'a>(
    key: &Slot,
    unfinished: &'a [UnfinishedWindow],
) -> Vec<(u32, &'a UnfinishedWindow)> {
    unfinished
        .iter()
        .filter_map(|w| Some((attempt_in_slot(key, &w.dir)?, w)))
        .collect()
}

/// The attempts among the `unreadable` manifests of the window of `key`, with the manifests.
fn unreadable_of<'a>(key: &Slot, unreadable: &'a [PathBuf]) -> Vec<(u32, &'a Path)> {
    unreadable
        .iter()
        .filter_map(|manifest| {
            Some((
                attempt_in_slot(key, manifest.parent()?)?,
                manifest.as_path(),
            ))
        })
        .collect()
}

/// The attempt numbers of `found`, sorted.
fn numbers(found: &[(u32, &Path)]) -> Vec<u32> {
    let mut numbers: Vec<u32> = found.iter().map(|(a, _)| *a).collect();
    numbers.sort_unstable();
    numbers
}

/// Why `--attempt n` cannot be used for the window of `key`, whose finished attempts are
/// `finished`: every attempt it has, finished or not, and what an unfinished or unreadable
/// `n` is.
fn lacking(
    n: u32,
    key: &Slot,
    finished: &[u32],
    unfinished: &[UnfinishedWindow],
    unreadable: &[PathBuf],
) -> String {
    let open = unfinished_of(key, unfinished);
    let broken = unreadable_of(key, unreadable);
    let mut every: Vec<u32> = finished
        .iter()
        .copied()
        .chain(open.iter().map(|(a, _)| *a))
        .chain(broken.iter().map(|(a, _)| *a))
        .collect();
    every.sort_unstable();
    every.dedup();
    let detail = if open.is_empty() && broken.is_empty() {
        match finished.len() {
            1 => "finished".to_string(),
            2 => "both finished".to_string(),
            _ => "all finished".to_string(),
        }
    } else {
        let mut detail = format!("finished: {}", join(finished));
        if !open.is_empty() {
            detail += &format!(
                "; unfinished, without manifest.json: {}",
                join(&numbers(&open))
            );
        }
        if !broken.is_empty() {
            detail += &format!("; manifest unreadable: {}", join(&numbers(&broken)));
        }
        detail
    };
    let mut problem = format!(
        "--attempt {n}: rank {} match {} occurrence {} has attempt{} {} ({detail})",
        key.1,
        key.2,
        key.3,
        if every.len() == 1 { "" } else { "s" },
        join(&every)
    );
    if let Some((_, window)) = unfinished_windows_of(key, unfinished)
        .into_iter()
        .find(|(a, _)| *a == n)
    {
        let how = match window.only_cut_off() {
            true => WRITTEN_NOT_COMPLETED,
            false => "the run stopped before finish()",
        };
        problem += &format!(
            "; attempt {n} ({}) is unfinished: {how}, so it has no statistics to use (its input \
             sets, if any, replay with `dumpview replay`)",
            window.dir.display()
        );
    }
    if let Some((_, manifest)) = broken.iter().find(|(a, _)| *a == n) {
        problem += &format!(
            "; attempt {n}'s manifest {} could not be read (its UNREADABLE WINDOW warning says \
             why)",
            manifest.display()
        );
    }
    problem
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
