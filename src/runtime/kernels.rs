//! CPU kernels of the reference runtime, on contiguous f32/f64/i64/i32/bool tensors.
//!
//! Each kernel receives the KernelCall's value indices in schema order followed by its outputs
//! (E12), reads its inputs into owned vectors first (so in-place aliasing of an output with an
//! input is safe), resizes its output as ExecuTorch's `resize_tensor` does (a refused resize is
//! InvalidArgument, as the portable kernels report it), and writes it.
//! Elementwise float32 arithmetic is computed in f64 and rounded to f32, which for one +, -, *
//! or / of f32 operands is the correctly rounded f32 result (what ExecuTorch computes); integer
//! tensors are read and written as i64 (never through f64), wrapping on overflow; sin/cos call
//! f32 libm; products are summed in f32 in index order (the portable kernels' loop), which an
//! optimised kernel (BLAS) may reorder — see `Kernel::exact`.
//! May not touch: the eager interpreter (no code shared with `ir::eval`), IR, emission, backends.

use super::error::ErrorCode;
use super::frame::{Frame, OpError, OpResult};
use super::value::{Value, checked_numel, is_float};
use crate::program::{ScalarType, TensorShapeDynamism};
use hashbrown::HashMap;
use std::cmp::Ordering;
use std::sync::LazyLock;

/// A kernel: frame and the KernelCall's argument value indices.
pub type KernelFn = fn(&mut Frame<'_>, &[usize]) -> OpResult<()>;

fn bad(detail: impl Into<String>) -> OpError {
    OpError::new(ErrorCode::InvalidArgument, detail)
}

/// A refused resize as a portable kernel reports it: its `ET_KERNEL_CHECK` on `resize_tensor`
/// makes one (a static tensor of another shape: NotSupported) InvalidArgument. The memory
/// limit's MemoryAllocationFailed is the reference runtime's own and stays.
fn kernel_resize_error(e: OpError) -> OpError {
    match e.code {
        ErrorCode::NotSupported => OpError::new(ErrorCode::InvalidArgument, e.detail),
        _ => e,
    }
}

/// Resizes output `v` as a portable kernel does (errors: [`kernel_resize_error`]).
fn resize_out(f: &mut Frame<'_>, v: usize, sizes: &[usize]) -> OpResult<()> {
    f.resize(v, sizes).map_err(kernel_resize_error)
}

/// The error resizing output `v` would give, for a kernel that reads its source before it
/// resizes (the output may alias it): ExecuTorch's resize first, so a refused output is
/// reported before a source without data.
fn check_out(f: &Frame<'_>, v: usize, sizes: &[usize]) -> OpResult<()> {
    f.check_resize(v, sizes).map_err(kernel_resize_error)
}

/// Row-major strides. Saturating: a shape with a zero dimension may have an overflowing
/// partial product, and its strides are never used to index.
fn strides(sizes: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; sizes.len()];
    for i in (0..sizes.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(sizes[i + 1]);
    }
    s
}

/// Numpy-style broadcast of two shapes.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> OpResult<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(bad(format!("shapes {a:?} and {b:?} do not broadcast"))),
        };
    }
    Ok(out)
}

/// For each element of `out` (row-major), the flat index of the broadcast element of `inp`.
pub(crate) fn broadcast_index(out: &[usize], inp: &[usize]) -> Vec<usize> {
    let numel: usize = out.iter().product();
    if inp == out {
        return (0..numel).collect();
    }
    let in_strides = strides(inp);
    let off = out.len() - inp.len();
    let mut idx = vec![0usize; out.len()];
    let mut result = Vec::with_capacity(numel);
    for _ in 0..numel {
        let mut flat = 0;
        for (d, &i) in idx.iter().enumerate().skip(off) {
            let k = d - off;
            if inp[k] != 1 {
                flat += i * in_strides[k];
            }
        }
        result.push(flat);
        for d in (0..out.len()).rev() {
            idx[d] += 1;
            if idx[d] < out[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    result
}

/// [`broadcast_index`] inside a kernel: the map's elements are charged to its working
/// copies first ([`Frame::working`]).
fn broadcast_map(f: &Frame<'_>, out: &[usize], inp: &[usize]) -> OpResult<Vec<usize>> {
    let numel = checked_numel(out).ok_or_else(|| bad(format!("shape {out:?} overflows")))?;
    f.working(numel, &format_args!("a broadcast to {out:?}"))?;
    Ok(broadcast_index(out, inp))
}

fn norm_dim(dim: i64, rank: usize) -> OpResult<usize> {
    let r = rank.max(1) as i64;
    let d = if dim < 0 { dim + r } else { dim };
    if d < 0 || d >= r {
        return Err(bad(format!("dim {dim} out of range for rank {rank}")));
    }
    Ok(d as usize)
}

/// An operand that is a tensor slot or a scalar slot.
fn operand(f: &Frame<'_>, v: usize) -> OpResult<(Vec<usize>, Vec<f64>, Vec<i64>)> {
    match f.value(v)? {
        Value::Tensor(_) => Ok((f.sizes(v)?, f.read_f64(v)?, f.read_i64(v)?)),
        Value::Int(i) => Ok((vec![], vec![*i as f64], vec![*i])),
        Value::Bool(b) => Ok((vec![], vec![*b as i64 as f64], vec![*b as i64])),
        Value::Double(d) => Ok((vec![], vec![*d], vec![*d as i64])),
        other => Err(OpError::new(
            ErrorCode::InvalidType,
            format!("values[{v}] is {}, not a tensor or scalar", other.kind()),
        )),
    }
}

fn binary(
    f: &mut Frame<'_>,
    a: usize,
    b: usize,
    out: usize,
    fop: impl Fn(f64, f64) -> f64,
    iop: impl Fn(i64, i64) -> i64,
) -> OpResult<()> {
    let (sa, fa, ia) = operand(f, a)?;
    let (sb, fb, ib) = operand(f, b)?;
    let shape = broadcast_shape(&sa, &sb)?;
    resize_out(f, out, &shape)?;
    let (ma, mb) = (broadcast_map(f, &shape, &sa)?, broadcast_map(f, &shape, &sb)?);
    let dtype = f.dtype(out)?;
    if is_float(dtype) {
        let r: Vec<f64> = ma.iter().zip(&mb).map(|(x, y)| fop(fa[*x], fb[*y])).collect();
        f.write_f64(out, &r)
    } else {
        let r: Vec<i64> = ma.iter().zip(&mb).map(|(x, y)| iop(ia[*x], ib[*y])).collect();
        f.write_i64(out, &r)
    }
}

fn compare(f: &mut Frame<'_>, a: usize, b: usize, out: usize, op: impl Fn(Ordering) -> bool) -> OpResult<()> {
    let integral =
        |f: &Frame<'_>, v: usize| matches!(f.value(v), Ok(Value::Tensor(_))) && f.dtype(v).is_ok_and(|d| !is_float(d));
    let exact = integral(f, a) && integral(f, b);
    let (sa, fa, ia) = operand(f, a)?;
    let (sb, fb, ib) = operand(f, b)?;
    let shape = broadcast_shape(&sa, &sb)?;
    resize_out(f, out, &shape)?;
    let (ma, mb) = (broadcast_map(f, &shape, &sa)?, broadcast_map(f, &shape, &sb)?);
    // Integer tensors compare exactly; floats in f64 (a comparison with NaN is false).
    let r: Vec<i64> = ma
        .iter()
        .zip(&mb)
        .map(|(x, y)| {
            let ord = if exact { Some(ia[*x].cmp(&ib[*y])) } else { fa[*x].partial_cmp(&fb[*y]) };
            ord.is_some_and(&op) as i64
        })
        .collect();
    f.write_i64(out, &r)
}

fn unary(f: &mut Frame<'_>, a: usize, out: usize, op: impl Fn(f64, ScalarType) -> f64) -> OpResult<()> {
    let shape = f.sizes(a)?;
    let dtype = f.dtype(a)?;
    let x = f.read_f64(a)?;
    resize_out(f, out, &shape)?;
    let r: Vec<f64> = x.iter().map(|v| op(*v, dtype)).collect();
    f.write_f64(out, &r)
}

fn trig(v: f64, dtype: ScalarType, f32op: fn(f32) -> f32, f64op: fn(f64) -> f64) -> f64 {
    if dtype == ScalarType::DOUBLE { f64op(v) } else { f32op(v as f32) as f64 }
}

fn add(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    let alpha = f.scalar(a[2])?;
    let ialpha = alpha as i64;
    binary(f, a[0], a[1], a[3], move |x, y| x + alpha * y, move |x, y| x.wrapping_add(ialpha.wrapping_mul(y)))
}

fn sub(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    if f.fault == Some(crate::fault::Fault::SubSwapsOperands) {
        // Seeded bug: `other - self`.
        let alpha = f.scalar(a[2])?;
        let ialpha = alpha as i64;
        return binary(
            f,
            a[1],
            a[0],
            a[3],
            move |x, y| x - alpha * y,
            move |x, y| x.wrapping_sub(ialpha.wrapping_mul(y)),
        );
    }
    let alpha = f.scalar(a[2])?;
    let ialpha = alpha as i64;
    binary(f, a[0], a[1], a[3], move |x, y| x - alpha * y, move |x, y| x.wrapping_sub(ialpha.wrapping_mul(y)))
}

fn mul(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    binary(f, a[0], a[1], a[2], |x, y| x * y, |x, y| x.wrapping_mul(y))
}

fn div(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    binary(f, a[0], a[1], a[2], |x, y| x / y, |x, y| if y == 0 { 0 } else { x.wrapping_div(y) })
}

fn relu(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    if !is_float(f.dtype(a[0])?) {
        // Integers exactly: negatives become 0.
        let (x, shape) = (f.read_i64(a[0])?, f.sizes(a[0])?);
        resize_out(f, a[1], &shape)?;
        return f.write_i64(a[1], &x.iter().map(|v| (*v).max(0)).collect::<Vec<_>>());
    }
    // ExecuTorch's portable relu: `(isnan(v) || v >= 0) ? v : 0` (-0.0 stays -0.0).
    unary(f, a[0], a[1], |v, _| if v >= 0.0 || v.is_nan() { v } else { 0.0 })
}

fn sin(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    unary(f, a[0], a[1], |v, d| trig(v, d, f32::sin, f64::sin))
}

fn cos(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    unary(f, a[0], a[1], |v, d| trig(v, d, f32::cos, f64::cos))
}

fn gt(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    // A float32 tensor against a double scalar compares in float32 (ExecuTorch promotes the
    // scalar to the tensor's float type).
    if let (Value::Tensor(_), Value::Double(d)) = (f.value(a[0])?, f.value(a[1])?)
        && f.dtype(a[0])? == ScalarType::FLOAT
    {
        let d = f64::from(*d as f32);
        let (x, shape) = (f.read_f64(a[0])?, f.sizes(a[0])?);
        resize_out(f, a[2], &shape)?;
        return f.write_i64(a[2], &x.iter().map(|v| (*v > d) as i64).collect::<Vec<_>>());
    }
    compare(f, a[0], a[1], a[2], |o| o == Ordering::Greater)
}

/// `out = beta * bias + alpha * (m1 @ m2)`, bias broadcast to `[n, m]` (None = no bias).
struct Matmul {
    bias: Option<usize>,
    m1: usize,
    m2: usize,
    /// `m2` is `[m, k]` (linear's weight) rather than `[k, m]`.
    m2_transposed: bool,
    beta: f64,
    alpha: f64,
    out: usize,
}

fn matmul_into(f: &mut Frame<'_>, mm: Matmul) -> OpResult<()> {
    let Matmul { bias, m1, m2, m2_transposed, beta, alpha, out } = mm;
    let s1 = f.sizes(m1)?;
    let s2 = f.sizes(m2)?;
    if s1.len() != 2 || s2.len() != 2 {
        return Err(bad(format!("matmul needs 2-d operands, got {s1:?} and {s2:?}")));
    }
    let (n, k) = (s1[0], s1[1]);
    let (k2, m) = if m2_transposed { (s2[1], s2[0]) } else { (s2[0], s2[1]) };
    if k != k2 {
        return Err(bad(format!("matmul inner dimensions differ: {s1:?} and {s2:?}")));
    }
    let x = f.read_f64(m1)?;
    let w = f.read_f64(m2)?;
    let shape = vec![n, m];
    // Every input is read (the output may alias one) before the output is resized.
    let bias_values = match bias {
        Some(bv) => {
            let sb = f.sizes(bv)?;
            if broadcast_shape(&sb, &shape)? != shape {
                return Err(bad(format!("bias {sb:?} does not broadcast to {shape:?}")));
            }
            Some((sb, f.read_f64(bv)?))
        }
        None => None,
    };
    // Bounds `n * m` (by the output's slot or the memory limit) before anything that size.
    resize_out(f, out, &shape)?;
    // The bias as f64 and the result, before either is made; then the products themselves.
    f.working(n.saturating_mul(m).saturating_mul(2), &format_args!("a {n}x{m} product"))?;
    let products = (n as u64).saturating_mul(m as u64).saturating_mul(k as u64);
    f.spend(products, &format_args!("a {n}x{k} by {k}x{m} product"))?;
    let b = match bias_values {
        Some((sb, vals)) => broadcast_map(f, &shape, &sb)?.iter().map(|i| vals[*i]).collect(),
        None => vec![0.0; n * m],
    };
    let single = f.dtype(out)? == ScalarType::FLOAT;
    let mut r = vec![0.0; n * m];
    for i in 0..n {
        for j in 0..m {
            let w_at = |p: usize| if m2_transposed { w[j * k + p] } else { w[p * m + j] };
            r[i * m + j] = if single {
                // ExecuTorch's portable kernels accumulate in the element type, in k order.
                let mut acc = 0f32;
                for p in 0..k {
                    acc += x[i * k + p] as f32 * w_at(p) as f32;
                }
                let scaled = acc * alpha as f32;
                (if bias.is_some() { scaled + b[i * m + j] as f32 * beta as f32 } else { scaled }) as f64
            } else {
                let mut acc = 0.0;
                for p in 0..k {
                    acc += x[i * k + p] * w_at(p);
                }
                if bias.is_some() { alpha * acc + beta * b[i * m + j] } else { alpha * acc }
            };
        }
    }
    f.write_f64(out, &r)
}

fn addmm(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    let (beta, alpha) = (f.scalar(a[3])?, f.scalar(a[4])?);
    matmul_into(f, Matmul { bias: Some(a[0]), m1: a[1], m2: a[2], m2_transposed: false, beta, alpha, out: a[5] })
}

fn mm(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    matmul_into(f, Matmul { bias: None, m1: a[0], m2: a[1], m2_transposed: false, beta: 1.0, alpha: 1.0, out: a[2] })
}

fn linear(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    let bias = match f.value(a[2])? {
        Value::None => None,
        _ => Some(a[2]),
    };
    matmul_into(f, Matmul { bias, m1: a[0], m2: a[1], m2_transposed: true, beta: 1.0, alpha: 1.0, out: a[3] })
}

fn permute_copy(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    let s = f.sizes(a[0])?;
    let dims: Vec<usize> = f.int_list(a[1])?.into_iter().map(|d| norm_dim(d, s.len())).collect::<OpResult<_>>()?;
    let mut seen = vec![false; s.len()];
    if dims.len() != s.len() || dims.iter().any(|d| std::mem::replace(&mut seen[*d], true)) {
        return Err(bad(format!("permutation {dims:?} invalid for rank {}", s.len())));
    }
    let out_shape: Vec<usize> = dims.iter().map(|d| s[*d]).collect();
    // ExecuTorch's order: the arguments (dtype), the output's resize, then the source.
    same_dtype_elem(f, a[0], a[2])?;
    check_out(f, a[2], &out_shape)?;
    // The source's elements exist (it has data) before a map of that many is built.
    f.bytes(a[0])?;
    let in_strides = strides(&s);
    // The source's element count (a permuted product of a shape with a 0 may overflow).
    let numel = f.tensor(a[0])?.numel();
    // The map and the gathered bytes (at most 8 per element), before either is made.
    f.working(numel.saturating_mul(2), &format_args!("a permutation of values[{}]", a[0]))?;
    let mut idx = vec![0usize; out_shape.len()];
    let mut map = Vec::with_capacity(numel);
    for _ in 0..numel {
        map.push(idx.iter().zip(&dims).map(|(i, d)| i * in_strides[*d]).sum());
        for d in (0..out_shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < out_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    // A pure element copy: bytes, exact for every dtype.
    gather_bytes(f, a[0], a[2], &map, &out_shape)
}

/// Gathers `sizes_out` elements of `src` (an index map) into `out`, exactly (bytewise).
fn gather_bytes(f: &mut Frame<'_>, src: usize, out: usize, map: &[usize], out_shape: &[usize]) -> OpResult<()> {
    let elem = same_dtype_elem(f, src, out)?;
    let r = gather(f.bytes(src)?, elem, map)?;
    resize_out(f, out, out_shape)?;
    f.write_bytes(out, &r)
}

/// The element size of `src`, which `out` must share.
fn same_dtype_elem(f: &Frame<'_>, src: usize, out: usize) -> OpResult<usize> {
    if f.dtype(src)? != f.dtype(out)? {
        return Err(bad(format!("values[{out}] dtype {} differs from values[{src}] {}", f.dtype(out)?, f.dtype(src)?)));
    }
    Ok(f.dtype(src)?.element_size().unwrap_or(1))
}

/// The elements of `bytes` (of `elem` bytes each) at the indices of `map`, in order.
fn gather(bytes: &[u8], elem: usize, map: &[usize]) -> OpResult<Vec<u8>> {
    let mut r = Vec::with_capacity(map.len() * elem);
    for i in map {
        let e = bytes.get(i * elem..(i + 1) * elem).ok_or_else(|| {
            OpError::new(ErrorCode::Internal, format!("element {i} is past the source's {} bytes", bytes.len()))
        })?;
        r.extend_from_slice(e);
    }
    Ok(r)
}

fn select_copy(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    let s = f.sizes(a[0])?;
    if s.is_empty() {
        return Err(bad("select on a 0-dim tensor"));
    }
    let dim = norm_dim(f.int(a[1])?, s.len())?;
    let mut index = f.int(a[2])?;
    if index < 0 {
        index += s[dim] as i64;
    }
    if index < 0 || index as usize >= s[dim] {
        return Err(OpError::new(
            ErrorCode::InvalidArgument,
            format!("index {index} out of range for size {}", s[dim]),
        ));
    }
    // The source's elements exist (it has data) before a map of that many is built.
    f.bytes(a[0])?;
    let st = strides(&s);
    let out_shape: Vec<usize> = s.iter().enumerate().filter(|(d, _)| *d != dim).map(|(_, v)| *v).collect();
    let numel = checked_numel(&out_shape).ok_or_else(|| bad(format!("shape {out_shape:?} overflows")))?;
    f.working(numel.saturating_mul(2), &format_args!("a selection from values[{}]", a[0]))?;
    let outer: usize = s[..dim].iter().product();
    let inner = st[dim];
    let mut map = Vec::with_capacity(numel);
    for o in 0..outer {
        for i in 0..inner {
            map.push(o * s[dim] * inner + index as usize * inner + i);
        }
    }
    gather_bytes(f, a[0], a[3], &map, &out_shape)
}

fn index_select(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    let s = f.sizes(a[0])?;
    let dim = norm_dim(f.int(a[1])?, s.len())?;
    let idx = f.read_i64(a[2])?;
    let size = s.get(dim).copied().unwrap_or(1);
    let st = strides(&s);
    let outer: usize = s[..dim.min(s.len())].iter().product();
    let inner = st.get(dim).copied().unwrap_or(1);
    let mut out_shape = s.clone();
    if !out_shape.is_empty() {
        out_shape[dim] = idx.len();
    }
    if out_shape.contains(&0) {
        // An empty result (outer x inner may still be astronomically large).
        resize_out(f, a[3], &out_shape)?;
        return f.write_bytes(a[3], &[]);
    }
    if s.contains(&0) {
        return Err(bad(format!("index_select from an empty dimension (shape {s:?})")));
    }
    if let Some(k) = idx.iter().find(|k| **k < 0 || **k as usize >= size) {
        return Err(bad(format!("index {k} out of range for size {size}")));
    }
    // The source is read (the output may alias it) and the result bounded before the map is
    // built.
    check_out(f, a[3], &out_shape)?;
    let elem = same_dtype_elem(f, a[0], a[3])?;
    // The source's copy, the map and the gathered bytes, before any is made.
    let numel = checked_numel(&out_shape).ok_or_else(|| bad(format!("shape {out_shape:?} overflows")))?;
    let copied = f.bytes(a[0])?.len().div_ceil(8);
    f.working(numel.saturating_mul(2).saturating_add(copied), &format_args!("an index_select of values[{}]", a[0]))?;
    let src = f.bytes(a[0])?.to_vec();
    resize_out(f, a[3], &out_shape)?;
    let mut map = Vec::new();
    for o in 0..outer {
        for &k in &idx {
            for i in 0..inner {
                map.push(o * size * inner + k as usize * inner + i);
            }
        }
    }
    let r = gather(&src, elem, &map)?;
    f.write_bytes(a[3], &r)
}

fn sym_size(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    let s = f.sizes(a[0])?;
    let dim = norm_dim(f.int(a[1])?, s.len())?;
    let v = *s.get(dim).ok_or_else(|| bad("sym_size of a 0-dim tensor"))?;
    f.set(a[2], Value::Int(v as i64))
}

fn cumsum(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    let s = f.sizes(a[0])?;
    let dim = norm_dim(f.int(a[1])?, s.len())?;
    let st = strides(&s);
    let size = s.get(dim).copied().unwrap_or(1);
    let inner = st.get(dim).copied().unwrap_or(1);
    let outer: usize = s[..dim.min(s.len())].iter().product();
    resize_out(f, a[3], &s)?;
    if s.contains(&0) {
        // Nothing to sum (and outer x inner may be astronomically large while numel is 0).
        return f.write_bytes(a[3], &[]);
    }
    if is_float(f.dtype(a[3])?) {
        // `out[0] = in[0]; out[j] = in[j] + out[j-1]`, accumulating in the output type (a
        // leading -0.0 stays -0.0).
        let mut x = f.read_f64(a[0])?;
        let single = f.dtype(a[3])? == ScalarType::FLOAT;
        for o in 0..outer {
            for i in 0..inner {
                for k in 1..size {
                    let (p, q) = (o * size * inner + k * inner + i, o * size * inner + (k - 1) * inner + i);
                    x[p] = if single { (x[p] as f32 + x[q] as f32) as f64 } else { x[p] + x[q] };
                }
            }
        }
        f.write_f64(a[3], &x)
    } else {
        let mut x = f.read_i64(a[0])?;
        for o in 0..outer {
            for i in 0..inner {
                let mut acc = 0i64;
                for k in 0..size {
                    let p = o * size * inner + k * inner + i;
                    acc = acc.wrapping_add(x[p]);
                    x[p] = acc;
                }
            }
        }
        f.write_i64(a[3], &x)
    }
}

fn argmax(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    let s = f.sizes(a[0])?;
    let keepdim = f.bool(a[2])?;
    // The output shape is validated (resized) before anything that size is made, and a
    // reduction over no elements is an error, as in PyTorch.
    let out_shape = match f.value(a[1])? {
        Value::None => {
            if keepdim {
                vec![1; s.len()]
            } else {
                vec![]
            }
        }
        _ => {
            let dim = norm_dim(f.int(a[1])?, s.len())?;
            let mut shape = s.clone();
            if !shape.is_empty() {
                if keepdim {
                    shape[dim] = 1;
                } else {
                    shape.remove(dim);
                }
            }
            shape
        }
    };
    if s.contains(&0) {
        return Err(bad(format!("argmax of a tensor with no elements (shape {s:?})")));
    }
    // Integers compare exactly (as i64); floats with NaN greater than everything. Read before
    // the output (which may alias the input) is resized.
    let key: Vec<(bool, f64, i64)> = if is_float(f.dtype(a[0])?) {
        f.read_f64(a[0])?.into_iter().map(|v| (v.is_nan(), v, 0)).collect()
    } else {
        f.read_i64(a[0])?.into_iter().map(|v| (false, 0.0, v)).collect()
    };
    resize_out(f, a[3], &out_shape)?;
    let better = |c: usize, b: usize| {
        let (kc, kb) = (key[c], key[b]);
        !kb.0 && (kc.0 || kc.1 > kb.1 || kc.2 > kb.2)
    };
    match f.value(a[1])? {
        Value::None => {
            let mut best = 0;
            for i in 1..key.len() {
                if better(i, best) {
                    best = i;
                }
            }
            f.write_i64(a[3], &[best as i64])
        }
        _ => {
            let dim = norm_dim(f.int(a[1])?, s.len())?;
            let st = strides(&s);
            let size = s.get(dim).copied().unwrap_or(1);
            let inner = st.get(dim).copied().unwrap_or(1);
            let outer: usize = s[..dim.min(s.len())].iter().product();
            let mut r = Vec::with_capacity(outer * inner);
            for o in 0..outer {
                for i in 0..inner {
                    let mut best = 0;
                    for k in 1..size {
                        if better(o * size * inner + k * inner + i, o * size * inner + best * inner + i) {
                            best = k;
                        }
                    }
                    r.push(best as i64);
                }
            }
            f.write_i64(a[3], &r)
        }
    }
}

fn copy_(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    let dst_shape = f.sizes(a[0])?;
    let (ss, fs, is) = operand(f, a[1])?;
    if broadcast_shape(&ss, &dst_shape)? != dst_shape {
        return Err(bad(format!("cannot copy {ss:?} into {dst_shape:?}")));
    }
    // The destination is bounded (its slot, or the memory limit) before a map of its
    // elements is built.
    resize_out(f, a[0], &dst_shape)?;
    let map = broadcast_map(f, &dst_shape, &ss)?;
    if is_float(f.dtype(a[0])?) {
        f.write_f64(a[0], &map.iter().map(|i| fs[*i]).collect::<Vec<_>>())?;
    } else {
        f.write_i64(a[0], &map.iter().map(|i| is[*i]).collect::<Vec<_>>())?;
    }
    // The return slot is `self` (ExecuTorch's wrapper stores the returned reference there).
    let this = f.value(a[0])?.clone();
    f.set(a[3], this)
}

/// The sizes a view of `numel` elements asks for (`want`, with at most one `-1` standing for
/// what the others leave), as `get_view_copy_target_size` reads them; `None` when they do not
/// hold `numel` elements.
fn view_sizes(want: &[i64], numel: usize) -> Option<Vec<usize>> {
    if want.iter().filter(|d| **d == -1).count() > 1 || want.iter().any(|d| *d < -1) {
        return None;
    }
    let known = want.iter().filter(|d| **d >= 0).try_fold(1usize, |a, d| a.checked_mul(usize::try_from(*d).ok()?))?;
    let sizes: Vec<usize> =
        want.iter().map(|d| if *d < 0 { numel.checked_div(known).unwrap_or(0) } else { *d as usize }).collect();
    (checked_numel(&sizes) == Some(numel)).then_some(sizes)
}

/// `aten::view_copy.out(self, size, out)`: `self`'s elements, in order, in another shape of as
/// many elements (ExecuTorch keeps it where a view's result is a method output).
fn view_copy(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    let numel = f.tensor(a[0])?.numel();
    let want = f.int_list(a[1])?;
    let sizes =
        view_sizes(&want, numel).ok_or_else(|| bad(format!("view_copy: sizes {want:?} for {numel} elements")))?;
    let elem = same_dtype_elem(f, a[0], a[2])?;
    check_out(f, a[2], &sizes)?;
    f.working(numel, &format_args!("a copy of values[{}]", a[0]))?;
    let n = numel.saturating_mul(elem);
    let bytes = f
        .bytes(a[0])?
        .get(..n)
        .ok_or_else(|| bad(format!("values[{}] holds fewer than {numel} elements", a[0])))?
        .to_vec();
    resize_out(f, a[2], &sizes)?;
    f.write_bytes(a[2], &bytes)
}

/// `dim_order_ops::_to_dim_order_copy.out(self, non_blocking, dim_order, out)`: `self` in
/// `out`'s dtype (`.to(dtype)`), in the contiguous dim order.
fn to_dim_order_copy(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    dim_order_copy(f, a, true)
}

/// `dim_order_ops::_clone_dim_order.out(self, non_blocking, dim_order, out)`: a copy of `self`
/// (same dtype), in the contiguous dim order.
fn clone_dim_order(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    dim_order_copy(f, a, false)
}

/// The dim-order copies: `non_blocking` must be false; a `dim_order` other than the contiguous
/// one (`0..rank`) is one this runtime does not keep (NotSupported: it has contiguous tensors
/// only); `convert`: the dtype may change (float to int truncates, to bool is "not zero").
fn dim_order_copy(f: &mut Frame<'_>, a: &[usize], convert: bool) -> OpResult<()> {
    let (src, out) = (a[0], a[3]);
    if f.bool(a[1])? {
        return Err(bad("dim-order copy: non_blocking must be false"));
    }
    let s = f.sizes(src)?;
    if !matches!(f.value(a[2])?, Value::None) {
        let order = f.int_list(a[2])?;
        let mut seen = vec![false; s.len()];
        let permutation = order.len() == s.len()
            && order.iter().all(|d| {
                usize::try_from(*d).ok().and_then(|d| seen.get_mut(d)).is_some_and(|x| !std::mem::replace(x, true))
            });
        if !permutation {
            return Err(bad(format!("dim-order copy: dim_order {order:?} for rank {}", s.len())));
        }
        if order.iter().enumerate().any(|(i, d)| *d != i as i64) {
            return Err(OpError::lacking(
                ErrorCode::NotSupported,
                format!("dim order {order:?}"),
                format!("dim order {order:?}: tensors here are contiguous only"),
            ));
        }
    }
    if !convert || f.dtype(src)? == f.dtype(out)? {
        same_dtype_elem(f, src, out)?;
        check_out(f, out, &s)?;
        let numel = f.tensor(src)?.numel();
        f.working(numel, &format_args!("a copy of values[{src}]"))?;
        let bytes = f.bytes(src)?.to_vec();
        resize_out(f, out, &s)?;
        return f.write_bytes(out, &bytes);
    }
    check_out(f, out, &s)?;
    let numel = f.tensor(src)?.numel();
    f.working(numel.saturating_mul(2), &format_args!("a conversion of values[{src}]"))?;
    let (to, from) = (f.dtype(out)?, f.dtype(src)?);
    resize_out(f, out, &s)?;
    if to == ScalarType::BOOL {
        let nonzero: Vec<i64> = if is_float(from) {
            f.read_f64(src)?.iter().map(|x| i64::from(*x != 0.0)).collect()
        } else {
            f.read_i64(src)?.iter().map(|x| i64::from(*x != 0)).collect()
        };
        f.write_i64(out, &nonzero)
    } else if is_float(to) {
        let v = f.read_f64(src)?;
        f.write_f64(out, &v)
    } else {
        let v = f.read_i64(src)?;
        f.write_i64(out, &v)
    }
}

/// ExecuTorch 1.5.1's `et_copy_index`: `to` is resized to `index + 1` rows (grown or shrunk)
/// and its row `index` becomes `from`. Another rank or row shape is InvalidArgument; a resize
/// the destination refuses (static, or past its bound) is InvalidState, as ExecuTorch reports it.
fn et_copy_index(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    let (to, from) = (a[0], a[1]);
    let index = f.int(a[2])?;
    let from_shape = f.sizes(from)?;
    let mut to_shape = f.sizes(to)?;
    if to_shape.len() != from_shape.len() + 1 || to_shape[1..] != from_shape[..] {
        return Err(bad(format!("et_copy_index: {from_shape:?} does not fit a row of {to_shape:?}")));
    }
    let index = usize::try_from(index).map_err(|_| bad(format!("et_copy_index: negative index {index}")))?;
    if index + 1 != to_shape[0] {
        to_shape[0] = index + 1;
        f.resize(to, &to_shape).map_err(|e| OpError::new(ErrorCode::InvalidState, e.detail))?;
    }
    let copied = f.bytes(from)?.len().div_ceil(8).saturating_add(f.bytes(to)?.len().div_ceil(8));
    f.working(copied, &format_args!("et_copy_index into values[{to}]"))?;
    let row = f.bytes(from)?.to_vec();
    let mut all = f.bytes(to)?.to_vec();
    index
        .checked_mul(row.len())
        .and_then(|at| all.get_mut(at..at.checked_add(row.len())?))
        .ok_or_else(|| bad(format!("et_copy_index: row {index} out of range")))?
        .copy_from_slice(&row);
    f.write_bytes(to, &all)
}

/// ExecuTorch 1.5.1's `et_view`: `out` becomes `self` under the sizes given (one may be -1, for
/// what the others leave). Another dtype, another rank than `out`'s, two -1s, a size below -1, a
/// -1 beside a 0, or another element count is InvalidArgument; sizes a static `out` does not
/// have fail its resize: Internal, as do more elements than a dynamic `out` declares. A product
/// that overflows is Internal too (no tensor can take it; ExecuTorch wraps it).
fn et_view(f: &mut Frame<'_>, a: &[usize]) -> OpResult<()> {
    let src = f.tensor(a[0])?.clone();
    if f.dtype(a[2])? != src.dtype {
        return Err(bad(format!(
            "et_view: values[{}] is {}, not {} like values[{}]",
            a[2],
            f.dtype(a[2])?,
            src.dtype,
            a[0]
        )));
    }
    let want = f.int_list(a[1])?;
    let out = f.tensor(a[2])?;
    let (out_sizes, out_static, out_bound) =
        (out.sizes.clone(), out.dynamism == TensorShapeDynamism::STATIC, out.numel_bound);
    let minus = want.iter().filter(|d| **d == -1).count();
    if want.len() != out_sizes.len() || minus > 1 || want.iter().any(|d| *d < -1) || (minus == 1 && want.contains(&0)) {
        return Err(bad(format!("et_view: sizes {want:?} for an output of rank {}", out_sizes.len())));
    }
    let numel = src.numel();
    let unresizable = |sizes: &dyn std::fmt::Debug| {
        OpError::new(ErrorCode::Internal, format!("et_view: values[{}] cannot be resized to {sizes:?}", a[2]))
    };
    let known = want.iter().filter(|d| **d >= 0).try_fold(1usize, |a, d| a.checked_mul(*d as usize));
    let known = known.ok_or_else(|| unresizable(&want))?;
    let sizes: Vec<usize> =
        want.iter().map(|d| if *d < 0 { numel.checked_div(known).unwrap_or(0) } else { *d as usize }).collect();
    // ExecuTorch's resize of the output: a static one keeps its sizes, a dynamic one its bound.
    if (out_static && sizes != out_sizes) || (!out_static && checked_numel(&sizes).is_none_or(|n| n > out_bound)) {
        return Err(unresizable(&sizes));
    }
    if checked_numel(&sizes) != Some(numel) {
        return Err(bad(format!("et_view: {want:?} does not match {numel} elements")));
    }
    let tid = f.tensor_id(a[2])?;
    let out = &mut f.tensors[tid];
    out.storage = src.storage;
    out.sizes = sizes;
    Ok(())
}

fn prim(f: &mut Frame<'_>, a: &[usize], iop: fn(i64, i64) -> Option<i64>, fop: fn(f64, f64) -> f64) -> OpResult<()> {
    let v = match (f.value(a[0])?, f.value(a[1])?) {
        (Value::Int(x), Value::Int(y)) => Value::Int(
            iop(*x, *y)
                // ExecuTorch dies of SIGFPE here; the model reports it.
                .ok_or_else(|| OpError::new(ErrorCode::InvalidArgument, format!("integer division {x} // {y}")))?,
        ),
        _ => Value::Double(fop(f.scalar(a[0])?, f.scalar(a[1])?)),
    };
    f.set(a[2], v)
}

fn prim_cmp(f: &mut Frame<'_>, a: &[usize], op: fn(Ordering) -> bool) -> OpResult<()> {
    let ord = match (f.value(a[0])?, f.value(a[1])?) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        _ => f.scalar(a[0])?.partial_cmp(&f.scalar(a[1])?),
    };
    f.set(a[2], Value::Bool(ord.is_some_and(op)))
}

/// Python floor division on integers (`None` on division by zero or overflow).
fn floordiv(x: i64, y: i64) -> Option<i64> {
    let q = x.checked_div(y)?;
    Some(if x % y != 0 && ((x < 0) != (y < 0)) { q - 1 } else { q })
}

/// One operator the runtime implements.
#[derive(Clone, Copy)]
pub struct Kernel {
    /// Qualified name, `name.overload`.
    pub name: &'static str,
    /// Argument count: schema arguments, then outputs (E12).
    pub args: usize,
    /// Whether its result is the same bits on every conforming implementation: elementwise
    /// IEEE arithmetic, comparisons and data movement are; libm functions, divisions (an
    /// optimised kernel may multiply by a reciprocal) and sums (any order) are not.
    pub exact: bool,
    /// The implementation.
    pub run: KernelFn,
}

/// Every operator the runtime implements.
pub const KERNELS: &[Kernel] = &[
    // Int arithmetic wraps, as ExecuTorch's unchecked int64 arithmetic does in practice.
    Kernel { name: "aten::add.out", args: 5, exact: true, run: add },
    Kernel { name: "aten::sub.out", args: 5, exact: true, run: sub },
    Kernel { name: "aten::mul.out", args: 4, exact: true, run: mul },
    Kernel { name: "aten::div.out", args: 4, exact: false, run: div },
    Kernel { name: "aten::mm.out", args: 4, exact: false, run: mm },
    Kernel { name: "aten::addmm.out", args: 7, exact: false, run: addmm },
    Kernel { name: "aten::linear.out", args: 5, exact: false, run: linear },
    Kernel { name: "aten::permute_copy.out", args: 4, exact: true, run: permute_copy },
    Kernel { name: "aten::relu.out", args: 3, exact: true, run: relu },
    Kernel { name: "aten::sin.out", args: 3, exact: false, run: sin },
    Kernel { name: "aten::cos.out", args: 3, exact: false, run: cos },
    Kernel { name: "aten::cumsum.out", args: 5, exact: true, run: cumsum },
    Kernel { name: "aten::select_copy.int_out", args: 5, exact: true, run: select_copy },
    Kernel { name: "aten::index_select.out", args: 5, exact: true, run: index_select },
    Kernel { name: "aten::argmax.out", args: 5, exact: true, run: argmax },
    Kernel { name: "aten::gt.Scalar_out", args: 4, exact: true, run: gt },
    Kernel { name: "aten::gt.Tensor_out", args: 4, exact: true, run: gt },
    Kernel { name: "aten::sym_size.int", args: 3, exact: true, run: sym_size },
    Kernel { name: "aten::copy_.default", args: 4, exact: true, run: copy_ },
    Kernel { name: "aten::view_copy.out", args: 4, exact: true, run: view_copy },
    Kernel { name: "dim_order_ops::_to_dim_order_copy.out", args: 5, exact: true, run: to_dim_order_copy },
    Kernel { name: "dim_order_ops::_clone_dim_order.out", args: 5, exact: true, run: clone_dim_order },
    Kernel {
        name: "executorch_prim::add.Scalar",
        args: 3,
        exact: true,
        run: |f, a| prim(f, a, |x, y| Some(x.wrapping_add(y)), |x, y| x + y),
    },
    Kernel {
        name: "executorch_prim::sub.Scalar",
        args: 3,
        exact: true,
        run: |f, a| prim(f, a, |x, y| Some(x.wrapping_sub(y)), |x, y| x - y),
    },
    Kernel {
        name: "executorch_prim::mul.Scalar",
        args: 3,
        exact: true,
        run: |f, a| prim(f, a, |x, y| Some(x.wrapping_mul(y)), |x, y| x * y),
    },
    Kernel {
        name: "executorch_prim::floordiv.Scalar",
        args: 3,
        exact: true,
        run: |f, a| prim(f, a, floordiv, |x, y| (x / y).floor()),
    },
    Kernel {
        name: "executorch_prim::eq.Scalar",
        args: 3,
        exact: true,
        run: |f, a| prim_cmp(f, a, |o| o == Ordering::Equal),
    },
    Kernel {
        name: "executorch_prim::gt.Scalar",
        args: 3,
        exact: true,
        run: |f, a| prim_cmp(f, a, |o| o == Ordering::Greater),
    },
    Kernel {
        name: "executorch_prim::lt.Scalar",
        args: 3,
        exact: true,
        run: |f, a| prim_cmp(f, a, |o| o == Ordering::Less),
    },
    Kernel {
        name: "executorch_prim::ge.Scalar",
        args: 3,
        exact: true,
        run: |f, a| prim_cmp(f, a, |o| o != Ordering::Less),
    },
    Kernel {
        name: "executorch_prim::le.Scalar",
        args: 3,
        exact: true,
        run: |f, a| prim_cmp(f, a, |o| o != Ordering::Greater),
    },
    Kernel { name: "executorch_prim::et_copy_index.tensor", args: 3, exact: true, run: et_copy_index },
    Kernel { name: "executorch_prim::et_view.default", args: 3, exact: true, run: et_view },
];

/// [`KERNELS`] indexed for [`lookup_operator`]: by whole name, and by every split of a name
/// around one of its dots (`name`, `overload`); the first kernel of a name wins, as a scan would.
struct Index {
    whole: HashMap<&'static str, usize>,
    parts: HashMap<(&'static str, &'static str), usize>,
}

static INDEX: LazyLock<Index> = LazyLock::new(|| {
    let mut index = Index { whole: HashMap::new(), parts: HashMap::new() };
    for (i, k) in KERNELS.iter().enumerate() {
        index.whole.entry(k.name).or_insert(i);
        for (dot, _) in k.name.match_indices('.') {
            index.parts.entry((&k.name[..dot], &k.name[dot + 1..])).or_insert(i);
        }
    }
    index
});

/// The kernel of an operator table entry (`name` and `overload` as the program spells them),
/// without building the qualified name: the same answer as `lookup(&operator.qualified())`.
pub fn lookup_operator(name: &str, overload: &str) -> Option<&'static Kernel> {
    let index = &*INDEX;
    let at = if overload.is_empty() {
        // `name` itself, or `name.default` when `name` has no overload of its own.
        let default = if name.contains('.') { None } else { index.parts.get(&(name, "default")) };
        index.whole.get(name).into_iter().chain(default).min()
    } else {
        index.parts.get(&(name, overload))
    };
    at.and_then(|&i| KERNELS.get(i))
}

/// The kernel of an operator, by qualified name.
pub fn lookup(qualified: &str) -> Option<&'static Kernel> {
    // An empty overload is the default one: `name` resolves as `name.default`.
    let default = (!qualified.contains('.')).then(|| format!("{qualified}.default"));
    KERNELS.iter().find(|k| k.name == qualified || default.as_deref() == Some(k.name))
}
