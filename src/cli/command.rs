//! The command line: the top-level options (the workbench's and the global ones), the
//! subcommands, and how captures on other machines are reached. Each subcommand's options
//! and its `run` live in its own file of `cli`.

use std::path::PathBuf;

use super::diff::ToleranceArgs;
use super::workbench::WorkbenchArgs;
use super::{Context, inputs};
use crate::services::sources::{self, Reach, Sources};

/// Subcommands to which no global option applies: their help leaves the global options out.
/// They still parse there (`probe` refuses `--json` itself, naming it).
const WITHOUT_GLOBALS: &[&str] = &["probe", "completions"];

/// The command line as [`Args`] derives it, with the global options hidden from the help of
/// the subcommands in [`WITHOUT_GLOBALS`] (clap propagates a global option to a subcommand
/// only where the subcommand lacks one of that id: a hidden copy takes its place).
pub fn command() -> clap::Command {
    let top = <Args as clap::CommandFactory>::command();
    let hidden: Vec<clap::Arg> = top
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.clone().hide(true))
        .collect();
    WITHOUT_GLOBALS.iter().fold(top, |top, name| {
        top.mut_subcommand(name, |sub| sub.args(hidden.clone()))
    })
}

/// Find where the numbers of a model run first go wrong.
///
/// `dumpview A` opens the terminal workbench on capture A (scan mode), `dumpview A B`
/// on two captures (diff mode); with nothing given it opens an example pair built into
/// the binary. A capture is a manifest written by dump_probe.py, or a directory searched
/// for manifest.json files; on another machine, `ssh://[user@]host[:port]/path` or
/// `[user@]host:path` (read through ssh into a local cache). Subcommands answer the same
/// questions headless.
#[derive(clap::Parser)]
// Not `args_conflicts_with_subcommands`: with it a global option before the subcommand
// (`dumpview --json scan A`) made the subcommand's name read as a capture. The workbench's own
// options are refused with a subcommand instead
// (`WorkbenchArgs::refuse_beside`).
#[command(version, after_help = EXAMPLES)]
pub struct Args {
    /// The subcommand; none opens the workbench.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Captures to open in the workbench: A, or A and B.
    #[arg(num_args = 0..=2, value_name = "CAPTURE")]
    pub captures: Vec<PathBuf>,
    /// The diff's tolerances, as `dumpview diff` takes them (the workbench's diff mode).
    #[command(flatten)]
    pub tolerance: ToleranceArgs,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Follow SOURCE in the workbench as dumps land (repeat for several; they merge into one
    /// capture). Not with positional captures.
    #[arg(long, value_name = "SOURCE", conflicts_with = "captures")]
    pub watch: Vec<String>,
    /// With --watch: diff mode against this capture, itself followed.
    #[arg(long, value_name = "SOURCE", requires = "watch")]
    pub vs: Option<String>,
    /// The workbench leaves stages whose name matches REGEX out of both captures, as
    /// `dumpview scan/diff/report --ignore` does (a note per window lists what).
    #[arg(long, value_name = "REGEX", conflicts_with = "watch")]
    pub ignore: Option<String>,
    // The flattened groups last: each sets the help heading of the options after it.
    #[command(flatten)]
    pub attempts: inputs::AttemptArgs,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// How captures on other machines (`ssh://host/path`, `host:path`) are reached
/// (docs/remote.md).
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Remote captures (host:path, ssh://host/path; every subcommand)")]
pub struct RemoteArgs {
    /// The ssh program and its options for remote captures, split like a shell would (e.g.
    /// "ssh -F ~/.ssh/gpu_config"); default: $DUMPVIEW_SSH, else ssh.
    #[arg(long, global = true, value_name = "CMD")]
    pub ssh_command: Option<String>,
    /// Trust a remote host's key the first time it is seen, recording it in known_hosts
    /// (StrictHostKeyChecking=accept-new); a changed key is still refused.
    #[arg(long, global = true)]
    pub accept_new_host_key: bool,
    /// The local cache of remote captures [default: $XDG_CACHE_HOME/dumpview/remote].
    #[arg(long, global = true, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// The cache's cap, e.g. 2G or 500M; least recently used files go first [default: 2G].
    #[arg(long, global = true, value_name = "SIZE", value_parser = sources::parse_size)]
    pub cache_size: Option<u64>,
    /// Seconds between two listings of a watched remote source [default: 1].
    #[arg(long, global = true, value_name = "S", value_parser = parse_poll)]
    pub poll: Option<std::time::Duration>,
}

impl RemoteArgs {
    /// The options as the services take them.
    pub fn reach(self) -> Reach {
        Reach {
            ssh_command: self.ssh_command,
            accept_new_host_key: self.accept_new_host_key,
            cache_dir: self.cache_dir,
            cache_size: self.cache_size,
            poll: self.poll,
        }
    }
}

impl Args {
    /// The subcommand, the workbench's options, and what every subcommand is handed (the
    /// remote sources not mapped yet).
    pub fn split(self) -> (Option<Command>, WorkbenchArgs, Context) {
        let workbench = WorkbenchArgs {
            captures: self.captures,
            tolerance: self.tolerance,
            watch: self.watch,
            vs: self.vs,
            ignore: inputs::IgnoreArgs {
                ignore: self.ignore,
            },
        };
        let cx = Context {
            json: self.json,
            attempts: self.attempts,
            sources: Sources::new(self.remote.reach(), self.json),
        };
        (self.command, workbench, cx)
    }
}

fn parse_poll(text: &str) -> Result<std::time::Duration, String> {
    text.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(std::time::Duration::from_secs_f64)
        .ok_or_else(|| format!("{text:?}: not a number of seconds above 0"))
}

const EXAMPLES: &str = "\
Examples:
  dumpview                                   the workbench on an embedded example pair
  dumpview run_fp32/ run_bf16/               the workbench on two captures
  dumpview --rtol 1e-3 run_fp32/ run_bf16/   the same under other tolerances
  dumpview scan dump_a/                      first non-finite record and storage aliases
  dumpview diff dump_fp32/ dump_bf16/        where two captures first diverge
  dumpview diff a.json b.json --rtol 1e-3 --tol mean=1e-4:1e-7
  dumpview tensors a/tensors/x#1.safetensors b/tensors/x#1.safetensors --atol 1e-3
  dumpview tensors saved_a/ saved_b/         every tensor file of two trees, by relative path
  dumpview vary run1/ run2/ run3/            which stage varies between repeated captures
  dumpview report dump_a/ dump_b/ -o first_mismatch.md
  dumpview replay dump_b/ --list             the captured operator input sets
  dumpview replay dump_b/ --stage layers.0.rope#1 --candidate my_ops:rope --reference builtin:rope_neox
  dumpview cases plan norm --from dump_b/ --stage layers.0.input_norm#1 --candidate my_ops:rms_norm \\
      --reference builtin:rms_norm --axis dtype=float16,bfloat16 --axis layout[x]=transposed,strided
  dumpview cases run norm && dumpview cases analyze norm -o norm.md
  dumpview scan gpu1:/data/dump/             a capture on another machine, through ssh
  dumpview diff ssh://me@gpu1:2222/data/a gpu2:runs/b
  dumpview probe install my_pkg/             write my_pkg/dump_probe.py and replay_op.py
  dumpview completions bash > /etc/bash_completion.d/dumpview

Exit status: 0 nothing found; 1 something found (a non-finite record, a stride conflict,
a divergence, an input-identity mismatch, a missing window; a replay's error, crash or
unsupported verdict); 2 usage or input error.";

/// The subcommands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Open the workbench on an embedded example pair (the default with no arguments).
    Demo(super::demo::DemoArgs),
    /// Per window: storage aliases (stride conflicts first) and the first non-finite record.
    Scan(super::scan::ScanArgs),
    /// Connect the findings into one answer: writer → address → reader, operator or inputs,
    /// origin and downstream, the rank and the collective; and the next cheapest experiment
    /// with its exact command (docs/diagnosis.md).
    Diagnose(super::diagnose::DiagnoseArgs),
    /// Pair two captures by rank, window and stage#occurrence; report coverage, input
    /// identity and the first divergence.
    Diff(super::diff::DiffArgs),
    /// Run-to-run variability of repeated captures of one request: per-stage spread of
    /// each statistic and the first stage that varies.
    Vary(super::vary::VaryArgs),
    /// The first-mismatch report (Markdown, or JSON for `-o x.json` / `--json`): inputs,
    /// identity, coverage, first non-finite, first divergence, alias suspects, evidence.
    Report(super::report::ReportArgs),
    /// Replay one captured operator input set through a candidate and a reference, judged.
    ///
    /// Runs assets/replay_op.py where the dump lives (here or over ssh) and judges each output
    /// under a standard: msprobe's single-device rule (default), dynamo's RMSE rule, or
    /// allclose (docs/replay.md). Exit 0 pass or warning, 1 error, crash or unsupported,
    /// 2 usage or input error.
    Replay(super::replay::ReplayArgs),
    /// The operator case matrix on one captured input set: plan cases (the baseline with one
    /// axis changed: dtype, layout, shape, mode, an option), run them through replay_op.py
    /// --batch, record results by hand, analyze which axis the failures follow, export a
    /// regression test (docs/cases.md).
    Cases(super::cases::CasesArgs),
    /// Compare two saved tensor files (.pt or safetensors) key by key: max_abs_diff and
    /// where, mean_abs_diff, cosine, rel_l2, allclose, first mismatch, non-finite positions,
    /// max ULP, |a-b| histogram; or two directories: every tensor file by relative path, as
    /// a table, with the files of one side only.
    Tensors(super::tensors::TensorArgs),
    /// What each window holds: records, stages, saved tensors, first non-finite.
    Summary(super::summary::SummaryArgs),
    /// Follow dump directories as they are written: each window, its first non-finite
    /// record, stride conflicts and (with --vs) its first divergence, as events on stdout
    /// (one JSON object per line with --json), until interrupted.
    Watch(super::watch::WatchArgs),
    /// The capture probes: assets/dump_probe.py, or with `install --native` the C-ABI library
    /// (docs/native_probe.md).
    Probe(super::probe_install::ProbeArgs),
    /// Print a shell completion script.
    Completions(super::completions::CompletionsArgs),
}
