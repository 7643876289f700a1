//! Eager interpreter of the IR: the output oracle. Lowered modules are evaluated from their own
//! sub-graph (never from processed bytes). float32 results are rounded to f32 after every op and
//! reductions accumulate in f32 in index order — the portable kernels' arithmetic — so a correct
//! emitter + runtime reproduces these outputs bit for bit.

use super::infer::{broadcast, err, norm_dim, IrError};
use super::*;

/// An IR tensor value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tens {
    /// Element type.
    pub dtype: Dtype,
    /// Shape.
    pub shape: Vec<usize>,
    /// Row-major values (f32 values are exactly representable; bool as 0/1).
    pub data: Vec<f64>,
}

/// An IR value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Val {
    /// Tensor.
    Tensor(Tens),
    /// Int scalar.
    Int(i64),
    /// Bool scalar.
    Bool(bool),
    /// Double scalar.
    Double(f64),
}

impl Val {
    /// Bitwise equality (NaN equals NaN of the same bits).
    pub fn same(&self, other: &Val) -> bool {
        match (self, other) {
            (Val::Tensor(a), Val::Tensor(b)) => {
                a.dtype == b.dtype
                    && a.shape == b.shape
                    && a.data.iter().zip(&b.data).all(|(x, y)| x.to_bits() == y.to_bits() || x.is_nan() && y.is_nan())
            }
            (Val::Double(a), Val::Double(b)) => a.to_bits() == b.to_bits(),
            (a, b) => a == b,
        }
    }
}

fn round(dtype: Dtype, v: f64) -> f64 {
    match dtype {
        Dtype::F32 => v as f32 as f64,
        Dtype::I64 => v,
        Dtype::Bool => (v != 0.0) as i64 as f64,
    }
}

fn strides(s: &[usize]) -> Vec<usize> {
    let mut st = vec![1; s.len()];
    for i in (0..s.len().saturating_sub(1)).rev() {
        st[i] = st[i + 1] * s[i + 1];
    }
    st
}

/// `(outer, size, inner)` of a row-major shape around dimension `d`: element `(o, k, i)` is at
/// `o * size * inner + k * inner + i`.
fn split_at_dim(shape: &[usize], d: usize) -> (usize, usize, usize) {
    (shape[..d].iter().product(), shape[d], shape[d + 1..].iter().product())
}

fn bmap(out: &[usize], inp: &[usize]) -> Vec<usize> {
    let n: usize = out.iter().product();
    let st = strides(inp);
    let off = out.len() - inp.len();
    let ost = strides(out);
    (0..n)
        .map(|flat| {
            let mut idx = 0;
            for d in off..out.len() {
                let i = (flat / ost[d]) % out[d];
                let k = d - off;
                if inp[k] != 1 {
                    idx += i * st[k];
                }
            }
            idx
        })
        .collect()
}

fn t<'v>(v: &'v Val, path: &str) -> Result<&'v Tens, IrError> {
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

fn binary(a: &Tens, b: &Tens, path: &str, f: impl Fn(f64, f64) -> f64) -> Result<Val, IrError> {
    let shape = broadcast(&a.shape, &b.shape).ok_or_else(|| err(path, "shapes do not broadcast"))?;
    let (ma, mb) = (bmap(&shape, &a.shape), bmap(&shape, &b.shape));
    let data = ma.iter().zip(&mb).map(|(x, y)| round(a.dtype, f(a.data[*x], b.data[*y]))).collect();
    Ok(Val::Tensor(Tens { dtype: a.dtype, shape, data }))
}

fn matmul(x: &Tens, w: &Tens, w_transposed: bool, bias: Option<&Tens>, path: &str) -> Result<Val, IrError> {
    if x.shape.len() != 2 || w.shape.len() != 2 {
        return Err(err(path, format!("matmul needs 2-d operands, got {:?} and {:?}", x.shape, w.shape)));
    }
    let (n, k) = (x.shape[0], x.shape[1]);
    let (k2, m) = if w_transposed { (w.shape[1], w.shape[0]) } else { (w.shape[0], w.shape[1]) };
    if k != k2 {
        return Err(err(path, format!("matmul inner dimensions differ: {:?} and {:?}", x.shape, w.shape)));
    }
    if let Some(b) = bias {
        if broadcast(&b.shape, &[n, m]).as_deref() != Some(&[n, m][..]) {
            return Err(err(path, format!("bias {:?} does not broadcast to [{n}, {m}]", b.shape)));
        }
    }
    let out = vec![n, m];
    let bm = bias.map(|b| bmap(&out, &b.shape));
    let mut data = Vec::with_capacity(n * m);
    for i in 0..n {
        for j in 0..m {
            let mut acc = 0f32;
            for p in 0..k {
                let wv = if w_transposed { w.data[j * k + p] } else { w.data[p * m + j] };
                acc += x.data[i * k + p] as f32 * wv as f32;
            }
            let v = match (bias, &bm) {
                (Some(b), Some(map)) => acc + b.data[map[i * m + j]] as f32,
                _ => acc,
            };
            data.push(v as f64);
        }
    }
    if data.len() != n * m {
        return Err(err(path, "matmul shape"));
    }
    Ok(Val::Tensor(Tens { dtype: Dtype::F32, shape: out, data }))
}

/// Evaluates one op.
pub fn eval_op(op: &Op, a: &[&Val], path: &str) -> Result<Val, IrError> {
    use Op::*;
    Ok(match op {
        Add => binary(t(a[0], path)?, t(a[1], path)?, path, |x, y| x + y)?,
        Sub => binary(t(a[0], path)?, t(a[1], path)?, path, |x, y| x - y)?,
        Mul => binary(t(a[0], path)?, t(a[1], path)?, path, |x, y| x * y)?,
        Relu | Sin | Cos => {
            let x = t(a[0], path)?;
            let f = |v: f64| match op {
                Relu => {
                    if v > 0.0 || v.is_nan() {
                        v
                    } else {
                        0.0
                    }
                }
                Sin => (v as f32).sin() as f64,
                _ => (v as f32).cos() as f64,
            };
            Val::Tensor(Tens {
                dtype: x.dtype,
                shape: x.shape.clone(),
                data: x.data.iter().map(|v| round(x.dtype, f(*v))).collect(),
            })
        }
        Linear => matmul(t(a[0], path)?, t(a[1], path)?, true, Some(t(a[2], path)?), path)?,
        Addmm => matmul(t(a[1], path)?, t(a[2], path)?, false, Some(t(a[0], path)?), path)?,
        Mm => matmul(t(a[0], path)?, t(a[1], path)?, false, None, path)?,
        PermuteCopy { dims } => {
            let x = t(a[0], path)?;
            let dims: Vec<usize> = dims
                .iter()
                .map(|d| norm_dim(*d, x.shape.len()).ok_or_else(|| err(path, "dim")))
                .collect::<Result<_, _>>()?;
            let shape: Vec<usize> = dims.iter().map(|d| x.shape[*d]).collect();
            let (ist, ost) = (strides(&x.shape), strides(&shape));
            let n: usize = shape.iter().product();
            let data = (0..n)
                .map(|flat| {
                    let src: usize = (0..shape.len()).map(|d| ((flat / ost[d]) % shape[d]) * ist[dims[d]]).sum();
                    x.data[src]
                })
                .collect();
            Val::Tensor(Tens { dtype: x.dtype, shape, data })
        }
        Cumsum { dim } => {
            let x = t(a[0], path)?;
            let d = norm_dim(*dim, x.shape.len()).ok_or_else(|| err(path, "dim"))?;
            let (outer, size, inner) = split_at_dim(&x.shape, d);
            let mut data = x.data.clone();
            for o in 0..outer {
                for i in 0..inner {
                    let mut acc = 0f64;
                    for k in 0..size {
                        let p = o * size * inner + k * inner + i;
                        acc = round(x.dtype, acc + data[p]);
                        data[p] = acc;
                    }
                }
            }
            Val::Tensor(Tens { dtype: x.dtype, shape: x.shape.clone(), data })
        }
        SelectCopy { dim, index } => {
            let x = t(a[0], path)?;
            let d = norm_dim(*dim, x.shape.len()).ok_or_else(|| err(path, "dim"))?;
            let idx = if *index < 0 { index + x.shape[d] as i64 } else { *index } as usize;
            select(x, d, idx)
        }
        IndexSelect { dim } => {
            let x = t(a[0], path)?;
            let ix = t(a[1], path)?;
            let d = norm_dim(*dim, x.shape.len()).ok_or_else(|| err(path, "dim"))?;
            let (outer, size, inner) = split_at_dim(&x.shape, d);
            let mut data = Vec::new();
            for o in 0..outer {
                for &k in &ix.data {
                    let k = k as i64;
                    if k < 0 || k as usize >= size {
                        return Err(err(path, format!("index {k} out of range for size {size}")));
                    }
                    for i in 0..inner {
                        data.push(x.data[o * size * inner + k as usize * inner + i]);
                    }
                }
            }
            let mut shape = x.shape.clone();
            shape[d] = ix.data.len();
            Val::Tensor(Tens { dtype: x.dtype, shape, data })
        }
        Argmax { dim, keepdim } => {
            let x = t(a[0], path)?;
            let better = |c: f64, b: f64| c.is_nan() && !b.is_nan() || c > b;
            match dim {
                None => {
                    let mut best = 0;
                    for (i, v) in x.data.iter().enumerate() {
                        if better(*v, x.data[best]) {
                            best = i;
                        }
                    }
                    let shape = if *keepdim { vec![1; x.shape.len()] } else { vec![] };
                    Val::Tensor(Tens { dtype: Dtype::I64, shape, data: vec![best as f64] })
                }
                Some(dim) => {
                    let d = norm_dim(*dim, x.shape.len()).ok_or_else(|| err(path, "dim"))?;
                    let (outer, size, inner) = split_at_dim(&x.shape, d);
                    let mut data = Vec::new();
                    for o in 0..outer {
                        for i in 0..inner {
                            let at = |k: usize| x.data[o * size * inner + k * inner + i];
                            let mut best = 0;
                            for k in 1..size {
                                if better(at(k), at(best)) {
                                    best = k;
                                }
                            }
                            data.push(best as f64);
                        }
                    }
                    let mut shape = x.shape.clone();
                    if *keepdim {
                        shape[d] = 1;
                    } else {
                        shape.remove(d);
                    }
                    Val::Tensor(Tens { dtype: Dtype::I64, shape, data })
                }
            }
        }
        Gt { other } => {
            let x = t(a[0], path)?;
            Val::Tensor(Tens {
                dtype: Dtype::Bool,
                shape: x.shape.clone(),
                data: x.data.iter().map(|v| (*v > *other) as i64 as f64).collect(),
            })
        }
        SymSize { dim } => {
            let x = t(a[0], path)?;
            let d = norm_dim(*dim, x.shape.len()).ok_or_else(|| err(path, "dim"))?;
            Val::Int(x.shape[d] as i64)
        }
        ScalarAdd | ScalarSub | ScalarMul | ScalarEq | ScalarLt => {
            let (x, y) = (int(a[0], path)?, int(a[1], path)?);
            let overflow = || err(path, "integer overflow");
            match op {
                ScalarAdd => Val::Int(x.checked_add(y).ok_or_else(overflow)?),
                ScalarSub => Val::Int(x.checked_sub(y).ok_or_else(overflow)?),
                ScalarMul => Val::Int(x.checked_mul(y).ok_or_else(overflow)?),
                ScalarEq => Val::Bool(x == y),
                _ => Val::Bool(x < y),
            }
        }
    })
}

fn select(x: &Tens, d: usize, idx: usize) -> Val {
    let (outer, size, inner) = split_at_dim(&x.shape, d);
    let mut data = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        data.extend_from_slice(&x.data[o * size * inner + idx * inner..o * size * inner + idx * inner + inner]);
    }
    let mut shape = x.shape.clone();
    shape.remove(d);
    Val::Tensor(Tens { dtype: x.dtype, shape, data })
}

fn stack(rows: Vec<Val>, path: &str) -> Result<Val, IrError> {
    let mut data = Vec::new();
    let mut inner: Option<(Dtype, Vec<usize>)> = None;
    let n = rows.len();
    for r in rows {
        let r = match r {
            Val::Tensor(t) => t,
            other => return Err(err(path, format!("loop output {other:?} is not a tensor"))),
        };
        inner.get_or_insert((r.dtype, r.shape.clone()));
        data.extend(r.data);
    }
    let (dtype, s) = inner.ok_or_else(|| err(path, "empty loop"))?;
    let mut shape = vec![n];
    shape.extend(s);
    Ok(Val::Tensor(Tens { dtype, shape, data }))
}

/// Evaluates a graph on `inputs`.
pub fn eval_graph(g: &Graph, modules: &[LoweredModule], inputs: &[Val], path: &str) -> Result<Vec<Val>, IrError> {
    if inputs.len() != g.inputs.len() {
        return Err(err(path, format!("{} inputs given, graph takes {}", inputs.len(), g.inputs.len())));
    }
    // Values from outside (a backend's argument slots) must have the declared types: static
    // shapes exactly, dynamic ones the same rank within their bounds.
    for (i, (v, t)) in inputs.iter().zip(&g.inputs).enumerate() {
        let fits = match (v, t) {
            (Val::Tensor(x), ValueType::Tensor { dtype, shape, dynamic }) => {
                x.dtype == *dtype
                    && x.data.len() == x.shape.iter().product::<usize>()
                    && if *dynamic {
                        x.shape.len() == shape.len() && x.shape.iter().zip(shape).all(|(a, b)| a <= b)
                    } else {
                        x.shape == *shape
                    }
            }
            (Val::Int(_), ValueType::Int) | (Val::Bool(_), ValueType::Bool) | (Val::Double(_), ValueType::Double) => {
                true
            }
            _ => false,
        };
        if !fits {
            return Err(err(path, format!("input {i} does not have the declared type {t:?}")));
        }
    }
    let mut vals: Vec<Val> = g
        .constants
        .iter()
        .map(|c| {
            Val::Tensor(Tens {
                dtype: c.dtype,
                shape: c.shape.clone(),
                data: c.values.iter().map(|v| round(c.dtype, *v)).collect(),
            })
        })
        .collect();
    vals.extend(inputs.iter().cloned());
    for (i, n) in g.nodes.iter().enumerate() {
        let p = format!("{path}.nodes[{i}]");
        let get = |r: Ref| vals.get(r).ok_or_else(|| err(&p, format!("ref {r} undefined")));
        let out: Vec<Val> = match n {
            Node::Op { op, args } => {
                let a = args.iter().map(|r| get(*r)).collect::<Result<Vec<_>, _>>()?;
                vec![eval_op(op, &a, &p)?]
            }
            Node::Call { module, args } => {
                let m = modules.get(*module).ok_or_else(|| err(&p, "module"))?;
                let a = args.iter().map(|r| get(*r).cloned()).collect::<Result<Vec<_>, _>>()?;
                eval_graph(&m.graph, modules, &a, &format!("modules[{module}].graph"))?
            }
            Node::Cond { pred, then_graph, else_graph, operands } => {
                let truth = match get(*pred)? {
                    Val::Bool(b) => *b,
                    Val::Tensor(t) => t.data.iter().all(|v| *v != 0.0),
                    other => return Err(err(&p, format!("pred {other:?}"))),
                };
                let a = operands.iter().map(|r| get(*r).cloned()).collect::<Result<Vec<_>, _>>()?;
                if truth {
                    eval_graph(then_graph, modules, &a, &format!("{p}.then_graph"))?
                } else {
                    eval_graph(else_graph, modules, &a, &format!("{p}.else_graph"))?
                }
            }
            Node::Map { body, xs, args } => {
                let x = t(get(*xs)?, &p)?.clone();
                let extra = args.iter().map(|r| get(*r).cloned()).collect::<Result<Vec<_>, _>>()?;
                let mut rows = Vec::new();
                for k in 0..x.shape[0] {
                    let mut a = vec![select(&x, 0, k)];
                    a.extend(extra.iter().cloned());
                    rows.extend(eval_graph(body, modules, &a, &format!("{p}.body"))?);
                }
                vec![stack(rows, &p)?]
            }
            Node::Scan { body, init, xs } => {
                let mut carries = init.iter().map(|r| get(*r).cloned()).collect::<Result<Vec<_>, _>>()?;
                let xs = xs.iter().map(|r| get(*r).and_then(|v| t(v, &p).cloned())).collect::<Result<Vec<_>, _>>()?;
                let n = xs.first().map_or(0, |x| x.shape[0]);
                let mut ys: Vec<Vec<Val>> = Vec::new();
                for k in 0..n {
                    let mut a = carries.clone();
                    a.extend(xs.iter().map(|x| select(x, 0, k)));
                    let mut out = eval_graph(body, modules, &a, &format!("{p}.body"))?;
                    let rest = out.split_off(carries.len());
                    carries = out;
                    if ys.is_empty() {
                        ys = vec![Vec::new(); rest.len()];
                    }
                    for (slot, y) in ys.iter_mut().zip(rest) {
                        slot.push(y);
                    }
                }
                let mut out = carries;
                for y in ys {
                    out.push(stack(y, &p)?);
                }
                out
            }
            Node::While { cond, body, carried, max_iterations } => {
                let mut c = carried.iter().map(|r| get(*r).cloned()).collect::<Result<Vec<_>, _>>()?;
                let mut iterations = 0u32;
                loop {
                    match eval_graph(cond, modules, &c, &format!("{p}.cond"))?.first() {
                        Some(Val::Bool(true)) => {}
                        Some(Val::Bool(false)) => break,
                        other => return Err(err(&p, format!("while condition gave {other:?}"))),
                    }
                    iterations += 1;
                    if iterations > *max_iterations {
                        return Err(err(&p, format!("while_loop exceeded {max_iterations} iterations")));
                    }
                    c = eval_graph(body, modules, &c, &format!("{p}.body"))?;
                }
                c
            }
        };
        vals.extend(out);
    }
    g.outputs
        .iter()
        .map(|r| vals.get(*r).cloned().ok_or_else(|| err(path, format!("output ref {r} undefined"))))
        .collect()
}

/// Runs method `name` of `p` on `inputs`.
pub fn eval_method(p: &IrProgram, name: &str, inputs: &[Val]) -> Result<Vec<Val>, IrError> {
    let (i, m) = p
        .methods
        .iter()
        .enumerate()
        .find(|(_, m)| m.name == name)
        .ok_or_else(|| err("methods", format!("no method `{name}`")))?;
    eval_graph(&m.graph, &p.modules, inputs, &format!("methods[{i}].graph"))
}

/// Deterministic inputs for a graph: tensors filled with a small pattern seeded by `seed`.
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
                let data = (0..n)
                    .map(|_| match dtype {
                        Dtype::F32 => ((next() % 2001) as f64 - 1000.0) / 256.0,
                        Dtype::I64 => ((next() % 21) as i64 - 10) as f64,
                        Dtype::Bool => (next() % 2) as f64,
                    })
                    .collect();
                Val::Tensor(Tens { dtype: *dtype, shape: shape.clone(), data })
            }
            ValueType::Int => Val::Int((next() % 7) as i64),
            ValueType::Bool => Val::Bool(next() % 2 == 0),
            ValueType::Double => Val::Double(((next() % 2001) as f64 - 1000.0) / 64.0),
        })
        .collect()
}
