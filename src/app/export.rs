//! `e`: the export prompt. The path is shown and editable before anything is written: it
//! opens on the last path tried (after a failure, to be corrected), else the directory of the
//! last report written, else the working directory; Enter hands the report and the path to
//! the runtime's export job, which says where it wrote, or where it tried and why not.

use std::path::PathBuf;

use super::jobs::JobSpec;
use super::{App, Effect};

/// The open export prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportPrompt {
    /// The path as typed: a directory (a new `dumpview-report-<title>-N.md` is made in it)
    /// or a file name (written as named, never over an existing file).
    pub input: String,
    /// Why the last Enter did not export, shown under the path.
    pub error: Option<String>,
}

/// `dir` as the prompt shows a directory: with a trailing `/`.
fn as_directory(dir: &std::path::Path) -> String {
    let mut text = dir.display().to_string();
    if !text.ends_with('/') {
        text.push('/');
    }
    text
}

/// `e`: opens the prompt on the path to propose.
pub(super) fn open(app: &mut App) {
    let input = app.export_last.clone().unwrap_or_else(|| {
        app.working_dir
            .as_deref()
            .map_or_else(|| "./".to_string(), as_directory)
    });
    app.export = Some(ExportPrompt { input, error: None });
}

/// Enter: the report to `input`, as a job; an empty path keeps the prompt open.
pub(super) fn submit(app: &mut App) -> Vec<Effect> {
    let (Some(prompt), Some(loaded)) = (app.export.as_mut(), app.loaded.as_ref()) else {
        return Vec::new();
    };
    let input = prompt.input.trim().to_string();
    if input.is_empty() {
        prompt.error = Some("give a directory or a file name".to_string());
        return Vec::new();
    }
    let mut report = crate::model::analysis::report::Report::build(
        &loaded.session.a,
        loaded.session.b.as_ref(),
        &loaded.session.analysis,
    );
    for kept in &app.tensor_results {
        report.add_tensor_comparison(kept.rank, kept.stage.clone(), kept.result.clone());
    }
    // The session's judged replays, as `dumpview report --replay DIR` adds them; a replay
    // that gave no judgement (no Python, an input refused) left no evidence to report.
    for kept in &app.replay_results {
        if let Ok(result) = &kept.outcome {
            report.add_replay(result.run.out_dir.clone(), Ok(result.replay.clone()));
        }
    }
    if let Some(b) = &loaded.session.b {
        report.note_saved_rows(&loaded.session.a, b);
    }
    let spec = JobSpec::Export {
        markdown: report.to_markdown(),
        name_hint: loaded.session.title.clone(),
        target: PathBuf::from(&input),
    };
    app.export = None;
    app.export_last = Some(input.clone());
    app.message = Some(format!("exporting the report to {input}…"));
    vec![Effect::Spawn(spec)]
}

/// The export job wrote `path`: the next prompt proposes its directory.
pub(super) fn written(app: &mut App, path: &str) {
    app.message = Some(format!("report exported to {path}"));
    app.export_last = std::path::Path::new(path)
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(as_directory);
}

/// The export job failed with `error` (which names the path it tried and why): the next
/// prompt opens on the same path, to be corrected.
pub(super) fn failed(app: &mut App, error: &str) {
    app.message = Some(format!("export failed: {error} · e to choose another path"));
}
