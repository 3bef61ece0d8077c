//! Two directory trees of saved tensors compared file by file (`dumpview tensors DIR_A
//! DIR_B`): files pair by their path relative to each root, tensors within a pair by key
//! ([`super::pairing`]).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::metrics::{CompareProgress, Metrics, Options};
use super::pairing::{PairResult, Selection, compare_files};
use crate::model::tensor::read::TensorFile;

/// File name endings taken for tensor files when a tree is walked (the format itself is
/// told by the content, as [`TensorFile::open`] does): torch.save's `.pt`, `.pth` and `.bin`
/// (`pytorch_model.bin`) and `.safetensors`. Compared case-insensitively.
pub const TENSOR_EXTENSIONS: [&str; 4] = ["pt", "pth", "bin", "safetensors"];

/// Whether a tree walk takes `path` for a tensor file ([`TENSOR_EXTENSIONS`]).
pub fn is_tensor_file_name(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| TENSOR_EXTENSIONS.iter().any(|t| e.eq_ignore_ascii_case(t)))
}

/// What one row of the table says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RowVerdict {
    /// Compared, and every position is close.
    Close,
    /// Compared, and some position is not close (or the non-finite positions differ).
    NotClose,
    /// Both files hold the key, but the tensors could not be compared (shape differs, int64
    /// against another dtype without `--cast`, more elements than `--max-elements`).
    NotCompared,
    /// Only A's file holds the key.
    OnlyInA,
    /// Only B's file holds the key.
    OnlyInB,
    /// A's or B's file could not be read (the row has no key).
    Unreadable,
}

impl RowVerdict {
    /// How the verdict is shown in the text table.
    pub fn text(self) -> &'static str {
        match self {
            RowVerdict::Close => "close",
            RowVerdict::NotClose => "NOT CLOSE",
            RowVerdict::NotCompared => "not compared",
            RowVerdict::OnlyInA => "only in A",
            RowVerdict::OnlyInB => "only in B",
            RowVerdict::Unreadable => "unreadable",
        }
    }
}

/// One row: a key of a file both trees hold, or such a file that could not be read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TreeRow {
    /// The file's path relative to both roots, `/`-separated (lossily UTF-8).
    pub path: String,
    /// The key in A (in B for [`RowVerdict::OnlyInB`]); `None` on an unreadable file's row.
    pub key: Option<String>,
    /// B's key when it differs from A's (two single-tensor files are paired whatever their
    /// keys).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_b: Option<String>,
    /// The verdict.
    pub verdict: RowVerdict,
    /// The metrics, as `dumpview tensors FILE FILE` gives them, when the pair was compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
    /// Why the pair was not compared, or why the file could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An entry of one tree that the walk did not list (a link out of the tree, a dangling link,
/// a linked directory, a subdirectory that cannot be read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedEntry {
    /// `'a'` or `'b'`.
    pub side: char,
    /// The entry's path relative to its root.
    pub path: String,
    /// Why it was not listed.
    pub reason: String,
}

/// The counts the last line of the text gives.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TreeCounts {
    /// Files both trees hold.
    pub files_paired: usize,
    /// Rows whose verdict is close.
    pub close: usize,
    /// Rows whose verdict is not close.
    pub not_close: usize,
    /// Rows not compared (shape differs, ...).
    pub not_compared: usize,
    /// Keys only A's file holds.
    pub keys_only_in_a: usize,
    /// Keys only B's file holds.
    pub keys_only_in_b: usize,
    /// Paired files that could not be read.
    pub unreadable: usize,
    /// Tensor files only A's tree holds.
    pub files_only_in_a: usize,
    /// Tensor files only B's tree holds.
    pub files_only_in_b: usize,
    /// Entries the walks did not list.
    pub skipped: usize,
    /// With `--key`: paired files neither of which holds the key (no row).
    pub files_without_key: usize,
}

/// Two trees compared: one row per key of every paired file, and the files on one side only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TreeComparison {
    /// Root A as given.
    pub a: String,
    /// Root B as given, the reference of the closeness rule.
    pub b: String,
    /// The options every pair was compared with.
    pub options: Options,
    /// `--key`: the only key compared within each file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Rows in relative path order (component by component, byte order); within a file the
    /// paired keys in A's save order, then keys only in A, then keys only in B.
    pub rows: Vec<TreeRow>,
    /// Tensor files only A's tree holds, relative paths in path order.
    pub only_a: Vec<String>,
    /// Tensor files only B's tree holds.
    pub only_b: Vec<String>,
    /// What the walks did not list, A's then B's, in path order.
    pub skipped: Vec<SkippedEntry>,
    /// The counts.
    pub counts: TreeCounts,
    /// Every row close, no file on one side only, nothing skipped.
    pub all_close: bool,
}

/// Called before each paired file is compared with its relative path, its place (1-based)
/// and the number of paired files.
pub type FileProgress<'f> = &'f mut dyn FnMut(&Path, usize, usize);

/// Compares every tensor file ([`is_tensor_file_name`]) under `a` with the file of the same
/// relative path under `b` (the reference), key by key ([`compare_files`] with
/// [`Selection::All`], or only `key` within each file). A file that cannot be read is a
/// row with its error, never an abort.
///
/// # Errors
/// A root that cannot be listed (named); "cancelled" when `progress.cancel` was set; with
/// `key`, no file of either tree holding it.
pub fn compare_trees(
    a: &Path,
    b: &Path,
    key: Option<&str>,
    options: &Options,
    progress: &CompareProgress,
    on_file: FileProgress,
) -> Result<TreeComparison, String> {
    let list = |root: &Path| {
        crate::model::io::files_under(root, &is_tensor_file_name)
            .map_err(|e| format!("{}: cannot list: {e}", root.display()))
    };
    let (list_a, list_b) = (list(a)?, list(b)?);
    let show = |p: &Path| {
        p.components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join("/")
    };
    let in_b: std::collections::HashSet<&PathBuf> = list_b.files.iter().collect();
    let in_a: std::collections::HashSet<&PathBuf> = list_a.files.iter().collect();
    let paired: Vec<&PathBuf> = list_a.files.iter().filter(|p| in_b.contains(p)).collect();
    let mut rows = Vec::new();
    let mut counts = TreeCounts {
        files_paired: paired.len(),
        ..TreeCounts::default()
    };
    for (n, relative) in paired.iter().enumerate() {
        on_file(relative, n + 1, paired.len());
        let path = show(relative);
        let opened = TensorFile::open(&a.join(relative))
            .and_then(|fa| TensorFile::open(&b.join(relative)).map(|fb| (fa, fb)));
        let (fa, fb) = match opened {
            Ok(files) => files,
            Err(e) => {
                rows.push(TreeRow {
                    path,
                    key: None,
                    key_b: None,
                    verdict: RowVerdict::Unreadable,
                    metrics: None,
                    error: Some(e.to_string()),
                });
                continue;
            }
        };
        let select = match key {
            None => Selection::All,
            Some(k) => {
                let (has_a, has_b) = (fa.get(k).is_some(), fb.get(k).is_some());
                match (has_a, has_b) {
                    (true, true) => Selection::Key(k),
                    (false, false) => {
                        counts.files_without_key += 1;
                        continue;
                    }
                    (true, false) | (false, true) => {
                        let verdict = if has_a {
                            RowVerdict::OnlyInA
                        } else {
                            RowVerdict::OnlyInB
                        };
                        rows.push(key_row(path, k, verdict));
                        continue;
                    }
                }
            }
        };
        let cmp = compare_files(&fa, &fb, select, options, progress)?;
        rows.extend(cmp.pairs.into_iter().map(|pair| pair_row(&path, pair)));
        for k in &cmp.only_a {
            rows.push(key_row(path.clone(), k, RowVerdict::OnlyInA));
        }
        for k in &cmp.only_b {
            rows.push(key_row(path.clone(), k, RowVerdict::OnlyInB));
        }
    }
    if let Some(k) = key {
        if rows.is_empty() && counts.files_paired > 0 {
            return Err(format!(
                "no paired file under {} and {} holds a tensor {k:?}",
                a.display(),
                b.display()
            ));
        }
    }
    for row in &rows {
        let count = match row.verdict {
            RowVerdict::Close => &mut counts.close,
            RowVerdict::NotClose => &mut counts.not_close,
            RowVerdict::NotCompared => &mut counts.not_compared,
            RowVerdict::OnlyInA => &mut counts.keys_only_in_a,
            RowVerdict::OnlyInB => &mut counts.keys_only_in_b,
            RowVerdict::Unreadable => &mut counts.unreadable,
        };
        *count += 1;
    }
    let only_a: Vec<String> = list_a
        .files
        .iter()
        .filter(|p| !in_b.contains(p))
        .map(|p| show(p))
        .collect();
    let only_b: Vec<String> = list_b
        .files
        .iter()
        .filter(|p| !in_a.contains(p))
        .map(|p| show(p))
        .collect();
    let skipped: Vec<SkippedEntry> = [('a', &list_a), ('b', &list_b)]
        .into_iter()
        .flat_map(|(side, listing)| {
            listing.skipped.iter().map(move |(p, reason)| SkippedEntry {
                side,
                path: show(p),
                reason: reason.clone(),
            })
        })
        .collect();
    counts.files_only_in_a = only_a.len();
    counts.files_only_in_b = only_b.len();
    counts.skipped = skipped.len();
    let all_close = rows.iter().all(|r| r.verdict == RowVerdict::Close)
        && only_a.is_empty()
        && only_b.is_empty()
        && skipped.is_empty();
    Ok(TreeComparison {
        a: a.display().to_string(),
        b: b.display().to_string(),
        options: *options,
        key: key.map(str::to_string),
        rows,
        only_a,
        only_b,
        skipped,
        counts,
        all_close,
    })
}

fn key_row(path: String, key: &str, verdict: RowVerdict) -> TreeRow {
    TreeRow {
        path,
        key: Some(key.to_string()),
        key_b: None,
        verdict,
        metrics: None,
        error: None,
    }
}

fn pair_row(path: &str, pair: PairResult) -> TreeRow {
    let verdict = match &pair.metrics {
        Some(m) if m.allclose => RowVerdict::Close,
        Some(_) => RowVerdict::NotClose,
        None => RowVerdict::NotCompared,
    };
    TreeRow {
        path: path.to_string(),
        key: Some(pair.key),
        key_b: pair.key_b,
        verdict,
        metrics: pair.metrics,
        error: pair.error,
    }
}
