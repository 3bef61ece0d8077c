//! The next cheapest experiment (seed 000's ladder: ablate one operator, compare the first bad
//! token, a summary dump, full tensors of one stage, a single-operator replay, the case
//! matrix): the one step that separates what the findings leave open. A capture is printed as
//! the recorded command line with the new `DUMP_PROBE_*` settings, a replay as the `dumpview`
//! command with its rank and window; an ablation or an edit is words only.

use std::path::Path;

use crate::model::dump::{Record, Window};

use super::context::{Context, record, side_name};
use super::inputs::input_set;
use super::types::{Cite, Experiment, Finding, Role, Rule, Step};

/// The experiment that follows the most specific finding; `None` without findings.
pub(super) fn experiment(cx: &Context, findings: &[Finding]) -> Option<Experiment> {
    let top = findings.first()?;
    let by_role = |role: Role| top.evidence.iter().find(|c| c.role == role);
    match top.rule {
        Rule::WriterAddressReader => {
            let (w, r) = (by_role(Role::Writer)?, by_role(Role::Reader)?);
            let window = cx.window_of(w)?;
            let (writer, reader) = (record(window, &w.key)?, record(window, &r.key)?);
            if saved_whole(writer) && saved_whole(reader) {
                return Some(Experiment {
                    step: Step::Ablation,
                    text: format!(
                        "Instrumentation can stop: the writer, the address and the reader are \
                         named. Change one variable: make `{}` write through the layout `{}` \
                         reads (or the reader read through the writer's), rerun {}, and see \
                         whether the first divergence goes.",
                        w.key,
                        r.key,
                        side_name(w.side)
                    ),
                    commands: Vec::new(),
                });
            }
            capture(
                window,
                &[&w.key, &r.key],
                &[],
                format!(
                    "Save the writer's and the reader's whole tensors in {} to see which bytes \
                     each layout puts where; then the fix is one variable (the writer's or the \
                     reader's strides).",
                    side_name(w.side)
                ),
            )
        }
        Rule::BadBytesWriter => {
            let (w, r) = (
                by_role(Role::LastFiniteWriter)?,
                by_role(Role::FirstNonFinite)?,
            );
            Some(Experiment {
                step: Step::Instrument,
                text: format!(
                    "Capture what runs between `{}` (seq {}) and `{}` (seq {}) in {}: a \
                     `capture()` after each operator there, `with dump_probe.ops(REGEX)` around \
                     that code, or `python -m dump_probe --hook REGEX` over its modules. The \
                     first of them whose output lies on these bytes and holds the NaN or \
                     infinity is the writer.",
                    w.key,
                    w.seq,
                    r.key,
                    r.seq,
                    side_name(r.side)
                ),
                commands: Vec::new(),
            })
        }
        Rule::OperatorOrInputs => operator_or_inputs(cx, top),
        Rule::MovedValues => {
            let suspects: Vec<&Cite> = top
                .evidence
                .iter()
                .filter(|c| c.role == Role::Suspect)
                .collect();
            let keys: Vec<&str> = suspects.iter().map(|c| c.key.as_str()).collect();
            let d = cx.first_divergence()?;
            let saved = |w: &Window| keys.iter().all(|k| record(w, k).is_some_and(saved_whole));
            if saved(d.wa) && saved(d.wb) {
                return Some(Experiment {
                    step: Step::Ablation,
                    text: format!(
                        "Both sides saved the index stages whole ({}): `dumpview tensors` shows \
                         which entries differ. Change one variable: give B A's values of them \
                         (or fix what computes them) and see whether the values stop moving.",
                        keys.join(", ")
                    ),
                    commands: Vec::new(),
                });
            }
            both_sides(
                [d.wa, d.wb],
                &keys,
                format!(
                    "Save the index stages' whole tensors on both sides ({}) to see which \
                     entries differ; then give B A's values of them (one variable) and see \
                     whether the values stop moving.",
                    keys.join(", ")
                ),
            )
        }
        Rule::AcrossRanks => {
            let origin = by_role(Role::Origin)?;
            let window = cx.window_of(origin)?;
            let mut keys = vec![origin.key.as_str()];
            let text = match by_role(Role::Collective) {
                Some(c) => {
                    keys.push(c.key.as_str());
                    format!(
                        "Save these stages' whole tensors on every rank of {} to compare what \
                         each rank sent into `{}` and received from it.",
                        side_name(origin.side),
                        c.key
                    )
                }
                None => format!(
                    "Save `{}`'s whole tensors on every rank of {} to see which elements of \
                     which rank go wrong first.",
                    origin.key,
                    side_name(origin.side)
                ),
            };
            capture(
                window,
                &keys,
                &[("DUMP_PROBE_RANKS", "all".to_string())],
                text,
            )
        }
        Rule::Origin => origin(cx, top),
        Rule::MovedWrite => {
            let w = by_role(Role::Writer)?;
            Some(Experiment {
                step: Step::Instrument,
                text: format!(
                    "Capture, on both sides, the slot or block index the writer of `{}` \
                     computes (an integer `capture()` of it) beside the block table: the first \
                     side whose index is not its table's block is where the write goes astray.",
                    w.key
                ),
                commands: Vec::new(),
            })
        }
        Rule::SingleRun => single_run_next(cx, top),
    }
}

/// The next step after a finding from one run: the loader, the dispatch or the buffer.
fn single_run_next(cx: &Context, top: &Finding) -> Option<Experiment> {
    let first = top.evidence.first()?;
    let text = match first.role {
        Role::Duplicate => format!(
            "Print or capture which slice each rank's loader reads for `{}` (its shard index \
             and offsets). If the stage is truly replicated, annotate it `replicated:AXIS` and \
             this finding goes; otherwise a capture at one rank (tp=1) as B lets `dumpview \
             diff` merge the pieces and name the wrong ones.",
            first.key
        ),
        Role::Silent => format!(
            "Capture the ids the dispatch hands `{}` on every rank (an integer `capture()` \
             before it): ids outside a rank's local range select nothing. Then change one \
             variable: map them to local ids and see whether the zeros go.",
            first.key
        ),
        Role::Stale => {
            let window = cx.window_of(first)?;
            return capture(
                window,
                &[&first.key],
                &[],
                format!(
                    "Run the same steps with the buffer `{}` writes into refreshed every call \
                     (eager, no graph replay): if it then changes with its rows, the reuse is \
                     the cause. Saving its whole tensor in every call shows which call kept \
                     the old values.",
                    first.key
                ),
            );
        }
        _ => return None,
    };
    Some(Experiment {
        step: Step::Instrument,
        text,
        commands: Vec::new(),
    })
}

fn operator_or_inputs(cx: &Context, top: &Finding) -> Option<Experiment> {
    let d = cx.first_divergence()?;
    let key = &d.pair.key;
    let inputs_differ = top
        .inputs
        .iter()
        .any(|i| i.verdict != "agree" && i.verdict != "unknown");
    if inputs_differ {
        let upstream = top.evidence.iter().find(|c| c.role == Role::Upstream);
        return Some(Experiment {
            step: Step::Instrument,
            text: format!(
                "Capture the operators between {} and `{key}` on both sides (a `capture()` \
                 after each, or `python -m dump_probe --hook REGEX` over their modules): the \
                 first of them that diverges is where the inputs start to differ.",
                upstream.map_or("the start of the forward".to_string(), |u| format!(
                    "`{}`",
                    u.key
                ))
            ),
            commands: Vec::new(),
        });
    }
    if let (Some(_), Some(set)) = (input_set(d.wa, key), input_set(d.wb, key))
        && !is_hook_set(set)
    {
        return Some(Experiment {
            step: Step::CrossReplay,
            text: format!(
                "Run each side's operator on the other side's captured inputs: if B's operator \
                 on A's inputs gives A's output, the operators agree and the difference is in \
                 the configuration around `{key}`; if not, B's operator (or its settings) is \
                 the cause."
            ),
            commands: vec![format!(
                "dumpview replay --cross {} {} --stage {}#{}{}",
                quote(&dir_of(d.wa)),
                quote(&dir_of(d.wb)),
                set.stage,
                set.occurrence,
                window_options(d.wb)
            )],
        });
    }
    Some(Experiment {
        step: Step::Ablation,
        text: format!(
            "The operator producing `{key}` differs with the same inputs: change one setting \
             of it (its dtype, kernel or configuration) in B to A's and rerun.{}",
            if input_set(d.wb, key).is_some_and(is_hook_set) {
                " Its input sets were saved by a hook: `dumpview replay --cross` runs them \
                 with `--candidate FILE.py:FUNCTION`, a function of yours that calls the module."
            } else {
                ""
            }
        ),
        commands: Vec::new(),
    })
}

fn origin(cx: &Context, top: &Finding) -> Option<Experiment> {
    let o = top.evidence.iter().find(|c| c.role == Role::Origin)?;
    let window = cx.window_of(o)?;
    let own = record(window, &o.key)?;
    let Some(d) = cx.first_divergence() else {
        // One capture: the whole tensor of the first non-finite record and the record before.
        let before = window
            .records
            .iter()
            .filter(|r| r.seq < own.seq)
            .max_by_key(|r| r.seq);
        let mut keys = vec![o.key.clone()];
        if let Some(b) = before {
            keys.insert(0, b.key());
        }
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        return capture(
            window,
            &keys,
            &[],
            format!(
                "Save the whole tensors of `{}` and of the record captured before it, to see \
                 which elements go non-finite first and what they were computed from.",
                o.key
            ),
        );
    };
    let (ra, rb) = (record(d.wa, &o.key), record(d.wb, &o.key));
    let both_saved = ra.is_some_and(saved_whole) && rb.is_some_and(saved_whole);
    if !both_saved {
        return both_sides(
            [d.wa, d.wb],
            &[&o.key],
            format!(
                "Save `{}`'s whole tensors on both sides: `dumpview tensors` then gives the \
                 first mismatching element, the error distribution and the ULP distance.",
                o.key
            ),
        );
    }
    let has_a = input_set(d.wa, &o.key).is_some();
    let has_b = input_set(d.wb, &o.key).is_some();
    Some(Experiment {
        step: Step::Instrument,
        text: format!(
            "Capture `{}`'s input set on {}: `dump_probe.capture_inputs(\"{}\", ..., \
             outputs=(\"{}\",))` just before its operator (or `hook(..., input_sets=True)` on \
             its module); dumpview then tells whether its operator or its inputs differ, and \
             `dumpview replay --cross` feeds each side's operator the other's inputs.",
            o.key,
            match (has_a, has_b) {
                (true, false) => "B too",
                (false, true) => "A too",
                _ => "both sides",
            },
            own.stage,
            own.stage
        ),
        commands: Vec::new(),
    })
}

/// Whether `set` was saved by `hook(..., input_sets=True)` (the rule `replay --cross` uses,
/// [`crate::model::replay::cross::is_module_set`]): its operator is the module's class, which a
/// replay cannot rebuild with its weights, so no cross-fed replay is printed for it.
fn is_hook_set(set: &crate::model::dump::InputSetEntry) -> bool {
    let names: Vec<&str> = set.args.keys().map(String::as_str).collect();
    crate::model::replay::cross::is_module_set(set.op.as_deref().unwrap_or(""), &names)
}

/// A capture experiment on one window's run.
fn capture(
    window: &Window,
    keys: &[&str],
    extra: &[(&str, String)],
    text: String,
) -> Option<Experiment> {
    let command = rerun(window, keys, extra);
    Some(Experiment {
        step: Step::Capture,
        text: with_note(text, window, command.is_some(), keys, extra),
        commands: command.into_iter().collect(),
    })
}

/// The same capture of A's and B's runs.
fn both_sides(windows: [&Window; 2], keys: &[&str], text: String) -> Option<Experiment> {
    let mut commands: Vec<String> = windows.iter().filter_map(|w| rerun(w, keys, &[])).collect();
    // Two runs recorded with one output directory (the default, then renamed): one new
    // directory each, or they would be attempts 1 and 2 of one window.
    if let [a, b] = commands.as_mut_slice()
        && let (Some(da), Some(db)) = (next_dir(windows[0]), next_dir(windows[1]))
        && da == db
    {
        let flag = |dir: &str| format!("DUMP_PROBE_DIR={}", quote(dir));
        *a = a.replace(&flag(&da), &flag(&format!("{da}-a")));
        *b = b.replace(&flag(&db), &flag(&format!("{db}-b")));
    }
    let all = commands.len() == 2;
    Some(Experiment {
        step: Step::Capture,
        text: with_note(text, windows[1], all, keys, &[]),
        commands,
    })
}

/// The settings spelled out where the command line is not known.
fn with_note(
    mut text: String,
    window: &Window,
    known: bool,
    keys: &[&str],
    extra: &[(&str, String)],
) -> String {
    if known && window.world_size > 1 {
        text.push_str(&format!(
            " The command line is rank {}'s, one process of a {}-rank job: start it the way the \
             job was launched (torchrun, mpirun, the serving engine), with these settings in \
             its environment.",
            window.rank, window.world_size
        ));
    }
    if known && window.run.as_ref().is_some_and(|r| r.cwd == ".") {
        text.push_str(" Run it from the repository root (the recorded working directory).");
    }
    if !known {
        text.push_str(&format!(
            " Rerun with {}DUMP_PROBE_TENSOR='{}' DUMP_PROBE_ROWS=all (the command line of {} \
             was not recorded: a probe older than the manifest's `run`, or a `run` that does not \
             read).",
            extra
                .iter()
                .map(|(k, v)| format!("{k}={} ", quote(v)))
                .collect::<String>(),
            stage_regex(keys),
            window.source.display()
        ));
    }
    text
}

/// `cd CWD && DUMP_PROBE=1 … DUMP_PROBE_TENSOR='^(…)$' DUMP_PROBE_ROWS=all PYTHON ARGV…`: the
/// recorded run with its `DUMP_PROBE_*` settings, the new ones, and a new output directory
/// (the probe never overwrites a dump). `None` without a recorded command line or when the
/// process was not started from a file or module (`python -c`).
pub(super) fn rerun(window: &Window, keys: &[&str], extra: &[(&str, String)]) -> Option<String> {
    let run = window.run.as_ref()?;
    let first = run.argv.first()?;
    if first == "-c" || first.is_empty() {
        return None;
    }
    // Only the probe's own settings: the recorded environment is input, and nothing else of
    // it belongs in a printed command.
    let mut env: std::collections::BTreeMap<String, String> = run
        .env
        .iter()
        .filter(|(k, _)| k.as_str() == "DUMP_PROBE" || k.starts_with("DUMP_PROBE_"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    env.insert("DUMP_PROBE".into(), "1".into());
    env.insert("DUMP_PROBE_DIR".into(), next_dir(window)?);
    env.insert("DUMP_PROBE_TENSOR".into(), stage_regex(keys));
    env.insert("DUMP_PROBE_ROWS".into(), "all".into());
    for (k, v) in extra {
        env.insert((*k).into(), v.clone());
    }
    let mut words = Vec::new();
    if !run.cwd.is_empty() && run.cwd != "." {
        words.push(format!("cd {} &&", quote(&run.cwd)));
    }
    words.extend(env.iter().map(|(k, v)| format!("{k}={}", quote(v))));
    words.push(quote(run.executable.as_deref().unwrap_or("python3")));
    words.extend(run.argv.iter().map(|a| quote(a)));
    Some(words.join(" "))
}

/// The new output directory of a rerun of `window`'s run: its recorded `DUMP_PROBE_DIR` (the
/// probe's default `dump_probe_out` where none was set) with `-next`.
fn next_dir(window: &Window) -> Option<String> {
    let run = window.run.as_ref()?;
    let dir = run
        .env
        .get("DUMP_PROBE_DIR")
        .map(String::as_str)
        .unwrap_or("dump_probe_out");
    Some(format!("{}-next", dir.trim_end_matches('/')))
}

/// `^(layers\.0\.k_cache_write|layers\.0\.k_cache_read)$` for keys `stage#N`.
fn stage_regex(keys: &[&str]) -> String {
    let mut stages: Vec<String> = Vec::new();
    for key in keys {
        let stage = key.rsplit_once('#').map_or(*key, |(s, _)| s);
        let escaped = regex::escape(stage);
        if !stages.contains(&escaped) {
            stages.push(escaped);
        }
    }
    match stages.as_slice() {
        [one] => format!("^{one}$"),
        _ => format!("^({})$", stages.join("|")),
    }
}

/// Whether the record's whole tensor was saved (every row).
fn saved_whole(record: &Record) -> bool {
    record.tensor_file.is_some() && record.truncated != Some(true)
}

/// A window's directory, as a dump path for `dumpview` commands.
fn dir_of(window: &Window) -> String {
    window
        .source
        .parent()
        .unwrap_or(Path::new("."))
        .display()
        .to_string()
}

/// ` --rank R` where the rank is not 0.
fn window_options(window: &Window) -> String {
    if window.rank == 0 {
        String::new()
    } else {
        format!(" --rank {}", window.rank)
    }
}

/// A word for a POSIX shell: as it is when it holds only safe characters, else single-quoted.
pub(super) fn quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./=:,@%+".contains(c));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}
