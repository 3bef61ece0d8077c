//! Layout differences between paired records whose values agree: the same values written at
//! another place (strides, offset within the storage, the stages sharing the storage).
//!
//! `diff` compares values, so a state stored into the wrong block of a pool with the right
//! values is found today only through the NaN or error it causes later. Here a paired record
//! whose values agree (`agree` or `checksum_inconclusive`) is compared on its layout, where
//! both sides recorded the storage's size, the records are unmerged and of one dtype. Pool
//! offsets are compared relative to the blocks each side's table assigns when the window's
//! metadata names them (`arm(..., block_ids=[...], block_numel=N)`): a correct pool hands
//! out blocks in allocation order, so two correct runs may write different blocks. A write
//! whose place in its table differs is a finding ([`MovedWrite`], "same values, written
//! elsewhere"); every other difference is a note, grouped by field and values
//! ([`LayoutNote`]). Never the first divergence of values (docs/diff.md, "Layout
//! differences").

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::model::dump::{Record, Window};

/// One record pair of a window pair, as the diff judged it.
pub struct PairedRecord<'p> {
    /// `stage#occurrence`.
    pub key: &'p str,
    /// Its position in A's capture order (0-based), for ordering notes.
    pub position: usize,
    /// A's `seq`.
    pub seq_a: u64,
    /// B's `seq`.
    pub seq_b: u64,
    /// The values agree: the verdict is `agree` or `checksum_inconclusive`, and neither
    /// record was merged over a parallel group.
    pub values_agree: bool,
}

/// One window pair: its rank, its two windows and its record pairs.
pub struct WindowPair<'p> {
    /// The rank.
    pub rank: u32,
    /// A's window.
    pub a: &'p Window,
    /// B's window.
    pub b: &'p Window,
    /// The record pairs, in A's capture order.
    pub pairs: Vec<PairedRecord<'p>>,
}

/// A pool's block table as a window's metadata declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockTable {
    /// The blocks this forward's table assigns, in allocation order (`metadata.block_ids`).
    pub block_ids: Vec<u64>,
    /// Elements of one block in the pool's storage (`metadata.block_numel`).
    pub block_numel: u64,
}

impl BlockTable {
    /// The window's table: `None` where its metadata names no `block_ids`.
    ///
    /// # Errors
    /// Why a table that is named cannot be used, in words: `block_ids` not a list of
    /// non-negative integers, `block_numel` missing or not a positive integer.
    pub fn of(window: &Window) -> Result<Option<BlockTable>, String> {
        let Some(ids) = window.metadata.get("block_ids") else {
            return Ok(None);
        };
        let block_ids = ids
            .as_array()
            .and_then(|ids| ids.iter().map(|v| v.as_u64()).collect::<Option<Vec<u64>>>())
            .ok_or_else(|| format!("block_ids {ids} is not a list of non-negative integers"))?;
        let numel = window.metadata.get("block_numel");
        let block_numel = numel
            .and_then(|n| n.as_u64())
            .filter(|&n| n > 0)
            .ok_or_else(|| match numel {
                Some(n) => format!("block_numel {n} is not a positive integer"),
                None => "block_ids without block_numel".to_string(),
            })?;
        Ok(Some(BlockTable {
            block_ids,
            block_numel,
        }))
    }

    /// `(block, its index in the table)` of a record at `storage_offset` (elements), when
    /// the record's storage holds more than one block (a pool).
    fn place(&self, record: &Record) -> Option<(u64, Option<usize>)> {
        let elements = record.storage_nbytes? / u64::from(record.element_size.max(1));
        if elements <= self.block_numel {
            return None;
        }
        let block = record.storage_offset / self.block_numel;
        Some((block, self.block_ids.iter().position(|&b| b == block)))
    }
}

/// A paired record with equal values written at another place in its pool than its table
/// says, on one side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MovedWrite {
    /// The rank of the window pair.
    pub rank: u32,
    /// `stage#occurrence`.
    pub key: String,
    /// A's `seq`.
    pub seq_a: u64,
    /// B's `seq`.
    pub seq_b: u64,
    /// The pool block A's record lies in.
    pub block_a: u64,
    /// The pool block B's record lies in.
    pub block_b: u64,
    /// A's table (`block_ids`).
    pub table_a: Vec<u64>,
    /// B's table.
    pub table_b: Vec<u64>,
    /// `storage_offset` of A's record, elements.
    pub offset_a: u64,
    /// `storage_offset` of B's record, elements.
    pub offset_b: u64,
    /// The sentence: `same values, written elsewhere: ...`.
    pub text: String,
}

/// Paired records with agreeing values whose layout differs in one field the same way,
/// counted over every window pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayoutNote {
    /// `stride`, `storage_offset` or `shared_with`.
    pub field: &'static str,
    /// A's value, as text.
    pub a: String,
    /// B's value, as text.
    pub b: String,
    /// How many record pairs differ so.
    pub count: usize,
    /// The first of them in capture order: `stage#occurrence` (rank R).
    pub example: String,
}

/// The layout differences of a diff.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LayoutDifferences {
    /// Writes whose place in their pool's table differs between A and B: findings.
    pub moved: Vec<MovedWrite>,
    /// Other layout differences of agreeing pairs, grouped: notes, not findings.
    pub notes: Vec<LayoutNote>,
    /// Agreeing pairs not compared on layout because a side recorded no storage size.
    pub not_compared: usize,
    /// Block tables named in a window's metadata that could not be used, one line each
    /// (`A rank 0 "req" call 1: block_numel 0 is not a positive integer; ...`): that window's
    /// offsets are compared as they are.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unusable_tables: Vec<String>,
}

impl LayoutDifferences {
    /// True when there is nothing to say.
    pub fn is_empty(&self) -> bool {
        self.moved.is_empty() && self.notes.is_empty() && self.unusable_tables.is_empty()
    }
}

/// The record of `window` with `seq` (records are in seq order but for graph slots).
fn by_seq(window: &Window, seq: u64) -> Option<&Record> {
    match window.records.get(seq as usize) {
        Some(r) if r.seq == seq => Some(r),
        _ => window.records.iter().find(|r| r.seq == seq),
    }
}

/// The other stages sharing each storage of `window`: `(device, storage_id)` → stage names.
fn sharing(window: &Window) -> HashMap<(&str, u64), Vec<&str>> {
    let mut by_storage: HashMap<(&str, u64), Vec<&str>> = HashMap::new();
    for r in &window.records {
        if let Some(id) = r.storage_id {
            by_storage
                .entry((&*r.device, id))
                .or_default()
                .push(&*r.stage);
        }
    }
    for stages in by_storage.values_mut() {
        stages.sort_unstable();
        stages.dedup();
    }
    by_storage
}

/// The other stage names sharing `record`'s storage, as text (`-` for none).
fn shared_with(map: &HashMap<(&str, u64), Vec<&str>>, record: &Record) -> Option<String> {
    let id = record.storage_id?;
    let others: Vec<&str> = map
        .get(&(&*record.device, id))?
        .iter()
        .copied()
        .filter(|s| *s != &*record.stage)
        .collect();
    Some(if others.is_empty() {
        "-".to_string()
    } else {
        others.join(", ")
    })
}

/// A note's group: (field, A's value, B's value).
type NoteKey = (&'static str, String, String);
/// A group's count, its first example and that example's (rank, position).
type NoteCount = (usize, String, (u32, usize));

/// The layout differences of the window pairs `windows`.
pub fn compare(windows: &[WindowPair<'_>]) -> LayoutDifferences {
    let mut out = LayoutDifferences::default();
    let mut notes: BTreeMap<NoteKey, NoteCount> = BTreeMap::new();
    for w in windows {
        let (x, y) = (w.a, w.b);
        let mut table = |side: char, window: &Window| match BlockTable::of(window) {
            Ok(table) => table,
            Err(why) => {
                out.unusable_tables.push(format!(
                    "{} rank {} {:?} call {}: {why}; its offsets are compared as they are",
                    side.to_ascii_uppercase(),
                    window.rank,
                    window.label,
                    window.occurrence
                ));
                None
            }
        };
        let tables = (table('a', x), table('b', y));
        let mut shares: Option<(HashMap<_, _>, HashMap<_, _>)> = None;
        for p in w.pairs.iter().filter(|p| p.values_agree) {
            let (Some(ra), Some(rb)) = (by_seq(x, p.seq_a), by_seq(y, p.seq_b)) else {
                continue;
            };
            if ra.dtype != rb.dtype {
                continue;
            }
            if ra.storage_nbytes.is_none() || rb.storage_nbytes.is_none() {
                out.not_compared += 1;
                continue;
            }
            let mut note = |field: &'static str, a: String, b: String| {
                let entry = notes.entry((field, a, b)).or_insert((
                    0,
                    format!("{} (rank {})", p.key, w.rank),
                    (w.rank, p.position),
                ));
                entry.0 += 1;
            };
            if ra.stride != rb.stride {
                note(
                    "stride",
                    format!("{:?}", &ra.stride[..]),
                    format!("{:?}", &rb.stride[..]),
                );
            }
            if ra.storage_offset != rb.storage_offset {
                match (&tables.0, &tables.1) {
                    (Some(ta), Some(tb)) => {
                        if let Some(moved) = moved_write(w.rank, p, ra, rb, ta, tb) {
                            out.moved.push(moved);
                        } else if ta.place(ra).is_none() || tb.place(rb).is_none() {
                            note(
                                "storage_offset",
                                ra.storage_offset.to_string(),
                                rb.storage_offset.to_string(),
                            );
                        }
                    }
                    _ => note(
                        "storage_offset",
                        ra.storage_offset.to_string(),
                        rb.storage_offset.to_string(),
                    ),
                }
            }
            let (sa, sb) = shares.get_or_insert_with(|| (sharing(x), sharing(y)));
            if let (Some(a), Some(b)) = (shared_with(sa, ra), shared_with(sb, rb))
                && a != b
            {
                note("shared_with", a, b);
            }
        }
    }
    let mut grouped: Vec<(LayoutNote, (u32, usize))> = notes
        .into_iter()
        .map(|((field, a, b), (count, example, order))| {
            (
                LayoutNote {
                    field,
                    a,
                    b,
                    count,
                    example,
                },
                order,
            )
        })
        .collect();
    grouped.sort_by_key(|(n, order)| (*order, n.field));
    out.notes = grouped.into_iter().map(|(n, _)| n).collect();
    out
}

/// The moved write of a pair at different offsets in pools with tables, when the blocks'
/// places in their tables differ and one side writes a block of its table.
fn moved_write(
    rank: u32,
    pair: &PairedRecord<'_>,
    a: &Record,
    b: &Record,
    ta: &BlockTable,
    tb: &BlockTable,
) -> Option<MovedWrite> {
    let ((block_a, index_a), (block_b, index_b)) = (ta.place(a)?, tb.place(b)?);
    if index_a == index_b && a.storage_offset % ta.block_numel == b.storage_offset % tb.block_numel
    {
        return None;
    }
    if index_a.is_none() && index_b.is_none() {
        return None;
    }
    // Within one block too, where the two sides' places inside their blocks differ.
    let (within_a, within_b) = (
        a.storage_offset % ta.block_numel,
        b.storage_offset % tb.block_numel,
    );
    let side = |block: u64, index: Option<usize>, table: &BlockTable, within: u64| {
        let at = if within_a == within_b {
            String::new()
        } else {
            format!(" at element {within} of it")
        };
        match index {
            Some(i) => format!("block {block} (its table's {}){at}", ordinal(i + 1)),
            None => format!("block {block}{at}, not in its table {:?}", table.block_ids),
        }
    };
    Some(MovedWrite {
        rank,
        key: pair.key.to_string(),
        seq_a: a.seq,
        seq_b: b.seq,
        block_a,
        block_b,
        table_a: ta.block_ids.clone(),
        table_b: tb.block_ids.clone(),
        offset_a: a.storage_offset,
        offset_b: b.storage_offset,
        text: format!(
            "same values, written elsewhere: {} is written to {} in A and to {} in B (rank {rank}, \
             storage_offset {} vs {})",
            pair.key,
            side(block_a, index_a, ta, within_a),
            side(block_b, index_b, tb, within_b),
            a.storage_offset,
            b.storage_offset
        ),
    })
}

/// `1st`, `2nd`, `3rd`, `4th`, … `11th`, `21st`.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}
