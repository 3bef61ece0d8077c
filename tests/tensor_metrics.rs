//! Tensor comparison metrics against a direct reference implementation and hand-computed
//! values: the lane-parallel contiguous path, the strided path and every dtype reader must
//! agree with the definitions in docs/tensors.md.

use dumpview::model::tensor::metrics::{
    CompareError, CompareProgress as Progress, Metrics, Options, compare,
};
use dumpview::model::tensor::{DType, TensorView};
use proptest::prelude::*;

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn view<'a>(bytes: &'a [u8], dtype: DType, shape: &[usize]) -> TensorView<'a> {
    let mut strides = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * shape[i + 1];
    }
    TensorView::new(dtype, shape.to_vec(), strides, 0, bytes).unwrap()
}

fn run(a: &TensorView, b: &TensorView, options: &Options) -> Metrics {
    compare(a, b, options, &Progress::default()).unwrap()
}

/// The definitions, written as plainly as possible: one loop, no lanes, no chunks.
struct Reference {
    finite: u64,
    max_abs: f64,
    max_at: Option<usize>,
    sum_abs: f64,
    dot: f64,
    na: f64,
    nb: f64,
    nd: f64,
    mismatches: u64,
    first_mismatch: Option<usize>,
    agree: bool,
    max_ulp: u64,
    max_ulp_at: Option<usize>,
    zero: u64,
}

fn ordinal32(v: f32) -> i64 {
    let bits = v.to_bits();
    let magnitude = i64::from(bits & 0x7fff_ffff);
    if bits >> 31 == 1 {
        -magnitude
    } else {
        magnitude
    }
}

fn reference(a: &[f32], b: &[f32], atol: f64, rtol: f64, equal_nan: bool) -> Reference {
    let mut r = Reference {
        finite: 0,
        max_abs: -1.0,
        max_at: None,
        sum_abs: 0.0,
        dot: 0.0,
        na: 0.0,
        nb: 0.0,
        nd: 0.0,
        mismatches: 0,
        first_mismatch: None,
        agree: true,
        max_ulp: 0,
        max_ulp_at: None,
        zero: 0,
    };
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        let (x64, y64) = (f64::from(x), f64::from(y));
        let close;
        if x.is_finite() && y.is_finite() {
            let d = (x64 - y64).abs();
            r.finite += 1;
            r.sum_abs += d;
            r.dot += x64 * y64;
            r.na += x64 * x64;
            r.nb += y64 * y64;
            r.nd += d * d;
            if d > r.max_abs {
                r.max_abs = d;
                r.max_at = Some(i);
            }
            if d == 0.0 {
                r.zero += 1;
            }
            close = d <= atol + rtol * y64.abs();
        } else {
            close = x64 == y64 || (equal_nan && x.is_nan() && y.is_nan());
        }
        let class = |v: f32| (v.is_nan(), v == f32::INFINITY, v == f32::NEG_INFINITY);
        if class(x) != class(y) {
            r.agree = false;
        }
        if !close {
            r.mismatches += 1;
            r.first_mismatch.get_or_insert(i);
        }
        if !x.is_nan() && !y.is_nan() {
            let ulp = ordinal32(x).abs_diff(ordinal32(y));
            if ulp > r.max_ulp || r.max_ulp_at.is_none() {
                r.max_ulp = ulp;
                r.max_ulp_at = Some(i);
            }
        }
    }
    r
}

fn close(x: f64, y: f64) -> bool {
    (x - y).abs() <= 1e-12 * x.abs().max(y.abs()) + 1e-300
}

fn check_against_reference(m: &Metrics, r: &Reference) {
    assert_eq!(m.finite_pairs, r.finite);
    assert_eq!(m.mismatches, r.mismatches);
    assert_eq!(
        m.first_mismatch.as_ref().map(|l| l.index as usize),
        r.first_mismatch
    );
    assert_eq!(
        m.max_abs_diff_at.as_ref().map(|l| l.index as usize),
        r.max_at
    );
    if r.finite > 0 {
        assert_eq!(m.max_abs_diff, Some(r.max_abs));
        assert!(close(m.mean_abs_diff.unwrap(), r.sum_abs / r.finite as f64));
    }
    if r.na > 0.0 && r.nb > 0.0 {
        assert!(close(
            m.cosine.unwrap(),
            r.dot / (r.na.sqrt() * r.nb.sqrt())
        ));
    }
    if r.nb > 0.0 {
        assert!(close(m.rel_l2.unwrap(), r.nd.sqrt() / r.nb.sqrt()));
    }
    assert_eq!(m.nonfinite.positions_agree, r.agree);
    assert_eq!(m.max_ulp, Some(r.max_ulp));
    assert_eq!(
        m.max_ulp_at.as_ref().map(|l| l.index as usize),
        r.max_ulp_at
    );
    assert_eq!(m.histogram.zero, r.zero);
    let bars: u64 = m.histogram.decades.iter().map(|d| d.count).sum();
    assert_eq!(bars + m.histogram.zero, r.finite);
    assert_eq!(m.histogram.nonfinite, a_len(m) - r.finite);
}

fn a_len(m: &Metrics) -> u64 {
    m.numel
}

#[test]
fn hand_computed_pair() {
    // a = [1, 2, 3, 4], b = [1, 2.5, 3, -4]: |a-b| = [0, 0.5, 0, 8].
    let a = f32_bytes(&[1.0, 2.0, 3.0, 4.0]);
    let b = f32_bytes(&[1.0, 2.5, 3.0, -4.0]);
    let m = run(
        &view(&a, DType::Float32, &[2, 2]),
        &view(&b, DType::Float32, &[2, 2]),
        &Options {
            atol: 0.1,
            rtol: 0.0,
            ..Options::default()
        },
    );
    assert_eq!(m.max_abs_diff, Some(8.0));
    let at = m.max_abs_diff_at.unwrap();
    assert_eq!(
        (at.index, at.coords.clone(), at.a, at.b),
        (3, vec![1, 1], 4.0, -4.0)
    );
    assert_eq!(m.mean_abs_diff, Some(8.5 / 4.0));
    // a·b = 1 + 5 + 9 - 16 = -1; |a|² = 30; |b|² = 1 + 6.25 + 9 + 16 = 32.25.
    assert!((m.cosine.unwrap() - (-1.0 / (30f64.sqrt() * 32.25f64.sqrt()))).abs() < 1e-15);
    assert!((m.rel_l2.unwrap() - (64.25f64.sqrt() / 32.25f64.sqrt())).abs() < 1e-15);
    assert!(!m.allclose);
    assert_eq!(m.mismatches, 2);
    assert_eq!(m.mismatch_fraction, 0.5);
    let first = m.first_mismatch.unwrap();
    assert_eq!(
        (first.index, first.coords, first.a, first.b),
        (1, vec![0, 1], 2.0, 2.5)
    );
    assert_eq!(m.histogram.zero, 2);
    let decades: Vec<(i32, u64)> = m
        .histogram
        .decades
        .iter()
        .map(|d| (d.decade, d.count))
        .collect();
    assert_eq!(decades, vec![(-1, 1), (0, 1)]);
    // 4 and -4 are 2 * ordinal(4.0) apart.
    assert_eq!(m.max_ulp, Some(2 * u64::from(4.0f32.to_bits())));
}

#[test]
fn nonfinite_positions_and_equal_nan() {
    let a = f32_bytes(&[f32::NAN, 1.0, f32::INFINITY, 2.0]);
    let b = f32_bytes(&[f32::NAN, 1.0, f32::INFINITY, f32::NEG_INFINITY]);
    let (va, vb) = (
        view(&a, DType::Float32, &[4]),
        view(&b, DType::Float32, &[4]),
    );
    let strict = run(&va, &vb, &Options::default());
    // NaN vs NaN is a mismatch unless equal_nan; inf == inf is close; 2 vs -inf is not.
    assert_eq!(strict.mismatches, 2);
    assert_eq!(strict.first_mismatch.unwrap().index, 0);
    assert!(!strict.nonfinite.positions_agree);
    assert_eq!(
        strict.nonfinite.first_disagreement.as_ref().unwrap().index,
        3
    );
    assert_eq!((strict.nonfinite.nan_a, strict.nonfinite.nan_b), (1, 1));
    assert_eq!(
        (strict.nonfinite.posinf_a, strict.nonfinite.neginf_b),
        (1, 1)
    );
    assert_eq!(strict.finite_pairs, 1);
    assert_eq!(strict.histogram.nonfinite, 3);
    let lenient = run(
        &va,
        &vb,
        &Options {
            equal_nan: true,
            ..Options::default()
        },
    );
    assert_eq!(lenient.mismatches, 1);
    assert_eq!(lenient.first_mismatch.as_ref().unwrap().index, 3);
    let json = serde_json::to_value(&lenient).unwrap();
    assert_eq!(json["first_mismatch"]["b"], "-inf");
}

#[test]
fn shape_mismatch_is_an_error_and_precision_changes_compare_losslessly() {
    let a = f32_bytes(&[1.0, 2.0, 3.0]);
    let b: Vec<u8> = [1.0f32, 2.0, 3.0]
        .iter()
        .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
        .collect();
    let va = view(&a, DType::Float32, &[3]);
    let vb = view(&b, DType::BFloat16, &[3]);
    // A precision-change pair is compared as it is (float64), its ULPs counted in bfloat16.
    let lossless = run(&va, &vb, &Options::default());
    assert_eq!(lossless.compared_as, DType::Float64);
    assert_eq!(lossless.ulp_dtype, Some(DType::BFloat16));
    assert_eq!(lossless.max_ulp, Some(0));
    // Only int64, not exact in float64, still needs a cast.
    let ints: Vec<u8> = [1i64, 2, 3].iter().flat_map(|v| v.to_le_bytes()).collect();
    let vi = view(&ints, DType::Int64, &[3]);
    let err = compare(&va, &vi, &Options::default(), &Progress::default()).unwrap_err();
    assert_eq!(
        err,
        CompareError::DType {
            a: DType::Float32,
            b: DType::Int64
        }
    );
    assert!(err.to_string().contains("--cast"));
    let short = view(&a[..8], DType::Float32, &[2]);
    assert!(matches!(
        compare(&short, &va, &Options::default(), &Progress::default()),
        Err(CompareError::Shape { .. })
    ));
    let cast = run(
        &va,
        &vb,
        &Options {
            cast: Some(DType::Float32),
            ..Options::default()
        },
    );
    assert!(cast.allclose);
    assert_eq!(cast.compared_as, DType::Float32);
    assert_eq!(cast.max_ulp, Some(0));
}

#[test]
fn cancel_stops_before_reading() {
    let a = f32_bytes(&vec![1.0; 3 << 20]);
    let va = view(&a, DType::Float32, &[3 << 20]);
    let progress = Progress::default();
    progress
        .cancel
        .store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        compare(&va, &va, &Options::default(), &progress).unwrap_err(),
        CompareError::Cancelled
    );
    let progress = Progress::default();
    run(&va, &va, &Options::default());
    compare(&va, &va, &Options::default(), &progress).unwrap();
    assert_eq!(
        progress.done.load(std::sync::atomic::Ordering::Relaxed),
        3 << 20
    );
}

#[test]
fn integer_and_fp8_dtypes() {
    let a: Vec<u8> = [5i32, -7, 100]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let b: Vec<u8> = [5i32, -8, 100]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let m = run(
        &view(&a, DType::Int32, &[3]),
        &view(&b, DType::Int32, &[3]),
        &Options::default(),
    );
    assert_eq!(m.max_abs_diff, Some(1.0));
    assert_eq!(m.max_ulp, None);
    assert_eq!(m.mismatches, 1);
    // e4m3fn 0x38 = 1.0, 0x39 = 1.125: one ULP apart.
    let (fa, fb) = ([0x38u8, 0x40], [0x39u8, 0x40]);
    let m = run(
        &view(&fa, DType::Float8E4M3Fn, &[2]),
        &view(&fb, DType::Float8E4M3Fn, &[2]),
        &Options::default(),
    );
    assert_eq!(m.max_abs_diff, Some(0.125));
    assert_eq!(m.max_ulp, Some(1));
}

fn values() -> impl Strategy<Value = f32> {
    prop_oneof![
        20 => -4.0f32..4.0,
        1 => Just(f32::NAN),
        1 => Just(f32::INFINITY),
        1 => Just(f32::NEG_INFINITY),
        2 => Just(0.0f32),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Contiguous (lane path), transposed (strided path) and the reference agree.
    #[test]
    fn paths_agree_with_reference(
        rows in 1usize..40,
        cols in 1usize..40,
        seed_a in proptest::collection::vec(values(), 1600),
        noise in proptest::collection::vec(prop_oneof![4 => Just(0.0f32), 4 => -1e-3f32..1e-3, 1 => -1.0f32..1.0], 1600),
        nan_flip in proptest::collection::vec(0u8..40, 1600),
        equal_nan in any::<bool>(),
    ) {
        let n = rows * cols;
        let a: Vec<f32> = seed_a[..n].to_vec();
        let b: Vec<f32> = (0..n)
            .map(|i| if nan_flip[i] == 0 { f32::NAN } else { a[i] + noise[i] })
            .collect();
        let (ba, bb) = (f32_bytes(&a), f32_bytes(&b));
        let options = Options { atol: 1e-4, rtol: 1e-3, equal_nan, ..Options::default() };
        let expected = reference(&a, &b, 1e-4, 1e-3, equal_nan);
        let contiguous = run(&view(&ba, DType::Float32, &[rows, cols]), &view(&bb, DType::Float32, &[rows, cols]), &options);
        check_against_reference(&contiguous, &expected);

        // The same logical values through a transposed layout: storage holds the transpose.
        let transpose = |v: &[f32]| -> Vec<f32> {
            let mut t = vec![0.0; n];
            for r in 0..rows { for c in 0..cols { t[c * rows + r] = v[r * cols + c]; } }
            t
        };
        let (ta, tb) = (f32_bytes(&transpose(&a)), f32_bytes(&transpose(&b)));
        let strided_a = TensorView::new(DType::Float32, vec![rows, cols], vec![1, rows], 0, &ta).unwrap();
        let strided_b = TensorView::new(DType::Float32, vec![rows, cols], vec![1, rows], 0, &tb).unwrap();
        let strided = run(&strided_a, &strided_b, &options);
        check_against_reference(&strided, &expected);
        prop_assert_eq!(&strided.histogram, &contiguous.histogram);
        let at = |m: &Metrics| m.first_mismatch.as_ref().map(|l| (l.index, l.coords.clone()));
        prop_assert_eq!(at(&strided), at(&contiguous));
    }
}

/// Several chunks (1 Mi elements each) and lane groups combine to the reference's answers.
#[test]
fn many_chunks_combine_in_order() {
    let n = (5 << 20) / 2 + 3;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let a: Vec<f32> = (0..n).map(|_| next()).collect();
    let mut b: Vec<f32> = a.iter().map(|v| v + 1e-6 * next()).collect();
    b[1_500_001] = f32::NAN;
    b[2_200_000] += 0.25; // the largest difference, in the third chunk
    b[2_200_007] += 0.25; // ties go to the first
    let (ba, bb) = (f32_bytes(&a), f32_bytes(&b));
    let options = Options {
        atol: 1e-5,
        rtol: 1e-4,
        ..Options::default()
    };
    let m = run(
        &view(&ba, DType::Float32, &[n]),
        &view(&bb, DType::Float32, &[n]),
        &options,
    );
    let r = reference(&a, &b, 1e-5, 1e-4, false);
    check_against_reference(&m, &r);
    assert_eq!(
        m.first_mismatch.as_ref().unwrap().index,
        r.first_mismatch.unwrap() as u64
    );
    assert!(m.max_abs_diff_at.as_ref().unwrap().index >= 2_200_000);
    assert_eq!(
        m.nonfinite.first_disagreement.as_ref().unwrap().index,
        1_500_001
    );
}

#[test]
fn int64_beyond_2_pow_53_compares_exactly() {
    let a: Vec<u8> = [(1i64 << 62) + 1, (1 << 53) + 1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let b: Vec<u8> = [1i64 << 62, 1 << 53]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let exact = Options {
        atol: 0.0,
        rtol: 0.0,
        ..Options::default()
    };
    let m = run(
        &view(&a, DType::Int64, &[2]),
        &view(&b, DType::Int64, &[2]),
        &exact,
    );
    assert_eq!(m.mismatches, 2);
    assert_eq!(m.max_abs_diff, Some(1.0));
    assert_eq!(m.first_mismatch.unwrap().index, 0);
}

#[test]
fn nothing_to_count_in_ulps_is_none_not_zero() {
    let a = f32_bytes(&[f32::NAN, 1.0]);
    let b = f32_bytes(&[1.0, f32::NAN]);
    let m = run(
        &view(&a, DType::Float32, &[2]),
        &view(&b, DType::Float32, &[2]),
        &Options::default(),
    );
    assert_eq!(m.max_ulp, None);
    assert_eq!(m.max_ulp_at, None);
}

#[test]
fn overflowing_float64_differences_land_in_the_top_decade() {
    let a: Vec<u8> = [1e308f64, -1e308]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let b: Vec<u8> = [-1e308f64, 1e308]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let m = run(
        &view(&a, DType::Float64, &[2]),
        &view(&b, DType::Float64, &[2]),
        &Options::default(),
    );
    let decades: Vec<(i32, u64)> = m
        .histogram
        .decades
        .iter()
        .map(|d| (d.decade, d.count))
        .collect();
    assert_eq!(decades, vec![(308, 2)]);
    assert_eq!(m.max_abs_diff, Some(f64::INFINITY));
    assert_eq!(m.rel_l2, None);
}

#[test]
fn element_budget_refuses_huge_expanded_views() {
    let one = f32_bytes(&[1.0]);
    // A stride-0 expansion of one element to 2^20 x 2^20.
    let huge =
        TensorView::new(DType::Float32, vec![1 << 20, 1 << 20], vec![0, 0], 0, &one).unwrap();
    let err = compare(&huge, &huge, &Options::default(), &Progress::default()).unwrap_err();
    assert_eq!(
        err,
        CompareError::TooLarge {
            numel: 1 << 40,
            max: 1 << 32
        }
    );
    assert!(err.to_string().contains("--max-elements"));
}

#[test]
fn ulps_counted_in_the_coarser_dtype_of_a_precision_change() {
    let a = f32_bytes(&[1.0 + 1.0 / 256.0, 2.0]);
    let b: Vec<u8> = [1.0f32, 2.0]
        .iter()
        .flat_map(|v| half::bf16::from_f32(*v).to_le_bytes())
        .collect();
    let options = Options {
        cast: Some(DType::Float64),
        ulp_in: Some(DType::BFloat16),
        ..Options::default()
    };
    let m = run(
        &view(&a, DType::Float32, &[2]),
        &view(&b, DType::BFloat16, &[2]),
        &options,
    );
    // 1 + 2^-8 rounds (ties to even) to 1.0 in bfloat16: 0 ULP; the f64 difference remains.
    assert_eq!(m.max_ulp, Some(0));
    assert_eq!(m.ulp_dtype, Some(DType::BFloat16));
    assert_eq!(m.max_abs_diff, Some(1.0 / 256.0));
}
