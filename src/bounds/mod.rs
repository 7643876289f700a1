//! Error bounds derived from a loaded program: a method runs in the reference runtime while a
//! watcher applies `ir::bound`'s rules to every instruction it executes — each CPU kernel by
//! what it computes (`kernel`), each delegate node by node (XNNPACK, ptecheck's graph backends
//! through their nested programs, the compiler demo's chain), moves as copies, and a jump whose
//! condition may differ as "anything from here". Each output element gets how far a conforming
//! implementation (ExecuTorch's kernels, XNNPACK) may be from the reference runtime's value.
//! May not touch: the rules themselves (`ir::bound` holds the only copy), the runtime's results.

pub mod host;
mod kernel;

use crate::backends::{compiler_demo, graph, xnnpack};
use crate::format::LoadedProgram;
use crate::ir::Op;
use crate::ir::bound::{Bound, Context, op_bound};
use crate::ir::kernels::eval_op;
use crate::ir::value::Val;
use crate::program::{ExecutionPlan, Instruction};
use crate::runtime::frame::WorkLeft;
use crate::runtime::value::Value;
use crate::runtime::{DEFAULT_WORK_BUDGET, Frame, HostValue, Method, Runtime, RuntimeError, Session, Site, Watcher};
use host::{decode_numeric as decode, f32_tensor};
use kernel::Rule;

/// Nested programs (a graph backend's blob) are bounded this deep at most; deeper is unbounded.
pub const MAX_NESTING: usize = 4;

/// A method's outputs with their bounds.
#[derive(Clone, Debug)]
pub struct Bounded {
    /// The reference runtime's outputs.
    pub outputs: Vec<HostValue>,
    /// Each output's bound.
    pub bounds: Vec<Bound>,
    /// Why a value is unbounded: an instruction with no rule, a decision that may differ.
    pub notes: Vec<String>,
}

/// Runs method `name` of `session`'s program on `inputs` and bounds its outputs. `framework`:
/// bounds against another framework's eager kernels (torch) rather than ExecuTorch's.
pub fn run(
    session: &Session<'_, '_>,
    name: &str,
    inputs: &[HostValue],
    framework: bool,
) -> Result<Bounded, RuntimeError> {
    let mut method = session.load(name)?;
    run_loaded(&mut method, session.loaded(), inputs, framework)
}

/// [`run`] on a method already loaded from `loaded` (runs in order share its state).
pub fn run_loaded(
    method: &mut Method<'_>,
    loaded: &LoadedProgram<'_>,
    inputs: &[HostValue],
    framework: bool,
) -> Result<Bounded, RuntimeError> {
    let ctx = Context { framework, approximate: false };
    let mut b = run_nested(method, loaded, inputs, &vec![Bound::Exact; inputs.len()], ctx, 0)?;
    // Every output element that may be anything is said, whatever made it so.
    for (i, (out, bound)) in b.outputs.iter().zip(&b.bounds).enumerate() {
        let n = match out {
            HostValue::Tensor(t) => t.sizes.iter().product(),
            _ => 1,
        };
        let free = bound.abs_of(n).iter().filter(|e| e.is_infinite()).count();
        if free > 0 {
            b.notes.push(format!("output {i}: {free} of {n} elements may be anything"));
        }
    }
    Ok(b)
}

fn run_nested(
    method: &mut Method<'_>,
    loaded: &LoadedProgram<'_>,
    inputs: &[HostValue],
    input_bounds: &[Bound],
    ctx: Context,
    depth: usize,
) -> Result<Bounded, RuntimeError> {
    let name = method.name().to_string();
    let Some((plan_index, plan)) = loaded.program.plans().iter().enumerate().find(|(_, p)| p.name_str() == name) else {
        return Err(RuntimeError::MethodNotFound(name));
    };
    let mut w = BoundWatcher {
        loaded,
        plan,
        plan_index,
        ctx,
        depth,
        bounds: vec![Bound::Exact; plan.value_list().len()],
        pending: None,
        undecided: None,
        notes: Vec::new(),
    };
    for (i, &v) in plan.inputs.iter().flatten().enumerate() {
        if let Some(slot) = usize::try_from(v).ok().and_then(|v| w.bounds.get_mut(v)) {
            *slot = input_bounds.get(i).cloned().unwrap_or_default();
        }
    }
    let outputs = Session::execute_watched(method, Some(inputs), Some(&mut w))?;
    let mut bounds: Vec<Bound> =
        plan.outputs.iter().flatten().map(|v| w.value_bound(usize::try_from(*v).unwrap_or(usize::MAX))).collect();
    if let Some(at) = w.undecided {
        // Another execution may take the other way from `at`: every value an instruction
        // reachable from there may write can be anything; values only written before keep
        // their bounds.
        let free = written_after(plan, at);
        let outs: Vec<usize> =
            plan.outputs.iter().flatten().map(|v| usize::try_from(*v).unwrap_or(usize::MAX)).collect();
        let mut freed = 0;
        for (b, v) in bounds.iter_mut().zip(&outs) {
            if free.contains(v) {
                *b = Bound::Any;
                freed += 1;
            }
        }
        w.notes.push(format!(
            "{name}: the jump at {at} reads a value that may differ; {freed} of {} outputs are written past it",
            outs.len()
        ));
    }
    Ok(Bounded { outputs, bounds, notes: w.notes })
}

/// The values an instruction reachable from `at` (either way of its jump, and on through any
/// later jump) may write: every argument of a kernel or delegate call (a kernel may have more
/// than one out), a move's destination.
fn written_after(plan: &ExecutionPlan, at: Site) -> std::collections::BTreeSet<usize> {
    let mut written = std::collections::BTreeSet::new();
    let Some(chain) = plan.chain_list().get(at.chain) else { return written };
    let instrs = chain.instructions.as_deref().unwrap_or(&[]);
    let mut seen = vec![false; instrs.len()];
    let mut todo = vec![at.instruction];
    let idx = |v: i32| usize::try_from(v).unwrap_or(usize::MAX);
    while let Some(i) = todo.pop() {
        let Some(ins) = instrs.get(i).filter(|_| !seen[i]) else { continue };
        seen[i] = true;
        todo.push(i + 1);
        match ins {
            Instruction::KernelCall(k) => written.extend(k.args.iter().flatten().map(|v| idx(*v))),
            Instruction::DelegateCall(d) => written.extend(d.args.iter().flatten().map(|v| idx(*v))),
            Instruction::MoveCall(m) => {
                written.insert(idx(m.move_to));
            }
            Instruction::JumpFalseCall(j) => todo.push(idx(j.destination_instruction)),
            _ => {}
        }
    }
    written
}

/// What an instruction read before it ran.
enum Pending {
    Kernel {
        rule: Rule,
        operands: Vec<Option<Val>>,
        out_before: usize,
        ret: Option<usize>,
        kernel: String,
    },
    Delegate {
        index: usize,
        args: Vec<usize>,
        values: Vec<HostValue>,
    },
    /// An instruction with no rule: its name, and the values it may write.
    Unbounded {
        what: String,
        writes: Vec<usize>,
    },
}

struct BoundWatcher<'l, 'a> {
    loaded: &'l LoadedProgram<'a>,
    plan: &'l ExecutionPlan,
    plan_index: usize,
    ctx: Context,
    depth: usize,
    bounds: Vec<Bound>,
    pending: Option<Pending>,
    undecided: Option<Site>,
    notes: Vec<String>,
}

fn arg_list(args: &Option<Vec<i32>>) -> Vec<usize> {
    args.iter().flatten().map(|a| usize::try_from(*a).unwrap_or(usize::MAX)).collect()
}

/// Elements of the tensor in slot `v` (1 for a scalar).
fn numel(frame: &Frame<'_>, v: usize) -> usize {
    match frame.value(v) {
        Ok(Value::Tensor(_)) => frame.sizes(v).map(|s| s.iter().product()).unwrap_or(0),
        _ => 1,
    }
}

fn is_float(frame: &Frame<'_>, v: usize) -> bool {
    frame.dtype(v).is_ok_and(crate::runtime::value::is_float)
}

impl BoundWatcher<'_, '_> {
    fn value_bound(&self, v: usize) -> Bound {
        self.bounds.get(v).cloned().unwrap_or(Bound::Any)
    }

    fn set(&mut self, v: usize, b: Bound) {
        if let Some(slot) = self.bounds.get_mut(v) {
            *slot = b;
        }
    }

    fn note(&mut self, n: String) {
        if !self.notes.contains(&n) {
            self.notes.push(n);
        }
    }

    fn kernel_name(&self, op_index: i32) -> String {
        usize::try_from(op_index)
            .ok()
            .and_then(|i| self.plan.operator_list().get(i))
            .map_or_else(|| format!("<operator {op_index}>"), |o| o.qualified())
    }

    /// Per-element errors of slot `v` (`n` elements), `inf` where an integer may differ.
    fn element_errors(&self, v: usize, n: usize) -> Vec<f64> {
        self.value_bound(v).abs_of(n)
    }

    /// A bound for slot `v` from per-element errors, in its dtype's form.
    fn from_errors(frame: &Frame<'_>, v: usize, e: Vec<f64>) -> Bound {
        if is_float(frame, v) { Bound::from_abs(e) } else { Bound::from_flags(e.iter().map(|x| *x > 0.0).collect()) }
    }

    fn kernel_after(&mut self, rule: Rule, operands: Vec<Option<Val>>, out_before: usize, frame: &Frame<'_>) -> Bound {
        let out_of = |v: usize| frame.host_value(v).ok().and_then(|h| decode(&h));
        match rule {
            Rule::Op { op, operands: idx, out } => {
                let Some(o) = out_of(out) else { return Bound::Any };
                let Some(vals) =
                    operands.into_iter().map(|v| v.map(|v| host::scalar_like(v, &o))).collect::<Option<Vec<Val>>>()
                else {
                    return Bound::Any;
                };
                let errs: Vec<Bound> = idx.iter().map(|v| self.value_bound(*v)).collect();
                op_bound(&op, &vals.iter().collect::<Vec<_>>(), &errs.iter().collect::<Vec<_>>(), &o, self.ctx)
            }
            Rule::Scaled { a, b, alpha, sub, out } => {
                let (Some(o), Some(Some(av)), Some(Some(bv))) = (out_of(out), operands.first(), operands.get(1)) else {
                    return Bound::Any;
                };
                let (av, bv) = (host::scalar_like(av.clone(), &o), host::scalar_like(bv.clone(), &o));
                let k = host::scalar_like(Val::Double(alpha), &o);
                let Ok(scaled) = eval_op(&Op::Mul, &[&bv, &k], "") else { return Bound::Any };
                let (ea, eb) = (self.value_bound(a), self.value_bound(b));
                let es = op_bound(&Op::Mul, &[&bv, &k], &[&eb, &Bound::Exact], &scaled, self.ctx);
                let op = if sub { Op::Sub } else { Op::Add };
                op_bound(&op, &[&av, &scaled], &[&ea, &es], &o, self.ctx)
            }
            Rule::Linear { x, w, bias, out } => {
                let (Some(o), Some(Some(xv)), Some(Some(wv))) = (out_of(out), operands.first(), operands.get(1)) else {
                    return Bound::Any;
                };
                let n = match &o {
                    Val::Tensor(t) => t.shape.last().copied().unwrap_or(0),
                    _ => return Bound::Any,
                };
                let (bv, eb) = match (bias, operands.get(2)) {
                    (Some(b), Some(Some(v))) => (v.clone(), self.value_bound(b)),
                    _ => (f32_tensor(vec![n], vec![0.0; n]), Bound::Exact),
                };
                let (ex, ew) = (self.value_bound(x), self.value_bound(w));
                op_bound(&Op::Linear, &[xv, wv, &bv], &[&ex, &ew, &eb], &o, self.ctx)
            }
            Rule::Copy { src, out } => {
                let (n_src, n_out) = (numel(frame, src), numel(frame, out));
                let e = self.element_errors(src, n_src);
                if n_src == n_out {
                    return Self::from_errors(frame, out, e);
                }
                let (Ok(s), Ok(o)) = (frame.sizes(src), frame.sizes(out)) else { return Bound::Any };
                let map = crate::ir::value::bmap(&o, &s);
                Self::from_errors(frame, out, map.iter().map(|i| e.get(*i).copied().unwrap_or(f64::INFINITY)).collect())
            }
            Rule::Convert { src, out } => {
                let e = self.element_errors(src, numel(frame, src));
                match (is_float(frame, src), is_float(frame, out)) {
                    // float to integer or bool: whatever may change may change the result.
                    (true, false) => Bound::from_flags(e.iter().map(|x| *x > 0.0).collect()),
                    _ => Self::from_errors(frame, out, e),
                }
            }
            Rule::CopyIndex { src, out, index } => {
                let n_row = numel(frame, src);
                let n_out = numel(frame, out);
                let mut e = self.element_errors(out, out_before);
                e.resize(n_out, 0.0);
                let row = self.element_errors(src, n_row);
                if let Some(dst) = index.checked_mul(n_row).and_then(|at| e.get_mut(at..at.checked_add(n_row)?)) {
                    dst.copy_from_slice(&row);
                } else {
                    return Bound::Any;
                }
                Self::from_errors(frame, out, e)
            }
            Rule::Exact { .. } => Bound::Exact,
            Rule::Scalar { operands: idx, .. } => {
                if idx.iter().all(|v| self.value_bound(*v).is_exact()) {
                    Bound::Exact
                } else {
                    Bound::Any
                }
            }
        }
    }

    /// The bounds of a delegate call's results, or why it has none.
    fn delegate_after(
        &mut self,
        index: usize,
        args: &[usize],
        values: &[HostValue],
        frame: &Frame<'_>,
    ) -> Result<Vec<(usize, Bound)>, String> {
        let id = self
            .plan
            .delegate_list()
            .get(index)
            .and_then(|d| d.id.clone())
            .ok_or_else(|| format!("delegate {index} has no id"))?;
        let blob = self
            .loaded
            .delegate_blobs
            .get(self.plan_index)
            .and_then(|b| b.get(index))
            .copied()
            .flatten()
            .ok_or_else(|| format!("delegate {index} ({id}) has no blob"))?;
        let errs: Vec<Bound> = args.iter().map(|v| self.value_bound(*v)).collect();
        if id == xnnpack::ID {
            let named = self.loaded.named_data_map();
            let given: Vec<(Option<xnnpack::interp::T>, Bound)> =
                values.iter().zip(&errs).map(|(v, e)| (host::xnn_tensor(v), e.clone())).collect();
            let limit = frame.memory_limit / 4;
            // Its own work budget, as large as an execution's: the method's is not spent twice.
            let work = WorkLeft::new(DEFAULT_WORK_BUDGET);
            let spend = |n: u64, what: &dyn std::fmt::Display| work.spend(n, what);
            let outs =
                xnnpack::bounded(blob, &named, &given, limit, &spend).map_err(|e| format!("{id}: {}", e.detail))?;
            return Ok(outs.into_iter().filter_map(|(ext, b)| args.get(ext as usize).map(|v| (*v, b))).collect());
        }
        if id == compiler_demo::ID {
            let (out, ins) = args.split_last().ok_or_else(|| format!("{id}: a call without arguments"))?;
            let given = values[..ins.len()]
                .iter()
                .zip(&errs)
                .map(|(v, e)| decode(v).map(|v| (v, e.clone())))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| format!("{id}: an argument the rules cannot read"))?;
            let (_, b) = compiler_demo::bounded(blob, &given, self.ctx).map_err(|e| format!("{id}: {}", e.detail))?;
            return Ok(vec![(*out, b)]);
        }
        if graph::Flavor::from_id(&id).is_some() {
            return self.nested(&id, blob, args, values, &errs);
        }
        Err(format!("no bound rule for backend {id}"))
    }

    /// A graph backend's call: its blob's program bounded on the call's inputs (the first
    /// arguments), its outputs the remaining arguments.
    fn nested(
        &mut self,
        id: &str,
        blob: &[u8],
        args: &[usize],
        values: &[HostValue],
        errs: &[Bound],
    ) -> Result<Vec<(usize, Bound)>, String> {
        if self.depth >= MAX_NESTING {
            return Err(format!("{id}: nested deeper than {MAX_NESTING}"));
        }
        let body = blob.strip_prefix(graph::MAGIC).ok_or_else(|| format!("{id}: blob lacks its magic"))?;
        let loaded = crate::format::load(body).map_err(|e| format!("{id}: nested program: {e}"))?;
        let runtime = Runtime::default();
        let session = Session::new(&loaded, &runtime);
        let plan = loaded.program.plan(graph::BLOB_METHOD).ok_or_else(|| format!("{id}: no nested method"))?;
        let n_in = plan.inputs.as_ref().map_or(0, Vec::len);
        if n_in > args.len() {
            return Err(format!("{id}: {n_in} nested inputs, {} arguments", args.len()));
        }
        let mut method = session.load(graph::BLOB_METHOD).map_err(|e| format!("{id}: {e}"))?;
        let inner = run_nested(&mut method, &loaded, &values[..n_in], &errs[..n_in], self.ctx, self.depth + 1)
            .map_err(|e| format!("{id}: {e}"))?;
        for n in inner.notes {
            self.note(n);
        }
        Ok(args[n_in..].iter().copied().zip(inner.bounds).collect())
    }
}

impl Watcher for BoundWatcher<'_, '_> {
    fn before(&mut self, ins: &Instruction, site: Site, frame: &Frame<'_>) {
        self.pending = match ins {
            Instruction::KernelCall(k) => {
                let args = arg_list(&k.args);
                let name = self.kernel_name(k.op_index);
                match kernel::rule(&name, &args, frame) {
                    Ok(rule) => {
                        let (operands, out) = match &rule {
                            Rule::Op { operands, out, .. } => (operands.clone(), *out),
                            Rule::Scaled { a, b, out, .. } => (vec![*a, *b], *out),
                            Rule::Linear { x, w, bias, out } => (vec![*x, *w].into_iter().chain(*bias).collect(), *out),
                            Rule::Copy { out, .. }
                            | Rule::Convert { out, .. }
                            | Rule::CopyIndex { out, .. }
                            | Rule::Exact { out }
                            | Rule::Scalar { out, .. } => (vec![], *out),
                        };
                        let operands =
                            operands.iter().map(|v| frame.host_value(*v).ok().and_then(|h| decode(&h))).collect();
                        let ret = args
                            .last()
                            .copied()
                            .filter(|r| *r != out && matches!(frame.value(*r), Ok(Value::Tensor(_))));
                        Some(Pending::Kernel { rule, operands, out_before: numel(frame, out), ret, kernel: name })
                    }
                    Err(what) => Some(Pending::Unbounded {
                        what: format!("{site}: {what}"),
                        writes: args.last().copied().into_iter().collect(),
                    }),
                }
            }
            Instruction::DelegateCall(d) => {
                let args = arg_list(&d.args);
                let values = args.iter().map(|v| frame.host_value(*v).unwrap_or(HostValue::None)).collect();
                Some(Pending::Delegate { index: usize::try_from(d.delegate_index).unwrap_or(usize::MAX), args, values })
            }
            Instruction::JumpFalseCall(j) => {
                let cond = usize::try_from(j.cond_value_index).unwrap_or(usize::MAX);
                if self.undecided.is_none() && self.value_bound(cond).may_differ() {
                    self.undecided = Some(site);
                }
                None
            }
            Instruction::MoveCall(m) => {
                let (from, to) = (
                    usize::try_from(m.move_from).unwrap_or(usize::MAX),
                    usize::try_from(m.move_to).unwrap_or(usize::MAX),
                );
                let b = self.value_bound(from);
                self.set(to, b);
                None
            }
            Instruction::FreeCall(_) => None,
        };
    }

    fn after(&mut self, _ins: &Instruction, site: Site, frame: &Frame<'_>) {
        match self.pending.take() {
            Some(Pending::Kernel { rule, operands, out_before, ret, kernel }) => {
                let out = match &rule {
                    Rule::Op { out, .. }
                    | Rule::Scaled { out, .. }
                    | Rule::Linear { out, .. }
                    | Rule::Copy { out, .. }
                    | Rule::Convert { out, .. }
                    | Rule::CopyIndex { out, .. }
                    | Rule::Exact { out }
                    | Rule::Scalar { out, .. } => *out,
                };
                let b = self.kernel_after(rule, operands, out_before, frame);
                if matches!(b, Bound::Any) {
                    self.note(format!("{site}: the result of {kernel} is unbounded"));
                }
                self.set(out, b.clone());
                if let Some(r) = ret {
                    self.set(r, b);
                }
            }
            Some(Pending::Delegate { index, args, values }) => {
                match self.delegate_after(index, &args, &values, frame) {
                    Ok(outs) => {
                        for (v, b) in outs {
                            self.set(v, b);
                        }
                    }
                    Err(why) => {
                        self.note(format!("{site}: {why}"));
                        for v in args {
                            self.set(v, Bound::Any);
                        }
                    }
                }
            }
            Some(Pending::Unbounded { what, writes }) => {
                self.note(what);
                for v in writes {
                    self.set(v, Bound::Any);
                }
            }
            None => {}
        }
    }
}
