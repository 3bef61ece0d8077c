//! The plan of a case matrix ([`Plan`], `plan.json`): the captured baseline and an explicit list
//! of cases, each the baseline with exactly one axis changed (seed 002's "one dimension at a
//! time"), built by [`build`] from `--axis` specs and checked by [`Plan::parse`] when read back.
//!
//! Axes (docs/cases.md gives each with its semantics):
//!
//! | spec | changes |
//! |---|---|
//! | `dtype=V,…` | every floating tensor argument cast to V (`float16`, `bfloat16`, `float32`, `float64`) |
//! | `dtype[x]=V,…` | argument x only |
//! | `layout[x]=contiguous,transposed,strided` | how x is stored, its logical shape and values kept |
//! | `shape=captured,half_rows,odd_last_dim` (`shape[x]=…`) | the first tensor argument's (x's) size, dimensions tied by `--tie` following |
//! | `mode=eager,compile` | the candidate run eagerly or under `torch.compile` |
//! | `option:NAME=V,…` | the scalar argument NAME set to V (JSON, `True`/`False`/`None`, else a string) |
//!
//! A value that leaves the baseline as it is folds into the baseline case (listed in
//! [`Plan::folded`]); two specs that make the same case are an error naming both.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::names;
use crate::model::input_set::{InputSet, InputValue};
use crate::model::replay::Standard;
use crate::model::tensor::DType;

/// `format` of `plan.json`.
pub const PLAN_FORMAT: &str = "dumpview.cases.plan";
/// `version` of `plan.json` this build writes and reads.
pub const PLAN_VERSION: u32 = 1;
/// The id of the captured call itself, always the first case.
pub const BASELINE: &str = "baseline";
/// The dtypes the `dtype` axis takes.
pub const DTYPES: [&str; 4] = ["float16", "bfloat16", "float32", "float64"];
/// The values the `layout[x]` axis takes.
pub const LAYOUTS: [&str; 3] = ["contiguous", "transposed", "strided"];
/// The values the `shape` axis takes.
pub const SHAPES: [&str; 3] = ["captured", "half_rows", "odd_last_dim"];
/// The values the `mode` axis takes.
pub const MODES: [&str; 2] = ["eager", "compile"];

/// A case matrix as planned: what `dumpview cases plan` writes as `plan.json` and every other
/// `cases` command reads (its JSON Schema: assets/cases_plan.schema.json).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// [`PLAN_FORMAT`].
    pub format: String,
    /// [`PLAN_VERSION`].
    pub version: u32,
    /// The matrix's NAME (its directory under the cases directory).
    pub name: String,
    /// When it was planned, seconds since the Unix epoch.
    pub created_unix_s: f64,
    /// DUMP as the user gave it (a local path, or `ssh://…` / `host:path`: where
    /// `cases run` runs the batch).
    pub dump: String,
    /// `stage#N` of the input set.
    pub stage: String,
    /// The window's rank.
    pub rank: u32,
    /// The window's directory name (`match1-occ1`), for `replay_op.py --window`.
    pub window: String,
    /// The window's label.
    pub label: String,
    /// The candidate operator, as `dumpview replay --candidate` takes it.
    pub candidate: String,
    /// The reference, as `--reference` takes it.
    pub reference: String,
    /// The standard every case is judged by.
    pub standard: Standard,
    /// The captured call and where its copy lies.
    pub baseline: Baseline,
    /// The `--axis` specs as given and read.
    pub axes: Vec<AxisPlan>,
    /// `--tie A.D=B.E` as given: dimensions a shape transform changes together.
    pub ties: Vec<String>,
    /// `--untie A.D` as given: dimensions that keep their size though they look tied.
    pub untied: Vec<String>,
    /// The cases, the baseline first, then in the order of the specs and their values.
    pub cases: Vec<Case>,
    /// Axis values that left the baseline unchanged, folded into it.
    pub folded: Vec<Folded>,
    /// With `--vs`: how the other capture compares at the stage.
    pub vs: Option<VsCheck>,
}

/// The captured input set every case starts from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// Its copy, relative to the matrix directory: a window directory holding `manifest.json`
    /// (that one input set) and `inputs/<stage>#<N>.pt`.
    pub dir: String,
    /// The manifest it was copied from, as read (a local path, or the remote mirror's).
    pub source_manifest: String,
    /// The `.pt` file, relative to [`Baseline::dir`].
    pub input_file: String,
    /// The operator the probe recorded (`_op`).
    pub op: Option<String>,
    /// The arguments in call order.
    pub args: Vec<BaselineArg>,
}

/// One captured argument, as the axes see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineArg {
    /// The argument name.
    pub name: String,
    /// `tensor`, `int`, `float`, `bool`, `none`, `str`, `dtype`, `device`, `list`, `tuple`,
    /// `dict` or `repr` (docs/manifest.md).
    pub kind: String,
    /// A tensor's dtype.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// A tensor's shape, elements per dimension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<usize>>,
    /// A tensor's strides, in elements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stride: Option<Vec<usize>>,
    /// A tensor's captured device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// A scalar's (or a list of scalars') value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    /// Elements of every tensor the argument holds (a list of tensors counts each).
    pub elements: u64,
    /// Bytes of those elements.
    pub bytes: u64,
}

impl BaselineArg {
    fn tensor(&self) -> Option<(DType, &[usize], &[usize])> {
        match (&self.dtype, &self.shape, &self.stride) {
            (Some(d), Some(shape), Some(stride)) if self.kind == "tensor" => {
                DType::from_name(d).map(|d| (d, shape.as_slice(), stride.as_slice()))
            }
            _ => None,
        }
    }
}

/// One `--axis` spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AxisPlan {
    /// As given: `dtype=float16,bfloat16`.
    pub spec: String,
    /// `dtype`, `layout`, `shape`, `mode` or `option:NAME`.
    pub axis: String,
    /// The argument in `[x]`, or (shape) the first tensor argument when none is given.
    pub target: Option<String>,
    /// The values, as given.
    pub values: Vec<String>,
}

/// One case: the baseline with one axis set to one value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// `baseline`, or the axis and value: `dtype=bfloat16`, `layout.x=transposed`,
    /// `option.eps=1e-5` (`[A-Za-z0-9_.=-]+`: it names the case's directory).
    pub id: String,
    /// `dtype`, `dtype[x]`, `layout[x]`, `shape`, `shape[x]`, `mode`, `option:NAME`; `None`
    /// for the baseline.
    pub axis: Option<String>,
    /// The value, as given.
    pub value: Option<String>,
    /// The `--axis` spec it comes from.
    pub spec: Option<String>,
    /// What replay_op.py changes in the rebuilt baseline.
    pub transform: Transform,
    /// Elements of every tensor argument after the transform.
    pub elements: u64,
    /// Bytes of those elements.
    pub bytes: u64,
}

/// A case's change to the baseline, resolved so that replay_op.py applies it as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Transform {
    /// The baseline: nothing changes.
    None,
    /// Cast these floating tensor arguments (name -> dtype).
    Dtype {
        /// Argument name -> the dtype it is cast to.
        args: BTreeMap<String, String>,
    },
    /// Store `arg` anew: `contiguous`, `transposed` or `strided`, with these strides.
    Layout {
        /// The tensor argument.
        arg: String,
        /// `contiguous`, `transposed` or `strided`.
        layout: String,
        /// Its strides in that layout, in elements.
        stride: Vec<usize>,
    },
    /// Cut tensors to smaller shapes (their leading elements), each stored densely in its
    /// captured dimension order.
    Shape {
        /// `half_rows` or `odd_last_dim`.
        shape: String,
        /// Every argument that changes.
        args: Vec<ShapeArg>,
    },
    /// Run the candidate eagerly or under `torch.compile`.
    Mode {
        /// `eager` or `compile`.
        mode: String,
    },
    /// Set a scalar argument.
    Option {
        /// The argument.
        name: String,
        /// Its value.
        value: serde_json::Value,
    },
}

/// One argument a shape transform changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeArg {
    /// The tensor argument.
    pub arg: String,
    /// Its new shape (each size at most the captured one).
    pub shape: Vec<usize>,
    /// Its strides, dense in the captured dimension order.
    pub stride: Vec<usize>,
}

/// An axis value folded into the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Folded {
    /// The spec it came from.
    pub spec: String,
    /// The value.
    pub value: String,
    /// Why it is the baseline: `x is float32 as captured`.
    pub why: String,
}

/// With `--vs`: the other capture at the stage, from dumpview diff's rule at its default
/// tolerances (computed when the plan is made).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VsCheck {
    /// The other capture, as given.
    pub dump: String,
    /// The record key compared: the stage's `stage#N`.
    pub key: String,
    /// Whether both captures hold that record (in the same rank and window).
    pub paired: bool,
    /// Whether the pair diverges (structural, non-finite, magnitude, values moved).
    pub diverges: bool,
    /// The pair's verdict (`agree`, `magnitude`, …), when paired.
    pub verdict: Option<String>,
    /// The window pair's first divergence (`stage#N`), if any.
    pub first_divergence: Option<String>,
    /// What the comparison says, in words.
    pub detail: String,
}

/// What [`build`] needs.
#[derive(Debug, Clone)]
pub struct PlanRequest<'a> {
    /// NAME.
    pub name: &'a str,
    /// DUMP as given.
    pub dump: &'a str,
    /// `stage#N`.
    pub stage: &'a str,
    /// The window's rank, directory name and label.
    pub rank: u32,
    /// The window's directory name.
    pub window: &'a str,
    /// The window's label.
    pub label: &'a str,
    /// OP.
    pub candidate: &'a str,
    /// REF.
    pub reference: &'a str,
    /// The standard.
    pub standard: Standard,
    /// The input set read from its `.pt` (argument order, dtypes, shapes, strides, values).
    pub input_set: &'a InputSet,
    /// The recorded `_op`.
    pub op: Option<&'a str>,
    /// The manifest it comes from.
    pub source_manifest: &'a str,
    /// The input set's `.pt`, relative to its window directory (the manifest's `file`).
    pub input_file: &'a str,
    /// `--axis` specs.
    pub axes: &'a [String],
    /// `--tie` specs.
    pub ties: &'a [String],
    /// `--untie` specs.
    pub untied: &'a [String],
    /// When it is planned, seconds since the Unix epoch.
    pub created_unix_s: f64,
}

/// Where the baseline copy lives inside the matrix directory.
pub const BASELINE_DIR: &str = "baseline";

/// Builds the plan: the baseline, then one case per axis value that changes something.
///
/// # Errors
/// A message naming the spec and the problem: a refused NAME; an unknown axis or value; an
/// argument that is not there or that the transform cannot apply to (a 1-d `transposed`, a
/// `dtype` of an integer tensor, a shape whose size another argument shares untied); a tie
/// between dimensions of different sizes; a case id outside `[A-Za-z0-9_.=-]+`; two specs
/// that make the same case (both named).
pub fn build(request: &PlanRequest) -> Result<Plan, String> {
    names::check("case matrix name", request.name)?;
    let args = baseline_args(request.input_set);
    let ties = Ties::parse(request.ties, request.untied, &args)?;
    let mut cases = vec![Case {
        id: BASELINE.into(),
        axis: None,
        value: None,
        spec: None,
        transform: Transform::None,
        elements: args.iter().map(|a| a.elements).sum(),
        bytes: args.iter().map(|a| a.bytes).sum(),
    }];
    let mut axes = Vec::new();
    let mut folded = Vec::new();
    // The effect of each case (its transform), with the spec and id that made it.
    let mut made: Vec<(String, String, String)> = Vec::new();
    for spec in request.axes {
        let axis = parse_axis(spec, &args)?;
        for value in &axis.values {
            let outcome = resolve(&axis, value, &args, &ties, request.stage)
                .map_err(|e| format!("--axis {spec}: {e}"))?;
            match outcome {
                Resolved::Folds(why) => folded.push(Folded {
                    spec: spec.clone(),
                    value: value.clone(),
                    why,
                }),
                Resolved::Case(transform) => {
                    let id = case_id(&axis, value);
                    names::check("case id", &id).map_err(|e| {
                        format!("--axis {spec}: value {value:?} makes no valid case id: {e}")
                    })?;
                    let effect = serde_json::to_string(&transform).expect("a transform serializes");
                    if let Some((other_spec, other_id, _)) =
                        made.iter().find(|(_, id2, e)| *e == effect || *id2 == id)
                    {
                        return Err(format!(
                            "--axis {other_spec} (case {other_id}) and --axis {spec} (value {value}, case {id}) make the same case; give it once"
                        ));
                    }
                    made.push((spec.clone(), id.clone(), effect));
                    let (elements, bytes) = size_after(&args, &transform);
                    cases.push(Case {
                        id,
                        axis: Some(axis.label()),
                        value: Some(value.clone()),
                        spec: Some(spec.clone()),
                        transform,
                        elements,
                        bytes,
                    });
                }
            }
        }
        axes.push(AxisPlan {
            spec: spec.clone(),
            axis: axis.name.clone(),
            target: axis.target.clone(),
            values: axis.values.clone(),
        });
    }
    Ok(Plan {
        format: PLAN_FORMAT.into(),
        version: PLAN_VERSION,
        name: request.name.into(),
        created_unix_s: request.created_unix_s,
        dump: request.dump.into(),
        stage: request.stage.into(),
        rank: request.rank,
        window: request.window.into(),
        label: request.label.into(),
        candidate: request.candidate.into(),
        reference: request.reference.into(),
        standard: request.standard,
        baseline: Baseline {
            dir: BASELINE_DIR.into(),
            source_manifest: request.source_manifest.into(),
            input_file: request.input_file.to_string(),
            op: request.op.map(str::to_string),
            args,
        },
        axes,
        ties: request.ties.to_vec(),
        untied: request.untied.to_vec(),
        cases,
        folded,
        vs: None,
    })
}

impl Plan {
    /// Reads `plan.json` from `bytes`; `path` names it in errors.
    ///
    /// # Errors
    /// A message starting with `path`: not JSON (a truncated file), not a plan (another
    /// `format`, another `version`, a field missing or of the wrong type, an unknown field),
    /// a NAME or case id outside `[A-Za-z0-9_.=-]+` (`../x`), a case planned twice, no
    /// baseline first, a case whose transform names an argument the baseline lacks.
    pub fn parse(bytes: &[u8], path: &str) -> Result<Plan, String> {
        let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
            if e.is_eof() {
                format!("{path}: truncated: the JSON ends early ({e})")
            } else {
                format!("{path}: not valid JSON ({e})")
            }
        })?;
        match value.get("format").and_then(|f| f.as_str()) {
            Some(PLAN_FORMAT) => {}
            _ => {
                return Err(format!(
                    "{path}: not a dumpview case plan (format is not \"{PLAN_FORMAT}\")"
                ));
            }
        }
        match value.get("version").and_then(|v| v.as_u64()) {
            Some(v) if v == u64::from(PLAN_VERSION) => {}
            other => {
                return Err(format!(
                    "{path}: plan version {}; this dumpview reads version {PLAN_VERSION}",
                    other.map_or("missing".to_string(), |v| v.to_string())
                ));
            }
        }
        let plan: Plan = serde_json::from_value(value)
            .map_err(|e| format!("{path}: not a version-{PLAN_VERSION} case plan: {e}"))?;
        plan.check().map_err(|e| format!("{path}: {e}"))?;
        Ok(plan)
    }

    /// The checks [`Plan::parse`] makes beyond the JSON's shape.
    ///
    /// # Errors
    /// As [`Plan::parse`], without the path.
    pub fn check(&self) -> Result<(), String> {
        names::check("case matrix name", &self.name)?;
        names::check("baseline directory", &self.baseline.dir)?;
        let file = &self.baseline.input_file;
        if file.starts_with('/')
            || file
                .split('/')
                .any(|p| p.is_empty() || p == "." || p == "..")
        {
            return Err(format!(
                "baseline.input_file {file:?} leaves the baseline directory"
            ));
        }
        match self.cases.first() {
            Some(case) if case.id == BASELINE && case.transform == Transform::None => {}
            _ => return Err("the first case is not the baseline".into()),
        }
        let mut seen = std::collections::HashSet::new();
        for (i, case) in self.cases.iter().enumerate() {
            names::check("case id", &case.id).map_err(|e| format!("cases[{i}]: {e}"))?;
            if !seen.insert(case.id.as_str()) {
                return Err(format!("case {} is planned twice", case.id));
            }
            if i > 0 && case.transform == Transform::None {
                return Err(format!("case {} changes nothing", case.id));
            }
            for name in case.transform.arguments() {
                if !self.baseline.args.iter().any(|a| a.name == name) {
                    return Err(format!(
                        "case {}: no argument {name:?} in the baseline",
                        case.id
                    ));
                }
            }
        }
        Ok(())
    }

    /// The case `id`.
    pub fn case(&self, id: &str) -> Option<&Case> {
        self.cases.iter().find(|c| c.id == id)
    }

    /// The ids, in plan order.
    pub fn ids(&self) -> Vec<&str> {
        self.cases.iter().map(|c| c.id.as_str()).collect()
    }
}

impl Transform {
    /// The arguments it names.
    pub fn arguments(&self) -> Vec<&str> {
        match self {
            Transform::None | Transform::Mode { .. } => Vec::new(),
            Transform::Dtype { args } => args.keys().map(String::as_str).collect(),
            Transform::Layout { arg, .. } => vec![arg.as_str()],
            Transform::Shape { args, .. } => args.iter().map(|a| a.arg.as_str()).collect(),
            Transform::Option { name, .. } => vec![name.as_str()],
        }
    }
}

impl Case {
    /// The axis family: `dtype`, `layout`, `shape`, `mode`, `option:NAME`; `None` for the
    /// baseline.
    pub fn family(&self) -> Option<&str> {
        self.axis
            .as_deref()
            .map(|a| a.split_once('[').map_or(a, |(family, _)| family))
    }

    /// The argument in the axis's `[x]`.
    pub fn target(&self) -> Option<&str> {
        self.axis
            .as_deref()
            .and_then(|a| a.split_once('['))
            .map(|(_, rest)| rest.trim_end_matches(']'))
    }
}

// ----------------------------------------------------------------------------- the baseline

fn baseline_args(set: &InputSet) -> Vec<BaselineArg> {
    set.args
        .iter()
        .map(|(name, value)| {
            let (elements, bytes) = tensor_size(value);
            let mut arg = BaselineArg {
                name: name.clone(),
                kind: value.kind().into(),
                dtype: None,
                shape: None,
                stride: None,
                device: None,
                value: None,
                elements,
                bytes,
            };
            match value {
                InputValue::Tensor(t) => {
                    arg.dtype = Some(t.dtype.name().into());
                    arg.shape = Some(t.shape.clone());
                    arg.stride = Some(t.stride.clone());
                    arg.device = Some(t.device.clone());
                }
                other => arg.value = scalar_json(other),
            }
            arg
        })
        .collect()
}

fn tensor_size(value: &InputValue) -> (u64, u64) {
    match value {
        InputValue::Tensor(t) => (t.numel() as u64, (t.numel() * t.dtype.size()) as u64),
        InputValue::List(items) | InputValue::Tuple(items) => items
            .iter()
            .map(tensor_size)
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)),
        InputValue::Dict(items) => items
            .iter()
            .map(|(_, v)| tensor_size(v))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)),
        _ => (0, 0),
    }
}

/// A scalar (or a list of scalars) as JSON; `None` for tensors and what JSON cannot hold.
fn scalar_json(value: &InputValue) -> Option<serde_json::Value> {
    use serde_json::Value;
    Some(match value {
        InputValue::Int(i) => Value::from(*i),
        InputValue::Float(f) => serde_json::Number::from_f64(*f).map(Value::Number)?,
        InputValue::Bool(b) => Value::Bool(*b),
        InputValue::None => Value::Null,
        InputValue::Str(s) => Value::String(s.clone()),
        InputValue::DType(s) | InputValue::Device(s) | InputValue::Repr(s) => {
            Value::String(s.clone())
        }
        InputValue::List(items) | InputValue::Tuple(items) => {
            Value::Array(items.iter().map(scalar_json).collect::<Option<Vec<_>>>()?)
        }
        InputValue::Tensor(_) | InputValue::Dict(_) => return None,
    })
}

fn size_after(args: &[BaselineArg], transform: &Transform) -> (u64, u64) {
    let mut elements = 0;
    let mut bytes = 0;
    for arg in args {
        let (mut e, mut b) = (arg.elements, arg.bytes);
        match transform {
            Transform::Dtype { args: cast } => {
                if let (Some(to), Some((from, ..))) = (cast.get(&arg.name), arg.tensor()) {
                    let to = DType::from_name(to).expect("dtype values are checked");
                    b = b / from.size() as u64 * to.size() as u64;
                }
            }
            Transform::Shape { args: cut, .. } => {
                if let (Some(c), Some((dtype, ..))) =
                    (cut.iter().find(|c| c.arg == arg.name), arg.tensor())
                {
                    e = c.shape.iter().product::<usize>() as u64;
                    b = e * dtype.size() as u64;
                }
            }
            _ => {}
        }
        elements += e;
        bytes += b;
    }
    (elements, bytes)
}

// ----------------------------------------------------------------------------- axes

/// One `--axis` read.
#[derive(Debug, Clone, PartialEq)]
struct Axis {
    /// `dtype`, `layout`, `shape`, `mode`, `option:NAME`.
    name: String,
    /// `[x]`, or the shape axis's default target.
    target: Option<String>,
    /// Whether `[x]` was written.
    explicit_target: bool,
    values: Vec<String>,
}

impl Axis {
    /// `dtype[x]` as written (or `dtype`).
    fn label(&self) -> String {
        match (&self.target, self.explicit_target) {
            (Some(t), true) => format!("{}[{t}]", self.name),
            _ => self.name.clone(),
        }
    }
}

/// `dtype.x`, `option.eps` + `=` + value.
fn case_id(axis: &Axis, value: &str) -> String {
    let head = match (&axis.target, axis.explicit_target) {
        (Some(t), true) => format!("{}.{t}", axis.name),
        _ => axis.name.replacen("option:", "option.", 1),
    };
    format!("{head}={value}")
}

const AXES_KNOWN: &str = "dtype, dtype[ARG], layout[ARG], shape, shape[ARG], mode, option:NAME";

fn parse_axis(spec: &str, args: &[BaselineArg]) -> Result<Axis, String> {
    let (head, values) = spec
        .split_once('=')
        .ok_or_else(|| format!("--axis {spec}: expected AXIS=V1,V2,… (axes: {AXES_KNOWN})"))?;
    let (name, target) = match head.split_once('[') {
        Some((name, rest)) => {
            let target = rest
                .strip_suffix(']')
                .filter(|t| !t.is_empty())
                .ok_or_else(|| {
                    format!("--axis {spec}: expected {name}[ARG] with an argument name")
                })?;
            (name.to_string(), Some(target.to_string()))
        }
        None => (head.to_string(), None),
    };
    let family = name.split_once(':').map_or(name.as_str(), |(f, _)| f);
    match (family, &target) {
        ("dtype" | "shape", _) | ("layout", Some(_)) | ("mode", None) => {}
        ("option", None) if name.len() > "option:".len() => {}
        ("layout", None) => {
            return Err(format!(
                "--axis {spec}: layout needs the argument it stores anew: layout[ARG]=…"
            ));
        }
        ("mode" | "option", Some(_)) => {
            return Err(format!("--axis {spec}: {family} takes no [ARG]"));
        }
        _ => {
            return Err(format!(
                "--axis {spec}: unknown axis {head:?} (axes: {AXES_KNOWN})"
            ));
        }
    }
    if let Some(t) = &target
        && !args.iter().any(|a| &a.name == t)
    {
        return Err(format!(
            "--axis {spec}: no argument {t:?} (arguments: {})",
            args.iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let values = split_values(values);
    if values.iter().any(String::is_empty) {
        return Err(format!("--axis {spec}: an empty value"));
    }
    for (i, v) in values.iter().enumerate() {
        if values[..i].contains(v) {
            return Err(format!("--axis {spec}: value {v} is given twice"));
        }
    }
    let explicit_target = target.is_some();
    let target = match (family, target) {
        ("shape", None) => Some(
            args.iter()
                .find(|a| a.tensor().is_some())
                .map(|a| a.name.clone())
                .ok_or_else(|| format!("--axis {spec}: the input set has no tensor argument"))?,
        ),
        (_, t) => t,
    };
    Ok(Axis {
        name,
        target,
        explicit_target,
        values,
    })
}

/// Splits `a,b,[1, 2]` at commas outside brackets.
fn split_values(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '[' | '{' => depth += 1,
            ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(current.trim().to_string());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    out.push(current.trim().to_string());
    out
}

enum Resolved {
    Folds(String),
    Case(Transform),
}

fn resolve(
    axis: &Axis,
    value: &str,
    args: &[BaselineArg],
    ties: &Ties,
    stage: &str,
) -> Result<Resolved, String> {
    let family = axis
        .name
        .split_once(':')
        .map_or(axis.name.as_str(), |(f, _)| f);
    match family {
        "dtype" => resolve_dtype(axis, value, args, stage),
        "layout" => resolve_layout(axis, value, args),
        "shape" => resolve_shape(axis, value, args, ties),
        "mode" => match value {
            "eager" => Ok(Resolved::Folds(
                "the baseline runs the candidate eagerly".into(),
            )),
            "compile" => Ok(Resolved::Case(Transform::Mode {
                mode: "compile".into(),
            })),
            other => Err(format!(
                "unknown mode {other:?} (one of {})",
                MODES.join(", ")
            )),
        },
        _ => resolve_option(&axis.name["option:".len()..], value, args, stage),
    }
}

fn resolve_dtype(
    axis: &Axis,
    value: &str,
    args: &[BaselineArg],
    stage: &str,
) -> Result<Resolved, String> {
    if !DTYPES.contains(&value) {
        return Err(format!(
            "unknown dtype {value:?} (one of {})",
            DTYPES.join(", ")
        ));
    }
    let mut cast = BTreeMap::new();
    match &axis.target {
        Some(t) => {
            let arg = args
                .iter()
                .find(|a| &a.name == t)
                .expect("parse_axis checked");
            let (dtype, ..) = arg.tensor().ok_or_else(|| {
                format!("{t} is a {}, not a tensor: dtype casts tensors", arg.kind)
            })?;
            if !dtype.is_float() {
                return Err(format!(
                    "{t} is {}: dtype casts floating tensors only",
                    dtype.name()
                ));
            }
            if dtype.name() == value {
                return Ok(Resolved::Folds(format!("{t} is {value} as captured")));
            }
            cast.insert(t.clone(), value.to_string());
        }
        None => {
            let floats: Vec<_> = args
                .iter()
                .filter_map(|a| a.tensor().map(|(d, ..)| (a, d)))
                .filter(|(_, d)| d.is_float())
                .collect();
            if floats.is_empty() {
                return Err(format!("{stage} has no floating tensor argument to cast"));
            }
            for (arg, dtype) in floats {
                if dtype.name() != value {
                    cast.insert(arg.name.clone(), value.to_string());
                }
            }
            if cast.is_empty() {
                return Ok(Resolved::Folds(format!(
                    "every floating tensor argument is {value} as captured"
                )));
            }
        }
    }
    Ok(Resolved::Case(Transform::Dtype { args: cast }))
}

/// Row-major strides of `shape`, in elements.
pub fn contiguous_stride(shape: &[usize]) -> Vec<usize> {
    let mut stride = vec![0; shape.len()];
    let mut n = 1;
    for d in (0..shape.len()).rev() {
        stride[d] = n;
        n *= shape[d].max(1);
    }
    stride
}

/// The strides `layout` gives a tensor of `shape` (replay_op.py `layout_stride`): contiguous;
/// transposed (stored as the transpose of a contiguous tensor: the last two dimensions'
/// strides swapped); strided (every other element of a buffer twice as long in the last
/// dimension: last stride 2).
pub fn layout_stride(shape: &[usize], layout: &str) -> Vec<usize> {
    match layout {
        "contiguous" => contiguous_stride(shape),
        "transposed" => {
            let n = shape.len();
            let mut swapped = shape.to_vec();
            swapped.swap(n - 2, n - 1);
            let mut stride = contiguous_stride(&swapped);
            stride.swap(n - 2, n - 1);
            stride
        }
        _ => {
            let mut wide = shape.to_vec();
            *wide.last_mut().expect("strided needs a dimension") *= 2;
            let mut stride = contiguous_stride(&wide);
            *stride.last_mut().expect("one dimension") = 2;
            stride
        }
    }
}

/// Dense strides of `shape` with its dimensions nested as in `like` (largest stride
/// outermost; replay_op.py `dense_stride`): contiguous when `like` is.
pub fn dense_stride(shape: &[usize], like: &[usize]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..shape.len()).collect();
    order.sort_by_key(|&d| (std::cmp::Reverse(like[d]), d));
    let mut stride = vec![0; shape.len()];
    let mut n = 1;
    for &d in order.iter().rev() {
        stride[d] = n;
        n *= shape[d].max(1);
    }
    stride
}

/// Whether two stride lists lay out `shape` alike (strides of size-1 dimensions do not
/// matter; an empty tensor has one layout).
pub fn same_layout(shape: &[usize], a: &[usize], b: &[usize]) -> bool {
    shape.contains(&0)
        || shape
            .iter()
            .zip(a.iter().zip(b))
            .all(|(&size, (x, y))| size <= 1 || x == y)
}

fn resolve_layout(axis: &Axis, value: &str, args: &[BaselineArg]) -> Result<Resolved, String> {
    if !LAYOUTS.contains(&value) {
        return Err(format!(
            "unknown layout {value:?} (one of {})",
            LAYOUTS.join(", ")
        ));
    }
    let t = axis.target.as_deref().expect("layout has a target");
    let arg = args
        .iter()
        .find(|a| a.name == t)
        .expect("parse_axis checked");
    let (_, shape, stride) = arg
        .tensor()
        .ok_or_else(|| format!("{t} is a {}, not a tensor: layout stores tensors", arg.kind))?;
    match value {
        "transposed" if shape.len() < 2 => {
            return Err(format!(
                "{t} has shape {shape:?}: transposed swaps the last two dimensions' strides and needs two dimensions"
            ));
        }
        "strided" if shape.is_empty() => {
            return Err(format!("{t} is 0-d: strided needs a last dimension"));
        }
        _ => {}
    }
    let wanted = layout_stride(shape, value);
    if same_layout(shape, &wanted, stride) {
        return Ok(Resolved::Folds(format!(
            "{t} (shape {shape:?}, stride {stride:?}) is stored {value} as captured"
        )));
    }
    Ok(Resolved::Case(Transform::Layout {
        arg: t.to_string(),
        layout: value.to_string(),
        stride: wanted,
    }))
}

/// `--tie` and `--untie`, read against the baseline.
#[derive(Debug, Default)]
struct Ties {
    /// Undirected edges between (argument, non-negative dimension).
    edges: Vec<((String, usize), (String, usize))>,
    untied: Vec<(String, usize)>,
}

fn parse_dim(text: &str, args: &[BaselineArg], flag: &str) -> Result<(String, usize), String> {
    let (name, dim) = text
        .rsplit_once('.')
        .ok_or_else(|| format!("{flag} {text}: expected ARG.DIM (e.g. x.-1, weight.0)"))?;
    let dim: i64 = dim
        .parse()
        .map_err(|_| format!("{flag} {text}: {dim:?} is not a dimension number"))?;
    let arg = args
        .iter()
        .find(|a| a.name == name)
        .ok_or_else(|| format!("{flag} {text}: no argument {name:?}"))?;
    let (_, shape, _) = arg
        .tensor()
        .ok_or_else(|| format!("{flag} {text}: {name} is a {}, not a tensor", arg.kind))?;
    let n = shape.len() as i64;
    let d = if dim < 0 { dim + n } else { dim };
    if !(0..n).contains(&d) {
        return Err(format!(
            "{flag} {text}: {name} has {n} dimension(s) (shape {shape:?})"
        ));
    }
    Ok((name.to_string(), d as usize))
}

fn size_of(args: &[BaselineArg], (name, dim): &(String, usize)) -> usize {
    let arg = args.iter().find(|a| &a.name == name).expect("checked");
    arg.tensor().expect("checked").1[*dim]
}

impl Ties {
    fn parse(ties: &[String], untied: &[String], args: &[BaselineArg]) -> Result<Ties, String> {
        let mut out = Ties::default();
        for tie in ties {
            let (a, b) = tie
                .split_once('=')
                .ok_or_else(|| format!("--tie {tie}: expected A.DIM=B.DIM (e.g. x.-1=weight.0)"))?;
            let a = parse_dim(a, args, "--tie")?;
            let b = parse_dim(b, args, "--tie")?;
            let (sa, sb) = (size_of(args, &a), size_of(args, &b));
            if sa != sb {
                return Err(format!(
                    "--tie {tie}: {}.{} is {sa} and {}.{} is {sb}: tied dimensions have one size",
                    a.0, a.1, b.0, b.1
                ));
            }
            out.edges.push((a, b));
        }
        for text in untied {
            out.untied.push(parse_dim(text, args, "--untie")?);
        }
        Ok(out)
    }

    /// Every (argument, dimension) tied to `start`, `start` included, in discovery order.
    fn component(&self, start: (String, usize)) -> Vec<(String, usize)> {
        let mut seen = vec![start];
        let mut i = 0;
        while i < seen.len() {
            let here = seen[i].clone();
            for (a, b) in &self.edges {
                for (x, y) in [(a, b), (b, a)] {
                    if *x == here && !seen.contains(y) {
                        seen.push(y.clone());
                    }
                }
            }
            i += 1;
        }
        seen
    }
}

fn resolve_shape(
    axis: &Axis,
    value: &str,
    args: &[BaselineArg],
    ties: &Ties,
) -> Result<Resolved, String> {
    if !SHAPES.contains(&value) {
        return Err(format!(
            "unknown shape {value:?} (one of {})",
            SHAPES.join(", ")
        ));
    }
    let t = axis.target.as_deref().expect("shape has a target");
    let arg = args
        .iter()
        .find(|a| a.name == t)
        .expect("parse_axis checked");
    let (_, shape, _) = arg
        .tensor()
        .ok_or_else(|| format!("{t} is a {}, not a tensor: shape cuts tensors", arg.kind))?;
    if value == "captured" {
        return Ok(Resolved::Folds(format!(
            "{t} has shape {shape:?} as captured"
        )));
    }
    if shape.is_empty() {
        return Err(format!("{t} is 0-d: {value} needs a dimension"));
    }
    let (dim, size) = match value {
        "half_rows" => {
            let rows = shape[0];
            if rows < 2 {
                return Err(format!(
                    "{t} has {rows} row(s) (shape {shape:?}): half_rows needs two"
                ));
            }
            (0, rows / 2)
        }
        _ => {
            let d = shape.len() - 1;
            let last = shape[d];
            if last % 2 == 1 {
                return Ok(Resolved::Folds(format!(
                    "{t}'s last dimension is {last}, odd as captured"
                )));
            }
            if last < 2 {
                return Err(format!(
                    "{t}'s last dimension is {last}: odd_last_dim needs at least 2"
                ));
            }
            (d, last - 1)
        }
    };
    let from = shape[dim];
    let tied = ties.component((t.to_string(), dim));
    // A dimension of another argument with the changed size is presumed to depend on it
    // unless the user says how: tied (it changes too) or untied (it keeps its size).
    for other in args.iter().filter(|a| a.name != t) {
        let Some((_, other_shape, _)) = other.tensor() else {
            continue;
        };
        for (d, &s) in other_shape.iter().enumerate() {
            let here = (other.name.clone(), d);
            if s == from && !tied.contains(&here) && !ties.untied.contains(&here) {
                let wrote = if dim == shape.len() - 1 {
                    -1
                } else {
                    dim as i64
                };
                return Err(format!(
                    "{value} changes {t}.{wrote} ({from} -> {size}), and {}.{d} has that size too: say whether it follows (--tie {t}.{wrote}={}.{d}) or keeps its size (--untie {}.{d})",
                    other.name, other.name, other.name
                ));
            }
        }
    }
    let mut changes: Vec<ShapeArg> = Vec::new();
    for (name, d) in &tied {
        let arg = args
            .iter()
            .find(|a| &a.name == name)
            .expect("ties are checked");
        let (_, captured, stride) = arg.tensor().expect("ties are checked");
        let entry = match changes.iter_mut().position(|c| &c.arg == name) {
            Some(i) => &mut changes[i],
            None => {
                changes.push(ShapeArg {
                    arg: name.clone(),
                    shape: captured.to_vec(),
                    stride: Vec::new(),
                });
                changes.last_mut().expect("just pushed")
            }
        };
        entry.shape[*d] = size;
        entry.stride = dense_stride(&entry.shape, stride);
    }
    Ok(Resolved::Case(Transform::Shape {
        shape: value.to_string(),
        args: changes,
    }))
}

/// An option value as replay_op.py's `--arg` reads it: JSON, else `True`/`False`/`None`,
/// else the text as a string.
pub fn parse_option_value(text: &str) -> serde_json::Value {
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        return value;
    }
    match text.trim() {
        "True" => serde_json::Value::Bool(true),
        "False" => serde_json::Value::Bool(false),
        "None" => serde_json::Value::Null,
        _ => serde_json::Value::String(text.to_string()),
    }
}

/// JSON equality with numbers compared by value (`1e-6` equals `0.000001`, `1` equals `1.0`).
fn same_value(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) if a.is_number() && b.is_number() => x == y,
        _ => a == b,
    }
}

fn resolve_option(
    name: &str,
    text: &str,
    args: &[BaselineArg],
    stage: &str,
) -> Result<Resolved, String> {
    let scalars: Vec<&str> = args
        .iter()
        .filter(|a| a.value.is_some())
        .map(|a| a.name.as_str())
        .collect();
    let arg = args.iter().find(|a| a.name == name).ok_or_else(|| {
        format!(
            "{stage} has no argument {name:?} (scalar arguments: {})",
            if scalars.is_empty() {
                "none".to_string()
            } else {
                scalars.join(", ")
            }
        )
    })?;
    let captured = arg.value.as_ref().ok_or_else(|| {
        format!(
            "{name} is a {}: option:NAME sets scalar arguments ({})",
            arg.kind,
            scalars.join(", ")
        )
    })?;
    let mut value = parse_option_value(text);
    if arg.kind == "float"
        && let Some(i) = value.as_i64().filter(|_| value.is_i64() || value.is_u64())
    {
        value = serde_json::Number::from_f64(i as f64).map_or(value, serde_json::Value::Number);
    }
    let non_finite = matches!(
        text.trim().to_ascii_lowercase().as_str(),
        "nan" | "inf" | "-inf" | "infinity" | "-infinity"
    );
    if non_finite {
        return Err(format!(
            "option:{name}={text}: a non-finite value cannot be written into plan.json"
        ));
    }
    // A captured number or bool takes a value of its kind: anything else (a word, a number
    // out of range such as 1e400) would reach the operator as a string and fail there.
    let fits = match arg.kind.as_str() {
        "float" => value.is_number(),
        "int" => value.is_i64() || value.is_u64(),
        "bool" => value.is_boolean(),
        _ => true,
    };
    if !fits {
        return Err(format!(
            "option:{name}={text}: {name} is a {} (captured {captured}); {text:?} is not a {}",
            arg.kind,
            match arg.kind.as_str() {
                "float" => "finite number",
                "int" => "whole number",
                _ => "True or False",
            }
        ));
    }
    if same_value(&value, captured) {
        return Ok(Resolved::Folds(format!("{name} is {captured} as captured")));
    }
    Ok(Resolved::Case(Transform::Option {
        name: name.to_string(),
        value,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::input_set::CapturedTensor;

    fn tensor(dtype: DType, shape: &[usize], stride: &[usize]) -> InputValue {
        let numel: usize = shape.iter().product();
        let extent = if numel == 0 {
            0
        } else {
            1 + shape
                .iter()
                .zip(stride)
                .map(|(s, st)| (s - 1) * st)
                .sum::<usize>()
        };
        InputValue::Tensor(CapturedTensor {
            dtype,
            shape: shape.to_vec(),
            stride: stride.to_vec(),
            offset_in_span: 0,
            storage_offset: 0,
            device: "cpu".into(),
            requires_grad: false,
            span: vec![0; extent * dtype.size()],
        })
    }

    /// `layers.0.input_norm#1` of the Llama example: x [12, 256], weight [256], eps 1e-6.
    fn rms_norm_set() -> InputSet {
        InputSet {
            path: "x.pt".into(),
            args: vec![
                ("x".into(), tensor(DType::Float32, &[12, 256], &[256, 1])),
                ("weight".into(), tensor(DType::Float32, &[256], &[1])),
                ("eps".into(), InputValue::Float(1e-6)),
            ],
        }
    }

    fn plan(set: &InputSet, axes: &[&str], ties: &[&str], untied: &[&str]) -> Result<Plan, String> {
        let axes: Vec<String> = axes.iter().map(|s| s.to_string()).collect();
        let ties: Vec<String> = ties.iter().map(|s| s.to_string()).collect();
        let untied: Vec<String> = untied.iter().map(|s| s.to_string()).collect();
        build(&PlanRequest {
            name: "m",
            dump: "d",
            stage: "layers.0.input_norm#1",
            rank: 0,
            window: "match1-occ1",
            label: "req",
            candidate: "c:f",
            reference: "builtin:rms_norm",
            standard: Standard::Msprobe,
            input_set: set,
            op: None,
            source_manifest: "d/manifest.json",
            input_file: "inputs/layers.0.input_norm#1.pt",
            axes: &axes,
            ties: &ties,
            untied: &untied,
            created_unix_s: 0.0,
        })
    }

    #[test]
    fn each_case_changes_one_axis_and_baseline_values_fold() {
        let set = rms_norm_set();
        let p = plan(
            &set,
            &[
                "dtype=float16,bfloat16,float32",
                "layout[x]=contiguous,transposed,strided",
                "mode=eager,compile",
                "option:eps=1e-6,1e-5",
                "shape=captured,half_rows",
            ],
            &[],
            &[],
        )
        .unwrap();
        assert_eq!(
            p.ids(),
            [
                "baseline",
                "dtype=float16",
                "dtype=bfloat16",
                "layout.x=transposed",
                "layout.x=strided",
                "mode=compile",
                "option.eps=1e-5",
                "shape=half_rows"
            ]
        );
        let folded: Vec<_> = p
            .folded
            .iter()
            .map(|f| (f.spec.as_str(), f.value.as_str()))
            .collect();
        assert_eq!(
            folded,
            [
                ("dtype=float16,bfloat16,float32", "float32"),
                ("layout[x]=contiguous,transposed,strided", "contiguous"),
                ("mode=eager,compile", "eager"),
                ("option:eps=1e-6,1e-5", "1e-6"),
                ("shape=captured,half_rows", "captured"),
            ]
        );
        let case = p.case("layout.x=transposed").unwrap();
        assert_eq!(
            case.transform,
            Transform::Layout {
                arg: "x".into(),
                layout: "transposed".into(),
                stride: vec![1, 12]
            }
        );
        assert_eq!(
            p.case("layout.x=strided").unwrap().transform,
            Transform::Layout {
                arg: "x".into(),
                layout: "strided".into(),
                stride: vec![512, 2]
            }
        );
        let bf16 = p.case("dtype=bfloat16").unwrap();
        assert_eq!(bf16.bytes, (12 * 256 + 256) * 2);
        assert_eq!(p.cases[0].bytes, (12 * 256 + 256) * 4);
        let half = p.case("shape=half_rows").unwrap();
        assert_eq!(half.elements, 6 * 256 + 256);
        assert_eq!(
            p.case("option.eps=1e-5").unwrap().transform,
            Transform::Option {
                name: "eps".into(),
                value: serde_json::json!(1e-5)
            }
        );
        p.check().unwrap();
        let text = serde_json::to_vec(&p).unwrap();
        assert_eq!(Plan::parse(&text, "plan.json").unwrap(), p);
    }

    #[test]
    fn a_shape_change_needs_its_dependent_dimensions_declared() {
        let set = rms_norm_set();
        let e = plan(&set, &["shape=odd_last_dim"], &[], &[]).unwrap_err();
        assert!(
            e.contains("weight.0 has that size too") && e.contains("--tie x.-1=weight.0"),
            "{e}"
        );
        let p = plan(&set, &["shape=odd_last_dim"], &["x.-1=weight.0"], &[]).unwrap();
        assert_eq!(
            p.case("shape=odd_last_dim").unwrap().transform,
            Transform::Shape {
                shape: "odd_last_dim".into(),
                args: vec![
                    ShapeArg {
                        arg: "x".into(),
                        shape: vec![12, 255],
                        stride: vec![255, 1]
                    },
                    ShapeArg {
                        arg: "weight".into(),
                        shape: vec![255],
                        stride: vec![1]
                    }
                ]
            }
        );
        let p = plan(&set, &["shape=odd_last_dim"], &[], &["weight.0"]).unwrap();
        let Transform::Shape { args, .. } = &p.case("shape=odd_last_dim").unwrap().transform else {
            panic!()
        };
        assert_eq!(args.len(), 1);
        let e = plan(&set, &["shape=half_rows"], &["x.0=weight.0"], &[]).unwrap_err();
        assert!(e.contains("tied dimensions have one size"), "{e}");
    }

    #[test]
    fn bad_specs_are_errors_naming_them() {
        let set = rms_norm_set();
        for (axes, wanted) in [
            (&["colour=red"][..], "unknown axis \"colour\""),
            (&["dtype=float12"], "unknown dtype \"float12\""),
            (&["layout=transposed"], "layout needs the argument"),
            (&["layout[weight]=transposed"], "needs two dimensions"),
            (&["layout[nope]=strided"], "no argument \"nope\""),
            (&["layout[eps]=strided"], "eps is a float, not a tensor"),
            (&["mode=graph"], "unknown mode \"graph\""),
            (&["option:alpha=1"], "no argument \"alpha\""),
            (&["option:x=1"], "x is a tensor"),
            (&["option:eps=nan"], "non-finite"),
            (
                &["option:eps=1e400"],
                "option:eps=1e400: eps is a float (captured 1e-6); \"1e400\" is not a finite number",
            ),
            (&["option:eps=abc"], "\"abc\" is not a finite number"),
            (&["dtype=float16,float16"], "given twice"),
            (&["dtype"], "expected AXIS=V1,V2"),
        ] {
            let e = plan(&set, axes, &[], &[]).unwrap_err();
            assert!(e.contains(wanted), "{axes:?}: {e}");
            assert!(e.contains(axes[0]), "{axes:?} not named: {e}");
        }
        // A string option takes any text, but not one that cannot name a case directory.
        let mut with_str = rms_norm_set();
        with_str
            .args
            .push(("approximate".into(), InputValue::Str("none".into())));
        let e = plan(&with_str, &["option:approximate=a/b"], &[], &[]).unwrap_err();
        assert!(e.contains("no valid case id"), "{e}");
        let p = plan(&with_str, &["option:approximate=tanh"], &[], &[]).unwrap();
        assert!(p.case("option.approximate=tanh").is_some());
    }

    #[test]
    fn two_specs_making_one_case_are_an_error_naming_both() {
        let set = rms_norm_set();
        let e = plan(&set, &["option:eps=1e-5", "option:eps=0.00001"], &[], &[]).unwrap_err();
        assert!(
            e.contains("--axis option:eps=1e-5") && e.contains("--axis option:eps=0.00001"),
            "{e}"
        );
        assert!(e.contains("make the same case"), "{e}");
        // shape and shape[x] on the first tensor argument are one case.
        let e = plan(&set, &["shape=half_rows", "shape[x]=half_rows"], &[], &[]).unwrap_err();
        assert!(e.contains("make the same case"), "{e}");
        // dtype[x] when x is the only argument to change is dtype's case.
        let mixed = InputSet {
            path: "x.pt".into(),
            args: vec![
                ("x".into(), tensor(DType::Float32, &[4, 8], &[8, 1])),
                ("weight".into(), tensor(DType::Float16, &[8], &[1])),
            ],
        };
        let e = plan(&mixed, &["dtype=float16", "dtype[x]=float16"], &[], &[]).unwrap_err();
        assert!(
            e.contains("case dtype=float16") && e.contains("case dtype.x=float16"),
            "{e}"
        );
    }

    #[test]
    fn a_transposed_capture_folds_transposed_and_cuts_in_its_own_order() {
        let set = InputSet {
            path: "x.pt".into(),
            args: vec![("k".into(), tensor(DType::Float32, &[4, 2, 8], &[8, 32, 1]))],
        };
        let p = plan(
            &set,
            &["layout[k]=transposed,contiguous", "shape=half_rows"],
            &[],
            &[],
        )
        .unwrap();
        // [4, 2, 8] stored with strides (8, 32, 1) is not "last two swapped" ((16, 1, 2)).
        assert!(p.case("layout.k=transposed").is_some());
        assert!(p.case("layout.k=contiguous").is_some());
        let Transform::Shape { args, .. } = &p.case("shape=half_rows").unwrap().transform else {
            panic!()
        };
        assert_eq!(args[0].shape, vec![2, 2, 8]);
        assert_eq!(args[0].stride, vec![8, 16, 1]);
        assert_eq!(dense_stride(&[4, 6], &[1, 4]), vec![1, 4]);
        assert!(same_layout(&[1, 5], &[5, 1], &[1, 1]));
    }

    #[test]
    fn hostile_or_broken_plans_are_refused_naming_the_file() {
        let set = rms_norm_set();
        let p = plan(&set, &["dtype=bfloat16"], &[], &[]).unwrap();
        let good = serde_json::to_string(&p).unwrap();
        let e = Plan::parse(&good.as_bytes()[..good.len() / 2], "m/plan.json").unwrap_err();
        assert!(e.starts_with("m/plan.json: truncated"), "{e}");
        let e = Plan::parse(
            good.replace("dtype=bfloat16", "../x").as_bytes(),
            "m/plan.json",
        )
        .unwrap_err();
        assert!(
            e.contains("m/plan.json") && e.contains("\"../x\" is refused"),
            "{e}"
        );
        let e = Plan::parse(
            br#"{"format": "dumpview.cases.plan", "version": 1, "cases": 3}"#,
            "p.json",
        )
        .unwrap_err();
        assert!(e.starts_with("p.json: not a version-1 case plan"), "{e}");
        let e = Plan::parse(br#"{"format": "x"}"#, "p.json").unwrap_err();
        assert!(e.contains("not a dumpview case plan"), "{e}");
        let e = Plan::parse(
            good.replace("\"version\":1", "\"version\":7").as_bytes(),
            "p.json",
        )
        .unwrap_err();
        assert!(e.contains("plan version 7"), "{e}");
        let e = Plan::parse(
            good.replace("\"name\":\"m\"", "\"name\":\"..\"").as_bytes(),
            "p.json",
        )
        .unwrap_err();
        assert!(e.contains("case matrix name \"..\""), "{e}");
    }
}
