//! One msprobe leaf (a tensor dict, a scalar, a `null`) as a dumpview [`Record`].
//!
//! msprobe records per tensor `Max`, `Min`, `Mean` and `Norm` over all elements, in the
//! tensor's own dtype, with NaN propagating (a NaN anywhere makes all four NaN). It counts
//! no NaN or inf elements, so the counts are inferred from `Max`/`Min` and marked unknown
//! (`counts_known: false`): 1 means "at least one". Where `Max` and `Min` are both finite,
//! every element is finite, so `finite_count` is the element count (which the mean's
//! tolerance scale needs); otherwise it is unknown.

use super::value::{Leaf, Scalar, Stat};
use crate::model::dump::{Name, Record, Stats, dims, strides};

/// The directory, beside dump.json, that holds a tensor-mode dump's files.
pub const TENSOR_DIR: &str = "dump_tensor_data";

/// The record of one leaf; `leaf` is `None` for a `null`.
pub fn record(seq: u64, stage: Name, leaf: Option<&Leaf<'_>>) -> Record {
    let mut record = Record {
        seq,
        stage,
        occurrence: 1,
        dtype: Name::new("None"),
        shape: dims(&[]),
        stride: strides(&[]),
        is_contiguous: true,
        ..Record::default()
    };
    let Some(leaf) = leaf else {
        return record;
    };
    if let (Some(dtype), Some(shape)) = (leaf.dtype.as_deref(), &leaf.shape) {
        // A tensor (torch.Tensor, a DTensor, numpy.ndarray): statistics and layout.
        let dtype = dtype.strip_prefix("torch.").unwrap_or(dtype);
        record.dtype = Name::new(dtype);
        record.element_size = element_size(dtype);
        record.numel = shape.iter().product();
        record.stride = strides(&contiguous(shape));
        record.shape = shape.clone();
        record.stats = tensor_stats(&leaf.stats, record.numel);
        if let Some(data_name) = leaf.data_name.as_deref().filter(|d| !d.is_empty()) {
            record.tensor_file = Some(format!("{TENSOR_DIR}/{data_name}"));
        }
        return record;
    }
    record.dtype = Name::new(&leaf.kind);
    match &leaf.value {
        &Scalar::Number(v) => scalar(&mut record, v),
        &Scalar::Bool(b) => scalar(&mut record, f64::from(u8::from(b))),
        Scalar::Sizes(sizes) if leaf.kind == "torch.Size" => {
            // msprobe shows a size in its shape column, so a changed size is a shape change;
            // no elements beyond it (numel 0): equal sizes are equal values.
            record.stride = strides(&contiguous(sizes));
            record.shape = sizes.clone();
        }
        // Strings, slices, dtypes, devices, process groups: one value each, named, not
        // reduced to statistics, so not compared.
        _ => record.numel = 1,
    }
    record
}

/// A Python int, float or bool argument: one element whose statistics are its value.
fn scalar(record: &mut Record, v: f64) {
    record.numel = 1;
    record.element_size = element_size(&record.dtype);
    let finite = v.is_finite();
    record.stats = Some(Stats {
        nan_count: u64::from(v.is_nan()),
        inf_count: u64::from(v.is_infinite()),
        finite_count: Some(u64::from(finite)),
        max_abs: Some(v.abs()),
        min: Some(v),
        max: Some(v),
        mean: Some(v),
        l2: Some(v.abs()),
        pos_checksum: None,
        // One element: whether it is NaN or inf is known exactly.
        counts_known: true,
        reduced_in_dtype: false,
    });
}

/// torch's contiguous strides for `shape`, in elements.
fn contiguous(shape: &[u64]) -> Vec<i64> {
    let mut out = vec![0i64; shape.len()];
    let mut step: i64 = 1;
    for (i, &n) in shape.iter().enumerate().rev() {
        out[i] = step;
        step = step.saturating_mul(i64::try_from(n.max(1)).unwrap_or(i64::MAX));
    }
    out
}

/// Bytes per element of a dtype named as torch or numpy names it (0: unknown).
fn element_size(dtype: &str) -> u32 {
    match dtype {
        "float64" | "double" | "int64" | "long" | "uint64" | "complex64" | "cfloat" | "int"
        | "float" => 8,
        "float32" | "int32" | "uint32" => 4,
        "float16" | "half" | "bfloat16" | "int16" | "uint16" => 2,
        "int8" | "uint8" | "bool" => 1,
        "complex128" | "cdouble" => 16,
        d if d.starts_with("float8") => 1,
        _ => 0,
    }
}

/// A statistic as a number: bools (a bool tensor's `any()`/`all()`) are 1 and 0.
fn value(stat: Stat) -> Option<f64> {
    match stat {
        Stat::Number(v) => Some(v),
        Stat::Bool(b) => Some(f64::from(u8::from(b))),
        Stat::Absent | Stat::Null => None,
    }
}

/// The statistics of a tensor; `None` when it has none of the four (xor mode).
fn tensor_stats(stats: &[Stat; 4], numel: u64) -> Option<Stats> {
    if stats.iter().all(|s| *s == Stat::Absent) {
        return None;
    }
    let [max, min, mean, l2] = stats.map(value);
    let ends = [max, min];
    let nan = ends.iter().any(|v| v.is_some_and(f64::is_nan));
    let inf = ends.iter().any(|v| v.is_some_and(f64::is_infinite));
    let max_abs = match (max, min) {
        (Some(a), Some(b)) if a.is_nan() || b.is_nan() => Some(f64::NAN),
        (Some(a), Some(b)) => Some(a.abs().max(b.abs())),
        _ => None,
    };
    let finite = max.is_some_and(f64::is_finite) && min.is_some_and(f64::is_finite);
    // msprobe writes a one-element tensor's value as its Norm (a 0-d `mean` of -0.02 has Norm
    // -0.02): the norm of one element is its magnitude.
    let l2 = if numel == 1 { l2.map(f64::abs) } else { l2 };
    Some(Stats {
        nan_count: u64::from(nan),
        inf_count: u64::from(inf),
        finite_count: finite.then_some(numel),
        max_abs,
        min,
        max,
        mean,
        l2,
        pos_checksum: None,
        counts_known: false,
        // msprobe computes Mean and Norm in the tensor's dtype (float16 sums overflow at 65504).
        reduced_in_dtype: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::formats::msprobe::json::parse;
    use crate::model::formats::msprobe::value::Value;

    fn read(json: &str) -> Record {
        let Value::Leaf(leaf) = parse(json.as_bytes()).unwrap() else {
            panic!("not a leaf: {json}")
        };
        record(7, Name::new("x"), Some(&leaf))
    }

    #[test]
    fn a_tensor_gets_its_layout_and_statistics() {
        let r = read(
            r#"{"type":"torch.Tensor","dtype":"torch.bfloat16","shape":[2,0,3],"Max":2.5,
                "Min":-3.0,"Mean":0.5,"Norm":4.0,"requires_grad":true,"data_name":"a.pt"}"#,
        );
        assert_eq!((&*r.dtype, r.element_size, r.numel), ("bfloat16", 2, 0));
        assert_eq!((&*r.shape, &*r.stride), (&[2, 0, 3][..], &[3, 3, 1][..]));
        assert_eq!(r.tensor_file.as_deref(), Some("dump_tensor_data/a.pt"));
        let s = r.stats.unwrap();
        assert_eq!(
            (s.max, s.min, s.mean, s.l2),
            (Some(2.5), Some(-3.0), Some(0.5), Some(4.0))
        );
        assert_eq!(
            (s.max_abs, s.finite_count, s.counts_known),
            (Some(3.0), Some(0), false)
        );
        assert_eq!((s.nan_count, s.inf_count), (0, 0));
    }

    #[test]
    fn non_finite_bool_and_null_statistics() {
        let s = read(r#"{"type":"torch.Tensor","dtype":"torch.float16","shape":[4],"Max":NaN,"Min":NaN,"Mean":NaN,"Norm":NaN}"#)
            .stats
            .unwrap();
        assert_eq!((s.nan_count, s.inf_count, s.finite_count), (1, 0, None));
        assert!(s.max_abs.unwrap().is_nan());
        let s = read(r#"{"type":"torch.Tensor","dtype":"torch.float32","shape":[4],"Max":Infinity,"Min":-1.0,"Mean":Infinity,"Norm":Infinity}"#)
            .stats
            .unwrap();
        assert_eq!(
            (s.nan_count, s.inf_count, s.max_abs),
            (0, 1, Some(f64::INFINITY))
        );
        let r = read(
            r#"{"type":"torch.Tensor","dtype":"torch.bool","shape":[1,4096],"Max":true,"Min":false,"Mean":null,"Norm":null}"#,
        );
        let s = r.stats.unwrap();
        assert_eq!(
            (s.max, s.min, s.mean, s.l2),
            (Some(1.0), Some(0.0), None, None)
        );
        assert_eq!(
            (r.element_size, r.numel, s.finite_count),
            (1, 4096, Some(4096))
        );
        let s = read(r#"{"type":"torch.Tensor","dtype":"torch.float32","shape":[0,3],"Max":null,"Min":null,"Mean":null,"Norm":null}"#)
            .stats
            .unwrap();
        assert_eq!(
            (s.max, s.max_abs, s.finite_count, s.nan_count),
            (None, None, None, 0)
        );
        let xor = read(
            r#"{"type":"torch.Tensor","dtype":"torch.float32","shape":[3],"md5":"0x83e26ba980962582"}"#,
        );
        assert_eq!(xor.stats, None);
    }

    #[test]
    fn scalars_and_other_values() {
        let r = read(r#"{"type":"float","value":-Infinity}"#);
        let s = r.stats.unwrap();
        assert_eq!((&*r.dtype, r.numel, r.shape.len()), ("float", 1, 0));
        assert_eq!(
            (s.inf_count, s.finite_count, s.counts_known),
            (1, Some(0), true)
        );
        assert_eq!(
            (s.l2, s.min),
            (Some(f64::INFINITY), Some(f64::NEG_INFINITY))
        );
        let r = read(r#"{"type":"bool","value":true}"#);
        assert_eq!((r.stats.unwrap().max, r.element_size), (Some(1.0), 1));
        let r = read(r#"{"type":"torch.Size","value":[2,3]}"#);
        assert_eq!(
            (&*r.dtype, &*r.shape, r.stats),
            ("torch.Size", &[2, 3][..], None)
        );
        let r = read(r#"{"type":"str","value":"mean"}"#);
        assert_eq!((&*r.dtype, r.numel, r.stats), ("str", 1, None));
        let r = record(0, Name::new("x"), None);
        assert_eq!((&*r.dtype, r.numel, r.stats), ("None", 0, None));
    }
}
