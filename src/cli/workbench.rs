//! `dumpview [A [B]]`, `dumpview --watch SOURCE… [--vs SOURCE]`: the terminal workbench
//! (`runtime::run`, `runtime::run_watch`) on captures, or following sources as dumps land.
//! Input errors are found before the terminal is taken; without a terminal (a pipe,
//! `--json`) the same answers are printed as `scan`, `diff`, `demo --list` or `watch` print
//! them.

use std::path::PathBuf;

use super::diff::ToleranceArgs;
use super::inputs::IgnoreArgs;
use super::watch::WatchRequest;
use super::{CliError, Conclusion, Context};
use crate::runtime::{self, Source};
use crate::services::{fetch, sources};

/// The workbench's options: the top-level ones of [`super::command::Args`].
#[derive(Debug, Clone, Default)]
pub struct WorkbenchArgs {
    /// Captures to open: none (the embedded example pair), A, or A and B.
    pub captures: Vec<PathBuf>,
    /// The diff's tolerances (diff mode).
    pub tolerance: ToleranceArgs,
    /// SOURCEs to follow (`--watch`).
    pub watch: Vec<String>,
    /// With `--watch`: the SOURCE to diff against, itself followed.
    pub vs: Option<String>,
    /// Stages left out of both captures.
    pub ignore: IgnoreArgs,
}

impl WorkbenchArgs {
    /// Refuses the workbench's options beside a subcommand, which has its own.
    ///
    /// # Errors
    /// When any of them was given.
    pub fn refuse_beside_subcommand(&self) -> Result<(), CliError> {
        let given = !self.captures.is_empty()
            || !self.watch.is_empty()
            || self.ignore.ignore.is_some()
            || self.vs.is_some()
            || tolerances_given(&self.tolerance);
        if given {
            return Err(
                "CAPTURE, --rtol, --atol, --tol, --ignore, --watch and --vs before a subcommand are \
                 the workbench's; give a subcommand's own after its name (`dumpview diff --rtol 1e-3 A B`)"
                    .into(),
            );
        }
        Ok(())
    }

    /// Opens the workbench: on the example pair, on A, on A and B, or following `--watch`.
    ///
    /// # Errors
    /// Refused options, inputs that cannot be read, a terminal that cannot be used.
    pub fn run(self, cx: &mut Context) -> Result<Conclusion, CliError> {
        if self.vs.is_some() && self.watch.is_empty() {
            return Err(
                "--vs compares followed captures (with --watch); for two captures give them as A B"
                    .into(),
            );
        }
        if !self.watch.is_empty() {
            let request = WatchRequest {
                sources: &self.watch,
                vs: self.vs.as_deref(),
                until_finding: false,
                timeout: None,
                tolerance: &self.tolerance,
            };
            return watch(&request, cx);
        }
        let attempts = cx.attempts;
        let (a, b) = match self.captures.as_slice() {
            [] => return open_example(DEFAULT_EXAMPLE, &self.tolerance, cx),
            [a] => (cx.sources.local(a)?, None),
            [a, b, ..] => (cx.sources.local(a)?, Some(cx.sources.local(b)?)),
        };
        let source = Source::Files {
            a,
            b,
            attempt_a: attempts.side(0),
            attempt_b: attempts.side(1),
            ignore: self.ignore.ignore.clone(),
        };
        // A remote capture's saved tensors come when `t` needs them.
        let _fetching = cx.sources.fetcher().map(fetch::register);
        open(source, &self.tolerance, &self.ignore, cx)
    }
}

/// True when any tolerance option was given.
fn tolerances_given(tolerance: &ToleranceArgs) -> bool {
    tolerance.rtol.is_some() || tolerance.atol.is_some() || !tolerance.per_stat.is_empty()
}

/// The pair the workbench opens with no arguments (and `dumpview demo` without `--pair`): a
/// non-finite record and a divergence.
pub const DEFAULT_EXAMPLE: &str = "llama_fp16_overflow";

/// The workbench on the embedded example pair `pair` (its load warnings and `--ignore` do
/// not apply); without a terminal, the pairs listed.
///
/// # Errors
/// As [`open`].
pub fn open_example(
    pair: &str,
    tolerance: &ToleranceArgs,
    cx: &mut Context,
) -> Result<Conclusion, CliError> {
    open(
        Source::Example(pair.to_string()),
        tolerance,
        &IgnoreArgs::default(),
        cx,
    )
}

/// The workbench on `source`; without a terminal, its answers printed.
///
/// # Errors
/// A bad `--ignore` pattern or tolerances, tolerances for one capture, an input that cannot
/// be opened, an unknown example pair, a terminal that cannot be used.
pub fn open(
    source: Source,
    tolerance: &ToleranceArgs,
    ignore: &IgnoreArgs,
    cx: &mut Context,
) -> Result<Conclusion, CliError> {
    use std::io::IsTerminal;
    let (attempts, json) = (&cx.attempts, cx.json);
    let tolerances = tolerance.tolerances()?;
    // A bad pattern is an input error, said before the terminal is taken.
    if let Some(pattern) = &ignore.ignore {
        regex::Regex::new(pattern)
            .map_err(|e| format!("--ignore {pattern:?} is not a valid regular expression: {e}"))?;
    }
    if tolerances_given(tolerance) && matches!(&source, Source::Files { b: None, .. }) {
        return Err(
            "--rtol, --atol and --tol compare two captures: give A and B (`dumpview A` scans one)"
                .into(),
        );
    }
    // Input errors are found before the terminal is taken, so they reach stderr and exit 2.
    match &source {
        Source::Files { a, b, .. } => {
            let inputs: Vec<PathBuf> = std::iter::once(a.clone()).chain(b.clone()).collect();
            crate::model::ingest::discover(&inputs)?;
        }
        Source::Example(name) => {
            let pairs = crate::embedded::example_pairs();
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
            Source::Files { a, b: None, .. } => {
                super::scan::run(&[a], attempts, ignore, json, &Default::default())
            }
            Source::Files { a, b: Some(b), .. } => super::diff::run(
                &a,
                &b,
                tolerance,
                attempts,
                ignore,
                json,
                super::diff::Shown::Findings,
            ),
            Source::Example(_) => super::summary::run_embedded(json),
        };
    }
    Ok(match runtime::run(source, tolerances)? {
        runtime::Ended::Quit => Conclusion::Clean,
        // Quit while loading: no answer was given, as with Ctrl-C in `watch` (exit 130).
        runtime::Ended::BeforeLoaded => Conclusion::Interrupted,
    })
}

/// `dumpview --watch SOURCE… [--vs SOURCE]`: the workbench following the sources; without a
/// terminal (a pipe, `--json`), the headless events instead.
fn watch(request: &WatchRequest, cx: &mut Context) -> Result<Conclusion, CliError> {
    use runtime::watch::WatchOptions;
    use std::io::IsTerminal;
    if cx.json || !std::io::stdout().is_terminal() {
        return super::watch::headless(request, cx);
    }
    for source in request.sources.iter().map(String::as_str).chain(request.vs) {
        if !sources::is_remote(source)? && !std::path::Path::new(source).exists() {
            return Err(format!("{source}: cannot watch: no such file or directory").into());
        }
    }
    let followed = request
        .sources
        .iter()
        .map(|s| cx.sources.watched(s))
        .collect::<Result<Vec<_>, _>>()?;
    let vs = request.vs.map(|v| cx.sources.watched(v)).transpose()?;
    let _fetching = cx.sources.fetcher().map(fetch::register);
    runtime::run_watch(
        followed,
        vs,
        WatchOptions {
            attempt: cx.attempts.side(0),
            poll: cx
                .sources
                .reach()
                .poll
                .unwrap_or(runtime::watch::DEFAULT_POLL),
        },
        request.tolerance.tolerances()?,
    )?;
    Ok(Conclusion::Clean)
}
