//! `dumpview cases plan|run|record|analyze|export-run|export-test`: the operator case matrix
//! (docs/cases.md, seed 002). This file holds the options and the subcommands that read and
//! write the matrix (`model::cases`); `run` is the runtime's (`services::cases::run`, which
//! `main` calls), and its result is printed here ([`print_run`]).

use std::path::{Path, PathBuf};

use super::{CliError, Outcome};
use crate::model::cases::analysis::analyze;
use crate::model::cases::export::{self, TestOutput, TestSpec};
use crate::model::cases::store::{self, INPUTS_FILE, Matrix, RECORD_FILE};
use crate::model::cases::{CasesAnalysis, create, names, vs};
use crate::model::dump::{Dump, InputSet as Entry, Window};
use crate::model::ingest::Attempt;
use crate::model::present::cases as present;
use crate::model::replay::Standard;
use crate::model::tensor::DType;

/// `dumpview cases`.
#[derive(Debug, Clone, clap::Args)]
pub struct CasesArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: CasesAction,
    /// The directory holding the case matrices [default: $DUMPVIEW_CASES_DIR, else
    /// .dumpview/cases in the current directory]; never inside a dump.
    #[arg(long, global = true, value_name = "DIR")]
    pub cases_dir: Option<PathBuf>,
}

/// The `cases` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum CasesAction {
    /// Plan a matrix on one captured input set: the baseline and one case per axis value.
    Plan(PlanArgs),
    /// Run the planned cases through replay_op.py --batch (here, or on the dump's host) and
    /// record each as a new attempt. Exit 0 when every case passes, 1 when one does not.
    Run(RunArgs),
    /// Take back one case's replay_op.py output directory (run by hand) as a new attempt.
    Record {
        /// The matrix.
        name: String,
        /// The case id (`dtype=bfloat16`).
        case: String,
        /// The directory replay_op.py wrote (`results/CASE` of `export-run`'s run.sh).
        result_dir: PathBuf,
    },
    /// Classify each case (pass, numerical mismatch, crash, unsupported combination,
    /// missing evidence), the axis the failures follow, the smallest failing case (Markdown;
    /// --json or -o x.json for JSON). Exit 0 when every case passes, 1 when one does not.
    Analyze {
        /// The matrix.
        name: String,
        /// Write the report here instead of printing it; `.json` selects JSON.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Write a self-contained bundle (replay_op.py, the baseline input set, plan.json,
    /// run.sh) to run the matrix by hand on another host.
    ExportRun {
        /// The matrix.
        name: String,
        /// A new (or empty) directory.
        #[arg(short, long, value_name = "DIR")]
        output: PathBuf,
    },
    /// Write one case (the smallest failing one) as a standalone pytest regression test,
    /// its inputs and the reference's outputs in .pt files beside it.
    ExportTest {
        /// The matrix.
        name: String,
        /// The case id.
        case: String,
        /// The test file (test_*.py); the .pt files go beside it.
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
    },
}

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
    #[arg(long, value_name = "A")]
    pub atol: Option<f64>,
    /// allclose only: the relative tolerance.
    #[arg(long, value_name = "R")]
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

/// The options of `cases run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The matrix.
    pub name: String,
    /// Run only these cases (repeatable).
    #[arg(long, value_name = "CASE")]
    pub only: Vec<String>,
    /// Python processes at once (each imports torch once and runs its share of the cases).
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub jobs: u32,
    /// Run recorded cases again: a new attempt beside the old, never over it.
    #[arg(long)]
    pub rerun: bool,
    /// The Python that runs replay_op.py (for a remote dump, the remote interpreter)
    /// [default: $DUMPVIEW_PYTHON, else the first python3/python on PATH that imports torch;
    /// remote: python3].
    #[arg(long, value_name = "PY")]
    pub python: Option<String>,
    /// The candidate's device (default: the captured one when available, else cpu).
    #[arg(long, value_name = "D")]
    pub device: Option<String>,
}

/// The cases directory: `given`, else `$DUMPVIEW_CASES_DIR`, else `.dumpview/cases`.
pub fn cases_root(given: Option<&Path>) -> PathBuf {
    create::cases_root(given)
}

/// Opens the matrix NAME.
///
/// # Errors
/// As [`Matrix::open`].
pub fn open(root: &Path, name: &str) -> Result<Matrix, CliError> {
    Ok(Matrix::open(root, name)?)
}

/// What `cases plan` is handed besides its options: the dumps as local paths (a remote one
/// as its mirror's root) and how to bring a file of a remote dump into it.
pub struct PlanInputs<'a> {
    /// DUMP, as a local path.
    pub dump: &'a Path,
    /// DUMP_B, as a local path.
    pub vs: Option<&'a Path>,
    /// Which attempt of DUMP's windows (`--attempt`, `--attempt-a`).
    pub attempt: Attempt,
    /// Which attempt of DUMP_B's windows (`--attempt`, `--attempt-b`).
    pub vs_attempt: Attempt,
    /// Whether DUMP is on another host (then the cases directory cannot be inside it).
    pub dump_is_remote: bool,
    /// Brings a file of a remote capture into its mirror; nothing for a local file.
    pub fetch: &'a mut dyn FnMut(&Path) -> Result<(), String>,
}

/// `stage#N` → (stage, Some(N)); `stage` → (stage, None).
fn split_stage(text: &str) -> (&str, Option<u32>) {
    match text.rsplit_once('#') {
        Some((stage, n)) if !stage.is_empty() => match n.parse() {
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
fn pick<'d>(dump: &'d Dump, args: &PlanArgs) -> Result<(&'d Window, &'d Entry), CliError> {
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
    let entries: Vec<&Entry> = window
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
) -> Result<Outcome, CliError> {
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
    let dump = super::inputs::load_capture(&[inputs.dump.to_path_buf()], inputs.attempt, json)?;
    let (window, entry) = pick(&dump, args)?;
    let key = format!("{}#{}", entry.stage, entry.occurrence);
    let vs = match (inputs.vs, &args.vs) {
        (Some(b), Some(text)) => {
            let other = super::inputs::load_capture(&[b.to_path_buf()], inputs.vs_attempt, json)?;
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
    Ok(Outcome::Clean)
}

/// The cases directory may not lie inside the dump: a dump directory holds evidence only.
fn refuse_inside(root: &Path, dump: &Path) -> Result<(), CliError> {
    Ok(create::refuse_inside(root, dump)?)
}

/// `dumpview cases record`: files RESULT_DIR as a new attempt of CASE.
///
/// # Errors
/// As [`Matrix::record`].
pub fn record(
    root: &Path,
    name: &str,
    case: &str,
    from: &Path,
    json: bool,
) -> Result<Outcome, CliError> {
    let matrix = open(root, name)?;
    let judged = matrix.record(case, from)?;
    let analysis = analyze(
        &matrix.plan,
        &matrix.plan_path().display().to_string(),
        &matrix.evidence(Some(&[case.to_string()])),
        Some(&[case.to_string()]),
    );
    let result = &analysis.cases[0];
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "case": case,
                "attempt": judged.attempt.number,
                "dir": judged.attempt.dir.display().to_string(),
                "result": result,
            }))?
        );
    } else {
        println!(
            "recorded {case} as attempt {} ({}): {} — {}",
            judged.attempt.number,
            judged.attempt.dir.display(),
            result.outcome,
            result.reason
        );
        if result.attempts.len() > 1 {
            println!(
                "{} attempts kept; the newest finished one decides",
                result.attempts.len()
            );
        }
    }
    Ok(Outcome::Clean)
}

/// The analysis of `matrix` (`only`: those cases).
pub fn analysis(matrix: &Matrix, only: Option<&[String]>) -> CasesAnalysis {
    analyze(
        &matrix.plan,
        &matrix.plan_path().display().to_string(),
        &matrix.evidence(only),
        only,
    )
}

/// `path` relative to `base` (both made absolute first); `path` as it is when that fails.
fn relative(path: &str, base: &Path) -> String {
    let (Ok(p), Ok(b)) = (std::path::absolute(path), std::path::absolute(base)) else {
        return path.to_string();
    };
    let p: Vec<_> = p.components().collect();
    let b: Vec<_> = b.components().collect();
    let common = p.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..b.len() {
        out.push("..");
    }
    for c in &p[common..] {
        out.push(c);
    }
    out.display().to_string()
}

/// `dumpview cases analyze`.
///
/// # Errors
/// As [`Matrix::open`]; the report cannot be written.
pub fn analyze_cmd(
    root: &Path,
    name: &str,
    output: Option<&Path>,
    json: bool,
) -> Result<Outcome, CliError> {
    let matrix = open(root, name)?;
    let a = analysis(&matrix, None);
    let as_json = json || output.is_some_and(|o| o.extension().is_some_and(|e| e == "json"));
    let text = if as_json {
        serde_json::to_string_pretty(&a)? + "\n"
    } else {
        match output {
            // Links relative to the report, so that it can move with the cases directory.
            Some(o) => {
                let base = o
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(Path::new("."))
                    .to_path_buf();
                present::markdown(&a, &|p| relative(p, &base))
            }
            None => present::markdown(&a, &|p| p.to_string()),
        }
    };
    match output {
        Some(path) => {
            std::fs::write(path, text)
                .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
            eprintln!("dumpview: wrote {}", path.display());
        }
        None => print!("{text}"),
    }
    Ok(if a.all_pass {
        Outcome::Clean
    } else {
        Outcome::Found
    })
}

/// Prints what `cases run` did: `run` (the runtime's report, as JSON) and the analysis of
/// the cases it was asked about; the outcome is the analysis's (clean when every one passes).
///
/// # Errors
/// The JSON could not be written.
pub fn print_run(
    matrix: &Matrix,
    only: &[String],
    run: serde_json::Value,
    json: bool,
) -> Result<Outcome, CliError> {
    let only = (!only.is_empty()).then_some(only);
    let a = analysis(matrix, only);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"run": run, "analysis": a}))?
        );
    } else {
        print!("{}", present::table_text(&a));
        println!(
            "the evidence and the axes: dumpview cases analyze {}",
            matrix.plan.name
        );
    }
    Ok(if a.all_pass {
        Outcome::Clean
    } else {
        Outcome::Found
    })
}

/// Refuses `dir` when it exists and is not empty.
fn new_dir(dir: &Path) -> Result<(), CliError> {
    if std::fs::read_dir(dir).is_ok_and(|mut e| e.next().is_some()) {
        return Err(format!(
            "{}: exists and is not empty (nothing is overwritten)",
            dir.display()
        )
        .into());
    }
    if dir.exists() && !dir.is_dir() {
        return Err(format!("{}: exists and is not a directory", dir.display()).into());
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<(), CliError> {
    std::fs::create_dir_all(to).map_err(|e| format!("{}: cannot create: {e}", to.display()))?;
    for entry in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)
                .map_err(|e| format!("{} -> {}: {e}", entry.path().display(), target.display()))?;
        }
    }
    Ok(())
}

/// `dumpview cases export-run`: replay_op.py, the baseline copy, plan.json and run.sh in a
/// new directory.
///
/// # Errors
/// As [`Matrix::open`]; an existing non-empty output directory; a write failing.
pub fn export_run(root: &Path, name: &str, out: &Path) -> Result<Outcome, CliError> {
    use std::os::unix::fs::PermissionsExt;
    let matrix = open(root, name)?;
    new_dir(out)?;
    std::fs::write(out.join("replay_op.py"), crate::embedded::REPLAY_SOURCE)?;
    std::fs::copy(matrix.plan_path(), out.join(store::PLAN_FILE))?;
    copy_tree(&matrix.baseline_dir(), &out.join(&matrix.plan.baseline.dir))?;
    let script = out.join("run.sh");
    std::fs::write(&script, export::run_script(&matrix.plan))?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    println!(
        "wrote {} ({} cases): run `sh {}` where the operator lives, then `dumpview cases record {} CASE {}/results/CASE` for each case",
        out.display(),
        matrix.plan.cases.len(),
        script.display(),
        name,
        out.display()
    );
    Ok(Outcome::Clean)
}

/// The names and dtypes of a side's outputs as replay.json lists them.
fn layouts(record: &serde_json::Value, side: &str) -> Vec<(String, Option<DType>, usize)> {
    record["sides"][side]["output_layouts"]
        .as_array()
        .map(|outs| {
            outs.iter()
                .filter_map(|o| {
                    let name = o.get("name")?.as_str()?.to_string();
                    let dtype = o
                        .get("dtype")
                        .and_then(|d| d.as_str())
                        .and_then(DType::from_name);
                    let numel = o.get("shape").and_then(|s| s.as_array()).map_or(1, |s| {
                        s.iter().filter_map(|d| d.as_u64()).product::<u64>() as usize
                    });
                    Some((name, dtype, numel))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `mutated arguments q, k` → `[q, k]`.
fn outputs_from(record: &serde_json::Value, side: &str) -> Option<Vec<String>> {
    let text = record["sides"][side]["outputs_from"].as_str()?;
    let names = text.strip_prefix("mutated arguments ")?;
    Some(names.split(", ").map(str::to_string).collect())
}

/// A relative `file.py:function` made absolute when the file is there (the test runs from
/// anywhere); other specs as they are.
fn absolute_spec(spec: &str) -> String {
    if let Some((file, function)) = spec.rsplit_once(':')
        && (file.ends_with(".py") || file.contains('/'))
        && Path::new(file).is_relative()
        && Path::new(file).is_file()
        && let Ok(abs) = std::path::absolute(file)
    {
        return format!("{}:{function}", abs.display());
    }
    spec.to_string()
}

/// `dumpview cases export-test`.
///
/// # Errors
/// As [`Matrix::open`]; a case not in the plan or without a finished attempt holding
/// inputs.pt; a file that exists already (nothing is overwritten).
pub fn export_test(root: &Path, name: &str, case: &str, out: &Path) -> Result<Outcome, CliError> {
    let matrix = open(root, name)?;
    let planned = matrix.plan.case(case).ok_or_else(|| {
        format!(
            "no case {case:?} in {} (its cases: {})",
            matrix.plan_path().display(),
            matrix.plan.ids().join(", ")
        )
    })?;
    let a = analysis(&matrix, Some(&[case.to_string()]));
    let result = &a.cases[0];
    let attempt = matrix
        .attempts(case)
        .into_iter()
        .rev()
        .find(|t| t.complete)
        .ok_or_else(|| {
            format!(
                "case {case} has no finished attempt to export ({})",
                result.reason
            )
        })?;
    let inputs = attempt.dir.join(INPUTS_FILE);
    if !inputs.is_file() {
        return Err(format!(
            "{}: missing: attempt {} of {case} was not run by replay_op.py --batch (rerun it with `dumpview cases run {name} --only {case} --rerun`)",
            inputs.display(),
            attempt.number
        )
        .into());
    }
    let record_path = attempt.dir.join(RECORD_FILE);
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(&record_path)?)
        .map_err(|e| format!("{}: not JSON: {e}", record_path.display()))?;
    let candidate_ok = record["sides"]["candidate"]["status"].as_str() == Some("ok");
    let side = if candidate_ok {
        "candidate"
    } else {
        "reference_native"
    };
    let mut outputs = Vec::new();
    for (out_name, dtype, numel) in layouts(&record, side) {
        let dtype = dtype.ok_or_else(|| {
            format!(
                "{}: output {out_name}: a dtype dumpview cannot read",
                record_path.display()
            )
        })?;
        outputs.push(TestOutput {
            tolerance: export::tolerance(&matrix.plan.standard, dtype, numel),
            name: out_name,
            dtype,
        });
    }
    if outputs.is_empty() {
        return Err(format!(
            "{}: neither the candidate nor the reference in its dtype returned a tensor: nothing to compare",
            record_path.display()
        )
        .into());
    }
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .ok_or_else(|| format!("{}: not a file name", out.display()))?;
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let roles: &[&str] = match matrix.plan.standard {
        Standard::Dynamo => &["reference_native", "golden"],
        _ => &["reference"],
    };
    let mut files: Vec<(PathBuf, PathBuf)> =
        vec![(inputs.clone(), dir.join(format!("{stem}_inputs.pt")))];
    let mut expected = Vec::new();
    for role in roles {
        let from = attempt.dir.join(format!("{role}.pt"));
        if !from.is_file() {
            return Err(format!(
                "{}: missing: the {role} of attempt {} returned nothing",
                from.display(),
                attempt.number
            )
            .into());
        }
        let file = format!("{stem}_{role}.pt");
        files.push((from, dir.join(&file)));
        expected.push((role.to_string(), file));
    }
    if matrix.plan.candidate.starts_with("builtin:") {
        files.push((PathBuf::new(), dir.join("replay_op.py")));
    }
    for (_, to) in files
        .iter()
        .chain(std::iter::once(&(PathBuf::new(), out.to_path_buf())))
    {
        if to.symlink_metadata().is_ok() {
            return Err(format!("{}: exists (nothing is overwritten)", to.display()).into());
        }
    }
    let spec = TestSpec {
        plan: name.to_string(),
        case: case.to_string(),
        summary: format!(
            "Case {case} ({}) of input set {} of {}: {} in attempt {} under the {} standard: {}",
            plan_line(planned),
            matrix.plan.stage,
            matrix.plan.dump,
            result.outcome,
            attempt.number,
            matrix.plan.standard.describe(),
            result.reason
        ),
        candidate: absolute_spec(&matrix.plan.candidate),
        device: record["device"].as_str().unwrap_or("cpu").to_string(),
        call: record["sides"][side]["call"]
            .as_str()
            .or(record["call"].as_str())
            .unwrap_or("keywords")
            .to_string(),
        mode: record["case"]["mode"]
            .as_str()
            .unwrap_or("eager")
            .to_string(),
        outputs_from: outputs_from(&record, side),
        standard: matrix.plan.standard.name().to_string(),
        outputs,
        inputs_file: format!("{stem}_inputs.pt"),
        expected_files: expected,
    };
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    for (from, to) in &files {
        if to.file_name().is_some_and(|n| n == "replay_op.py") {
            std::fs::write(to, crate::embedded::REPLAY_SOURCE)?;
        } else {
            std::fs::copy(from, to)
                .map_err(|e| format!("{} -> {}: {e}", from.display(), to.display()))?;
        }
    }
    std::fs::write(out, export::pytest(&spec))?;
    println!(
        "wrote {} with {} ({}: {}); run: pytest {}",
        out.display(),
        files
            .iter()
            .map(|(_, to)| to
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned())
            .collect::<Vec<_>>()
            .join(", "),
        case,
        result.outcome,
        out.display()
    );
    Ok(Outcome::Clean)
}

fn plan_line(case: &crate::model::cases::Case) -> String {
    present::transform_text(&case.transform)
}
