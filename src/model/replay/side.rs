//! One side's output tensors, wherever they come from: a `.pt` (or safetensors) file that
//! `replay_op.py` wrote, or tensors computed in this process ([`ComputedTensor`]: feature
//! `torch`'s in-process built-in references). The judge reads both the same way
//! ([`SideTensors::keys`], [`SideTensors::view`]).

use std::path::PathBuf;

use crate::model::tensor::{DType, TensorFile, TensorView};

/// One tensor computed in memory: its dtype, shape and values, contiguous in C order.
#[derive(Debug, Clone, PartialEq)]
pub struct ComputedTensor {
    /// Element type.
    pub dtype: DType,
    /// Logical shape, in elements per dimension (empty for a 0-d tensor).
    pub shape: Vec<usize>,
    /// The elements, little-endian, contiguous: `numel() * dtype.size()` bytes.
    pub bytes: Vec<u8>,
}

impl ComputedTensor {
    /// Number of elements (1 for a 0-d tensor).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// A contiguous view over the bytes, for the comparison kernels
    /// (`model::tensor::metrics`).
    ///
    /// # Panics
    /// When `bytes` does not hold `numel()` elements of `dtype` (whoever built the tensor
    /// broke its invariant).
    pub fn view(&self) -> TensorView<'_> {
        let mut strides = vec![1; self.shape.len()];
        for i in (0..self.shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * self.shape[i + 1];
        }
        TensorView::new(self.dtype, self.shape.clone(), strides, 0, &self.bytes)
            .expect("a ComputedTensor holds numel() elements of its dtype")
    }

    /// The values in C order as `f64` (exact except int64 beyond 2^53).
    pub fn values(&self) -> Vec<f64> {
        self.bytes
            .chunks_exact(self.dtype.size())
            .map(|b| self.dtype.decode(b))
            .collect()
    }
}

/// The output tensors of one side of a replay, by output name (`out`, `out.0`, …).
#[derive(Debug)]
pub enum SideTensors {
    /// Read from the file the side wrote (`candidate.pt`, …; `reference.safetensors` when
    /// dumpview saved an in-process side).
    File(TensorFile),
    /// Computed in this process.
    Memory {
        /// The outputs, in output order.
        tensors: Vec<(String, ComputedTensor)>,
        /// Where a copy was saved, when it was.
        saved: Option<PathBuf>,
    },
}

impl SideTensors {
    /// The output names: in the order the side produced them, or a file's own order (a
    /// safetensors file lays its tensors out by alignment); the judge sorts them.
    pub fn keys(&self) -> Vec<String> {
        match self {
            SideTensors::File(file) => file.entries.iter().map(|e| e.key.clone()).collect(),
            SideTensors::Memory { tensors, .. } => tensors.iter().map(|(n, _)| n.clone()).collect(),
        }
    }

    /// The output named `name`, or `None` when the side has no such output.
    pub fn view(&self, name: &str) -> Option<TensorView<'_>> {
        match self {
            SideTensors::File(file) => file.get(name).map(|e| file.view(e)),
            SideTensors::Memory { tensors, .. } => tensors
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t.view()),
        }
    }

    /// The file the tensors are in (read from, or saved to), for the report's evidence.
    pub fn path(&self) -> Option<String> {
        match self {
            SideTensors::File(file) => Some(file.path.display().to_string()),
            SideTensors::Memory { saved, .. } => saved.as_ref().map(|p| p.display().to_string()),
        }
    }
}

/// The safetensors file of `tensors` (keys the output names; a format dumpview's tensor
/// readers read back, `dumpview tensors` included), as bytes.
///
/// # Errors
/// The safetensors crate's message (a tensor whose bytes do not match its shape and dtype).
pub fn safetensors_bytes(tensors: &[(String, ComputedTensor)]) -> Result<Vec<u8>, String> {
    use ::safetensors::tensor::TensorView as StView;
    use ::safetensors::{Dtype, serialize};
    let dtype = |d: DType| match d {
        DType::Float64 => Dtype::F64,
        DType::Float32 => Dtype::F32,
        DType::Float16 => Dtype::F16,
        DType::BFloat16 => Dtype::BF16,
        DType::Float8E4M3Fn => Dtype::F8_E4M3,
        DType::Float8E5M2 => Dtype::F8_E5M2,
        DType::Int64 => Dtype::I64,
        DType::Int32 => Dtype::I32,
        DType::Int16 => Dtype::I16,
        DType::Int8 => Dtype::I8,
        DType::Uint8 => Dtype::U8,
        DType::Bool => Dtype::BOOL,
    };
    let views = tensors
        .iter()
        .map(|(name, t)| {
            StView::new(dtype(t.dtype), t.shape.clone(), &t.bytes)
                .map(|v| (name.as_str(), v))
                .map_err(|e| format!("output {name}: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    serialize(views, None).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_outputs_read_back_as_they_were_computed() {
        let f16: Vec<u8> = [1.0f32, -2.5, 0.125]
            .iter()
            .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
            .collect();
        let tensors = vec![
            (
                "out.0".to_string(),
                ComputedTensor {
                    dtype: DType::Float16,
                    shape: vec![3],
                    bytes: f16,
                },
            ),
            (
                "out.1".to_string(),
                ComputedTensor {
                    dtype: DType::Float64,
                    shape: vec![2, 1],
                    bytes: [3.0f64, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect(),
                },
            ),
        ];
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("reference.safetensors");
        std::fs::write(&path, safetensors_bytes(&tensors).unwrap()).unwrap();
        let file = SideTensors::File(TensorFile::open(&path).unwrap());
        let memory = SideTensors::Memory {
            tensors,
            saved: Some(path.clone()),
        };
        for side in [&file, &memory] {
            // safetensors lays the tensors out by alignment: the order is the file's.
            let mut keys = side.keys();
            keys.sort();
            assert_eq!(keys, ["out.0", "out.1"]);
            let v = side.view("out.0").unwrap();
            assert_eq!((v.dtype(), v.shape()), (DType::Float16, &[3][..]));
            assert_eq!(
                (0..3).map(|i| v.get(i)).collect::<Vec<_>>(),
                [1.0, -2.5, 0.125]
            );
            let v = side.view("out.1").unwrap();
            assert_eq!(v.shape(), &[2, 1]);
            assert_eq!(v.get(1), 4.0);
            assert!(side.view("out").is_none());
            assert_eq!(side.path(), Some(path.display().to_string()));
        }
    }
}
