//! [`MsprobeError`]: why a dump.json holds no window.

use super::json;

/// Why a dump.json holds no window: it breaks before its `data` object starts, or has none.
/// (A break inside or after `data` is a warning: the entries before it are kept.)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MsprobeError {
    /// Not JSON of dump.json's shape at `.offset` bytes from the start.
    #[error("not an msprobe dump.json: {0}")]
    NotJson(json::Error),
    /// A JSON object without `data`.
    #[error("not an msprobe dump.json: it has no `data` object")]
    NoData,
}

impl MsprobeError {
    /// Bytes from the start of the file to the problem, when there is one place.
    pub fn offset(&self) -> Option<u64> {
        match self {
            MsprobeError::NotJson(e) => Some(e.offset as u64),
            MsprobeError::NoData => None,
        }
    }
}
