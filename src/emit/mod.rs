//! Reference emitter: IR program -> `.pte` [`Program`] plus segment bytes, following every
//! rule of semantics.md A, C.1, C.2 and our choices P1, P4-P7, P12.
//!
//! Program-wide: constants deduplicated by content (E7, index 0 reserved), delegate blobs
//! deduplicated by their bytes only (E17/BD1); E7/E17 key by SHA-256, and comparing the bytes
//! themselves gives the same answer without hashing every buffer. Per method: values appended
//! in graph order (E5), operators deduplicated by (name, overload) (E12), one BackendDelegate
//! per call site (E18) unless the module's backend opted in and it declares no scratch, in which
//! case one per lowered module per method, wherever the calls are (SH3-SH5, P4, P6). Control flow is
//! inlined into the single chain with absolute jump targets (E23-E26, P12). Memory planning is a
//! bump allocator (16-byte aligned, no reuse) in arena 1.
//! May not touch: bytes (that is `format::write`), the runtime.

use crate::fault::Fault;
use crate::format::{self, FormatError, WriteOptions};
use crate::ir::infer::{IrError, graph_types};
use crate::ir::{ConstTensor, Dtype, Graph, IrProgram, LoweredModule, Node, Op, Ref, ValueType};
use crate::program::*;
use std::collections::HashMap;
use std::hash::BuildHasher;
use thiserror::Error;

/// Which calls of a module that opted in to sharing share one delegate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShareScope {
    /// Every call of the module in the method, control-flow bodies included (SH3).
    #[default]
    Method,
    /// Only calls in the same graph body (a method's top level, one cond branch, one loop body).
    Body,
}

/// What makes two delegates' processed blobs one stored blob.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlobDedup {
    /// Equal bytes, program-wide (E17).
    #[default]
    Bytes,
    /// The same lowered module (equal bytes of two modules are stored twice).
    Module,
}

/// Emitter options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmitOptions {
    /// Honour `share_handle_across_calls` (false = emit as if no backend opted in).
    pub share: bool,
    /// Which calls share, when sharing is honoured.
    pub scope: ShareScope,
    /// How blobs are deduplicated.
    pub dedup: BlobDedup,
    /// Emit scratch declarations and call-site scratch slots (P1); without, a module's scratch
    /// specs are left out, as an emitter without scratch support does.
    pub scratch: bool,
    /// Move delegate blobs into segments (ExecuTorch's `extract_delegate_segments`).
    pub delegate_segments: bool,
    /// Allow `while_loop` (P12); without it, E27's InternalError.
    pub allow_while: bool,
    /// A seeded bug to exhibit (mutation testing only; `None` in normal use).
    pub fault: Option<Fault>,
}

impl Default for EmitOptions {
    fn default() -> Self {
        EmitOptions {
            share: true,
            scope: ShareScope::Method,
            dedup: BlobDedup::Bytes,
            scratch: true,
            delegate_segments: true,
            allow_while: false,
            fault: None,
        }
    }
}

/// Whether calls of one lowered module may share a delegate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sharing {
    /// One `BackendDelegate` per call site, always.
    None,
    /// The calls of a module that opted in (and has no scratch) share one, within the scope.
    OptIn,
}

/// The rules an emitter follows (the reference emitter's are chosen by [`EmitOptions`]; an
/// exporter announces its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// Delegate sharing.
    pub sharing: Sharing,
    /// Which calls share, under [`Sharing::OptIn`].
    #[serde(default)]
    pub sharing_scope: ShareScope,
    /// Whether scratch declarations are emitted.
    pub scratch: bool,
    /// How processed blobs are deduplicated.
    pub blob_dedup: BlobDedup,
}

impl Rules {
    /// ExecuTorch 1.5.1's emitter: one delegate per call, no scratch, blobs by bytes.
    pub const EXECUTORCH_1_5_1: Rules =
        Rules { sharing: Sharing::None, sharing_scope: ShareScope::Body, scratch: false, blob_dedup: BlobDedup::Bytes };
    /// The change ptecheck's reference emitter implements: opt-in sharing across the method.
    pub const OPT_IN: Rules = Rules {
        sharing: Sharing::OptIn,
        sharing_scope: ShareScope::Method,
        scratch: true,
        blob_dedup: BlobDedup::Bytes,
    };
    /// Opt-in sharing within one graph body only (what sharing by object identity can do).
    pub const OPT_IN_BODY: Rules =
        Rules { sharing: Sharing::OptIn, sharing_scope: ShareScope::Body, scratch: true, blob_dedup: BlobDedup::Bytes };
}

impl EmitOptions {
    /// The options that follow `rules`, with blobs in segments and `while_loop` allowed.
    pub fn following(rules: Rules) -> EmitOptions {
        EmitOptions {
            share: rules.sharing == Sharing::OptIn,
            scope: rules.sharing_scope,
            dedup: rules.blob_dedup,
            scratch: rules.scratch,
            delegate_segments: true,
            allow_while: true,
            fault: None,
        }
    }
}

/// Why a program could not be emitted.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum EmitError {
    /// The IR does not type-check.
    #[error("invalid program: {0}")]
    Invalid(#[from] IrError),
    /// `while_loop` without `allow_while` (E27).
    #[error("{path}: Unsupported control flow operator: while_loop")]
    UnsupportedWhile {
        /// Where.
        path: String,
    },
    /// Writing the bytes failed.
    #[error("{0}")]
    Format(#[from] FormatError),
}

/// An emitted program and its segment bytes, ready for `format::write`.
#[derive(Clone, Debug, PartialEq)]
pub struct Emitted {
    /// The program.
    pub program: Program,
    /// Bytes of each segment.
    pub segment_data: Vec<Vec<u8>>,
}

impl Emitted {
    /// The `.pte` bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, FormatError> {
        let refs: Vec<&[u8]> = self.segment_data.iter().map(Vec::as_slice).collect();
        format::write(&self.program, &refs, &WriteOptions::default())
    }
}

/// Kernels every map/scan loop is lowered onto (E25/E26): its size, its slices, its stacked
/// outputs and its counter.
pub const LOOP_KERNELS: &[&str] = &[
    "aten::sym_size.int",
    "aten::select_copy.int_out",
    "executorch_prim::et_copy_index.tensor",
    "executorch_prim::add.Scalar",
    "executorch_prim::eq.Scalar",
    "executorch_prim::sub.Scalar",
];

/// The kernel that copies loop-carried tensors (scan carries, while carries).
pub const COPY_KERNEL: &str = "aten::copy_.default";

const ARENA_ALIGN: usize = 16;
const CONSTANT_ALIGN: usize = 16;

/// Byte strings kept once each by content, numbered in order of first sight (E3's
/// program-wide dedup of constants and blobs, S4's of named data).
#[derive(Default)]
struct Distinct {
    items: Vec<Vec<u8>>,
    /// Numbers into `items`, by their content's hash.
    index: hashbrown::HashTable<u32>,
    hasher: hashbrown::DefaultHashBuilder,
}

impl Distinct {
    /// The number of `bytes`' content (the next one when it is new).
    fn number<B: AsRef<[u8]> + Into<Vec<u8>>>(&mut self, bytes: B) -> u32 {
        let (items, hasher) = (&self.items, &self.hasher);
        let hash = hasher.hash_one(bytes.as_ref());
        let eq = |i: &u32| items[*i as usize] == bytes.as_ref();
        match self.index.entry(hash, eq, |i| hasher.hash_one(&items[*i as usize][..])) {
            hashbrown::hash_table::Entry::Occupied(e) => *e.get(),
            hashbrown::hash_table::Entry::Vacant(e) => {
                let i = items.len() as u32;
                e.insert(i);
                self.items.push(bytes.into());
                i
            }
        }
    }
}

/// Program-wide emitter state (E3).
#[derive(Default)]
struct ProgramState {
    /// Distinct constant buffers; buffer `i + 1` of the program is `constants.items[i]` (buffer
    /// 0 is the empty placeholder).
    constants: Distinct,
    /// Distinct delegate blobs.
    blobs: Distinct,
    /// Under [`BlobDedup::Module`]: each module's blob number.
    module_blobs: HashMap<usize, u32>,
}

impl ProgramState {
    fn constant(&mut self, bytes: Vec<u8>) -> u32 {
        1 + self.constants.number(bytes)
    }

    fn blob(&mut self, bytes: &[u8]) -> u32 {
        self.blobs.number(bytes)
    }

    /// Module `module`'s blob, one per module whatever its bytes (kept by module, not content).
    fn blob_of_module(&mut self, module: usize, bytes: &[u8]) -> u32 {
        let items = &mut self.blobs.items;
        *self.module_blobs.entry(module).or_insert_with(|| {
            items.push(bytes.to_vec());
            (items.len() - 1) as u32
        })
    }
}

/// Per-method emitter state (E3); control-flow sub-graphs share it.
struct MethodState<'p> {
    modules: &'p [LoweredModule],
    opts: EmitOptions,
    values: Vec<EValue>,
    operators: Vec<Operator>,
    delegates: Vec<BackendDelegate>,
    /// The delegate each sharing key got: (module, body) with [`ShareScope::Body`], else
    /// (module, 0).
    shared_delegate: HashMap<(usize, usize), i32>,
    /// The graph body being emitted (0: the method's top level; each sub-graph a new number).
    body: usize,
    /// Bodies numbered so far.
    bodies: usize,
    instructions: Vec<Instruction>,
    arena: usize,
    /// Whether any value is planned in arena 1 (even zero-sized: it still names the arena).
    planned_any: bool,
    /// Nesting depth of loop bodies being emitted.
    loop_depth: usize,
}

fn dtype_scalar(d: Dtype) -> ScalarType {
    match d {
        Dtype::F32 => ScalarType::FLOAT,
        Dtype::I64 => ScalarType::LONG,
        Dtype::Bool => ScalarType::BOOL,
    }
}

/// Little-endian bytes of a constant tensor.
pub fn const_bytes(c: &ConstTensor) -> Vec<u8> {
    match c.dtype {
        Dtype::F32 => c.values.iter().flat_map(|v| (*v as f32).to_le_bytes()).collect(),
        Dtype::I64 => c.values.iter().flat_map(|v| (*v as i64).to_le_bytes()).collect(),
        Dtype::Bool => c.values.iter().map(|v| (*v != 0.0) as u8).collect(),
    }
}

impl MethodState<'_> {
    fn push(&mut self, v: EValue) -> usize {
        self.values.push(v);
        self.values.len() - 1
    }

    fn int(&mut self, v: i64) -> usize {
        self.push(EValue::Int(v))
    }

    fn planned(&mut self, scalar_type: ScalarType, shape: &[usize], dynamic: bool) -> usize {
        // Typed shapes are bounded (`infer::MAX_NUMEL`); the sum saturates and is refused
        // below when it does not fit int64.
        let nbytes = shape.iter().fold(scalar_type.element_size().unwrap_or(1), |a, d| a.saturating_mul(*d));
        let offset = self.arena;
        self.arena = self.arena.saturating_add(nbytes.div_ceil(ARENA_ALIGN).saturating_mul(ARENA_ALIGN));
        self.planned_any = true;
        self.push(EValue::Tensor(Tensor {
            scalar_type,
            sizes: Some(shape.iter().map(|s| *s as i32).collect()),
            dim_order: Some((0..shape.len() as u8).collect()),
            allocation_info: Some(AllocationDetails {
                memory_id: 1,
                memory_offset_low: offset as u32,
                memory_offset_high: (offset as u64 >> 32) as u32,
            }),
            shape_dynamism: if dynamic { TensorShapeDynamism::DYNAMIC_BOUND } else { TensorShapeDynamism::STATIC },
            ..Tensor::default()
        }))
    }

    /// A fresh value for a result of type `t` (planned tensor, or a placeholder scalar, E16).
    fn new_value(&mut self, t: &ValueType) -> usize {
        match t {
            ValueType::Tensor { dtype, shape, dynamic } => self.planned(dtype_scalar(*dtype), shape, *dynamic),
            ValueType::Int => self.int(0),
            ValueType::Bool => self.push(EValue::Bool(false)),
            ValueType::Double => self.push(EValue::Double(0.0)),
        }
    }

    fn operator(&mut self, name: &str, overload: &str) -> i32 {
        // A method names a few dozen operators at most: a scan beats hashing two new strings.
        let known = self
            .operators
            .iter()
            .position(|o| o.name.as_deref() == Some(name) && o.overload.as_deref() == Some(overload));
        let i = known.unwrap_or_else(|| {
            self.operators.push(Operator { name: Some(name.into()), overload: Some(overload.into()) });
            self.operators.len() - 1
        });
        i as i32
    }

    fn kernel(&mut self, name: &str, overload: &str, args: Vec<usize>) {
        let op_index = self.operator(name, overload);
        self.instructions.push(Instruction::KernelCall(KernelCall {
            op_index,
            args: Some(args.iter().map(|a| *a as i32).collect()),
        }));
    }

    fn jump(&mut self, cond: usize, destination: usize) -> usize {
        self.instructions.push(Instruction::JumpFalseCall(JumpFalseCall {
            cond_value_index: cond as i32,
            destination_instruction: destination as i32,
        }));
        self.instructions.len() - 1
    }

    fn patch_jump(&mut self, at: usize, destination: usize) {
        if let Some(Instruction::JumpFalseCall(j)) = self.instructions.get_mut(at) {
            j.destination_instruction = destination as i32;
        }
    }

    fn mov(&mut self, from: usize, to: usize) {
        self.instructions.push(Instruction::MoveCall(MoveCall { move_from: from as i32, move_to: to as i32 }));
    }

    /// Copies `src` into the slot `dst`: `copy_` for tensors, MoveCall for scalars.
    fn copy_into(&mut self, dst: usize, src: usize) {
        if matches!(self.values.get(dst), Some(EValue::Tensor(_))) {
            let nb = self.push(EValue::Bool(false));
            self.kernel("aten::copy_", "", vec![dst, src, nb, dst]);
        } else if dst != src {
            self.mov(src, dst);
        }
    }

    /// A fresh value of the same kind (and, for tensors, metadata) as value `v`.
    fn like(&mut self, v: usize) -> usize {
        match self.values.get(v).cloned() {
            Some(EValue::Tensor(t)) => {
                let shape: Vec<usize> = t.sizes.iter().flatten().map(|s| *s as usize).collect();
                self.planned(t.scalar_type, &shape, t.shape_dynamism != TensorShapeDynamism::STATIC)
            }
            Some(other) => self.push(other),
            None => self.push(EValue::Null),
        }
    }

    /// Loop-carried update `dsts[k] := srcs[k]` for all k at once: when a source is itself one
    /// of the destinations (the body returned a carried input), stage every source through a
    /// temporary first so no update reads a value another update already overwrote.
    fn update(&mut self, dsts: &[usize], srcs: &[usize]) {
        let aliased = srcs.iter().zip(dsts).any(|(s, d)| s != d && dsts.contains(s));
        if aliased {
            let temps: Vec<usize> = srcs
                .iter()
                .zip(dsts)
                .map(|(s, d)| {
                    let t = self.like(*d);
                    self.copy_into(t, *s);
                    t
                })
                .collect();
            for (d, t) in dsts.iter().zip(&temps) {
                self.copy_into(*d, *t);
            }
        } else {
            for (d, s) in dsts.iter().zip(srcs) {
                self.copy_into(*d, *s);
            }
        }
    }

    /// An unplanned tensor value (no `allocation_info`): its data pointer is set at run time
    /// (`et_view`'s output, E13).
    fn unplanned(&mut self, t: &ValueType) -> usize {
        let ValueType::Tensor { dtype, shape, dynamic } = t else { return self.new_value(t) };
        self.push(EValue::Tensor(Tensor {
            scalar_type: dtype_scalar(*dtype),
            sizes: Some(shape.iter().map(|s| *s as i32).collect()),
            dim_order: Some((0..shape.len() as u8).collect()),
            shape_dynamism: if *dynamic { TensorShapeDynamism::DYNAMIC_BOUND } else { TensorShapeDynamism::STATIC },
            ..Tensor::default()
        }))
    }

    /// An IntList of fresh Int values (list elements are emitted before the list, E9).
    fn int_list(&mut self, items: &[i64]) -> usize {
        let items: Vec<i64> = items.iter().map(|d| self.int(*d) as i64).collect();
        self.push(EValue::IntList(Some(items)))
    }

    fn op(&mut self, op: &Op, args: &[usize], out_type: &ValueType) -> usize {
        use Op::*;
        let out = if matches!(op, View { .. }) { self.unplanned(out_type) } else { self.new_value(out_type) };
        // Schema arguments in order (literals become fresh values, E9), then the outputs (E12).
        let (schema, outs): (Vec<usize>, Vec<usize>) = match op {
            Add | Sub => {
                let alpha = self.int(1);
                (vec![args[0], args[1], alpha], vec![out, out])
            }
            Mul | Div | Mm | GtTensor => (vec![args[0], args[1]], vec![out, out]),
            Relu | Sin | Cos => (vec![args[0]], vec![out, out]),
            Linear => (vec![args[0], args[1], args[2]], vec![out, out]),
            Addmm => {
                let (beta, alpha) = (self.int(1), self.int(1));
                (vec![args[0], args[1], args[2], beta, alpha], vec![out, out])
            }
            PermuteCopy { dims } => {
                let list = self.int_list(dims);
                (vec![args[0], list], vec![out, out])
            }
            Cumsum { dim } => {
                let d = self.int(*dim);
                let dtype = self.push(EValue::Null);
                (vec![args[0], d, dtype], vec![out, out])
            }
            SelectCopy { dim, index } => {
                let (d, i) = (self.int(*dim), self.int(*index));
                (vec![args[0], d, i], vec![out, out])
            }
            IndexSelect { dim } => {
                let d = self.int(*dim);
                (vec![args[0], d, args[1]], vec![out, out])
            }
            Argmax { dim, keepdim } => {
                let d = match dim {
                    Some(d) => self.int(*d),
                    None => self.push(EValue::Null),
                };
                let k = self.push(EValue::Bool(*keepdim));
                (vec![args[0], d, k], vec![out, out])
            }
            Gt { other } => {
                let o = self.push(EValue::Double(*other));
                (vec![args[0], o], vec![out, out])
            }
            View { shape } => {
                let list = self.int_list(shape);
                (vec![args[0], list], vec![out])
            }
            SymSize { dim } => {
                let d = self.int(*dim);
                (vec![args[0], d], vec![out])
            }
            ScalarAdd | ScalarSub | ScalarMul | ScalarFloordiv | ScalarEq | ScalarLt | ScalarGt | ScalarGe
            | ScalarLe => (vec![args[0], args[1]], vec![out]),
        };
        let (name, overload) = op.kind().kernel();
        self.kernel(name, overload, schema.into_iter().chain(outs).collect());
        out
    }

    fn call(&mut self, module: usize, args: &[usize], out_types: &[ValueType]) -> Vec<usize> {
        let m = &self.modules[module];
        // Outputs first (E16), then P1's scratch slots.
        let outs: Vec<usize> = out_types.iter().map(|t| self.new_value(t)).collect();
        let scratch_specs: &[crate::ir::ScratchDecl] = if self.opts.scratch { &m.scratch_specs } else { &[] };
        let scratch: Vec<usize> =
            scratch_specs.iter().map(|s| self.planned(ScalarType::BYTE, &[s.nbytes as usize], false)).collect();
        let fault = self.opts.fault;
        let mut shares = self.opts.share
            && m.share_handle_across_calls
            && (scratch_specs.is_empty() || fault == Some(Fault::ShareScratch));
        // The sharing key is the module's identity (P4), and its body under the body scope —
        // unless a seeded bug keys it by bytes.
        let body = if self.opts.scope == ShareScope::Body { self.body } else { 0 };
        let mut key = (module, body);
        if matches!(fault, Some(Fault::ShareIdenticalBlobs) | Some(Fault::DedupWholeDelegate)) {
            key.0 = self.modules.iter().position(|o| o.processed == m.processed).unwrap_or(module);
            shares |= fault == Some(Fault::DedupWholeDelegate);
        }
        let wrong = (fault == Some(Fault::WrongDelegateInLoop) && self.loop_depth > 0)
            .then(|| self.shared_delegate.iter().find(|(k, _)| **k != key).map(|(_, v)| *v))
            .flatten();
        let delegate_index = match (wrong, self.shared_delegate.get(&key)) {
            (Some(w), _) => w,
            (None, Some(i)) if shares => *i,
            _ => {
                let mut specs: Vec<CompileSpec> =
                    m.compile_specs.iter().map(|(k, v)| CompileSpec::new(k.clone(), v.0.clone())).collect();
                if !scratch_specs.is_empty() {
                    let decl: Vec<ScratchSpec> = scratch_specs
                        .iter()
                        .map(|s| ScratchSpec { nbytes: s.nbytes, mem_id: s.mem_id.unwrap_or(-1) })
                        .collect();
                    specs.push(CompileSpec::new(SCRATCH_KEY, encode_scratch(&decl)));
                }
                self.delegates.push(BackendDelegate {
                    id: Some(m.backend.clone()),
                    // The blob index is filled in by the program-wide cache (E17) below.
                    processed: Some(BackendDelegateDataReference {
                        location: DataLocation::INLINE,
                        index: module as u32,
                    }),
                    compile_specs: Some(specs),
                });
                let i = (self.delegates.len() - 1) as i32;
                if shares || fault == Some(Fault::WrongDelegateInLoop) {
                    self.shared_delegate.entry(key).or_insert(i);
                }
                i
            }
        };
        let mut all: Vec<i32> = args.iter().map(|a| *a as i32).collect();
        if fault == Some(Fault::SwapDelegateInputs) && all.len() >= 2 {
            // Seeded bug: the first two inputs change places when their types agree (so every
            // structural check still passes).
            let c = m.graph.constants.len();
            let types = graph_types(&m.graph, &[], "module").unwrap_or_default();
            if types.get(c).is_some() && types.get(c) == types.get(c + 1) {
                all.swap(0, 1);
            }
        }
        all.extend(outs.iter().map(|o| *o as i32));
        if fault == Some(Fault::DropLastDelegateOutput) {
            all.pop();
        }
        all.extend(scratch.iter().map(|s| *s as i32));
        self.instructions.push(Instruction::DelegateCall(DelegateCall { delegate_index, args: Some(all) }));
        outs
    }

    /// Emits a graph. Method bodies get fresh input values (`bound = None`); sub-graphs have
    /// their inputs bound to the operand values. Returns the value of every ref.
    fn graph(
        &mut self,
        prog: &mut ProgramState,
        g: &Graph,
        bound: Option<&[usize]>,
        path: &str,
    ) -> Result<Vec<usize>, EmitError> {
        let types = graph_types(g, self.modules, path)?;
        if bound.is_none() {
            return self.typed_graph(prog, g, bound, path, &types);
        }
        // A sub-graph is a body of its own.
        self.bodies += 1;
        let outer = std::mem::replace(&mut self.body, self.bodies);
        let refs = self.typed_graph(prog, g, bound, path, &types);
        self.body = outer;
        refs
    }

    /// [`MethodState::graph`] with the graph's ref types already inferred (`graph_types`).
    fn typed_graph(
        &mut self,
        prog: &mut ProgramState,
        g: &Graph,
        bound: Option<&[usize]>,
        path: &str,
        types: &[ValueType],
    ) -> Result<Vec<usize>, EmitError> {
        let mut refs: Vec<usize> = Vec::with_capacity(types.len());
        for c in &g.constants {
            let idx = prog.constant(const_bytes(c));
            refs.push(self.push(EValue::Tensor(Tensor {
                scalar_type: dtype_scalar(c.dtype),
                sizes: Some(c.shape.iter().map(|s| *s as i32).collect()),
                dim_order: Some((0..c.shape.len() as u8).collect()),
                data_buffer_idx: idx,
                ..Tensor::default()
            })));
        }
        match bound {
            Some(b) => refs.extend_from_slice(b),
            None => {
                for t in &g.inputs {
                    let v = self.new_value(t);
                    refs.push(v);
                }
            }
        }
        let frees = view_frees(g, self.modules);
        for (i, node) in g.nodes.iter().enumerate() {
            // The node's path, spelled out for control flow and errors only.
            let p = || format!("{path}.nodes[{i}]");
            // `graph_types` typed every node in order: this node's outputs follow the refs so far.
            let out_types = types
                .get(refs.len()..refs.len() + node.output_count(self.modules))
                .ok_or_else(|| EmitError::from(IrError { path: p(), detail: "node outputs are not typed".into() }))?;
            let r = |x: &Ref| refs[*x];
            let outs = match node {
                Node::Op { op, args } => {
                    let a: Vec<usize> = args.iter().map(r).collect();
                    vec![self.op(op, &a, &out_types[0])]
                }
                Node::Call { module, args } => {
                    let a: Vec<usize> = args.iter().map(r).collect();
                    self.call(*module, &a, out_types)
                }
                Node::Cond { pred, then_graph, else_graph, operands } => {
                    let ops: Vec<usize> = operands.iter().map(r).collect();
                    self.cond(prog, r(pred), then_graph, else_graph, &ops, out_types, &p())?
                }
                Node::Map { body, xs, args } => {
                    let extra: Vec<usize> = args.iter().map(r).collect();
                    self.map(prog, body, r(xs), &extra, &types[*xs], out_types, &p())?
                }
                Node::Scan { body, init, xs } => {
                    let ini: Vec<usize> = init.iter().map(r).collect();
                    let x: Vec<(usize, ValueType)> = xs.iter().map(|x| (r(x), types[*x].clone())).collect();
                    self.scan(prog, body, &ini, &x, out_types, &p())?
                }
                Node::While { cond, body, carried, .. } => {
                    if !self.opts.allow_while {
                        return Err(EmitError::UnsupportedWhile { path: p() });
                    }
                    let c: Vec<usize> = carried.iter().map(r).collect();
                    self.while_loop(prog, cond, body, &c, out_types, &p())?
                }
            };
            if outs.len() != out_types.len() {
                return Err(EmitError::from(IrError {
                    path: p(),
                    detail: format!("emitted {} outputs for {} typed ones", outs.len(), out_types.len()),
                }));
            }
            refs.extend(outs);
            // E13: a view's memory is released (FreeCall) after its last use.
            for r in frees.get(&i).into_iter().flatten() {
                self.instructions.push(Instruction::FreeCall(FreeCall { value_index: refs[*r] as i32 }));
            }
        }
        Ok(refs)
    }

    fn sub_outputs(
        &mut self,
        prog: &mut ProgramState,
        g: &Graph,
        bound: &[usize],
        path: &str,
    ) -> Result<Vec<usize>, EmitError> {
        let refs = self.graph(prog, g, Some(bound), path)?;
        Ok(g.outputs.iter().map(|o| refs[*o]).collect())
    }

    #[allow(clippy::too_many_arguments)]
    fn cond(
        &mut self,
        prog: &mut ProgramState,
        pred: usize,
        then_graph: &Graph,
        else_graph: &Graph,
        operands: &[usize],
        out_types: &[ValueType],
        path: &str,
    ) -> Result<Vec<usize>, EmitError> {
        // Shared outputs first (E23), then the layout of E23/E24.
        let outs: Vec<usize> = out_types.iter().map(|t| self.new_value(t)).collect();
        let first = self.jump(pred, 0);
        let t = self.sub_outputs(prog, then_graph, operands, &format!("{path}.then_graph"))?;
        for (from, to) in t.iter().zip(&outs) {
            if from != to {
                self.mov(*from, *to);
            }
        }
        let always = self.push(EValue::Bool(false));
        let second = self.jump(always, 0);
        let early = usize::from(self.opts.fault == Some(Fault::JumpOffByOne));
        self.patch_jump(first, self.instructions.len() - early);
        let e = self.sub_outputs(prog, else_graph, operands, &format!("{path}.else_graph"))?;
        for (from, to) in e.iter().zip(&outs) {
            if from != to {
                self.mov(*from, *to);
            }
        }
        self.patch_jump(second, self.instructions.len());
        Ok(outs)
    }

    /// The loop tail shared by map and scan (E25/E26): `iter += 1; done = iter == n;
    /// if !done goto head; iter -= n`.
    fn loop_tail(&mut self, iter: usize, n: usize, head: usize) {
        let one = self.int(1);
        self.kernel("executorch_prim::add", "Scalar", vec![iter, one, iter]);
        let done = self.push(EValue::Bool(false));
        self.kernel("executorch_prim::eq", "Scalar", vec![iter, n, done]);
        self.jump(done, head);
        self.kernel("executorch_prim::sub", "Scalar", vec![iter, n, iter]);
    }

    fn slice_of(&mut self, x: usize, x_type: &ValueType, iter: usize) -> usize {
        let dim = self.int(0);
        let slice = match x_type {
            ValueType::Tensor { dtype, shape, .. } => self.planned(dtype_scalar(*dtype), &shape[1..], false),
            other => self.new_value(other),
        };
        self.kernel("aten::select_copy", "int_out", vec![x, dim, iter, slice, slice]);
        slice
    }

    #[allow(clippy::too_many_arguments)]
    fn map(
        &mut self,
        prog: &mut ProgramState,
        body: &Graph,
        xs: usize,
        args: &[usize],
        xs_type: &ValueType,
        out_types: &[ValueType],
        path: &str,
    ) -> Result<Vec<usize>, EmitError> {
        let out = self.new_value(&out_types[0]);
        let (iter, n) = (self.int(0), self.int(0));
        let dim = self.int(0);
        self.kernel("aten::sym_size", "int", vec![xs, dim, n]);
        let head = self.instructions.len();
        let slice = self.slice_of(xs, xs_type, iter);
        let mut bound = vec![slice];
        bound.extend_from_slice(args);
        self.loop_depth += 1;
        let body_out = self.sub_outputs(prog, body, &bound, &format!("{path}.body"));
        self.loop_depth -= 1;
        let body_out = body_out?;
        self.kernel("executorch_prim::et_copy_index", "tensor", vec![out, body_out[0], iter]);
        self.loop_tail(iter, n, head);
        Ok(vec![out])
    }

    fn scan(
        &mut self,
        prog: &mut ProgramState,
        body: &Graph,
        init: &[usize],
        xs: &[(usize, ValueType)],
        out_types: &[ValueType],
        path: &str,
    ) -> Result<Vec<usize>, EmitError> {
        let outs: Vec<usize> = out_types.iter().map(|t| self.new_value(t)).collect();
        let (carries, ys) = outs.split_at(init.len());
        let (iter, n) = (self.int(0), self.int(0));
        let dim = self.int(0);
        self.kernel("aten::sym_size", "int", vec![xs[0].0, dim, n]);
        for (c, i) in carries.iter().zip(init) {
            self.copy_into(*c, *i);
        }
        let head = self.instructions.len();
        let mut bound = carries.to_vec();
        for (x, t) in xs {
            let s = self.slice_of(*x, t, iter);
            bound.push(s);
        }
        self.loop_depth += 1;
        let body_out = self.sub_outputs(prog, body, &bound, &format!("{path}.body"));
        self.loop_depth -= 1;
        let body_out = body_out?;
        // Stack the ys before the carries change: a y may be a carry input (an alias).
        for (y, v) in ys.iter().zip(&body_out[init.len()..]) {
            self.kernel("executorch_prim::et_copy_index", "tensor", vec![*y, *v, iter]);
        }
        self.update(carries, &body_out[..init.len()]);
        self.loop_tail(iter, n, head);
        Ok(outs)
    }

    fn while_loop(
        &mut self,
        prog: &mut ProgramState,
        cond: &Graph,
        body: &Graph,
        carried: &[usize],
        out_types: &[ValueType],
        path: &str,
    ) -> Result<Vec<usize>, EmitError> {
        // P12: condition sub-graph, JumpFalseCall out of the loop, body, copies of the carried
        // values, unconditional back-jump.
        let outs: Vec<usize> = out_types.iter().map(|t| self.new_value(t)).collect();
        for (o, c) in outs.iter().zip(carried) {
            self.copy_into(*o, *c);
        }
        let head = self.instructions.len();
        let c = self.sub_outputs(prog, cond, &outs, &format!("{path}.cond"))?;
        let exit = self.jump(c[0], 0);
        self.loop_depth += 1;
        let new = self.sub_outputs(prog, body, &outs, &format!("{path}.body"));
        self.loop_depth -= 1;
        let new = new?;
        self.update(&outs, &new);
        let always = self.push(EValue::Bool(false));
        self.jump(always, head);
        self.patch_jump(exit, self.instructions.len());
        Ok(outs)
    }
}

/// For each node index, the `View` results of `g` to free right after it: a view is freed after
/// the last node that reads it, unless it is an output of `g` or a cond operand (a branch may
/// hand it back through a MoveCall, which shares the tensor).
fn view_frees(g: &Graph, modules: &[LoweredModule]) -> HashMap<usize, Vec<Ref>> {
    // `last[r]`: the last node reading view `r`, `None` when it must never be freed here.
    let mut last: HashMap<Ref, Option<usize>> = HashMap::new();
    let mut next = g.constants.len() + g.inputs.len();
    for (i, n) in g.nodes.iter().enumerate() {
        let reads: Vec<Ref> = match n {
            Node::Op { args, .. } | Node::Call { args, .. } => args.clone(),
            Node::Cond { pred, operands, .. } => {
                for o in operands {
                    if let Some(l) = last.get_mut(o) {
                        *l = None;
                    }
                }
                vec![*pred]
            }
            Node::Map { xs, args, .. } => std::iter::once(*xs).chain(args.iter().copied()).collect(),
            Node::Scan { init, xs, .. } => init.iter().chain(xs).copied().collect(),
            Node::While { carried, .. } => carried.clone(),
        };
        for r in reads {
            if let Some(Some(l)) = last.get_mut(&r) {
                *l = (*l).max(i);
            }
        }
        if let Node::Op { op: Op::View { .. }, .. } = n {
            last.insert(next, Some(i));
        }
        next += n.output_count(modules);
    }
    for o in &g.outputs {
        if let Some(l) = last.get_mut(o) {
            *l = None;
        }
    }
    let mut out: HashMap<usize, Vec<Ref>> = HashMap::new();
    for (r, l) in last {
        if let Some(i) = l {
            out.entry(i).or_default().push(r);
        }
    }
    for v in out.values_mut() {
        v.sort_unstable();
    }
    out
}

/// Emits `p`. Methods come out in sorted name order (E2).
pub fn emit(p: &IrProgram, opts: &EmitOptions) -> Result<Emitted, EmitError> {
    let method_types = crate::ir::infer::typecheck_program(p)?;
    emit_typed(p, &method_types, opts)
}

/// [`emit`] of a program that `typecheck_program` accepted, given the method types it returned
/// (a caller emitting one program several ways types it once).
pub(crate) fn emit_typed(
    p: &IrProgram,
    method_types: &[Vec<ValueType>],
    opts: &EmitOptions,
) -> Result<Emitted, EmitError> {
    let mut prog = ProgramState::default();
    let mut order: Vec<usize> = (0..p.methods.len()).collect();
    order.sort_by(|a, b| p.methods[*a].name.cmp(&p.methods[*b].name));
    let mut plans = Vec::with_capacity(order.len());
    for mi in order {
        let m = &p.methods[mi];
        let mut st = MethodState {
            modules: &p.modules,
            opts: *opts,
            values: Vec::new(),
            operators: Vec::new(),
            delegates: Vec::new(),
            shared_delegate: HashMap::new(),
            body: 0,
            bodies: 0,
            instructions: Vec::new(),
            arena: 0,
            planned_any: false,
            loop_depth: 0,
        };
        let path = format!("methods[{mi}].graph");
        let types = method_types.get(mi).ok_or_else(|| IrError { path: path.clone(), detail: "not typed".into() })?;
        let refs = st.typed_graph(&mut prog, &m.graph, None, &path, types)?;
        let c = m.graph.constants.len();
        let inputs: Vec<i32> = refs[c..c + m.graph.inputs.len()].iter().map(|v| *v as i32).collect();
        let outputs: Vec<i32> = m.graph.outputs.iter().map(|o| refs[*o] as i32).collect();
        // Resolve each delegate's blob through the program-wide cache (E17): the module index
        // stored during emission becomes the blob index.
        for d in st.delegates.iter_mut() {
            if let Some(r) = d.processed.as_mut() {
                let module = r.index as usize;
                r.index = match opts.dedup {
                    BlobDedup::Bytes => prog.blob(&p.modules[module].processed),
                    BlobDedup::Module => prog.blob_of_module(module, &p.modules[module].processed),
                };
            }
        }
        let arena = i64::try_from(st.arena).map_err(|_| IrError {
            path: path.clone(),
            detail: format!("planned memory of {} bytes does not fit int64", st.arena),
        })?;
        plans.push(ExecutionPlan {
            name: Some(m.name.clone()),
            container_meta_type: Some(ContainerMetadata {
                encoded_inp_str: Some(String::new()),
                encoded_out_str: Some(String::new()),
            }),
            values: Some(st.values),
            inputs: Some(inputs),
            outputs: Some(outputs),
            chains: Some(vec![Chain {
                inputs: Some(vec![]),
                outputs: Some(vec![]),
                instructions: Some(st.instructions),
                stacktrace: None,
            }]),
            operators: Some(st.operators),
            delegates: Some(st.delegates),
            non_const_buffer_sizes: Some(if st.planned_any { vec![0, arena] } else { vec![0] }),
            non_const_buffer_device: None,
        });
    }
    Ok(serialize(plans, prog, &p.named_data, opts))
}

/// Segment layout and blob extraction (S1-S3).
fn serialize(
    mut plans: Vec<ExecutionPlan>,
    prog: ProgramState,
    named: &[crate::ir::NamedBlob],
    opts: &EmitOptions,
) -> Emitted {
    let mut segment_data: Vec<Vec<u8>> = Vec::new();
    // S1: constants -> segment 0, each but the last padded to 16.
    let mut constant_bytes = Vec::new();
    let mut offsets = vec![0u64];
    let constants = &prog.constants.items;
    for (k, c) in constants.iter().enumerate() {
        offsets.push(constant_bytes.len() as u64);
        constant_bytes.extend_from_slice(c);
        if k + 1 < constants.len() {
            constant_bytes.resize(constant_bytes.len().div_ceil(CONSTANT_ALIGN) * CONSTANT_ALIGN, 0);
        }
    }
    segment_data.push(constant_bytes);
    let mut inline: Vec<BackendDelegateInlineData> = Vec::new();
    if opts.delegate_segments {
        // S3: one segment per distinct non-empty blob in order of first use; empty blobs stay
        // inline, one entry per referencing delegate.
        let mut segment_of: HashMap<u32, u32> = HashMap::new();
        for plan in plans.iter_mut() {
            for d in plan.delegates.iter_mut().flatten() {
                let Some(r) = d.processed.as_mut() else { continue };
                let blob = &prog.blobs.items[r.index as usize];
                if blob.is_empty() {
                    inline.push(BackendDelegateInlineData { data: Some(Bytes(Vec::new())) });
                    *r = BackendDelegateDataReference {
                        location: DataLocation::INLINE,
                        index: (inline.len() - 1) as u32,
                    };
                    continue;
                }
                let seg = *segment_of.entry(r.index).or_insert_with(|| {
                    segment_data.push(blob.clone());
                    (segment_data.len() - 1) as u32
                });
                *r = BackendDelegateDataReference { location: DataLocation::SEGMENT, index: seg };
            }
        }
    } else {
        inline = prog.blobs.items.iter().map(|b| BackendDelegateInlineData { data: Some(Bytes(b.clone())) }).collect();
    }
    // S4: named data after the delegate segments, one segment per distinct buffer (content
    // dedup) in key insertion order; many keys may share a segment.
    let mut named_data = Vec::with_capacity(named.len());
    let mut buffers = Distinct::default();
    let first = segment_data.len() as u32;
    for n in named {
        let seg = first + buffers.number(n.data.as_slice());
        named_data.push(NamedData { key: Some(n.key.clone()), segment_index: seg });
    }
    segment_data.extend(buffers.items);
    let sizes: Vec<(u64, u64)> = segment_data.iter().map(|d| (d.len() as u64, 1)).collect();
    let program = Program {
        version: 0,
        execution_plan: Some(plans),
        constant_buffer: Some(vec![]),
        backend_delegate_data: Some(inline),
        segments: Some(format::layout_segments(&sizes, 128)),
        constant_segment: Some(SubsegmentOffsets { segment_index: 0, offsets: Some(offsets) }),
        mutable_data_segments: None,
        named_data: (!named_data.is_empty()).then_some(named_data),
    };
    Emitted { program, segment_data }
}
