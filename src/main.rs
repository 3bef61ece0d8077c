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
        dumpview::runtime::Source::Files { a, b } => {
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
            dumpview::runtime::Source::Files { a, b: None } => cli::scan::run(&[a], json),
            dumpview::runtime::Source::Files { a, b: Some(b) } => {
                cli::diff::run(&a, &b, tolerance, json)
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
                },
                &args.tolerance,
                json,
            ));
        }
        (None, [a, b, ..]) => {
            return finish(workbench(
                dumpview::runtime::Source::Files {
                    a: a.clone(),
                    b: Some(b.clone()),
                },
                &args.tolerance,
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
        } => workbench(dumpview::runtime::Source::Example(pair), &tolerance, json),
        Command::Scan { inputs } => cli::scan::run(&inputs, json),
        Command::Tensors(args) => cli::tensors::run(&args, json),
        Command::Diff { a, b, tolerance } => cli::diff::run(&a, &b, &tolerance, json),
        Command::Vary {
            captures,
            threshold,
        } => cli::vary::run(&captures, threshold, json),
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
            json,
        ),
        Command::Summary { files } => cli::summary::run(&files, json),
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

fn finish(result: Result<Outcome, cli::CliError>) -> ExitCode {
    match result {
        Ok(outcome) => ExitCode::from(outcome.exit_code()),
        Err(error) => {
            eprintln!("dumpview: error: {error}");
            ExitCode::from(2)
        }
    }
}
