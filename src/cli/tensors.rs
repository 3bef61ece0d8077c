//! `dumpview tensors A B`: two saved tensor files compared key by key, or two directory trees
//! of them compared file by file (pairing by relative path).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use super::{CliError, Conclusion};
use crate::model::dump::Warning;
use crate::model::present;
use crate::model::tensor::metrics::{self, CompareProgress, Options};
use crate::model::tensor::pairing::{Selection, compare_files};
use crate::model::tensor::{DType, TensorFile, trees};

/// The options of `dumpview tensors`.
#[derive(Debug, Clone, clap::Args)]
pub struct TensorArgs {
    /// Tensor file A: torch.save (.pt) or safetensors; or a directory: every tensor file
    /// under it (.pt, .pth, .bin, .safetensors) against the file of the same relative path
    /// under B.
    pub a: PathBuf,
    /// Tensor file B, the reference (rtol scales |b|; rel_l2 divides by ||b||); a directory
    /// when A is one.
    pub b: PathBuf,
    /// Compare only this key (a dict key path such as `layers.0.weight`); with directories,
    /// within each file.
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

/// Compares the files, or the trees; `Found` unless every pair is close and every key (and,
/// for trees, every file) is matched.
///
/// # Errors
/// A file that cannot be read (named), a `--key` one file lacks, a negative tolerance; a
/// directory against a file; trees: a root that cannot be listed, no tensor file in either.
pub fn run(args: &TensorArgs, json: bool) -> Result<Conclusion, CliError> {
    if !(args.atol >= 0.0 && args.rtol >= 0.0) {
        return Err("--atol and --rtol must be non-negative numbers".into());
    }
    let options = args.options();
    for path in [&args.a, &args.b] {
        if std::fs::symlink_metadata(path).is_err() {
            return Err(format!("{}: no such file or directory", path.display()).into());
        }
    }
    match (args.a.is_dir(), args.b.is_dir()) {
        (true, true) => return run_trees(args, &options, json),
        (true, false) | (false, true) => {
            let (dir, file) = if args.a.is_dir() {
                (&args.a, &args.b)
            } else {
                (&args.b, &args.a)
            };
            return Err(format!(
                "{} is a directory and {} is not: give two tensor files, or two directories \
                 to compare every tensor file under them by relative path",
                dir.display(),
                file.display()
            )
            .into());
        }
        (false, false) => {}
    }
    let a = TensorFile::open(&args.a)?;
    let b = TensorFile::open(&args.b)?;
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

/// Two directory trees: one row per key of every file both hold, the files of one side only.
/// Each file's relative path goes to stderr as it is compared when stderr is a terminal.
fn run_trees(args: &TensorArgs, options: &Options, json: bool) -> Result<Conclusion, CliError> {
    let show_progress = !json && std::io::stderr().is_terminal();
    let mut on_file = |path: &Path, n: usize, total: usize| {
        if show_progress {
            eprint!("\r\x1b[2Kcomparing {n}/{total}: {}", path.display());
        }
    };
    let comparison = trees::compare_trees(
        &args.a,
        &args.b,
        args.key.as_deref(),
        options,
        &CompareProgress::default(),
        &mut on_file,
    );
    if show_progress {
        eprint!("\r\x1b[2K");
    }
    let comparison = comparison?;
    if comparison.rows.is_empty() && comparison.only_a.is_empty() && comparison.only_b.is_empty() {
        return Err(format!(
            "neither {} nor {} holds a tensor file ({})",
            args.a.display(),
            args.b.display(),
            trees::TENSOR_EXTENSIONS.map(|e| format!(".{e}")).join(", ")
        )
        .into());
    }
    // An entry the walk did not follow is evidence not compared: lost, as in a dump's load.
    let warnings: Vec<Warning> = comparison
        .skipped
        .iter()
        .map(|s| {
            let root = if s.side == 'a' { &args.a } else { &args.b };
            Warning::lost(root.join(&s.path), format!("not compared: {}", s.reason))
        })
        .collect();
    if json {
        let document = super::WithWarnings {
            body: &comparison,
            warnings: &warnings,
        };
        println!("{}", serde_json::to_string_pretty(&document)?);
    } else {
        print!("{}", present::tensors::render_tree(&comparison));
    }
    Ok(if comparison.all_close {
        Conclusion::Clean
    } else {
        Conclusion::Found
    })
}

impl TensorArgs {
    fn options(&self) -> Options {
        Options {
            atol: self.atol,
            rtol: self.rtol,
            equal_nan: self.equal_nan,
            cast: self.cast,
            ulp_in: None,
            max_elements: self.max_elements,
        }
    }

    /// Maps the two paths to local ones (a remote file fetched) and compares them. A remote
    /// directory is refused: its mirror holds only what was fetched, so a walk would miss
    /// files.
    ///
    /// # Errors
    /// As [`run`]; a remote file that cannot be read; a remote directory.
    pub fn run(mut self, cx: &mut super::Context) -> Result<Conclusion, CliError> {
        let (given_a, given_b) = (self.a.clone(), self.b.clone());
        self.a = cx.sources.local(&self.a)?;
        self.b = cx.sources.local(&self.b)?;
        for (given, local) in [(&given_a, &self.a), (&given_b, &self.b)] {
            if given != local && local.is_dir() {
                return Err(format!(
                    "{}: a remote directory: `dumpview tensors` compares the trees of local \
                     directories only (copy it, or give two remote files)",
                    given.display()
                )
                .into());
            }
        }
        run(&self, cx.json)
    }
}
