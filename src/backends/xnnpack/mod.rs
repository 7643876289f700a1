//! `XnnpackBackend`, both sides: preprocess lowers an IR sub-graph of float32 ops to an XNNPACK
//! blob (`lower`), and the runtime side is a reference interpreter of such blobs (`interp`) —
//! the blobs ExecuTorch's exporter writes and the ones `lower` writes alike.
//!
//! `init` loads the blob with `pte::xnnpack` (every id, flag, constant and named key checked),
//! refuses nodes and datatypes the interpreter lacks (NotSupported, naming the node, its index
//! and the delegate), and keeps the loaded graph (in the thread's
//! [`blob_cache`](super::blob_cache) by the blob's bytes, used again only where the named data
//! the blob reads is the same). `execute` reads
//! external inputs from the DelegateCall's arguments at their external ids, takes shapes from
//! the runtime tensors, decodes the constants within the run's budget, runs the nodes in
//! topological order and resizes and writes the outputs.
//! Handles keep no per-call state, so the backend opts in to handle sharing.
//! May not touch: the eager interpreter (`ir::eval`), the CPU kernels, the emitter.

pub mod bound;
pub mod interp;
pub mod lower;

use super::blob_cache::{BlobCache, compiled_where};
use crate::fault::Fault;
use crate::ir::bound::Bound;
use crate::ir::infer::IrError;
use crate::ir::{Graph, LoweredModule, NamedBlob};
use crate::program::{CompileSpec, ScalarType};
use crate::runtime::frame::{OpError, OpResult, Spend, WorkLeft};
use crate::runtime::value::checked_numel;
use crate::runtime::{Backend, BackendHandle, DelegateArgs, ErrorCode, InitContext};
use interp::T;
use pte::xnnpack::{self, Datatype, FLAG_EXTERNAL_INPUT, FLAG_EXTERNAL_OUTPUT, LoadedBlob, XValue};
use std::cell::RefCell;
use std::sync::Arc;

/// Registry id (ExecuTorch's).
pub const ID: &str = xnnpack::BACKEND_ID;

/// Preprocess: the lowered module for `g` (an XNNPACK blob with its FullyConnected weights
/// inside) and the named data its other constants need in the program (`lower`'s module
/// comment says why). `fault` is accepted for symmetry with the other backends; no seeded bug
/// lives here.
pub fn lower(
    g: Graph,
    compile_specs: Vec<(String, Vec<u8>)>,
    _fault: Option<Fault>,
) -> Result<(LoweredModule, Vec<NamedBlob>), IrError> {
    let blob = lower::to_blob(&g)?;
    let m = LoweredModule {
        backend: ID.into(),
        graph: g,
        processed: xnnpack::write(&blob.graph, &blob.region),
        compile_specs: compile_specs.into_iter().map(|(k, v)| (k, crate::ir::HexBytes(v))).collect(),
        share_handle_across_calls: true,
        scratch_specs: vec![],
    };
    Ok((m, blob.named))
}

thread_local! {
    /// Blobs compiled on this thread, by their bytes (each with the named data it read).
    pub static COMPILED: RefCell<BlobCache<Compiled>> = RefCell::default();
}

/// A loaded blob ready to run.
pub struct Compiled {
    /// The named data entries the blob names that were there when it compiled, as they were.
    reads: Vec<(String, Vec<u8>)>,
    blob: LoadedBlob,
    /// `(external id, value index)` of inputs and outputs, by external id.
    inputs: Vec<(u32, usize)>,
    outputs: Vec<(u32, usize)>,
}

fn code(c: u32) -> ErrorCode {
    ErrorCode::from_code(c).unwrap_or(ErrorCode::Internal)
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// The bytes of the first named data entry called `key`, the one `pte::xnnpack::load` reads.
fn named_entry<'n>(named: &[(&str, &'n [u8])], key: &str) -> Option<&'n [u8]> {
    named.iter().find(|(k, _)| *k == key).map(|(_, d)| *d)
}

/// Loads and checks `processed` for the interpreter (`where_`: which delegate, for messages).
fn compile(processed: &[u8], named: &[(&str, &[u8])], where_: &str) -> OpResult<Compiled> {
    let blob = xnnpack::load(processed, Some(named))
        .map_err(|e| OpError::new(code(e.et_code()), format!("{where_}: XNNPACK blob: {e}")))?;
    let g = &blob.blob.graph;
    for (index, v) in g.values.iter().enumerate() {
        let t = v.tensor();
        // Datatype 0 (absent) is no type: XNNPACK refuses to define the value, and ExecuTorch
        // fails init with Internal. A rule the blob breaks, not something missing here.
        if t.datatype() == Some(Datatype::Invalid) {
            return Err(OpError::new(
                ErrorCode::Internal,
                format!("{where_}: xvalues[{index}] has datatype invalid (0), which XNNPACK cannot define"),
            ));
        }
        if matches!(v, XValue::Quantized { .. }) || t.datatype() != Some(Datatype::Fp32) || t.dq_datatype != 0 {
            let dt: &str = t.datatype().map_or("invalid", Into::into);
            let what = format!(
                "backend:{ID} value {dt}{}",
                if matches!(v, XValue::Quantized { .. }) { " (quantized)" } else { "" }
            );
            return Err(OpError::lacking(
                ErrorCode::NotSupported,
                what,
                format!(
                    "{where_}: xvalues[{index}] is {dt}{}; the reference interpreter runs fp32 only",
                    if matches!(v, XValue::Quantized { .. }) { " (quantized)" } else { "" }
                ),
            ));
        }
    }
    for (index, n) in g.nodes.iter().enumerate() {
        if !interp::SUPPORTED.contains(&n.node_type) {
            return Err(OpError::lacking(
                ErrorCode::NotSupported,
                format!("backend:{ID} node {}", n.node_type.name()),
                format!(
                    "{where_}: xnodes[{index}] is {}, which the reference interpreter does not run",
                    n.node_type.name()
                ),
            ));
        }
    }
    let inputs = blob.externals(FLAG_EXTERNAL_INPUT);
    let outputs = blob.externals(FLAG_EXTERNAL_OUTPUT);
    // What `load` looked up by key, or could have.
    let mut reads: Vec<(String, Vec<u8>)> = Vec::new();
    for key in g.constant_data.iter().flatten().filter_map(|e| e.named_key.as_deref()) {
        if let Some(d) = named_entry(named, key).filter(|_| !reads.iter().any(|(k, _)| k == key)) {
            reads.push((key.to_string(), d.to_vec()));
        }
    }
    Ok(Compiled { reads, blob, inputs, outputs })
}

impl Compiled {
    /// Whether `named` holds what this compilation read, byte for byte (the first entry of
    /// each key, as `load` looks it up).
    fn reads_the_same(&self, named: &[(&str, &[u8])]) -> bool {
        self.reads.iter().all(|(k, b)| named_entry(named, k) == Some(b.as_slice()))
    }

    /// Runs the nodes on `inputs` (value index, tensor); every value computed, by value index.
    /// No result may exceed `limit` elements, nor all constants and results together
    /// `limit` × 4.
    fn evaluate(&self, inputs: Vec<(usize, T)>, limit: usize, spend: Spend<'_>) -> OpResult<Vec<Option<T>>> {
        let mut budget = limit.saturating_mul(4);
        let g = &self.blob.blob.graph;
        let mut vals: Vec<Option<T>> = vec![None; g.values.len()];
        for (v, bytes) in &self.blob.constants {
            // The loader checked that the bytes hold the shape's elements; many values may
            // read one constant, so each decoded copy (at each run) counts against the budget.
            let shape: Vec<usize> = g.values[*v].tensor().shape().iter().map(|d| *d as usize).collect();
            let n = checked_numel(&shape).filter(|n| *n <= budget).ok_or_else(|| {
                OpError::new(
                    ErrorCode::MemoryAllocationFailed,
                    format!(
                        "constant xvalues[{v}] {shape:?} exceeds what is left of {} elements",
                        limit.saturating_mul(4)
                    ),
                )
            })?;
            budget -= n;
            let bytes = bytes.get(..n * 4).ok_or_else(|| {
                OpError::new(
                    ErrorCode::Internal,
                    format!("constant xvalues[{v}] has fewer bytes than its shape {shape:?}"),
                )
            })?;
            vals[*v] = Some(T::new(shape, f32s(bytes)));
        }
        for (v, t) in inputs {
            vals[v] = Some(t);
        }
        for &i in &self.blob.order {
            let node = &g.nodes[i];
            let failed = |what: String| {
                OpError::new(ErrorCode::Internal, format!("xnodes[{i}] ({}): {what}", node.node_type.name()))
            };
            let ins = node
                .payload
                .inputs(node.node_type)
                .into_iter()
                .map(|(field, id)| {
                    self.blob
                        .by_id
                        .get(&id)
                        .and_then(|v| vals[*v].as_ref())
                        .ok_or_else(|| failed(format!("{field} = {id} has no value yet")))
                })
                .collect::<OpResult<Vec<&T>>>()?;
            spend(node_work(node, &ins), &format_args!("xnodes[{i}] ({})", node.node_type.name()))?;
            let out = interp::run_node(node, &ins, limit.min(budget)).map_err(|e| failed(e.to_string()))?;
            budget = budget.saturating_sub(out.data.len());
            for (field, id) in node.payload.outputs() {
                let v = *self.blob.by_id.get(&id).ok_or_else(|| failed(format!("{field} = {id} undefined")))?;
                vals[v] = Some(out.clone());
            }
        }
        Ok(vals)
    }

    /// Runs the graph on the call's arguments.
    fn run(&self, args: &mut DelegateArgs<'_, '_>) -> OpResult<()> {
        let slot = |ext: u32| -> OpResult<usize> {
            args.args.get(ext as usize).copied().ok_or_else(|| {
                OpError::new(
                    ErrorCode::InvalidArgument,
                    format!("external id {ext} is beyond the call's {} arguments", args.args.len()),
                )
            })
        };
        let mut inputs = Vec::with_capacity(self.inputs.len());
        for &(ext, v) in &self.inputs {
            let s = slot(ext)?;
            let dtype = args.frame.dtype(s)?;
            if dtype != ScalarType::FLOAT {
                return Err(OpError::new(
                    ErrorCode::InvalidArgument,
                    format!("argument {ext} (values[{s}]) is {dtype}; the blob's value is fp32"),
                ));
            }
            let shape = args.frame.sizes(s)?;
            if shape.len() > xnnpack::MAX_DIMS {
                return Err(OpError::new(
                    ErrorCode::InvalidArgument,
                    format!("argument {ext} has rank {}", shape.len()),
                ));
            }
            inputs.push((v, T::new(shape, f32s(args.frame.bytes(s)?))));
        }
        let limit = args.frame.memory_limit / 4;
        let frame = &*args.frame;
        let vals = self.evaluate(inputs, limit, &|work, what| frame.spend(work, what))?;
        for &(ext, v) in &self.outputs {
            let s = slot(ext)?;
            let t = vals[v].as_ref().ok_or_else(|| {
                OpError::new(ErrorCode::Internal, format!("external output {ext} (xvalues[{v}]) was not computed"))
            })?;
            if args.frame.dtype(s)? != ScalarType::FLOAT {
                return Err(OpError::new(ErrorCode::InvalidArgument, format!("output argument {ext} is not float32")));
            }
            args.frame.resize(s, &t.shape)?;
            let bytes: Vec<u8> = t.data.iter().flat_map(|x| x.to_le_bytes()).collect();
            args.frame.write_bytes(s, &bytes)?;
        }
        Ok(())
    }
}

/// Elements of work `node` does on `ins` (its operands), before it runs: the operands'
/// elements, plus a product's multiply-adds or, for any other node, its broadcast result's
/// elements (operands that do not broadcast are refused by the node itself).
fn node_work(node: &xnnpack::XNode, ins: &[&T]) -> u64 {
    let numel = |s: &[usize]| checked_numel(s).map_or(u128::MAX, |n| n as u128);
    let read: u128 = ins.iter().map(|t| t.data.len() as u128).sum();
    let made: u128 = match (node.node_type, ins) {
        // rows x outputs x k: the input's elements times the filter's outputs.
        (xnnpack::NodeType::XNNFullyConnected, [x, w, ..]) => match x.shape.last() {
            Some(&k) if k > 0 => x.data.len() as u128 * (w.data.len() / k) as u128,
            _ => 0,
        },
        // The broadcast batch x m x n results, each k multiply-adds.
        (xnnpack::NodeType::XNNBatchMatrixMultiply, [a, b, ..]) if a.shape.len() >= 2 && b.shape.len() >= 2 => {
            let (ra, rb) = (a.shape.len(), b.shape.len());
            let (m, k) = (a.shape[ra - 2], a.shape[ra - 1]);
            let transposed = matches!(node.payload, xnnpack::Payload::Node2x1 { flags, .. } if flags & xnnpack::FLAG_TRANSPOSE_WEIGHTS != 0);
            let n = if transposed { b.shape[rb - 2] } else { b.shape[rb - 1] };
            let batch = interp::broadcast_shape(&a.shape[..ra - 2], &b.shape[..rb - 2]).map_or(0, |s| numel(&s));
            batch.saturating_mul(m as u128).saturating_mul(n as u128).saturating_mul(k as u128)
        }
        _ => ins
            .iter()
            .try_fold(Vec::new(), |acc: Vec<usize>, t| interp::broadcast_shape(&acc, &t.shape).ok())
            .map_or(0, |s| numel(&s)),
    };
    u64::try_from(read.saturating_add(made)).unwrap_or(u64::MAX)
}

/// Loads `processed` as `init` does and runs it once with every external input at its blob
/// shape (filled with `fill`), results above `limit` elements refused: the outputs by external
/// id. For fuzzing the loader and interpreter together without a program around them.
pub fn run_standalone(processed: &[u8], named: &[(&str, &[u8])], fill: f32, limit: usize) -> OpResult<Vec<(u32, T)>> {
    let c = compile(processed, named, "standalone blob")?;
    let g = &c.blob.blob.graph;
    let mut inputs = Vec::new();
    for &(_, v) in &c.inputs {
        let shape: Vec<usize> = g.values[v].tensor().shape().iter().map(|d| *d as usize).collect();
        let n = checked_numel(&shape).filter(|n| *n <= limit).ok_or_else(|| {
            OpError::new(
                ErrorCode::MemoryAllocationFailed,
                format!("input xvalues[{v}] {shape:?} exceeds {limit} elements"),
            )
        })?;
        inputs.push((v, T::new(shape, vec![fill; n])));
    }
    // Work bounded as a method's would be, by the memory limit's worth of elements eight times.
    let left = WorkLeft::new((limit as u64).saturating_mul(8));
    let vals = c.evaluate(inputs, limit, &|work, what| left.spend(work, what))?;
    Ok(c.outputs.iter().filter_map(|&(ext, v)| vals[v].clone().map(|t| (ext, t))).collect())
}

/// The runtime side: a reference interpreter of fp32 XNNPACK graphs.
#[derive(Debug, Default)]
pub struct XnnpackBackend;

impl Backend for XnnpackBackend {
    fn id(&self) -> &str {
        ID
    }

    fn init(&self, ctx: &InitContext<'_>, processed: &[u8], _specs: &[CompileSpec]) -> Result<BackendHandle, OpError> {
        // What a blob compiles to is a function of its bytes and of the named data it reads: a
        // compilation kept for these bytes is used only where that named data reads the same.
        let c = compiled_where(
            &COMPILED,
            processed,
            |c| c.reads_the_same(ctx.named_data),
            || compile(processed, ctx.named_data, &format!("method {} delegates[{}]", ctx.method, ctx.delegate_index)),
        )?;
        Ok(BackendHandle { bytes: processed.len(), state: Box::new(c) })
    }

    fn execute(&self, handle: &mut BackendHandle, args: &mut DelegateArgs<'_, '_>) -> Result<(), OpError> {
        let c = handle
            .state
            .downcast_ref::<Arc<Compiled>>()
            .ok_or_else(|| OpError::new(ErrorCode::DelegateInvalidHandle, "not an XNNPACK handle"))?;
        c.run(args)
    }
}

/// Whether an IR sub-graph can be lowered to XNNPACK.
pub fn lowerable(g: &Graph) -> bool {
    lower::lowerable(g)
}

/// Runs `processed` (with `named`) as the backend does on a call's arguments (`args`: each
/// argument's tensor, if it is a float32 one, and its bound; external id = argument position),
/// under the same memory and work limits (`spend`), and bounds every value node by node: the
/// outputs' bounds by external id.
pub fn bounded(
    processed: &[u8],
    named: &[(&str, &[u8])],
    args: &[(Option<T>, Bound)],
    limit: usize,
    spend: Spend<'_>,
) -> OpResult<Vec<(u32, Bound)>> {
    let c: Compiled = compile(processed, named, "bounded delegate")?;
    let g = &c.blob.blob.graph;
    let mut bounds: Vec<Bound> = vec![Bound::Exact; g.values.len()];
    let mut inputs = Vec::with_capacity(c.inputs.len());
    for &(ext, v) in &c.inputs {
        let (t, b) = args
            .get(ext as usize)
            .and_then(|(t, b)| Some((t.clone()?, b.clone())))
            .ok_or_else(|| OpError::new(ErrorCode::InvalidArgument, format!("argument {ext} is no float32 tensor")))?;
        bounds[v] = b;
        inputs.push((v, t));
    }
    let vals = c.evaluate(inputs, limit, spend)?;
    // The values are the interpreter's; each node's bound follows from its operands' (in the
    // order it ran them, so every operand is bounded before its readers).
    let computed = |v: usize, what: &dyn std::fmt::Display| {
        vals[v].as_ref().ok_or_else(|| OpError::new(ErrorCode::Internal, format!("{what} was not computed")))
    };
    for &i in &c.blob.order {
        let node = &g.nodes[i];
        let at = |v: &u32| c.blob.by_id.get(v).copied();
        let ids: Vec<usize> = node.payload.inputs(node.node_type).iter().filter_map(|(_, id)| at(id)).collect();
        let ins = ids
            .iter()
            .map(|v| computed(*v, &format_args!("xnodes[{i}] operand xvalues[{v}]")).map(|t| (t, &bounds[*v])))
            .collect::<OpResult<Vec<(&T, &Bound)>>>()?;
        let outs: Vec<usize> = node.payload.outputs().iter().filter_map(|(_, id)| at(id)).collect();
        let Some(&first) = outs.first() else { continue };
        let bound = bound::node_bound(node, &ins, computed(first, &format_args!("xnodes[{i}] result"))?);
        for v in outs {
            bounds[v] = bound.clone();
        }
    }
    Ok(c.outputs.iter().map(|&(ext, v)| (ext, bounds[v].clone())).collect())
}
