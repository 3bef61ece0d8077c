//! Shared test harnesses.

pub mod sshd;
