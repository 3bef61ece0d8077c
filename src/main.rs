//! The `dumpview` binary: argument parsing and exit status; the work lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dumpview::cli::{self, Outcome};

/// Find where the numbers of a model run first go wrong.
///
/// With no command, summarises the example dumps built into the binary.
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
  dumpview                                  summarise the embedded example dumps
  dumpview summary dump/rank0/match1-occ1/manifest.json
  dumpview probe install my_pkg/            write my_pkg/dump_probe.py

Exit status: 0 nothing found, 1 something found (a non-finite record), 2 usage or input error.";

#[derive(Subcommand)]
enum Command {
    /// Summarise the embedded example dumps (the default).
    Demo,
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
}

#[derive(Subcommand)]
enum ProbeAction {
    /// Write dump_probe.py into DIR (never replaces an existing file).
    Install { dir: PathBuf },
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match args.command.unwrap_or(Command::Demo) {
        Command::Demo => cli::summary::run_embedded(args.json),
        Command::Summary { files } => cli::summary::run(&files, args.json),
        Command::Probe {
            action: ProbeAction::Install { dir },
        } => cli::probe_install::run(&dir).map(|path| {
            println!("wrote {}", path.display());
            Outcome::Clean
        }),
    };
    match result {
        Ok(outcome) => ExitCode::from(outcome.exit_code()),
        Err(error) => {
            eprintln!("dumpview: error: {error}");
            ExitCode::from(2)
        }
    }
}
