//! Invariants (semantics.md E) checked on one IR program: `check_program(&ir, &options)`, used
//! alike by tests, fuzzers and the `campaign` / `mutants` commands.
//!
//! I1 index validity; I2 delegate counts; I3 delegate identity (id, specs, blob, args) and blob
//! count; I4 init = delegates and destroy = init; I5 failure injection; I6 runtime(shared) =
//! runtime(unshared) = eager; I7 write/load/write and saved-JSON round trips; plus negative
//! checks: every single-index corruption is rejected at init with zero backend inits.
//! Reads the other stages; changes none of them.

pub mod campaign;
pub mod fuzz;
pub mod mutants;

use crate::backends::{default_backends, failing::FailingBackend};
use crate::emit::{emit, EmitOptions};
use crate::fault::Fault;
use crate::format::{self, LoadedProgram, WriteOptions};
use crate::ir::eval::{eval_method, sample_inputs, Val};
use crate::ir::{saved, Dtype, Graph, IrProgram, Node};
use crate::program::{DataLocation, Instruction, ScalarType};
use crate::runtime::check::{parse_scratch, SCRATCH_KEY};
use crate::runtime::value::{decode_f64, encode_f64};
use crate::runtime::{Backend, ErrorCode, HostTensor, HostValue, Runtime, RuntimeError, Trace};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Names of the invariants, as counted in reports.
pub const INVARIANTS: &[&str] = &["I1", "I2", "I3", "I4", "I5", "I6", "I7", "negative"];

/// How to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// A seeded bug to exhibit (mutation testing); `None` in normal use.
    pub fault: Option<Fault>,
    /// Chooses the delegate whose init fails for I5.
    pub inject_seed: u64,
    /// Seeds the method inputs for I6.
    pub input_seed: u64,
    /// Run the negative (corruption) checks.
    pub negative: bool,
    /// Allow `while_loop` in the emitter (P12).
    pub allow_while: bool,
    /// Instruction budget per execute.
    pub instruction_budget: u64,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            fault: None,
            inject_seed: 0,
            input_seed: 0,
            negative: true,
            allow_while: true,
            instruction_budget: 1_000_000,
        }
    }
}

/// One violated invariant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// Invariant name (see [`INVARIANTS`], or `emit` / `load` for stage failures).
    pub invariant: String,
    /// What was observed.
    pub detail: String,
}

/// Time spent per stage.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Timings {
    /// Emission.
    pub emit: Duration,
    /// `format::write`.
    pub write: Duration,
    /// `format::load`.
    pub load: Duration,
    /// Method init (checks + delegate init).
    pub init: Duration,
    /// Execution.
    pub execute: Duration,
    /// Eager interpreter.
    pub eager: Duration,
    /// Comparisons, round trips and negative checks.
    pub compare: Duration,
}

impl Timings {
    /// Adds another set of timings.
    pub fn add(&mut self, o: &Timings) {
        self.emit += o.emit;
        self.write += o.write;
        self.load += o.load;
        self.init += o.init;
        self.execute += o.execute;
        self.eager += o.eager;
        self.compare += o.compare;
    }
}

/// What one check found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// Times each invariant was checked.
    pub checked: BTreeMap<String, usize>,
    /// Violations.
    pub failures: Vec<Failure>,
    /// Time per stage.
    pub timings: Timings,
}

impl Report {
    /// Whether every invariant held.
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }
    fn check(&mut self, inv: &str, holds: bool, detail: impl FnOnce() -> String) {
        *self.checked.entry(inv.to_string()).or_default() += 1;
        if !holds {
            self.failures.push(Failure { invariant: inv.to_string(), detail: detail() });
        }
    }
    fn fail(&mut self, inv: &str, detail: String) {
        self.check(inv, false, || detail);
    }
}

/// Converts an IR value to the runtime's host form.
pub fn to_host(v: &Val) -> HostValue {
    match v {
        Val::Tensor(t) => {
            let dtype = match t.dtype {
                Dtype::F32 => ScalarType::FLOAT,
                Dtype::I64 => ScalarType::LONG,
                Dtype::Bool => ScalarType::BOOL,
            };
            HostValue::Tensor(HostTensor {
                dtype,
                sizes: t.shape.clone(),
                data: encode_f64(dtype, &t.data).unwrap_or_default(),
            })
        }
        Val::Int(i) => HostValue::Int(*i),
        Val::Bool(b) => HostValue::Bool(*b),
        Val::Double(d) => HostValue::Double(*d),
    }
}

/// Bitwise equality of host values, with any NaN equal to any NaN.
pub fn same_outputs(a: &[HostValue], b: &[HostValue]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (HostValue::Tensor(x), HostValue::Tensor(y)) if x.dtype == y.dtype && x.sizes == y.sizes => {
                x.data == y.data
                    || (x.dtype == ScalarType::FLOAT && {
                        let (fx, fy) = (
                            decode_f64(x.dtype, &x.data).unwrap_or_default(),
                            decode_f64(y.dtype, &y.data).unwrap_or_default(),
                        );
                        fx.len() == fy.len()
                            && fx.iter().zip(&fy).all(|(p, q)| p.to_bits() == q.to_bits() || p.is_nan() && q.is_nan())
                    })
            }
            (HostValue::Double(p), HostValue::Double(q)) => p.to_bits() == q.to_bits() || p.is_nan() && q.is_nan(),
            (x, y) => x == y,
        })
}

/// Module indices of the Call nodes of `g`, in emission order (pre-order, sub-graphs in place).
pub fn call_sequence(g: &Graph) -> Vec<usize> {
    let mut out = Vec::new();
    g.walk(0, &mut |n, _| {
        if let Node::Call { module, .. } = n {
            out.push(*module);
        }
    });
    out
}

/// Total nodes of a program (methods and modules, sub-graphs included).
pub fn node_count(p: &IrProgram) -> usize {
    let count = |g: &Graph| {
        let mut n = 0;
        g.walk(0, &mut |_, _| n += 1);
        n
    };
    p.methods.iter().map(|m| count(&m.graph)).sum::<usize>() + p.modules.iter().map(|m| count(&m.graph)).sum::<usize>()
}

fn runtime(fault: Option<Fault>, budget: u64) -> Runtime {
    let mut rt = crate::backends::default_runtime();
    rt.fault = fault;
    rt.instruction_budget = budget;
    rt
}

/// Runs one method: (outputs, trace summary after drop) or the error.
fn run_method(
    rt: &Runtime,
    loaded: &LoadedProgram<'_>,
    name: &str,
    inputs: &[HostValue],
    t: &mut Timings,
) -> Result<(Vec<HostValue>, crate::runtime::TraceSummary, usize), RuntimeError> {
    let trace = Trace::default();
    let start = Instant::now();
    let mut m = rt.load_method(loaded, name, None, &trace)?;
    let inits_after_load = trace.summary().inits;
    t.init += start.elapsed();
    let start = Instant::now();
    for (i, v) in inputs.iter().enumerate() {
        m.set_input(i, v)?;
    }
    let result = m.execute().and_then(|()| m.outputs());
    drop(m);
    t.execute += start.elapsed();
    Ok((result?, trace.summary(), inits_after_load))
}

/// Checks every invariant on `ir`.
pub fn check_program(ir: &IrProgram, opts: &CheckOptions) -> Report {
    let mut r = Report::default();
    let mut ir = ir.clone();
    if opts.fault == Some(Fault::ArgkeepOptedIn) {
        for m in ir.modules.iter_mut().filter(|m| m.backend == "argkeep") {
            m.share_handle_across_calls = true;
        }
    }
    // I7: saved-JSON round trip.
    let start = Instant::now();
    let text = saved::save(&ir);
    match saved::load(&text) {
        Ok(back) => {
            r.check("I7", back == ir, || "saved JSON load(save(p)) != p".into());
            r.check("I7", saved::save(&back) == text, || "saved JSON save∘load∘save != save".into());
        }
        Err(e) => r.fail("I7", format!("saved JSON does not load back: {e}")),
    }
    r.timings.compare += start.elapsed();

    // Eager outputs per method.
    let start = Instant::now();
    let mut eager: BTreeMap<String, (Vec<HostValue>, Vec<HostValue>)> = BTreeMap::new();
    for m in &ir.methods {
        let inputs = sample_inputs(&m.graph, opts.input_seed);
        match eval_method(&ir, &m.name, &inputs) {
            Ok(out) => {
                eager.insert(m.name.clone(), (inputs.iter().map(to_host).collect(), out.iter().map(to_host).collect()));
            }
            Err(e) => r.fail("I6", format!("eager interpreter failed on {}: {e}", m.name)),
        }
    }
    r.timings.eager += start.elapsed();

    let mut outputs: BTreeMap<(bool, String), Vec<HostValue>> = BTreeMap::new();
    for share in [true, false] {
        let eo = EmitOptions { share, delegate_segments: true, allow_while: opts.allow_while, fault: opts.fault };
        let start = Instant::now();
        let emitted = match emit(&ir, &eo) {
            Ok(e) => e,
            Err(e) => {
                r.fail("emit", format!("share={share}: {e}"));
                return r;
            }
        };
        r.timings.emit += start.elapsed();
        let start = Instant::now();
        let bytes = match emitted.to_bytes() {
            Ok(b) => b,
            Err(e) => {
                r.fail("I7", format!("share={share}: write failed: {e}"));
                return r;
            }
        };
        r.timings.write += start.elapsed();
        let start = Instant::now();
        let loaded = match format::load(&bytes) {
            Ok(l) => l,
            Err(e) => {
                r.fail("I7", format!("share={share}: emitted program does not load: {e}"));
                return r;
            }
        };
        r.timings.load += start.elapsed();
        let start = Instant::now();
        let again = format::write_loaded(&loaded, &WriteOptions::default());
        r.check("I7", again.as_ref().ok() == Some(&bytes), || format!("share={share}: write∘load∘write != write"));
        structure(&ir, &loaded, share, &mut r);
        r.timings.compare += start.elapsed();

        let rt = runtime(opts.fault, opts.instruction_budget);
        for (pi, plan) in loaded.program.plans().iter().enumerate() {
            let name = plan.name_str().to_string();
            let Some((inputs, _)) = eager.get(&name) else { continue };
            let n_delegates = plan.delegate_list().len();
            match run_method(&rt, &loaded, &name, inputs, &mut r.timings) {
                Ok((outs, s, inits)) => {
                    r.check("I4", inits == n_delegates, || {
                        format!("{name} share={share}: {inits} inits for {n_delegates} delegates")
                    });
                    r.check("I4", s.destroys == s.inits && s.bad_destroys.is_empty() && s.live_handles == 0, || {
                        format!(
                            "{name} share={share}: {} inits, {} destroys, bad {:?}",
                            s.inits, s.destroys, s.bad_destroys
                        )
                    });
                    outputs.insert((share, name.clone()), outs);
                }
                Err(e) => r.fail("I4", format!("{name} share={share}: method failed to load or run: {e}")),
            }
            if share && n_delegates > 0 {
                let start = Instant::now();
                inject(&loaded, &name, opts, n_delegates, &mut r);
                r.timings.init += start.elapsed();
            }
            if share && opts.negative {
                let start = Instant::now();
                negative(&loaded, pi, &rt, &mut r);
                r.timings.compare += start.elapsed();
            }
        }
    }
    // I6: shared = unshared = eager.
    let start = Instant::now();
    for (name, (_, want)) in &eager {
        let (a, b) = (outputs.get(&(true, name.clone())), outputs.get(&(false, name.clone())));
        if let (Some(a), Some(b)) = (a, b) {
            r.check("I6", same_outputs(a, b), || format!("{name}: shared and unshared outputs differ"));
            r.check("I6", same_outputs(a, want), || {
                format!("{name}: runtime outputs differ from the eager interpreter")
            });
        }
    }
    r.timings.compare += start.elapsed();
    r
}

/// I1, I2, I3 on one emitted, loaded program.
fn structure(ir: &IrProgram, loaded: &LoadedProgram<'_>, share: bool, r: &mut Report) {
    let violations = crate::runtime::check_program(loaded);
    r.check("I1", violations.is_empty(), || {
        format!("share={share}: {}", violations.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("; "))
    });
    let mut called: BTreeSet<usize> = BTreeSet::new();
    for plan in loaded.program.plans() {
        let name = plan.name_str();
        let Some(m) = ir.methods.iter().find(|m| m.name == name) else {
            r.fail("I2", format!("plan {name} has no method"));
            continue;
        };
        let calls = call_sequence(&m.graph);
        called.extend(calls.iter().copied());
        let sites = crate::runtime::check::call_site_counts(plan);
        r.check("I1", sites.iter().all(|c| *c > 0), || {
            format!("{name}: a BackendDelegate no DelegateCall references: {sites:?}")
        });
        // I2: delegates = sum over modules of (1 if shared else call sites).
        let mut per_module: BTreeMap<usize, usize> = BTreeMap::new();
        for c in &calls {
            *per_module.entry(*c).or_default() += 1;
        }
        let expected: usize = per_module
            .iter()
            .map(|(m, n)| {
                let lm = &ir.modules[*m];
                if share && lm.share_handle_across_calls && lm.scratch_specs.is_empty() {
                    1
                } else {
                    *n
                }
            })
            .sum();
        let got = plan.delegate_list().len();
        r.check("I2", got == expected, || format!("{name} share={share}: {got} BackendDelegates, expected {expected}"));
        // I3: each DelegateCall's delegate matches the module of that call.
        let dcalls: Vec<(i32, Vec<i32>)> = plan
            .chain_list()
            .iter()
            .flat_map(|c| c.instruction_list())
            .filter_map(|i| match i {
                Instruction::DelegateCall(d) => Some((d.delegate_index, d.args.clone().unwrap_or_default())),
                _ => None,
            })
            .collect();
        r.check("I3", dcalls.len() == calls.len(), || {
            format!("{name}: {} DelegateCalls for {} call sites", dcalls.len(), calls.len())
        });
        let pi = loaded.program.plans().iter().position(|p| p.name_str() == name).unwrap_or(0);
        for (k, ((di, args), module)) in dcalls.iter().zip(&calls).enumerate() {
            let lm = &ir.modules[*module];
            let Some(d) = usize::try_from(*di).ok().and_then(|i| plan.delegate_list().get(i)) else {
                r.fail("I3", format!("{name}: call {k} names delegate {di}"));
                continue;
            };
            let blob = loaded.delegate_blobs.get(pi).and_then(|b| b.get(*di as usize)).copied().flatten();
            let mut want_specs: Vec<(String, Vec<u8>)> =
                lm.compile_specs.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect();
            let specs: Vec<(String, Vec<u8>)> = d
                .compile_spec_list()
                .iter()
                .map(|c| (c.key.clone().unwrap_or_default(), c.value.as_ref().map(|v| v.0.clone()).unwrap_or_default()))
                .collect();
            if !lm.scratch_specs.is_empty() {
                let n = specs
                    .last()
                    .filter(|(k, _)| k == SCRATCH_KEY)
                    .and_then(|(_, v)| parse_scratch(v).ok())
                    .map_or(0, |s| s.len());
                r.check("I3", n == lm.scratch_specs.len(), || {
                    format!("{name}: call {k}: scratch entry missing or wrong")
                });
                want_specs.push(specs.last().cloned().unwrap_or_default());
            }
            let n_args = ir_module_arity(lm);
            r.check("I3", d.id.as_deref() == Some(lm.backend.as_str()), || {
                format!("{name}: call {k} of module {module}: delegate id {:?} != {}", d.id, lm.backend)
            });
            r.check("I3", specs == want_specs, || {
                format!("{name}: call {k} of module {module}: compile specs {specs:?} != {want_specs:?}")
            });
            r.check("I3", blob == Some(lm.processed.as_slice()), || {
                format!("{name}: call {k} of module {module}: blob differs from the module's processed bytes")
            });
            r.check("I3", args.len() == n_args, || {
                format!("{name}: call {k} of module {module}: {} args, expected {n_args}", args.len())
            });
        }
    }
    // I3: stored blobs = distinct processed bytes of the called modules.
    let distinct: BTreeSet<&[u8]> = called.iter().map(|m| ir.modules[*m].processed.as_slice()).collect();
    let mut stored: BTreeSet<(i8, u32)> = BTreeSet::new();
    for plan in loaded.program.plans() {
        for d in plan.delegate_list() {
            if let Some(p) = d.processed {
                stored.insert((p.location.0, p.index));
            }
        }
    }
    let segs = stored.iter().filter(|(l, _)| *l == DataLocation::SEGMENT.0).count();
    r.check("I3", segs == distinct.len(), || format!("{segs} blob segments for {} distinct blobs", distinct.len()));
}

fn ir_module_arity(m: &crate::ir::LoweredModule) -> usize {
    m.graph.inputs.len() + m.graph.outputs.len() + m.scratch_specs.len()
}

/// I5: an init failure at delegate k destroys delegates 0..k exactly once and returns its error.
fn inject(loaded: &LoadedProgram<'_>, name: &str, opts: &CheckOptions, n: usize, r: &mut Report) {
    let k = (opts.inject_seed % n as u64) as usize;
    let backends: Vec<Arc<dyn Backend>> = default_backends()
        .into_iter()
        .map(|inner| {
            Arc::new(FailingBackend { inner, fail_at: k, code: ErrorCode::DelegateMemoryAllocationFailed })
                as Arc<dyn Backend>
        })
        .collect();
    let mut rt = Runtime::with_backends(backends);
    rt.fault = opts.fault;
    let trace = Trace::default();
    let result = rt.load_method(loaded, name, None, &trace);
    let s = trace.summary();
    match result {
        Err(RuntimeError::InitFailed { delegate, code, .. }) => {
            r.check("I5", delegate == k && code == ErrorCode::DelegateMemoryAllocationFailed, || {
                format!("{name}: failure at {delegate} ({code:?}), injected at {k}")
            });
            r.check("I5", s.inits == k && s.destroys == k && s.bad_destroys.is_empty(), || {
                format!("{name}: injected at {k}: {} inits, {} destroys, bad {:?}", s.inits, s.destroys, s.bad_destroys)
            });
        }
        Err(e) => r.fail("I5", format!("{name}: injected at {k}, got {e}")),
        Ok(_) => r.fail("I5", format!("{name}: injected failure at {k} was not reported")),
    }
}

/// One way to damage an instruction.
type Corruption = Box<dyn Fn(&mut Instruction)>;

/// Every single-index corruption of plan `pi` must be rejected at init with zero backend inits.
fn negative(loaded: &LoadedProgram<'_>, pi: usize, rt: &Runtime, r: &mut Report) {
    let plan = &loaded.program.plans()[pi];
    let name = plan.name_str().to_string();
    let (nv, no, nd) =
        (plan.value_list().len() as i32, plan.operator_list().len() as i32, plan.delegate_list().len() as i32);
    let mut cases: Vec<(String, Corruption)> = Vec::new();
    let chain = plan.chain_list().first().map(|c| c.instruction_list().to_vec()).unwrap_or_default();
    let len = chain.len() as i32;
    let scratch_delegates: Vec<i32> = plan
        .delegate_list()
        .iter()
        .enumerate()
        .filter(|(_, d)| d.compile_spec_list().iter().any(|c| c.key.as_deref() == Some(SCRATCH_KEY)))
        .map(|(i, _)| i as i32)
        .collect();
    for (ii, ins) in chain.iter().enumerate() {
        let at = format!("instruction {ii}");
        match ins {
            Instruction::KernelCall(k) => {
                cases.push((
                    format!("{at}: op_index {no}"),
                    Box::new(move |i| {
                        if let Instruction::KernelCall(k) = i {
                            k.op_index = no
                        }
                    }),
                ));
                for j in 0..k.args.as_ref().map_or(0, Vec::len) {
                    cases.push((
                        format!("{at}: args[{j}] {nv}"),
                        Box::new(move |i| {
                            if let Instruction::KernelCall(k) = i {
                                if let Some(a) = k.args.as_mut() {
                                    a[j] = nv
                                }
                            }
                        }),
                    ));
                }
            }
            Instruction::DelegateCall(d) => {
                for bad in [nd, -1] {
                    cases.push((
                        format!("{at}: delegate_index {bad}"),
                        Box::new(move |i| {
                            if let Instruction::DelegateCall(d) = i {
                                d.delegate_index = bad
                            }
                        }),
                    ));
                }
                for j in 0..d.args.as_ref().map_or(0, Vec::len) {
                    cases.push((
                        format!("{at}: args[{j}] {nv}"),
                        Box::new(move |i| {
                            if let Instruction::DelegateCall(d) = i {
                                if let Some(a) = d.args.as_mut() {
                                    a[j] = nv
                                }
                            }
                        }),
                    ));
                }
                // Point this call at a scratch delegate it does not own: two call sites (SH10).
                for &s in scratch_delegates.iter().filter(|s| **s != d.delegate_index) {
                    cases.push((
                        format!("{at}: delegate_index -> scratch delegate {s}"),
                        Box::new(move |i| {
                            if let Instruction::DelegateCall(d) = i {
                                d.delegate_index = s
                            }
                        }),
                    ));
                }
            }
            Instruction::MoveCall(_) => {
                cases.push((
                    format!("{at}: move_from {nv}"),
                    Box::new(move |i| {
                        if let Instruction::MoveCall(m) = i {
                            m.move_from = nv
                        }
                    }),
                ));
                cases.push((
                    format!("{at}: move_to -1"),
                    Box::new(move |i| {
                        if let Instruction::MoveCall(m) = i {
                            m.move_to = -1
                        }
                    }),
                ));
            }
            Instruction::JumpFalseCall(_) => {
                for bad in [len + 1, -1] {
                    cases.push((
                        format!("{at}: destination {bad}"),
                        Box::new(move |i| {
                            if let Instruction::JumpFalseCall(j) = i {
                                j.destination_instruction = bad
                            }
                        }),
                    ));
                }
                cases.push((
                    format!("{at}: cond_value_index {nv}"),
                    Box::new(move |i| {
                        if let Instruction::JumpFalseCall(j) = i {
                            j.cond_value_index = nv
                        }
                    }),
                ));
            }
            Instruction::FreeCall(_) => {
                cases.push((
                    format!("{at}: value_index {nv}"),
                    Box::new(move |i| {
                        if let Instruction::FreeCall(f) = i {
                            f.value_index = nv
                        }
                    }),
                ));
            }
        }
        for (what, edit) in cases.drain(..) {
            let mut corrupt = loaded.clone();
            let Some(target) = corrupt
                .program
                .execution_plan
                .as_mut()
                .and_then(|p| p.get_mut(pi))
                .and_then(|p| p.chains.as_mut())
                .and_then(|c| c.get_mut(0))
                .and_then(|c| c.instructions.as_mut())
                .and_then(|i| i.get_mut(ii))
            else {
                continue;
            };
            edit(target);
            let trace = Trace::default();
            let result = rt.load_method(&corrupt, &name, None, &trace);
            let inits = trace.summary().inits;
            r.check("negative", matches!(result, Err(RuntimeError::Check(_))) && inits == 0, || {
                format!(
                    "{name}: {what}: {} with {inits} backend inits",
                    match &result {
                        Ok(_) => "accepted".to_string(),
                        Err(e) => format!("rejected late ({e})"),
                    }
                )
            });
        }
    }
}
