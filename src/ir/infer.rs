//! Type checking of IR programs: every ref in range and earlier than its use, operand kinds,
//! dtypes and shapes, call signatures and control-flow signatures. Produces the type of every
//! ref of a graph, which the emitter needs for tensor metadata.

use super::op::Op;
use super::program::*;
use pte::program::checked_numel;
use thiserror::Error;

/// An invalid IR program, with the path of the offending node or field.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{path}: {detail}")]
pub struct IrError {
    /// Where, e.g. `methods[0].graph.nodes[3]`.
    pub path: String,
    /// What.
    pub detail: String,
}

pub(crate) fn err(path: &str, detail: impl Into<String>) -> IrError {
    IrError { path: path.to_string(), detail: detail.into() }
}

/// Numpy-style broadcast of two shapes.
pub fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
            let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
            match (da, db) {
                (x, y) if x == y => Some(x),
                (1, y) => Some(y),
                (x, 1) => Some(x),
                _ => None,
            }
        })
        .collect()
}

/// Whether `a` (dynamic iff `ya`) and `b` broadcast whatever the run-time leading size of the
/// dynamic ones. Dynamic tensors of a graph share one leading size at run time (it may be
/// smaller than the bound, and at least 1); every other dimension is fixed. So two dynamic
/// operands must have equal shapes, and a static operand must not pin the leading dimension
/// (its aligned leading size is 1, or it has lower rank).
pub fn dynamic_broadcast_ok(a: &[usize], ya: bool, b: &[usize], yb: bool) -> bool {
    match (ya, yb) {
        (false, false) => true,
        (true, true) => a == b,
        (true, false) => b.len() < a.len() || b.first() == Some(&1) || a.is_empty(),
        (false, true) => a.len() < b.len() || a.first() == Some(&1) || b.is_empty(),
    }
}

/// Normalises a possibly negative dimension.
pub fn norm_dim(dim: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let d = if dim < 0 { dim + r } else { dim };
    (0..r).contains(&d).then_some(d as usize)
}

fn tensor<'t>(t: &'t ValueType, path: &str, what: &str) -> Result<(Dtype, &'t [usize], bool), IrError> {
    match t {
        ValueType::Tensor { dtype, shape, dynamic } => Ok((*dtype, shape, *dynamic)),
        other => Err(err(path, format!("{what} must be a tensor, is {other:?}"))),
    }
}

fn arity(args: &[Ref], n: usize, path: &str) -> Result<(), IrError> {
    if args.len() != n {
        return Err(err(path, format!("takes {n} operands, got {}", args.len())));
    }
    Ok(())
}

fn op_type(op: &Op, a: &[&ValueType], path: &str) -> Result<ValueType, IrError> {
    use Op::*;
    let t = |dtype, shape, dynamic| ValueType::Tensor { dtype, shape, dynamic };
    Ok(match op {
        Add | Sub | Mul | Div | GtTensor => {
            let (da, sa, ya) = tensor(a[0], path, "lhs")?;
            let (db, sb, yb) = tensor(a[1], path, "rhs")?;
            if da != db || da == Dtype::Bool || (matches!(op, Div) && da != Dtype::F32) {
                return Err(err(path, format!("{op:?} does not take {da:?} and {db:?}")));
            }
            if !dynamic_broadcast_ok(sa, ya, sb, yb) {
                return Err(err(
                    path,
                    format!("shapes {sa:?} and {sb:?} may not broadcast once the leading size shrinks"),
                ));
            }
            let shape =
                broadcast(sa, sb).ok_or_else(|| err(path, format!("shapes {sa:?} and {sb:?} do not broadcast")))?;
            t(if matches!(op, GtTensor) { Dtype::Bool } else { da }, shape, ya || yb)
        }
        View { shape } => {
            let (d, s, y) = tensor(a[0], path, "operand")?;
            if y {
                return Err(err(path, "view of a dynamic tensor"));
            }
            let out: Vec<usize> = shape
                .iter()
                .map(|x| usize::try_from(*x).map_err(|_| err(path, format!("view size {x} is negative"))))
                .collect::<Result<_, _>>()?;
            if checked_numel(&out) != checked_numel(s) {
                return Err(err(path, format!("view {out:?} of {s:?} changes the element count")));
            }
            t(d, out, false)
        }
        Relu | Sin | Cos => {
            let (d, s, y) = tensor(a[0], path, "operand")?;
            if d != Dtype::F32 && !(matches!(op, Relu) && d == Dtype::I64) {
                return Err(err(path, format!("{op:?} does not take {d:?}")));
            }
            t(d, s.to_vec(), y)
        }
        Linear | Addmm | Mm => {
            let (x, w, bias) = match op {
                Linear => (a[0], a[1], Some(a[2])),
                Addmm => (a[1], a[2], Some(a[0])),
                _ => (a[0], a[1], None),
            };
            let (dx, sx, yx) = tensor(x, path, "input")?;
            let (dw, sw, yw) = tensor(w, path, "weight")?;
            if yw {
                return Err(err(path, "the weight must have a static shape"));
            }
            if dx != Dtype::F32 || dw != Dtype::F32 || sx.len() != 2 || sw.len() != 2 {
                return Err(err(path, format!("needs 2-d f32 operands, got {sx:?} and {sw:?}")));
            }
            let (k, m) = if matches!(op, Linear) { (sw[1], sw[0]) } else { (sw[0], sw[1]) };
            if sx[1] != k {
                return Err(err(path, format!("inner dimensions differ: {sx:?} and {sw:?}")));
            }
            let out = vec![sx[0], m];
            if let Some(b) = bias {
                let (db, sb, yb) = tensor(b, path, "bias")?;
                if db != Dtype::F32 || yb || broadcast(sb, &out).as_deref() != Some(&out[..]) {
                    return Err(err(path, format!("bias {sb:?} does not broadcast to {out:?}")));
                }
                if yx && sb.len() == 2 && sb[0] != 1 {
                    return Err(err(path, format!("bias {sb:?} fixes the rows of a dynamic input")));
                }
            }
            t(Dtype::F32, out, yx)
        }
        PermuteCopy { dims } => {
            let (d, s, y) = tensor(a[0], path, "operand")?;
            let mut seen = vec![false; s.len()];
            let mut out = Vec::with_capacity(s.len());
            for &x in dims {
                let k = norm_dim(x, s.len())
                    .filter(|k| !seen[*k])
                    .ok_or_else(|| err(path, format!("bad permutation {dims:?}")))?;
                seen[k] = true;
                out.push(s[k]);
            }
            if dims.len() != s.len() {
                return Err(err(path, format!("permutation {dims:?} for rank {}", s.len())));
            }
            if y && dims.first().and_then(|d| norm_dim(*d, s.len())) != Some(0) {
                return Err(err(path, "a permutation of a dynamic tensor must keep its leading dimension first"));
            }
            t(d, out, y)
        }
        Cumsum { dim } => {
            let (d, s, y) = tensor(a[0], path, "operand")?;
            norm_dim(*dim, s.len()).ok_or_else(|| err(path, format!("dim {dim} out of range")))?;
            if d == Dtype::Bool {
                return Err(err(path, "cumsum of bool"));
            }
            t(d, s.to_vec(), y)
        }
        SelectCopy { dim, index } => {
            let (d, s, y) = tensor(a[0], path, "operand")?;
            let k = norm_dim(*dim, s.len()).ok_or_else(|| err(path, format!("dim {dim} out of range")))?;
            let n = s[k] as i64;
            if !(-n..n).contains(index) || (y && k == 0 && ![0, -1].contains(index)) {
                return Err(err(
                    path,
                    format!("index {index} out of range for size {n}{}", if y { " (dynamic)" } else { "" }),
                ));
            }
            let mut out = s.to_vec();
            out.remove(k);
            t(d, out, y && k != 0)
        }
        IndexSelect { dim } => {
            let (d, s, y) = tensor(a[0], path, "operand")?;
            let (di, si, yi) = tensor(a[1], path, "index")?;
            if di != Dtype::I64 || si.len() != 1 || y || yi {
                return Err(err(path, "index_select takes a static tensor and a static 1-d i64 index"));
            }
            let k = norm_dim(*dim, s.len()).ok_or_else(|| err(path, format!("dim {dim} out of range")))?;
            let mut out = s.to_vec();
            out[k] = si[0];
            t(d, out, y)
        }
        Argmax { dim, keepdim } => {
            let (d, s, y) = tensor(a[0], path, "operand")?;
            if d == Dtype::Bool || s.iter().product::<usize>() == 0 {
                return Err(err(path, "argmax needs a non-empty numeric tensor"));
            }
            let out = match dim {
                None => {
                    if *keepdim {
                        vec![1; s.len()]
                    } else {
                        vec![]
                    }
                }
                Some(dim) => {
                    let k = norm_dim(*dim, s.len()).ok_or_else(|| err(path, format!("dim {dim} out of range")))?;
                    let mut o = s.to_vec();
                    if *keepdim {
                        o[k] = 1;
                    } else {
                        o.remove(k);
                    }
                    o
                }
            };
            // Reducing the leading dimension leaves a static shape.
            let keeps_leading = dim.and_then(|d| norm_dim(d, s.len())).is_some_and(|d| d != 0);
            t(Dtype::I64, out, y && keeps_leading)
        }
        Gt { .. } => {
            let (d, s, y) = tensor(a[0], path, "operand")?;
            if d != Dtype::F32 {
                return Err(err(path, format!("gt with a double scalar takes float32, got {d:?}")));
            }
            t(Dtype::Bool, s.to_vec(), y)
        }
        SymSize { dim } => {
            let (_, s, _) = tensor(a[0], path, "operand")?;
            norm_dim(*dim, s.len()).ok_or_else(|| err(path, format!("dim {dim} out of range")))?;
            ValueType::Int
        }
        ScalarAdd | ScalarSub | ScalarMul | ScalarFloordiv | ScalarEq | ScalarLt | ScalarGt | ScalarGe | ScalarLe => {
            if a.iter().any(|x| **x != ValueType::Int) {
                return Err(err(path, "scalar ops take two Ints"));
            }
            if matches!(op, ScalarEq | ScalarLt | ScalarGt | ScalarGe | ScalarLe) {
                ValueType::Bool
            } else {
                ValueType::Int
            }
        }
    })
}

fn same_types(want: &[ValueType], got: &[ValueType], path: &str, what: &str) -> Result<(), IrError> {
    if want != got {
        return Err(err(path, format!("{what}: expected {want:?}, got {got:?}")));
    }
    Ok(())
}

/// The type of ref `r` among the `types` defined before a node at `path`.
fn type_of<'t>(types: &'t [ValueType], r: Ref, path: &str) -> Result<&'t ValueType, IrError> {
    types.get(r).ok_or_else(|| err(path, format!("ref {r} is not defined before this node ({} defined)", types.len())))
}

/// The output type of operator node `op(args)`, given the types of the refs before it (the
/// operands are read in place, not copied).
fn op_node_type(op: &Op, args: &[Ref], types: &[ValueType], path: &str) -> Result<ValueType, IrError> {
    arity(args, op.kind().arity(), path)?;
    let a = args.iter().map(|r| type_of(types, *r, path)).collect::<Result<Vec<_>, _>>()?;
    op_type(op, &a, path)
}

/// Output types of one node, given the types of the refs before it.
pub fn node_types(
    node: &Node,
    types: &[ValueType],
    modules: &[LoweredModule],
    path: &str,
) -> Result<Vec<ValueType>, IrError> {
    node_types_in(node, types, &Callees::new(modules), path)
}

/// The lowered modules a graph may call, each one's signature typed once, when first called:
/// a graph of many calls of a large module costs one typing of the module, not one per call.
struct Callees<'m> {
    modules: &'m [LoweredModule],
    /// Per module, made on first call.
    signatures: Vec<std::cell::OnceCell<Signature>>,
}

/// A module's typing as its callers see it: `None` when it holds more than CPU ops.
type Signature = Option<Result<Vec<ValueType>, IrError>>;

impl<'m> Callees<'m> {
    fn new(modules: &'m [LoweredModule]) -> Self {
        Callees { modules, signatures: modules.iter().map(|_| std::cell::OnceCell::new()).collect() }
    }

    /// The types of every ref of module `module`'s graph (CPU ops only), typed on first use.
    fn signature(&self, module: usize, path: &str) -> Result<(&'m LoweredModule, &[ValueType]), IrError> {
        let (Some(m), Some(cell)) = (self.modules.get(module), self.signatures.get(module)) else {
            return Err(err(path, format!("module {module} does not exist ({} modules)", self.modules.len())));
        };
        // Both the CPU-ops rule and the typing are made once per module, whatever the calls.
        let sig = cell.get_or_init(|| {
            m.graph.nodes.iter().all(|n| matches!(n, Node::Op { .. })).then(|| {
                graph_types(&m.graph, &[], "").map_err(|mut e| {
                    e.path = format!("modules[{module}].graph{}", e.path);
                    e
                })
            })
        });
        match sig {
            None => Err(err(path, format!("module {module} holds more than CPU ops"))),
            Some(sig) => sig.as_ref().map(|s| (m, s.as_slice())).map_err(Clone::clone),
        }
    }
}

fn node_types_in(
    node: &Node,
    types: &[ValueType],
    callees: &Callees<'_>,
    path: &str,
) -> Result<Vec<ValueType>, IrError> {
    let get = |r: Ref| type_of(types, r, path).cloned();
    let get_all = |rs: &[Ref]| rs.iter().map(|r| get(*r)).collect::<Result<Vec<_>, _>>();
    match node {
        Node::Op { op, args } => Ok(vec![op_node_type(op, args, types, path)?]),
        Node::Call { module, args } => {
            let (m, sig) = callees.signature(*module, path)?;
            let c = m.graph.constants.len();
            let want = &sig[c..c + m.graph.inputs.len()];
            // Compared in place; the argument types are copied only to name a mismatch.
            let same = want.len() == args.len() && args.iter().zip(want).all(|(r, w)| types.get(*r) == Some(w));
            if !same {
                same_types(want, &get_all(args)?, path, "call arguments")?;
            }
            Ok(m.graph.outputs.iter().map(|r| sig[*r].clone()).collect())
        }
        Node::Cond { pred, then_graph, else_graph, operands } => {
            match get(*pred)? {
                ValueType::Bool | ValueType::Tensor { dtype: Dtype::Bool, .. } => {}
                other => return Err(err(path, format!("pred must be Bool, is {other:?}"))),
            }
            let ops = get_all(operands)?;
            let t = graph_io_in(then_graph, callees, &format!("{path}.then_graph"))?;
            let e = graph_io_in(else_graph, callees, &format!("{path}.else_graph"))?;
            same_types(&t.0, &ops, path, "then_graph inputs")?;
            same_types(&e.0, &ops, path, "else_graph inputs")?;
            same_types(&t.1, &e.1, path, "branch outputs")?;
            if t.1.iter().any(|x| !matches!(x, ValueType::Tensor { .. })) {
                return Err(err(path, "cond outputs must be tensors"));
            }
            Ok(t.1)
        }
        Node::Map { body, xs, args } => {
            let (d, s, _) = tensor(&get(*xs)?, path, "xs").map(|(d, s, y)| (d, s.to_vec(), y))?;
            if s.is_empty() || s[0] == 0 {
                return Err(err(path, "map needs a non-empty leading dimension"));
            }
            let mut ins = vec![ValueType::tensor(d, s[1..].to_vec())];
            ins.extend(get_all(args)?);
            let (bin, bout) = graph_io_in(body, callees, &format!("{path}.body"))?;
            same_types(&bin, &ins, path, "body inputs")?;
            if bout.len() != 1 {
                return Err(err(path, "map body must have exactly one output"));
            }
            let (od, os, _) = tensor(&bout[0], path, "body output")?;
            let mut shape = vec![s[0]];
            shape.extend_from_slice(os);
            Ok(vec![ValueType::Tensor { dtype: od, shape, dynamic: true }])
        }
        Node::Scan { body, init, xs } => {
            if xs.is_empty() {
                return Err(err(path, "scan needs at least one xs (E26)"));
            }
            let carries = get_all(init)?;
            let mut slices = Vec::new();
            let mut n = None;
            for x in xs {
                let (d, s, _) = tensor(&get(*x)?, path, "xs").map(|(d, s, y)| (d, s.to_vec(), y))?;
                if s.is_empty() || s[0] == 0 || n.is_some_and(|n| n != s[0]) {
                    return Err(err(path, "scanned tensors need one non-empty leading dimension"));
                }
                n = Some(s[0]);
                slices.push(ValueType::tensor(d, s[1..].to_vec()));
            }
            if carries.iter().any(|c| !matches!(c, ValueType::Tensor { dynamic: false, .. })) {
                // Carries are updated with `aten::copy_`, which does not resize its target.
                return Err(err(path, "scan carries must be tensors of static shape"));
            }
            let (bin, bout) = graph_io_in(body, callees, &format!("{path}.body"))?;
            let mut want_in = carries.clone();
            want_in.extend(slices);
            same_types(&bin, &want_in, path, "body inputs")?;
            if bout.len() < carries.len() {
                return Err(err(path, "body returns fewer values than carries"));
            }
            same_types(&bout[..carries.len()], &carries, path, "new carries")?;
            let mut out = carries;
            for y in &bout[init.len()..] {
                let (d, s, _) = tensor(y, path, "scan output")?;
                let mut shape = vec![n.unwrap_or(1)];
                shape.extend_from_slice(s);
                out.push(ValueType::Tensor { dtype: d, shape, dynamic: true });
            }
            Ok(out)
        }
        Node::While { cond, body, carried, .. } => {
            let c = get_all(carried)?;
            if c.iter().any(|t| matches!(t, ValueType::Tensor { dynamic: true, .. })) {
                // Carried tensors are copied with `aten::copy_`, which does not resize its target.
                return Err(err(path, "while_loop carries tensors of static shape only"));
            }
            let (cin, cout) = graph_io_in(cond, callees, &format!("{path}.cond"))?;
            same_types(&cin, &c, path, "cond inputs")?;
            same_types(&cout, &[ValueType::Bool], path, "cond output")?;
            let (bin, bout) = graph_io_in(body, callees, &format!("{path}.body"))?;
            same_types(&bin, &c, path, "body inputs")?;
            same_types(&bout, &c, path, "body outputs")?;
            Ok(c)
        }
    }
}

/// Input and output types of a graph.
pub fn graph_io(g: &Graph, modules: &[LoweredModule], path: &str) -> Result<(Vec<ValueType>, Vec<ValueType>), IrError> {
    graph_io_in(g, &Callees::new(modules), path)
}

fn graph_io_in(g: &Graph, callees: &Callees<'_>, path: &str) -> Result<(Vec<ValueType>, Vec<ValueType>), IrError> {
    let types = graph_types_in(g, callees, path)?;
    let c = g.constants.len();
    Ok((types[c..c + g.inputs.len()].to_vec(), g.outputs.iter().map(|r| types[*r].clone()).collect()))
}

/// Most elements of one tensor: its bytes (at most 8 per element, so at most 2^63) fit u64;
/// the emitter refuses planned memory beyond int64.
pub const MAX_NUMEL: usize = 1 << 60;

/// Refuses a tensor type a `.pte` cannot hold: a dimension beyond int32 (`Tensor.sizes`) or
/// more than [`MAX_NUMEL`] elements. `path` is spelled only for an error.
fn representable(t: &ValueType, path: impl FnOnce() -> String) -> Result<(), IrError> {
    let ValueType::Tensor { shape, .. } = t else { return Ok(()) };
    if let Some(d) = shape.iter().position(|d| i32::try_from(*d).is_err()) {
        return Err(err(&path(), format!("shape {shape:?}: dimension {d} does not fit int32")));
    }
    if checked_numel(shape).is_none_or(|n| n > MAX_NUMEL) {
        return Err(err(&path(), format!("shape {shape:?} has more than {MAX_NUMEL} elements")));
    }
    Ok(())
}

/// Whether `v` is a value of `dtype`: a float32 (finite values stay finite), an integer that
/// int64 holds, or 0 or 1 for bool.
fn holds(dtype: Dtype, v: f64) -> bool {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    match dtype {
        Dtype::F32 => !v.is_finite() || (v as f32).is_finite(),
        Dtype::I64 => v.fract() == 0.0 && (-TWO_63..TWO_63).contains(&v),
        Dtype::Bool => v == 0.0 || v == 1.0,
    }
}

/// Types of every ref of a graph (constants, inputs, node outputs), each one a `.pte` can hold.
pub fn graph_types(g: &Graph, modules: &[LoweredModule], path: &str) -> Result<Vec<ValueType>, IrError> {
    graph_types_in(g, &Callees::new(modules), path)
}

fn graph_types_in(g: &Graph, callees: &Callees<'_>, path: &str) -> Result<Vec<ValueType>, IrError> {
    let mut types: Vec<ValueType> = Vec::new();
    for (i, c) in g.constants.iter().enumerate() {
        if checked_numel(&c.shape) != Some(c.values.len()) {
            return Err(err(
                &format!("{path}.constants[{i}]"),
                format!("{} values for shape {:?}", c.values.len(), c.shape),
            ));
        }
        // Every value is one of its dtype (the emitter and the interpreter convert it as it is;
        // nothing is truncated, saturated or rounded to infinity on the way).
        if let Some((k, v)) = c.values.iter().enumerate().find(|(_, v)| !holds(c.dtype, **v)) {
            return Err(err(
                &format!("{path}.constants[{i}].values[{k}]"),
                format!("{v} is not a value of {:?}", c.dtype),
            ));
        }
        let t = ValueType::tensor(c.dtype, c.shape.clone());
        representable(&t, || format!("{path}.constants[{i}]"))?;
        types.push(t);
    }
    for (i, t) in g.inputs.iter().enumerate() {
        representable(t, || format!("{path}.inputs[{i}]"))?;
    }
    types.extend(g.inputs.iter().cloned());
    for (i, n) in g.nodes.iter().enumerate() {
        // The node's path is spelled out only for an error: typed with an empty path, an error
        // at the node (or inside its sub-graphs, `.body…`) gets the node's path in front.
        let at_node = |mut e: IrError| {
            if e.path.is_empty() || e.path.starts_with('.') {
                e.path = format!("{path}.nodes[{i}]{}", e.path);
            }
            e
        };
        // An operator node has one output, pushed as it is typed (no list of one).
        if let Node::Op { op, args } = n {
            let t = op_node_type(op, args, &types, "").map_err(at_node)?;
            representable(&t, || format!("{path}.nodes[{i}]"))?;
            types.push(t);
            continue;
        }
        let out = node_types_in(n, &types, callees, "").map_err(at_node)?;
        for t in &out {
            representable(t, || format!("{path}.nodes[{i}]"))?;
        }
        types.extend(out);
    }
    for (k, r) in g.outputs.iter().enumerate() {
        if *r >= types.len() {
            return Err(err(
                &format!("{path}.outputs[{k}]"),
                format!("ref {r} is not defined ({} defined)", types.len()),
            ));
        }
    }
    Ok(types)
}

/// Checks a whole program: every module graph, every method graph, unique method names; gives
/// each method graph's ref types ([`graph_types`]), in method order.
pub fn typecheck_program(p: &IrProgram) -> Result<Vec<Vec<ValueType>>, IrError> {
    // CPU ops only, checked before typing: a module calling a module (itself, say) would
    // otherwise recurse without end.
    for (i, m) in p.modules.iter().enumerate() {
        if m.graph.nodes.iter().any(|n| !matches!(n, Node::Op { .. })) {
            return Err(err(&format!("modules[{i}].graph"), "a lowered module holds CPU ops only"));
        }
    }
    let callees = Callees::new(&p.modules);
    for (i, m) in p.modules.iter().enumerate() {
        graph_types_in(&m.graph, &callees, &format!("modules[{i}].graph"))?;
        // A scratch buffer is a uint8 tensor of `nbytes` elements, and a size is an int32.
        if let Some(k) = m.scratch_specs.iter().position(|s| s.nbytes > i32::MAX as u64) {
            return Err(err(
                &format!("modules[{i}].scratch_specs[{k}].nbytes"),
                format!("{} bytes is more than a tensor size (int32) holds", m.scratch_specs[k].nbytes),
            ));
        }
    }
    let mut keys = std::collections::BTreeSet::new();
    for (i, n) in p.named_data.iter().enumerate() {
        if !keys.insert(n.key.as_str()) {
            return Err(err(&format!("named_data[{i}].key"), format!("duplicate key `{}`", n.key)));
        }
    }
    let mut names = std::collections::BTreeSet::new();
    let mut types = Vec::with_capacity(p.methods.len());
    for (i, m) in p.methods.iter().enumerate() {
        if !names.insert(m.name.as_str()) {
            return Err(err(&format!("methods[{i}].name"), format!("duplicate method `{}`", m.name)));
        }
        types.push(graph_types_in(&m.graph, &callees, &format!("methods[{i}].graph"))?);
    }
    Ok(types)
}
