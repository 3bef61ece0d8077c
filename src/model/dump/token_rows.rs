//! A window's token rows ([`TokenRows`]): the forward's row map (which request and token
//! position each row holds) and the per-row statistics of its token-row records, read from
//! the manifest's `token_rows` object and its float32 sidecar (docs/manifest.md, "Token rows").

use serde::Deserialize;

pub use dump_stats::ROW_STAT_NAMES;
/// Values per row in the sidecar.
pub const ROW_WIDTH: usize = ROW_STAT_NAMES.len();

/// One entry of a forward's row map: `count` rows of one request (or padding), in the
/// engine's row order.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RowMapEntry {
    /// The request id, as the capturing process named it; `None` for padding rows, which are
    /// never compared.
    pub request: Option<String>,
    /// The 0-based position of the entry's first row in its request.
    pub first_position: u64,
    /// Rows in the entry.
    pub count: u64,
    /// The position of each row where they are not consecutive from `first_position`.
    #[serde(default)]
    pub positions: Option<Vec<u64>>,
    /// The token id of each row, where the capture knew them.
    #[serde(default)]
    pub token_ids: Option<Vec<i64>>,
}

impl RowMapEntry {
    /// The position of the entry's `i`-th row.
    pub fn position(&self, i: usize) -> Option<u64> {
        match &self.positions {
            Some(p) => p.get(i).copied(),
            None => ((i as u64) < self.count).then(|| self.first_position + i as u64),
        }
    }

    /// The token id at `position` of this entry's request, where recorded.
    pub fn token_at(&self, position: u64) -> Option<i64> {
        let ids = self.token_ids.as_ref()?;
        let index = match &self.positions {
            Some(p) => p.iter().position(|&q| q == position)?,
            None => usize::try_from(position.checked_sub(self.first_position)?).ok()?,
        };
        ids.get(index).copied()
    }
}

/// Where one record's rows lie in the sidecar: `[seq, first_row, rows, token_dims,
/// positions]` in the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowBlock {
    /// The record's `seq`.
    pub seq: u64,
    /// Index of its first row in the sidecar (rows of [`ROW_WIDTH`] values).
    pub first_row: u64,
    /// Rows it holds.
    pub rows: u64,
    /// The tensor dimensions that hold tokens: `[0]`, or `[0, 1]` for `[batch, seq, hidden]`.
    pub token_dims: Vec<u8>,
    /// `(map entry, position)` of each row where they are not the forward's rows in order
    /// (declared positions: a KV-cache read; rows cut by the probe's position bound).
    pub positions: Option<Vec<(u32, u64)>>,
}

impl<'de> Deserialize<'de> for RowBlock {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        type Raw = (u64, u64, u64, Vec<u8>, Option<Vec<(u32, u64)>>);
        let (seq, first_row, rows, token_dims, positions) = Raw::deserialize(d)?;
        Ok(RowBlock {
            seq,
            first_row,
            rows,
            token_dims,
            positions,
        })
    }
}

/// A sidecar's float32 values: in memory, or the bytes of the file mapped (a large sidecar of
/// a dump nobody writes any more, on a little-endian machine: no copy, no fresh pages).
#[derive(Default)]
pub enum RowValues {
    /// No values (not read, or not readable).
    #[default]
    Empty,
    /// Values in memory: read, or merged over a parallel group.
    Owned(Vec<f32>),
    /// Little-endian float32 values in place, aligned and whole ([`RowValues::in_place`]).
    InPlace(Box<dyn std::ops::Deref<Target = [u8]> + Send + Sync>),
}

impl RowValues {
    /// The values of `bytes` where they can be used in place: this machine little-endian,
    /// the bytes aligned for f32 (a mapping starts on a page) and a whole number of values;
    /// `bytes` back otherwise.
    ///
    /// # Errors
    /// `bytes`, unchanged, when they cannot be used in place.
    pub fn in_place<B>(bytes: B) -> Result<RowValues, B>
    where
        B: std::ops::Deref<Target = [u8]> + Send + Sync + 'static,
    {
        if cfg!(target_endian = "little") && bytemuck::try_cast_slice::<u8, f32>(&bytes).is_ok() {
            Ok(RowValues::InPlace(Box::new(bytes)))
        } else {
            Err(bytes)
        }
    }

    /// Decodes little-endian float32 bytes (a last partial value is dropped).
    pub fn decode(bytes: &[u8]) -> RowValues {
        RowValues::Owned(
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        )
    }
}

impl std::ops::Deref for RowValues {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        match self {
            RowValues::Empty => &[],
            RowValues::Owned(values) => values,
            // Checked castable when made (RowValues::in_place).
            RowValues::InPlace(bytes) => bytemuck::cast_slice(bytes),
        }
    }
}

impl From<Vec<f32>> for RowValues {
    fn from(values: Vec<f32>) -> RowValues {
        RowValues::Owned(values)
    }
}

impl Clone for RowValues {
    /// Values in place are copied into memory.
    fn clone(&self) -> RowValues {
        match self {
            RowValues::Empty => RowValues::Empty,
            other => RowValues::Owned(other.to_vec()),
        }
    }
}

impl PartialEq for RowValues {
    fn eq(&self, other: &RowValues) -> bool {
        // By bits: NaN marks a statistic a merge could not know, and equals itself here.
        self.len() == other.len()
            && self
                .iter()
                .zip(other.iter())
                .all(|(a, b)| a.to_bits() == b.to_bits())
    }
}

impl std::fmt::Debug for RowValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = match self {
            RowValues::Empty => "empty",
            RowValues::Owned(_) => "in memory",
            RowValues::InPlace(_) => "in place",
        };
        write!(f, "RowValues({} values, {how})", self.len())
    }
}

/// The manifest's `token_rows` object, with the sidecar's values once read.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TokenRows {
    /// The sidecar's file name beside the manifest (`rows.f32`); `None` when no record had
    /// token rows.
    pub file: Option<String>,
    /// The statistics' names, in column order (must equal [`ROW_STAT_NAMES`]).
    pub stats: Vec<String>,
    /// The forward's row map, in row order.
    pub map: Vec<RowMapEntry>,
    /// The first position was counted on from the label's earlier calls, not given by the
    /// capturing code.
    #[serde(default)]
    pub positions_inferred: bool,
    /// Rows in the sidecar.
    pub rows: u64,
    /// One per record with token rows, in `seq` order.
    pub records: Vec<RowBlock>,
    /// The sidecar's values, `rows × ROW_WIDTH` (empty until read, or when it could not be).
    #[serde(skip)]
    pub values: RowValues,
    /// The map was made from the window's metadata (`positions=[start, end]`), not written
    /// by the probe: a manifest from before token rows ([`TokenRows::from_metadata_positions`]).
    #[serde(skip)]
    pub from_metadata: bool,
}

impl TokenRows {
    /// A row map without row statistics for a window from before token rows: one request,
    /// the window's `label`, at the half-open range `metadata.positions = [start, end]`, its
    /// token ids from `metadata.token_ids` (the range's own, or the request's from position 0)
    /// where they cover it.
    ///
    /// # Errors
    /// Why the window gets no map, in words: no `positions`, not a `[start, end]` pair of
    /// integers, an empty or reversed range, or a range whose row count is not the window's
    /// first capture's leading dimension (the probe's own row count).
    pub fn from_metadata_positions(window: &super::Window) -> Result<TokenRows, String> {
        let value = window
            .metadata
            .get("positions")
            .ok_or("no metadata `positions`")?;
        let range = value.as_array().and_then(|r| match r.as_slice() {
            [start, end] => Some((start.as_u64()?, end.as_u64()?)),
            _ => None,
        });
        let Some((start, end)) = range else {
            return Err(format!(
                "metadata positions={value} is not a [start, end] pair of integers"
            ));
        };
        if end <= start {
            return Err(format!(
                "metadata positions=[{start}, {end}] is an empty or reversed range"
            ));
        }
        let count = end - start;
        let first = window
            .records
            .first()
            .ok_or_else(|| format!("metadata positions=[{start}, {end}] but no record"))?;
        let rows = first.shape.first().copied().unwrap_or(1);
        if rows != count {
            return Err(format!(
                "metadata positions=[{start}, {end}] names {count} rows, but its first capture ({}) holds {rows}",
                first.key()
            ));
        }
        let token_ids = window.token_ids().and_then(|ids| {
            if ids.len() as u64 == count {
                Some(ids)
            } else {
                ids.get(start as usize..end as usize).map(<[i64]>::to_vec)
            }
        });
        Ok(TokenRows {
            file: None,
            stats: ROW_STAT_NAMES.iter().map(|s| s.to_string()).collect(),
            map: vec![RowMapEntry {
                request: Some(window.label.clone()),
                first_position: start,
                count,
                positions: None,
                token_ids,
            }],
            positions_inferred: false,
            rows: 0,
            records: Vec::new(),
            values: RowValues::Empty,
            from_metadata: true,
        })
    }

    /// The forward's rows: `(map entry, position)` in row order.
    pub fn forward_rows(&self) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        for (index, entry) in self.map.iter().enumerate() {
            out.extend(
                (0..entry.count as usize).filter_map(|i| Some((index as u32, entry.position(i)?))),
            );
        }
        out
    }

    /// The `(map entry, position)` and statistics of every row of `block`; empty when the
    /// sidecar was not read or does not hold the block.
    pub fn rows_of<'a>(
        &'a self,
        block: &'a RowBlock,
        forward: &'a [(u32, u64)],
    ) -> impl Iterator<Item = ((u32, u64), &'a [f32])> + 'a {
        let start = block.first_row as usize * ROW_WIDTH;
        let end = start.saturating_add(block.rows as usize * ROW_WIDTH);
        let values = self.values.get(start..end).unwrap_or(&[]);
        values
            .chunks_exact(ROW_WIDTH)
            .enumerate()
            .filter_map(move |(i, stats)| {
                let at = match &block.positions {
                    Some(p) => *p.get(i)?,
                    None => *forward.get(i)?,
                };
                Some((at, stats))
            })
    }

    /// Checks the object against the sidecar's length and itself; the problem, in words.
    pub fn check(&self, sidecar_bytes: u64) -> Result<(), String> {
        if self.stats != ROW_STAT_NAMES {
            return Err(format!(
                "row statistics are {:?}, this dumpview reads {:?}",
                self.stats, ROW_STAT_NAMES
            ));
        }
        let want = self.rows.saturating_mul((ROW_WIDTH * 4) as u64);
        if sidecar_bytes != want {
            return Err(format!(
                "holds {sidecar_bytes} bytes, the manifest names {} rows of {ROW_WIDTH} float32 ({want} bytes)",
                self.rows
            ));
        }
        for block in &self.records {
            if block.first_row.saturating_add(block.rows) > self.rows {
                return Err(format!(
                    "record seq {} names rows {}..{} of {}",
                    block.seq,
                    block.first_row,
                    block.first_row.saturating_add(block.rows),
                    self.rows
                ));
            }
            if block.token_dims != [0] && block.token_dims != [0, 1] {
                return Err(format!(
                    "record seq {}: token dims {:?}, not [0] or [0, 1]",
                    block.seq, block.token_dims
                ));
            }
            if let Some(p) = &block.positions {
                if p.len() as u64 != block.rows
                    || p.iter().any(|&(e, _)| e as usize >= self.map.len())
                {
                    return Err(format!(
                        "record seq {}: its positions do not match its {} rows or the row map",
                        block.seq, block.rows
                    ));
                }
            }
        }
        Ok(())
    }
}
