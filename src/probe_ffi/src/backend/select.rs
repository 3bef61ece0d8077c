//! Which runtime a session uses: `DUMP_PROBE_BACKEND=auto|acl|cuda|host`.
//!
//! `auto` looks only at runtimes the process has already loaded (`dlopen` with `RTLD_NOLOAD`
//! never loads a library) and takes one only when it reports at least one device: a CUDA
//! runtime that merely exists on disk, or is loaded on a machine without a GPU (the pip torch
//! wheel ships one), is no reason to pick cuda. ACL is asked first, then CUDA; else host.
//! `acl` and `cuda` load their runtime (the dynamic loader's search: `LD_LIBRARY_PATH`, the
//! cache) and fail `dp_open` with `DP_ERR_BACKEND` when it cannot be loaded or reports no
//! device.

use libloading::Library;

use super::Runtime;
use super::acl::{self, Acl};
use super::cuda::{self, Cuda};
use super::host::Host;
use crate::config::BackendChoice;

/// The runtime chosen, and why (the manifest's `backend_reason`).
pub struct Selected {
    /// The runtime.
    pub runtime: Box<dyn Runtime>,
    /// For people: what was asked and found, e.g. `auto: libascendcl.so is loaded and reports 8 devices`.
    pub reason: String,
}

/// Chooses the runtime for `choice`.
///
/// # Errors
/// For `acl` and `cuda`: the runtime library not loadable, or lacking an entry point; the
/// message names the library and the loader's error.
pub fn select(choice: BackendChoice) -> Result<Selected, String> {
    match choice {
        BackendChoice::Host => Ok(Selected {
            runtime: Box::new(Host),
            reason: "DUMP_PROBE_BACKEND=host".to_string(),
        }),
        BackendChoice::Acl => {
            let (name, library) = load(&acl::LIBRARY_NAMES, false)
                .map_err(|e| format!("DUMP_PROBE_BACKEND=acl: {e}"))?;
            let acl =
                Acl::bind(library).map_err(|e| format!("DUMP_PROBE_BACKEND=acl: {name}: {e}"))?;
            // Forced onto a runtime without a device, every capture would fail later.
            let count = acl.device_count();
            if !matches!(count, Ok(n) if n > 0) {
                return Err(format!(
                    "DUMP_PROBE_BACKEND=acl: {name} {}: nothing to copy from (DUMP_PROBE_BACKEND=auto or host on this machine)",
                    describe_count(count)
                ));
            }
            let devices = describe_count(count);
            Ok(Selected {
                runtime: Box::new(acl),
                reason: format!("DUMP_PROBE_BACKEND=acl: {name}, {devices}"),
            })
        }
        BackendChoice::Cuda => {
            let (name, library) = load(&cuda::LIBRARY_NAMES, false)
                .map_err(|e| format!("DUMP_PROBE_BACKEND=cuda: {e}"))?;
            let cuda =
                Cuda::bind(library).map_err(|e| format!("DUMP_PROBE_BACKEND=cuda: {name}: {e}"))?;
            // Forced onto a runtime without a device, every capture would fail later.
            let count = cuda.device_count();
            if !matches!(count, Ok(n) if n > 0) {
                return Err(format!(
                    "DUMP_PROBE_BACKEND=cuda: {name} {}: nothing to copy from (DUMP_PROBE_BACKEND=auto or host on this machine)",
                    describe_count(count)
                ));
            }
            let devices = describe_count(count);
            Ok(Selected {
                runtime: Box::new(cuda),
                reason: format!("DUMP_PROBE_BACKEND=cuda: {name}, {devices}"),
            })
        }
        BackendChoice::Auto => Ok(auto()),
    }
}

fn auto() -> Selected {
    let mut seen = Vec::new();
    if let Ok((name, library)) = load(&acl::LIBRARY_NAMES, true) {
        match Acl::bind(library) {
            Ok(acl) => match acl.device_count() {
                Ok(n) if n > 0 => {
                    return Selected {
                        runtime: Box::new(acl),
                        reason: format!(
                            "auto: {name} is loaded and reports {}",
                            plural(n, "device")
                        ),
                    };
                }
                other => seen.push(format!("{name} is loaded but {}", describe_count(other))),
            },
            Err(e) => seen.push(format!("{name} is loaded but unusable ({e})")),
        }
    }
    if let Ok((name, library)) = load(&cuda::LIBRARY_NAMES, true) {
        match Cuda::bind(library) {
            Ok(cuda) => match cuda.device_count() {
                Ok(n) if n > 0 => {
                    return Selected {
                        runtime: Box::new(cuda),
                        reason: format!(
                            "auto: {name} is loaded and reports {}",
                            plural(n, "device")
                        ),
                    };
                }
                other => seen.push(format!("{name} is loaded but {}", describe_count(other))),
            },
            Err(e) => seen.push(format!("{name} is loaded but unusable ({e})")),
        }
    }
    let reason = if seen.is_empty() {
        "auto: no device runtime (libascendcl.so, libcudart.so) is loaded in the process"
            .to_string()
    } else {
        format!("auto: {}", seen.join("; "))
    };
    Selected {
        runtime: Box::new(Host),
        reason: format!("{reason}; using host"),
    }
}

fn describe_count(count: Result<u32, String>) -> String {
    match count {
        Ok(n) => format!("reports {}", plural(n, "device")),
        Err(e) => format!("reports no device ({e})"),
    }
}

fn plural(n: u32, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// Opens the first of `names` that loads; with `only_loaded`, only one already in the process.
fn load(names: &[&'static str], only_loaded: bool) -> Result<(&'static str, Library), String> {
    let mut errors = Vec::new();
    for &name in names {
        let flags = if only_loaded {
            libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NOLOAD
        } else {
            libc::RTLD_NOW | libc::RTLD_LOCAL
        };
        // SAFETY: loading a device runtime runs its initialisers; that is what the caller asked
        // for (acl/cuda), or, with RTLD_NOLOAD, the library has already been initialised.
        match unsafe { libloading::os::unix::Library::open(Some(name), flags) } {
            Ok(library) => return Ok((name, library.into())),
            Err(e) => errors.push(e.to_string()),
        }
    }
    Err(format!(
        "cannot load {} ({})",
        names.join(" / "),
        errors.join("; ")
    ))
}
