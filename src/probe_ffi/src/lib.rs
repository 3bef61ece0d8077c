//! The native probe: assets/dump_probe.py's bounded, sync-free capture behind the C ABI of
//! assets/dump_probe.h, for code that Python hooks cannot reach (fused kernels, ACLNN/AscendC/CUDA
//! operators, C++ serving code). It writes docs/manifest.md's format, so every dumpview command
//! reads its output unchanged; docs/native_probe.md is the contract.
//!
//! The path of one window: [`ffi`] checks the call ([`names`], [`view`]) → [`session`] selects
//! and records → [`backend`] enqueues one device-to-host copy into [`staging`] per capture →
//! at `dp_finish`, one synchronize per stream, [`stats`] on rayon's threads, and
//! [`window_files`] + [`manifest`] write the window atomically.

#![deny(missing_docs)]

pub mod abi;
pub mod backend;
pub mod config;
pub mod dtype;
pub mod exit_report;
pub mod ffi;
pub mod manifest;
pub mod names;
pub mod pool;
pub mod row_map;
pub mod rows;
pub mod run_info;
pub mod session;
pub mod shard;
pub mod staging;
pub mod stats;
pub mod view;
pub mod window_files;
