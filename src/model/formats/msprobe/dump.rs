//! dump.json read into records, in one pass, on several threads when it is large.
//!
//! msprobe writes dump.json with `json.dump(..., indent=1)`: every entry of `data` starts a
//! line indented exactly as deep as the first one, and no other line does (deeper lines
//! are indented more, the top level less, and a JSON string holds no raw newline). A large
//! `data` object is cut at such lines into pieces that are read in parallel, each exactly
//! as the sequential reader would read that stretch. A piece that does not end where the
//! next begins (a file laid out otherwise) is read again in turn from its start, and so is
//! everything after it; a piece that breaks (a file cut short) keeps its entries before
//! the break and ends the reading there, as the sequential reader would. Backward call
//! numbers and `seq` are then given in one pass in file order.

use std::borrow::Cow;

use rayon::prelude::*;

use super::error::MsprobeError;
use super::json::{self, Reader, Separator};
use super::names::{self, EntryKeys, Keys};
use super::record;
use super::value::Value;
use crate::model::dump::{Name, Record};

/// One entry of `data` that gave rows.
#[derive(Debug)]
pub struct Entry<'a> {
    /// The key in dump.json.
    pub name: Cow<'a, str>,
    /// Whether its rows pair under another name (a renumbered backward call).
    pub renamed: bool,
    /// Its records: `records[first..first + rows]`.
    pub first: usize,
    pub rows: usize,
    /// `(row name within the entry, checksum)` of rows that carry an `md5`.
    pub md5: Vec<(String, String)>,
}

/// dump.json, read.
#[derive(Debug, Default)]
pub struct Parsed<'a> {
    pub task: Option<String>,
    pub level: Option<String>,
    pub framework: Option<String>,
    pub records: Vec<Record>,
    pub entries: Vec<Entry<'a>>,
    /// Entries msprobe compare skips, and the first of them.
    pub skipped: usize,
    pub skipped_first: Option<String>,
    /// Whether a tensor carried an `md5`, and whether it was the 64-bit xor form.
    md5: Option<bool>,
    /// Where reading stopped early, when it did inside or after `data`.
    pub stop: Option<json::Error>,
}

impl Parsed<'_> {
    /// `statistics`, `md5` or `xor` (dump.json does not say; the checksums tell).
    pub fn summary_mode(&self) -> &'static str {
        match self.md5 {
            None => "statistics",
            Some(false) => "md5",
            Some(true) => "xor",
        }
    }
}

/// Reads dump.json; `Err` when it breaks before `data` starts or has none.
pub fn parse(bytes: &[u8]) -> Result<Parsed<'_>, MsprobeError> {
    let fatal = MsprobeError::NotJson;
    let mut parsed = Parsed::default();
    let mut reader = Reader::new(bytes);
    reader.object_start().map_err(fatal)?;
    let mut data_seen = false;
    let mut first = true;
    let stop = loop {
        let key = match reader.next_key(first) {
            Ok(Some(key)) => key,
            Ok(None) => break None,
            Err(e) if data_seen => break Some(e),
            Err(e) => return Err(fatal(e)),
        };
        first = false;
        let read = match &*key {
            "data" => {
                let at = reader.offset();
                reader.object_start().map_err(|e| {
                    fatal(if e.reason.contains("EOF") {
                        e
                    } else {
                        json::Error {
                            offset: at,
                            reason: "`data` is not an object",
                        }
                    })
                })?;
                data_seen = true;
                read_data(bytes, &mut reader, &mut parsed)
            }
            "task" | "level" | "framework" => reader.value().map(|value| {
                let text = value.as_str().map(str::to_owned);
                match &*key {
                    "task" => parsed.task = text,
                    "level" => parsed.level = text,
                    _ => parsed.framework = text,
                }
            }),
            _ => reader.skip(),
        };
        match read {
            Ok(()) => {}
            Err(e) if data_seen => break Some(e),
            Err(e) => return Err(fatal(e)),
        }
    };
    let stop = stop.or_else(|| {
        (!reader.at_end()).then(|| json::Error {
            offset: reader.offset(),
            reason: "unexpected bytes after the JSON value",
        })
    });
    if !data_seen {
        return Err(match stop {
            Some(e) => fatal(e),
            None => MsprobeError::NoData,
        });
    }
    parsed.stop = stop;
    Ok(parsed)
}

/// One entry as read, before it has its place: records without `seq`, each with its `md5`.
/// A backward entry's rows pair under names given in file order ([`Keys`]), so their
/// records have no `stage` yet and the row name comes along; other records have theirs.
struct Raw<'a> {
    name: Cow<'a, str>,
    rows: Vec<(Record, Option<String>, Option<String>)>,
}

fn raw<'a>(name: Cow<'a, str>, value: &Value<'_>) -> Raw<'a> {
    let later = names::is_backward(&name);
    let rows = names::rows(&name, value)
        .into_iter()
        .map(|row| {
            let leaf = row.leaf.as_deref();
            let md5 = leaf.and_then(|l| l.md5.as_deref()).map(str::to_owned);
            if later {
                (
                    record::record(0, Name::default(), leaf),
                    Some(row.name),
                    md5,
                )
            } else {
                (record::record(0, Name::new(&row.name), leaf), None, md5)
            }
        })
        .collect();
    Raw { name, rows }
}

/// `data` from just after its `{` to just after its `}`: entries into `parsed`, `reader`
/// left after the `}`.
fn read_data<'a>(
    bytes: &'a [u8],
    reader: &mut Reader<'a>,
    parsed: &mut Parsed<'a>,
) -> Result<(), json::Error> {
    let mut keys = Keys::default();
    if reader.peek() == Some(b'}') {
        reader.separator()?;
        return Ok(());
    }
    let start = reader.offset();
    // Where to go on in turn: the start of the first piece not read in parallel.
    let mut resume = start;
    let mut result = None;
    let pieces = read_pieces(bytes, start);
    parsed.records.reserve(
        pieces
            .iter()
            .flat_map(|p| &p.entries)
            .map(|e| e.rows.len())
            .sum(),
    );
    for piece in pieces {
        match piece.outcome {
            ScanEnd::Continue => {
                resume = piece.end;
                take(parsed, &mut keys, piece.entries);
            }
            ScanEnd::Closed(after) => {
                take(parsed, &mut keys, piece.entries);
                *reader = Reader::at(bytes, after);
                result = Some(Ok(()));
                break;
            }
            ScanEnd::Broken(error) => {
                take(parsed, &mut keys, piece.entries);
                result = Some(Err(error));
                break;
            }
            ScanEnd::Overran => break,
        }
    }
    if let Some(result) = result {
        return result;
    }
    *reader = Reader::at(bytes, resume);
    loop {
        let name = reader.key()?;
        let value = reader.value()?;
        take(parsed, &mut keys, vec![raw(name, &value)]);
        if reader.separator()? == Separator::Close {
            return Ok(());
        }
    }
}

/// Entries into records, in file order: `seq`, `stage` (after backward renumbering), and
/// the per-entry notes.
fn take<'a>(parsed: &mut Parsed<'a>, keys: &mut Keys, entries: Vec<Raw<'a>>) {
    for entry in entries {
        let new_entry = match keys.entry(&entry.name) {
            EntryKeys::Skipped => {
                parsed.skipped += 1;
                if parsed.skipped_first.is_none() {
                    parsed.skipped_first = Some(entry.name.into_owned());
                }
                continue;
            }
            EntryKeys::Same => None,
            EntryKeys::Renamed { new_entry } => Some(new_entry),
        };
        let first = parsed.records.len();
        let mut renamed = false;
        let mut md5 = Vec::new();
        for (mut record, row, sum) in entry.rows {
            if let (Some(new_entry), Some(row)) = (&new_entry, &row) {
                let key = names::renamed(row, &entry.name, new_entry);
                renamed |= key != *row;
                record.stage = Name::new(&key);
            } else if let Some(row) = row {
                record.stage = Name::new(&row);
            }
            if let Some(sum) = sum {
                parsed.md5.get_or_insert(sum.starts_with("0x"));
                let within = record
                    .stage
                    .strip_prefix(new_entry.as_deref().unwrap_or(&entry.name))
                    .unwrap_or(&record.stage)
                    .trim_start_matches('.');
                md5.push((within.to_string(), sum));
            }
            record.seq = parsed.records.len() as u64;
            parsed.records.push(record);
        }
        let rows = parsed.records.len() - first;
        if rows > 0 {
            parsed.entries.push(Entry {
                name: entry.name,
                renamed,
                first,
                rows,
                md5,
            });
        }
    }
}

/// How reading a piece ended.
enum ScanEnd {
    /// At a `,` just before the next piece's first entry.
    Continue,
    /// At the `}` of `data`; reading goes on after it (at this offset).
    Closed(usize),
    /// The JSON breaks here; the entries before it stand.
    Broken(json::Error),
    /// An entry ran past the piece's end: the cut was not between entries, so this piece
    /// and those after it are read again in turn.
    Overran,
}

struct Piece<'a> {
    entries: Vec<Raw<'a>>,
    end: usize,
    outcome: ScanEnd,
}

/// `data` below this size is read in turn: cutting it would not pay.
const PARALLEL_FROM_BYTES: usize = 4 << 20;

/// The pieces of `data` from `start` (its first key), read on rayon's threads, in order;
/// empty when `data` is too small to cut or not laid out one entry per indented line.
fn read_pieces(bytes: &[u8], start: usize) -> Vec<Piece<'_>> {
    let cuts = cuts(bytes, start);
    if cuts.len() < 2 {
        return Vec::new();
    }
    let mut pieces: Vec<Piece<'_>> = cuts
        .par_windows(2)
        .map(|w| read_piece(bytes, w[0], w[1]))
        .collect();
    // The last cut is the end of the file: nothing after it to continue into.
    if let Some(last) = pieces.last_mut() {
        if matches!(last.outcome, ScanEnd::Continue) {
            last.outcome = ScanEnd::Overran;
            last.entries.clear();
        }
    }
    pieces
}

/// Offsets of entry keys that cut `data` into about 4 pieces per thread, from `start` (the
/// first key) to the end of the file.
fn cuts(bytes: &[u8], start: usize) -> Vec<usize> {
    let rest = bytes.len() - start;
    if rest < PARALLEL_FROM_BYTES {
        return Vec::new();
    }
    // The first key's indentation, which every entry key shares.
    let line = memchr::memrchr(b'\n', &bytes[..start]).map_or(0, |n| n + 1);
    let indent = &bytes[line..start];
    if line == 0 || !indent.iter().all(|&b| b == b' ' || b == b'\t') {
        return Vec::new();
    }
    let mut pattern = Vec::with_capacity(indent.len() + 2);
    pattern.push(b'\n');
    pattern.extend_from_slice(indent);
    pattern.push(b'"');
    let finder = memchr::memmem::Finder::new(&pattern);
    let pieces = (rayon::current_num_threads() * 4).clamp(2, rest / (1 << 20));
    let mut cuts = vec![start];
    for k in 1..pieces {
        let target = start + rest / pieces * k;
        let from = target.max(*cuts.last().unwrap_or(&start));
        match finder.find(&bytes[from..]) {
            Some(at) => {
                let key = from + at + pattern.len() - 1;
                if key > *cuts.last().unwrap_or(&start) {
                    cuts.push(key);
                }
            }
            None => break,
        }
    }
    cuts.push(bytes.len());
    cuts
}

/// Reads entries from the key at `start` until the `,` before `end` (or the `}` of `data`).
fn read_piece(bytes: &[u8], start: usize, end: usize) -> Piece<'_> {
    let mut reader = Reader::at(bytes, start);
    let mut entries = Vec::new();
    let outcome = loop {
        let entry = reader.key().and_then(|name| {
            let value = reader.value()?;
            Ok(raw(name, &value))
        });
        match entry {
            Ok(entry) => entries.push(entry),
            Err(error) if reader.offset() > end || error.offset > end => break ScanEnd::Overran,
            Err(error) => break ScanEnd::Broken(error),
        }
        match reader.separator() {
            Ok(Separator::Comma) if reader.offset() == end => break ScanEnd::Continue,
            Ok(Separator::Comma) if reader.offset() < end => {}
            Ok(Separator::Comma) => break ScanEnd::Overran,
            Ok(Separator::Close) => break ScanEnd::Closed(reader.offset()),
            Err(error) if error.offset > end => break ScanEnd::Overran,
            Err(error) => break ScanEnd::Broken(error),
        }
    };
    if matches!(outcome, ScanEnd::Overran) {
        entries.clear();
    }
    Piece {
        entries,
        end,
        outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dump.json of `n` entries as msprobe lays it out (indent=1), each a few hundred bytes.
    fn dump(n: usize) -> String {
        let mut text = String::from(
            "{\n \"task\": \"statistics\",\n \"level\": \"L1\",\n \"framework\": \"pytorch\",\n \"dump_data_dir\": null,\n \"data\": {\n",
        );
        for i in 0..n {
            let (name, value) = if i % 3 == 2 {
                (format!("Torch.cos.{i}.backward"), "NaN".to_string())
            } else {
                (format!("Torch.cos.{i}.forward"), format!("{i}.5"))
            };
            text.push_str(&format!(
                "  \"{name}\": {{\n   \"input_args\": [\n    {{\n     \"type\": \"torch.Tensor\",\n     \"dtype\": \"torch.float32\",\n     \"shape\": [\n      {i}\n     ],\n     \"Max\": {value},\n     \"Min\": -1.0,\n     \"Mean\": null,\n     \"Norm\": 2\n    }},\n    {{\n     \"type\": \"int\",\n     \"value\": {i}\n    }}\n   ],\n   \"input_kwargs\": {{}},\n   \"output\": [\n    null\n   ]\n  }}{}\n",
                if i + 1 < n { "," } else { "" }
            ));
        }
        text.push_str(" }\n}");
        text
    }

    fn in_turn(bytes: &[u8]) -> Parsed<'_> {
        // Below the parallel threshold nothing is cut: the sequential reader's answer.
        let mut parsed = Parsed::default();
        let mut reader = Reader::new(bytes);
        reader.object_start().unwrap();
        let mut first = true;
        while let Some(key) = reader.next_key(first).unwrap() {
            first = false;
            if key == "data" {
                reader.object_start().unwrap();
                let mut keys = Keys::default();
                let mut first = true;
                let stop = loop {
                    let next = reader
                        .next_key(first)
                        .and_then(|k| k.map(|k| reader.value().map(|v| raw(k, &v))).transpose());
                    match next {
                        Ok(Some(entry)) => take(&mut parsed, &mut keys, vec![entry]),
                        Ok(None) => break None,
                        Err(e) => break Some(e),
                    }
                    first = false;
                };
                parsed.stop = stop;
                return parsed;
            }
            reader.skip().unwrap();
        }
        parsed
    }

    fn same(a: &Parsed<'_>, b: &Parsed<'_>) {
        // Debug forms: a NaN statistic is not equal to itself.
        assert!(format!("{:?}", a.records) == format!("{:?}", b.records));
        assert_eq!(a.stop, b.stop);
        assert_eq!(a.entries.len(), b.entries.len());
    }

    #[test]
    fn pieces_read_as_the_sequential_reader_reads() {
        let text = dump(40_000);
        assert!(text.len() > 2 * PARALLEL_FROM_BYTES, "{}", text.len());
        let data = text.find("\"data\": {").unwrap() + 9;
        let first_key = data + text[data..].find('"').unwrap();
        assert!(cuts(text.as_bytes(), first_key).len() > 2);

        let whole = parse(text.as_bytes()).unwrap();
        assert_eq!(whole.records.len(), 40_000 * 3);
        assert_eq!(whole.stop, None);
        same(&whole, &in_turn(text.as_bytes()));
        // Renumbered backward calls: the k-th backward of Torch.cos is Torch.cos.k.backward.
        assert_eq!(&*whole.records[6].stage, "Torch.cos.0.backward.input.0");
        assert_eq!(&*whole.records[15].stage, "Torch.cos.1.backward.input.0");

        // Cut short anywhere: the same entries kept and the same place named.
        for cut in [
            text.len() - 3,
            text.len() / 2 + 17,
            text.len() / 3,
            first_key + 40,
        ] {
            let short = &text.as_bytes()[..cut];
            let parsed = parse(short).unwrap();
            assert!(parsed.stop.is_some());
            same(&parsed, &in_turn(short));
        }
        // Not laid out one entry per line: no cuts, the same answer.
        let compact: String = text.split('\n').collect::<Vec<_>>().join("");
        same(&parse(compact.as_bytes()).unwrap(), &whole);
    }

    #[test]
    fn an_entry_that_runs_past_a_cut_is_read_again_in_turn() {
        // Each entry ends with a member indented as entry keys are, so cuts land inside
        // entries; the pieces before such a cut stand and the rest is read in turn.
        let text = dump(30_000).replace(
            "   ]\n  }",
            "   ],\n  \"zz\": {\"type\": \"int\", \"value\": 7}\n  }",
        );
        let data = text.find("\"data\": {").unwrap() + 9;
        let first_key = data + text[data..].find('"').unwrap();
        let cuts = cuts(text.as_bytes(), first_key);
        assert!(cuts.iter().any(|&c| text[c..].starts_with("\"zz\"")));
        let parsed = parse(text.as_bytes()).unwrap();
        assert_eq!(parsed.stop, None);
        assert_eq!(parsed.records.len(), 30_000 * 3);
        same(&parsed, &in_turn(text.as_bytes()));
    }

    #[test]
    fn a_cut_keeps_whole_entries_and_says_where() {
        let text = br#"{"task": "statistics", "level": "L1", "data": {
            "Torch.cos.0.forward": {"input_args": [{"type": "float", "value": NaN}], "output": [null]},
            "Torch.sin.0.forward": {"input_args": [{"type": "int", "value": 1}]"#;
        let parsed = parse(text).unwrap();
        assert_eq!(parsed.records.len(), 2);
        assert_eq!(parsed.entries.len(), 1);
        let stop = parsed.stop.unwrap();
        assert_eq!(stop.offset, text.len());
        assert!(
            parse(br#"{"task": "stat"#)
                .unwrap_err()
                .to_string()
                .contains("byte 14")
        );
        assert!(
            parse(br#"{"task": "statistics"}"#)
                .unwrap_err()
                .to_string()
                .contains("no `data`")
        );
        assert!(parse(b"<html>").unwrap_err().to_string().contains("byte 0"));
        assert!(
            parse(br#"{"data": [1]}"#)
                .unwrap_err()
                .to_string()
                .contains("not an object")
        );
        assert_eq!(parse(br#"{"data": {}}"#).unwrap().records.len(), 0);
    }
}
