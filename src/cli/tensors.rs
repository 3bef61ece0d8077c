//! `dumpview tensors A B`: two saved tensor files compared key by key.

use std::path::PathBuf;

use super::{CliError, Conclusion};
use crate::model::present;
use crate::model::tensor::metrics::{self, CompareProgress, Options};
use crate::model::tensor::pairing::{Selection, compare_files};
use crate::model::tensor::{DType, TensorFile};

/// The options of `dumpview tensors`.
#[derive(Debug, Clone, clap::Args)]
pub struct TensorArgs {
    /// Tensor file A: torch.save (.pt) or safetensors.
    pub a: PathBuf,
    /// Tensor file B, the reference (rtol scales |b|; rel_l2 divides by ||b||).
    pub b: PathBuf,
    /// Compare only this key (a dict key path such as `layers.0.weight`).
    #[arg(long)]
    pub key: Option<String>,
    /// Absolute tolerance of the closeness rule |a-b| <= atol + rtol*|b|.
    #[arg(long, default_value_t = metrics::DEFAULT_ATOL, allow_negative_numbers = true)]
    pub atol: f64,
    /// Relative tolerance of the closeness rule (the defaults are a coarse screen).
    #[arg(long, default_value_t = metrics::DEFAULT_RTOL, allow_negative_numbers = true)]
    pub rtol: f64,
    /// NaN in both at one position counts as close.
    #[arg(long)]
    pub equal_nan: bool,
    /// Round both sides to DTYPE before comparing, e.g. float32, bfloat16, float16. Without
    /// it, tensors of different dtypes are compared losslessly as float64; ULPs are always
    /// counted in the coarsest floating dtype of the two sides and the cast.
    /// Integer targets round to nearest and saturate (torch's `.to()` truncates and wraps).
    #[arg(long, value_name = "DTYPE", value_parser = parse_dtype)]
    pub cast: Option<DType>,
    /// Refuse tensors of more elements than this (a stride-0 expanded view of a few bytes
    /// can claim 2^40 elements).
    #[arg(long, value_name = "N", default_value_t = metrics::DEFAULT_MAX_ELEMENTS)]
    pub max_elements: u64,
}

fn parse_dtype(name: &str) -> Result<DType, String> {
    DType::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
        format!("unknown dtype {name:?}; one of {}", names.join(", "))
    })
}

/// Compares the files; `Found` unless every pair is close and every key is matched.
///
/// # Errors
/// A file that cannot be read (named), a `--key` one file lacks, a negative tolerance.
pub fn run(args: &TensorArgs, json: bool) -> Result<Conclusion, CliError> {
    if !(args.atol >= 0.0 && args.rtol >= 0.0) {
        return Err("--atol and --rtol must be non-negative numbers".into());
    }
    let a = TensorFile::open(&args.a)?;
    let b = TensorFile::open(&args.b)?;
    let options = Options {
        atol: args.atol,
        rtol: args.rtol,
        equal_nan: args.equal_nan,
        cast: args.cast,
        ulp_in: None,
        max_elements: args.max_elements,
    };
    let select = match &args.key {
        Some(key) => Selection::Key(key),
        None => Selection::All,
    };
    let comparison = compare_files(&a, &b, select, &options, &CompareProgress::default())?;
    if json {
        let document = super::WithWarnings {
            body: &comparison,
            warnings: &[],
        };
        println!("{}", serde_json::to_string_pretty(&document)?);
    } else {
        print!("{}", present::tensors::render(&comparison));
    }
    Ok(if comparison.all_close {
        Conclusion::Clean
    } else {
        Conclusion::Found
    })
}

impl TensorArgs {
    /// Maps the two files to local paths (a remote one fetched) and compares them.
    ///
    /// # Errors
    /// As [`run`]; a remote file that cannot be read.
    pub fn run(mut self, cx: &mut super::Context) -> Result<Conclusion, CliError> {
        self.a = cx.sources.local(&self.a)?;
        self.b = cx.sources.local(&self.b)?;
        run(&self, cx.json)
    }
}
