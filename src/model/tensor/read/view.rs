//! A strided view over storage bytes: torch's (shape, stride, storage_offset) layout.

use super::DType;

/// One tensor as saved: `shape` and `strides` in elements (torch convention, C order),
/// `storage_offset` in elements from the start of `storage`, the storage's raw
/// little-endian bytes (borrowed from a memory map, never copied).
///
/// Built only through [`TensorView::new`], which proves every element lies inside `storage`,
/// so reading any flat index below [`TensorView::numel`] is in bounds.
#[derive(Debug, Clone)]
pub struct TensorView<'a> {
    dtype: DType,
    shape: Vec<usize>,
    strides: Vec<usize>,
    storage_offset: usize,
    storage: &'a [u8],
    numel: usize,
}

impl<'a> TensorView<'a> {
    /// Checks the layout against the storage and builds the view.
    ///
    /// # Errors
    /// A message when `shape` and `strides` differ in rank, when the element count or the
    /// furthest element's byte position overflows, or when the furthest element
    /// (`storage_offset + Σ (shape[i]-1)·strides[i]`) ends beyond `storage`: "storage holds
    /// N bytes, the view needs M".
    pub fn new(
        dtype: DType,
        shape: Vec<usize>,
        strides: Vec<usize>,
        storage_offset: usize,
        storage: &'a [u8],
    ) -> Result<Self, String> {
        let needed = layout_bytes(dtype, &shape, &strides, storage_offset)?;
        if needed > storage.len() {
            return Err(format!(
                "storage holds {} bytes, the view (shape {shape:?}, stride {strides:?}, storage_offset {storage_offset}, {dtype}) needs {needed}",
                storage.len()
            ));
        }
        let numel = shape.iter().product();
        Ok(TensorView {
            dtype,
            shape,
            strides,
            storage_offset,
            storage,
            numel,
        })
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Logical shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// First element's index in the storage, in elements.
    pub fn storage_offset(&self) -> usize {
        self.storage_offset
    }

    /// The storage bytes the view reads from.
    pub fn storage(&self) -> &'a [u8] {
        self.storage
    }

    /// Number of elements (product of the shape; 1 for a 0-d tensor).
    pub fn numel(&self) -> usize {
        self.numel
    }

    /// Whether logical order is storage order (C-contiguous: size-1 dims ignored), so flat
    /// index i is element `storage_offset + i`.
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1usize;
        for (&size, &stride) in self.shape.iter().zip(&self.strides).rev() {
            if size != 1 && stride != expected {
                return false;
            }
            expected = expected.saturating_mul(size);
        }
        true
    }

    /// The logical coordinates of flat (C-order) index `flat`.
    pub fn coords(&self, mut flat: usize) -> Vec<usize> {
        let mut coords = vec![0; self.shape.len()];
        for (c, &size) in coords.iter_mut().zip(&self.shape).rev() {
            if size > 0 {
                *c = flat % size;
                flat /= size;
            }
        }
        coords
    }

    /// The storage element index of flat (C-order) index `flat`.
    pub fn storage_index(&self, flat: usize) -> usize {
        let mut flat = flat;
        let mut index = self.storage_offset;
        for (&size, &stride) in self.shape.iter().zip(&self.strides).rev() {
            if size > 0 {
                index += (flat % size) * stride;
                flat /= size;
            }
        }
        index
    }

    /// The value at flat index `flat` as `f64`. Panics if `flat >= numel()`.
    pub fn get(&self, flat: usize) -> f64 {
        assert!(flat < self.numel, "flat index {flat} beyond {}", self.numel);
        let at = self.storage_index(flat) * self.dtype.size();
        self.dtype.decode(&self.storage[at..])
    }
}

/// Bytes of storage a layout reaches: the end of its furthest element (0 for no elements).
///
/// # Errors
/// Rank mismatch between shape and strides, or arithmetic overflow (a huge claimed size).
pub fn layout_bytes(
    dtype: DType,
    shape: &[usize],
    strides: &[usize],
    storage_offset: usize,
) -> Result<usize, String> {
    if shape.len() != strides.len() {
        return Err(format!(
            "shape {shape:?} and stride {strides:?} differ in rank"
        ));
    }
    let overflow =
        || format!("shape {shape:?} with stride {strides:?} overflows the address space");
    let mut numel = 1usize;
    for &size in shape {
        numel = numel.checked_mul(size).ok_or_else(overflow)?;
    }
    if numel == 0 {
        return Ok(0);
    }
    let mut last = storage_offset;
    for (&size, &stride) in shape.iter().zip(strides) {
        let reach = (size - 1).checked_mul(stride).ok_or_else(overflow)?;
        last = last.checked_add(reach).ok_or_else(overflow)?;
    }
    last.checked_add(1)
        .and_then(|n| n.checked_mul(dtype.size()))
        .ok_or_else(overflow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposed_view_reads_storage_order() {
        let storage: Vec<u8> = (0..6).flat_map(|v| (v as f32).to_le_bytes()).collect();
        // A 3x2 transpose of a 2x3 row-major matrix [[0,1,2],[3,4,5]].
        let view = TensorView::new(DType::Float32, vec![3, 2], vec![1, 3], 0, &storage).unwrap();
        let values: Vec<f64> = (0..6).map(|i| view.get(i)).collect();
        assert_eq!(values, vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        assert!(!view.is_contiguous());
        assert_eq!(view.coords(3), vec![1, 1]);
    }

    #[test]
    fn short_storage_and_overflow_are_refused() {
        let storage = [0u8; 8];
        let err = TensorView::new(DType::Float32, vec![3], vec![1], 0, &storage).unwrap_err();
        assert!(err.contains("storage holds 8 bytes"), "{err}");
        let err = TensorView::new(DType::Float32, vec![usize::MAX, 2], vec![2, 1], 0, &storage)
            .unwrap_err();
        assert!(err.contains("overflows"), "{err}");
        assert!(TensorView::new(DType::Float32, vec![0, 5], vec![5, 1], 99, &storage).is_ok());
    }
}
