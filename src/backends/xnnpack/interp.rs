//! The reference interpreter's maths: float32 XNNPACK node semantics, written from XNNPACK's
//! reference definitions (docs/xnnpack.md §4) and sharing no code with `ir::eval` or the CPU
//! kernels. Shapes come from the runtime tensors (the blob's dims are only upper bounds), as
//! in XNNPACK's reshape pass.
//!
//! Numerics: elementwise ops compute in float32 (transcendentals in float64, rounded once);
//! fully-connected accumulates as XNNPACK's x86 GEMM micro-kernels do — one fused multiply-add
//! per input channel, in channel order, starting from the bias — and batch-matmul likewise from
//! zero; softmax subtracts the row maximum and accumulates in float32.

use crate::runtime::value::checked_numel;
use pte::xnnpack::{FLAG_TRANSPOSE_WEIGHTS, INVALID_ID, MinMax, NodeType, Payload, XNode};

/// A float32 tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct T {
    /// Shape.
    pub shape: Vec<usize>,
    /// Row-major elements.
    pub data: Vec<f32>,
}

impl T {
    /// A tensor (the caller keeps `data.len()` = product of `shape`).
    pub fn new(shape: Vec<usize>, data: Vec<f32>) -> Self {
        T { shape, data }
    }
}

/// The nodes the interpreter runs.
pub const SUPPORTED: [NodeType; 24] = [
    NodeType::XNNFullyConnected,
    NodeType::XNNClamp,
    NodeType::XNNAdd,
    NodeType::XNNSubtract,
    NodeType::XNNMultiply,
    NodeType::XNNDiv,
    NodeType::XNNMinimum,
    NodeType::XNNMaximum,
    NodeType::XNNNegate,
    NodeType::XNNAbs,
    NodeType::XNNSquare,
    NodeType::XNNSquareRoot,
    NodeType::XNNSigmoid,
    NodeType::XNNTanh,
    NodeType::XNNExp,
    NodeType::XNNSin,
    NodeType::XNNCos,
    NodeType::XNNSoftmax,
    NodeType::XNNBatchMatrixMultiply,
    NodeType::XNNStaticTranspose,
    NodeType::XNNStaticReshape,
    NodeType::XNNCopy,
    NodeType::XNNCeiling,
    NodeType::XNNFloor,
];

/// Why a node could not run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    /// Operands whose shapes do not fit the node, as XNNPACK's reshape rejects them.
    #[error("{0}")]
    Shape(String),
    /// An operand the node needs is not given.
    #[error("no {0} operand")]
    MissingOperand(&'static str),
    /// A result of more elements than the limit (`None`: their count overflows).
    #[error("result of {} elements exceeds the limit of {limit}", elements.map_or("too many".into(), |n| n.to_string()))]
    TooLarge {
        /// Elements of the result.
        elements: Option<usize>,
        /// The limit.
        limit: usize,
    },
    /// A node type this interpreter does not run.
    #[error("{0} is not supported")]
    Unsupported(&'static str),
}

/// A node's result, or why it could not run.
pub type NodeResult<X> = Result<X, NodeError>;

/// Refuses a result of `n` elements above `limit` before allocating it.
fn within(n: Option<usize>, limit: usize) -> NodeResult<usize> {
    match n {
        Some(n) if n <= limit => Ok(n),
        _ => Err(NodeError::TooLarge { elements: n, limit }),
    }
}

/// Elements of `shape`: 0 when any dimension is 0 (however large the others), saturating at
/// `usize::MAX` otherwise, so that a count from a file never overflows.
fn numel(shape: &[usize]) -> usize {
    if shape.contains(&0) { 0 } else { checked_numel(shape).unwrap_or(usize::MAX) }
}

/// `std::min(std::max(x, lo), hi)`, as XNNPACK's reference clamp.
fn clamp(x: f32, lo: f32, hi: f32) -> f32 {
    let y = if x < lo { lo } else { x };
    if hi < y { hi } else { y }
}

/// Applies a node's `output_min_max` when the node honours it (absent table: no clamp).
fn clamp_output(node: &XNode, t: &mut T) {
    if let (true, Some(MinMax { output_min, output_max })) = (node.node_type.honours_min_max(), node.output_min_max) {
        for v in &mut t.data {
            *v = clamp(*v, output_min, output_max);
        }
    }
}

/// Numpy-style broadcast of two shapes (right-aligned; equal or 1).
pub(crate) fn broadcast_shape(a: &[usize], b: &[usize]) -> NodeResult<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for (i, o) in out.iter_mut().enumerate() {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        *o = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return Err(NodeError::Shape(format!("shapes {a:?} and {b:?} do not broadcast"))),
        };
    }
    Ok(out)
}

/// The flat index into a tensor of `shape` read by output element `idx` (multi-index over
/// `out`, right-aligned, size-1 dimensions pinned to 0).
fn source_index(idx: &[usize], out: &[usize], shape: &[usize]) -> usize {
    let off = out.len() - shape.len();
    shape.iter().enumerate().fold(0, |acc, (d, s)| acc * s + if *s == 1 { 0 } else { idx[off + d] })
}

/// Steps a row-major multi-index; false after the last one.
fn next_index(idx: &mut [usize], shape: &[usize]) -> bool {
    for d in (0..shape.len()).rev() {
        idx[d] += 1;
        if idx[d] < shape[d] {
            return true;
        }
        idx[d] = 0;
    }
    false
}

fn binary(a: &T, b: &T, limit: usize, f: impl Fn(f32, f32) -> f32) -> NodeResult<T> {
    let shape = broadcast_shape(&a.shape, &b.shape)?;
    let n = within(checked_numel(&shape), limit)?;
    let mut data = Vec::with_capacity(n);
    if n > 0 {
        let mut idx = vec![0; shape.len()];
        loop {
            let x = a.data[source_index(&idx, &shape, &a.shape)];
            let y = b.data[source_index(&idx, &shape, &b.shape)];
            data.push(f(x, y));
            if !next_index(&mut idx, &shape) {
                break;
            }
        }
    }
    Ok(T { shape, data })
}

fn unary(x: &T, f: impl Fn(f32) -> f32) -> T {
    T { shape: x.shape.clone(), data: x.data.iter().map(|v| f(*v)).collect() }
}

/// Through float64, rounded once.
fn via_f64(f: impl Fn(f64) -> f64) -> impl Fn(f32) -> f32 {
    move |x| f(f64::from(x)) as f32
}

fn sigmoid(x: f32) -> f32 {
    // XNNPACK's reference: saturate far out, else e / (1 + e) with e = exp(x) in double.
    if x > 100.0 {
        1.0
    } else if x < -100.0 {
        0.0
    } else {
        let e = f64::from(x).exp();
        (e / (1.0 + e)) as f32
    }
}

fn fully_connected(x: &T, w: &T, bias: Option<&T>, flags: u32, limit: usize) -> NodeResult<T> {
    if w.shape.len() != 2 {
        return Err(NodeError::Shape(format!("filter has rank {} (2 needed)", w.shape.len())));
    }
    let transposed = flags & FLAG_TRANSPOSE_WEIGHTS != 0;
    let (n_out, n_in) = if transposed { (w.shape[1], w.shape[0]) } else { (w.shape[0], w.shape[1]) };
    let Some(&k) = x.shape.last() else { return Err(NodeError::Shape("input has rank 0".into())) };
    if k != n_in {
        return Err(NodeError::Shape(format!("input's last dimension {k} is not the filter's {n_in} input channels")));
    }
    if let Some(b) = bias
        && (numel(&b.shape) != n_out || b.shape.len() != 1)
    {
        return Err(NodeError::Shape(format!("bias shape {:?} is not [{n_out}]", b.shape)));
    }
    let rows = numel(&x.shape[..x.shape.len() - 1]);
    let n = within(rows.checked_mul(n_out), limit)?;
    let mut data = Vec::with_capacity(n);
    // An empty result is made by no loop (its rows may be astronomically many).
    for r in 0..if n == 0 { 0 } else { rows } {
        for o in 0..n_out {
            let mut acc = bias.map_or(0.0, |b| b.data[o]);
            for i in 0..k {
                let wv = if transposed { w.data[i * n_out + o] } else { w.data[o * k + i] };
                acc = x.data[r * k + i].mul_add(wv, acc);
            }
            data.push(acc);
        }
    }
    let mut shape = x.shape.clone();
    if let Some(last) = shape.last_mut() {
        *last = n_out;
    }
    Ok(T { shape, data })
}

fn batch_matmul(a: &T, b: &T, flags: u32, limit: usize) -> NodeResult<T> {
    if a.shape.len() < 2 || b.shape.len() < 2 {
        return Err(NodeError::Shape(format!(
            "operands of rank {} and {} (at least 2 needed)",
            a.shape.len(),
            b.shape.len()
        )));
    }
    let (ra, rb) = (a.shape.len(), b.shape.len());
    let (m, k) = (a.shape[ra - 2], a.shape[ra - 1]);
    let transposed = flags & FLAG_TRANSPOSE_WEIGHTS != 0;
    let (kb, n) = if transposed { (b.shape[rb - 1], b.shape[rb - 2]) } else { (b.shape[rb - 2], b.shape[rb - 1]) };
    if k != kb {
        return Err(NodeError::Shape(format!("inner dimensions {k} and {kb} differ")));
    }
    let batch = broadcast_shape(&a.shape[..ra - 2], &b.shape[..rb - 2])?;
    let mut shape = batch.clone();
    shape.extend([m, n]);
    let n_out = within(checked_numel(&shape), limit)?;
    let mut data = Vec::with_capacity(n_out);
    // An empty result is made by no loop (its batch may be astronomically large).
    let nb = if n_out == 0 { 0 } else { numel(&batch) };
    let mut idx = vec![0; batch.len()];
    for _ in 0..nb {
        let pa = source_index(&idx, &batch, &a.shape[..ra - 2]) * m * k;
        let pb = source_index(&idx, &batch, &b.shape[..rb - 2]) * kb * n;
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0f32;
                for p in 0..k {
                    let bv = if transposed { b.data[pb + j * k + p] } else { b.data[pb + p * n + j] };
                    acc = a.data[pa + i * k + p].mul_add(bv, acc);
                }
                data.push(acc);
            }
        }
        next_index(&mut idx, &batch);
    }
    Ok(T { shape, data })
}

fn softmax(x: &T) -> NodeResult<T> {
    let Some(&c) = x.shape.last() else { return Err(NodeError::Shape("softmax of a rank-0 tensor".into())) };
    let mut data = x.data.clone();
    if c > 0 {
        for row in data.chunks_mut(c) {
            let max = row.iter().fold(f32::NEG_INFINITY, |m, v| if *v > m { *v } else { m });
            let mut sum = 0.0f32;
            for v in row.iter_mut() {
                *v = f64::from(*v - max).exp() as f32;
                sum += *v;
            }
            for v in row.iter_mut() {
                *v /= sum;
            }
        }
    }
    Ok(T { shape: x.shape.clone(), data })
}

fn transpose(x: &T, perm: &[u32]) -> NodeResult<T> {
    if perm.len() != x.shape.len() {
        return Err(NodeError::Shape(format!("perm of {} entries for a rank-{} input", perm.len(), x.shape.len())));
    }
    let perm: Vec<usize> = perm.iter().map(|p| *p as usize).collect();
    let shape: Vec<usize> = perm.iter().map(|p| x.shape[*p]).collect();
    // Row-major strides of the input.
    let mut strides = vec![1usize; x.shape.len()];
    for d in (0..x.shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1].saturating_mul(x.shape[d + 1]);
    }
    let n = numel(&shape);
    let mut data = Vec::with_capacity(n);
    if n > 0 {
        let mut idx = vec![0; shape.len()];
        loop {
            let src: usize = idx.iter().zip(&perm).map(|(i, p)| i * strides[*p]).sum();
            data.push(x.data[src]);
            if !next_index(&mut idx, &shape) {
                break;
            }
        }
    }
    Ok(T { shape, data })
}

fn reshape(x: &T, new_shape: &[u32]) -> NodeResult<T> {
    let n = x.data.len();
    let Some(known) = new_shape.iter().filter(|d| **d != 0).try_fold(1usize, |a, d| a.checked_mul(*d as usize)) else {
        return Err(NodeError::Shape(format!("{n} elements do not fill {new_shape:?}")));
    };
    let shape: Vec<usize> = if new_shape.contains(&0) {
        if known == 0 || !n.is_multiple_of(known) {
            return Err(NodeError::Shape(format!("{n} elements do not fill {new_shape:?}")));
        }
        new_shape.iter().map(|d| if *d == 0 { n / known } else { *d as usize }).collect()
    } else {
        new_shape.iter().map(|d| *d as usize).collect()
    };
    if numel(&shape) != n {
        return Err(NodeError::Shape(format!("{n} elements do not fill {new_shape:?}")));
    }
    Ok(T { shape, data: x.data.clone() })
}

/// Runs one node on its operands (in the order of `Payload::inputs`); its output, refused
/// beyond `limit` elements.
pub fn run_node(node: &XNode, ins: &[&T], limit: usize) -> NodeResult<T> {
    use NodeType::*;
    let x = ins.first().copied().ok_or(NodeError::MissingOperand("first"))?;
    let second = || ins.get(1).copied().ok_or(NodeError::MissingOperand("second"));
    let mut out = match (node.node_type, &node.payload) {
        (XNNAdd, _) => binary(x, second()?, limit, |a, b| a + b)?,
        (XNNSubtract, _) => binary(x, second()?, limit, |a, b| a - b)?,
        (XNNMultiply, _) => binary(x, second()?, limit, |a, b| a * b)?,
        (XNNDiv, _) => binary(x, second()?, limit, |a, b| a / b)?,
        (XNNMinimum, _) => binary(x, second()?, limit, |a, b| if a < b { a } else { b })?,
        (XNNMaximum, _) => binary(x, second()?, limit, |a, b| if a > b { a } else { b })?,
        (XNNClamp, _) => match node.output_min_max {
            Some(m) => unary(x, |v| clamp(v, m.output_min, m.output_max)),
            None => x.clone(),
        },
        (XNNNegate, _) => unary(x, |v| -v),
        (XNNAbs, _) => unary(x, f32::abs),
        (XNNSquare, _) => unary(x, |v| v * v),
        (XNNSquareRoot, _) => unary(x, f32::sqrt),
        (XNNSigmoid, _) => unary(x, sigmoid),
        (XNNTanh, _) => unary(x, via_f64(f64::tanh)),
        (XNNExp, _) => unary(x, via_f64(f64::exp)),
        (XNNSin, _) => unary(x, via_f64(f64::sin)),
        (XNNCos, _) => unary(x, via_f64(f64::cos)),
        (XNNCeiling, _) => unary(x, f32::ceil),
        (XNNFloor, _) => unary(x, f32::floor),
        (XNNCopy, _) => x.clone(),
        (XNNSoftmax, _) => softmax(x)?,
        (XNNFullyConnected, Payload::FullyConnected { bias_id, flags, .. }) => {
            let bias = if *bias_id == INVALID_ID {
                None
            } else {
                Some(ins.get(2).copied().ok_or(NodeError::MissingOperand("bias"))?)
            };
            fully_connected(x, second()?, bias, *flags, limit)?
        }
        (XNNBatchMatrixMultiply, Payload::Node2x1 { flags, .. }) => batch_matmul(x, second()?, *flags, limit)?,
        (XNNStaticTranspose, Payload::StaticTranspose { perm: Some(p), .. }) => transpose(x, p)?,
        (XNNStaticReshape, Payload::StaticReshape { new_shape: Some(s), .. }) => reshape(x, s)?,
        (t, _) => return Err(NodeError::Unsupported(t.name())),
    };
    // Clamp already applied its bounds; every other honouring node clamps its result here.
    if node.node_type != XNNClamp {
        clamp_output(node, &mut out);
    }
    Ok(out)
}
