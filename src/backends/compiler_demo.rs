//! ExecuTorch's `BackendWithCompilerDemo` test backend: its runtime side, so the real `demo_*`
//! corpus files run, and a preprocess that writes the blob ExecuTorch's own preprocess writes
//! for a chain graph (DB3), so the generator can make modules of it. Blob (DB1): ASCII
//! `<N>version:<V>#` then N entries `op:demo::<target>, numel:<K>, dtype:<dtype><debug_handle><H>#`.
//! Semantics are our choice P13: the entries form a chain over the DelegateCall's inputs, in
//! float32, with real sin / mm / add / linear (not the upstream toy series), and each `numel`
//! is checked.
//! May not touch: the emitter, the loader.

use crate::ir::infer::{IrError, err, graph_types};
use crate::ir::{Dtype, Graph, LoweredModule, Node, Op, ValueType};
use crate::program::CompileSpec;
use crate::runtime::frame::{OpError, OpResult, Spend};
use crate::runtime::kernels::{broadcast_index, broadcast_shape};
use crate::runtime::value::checked_numel;
use crate::runtime::{Backend, BackendHandle, DelegateArgs, ErrorCode, InitContext};

/// Registry id.
pub const ID: &str = "BackendWithCompilerDemo";

/// One operation of the blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemoOp {
    /// `aten.sin.default`: 1 operand.
    Sin,
    /// `aten.mm.default`: 2 operands.
    Mm,
    /// `aten.add.Tensor`: 2 operands.
    Add,
    /// `aten.linear.default`: 3 operands (input, weight, bias).
    Linear,
}

impl DemoOp {
    /// The IR operator it is, for the ops its preprocess lowers: ExecuTorch's edge dialect keeps
    /// `sin`, `mm` and `add.Tensor`, and decomposes `linear` into ops the backend refuses.
    pub const LOWERED: [(DemoOp, Op); 3] = [(DemoOp::Sin, Op::Sin), (DemoOp::Add, Op::Add), (DemoOp::Mm, Op::Mm)];

    /// Its target as the blob names it.
    pub fn target(self) -> &'static str {
        match self {
            DemoOp::Sin => "aten.sin.default",
            DemoOp::Mm => "aten.mm.default",
            DemoOp::Add => "aten.add.Tensor",
            DemoOp::Linear => "aten.linear.default",
        }
    }

    /// Operands of one entry.
    pub fn operands(self) -> usize {
        match self {
            DemoOp::Sin => 1,
            DemoOp::Mm | DemoOp::Add => 2,
            DemoOp::Linear => 3,
        }
    }
}

/// One parsed entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DemoEntry {
    /// The operation.
    pub op: DemoOp,
    /// Expected element count of its result.
    pub numel: usize,
}

fn invalid(detail: impl Into<String>) -> OpError {
    OpError::new(ErrorCode::InvalidProgram, detail)
}

/// Parses a demo blob (DB1); version must be 0 (DB2).
pub fn parse(blob: &[u8]) -> OpResult<Vec<DemoEntry>> {
    let text =
        std::str::from_utf8(blob).map_err(|e| invalid(format!("blob is not UTF-8 at byte {}", e.valid_up_to())))?;
    let mut parts = text.split('#');
    let head = parts.next().unwrap_or("");
    let (n, version) =
        head.split_once("version:").ok_or_else(|| invalid(format!("blob header `{head}` lacks `version:`")))?;
    let n: usize = n.parse().map_err(|_| invalid(format!("blob entry count `{n}` is not a number")))?;
    if version != "0" {
        return Err(OpError::new(
            ErrorCode::DelegateInvalidCompatibility,
            format!("blob version {version} (only 0 is supported)"),
        ));
    }
    let mut out = Vec::new();
    for (i, entry) in parts.filter(|p| !p.is_empty()).enumerate() {
        let body = entry.split("<debug_handle>").next().unwrap_or("");
        let mut target = None;
        let mut numel = None;
        for field in body.split(", ") {
            if let Some(t) = field.strip_prefix("op:demo::") {
                target = Some(t);
            } else if let Some(k) = field.strip_prefix("numel:") {
                numel = k.parse::<usize>().ok();
            } else if let Some(d) = field.strip_prefix("dtype:")
                && d != "torch.float32"
            {
                return Err(OpError::lacking(
                    ErrorCode::NotSupported,
                    format!("backend:BackendWithCompilerDemo dtype {d}"),
                    format!("entry {i}: dtype {d} (only torch.float32)"),
                ));
            }
        }
        let op = [DemoOp::Sin, DemoOp::Mm, DemoOp::Add, DemoOp::Linear]
            .into_iter()
            .find(|op| Some(op.target()) == target)
            .ok_or_else(|| invalid(format!("entry {i}: unsupported op {target:?}")))?;
        let numel = numel.ok_or_else(|| invalid(format!("entry {i}: missing numel")))?;
        out.push(DemoEntry { op, numel });
    }
    if out.len() != n {
        return Err(invalid(format!("blob declares {n} entries but holds {}", out.len())));
    }
    Ok(out)
}

type T = (Vec<usize>, Vec<f32>);

/// The elements a result of `shape` holds, refused before anything that size is allocated
/// when their bytes exceed `limit` or (for an entry's result) they are not its `numel`.
fn sized(shape: &[usize], numel: Option<usize>, limit: usize, i: usize) -> OpResult<usize> {
    let n = checked_numel(shape);
    if let Some(numel) = numel
        && n != Some(numel)
    {
        return Err(invalid(format!("entry {i} produces shape {shape:?}, blob says numel {numel}")));
    }
    match n {
        Some(n) if n.checked_mul(4).is_some_and(|b| b <= limit) => Ok(n),
        _ => Err(OpError::new(
            ErrorCode::MemoryAllocationFailed,
            format!("entry {i}: a result of shape {shape:?} exceeds the {limit}-byte memory limit"),
        )),
    }
}

fn matmul(a: &T, b: &T, b_transposed: bool, bound: impl Fn(&[usize]) -> OpResult<usize>) -> OpResult<T> {
    let (sa, sb) = (&a.0, &b.0);
    if sa.len() != 2 || sb.len() != 2 {
        return Err(invalid(format!("matmul of {sa:?} and {sb:?}")));
    }
    let (n, k) = (sa[0], sa[1]);
    let (k2, m) = if b_transposed { (sb[1], sb[0]) } else { (sb[0], sb[1]) };
    if k != k2 {
        return Err(invalid(format!("matmul inner dims of {sa:?} and {sb:?}")));
    }
    let mut r = vec![0f32; bound(&[n, m])?];
    for i in 0..n {
        for j in 0..m {
            let mut acc = 0f32;
            for p in 0..k {
                let w = if b_transposed { b.1[j * k + p] } else { b.1[p * m + j] };
                acc += a.1[i * k + p] * w;
            }
            r[i * m + j] = acc;
        }
    }
    Ok((vec![n, m], r))
}

fn add(a: &T, b: &T, bound: impl Fn(&[usize]) -> OpResult<usize>) -> OpResult<T> {
    let shape = broadcast_shape(&a.0, &b.0)?;
    bound(&shape)?;
    let (ma, mb) = (broadcast_index(&shape, &a.0), broadcast_index(&shape, &b.0));
    Ok((shape, ma.iter().zip(&mb).map(|(x, y)| a.1[*x] + b.1[*y]).collect()))
}

/// Runs the chain of entries on `inputs` (P13); no result may take more than `limit` bytes,
/// and each entry's work (its result's elements, a product's multiply-adds) is passed to
/// `spend` before it is done.
pub fn run(entries: &[DemoEntry], inputs: &[T], limit: usize, spend: Spend<'_>) -> OpResult<T> {
    let mut next = 0usize;
    let mut prev: Option<T> = None;
    for (i, e) in entries.iter().enumerate() {
        let mut ops: Vec<T> = prev.take().into_iter().collect();
        while ops.len() < e.op.operands() {
            ops.push(
                inputs
                    .get(next)
                    .cloned()
                    .ok_or_else(|| invalid(format!("entry {i} needs more inputs than the call passes")))?,
            );
            next += 1;
        }
        // Every result is checked against the entry's numel (and the limit) before it is made.
        let bound = |shape: &[usize]| sized(shape, Some(e.numel), limit, i);
        let within = |shape: &[usize]| sized(shape, None, limit, i);
        let products = match (e.op, &ops[..]) {
            // n x k x m: the first operand's elements times the second's over k.
            (DemoOp::Mm | DemoOp::Linear, [a, b, ..]) => match a.0.get(1) {
                Some(&k) if k > 0 => (a.1.len() as u64).saturating_mul((b.1.len() / k) as u64),
                _ => 0,
            },
            _ => 0,
        };
        // Its result (the entry's numel, checked before it is made) and a product's
        // multiply-adds; the call's inputs were spent as the backend read them.
        spend((e.numel as u64).saturating_add(products), &format_args!("entry {i}"))?;
        let r = match e.op {
            DemoOp::Sin => (ops[0].0.clone(), ops[0].1.iter().map(|v| v.sin()).collect()),
            DemoOp::Mm => matmul(&ops[0], &ops[1], false, bound)?,
            DemoOp::Add => add(&ops[0], &ops[1], bound)?,
            DemoOp::Linear => add(&matmul(&ops[0], &ops[1], true, within)?, &ops[2], bound)?,
        };
        if r.1.len() != e.numel {
            return Err(invalid(format!("entry {i} produced {} elements, blob says numel {}", r.1.len(), e.numel)));
        }
        prev = Some(r);
    }
    prev.ok_or_else(|| invalid("blob has no entries"))
}

/// The backend.
#[derive(Debug, Default)]
pub struct CompilerDemoBackend;

impl Backend for CompilerDemoBackend {
    fn id(&self) -> &str {
        ID
    }

    fn init(&self, _ctx: &InitContext<'_>, processed: &[u8], _specs: &[CompileSpec]) -> Result<BackendHandle, OpError> {
        let entries = parse(processed)?;
        Ok(BackendHandle { bytes: entries.len() * std::mem::size_of::<DemoEntry>(), state: Box::new(entries) })
    }

    fn execute(&self, handle: &mut BackendHandle, args: &mut DelegateArgs<'_, '_>) -> Result<(), OpError> {
        let entries = handle
            .state
            .downcast_ref::<Vec<DemoEntry>>()
            .ok_or_else(|| OpError::new(ErrorCode::DelegateInvalidHandle, "not a demo handle"))?;
        let (out, ins) = args.args.split_last().ok_or_else(|| invalid("DelegateCall has no arguments"))?;
        let mut inputs = Vec::with_capacity(ins.len());
        for &v in ins {
            let x = args.frame.read_f64(v)?;
            inputs.push((args.frame.sizes(v)?, x.iter().map(|f| *f as f32).collect::<Vec<f32>>()));
        }
        let frame = &*args.frame;
        let (shape, values) = run(entries, &inputs, frame.memory_limit, &|work, what| frame.spend(work, what))?;
        args.frame.resize(*out, &shape)?;
        args.frame.write_f64(*out, &values.iter().map(|v| *v as f64).collect::<Vec<_>>())
    }
}

/// The blob ExecuTorch 1.5.1's `BackendWithCompilerDemo.preprocess` writes for `g` (DB3): one
/// entry per node, debug handles numbered from 1 in node order. `g` must be a chain in the
/// sense of P13 ([`chain`]), so that what the runtime side computes is what `g` computes.
pub fn preprocess(g: &Graph) -> Result<Vec<u8>, IrError> {
    let ops = chain(g)?;
    let types = graph_types(g, &[], "graph")?;
    let first = g.constants.len() + g.inputs.len();
    let mut text = format!("{}version:0#", ops.len());
    for (i, op) in ops.iter().enumerate() {
        let numel = match types.get(first + i) {
            Some(ValueType::Tensor { shape, .. }) => shape.iter().product::<usize>(),
            _ => return Err(err(&format!("graph.nodes[{i}]"), "result is not a tensor")),
        };
        text.push_str(&format!("op:demo::{}, numel:{numel}, dtype:torch.float32<debug_handle>{}#", op.target(), i + 1));
    }
    Ok(text.into_bytes())
}

/// The entries of `g` if it is a chain the runtime side computes as `g` does (P13): static
/// float32 tensor inputs and no constants; nodes of [`DemoOp::LOWERED`] ops only; the first node
/// takes the first inputs in order, each later one the previous result and then the next unused
/// inputs; every input used once; one output, the last result.
pub fn chain(g: &Graph) -> Result<Vec<DemoOp>, IrError> {
    if !g.constants.is_empty() {
        return Err(err("graph.constants", "a demo chain takes no constants"));
    }
    for (i, t) in g.inputs.iter().enumerate() {
        if !matches!(t, ValueType::Tensor { dtype: Dtype::F32, dynamic: false, .. }) {
            return Err(err(&format!("graph.inputs[{i}]"), "a demo chain takes static float32 tensors only"));
        }
    }
    let n_in = g.inputs.len();
    let mut next = 0usize;
    let mut ops = Vec::with_capacity(g.nodes.len());
    for (i, node) in g.nodes.iter().enumerate() {
        let at = format!("graph.nodes[{i}]");
        let Node::Op { op, args } = node else { return Err(err(&at, "a demo chain holds operators only")) };
        let demo = DemoOp::LOWERED
            .iter()
            .find(|(_, o)| o == op)
            .map(|(d, _)| *d)
            .ok_or_else(|| err(&at, format!("{op:?} is not lowered by BackendWithCompilerDemo")))?;
        let mut want = Vec::with_capacity(demo.operands());
        if i > 0 {
            want.push(n_in + i - 1);
        }
        while want.len() < demo.operands() {
            want.push(next);
            next += 1;
        }
        if *args != want {
            return Err(err(&at, format!("operands {args:?}; the chain passes {want:?}")));
        }
        ops.push(demo);
    }
    if ops.is_empty() || next != n_in {
        return Err(err("graph", format!("{} nodes use {next} of {n_in} inputs", ops.len())));
    }
    if g.outputs != [n_in + ops.len() - 1] {
        return Err(err("graph.outputs", "a demo chain has one output, its last result"));
    }
    Ok(ops)
}

/// A lowered module of this backend: `g`'s blob ([`preprocess`]) with `compile_specs`. The
/// backend opts in to sharing (SH12).
pub fn lower(g: Graph, compile_specs: Vec<(String, Vec<u8>)>) -> Result<LoweredModule, IrError> {
    let processed = preprocess(&g)?;
    Ok(LoweredModule {
        backend: ID.to_string(),
        graph: g,
        processed,
        compile_specs: compile_specs.into_iter().map(|(k, v)| (k, crate::ir::HexBytes(v))).collect(),
        share_handle_across_calls: true,
        scratch_specs: vec![],
    })
}

/// The chain of `processed` run on `inputs` (values with their bounds, in call order): its
/// result and bound, each entry bounded by `ir::bound`'s rule for the operator it is.
pub fn bounded(
    processed: &[u8],
    inputs: &[(crate::ir::value::Val, crate::ir::bound::Bound)],
    ctx: crate::ir::bound::Context,
) -> OpResult<(crate::ir::value::Val, crate::ir::bound::Bound)> {
    use crate::ir::kernels::eval_op;
    let entries = parse(processed)?;
    let mut next = 0usize;
    let mut prev: Option<(crate::ir::value::Val, crate::ir::bound::Bound)> = None;
    for (i, e) in entries.iter().enumerate() {
        let mut ops: Vec<(crate::ir::value::Val, crate::ir::bound::Bound)> = prev.take().into_iter().collect();
        while ops.len() < e.op.operands() {
            ops.push(
                inputs.get(next).cloned().ok_or_else(|| invalid(format!("entry {i} needs more inputs than given")))?,
            );
            next += 1;
        }
        let op = match e.op {
            DemoOp::Sin => Op::Sin,
            DemoOp::Mm => Op::Mm,
            DemoOp::Add => Op::Add,
            DemoOp::Linear => Op::Linear,
        };
        let vals: Vec<&crate::ir::value::Val> = ops.iter().map(|(v, _)| v).collect();
        let errs: Vec<&crate::ir::bound::Bound> = ops.iter().map(|(_, b)| b).collect();
        let out = eval_op(&op, &vals, "").map_err(|e| invalid(format!("entry {i}: {e}")))?;
        let b = crate::ir::bound::op_bound(&op, &vals, &errs, &out, ctx);
        prev = Some((out, b));
    }
    prev.ok_or_else(|| invalid("blob has no entries"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::build::GraphBuilder;

    fn f32s(shape: &[usize]) -> ValueType {
        ValueType::Tensor { dtype: Dtype::F32, shape: shape.to_vec(), dynamic: false }
    }

    /// sin(x0) + x1, then @ x2, over three [3, 3] inputs.
    fn sin_add_mm() -> Graph {
        let mut b = GraphBuilder::new(vec![], vec![f32s(&[3, 3]); 3]);
        let s = b.op(Op::Sin, &[b.input(0)]);
        let a = b.op(Op::Add, &[s, b.input(1)]);
        let m = b.op(Op::Mm, &[a, b.input(2)]);
        b.finish(&[m])
    }

    #[test]
    fn preprocess_writes_executorchs_bytes() {
        // ExecuTorch 1.5.1's preprocess of this graph (runners/exir_build.py, 2026-12-04).
        let want = "3version:0#\
            op:demo::aten.sin.default, numel:9, dtype:torch.float32<debug_handle>1#\
            op:demo::aten.add.Tensor, numel:9, dtype:torch.float32<debug_handle>2#\
            op:demo::aten.mm.default, numel:9, dtype:torch.float32<debug_handle>3#";
        assert_eq!(String::from_utf8(preprocess(&sin_add_mm()).unwrap()).unwrap(), want);
        let entries = parse(want.as_bytes()).unwrap();
        assert_eq!(entries.iter().map(|e| e.op).collect::<Vec<_>>(), [DemoOp::Sin, DemoOp::Add, DemoOp::Mm]);
    }

    #[test]
    fn chain_refuses_what_the_runtime_would_compute_otherwise() {
        // Operands out of chain order: x1 + sin(x0) is the same sum, but x0 @ x1 is not x1 @ x0.
        let mut b = GraphBuilder::new(vec![], vec![f32s(&[2, 2]); 2]);
        let m = b.op(Op::Mm, &[b.input(1), b.input(0)]);
        let e = chain(&b.finish(&[m])).unwrap_err();
        assert_eq!(e.path, "graph.nodes[0]");
        // An input left unused.
        let mut b = GraphBuilder::new(vec![], vec![f32s(&[2, 2]); 2]);
        let s = b.op(Op::Sin, &[b.input(0)]);
        assert!(chain(&b.finish(&[s])).unwrap_err().detail.contains("use 1 of 2 inputs"));
        // An op the edge dialect does not keep.
        let mut b = GraphBuilder::new(vec![], vec![f32s(&[2, 2])]);
        let r = b.op(Op::Relu, &[b.input(0)]);
        assert!(chain(&b.finish(&[r])).unwrap_err().detail.contains("Relu"));
    }

    #[test]
    fn lowered_chain_runs_as_its_graph_computes() {
        let g = sin_add_mm();
        let entries = parse(&preprocess(&g).unwrap()).unwrap();
        let x: Vec<T> =
            (0..3).map(|k| (vec![3, 3], (0..9).map(|i| (i * 3 + k) as f32 * 0.25 - 1.0).collect())).collect();
        let (shape, got) = run(&entries, &x, 1 << 20, &|_, _| Ok(())).unwrap();
        assert_eq!(shape, [3, 3]);
        let a: Vec<f32> = x[0].1.iter().zip(&x[1].1).map(|(p, q)| p.sin() + q).collect();
        for i in 0..3 {
            for j in 0..3 {
                let want: f32 = (0..3).map(|k| a[i * 3 + k] * x[2].1[k * 3 + j]).fold(0.0, |s, v| s + v);
                assert_eq!(got[i * 3 + j], want, "element [{i}, {j}]");
            }
        }
    }
}
