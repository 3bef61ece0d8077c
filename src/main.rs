//! The `dumpview` binary: argument parsing and exit status; the work lives in the library.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dumpview::cli::{self, Outcome, diff::ToleranceArgs};
use dumpview::remote;
use dumpview::services::sources::{Reach, Sources};

/// Find where the numbers of a model run first go wrong.
///
/// `dumpview A` opens the terminal workbench on capture A (scan mode), `dumpview A B`
/// on two captures (diff mode); with nothing given it opens an example pair built into
/// the binary. A capture is a manifest written by dump_probe.py, or a directory searched
/// for manifest.json files; on another machine, `ssh://[user@]host[:port]/path` or
/// `[user@]host:path` (read through ssh into a local cache). Subcommands answer the same
/// questions headless.
#[derive(Parser)]
// Not `args_conflicts_with_subcommands`: with it a global option before the subcommand
// (`dumpview --json scan A`) made the subcommand's name read as a capture. The workbench's own
// options are refused with a subcommand in `main` instead.
#[command(version, after_help = EXAMPLES)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Captures to open in the workbench: A, or A and B.
    #[arg(num_args = 0..=2, value_name = "CAPTURE")]
    captures: Vec<PathBuf>,
    /// The diff's tolerances, as `dumpview diff` takes them (the workbench's diff mode).
    #[command(flatten)]
    tolerance: ToleranceArgs,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Follow SOURCE in the workbench as dumps land (repeat for several; they merge into one
    /// capture). Not with positional captures.
    #[arg(long, value_name = "SOURCE", conflicts_with = "captures")]
    watch: Vec<String>,
    /// With --watch: diff mode against this capture, itself followed.
    #[arg(long, value_name = "SOURCE", requires = "watch")]
    vs: Option<String>,
    /// The workbench leaves stages whose name matches REGEX out of both captures, as
    /// `dumpview scan/diff/report --ignore` does (a note per window lists what).
    #[arg(long, value_name = "REGEX", conflicts_with = "watch")]
    ignore: Option<String>,
    // The flattened groups last: each sets the help heading of the options after it.
    #[command(flatten)]
    attempts: cli::inputs::AttemptArgs,
    #[command(flatten)]
    remote: RemoteArgs,
}

/// How captures on other machines (`ssh://host/path`, `host:path`) are reached
/// (docs/remote.md).
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Remote captures (host:path, ssh://host/path; every subcommand)")]
struct RemoteArgs {
    /// The ssh program and its options for remote captures, split like a shell would (e.g.
    /// "ssh -F ~/.ssh/gpu_config"); default: $DUMPVIEW_SSH, else ssh.
    #[arg(long, global = true, value_name = "CMD")]
    ssh_command: Option<String>,
    /// Trust a remote host's key the first time it is seen, recording it in known_hosts
    /// (StrictHostKeyChecking=accept-new); a changed key is still refused.
    #[arg(long, global = true)]
    accept_new_host_key: bool,
    /// The local cache of remote captures [default: $XDG_CACHE_HOME/dumpview/remote].
    #[arg(long, global = true, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// The cache's cap, e.g. 2G or 500M; least recently used files go first [default: 2G].
    #[arg(long, global = true, value_name = "SIZE", value_parser = remote::parse_size)]
    cache_size: Option<u64>,
    /// Seconds between two listings of a watched remote source [default: 1].
    #[arg(long, global = true, value_name = "S", value_parser = parse_poll)]
    poll: Option<std::time::Duration>,
}

impl RemoteArgs {
    fn reach(self) -> Reach {
        Reach {
            ssh_command: self.ssh_command,
            accept_new_host_key: self.accept_new_host_key,
            cache_dir: self.cache_dir,
            cache_size: self.cache_size,
            poll: self.poll,
        }
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

#[derive(Subcommand)]
enum Command {
    /// Open the workbench on an embedded example pair (the default with no arguments).
    Demo {
        /// Which pair (see --list).
        #[arg(long, default_value = DEFAULT_EXAMPLE)]
        pair: String,
        /// Print the embedded pairs and their known answers instead.
        #[arg(long)]
        list: bool,
        #[command(flatten)]
        tolerance: ToleranceArgs,
    },
    /// Per window: storage aliases (stride conflicts first) and the first non-finite record.
    Scan {
        /// Manifest files or directories holding them (all ranks and windows).
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        #[command(flatten)]
        ignore: cli::inputs::IgnoreArgs,
    },
    /// Pair two captures by rank, window and stage#occurrence; report coverage, input
    /// identity and the first divergence.
    Diff {
        /// Capture A: a manifest file or a directory.
        a: PathBuf,
        /// Capture B: a manifest file or a directory.
        b: PathBuf,
        #[command(flatten)]
        tolerance: ToleranceArgs,
        #[command(flatten)]
        ignore: cli::inputs::IgnoreArgs,
    },
    /// Run-to-run variability of repeated captures of one request: per-stage spread of
    /// each statistic and the first stage that varies.
    Vary {
        /// Two or more captures (manifest files or directories) of the same request.
        #[arg(required = true, num_args = 2..)]
        captures: Vec<PathBuf>,
        /// Spreads up to this (relative to each statistic's scale) are noise.
        #[arg(long, default_value_t = dumpview::model::analysis::vary::DEFAULT_THRESHOLD)]
        threshold: f64,
    },
    /// The first-mismatch report (Markdown, or JSON for `-o x.json` / `--json`): inputs,
    /// identity, coverage, first non-finite, first divergence, alias suspects, evidence.
    Report {
        /// Capture A.
        a: PathBuf,
        /// Capture B (optional: without it, the report covers A's scan).
        b: Option<PathBuf>,
        /// Write the report here (never printed then); `.json` selects JSON.
        #[arg(short, long)]
        output: Option<PathBuf>,
        #[command(flatten)]
        table: cli::report::TableArgs,
        #[command(flatten)]
        tolerance: ToleranceArgs,
        /// A replay output directory to list under "Replays" (repeatable; written by
        /// `dumpview replay`, judged again by the standard its verdict.json names).
        #[arg(long = "replay", value_name = "DIR")]
        replays: Vec<PathBuf>,
        #[command(flatten)]
        ignore: cli::inputs::IgnoreArgs,
    },
    /// Replay one captured operator input set through a candidate and a reference, judged.
    ///
    /// Runs assets/replay_op.py where the dump lives (here or over ssh) and judges each output
    /// under a standard: msprobe's single-device rule (default), dynamo's RMSE rule, or
    /// allclose (docs/replay.md). Exit 0 pass or warning, 1 error, crash or unsupported,
    /// 2 usage or input error.
    Replay(cli::replay::ReplayArgs),
    /// The operator case matrix on one captured input set: plan cases (the baseline with one
    /// axis changed: dtype, layout, shape, mode, an option), run them through replay_op.py
    /// --batch, record results by hand, analyze which axis the failures follow, export a
    /// regression test (docs/cases.md).
    Cases(cli::cases::CasesArgs),
    /// Compare two saved tensor files (.pt or safetensors) key by key: max_abs_diff and
    /// where, mean_abs_diff, cosine, rel_l2, allclose, first mismatch, non-finite positions,
    /// max ULP, |a-b| histogram.
    Tensors(cli::tensors::TensorArgs),
    /// What each window holds: records, stages, saved tensors, first non-finite.
    Summary {
        /// Manifest files (dump_probe.py, msprobe dump.json, windowed) or directories of them.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Follow dump directories as they are written: each window, its first non-finite
    /// record, stride conflicts and (with --vs) its first divergence, as events on stdout
    /// (one JSON object per line with --json), until interrupted.
    Watch {
        /// Directories (or manifests) to follow; several merge into one capture.
        #[arg(required = true, value_name = "SOURCE")]
        sources: Vec<String>,
        /// Compare against this capture (itself followed): first_divergence events.
        #[arg(long, value_name = "SOURCE")]
        vs: Option<String>,
        /// Stop at the first finding (exit 1).
        #[arg(long)]
        until_finding: bool,
        /// Stop after S seconds.
        #[arg(long, value_name = "S")]
        timeout: Option<f64>,
        #[command(flatten)]
        tolerance: ToleranceArgs,
    },
    /// The capture probes: assets/dump_probe.py, or with `install --native` the C-ABI library
    /// (docs/native_probe.md).
    Probe {
        #[command(subcommand)]
        action: ProbeAction,
    },
    /// Print a shell completion script.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

#[derive(Subcommand)]
enum ProbeAction {
    /// Write dump_probe.py and replay_op.py into DIR (never replaces an existing file).
    Install {
        /// An existing directory to write into, e.g. the package of the code under test.
        dir: PathBuf,
        /// Write the native probe instead: dump_probe.h and libdump_probe.so (the library found
        /// beside this dumpview; docs/native_probe.md).
        #[arg(long)]
        native: bool,
    },
}

/// The pair the workbench opens with no arguments: a non-finite record and a divergence.
const DEFAULT_EXAMPLE: &str = "llama_fp16_overflow";

/// True when any tolerance option was given.
fn tolerances_given(tolerance: &ToleranceArgs) -> bool {
    tolerance.rtol.is_some() || tolerance.atol.is_some() || !tolerance.per_stat.is_empty()
}

fn workbench(
    source: dumpview::runtime::Source,
    tolerance: &ToleranceArgs,
    ignore: &cli::inputs::IgnoreArgs,
    attempts: &cli::inputs::AttemptArgs,
    json: bool,
) -> Result<Outcome, cli::CliError> {
    use std::io::IsTerminal;
    let tolerances = tolerance.tolerances()?;
    // A bad pattern is an input error, said before the terminal is taken.
    if let Some(pattern) = &ignore.ignore {
        regex::Regex::new(pattern)
            .map_err(|e| format!("--ignore {pattern:?} is not a valid regular expression: {e}"))?;
    }
    if tolerances_given(tolerance)
        && matches!(&source, dumpview::runtime::Source::Files { b: None, .. })
    {
        return Err(
            "--rtol, --atol and --tol compare two captures: give A and B (`dumpview A` scans one)"
                .into(),
        );
    }
    // Input errors are found before the terminal is taken, so they reach stderr and exit 2.
    match &source {
        dumpview::runtime::Source::Files { a, b, .. } => {
            let inputs: Vec<PathBuf> = std::iter::once(a.clone()).chain(b.clone()).collect();
            dumpview::model::ingest::discover(&inputs)?;
        }
        dumpview::runtime::Source::Example(name) => {
            let pairs = dumpview::embedded::example_pairs();
            if !pairs.iter().any(|p| &p.name == name) {
                let names: Vec<&str> = pairs.iter().map(|p| p.name.as_str()).collect();
                return Err(
                    format!("no embedded example {name:?}; one of: {}", names.join(", ")).into(),
                );
            }
        }
    }
    if json || !std::io::stdout().is_terminal() {
        // No terminal to draw on (a pipe, a script): the same answers as text.
        return match source {
            dumpview::runtime::Source::Files { a, b: None, .. } => {
                cli::scan::run(&[a], attempts, ignore, json)
            }
            dumpview::runtime::Source::Files { a, b: Some(b), .. } => {
                cli::diff::run(&a, &b, tolerance, attempts, ignore, json)
            }
            dumpview::runtime::Source::Example(_) => cli::summary::run_embedded(json),
        };
    }
    dumpview::runtime::run(source, tolerances)?;
    Ok(Outcome::Clean)
}

fn main() -> ExitCode {
    // Like other Unix tools, end quietly when the reader of stdout goes away (`| head`)
    // instead of failing the next write and panicking in println!.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args = Args::parse();
    let json = args.json;
    let attempts = args.attempts;
    // Declared before everything that reads the captures, so it is dropped last: its
    // mirrors' ssh masters end when main returns.
    let mut sources = Sources::new(args.remote.reach(), json);
    let workbench_only = !args.captures.is_empty()
        || !args.watch.is_empty()
        || args.ignore.is_some()
        || args.vs.is_some()
        || args.tolerance.rtol.is_some()
        || args.tolerance.atol.is_some()
        || !args.tolerance.per_stat.is_empty();
    let result = if args.command.is_some() && workbench_only {
        Err(
            "CAPTURE, --rtol, --atol, --tol, --ignore, --watch and --vs before a subcommand are \
             the workbench's; give a subcommand's own after its name (`dumpview diff --rtol 1e-3 A B`)"
                .into(),
        )
    } else if args.vs.is_some() && args.watch.is_empty() {
        Err(
            "--vs compares followed captures (with --watch); for two captures give them as A B"
                .into(),
        )
    } else if args.watch.is_empty() {
        run(
            args.command,
            &args.captures,
            &args.tolerance,
            &cli::inputs::IgnoreArgs {
                ignore: args.ignore.clone(),
            },
            &attempts,
            json,
            &mut sources,
        )
    } else {
        let request = WatchRequest {
            sources: &args.watch,
            vs: args.vs.as_deref(),
            until_finding: false,
            timeout: None,
            tolerance: &args.tolerance,
        };
        watch_workbench(&request, &attempts, json, &mut sources)
    };
    let code = finish(result, json);
    drop(sources);
    // A watch's followers still hold their mirrors (their threads outlive main's return):
    // end every master and remove the control directory here, whatever holds them.
    dumpview::services::sources::shutdown();
    code
}

fn run(
    command: Option<Command>,
    captures: &[PathBuf],
    tolerance: &ToleranceArgs,
    ignore: &cli::inputs::IgnoreArgs,
    attempts: &cli::inputs::AttemptArgs,
    json: bool,
    sources: &mut Sources,
) -> Result<Outcome, cli::CliError> {
    let attempts = *attempts;
    let command = match (command, captures) {
        (Some(command), _) => command,
        (None, []) => Command::Demo {
            pair: DEFAULT_EXAMPLE.to_string(),
            list: false,
            tolerance: tolerance.clone(),
        },
        (None, [a]) => {
            let source = dumpview::runtime::Source::Files {
                a: sources.local(a)?,
                b: None,
                attempt_a: attempts.side(0),
                attempt_b: attempts.side(1),
                ignore: ignore.ignore.clone(),
            };
            // A remote capture's saved tensors come when `t` needs them.
            let _fetching = sources.fetcher().map(dumpview::services::fetch::register);
            return workbench(source, tolerance, ignore, &attempts, json);
        }
        (None, [a, b, ..]) => {
            let source = dumpview::runtime::Source::Files {
                a: sources.local(a)?,
                b: Some(sources.local(b)?),
                attempt_a: attempts.side(0),
                attempt_b: attempts.side(1),
                ignore: ignore.ignore.clone(),
            };
            let _fetching = sources.fetcher().map(dumpview::services::fetch::register);
            return workbench(source, tolerance, ignore, &attempts, json);
        }
    };
    match command {
        Command::Demo { list: true, .. } => cli::summary::run_embedded(json),
        Command::Demo {
            pair,
            list: false,
            tolerance,
        } => workbench(
            dumpview::runtime::Source::Example(pair),
            &tolerance,
            &Default::default(),
            &attempts,
            json,
        ),
        Command::Scan { inputs, ignore } => {
            cli::scan::run(&sources.locals(&inputs)?, &attempts, &ignore, json)
        }
        Command::Tensors(mut args) => {
            args.a = sources.local(&args.a)?;
            args.b = sources.local(&args.b)?;
            cli::tensors::run(&args, json)
        }
        Command::Diff {
            a,
            b,
            tolerance,
            ignore,
        } => cli::diff::run(
            &sources.local(&a)?,
            &sources.local(&b)?,
            &tolerance,
            &attempts,
            &ignore,
            json,
        ),
        Command::Vary {
            captures,
            threshold,
        } => cli::vary::run(&sources.locals(&captures)?, threshold, &attempts, json),
        Command::Replay(args) => replay(&args, &attempts, json, sources),
        Command::Cases(args) => cases(&args, &attempts, json, sources),
        Command::Report {
            a,
            b,
            output,
            table,
            tolerance,
            replays,
            ignore,
        } => {
            let a = sources.local(&a)?;
            let b = b.map(|b| sources.local(&b)).transpose()?;
            let captures = cli::report::Captures {
                a: &a,
                b: b.as_deref(),
                fetch: &mut |file| sources.fetch(file),
                replays: &replays,
            };
            cli::report::run(
                captures,
                output.as_deref(),
                &table,
                &tolerance,
                &attempts,
                &ignore,
                json,
            )
        }
        Command::Watch {
            sources: watched,
            vs,
            until_finding,
            timeout,
            tolerance,
        } => watch(
            &WatchRequest {
                sources: &watched,
                vs: vs.as_deref(),
                until_finding,
                timeout,
                tolerance: &tolerance,
            },
            &attempts,
            json,
            sources,
        ),
        Command::Summary { files } => cli::summary::run(&sources.locals(&files)?, &attempts, json),
        // Nothing to say in JSON: refused rather than ignored.
        Command::Probe { .. } | Command::Completions { .. } if json => {
            Err("--json is not supported by `probe install` and `completions`".into())
        }
        Command::Probe {
            action: ProbeAction::Install { dir, native },
        } => cli::probe_install::run(&dir, native).map(|paths| {
            for path in paths {
                println!("wrote {}", path.display());
            }
            Outcome::Clean
        }),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(
                shell,
                &mut Args::command(),
                "dumpview",
                &mut std::io::stdout(),
            );
            Ok(Outcome::Clean)
        }
    }
}

/// `dumpview replay`: runs the replay where the dump lives (`services::replay`), streaming
/// replay_op.py's log to stderr; SIGINT, SIGTERM and SIGHUP cancel it (the child process,
/// or the remote side, is killed and its directory removed).
fn replay(
    args: &cli::replay::ReplayArgs,
    attempts: &cli::inputs::AttemptArgs,
    json: bool,
    sources: &mut Sources,
) -> Result<Outcome, cli::CliError> {
    use dumpview::services::replay::{self as runner, ListRequest, ReplayRequest};
    use std::sync::atomic::Ordering;
    args.check()?;
    if attempts.attempt_a.is_some() || attempts.attempt_b.is_some() {
        return Err(
            "--attempt-a/--attempt-b pick the attempt of one side of a comparison; \
                    replay reads one dump: give --attempt N"
                .into(),
        );
    }
    // No exit cleanup for these signals here: they cancel the replay, which then ends its
    // connection on the way out (and the kernel kills its ssh if dumpview dies).
    let ssh = sources.run_options(&args.dump)?;
    let cancel = cancel_on_signals()?;
    let cancelled = || cancel.load(Ordering::SeqCst);
    let mut log = |line: &str| eprintln!("{line}");
    if args.list {
        let request = ListRequest {
            dump: args.dump.clone(),
            rank: args.rank,
            window: args.window.clone(),
            attempt: attempts.attempt,
            python: args.python.clone(),
            json,
        };
        print!(
            "{}",
            runner::list(&request, ssh.as_ref(), &mut log, &cancelled)?
        );
        return Ok(Outcome::Clean);
    }
    let request = ReplayRequest {
        dump: args.dump.clone(),
        stage: args.stage.clone().expect("clap requires --stage"),
        candidate: args.candidate.clone().expect("clap requires --candidate"),
        reference: args.reference.clone().expect("clap requires --reference"),
        standard: args.standard()?,
        rank: args.rank,
        window: args.window.clone(),
        attempt: attempts.attempt,
        device: args.device.clone(),
        python: args.python.clone(),
        out: args.out.clone(),
        args: args.args.clone(),
        arg_maps: args.arg_maps.clone(),
        python_reference: args.python_reference,
    };
    let result = runner::run(&request, ssh.as_ref(), &mut log, &cancelled)?;
    cli::replay::print(&result, json)
}

/// `dumpview cases …`: `plan` reads the dumps through `sources` (a remote one mirrored, its
/// input set fetched), `run` runs the batch where the dump lives (`services::cases`); SIGINT,
/// SIGTERM and SIGHUP cancel a run (its Python, or the remote side, is killed; what finished
/// is kept).
fn cases(
    args: &cli::cases::CasesArgs,
    attempts: &cli::inputs::AttemptArgs,
    json: bool,
    sources: &mut Sources,
) -> Result<Outcome, cli::CliError> {
    use cli::cases::CasesAction;
    let root = cli::cases::cases_root(args.cases_dir.as_deref());
    match &args.action {
        CasesAction::Plan(plan) => {
            let dump_is_remote = matches!(
                remote::parse_source(&plan.from)?,
                remote::SourceSpec::Remote(_)
            );
            let dump = sources.local(Path::new(&plan.from))?;
            let vs = plan
                .vs
                .as_ref()
                .map(|v| sources.local(Path::new(v)))
                .transpose()?;
            let mut fetch = |file: &Path| sources.fetch(file);
            let inputs = cli::cases::PlanInputs {
                dump: &dump,
                vs: vs.as_deref(),
                attempt: attempts.side(0),
                vs_attempt: attempts.side(1),
                dump_is_remote,
                fetch: &mut fetch,
            };
            cli::cases::plan(&root, plan, inputs, json)
        }
        CasesAction::Run(run) => cases_run(&root, run, json, sources),
        CasesAction::Record {
            name,
            case,
            result_dir,
        } => cli::cases::record(&root, name, case, result_dir, json),
        CasesAction::Analyze { name, output } => {
            cli::cases::analyze_cmd(&root, name, output.as_deref(), json)
        }
        CasesAction::ExportRun { name, output } => cli::cases::export_run(&root, name, output),
        CasesAction::ExportTest { name, case, output } => {
            cli::cases::export_test(&root, name, case, output)
        }
    }
}

/// `dumpview cases run`: progress on stderr (a line per case filed; on a terminal, the case
/// running), the per-case table and the analysis's exit status.
fn cases_run(
    root: &Path,
    args: &cli::cases::RunArgs,
    json: bool,
    sources: &mut Sources,
) -> Result<Outcome, cli::CliError> {
    use dumpview::model::cases::Outcome as CaseOutcome;
    use dumpview::services::cases::{self as runner, RunEvent, RunRequest};
    use std::io::IsTerminal;
    use std::sync::atomic::Ordering;
    let matrix = cli::cases::open(root, &args.name)?;
    let ssh = sources.run_options(&matrix.plan.dump)?;
    let cancel = cancel_on_signals()?;
    let cancelled = || cancel.load(Ordering::SeqCst);
    let request = RunRequest {
        matrix: matrix.clone(),
        only: args.only.clone(),
        jobs: args.jobs as usize,
        rerun: args.rerun,
        python: args.python.clone(),
        device: args.device.clone(),
    };
    let tty = !json && std::io::stderr().is_terminal();
    let clear = if tty { "\r\x1b[K" } else { "" };
    let mut on_event = |event: RunEvent| match event {
        RunEvent::Skipped(id) => {
            eprintln!("{clear}dumpview: {id}: recorded already, skipped (--rerun runs it again)")
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
    cli::cases::print_run(&matrix, &args.only, serde_json::to_value(&report)?, json)
}

/// What a watch was asked to follow and report.
struct WatchRequest<'a> {
    sources: &'a [String],
    vs: Option<&'a str>,
    until_finding: bool,
    timeout: Option<f64>,
    tolerance: &'a ToleranceArgs,
}

/// `dumpview --watch SOURCE… [--vs SOURCE]`: the workbench following the sources; without a
/// terminal (a pipe, `--json`), the headless events instead.
fn watch_workbench(
    request: &WatchRequest,
    attempts: &cli::inputs::AttemptArgs,
    json: bool,
    sources: &mut Sources,
) -> Result<Outcome, cli::CliError> {
    use dumpview::runtime::watch::WatchOptions;
    use std::io::IsTerminal;
    if json || !std::io::stdout().is_terminal() {
        return watch(request, attempts, json, sources);
    }
    for source in request.sources.iter().map(String::as_str).chain(request.vs) {
        if matches!(remote::parse_source(source)?, remote::SourceSpec::Local(_))
            && !std::path::Path::new(source).exists()
        {
            return Err(format!("{source}: cannot watch: no such file or directory").into());
        }
    }
    let followed = request
        .sources
        .iter()
        .map(|s| sources.watched(s))
        .collect::<Result<Vec<_>, _>>()?;
    let vs = request.vs.map(|v| sources.watched(v)).transpose()?;
    let _fetching = sources.fetcher().map(dumpview::services::fetch::register);
    dumpview::runtime::run_watch(
        followed,
        vs,
        WatchOptions {
            attempt: attempts.side(0),
            poll: sources
                .reach()
                .poll
                .unwrap_or(dumpview::runtime::watch::DEFAULT_POLL),
        },
        request.tolerance.tolerances()?,
    )?;
    Ok(Outcome::Clean)
}

/// `dumpview watch`: the headless watch loop of the runtime, on stdout.
fn watch(
    request: &WatchRequest,
    attempts: &cli::inputs::AttemptArgs,
    json: bool,
    sources: &mut Sources,
) -> Result<Outcome, cli::CliError> {
    use dumpview::runtime::watch::{WatchOptions, headless};
    let timeout = match request.timeout {
        Some(s) if s.is_finite() && s > 0.0 => Some(std::time::Duration::from_secs_f64(s)),
        Some(_) => return Err("--timeout must be a positive number of seconds".into()),
        None => None,
    };
    let args = headless::Headless {
        sources: request
            .sources
            .iter()
            .map(|s| sources.watched(s))
            .collect::<Result<Vec<_>, _>>()?,
        vs: request.vs.map(|v| sources.watched(v)).transpose()?,
        json,
        until_finding: request.until_finding,
        timeout,
        tolerances: request.tolerance.tolerances()?,
        options: WatchOptions {
            poll: sources
                .reach()
                .poll
                .unwrap_or(dumpview::runtime::watch::DEFAULT_POLL),
            attempt: attempts.side(0),
        },
    };
    let code = headless::run(&args, &mut std::io::stdout().lock())?;
    Ok(match code {
        0 => Outcome::Clean,
        1 => Outcome::Found,
        _ => {
            let unread: Vec<&str> = args
                .sources
                .iter()
                .chain(&args.vs)
                .filter(|f| !f.root.exists())
                .map(|f| f.name.as_str())
                .collect();
            return Err(format!(
                "cannot watch: {} cannot be read at start (no such file or directory)",
                unread.join(", ")
            )
            .into());
        }
    })
}

/// The exit status of `result`; an error goes to stderr and, with `--json`, also as a JSON
/// document on stdout (`{"error": …, "warnings": []}`), so a script always has one to parse.
fn finish(result: Result<Outcome, cli::CliError>, json: bool) -> ExitCode {
    match result {
        Ok(outcome) => ExitCode::from(outcome.exit_code()),
        Err(error) => {
            eprintln!("dumpview: error: {error}");
            if json {
                println!(
                    "{}",
                    serde_json::json!({"error": error.to_string(), "warnings": []})
                );
            }
            ExitCode::from(2)
        }
    }
}

/// A flag SIGINT, SIGTERM and SIGHUP set: what a headless replay or matrix run polls as its
/// cancel.
fn cancel_on_signals() -> Result<std::sync::Arc<std::sync::atomic::AtomicBool>, cli::CliError> {
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        signal_hook::flag::register(signal, std::sync::Arc::clone(&cancel))?;
    }
    Ok(cancel)
}
