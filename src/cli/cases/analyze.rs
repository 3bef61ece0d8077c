//! `dumpview cases analyze`: each case classified, the axis the failures follow, the smallest
//! failing case, as Markdown or JSON.

use std::path::{Path, PathBuf};

use super::super::{CliError, Conclusion};
use super::{analysis, open};
use crate::model::present::cases as present;

/// The options of `cases analyze`.
#[derive(Debug, Clone, clap::Args)]
pub struct AnalyzeArgs {
    /// The matrix.
    pub name: String,
    /// Write the report here instead of printing it; `.json` selects JSON.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

impl AnalyzeArgs {
    /// Analyzes the matrix NAME under `root`.
    ///
    /// # Errors
    /// As [`analyze_cmd`].
    pub fn run(&self, root: &Path, json: bool) -> Result<Conclusion, CliError> {
        analyze_cmd(root, &self.name, self.output.as_deref(), json)
    }
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
) -> Result<Conclusion, CliError> {
    let matrix = open(root, name)?;
    let a = analysis(&matrix, None);
    let as_json = json || output.is_some_and(|o| o.extension().is_some_and(|e| e == "json"));
    let text = if as_json {
        serde_json::to_string_pretty(&crate::cli::with_warnings(serde_json::to_value(&a)?))? + "\n"
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
        Conclusion::Clean
    } else {
        Conclusion::Found
    })
}
