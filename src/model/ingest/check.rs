//! The checks every window of every format gets once read ([`check_window`]): values that
//! cannot be true (`super::values`), repeated keys, records out of capture order, and evidence
//! paths that would lead out of the dump.

use std::collections::HashMap;
use std::path::PathBuf;

use rayon::prelude::*;

use crate::model::dump::{Warning, Window, evidence, keys_increase};

/// Applies every check to `window`: the value checks, then [`check_records`] and
/// [`drop_escaping_evidence`], those two side by side. Returns their warnings, in that order.
pub fn check_window(window: &mut Window) -> Vec<Warning> {
    let mut checked = super::values::check_values(window);
    let (records, refused) = rayon::join(|| check_records(window), || resolve_tensor_files(window));
    checked.extend(records);
    checked.extend(drop_refused_evidence(window, refused));
    if window.records.is_empty() {
        // Nothing is lost (the file says it holds nothing), but a comparison of it agrees
        // vacuously: say so rather than print an empty success.
        checked.push(Warning::note(
            window.source.clone(),
            "holds no records: nothing was captured in this window, so nothing here can be compared",
        ));
    }
    checked
}

/// Evidence files that would resolve outside the window directory (absolute paths, `..`,
/// symbolic links leading out): one warning each, and the path is dropped so nothing opens it.
/// Every other saved tensor's path is resolved here, once, into `Record::tensor_resolved`:
/// what the analyses and the report name and open, without touching the file system again.
pub fn drop_escaping_evidence(manifest: &mut Window) -> Vec<Warning> {
    let resolved = resolve_tensor_files(manifest);
    drop_refused_evidence(manifest, resolved)
}

/// Each record naming a `tensor_file`, with that file resolved or why it is refused, in
/// order. Resolving touches the file system for every saved tensor, so it runs on rayon's
/// threads.
fn resolve_tensor_files(manifest: &Window) -> Vec<(usize, Result<PathBuf, String>)> {
    let window_dir = manifest.window_dir();
    manifest
        .records
        .par_iter()
        .enumerate()
        .filter(|(_, record)| record.tensor_file.is_some())
        .filter_map(|(i, record)| record.tensor_path(window_dir).transpose().map(|r| (i, r)))
        .collect()
}

/// The rest of [`drop_escaping_evidence`], given [`resolve_tensor_files`].
fn drop_refused_evidence(
    manifest: &mut Window,
    resolved: Vec<(usize, Result<PathBuf, String>)>,
) -> Vec<Warning> {
    let window_dir = manifest.window_dir().to_path_buf();
    let mut warnings = Vec::new();
    for (i, resolved) in resolved {
        let record = &mut manifest.records[i];
        let message = match resolved {
            Ok(path) => {
                record.tensor_resolved = Some(path);
                continue;
            }
            Err(message) => message,
        };
        warnings.push(Warning::lost(
            manifest.source.clone(),
            format!(
                "{} (seq {}): {message}; the tensor file is not used",
                record.key(),
                record.seq
            ),
        ));
        record.tensor_file = None;
    }
    manifest
        .input_sets
        .retain(|set| match evidence::resolve(&window_dir, &set.file) {
            Ok(_) => true,
            Err(message) => {
                warnings.push(Warning::lost(
                    manifest.source.clone(),
                    format!(
                        "input set {}#{}: {message}; the input set is not used",
                        set.stage, set.occurrence
                    ),
                ));
                false
            }
        });
    warnings
}

/// Consistency problems that do not stop a load: duplicate `stage#occurrence`
/// keys (the first one is used for pairing) and records out of capture order.
pub fn check_records(manifest: &Window) -> Vec<Warning> {
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
            warnings.push(Warning::lost(
                manifest.source.clone(),
                format!(
                    "{} appears twice (seq {first} and {}); pairing uses seq {first}",
                    record.key(),
                    record.seq
                ),
            ));
        }
        if last_seq.is_some_and(|last| record.seq <= last) {
            warnings.push(Warning::lost(
                manifest.source.clone(),
                format!(
                    "seq {} of {} is not after the previous record's",
                    record.seq,
                    record.key()
                ),
            ));
        }
        last_seq = Some(record.seq);
    }
    warnings
}
