//! The shared record model: one captured tensor ([`Record`]), its statistics ([`Stats`]) and
//! the interned names and dimension lists every format's reader produces.
//!
//! The serde impls read the probe manifest's record shape (docs/manifest.md); other formats'
//! readers fill `Record::default()` field by field.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Deserializer};

/// Whether a record came from an eager `capture()` or a graph slot read after replay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Captured by `capture()` as the model ran (also every msprobe and windowed record).
    #[default]
    Eager,
    /// Read from a `graph_slot` after a graph replay; follows the eager records in `seq`,
    /// ordered by slot allocation, with `occurrence` 1 (docs/manifest.md).
    Graph,
}

/// Device-side summary statistics of one tensor (docs/manifest.md, "stats").
///
/// Value statistics are over the finite elements only; `None` means undefined
/// (no finite element). Non-finite results of the reduction itself, written by
/// the probe as the strings `"nan"`, `"inf"`, `"-inf"`, are read back as the
/// corresponding `f64`.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
pub struct Stats {
    /// Number of NaN elements; when `counts_known` is false, 1 means "at least one".
    pub nan_count: u64,
    /// Number of +inf or −inf elements; when `counts_known` is false, 1 means "at least one".
    pub inf_count: u64,
    /// `numel − nan_count − inf_count`; `None` when not recorded (older manifests, or an
    /// msprobe tensor whose Max/Min are not both finite).
    #[serde(default)]
    pub finite_count: Option<u64>,
    /// Largest magnitude among the finite elements, `max(|min|, |max|)`.
    #[serde(deserialize_with = "stat")]
    pub max_abs: Option<f64>,
    /// Smallest finite element.
    #[serde(deserialize_with = "stat")]
    pub min: Option<f64>,
    /// Largest finite element.
    #[serde(deserialize_with = "stat")]
    pub max: Option<f64>,
    /// Sum of the finite elements divided by `finite_count`.
    #[serde(deserialize_with = "stat")]
    pub mean: Option<f64>,
    /// `sqrt(Σ x²)` over the finite elements (0 when there are none); msprobe's `Norm`.
    #[serde(default, deserialize_with = "stat")]
    pub l2: Option<f64>,
    /// `Σ x[r,c]·u(r)·v(c)` over the tensor viewed as `[rows, last dimension]`, with fixed
    /// pseudo-random position weights: catches values moved without changing their multiset
    /// (docs/manifest.md, "stats"); `None` where the format does not record it (msprobe).
    #[serde(default, deserialize_with = "stat")]
    pub pos_checksum: Option<f64>,
    /// Whether `nan_count` and `inf_count` are counts. Formats that record no counts
    /// (msprobe) infer them from Max/Min: then a count of 1 means "at least one" and the
    /// workbench shows it as unknown.
    #[serde(default = "counted")]
    pub counts_known: bool,
    /// Whether the dump tool reduced `mean` and `l2` in the tensor's own dtype (msprobe: a
    /// float16 tensor's `Norm` is a float16 sum, so it can overflow where no element does); the
    /// probe reduces in float32 or float64 and leaves this false. Names the arithmetic of an
    /// overflowed statistic (docs/diff.md, "Statistics that are not compared").
    #[serde(default)]
    pub reduced_in_dtype: bool,
}

fn counted() -> bool {
    true
}

impl Stats {
    /// True when the tensor held at least one NaN or infinity.
    pub fn has_nonfinite(&self) -> bool {
        self.nan_count > 0 || self.inf_count > 0
    }

    /// A value statistic by name (`max_abs`, `min`, `max`, `mean`, `l2`, `pos_checksum`);
    /// `None` when undefined or not one of those names.
    pub fn get(&self, name: &str) -> Option<f64> {
        // Every statistic of dump_stats named: a new one fails to compile here until the record
        // holds it.
        use dump_stats::Stat;
        match Stat::from_name(name)? {
            Stat::MaxAbs => self.max_abs,
            Stat::Min => self.min,
            Stat::Max => self.max,
            Stat::Mean => self.mean,
            Stat::L2 => self.l2,
            Stat::PosChecksum => self.pos_checksum,
            Stat::NanCount | Stat::InfCount | Stat::FiniteCount => None,
        }
    }
}

/// A short text that repeats across records (a stage, a dtype, a device): interned, so a
/// million records share a few hundred strings instead of each owning copies, and cloning
/// one copies a pointer. Reads like a `&str` (`as_str`, `Deref`, `Display`, comparisons).
// `eq` is string equality with a pointer fast path, so the derived `Hash` (of the string)
// agrees with it.
#[allow(clippy::derived_hash_with_manual_eq)]
#[derive(Clone, Default, Eq, PartialOrd, Ord, Hash)]
pub struct Name(Cow<'static, str>);

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        // Interned names that are equal are one string: comparing addresses settles most.
        let (a, b) = (self.as_str(), other.as_str());
        std::ptr::eq(a, b) || a == b
    }
}

/// At most this many distinct values of each kind are interned (and kept for the life of
/// the process); later ones are owned by their records, so no input grows the tables without
/// bound.
const MAX_INTERNED: usize = 1 << 16;

type Set<T> = HashSet<&'static T, foldhash::fast::RandomState>;

/// A process-wide table of interned values of one kind, with a per-thread cache in front
/// so that parser threads rarely take its lock.
struct Interner<T: ?Sized + 'static> {
    global: Mutex<Option<Set<T>>>,
    local: &'static std::thread::LocalKey<RefCell<Set<T>>>,
}

impl<T> Interner<T>
where
    T: ?Sized + Eq + std::hash::Hash + 'static,
    for<'a> Box<T>: From<&'a T>,
{
    /// The shared copy of `value`; `None` once the table is full and `value` is not in it.
    fn get(&self, value: &T) -> Option<&'static T> {
        self.local.with(|seen| {
            if let Some(&hit) = seen.borrow().get(value) {
                return Some(hit);
            }
            let mut global = self.global.lock().unwrap_or_else(|e| e.into_inner());
            let global = global.get_or_insert_with(HashSet::default);
            let hit = match global.get(value) {
                Some(&hit) => hit,
                None if global.len() < MAX_INTERNED => {
                    let leaked: &'static T = Box::leak(Box::<T>::from(value));
                    global.insert(leaked);
                    leaked
                }
                None => return None,
            };
            seen.borrow_mut().insert(hit);
            Some(hit)
        })
    }
}

thread_local! {
    static NAMES_SEEN: RefCell<Set<str>> = RefCell::new(HashSet::default());
    static SHAPES_SEEN: RefCell<Set<[u64]>> = RefCell::new(HashSet::default());
    static STRIDES_SEEN: RefCell<Set<[i64]>> = RefCell::new(HashSet::default());
}

static NAMES: Interner<str> = Interner {
    global: Mutex::new(None),
    local: &NAMES_SEEN,
};
static SHAPES: Interner<[u64]> = Interner {
    global: Mutex::new(None),
    local: &SHAPES_SEEN,
};
static STRIDES: Interner<[i64]> = Interner {
    global: Mutex::new(None),
    local: &STRIDES_SEEN,
};

/// A shape (or any list of sizes), interned like [`Name`]: reads like a `&[u64]`.
pub type Dims = Cow<'static, [u64]>;
/// Strides, interned like [`Name`]: reads like a `&[i64]`.
pub type Strides = Cow<'static, [i64]>;

/// The shared copy of `dims` (owned once the table is full).
pub fn dims(dims: &[u64]) -> Dims {
    SHAPES
        .get(dims)
        .map_or_else(|| Cow::Owned(dims.to_vec()), Cow::Borrowed)
}

/// The shared copy of `strides` (owned once the table is full).
pub fn strides(strides: &[i64]) -> Strides {
    STRIDES
        .get(strides)
        .map_or_else(|| Cow::Owned(strides.to_vec()), Cow::Borrowed)
}

fn interned_dims<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Dims, D::Error> {
    Vec::<u64>::deserialize(deserializer).map(|v| dims(&v))
}

fn interned_strides<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Strides, D::Error> {
    Vec::<i64>::deserialize(deserializer).map(|v| strides(&v))
}

impl Name {
    /// The shared copy of `text` (owned once the table is full).
    pub fn new(text: &str) -> Name {
        Name(
            NAMES
                .get(text)
                .map_or_else(|| Cow::Owned(text.to_owned()), Cow::Borrowed),
        )
    }

    /// The text itself.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Name {
        Name::new(text)
    }
}

impl From<String> for Name {
    fn from(text: String) -> Name {
        Name::new(&text)
    }
}

impl From<Name> for String {
    fn from(name: Name) -> String {
        name.0.into_owned()
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        **self == *other.0
    }
}

impl PartialEq<Name> for String {
    fn eq(&self, other: &Name) -> bool {
        **self == *other.0
    }
}

impl serde::Serialize for Name {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Name {
    /// As a `String` deserializes (same errors), then interned.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl serde::de::Visitor<'_> for NameVisitor {
            type Value = Name;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Name, E> {
                Ok(Name::new(v))
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Name, E> {
                match std::str::from_utf8(v) {
                    Ok(text) => Ok(Name::new(text)),
                    Err(_) => Err(E::invalid_value(serde::de::Unexpected::Bytes(v), &self)),
                }
            }
        }
        deserializer.deserialize_string(NameVisitor)
    }
}

/// One captured tensor: its place in the window, logical and physical layout, statistics.
///
/// Units: `stride` and `storage_offset` in elements, `storage_ptr`,
/// `data_ptr` and `storage_nbytes` in bytes, `element_size` in bytes.
/// `Record::default()` is an empty eager record with no layout, stats or evidence: the base
/// that parsers and other formats' readers fill in.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Record {
    /// Capture sequence within the window, 0-based, strictly increasing (capture order).
    pub seq: u64,
    /// The stage name given to `capture()` (msprobe: compare's row name; windowed: built
    /// from kernel, role or task and tensor name).
    pub stage: Name,
    /// The N of `stage#N`, 1-based: how many times this stage was captured in the window so
    /// far. Records of two runs pair by (rank, label window, stage, occurrence).
    pub occurrence: u32,
    /// Eager capture or graph slot read after replay.
    pub mode: Mode,
    /// torch dtype without the `torch.` prefix (`float32`, `bfloat16`, `int64`, `bool`, …).
    pub dtype: Name,
    /// Logical shape, in elements.
    #[serde(deserialize_with = "interned_dims")]
    pub shape: Dims,
    /// Stride per dimension, in elements (contiguous strides of `shape` where the format
    /// records none).
    #[serde(deserialize_with = "interned_strides")]
    pub stride: Strides,
    /// Offset of element 0 from the start of the storage, in elements.
    pub storage_offset: u64,
    /// Bytes per element (0 where the dtype is unknown).
    pub element_size: u32,
    /// Number of elements (product of `shape`).
    pub numel: u64,
    /// Address of the untyped storage's data, bytes; `None` where not recorded (msprobe,
    /// windowed dumps), which leaves the record out of alias analysis.
    pub storage_ptr: Option<u64>,
    /// Identity of the live storage object in the writing process; equal ids saw one buffer,
    /// equal `storage_ptr` with different ids is an address reused after a free.
    #[serde(default)]
    pub storage_id: Option<u64>,
    /// Size of the storage, bytes; `None` where not recorded.
    pub storage_nbytes: Option<u64>,
    /// Address of element 0 (`storage_ptr + storage_offset × element_size`), bytes; `None`
    /// where not recorded.
    pub data_ptr: Option<u64>,
    /// Device the tensor lived on (`cpu`, `cuda:0`, `npu:3`, `meta`; empty for msprobe).
    pub device: Name,
    /// `torch_npu.get_npu_format()` on npu (2 = ND, 29 = FRACTAL_NZ); `None` elsewhere.
    pub device_format: Option<i64>,
    /// `tensor.is_contiguous()` as the writer saw it.
    pub is_contiguous: bool,
    /// Summary statistics; `None` for empty, complex and `meta` tensors, non-tensor msprobe
    /// arguments, and windowed tensors whose file could not be read.
    pub stats: Option<Stats>,
    /// Saved tensor, relative to the window directory (see [`Record::tensor_path`]); `None`
    /// when no tensor was saved.
    pub tensor_file: Option<String>,
    /// `tensor_file` as ingest resolved it, once (`ingest::check_window`, under
    /// [`crate::model::dump::evidence::resolve`]): the path to open, inside the window
    /// directory, whether or not the file is there yet; `None` when no tensor was saved, the
    /// path was refused, or the record did not come through ingest. Never read from a file.
    #[serde(skip)]
    pub tensor_resolved: Option<PathBuf>,
    /// Rows (dim 0) kept in `tensor_file`; `None` without a saved tensor.
    #[serde(default)]
    pub rows_kept: Option<u64>,
    /// Rows (dim 0) the tensor had; `None` without a saved tensor.
    #[serde(default)]
    pub rows_total: Option<u64>,
    /// Whether the saved tensor lost rows (probe, `DUMP_PROBE_ROWS`) or was cut to a flat
    /// prefix (windowed, `max_bytes_per_tensor`); `None` when not recorded.
    #[serde(default)]
    pub truncated: Option<bool>,
    /// How this rank's tensor relates to the full one over a parallel group (`tp:1`,
    /// `replicated:tp`, `partial:tp`, docs/manifest.md "Parallel layouts"); `None` for a
    /// per-rank stage, in older manifests and in other formats.
    #[serde(default)]
    pub shard: Option<super::parallel::Shard>,
    /// The collective this record is the output of (`all_reduce`, `all_gather`, …); `None`
    /// where not marked.
    #[serde(default)]
    pub collective: Option<Name>,
    /// Which path of dump_probe.py computed `stats` (`triton`, `inductor`: one fused pass;
    /// `torch`: the eager ops; `DUMP_PROBE_KERNEL`, docs/manifest.md); `None` in older
    /// manifests, for records without statistics and in other formats.
    #[serde(default)]
    pub stats_path: Option<Name>,
    /// `pos_checksum` with the position weights at this rank's own coordinates, where `shard`
    /// slices the tensor (`tp:D`, `cp:D`, …) and so puts `pos_checksum`'s weights at the full
    /// tensor's: equal for equal pieces, which the duplicate-shard rule needs
    /// (docs/manifest.md, "Records"; docs/scan.md). `None` on unsliced records, in older
    /// manifests and in other formats.
    #[serde(default, deserialize_with = "stat")]
    pub local_checksum: Option<f64>,
    /// Tokens this rank's stage received in this call (`capture(..., received=N)`: an
    /// expert-parallel dispatch); the silent-rank rule reports a zero output only where this
    /// (or the row map) says tokens arrived. `None` where not declared.
    #[serde(default)]
    pub received: Option<u64>,
    /// The per-rank records this one was merged from over a parallel group (set by
    /// [`crate::model::analysis::merge`], never read from a file); `None` for a record as
    /// captured.
    #[serde(skip)]
    pub merged_from: Option<std::sync::Arc<Vec<Piece>>>,
}

/// One rank's piece of a record merged over a parallel group.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Piece {
    /// The global rank that captured it.
    pub rank: u32,
    /// Its rank within the group.
    pub rank_in_group: u32,
    /// The manifest it was read from.
    pub source: String,
    /// Its local shape, elements.
    pub shape: Vec<u64>,
    /// Its statistics as captured.
    pub stats: Option<Stats>,
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
    /// resolves outside `window_dir` (see [`crate::model::dump::evidence::resolve`]).
    pub fn tensor_path(&self, window_dir: &Path) -> Result<Option<PathBuf>, String> {
        self.tensor_file
            .as_deref()
            .map(|file| crate::model::dump::evidence::resolve(window_dir, file))
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

/// A statistic: a number, `null`, or one of the strings `"nan"`, `"inf"`, `"-inf"`.
///
/// A visitor rather than an untagged enum: an untagged enum buffers every value
/// before trying its variants, which made statistics a costly part of a load.
/// Errors are the ones the untagged enum gave, raised as it raised them (after the value,
/// outside serde_json's own calls), so they carry the same positions.
fn stat<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    /// What the untagged enum would have refused, reported once the value is read.
    enum Refused {
        Untagged,
        Text(String),
    }

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
            use serde::de::Error;
            match d.deserialize_any(Present)? {
                Ok(value) => Ok(value),
                Err(Refused::Untagged) => Err(D2::Error::custom(
                    "data did not match any variant of untagged enum Raw",
                )),
                Err(Refused::Text(t)) => Err(D2::Error::custom(format!(
                    "statistic {t:?} is not a number, null, \"nan\", \"inf\" or \"-inf\""
                ))),
            }
        }
    }

    /// The value after `Some`: what `Raw::Number(f64)` or `Raw::Text(String)` accepted.
    struct Present;

    impl<'de> serde::de::Visitor<'de> for Present {
        type Value = Result<Option<f64>, Refused>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a number, \"nan\", \"inf\" or \"-inf\"")
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Ok(Some(v)))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Ok(Some(v as f64)))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Ok(Some(v as f64)))
        }
        fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<Self::Value, E> {
            Ok(match t {
                "nan" => Ok(Some(f64::NAN)),
                "inf" => Ok(Some(f64::INFINITY)),
                "-inf" => Ok(Some(f64::NEG_INFINITY)),
                _ => Err(Refused::Text(t.to_owned())),
            })
        }
        fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Err(Refused::Untagged))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(Err(Refused::Untagged))
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(Err(Refused::Untagged))
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            while map
                .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                .is_some()
            {}
            Ok(Err(Refused::Untagged))
        }
    }

    deserializer.deserialize_option(StatVisitor)
}

/// One statistic on its own, read exactly as a field of [`Stats`] is: the line-by-line
/// record reader of [`crate::model::formats::probe::parse`] converts numbers through it.
pub(crate) struct StatValue(pub(crate) Option<f64>);

impl<'de> Deserialize<'de> for StatValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        stat(deserializer).map(StatValue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// `stat` as it was first written, with an untagged enum.
    fn untagged_stat<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(f64),
            Text(String),
        }
        match Option::<Raw>::deserialize(deserializer)? {
            None => Ok(None),
            Some(Raw::Number(v)) => Ok(Some(v)),
            Some(Raw::Text(t)) => match t.as_str() {
                "nan" => Ok(Some(f64::NAN)),
                "inf" => Ok(Some(f64::INFINITY)),
                "-inf" => Ok(Some(f64::NEG_INFINITY)),
                _ => Err(serde::de::Error::custom(format!(
                    "statistic {t:?} is not a number, null, \"nan\", \"inf\" or \"-inf\""
                ))),
            },
        }
    }

    #[test]
    fn stat_reads_and_fails_as_the_untagged_enum_did() {
        #[derive(Debug, Deserialize)]
        struct Old(#[serde(deserialize_with = "untagged_stat")] Option<f64>);
        #[derive(Debug, Deserialize)]
        struct New(#[serde(deserialize_with = "stat")] Option<f64>);
        for value in [
            "1.5",
            "-0.0",
            "3",
            "-7",
            "18446744073709551615",
            "1e-05",
            "2.5E+300",
            "null",
            "\"nan\"",
            "\"inf\"",
            "\"-inf\"",
            "\"big\"",
            "\"n\\u0061n\"",
            "true",
            "[1, 2]",
            "{\"a\": 1}",
            "1e999",
            "-",
            "\"nan",
            "[1,",
            "nul",
        ] {
            let text = format!("[\n  {value}\n]");
            let old = serde_json::from_str::<(Old,)>(&text).map(|v| format!("{:?}", v.0.0));
            let new = serde_json::from_str::<(New,)>(&text).map(|v| format!("{:?}", v.0.0));
            assert_eq!(
                new.map_err(|e| e.to_string()),
                old.map_err(|e| e.to_string()),
                "{value}"
            );
        }
    }

    #[test]
    fn names_read_like_the_strings_they_hold() {
        let a = Name::new("layers.0.q");
        let b: Name = String::from("layers.0.q").into();
        assert_eq!(a, b);
        assert_eq!(a, "layers.0.q");
        assert_eq!(a.as_str(), "layers.0.q");
        assert!(std::ptr::eq(a.as_str(), b.as_str()), "interned once");
        assert_eq!(format!("[{a:>12}] {a:?}"), "[  layers.0.q] \"layers.0.q\"");
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"layers.0.q\"");
        let read: Name = serde_json::from_str("\"layers.0.q\"").unwrap();
        assert_eq!(read, a);
        for bad in ["3", "null", "[]"] {
            assert_eq!(
                serde_json::from_str::<Name>(bad).unwrap_err().to_string(),
                serde_json::from_str::<String>(bad).unwrap_err().to_string()
            );
        }
        assert_eq!(dims(&[2, 3]), vec![2u64, 3]);
        assert!(std::ptr::eq(&*dims(&[2, 3]), &*dims(&[2, 3])));
    }
}
