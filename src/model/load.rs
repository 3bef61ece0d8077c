//! Loading dumps: manifest files, directory trees of them, several inputs at once.
//!
//! Every manifest becomes one [`Window`] (one rank's label window). A
//! manifest cut short by a killed run keeps its records and adds a
//! [`Warning`] naming the file and byte offset; a broken header, an unknown
//! schema version or an unreadable file is an error naming the file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::manifest::{Manifest, ManifestError};
use super::parse::parse_manifest;

/// The file name the probe gives every manifest; directories are searched for it.
pub const MANIFEST_NAME: &str = "manifest.json";

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
/// recursively for files named `manifest.json` (symbolic links are not
/// followed, so a loop cannot hang the search).
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
                    problem: format!("no {MANIFEST_NAME} found in this directory or below it"),
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
        } else if kind.is_file() && entry.file_name() == MANIFEST_NAME {
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
    for (file, size) in files.iter().zip(sizes) {
        let bytes = std::fs::read(file).map_err(|source| ManifestError::Io {
            path: file.clone(),
            source,
        })?;
        let (manifest, warnings) = parse_with_warnings(&bytes, file)?;
        state.records += manifest.records.len();
        dump.windows.push(manifest);
        dump.warnings.extend(warnings);
        drop(bytes);
        state.files_done += 1;
        state.bytes_done += size;
        progress(state);
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
    warnings.extend(check_records(&manifest));
    warnings.extend(drop_escaping_evidence(&mut manifest));
    Ok((manifest, warnings))
}

/// Evidence files that would resolve outside the window directory (absolute paths, `..`,
/// symbolic links leading out): one warning each, and the path is dropped so nothing opens it.
pub fn drop_escaping_evidence(manifest: &mut Manifest) -> Vec<Warning> {
    let window_dir = manifest.window_dir().to_path_buf();
    let mut warnings = Vec::new();
    for record in &mut manifest.records {
        if let Err(message) = record.tensor_path(&window_dir) {
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
    let mut seen: HashMap<(&str, u32), u64> = HashMap::new();
    let mut last_seq = None;
    for record in &manifest.records {
        if let Some(first) = seen.insert((&record.stage, record.occurrence), record.seq) {
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
