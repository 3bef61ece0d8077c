//! Two tensor files compared key by key.

use serde::Serialize;

use super::metrics::{self, CompareError, CompareProgress, Metrics, Options};
use crate::model::tensor::read::{FileFormat, TensorFile};

/// One file's side of a comparison, as reported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileSide {
    /// The file's path as given, for display.
    pub path: String,
    /// The container format told by the file's content.
    pub format: FileFormat,
    /// Tensors the file holds.
    pub tensors: usize,
}

impl FileSide {
    fn of(file: &TensorFile) -> Self {
        FileSide {
            path: file.path.display().to_string(),
            format: file.format,
            tensors: file.entries.len(),
        }
    }
}

/// The outcome for one key present in both files.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairResult {
    /// The key in A (B's key differs only when two single-tensor files were paired).
    pub key: String,
    /// B's key when it differs from A's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_b: Option<String>,
    /// The comparison's results; `None` when the pair was not compared (see `error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
    /// Why the pair was not compared (shape or dtype differs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Every pair of two files, and the keys only one side holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileComparison {
    /// File A (compared against B).
    pub a: FileSide,
    /// File B, the reference of the closeness rule.
    pub b: FileSide,
    /// The options every pair was compared with.
    pub options: Options,
    /// Keys in A's order.
    pub pairs: Vec<PairResult>,
    /// Keys only A holds, in A's order.
    pub only_a: Vec<String>,
    /// Keys only B holds, in B's order.
    pub only_b: Vec<String>,
    /// Every key paired, compared, and close.
    pub all_close: bool,
}

/// Which tensors of two files to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection<'k> {
    /// Every key; two files of one tensor each are paired even when their keys differ
    /// (a probe's `stage#N` safetensors against a bare tensor saved by hand).
    All,
    /// Only this key, which both files must hold.
    Key(&'k str),
}

/// The key pairs `select` names, in A's order, and the keys found on one side only.
///
/// # Errors
/// With [`Selection::Key`], a message naming the file that lacks the key and the keys it
/// has.
#[allow(clippy::type_complexity)]
pub fn pair_keys(
    a: &TensorFile,
    b: &TensorFile,
    select: Selection,
) -> Result<(Vec<(usize, usize)>, Vec<String>, Vec<String>), String> {
    if let Selection::Key(key) = select {
        let find = |file: &TensorFile| {
            file.entries
                .iter()
                .position(|e| e.key == key)
                .ok_or_else(|| {
                    // A bare tensor's key is empty: named as the table names it.
                    let keys: Vec<&str> = file
                        .entries
                        .iter()
                        .map(|e| match e.key.as_str() {
                            "" => "(tensor): the file holds one bare tensor, no --key needed",
                            key => key,
                        })
                        .take(20)
                        .collect();
                    format!(
                        "{}: no tensor {key:?}; it holds {}",
                        file.path.display(),
                        keys.join(", ")
                    )
                })
        };
        return Ok((vec![(find(a)?, find(b)?)], Vec::new(), Vec::new()));
    }
    if a.entries.len() == 1 && b.entries.len() == 1 {
        return Ok((vec![(0, 0)], Vec::new(), Vec::new()));
    }
    let mut pairs = Vec::new();
    let mut only_a = Vec::new();
    for (i, entry) in a.entries.iter().enumerate() {
        match b.entries.iter().position(|e| e.key == entry.key) {
            Some(j) => pairs.push((i, j)),
            None => only_a.push(entry.key.clone()),
        }
    }
    let only_b = b
        .entries
        .iter()
        .filter(|e| a.get(&e.key).is_none())
        .map(|e| e.key.clone())
        .collect();
    Ok((pairs, only_a, only_b))
}

/// Elements the selected pairs hold in all: the total for progress.
pub fn total_elements(a: &TensorFile, pairs: &[(usize, usize)]) -> u64 {
    pairs
        .iter()
        .map(|&(i, _)| a.entries[i].numel() as u64)
        .sum()
}

/// Compares the tensors `select` names in `a` and `b` (the reference).
///
/// # Errors
/// A missing `--key` ([`pair_keys`]); "cancelled" when `progress.cancel` was set. A pair
/// whose shape or dtype differs is not an error: it is reported in its [`PairResult`].
pub fn compare_files(
    a: &TensorFile,
    b: &TensorFile,
    select: Selection,
    options: &Options,
    progress: &CompareProgress,
) -> Result<FileComparison, String> {
    let (pairs, only_a, only_b) = pair_keys(a, b, select)?;
    progress.total.fetch_add(
        total_elements(a, &pairs),
        std::sync::atomic::Ordering::Relaxed,
    );
    let mut results = Vec::with_capacity(pairs.len());
    for (i, j) in pairs {
        let (ea, eb) = (&a.entries[i], &b.entries[j]);
        let outcome = metrics::compare(&a.view(ea), &b.view(eb), options, progress);
        let (metrics, error) = match outcome {
            Ok(m) => (Some(m), None),
            Err(CompareError::Cancelled) => return Err("cancelled".into()),
            Err(e) => (None, Some(e.to_string())),
        };
        results.push(PairResult {
            key: ea.key.clone(),
            key_b: (eb.key != ea.key).then(|| eb.key.clone()),
            metrics,
            error,
        });
    }
    let all_close = only_a.is_empty()
        && only_b.is_empty()
        && results
            .iter()
            .all(|r| r.metrics.as_ref().is_some_and(|m| m.allclose));
    Ok(FileComparison {
        a: FileSide::of(a),
        b: FileSide::of(b),
        options: *options,
        pairs: results,
        only_a,
        only_b,
        all_close,
    })
}

/// Opens and compares the saved tensors of one stage from two captures with
/// the default [`Options`]: a precision-change pair is compared losslessly as float64 and its
/// ULPs counted in the coarser dtype, as by `dumpview tensors`.
///
/// # Errors
/// A file that cannot be read (named), or "cancelled".
pub fn compare_saved(
    a: &std::path::Path,
    b: &std::path::Path,
    progress: &CompareProgress,
) -> Result<FileComparison, String> {
    let a = TensorFile::open(a).map_err(|e| e.to_string())?;
    let b = TensorFile::open(b).map_err(|e| e.to_string())?;
    let options = Options::default();
    compare_files(&a, &b, Selection::All, &options, progress)
}
