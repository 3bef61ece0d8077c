//! How the process was started, for the manifest's `run` object (docs/manifest.md, "run"):
//! the same fields dump_probe.py writes, read from `/proc/self` where it exists.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The manifest's `run`: enough to start the process again with other `DUMP_PROBE_*` settings
/// (`executable` then `argv`, in `cwd`, with `env`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunInfo {
    /// The command line after the program: `/proc/self/cmdline` without its first element
    /// (which `executable` names), as dump_probe.py's `sys.argv` follows the interpreter;
    /// empty where it cannot be read.
    pub argv: Vec<String>,
    /// The working directory at `dp_arm`; empty where it cannot be read (removed).
    pub cwd: String,
    /// The program, the target of `/proc/self/exe`; `None` where it cannot be read.
    pub executable: Option<String>,
    /// Every `DUMP_PROBE` and `DUMP_PROBE_*` variable of the environment, name → value.
    pub env: BTreeMap<String, String>,
}

impl RunInfo {
    /// This process as it is now. Never fails: what cannot be read is left empty (non-UTF-8
    /// bytes are replaced, as in every other string of the manifest).
    pub fn current() -> RunInfo {
        let argv = std::fs::read("/proc/self/cmdline")
            .map(|bytes| parse_cmdline(&bytes))
            .unwrap_or_default();
        let cwd = std::env::current_dir()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let executable = std::fs::read_link("/proc/self/exe")
            .or_else(|_| std::env::current_exe())
            .ok()
            .map(|p| p.to_string_lossy().into_owned());
        let env = std::env::vars_os()
            .filter_map(|(k, v)| {
                let k = k.to_string_lossy().into_owned();
                is_probe_variable(&k).then(|| (k, v.to_string_lossy().into_owned()))
            })
            .collect();
        RunInfo {
            argv,
            cwd,
            executable,
            env,
        }
    }

    /// The `run` object as one line of strict JSON, in the manifest's field order.
    pub fn to_json(&self) -> String {
        let string = |s: &str| serde_json::to_string(s).expect("a string serializes");
        let mut out = String::from("{\"argv\": [");
        out.push_str(
            &self
                .argv
                .iter()
                .map(|a| string(a))
                .collect::<Vec<_>>()
                .join(", "),
        );
        let _ = write!(out, "], \"cwd\": {}, \"executable\": ", string(&self.cwd));
        match &self.executable {
            Some(e) => out.push_str(&string(e)),
            None => out.push_str("null"),
        }
        out.push_str(", \"env\": {");
        let env: Vec<String> = self
            .env
            .iter()
            .map(|(k, v)| format!("{}: {}", string(k), string(v)))
            .collect();
        out.push_str(&env.join(", "));
        out.push_str("}}");
        out
    }
}

/// `DUMP_PROBE` itself or a `DUMP_PROBE_*` setting (not `DUMP_PROBEX`).
fn is_probe_variable(name: &str) -> bool {
    name == "DUMP_PROBE" || name.starts_with("DUMP_PROBE_")
}

/// The arguments after the program of a NUL-separated `/proc/<pid>/cmdline`.
fn parse_cmdline(bytes: &[u8]) -> Vec<String> {
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes
        .split(|&b| b == 0)
        .skip(1)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cmdline_loses_its_program_and_keeps_empty_arguments() {
        assert_eq!(parse_cmdline(b"/usr/bin/app\0--x\0\0y\0"), ["--x", "", "y"]);
        assert_eq!(parse_cmdline(b"/usr/bin/app\0"), Vec::<String>::new());
        assert_eq!(parse_cmdline(b""), Vec::<String>::new());
    }

    #[test]
    fn only_the_probes_variables_are_kept() {
        assert!(is_probe_variable("DUMP_PROBE"));
        assert!(is_probe_variable("DUMP_PROBE_ROWS"));
        assert!(!is_probe_variable("DUMP_PROBEX"));
        assert!(!is_probe_variable("PATH"));
    }

    #[test]
    fn the_json_is_strict_and_escaped_and_reads_back() {
        let run = RunInfo {
            argv: vec!["--name".into(), "a \"b\"\n".into()],
            cwd: "/w".into(),
            executable: None,
            env: [("DUMP_PROBE_TENSOR".to_string(), "^a\\.b$".to_string())].into(),
        };
        let value: serde_json::Value = serde_json::from_str(&run.to_json()).unwrap();
        assert_eq!(value["argv"][1], "a \"b\"\n");
        assert_eq!(value["executable"], serde_json::Value::Null);
        assert_eq!(value["env"]["DUMP_PROBE_TENSOR"], "^a\\.b$");
        let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 4);
    }

    #[test]
    fn this_process_is_read() {
        let run = RunInfo::current();
        assert!(!run.cwd.is_empty());
        if std::path::Path::new("/proc/self/cmdline").exists() {
            assert!(run.executable.is_some());
        }
    }
}
