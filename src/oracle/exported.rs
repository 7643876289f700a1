//! The judges of a program another emitter made (an exporter: ExecuTorch's `to_executorch`, or the
//! stand-in) from a saved program, under the rules that emitter announced: I1 (it loads, every
//! index is valid, every init-time check passes), I2 and I3 adapted (delegates per method, each
//! call site's delegate, which sites share one, ids, compile specs, blob dedup by bytes), I4 (the
//! backends see one init per delegate and one execute per eager call), and I6 (outputs equal to
//! the eager interpreter's under the tolerance model, and to the exporter's own eager outputs
//! under the allowance a different framework's kernels need).
//! Sites the export may drop (a call whose results are dead, or used only for a static size, or
//! under a cond whose predicate is known at export) may be absent; every other site must be there.
//! May not touch: the exporter (it judges what came back), the emitter.

use super::invariant::Invariant;
use super::lifecycle::{self, Rig};
use super::report::{CheckOptions, Report};
use super::structure::{bad_indices, delegate_call_sites, delegate_calls, shares};
use super::values::{self, Verdict, encode_all};
use crate::emit::{Rules, ShareScope, Sharing};
use crate::format::{self, LoadedProgram};
use crate::generator::Generated;
use crate::ir::bound::Reference;
use crate::ir::eval::{Run, run_method_against};
use crate::ir::{Graph, IrProgram, LoweredModule, Node, Op, Ref, ValueType};
use crate::program::SCRATCH_KEY;
use crate::runtime::HostValue;
use std::collections::{BTreeMap, BTreeSet};

/// One call site of a method, in pre-order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallSite {
    /// The lowered module it calls.
    pub module: usize,
    /// The graph body it stands in (0: the method's top level; each sub-graph its own number).
    pub body: usize,
    /// Whether every export must emit it (its results reach an output, and nothing about it is
    /// known at export).
    pub required: bool,
}

/// The call sites of `g` (a method body) in pre-order.
pub fn call_sites(g: &Graph, modules: &[LoweredModule]) -> Vec<CallSite> {
    let mut out = Vec::new();
    let mut bodies = 0;
    walk(g, modules, &vec![true; g.outputs.len()], 0, &mut bodies, true, &mut out);
    out
}

/// Outputs of node `n`.
fn outputs_of(n: &Node, modules: &[LoweredModule]) -> usize {
    n.output_count(modules)
}

/// Which values of `g` are live given which outputs are (`live_out`), and which are static
/// scalars (sizes of static dimensions, and Int arithmetic on them: known at export); with each
/// node's first ref, and which of `g`'s inputs are live.
fn liveness(g: &Graph, modules: &[LoweredModule], live_out: &[bool]) -> Liveness {
    let first = g.constants.len() + g.inputs.len();
    let mut base = Vec::with_capacity(g.nodes.len());
    let mut next = first;
    for n in &g.nodes {
        base.push(next);
        next += outputs_of(n, modules);
    }
    let types = crate::ir::infer::graph_types(g, modules, "exported").unwrap_or_default();
    // Static scalars, forwards.
    let mut fixed = vec![false; next];
    for (i, n) in g.nodes.iter().enumerate() {
        if let Node::Op { op, args } = n {
            fixed[base[i]] = match op {
                Op::SymSize { dim } => args.first().and_then(|a| types.get(*a)).is_some_and(|t| match t {
                    ValueType::Tensor { dynamic, shape, .. } => !dynamic || (*dim != 0 && !shape.is_empty()),
                    _ => false,
                }),
                op if op.kind().on_int_scalars() => args.iter().all(|a| fixed.get(*a).copied().unwrap_or(false)),
                _ => false,
            };
        }
    }
    // Live values, backwards; a static scalar's operands are not made live by it, nor an
    // operand of a control-flow node that no body reads.
    let mut live = vec![false; next];
    for (o, l) in g.outputs.iter().zip(live_out) {
        if *l && *o < live.len() {
            live[*o] = true;
        }
    }
    for (i, n) in g.nodes.iter().enumerate().rev() {
        let k = outputs_of(n, modules);
        let out_live: Vec<bool> = (base[i]..base[i] + k).map(|r| live[r]).collect();
        if !out_live.iter().any(|x| *x) || fixed[base[i]] {
            continue;
        }
        let mut mark = |refs: &[Ref], used: &[bool]| {
            for (r, u) in refs.iter().zip(used.iter().chain(std::iter::repeat(&true))) {
                if let Some(x) = live.get_mut(*r).filter(|_| *u) {
                    *x = true;
                }
            }
        };
        match n {
            Node::Op { args, .. } | Node::Call { args, .. } => mark(args, &[]),
            Node::Cond { pred, operands, then_graph, else_graph } => {
                let a = liveness(then_graph, modules, &out_live).inputs;
                let b = liveness(else_graph, modules, &out_live).inputs;
                let used: Vec<bool> = a.iter().zip(&b).map(|(x, y)| *x || *y).collect();
                mark(operands, &used);
                mark(&[*pred], &[]);
            }
            Node::Map { xs, args, body } => {
                let used = liveness(body, modules, &[true]).inputs;
                mark(&[*xs], &[]);
                mark(args, used.get(1..).unwrap_or(&[]));
            }
            Node::Scan { init, xs, .. } => {
                mark(init, &[]);
                mark(xs, &[]);
            }
            Node::While { carried, .. } => mark(carried, &[]),
        }
    }
    let inputs = (0..g.inputs.len()).map(|i| live[g.constants.len() + i]).collect();
    Liveness { live, fixed, base, inputs }
}

/// What [`liveness`] finds of one graph.
struct Liveness {
    /// Per ref: live.
    live: Vec<bool>,
    /// Per ref: a static scalar.
    fixed: Vec<bool>,
    /// Per node: its first ref.
    base: Vec<usize>,
    /// Per graph input: live.
    inputs: Vec<bool>,
}

/// Adds the call sites of `g` (whose outputs `live_out` are live) to `out`; `required`: the
/// graph runs whenever its parent does and nothing about it is known at export.
fn walk(
    g: &Graph,
    modules: &[LoweredModule],
    live_out: &[bool],
    body: usize,
    bodies: &mut usize,
    required: bool,
    out: &mut Vec<CallSite>,
) {
    let Liveness { live, fixed, base, .. } = liveness(g, modules, live_out);
    for (i, n) in g.nodes.iter().enumerate() {
        let k = outputs_of(n, modules);
        let out_live: Vec<bool> = (base[i]..base[i] + k).map(|r| live[r]).collect();
        let any = out_live.iter().any(|x| *x);
        let mut sub = |g: &Graph, live_out: &[bool], required: bool, out: &mut Vec<CallSite>| {
            *bodies += 1;
            let b = *bodies;
            walk(g, modules, live_out, b, bodies, required, out);
        };
        match n {
            Node::Op { .. } => {}
            Node::Call { module, .. } => out.push(CallSite { module: *module, body, required: required && any }),
            Node::Cond { pred, then_graph, else_graph, .. } => {
                // A predicate known at export keeps only the branch it takes.
                let decided = fixed.get(*pred).copied().unwrap_or(false);
                sub(then_graph, &out_live, required && any && !decided, out);
                sub(else_graph, &out_live, required && any && !decided, out);
            }
            Node::Map { body: g, .. } => sub(g, &[any], required && any, out),
            Node::Scan { body: g, .. } => sub(g, &vec![any; g.outputs.len()], required && any, out),
            Node::While { cond, body: g, .. } => {
                sub(cond, &[any], required && any, out);
                sub(g, &vec![any; g.outputs.len()], required && any, out);
            }
        }
    }
}

/// The sharing key of a site under `rules`: sites with one key share one delegate.
fn key(site: &CallSite, index: usize, ir: &IrProgram, rules: &Rules) -> (usize, usize, usize) {
    let opted_in = rules.sharing == Sharing::OptIn
        && ir
            .modules
            .get(site.module)
            .is_some_and(|m| shares(m, true) && (rules.scratch || m.scratch_specs.is_empty()));
    match (opted_in, rules.sharing_scope) {
        (true, ShareScope::Method) => (site.module, 0, 0),
        (true, ShareScope::Body) => (site.module, site.body, 0),
        (false, _) => (site.module, usize::MAX, index),
    }
}

/// What `rules` imply for method `name` given the sites the exporter emitted (`reply`): the
/// delegate count, and each site's delegate (numbered by first use; `None` where not emitted).
pub fn expected_sites(
    ir: &IrProgram,
    name: &str,
    rules: &Rules,
    reply: &[Option<usize>],
) -> (usize, Vec<Option<usize>>) {
    let Some(m) = ir.methods.iter().find(|m| m.name == name) else { return (0, vec![]) };
    let sites = call_sites(&m.graph, &ir.modules);
    let mut numbers: BTreeMap<(usize, usize, usize), usize> = BTreeMap::new();
    let out = sites
        .iter()
        .enumerate()
        .map(|(k, s)| {
            reply.get(k).copied().flatten().map(|_| {
                let next = numbers.len();
                *numbers.entry(key(s, k, ir, rules)).or_insert(next)
            })
        })
        .collect();
    (numbers.len(), out)
}

/// The kernels a loaded program calls, by `name.overload`.
pub fn kernels(loaded: &LoadedProgram<'_>) -> BTreeSet<String> {
    loaded.program.plans().iter().flat_map(|p| p.operator_list().iter().map(|o| o.qualified())).collect()
}

/// What checking one exported program found.
#[derive(Clone, Debug, Default)]
pub struct ExportedVerdict {
    /// Checks performed and violations.
    pub report: Report,
    /// What the runtime here lacks to run it (`kernel:NAME`, `backend:ID`); its runs are skipped.
    pub unsupported: Vec<String>,
    /// The kernels it calls.
    pub kernels: BTreeSet<String>,
    /// Delegates per method.
    pub delegates: BTreeMap<String, usize>,
    /// Distinct stored blobs.
    pub blobs: usize,
    /// Outputs: method -> (runtime here against the eager interpreter, against the exporter's).
    pub verdicts: BTreeMap<String, (Verdict, Verdict)>,
}

/// The structure an exported program must have: I1, I2 and I3 under `rules`.
pub fn check_structure(
    ir: &IrProgram,
    loaded: &LoadedProgram<'_>,
    rules: &Rules,
    reply_sites: &BTreeMap<String, Vec<Option<usize>>>,
    r: &mut Report,
) {
    let plans = loaded.program.plans();
    let mut names: Vec<&str> = ir.methods.iter().map(|m| m.name.as_str()).collect();
    names.sort_unstable();
    let mut got: Vec<&str> = plans.iter().map(|p| p.name_str()).collect();
    got.sort_unstable();
    r.check(Invariant::I1, got == names, || format!("plans {got:?}, methods {names:?}"));
    for (pi, plan) in plans.iter().enumerate() {
        let name = plan.name_str();
        let bad = bad_indices(plan);
        r.check(Invariant::I1, bad.is_empty(), || format!("{name}: {}", bad.join("; ")));
        let referenced = delegate_call_sites(plan);
        r.check(Invariant::I1, referenced.iter().all(|c| *c > 0), || {
            format!("{name}: a BackendDelegate no DelegateCall references: {referenced:?}")
        });
        let Some(m) = ir.methods.iter().find(|m| m.name == name) else { continue };
        let sites = call_sites(&m.graph, &ir.modules);
        let empty = Vec::new();
        let reply = reply_sites.get(name).unwrap_or(&empty);
        if !r_check_len(r, name, reply.len(), sites.len()) {
            continue;
        }
        // Every site every export must emit is there.
        let dropped: Vec<usize> = sites
            .iter()
            .zip(reply)
            .enumerate()
            .filter(|(_, (s, d))| s.required && d.is_none())
            .map(|(k, _)| k)
            .collect();
        r.check(Invariant::I3, dropped.is_empty(), || {
            format!("{name}: call sites {dropped:?} are live but were not emitted")
        });
        // The exporter's site -> delegate map is the program's DelegateCalls, in order.
        let emitted: Vec<(usize, usize)> = reply.iter().enumerate().filter_map(|(k, d)| d.map(|d| (k, d))).collect();
        let calls: Vec<i64> = delegate_calls(plan).iter().map(|(d, _)| i64::from(*d)).collect();
        let said: Vec<i64> = emitted.iter().map(|(_, d)| *d as i64).collect();
        r.check(Invariant::I3, said == calls, || {
            format!("{name}: the exporter's call sites name delegates {said:?}, the program's DelegateCalls {calls:?}")
        });
        // I2: delegates as the rules imply for the emitted sites; sites share one exactly when
        // their keys are equal.
        let keys: BTreeMap<usize, (usize, usize, usize)> =
            emitted.iter().map(|(k, _)| (*k, key(&sites[*k], *k, ir, rules))).collect();
        let want = keys.values().collect::<BTreeSet<_>>().len();
        let have = plan.delegate_list().len();
        r.check(Invariant::I2, have == want, || {
            format!("{name}: {have} BackendDelegates, the rules imply {want} for {} emitted call sites", emitted.len())
        });
        for (i, (k1, d1)) in emitted.iter().enumerate() {
            for (k2, d2) in &emitted[i + 1..] {
                let same_key = keys[k1] == keys[k2];
                r.check(Invariant::I2, (d1 == d2) == same_key, || {
                    format!(
                        "{name}: call sites {k1} and {k2} (modules {}, {}; bodies {}, {}) use delegates {d1} and {d2}; the rules {} them",
                        sites[*k1].module,
                        sites[*k2].module,
                        sites[*k1].body,
                        sites[*k2].body,
                        if same_key { "share" } else { "do not share" }
                    )
                });
            }
        }
        // I3: each site's delegate has its module's id and compile specs; a blob ptecheck's own
        // backends read is the module's processed bytes.
        for (k, di) in &emitted {
            let site = &sites[*k];
            let (Some(lm), Some(d)) = (ir.modules.get(site.module), plan.delegate_list().get(*di)) else {
                r.fail(Invariant::I3, format!("{name}: call site {k} names delegate {di}, which does not exist"));
                continue;
            };
            r.check(Invariant::I3, d.id.as_deref() == Some(lm.backend.as_str()), || {
                format!(
                    "{name}: call site {k} of module {}: delegate id {:?}, module backend {}",
                    site.module, d.id, lm.backend
                )
            });
            let specs: Vec<(String, Vec<u8>)> = d
                .compile_spec_list()
                .iter()
                .filter(|c| c.key.as_deref() != Some(SCRATCH_KEY))
                .map(|c| (c.key.clone().unwrap_or_default(), c.value.as_ref().map(|v| v.0.clone()).unwrap_or_default()))
                .collect();
            let want: Vec<(String, Vec<u8>)> = lm.compile_specs.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect();
            r.check(Invariant::I3, specs == want, || {
                format!("{name}: call site {k} of module {}: compile specs {specs:?}, module's {want:?}", site.module)
            });
            let has_scratch = d.compile_spec_list().iter().any(|c| c.key.as_deref() == Some(SCRATCH_KEY));
            let want_scratch = rules.scratch && !lm.scratch_specs.is_empty();
            r.check(Invariant::I3, has_scratch == want_scratch, || {
                format!("{name}: call site {k}: a scratch entry {has_scratch}, the rules say {want_scratch}")
            });
            if carries_processed(&lm.backend) {
                let blob = loaded.delegate_blobs.get(pi).and_then(|b| b.get(*di)).copied().flatten();
                r.check(Invariant::I3, blob == Some(lm.processed.as_slice()), || {
                    format!(
                        "{name}: call site {k} of module {}: blob differs from the module's processed bytes",
                        site.module
                    )
                });
            }
        }
    }
    check_blob_dedup(loaded, r);
}

fn r_check_len(r: &mut Report, name: &str, got: usize, want: usize) -> bool {
    r.check(Invariant::I3, got == want, || {
        format!("{name}: the exporter names {got} call sites, the method has {want}")
    });
    got == want
}

/// Whether a backend's blob is the module's processed bytes as the saved program holds them:
/// ptecheck's own backends, and `BackendWithCompilerDemo`, whose preprocess ptecheck writes
/// byte for byte (DB3). XNNPACK's preprocess makes its own.
fn carries_processed(backend: &str) -> bool {
    crate::backends::graph::Flavor::from_id(backend).is_some()
        || backend == crate::backends::multifn::ID
        || backend == crate::backends::compiler_demo::ID
}

/// Blobs deduplicated by bytes, program-wide: delegates with equal bytes name one stored blob,
/// and no two stored blobs are equal.
fn check_blob_dedup(loaded: &LoadedProgram<'_>, r: &mut Report) {
    let mut by_bytes: BTreeMap<&[u8], BTreeSet<(i8, u32)>> = BTreeMap::new();
    for (pi, plan) in loaded.program.plans().iter().enumerate() {
        for (di, d) in plan.delegate_list().iter().enumerate() {
            let (Some(p), Some(Some(bytes))) = (d.processed, loaded.delegate_blobs.get(pi).and_then(|b| b.get(di)))
            else {
                continue;
            };
            by_bytes.entry(bytes).or_default().insert((p.location.0, p.index));
        }
    }
    let twice: Vec<String> = by_bytes
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .map(|(b, at)| format!("a blob of {} bytes stored {} times ({at:?})", b.len(), at.len()))
        .collect();
    r.check(Invariant::I3, twice.is_empty(), || format!("blobs not deduplicated by bytes: {}", twice.join("; ")))
}

/// The eager runs of `case` against the interpreter's own kernels and against a framework's.
/// A method's eager run against the kernels and against a framework.
type EagerPair = (Result<Run, String>, Result<Run, String>);

fn eager(case: &Generated) -> BTreeMap<String, EagerPair> {
    case.program
        .methods
        .iter()
        .map(|m| {
            let inputs = case.inputs.get(&m.name).map_or(&[][..], Vec::as_slice);
            let run =
                |reference| run_method_against(&case.program, &m.name, inputs, reference).map_err(|e| e.to_string());
            (m.name.clone(), (run(Reference::Kernels), run(Reference::Framework)))
        })
        .collect()
}

/// Every check of an exported program: it loads; the structure under `rules` (the exporter's
/// `reply_sites`); unless the runtime here lacks a kernel or backend of it, every init-time
/// check, one init per delegate and one execute per eager call counted by the backends, and the
/// outputs against the eager interpreter's (`Reference::Kernels`) and against the exporter's own
/// eager outputs `framework` (`Reference::Framework`).
pub fn check_exported(
    case: &Generated,
    rules: &Rules,
    pte: &[u8],
    reply_sites: &BTreeMap<String, Vec<Option<usize>>>,
    framework: &BTreeMap<String, Vec<HostValue>>,
    opts: &CheckOptions,
) -> ExportedVerdict {
    let mut v = ExportedVerdict::default();
    let r = &mut v.report;
    let mut loaded = match format::load(pte) {
        Ok(l) => l,
        Err(e) => {
            r.fail(Invariant::I1, format!("the exported program does not load: {e}"));
            return v;
        }
    };
    r.held(Invariant::I1, 1);
    // I7: the writer reproduces the other emitter's serialiser byte for byte.
    let again = format::write_loaded(&loaded, &format::WriteOptions::default());
    r.check(Invariant::I7, again.as_deref().is_ok_and(|b| b == pte), || match &again {
        Ok(b) => format!("written again it is {} bytes, not the same {}", b.len(), pte.len()),
        Err(e) => format!("it cannot be written again: {e}"),
    });
    check_structure(&case.program, &loaded, rules, reply_sites, r);
    v.kernels = kernels(&loaded);
    v.delegates = loaded.program.plans().iter().map(|p| (p.name_str().to_string(), p.delegate_list().len())).collect();
    v.blobs = loaded.delegate_blobs.iter().flatten().flatten().copied().collect::<BTreeSet<_>>().len();
    let rig = Rig::new(opts, false, None);
    // One pass of the init-time checks: what the runtime here lacks, then the rules broken.
    let verdict = crate::runtime::verdict::check_program(&loaded, &rig.rt.registry.ids());
    v.unsupported = verdict.unsupported;
    if !v.unsupported.is_empty() {
        return v;
    }
    r.check(Invariant::I1, verdict.broken.is_empty(), || {
        let shown: Vec<String> = verdict.broken.iter().take(5).map(|(e, code)| format!("{e} [{code:?}]")).collect();
        format!("init-time checks refuse it: {}", shown.join("; "))
    });
    // I5 and the negative checks, as on the reference emitter's programs: an injected init
    // failure is cleaned up, and every corruption is rejected at init (one end to end per plan).
    for pi in 0..loaded.program.plans().len() {
        let (name, n) = {
            let plan = &loaded.program.plans()[pi];
            (plan.name_str().to_string(), plan.delegate_list().len())
        };
        if n > 0 {
            lifecycle::check_injection(opts, &loaded, &name, n, false, r);
        }
        let sample = [opts.inject_seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((pi as u64) << 1)];
        let done = super::negative::check(&mut loaded, pi, &rig, Some(&sample), &name, r);
        r.negative += done;
    }
    for (name, (ours, theirs)) in eager(case) {
        let (Ok(ours), Ok(theirs)) = (ours, theirs) else {
            r.fail(Invariant::I6, format!("{name}: the eager interpreter fails"));
            continue;
        };
        let inputs = encode_all(case.inputs.get(&name).map_or(&[][..], Vec::as_slice));
        let run = lifecycle::run_method(&rig, &loaded, &name, &inputs, &mut r.timings);
        let got = match &run.result {
            Ok(o) => o.clone(),
            Err(e) => {
                r.fail(Invariant::I6, format!("{name}: the exported method fails here: {e}"));
                continue;
            }
        };
        check_counts(&name, &loaded, &run, reply_sites, &ours, r);
        let want = encode_all(&ours.outputs);
        let kernels = values::verdict_of(&want, &ours.bounds, &got);
        r.check(Invariant::I6, kernels != Verdict::Mismatch, || {
            format!(
                "{name}: outputs differ from the eager interpreter's: {}",
                values::bounded_difference(&want, &ours.bounds, &got).unwrap_or_default()
            )
        });
        let theirs_out = framework.get(&name).cloned().unwrap_or_default();
        let framework_verdict = values::verdict_of_ignoring_zero_signs(&theirs_out, &theirs.bounds, &got);
        r.check(Invariant::I6, framework_verdict != Verdict::Mismatch, || {
            format!(
                "{name}: outputs differ from the exporter's eager outputs: {}",
                values::bounded_difference(&theirs_out, &theirs.bounds, &got).unwrap_or_default()
            )
        });
        v.verdicts.insert(name, (kernels, framework_verdict));
    }
    v
}

/// I4 on one run of an exported method: one init per delegate in order, each handle destroyed
/// once in ascending order, and (when no decision may go the other way) one execute per eager
/// call at the DelegateCall its site maps to.
fn check_counts(
    name: &str,
    loaded: &LoadedProgram<'_>,
    run: &lifecycle::MethodRun,
    reply_sites: &BTreeMap<String, Vec<Option<usize>>>,
    eager: &Run,
    r: &mut Report,
) {
    let delegates = loaded.program.plan(name).map_or(0, |p| p.delegate_list().len());
    let inits = lifecycle::inits(&run.events);
    r.check(Invariant::I4, inits == (0..delegates).collect::<Vec<_>>() && run.inits_at_load == delegates, || {
        format!(
            "{name}: backends saw inits of delegates {inits:?} ({} at load) for {delegates} delegates",
            run.inits_at_load
        )
    });
    lifecycle::destroyed_once_ascending(&run.events, name, Invariant::I4, r);
    if eager.decided_calls != eager.calls.len() {
        return;
    }
    let Some(sites) = reply_sites.get(name) else { return };
    // Emitted sites in pre-order are the DelegateCalls in chain order.
    let call_of: BTreeMap<usize, usize> = sites
        .iter()
        .enumerate()
        .filter(|(_, d)| d.is_some())
        .map(|(k, _)| k)
        .enumerate()
        .map(|(c, k)| (k, c))
        .collect();
    let mut want: BTreeMap<usize, usize> = BTreeMap::new();
    for c in &eager.calls {
        if let Some(k) = call_of.get(&c.site) {
            *want.entry(*k).or_default() += 1;
        }
    }
    let got = lifecycle::executes_per_call(loaded, name, &run.events);
    r.check(Invariant::I4, got == want, || {
        format!("{name}: executes per DelegateCall {got:?}, the eager run's calls imply {want:?}")
    });
}
