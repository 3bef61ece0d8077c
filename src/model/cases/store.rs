//! A case matrix on disk ([`Matrix`]): the one part of `model::cases` that touches files, as
//! `model::replay::load` is for replay. Its layout, under the cases directory
//! (`.dumpview/cases/` of the current directory, `--cases-dir` or `$DUMPVIEW_CASES_DIR`):
//!
//! ```text
//! NAME/plan.json                         the plan (written last when planning)
//! NAME/baseline/manifest.json            the baseline input set's copy: a window holding
//! NAME/baseline/inputs/<stage>#<N>.pt    that one input set
//! NAME/cases/<CASE>/attempt-<K>/         one result: replay_op.py's outputs (replay.json last),
//!                                        inputs.pt, attempt.json, and verdict.json once judged
//! NAME/.staging-<pid>-<n>/<CASE>/        a run's outputs before they are filed as attempts
//! ```
//!
//! Evidence is never overwritten: every result is a new `attempt-<K>` beside the older ones
//! (created with `mkdir`, which fails rather than reuse a directory), and a plan is never
//! replaced.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::names;
use super::plan::{BASELINE, Plan};
use crate::model::io;
use crate::model::replay::{Replay, judge_dir};

/// The plan's file name.
pub const PLAN_FILE: &str = "plan.json";
/// The directory of the cases' attempts.
pub const CASES_SUBDIR: &str = "cases";
/// What each attempt says of itself.
pub const ATTEMPT_FILE: &str = "attempt.json";
/// The judgement of an attempt, as `dumpview replay --json` would print it.
pub const VERDICT_FILE: &str = "verdict.json";
/// The record replay_op.py writes last: its presence means the case finished.
pub const RECORD_FILE: &str = "replay.json";
/// The candidate's arguments as it received them (replay_op.py `--batch`).
pub const INPUTS_FILE: &str = "inputs.pt";
/// The prefix of a run's staging directories.
pub const STAGING_PREFIX: &str = ".staging-";
/// The environment variable naming the cases directory.
pub const CASES_DIR_ENV: &str = "DUMPVIEW_CASES_DIR";
/// The cases directory, relative to the current directory, when neither `--cases-dir` nor
/// [`CASES_DIR_ENV`] says.
pub const DEFAULT_CASES_DIR: &str = ".dumpview/cases";

/// A planned case matrix: its directory and its plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    /// `<cases dir>/NAME`.
    pub dir: PathBuf,
    /// Its `plan.json`.
    pub plan: Plan,
}

/// How an attempt came to be (`attempt.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AttemptInfo {
    /// `run` (`dumpview cases run`) or `record` (`dumpview cases record`).
    pub source: String,
    /// The directory a recorded result was copied from.
    #[serde(default)]
    pub from: Option<String>,
    /// The host it ran on (`[user@]host[:port]`), `None` on this machine.
    #[serde(default)]
    pub host: Option<String>,
    /// The Python that ran replay_op.py.
    #[serde(default)]
    pub python: Option<String>,
    /// When it was filed, seconds since the Unix epoch.
    #[serde(default)]
    pub filed_unix_s: f64,
}

/// One attempt of a case.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseAttempt {
    /// K of `attempt-K`, 1-based.
    pub number: u32,
    /// Its directory.
    pub dir: PathBuf,
    /// Whether it holds `replay.json` (the case finished); an interrupted case has none.
    pub complete: bool,
    /// Its `attempt.json` (default when absent or unreadable).
    pub info: AttemptInfo,
}

/// An attempt with its judgement.
#[derive(Debug, Clone)]
pub struct JudgedAttempt {
    /// The attempt.
    pub attempt: CaseAttempt,
    /// The replay judged under the plan's standard; `None` for an incomplete attempt;
    /// `Some(Err)` when it cannot be judged (the reference raised, a damaged file).
    pub judged: Option<Result<Replay, String>>,
}

/// Every attempt of one planned case, oldest first.
#[derive(Debug, Clone)]
pub struct CaseEvidence {
    /// The case id.
    pub id: String,
    /// Its attempts, by number.
    pub attempts: Vec<JudgedAttempt>,
}

/// A baseline file, created once and never replaced (`io::create_new`).
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), String> {
    io::create_new(path, bytes).map_err(|e| format!("{}: cannot create: {e}", path.display()))
}

/// A file replaced whole, never seen half written (`io::write_atomically`).
fn write_replacing(path: &Path, text: &str) -> Result<(), String> {
    io::write_atomically(path, text.as_bytes())
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

impl Matrix {
    /// Writes a new matrix under `root`: the baseline copy (`manifest`, the JSON text of a
    /// window holding that one input set, and the input set's bytes) and, last, `plan.json`.
    ///
    /// # Errors
    /// A refused NAME; `root/NAME` existing and not empty (a plan is never replaced); a
    /// directory or file that cannot be written.
    pub fn create(
        root: &Path,
        plan: Plan,
        manifest: &[u8],
        input_set: &[u8],
    ) -> Result<Matrix, String> {
        names::check("case matrix name", &plan.name)?;
        let dir = root.join(&plan.name);
        if std::fs::read_dir(&dir).is_ok_and(|mut e| e.next().is_some()) {
            return Err(format!(
                "{}: exists and is not empty: a plan is never replaced (choose another NAME, or remove that directory)",
                dir.display()
            ));
        }
        let baseline = dir.join(&plan.baseline.dir);
        let input = baseline.join(&plan.baseline.input_file);
        let parent = input.parent().expect("the input file has a directory");
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("{}: cannot create: {e}", parent.display()))?;
        write_new(&baseline.join("manifest.json"), manifest)?;
        write_new(&input, input_set)?;
        let text = serde_json::to_string_pretty(&plan).map_err(|e| e.to_string())? + "\n";
        // Last and atomic: a matrix exists only once its plan is whole.
        write_replacing(&dir.join(PLAN_FILE), &text)?;
        Ok(Matrix { dir, plan })
    }

    /// Opens the matrix NAME under `root`.
    ///
    /// # Errors
    /// A refused NAME; no such matrix (naming where it was looked for); a `plan.json` that
    /// [`Plan::parse`] refuses (the message names the file); a plan of another NAME.
    pub fn open(root: &Path, name: &str) -> Result<Matrix, String> {
        names::check("case matrix name", name)?;
        let dir = root.join(name);
        let path = dir.join(PLAN_FILE);
        let bytes = std::fs::read(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound if !dir.exists() => format!(
                "no case matrix {name:?} in {} (plan one with `dumpview cases plan {name} …`)",
                root.display()
            ),
            std::io::ErrorKind::NotFound => format!(
                "{}: not found (the matrix was not planned to the end)",
                path.display()
            ),
            _ => format!("{}: cannot read: {e}", path.display()),
        })?;
        let plan = Plan::parse(&bytes, &path.display().to_string())?;
        if plan.name != name {
            return Err(format!(
                "{}: the plan is named {:?}, not {name:?}",
                path.display(),
                plan.name
            ));
        }
        Ok(Matrix { dir, plan })
    }

    /// `NAME/plan.json`.
    pub fn plan_path(&self) -> PathBuf {
        self.dir.join(PLAN_FILE)
    }

    /// The baseline copy: a window directory holding one input set.
    pub fn baseline_dir(&self) -> PathBuf {
        self.dir.join(&self.plan.baseline.dir)
    }

    /// `NAME/cases/CASE`.
    pub fn case_dir(&self, id: &str) -> PathBuf {
        self.dir.join(CASES_SUBDIR).join(id)
    }

    /// The attempts of case `id`, by number (none when it never ran).
    pub fn attempts(&self, id: &str) -> Vec<CaseAttempt> {
        let dir = self.case_dir(id);
        let mut out: Vec<CaseAttempt> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let number: u32 = name.strip_prefix("attempt-")?.parse().ok()?;
                let path = entry.path();
                if !path.is_dir() {
                    return None;
                }
                let info = std::fs::read(path.join(ATTEMPT_FILE))
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .unwrap_or_default();
                Some(CaseAttempt {
                    number,
                    complete: path.join(RECORD_FILE).is_file(),
                    dir: path,
                    info,
                })
            })
            .collect();
        out.sort_by_key(|a| a.number);
        out
    }

    /// Creates the next attempt directory of case `id` (`attempt-K`, K one above the
    /// highest) and returns it.
    ///
    /// # Errors
    /// An id not in the plan; a directory that cannot be created.
    pub fn new_attempt(&self, id: &str) -> Result<CaseAttempt, String> {
        self.planned(id)?;
        let dir = self.case_dir(id);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
        let mut number = self.attempts(id).last().map_or(1, |a| a.number + 1);
        loop {
            let path = dir.join(format!("attempt-{number}"));
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    return Ok(CaseAttempt {
                        number,
                        dir: path,
                        complete: false,
                        info: AttemptInfo::default(),
                    });
                }
                // Another writer took it: evidence is never shared, take the next.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => number += 1,
                Err(e) => return Err(format!("{}: cannot create: {e}", path.display())),
            }
        }
    }

    fn planned(&self, id: &str) -> Result<(), String> {
        names::check("case id", id)?;
        if self.plan.case(id).is_none() {
            return Err(format!(
                "no case {id:?} in the plan {} (its cases: {})",
                self.plan_path().display(),
                self.plan.ids().join(", ")
            ));
        }
        Ok(())
    }

    /// Files `from` (a run's output directory of case `id`, on the same file system) as the
    /// case's next attempt by renaming it there, writes `attempt.json` and, when it is
    /// complete, `verdict.json`. Returns the attempt with its judgement.
    ///
    /// # Errors
    /// As [`Matrix::new_attempt`]; the rename failing.
    pub fn file_run(
        &self,
        id: &str,
        from: &Path,
        mut info: AttemptInfo,
    ) -> Result<JudgedAttempt, String> {
        let mut attempt = self.new_attempt(id)?;
        // The new directory is empty: rename replaces it.
        std::fs::rename(from, &attempt.dir).map_err(|e| {
            let _ = std::fs::remove_dir(&attempt.dir);
            format!(
                "{} -> {}: cannot move: {e}",
                from.display(),
                attempt.dir.display()
            )
        })?;
        info.source = "run".into();
        info.filed_unix_s = now();
        self.finish(&mut attempt, info)
    }

    /// `dumpview cases record`: copies `from`, one case's `replay_op.py --out` or `--batch`
    /// directory, as the next attempt of case `id`. The regular files at its top level are
    /// copied (the user's directory is left as it is); the attempt is judged.
    ///
    /// # Errors
    /// A case not in the plan; `from` without `replay.json` (not a replay's output, or a
    /// replay that did not finish); a result made for another case or plan (replay.json's
    /// `case`), or for another input set; a plain replay (no `case`) offered for a case
    /// other than the baseline, whose inputs are transformed; a copy failing.
    pub fn record(&self, id: &str, from: &Path) -> Result<JudgedAttempt, String> {
        self.planned(id)?;
        let record_path = from.join(RECORD_FILE);
        let bytes = std::fs::read(&record_path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "{}: not found: {} is not a finished replay's output directory",
                record_path.display(),
                from.display()
            ),
            _ => format!("{}: cannot read: {e}", record_path.display()),
        })?;
        let record: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{}: not valid JSON ({e})", record_path.display()))?;
        let where_ = record_path.display();
        let stage = format!(
            "{}#{}",
            record.get("stage").and_then(|s| s.as_str()).unwrap_or("?"),
            record
                .get("occurrence")
                .map_or("?".to_string(), |o| o.to_string())
        );
        if stage != self.plan.stage {
            return Err(format!(
                "{where_}: a replay of {stage}, not of the plan's input set {}",
                self.plan.stage
            ));
        }
        match record.get("case") {
            Some(case) => {
                let their_id = case.get("id").and_then(|v| v.as_str()).unwrap_or("");
                let their_plan = case.get("plan").and_then(|v| v.as_str()).unwrap_or("");
                if their_plan != self.plan.name {
                    return Err(format!(
                        "{where_}: the result of plan {their_plan:?}, not of {:?}",
                        self.plan.name
                    ));
                }
                if their_id != id {
                    return Err(format!(
                        "{where_}: the result of case {their_id:?}, not of {id:?}: record it as that case"
                    ));
                }
            }
            None if id != BASELINE => {
                return Err(format!(
                    "{where_}: a plain replay (no case in replay.json) can only be the baseline's result; case {id} transforms the inputs (run it with run.sh of `dumpview cases export-run`)"
                ));
            }
            None => {}
        }
        let mut attempt = self.new_attempt(id)?;
        let copied = (|| -> Result<(), String> {
            let entries = std::fs::read_dir(from)
                .map_err(|e| format!("{}: cannot read: {e}", from.display()))?;
            for entry in entries.flatten() {
                let name = entry.file_name();
                let kind = entry.file_type().map_err(|e| e.to_string())?;
                let skip = [ATTEMPT_FILE, VERDICT_FILE];
                if !kind.is_file() || skip.iter().any(|s| name == *s) {
                    continue;
                }
                let target = attempt.dir.join(&name);
                std::fs::copy(entry.path(), &target).map_err(|e| {
                    format!(
                        "{} -> {}: cannot copy: {e}",
                        entry.path().display(),
                        target.display()
                    )
                })?;
            }
            Ok(())
        })();
        if let Err(e) = copied {
            let _ = std::fs::remove_dir_all(&attempt.dir);
            return Err(e);
        }
        let info = AttemptInfo {
            source: "record".into(),
            from: Some(from.display().to_string()),
            filed_unix_s: now(),
            ..AttemptInfo::default()
        };
        self.finish(&mut attempt, info)
    }

    /// Writes `attempt.json`, judges a complete attempt and writes its `verdict.json`.
    fn finish(
        &self,
        attempt: &mut CaseAttempt,
        info: AttemptInfo,
    ) -> Result<JudgedAttempt, String> {
        let text = serde_json::to_string_pretty(&info).map_err(|e| e.to_string())? + "\n";
        let path = attempt.dir.join(ATTEMPT_FILE);
        write_replacing(&path, &text)?;
        attempt.info = info;
        attempt.complete = attempt.dir.join(RECORD_FILE).is_file();
        let judged = attempt.complete.then(|| self.judge(&attempt.dir));
        if let Some(Ok(replay)) = &judged {
            let text = serde_json::to_string_pretty(replay).map_err(|e| e.to_string())? + "\n";
            let path = attempt.dir.join(VERDICT_FILE);
            write_replacing(&path, &text)?;
        }
        Ok(JudgedAttempt {
            attempt: attempt.clone(),
            judged,
        })
    }

    /// Judges one attempt's outputs under the plan's standard.
    ///
    /// # Errors
    /// As `model::replay::judge_dir`: an unreadable record or file, a reference that raised.
    pub fn judge(&self, dir: &Path) -> Result<Replay, String> {
        judge_dir(dir, Some(self.plan.standard))
    }

    /// Every planned case's attempts, judged (`only`: those cases alone).
    pub fn evidence(&self, only: Option<&[String]>) -> Vec<CaseEvidence> {
        self.plan
            .cases
            .iter()
            .filter(|c| only.is_none_or(|o| o.contains(&c.id)))
            .map(|case| CaseEvidence {
                id: case.id.clone(),
                attempts: self
                    .attempts(&case.id)
                    .into_iter()
                    .map(|attempt| JudgedAttempt {
                        judged: attempt.complete.then(|| self.judge(&attempt.dir)),
                        attempt,
                    })
                    .collect(),
            })
            .collect()
    }

    /// Whether case `id` has a complete attempt (what `cases run` skips without `--rerun`).
    pub fn is_recorded(&self, id: &str) -> bool {
        self.attempts(id).iter().any(|a| a.complete)
    }

    /// A new staging directory for one run's outputs, `NAME/.staging-<pid>-<n>`.
    ///
    /// # Errors
    /// It cannot be created.
    pub fn staging(&self) -> Result<PathBuf, String> {
        for n in 0..1000 {
            let dir = self
                .dir
                .join(format!("{STAGING_PREFIX}{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(format!("{}: cannot create: {e}", dir.display())),
            }
        }
        Err(format!("{}: no free staging directory", self.dir.display()))
    }

    /// The staging directories runs left (`NAME/.staging-<pid>-<n>`) with their pid.
    pub fn stagings(&self) -> Vec<(u32, PathBuf)> {
        std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let pid = name
                    .strip_prefix(STAGING_PREFIX)?
                    .split('-')
                    .next()?
                    .parse()
                    .ok()?;
                Some((pid, e.path()))
            })
            .collect()
    }
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
