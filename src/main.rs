//! The `dumpview` binary: parses the command line, hands it to the subcommand's `run` (one
//! file each in `dumpview::cli`), and maps the outcome to the exit status.

use std::process::ExitCode;

use dumpview::cli::command::{Args, Command};
use dumpview::cli::workbench::WorkbenchArgs;
use dumpview::cli::{CliError, Conclusion, Context};

fn main() -> ExitCode {
    // Like other Unix tools, end quietly when the reader of stdout goes away (`| head`)
    // instead of failing the next write and panicking in println!.
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // The context holds the sources, so it is dropped after everything that reads the
    // captures: its mirrors' ssh masters end when main returns.
    let parsed = dumpview::cli::command::command()
        .try_get_matches()
        .and_then(|matches| <Args as clap::FromArgMatches>::from_arg_matches(&matches));
    let args = match parsed {
        Ok(args) => args,
        Err(error) => return usage_error(error),
    };
    let (command, workbench, mut cx) = args.split();
    let json = cx.json;
    let result = dispatch(command, workbench, &mut cx);
    let code = finish(result, json);
    drop(cx);
    // A watch's followers still hold their mirrors (their threads outlive main's return):
    // end every master and remove the control directory here, whatever holds them.
    dumpview::cli::shutdown();
    code
}

/// Runs the subcommand, or the workbench when there is none.
fn dispatch(
    command: Option<Command>,
    workbench: WorkbenchArgs,
    cx: &mut Context,
) -> Result<Conclusion, CliError> {
    let Some(command) = command else {
        return workbench.run(cx);
    };
    workbench.refuse_beside_subcommand()?;
    match command {
        Command::Demo(args) => args.run(cx),
        Command::Scan(args) => args.run(cx),
        Command::Diagnose(args) => args.run(cx),
        Command::Diff(args) => args.run(cx),
        Command::Vary(args) => args.run(cx),
        Command::Report(args) => args.run(cx),
        Command::Replay(args) => args.run(cx),
        Command::Cases(args) => args.run(cx),
        Command::Tensors(args) => args.run(cx),
        Command::Summary(args) => args.run(cx),
        Command::Watch(args) => args.run(cx),
        Command::Probe(args) => args.run(cx),
        Command::Completions(args) => args.run(&mut dumpview::cli::command::command(), cx),
    }
}

/// A command line clap refused: its message and exit status (help and `--version` are not
/// errors); with `--json` among the arguments, also the error document on stdout, as for an
/// input error, so a script that asked for JSON always has one to parse.
fn usage_error(error: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let asked_json = std::env::args_os().any(|a| a == "--json");
    if !asked_json
        || matches!(
            error.kind(),
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
        )
    {
        error.exit();
    }
    let _ = error.print();
    // clap's message without its usage and help lines, on one line.
    let message = error.to_string();
    let said: Vec<&str> = message
        .lines()
        .take_while(|line| !line.starts_with("Usage:"))
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    let said = said.join(" ");
    let said = said.trim_start_matches("error: ");
    println!("{}", serde_json::json!({"error": said, "warnings": []}));
    ExitCode::from(2)
}

/// The exit status of `result`; an error goes to stderr and, with `--json`, also as a JSON
/// document on stdout (`{"error": …, "warnings": []}`), so a script always has one to parse.
fn finish(result: Result<Conclusion, CliError>, json: bool) -> ExitCode {
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
