//! One-pass manifest parser that keeps what parses.
//!
//! A run killed while writing (or a disk that filled up) leaves a manifest
//! cut somewhere inside `records`. The parser streams records into a vector
//! it owns, so when the JSON stops making sense the records before that
//! point survive; the caller gets them plus a [`Stop`] saying where and why.
//! Only a broken *header* (format, version, label, rank, …) is fatal: without
//! it the records cannot be placed in a window.
//!
//! Large manifests in the probe's layout (one record per line) take a faster
//! road to the same result: the lines of `records` are parsed in parallel and
//! the rest of the file, with the array replaced by a placeholder, by the
//! one-pass parser. Anything that road does not expect (another layout, a
//! record that does not parse, a file cut short) sends the whole file through
//! the one-pass parser instead, so what a caller gets never depends on the road.

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

pub use super::header::Stop;
use super::header::{FACTS, FORMAT, ManifestError, SCHEMA_VERSION};
use crate::model::dump::{InputSetEntry, Record, Window};

use super::line;
use super::writer_notes::WriterNotes;

/// A parsed manifest, complete or cut short.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The window read: header and every record that parsed whole, in capture order.
    pub manifest: Window,

    /// `Some` when the file ended or broke before its end; the manifest holds what came before.
    pub stopped: Option<Stop>,
    /// Records that did not read as written, in file order: a statistic that is not a number
    /// (made null: the pair is not compared on it) or a layout field of the wrong type (the
    /// record is left out). Either costs that record alone, never the ones after it.
    pub repaired: Vec<RecordProblem>,
    /// What the writer said about the window (the native probe's `warnings`,
    /// `skipped_over_budget`, `storage_identity`); empty for manifests without them.
    pub notes: WriterNotes,
    /// The manifest's `token_rows` object as written (JSON text), read with its sidecar by
    /// the format (`super::rows`); `None` for a window captured without a row map.
    pub token_rows: Option<String>,
}

/// One record of a manifest that did not read as written (see [`Parsed::repaired`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordProblem {
    /// 0-based index of the record in the file's `records` array.
    pub index: usize,
    /// Its `seq`, when that field is readable.
    pub seq: Option<u64>,
    /// The field at fault (`stats.max`, `stride`).
    pub field: String,
    /// Bytes from the start of the file to the record.
    pub byte_offset: u64,
    /// What was wrong, from the JSON reader.
    pub reason: String,
    /// True when only the field was lost (a statistic made null); false when the record was
    /// left out.
    pub kept: bool,
}

impl fmt::Display for RecordProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seq = self
            .seq
            .map_or("seq unreadable".to_string(), |s| format!("seq {s}"));
        write!(
            f,
            "record {} ({seq}, at byte {}): `{}`: {}; {}",
            self.index,
            self.byte_offset,
            self.field,
            self.reason,
            if self.kept && COUNTS_DECIDING.contains(&self.field.as_str()) {
                "the record's statistics are not used (without that count its non-finite \
                 elements are unknown); the record is kept"
            } else if self.kept && self.field.starts_with("stats.") {
                "that statistic is null (not compared); the record is kept"
            } else if self.kept {
                "the record is kept without it (per rank)"
            } else {
                "the record is left out"
            }
        )
    }
}

#[derive(Default)]
struct Partial {
    format: Option<String>,
    schema_version: Option<u64>,
    probe: Option<String>,
    label: Option<String>,
    match_index: Option<u32>,
    occurrence: Option<u32>,
    attempt: Option<u32>,
    rank: Option<u32>,
    world_size: Option<u32>,
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
    stats_dtype: Option<String>,
    records: Vec<Record>,
    /// Problems of records that did not read as written (see [`Parsed::repaired`]).
    repaired: Vec<RecordProblem>,
    /// How many elements of `records` were met (read, repaired or left out).
    records_seen: usize,
    input_sets: Vec<InputSetEntry>,
    run: Option<crate::model::dump::RunInfo>,
    /// Set for the header pass of [`parse_by_lines`]: `records` must be [`PLACEHOLDER`].
    records_placeholder: bool,
    /// How many times that pass met the placeholder as the value of `records`.
    placeholders_seen: usize,
    /// The writer's notes on the window.
    notes: WriterNotes,
    /// The `token_rows` object, as JSON text.
    token_rows: Option<String>,
}

/// Files smaller than this are parsed in one pass: splitting them would not pay.
pub const LINES_MIN_BYTES: usize = 1 << 20;

/// The JSON string that stands for the records array in the header pass of [`parse_by_lines`];
/// an escaped NUL, so no manifest holds it by accident.
const PLACEHOLDER: &str = "\0dumpview: records parsed line by line";
const PLACEHOLDER_JSON: &[u8] = b"\"\\u0000dumpview: records parsed line by line\"";

/// Parses manifest bytes; `path` names the source in errors and becomes `Window::source`.
///
/// # Errors
/// [`ManifestError`] when the header cannot be read: not JSON, wrong
/// `format`, unknown `schema_version`, a required header field missing or
/// of the wrong type. Problems after a complete header are not errors: they
/// end parsing and are reported in [`Parsed::stopped`].
pub fn parse_manifest(bytes: &[u8], path: &Path) -> Result<Parsed, ManifestError> {
    if bytes.len() >= LINES_MIN_BYTES {
        if let Some(parsed) = parse_by_lines(bytes, path) {
            return Ok(parsed);
        }
    }
    parse_one_pass(bytes, path)
}

/// [`parse_manifest`] without the line-by-line road: one serde pass over all of `bytes`.
///
/// # Errors
/// As [`parse_manifest`].
pub fn parse_one_pass(bytes: &[u8], path: &Path) -> Result<Parsed, ManifestError> {
    let mut partial = Partial::default();
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let result = TopSeed(&mut partial, bytes)
        .deserialize(&mut deserializer)
        .and_then(|()| deserializer.end());

    // Format and version decide before anything else: a reader must not guess at an unknown layout.
    match partial.format.as_deref() {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(ManifestError::Format {
                path: path.to_path_buf(),
                found: other.to_string(),
            });
        }
        None if result.is_ok() => {
            return Err(ManifestError::Format {
                path: path.to_path_buf(),
                found: "(missing)".to_string(),
            });
        }
        None => {}
    }
    if let Some(found) = partial
        .schema_version
        .filter(|&v| v != u64::from(SCHEMA_VERSION))
    {
        return Err(ManifestError::Version {
            path: path.to_path_buf(),
            found,
        });
    }

    let header = header_of(&mut partial);
    let stopped = match (result, header) {
        (Ok(()), Ok(_)) => None,
        (Ok(()), Err(field)) => {
            return Err(ManifestError::Missing {
                path: path.to_path_buf(),
                field,
            });
        }
        (Err(source), Ok(_)) => Some(Stop {
            byte_offset: if source.is_eof() {
                bytes.len() as u64
            } else {
                byte_offset(bytes, source.line(), source.column())
            },
            reason: strip_position(&source.to_string()),
            kept_records: partial.records.len(),
        }),
        (Err(source), Err(_)) => {
            return Err(ManifestError::Json {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let manifest = Window {
        source: path.to_path_buf(),
        schema_version: SCHEMA_VERSION,
        probe: partial.probe.take().unwrap_or_default(),
        label: partial.label.take().unwrap_or_default(),
        match_index: partial.match_index.unwrap_or(1),
        occurrence: partial.occurrence.unwrap_or(1),
        attempt: partial.attempt.unwrap_or(0),
        rank: partial.rank.unwrap_or(0),
        world_size: partial.world_size.unwrap_or(1),
        metadata: partial.metadata.take().unwrap_or_default(),
        stats_dtype: partial.stats_dtype.take(),
        records: std::mem::take(&mut partial.records),
        input_sets: std::mem::take(&mut partial.input_sets),
        run: partial.run.take(),
        format: crate::model::dump::SourceFormat::Probe,
        facts: &FACTS,
        context: None,
        token_rows: None,
    };
    let repaired = std::mem::take(&mut partial.repaired);
    Ok(Parsed {
        manifest,
        stopped,
        repaired,
        notes: std::mem::take(&mut partial.notes),
        token_rows: partial.token_rows.take(),
    })
}

/// The line-by-line road of [`parse_manifest`]: `Some` only for a complete, valid manifest
/// whose `records` array holds one record per line (as the probe writes it), and then
/// exactly what [`parse_one_pass`] returns for the same bytes; `None` for anything else.
///
/// Why the result is the same: the file is cut into the text before the array's `[`, the
/// array, and the text after its `]`. The array is `[`, record lines each ending in `,` but
/// the last, and a line starting with `]`, so it is valid JSON exactly when every record
/// line parses on its own, and then its elements are those records in order. The text
/// around it, with a placeholder string in place of the array, goes through the one-pass
/// parser, which must meet the placeholder once, as the top-level `records`, and no other
/// `records`; then it was the top-level array, and the header, `input_sets` and everything
/// else parse as they do in the whole file. Record lines are read on rayon's threads, by
/// the plain-JSON reader of [`line`] where it can, else by serde.
pub fn parse_by_lines(bytes: &[u8], path: &Path) -> Option<Parsed> {
    let lines = record_lines(bytes)?;
    let mut outside =
        Vec::with_capacity(lines.open + PLACEHOLDER_JSON.len() + bytes.len() - lines.close);
    outside.extend_from_slice(&bytes[..lines.open]);
    outside.extend_from_slice(PLACEHOLDER_JSON);
    outside.extend_from_slice(&bytes[lines.close..]);

    let failed = AtomicBool::new(false);
    let mut records = Vec::new();
    lines
        .spans
        .par_iter()
        .with_min_len(256)
        .map_init(line::LineReader::default, |reader, &(start, end)| {
            let mut record = Record::default();
            if failed.load(Ordering::Relaxed) {
                return record;
            }
            let text = &bytes[start..end];
            if !reader.read(text, &mut record) {
                match serde_json::from_slice::<Record>(text) {
                    Ok(read) => record = read,
                    Err(_) => failed.store(true, Ordering::Relaxed),
                }
            }
            record
        })
        .collect_into_vec(&mut records);
    if failed.load(Ordering::Relaxed) {
        return None;
    }

    let mut partial = Partial {
        records_placeholder: true,
        ..Partial::default()
    };
    let mut deserializer = serde_json::Deserializer::from_slice(&outside);
    TopSeed(&mut partial, &outside)
        .deserialize(&mut deserializer)
        .and_then(|()| deserializer.end())
        .ok()?;
    if partial.placeholders_seen != 1
        || partial.format.as_deref() != Some(FORMAT)
        || partial.schema_version != Some(u64::from(SCHEMA_VERSION))
        || header_of(&mut partial).is_err()
    {
        return None;
    }
    Some(Parsed {
        manifest: Window {
            source: path.to_path_buf(),
            schema_version: SCHEMA_VERSION,
            probe: partial.probe.take().unwrap_or_default(),
            label: partial.label.take().unwrap_or_default(),
            match_index: partial.match_index.unwrap_or(1),
            occurrence: partial.occurrence.unwrap_or(1),
            attempt: partial.attempt.unwrap_or(0),
            rank: partial.rank.unwrap_or(0),
            world_size: partial.world_size.unwrap_or(1),
            metadata: partial.metadata.take().unwrap_or_default(),
            stats_dtype: partial.stats_dtype.take(),
            records,
            input_sets: std::mem::take(&mut partial.input_sets),
            run: partial.run.take(),
            format: crate::model::dump::SourceFormat::Probe,
            facts: &FACTS,
            context: None,
            token_rows: None,
        },
        stopped: None,
        repaired: Vec::new(),
        notes: std::mem::take(&mut partial.notes),
        token_rows: partial.token_rows.take(),
    })
}

/// Where the records array of a one-record-per-line manifest lies.
struct RecordLines {
    /// Offset of the array's `[`.
    open: usize,
    /// Offset just past the array's `]`.
    close: usize,
    /// Each record's text: from its line's first byte to its `}`, without the `,`.
    spans: Vec<(usize, usize)>,
}

/// Finds `"records": [` alone on the end of a line, then one record per line up to a line
/// that starts with `]`. `None` when the file is not laid out that way (or is cut short).
fn record_lines(bytes: &[u8]) -> Option<RecordLines> {
    let (open, first_line) = records_start(bytes)?;
    let (spans, close) = if bytes.len() - first_line >= LINES_SPLIT_BYTES {
        lines_in_parts(bytes, first_line)?
    } else {
        lines_in_turn(bytes, first_line)?
    };
    Some(RecordLines { open, close, spans })
}

/// Where the records array opens (its `[`) and where its first line starts.
fn records_start(bytes: &[u8]) -> Option<(usize, usize)> {
    const KEY: &[u8] = b"\"records\": [";
    // Candidates come in order, so each byte is looked at a bounded number of times.
    let (mut from, mut line_start) = (0, 0);
    loop {
        let at = from + memchr::memmem::find(&bytes[from..], KEY)?;
        if let Some(newline) = memchr::memrchr(b'\n', &bytes[from..at]) {
            line_start = from + newline + 1;
        }
        from = at + 1;
        // Nothing but indentation before the key, nothing but the line's end after `[`.
        let open = at + KEY.len() - 1;
        let after = open + 1 + bytes[open + 1..].iter().position(|b| !is_blank(b))?;
        if bytes[after] == b'\n' && bytes[line_start..at].iter().all(is_blank) {
            return Some((open, after + 1));
        }
    }
}

/// Record text of at least this size is cut into parts whose lines are found in parallel.
const LINES_SPLIT_BYTES: usize = 4 << 20;

/// One line of the records array.
enum Line {
    /// A record: where its text starts and ends (without the comma), and whether a comma
    /// follows it.
    Record(usize, usize, bool),
    /// The array's end: just past its `]`.
    Close(usize),
    /// Anything else, a blank line included.
    Other,
}

fn is_blank(b: &u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r')
}

/// What the line `bytes[start..end]` (its newline excluded) is.
fn line_at(bytes: &[u8], start: usize, end: usize) -> Line {
    let line = &bytes[start..end];
    let Some(indent) = line.iter().position(|b| !is_blank(b)) else {
        return Line::Other;
    };
    match line[indent] {
        b']' => Line::Close(start + indent + 1),
        b'{' => {
            let trimmed = line.len() - line.iter().rev().take_while(|b| is_blank(b)).count();
            let comma = line[trimmed - 1] == b',';
            Line::Record(start, start + trimmed - usize::from(comma), comma)
        }
        _ => Line::Other,
    }
}

/// The rules for a run of lines: every record but the last ends in a comma, the last does
/// not, and a `]` line follows it (there is at least one record: an empty array is written
/// on one line, so never gets here).
#[derive(Default)]
struct LineRules {
    /// Whether the previous record line ended in a comma; `None` before the first.
    last_comma: Option<bool>,
    spans: Vec<(usize, usize)>,
}

impl LineRules {
    /// Takes one line: `Some(Some(close))` at the array's end, `Some(None)` to go on, `None`
    /// when the lines break the rules.
    fn take(&mut self, line: Line) -> Option<Option<usize>> {
        match line {
            Line::Close(close) if self.last_comma == Some(false) => Some(Some(close)),
            Line::Record(start, end, comma) if self.last_comma != Some(false) => {
                self.spans.push((start, end));
                self.last_comma = Some(comma);
                Some(None)
            }
            _ => None,
        }
    }
}

/// The record lines from `first_line` on, one line after another: spans and the close.
fn lines_in_turn(bytes: &[u8], first_line: usize) -> Option<(Vec<(usize, usize)>, usize)> {
    let mut rules = LineRules {
        spans: Vec::with_capacity((bytes.len() - first_line) / 512),
        ..LineRules::default()
    };
    let mut start = first_line;
    loop {
        let end = start + memchr::memchr(b'\n', &bytes[start..])?;
        if let Some(close) = rules.take(line_at(bytes, start, end))? {
            return Some((rules.spans, close));
        }
        start = end + 1;
    }
}

/// [`lines_in_turn`], with the text cut at line ends into parts whose lines are found on
/// rayon's threads; each part stops at its first line that is not a record, and the rules
/// then run over the parts' lines in order, so the answer is the same.
fn lines_in_parts(bytes: &[u8], first_line: usize) -> Option<(Vec<(usize, usize)>, usize)> {
    let parts = 4 * rayon::current_num_threads();
    let step = (bytes.len() - first_line).div_ceil(parts);
    let mut cuts = vec![first_line];
    while let Some(&last) = cuts.last() {
        let nominal = last + step;
        if nominal >= bytes.len() {
            cuts.push(bytes.len());
            break;
        }
        cuts.push(
            memchr::memchr(b'\n', &bytes[nominal..]).map_or(bytes.len(), |i| nominal + i + 1),
        );
    }
    // Per part: its record lines, then the line that ended it (`None`: the part ran out, or
    // its last line has no newline, which only the file's last line can lack).
    let found: Vec<(Vec<Line>, Option<Line>)> = cuts
        .par_windows(2)
        .map(|cut| {
            let (mut start, stop) = (cut[0], cut[1]);
            let mut lines = Vec::with_capacity((stop - start) / 512);
            while start < stop {
                let Some(end) = memchr::memchr(b'\n', &bytes[start..stop]).map(|i| start + i)
                else {
                    return (lines, Some(Line::Other));
                };
                match line_at(bytes, start, end) {
                    record @ Line::Record(..) => lines.push(record),
                    other => return (lines, Some(other)),
                }
                start = end + 1;
            }
            (lines, None)
        })
        .collect();
    let mut rules = LineRules {
        spans: Vec::with_capacity(found.iter().map(|(lines, _)| lines.len()).sum()),
        ..LineRules::default()
    };
    for (lines, ended) in found {
        for line in lines {
            rules.take(line)?;
        }
        if let Some(line) = ended {
            let close = rules.take(line)??;
            return Some((rules.spans, close));
        }
    }
    None
}

/// Checks the header fields a window needs; `Err(name)` of the first missing one.
fn header_of(p: &mut Partial) -> Result<(), &'static str> {
    let present = [
        ("format", p.format.is_some()),
        ("schema_version", p.schema_version.is_some()),
        ("label", p.label.is_some()),
        ("match", p.match_index.is_some()),
        ("occurrence", p.occurrence.is_some()),
        ("rank", p.rank.is_some()),
        ("world_size", p.world_size.is_some()),
    ];
    match present.iter().find(|(_, ok)| !ok) {
        Some((name, _)) => Err(name),
        None => Ok(()),
    }
}

/// Byte offset of serde_json's 1-based line and column (column 0: before the line's first byte).
fn byte_offset(bytes: &[u8], line: usize, column: usize) -> u64 {
    let line_start = if line <= 1 {
        0
    } else {
        bytes
            .iter()
            .enumerate()
            .filter(|&(_, &b)| b == b'\n')
            .nth(line - 2)
            .map_or(bytes.len(), |(i, _)| i + 1)
    };
    (line_start + column.saturating_sub(1)).min(bytes.len()) as u64
}

/// serde_json appends " at line L column C"; the byte offset replaces it.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// The top-level object, into `Partial`; the file's bytes place a repaired record.
struct TopSeed<'a>(&'a mut Partial, &'a [u8]);

impl<'de> DeserializeSeed<'de> for TopSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a dumpview manifest object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let p = self.0;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "format" => {
                    p.format = Some(map.next_value()?);
                    if p.format.as_deref() != Some(FORMAT) {
                        return Err(de::Error::custom("not a dumpview manifest"));
                    }
                }
                "schema_version" => {
                    p.schema_version = Some(map.next_value()?);
                    if p.schema_version != Some(u64::from(SCHEMA_VERSION)) {
                        return Err(de::Error::custom("unsupported schema_version"));
                    }
                }
                "probe" => p.probe = Some(map.next_value()?),
                "label" => p.label = Some(map.next_value()?),
                "match" => p.match_index = Some(map.next_value()?),
                "occurrence" => p.occurrence = Some(map.next_value()?),
                "attempt" => p.attempt = Some(map.next_value()?),
                "rank" => p.rank = Some(map.next_value()?),
                "world_size" => p.world_size = Some(map.next_value()?),
                "metadata" => p.metadata = Some(map.next_value()?),
                "stats_dtype" => p.stats_dtype = map.next_value()?,
                "records" if p.records_placeholder => {
                    let value: std::borrow::Cow<'de, str> = map.next_value()?;
                    if value != PLACEHOLDER {
                        return Err(de::Error::custom("records elsewhere than the placeholder"));
                    }
                    p.placeholders_seen += 1;
                }
                "records" => map.next_value_seed(RecordSink(p, self.1))?,
                "input_sets" => map.next_value_seed(Sink(&mut p.input_sets))?,
                "warnings" => p.notes.set_warnings(map.next_value()?),
                "skipped_over_budget" => p.notes.set_skipped(map.next_value()?),
                "token_rows" => {
                    let raw: Box<serde_json::value::RawValue> = map.next_value()?;
                    p.token_rows = Some(raw.get().to_owned());
                }
                // Optional notes never make a manifest unreadable: a wrong type reads as absent.
                "budget_bytes" => {
                    p.notes.budget_bytes = map.next_value::<serde_json::Value>()?.as_u64();
                }
                "run" => {
                    let value = map.next_value::<serde_json::Value>()?;
                    match serde_json::from_value(value) {
                        Ok(run) => p.run = Some(run),
                        Err(e) => p.notes.run_unreadable = Some(e.to_string()),
                    }
                }
                "storage_identity" => {
                    let value = map.next_value::<serde_json::Value>()?;
                    p.notes.storage_identity = value.as_str().map(str::to_owned);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// The `records` array: each element is read as raw JSON first, then as a [`Record`]; an
/// element that does not read is repaired or left out ([`repair`]) and the next one is read,
/// so one bad value costs one field or one record, never the records after it. Only broken
/// JSON (a file cut short) stops the array.
struct RecordSink<'a>(&'a mut Partial, &'a [u8]);

impl<'de> DeserializeSeed<'de> for RecordSink<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for RecordSink<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of records")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let (p, bytes) = (self.0, self.1);
        while let Some(raw) = seq.next_element::<&'de serde_json::value::RawValue>()? {
            let index = p.records_seen;
            p.records_seen += 1;
            match serde_json::from_str::<Record>(raw.get()) {
                Ok(record) => p.records.push(record),
                Err(error) => {
                    let at = (raw.get().as_ptr() as usize).saturating_sub(bytes.as_ptr() as usize);
                    let (record, problems) = repair(raw.get(), index, at as u64, &error);
                    p.records.extend(record);
                    p.repaired.extend(problems);
                }
            }
        }
        Ok(())
    }
}

/// Statistic fields that may be made null when they are not numbers.
const VALUE_STATS: [&str; 6] = dump_stats::VALUE_STAT_NAMES;

/// The counts every record's statistics need: one that is not a count (negative, fractional,
/// text) costs the record its statistics, never the record.
const COUNTS_DECIDING: [&str; 2] = ["stats.nan_count", "stats.inf_count"];

/// A record whose raw JSON `text` did not read (`error`): every value statistic that is not a
/// number is made null; then, when the record reads, it is kept; else the first field that
/// does not read (found by putting the fields one by one on a minimal valid record) names why
/// it is left out.
fn repair(
    text: &str,
    index: usize,
    byte_offset: u64,
    error: &serde_json::Error,
) -> (Option<Record>, Vec<RecordProblem>) {
    let problem = |seq, field: String, reason: String, kept| RecordProblem {
        index,
        seq,
        field,
        byte_offset,
        reason,
        kept,
    };
    let Ok(serde_json::Value::Object(mut fields)) = serde_json::from_str(text) else {
        let reason = strip_position(&error.to_string());
        return (None, vec![problem(None, "(record)".into(), reason, false)]);
    };
    let seq = fields.get("seq").and_then(serde_json::Value::as_u64);
    let mut problems = Vec::new();
    if let Some(serde_json::Value::Object(stats)) = fields.get_mut("stats") {
        for name in VALUE_STATS {
            let Some(value) = stats.get(name) else {
                continue;
            };
            if let Err(e) = serde_json::from_value::<crate::model::dump::StatValue>(value.clone()) {
                let reason = strip_position(&e.to_string());
                problems.push(problem(seq, format!("stats.{name}"), reason, true));
                stats.insert(name.to_string(), serde_json::Value::Null);
            }
        }
        // `finite_count` is optional: one that is not a count is made null like a statistic.
        if let Some(value) = stats
            .get("finite_count")
            .filter(|v| !v.is_null() && !v.is_u64())
        {
            let reason = not_a_count(value);
            problems.push(problem(seq, "stats.finite_count".into(), reason, true));
            stats.insert("finite_count".into(), serde_json::Value::Null);
        }
    }
    // A NaN or inf count that is not a count leaves the record without statistics: its
    // non-finite elements are unknown, so no statistic of it can be judged.
    let bad_count = fields
        .get("stats")
        .and_then(serde_json::Value::as_object)
        .and_then(|stats| {
            COUNTS_DECIDING.iter().find_map(|field| {
                let name = field.strip_prefix("stats.").expect("a stats field");
                stats
                    .get(name)
                    .filter(|v| !v.is_u64())
                    .map(|v| (*field, not_a_count(v)))
            })
        });
    if let Some((field, reason)) = bad_count {
        problems.retain(|p| !p.field.starts_with("stats."));
        problems.push(problem(seq, field.to_string(), reason, true));
        fields.insert("stats".into(), serde_json::Value::Null);
    }
    // A parallel annotation that does not read costs the annotation, never the record (the
    // Python probe records a capture whose annotation it refuses without it).
    for name in ["shard", "collective"] {
        let Some(value) = fields.get(name).filter(|v| !v.is_null()) else {
            continue;
        };
        let error = match name {
            "shard" => serde_json::from_value::<crate::model::dump::Shard>(value.clone()).err(),
            _ => serde_json::from_value::<String>(value.clone()).err(),
        };
        if let Some(e) = error {
            let reason = strip_position(&e.to_string());
            problems.push(problem(seq, name.to_string(), reason, true));
            fields.remove(name);
        }
    }
    let fields = serde_json::Value::Object(fields);
    if let Ok(record) = serde_json::from_value::<Record>(fields.clone()) {
        return (Some(record), problems);
    }
    // Which field: each on its own over a record that reads.
    let minimal: serde_json::Value = serde_json::from_str(MINIMAL_RECORD).expect("valid");
    let culprit = fields
        .as_object()
        .into_iter()
        .flatten()
        .find_map(|(key, value)| {
            let mut base = minimal.clone();
            base[key.as_str()] = value.clone();
            serde_json::from_value::<Record>(base)
                .err()
                .map(|e| (key.clone(), strip_position(&e.to_string())))
        });
    let (field, reason) = culprit.unwrap_or_else(|| {
        let reason = serde_json::from_value::<Record>(fields)
            .err()
            .map_or_else(String::new, |e| strip_position(&e.to_string()));
        // A required field that is absent: serde names it in backquotes.
        let field = reason
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split_once('`'))
            .map_or("(record)".to_string(), |(name, _)| name.to_string());
        (field, reason)
    });
    problems.retain(|p| p.field != field);
    problems.push(problem(seq, field, reason, false));
    (None, problems)
}

/// Why a JSON value is not a count (a non-negative integer), in words.
fn not_a_count(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Number(n) if n.as_f64().is_some_and(|n| n < 0.0) => {
            format!("{n} is negative, not a count")
        }
        serde_json::Value::Number(n) if n.as_f64().is_some_and(|v| v.fract() == 0.0) => {
            format!("{n} is beyond 2^64, not a count")
        }
        serde_json::Value::Number(n) => format!("{n} is not a whole number, not a count"),
        other => format!("{other} is not a count"),
    }
}

/// A record every field of which reads: the base [`repair`] puts fields on one at a time.
const MINIMAL_RECORD: &str = r#"{"seq": 0, "stage": "s", "occurrence": 1, "mode": "eager", "dtype": "float32", "shape": [], "stride": [], "storage_offset": 0, "element_size": 4, "numel": 1, "storage_ptr": null, "storage_nbytes": null, "data_ptr": null, "device": "cpu", "device_format": null, "is_contiguous": true, "stats": null, "tensor_file": null}"#;

/// Deserializes a JSON array by pushing each element into a vector the caller keeps,
/// so elements parsed before an error are not lost with it.
struct Sink<'a, T>(&'a mut Vec<T>);

impl<'de, T: serde::Deserialize<'de>> DeserializeSeed<'de> for Sink<'_, T> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, T: serde::Deserialize<'de>> Visitor<'de> for Sink<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if let Some(n) = seq.size_hint() {
            self.0.reserve(n);
        }
        while let Some(item) = seq.next_element()? {
            self.0.push(item);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = r#"{"format": "dumpview.manifest", "schema_version": 1, "label": "r", "match": 1, "occurrence": 1, "rank": 0, "world_size": 1,
 "records": [
"#;
    const RECORD: &str = r#"{"seq": 0, "stage": "s", "occurrence": 1, "mode": "eager", "dtype": "float32", "shape": [2], "stride": [1], "storage_offset": 0, "element_size": 4, "numel": 2, "storage_ptr": 64, "storage_nbytes": 8, "data_ptr": 64, "device": "cpu", "device_format": null, "is_contiguous": true, "stats": null, "tensor_file": null}"#;

    fn parse(text: &str) -> Result<Parsed, ManifestError> {
        parse_manifest(text.as_bytes(), Path::new("m.json"))
    }

    #[test]
    fn complete_manifest_has_no_stop() {
        let text = format!(
            "{HEAD}{RECORD},\n{}\n]}}",
            RECORD.replace("\"seq\": 0", "\"seq\": 1")
        );
        let parsed = parse(&text).unwrap();
        assert!(parsed.stopped.is_none());
        assert_eq!(parsed.manifest.records.len(), 2);
    }

    #[test]
    fn truncated_inside_a_record_keeps_the_ones_before() {
        let text = format!("{HEAD}{RECORD},\n{RECORD}");
        let cut = text.len() - 40;
        let parsed = parse(&text[..cut]).unwrap();
        let stop = parsed.stopped.unwrap();
        assert_eq!(parsed.manifest.records.len(), 1);
        assert_eq!(stop.kept_records, 1);
        assert_eq!(stop.byte_offset, cut as u64);
        assert!(
            stop.reason.starts_with("EOF while parsing"),
            "{}",
            stop.reason
        );
    }

    #[test]
    fn garbage_after_records_is_a_stop_not_an_error() {
        let text = format!("{HEAD}{RECORD}\n]}}\u{0}\u{1}junk");
        let parsed = parse(&text).unwrap();
        assert_eq!(parsed.manifest.records.len(), 1);
        assert!(
            parsed
                .stopped
                .unwrap()
                .reason
                .contains("trailing characters")
        );
    }

    #[test]
    fn a_cut_header_is_an_error() {
        let err =
            parse(r#"{"format": "dumpview.manifest", "schema_version": 1, "label": "#).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("m.json: not a valid manifest: EOF while parsing"),
            "{err}"
        );
    }

    #[test]
    fn missing_header_field_is_named() {
        let err = parse(
            r#"{"format": "dumpview.manifest", "schema_version": 1, "label": "r", "records": []}"#,
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "m.json: required field `match` is missing");
    }

    #[test]
    fn unknown_version_wins_over_later_garbage() {
        let err = parse(r#"{"format": "dumpview.manifest", "schema_version": 9, "records": [1, 2"#)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "m.json: schema_version 9 is not supported (this dumpview reads 1)"
        );
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let text = format!("{{\"future\": {{\"x\": [1, 2]}}, {}{RECORD}]}}", &HEAD[1..]);
        let parsed = parse(&text).unwrap();
        assert!(parsed.stopped.is_none());
        assert_eq!(parsed.manifest.records.len(), 1);
    }

    #[test]
    fn byte_offsets_count_lines() {
        assert_eq!(byte_offset(b"ab\ncd\nef", 1, 2), 1);
        assert_eq!(byte_offset(b"ab\ncd\nef", 3, 1), 6);
        assert_eq!(byte_offset(b"ab\ncd\nef", 2, 0), 3);
    }

    /// A manifest as the probe writes it: one top-level field per line, one record per line.
    fn probe_text(records: usize) -> String {
        let lines: Vec<String> = (0..records)
            .map(|i| {
                let stats = format!(
                    r#"{{"nan_count": 0, "inf_count": {}, "finite_count": 2, "max_abs": {}, "min": -0.5, "max": 1e-05, "mean": "nan", "l2": 3, "pos_checksum": 0.1}}"#,
                    i % 2,
                    1.5 + i as f64 / 7.0
                );
                RECORD
                    .replace("\"seq\": 0", &format!("\"seq\": {i}"))
                    .replace("\"stage\": \"s\"", &format!("\"stage\": \"layers.{}.q\"", i % 3))
                    .replace("\"occurrence\": 1", &format!("\"occurrence\": {}", i / 3 + 1))
                    .replace("\"stats\": null", &format!("\"stats\": {stats}"))
            })
            .collect();
        format!(
            "{{\n \"format\": \"dumpview.manifest\",\n \"schema_version\": 1,\n \"label\": \"r\",\n \"match\": 1,\n \"occurrence\": 1,\n \"rank\": 0,\n \"world_size\": 1,\n \"metadata\": {{\"token_ids\": [1, 2]}},\n \"records\": [\n  {}\n ],\n \"input_sets\": []\n}}\n",
            lines.join(",\n  ")
        )
    }

    /// `parse_by_lines` either declines or gives exactly what the one-pass parser gives.
    fn agrees(text: &str) -> bool {
        let path = Path::new("m.json");
        let by_lines = parse_by_lines(text.as_bytes(), path);
        let one_pass = parse_one_pass(text.as_bytes(), path);
        if let Some(parsed) = &by_lines {
            let one_pass = one_pass
                .as_ref()
                .expect("the line road only takes valid manifests");
            // Debug text, not ==: statistics may be NaN.
            assert_eq!(
                format!("{:?}", parsed.manifest),
                format!("{:?}", one_pass.manifest),
                "{text}"
            );
            assert_eq!(parsed.stopped, None);
            assert_eq!(one_pass.stopped, None);
        }
        by_lines.is_some()
    }

    #[test]
    fn the_line_road_reads_the_probe_layout_as_the_one_pass_parser_does() {
        let text = probe_text(7);
        assert!(agrees(&text));
        assert_eq!(
            parse_by_lines(text.as_bytes(), Path::new("m"))
                .unwrap()
                .manifest
                .records
                .len(),
            7
        );
        // Large enough for parse_manifest to take it.
        let big = probe_text(LINES_MIN_BYTES / 400);
        assert!(big.len() >= LINES_MIN_BYTES);
        let path = Path::new("m.json");
        assert_eq!(
            format!(
                "{:?}",
                parse_manifest(big.as_bytes(), path).unwrap().manifest
            ),
            format!(
                "{:?}",
                parse_one_pass(big.as_bytes(), path).unwrap().manifest
            )
        );
    }

    #[test]
    fn the_line_road_declines_every_cut_of_a_manifest() {
        let text = probe_text(4);
        for len in 0..text.len() {
            let cut = &text[..len];
            // Only whitespace may be missing for a cut to still be the whole manifest.
            let whole = text[len..].trim().is_empty();
            assert_eq!(agrees(cut), whole, "cut at {len}");
        }
    }

    #[test]
    fn the_line_road_declines_other_layouts_or_agrees() {
        let text = probe_text(3);
        let record = |i: usize| {
            text.lines()
                .filter(|l| l.starts_with("  {"))
                .nth(i)
                .unwrap()
                .to_string()
        };
        let variants = [
            // Declined: not one record per line, or not valid JSON.
            (text.replace(",\n  {\"seq\": 1", ", {\"seq\": 1"), false),
            (text.replace("\n ],", ",\n ],"), false),
            (
                text.replace(",\n  {\"seq\": 2", ",\n\n  {\"seq\": 2"),
                false,
            ),
            (text.replace(",\n  {\"seq\": 2", "\n  {\"seq\": 2"), false),
            (text.replace("\"records\": [\n", "\"records\":  [\n"), false),
            (
                text.replace(" \"records\": [", " \"x\": 1, \"records\": ["),
                false,
            ),
            (
                text.replace("\"records\": [", "\"records\": [\n  1,"),
                false,
            ),
            (text.replace("\"input_sets\": []", "\"records\": []"), false),
            (
                text.replace("\"input_sets\": []", "\"input_sets\": [1]"),
                false,
            ),
            (text.replace("dumpview.manifest", "other"), false),
            (text.replace(" \"match\": 1,\n", ""), false),
            (
                text.replace(
                    &record(1),
                    &record(1).replace("\"numel\": 2", "\"numel\": \"2\""),
                ),
                false,
            ),
            // A nested `records` array, on lines of its own, holding a record.
            (
                text.replace(
                    "\"metadata\": {\"token_ids\": [1, 2]}",
                    &format!("\"metadata\": {{\n \"records\": [\n{}\n ]}}", record(0)),
                ),
                false,
            ),
            (format!("{text}x"), false),
            // Taken: the same layout with other spacing, fields or key order.
            (
                text.replace(
                    "\"metadata\": {\"token_ids\": [1, 2]}",
                    "\"metadata\": {\"records\": [\n 1]}",
                ),
                true,
            ),
            (text.replace('\n', "\r\n"), true),
            (text.replace("\n ],", "\n ]\n ,"), true),
            (
                text.replace("\"label\": \"r\",\n", "")
                    .replace("\"input_sets\": []", "\"input_sets\": [], \"label\": \"r\""),
                true,
            ),
            (
                text.replace(
                    &record(2),
                    &record(2).replace("\"seq\": 2, ", "\"future\": {\"a\": [1]}, \"seq\": 2, "),
                ),
                true,
            ),
            (
                text.replace(
                    &record(0),
                    &record(0).replace("layers.0.q", "layers.0.\\u0071\\\""),
                ),
                true,
            ),
            (text.replace("  {", "\t{"), true),
            (text.replace("},\n", "}  ,  \n"), true),
        ];
        for (i, (variant, taken)) in variants.iter().enumerate() {
            assert_eq!(agrees(variant), *taken, "variant {i}: {variant}");
        }
    }
}
