//! `dumpview cases export-run`: a self-contained bundle (replay_op.py, the baseline input
//! set, plan.json, run.sh) to run the matrix by hand on another host.

use std::path::{Path, PathBuf};

use super::super::{CliError, Conclusion};
use super::open;
use crate::model::cases::export;
use crate::model::cases::store;

/// The options of `cases export-run`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportRunArgs {
    /// The matrix.
    pub name: String,
    /// A new (or empty) directory.
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
}

impl ExportRunArgs {
    /// Writes the bundle of the matrix NAME under `root`.
    ///
    /// # Errors
    /// As [`export_run`].
    pub fn run(&self, root: &Path) -> Result<Conclusion, CliError> {
        export_run(root, &self.name, &self.output)
    }
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
pub fn export_run(root: &Path, name: &str, out: &Path) -> Result<Conclusion, CliError> {
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
    Ok(Conclusion::Clean)
}
