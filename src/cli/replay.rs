//! `dumpview replay DUMP --stage X[#N] --candidate OP --reference REF`: one captured input set
//! rerun through a candidate and a reference where the dump lives, judged under a standard
//! (docs/replay.md); `dumpview replay DUMP --list`: the input sets it holds.
//!
//! The run itself is a service's (`services::replay::run`, which [`ReplayArgs::run`] calls):
//! this file holds the options and prints what `model::present::replay` renders.

use std::path::PathBuf;

use super::{CliError, Conclusion};
use crate::model::present;
use crate::model::replay::{ReplayResult, Standard};

/// The options of `dumpview replay`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// The dump: a manifest, a window directory or a tree of them; on another machine
    /// `ssh://[user@]host[:port]/path` or `[user@]host:path` (replay_op.py runs there).
    #[arg(required_unless_present = "cross")]
    pub dump: Option<String>,
    /// Cross-feeding: run B's operator on A's captured inputs and A's on B's, each judged
    /// against the other side's saved output (docs/replay.md "Cross-feeding"). Exit 0 only
    /// when both reproduce (the operators agree: the inputs differ).
    #[arg(long, num_args = 2, value_names = ["A", "B"], conflicts_with_all = ["dump", "list", "device", "args", "arg_maps", "python_reference"])]
    pub cross: Vec<String>,
    /// List the captured input sets instead (stage#N, times captured, argument layouts, the
    /// recorded operator).
    #[arg(long, conflicts_with_all = ["stage", "candidate", "reference", "standard", "atol", "rtol", "out", "device", "python_reference"])]
    pub list: bool,
    /// The input set: `stage#N` (`#N` may be left out when the stage was captured once).
    #[arg(long, value_name = "STAGE[#N]", required_unless_present = "list")]
    pub stage: Option<String>,
    /// The operator under test: `module.path:function`, `path/to/file.py:function`, a dotted
    /// torch callable (`torch.ops.npu.npu_rms_norm`) or `builtin:NAME`. With --cross: runs
    /// in place of B's recorded operator.
    #[arg(long, value_name = "OP", required_unless_present_any = ["list", "cross"])]
    pub candidate: Option<String>,
    /// The reference, in the same forms (built-ins: rms_norm, add_rms_norm, layer_norm,
    /// softmax, silu_and_mul, gelu, gelu_tanh, rope_neox, rope_gptj, linear, sdpa,
    /// sdpa_causal, matmul). With --cross: optional, both runs are also judged against it.
    #[arg(long, value_name = "REF", required_unless_present_any = ["list", "cross"])]
    pub reference: Option<String>,
    /// The verdict's standard: msprobe (msprobe's single-device API accuracy rule), dynamo
    /// (torch._dynamo.utils.same: RMSE against float64) or allclose (give --atol and --rtol).
    #[arg(long, value_name = "S", value_parser = Standard::NAMES)]
    pub standard: Option<String>,
    /// allclose only: the absolute tolerance of |c - r| <= atol + rtol*|r|.
    #[arg(long, value_name = "A", allow_negative_numbers = true)]
    pub atol: Option<f64>,
    /// allclose only: the relative tolerance.
    #[arg(long, value_name = "R", allow_negative_numbers = true)]
    pub rtol: Option<f64>,
    /// The window's rank in a multi-rank dump.
    #[arg(long, value_name = "R")]
    pub rank: Option<u32>,
    /// The window (label or match number) in a multi-window dump.
    #[arg(long, value_name = "W")]
    pub window: Option<String>,
    /// The device to run on (default: the captured one when available, else cpu).
    #[arg(long, value_name = "D")]
    pub device: Option<String>,
    /// The Python that runs replay_op.py; for a remote dump, the remote interpreter
    /// [default: $DUMPVIEW_PYTHON, else the interpreter the capture recorded when it is
    /// here, else $VIRTUAL_ENV's, else the first python3/python on PATH that imports torch;
    /// remote: python3]. --list of a local dump runs no Python.
    #[arg(long, value_name = "PY")]
    pub python: Option<String>,
    /// Where the outputs go (a new or empty directory; never inside the dump)
    /// [default: a new directory under $XDG_CACHE_HOME/dumpview/replays/].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Override a scalar argument, e.g. --arg eps=1e-5 (repeatable).
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    pub args: Vec<String>,
    /// Pass a captured argument under another parameter name, e.g. --arg-map x=input
    /// (repeatable).
    #[arg(long = "arg-map", value_name = "CAPTURED=PARAM")]
    pub arg_maps: Vec<String>,
    /// Compute a builtin: reference in replay_op.py too. A dumpview built with the cargo
    /// feature torch otherwise computes it in-process (libtorch) for a local dump; other
    /// builds always run it in replay_op.py.
    #[arg(long)]
    pub python_reference: bool,
}

impl ReplayArgs {
    /// The standard the options name.
    ///
    /// # Errors
    /// `--atol`/`--rtol` without `--standard allclose`, or allclose without both.
    pub fn standard(&self) -> Result<Standard, CliError> {
        Ok(Standard::from_args(
            self.standard.as_deref(),
            self.atol,
            self.rtol,
        )?)
    }

    /// Checks the `NAME=VALUE` forms of `--arg` and `--arg-map`.
    ///
    /// # Errors
    /// One without `=` or with an empty name.
    pub fn check(&self) -> Result<(), CliError> {
        for (flag, values) in [("--arg", &self.args), ("--arg-map", &self.arg_maps)] {
            for value in values {
                match value.split_once('=') {
                    Some((name, _)) if !name.is_empty() => {}
                    _ => return Err(format!("{flag} {value:?}: expected NAME=VALUE").into()),
                }
            }
        }
        Ok(())
    }
}

/// Prints `result` (text, or one JSON object) and returns the outcome: `Clean` for pass and
/// warning, `Found` for error, crash and unsupported.
///
/// # Errors
/// The JSON could not be written.
pub fn print(result: &ReplayResult, json: bool) -> Result<Conclusion, CliError> {
    if json {
        println!("{}", serde_json::to_string_pretty(result)?);
    } else {
        print!("{}", present::replay::render(result));
    }
    Ok(if result.replay.is_finding() {
        Conclusion::Found
    } else {
        Conclusion::Clean
    })
}

/// Prints a listing of a local dump (text, or its document with `warnings`) and returns
/// `Found` when an input set was lost (a 0-byte file), else `Clean`.
///
/// # Errors
/// The JSON could not be written.
fn print_listing(
    listing: &crate::services::replay_list::Listing,
    json: bool,
) -> Result<Conclusion, CliError> {
    #[derive(serde::Serialize)]
    struct Document<'a> {
        #[serde(flatten)]
        document: &'a present::replay_list::ListDocument,
        warnings: &'a [crate::model::dump::Warning],
    }
    if json {
        let document = Document {
            document: &listing.document,
            warnings: &listing.warnings,
        };
        println!("{}", serde_json::to_string_pretty(&document)?);
    } else {
        print!("{}", present::replay_list::render_list(&listing.document));
        for warning in &listing.warnings {
            eprintln!("dumpview: warning: {}", warning.message);
        }
    }
    Ok(match crate::model::dump::any_lost(&listing.warnings) {
        true => Conclusion::Found,
        false => Conclusion::Clean,
    })
}

impl ReplayArgs {
    /// `dumpview replay`: runs the replay where the dump lives (`services::replay`),
    /// streaming replay_op.py's log to stderr; SIGINT, SIGTERM and SIGHUP cancel it (the
    /// child process, or the remote side, is killed and its directory removed).
    ///
    /// # Errors
    /// Refused options, a replay that cannot run.
    pub fn run(&self, cx: &mut super::Context) -> Result<Conclusion, CliError> {
        use crate::services::replay::{self as runner, ListRequest, ReplayRequest};
        use std::sync::atomic::Ordering;
        let (attempts, json) = (&cx.attempts, cx.json);
        self.check()?;
        if attempts.attempt_a.is_some() || attempts.attempt_b.is_some() {
            return Err(
                "--attempt-a/--attempt-b pick the attempt of one side of a comparison; \
                    replay reads one dump: give --attempt N"
                    .into(),
            );
        }
        if !self.cross.is_empty() {
            return self.run_cross(cx);
        }
        let dump = self
            .dump
            .clone()
            .expect("clap requires DUMP without --cross");
        // No exit cleanup for these signals here: they cancel the replay, which then ends its
        // connection on the way out (and the kernel kills its ssh if dumpview dies).
        let ssh = cx.sources.run_options(&dump)?;
        let cancel = super::cancel_on_signals()?;
        let cancelled = || cancel.load(Ordering::SeqCst);
        let mut log = |line: &str| eprintln!("{line}");
        if self.list {
            let request = ListRequest {
                dump: dump.clone(),
                rank: self.rank,
                window: self.window.clone(),
                attempt: attempts.attempt,
                python: self.python.clone(),
                json,
            };
            if ssh.is_none() {
                return print_listing(&runner::list_here(&request, &mut log)?, json);
            }
            // A remote dump: replay_op.py lists it there (docs/replay.md).
            let listed = runner::list(&request, ssh.as_ref(), &mut log, &cancelled)?;
            match json {
                // replay_op.py's document, with the `warnings` every --json document carries.
                true => match serde_json::from_str(&listed) {
                    Ok(document) => println!("{}", super::with_warnings(document)),
                    Err(_) => print!("{listed}"),
                },
                false => print!("{listed}"),
            }
            return Ok(Conclusion::Clean);
        }
        let request = ReplayRequest {
            dump,
            stage: self.stage.clone().expect("clap requires --stage"),
            candidate: self.candidate.clone().expect("clap requires --candidate"),
            reference: self.reference.clone().expect("clap requires --reference"),
            standard: self.standard()?,
            rank: self.rank,
            window: self.window.clone(),
            attempt: attempts.attempt,
            device: self.device.clone(),
            python: self.python.clone(),
            out: self.out.clone(),
            args: self.args.clone(),
            arg_maps: self.arg_maps.clone(),
            python_reference: self.python_reference,
            import_path: Vec::new(),
        };
        let result = runner::run(&request, ssh.as_ref(), &mut log, &cancelled)?;
        print(&result, json)
    }
}

impl ReplayArgs {
    /// `dumpview replay --cross A B --stage S#N`: both directions run and judged
    /// (`services::cross`), printed as `model::present::cross` renders them. `Clean` only
    /// when the operators agree on both sides' inputs.
    ///
    /// # Errors
    /// Refused options, a dump or stage that is not there, a run that failed.
    pub fn run_cross(&self, cx: &mut super::Context) -> Result<Conclusion, CliError> {
        use crate::services::cross::{self, CrossRequest};
        use std::sync::atomic::Ordering;
        let attempts = &cx.attempts;
        if attempts.attempt_a.is_some() || attempts.attempt_b.is_some() {
            return Err("--cross reads the same attempt on both sides: give --attempt N".into());
        }
        let (a, b) = (self.cross[0].clone(), self.cross[1].clone());
        let ssh_a = cx.sources.run_options(&a)?;
        let ssh_b = cx.sources.run_options(&b)?;
        let cancel = super::cancel_on_signals()?;
        let cancelled = || cancel.load(Ordering::SeqCst);
        let mut log = |line: &str| eprintln!("{line}");
        let request = CrossRequest {
            a,
            b,
            stage: self.stage.clone().expect("clap requires --stage"),
            candidate: self.candidate.clone(),
            reference: self.reference.clone(),
            standard: self.standard()?,
            rank: self.rank,
            window: self.window.clone(),
            attempt: attempts.attempt,
            python: self.python.clone(),
            out: self.out.clone(),
        };
        let result = cross::run(
            &request,
            ssh_a.as_ref(),
            ssh_b.as_ref(),
            &mut log,
            &cancelled,
        )?;
        if cx.json {
            println!("{}", serde_json::to_string_pretty(&result)?);
        } else {
            print!("{}", present::cross::render(&result));
        }
        Ok(if result.outcome.is_finding() {
            Conclusion::Found
        } else {
            Conclusion::Clean
        })
    }
}
