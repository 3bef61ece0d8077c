//! The files of one window, as the Python probe lays them out (docs/manifest.md, "Where dumps
//! land"): the window directory made with `mkdir` (never reused: a re-run gets `.2`, `.3`, …),
//! every file written to `<name>.tmp.<pid>`, fsynced and renamed (never over an existing file),
//! and saved tensors as one-tensor safetensors files of their first rows' logical values.

use std::fs::OpenOptions;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use crate::names::safe_file_name;
use crate::view::View;

/// Creates `<root>/rank<R>/match<M>-occ<O>` or, when it exists, the first free
/// `match<M>-occ<O>.<N>`. Returns the directory and its attempt number N (1 unsuffixed).
///
/// # Errors
/// The directories cannot be created (the message names the path).
pub fn new_window_dir(
    root: &Path,
    rank: u32,
    match_index: u32,
    occurrence: u32,
) -> Result<(PathBuf, u32), String> {
    let parent = root.join(format!("rank{rank}"));
    std::fs::create_dir_all(&parent)
        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    let base = format!("match{match_index}-occ{occurrence}");
    for attempt in 1u32.. {
        let candidate = if attempt == 1 {
            parent.join(&base)
        } else {
            parent.join(format!("{base}.{attempt}"))
        };
        // mkdir is atomic: two processes never share a window directory.
        match std::fs::create_dir(&candidate) {
            Ok(()) => return Ok((candidate, attempt)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create {}: {e}", candidate.display())),
        }
    }
    unreachable!("u32 attempts ran out")
}

/// Writes `chunks` to `path` atomically: a fresh `<path>.tmp.<pid>`, flushed and fsynced, then
/// renamed. A writer killed midway leaves only the temporary file.
///
/// # Errors
/// `path` already exists (dumps are never overwritten), or a write fails.
pub fn write_atomic(path: &Path, chunks: &[&[u8]]) -> Result<(), String> {
    if path.symlink_metadata().is_ok() {
        return Err(format!(
            "{} exists; dumps are never overwritten",
            path.display()
        ));
    }
    let tmp = PathBuf::from(format!("{}.tmp.{}", path.display(), std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        for chunk in chunks {
            file.write_all(chunk)?;
        }
        file.flush()?;
        file.sync_all()
    };
    write().map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .map_err(|e| format!("cannot rename {} to {}: {e}", tmp.display(), path.display()))
}

/// `<sub>/<safe key><ext>` relative to `dir`, with `.2`, `.3`, … before `ext` when two keys
/// sanitise to one name (the Python probe's `_unique_rel`).
pub fn unique_rel(dir: &Path, sub: &str, key: &str, ext: &str) -> String {
    let stem = format!("{sub}/{}", safe_file_name(key));
    let mut rel = format!("{stem}{ext}");
    let mut n = 1;
    while dir.join(&rel).symlink_metadata().is_ok() {
        n += 1;
        rel = format!("{stem}.{n}{ext}");
    }
    rel
}

/// Rows of dimension 0 a saved tensor keeps: all when `rows` is 0, else at most `rows`
/// (1 for a scalar).
pub fn rows_kept(view: &View, rows: u64) -> u64 {
    if view.shape.is_empty() {
        return 1;
    }
    let total = view.dim0();
    if rows == 0 { total } else { total.min(rows) }
}

/// Saves the first `kept` rows of `view` (staged in `staged`) as
/// `tensors/<stage>#<N>.safetensors` under `dir`; returns its path relative to `dir`.
///
/// # Errors
/// The file cannot be written.
pub fn save_tensor(
    dir: &Path,
    key: &str,
    view: &View,
    staged: &[u8],
    kept: u64,
) -> Result<String, String> {
    let tensors = dir.join("tensors");
    std::fs::create_dir_all(&tensors)
        .map_err(|e| format!("cannot create {}: {e}", tensors.display()))?;
    let mut shape = view.shape.clone();
    if let Some(first) = shape.first_mut() {
        *first = kept;
    }
    let data = gather(view, staged, &shape);
    let header = safetensors_header(key, view.dtype.safetensors_code(), &shape, data.len());
    let rel = unique_rel(dir, "tensors", key, ".safetensors");
    write_atomic(
        &dir.join(&rel),
        &[
            &(header.len() as u64).to_le_bytes(),
            header.as_bytes(),
            &data,
        ],
    )?;
    Ok(rel)
}

/// The JSON header of a one-tensor safetensors file, padded with spaces to a multiple of 8.
fn safetensors_header(key: &str, dtype: &str, shape: &[u64], bytes: usize) -> String {
    let shape: Vec<String> = shape.iter().map(u64::to_string).collect();
    let mut header = format!(
        "{{{}:{{\"dtype\":\"{dtype}\",\"shape\":[{}],\"data_offsets\":[0,{bytes}]}}}}",
        serde_json::to_string(key).expect("a string serializes"),
        shape.join(",")
    );
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    header
}

/// The logical values of `view` restricted to `shape` (its leading rows), contiguous.
fn gather(view: &View, staged: &[u8], shape: &[u64]) -> Vec<u8> {
    let size = view.element_size();
    let numel: u64 = shape.iter().product();
    let mut out = Vec::with_capacity(numel as usize * size);
    if numel == 0 {
        return out;
    }
    let mut index = vec![0u64; shape.len()];
    for _ in 0..numel {
        let offset: u64 = index.iter().zip(&view.strides).map(|(i, s)| i * s).sum();
        let at = offset as usize * size;
        out.extend_from_slice(&staged[at..at + size]);
        // Advance the odometer, last dimension fastest.
        for k in (0..shape.len()).rev() {
            index[k] += 1;
            if index[k] < shape[k] {
                break;
            }
            index[k] = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_window_gets_attempt_two_and_files_are_never_replaced() {
        let root = std::env::temp_dir().join(format!("dp_wf_{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (first, a1) = new_window_dir(&root, 0, 1, 1).unwrap();
        let (second, a2) = new_window_dir(&root, 0, 1, 1).unwrap();
        assert_eq!((a1, a2), (1, 2));
        assert!(
            second.ends_with("rank0/match1-occ1.2"),
            "{}",
            second.display()
        );
        let path = first.join("manifest.json");
        write_atomic(&path, &[b"{}"]).unwrap();
        let err = write_atomic(&path, &[b"x"]).unwrap_err();
        assert!(err.contains("never overwritten"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
        assert_eq!(
            unique_rel(&first, "tensors", "a/b#1", ".st"),
            "tensors/a_b#1.st"
        );
        std::fs::create_dir_all(first.join("tensors")).unwrap();
        std::fs::write(first.join("tensors/a_b#1.st"), b"").unwrap();
        assert_eq!(
            unique_rel(&first, "tensors", "a_b#1", ".st"),
            "tensors/a_b#1.2.st"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn headers_are_padded_to_eight_bytes() {
        let h = safetensors_header("x#1", "F32", &[2, 3], 24);
        assert_eq!(h.len() % 8, 0);
        assert!(
            h.starts_with("{\"x#1\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}")
        );
    }
}
