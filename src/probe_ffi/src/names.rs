//! Stage and label names: what the native probe accepts, and the file names of saved tensors.
//!
//! The Python probe takes `str(stage)` of anything; a C caller hands bytes, so the native probe
//! states the rule: valid UTF-8, 1 to [`MAX_NAME_BYTES`] bytes, no control characters (a
//! newline would break the manifest's one-record-per-line layout for people and for grep).
//! File names follow the Python probe's `_safe_name` exactly.

use std::ffi::{CStr, c_char};

use crate::abi::{Failure, Status};

/// The longest stage or label accepted, in bytes.
pub const MAX_NAME_BYTES: usize = 4096;

/// Reads and checks the NUL-terminated name at `ptr`; `what` names the argument in messages.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string.
///
/// # Errors
/// `NullArgument` for NULL; `Name` for an empty name, one that is not UTF-8, longer than
/// [`MAX_NAME_BYTES`], or holding a control character.
pub unsafe fn checked_name(ptr: *const c_char, what: &str) -> Result<String, Failure> {
    // SAFETY: forwarded contract; the text is copied before the call returns.
    unsafe { checked_name_ref(ptr, what) }.map(str::to_string)
}

/// [`checked_name`] without the copy: the text borrowed from the caller's string.
///
/// # Safety
/// As for [`checked_name`]; and the caller's string outlives `'a`.
pub unsafe fn checked_name_ref<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::new(
            Status::NullArgument,
            format!("{what} is NULL"),
        ));
    }
    // SAFETY: non-NULL and NUL-terminated (caller's contract).
    let bytes = unsafe { CStr::from_ptr(ptr) }.to_bytes();
    let name = |message: String| Failure::new(Status::Name, message);
    if bytes.is_empty() {
        return Err(name(format!("{what} is empty")));
    }
    if bytes.len() > MAX_NAME_BYTES {
        return Err(name(format!(
            "{what} is {} bytes long (at most {MAX_NAME_BYTES})",
            bytes.len()
        )));
    }
    let text =
        std::str::from_utf8(bytes).map_err(|e| name(format!("{what} is not UTF-8 ({e})")))?;
    if let Some((at, c)) = text.char_indices().find(|(_, c)| c.is_control()) {
        return Err(name(format!(
            "{what} {:?} holds the control character {c:?} at byte {at}",
            text.chars().take(80).collect::<String>()
        )));
    }
    Ok(text)
}

/// `<stage>#<N>` as a file name: characters outside `[A-Za-z0-9_.#-]` become `_`, cut at 200
/// characters (the Python probe's `_safe_name`).
pub fn safe_file_name(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '#' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(200)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &[u8]) -> Result<String, Failure> {
        let owned = std::ffi::CString::new(text).unwrap();
        unsafe { checked_name(owned.as_ptr(), "stage") }
    }

    #[test]
    fn the_rules() {
        assert_eq!(check(b"layers.3.attn_out").unwrap(), "layers.3.attn_out");
        assert_eq!(check("注意力/q".as_bytes()).unwrap(), "注意力/q");
        assert_eq!(check(b"").unwrap_err().status, Status::Name);
        let err = check(b"a\nb").unwrap_err();
        assert_eq!(err.status, Status::Name);
        assert!(err.message.contains("'\\n' at byte 1"), "{}", err.message);
        assert_eq!(check(b"\xff").unwrap_err().status, Status::Name);
        assert_eq!(
            unsafe { checked_name(std::ptr::null(), "stage") }
                .unwrap_err()
                .status,
            Status::NullArgument
        );
    }

    #[test]
    fn file_names_as_the_python_probe_makes_them() {
        assert_eq!(safe_file_name("a/b c#1"), "a_b_c#1");
        assert_eq!(safe_file_name(&"x".repeat(300)).len(), 200);
        assert_eq!(safe_file_name("é#2"), "_#2");
    }
}
