//! Values between the runtime's host form and the IR's, for the bound rules.
//! May not touch: the values' contents (conversions only).

use crate::backends::xnnpack::interp::T;
use crate::ir::value::{Data, Tensor, Val};
use crate::program::ScalarType;
use crate::runtime::{HostTensor, HostValue};

/// The IR value of a host value, for the dtypes the IR has (`None` for another dtype, bytes
/// that do not fill the shape, or a `none`).
pub fn decode(v: &HostValue) -> Option<Val> {
    Some(match v {
        HostValue::Tensor(t) => {
            let n: usize = t.sizes.iter().try_fold(1usize, |a, s| a.checked_mul(*s))?;
            let data = match t.dtype {
                ScalarType::FLOAT if t.data.len() == n * 4 => {
                    Data::F32(t.data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
                }
                ScalarType::LONG if t.data.len() == n * 8 => Data::I64(
                    t.data.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect(),
                ),
                ScalarType::BOOL if t.data.len() == n => Data::Bool(t.data.iter().map(|b| *b != 0).collect()),
                _ => return None,
            };
            Val::Tensor(Tensor { shape: t.sizes.clone(), data })
        }
        HostValue::Int(i) => Val::Int(*i),
        HostValue::Bool(b) => Val::Bool(*b),
        HostValue::Double(d) => Val::Double(*d),
        HostValue::None => return None,
    })
}

/// [`decode`] for the bound rules: an integer tensor of any width read as int64 (its
/// elements are what the rules look at, never its width).
pub fn decode_numeric(v: &HostValue) -> Option<Val> {
    match v {
        HostValue::Tensor(t)
            if matches!(t.dtype, ScalarType::INT | ScalarType::SHORT | ScalarType::CHAR | ScalarType::BYTE) =>
        {
            let x = crate::runtime::value::decode_i64(t.dtype, &t.data).ok()?;
            (x.len() == t.sizes.iter().product::<usize>())
                .then(|| Val::Tensor(Tensor { shape: t.sizes.clone(), data: Data::I64(x) }))
        }
        other => decode(other),
    }
}

/// The host form of an IR value.
pub fn encode(v: &Val) -> HostValue {
    match v {
        Val::Tensor(Tensor { shape, data }) => {
            let (dtype, bytes): (ScalarType, Vec<u8>) = match data {
                Data::F32(x) => (ScalarType::FLOAT, x.iter().flat_map(|v| v.to_le_bytes()).collect()),
                Data::I64(x) => (ScalarType::LONG, x.iter().flat_map(|v| v.to_le_bytes()).collect()),
                Data::Bool(x) => (ScalarType::BOOL, x.iter().map(|b| u8::from(*b)).collect()),
            };
            HostValue::Tensor(HostTensor { dtype, sizes: shape.clone(), data: bytes })
        }
        Val::Int(i) => HostValue::Int(*i),
        Val::Bool(b) => HostValue::Bool(*b),
        Val::Double(d) => HostValue::Double(*d),
    }
}

/// A float32 IR tensor.
pub fn f32_tensor(shape: Vec<usize>, data: Vec<f32>) -> Val {
    Val::Tensor(Tensor { shape, data: Data::F32(data) })
}

/// `v` as a zero-dimensional tensor of `like`'s element type when `v` is a scalar and `like` a
/// tensor (a kernel's scalar operand, which it reads in the tensor's type); else `v`.
pub fn scalar_like(v: Val, like: &Val) -> Val {
    let Val::Tensor(t) = like else { return v };
    let x = match v {
        Val::Double(d) => d,
        Val::Int(i) => i as f64,
        Val::Bool(b) => f64::from(u8::from(b)),
        tensor => return tensor,
    };
    let data = match t.data {
        Data::F32(_) => Data::F32(vec![x as f32]),
        Data::I64(_) => Data::I64(vec![x as i64]),
        Data::Bool(_) => Data::Bool(vec![x != 0.0]),
    };
    Val::Tensor(Tensor { shape: vec![], data })
}

/// A float32 host tensor as the XNNPACK interpreter's tensor.
pub fn xnn_tensor(v: &HostValue) -> Option<T> {
    match decode(v)? {
        Val::Tensor(Tensor { shape, data: Data::F32(x) }) => Some(T::new(shape, x)),
        _ => None,
    }
}
