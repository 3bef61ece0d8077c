//! [`StageKey`]: `stage#occurrence`, the name that pairs records across captures.

use std::fmt;

/// A stage and its occurrence: the `occurrence`-th record of `stage` in one window (1-based).
/// Written `stage#occurrence` everywhere (docs/diff.md); records of two captures pair by it,
/// never by raw call count.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StageKey {
    /// The stage name, as captured (`layers.0.attn`, `Functional.linear.0.forward.input.0`).
    pub stage: String,
    /// 1 for the first record of the stage in the window.
    pub occurrence: u32,
}

impl StageKey {
    /// The key of the `occurrence`-th record of `stage`.
    pub fn new(stage: impl Into<String>, occurrence: u32) -> StageKey {
        StageKey {
            stage: stage.into(),
            occurrence,
        }
    }

    /// Splits `stage#occurrence` at its last `#` (stage names may hold `#` themselves).
    /// `None` when there is no `#` or what follows it is not a number.
    pub fn parse(text: &str) -> Option<StageKey> {
        let (stage, occurrence) = text.rsplit_once('#')?;
        Some(StageKey::new(stage, occurrence.parse().ok()?))
    }

    /// The stage part of `text` when it is a `stage#occurrence` key, else `text` itself.
    pub fn stage_of(text: &str) -> &str {
        match text.rsplit_once('#') {
            Some((stage, occurrence)) if occurrence.parse::<u32>().is_ok() => stage,
            _ => text,
        }
    }

    /// The probe's `DUMP_PROBE_TENSOR` regex that selects exactly this stage for saving:
    /// `^stage$` with the regex metacharacters of the name escaped (the probe matches with
    /// Python's `re.search`, whose escaping of these characters agrees with Rust's).
    pub fn capture_regex(&self) -> String {
        capture_regex(&self.stage)
    }
}

/// [`StageKey::capture_regex`] for a bare stage name.
pub fn capture_regex(stage: &str) -> String {
    format!("^{}$", regex::escape(stage))
}

impl fmt::Display for StageKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.stage, self.occurrence)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_the_last_hash() {
        let key = StageKey::parse("a#b#12").unwrap();
        assert_eq!(key, StageKey::new("a#b", 12));
        assert_eq!(key.to_string(), "a#b#12");
        assert_eq!(StageKey::parse("no_hash"), None);
        assert_eq!(StageKey::parse("x#y"), None);
        assert_eq!(StageKey::stage_of("layers.0.rope#3"), "layers.0.rope");
        assert_eq!(StageKey::stage_of("plain"), "plain");
    }

    #[test]
    fn capture_regex_escapes_metacharacters() {
        assert_eq!(
            StageKey::new("layers.0.attn(q)", 1).capture_regex(),
            r"^layers\.0\.attn\(q\)$"
        );
    }
}
