//! `dumpview cases plan`: a matrix planned on one captured input set (`model::cases::create`),
//! the dumps read through the sources (a remote one mirrored, its input set fetched).

use std::path::Path;

use super::super::{CliError, Conclusion, Context};
use crate::model::cases::{create, names, vs};
use crate::model::dump::{Dump, InputSetEntry, Window};
use crate::model::ingest::AttemptChoice;
use crate::model::present::cases as present;
use crate::model::replay::Standard;
use crate::services::sources;

/// The options of `cases plan`.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// The matrix's NAME ([A-Za-z0-9_.=-]+): its directory under the cases directory.
    pub name: String,
    /// The dump holding the input set (a manifest, a window directory or a tree of them;
    /// `ssh://host/path` or `host:path` on another machine, where `cases run` then runs).
    #[arg(long, value_name = "DUMP")]
    pub from: String,
    /// The input set: `stage#N` (`#N` may be left out when the stage was captured once).
    #[arg(long, value_name = "STAGE[#N]")]
    pub stage: String,
    /// The operator under test, as `dumpview replay --candidate` takes it.
    #[arg(long, value_name = "OP")]
    pub candidate: String,
    /// The reference, as `dumpview replay --reference` takes it.
    #[arg(long, value_name = "REF")]
    pub reference: String,
    /// Another capture of the same request: "operator passes, integration fails" when it
    /// diverges from DUMP at the stage while every case passes.
    #[arg(long, value_name = "DUMP_B")]
    pub vs: Option<String>,
    /// The verdicts' standard: msprobe (default), dynamo, or allclose (with --atol, --rtol).
    #[arg(long, value_name = "S", value_parser = Standard::NAMES)]
    pub standard: Option<String>,
    /// allclose only: the absolute tolerance.
    #[arg(long, value_name = "A", allow_negative_numbers = true)]
    pub atol: Option<f64>,
    /// allclose only: the relative tolerance.
    #[arg(long, value_name = "R", allow_negative_numbers = true)]
    pub rtol: Option<f64>,
    /// An axis and its values (repeatable): dtype=float16,bfloat16,float32;
    /// dtype[x]=…; layout[x]=contiguous,transposed,strided; shape=captured,half_rows,
    /// odd_last_dim (shape[x]=…); mode=eager,compile; option:NAME=V1,V2.
    #[arg(long = "axis", value_name = "AXIS=V1,V2", required = true)]
    pub axes: Vec<String>,
    /// Dimensions a shape transform changes together, e.g. x.-1=weight.0 (repeatable).
    #[arg(long = "tie", value_name = "A.DIM=B.DIM")]
    pub ties: Vec<String>,
    /// A dimension that keeps its size though another argument's of that size changes, e.g.
    /// weight.0 (repeatable).
    #[arg(long = "untie", value_name = "A.DIM")]
    pub untied: Vec<String>,
    /// The window's rank in a multi-rank dump.
    #[arg(long, value_name = "R")]
    pub rank: Option<u32>,
    /// The window (label, match number or directory name) in a multi-window dump.
    #[arg(long, value_name = "W")]
    pub window: Option<String>,
}

impl PlanArgs {
    /// Maps DUMP and DUMP_B to local paths and plans the matrix under `root`.
    ///
    /// # Errors
    /// A SOURCE that cannot be read; as [`plan`].
    pub fn run(&self, root: &Path, cx: &mut Context) -> Result<Conclusion, CliError> {
        let dump_is_remote = sources::is_remote(&self.from)?;
        let dump = cx.sources.local(Path::new(&self.from))?;
        let vs = self
            .vs
            .as_ref()
            .map(|v| cx.sources.local(Path::new(v)))
            .transpose()?;
        let sources = &mut cx.sources;
        let mut fetch = |file: &Path| sources.fetch(file);
        let inputs = PlanInputs {
            dump: &dump,
            vs: vs.as_deref(),
            attempt: cx.attempts.side(0),
            vs_attempt: cx.attempts.side(1),
            dump_is_remote,
            fetch: &mut fetch,
        };
        plan(root, self, inputs, cx.json)
    }
}

/// What `cases plan` is handed besides its options: the dumps as local paths (a remote one
/// as its mirror's root) and how to bring a file of a remote dump into it.
pub struct PlanInputs<'a> {
    /// DUMP, as a local path.
    pub dump: &'a Path,
    /// DUMP_B, as a local path.
    pub vs: Option<&'a Path>,
    /// Which attempt of DUMP's windows (`--attempt`, `--attempt-a`).
    pub attempt: AttemptChoice,
    /// Which attempt of DUMP_B's windows (`--attempt`, `--attempt-b`).
    pub vs_attempt: AttemptChoice,
    /// Whether DUMP is on another host (then the cases directory cannot be inside it).
    pub dump_is_remote: bool,
    /// Brings a file of a remote capture into its mirror; nothing for a local file.
    pub fetch: &'a mut dyn FnMut(&Path) -> Result<(), String>,
}

/// `stage#N` → (stage, Some(N)); `stage` → (stage, None).
fn split_stage(text: &str) -> (&str, Option<u32>) {
    match text.rsplit_once('#') {
        // `#1` is the empty stage's first occurrence, as its key is written.
        Some((stage, n)) => match n.parse() {
            Ok(n) => (stage, Some(n)),
            Err(_) => (text, None),
        },
        _ => (text, None),
    }
}

fn window_dir_name(w: &Window) -> String {
    w.source
        .parent()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The window and input set entry `--stage` names (with `--rank` / `--window`).
fn pick<'d>(dump: &'d Dump, args: &PlanArgs) -> Result<(&'d Window, &'d InputSetEntry), CliError> {
    let (stage, occurrence) = split_stage(&args.stage);
    let windows: Vec<&Window> = dump
        .windows
        .iter()
        .filter(|w| args.rank.is_none_or(|r| w.rank == r))
        .filter(|w| {
            args.window.as_ref().is_none_or(|sel| {
                &w.label == sel || w.match_index.to_string() == *sel || window_dir_name(w) == *sel
            })
        })
        .collect();
    if windows.is_empty() {
        return Err(format!(
            "{}: no window with rank {} and window {}",
            args.from,
            args.rank.map_or("any".into(), |r| r.to_string()),
            args.window.as_deref().unwrap_or("any")
        )
        .into());
    }
    let having: Vec<&Window> = windows
        .iter()
        .copied()
        .filter(|w| w.input_sets.iter().any(|e| e.stage == stage))
        .collect();
    let window = match having.as_slice() {
        [] => {
            let known: Vec<String> = windows
                .iter()
                .flat_map(|w| {
                    w.input_sets
                        .iter()
                        .map(|e| format!("{}#{}", e.stage, e.occurrence))
                })
                .collect();
            return Err(format!(
                "{}: no input set of stage {stage:?}; captured input sets: {}",
                args.from,
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            )
            .into());
        }
        [one] => *one,
        many => {
            return Err(format!(
                "{}: stage {stage:?} has input sets in {} windows ({}); pick one with --rank / --window",
                args.from,
                many.len(),
                many.iter()
                    .map(|w| w.source.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
            .into());
        }
    };
    let entries: Vec<&InputSetEntry> = window
        .input_sets
        .iter()
        .filter(|e| e.stage == stage)
        .collect();
    let listed = || {
        entries
            .iter()
            .map(|e| format!("{}#{}", e.stage, e.occurrence))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let entry = match occurrence {
        Some(n) => entries
            .iter()
            .copied()
            .find(|e| e.occurrence == n)
            .ok_or_else(|| {
                format!(
                    "{}: no {stage}#{n}; the stage was captured as {}",
                    window.source.display(),
                    listed()
                )
            })?,
        None if entries.len() == 1 => entries[0],
        None => {
            return Err(format!(
                "{}: stage {stage:?} was captured {} times; say which: {}",
                window.source.display(),
                entries.len(),
                listed()
            )
            .into());
        }
    };
    Ok((window, entry))
}

/// `dumpview cases plan`: reads the input set, builds the plan, compares with `--vs`, writes
/// the matrix.
///
/// # Errors
/// A refused NAME or existing matrix, a cases directory inside the dump, the dump or input
/// set unreadable (the message names the file), an axis the plan refuses (naming it).
pub fn plan(
    root: &Path,
    args: &PlanArgs,
    inputs: PlanInputs,
    json: bool,
) -> Result<Conclusion, CliError> {
    names::check("case matrix name", &args.name)?;
    let standard = Standard::from_args(args.standard.as_deref(), args.atol, args.rtol)?;
    if !inputs.dump_is_remote {
        refuse_inside(root, inputs.dump)?;
    }
    // Nor inside the other capture: a matrix there would be read as one of its windows.
    // (A remote one is its mirror's copy here, which a cases directory never lies in.)
    if let Some(vs) = inputs.vs {
        refuse_inside(root, vs)?;
    }
    let dump =
        crate::cli::inputs::load_capture(&[inputs.dump.to_path_buf()], inputs.attempt, json)?;
    let (window, entry) = pick(&dump, args)?;
    let key = format!("{}#{}", entry.stage, entry.occurrence);
    let vs = match (inputs.vs, &args.vs) {
        (Some(b), Some(text)) => {
            let other =
                crate::cli::inputs::load_capture(&[b.to_path_buf()], inputs.vs_attempt, json)?;
            Some(vs::check(&dump, &other, &window.source, &key, text))
        }
        _ => None,
    };
    let on_disk = create::WindowOnDisk {
        manifest: window.source.clone(),
        rank: window.rank,
        label: window.label.clone(),
    };
    let matrix = create::create(
        root,
        &create::NewMatrix {
            name: &args.name,
            dump: &args.from,
            window: &on_disk,
            entry,
            candidate: &args.candidate,
            reference: &args.reference,
            standard,
            axes: &args.axes,
            ties: &args.ties,
            untied: &args.untied,
            vs,
        },
        inputs.fetch,
    )?;
    if json {
        println!("{}", serde_json::to_string_pretty(&matrix.plan)?);
    } else {
        print!(
            "{}",
            present::plan_text(&matrix.plan, &matrix.plan_path().display().to_string())
        );
    }
    Ok(Conclusion::Clean)
}

/// The cases directory may not lie inside the dump: a dump directory holds evidence only.
fn refuse_inside(root: &Path, dump: &Path) -> Result<(), CliError> {
    Ok(create::refuse_inside(root, dump)?)
}
