//! Eager interpreter of the IR: the output oracle. Lowered modules are evaluated from their own
//! sub-graph (never from processed bytes) and every call is recorded with its inputs and
//! outputs. Arithmetic follows what ExecuTorch's portable kernels compute, written here on its
//! own (nothing is shared with `runtime::kernels`): float32 ops in f32, products summed in f32
//! in index order, int64 arithmetic wrapping in two's complement, NaN propagating.

use super::bound::Bound;
use super::infer::{IrError, broadcast, err, norm_dim};
use super::*;

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
    fn gather(&self, shape: Vec<usize>, idx: &[usize]) -> Tensor {
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

/// One call of a lowered module, as the interpreter made it.
#[derive(Clone, Debug, PartialEq)]
pub struct CallRecord {
    /// Static call site: index of the Call node in the method's pre-order walk (sub-graphs in
    /// place), which is the order the emitter emits DelegateCalls in.
    pub site: usize,
    /// Module index.
    pub module: usize,
    /// The call's inputs.
    pub inputs: Vec<Val>,
    /// The module's outputs.
    pub outputs: Vec<Val>,
    /// How far a conforming implementation's inputs may be from `inputs`.
    pub input_bounds: Vec<Bound>,
    /// How far a conforming implementation's outputs may be from `outputs`.
    pub output_bounds: Vec<Bound>,
}

fn strides(s: &[usize]) -> Vec<usize> {
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
pub(crate) fn split_at_dim(shape: &[usize], d: usize) -> (usize, usize, usize) {
    let product = |dims: &[usize]| dims.iter().fold(1usize, |a, b| a.saturating_mul(*b));
    (product(&shape[..d]), shape[d], product(&shape[d + 1..]))
}

/// For each element of the broadcast shape `out`, the flat index of the element of `inp`.
pub(crate) fn bmap(out: &[usize], inp: &[usize]) -> Vec<usize> {
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

fn t<'v>(v: &'v Val, path: &str) -> Result<&'v Tensor, IrError> {
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

fn select(x: &Tensor, d: usize, idx: usize) -> Tensor {
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

fn stack(rows: Vec<Val>, path: &str) -> Result<Val, IrError> {
    let n = rows.len();
    let mut inner: Option<Vec<usize>> = None;
    let mut data: Option<Data> = None;
    for r in rows {
        let Val::Tensor(r) = r else { return Err(err(path, "loop output is not a tensor")) };
        inner.get_or_insert_with(|| r.shape.clone());
        match (&mut data, r.data) {
            (None, d) => data = Some(d),
            (Some(Data::F32(a)), Data::F32(b)) => a.extend(b),
            (Some(Data::I64(a)), Data::I64(b)) => a.extend(b),
            (Some(Data::Bool(a)), Data::Bool(b)) => a.extend(b),
            _ => return Err(err(path, "loop outputs change dtype")),
        }
    }
    let (Some(s), Some(data)) = (inner, data) else { return Err(err(path, "empty loop")) };
    let mut shape = vec![n];
    shape.extend(s);
    Ok(Val::Tensor(Tensor { shape, data }))
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

/// Number of Call nodes in `g`, sub-graphs included.
fn calls_in(g: &Graph) -> usize {
    let mut n = 0;
    g.walk(0, &mut |node, _| n += usize::from(matches!(node, Node::Call { .. })));
    n
}

struct Interp<'p> {
    modules: &'p [LoweredModule],
    calls: Vec<CallRecord>,
    /// The calls made before the first decision that may go the other way ([`Run::decided_calls`]).
    decided: Option<usize>,
    /// Inside a module of an approximating backend (`bound::approximates`).
    approximate: bool,
}

/// Elements per leading index of a tensor value.
fn row_len(v: &Val) -> usize {
    match v {
        Val::Tensor(t) => t.shape.iter().skip(1).product(),
        _ => 1,
    }
}

/// The error of row `k` of a value with rows of `row` elements.
fn row_err(e: &Bound, total: usize, row: usize, k: usize) -> Bound {
    e.gather(total, &(k * row..(k + 1) * row).collect::<Vec<_>>())
}

fn val_len(v: &Val) -> usize {
    match v {
        Val::Tensor(t) => t.len(),
        _ => 1,
    }
}

/// Where a graph or node sits (`methods[0].graph.nodes[3].body`), written out only when an
/// error names it: evaluation passes it down without formatting anything.
#[derive(Clone, Copy)]
enum At<'a> {
    /// A path given as text.
    Root(&'a str),
    /// The graph of method `i`.
    Method(usize),
    /// The graph of module `i`.
    Module(usize),
    /// Node `i` of a graph.
    Node(&'a At<'a>, usize),
    /// A sub-graph member (`then_graph`, `body`, …) of a node.
    Member(&'a At<'a>, &'static str),
}

impl std::fmt::Display for At<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            At::Root(p) => f.write_str(p),
            At::Method(i) => write!(f, "methods[{i}].graph"),
            At::Module(i) => write!(f, "modules[{i}].graph"),
            At::Node(g, i) => write!(f, "{g}.nodes[{i}]"),
            At::Member(n, m) => write!(f, "{n}.{m}"),
        }
    }
}

/// `e` (made with an empty path) placed at `at`.
fn placed<'a>(at: &'a At<'a>) -> impl FnOnce(IrError) -> IrError + 'a {
    move |e| IrError { path: at.to_string(), detail: e.detail }
}

impl Interp<'_> {
    /// Marks a decision that may go the other way: the calls made so far are the decided ones.
    fn undecide(&mut self) {
        self.decided.get_or_insert(self.calls.len());
    }

    /// Evaluates `g` on `inputs` (with their errors); the first Call node of `g` (pre-order) is
    /// call site `site`. Returns the outputs and their errors.
    fn graph(
        &mut self,
        g: &Graph,
        inputs: &[Val],
        in_errs: &[Bound],
        path: &At<'_>,
        site: usize,
    ) -> Result<(Vec<Val>, Vec<Bound>), IrError> {
        if inputs.len() != g.inputs.len() {
            return Err(err(
                &path.to_string(),
                format!("{} inputs given, graph takes {}", inputs.len(), g.inputs.len()),
            ));
        }
        // Values from outside (a caller's arguments) must have the declared types.
        for (i, (v, ty)) in inputs.iter().zip(&g.inputs).enumerate() {
            if !fits(v, ty) {
                return Err(err(&path.to_string(), format!("input {i} does not have the declared type {ty:?}")));
            }
        }
        let mut vals: Vec<Val> = g.constants.iter().map(constant).collect();
        let mut errs: Vec<Bound> = vec![Bound::Exact; vals.len()];
        vals.extend(inputs.iter().cloned());
        errs.extend((0..inputs.len()).map(|i| in_errs.get(i).cloned().unwrap_or_default()));
        let mut site = site;
        for (i, n) in g.nodes.iter().enumerate() {
            let p = At::Node(path, i);
            let get = |r: Ref| vals.get(r).ok_or_else(|| err(&p.to_string(), format!("ref {r} undefined")));
            let get_all = |rs: &[Ref]| rs.iter().map(|r| get(*r).cloned()).collect::<Result<Vec<_>, _>>();
            let errs_of =
                |rs: &[Ref]| rs.iter().map(|r| errs.get(*r).cloned().unwrap_or(Bound::Any)).collect::<Vec<_>>();
            let (out, out_errs): (Vec<Val>, Vec<Bound>) = match n {
                Node::Op { op, args } => {
                    let a = args.iter().map(|r| get(*r)).collect::<Result<Vec<_>, _>>()?;
                    let v = eval_op(op, &a, "").map_err(placed(&p))?;
                    let es = errs_of(args);
                    let es: Vec<&Bound> = es.iter().collect();
                    let e = super::bound::of_op(op, &a, &es, &v);
                    let e = if self.approximate { super::bound::approximate(op, &a, &es, &v, e) } else { e };
                    let e = super::bound::signed_zeros(e, &v, es.iter().all(|b| b.is_exact()));
                    (vec![v], vec![e])
                }
                Node::Call { module, args } => {
                    let m = self.modules.get(*module).ok_or_else(|| err(&p.to_string(), "module"))?;
                    let a = get_all(args)?;
                    let ae = errs_of(args);
                    let outer = std::mem::replace(&mut self.approximate, super::bound::approximates(&m.backend));
                    let res = self.graph(&m.graph, &a, &ae, &At::Module(*module), 0);
                    self.approximate = outer;
                    let (out, e) = res?;
                    self.calls.push(CallRecord {
                        site,
                        module: *module,
                        inputs: a,
                        outputs: out.clone(),
                        input_bounds: ae,
                        output_bounds: e.clone(),
                    });
                    (out, e)
                }
                Node::Cond { pred, then_graph, else_graph, operands } => {
                    let truth = match get(*pred)? {
                        Val::Bool(b) => *b,
                        // A bool tensor is true iff every element is (ExecuTorch's JumpFalseCall).
                        Val::Tensor(Tensor { data: Data::Bool(v), .. }) => v.iter().all(|b| *b),
                        other => return Err(err(&p.to_string(), format!("pred {other:?}"))),
                    };
                    let a = get_all(operands)?;
                    let ae = errs_of(operands);
                    // A decision that may go the other way: nothing is known of the result, nor
                    // of the calls from here on.
                    let undecided = errs.get(*pred).is_none_or(Bound::may_differ);
                    if undecided {
                        self.undecide();
                    }
                    let (out, e) = if truth {
                        self.graph(then_graph, &a, &ae, &At::Member(&p, "then_graph"), site)?
                    } else {
                        self.graph(else_graph, &a, &ae, &At::Member(&p, "else_graph"), site + calls_in(then_graph))?
                    };
                    let e = if undecided { vec![Bound::Any; out.len()] } else { e };
                    (out, e)
                }
                Node::Map { body, xs, args } => {
                    let xv = get(*xs)?.clone();
                    let x = t(&xv, "").map_err(placed(&p))?.clone();
                    let xe = errs.get(*xs).cloned().unwrap_or(Bound::Any);
                    let extra = get_all(args)?;
                    let extra_e = errs_of(args);
                    let (row, total) = (row_len(&xv), x.len());
                    let mut rows = Vec::new();
                    let mut row_errs = Vec::new();
                    for k in 0..x.shape.first().copied().unwrap_or(0) {
                        let mut a = vec![Val::Tensor(select(&x, 0, k))];
                        a.extend(extra.iter().cloned());
                        let mut ae = vec![row_err(&xe, total, row, k)];
                        ae.extend(extra_e.iter().cloned());
                        let (o, e) = self.graph(body, &a, &ae, &At::Member(&p, "body"), site)?;
                        for (v, e) in o.iter().zip(e) {
                            row_errs.push((val_len(v), e));
                        }
                        rows.extend(o);
                    }
                    (vec![stack(rows, "").map_err(placed(&p))?], vec![Bound::stack(&row_errs)])
                }
                Node::Scan { body, init, xs } => {
                    let mut carries = get_all(init)?;
                    let mut carry_errs = errs_of(init);
                    let xvals = xs.iter().map(|r| get(*r).cloned()).collect::<Result<Vec<_>, _>>()?;
                    let xerrs = errs_of(xs);
                    let xts =
                        xvals.iter().map(|v| t(v, "").cloned()).collect::<Result<Vec<_>, _>>().map_err(placed(&p))?;
                    let n = xts.first().and_then(|x| x.shape.first().copied()).unwrap_or(0);
                    let mut ys: Vec<Vec<Val>> = Vec::new();
                    let mut ys_e: Vec<Vec<(usize, Bound)>> = Vec::new();
                    for k in 0..n {
                        let mut a = carries.clone();
                        a.extend(xts.iter().map(|x| Val::Tensor(select(x, 0, k))));
                        let mut ae = carry_errs.clone();
                        ae.extend(xvals.iter().zip(&xerrs).map(|(v, e)| row_err(e, val_len(v), row_len(v), k)));
                        let (mut out, mut oe) = self.graph(body, &a, &ae, &At::Member(&p, "body"), site)?;
                        let rest = out.split_off(carries.len());
                        let rest_e = oe.split_off(carries.len());
                        carries = out;
                        carry_errs = oe;
                        if ys.is_empty() {
                            ys = vec![Vec::new(); rest.len()];
                            ys_e = vec![Vec::new(); rest.len()];
                        }
                        for ((slot, se), (y, e)) in ys.iter_mut().zip(ys_e.iter_mut()).zip(rest.into_iter().zip(rest_e))
                        {
                            se.push((val_len(&y), e));
                            slot.push(y);
                        }
                    }
                    let mut out = carries;
                    let mut oe = carry_errs;
                    for (y, e) in ys.into_iter().zip(ys_e) {
                        out.push(stack(y, "").map_err(placed(&p))?);
                        oe.push(Bound::stack(&e));
                    }
                    (out, oe)
                }
                Node::While { cond, body, carried, max_iterations } => {
                    let mut c = get_all(carried)?;
                    let mut ce = errs_of(carried);
                    let body_site = site + calls_in(cond);
                    let mut iterations = 0u32;
                    let mut undecided = false;
                    loop {
                        let (cv, cerr) = self.graph(cond, &c, &ce, &At::Member(&p, "cond"), site)?;
                        if cerr.first().is_none_or(Bound::may_differ) {
                            undecided = true;
                            self.undecide();
                        }
                        match cv.first() {
                            Some(Val::Bool(true)) => {}
                            Some(Val::Bool(false)) => break,
                            other => return Err(err(&p.to_string(), format!("while condition gave {other:?}"))),
                        }
                        iterations += 1;
                        if iterations > *max_iterations {
                            return Err(err(
                                &p.to_string(),
                                format!("while_loop exceeded {max_iterations} iterations"),
                            ));
                        }
                        (c, ce) = self.graph(body, &c, &ce, &At::Member(&p, "body"), body_site)?;
                    }
                    let ce = if undecided { vec![Bound::Any; c.len()] } else { ce };
                    (c, ce)
                }
            };
            site += match n {
                Node::Call { .. } => 1,
                other => other.subgraphs().into_iter().map(calls_in).sum(),
            };
            vals.extend(out);
            errs.extend(out_errs);
        }
        let outs = g
            .outputs
            .iter()
            .map(|r| vals.get(*r).cloned().ok_or_else(|| err(&path.to_string(), format!("output ref {r} undefined"))))
            .collect::<Result<Vec<_>, _>>()?;
        let out_errs = g.outputs.iter().map(|r| errs.get(*r).cloned().unwrap_or(Bound::Any)).collect();
        Ok((outs, out_errs))
    }
}

/// Evaluates a graph on `inputs` (its calls resolve against `modules`).
pub fn eval_graph(g: &Graph, modules: &[LoweredModule], inputs: &[Val], path: &str) -> Result<Vec<Val>, IrError> {
    Interp { modules, calls: Vec::new(), decided: None, approximate: false }
        .graph(g, inputs, &[], &At::Root(path), 0)
        .map(|(v, _)| v)
}

/// One eager run of a method: outputs, how far a conforming implementation may be from each
/// (`bound`), and every module call made, in order.
#[derive(Clone, Debug)]
pub struct Run {
    /// Outputs.
    pub outputs: Vec<Val>,
    /// The tolerance of each output.
    pub bounds: Vec<Bound>,
    /// Every module call.
    pub calls: Vec<CallRecord>,
    /// How many of `calls`, from the first, any conforming implementation makes as they are
    /// (site and order): those before the first decision that may go the other way (a cond
    /// predicate or while condition whose bound lets it differ). After it, a conforming run may
    /// take the other branch or another number of iterations, and make other calls.
    pub decided_calls: usize,
}

/// Runs method `name` of `p` on exact `inputs`.
pub fn run_method(p: &IrProgram, name: &str, inputs: &[Val]) -> Result<Run, IrError> {
    let (i, m) = p
        .methods
        .iter()
        .enumerate()
        .find(|(_, m)| m.name == name)
        .ok_or_else(|| err("methods", format!("no method `{name}`")))?;
    let mut interp = Interp { modules: &p.modules, calls: Vec::new(), decided: None, approximate: false };
    let (outputs, bounds) = interp.graph(&m.graph, inputs, &[], &At::Method(i), 0)?;
    let decided_calls = interp.decided.unwrap_or(interp.calls.len());
    Ok(Run { outputs, bounds, calls: interp.calls, decided_calls })
}

/// Runs method `name` of `p` on `inputs`: its outputs and every module call it made, in order.
pub fn eval_method_calls(p: &IrProgram, name: &str, inputs: &[Val]) -> Result<(Vec<Val>, Vec<CallRecord>), IrError> {
    run_method(p, name, inputs).map(|r| (r.outputs, r.calls))
}

/// Runs method `name` of `p` on `inputs`.
pub fn eval_method(p: &IrProgram, name: &str, inputs: &[Val]) -> Result<Vec<Val>, IrError> {
    run_method(p, name, inputs).map(|r| r.outputs)
}

/// Deterministic, tame inputs for a graph (multiples of 1/256 in about ±3.9, ints in [-10,
/// 10]; dynamic tensors at their bound), for examples and tests; the campaign draws harsher
/// ones (`generator::inputs`).
pub fn sample_inputs(g: &Graph, seed: u64) -> Vec<Val> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    g.inputs
        .iter()
        .map(|t| match t {
            ValueType::Tensor { dtype, shape, .. } => {
                let n: usize = shape.iter().product();
                let data = match dtype {
                    Dtype::F32 => Data::F32((0..n).map(|_| ((next() % 2001) as f32 - 1000.0) / 256.0).collect()),
                    Dtype::I64 => Data::I64((0..n).map(|_| (next() % 21) as i64 - 10).collect()),
                    Dtype::Bool => Data::Bool((0..n).map(|_| next() % 2 == 1).collect()),
                };
                Val::Tensor(Tensor { shape: shape.clone(), data })
            }
            ValueType::Int => Val::Int((next() % 7) as i64),
            ValueType::Bool => Val::Bool(next() % 2 == 0),
            ValueType::Double => Val::Double(((next() % 2001) as f64 - 1000.0) / 64.0),
        })
        .collect()
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
