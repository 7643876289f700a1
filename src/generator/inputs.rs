//! Method inputs drawn from a case's bytes, chosen to find bugs: besides ordinary values,
//! float32 `-0.0`, `+0.0`, `±inf`, NaN, subnormals, huge and tiny magnitudes, and int64 extremes
//! (`i64::MIN`, `i64::MAX`, `±2^53 ± 1`, `±2^31`, arbitrary 64-bit values). A dynamic tensor
//! input gets a leading size drawn in `[1, bound]` (the generator's convention: every dynamic
//! tensor of a method shares it). The oracle compares outputs NaN- and sign-of-zero-aware:
//! any NaN equals any NaN, `-0.0` differs from `+0.0`, everything else bit for bit
//! (`oracle::values`).
//! May not touch: the program (it reads only its input types), emission, the runtime.

use crate::ir::value::{Data, Tensor, Val};
use crate::ir::{Dtype, Graph, ValueType};
use arbitrary::Unstructured;

/// One float32 element: mostly multiples of 1/256 in about ±4, else a special value.
pub fn draw_f32(u: &mut Unstructured<'_>) -> f32 {
    let k: u8 = u.arbitrary().unwrap_or(0);
    if k < 176 {
        return (u.int_in_range(-1000..=1000i32).unwrap_or(0) as f32) / 256.0;
    }
    let bits: u32 = u.arbitrary().unwrap_or(0);
    let sign = if bits & 1 == 1 { -1.0f32 } else { 1.0 };
    match k % 10 {
        0 => -0.0,
        1 => 0.0,
        2 => f32::INFINITY,
        3 => f32::NEG_INFINITY,
        4 => f32::NAN,
        // A subnormal (non-zero mantissa, zero exponent).
        5 => f32::from_bits((bits >> 9).max(1) | (bits & 0x8000_0000)),
        // Huge: up to f32::MAX.
        6 => sign * f32::from_bits(0x7000_0000 + (bits >> 4) % 0x0f7f_ffff),
        // Tiny normals.
        7 => sign * f32::from_bits(0x0080_0000 + (bits >> 8) % 0x0100_0000),
        8 => sign * f32::MAX,
        // Any finite bit pattern.
        _ => {
            let f = f32::from_bits(bits);
            if f.is_finite() { f } else { sign }
        }
    }
}

/// One int64 element: mostly in [-10, 10], else an extreme.
pub fn draw_i64(u: &mut Unstructured<'_>) -> i64 {
    let k: u8 = u.arbitrary().unwrap_or(0);
    if k < 176 {
        return u.int_in_range(-10..=10i64).unwrap_or(0);
    }
    match k % 10 {
        0 => i64::MIN,
        1 => i64::MAX,
        2 => i64::MIN + 1,
        3 => i64::MAX - 1,
        4 => (1i64 << 53) + 1,
        5 => -(1i64 << 53) - 1,
        6 => 1i64 << 31,
        7 => -(1i64 << 31),
        _ => u.arbitrary().unwrap_or(0),
    }
}

/// Inputs for `g`.
pub fn draw_inputs(g: &Graph, u: &mut Unstructured<'_>) -> Vec<Val> {
    let mut leading: Option<usize> = None;
    g.inputs
        .iter()
        .map(|t| match t {
            ValueType::Tensor { dtype, shape, dynamic } => {
                let mut shape = shape.clone();
                if *dynamic && !shape.is_empty() {
                    let bound = shape[0].max(1);
                    let n = *leading.get_or_insert_with(|| u.int_in_range(1..=bound).unwrap_or(bound));
                    shape[0] = n.min(bound);
                }
                let n: usize = shape.iter().product();
                let data = match dtype {
                    Dtype::F32 => Data::F32((0..n).map(|_| draw_f32(u)).collect()),
                    Dtype::I64 => Data::I64((0..n).map(|_| draw_i64(u)).collect()),
                    Dtype::Bool => Data::Bool((0..n).map(|_| u.arbitrary().unwrap_or(false)).collect()),
                };
                Val::Tensor(Tensor { shape, data })
            }
            ValueType::Int => Val::Int(u.int_in_range(0..=6).unwrap_or(0)),
            ValueType::Bool => Val::Bool(u.arbitrary().unwrap_or(false)),
            ValueType::Double => Val::Double(f64::from(draw_f32(u))),
        })
        .collect()
}
