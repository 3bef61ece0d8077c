//! Evidence files (saved tensors, input sets) named by a manifest, resolved inside the window.
//!
//! A manifest names its files relative to the window directory
//! (docs/manifest.md: `tensor_file` is "only inside it"). A manifest is
//! input, not trusted: a path that is absolute, climbs out with `..`, or
//! reaches outside through a symbolic link is refused, so dumpview never
//! opens a file the dump does not hold.

use std::path::{Component, Path, PathBuf};

/// Resolves `relative` (as written in the manifest) against `window_dir`.
///
/// Returns the path to open: canonical where the file (or a directory above
/// it) exists, so a symbolic link has been followed and checked. A file that
/// does not exist is not an error here; only where it would be is checked.
///
/// # Errors
/// A message naming `relative` when it is empty, absolute, holds a `..`
/// component or a NUL byte, or resolves outside `window_dir` (a symbolic
/// link leading out of the window).
pub fn resolve(window_dir: &Path, relative: &str) -> Result<PathBuf, String> {
    let refuse = |why: &str| Err(format!("evidence file {relative:?} refused: {why}"));
    if relative.contains('\0') {
        return refuse("it contains a NUL byte");
    }
    let path = Path::new(relative);
    let mut names = 0;
    for component in path.components() {
        match component {
            Component::Normal(_) => names += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                return refuse("it climbs out of the window directory with `..`");
            }
            Component::RootDir | Component::Prefix(_) => {
                return refuse("it is absolute; manifests name files relative to the window");
            }
        }
    }
    if names == 0 {
        return refuse("it names no file");
    }
    let window_dir = if window_dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        window_dir
    };
    let joined = window_dir.join(path);
    let Ok(window) = std::fs::canonicalize(window_dir) else {
        // No window directory on disk: nothing there to open, and no link to follow.
        return Ok(joined);
    };
    // The deepest part of the path that exists decides where it leads; what is below it
    // does not exist and, without `..`, cannot lead anywhere else.
    for ancestor in joined.ancestors() {
        if std::fs::symlink_metadata(ancestor).is_err() {
            continue;
        }
        let real = match std::fs::canonicalize(ancestor) {
            Ok(real) => real,
            Err(e) => return refuse(&format!("cannot be resolved: {e}")),
        };
        if !real.starts_with(&window) {
            return refuse(&format!(
                "it resolves to {}, outside the window directory {}",
                real.display(),
                window.display()
            ));
        }
        let rest = joined.strip_prefix(ancestor).unwrap_or(Path::new(""));
        return Ok(if rest.as_os_str().is_empty() {
            real
        } else {
            real.join(rest)
        });
    }
    Ok(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_escapes_are_refused_and_name_the_file() {
        let dir = Path::new("no/such/window");
        for (path, why) in [
            ("../../etc/passwd", "`..`"),
            ("tensors/../../x", "`..`"),
            ("/etc/passwd", "absolute"),
            ("", "names no file"),
            ("./.", "names no file"),
            ("a\0b", "NUL"),
        ] {
            let err = resolve(dir, path).unwrap_err();
            assert!(err.contains(&format!("{path:?}")), "{err}");
            assert!(err.contains(why), "{err}");
        }
        assert_eq!(
            resolve(dir, "tensors/x#1.safetensors").unwrap(),
            Path::new("no/such/window/tensors/x#1.safetensors")
        );
    }
}
