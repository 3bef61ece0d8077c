//! The `dumpview` binary: argument parsing and exit status; the work lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dumpview::cli::{self, Outcome, diff::ToleranceArgs};

/// Find where the numbers of a model run first go wrong.
///
/// `dumpview A` opens the terminal workbench on capture A (scan mode), `dumpview A B`
/// on two captures (diff mode); with nothing given it opens an example pair built into
/// the binary. A capture is a manifest written by dump_probe.py, or a directory searched
/// for manifest.json files. Subcommands answer the same questions headless.
#[derive(Parser)]
#[command(version, after_help = EXAMPLES, args_conflicts_with_subcommands = true)]
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
    #[command(flatten)]
    attempts: cli::inputs::AttemptArgs,
    /// Follow SOURCE in the workbench as dumps land (repeat for several; they merge into one
    /// capture). Not with positional captures.
    #[arg(long, value_name = "SOURCE", conflicts_with = "captures")]
    watch: Vec<String>,
    /// With --watch: diff mode against this capture, itself followed.
    #[arg(long, value_name = "SOURCE", requires = "watch")]
    vs: Option<String>,
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
  dumpview probe install my_pkg/             write my_pkg/dump_probe.py
  dumpview completions bash > /etc/bash_completion.d/dumpview

Exit status: 0 nothing found; 1 something found (a non-finite record, a stride conflict,
a divergence, an input-identity mismatch, a missing window); 2 usage or input error.";

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
    },
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
        /// Refresh every S seconds without file events (and the remote listing interval).
        #[arg(long, value_name = "S", default_value_t = 1.0)]
        poll: f64,
        #[command(flatten)]
        tolerance: ToleranceArgs,
    },
    /// The capture probe (assets/dump_probe.py).
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
    /// Write dump_probe.py into DIR (never replaces an existing file).
    Install { dir: PathBuf },
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
    attempts: &cli::inputs::AttemptArgs,
    json: bool,
) -> Result<Outcome, cli::CliError> {
    use std::io::IsTerminal;
    let tolerances = tolerance.tolerances()?;
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
                cli::scan::run(&[a], attempts, json)
            }
            dumpview::runtime::Source::Files { a, b: Some(b), .. } => {
                cli::diff::run(&a, &b, tolerance, attempts, json)
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
    if !args.watch.is_empty() {
        return finish(watch_workbench(
            &args.watch,
            args.vs.as_deref(),
            &attempts,
            json,
        ));
    }
    let command = match (args.command, args.captures.as_slice()) {
        (Some(command), _) => command,
        (None, []) => Command::Demo {
            pair: DEFAULT_EXAMPLE.to_string(),
            list: false,
            tolerance: args.tolerance,
        },
        (None, [a]) => {
            return finish(workbench(
                dumpview::runtime::Source::Files {
                    a: a.clone(),
                    b: None,
                    attempt_a: attempts.side(0),
                    attempt_b: attempts.side(1),
                },
                &args.tolerance,
                &attempts,
                json,
            ));
        }
        (None, [a, b, ..]) => {
            return finish(workbench(
                dumpview::runtime::Source::Files {
                    a: a.clone(),
                    b: Some(b.clone()),
                    attempt_a: attempts.side(0),
                    attempt_b: attempts.side(1),
                },
                &args.tolerance,
                &attempts,
                json,
            ));
        }
    };
    let result = match command {
        Command::Demo { list: true, .. } => cli::summary::run_embedded(json),
        Command::Demo {
            pair,
            list: false,
            tolerance,
        } => workbench(
            dumpview::runtime::Source::Example(pair),
            &tolerance,
            &attempts,
            json,
        ),
        Command::Scan { inputs } => cli::scan::run(&inputs, &attempts, json),
        Command::Tensors(args) => cli::tensors::run(&args, json),
        Command::Diff { a, b, tolerance } => cli::diff::run(&a, &b, &tolerance, &attempts, json),
        Command::Vary {
            captures,
            threshold,
        } => cli::vary::run(&captures, threshold, &attempts, json),
        Command::Report {
            a,
            b,
            output,
            table,
            tolerance,
        } => cli::report::run(
            &a,
            b.as_deref(),
            output.as_deref(),
            &table,
            &tolerance,
            &attempts,
            json,
        ),
        Command::Watch {
            sources,
            vs,
            until_finding,
            timeout,
            poll,
            tolerance,
        } => watch(
            &sources,
            vs.as_deref(),
            until_finding,
            timeout,
            poll,
            &tolerance,
            &attempts,
            json,
        ),
        Command::Summary { files } => cli::summary::run(&files, &attempts, json),
        // Nothing to say in JSON: refused rather than ignored.
        Command::Probe { .. } | Command::Completions { .. } if json => {
            Err("--json is not supported by `probe install` and `completions`".into())
        }
        Command::Probe {
            action: ProbeAction::Install { dir },
        } => cli::probe_install::run(&dir).map(|path| {
            println!("wrote {}", path.display());
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
    };
    finish(result)
}

/// `dumpview --watch SOURCE… [--vs SOURCE]`: the workbench following the sources; without a
/// terminal (a pipe, `--json`), the headless events instead.
fn watch_workbench(
    sources: &[String],
    vs: Option<&str>,
    attempts: &cli::inputs::AttemptArgs,
    json: bool,
) -> Result<Outcome, cli::CliError> {
    use dumpview::runtime::watch::{Followed, WatchOptions};
    use std::io::IsTerminal;
    if json || !std::io::stdout().is_terminal() {
        return watch(
            sources,
            vs,
            false,
            None,
            1.0,
            &Default::default(),
            attempts,
            json,
        );
    }
    let followed = |name: &str| Followed {
        name: name.to_string(),
        root: PathBuf::from(name),
    };
    for source in sources.iter().map(String::as_str).chain(vs) {
        if !std::path::Path::new(source).exists() {
            return Err(format!("{source}: cannot watch: no such file or directory").into());
        }
    }
    dumpview::runtime::run_watch(
        sources.iter().map(|s| followed(s)).collect(),
        vs.map(followed),
        WatchOptions {
            attempt: attempts.side(0),
            ..WatchOptions::default()
        },
        Default::default(),
    )?;
    Ok(Outcome::Clean)
}

/// `dumpview watch`: the headless watch loop of the runtime, on stdout.
#[allow(clippy::too_many_arguments)]
fn watch(
    sources: &[String],
    vs: Option<&str>,
    until_finding: bool,
    timeout: Option<f64>,
    poll: f64,
    tolerance: &ToleranceArgs,
    attempts: &cli::inputs::AttemptArgs,
    json: bool,
) -> Result<Outcome, cli::CliError> {
    use dumpview::runtime::watch::{Followed, WatchOptions, headless};
    let seconds = |name: &str, s: f64| {
        if s.is_finite() && s > 0.0 {
            Ok(std::time::Duration::from_secs_f64(s))
        } else {
            Err(format!("--{name} must be a positive number of seconds"))
        }
    };
    let followed = |name: &str| Followed {
        name: name.to_string(),
        root: PathBuf::from(name),
    };
    let args = headless::Headless {
        sources: sources.iter().map(|s| followed(s)).collect(),
        vs: vs.map(followed),
        json,
        until_finding,
        timeout: timeout.map(|t| seconds("timeout", t)).transpose()?,
        tolerances: tolerance.tolerances()?,
        options: WatchOptions {
            poll: seconds("poll", poll)?,
            attempt: attempts.side(0),
        },
    };
    let code = headless::run(&args, &mut std::io::stdout().lock())?;
    Ok(match code {
        0 => Outcome::Clean,
        1 => Outcome::Found,
        _ => return Err("no source could be read at start".into()),
    })
}

fn finish(result: Result<Outcome, cli::CliError>) -> ExitCode {
    match result {
        Ok(outcome) => ExitCode::from(outcome.exit_code()),
        Err(error) => {
            eprintln!("dumpview: error: {error}");
            ExitCode::from(2)
        }
    }
}
