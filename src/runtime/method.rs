//! `Method`: init in ExecuTorch's order (checks first, so a rejected program makes zero backend
//! calls), execution of the five instruction kinds under an instruction budget, and teardown
//! that destroys every initialised delegate exactly once, in ascending index order.
//! May not touch: IR, emission, the backends' ledgers (they count on their side of the trait).

use super::backend::*;
use super::check::{call_site_counts, check_method_with};
use super::error::{ErrorCode, RuntimeError, Site};
use super::frame::{Frame, WorkLeft};
use super::kernels::{self, KernelFn};
use super::value::*;
use crate::fault::Fault;
use crate::format::{LoadedProgram, LoadedPtd};
use crate::program::{EValue, ExecutionPlan, Instruction, TensorDataLocation};
use std::sync::Arc;

/// ExecuTorch's per-`execute()` instruction limit (X3).
pub const DEFAULT_INSTRUCTION_BUDGET: u64 = 10_000_000;

/// Default [`Runtime::work_budget`]: elements one `execute()` may have its kernels work
/// through (2^31, seconds of work at most).
pub const DEFAULT_WORK_BUDGET: u64 = 1 << 31;

/// Registry, options and limits used to load methods.
#[derive(Clone)]
pub struct Runtime {
    /// Backends.
    pub registry: BackendRegistry,
    /// Runtime options per backend id.
    pub options: RuntimeOptions,
    /// Instructions one `execute()` may run.
    pub instruction_budget: u64,
    /// Elements one `execute()` may have its kernels read, broadcast or multiply, a delegate's
    /// nested plans included ([`crate::runtime::frame::Frame::spend`]): an instruction is cheap
    /// to count but a kernel's work grows with its tensors, so instructions alone do not bound
    /// the time a crafted program takes.
    pub work_budget: u64,
    /// A seeded bug to exhibit (mutation testing only; `None` in normal use).
    pub fault: Option<Fault>,
    /// Most bytes of planned arenas plus any one tensor outside them.
    pub memory_limit: usize,
}

/// Default [`Runtime::memory_limit`]: 1 GiB.
pub const DEFAULT_MEMORY_LIMIT: usize = 1 << 30;

impl Default for Runtime {
    fn default() -> Self {
        Runtime {
            registry: BackendRegistry::default(),
            options: RuntimeOptions::default(),
            instruction_budget: DEFAULT_INSTRUCTION_BUDGET,
            work_budget: DEFAULT_WORK_BUDGET,
            fault: None,
            memory_limit: DEFAULT_MEMORY_LIMIT,
        }
    }
}

struct LiveDelegate {
    backend: Arc<dyn Backend>,
    handle: Option<BackendHandle>,
    handle_id: u64,
    /// DelegateCall instructions naming this delegate (P5).
    sites: usize,
    /// Handles made by the `InitPerCallSite` fault (mutation testing only).
    extra: Vec<(BackendHandle, u64)>,
}

/// A loaded, initialised method.
pub struct Method<'a> {
    name: String,
    plan: &'a ExecutionPlan,
    frame: Frame<'a>,
    kernels: Vec<Option<KernelFn>>,
    delegates: Vec<LiveDelegate>,
    trace: Trace,
    budget: u64,
    work_budget: u64,
    inputs_set: Vec<bool>,
    fault: Option<Fault>,
}

/// What watches a method run instruction by instruction ([`Method::execute_watched`]); it sees
/// the frame and changes nothing.
pub trait Watcher {
    /// Instruction `ins` at `site` is about to run.
    fn before(&mut self, ins: &Instruction, site: Site, frame: &Frame<'_>);
    /// It ran.
    fn after(&mut self, ins: &Instruction, site: Site, frame: &Frame<'_>);
}

/// Where a method's non-planned tensor data comes from: the program's constant buffers and
/// initialised mutable buffers, and the external data file.
pub struct DataSources<'a, 'x> {
    /// Constant buffer `k` (index 0 reserved).
    pub constants: Vec<&'a [u8]>,
    /// Mutable-data entry `m`, sub-buffer `k`.
    pub mutable_data: &'x [Vec<&'a [u8]>],
    /// External data (`.ptd`) for EXTERNAL tensors.
    pub external: Option<&'x LoadedPtd<'x>>,
}

impl<'a> DataSources<'a, '_> {
    /// The sources of a loaded program.
    pub fn of<'x>(loaded: &'x LoadedProgram<'a>, external: Option<&'x LoadedPtd<'x>>) -> DataSources<'a, 'x> {
        DataSources { constants: loaded.constants.clone(), mutable_data: &loaded.mutable_data, external }
    }
}

impl Runtime {
    /// A runtime with the given backends registered.
    pub fn with_backends(backends: impl IntoIterator<Item = Arc<dyn Backend>>) -> Self {
        let mut r = Runtime::default();
        for b in backends {
            // Test registries are small and unique; a duplicate is a programming error we report
            // by keeping the first.
            let _ = r.registry.register(b);
        }
        r
    }

    /// Loads and initialises method `name` of `loaded` (optionally with external data).
    pub fn load_method<'a>(
        &self,
        loaded: &'a LoadedProgram<'a>,
        name: &str,
        external: Option<&LoadedPtd<'_>>,
        trace: &Trace,
    ) -> Result<Method<'a>, RuntimeError> {
        let plans = loaded.program.plans();
        let pi = plans
            .iter()
            .position(|p| p.name.as_deref() == Some(name))
            .ok_or_else(|| RuntimeError::MethodNotFound(name.into()))?;
        let plan = &plans[pi];
        if let Some(first) = check_method_with(loaded, pi, self.fault).into_iter().next() {
            return Err(RuntimeError::Check(first));
        }
        let mut method = Method::bare(plan, name, DataSources::of(loaded, external), self, trace)?;
        let named = loaded.named_data_map();
        let sites = call_site_counts(plan);
        for (d, del) in plan.delegate_list().iter().enumerate() {
            let id = del.id.clone().unwrap_or_default();
            let backend = match self.registry.get(&id) {
                Some(b) if b.is_available() => b,
                _ => return Err(RuntimeError::BackendNotAvailable { method: name.into(), delegate: d, backend: id }),
            };
            // The loader resolved every present reference; checks rejected absent ones.
            let blob = loaded.delegate_blobs.get(pi).and_then(|b| b.get(d)).copied().flatten().unwrap_or(&[]);
            let options = self.options.for_backend(&id);
            let ctx = InitContext { method: name, delegate_index: d, options: &options, named_data: &named };
            match backend.init(&ctx, blob, del.compile_spec_list()) {
                Ok(handle) => {
                    let handle_id = trace.next_handle();
                    trace.record(TraceEvent::Init {
                        method: name.into(),
                        delegate: d,
                        backend: id.clone(),
                        handle: handle_id,
                        bytes: handle.bytes,
                    });
                    let mut extra = Vec::new();
                    if self.fault == Some(Fault::InitPerCallSite) {
                        // Seeded bug: one handle per call site even for a shared delegate.
                        for _ in 1..sites[d] {
                            if let Ok(h) = backend.init(&ctx, blob, del.compile_spec_list()) {
                                let hid = trace.next_handle();
                                trace.record(TraceEvent::Init {
                                    method: name.into(),
                                    delegate: d,
                                    backend: id.clone(),
                                    handle: hid,
                                    bytes: h.bytes,
                                });
                                extra.push((h, hid));
                            }
                        }
                    }
                    method.delegates.push(LiveDelegate {
                        backend,
                        handle: Some(handle),
                        handle_id,
                        sites: sites[d],
                        extra,
                    });
                }
                Err(e) => {
                    trace.record(TraceEvent::InitFailed {
                        method: name.into(),
                        delegate: d,
                        backend: id.clone(),
                        code: e.code,
                    });
                    if self.fault == Some(Fault::LeakOnInitFailure) {
                        // Seeded bug: the early return forgets the handles made so far (the
                        // trace still says they were torn down).
                        for (k, live) in method.delegates.drain(..).enumerate() {
                            trace.record(TraceEvent::Destroy {
                                method: name.into(),
                                delegate: k,
                                handle: live.handle_id,
                            });
                            drop(live.handle);
                        }
                    }
                    // Dropping `method` destroys delegates 0..d in ascending order (T3).
                    // Seeded bug: the backend's error code is replaced by a generic one.
                    let code = if self.fault == Some(Fault::InitErrorCodeLost) { ErrorCode::Internal } else { e.code };
                    return Err(RuntimeError::InitFailed {
                        method: name.into(),
                        delegate: d,
                        backend: id,
                        code,
                        detail: e.detail,
                        lacks: e.lacks,
                    });
                }
            }
        }
        Ok(method)
    }
}

fn build_frame<'a>(
    sources: DataSources<'a, '_>,
    plan: &ExecutionPlan,
    method: &str,
    memory_limit: usize,
    fault: Option<Fault>,
) -> Result<Frame<'a>, RuntimeError> {
    let DataSources { constants, mutable_data, external } = sources;
    let total =
        plan.non_const_buffer_sizes.iter().flatten().skip(1).try_fold(0u64, |a, s| a.checked_add((*s).max(0) as u64));
    if total.is_none_or(|t| t > memory_limit as u64) {
        return Err(RuntimeError::Value {
            method: method.into(),
            value: 0,
            detail: format!(
                "planned arenas {:?} exceed the {memory_limit}-byte memory limit",
                plan.non_const_buffer_sizes
            ),
            code: ErrorCode::MemoryAllocationFailed,
        });
    }
    let arenas: Vec<Vec<u8>> =
        plan.non_const_buffer_sizes.iter().flatten().skip(1).map(|s| vec![0u8; (*s).max(0) as usize]).collect();
    let values = plan.value_list();
    let n_tensors = values.iter().filter(|v| matches!(v, EValue::Tensor(_))).count();
    let mut frame = Frame {
        values: Vec::with_capacity(values.len()),
        tensors: Vec::with_capacity(n_tensors),
        arenas,
        constants,
        memory_limit,
        fault,
        working: std::cell::Cell::new(0),
        work_left: WorkLeft::default(),
    };
    let err = |value: usize, detail: String, code: ErrorCode| RuntimeError::Value {
        method: method.into(),
        value,
        detail,
        code,
    };
    for (i, v) in plan.value_list().iter().enumerate() {
        let value = match v {
            EValue::Null => Value::None,
            EValue::Int(x) => Value::Int(*x),
            EValue::Bool(x) => Value::Bool(*x),
            EValue::Double(x) => Value::Double(*x),
            EValue::String(s) => Value::String(s.clone().unwrap_or_default()),
            EValue::IntList(items) => Value::IntList(items.iter().flatten().map(|x| *x as usize).collect()),
            EValue::DoubleList(items) => Value::DoubleList(items.clone().unwrap_or_default()),
            EValue::BoolList(items) => Value::BoolList(items.clone().unwrap_or_default()),
            EValue::TensorList(items) => Value::TensorList(items.iter().flatten().map(|x| *x as usize).collect()),
            EValue::OptionalTensorList(items) => {
                Value::OptionalTensorList(items.iter().flatten().map(|x| usize::try_from(*x).ok()).collect())
            }
            EValue::Tensor(t) => {
                let sizes: Vec<usize> = t.sizes.iter().flatten().map(|s| *s as usize).collect();
                let dims = t.dim_order.as_deref().unwrap_or(&[]);
                if dims.iter().enumerate().any(|(k, d)| *d as usize != k) {
                    return Err(err(
                        i,
                        format!("dim_order {dims:?} is not contiguous; the reference kernels need it"),
                        ErrorCode::NotSupported,
                    ));
                }
                let nbytes = sizes.iter().product::<usize>() * t.scalar_type.element_size().unwrap_or(1);
                let external_fqn = t
                    .extra_tensor_info
                    .as_ref()
                    .filter(|x| x.location == TensorDataLocation::EXTERNAL)
                    .map(|x| x.fully_qualified_name.clone().unwrap_or_default());
                // An EXTERNAL tensor's bytes are the `.ptd` entry of its name, whose layout must
                // be the tensor's (ExecuTorch's getTensorDataPtr and validateTensorLayout).
                let external_bytes = |fqn: &str, no_map: ErrorCode| -> Result<&[u8], RuntimeError> {
                    let map =
                        external.ok_or_else(|| err(i, format!("external tensor `{fqn}` needs a .ptd"), no_map))?;
                    let e = map
                        .get(fqn)
                        .ok_or_else(|| err(i, format!("`{fqn}` is not in the .ptd"), ErrorCode::NotFound))?;
                    let mismatch = |what: String| err(i, format!("`{fqn}`: {what}"), ErrorCode::InvalidExternalData);
                    let Some(layout) = &e.layout else {
                        return Err(mismatch("the .ptd entry has no tensor layout".into()));
                    };
                    if layout.scalar_type != t.scalar_type {
                        return Err(mismatch(format!(
                            "the .ptd holds {}, the program {}",
                            layout.scalar_type, t.scalar_type
                        )));
                    }
                    let program_sizes = t.sizes.as_deref().unwrap_or(&[]);
                    if layout.sizes.as_slice() != program_sizes {
                        return Err(mismatch(format!(
                            "the .ptd has sizes {:?}, the program {program_sizes:?}",
                            layout.sizes
                        )));
                    }
                    if layout.dim_order.as_slice() != dims {
                        return Err(mismatch(format!(
                            "the .ptd has dim order {:?}, the program {dims:?}",
                            layout.dim_order
                        )));
                    }
                    e.data.get(..nbytes).ok_or_else(|| {
                        mismatch(format!("the .ptd entry has {} bytes, the tensor needs {nbytes}", e.data.len()))
                    })
                };
                let storage = if let Some(a) = &t.allocation_info {
                    let (arena, offset) = ((a.memory_id - 1) as usize, a.offset() as usize);
                    // Planned memory filled at load: from the `.ptd` for an EXTERNAL tensor
                    // (no `.ptd` is InvalidExternalData here), else from its mutable data.
                    let init = match &external_fqn {
                        Some(fqn) => Some(external_bytes(fqn, ErrorCode::InvalidExternalData)?),
                        None if t.data_buffer_idx > 0 => {
                            mutable_data.first().and_then(|m| m.get(t.data_buffer_idx as usize)).map(|s| &s[..nbytes])
                        }
                        None => None,
                    };
                    if let (Some(src), Some(dst)) =
                        (init, frame.arenas.get_mut(arena).and_then(|b| b.get_mut(offset..offset + nbytes)))
                    {
                        dst.copy_from_slice(src);
                    }
                    Storage::Arena { arena, offset, capacity: nbytes }
                } else if let Some(fqn) = &external_fqn {
                    Storage::Owned(external_bytes(fqn, ErrorCode::InvalidState)?.to_vec())
                } else if t.data_buffer_idx > 0 {
                    Storage::Constant(t.data_buffer_idx as usize)
                } else {
                    Storage::Null
                };
                let numel_bound = checked_numel(&sizes).unwrap_or(usize::MAX);
                frame.tensors.push(TensorImpl {
                    dtype: t.scalar_type,
                    sizes,
                    dynamism: t.shape_dynamism,
                    numel_bound,
                    storage,
                });
                Value::Tensor(frame.tensors.len() - 1)
            }
        };
        frame.values.push(value);
    }
    Ok(frame)
}

impl<'a> Method<'a> {
    /// A method over `plan` with its frame built and no delegate initialised: what
    /// [`Runtime::load_method`] starts from once the checks passed, and what a backend runs a
    /// nested plan of CPU kernels with ([`super::nested`]).
    pub(crate) fn bare(
        plan: &'a ExecutionPlan,
        name: &str,
        sources: DataSources<'a, '_>,
        rt: &Runtime,
        trace: &Trace,
    ) -> Result<Method<'a>, RuntimeError> {
        let frame = build_frame(sources, plan, name, rt.memory_limit, rt.fault)?;
        let kernels = plan
            .operator_list()
            .iter()
            .map(|o| {
                kernels::lookup_operator(o.name.as_deref().unwrap_or(""), o.overload.as_deref().unwrap_or(""))
                    .map(|k| k.run)
            })
            .collect();
        let mut method = Method {
            name: name.to_string(),
            plan,
            frame,
            kernels,
            delegates: Vec::new(),
            trace: trace.clone(),
            budget: rt.instruction_budget,
            work_budget: rt.work_budget,
            inputs_set: vec![false; plan.inputs.as_ref().map_or(0, Vec::len)],
            fault: rt.fault,
        };
        // Scalar inputs carry their emitted value; only tensors must be set by the caller.
        for (i, &v) in plan.inputs.iter().flatten().enumerate() {
            method.inputs_set[i] = !matches!(plan.value_list().get(v as usize), Some(EValue::Tensor(_)));
        }
        Ok(method)
    }

    /// Method name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of user inputs.
    pub fn num_inputs(&self) -> usize {
        self.inputs_set.len()
    }

    /// The input template: what input `i` must look like (a tensor's dtype and declared sizes);
    /// `None` when out of range or larger than the memory limit.
    pub fn input_template(&self, i: usize) -> Option<HostValue> {
        let v = *self.plan.inputs.as_ref()?.get(i)? as usize;
        match self.frame.values.get(v)? {
            Value::Tensor(t) => {
                let t = &self.frame.tensors[*t];
                let nbytes = t.sizes.iter().try_fold(t.dtype.element_size().unwrap_or(1), |a, s| a.checked_mul(*s))?;
                if nbytes > self.frame.memory_limit {
                    return None;
                }
                HostTensor::zeros(t.dtype, t.sizes.clone()).map(HostValue::Tensor)
            }
            Value::Int(x) => Some(HostValue::Int(*x)),
            Value::Bool(x) => Some(HostValue::Bool(*x)),
            Value::Double(x) => Some(HostValue::Double(*x)),
            _ => Some(HostValue::None),
        }
    }

    /// Sets user input `i` (a tensor is copied into its planned memory, resized if dynamic).
    pub fn set_input(&mut self, i: usize, value: &HostValue) -> Result<(), RuntimeError> {
        let err_with =
            |code: ErrorCode, detail: String| RuntimeError::Input { method: self.name.clone(), index: i, code, detail };
        let err = |detail: String| err_with(ErrorCode::InvalidArgument, detail);
        let v = *self
            .plan
            .inputs
            .as_ref()
            .and_then(|x| x.get(i))
            .ok_or_else(|| err(format!("the method has {} inputs", self.inputs_set.len())))? as usize;
        match (self.frame.values.get(v).cloned(), value) {
            (Some(Value::Tensor(_)), HostValue::Tensor(t)) => {
                let want = self.frame.dtype(v).map_err(|e| err(e.detail))?;
                if want != t.dtype {
                    return Err(err(format!("dtype {} given, {want} expected", t.dtype)));
                }
                let n = checked_numel(&t.sizes).and_then(|n| n.checked_mul(t.dtype.element_size().unwrap_or(1)));
                if n != Some(t.data.len()) {
                    return Err(err(format!("{} bytes for shape {:?}", t.data.len(), t.sizes)));
                }
                // A shape the tensor cannot take has the resize's code (NotSupported, as
                // ExecuTorch's set_input returns it).
                self.frame.resize(v, &t.sizes).map_err(|e| err_with(e.code, e.detail))?;
                self.frame.write_bytes(v, &t.data).map_err(|e| err(e.detail))?;
            }
            (Some(Value::Int(_)), HostValue::Int(x)) => self.frame.values[v] = Value::Int(*x),
            (Some(Value::Bool(_)), HostValue::Bool(x)) => self.frame.values[v] = Value::Bool(*x),
            (Some(Value::Double(_)), HostValue::Double(x)) => self.frame.values[v] = Value::Double(*x),
            (Some(slot), given) => return Err(err(format!("a {} slot cannot take {given:?}", slot.kind()))),
            (None, _) => return Err(err(format!("input names value {v}, which does not exist"))),
        }
        self.inputs_set[i] = true;
        Ok(())
    }

    /// Elements of kernel work the last `execute()` spent ([`Runtime::work_budget`]).
    pub fn work_spent(&self) -> u64 {
        self.work_budget.saturating_sub(self.frame.work_left.get())
    }

    /// Runs every chain once.
    pub fn execute(&mut self) -> Result<(), RuntimeError> {
        self.execute_watched(None)
    }

    /// Runs every chain once, showing `watcher` each instruction before and after it runs.
    pub fn execute_watched(&mut self, mut watcher: Option<&mut dyn Watcher>) -> Result<(), RuntimeError> {
        if let Some(i) = self.inputs_set.iter().position(|s| !s) {
            return Err(RuntimeError::Input {
                method: self.name.clone(),
                index: i,
                code: ErrorCode::InvalidArgument,
                detail: "never set".into(),
            });
        }
        let mut executed: u64 = 0;
        self.frame.work_left.set(self.work_budget);
        for (c, chain) in self.plan.chain_list().iter().enumerate() {
            let instrs = chain.instruction_list();
            let mut pc = 0usize;
            while pc < instrs.len() {
                executed += 1;
                if executed > self.budget {
                    return Err(RuntimeError::BudgetExceeded { method: self.name.clone(), budget: self.budget });
                }
                let site = Site { chain: c, instruction: pc };
                if let Some(w) = watcher.as_deref_mut() {
                    w.before(&instrs[pc], site, &self.frame);
                }
                let next = self.step(&instrs[pc], site, pc)?;
                if let Some(w) = watcher.as_deref_mut() {
                    w.after(&instrs[pc], site, &self.frame);
                }
                pc = next;
            }
        }
        Ok(())
    }

    fn exec_err(&self, site: Site, code: ErrorCode, detail: String) -> RuntimeError {
        RuntimeError::Execute { method: self.name.clone(), site, code, detail }
    }

    fn step(&mut self, ins: &Instruction, site: Site, pc: usize) -> Result<usize, RuntimeError> {
        // Working copies are bounded per instruction (a kernel's, a delegate's reads, a jump's
        // condition); every instruction also spends one element of work, so a nested plan's
        // instructions count against its caller's budget even where they copy nothing.
        self.frame.working.set(0);
        self.frame.spend(1, &"an instruction").map_err(|e| self.exec_err(site, e.code, e.detail))?;
        match ins {
            Instruction::KernelCall(k) => {
                let args: Vec<usize> = k.args.iter().flatten().map(|a| *a as usize).collect();
                let op = k.op_index as usize;
                let kernel = self.kernels.get(op).copied().flatten().ok_or_else(|| {
                    self.exec_err(site, ErrorCode::OperatorMissing, format!("operator {op} has no kernel"))
                })?;
                kernel(&mut self.frame, &args).map_err(|e| RuntimeError::Kernel {
                    method: self.name.clone(),
                    site,
                    op: self.plan.operator_list().get(op).map(|o| o.qualified()).unwrap_or_default(),
                    code: e.code,
                    detail: e.detail,
                    lacks: e.lacks,
                })?;
            }
            Instruction::DelegateCall(d) => {
                let idx = d.delegate_index as usize;
                let args: Vec<usize> = d.args.iter().flatten().map(|a| *a as usize).collect();
                let Some(live) = self.delegates.get_mut(idx) else {
                    return Err(self.exec_err(
                        site,
                        ErrorCode::Internal,
                        format!("delegate {idx} is not initialised (X6)"),
                    ));
                };
                let Some(handle) = live.handle.as_mut() else {
                    return Err(RuntimeError::Delegate {
                        method: self.name.clone(),
                        site,
                        delegate: idx,
                        code: ErrorCode::DelegateInvalidHandle,
                        detail: "handle already destroyed".into(),
                        lacks: None,
                    });
                };
                self.trace.executed(ExecuteSite {
                    method: self.name.clone(),
                    delegate: idx,
                    site,
                    handle: live.handle_id,
                });
                let mut da = DelegateArgs { frame: &mut self.frame, args: &args, site };
                live.backend.execute(handle, &mut da).map_err(|e| RuntimeError::Delegate {
                    method: self.name.clone(),
                    site,
                    delegate: idx,
                    code: e.code,
                    detail: e.detail,
                    lacks: e.lacks,
                })?;
            }
            Instruction::MoveCall(m) => {
                let from = self.frame.values[m.move_from as usize].clone();
                self.frame.values[m.move_to as usize] = from;
            }
            Instruction::FreeCall(f) => {
                let tid = self
                    .frame
                    .tensor_id(f.value_index as usize)
                    .map_err(|e| self.exec_err(site, ErrorCode::InvalidType, e.detail))?;
                self.frame.tensors[tid].storage = Storage::Null;
            }
            Instruction::JumpFalseCall(j) => {
                let v = j.cond_value_index as usize;
                let truth = match &self.frame.values[v] {
                    Value::Bool(b) => *b,
                    Value::Tensor(_) => {
                        if self.frame.dtype(v).ok() != Some(crate::program::ScalarType::BOOL) {
                            return Err(self.exec_err(
                                site,
                                ErrorCode::InvalidProgram,
                                format!("jump condition values[{v}] is not a bool tensor"),
                            ));
                        }
                        let data = self
                            .frame
                            .read_i64(v)
                            .map_err(|e| self.exec_err(site, ErrorCode::InvalidState, e.detail))?;
                        data.iter().all(|x| *x != 0)
                    }
                    other => {
                        return Err(self.exec_err(
                            site,
                            ErrorCode::InvalidProgram,
                            format!("jump condition values[{v}] is {}", other.kind()),
                        ));
                    }
                };
                if !truth {
                    return Ok(j.destination_instruction as usize);
                }
            }
        }
        Ok(pc + 1)
    }

    /// The user outputs, copied out. An output of a kind with no host form (a list or a
    /// string) is refused with NotSupported, never given as None.
    pub fn outputs(&self) -> Result<Vec<HostValue>, RuntimeError> {
        let refused = |v: i32, detail: String, code: ErrorCode| RuntimeError::Value {
            method: self.name.clone(),
            value: v as usize,
            detail,
            code,
        };
        self.plan
            .outputs
            .iter()
            .flatten()
            .map(|&v| {
                let kind = self.frame.value(v as usize).map_err(|e| refused(v, e.detail, e.code))?;
                if !matches!(kind, Value::None | Value::Int(_) | Value::Bool(_) | Value::Double(_) | Value::Tensor(_)) {
                    let detail = format!("an output of kind {}, which has no host form", kind.kind());
                    return Err(refused(v, detail, ErrorCode::NotSupported));
                }
                self.frame.host_value(v as usize).map_err(|e| refused(v, e.detail, e.code))
            })
            .collect()
    }

    /// The trace this method records into.
    pub fn trace(&self) -> &Trace {
        &self.trace
    }
}

impl Drop for Method<'_> {
    fn drop(&mut self) {
        let mut order: Vec<usize> = (0..self.delegates.len()).collect();
        if self.fault == Some(Fault::DestroyDescending) {
            // Seeded bug: teardown walks the delegates from the last one.
            order.reverse();
        }
        for d in order {
            let live = &mut self.delegates[d];
            if let Some(mut h) = live.handle.take() {
                self.trace.record(TraceEvent::Destroy {
                    method: self.name.clone(),
                    delegate: d,
                    handle: live.handle_id,
                });
                match self.fault {
                    // Seeded bug: a shared handle is destroyed once per call site.
                    Some(Fault::DestroyPerCallSite) => {
                        (0..live.sites.max(1)).for_each(|_| live.backend.destroy(&mut h))
                    }
                    // Seeded bug: a shared handle is left for "its last user", and nobody is.
                    Some(Fault::LeakSharedHandle) if live.sites > 1 => {}
                    _ => live.backend.destroy(&mut h),
                }
            }
            for (mut h, hid) in live.extra.drain(..) {
                live.backend.destroy(&mut h);
                self.trace.record(TraceEvent::Destroy { method: self.name.clone(), delegate: d, handle: hid });
            }
        }
    }
}
