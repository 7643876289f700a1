//! Values of the eager interpreter: typed tensors, scalars, and the row-major index arithmetic
//! (strides, broadcasting maps) the interpreter and the bound rules share.
//! May not touch: operator semantics (`kernels`), bounds (`bound`).

use super::program::{ConstTensor, Dtype, ValueType};
use serde::{Deserialize, Serialize};

/// Elements of a tensor, typed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Data {
    /// float32.
    F32(Vec<f32>),
    /// int64.
    I64(Vec<i64>),
    /// bool.
    Bool(Vec<bool>),
}

/// An IR tensor value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tensor {
    /// Shape.
    pub shape: Vec<usize>,
    /// Row-major elements.
    pub data: Data,
}

impl Tensor {
    /// Element type.
    pub fn dtype(&self) -> Dtype {
        match self.data {
            Data::F32(_) => Dtype::F32,
            Data::I64(_) => Dtype::I64,
            Data::Bool(_) => Dtype::Bool,
        }
    }

    /// Number of elements held.
    pub fn len(&self) -> usize {
        match &self.data {
            Data::F32(v) => v.len(),
            Data::I64(v) => v.len(),
            Data::Bool(v) => v.len(),
        }
    }

    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The same shape with elements picked from `self` by flat index.
    pub(crate) fn gather(&self, shape: Vec<usize>, idx: &[usize]) -> Tensor {
        let data = match &self.data {
            Data::F32(v) => Data::F32(idx.iter().map(|i| v[*i]).collect()),
            Data::I64(v) => Data::I64(idx.iter().map(|i| v[*i]).collect()),
            Data::Bool(v) => Data::Bool(idx.iter().map(|i| v[*i]).collect()),
        };
        Tensor { shape, data }
    }
}

/// An IR value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Val {
    /// Tensor.
    Tensor(Tensor),
    /// Int scalar.
    Int(i64),
    /// Bool scalar.
    Bool(bool),
    /// Double scalar.
    Double(f64),
}

/// Row-major strides of a shape (saturating, for a shape of no element whose other sizes multiply
/// past usize).
pub fn strides(s: &[usize]) -> Vec<usize> {
    let mut st = vec![1usize; s.len()];
    for i in (0..s.len().saturating_sub(1)).rev() {
        // Saturating: a shape with a 0 holds no element, yet its other sizes may multiply past
        // usize (the runtime's `strides` saturates for the same reason).
        st[i] = st[i + 1].saturating_mul(s[i + 1]);
    }
    st
}

/// `(outer, size, inner)` of a row-major shape around dimension `d`: element `(o, k, i)` is at
/// `o * size * inner + k * inner + i`.
pub fn split_at_dim(shape: &[usize], d: usize) -> (usize, usize, usize) {
    let product = |dims: &[usize]| dims.iter().fold(1usize, |a, b| a.saturating_mul(*b));
    (product(&shape[..d]), shape[d], product(&shape[d + 1..]))
}

/// For each element of the broadcast shape `out`, the flat index of the element of `inp`.
pub fn bmap(out: &[usize], inp: &[usize]) -> Vec<usize> {
    let n: usize = out.iter().product();
    let st = strides(inp);
    let off = out.len() - inp.len();
    let ost = strides(out);
    (0..n)
        .map(|flat| {
            (off..out.len()).filter(|d| inp[d - off] != 1).map(|d| ((flat / ost[d]) % out[d]) * st[d - off]).sum()
        })
        .collect()
}

/// The value of a constant tensor.
pub fn constant(c: &ConstTensor) -> Val {
    let data = match c.dtype {
        Dtype::F32 => Data::F32(c.values.iter().map(|v| *v as f32).collect()),
        Dtype::I64 => Data::I64(c.values.iter().map(|v| *v as i64).collect()),
        Dtype::Bool => Data::Bool(c.values.iter().map(|v| *v != 0.0).collect()),
    };
    Val::Tensor(Tensor { shape: c.shape.clone(), data })
}

/// Whether `v` has type `t`: static shapes exactly, dynamic ones the same rank within their
/// bounds.
pub fn fits(v: &Val, t: &ValueType) -> bool {
    match (v, t) {
        (Val::Tensor(x), ValueType::Tensor { dtype, shape, dynamic }) => {
            x.dtype() == *dtype
                && x.len() == x.shape.iter().product::<usize>()
                && if *dynamic {
                    x.shape.len() == shape.len() && x.shape.iter().zip(shape).all(|(a, b)| a <= b)
                } else {
                    x.shape == *shape
                }
        }
        (Val::Int(_), ValueType::Int) | (Val::Bool(_), ValueType::Bool) | (Val::Double(_), ValueType::Double) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_shape_whose_other_sizes_multiply_past_usize_has_saturated_strides() {
        // The type check admits such a shape (no element, every size within int32); its
        // suffix products are never used to index, but must not overflow on the way.
        let big = i32::MAX as usize;
        let shape = [0, big, big, big];
        assert_eq!(strides(&shape)[0], usize::MAX);
        assert_eq!(split_at_dim(&shape, 0), (1, 0, usize::MAX));
        assert_eq!(strides(&[2, 3, 4]), [12, 4, 1]);
        assert_eq!(split_at_dim(&[2, 3, 4], 1), (2, 3, 4));
    }
}
