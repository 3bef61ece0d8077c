//! The answers: [`scan`] (storage aliases, first non-finite), [`layout`] (which bytes a view
//! reads), [`compare`] (one statistic, one record pair), [`diff`] (two captures), [`vary`]
//! (repeated captures), [`summary`], [`table`] and [`report`]; all computed from the capture
//! alone, never from a format's files. [`Analysis`] is the one value the workbench and every
//! subcommand render from.

pub mod compare;
pub mod diagnosis;
pub mod diff;
pub mod groups;
pub mod layout;
pub mod layout_diff;
pub mod merge;
mod merge_rows;
pub mod ranks;
pub mod replicated;
pub mod report;
pub mod row_evidence;
pub mod scan;
pub mod single_run;
pub mod summary;
pub mod table;
pub mod tokens;
pub mod tree;
pub mod vary;

use rayon::prelude::*;

use std::collections::HashMap;
use std::path::Path;

use crate::model::dump::{Changes, Dump, Window, WindowId};
use compare::Tolerances;
use diff::DiffReport;
use scan::WindowScan;

/// Everything dumpview answers about one or two loaded captures, computed once per version of
/// the capture: the scan of every window of A (and of B) and, with B, the diff. The workbench,
/// `scan`, `diff`, `summary`, `report` and the table export all render from this value; none
/// of them recomputes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// The tolerances the diff was computed with.
    pub tolerances: Tolerances,
    /// One scan per window of A, in A's window order.
    pub scans_a: Vec<WindowScan>,
    /// One scan per window of B, in B's window order (empty without B).
    pub scans_b: Vec<WindowScan>,
    /// A against B, when B is given.
    pub diff: Option<DiffReport>,
    /// A's first non-finite across ranks, per request captured on several ranks.
    pub ranks_a: Vec<ranks::AcrossRanks>,
    /// B's, as `ranks_a` (empty without B).
    pub ranks_b: Vec<ranks::AcrossRanks>,
    /// A's findings from one run ([`single_run`]): duplicate shards, silent ranks, stale
    /// outputs, with what could not be checked.
    pub single_run_a: single_run::SingleRun,
    /// B's, as `single_run_a` (empty without B).
    pub single_run_b: single_run::SingleRun,
}

impl Analysis {
    /// Scans every window of `a` and `b` and diffs them, the scans and each window pair on
    /// rayon's threads.
    pub fn compute(a: &Dump, b: Option<&Dump>, tolerances: &Tolerances) -> Analysis {
        let ((scans_a, scans_b), diff) = rayon::join(
            || {
                rayon::join(
                    || scan_all(&a.windows),
                    || b.map(|b| scan_all(&b.windows)).unwrap_or_default(),
                )
            },
            || b.map(|b| diff::diff(&a.windows, &b.windows, tolerances)),
        );
        Analysis {
            tolerances: tolerances.clone(),
            scans_a,
            scans_b,
            diff,
            ranks_a: ranks::first_nonfinite_across(&a.windows),
            ranks_b: b
                .map(|b| ranks::first_nonfinite_across(&b.windows))
                .unwrap_or_default(),
            single_run_a: single_run::check(&a.windows),
            single_run_b: b.map(|b| single_run::check(&b.windows)).unwrap_or_default(),
        }
    }

    /// The diff of `a` against `b` alone, with no scans (`scans_a`, `scans_b` empty): for
    /// `dumpview diff`, which prints nothing else, on captures of a million records where
    /// the alias scan would cost as much as the diff.
    pub fn compute_diff(a: &Dump, b: &Dump, tolerances: &Tolerances) -> Analysis {
        Analysis {
            tolerances: tolerances.clone(),
            scans_a: Vec::new(),
            scans_b: Vec::new(),
            diff: Some(diff::diff(&a.windows, &b.windows, tolerances)),
            ranks_a: Vec::new(),
            ranks_b: Vec::new(),
            single_run_a: single_run::SingleRun::default(),
            single_run_b: single_run::SingleRun::default(),
        }
    }

    /// The same captures under other tolerances: only the diff is recomputed.
    pub fn with_tolerances(&self, a: &Dump, b: Option<&Dump>, tolerances: &Tolerances) -> Analysis {
        Analysis {
            tolerances: tolerances.clone(),
            scans_a: self.scans_a.clone(),
            scans_b: self.scans_b.clone(),
            diff: b.map(|b| diff::diff(&a.windows, &b.windows, tolerances)),
            ranks_a: self.ranks_a.clone(),
            ranks_b: self.ranks_b.clone(),
            single_run_a: self.single_run_a.clone(),
            single_run_b: self.single_run_b.clone(),
        }
    }

    /// The analysis of a new version of the captures (`new`), given this one of `old`: the
    /// scan of a window equal to a window of the old version at the same source is taken
    /// over, and so is the diff of a window pair both of whose windows are unchanged; only
    /// what changed is computed (a reload as dumps land). Windows are compared with the old
    /// version's; [`Analysis::refresh_with`] takes what ingest knows instead.
    pub fn refresh(&self, old: (&Dump, Option<&Dump>), new: (&Dump, Option<&Dump>)) -> Analysis {
        self.refresh_with(old, new, [&Changes::Unknown, &Changes::Unknown])
    }

    /// [`Analysis::refresh`], told by ingest which windows of A (`changes[0]`) and of B
    /// (`changes[1]`) may differ from the old version's ([`Changes::Sources`]: the files it
    /// read again): every other window found at its source in the old version is taken as
    /// unchanged without comparing it. [`Changes::Unknown`] compares.
    pub fn refresh_with(
        &self,
        old: (&Dump, Option<&Dump>),
        new: (&Dump, Option<&Dump>),
        changes: [&Changes; 2],
    ) -> Analysis {
        let scans_a = rescan(&old.0.windows, &self.scans_a, &new.0.windows, changes[0]);
        let scans_b = match (old.1, new.1) {
            (Some(old_b), Some(new_b)) => {
                rescan(&old_b.windows, &self.scans_b, &new_b.windows, changes[1])
            }
            (_, Some(new_b)) => scan_all(&new_b.windows),
            (_, None) => Vec::new(),
        };
        let diff = new.1.map(|new_b| {
            let old_a = Unchanged::new(&old.0.windows, changes[0]);
            let old_b = old.1.map(|b| Unchanged::new(&b.windows, changes[1]));
            let previous = self.diff.as_ref();
            diff::diff_reusing(&new.0.windows, &new_b.windows, &self.tolerances, |x, y| {
                let (Some(ia), Some(ib)) = (
                    old_a.id_of(x),
                    old_b.as_ref().and_then(|old_b| old_b.id_of(y)),
                ) else {
                    return None;
                };
                previous
                    .and_then(|p| {
                        p.windows
                            .iter()
                            .find(|w| w.a.id == Some(ia) && w.b.id == Some(ib))
                    })
                    .cloned()
            })
        });
        Analysis {
            tolerances: self.tolerances.clone(),
            scans_a,
            scans_b,
            diff,
            ranks_a: ranks::first_nonfinite_across(&new.0.windows),
            ranks_b: new
                .1
                .map(|b| ranks::first_nonfinite_across(&b.windows))
                .unwrap_or_default(),
            single_run_a: single_run::check(&new.0.windows),
            single_run_b: new
                .1
                .map(|b| single_run::check(&b.windows))
                .unwrap_or_default(),
        }
    }

    /// True when anything a user must look at was found: a non-finite record or a stride
    /// conflict in any window, a single-run finding, or (with B) what
    /// [`DiffReport::found_something`] counts.
    pub fn found_something(&self) -> bool {
        self.scans_a
            .iter()
            .chain(&self.scans_b)
            .any(WindowScan::found_something)
            || self.single_run_a.found_something()
            || self.single_run_b.found_something()
            || self.diff.as_ref().is_some_and(DiffReport::found_something)
    }
}

fn scan_all(windows: &[Window]) -> Vec<WindowScan> {
    windows.par_iter().map(scan::scan_window).collect()
}

/// The windows of an old version of a capture, found by source, with what ingest said
/// changed since.
struct Unchanged<'o> {
    windows: &'o [Window],
    by_source: HashMap<&'o Path, WindowId>,
    changes: &'o Changes,
}

impl<'o> Unchanged<'o> {
    fn new(windows: &'o [Window], changes: &'o Changes) -> Unchanged<'o> {
        let mut by_source = HashMap::with_capacity(windows.len());
        for (i, w) in windows.iter().enumerate() {
            by_source.entry(w.source.as_path()).or_insert(WindowId(i));
        }
        Unchanged {
            windows,
            by_source,
            changes,
        }
    }

    /// The old window at `window`'s source, when `window` is that window unchanged: as
    /// ingest says where it knows ([`Changes::Sources`]), else compared.
    fn id_of(&self, window: &Window) -> Option<WindowId> {
        let id = *self.by_source.get(window.source.as_path())?;
        let old = &self.windows[id.0];
        let unchanged = match self.changes.may_differ(&window.source) {
            Some(may_differ) => {
                debug_assert!(
                    may_differ || old == window,
                    "ingest said unchanged: {}",
                    window.source.display()
                );
                !may_differ
            }
            None => old == window,
        };
        unchanged.then_some(id)
    }
}

/// Scans of `new`, taking over the scan of each window unchanged since the old version
/// ([`Unchanged`]).
fn rescan(
    old: &[Window],
    old_scans: &[WindowScan],
    new: &[Window],
    changes: &Changes,
) -> Vec<WindowScan> {
    let old = Unchanged::new(old, changes);
    new.par_iter()
        .map(|window| {
            old.id_of(window)
                .and_then(|id| old_scans.get(id.0).cloned())
                .unwrap_or_else(|| scan::scan_window(window))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn example(pair: &str) -> (Dump, Dump) {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("assets/examples")
            .join(pair);
        let load =
            |side: &str| crate::model::ingest::load(&[root.join(side)], &mut |_| {}).unwrap();
        (load("a"), load("b"))
    }

    #[test]
    fn refresh_recomputes_only_what_changed_and_equals_a_fresh_analysis() {
        let (a, b) = example("llama_fp16_overflow");
        let tolerances = Tolerances::default();
        let first = Analysis::compute(&a, Some(&b), &tolerances);
        // Unchanged captures: the refreshed analysis is the same value.
        assert_eq!(first.refresh((&a, Some(&b)), (&a, Some(&b))), first);
        // B's window grows by a record (a dump landing): the result equals a fresh analysis.
        let mut grown = b.clone();
        let mut extra = grown.windows[0].records.last().unwrap().clone();
        extra.seq += 1;
        extra.occurrence += 1;
        grown.windows[0].records.push(extra);
        let refreshed = first.refresh((&a, Some(&b)), (&a, Some(&grown)));
        assert_eq!(refreshed, Analysis::compute(&a, Some(&grown), &tolerances));
        assert_ne!(refreshed.diff, first.diff);
        // A's scans were taken over: the same values.
        assert_eq!(refreshed.scans_a, first.scans_a);
    }

    #[test]
    fn refresh_with_ingests_changes_equals_a_fresh_analysis() {
        let (a, b) = example("llama_fp16_overflow");
        let tolerances = Tolerances::default();
        let first = Analysis::compute(&a, Some(&b), &tolerances);
        let none = Changes::Sources(Default::default());
        let same = first.refresh_with((&a, Some(&b)), (&a, Some(&b)), [&none, &none]);
        assert_eq!(same, first);
        let mut grown = b.clone();
        let mut extra = grown.windows[0].records.last().unwrap().clone();
        extra.seq += 1;
        extra.occurrence += 1;
        grown.windows[0].records.push(extra);
        let read = Changes::Sources([grown.windows[0].source.clone()].into_iter().collect());
        let refreshed = first.refresh_with((&a, Some(&b)), (&a, Some(&grown)), [&none, &read]);
        assert_eq!(refreshed, Analysis::compute(&a, Some(&grown), &tolerances));
    }

    #[test]
    fn new_tolerances_recompute_the_diff_only() {
        let (a, b) = example("llama_fp16_overflow");
        let first = Analysis::compute(&a, Some(&b), &Tolerances::default());
        let loose = Tolerances::uniform(10.0, 10.0);
        let again = first.with_tolerances(&a, Some(&b), &loose);
        assert_eq!(again, Analysis::compute(&a, Some(&b), &loose));
        assert_eq!(again.scans_a, first.scans_a);
    }
}
