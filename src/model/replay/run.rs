//! Where and how a replay ran ([`Execution`]), and a judged replay with it ([`ReplayResult`]):
//! what `dumpview replay` prints and saves as `verdict.json`.

use serde::Serialize;

use super::judge::Replay;

/// How a replay was run: facts of the run, not of the operator.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Execution {
    /// The remote host as `[user@]host[:port]`; `None` on this machine.
    pub host: Option<String>,
    /// The Python interpreter that ran replay_op.py.
    pub python: String,
    /// How it was chosen: `--python`, `$DUMPVIEW_PYTHON`, `PATH` (the first `python3` or
    /// `python` there that imports torch), or `default` (`python3` on a remote host).
    pub python_chosen_by: String,
    /// The local directory holding the outputs.
    pub out_dir: String,
    /// Whether `out_dir` was chosen by dumpview (under `$XDG_CACHE_HOME/dumpview/replays`).
    pub out_dir_default: bool,
    /// Wall time of the whole replay (start of Python to the outputs in place), seconds.
    pub wall_s: f64,
    /// What replay_op.py said on stderr, line by line (bounded to the last lines).
    pub log: Vec<String>,
}

/// A replay judged, and how it ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayResult {
    /// The judgement; its fields sit at the top of the JSON document.
    #[serde(flatten)]
    pub replay: Replay,
    /// How it ran.
    pub run: Execution,
    /// What the user should know that is not a finding (a stale file, a fallback).
    pub warnings: Vec<String>,
}
