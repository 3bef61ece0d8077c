//! `dumpview replay DUMP --list` answered here, without Python: the windows of a local dump
//! found as assets/replay_op.py finds them (`find_windows`, `_choose_attempts`,
//! `select_windows`), their input sets from the manifests' `input_sets` and, for an unfinished
//! window (no manifest.json), from the file names under `inputs/`; the document and its text
//! are `model::present::replay_list`'s.
//!
//! Nothing is loaded but the manifests' headers and `input_sets` (the records are skipped),
//! and nothing but file names and sizes under `inputs/`. A 0-byte input-set file is called
//! out on its line and returned as lost evidence (exit 1).

use std::path::{Component, Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use crate::model::dump::{Warning, WarningKind};
use crate::model::present::replay_list::{
    LIST_FORMAT, LIST_VERSION, ListArg, ListDocument, ListSet, ListWindow, Ordered, UNFINISHED_NOTE,
};

static RANK_DIR: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^rank(\d+)$").unwrap());
static WINDOW_DIR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^match(\d+)-occ(\d+)(?:\.(\d+))?$").unwrap());
static INPUT_FILE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(.*)#(\d+)(?:\.(\d+))?\.pt$").unwrap());
static CUT_OFF: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\.tmp\.\d+$").unwrap());
static ATTEMPT_SUFFIX: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\.(\d+)$").unwrap());

/// What a listing found: the document, and the input sets lost (0-byte files).
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    /// The document (`--json`) that `render_list` prints as text.
    pub document: ListDocument,
    /// A `lost_evidence` warning per 0-byte input-set file.
    pub warnings: Vec<Warning>,
}

/// The header and input sets of a manifest; the records are skipped unread.
#[derive(serde::Deserialize)]
struct Head {
    #[serde(default)]
    format: Option<Ordered>,
    #[serde(default)]
    schema_version: Option<Ordered>,
    #[serde(default)]
    rank: Option<Ordered>,
    #[serde(default)]
    label: Option<Ordered>,
    #[serde(default, rename = "match")]
    match_: Option<Ordered>,
    #[serde(default)]
    occurrence: Option<Ordered>,
    #[serde(default)]
    attempt: Option<Ordered>,
    #[serde(default)]
    input_sets: Option<Ordered>,
    #[serde(default)]
    run: Option<Ordered>,
}

/// One window found.
struct Found {
    /// The manifest's path (None: unfinished).
    manifest: Option<String>,
    directory: String,
    rank: Ordered,
    label: Ordered,
    match_: Ordered,
    occurrence: Ordered,
    attempt: u64,
    attempt_value: Ordered,
    /// (key, entry) of each input set.
    sets: Vec<(String, Ordered)>,
    cut_off: Vec<String>,
    /// The manifest's `run.executable`: the interpreter that ran the model.
    executable: Option<String>,
}

impl Found {
    fn unfinished(&self) -> bool {
        self.manifest.is_none()
    }

    fn describe(&self) -> String {
        let attempt = match self.attempt {
            1 => String::new(),
            n => format!(", attempt {n}"),
        };
        match &self.manifest {
            Some(path) => format!(
                "{path} (rank {}, label {}, match {}, occurrence {}{attempt})",
                self.rank.py_str(),
                py_repr_label(&self.label),
                self.match_.py_str(),
                self.occurrence.py_str()
            ),
            None => format!(
                "{} (unfinished: no manifest.json; rank {}, match {}, occurrence {}{attempt})",
                self.directory,
                self.rank.py_str(),
                self.match_.py_str(),
                self.occurrence.py_str()
            ),
        }
    }
}

fn py_repr_label(label: &Ordered) -> String {
    match label {
        Ordered::String(s) => format!("'{s}'"),
        other => other.py_str(),
    }
}

/// `os.path.normpath` of a path, lexically.
fn normpath(path: &Path) -> String {
    let mut parts: Vec<Component> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match parts.last() {
                Some(Component::Normal(_)) => {
                    parts.pop();
                }
                Some(Component::RootDir) => {}
                _ => parts.push(c),
            },
            c => parts.push(c),
        }
    }
    let joined: PathBuf = parts.iter().collect();
    match joined.as_os_str().is_empty() {
        true => ".".into(),
        false => joined.display().to_string(),
    }
}

fn dirname(path: &str) -> String {
    match Path::new(path).parent().map(|p| p.display().to_string()) {
        Some(p) if !p.is_empty() => p,
        _ => ".".into(),
    }
}

fn base_name(path: &str) -> String {
    Path::new(&normpath(Path::new(path)))
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn attempt_from_dir(directory: &str) -> u64 {
    ATTEMPT_SUFFIX
        .captures(&base_name(directory))
        .and_then(|c| c[1].parse().ok())
        .unwrap_or(1)
}

/// (rank, match, occurrence, attempt) of a directory named as the probe names a window.
fn probe_window_ids(directory: &Path) -> Option<(u64, u64, u64, u64)> {
    let path = std::path::absolute(directory).ok()?;
    let path = PathBuf::from(normpath(&path));
    let window = WINDOW_DIR.captures(path.file_name()?.to_str()?)?;
    let rank = RANK_DIR.captures(path.parent()?.file_name()?.to_str()?)?;
    let attempt = match window.get(3) {
        Some(n) => {
            let n: u64 = n.as_str().parse().ok()?;
            if n < 2 {
                return None;
            }
            n
        }
        None => 1,
    };
    Some((
        rank[1].parse().ok()?,
        window[1].parse().ok()?,
        window[2].parse().ok()?,
        attempt,
    ))
}

fn files_under(directory: &Path, sub: &str) -> Vec<String> {
    let dir = directory.join(sub);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| dir.join(e.file_name()).is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The input sets of an unfinished window, from the file names under `inputs/`
/// (replay_op.py's `input_sets_from_names`).
fn input_sets_from_names(names: &[String]) -> Vec<(String, Ordered)> {
    let mut entries: Vec<(String, u64, u64, String, String)> = Vec::new();
    for name in names {
        if CUT_OFF.is_match(name) || !name.ends_with(".pt") {
            continue;
        }
        let stem = name[..name.len() - 3].to_string();
        let found = INPUT_FILE.captures(name);
        let collided = |c: &regex::Captures| c.get(3).and_then(|k| k.as_str().parse::<u64>().ok());
        let (stage, occurrence, order) = match &found {
            Some(c) if !c[1].is_empty() && collided(c).is_none_or(|k| k >= 2) => (
                c[1].to_string(),
                c[2].parse().unwrap_or(u64::MAX),
                collided(c).unwrap_or(1),
            ),
            Some(c) => (stem.clone(), 1, collided(c).unwrap_or(1)),
            None => (stem.clone(), 1, 1),
        };
        entries.push((stage, occurrence, order, format!("inputs/{name}"), stem));
    }
    entries.sort_by(|a, b| (&a.0, a.1, a.2).cmp(&(&b.0, b.1, b.2)));
    entries
        .into_iter()
        .map(|(stage, occurrence, _, file, key)| {
            let entry = Ordered::Object(vec![
                ("stage".into(), Ordered::String(stage)),
                ("occurrence".into(), Ordered::Number(occurrence.into())),
                ("file".into(), Ordered::String(file)),
                ("args".into(), Ordered::Object(Vec::new())),
            ]);
            (key, entry)
        })
        .collect()
}

fn unfinished_at(directory: &Path) -> Option<Found> {
    let (rank, match_, occurrence, attempt) = probe_window_ids(directory)?;
    if directory.join("manifest.json").is_file() {
        return None;
    }
    let dir = normpath(directory);
    let sets = input_sets_from_names(&files_under(directory, "inputs"));
    let mut cut_off: Vec<String> = ["", "inputs", "tensors"]
        .iter()
        .flat_map(|sub| {
            files_under(directory, sub)
                .into_iter()
                .filter(|n| CUT_OFF.is_match(n))
                .map(move |n| match sub.is_empty() {
                    true => n,
                    false => format!("{sub}/{n}"),
                })
        })
        .collect();
    cut_off.sort();
    Some(Found {
        manifest: None,
        directory: dir,
        rank: Ordered::Number(rank.into()),
        label: Ordered::Null,
        match_: Ordered::Number(match_.into()),
        occurrence: Ordered::Number(occurrence.into()),
        attempt,
        attempt_value: Ordered::Number(attempt.into()),
        sets,
        cut_off,
        executable: None,
    })
}

fn nothing_to_replay(window: &Found) -> String {
    match window.cut_off.is_empty() {
        false => format!(
            "no complete input set, only cut-off writes ({}: written but not completed, the disk may have been full or the run killed while writing them)",
            window.cut_off.join(", ")
        ),
        true => "nothing under inputs/ (the run claimed the directory and stopped before an \
                 input set was written)"
            .into(),
    }
}

/// The manifest at `path` (replay_op.py's `_read_manifest`), as a window.
fn read_manifest(path: &str) -> Result<Found, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: cannot read ({e})"))?;
    let text =
        std::str::from_utf8(&bytes).map_err(|e| format!("{path}: not a valid manifest ({e})"))?;
    let head: Head = match serde_json::from_str::<serde::de::IgnoredAny>(text) {
        Err(e) => return Err(format!("{path}: not a valid manifest ({e})")),
        Ok(_) => serde_json::from_str(text).map_err(|_| {
            format!("{path}: not a dump_probe manifest (format is not \"dumpview.manifest\")")
        })?,
    };
    if head.format.as_ref().and_then(Ordered::as_str) != Some("dumpview.manifest") {
        return Err(format!(
            "{path}: not a dump_probe manifest (format is not \"dumpview.manifest\")"
        ));
    }
    let version = head.schema_version.unwrap_or(Ordered::Null);
    if !matches!(&version, Ordered::Number(n) if n.as_u64() == Some(1)) {
        return Err(format!(
            "{path}: schema_version {}; this replay_op.py reads version 1",
            version.py_repr_like()
        ));
    }
    let directory = dirname(path);
    let attempt_value = match head.attempt {
        Some(Ordered::Number(n)) if n.as_u64().is_some_and(|n| n > 0) => Ordered::Number(n),
        _ => Ordered::Number(attempt_from_dir(&directory).into()),
    };
    let attempt = match &attempt_value {
        Ordered::Number(n) => n.as_u64().unwrap_or(1),
        _ => 1,
    };
    let sets = match head.input_sets {
        Some(Ordered::Array(items)) => items
            .into_iter()
            .filter(|e| matches!(e, Ordered::Object(_)))
            .map(|e| {
                let key = match e.get("key") {
                    Some(Ordered::String(k)) if !k.is_empty() => k.clone(),
                    _ => format!(
                        "{}#{}",
                        e.get("stage").unwrap_or(&Ordered::Null).py_str(),
                        e.get("occurrence").unwrap_or(&Ordered::Null).py_str()
                    ),
                };
                (key, e)
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(Found {
        manifest: Some(path.to_string()),
        directory,
        rank: head.rank.unwrap_or(Ordered::Null),
        label: head.label.unwrap_or(Ordered::Null),
        match_: head.match_.unwrap_or(Ordered::Null),
        occurrence: head.occurrence.unwrap_or(Ordered::Null),
        attempt,
        attempt_value,
        sets,
        cut_off: Vec::new(),
        executable: head
            .run
            .as_ref()
            .and_then(|r| r.get("executable"))
            .and_then(Ordered::as_str)
            .map(str::to_string),
    })
}

trait PyRepr {
    fn py_repr_like(&self) -> String;
}

impl PyRepr for Ordered {
    fn py_repr_like(&self) -> String {
        match self {
            Ordered::String(s) => format!("'{s}'"),
            other => other.py_str(),
        }
    }
}

/// Every directory under `dir`, depth first in name order, leaving out dot directories
/// and not following links (as `os.walk`).
fn walk(dir: &Path, out: &mut Vec<(PathBuf, Vec<String>)>) {
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if !name.starts_with('.') {
                dirs.push(name);
            }
        } else if kind.is_symlink() && entry.path().is_dir() {
            // os.walk lists a linked directory among the directories and does not enter it.
        } else {
            files.push(name);
        }
    }
    dirs.sort();
    out.push((dir.to_path_buf(), files));
    for d in dirs {
        walk(&dir.join(d), out);
    }
}

/// Every window under `dump`, one attempt of each (replay_op.py's `find_windows`).
fn find_windows(
    dump: &str,
    attempt: Option<u32>,
    log: &mut dyn FnMut(&str),
) -> Result<Vec<Found>, String> {
    let path = Path::new(dump);
    if !path.exists() {
        return Err(format!("{dump}: no such file or directory"));
    }
    if path.is_file() {
        let mut w = read_manifest(dump)?;
        w.manifest = Some(dump.to_string());
        return choose_attempts(vec![w], Vec::new(), attempt, log);
    }
    let direct = normpath(&path.join("manifest.json"));
    if Path::new(&direct).is_file() {
        return choose_attempts(vec![read_manifest(&direct)?], Vec::new(), attempt, log);
    }
    if let Some(lone) = unfinished_at(path) {
        if lone.sets.is_empty() {
            return Err(format!(
                "{dump}: an unfinished window (no manifest.json) with {}",
                nothing_to_replay(&lone)
            ));
        }
        return choose_attempts(vec![lone], Vec::new(), attempt, log);
    }
    let mut dirs = Vec::new();
    walk(path, &mut dirs);
    let (mut windows, mut empty) = (Vec::new(), Vec::new());
    for (dir, files) in dirs {
        if !files.iter().any(|f| f == "manifest.json") {
            if let Some(w) = unfinished_at(&dir) {
                match w.sets.is_empty() {
                    true => empty.push(w),
                    false => windows.push(w),
                }
            }
            continue;
        }
        let manifest = normpath(&dir.join("manifest.json"));
        match read_manifest(&manifest) {
            Ok(w) => windows.push(w),
            Err(e) => log(&format!("note: skipped {e}")),
        }
    }
    for w in &empty {
        log(&format!(
            "note: {}: an unfinished window (no manifest.json) with {}",
            w.directory,
            nothing_to_replay(w)
        ));
    }
    if windows.is_empty() {
        let unfinished = match empty.len() {
            0 => String::new(),
            1 => "; 1 unfinished window without input sets".into(),
            n => format!("; {n} unfinished windows without input sets"),
        };
        return Err(format!(
            "{dump}: no dump_probe manifest (manifest.json) found{unfinished}"
        ));
    }
    choose_attempts(windows, empty, attempt, log)
}

fn attempt_text(w: &Found) -> String {
    let what = match (w.unfinished(), w.sets.len()) {
        (false, _) => "finished".to_string(),
        (true, 0) => "unfinished, no input set".to_string(),
        (true, 1) => "unfinished, 1 input set".to_string(),
        (true, n) => format!("unfinished, {n} input sets"),
    };
    format!("{} ({what})", w.attempt)
}

type Slot = (String, String, String, String);

fn slot(w: &Found) -> Slot {
    (
        dirname(&normpath(Path::new(&w.directory))),
        w.rank.py_str(),
        w.match_.py_str(),
        w.occurrence.py_str(),
    )
}

/// Of several attempts of one window keep the newest, or the one `attempt` names
/// (replay_op.py's `_choose_attempts`).
fn choose_attempts(
    windows: Vec<Found>,
    empty: Vec<Found>,
    attempt: Option<u32>,
    log: &mut dyn FnMut(&str),
) -> Result<Vec<Found>, String> {
    let mut groups: Vec<(Slot, Vec<Found>)> = Vec::new();
    for w in windows {
        let key = slot(&w);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, group)) => group.push(w),
            None => groups.push((key, vec![w])),
        }
    }
    let mut kept = Vec::new();
    for (key, mut group) in groups {
        group.sort_by_key(|w| w.attempt);
        let chosen = match attempt {
            None => group.len() - 1,
            Some(n) => match group.iter().position(|w| w.attempt == u64::from(n)) {
                Some(i) => i,
                None => {
                    let mut every: Vec<&Found> = group
                        .iter()
                        .chain(empty.iter().filter(|w| slot(w) == key))
                        .collect();
                    every.sort_by_key(|w| w.attempt);
                    let why = match every.iter().find(|w| w.attempt == u64::from(n)) {
                        Some(lacking) => format!(
                            "attempt {n} is an unfinished window with {}",
                            nothing_to_replay(lacking)
                        ),
                        None => "no such attempt".into(),
                    };
                    let first = &group[0];
                    let parent = if key.0.is_empty() { ".".into() } else { key.0 };
                    return Err(format!(
                        "--attempt {n}: {why}; rank {} match {} occurrence {} in {parent} has attempt{} {}",
                        first.rank.py_str(),
                        first.match_.py_str(),
                        first.occurrence.py_str(),
                        if every.len() == 1 { "" } else { "s" },
                        every
                            .iter()
                            .map(|w| attempt_text(w))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            },
        };
        if group.len() > 1 {
            let c = &group[chosen];
            let left: Vec<String> = group
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != chosen)
                .map(|(_, w)| {
                    format!(
                        "attempt {}{}",
                        w.attempt,
                        if w.unfinished() { " (unfinished)" } else { "" }
                    )
                })
                .collect();
            log(&format!(
                "note: {}: using attempt {}{}; left out {}{}",
                c.directory,
                c.attempt,
                if c.unfinished() {
                    " (unfinished: no manifest.json)"
                } else {
                    ""
                },
                left.join(", "),
                attempt.map_or(String::new(), |n| format!(", as --attempt {n} asked"))
            ));
        }
        kept.push(group.swap_remove(chosen));
    }
    kept.sort_by_key(|w| {
        Path::new(&w.directory)
            .join("manifest.json")
            .display()
            .to_string()
    });
    Ok(kept)
}

/// The windows `--rank` and `--window` leave (replay_op.py's `select_windows`).
fn select_windows(
    mut windows: Vec<Found>,
    rank: Option<u32>,
    window: Option<&str>,
) -> Result<Vec<Found>, String> {
    if let Some(rank) = rank {
        windows.retain(
            |w| matches!(&w.rank, Ordered::Number(n) if n.as_u64() == Some(u64::from(rank))),
        );
        if windows.is_empty() {
            return Err(format!("no window of rank {rank} in the dump"));
        }
    }
    if let Some(name) = window {
        let chosen: Vec<bool> = windows
            .iter()
            .map(|w| {
                w.label.as_str() == Some(name)
                    || w.match_.py_str() == name
                    || base_name(&w.directory) == name
            })
            .collect();
        if !chosen.contains(&true) {
            return Err(format!(
                "no window '{name}' (a label, a match number or a window directory name); the dump has:\n  {}",
                windows
                    .iter()
                    .map(Found::describe)
                    .collect::<Vec<_>>()
                    .join("\n  ")
            ));
        }
        let mut keep = chosen.into_iter();
        windows.retain(|_| keep.next().unwrap_or(false));
    }
    Ok(windows)
}

/// The file of an input set, inside its window (None: it names a path outside).
fn input_file(directory: &str, entry: &Ordered) -> Option<PathBuf> {
    let rel = entry.get("file")?.as_str()?;
    if rel.is_empty()
        || Path::new(rel).is_absolute()
        || rel.replace('\\', "/").split('/').any(|p| p == "..")
    {
        return None;
    }
    Some(Path::new(directory).join(rel))
}

/// A listing of the input sets a dump holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequest {
    /// The dump, as in `ReplayRequest::dump`.
    pub dump: String,
    /// The window's rank.
    pub rank: Option<u32>,
    /// The window.
    pub window: Option<String>,
    /// The attempt, as in `ReplayRequest::attempt`.
    pub attempt: Option<u32>,
    /// The Python interpreter.
    pub python: Option<String>,
    /// JSON instead of text.
    pub json: bool,
}

/// Lists the input sets of the local dump `request.dump`; notes (attempts left out, windows
/// skipped) go to `log`.
///
/// # Errors
/// Why, in words (an input error: exit status 2): no dump there, no manifest, a window or
/// rank not there, an attempt not there.
pub fn list_local(request: &ListRequest, log: &mut dyn FnMut(&str)) -> Result<Listing, String> {
    let mut note = |line: &str| log(&format!("dumpview: {line}"));
    let windows = find_windows(&request.dump, request.attempt, &mut note)
        .and_then(|w| select_windows(w, request.rank, request.window.as_deref()))?;
    let mut warnings = Vec::new();
    let mut document = ListDocument {
        format: LIST_FORMAT,
        version: LIST_VERSION,
        dump: request.dump.clone(),
        windows: Vec::new(),
    };
    for w in windows {
        let unfinished = w.unfinished();
        let mut sets = Vec::new();
        for (key, entry) in &w.sets {
            let stage = entry.get("stage").cloned().unwrap_or(Ordered::Null);
            let captured = w
                .sets
                .iter()
                .filter(|(_, e)| e.get("stage").unwrap_or(&Ordered::Null) == &stage)
                .count();
            let path = input_file(&w.directory, entry);
            let size = path
                .as_ref()
                .and_then(|p| std::fs::metadata(p).ok())
                .filter(std::fs::Metadata::is_file)
                .map(|m| m.len());
            let file_empty = size == Some(0);
            if let (true, Some(path)) = (file_empty, &path) {
                warnings.push(Warning {
                    file: path.clone(),
                    message: format!(
                        "input set {key}: its file {} is empty (0 bytes): the input set is \
                         lost and cannot be replayed",
                        path.display()
                    ),
                    kind: WarningKind::LostEvidence,
                });
            }
            let args = match entry.get("args") {
                Some(Ordered::Object(args)) => args
                    .iter()
                    .map(|(name, desc)| ListArg::new(name, desc))
                    .collect(),
                _ => Vec::new(),
            };
            sets.push(ListSet {
                key: key.clone(),
                stage,
                occurrence: entry.get("occurrence").cloned().unwrap_or(Ordered::Null),
                captured,
                op: entry.get("op").cloned().unwrap_or(Ordered::Null),
                file: entry.get("file").cloned().unwrap_or(Ordered::Null),
                file_present: size.is_some(),
                file_empty,
                args,
            });
        }
        document.windows.push(ListWindow {
            manifest: w.manifest,
            directory: w.directory,
            rank: w.rank,
            label: w.label,
            match_: w.match_,
            occurrence: w.occurrence,
            attempt: w.attempt_value,
            unfinished,
            note: unfinished.then_some(UNFINISHED_NOTE),
            cut_off: w.cut_off,
            input_sets: sets,
        });
    }
    Ok(Listing { document, warnings })
}

/// The interpreter recorded (`run.executable`) in the manifest of the window that holds
/// `stage` (`stage#N`, or `stage` captured once) of the local dump `dump`, chosen by `rank`,
/// `window` and `attempt` as a replay chooses it; `None` when there is none, the window is
/// unfinished, or the dump or stage cannot be found (replay_op.py then says why).
pub fn recorded_interpreter(
    dump: &str,
    rank: Option<u32>,
    window: Option<&str>,
    attempt: Option<u32>,
    stage: &str,
) -> Option<String> {
    let windows = find_windows(dump, attempt, &mut |_| {})
        .and_then(|w| select_windows(w, rank, window))
        .ok()?;
    let (name, occurrence) = match stage.rsplit_once('#') {
        Some((s, n)) if n.parse::<u64>().is_ok() => (s, Some(n)),
        _ => (stage, None),
    };
    let holds = |w: &Found| {
        w.sets.iter().any(|(key, e)| {
            key == stage
                || (e.get("stage").and_then(Ordered::as_str) == Some(name)
                    && occurrence.is_none_or(|n| {
                        e.get("occurrence").map(Ordered::py_str).as_deref() == Some(n)
                    }))
        })
    };
    windows
        .iter()
        .find(|w| holds(w))
        .and_then(|w| w.executable.clone())
}
