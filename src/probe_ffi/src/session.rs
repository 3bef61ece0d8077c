//! A session: the parsed environment, the runtime, the label bookkeeping of selection, the open
//! window's captures, and finishing a window into its files.
//!
//! One mutex guards the state; the two flags that every call checks first (`armed`, fixed at
//! open, and `active`, set while a window is open) are read without it, so a disarmed or idle
//! `dp_capture` costs two loads. `dp_close` empties the session but keeps its shell, so that a
//! late call on a closed session is answered `DP_ERR_CLOSED` instead of touching freed memory.

use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use rayon::prelude::*;

use crate::abi::{DEFAULT_BUDGET_BYTES, Failure, Status};
use crate::backend::{self, Runtime};
use crate::config::Config;
use crate::manifest::{self, Header, RecordOut, SavedTensor, Skipped};
use crate::row_map::RowMap;
use crate::stats::{self, Summary};
use crate::view::{Device, View};
use crate::window_files;

/// One `dp_session`.
pub struct Session {
    /// `DUMP_PROBE` set, the environment valid and the backend loaded: fixed at open.
    armed: bool,
    /// A window is open (a hint read without the lock; the locked state decides).
    active: AtomicBool,
    /// `dp_close` ran.
    closed: AtomicBool,
    /// Everything else; `None` once closed or when disarmed. Boxed: a closed session's
    /// handle is never freed (late calls must find it), so what stays is only this shell.
    state: Mutex<Option<Box<State>>>,
    /// The message of the last failing call (`dp_last_error`).
    pub(crate) last_error: Mutex<String>,
}

struct State {
    config: Config,
    root: PathBuf,
    rank: u32,
    world_size: u32,
    runtime: Box<dyn Runtime>,
    backend_reason: String,
    /// label → (1-based match index in first-seen order, arm calls so far).
    labels: HashMap<String, (u32, u32)>,
    arms: u64,
    window: Option<Window>,
    staging: crate::staging::Staging,
    /// (manifest path, records, bytes of token rows) of each window written, for the report
    /// at close.
    written: Vec<(PathBuf, usize, usize)>,
    /// Warnings already printed to stderr (each once per session).
    printed: HashSet<String>,
    /// request → the next token position: where a forward armed without a row map
    /// (`dp_arm`) counts on from, over every call of the label, captured or not.
    positions: HashMap<String, u64>,
    /// A call armed without a row map and not selected: (label, its first position) until
    /// its first token-row capture says how many rows it held (its positions still count).
    counting: Option<(String, u64)>,
    /// Forwards seen holding `DUMP_PROBE_REQUEST`'s request (its calls, for
    /// `DUMP_PROBE_OCCURRENCE`).
    request_calls: u32,
}

struct Window {
    label: String,
    match_index: u32,
    occurrence: u32,
    metadata: serde_json::Value,
    /// `metadata.parallel`, the axes shard annotations refer to.
    layout: crate::shard::Layout,
    armed_unix_s: f64,
    /// How the process was started, read at `dp_arm` (the working directory then).
    run: crate::run_info::RunInfo,
    captures: Vec<Capture>,
    skipped: Vec<Skipped>,
    warnings: Vec<String>,
    /// The window's stage names, each once, in first-capture order ([`Capture::stage`] indexes it).
    stage_names: Vec<String>,
    /// stage → (its index in `stage_names`, captures so far, whether DUMP_PROBE_TENSOR saves it).
    stages: HashMap<String, (u32, u32, bool)>,
    /// Streams with copies enqueued, in first-use order, each once.
    streams: Vec<(Device, usize)>,
    next_seq: u64,
    /// The forward's row map (`dp_arm_rows`); `None` without one: no token rows.
    row_map: Option<RowMap>,
}

/// Which dimensions of a capture hold the forward's token rows (`dp_capture_rows`, the
/// Python probe's `rows=`/`token_dims=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowsMode {
    /// Token rows when dimension 0 is the forward's row count (`DP_ROWS_AUTO`, dp_capture's).
    Auto,
    /// No token rows (`DP_ROWS_NONE`): weights, scores, cache state.
    None,
    /// Dimension 0 holds them, declared (`DP_ROWS_TOKENS`): a warning where it does not fit.
    Tokens,
    /// Dimensions 0 and 1 (`[batch, seq, ...]`), declared (`DP_ROWS_TOKENS_2D`).
    Tokens2d,
}

struct Capture {
    seq: u64,
    /// Index into [`Window::stage_names`].
    stage: u32,
    occurrence: u32,
    view: View,
    /// Staging address of the span (0 without elements).
    staged: usize,
    save: bool,
    /// The full tensor's coordinates of a sliced capture (`shard`), for its position checksum.
    split: Option<crate::stats::Split>,
    /// The capture's token rows: how many, and the dimensions that hold them (1 or 2).
    token_rows: Option<(u64, u8)>,
}

// SAFETY: the raw staging addresses in `Capture` point into the session's own arena, used only
// under the session's mutex (and by finish's workers while it holds that mutex).
unsafe impl Send for State {}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic caught at the boundary may have poisoned the lock; the state is still consistent
    // enough to answer (every mutation completes before anything that can panic).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn env_u32(name: &str) -> Option<u32> {
    std::env::var(name).ok()?.trim().parse().ok()
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: buf is writable for its length.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    if !ok {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

impl Session {
    /// Opens a session (`dp_open`). Returns the session and, when it is disarmed because of
    /// the environment or the backend, the failure to report with it.
    pub fn open(dir: Option<String>, rank: i32, budget_bytes: u64) -> (Session, Option<Failure>) {
        let config = Config::from_process();
        let disarmed = |failure: Option<Failure>| {
            let session = Session {
                armed: false,
                active: AtomicBool::new(false),
                closed: AtomicBool::new(false),
                state: Mutex::new(None),
                last_error: Mutex::new(String::new()),
            };
            (session, failure)
        };
        if !config.enabled {
            return disarmed(None);
        }
        if let Some(error) = &config.error {
            eprintln!("dump_probe: warning: {error}; the probe stays disarmed");
            return disarmed(Some(Failure::new(
                Status::Config,
                format!("{error}; the probe stays disarmed"),
            )));
        }
        for note in &config.notes {
            eprintln!("dump_probe: warning: {note}");
        }
        let selected = match backend::select(config.backend) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("dump_probe: warning: {e}; the probe stays disarmed");
                return disarmed(Some(Failure::new(
                    Status::Backend,
                    format!("{e}; the probe stays disarmed"),
                )));
            }
        };
        let root = config
            .directory
            .clone()
            .or(dir)
            .unwrap_or_else(|| "dump_probe_out".to_string());
        let rank = if rank >= 0 {
            rank as u32
        } else {
            match std::env::var("RANK") {
                Err(_) => 0,
                Ok(text) => text.trim().parse().unwrap_or_else(|_| {
                    // As the Python probe says it: a mistyped rank would otherwise write
                    // silently as rank 0, over the rank that really is 0.
                    eprintln!("dump_probe: warning: RANK={text:?} is not a rank; using rank 0");
                    0
                }),
            }
        };
        let budget = if budget_bytes == 0 {
            DEFAULT_BUDGET_BYTES
        } else {
            budget_bytes
        };
        let state = State {
            root: PathBuf::from(root),
            rank,
            world_size: env_u32("WORLD_SIZE").unwrap_or(1).max(1),
            runtime: selected.runtime,
            backend_reason: selected.reason,
            labels: HashMap::new(),
            arms: 0,
            window: None,
            staging: crate::staging::Staging::new(budget),
            written: Vec::new(),
            printed: HashSet::new(),
            positions: HashMap::new(),
            counting: None,
            request_calls: 0,
            config,
        };
        let session = Session {
            armed: true,
            active: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            state: Mutex::new(Some(Box::new(state))),
            last_error: Mutex::new(String::new()),
        };
        (session, None)
    }

    /// True when `DUMP_PROBE` armed this session (and nothing disarmed it).
    pub fn is_armed(&self) -> bool {
        self.armed
    }

    fn check_open(&self) -> Result<(), Failure> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Failure::new(
                Status::Closed,
                "the session was closed (dp_close)",
            ));
        }
        Ok(())
    }

    /// `dp_arm`: counts the label and opens a window when selected.
    ///
    /// # Errors
    /// `Closed`; `Metadata` for metadata that is not a JSON object; `Io` when a window still
    /// open could not be written first.
    pub fn arm(&self, label: String, metadata: Option<&str>) -> Result<(), Failure> {
        self.arm_rows(label, metadata, None)
    }

    /// `dp_arm_rows`: [`Session::arm`] with the forward's row map (`rows`: the map, or why the
    /// caller's entries could not make one; then the window opens without it and the call
    /// fails with `Metadata`).
    ///
    /// # Errors
    /// As [`Session::arm`], and `Metadata` for a row map that could not be made.
    pub fn arm_rows(
        &self,
        label: String,
        metadata: Option<&str>,
        rows: Option<Result<RowMap, String>>,
    ) -> Result<(), Failure> {
        self.check_open()?;
        if !self.armed {
            return Ok(());
        }
        let metadata = match metadata {
            None => serde_json::Value::Object(serde_json::Map::new()),
            Some(text) => match serde_json::from_str::<serde_json::Value>(text) {
                Ok(v @ serde_json::Value::Object(_)) => v,
                Ok(other) => {
                    return Err(Failure::new(
                        Status::Metadata,
                        format!(
                            "metadata_json must be a JSON object, not {}",
                            kind_of(&other)
                        ),
                    ));
                }
                Err(e) => {
                    return Err(Failure::new(
                        Status::Metadata,
                        format!("metadata_json is not JSON: {e}"),
                    ));
                }
            },
        };
        let mut guard = lock(&self.state);
        let Some(state) = guard.as_mut() else {
            return Err(Failure::new(
                Status::Closed,
                "the session was closed (dp_close)",
            ));
        };
        // A window still open is finished first, as the Python probe does.
        let finished = if state.window.is_some() {
            self.finish_locked(state)
        } else {
            Ok(())
        };
        state.counting = None; // a counting call that captured nothing counts no rows
        // A map given (selected or not) moves its requests' positions on.
        if let Some(Ok(map)) = &rows {
            for (request, end) in map.request_ends() {
                let next = state.positions.entry(request).or_insert(0);
                *next = (*next).max(end);
            }
        }
        let next = state.labels.len() as u32 + 1;
        let entry = state.labels.entry(label.clone()).or_insert((next, 0));
        entry.1 += 1;
        let (match_index, calls) = *entry;
        state.arms += 1;
        let mut map_failure = None;
        let (layout, problems) = crate::shard::layout_of(&metadata);
        // On every rank, selected or not, as dump_probe.py warns at arm.
        if let Some(message) = crate::shard::unselected_group(&layout, state.config.ranks.as_ref())
        {
            warn(&mut state.printed, &message);
        }
        // DUMP_PROBE_REQUEST: the forwards whose map (given, or the label's own) holds the
        // request, counted for DUMP_PROBE_OCCURRENCE; else DUMP_PROBE_MATCH's label's calls.
        let selected_call = match &state.config.request {
            Some(request) => {
                let holds = match &rows {
                    Some(Ok(map)) => map.request_ends().iter().any(|(r, _)| r == request),
                    Some(Err(_)) => false,
                    None => &label == request,
                };
                holds.then(|| {
                    state.request_calls += 1;
                    state.request_calls
                })
            }
            None => (match_index == state.config.match_index).then_some(calls),
        };
        if state.config.selects_rank(state.rank)
            && selected_call.is_some_and(|call| {
                call >= state.config.occurrence
                    && state.config.occurrence_last.is_none_or(|last| call <= last)
            })
        {
            let mut metadata = metadata;
            let mut warnings = Vec::new();
            if !problems.is_empty() {
                // What was left out is not recorded as if it were the layout (dump_probe.py's rule).
                metadata["parallel"] = crate::shard::layout_json(&layout);
            }
            for problem in problems {
                warn(&mut state.printed, &problem);
                warnings.push(problem);
            }
            let row_map = match rows {
                Some(Ok(map)) => Some(map),
                Some(Err(why)) => {
                    let message =
                        format!("dp_arm_rows({label:?}): {why}; the window has no row map");
                    warn(&mut state.printed, &message);
                    warnings.push(message.clone());
                    map_failure = Some(Failure::new(Status::Metadata, message));
                    None
                }
                // No map: one request, the label, counted on from the label's earlier calls;
                // the first token-row capture tells its rows (dump_probe.py's default).
                None => Some(RowMap::counted(
                    label.clone(),
                    state.positions.get(&label).copied().unwrap_or(0),
                )),
            };
            state.window = Some(Window {
                label,
                match_index,
                occurrence: calls,
                metadata,
                layout,
                armed_unix_s: now(),
                run: crate::run_info::RunInfo::current(),
                captures: Vec::new(),
                skipped: Vec::new(),
                warnings,
                stage_names: Vec::new(),
                stages: HashMap::new(),
                streams: Vec::new(),
                next_seq: 0,
                row_map,
            });
            self.active.store(true, Ordering::Release);
        } else if rows.is_none() && state.config.selects_rank(state.rank) {
            // Not captured, but its rows still move the label's positions on: its first
            // capture says how many (a shape, never a device value).
            let first = state.positions.get(&label).copied().unwrap_or(0);
            state.counting = Some((label, first));
            self.active.store(true, Ordering::Release);
        }
        match map_failure {
            Some(failure) => finished.and(Err(failure)),
            None => finished,
        }
    }

    /// `dp_capture`. `stage` and `view` are already checked by the caller.
    ///
    /// # Errors
    /// `Closed`, `Device`, and for a capture that was counted but not made: `OverBudget`,
    /// `GraphCapture`, `Runtime` (each recorded in the manifest).
    pub fn capture(&self, stage: &str, view: View) -> Result<(), Failure> {
        self.capture_rows(stage, view, RowsMode::Auto)
    }

    /// `dp_capture_rows`: [`Session::capture`] with the dimensions that hold the forward's
    /// token rows said (`rows`).
    ///
    /// # Errors
    /// As [`Session::capture`].
    pub fn capture_rows(&self, stage: &str, mut view: View, rows: RowsMode) -> Result<(), Failure> {
        self.check_open()?;
        if !self.armed {
            return Ok(());
        }
        let mut guard = lock(&self.state);
        let Some(state) = guard.as_mut() else {
            return Err(Failure::new(
                Status::Closed,
                "the session was closed (dp_close)",
            ));
        };
        let State {
            runtime,
            staging,
            window,
            config,
            printed,
            positions,
            counting,
            ..
        } = &mut **state;
        let Some(window) = window.as_mut() else {
            // A counting call's first capture with token rows: its rows move the label on.
            if let Some((label, first)) = counting.take_if(|_| rows != RowsMode::None) {
                let n = rows_along(&view, rows).unwrap_or(1);
                let next = positions.entry(label).or_insert(0);
                *next = (*next).max(first.saturating_add(n));
                self.active.store(false, Ordering::Release);
            }
            return Ok(());
        };
        // A map made without entries learns the forward's rows from its first token-row
        // capture, and moves the label's positions on by them.
        if let Some(map) = window.row_map.as_mut().filter(|m| m.pending()) {
            if let Some(n) = rows_along(&view, rows) {
                match map.learn(n) {
                    Ok(()) => {
                        for (request, end) in map.request_ends() {
                            let next = positions.entry(request).or_insert(0);
                            *next = (*next).max(end);
                        }
                    }
                    Err(why) => {
                        let message = format!(
                            "{stage:?}: {why}; the window has no row map (token rows not recorded)"
                        );
                        warn(printed, &message);
                        window.warnings.push(message);
                        window.row_map = None;
                    }
                }
            }
        }
        if !runtime.reads(view.device) {
            return Err(Failure::new(
                Status::Device,
                format!(
                    "the {} backend cannot read {} memory (stage {stage:?}); set DUMP_PROBE_BACKEND",
                    runtime.name(),
                    view.device.name()
                ),
            ));
        }
        let seq = window.next_seq;
        window.next_seq += 1;
        // A stage seen before costs no allocation here (most calls of a window), and its
        // DUMP_PROBE_TENSOR match is remembered.
        let (stage_index, occurrence, save) = match window.stages.get_mut(stage) {
            Some((index, n, save)) => {
                *n += 1;
                (*index, *n, *save)
            }
            None => {
                let index = window.stage_names.len() as u32;
                let save = config.saves_tensor(stage);
                window.stage_names.push(stage.to_string());
                window.stages.insert(stage.to_string(), (index, 1, save));
                (index, 1, save)
            }
        };
        // The record's key, for messages only.
        let key = StageKey(stage, occurrence);
        let mut fail = |window: &mut Window, status: Status, message: String| {
            if status != Status::OverBudget {
                warn(printed, &message);
                window.warnings.push(message.clone());
            }
            Err(Failure::new(status, message))
        };
        let stream = view.stream as *mut c_void;
        let on_device = view.device != Device::Host;
        if on_device && view.numel > 0 {
            match runtime.is_capturing(stream) {
                Ok(false) => {}
                Ok(true) => {
                    return fail(
                        window,
                        Status::GraphCapture,
                        format!(
                            "{key} (seq {seq}) not captured: its stream {stream:p} is being captured into a graph; \
                             the native probe does not support graph capture (capture outside it, or use \
                             dump_probe.py's graph_slot/capture_graph)"
                        ),
                    );
                }
                Err(e) => {
                    return fail(
                        window,
                        Status::Runtime,
                        format!("{key} (seq {seq}) not captured: {e}"),
                    );
                }
            }
        }
        let bytes = view.span_bytes();
        // A broadcast (stride 0) view reads few bytes but has as many elements as its shape:
        // the statistics (and a saved tensor) cost what the dense tensor would, so the budget
        // bounds that too.
        let dense = view.numel.saturating_mul(view.element_size() as u64);
        if dense > staging.budget() {
            window.skipped.push(Skipped {
                seq,
                stage: stage.to_string(),
                occurrence,
                bytes: dense,
                budget_left: staging.budget() - staging.staged(),
            });
            return fail(
                window,
                Status::OverBudget,
                format!(
                    "{key} (seq {seq}) skipped: its {} elements are {dense} bytes as a dense tensor (read from a span of \
                     {bytes} bytes), over the window's staging budget of {} bytes, which bounds what a capture's \
                     statistics read; recorded in skipped_over_budget",
                    view.numel,
                    staging.budget()
                ),
            );
        }
        let staged = if view.numel == 0 {
            0
        } else {
            match staging.reserve(runtime.as_ref(), bytes) {
                Ok(ptr) => ptr as usize,
                Err(crate::staging::NoSlot::OverBudget { left }) => {
                    window.skipped.push(Skipped {
                        seq,
                        stage: stage.to_string(),
                        occurrence,
                        bytes,
                        budget_left: left,
                    });
                    return fail(
                        window,
                        Status::OverBudget,
                        format!(
                            "{key} (seq {seq}) skipped: its span of {bytes} bytes is over the {left} bytes left of \
                             the window's staging budget ({} bytes); recorded in skipped_over_budget",
                            staging.budget()
                        ),
                    );
                }
                Err(crate::staging::NoSlot::Alloc(e)) => {
                    return fail(
                        window,
                        Status::Runtime,
                        format!("{key} (seq {seq}) not captured: {e}"),
                    );
                }
            }
        };
        if staged != 0 {
            let src = view.span_start() as *const u8;
            let copied = if on_device {
                runtime.copy_to_host_async(staged as *mut u8, src, bytes as usize, stream)
            } else {
                // Host memory is copied now, whatever the backend: a later write by the caller
                // must not be seen, as stream order would have it.
                // SAFETY: the span was checked; staging holds `bytes` at `staged`.
                unsafe { std::ptr::copy_nonoverlapping(src, staged as *mut u8, bytes as usize) };
                Ok(())
            };
            if let Err(e) = copied {
                return fail(
                    window,
                    Status::Runtime,
                    format!("{key} (seq {seq}) not captured: {e}"),
                );
            }
            if on_device && !window.streams.contains(&(view.device, view.stream)) {
                window.streams.push((view.device, view.stream));
            }
        }
        let split = match view
            .shard
            .as_deref()
            .map(|shard| crate::shard::resolve(shard, &view, &window.layout))
        {
            None => None,
            Some(Ok(resolved)) => {
                view.shard = Some(resolved.text);
                resolved.split
            }
            Some(Err(why)) => {
                let message = format!(
                    "{key} (seq {seq}): shard {:?}: {why}; recorded without a shard",
                    view.shard.as_deref().unwrap_or_default()
                );
                warn(printed, &message);
                window.warnings.push(message);
                view.shard = None;
                None
            }
        };
        // A slice of the last dimension (column parallel) weighs its columns at the full
        // tensor's coordinates; a slice of the token dimensions or between them and the last
        // would need dump_probe.py's further coordinates, which the native probe does not
        // write yet.
        let sliced = split.is_some_and(|s| s.dim + 1 != view.shape.len());
        let token_rows = match token_rows_of(&view, rows, window.row_map.as_ref()) {
            Ok(Some(_)) if sliced => {
                if matches!(rows, RowsMode::Tokens | RowsMode::Tokens2d) {
                    let message = format!(
                        "{key} (seq {seq}): token rows of a slice of a dimension other than the last (shard) are not written by the native probe yet; recorded without token rows"
                    );
                    warn(printed, &message);
                    window.warnings.push(message);
                }
                None
            }
            Ok(rows) => rows.filter(|_| config.row_stats_for(stage)),
            Err(why) => {
                let message = format!("{key} (seq {seq}): {why}; recorded without token rows");
                warn(printed, &message);
                window.warnings.push(message);
                None
            }
        };
        window.captures.push(Capture {
            seq,
            stage: stage_index,
            occurrence,
            view,
            staged,
            save,
            split,
            token_rows,
        });
        Ok(())
    }

    /// Whether dp_close ran.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether captures are being recorded (a hint, read without the lock).
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// `dp_finish`.
    ///
    /// # Errors
    /// `Closed`; `Io` when the window could not be written; `Runtime` when a stream failed to
    /// synchronize (the window is still written, those records with null statistics).
    pub fn finish(&self) -> Result<(), Failure> {
        self.check_open()?;
        if !self.armed {
            return Ok(());
        }
        let mut guard = lock(&self.state);
        let Some(state) = guard.as_mut() else {
            return Err(Failure::new(
                Status::Closed,
                "the session was closed (dp_close)",
            ));
        };
        self.finish_locked(state)
    }

    fn finish_locked(&self, state: &mut State) -> Result<(), Failure> {
        let Some(mut window) = state.window.take() else {
            // A counting call that captured nothing ends here too.
            if state.counting.take().is_some() {
                self.active.store(false, Ordering::Release);
            }
            return Ok(());
        };
        self.active.store(false, Ordering::Release);
        let result = finish_window(state, &mut window);
        state.staging.reset();
        result
    }

    /// `dp_close`: reports what was written, frees staging and the runtime.
    pub fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.active.store(false, Ordering::Release);
        let Some(mut state) = lock(&self.state).take() else {
            return;
        };
        report(&state, "at dp_close");
        state.window = None;
        let runtime = std::mem::replace(&mut state.runtime, Box::new(NoRuntime));
        for error in state.staging.free_all(runtime.as_ref()) {
            eprintln!("dump_probe: warning: freeing staging: {error}");
        }
    }
}

impl Session {
    /// At the process's exit, for a session never closed: what [`Session::close`] would
    /// report, and nothing freed (the device runtime may be gone already). Skipped when
    /// another thread holds the session (it is mid-call: a report then could deadlock).
    pub fn report_at_exit(&self) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        let Ok(guard) = self.state.try_lock() else {
            return;
        };
        if let Some(state) = guard.as_ref() {
            report(state, "at exit");
        }
    }
}

/// What a session wrote, or why it wrote nothing, on stderr (as the Python probe says at
/// exit); `when` is `at dp_close` or `at exit`.
fn report(state: &State, when: &str) {
    for (path, n, rows) in &state.written {
        let rows = if *rows > 0 {
            format!(", {rows} bytes of token rows in rows.f32")
        } else {
            String::new()
        };
        eprintln!(
            "dump_probe: wrote {} ({n} record{}{rows})",
            path.display(),
            if *n == 1 { "" } else { "s" }
        );
    }
    if let Some(window) = &state.window {
        eprintln!(
            "dump_probe: the window of label {:?} is still armed {when}: dp_finish was never called, so it was not written",
            window.label
        );
    } else if state.written.is_empty() && state.config.selects_rank(state.rank) {
        eprintln!(
            "dump_probe: nothing written: {}",
            nothing_written_reason(state)
        );
    }
}

/// Stands in for the runtime while the real one frees the staging it allocated.
struct NoRuntime;

impl Runtime for NoRuntime {
    fn name(&self) -> &'static str {
        "closed"
    }
    fn reads(&self, _: Device) -> bool {
        false
    }
    fn alloc_staging(&self, _: usize) -> Result<*mut u8, String> {
        Err("the session is closed".into())
    }
    fn free_staging(&self, _: *mut u8, _: usize) -> Option<String> {
        None
    }
    fn is_capturing(&self, _: *mut c_void) -> Result<bool, String> {
        Ok(false)
    }
    fn copy_to_host_async(
        &self,
        _: *mut u8,
        _: *const u8,
        _: usize,
        _: *mut c_void,
    ) -> Result<(), String> {
        Err("the session is closed".into())
    }
    fn synchronize(&self, _: *mut c_void) -> Result<(), String> {
        Ok(())
    }
}

fn kind_of(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn warn(printed: &mut HashSet<String>, message: &str) {
    if printed.insert(message.to_string()) {
        eprintln!("dump_probe: warning: {message}");
    }
}

/// Why an armed session on a selected rank wrote nothing, in the user's terms (the Python
/// probe's `_nothing_written_reason`).
fn nothing_written_reason(state: &State) -> String {
    let (want_match, want_occ) = (state.config.match_index, state.config.occurrence);
    if state.arms == 0 {
        return "dp_arm was never called".to_string();
    }
    let labels = state.labels.len() as u32;
    if labels < want_match {
        return format!(
            "no label matched DUMP_PROBE_MATCH={want_match}: {labels} label{} seen",
            if labels == 1 { "" } else { "s" }
        );
    }
    match state.labels.iter().find(|(_, (m, _))| *m == want_match) {
        Some((label, (_, calls))) if *calls < want_occ => format!(
            "DUMP_PROBE_OCCURRENCE={want_occ} is beyond the {calls} call{} of label {label:?} (match {want_match})",
            if *calls == 1 { "" } else { "s" }
        ),
        Some((label, _)) => format!(
            "the selected window of label {label:?} was not written (see the warning above)"
        ),
        None => "no window was selected".to_string(),
    }
}

/// `stage#occurrence`, as messages name a record; formatted only when a message is.
struct StageKey<'a>(&'a str, u32);

impl std::fmt::Display for StageKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}#{}", self.0, self.1)
    }
}

/// The token rows of a capture of `view` under `mode` and the forward's `map`: (rows, token
/// dimensions), `None` where it has none, or why rows declared with `Tokens`/`Tokens2d` do not
/// fit (docs/manifest.md, "Token rows": which captures get them).
/// The rows a capture holds along its token dimensions (`mode`: dimension 0, or 0 and 1);
/// `None` for [`RowsMode::None`], a shape without those dimensions, or no elements.
fn rows_along(view: &View, mode: RowsMode) -> Option<u64> {
    let dims = match mode {
        RowsMode::None => return None,
        RowsMode::Auto | RowsMode::Tokens => 1,
        RowsMode::Tokens2d => 2,
    };
    if view.shape.len() < dims || view.numel == 0 {
        return None;
    }
    view.shape[..dims]
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

fn token_rows_of(
    view: &View,
    mode: RowsMode,
    map: Option<&RowMap>,
) -> Result<Option<(u64, u8)>, String> {
    let Some(map) = map else {
        return match mode {
            RowsMode::Tokens | RowsMode::Tokens2d => {
                Err("token rows declared, but the window has no row map (dp_arm_rows)".to_string())
            }
            _ => Ok(None),
        };
    };
    let dims: u8 = match mode {
        RowsMode::None => return Ok(None),
        RowsMode::Auto | RowsMode::Tokens => 1,
        RowsMode::Tokens2d => 2,
    };
    let n = match view.shape.len() {
        len if len < dims as usize || view.numel == 0 => None,
        _ => view.shape[..dims as usize]
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d)),
    };
    match n {
        Some(n) if n == map.count() => Ok(Some((n, dims))),
        _ if mode == RowsMode::Auto => Ok(None),
        _ => Err(format!(
            "token rows declared in the first {dims} dimension{} of shape {:?}, but the forward holds {} rows",
            if dims == 1 { "" } else { "s" },
            view.shape,
            map.count()
        )),
    }
}

/// The per-row statistics of the window's captures with token rows, for the sidecar: per
/// capture (in capture order) its seq, its token dimensions, its values (`rows × 5` float32)
/// and, where `DUMP_PROBE_ROW_POSITIONS` left rows out, the `[entry, position]` of each row
/// kept.
type CaptureRows = (u64, u8, Vec<f32>, Option<Vec<(u32, u64)>>);

fn window_rows(
    window: &Window,
    positions_bound: (u64, u64),
    usable: &(dyn Fn(&Capture) -> bool + Sync),
) -> Vec<CaptureRows> {
    let Some(map) = window.row_map.as_ref().filter(|m| !m.pending()) else {
        return Vec::new();
    };
    let kept = map.kept(positions_bound);
    // The kept rows' positions where they are the leading rows (what a capture computing only
    // those needs); every row's, made once, for the others.
    let leading = kept
        .as_ref()
        .filter(|keep| keep.iter().enumerate().all(|(n, &i)| n == i))
        .map(|keep| map.positions(keep.len() as u64));
    let every = std::sync::OnceLock::new();
    let captures = &window.captures;
    crate::pool::run(|| {
        captures
            .par_iter()
            .filter(|c| c.token_rows.is_some() && usable(c))
            .filter_map(|c| {
                let (rows, dims) = c.token_rows?;
                // SAFETY: as for the statistics: staged, and its copy has completed.
                let staged = unsafe {
                    std::slice::from_raw_parts(c.staged as *const u8, c.view.span_bytes() as usize)
                };
                // Rows past DUMP_PROBE_ROW_POSITIONS are left out of the sidecar: where the
                // kept ones are the first rows along dimension 0, only they are computed (a
                // 16M-element 1-D capture would otherwise summarise 16M one-element rows).
                let prefix = kept
                    .as_ref()
                    .filter(|keep| dims == 1 && keep.iter().enumerate().all(|(n, &i)| n == i))
                    .and_then(|keep| leading_rows(&c.view, rows, keep.len() as u64));
                let (view, computed, positions) = match (&prefix, &leading) {
                    (Some((view, k)), Some(leading)) => (view, *k, leading),
                    _ => (
                        &c.view,
                        rows,
                        every.get_or_init(|| map.positions(map.count())),
                    ),
                };
                let mut out = vec![0.0f32; computed as usize * crate::rows::WIDTH];
                crate::rows::row_stats_split(
                    view,
                    staged,
                    computed,
                    positions,
                    &mut out,
                    c.split.as_ref(),
                )
                .ok()?;
                let listed = kept.as_ref().map(|keep| {
                    let w = crate::rows::WIDTH;
                    let mut rows = Vec::with_capacity(keep.len() * w);
                    for &i in keep {
                        rows.extend_from_slice(&out[i * w..(i + 1) * w]);
                    }
                    out = rows;
                    keep.iter().map(|&i| map.listed(i)).collect()
                });
                Some((c.seq, dims, out, listed))
            })
            .collect()
    })
}

/// The view of the first `k` of `rows` rows along dimension 0 of `view` (which holds them
/// there), and `k`; `None` where dimension 0 is not the rows or `k` is not fewer.
fn leading_rows(view: &View, rows: u64, k: u64) -> Option<(View, u64)> {
    if view.shape.first() != Some(&rows) || k == 0 || k >= rows {
        return None;
    }
    let mut sub = view.clone();
    sub.shape[0] = k;
    sub.numel = view.numel / rows * k;
    sub.span_elements = if sub.numel == 0 {
        0
    } else {
        1 + sub
            .shape
            .iter()
            .zip(&sub.strides)
            .map(|(&size, &stride)| (size - 1) * stride)
            .sum::<u64>()
    };
    Some((sub, k))
}

/// Writes the window's row statistics to `rows.f32` in `dir` (atomically, before the manifest
/// names it) and returns the manifest's `token_rows` object; `None` without a row map.
fn write_token_rows(
    dir: &std::path::Path,
    window: &Window,
    config: &Config,
    rows: Vec<CaptureRows>,
) -> Result<Option<serde_json::Value>, String> {
    // A map whose forward told no row count (no capture with token rows): none written.
    let Some(map) = window.row_map.as_ref().filter(|m| !m.pending()) else {
        return Ok(None);
    };
    let mut data: Vec<u8> = Vec::new();
    let mut records = Vec::with_capacity(rows.len());
    let mut first_row = 0u64;
    for (seq, dims, values, listed) in rows {
        let count = (values.len() / crate::rows::WIDTH) as u64;
        let dims: Vec<u32> = (0..u32::from(dims)).collect();
        let positions = listed.map(|l| {
            l.iter()
                .map(|&(entry, position)| serde_json::json!([entry, position]))
                .collect::<Vec<_>>()
        });
        records.push(serde_json::json!([seq, first_row, count, dims, positions]));
        for v in values {
            data.extend_from_slice(&v.to_le_bytes());
        }
        first_row += count;
    }
    const FILE: &str = "rows.f32";
    if !data.is_empty() {
        window_files::write_atomic(&dir.join(FILE), &[&data])?;
    }
    Ok(Some(serde_json::json!({
        "file": if data.is_empty() { None } else { Some(FILE) },
        "dtype": "float32",
        "byteorder": "little",
        "stats": dump_stats::ROW_STAT_NAMES,
        "map": map.manifest(),
        "positions_inferred": map.inferred(),
        "row_positions": [config.row_positions.0, config.row_positions.1],
        "stage_filter": config.row_regex.as_ref().map(|(text, _)| text),
        "rows": first_row,
        "bytes": data.len(),
        "records": records,
    })))
}

/// Synchronizes, summarizes, saves and writes one window.
fn finish_window(state: &mut State, window: &mut Window) -> Result<(), Failure> {
    // One synchronize per stream that has copies enqueued, and no more.
    let mut failed_streams: Vec<(Device, usize)> = Vec::new();
    for &(device, stream) in &window.streams {
        if let Err(e) = state.runtime.synchronize(stream as *mut c_void) {
            let n = window
                .captures
                .iter()
                .filter(|c| c.view.device == device && c.view.stream == stream)
                .count();
            let message = format!(
                "{e}: the {n} capture{} on that stream ({}) have no statistics and no saved tensor",
                if n == 1 { "" } else { "s" },
                device.name()
            );
            warn(&mut state.printed, &message);
            window.warnings.push(message);
            failed_streams.push((device, stream));
        }
    }
    let usable =
        |c: &Capture| c.staged != 0 && !failed_streams.contains(&(c.view.device, c.view.stream));
    // On this process's own pool: after a fork the inherited one has no threads.
    let captures = &window.captures;
    // With each sliced capture's local checksum (docs/manifest.md, `local_checksum`).
    let summaries: Vec<(Option<Summary>, Option<f64>)> = crate::pool::run(|| {
        captures
            .par_iter()
            .map(|c| {
                if !usable(c) {
                    return (None, None);
                }
                // SAFETY: the span was staged at c.staged and its copy has completed (host:
                // in dp_capture; device: synchronized above).
                let staged = unsafe {
                    std::slice::from_raw_parts(c.staged as *const u8, c.view.span_bytes() as usize)
                };
                stats::summarize_sliced(&c.view, staged, c.split.as_ref())
            })
            .collect()
    });
    let (dir, attempt) = window_files::new_window_dir(
        &state.root,
        state.rank,
        window.match_index,
        window.occurrence,
    )
    .map_err(|e| io_failure(state, e))?;
    if attempt > 1 {
        let base = dir.with_extension("");
        let message = format!(
            "{} already holds a dump; writing {} instead",
            base.display(),
            dir.display()
        );
        warn(&mut state.printed, &message);
    }
    let mut records = Vec::with_capacity(window.captures.len());
    for (capture, (summary, local)) in window.captures.iter().zip(summaries) {
        let mut tensor = None;
        if capture.save && (usable(capture) || capture.view.numel == 0) {
            let kept = window_files::rows_kept(&capture.view, state.config.rows);
            let staged: &[u8] = if capture.staged == 0 {
                &[]
            } else {
                // SAFETY: as for the statistics above.
                unsafe {
                    std::slice::from_raw_parts(
                        capture.staged as *const u8,
                        capture.view.span_bytes() as usize,
                    )
                }
            };
            let key = format!(
                "{}#{}",
                window.stage_names[capture.stage as usize], capture.occurrence
            );
            match window_files::save_tensor(&dir, &key, &capture.view, staged, kept) {
                Ok(file) => {
                    tensor = Some(SavedTensor {
                        file,
                        rows_kept: kept,
                        rows_total: capture.view.dim0(),
                    })
                }
                Err(e) => {
                    let message = format!("tensor {key} not saved ({e})");
                    warn(&mut state.printed, &message);
                    window.warnings.push(message);
                }
            }
        }
        records.push(RecordOut {
            seq: capture.seq,
            stage: &window.stage_names[capture.stage as usize],
            occurrence: capture.occurrence,
            view: &capture.view,
            local_checksum: capture.split.map(|_| local.filter(|_| summary.is_some())),
            summary,
            tensor,
        });
    }
    let token_rows = window_rows(window, state.config.row_positions, &usable);
    let token_rows = match write_token_rows(&dir, window, &state.config, token_rows) {
        Ok(t) => t,
        Err(e) => {
            // The window's records stand without their rows.
            let message =
                format!("token rows not written ({e}); the window is written without them");
            warn(&mut state.printed, &message);
            window.warnings.push(message);
            None
        }
    };
    let host = host_name();
    let header = Header {
        label: &window.label,
        match_index: window.match_index,
        occurrence: window.occurrence,
        attempt,
        rank: state.rank,
        world_size: state.world_size,
        metadata: &window.metadata,
        tensor_rows: state.config.rows,
        tensor_pattern: &state.config.tensor_pattern,
        host: &host,
        pid: std::process::id(),
        armed_unix_s: window.armed_unix_s,
        finished_unix_s: now(),
        run: &window.run,
        backend: state.runtime.name(),
        backend_reason: &state.backend_reason,
        budget_bytes: state.staging.budget(),
        staged_bytes: state.staging.staged(),
    };
    let text = manifest::text(
        &header,
        &records,
        &window.skipped,
        &window.warnings,
        token_rows.as_ref(),
    );
    let path = dir.join("manifest.json");
    window_files::write_atomic(&path, &[text.as_bytes()]).map_err(|e| io_failure(state, e))?;
    let n = records.len();
    let row_bytes = token_rows
        .as_ref()
        .and_then(|t| t["bytes"].as_u64())
        .unwrap_or(0) as usize;
    state.written.push((path, n, row_bytes));
    if !failed_streams.is_empty() {
        return Err(Failure::new(
            Status::Runtime,
            format!(
                "{} stream{} failed to synchronize; the window was written with a warning",
                failed_streams.len(),
                if failed_streams.len() == 1 { "" } else { "s" }
            ),
        ));
    }
    Ok(())
}

fn io_failure(state: &mut State, e: String) -> Failure {
    let message = format!("finish failed ({e}); nothing written for this window");
    warn(&mut state.printed, &message);
    Failure::new(Status::Io, message)
}
