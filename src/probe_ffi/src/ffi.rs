//! The `extern "C"` entry points of assets/dump_probe.h.
//!
//! Each one runs its body under `catch_unwind`, so a bug in the probe becomes
//! `DP_ERR_INTERNAL` and a message, never an unwind into C (undefined behaviour) or an abort of
//! the host program. A failure's message is kept in the session (or, without one, in this
//! thread's slot) for `dp_last_error`.

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::abi::{self, DpTensor, Failure, Status};
use crate::names::{checked_name, checked_name_ref};
use crate::session::Session;
use crate::view::View;

thread_local! {
    /// The last failure of a call given no session (or of dp_open), on this thread.
    static NO_SESSION_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
    /// What dp_last_error last returned on this thread (kept alive until the next call).
    static RETURNED: RefCell<CString> = RefCell::new(CString::default());
}

/// Set once the panic hook that keeps caught panics quiet is installed.
static QUIET_HOOK: AtomicBool = AtomicBool::new(false);

/// Replaces the default panic hook's report with one line naming the probe, so a caught panic
/// does not print a backtrace into the host program's stderr as if it had crashed.
fn install_quiet_hook() {
    if QUIET_HOOK.load(Ordering::Acquire) || QUIET_HOOK.swap(true, Ordering::AcqRel) {
        return;
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let ours = info
            .location()
            .is_some_and(|l| l.file().contains("probe_ffi"));
        if ours {
            eprintln!(
                "dump_probe: internal error caught ({info}); the call returns DP_ERR_INTERNAL"
            );
        } else {
            previous(info);
        }
    }));
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

fn remember(session: Option<&Session>, message: String) {
    match session {
        Some(s) => {
            *s.last_error.lock().unwrap_or_else(|e| e.into_inner()) = message;
        }
        None => NO_SESSION_ERROR.with(|slot| *slot.borrow_mut() = message),
    }
}

/// Runs `body` and turns its outcome into a status, recording a failure's message.
fn guard(session: Option<&Session>, body: impl FnOnce() -> Result<(), Failure>) -> c_int {
    install_quiet_hook();
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return Status::Ok as c_int,
        Ok(Err(failure)) => failure,
        Err(payload) => Failure::new(
            Status::Internal,
            format!("internal error in the probe: {}", panic_message(payload)),
        ),
    };
    let status = failure.status as c_int;
    // Recording must not unwind either (a poisoned lock is taken as is).
    let _ = catch_unwind(AssertUnwindSafe(|| remember(session, failure.message)));
    status
}

/// The session behind `s`, or the NULL failure.
///
/// # Safety
/// `s` is NULL or a pointer dp_open returned (sessions are never freed: see dp_close).
unsafe fn session<'a>(s: *const DpSession) -> Result<&'a Session, Failure> {
    if s.is_null() {
        return Err(Failure::new(Status::NullArgument, "session is NULL"));
    }
    // SAFETY: dp_open made it from a Box<Session> that is never freed.
    Ok(unsafe { &*s.cast::<Session>() })
}

/// The opaque `dp_session` of the header.
pub enum DpSession {}

/// `dp_open`; see assets/dump_probe.h.
///
/// # Safety
/// `dir` is NULL or a NUL-terminated string; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dp_open(
    dir: *const c_char,
    rank: c_int,
    budget_bytes: u64,
    out: *mut *mut DpSession,
) -> c_int {
    guard(None, || {
        if out.is_null() {
            return Err(Failure::new(Status::NullArgument, "out is NULL"));
        }
        // SAFETY: out is writable (caller's contract); cleared first so a failure leaves NULL.
        unsafe { *out = std::ptr::null_mut() };
        let dir = if dir.is_null() {
            None
        } else {
            // SAFETY: a NUL-terminated string (caller's contract).
            Some(
                unsafe { CStr::from_ptr(dir) }
                    .to_string_lossy()
                    .into_owned(),
            )
        };
        let (session, failure) = Session::open(dir, rank, budget_bytes);
        // Never freed (dp_close empties it), so late calls on a closed session stay safe.
        let raw = Box::into_raw(Box::new(session));
        // SAFETY: as above.
        unsafe { *out = raw.cast() };
        // SAFETY: raw is live and never freed.
        let leaked: &'static Session = unsafe { &*raw };
        if leaked.is_armed() {
            crate::exit_report::register(leaked);
        }
        match failure {
            None => Ok(()),
            Some(f) => {
                // SAFETY: raw is live.
                remember(Some(unsafe { &*raw }), f.message.clone());
                Err(f)
            }
        }
    })
}

/// `dp_arm`; see assets/dump_probe.h.
///
/// # Safety
/// `s` is NULL or from dp_open; `label` and `metadata_json` are NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dp_arm(
    s: *mut DpSession,
    label: *const c_char,
    metadata_json: *const c_char,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { arm_with(s, label, metadata_json, None) }
}

/// One entry of `dp_arm_rows`'s row map; see assets/dump_probe.h (`dp_rows_entry`).
#[repr(C)]
pub struct DpRowsEntry {
    /// NUL-terminated request id; NULL for padding rows.
    pub request: *const c_char,
    /// The first row's token position.
    pub first_position: i64,
    /// Rows.
    pub count: i64,
    /// NULL, or `count` positions.
    pub positions: *const i64,
    /// NULL, or `count` token ids.
    pub token_ids: *const i64,
}

/// The row map of `n` entries at `entries`, or why it cannot be one.
///
/// # Safety
/// `entries` is readable for `n` entries whose pointers are NULL or as the header says.
unsafe fn row_map(entries: *const DpRowsEntry, n: u64) -> Result<crate::row_map::RowMap, String> {
    if n == 0 {
        return Err("no row map entries".to_string());
    }
    if entries.is_null() {
        return Err("rows is NULL with n_rows > 0".to_string());
    }
    if n > crate::row_map::MAX_ROWS {
        return Err(format!(
            "n_rows is {n}, more than the {} rows a map may hold",
            crate::row_map::MAX_ROWS
        ));
    }
    let n = usize::try_from(n).map_err(|_| "n_rows does not fit this platform".to_string())?;
    // SAFETY: the caller's contract.
    let entries = unsafe { std::slice::from_raw_parts(entries, n) };
    let mut out = Vec::with_capacity(n);
    for (i, e) in entries.iter().enumerate() {
        let count = u64::try_from(e.count)
            .map_err(|_| format!("entry {i}: a negative count ({})", e.count))?;
        let first_position = u64::try_from(e.first_position).map_err(|_| {
            format!(
                "entry {i}: a negative first_position ({})",
                e.first_position
            )
        })?;
        let request = if e.request.is_null() {
            None
        } else {
            // SAFETY: the caller's contract.
            Some(
                unsafe { checked_name(e.request, "request") }
                    .map_err(|f| format!("entry {i}: {}", f.message))?,
            )
        };
        let list = |ptr: *const i64| -> Option<&[i64]> {
            // SAFETY: the caller's contract: NULL or `count` values.
            (!ptr.is_null()).then(|| unsafe { std::slice::from_raw_parts(ptr, count as usize) })
        };
        let positions = match list(e.positions) {
            None => None,
            Some(p) => Some(
                p.iter()
                    .map(|&x| {
                        u64::try_from(x)
                            .map_err(|_| format!("entry {i}: a negative position ({x})"))
                    })
                    .collect::<Result<Vec<u64>, String>>()?,
            ),
        };
        out.push(crate::row_map::Entry {
            request,
            first_position,
            count,
            positions,
            token_ids: list(e.token_ids).map(<[i64]>::to_vec),
        });
    }
    crate::row_map::RowMap::new(out)
}

/// `dp_arm_rows`; see assets/dump_probe.h.
///
/// # Safety
/// As [`dp_arm`]; `rows` is NULL or readable for `n_rows` entries as the header describes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dp_arm_rows(
    s: *mut DpSession,
    label: *const c_char,
    metadata_json: *const c_char,
    rows: *const DpRowsEntry,
    n_rows: u64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { arm_with(s, label, metadata_json, Some((rows, n_rows))) }
}

/// `dp_arm`, and `dp_arm_rows` with its entries (`rows`).
///
/// # Safety
/// As [`dp_arm_rows`].
unsafe fn arm_with(
    s: *mut DpSession,
    label: *const c_char,
    metadata_json: *const c_char,
    rows: Option<(*const DpRowsEntry, u64)>,
) -> c_int {
    // SAFETY: forwarded contract.
    let session = match unsafe { session(s) } {
        Ok(session) => session,
        Err(f) => return guard(None, || Err(f)),
    };
    guard(Some(session), || {
        if !session.is_armed() {
            return Ok(());
        }
        // SAFETY: forwarded contract.
        let label = unsafe { checked_name(label, "label") }?;
        // SAFETY: forwarded contract.
        let metadata = unsafe { metadata_text(metadata_json) }?;
        // SAFETY: forwarded contract.
        let map = rows.map(|(rows, n)| unsafe { row_map(rows, n) });
        session.arm_rows(label, metadata, map)
    })
}

/// `metadata_json` as UTF-8 text, `None` for NULL.
///
/// # Safety
/// `metadata_json` is NULL or NUL-terminated.
unsafe fn metadata_text<'a>(metadata_json: *const c_char) -> Result<Option<&'a str>, Failure> {
    if metadata_json.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    unsafe { CStr::from_ptr(metadata_json) }
        .to_str()
        .map(Some)
        .map_err(|e| {
            Failure::new(
                Status::Metadata,
                format!("metadata_json is not UTF-8 ({e})"),
            )
        })
}

/// `dp_capture_rows`; see assets/dump_probe.h.
///
/// # Safety
/// As [`dp_capture`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dp_capture_rows(
    s: *mut DpSession,
    stage: *const c_char,
    t: *const DpTensor,
    rows: i32,
) -> c_int {
    let mode = match rows {
        0 => crate::session::RowsMode::Auto,
        1 => crate::session::RowsMode::None,
        2 => crate::session::RowsMode::Tokens,
        3 => crate::session::RowsMode::Tokens2d,
        other => {
            // SAFETY: forwarded contract.
            let session = unsafe { session(s) }.ok();
            return guard(session, || {
                Err(Failure::new(
                    Status::Layout,
                    format!(
                        "rows is {other}: one of DP_ROWS_AUTO, DP_ROWS_NONE, DP_ROWS_TOKENS, DP_ROWS_TOKENS_2D"
                    ),
                ))
            });
        }
    };
    // SAFETY: forwarded contract.
    unsafe { capture_with(s, stage, t, mode) }
}

/// `dp_capture`; see assets/dump_probe.h.
///
/// # Safety
/// `s` is NULL or from dp_open; `stage` is NULL or NUL-terminated; `t` is NULL or a dp_tensor
/// as the header describes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dp_capture(
    s: *mut DpSession,
    stage: *const c_char,
    t: *const DpTensor,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { capture_with(s, stage, t, crate::session::RowsMode::Auto) }
}

/// `dp_capture` and `dp_capture_rows`.
///
/// # Safety
/// As [`dp_capture`].
unsafe fn capture_with(
    s: *mut DpSession,
    stage: *const c_char,
    t: *const DpTensor,
    mode: crate::session::RowsMode,
) -> c_int {
    if s.is_null() {
        return guard(None, || {
            Err(Failure::new(Status::NullArgument, "session is NULL"))
        });
    }
    // SAFETY: from dp_open, never freed.
    let session = unsafe { &*s.cast::<Session>() };
    // The disarmed and idle paths: two loads, nothing else.
    if !session.is_armed() || !session.is_active() {
        if session.is_closed() {
            return guard(Some(session), || session_closed(session));
        }
        return Status::Ok as c_int;
    }
    guard(Some(session), || {
        // SAFETY: forwarded contract.
        // Borrowed: a stage seen before in the window costs no allocation.
        let stage = unsafe { checked_name_ref(stage, "stage") }?;
        // SAFETY: forwarded contract.
        let view = unsafe { View::check(t) }?;
        session.capture_rows(stage, view, mode)
    })
}

/// `DP_ERR_CLOSED` for a closed session, else OK (the idle path's only question).
fn session_closed(session: &Session) -> Result<(), Failure> {
    if session.is_closed() {
        Err(Failure::new(
            Status::Closed,
            "the session was closed (dp_close)",
        ))
    } else {
        Ok(())
    }
}

/// `dp_finish`; see assets/dump_probe.h.
///
/// # Safety
/// `s` is NULL or from dp_open.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dp_finish(s: *mut DpSession) -> c_int {
    // SAFETY: forwarded contract.
    let session = match unsafe { session(s) } {
        Ok(session) => session,
        Err(f) => return guard(None, || Err(f)),
    };
    guard(Some(session), || session.finish())
}

/// `dp_close`; see assets/dump_probe.h.
///
/// # Safety
/// `s` is NULL or from dp_open.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dp_close(s: *mut DpSession) {
    // SAFETY: forwarded contract.
    if let Ok(session) = unsafe { session(s) } {
        guard(Some(session), || {
            session.close();
            Ok(())
        });
    }
}

/// `dp_last_error`; see assets/dump_probe.h.
///
/// # Safety
/// `s` is NULL or from dp_open.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dp_last_error(s: *const DpSession) -> *const c_char {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let message = if s.is_null() {
            NO_SESSION_ERROR.with(|slot| slot.borrow().clone())
        } else {
            // SAFETY: from dp_open, never freed.
            let session = unsafe { &*s.cast::<Session>() };
            session
                .last_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
        };
        // A message never holds NUL (names with NUL cannot be passed in C), but be sure.
        let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
        RETURNED.with(|slot| {
            *slot.borrow_mut() = text;
            slot.borrow().as_ptr()
        })
    }));
    result.unwrap_or(c"".as_ptr())
}

/// `dp_abi_constant`; see assets/dump_probe.h.
#[unsafe(no_mangle)]
pub extern "C" fn dp_abi_constant(key: i32) -> i64 {
    match key {
        0 => abi::ABI_VERSION,
        1 => i64::from(abi::MAX_NDIM),
        2 => abi::DEFAULT_BUDGET_BYTES as i64,
        3 => crate::dtype::DTYPE_COUNT,
        4 => abi::DEVICE_COUNT,
        5 => Status::Internal as i64,
        _ => i64::MIN,
    }
}

/// `dp_abi_tensor_size`; see assets/dump_probe.h.
#[unsafe(no_mangle)]
pub extern "C" fn dp_abi_tensor_size() -> u32 {
    std::mem::size_of::<DpTensor>() as u32
}

/// `dp_abi_tensor_offset`; see assets/dump_probe.h.
#[unsafe(no_mangle)]
pub extern "C" fn dp_abi_tensor_offset(field: i32) -> u32 {
    usize::try_from(field)
        .ok()
        .and_then(|f| abi::tensor_field_offsets().get(f).copied())
        .map_or(u32::MAX, |o| o as u32)
}

/// `dp_status_name`; see assets/dump_probe.h.
#[unsafe(no_mangle)]
pub extern "C" fn dp_status_name(status: c_int) -> *const c_char {
    static NAMES: std::sync::OnceLock<Vec<(i32, CString)>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        Status::ALL
            .iter()
            .map(|s| (*s as i32, CString::new(s.name()).expect("no NUL")))
            .collect()
    });
    names
        .iter()
        .find(|(code, _)| *code == status)
        .map_or(c"".as_ptr(), |(_, name)| name.as_ptr())
}

/// `dp_summarize`; see assets/dump_probe.h: the statistics of one host view now, without a
/// session, into `out[7]` = nan_count, inf_count, finite min (+inf without one), finite max
/// (−inf without one), finite sum, l2, pos_checksum — dump_probe.py's `_DEVICE_STATS` order,
/// for its fused CPU path. `split` is NULL or `{dim, full, offset, zigzag, rank, size}`.
///
/// # Safety
/// `t` is NULL or a dp_tensor as the header describes whose span is readable host memory;
/// `split` is NULL or 6 readable int64; `out` is NULL or 7 writable doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dp_summarize(
    t: *const DpTensor,
    split: *const i64,
    out: *mut f64,
) -> c_int {
    guard(None, || {
        if out.is_null() {
            return Err(Failure::new(Status::NullArgument, "out is NULL"));
        }
        // SAFETY: forwarded contract.
        let view = unsafe { View::check(t) }?;
        if view.device != crate::view::Device::Host {
            return Err(Failure::new(
                Status::Device,
                "dp_summarize reads host memory only",
            ));
        }
        let split = (!split.is_null()).then(|| {
            // SAFETY: 6 readable int64 (caller's contract).
            let v = unsafe { std::slice::from_raw_parts(split, 6) };
            crate::stats::Split {
                dim: v[0].max(0) as usize,
                full: v[1].max(0) as u64,
                offset: v[2].max(0) as u64,
                zigzag: v[3] != 0,
                rank: v[4].max(0) as u64,
                size: v[5].max(1) as u64,
            }
        });
        if let Some(s) = &split
            && (s.dim >= view.shape.len() || s.rank >= s.size)
        {
            return Err(Failure::new(
                Status::Layout,
                format!("split {s:?} does not fit a {}-d view", view.shape.len()),
            ));
        }
        let staged: &[u8] = if view.numel == 0 {
            &[]
        } else {
            // SAFETY: View::check bounded the span; host memory of the caller's.
            unsafe {
                std::slice::from_raw_parts(
                    view.span_start() as *const u8,
                    view.span_bytes() as usize,
                )
            }
        };
        let values =
            // On the caller's thread: one tensor at a time from inside a model's step.
            match crate::stats::summarize_with(&view, staged, split.as_ref(), false) {
                None => [0.0, 0.0, f64::INFINITY, f64::NEG_INFINITY, 0.0, 0.0, 0.0],
                Some(s) => [
                    s.nan_count as f64,
                    s.inf_count as f64,
                    s.min.unwrap_or(f64::INFINITY),
                    s.max.unwrap_or(f64::NEG_INFINITY),
                    s.sum,
                    s.l2,
                    s.pos_checksum,
                ],
            };
        // SAFETY: 7 writable doubles (caller's contract).
        unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), out, 7) };
        Ok(())
    })
}

/// `dp_row_stats`; see assets/dump_probe.h: the per-token-row statistics of one host view now,
/// without a session, into `out[rows * 5]` float32 = nonfinite_count, max_abs, sum,
/// sum_squares, row_checksum per row (dump_stats's "Per-row statistics of token rows"), token
/// row r at absolute position `positions[r]` (negative: padding).
///
/// # Safety
/// `t` is NULL or a dp_tensor as the header describes whose span is readable host memory;
/// `positions` is NULL or `rows` readable int64; `out` is NULL or `rows * 5` writable floats.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dp_row_stats(
    t: *const DpTensor,
    rows: u64,
    positions: *const i64,
    out: *mut f32,
) -> c_int {
    guard(None, || {
        if out.is_null() || positions.is_null() {
            return Err(Failure::new(
                Status::NullArgument,
                "positions or out is NULL",
            ));
        }
        // SAFETY: forwarded contract.
        let view = unsafe { View::check(t) }?;
        if view.device != crate::view::Device::Host {
            return Err(Failure::new(
                Status::Device,
                "dp_row_stats reads host memory only",
            ));
        }
        let rows_usize = usize::try_from(rows)
            .map_err(|_| Failure::new(Status::Layout, "rows does not fit this platform"))?;
        let staged: &[u8] = if view.numel == 0 {
            &[]
        } else {
            // SAFETY: View::check bounded the span; host memory of the caller's.
            unsafe {
                std::slice::from_raw_parts(
                    view.span_start() as *const u8,
                    view.span_bytes() as usize,
                )
            }
        };
        // SAFETY: the caller's contract: rows int64 in, rows * 5 floats out.
        let (positions, out) = unsafe {
            (
                std::slice::from_raw_parts(positions, rows_usize),
                std::slice::from_raw_parts_mut(out, rows_usize * crate::rows::WIDTH),
            )
        };
        crate::rows::row_stats(&view, staged, rows, positions, out)
            .map_err(|why| Failure::new(Status::Layout, why))
    })
}
