//! Test backends whose processed bytes are their sub-graph compiled to a plan of CPU kernels
//! (both sides). Preprocess runs our emitter on the sub-graph as a one-method program and stores
//! the `.pte` bytes; the runtime side validates that plan at `init` and runs it per call in a
//! nested frame with the runtime's kernels (`runtime::nested`). The eager interpreter never
//! runs inside a delegate, so the outputs it predicts are an independent check.
//!
//! * `demo` — stateless; opts in to handle sharing (SH12).
//! * `argkeep` — its handle keeps the argument slots of the first call it serves and reads
//!   those on every later call. With one call site per handle (the default) that is always
//!   right; a handle shared across call sites reads the wrong slots — why sharing is opt-in.
//!   It does not opt in.
//! * `scratch` — like `demo`, and declares one scratch buffer (P1) that every call uses: the
//!   first output passes through the scratch slot before it reaches its destination. It opts in
//!   to sharing, so the emitter's "scratch is never shared" rule (SH5) is what keeps its calls
//!   apart.

use super::blob_cache::{BlobCache, compiled};
use crate::emit::{EmitOptions, emit_typed};
use crate::fault::Fault;
use crate::ir::infer::{IrError, err, graph_types};
use crate::ir::{Dtype, Graph, IrMethod, IrProgram, LoweredModule, ScratchDecl, ValueType};
use crate::program::CompileSpec;
use crate::runtime::frame::{OpError, OpResult};
use crate::runtime::{Backend, BackendHandle, DelegateArgs, ErrorCode, InitContext, NestedPlan};
use std::cell::RefCell;
use std::sync::Arc;

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

/// Name of the one method of a graph blob's program.
pub const BLOB_METHOD: &str = "forward";

/// Compiles `g`, whose ref types `graph_types` gave as `types`, to the `.pte` bytes of a
/// one-method program of CPU kernels.
pub(crate) fn compile(g: &Graph, types: Vec<ValueType>) -> Result<Vec<u8>, IrError> {
    let program = IrProgram {
        methods: vec![IrMethod { name: BLOB_METHOD.into(), graph: g.clone() }],
        modules: vec![],
        named_data: vec![],
    };
    // A program of one method and no modules types as its graph does.
    let emitted = emit_typed(&program, &[types], &EmitOptions::default()).map_err(|e| err("graph", e.to_string()))?;
    emitted.to_bytes().map_err(|e| err("graph", e.to_string()))
}

/// Preprocess: the lowered module for `g` (bytes = magic ++ the compiled program). `fault`
/// plants a seeded bug in preprocess (mutation testing only).
pub fn lower(
    flavor: Flavor,
    g: Graph,
    compile_specs: Vec<(String, Vec<u8>)>,
    fault: Option<Fault>,
) -> Result<LoweredModule, IrError> {
    let types = graph_types(&g, &[], "graph")?;
    let mut processed = MAGIC.to_vec();
    processed.extend(compile(&g, types)?);
    let scratch_specs = match flavor {
        Flavor::Scratch => vec![ScratchDecl { nbytes: scratch_bytes(&g), mem_id: None }],
        _ => vec![],
    };
    // `scratch` opts in too: its declared scratch is what must stop sharing (SH5). `argkeep`
    // keeps per-call state and must not — unless the seeded bug says it does.
    let share_handle_across_calls = flavor != Flavor::ArgKeep || fault == Some(Fault::ArgkeepOptedIn);
    Ok(LoweredModule {
        backend: flavor.id().to_string(),
        graph: g,
        processed,
        compile_specs: compile_specs.into_iter().map(|(k, v)| (k, crate::ir::HexBytes(v))).collect(),
        share_handle_across_calls,
        scratch_specs,
    })
}

thread_local! {
    /// Plans compiled from graph blobs on this thread.
    pub static PLANS: RefCell<BlobCache<NestedPlan>> = RefCell::default();
}

/// Parses and validates a graph blob into its plan.
pub fn parse(processed: &[u8]) -> OpResult<NestedPlan> {
    let body = processed
        .strip_prefix(MAGIC)
        .ok_or_else(|| OpError::new(ErrorCode::DelegateInvalidCompatibility, "blob lacks the PTECHECK-GRAPH magic"))?;
    NestedPlan::from_pte(body, BLOB_METHOD)
}

struct State {
    plan: Arc<NestedPlan>,
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
        let plan = compiled(&PLANS, processed, || parse(processed))?;
        Ok(BackendHandle { bytes: processed.len(), state: Box::new(State { plan, kept_args: None }) })
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
        let (n_in, n_out) = (st.plan.num_inputs(), st.plan.num_outputs());
        let n_scratch = usize::from(self.0 == Flavor::Scratch);
        if slots.len() != n_in + n_out + n_scratch {
            return Err(OpError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "call passes {} args; the graph takes {n_in} inputs, {n_out} outputs, {n_scratch} scratch",
                    slots.len()
                ),
            ));
        }
        let mut call = DelegateArgs { frame: &mut *args.frame, args: &slots, site: args.site };
        st.plan.call(&mut call)?;
        if self.0 == Flavor::Scratch && n_out > 0 {
            // Route the first output through the scratch slot: bytes out, bytes back.
            let (out, scratch) = (slots[n_in], slots[n_in + n_out]);
            let bytes = args.frame.bytes(out)?.to_vec();
            let mut buf = args.frame.bytes(scratch)?.to_vec();
            let cap = buf.len();
            buf.get_mut(..bytes.len())
                .ok_or_else(|| {
                    OpError::new(
                        ErrorCode::DelegateMemoryAllocationFailed,
                        format!("scratch of {cap} B < {} B", bytes.len()),
                    )
                })?
                .copy_from_slice(&bytes);
            args.frame.write_bytes(scratch, &buf)?;
            let back = args.frame.bytes(scratch)?[..bytes.len()].to_vec();
            args.frame.write_bytes(out, &back)?;
        }
        Ok(())
    }
}
