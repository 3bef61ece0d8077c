//! `dumpview watch SOURCE… [--vs SOURCE]`: followed captures' findings as events on stdout,
//! through the runtime's watch (`runtime::watch::headless`).

use super::diff::ToleranceArgs;
use super::{CliError, Conclusion, Context};
use crate::runtime::watch::{self, WatchOptions, headless};

/// The options of `dumpview watch`.
#[derive(Debug, Clone, clap::Args)]
pub struct WatchArgs {
    /// Directories (or manifests) to follow; several merge into one capture.
    #[arg(required = true, value_name = "SOURCE")]
    pub sources: Vec<String>,
    /// Compare against this capture (itself followed): first_divergence events.
    #[arg(long, value_name = "SOURCE")]
    pub vs: Option<String>,
    /// Stop at the first finding (exit 1).
    #[arg(long)]
    pub until_finding: bool,
    /// Stop after S seconds.
    #[arg(long, value_name = "S")]
    pub timeout: Option<f64>,
    #[command(flatten)]
    pub tolerance: ToleranceArgs,
}

impl WatchArgs {
    /// Follows the sources until interrupted, `--until-finding` or `--timeout`.
    ///
    /// # Errors
    /// As [`headless`].
    pub fn run(&self, cx: &mut Context) -> Result<Conclusion, CliError> {
        headless(
            &WatchRequest {
                sources: &self.sources,
                vs: self.vs.as_deref(),
                until_finding: self.until_finding,
                timeout: self.timeout,
                tolerance: &self.tolerance,
            },
            cx,
        )
    }
}

/// What a watch was asked to follow and report.
pub struct WatchRequest<'a> {
    /// The SOURCEs merged into the followed capture.
    pub sources: &'a [String],
    /// The SOURCE compared against, itself followed.
    pub vs: Option<&'a str>,
    /// Stop at the first finding.
    pub until_finding: bool,
    /// Stop after this many seconds.
    pub timeout: Option<f64>,
    /// The `--vs` diff's tolerances.
    pub tolerance: &'a ToleranceArgs,
}

/// The headless watch loop of the runtime, on stdout: exit 1 after a finding.
///
/// # Errors
/// A bad `--timeout` or tolerance, a SOURCE that cannot be followed, none readable at start.
pub fn headless(request: &WatchRequest, cx: &mut Context) -> Result<Conclusion, CliError> {
    let timeout = match request.timeout {
        Some(s) if s.is_finite() && s > 0.0 => Some(std::time::Duration::from_secs_f64(s)),
        Some(_) => return Err("--timeout must be a positive number of seconds".into()),
        None => None,
    };
    let sources = &mut cx.sources;
    let args = headless::Headless {
        sources: request
            .sources
            .iter()
            .map(|s| sources.watched(s))
            .collect::<Result<Vec<_>, _>>()?,
        vs: request.vs.map(|v| sources.watched(v)).transpose()?,
        json: cx.json,
        until_finding: request.until_finding,
        timeout,
        tolerances: request.tolerance.tolerances()?,
        options: WatchOptions {
            poll: sources.reach().poll.unwrap_or(watch::DEFAULT_POLL),
            attempt: cx.attempts.side(0),
        },
    };
    let code = headless::run(&args, &mut std::io::stdout().lock())?;
    Ok(match code {
        0 => Conclusion::Clean,
        1 => Conclusion::Found,
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
