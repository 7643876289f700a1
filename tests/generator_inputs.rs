//! Inputs drawn from a case's bytes include every special value class, and campaign cases carry
//! them into method inputs (issue G point 4).

#![forbid(unsafe_code)]

use arbitrary::Unstructured;
use ptecheck::campaign::{CampaignOptions, case_config, case_input};
use ptecheck::generator::generate;
use ptecheck::generator::inputs::{draw_f32, draw_i64};
use ptecheck::ir::value::{Data, Val};
use std::collections::BTreeSet;

fn f32_class(x: f32) -> &'static str {
    if x.is_nan() {
        "nan"
    } else if x == f32::INFINITY {
        "+inf"
    } else if x == f32::NEG_INFINITY {
        "-inf"
    } else if x == 0.0 && x.is_sign_negative() {
        "-0"
    } else if x == 0.0 {
        "+0"
    } else if x.is_subnormal() {
        "subnormal"
    } else if x.abs() == f32::MAX {
        "max"
    } else if x.abs() >= 1e20 {
        "huge"
    } else if x.abs() < 1e-30 {
        "tiny"
    } else if (x * 256.0).fract() == 0.0 && x.abs() <= 4.0 {
        "ordinary"
    } else {
        "other"
    }
}

fn i64_class(x: i64) -> &'static str {
    match x {
        i64::MIN => "min",
        i64::MAX => "max",
        x if x == i64::MIN + 1 => "min+1",
        x if x == i64::MAX - 1 => "max-1",
        x if x.unsigned_abs() == (1u64 << 53) + 1 => "2^53+1",
        x if x.unsigned_abs() == 1u64 << 31 => "2^31",
        -10..=10 => "ordinary",
        _ => "other",
    }
}

#[test]
fn draws_reach_every_special_class() {
    let bytes: Vec<u8> = (0..200).flat_map(|i| case_input(1, i)).collect();
    let mut u = Unstructured::new(&bytes);
    let mut f = BTreeSet::new();
    let mut i = BTreeSet::new();
    for _ in 0..20_000 {
        f.insert(f32_class(draw_f32(&mut u)));
        i.insert(i64_class(draw_i64(&mut u)));
    }
    for c in ["nan", "+inf", "-inf", "-0", "+0", "subnormal", "max", "huge", "tiny", "ordinary", "other"] {
        assert!(f.contains(c), "float32 class {c} never drawn: {f:?}");
    }
    for c in ["min", "max", "min+1", "max-1", "2^53+1", "2^31", "ordinary", "other"] {
        assert!(i.contains(c), "int64 class {c} never drawn: {i:?}");
    }
}

#[test]
fn campaign_cases_carry_special_values_into_method_inputs() {
    let opts = CampaignOptions::default();
    let mut f = BTreeSet::new();
    let mut i = BTreeSet::new();
    for case in 0..300 {
        let g = generate(&case_config(&opts, case), &mut Unstructured::new(&case_input(opts.seed, case)), None);
        for inputs in g.inputs.values() {
            for v in inputs {
                match v {
                    Val::Tensor(t) => match &t.data {
                        Data::F32(x) => f.extend(x.iter().map(|x| f32_class(*x))),
                        Data::I64(x) => i.extend(x.iter().map(|x| i64_class(*x))),
                        Data::Bool(_) => {}
                    },
                    Val::Int(x) => {
                        i.insert(i64_class(*x));
                    }
                    _ => {}
                }
            }
        }
    }
    for c in ["nan", "+inf", "-inf", "-0", "subnormal", "huge"] {
        assert!(f.contains(c), "float32 class {c} never in a case's inputs: {f:?}");
    }
    for c in ["min", "max"] {
        assert!(i.contains(c), "int64 class {c} never in a case's inputs: {i:?}");
    }
}
