//! `dumpview probe install DIR [--native]`: write the embedded capture probe and replay tool
//! into a package under test, or (`--native`) the native probe's C header and library.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{CliError, Conclusion};
use crate::embedded::{PROBE_SOURCE, REPLAY_SOURCE};

/// The native probe's C header (assets/dump_probe.h), compiled in.
const NATIVE_HEADER: &str = include_str!("../../assets/dump_probe.h");

/// The native probe's library file name.
const NATIVE_LIBRARY: &str = "libdump_probe.so";

/// One file to install: its name, its bytes, and whether it is executable (a shared library).
struct File {
    name: &'static str,
    bytes: Vec<u8>,
    executable: bool,
}

/// The Python files, in order: the probe (imported by the code under test) and the
/// single-operator replay tool (run next to the dump, see docs/replay.md).
fn python_files() -> Vec<File> {
    [
        ("dump_probe.py", PROBE_SOURCE),
        ("replay_op.py", REPLAY_SOURCE),
    ]
    .into_iter()
    .map(|(name, source)| File {
        name,
        bytes: source.as_bytes().to_vec(),
        executable: false,
    })
    .collect()
}

/// Where the native library is looked for: beside the running dumpview, then in `deps/`
/// below it (where a test build of the workspace leaves it).
fn library_candidates(exe: &Path) -> Vec<PathBuf> {
    let dir = exe.parent().unwrap_or(Path::new("."));
    vec![
        dir.join(NATIVE_LIBRARY),
        dir.join("deps").join(NATIVE_LIBRARY),
    ]
}

/// The header and the library found beside `exe` (the running dumpview).
///
/// # Errors
/// The library is not there: the message says how to build it.
fn native_files(exe: &Path) -> Result<Vec<File>, CliError> {
    let candidates = library_candidates(exe);
    let Some(library) = candidates.iter().find(|p| p.is_file()) else {
        return Err(format!(
            "{NATIVE_LIBRARY} is not beside {} (looked for {}): build it with `cargo build --release` \
             at the root of the dumpview repository (it writes target/release/{NATIVE_LIBRARY} beside \
             target/release/dumpview), or copy it next to the dumpview you run; nothing was written",
            exe.display(),
            candidates
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" and ")
        )
        .into());
    };
    if let Some(note) = debug_build_note(library) {
        eprintln!("dumpview: note: {note}");
    }
    let bytes =
        std::fs::read(library).map_err(|e| format!("{}: cannot read: {e}", library.display()))?;
    Ok(vec![
        File {
            name: "dump_probe.h",
            bytes: NATIVE_HEADER.as_bytes().to_vec(),
            executable: false,
        },
        File {
            name: NATIVE_LIBRARY,
            bytes,
            executable: true,
        },
    ])
}

/// A note when `library` lies in a cargo `debug` profile directory (`target/debug`, or its
/// `deps/`): an unoptimized build whose statistics run many times slower than the release
/// build's, so a probe copied from it costs the model far more than the README's figures.
fn debug_build_note(library: &Path) -> Option<String> {
    let in_debug = library
        .parent()
        .into_iter()
        .flat_map(|dir| dir.ancestors().take(2))
        .any(|dir| dir.file_name().is_some_and(|name| name == "debug"));
    in_debug.then(|| {
        format!(
            "{} is a debug build (cargo's debug profile): its statistics are many times slower \
             than a release build's; for a run whose speed matters, install from target/release \
             (`cargo build --release`, then target/release/dumpview probe install DIR --native)",
            library.display()
        )
    })
}

/// Writes `DIR/dump_probe.py` and `DIR/replay_op.py` (with `native`: `DIR/dump_probe.h` and
/// `DIR/libdump_probe.so`, the library found beside this dumpview) and returns their paths.
/// Never replaces an existing file: when any exists, nothing is written.
///
/// # Errors
/// `DIR` not a directory (or missing and not creatable), one of the files already existing,
/// the native library
/// not found beside the executable, or a write failing.
pub fn run(dir: &Path, native: bool) -> Result<Vec<PathBuf>, CliError> {
    // A missing directory is made, as `mkdir -p` would: where the probe goes is the user's
    // choice, and a fresh package directory is the usual one.
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(|e| {
            format!(
                "{}: does not exist and cannot be created: {e}",
                dir.display()
            )
        })?;
    }
    if !dir.is_dir() {
        return Err(format!("{}: not a directory", dir.display()).into());
    }
    let files = if native {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find the running dumpview executable: {e}"))?;
        native_files(&exe)?
    } else {
        python_files()
    };
    // Checked for all first, so a refusal leaves the directory as it was.
    for file in &files {
        let path = dir.join(file.name);
        if path.symlink_metadata().is_ok() {
            return Err(already_exists(&path).into());
        }
    }
    let mut written = Vec::with_capacity(files.len());
    for file in files {
        let path = dir.join(file.name);
        let mut options = std::fs::OpenOptions::new();
        // create_new still refuses a file that appeared since the check above.
        options.write(true).create_new(true);
        if file.executable {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o755);
        }
        let mut out = options.open(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => already_exists(&path),
            _ => format!("{}: cannot create: {e}", path.display()),
        })?;
        out.write_all(&file.bytes)
            .map_err(|e| format!("{}: write failed: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

fn already_exists(path: &Path) -> String {
    format!(
        "{}: already exists; remove it first to install this version",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_says_how_to_build_it_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("bin/dumpview");
        let err = native_files(&exe).err().unwrap().to_string();
        assert!(err.contains("libdump_probe.so is not beside"), "{err}");
        assert!(err.contains("cargo build --release"), "{err}");
    }

    #[test]
    fn a_library_of_the_debug_profile_gets_a_note() {
        let note = debug_build_note(Path::new("/w/target/debug/libdump_probe.so")).unwrap();
        assert!(note.contains("is a debug build"), "{note}");
        assert!(debug_build_note(Path::new("/w/target/debug/deps/libdump_probe.so")).is_some());
        assert_eq!(
            debug_build_note(Path::new("/w/target/release/libdump_probe.so")),
            None
        );
        assert_eq!(
            debug_build_note(Path::new("/opt/lib/libdump_probe.so")),
            None
        );
    }

    #[test]
    fn the_library_is_found_beside_the_executable_or_in_deps() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("deps")).unwrap();
        std::fs::write(dir.path().join("deps/libdump_probe.so"), b"ELF").unwrap();
        let files = native_files(&dir.path().join("dumpview")).unwrap();
        assert_eq!(files[0].name, "dump_probe.h");
        assert!(String::from_utf8_lossy(&files[0].bytes).contains("int dp_capture(dp_session *s"));
        assert_eq!(
            (files[1].name, files[1].bytes.as_slice()),
            ("libdump_probe.so", &b"ELF"[..])
        );
    }
}

/// The options of `dumpview probe`.
#[derive(Debug, Clone, clap::Args)]
pub struct ProbeArgs {
    #[command(subcommand)]
    pub action: ProbeAction,
}

/// The `probe` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ProbeAction {
    /// Write dump_probe.py and replay_op.py into DIR (never replaces an existing file).
    Install {
        /// The directory to write into, e.g. the package of the code under test (made, with its
        /// parents, when missing).
        dir: PathBuf,
        /// Write the native probe instead: dump_probe.h and libdump_probe.so (the library found
        /// beside this dumpview; docs/native_probe.md).
        #[arg(long)]
        native: bool,
    },
}

impl ProbeArgs {
    /// Writes the probe's files and names each on stdout.
    ///
    /// # Errors
    /// `--json` (nothing to say in JSON: refused rather than ignored); as [`run`].
    pub fn run(&self, cx: &super::Context) -> Result<Conclusion, CliError> {
        if cx.json {
            return Err(super::completions::NO_JSON.into());
        }
        let ProbeAction::Install { dir, native } = &self.action;
        run(dir, *native).map(|paths| {
            for path in paths {
                println!("wrote {}", path.display());
            }
            Conclusion::Clean
        })
    }
}
