//! The `dumpview` binary: argument parsing and exit status; the work lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dumpview::cli::{self, Outcome, diff::ToleranceArgs};

/// Find where the numbers of a model run first go wrong.
///
/// Reads manifests written by dump_probe.py (a manifest file, or a directory searched
/// for manifest.json files). With no command, summarises the example dumps built in.
#[derive(Parser)]
#[command(version, after_help = EXAMPLES)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
}

const EXAMPLES: &str = "\
Examples:
  dumpview scan dump_a/                      first non-finite record and storage aliases
  dumpview diff dump_fp32/ dump_bf16/        where two captures first diverge
  dumpview diff a.json b.json --rtol 1e-3 --tol mean=1e-4:1e-7
  dumpview probe install my_pkg/             write my_pkg/dump_probe.py
  dumpview completions bash > /etc/bash_completion.d/dumpview

Exit status: 0 nothing found; 1 something found (a non-finite record, a stride conflict,
a divergence, an input-identity mismatch, a missing window); 2 usage or input error.";

#[derive(Subcommand)]
enum Command {
    /// Summarise the embedded example dumps (the default).
    Demo,
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
    /// What each manifest holds: records, stages, saved tensors, first non-finite.
    Summary {
        /// Manifest files written by dump_probe.py.
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

fn main() -> ExitCode {
    let args = Args::parse();
    let json = args.json;
    let result = match args.command.unwrap_or(Command::Demo) {
        Command::Demo => cli::summary::run_embedded(json),
        Command::Scan { inputs } => cli::scan::run(&inputs, json),
        Command::Diff { a, b, tolerance } => cli::diff::run(&a, &b, &tolerance, json),
        Command::Summary { files } => cli::summary::run(&files, json),
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
    match result {
        Ok(outcome) => ExitCode::from(outcome.exit_code()),
        Err(error) => {
            eprintln!("dumpview: error: {error}");
            ExitCode::from(2)
        }
    }
}
