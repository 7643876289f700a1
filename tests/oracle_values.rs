//! The oracle's value comparison (`oracle::values`), pinned on hand-built values: NaN equals
//! NaN whatever its payload, `-0.0` differs from `+0.0`, bools compare by truth, every other
//! dtype by bytes; lists by length and elements; the rendering used in failure messages.

#![forbid(unsafe_code)]

use ptecheck::ir::bound::Bound;
use ptecheck::oracle::values::{Verdict, compare, difference, same, same_all, show};
use ptecheck::program::ScalarType;
use ptecheck::runtime::{HostTensor, HostValue};

fn f32s(v: &[f32]) -> HostValue {
    HostValue::Tensor(HostTensor {
        dtype: ScalarType::FLOAT,
        sizes: vec![v.len()],
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    })
}

fn f64s(v: &[f64]) -> HostValue {
    HostValue::Tensor(HostTensor {
        dtype: ScalarType::DOUBLE,
        sizes: vec![v.len()],
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    })
}

fn raw(dtype: ScalarType, data: &[u8]) -> HostValue {
    HostValue::Tensor(HostTensor { dtype, sizes: vec![data.len()], data: data.to_vec() })
}

#[test]
fn float_tensors_equal_nan_to_nan_and_tell_the_sign_of_zero() {
    let quiet = f32::NAN;
    let payload = f32::from_bits(0x7fc0_0001);
    let negative_nan = f32::from_bits(0xffc0_0000);
    assert!(same(&f32s(&[quiet, 1.0]), &f32s(&[payload, 1.0])));
    assert!(same(&f32s(&[negative_nan]), &f32s(&[quiet])));
    assert!(!same(&f32s(&[quiet]), &f32s(&[1.0])));
    assert!(!same(&f32s(&[1.0]), &f32s(&[quiet])));
    assert!(!same(&f32s(&[0.0]), &f32s(&[-0.0])));
    assert!(!same(&f32s(&[1.0, 2.0]), &f32s(&[1.0, 2.000_000_2])));
    assert!(same(&f32s(&[f32::INFINITY]), &f32s(&[f32::INFINITY])));
    // f64 tensors the same way (not by bytes: NaN payloads differ).
    assert!(same(&f64s(&[f64::NAN, 2.0]), &f64s(&[f64::from_bits(0x7ff8_0000_0000_0001), 2.0])));
    assert!(!same(&f64s(&[f64::NAN]), &f64s(&[2.0])));
    assert!(!same(&f64s(&[2.0]), &f64s(&[f64::NAN])));
    assert!(!same(&f64s(&[0.0]), &f64s(&[-0.0])));
    // Scalars.
    assert!(same(&HostValue::Double(f64::NAN), &HostValue::Double(-f64::NAN)));
    assert!(!same(&HostValue::Double(0.0), &HostValue::Double(-0.0)));
    assert!(!same(&HostValue::Double(1.0), &HostValue::Int(1)));
}

#[test]
fn bools_compare_by_truth_other_dtypes_by_bytes_and_shapes_must_match() {
    assert!(same(&raw(ScalarType::BOOL, &[1, 0, 2]), &raw(ScalarType::BOOL, &[7, 0, 1])));
    assert!(!same(&raw(ScalarType::BOOL, &[1, 0]), &raw(ScalarType::BOOL, &[1, 1])));
    assert!(same(&raw(ScalarType::LONG, &[1; 8]), &raw(ScalarType::LONG, &[1; 8])));
    assert!(!same(&raw(ScalarType::LONG, &[1; 8]), &raw(ScalarType::LONG, &[2; 8])));
    assert!(!same(&raw(ScalarType::BYTE, &[1, 2]), &raw(ScalarType::CHAR, &[1, 2])));
    let reshaped = HostValue::Tensor(HostTensor { dtype: ScalarType::FLOAT, sizes: vec![1, 2], data: vec![0; 8] });
    assert!(!same(&f32s(&[0.0, 0.0]), &reshaped));
}

#[test]
fn lists_compare_by_length_then_elements_and_the_difference_names_the_first() {
    let a = vec![f32s(&[1.0]), HostValue::Int(3)];
    let b = vec![f32s(&[1.0]), HostValue::Int(4)];
    assert!(same_all(&a, &a));
    assert!(!same_all(&a, &b));
    assert!(!same_all(&a, &a[..1]));
    assert!(same_all(&[], &[]));
    assert_eq!(difference(&a, &a), None);
    assert_eq!(difference(&a, &b).as_deref(), Some("value 1: expected Int(3), got Int(4)"));
    assert_eq!(difference(&a, &a[..1]).as_deref(), Some("2 values expected, 1 given"));
}

#[test]
fn values_render_exactly_with_at_most_eight_elements() {
    assert_eq!(show(&f32s(&[1.5, -0.0, f32::NAN])), "FLOAT [3] [1.5, -0.0, NaN]");
    let eight: Vec<f32> = (0..8).map(|i| i as f32).collect();
    assert_eq!(show(&f32s(&eight)), "FLOAT [8] [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]");
    let nine: Vec<f32> = (0..9).map(|i| i as f32).collect();
    assert_eq!(show(&f32s(&nine)), "FLOAT [9] [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, …]");
    assert_eq!(show(&raw(ScalarType::BOOL, &[0, 3])), "BOOL [2] [false, true]");
    assert_eq!(show(&raw(ScalarType::LONG, &(-2i64).to_le_bytes())), "LONG [8] [-2]");
    assert_eq!(show(&raw(ScalarType::BYTE, &[255])), "BYTE [1] [0xff]");
    assert_eq!(show(&HostValue::Int(7)), "Int(7)");
}

#[test]
fn a_bound_admits_what_it_covers_and_nothing_else() {
    let want = f32s(&[1.0, 2.0]);
    assert_eq!(compare(&want, &Bound::Exact, &want), Verdict::Exact);
    assert_eq!(compare(&want, &Bound::Exact, &f32s(&[1.0, 2.5])), Verdict::Mismatch);
    let bound = Bound::Abs(vec![0.0, 0.5]);
    assert_eq!(compare(&want, &bound, &f32s(&[1.0, 2.5])), Verdict::WithinBound);
    assert_eq!(compare(&want, &bound, &f32s(&[1.0, 2.6])), Verdict::Mismatch);
    assert_eq!(compare(&want, &bound, &f32s(&[1.1, 2.0])), Verdict::Mismatch);
    assert_eq!(compare(&want, &bound, &f32s(&[1.0, f32::NAN])), Verdict::Mismatch);
    assert_eq!(compare(&want, &Bound::Abs(vec![0.0, f64::INFINITY]), &f32s(&[1.0, f32::NAN])), Verdict::WithinBound);
    // Anything in value, never in kind, dtype or shape.
    assert_eq!(compare(&want, &Bound::Any, &f32s(&[f32::NAN, -7.0])), Verdict::WithinBound);
    assert_eq!(compare(&want, &Bound::Any, &HostValue::Int(0)), Verdict::Mismatch);
    assert_eq!(compare(&want, &Bound::Any, &f32s(&[1.0])), Verdict::Mismatch);
    assert_eq!(compare(&HostValue::Int(3), &Bound::Any, &HostValue::Int(4)), Verdict::WithinBound);
    assert_eq!(compare(&want, &Bound::Flags(vec![false, true]), &f32s(&[1.0, 9.0])), Verdict::WithinBound);
    assert_eq!(compare(&want, &Bound::Flags(vec![false, true]), &f32s(&[9.0, 2.0])), Verdict::Mismatch);
    assert_eq!(compare(&want, &bound, &f32s(&[1.0])), Verdict::Mismatch);
}
