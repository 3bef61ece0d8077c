//! [`Tracker`]: successive snapshots in, the events worth printing out.

use std::collections::HashMap;

use serde_json::Value;

use super::{WatchEvent, WindowKey};

/// Remembers the last event printed per (kind, window) and lets through only what changed:
/// a later event of one kind for one window supersedes the earlier one; an unchanged finding
/// is not repeated; a `cleared` finding is printed only if the window had that finding. A
/// `diagnosis` counts as changed only when its `conclusion` or its `chain` did ("No diagnosis":
/// its reason, digits aside).
#[derive(Debug, Default)]
pub struct Tracker {
    last: HashMap<(&'static str, Option<WindowKey>), Value>,
}

impl Tracker {
    /// A tracker that has printed nothing.
    pub fn new() -> Tracker {
        Tracker::default()
    }

    /// The events of `snapshot` that differ from what was last printed for their kind and
    /// window, in snapshot order; remembers them.
    ///
    /// A window printed before and absent from `snapshot` gets a `window` event, and its
    /// findings are forgotten: `superseded: true` (with `by_attempt`) where a later attempt of
    /// the same window took its place (its files are still there), else `removed: true` (its
    /// files are gone).
    pub fn update(&mut self, snapshot: Vec<WatchEvent>) -> Vec<WatchEvent> {
        let mut out = Vec::new();
        let present: std::collections::HashSet<&WindowKey> = snapshot
            .iter()
            .filter(|e| e.kind == "window")
            .filter_map(|e| e.window.as_ref())
            .collect();
        let mut gone: Vec<WindowKey> = self
            .last
            .keys()
            .filter(|(kind, _)| *kind == "window")
            .filter_map(|(_, key)| key.clone())
            .filter(|key| !present.contains(key))
            .collect();
        gone.sort();
        let ts = snapshot.first().map_or(0.0, |e| e.ts);
        for key in gone {
            self.last.retain(|(_, k), _| k.as_ref() != Some(&key));
            // A later attempt of the same window (a re-run into the directory) takes its
            // place: its files are still there, it is only no longer the one followed.
            let newer = present
                .iter()
                .filter(|p| {
                    p.source == key.source
                        && p.rank == key.rank
                        && p.label == key.label
                        && p.match_index == key.match_index
                        && p.occurrence == key.occurrence
                        && p.attempt > key.attempt
                })
                .map(|p| p.attempt)
                .max();
            let body = match newer {
                Some(attempt) => {
                    serde_json::json!({"records": 0, "superseded": true, "by_attempt": attempt})
                }
                None => serde_json::json!({"records": 0, "removed": true}),
            };
            out.push(WatchEvent {
                kind: "window",
                ts,
                source: key.source.clone(),
                window: Some(key),
                body,
            });
        }
        for event in snapshot {
            let key = (event.kind, event.window.clone());
            let cleared = event.body.get("cleared").is_some_and(|c| c == true);
            match self.last.get(&key) {
                Some(previous) if same(event.kind, previous, &event.body) => continue,
                None if cleared => continue,
                _ => {}
            }
            self.last.insert(key, event.body.clone());
            out.push(event);
        }
        out
    }
}

/// Whether `body` says what `previous` (of the same kind and window) said.
fn same(kind: &str, previous: &Value, body: &Value) -> bool {
    match kind {
        // "No diagnosis" counts what it compared ("N records captured on one side only"), and
        // those counts grow with every window that lands: said again only when its reason,
        // digits aside, changes.
        "diagnosis" if body.get("found") == Some(&Value::Bool(false)) => {
            previous.get("found") == body.get("found")
                && without_digits(previous.get("conclusion"))
                    == without_digits(body.get("conclusion"))
        }
        "diagnosis" => ["conclusion", "chain"]
            .iter()
            .all(|field| previous.get(field) == body.get(field)),
        _ => previous == body,
    }
}

/// A conclusion with its numbers left out.
fn without_digits(conclusion: Option<&Value>) -> String {
    conclusion
        .and_then(Value::as_str)
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_ascii_digit())
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn key(records: u32) -> WindowKey {
        WindowKey {
            source: "run/".into(),
            rank: 0,
            label: "req".into(),
            match_index: 1,
            occurrence: records,
            attempt: 1,
            file: "run/rank0/match1-occ1/manifest.json".into(),
        }
    }

    fn event(kind: &'static str, body: Value) -> WatchEvent {
        WatchEvent {
            kind,
            ts: 0.0,
            source: "run/".into(),
            window: Some(key(1)),
            body,
        }
    }

    #[test]
    fn unchanged_findings_are_not_repeated_and_changed_ones_supersede() {
        let mut tracker = Tracker::new();
        let nan = || event("first_nonfinite", json!({"stage": "a#1", "seq": 3}));
        assert_eq!(tracker.update(vec![nan()]).len(), 1);
        assert!(tracker.update(vec![nan()]).is_empty());
        let moved = event("first_nonfinite", json!({"stage": "b#1", "seq": 2}));
        assert_eq!(tracker.update(vec![moved.clone()]), vec![moved]);
        // Cleared: said once, because the window had a finding.
        let cleared = event("first_nonfinite", json!({"cleared": true}));
        assert_eq!(tracker.update(vec![cleared.clone()]), vec![cleared.clone()]);
        assert!(tracker.update(vec![cleared]).is_empty());
    }

    #[test]
    fn a_deleted_window_is_said_once_and_its_findings_forgotten() {
        let mut tracker = Tracker::new();
        let window = event("window", json!({"records": 3}));
        let nan = event("first_nonfinite", json!({"stage": "a#1", "seq": 3}));
        assert_eq!(tracker.update(vec![window.clone(), nan.clone()]).len(), 2);
        let removed = tracker.update(Vec::new());
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].kind, "window");
        assert_eq!(removed[0].body, json!({"records": 0, "removed": true}));
        assert!(tracker.update(Vec::new()).is_empty());
        // Back again: new, so printed again, findings included.
        assert_eq!(tracker.update(vec![window, nan]).len(), 2);
    }

    /// Issue 31, item 15: attempt 2 landing takes attempt 1's place, whose files are still
    /// there: `superseded`, not `removed`.
    #[test]
    fn a_window_replaced_by_a_later_attempt_is_superseded_not_removed() {
        let mut tracker = Tracker::new();
        let first = event("window", json!({"records": 3}));
        assert_eq!(tracker.update(vec![first]).len(), 1);
        let mut second = event("window", json!({"records": 4}));
        let key = second.window.as_mut().unwrap();
        key.attempt = 2;
        key.file = "run/rank0/match1-occ1.2/manifest.json".into();
        let out = tracker.update(vec![second.clone()]);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0].window.as_ref().unwrap().attempt, 1);
        assert_eq!(
            out[0].body,
            json!({"records": 0, "superseded": true, "by_attempt": 2})
        );
        assert!(
            out[0]
                .to_text()
                .ends_with(": superseded by attempt 2 · run/rank0/match1-occ1/manifest.json"),
            "{}",
            out[0].to_text()
        );
        assert_eq!(out[1], second);
    }

    #[test]
    fn a_diagnosis_is_said_again_only_when_its_conclusion_or_chain_changes() {
        let mut tracker = Tracker::new();
        let diagnosis = |conclusion: &str, chain: Value, next: &str| WatchEvent {
            kind: "diagnosis",
            ts: 0.0,
            source: "run/".into(),
            window: None,
            body: json!({"conclusion": conclusion, "chain": chain, "next": next}),
        };
        let chain = json!([{"key": "w#1"}, {"key": "r#1"}]);
        assert_eq!(
            tracker
                .update(vec![diagnosis("No diagnosis: x", json!([]), "")])
                .len(),
            1
        );
        assert_eq!(
            tracker
                .update(vec![diagnosis("r reads w", chain.clone(), "capture")])
                .len(),
            1
        );
        // Only the next experiment's words changed: not said again.
        assert!(
            tracker
                .update(vec![diagnosis("r reads w", chain.clone(), "replay")])
                .is_empty()
        );
        // Another record cited, the same words: said.
        let longer = json!([{"key": "w#1"}, {"key": "r#1"}, {"key": "d#1"}]);
        assert_eq!(
            tracker
                .update(vec![diagnosis("r reads w", longer, "replay")])
                .len(),
            1
        );
    }

    #[test]
    fn a_window_that_never_had_a_finding_prints_no_cleared_event() {
        let mut tracker = Tracker::new();
        let cleared = event("stride_conflict", json!({"cleared": true}));
        assert!(tracker.update(vec![cleared]).is_empty());
        let grew = |n: u32| event("window", json!({"records": n}));
        assert_eq!(tracker.update(vec![grew(3)]).len(), 1);
        assert_eq!(tracker.update(vec![grew(3)]).len(), 0);
        assert_eq!(tracker.update(vec![grew(5)]).len(), 1);
    }

    #[test]
    fn no_diagnosis_is_said_again_only_when_its_reason_changes_not_its_counts() {
        let mut tracker = Tracker::new();
        let none = |conclusion: &str| WatchEvent {
            kind: "diagnosis",
            ts: 0.0,
            source: "run/".into(),
            window: None,
            body: json!({"conclusion": conclusion, "found": false, "chain": []}),
        };
        let agree = "No diagnosis: A and B agree (3 records were captured on one side only)";
        assert_eq!(tracker.update(vec![none(agree)]).len(), 1);
        let grown = "No diagnosis: A and B agree (17 records were captured on one side only)";
        assert!(tracker.update(vec![none(grown)]).is_empty());
        let other = "No diagnosis: no window of A pairs with a window of B";
        assert_eq!(tracker.update(vec![none(other)]).len(), 1);
    }
}
