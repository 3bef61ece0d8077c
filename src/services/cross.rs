//! Cross-feeding two captures' input sets of one stage (`dumpview replay --cross A B`,
//! docs/replay.md "Cross-feeding"): B's operator rerun on A's captured inputs and A's on B's,
//! each through the one replay runner ([`super::replay::run`]) on the host of the dump whose
//! operator runs, and judged against the output the inputs' own run saved
//! (`capture_inputs(..., outputs=...)`) and, when given, against a reference. The outcome is
//! `model::replay::cross`'s.
//!
//! Where each run happens:
//! - the operator's side is local: replay_op.py runs here on the inputs' window, wherever
//!   that is (a remote inputs side's window is copied here first, into a private directory
//!   removed afterwards);
//! - the operator's side is remote: the inputs' window (its manifest and the one input set
//!   file) is uploaded into that replay's private `mktemp -d` directory on the operator's
//!   host, inside the replay's own job, and removed with it (`remote::RemoteHost::run`).
//!
//! Job-friendly as the runner is: owned inputs and results, log lines through a callback, a
//! cancel predicate; nothing printed.

use std::path::{Path, PathBuf};

use super::python::ScriptDir;
use super::replay::{self as runner, ListRequest, ReplayError, ReplayRequest, Upload};
use crate::model::dump::InputSetOutput;
use crate::model::replay::cross::{self, Cross, Direction, InputsCompared, NotJudged};
use crate::model::replay::record::DIED;
use crate::model::replay::side::ComputedTensor;
use crate::model::replay::{ReplayDir, ReplayVerdict, Standard};
use crate::model::tensor::TensorFile;
use crate::remote;

/// One cross-feeding to run.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossRequest {
    /// Dump A, as the user wrote it (local, `ssh://…` or `host:path`).
    pub a: String,
    /// Dump B.
    pub b: String,
    /// `stage#N` (`#N` may be left out when each side captured the stage once).
    pub stage: String,
    /// Runs in place of B's recorded operator (`--candidate`).
    pub candidate: Option<String>,
    /// A reference both runs are also judged against (`--reference`).
    pub reference: Option<String>,
    /// The standard of every judgement.
    pub standard: Standard,
    /// The window's rank on both sides.
    pub rank: Option<u32>,
    /// The window (label or match number) on both sides.
    pub window: Option<String>,
    /// `--attempt N` on both sides.
    pub attempt: Option<u32>,
    /// The Python interpreter (on the operator's host for a remote operator side).
    pub python: Option<String>,
    /// A new or empty directory for both replays (`b-on-a/`, `a-on-b/`); `None`: a new one
    /// under `$XDG_CACHE_HOME/dumpview/replays/`.
    pub out: Option<PathBuf>,
}

/// One side's input set, found.
#[derive(Debug, Clone)]
struct SetOnSide {
    /// `A` or `B`.
    name: &'static str,
    /// The dump as given.
    dump: String,
    /// `stage#N`.
    key: String,
    /// The window directory, where the dump lives (a remote path on a remote host).
    window_dir: String,
    /// Its manifest on the side's machine (`None`: an unfinished window).
    manifest: Option<String>,
    /// The input set file, relative to the window directory.
    file: String,
    /// The recorded operator.
    op: Option<String>,
    /// The outputs it links.
    outputs: Vec<InputSetOutput>,
    /// The working directory of the captured run (resolves a relative `file.py:function`,
    /// and goes on the replay's import path for a `module.function` whose module is there).
    run_cwd: Option<String>,
    /// The set's `args` in its manifest (argument name → description), when read.
    args: Option<serde_json::Value>,
    /// The remote place, for a remote dump.
    remote: Option<(remote::RemoteSpec, Option<remote::SshOptions>)>,
}

/// Runs the cross-feeding and judges it. `ssh_a` and `ssh_b` say how to reach a remote
/// side (default options when `None`).
///
/// # Errors
/// [`ReplayError::Input`] for a dump or stage that is not there (exit 2), naming the file;
/// `Cancelled`; `Failed`.
pub fn run(
    request: &CrossRequest,
    ssh_a: Option<&remote::SshOptions>,
    ssh_b: Option<&remote::SshOptions>,
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<Cross, ReplayError> {
    let a = locate("A", &request.a, request, ssh_a, log, cancelled)?;
    let b = locate("B", &request.b, request, ssh_b, log, cancelled)?;
    let out = match &request.out {
        Some(out) => out.clone(),
        None => runner::default_out_dir(&format!("{}-cross", a.key))?,
    };
    runner::check_out_dir(&out)?;
    std::fs::create_dir_all(&out)
        .map_err(|e| ReplayError::Input(format!("{}: cannot create: {e}", out.display())))?;
    let mut warnings = Vec::new();
    let b_op = match &request.candidate {
        Some(c) => Some((c.clone(), "--candidate".to_string())),
        None => {
            b.op.clone()
                .map(|op| (op, "B's input set (op)".to_string()))
        }
    };
    let a_op =
        a.op.clone()
            .map(|op| (op, "A's input set (op)".to_string()));
    let b_on_a = direction(
        request,
        &b,
        b_op,
        &a,
        &out.join("b-on-a"),
        log,
        cancelled,
        &mut warnings,
    )?;
    let a_on_b = direction(
        request,
        &a,
        a_op,
        &b,
        &out.join("a-on-b"),
        log,
        cancelled,
        &mut warnings,
    )?;
    let inputs = if b_on_a.reproduces == Some(true) && a_on_b.reproduces == Some(true) {
        compare_inputs(&a, &b, log, cancelled)?
    } else {
        InputsCompared::not_compared("inputs not compared: the operators do not agree on both")
    };
    let (outcome, meaning) = cross::conclude(&b_on_a, &a_on_b, &inputs);
    let result = Cross {
        format: "dumpview.replay.cross",
        version: 1,
        stage: a.key.clone(),
        a: request.a.clone(),
        b: request.b.clone(),
        standard: request.standard,
        reference: request.reference.clone(),
        directions: vec![b_on_a, a_on_b],
        inputs,
        outcome,
        meaning,
        caveat: cross::CAVEAT,
        warnings,
    };
    let json =
        serde_json::to_string_pretty(&result).map_err(|e| ReplayError::Failed(e.to_string()))?;
    let path = out.join("cross.json");
    std::fs::write(&path, json + "\n")
        .map_err(|e| ReplayError::Failed(format!("{}: cannot write: {e}", path.display())))?;
    Ok(result)
}

/// Whether A's and B's captured inputs agree: from their manifests' argument descriptions
/// (tensors by their statistics, [`cross::compare_inputs`]); where those cannot tell (a
/// tensor without statistics), from the two runs' saved outputs compared bit for bit (both
/// operators reproduce each other's output, so bit-identical outputs mean nothing differs;
/// outputs that differ leave the inputs not compared).
fn compare_inputs(
    a: &SetOnSide,
    b: &SetOnSide,
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<InputsCompared, ReplayError> {
    let compared = cross::compare_inputs(a.args.as_ref(), b.args.as_ref());
    if compared.agree.is_some() {
        return Ok(compared);
    }
    let (Some(a_saved), Some(b_saved)) = (
        saved_outputs(a, log, cancelled)?,
        saved_outputs(b, log, cancelled)?,
    ) else {
        return Ok(compared);
    };
    if a_saved.len() == b_saved.len() && a_saved == b_saved {
        return Ok(InputsCompared {
            agree: Some(true),
            how: format!(
                "the two runs' saved outputs are bit-identical ({}; compared instead)",
                compared.how
            ),
            differing: Vec::new(),
        });
    }
    Ok(InputsCompared::not_compared(format!(
        "{}, and the two runs' saved outputs differ",
        compared.how
    )))
}

/// `side`'s saved outputs, in order, as contiguous tensors; `None` when one was not saved.
fn saved_outputs(
    side: &SetOnSide,
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<Vec<ComputedTensor>>, ReplayError> {
    let mut tensors = Vec::new();
    for output in &side.outputs {
        let Some(file) = &output.file else {
            return Ok(None);
        };
        tensors.push(read_saved(side, &in_window(side, file), log, cancelled)?);
    }
    Ok((!tensors.is_empty()).then_some(tensors))
}

/// The one tensor a saved output file at `path` on `side`'s machine holds.
fn read_saved(
    side: &SetOnSide,
    path: &str,
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<ComputedTensor, ReplayError> {
    let bytes = read_side_file(side, path, log, cancelled)?;
    let file = TensorFile::from_bytes(bytes, Path::new(path))
        .map_err(|e| ReplayError::Input(format!("{}: {e}", side.name)))?;
    let [entry] = file.entries.as_slice() else {
        return Err(ReplayError::Input(format!(
            "{}: {path}: holds {} tensors; a saved output is one tensor",
            side.name,
            file.entries.len()
        )));
    };
    Ok(cross::to_computed(&file.view(entry)))
}

/// Finds `stage` in `dump` (replay_op.py's `--list --json` where the dump lives, so windows,
/// attempts and unfinished windows are found as a replay finds them) and reads the set's
/// manifest entry (its operator and linked outputs).
fn locate(
    name: &'static str,
    dump: &str,
    request: &CrossRequest,
    ssh: Option<&remote::SshOptions>,
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<SetOnSide, ReplayError> {
    let listing = runner::list(
        &ListRequest {
            dump: dump.to_string(),
            rank: request.rank,
            window: request.window.clone(),
            attempt: request.attempt,
            python: request.python.clone(),
            json: true,
        },
        ssh,
        log,
        cancelled,
    )
    .map_err(|e| match e {
        ReplayError::Input(m) => ReplayError::Input(format!("{name} ({dump}): {m}")),
        other => other,
    })?;
    let document: serde_json::Value = serde_json::from_str(&listing).map_err(|e| {
        ReplayError::Failed(format!("{name} ({dump}): replay_op.py --list --json: {e}"))
    })?;
    let (stage, occurrence) = match request.stage.rsplit_once('#') {
        Some((s, n)) if n.parse::<u32>().is_ok() => (s, Some(n)),
        _ => (request.stage.as_str(), None),
    };
    let mut found = Vec::new();
    let mut held = Vec::new();
    for window in document["windows"].as_array().into_iter().flatten() {
        for set in window["input_sets"].as_array().into_iter().flatten() {
            let key = set["key"].as_str().unwrap_or_default();
            held.push(key.to_string());
            let hit = match occurrence {
                Some(_) => key == request.stage,
                None => set["stage"].as_str() == Some(stage),
            };
            if hit {
                found.push((window.clone(), set.clone()));
            }
        }
    }
    let windows = |found: &[(serde_json::Value, serde_json::Value)]| {
        found
            .iter()
            .map(|(w, s)| {
                format!(
                    "{} in {}",
                    s["key"].as_str().unwrap_or("?"),
                    w["directory"].as_str().unwrap_or("?")
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (window, set) = match found.len() {
        1 => found.remove(0),
        0 => {
            held.sort();
            held.dedup();
            let holds = if held.is_empty() {
                "none: capture one with dp.capture_inputs(\"STAGE\", _op=..., outputs=..., **inputs)"
                    .to_string()
            } else {
                held.join(", ")
            };
            return Err(ReplayError::Input(format!(
                "{name} ({dump}): no input set {}; it holds {holds}",
                request.stage
            )));
        }
        _ => {
            return Err(ReplayError::Input(format!(
                "{name} ({dump}): {} is ambiguous: {}; give stage#N, --rank or --window",
                request.stage,
                windows(&found)
            )));
        }
    };
    let window_dir = window["directory"].as_str().unwrap_or_default().to_string();
    let manifest = window["manifest"].as_str().map(str::to_string);
    let remote = match remote::parse_source(dump).map_err(|e| ReplayError::Input(e.to_string()))? {
        remote::SourceSpec::Local(_) => None,
        remote::SourceSpec::Remote(spec) => Some((spec, ssh.cloned())),
    };
    let mut located = SetOnSide {
        name,
        dump: dump.to_string(),
        key: set["key"].as_str().unwrap_or_default().to_string(),
        window_dir,
        manifest: manifest.clone(),
        file: set["file"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("inputs/{}.pt", set["key"].as_str().unwrap_or_default())),
        op: set["op"].as_str().map(str::to_string),
        outputs: Vec::new(),
        run_cwd: None,
        args: None,
        remote,
    };
    if let Some(manifest) = &manifest {
        let bytes = read_side_file(&located, manifest, log, cancelled)?;
        let value: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| ReplayError::Input(format!("{name}: {manifest}: {e}")))?;
        located.run_cwd = value["run"]["cwd"].as_str().map(str::to_string);
        let entry = value["input_sets"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["stage"] == set["stage"] && e["occurrence"] == set["occurrence"]);
        located.args = entry.and_then(|e| e.get("args")).cloned();
        if let Some(outputs) = entry.and_then(|e| e.get("outputs")) {
            located.outputs = serde_json::from_value(outputs.clone()).map_err(|e| {
                ReplayError::Input(format!(
                    "{name}: {manifest}: input set {}: outputs: {e}",
                    located.key
                ))
            })?;
        }
    }
    Ok(located)
}

/// The bytes of `path` on `side`'s machine (an absolute path, or one relative to the
/// remote login's home).
fn read_side_file(
    side: &SetOnSide,
    path: &str,
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<Vec<u8>, ReplayError> {
    match &side.remote {
        None => std::fs::read(path)
            .map_err(|e| ReplayError::Input(format!("{}: {path}: cannot read: {e}", side.name))),
        Some((spec, ssh)) => {
            let host = runner::connect(spec, ssh.as_ref())?;
            let args = [remote::Word::Literal(path.to_string())];
            let job = remote::Job {
                program: "cat",
                args: &args,
                env: &[],
                stdin: "",
                collect: "out",
            };
            let finished =
                host.run(&job, &mut |line| log(line), cancelled)
                    .map_err(|e| match e {
                        remote::ExecError::Cancelled => ReplayError::Cancelled,
                        other => ReplayError::Failed(other.to_string()),
                    })?;
            if finished.status != 0 {
                return Err(ReplayError::Input(format!(
                    "{} ({}): {path}: cannot read it on {}",
                    side.name,
                    side.dump,
                    host.authority()
                )));
            }
            Ok(finished.stdout)
        }
    }
}

/// The window directory's own name (`match1-occ1`).
fn window_name(side: &SetOnSide) -> String {
    Path::new(&side.window_dir)
        .file_name()
        .map_or_else(|| "window".into(), |n| n.to_string_lossy().into_owned())
}

/// What a replay elsewhere needs of `side`'s window: its manifest (when it has one) and the
/// input set file, relative to the window, with their bytes.
fn window_files(
    side: &SetOnSide,
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
) -> Result<Vec<(String, Vec<u8>)>, ReplayError> {
    let mut files = Vec::new();
    if let Some(manifest) = &side.manifest {
        files.push((
            "manifest.json".to_string(),
            read_side_file(side, manifest, log, cancelled)?,
        ));
    }
    let set = in_window(side, &side.file);
    files.push((
        side.file.clone(),
        read_side_file(side, &set, log, cancelled)?,
    ));
    Ok(files)
}

/// `window_dir/relative` on the side's machine.
fn in_window(side: &SetOnSide, relative: &str) -> String {
    Path::new(&side.window_dir)
        .join(relative)
        .display()
        .to_string()
}

/// A relative `file.py:function` operator resolved against the captured run's working
/// directory, where the file is there (local sides only); anything else as written.
fn resolve_op(op: &str, side: &SetOnSide) -> String {
    let (Some((file, function)), None, Some(cwd)) =
        (op.rsplit_once(':'), &side.remote, &side.run_cwd)
    else {
        return op.to_string();
    };
    if !file.ends_with(".py") || Path::new(file).is_absolute() {
        return op.to_string();
    }
    let there = Path::new(cwd).join(file);
    if there.is_file() {
        format!("{}:{function}", there.display())
    } else {
        op.to_string()
    }
}

/// The stage of `side`'s set (`layers.0.norm` of `layers.0.norm#1`).
fn stage_of(side: &SetOnSide) -> &str {
    side.key
        .rsplit_once('#')
        .map_or(side.key.as_str(), |(s, _)| s)
}

/// Whether `side`'s set is a hooked module's ([`cross::is_module_set`], from its recorded
/// operator and its arguments' names in the manifest).
fn is_module_set(side: &SetOnSide) -> bool {
    let names: Vec<&str> = side
        .args
        .as_ref()
        .and_then(|a| a.as_object())
        .map(|a| a.keys().map(String::as_str).collect())
        .unwrap_or_default();
    side.op
        .as_deref()
        .is_some_and(|op| cross::is_module_set(op, &names))
}

/// The fix for a side whose recorded operator is a module class: a function that takes the
/// set's inputs in their order and calls the module (with its weights) on them.
fn module_fix(side: &SetOnSide) -> String {
    let wrap = "a function that takes the inputs input.0, input.1, ... in order and calls the \
                module on them (e.g. file.py:function whose function builds or loads the module \
                with its weights and returns module(*inputs))";
    match side.name {
        "B" => format!("give --candidate {wrap}"),
        // --candidate replaces B's operator only.
        _ => format!(
            "capture A with dp.capture_inputs(\"{}\", _op=\"file.py:function\", ...) naming \
             an importable operator: {wrap}; or swap A and B, so that --candidate replaces this \
             side's operator",
            stage_of(side)
        ),
    }
}

/// The capture_inputs call that links and saves outputs, for a fix: the set's own stage as
/// the output's (the usual case: the stage the operator's output is captured under) and the
/// recorded operator.
fn capture_fix(side: &SetOnSide, what: &str) -> String {
    let stage = stage_of(side);
    format!(
        "capture {} again with the set's outputs {what}: dp.capture_inputs(\"{stage}\", \
         _op=\"{}\", outputs=(\"{stage}\",), **inputs), outputs= naming the stage whose \
         dp.capture() records the operator's output (or hook the module: its own output is \
         linked), then rerun this command",
        side.name,
        side.op.as_deref().unwrap_or("module:function"),
    )
}

/// `op_side`'s operator on `inputs`' input set, judged against `inputs`' saved outputs and
/// the reference.
#[allow(clippy::too_many_arguments)]
fn direction(
    request: &CrossRequest,
    op_side: &SetOnSide,
    operator: Option<(String, String)>,
    inputs: &SetOnSide,
    out: &Path,
    log: &mut dyn FnMut(&str),
    cancelled: &dyn Fn() -> bool,
    warnings: &mut Vec<String>,
) -> Result<Direction, ReplayError> {
    let saved_files: Vec<Option<String>> = inputs.outputs.iter().map(|o| o.file.clone()).collect();
    let mut direction = Direction {
        operator_of: op_side.name,
        inputs_of: inputs.name,
        operator: operator.as_ref().map(|(op, _)| op.clone()),
        operator_from: operator
            .as_ref()
            .map_or_else(|| "none recorded".into(), |(_, from)| from.clone()),
        input_set: in_window(inputs, &inputs.file),
        saved_outputs: saved_files
            .iter()
            .flatten()
            .map(|f| in_window(inputs, f))
            .collect(),
        host: None,
        out_dir: None,
        against_saved: None,
        against_reference: None,
        reproduces: None,
        not_judged: None,
    };
    let Some(operator) = operator else {
        let fix = match op_side.name {
            "B" => "give --candidate OP (B's operator), or capture B with \
                    dp.capture_inputs(..., _op=\"module:function\")"
                .to_string(),
            _ => "capture A with dp.capture_inputs(..., _op=\"module:function\") naming the \
                  operator it called"
                .to_string(),
        };
        direction.not_judged = Some(NotJudged {
            why: format!(
                "{}'s input set {} records no operator (capture_inputs was called without _op)",
                op_side.name, op_side.key
            ),
            fix,
        });
        return Ok(direction);
    };
    let recorded = operator.1 != "--candidate";
    if recorded && is_module_set(op_side) {
        direction.not_judged = Some(NotJudged {
            why: format!(
                "{}'s recorded operator {operator} is a module class ({}'s input set {} is a \
                 hooked module's, hook(model, input_sets=...)): a replay cannot rebuild the \
                 module with its weights",
                op_side.name,
                op_side.name,
                op_side.key,
                operator = operator.0
            ),
            fix: module_fix(op_side),
        });
        return Ok(direction);
    }
    let (operator, _) = operator;
    let unsaved = if inputs.outputs.is_empty() {
        Some(format!(
            "{}'s input set {} links no outputs: its run's output was not saved, so there is \
             nothing to judge {}'s operator against",
            inputs.name, inputs.key, op_side.name
        ))
    } else if saved_files.iter().any(Option::is_none) {
        Some(format!(
            "{}'s input set {} links outputs {} but did not save them in full",
            inputs.name,
            inputs.key,
            inputs
                .outputs
                .iter()
                .map(|o| o.key.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    } else {
        None
    };
    if unsaved.is_some() && request.reference.is_none() {
        direction.not_judged = Some(NotJudged {
            why: unsaved.unwrap_or_default(),
            fix: capture_fix(inputs, "linked"),
        });
        return Ok(direction);
    }
    let operator = resolve_op(&operator, op_side);
    // Where the operator's side lives, the inputs' window must be readable: as it is (both
    // here), copied into a private directory here (inputs remote), or uploaded into the
    // replay's own private directory on the operator's host.
    let mut local_copy = None;
    let (dump, upload) = match (&op_side.remote, &inputs.remote) {
        (None, None) => (inputs.window_dir.clone(), None),
        (None, Some(_)) => {
            let dir = ScriptDir::new("replay")?;
            let window = dir.path().join(window_name(inputs));
            for (relative, bytes) in window_files(inputs, log, cancelled)? {
                let path = window.join(&relative);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| {
                        ReplayError::Failed(format!("{}: cannot create: {e}", parent.display()))
                    })?;
                }
                std::fs::write(&path, bytes).map_err(|e| {
                    ReplayError::Failed(format!("{}: cannot write: {e}", path.display()))
                })?;
            }
            local_copy = Some(dir);
            (window.display().to_string(), None)
        }
        (Some(_), _) => (
            op_side.dump.clone(),
            Some(Upload {
                window: window_name(inputs),
                files: window_files(inputs, log, cancelled)?,
            }),
        ),
    };
    let replay = ReplayRequest {
        dump,
        stage: inputs.key.clone(),
        candidate: operator.clone(),
        // Without a reference the operator itself fills the reference sides (never judged
        // against: the saved output is what this direction is judged by).
        reference: request
            .reference
            .clone()
            .unwrap_or_else(|| operator.clone()),
        standard: request.standard,
        rank: None,
        window: None,
        attempt: None,
        device: None,
        python: request.python.clone(),
        out: Some(out.to_path_buf()),
        args: Vec::new(),
        arg_maps: Vec::new(),
        python_reference: false,
        // The captured run's working directory, where its own modules were importable (a
        // `module.function` op of a module file there).
        import_path: op_side.run_cwd.iter().cloned().collect(),
    };
    log(&format!(
        "cross: {}'s operator {operator} on {}'s inputs {}",
        op_side.name, inputs.name, direction.input_set
    ));
    let ssh = op_side.remote.as_ref().and_then(|(_, ssh)| ssh.as_ref());
    let ran = runner::run_with_upload(&replay, upload.as_ref(), ssh, log, cancelled);
    drop(local_copy);
    let ran = match ran {
        Ok(ran) => ran,
        // The operator names nothing importable here: this direction cannot be judged. Any
        // other input error (no Python with torch, a refused set, a bad --reference) is the
        // command's (exit 2).
        Err(ReplayError::Input(message)) if message.starts_with(&format!("{operator}: ")) => {
            direction.not_judged = Some(NotJudged {
                why: format!(
                    "{}'s operator cannot be loaded where it runs: {message}",
                    op_side.name
                ),
                fix: format!(
                    "make {operator} importable by the Python that runs it{} (install its \
                     package or put its module on PYTHONPATH, or give the file as \
                     /abs/path/file.py:function){}",
                    direction
                        .host
                        .as_deref()
                        .or(op_side.remote.as_ref().map(|(spec, _)| spec.host.as_str()))
                        .map_or(String::new(), |h| format!(" on {h}")),
                    match op_side.name {
                        "B" => ", or name another operator with --candidate".to_string(),
                        // --candidate replaces B's operator only.
                        _ => format!(
                            ", or capture A again with dp.capture_inputs(\"{}\", \
                             _op=\"module:function\", ...) naming an importable operator",
                            stage_of(op_side)
                        ),
                    }
                ),
            });
            return Ok(direction);
        }
        Err(e) => return Err(e),
    };
    direction.host = ran.run.host.clone();
    direction.out_dir = Some(ran.run.out_dir.clone());
    warnings.extend(ran.warnings.iter().cloned());
    if request.reference.is_some() {
        direction.against_reference = Some(ran.replay.clone());
    }
    if let Some(why) = unsaved {
        direction.not_judged = Some(NotJudged {
            why,
            fix: capture_fix(inputs, "linked"),
        });
        return Ok(direction);
    }
    let dir = ReplayDir::open(out).map_err(ReplayError::Failed)?;
    let mut saved = Vec::new();
    let paths: Vec<String> = direction.saved_outputs.clone();
    let names = cross::saved_names(
        paths.len(),
        &dir.files
            .candidate
            .as_ref()
            .map(|c| c.keys())
            .unwrap_or_default(),
    );
    for (path, name) in paths.iter().zip(names) {
        saved.push((name, read_saved(inputs, path, log, cancelled)?));
    }
    let judged = cross::judge_against_saved(
        &dir.record,
        dir.files.candidate,
        &saved,
        &format!("{}'s saved output", inputs.name),
        request.standard,
        &out.display().to_string(),
    )
    .map_err(ReplayError::Failed)?;
    direction.reproduces = match judged.verdict {
        ReplayVerdict::Crash | ReplayVerdict::Unsupported => {
            let raised = dir
                .record
                .sides
                .candidate
                .as_ref()
                .and_then(|c| c.exception.as_ref())
                .is_some_and(|e| e.kind != DIED);
            direction.not_judged = Some(NotJudged {
                why: if raised {
                    format!(
                        "{}'s operator raised on {}'s inputs: {}",
                        op_side.name, inputs.name, judged.reason
                    )
                } else {
                    format!(
                        "{}'s operator did not compute on {}'s inputs: {}",
                        op_side.name, inputs.name, judged.reason
                    )
                },
                fix: format!(
                    "check that {operator} runs on {}'s input set {} (its arguments' names, \
                     dtypes, shapes and device: dumpview replay {} --list), then rerun this \
                     command",
                    inputs.name, inputs.key, inputs.dump
                ),
            });
            None
        }
        _ => Some(cross::reproduces(&judged)),
    };
    direction.against_saved = Some(judged);
    Ok(direction)
}
