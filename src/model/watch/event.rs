//! [`WatchEvent`]: one line of `dumpview watch --json`.

use serde::Serialize;
use serde_json::{Value, json};

use crate::model::analysis::Analysis;
use crate::model::analysis::diagnosis::Diagnosis;
use crate::model::dump::{Dump, Warning, Window};

/// The version of the event format (`v` of every event). Adding a field keeps it; renaming,
/// removing or changing the meaning of one bumps it, and so does a new kind (a consumer that
/// stops at an unknown kind can tell): 2 added `diagnosis`.
pub const EVENT_VERSION: u32 = 3;

/// Names one window across versions of a followed capture: the SOURCE it came from as the
/// user wrote it, and the window's rank, label, match, occurrence and attempt.
///
/// Not a [`crate::model::dump::WindowId`]: that is an index valid for one loaded `Dump`, and a
/// reload may order windows anew; a watch event must say "the same window as before" across
/// reloads, and each event's JSON `window` object spells these fields.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct WindowKey {
    /// The SOURCE as given (`run/`, `ssh://host/dump`, `host:dump`).
    pub source: String,
    /// torch.distributed rank.
    pub rank: u32,
    /// The window's label (request id).
    pub label: String,
    /// Which distinct label (`DUMP_PROBE_MATCH`).
    #[serde(rename = "match")]
    pub match_index: u32,
    /// Which call of that label (`DUMP_PROBE_OCCURRENCE`).
    pub occurrence: u32,
    /// Which run into the dump directory wrote it.
    pub attempt: u32,
    /// The file the window was read from (a remote source's: its copy in the local cache):
    /// two windows alike in everything else (two runs under one watched directory) are
    /// still two.
    pub file: String,
}

impl WindowKey {
    /// The key of `window`, read from `source`.
    pub fn of(source: &str, window: &Window) -> WindowKey {
        WindowKey {
            source: source.to_string(),
            rank: window.rank,
            label: window.label.clone(),
            match_index: window.match_index,
            occurrence: window.occurrence,
            attempt: window.attempt,
            file: window.source.display().to_string(),
        }
    }
}

/// The state of a followed source, for `source` events and the workbench header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceState {
    /// Listed and read.
    Connected,
    /// The last listing or read failed.
    Lost,
    /// Waiting before the next attempt (backoff).
    Retrying,
}

/// How far a remote source's background fetch of saved tensors has got: the tensor files
/// that windowed dumps compute their statistics from, fetched before those windows are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct FetchProgress {
    /// Tensor files fetched so far in this round.
    pub files_done: usize,
    /// Tensor files this round fetches.
    pub files_total: usize,
    /// Bytes transferred so far in this round.
    pub bytes: u64,
    /// Windows waiting for them.
    pub windows: usize,
    /// Files of the round that the remote host did not have (a manifest listed before its
    /// tensors were written): asked for again at the next full listing.
    pub files_missing: usize,
}

impl FetchProgress {
    /// True once every file of the round is in.
    pub fn finished(&self) -> bool {
        self.files_done >= self.files_total
    }

    /// For people: `fetching tensor files 12/40 (3.1 MB) for 2 windows`, with `, 3 not on the
    /// remote host yet` when some were missing.
    pub fn describe(&self) -> String {
        let verb = if self.finished() {
            "fetched"
        } else {
            "fetching"
        };
        let missing = match self.files_missing {
            0 => String::new(),
            n => format!(", {n} not on the remote host yet"),
        };
        format!(
            "{verb} tensor files {}/{} ({}{missing}) for {} window{}",
            self.files_done,
            self.files_total,
            crate::model::present::number::megabytes(self.bytes),
            self.windows,
            if self.windows == 1 { "" } else { "s" }
        )
    }
}

/// One event: `kind` says which; `window` is set for the kinds that concern a window, and
/// `body` holds the kind's own fields. Serialized flat: `{"v", "kind", "ts", "source",
/// rank, label, match, occurrence, attempt (window kinds), …body}`.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    /// `window`, `first_nonfinite`, `stride_conflict`, `first_divergence`, `source`, `warning`,
    /// `diagnosis`.
    pub kind: &'static str,
    /// Unix seconds when the event was made.
    pub ts: f64,
    /// The SOURCE it concerns.
    pub source: String,
    /// The window it concerns, for window kinds.
    pub window: Option<WindowKey>,
    /// The kind's fields (an object).
    pub body: Value,
}

impl WatchEvent {
    /// True for the kinds that are findings (a non-finite record, a stride conflict, a
    /// divergence): what `--until-finding` stops at and what makes the exit status 1.
    pub fn is_finding(&self) -> bool {
        matches!(
            self.kind,
            "first_nonfinite" | "stride_conflict" | "first_divergence" | "single_run"
        ) && !self.body.get("cleared").is_some_and(|c| c == true)
    }

    /// A `source` event: `state`, with why.
    pub fn source(source: &str, state: SourceState, reason: &str, ts: f64) -> WatchEvent {
        WatchEvent {
            kind: "source",
            ts,
            source: source.to_string(),
            window: None,
            body: json!({"state": state, "reason": reason}),
        }
    }

    /// A `source` event (state `connected`) saying how far the background fetch of saved
    /// tensors has got, with the figures as `fetch: {files_done, files_total, bytes, windows}`.
    pub fn fetching(source: &str, progress: &FetchProgress, ts: f64) -> WatchEvent {
        WatchEvent {
            kind: "source",
            ts,
            source: source.to_string(),
            window: None,
            body: json!({
                "state": SourceState::Connected,
                "reason": progress.describe(),
                "fetch": progress,
            }),
        }
    }

    /// A `diagnosis` event: the followed capture's diagnosis (against `--vs`, when given),
    /// concerning `source` (the first SOURCE: the diagnosis is of the merged capture). Its
    /// body: `conclusion`, `found`, `rules` (the findings' rules, most specific first),
    /// `chain` (every cited record once, in chain order: `side`, `rank`, `window`, `key`,
    /// `seq`, `role`) and `next` (the next experiment's `step`, `text` and `commands`, or
    /// null). [`super::Tracker`] lets one through only when the conclusion or the chain
    /// changed.
    pub fn diagnosis(source: &str, diagnosis: &Diagnosis, ts: f64) -> WatchEvent {
        let chain: Vec<Value> = diagnosis
            .chain()
            .iter()
            .map(|c| {
                json!({"side": c.side.to_string(), "rank": c.rank, "window": c.window,
                       "key": c.key, "seq": c.seq, "role": c.role})
            })
            .collect();
        WatchEvent {
            kind: "diagnosis",
            ts,
            source: source.to_string(),
            window: None,
            body: json!({
                "conclusion": diagnosis.conclusion,
                "found": diagnosis.found,
                "rules": diagnosis.findings.iter().map(|f| f.rule.name()).collect::<Vec<_>>(),
                "chain": chain,
                "next": diagnosis.next,
            }),
        }
    }

    /// A `warning` event for a loader warning of `source`.
    pub fn warning(source: &str, warning: &Warning, ts: f64) -> WatchEvent {
        WatchEvent {
            kind: "warning",
            ts,
            source: source.to_string(),
            window: None,
            body: json!({
                "file": warning.file,
                "message": warning.message,
                "warning_kind": warning.kind,
            }),
        }
    }

    /// The event as one JSON object.
    pub fn to_json(&self) -> Value {
        let mut out =
            json!({"v": EVENT_VERSION, "kind": self.kind, "ts": self.ts, "source": self.source});
        let object = out.as_object_mut().expect("an object");
        if let Some(Value::Object(key)) = self.window.as_ref().map(|k| json!(k)) {
            for (name, value) in key {
                if name != "source" {
                    object.insert(name, value);
                }
            }
        }
        if let Value::Object(body) = &self.body {
            for (name, value) in body {
                object.insert(name.clone(), value.clone());
            }
        }
        out
    }

    /// The event for people: one line.
    pub fn to_text(&self) -> String {
        let at = self.window.as_ref().map_or(String::new(), |k| {
            let attempt = crate::model::present::attempt_text(k.attempt);
            format!(
                " rank {} {:?} (match {}, call {}{attempt})",
                k.rank, k.label, k.match_index, k.occurrence
            )
        });
        let b = &self.body;
        let what = match self.kind {
            "window" if b.get("removed").is_some() => "removed".to_string(),
            "window" if b.get("superseded").is_some() => {
                format!("superseded by attempt {}", b["by_attempt"])
            }
            "window" => format!("{} records", b["records"]),
            "first_nonfinite" if b.get("cleared").is_some() => {
                "no non-finite record any more".to_string()
            }
            "first_nonfinite" => format!(
                "FIRST NON-FINITE {} (seq {}, {})",
                str_of(&b["stage"]),
                b["seq"],
                str_of(&b["counts"])
            ),
            "stride_conflict" => format!(
                "STRIDE CONFLICT {}",
                b["members"]
                    .as_array()
                    .map(|m| m.iter().map(str_of).collect::<Vec<_>>().join(" vs "))
                    .unwrap_or_default()
            ),
            "first_divergence" if b.get("cleared").is_some() => {
                "no divergence any more".to_string()
            }
            "first_divergence" => format!(
                "FIRST DIVERGENCE {} ({}) against {}",
                str_of(&b["stage"]),
                str_of(&b["verdict"]["kind"]),
                str_of(&b["vs"])
            ),
            "single_run" if b.get("cleared").is_some() => {
                "no finding from one run any more".to_string()
            }
            "single_run" => b["findings"]
                .as_array()
                .map(|all| {
                    all.iter()
                        .map(|f| {
                            let ranks: Vec<String> = f["ranks"]
                                .as_array()
                                .map(|r| r.iter().map(str_of).collect())
                                .unwrap_or_default();
                            format!(
                                "{} {} (rank{} {})",
                                str_of(&f["finding"]).replace('_', " ").to_uppercase(),
                                str_of(&f["stage"]),
                                if ranks.len() == 1 { "" } else { "s" },
                                ranks.join(", ")
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("; ")
                })
                .unwrap_or_default(),
            "source" => format!("{} {}", str_of(&b["state"]), str_of(&b["reason"])),
            "warning" => format!("{}: {}", str_of(&b["file"]), str_of(&b["message"])),
            "diagnosis" => match b["chain"].as_array().map_or(0, Vec::len) {
                0 => str_of(&b["conclusion"]),
                n => format!(
                    "{} ({n} record{} cited)",
                    str_of(&b["conclusion"]),
                    if n == 1 { "" } else { "s" }
                ),
            },
            other => other.to_string(),
        };
        // A note is no warning; a window's line names its file (two runs under one
        // directory give windows alike in everything else).
        let kind = match self.kind {
            "warning" if b["warning_kind"] == "note" => "note",
            kind => kind,
        };
        let file = match (&self.window, self.kind) {
            (Some(key), "window") => format!(" · {}", key.file),
            _ => String::new(),
        };
        format!("[{}] {kind}{at}: {what}{file}", self.source)
    }
}

fn str_of(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_string)
}

/// Everything a followed capture holds now, as events with timestamp `ts`: per window a
/// `window` event (records), and its findings: `first_nonfinite` (the stage as
/// `stage#occurrence`, with seq and counts), one `stride_conflict` per conflicting alias
/// group (its members), and, when `analysis` has a diff against the `--vs` capture named
/// `vs`, `first_divergence` (stage and verdict); and one `single_run` event for the whole
/// capture (window null, concerning the first SOURCE): its findings from one run (`finding`
/// kind, `stage`, `ranks`, `sentence`), or `cleared: true`. A window whose finding went away gets the
/// finding's kind with `cleared: true` (only when it had one: [`super::Tracker`] drops the
/// rest). `sources[i]` is the SOURCE of `dump.windows[i]`.
pub fn snapshot(
    dump: &Dump,
    sources: &[String],
    analysis: &Analysis,
    vs: Option<&str>,
    ts: f64,
) -> Vec<WatchEvent> {
    let mut events = Vec::new();
    for (i, window) in dump.windows.iter().enumerate() {
        let source = &sources[i];
        let key = WindowKey::of(source, window);
        let event = |kind: &'static str, body: Value| WatchEvent {
            kind,
            ts,
            source: source.clone(),
            window: Some(key.clone()),
            body,
        };
        events.push(event("window", json!({"records": window.records.len()})));
        let Some(scan) = analysis.scans_a.get(i) else {
            continue;
        };
        events.push(match &scan.first_nonfinite {
            Some(n) => event(
                "first_nonfinite",
                json!({"stage": n.key, "seq": n.seq, "nan_count": n.nan_count,
                       "inf_count": n.inf_count, "counts_known": n.counts_known,
                       "counts": n.counts_text()}),
            ),
            None => event("first_nonfinite", json!({"cleared": true})),
        });
        let conflicts: Vec<Vec<&str>> = scan
            .alias_groups
            .iter()
            .filter(|g| g.stride_conflict)
            .map(|g| g.members.iter().map(|m| m.key.as_str()).collect())
            .collect();
        events.push(match conflicts.is_empty() {
            true => event("stride_conflict", json!({"cleared": true})),
            false => event(
                "stride_conflict",
                json!({"members": conflicts[0], "groups": conflicts}),
            ),
        });
    }
    if let Some(source) = sources.first() {
        let findings: Vec<Value> = analysis
            .single_run_a
            .findings
            .iter()
            .map(|f| {
                json!({"finding": f.kind, "stage": f.key, "ranks": f.ranks,
                       "sentence": f.sentence})
            })
            .collect();
        events.push(WatchEvent {
            kind: "single_run",
            ts,
            source: source.clone(),
            window: None,
            body: if findings.is_empty() {
                json!({"cleared": true})
            } else {
                json!({"findings": findings})
            },
        });
    }
    if let (Some(diff), Some(vs)) = (&analysis.diff, vs) {
        for w in &diff.windows {
            let Some(i) = w.a.id.map(|id| id.0).filter(|&i| i < dump.windows.len()) else {
                continue;
            };
            let key = WindowKey::of(&sources[i], &dump.windows[i]);
            let body = match w.first() {
                Some(pair) => json!({"stage": pair.key, "position": pair.position,
                                     "verdict": pair.comparison.verdict, "vs": vs}),
                None => json!({"cleared": true, "vs": vs}),
            };
            events.push(WatchEvent {
                kind: "first_divergence",
                ts,
                source: sources[i].clone(),
                window: Some(key),
                body,
            });
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_lines_name_notes_as_notes_and_a_window_by_its_file() {
        let note = Warning::note(
            std::path::PathBuf::from("run/a"),
            "rank 0 is in A and B".to_string(),
        );
        assert_eq!(
            WatchEvent::warning("A", &note, 0.0).to_text(),
            "[A] note: run/a: rank 0 is in A and B"
        );
        let lost = Warning::lost(
            std::path::PathBuf::from("run/a/m.json"),
            "cut short".to_string(),
        );
        assert_eq!(
            WatchEvent::warning("A", &lost, 0.0).to_text(),
            "[A] warning: run/a/m.json: cut short"
        );
        let window = WatchEvent {
            kind: "window",
            ts: 0.0,
            source: "A".into(),
            window: Some(WindowKey {
                source: "A".into(),
                rank: 1,
                label: "req".into(),
                match_index: 1,
                occurrence: 1,
                attempt: 1,
                file: "run/a/rank1/match1-occ1/manifest.json".into(),
            }),
            body: json!({"records": 119}),
        };
        assert_eq!(
            window.to_text(),
            "[A] window rank 1 \"req\" (match 1, call 1): 119 records · run/a/rank1/match1-occ1/manifest.json"
        );
    }
}
