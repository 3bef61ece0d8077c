//! Listing directories: for a format that learns something from its neighbours (msprobe's
//! world size: the `rank*` directories beside a rank's), and the files of a whole tree
//! (`dumpview tensors DIR_A DIR_B`).

use std::path::{Path, PathBuf};

/// The names (lossily UTF-8) of the directories directly inside `dir`, in no set order;
/// entries that cannot be read are left out.
///
/// # Errors
/// `dir` cannot be listed (missing, not a directory, permission denied).
pub fn subdirectory_names(dir: &Path) -> std::io::Result<Vec<String>> {
    Ok(std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect())
}

/// The regular files of a directory tree, by path relative to its root, and what was not
/// listed: [`files_under`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeListing {
    /// Files `wanted` accepted, relative to the root, sorted (component by component).
    pub files: Vec<PathBuf>,
    /// Entries `wanted` accepted that were not listed, or directories that could not be read,
    /// relative to the root, each with the reason; sorted.
    pub skipped: Vec<(PathBuf, String)>,
}

/// Every file under `root` whose path `wanted` accepts, walked depth first without following
/// a link out of the tree: a symbolic link to a file inside `root` is listed under the link's
/// own path; a wanted link that leads outside `root` or dangles, any link to a directory
/// (never descended, so no cycle and no file seen twice) and a subdirectory that cannot be
/// read are `skipped` with the reason. Anything else `wanted` accepts that is not a regular
/// file (a FIFO, a socket) is listed, never opened here: its reader refuses it.
///
/// # Errors
/// `root` itself cannot be listed (missing, not a directory, permission denied).
pub fn files_under(root: &Path, wanted: &dyn Fn(&Path) -> bool) -> std::io::Result<TreeListing> {
    let canonical_root = std::fs::canonicalize(root)?;
    let mut listing = TreeListing::default();
    let mut pending = vec![PathBuf::new()];
    let mut first = true;
    while let Some(relative) = pending.pop() {
        let entries = match std::fs::read_dir(root.join(&relative)) {
            Ok(entries) => entries,
            Err(e) if first => return Err(e),
            Err(e) => {
                listing
                    .skipped
                    .push((relative, format!("directory not read: {e}")));
                continue;
            }
        };
        first = false;
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    listing
                        .skipped
                        .push((relative.clone(), format!("an entry not read: {e}")));
                    continue;
                }
            };
            let path = relative.join(entry.file_name());
            let Ok(kind) = entry.file_type() else {
                listing
                    .skipped
                    .push((path, "its type could not be read".into()));
                continue;
            };
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_symlink() {
                let target = std::fs::canonicalize(entry.path());
                let inside = |t: &PathBuf| t.starts_with(&canonical_root);
                match target {
                    // A linked directory may hold wanted files: say it was not walked.
                    Ok(t) if t.is_dir() => listing.skipped.push((
                        path,
                        format!("a link to a directory ({}): not followed", t.display()),
                    )),
                    _ if !wanted(&path) => {}
                    Err(e) => listing
                        .skipped
                        .push((path, format!("a dangling link: {e}"))),
                    Ok(t) if !inside(&t) => listing.skipped.push((
                        path,
                        format!("a link out of the tree (to {}): not followed", t.display()),
                    )),
                    Ok(_) => listing.files.push(path),
                }
            } else if wanted(&path) {
                listing.files.push(path);
            }
        }
    }
    listing.files.sort();
    listing.skipped.sort();
    Ok(listing)
}
