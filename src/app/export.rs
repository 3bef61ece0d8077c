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
    /// The path as typed: a directory (a new `dumpview-report-<name>-N.md` is made in it)
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
        name_hint: report_name(&loaded.session),
        target: PathBuf::from(&input),
    };
    app.export = None;
    app.export_last = Some(input.clone());
    app.message = Some(format!("exporting the report to {input}…"));
    vec![Effect::Spawn(spec)]
}

/// A short readable name for a report of `session`: the captures' last path components
/// (with their parent's where the last is one or two characters, as `a` and `b` of a pair
/// directory) and the first finding's stage: `run_bf16_vs_run_fp32-layers.3.mlp_up`. The
/// title stands in for an example or a watch, which have no paths.
pub(super) fn report_name(session: &super::session::Session) -> String {
    let short = |path: &std::path::Path| {
        let mut parts = path.components().rev().filter_map(|c| match c {
            std::path::Component::Normal(p) => Some(p.to_string_lossy().into_owned()),
            _ => None,
        });
        let last = parts.next().unwrap_or_default();
        match parts.next() {
            Some(parent) if last.chars().count() <= 2 => format!("{parent}-{last}"),
            _ => last,
        }
    };
    let inputs: Vec<String> = session.roots.iter().map(|p| short(p)).collect();
    let mut name = if inputs.is_empty() {
        session.title.clone()
    } else {
        inputs.join("_vs_")
    };
    let analysis = &session.analysis;
    let first = analysis
        .diff
        .as_ref()
        .and_then(|d| d.headline.as_ref())
        .map(|h| h.key.clone())
        .filter(|k| !k.is_empty())
        .or_else(|| {
            analysis
                .scans_a
                .iter()
                .find_map(|s| s.first_nonfinite.as_ref().map(|n| n.key.clone()))
        })
        .or_else(|| {
            analysis
                .single_run_a
                .findings
                .first()
                .map(|f| f.key.clone())
        });
    if let Some(key) = first {
        name.push('-');
        name.push_str(key.split('#').next().unwrap_or(&key));
    }
    name
}

/// The export job wrote `path`: the next prompt proposes its directory.
pub(super) fn written(app: &mut App, path: &str) {
    app.message = Some(format!("report exported to {path}"));
    app.export_last = std::path::Path::new(path)
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(as_directory);
}

/// The export job failed with `error` (which names the path it tried and why): the prompt
/// stays open on the same path, with the error, to be corrected (Esc closes it).
pub(super) fn failed(app: &mut App, error: &str) {
    // The prompt opens again on the path tried, with the error under it: the next keys are a
    // correction of the path, never commands to the timeline.
    app.export = Some(ExportPrompt {
        input: app.export_last.clone().unwrap_or_default(),
        error: Some(format!("export failed: {error}")),
    });
    app.message = Some(format!("export failed: {error}"));
}
