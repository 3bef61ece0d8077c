//! Planning a matrix on one captured input set and writing it ([`create`]): what
//! `dumpview cases plan` and the workbench's `c` both do once they know the window and the
//! input set. Reads the window's manifest and the input set's `.pt`, builds the plan
//! (`plan::build`), and writes the matrix (`Matrix::create`): the baseline copy, then
//! `plan.json`.

use std::path::{Path, PathBuf};

use super::plan::{self, PlanRequest, VsCheck};
use super::store::{CASES_DIR_ENV, DEFAULT_CASES_DIR, Matrix};
use crate::model::dump::InputSetEntry;
use crate::model::input_set::InputSet;
use crate::model::io::FileBytes;
use crate::model::replay::Standard;

/// The cases directory: `given`, else `$DUMPVIEW_CASES_DIR`, else `.dumpview/cases` (of
/// the current directory).
pub fn cases_root(given: Option<&Path>) -> PathBuf {
    given
        .map(Path::to_path_buf)
        .or_else(|| {
            std::env::var_os(CASES_DIR_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CASES_DIR))
}

/// The window the input set was captured in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowOnDisk {
    /// Its `manifest.json`, on this machine (a remote capture's mirror copy).
    pub manifest: PathBuf,
    /// Its rank.
    pub rank: u32,
    /// Its label.
    pub label: String,
}

impl WindowOnDisk {
    /// The window's directory (the manifest's).
    pub fn dir(&self) -> &Path {
        self.manifest
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    }

    /// The directory's name (`match1-occ1`): replay_op.py's `--window`.
    pub fn dir_name(&self) -> String {
        self.dir()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// What [`create`] needs besides the cases directory.
#[derive(Debug, Clone)]
pub struct NewMatrix<'a> {
    /// NAME.
    pub name: &'a str,
    /// DUMP as `cases run` will reach it: a local path, or `ssh://…` / `host:path`.
    pub dump: &'a str,
    /// The window holding the input set.
    pub window: &'a WindowOnDisk,
    /// The input set's manifest entry.
    pub entry: &'a InputSetEntry,
    /// OP.
    pub candidate: &'a str,
    /// REF.
    pub reference: &'a str,
    /// The standard.
    pub standard: Standard,
    /// `--axis` specs.
    pub axes: &'a [String],
    /// `--tie` specs.
    pub ties: &'a [String],
    /// `--untie` specs.
    pub untied: &'a [String],
    /// With `--vs`: how the other capture compares at the stage.
    pub vs: Option<VsCheck>,
}

/// Reads the input set, builds the plan and writes the matrix under `root`. `fetch` brings
/// a file of a remote capture into its mirror before it is read (nothing for a local one).
///
/// # Errors
/// The input set's `.pt` outside its window, missing or unreadable (the message names the
/// file); an axis the plan refuses (naming it); the matrix exists or cannot be written.
pub fn create(
    root: &Path,
    new: &NewMatrix,
    fetch: &mut dyn FnMut(&Path) -> Result<(), String>,
) -> Result<Matrix, String> {
    let window = new.window;
    let entry = new.entry;
    let key = format!("{}#{}", entry.stage, entry.occurrence);
    let pt = crate::model::dump::evidence::resolve(window.dir(), &entry.file)
        .map_err(|e| format!("{}: input set {key}: {e}", window.manifest.display()))?;
    fetch(&pt)?;
    let bytes =
        FileBytes::read(&pt, true).map_err(|e| format!("{}: cannot read: {e}", pt.display()))?;
    let set = InputSet::from_bytes(&bytes, &pt).map_err(|e| e.to_string())?;
    let mut built = plan::build(&PlanRequest {
        name: new.name,
        dump: new.dump,
        stage: &key,
        rank: window.rank,
        window: &window.dir_name(),
        label: &window.label,
        candidate: new.candidate,
        reference: new.reference,
        standard: new.standard,
        input_set: &set,
        op: entry.op.as_deref(),
        source_manifest: &window.manifest.display().to_string(),
        input_file: &entry.file,
        axes: new.axes,
        ties: new.ties,
        untied: new.untied,
        created_unix_s: now(),
    })?;
    built.vs = new.vs.clone();
    let manifest = baseline_manifest(&window.manifest, entry)?;
    Matrix::create(root, built, &manifest, &bytes)
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The manifest of the baseline copy: the window's manifest with no records and only the
/// input set of the plan. The entries stay as written (their `args` in call order: a
/// positional call depends on it).
fn baseline_manifest(source: &Path, entry: &InputSetEntry) -> Result<Vec<u8>, String> {
    use serde_json::value::RawValue;
    let path = source.display();
    let bytes = FileBytes::read(source, true).map_err(|e| format!("{path}: cannot read: {e}"))?;
    let mut manifest: std::collections::BTreeMap<String, Box<RawValue>> =
        serde_json::from_slice(&bytes).map_err(|e| format!("{path}: not a JSON object: {e}"))?;
    let sets: Vec<Box<RawValue>> = match manifest.get("input_sets") {
        Some(raw) => {
            serde_json::from_str(raw.get()).map_err(|e| format!("{path}: input_sets: {e}"))?
        }
        None => Vec::new(),
    };
    #[derive(serde::Deserialize)]
    struct Key {
        stage: String,
        occurrence: u32,
    }
    let kept: Vec<Box<RawValue>> = sets
        .into_iter()
        .filter(|raw| {
            serde_json::from_str::<Key>(raw.get())
                .is_ok_and(|k| k.stage == entry.stage && k.occurrence == entry.occurrence)
        })
        .collect();
    let raw = |text: String| RawValue::from_string(text).map_err(|e| e.to_string());
    manifest.insert("records".into(), raw("[]".into())?);
    manifest.insert(
        "input_sets".into(),
        raw(serde_json::to_string(&kept).map_err(|e| e.to_string())?)?,
    );
    serde_json::to_vec(&manifest).map_err(|e| e.to_string())
}

/// Refuses a cases directory `root` inside the dump at `dump` (a manifest file or a
/// directory): a dump directory holds evidence only. Symbolic links are resolved; the
/// nearest existing ancestor of `root` decides.
///
/// # Errors
/// `root` lies inside the dump (naming both).
pub fn refuse_inside(root: &Path, dump: &Path) -> Result<(), String> {
    let dump_dir = if dump.is_file() {
        dump.parent().unwrap_or(Path::new("."))
    } else {
        dump
    };
    let Ok(dump_dir) = dump_dir.canonicalize() else {
        return Ok(()); // the load reports a dump that is not there
    };
    let mut probe = std::path::absolute(root).map_err(|e| format!("{}: {e}", root.display()))?;
    loop {
        if let Ok(real) = probe.canonicalize() {
            if real.starts_with(&dump_dir) {
                return Err(format!(
                    "the cases directory {} lies inside the dump {}: a dump holds evidence only (give --cases-dir elsewhere)",
                    root.display(),
                    dump_dir.display()
                ));
            }
            return Ok(());
        }
        if !probe.pop() {
            return Ok(());
        }
    }
}
