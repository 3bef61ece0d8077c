//! A case matrix as the workbench shows it ([`MatrixSnapshot`]): the plan, its analysis and
//! each case's judged replay, read once from disk (off the UI thread) and handed over as
//! owned data.

use std::path::PathBuf;

use super::analysis::{CasesAnalysis, analyze};
use super::plan::Plan;
use super::store::Matrix;
use crate::model::replay::Replay;

/// One matrix, read whole.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixSnapshot {
    /// `<cases dir>/NAME`.
    pub dir: PathBuf,
    /// The plan.
    pub plan: Plan,
    /// The analysis, as `dumpview cases analyze` prints it.
    pub analysis: CasesAnalysis,
    /// Per case, in plan order: the judged replay of the attempt its outcome rests on (the
    /// newest complete one), for its metrics; `None` without one, or when it cannot be
    /// judged (the analysis says why).
    pub replays: Vec<Option<Replay>>,
}

impl MatrixSnapshot {
    /// Reads `matrix`'s attempts, judges and analyses them.
    pub fn read(matrix: &Matrix) -> MatrixSnapshot {
        let evidence = matrix.evidence(None);
        let analysis = analyze(
            &matrix.plan,
            &matrix.plan_path().display().to_string(),
            &evidence,
            None,
        );
        let replays = matrix
            .plan
            .cases
            .iter()
            .map(|case| {
                let attempts = evidence.iter().find(|e| e.id == case.id)?;
                let newest = attempts
                    .attempts
                    .iter()
                    .rev()
                    .find(|a| a.attempt.complete)?;
                newest.judged.as_ref()?.as_ref().ok().cloned()
            })
            .collect();
        MatrixSnapshot {
            dir: matrix.dir.clone(),
            plan: matrix.plan.clone(),
            analysis,
            replays,
        }
    }

    /// The name of the matrix.
    pub fn name(&self) -> &str {
        &self.plan.name
    }
}
