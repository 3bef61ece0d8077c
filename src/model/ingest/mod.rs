//! The one ingest pipeline: discover the dump files under the inputs ([`discover`]), read them
//! in parallel with progress, each by the format that claims it ([`crate::model::formats`]),
//! and apply the same checks to every window of every format ([`check_window`]).
//!
//! Every file becomes one [`Window`] (one rank's label window). A file cut short by a killed
//! run keeps its records and adds a [`Warning`] naming the file and byte offset; a broken
//! header, an unknown schema version or an unreadable file is an error naming the file.

mod attempts;
mod check;
mod discover;
mod error;
mod incremental;
mod same;
mod values;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

pub use attempts::{
    AttemptChoice, ProbeWindowDir, attempt_of_dir, choose_attempts, probe_window_dir,
};
pub use check::{check_records, check_window, drop_escaping_evidence};
pub use discover::{Found, discover, discover_all, discover_named, discover_watched};
pub use error::LoadError;
pub use incremental::{Fingerprint, Incremental, RefreshStats, SETTLE_AGE};
pub use same::same_input;

use crate::model::dump::{Dump, Warning, Window};
use crate::model::formats::{self, FormatError, HEAD_BYTES};
use crate::model::io::{FileBytes, MapChoice};

/// What a load is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadPhase {
    /// Listing the inputs for their manifests (totals not known yet).
    #[default]
    Finding,
    /// Reading the manifests found.
    Reading,
    /// Everything read: the scans, the diff and the diagnosis are being computed.
    Analysing,
}

/// Progress of a load, reported once the files are found and then once per manifest file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// What the load is doing.
    pub phase: LoadPhase,
    /// Which capture is being read: 0 for A, 1 for B (set by the caller that loads both).
    pub capture: usize,
    /// How many captures the load reads: 1, or 2 with B (0 where the caller did not say).
    pub captures: usize,
    /// Files read so far.
    pub files_done: usize,
    /// Files to read.
    pub files_total: usize,
    /// Bytes of the files read so far.
    pub bytes_done: u64,
    /// Bytes of all files to read.
    pub bytes_total: u64,
    /// Records read so far.
    pub records: usize,
}

/// Loads every manifest under `inputs` (see [`discover`]).
///
/// `progress` is called after each file. Records stay in capture order.
///
/// A file found in a directory search that cannot be read as a window costs only itself: the
/// other windows load, and the dump gets an `UNREADABLE WINDOW` warning naming the file and the
/// cause ([`Warning::unreadable_window`]).
///
/// # Errors
/// An input that cannot be found; a file named as an input itself that cannot be read; a
/// directory none of whose files can be read (the first file's error).
pub fn load(inputs: &[PathBuf], progress: &mut dyn FnMut(Progress)) -> Result<Dump, LoadError> {
    load_attempt(inputs, AttemptChoice::Newest, progress)
}

/// One note per symbolic link the search followed out of an input directory (the files under
/// it are read as part of the capture: said, since the evidence rule refuses such links for
/// saved files). A file found outside its input's real path is traced back to the first link
/// on its path below the input.
fn links_out_of(inputs: &[PathBuf], files: &[PathBuf]) -> Vec<Warning> {
    let mut links: Vec<(PathBuf, PathBuf)> = Vec::new();
    for input in inputs.iter().filter(|i| i.is_dir()) {
        let Ok(root) = std::fs::canonicalize(input) else {
            continue;
        };
        for file in files.iter().filter(|f| f.starts_with(input)) {
            if std::fs::canonicalize(file).is_ok_and(|real| real.starts_with(&root)) {
                continue;
            }
            // The first link below the input on the file's path.
            let mut at = input.clone();
            let Ok(rest) = file.strip_prefix(input) else {
                continue;
            };
            for part in rest.components() {
                at.push(part);
                if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
                    if let Ok(target) = std::fs::canonicalize(&at)
                        && !target.starts_with(&root)
                        && !links.iter().any(|(l, _)| *l == at)
                    {
                        links.push((at.clone(), target));
                    }
                    break;
                }
            }
        }
    }
    links
        .into_iter()
        .map(|(link, target)| {
            let message = format!(
                "a symbolic link out of the searched directory, followed: its dumps ({}) are \
                 read as part of this capture",
                target.display()
            );
            Warning::note(link, message)
        })
        .collect()
}

/// [`load`], keeping the given attempt of each window re-run into one directory
/// ([`choose_attempts`]).
///
/// # Errors
/// As [`load`]; an [`AttemptChoice::Number`] a window lacks.
pub fn load_attempt(
    inputs: &[PathBuf],
    attempt: AttemptChoice,
    progress: &mut dyn FnMut(Progress),
) -> Result<Dump, LoadError> {
    let Found {
        files: found,
        unfinished,
    } = discover_all(inputs)?;
    let files: Vec<PathBuf> = found.iter().map(|(path, _)| path.clone()).collect();
    let sizes: Vec<u64> = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .collect();
    let bytes_total = sizes.iter().sum();
    let mut dump = Dump::default();
    dump.warnings
        .extend(unfinished.iter().map(Warning::unfinished_window));
    dump.warnings.extend(links_out_of(inputs, &files));
    let mut state = Progress {
        phase: LoadPhase::Reading,
        files_total: files.len(),
        bytes_total,
        ..Progress::default()
    };
    // The totals are known: said before the first file is read.
    progress(state);
    let mut failed = None;
    let mut first_unreadable = None;
    let mut unreadable: Vec<PathBuf> = Vec::new();
    load_in_order(&files, &mut |index, loaded| {
        let (manifest, warnings) = match loaded {
            Ok(loaded) => loaded,
            Err(error) if !found[index].1 && !is_a_dump(&files[index]) => {
                // A `manifest.json` of something else (a Python package's, found by a search
                // over a whole home directory): skipped with a note, nothing lost.
                dump.warnings.push(Warning::note(
                    &files[index],
                    "not a dump of any known format (no probe, msprobe or windowed markers in \
                     its head, and not in a probe window directory): skipped",
                ));
                first_unreadable.get_or_insert(error);
                state.files_done += 1;
                state.bytes_done += sizes[index];
                progress(state);
                return true;
            }
            Err(error) if !found[index].1 => {
                let path = &files[index];
                let text = error.to_string();
                let prefix = format!("{}: ", path.display());
                let cause = text.strip_prefix(&prefix).unwrap_or(&text).to_string();
                dump.warnings.push(Warning::unreadable_window(path, cause));
                unreadable.push(path.clone());
                first_unreadable.get_or_insert(error);
                state.files_done += 1;
                state.bytes_done += sizes[index];
                progress(state);
                return true;
            }
            Err(error) => {
                failed = Some(error);
                return false;
            }
        };
        state.records += manifest.records.len();
        dump.windows.push(manifest);
        dump.warnings.extend(warnings);
        state.files_done += 1;
        state.bytes_done += sizes[index];
        progress(state);
        true
    });
    if let Some(error) = failed {
        return Err(error);
    }
    if let (true, Some(error)) = (dump.windows.is_empty(), first_unreadable) {
        return Err(error);
    }
    choose_attempts(&mut dump, attempt, &unfinished, &unreadable)?;
    sort_windows(&mut dump.windows);
    Ok(dump)
}

/// Whether the file at `path`, which did not load, was meant as a dump: `dump.json` (only
/// msprobe writes it), a file in a probe window directory (`rank<R>/match<M>-occ<O>`), or one
/// whose head names a dump (`dumpview.manifest`, the probe's `schema_version` or `records`, a
/// windowed manifest). A damaged dump stays lost evidence; anything else is not a dump.
fn is_a_dump(path: &Path) -> bool {
    if path.file_name().is_some_and(|n| n != "manifest.json") {
        return true;
    }
    if path.parent().and_then(probe_window_dir).is_some() {
        return true;
    }
    let mut head = vec![0u8; HEAD_BYTES];
    let n = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    let head = &head[..n];
    let has = |marker: &[u8]| memchr::memmem::find(head, marker).is_some();
    has(b"dumpview.manifest")
        || has(b"\"schema_version\"")
        || has(b"\"records\"")
        || crate::model::formats::windowed::is_windowed(head)
}

/// The one window order of a loaded capture: by rank, match, occurrence, then source path.
fn sort_windows(windows: &mut [Window]) {
    windows.sort_by(|a, b| {
        (a.rank, a.match_index, a.occurrence, &a.source).cmp(&(
            b.rank,
            b.match_index,
            b.occurrence,
            &b.source,
        ))
    });
}

type Loaded = Result<(Window, Vec<Warning>), LoadError>;

/// Reads and parses `files`, several at once on rayon's threads, and hands each result to
/// `each` on the calling thread in file order as soon as it and those before it are done,
/// until `each` returns false. Each file's bytes are dropped as soon as it is parsed.
fn load_in_order(files: &[PathBuf], each: &mut dyn FnMut(usize, Loaded) -> bool) {
    let one = |file: &PathBuf| -> Loaded {
        let bytes = FileBytes::read(file, true).map_err(|source| FormatError::Io {
            path: file.clone(),
            source,
        })?;
        let loaded = read_window(&bytes, file);
        bytes.release();
        loaded
    };
    // One file gets all threads inside the parser. From inside rayon's pool, waiting here
    // for other tasks could hold up the thread that would run them: load in turn.
    if files.len() < 2
        || rayon::current_num_threads() < 2
        || rayon::current_thread_index().is_some()
    {
        for (index, file) in files.iter().enumerate() {
            if !each(index, one(file)) {
                return;
            }
        }
        return;
    }
    let stop = AtomicBool::new(false);
    let (done, results) = std::sync::mpsc::channel::<(usize, Loaded)>();
    rayon::in_place_scope(|scope| {
        for (index, file) in files.iter().enumerate() {
            let (done, stop, one) = (done.clone(), &stop, &one);
            scope.spawn(move |_| {
                if !stop.load(Ordering::Relaxed) {
                    let _ = done.send((index, one(file)));
                }
            });
        }
        drop(done);
        let mut pending: Vec<Option<Loaded>> = files.iter().map(|_| None).collect();
        let mut next = 0;
        for (index, loaded) in results {
            pending[index] = Some(loaded);
            while let Some(loaded) = pending.get_mut(next).and_then(Option::take) {
                next += 1;
                if !each(next - 1, loaded) {
                    stop.store(true, Ordering::Relaxed);
                    return;
                }
            }
        }
    });
}

/// Reads one dump file's bytes as a window: the first format of the registry that claims
/// the file reads it, then [`check_window`] applies the checks every window gets.
///
/// # Errors
/// As the format's [`formats::Format::read`]: only a file that holds no window is an error.
pub fn read_window(bytes: &[u8], file: &Path) -> Result<(Window, Vec<Warning>), LoadError> {
    read_window_with(bytes, file, MapChoice::Lazy)
}

/// [`read_window`], with the other files the format reads (saved tensors) read under `map`:
/// [`MapChoice::Never`] for a watched window.
///
/// # Errors
/// As [`read_window`].
pub fn read_window_with(
    bytes: &[u8],
    file: &Path,
    map: MapChoice,
) -> Result<(Window, Vec<Warning>), LoadError> {
    let head = &bytes[..bytes.len().min(HEAD_BYTES)];
    let format = formats::claiming(file, head).ok_or_else(|| LoadError::Input {
        path: file.to_path_buf(),
        problem: "no dump format claims this file".into(),
    })?;
    let (mut window, mut warnings) = format.read_with(file, bytes, map)?;
    window.format = format.id();
    window.facts = format.facts();
    if window.attempt == 0 {
        window.attempt = attempt_of_dir(window.window_dir());
    }
    warnings.extend(check_window(&mut window));
    Ok((window, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::formats::probe::MANIFEST_NAME;

    fn manifest(rank: u32, records: &[(&str, u32, u64)]) -> String {
        let lines: Vec<String> = records
            .iter()
            .map(|(stage, occurrence, seq)| {
                format!(
                    r#"  {{"seq": {seq}, "stage": "{stage}", "occurrence": {occurrence}, "mode": "eager", "dtype": "float32", "shape": [2], "stride": [1], "storage_offset": 0, "element_size": 4, "numel": 2, "storage_ptr": 64, "storage_nbytes": 8, "data_ptr": 64, "device": "cpu", "device_format": null, "is_contiguous": true, "stats": null, "tensor_file": null}}"#
                )
            })
            .collect();
        format!(
            "{{\n \"format\": \"dumpview.manifest\",\n \"schema_version\": 1,\n \"label\": \"r\",\n \"match\": 1,\n \"occurrence\": 1,\n \"rank\": {rank},\n \"world_size\": 8,\n \"records\": [\n{}\n ]\n}}\n",
            lines.join(",\n")
        )
    }

    /// Eight ranks; some with warnings (a repeated key, a seq out of order).
    fn dump_dir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for rank in 0..8u32 {
            let mut records = vec![("a", 1, 0), ("b", 1, 1), ("a", 2, 2)];
            if rank % 3 == 1 {
                records.push(("b", 1, 3));
            }
            if rank % 4 == 2 {
                records.push(("c", 1, 1));
            }
            let window = dir.path().join(format!("rank{rank}/match1-occ1"));
            std::fs::create_dir_all(&window).unwrap();
            std::fs::write(window.join(MANIFEST_NAME), manifest(rank, &records)).unwrap();
        }
        dir
    }

    #[test]
    fn files_loaded_together_come_out_as_if_loaded_in_turn() {
        let dir = dump_dir();
        let mut seen = Vec::new();
        let dump = load(&[dir.path().to_path_buf()], &mut |p| seen.push(p)).unwrap();
        let files = discover(&[dir.path().to_path_buf()]).unwrap();
        let mut windows = Vec::new();
        let mut warnings = Vec::new();
        for file in &files {
            let (m, w) = read_window(&std::fs::read(file).unwrap(), file).unwrap();
            windows.push(m);
            warnings.extend(w);
        }
        assert_eq!(dump.windows, windows);
        assert_eq!(dump.warnings, warnings);
        assert_eq!(warnings.len(), 5);
        // The totals first (nothing read yet), then once per file.
        let done: Vec<usize> = seen.iter().map(|p| p.files_done).collect();
        assert_eq!(done, (0..=8).collect::<Vec<_>>());
        assert_eq!(seen.last().unwrap().bytes_done, seen[0].bytes_total);
        assert_eq!(seen.last().unwrap().records, 8 * 3 + 3 + 2);
    }

    #[test]
    fn an_unreadable_window_in_a_tree_costs_only_itself() {
        // Issue 11, item 2: one broken rank no longer fails the whole tree.
        let dir = dump_dir();
        for rank in [5, 3] {
            let file = dir
                .path()
                .join(format!("rank{rank}/match1-occ1/{MANIFEST_NAME}"));
            std::fs::write(&file, "{\"format\": \"other\"}").unwrap();
        }
        std::fs::write(
            dir.path()
                .join(format!("rank6/match1-occ1/{MANIFEST_NAME}")),
            "",
        )
        .unwrap();
        let mut done = Vec::new();
        let dump = load(&[dir.path().to_path_buf()], &mut |p| {
            done.push(p.files_done)
        })
        .unwrap();
        let ranks: Vec<u32> = dump.windows.iter().map(|w| w.rank).collect();
        assert_eq!(ranks, [0, 1, 2, 4, 7]);
        assert_eq!(done, (0..=8).collect::<Vec<_>>());
        let unreadable: Vec<String> = dump
            .warnings
            .iter()
            .filter(|w| w.message.starts_with(crate::model::dump::UNREADABLE_WINDOW))
            .map(|w| w.to_string())
            .collect();
        let file = |rank: u32| {
            dir.path()
                .join(format!("rank{rank}/match1-occ1/{MANIFEST_NAME}"))
        };
        assert_eq!(
            unreadable,
            [
                format!(
                    "UNREADABLE WINDOW {}: `format` is \"other\", expected \"dumpview.manifest\"",
                    file(3).display()
                ),
                format!(
                    "UNREADABLE WINDOW {}: `format` is \"other\", expected \"dumpview.manifest\"",
                    file(5).display()
                ),
                format!(
                    "UNREADABLE WINDOW {}: not a valid manifest: EOF while parsing a value at line 1 column 0",
                    file(6).display()
                ),
            ]
        );
        // The same file named on its own is an error, and a tree with no readable window too.
        let error = load(&[file(3)], &mut |_| {}).unwrap_err();
        assert!(error.to_string().contains("rank3"), "{error}");
        let lone = tempfile::tempdir().unwrap();
        std::fs::write(lone.path().join(MANIFEST_NAME), "garbage").unwrap();
        assert!(load(&[lone.path().to_path_buf()], &mut |_| {}).is_err());
    }

    #[test]
    fn a_window_killed_after_its_input_sets_is_a_note() {
        let dir = dump_dir();
        let killed = dir.path().join("rank0/match2-occ1");
        std::fs::create_dir_all(killed.join("inputs")).unwrap();
        std::fs::write(killed.join("inputs/op#1.pt"), b"").unwrap();
        let dump = load(&[dir.path().to_path_buf()], &mut |_| {}).unwrap();
        let notes: Vec<&Warning> = dump
            .warnings
            .iter()
            .filter(|w| w.message.starts_with("UNFINISHED WINDOW"))
            .collect();
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].file, killed);
        assert!(!notes[0].loses_evidence());
        assert_eq!(dump.windows.len(), 8, "every manifest still loads");
    }
}
