//! Loading dumps: manifest files, directory trees of them, several inputs at once.
//!
//! Every manifest becomes one [`Window`] (one rank's label window). A
//! manifest cut short by a killed run keeps its records and adds a
//! [`Warning`] naming the file and byte offset; a broken header, an unknown
//! schema version or an unreadable file is an error naming the file.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use super::manifest::{Manifest, ManifestError, keys_increase};
use super::parse::parse_manifest;

/// The file name the probe gives every manifest; directories are searched for it (a
/// windowed dump's manifests have the same name, told apart by their content).
pub const MANIFEST_NAME: &str = "manifest.json";
/// The file an msprobe dump writes per step and rank; directories are searched for it too.
pub const MSPROBE_NAME: &str = "dump.json";

/// Something the user should know about an input that still loaded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Warning {
    pub file: PathBuf,
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.message)
    }
}

/// Why inputs could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A path that is neither a file nor a directory holding manifests.
    #[error("{path}: {problem}")]
    Input { path: PathBuf, problem: String },
}

/// One loaded capture: all windows of all ranks found under the given inputs.
#[derive(Debug, Clone, Default)]
pub struct Dump {
    /// Sorted by (rank, match, occurrence, source path).
    pub windows: Vec<Manifest>,
    pub warnings: Vec<Warning>,
}

/// Progress of a load, reported once per manifest file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    pub files_done: usize,
    pub files_total: usize,
    pub bytes_done: u64,
    pub bytes_total: u64,
    pub records: usize,
}

/// The manifest files named by `inputs`, in a stable order.
///
/// A file is taken as it is, whatever its name; a directory is searched
/// recursively for files named `manifest.json` or msprobe's `dump.json` (symbolic links
/// are not followed, so a loop cannot hang the search).
///
/// # Errors
/// A path that does not exist, or a directory without any manifest.
pub fn discover(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let mut files = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input).map_err(|e| LoadError::Input {
            path: input.clone(),
            problem: format!("cannot read: {e}"),
        })?;
        if meta.is_dir() {
            let before = files.len();
            find_manifests(input, &mut files).map_err(|e| LoadError::Input {
                path: input.clone(),
                problem: format!("cannot list: {e}"),
            })?;
            if files.len() == before {
                return Err(LoadError::Input {
                    path: input.clone(),
                    problem: format!(
                        "no {MANIFEST_NAME} (dumpview probe, windowed dump) or {MSPROBE_NAME} (msprobe) found in this directory or below it"
                    ),
                });
            }
            files[before..].sort();
        } else {
            files.push(input.clone());
        }
    }
    Ok(files)
}

fn find_manifests(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            find_manifests(&path, out)?;
        } else if kind.is_file()
            && (entry.file_name() == MANIFEST_NAME || entry.file_name() == MSPROBE_NAME)
        {
            out.push(path);
        }
    }
    Ok(())
}

/// Loads every manifest under `inputs` (see [`discover`]).
///
/// `progress` is called after each file. Records stay in capture order.
///
/// # Errors
/// The first input that cannot be found or whose header cannot be read.
pub fn load(inputs: &[PathBuf], progress: &mut dyn FnMut(Progress)) -> Result<Dump, LoadError> {
    let files = discover(inputs)?;
    let sizes: Vec<u64> = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .collect();
    let bytes_total = sizes.iter().sum();
    let mut dump = Dump::default();
    let mut state = Progress {
        files_done: 0,
        files_total: files.len(),
        bytes_done: 0,
        bytes_total,
        records: 0,
    };
    let mut failed = None;
    load_in_order(&files, &mut |index, loaded| {
        let (manifest, warnings) = match loaded {
            Ok(loaded) => loaded,
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
    dump.windows.sort_by(|a, b| {
        (a.rank, a.match_index, a.occurrence, &a.source).cmp(&(
            b.rank,
            b.match_index,
            b.occurrence,
            &b.source,
        ))
    });
    Ok(dump)
}

type Loaded = Result<(Manifest, Vec<Warning>), LoadError>;

/// Reads and parses `files`, several at once on rayon's threads, and hands each result to
/// `each` on the calling thread in file order as soon as it and those before it are done,
/// until `each` returns false. Each file's bytes are dropped as soon as it is parsed.
fn load_in_order(files: &[PathBuf], each: &mut dyn FnMut(usize, Loaded) -> bool) {
    let one = |file: &PathBuf| -> Loaded {
        let bytes = read_manifest_bytes(file).map_err(|source| ManifestError::Io {
            path: file.clone(),
            source,
        })?;
        let loaded = if file.file_name().is_some_and(|n| n == MSPROBE_NAME) {
            super::msprobe::load_window(file, &bytes)
        } else if super::windowed::is_windowed(&bytes) {
            super::windowed::load_window(file, &bytes)
        } else {
            parse_with_warnings(&bytes, file).map_err(LoadError::from)
        };
        // Unmapping a large file takes a while and nothing waits for it: a thread of its own
        // (where none can be started, the map is dropped here).
        if let ManifestBytes::Mapped(map) = bytes {
            let _ = std::thread::Builder::new().spawn(move || drop(map));
        }
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

/// Files from this size on are mapped rather than read: no copy, no fresh pages to fault in.
const MAP_FROM_BYTES: u64 = 1 << 20;

/// A manifest's bytes: the file mapped into memory, or read.
#[derive(Debug)]
enum ManifestBytes {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

impl std::ops::Deref for ManifestBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            ManifestBytes::Mapped(map) => map,
            ManifestBytes::Read(bytes) => bytes,
        }
    }
}

/// Maps a large regular file, reads anything else (errors as [`std::fs::read`] gives them).
fn read_manifest_bytes(path: &Path) -> std::io::Result<ManifestBytes> {
    // Opening a FIFO for reading would wait for a writer forever.
    let kind = std::fs::metadata(path)?.file_type();
    if !kind.is_file() && !kind.is_dir() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_file() && meta.len() >= MAP_FROM_BYTES {
        // SAFETY: the mapping is read-only and lives only while this file is parsed. Its
        // bytes could change under us only if another process rewrote the file in place
        // meanwhile; the probe never does (it writes `manifest.json.tmp.<pid>` and renames).
        // A file truncated meanwhile would end the process with SIGBUS, not corrupt memory.
        if let Ok(map) = unsafe { memmap2::MmapOptions::new().populate().map(&file) } {
            return Ok(ManifestBytes::Mapped(map));
        }
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(ManifestBytes::Read(bytes))
}

/// Parses one manifest's bytes, keeping what parses, with the warnings a user should see.
///
/// # Errors
/// As [`parse_manifest`]: only a broken header is fatal.
pub fn parse_with_warnings(
    bytes: &[u8],
    file: &Path,
) -> Result<(Manifest, Vec<Warning>), LoadError> {
    let parsed = parse_manifest(bytes, file)?;
    let mut warnings = Vec::new();
    if let Some(stop) = &parsed.stopped {
        warnings.push(Warning {
            file: file.to_path_buf(),
            message: format!("truncated or damaged: {stop}"),
        });
    }
    let mut manifest = parsed.manifest;
    let (checked, refused) = rayon::join(
        || check_records(&manifest),
        || escaping_tensor_files(&manifest),
    );
    warnings.extend(checked);
    warnings.extend(drop_refused_evidence(&mut manifest, refused));
    Ok((manifest, warnings))
}

/// Evidence files that would resolve outside the window directory (absolute paths, `..`,
/// symbolic links leading out): one warning each, and the path is dropped so nothing opens it.
pub fn drop_escaping_evidence(manifest: &mut Manifest) -> Vec<Warning> {
    let refused = escaping_tensor_files(manifest);
    drop_refused_evidence(manifest, refused)
}

/// The records whose `tensor_file` [`drop_escaping_evidence`] refuses, with why, in order.
/// Resolving touches the file system for every saved tensor, so it runs on rayon's threads.
fn escaping_tensor_files(manifest: &Manifest) -> Vec<(usize, String)> {
    let window_dir = manifest.window_dir();
    manifest
        .records
        .par_iter()
        .enumerate()
        .filter(|(_, record)| record.tensor_file.is_some())
        .filter_map(|(i, record)| record.tensor_path(window_dir).err().map(|m| (i, m)))
        .collect()
}

/// The rest of [`drop_escaping_evidence`], given [`escaping_tensor_files`].
fn drop_refused_evidence(manifest: &mut Manifest, refused: Vec<(usize, String)>) -> Vec<Warning> {
    let window_dir = manifest.window_dir().to_path_buf();
    let mut warnings = Vec::new();
    for (i, message) in refused {
        let record = &mut manifest.records[i];
        warnings.push(Warning {
            file: manifest.source.clone(),
            message: format!(
                "{} (seq {}): {message}; the tensor file is not used",
                record.key(),
                record.seq
            ),
        });
        record.tensor_file = None;
    }
    manifest.input_sets.retain(
        |set| match super::evidence::resolve(&window_dir, &set.file) {
            Ok(_) => true,
            Err(message) => {
                warnings.push(Warning {
                    file: manifest.source.clone(),
                    message: format!(
                        "input set {}#{}: {message}; the input set is not used",
                        set.stage, set.occurrence
                    ),
                });
                false
            }
        },
    );
    warnings
}

/// Consistency problems that do not stop a load: duplicate `stage#occurrence`
/// keys (the first one is used for pairing) and records out of capture order.
pub fn check_records(manifest: &Manifest) -> Vec<Warning> {
    let mut warnings = Vec::new();
    // Keys whose occurrences increase per stage (the probe's) cannot repeat: no map needed.
    let unique = keys_increase(&manifest.records);
    let mut seen: HashMap<(&str, u32), u64> = HashMap::new();
    let mut last_seq = None;
    for record in &manifest.records {
        let repeated = if unique {
            None
        } else {
            seen.insert((&record.stage, record.occurrence), record.seq)
        };
        if let Some(first) = repeated {
            seen.insert((&record.stage, record.occurrence), first);
            warnings.push(Warning {
                file: manifest.source.clone(),
                message: format!(
                    "{} appears twice (seq {first} and {}); pairing uses seq {first}",
                    record.key(),
                    record.seq
                ),
            });
        }
        if last_seq.is_some_and(|last| record.seq <= last) {
            warnings.push(Warning {
                file: manifest.source.clone(),
                message: format!(
                    "seq {} of {} is not after the previous record's",
                    record.seq,
                    record.key()
                ),
            });
        }
        last_seq = Some(record.seq);
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let (m, w) = parse_with_warnings(&std::fs::read(file).unwrap(), file).unwrap();
            windows.push(m);
            warnings.extend(w);
        }
        assert_eq!(dump.windows, windows);
        assert_eq!(dump.warnings, warnings);
        assert_eq!(warnings.len(), 5);
        let done: Vec<usize> = seen.iter().map(|p| p.files_done).collect();
        assert_eq!(done, (1..=8).collect::<Vec<_>>());
        assert_eq!(seen.last().unwrap().bytes_done, seen[0].bytes_total);
        assert_eq!(seen.last().unwrap().records, 8 * 3 + 3 + 2);
    }

    #[test]
    fn the_first_broken_file_in_order_is_the_error() {
        let dir = dump_dir();
        for rank in [5, 3] {
            let file = dir
                .path()
                .join(format!("rank{rank}/match1-occ1/{MANIFEST_NAME}"));
            std::fs::write(&file, "{\"format\": \"other\"}").unwrap();
        }
        let mut done = Vec::new();
        let error = load(&[dir.path().to_path_buf()], &mut |p| {
            done.push(p.files_done)
        })
        .unwrap_err();
        assert!(error.to_string().contains("rank3"), "{error}");
        assert_eq!(done, vec![1, 2, 3]);
    }

    #[test]
    fn large_files_are_mapped_small_ones_read() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small.json");
        let large = dir.path().join("large.json");
        std::fs::write(&small, b"{}").unwrap();
        std::fs::write(&large, vec![b' '; MAP_FROM_BYTES as usize]).unwrap();
        assert!(
            matches!(read_manifest_bytes(&small).unwrap(), ManifestBytes::Read(ref b) if &b[..] == b"{}")
        );
        assert!(
            matches!(read_manifest_bytes(&large).unwrap(), ManifestBytes::Mapped(ref m) if m.len() == MAP_FROM_BYTES as usize)
        );
        let missing = read_manifest_bytes(&dir.path().join("missing.json")).unwrap_err();
        assert_eq!(
            missing.kind(),
            std::fs::read(dir.path().join("missing.json"))
                .unwrap_err()
                .kind()
        );
        let directory = read_manifest_bytes(dir.path()).unwrap_err();
        assert_eq!(
            directory.kind(),
            std::fs::read(dir.path()).unwrap_err().kind()
        );
    }
}
