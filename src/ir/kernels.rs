//! The eager interpreter's operator arithmetic: one function per IR operator over [`Val`]s,
//! written on its own (nothing is shared with `runtime::kernels`): float32 ops in f32, products
//! summed in f32 in index order, int64 arithmetic wrapping, NaN propagating.
//! May not touch: control flow and calls (`eval`), bounds (`bound`).

use super::infer::{IrError, broadcast, err, norm_dim};
use super::op::Op;
use super::value::{Data, Tensor, Val, bmap, split_at_dim, strides};

pub(super) fn t<'v>(v: &'v Val, path: &str) -> Result<&'v Tensor, IrError> {
    match v {
        Val::Tensor(t) => Ok(t),
        other => Err(err(path, format!("expected a tensor, got {other:?}"))),
    }
}

fn int(v: &Val, path: &str) -> Result<i64, IrError> {
    match v {
        Val::Int(i) => Ok(*i),
        other => Err(err(path, format!("expected an Int, got {other:?}"))),
    }
}

fn f32s<'v>(x: &'v Tensor, path: &str) -> Result<&'v [f32], IrError> {
    match &x.data {
        Data::F32(v) => Ok(v),
        _ => Err(err(path, format!("expected float32, got {:?}", x.dtype()))),
    }
}

/// Elementwise binary op with broadcasting; f32 and i64 variants of the operation.
fn binary(
    a: &Tensor,
    b: &Tensor,
    path: &str,
    ff: impl Fn(f32, f32) -> f32,
    fi: impl Fn(i64, i64) -> i64,
) -> Result<Val, IrError> {
    let shape = broadcast(&a.shape, &b.shape).ok_or_else(|| err(path, "shapes do not broadcast"))?;
    let (ma, mb) = (bmap(&shape, &a.shape), bmap(&shape, &b.shape));
    let data = match (&a.data, &b.data) {
        (Data::F32(x), Data::F32(y)) => Data::F32(ma.iter().zip(&mb).map(|(i, j)| ff(x[*i], y[*j])).collect()),
        (Data::I64(x), Data::I64(y)) => Data::I64(ma.iter().zip(&mb).map(|(i, j)| fi(x[*i], y[*j])).collect()),
        _ => return Err(err(path, format!("operands {:?} and {:?}", a.dtype(), b.dtype()))),
    };
    Ok(Val::Tensor(Tensor { shape, data }))
}

/// Elementwise comparison with broadcasting.
fn compare(a: &Tensor, b: &Tensor, path: &str, ord: impl Fn(std::cmp::Ordering) -> bool) -> Result<Val, IrError> {
    let shape = broadcast(&a.shape, &b.shape).ok_or_else(|| err(path, "shapes do not broadcast"))?;
    let (ma, mb) = (bmap(&shape, &a.shape), bmap(&shape, &b.shape));
    let data: Vec<bool> = match (&a.data, &b.data) {
        // A comparison with NaN is false.
        (Data::F32(x), Data::F32(y)) => {
            ma.iter().zip(&mb).map(|(i, j)| x[*i].partial_cmp(&y[*j]).is_some_and(&ord)).collect()
        }
        (Data::I64(x), Data::I64(y)) => ma.iter().zip(&mb).map(|(i, j)| ord(x[*i].cmp(&y[*j]))).collect(),
        _ => return Err(err(path, format!("operands {:?} and {:?}", a.dtype(), b.dtype()))),
    };
    Ok(Val::Tensor(Tensor { shape, data: Data::Bool(data) }))
}

fn unary_f32(x: &Tensor, path: &str, f: impl Fn(f32) -> f32) -> Result<Val, IrError> {
    let v = f32s(x, path)?;
    Ok(Val::Tensor(Tensor { shape: x.shape.clone(), data: Data::F32(v.iter().map(|e| f(*e)).collect()) }))
}

/// `bias + x @ w` (or `x @ w.T` when `w_transposed`), products summed in f32 in k order
/// starting from 0, then the bias added.
fn matmul(x: &Tensor, w: &Tensor, w_transposed: bool, bias: Option<&Tensor>, path: &str) -> Result<Val, IrError> {
    if x.shape.len() != 2 || w.shape.len() != 2 {
        return Err(err(path, format!("matmul needs 2-d operands, got {:?} and {:?}", x.shape, w.shape)));
    }
    let (xv, wv) = (f32s(x, path)?, f32s(w, path)?);
    let (n, k) = (x.shape[0], x.shape[1]);
    let (k2, m) = if w_transposed { (w.shape[1], w.shape[0]) } else { (w.shape[0], w.shape[1]) };
    if k != k2 {
        return Err(err(path, format!("matmul inner dimensions differ: {:?} and {:?}", x.shape, w.shape)));
    }
    let out = vec![n, m];
    let bias = match bias {
        Some(b) => {
            if broadcast(&b.shape, &out).as_deref() != Some(&out[..]) {
                return Err(err(path, format!("bias {:?} does not broadcast to [{n}, {m}]", b.shape)));
            }
            let bv = f32s(b, path)?;
            Some(bmap(&out, &b.shape).into_iter().map(|i| bv[i]).collect::<Vec<f32>>())
        }
        None => None,
    };
    let mut data = Vec::with_capacity(n * m);
    for i in 0..n {
        for j in 0..m {
            let mut acc = 0f32;
            for p in 0..k {
                let wpj = if w_transposed { wv[j * k + p] } else { wv[p * m + j] };
                acc += xv[i * k + p] * wpj;
            }
            data.push(match &bias {
                Some(b) => acc + b[i * m + j],
                None => acc,
            });
        }
    }
    Ok(Val::Tensor(Tensor { shape: out, data: Data::F32(data) }))
}

pub(super) fn select(x: &Tensor, d: usize, idx: usize) -> Tensor {
    let (outer, size, inner) = split_at_dim(&x.shape, d);
    let map: Vec<usize> =
        (0..outer).flat_map(|o| (0..inner).map(move |i| o * size * inner + idx * inner + i)).collect();
    let mut shape = x.shape.clone();
    shape.remove(d);
    x.gather(shape, &map)
}

fn dim(d: i64, rank: usize, path: &str) -> Result<usize, IrError> {
    norm_dim(d, rank).ok_or_else(|| err(path, format!("dim {d} out of range for rank {rank}")))
}

/// Python floor division of ints; `None` on division by zero or overflow.
fn floordiv(x: i64, y: i64) -> Option<i64> {
    let q = x.checked_div(y)?;
    let r = x.checked_rem(y)?;
    Some(if r != 0 && ((r < 0) != (y < 0)) { q - 1 } else { q })
}

/// Evaluates one op.
pub fn eval_op(op: &Op, a: &[&Val], path: &str) -> Result<Val, IrError> {
    use Op::*;
    Ok(match op {
        Add => binary(t(a[0], path)?, t(a[1], path)?, path, |x, y| x + y, i64::wrapping_add)?,
        Sub => binary(t(a[0], path)?, t(a[1], path)?, path, |x, y| x - y, i64::wrapping_sub)?,
        Mul => binary(t(a[0], path)?, t(a[1], path)?, path, |x, y| x * y, i64::wrapping_mul)?,
        Div => {
            let (x, y) = (t(a[0], path)?, t(a[1], path)?);
            f32s(x, path)?;
            binary(x, y, path, |p, q| p / q, |_, _| 0)?
        }
        Relu => {
            let x = t(a[0], path)?;
            let data = match &x.data {
                // `(isnan(v) || v >= 0) ? v : 0`: NaN stays NaN, -0.0 stays -0.0.
                Data::F32(v) => Data::F32(v.iter().map(|e| if *e >= 0.0 || e.is_nan() { *e } else { 0.0 }).collect()),
                Data::I64(v) => Data::I64(v.iter().map(|e| (*e).max(0)).collect()),
                Data::Bool(_) => return Err(err(path, "relu of bool")),
            };
            Val::Tensor(Tensor { shape: x.shape.clone(), data })
        }
        Sin => unary_f32(t(a[0], path)?, path, f32::sin)?,
        Cos => unary_f32(t(a[0], path)?, path, f32::cos)?,
        Linear => matmul(t(a[0], path)?, t(a[1], path)?, true, Some(t(a[2], path)?), path)?,
        Addmm => matmul(t(a[1], path)?, t(a[2], path)?, false, Some(t(a[0], path)?), path)?,
        Mm => matmul(t(a[0], path)?, t(a[1], path)?, false, None, path)?,
        PermuteCopy { dims } => {
            let x = t(a[0], path)?;
            let dims: Vec<usize> = dims.iter().map(|d| dim(*d, x.shape.len(), path)).collect::<Result<_, _>>()?;
            let shape: Vec<usize> = dims.iter().map(|d| x.shape[*d]).collect();
            let (ist, ost) = (strides(&x.shape), strides(&shape));
            let n: usize = shape.iter().product();
            let map: Vec<usize> = (0..n)
                .map(|flat| (0..shape.len()).map(|d| ((flat / ost[d]) % shape[d]) * ist[dims[d]]).sum())
                .collect();
            Val::Tensor(x.gather(shape, &map))
        }
        Cumsum { dim: d } => {
            let x = t(a[0], path)?;
            let d = dim(*d, x.shape.len(), path)?;
            let (outer, size, inner) = split_at_dim(&x.shape, d);
            let mut out = x.clone();
            for o in 0..outer {
                for i in 0..inner {
                    let at = |k: usize| o * size * inner + k * inner + i;
                    match &mut out.data {
                        // ExecuTorch: `out[0] = in[0]; out[j] = in[j] + out[j-1]` (a leading -0.0
                        // stays -0.0).
                        Data::F32(v) => {
                            for k in 1..size {
                                v[at(k)] += v[at(k - 1)];
                            }
                        }
                        Data::I64(v) => {
                            let mut acc = 0i64;
                            for k in 0..size {
                                acc = acc.wrapping_add(v[at(k)]);
                                v[at(k)] = acc;
                            }
                        }
                        Data::Bool(_) => return Err(err(path, "cumsum of bool")),
                    }
                }
            }
            Val::Tensor(out)
        }
        SelectCopy { dim: d, index } => {
            let x = t(a[0], path)?;
            let d = dim(*d, x.shape.len(), path)?;
            let n = x.shape[d] as i64;
            let idx = if *index < 0 { index + n } else { *index };
            if !(0..n).contains(&idx) {
                return Err(err(path, format!("index {index} out of range for size {n}")));
            }
            Val::Tensor(select(x, d, idx as usize))
        }
        IndexSelect { dim: d } => {
            let (x, ix) = (t(a[0], path)?, t(a[1], path)?);
            let Data::I64(ixv) = &ix.data else { return Err(err(path, "index must be int64")) };
            let d = dim(*d, x.shape.len(), path)?;
            let (outer, size, inner) = split_at_dim(&x.shape, d);
            let mut map = Vec::with_capacity(outer * ixv.len() * inner);
            for o in 0..outer {
                for &k in ixv {
                    let k = usize::try_from(k)
                        .ok()
                        .filter(|k| *k < size)
                        .ok_or_else(|| err(path, format!("index {k} out of range for size {size}")))?;
                    map.extend((0..inner).map(|i| o * size * inner + k * inner + i));
                }
            }
            let mut shape = x.shape.clone();
            shape[d] = ixv.len();
            Val::Tensor(x.gather(shape, &map))
        }
        Argmax { dim: d, keepdim } => {
            let x = t(a[0], path)?;
            // The first maximum wins; NaN is greater than every number (the first NaN wins).
            let key: Vec<(bool, f64)> = match &x.data {
                Data::F32(v) => v.iter().map(|e| (e.is_nan(), f64::from(*e))).collect(),
                Data::I64(v) => v.iter().map(|e| (false, *e as f64)).collect(),
                Data::Bool(_) => return Err(err(path, "argmax of bool")),
            };
            let exact: Option<&Vec<i64>> = match &x.data {
                Data::I64(v) => Some(v),
                _ => None,
            };
            let better = |c: usize, b: usize| match exact {
                Some(v) => v[c] > v[b],
                None => !key[b].0 && (key[c].0 || key[c].1 > key[b].1),
            };
            if x.is_empty() {
                return Err(err(path, "argmax of an empty tensor"));
            }
            match d {
                None => {
                    let best = (1..x.len()).fold(0, |b, c| if better(c, b) { c } else { b });
                    let shape = if *keepdim { vec![1; x.shape.len()] } else { vec![] };
                    Val::Tensor(Tensor { shape, data: Data::I64(vec![best as i64]) })
                }
                Some(d) => {
                    let d = dim(*d, x.shape.len(), path)?;
                    let (outer, size, inner) = split_at_dim(&x.shape, d);
                    let mut data = Vec::with_capacity(outer * inner);
                    for o in 0..outer {
                        for i in 0..inner {
                            let at = |k: usize| o * size * inner + k * inner + i;
                            let best = (1..size).fold(0, |b, c| if better(at(c), at(b)) { c } else { b });
                            data.push(best as i64);
                        }
                    }
                    let mut shape = x.shape.clone();
                    if *keepdim {
                        shape[d] = 1;
                    } else {
                        shape.remove(d);
                    }
                    Val::Tensor(Tensor { shape, data: Data::I64(data) })
                }
            }
        }
        Gt { other } => {
            let x = t(a[0], path)?;
            // A float32 tensor compared with a double scalar: in float32, as ExecuTorch's
            // portable gt.Scalar_out computes it for a float tensor.
            let s = Tensor { shape: vec![], data: Data::F32(vec![*other as f32]) };
            compare(x, &s, path, |o| o == std::cmp::Ordering::Greater)?
        }
        GtTensor => compare(t(a[0], path)?, t(a[1], path)?, path, |o| o == std::cmp::Ordering::Greater)?,
        View { shape } => {
            let x = t(a[0], path)?;
            let shape: Vec<usize> = shape.iter().map(|s| *s as usize).collect();
            if shape.iter().product::<usize>() != x.len() {
                return Err(err(path, format!("view {shape:?} of {} elements", x.len())));
            }
            Val::Tensor(Tensor { shape, data: x.data.clone() })
        }
        SymSize { dim: d } => {
            let x = t(a[0], path)?;
            Val::Int(x.shape[dim(*d, x.shape.len(), path)?] as i64)
        }
        ScalarAdd | ScalarSub | ScalarMul | ScalarFloordiv => {
            let (x, y) = (int(a[0], path)?, int(a[1], path)?);
            Val::Int(match op {
                ScalarAdd => x.wrapping_add(y),
                ScalarSub => x.wrapping_sub(y),
                ScalarMul => x.wrapping_mul(y),
                _ => floordiv(x, y).ok_or_else(|| err(path, format!("floordiv {x} // {y}")))?,
            })
        }
        ScalarEq | ScalarLt | ScalarGt | ScalarGe | ScalarLe => {
            let (x, y) = (int(a[0], path)?, int(a[1], path)?);
            Val::Bool(match op {
                ScalarEq => x == y,
                ScalarLt => x < y,
                ScalarGt => x > y,
                ScalarGe => x >= y,
                _ => x <= y,
            })
        }
    })
}
