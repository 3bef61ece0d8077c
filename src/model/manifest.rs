//! The probe's manifest (docs/manifest.md, schema version 1) as Rust types.
//!
//! One [`Manifest`] is one rank's label window: the records of every
//! `capture()` in capture order plus the operator input sets of
//! `capture_inputs()`. Parsing is strict about types (a wrong type is an
//! error naming the file, line and column) and lenient about extra fields,
//! which are ignored so that newer probes stay readable.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer};

/// The only `schema_version` this build reads.
pub const SCHEMA_VERSION: u32 = 1;
/// The value of the manifest's `format` field.
pub const FORMAT: &str = "dumpview.manifest";

/// Why a manifest could not be read. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be opened or read.
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a JSON manifest of the expected shape.
    #[error("{path}: not a valid manifest: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The file is JSON but says it is something else.
    #[error("{path}: `format` is {found:?}, expected {FORMAT:?}")]
    Format { path: PathBuf, found: String },
    /// Written by a probe whose format this build does not know.
    #[error(
        "{path}: schema_version {found} is not supported (this dumpview reads {SCHEMA_VERSION})"
    )]
    Version { path: PathBuf, found: u64 },
    /// A header field every window needs is absent.
    #[error("{path}: required field `{field}` is missing")]
    Missing { path: PathBuf, field: &'static str },
    /// The file is cut short or broken after its header (strict parsing only;
    /// [`crate::model::load`] keeps the records before the break instead).
    #[error("{path}: {stop}")]
    Truncated {
        path: PathBuf,
        stop: crate::model::parse::Stop,
    },
}

/// Whether a record came from an eager `capture()` or a graph slot read after replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Eager,
    Graph,
}

/// Device-side summary statistics of one tensor (docs/manifest.md, "stats").
///
/// Value statistics are over the finite elements only; `None` means undefined
/// (no finite element). Non-finite results of the reduction itself, written by
/// the probe as the strings `"nan"`, `"inf"`, `"-inf"`, are read back as the
/// corresponding `f64`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Stats {
    pub nan_count: u64,
    pub inf_count: u64,
    #[serde(default)]
    pub finite_count: Option<u64>,
    #[serde(deserialize_with = "stat")]
    pub max_abs: Option<f64>,
    #[serde(deserialize_with = "stat")]
    pub min: Option<f64>,
    #[serde(deserialize_with = "stat")]
    pub max: Option<f64>,
    #[serde(deserialize_with = "stat")]
    pub mean: Option<f64>,
    #[serde(default, deserialize_with = "stat")]
    pub l2: Option<f64>,
    #[serde(default, deserialize_with = "stat")]
    pub pos_checksum: Option<f64>,
}

impl Stats {
    /// True when the tensor held at least one NaN or infinity.
    pub fn has_nonfinite(&self) -> bool {
        self.nan_count > 0 || self.inf_count > 0
    }
}

/// One captured tensor: its place in the window, logical and physical layout, statistics.
///
/// Units: `stride` and `storage_offset` in elements, `storage_ptr`,
/// `data_ptr` and `storage_nbytes` in bytes, `element_size` in bytes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Record {
    pub seq: u64,
    pub stage: String,
    pub occurrence: u32,
    pub mode: Mode,
    pub dtype: String,
    pub shape: Vec<u64>,
    pub stride: Vec<i64>,
    pub storage_offset: u64,
    pub element_size: u32,
    pub numel: u64,
    pub storage_ptr: Option<u64>,
    /// Identity of the live storage object in the writing process; equal ids saw one buffer,
    /// equal `storage_ptr` with different ids is an address reused after a free.
    #[serde(default)]
    pub storage_id: Option<u64>,
    pub storage_nbytes: Option<u64>,
    pub data_ptr: Option<u64>,
    pub device: String,
    pub device_format: Option<i64>,
    pub is_contiguous: bool,
    pub stats: Option<Stats>,
    pub tensor_file: Option<String>,
    #[serde(default)]
    pub rows_kept: Option<u64>,
    #[serde(default)]
    pub rows_total: Option<u64>,
    #[serde(default)]
    pub truncated: Option<bool>,
}

impl Record {
    /// `eager` or `graph`.
    pub fn mode_name(&self) -> &'static str {
        match self.mode {
            Mode::Eager => "eager",
            Mode::Graph => "graph",
        }
    }

    /// The pairing key `stage#occurrence` used throughout dumpview.
    pub fn key(&self) -> String {
        // What `format!("{}#{}", stage, occurrence)` gives, without the formatting machinery
        // (diff builds one per paired record).
        let mut digits = [0u8; 10];
        let mut at = digits.len();
        let mut n = self.occurrence;
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let mut key = String::with_capacity(self.stage.len() + 1 + digits.len() - at);
        key.push_str(&self.stage);
        key.push('#');
        key.push_str(std::str::from_utf8(&digits[at..]).expect("ASCII digits"));
        key
    }

    /// The saved tensor's path inside `window_dir`; `Ok(None)` when none was saved.
    ///
    /// # Errors
    /// A message naming the file when `tensor_file` is absolute, holds `..`, or
    /// resolves outside `window_dir` (see [`crate::model::evidence::resolve`]).
    pub fn tensor_path(&self, window_dir: &Path) -> Result<Option<PathBuf>, String> {
        self.tensor_file
            .as_deref()
            .map(|file| crate::model::evidence::resolve(window_dir, file))
            .transpose()
    }
}

/// True when every stage's `occurrence` strictly increases in capture order, as the probe
/// writes them; then no `stage#occurrence` key repeats. (False does not mean one repeats.)
/// A check that costs one lookup in a map of the distinct stages per record, where finding
/// repeated keys directly takes a map of all of them.
pub fn keys_increase(records: &[Record]) -> bool {
    let mut last: std::collections::HashMap<&str, u32, foldhash::fast::RandomState> =
        std::collections::HashMap::default();
    records.iter().all(|r| {
        let previous = last.insert(r.stage.as_str(), r.occurrence);
        previous.is_none_or(|p| p < r.occurrence)
    })
}

/// One `capture_inputs()` call: a complete operator input set saved for replay.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct InputSet {
    pub stage: String,
    pub occurrence: u32,
    /// `.pt` file relative to the window directory.
    pub file: String,
    /// Argument name → description (`kind` plus layout or value), as written.
    pub args: serde_json::Map<String, serde_json::Value>,
}

/// One rank's label window, as written by `finish()`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Manifest {
    /// Where it was read from (not part of the file).
    #[serde(skip)]
    pub source: PathBuf,
    pub schema_version: u32,
    #[serde(default)]
    pub probe: String,
    pub label: String,
    #[serde(rename = "match")]
    pub match_index: u32,
    pub occurrence: u32,
    pub rank: u32,
    pub world_size: u32,
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    pub stats_dtype: Option<String>,
    pub records: Vec<Record>,
    #[serde(default)]
    pub input_sets: Vec<InputSet>,
}

impl Manifest {
    /// Reads and parses the manifest at `path`.
    ///
    /// # Errors
    /// [`ManifestError`] naming `path`: unreadable file, invalid JSON or field
    /// types (with line and column), wrong `format`, unknown `schema_version`.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let bytes = std::fs::read(path).map_err(|source| ManifestError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Manifest::from_slice(&bytes, path)
    }

    /// Parses complete manifest bytes; `path` names the source in errors.
    ///
    /// # Errors
    /// As [`Manifest::load`], plus [`ManifestError::Truncated`] when the
    /// bytes stop being a manifest after the header.
    pub fn from_slice(bytes: &[u8], path: &Path) -> Result<Manifest, ManifestError> {
        let parsed = crate::model::parse::parse_manifest(bytes, path)?;
        match parsed.stopped {
            None => Ok(parsed.manifest),
            Some(stop) => Err(ManifestError::Truncated {
                path: path.to_path_buf(),
                stop,
            }),
        }
    }

    /// The directory that holds this window's `tensors/` and `inputs/`.
    pub fn window_dir(&self) -> &Path {
        self.source.parent().unwrap_or(Path::new("."))
    }

    /// The first record in capture order with a NaN or infinity, if any.
    pub fn first_nonfinite(&self) -> Option<&Record> {
        self.records
            .iter()
            .find(|r| r.stats.as_ref().is_some_and(Stats::has_nonfinite))
    }

    /// The token ids in `metadata.token_ids`, when present and all integers.
    pub fn token_ids(&self) -> Option<Vec<i64>> {
        fn flatten(value: &serde_json::Value, out: &mut Vec<i64>) -> Option<()> {
            match value {
                serde_json::Value::Array(items) => items.iter().try_for_each(|v| flatten(v, out)),
                other => {
                    out.push(other.as_i64()?);
                    Some(())
                }
            }
        }
        let mut ids = Vec::new();
        flatten(self.metadata.get("token_ids")?, &mut ids)?;
        Some(ids)
    }
}

/// A statistic: a number, `null`, or one of the strings `"nan"`, `"inf"`, `"-inf"`.
///
/// A visitor rather than an untagged enum: an untagged enum buffers every value
/// before trying its variants, which made statistics the costliest part of a load.
/// Errors are the ones the untagged enum gave, at the same position.
fn stat<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    struct StatVisitor;

    impl<'de> serde::de::Visitor<'de> for StatVisitor {
        type Value = Option<f64>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a number, null, \"nan\", \"inf\" or \"-inf\"")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_any(Present)
        }
    }

    /// The value after `Some`: what `Raw::Number(f64)` or `Raw::Text(String)` accepted.
    struct Present;

    fn untagged<E: serde::de::Error>() -> E {
        E::custom("data did not match any variant of untagged enum Raw")
    }

    impl<'de> serde::de::Visitor<'de> for Present {
        type Value = Option<f64>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a number, \"nan\", \"inf\" or \"-inf\"")
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }
        fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<Self::Value, E> {
            match t {
                "nan" => Ok(Some(f64::NAN)),
                "inf" => Ok(Some(f64::INFINITY)),
                "-inf" => Ok(Some(f64::NEG_INFINITY)),
                _ => Err(E::custom(format!(
                    "statistic {t:?} is not a number, null, \"nan\", \"inf\" or \"-inf\""
                ))),
            }
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Err(untagged())
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Err(untagged())
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Err(untagged())
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            while map
                .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                .is_some()
            {}
            Err(untagged())
        }
    }

    deserializer.deserialize_option(StatVisitor)
}

/// One statistic on its own, read exactly as a field of [`Stats`] is: the line-by-line
/// record reader of [`crate::model::parse`] converts numbers through it.
pub(crate) struct StatValue(pub(crate) Option<f64>);

impl<'de> Deserialize<'de> for StatValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        stat(deserializer).map(StatValue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::from_slice(text.as_bytes(), Path::new("m.json"))
    }

    #[test]
    fn unknown_version_is_named() {
        let err = parse(r#"{"format":"dumpview.manifest","schema_version":7}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "m.json: schema_version 7 is not supported (this dumpview reads 1)"
        );
    }

    #[test]
    fn wrong_format_is_named() {
        let err = parse(r#"{"format":"other","schema_version":1}"#).unwrap_err();
        assert!(
            err.to_string().starts_with("m.json: `format` is \"other\""),
            "{err}"
        );
    }

    #[test]
    fn wrong_type_names_line_and_column() {
        let text = "{\"format\":\"dumpview.manifest\",\"schema_version\":1,\n\"label\":3}";
        let err = parse(text).unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with("m.json: not a valid manifest: invalid type"),
            "{message}"
        );
        assert!(message.contains("line 2"), "{message}");
    }

    #[test]
    fn stat_strings_decode_to_non_finite_floats() {
        let stats: Stats = serde_json::from_str(
            r#"{"nan_count":0,"inf_count":0,"max_abs":"inf","min":null,"max":"-inf","mean":"nan","l2":1.5,"pos_checksum":2}"#,
        )
        .unwrap();
        assert_eq!(stats.max_abs, Some(f64::INFINITY));
        assert_eq!(stats.min, None);
        assert_eq!(stats.max, Some(f64::NEG_INFINITY));
        assert!(stats.mean.unwrap().is_nan());
        assert_eq!(stats.pos_checksum, Some(2.0));
        let bad = serde_json::from_str::<Stats>(
            r#"{"nan_count":0,"inf_count":0,"max_abs":"big","min":null,"max":null,"mean":null}"#,
        );
        assert!(bad.unwrap_err().to_string().contains("\"big\""));
    }
}
