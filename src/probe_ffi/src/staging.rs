//! The staging arena: page-locked host chunks that captures copy into, and the window's budget.
//!
//! Pinned allocations are slow (`cudaMallocHost` and `aclrtMallocHost` map and lock pages, and
//! may synchronize the device), so the arena allocates a chunk only when the ones it holds are
//! full, keeps its chunks from one window to the next, and frees them at `dp_close`. A slot never
//! moves once given, so staged bytes stay where the asynchronous copy writes them.

use crate::backend::{Runtime, STAGING_ALIGN};

/// The smallest chunk allocated (larger captures get a chunk of their own size).
pub const CHUNK_BYTES: usize = 16 << 20;

struct Chunk {
    ptr: *mut u8,
    capacity: usize,
    used: usize,
}

/// Staging for one session.
pub struct Staging {
    chunks: Vec<Chunk>,
    /// Bytes a window may stage.
    budget: u64,
    /// Bytes staged in the open window.
    staged: u64,
}

// SAFETY: the chunks are plain host memory owned by the arena; the session's mutex serializes use.
unsafe impl Send for Staging {}

/// Why [`Staging::reserve`] gave no slot.
#[derive(Debug, PartialEq, Eq)]
pub enum NoSlot {
    /// The slot would take the window beyond its budget; `left` bytes remain.
    OverBudget {
        /// Bytes of the budget still free.
        left: u64,
    },
    /// The runtime could not allocate a chunk.
    Alloc(String),
}

impl Staging {
    /// An empty arena with `budget` bytes per window.
    pub fn new(budget: u64) -> Staging {
        Staging {
            chunks: Vec::new(),
            budget,
            staged: 0,
        }
    }

    /// Bytes a window may stage.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Bytes staged in the open window.
    pub fn staged(&self) -> u64 {
        self.staged
    }

    /// Bytes of pinned memory held (the high-water mark of the windows so far).
    pub fn held(&self) -> usize {
        self.chunks.iter().map(|c| c.capacity).sum()
    }

    /// A slot of `bytes`, 64-byte aligned, counted against the budget.
    ///
    /// # Errors
    /// [`NoSlot::OverBudget`] (nothing allocated, nothing counted), or [`NoSlot::Alloc`].
    pub fn reserve(&mut self, runtime: &dyn Runtime, bytes: u64) -> Result<*mut u8, NoSlot> {
        if bytes > self.budget - self.staged {
            return Err(NoSlot::OverBudget {
                left: self.budget - self.staged,
            });
        }
        let want = usize::try_from(bytes)
            .map_err(|_| NoSlot::Alloc(format!("{bytes} bytes do not fit this address space")))?;
        let padded = want.div_ceil(STAGING_ALIGN) * STAGING_ALIGN;
        let slot = match self
            .chunks
            .iter_mut()
            .find(|c| c.capacity - c.used >= padded)
        {
            Some(chunk) => {
                // SAFETY: used + padded <= capacity.
                let ptr = unsafe { chunk.ptr.add(chunk.used) };
                chunk.used += padded;
                ptr
            }
            None => {
                let capacity = padded.max(CHUNK_BYTES.min(self.budget as usize).max(padded));
                let ptr = runtime.alloc_staging(capacity).map_err(NoSlot::Alloc)?;
                self.chunks.push(Chunk {
                    ptr,
                    capacity,
                    used: padded,
                });
                ptr
            }
        };
        self.staged += bytes;
        Ok(slot)
    }

    /// Empties every chunk for the next window (the memory is kept).
    pub fn reset(&mut self) {
        for chunk in &mut self.chunks {
            chunk.used = 0;
        }
        self.staged = 0;
    }

    /// Frees every chunk through `runtime`; returns the errors it reported.
    pub fn free_all(&mut self, runtime: &dyn Runtime) -> Vec<String> {
        let errors = self
            .chunks
            .drain(..)
            .filter_map(|c| runtime.free_staging(c.ptr, c.capacity))
            .collect();
        self.staged = 0;
        errors
    }
}
