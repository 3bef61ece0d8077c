//! The `DUMP_PROBE*` environment, read by `dp_open`, with the Python probe's meanings and
//! defaults (assets/dump_probe.py, `_Config`), plus `DUMP_PROBE_BACKEND`.
//!
//! An invalid value disarms the session (as the Python probe stays disarmed) and `dp_open`
//! returns `DP_ERR_CONFIG` naming the first invalid variable.

use std::collections::BTreeSet;

use regex::Regex;

/// Which device runtime a session uses (`DUMP_PROBE_BACKEND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// A runtime already loaded in the process that reports a device (ACL first, then CUDA),
    /// else host (the default).
    Auto,
    /// Ascend ACL (`libascendcl.so`).
    Acl,
    /// The CUDA runtime (`libcudart.so`).
    Cuda,
    /// Host memory only.
    Host,
}

/// The parsed environment.
#[derive(Debug, Clone)]
pub struct Config {
    /// `DUMP_PROBE` is 1/true/yes/on.
    pub enabled: bool,
    /// The first invalid variable, with why; `Some` disarms the session.
    pub error: Option<String>,
    /// `DUMP_PROBE_DIR`, overriding `dp_open`'s `dir` when set and non-empty.
    pub directory: Option<String>,
    /// `DUMP_PROBE_RANKS`: the ranks that write (`None`: all). Default `{0}`.
    pub ranks: Option<BTreeSet<u32>>,
    /// `DUMP_PROBE_TENSOR` as given (empty: no tensors saved).
    pub tensor_pattern: String,
    /// Its compiled form (Rust `regex` syntax, searched anywhere in the stage name like
    /// Python's `re.search`).
    pub tensor_regex: Option<Regex>,
    /// `DUMP_PROBE_ROWS`: rows of dimension 0 kept per saved tensor; 0 keeps all. Default 256.
    pub rows: u64,
    /// `DUMP_PROBE_MATCH`: which distinct label is captured, 1-based. Default 1.
    pub match_index: u32,
    /// `DUMP_PROBE_OCCURRENCE`: the first call within that label captured, 1-based. Default 1.
    pub occurrence: u32,
    /// The last call captured (`Some(occurrence)` for one number, the range's end for `2-5`,
    /// `None` for `all`): each selected call is a window of its own, as in dump_probe.py.
    pub occurrence_last: Option<u32>,
    /// `DUMP_PROBE_REQUEST`: capture the forwards whose row map holds this request (instead of
    /// `DUMP_PROBE_MATCH`; `DUMP_PROBE_OCCURRENCE` then counts those forwards). Default none.
    pub request: Option<String>,
    /// `DUMP_PROBE_BACKEND`. Default auto.
    pub backend: BackendChoice,
    /// Values accepted with a caveat, printed once by `dp_open`
    /// (`DUMP_PROBE_TENSOR_FORMAT=pt`, which the native probe cannot write).
    pub notes: Vec<String>,
    /// `DUMP_PROBE_ROW_STATS`: per-row statistics of token rows, `on` (default), `off`, or a
    /// regex of the stages that get them (the regex, as given, in `row_regex`).
    pub row_stats: bool,
    /// The stage regex of `DUMP_PROBE_ROW_STATS`, with its text.
    pub row_regex: Option<(String, Regex)>,
    /// `DUMP_PROBE_ROW_POSITIONS`: the token positions (first, last, inclusive) whose rows get
    /// statistics. Default 0-65535.
    pub row_positions: (u64, u64),
}

/// The last token position whose row gets statistics by default (`DUMP_PROBE_ROW_POSITIONS`).
pub const ROW_POSITIONS_DEFAULT_LAST: u64 = 65535;

const TRUE: [&str; 4] = ["1", "true", "yes", "on"];

impl Config {
    /// Reads the process environment.
    pub fn from_process() -> Config {
        Config::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the variables through `lookup` (tests pass a map).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Config {
        let get = |name: &str, default: &str| lookup(name).unwrap_or_else(|| default.to_string());
        let mut errors: Vec<String> = Vec::new();
        let enabled = TRUE.contains(&get("DUMP_PROBE", "").trim().to_lowercase().as_str());
        let directory = lookup("DUMP_PROBE_DIR").filter(|d| !d.is_empty());
        let ranks = parse_ranks(&get("DUMP_PROBE_RANKS", "0"), &mut errors);
        let tensor_pattern = get("DUMP_PROBE_TENSOR", "");
        let tensor_regex = if tensor_pattern.is_empty() {
            None
        } else {
            match Regex::new(&tensor_pattern) {
                Ok(re) => Some(re),
                Err(e) => {
                    errors.push(format!(
                        "DUMP_PROBE_TENSOR={tensor_pattern:?} is not a valid regex ({e})"
                    ));
                    None
                }
            }
        };
        let rows_text = get("DUMP_PROBE_ROWS", "256").trim().to_lowercase();
        let rows = if rows_text == "all" {
            0
        } else {
            positive("DUMP_PROBE_ROWS", &rows_text, true, &mut errors).into()
        };
        let match_index = positive(
            "DUMP_PROBE_MATCH",
            &get("DUMP_PROBE_MATCH", "1"),
            false,
            &mut errors,
        );
        let (occurrence, occurrence_last) =
            parse_occurrences(&get("DUMP_PROBE_OCCURRENCE", "1"), &mut errors);
        let request =
            Some(get("DUMP_PROBE_REQUEST", "").trim().to_string()).filter(|r| !r.is_empty());
        let backend = match get("DUMP_PROBE_BACKEND", "auto")
            .trim()
            .to_lowercase()
            .as_str()
        {
            "auto" | "" => BackendChoice::Auto,
            "acl" | "npu" => BackendChoice::Acl,
            "cuda" => BackendChoice::Cuda,
            "host" | "cpu" => BackendChoice::Host,
            other => {
                errors.push(format!(
                    "DUMP_PROBE_BACKEND={other:?} must be auto, acl, cuda or host"
                ));
                BackendChoice::Host
            }
        };
        let mut notes = Vec::new();
        match get("DUMP_PROBE_TENSOR_FORMAT", "safetensors").trim().to_lowercase().as_str() {
            "safetensors" => {}
            "pt" => notes.push(
                "DUMP_PROBE_TENSOR_FORMAT=pt: the native probe writes safetensors only; tensors are saved as .safetensors"
                    .to_string(),
            ),
            other => errors.push(format!(
                "DUMP_PROBE_TENSOR_FORMAT={other:?} must be 'safetensors' or 'pt'"
            )),
        }
        let row_text = get("DUMP_PROBE_ROW_STATS", "on").trim().to_string();
        let (row_stats, row_regex) = match row_text.to_lowercase().as_str() {
            t if TRUE.contains(&t) => (true, None),
            "" | "0" | "false" | "no" | "off" => (false, None),
            _ => match Regex::new(&row_text) {
                Ok(re) => (true, Some((row_text.clone(), re))),
                Err(e) => {
                    errors.push(format!(
                        "DUMP_PROBE_ROW_STATS={row_text:?} is neither on/off nor a valid regex ({e})"
                    ));
                    (false, None)
                }
            },
        };
        let positions_text = get("DUMP_PROBE_ROW_POSITIONS", "").trim().to_string();
        let row_positions = if positions_text.is_empty() {
            (0, ROW_POSITIONS_DEFAULT_LAST)
        } else {
            let parsed = positions_text
                .split_once('-')
                .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)))
                .filter(|(a, b): &(u64, u64)| a <= b);
            parsed.unwrap_or_else(|| {
                errors.push(format!(
                    "DUMP_PROBE_ROW_POSITIONS={positions_text:?} must be a range FIRST-LAST of token positions"
                ));
                (0, ROW_POSITIONS_DEFAULT_LAST)
            })
        };
        Config {
            enabled,
            error: errors.into_iter().next(),
            directory,
            ranks,
            tensor_pattern,
            tensor_regex,
            rows,
            match_index,
            occurrence,
            occurrence_last,
            request,
            backend,
            notes,
            row_stats,
            row_regex,
            row_positions,
        }
    }

    /// True when the session may capture: armed and every variable valid.
    pub fn usable(&self) -> bool {
        self.enabled && self.error.is_none()
    }

    /// Whether `rank` writes.
    pub fn selects_rank(&self, rank: u32) -> bool {
        self.ranks.as_ref().is_none_or(|r| r.contains(&rank))
    }

    /// Whether `stage`'s token rows get per-row statistics.
    pub fn row_stats_for(&self, stage: &str) -> bool {
        self.row_stats
            && self
                .row_regex
                .as_ref()
                .is_none_or(|(_, re)| re.is_match(stage))
    }

    /// Whether `stage`'s full tensor is saved.
    pub fn saves_tensor(&self, stage: &str) -> bool {
        self.tensor_regex
            .as_ref()
            .is_some_and(|re| re.is_match(stage))
    }
}

fn positive(name: &str, text: &str, allow_zero: bool, errors: &mut Vec<String>) -> u32 {
    match text.trim().parse::<u32>() {
        Ok(v) if v > 0 || allow_zero => v,
        _ => {
            errors.push(format!(
                "{name}={text:?} must be a {} integer",
                if allow_zero {
                    "non-negative"
                } else {
                    "positive"
                }
            ));
            1
        }
    }
}

/// `DUMP_PROBE_OCCURRENCE`: `N`, a range `A-B` or `all`, as (first, last) calls, 1-based and
/// inclusive (dump_probe.py's `_occurrences`).
fn parse_occurrences(text: &str, errors: &mut Vec<String>) -> (u32, Option<u32>) {
    let text = text.trim().to_lowercase();
    if text == "all" {
        return (1, None);
    }
    let parsed = match text.split_once('-') {
        Some((a, b)) => a
            .trim()
            .parse::<u32>()
            .ok()
            .zip(b.trim().parse::<u32>().ok()),
        None => text.parse::<u32>().ok().map(|n| (n, n)),
    };
    match parsed {
        Some((first, last)) if first >= 1 && last >= first => (first, Some(last)),
        _ => {
            errors.push(format!(
                "DUMP_PROBE_OCCURRENCE={text:?} must be a positive integer, a range like 2-5, or 'all'"
            ));
            (1, Some(1))
        }
    }
}

fn parse_ranks(text: &str, errors: &mut Vec<String>) -> Option<BTreeSet<u32>> {
    let text = text.trim().to_lowercase();
    if text == "all" {
        return None;
    }
    let ranks: Result<BTreeSet<u32>, _> = text
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| p.trim().parse::<u32>())
        .collect();
    match ranks {
        Ok(r) if !r.is_empty() => Some(r),
        _ => {
            errors.push(format!(
                "DUMP_PROBE_RANKS={text:?} must be 'all' or a comma-separated list of ranks"
            ));
            Some(BTreeSet::new())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(pairs: &[(&str, &str)]) -> Config {
        let env: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|name| env.get(name).cloned())
    }

    #[test]
    fn defaults_are_the_python_probes() {
        let c = config(&[("DUMP_PROBE", "1")]);
        assert!(c.usable());
        assert_eq!((c.rows, c.match_index, c.occurrence), (256, 1, 1));
        assert_eq!(c.occurrence_last, Some(1));
        let parse = |text: &str| {
            let mut errors = Vec::new();
            (parse_occurrences(text, &mut errors), errors.len())
        };
        assert_eq!(parse("all"), ((1, None), 0));
        assert_eq!(parse("2-5"), ((2, Some(5)), 0));
        assert_eq!(parse(" 3 "), ((3, Some(3)), 0));
        assert_eq!(parse("5-2").1, 1);
        assert_eq!(parse("0").1, 1);
        assert!(c.selects_rank(0) && !c.selects_rank(1));
        assert_eq!(c.backend, BackendChoice::Auto);
        assert!(!c.saves_tensor("x"));
        assert!(!config(&[]).enabled);
        assert!(!config(&[("DUMP_PROBE", "0")]).enabled);
    }

    #[test]
    fn values_parse_and_bad_ones_disarm() {
        let c = config(&[
            ("DUMP_PROBE", "on"),
            ("DUMP_PROBE_RANKS", "0, 2"),
            ("DUMP_PROBE_ROWS", "all"),
            ("DUMP_PROBE_TENSOR", "^layers\\.1\\."),
            ("DUMP_PROBE_BACKEND", "HOST"),
        ]);
        assert!(c.usable());
        assert!(c.selects_rank(2) && !c.selects_rank(1));
        assert_eq!(c.rows, 0);
        assert!(c.saves_tensor("layers.1.q") && !c.saves_tensor("xlayers.1.q"));
        assert_eq!(c.backend, BackendChoice::Host);
        for (name, value, says) in [
            (
                "DUMP_PROBE_MATCH",
                "0",
                "DUMP_PROBE_MATCH=\"0\" must be a positive integer",
            ),
            (
                "DUMP_PROBE_RANKS",
                "x",
                "DUMP_PROBE_RANKS=\"x\" must be 'all'",
            ),
            (
                "DUMP_PROBE_TENSOR",
                "(",
                "DUMP_PROBE_TENSOR=\"(\" is not a valid regex",
            ),
            (
                "DUMP_PROBE_BACKEND",
                "tpu",
                "DUMP_PROBE_BACKEND=\"tpu\" must be",
            ),
            (
                "DUMP_PROBE_ROWS",
                "-1",
                "DUMP_PROBE_ROWS=\"-1\" must be a non-negative",
            ),
        ] {
            let c = config(&[("DUMP_PROBE", "1"), (name, value)]);
            assert!(!c.usable(), "{name}={value}");
            assert!(
                c.error.as_deref().unwrap().starts_with(says),
                "{:?}",
                c.error
            );
        }
    }
}
