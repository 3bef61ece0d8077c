//! `dumpview cases run`: the planned cases run where the dump lives (`services::cases`), with
//! progress on stderr (a line per case filed; on a terminal, the case running), then the
//! per-case table and the analysis's exit status. SIGINT, SIGTERM and SIGHUP cancel a run
//! (its Python, or the remote side, is killed; what finished is kept).

use std::path::Path;

use super::super::{CliError, Conclusion, Context, cancel_on_signals};
use super::{analysis, open};
use crate::model::cases::store::Matrix;
use crate::model::present::cases as present;

/// The options of `cases run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The matrix.
    pub name: String,
    /// Run only these cases (repeatable).
    #[arg(long, value_name = "CASE")]
    pub only: Vec<String>,
    /// Python processes at once (each imports torch once and runs its share of the cases).
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub jobs: u32,
    /// Run recorded cases again: a new attempt beside the old, never over it.
    #[arg(long)]
    pub rerun: bool,
    /// The Python that runs replay_op.py (for a remote dump, the remote interpreter)
    /// [default: $DUMPVIEW_PYTHON, else $VIRTUAL_ENV's python, else the first python3/python
    /// on PATH that imports torch; remote: python3].
    #[arg(long, value_name = "PY")]
    pub python: Option<String>,
    /// The candidate's device (default: the captured one when available, else cpu).
    #[arg(long, value_name = "D")]
    pub device: Option<String>,
}

impl RunArgs {
    /// Runs the cases of the matrix NAME under `root`.
    ///
    /// # Errors
    /// The matrix cannot be opened, the run cannot start, the JSON cannot be written.
    pub fn run(&self, root: &Path, cx: &mut Context) -> Result<Conclusion, CliError> {
        use crate::model::cases::CaseOutcome;
        use crate::services::cases::{self as runner, RunEvent, RunRequest};
        use std::io::IsTerminal;
        use std::sync::atomic::Ordering;
        let json = cx.json;
        let matrix = open(root, &self.name)?;
        let ssh = cx.sources.run_options(&matrix.plan.dump)?;
        let cancel = cancel_on_signals()?;
        let cancelled = || cancel.load(Ordering::SeqCst);
        let request = RunRequest {
            matrix: matrix.clone(),
            only: self.only.clone(),
            jobs: self.jobs as usize,
            rerun: self.rerun,
            python: self.python.clone(),
            device: self.device.clone(),
        };
        let tty = !json && std::io::stderr().is_terminal();
        let clear = if tty { "\r\x1b[K" } else { "" };
        let mut on_event = |event: RunEvent| match event {
            RunEvent::Skipped(id) => {
                eprintln!(
                    "{clear}dumpview: {id}: recorded already, skipped (--rerun runs it again)"
                )
            }
            RunEvent::Started { id, index, total } => {
                if tty {
                    eprint!("{clear}[{index}/{total}] {id} …");
                }
            }
            RunEvent::Filed { id, attempt } => {
                let what = match &attempt.judged {
                    None => "interrupted: no replay.json (missing evidence)".to_string(),
                    Some(Ok(replay)) => {
                        format!("{} ({})", CaseOutcome::of(replay.verdict), replay.verdict)
                    }
                    Some(Err(e)) => format!("cannot be judged (missing evidence): {e}"),
                };
                eprintln!(
                    "{clear}dumpview: {id}: attempt {}: {what}",
                    attempt.attempt.number
                );
            }
            RunEvent::Log(line) => eprintln!("{clear}{line}"),
        };
        let report = runner::run(&request, ssh.as_ref(), &mut on_event, &cancelled)?;
        print_run(&matrix, &self.only, serde_json::to_value(&report)?, json)
    }
}

/// Prints what `cases run` did: `run` (the runner's report, as JSON) and the analysis of
/// the cases it was asked about; the outcome is the analysis's (clean when every one passes).
///
/// # Errors
/// The JSON could not be written.
pub fn print_run(
    matrix: &Matrix,
    only: &[String],
    run: serde_json::Value,
    json: bool,
) -> Result<Conclusion, CliError> {
    let only = (!only.is_empty()).then_some(only);
    let a = analysis(matrix, only);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"run": run, "analysis": a}))?
        );
    } else {
        print!("{}", present::table_text(&a));
        println!(
            "the evidence and the axes: dumpview cases analyze {}",
            matrix.plan.name
        );
    }
    Ok(if a.all_pass {
        Conclusion::Clean
    } else {
        Conclusion::Found
    })
}
