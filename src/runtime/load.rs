//! Building a [`Session`] from files: the runtime reads, the app receives owned results.

use std::collections::HashMap;

use serde::Deserialize;
use std::path::{Path, PathBuf};

use crate::app::Session;
use crate::app::jobs::Source;
use crate::app::session::{EMBEDDED, SavedTensors};
use crate::embedded::ExamplePair;
use crate::model::analysis::Analysis;
use crate::model::analysis::compare::Tolerances;
use crate::model::analysis::diagnosis::diagnose;
use crate::model::dump::{Dump, Window};
use crate::model::ingest::{
    AttemptChoice, LoadError, LoadPhase, Progress, load_attempt, read_window, same_input,
};

/// Loads one or two captures from disk (each a manifest file or a directory): each window's
/// newest attempt, diffed under the default tolerances.
///
/// # Errors
/// The first input that cannot be loaded, named.
pub fn open(
    a: &Path,
    b: Option<&Path>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Session, LoadError> {
    open_with(
        a,
        b,
        [AttemptChoice::Newest; 2],
        &Tolerances::default(),
        progress,
    )
}

/// [`open`], keeping `attempts[0]` of each of A's windows and `attempts[1]` of B's, diffed
/// under `tolerances`.
///
/// # Errors
/// The first input that cannot be loaded, named; an attempt a window lacks.
pub fn open_with(
    a: &Path,
    b: Option<&Path>,
    attempts: [AttemptChoice; 2],
    tolerances: &Tolerances,
    progress: &mut dyn FnMut(Progress),
) -> Result<Session, LoadError> {
    open_ignoring(a, b, attempts, tolerances, None, progress)
}

/// [`open_with`], leaving the stages whose names match `ignore` out of both captures before
/// the analysis (`--ignore REGEX`, the CLI's semantics: [`Dump::ignore_stages`], a note per
/// window in the load warnings).
///
/// # Errors
/// As [`open_with`].
pub fn open_ignoring(
    a: &Path,
    b: Option<&Path>,
    attempts: [AttemptChoice; 2],
    tolerances: &Tolerances,
    ignore: Option<(&regex::Regex, &str)>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Session, LoadError> {
    // The gauge names the capture being read, and the analysis after both.
    let captures = 1 + usize::from(b.is_some());
    let mut last = Progress::default();
    let mut mark = |capture: usize, p: Progress, progress: &mut dyn FnMut(Progress)| {
        last = Progress {
            capture,
            captures,
            ..p
        };
        progress(last);
    };
    let mut dump_a = load_attempt(&[a.to_path_buf()], attempts[0], &mut |p| {
        mark(0, p, progress)
    })?;
    let mut dump_b = match b {
        Some(b) => Some(load_attempt(&[b.to_path_buf()], attempts[1], &mut |p| {
            mark(1, p, progress)
        })?),
        None => None,
    };
    progress(Progress {
        phase: LoadPhase::Analysing,
        capture: captures - 1,
        captures,
        records: [Some(&dump_a), dump_b.as_ref()]
            .into_iter()
            .flatten()
            .map(|d| d.windows.iter().map(|w| w.records.len()).sum::<usize>())
            .sum(),
        ..last
    });
    if let Some((regex, pattern)) = ignore {
        dump_a.ignore_stages(regex, pattern);
        if let Some(dump_b) = dump_b.as_mut() {
            dump_b.ignore_stages(regex, pattern);
        }
    }
    if let (Some(b), Some(dump_b)) = (b, dump_b.as_mut()) {
        if let Some(mut note) = same_input(&[a.to_path_buf()], &dump_a, &[b.to_path_buf()], dump_b)
        {
            note.message = format!("A and B: {}", note.message);
            dump_b.warnings.push(note);
        }
    }
    let title = match b {
        Some(b) => format!("{} vs {}", a.display(), b.display()),
        None => a.display().to_string(),
    };
    // Computed here, on the loading job's thread: the UI thread only installs them.
    let analysis = Analysis::compute(&dump_a, dump_b.as_ref(), tolerances);
    let diagnosis = diagnose(&dump_a, dump_b.as_ref(), &analysis);
    Ok(with_saved_tensors(Session {
        title,
        format: format_names(&dump_a, dump_b.as_ref()),
        analysis,
        diagnosis,
        a: dump_a,
        b: dump_b,
        checkout: None,
        checkout_differs: None,
        saved: SavedTensors::default(),
        remote_dirs: Default::default(),
        roots: std::iter::once(a).chain(b).map(Path::to_path_buf).collect(),
    }))
}

/// An example pair embedded in the binary (the default when no file is given), with the
/// checkout it was built from when that still holds the same manifests (its saved tensors
/// are there).
///
/// # Errors
/// Only if an embedded manifest fails to parse, which the test-suite rules out.
pub fn embedded(pair: &ExamplePair) -> Result<Session, LoadError> {
    embedded_in(
        pair,
        Path::new(env!("CARGO_MANIFEST_DIR")),
        &Tolerances::default(),
    )
}

/// [`embedded`], with `root` taken for the checkout the binary was built from, diffed under
/// `tolerances`.
///
/// # Errors
/// Only if an embedded manifest fails to parse, which the test-suite rules out.
pub fn embedded_in(
    pair: &ExamplePair,
    root: &Path,
    tolerances: &Tolerances,
) -> Result<Session, LoadError> {
    let side = |(source, bytes): &(String, &[u8])| -> Result<Dump, LoadError> {
        let (mut manifest, mut warnings) = read_window(bytes, &PathBuf::from(source))?;
        embedded_token_rows(source, bytes, &mut manifest, &mut warnings);
        Ok(Dump {
            windows: vec![manifest],
            warnings,
        })
    };
    let same_on_disk = |(source, bytes): &(String, &[u8])| {
        source
            .strip_prefix(EMBEDDED)
            .and_then(|rel| std::fs::read(root.join(rel)).ok())
            .is_some_and(|disk| disk == *bytes)
    };
    let on_disk = |(source, _): &(String, &[u8])| {
        source
            .strip_prefix(EMBEDDED)
            .is_some_and(|rel| root.join(rel).is_file())
    };
    let same = same_on_disk(&pair.a) && same_on_disk(&pair.b);
    let (a, b) = (side(&pair.a)?, side(&pair.b)?);
    let analysis = Analysis::compute(&a, Some(&b), tolerances);
    let diagnosis = diagnose(&a, Some(&b), &analysis);
    Ok(with_saved_tensors(Session {
        title: format!("example {}", pair.name),
        format: "dump_probe manifest (embedded example)".to_string(),
        analysis,
        diagnosis,
        a,
        b: Some(b),
        checkout: same.then(|| root.to_path_buf()),
        checkout_differs: (!same && on_disk(&pair.a) && on_disk(&pair.b))
            .then(|| root.join("assets/examples").join(&pair.name)),
        saved: SavedTensors::default(),
        remote_dirs: Default::default(),
        roots: Vec::new(),
    }))
}

/// The token rows of an embedded window. [`read_window`] looks for the sidecar the manifest's
/// `token_rows` names (`rows.f32`) on disk beside the manifest's embedded path, where there is
/// none, and keeps the row map alone with a lost-evidence warning; the sidecar is embedded
/// beside the manifest, so its values are read from there and that warning is dropped. A
/// window without an embedded sidecar keeps what `read_window` made of it.
fn embedded_token_rows(
    source: &str,
    bytes: &[u8],
    window: &mut Window,
    warnings: &mut Vec<crate::model::dump::Warning>,
) {
    let Some(rel) = source
        .strip_prefix(EMBEDDED)
        .and_then(|s| s.strip_prefix("assets/examples/"))
    else {
        return;
    };
    let Ok(manifest) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return;
    };
    let Some(Ok(mut rows)) = manifest
        .get("token_rows")
        .map(crate::model::dump::TokenRows::deserialize)
    else {
        return;
    };
    let Some(file) = rows.file.clone() else {
        return;
    };
    let Some(sidecar) = Path::new(rel)
        .parent()
        .and_then(|dir| crate::embedded::EXAMPLES.get_file(dir.join(&file)))
    else {
        return;
    };
    if rows.check(sidecar.contents().len() as u64).is_err() {
        return; // read_window's warning stands
    }
    rows.values = crate::model::dump::RowValues::decode(sidecar.contents());
    window.token_rows = Some(std::sync::Arc::new(rows));
    let on_disk = Path::new(source).parent().map(|dir| dir.join(&file));
    warnings.retain(|w| Some(&w.file) != on_disk.as_ref());
}

/// Opens `source`, diffed under `tolerances`, reporting progress while reading files.
///
/// # Errors
/// The load error, said for the user; an unknown example name.
pub fn source(
    source: &Source,
    tolerances: &Tolerances,
    progress: &mut dyn FnMut(Progress),
) -> Result<Session, String> {
    match source {
        Source::Files {
            a,
            b,
            attempt_a,
            attempt_b,
            ignore,
        } => {
            let regex = ignore
                .as_deref()
                .map(|p| {
                    regex::Regex::new(p).map(|r| (r, p)).map_err(|e| {
                        format!("--ignore {p:?} is not a valid regular expression: {e}")
                    })
                })
                .transpose()?;
            open_ignoring(
                a,
                b.as_deref(),
                [*attempt_a, *attempt_b],
                tolerances,
                regex.as_ref().map(|(r, p)| (r, *p)),
                progress,
            )
            .map_err(|e| e.to_string())
        }
        Source::Example(name) => match crate::embedded::example_pairs()
            .into_iter()
            .find(|p| &p.name == name)
        {
            Some(pair) => embedded_in(&pair, Path::new(env!("CARGO_MANIFEST_DIR")), tolerances)
                .map_err(|e| e.to_string()),
            None => Err(format!("no embedded example named {name:?}")),
        },
    }
}

/// `session` with [`Session::saved`] filled in: for every record naming a tensor file, the
/// file when it resolves inside its window directory (as it lies on disk) and exists; the
/// first such record of a `stage#occurrence` wins.
pub fn with_saved_tensors(mut session: Session) -> Session {
    let windows = |dump: &Dump| -> Vec<HashMap<String, PathBuf>> {
        dump.windows
            .iter()
            .map(|window| saved_in(&session, window))
            .collect()
    };
    let a = windows(&session.a);
    let b = session.b.as_ref().map(windows).unwrap_or_default();
    session.saved = SavedTensors { a, b };
    session.remote_dirs = remote_dirs(&session);
    session
}

/// [`Session::remote_dirs`]: the remote place of every window directory holding input sets
/// that a registered fetcher owns (a remote capture's mirror).
fn remote_dirs(session: &Session) -> HashMap<PathBuf, String> {
    std::iter::once(&session.a)
        .chain(session.b.as_ref())
        .flat_map(|dump| &dump.windows)
        .filter(|w| !w.input_sets.is_empty())
        .filter_map(|w| {
            let dir = w.window_dir().to_path_buf();
            let place = crate::services::fetch::remote_of(&dir)?.ok()?;
            Some((dir, place.source))
        })
        .collect()
}

fn saved_in(session: &Session, window: &Window) -> HashMap<String, PathBuf> {
    let mut saved = HashMap::new();
    let Some(on_disk) = session.on_disk(window) else {
        return saved;
    };
    let dir = on_disk.window_dir();
    for record in on_disk.records.iter().filter(|r| r.tensor_file.is_some()) {
        let key = record.key();
        if saved.contains_key(&key) {
            continue;
        }
        if let Some(path) = record
            .tensor_path(dir)
            .ok()
            .flatten()
            // A remote capture's tensors are listed before they are fetched.
            .filter(|p| p.is_file() || crate::services::fetch::fetchable(p))
        {
            saved.insert(key, path);
        }
    }
    saved
}

/// The formats of the open captures, for the header: `msprobe dump`, or
/// `dump_probe manifest vs msprobe dump` when the two differ.
pub(crate) fn format_names(a: &Dump, b: Option<&Dump>) -> String {
    let names = |d: &Dump| {
        let mut names: Vec<&str> = d.windows.iter().map(|w| w.facts.name).collect();
        names.sort_unstable();
        names.dedup();
        names.join(" + ")
    };
    match b.map(names) {
        Some(nb) if nb != names(a) => format!("{} vs {nb}", names(a)),
        _ => names(a),
    }
}
