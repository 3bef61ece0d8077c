//! [`Dump`]: one loaded capture, all windows of all ranks.

use super::{Warning, Window};

/// One loaded capture: all windows of all ranks found under the inputs given.
#[derive(Debug, Clone, Default)]
pub struct Dump {
    /// Sorted by (rank, match, occurrence, source path).
    pub windows: Vec<Window>,
    /// What the user should know about the inputs, in file order.
    pub warnings: Vec<Warning>,
}
