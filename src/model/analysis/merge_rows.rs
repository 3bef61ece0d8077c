//! The token rows of a merged parallel group (docs/diff.md, "Across parallel layouts"):
//! per record, the rows of the whole tensor from its pieces' rows.
//!
//! - A slice inside the token row (`tp:D` with D after the token dims: columns, heads) holds
//!   a part of every row: non-finite counts, sums, sums of squares and row checksums add (the
//!   probe weights a slice at the full row's coordinates), `max_abs` is the largest.
//! - A slice along a token dimension (`cp:0`, `cp:0:zigzag`, sequence-parallel `tp:0`) holds
//!   some of the forward's rows, each listed with its (request, position): the rows are
//!   concatenated.
//! - A partial sum (`partial:tp`) merges what is linear only: the sum and the row checksum;
//!   its non-finite count, `max_abs` and sum of squares are not known (`NaN`, never
//!   compared: [`crate::model::analysis::tokens::judge`]).
//! - A replicated or per-rank record keeps the lowest rank's rows; a pipeline group's later
//!   ranks add their records' rows.
//!
//! A record whose pieces' rows do not fit (a rank without rows, row counts or positions that
//! differ) keeps no rows and is compared whole; the merge says so.

use std::sync::Arc;

use crate::model::dump::{ROW_WIDTH, RowBlock, RowMapEntry, TokenRows, Window};

/// The merged window's token rows, record by record.
pub(super) struct RowsBuilder<'w> {
    /// The group's windows, in group-rank order (only those present).
    pieces: Vec<&'w Window>,
    /// Every piece holds the same row map: blocks keep `positions: None`.
    same_map: bool,
    /// Per piece: the index of its map's first entry in the merged map.
    offsets: Vec<u32>,
    map: Vec<RowMapEntry>,
    blocks: Vec<RowBlock>,
    values: Vec<f32>,
}

/// How a record's pieces' rows make the whole's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RowMerge {
    /// The lowest rank's rows stand for the group.
    Lowest,
    /// A slice along dimension `dim`: along a token dimension each piece holds some rows
    /// (concatenated), inside the row a part of every row (added up).
    Split {
        /// The sliced dimension.
        dim: u32,
    },
    /// A partial sum: the linear statistics add up, the others are not known.
    Partial,
}

impl<'w> RowsBuilder<'w> {
    /// A builder over `pieces` (group-rank order), `Ok(None)` when none of them has a row
    /// map. The pieces' maps must be one map (each rank holds the forward's rows: tp), or
    /// maps of disjoint rows (each rank declared its own rows: cp); otherwise the ranks
    /// disagree on which token each row is, and the error says which.
    pub(super) fn of(pieces: Vec<&'w Window>) -> Result<Option<RowsBuilder<'w>>, String> {
        let maps: Vec<Option<&Vec<RowMapEntry>>> = pieces
            .iter()
            .map(|w| w.token_rows.as_ref().map(|t| &t.map))
            .collect();
        let Some(first) = maps.iter().flatten().next() else {
            return Ok(None);
        };
        let same_map = maps.iter().all(|m| m == &Some(*first));
        if !same_map {
            let mut seen: std::collections::HashMap<(&str, u64), usize> = Default::default();
            for (p, w) in pieces.iter().enumerate() {
                let Some(rows) = w.token_rows.as_deref() else {
                    continue;
                };
                for (entry, position) in rows.forward_rows() {
                    let Some(request) = rows.map[entry as usize].request.as_deref() else {
                        continue;
                    };
                    if let Some(&q) = seen.get(&(request, position)) {
                        if q != p {
                            return Err(format!(
                                "ranks {} and {} declare different row maps that both hold request {request:?} \
                                 position {position} ({} and {})",
                                pieces[q].rank,
                                w.rank,
                                pieces[q].source.display(),
                                w.source.display()
                            ));
                        }
                    }
                    seen.insert((request, position), p);
                }
            }
        }
        let (mut map, mut offsets) = (Vec::new(), Vec::with_capacity(pieces.len()));
        if same_map {
            map = (*first).clone();
            offsets.resize(pieces.len(), 0);
        } else {
            for m in &maps {
                offsets.push(map.len() as u32);
                map.extend(m.iter().flat_map(|m| m.iter().cloned()));
            }
        }
        Ok(Some(RowsBuilder {
            pieces,
            same_map,
            offsets,
            map,
            blocks: Vec::new(),
            values: Vec::new(),
        }))
    }

    /// The row block of the record `seq` of piece `p`, with its rows' values.
    fn block(&self, p: usize, seq: u64) -> Option<(&'w TokenRows, &'w RowBlock)> {
        let rows = self.pieces[p].token_rows.as_deref()?;
        let block = rows.records.iter().find(|b| b.seq == seq)?;
        let end = (block.first_row + block.rows) as usize * ROW_WIDTH;
        (end <= rows.values.len()).then_some((rows, block))
    }

    /// `(merged map entry, position)` of every row of `block` of piece `p`.
    fn positions(&self, p: usize, rows: &TokenRows, block: &RowBlock) -> Vec<(u32, u64)> {
        let listed = match &block.positions {
            Some(listed) => listed.clone(),
            None => rows
                .forward_rows()
                .into_iter()
                .take(block.rows as usize)
                .collect(),
        };
        let offset = self.offsets[p];
        listed.into_iter().map(|(e, q)| (e + offset, q)).collect()
    }

    /// Adds the rows of the merged record `seq` (merged from the records `seqs[p]` of each
    /// piece, `None` where a piece lacks it) as `how` says ([`RowMerge::Lowest`]: the rows of
    /// the lowest piece that holds it); the reason where they cannot be.
    pub(super) fn add(
        &mut self,
        seq: u64,
        seqs: &[Option<u64>],
        how: RowMerge,
    ) -> Result<(), String> {
        if how == RowMerge::Lowest {
            // The lowest piece that holds the record (a pipeline stage's own rank).
            let Some((p, (rows, block))) = seqs
                .iter()
                .enumerate()
                .find_map(|(p, s)| s.and_then(|s| Some((p, self.block(p, s)?))))
            else {
                return Ok(());
            };
            let positions = (!self.same_map).then(|| self.positions(p, rows, block));
            self.push(seq, block, positions, Self::values(rows, block).to_vec());
            return Ok(());
        }
        let found: Vec<Option<(&TokenRows, &RowBlock)>> = (0..self.pieces.len())
            .map(|p| seqs[p].and_then(|s| self.block(p, s)))
            .collect();
        if found.iter().all(Option::is_none) {
            return Ok(()); // no rank recorded rows for it: nothing lost here
        }
        let lacking: Vec<u32> = found
            .iter()
            .zip(&self.pieces)
            .filter(|(f, _)| f.is_none())
            .map(|(_, w)| w.rank)
            .collect();
        if !lacking.is_empty() {
            return Err(format!(
                "no token rows on rank{} {:?} (the others have them)",
                if lacking.len() == 1 { "" } else { "s" },
                lacking
            ));
        }
        let found: Vec<(&TokenRows, &RowBlock)> = found.into_iter().flatten().collect();
        let along_tokens = |dim: u32| (dim as usize) < found[0].1.token_dims.len();
        match how {
            RowMerge::Split { dim } if along_tokens(dim) => {
                let mut positions = Vec::new();
                let mut values = Vec::new();
                for (p, (rows, block)) in found.iter().enumerate() {
                    positions.extend(self.positions(p, rows, block));
                    values.extend_from_slice(Self::values(rows, block));
                }
                self.push(seq, found[0].1, Some(positions), values);
            }
            RowMerge::Split { .. } | RowMerge::Partial => {
                let partial = how == RowMerge::Partial;
                let (rows0, block0) = found[0];
                let positions0 = self.positions(0, rows0, block0);
                for (p, (rows, block)) in found.iter().enumerate().skip(1) {
                    if self.positions(p, rows, block) != positions0 {
                        return Err(format!(
                            "rank {} holds other rows ({} rows, or other positions) than rank {}",
                            self.pieces[p].rank, block.rows, self.pieces[0].rank
                        ));
                    }
                }
                let mut values = Self::values(rows0, block0).to_vec();
                for (rows, block) in &found[1..] {
                    for (row, other) in values
                        .chunks_exact_mut(ROW_WIDTH)
                        .zip(Self::values(rows, block).chunks_exact(ROW_WIDTH))
                    {
                        add_row(row, other);
                    }
                }
                if partial {
                    for row in values.chunks_exact_mut(ROW_WIDTH) {
                        // Not linear over a sum of pieces: unknown (docs/diff.md).
                        row[0] = f32::NAN;
                        row[1] = f32::NAN;
                        row[3] = f32::NAN;
                    }
                }
                let positions = (!self.same_map).then_some(positions0);
                self.push(seq, block0, positions, values);
            }
            RowMerge::Lowest => unreachable!("handled above"),
        }
        Ok(())
    }

    fn values<'a>(rows: &'a TokenRows, block: &RowBlock) -> &'a [f32] {
        let start = block.first_row as usize * ROW_WIDTH;
        &rows.values[start..start + block.rows as usize * ROW_WIDTH]
    }

    fn push(
        &mut self,
        seq: u64,
        like: &RowBlock,
        positions: Option<Vec<(u32, u64)>>,
        values: Vec<f32>,
    ) {
        let rows = (values.len() / ROW_WIDTH) as u64;
        self.blocks.push(RowBlock {
            seq,
            first_row: (self.values.len() / ROW_WIDTH) as u64,
            rows,
            token_dims: like.token_dims.clone(),
            positions,
        });
        self.values.extend(values);
    }

    /// The merged window's token rows.
    pub(super) fn finish(self) -> Arc<TokenRows> {
        let any = self.pieces.iter().find_map(|w| w.token_rows.as_deref());
        let template = any.expect("a builder has a piece with rows");
        let mut blocks = self.blocks;
        blocks.sort_by_key(|b| b.seq);
        Arc::new(TokenRows {
            file: template.file.clone(),
            stats: template.stats.clone(),
            map: self.map,
            positions_inferred: self
                .pieces
                .iter()
                .any(|w| w.token_rows.as_ref().is_some_and(|t| t.positions_inferred)),
            rows: (self.values.len() / ROW_WIDTH) as u64,
            records: blocks,
            values: self.values.into(),
            from_metadata: self
                .pieces
                .iter()
                .any(|w| w.token_rows.as_ref().is_some_and(|t| t.from_metadata)),
        })
    }
}

/// `row += other`, statistic by statistic: counts, sums and checksums add, `max_abs` is the
/// larger.
fn add_row(row: &mut [f32], other: &[f32]) {
    row[0] += other[0];
    row[1] = row[1].max(other[1]);
    row[2] += other[2];
    row[3] += other[3];
    row[4] += other[4];
}
