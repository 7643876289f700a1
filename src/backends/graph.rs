//! Test backends whose processed bytes are the module's own sub-graph (both sides):
//!
//! * `demo` — preprocess serialises the sub-graph; execute evaluates it. Opts in to handle
//!   sharing (SH12): its handle keeps no per-call state.
//! * `argkeep` — like `demo`, but its handle keeps the argument slots of the first call it
//!   serves and reads those on every later call. With one call site per handle (the default)
//!   that is always right; a handle shared across call sites reads the wrong slots — why sharing
//!   is opt-in. It does not opt in.
//! * `scratch` — like `demo`, and declares one scratch buffer (P1) that every call uses: the
//!   result passes through the scratch slot before it reaches the outputs. It opts in to
//!   sharing, so the emitter's "scratch is never shared" rule (SH5) is what keeps its calls apart.

use crate::ir::eval::{eval_graph, Tens, Val};
use crate::ir::infer::{graph_types, IrError};
use crate::ir::{Dtype, Graph, LoweredModule, ScratchDecl, ValueType};
use crate::program::{CompileSpec, ScalarType};
use crate::runtime::frame::{Frame, OpError, OpResult};
use crate::runtime::value::Value;
use crate::runtime::{Backend, BackendHandle, DelegateArgs, ErrorCode, InitContext};

/// Magic prefix of graph blobs.
pub const MAGIC: &[u8] = b"PTECHECK-GRAPH\0";

/// Which graph backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Stateless; opts in to sharing.
    Demo,
    /// Keeps its first call's argument slots.
    ArgKeep,
    /// Declares and uses scratch memory.
    Scratch,
}

impl Flavor {
    /// Registry id.
    pub fn id(self) -> &'static str {
        match self {
            Flavor::Demo => "demo",
            Flavor::ArgKeep => "argkeep",
            Flavor::Scratch => "scratch",
        }
    }

    /// The flavor registered as `id`.
    pub fn from_id(id: &str) -> Option<Flavor> {
        [Flavor::Demo, Flavor::ArgKeep, Flavor::Scratch].into_iter().find(|f| f.id() == id)
    }
}

/// Bytes of the scratch buffer the `scratch` backend declares for a sub-graph: room for its
/// largest output.
pub fn scratch_bytes(g: &Graph) -> u64 {
    let types = graph_types(g, &[], "graph").unwrap_or_default();
    g.outputs
        .iter()
        .map(|o| match types.get(*o) {
            Some(ValueType::Tensor { dtype, shape, .. }) => {
                shape.iter().product::<usize>() as u64 * dtype_size(*dtype) as u64
            }
            _ => 8,
        })
        .max()
        .unwrap_or(8)
        .max(8)
}

fn dtype_size(d: Dtype) -> usize {
    match d {
        Dtype::F32 => 4,
        Dtype::I64 => 8,
        Dtype::Bool => 1,
    }
}

/// Preprocess: the lowered module for `g` (bytes = magic ++ compact JSON of the graph).
pub fn lower(flavor: Flavor, g: Graph, compile_specs: Vec<(String, Vec<u8>)>) -> Result<LoweredModule, IrError> {
    graph_types(&g, &[], "graph")?;
    let mut processed = MAGIC.to_vec();
    processed.extend(serde_json::to_vec(&g).map_err(|e| IrError { path: "graph".into(), detail: e.to_string() })?);
    let scratch_specs = match flavor {
        Flavor::Scratch => vec![ScratchDecl { nbytes: scratch_bytes(&g), mem_id: None }],
        _ => vec![],
    };
    Ok(LoweredModule {
        backend: flavor.id().to_string(),
        graph: g,
        processed,
        compile_specs: compile_specs.into_iter().map(|(k, v)| (k, crate::ir::HexBytes(v))).collect(),
        // `scratch` opts in too: its declared scratch is what must stop sharing (SH5).
        share_handle_across_calls: flavor != Flavor::ArgKeep,
        scratch_specs,
    })
}

/// Parses a graph blob.
pub fn parse(processed: &[u8]) -> OpResult<Graph> {
    let body = processed
        .strip_prefix(MAGIC)
        .ok_or_else(|| OpError::new(ErrorCode::DelegateInvalidCompatibility, "blob lacks the PTECHECK-GRAPH magic"))?;
    let g: Graph = serde_json::from_slice(body)
        .map_err(|e| OpError::new(ErrorCode::InvalidProgram, format!("graph blob: {e}")))?;
    graph_types(&g, &[], "graph").map_err(|e| OpError::new(ErrorCode::InvalidProgram, format!("graph blob: {e}")))?;
    Ok(g)
}

/// Reads value slot `v` as an IR value.
pub fn read_val(f: &Frame<'_>, v: usize) -> OpResult<Val> {
    Ok(match f.value(v)? {
        Value::Tensor(_) => {
            let dtype = match f.dtype(v)? {
                ScalarType::FLOAT => Dtype::F32,
                ScalarType::LONG => Dtype::I64,
                ScalarType::BOOL => Dtype::Bool,
                other => return Err(OpError::new(ErrorCode::NotSupported, format!("values[{v}]: dtype {other}"))),
            };
            Val::Tensor(Tens { dtype, shape: f.sizes(v)?, data: f.read_f64(v)? })
        }
        Value::Int(i) => Val::Int(*i),
        Value::Bool(b) => Val::Bool(*b),
        Value::Double(d) => Val::Double(*d),
        other => return Err(OpError::new(ErrorCode::InvalidType, format!("values[{v}] is {}", other.kind()))),
    })
}

/// Writes an IR value into slot `v` (tensors are resized, then written).
pub fn write_val(f: &mut Frame<'_>, v: usize, val: &Val) -> OpResult<()> {
    match val {
        Val::Tensor(t) => {
            f.resize(v, &t.shape)?;
            f.write_f64(v, &t.data)
        }
        Val::Int(i) => f.set(v, Value::Int(*i)),
        Val::Bool(b) => f.set(v, Value::Bool(*b)),
        Val::Double(d) => f.set(v, Value::Double(*d)),
    }
}

struct State {
    graph: Graph,
    kept_args: Option<Vec<usize>>,
}

/// The runtime side of a graph backend.
#[derive(Debug)]
pub struct GraphBackend(pub Flavor);

impl Backend for GraphBackend {
    fn id(&self) -> &str {
        self.0.id()
    }

    fn init(&self, _ctx: &InitContext<'_>, processed: &[u8], _specs: &[CompileSpec]) -> Result<BackendHandle, OpError> {
        let graph = parse(processed)?;
        Ok(BackendHandle { bytes: processed.len(), state: Box::new(State { graph, kept_args: None }) })
    }

    fn execute(&self, handle: &mut BackendHandle, args: &mut DelegateArgs<'_, '_>) -> Result<(), OpError> {
        let st = handle
            .state
            .downcast_mut::<State>()
            .ok_or_else(|| OpError::new(ErrorCode::DelegateInvalidHandle, "not a graph handle"))?;
        let slots: Vec<usize> = match self.0 {
            Flavor::ArgKeep => st.kept_args.get_or_insert_with(|| args.args.to_vec()).clone(),
            _ => args.args.to_vec(),
        };
        let (n_in, n_out) = (st.graph.inputs.len(), st.graph.outputs.len());
        let n_scratch = if self.0 == Flavor::Scratch { 1 } else { 0 };
        if slots.len() != n_in + n_out + n_scratch {
            return Err(OpError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "call passes {} args; the graph takes {n_in} inputs, {n_out} outputs, {n_scratch} scratch",
                    slots.len()
                ),
            ));
        }
        let inputs = slots[..n_in].iter().map(|v| read_val(args.frame, *v)).collect::<OpResult<Vec<_>>>()?;
        let outputs = eval_graph(&st.graph, &[], &inputs, "delegate")
            .map_err(|e| OpError::new(ErrorCode::Internal, e.to_string()))?;
        for (k, (slot, val)) in slots[n_in..n_in + n_out].iter().zip(&outputs).enumerate() {
            if self.0 == Flavor::Scratch && k == 0 {
                // Route the first output through the scratch slot: bytes out, bytes back.
                write_val(args.frame, *slot, val)?;
                let bytes = args.frame.bytes(*slot)?.to_vec();
                let scratch = slots[n_in + n_out];
                let cap = args.frame.bytes(scratch)?.len();
                if cap < bytes.len() {
                    return Err(OpError::new(
                        ErrorCode::DelegateMemoryAllocationFailed,
                        format!("scratch of {cap} B < {} B", bytes.len()),
                    ));
                }
                let mut buf = args.frame.bytes(scratch)?.to_vec();
                buf[..bytes.len()].copy_from_slice(&bytes);
                args.frame.write_bytes(scratch, &buf)?;
                let back = args.frame.bytes(scratch)?[..bytes.len()].to_vec();
                args.frame.write_bytes(*slot, &back)?;
            } else {
                write_val(args.frame, *slot, val)?;
            }
        }
        Ok(())
    }
}
