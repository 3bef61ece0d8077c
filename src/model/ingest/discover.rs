//! Finding the dump files under the inputs a user names.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::attempts::probe_window_dir;
use super::error::LoadError;
use crate::model::dump::UnfinishedWindow;
use crate::model::formats::{self, msprobe::MSPROBE_NAME, probe::MANIFEST_NAME};

/// The directory of dumpview's own files beside a capture (`.dumpview/cases/…`): a directory
/// search never enters one.
pub const WORKSPACE_DIR: &str = ".dumpview";

/// The manifest files named by `inputs`, in a stable order.
///
/// A file is taken as it is, whatever its name; a directory is searched recursively for
/// the file names of every registered format ([`formats::file_names`]: `manifest.json`,
/// msprobe's `dump.json`), leaving out [`WORKSPACE_DIR`] directories. Symbolic links to files and directories are followed; a directory
/// reached twice (by its device and inode) is searched once, so a link loop cannot hang the
/// search and a linked run is not counted twice. (Evidence files a dump names keep their own
/// rule, `dump::evidence`: a link there may not lead out of the dump.)
///
/// # Errors
/// A path that does not exist, or a directory without any manifest.
pub fn discover(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    Ok(discover_named(inputs)?
        .into_iter()
        .map(|(path, _)| path)
        .collect())
}

/// [`discover`], saying of each file whether it was named as an input itself (`true`) or
/// found in a directory search (`false`).
///
/// # Errors
/// As [`discover`].
pub fn discover_named(inputs: &[PathBuf]) -> Result<Vec<(PathBuf, bool)>, LoadError> {
    Ok(discover_all(inputs)?.files)
}

/// What a search of the inputs found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// Each dump file, and whether it was named as an input itself (`true`) or found in a
    /// directory search (`false`), in a stable order.
    pub files: Vec<(PathBuf, bool)>,
    /// Window directories of the probe without a manifest, sorted by directory: a run that
    /// stopped (was killed) between claiming the directory (its first `capture_inputs()`, or
    /// `finish()`) and writing the manifest. The probe writes a host input set at once and the
    /// manifest last, so such a directory may hold complete input sets, cut-off writes, or
    /// nothing. A directory counts when it is named as the probe names windows
    /// (`rank<R>/match<M>-occ<O>[.<N>]`, empty ones included), or when its `inputs/` or
    /// `tensors/` holds a file of the probe's kinds (`.pt`, `.safetensors`, `.tmp.<pid>`).
    pub unfinished: Vec<UnfinishedWindow>,
}

/// [`discover_named`], with the unfinished window directories met on the way.
///
/// # Errors
/// As [`discover`].
pub fn discover_all(inputs: &[PathBuf]) -> Result<Found, LoadError> {
    let mut found = Found::default();
    for input in inputs {
        let mut files = Vec::new();
        discover_in(input, &mut files, &mut found.unfinished, false)?;
        let named = files.len() == 1 && files[0] == *input;
        found.files.extend(files.into_iter().map(|f| (f, named)));
    }
    found.unfinished.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(found)
}

/// The dump files under a watched directory, in path order: as [`discover`] for one input,
/// except that a directory holding none yet is empty, not an error (a watch may start before
/// the run writes anything).
///
/// # Errors
/// `input` missing, not readable, or not listable.
pub fn discover_watched(input: &PathBuf) -> Result<Vec<PathBuf>, LoadError> {
    let mut files = Vec::new();
    discover_in(input, &mut files, &mut Vec::new(), true)?;
    Ok(files)
}

fn discover_in(
    input: &PathBuf,
    files: &mut Vec<PathBuf>,
    unfinished: &mut Vec<UnfinishedWindow>,
    allow_empty: bool,
) -> Result<(), LoadError> {
    let meta = std::fs::metadata(input).map_err(|e| LoadError::Input {
        path: input.clone(),
        problem: format!("cannot read: {e}"),
    })?;
    if !meta.is_dir() {
        files.push(input.clone());
        return Ok(());
    }
    let mut visited = HashSet::new();
    let mut special = Vec::new();
    find_manifests(input, &mut visited, files, unfinished, &mut special).map_err(|e| {
        LoadError::Input {
            path: input.clone(),
            problem: format!("cannot list: {e}"),
        }
    })?;
    if files.is_empty() && !allow_empty {
        let mut problem = format!(
            "no {MANIFEST_NAME} (dumpview probe, windowed dump) or {MSPROBE_NAME} (msprobe) found in this directory or below it"
        );
        if let Some(path) = special.first() {
            problem += &format!(
                "; {} has a dump file's name and is not a regular file (a FIFO, socket or device): skipped",
                path.display()
            );
        }
        if let Some(first) = unfinished.first() {
            problem += &format!(
                "; {} is an unfinished window, without {MANIFEST_NAME}: {}",
                first.dir.display(),
                first.how_it_ended()
            );
            if let Some(set) = first.input_sets.first() {
                problem += &format!(
                    "; its input sets replay with `dumpview replay {} --stage {set} --candidate OP --reference REF`",
                    first.dir.display()
                );
            }
        }
        return Err(LoadError::Input {
            path: input.clone(),
            problem,
        });
    }
    files.sort();
    Ok(())
}

/// (device, inode) of a directory, where the platform has them.
#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn identity(_meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

/// The probe's evidence directories inside a window directory (docs/manifest.md, "Files").
const EVIDENCE_DIRS: [&str; 2] = ["inputs", "tensors"];

fn find_manifests(
    dir: &Path,
    visited: &mut HashSet<(u64, u64)>,
    out: &mut Vec<PathBuf>,
    unfinished: &mut Vec<UnfinishedWindow>,
    special: &mut Vec<PathBuf>,
) -> std::io::Result<()> {
    if let Some(id) = identity(&std::fs::metadata(dir)?) {
        if !visited.insert(id) {
            return Ok(());
        }
    }
    let (mut holds_evidence, mut manifest_here) = (false, false);
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let mut kind = entry.file_type()?;
        if kind.is_symlink() {
            // Followed; a dangling link is skipped like any other non-manifest entry.
            match std::fs::metadata(&path) {
                Ok(meta) => kind = meta.file_type(),
                Err(_) => continue,
            }
        }
        if kind.is_dir() {
            // dumpview's own workspace (case matrices and their baseline copies) is never
            // part of a capture, even where one was made inside a dump.
            if entry.file_name() == WORKSPACE_DIR {
                continue;
            }
            holds_evidence |= EVIDENCE_DIRS.iter().any(|name| entry.file_name() == *name);
            find_manifests(&path, visited, out, unfinished, special)?;
        } else if formats::file_names().any(|name| entry.file_name() == name) {
            // Never opened: a FIFO would block the search, a device is no dump. Named in the
            // error when nothing else is found.
            match kind.is_file() {
                true => {
                    out.push(path);
                    manifest_here = true;
                }
                false => special.push(path),
            }
        }
    }
    if !manifest_here && (holds_evidence || probe_window_dir(dir).is_some()) {
        let window = unfinished_window(dir);
        let probe_files =
            !window.input_sets.is_empty() || window.tensor_files > 0 || !window.cut_off.is_empty();
        if probe_files || probe_window_dir(dir).is_some() {
            unfinished.push(window);
        }
    }
    Ok(())
}

/// What the window directory `dir`, which has no manifest, holds (docs/manifest.md, "Where
/// dumps land"): complete input sets under `inputs/`, complete tensor files under
/// `tensors/`, and cut-off writes (`<name>.tmp.<pid>`) there or beside the missing manifest.
fn unfinished_window(dir: &Path) -> UnfinishedWindow {
    let files = |sub: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.join(sub))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.is_file()))
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        names.sort();
        names
    };
    let mut window = UnfinishedWindow {
        dir: dir.to_path_buf(),
        ..UnfinishedWindow::default()
    };
    for sub in ["", "inputs", "tensors"] {
        for name in files(sub) {
            if is_cut_off(&name) {
                window.cut_off.push(Path::new(sub).join(&name));
            } else if sub == "inputs" {
                if let Some(stem) = name.strip_suffix(".pt") {
                    window.input_sets.push(stem.to_string());
                }
            } else if sub == "tensors" && (name.ends_with(".pt") || name.ends_with(".safetensors"))
            {
                window.tensor_files += 1;
            }
        }
    }
    window.cut_off.sort();
    // `stage#1` before its collision `stage#1.2`, and `#2` before `#10`.
    window.input_sets.sort_by_cached_key(|stem| {
        let (stage, tail) = stem.rsplit_once('#').unwrap_or((stem, ""));
        let (n, k) = tail.split_once('.').unwrap_or((tail, "1"));
        let number = |s: &str| s.parse::<u64>().unwrap_or(u64::MAX);
        (stage.to_string(), number(n), number(k), stem.clone())
    });
    window
}

/// `<name>.tmp.<pid>`: the probe's temporary name for a file being written, published under
/// `<name>` only once complete; left behind by a run killed while writing.
fn is_cut_off(name: &str) -> bool {
    name.rsplit_once(".tmp.")
        .is_some_and(|(_, pid)| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest_at(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("manifest.json"), "{}").unwrap();
    }

    #[test]
    fn a_case_matrix_made_inside_a_dump_is_not_part_of_it() {
        let root = tempfile::tempdir().unwrap();
        manifest_at(&root.path().join("rank0/match1-occ1"));
        // The baseline copy of a matrix planned with the dump as the working directory.
        manifest_at(&root.path().join("rank0/.dumpview/cases/m/baseline"));
        let files = discover(&[root.path().to_path_buf()]).unwrap();
        assert_eq!(files, [root.path().join("rank0/match1-occ1/manifest.json")]);
        // Named itself, it is read (the user asked for that file).
        let named = root
            .path()
            .join("rank0/.dumpview/cases/m/baseline/manifest.json");
        assert_eq!(discover(std::slice::from_ref(&named)).unwrap(), [named]);
    }

    #[test]
    fn a_window_with_input_sets_but_no_manifest_is_unfinished() {
        let root = tempfile::tempdir().unwrap();
        manifest_at(&root.path().join("rank0/match1-occ1"));
        std::fs::create_dir_all(root.path().join("rank0/match1-occ1/inputs")).unwrap();
        // Killed between its first capture_inputs() and finish().
        std::fs::create_dir_all(root.path().join("rank0/match1-occ2/inputs")).unwrap();
        // A directory of another kind of file is not a window.
        std::fs::create_dir_all(root.path().join("rank0/notes")).unwrap();
        let found = discover_all(&[root.path().to_path_buf()]).unwrap();
        assert_eq!(
            found.files,
            [(root.path().join("rank0/match1-occ1/manifest.json"), false)]
        );
        let dirs: Vec<&Path> = found.unfinished.iter().map(|w| w.dir.as_path()).collect();
        assert_eq!(dirs, [root.path().join("rank0/match1-occ2")]);
        // Alone, it is named in the error.
        let error = discover_all(&[root.path().join("rank0/match1-occ2")]).unwrap_err();
        assert!(
            error.to_string().contains(
                "match1-occ2 is an unfinished window, without manifest.json: the run stopped before finish()"
            ),
            "{error}"
        );
    }

    #[test]
    fn a_window_of_only_tmp_files_was_written_but_not_completed() {
        // finish() on a full disk: the rows sidecar and the manifest were begun under their
        // temporary names, and neither was completed (issue 31, item 18).
        let root = tempfile::tempdir().unwrap();
        let full = root.path().join("rank0/match1-occ1");
        std::fs::create_dir_all(&full).unwrap();
        std::fs::write(full.join("rows.f32.tmp.4242"), b"").unwrap();
        std::fs::write(full.join("manifest.json.tmp.4242"), b"").unwrap();
        let found = discover_all(&[root.path().to_path_buf()]).unwrap_err();
        let error = found.to_string();
        assert!(
            error.contains(
                "match1-occ1 is an unfinished window, without manifest.json: written but not \
                 completed (the disk may have been full)"
            ),
            "{error}"
        );
        assert!(!error.contains("stopped before finish()"), "{error}");
        // A complete input set beside a cut-off write: the run stopped before finish().
        let killed = root.path().join("rank0/match1-occ2/inputs");
        std::fs::create_dir_all(&killed).unwrap();
        std::fs::write(killed.join("op#1.pt"), b"").unwrap();
        std::fs::write(killed.join("op#2.pt.tmp.7"), b"").unwrap();
        let error = discover_all(&[root.path().join("rank0/match1-occ2")])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("without manifest.json: the run stopped before finish()"),
            "{error}"
        );
        // What the note (scan's warning) says of each.
        let mut windows = vec![
            unfinished_window(&full),
            unfinished_window(&root.path().join("rank0/match1-occ2")),
        ];
        assert!(windows[0].only_cut_off() && !windows[1].only_cut_off());
        let notes: Vec<String> = windows
            .drain(..)
            .map(|w| crate::model::dump::Warning::unfinished_window(&w).to_string())
            .collect();
        assert!(
            notes[0].contains(
                "UNFINISHED WINDOW: no manifest.json (written but not completed (the disk may \
                 have been full)), so no statistics; 2 cut-off writes (manifest.json.tmp.4242, \
                 rows.f32.tmp.4242): never completed them, incomplete, not usable"
            ),
            "{}",
            notes[0]
        );
        assert!(
            notes[1].contains("(the run stopped before finish(), or is still inside the window)")
        );
        assert!(
            notes[1].contains("the run was killed while writing it"),
            "{}",
            notes[1]
        );
    }

    #[cfg(unix)]
    #[test]
    fn links_are_followed_once_and_loops_end() {
        use std::os::unix::fs::symlink;
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        manifest_at(&root.path().join("tree/rank0/w"));
        manifest_at(&outside.path().join("run_b/rank1/w"));
        let tree = root.path().join("tree");
        // A linked run, a loop back to the tree's root, a linked manifest file, a dangling link.
        symlink(outside.path().join("run_b"), tree.join("x")).unwrap();
        symlink(&tree, tree.join("rank0/loop")).unwrap();
        std::fs::create_dir_all(tree.join("rank2/w")).unwrap();
        symlink(
            outside.path().join("run_b/rank1/w/manifest.json"),
            tree.join("rank2/w/manifest.json"),
        )
        .unwrap();
        symlink(root.path().join("gone"), tree.join("dangling")).unwrap();
        let files = discover(std::slice::from_ref(&tree)).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|f| f.strip_prefix(&tree).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "rank0/w/manifest.json",
                "rank2/w/manifest.json",
                "x/rank1/w/manifest.json"
            ]
        );
    }
}
