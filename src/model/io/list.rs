//! Listing a directory, for a format that learns something from its neighbours (msprobe's
//! world size: the `rank*` directories beside a rank's).

use std::path::Path;

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
