//! Error bounds of an XNNPACK delegate, node by node: every node kind gets `ir::bound`'s rule for
//! what it computes (an IR operator where it is one, else a function rule or the softmax rule),
//! inside an approximating backend, on the reference interpreter's values.
//! May not touch: the rules themselves (`ir::bound`), the interpreter's arithmetic.

use super::interp::{self, T};
use crate::ir::Op;
use crate::ir::bound::{Bound, Context, Function, of_function, op_bound, softmax};
use crate::ir::value::{Data, Tensor, Val};
use pte::xnnpack::{FLAG_TRANSPOSE_WEIGHTS, INVALID_ID, NodeType, Payload, XNode};

const IN_BACKEND: Context = Context { framework: false, approximate: true };

fn val(t: &T) -> Val {
    Val::Tensor(Tensor { shape: t.shape.clone(), data: Data::F32(t.data.clone()) })
}

fn reshaped(t: &T, shape: Vec<usize>) -> Val {
    Val::Tensor(Tensor { shape, data: Data::F32(t.data.clone()) })
}

/// The bound of one node's result `out` from its operands and their bounds.
pub fn node_bound(node: &XNode, ins: &[(&T, &Bound)], out: &T) -> Bound {
    use NodeType::*;
    let Some(&(x, ex)) = ins.first() else { return Bound::Any };
    let o = val(out);
    let op2 = |op: Op| match ins.get(1) {
        Some(&(y, ey)) => op_bound(&op, &[&val(x), &val(y)], &[ex, ey], &o, IN_BACKEND),
        None => Bound::Any,
    };
    let f1 = |f: Function| of_function(f, &[&val(x)], &[ex], &o, true);
    match node.node_type {
        XNNAdd => op2(Op::Add),
        XNNSubtract => op2(Op::Sub),
        XNNMultiply => op2(Op::Mul),
        XNNDiv => op2(Op::Div),
        XNNMinimum | XNNMaximum => match ins.get(1) {
            Some(&(y, ey)) => {
                let f = if node.node_type == XNNMinimum { Function::Min } else { Function::Max };
                of_function(f, &[&val(x), &val(y)], &[ex, ey], &o, true)
            }
            None => Bound::Any,
        },
        XNNSquare => op_bound(&Op::Mul, &[&val(x), &val(x)], &[ex, ex], &o, IN_BACKEND),
        XNNSin => op_bound(&Op::Sin, &[&val(x)], &[ex], &o, IN_BACKEND),
        XNNCos => op_bound(&Op::Cos, &[&val(x)], &[ex], &o, IN_BACKEND),
        XNNClamp => f1(Function::Clamp),
        XNNNegate => f1(Function::Neg),
        XNNAbs => f1(Function::Abs),
        XNNCeiling => f1(Function::Ceil),
        XNNFloor => f1(Function::Floor),
        XNNSquareRoot => f1(Function::Sqrt),
        XNNExp => f1(Function::Exp),
        XNNTanh => f1(Function::Tanh),
        XNNSigmoid => f1(Function::Sigmoid),
        XNNSoftmax => softmax(&val(x), ex, &o, true),
        // Row-major order is kept: the same bound element for element.
        XNNCopy | XNNStaticReshape => ex.clone(),
        XNNStaticTranspose => match &node.payload {
            Payload::StaticTranspose { perm: Some(p), .. } => {
                let dims = p.iter().map(|d| i64::from(*d)).collect();
                op_bound(&Op::PermuteCopy { dims }, &[&val(x)], &[ex], &o, IN_BACKEND)
            }
            _ => Bound::Any,
        },
        XNNFullyConnected => fully_connected(node, ins, out),
        XNNBatchMatrixMultiply => batch_matmul(node, ins, out),
        _ => Bound::Any,
    }
}

/// FullyConnected as a product of rows: the input flattened to `[rows, k]`, the filter
/// `[n, k]` (`linear`) or `[k, n]` when transposed (`addmm`), a missing bias as zeros.
fn fully_connected(node: &XNode, ins: &[(&T, &Bound)], out: &T) -> Bound {
    let (Some(&(x, ex)), Some(&(w, ew))) = (ins.first(), ins.get(1)) else { return Bound::Any };
    let Payload::FullyConnected { bias_id, flags, .. } = &node.payload else { return Bound::Any };
    let Some(&k) = x.shape.last() else { return Bound::Any };
    let rows = x.data.len().checked_div(k).unwrap_or(0);
    let transposed = flags & FLAG_TRANSPOSE_WEIGHTS != 0;
    let n = out.shape.last().copied().unwrap_or(0);
    let zeros = T::new(vec![n], vec![0.0; n]);
    let (b, eb) = match ins.get(2) {
        Some(&(b, eb)) if *bias_id != INVALID_ID => (b, eb),
        _ => (&zeros, &Bound::Exact),
    };
    let (xv, wv, bv) = (reshaped(x, vec![rows, k]), val(w), val(b));
    let o = reshaped(out, vec![rows, n]);
    if transposed {
        op_bound(&Op::Addmm, &[&bv, &xv, &wv], &[eb, ex, ew], &o, IN_BACKEND)
    } else {
        op_bound(&Op::Linear, &[&xv, &wv, &bv], &[ex, ew, eb], &o, IN_BACKEND)
    }
}

/// A batched product: each batch's `[m, k] @ [k, n]` (the second operand transposed back when
/// the node says so) bounded as `mm`, batches broadcast as the node broadcasts them.
fn batch_matmul(node: &XNode, ins: &[(&T, &Bound)], out: &T) -> Bound {
    let (Some(&(a, ea)), Some(&(b, eb))) = (ins.first(), ins.get(1)) else { return Bound::Any };
    let (ra, rb) = (a.shape.len(), b.shape.len());
    if ra < 2 || rb < 2 {
        return Bound::Any;
    }
    let transposed = matches!(node.payload, Payload::Node2x1 { flags, .. } if flags & FLAG_TRANSPOSE_WEIGHTS != 0);
    let (m, k) = (a.shape[ra - 2], a.shape[ra - 1]);
    let n = if transposed { b.shape[rb - 2] } else { b.shape[rb - 1] };
    let Ok(batch) = interp::broadcast_shape(&a.shape[..ra - 2], &b.shape[..rb - 2]) else { return Bound::Any };
    let batches: usize = batch.iter().product();
    let (ma, mb) =
        (crate::ir::value::bmap(&batch, &a.shape[..ra - 2]), crate::ir::value::bmap(&batch, &b.shape[..rb - 2]));
    // The interpreter ran these shapes; a bound is still never read out of range.
    let fits = out.data.len() == batches * m * n
        && ma.iter().all(|i| (i + 1) * m * k <= a.data.len())
        && mb.iter().all(|i| (i + 1) * k * n <= b.data.len());
    if !fits {
        return Bound::Any;
    }
    let (ea, eb) = (ea.abs_of(a.data.len()), eb.abs_of(b.data.len()));
    let mut out_e = Vec::with_capacity(out.data.len());
    for bi in 0..batches {
        let (pa, pb) = (ma[bi] * m * k, mb[bi] * k * n);
        let a_slice = T::new(vec![m, k], a.data[pa..pa + m * k].to_vec());
        let a_err = Bound::Abs(ea[pa..pa + m * k].to_vec());
        // The second operand as [k, n].
        let (b_data, b_err): (Vec<f32>, Vec<f64>) = if transposed {
            (0..k * n).map(|i| (i / n, i % n)).map(|(p, j)| (b.data[pb + j * k + p], eb[pb + j * k + p])).unzip()
        } else {
            (b.data[pb..pb + k * n].to_vec(), eb[pb..pb + k * n].to_vec())
        };
        let o = reshaped(&T::new(vec![m, n], out.data[bi * m * n..(bi + 1) * m * n].to_vec()), vec![m, n]);
        let e = op_bound(
            &Op::Mm,
            &[&val(&a_slice), &reshaped(&T::new(vec![k, n], b_data), vec![k, n])],
            &[&a_err, &Bound::Abs(b_err)],
            &o,
            IN_BACKEND,
        );
        out_e.extend(e.abs_of(m * n));
    }
    Bound::from_abs(out_e)
}
